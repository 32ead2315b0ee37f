/* test_e2e_gpu_attention_bwd.c — kiln_attention_bwd on the GPU, against float64.
 *
 * The sweep: dtype (f16, bf16) x head dim (32, 64, 96, 128, 256) x causal x
 * deterministic (40 cases), with GQA group sizes (1, 2, 4, MQA), lengths (equal,
 * ragged below a block, seqlen_q < seqlen_k, seqlen_q > seqlen_k: causal rows that
 * see no key), layouts and wider-than-dense strides rotating across them; plus
 * caller-chosen tiles (and schedules on the sm_90a wgmma paths) and a created stream.
 *
 * Each case runs the real pipeline: kiln_attention_fwd gives O and LSE, then
 * kiln_attention_bwd gives dQ, dK, dV into NaN-poisoned buffers (scratch poisoned
 * too). Judged by FlashAttention's rule for gradients, for dQ, dK and dV separately:
 * max |g - ref| <= 2 * max |g_plain - ref| + 1e-5, ref the float64 analytic gradient
 * (tools/attn_ref.c, itself checked against finite differences in the interpreter
 * tests), g_plain the same backward computed in the storage dtype. Rows that see no
 * key must get dQ = 0 exactly; elements outside the outputs (wider strides) keep their
 * poison. Deterministic cases run twice and must be bit-identical.
 *
 * One line per case, then `ROW attn_bwd ...`: the summary the lead reads. ATTN_FIRST_CASE=N
 * starts at case N (40: the caller-schedule cases alone, a quick run).
 * Without a GPU: one line "SKIP: no GPU (<reason>)" and success.
 */
#include "kiln.h"
#include "tests/gpu/gpu_util.h"
#include "tools/attn_ref.c"   /* the reference is a tool, not a library: compiled in here */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct Case {
    AttnDtype dtype;
    int d, causal, det, batch, hq, hkv, sq, sk, pad;
    AttnLayout layout;
    int block_m, block_n, on_stream;
    int warps, stages;   /* the caller's num_warps, num_stages (0: the runtime's) */
    int ws;              /* 1: schedule warp_specialize + tma, and the dQ pass's own 128 x 64 / 8 / 2 tiles;
                            2: warp_specialize + tma + lean_producer, the caller's tiles for both kernels */
    AttnProblem p;
    void *q, *k, *v, *dout, *dq, *dk, *dv, *dq2, *dk2, *dv2;
    size_t nq, nkv;
    KilnStatus st;
    double ms_first, ms_gpu;
    double err[3], bound[3];
    int64_t nonfinite, empty_bad, pad_bad;
    int bit_identical;
    int pass;
    char why[200];
} Case;

static KilnDevice *g_dev;
static KilnStream *g_stream;

static void host_setup(Case *c, uint64_t seed)
{
    AttnProblem *p = &c->p;
    *p = (AttnProblem){.batch = c->batch, .heads_q = c->hq, .heads_kv = c->hkv, .seqlen_q = c->sq, .seqlen_k = c->sk,
                       .head_dim = c->d + c->pad, .causal = c->causal, .scale = 1.0 / sqrt((double)c->d),
                       .dtype = c->dtype};
    attn_set_strides(p, c->layout);
    p->head_dim = c->d;
    c->nq = attn_numel_q(p) + 8;
    c->nkv = attn_numel_kv(p) + 8;
    size_t es = attn_dtype_size(c->dtype);
    void **bufs[] = {&c->q, &c->dout, &c->dq, &c->dq2, &c->k, &c->v, &c->dk, &c->dv, &c->dk2, &c->dv2};
    for (int i = 0; i < 10; i++) {
        size_t n = (i < 4 ? c->nq : c->nkv) * es;
        *bufs[i] = malloc(n);
        memset(*bufs[i], 0xFF, n);
    }
    attn_fill_strided(c->dtype, c->q, p->q_stride, c->batch, c->hq, c->sq, c->d, seed);
    attn_fill_strided(c->dtype, c->k, p->k_stride, c->batch, c->hkv, c->sk, c->d, seed + 1);
    attn_fill_strided(c->dtype, c->v, p->v_stride, c->batch, c->hkv, c->sk, c->d, seed + 2);
    attn_fill_strided(c->dtype, c->dout, p->o_stride, c->batch, c->hq, c->sq, c->d, seed + 3);
}

