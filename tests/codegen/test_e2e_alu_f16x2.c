/* test_e2e_alu_f16x2.c — casts f32 -> f16 / bf16 round two registers at a
 * time on sm_80+: cvt.rn.f16x2.f32 / cvt.rn.bf16x2.f32 (cg_elementwise.c,
 * llvm.nvvm.ff2f16x2.rn / ff2bf16x2.rn), not one cvt.rn.f16.f32 per value.
 *
 * Kernels: a dot whose f32 result is cast and fed to a second dot (the P
 * operand of attention: the packed halves go straight into mma.sync), a cast
 * stored to memory, a tile with one register per thread (no pair: the scalar
 * cvt stays), and the FlashAttention forward program (f16 and bf16), whose
 * P = p.to(DT) and O = o.to(DT) must have no scalar conversion left. Only the
 * PTX is checked (no GPU here); ptxas must accept the dot chain when present.
 */
#include "tests/testutil.h"
#include "tests/ptx_util.h"
#include "kiln.h"
#include "compiler/support/support.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *SRC =
    "fn chain(A, B, C, Y, const DT: dtype) {\n"
    "    let r = arange(64);\n"
    "    let a = load(A + r[:, None] * 64 + r[None, :]);\n"
    "    let b = load(B + r[:, None] * 64 + r[None, :]);\n"
    "    let c = load(C + r[:, None] * 64 + r[None, :]);\n"
    "    let p = dot(a, b);\n"
    "    store(Y + r[:, None] * 64 + r[None, :], dot(p.to(DT), c));\n"
    "}\n"
    "kernel chain_f16(A: *f16, B: *f16, C: *f16, Y: *f32) with (num_warps = 4) { chain(A, B, C, Y, f16); }\n"
    "kernel chain_bf16(A: *bf16, B: *bf16, C: *bf16, Y: *f32) with (num_warps = 4) {\n"
    "    chain(A, B, C, Y, bf16);\n"
    "}\n"
    "kernel cast_store(X: *f32, Y: *f16, Z: *bf16, n: i32, const BLOCK: i32 = 1024) with (num_warps = 4) {\n"
    "    let offs = program_id(0) * BLOCK + arange(BLOCK);\n"
    "    let m = offs < n;\n"
    "    let x = load(X + offs, mask = m, other = 0);\n"
    "    store(Y + offs, x.to(f16), mask = m);\n"
    "    store(Z + offs, (x * 3.0).to(bf16), mask = m);\n"
    "}\n";

/* `pairs` paired conversions at least, and no scalar one. */
static void expect_pairs(const KilnCompileResult *r, const char *what, bool bf, int pairs)
{
    const char *x2 = bf ? "cvt.rn.bf16x2.f32" : "cvt.rn.f16x2.f32";
    const char *x1 = bf ? "cvt.rn.bf16.f32" : "cvt.rn.f16.f32";
    int n2 = pu_count_n(r->output, r->output_size, x2), n1 = pu_count_n(r->output, r->output_size, x1);
    ck_assert_msg(n2 >= pairs && n1 == 0, "%s: %d %s (want >= %d) and %d %s (want 0):\n%.*s", what, n2, x2, pairs,
                  n1, x1, (int)r->output_size, r->output);
}

/* 64 x 64 P over 128 threads: 32 values per thread, 16 pairs. */
START_TEST(dot_operand_from_f32_is_paired)
{
    static const char *archs[] = {"sm_80", "sm_90a"};
    for (int a = 0; a < 2; a++)
        for (int bf = 0; bf < 2; bf++) {
            KilnCompileResult r =
                pu_compile("chain.tile", SRC, bf ? "chain_bf16" : "chain_f16", NULL, 0, archs[a], KILN_EMIT_PTX);
            ck_assert_int_gt(pu_count_n(r.output, r.output_size, a ? "wgmma.mma_async" : "mma.sync.aligned.m16n8k16"), 0);
            expect_pairs(&r, archs[a], bf, 16);
            kiln_compile_result_free(&r);
        }
}
END_TEST

/* 1024 values over 128 threads: 8 per thread, 4 pairs each for f16 and bf16. */
START_TEST(cast_before_store_is_paired)
{
    KilnCompileResult r = pu_compile("chain.tile", SRC, "cast_store", NULL, 0, "sm_80", KILN_EMIT_PTX);
    expect_pairs(&r, "f16 store", false, 4);
    expect_pairs(&r, "bf16 store", true, 4);
    kiln_compile_result_free(&r);
}
END_TEST

/* BLOCK 128 over 128 threads: one register each, nothing to pair. */
START_TEST(single_register_stays_scalar)
{
    KilnDefine d[] = {{"BLOCK", "128"}};
    KilnCompileResult r = pu_compile("chain.tile", SRC, "cast_store", d, 1, "sm_80", KILN_EMIT_PTX);
    ck_assert_int_eq(pu_count_n(r.output, r.output_size, "cvt.rn.f16.f32"), 1);
    ck_assert_int_eq(pu_count_n(r.output, r.output_size, "cvt.rn.bf16.f32"), 1);
    ck_assert_int_eq(pu_count_n(r.output, r.output_size, "x2.f32"), 0);
    kiln_compile_result_free(&r);
}
END_TEST

START_TEST(dot_chain_accepted_by_ptxas)
{
    for (int bf = 0; bf < 2; bf++) {
        KilnCompileResult r =
            pu_compile("chain.tile", SRC, bf ? "chain_bf16" : "chain_f16", NULL, 0, "sm_80", KILN_EMIT_CUBIN);
        ck_assert_int_gt((int)r.output_size, 4);
        ck_assert_msg(memcmp(r.output, "\177ELF", 4) == 0, "cubin is not ELF");
        kiln_compile_result_free(&r);
    }
}
END_TEST

/* attention: P is 128 x 64 over 256 threads (16 pairs per key loop, two
 * loops), O 128 x 64 (16 pairs): no scalar conversion anywhere. */
START_TEST(attention_p_and_o_are_paired)
{
    char *src = sup_read_file_text(tu_src_path("lang/lib/attention_fwd.tile"), NULL);
    ck_assert_ptr_nonnull(src);
    for (int bf = 0; bf < 2; bf++) {
        KilnDefine d[] = {{"HEAD_DIM", "64"}, {"BLOCK_M", "128"}, {"BLOCK_N", "64"}, {"CAUSAL", "true"}};
        KilnCompileResult r = pu_compile("lang/lib/attention_fwd.tile", src, bf ? "attn_fwd_bf16" : "attn_fwd_f16",
                                         d, 4, "sm_90a", KILN_EMIT_PTX);
        expect_pairs(&r, bf ? "attn_fwd_bf16" : "attn_fwd_f16", bf, 3 * 16);
        kiln_compile_result_free(&r);
    }
    free(src);
}
END_TEST

static Suite *alu_f16x2_suite(void)
{
    Suite *s = suite_create("codegen_e2e_alu_f16x2");
    TCase *tc = tcase_create("f16x2");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, dot_operand_from_f32_is_paired);
    tcase_add_test(tc, cast_before_store_is_paired);
    tcase_add_test(tc, single_register_stays_scalar);
    tcase_add_test(tc, attention_p_and_o_are_paired);
    suite_add_tcase(s, tc);
    TCase *pt = pu_ptxas_tcase(s, 300);
    tcase_add_test(pt, dot_chain_accepted_by_ptxas);
    return s;
}

PU_MAIN(alu_f16x2_suite)
