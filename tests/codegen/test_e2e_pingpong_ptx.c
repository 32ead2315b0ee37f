/* test_e2e_pingpong_ptx.c — warpgroup ping-pong (pass_pingpong.c, cg_pingpong.c)
 * in the PTX of the shipped attention forward at the runtime's launch-time hints:
 *   - the named barriers are where the protocol puts them: warpgroup G-1's
 *     arrival on barrier 1 at the entry, before each wgmma.fence a sync on the
 *     warpgroup's own barrier, between each commit and wait an arrival on the
 *     next one's, warpgroup 0's sync on barrier 1 before the return; no full
 *     barrier (bar.sync 0) and no other named one inside a turn; every
 *     wgmma issued inside one;
 *   - a kernel that does not qualify (one warpgroup, sm_80, --no-wgmma) and
 *     every kernel with the option off compile to the PTX they had (the
 *     shipped kernels' hashes: test_e2e_ptx_hashes.c);
 *   - the hand-over blocks of that PTX, run by 2 and 4 warpgroups through random
 *     CTA-uniform programs on a model of named barriers, never deadlock, leave
 *     every barrier balanced and let one warpgroup at a time into a turn (and a
 *     turn around a CTA barrier does deadlock there);
 *   - the decision lives on the GPU IR: its text compiles to the same PTX;
 *   - KilnAttentionParams.pingpong reaches the runtime's compile request;
 *   - ptxas assembles the 8-warp schedules without spills.
 * Whether it runs right and fast is for the GPU (tests/gpu/test_e2e_gpu_attention.c
 * with KILN_TEST_PINGPONG=1; tools/bench/bench_attention.py .../pp). */
#include "compiler/codegen/codegen.h"
#include "compiler/support/diag.h"
#include "tests/testutil.h"
#include "tests/ptx_util.h"
#include "jit_internal.h"   /* rt_attn_fwd_request: what the runtime compiles */

#include <stdlib.h>
#include <string.h>

static KilnCompileResult attention(const char *d, const char *bm, const char *bn, int warps, const char *arch,
                                   int pingpong, int no_wgmma, KilnEmit emit)
{
    return pu_attention_fwd(d, bm, bn, warps, arch, pingpong, 0, no_wgmma, emit);
}

static int count(const KilnCompileResult *r, const char *what) { return pu_count_n(r->output, r->output_size, what); }

/* Walks the PTX: `holding` from a sync on a warpgroup's own barrier to the
 * arrival that hands the turn on. Returns the number of turns; fails on a
 * full barrier or a second sync inside a turn, or a wgmma outside one. */
static int check_turns(const char *ptx, int G)
{
    bool holding = false, entry_seen = false;
    int turns = 0, nsync_in_turn = 0;
    for (const char *l = ptx; *l;) {
        const char *nl = strchr(l, '\n');
        size_t n = nl ? (size_t)(nl - l) : strlen(l);
        char line[256];
        snprintf(line, sizeof line, "%.*s", (int)(n < 255 ? n : 255), l);
        l += n + (nl != NULL);
        if (strstr(line, "@p bar.arrive")) {
            if (!entry_seen) { /* the entry: warpgroup G-1 on barrier 1, before any turn */
                ck_assert_msg(strstr(line, "@p bar.arrive 1, 256;") && !turns,
                              "the first arrival is not the entry's: %s", line);
                entry_seen = true;
                continue;
            }
            if (holding) turns++;
            holding = false;
            nsync_in_turn = 0;
        } else if (strstr(line, "@p bar.sync")) {
            ck_assert_msg(entry_seen, "a turn before the entry's arrival");
            holding = true;
            ck_assert_msg(++nsync_in_turn <= G, "more syncs than warpgroups in one turn: %s", line);
        } else if (strstr(line, "bar.sync") || strstr(line, "barrier.")) {
            ck_assert_msg(!holding, "a CTA barrier inside a turn: %s", line);
        } else if (strstr(line, "wgmma.fence") || strstr(line, "wgmma.mma_async")) {
            ck_assert_msg(holding, "a wgmma outside a turn: %s", line);
        }
    }
    ck_assert_msg(holding, "the kernel does not end with warpgroup 0's sync on barrier 1");
    return turns;
}

