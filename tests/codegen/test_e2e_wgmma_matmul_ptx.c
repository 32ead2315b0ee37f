/* test_e2e_wgmma_matmul_ptx.c — matmul on Hopper's wgmma (sm_90a): a plain dot
 * whose tile allows it gets wgmma's warp grid from accelerate-dot (every warp
 * along M, gp_wgmma_grid_ok) and lowers to wgmma.mma_async with A and B read
 * from the pipelined cp.async stage slots through descriptors (A K-major,
 * B MN-major for row-major operands). Counted here, through kiln_compile:
 *   - tools/bench/matmul_tc.tile (N, K constants; pointers hinted 16-byte
 *     aligned as the runtime specialises): exactly (BM / 64 per warpgroup) x
 *     (BK / 16) wgmma.m64n<BN>k16 per k-loop iteration, none of mma.sync or
 *     ldmatrix, one fence and one commit + wait per dot, the async-proxy fence
 *     after the copies land, the flags of the operands' majors;
 *   - examples/matmul.tile (runtime strides, staged operands): wgmma too;
 *   - what keeps mma.sync: sm_80, --no-wgmma, BLOCK_K 32 (64-byte rows of A
 *     are no 128-byte swizzle atoms), a bf16 -> f16 cast between the copies
 *     and the dot (the copies hold bf16);
 *   - with 3 or more stages the k-loop keeps one wgmma group in flight
 *     (wgmma.pending: wait_group 1 in the loop, 0 after it, copies S - 2
 *     ahead);
 *   - ptxas: every schedule assembles for sm_90a with no spills and without
 *     serializing the wgmmas (skipped without ptxas).
 * Results are checked on the GPU by tests/gpu/test_e2e_gpu_matmul.c. */
#include "compiler/support/support.h"
#include "tests/testutil.h"
#include "tests/ptx_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef PuSched Sched;

/* The schedules the benchmark sweeps on an H100/H200 (tools/bench/bench_matmul.py). */
static const Sched WG[] = {
    {128, 128, 64, 4, 3}, {128, 256, 64, 8, 3}, {64, 256, 64, 4, 3}, {128, 128, 64, 4, 4}, {256, 128, 64, 8, 3},
};
enum { NWG = sizeof WG / sizeof WG[0] };

static KilnCompileResult compile_mm(const char *file, const char *kernel, const Sched *s, const char *arch,
                                    int no_wgmma, KilnEmit emit)
{
    KilnCompileResult r;
    int nk = strstr(file, "matmul_tc") ? 4096 : 0;     /* examples/matmul.tile has no N, K constants */
    pu_compile_matmul(file, kernel, s, nk, nk, arch, no_wgmma, emit, &r);
    return r;
}

static int count(const KilnCompileResult *r, const char *what) { return pu_count_n(r->output, r->output_size, what); }

START_TEST(matmul_tc_on_wgmma)
{
    static const char *const kernels[2] = {"matmul_tc_f16", "matmul_tc_bf16"};
    for (int i = 0; i < NWG; i++)
        for (int k = 0; k < 2; k++) {
            const Sched *s = &WG[i];
            KilnCompileResult r = compile_mm("tools/bench/matmul_tc.tile", kernels[k], s, "sm_90a", 0, KILN_EMIT_PTX);
            char inst[96];
            snprintf(inst, sizeof inst, "wgmma.mma_async.sync.aligned.m64n%dk16.f32.%s.%s", s->bn, k ? "bf16" : "f16",
                     k ? "bf16" : "f16");
            /* each warpgroup: BM / (16 * warps) m64 blocks, BK / 16 k steps */
            int per_iter = s->bm / (16 * s->warps) * (s->bk / 16);
            ck_assert_msg(count(&r, inst) == per_iter, "%s %dx%dx%d/%d: %d %s, want %d", kernels[k], s->bm, s->bn,
                          s->bk, s->warps, count(&r, inst), inst, per_iter);
            ck_assert_int_eq(count(&r, "mma.sync"), 0);
            ck_assert_int_eq(count(&r, "ldmatrix"), 0);
            ck_assert_int_eq(count(&r, "wgmma.fence.sync.aligned"), 1);
            ck_assert_int_eq(count(&r, "wgmma.commit_group.sync.aligned"), 1);
            /* A K-major (imm-trans-a 0), B N-major (imm-trans-b 1) */
            ck_assert_int_eq(count(&r, "1, 1, 0, 1;"), per_iter);
            /* the landed copies are made visible to the async proxy */
            ck_assert_int_ge(count(&r, "fence.proxy.async.shared::cta"), 1);
            ck_assert_int_gt(count(&r, "cp.async.cg.shared.global"), 0);
            kiln_compile_result_free(&r);
        }
}
END_TEST

