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
 *   - the hand-off as the PTX does it (S, how far ahead, which slot a
 *     release frees) run on a model of mbarriers and async copies: no slot
 *     read early or refilled while read, no deadlock, any trip count;
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
    o.schedule.pingpong = a->pingpong;
    o.schedule.mbarrier = mbarrier;
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

/* ---- the protocol on a model of mbarriers and async copies ----
 * NT threads run the loop's hand-off as the PTX does it, with S and how far
 * ahead the copies run (D: the prologue's arrivals) and whether the release is
 * the previous iteration's (a predicated arrive: a wgmma group in flight) read
 * off the emitted PTX. A thread's copies land later, in order, at random
 * steps, then its noinc arrival happens; threads run in random order. Checked:
 * a slot is read only when every thread's copies of that iteration are in it,
 * a copy is issued into a slot only after every thread released the
 * iteration that read it last, no deadlock, nothing in flight at the drain's
 * end (the invalidation is safe), for trip counts 0..9. (A plan refilling
 * too early deadlocks here: the in-flight dot's loop at D = S - 1, or D = S.) */
enum { NT = 4, MAXS = 8 };

typedef struct Bar { int phase, pending; } Bar;
typedef struct Model {
    int S, D, T;
    bool prev;                          /* release the previous iteration's slot */
    Bar full[MAXS], empty[MAXS];
    int slot[MAXS][NT];                 /* the iteration whose copy of thread t is in the slot */
    int released[NT];                   /* iterations each thread has released, in order */
    int inflight[NT][64], nin[NT];      /* its copies not landed yet (iteration numbers) */
    int pc[NT], it[NT], k[NT];          /* program point, iteration, prologue/drain counter */
    bool done[NT];
    unsigned rng;
} Model;

static void arrive(Bar *b)
{
    if (--b->pending == 0) b->phase++, b->pending = NT;
}

/* try_wait.parity: the phase of that parity has completed (the current one has the other). */
static bool waited(const Bar *b, int parity) { return (b->phase & 1) != parity; }

static void issue(Model *m, int t, int j)
{
    for (int u = 0; u < NT; u++)   /* every thread has released iteration j - S: the slot is free */
        ck_assert_msg(j < m->S || m->released[u] > j - m->S, "S %d D %d T %d: copy %d into slot %d while thread %d "
                      "has released only %d iterations", m->S, m->D, m->T, j, j % m->S, u, m->released[u]);
    m->inflight[t][m->nin[t]++] = j;
}

static void land(Model *m, int t)   /* the oldest copy of thread t lands, then its noinc arrival */
{
    int j = m->inflight[t][0];
    memmove(m->inflight[t], m->inflight[t] + 1, sizeof(int) * (size_t)--m->nin[t]);
    m->slot[j % m->S][t] = j;
    arrive(&m->full[j % m->S]);
}

static void release(Model *m, int t, int i)
{
    ck_assert_int_eq(m->released[t], i);
    m->released[t]++;
    arrive(&m->empty[i % m->S]);
}

/* One step of thread t; false when it waits. pc: 0 prologue, 1 empty wait + issue, 2 full
 * wait + read + release, 3 drain waits, 4 done (the drain's bar.sync is the end). */
static bool step(Model *m, int t)
{
    int S = m->S, i = m->it[t];
    switch (m->pc[t]) {
    case 0:
        if (m->k[t] < m->D) { issue(m, t, m->k[t]++); return true; }
        m->pc[t] = m->T ? 1 : 3, m->k[t] = 0;
        return true;
    case 1: {
        int j = i + m->D;
        if (!waited(&m->empty[j % S], (j / S + 1) & 1)) return false;
        issue(m, t, j);
        m->pc[t] = 2;
        return true;
    }
    case 2:
        if (!waited(&m->full[i % S], (i / S) & 1)) return false;
        for (int u = 0; u < NT; u++)
            ck_assert_msg(m->slot[i % S][u] == i, "S %d D %d T %d: thread %d reads iteration %d, slot %d holds %d "
                          "from thread %d", S, m->D, m->T, t, i, i % S, m->slot[i % S][u], u);
        if (!m->prev) release(m, t, i);
        else if (i > 0) release(m, t, i - 1);
        m->it[t]++;
        m->pc[t] = m->it[t] < m->T ? 1 : 3;
        return true;
    case 3: {
        if (m->k[t] == m->D) { m->pc[t] = 4; return true; }
        int j = m->T + m->k[t];
        if (!waited(&m->full[j % S], (j / S) & 1)) return false;
        m->k[t]++;
        return true;
    }
    default:
        m->done[t] = true;
        return false;
    }
}

