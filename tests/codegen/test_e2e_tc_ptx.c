/* test_e2e_tc_ptx.c — the tensor-core path through the whole compiler
 * (kiln_compile), for sm_80 and sm_90a, at several schedules:
 *   - tools/bench/matmul_tc.tile (row-major, N and K constants) with its
 *     pointers hinted 16-byte aligned (what the runtime's launch-time
 *     specialisation gives aligned buffers): the PTX has (on sm_80, and on
 *     sm_90a where the tile does not go to wgmma: on_wgmma) mma.sync (at least
 *     the per-iteration count (BM/16wm)(BN/8wn)(BK/16), a multiple of it when
 *     LLVM unrolls), ldmatrix, and with num_stages = S >= 2 exactly S
 *     cp.async.commit_group, cp.async.wait_group S-2 in the loop and 0 after
 *     it, and S times the copies of one issue (none with S = 1); on wgmma
 *     with S >= 3 the copies run S - 2 ahead instead (wgmma.pending): S - 1,
 *     S - 3 and S - 1 times;
 *   - examples/matmul.tile (runtime strides: contiguity along K is unknown,
 *     so no 16-byte copies) still uses mma.sync and ldmatrix, no cp.async;
 *   - every PTX is accepted by ptxas (skipped without ptxas);
 *   - --stats lists the pipeline stage buffers and the total;
 *   - in the pipelined loop the next copies are issued before the compute
 *     (the cp.async of the body come before its first ldmatrix), and the
 *     operands are loaded one k32 step at a time (an mma.sync comes before
 *     the last ldmatrix of the body, so no warp holds a whole operand);
 *   - the copies of an affine pointer tile walk from one pointer (cg_affine.c):
 *     in the pipelined loop every copy but the first of each tile is addressed
 *     by an opaque `add.s64` from the one before, SRAM slots as [reg+imm];
 *     a gathered tile (rows from a loaded index) keeps a pointer per copy;
 *   - a loop's first copies go out where what they need is known: attention's
 *     K/V prologue precedes its Q load (and --stats shows the stage buffers live
 *     from there); a store before the loop keeps them below it;
 *   - barriers only at SRAM hazards: a kernel's first cross-warp reduction
 *     needs one bar.sync (between its writes and reads), the same reduction
 *     in a loop two (the previous iteration still reads the buffer).
 */
#include "tests/testutil.h"
#include "tests/ptx_util.h"
#include "kiln.h"
#include "compiler/support/support.h"
#include "compiler/gpuir/gpuir.h"

#include <string.h>
#include <unistd.h>

typedef PuSched Sched;

static void compile(const char *file, const char *kernel, const Sched *s, int N, int K, const char *arch,
                    KilnEmit emit, KilnCompileResult *r)
{
    pu_compile_matmul(file, kernel, s, N, K, arch, 0, emit, r);
}

static const Sched SCHEDS[] = {
    {64, 64, 32, 4, 1}, {64, 64, 32, 4, 2}, {64, 64, 32, 4, 3}, {128, 128, 32, 4, 4},
    {128, 64, 64, 8, 3}, {32, 32, 16, 1, 2}, {64, 128, 32, 4, 3},
};
enum { NSCHED = sizeof SCHEDS / sizeof SCHEDS[0] };

/* The warp split pass_accelerate_dot.c picks for a lone (not chained) dot. */
static void warps_of(const Sched *s, int *wm, int *wn)
{
    ck_assert(gp_mma_choose_warps(s->bm, s->bn, s->bk, s->warps, false, wm, wn));
}

/* sm_90a schedules that go to wgmma (test_e2e_wgmma_matmul_ptx.c counts them):
 * one m64 block per 4 warps and k16 step, no mma.sync, no ldmatrix. */
static bool on_wgmma(const char *ptx, const char *arch, const Sched *s)
{
    if (strcmp(arch, "sm_90a") || !gp_wgmma_grid_ok(s->bm, s->bn, s->bk, s->warps)) return false;
    ck_assert_int_eq(pu_count(ptx, "mma.sync"), 0);
    ck_assert_int_eq(pu_count(ptx, "ldmatrix"), 0);
    ck_assert_int_gt(pu_count(ptx, "wgmma.mma_async"), 0);
    return true;
}