static long at(const KilnCompileResult *r, const char *what)
{
    const char *p = strstr(r->output, what);
    return p ? p - r->output : -1;
}

/* wgmma.pending (pass_pipeline.c): with S >= 3 stages the loop leaves its
 * wgmma group in flight (wait_group 1 after the commit), the copies run
 * S - 2 iterations ahead (cp.async.wait_group S - 3 in the loop), and the
 * last group is waited for after the loop, before the epilogue's stores. */
START_TEST(wgmma_in_flight_across_iterations)
{
    for (int S = 2; S <= 5; S++) {
        Sched s = {128, 128, 64, 4, S};
        KilnCompileResult r = compile_mm("tools/bench/matmul_tc.tile", "matmul_tc_f16", &s, "sm_90a", 0, KILN_EMIT_PTX);
        int ahead = S >= 3 ? S - 2 : S - 1;
        ck_assert_int_eq(count(&r, "wgmma.mma_async.sync.aligned.m64n128k16"), 2 * 4);
        ck_assert_int_eq(count(&r, "wgmma.wait_group.sync.aligned 1;"), S >= 3);
        ck_assert_int_eq(count(&r, "wgmma.wait_group.sync.aligned 0;"), 1);
        ck_assert_int_eq(count(&r, "cp.async.commit_group"), ahead + 1);
        char want[48];
        snprintf(want, sizeof want, "cp.async.wait_group %d;", ahead - 1);
        ck_assert_int_eq(count(&r, want), 1 + (ahead - 1 == 0));   /* + the one after the loop */
        long w1 = at(&r, "wgmma.wait_group.sync.aligned 1;"), w0 = at(&r, "wgmma.wait_group.sync.aligned 0;");
        long back = at(&r, "bra "), epi = at(&r, "st.shared");
        if (S >= 3) {
            ck_assert_msg(w1 >= 0 && back > w1 && w0 > back, "S %d: wait 1 at %ld, loop branch %ld, wait 0 %ld", S, w1,
                          back, w0);
        } else {
            ck_assert_msg(w0 >= 0 && w0 < back, "S 2: the wait 0 belongs in the loop");
        }
        ck_assert_msg(epi > w0, "S %d: the epilogue's stores (at %ld) before the last wait (at %ld)", S, epi, w0);
        kiln_compile_result_free(&r);
    }
}
END_TEST

START_TEST(examples_matmul_on_wgmma)
{
    /* runtime strides: the operands are staged by st.shared, read by descriptors */
    Sched s = {128, 128, 64, 4, 3};
    KilnCompileResult r = compile_mm("examples/matmul.tile", "matmul", &s, "sm_90a", 0, KILN_EMIT_PTX);
    ck_assert_int_eq(count(&r, "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16"), 2 * 4);
    ck_assert_int_eq(count(&r, "mma.sync"), 0);
    ck_assert_int_ge(count(&r, "fence.proxy.async.shared::cta"), 1);
    kiln_compile_result_free(&r);
}
END_TEST

START_TEST(mma_sync_where_wgmma_does_not_apply)
{
    Sched s = {128, 128, 64, 4, 3};
    KilnCompileResult r = compile_mm("tools/bench/matmul_tc.tile", "matmul_tc_f16", &s, "sm_80", 0, KILN_EMIT_PTX);
    ck_assert_int_eq(count(&r, "wgmma"), 0);
    ck_assert_int_gt(count(&r, "mma.sync.aligned.m16n8k16"), 0);
    kiln_compile_result_free(&r);
    r = compile_mm("tools/bench/matmul_tc.tile", "matmul_tc_f16", &s, "sm_90a", 1, KILN_EMIT_PTX);
    ck_assert_int_eq(count(&r, "wgmma"), 0);
    ck_assert_int_gt(count(&r, "mma.sync.aligned.m16n8k16"), 0);
    kiln_compile_result_free(&r);
    /* the copies hold bf16, the dot wants f16: converted after ldmatrix */
    r = compile_mm("tools/bench/matmul_tc.tile", "matmul_tc_cast", &s, "sm_90a", 0, KILN_EMIT_PTX);
    ck_assert_int_eq(count(&r, "wgmma.mma_async"), 0);
    ck_assert_int_gt(count(&r, "mma.sync.aligned.m16n8k16"), 0);
    kiln_compile_result_free(&r);
    Sched k32 = {128, 128, 32, 4, 3};
    r = compile_mm("tools/bench/matmul_tc.tile", "matmul_tc_f16", &k32, "sm_90a", 0, KILN_EMIT_PTX);
    ck_assert_int_eq(count(&r, "wgmma.mma_async"), 0);
    ck_assert_int_gt(count(&r, "mma.sync.aligned.m16n8k16"), 0);
    kiln_compile_result_free(&r);
}
END_TEST

