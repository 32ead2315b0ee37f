/* test_e2e_attn_bwd_interp.c — the shipped FlashAttention backward program
 * (lang/lib/attention_bwd.tile) on the CPU interpreter, against the float64
 * analytic gradient of tools/attn_ref.c.
 *
 * Every case: random inputs (never zeros) written through the case's strides into
 * NaN-filled buffers, every output and scratch buffer poisoned with NaN, then
 * FlashAttention's rule for gradients, for dQ, dK and dV separately:
 * max |g - ref| <= 2 * max |g_plain - ref| + 1e-5, where g_plain is the same
 * backward computed in the storage dtype (attn_ref_bwd_torchlike). Rows that see
 * no key must get dQ = 0 exactly; nothing may be NaN. Both dQ paths (atomic_add
 * into f32 scratch, and the deterministic pass over query blocks) run, and the
 * runtime's own plan (rt_attn_bwd_plan: kernels, defines, tiles, grids) for every
 * head dim.
 *
 * The reference itself is checked against central finite differences of the
 * float64 forward's loss sum(O * dO), with and without a score_mod
 * (test_ref_matches_finite_differences),
 * and the rule must be able to fail (test_rule_catches_wrong_scale).
 */
#include "attn_bwd_harness.h"

/* A sliding window (keys i - 5 .. i) through the hooks, with kv_start skipping blocks. */
static const char k_window_hooks[] =
    "fn win_mask(b, h, q_idx, kv_idx) { return kv_idx >= q_idx - 5 && kv_idx <= q_idx; }\n"
    "fn win_start(start_m, block_m, seqlen_q, seqlen_k) { return start_m - 5; }\n";
static int ref_window(int b, int h, int i, int j, const void *ctx) { return j >= i - 5 && j <= i; }

/* Soft-capping (examples/attention/softcap.tile's, cap 1.5) with its derivative, and
 * ALiBi (slopes for 4 heads), whose derivative is the default 1. Log2 units in the
 * program, natural units in the reference. */
static const char k_score_hooks[] =
    "const SC = 1.5;\n"
    "fn sc_score(s, b, h, q_idx, kv_idx) { let c = SC * LOG2E; return c * tanh(s * (1.0 / c)); }\n"
    "fn sc_grad(s, b, h, q_idx, kv_idx) { let c = SC * LOG2E; let t = tanh(s * (1.0 / c)); return 1.0 - t * t; }\n"
    "fn alibi(s, b, h, q_idx, kv_idx) {\n"
    "    let slope = exp2((h + 1).to(f32) * (-8.0 / 4));\n"
    "    return s - (slope * LOG2E) * abs((q_idx - kv_idx).to(f32));\n"
    "}\n";
static double ref_softcap(double s, int b, int h, int i, int j, const void *ctx) { return 1.5 * tanh(s / 1.5); }
static double ref_softcap_grad(double s, int b, int h, int i, int j, const void *ctx)
{
    double t = tanh(s / 1.5);
    return 1 - t * t;
}
static double ref_alibi(double s, int b, int h, int i, int j, const void *ctx)
{
    return s - exp2(-8.0 * (h + 1) / 4) * fabs((double)(i - j));
}

