/* attention_cpu.c — the backward and the decode on the CPU interpreter:
 * kiln_attention_bwd_cpu and kiln_attention_decode_cpu, the _cpu forms that
 * kiln_attention_fwd_cpu (attention.c) has for the forward.
 *
 * Each runs exactly what its device call would: the same validation
 * (kiln_attention_bwd_check / kiln_attention_decode_check), the same programs of
 * lang/lib/ with the same variant and block mask, the arguments bound by the
 * parameter names through the device call's own binder (rt_attn_bwd_arg,
 * rt_attn_decode_direct_arg), each kernel through rt_attn_run_cpu. What differs:
 *   - pointers are HOST addresses, and every pointer argument becomes a host
 *     buffer of the bytes its tensor spans under its strides, after a check that the
 *     caller's buffer (the params' *_bytes fields, scratch_size) is no smaller (the
 *     interpreter bounds every access by them: a variant reading past its tensor fails
 *     with KILN_ERR_KERNEL instead of reading other memory, a short buffer is
 *     KILN_ERR_USAGE naming its field before anything runs);
 *   - outputs are bound in place (KILN_HOST_INOUT), so the bytes between a strided
 *     output's rows are never written, as on the device;
 *   - tiles: the caller's, else 64 x 64 (shrunk to a block mask's blocks), like the
 *     forward's _cpu call; the backward's dQ comes from the atomic accumulator
 *     unless `deterministic`; the decode runs one split (DIRECT), whatever num_splits
 *     says, so it needs no workspace.
 *
 * Invariant: the scratch the backward's kernels hand each other (delta, the dQ
 * accumulator) is the caller's `scratch`, bound in place between the runs.
 *
 * Example: a causal f16 backward of batch 1, 2 heads, 100 x 100, d 64, not
 * deterministic: attn_bwd_pre_f16 (2 x 2 programs), attn_bwd_dkdv_f16 with
 * COMPUTE_DQ=true (2 x 2), attn_bwd_dq_cvt_f16 (2 x 2), all 64 x 64 tiles.
 */
#include "jit_internal.h"

#include <stdint.h>
#include <string.h>

/* A host buffer: the parameter's name, the caller's pointer, the bytes the shape and strides
 * span (0 when empty), the caller's size and the field that gives it (NULL: a buffer the call
 * makes itself). */
typedef struct CpuBuf {
    const char *name;
    KilnDevPtr ptr;
    size_t bytes;
    KilnHostDir dir;
    size_t caller_bytes;
    const char *field;
} CpuBuf;

/* Every buffer the shape reads or writes is no smaller than it spans: the interpreter bounds
 * each access by the span, so none goes past the caller's buffer (a short one is refused
 * before anything runs, as kiln_attention_fwd_cpu does). */
static KilnStatus check_sizes(const char *api, const CpuBuf *t, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (t[i].field && t[i].bytes && t[i].caller_bytes < t[i].bytes)
            return rt_attn_error(api, KILN_ERR_USAGE, "%s is %zu, below the %zu bytes the shape and strides span "
                                 "(the _cpu calls need each host buffer's size)", t[i].field, t[i].caller_bytes,
                                 t[i].bytes);
    return KILN_OK;
}

/* The host buffer of `name` in t[0..n), else a block mask's array, else a variant's argument. */
static KilnHostArg find_buffer(const CpuBuf *t, size_t n, const KilnBlockMask *m, const KilnAttentionVariant *var,
                               const char *name, KilnDevPtr ptr)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(name, t[i].name))   /* an empty tensor still gets a (never read) buffer */
            return t[i].bytes ? kiln_host_buf((void *)(uintptr_t)t[i].ptr, t[i].bytes, t[i].dir) : rt_attn_cpu_stand_in();
    size_t bm = m ? rt_attn_bm_array_bytes(m, name) : 0;
    if (bm) return kiln_host_buf((void *)(uintptr_t)ptr, bm, KILN_HOST_IN);
    return rt_attn_var_buffer(var, name, ptr);
}

