/* launch.c — check kernel arguments against the signature, then launch.
 *
 * The check is a pure function (rt_check_args) with the "is this device
 * memory?" question passed in, so CPU tests cover every message without a GPU;
 * kiln_launch asks the driver (cuPointerGetAttribute) for the real answer.
 *
 * Invariants: nothing reaches cuLaunchKernel unless the count, every kind and
 * every pointer passed; parameter values are marshalled into 8-byte slots
 * (little-endian, so a 1/2/4-byte parameter reads the slot's low bytes).
 * Example: vec_add(X: *f32, Y: *f32, Z: *f32, n: i32) launched with three
 * arguments fails with "kernel vec_add takes 4 arguments, got 3; signature:
 * vec_add(X: *f32, Y: *f32, Z: *f32, n: i32)".
 */
#include "cuda_loader.h"
#include "rt_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RT_MAX_PARAMS 256
#define RT_DEFAULT_SMEM (48 * 1024)

const char *rt_param_kind_name(KilnParamKind k)
{
    static const char *const names[] = {
        [KILN_PARAM_PTR] = "ptr", [KILN_PARAM_I32] = "i32", [KILN_PARAM_I64] = "i64",
        [KILN_PARAM_F32] = "f32", [KILN_PARAM_F64] = "f64", [KILN_PARAM_I1] = "bool",
        [KILN_PARAM_I8] = "i8", [KILN_PARAM_I16] = "i16", [KILN_PARAM_U8] = "u8",
        [KILN_PARAM_U16] = "u16", [KILN_PARAM_U32] = "u32", [KILN_PARAM_U64] = "u64",
        [KILN_PARAM_F16] = "f16", [KILN_PARAM_BF16] = "bf16",
    };
    if ((unsigned)k < sizeof names / sizeof names[0] && names[k]) return names[k];
    return "?";
}

int rt_param_kind_bytes(KilnParamKind k)
{
    switch (k) {
    case KILN_PARAM_PTR: case KILN_PARAM_I64: case KILN_PARAM_U64: case KILN_PARAM_F64: return 8;
    case KILN_PARAM_I32: case KILN_PARAM_U32: case KILN_PARAM_F32: return 4;
    case KILN_PARAM_I16: case KILN_PARAM_U16: case KILN_PARAM_F16: case KILN_PARAM_BF16: return 2;
    case KILN_PARAM_I1: case KILN_PARAM_I8: case KILN_PARAM_U8: return 1;
    }
    return 0;
}

/* "*f32" for pointers (the element width is all a signature records), else the kind. */
static void type_text(const KilnParam *p, char *buf, size_t n)
{
    if (p->kind != KILN_PARAM_PTR) snprintf(buf, n, "%s", rt_param_kind_name(p->kind));
    else if (p->pointee_bits > 0) snprintf(buf, n, "*(%d-bit elements)", p->pointee_bits);
    else snprintf(buf, n, "a pointer");
}

static void signature_text(const KilnKernelInfo *info, char *buf, size_t n)
{
    size_t len = (size_t)snprintf(buf, n, "%s(", info->name);
    for (int i = 0; i < info->nparams && len < n; i++) {
        char t[48];
        type_text(&info->params[i], t, sizeof t);
        len += (size_t)snprintf(buf + len, n - len, "%s%s: %s", i ? ", " : "", info->params[i].name, t);
    }
    if (len < n) snprintf(buf + len, n - len, ")");
}

static bool is_float(KilnParamKind k)
{
    return k == KILN_PARAM_F32 || k == KILN_PARAM_F64 || k == KILN_PARAM_F16 || k == KILN_PARAM_BF16;
}

/* A signature read from PTX knows sizes and int/float (for 32/64-bit) only. */
static bool loose_match(KilnParamKind param, KilnParamKind arg)
{
    int pb = rt_param_kind_bytes(param), ab = rt_param_kind_bytes(arg);
    if (pb != ab) return false;
    if (pb >= 4) return is_float(param) == is_float(arg);
    return true;
}

