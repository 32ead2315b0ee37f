/* test_e2e_warp_spec_ptx.c — warp specialisation (pass_warp_specialize.c,
 * cg_warp_spec.c, the schedule option warp_specialize) in the PTX of the
 * shipped attention forward at the runtime's launch-time hints and of the
 * wgmma matmul:
 *   - the launch: .maxntid 32 (num_warps + 4), .maxnreg pinned, the
 *     kernel's KilnKernelInfo.num_warps = num_warps + 4 (the runtime launches
 *     from it), --stats names the split;
 *   - the split: one setmaxnreg.dec (the producer) before one setmaxnreg.inc
 *     (the consumers), 128 p + 32 num_warps c within the CTA's registers;
 *   - the producer's program (from the dec to the inc) issues every copy
 *     (cp.async) and arrives once per loop body on full; its only CTA
 *     barriers are two bar.sync 0 per pipelined loop;
 *   - the consumers' program (from the inc on) issues no copy, inits full
 *     with 128 and empty with 32 num_warps, meets the producer at the same two
 *     bar.sync 0 per loop, and every other barrier of theirs is the named
 *     bar.sync B, 32 num_warps (B = 1, or 3 after ping-pong's 1 and 2);
 *   - a kernel that does not qualify compiles as with --mbarrier alone
 *     (sm_80, the persistent matmul's nested loop), --stats says why;
 *   - the decision is on the GPU IR (warp_spec = 1);
 *   - (KilnAttentionParams.warp_specialize reaching the runtime's compile request:
 *     test_e2e_pingpong_ptx.c, with the other schedule options);
 *   - the protocol, with the stages and release read off the PTX, runs on a model
 *     of mbarriers and async copies: no early read, no overwrite before the
 *     release, no deadlock, nothing in flight at the drain;
 *   - ptxas assembles the benchmark's schedules without spills.
 * With the option off every kernel's PTX is what it was (test_e2e_ptx_hashes.c).
 * Whether it runs right and fast is for the GPU (tests/gpu/test_e2e_gpu_attention.c
 * with KILN_TEST_WARP_SPEC=1, test_e2e_gpu_matmul.c likewise; bench_attention.py .../ws). */
#include "tests/testutil.h"
#include "tests/ptx_util.h"

#include <stdlib.h>
#include <string.h>

typedef struct Attn {
    const char *d, *bm, *bn;
    int warps;
    int pingpong;
} Attn;

static KilnCompileResult attention(const Attn *a, const char *arch, int ws, int mbarrier, KilnEmit emit)
{
    static char *src;
    if (!src) src = sup_read_file_text(tu_src_path("lang/lib/attention_fwd.tile"), NULL);
    ck_assert_ptr_nonnull(src);
    KilnDefine defs[] = {{"HEAD_DIM", a->d}, {"BLOCK_M", a->bm}, {"BLOCK_N", a->bn}, {"CAUSAL", "false"},
                         {"PLAIN_SCORES", "true"}};
    KilnParamHint h[PU_ATTN_NHINTS];
    KilnCompileOptions o;
    pu_attention_options(&o, defs, 5, arch, a->warps, 2, emit, h);
    o.schedule.pingpong = a->pingpong;
    o.schedule.mbarrier = mbarrier;
    o.schedule.warp_specialize = ws;
    KilnCompileResult r;
    KilnStatus st = kiln_compile("lang/lib/attention_fwd.tile", src, &o, &r);
    ck_assert_msg(st == KILN_OK, "d %s %sx%s/%d %s: %s", a->d, a->bm, a->bn, a->warps, arch,
                  r.diagnostics ? r.diagnostics : "");
    return r;
}