KilnHostArg rt_attn_cpu_stand_in(void)
{
    /* The caller's pointer of an empty tensor may hold fewer than 16 bytes, or be 0: the
     * interpreter copies an IN buffer in, so the stand-in is ours (found by fuzz_api: a
     * k_bytes of 11 with seqlen_k = 0, read 16 bytes). Per thread: calls may run at once. */
    static _Thread_local unsigned char none[16];
    return kiln_host_buf(none, sizeof none, KILN_HOST_INOUT);
}

/* ---------------- the backward ---------------- */

#define BWD "kiln_attention_bwd_cpu"
#define BWD_BUFS 13

/* The backward's host buffers; acc: the dQ accumulator's address (rt_attn_bwd_arg's). */
static void bwd_buffers(const KilnAttentionBwdParams *p, KilnDevPtr acc_ptr, CpuBuf t[BWD_BUFS])
{
    const KilnAttentionParams *f = &p->fwd;
    bool vl = rt_attn_varlen(f);   /* packed: one "batch" of total_q / total_k tokens */
    int nb = vl ? 1 : f->batch, sq = vl ? f->total_q : f->seqlen_q, sk = vl ? f->total_k : f->seqlen_k;
    int hq = f->heads_q, hk = f->heads_kv, d = f->head_dim;
    size_t rows = (size_t)nb * hq * sq, cu = vl ? (size_t)(f->batch + 1) * 4 : 0;
    /* the scratch as rt_attn_bwd_arg splits it: delta, then (unless deterministic) the f32 dQ
     * accumulator at the end of the delta's rounded share; all of it within scratch_size */
    size_t total = kiln_attention_bwd_scratch_size(p), acc = p->deterministic ? 0 : rows * (size_t)d * 4;
    /* the learnable params' rows come first (attention_bwd_params.c) */
    size_t pg = p->nparam_grads > 0 ? rt_attn_pg_bytes(p) : 0;
    CpuBuf b[BWD_BUFS] = {
        {"Q", f->q, rt_attn_span_bytes(f->q_stride, nb, hq, sq, d, 2), KILN_HOST_IN, f->q_bytes, "fwd.q_bytes"},
        {"K", f->k, rt_attn_span_bytes(f->k_stride, nb, hk, sk, d, 2), KILN_HOST_IN, f->k_bytes, "fwd.k_bytes"},
        {"V", f->v, rt_attn_span_bytes(f->v_stride, nb, hk, sk, d, 2), KILN_HOST_IN, f->v_bytes, "fwd.v_bytes"},
        {"O", f->o, rt_attn_span_bytes(f->o_stride, nb, hq, sq, d, 2), KILN_HOST_IN, f->o_bytes, "fwd.o_bytes"},
        {"DO", p->dout, rt_attn_span_bytes(p->dout_stride, nb, hq, sq, d, 2), KILN_HOST_IN, p->dout_bytes,
         "dout_bytes"},
        {"LSE", f->lse, rows * 4, KILN_HOST_IN, f->lse_bytes, "fwd.lse_bytes"},
        {"DQ", p->dq, rt_attn_span_bytes(p->dq_stride, nb, hq, sq, d, 2), KILN_HOST_INOUT, p->dq_bytes, "dq_bytes"},
        {"DK", p->dk, rt_attn_span_bytes(p->dk_stride, nb, hk, sk, d, 2), KILN_HOST_INOUT, p->dk_bytes, "dk_bytes"},
        {"DV", p->dv, rt_attn_span_bytes(p->dv_stride, nb, hk, sk, d, 2), KILN_HOST_INOUT, p->dv_bytes, "dv_bytes"},
        {"DELTA", p->scratch + pg, total - acc - pg, KILN_HOST_INOUT, 0, NULL},   /* the scratch: checked whole */
        {"DQ_ACC", acc_ptr, acc, KILN_HOST_INOUT, 0, NULL},
        {"cu_seqlens_q", f->cu_seqlens_q, cu, KILN_HOST_IN, f->cu_seqlens_q_bytes, "fwd.cu_seqlens_q_bytes"},
        {"cu_seqlens_k", f->cu_seqlens_k, cu, KILN_HOST_IN, f->cu_seqlens_k_bytes, "fwd.cu_seqlens_k_bytes"}};
    memcpy(t, b, sizeof b);
}

