/* attention.c — kiln_attention_fwd: FlashAttention forward in one call.
 *
 * What it does, in order:
 *   1. validate the parameters (check_shape, check_tensors) WITHOUT touching a
 *      device: a bad call returns KILN_ERR_USAGE / KILN_ERR_UNSUPPORTED with a
 *      message naming the field, and nothing is compiled or launched;
 *   2. resolve the variant: dtype, head dim, causal, the tile sizes and the
 *      schedule options (the caller's, else the defaults of attention_tune.c for
 *      the head dim and the device's compute capability) form an AttnKey;
 *   3. find the key's kernel in the in-process cache (a small chained hash map
 *      under one mutex), else compile lang/lib/attention_fwd.tile (embedded in
 *      the library by CMake: kiln_lib_files) with -D HEAD_DIM/BLOCK_M/BLOCK_N/
 *      CAUSAL through rt_module_compile_deferred (on-disk cache; code at first launch) and
 *      insert it;
 *   4. bind the arguments by the kernel's parameter NAMES (so the program may
 *      reorder or retype its parameters) and launch on the grid
 *      (cdiv(seqlen_q, BLOCK_M), batch * heads_q); above 65535 (batch * heads_q)
 *      as several launches of whole batches (launch_batches).
 *
 * Invariants: validation never reads *dev; the kernels, their cache, the
 * argument binding and the launches are attention_base.c's, shared with the
 * backward and decoding: this file only says what the forward compiles and
 * binds.
 *
 * Example: KilnAttentionParams p = {.dtype = KILN_BF16, .batch = 2, .heads_q = 8,
 * .heads_kv = 2, .seqlen_q = 1000, .seqlen_k = 1000, .head_dim = 128, .q = q, ...,
 * .causal = 1}; kiln_attention_fwd(dev, &p, NULL) on an sm_90 device compiles
 * attn_fwd_bf16 with HEAD_DIM=128 CAUSAL=true BLOCK_M=64 BLOCK_N=64 PLAIN_SCORES=true
 * (4 warps, 2 stages) once, then launches 16 x 16 programs (sm_80: BLOCK_M=128, 8 x 16).
 */
#include "cuda_loader.h"
#include "jit_internal.h"
#include "compiler/driver/driver.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ATTN_PROGRAM "lang/lib/attention_fwd.tile"
#define ATTN_PTR_ALIGN 16        /* codegen assumes 16-byte aligned pointer parameters */
#define ATTN_MAX_GRID_Y RT_ATTN_MAX_GRID_Y    /* grid axis 1 carries batch * heads_q */
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))
#define FWD "kiln_attention_fwd"

/* ---------------- validation (never touches a device) ---------------- */

static KilnStatus check_tensors(const KilnAttentionParams *p)
{
    bool keys = rt_attn_varlen(p) ? p->total_k > 0 : p->seqlen_k > 0;
    KilnStatus st = rt_attn_check_seq_tensor(FWD, p, "q", p->q, p->q_stride, false, false);
    if (st == KILN_OK && keys) st = rt_attn_check_seq_tensor(FWD, p, "k", p->k, p->k_stride, true, false);
    if (st == KILN_OK && keys) st = rt_attn_check_seq_tensor(FWD, p, "v", p->v, p->v_stride, true, false);
    if (st == KILN_OK) st = rt_attn_check_seq_tensor(FWD, p, "o", p->o, p->o_stride, false, true);
    if (st == KILN_OK) st = rt_attn_check_tensor(FWD, "lse", p->lse, NULL, 0, 0, 0, 0, 4, true);
    if (st == KILN_OK && rt_attn_varlen(p))
        st = rt_attn_check_tensor(FWD, "cu_seqlens_q", p->cu_seqlens_q, NULL, 0, 0, 0, 0, 4, false);
    if (st == KILN_OK && rt_attn_varlen(p))
        st = rt_attn_check_tensor(FWD, "cu_seqlens_k", p->cu_seqlens_k, NULL, 0, 0, 0, 0, 4, false);
    return st;
}

static bool is_fp8(const KilnAttentionParams *p) { return p && p->dtype == KILN_E4M3; }

/* Bytes of one element of Q, K, V (e4m3: 1; O is f16/bf16 always). */
static int qkv_bytes(const KilnAttentionParams *p) { return is_fp8(p) ? 1 : 2; }