static KilnStatus check_one(const KilnKernelInfo *info, int i, bool loose, const KilnArg *a,
                            RtPtrClassifier classify, void *ctx)
{
    const KilnParam *p = &info->params[i];
    bool ok = loose ? loose_match(p->kind, a->kind) : p->kind == a->kind;
    if (!ok) {
        char t[48];
        type_text(p, t, sizeof t);
        return kiln_set_error(KILN_ERR_ARGS, "kernel %s: argument %d (%s) must be %s%s, got %s (kiln_arg_%s)",
                              info->name, i + 1, p->name, t, loose ? " (by size, from the PTX)" : "",
                              rt_param_kind_name(a->kind), a->kind == KILN_PARAM_I1 ? "bool" : rt_param_kind_name(a->kind));
    }
    if (a->kind != KILN_PARAM_PTR || !classify) return KILN_OK;
    if (a->v.ptr == 0)
        return kiln_set_error(KILN_ERR_ARGS, "kernel %s: argument %d (%s) is a null pointer", info->name, i + 1,
                              p->name);
    if (classify(a->v.ptr, ctx) == RT_PTR_UNKNOWN)
        return kiln_set_error(KILN_ERR_ARGS,
                              "kernel %s: argument %d (%s) is a host pointer (0x%llx), not device memory: "
                              "allocate it with kiln_malloc and copy the data with kiln_memcpy_htod",
                              info->name, i + 1, p->name, (unsigned long long)a->v.ptr);
    return KILN_OK;
}

KilnStatus rt_check_args(const KilnKernelInfo *info, bool loose, const KilnArg *args, int nargs,
                         RtPtrClassifier classify, void *ctx)
{
    if (!info) return kiln_set_error(KILN_ERR_USAGE, "no kernel signature to check arguments against");
    if (nargs < 0 || (nargs > 0 && !args))
        return kiln_set_error(KILN_ERR_USAGE, "kernel %s: %d arguments but no argument array", info->name, nargs);
    if (nargs != info->nparams) {
        char sig[1024];
        signature_text(info, sig, sizeof sig);
        return kiln_set_error(KILN_ERR_ARGS, "kernel %s takes %d argument%s, got %d; signature: %s", info->name,
                              info->nparams, info->nparams == 1 ? "" : "s", nargs, sig);
    }
    for (int i = 0; i < nargs; i++) {
        KilnStatus st = check_one(info, i, loose, &args[i], classify, ctx);
        if (st != KILN_OK) return st;
    }
    return KILN_OK;
}

/* ---------------- the launch ---------------- */

static RtPtrClass classify_cuda(KilnDevPtr p, void *ctx)
{
    const RtDriver *d = ctx;
    unsigned int type = 0;
    if (d->PointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)p) != CUDA_SUCCESS)
        return RT_PTR_UNKNOWN;
    if (type == CU_MEMORYTYPE_DEVICE || type == CU_MEMORYTYPE_UNIFIED) return RT_PTR_DEVICE;
    if (type == CU_MEMORYTYPE_HOST) return RT_PTR_HOST_MAPPED;
    return RT_PTR_UNKNOWN;
}

/* Dynamic SRAM: check against the device, raise the kernel's limit above 48 KB. */
static KilnStatus prepare_smem(KilnKernel *k)
{
    if (k->smem_ready) return KILN_OK;
    const KilnDevice *dev = k->module->dev;
    const RtDriver *d = dev->drv;
    int dyn = k->info->smem_bytes;
    RT_CALL(d, FuncGetAttribute, "cuFuncGetAttribute", &k->static_smem, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, k->fn);
    int limit = dev->info.max_smem_per_block_optin;
    if (dyn < 0 || (long)dyn + k->static_smem > limit)
        return kiln_set_error(KILN_ERR_UNSUPPORTED,
                              "kernel %s needs %ld bytes of shared memory (%d dynamic + %d static), more than the "
                              "%d bytes per block that %s allows; use fewer stages or smaller blocks",
                              k->info->name, (long)dyn + k->static_smem, dyn, k->static_smem, limit,
                              dev->info.name);
    if (dyn > RT_DEFAULT_SMEM || (long)dyn + k->static_smem > RT_DEFAULT_SMEM)
        RT_CALL(d, FuncSetAttribute, "cuFuncSetAttribute", k->fn,
                CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, dyn);
    k->smem_ready = 1;
    return KILN_OK;
}

