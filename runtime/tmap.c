/* tmap.c — the TMA tensor maps a kernel takes after its own parameters
 * (KilnKernelInfo.tmaps, compiled with KilnCompileOptions.tma): evaluated
 * from the launch's arguments, checked, encoded with cuTensorMapEncodeTiled
 * (resolved from the dlopen'ed driver; absent before CUDA 12: a clear error)
 * and cached per kernel while the inputs stay the same.
 *
 * What a recipe says (plain data, so the runtime needs no compiler header):
 * the global address is pointer argument `base_param`; each dim and stride is
 * (param >= 0 ? that integer argument : 1) * k. The compiler chose dims that
 * ARE the program's mask bounds (TMA zero-fills outside them), so they are
 * never rounded or clamped here: a value TMA cannot encode is an error of the
 * launch (KILN_ERR_ARGS, naming the kernel, the map and the rule), never a
 * silently different map. Rules: address 16-byte aligned, dims up to 2^31
 * (CUDA documents 2^32, but on the H200 a copy through a map with an extent of
 * 2^32 - 1 or 2^32 faults with CUDA_ERROR_ILLEGAL_INSTRUCTION; coordinates are
 * i32, so 2^31 bounds nothing), strides multiples of 16 bytes below 2^40. An extent <= 0 (M = 0, no
 * keys) masks every element: the map then reads a zeroed buffer with extents
 * of 1, where every coordinate but 0 is outside (zeros too).
 *
 * Ranks 2 to 5 (attention's K: {d, key, head, batch}, extents 2^31 where the
 * program has no bound). The strides of an empty map are not checked: it reads
 * the zero buffer (an empty K of a [b, h, 0, d] tensor has batch stride 0). Example: matmul_tc_f16 (A, B, C, M) with tma: map 0 = {A, dims {1024, M},
 * stride 2048 B, box {64, 128}}; launched with M = 1000 it encodes dims
 * {1024, 1000}, and rows 1000..1023 of the last tile read as zeros.
 */
#include "cuda_loader.h"
#include "rt_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool rt_tmap_base_ok(unsigned long long addr) { return addr % 16 == 0; }

bool rt_tmap_stride_ok(long long n, int elem_bytes)
{
    /* n < 2^40 / elem_bytes first: the product of a huge n would overflow */
    return elem_bytes > 0 && n > 0 && n < (1LL << 40) / elem_bytes && n * elem_bytes % 16 == 0;
}

static bool value_of(const KilnTmapValue *v, const KilnArg *args, int nargs, long long *out)
{
    if (v->param < 0) {
        *out = v->k;
        return true;
    }
    if (v->param >= nargs) return false;
    const KilnArg *a = &args[v->param];
    if (a->kind == KILN_PARAM_PTR || a->kind == KILN_PARAM_F32 || a->kind == KILN_PARAM_F64 ||
        a->kind == KILN_PARAM_F16 || a->kind == KILN_PARAM_BF16)
        return false;
    long long x = a->kind == KILN_PARAM_U32 || a->kind == KILN_PARAM_U64 || a->kind == KILN_PARAM_U8 ||
                  a->kind == KILN_PARAM_U16 ? (long long)a->v.u : (long long)a->v.i;
    *out = x * v->k;
    return true;
}