/* The FP8 fields (dtype KILN_E4M3): O's dtype, the descales' form and pointers. */
static KilnStatus check_fp8(const KilnAttentionParams *p)
{
    if (p->out_dtype != KILN_F16 && p->out_dtype != KILN_BF16)
        return rt_attn_error(FWD, KILN_ERR_USAGE, "out_dtype %d is neither KILN_F16 nor KILN_BF16 (O of an FP8 call)",
                             (int)p->out_dtype);
    if (p->descale_per_head != 0 && p->descale_per_head != 1)
        return rt_attn_error(FWD, KILN_ERR_USAGE, "descale_per_head must be 0 (one descale per tensor) or 1 (per "
                             "batch and head), got %d", p->descale_per_head);
    if (rt_attn_varlen(p))
        return rt_attn_error(FWD, KILN_ERR_UNSUPPORTED, "FP8 (KILN_E4M3) is not supported with packed batches");
    if (rt_attn_no_rows(p)) return KILN_OK;
    KilnStatus st = rt_attn_check_tensor(FWD, "q_descale", p->q_descale, NULL, 0, 0, 0, 0, 4, false);
    if (st == KILN_OK) st = rt_attn_check_tensor(FWD, "k_descale", p->k_descale, NULL, 0, 0, 0, 0, 4, false);
    if (st == KILN_OK) st = rt_attn_check_tensor(FWD, "v_descale", p->v_descale, NULL, 0, 0, 0, 0, 4, false);
    return st;
}

KilnStatus kiln_attention_check(const KilnAttentionParams *p)
{
    /* FP8: the shared checks see the call as one of out_dtype (what O is; Q, K and V
     * are checked as 2-byte tensors, which bounds their 1-byte offsets too) */
    KilnAttentionParams as_out;
    if (is_fp8(p)) {
        KilnStatus st = check_fp8(p);
        if (st != KILN_OK) return st;
        as_out = *p;
        as_out.dtype = p->out_dtype;
        p = &as_out;
    }
    KilnStatus st = rt_attn_check_shape(FWD, p);
    if (st == KILN_OK && p->block_mask) st = rt_attn_bm_check(FWD, p, p->block_m, p->block_n);
    if (st != KILN_OK || rt_attn_no_rows(p)) return st;   /* no rows: empty tensors may be null */
    return check_tensors(p);
}

/* ---------------- the variant: the tuning table's row (or the caller's tiles) ---------------- */

/* The forward's choice for a call: the tuning table's row (or the caller's tiles). */
typedef struct AttnKey {
    int dtype, out_dtype, head_dim, causal;      /* out_dtype: O's, with dtype KILN_E4M3 */
    int block_m, block_n, num_warps, num_stages;   /* warps/stages 0: the program's own rule */
    KilnSchedule schedule;                         /* resolved: p->schedule over the table's row */
    int mask_block_m, mask_block_n;                /* a block mask's blocks (attn_fwd_bm_*), else 0 */
} AttnKey;

/* With a block mask: its blocks, and tiles that divide them. The mask's blocks are powers of
 * two, so the tuned tiles divide them unless larger: then they shrink to the mask's blocks
 * (the caller's own tiles were checked to divide them), and the table's warps/stages, which
 * belong to its tiles, give way to the program's rule. */
static AttnKey with_block_mask(const KilnAttentionParams *p, AttnKey k)
{
    const KilnBlockMask *m = p->block_mask;
    if (!m) return k;
    k.mask_block_m = m->block_q;
    k.mask_block_n = m->block_kv;
    if (k.block_m > m->block_q || k.block_n > m->block_kv) {
        k.block_m = k.block_m > m->block_q ? m->block_q : k.block_m;
        k.block_n = k.block_n > m->block_kv ? m->block_kv : k.block_n;
        k.num_warps = p->num_warps;
        k.num_stages = p->num_stages;
        /* the table's options belonged to its tiles too: only the caller's (resolved
         * before, so they combine) */
        sched_resolve(&p->schedule, NULL, &k.schedule, NULL, 0);
    }
    k.schedule.overlap = 0;   /* the block-mask loops read an index list: dot-rotate leaves them alone anyway */
    return k;
}

/* Whether the 4-D tensor maps of two [batch, heads, seq, d] tensors (K and V here; the
 * backward's Q and dO, K and V) can be encoded: the runtime's rule (rt_tmap_base_ok,
 * rt_tmap_stride_ok), every element 2 bytes. */
