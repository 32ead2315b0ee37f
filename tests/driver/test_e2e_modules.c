/* test_e2e_modules.c — `import` and module-level runtime `param`s through kiln_compile.
 *
 * Imports: the embedded library is found by name (both spellings), a file next to
 * the importer and one on an include dir are found, a module imported twice is
 * loaded once, and every misuse is a located error with a caret in the right file:
 * a missing module (saying where it looked), a hook named like a library helper, two
 * modules defining one name, a cycle, an error inside an imported module. A
 * hooks-only variant importing "attention" compiles every shipped kernel with its
 * hooks bound by name.
 * Params: a kernel that reads one gets it after its own parameters, in declaration
 * order, under its name (KilnKernelInfo); a kernel that does not keeps its exact
 * signature; name clashes and non-value types are errors; hints may name them; the
 * interpreter runs a kernel reading one (kiln_run_cpu).
 */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kiln.h"
#include "compiler/driver/driver.h"

static char g_dir[256];

static void write_file(const char *name, const char *text)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

static const char *path_of(const char *name)
{
    static char path[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(path[k], sizeof path[k], "%s/%s", g_dir, name);
    return path[k];
}

static void setup(void)
{
    snprintf(g_dir, sizeof g_dir, "/tmp/kiln_modules_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(g_dir));
    char sub[300];
    snprintf(sub, sizeof sub, "%s/inc", g_dir);
    mkdir(sub, 0700);
}

static void teardown(void)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    ck_assert_int_eq(system(cmd), 0);
}

/* Compile `src` (named `path`) to IR, kernel `kernel` (NULL: all). */
static KilnStatus compile(const char *path, const char *src, const char *kernel, const char *const *inc, int ninc,
                          KilnCompileResult *r)
{
    KilnCompileOptions o;
    memset(&o, 0, sizeof o);
    o.emit = KILN_EMIT_IR;
    o.kernel = kernel;
    o.include_dirs = inc;
    o.ninclude_dirs = ninc;
    return kiln_compile(path, src, &o, r);
}

static void expect_error(const char *path, const char *src, const char *const *needles, int n)
{
    KilnCompileResult r;
    ck_assert_int_eq(compile(path, src, NULL, NULL, 0, &r), KILN_ERR_COMPILE);
    ck_assert_ptr_nonnull(r.diagnostics);
    for (int i = 0; i < n; i++) ck_assert_msg(strstr(r.diagnostics, needles[i]), "no '%s' in:\n%s", needles[i], r.diagnostics);
    kiln_compile_result_free(&r);
}

static const KilnKernelInfo *kernel(const KilnCompileResult *r, const char *name)
{
    for (int i = 0; i < r->nkernels; i++)
        if (!strcmp(r->kernels[i].name, name)) return &r->kernels[i];
    ck_abort_msg("no kernel %s", name);
    return NULL;
}

START_TEST(library_by_name_and_string)
{
    const char *forms[] = {"import \"attention_fwd\";\n", "import attention_fwd;\n", "import \"attention_fwd.tile\";\n"};
    for (int i = 0; i < 3; i++) {
        KilnCompileResult r;
        ck_assert_int_eq(compile("v.tile", forms[i], "attn_fwd_f16", NULL, 0, &r), KILN_OK);
        ck_assert_int_eq(r.nkernels, 1);
        ck_assert_str_eq(r.kernels[0].name, "attn_fwd_f16");
        kiln_compile_result_free(&r);
    }
}
END_TEST

/* The shipped variant files check against every kernel of the three programs. */
START_TEST(hooks_only_variant_checks_every_kernel)
{
    const char *src = "import \"attention\";\n"
                      "param window: i32;\n"
                      "fn mask_mod(b, h, q_idx, kv_idx) { return kv_idx >= q_idx - window; }\n";
    KilnCompileResult r;
    ck_assert_int_eq(compile("v.tile", src, NULL, NULL, 0, &r), KILN_OK);
    /* forward 2 + 2 packed (varlen) + 2 block-mask + 2 FP8 + 2 FP8 block-mask, backward 8 + 8
     * packed + 4 block-mask, decoding 4 + 2 block-mask, block-mask classification 2 */
    ck_assert_int_eq(r.nkernels, 38);
    const KilnKernelInfo *f = kernel(&r, "attn_fwd_f16");
    ck_assert_str_eq(f->params[f->nparams - 1].name, "window");
    ck_assert_int_eq(f->params[f->nparams - 1].kind, KILN_PARAM_I32);
    const KilnKernelInfo *f8 = kernel(&r, "attn_fwd_bm_fp8_bf16");
    ck_assert_str_eq(f8->params[f8->nparams - 1].name, "window");
    ck_assert_str_eq(kernel(&r, "attn_bwd_dq_bf16")->params[kernel(&r, "attn_bwd_dq_bf16")->nparams - 1].name,
                     "window");
    ck_assert_str_eq(kernel(&r, "attn_decode_f16")->params[kernel(&r, "attn_decode_f16")->nparams - 1].name,
                     "window");
    ck_assert_str_eq(kernel(&r, "attn_bwd_dkdv_bm_f16")->params[kernel(&r, "attn_bwd_dkdv_bm_f16")->nparams - 1].name,
                     "window");
    ck_assert_str_eq(kernel(&r, "attn_decode_bm_bf16")->params[kernel(&r, "attn_decode_bm_bf16")->nparams - 1].name,
                     "window");
    ck_assert_str_eq(kernel(&r, "attn_block_mask")->params[kernel(&r, "attn_block_mask")->nparams - 1].name,
                     "window");
    /* the preprocessing kernel calls no hook: its signature is the plain program's */
    KilnCompileResult plain;
    ck_assert_int_eq(compile("p.tile", "import \"attention\";\n", NULL, NULL, 0, &plain), KILN_OK);
    const char *same[] = {"attn_bwd_pre_f16", "attn_decode_combine_f16", "attn_bwd_dq_cvt_bf16"};
    for (int i = 0; i < 3; i++) {
        const KilnKernelInfo *a = kernel(&r, same[i]), *b = kernel(&plain, same[i]);
        ck_assert_int_eq(a->nparams, b->nparams);
        for (int j = 0; j < a->nparams; j++) ck_assert_str_eq(a->params[j].name, b->params[j].name);
    }
    ck_assert_int_eq(kernel(&r, "attn_fwd_f16")->nparams, kernel(&plain, "attn_fwd_f16")->nparams + 1);
    kiln_compile_result_free(&plain);
    kiln_compile_result_free(&r);
}
END_TEST

/* Params come in declaration order whatever order the hooks read them in. */
START_TEST(params_in_declaration_order)
{
    const char *src = "param a: f32;\nparam unused: *f32;\nparam b: *i32;\nparam c: i64;\n"
                      "fn f(x) { return x + load(b + c).to(f32) * a; }\n"
                      "kernel k(X: *f32, n: i32) {\n  let o = arange(16);\n"
                      "  let m = o < n;\n  store(X + o, f(load(X + o, mask = m, other = 0)), mask = m);\n}\n";
    KilnCompileResult r;
    ck_assert_int_eq(compile("k.tile", src, NULL, NULL, 0, &r), KILN_OK);
    const KilnKernelInfo *k = kernel(&r, "k");
    ck_assert_int_eq(k->nparams, 5);
    const char *want[] = {"X", "n", "a", "b", "c"};
    for (int i = 0; i < 5; i++) ck_assert_str_eq(k->params[i].name, want[i]);
    ck_assert_int_eq(k->params[3].kind, KILN_PARAM_PTR);
    ck_assert_int_eq(k->params[3].pointee_bits, 32);
    ck_assert_int_eq(k->params[4].kind, KILN_PARAM_I64);
    kiln_compile_result_free(&r);
    /* a divisibility hint may name a module param */
    KilnParamHint h = {"b", 16, 0};
    KilnCompileOptions o;
    memset(&o, 0, sizeof o);
    o.emit = KILN_EMIT_IR;
    o.hints = &h;
    o.nhints = 1;
    ck_assert_int_eq(kiln_compile("k.tile", src, &o, &r), KILN_OK);
    ck_assert_msg(strstr(r.output, "%b: ptr<i32> {div = 16}") != NULL, "%s", r.output);
    kiln_compile_result_free(&r);
}
END_TEST

START_TEST(param_errors)
{
    const char *n1[] = {"k.tile:1:7: error: param 'n' has the name of a parameter of kernel 'k'; rename it",
                        "param n: i32;\n      ^", "k.tile:2:19: note: the kernel's parameter 'n'"};
    expect_error("k.tile", "param n: i32;\nkernel k(X: *f32, n: i32) { store(X, 1.0); }\n", n1, 3);
    const char *n2[] = {"k.tile:1:10: error: a module-level param is a runtime value: 'f' cannot be a 'fn'"};
    expect_error("k.tile", "param f: fn;\nfn g(x) { return f; }\nkernel k(X: *f32) { store(X, g(1.0)); }\n", n2, 1);
    const char *n3[] = {"k.tile:2:32: error: cannot assign to parameter 'w'"};
    expect_error("k.tile", "param w: f32;\nkernel k(X: *f32) { var a = w; w = 2.0; store(X, a); }\n", n3, 1);
    const char *n5[] = {"k.tile:1:8: error: expected ':' before ';'\nparam x;\n       ^"};
    expect_error("k.tile", "param x;\n", n5, 1);
    const char *n6[] = {"k.tile:1:8: error: an import needs a module name"};
    expect_error("k.tile", "import \"\";\n", n6, 1);
    KilnCompileResult r;
    ck_assert_int_eq(compile("k.tile", "import \"\";\n", NULL, NULL, 0, &r), KILN_ERR_COMPILE);
    ck_assert_ptr_null(strstr(r.diagnostics, "cannot find module"));   /* one error, not two */
    kiln_compile_result_free(&r);
    const char *n4[] = {"k.tile:1:10: error: unknown type 'f23'; did you mean 'f16'?"};
    expect_error("k.tile", "param w: f23;\nfn g() { return w; }\nkernel k(X: *f32) { store(X, g()); }\n", n4, 1);
}
END_TEST

START_TEST(missing_module_is_located)
{
    const char *n[] = {"v.tile:2:8: error: cannot find module 'attention_fw' (looked in ",
                       "import attention_fw;\n       ^",
                       "the embedded library (attention, attention_bwd, attention_common, attention_decode, attention_fwd"};
    expect_error("v.tile", "// a variant\nimport attention_fw;\n", n, 3);
}
END_TEST

/* A hook named like a helper of the library: the error is at the hook, the note at
 * the library's helper, each with its own file's line. */
START_TEST(clash_with_library_helper)
{
    const char *n[] = {"v.tile:2:4: error: 'load_tile' is already declared in this scope",
                       "fn load_tile(p, m, x) { return 0; }\n   ^",
                       "lang/lib/attention_fwd.tile:",
                       "note: previous declaration of 'load_tile'",
                       "fn load_tile(ptrs, mask, const MASKED: bool)\n   ^"};
    expect_error("v.tile", "import \"attention_fwd\";\nfn load_tile(p, m, x) { return 0; }\n", n, 5);
}
END_TEST

START_TEST(two_modules_one_name)
{
    write_file("a.tile", "fn shared(x) { return x; }\n");
    write_file("b.tile", "// b\nfn shared(x) { return x + 1; }\n");
    const char *root = "import \"a\";\nimport \"b\";\nkernel k(X: *f32) { store(X, shared(1.0)); }\n";
    KilnCompileResult r;
    ck_assert_int_eq(compile(path_of("root.tile"), root, NULL, NULL, 0, &r), KILN_ERR_COMPILE);
    char want[600];
    snprintf(want, sizeof want, "b.tile:2:4: error: 'shared' is already declared in this scope\n"
                                "fn shared(x) { return x + 1; }\n   ^");
    ck_assert_msg(strstr(r.diagnostics, want), "%s", r.diagnostics);
    ck_assert_msg(strstr(r.diagnostics, "a.tile:1:4: note: previous declaration of 'shared'"), "%s", r.diagnostics);
    kiln_compile_result_free(&r);
}
END_TEST

START_TEST(cycle_is_an_error)
{
    write_file("a.tile", "import \"b\";\nfn fa(x) { return x; }\n");
    write_file("b.tile", "// b imports a\nimport \"a\";\nfn fb(x) { return x; }\n");
    const char *root = "import \"a\";\nkernel k(X: *f32) { store(X, fa(fb(1.0))); }\n";
    KilnCompileResult r;
    ck_assert_int_eq(compile(path_of("root.tile"), root, NULL, NULL, 0, &r), KILN_ERR_COMPILE);
    ck_assert_msg(strstr(r.diagnostics, "b.tile:2:8: error: import cycle: "), "%s", r.diagnostics);
    ck_assert_msg(strstr(r.diagnostics, "a.tile -> ") && strstr(r.diagnostics, "b.tile -> "), "%s", r.diagnostics);
    ck_assert_msg(strstr(r.diagnostics, "import \"a\";\n       ^"), "%s", r.diagnostics);
    kiln_compile_result_free(&r);
}
END_TEST

/* attention imports attention_fwd; importing both loads it once (no clash). A module
 * found through -I, one next to the importer, and an error inside an imported module. */
START_TEST(once_include_dirs_and_errors_inside)
{
    KilnCompileResult r;
    const char *twice = "import \"attention_fwd\";\nimport \"attention\";\nimport attention_fwd;\n";
    ck_assert_int_eq(compile("v.tile", twice, "attn_fwd_bf16", NULL, 0, &r), KILN_OK);
    kiln_compile_result_free(&r);

    write_file("inc/helpers.tile", "fn twice(x) { return x * 2.0; }\n");
    const char *root = "import helpers;\nkernel k(X: *f32) { store(X, twice(1.0)); }\n";
    ck_assert_int_eq(compile(path_of("root.tile"), root, NULL, NULL, 0, &r), KILN_ERR_COMPILE);
    ck_assert_msg(strstr(r.diagnostics, "cannot find module 'helpers'"), "%s", r.diagnostics);
    ck_assert_msg(strstr(r.diagnostics, "add its directory with -I DIR"), "%s", r.diagnostics);
    kiln_compile_result_free(&r);
    const char *inc[] = {path_of("inc")};
    ck_assert_int_eq(compile(path_of("root.tile"), root, NULL, inc, 1, &r), KILN_OK);
    kiln_compile_result_free(&r);
    /* the on-disk cache keys on the texts of modules read from disk (not the library's) */
    KilnCompileOptions o = {.include_dirs = inc, .ninclude_dirs = 1};
    char *dig = kiln_import_digest(path_of("root.tile"), root, &o);
    ck_assert_msg(dig && strstr(dig, "fn twice(x) { return x * 2.0; }") && strstr(dig, "helpers.tile"), "%s",
                  dig ? dig : "(null)");
    free(dig);
    ck_assert_ptr_null(kiln_import_digest("v.tile", twice, &o));

    write_file("bad.tile", "fn broken(x) {\n  return x +* 2;\n}\n");
    ck_assert_int_eq(compile(path_of("root.tile"), "import bad;\n", NULL, NULL, 0, &r), KILN_ERR_COMPILE);
    ck_assert_msg(strstr(r.diagnostics, "bad.tile:2:13: error:"), "%s", r.diagnostics);
    ck_assert_msg(strstr(r.diagnostics, "  return x +* 2;\n"), "%s", r.diagnostics);
    kiln_compile_result_free(&r);
}
END_TEST

/* A module holding a NUL byte is an error at the import, naming where the NUL is
 * (it used to be cut there: its later kernels, one with a syntax error, vanished). */
START_TEST(module_with_nul_byte)
{
    char path[512];
    snprintf(path, sizeof path, "%s/nul.tile", g_dir);
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    static const char text[] = "fn ok(x) { return x; }\n// \0 cut here\nkernel broken(X: *f32) { store(X, +*); }\n";
    fwrite(text, 1, sizeof text - 1, f);
    fclose(f);
    KilnCompileResult r;
    ck_assert_int_eq(compile(path_of("root.tile"), "import nul;\n", NULL, NULL, 0, &r), KILN_ERR_COMPILE);
    ck_assert_msg(strstr(r.diagnostics, "root.tile:1:8: error: import 'nul': module file ") &&
                  strstr(r.diagnostics, "nul.tile holds a NUL byte at line 2, column 4"), "%s", r.diagnostics);
    kiln_compile_result_free(&r);
}
END_TEST

/* Something that exists but cannot be read is named with the reason, not "cannot find";
 * an absolute import lists only the path it tried. */
START_TEST(unreadable_module_says_why)
{
    char p[600], cmd[1200];
    snprintf(p, sizeof p, "%s/dir.tile", g_dir);
    ck_assert_int_eq(mkdir(p, 0700), 0);
    snprintf(p, sizeof p, "%s/loop.tile", g_dir);
    ck_assert_int_eq(symlink(p, p), 0);
    snprintf(cmd, sizeof cmd, "truncate -s 17M '%s/big.tile'", g_dir);
    ck_assert_int_eq(system(cmd), 0);
    snprintf(p, sizeof p, "%s/zero.tile", g_dir);
    ck_assert_int_eq(symlink("/dev/zero", p), 0);
    struct { const char *src, *want; } cases[] = {
        {"import dir;\n", "dir.tile: it is a directory"},
        {"import loop;\n", "loop.tile: Too many levels of symbolic links"},
        {"import big;\n", "big.tile: it is over the 16 MiB source limit"},
        {"import zero;\n", "zero.tile: it is not a regular file"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        KilnCompileResult r;
        ck_assert_int_eq(compile(path_of("root.tile"), cases[i].src, NULL, NULL, 0, &r), KILN_ERR_COMPILE);
        ck_assert_msg(strstr(r.diagnostics, cases[i].want) && !strstr(r.diagnostics, "cannot find"), "%s",
                      r.diagnostics);
        kiln_compile_result_free(&r);
    }
    KilnCompileResult r;
    ck_assert_int_eq(compile(path_of("root.tile"), "import \"/nonexistent/m.tile\";\n", NULL, NULL, 0, &r),
                     KILN_ERR_COMPILE);
    ck_assert_msg(strstr(r.diagnostics, "cannot find module '/nonexistent/m.tile' (looked in /nonexistent/m.tile); "),
                  "%s", r.diagnostics);
    kiln_compile_result_free(&r);
}
END_TEST

/* The interpreter runs a kernel whose helper reads module params. */
START_TEST(interpreter_passes_params)
{
    const char *src = "param scale: f32;\nparam bias: *f32;\n"
                      "fn f(x, i) { return x * scale + load(bias + i); }\n"
                      "kernel k(X: *f32, Y: *f32, n: i32) {\n  let o = arange(16);\n  let m = o < n;\n"
                      "  store(Y + o, f(load(X + o, mask = m, other = 0), o), mask = m);\n}\n";
    float x[16], y[16], bias[16];
    for (int i = 0; i < 16; i++) x[i] = (float)i * 0.5f - 3.0f, bias[i] = (float)(i * i) * 0.25f;
    KilnHostArg a[5] = {kiln_host_buf(x, sizeof x, KILN_HOST_IN), kiln_host_buf(y, sizeof y, KILN_HOST_OUT),
                        kiln_host_scalar(kiln_arg_i32(13)), kiln_host_scalar(kiln_arg_f32(1.5f)),
                        kiln_host_buf(bias, sizeof bias, KILN_HOST_IN)};
    KilnCompileOptions o;
    memset(&o, 0, sizeof o);
    int grid[3] = {1, 1, 1};
    ck_assert_msg(kiln_run_cpu("k.tile", src, &o, grid, a, 5) == KILN_OK, "%s", kiln_last_error());
    for (int i = 0; i < 13; i++) ck_assert_float_eq_tol(y[i], x[i] * 1.5f + bias[i], 1e-6);
    ck_assert_msg(y[13] != y[13], "element 13 is outside the mask: still NaN");
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("modules");
    TCase *tc = tcase_create("modules");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, library_by_name_and_string);
    tcase_add_test(tc, hooks_only_variant_checks_every_kernel);
    tcase_add_test(tc, params_in_declaration_order);
    tcase_add_test(tc, param_errors);
    tcase_add_test(tc, missing_module_is_located);
    tcase_add_test(tc, clash_with_library_helper);
    tcase_add_test(tc, two_modules_one_name);
    tcase_add_test(tc, cycle_is_an_error);
    tcase_add_test(tc, once_include_dirs_and_errors_inside);
    tcase_add_test(tc, interpreter_passes_params);
    tcase_add_test(tc, module_with_nul_byte);
    tcase_add_test(tc, unreadable_module_says_why);
    suite_add_tcase(s, tc);
    return s;
}

TU_MAIN(suite)
