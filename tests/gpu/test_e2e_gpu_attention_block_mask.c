/* test_e2e_gpu_attention_block_mask.c — block masks on the GPU: kiln_attention_block_mask_create
 * and kiln_attention_fwd with KilnAttentionParams.block_mask, against float64.
 *
 * For each case (variant x shape): the mask is made on the device (FlexAttention's 128 x 128
 * blocks, or others), copied back and checked exhaustively against the float64 reference's
 * mask evaluated on every element (block_mask_check.h: every class, every list, the
 * transposed lists too); then the forward with the mask is judged by FlashAttention's rule
 * (|O - ref| <= 2 |O_plain - ref| + 1e-5, LSE 1e-4 relative, rows that see no key O = 0 /
 * LSE = -inf) and compared with the same forward without the mask. Variants: the causal flag
 * alone, sliding window (causal), document ids (per-batch mask), prefix-LM, Gemma 2 (soft-cap
 * + window: the mask made from the same variant, its score_mod unused by the classifier), a
 * per-head mask of the test's own; shapes f16 d128 GQA 1000 tokens and bf16 d64 ragged
 * 333 x 517 with 64 x 128 mask blocks. Inputs random in NaN-filled buffers, outputs
 * poisoned. One line per case with the mask's first (cold compile) and second create time and
 * the forward's time with and without the mask (a warm call each). KILN_BM_BENCH=1 instead
 * Then the backward (kiln_attention_bwd with fwd.block_mask) from that forward's O and LSE, its
 * dQ, dK, dV judged the same way against float64 and compared with the backward without the
 * mask: the runtime's plan, deterministic, or the caller's 64 x 64 tiles with the atomic dQ
 * (k_bwd_mode). KILN_BM_BENCH=1 instead
 * times the shapes (bench(): sliding window 1024 and document masking, B 2, H 16,
 * N 8192, d 128, f16) with and without the mask, one "BENCH" line each.
 *
 * Without a GPU: "SKIP: no GPU (...)" and exit 77.
 */
#include "kiln.h"
#include "tests/gpu/gpu_util.h"
#include "tools/attn_ref.c"   /* the reference is a tool, not a library: compiled in here */
#include "tests/attention/variant_refs.h"
#include "tests/attention/block_mask_check.h"

#include <stdio.h>
#include <stdlib.h>

static KilnDevice *g_dev;
static int g_fail;

typedef struct GCase {
    const char *what;
    VarSpec v;                /* v.variant NULL: no variant; "mixed": block_mask_check.h's */
    AttnDtype dt;
    int batch, hq, hkv, sq, sk, d, causal;
    int bq, bk, mb, mh;       /* the mask's blocks, batch and heads */
} GCase;

#define V(name) "lang/lib/variants/" name ".tile"
static const GCase k_cases[] = {
    {"causal flag", {NULL, NULL, NULL, {0}}, ATTN_F16, 2, 4, 2, 1000, 1000, 128, 1, 128, 128, 1, 1},
    {"sliding window 255", {V("sliding_window"), NULL, m_window, {.left = 255, .right = 0}}, ATTN_F16, 2, 4, 2, 1000,
     1000, 128, 1, 128, 128, 1, 1},
    {"document", {V("document"), NULL, m_document, {0}}, ATTN_F16, 2, 4, 2, 1000, 1000, 128, 0, 128, 128, 2, 1},
    {"prefix_lm 300", {V("prefix_lm"), NULL, m_prefix, {.prefix = 300}}, ATTN_F16, 2, 4, 2, 1000, 1000, 128, 0, 128,
     128, 1, 1},
    {"gemma2", {V("gemma2"), s_softcap, m_window, {.softcap = 5.0, .left = 200, .right = 0}}, ATTN_F16, 2, 4, 2, 1000,
     1000, 128, 1, 128, 128, 1, 1},
    {"mixed per head", {"mixed", NULL, m_mixed, {0}}, ATTN_F16, 2, 4, 2, 1000, 1000, 128, 0, 128, 128, 2, 4},
    {"window bf16 ragged", {V("sliding_window"), NULL, m_window, {.left = 100, .right = 30}}, ATTN_BF16, 2, 2, 2, 333,
     517, 64, 1, 64, 128, 1, 1},
    {"document bf16 ragged", {V("document"), NULL, m_document, {0}}, ATTN_BF16, 2, 2, 2, 333, 517, 64, 1, 64, 128, 2,
     1},
};