static void host_free(Case *c)
{
    void *bufs[] = {c->q, c->dout, c->dq, c->dq2, c->k, c->v, c->dk, c->dv, c->dk2, c->dv2};
    for (int i = 0; i < 10; i++) free(bufs[i]);
}

#define TRY(call)                                   \
    do {                                            \
        if ((c->st = (call)) != KILN_OK) goto done; \
    } while (0)

/* Forward (for O and LSE), then the backward into poisoned buffers; deterministic
 * cases run the backward a second time into fresh poison. */
static void gpu_run(Case *c)
{
    size_t es = attn_dtype_size(c->dtype), nlse = (size_t)c->batch * c->hq * c->sq;
    /* q k v o lse dout dq dk dv scratch */
    KilnDevPtr ptr[10] = {0};
    size_t bytes[10] = {c->nq * es, c->nkv * es, c->nkv * es, c->nq * es, nlse * 4 + 16,
                        c->nq * es, c->nq * es, c->nkv * es, c->nkv * es, 0};
    KilnStream *s = c->on_stream ? g_stream : NULL;
    KilnAttentionBwdParams b = {
        .fwd = {.dtype = c->dtype == ATTN_BF16 ? KILN_BF16 : KILN_F16, .batch = c->batch, .heads_q = c->hq,
                .heads_kv = c->hkv, .seqlen_q = c->sq, .seqlen_k = c->sk, .head_dim = c->d, .causal = c->causal},
        .deterministic = c->det, .block_m = c->block_m, .block_n = c->block_n, .num_warps = c->warps,
        .num_stages = c->stages};
    if (c->ws) b.schedule.warp_specialize = b.schedule.tma = 1;
    if (c->ws == 1) b.dq_block_m = 128, b.dq_block_n = 64;
    if (c->ws == 2) b.schedule.lean_producer = 1;
    /* exactly the documented size for this device's plan, as a caller allocates it (a
     * pointer one past a deterministic call's scratch once leaked into a launch and was
     * refused; sm_90's non-deterministic plan writes no dQ accumulator, issue 24) */
    KilnDeviceInfo di;
    TRY(kiln_device_info(g_dev, &di));
    bytes[9] = kiln_attention_bwd_scratch_size_sm(&b, di.sm_version);
    for (int i = 0; i < 10; i++) TRY(kiln_malloc(g_dev, bytes[i], &ptr[i]));
    TRY(kiln_memcpy_htod(g_dev, ptr[0], c->q, bytes[0]));
    TRY(kiln_memcpy_htod(g_dev, ptr[1], c->k, bytes[1]));
    TRY(kiln_memcpy_htod(g_dev, ptr[2], c->v, bytes[2]));
    TRY(kiln_memcpy_htod(g_dev, ptr[5], c->dout, bytes[5]));
    KilnAttentionParams *f = &b.fwd;
    f->q = ptr[0], f->k = ptr[1], f->v = ptr[2], f->o = ptr[3], f->lse = ptr[4];
    memcpy(f->q_stride, c->p.q_stride, sizeof f->q_stride);
    memcpy(f->k_stride, c->p.k_stride, sizeof f->k_stride);
    memcpy(f->v_stride, c->p.v_stride, sizeof f->v_stride);
    memcpy(f->o_stride, c->p.o_stride, sizeof f->o_stride);
    b.dout = ptr[5], b.dq = ptr[6], b.dk = ptr[7], b.dv = ptr[8], b.scratch = ptr[9];
    b.scratch_size = bytes[9];
    memcpy(b.dout_stride, c->p.o_stride, sizeof b.dout_stride);
    memcpy(b.dq_stride, c->p.q_stride, sizeof b.dq_stride);
    memcpy(b.dk_stride, c->p.k_stride, sizeof b.dk_stride);
    memcpy(b.dv_stride, c->p.v_stride, sizeof b.dv_stride);
    TRY(kiln_attention_fwd(g_dev, f, s));
    void *out[2][3] = {{c->dq, c->dk, c->dv}, {c->dq2, c->dk2, c->dv2}};
    for (int run = 0; run < 1 + c->det; run++) {
        for (int i = 6; i < 10; i++) TRY(kiln_memset(g_dev, ptr[i], 0xFF, bytes[i]));
        TRY(kiln_synchronize(g_dev));
        double t0 = gu_now_ms();
        TRY(kiln_attention_bwd(g_dev, &b, s));
        TRY(s ? kiln_stream_synchronize(s) : kiln_synchronize(g_dev));
        double ms = gu_now_ms() - t0;
        if (run == 0) c->ms_first = ms;
        else c->ms_gpu = ms;
        for (int t = 0; t < 3; t++) TRY(kiln_memcpy_dtoh(g_dev, out[run][t], ptr[6 + t], bytes[6 + t]));
    }
    if (!c->det) {   /* time a warm call */
        double t0 = gu_now_ms();
        TRY(kiln_attention_bwd(g_dev, &b, s));
        TRY(s ? kiln_stream_synchronize(s) : kiln_synchronize(g_dev));
        c->ms_gpu = gu_now_ms() - t0;
    }
done:
    if (c->st != KILN_OK) snprintf(c->why, sizeof c->why, "%s: %.180s", kiln_status_name(c->st), kiln_last_error());
    for (int i = 0; i < 10; i++) kiln_free(g_dev, ptr[i]);
}