#define C(...) {__VA_ARGS__}
static const BwdCase cases[] = {
    /* what, dtype, batch, hq, hkv, sq, sk, d, causal, layout, scale, block_m, block_n, pad; deterministic */
    {.c = C("f16 d64 ragged atomic", ATTN_F16, 1, 2, 2, 37, 37, 64, 0, ATTN_BSHD, 0, 16, 16, 0), .deterministic = 0},
    {.c = C("bf16 d64 causal bhsd deterministic", ATTN_BF16, 1, 2, 2, 37, 37, 64, 1, ATTN_BHSD, 0, 16, 16, 0), .deterministic = 1},
    {.c = C("f16 d32 causal sq<sk atomic", ATTN_F16, 1, 1, 1, 20, 45, 32, 1, ATTN_BSHD, 0, 16, 16, 0), .deterministic = 0},
    {.c = C("bf16 d96 causal sq>sk (empty rows) atomic", ATTN_BF16, 1, 1, 1, 45, 20, 96, 1, ATTN_BHSD, 0, 16, 16, 0), .deterministic = 0},
    {.c = C("f16 d96 causal sq>sk (empty rows) det", ATTN_F16, 1, 1, 1, 45, 20, 96, 1, ATTN_BSHD, 0, 16, 16, 0), .deterministic = 1},
    {.c = C("f16 d64 GQA 4/2 causal atomic", ATTN_F16, 1, 4, 2, 24, 24, 64, 1, ATTN_BSHD, 0, 16, 16, 0), .deterministic = 0},
    {.c = C("bf16 d32 MQA 4/1 scale 0.3 det", ATTN_BF16, 1, 4, 1, 19, 27, 32, 0, ATTN_BHSD, 0.3, 16, 16, 0), .deterministic = 1},
    {.c = C("f16 d128 causal sq<sk strides det", ATTN_F16, 1, 2, 2, 17, 40, 128, 1, ATTN_BHSD, 0.2, 16, 16, 4), .deterministic = 1},
    {.c = C("f16 d256 small atomic", ATTN_F16, 1, 1, 1, 17, 17, 256, 0, ATTN_BSHD, 0, 16, 16, 0), .deterministic = 0},
    {.c = C("bf16 d64 GQA 2/1 causal 32x16 b2 atomic", ATTN_BF16, 2, 2, 1, 70, 50, 64, 1, ATTN_BSHD, 0, 32, 16, 0), .deterministic = 0},
    {.c = C("f16 d32 16x32 wide strides sq<sk det", ATTN_F16, 2, 2, 2, 29, 61, 32, 1, ATTN_BSHD, 0, 16, 32, 8), .deterministic = 1},
    {.c = C("bf16 d64 64x64 blocks causal atomic", ATTN_BF16, 1, 1, 1, 130, 100, 64, 1, ATTN_BSHD, 0, 64, 64, 0), .deterministic = 0},
    {.c = C("f16 d32 sliding window hooks det", ATTN_F16, 1, 2, 1, 40, 40, 32, 1, ATTN_BSHD, 0, 16, 16, 0),
     .deterministic = 1, .hooks = k_window_hooks, .mask_mod = "win_mask", .kv_start = "win_start",
     .ref_mask = ref_window},
    {.c = C("f16 d32 sliding window hooks atomic", ATTN_F16, 1, 2, 1, 40, 40, 32, 1, ATTN_BSHD, 0, 16, 16, 0),
     .deterministic = 0, .hooks = k_window_hooks, .mask_mod = "win_mask", .kv_start = "win_start",
     .ref_mask = ref_window},
    /* score_mod with its derivative (soft-capping), and ALiBi (derivative 1) */
    {.c = C("f16 d64 softcap 1.5 scale 0.5 atomic", ATTN_F16, 1, 2, 2, 41, 41, 64, 0, ATTN_BSHD, 0.5, 16, 16, 0),
     .hooks = k_score_hooks, .score_mod = "sc_score", .score_mod_grad = "sc_grad", .ref_score = ref_softcap,
     .ref_score_grad = ref_softcap_grad},
    {.c = C("bf16 d128 softcap causal GQA det", ATTN_BF16, 1, 4, 2, 33, 40, 128, 1, ATTN_BHSD, 0.3, 16, 16, 0),
     .deterministic = 1, .hooks = k_score_hooks, .score_mod = "sc_score", .score_mod_grad = "sc_grad",
     .ref_score = ref_softcap, .ref_score_grad = ref_softcap_grad},
    {.c = C("f16 d32 alibi causal det", ATTN_F16, 1, 4, 4, 50, 50, 32, 1, ATTN_BSHD, 0, 16, 16, 0),
     .deterministic = 1, .hooks = k_score_hooks, .score_mod = "alibi", .ref_score = ref_alibi},
    /* the runtime's plan (its tiles, defines and grids) for every head dim, both dQ paths */
    {.c = C("plan sm90 f16 d32 GQA causal atomic", ATTN_F16, 1, 4, 2, 150, 200, 32, 1, ATTN_BSHD, 0, 0, 0, 0),
     .plan_sm = 90},
    {.c = C("plan sm80 bf16 d64 ragged det", ATTN_BF16, 2, 2, 1, 131, 77, 64, 1, ATTN_BHSD, 0, 0, 0, 0),
     .deterministic = 1, .plan_sm = 80},
    {.c = C("plan sm90 bf16 d96 atomic", ATTN_BF16, 1, 2, 2, 70, 90, 96, 0, ATTN_BSHD, 0, 0, 0, 8), .plan_sm = 90},
    {.c = C("plan sm90 f16 d128 causal det", ATTN_F16, 1, 2, 1, 100, 70, 128, 1, ATTN_BSHD, 0, 0, 0, 0),
     .deterministic = 1, .plan_sm = 90},
    {.c = C("plan sm80 f16 d256 causal atomic", ATTN_F16, 1, 1, 1, 40, 50, 256, 1, ATTN_BHSD, 0, 0, 0, 0),
     .plan_sm = 80},
    /* empty axes: no keys (dQ = 0, no dK/dV program) and no rows (dK = dV = 0, only dK/dV runs) */
    {.c = C("plan no keys atomic", ATTN_F16, 1, 2, 1, 20, 0, 64, 0, ATTN_BSHD, 0, 0, 0, 0), .plan_sm = 90},
    {.c = C("plan no keys det", ATTN_BF16, 1, 2, 1, 20, 0, 32, 1, ATTN_BHSD, 0, 0, 0, 0), .deterministic = 1,
     .plan_sm = 90},
    {.c = C("plan no rows", ATTN_F16, 1, 2, 2, 0, 20, 64, 1, ATTN_BSHD, 0, 0, 0, 0), .plan_sm = 80},
};