bool rt_attn_tma_encodable(KilnDevPtr a, const int64_t *sa, KilnDevPtr b, const int64_t *sb)
{
    if (!rt_tmap_base_ok(a) || !rt_tmap_base_ok(b)) return false;
    for (int i = 0; i < 3; i++)
        if (!rt_tmap_stride_ok(sa[i], 2) || !rt_tmap_stride_ok(sb[i], 2)) return false;
    return true;
}

static bool tma_encodable(const KilnAttentionParams *p) { return rt_attn_tma_encodable(p->k, p->k_stride, p->v, p->v_stride); }

static const char *kernel_name(int dtype, int out_dtype, bool varlen, bool block_mask);

static AttnKey resolve_key(int sm_version, const KilnAttentionParams *p)
{
    /* a winner `kiln tune` stored for this call comes first (tune_store.c), then the table */
    RtTuneRow tuned;
    const RtTuneRow *t = rt_tune_attn_row(RT_TUNE_FWD, kernel_name(p->dtype, p->out_dtype, false, false), sm_version,
                                          p->head_dim, p->causal, 0, p->seqlen_q, NULL, &tuned) ? &tuned
                         : rt_attn_tune(RT_TUNE_FWD, sm_version, p->head_dim, p->causal, p->seqlen_q);
    /* check_shape accepted the head dim, and every head dim has a min_sm 0 row */
    if (!t) t = rt_attn_tune(RT_TUNE_FWD, 0, 32, 0, 0);
    bool own_tiles = p->block_m || p->block_n;
    AttnKey k = {.dtype = p->dtype, .out_dtype = p->out_dtype, .head_dim = p->head_dim, .causal = p->causal != 0};
    k.block_m = p->block_m ? p->block_m : t->block_m;
    k.block_n = p->block_n ? p->block_n : t->block_n;
    /* the table's warps/stages belong to its tiles: with the caller's tiles, the program decides */
    k.num_warps = p->num_warps ? p->num_warps : own_tiles ? 0 : t->num_warps;
    k.num_stages = p->num_stages ? p->num_stages : own_tiles ? 0 : t->num_stages;
    /* > 0 on, < 0 off, 0 the table's row (with the caller's tiles: off); the caller's
     * refused combinations were refused by kiln_attention_check */
    sched_resolve(&p->schedule, own_tiles ? NULL : &t->schedule, &k.schedule, NULL, 0);
    /* No keys: K and V are never read, and their tensor maps could not be encoded (an empty
     * tensor's strides may be 0, which TMA refuses): such a call copies nothing, so no TMA.
     * The table's TMA (not the caller's) also gives way where the maps cannot be encoded:
     * K/V not 16-byte aligned, or a stride that is 0 (a broadcast) or not 16 bytes' worth.
     * lean_producer, which implies tma (and would turn it back on), goes with it: it only
     * sizes a TMA producer. */
    if (p->seqlen_k == 0 || (p->schedule.tma <= 0 && !tma_encodable(p))) k.schedule.tma = k.schedule.lean_producer = 0;
    /* FP8: e4m3 tiles are not cp.async/TMA-staged (pass_pipeline takes f16/bf16 tiles). The
     * table's overlap gives way too until the GPU has timed it with FP8 wgmma: the widened
     * kernel never rotated (its casts hid the pattern from dot-rotate), so no FP8 kernel ran
     * with it; ptxas takes it at d 128, 128 x 128 on 8 warps, without spills (228 registers,
     * 221 without). A caller may ask for it (schedule.overlap = 1; KILN_FP8_BENCH times it). */
    if (is_fp8(p)) k.schedule.tma = k.schedule.lean_producer = 0, k.schedule.warp_specialize = 0;
    if (is_fp8(p) && p->schedule.overlap <= 0) k.schedule.overlap = 0;
    /* FP8 wgmma (compiler capability, PTX- and ptxas-tested) has not run on a GPU yet: the
     * runtime keeps the widened path, which the GPU test checked against float64, until
     * tools/device_bench_fp8.sh has; a caller opts in with schedule.no_fp8_wgmma = -1. */
    if (is_fp8(p) && p->schedule.no_fp8_wgmma == 0) k.schedule.no_fp8_wgmma = 1;
    return with_block_mask(p, k);
}