static KilnCompileResult matmul(int persistent, const char *arch, int ws, KilnEmit emit)
{
    PuSched s = {128, 128, 64, 8, 4};
    KilnCompileResult r;
    if (!persistent) {
        pu_compile_matmul_opt("tools/bench/matmul_tc.tile", "matmul_tc_f16_f16", &s, 1024, 1024, arch, 0,
                              ws ? 2 : 1, emit, &r);
        return r;
    }
    char *src = sup_read_file_text(tu_src_path("tools/bench/matmul_tc.tile"), NULL);
    ck_assert_ptr_nonnull(src);
    KilnDefine d[] = {{"BLOCK_M", "128"}, {"BLOCK_N", "128"}, {"N", "1024"}, {"K", "1024"}, {"PERSISTENT", "true"}};
    KilnParamHint h[3] = {{"A", 16, 0}, {"B", 16, 0}, {"C", 16, 0}};
    KilnCompileOptions o = {.kernel = "matmul_tc_f16_f16", .defines = d, .ndefines = 5, .arch = arch, .emit = emit,
                            .hints = h, .nhints = 3, .schedule.mbarrier = 1, .schedule.warp_specialize = ws};
    ck_assert_int_eq(kiln_compile("tools/bench/matmul_tc.tile", src, &o, &r), KILN_OK);
    free(src);
    return r;
}

static int count_in(const char *from, const char *to, const char *what)
{
    return pu_count_n(from, (size_t)(to - from), what);
}

/* mbarrier.init lines of [from, to) with count n. */
static int inits_of(const char *from, const char *to, int n)
{
    char tail[32];
    snprintf(tail, sizeof tail, "], %d;", n);
    int k = 0;
    for (const char *p = from; (p = strstr(p, "mbarrier.init.shared::cta.b64")) && p < to; p++) {
        const char *eol = strchr(p, '\n');
        k += eol && pu_count_n(p, (size_t)(eol - p), tail) == 1;
    }
    return k;
}

/* What every warp-specialised kernel of num_warps W with `loops` pipelined loops of S stages shows. */
static void check_split(const KilnCompileResult *r, int W, int loops, int S, int bar_id, const char *what)
{
    const char *ptx = r->output, *end = r->output + r->output_size;
    char buf[96];
    snprintf(buf, sizeof buf, ".maxntid %d, 1, 1", 32 * (W + 4));
    ck_assert_msg(strstr(ptx, buf), "%s: no %s", what, buf);
    ck_assert_msg(strstr(ptx, ".maxnreg "), "%s: no .maxnreg", what);
    ck_assert_int_eq(r->kernels[0].num_warps, W + 4);
    ck_assert_msg(r->stats && strstr(r->stats, "warp-specialize: 4 producer warps"), "%s: %s", what, r->stats);
    const char *dec = strstr(ptx, "setmaxnreg.dec.sync.aligned.u32 "), *inc = strstr(ptx, "setmaxnreg.inc.sync.aligned.u32 ");
    ck_assert_msg(dec && inc && dec < inc, "%s: setmaxnreg.dec then .inc", what);
    ck_assert_int_eq(pu_count(ptx, "setmaxnreg."), 2);
    int p = atoi(dec + strlen("setmaxnreg.dec.sync.aligned.u32 ")), c = atoi(inc + strlen("setmaxnreg.inc.sync.aligned.u32 "));
    int maxnreg = atoi(strstr(ptx, ".maxnreg ") + strlen(".maxnreg "));
    ck_assert_msg(p >= 24 && c > p && c <= 256 && p % 8 == 0 && c % 8 == 0, "%s: setmaxnreg %d / %d", what, p, c);
    ck_assert_msg(128 * p + 32 * W * c <= maxnreg * 32 * (W + 4), "%s: %d x 128 + %d x %d > the CTA's %d x %d", what,
                  p, c, 32 * W, maxnreg, 32 * (W + 4));
    /* the producer: every copy, one arrival per loop, two CTA barriers per loop, nothing named */
    ck_assert_int_gt(count_in(dec, inc, "cp.async.cg.shared.global"), 0);
    ck_assert_int_eq(count_in(dec, inc, "cp.async.mbarrier.arrive.noinc"), loops);
    ck_assert_int_eq(count_in(dec, inc, "mbarrier.try_wait.parity"), loops);   /* empty */
    ck_assert_int_eq(count_in(dec, inc, "bar.sync"), 2 * loops);
    ck_assert_int_eq(count_in(dec, inc, "bar.sync \t0;"), 2 * loops);
    /* the consumers: no copy; the same two CTA barriers per loop, the rest named */
    ck_assert_int_eq(count_in(inc, end, "cp.async"), 0);
    ck_assert_int_eq(count_in(inc, end, "bar.sync \t0;"), 2 * loops);
    snprintf(buf, sizeof buf, "bar.sync %d, %d;", bar_id, 32 * W);
    int named = count_in(inc, end, buf), all = count_in(inc, end, "bar.sync");
    int turns = bar_id > 1 ? count_in(inc, end, "bar.sync 1, 256;") + count_in(inc, end, "bar.sync 2, 256;") : 0;
    ck_assert_int_gt(named, 0);
    ck_assert_msg(all == 2 * loops + named + turns, "%s: %d bar.sync, not %d CTA + %d named + %d turns", what, all,
                  2 * loops, named, turns);
    /* full counts the producer's 128 threads, empty the consumers' 32 W (S of each a loop) */
    ck_assert_int_eq(inits_of(inc, end, 128), S * loops * (32 * W == 128 ? 2 : 1));
    if (32 * W != 128) ck_assert_int_eq(inits_of(inc, end, 32 * W), S * loops);
}

