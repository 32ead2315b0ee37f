/* test_e2e_stmatrix_ptx.c — the epilogue's accumulator -> SRAM stores on
 * sm_90: a convert_layout of a 16-bit value in an MMA C layout (acc.to(f16)
 * before a coalesced store) writes its registers with
 * stmatrix.sync.aligned.m8n8.x4 (cg_convert.c), one per warp m16 x n16, in
 * place of one st.shared.b32 per register pair. Counted through kiln_compile:
 *   - the shipped attention forward (f16, bf16; d 64/128/256 at the runtime's
 *     sm_90a schedules; the mma.sync path of --no-wgmma; plain sm_90):
 *     BLOCK_M x d / (8 x threads) stmatrix per thread, and st.shared.b32
 *     fewer by 4 per stmatrix than the same kernel on sm_80 (where nothing
 *     changes);
 *   - matmul_tc.tile's half-output kernels on wgmma and on mma.sync's 2 x 2
 *     warp grid: BLOCK_M x BLOCK_N / (8 x threads); none for an f32 output
 *     (the convert moves f32) nor on sm_80;
 *   - ptxas: the matmuls and the forward d 64 assemble with no spills, the
 *     forward d 128 / 256 spill no more than before (80 / 12 bytes).
 * The lane -> element rule itself is simulated on the CPU in
 * test_mma_layout.c; results are checked on the GPU by the forward and matmul
 * GPU tests. */
#include "compiler/support/support.h"
#include "tests/testutil.h"
#include "tests/ptx_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STSM "stmatrix.sync.aligned.m8n8.x4.shared.b16"

static int count(const KilnCompileResult *r, const char *what) { return pu_count_n(r->output, r->output_size, what); }

/* The forward (non-causal, launch-time hints) of `kernel` at d, BM x BN / warps. */
static KilnCompileResult fwd(const char *kernel, int d, int bm, int bn, int warps, const char *arch, int no_wgmma,
                             KilnEmit emit)
{
    char b[3][16];
    snprintf(b[0], 16, "%d", d), snprintf(b[1], 16, "%d", bm), snprintf(b[2], 16, "%d", bn);
    return pu_attention_fwd_kernel(kernel, b[0], b[1], b[2], warps, arch, 0, 0, no_wgmma, emit);
}

/* The runtime's sm_90a schedules (k_tune, long sequences): d -> BM, BN on 4 warps. */
static const int FWD[][3] = {{64, 64, 128}, {128, 128, 64}, {256, 64, 64}};

START_TEST(forward_epilogue_uses_stmatrix)
{
    static const char *const kernels[2] = {"attn_fwd_f16", "attn_fwd_bf16"};
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < 3; i++)
            for (int nw = 0; nw < 2; nw++) {
                int d = FWD[i][0], bm = FWD[i][1], bn = FWD[i][2];
                KilnCompileResult h = fwd(kernels[k], d, bm, bn, 4, "sm_90a", nw, KILN_EMIT_PTX);
                KilnCompileResult a = fwd(kernels[k], d, bm, bn, 4, "sm_80", 0, KILN_EMIT_PTX);
                int want = bm * d / (8 * 128);
                ck_assert_msg(count(&h, STSM) == want, "%s d %d%s: %d stmatrix, want %d", kernels[k], d,
                              nw ? " no-wgmma" : "", count(&h, STSM), want);
                ck_assert_int_eq(count(&a, "stmatrix"), 0);
                /* each stmatrix replaces the 4 st.shared.b32 of its register pairs */
                ck_assert_msg(count(&a, "st.shared.b32") - count(&h, "st.shared.b32") == 4 * want,
                              "%s d %d%s: st.shared.b32 %d on sm_80, %d on sm_90a", kernels[k], d,
                              nw ? " no-wgmma" : "", count(&a, "st.shared.b32"), count(&h, "st.shared.b32"));
                /* the read-back is unchanged: 16-byte vectors */
                ck_assert_int_eq(count(&a, "ld.shared.v4.b32"), count(&h, "ld.shared.v4.b32"));
                kiln_compile_result_free(&h);
                kiln_compile_result_free(&a);
            }
    /* plain sm_90 (no wgmma) has stmatrix too */
    KilnCompileResult r = fwd("attn_fwd_f16", 64, 64, 128, 4, "sm_90", 0, KILN_EMIT_PTX);
    ck_assert_int_eq(count(&r, STSM), 4);
    ck_assert_int_eq(count(&r, "wgmma"), 0);
    kiln_compile_result_free(&r);
}
END_TEST

