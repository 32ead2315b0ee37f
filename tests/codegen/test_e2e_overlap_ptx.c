/* test_e2e_overlap_ptx.c — FlashAttention-3's intra-warpgroup overlap
 * (pass_dot_rotate.c, pass_dot_overlap.c, cg_dot_wgmma.c) in the PTX of the
 * shipped attention forward compiled with --overlap at the runtime's
 * launch-time hints:
 *   - in each of the two key loops one wgmma group is committed without a
 *     wait (the next key block's Q K^T), and before the next wait come the
 *     softmax's ex2s and the P V dot's wgmmas: the softmax runs while the
 *     group is in flight;
 *   - the GPU IR says so: both key loops carry the scores (a fourth loop
 *     value) and have one dot marked wgmma.overlap, and the text compiles to
 *     the same PTX;
 *   - sm_80 and --no-wgmma with the option compile with no wgmma and no
 *     rotation (their PTX is the one without it);
 *   - KilnAttentionParams.overlap reaches the runtime's compile request,
 *     off in every table row;
 *   - ptxas assembles the schedules the benchmark compares without spills.
 * Whether it runs right (tests/gpu/test_e2e_gpu_attention.c with
 * KILN_TEST_OVERLAP) and faster (tools/bench/bench_attention.py .../ov) is
 * for the GPU; the rotated program's results on the CPU interpreter:
 * tests/attention/test_e2e_attn_overlap_interp.c. */
#include "compiler/codegen/codegen.h"
#include "compiler/support/diag.h"
#include "tests/testutil.h"
#include "tests/ptx_util.h"
#include "jit_internal.h"   /* rt_attn_fwd_request: what the runtime compiles */

#include <stdlib.h>
#include <string.h>

static KilnCompileResult attention(const char *d, const char *bm, const char *bn, int warps, const char *arch,
                                   bool overlap, bool no_wgmma, KilnEmit emit)
{
    return pu_attention_fwd(d, bm, bn, warps, arch, 0, overlap, no_wgmma, emit);
}

static int count(const KilnCompileResult *r, const char *what) { return pu_count_n(r->output, r->output_size, what); }

/* The commits not followed by a wait on the next line; for each, what lies
 * between it and the next wait must hold `between` (ex2: the softmax) and a
 * wgmma.mma_async (the dot whose wait retires it). */
static int in_flight_commits(const char *ptx)
{
    int n = 0;
    for (const char *c = strstr(ptx, "wgmma.commit_group.sync.aligned;"); c;
         c = strstr(c + 1, "wgmma.commit_group.sync.aligned;")) {
        const char *nl = strchr(c, '\n');
        while (nl && (nl[1] == '\t' || nl[1] == ' ')) nl++;   /* the next line's first non-blank */
        if (nl && strncmp(nl + 1, "wgmma.wait_group", 16) == 0) continue;
        n++;
        const char *wait = strstr(c, "wgmma.wait_group");
        ck_assert_ptr_nonnull(wait);
        char *span = strndup(c, (size_t)(wait - c));
        ck_assert_msg(strstr(span, "ex2.approx"), "no softmax (ex2) while the group is in flight");
        ck_assert_msg(strstr(span, "wgmma.mma_async"), "no dot between the in-flight commit and its wait");
        free(span);
    }
    return n;
}

START_TEST(one_group_in_flight_across_the_softmax)
{
    static const char *const cfg[][3] = {{"64", "128", "64"}, {"128", "128", "64"}, {"64", "128", "128"}};
    for (size_t i = 0; i < sizeof cfg / sizeof cfg[0]; i++) {
        KilnCompileResult r = attention(cfg[i][0], cfg[i][1], cfg[i][2], 8, "sm_90a", true, false, KILN_EMIT_PTX);
        ck_assert_int_eq(count(&r, "wgmma.commit_group"), count(&r, "wgmma.wait_group") + 2);
        ck_assert_int_eq(in_flight_commits(r.output), 2);
        kiln_compile_result_free(&r);
        KilnCompileResult off = attention(cfg[i][0], cfg[i][1], cfg[i][2], 8, "sm_90a", false, false, KILN_EMIT_PTX);
        ck_assert_int_eq(count(&off, "wgmma.commit_group"), count(&off, "wgmma.wait_group"));
        ck_assert_int_eq(in_flight_commits(off.output), 0);
        kiln_compile_result_free(&off);
    }
}
END_TEST