START_TEST(test_case)
{
    bwd_check(&cases[_i], (uint64_t)_i * 7919 + 5);
}
END_TEST

/* The rule must be able to fail: the backward run with a 2% wrong softmax scale
 * breaks it for at least one of dQ, dK, dV. */
START_TEST(test_rule_catches_wrong_scale)
{
    for (int det = 0; det < 2; det++) {
        const BwdCase *bc = &cases[det];
        Arena arena;
        arena_init(&arena);
        BwdRun r;
        bwd_setup(&r, bc, 5);
        bwd_run(&arena, &r, bc, r.f.p.scale * 1.02);
        BwdVerdict v = bwd_judge(&r);
        ck_assert_msg(v.err[0] > v.bound[0] || v.err[1] > v.bound[1] || v.err[2] > v.bound[2],
                      "%s: a wrong scale went unnoticed: dQ %.3g/%.3g dK %.3g/%.3g dV %.3g/%.3g", bc->c.what,
                      v.err[0], v.bound[0], v.err[1], v.bound[1], v.err[2], v.bound[2]);
        bwd_teardown(&r);
        arena_free(&arena);
    }
}
END_TEST

/* ... and a score_mod run without its derivative (the default g' = 1) must fail it too. */
START_TEST(test_rule_catches_missing_derivative)
{
    const BwdCase *src = NULL;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0] && !src; i++)
        if (cases[i].score_mod_grad) src = &cases[i];
    ck_assert_ptr_nonnull(src);
    BwdCase bc = *src;
    bc.score_mod_grad = NULL;   /* the kernel's default; the reference keeps the derivative */
    Arena arena;
    arena_init(&arena);
    BwdRun r;
    bwd_setup(&r, &bc, 5);
    bwd_run(&arena, &r, &bc, r.f.p.scale);
    BwdVerdict v = bwd_judge(&r);
    ck_assert_msg(v.err[0] > v.bound[0] && v.err[1] > v.bound[1],
                  "a missing score_mod derivative went unnoticed: dQ %.3g/%.3g dK %.3g/%.3g", v.err[0], v.bound[0],
                  v.err[1], v.bound[1]);
    bwd_teardown(&r);
    arena_free(&arena);
}
END_TEST

