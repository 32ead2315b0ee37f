/* test_e2e_alu_attn.c — the FlashAttention forward's PLAIN_SCORES form
 * (lang/lib/attention_fwd.tile: phase 1 takes the row maximum of the unscaled
 * scores and scales only that, so each exponent s * c - m is one FFMA).
 *
 * On the CPU interpreter against the float64 reference (tests/attention's
 * harness and accuracy rule: random inputs in NaN-filled buffers, ragged
 * sizes, |O - ref| <= 2 |O_plain - ref| + 1e-5, LSE 1e-4 relative, empty rows
 * O = 0 / LSE = -inf): f16 and bf16, causal or not, the GPU's block sizes,
 * a negative softmax scale (its sign moves into Q), a zero scale (uniform
 * softmax), and the sliding-window mask_mod / kv_start hooks (masked scores in
 * the unmasked loop, rows that see nothing). The rule must catch a wrong
 * scale in this form too. A score_mod with PLAIN_SCORES = true must be a
 * compile error (the form skips the hook). In the PTX, the form must save one
 * multiply per score of the key loop against the hook-ready form.
 */
#include "attention/attn_harness.h"
#include "tests/ptx_util.h"

static const KilnDefine plain[] = {{"PLAIN_SCORES", "true"}};

static const Case cases[] = {
    {"plain f16 d64 ragged", ATTN_F16, 1, 2, 2, 37, 37, 64, 0, ATTN_BSHD, 0, 16, 16, 0},
    {"plain bf16 d64 causal bhsd", ATTN_BF16, 1, 2, 2, 37, 37, 64, 1, ATTN_BHSD, 0, 16, 16, 0},
    {"plain bf16 d96 causal sq>sk (empty rows)", ATTN_BF16, 1, 1, 1, 45, 20, 96, 1, ATTN_BHSD, 0, 16, 16, 0},
    {"plain f16 d32 GQA 4/2 sq<sk scale 0.3", ATTN_F16, 1, 4, 2, 19, 45, 32, 0, ATTN_BSHD, 0.3, 16, 32, 8},
    {"plain f16 d128 causal 128x64 blocks", ATTN_F16, 1, 2, 2, 300, 300, 128, 1, ATTN_BSHD, 0, 128, 64, 0},
    {"plain bf16 d64 64x64 blocks sq<sk", ATTN_BF16, 1, 2, 1, 200, 333, 64, 0, ATTN_BHSD, 0, 64, 64, 0},
};

START_TEST(plain_matches_reference)
{
    Arena arena;
    arena_init(&arena);
    const Case *c = &cases[_i];
    IrFunc *f = compile_src(&arena, c, "lang/lib/attention_fwd.tile", ah_text("lang/lib/attention_fwd.tile"),
                            plain, 1);
    check_case(c, f, (uint64_t)_i * 613 + 7, NULL);
    arena_free(&arena);
}
END_TEST

/* A softmax scale the harness cannot express (it takes 0 as 1/sqrt(d)):
 * run with `scale`, judge against the reference at `ref_scale`. */
static Verdict run_scaled_src(const Case *c, const char *file, const char *src, const KilnDefine *defs, int ndefs,
                              double scale, double ref_scale, void (*p_hook)(AttnProblem *p))
{
    Arena arena;
    arena_init(&arena);
    IrFunc *f = compile_src(&arena, c, file, src, defs, ndefs);
    Run r;
    setup(&r, c, 101);
    if (p_hook) p_hook(&r.p);
    r.p.scale = ref_scale;
    run_kernel(f, &r, c, scale);
    Verdict v = judge(&r);
    ck_assert_msg(v.e.nonfinite == 0, "%s scale %g: %lld non-finite outputs", c->what, scale,
                  (long long)v.e.nonfinite);
    teardown(&r);
    arena_free(&arena);
    return v;
}

static Verdict run_scaled(const Case *c, const KilnDefine *defs, int ndefs, double scale, double ref_scale)
{
    return run_scaled_src(c, "lang/lib/attention_fwd.tile", ah_text("lang/lib/attention_fwd.tile"), defs, ndefs,
                          scale, ref_scale, NULL);
}

