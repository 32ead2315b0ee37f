/* test_e2e_fa3_schedule_ptx.c — FlashAttention-3's forward schedule as one
 * combination of Kiln's schedule options on the shipped attention forward
 * (lang/lib/attention_fwd.tile, attn_fwd_f16 at the runtime's launch-time
 * hints): --warp-specialize --tma --overlap --pingpong, a producer warpgroup
 * whose thread 0 issues TMA copies of K and V, two (or more) consumer
 * warpgroups taking turns on the tensor cores, each with the next key block's
 * Q K^T in flight during its softmax. Checked in the PTX:
 *   - TMA survives the rotation: the rotated K load (masked by the uniform
 *     iv + step < hi, dot-rotate's guard) is a TMA copy too (tma_plan.c's
 *     guard: outside the map when false, so the slot reads zeros), every
 *     pipelined load has its map, and the guard's select is in the producer;
 *   - warp specialisation: one setmaxnreg.dec / .inc pair, two bar.sync 0 per
 *     pipelined loop in each role, the consumers' other barriers named
 *     (bar.sync 1 + G, 32 num_warps) after ping-pong's 1..G;
 *   - ping-pong: every wgmma group inside a turn (bar.sync 1 + g before the
 *     fence, bar.arrive on the next warpgroup's barrier after the commit), the
 *     entry's and return's extra arrival and sync, every named barrier counting
 *     only the consumer threads (256 at 8 warps, 384 at 12);
 *   - overlap: one group per key loop committed without a wait, the softmax's
 *     ex2s and the P V wgmmas before the wait that retires it;
 *   - --lean-producer: the TMA-only producer at 24 registers, the consumers at 240
 *     (FA3's split), and the default where a loop stays on cp.async;
 *   - ptxas assembles the combination at the candidate tiles without spills.
 * The interpreter never sees schedule options (the IR the options change is the
 * GPU IR); whether the combination runs right is for the GPU:
 *   KILN_TEST_WARP_SPEC=128x128/8 KILN_TEST_TMA=1 KILN_TEST_OVERLAP=1 KILN_TEST_PINGPONG=128x128
 * on tests/gpu/test_e2e_gpu_attention.c. */
#include "tests/testutil.h"
#include "tests/ptx_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct Sched {
    const char *d, *bm, *bn, *causal;
    int warps;
    int ws, tma, overlap, pingpong, lean;
} Sched;

static KilnCompileResult compile(const Sched *s, KilnEmit emit)
{
    static char *src;
    if (!src) src = sup_read_file_text(tu_src_path("lang/lib/attention_fwd.tile"), NULL);
    ck_assert_ptr_nonnull(src);
    KilnDefine defs[] = {{"HEAD_DIM", s->d}, {"BLOCK_M", s->bm}, {"BLOCK_N", s->bn}, {"CAUSAL", s->causal},
                         {"PLAIN_SCORES", "true"}};
    KilnParamHint h[PU_ATTN_NHINTS];
    KilnCompileOptions o;
    pu_attention_options(&o, defs, 5, "sm_90a", s->warps, 2, emit, h);
    o.schedule.warp_specialize = s->ws;
    o.schedule.tma = s->tma;
    o.schedule.overlap = s->overlap;
    o.schedule.pingpong = s->pingpong;
    o.schedule.lean_producer = s->lean;
    KilnCompileResult r;
    KilnStatus st = kiln_compile("lang/lib/attention_fwd.tile", src, &o, &r);
    ck_assert_msg(st == KILN_OK, "d %s %sx%s/%d causal %s: %s", s->d, s->bm, s->bn, s->warps, s->causal,
                  r.diagnostics ? r.diagnostics : "");
    return r;
}

static int count(const KilnCompileResult *r, const char *what) { return pu_count_n(r->output, r->output_size, what); }

static int countf(const KilnCompileResult *r, const char *fmt, int a, int b)
{
    char what[64];
    snprintf(what, sizeof what, fmt, a, b);
    return count(r, what);
}

