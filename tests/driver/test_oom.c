/* test_oom.c — an arena allocation that fails anywhere in a compile is a clean
 * KILN_ERR_INTERNAL "out of host memory", never a crash (issue 12: inlining
 * that ran the arena out of memory dereferenced its NULL and died of SIGSEGV).
 *
 * sup_arena_fail_after(n) makes the n-th arena allocation fail; n runs over a
 * spread from the first allocation to past the last, so the failure lands in
 * the parser, sema and inlining, the passes, the GPU passes and the lowering.
 * Each compile must come back (no signal), and either succeed (n past the
 * compile's allocations) or report the out-of-memory error; the compile after
 * it, with injection off, must succeed again (nothing is left broken).
 */
#include "testutil.h"

#include <string.h>

#include "kiln.h"
#include "compiler/support/support.h"
#include "compiler/support/diag.h"
#include "compiler/driver/driver.h"

/* The softmax kernel of examples/softmax.tile (the file has two: naming one
 * lets the GPU stages run). */
static KilnStatus compile(const char *src, KilnEmit emit, KilnCompileResult *r)
{
    KilnCompileOptions o;
    memset(&o, 0, sizeof o);
    o.emit = emit;
    o.arch = "sm_90a";
    o.kernel = "softmax";
    return kiln_compile("softmax.tile", src, &o, r);
}

static void sweep(KilnEmit emit)
{
    char *src = sup_read_file_text(tu_src_path("examples/softmax.tile"), NULL);
    ck_assert_ptr_nonnull(src);
    int failed = 0;
    bool done = false;
    for (int64_t n = 1; !done; n = n < 8 ? n + 1 : n + n / 3) {
        KilnCompileResult r;
        sup_arena_fail_after(n);
        KilnStatus st = compile(src, emit, &r);
        sup_arena_fail_after(0);
        if (st == KILN_OK) {
            done = true; /* n is past the compile's last allocation */
        } else {
            ck_assert_msg(st == KILN_ERR_INTERNAL, "n = %lld: status %d:\n%s", (long long)n, (int)st,
                          r.diagnostics ? r.diagnostics : "");
            const char *dg = r.diagnostics ? r.diagnostics : "";
            ck_assert_msg(strstr(dg, "internal error") && strstr(dg, "out of host memory"), "n = %lld:\n%s",
                          (long long)n, dg);
            failed++;
        }
        kiln_compile_result_free(&r);
        ck_assert_msg(n < 100000000, "the compile never got through");
    }
    ck_assert_int_ge(failed, 20);
    KilnCompileResult r;
    ck_assert_int_eq(compile(src, KILN_EMIT_IR, &r), KILN_OK); /* injection off: fine again */
    kiln_compile_result_free(&r);
    free(src);
}

START_TEST(front_end_and_passes) { sweep(KILN_EMIT_IR); }
END_TEST

START_TEST(through_the_backend) { sweep(KILN_EMIT_LLVM); }
END_TEST

/* kiln_compile_ir alone (what the CPU runs call): its own catch. */
START_TEST(compile_ir_alone)
{
    char *src = sup_read_file_text(tu_src_path("examples/softmax.tile"), NULL);
    ck_assert_ptr_nonnull(src);
    KilnCompileOptions o;
    memset(&o, 0, sizeof o);
    o.emit = KILN_EMIT_IR;
    int failed = 0;
    for (int64_t n = 1;; n = n < 8 ? n + 1 : n + n / 3) {
        Arena a;
        arena_init(&a);
        Diag d;
        diag_init(&d, "softmax.tile", src);
        IrModule *m = NULL;
        StrBuf out, dumps;
        sb_init(&out);
        sb_init(&dumps);
        sup_arena_fail_after(n);
        KilnStatus st = kiln_compile_ir(&a, &d, src, &o, &m, &out, &dumps);
        sup_arena_fail_after(0);
        bool ok = st == KILN_OK;
        if (!ok) {
            ck_assert_msg(st == KILN_ERR_INTERNAL && !m && d.out.data && strstr(d.out.data, "out of host memory"),
                          "n = %lld: status %d:\n%s", (long long)n, (int)st, d.out.data ? d.out.data : "");
            failed++;
        }
        sb_free(&out);
        sb_free(&dumps);
        diag_free(&d);
        arena_free(&a);
        if (ok) break;
    }
    ck_assert_int_ge(failed, 10);
    free(src);
}
END_TEST

static Suite *oom_suite(void)
{
    Suite *s = suite_create("driver_oom");
    TCase *tc = tcase_create("oom");
    tcase_add_test(tc, front_end_and_passes);
    tcase_add_test(tc, through_the_backend);
    tcase_add_test(tc, compile_ir_alone);
    suite_add_tcase(s, tc);
    return s;
}

TU_MAIN(oom_suite)