/* Each schedule of cfg compiled with the option (sm_90a, `emit`), handed to `check`. */
static void each_schedule(const Attn *cfg, size_t n, KilnEmit emit,
                          void (*check)(const KilnCompileResult *r, const Attn *a, const char *what))
{
    for (size_t i = 0; i < n; i++) {
        KilnCompileResult r = attention(&cfg[i], "sm_90a", 1, 0, emit);
        char what[64];
        snprintf(what, sizeof what, "d %s %sx%s/%d%s", cfg[i].d, cfg[i].bm, cfg[i].bn, cfg[i].warps,
                 cfg[i].pingpong ? "/pp" : "");
        check(&r, &cfg[i], what);
        kiln_compile_result_free(&r);
    }
}

static void check_attention_split(const KilnCompileResult *r, const Attn *a, const char *what)
{
    check_split(r, a->warps, 2, 2, 1, what);
}

START_TEST(attention_splits_producer_and_consumers)
{
    static const Attn cfg[] = {
        {"64", "128", "64", 8, 0}, {"128", "128", "64", 8, 0}, {"128", "128", "128", 8, 0},
        {"256", "128", "64", 8, 0}, {"128", "128", "64", 4, 0}, {"64", "64", "128", 4, 0},
    };
    each_schedule(cfg, sizeof cfg / sizeof cfg[0], KILN_EMIT_PTX, check_attention_split);
}
END_TEST

/* With ping-pong the consumers' CTA barrier is named 3, after the turns' 1 and 2. */
START_TEST(pingpong_keeps_its_barriers)
{
    Attn a = {"128", "128", "64", 8, 1};
    KilnCompileResult r = attention(&a, "sm_90a", 1, 0, KILN_EMIT_PTX);
    check_split(&r, 8, 2, 2, 3, "pingpong");
    ck_assert_int_gt(pu_count_n(r.output, r.output_size, "bar.arrive 2, 256;"), 0);
    ck_assert_int_eq(pu_count_n(r.output, r.output_size, "bar.sync 1, 256;") +
                         pu_count_n(r.output, r.output_size, "bar.sync 2, 256;"),
                     pu_count_n(r.output, r.output_size, "bar.arrive 1, 256;") +
                         pu_count_n(r.output, r.output_size, "bar.arrive 2, 256;"));   /* balanced (4b) */
    kiln_compile_result_free(&r);
}
END_TEST

START_TEST(matmul_splits)
{
    KilnCompileResult r = matmul(0, "sm_90a", 1, KILN_EMIT_PTX);
    check_split(&r, 8, 1, 4, 1, "matmul");
    kiln_compile_result_free(&r);
}
END_TEST