static const Sched k_fa3 = {"128", "128", "128", "false", 8, 1, 1, 1, 1, 0};

/* The rotated K load keeps TMA: the GPU IR maps all four pipelined loads, the
 * PTX copies them all through tensor maps, and the guard selects an inner
 * coordinate past the map's extent. Without --overlap, no guard. */
START_TEST(tma_survives_the_rotation)
{
    static const Sched cases[] = {
        {"128", "128", "128", "false", 8, 0, 1, 1, 0, 0},   /* tma overlap */
        {"128", "128", "128", "false", 8, 1, 1, 1, 0, 0},   /* ws tma overlap */
        {"128", "128", "128", "false", 8, 1, 1, 1, 1, 0},   /* the four */
        {"64", "128", "128", "true", 8, 1, 1, 1, 1, 0},     /* causal: the phase-2 masks and the guard */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        KilnCompileResult g = compile(&cases[i], KILN_EMIT_GPU_IR);
        ck_assert_int_eq(count(&g, "tma.maps = 4"), 1);
        ck_assert_int_eq(count(&g, "wgmma.overlap = 1"), 2);
        kiln_compile_result_free(&g);
        KilnCompileResult p = compile(&cases[i], KILN_EMIT_PTX);
        ck_assert_int_eq(count(&p, "cp.async.ca") + count(&p, "cp.async.cg"), 0);   /* no cp.async copy left */
        ck_assert_int_gt(count(&p, "cp.async.bulk.tensor.4d"), 0);
        kiln_compile_result_free(&p);
    }
    Sched off = k_fa3;
    off.overlap = 0;
    KilnCompileResult g = compile(&off, KILN_EMIT_GPU_IR);
    ck_assert_int_eq(count(&g, "tma.maps = 4"), 1);
    kiln_compile_result_free(&g);
}
END_TEST

/* The protocol's instructions, counted: 6 dots (the rotated Q K^T before each key loop,
 * the one in flight in it, P V), G = 2 consumer warpgroups, 2 pipelined loops. */
START_TEST(fa3_combination_counts)
{
    KilnCompileResult r = compile(&k_fa3, KILN_EMIT_PTX);
    int G = 2, dots = 6, loops = 2;
    ck_assert_int_eq(count(&r, "setmaxnreg.dec.sync.aligned.u32"), 1);
    ck_assert_int_eq(count(&r, "setmaxnreg.inc.sync.aligned.u32"), 1);
    ck_assert_int_eq(count(&r, "wgmma.commit_group.sync.aligned;"), dots);
    ck_assert_int_eq(count(&r, "wgmma.wait_group.sync.aligned"), dots - loops);   /* one in flight per loop */
    /* TMA: per loop, K and V of 128 columns = 2 boxes each, from the producer alone */
    ck_assert_int_eq(count(&r, "cp.async.bulk.tensor.4d"), loops * 2 * 2);
    ck_assert_int_eq(count(&r, "mbarrier.arrive.expect_tx"), loops);
    /* the CTA-wide barriers: init and drain per loop, in each role */
    ck_assert_int_eq(count(&r, "bar.sync \t0;") + count(&r, "bar.sync 0;"), 2 * 2 * loops);
    /* ping-pong's turns: a predicated sync and arrival per warpgroup and dot, the entry's
     * arrival (warpgroup G-1 on barrier 1) and the return's sync (warpgroup 0 on 1) */
    for (int b = 1; b <= G; b++) {
        ck_assert_int_eq(countf(&r, "@p bar.sync %d, %d;", b, 256), dots + (b == 1));
        ck_assert_int_eq(countf(&r, "@p bar.arrive %d, %d;", b, 256), dots + (b == 1));
    }
    /* the consumers' own CTA barriers: named after ping-pong's, their 256 threads only */
    ck_assert_int_gt(countf(&r, "bar.sync %d, %d;", G + 1, 256), 0);
    ck_assert_int_eq(count(&r, ", 384;"), 0);   /* no named barrier waits for the producer */
    kiln_compile_result_free(&r);
}
END_TEST