static void judge_ok(const Case *c, double scale, Verdict v)
{
    ck_assert_msg(v.e.o_max_abs <= v.bound && v.e.lse_max_rel <= 1e-4 && v.empty_bad == 0,
                  "%s scale %g: err %.3g bound %.3g lse %.3g empty-bad %lld", c->what, scale, v.e.o_max_abs, v.bound,
                  v.e.lse_max_rel, (long long)v.empty_bad);
}

static void expect_ok(const Case *c, double scale) { judge_ok(c, scale, run_scaled(c, plain, 1, scale, scale)); }

START_TEST(plain_negative_and_zero_scale)
{
    const Case f16 = {"plain f16 d64 causal", ATTN_F16, 1, 2, 2, 41, 50, 64, 1, ATTN_BSHD, 0, 16, 16, 0};
    const Case bf16 = {"plain bf16 d32", ATTN_BF16, 1, 1, 1, 33, 29, 32, 0, ATTN_BHSD, 0, 16, 16, 0};
    expect_ok(&f16, -0.125);
    expect_ok(&bf16, -0.4);
    expect_ok(&f16, 0.0);
    expect_ok(&bf16, 0.0);
}
END_TEST

/* The rule must see a 2% wrong scale in this form too. */
START_TEST(plain_rule_catches_wrong_scale)
{
    const Case *c = &cases[0];
    double s = 1.0 / sqrt((double)c->d);
    Verdict v = run_scaled(c, plain, 1, s * 1.02, s);
    ck_assert_msg(v.e.o_max_abs > v.bound || v.e.lse_max_rel > 1e-4,
                  "a wrong scale went unnoticed: err %.3g bound %.3g lse %.3g", v.e.o_max_abs, v.bound,
                  v.e.lse_max_rel);
}
END_TEST

/* ---- hooks: the sliding window (mask_mod + kv_start) works; a score_mod is refused ---- */

static int g_left, g_right;
static int ref_window(int b, int h, int i, int j, const void *ctx) { return j >= i - g_left && j <= i + g_right; }
static void hook_window(AttnProblem *p) { p->mask_mod = ref_window; }

static char *joined(const char *variant)
{
    const char *a = ah_text(variant), *b = ah_text("lang/lib/attention_fwd.tile");
    char *s = malloc(strlen(a) + strlen(b) + 2);
    sprintf(s, "%s\n%s", a, b);
    return s;
}

START_TEST(plain_with_window_hooks)
{
    static const struct {
        Case c;
        int left, right;
    } w[] = {
        {{"plain window f16 d32 causal left 20", ATTN_F16, 1, 2, 2, 100, 100, 32, 1, ATTN_BSHD, 0, 16, 16, 0}, 20, 0},
        {{"plain window bf16 d64 left 7 right 5", ATTN_BF16, 1, 1, 1, 40, 40, 64, 0, ATTN_BHSD, 0, 16, 16, 0}, 7, 5},
        {{"plain window f16 d64 sq>sk empty rows", ATTN_F16, 1, 1, 1, 60, 30, 64, 0, ATTN_BSHD, 0, 16, 16, 0}, 5, 3},
    };
    char *src = joined("examples/attention/sliding_window.tile");
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++) {
        char l[16], r[16];
        snprintf(l, sizeof l, "%d", w[i].left);
        snprintf(r, sizeof r, "%d", w[i].right);
        KilnDefine defs[] = {{"mask_mod", "window_mask"}, {"kv_start", "window_start"}, {"WINDOW_LEFT", l},
                             {"WINDOW_RIGHT", r}, {"PLAIN_SCORES", "true"}};
        g_left = w[i].left;
        g_right = w[i].right;
        Arena arena;
        arena_init(&arena);
        IrFunc *f = compile_src(&arena, &w[i].c, "examples/attention/sliding_window.tile", src, defs, 5);
        check_case(&w[i].c, f, (uint64_t)i * 17 + 3, hook_window);
        arena_free(&arena);
    }
    free(src);
}
END_TEST

/* Scale 0 with a window: in the unmasked loop some rows see no key of a
 * block, whose unscaled maximum -inf times 0 must not become NaN. */