static void judge(Case *c)
{
    if (c->st != KILN_OK) return;
    const AttnProblem *p = &c->p;
    int D = p->head_dim;
    size_t nq = (size_t)p->batch * p->heads_q * p->seqlen_q * D, nkv = (size_t)p->batch * p->heads_kv * p->seqlen_k * D;
    double *ref = malloc(sizeof(double) * (nq + 2 * nkv + 1)), *pl = malloc(sizeof(double) * (nq + 2 * nkv + 1));
    attn_ref_bwd(p, c->q, c->k, c->v, c->dout, ref, ref + nq, ref + nq + nkv);
    attn_ref_bwd_torchlike(p, c->q, c->k, c->v, c->dout, pl, pl + nq, pl + nq + nkv);
    const void *x[3] = {c->dq, c->dk, c->dv};
    const int64_t *st[3] = {p->q_stride, p->k_stride, p->v_stride};
    for (int t = 0; t < 3; t++) {
        int nh = t ? p->heads_kv : p->heads_q, ns = t ? p->seqlen_k : p->seqlen_q;
        const double *r = ref + (t == 0 ? 0 : t == 1 ? nq : nq + nkv), *pp = pl + (t == 0 ? 0 : t == 1 ? nq : nq + nkv);
        c->err[t] = attn_grad_max_err(p->dtype, x[t], st[t], p->batch, nh, ns, D, r, &c->nonfinite);
        c->bound[t] = 2 * attn_dense_max_diff(pp, r, t ? nkv : nq) + 1e-5;
        c->pad_bad += attn_pad_clobbered(x[t], t ? c->nkv : c->nq, st[t], p->batch, nh, ns, D);
    }
    for (int b = 0; b < p->batch; b++)
        for (int h = 0; h < p->heads_q; h++)
            for (int i = 0; i < p->seqlen_q; i++)
                for (int d = 0; attn_row_empty(p, b, h, i) && d < D; d++)
                    c->empty_bad += attn_get(p->dtype, c->dq, (size_t)(b * st[0][0] + h * st[0][1] + i * st[0][2] + d)) != 0;
    size_t es = attn_dtype_size(c->dtype);
    c->bit_identical = !c->det || (!memcmp(c->dq, c->dq2, c->nq * es) && !memcmp(c->dk, c->dk2, c->nkv * es) &&
                                   !memcmp(c->dv, c->dv2, c->nkv * es));
    free(ref);
    free(pl);
    static const char *nm[3] = {"dQ", "dK", "dV"};
    int bad_t = -1;
    for (int t = 0; t < 3 && bad_t < 0; t++)
        if (!(c->err[t] <= c->bound[t])) bad_t = t;
    if (c->nonfinite)
        snprintf(c->why, sizeof c->why, "%lld non-finite gradient elements", (long long)c->nonfinite);
    else if (bad_t >= 0)
        snprintf(c->why, sizeof c->why, "max |%s - ref| %.3g > bound %.3g", nm[bad_t], c->err[bad_t], c->bound[bad_t]);
    else if (c->empty_bad)
        snprintf(c->why, sizeof c->why, "%lld dQ elements of rows with no key are not 0", (long long)c->empty_bad);
    else if (c->pad_bad)
        snprintf(c->why, sizeof c->why, "%lld elements outside the outputs were written", (long long)c->pad_bad);
    else if (!c->bit_identical)
        snprintf(c->why, sizeof c->why, "deterministic mode: two runs differ");
    else
        c->pass = 1;
}

