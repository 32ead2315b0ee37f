/* attention_bwd.c — kiln_attention_bwd: FlashAttention backward in one call.
 *
 * What it does, in order:
 *   1. validate everything WITHOUT touching a device (kiln_attention_bwd_check):
 *      the forward's shape checks (shared with attention.c), the backward's
 *      tuning, every tensor (q, k, v, o, dout inputs; dq, dk, dv outputs; lse
 *      and the caller's scratch), naming the bad field;
 *   2. plan the launches (rt_attn_bwd_plan): the tile sizes from the tuning
 *      table (attention_tune.c; or the caller's) and up to three kernels of
 *      lang/lib/attention_bwd.tile, in stream order:
 *        attn_bwd_pre_*   delta = rowsum(dO * O) into scratch (and zero the f32
 *                         dQ accumulator unless deterministic);
 *        attn_bwd_dkdv_*  dK, dV over key blocks (+ atomic dQ unless deterministic);
 *        attn_bwd_dq_cvt_* (dQ accumulator -> dQ) or attn_bwd_dq_* (deterministic dQ);
 *      with fwd.block_mask, attn_bwd_dkdv_bm_* and attn_bwd_dq_bm_* instead (the mask's
 *      lists: empty blocks skipped, mask_mod only on partial ones), tiles no larger than
 *      the mask's blocks, the mask's arrays bound by name (rt_attn_bm_arg);
 *   3. fetch each kernel from attention.c's per-device variant cache (compiled
 *      once, at its first launch, through the on-disk cache) and launch it
 *      with its arguments bound by the program's parameter NAMES.
 *
 * Scratch is the caller's (kiln_attention_bwd_scratch_size bytes): delta, then
 * the f32 dQ accumulator. Keeping it out of the runtime means two calls on two
 * streams never share a buffer behind the caller's back.
 *
 * Example: a bf16, head dim 128, causal, non-deterministic call on sm_90
 * launches attn_bwd_pre_bf16 (cdiv(seqlen_q, 64) x batch*heads_q),
 * attn_bwd_dkdv_bf16 with COMPUTE_DQ=false (cdiv(seqlen_k, 64) x batch*heads_kv,
 * 4 warps, 2 stages) and attn_bwd_dq_bf16 (cdiv(seqlen_q, 64) x batch*heads_q): the
 * table's dq_pass. On sm_80 the same call takes the atomic dQ (COMPUTE_DQ=true) and
 * attn_bwd_dq_cvt_bf16.
 */
#include "cuda_loader.h"
#include "jit_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define BWD "kiln_attention_bwd"
#define BWD_PROGRAM "lang/lib/attention_bwd.tile"
#define SCRATCH_ALIGN 256          /* the dQ accumulator starts on its own 256-byte boundary */
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* ---------------- validation (never touches a device) ---------------- */

/* Bytes of delta (per-row f32, rounded up to the accumulator's boundary) and, with_acc,
 * the f32 dQ accumulator after it; 0 for no rows or past size_t. The shape is checked. */
static size_t scratch_bytes(const KilnAttentionParams *f, bool with_acc)
{
    /* per-row arrays: [batch, heads_q, seqlen_q], packed [heads_q, total_q] */
    int64_t tokens = rt_attn_varlen(f) ? (int64_t)f->total_q : (int64_t)f->batch * f->seqlen_q;
    if (tokens <= 0) return 0;
    uint64_t rows = (uint64_t)tokens * (uint64_t)f->heads_q;   /* < 2^62: both factors < 2^31 */
    uint64_t delta = (rows * 4 + SCRATCH_ALIGN - 1) / SCRATCH_ALIGN * SCRATCH_ALIGN;
    uint64_t acc = 0;
    if (with_acc && __builtin_mul_overflow(rows, (uint64_t)f->head_dim * 4, &acc)) return 0;
    uint64_t total;
    if (__builtin_add_overflow(delta, acc, &total) || total > SIZE_MAX) return 0;
    return (size_t)total;
}

/* The shapes the call refuses have no size (0), never a wrapped one. */
static bool sizable(const KilnAttentionBwdParams *p)
{
    return p && p->fwd.seqlen_q > 0 && rt_attn_check_shape(BWD, &p->fwd) == KILN_OK;
}