static KilnStatus check_grid(const KilnKernel *k, const int grid[3], unsigned g[3])
{
    /* a persistent kernel's grid is logical (its tile loop counts it in i32: persistent_grid) */
    static const long max[3] = {2147483647L, 65535, 65535};
    for (int i = 0; i < 3; i++) {
        long v = grid ? grid[i] : 1;
        if (v == 0) v = 1;
        long lim = k->info->persistent ? max[0] : max[i];
        if (v < 0 || v > lim)
            return kiln_set_error(KILN_ERR_USAGE, "kernel %s: grid[%d] = %d is out of range (1..%ld)",
                                  k->info->name, i, grid[i], lim);
        g[i] = (unsigned)v;
    }
    return KILN_OK;
}

/* A persistent kernel (KilnKernelInfo.persistent): the caller's grid g is the logical
 * one, passed as the three i32 parameters after the arguments (slots[0..2]); the launch
 * is 1-D, as many programs as the device keeps resident (SMs x the occupancy of this
 * kernel at its warps and SRAM, asked once; 1 per SM when the driver cannot say), never
 * more than the logical grid's programs. Each program loops over the tiles itself. */
static KilnStatus persistent_grid(KilnKernel *k, int warps, unsigned g[3], uint64_t *slots)
{
    const KilnDevice *dev = k->module->dev;
    int64_t total = (int64_t)g[0] * g[1] * g[2];
    if (total > 2147483647)
        return kiln_set_error(KILN_ERR_USAGE, "kernel %s (persistent): the grid %ux%ux%u has %lld programs, more "
                              "than the 2147483647 its i32 tile index counts", k->info->name, g[0], g[1], g[2],
                              (long long)total);
    if (!k->resident) {
        int per_sm = 0;
        const RtDriver *d = dev->drv;
        if (!d->OccupancyMaxActiveBlocksPerMultiprocessor ||
            d->OccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k->fn, warps * 32, (size_t)k->info->smem_bytes) !=
                CUDA_SUCCESS || per_sm < 1)
            per_sm = 1;
        k->resident = (dev->info.sm_count > 0 ? dev->info.sm_count : 1) * per_sm;
    }
    for (int i = 0; i < 3; i++) slots[i] = g[i];
    g[0] = (unsigned)(total < k->resident ? total : k->resident);
    g[1] = g[2] = 1;
    return KILN_OK;
}

static void marshal(const KilnArg *args, int nargs, uint64_t *slots, void **ptrs)
{
    for (int i = 0; i < nargs; i++) {
        slots[i] = 0;
        if (args[i].kind == KILN_PARAM_F32) memcpy(&slots[i], &args[i].v.f32, sizeof(float));
        else if (args[i].kind == KILN_PARAM_F64) memcpy(&slots[i], &args[i].v.f64, sizeof(double));
        else slots[i] = args[i].v.u;
        ptrs[i] = &slots[i];
    }
}

