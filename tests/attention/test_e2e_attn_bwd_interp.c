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
 * score_mod variants are written only as forward hooks (soft-capping, ALiBi, and the
 * shipped examples/attention files, test_example): the program's default
 * score_mod_grad = grad(score_mod) is the derivative the compiler derives; one case
 * overrides it with a hand-written derivative, and a wrong override must fail the
 * rule (test_rule_catches_wrong_derivative).
 *
 * The reference itself is checked against central finite differences of the
 * float64 forward's loss sum(O * dO), with and without a score_mod
 * (test_ref_matches_finite_differences), and so is the whole Kiln backward with a
 * derived derivative on a tiny shape (test_backward_matches_finite_differences);
 * the rule must be able to fail (test_rule_catches_wrong_scale).
 */
#include "attn_bwd_harness.h"

/* A sliding window (keys i - 5 .. i) through the hooks, with kv_start skipping blocks. */
static const char k_window_hooks[] =
    "fn win_mask(b, h, q_idx, kv_idx) { return kv_idx >= q_idx - 5 && kv_idx <= q_idx; }\n"
    "fn win_start(start_m, block_m, seqlen_q, seqlen_k) { return start_m - 5; }\n";
static int ref_window(int b, int h, int i, int j, const void *ctx) { return j >= i - 5 && j <= i; }

/* Soft-capping (examples/attention/softcap.tile's, cap 1.5) and ALiBi (slopes for 4
 * heads), written only as forward hooks: the backward differentiates them (grad(score_mod),
 * lang/grad.c). sc_grad is soft-capping's derivative by hand, for the override
 * (-D score_mod_grad), and one_grad a wrong one (the rule must catch it). Natural units
 * in the hooks and in the reference (the program works in log2 units: rescale). */
static const char k_score_hooks[] =
    "const SC = 1.5;\n"
    "fn sc_score(s, b, h, q_idx, kv_idx) { return SC * tanh(s * (1.0 / SC)); }\n"
    "fn sc_grad(s, b, h, q_idx, kv_idx) { let t = tanh(s * (1.0 / SC)); return 1.0 - t * t; }\n"
    "fn one_grad(s, b, h, q_idx, kv_idx) { return 1.0; }\n"
    "fn alibi(s, b, h, q_idx, kv_idx) {\n"
    "    let slope = exp2((h + 1).to(f32) * (-8.0 / 4));\n"
    "    return s - slope * abs((q_idx - kv_idx).to(f32));\n"
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
    /* score_mods written only as forward hooks (the derivative is derived), and the
     * hand-written derivative overriding the derived one */
    {.c = C("f16 d64 softcap 1.5 scale 0.5 atomic", ATTN_F16, 1, 2, 2, 41, 41, 64, 0, ATTN_BSHD, 0.5, 16, 16, 0),
     .hooks = k_score_hooks, .score_mod = "sc_score", .ref_score = ref_softcap, .ref_score_grad = ref_softcap_grad},
    {.c = C("bf16 d128 softcap causal GQA det", ATTN_BF16, 1, 4, 2, 33, 40, 128, 1, ATTN_BHSD, 0.3, 16, 16, 0),
     .deterministic = 1, .hooks = k_score_hooks, .score_mod = "sc_score", .ref_score = ref_softcap,
     .ref_score_grad = ref_softcap_grad},
    {.c = C("f16 d32 alibi causal det", ATTN_F16, 1, 4, 4, 50, 50, 32, 1, ATTN_BSHD, 0, 16, 16, 0),
     .deterministic = 1, .hooks = k_score_hooks, .score_mod = "alibi", .ref_score = ref_alibi},
    {.c = C("f16 d64 softcap override score_mod_grad det", ATTN_F16, 1, 2, 1, 30, 37, 64, 1, ATTN_BSHD, 0.5, 16, 16, 0),
     .deterministic = 1, .hooks = k_score_hooks, .score_mod = "sc_score", .score_mod_grad = "sc_grad",
     .ref_score = ref_softcap, .ref_score_grad = ref_softcap_grad},
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
    /* warp specialisation asked for: the dK/dV kernel's two loops walk the whole GQA group
     * (FLAT_GROUP), masked diagonal and ragged blocks of every head first, then the whole ones */
    {.c = C("plan ws f16 d64 GQA 4/2 causal sq<sk 16x32 det", ATTN_F16, 2, 4, 2, 45, 70, 64, 1, ATTN_BSHD, 0, 16, 32, 0),
     .deterministic = 1, .plan_sm = 90, .own_tiles = 1, .warp_specialize = 1},
    {.c = C("plan ws bf16 d96 MQA 3/1 ragged 16x16 atomic", ATTN_BF16, 1, 3, 1, 53, 41, 96, 0, ATTN_BHSD, 0, 16, 16, 4),
     .plan_sm = 90, .own_tiles = 1, .warp_specialize = 1},
    {.c = C("plan ws f16 d128 GQA 2/1 causal sq>sk det", ATTN_F16, 1, 2, 1, 150, 90, 128, 1, ATTN_BSHD, 0, 0, 0, 0),
     .deterministic = 1, .plan_sm = 90, .warp_specialize = 1},
    /* d 256 with FLAT_GROUP reads delta after dP^T (DELTA_LATE), in both loops; with the atomic dQ too */
    {.c = C("plan ws f16 d256 GQA 2/1 causal sq<sk 16x16 det", ATTN_F16, 1, 2, 1, 37, 45, 256, 1, ATTN_BSHD, 0, 16, 16, 0),
     .deterministic = 1, .plan_sm = 90, .own_tiles = 1, .warp_specialize = 1},
    {.c = C("plan ws bf16 d256 ragged 16x32 atomic", ATTN_BF16, 1, 2, 2, 41, 35, 256, 0, ATTN_BHSD, 0, 16, 32, 0),
     .plan_sm = 90, .own_tiles = 1, .warp_specialize = 1},
};