/* The learnable params' rows (attention_bwd_params.c) come first, then delta and the
 * accumulator; 0 past size_t. */
static size_t with_params(const KilnAttentionBwdParams *p, size_t rest)
{
    size_t pg = p->nparam_grads > 0 && p->param_grads ? rt_attn_pg_bytes(p) : 0;
    return pg == SIZE_MAX || !rest || rest > SIZE_MAX - pg ? 0 : pg + rest;
}

size_t kiln_attention_bwd_scratch_size(const KilnAttentionBwdParams *p)
{
    return sizable(p) ? with_params(p, scratch_bytes(&p->fwd, !p->deterministic)) : 0;
}

size_t kiln_attention_bwd_scratch_size_sm(const KilnAttentionBwdParams *p, int sm_version)
{
    if (!sizable(p)) return 0;
    RtAttnBwdPlan plan;
    rt_attn_bwd_plan(sm_version, p, &plan);
    return with_params(p, scratch_bytes(&p->fwd, plan.dq_acc));
}

/* Batches per launch: grid axis 1 carries batch * heads (at most 65535); above that the
 * call runs as launches of whole batches, as the forward does, each advancing every
 * tensor (and LSE, delta) by its first batch's offset, so the count must keep each
 * advance 16-byte aligned. 0: no such count (the call is refused). */
int rt_attn_bwd_launch_batch(const KilnAttentionBwdParams *p)
{
    const KilnAttentionParams *f = &p->fwd;
    if ((int64_t)f->batch * f->heads_q <= RT_ATTN_MAX_GRID_Y) return f->batch;
    if (rt_attn_varlen(f) || f->heads_q <= 0) return 0;   /* packed: one grid (check_varlen_shape) */
    const int64_t *st[] = {f->q_stride, f->k_stride, f->v_stride, f->o_stride,
                           p->dout_stride, p->dq_stride, p->dk_stride, p->dv_stride};
    for (int nb = RT_ATTN_MAX_GRID_Y / f->heads_q; nb > 0; nb--) {
        bool ok = (uint64_t)nb * (uint64_t)f->heads_q * (uint64_t)f->seqlen_q * 4 % 16 == 0;   /* LSE and delta rows */
        for (size_t i = 0; i < COUNT(st) && ok; i++) ok = (uint64_t)nb * (uint64_t)st[i][0] * 2 % 16 == 0;
        if (ok) return nb;
    }
    return 0;
}

static KilnStatus check_scratch_size(const KilnAttentionBwdParams *p, size_t need)
{
    if (p->scratch_size >= need) return KILN_OK;
    return rt_attn_error(BWD, KILN_ERR_USAGE, "scratch_size %zu is below the %zu bytes this call's plan writes "
                         "(kiln_attention_bwd_scratch_size_sm; kiln_attention_bwd_scratch_size fits every device)",
                         p->scratch_size, need);
}