static KilnDevPtr up(const void *host, size_t bytes) { return gu_upload(g_dev, host, bytes); }

static void *down(KilnDevPtr d, size_t bytes)
{
    void *h = malloc(bytes ? bytes : 16);
    kiln_synchronize(g_dev);
    kiln_memcpy_dtoh(g_dev, h, d, bytes);
    return h;
}

/* Device copies of the variant's tensors; the args then carry device addresses. */
static void upload_args(Inputs *in)
{
    for (int i = 0; i < in->nargs; i++) {
        KilnVariantArg *a = &in->args[i];
        if (a->value.kind == KILN_PARAM_PTR) a->value = kiln_arg_ptr(up((const void *)(uintptr_t)a->value.v.ptr, a->bytes));
    }
}

/* The strides of p into a (the reference's dense layout). */
static void copy_strides(KilnAttentionParams *a, const AttnProblem *p)
{
    memcpy(a->q_stride, p->q_stride, sizeof a->q_stride);
    memcpy(a->k_stride, p->k_stride, sizeof a->k_stride);
    memcpy(a->v_stride, p->v_stride, sizeof a->v_stride);
    memcpy(a->o_stride, p->o_stride, sizeof a->o_stride);
}

/* Make the block mask of call a on the device: once cold (the classifier compiles), then
 * `reps` times warm; *cold_ms, *warm_ms (mean). */
static KilnStatus make_mask(const KilnAttentionParams *a, KilnBlockMask *m, int reps, double *cold_ms,
                            double *warm_ms)
{
    m->bytes = kiln_attention_block_mask_size(a, m);
    m->data = up(NULL, m->bytes);
    double t0 = gu_now_ms();
    KilnStatus st = kiln_attention_block_mask_create(g_dev, a, m, NULL);
    kiln_synchronize(g_dev);
    *cold_ms = gu_now_ms() - t0;
    t0 = gu_now_ms();
    for (int i = 0; i < reps && st == KILN_OK; i++) st = kiln_attention_block_mask_create(g_dev, a, m, NULL);
    kiln_synchronize(g_dev);
    *warm_ms = (gu_now_ms() - t0) / reps;
    return st;
}

/* Time one call (synchronised), ms; *st its status. */
static double timed_fwd(const KilnAttentionParams *a, KilnStatus *st)
{
    double t0 = gu_now_ms();
    *st = kiln_attention_fwd(g_dev, a, NULL);
    kiln_synchronize(g_dev);
    return gu_now_ms() - t0;
}

/* Per case, the backward's mode (run_bwd), -1 none: each dQ path on both dtypes, GQA with a
 * per-head mask, ragged lengths; the float64 backward of a 1000-token case takes seconds. */
static const int k_bwd_mode[sizeof k_cases / sizeof k_cases[0]] = {0, 1, -1, 2, -1, 1, 2, 0};

static bool judge_fwd(const GCase *c, const AttnProblem *p, const void *q, const void *k, const void *v,
                      const void *o, const float *lse, double *err, double *bound)
{
    size_t nrow = (size_t)c->batch * c->hq * c->sq;
    double *ref = malloc(sizeof(double) * nrow * c->d), *plain = malloc(sizeof(double) * nrow * c->d);
    double *rlse = malloc(sizeof(double) * nrow);
    attn_ref_fwd(p, q, k, v, ref, rlse);
    attn_ref_torchlike(p, q, k, v, plain);
    AttnErr e = attn_compare(p, o, lse, ref, rlse);
    *bound = 2 * attn_max_abs_diff(p, plain, ref) + 1e-5;
    *err = e.o_max_abs;
    bool ok = e.nonfinite == 0 && e.o_max_abs <= *bound && e.lse_max_rel <= 1e-4 && attn_check_empty_rows(p, o, lse) == 0;
    free(ref), free(plain), free(rlse);
    return ok;
}