START_TEST(test_case)
{
    bwd_check(&cases[_i], (uint64_t)_i * 7919 + 5);
}
END_TEST

/* The variants of examples/attention as shipped (forward hooks only, no derivative
 * written anywhere), compiled in front of the backward program. */
static int ref_window5(int b, int h, int i, int j, const void *ctx) { return j >= i - 5 && j <= i; }
typedef struct ExampleCase {
    BwdCase bc;
    const char *file;
} ExampleCase;
static const ExampleCase example_cases[] = {
    {{.c = C("examples alibi f16 d64 GQA 4/2 causal atomic", ATTN_F16, 1, 4, 2, 45, 45, 64, 1, ATTN_BSHD, 0, 16, 16, 0),
      .score_mod = "alibi_score", .hook_defs = {{"ALIBI_HEADS", "4"}}, .nhook_defs = 1, .ref_score = ref_alibi},
     "examples/attention/alibi.tile"},
    {{.c = C("examples softcap bf16 d64 scale 0.5 det", ATTN_BF16, 1, 2, 2, 37, 29, 64, 0, ATTN_BHSD, 0.5, 16, 16, 0),
      .deterministic = 1, .score_mod = "softcap_score", .hook_defs = {{"SOFTCAP", "1.5"}}, .nhook_defs = 1,
      .ref_score = ref_softcap, .ref_score_grad = ref_softcap_grad},
     "examples/attention/softcap.tile"},
    {{.c = C("examples softcap f16 d32 causal atomic", ATTN_F16, 1, 2, 1, 40, 33, 32, 1, ATTN_BSHD, 0.7, 16, 16, 0),
      .score_mod = "softcap_score", .hook_defs = {{"SOFTCAP", "1.5"}}, .nhook_defs = 1, .ref_score = ref_softcap,
      .ref_score_grad = ref_softcap_grad},
     "examples/attention/softcap.tile"},
    {{.c = C("examples sliding window f16 d32 causal det", ATTN_F16, 1, 2, 1, 40, 40, 32, 1, ATTN_BSHD, 0, 16, 16, 0),
      .deterministic = 1, .mask_mod = "window_mask", .kv_start = "window_start",
      .hook_defs = {{"WINDOW_LEFT", "5"}}, .nhook_defs = 1, .ref_mask = ref_window5},
     "examples/attention/sliding_window.tile"},
};

