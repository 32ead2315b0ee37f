/* test_dump_after.c — kiln_compile refuses a --dump-after name that is no
 * pass (before, a misspelt name dumped nothing and said nothing) and lists the
 * names it takes; every real pass name, of either pipeline, the schedule's "persistent"
 * and "lower" is accepted. */
#include "testutil.h"

#include <string.h>

#include "kiln.h"
#include "compiler/passes/passes.h"

static const char SRC[] = "kernel k(X: *f32) {\n  let o = arange(16);\n  store(X + o, load(X + o) + 1.0);\n}\n";

static KilnStatus compile(const char *dump_after, KilnEmit emit, KilnCompileResult *r)
{
    KilnCompileOptions o;
    memset(&o, 0, sizeof o);
    o.emit = emit;
    o.arch = "sm_80";
    o.dump_after = dump_after;
    return kiln_compile("k.tile", SRC, &o, r);
}

START_TEST(unknown_pass_is_a_usage_error)
{
    KilnCompileResult r;
    ck_assert_int_eq(compile("nosuchpass", KILN_EMIT_IR, &r), KILN_ERR_USAGE);
    ck_assert_ptr_nonnull(r.diagnostics);
    ck_assert_msg(strstr(r.diagnostics, "k.tile: error: unknown pass 'nosuchpass' for --dump-after (expected all, "
                                        "fold, cse, licm, dce, persistent, accelerate-dot, layout-assign, remove-convert, "
                                        "dot-rotate, pipeline, dot-overlap, sram-alloc, tma, pingpong, warp-specialize, lower)"),
                  "%s", r.diagnostics);
    ck_assert_ptr_null(r.output);
    kiln_compile_result_free(&r);
    ck_assert_int_eq(compile("", KILN_EMIT_IR, &r), KILN_ERR_USAGE);
    kiln_compile_result_free(&r);
}
END_TEST

START_TEST(every_pass_name_is_accepted)
{
    const char *names[] = {"all", "fold", "cse", "licm", "dce"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        KilnCompileResult r;
        ck_assert_int_eq(compile(names[i], KILN_EMIT_IR, &r), KILN_OK);
        ck_assert_msg(r.dumps && strstr(r.dumps, "IR after"), "no dump after %s", names[i]);
        kiln_compile_result_free(&r);
    }
    const char *gpu[] = {"accelerate-dot", "layout-assign", "remove-convert", "dot-rotate", "pipeline", "dot-overlap",
                         "sram-alloc", "pingpong"};
    for (size_t i = 0; i < sizeof gpu / sizeof gpu[0]; i++) {
        KilnCompileResult r;
        ck_assert_int_eq(compile(gpu[i], KILN_EMIT_GPU_IR, &r), KILN_OK);
        ck_assert_msg(r.dumps && strstr(r.dumps, gpu[i]), "no GPU dump after %s", gpu[i]);
        kiln_compile_result_free(&r);
    }
    /* "persistent": the schedule's pass, dumped when the schedule runs it (after dce) */
    KilnCompileOptions po;
    memset(&po, 0, sizeof po);
    po.emit = KILN_EMIT_IR;
    po.dump_after = "persistent";
    po.schedule.persistent = 1;
    KilnCompileResult pr;
    ck_assert_int_eq(kiln_compile("k.tile", SRC, &po, &pr), KILN_OK);
    ck_assert_msg(pr.dumps && strstr(pr.dumps, "IR after persistent") && strstr(pr.dumps, "{persistent = 1}"), "%s",
                  pr.dumps ? pr.dumps : "(no dump)");
    kiln_compile_result_free(&pr);
    /* "lower": the LLVM module as the lowering built it, before LLVM's passes */
    KilnCompileResult r;
    ck_assert_int_eq(compile("lower", KILN_EMIT_LLVM, &r), KILN_OK);
    ck_assert_msg(r.dumps && strstr(r.dumps, "LLVM IR after lower (k), before LLVM's passes"), "no dump after lower");
    ck_assert_ptr_null(strstr(r.dumps, "GPU IR after"));
    kiln_compile_result_free(&r);
}
END_TEST

START_TEST(pass_names_are_listed_once)
{
    StrBuf sb;
    sb_init(&sb);
    pass_list_names(&sb);
    ck_assert_str_eq(sb.data, "fold, cse, licm, dce"); /* cse runs twice, listed once */
    sb_free(&sb);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("driver");
    TCase *tc = tcase_create("dump-after");
    tcase_add_test(tc, unknown_pass_is_a_usage_error);
    tcase_add_test(tc, every_pass_name_is_accepted);
    tcase_add_test(tc, pass_names_are_listed_once);
    suite_add_tcase(s, tc);
    return s;
}

TU_MAIN(suite)