/* Issue 24: batch * heads_q above 65535 runs as launches of whole batches (2049 x 32 =
 * 65568: 2047 batches, then 2), deterministic. The first and the last batch of the big
 * call must be bit-identical to calls on that batch alone (same kernels, same inputs):
 * any wrong per-launch offset of a tensor, LSE or delta would differ. Returns 1 on pass. */
static int big_batch_matches_alone(const KilnDeviceInfo *info)
{
    enum { B = 2049, H = 32, S = 16, D = 64, NT = 9 };   /* q k v o dout dq dk dv + lse */
    const size_t per_b = (size_t)H * S * D, n = (size_t)B * per_b, lse_b = (size_t)H * S;
    uint16_t *host = malloc(n * 2), *got = malloc(per_b * 2 * 3), *want = malloc(per_b * 2 * 3);
    KilnDevPtr t[NT] = {0}, scratch = 0, one[NT] = {0}, one_scratch = 0;
    KilnStatus st = host && got && want ? KILN_OK : KILN_ERR_INTERNAL;
    uint64_t x = 0x9E3779B97F4A7C15ull;
    for (int i = 0; i < NT && st == KILN_OK; i++) st = kiln_malloc(g_dev, i == 8 ? n / D * 4 : n * 2, &t[i]);
    for (int k = 0; k < 5 && st == KILN_OK; k++) {   /* q, k, v, (o), dout: random in [-1, 1) */
        if (k == 3) continue;
        for (size_t i = 0; i < n; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            host[i] = kiln_f32_to_f16((float)((x >> 40) & 0xffffff) / 8388608.0f - 1.0f);
        }
        st = kiln_memcpy_htod(g_dev, t[k], host, n * 2);
    }
    KilnAttentionBwdParams b = {.fwd = {.dtype = KILN_F16, .batch = B, .heads_q = H, .heads_kv = H, .seqlen_q = S,
                                        .seqlen_k = S, .head_dim = D, .causal = 1, .q = t[0], .k = t[1], .v = t[2],
                                        .o = t[3], .lse = t[8]},
                                .dout = t[4], .dq = t[5], .dk = t[6], .dv = t[7], .deterministic = 1};
    const int64_t dense[3] = {(int64_t)per_b, (int64_t)S * D, D};
    int64_t *sts[] = {b.fwd.q_stride, b.fwd.k_stride, b.fwd.v_stride, b.fwd.o_stride,
                      b.dout_stride, b.dq_stride, b.dk_stride, b.dv_stride};
    for (int i = 0; i < 8; i++) memcpy(sts[i], dense, sizeof dense);
    b.scratch_size = kiln_attention_bwd_scratch_size_sm(&b, info->sm_version);
    if (st == KILN_OK) st = kiln_malloc(g_dev, b.scratch_size, &scratch);
    b.scratch = scratch;
    if (st == KILN_OK) st = kiln_attention_fwd(g_dev, &b.fwd, NULL);
    if (st == KILN_OK) st = kiln_attention_bwd(g_dev, &b, NULL);
    int same = st == KILN_OK;
    for (int which = 0; which < 2 && same; which++) {
        int b0 = which ? B - 1 : 0;
        KilnAttentionBwdParams a = b;   /* batch b0 alone, into buffers of its own */
        a.fwd.batch = 1;
        KilnDevPtr *ins[] = {&a.fwd.q, &a.fwd.k, &a.fwd.v, &a.dout};
        for (int i = 0; i < 4; i++) *ins[i] += (KilnDevPtr)((size_t)b0 * per_b * 2);
        for (int i = 0; i < 4 && st == KILN_OK; i++)   /* o dq dk dv, lse */
            if (!one[i]) st = kiln_malloc(g_dev, per_b * 2, &one[i]);
        if (st == KILN_OK && !one[4]) st = kiln_malloc(g_dev, lse_b * 4, &one[4]);
        a.fwd.o = one[0], a.dq = one[1], a.dk = one[2], a.dv = one[3], a.fwd.lse = one[4];
        a.scratch_size = kiln_attention_bwd_scratch_size_sm(&a, info->sm_version);
        if (st == KILN_OK && !one_scratch) st = kiln_malloc(g_dev, a.scratch_size, &one_scratch);
        a.scratch = one_scratch;
        if (st == KILN_OK) st = kiln_attention_fwd(g_dev, &a.fwd, NULL);
        if (st == KILN_OK) st = kiln_attention_bwd(g_dev, &a, NULL);
        for (int g = 0; g < 3 && st == KILN_OK; g++) {
            st = kiln_memcpy_dtoh(g_dev, want + g * per_b, one[1 + g], per_b * 2);
            if (st == KILN_OK)
                st = kiln_memcpy_dtoh(g_dev, got + g * per_b, t[5 + g] + (KilnDevPtr)((size_t)b0 * per_b * 2), per_b * 2);
        }
        same = st == KILN_OK && !memcmp(got, want, per_b * 2 * 3);
        if (!same && st == KILN_OK) printf("FAIL: big batch: batch %d's gradients differ from a call on it alone\n", b0);
    }
    if (st != KILN_OK) printf("FAIL: big batch: %s: %s\n", kiln_status_name(st), kiln_last_error());
    else if (same) printf("PASS: batch * heads_q = %d backward (launches of whole batches) matches per-batch calls\n", B * H);
    for (int i = 0; i < NT; i++) kiln_free(g_dev, t[i]), kiln_free(g_dev, one[i]);
    kiln_free(g_dev, scratch);
    kiln_free(g_dev, one_scratch);
    free(host), free(got), free(want);
    return same && st == KILN_OK;
}