KilnStatus kiln_launch(KilnKernel *k, const int grid[3], KilnStream *s, const KilnArg *args, int nargs)
{
    if (!k) return kiln_set_error(KILN_ERR_USAGE, "kiln_launch: kernel is NULL");
    KilnDevice *dev = k->module->dev;
    if (s && rt_stream_device(s) != dev)
        return kiln_set_error(KILN_ERR_USAGE, "kernel %s: the stream belongs to another KilnDevice", k->info->name);
    if (nargs > RT_MAX_PARAMS)
        return kiln_set_error(KILN_ERR_USAGE, "kernel %s: %d arguments (at most %d)", k->info->name, nargs,
                              RT_MAX_PARAMS);
    unsigned g[3];
    KilnStatus st = check_grid(k, grid, g);
    if (st == KILN_OK) st = rt_bind(dev);
    if (st == KILN_OK)
        st = rt_check_args(k->info, k->module->loose, args, nargs, classify_cuda, (void *)dev->drv);
    /* A compiled module may run a variant specialised on the arguments'
     * alignment / divisibility (jit/specialize.c); same signature as k. */
    const KilnKernelInfo *generic = k->info;
    const KilnModule *km = k->module;
    if (st == KILN_OK && km->hooks) st = km->hooks->select(km->owner, k, generic, args, nargs, &k);
    if (st != KILN_OK) return st;
    if (!k->fn) /* a deferred module's own kernel: its owner must have chosen compiled code */
        return kiln_set_error(KILN_ERR_INTERNAL, "internal error (kiln_launch): kernel %s has no code (a deferred "
                              "module whose owner chose no variant)", k->info->name);
    int warps = k->info->num_warps > 0 ? k->info->num_warps : 4;
    if (warps * 32 > dev->info.max_threads_per_block)
        return kiln_set_error(KILN_ERR_UNSUPPORTED, "kernel %s: %d warps = %d threads, more than the %d per block %s allows",
                              k->info->name, warps, warps * 32, dev->info.max_threads_per_block, dev->info.name);
    if ((st = prepare_smem(k)) != KILN_OK) return st;
    uint64_t slots[RT_MAX_PARAMS + 3];
    void *ptrs[RT_MAX_PARAMS + 3 + KILN_MAX_TMAPS];
    marshal(args, nargs, slots, ptrs);
    /* persistent: the logical grid follows the arguments, the tensor maps follow it */
    int grid_params = k->info->persistent ? 3 : 0;
    if (grid_params) {
        if ((st = persistent_grid(k, warps, g, slots + nargs)) != KILN_OK) return st;
        for (int i = 0; i < 3; i++) ptrs[nargs + i] = &slots[nargs + i];
    }
    /* compiled with tma: its tensor maps follow the arguments (tmap.c) */
    if (k->info->ntmaps && (st = rt_tmap_params(k, args, nargs, ptrs + grid_params)) != KILN_OK) return st;
    CUresult r = dev->drv->LaunchKernel(k->fn, g[0], g[1], g[2], (unsigned)warps * 32, 1, 1,
                                        (unsigned)k->info->smem_bytes, rt_stream_handle(s),
                                        nargs + grid_params + k->info->ntmaps ? ptrs : NULL, NULL);
    if (r != CUDA_SUCCESS) {
        st = rt_driver_error("cuLaunchKernel", r);
        char where[320];   /* a 127-byte kernel name and every number at its widest fit */
        snprintf(where, sizeof where, " (kernel %s, grid %ux%ux%u, %d threads, %d bytes dynamic shared memory)",
                 k->info->name, g[0], g[1], g[2], warps * 32, k->info->smem_bytes);
        rt_append_error(where);
        return st;
    }
    return KILN_OK;
}

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

KilnStatus kiln_time_launch(KilnKernel *k, const int grid[3], KilnStream *s, const KilnArg *args, int nargs,
                            int reps, float *median_ms)
{
    if (!k || !median_ms || reps < 1)
        return kiln_set_error(KILN_ERR_USAGE, "kiln_time_launch: need a kernel, reps >= 1 and median_ms");
    KilnDevice *dev = k->module->dev;
    KilnEvent *e0 = NULL, *e1 = NULL;
    float *t = calloc((size_t)reps, sizeof *t);
    KilnStatus st = t ? KILN_OK : kiln_set_error(KILN_ERR_INTERNAL, "out of host memory");
    if (st == KILN_OK) st = kiln_event_create(dev, &e0);
    if (st == KILN_OK) st = kiln_event_create(dev, &e1);
    if (st == KILN_OK) st = kiln_launch(k, grid, s, args, nargs); /* warm-up: caches, clocks, smem attribute */
    for (int i = 0; i < reps && st == KILN_OK; i++) {
        st = kiln_event_record(e0, s);
        if (st == KILN_OK) st = kiln_launch(k, grid, s, args, nargs);
        if (st == KILN_OK) st = kiln_event_record(e1, s);
        if (st == KILN_OK) st = kiln_event_synchronize(e1);
        if (st == KILN_OK) st = kiln_event_elapsed_ms(e0, e1, &t[i]);
    }
    if (st == KILN_OK) {
        qsort(t, (size_t)reps, sizeof *t, cmp_float);
        *median_ms = reps % 2 ? t[reps / 2] : 0.5f * (t[reps / 2 - 1] + t[reps / 2]);
    }
    kiln_event_destroy(e0);
    kiln_event_destroy(e1);
    free(t);
    return st;
}