static const char *kernel_name(int dtype, int out_dtype, bool varlen, bool block_mask)
{
    if (dtype == KILN_E4M3 && block_mask) return out_dtype == KILN_BF16 ? "attn_fwd_bm_fp8_bf16" : "attn_fwd_bm_fp8_f16";
    if (dtype == KILN_E4M3) return out_dtype == KILN_BF16 ? "attn_fwd_fp8_bf16" : "attn_fwd_fp8_f16";
    if (varlen) return dtype == KILN_BF16 ? "attn_fwd_varlen_bf16" : "attn_fwd_varlen_f16";
    if (block_mask) return dtype == KILN_BF16 ? "attn_fwd_bm_bf16" : "attn_fwd_bm_f16";
    return dtype == KILN_BF16 ? "attn_fwd_bf16" : "attn_fwd_f16";
}

/* The forward's compile request for key k (with the call's opened variant, or none). */
static void fwd_variant(const AttnKey *k, bool varlen, const RtAttnVarSrc *vs, RtAttnVariant *v)
{
    rt_attn_variant_init(v, ATTN_PROGRAM, kernel_name(k->dtype, k->out_dtype, varlen, k->mask_block_m > 0), k->num_warps,
                         k->num_stages, &k->schedule);
    rt_attn_variant_define(v, "HEAD_DIM", k->head_dim, false);
    rt_attn_variant_define(v, "BLOCK_M", k->block_m, false);
    rt_attn_variant_define(v, "BLOCK_N", k->block_n, false);
    rt_attn_variant_define(v, "CAUSAL", k->causal, true);
    if (k->mask_block_m) {
        rt_attn_variant_define(v, "MASK_BLOCK_M", k->mask_block_m, false);
        rt_attn_variant_define(v, "MASK_BLOCK_N", k->mask_block_n, false);
    }
    bool fp8 = k->dtype == KILN_E4M3;   /* its kernels take the hook-ready scores only */
    if (!vs || !vs->var) {
        /* PLAIN_SCORES: no score_mod, so the scores take FlashAttention-2's one-FFMA form */
        if (!fp8) rt_attn_variant_define(v, "PLAIN_SCORES", 1, true);
        return;
    }
    v->vs = vs;
    v->plain_scores = !fp8;   /* unless the variant has a score_mod */
}

KilnStatus rt_attn_fwd_request(int sm_version, const KilnAttentionParams *p, RtAttnVariant *v, RtAttnRequest *r)
{
    AttnKey key = resolve_key(sm_version, p);
    fwd_variant(&key, rt_attn_varlen(p), NULL, v);
    return rt_attn_compile_request(FWD, v, r);
}

/* stride_<t><d> of the forward's tensors q k v o. */
static bool stride_of(const KilnAttentionParams *p, const char *name, int64_t *v)
{
    static const char *const ts[] = {"q", "k", "v", "o"};
    const int64_t *const st[] = {p->q_stride, p->k_stride, p->v_stride, p->o_stride};
    return rt_attn_stride_of(name, ts, st, 4, v);
}

static KilnStatus make_arg(const void *ctx, const KilnParam *prm, KilnArg *a)
{
    const KilnAttentionParams *p = ctx;
    const char *n = prm->name;
    /* With seqlen_k == 0, K and V are never read: an empty tensor's null pointer is fine. */
    KilnDevPtr kv_stand_in = p->q;
    struct { const char *name; KilnDevPtr v; } ptrs[] = {
        {"Q", p->q}, {"K", p->k ? p->k : kv_stand_in}, {"V", p->v ? p->v : kv_stand_in},
        {"O", p->o}, {"LSE", p->lse}, {"cu_seqlens_q", p->cu_seqlens_q}, {"cu_seqlens_k", p->cu_seqlens_k},
        {"Q_descale", p->q_descale}, {"K_descale", p->k_descale}, {"V_descale", p->v_descale}};
    for (size_t i = 0; i < COUNT(ptrs); i++)
        if (!strcmp(n, ptrs[i].name)) {
            *a = kiln_arg_ptr(ptrs[i].v);
            return KILN_OK;
        }
    int64_t s;
    if (stride_of(p, n, &s)) return rt_attn_int_arg(FWD, prm, s, a);
    if (!strcmp(n, "descale_per_head")) return rt_attn_int_arg(FWD, prm, p->descale_per_head, a);
    KilnStatus st;
    if (rt_attn_bm_arg(p, prm, a, &st)) return st;   /* the block mask's arrays and strides */
    return rt_attn_scalar_arg(FWD, p, prm, a);
}