/* Each in-flight group (the next block's Q K^T) is retired by the P V dot's wait, with the
 * softmax's ex2s in between; every group issues inside its warpgroup's turn. */
START_TEST(overlap_and_turns_in_order)
{
    KilnCompileResult r = compile(&k_fa3, KILN_EMIT_PTX);
    int in_flight = 0;
    for (const char *c = strstr(r.output, "wgmma.commit_group.sync.aligned;"); c;
         c = strstr(c + 1, "wgmma.commit_group.sync.aligned;")) {
        /* the turn: the arrivals for the next warpgroup right after the commit */
        const char *arrive = strstr(c, "bar.arrive"), *fence = strstr(c + 1, "wgmma.fence");
        ck_assert_ptr_nonnull(arrive);
        ck_assert(!fence || arrive < fence);
        const char *wait = strstr(c, "wgmma.wait_group"), *next = strstr(c + 1, "wgmma.commit_group");
        ck_assert_ptr_nonnull(wait);
        if (next && next < wait) {
            in_flight++;
            char *span = strndup(c, (size_t)(wait - c));
            ck_assert_msg(strstr(span, "ex2.approx"), "no softmax while the group is in flight");
            ck_assert_msg(strstr(span, "wgmma.mma_async"), "no P V dot before the retiring wait");
            free(span);
        }
    }
    ck_assert_int_eq(in_flight, 2);
    kiln_compile_result_free(&r);
}
END_TEST

/* More consumer warpgroups (FA3's d 64 tile has three; num_warps and tiles are powers of
 * two here, so four: 256 x 64 on 16 warps): the turns rotate through barriers 1..4, each
 * counting the two warpgroups that meet there (256), and the consumers' own barrier comes
 * after them, counting all 16 warps (512) and never the producer. */
START_TEST(four_consumer_warpgroups)
{
    Sched s = {"64", "256", "64", "false", 16, 1, 1, 1, 1, 0};
    KilnCompileResult r = compile(&s, KILN_EMIT_PTX);
    int G = 4;
    ck_assert_int_eq(count(&r, "setmaxnreg.dec.sync.aligned.u32"), 1);
    for (int b = 1; b <= G; b++) ck_assert_int_gt(countf(&r, "@p bar.sync %d, %d;", b, 256), 0);
    ck_assert_int_gt(countf(&r, "bar.sync %d, %d;", G + 1, 512), 0);
    kiln_compile_result_free(&r);
}
END_TEST

/* --lean-producer: a producer of TMA copies alone keeps 24 registers and the 8 consumer
 * warps take 240 (FA3's split; 56 / 224 without it), decided on the GPU IR; where a loop's
 * copies stay on cp.async (matmul_tc at BLOCK_K 32: a 32-column tile is no TMA box) the
 * producer keeps its default. */