/* 64-row tiles on 8 warps (pass_accelerate_dot.c, gp_wgmma_nsplit_ok): two warpgroup
 * columns, each one m64n(BN/2)k16 per k step with A read by both; B's descriptor of warps
 * 4-7 starts BN/2 columns on (MN-major: BN/2 / 64 column blocks of rows x 128 bytes). The
 * same tile on sm_80 stays mma.sync (2 x 4). ptxas: no spills (bm x bn f32 over 256 threads:
 * 64 accumulator registers), the group in flight (wgmma.pending does not apply: one wait 0). */
START_TEST(wgmma_two_warpgroup_columns)
{
    static const Sched sc[] = {{64, 256, 64, 8, 3}, {64, 128, 64, 8, 2}};
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < 2; k++) {
            const Sched *s = &sc[i];
            const char *ty = k ? "bf16" : "f16";
            char kern[32], inst[96];
            snprintf(kern, sizeof kern, "matmul_tc_%s", ty);
            snprintf(inst, sizeof inst, "wgmma.mma_async.sync.aligned.m64n%dk16.f32.%s.%s", s->bn / 2, ty, ty);
            KilnCompileResult r = compile_mm("tools/bench/matmul_tc.tile", kern, s, "sm_90a", 0, KILN_EMIT_PTX);
            ck_assert_msg(count(&r, inst) == s->bk / 16, "%s %dx%d/8: %d %s", kern, s->bm, s->bn, count(&r, inst), inst);
            ck_assert_int_eq(count(&r, "wgmma.mma_async"), s->bk / 16);
            ck_assert_int_eq(count(&r, "mma.sync"), 0);
            ck_assert_int_eq(count(&r, "ldmatrix"), 0);
            ck_assert_int_eq(count(&r, "1, 1, 0, 1;"), s->bk / 16);   /* A K-major, B N-major */
            ck_assert_int_gt(count(&r, "cp.async.cg.shared.global"), 0);
            kiln_compile_result_free(&r);
            r = compile_mm("tools/bench/matmul_tc.tile", kern, s, "sm_80", 0, KILN_EMIT_PTX);
            ck_assert_int_eq(count(&r, "wgmma"), 0);
            ck_assert_int_eq(count(&r, "mma.sync.aligned.m16n8k16"), 64 / 32 * s->bn / 32 * s->bk / 16);
            kiln_compile_result_free(&r);
            if (!pu_have_ptxas()) continue;
            r = compile_mm("tools/bench/matmul_tc.tile", kern, s, "sm_90a", 0, KILN_EMIT_CUBIN);
            pu_assert_no_spills(&r, kern);
            ck_assert_msg(!strstr(r.stats, "serialized"), "%s:\n%s", kern, r.stats);
            kiln_compile_result_free(&r);
        }
}
END_TEST

/* ptxas assembles every schedule, and the accumulators fit: no spills. */
START_TEST(ptxas_no_spills)
{
    for (int i = 0; i < NWG; i++) {
        KilnCompileResult r = compile_mm("tools/bench/matmul_tc.tile", "matmul_tc_f16", &WG[i], "sm_90a", 0,
                                         KILN_EMIT_CUBIN);
        char what[32];
        snprintf(what, sizeof what, "schedule %d", i);
        pu_assert_no_spills(&r, what);
        /* nothing touches the accumulators while a group is in flight, so
         * ptxas keeps the wgmmas asynchronous (else it says "serialized") */
        ck_assert_msg(!strstr(r.stats, "serialized"), "schedule %d:\n%s", i, r.stats);
        kiln_compile_result_free(&r);
    }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("codegen_e2e_wgmma_matmul_ptx");
    TCase *tc = tcase_create("wgmma_matmul");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, matmul_tc_on_wgmma);
    tcase_add_test(tc, wgmma_in_flight_across_iterations);
    tcase_add_test(tc, examples_matmul_on_wgmma);
    tcase_add_test(tc, mma_sync_where_wgmma_does_not_apply);
    tcase_add_test(tc, wgmma_two_warpgroup_columns);
    suite_add_tcase(s, tc);
    TCase *pt = pu_ptxas_tcase(s, 600);
    tcase_add_test(pt, ptxas_no_spills);
    return s;
}

PU_MAIN(suite)