/* ---------------- the call ---------------- */

/* Grid axis 1 carries batch * heads_q (the program reads (b, h) from program_id(1)), and
 * holds at most 65535. Above that the call runs as several launches of whole batches:
 * Q, K, V, O and LSE advance by the first batch's offset, and each launch sees `batch`
 * sequences of its own. The pointers must stay 16-byte aligned (codegen assumes it), so
 * a launch's batch count is the largest that keeps every advance aligned (any count that
 * is a multiple of 8 does). */
static bool advance_aligned(const KilnAttentionParams *p, int64_t nb)
{
    int64_t e = qkv_bytes(p);
    int64_t adv[5] = {nb * p->q_stride[0] * e, nb * p->k_stride[0] * e, nb * p->v_stride[0] * e,
                      nb * p->o_stride[0] * 2, nb * p->heads_q * p->seqlen_q * 4};
    for (int i = 0; i < 5; i++)
        if (adv[i] % ATTN_PTR_ALIGN) return false;
    return true;
}

static KilnStatus launch_batches(KilnKernel *k, const KilnAttentionParams *p, int row_blocks, KilnStream *stream)
{
    int grid[3] = {row_blocks, p->batch * p->heads_q, 1};
    /* packed batches always fit (check_varlen_shape) */
    if ((int64_t)p->batch * p->heads_q <= ATTN_MAX_GRID_Y) return rt_attn_launch(FWD, k, grid, stream, make_arg, p);
    int nb = ATTN_MAX_GRID_Y / p->heads_q;
    while (nb > 0 && !advance_aligned(p, nb)) nb--;
    if (nb == 0)
        return rt_attn_error(FWD, KILN_ERR_UNSUPPORTED,
                             "batch * heads_q = %lld exceeds %d (the grid's second axis) and the batch strides do "
                             "not allow splitting it into aligned launches",
                             (long long)p->batch * p->heads_q, ATTN_MAX_GRID_Y);
    for (int b0 = 0; b0 < p->batch; b0 += nb) {
        KilnAttentionParams c = *p;
        c.batch = p->batch - b0 < nb ? p->batch - b0 : nb;
        int64_t e = qkv_bytes(p);
        c.q += (KilnDevPtr)(b0 * p->q_stride[0] * e);
        if (c.k) c.k += (KilnDevPtr)(b0 * p->k_stride[0] * e);   /* 0: seqlen_k == 0, never read */
        if (c.v) c.v += (KilnDevPtr)(b0 * p->v_stride[0] * e);
        if (p->descale_per_head) {   /* FP8: per-(batch, head) descales advance with the batch */
            c.q_descale += (KilnDevPtr)((int64_t)b0 * p->heads_q * 4);
            c.k_descale += (KilnDevPtr)((int64_t)b0 * p->heads_kv * 4);
            c.v_descale += (KilnDevPtr)((int64_t)b0 * p->heads_kv * 4);
        }
        c.o += (KilnDevPtr)(b0 * p->o_stride[0] * 2);
        c.lse += (KilnDevPtr)((int64_t)b0 * p->heads_q * p->seqlen_q * 4);
        grid[1] = c.batch * c.heads_q;
        KilnStatus st = rt_attn_launch(FWD, k, grid, stream, make_arg, &c);
        if (st != KILN_OK) return st;
    }
    return KILN_OK;
}

