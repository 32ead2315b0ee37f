/* test_e2e_variant_traps.c — issue 28, section 3: variants that used to compile and run
 * silently wrong are located errors now, through kiln_compile.
 *
 * - a helper of a variant that is no hook and is called by nothing (`fn mask_mode`):
 *   an error at its name with "did you mean 'mask_mod'"; used helpers, hooks, helpers
 *   bound with -D, and unused helpers of a file with no hooks to bind stay fine;
 * - a file-level fn, const or param named like a built-in (`store`, `min`, `LOG2E`,
 *   `tanh`, `f32`): an error at the name (they replaced the builtin inside the imported
 *   programs);
 * - `max(x, 0)` / `min(x, 1)` on a tile: an error naming both spellings (it was a
 *   reduction along axis 0); `maximum(x, 0)`, `max(x, axis = 0)` and a scalar's
 *   `max(n, 0)` compile;
 * - a hook of the wrong arity: the error at the user's hook, the program's call a note,
 *   once;
 * - HEAD_DIM = 0 or negative, MASK_BLOCK_N = 0, a block-mask classifier block of 0: the
 *   programs' static asserts refuse them.
 * (Scores in natural units, the first trap, is checked numerically by the variant tests:
 * tests/attention/test_e2e_attn_variant_api.c runs the shipped alibi.tile, now
 * `s - slope * |i - j|`, against float64; tests/lang/test_e2e_rescale.c the folding.)
 */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln.h"

static KilnStatus compile(const char *src, const char *kernel, const KilnDefine *defs, int ndefs, KilnCompileResult *r)
{
    KilnCompileOptions o;
    memset(&o, 0, sizeof o);
    o.emit = KILN_EMIT_IR;
    o.kernel = kernel;
    o.defines = defs;
    o.ndefines = ndefs;
    return kiln_compile("v.tile", src, &o, r);
}

static void expect_error(const char *src, const char *kernel, const KilnDefine *defs, int ndefs,
                         const char *const *needles, int n)
{
    KilnCompileResult r;
    ck_assert_int_eq(compile(src, kernel, defs, ndefs, &r), KILN_ERR_COMPILE);
    ck_assert_ptr_nonnull(r.diagnostics);
    for (int i = 0; i < n; i++)
        ck_assert_msg(strstr(r.diagnostics, needles[i]), "no '%s' in:\n%s\n(source:\n%s)", needles[i], r.diagnostics,
                      src);
    kiln_compile_result_free(&r);
}

static void expect_ok(const char *src, const char *kernel, const KilnDefine *defs, int ndefs)
{
    KilnCompileResult r;
    KilnStatus st = compile(src, kernel, defs, ndefs, &r);
    ck_assert_msg(st == KILN_OK, "%s\n(source:\n%s)", r.diagnostics ? r.diagnostics : "", src);
    kiln_compile_result_free(&r);
}

START_TEST(misspelt_hook)
{
    const char *src = "import \"attention\";\n"
                      "fn mask_mode(b, h, q_idx, kv_idx) { return kv_idx <= q_idx; }\n";
    const char *want[] = {"v.tile:2:4: error: 'mask_mode' is no hook of the imported programs and nothing calls it, "
                          "so it would be ignored; did you mean 'mask_mod'?\n"
                          "fn mask_mode(b, h, q_idx, kv_idx) { return kv_idx <= q_idx; }\n"
                          "   ^\n"};
    expect_error(src, "attn_fwd_f16", NULL, 0, want, 1);
    const char *far = "import \"attention_fwd\";\nfn totally_unrelated(x) { return x; }\n";
    const char *want2[] = {"v.tile:2:4: error: 'totally_unrelated' is no hook of the imported programs"};
    expect_error(far, "attn_fwd_f16", NULL, 0, want2, 1);
    /* hooks, a helper a hook calls, a backward-only hook, a helper bound by -D: fine */
    expect_ok("import \"attention\";\n"
              "fn near(q, k) { return k <= q; }\n"
              "fn mask_mod(b, h, q_idx, kv_idx) { return near(q_idx, kv_idx); }\n"
              "fn score_mod_grad(s, b, h, q_idx, kv_idx) { return 1.0; }\n",
              "attn_fwd_f16", NULL, 0);
    KilnDefine d = {"score_mod", "my_score"};
    expect_ok("import \"attention_fwd\";\nfn my_score(s, b, h, q_idx, kv_idx) { return s * 0.5; }\n"
              "fn other_score(s, b, h, q_idx, kv_idx) { return s * 2.0; }\n", "attn_fwd_f16", &d, 1);
    /* with -D binding, helpers for other compiles are fine, a near miss of a hook is not */
    const char *want3[] = {"v.tile:3:4: error: 'mask_mode' is no hook", "did you mean 'mask_mod'?"};
    expect_error("import \"attention_fwd\";\nfn my_score(s, b, h, q_idx, kv_idx) { return s * 0.5; }\n"
                 "fn mask_mode(b, h, q_idx, kv_idx) { return kv_idx <= q_idx; }\n", "attn_fwd_f16", &d, 1, want3, 2);
    /* a file with nothing to bind keeps its unused helpers (language.md: checked where called) */
    expect_ok("fn unused(x) { return x; }\nkernel k(X: *f32) { store(X, 1.0); }\n", NULL, NULL, 0);
}
END_TEST