/* The decisions are on the GPU IR, and its text compiles to the same PTX. */
START_TEST(gpu_ir_holds_the_schedule)
{
    KilnCompileResult g = attention("128", "128", "64", 8, "sm_90a", true, false, KILN_EMIT_GPU_IR);
    ck_assert_int_eq(count(&g, "{wgmma.overlap = 1}"), 2);
    ck_assert_int_eq(count(&g, "iter_args(%"), 2);
    KilnCompileResult p = attention("128", "128", "64", 8, "sm_90a", true, false, KILN_EMIT_PTX);
    Arena a;
    arena_init(&a);
    Diag d;
    diag_init(&d, "<gpu-ir>", g.output);
    IrModule *m = ir_parse(&a, &d, "<gpu-ir>", g.output);
    ck_assert_msg(m && m->nfuncs == 1, "%s", d.out.data ? d.out.data : "");
    CgResult cr;
    memset(&cr, 0, sizeof cr);
    CgOptions o = {.target = tgt_parse("sm_90a"), .stage = CG_STAGE_PTX};
    ck_assert_msg(cg_compile_gpu_ir(m->funcs[0], NULL, &o, &cr, &d), "%s", d.out.data ? d.out.data : "");
    ck_assert_msg(cr.out.len == strlen(p.output) && !memcmp(cr.out.data, p.output, cr.out.len),
                  "the GPU IR text compiles to other PTX");
    sb_free(&cr.out);
    sb_free(&cr.dumps);
    sb_free(&cr.stats);
    diag_free(&d);
    arena_free(&a);
    kiln_compile_result_free(&g);
    kiln_compile_result_free(&p);
}
END_TEST

START_TEST(no_wgmma_no_change)
{
    static const char *const arch[] = {"sm_80", "sm_90a"};
    for (int i = 0; i < 2; i++) {
        KilnCompileResult on = attention("64", "128", "64", 8, arch[i], true, true, KILN_EMIT_PTX);
        KilnCompileResult off = attention("64", "128", "64", 8, arch[i], false, true, KILN_EMIT_PTX);
        ck_assert_int_eq(count(&on, "wgmma"), 0);
        ck_assert_int_gt(count(&on, "mma.sync"), 0);
        ck_assert_msg(on.output_size == off.output_size && !memcmp(on.output, off.output, on.output_size),
                      "%s --no-wgmma: --overlap changed the PTX", arch[i]);
        kiln_compile_result_free(&on);
        kiln_compile_result_free(&off);
    }
}
END_TEST

static bool has_define(const RtAttnRequest *r, const char *name, const char *value)
{
    for (int i = 0; i < r->opts.ndefines; i++)
        if (!strcmp(r->opts.defines[i].name, name)) return !strcmp(r->opts.defines[i].value, value);
    return false;
}

/* KilnAttentionParams.overlap: > 0 on, < 0 off, 0 the table's column (off in every row). */
START_TEST(runtime_passes_it_on)
{
    KilnAttentionParams p = {.dtype = KILN_F16, .batch = 1, .heads_q = 2, .heads_kv = 2, .seqlen_q = 4096,
                             .seqlen_k = 4096, .head_dim = 128, .block_m = 128, .block_n = 64, .num_warps = 8};
    static const int asked[] = {1, 0, -1};
    for (int i = 0; i < 3; i++) {
        p.schedule.overlap = asked[i];
        RtAttnVariant v;
        RtAttnRequest r;
        ck_assert_int_eq(rt_attn_fwd_request(90, &p, &v, &r), KILN_OK);
        ck_assert_int_eq(r.opts.schedule.overlap, asked[i] > 0);
        ck_assert(!has_define(&r, "OVERLAP", "true"));   /* the compiler rotates: the program is the same */
        free(r.owned);
    }
    p.block_m = p.block_n = p.num_warps = 0;
    p.schedule.overlap = 0;
    for (int d = 64; d <= 256; d *= 2) {
        p.head_dim = d;
        RtAttnVariant v;
        RtAttnRequest r;
        ck_assert_int_eq(rt_attn_fwd_request(90, &p, &v, &r), KILN_OK);
        /* the table's rows: d 128 (128 x 128, ws + tma) takes the overlap, the others not */
        ck_assert_int_eq(r.opts.schedule.overlap, d == 128);
        free(r.owned);
    }
}
END_TEST

/* ptxas: the 8-warp schedules the benchmark compares, no spills (registers 174 at d 64 and
 * 233 at d 128 on 128 x 64, 254 at d 64 on 128 x 128; against 128 / 177 / 175 without the
 * option). d 128 on 128 x 128 spills 20 bytes with it (255; 254 without): docs/tensor_cores.md 4c. */
START_TEST(ptxas_no_spills)
{
    static const char *const cfg[][3] = {{"64", "128", "64"}, {"128", "128", "64"}, {"64", "128", "128"}};
    for (size_t i = 0; i < sizeof cfg / sizeof cfg[0]; i++) {
        KilnCompileResult r = attention(cfg[i][0], cfg[i][1], cfg[i][2], 8, "sm_90a", true, false, KILN_EMIT_CUBIN);
        char what[64];
        snprintf(what, sizeof what, "d %s %sx%s/8", cfg[i][0], cfg[i][1], cfg[i][2]);
        pu_assert_no_spills(&r, what);
        kiln_compile_result_free(&r);
    }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("codegen_e2e_overlap_ptx");
    TCase *tc = tcase_create("overlap");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, one_group_in_flight_across_the_softmax);
    tcase_add_test(tc, gpu_ir_holds_the_schedule);
    tcase_add_test(tc, no_wgmma_no_change);
    tcase_add_test(tc, runtime_passes_it_on);
    tcase_add_test(tc, ptxas_no_spills);
    suite_add_tcase(s, tc);
    return s;
}

TU_MAIN(suite)