static KilnStatus check_tensors(const KilnAttentionBwdParams *p)
{
    const KilnAttentionParams *f = &p->fwd;
    bool varlen = rt_attn_varlen(f);
    /* an empty tensor may be null */
    bool rows = !rt_attn_no_rows(f), keys = varlen ? f->total_k > 0 : f->seqlen_k > 0;
    struct { const char *name; KilnDevPtr ptr; const int64_t *st; int is_kv, is_output; } t[] = {
        {"fwd.q", f->q, f->q_stride, 0, 0},       {"fwd.o", f->o, f->o_stride, 0, 0},
        {"dout", p->dout, p->dout_stride, 0, 0},  {"dq", p->dq, p->dq_stride, 0, 1},
        {"fwd.k", f->k, f->k_stride, 1, 0},       {"fwd.v", f->v, f->v_stride, 1, 0},
        {"dk", p->dk, p->dk_stride, 1, 1},        {"dv", p->dv, p->dv_stride, 1, 1},
    };
    for (size_t i = 0; i < COUNT(t); i++) {
        if (!(t[i].is_kv ? keys : rows)) continue;
        KilnStatus st = rt_attn_check_seq_tensor(BWD, f, t[i].name, t[i].ptr, t[i].st, t[i].is_kv, t[i].is_output);
        if (st != KILN_OK) return st;
    }
    KilnStatus st = KILN_OK;
    if (varlen) st = rt_attn_check_tensor(BWD, "fwd.cu_seqlens_q", f->cu_seqlens_q, NULL, 0, 0, 0, 0, 4, false);
    if (varlen && st == KILN_OK)
        st = rt_attn_check_tensor(BWD, "fwd.cu_seqlens_k", f->cu_seqlens_k, NULL, 0, 0, 0, 0, 4, false);
    if (st != KILN_OK || !rows) return st;
    st = rt_attn_check_tensor(BWD, "fwd.lse", f->lse, NULL, 0, 0, 0, 0, 4, false);
    if (st == KILN_OK) st = rt_attn_check_tensor(BWD, "scratch", p->scratch, NULL, 0, 0, 0, 0, 4, true);
    if (st != KILN_OK) return st;
    if (kiln_attention_bwd_scratch_size(p) == 0)
        return rt_attn_error(BWD, KILN_ERR_USAGE, "the scratch size overflows size_t");
    /* the params' rows and delta are every plan's; the accumulator only some devices'
     * (kiln_attention_bwd checks) */
    return check_scratch_size(p, with_params(p, scratch_bytes(f, false)));
}

KilnStatus kiln_attention_bwd_check(const KilnAttentionBwdParams *p)
{
    if (!p) return rt_attn_error(BWD, KILN_ERR_USAGE, "params is NULL");
    KilnStatus st = rt_attn_check_shape(BWD, &p->fwd);
    if (st == KILN_OK) st = rt_attn_check_tuning(BWD, p->block_m, p->block_n, p->num_warps, p->num_stages);
    if (st == KILN_OK) st = rt_attn_pg_check(BWD, p);
    if (st == KILN_OK)
        st = rt_attn_check_tuning(BWD ": the dQ pass's tuning (dq_*)", p->dq_block_m, p->dq_block_n, p->dq_num_warps,
                                  p->dq_num_stages);
    if (st == KILN_OK && p->fwd.block_mask && (p->dq_block_m || p->dq_block_n))
        st = rt_attn_bm_check(BWD ": the dQ pass's tuning (dq_*)", &p->fwd, p->dq_block_m, p->dq_block_n);
    char why[256];   /* the caller's schedule options, by the schedule table's rules */
    if (st == KILN_OK && !sched_resolve(&p->schedule, NULL, NULL, why, sizeof why))
        return rt_attn_error(BWD, KILN_ERR_USAGE, "schedule: %s", why);
    /* a block mask: made for this call, and the caller's tiles divide its blocks */
    if (st == KILN_OK && p->fwd.block_mask) st = rt_attn_bm_check(BWD, &p->fwd, p->block_m, p->block_n);
    /* Above 65535 batch * heads_q the call runs as several launches of whole batches,
     * as the forward does, when the batch strides allow aligned ones. */
    if (st == KILN_OK && rt_attn_bwd_launch_batch(p) == 0)
        return rt_attn_error(BWD, KILN_ERR_UNSUPPORTED,
                             "batch * heads_q = %lld exceeds %d (the grid's second axis) and the batch strides do "
                             "not allow splitting it into aligned launches",
                             (long long)p->fwd.batch * p->fwd.heads_q, RT_ATTN_MAX_GRID_Y);
    if (st != KILN_OK) return st;
    return check_tensors(p);
}

/* ---------------- the plan ---------------- */

/* The schedule options of the dK/dV or dQ kernel: the caller's over the table row's (`row`,
 * NULL with the caller's tiles), the forward's no_wgmma on top; the table's tma gives way
 * where the two tensors the kernel streams (a, b) cannot be mapped, as in the forward. */