START_TEST(turns_around_every_wgmma)
{
    KilnCompileResult r = attention("128", "128", "64", 8, "sm_90a", 1, 0, KILN_EMIT_PTX);
    /* 4 dots (QK^T and PV in each of the two key loops), each one turn */
    ck_assert_int_eq(count(&r, "wgmma.fence.sync.aligned"), 4);
    ck_assert_int_eq(check_turns(r.output, 2), 4);
    /* warpgroup g syncs on 1 + g and arrives on 1 + (g + 1) % 2; the entry
     * arrives on 1 (warpgroup 1), the return syncs on 1 (warpgroup 0) */
    ck_assert_int_eq(count(&r, "bar.sync 1, 256;"), 4 + 1);
    ck_assert_int_eq(count(&r, "bar.sync 2, 256;"), 4);
    ck_assert_int_eq(count(&r, "bar.arrive 1, 256;"), 4 + 1);
    ck_assert_int_eq(count(&r, "bar.arrive 2, 256;"), 4);
    ck_assert_ptr_nonnull(strstr(r.output, "setp.eq.u32 p, %r"));
    /* the hand-over sits between the commit and the wait */
    ck_assert_int_eq(count(&r, "wgmma.commit_group.sync.aligned;\n\t{\n\t.reg .pred p;"), 4);
    ck_assert_int_eq(count(&r, "\n\t}\n\twgmma.wait_group.sync.aligned 0;"), 4);
    kiln_compile_result_free(&r);
    /* head dim 32 stays on mma.sync (64-byte rows): its marked dots take empty
     * turns, so the warpgroups still pass every barrier as often */
    r = attention("32", "128", "64", 8, "sm_90a", 1, 0, KILN_EMIT_PTX);
    ck_assert_int_eq(count(&r, "wgmma"), 0);
    ck_assert_int_gt(count(&r, "mma.sync.aligned"), 0);
    ck_assert_int_eq(check_turns(r.output, 2), 4);
    ck_assert_int_eq(count(&r, "bar.sync 2, 256;"), 4);
    ck_assert_int_eq(count(&r, "bar.arrive 1, 256;"), 4 + 1);
    kiln_compile_result_free(&r);
    /* 16 warps: four warpgroups in a ring, barriers 1..4 */
    r = attention("64", "256", "64", 16, "sm_90a", 1, 0, KILN_EMIT_PTX);
    ck_assert_int_eq(check_turns(r.output, 4), 4);
    ck_assert_int_eq(count(&r, "bar.sync 4, 256;"), 4);
    ck_assert_int_eq(count(&r, "bar.arrive 1, 256;"), 4 + 1);
    ck_assert_int_eq(count(&r, "bar.sync 1, 256;"), 4 + 1);
    kiln_compile_result_free(&r);
}
END_TEST

static void same_ptx(const char *d, const char *bm, int warps, const char *arch, int no_wgmma)
{
    KilnCompileResult a = attention(d, bm, "64", warps, arch, 0, no_wgmma, KILN_EMIT_PTX);
    KilnCompileResult b = attention(d, bm, "64", warps, arch, 1, no_wgmma, KILN_EMIT_PTX);
    ck_assert_msg(a.output_size == b.output_size && !memcmp(a.output, b.output, a.output_size),
                  "d %s %sx64/%d %s%s: --pingpong changed a kernel that does not qualify", d, bm, warps, arch,
                  no_wgmma ? " --no-wgmma" : "");
    ck_assert_int_eq(count(&b, "bar.arrive"), 0);
    kiln_compile_result_free(&a);
    kiln_compile_result_free(&b);
}

START_TEST(unchanged_where_it_does_not_apply)
{
    same_ptx("128", "128", 4, "sm_90a", 0);   /* one warpgroup */
    same_ptx("64", "64", 4, "sm_90a", 0);
    same_ptx("128", "128", 8, "sm_80", 0);    /* no wgmma */
    same_ptx("64", "128", 8, "sm_90a", 1);    /* --no-wgmma */
    KilnCompileResult r = attention("128", "128", "64", 8, "sm_90a", 0, 0, KILN_EMIT_PTX);
    ck_assert_int_eq(count(&r, "bar.arrive"), 0);   /* off: no named barrier */
    ck_assert_int_eq(count(&r, "bar.sync 1,"), 0);
    kiln_compile_result_free(&r);
}
END_TEST

