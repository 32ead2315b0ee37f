/* test_e2e_limits.c — tiles past what a CTA can hold, and large tiles that are
 * legal, through kiln_compile to PTX (issue 12).
 *
 * Past the limits every case is KILN_ERR_COMPILE with one located error
 * (file:line:col, the source line, a caret) that says what to shrink, and no
 * output: before, the register count of a [2^20, 2^20] tile wrapped and its
 * store compiled to a PTX body of `ret;`, a 4-D reduce of 65536 per axis hit
 * an internal error, and stages x bytes overflowed past the SRAM check.
 * The limits (docs/language.md, "Limits"): IR_MAX_TILE_NUMEL elements per
 * tile (front end), GP_MAX_THREAD_REGS registers per thread of one tile and
 * GP_MAX_REDUCE_WORK partials per thread of a reduce across warps (after
 * layout assignment), IR_MAX_PIPE_STAGES stages of a pipelined loop, the
 * target's SRAM per CTA for each buffer alone and for all of them.
 *
 * Inside the limits large tiles compile in seconds: each [256, 256] f32 case
 * below must take under LEGAL_CPU_SECONDS of CPU time (CPU, not wall time, so a
 * loaded machine does not flake; a [256, 256] f32 store took 70-84 s of LLVM
 * instruction selection before stores that large became inline PTX).
 */
#include "tests/testutil.h"
#include "tests/ptx_util.h"
#include "kiln.h"

#include <string.h>
#include <time.h>

#define LEGAL_CPU_SECONDS 10.0

static KilnStatus compile(const char *src, const KilnDefine *defs, int ndefs, int warps, KilnCompileResult *r)
{
    KilnCompileOptions o = {.arch = "sm_90a", .emit = KILN_EMIT_PTX, .defines = defs, .ndefines = ndefs,
                            .num_warps = warps};
    return kiln_compile("t.tile", src, &o, r);
}

/* One error, starting with `head` (its location and the start of its text),
 * containing `advice`, with a caret line; no output. */
static void expect_error(const KilnCompileResult *r, KilnStatus st, const char *head, const char *advice)
{
    ck_assert_int_eq(st, KILN_ERR_COMPILE);
    ck_assert_ptr_nonnull(r->diagnostics);
    ck_assert_msg(!strncmp(r->diagnostics, head, strlen(head)), "expected '%s...', got:\n%s", head, r->diagnostics);
    ck_assert_msg(strstr(r->diagnostics, advice), "no '%s' in:\n%s", advice, r->diagnostics);
    ck_assert_msg(pu_count(r->diagnostics, ": error: ") == 1, "several errors:\n%s", r->diagnostics);
    ck_assert_msg(strstr(r->diagnostics, "^\n"), "no caret:\n%s", r->diagnostics);
    ck_assert_msg(!strstr(r->diagnostics, "internal error"), "%s", r->diagnostics);
    ck_assert_ptr_null(r->output);
}

/* compile, expect_error, free. */
static void error_case(const char *src, const KilnDefine *defs, int ndefs, int warps, const char *head,
                       const char *advice)
{
    KilnCompileResult r;
    KilnStatus st = compile(src, defs, ndefs, warps, &r);
    expect_error(&r, st, head, advice);
    kiln_compile_result_free(&r);
}

static const char *STORE = "kernel k(Y: *f32, const BM: i32 = 64, const BN: i32 = 64) {\n"
                           "    let z = zeros([BM, BN], f32);\n"
                           "    store(Y + arange(BM)[:, None] * BN + arange(BN)[None, :], z);\n"
                           "}\n";

START_TEST(huge_store_is_an_error_not_ret)
{
    KilnDefine d[] = {{"BM", "1048576"}, {"BN", "1048576"}};
    error_case(STORE, d, 2, 0, "t.tile:2:13: error: this f32[1048576, 1048576] tile has 1099511627776 elements",
               "use smaller blocks");
}
END_TEST

START_TEST(huge_reduce_is_an_error)
{
    static const char *r2 = "kernel k(Y: *f32, const A: i32 = 64, const B: i32 = 64) {\n"
                            "    let z = zeros([A, B], f32);\n"
                            "    store(Y + arange(A), sum(z, 1));\n"
                            "}\n";
    KilnDefine d[] = {{"A", "1048576"}, {"B", "1048576"}};
    error_case(r2, d, 2, 0, "t.tile:2:13: error: this f32[1048576, 1048576] tile has", "use smaller blocks");
    static const char *r4 = "kernel k(Y: *f32, const A: i32 = 4) {\n"
                            "    store(Y, sum(zeros([A, A, A, A], f32)));\n"
                            "}\n";
    KilnDefine d4[] = {{"A", "65536"}};
    error_case(r4, d4, 1, 0, "t.tile:2:18: error: this f32[65536, 65536, 65536, 65536] tile has more than 2^63",
               "use smaller blocks");
}
END_TEST