KilnStatus rt_tmap_eval(const KilnKernelInfo *info, int m, const KilnArg *args, int nargs, RtTmapArgs *out)
{
    const KilnTensorMapInfo *t = &info->tmaps[m];
    memset(out, 0, sizeof *out);
    if (t->rank < 1 || t->rank > 5 || t->base_param < 0 || t->base_param >= nargs ||
        args[t->base_param].kind != KILN_PARAM_PTR)
        return kiln_set_error(KILN_ERR_INTERNAL, "internal error (tensor map): kernel %s, map %d: a recipe of rank %d "
                              "with base argument %d", info->name, m, t->rank, t->base_param + 1);
    const char *base = info->params && t->base_param < info->nparams ? info->params[t->base_param].name : "?";
    out->rank = t->rank;
    out->addr = args[t->base_param].v.ptr;
    out->elem_bytes = t->elem_bytes;
    out->is_bf16 = t->is_bf16;
    if (!rt_tmap_base_ok(out->addr))
        return kiln_set_error(KILN_ERR_ARGS, "kernel %s: argument %d (%s) = 0x%llx is not 16-byte aligned, which its "
                              "TMA tensor map needs (compiled with tma); pass an aligned pointer or compile without tma",
                              info->name, t->base_param + 1, base, (unsigned long long)out->addr);
    for (int i = 0; i < nargs && i < 64; i++) {
        if (!(t->nonneg_params >> i & 1)) continue;
        long long v;
        KilnTmapValue one = {i, 1};
        if (value_of(&one, args, nargs, &v) && v < 0)
            return kiln_set_error(KILN_ERR_ARGS, "kernel %s: argument %d (%s) = %lld is negative; the tile coordinates "
                                  "of its TMA copies (compiled with tma) are derived from it and must not be: "
                                  "compile without tma", info->name, i + 1,
                                  info->params && i < info->nparams ? info->params[i].name : "?", v);
    }
    for (int d = 0; d < t->rank; d++) {
        long long v;
        if (!value_of(&t->dims[d], args, nargs, &v))
            return kiln_set_error(KILN_ERR_INTERNAL, "internal error (tensor map): kernel %s, map %d: dim %d reads "
                                  "argument %d, not an integer", info->name, m, d, t->dims[d].param + 1);
        if (v > (1LL << 31))
            return kiln_set_error(KILN_ERR_ARGS, "kernel %s: the TMA tensor map of %s has extent %lld along dim %d "
                                  "(from %s%s); Kiln's TMA copies allow at most 2^31: compile without tma", info->name, base, v, d,
                                  t->dims[d].param >= 0 ? "argument " : "a constant",
                                  t->dims[d].param >= 0 && t->dims[d].param < info->nparams && info->params
                                      ? info->params[t->dims[d].param].name : "");
        /* An extent <= 0 (M = 0, seqlen_k = 0): the mask excludes every element (the
         * coordinates are >= 0), so the map must read zeros only: `empty`, encoded
         * over a zeroed buffer (encode below). */
        if (v < 1) out->empty = 1;
        out->dims[d] = v < 1 ? 0 : (unsigned long long)v;
        out->box[d] = (unsigned)t->box[d];
    }
    for (int d = 0; d + 1 < t->rank; d++) {
        long long v;
        if (!value_of(&t->strides[d], args, nargs, &v))
            return kiln_set_error(KILN_ERR_INTERNAL, "internal error (tensor map): kernel %s, map %d: stride %d reads "
                                  "argument %d, not an integer", info->name, m, d, t->strides[d].param + 1);
        if (out->empty) v = 256;   /* never read: the map reads the zero buffer (encode) */
        else if (!rt_tmap_stride_ok(v, 1))   /* v: bytes (the recipe's k holds the element size) */
            return kiln_set_error(KILN_ERR_ARGS, "kernel %s: the TMA tensor map of %s has a row stride of %lld bytes; "
                                  "TMA needs a positive multiple of 16 below 2^40: pad the rows or compile without "
                                  "tma", info->name, base, v);
        out->strides[d] = (unsigned long long)v;
    }
    return KILN_OK;
}

/* A zeroed device buffer of at least `bytes` (kept per kernel, grown on demand). */
static KilnStatus zero_buffer(KilnKernel *k, unsigned long long bytes, unsigned long long *addr)
{
    const RtDriver *d = k->module->dev->drv;
    if (k->tmap_zero_bytes < bytes) {
        if (k->tmap_zero) d->MemFree((CUdeviceptr)k->tmap_zero);
        k->tmap_zero = 0;
        k->tmap_zero_bytes = 0;
        CUdeviceptr p = 0;
        bytes = (bytes + 255) / 256 * 256;
        RT_CALL(d, MemAlloc, "cuMemAlloc", &p, (size_t)bytes);
        RT_CALL(d, MemsetD8, "cuMemsetD8", p, 0, (size_t)bytes);
        k->tmap_zero = (unsigned long long)p;
        k->tmap_zero_bytes = bytes;
    }
    *addr = k->tmap_zero;
    return KILN_OK;
}