static KilnSchedule bwd_schedule(const KilnAttentionBwdParams *p, const RtTuneRow *row, KilnDevPtr a,
                                 const int64_t *sa, KilnDevPtr b, const int64_t *sb)
{
    KilnSchedule s;
    sched_resolve(&p->schedule, row ? &row->schedule : NULL, &s, NULL, 0);
    if (p->fwd.schedule.no_wgmma > 0) s.no_wgmma = 1;
    /* lean_producer implies tma (and would turn it back on): it goes with it */
    if (p->schedule.tma <= 0 && !rt_attn_tma_encodable(a, sa, b, sb)) s.tma = s.lean_producer = 0;
    return s;
}

/* One kernel of the plan: name "<base>_<dtype>", the given defines (values copied into
 * plan storage), warps and stages (0: the program's), the schedule, the grid (axis 0 over
 * `len` in blocks of `block`). */
static void plan_kernel(RtAttnBwdPlan *pl, const char *base, const KilnAttentionBwdParams *p, int len, int block,
                        int heads, int warps, int stages, const KilnSchedule *sched, const char *const *defs,
                        int ndefs)
{
    int i = pl->n++;
    RtAttnVariant *v = &pl->k[i];
    snprintf(pl->name[i], sizeof pl->name[i], "%s%s_%s", base, rt_attn_varlen(&p->fwd) ? "_varlen" : "",
             p->fwd.dtype == KILN_BF16 ? "bf16" : "f16");
    *v = (RtAttnVariant){.program = BWD_PROGRAM, .kernel = pl->name[i], .num_warps = warps, .num_stages = stages,
                         .schedule = sched ? *sched : (KilnSchedule){.no_wgmma = p->fwd.schedule.no_wgmma > 0}};
    for (int j = 0; j < ndefs; j++) {
        snprintf(pl->value[i][j], sizeof pl->value[i][j], "%s", defs[2 * j + 1]);
        v->defines[j] = (KilnDefine){defs[2 * j], pl->value[i][j]};
    }
    v->ndefines = ndefs;
    pl->grid[i][0] = (len + block - 1) / block;
    pl->heads[i] = heads;
    pl->grid[i][1] = pl->launch_batch * heads;   /* one launch's batches (rt_attn_bwd_launch_batch) */
    pl->grid[i][2] = 1;
}

/* With a block mask, a tile larger than the mask's block shrinks to it (the mask's blocks
 * and the tiles are powers of two, so the tile then divides the block; the caller's tiles
 * were checked to); *shrunk says the table's warps/stages, which belong to its tiles, no
 * longer apply. */
static int fit_tile(int tile, int mask_block, bool *shrunk)
{
    if (tile <= mask_block) return tile;
    *shrunk = true;
    return mask_block;
}