/* 2^20 elements are legal, but not 8192 of them in each of 128 threads. */
START_TEST(registers_per_thread)
{
    KilnDefine d[] = {{"BM", "1024"}, {"BN", "1024"}};
    error_case(STORE, d, 2, 4, "t.tile:2:13: error: this f32[1024, 1024] tile needs 8192 registers per thread",
               "or more warps");
    KilnDefine d2[] = {{"BM", "256"}, {"BN", "256"}};
    error_case(STORE, d2, 2, 1, "t.tile:2:13: error: this f32[256, 256] tile needs 2048 registers per thread with "
               "num_warps = 1", "a thread may hold at most 1024");
}
END_TEST

static const char *ROWMAX = "kernel k(X: *f32, Y: *f32, const BM: i32 = 64, const BN: i32 = 64) {\n"
                            "    let x = load(X + arange(BM)[:, None] * BN + arange(BN)[None, :]);\n"
                            "    store(Y + arange(BM), max(x, axis = 1));\n"
                            "}\n";

/* Rows spread over 16 warps: each thread would combine 512 rows x 16 warps. */
START_TEST(reduce_across_warps)
{
    KilnDefine d[] = {{"BM", "512"}, {"BN", "512"}};
    error_case(ROWMAX, d, 2, 16, "t.tile:3:27: error: this reduce combines 8192 partial results per thread",
               "use smaller blocks");
}
END_TEST

static const char *DOT = "kernel k(X: *f32, W: *f32, Y: *f32, const M: i32 = 64, const K: i32 = 64,\n"
                         "         const N: i32 = 64) {\n"
                         "    let a = load(X + arange(M)[:, None] * K + arange(K)[None, :]);\n"
                         "    let b = load(W + arange(K)[:, None] * N + arange(N)[None, :]);\n"
                         "    store(Y + arange(M)[:, None] * N + arange(N)[None, :], dot(a, b));\n"
                         "}\n";

/* An f32 dot runs on CUDA cores, its operands replicated: every thread holds
 * all K of its rows (2048 registers at 64 x 64 x 64 on 4 warps, legal), up to
 * GP_MAX_DOT_OPERAND_REGS. */
START_TEST(fma_dot_operands)
{
    KilnCompileResult r;
    clock_t t0 = clock();
    KilnStatus st = compile(DOT, NULL, 0, 4, &r);
    double s = (double)(clock() - t0) / CLOCKS_PER_SEC;
    ck_assert_msg(st == KILN_OK, "%s", r.diagnostics ? r.diagnostics : "");
    ck_assert_msg(s < LEGAL_CPU_SECONDS, "64 x 64 x 64 took %.1f s of CPU", s);
    ck_assert_int_ge(pu_count_n(r.output, r.output_size, "fma.rn.f32"), 32 * 64);
    kiln_compile_result_free(&r);
    /* i8 operands, an i32 accumulator: 2048 chained multiply-adds a thread
     * (9 s in LLVM's NaryReassociate as adds, now mad.lo.s32). */
    static const char *I8 = "kernel k(X: *i8, Y: *i32) {\n"
                            "    let o = arange(64)[:, None] * 64 + arange(64)[None, :];\n"
                            "    let a = load(X + o);\n"
                            "    store(Y + o, dot(a, a));\n"
                            "}\n";
    t0 = clock();
    st = compile(I8, NULL, 0, 4, &r);
    s = (double)(clock() - t0) / CLOCKS_PER_SEC;
    ck_assert_msg(st == KILN_OK, "%s", r.diagnostics ? r.diagnostics : "");
    ck_assert_msg(s < LEGAL_CPU_SECONDS, "the i8 dot took %.1f s of CPU", s);
    ck_assert_int_ge(pu_count_n(r.output, r.output_size, "mad.lo.s32"), 32 * 64);
    kiln_compile_result_free(&r);
    KilnDefine d[] = {{"M", "128"}, {"N", "128"}};
    error_case(DOT, d, 2, 4, "t.tile:5:60: error: this f32[128, 64] tile needs 8192 registers per thread with "
               "num_warps = 4; a thread may hold at most 4096", "use smaller blocks");
}
END_TEST

/* The attention forward pipelines its K/V loads: past 64 stages the loop is
 * the error; at 64 the stage buffer is, at the load (it was an internal error
 * from the verifier, and stages x bytes was computed in 32 bits). */