/* Encode map m of `k` for these arguments into *map (the last encoding is
 * kept per kernel and map: a launch with the same inputs reuses it). */
static KilnStatus encode(KilnKernel *k, int m, const KilnArg *args, int nargs, CUtensorMap **map)
{
    RtTmapArgs a;
    KilnStatus st = rt_tmap_eval(k->info, m, args, nargs, &a);
    if (st != KILN_OK) return st;
    if (!k->tmap_cache) {   /* CUtensorMap wants 64-byte alignment: calloc's 16 is not enough */
        size_t bytes = ((size_t)KILN_MAX_TMAPS * sizeof(RtTmapCache) + 127) / 128 * 128;
        k->tmap_cache = aligned_alloc(128, bytes);
        if (!k->tmap_cache) return kiln_set_error(KILN_ERR_INTERNAL, "out of host memory");
        memset(k->tmap_cache, 0, bytes);
    }
    RtTmapCache *c = &k->tmap_cache[m];
    *map = &c->map;
    if (c->valid && !memcmp(&c->in, &a, sizeof a)) return KILN_OK;
    RtTmapArgs in = a;   /* what the cache compares (a.addr may become the zero buffer) */
    const RtDriver *d = k->module->dev->drv;
    if (!d->TensorMapEncodeTiled)
        return kiln_set_error(KILN_ERR_UNSUPPORTED, "kernel %s was compiled with tma, but this CUDA driver has no "
                              "cuTensorMapEncodeTiled (CUDA 12 or newer): compile without tma", k->info->name);
    cuuint64_t dims[5], strides[4];
    cuuint32_t box[5], one[5] = {1, 1, 1, 1, 1};
    for (int i = 0; i < a.rank; i++) dims[i] = a.dims[i], box[i] = a.box[i];
    for (int i = 0; i + 1 < a.rank; i++) strides[i] = a.strides[i];
    if (a.empty) {   /* every element masked off: extents of 1 over zeros, every other coordinate outside */
        st = zero_buffer(k, 256, &a.addr);   /* only coordinate (0, ...) is inside: one element read */
        if (st != KILN_OK) return st;
        for (int i = 0; i < a.rank; i++) dims[i] = 1;
    }
    CUresult r = d->TensorMapEncodeTiled(&c->map, a.is_bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
                                         (cuuint32_t)a.rank, (void *)(uintptr_t)a.addr, dims, strides, box, one,
                                         CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                         CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    c->valid = r == CUDA_SUCCESS;
    if (r != CUDA_SUCCESS) {
        st = rt_driver_error("cuTensorMapEncodeTiled", r);
        char where[320];
        snprintf(where, sizeof where, " (kernel %s, tensor map %d: dims %llu x %llu, row stride %llu bytes)",
                 k->info->name, m, a.dims[0], a.dims[1], a.strides[0]);
        rt_append_error(where);
        return st;
    }
    c->in = in;
    return KILN_OK;
}

KilnStatus rt_tmap_params(KilnKernel *k, const KilnArg *args, int nargs, void **ptrs)
{
    for (int m = 0; m < k->info->ntmaps; m++) {
        CUtensorMap *map = NULL;
        KilnStatus st = encode(k, m, args, nargs, &map);
        if (st != KILN_OK) return st;
        ptrs[nargs + m] = map;
    }
    return KILN_OK;
}

void rt_tmap_free(KilnKernel *k)
{
    free(k->tmap_cache);
    k->tmap_cache = NULL;
    if (k->tmap_zero && rt_bind(k->module->dev) == KILN_OK) k->module->dev->drv->MemFree((CUdeviceptr)k->tmap_zero);
    k->tmap_zero = 0;
}
