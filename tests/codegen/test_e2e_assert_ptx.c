/* test_e2e_assert_ptx.c — a kernel with device_assert (on a tile and on a
 * scalar, inside a loop too) compiles through the whole pipeline for sm_80:
 * the assert survives the target-independent passes (it is an effect), the PTX
 * traps on failure, and ptxas accepts it (a ptxas-tagged case: the ctest entry
 * test_e2e_assert_ptx/ptxas, skipped when ptxas is absent). */
#include "tests/testutil.h"
#include "tests/ptx_util.h"
#include "kiln.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *SRC =
    "kernel checked(X: *f32, Y: *f32, n: i32, const BLOCK: i32 = 128) {\n"
    "    let offs = program_id(0) * BLOCK + arange(BLOCK);\n"
    "    let mask = offs < n;\n"
    "    let x = load(X + offs, mask = mask, other = 0);\n"
    "    device_assert(!mask || x == x, \"NaN input\");\n"
    "    device_assert(n > 0);\n"
    "    var acc = x;\n"
    "    for i in range(4) {\n"
    "        device_assert(acc >= -1e30, \"acc underflow\");\n"
    "        acc += x;\n"
    "    }\n"
    "    store(Y + offs, acc, mask = mask);\n"
    "}\n";

static KilnCompileResult compile(KilnEmit emit)
{
    KilnCompileOptions o;
    memset(&o, 0, sizeof o);
    o.arch = "sm_80";
    o.emit = emit;
    KilnCompileResult r;
    KilnStatus st = kiln_compile("assert.tile", SRC, &o, &r);
    ck_assert_msg(st == KILN_OK, "%s\n%s", kiln_status_name(st), r.diagnostics ? r.diagnostics : "");
    return r;
}

START_TEST(assert_kept_by_passes)
{
    KilnCompileResult r = compile(KILN_EMIT_IR);
    ck_assert_int_eq(pu_count_n(r.output, r.output_size, "assert "), 3);
    ck_assert_int_eq(pu_count_n(r.output, r.output_size, "\"NaN input\""), 1);
    ck_assert_int_eq(pu_count_n(r.output, r.output_size, "\"n > 0\""), 1);
    kiln_compile_result_free(&r);
}
END_TEST

START_TEST(assert_traps_in_ptx)
{
    KilnCompileResult r = compile(KILN_EMIT_PTX);
    ck_assert_msg(pu_count_n(r.output, r.output_size, "trap;") >= 3, "PTX without trap:\n%.*s",
                  (int)r.output_size, r.output);
    kiln_compile_result_free(&r);
}
END_TEST

START_TEST(assert_accepted_by_ptxas)
{
    KilnCompileResult r = compile(KILN_EMIT_CUBIN);
    ck_assert_int_gt((int)r.output_size, 4);
    ck_assert_msg(memcmp(r.output, "\177ELF", 4) == 0, "cubin is not ELF");
    kiln_compile_result_free(&r);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("codegen_e2e_assert_ptx");
    TCase *tc = tcase_create("all");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, assert_kept_by_passes);
    tcase_add_test(tc, assert_traps_in_ptx);
    suite_add_tcase(s, tc);
    TCase *pt = pu_ptxas_tcase(s, 300);
    tcase_add_test(pt, assert_accepted_by_ptxas);
    return s;
}

PU_MAIN(suite)
