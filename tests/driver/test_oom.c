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

#include <malloc.h>
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

/* kiln_compile_ir (what the CPU runs call, with its own catch) of src with the n-th
 * arena allocation failing (0: none), everything freed after. A failure must be the
 * out-of-memory error with no module; *dumped: the dumps hold a pass's IR. */
static KilnStatus compile_ir_failing(const char *file, const char *src, const KilnCompileOptions *o, int64_t n,
                                     bool *dumped)
{
    Arena a;
    arena_init(&a);
    Diag d;
    diag_init(&d, file, src);
    IrModule *m = NULL;
    StrBuf out, dumps;
    sb_init(&out);
    sb_init(&dumps);
    sup_arena_fail_after(n);
    KilnStatus st = kiln_compile_ir(&a, &d, src, o, &m, &out, &dumps);
    sup_arena_fail_after(0);
    if (st != KILN_OK)
        ck_assert_msg(st == KILN_ERR_INTERNAL && !m && d.out.data && strstr(d.out.data, "out of host memory"),
                      "n = %lld: status %d:\n%s", (long long)n, (int)st, d.out.data ? d.out.data : "");
    if (dumped) *dumped = dumps.data && strstr(dumps.data, "IR after");
    sb_free(&out);
    sb_free(&dumps);
    diag_free(&d);
    arena_free(&a);
    return st;
}

START_TEST(compile_ir_alone)
{
    char *src = sup_read_file_text(tu_src_path("examples/softmax.tile"), NULL);
    ck_assert_ptr_nonnull(src);
    KilnCompileOptions o;
    memset(&o, 0, sizeof o);
    o.emit = KILN_EMIT_IR;
    int failed = 0;
    for (int64_t n = 1; compile_ir_failing("softmax.tile", src, &o, n, NULL) != KILN_OK;
         n = n < 8 ? n + 1 : n + n / 3)
        failed++;
    ck_assert_int_ge(failed, 10);
    free(src);
}
END_TEST

/* --dump-after all (the kiln command's per-pass IR dumps): an allocation failing
 * anywhere, the printer's scratch and the GPU passes' included, frees what the
 * compile had malloc'd (dumps, output, stats, the printer's names). A small kernel
 * so that every allocation of its compile fails once, in four places: the front
 * end alone (kiln_compile_ir, what `kiln run` calls), kiln_compile to IR, to GPU
 * IR (the GPU passes' dumps) and to LLVM IR (the lowering's dump). The heap in use
 * after the sweep must be what it was before (mallinfo2; a leak of the printer's
 * 64 KiB scratch chunk per failure would be megabytes). Sanitizer builds check it
 * with LeakSanitizer instead. */
static const char *k_dump_src = "kernel k(X: *f32, n: i32) {\n"
                                "    let offs = program_id(0) * 64 + arange(64);\n"
                                "    let x = load(X + offs, mask = offs < n, other = 0);\n"
                                "    store(X + offs, x * 2.0 + 1.0, mask = offs < n);\n"
                                "}\n";

/* Compile with the n-th arena allocation failing (0: none); KILN_OK or the OOM error. */
static KilnStatus dump_compile(int mode, int64_t n)
{
    KilnCompileOptions o;
    memset(&o, 0, sizeof o);
    o.arch = "sm_90a";
    o.dump_after = "all";
    o.emit = mode == 3 ? KILN_EMIT_LLVM : mode == 2 ? KILN_EMIT_GPU_IR : KILN_EMIT_IR;
    KilnStatus st;
    if (mode == 0) {
        bool dumped;
        st = compile_ir_failing("k.tile", k_dump_src, &o, n, &dumped);
        ck_assert(st != KILN_OK || dumped);
    } else {
        KilnCompileResult r;
        sup_arena_fail_after(n);
        st = kiln_compile("k.tile", k_dump_src, &o, &r);
        sup_arena_fail_after(0);
        ck_assert_msg(st == KILN_OK || (st == KILN_ERR_INTERNAL && strstr(r.diagnostics, "out of host memory")),
                      "n = %lld: %d %s", (long long)n, (int)st, r.diagnostics ? r.diagnostics : "");
        ck_assert(st != KILN_OK || strstr(r.dumps, mode >= 2 ? "GPU IR after" : "IR after"));
        kiln_compile_result_free(&r);
    }
    return st;
}

START_TEST(dump_after_unwinds_without_leaks)
{
    int mode = _i;
    ck_assert_int_eq(dump_compile(mode, 0), KILN_OK);   /* warm: lazily made globals */
    size_t before = mallinfo2().uordblks;
    int64_t n = 1;
    while (dump_compile(mode, n) != KILN_OK) {
        n++;
        ck_assert_msg(n < 200000, "the compile never got through");
    }
    ck_assert_int_gt(n, 100);   /* every allocation of the compile failed once */
    size_t after = mallinfo2().uordblks;
    /* a few KiB move (the last error's text, malloc's own caches): far below one leak */
    ck_assert_msg(after <= before + 32768, "mode %d: %zu bytes more in use after %lld failed compiles", mode,
                  after - before, (long long)n - 1);
}
END_TEST

static Suite *oom_suite(void)
{
    Suite *s = suite_create("driver_oom");
    TCase *tc = tcase_create("oom");
    tcase_add_test(tc, front_end_and_passes);
    tcase_add_test(tc, through_the_backend);
    tcase_add_test(tc, compile_ir_alone);
    tcase_add_loop_test(tc, dump_after_unwinds_without_leaks, 0, 4);
    suite_add_tcase(s, tc);
    return s;
}

TU_MAIN(oom_suite)