START_TEST(lean_producer_split)
{
    Sched lean = k_fa3;
    lean.lean = 1;
    KilnCompileResult g = compile(&lean, KILN_EMIT_GPU_IR);
    ck_assert_int_eq(count(&g, "warp_spec.producer_regs = 24"), 1);
    kiln_compile_result_free(&g);
    KilnCompileResult r = compile(&lean, KILN_EMIT_PTX), d = compile(&k_fa3, KILN_EMIT_PTX);
    ck_assert_int_eq(count(&r, "setmaxnreg.dec.sync.aligned.u32 24;"), 1);
    ck_assert_int_eq(count(&r, "setmaxnreg.inc.sync.aligned.u32 240;"), 1);
    ck_assert_int_eq(count(&d, "setmaxnreg.dec.sync.aligned.u32 56;"), 1);
    ck_assert_int_eq(count(&d, "setmaxnreg.inc.sync.aligned.u32 224;"), 1);
    ck_assert_int_eq(count(&r, "\n"), count(&d, "\n"));   /* the split is the only change */
    kiln_compile_result_free(&r);
    kiln_compile_result_free(&d);
    static const int bk[2] = {32, 64};
    for (int i = 0; i < 2; i++) {
        char *src = sup_read_file_text(tu_src_path("tools/bench/matmul_tc.tile"), NULL);
        ck_assert_ptr_nonnull(src);
        char b[8];
        snprintf(b, sizeof b, "%d", bk[i]);
        KilnDefine defs[] = {{"BLOCK_M", "128"}, {"BLOCK_N", "128"}, {"BLOCK_K", b}, {"N", "1024"}, {"K", "1024"}};
        KilnParamHint h[3] = {{"A", 16, 0}, {"B", 16, 0}, {"C", 16, 0}};
        KilnCompileOptions o = {.kernel = "matmul_tc_f16_f16", .defines = defs, .ndefines = 5, .arch = "sm_90a",
                                .num_warps = 8, .num_stages = 4, .emit = KILN_EMIT_PTX, .hints = h, .nhints = 3,
                                .schedule.lean_producer = 1};
        KilnCompileResult m;
        ck_assert_int_eq(kiln_compile("tools/bench/matmul_tc.tile", src, &o, &m), KILN_OK);
        free(src);
        ck_assert_int_eq(count(&m, "cp.async.bulk.tensor") > 0, bk[i] == 64);
        ck_assert_int_eq(count(&m, bk[i] == 64 ? "setmaxnreg.dec.sync.aligned.u32 24;" : "setmaxnreg.dec.sync.aligned.u32 56;"), 1);
        kiln_compile_result_free(&m);
    }
}
END_TEST

/* ptxas: the combination and its neighbours at the candidate tiles, no spill. */
START_TEST(ptxas_no_spills)
{
    static const Sched cases[] = {
        {"128", "128", "128", "false", 8, 1, 1, 1, 1, 0},
        {"128", "128", "128", "true", 8, 1, 1, 1, 1, 0},
        {"128", "128", "128", "false", 8, 1, 1, 1, 0, 0},
        {"128", "128", "128", "false", 8, 1, 1, 0, 1, 0},
        {"128", "128", "64", "false", 8, 1, 1, 1, 1, 0},
        {"64", "128", "128", "false", 8, 1, 1, 1, 1, 0},
        {"64", "128", "128", "true", 8, 1, 1, 1, 0, 0},
        {"256", "128", "64", "false", 8, 1, 0, 0, 1, 0},
        {"128", "128", "128", "false", 8, 1, 1, 1, 1, 1},   /* --lean-producer: 24 / 240 */
        {"128", "128", "128", "true", 8, 1, 1, 1, 1, 1},
        {"64", "128", "128", "false", 8, 1, 1, 1, 1, 1},
        {"256", "128", "64", "true", 8, 1, 1, 0, 0, 1},    /* d 256 causal: 24 bytes of spill at 56 / 224 */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        KilnCompileResult r = compile(&cases[i], KILN_EMIT_CUBIN);
        char what[96];
        snprintf(what, sizeof what, "d %s %sx%s/%d causal %s ws%d tma%d ov%d pp%d lp%d", cases[i].d, cases[i].bm,
                 cases[i].bn, cases[i].warps, cases[i].causal, cases[i].ws, cases[i].tma, cases[i].overlap,
                 cases[i].pingpong, cases[i].lean);
        pu_assert_no_spills(&r, what);
        kiln_compile_result_free(&r);
    }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("codegen_e2e_fa3_schedule_ptx");
    TCase *tc = tcase_create("ptx");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, tma_survives_the_rotation);
    tcase_add_test(tc, fa3_combination_counts);
    tcase_add_test(tc, overlap_and_turns_in_order);
    tcase_add_test(tc, four_consumer_warpgroups);
    tcase_add_test(tc, lean_producer_split);
    suite_add_tcase(s, tc);
    TCase *pt = pu_ptxas_tcase(s, 1200);
    tcase_add_test(pt, ptxas_no_spills);
    return s;
}

PU_MAIN(suite)
