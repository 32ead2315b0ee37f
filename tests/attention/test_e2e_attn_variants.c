/* test_e2e_attn_variants.c — the attention variants of examples/attention/
 * (ALiBi, soft-capping, sliding window) on the CPU interpreter.
 *
 * Each variant file holds only its hooks; it instantiates the shipped forward
 * program through the program's `const score_mod / mask_mod / kv_start: fn`
 * parameters, compiled as one source (variant text, then the program) with
 * -D score_mod=... etc. The float64 reference applies the same modification in
 * natural units (tools/attn_ref.c hooks), and the accuracy rule is the one of
 * test_e2e_attn_interp.c: |O - ref| <= 2 |O_plain - ref| + 1e-5, LSE 1e-4
 * relative, rows that see nothing O = 0 / LSE = -inf (the window makes some).
 */
#include "attn_harness.h"

/* ---- reference hooks, natural units, raw indices (as the .tile hooks) ---- */

static int g_alibi_heads;
static double ref_alibi(double s, int b, int h, int i, int j, const void *ctx)
{
    double slope = exp2(-8.0 * (h + 1) / g_alibi_heads);
    return s - slope * fabs((double)(i - j));
}

static double g_softcap;
static double ref_softcap(double s, int b, int h, int i, int j, const void *ctx)
{
    return g_softcap * tanh(s / g_softcap);
}

static int g_left, g_right;
static int ref_window(int b, int h, int i, int j, const void *ctx) { return j >= i - g_left && j <= i + g_right; }

static void hook_alibi(AttnProblem *p) { p->score_mod = ref_alibi; }
static void hook_softcap(AttnProblem *p) { p->score_mod = ref_softcap; }
static void hook_window(AttnProblem *p) { p->mask_mod = ref_window; }

/* variant text + program text, joined once per variant */
static const char *joined(const char *variant)
{
    static char *cache[4];
    static const char *names[4];
    int i = 0;
    while (i < 4 && names[i] && strcmp(names[i], variant)) i++;
    ck_assert_int_lt(i, 4);
    if (!names[i]) {
        const char *a = ah_text(variant), *b = ah_text("lang/lib/attention_fwd.tile");
        cache[i] = malloc(strlen(a) + strlen(b) + 2);
        sprintf(cache[i], "%s\n%s", a, b);
        names[i] = variant;
    }
    return cache[i];
}

typedef struct VCase {
    Case c;
    const char *file;
    KilnDefine defs[4];
    int ndefs;
    void (*hook)(AttnProblem *p);
    int alibi_heads;
    double softcap;
    int left, right;
} VCase;

static const VCase vcases[] = {
    {{"alibi f16 d64 causal", ATTN_F16, 1, 4, 4, 50, 50, 64, 1, ATTN_BSHD, 0, 16, 16, 0},
     .file = "examples/attention/alibi.tile", .defs = {{"score_mod", "alibi_score"}, {"ALIBI_HEADS", "4"}},
     .ndefs = 2, .hook = hook_alibi, .alibi_heads = 4},
    {{"alibi bf16 d32 sq<sk GQA", ATTN_BF16, 1, 2, 1, 37, 45, 32, 0, ATTN_BHSD, 0, 16, 16, 0},
     .file = "examples/attention/alibi.tile", .defs = {{"score_mod", "alibi_score"}, {"ALIBI_HEADS", "2"}},
     .ndefs = 2, .hook = hook_alibi, .alibi_heads = 2},
    {{"softcap f16 d64 scale 0.5", ATTN_F16, 1, 2, 2, 41, 41, 64, 0, ATTN_BSHD, 0.5, 16, 16, 0},
     .file = "examples/attention/softcap.tile", .defs = {{"score_mod", "softcap_score"}, {"SOFTCAP", "1.5"}},
     .ndefs = 2, .hook = hook_softcap, .softcap = 1.5},
    {{"softcap bf16 d128 causal", ATTN_BF16, 1, 1, 1, 33, 33, 128, 1, ATTN_BHSD, 0.3, 16, 16, 0},
     .file = "examples/attention/softcap.tile", .defs = {{"score_mod", "softcap_score"}, {"SOFTCAP", "2.0"}},
     .ndefs = 2, .hook = hook_softcap, .softcap = 2.0},
    {{"window f16 d32 causal left 20", ATTN_F16, 1, 2, 2, 100, 100, 32, 1, ATTN_BSHD, 0, 16, 16, 0},
     .file = "examples/attention/sliding_window.tile",
     .defs = {{"mask_mod", "window_mask"}, {"kv_start", "window_start"}, {"WINDOW_LEFT", "20"}, {"WINDOW_RIGHT", "0"}},
     .ndefs = 4, .hook = hook_window, .left = 20, .right = 0},
    {{"window bf16 d64 left 7 right 5", ATTN_BF16, 1, 1, 1, 40, 40, 64, 0, ATTN_BHSD, 0, 16, 16, 0},
     .file = "examples/attention/sliding_window.tile",
     .defs = {{"mask_mod", "window_mask"}, {"kv_start", "window_start"}, {"WINDOW_LEFT", "7"}, {"WINDOW_RIGHT", "5"}},
     .ndefs = 4, .hook = hook_window, .left = 7, .right = 5},
    {{"window f16 d64 sq>sk empty rows", ATTN_F16, 1, 1, 1, 60, 30, 64, 0, ATTN_BSHD, 0, 16, 16, 0},
     .file = "examples/attention/sliding_window.tile",
     .defs = {{"mask_mod", "window_mask"}, {"kv_start", "window_start"}, {"WINDOW_LEFT", "5"}, {"WINDOW_RIGHT", "3"}},
     .ndefs = 4, .hook = hook_window, .left = 5, .right = 3},
};

START_TEST(test_variant)
{
    const VCase *v = &vcases[_i];
    g_alibi_heads = v->alibi_heads;
    g_softcap = v->softcap;
    g_left = v->left;
    g_right = v->right;
    Arena arena;
    arena_init(&arena);
    IrFunc *f = compile_src(&arena, &v->c, v->file, joined(v->file), v->defs, v->ndefs);
    check_case(&v->c, f, (uint64_t)_i * 31 + 5, v->hook);
    arena_free(&arena);
}
END_TEST

/* A variant must actually change the result: ALiBi's kernel against the plain
 * reference must break the rule. */
START_TEST(test_variant_is_not_a_no_op)
{
    const VCase *v = &vcases[0];
    g_alibi_heads = v->alibi_heads;
    Arena arena;
    arena_init(&arena);
    IrFunc *f = compile_src(&arena, &v->c, v->file, joined(v->file), v->defs, v->ndefs);
    Run r;
    setup(&r, &v->c, 5);
    run_kernel(f, &r, &v->c, r.p.scale);
    Verdict vd = judge(&r);   /* no hook: the plain reference */
    ck_assert_msg(vd.e.o_max_abs > vd.bound, "ALiBi made no difference: err %.3g bound %.3g", vd.e.o_max_abs,
                  vd.bound);
    teardown(&r);
    arena_free(&arena);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("attention_variants");
    TCase *tc = tcase_create("variants");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, test_variant, 0, (int)(sizeof vcases / sizeof vcases[0]));
    tcase_add_test(tc, test_variant_is_not_a_no_op);
    suite_add_tcase(s, tc);
    return s;
}

TU_MAIN(suite)
