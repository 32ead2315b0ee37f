/* test_e2e_mbarrier_ptx.c — the mbarrier stage hand-off of pipelined loops
 * (the schedule option `mbarrier`: pass_pipeline.c marks the loop,
 * pass_sram_alloc.c places its barriers, cg_mbarrier.c lowers the protocol),
 * checked on the PTX through kiln_compile:
 *   - attention (d 64/128/256, causal or not, with and without ping-pong):
 *     2 S barriers initialised and invalidated per pipelined loop, no
 *     cp.async.wait_group / commit_group left, one cp.async arrival per issue
 *     (the prologue's and the body's), two waits per iteration plus the
 *     drain's, the async-proxy fence after each wait for landed copies, and
 *     no CTA barrier from the loop's first wait to the drain's own barrier;
 *   - copies S - 2 ahead at 3 stages (warps may drift an iteration apart);
 *   - the matmul's in-flight wgmma (wgmma.pending): each iteration releases
 *     the previous iteration's slot after wait_group 1, predicated off in
 *     iteration 0;
 *   - sm_80: test_wait (try_wait is sm_90), no fence.mbarrier_init;
 *   - the decision is on the GPU IR (pipeline.mbarrier, smem.* on the loop);
 *   - a kernel without a pipelined loop, or whose loop body has SRAM buffers
 *     of its own (it needs a CTA barrier anyway), compiles byte-identically;
 *   - (KilnAttentionParams.mbarrier reaching the runtime's compile request:
 *     test_e2e_pingpong_ptx.c, with pingpong);
 *   - ptxas: the schedules the benchmark compares assemble without spills.
 * Results are checked on the GPU (tests/gpu/test_e2e_gpu_attention.c and
 * test_e2e_gpu_matmul.c with KILN_TEST_MBARRIER). */
#include "compiler/support/support.h"
#include "tests/testutil.h"
#include "tests/ptx_util.h"

#include <stdlib.h>
#include <string.h>

static char *attn_src;

typedef struct Attn {
    const char *d, *bm, *bn;
    int warps, stages;
    const char *causal;
    int pingpong;
} Attn;

static KilnCompileResult attention(const Attn *a, const char *arch, int mbarrier, KilnEmit emit)
{
    if (!attn_src) attn_src = sup_read_file_text(tu_src_path("lang/lib/attention_fwd.tile"), NULL);
    ck_assert_ptr_nonnull(attn_src);
    KilnDefine defs[] = {{"HEAD_DIM", a->d}, {"BLOCK_M", a->bm}, {"BLOCK_N", a->bn}, {"CAUSAL", a->causal},
                         {"PLAIN_SCORES", "true"}};
    KilnParamHint h[PU_ATTN_NHINTS];
    KilnCompileOptions o;
    pu_attention_options(&o, defs, 5, arch, a->warps, a->stages, emit, h);
    o.pingpong = a->pingpong;
    o.mbarrier = mbarrier;
    KilnCompileResult r;
    KilnStatus st = kiln_compile("lang/lib/attention_fwd.tile", attn_src, &o, &r);
    ck_assert_msg(st == KILN_OK, "d %s %sx%s/%d/%d %s: %s", a->d, a->bm, a->bn, a->warps, a->stages, arch,
                  r.diagnostics ? r.diagnostics : "");
    return r;
}

static int count(const KilnCompileResult *r, const char *what) { return pu_count_n(r->output, r->output_size, what); }

/* From each pipelined loop's first mbarrier wait (the body's) to its
 * invalidation: the CTA barriers (bar.sync 0) on the way. Every entry must be
 * 1, the drain's own, before its mbarrier.inval. Returns the number of loops. */
static int barriers_per_loop(const char *ptx, int *per_loop, int max)
{
    int n = 0;
    for (const char *p = strstr(ptx, "mbarrier.init"); p && n < max; p = strstr(p, "mbarrier.init")) {
        const char *wait = strstr(p, "MBAR_WAIT:"), *inval = strstr(p, "mbarrier.inval");
        ck_assert_ptr_nonnull(wait);
        ck_assert_ptr_nonnull(inval);
        ck_assert_msg(wait < inval, "loop %d: no wait before the invalidation", n);
        int bars = 0;
        for (const char *b = strstr(wait, "bar.sync \t0;"); b && b < inval; b = strstr(b + 1, "bar.sync \t0;")) bars++;
        per_loop[n++] = bars;
        p = strstr(inval, "}");   /* past this loop's inval block */
    }
    return n;
}