static KilnHostArg bwd_buffer(const void *ctx, const char *name, KilnDevPtr ptr)
{
    const KilnAttentionBwdParams *p = ctx;
    CpuBuf t[BWD_BUFS];
    KilnHostArg pg;
    if (rt_attn_pg_buffer(p, name, ptr, &pg)) return pg;   /* a learnable param's rows */
    bwd_buffers(p, ptr, t);
    return find_buffer(t, BWD_BUFS, p->fwd.block_mask, p->fwd.variant, name, ptr);
}

static KilnStatus pg_check(const void *ctx, const KilnKernelInfo *info)
{
    return rt_attn_pg_check_kernel(BWD, ctx, info);
}

KilnStatus kiln_attention_bwd_cpu(const KilnAttentionBwdParams *p)
{
    KilnStatus st = kiln_attention_bwd_check(p);
    if (st != KILN_OK) return st;
    if ((st = rt_attn_var_check_bytes(BWD, p->fwd.variant)) != KILN_OK) return st;
    CpuBuf bufs[BWD_BUFS];
    bwd_buffers(p, 0, bufs);
    if ((st = check_sizes(BWD, bufs, BWD_BUFS)) != KILN_OK) return st;
    /* delta and, unless deterministic, the dQ accumulator: all of the scratch this call's
     * plan on the interpreter writes (kiln_attention_bwd_check took only delta's part) */
    size_t need = kiln_attention_bwd_scratch_size(p);
    if (p->scratch_size < need)
        return rt_attn_error(BWD, KILN_ERR_USAGE, "scratch_size is %zu, below the %zu bytes of "
                             "kiln_attention_bwd_scratch_size(p) the _cpu call writes", p->scratch_size, need);
    /* the interpreter's tiles: the caller's, else 64 x 64 (no larger than a mask's blocks,
     * which the check requires the caller's tiles to divide) */
    KilnAttentionBwdParams q = *p;
    RtAttnPos pos;   /* position offsets: the call as it runs */
    if ((st = rt_attn_pos_apply(BWD, &p->fwd, &q.fwd, &pos)) != KILN_OK) return st;
    const KilnBlockMask *m = p->fwd.block_mask;
    if (!q.block_m) q.block_m = m && m->block_q < 64 ? m->block_q : 64;
    if (!q.block_n) q.block_n = m && m->block_kv < 64 ? m->block_kv : 64;
    RtAttnBwdPlan plan;
    rt_attn_bwd_plan(0, &q, &plan);
    RtAttnVarSrc vs;
    if ((st = rt_attn_var_open(BWD, q.fwd.variant, &vs)) != KILN_OK) {
        rt_attn_pos_free(&pos);
        return st;
    }
    /* the learnable params' rows start at 0; the dK/dV kernel adds to them, the reduce sums them */
    bool rows = !rt_attn_no_rows(&q.fwd) && plan.dkdv >= 0;
    if (rows || q.param_grads_atomic) rt_attn_pg_zero_cpu(&q);
    for (int i = 0; i < plan.n && st == KILN_OK; i++) {
        if (vs.var) plan.k[i].vs = &vs;
        /* the device call checks the variant's arguments against the three kernels together;
         * each kernel here is compiled alone, so none checks (the forward's call has, for
         * the same variant) */
        st = rt_attn_run_cpu(BWD, &plan.k[i], plan.grid[i], rt_attn_bwd_arg, bwd_buffer, &q, NULL,
                             i == plan.dkdv && q.nparam_grads > 0 ? pg_check : NULL);
    }
    if (st == KILN_OK) st = rt_attn_pg_reduce_cpu(BWD, &q, rows ? plan.dkdv_rows : 0);
    rt_attn_var_close(&vs);
    rt_attn_pos_free(&pos);
    return st;
}

/* ---------------- the decode ---------------- */

#define DEC "kiln_attention_decode_cpu"

#define DEC_BUFS 10