/* `--emit gpu-ir` with the option carries the decision; that text compiled
 * alone (no pass, no option) gives the PTX of the compile from source. */
START_TEST(decision_is_on_the_ir)
{
    KilnCompileResult g = attention("64", "128", "128", 8, "sm_90a", 1, 0, KILN_EMIT_GPU_IR);
    KilnCompileResult p = attention("64", "128", "128", 8, "sm_90a", 1, 0, KILN_EMIT_PTX);
    ck_assert_ptr_nonnull(strstr(g.output, "pingpong = 2}"));
    ck_assert_int_eq(count(&g, "{pingpong = 1}"), 4);
    Arena a;
    arena_init(&a);
    Diag d;
    diag_init(&d, "<gpu-ir>", g.output);
    IrModule *m = ir_parse(&a, &d, "<gpu-ir>", g.output);
    ck_assert_msg(m && m->nfuncs == 1, "%s", d.out.data ? d.out.data : "");
    CgOptions co = {.target = tgt_parse("sm_90a"), .stage = CG_STAGE_PTX};
    CgResult r;
    memset(&r, 0, sizeof r);
    ck_assert_msg(cg_compile_gpu_ir(m->funcs[0], NULL, &co, &r, &d), "%s", d.out.data ? d.out.data : "");
    ck_assert_msg(r.out.len == p.output_size && !memcmp(r.out.data, p.output, r.out.len),
                  "the PTX from the GPU IR text differs from the PTX from source");
    sb_free(&r.out);
    sb_free(&r.dumps);
    sb_free(&r.stats);
    diag_free(&d);
    arena_free(&a);
    kiln_compile_result_free(&g);
    kiln_compile_result_free(&p);
}
END_TEST

/* ---- the protocol, run: the PTX's own hand-over blocks on a model of named barriers ----
 * Each `{ ... }` block of the PTX with "@p bar." lines is evaluated for every
 * warpgroup g (the `setp.eq.u32 p, wg, K` before each line says whom it is for):
 * block 0 is the entry, the last the return, those between alternate a turn's
 * sync and its hand-over. Warpgroups then run random CTA-uniform programs
 * (dots, CTA barriers) under random interleavings: bar.sync / bar.arrive on a
 * barrier expecting `need` warpgroups, a phase completing when that many have
 * come. Every run must finish with every barrier back at zero and at most one
 * warpgroup inside a turn at a time; a turn around a CTA barrier must deadlock. */
enum { MAXG = 8, MAXEV = 8, MAXOPS = 512 };
typedef struct Ev {
    bool sync;
    int id;
} Ev;
typedef struct Block {
    Ev ev[MAXG][MAXEV];
    int n[MAXG];
} Block;

static int parse_blocks(const char *ptx, int G, Block *out, int max)
{
    int nb = 0;
    for (const char *b = strstr(ptx, "{\n\t.reg .pred p;"); b && nb < max; b = strstr(b + 1, "{\n\t.reg .pred p;")) {
        const char *end = strchr(b, '}');
        Block *k = &out[nb++];
        memset(k, 0, sizeof *k);
        int who = -1;
        for (const char *l = b; l && l < end; l = strchr(l + 1, '\n')) {
            int v, id;
            char what[8];
            if (sscanf(l, "\n\tsetp.eq.u32 p, %%r%*d, %d;", &v) == 1) who = v;
            else if (sscanf(l, "\n\t@p bar.%7[a-z] %d, 256;", what, &id) == 2 && who >= 0 && who < G)
                k->ev[who][k->n[who]++] = (Ev){strcmp(what, "sync") == 0, id};
        }
    }
    return nb;
}

typedef struct Sim {
    int G, cnt[17], nwait[17];
    int pc[MAXG], len[MAXG], waiting[MAXG]; /* waiting: barrier id + 1, 0 = runnable */
    Ev prog[MAXG][MAXOPS];
    bool turn_open[MAXG][MAXOPS];          /* after this event the warpgroup is inside a turn */
} Sim;