START_TEST(builtin_names_refused)
{
    const char *src = "import \"attention_fwd\";\n"
                      "fn store(p, v) { }\n"
                      "const LOG2E = 1.0;\n"
                      "param tanh: f32;\n"
                      "fn min(a, b) { return a; }\n"
                      "const f32 = 2;\n";
    const char *want[] = {
        "v.tile:2:4: error: 'store' is a built-in function; a file-level helper of that name would replace it in "
        "every kernel of the file (the imported programs' too): rename the helper\n",
        "v.tile:3:7: error: 'LOG2E' is a built-in constant; a file-level const",
        "v.tile:4:7: error: 'tanh' is a built-in function; a file-level param",
        "v.tile:5:4: error: 'min' is a built-in function",
        "v.tile:6:7: error: 'f32' is a type",
    };
    expect_error(src, "attn_fwd_f16", NULL, 0, want, 5);
}
END_TEST

START_TEST(max_with_int_is_ambiguous)
{
    const char *src = "import \"attention_fwd\";\n"
                      "param w: i32;\n"
                      "fn mask_mod(b, h, q_idx, kv_idx) { return kv_idx >= max(q_idx - w, 0); }\n";
    const char *want[] = {"v.tile:3:53: error: max(x, 0) on a tile is ambiguous: write max(x, axis = 0) for the "
                          "reduction along axis 0, or maximum(x, 0) for the elementwise maximum (a clamp from below)\n"};
    expect_error(src, "attn_fwd_f16", NULL, 0, want, 1);
    const char *want_min[] = {"error: min(x, 1) on a tile is ambiguous"};
    expect_error("kernel k(X: *f32) { let x = load(X + arange(16)[:, None] * 16 + arange(16)[None, :]);\n"
                 "    store(X + arange(16), min(x, 1)); }\n", NULL, NULL, 0, want_min, 1);
    expect_ok("import \"attention_fwd\";\nparam w: i32;\n"
              "fn mask_mod(b, h, q_idx, kv_idx) { return kv_idx >= maximum(q_idx - w, 0); }\n"
              "fn kv_start(start_m, block_m, seqlen_q, seqlen_k) { return max(start_m - w, 0); }\n",
              "attn_fwd_f16", NULL, 0);
    expect_ok("kernel k(X: *f32) { let x = load(X + arange(16)[:, None] * 16 + arange(16)[None, :]);\n"
              "    store(X + arange(16), max(x, axis = 0)); }\n", NULL, NULL, 0);
}
END_TEST

START_TEST(hook_arity_at_the_hook)
{
    const char *src = "import \"attention_fwd\";\n"
                      "fn mask_mod(b, h, q_idx) { return q_idx >= 0; }\n";
    const char *want[] = {"v.tile:2:4: error: helper 'mask_mod' takes 3 arguments, got 4\n"
                          "fn mask_mod(b, h, q_idx) { return q_idx >= 0; }\n"
                          "   ^\n"
                          "lang/lib/attention_fwd.tile:"};
    expect_error(src, "attn_fwd_f16", NULL, 0, want, 1);
    KilnCompileResult r;
    ck_assert_int_eq(compile(src, "attn_fwd_f16", NULL, 0, &r), KILN_ERR_COMPILE);
    int n = 0;   /* once, not once per call site */
    for (const char *p = r.diagnostics; (p = strstr(p, "takes 3 arguments")); p++) n++;
    ck_assert_int_eq(n, 1);
    ck_assert_ptr_nonnull(strstr(r.diagnostics, "note: 'mask_mod' is called here"));
    kiln_compile_result_free(&r);
}
END_TEST