/* Where it does not apply, the PTX is --mbarrier's and --stats says why. */
START_TEST(falls_back_to_mbarrier)
{
    KilnCompileResult on = matmul(1, "sm_90a", 1, KILN_EMIT_PTX), off = matmul(1, "sm_90a", 0, KILN_EMIT_PTX);
    ck_assert_msg(on.output_size == off.output_size && !memcmp(on.output, off.output, on.output_size),
                  "the persistent matmul changed");
    ck_assert_msg(strstr(on.stats, "warp-specialize: not applied: a pipelined loop inside another loop or branch"),
                  "%s", on.stats);
    ck_assert_int_eq(on.kernels[0].num_warps, 8);
    kiln_compile_result_free(&on);
    kiln_compile_result_free(&off);
    Attn a = {"64", "128", "64", 8, 0};
    on = attention(&a, "sm_80", 1, 0, KILN_EMIT_PTX), off = attention(&a, "sm_80", 0, 1, KILN_EMIT_PTX);
    ck_assert_msg(on.output_size == off.output_size && !memcmp(on.output, off.output, on.output_size),
                  "sm_80 changed");
    ck_assert_msg(strstr(on.stats, "warp-specialize: not applied: not an sm_90a wgmma kernel"), "%s", on.stats);
    kiln_compile_result_free(&on);
    kiln_compile_result_free(&off);
}
END_TEST

/* A load on the copies' path is the producer's to run too (varlen's cu_seqlens), unless a write
 * to memory comes before it: the producer runs no writes. */
START_TEST(producer_loads_only_before_writes)
{
    static const char *src_fmt =
        "kernel mm(A: *f16, B: *f16, C: *f32, P: *i32) with (num_warps = 4, num_stages = 3)\n"
        "{\n"
        "    %s\n"
        "    let base = load(P + 1) * 64;\n"
        "    let offs_m = arange(64);\n"
        "    let offs_n = arange(64);\n"
        "    let offs_k = arange(32);\n"
        "    var acc = zeros([64, 64], f32);\n"
        "    for k0 in range(0, 256, 32) {\n"
        "        let a = load(A + base.to(i64) + offs_m.to(i64)[:, None] * 256 + (k0 + offs_k)[None, :]);\n"
        "        let b = load(B + (k0 + offs_k).to(i64)[:, None] * 64 + offs_n[None, :]);\n"
        "        acc = dot(a, b, acc);\n"
        "    }\n"
        "    store(C + offs_m[:, None] * 64 + offs_n[None, :], acc);\n"
        "}\n";
    static const char *first[2] = {"let unused = 0;", "store(P, 7);"};
    for (int i = 0; i < 2; i++) {
        char src[1400];
        snprintf(src, sizeof src, src_fmt, first[i]);
        KilnParamHint h[3] = {{"A", 16, 0}, {"B", 16, 0}, {"C", 16, 0}};
        KilnCompileOptions o = {.arch = "sm_90a", .emit = KILN_EMIT_PTX, .hints = h, .nhints = 3, .schedule.warp_specialize = 1};
        KilnCompileResult r;
        ck_assert_int_eq(kiln_compile("w.tile", src, &o, &r), KILN_OK);
        if (i == 0) {
            check_split(&r, 4, 1, 3, 1, "load, no write");
        } else {
            ck_assert_msg(strstr(r.stats, "warp-specialize: not applied: a copy needs a load that follows a write "
                                          "to memory (the producer runs no writes) (line 4)"), "%s", r.stats);
            ck_assert_int_eq(pu_count_n(r.output, r.output_size, "setmaxnreg"), 0);
        }
        kiln_compile_result_free(&r);
    }
    /* varlen: the sequence bounds are loads before any write */
    static char *attn;
    if (!attn) attn = sup_read_file_text(tu_src_path("lang/lib/attention_fwd.tile"), NULL);
    KilnDefine defs[] = {{"HEAD_DIM", "128"}, {"BLOCK_M", "128"}, {"BLOCK_N", "64"}, {"PLAIN_SCORES", "true"}};
    static const char *const aligned[] = {"Q", "K", "V", "O", "LSE", "stride_qh", "stride_qm", "stride_kh",
                                          "stride_kn", "stride_vh", "stride_vn", "stride_oh", "stride_om"};
    KilnParamHint vh[13];
    for (int i = 0; i < 13; i++) vh[i] = (KilnParamHint){aligned[i], 16, 0};
    KilnCompileOptions o = {.kernel = "attn_fwd_varlen_f16", .defines = defs, .ndefines = 4, .arch = "sm_90a",
                            .num_warps = 8, .emit = KILN_EMIT_PTX, .hints = vh, .nhints = 13, .schedule.warp_specialize = 1};
    KilnCompileResult r;
    ck_assert_int_eq(kiln_compile("lang/lib/attention_fwd.tile", attn, &o, &r), KILN_OK);
    ck_assert_msg(strstr(r.stats, "warp-specialize: 4 producer warps"), "%s", r.stats);
    kiln_compile_result_free(&r);
}
END_TEST