/* Appends block `k` for every warpgroup; `turn`: 1 opens a turn after it, 0 closes, -1 leaves it. */
static void add_block(Sim *s, const Block *k, int turn)
{
    for (int g = 0; g < s->G; g++)
        for (int i = 0; i < k->n[g]; i++) {
            s->turn_open[g][s->len[g]] = turn == 1 || (turn < 0 && s->len[g] && s->turn_open[g][s->len[g] - 1]);
            s->prog[g][s->len[g]++] = k->ev[g][i];
        }
}

static void add_cta(Sim *s)
{
    for (int g = 0; g < s->G; g++) {
        s->turn_open[g][s->len[g]] = s->len[g] && s->turn_open[g][s->len[g] - 1];
        s->prog[g][s->len[g]++] = (Ev){true, 0};
    }
}

/* Runs to the end (true) or to a deadlock (false). */
static bool run(Sim *s, unsigned *seed)
{
    for (;;) {
        int ready[MAXG], nr = 0, done = 0;
        for (int g = 0; g < s->G; g++) {
            if (s->pc[g] == s->len[g]) done++;
            else if (!s->waiting[g]) ready[nr++] = g;
        }
        if (done == s->G) break;
        if (!nr) return false;
        *seed = *seed * 1103515245u + 12345u;
        int g = ready[(*seed >> 16) % (unsigned)nr];
        Ev e = s->prog[g][s->pc[g]];
        int need = e.id ? 2 : s->G;   /* 256 threads, or the CTA */
        if (++s->cnt[e.id] == need) { /* the phase completes: everyone waiting on it goes on */
            s->cnt[e.id] = 0;
            s->nwait[e.id] = 0;
            for (int h = 0; h < s->G; h++)
                if (s->waiting[h] == e.id + 1) s->waiting[h] = 0, s->pc[h]++;
            s->pc[g]++;
        } else if (e.sync) {
            s->waiting[g] = e.id + 1;
            s->nwait[e.id]++;
        } else {
            s->pc[g]++;
        }
        int inside = 0;
        for (int h = 0; h < s->G; h++) inside += s->pc[h] > 0 && s->pc[h] <= s->len[h] && !s->waiting[h] &&
                                               s->turn_open[h][s->pc[h] - 1];
        ck_assert_msg(inside <= 1, "%d warpgroups inside a turn at once", inside);
    }
    for (int b = 0; b < 17; b++) ck_assert_msg(s->cnt[b] == 0, "barrier %d left with %d arrivals", b, s->cnt[b]);
    return true;
}

static void simulate(const char *d, const char *bm, int warps)
{
    int G = warps / 4;
    KilnCompileResult r = attention(d, bm, "64", warps, "sm_90a", 1, 0, KILN_EMIT_PTX);
    Block *blk = calloc(64, sizeof *blk);
    int nb = parse_blocks(r.output, G, blk, 64);
    ck_assert_int_eq(nb, 2 + 2 * 4);   /* entry, 4 dots x (sync, hand-over), return */
    unsigned seed = 12345;
    for (int trial = 0; trial < 300; trial++) {
        Sim *s = calloc(1, sizeof *s);
        s->G = G;
        add_block(s, &blk[0], 0);
        int nops = (int)(seed >> 8) % 40;
        for (int i = 0; i < nops; i++) {
            seed = seed * 1103515245u + 12345u;
            if ((seed >> 16) % 3) {
                int dot = (int)((seed >> 20) % 4);   /* any of the 4 dots' blocks */
                add_block(s, &blk[1 + 2 * dot], 1);
                add_block(s, &blk[2 + 2 * dot], 0);
            } else {
                add_cta(s);
            }
        }
        add_block(s, &blk[nb - 1], -1);
        ck_assert_msg(run(s, &seed), "deadlock: %d ops, trial %d", nops, trial);
        free(s);
    }
    /* the check can fail: a CTA barrier inside a turn deadlocks */
    Sim *s = calloc(1, sizeof *s);
    s->G = G;
    add_block(s, &blk[0], 0);
    add_block(s, &blk[1], 1);
    add_cta(s);
    add_block(s, &blk[2], 0);
    add_block(s, &blk[nb - 1], -1);
    ck_assert_msg(!run(s, &seed), "a turn around a CTA barrier did not deadlock");
    free(s);
    free(blk);
    kiln_compile_result_free(&r);
}