KilnStatus kiln_attention_fwd(KilnDevice *dev, const KilnAttentionParams *p, KilnStream *stream)
{
    KilnStatus st = kiln_attention_check(p);
    if (st != KILN_OK) return st;
    if ((st = rt_attn_check_call(FWD, dev, stream)) != KILN_OK) return st;
    if (is_fp8(p) && dev->info.sm_version < 89)   /* no e4m3 conversions before Ada (cg_lower.c) */
        return rt_attn_error(FWD, KILN_ERR_UNSUPPORTED, "FP8 (KILN_E4M3) needs sm_89 or newer; this device is "
                             "sm_%d", dev->info.sm_version);
    if (rt_attn_no_rows(p)) return KILN_OK;   /* no rows, nothing to write */
    /* Above 65535 the call runs as launches of whole batches, each seeing b from 0: a
     * hook indexing its tensors by b would read another batch's rows. */
    if ((p->variant || p->block_mask) && (int64_t)p->batch * p->heads_q > ATTN_MAX_GRID_Y)
        return rt_attn_error(FWD, KILN_ERR_UNSUPPORTED, "batch * heads_q = %lld exceeds %d with a %s (it sees the "
                             "batch index; split the call by batch)", (long long)p->batch * p->heads_q,
                             ATTN_MAX_GRID_Y, p->variant ? "variant" : "block mask");
    /* position offsets: the call as it runs (a derived variant when they matter) */
    KilnAttentionParams pp;
    RtAttnPos pos;
    if ((st = rt_attn_pos_apply(FWD, p, &pp, &pos)) != KILN_OK) return st;
    p = &pp;
    AttnKey key = resolve_key(dev->info.sm_version, p);
    KilnKernel *k = NULL;
    RtAttnVarSrc vs;
    if ((st = rt_attn_var_open(FWD, p->variant, &vs)) != KILN_OK) {
        rt_attn_pos_free(&pos);
        return st;
    }
    RtAttnVariant v;
    fwd_variant(&key, rt_attn_varlen(p), &vs, &v);
    st = rt_attn_get_kernel(dev, FWD, &v, &k);
    const KilnKernelInfo *info = k ? kiln_kernel_info(k) : NULL;
    if (st == KILN_OK) st = rt_attn_var_check_used(FWD, p->variant, &info, 1);
    if (st == KILN_OK) st = launch_batches(k, p, (p->seqlen_q + key.block_m - 1) / key.block_m, stream);
    rt_attn_var_close(&vs);
    rt_attn_pos_free(&pos);
    return st;
}

/* ---------------- the same call on the CPU interpreter ---------------- */

/* The forward's host buffers: the parameter's name, the caller's pointer and size, the
 * field naming the size, and what the shape and strides span (0 when empty). */
typedef struct CpuTensor { const char *name; KilnDevPtr ptr; size_t bytes; const char *field; size_t span; KilnHostDir dir; } CpuTensor;

#define CPU_TENSORS 10

static int cpu_tensors(const KilnAttentionParams *p, CpuTensor t[CPU_TENSORS])
{
    /* packed (varlen): one "batch" of total_q / total_k tokens, plus the prefix sums */
    bool vl = rt_attn_varlen(p);
    int nb = vl ? 1 : p->batch, sq = vl ? p->total_q : p->seqlen_q, sk = vl ? p->total_k : p->seqlen_k;
    size_t cu = vl ? (size_t)(p->batch + 1) * 4 : 0;
    int e = qkv_bytes(p);
    t[0] = (CpuTensor){"Q", p->q, p->q_bytes, "q_bytes", rt_attn_span_bytes(p->q_stride, nb, p->heads_q, sq, p->head_dim, e), KILN_HOST_IN};
    t[1] = (CpuTensor){"K", p->k, p->k_bytes, "k_bytes", rt_attn_span_bytes(p->k_stride, nb, p->heads_kv, sk, p->head_dim, e), KILN_HOST_IN};
    t[2] = (CpuTensor){"V", p->v, p->v_bytes, "v_bytes", rt_attn_span_bytes(p->v_stride, nb, p->heads_kv, sk, p->head_dim, e), KILN_HOST_IN};
    t[3] = (CpuTensor){"O", p->o, p->o_bytes, "o_bytes", rt_attn_span_bytes(p->o_stride, nb, p->heads_q, sq, p->head_dim, 2), KILN_HOST_OUT};
    t[4] = (CpuTensor){"LSE", p->lse, p->lse_bytes, "lse_bytes", (size_t)nb * p->heads_q * sq * 4, KILN_HOST_OUT};
    t[5] = (CpuTensor){"cu_seqlens_q", p->cu_seqlens_q, p->cu_seqlens_q_bytes, "cu_seqlens_q_bytes", cu, KILN_HOST_IN};
    t[6] = (CpuTensor){"cu_seqlens_k", p->cu_seqlens_k, p->cu_seqlens_k_bytes, "cu_seqlens_k_bytes", cu, KILN_HOST_IN};
    /* FP8: the descales, one f32 per tensor or per (batch, head) */
    bool ph = p->descale_per_head, f8 = is_fp8(p);
    size_t dq = !f8 ? 0 : ph ? (size_t)p->batch * p->heads_q * 4 : 4;
    size_t dkv = !f8 ? 0 : ph ? (size_t)p->batch * p->heads_kv * 4 : 4;
    t[7] = (CpuTensor){"Q_descale", p->q_descale, p->q_descale_bytes, "q_descale_bytes", dq, KILN_HOST_IN};
    t[8] = (CpuTensor){"K_descale", p->k_descale, p->k_descale_bytes, "k_descale_bytes", dkv, KILN_HOST_IN};
    t[9] = (CpuTensor){"V_descale", p->v_descale, p->v_descale_bytes, "v_descale_bytes", dkv, KILN_HOST_IN};
    return CPU_TENSORS;
}