void rt_attn_bwd_plan(int sm_version, const KilnAttentionBwdParams *p, RtAttnBwdPlan *pl)
{
    const KilnAttentionParams *f = &p->fwd;
    const KilnBlockMask *m = f->block_mask;
    /* the tables' rows (attention_tune.c); check_shape accepted the head dim, which has min_sm 0 rows */
    const RtTuneRow *tk = rt_attn_tune(RT_TUNE_BWD_DKDV, sm_version, f->head_dim, f->causal, f->seqlen_q);
    const RtTuneRow *tq = rt_attn_tune(RT_TUNE_BWD_DQ, sm_version, f->head_dim, f->causal, f->seqlen_q);
    if (!tk) tk = rt_attn_tune(RT_TUNE_BWD_DKDV, 0, 32, 0, 0);
    if (!tq) tq = rt_attn_tune(RT_TUNE_BWD_DQ, 0, 32, 0, 0);
    bool own = p->block_m || p->block_n;   /* the caller's tiles: the program's own warps */
    /* winners `kiln tune` stored for the two kernels come before the rows (tune_store.c): the
     * dQ kernel's first (the row's dq_pass stays), then the dK/dV kernel's under the
     * COMPUTE_DQ this call compiles it with */
    RtTuneRow tuned_k, tuned_q;
    bool bf16 = f->dtype == KILN_BF16;
    if (!own && rt_tune_attn_row(RT_TUNE_BWD_DQ, bf16 ? "attn_bwd_dq_bf16" : "attn_bwd_dq_f16", sm_version,
                                 f->head_dim, f->causal, 0, f->seqlen_q, tq, &tuned_q))
        tq = &tuned_q;
    if (!own && rt_tune_attn_row(RT_TUNE_BWD_DKDV, bf16 ? "attn_bwd_dkdv_bf16" : "attn_bwd_dkdv_f16", sm_version,
                                 f->head_dim, f->causal, !(p->deterministic || tq->dq_pass), f->seqlen_q, tk, &tuned_k))
        tk = &tuned_k;
    bool own_q = own || p->dq_block_m || p->dq_block_n;   /* the dQ pass's (dq_ fields first) */
    int kv_bm = p->block_m ? p->block_m : tk->block_m, kv_bn = p->block_n ? p->block_n : tk->block_n;
    int q_bm = p->dq_block_m ? p->dq_block_m : p->block_m ? p->block_m : tq->block_m;
    int q_bn = p->dq_block_n ? p->dq_block_n : p->block_n ? p->block_n : tq->block_n;
    bool kv_shrunk = false, q_shrunk = false;
    if (m) {
        kv_bm = fit_tile(kv_bm, m->block_q, &kv_shrunk);
        kv_bn = fit_tile(kv_bn, m->block_kv, &kv_shrunk);
        q_bm = fit_tile(q_bm, m->block_q, &q_shrunk);
        q_bn = fit_tile(q_bn, m->block_kv, &q_shrunk);
    }
    char d[16], kbm[16], kbn[16], qbm[16], qbn[16], mbq[16], mbk[16];
    snprintf(mbq, sizeof mbq, "%d", m ? m->block_q : 0);
    snprintf(mbk, sizeof mbk, "%d", m ? m->block_kv : 0);
    snprintf(d, sizeof d, "%d", f->head_dim);
    snprintf(kbm, sizeof kbm, "%d", kv_bm);
    snprintf(kbn, sizeof kbn, "%d", kv_bn);
    snprintf(qbm, sizeof qbm, "%d", q_bm);
    snprintf(qbn, sizeof qbn, "%d", q_bn);
    const char *causal = f->causal ? "true" : "false";
    /* the separate dQ pass: asked for, or the faster algorithm here (the table's tiles only) */
    bool dq_pass = p->deterministic || (!own && tq->dq_pass);
    const char *atomic = dq_pass ? "false" : "true";
    memset(pl, 0, sizeof *pl);
    pl->dq_acc = !dq_pass;
    pl->launch_batch = rt_attn_bwd_launch_batch(p);
    /* the row-wise kernels take the dQ pass's row blocks */
    const char *pre[] = {"HEAD_DIM", d, "BLOCK_M", qbm, "ZERO_DQ_ACC", atomic};
    /* with a block mask, the _bm kernels (the mask's blocks last) */
    const char *kv[] = {"HEAD_DIM", d, "BLOCK_M", kbm, "BLOCK_N", kbn, "CAUSAL", causal, "COMPUTE_DQ", atomic,
                        "MASK_BLOCK_M", mbq, "MASK_BLOCK_N", mbk};
    /* warp specialisation of the dK/dV kernel: its two loops walk the whole GQA group
     * (FLAT_GROUP: top-level loops, which the producer runs; not with a block mask's lists) */
    const char *kv_flat[] = {"HEAD_DIM", d, "BLOCK_M", kbm, "BLOCK_N", kbn, "CAUSAL", causal, "COMPUTE_DQ", atomic,
                             "FLAT_GROUP", "true"};
    const char *dq[] = {"HEAD_DIM", d, "BLOCK_M", qbm, "BLOCK_N", qbn, "CAUSAL", causal,
                        "MASK_BLOCK_M", mbq, "MASK_BLOCK_N", mbk};
    const char *cvt[] = {"HEAD_DIM", d, "BLOCK_M", qbm};
    /* Grid axis 0 over the (max) lengths; packed, a program past its sequence's end does
     * nothing, and no tokens at all is an empty axis. */
    bool varlen = rt_attn_varlen(f);
    int sq = rt_attn_no_rows(f) ? 0 : f->seqlen_q, sk = varlen && f->total_k == 0 ? 0 : f->seqlen_k;
    int q_warps = p->dq_num_warps ? p->dq_num_warps : p->num_warps;   /* the caller's, else ... */
    int q_stages = p->dq_num_stages ? p->dq_num_stages : p->num_stages;
    if (sq > 0) plan_kernel(pl, "attn_bwd_pre", p, sq, q_bm, f->heads_q, q_warps ? q_warps : 4, q_stages, NULL, pre, 3);
    bool kv_table = !own && !kv_shrunk, q_table = !own_q && !q_shrunk;
    KilnSchedule ks = bwd_schedule(p, kv_table ? tk : NULL, f->q, f->q_stride, p->dout, p->dout_stride);
    KilnSchedule qs = bwd_schedule(p, q_table ? tq : NULL, f->k, f->k_stride, f->v, f->v_stride);
    /* the params' gradients are summed by the nested group loop only (FLAT_GROUP refuses them),
     * which warp specialisation cannot take: such a call's dK/dV kernel runs without it */
    if (p->nparam_grads > 0) ks.warp_specialize = ks.lean_producer = 0;
    bool flat = ks.warp_specialize && !m;
    /* learnable params: the dK/dV kernel adds their gradients (after its own defines) */
    int nkv = m ? 7 : flat ? 6 : 5;
    const char *kvp[2 * 9];
    memcpy(kvp, flat ? kv_flat : kv, sizeof(const char *) * 2 * (size_t)nkv);
    if (p->nparam_grads > 0) kvp[2 * nkv] = "PARAM_GRADS", kvp[2 * nkv + 1] = "true", nkv++;
    if (p->nparam_grads > 0 && p->param_grads_atomic)
        kvp[2 * nkv] = "PARAM_GRADS_ATOMIC", kvp[2 * nkv + 1] = "true", nkv++;
    pl->dkdv = -1;
    if (sk > 0) {
        pl->dkdv = pl->n;
        plan_kernel(pl, m ? "attn_bwd_dkdv_bm" : "attn_bwd_dkdv", p, sk, kv_bn, f->heads_kv,
                    p->num_warps ? p->num_warps : kv_table ? tk->num_warps : 0,
                    p->num_stages ? p->num_stages : kv_table ? tk->num_stages : 0, &ks, kvp, nkv);
        pl->k[pl->n - 1].q_end = !m;   /* a block mask's lists bound the query blocks instead */
        pl->dkdv_rows = pl->grid[pl->dkdv][0] * pl->grid[pl->dkdv][1];
    }
    if (sq > 0 && dq_pass)
        plan_kernel(pl, m ? "attn_bwd_dq_bm" : "attn_bwd_dq", p, sq, q_bm, f->heads_q,
                    q_warps ? q_warps : q_table ? tq->num_warps : 0, q_stages ? q_stages : q_table ? tq->num_stages : 0,
                    &qs, dq, m ? 6 : 4);
    else if (sq > 0)
        plan_kernel(pl, "attn_bwd_dq_cvt", p, sq, q_bm, f->heads_q, q_warps ? q_warps : 4, q_stages, NULL, cvt, 2);
}