START_TEST(matmul_tc_pipelined)
{
    const char *archs[2] = {"sm_80", "sm_90a"};
    for (int a = 0; a < 2; a++)
        for (int i = 0; i < NSCHED; i++) {
            const Sched *s = &SCHEDS[i];
            KilnCompileResult r;
            compile("tools/bench/matmul_tc.tile", "matmul_tc_f16", s, 512, 1024, archs[a], KILN_EMIT_PTX, &r);
            const char *ptx = r.output;
            int wm, wn;
            warps_of(s, &wm, &wn);
            int per_iter = (s->bm / (16 * wm)) * (s->bn / (8 * wn)) * (s->bk / 16);
            bool wg = on_wgmma(ptx, archs[a], s);
            /* groups issued ahead: S - 1, or S - 2 when the wgmma group stays
             * in flight across iterations (wgmma.pending, S >= 3) */
            int ahead = wg && s->stages >= 3 ? s->stages - 2 : s->stages - 1;
            if (!wg) {
                int mma = pu_count(ptx, "mma.sync.aligned.m16n8k16");
                ck_assert_msg(mma >= per_iter && mma % per_iter == 0,
                              "%s sched %d: %d mma.sync, want a multiple of %d", archs[a], i, mma, per_iter);
                ck_assert_int_gt(pu_count(ptx, "ldmatrix.sync.aligned"), 0);
            }
            int copies = s->bm * s->bk / (8 * 32 * s->warps) + s->bk * s->bn / (8 * 32 * s->warps);
            int cpa = pu_count(ptx, "cp.async.cg.shared.global"), commits = pu_count(ptx, "cp.async.commit_group");
            if (s->stages == 1) {
                ck_assert_int_eq(cpa, 0);
                ck_assert_int_eq(commits, 0);
            } else {
                char want[48];
                snprintf(want, sizeof want, "cp.async.wait_group %d;", ahead - 1);
                ck_assert_msg(cpa >= (ahead + 1) * copies && cpa % copies == 0,
                              "%s sched %d: %d cp.async, want a multiple of %d and >= %d", archs[a], i, cpa, copies,
                              (ahead + 1) * copies);
                ck_assert_msg(commits >= ahead + 1, "%d commit groups for %d stages", commits, s->stages);
                ck_assert_ptr_nonnull(strstr(ptx, want));
                ck_assert_ptr_nonnull(strstr(ptx, "cp.async.wait_group 0;"));
            }
            kiln_compile_result_free(&r);
        }
}
END_TEST

START_TEST(matmul_tc_bf16_and_ragged_k)
{
    /* K = 72: three k-steps of 32 with the last one masked (zero-filled copies). */
    Sched s = {64, 64, 32, 4, 3};
    KilnCompileResult r;
    compile("tools/bench/matmul_tc.tile", "matmul_tc_bf16", &s, 136, 72, "sm_80", KILN_EMIT_PTX, &r);
    ck_assert_ptr_nonnull(strstr(r.output, "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"));
    ck_assert_int_gt(pu_count(r.output, "cp.async.cg.shared.global"), 0);
    kiln_compile_result_free(&r);
}
END_TEST

START_TEST(examples_matmul_tensor_cores)
{
    const char *archs[2] = {"sm_80", "sm_90a"};
    for (int a = 0; a < 2; a++)
        for (int i = 0; i < NSCHED; i++) {
            KilnCompileResult r;
            compile("examples/matmul.tile", "matmul", &SCHEDS[i], 0, 0, archs[a], KILN_EMIT_PTX, &r);
            if (!on_wgmma(r.output, archs[a], &SCHEDS[i])) {
                ck_assert_int_gt(pu_count(r.output, "mma.sync.aligned.m16n8k16"), 0);
                ck_assert_int_gt(pu_count(r.output, "ldmatrix.sync.aligned"), 0);
            }
            ck_assert_int_eq(pu_count(r.output, "cp.async.cg"), 0);
            kiln_compile_result_free(&r);
        }
}
END_TEST