START_TEST(plain_window_zero_scale)
{
    const Case c = {"plain window f16 d64 scale 0", ATTN_F16, 1, 1, 1, 60, 60, 64, 0, ATTN_BSHD, 0, 16, 16, 0};
    char *src = joined("examples/attention/sliding_window.tile");
    KilnDefine defs[] = {{"mask_mod", "window_mask"}, {"kv_start", "window_start"}, {"WINDOW_LEFT", "5"},
                         {"WINDOW_RIGHT", "3"}, {"PLAIN_SCORES", "true"}};
    g_left = 5;
    g_right = 3;
    for (int neg = 0; neg < 2; neg++) {
        double scale = neg ? -0.2 : 0.0;
        judge_ok(&c, scale,
                 run_scaled_src(&c, "examples/attention/sliding_window.tile", src, defs, 5, scale, scale, hook_window));
    }
    free(src);
}
END_TEST

START_TEST(plain_refuses_score_mod)
{
    static const struct {
        const char *file;
        KilnDefine defs[3];
    } v[] = {
        {"examples/attention/alibi.tile", {{"score_mod", "alibi_score"}, {"ALIBI_HEADS", "4"}, {"PLAIN_SCORES", "true"}}},
        {"examples/attention/softcap.tile", {{"score_mod", "softcap_score"}, {"SOFTCAP", "1.5"}, {"PLAIN_SCORES", "true"}}},
    };
    for (int i = 0; i < 2; i++) {
        char *src = joined(v[i].file);
        KilnCompileResult r;
        KilnStatus st = pu_compile_status(v[i].file, src, "attn_fwd_f16", v[i].defs, 3, "sm_90a", KILN_EMIT_IR, &r);
        ck_assert_msg(st != KILN_OK, "%s: PLAIN_SCORES with a score_mod compiled", v[i].file);
        ck_assert_msg(r.diagnostics && strstr(r.diagnostics, "PLAIN_SCORES"), "%s: unexpected diagnostics:\n%s",
                      v[i].file, r.diagnostics ? r.diagnostics : "");
        kiln_compile_result_free(&r);
        /* the same hook without the flag still compiles */
        st = pu_compile_status(v[i].file, src, "attn_fwd_f16", v[i].defs, 2, "sm_90a", KILN_EMIT_IR, &r);
        ck_assert_msg(st == KILN_OK, "%s: %s", v[i].file, r.diagnostics ? r.diagnostics : "");
        kiln_compile_result_free(&r);
        free(src);
    }
}
END_TEST

/* 128 x 64 scores over 256 threads: 32 per thread in 2 rows; the plain form
 * has no multiply for them (the hook-ready one multiplies every score for the
 * max) but one per row for the maximum: 30 fewer. */
START_TEST(plain_saves_a_multiply_per_score)
{
    const char *src = ah_text("lang/lib/attention_fwd.tile");
    int muls[2];
    for (int p = 0; p < 2; p++) {
        KilnDefine defs[] = {{"HEAD_DIM", "64"}, {"BLOCK_M", "128"}, {"BLOCK_N", "64"}, {"CAUSAL", "false"},
                             {"PLAIN_SCORES", p ? "true" : "false"}};
        KilnCompileResult r;
        KilnStatus st = pu_compile_status("lang/lib/attention_fwd.tile", src, "attn_fwd_f16", defs, 5, "sm_90a",
                                          KILN_EMIT_PTX, &r);
        ck_assert_msg(st == KILN_OK, "PLAIN_SCORES=%d: %s", p, r.diagnostics ? r.diagnostics : "");
        muls[p] = pu_count_n(r.output, r.output_size, "mul.rn.f32");
        ck_assert_int_ge(pu_count_n(r.output, r.output_size, "fma.rn.f32"), 32);
        kiln_compile_result_free(&r);
    }
    ck_assert_msg(muls[1] <= muls[0] - 30, "mul.rn.f32: %d plain, %d hook-ready: want 30 fewer", muls[1], muls[0]);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("codegen_e2e_alu_attn");
    TCase *tc = tcase_create("plain_scores");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, plain_matches_reference, 0, (int)(sizeof cases / sizeof cases[0]));
    tcase_add_test(tc, plain_negative_and_zero_scale);
    tcase_add_test(tc, plain_rule_catches_wrong_scale);
    tcase_add_test(tc, plain_with_window_hooks);
    tcase_add_test(tc, plain_window_zero_scale);
    tcase_add_test(tc, plain_refuses_score_mod);
    tcase_add_test(tc, plain_saves_a_multiply_per_score);
    suite_add_tcase(s, tc);
    return s;
}

TU_MAIN(suite)