/* What every mbarrier loop of `r` at S stages, copies `ahead` iterations ahead, must show. */
static void check_protocol(const KilnCompileResult *r, int S, int ahead, const char *what)
{
    int inits = count(r, "mbarrier.init.shared::cta.b64"), invals = count(r, "mbarrier.inval.shared::cta.b64");
    ck_assert_msg(inits > 0 && inits % (2 * S) == 0 && invals == inits, "%s: %d inits, %d invals for S = %d", what,
                  inits, invals, S);
    int loops = inits / (2 * S);
    ck_assert_int_eq(count(r, "cp.async.wait_group"), 0);
    ck_assert_int_eq(count(r, "cp.async.commit_group"), 0);
    ck_assert_msg(count(r, "cp.async.mbarrier.arrive.noinc.shared::cta.b64") == loops * (ahead + 1),
                  "%s: %d copy arrivals, want %d loops x (%d + 1)", what,
                  count(r, "cp.async.mbarrier.arrive.noinc.shared::cta.b64"), loops, ahead);
    ck_assert_msg(count(r, "MBAR_WAIT:") == loops * (2 + ahead), "%s: %d waits, want %d x (2 + %d)", what,
                  count(r, "MBAR_WAIT:"), loops, ahead);
    ck_assert_int_eq(count(r, "mbarrier.arrive.shared::cta.b64"), loops);   /* the release */
    int per[8];
    ck_assert_int_eq(barriers_per_loop(r->output, per, 8), loops);
    for (int i = 0; i < loops; i++)
        ck_assert_msg(per[i] == 1, "%s: loop %d has %d CTA barriers between its first wait and its drain", what, i,
                      per[i]);
}

START_TEST(attention_hands_over_through_mbarriers)
{
    static const Attn cfg[] = {
        {"128", "128", "64", 8, 2, "false", 0}, {"128", "128", "64", 8, 2, "true", 0},
        {"128", "128", "64", 8, 2, "false", 1}, {"256", "128", "64", 8, 2, "true", 1},
        {"64", "64", "128", 4, 2, "false", 0},  {"128", "128", "64", 4, 2, "true", 0},
    };
    for (size_t i = 0; i < sizeof cfg / sizeof cfg[0]; i++) {
        KilnCompileResult r = attention(&cfg[i], "sm_90a", 1, KILN_EMIT_PTX);
        char what[64];
        snprintf(what, sizeof what, "d %s %sx%s/%d causal %s pp %d", cfg[i].d, cfg[i].bm, cfg[i].bn, cfg[i].warps,
                 cfg[i].causal, cfg[i].pingpong);
        check_protocol(&r, 2, 1, what);
        ck_assert_int_gt(count(&r, "mbarrier.try_wait.parity"), 0);
        ck_assert_int_gt(count(&r, "fence.mbarrier_init.release.cluster"), 0);
        /* wgmma reads the slots through the async proxy: a fence after each wait for copies */
        ck_assert_int_ge(count(&r, "fence.proxy.async.shared::cta"), count(&r, "mbarrier.init") / 4);
        if (cfg[i].pingpong) ck_assert_int_gt(count(&r, "@p bar.arrive"), 0);
        kiln_compile_result_free(&r);
    }
}
END_TEST

/* At 3 stages (no wgmma in flight) the copies run S - 2 = 1 iteration ahead. */
START_TEST(three_stages_leave_an_iteration_of_slack)
{
    Attn a = {"128", "128", "64", 8, 3, "false", 0};
    KilnCompileResult r = attention(&a, "sm_90a", 1, KILN_EMIT_PTX);
    check_protocol(&r, 3, 1, "d 128 128x64/8/3");
    kiln_compile_result_free(&r);
}
END_TEST