START_TEST(pipeline_stages)
{
    char *src = sup_read_file_text(tu_src_path("lang/lib/attention_fwd.tile"), NULL);
    ck_assert_ptr_nonnull(src);
    KilnParamHint h[PU_ATTN_NHINTS];
    KilnCompileOptions o;
    KilnCompileResult r;
    pu_attention_options(&o, NULL, 0, "sm_90a", 4, 1024, KILN_EMIT_PTX, h);
    KilnStatus st = kiln_compile("attention_fwd.tile", src, &o, &r);
    expect_error(&r, st, "attention_fwd.tile:", "a pipelined loop has at most 64 stages: use fewer pipeline stages");
    ck_assert_ptr_nonnull(strstr(r.diagnostics, "this loop would be pipelined with num_stages = 1024"));
    kiln_compile_result_free(&r);
    pu_attention_options(&o, NULL, 0, "sm_90a", 4, 64, KILN_EMIT_PTX, h);
    st = kiln_compile("attention_fwd.tile", src, &o, &r);
    expect_error(&r, st, "attention_fwd.tile:", "the 64 pipeline stages of this load need");
    ck_assert_ptr_nonnull(strstr(r.diagnostics, "use fewer pipeline stages (num_stages)"));
    kiln_compile_result_free(&r);
    free(src);
}
END_TEST

/* Large but legal: [256, 256] f32 (512 registers a thread on 4 warps). */
static const char *const LEGAL[][2] = {
    {"store", "store(Y + offs, zeros([BM, BN], f32));"},
    {"masked store", "store(Y + offs, load(X + offs), mask = offs < n);"},
    {"elementwise", "let x = load(X + offs); store(Y + offs, exp(x * 2.0 + 1.0) / (x + 3.0));"},
    {"masked load", "let x = load(X + offs, mask = offs < n, other = 0.0); store(Y + offs, where(x > 0.0, x, -x));"},
    {"row sum", "let x = load(X + offs); store(Y + arange(BM), sum(x, 1));"},
    {"column max", "let x = load(X + offs); store(Y + arange(BN), max(x, axis = 0));"},
    {"argmax", "let x = load(X + offs); store(Y + arange(BM), argmax(x, 1).to(f32));"},
    {"softmax", "let x = load(X + offs); let z = exp(x - max(x, axis = 1)[:, None]); store(Y + offs, z / sum(z, 1)[:, None]);"},
    {"f16 out", "let x = load(X + offs); store(H + offs, x.to(f16));"},
    {"f16 in", "let x = load(H + offs).to(f32); store(Y + offs, x * x);"},
    {"atomic_add", "atomic_add(Y + offs, load(X + offs));"},
};

START_TEST(large_legal_tiles_compile_fast)
{
    const char *name = LEGAL[_i][0];
    char src[1024];
    snprintf(src, sizeof src,
             "kernel k(X: *f32, Y: *f32, H: *f16, n: i32, const BM: i32 = 256, const BN: i32 = 256) {\n"
             "    let offs = arange(BM)[:, None] * BN + arange(BN)[None, :];\n    %s\n}\n", LEGAL[_i][1]);
    clock_t t0 = clock();
    KilnCompileResult r;
    KilnStatus st = compile(src, NULL, 0, 4, &r);
    double s = (double)(clock() - t0) / CLOCKS_PER_SEC;
    ck_assert_msg(st == KILN_OK, "%s: %s", name, r.diagnostics ? r.diagnostics : "");
    ck_assert_msg(s < LEGAL_CPU_SECONDS, "%s took %.1f s of CPU", name, s);
    /* 65536 results over 128 threads, at most 16 bytes a store: at least 128
     * (or, with the row/column results, 2) stores or atomics a thread. */
    int stores = pu_count_n(r.output, r.output_size, "st.global") + pu_count_n(r.output, r.output_size, "red.global") +
                 pu_count_n(r.output, r.output_size, "atom.global");
    ck_assert_msg(stores >= (strstr(name, "row") || strstr(name, "column") || strstr(name, "argmax") ? 2 : 128),
                  "%s: %d stores in the PTX", name, stores);
    kiln_compile_result_free(&r);
}
END_TEST

static Suite *limits_suite(void)
{
    Suite *s = suite_create("limits");
    TCase *tc = tcase_create("past");
    tcase_add_test(tc, huge_store_is_an_error_not_ret);
    tcase_add_test(tc, huge_reduce_is_an_error);
    tcase_add_test(tc, registers_per_thread);
    tcase_add_test(tc, reduce_across_warps);
    tcase_add_test(tc, fma_dot_operands);
    tcase_add_test(tc, pipeline_stages);
    suite_add_tcase(s, tc);
    TCase *legal = tcase_create("legal");
    tcase_add_loop_test(legal, large_legal_tiles_compile_fast, 0, (int)(sizeof LEGAL / sizeof LEGAL[0]));
    suite_add_tcase(s, legal);
    return s;
}

PU_MAIN(limits_suite)