/* The backward of call a (its O and LSE already computed) with the block mask m and without
 * it: gradients judged by FlashAttention's rule against float64 (|g - ref| <= 2 |g_plain - ref|
 * + 1e-5) and compared with each other. mode 0: the runtime's own plan; 1: deterministic;
 * 2: the caller's 64 x 64 tiles, not deterministic (the atomic dQ in the dK/dV kernel). */
static bool run_bwd(const GCase *c, const AttnProblem *p, const KilnAttentionParams *a, const KilnBlockMask *m,
                    const void *q, const void *k, const void *v, int mode, uint64_t seed)
{
    size_t es = attn_dtype_size(c->dt), nq = attn_numel_q(p), nkv = attn_numel_kv(p);
    void *dout = malloc(nq * es);
    attn_fill_random(c->dt, dout, nq, seed + 3, -1, 1);
    KilnAttentionBwdParams b = {.fwd = *a, .dout = up(dout, nq * es), .deterministic = mode == 1,
                                .block_m = mode == 2 ? 64 : 0, .block_n = mode == 2 ? 64 : 0};
    memcpy(b.dout_stride, a->o_stride, sizeof b.dout_stride);
    memcpy(b.dq_stride, a->q_stride, sizeof b.dq_stride);
    memcpy(b.dk_stride, a->k_stride, sizeof b.dk_stride);
    memcpy(b.dv_stride, a->v_stride, sizeof b.dv_stride);
    size_t n[3] = {nq, nkv, nkv};
    void *g[2][3] = {{0}};
    KilnStatus st = KILN_OK;
    for (int with = 1; with >= 0 && st == KILN_OK; with--) {
        b.fwd.block_mask = with ? m : NULL;
        b.dq = up(NULL, nq * es), b.dk = up(NULL, nkv * es), b.dv = up(NULL, nkv * es);
        b.scratch_size = kiln_attention_bwd_scratch_size(&b);
        b.scratch = up(NULL, b.scratch_size);
        st = kiln_attention_bwd(g_dev, &b, NULL);
        KilnDevPtr d[3] = {b.dq, b.dk, b.dv};
        for (int t = 0; t < 3 && st == KILN_OK; t++) g[!with][t] = down(d[t], n[t] * es);
    }
    if (st != KILN_OK) {
        printf("FAIL %-22s backward: %s: %s\n", c->what, kiln_status_name(st), kiln_last_error());
        free(dout);
        return false;
    }
    double *ref = malloc(sizeof(double) * (nq + 2 * nkv)), *pl = malloc(sizeof(double) * (nq + 2 * nkv));
    attn_ref_bwd(p, q, k, v, dout, ref, ref + nq, ref + nq + nkv);
    attn_ref_bwd_torchlike(p, q, k, v, dout, pl, pl + nq, pl + nq + nkv);
    const double *rr[3] = {ref, ref + nq, ref + nq + nkv}, *pp[3] = {pl, pl + nq, pl + nq + nkv};
    const int64_t *sts[3] = {p->q_stride, p->k_stride, p->v_stride};
    bool ok = true;
    char line[512];
    int at = 0;
    for (int t = 0; t < 3; t++) {
        int nh = t ? c->hkv : c->hq, ns = t ? c->sk : c->sq;
        int64_t nf = 0;
        double err = attn_grad_max_err(c->dt, g[0][t], sts[t], c->batch, nh, ns, c->d, rr[t], &nf);
        double bound = 2 * attn_dense_max_diff(pp[t], rr[t], n[t]) + 1e-5, diff = 0;
        for (size_t i = 0; i < n[t]; i++) diff = gu_worse(diff, attn_get(c->dt, g[0][t], i), attn_get(c->dt, g[1][t], i));
        ok = ok && nf == 0 && err <= bound && diff <= 2 * bound;
        at += snprintf(line + at, sizeof line - (size_t)at, "  %s err %.3g bound %.3g |mask - no mask| %.3g%s",
                       t == 0 ? "dQ" : t == 1 ? "dK" : "dV", err, bound, diff, nf ? " NON-FINITE" : "");
    }
    printf("%s %-22s backward (%s)%s\n", ok ? "ok  " : "FAIL", c->what,
           mode == 0 ? "plan" : mode == 1 ? "deterministic" : "64x64 atomic dQ", line);
    for (int w = 0; w < 2; w++)
        for (int t = 0; t < 3; t++) free(g[w][t]);
    free(ref), free(pl), free(dout);
    return ok;
}