START_TEST(decision_is_on_the_ir)
{
    Attn a = {"64", "128", "64", 8, 0};
    KilnCompileResult on = attention(&a, "sm_90a", 1, 0, KILN_EMIT_GPU_IR), off = attention(&a, "sm_90a", 0, 1, KILN_EMIT_GPU_IR);
    ck_assert_int_eq(pu_count_n(on.output, on.output_size, "warp_spec = 1}"), 1);
    ck_assert_int_eq(pu_count_n(off.output, off.output_size, "warp_spec"), 0);
    kiln_compile_result_free(&on);
    kiln_compile_result_free(&off);
}
END_TEST

/* ---- the protocol on a model of mbarriers and async copies ----
 * NP producer threads and NC consumer threads run one pipelined loop of T iterations as the
 * PTX does: full[s] counts NP (each producer's noinc arrival, when its copies have landed),
 * empty[s] counts NC; a producer waits for parity (j/S + 1) & 1 of empty[j % S], issues, arrives;
 * a consumer waits for parity (i/S) & 1 of full[i % S], reads, and releases its slot (or, with a
 * wgmma group in flight, the previous iteration's: `prev`, read off the PTX's predicated
 * arrive). Copies land later, in order, at random steps; everyone runs in random order.
 * Checked: a slot is read only when every producer's copy of that iteration is in it and is
 * not overwritten before its release, no deadlock, nothing in flight at the end (the drain's
 * bar.sync 0 then inval is safe), for S from the PTX and trip counts 0..9. (Waiting for the
 * wrong empty parity, (j/S) & 1, deadlocks here.) */
enum { NP = 2, NC = 3, MAXS = 8 };

typedef struct Bar { int phase, pending, count; } Bar;
typedef struct Model {
    int S, T;
    bool prev;
    Bar full[MAXS], empty[MAXS];
    int slot[MAXS][NP];                  /* the iteration whose copy of producer p is in the slot */
    int inflight[NP][64], nin[NP];
    int j[NP], i[NC];                    /* next iteration to issue / to read */
    unsigned rng;
} Model;

static void arrive(Bar *b)
{
    if (--b->pending == 0) b->phase++, b->pending = b->count;
}

/* try_wait.parity: the phase of that parity has completed (the current one has the other). */
static bool waited(const Bar *b, int parity) { return (b->phase & 1) != parity; }

static void release(Model *m, int r)
{
    for (int p = 0; p < NP; p++)
        ck_assert_msg(m->slot[r % m->S][p] == r, "S %d T %d: slot %d overwritten (%d) before iteration %d's release",
                      m->S, m->T, r % m->S, m->slot[r % m->S][p], r);
    arrive(&m->empty[r % m->S]);
}

/* One step of actor a (producers, consumers, then the producers' landings); false when it
 * cannot move. */
static bool step(Model *m, int a)
{
    int S = m->S;
    if (a < NP) {   /* producer: wait empty, issue (the arrival comes when the copy lands) */
        int j = m->j[a];
        if (j >= m->T || !waited(&m->empty[j % S], (j / S + 1) & 1)) return false;
        m->inflight[a][m->nin[a]++] = j;
        m->j[a]++;
        return true;
    }
    if (a < NP + NC) {   /* consumer: wait full, read, release */
        int c = a - NP, i = m->i[c];
        if (i >= m->T || !waited(&m->full[i % S], (i / S) & 1)) return false;
        for (int p = 0; p < NP; p++)
            ck_assert_msg(m->slot[i % S][p] == i, "S %d T %d: iteration %d read before producer %d's copy landed",
                          S, m->T, i, p);
        if (!m->prev) release(m, i);
        else if (i > 0) release(m, i - 1);   /* the group just retired read the previous slot */
        m->i[c]++;
        return true;
    }
    int p = a - NP - NC;   /* the oldest copy of producer p lands, then its noinc arrival */
    if (!m->nin[p]) return false;
    int j = m->inflight[p][0];
    memmove(m->inflight[p], m->inflight[p] + 1, sizeof(int) * (size_t)--m->nin[p]);
    m->slot[j % S][p] = j;
    arrive(&m->full[j % S]);
    return true;
}