int main(void)
{
    KilnDeviceInfo info;
    int started = gu_begin(&g_dev, &info, "/tmp/kiln-attn-bwd-cache-XXXXXX");
    if (started >= 0) return started;
    if (kiln_stream_create(g_dev, &g_stream) != KILN_OK) return printf("FAIL: stream: %s\n", kiln_last_error()), 1;
    static const int dims[] = {32, 64, 96, 128, 256};
    static const struct { int sq, sk; } lens[] = {{17, 17}, {45, 61}, {130, 300}, {300, 130}, {256, 256}};
    static const struct { int hq, hkv; } groups[] = {{2, 2}, {4, 2}, {4, 1}, {3, 3}};
    Case cases[60];
    int n = 0;
    for (int dt = 0; dt < 2; dt++)
        for (int di = 0; di < 5; di++)
            for (int causal = 0; causal < 2; causal++)
                for (int det = 0; det < 2; det++, n++) {
                    int r = n + di;
                    cases[n] = (Case){.dtype = dt ? ATTN_BF16 : ATTN_F16, .d = dims[di], .causal = causal, .det = det,
                                      .batch = r % 3 == 0 ? 2 : 1, .hq = groups[r % 4].hq, .hkv = groups[r % 4].hkv,
                                      .sq = lens[r % 5].sq, .sk = lens[r % 5].sk, .pad = r % 3 == 1 ? 8 : 0,
                                      .layout = (AttnLayout)(r % 2)};
                }
    cases[n++] = (Case){.dtype = ATTN_F16, .d = 64, .causal = 1, .det = 0, .batch = 1, .hq = 4, .hkv = 2, .sq = 200,
                        .sk = 333, .block_m = 32, .block_n = 32};
    cases[n++] = (Case){.dtype = ATTN_BF16, .d = 128, .causal = 1, .det = 1, .batch = 2, .hq = 2, .hkv = 1, .sq = 150,
                        .sk = 150, .on_stream = 1, .layout = ATTN_BHSD};
    /* caller schedules BMxBN/warps/stages on sm_90a's wgmma paths: one stage (Q and dO, or K
     * and V, staged once per step and read again as their transpose: smem.view) and two
     * (cp.async slots read through a trans), both dQ paths */
    cases[n++] = (Case){.dtype = ATTN_F16, .d = 128, .causal = 1, .det = 1, .batch = 1, .hq = 4, .hkv = 2, .sq = 200,
                        .sk = 333, .block_m = 64, .block_n = 64, .warps = 4, .stages = 1};
    cases[n++] = (Case){.dtype = ATTN_BF16, .d = 64, .causal = 0, .det = 0, .batch = 2, .hq = 2, .hkv = 2, .sq = 300,
                        .sk = 130, .block_m = 64, .block_n = 128, .warps = 8, .stages = 1, .layout = ATTN_BHSD};
    cases[n++] = (Case){.dtype = ATTN_F16, .d = 64, .causal = 1, .det = 1, .batch = 1, .hq = 3, .hkv = 1, .sq = 300,
                        .sk = 130, .block_m = 64, .block_n = 64, .warps = 4, .stages = 2, .pad = 8};
    cases[n++] = (Case){.dtype = ATTN_BF16, .d = 128, .causal = 0, .det = 0, .batch = 1, .hq = 2, .hkv = 1, .sq = 77,
                        .sk = 200, .block_m = 16, .block_n = 64, .warps = 4, .stages = 2};
    /* the atomic dQ at the sm_90 rows' tiles: dS K on wgmma (A = dS^T staged through SRAM and
     * read transposed, B = the K tile already there), added into DQ_ACC straight from the
     * accumulator by red.global.add.v2.f32 */
    cases[n++] = (Case){.dtype = ATTN_F16, .d = 128, .causal = 1, .det = 0, .batch = 1, .hq = 4, .hkv = 2, .sq = 200,
                        .sk = 333, .block_m = 64, .block_n = 64, .warps = 4, .stages = 2, .pad = 8};
    cases[n++] = (Case){.dtype = ATTN_BF16, .d = 64, .causal = 0, .det = 0, .batch = 2, .hq = 3, .hkv = 1, .sq = 300,
                        .sk = 130, .block_m = 64, .block_n = 64, .warps = 4, .stages = 2, .layout = ATTN_BHSD};
    /* head dim 256 on sm_90a's two warpgroup columns (8 warps on 64 keys / rows, every dot's N
     * split between the warpgroups; the sweep above runs the table's rows): the atomic dQ
     * (its dS K split too, red from the accumulator) and one stage (Q, dO staged per step) */
    cases[n++] = (Case){.dtype = ATTN_F16, .d = 256, .causal = 1, .det = 0, .batch = 1, .hq = 4, .hkv = 2, .sq = 200,
                        .sk = 333, .block_m = 64, .block_n = 64, .warps = 8, .stages = 2};
    cases[n++] = (Case){.dtype = ATTN_BF16, .d = 256, .causal = 0, .det = 1, .batch = 1, .hq = 2, .hkv = 1, .sq = 130,
                        .sk = 300, .block_m = 64, .block_n = 64, .warps = 8, .stages = 1, .layout = ATTN_BHSD};
    /* FlashAttention-3's dK/dV structure (64 x 128 on 8 warps with warp specialisation and TMA
     * copies of Q and dO; the FLAT_GROUP loops walk the GQA group) and the dQ pass at 128 x 64 /
     * 8, both warp-specialised: head dims 64, 96, 128, GQA and MQA, causal with both length
     * orders, ragged, wider strides, both dQ paths (the atomic one too: its dS^T staged through
     * SRAM keeps the mbarrier ring under warp specialisation, guarded by the consumers' named
     * barrier) */
    cases[n++] = (Case){.dtype = ATTN_F16, .d = 128, .causal = 1, .det = 1, .batch = 2, .hq = 4, .hkv = 2, .sq = 300,
                        .sk = 333, .block_m = 64, .block_n = 128, .warps = 8, .stages = 2, .ws = 1};
    cases[n++] = (Case){.dtype = ATTN_BF16, .d = 128, .causal = 0, .det = 1, .batch = 1, .hq = 3, .hkv = 1, .sq = 130,
                        .sk = 300, .block_m = 64, .block_n = 128, .warps = 8, .stages = 2, .ws = 1, .pad = 8};
    cases[n++] = (Case){.dtype = ATTN_F16, .d = 64, .causal = 1, .det = 0, .batch = 1, .hq = 4, .hkv = 1, .sq = 333,
                        .sk = 200, .block_m = 64, .block_n = 128, .warps = 8, .stages = 2, .ws = 1};
    cases[n++] = (Case){.dtype = ATTN_BF16, .d = 96, .causal = 1, .det = 1, .batch = 1, .hq = 2, .hkv = 2, .sq = 256,
                        .sk = 256, .block_m = 64, .block_n = 128, .warps = 8, .stages = 2, .ws = 1,
                        .layout = ATTN_BHSD};
    cases[n++] = (Case){.dtype = ATTN_F16, .d = 64, .causal = 0, .det = 1, .batch = 2, .hq = 2, .hkv = 1, .sq = 45,
                        .sk = 61, .block_m = 64, .block_n = 128, .warps = 8, .stages = 3, .ws = 1};
    /* the same structure where the loop body has SRAM buffers of its own, with FA3's 24 / 240
     * register split (lean_producer): the atomic dQ at d 128 (dS^T staged for dS K), and d 256
     * at 64 x 64 / 8 / 2 for both kernels (P^T, dS^T staged as both warpgroups' A; delta read
     * after dP^T), both dQ paths (tools/device_bench_bwd.sh's candidates) */
    cases[n++] = (Case){.dtype = ATTN_BF16, .d = 128, .causal = 1, .det = 0, .batch = 1, .hq = 4, .hkv = 2, .sq = 300,
                        .sk = 333, .block_m = 64, .block_n = 128, .warps = 8, .stages = 2, .ws = 2};
    cases[n++] = (Case){.dtype = ATTN_F16, .d = 256, .causal = 1, .det = 1, .batch = 1, .hq = 4, .hkv = 2, .sq = 200,
                        .sk = 333, .block_m = 64, .block_n = 64, .warps = 8, .stages = 2, .ws = 2};
    cases[n++] = (Case){.dtype = ATTN_BF16, .d = 256, .causal = 0, .det = 0, .batch = 1, .hq = 2, .hkv = 1, .sq = 130,
                        .sk = 300, .block_m = 64, .block_n = 64, .warps = 8, .stages = 2, .ws = 2,
                        .layout = ATTN_BHSD};
    /* a quick partial run: ATTN_FIRST_CASE=40 runs the caller-schedule cases only (50: the
     * warp-specialised ones; 55: those whose loop bodies have SRAM buffers, lean_producer) */
    const char *first_env = getenv("ATTN_FIRST_CASE");
    int first = first_env && atoi(first_env) > 0 && atoi(first_env) < n ? atoi(first_env) : 0;
    int pass = 0, identical = 0, ndet = 0;
    double worst_ratio[3] = {0, 0, 0};
    printf("  # dtype   d mask   det B Hq/kv len      lay   dQ err/bound        dK err/bound        dV err/bound"
           "      first_ms  warm_ms  result\n");
    for (int i = first; i < n; i++) {
        Case *c = &cases[i];
        host_setup(c, 4000 + 13 * (uint64_t)i);
        gpu_run(c);
        /* progress, so a slow compile or a hung kernel shows where */
        fprintf(stderr, "[%d/%d] %s d=%d %s det=%d %dx%d: first call %.0f ms%s%s\n", i + 1, n,
                c->dtype == ATTN_BF16 ? "bf16" : "f16", c->d, c->causal ? "causal" : "full", c->det, c->sq, c->sk,
                c->ms_first, c->st ? " " : "", c->why);
        judge(c);
        pass += c->pass;
        ndet += c->det;
        identical += c->det && c->st == KILN_OK && c->bit_identical;
        for (int t = 0; t < 3 && c->st == KILN_OK; t++) worst_ratio[t] = fmax(worst_ratio[t], c->err[t] / c->bound[t]);
        printf("%3d %-5s %3d %-6s %d   %d %d/%d %4dx%-4d %s%s %8.2g/%-8.2g %8.2g/%-8.2g %8.2g/%-8.2g %9.1f %8.2f  %s%s%s\n",
               i, c->dtype == ATTN_BF16 ? "bf16" : "f16", c->d, c->causal ? "causal" : "full", c->det, c->batch, c->hq,
               c->hkv, c->sq, c->sk, c->layout == ATTN_BSHD ? "bshd" : "bhsd", c->pad ? "+" : " ", c->err[0],
               c->bound[0], c->err[1], c->bound[1], c->err[2], c->bound[2], c->ms_first, c->ms_gpu,
               c->pass ? "PASS" : "FAIL", c->pass ? "" : ": ", c->why);
        host_free(c);
    }
    printf("ROW attn_bwd %s: %d/%d cases pass; worst err/bound dQ %.2f dK %.2f dV %.2f; deterministic "
           "bit-identical %d/%d; %d variants cached\n",
           info.name, pass, n - first, worst_ratio[0], worst_ratio[1], worst_ratio[2], identical, ndet,
           kiln_attention_cache_size(g_dev));
    int big = big_batch_matches_alone(&info);
    kiln_attention_cache_clear(g_dev);
    kiln_stream_destroy(g_stream);
    kiln_shutdown(g_dev);
    return pass == n - first && big ? EXIT_SUCCESS : EXIT_FAILURE;
}