/* ---------------- arguments by parameter name ---------------- */

/* stride_<t><d>: t in q k v o do dq dk dv, d in b h m n (m and n both name the sequence stride). */
static bool stride_of(const KilnAttentionBwdParams *p, const char *name, int64_t *v)
{
    static const char *const ts[] = {"q", "k", "v", "o", "do", "dq", "dk", "dv"};
    const int64_t *const st[] = {p->fwd.q_stride, p->fwd.k_stride, p->fwd.v_stride, p->fwd.o_stride,
                                 p->dout_stride,  p->dq_stride,    p->dk_stride,    p->dv_stride};
    return rt_attn_stride_of(name, ts, st, (int)COUNT(ts), v);
}

KilnStatus rt_attn_bwd_arg(const void *ctx, const KilnParam *prm, KilnArg *a)
{
    const KilnAttentionBwdParams *p = ctx;
    const KilnAttentionParams *f = &p->fwd;
    const char *n = prm->name;
    size_t delta_bytes = scratch_bytes(f, false);
    KilnStatus st;
    if (rt_attn_pg_arg(BWD, p, prm, a, &st)) return st;   /* the learnable params' rows */
    /* with learnable params, delta and the accumulator follow their rows */
    KilnDevPtr scratch = p->scratch && p->nparam_grads > 0 ? p->scratch + rt_attn_pg_bytes(p) : p->scratch;
    /* An empty tensor's pointer may be null; the kernels that would read it never
     * run a row of it, but a pointer parameter still wants an address. */
    KilnDevPtr any = f->q ? f->q : f->k ? f->k : p->dk;
#define OR_ANY(x) ((x) ? (x) : any)
    struct { const char *name; KilnDevPtr v; } ptrs[] = {
        {"Q", OR_ANY(f->q)},   {"K", OR_ANY(f->k)},   {"V", OR_ANY(f->v)},   {"O", OR_ANY(f->o)},
        {"LSE", OR_ANY(f->lse)}, {"DO", OR_ANY(p->dout)}, {"DQ", OR_ANY(p->dq)}, {"DK", OR_ANY(p->dk)},
        {"DV", OR_ANY(p->dv)}, {"DELTA", OR_ANY(scratch)},
        /* deterministic: no accumulator, and scratch + delta_bytes may lie past the
         * caller's allocation (the launch's pointer check refuses it); the kernels
         * that get it then never touch it, so any device address does */
        {"DQ_ACC", scratch ? (p->deterministic ? scratch : scratch + delta_bytes) : any},
        {"cu_seqlens_q", f->cu_seqlens_q}, {"cu_seqlens_k", f->cu_seqlens_k}};
#undef OR_ANY
    for (size_t i = 0; i < COUNT(ptrs); i++)
        if (!strcmp(n, ptrs[i].name)) {
            *a = kiln_arg_ptr(ptrs[i].v);
            return KILN_OK;
        }
    if (rt_attn_bm_arg(f, prm, a, &st)) return st;   /* the block mask's arrays and strides */
    int64_t s;
    if (stride_of(p, n, &s)) return rt_attn_int_arg(BWD, prm, s, a);
    return rt_attn_scalar_arg(BWD, f, prm, a);
}