/* ptxas accepts the kernels of the three tests above (a test of its own,
 * tagged ptxas: skipped, not passed, where there is no ptxas). */
START_TEST(tc_kernels_accepted_by_ptxas)
{
    const char *archs[2] = {"sm_80", "sm_90a"};
    KilnCompileResult r;
    for (int a = 0; a < 2; a++)
        for (int i = 0; i < NSCHED; i++) {
            compile("tools/bench/matmul_tc.tile", "matmul_tc_f16", &SCHEDS[i], 512, 1024, archs[a], KILN_EMIT_CUBIN,
                    &r);
            ck_assert_int_gt((int)r.output_size, 0);
            kiln_compile_result_free(&r);
            compile("examples/matmul.tile", "matmul", &SCHEDS[i], 0, 0, archs[a], KILN_EMIT_CUBIN, &r);
            ck_assert_int_gt((int)r.output_size, 0);
            kiln_compile_result_free(&r);
        }
    Sched s = {64, 64, 32, 4, 3};
    compile("tools/bench/matmul_tc.tile", "matmul_tc_bf16", &s, 136, 72, "sm_80", KILN_EMIT_CUBIN, &r);
    ck_assert_int_gt((int)r.output_size, 0);
    kiln_compile_result_free(&r);
}
END_TEST

START_TEST(stats_list_buffers)
{
    Sched s = {128, 128, 32, 4, 3};
    KilnCompileResult r;
    compile("tools/bench/matmul_tc.tile", "matmul_tc_f16", &s, 512, 1024, "sm_90a", KILN_EMIT_PTX, &r);
    ck_assert_ptr_nonnull(r.stats);
    ck_assert_msg(pu_count(r.stats, "pipeline stages") == 2, "stats:\n%s", r.stats);
    /* two operands x 3 stages x 8 KB */
    ck_assert_msg(strstr(r.stats, "24576 bytes"), "stats:\n%s", r.stats);
    ck_assert_int_ge(r.kernels[0].smem_bytes, 2 * 24576);
    kiln_compile_result_free(&r);
}
END_TEST

static int barriers_of(const char *name, const char *src)
{
    KilnCompileOptions o;
    memset(&o, 0, sizeof o);
    o.emit = KILN_EMIT_PTX;
    o.arch = "sm_80";
    KilnCompileResult r;
    KilnStatus st = kiln_compile(name, src, &o, &r);
    ck_assert_msg(st == KILN_OK, "%s: %s", name, r.diagnostics ? r.diagnostics : "");
    int n = pu_count(r.output, "bar.sync");
    kiln_compile_result_free(&r);
    return n;
}

/* The loop body of the pipelined PTX: from the wait_group S-2 to the next label. */
static const char *loop_body(const char *ptx, int stages, const char **end)
{
    char want[48];
    snprintf(want, sizeof want, "cp.async.wait_group %d;", stages - 2);
    const char *b = strstr(ptx, want);
    ck_assert_ptr_nonnull(b);
    *end = strstr(b, "$L__BB");
    ck_assert_ptr_nonnull(*end);
    return b;
}

static const char *last_in(const char *b, const char *e, const char *what)
{
    const char *last = NULL;
    for (const char *p = b; (p = strstr(p, what)) && p < e; p += strlen(what)) last = p;
    return last;
}

START_TEST(issue_first_operands_per_k_step)
{
    const Sched cases[] = {{64, 64, 64, 4, 2}, {128, 128, 64, 8, 3}};
    for (int i = 0; i < 2; i++) {
        KilnCompileResult r;
        compile("tools/bench/matmul_tc.tile", "matmul_tc_f16", &cases[i], 512, 1024, "sm_80", KILN_EMIT_PTX, &r);
        const char *e, *b = loop_body(r.output, cases[i].stages, &e);
        const char *cp = strstr(b, "cp.async.cg.shared.global"), *ld = strstr(b, "ldmatrix");
        const char *mma = strstr(b, "mma.sync"), *last_ld = last_in(b, e, "ldmatrix");
        ck_assert_msg(cp && ld && mma && last_ld && cp < e && ld < e && mma < e, "case %d: loop body incomplete", i);
        ck_assert_msg(cp < ld, "case %d: the next copies must be issued before this iteration's ldmatrix", i);
        ck_assert_msg(mma < last_ld, "case %d: all ldmatrix before the first mma (operands not loaded per k step)", i);
        kiln_compile_result_free(&r);
    }
}
END_TEST