static void dec_buffers(const KilnAttentionDecodeParams *p, CpuBuf t[DEC_BUFS])
{
    int hq = p->heads_q, hk = p->heads_kv, d = p->head_dim;
    bool paged = p->block_table != 0;
    /* K, V: [batch, heads_kv, max_seqlen_k] contiguous, or [num_pages, heads_kv, page_size] pages */
    int kb = paged ? p->num_pages : p->batch, ks = paged ? p->page_size : p->max_seqlen_k;
    size_t pages_per_row = paged ? (size_t)((p->max_seqlen_k + p->page_size - 1) / p->page_size) : 0;
    size_t table =
        paged && p->batch > 0 ? ((size_t)(p->batch - 1) * (size_t)p->block_table_stride + pages_per_row) * 4 : 0;
    static float unused[4];   /* DIRECT never touches the split scratch: a stand-in, never read or written */
    size_t lens = (size_t)p->batch * 4;
    CpuBuf b[DEC_BUFS] = {
        {"Q", p->q, rt_attn_span_bytes(p->q_stride, p->batch, hq, p->seqlen_q, d, 2), KILN_HOST_IN, p->q_bytes,
         "q_bytes"},
        {"O", p->o, rt_attn_span_bytes(p->o_stride, p->batch, hq, p->seqlen_q, d, 2), KILN_HOST_INOUT, p->o_bytes,
         "o_bytes"},
        {"LSE", p->lse, (size_t)p->batch * hq * p->seqlen_q * 4, KILN_HOST_INOUT, p->lse_bytes, "lse_bytes"},
        {"K", p->k, rt_attn_span_bytes(p->k_stride, kb, hk, ks, d, 2), KILN_HOST_IN, p->k_bytes, "k_bytes"},
        {"V", p->v, rt_attn_span_bytes(p->v_stride, kb, hk, ks, d, 2), KILN_HOST_IN, p->v_bytes, "v_bytes"},
        {"cache_seqlens", p->cache_seqlens, lens, KILN_HOST_IN, p->cache_seqlens_bytes, "cache_seqlens_bytes"},
        /* contiguous: the program's block_table parameter is bound to cache_seqlens, never read */
        {"block_table", paged ? p->block_table : p->cache_seqlens, paged ? table : lens, KILN_HOST_IN,
         paged ? p->block_table_bytes : p->cache_seqlens_bytes, paged ? "block_table_bytes" : "cache_seqlens_bytes"},
        {"O_part", (KilnDevPtr)(uintptr_t)unused, sizeof unused, KILN_HOST_IN, 0, NULL},
        {"LSE_part", (KilnDevPtr)(uintptr_t)unused, sizeof unused, KILN_HOST_IN, 0, NULL},
        {"counters", (KilnDevPtr)(uintptr_t)unused, sizeof unused, KILN_HOST_IN, 0, NULL}};
    memcpy(t, b, sizeof b);
}

static KilnHostArg dec_buffer(const void *ctx, const char *name, KilnDevPtr ptr)
{
    const KilnAttentionDecodeParams *p = ctx;
    CpuBuf t[DEC_BUFS];
    dec_buffers(p, t);
    return find_buffer(t, DEC_BUFS, p->block_mask, p->variant, name, ptr);
}

KilnStatus kiln_attention_decode_cpu(const KilnAttentionDecodeParams *p)
{
    KilnStatus st = kiln_attention_decode_check(p);
    if (st != KILN_OK || p->seqlen_q == 0) return st;
    if ((st = rt_attn_var_check_bytes(DEC, p->variant)) != KILN_OK) return st;
    CpuBuf bufs[DEC_BUFS];
    dec_buffers(p, bufs);
    if ((st = check_sizes(DEC, bufs, DEC_BUFS)) != KILN_OK) return st;
    RtAttnVarSrc vs;
    if ((st = rt_attn_var_open(DEC, p->variant, &vs)) != KILN_OK) return st;
    RtAttnVariant v;
    rt_attn_decode_split_variant(p, 1, false, &vs, &v);
    /* the device call's grid with one split: (batch, KV head) x 1 x row blocks */
    int grid[3] = {p->batch * p->heads_kv, 1, rt_attn_decode_row_blocks(p)};
    st = rt_attn_run_cpu(DEC, &v, grid, rt_attn_decode_direct_arg, dec_buffer, p, p->variant, NULL);
    rt_attn_var_close(&vs);
    return st;
}
