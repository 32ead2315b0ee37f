/* test_e2e_wgmma_ptx.c — which dots lower to wgmma on sm_90a, and what the PTX
 * then holds (cg_dot_wgmma.c): the shipped attention program, one wgmma per
 * (m64 block, k16 step) per warpgroup, the proxy fences, and ptxas's word
 * when it is there. The numbers are checked on the GPU (tests/gpu). */
#include "compiler/support/support.h"
#include "tests/testutil.h"
#include "tests/ptx_util.h"

#include <stdlib.h>
#include <string.h>

static char *attn_src;

/* attention_fwd.tile's `kernel` at head dim d, tiles bm x bn, with the runtime's hints. */
static KilnCompileResult compile_attention(const char *kernel, const char *d, const char *bm, const char *bn,
                                           const char *causal, int warps, const char *arch, int no_wgmma,
                                           KilnEmit emit)
{
    if (!attn_src) attn_src = sup_read_file_text(tu_src_path("lang/lib/attention_fwd.tile"), NULL);
    ck_assert_ptr_nonnull(attn_src);
    KilnDefine defs[] = {{"HEAD_DIM", d}, {"BLOCK_M", bm}, {"BLOCK_N", bn}, {"CAUSAL", causal},
                         {"PLAIN_SCORES", "true"}};
    KilnParamHint h[PU_ATTN_NHINTS];
    KilnCompileOptions o;
    pu_attention_options(&o, defs, 5, arch, warps, 2, emit, h);
    o.kernel = kernel;
    o.schedule.no_wgmma = no_wgmma;
    KilnCompileResult r;
    KilnStatus st = kiln_compile("lang/lib/attention_fwd.tile", attn_src, &o, &r);
    ck_assert_msg(st == KILN_OK, "d %s %sx%s %s: %s", d, bm, bn, arch, r.diagnostics ? r.diagnostics : "");
    return r;
}

static KilnCompileResult attention(const char *d, const char *bm, const char *bn, const char *causal, int warps,
                                   const char *arch, int no_wgmma)
{
    return compile_attention("attn_fwd_f16", d, bm, bn, causal, warps, arch, no_wgmma, KILN_EMIT_PTX);
}

static int count(const KilnCompileResult *r, const char *what) { return pu_count_n(r->output, r->output_size, what); }

START_TEST(attention_d128_uses_wgmma)
{
    KilnCompileResult r = attention("128", "128", "64", "false", 4, "sm_90a", 0);
    /* two key loops (whole blocks, then the masked ones), each: S = Q K^T as
     * 2 m64 blocks x 8 k16 steps with A and B from SRAM, O += P V as 2 x 4
     * with P in registers */
    ck_assert_int_eq(count(&r, "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16"), 2 * 2 * 8);
    ck_assert_int_eq(count(&r, "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16"), 2 * 2 * 4);
    ck_assert_int_eq(count(&r, "mma.sync.aligned"), 0);
    ck_assert_int_eq(count(&r, "ldmatrix"), 0);
    /* per dot: one fence before, one commit and wait after */
    ck_assert_int_eq(count(&r, "wgmma.fence.sync.aligned"), 4);
    ck_assert_int_eq(count(&r, "wgmma.wait_group.sync.aligned 0"), 4);
    /* V is N-major (trans-b = 1), K is K-major: the S instructions end in "0, 0;" */
    ck_assert_int_gt(count(&r, "1, 1, 0, 0;"), 0);
    /* cp.async and st.shared writes reach wgmma's async proxy: a fence per
     * key loop iteration and one after the Q staging store */
    ck_assert_int_ge(count(&r, "fence.proxy.async.shared::cta"), 3);
    ck_assert_ptr_nonnull(strstr(r.output, ".extern .shared .align 1024"));
    kiln_compile_result_free(&r);
}
END_TEST

START_TEST(wgmma_only_where_it_applies)
{
    /* sm_80 and sm_90 (no 'a'): never */
    static const char *archs[] = {"sm_80", "sm_90"};
    for (int i = 0; i < 2; i++) {
        KilnCompileResult r = attention("128", "64", "64", "true", 4, archs[i], 0);
        ck_assert_int_eq(count(&r, "wgmma"), 0);
        ck_assert_int_gt(count(&r, "mma.sync.aligned.m16n8k16"), 0);
        ck_assert_int_eq(count(&r, "fence.proxy.async"), 0);
        kiln_compile_result_free(&r);
    }
    /* asked not to */
    KilnCompileResult r = attention("64", "128", "64", "false", 4, "sm_90a", 1);
    ck_assert_int_eq(count(&r, "wgmma"), 0);
    ck_assert_int_gt(count(&r, "mma.sync.aligned.m16n8k16"), 0);
    kiln_compile_result_free(&r);
    /* head dim 32: 64-byte rows are no 128-byte swizzle atoms */
    r = attention("32", "64", "64", "false", 4, "sm_90a", 0);
    ck_assert_int_eq(count(&r, "wgmma.mma_async"), 0);
    kiln_compile_result_free(&r);
    /* 2 warps: no warpgroup */
    r = attention("64", "64", "64", "false", 2, "sm_90a", 0);
    ck_assert_int_eq(count(&r, "wgmma.mma_async"), 0);
    kiln_compile_result_free(&r);
}
END_TEST

/* ptxas accepts every head dim's wgmma kernel (bf16 and causal too). */
START_TEST(ptxas_accepts_wgmma)
{
    static const char *const cfg[][5] = {
        {"64", "64", "64", "true", "4"}, {"128", "128", "64", "false", "4"}, {"128", "128", "128", "false", "8"},
        {"256", "64", "32", "true", "4"}, {"96", "64", "64", "false", "4"},
    };
    for (size_t i = 0; i < sizeof cfg / sizeof cfg[0]; i++) {
        KilnCompileResult r = compile_attention(i % 2 ? "attn_fwd_bf16" : "attn_fwd_f16", cfg[i][0], cfg[i][1],
                                                cfg[i][2], cfg[i][3], atoi(cfg[i][4]), "sm_90a", 0, KILN_EMIT_CUBIN);
        ck_assert_int_gt((int)r.output_size, 0);
        kiln_compile_result_free(&r);
    }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("codegen_e2e_wgmma_ptx");
    TCase *tc = tcase_create("wgmma");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, attention_d128_uses_wgmma);
    tcase_add_test(tc, wgmma_only_where_it_applies);
    suite_add_tcase(s, tc);
    TCase *pt = pu_ptxas_tcase(s, 300);
    tcase_add_test(pt, ptxas_accepts_wgmma);
    return s;
}

PU_MAIN(suite)