/* Inline-asm pointer steps (cg_affine.c's walk) in [b, e). */
static int walk_steps(const char *b, const char *e)
{
    int n = 0;
    for (const char *p = b; (p = strstr(p, "add.s64 %rd")) && p < e; p++) {
        const char *q = p;          /* the walk's add is inline asm: its line follows the marker */
        while (q > b && q[-1] != '\n') q--;
        n += q - b > 20 && strncmp(q - 20, "// begin inline asm\n", 20) == 0;
    }
    return n;
}

/* PTX for sm_80 of a one-kernel source with these launch hints (must compile). */
static void sm80_ptx_hinted(const char *file, const char *src, const KilnParamHint *h, int nh, KilnCompileResult *r)
{
    KilnCompileOptions o = {.emit = KILN_EMIT_PTX, .arch = "sm_80", .hints = h, .nhints = nh};
    ck_assert_msg(kiln_compile(file, src, &o, r) == KILN_OK, "%s", r->diagnostics ? r->diagnostics : "");
}

START_TEST(copies_walk_from_one_pointer)
{
    const Sched s = {128, 128, 32, 4, 3};
    KilnCompileResult r;
    compile("tools/bench/matmul_tc.tile", "matmul_tc_f16", &s, 1024, 1024, "sm_80", KILN_EMIT_PTX, &r);
    const char *e, *b = loop_body(r.output, s.stages, &e);
    int copies = pu_count_n(b, (size_t)(e - b), "cp.async.cg.shared.global");
    /* A 128x32 and a 32x128 f16 tile: 4 + 4 copies of 16 bytes per thread. */
    ck_assert_int_eq(copies, 8);
    ck_assert_int_eq(walk_steps(b, e), copies - 2);
    ck_assert_int_eq(pu_count_n(b, (size_t)(e - b), "+0], ["), 2);   /* one SRAM register per tile */
    kiln_compile_result_free(&r);

    const char *gather =
        "kernel gather_mm(A: *f16, B: *f16, C: *f32, rows: *i32) with (num_warps = 4, num_stages = 2) {\n"
        "    let r = load(rows + arange(64));\n"
        "    let offs_k = arange(32);\n"
        "    var acc = zeros([64, 64], f32);\n"
        "    for k0 in range(0, 256, 32) {\n"
        "        let a = load(A + r.to(i64)[:, None] * 256 + (k0 + offs_k)[None, :]);\n"
        "        let b = load(B + (k0 + offs_k).to(i64)[:, None] * 64 + arange(64)[None, :]);\n"
        "        acc = dot(a, b, acc);\n"
        "    }\n"
        "    store(C + arange(64)[:, None] * 64 + arange(64)[None, :], acc);\n"
        "}\n";
    KilnParamHint h[3] = {{"A", 16, 0}, {"B", 16, 0}, {"C", 16, 0}};
    sm80_ptx_hinted("gather.tile", gather, h, 3, &r);
    b = loop_body(r.output, 2, &e);
    /* A: 64x32 (2 copies per thread, a pointer each); B: 32x64, affine (2 copies, 1 step). */
    ck_assert_int_eq(pu_count_n(b, (size_t)(e - b), "cp.async.cg.shared.global"), 4);
    ck_assert_int_eq(walk_steps(b, e), 1);
    kiln_compile_result_free(&r);
}
END_TEST

/* Offset in `ptx` of the first `what`, or -1. */
static long first_at(const char *ptx, const char *what)
{
    const char *p = strstr(ptx, what);
    return p ? p - ptx : -1;
}