/* ---------------- the call ---------------- */

/* The call for batches [b0, b0 + nb): every tensor, LSE and delta advanced by b0's
 * offset (16-byte aligned: rt_attn_bwd_launch_batch chose nb), its own batch count. The
 * dQ accumulator follows the chunk's delta inside the caller's scratch (the chunks run in
 * stream order, and scratch_bytes of the whole call covers every chunk's span). With a
 * plan that never touches the accumulator, DQ_ACC is bound to scratch itself (the address
 * after delta may lie past a scratch sized for that plan): deterministic's binding. */
static KilnAttentionBwdParams chunk_of(const KilnAttentionBwdParams *p, const RtAttnBwdPlan *plan, int b0)
{
    KilnAttentionBwdParams c = *p;
    KilnAttentionParams *f = &c.fwd;
    if (!plan->dq_acc) c.deterministic = 1;
    if (b0 == 0 && plan->launch_batch >= p->fwd.batch) return c;
    int nb = p->fwd.batch - b0 < plan->launch_batch ? p->fwd.batch - b0 : plan->launch_batch;
    f->batch = nb;
#define ADV(ptr, st) if (ptr) (ptr) += (KilnDevPtr)((int64_t)b0 * (st)[0] * 2)
    ADV(f->q, f->q_stride); ADV(f->k, f->k_stride); ADV(f->v, f->v_stride); ADV(f->o, f->o_stride);
    ADV(c.dout, c.dout_stride); ADV(c.dq, c.dq_stride); ADV(c.dk, c.dk_stride); ADV(c.dv, c.dv_stride);
#undef ADV
    int64_t rows = (int64_t)b0 * p->fwd.heads_q * p->fwd.seqlen_q * 4;
    f->lse += (KilnDevPtr)rows;
    c.scratch += (KilnDevPtr)rows;
    return c;
}

static KilnStatus bwd_run(KilnDevice *dev, const KilnAttentionBwdParams *p, KilnStream *stream);