START_TEST(sm80_spins_on_test_wait)
{
    Attn a = {"128", "128", "64", 8, 2, "false", 0};
    KilnCompileResult r = attention(&a, "sm_80", 1, KILN_EMIT_PTX);
    check_protocol(&r, 2, 1, "sm_80 d 128 128x64/8/2");
    ck_assert_int_eq(count(&r, "try_wait"), 0);
    ck_assert_int_gt(count(&r, "mbarrier.test_wait.parity"), 0);
    ck_assert_int_eq(count(&r, "fence.mbarrier_init"), 0);
    kiln_compile_result_free(&r);
}
END_TEST

static long at(const KilnCompileResult *r, const char *what, long from)
{
    const char *p = strstr(r->output + from, what);
    return p ? p - r->output : -1;
}

/* wgmma.pending: copies S - 2 ahead; the release of the previous iteration's
 * slot follows the dot's wait_group 1 and is predicated off in iteration 0. */
START_TEST(matmul_in_flight_releases_the_previous_slot)
{
    for (int S = 3; S <= 4; S++) {
        PuSched s = {128, 128, 64, 4, S};
        KilnCompileResult r;
        pu_compile_matmul_opt("tools/bench/matmul_tc.tile", "matmul_tc_f16", &s, 4096, 4096, "sm_90a", 0, 1,
                              KILN_EMIT_PTX, &r);
        char what[32];
        snprintf(what, sizeof what, "matmul S %d", S);
        check_protocol(&r, S, S - 2, what);
        ck_assert_int_eq(count(&r, "wgmma.wait_group.sync.aligned 1;"), 1);
        long w1 = at(&r, "wgmma.wait_group.sync.aligned 1;", 0);
        long rel = at(&r, "mbarrier.arrive.shared::cta.b64", 0);
        ck_assert_msg(w1 >= 0 && rel > w1, "S %d: the release (at %ld) before the dot's wait 1 (at %ld)", S, rel, w1);
        ck_assert_msg(at(&r, "@p mbarrier.arrive.shared::cta.b64", 0) == rel - (long)strlen("@p "),
                      "S %d: the release is not predicated (iteration 0 has no previous slot)", S);
        kiln_compile_result_free(&r);
    }
    /* mma.sync at 3 stages: nothing in flight, the body releases its own slot, 1 ahead */
    PuSched s = {128, 128, 32, 4, 3};
    KilnCompileResult r;
    pu_compile_matmul_opt("tools/bench/matmul_tc.tile", "matmul_tc_f16", &s, 4096, 4096, "sm_80", 0, 1, KILN_EMIT_PTX,
                          &r);
    check_protocol(&r, 3, 1, "sm_80 matmul S 3");
    ck_assert_int_eq(count(&r, "@p mbarrier.arrive"), 0);
    kiln_compile_result_free(&r);
}
END_TEST

/* No pipelined loop (one stage, or none in the kernel): the option changes nothing. */
START_TEST(unchanged_where_it_does_not_apply)
{
    PuSched s = {128, 128, 32, 4, 1};
    KilnCompileResult a, b;
    pu_compile_matmul_opt("tools/bench/matmul_tc.tile", "matmul_tc_f16", &s, 4096, 4096, "sm_90a", 0, 0,
                          KILN_EMIT_PTX, &a);
    pu_compile_matmul_opt("tools/bench/matmul_tc.tile", "matmul_tc_f16", &s, 4096, 4096, "sm_90a", 0, 1,
                          KILN_EMIT_PTX, &b);
    ck_assert_uint_eq(a.output_size, b.output_size);
    ck_assert_int_eq(memcmp(a.output, b.output, a.output_size), 0);
    ck_assert_int_eq(count(&b, "mbarrier"), 0);
    kiln_compile_result_free(&a);
    kiln_compile_result_free(&b);
    /* a body with SRAM buffers of its own (64 rows on 8 warps, sm_80: cross-warp reductions, P
     * staged) needs a CTA barrier every iteration anyway: sram-alloc drops the attribute */
    Attn own = {"64", "64", "64", 8, 2, "false", 0};
    KilnCompileResult x = attention(&own, "sm_80", 0, KILN_EMIT_PTX), y = attention(&own, "sm_80", 1, KILN_EMIT_PTX);
    ck_assert_uint_eq(x.output_size, y.output_size);
    ck_assert_int_eq(memcmp(x.output, y.output, x.output_size), 0);
    ck_assert_int_gt(count(&y, "cp.async.wait_group"), 0);
    kiln_compile_result_free(&x);
    kiln_compile_result_free(&y);
    /* and with it off, the pipelined attention keeps its wait_group + barrier */
    Attn at2 = {"128", "128", "64", 8, 2, "false", 0};
    KilnCompileResult off = attention(&at2, "sm_90a", 0, KILN_EMIT_PTX);
    ck_assert_int_eq(count(&off, "mbarrier"), 0);
    ck_assert_int_gt(count(&off, "cp.async.wait_group"), 0);
    kiln_compile_result_free(&off);
}
END_TEST