START_TEST(prologue_before_independent_loads)
{
    char *src = sup_read_file_text(tu_src_path("lang/lib/attention_fwd.tile"), NULL);
    ck_assert_ptr_nonnull(src);
    KilnDefine d[5] = {{"HEAD_DIM", "64"}, {"BLOCK_M", "64"}, {"BLOCK_N", "64"}, {"CAUSAL", "false"},
                       {"PLAIN_SCORES", "true"}};
    KilnParamHint h[PU_ATTN_NHINTS];     /* as the runtime specialises for aligned, dense tensors */
    KilnCompileOptions o;
    pu_attention_options(&o, d, 5, "sm_80", 4, 2, KILN_EMIT_PTX, h);
    KilnCompileResult r;
    ck_assert_msg(kiln_compile("attention_fwd.tile", src, &o, &r) == KILN_OK, "%s", r.diagnostics ? r.diagnostics : "");
    long cp = first_at(r.output, "cp.async.cg.shared.global"), q = first_at(r.output, "ld.global");
    ck_assert_msg(cp >= 0 && q >= 0 && cp < q, "the K/V prologue (at %ld) must precede the Q load (at %ld)", cp, q);
    kiln_compile_result_free(&r);
    free(src);

    const char *stored =
        "kernel st_mm(A: *f16, B: *f16, C: *f32, D: *f32) with (num_warps = 4, num_stages = 2) {\n"
        "    store(D + arange(64), zeros([64], f32) + 1.0);\n"
        "    let offs_k = arange(32);\n"
        "    var acc = zeros([64, 64], f32);\n"
        "    for k0 in range(0, 256, 32) {\n"
        "        let a = load(A + arange(64).to(i64)[:, None] * 256 + (k0 + offs_k)[None, :]);\n"
        "        let b = load(B + (k0 + offs_k).to(i64)[:, None] * 64 + arange(64)[None, :]);\n"
        "        acc = dot(a, b, acc);\n"
        "    }\n"
        "    store(C + arange(64)[:, None] * 64 + arange(64)[None, :], acc);\n"
        "}\n";
    KilnParamHint h2[4] = {{"A", 16, 0}, {"B", 16, 0}, {"C", 16, 0}, {"D", 16, 0}};
    sm80_ptx_hinted("stored.tile", stored, h2, 4, &r);
    cp = first_at(r.output, "cp.async.cg.shared.global");
    long st = first_at(r.output, "st.global");
    ck_assert_msg(cp >= 0 && st >= 0 && st < cp, "copies (at %ld) moved above the store (at %ld)", cp, st);
    kiln_compile_result_free(&r);
}
END_TEST

START_TEST(barriers_only_at_hazards)
{
    const char *once = "kernel one(X: *f32, Y: *f32) with (num_warps = 4) {\n"
                       "    let v = load(X + arange(512));\n"
                       "    store(Y, sum(v, axis = 0));\n"
                       "}\n";
    const char *loop = "kernel loop(X: *f32, Y: *f32, n: i32) with (num_warps = 4) {\n"
                       "    var acc = 0.0;\n"
                       "    for i in range(0, n, 1) {\n"
                       "        let v = load(X + i * 512 + arange(512));\n"
                       "        acc = acc + sum(v, axis = 0);\n"
                       "    }\n"
                       "    store(Y, acc);\n"
                       "}\n";
    ck_assert_int_eq(barriers_of("once.tile", once), 1);
    ck_assert_int_eq(barriers_of("loop.tile", loop), 2);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("tc_ptx");
    TCase *tc = tcase_create("ptx");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, matmul_tc_pipelined);
    tcase_add_test(tc, matmul_tc_bf16_and_ragged_k);
    tcase_add_test(tc, examples_matmul_tensor_cores);
    tcase_add_test(tc, stats_list_buffers);
    tcase_add_test(tc, barriers_only_at_hazards);
    tcase_add_test(tc, issue_first_operands_per_k_step);
    tcase_add_test(tc, copies_walk_from_one_pointer);
    tcase_add_test(tc, prologue_before_independent_loads);
    suite_add_tcase(s, tc);
    tcase_add_test(pu_ptxas_tcase(s, 600), tc_kernels_accepted_by_ptxas);
    return s;
}

PU_MAIN(suite)