static void run_case(const GCase *c, uint64_t seed, int bwd_mode)
{
    AttnProblem p = {.batch = c->batch, .heads_q = c->hq, .heads_kv = c->hkv, .seqlen_q = c->sq, .seqlen_k = c->sk,
                     .head_dim = c->d, .causal = c->causal, .scale = 1.0 / sqrt((double)c->d), .dtype = c->dt};
    attn_set_strides(&p, ATTN_BSHD);
    Inputs in;
    KilnAttentionVariant var = {0};
    const KilnAttentionVariant *vp = NULL;
    if (c->v.variant && !strcmp(c->v.variant, "mixed")) {
        bm_mixed_inputs(&in, 300, 170);
        var = (KilnAttentionVariant){.source = k_mixed_src, .path = "mixed.tile"};
    } else if (c->v.variant) {
        make_inputs_for(&c->v, c->batch, c->hq, c->sk > c->sq ? c->sk : c->sq, &in);
        var = (KilnAttentionVariant){.path = c->v.variant};
    }
    if (c->v.variant) {
        upload_args(&in);
        var.args = in.args;
        var.nargs = in.nargs;
        vp = &var;
        p.score_mod = var_ref_score(&c->v);
        p.mask_mod = c->v.mask;
        p.score_mod_grad = c->v.score == s_softcap ? g_softcap_grad : NULL;
    }
    size_t es = attn_dtype_size(c->dt), nq = attn_numel_q(&p), nkv = attn_numel_kv(&p);
    size_t nlse = (size_t)c->batch * c->hq * c->sq;
    void *q = malloc(nq * es), *k = malloc(nkv * es), *v = malloc(nkv * es);
    attn_fill_random(c->dt, q, nq, seed, -1, 1);
    attn_fill_random(c->dt, k, nkv, seed + 1, -1, 1);
    attn_fill_random(c->dt, v, nkv, seed + 2, -1, 1);
    KilnAttentionParams a = {.dtype = c->dt == ATTN_BF16 ? KILN_BF16 : KILN_F16, .batch = c->batch,
                             .heads_q = c->hq, .heads_kv = c->hkv, .seqlen_q = c->sq, .seqlen_k = c->sk,
                             .head_dim = c->d, .q = up(q, nq * es), .k = up(k, nkv * es), .v = up(v, nkv * es),
                             .o = up(NULL, nq * es), .lse = up(NULL, nlse * 4), .causal = c->causal, .variant = vp};
    copy_strides(&a, &p);

    /* the mask: made twice (the first compiles the classifier), checked element by element */
    KilnBlockMask m = {.block_q = c->bq, .block_kv = c->bk, .batch = c->mb, .heads = c->mh};
    double create_cold, create_warm;
    KilnStatus st = make_mask(&a, &m, 1, &create_cold, &create_warm);
    if (st != KILN_OK) {
        printf("FAIL %-22s create: %s: %s\n", c->what, kiln_status_name(st), kiln_last_error());
        g_fail++;
        return;
    }
    void *mbuf = down(m.data, m.bytes);
    BmReport rep = bm_check(&p, &m, mbuf);
    if (rep.errors) {
        printf("FAIL %-22s classification: %d errors, first: %s\n", c->what, rep.errors, rep.first);
        g_fail++;
    }

    /* the forward with the mask (cold, then timed warm), then without */
    a.block_mask = &m;
    timed_fwd(&a, &st);
    double t_bm = st == KILN_OK ? timed_fwd(&a, &st) : 0;
    if (st != KILN_OK) {
        printf("FAIL %-22s forward: %s: %s\n", c->what, kiln_status_name(st), kiln_last_error());
        g_fail++;
        return;
    }
    void *o = down(a.o, nq * es);
    float *lse = down(a.lse, nlse * 4);
    double err, bound;
    bool ok = judge_fwd(c, &p, q, k, v, o, lse, &err, &bound);
    a.block_mask = NULL;
    kiln_memset(g_dev, a.o, GU_POISON_BYTE, nq * es);
    timed_fwd(&a, &st);
    double t_plain = st == KILN_OK ? timed_fwd(&a, &st) : 0;
    void *o2 = down(a.o, nq * es);
    float *lse2 = down(a.lse, nlse * 4);
    double diff = 0;
    for (size_t i = 0; i < nq; i++) diff = gu_worse(diff, attn_get(c->dt, o, i), attn_get(c->dt, o2, i));
    ok = ok && st == KILN_OK && diff <= bound;
    printf("%s %-22s %s d%-3d %4dx%-4d mask %dx%d (%dx%d rows) classes %d/%d/%d  create %7.1f / %6.3f ms  "
           "fwd %6.3f ms (no mask %6.3f)  err %.3g bound %.3g |O - O_nomask| %.3g\n",
           ok && !rep.errors ? "ok  " : "FAIL", c->what, c->dt == ATTN_BF16 ? "bf16" : "f16", c->d, c->sq, c->sk,
           m.block_q, m.block_kv, m.batch, m.heads, rep.seen[0], rep.seen[1], rep.seen[2], create_cold, create_warm,
           t_bm, t_plain, err, bound, diff);
    g_fail += !ok;
    /* the backward, from the forward's O and LSE (a.o, a.lse: the last forward's) */
    if (bwd_mode >= 0 && !run_bwd(c, &p, &a, &m, q, k, v, bwd_mode, seed)) g_fail++;
    free(q), free(k), free(v), free(o), free(lse), free(o2), free(lse2), free(mbuf);
}