/* Every host buffer the shape reads or writes is at least what it spans: the
 * interpreter then bounds the accesses by the spans, all inside the caller's buffers. */
static KilnStatus check_cpu_sizes(const char *api, const KilnAttentionParams *p)
{
    CpuTensor t[CPU_TENSORS];
    int n = cpu_tensors(p, t);
    for (int i = 0; i < n; i++)
        if (t[i].span && t[i].bytes < t[i].span)
            return rt_attn_error(api, KILN_ERR_USAGE, "%s is %zu, below the %zu bytes the shape and strides span "
                                 "(the _cpu calls need each host buffer's size)", t[i].field, t[i].bytes, t[i].span);
    return KILN_OK;
}

/* The host buffer behind a pointer argument of the forward (by the parameter's name). */
static KilnHostArg cpu_buffer(const void *ctx, const char *name, KilnDevPtr ptr)
{
    const KilnAttentionParams *p = ctx;
    CpuTensor t[CPU_TENSORS];
    int n = cpu_tensors(p, t);
    for (int i = 0; i < n; i++)
        /* the span (check_cpu_sizes: within the caller's bytes; an OUT buffer is copied back
         * whole, so not past it); an empty tensor (never read): rt_attn_cpu_stand_in */
        if (!strcmp(name, t[i].name))
            return t[i].span ? kiln_host_buf((void *)(uintptr_t)t[i].ptr, t[i].span, t[i].dir) : rt_attn_cpu_stand_in();
    size_t bm = p->block_mask ? rt_attn_bm_array_bytes(p->block_mask, name) : 0;
    if (bm) return kiln_host_buf((void *)(uintptr_t)ptr, bm, KILN_HOST_IN);
    return rt_attn_var_buffer(p->variant, name, ptr);
}

KilnStatus kiln_attention_fwd_cpu(const KilnAttentionParams *p)
{
    KilnStatus st = kiln_attention_check(p);
    if (st != KILN_OK || rt_attn_no_rows(p)) return st;
    if ((st = rt_attn_var_check_bytes(FWD "_cpu", p->variant)) != KILN_OK) return st;
    if ((st = check_cpu_sizes(FWD "_cpu", p)) != KILN_OK) return st;
    KilnAttentionParams pp;
    RtAttnPos pos;
    if ((st = rt_attn_pos_apply(FWD "_cpu", p, &pp, &pos)) != KILN_OK) return st;
    p = &pp;
    AttnKey key = {.dtype = p->dtype, .out_dtype = p->out_dtype, .head_dim = p->head_dim, .causal = p->causal != 0,
                   .block_m = p->block_m ? p->block_m : 64, .block_n = p->block_n ? p->block_n : 64};
    key = with_block_mask(p, key);
    /* The interpreter runs the Tile IR before the GPU passes: of the caller's schedule only
     * the persistent programs (a target-independent pass) change what it runs. */
    KilnSchedule asked = {0};
    asked.persistent = p->schedule.persistent, asked.longest_first = p->schedule.longest_first;
    sched_resolve(&asked, NULL, &key.schedule, NULL, 0);
    RtAttnVarSrc vs;
    if ((st = rt_attn_var_open(FWD, p->variant, &vs)) == KILN_OK) {
        RtAttnVariant v;
        fwd_variant(&key, rt_attn_varlen(p), &vs, &v);
        int grid[3] = {(p->seqlen_q + key.block_m - 1) / key.block_m, p->batch * p->heads_q, 1};
        st = rt_attn_run_cpu(FWD, &v, grid, make_arg, cpu_buffer, p, p->variant, NULL);
        rt_attn_var_close(&vs);
    }
    rt_attn_pos_free(&pos);
    return st;
}