static void run_model(int S, int D, bool prev, int T, unsigned seed)
{
    Model m = {.S = S, .D = D, .T = T, .prev = prev, .rng = seed};
    for (int s = 0; s < S; s++) {
        m.full[s] = m.empty[s] = (Bar){0, NT};
        for (int t = 0; t < NT; t++) m.slot[s][t] = -1;
    }
    for (int steps = 0; steps < 100000; steps++) {
        bool all = true, moved = false;
        for (int t = 0; t < NT; t++) all &= m.done[t];
        if (all) break;
        m.rng = m.rng * 1103515245u + 12345u;
        int t = (int)(m.rng >> 16) % NT;
        bool land_now = m.nin[t] && ((m.rng >> 8) & 3) == 0;
        if (land_now) land(&m, t), moved = true;
        else moved = step(&m, t);
        if (moved || m.done[t]) continue;
        /* t waits: somebody must be able to move (a thread's step or a landing copy) */
        bool any = false;
        for (int u = 0; u < NT && !any; u++) {
            any = m.nin[u] > 0;
            Model probe = m;
            any = any || (!probe.done[u] && step(&probe, u));
        }
        ck_assert_msg(any, "S %d D %d T %d: deadlock (thread %d at point %d, iteration %d)", S, D, T, t, m.pc[t],
                      m.it[t]);
    }
    for (int t = 0; t < NT; t++) {
        ck_assert_msg(m.done[t], "S %d D %d T %d: thread %d did not finish", S, D, T, t);
        ck_assert_msg(m.nin[t] == 0, "S %d D %d T %d: copies of thread %d in flight at the drain's end", S, D, T, t);
    }
}

/* S, D and the kind of release from the PTX of `r`'s first loop, then the model. */
static void model_of(const KilnCompileResult *r, const char *what)
{
    const char *ptx = r->output, *init = strstr(ptx, "mbarrier.init.shared"), *wait = strstr(ptx, "MBAR_WAIT:");
    ck_assert_ptr_nonnull(init);
    ck_assert_ptr_nonnull(wait);
    int inits = 0, D = 0;
    for (const char *p = init; (p = strstr(p, "mbarrier.init.shared")) && p < wait; p++) inits++;
    for (const char *p = init; (p = strstr(p, "cp.async.mbarrier.arrive.noinc")) && p < wait; p++) D++;
    bool prev = strstr(ptx, "@p mbarrier.arrive.shared") != NULL;
    int S = inits / 2;
    ck_assert_msg(S >= 2 && S <= MAXS && D >= 1 && D < S, "%s: S %d, D %d", what, S, D);
    for (int T = 0; T < 10; T++)
        for (unsigned seed = 1; seed <= 40; seed++) run_model(S, D, prev, T, seed * 7919u + (unsigned)T);
}

START_TEST(protocol_runs_on_an_mbarrier_model)
{
    for (int S = 2; S <= 3; S++) {
        Attn a = {"128", "128", "64", 8, S, "false", 1};
        KilnCompileResult r = attention(&a, "sm_90a", 1, KILN_EMIT_PTX);
        model_of(&r, "attention");
        kiln_compile_result_free(&r);
    }
    for (int S = 3; S <= 4; S++) {
        PuSched s = {128, 128, 64, 4, S};
        KilnCompileResult r;
        pu_compile_matmul_opt("tools/bench/matmul_tc.tile", "matmul_tc_f16", &s, 4096, 4096, "sm_90a", 0, 1,
                              KILN_EMIT_PTX, &r);
        model_of(&r, "matmul");
        kiln_compile_result_free(&r);
    }
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
        char what[64];
        snprintf(what, sizeof what, "d %s %sx%s/%d/%d", cfg[i].d, cfg[i].bm, cfg[i].bn, cfg[i].warps, cfg[i].stages);
        pu_assert_no_spills(&r, what);
        kiln_compile_result_free(&r);
    }
    PuSched s = {128, 128, 64, 4, 3};
    KilnCompileResult r;
    pu_compile_matmul_opt("tools/bench/matmul_tc.tile", "matmul_tc_f16", &s, 4096, 4096, "sm_90a", 0, 1,
                          KILN_EMIT_CUBIN, &r);
    pu_assert_no_spills(&r, "matmul");
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
    tcase_add_test(tc, protocol_runs_on_an_mbarrier_model);
    suite_add_tcase(s, tc);
    TCase *pt = pu_ptxas_tcase(s, 600);
    tcase_add_test(pt, ptxas_no_spills);
    return s;
}

PU_MAIN(suite)