KilnStatus kiln_attention_bwd(KilnDevice *dev, const KilnAttentionBwdParams *p, KilnStream *stream)
{
    KilnStatus st = kiln_attention_bwd_check(p);
    if (st != KILN_OK) return st;
    if ((st = rt_attn_check_call(BWD, dev, stream)) != KILN_OK) return st;
    /* position offsets: the call as it runs (a derived variant when they matter) */
    KilnAttentionBwdParams pp = *p;
    RtAttnPos pos;
    if ((st = rt_attn_pos_apply(BWD, &p->fwd, &pp.fwd, &pos)) != KILN_OK) return st;
    st = bwd_run(dev, &pp, stream);
    rt_attn_pos_free(&pos);
    return st;
}

/* kiln_attention_bwd on a checked call whose offsets are applied. */
static KilnStatus bwd_run(KilnDevice *dev, const KilnAttentionBwdParams *p, KilnStream *stream)
{
    KilnStatus st = KILN_OK;
    RtAttnBwdPlan plan;
    rt_attn_bwd_plan(dev->info.sm_version, p, &plan);
    if (!rt_attn_no_rows(&p->fwd) &&
        (st = check_scratch_size(p, with_params(p, scratch_bytes(&p->fwd, plan.dq_acc)))) != KILN_OK)
        return st;
    /* As in the forward: a hook indexing its tensors by b would read another launch's rows. */
    if ((p->fwd.variant || p->fwd.block_mask) && plan.launch_batch < p->fwd.batch)
        return rt_attn_error(BWD, KILN_ERR_UNSUPPORTED, "batch * heads_q = %lld exceeds %d with a %s (it sees the "
                             "batch index; split the call by batch)", (long long)p->fwd.batch * p->fwd.heads_q,
                             RT_ATTN_MAX_GRID_Y, p->fwd.variant ? "variant" : "block mask");
    /* The forward's variant: its hooks (and score_mod_grad) in every kernel that calls them. */
    RtAttnVarSrc vs;
    if ((st = rt_attn_var_open(BWD, p->fwd.variant, &vs)) != KILN_OK) return st;
    KilnKernel *ks[3] = {NULL, NULL, NULL};
    const KilnKernelInfo *infos[3] = {NULL, NULL, NULL};
    for (int i = 0; i < plan.n && st == KILN_OK; i++) {
        if (vs.var) plan.k[i].vs = &vs;
        if ((st = rt_attn_get_kernel(dev, BWD, &plan.k[i], &ks[i])) == KILN_OK) infos[i] = kiln_kernel_info(ks[i]);
    }
    if (st == KILN_OK) st = rt_attn_var_check_used(BWD, p->fwd.variant, infos, plan.n);
    if (st == KILN_OK && plan.dkdv >= 0 && p->nparam_grads > 0) st = rt_attn_pg_check_kernel(BWD, p, infos[plan.dkdv]);
    /* the learnable params' rows start at 0 (one launch before the kernels that add to them) */
    bool rows = !rt_attn_no_rows(&p->fwd) && plan.dkdv >= 0;
    if (st == KILN_OK && (rows || p->param_grads_atomic)) st = rt_attn_pg_zero(dev, BWD, p, stream);
    /* arguments bound once per launch of whole batches; a cold call compiles the kernels'
     * code at once on threads */
    for (int b0 = 0; st == KILN_OK && b0 < p->fwd.batch; b0 += plan.launch_batch) {
        KilnAttentionBwdParams c = chunk_of(p, &plan, b0);
        RtAttnCall call;
        st = rt_attn_prepare(BWD, ks, plan.n, rt_attn_bwd_arg, &c, &call);
        for (int i = 0; i < plan.n && st == KILN_OK; i++) {
            int grid[3] = {plan.grid[i][0], c.fwd.batch * plan.heads[i], 1};
            st = rt_attn_launch_call(&call, i, grid, stream);
        }
    }
    if (st == KILN_OK) st = rt_attn_pg_reduce(dev, BWD, p, rows ? plan.dkdv_rows : 0, stream);
    rt_attn_var_close(&vs);
    return st;
}