START_TEST(protocol_runs_on_a_barrier_model)
{
    simulate("128", "128", 8);
    simulate("64", "256", 16);
}
END_TEST

/* KilnAttentionParams.pingpong, .mbarrier (test_e2e_mbarrier_ptx.c) and .warp_specialize
 * (test_e2e_warp_spec_ptx.c): > 0 on, < 0 off, 0 the table's column (off in every row). */
START_TEST(runtime_passes_it_on)
{
    KilnAttentionParams p = {.dtype = KILN_F16, .batch = 1, .heads_q = 2, .heads_kv = 2, .seqlen_q = 4096,
                             .seqlen_k = 4096, .head_dim = 128, .block_m = 128, .block_n = 64, .num_warps = 8};
    static const int asked[] = {1, 0, -1};
    for (int i = 0; i < 3; i++) {
        p.schedule.pingpong = p.schedule.mbarrier = p.schedule.warp_specialize = asked[i];
        RtAttnVariant v;
        RtAttnRequest r;
        ck_assert_int_eq(rt_attn_fwd_request(90, &p, &v, &r), KILN_OK);
        ck_assert_int_eq(r.opts.schedule.pingpong, asked[i] > 0);
        ck_assert_int_eq(r.opts.schedule.mbarrier, asked[i] > 0);
        ck_assert_int_eq(r.opts.schedule.warp_specialize, asked[i] > 0);
        ck_assert_int_eq(r.opts.num_warps, 8);
        free(r.owned);
    }
    /* the table's own sm_90 rows: ping-pong off; warp specialisation (and the mbarrier
     * hand-off it implies) on the d 128 (with TMA, 128 x 128 tiles) and d 256 rows
     * (measured, jit/attention_tune.c) */
    p.block_m = p.block_n = p.num_warps = 0;
    p.schedule.pingpong = p.schedule.mbarrier = p.schedule.warp_specialize = 0;
    for (int i = 0; i < 3; i++)   /* strides TMA can map (the d 128 row's tma gives way otherwise) */
        p.k_stride[i] = p.v_stride[i] = (int64_t)256 << (8 * (2 - i));
    for (int d = 64; d <= 256; d *= 2) {
        p.head_dim = d;
        RtAttnVariant v;
        RtAttnRequest r;
        ck_assert_int_eq(rt_attn_fwd_request(90, &p, &v, &r), KILN_OK);
        ck_assert_int_eq(r.opts.schedule.pingpong, 0);
        ck_assert_int_eq(r.opts.schedule.mbarrier, d >= 128);
        ck_assert_int_eq(r.opts.schedule.warp_specialize, d >= 128);
        ck_assert_int_eq(r.opts.schedule.tma, d == 128);
        ck_assert_int_eq(r.opts.num_warps, d >= 128 ? 8 : 4);
        free(r.owned);
    }
}
END_TEST

/* ptxas: the 8-warp schedules the benchmark compares, no spills. */
START_TEST(ptxas_no_spills)
{
    static const char *const cfg[][3] = {
        {"64", "128", "64"}, {"128", "128", "64"}, {"64", "128", "128"}, {"128", "128", "128"}, {"256", "128", "64"},
    };
    for (size_t i = 0; i < sizeof cfg / sizeof cfg[0]; i++) {
        KilnCompileResult r = attention(cfg[i][0], cfg[i][1], cfg[i][2], 8, "sm_90a", 1, 0, KILN_EMIT_CUBIN);
        char what[64];
        snprintf(what, sizeof what, "d %s %sx%s/8", cfg[i][0], cfg[i][1], cfg[i][2]);
        pu_assert_no_spills(&r, what);
        kiln_compile_result_free(&r);
    }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("codegen_e2e_pingpong_ptx");
    TCase *tc = tcase_create("pingpong");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, turns_around_every_wgmma);
    tcase_add_test(tc, unchanged_where_it_does_not_apply);
    tcase_add_test(tc, decision_is_on_the_ir);
    tcase_add_test(tc, protocol_runs_on_a_barrier_model);
    tcase_add_test(tc, runtime_passes_it_on);
    suite_add_tcase(s, tc);
    TCase *pt = pu_ptxas_tcase(s, 600);
    tcase_add_test(pt, ptxas_no_spills);
    return s;
}

PU_MAIN(suite)
