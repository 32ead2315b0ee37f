/* test_e2e_emit_auto.c — KilnCompileOptions.emit left at 0 (KILN_EMIT_AUTO)
 * means in kiln_compile what it means in kiln_module_compile: the code a
 * device loads, a cubin when ptxas is found and PTX otherwise. (Before, 0 was
 * KILN_EMIT_AST in kiln_compile and "auto" in kiln_module_compile.)
 *
 * Invariants checked: without ptxas (KILN_PTXAS naming a file that is not
 * there) a zeroed request gives exactly the PTX an explicit KILN_EMIT_PTX
 * gives; with ptxas it gives a cubin (an ELF image); an explicit
 * KILN_EMIT_AST still gives the AST; a value past KILN_EMIT_CUBIN is a usage
 * error. Example: `KilnCompileOptions o = {.arch = "sm_80"};` compiles to
 * loadable code. */
#include "ptx_util.h"
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

#include "kiln.h"

static const char SRC[] = "kernel k(X: *f32, n: i32) {\n  let o = program_id(0) * 64 + arange(64);\n"
                          "  store(X + o, load(X + o, mask = o < n) * 3.0, mask = o < n);\n}\n";

static KilnStatus compile(KilnEmit emit, KilnCompileResult *r)
{
    KilnCompileOptions o;
    memset(&o, 0, sizeof o);
    o.emit = emit;
    o.arch = "sm_80";
    return kiln_compile("k.tile", SRC, &o, r);
}

START_TEST(zero_without_ptxas_is_ptx)
{
    const char *saved = getenv("KILN_PTXAS");
    char *keep = saved ? strdup(saved) : NULL;
    setenv("KILN_PTXAS", "/nonexistent/kiln-test/ptxas", 1);
    KilnCompileResult a, b;
    ck_assert_int_eq(compile((KilnEmit)0, &a), KILN_OK);
    ck_assert_int_eq(compile(KILN_EMIT_PTX, &b), KILN_OK);
    ck_assert_ptr_nonnull(a.output);
    ck_assert_msg(strstr(a.output, ".entry k("), "emit 0 without ptxas is not PTX: %.200s", a.output);
    ck_assert_uint_eq(a.output_size, b.output_size);
    ck_assert_mem_eq(a.output, b.output, a.output_size);
    ck_assert_int_eq(a.nkernels, 1);
    kiln_compile_result_free(&a);
    kiln_compile_result_free(&b);
    if (keep) setenv("KILN_PTXAS", keep, 1);
    else unsetenv("KILN_PTXAS");
    free(keep);
}
END_TEST

START_TEST(explicit_stages_are_kept)
{
    KilnCompileResult r;
    ck_assert_int_eq(compile(KILN_EMIT_AST, &r), KILN_OK);
    ck_assert_ptr_nonnull(r.output);
    ck_assert_ptr_null(strstr(r.output, ".entry"));
    ck_assert_msg(strstr(r.output, "kernel k"), "KILN_EMIT_AST is not the AST: %.200s", r.output);
    kiln_compile_result_free(&r);
    ck_assert_int_eq(compile(KILN_EMIT_IR, &r), KILN_OK);
    ck_assert_ptr_null(strstr(r.output, ".entry"));
    kiln_compile_result_free(&r);
    ck_assert_int_eq(compile((KilnEmit)(KILN_EMIT_CUBIN + 1), &r), KILN_ERR_USAGE);
    kiln_compile_result_free(&r);
    ck_assert_int_eq(compile((KilnEmit)-1, &r), KILN_ERR_USAGE);
    kiln_compile_result_free(&r);
}
END_TEST

START_TEST(zero_with_ptxas_is_a_cubin)
{
    KilnCompileResult r;
    ck_assert_int_eq(compile(KILN_EMIT_AUTO, &r), KILN_OK);
    ck_assert_uint_gt(r.output_size, 4);
    ck_assert_mem_eq(r.output, "\x7f" "ELF", 4);
    kiln_compile_result_free(&r);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("driver");
    TCase *tc = tcase_create("emit-auto");
    tcase_add_test(tc, zero_without_ptxas_is_ptx);
    tcase_add_test(tc, explicit_stages_are_kept);
    suite_add_tcase(s, tc);
    tcase_add_test(pu_ptxas_tcase(s, 0), zero_with_ptxas_is_a_cubin);
    return s;
}

PU_MAIN(suite)