START_TEST(decision_is_on_the_ir)
{
    Attn a = {"128", "128", "64", 8, 2, "false", 0};
    KilnCompileResult on = attention(&a, "sm_90a", 1, KILN_EMIT_GPU_IR), off = attention(&a, "sm_90a", 0, KILN_EMIT_GPU_IR);
    int loops = count(&on, "pipeline.stages = 2");
    ck_assert_int_gt(loops, 0);
    ck_assert_int_eq(count(&on, "pipeline.mbarrier = 1, smem.offset = "), loops);
    ck_assert_int_eq(count(&on, "smem.bytes = 32, smem.live"), loops);
    ck_assert_int_eq(count(&off, "pipeline.mbarrier"), 0);
    kiln_compile_result_free(&on);
    kiln_compile_result_free(&off);
}
END_TEST

/* ptxas: the schedules the benchmark compares assemble without spills. */
START_TEST(ptxas_no_spills)
{
    static const Attn cfg[] = {
        {"128", "128", "64", 8, 2, "false", 0}, {"128", "128", "64", 8, 2, "false", 1},
        {"128", "128", "64", 8, 3, "true", 0},  {"256", "128", "64", 8, 2, "true", 1},
    };
    for (size_t i = 0; i < sizeof cfg / sizeof cfg[0]; i++) {
        KilnCompileResult r = attention(&cfg[i], "sm_90a", 1, KILN_EMIT_CUBIN);
        ck_assert_int_gt((int)r.output_size, 0);
        ck_assert_msg(r.stats && strstr(r.stats, "spills: 0 bytes stored, 0 bytes loaded"), "d %s %sx%s/%d/%d: %s",
                      cfg[i].d, cfg[i].bm, cfg[i].bn, cfg[i].warps, cfg[i].stages, r.stats ? r.stats : "(no stats)");
        kiln_compile_result_free(&r);
    }
    PuSched s = {128, 128, 64, 4, 3};
    KilnCompileResult r;
    pu_compile_matmul_opt("tools/bench/matmul_tc.tile", "matmul_tc_f16", &s, 4096, 4096, "sm_90a", 0, 1,
                          KILN_EMIT_CUBIN, &r);
    ck_assert_msg(r.stats && strstr(r.stats, "spills: 0 bytes stored, 0 bytes loaded"), "matmul: %s",
                  r.stats ? r.stats : "(no stats)");
    kiln_compile_result_free(&r);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("codegen_e2e_mbarrier_ptx");
    TCase *tc = tcase_create("mbarrier");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, attention_hands_over_through_mbarriers);
    tcase_add_test(tc, three_stages_leave_an_iteration_of_slack);
    tcase_add_test(tc, sm80_spins_on_test_wait);
    tcase_add_test(tc, matmul_in_flight_releases_the_previous_slot);
    tcase_add_test(tc, unchanged_where_it_does_not_apply);
    tcase_add_test(tc, decision_is_on_the_ir);
    suite_add_tcase(s, tc);
    TCase *pt = pu_ptxas_tcase(s, 600);
    tcase_add_test(pt, ptxas_no_spills);
    return s;
}

PU_MAIN(suite)