static KilnCompileResult mm(const char *kernel, const PuSched *s, const char *arch, KilnEmit emit)
{
    KilnCompileResult r;
    pu_compile_matmul("tools/bench/matmul_tc.tile", kernel, s, 4096, 4096, arch, 0, emit, &r);
    return r;
}

/* wgmma grids, then mma.sync's 2 x 2 (BLOCK_K 32 keeps mma.sync on sm_90a) */
static const PuSched MM[] = {{128, 128, 64, 4, 3}, {128, 256, 64, 8, 3}, {64, 256, 64, 4, 3}, {128, 128, 32, 4, 3}};
enum { NMM = sizeof MM / sizeof MM[0] };

START_TEST(matmul_half_output_uses_stmatrix)
{
    static const char *const kernels[2] = {"matmul_tc_f16_f16", "matmul_tc_bf16_bf16"};
    for (int i = 0; i < NMM; i++)
        for (int k = 0; k < 2; k++) {
            const PuSched *s = &MM[i];
            KilnCompileResult h = mm(kernels[k], s, "sm_90a", KILN_EMIT_PTX);
            KilnCompileResult a = mm(kernels[k], s, "sm_80", KILN_EMIT_PTX);
            int want = s->bm * s->bn / (8 * 32 * s->warps);
            ck_assert_msg(count(&h, STSM) == want, "%s %dx%dx%d/%d: %d stmatrix, want %d", kernels[k], s->bm, s->bn,
                          s->bk, s->warps, count(&h, STSM), want);
            ck_assert_int_eq(count(&a, "stmatrix"), 0);
            kiln_compile_result_free(&h);
            kiln_compile_result_free(&a);
        }
    /* an f32 output converts f32 registers: per-register stores as before */
    KilnCompileResult r = mm("matmul_tc_f16", &MM[0], "sm_90a", KILN_EMIT_PTX);
    ck_assert_int_eq(count(&r, "stmatrix"), 0);
    kiln_compile_result_free(&r);
}
END_TEST

/* Bytes ptxas spilled, from the cubin compile's stats. */
static int spilled(const KilnCompileResult *r)
{
    const char *p = r->stats ? strstr(r->stats, "spills: ") : NULL;
    ck_assert_msg(p != NULL, "no ptxas report");
    return atoi(p + 8);
}

/* The forward d 128 and d 256 reach 255 registers and spilled 80 and 12 bytes
 * before this change (docs/performance.md, "Compile time"): they must not
 * spill more; d 64 and the matmuls not at all. */
START_TEST(ptxas_no_spills)
{
    static const int before[3] = {0, 80, 12};
    for (int i = 0; i < 3; i++) {
        KilnCompileResult r = fwd("attn_fwd_f16", FWD[i][0], FWD[i][1], FWD[i][2], 4, "sm_90a", 0, KILN_EMIT_CUBIN);
        ck_assert_msg(spilled(&r) <= before[i], "forward d %d: %s", FWD[i][0], r.stats);
        if (!before[i]) pu_assert_no_spills(&r, "forward d 64");
        kiln_compile_result_free(&r);
    }
    for (int i = 0; i < NMM; i++) {
        KilnCompileResult r = mm("matmul_tc_f16_f16", &MM[i], "sm_90a", KILN_EMIT_CUBIN);
        char what[32];
        snprintf(what, sizeof what, "matmul schedule %d", i);
        pu_assert_no_spills(&r, what);
        kiln_compile_result_free(&r);
    }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("codegen_e2e_stmatrix_ptx");
    TCase *tc = tcase_create("stmatrix");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, forward_epilogue_uses_stmatrix);
    tcase_add_test(tc, matmul_half_output_uses_stmatrix);
    suite_add_tcase(s, tc);
    TCase *pt = pu_ptxas_tcase(s, 600);
    tcase_add_test(pt, ptxas_no_spills);
    return s;
}

PU_MAIN(suite)