/* d loss / d x by central differences, the step as actually stored in f32. */
static double fd_grad(AttnProblem *p, float *x, size_t idx, const void *q, const void *k, const void *v,
                      const void *dout)
{
    float x0 = x[idx];
    x[idx] = x0 + 1e-3f;
    double hi = x[idx], lp = attn_ref_loss(p, q, k, v, dout);
    x[idx] = x0 - 1e-3f;
    double lo = x[idx], lm = attn_ref_loss(p, q, k, v, dout);
    x[idx] = x0;
    return (lp - lm) / (hi - lo);
}

/* The analytic float64 backward against finite differences of the float64
 * forward, on f32 inputs: GQA, causal with empty rows (sq > sk), a mask. */
START_TEST(test_ref_matches_finite_differences)
{
    AttnProblem p = {.batch = 1, .heads_q = 4, .heads_kv = 2, .seqlen_q = 7, .seqlen_k = 5, .head_dim = 3,
                     .causal = 1, .scale = 0.7, .dtype = ATTN_F32};
    if (_i == 1) {   /* with a score_mod and its derivative */
        p.score_mod = ref_softcap;
        p.score_mod_grad = ref_softcap_grad;
    }
    attn_set_strides(&p, ATTN_BSHD);
    size_t nq = attn_numel_q(&p), nkv = attn_numel_kv(&p);
    float *q = malloc(nq * 4), *k = malloc(nkv * 4), *v = malloc(nkv * 4), *dout = malloc(nq * 4);
    attn_fill_random(ATTN_F32, q, nq, 1, -1.5, 1.5);
    attn_fill_random(ATTN_F32, k, nkv, 2, -1.5, 1.5);
    attn_fill_random(ATTN_F32, v, nkv, 3, -1, 1);
    attn_fill_random(ATTN_F32, dout, nq, 4, -1, 1);
    double *dq = malloc(nq * sizeof(double)), *dk = malloc(nkv * sizeof(double)), *dv = malloc(nkv * sizeof(double));
    attn_ref_bwd(&p, q, k, v, dout, dq, dk, dv);
    /* dense outputs and BSHD inputs index alike only for dq/dk/dv by (b, h, s, d): map each */
    double worst = 0, mag = 0;
    int D = p.head_dim;
    for (int t = 0; t < 3; t++) {
        float *x = t == 0 ? q : t == 1 ? k : v;
        const int64_t *st = t == 0 ? p.q_stride : t == 1 ? p.k_stride : p.v_stride;
        const double *g = t == 0 ? dq : t == 1 ? dk : dv;
        int nh = t ? p.heads_kv : p.heads_q, ns = t ? p.seqlen_k : p.seqlen_q;
        for (int h = 0; h < nh; h++)
            for (int s = 0; s < ns; s++)
                for (int d = 0; d < D; d++) {
                    size_t idx = (size_t)(h * st[1] + s * st[2] + d), dense = ((size_t)h * ns + s) * D + d;
                    double fd = fd_grad(&p, x, idx, q, k, v, dout);
                    worst = fmax(worst, fabs(fd - g[dense]));
                    mag = fmax(mag, fabs(g[dense]));
                }
    }
    ck_assert_msg(mag > 0.05, "the gradients are suspiciously small (max %.3g)", mag);
    ck_assert_msg(worst < 1e-4 * fmax(1.0, mag), "analytic vs finite differences: max diff %.3g (max |g| %.3g)",
                  worst, mag);
    /* rows 0 and 1 see no key (causal, sq - sk = 2): their dq is exactly 0 */
    for (int h = 0; h < p.heads_q; h++)
        for (int e = 0; e < 2 * D; e++) ck_assert(dq[(size_t)h * p.seqlen_q * D + e] == 0.0);
    free(q); free(k); free(v); free(dout); free(dq); free(dk); free(dv);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("attention_bwd_interp");
    TCase *tc = tcase_create("bwd");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, test_case, 0, (int)(sizeof cases / sizeof cases[0]));
    tcase_add_test(tc, test_rule_catches_wrong_scale);
    tcase_add_test(tc, test_rule_catches_missing_derivative);
    tcase_add_loop_test(tc, test_ref_matches_finite_differences, 0, 2);
    suite_add_tcase(s, tc);
    return s;
}

TU_MAIN(suite)