START_TEST(bad_sizes_refused)
{
    const char *hd[] = {"0", "-8"};
    for (int i = 0; i < 2; i++) {
        KilnDefine d = {"HEAD_DIM", hd[i]};
        const char *want[] = {"error: static assertion failed: HEAD_DIM must be positive"};
        expect_error("import \"attention\";\n", "attn_fwd_f16", &d, 1, want, 1);
        expect_error("import \"attention\";\n", "attn_bwd_dq_f16", &d, 1, want, 1);
        expect_error("import \"attention\";\n", "attn_decode_f16", &d, 1, want, 1);
    }
    KilnDefine m = {"MASK_BLOCK_N", "0"};
    const char *want_m[] = {"error: static assertion failed: the block mask's"};
    expect_error("import \"attention\";\n", "attn_fwd_bm_f16", &m, 1, want_m, 1);
    expect_error("import \"attention\";\n", "attn_bwd_dq_bm_f16", &m, 1, want_m, 1);
    expect_error("import \"attention\";\n", "attn_decode_bm_f16", &m, 1, want_m, 1);
    KilnDefine b = {"BLOCK_KV", "0"};
    const char *want_b[] = {"error: static assertion failed: the blocks must be positive"};
    expect_error("import \"attention\";\n", "attn_block_mask", &b, 1, want_b, 1);
    KilnDefine ok = {"HEAD_DIM", "96"};
    expect_ok("import \"attention\";\n", "attn_fwd_f16", &ok, 1);
}
END_TEST

/* Composition's errors: a module imported twice under different names, a program under an
 * alias, a malformed `as`; two aliased variants side by side compile (both define score_mod). */
START_TEST(import_as)
{
    expect_ok("import \"attention_fwd\";\nimport \"variants/softcap\" as cap;\nimport \"variants/alibi\" as alibi;\n"
              "fn score_mod(s, b, h, q_idx, kv_idx) { return compose_scores(cap_score_mod, alibi_score_mod, s, b, h, "
              "q_idx, kv_idx); }\n", "attn_fwd_f16", NULL, 0);
    const char *want1[] = {"v.tile:3:30: error: module 'variants/softcap' is already imported as 'cap'; import it once"};
    expect_error("import \"attention_fwd\";\nimport \"variants/softcap\" as cap;\nimport \"variants/softcap\" as cap2;\n"
                 "fn score_mod(s, b, h, q_idx, kv_idx) { return cap_score_mod(s, b, h, q_idx, kv_idx); }\n",
                 "attn_fwd_f16", NULL, 0, want1, 1);
    const char *want2[] = {"v.tile:1:27: error: the library's program 'attention_fwd' cannot be imported under an alias"};
    expect_error("import \"attention_fwd\" as f;\n", NULL, NULL, 0, want2, 1);
    const char *want3[] = {"v.tile:1:25: error: expected 'as' or ';' after the module name, got 'like'"};
    expect_error("import \"variants/alibi\" like a;\n", NULL, NULL, 0, want3, 1);
    /* without the alias the two score_mods clash, as before */
    const char *want4[] = {"'score_mod' is already declared"};
    expect_error("import \"attention_fwd\";\nimport \"variants/softcap\";\nimport \"variants/alibi\";\n", "attn_fwd_f16",
                 NULL, 0, want4, 1);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("variant_traps");
    TCase *tc = tcase_create("traps");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, misspelt_hook);
    tcase_add_test(tc, builtin_names_refused);
    tcase_add_test(tc, max_with_int_is_ambiguous);
    tcase_add_test(tc, hook_arity_at_the_hook);
    tcase_add_test(tc, bad_sizes_refused);
    tcase_add_test(tc, import_as);
    suite_add_tcase(s, tc);
    return s;
}

TU_MAIN(suite)