START_TEST(test_example)
{
    BwdCase bc = example_cases[_i].bc;
    bc.hooks = ah_text(example_cases[_i].file);
    bwd_check(&bc, (uint64_t)_i * 104729 + 11);
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

/* ... and so must a wrong derivative given as the override (-D score_mod_grad=one_grad,
 * soft-capping's backward with g' = 1): the override is used, not the derived one. */
START_TEST(test_rule_catches_wrong_derivative)
{
    const BwdCase *src = NULL;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0] && !src; i++)
        if (cases[i].score_mod_grad) src = &cases[i];
    ck_assert_ptr_nonnull(src);
    BwdCase bc = *src;
    bc.score_mod_grad = "one_grad";   /* the reference keeps the true derivative */
    Arena arena;
    arena_init(&arena);
    BwdRun r;
    bwd_setup(&r, &bc, 5);
    bwd_run(&arena, &r, &bc, r.f.p.scale);
    BwdVerdict v = bwd_judge(&r);
    ck_assert_msg(v.err[0] > v.bound[0] && v.err[1] > v.bound[1],
                  "a wrong score_mod derivative went unnoticed: dQ %.3g/%.3g dK %.3g/%.3g", v.err[0], v.bound[0],
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

/* A gradient element of input t (0 Q, 1 K, 2 V) at strided index idx / dense index dense. */
typedef double (*GradAt)(const void *ctx, int t, size_t idx, size_t dense);

/* Over every element of input t (batch 0): the largest |g - finite difference| and
 * |finite difference|, the loss read through in[] = {q, k, v, dout} (f32). */
static void fd_compare(AttnProblem *p, float *in[4], int t, GradAt grad, const void *ctx, double *worst, double *mag)
{
    const int64_t *st = t == 0 ? p->q_stride : t == 1 ? p->k_stride : p->v_stride;
    int nh = t ? p->heads_kv : p->heads_q, ns = t ? p->seqlen_k : p->seqlen_q, D = p->head_dim;
    for (int h = 0; h < nh; h++)
        for (int s = 0; s < ns; s++)
            for (int d = 0; d < D; d++) {
                size_t idx = (size_t)(h * st[1] + s * st[2] + d), dense = ((size_t)h * ns + s) * D + d;
                double fd = fd_grad(p, in[t], idx, in[0], in[1], in[2], in[3]);
                *worst = fmax(*worst, fabs(grad(ctx, t, idx, dense) - fd));
                *mag = fmax(*mag, fabs(fd));
            }
}

static double dense_grad_at(const void *ctx, int t, size_t idx, size_t dense)
{
    return ((const double *const *)ctx)[t][dense];
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
    /* the outputs are dense [h, s, d], the inputs BSHD: fd_compare maps each */
    double worst = 0, mag = 0;
    int D = p.head_dim;
    float *in[4] = {q, k, v, dout};
    const double *g[3] = {dq, dk, dv};
    for (int t = 0; t < 3; t++) fd_compare(&p, in, t, dense_grad_at, g, &worst, &mag);
    ck_assert_msg(mag > 0.05, "the gradients are suspiciously small (max %.3g)", mag);
    ck_assert_msg(worst < 1e-4 * fmax(1.0, mag), "analytic vs finite differences: max diff %.3g (max |g| %.3g)",
                  worst, mag);
    /* rows 0 and 1 see no key (causal, sq - sk = 2): their dq is exactly 0 */
    for (int h = 0; h < p.heads_q; h++)
        for (int e = 0; e < 2 * D; e++) ck_assert(dq[(size_t)h * p.seqlen_q * D + e] == 0.0);
    free(q); free(k); free(v); free(dout); free(dq); free(dk); free(dv);
}
END_TEST

/* The whole backward — Kiln's kernels on the interpreter, soft-capping's derivative derived
 * by the compiler — against central finite differences of the float64 forward's loss
 * sum(O * dO) at the same inputs (the f16 values, read as f32), on a tiny shape with GQA
 * and an empty row: within the gradient rule's bound plus the differences' own error. */
static double f16_grad_at(const void *ctx, int t, size_t idx, size_t dense)
{
    return attn_get(ATTN_F16, ((const void *const *)ctx)[t], idx);
}

START_TEST(test_backward_matches_finite_differences)
{
    BwdCase bc = {.c = C("tiny softcap GQA causal", ATTN_F16, 1, 2, 1, 6, 5, 32, 1, ATTN_BSHD, 0.6, 16, 16, 0),
                  .deterministic = _i, .hooks = k_score_hooks, .score_mod = "sc_score", .ref_score = ref_softcap,
                  .ref_score_grad = ref_softcap_grad};
    Arena arena;
    arena_init(&arena);
    BwdRun r;
    bwd_setup(&r, &bc, 17);
    bwd_run(&arena, &r, &bc, r.f.p.scale);
    BwdVerdict v = bwd_judge(&r);
    AttnProblem p = r.f.p;
    p.dtype = ATTN_F32;
    size_t n[4] = {r.f.nq, r.f.nkv, r.f.nkv, r.f.nq};
    const void *src[4] = {r.f.q, r.f.k, r.f.v, r.dout};
    float *x[4];
    for (int t = 0; t < 4; t++) {
        x[t] = malloc(n[t] * sizeof(float));
        for (size_t i = 0; i < n[t]; i++) x[t][i] = (float)attn_get(ATTN_F16, src[t], i);
    }
    const void *g[3] = {r.dq, r.dk, r.dv};   /* through Q's, K's and V's strides */
    for (int t = 0; t < 3; t++) {
        double worst = 0, mag = 0;
        fd_compare(&p, x, t, f16_grad_at, g, &worst, &mag);
        ck_assert_msg(mag > 0.05, "d%c: the gradients are suspiciously small (max %.3g)", "QKV"[t], mag);
        ck_assert_msg(worst <= v.bound[t] + 1e-4 * fmax(1.0, mag),
                      "d%c: Kiln vs finite differences: max diff %.3g > %.3g (rule bound) + %.3g (max |g| %.3g)",
                      "QKV"[t], worst, v.bound[t], 1e-4 * fmax(1.0, mag), mag);
    }
    for (int t = 0; t < 4; t++) free(x[t]);
    bwd_teardown(&r);
    arena_free(&arena);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("attention_bwd_interp");
    TCase *tc = tcase_create("bwd");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, test_case, 0, (int)(sizeof cases / sizeof cases[0]));
    tcase_add_loop_test(tc, test_example, 0, (int)(sizeof example_cases / sizeof example_cases[0]));
    tcase_add_loop_test(tc, test_backward_matches_finite_differences, 0, 2);
    tcase_add_test(tc, test_rule_catches_wrong_scale);
    tcase_add_test(tc, test_rule_catches_wrong_derivative);
    tcase_add_loop_test(tc, test_ref_matches_finite_differences, 0, 2);
    suite_add_tcase(s, tc);
    return s;
}

TU_MAIN(suite)