/* ---- timing (KILN_BM_BENCH=1): the shapes, with and without the block mask ---- */

/* Sliding window 1024 (causal) and document masking (8 documents per sequence), B 2, H 16,
 * N 8192, d 128, f16, [b, s, h, d]: the forward's time with the block mask and without
 * (same variant), TFLOP/s over the visible entries (4 * visible * d), the mask's creation
 * (cold: compiles the classifier; warm), its classes, and max |O_mask - O_nomask|. */
static void bench(void)
{
    const int B = 2, H = 16, N = 8192, D = 128;
    const GCase cs[] = {
        {"sliding window 1024", {V("sliding_window"), NULL, m_window, {.left = 1024, .right = 0}}, ATTN_F16, B, H, H,
         N, N, D, 1, 128, 128, 1, 1},
        {"document (8 docs)", {V("document"), NULL, m_document, {0}}, ATTN_F16, B, H, H, N, N, D, 0, 128, 128, B, 1},
    };
    for (size_t ci = 0; ci < 2; ci++) {
        const GCase *c = &cs[ci];
        AttnProblem p = {.batch = B, .heads_q = H, .heads_kv = H, .seqlen_q = N, .seqlen_k = N, .head_dim = D,
                         .causal = c->causal, .scale = 1.0 / sqrt((double)D), .dtype = ATTN_F16,
                         .mask_mod = c->v.mask};
        attn_set_strides(&p, ATTN_BSHD);
        static Inputs in;
        make_inputs_for(&c->v, B, H, N, &in);
        /* make_inputs_for's documents are ~N/8 tokens (a VAR_MAX_TOKENS row each): spread
         * them over the whole sequence, 8 equal documents per sequence */
        static int32_t ids[2 * 8192];
        if (c->v.mask == m_document) {
            for (int b = 0; b < B; b++)
                for (int t = 0; t < N; t++) ids[b * N + t] = b * 8 + t / (N / 8);
            in.args[0] = (KilnVariantArg){"doc_ids", kiln_arg_ptr((uintptr_t)ids), sizeof ids};
            in.args[1] = (KilnVariantArg){"doc_stride", kiln_arg_i32(N), 0};
            in.args[2] = (KilnVariantArg){"doc_len", kiln_arg_i32(N), 0};
            g.doc = ids, g.doc_stride = N, g.doc_len = N;   /* the reference's view */
        }
        /* visible entries: a causal window of 1025 keys, or a document of N / 8 */
        double visible = 0;
        for (int i = 0; i < N; i++)
            if (c->v.mask == m_window) visible += (i < 1024 ? i + 1 : 1025);
            else visible += N / 8;
        visible *= B * H;
        upload_args(&in);
        KilnAttentionVariant var = {.path = c->v.variant, .args = in.args, .nargs = in.nargs};
        size_t n = attn_numel_q(&p);
        void *x = malloc(n * 2);
        attn_fill_random(ATTN_F16, x, n, 5, -1, 1);
        KilnAttentionParams a = {.dtype = KILN_F16, .batch = B, .heads_q = H, .heads_kv = H, .seqlen_q = N,
                                 .seqlen_k = N, .head_dim = D, .q = up(x, n * 2), .k = up(x, n * 2), .v = up(x, n * 2),
                                 .o = up(NULL, n * 2), .lse = up(NULL, (size_t)B * H * N * 4), .causal = c->causal,
                                 .variant = &var};
        copy_strides(&a, &p);
        KilnBlockMask m = {.block_q = 128, .block_kv = 128, .batch = c->mb, .heads = c->mh};
        double cold, warm;
        KilnStatus st = make_mask(&a, &m, 10, &cold, &warm);
        if (st != KILN_OK) {
            printf("FAIL %s create: %s\n", c->what, kiln_last_error());
            g_fail++;
            continue;
        }
        void *mbuf = down(m.data, m.bytes);
        BmReport rep = bm_check(&p, &m, mbuf);
        a.block_mask = &m;
        double with = gu_attention_fwd_ms(g_dev, &a, 20, &g_fail);
        void *o1 = down(a.o, n * 2);
        a.block_mask = NULL;
        double without = gu_attention_fwd_ms(g_dev, &a, 20, &g_fail);
        void *o2 = down(a.o, n * 2);
        double diff = 0;
        for (size_t i = 0; i < n; i++) diff = gu_worse(diff, attn_get(ATTN_F16, o1, i), attn_get(ATTN_F16, o2, i));
        printf("BENCH %-20s B%d H%d N%d d%d f16  block mask %.3f ms (%.0f TFLOP/s)  without %.3f ms (%.0f TFLOP/s)  "
               "speedup %.2fx  create %.1f ms cold / %.3f ms warm  classes %d/%d/%d%s  |O_mask - O_nomask| %.3g\n",
               c->what, B, H, N, D, with, 4 * visible * D / with * 1e-9, without, 4 * visible * D / without * 1e-9,
               without / with, cold, warm, rep.seen[0], rep.seen[1], rep.seen[2],
               rep.errors ? " CLASSIFICATION FAIL" : "", diff);
        g_fail += rep.errors > 0 || !(diff < 1e-2);
        free(x), free(mbuf), free(o1), free(o2);
    }
}

int main(void)
{
    KilnDeviceInfo info;
    int started = gu_begin(&g_dev, &info, "/tmp/kiln-attn-block-mask-cache-XXXXXX");
    if (started >= 0) return started;
    if (getenv("KILN_BM_BENCH")) bench();
    else
        for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0]; i++) run_case(&k_cases[i], 300 + (uint64_t)i * 10, k_bwd_mode[i]);
    return gu_end(g_dev, g_fail);
}