static void run_model(int S, bool prev, int T, unsigned seed)
{
    Model m = {.S = S, .T = T, .prev = prev, .rng = seed};
    for (int s = 0; s < S; s++) {
        m.full[s] = (Bar){0, NP, NP};
        m.empty[s] = (Bar){0, NC, NC};
        for (int p = 0; p < NP; p++) m.slot[s][p] = -1;
    }
    for (;;) {   /* a random actor that can move, until none can */
        int moved = 0, start = (int)((m.rng = m.rng * 1103515245u + 12345u) >> 16);
        for (int k = 0; k < 2 * NP + NC && !moved; k++) moved = step(&m, (start + k) % (2 * NP + NC));
        if (!moved) break;
    }
    for (int c = 0; c < NC; c++) ck_assert_msg(m.i[c] == T, "S %d T %d: deadlock, consumer %d at %d", S, T, c, m.i[c]);
    for (int p = 0; p < NP; p++) {
        ck_assert_msg(m.j[p] == T, "S %d T %d: deadlock, producer %d at %d", S, T, p, m.j[p]);
        ck_assert_int_eq(m.nin[p], 0);
    }
}

START_TEST(protocol_runs_on_an_mbarrier_model)
{
    KilnCompileResult a = matmul(0, "sm_90a", 1, KILN_EMIT_PTX);   /* 4 stages, a wgmma group in flight */
    Attn at = {"128", "128", "64", 8, 0};
    KilnCompileResult b = attention(&at, "sm_90a", 1, 0, KILN_EMIT_PTX);   /* 2 stages, 2 loops */
    const KilnCompileResult *rs[2] = {&a, &b};
    for (int k = 0; k < 2; k++) {
        const char *ptx = rs[k]->output, *end = ptx + rs[k]->output_size;
        const char *inc = strstr(ptx, "setmaxnreg.inc");
        int loops = k == 0 ? 1 : 2, S = inits_of(inc, end, 128) / loops;   /* full inits per loop */
        bool prev = strstr(inc, "@p mbarrier.arrive.shared") != NULL;
        ck_assert_int_eq(S, k == 0 ? 4 : 2);
        ck_assert(prev == (k == 0));
        for (int T = 0; T < 10; T++)
            for (unsigned seed = 1; seed <= 200; seed++) run_model(S, prev, T, seed * 7919u + (unsigned)T);
    }
    kiln_compile_result_free(&a);
    kiln_compile_result_free(&b);
}
END_TEST

static void no_spills(const KilnCompileResult *r, const Attn *a, const char *what)
{
    (void)a;
    pu_assert_no_spills(r, what);
}

/* ptxas: the schedules the benchmark compares assemble without spills. */
START_TEST(ptxas_no_spills)
{
    static const Attn cfg[] = {
        {"64", "128", "64", 8, 0}, {"128", "128", "64", 8, 0}, {"128", "128", "128", 8, 0},
        {"256", "128", "64", 8, 0}, {"64", "64", "128", 4, 0}, {"128", "128", "64", 8, 1},
    };
    each_schedule(cfg, sizeof cfg / sizeof cfg[0], KILN_EMIT_CUBIN, no_spills);
    KilnCompileResult r = matmul(0, "sm_90a", 1, KILN_EMIT_CUBIN);
    pu_assert_no_spills(&r, "matmul");
    kiln_compile_result_free(&r);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("codegen_e2e_warp_spec_ptx");
    TCase *tc = tcase_create("warp_spec");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, attention_splits_producer_and_consumers);
    tcase_add_test(tc, pingpong_keeps_its_barriers);
    tcase_add_test(tc, matmul_splits);
    tcase_add_test(tc, falls_back_to_mbarrier);
    tcase_add_test(tc, producer_loads_only_before_writes);
    tcase_add_test(tc, decision_is_on_the_ir);
    tcase_add_test(tc, protocol_runs_on_an_mbarrier_model);
    suite_add_tcase(s, tc);
    TCase *pt = pu_ptxas_tcase(s, 600);
    tcase_add_test(pt, ptxas_no_spills);
    return s;
}

PU_MAIN(suite)
