/* test_e2e_alu_fma.c — f32 multiply-add contracts to fma.rn.f32 in the PTX
 * (cg_elementwise.c sets LLVM's `contract` flag on f32/f64 fmul/fadd/fsub, as
 * Triton's default enable_fp_fusion does), while f16 arithmetic keeps its
 * rounding to f16 between the multiply and the add (no fma of any width).
 *
 * Kernels: y = a * b + c and y = a * b - c on f32 tiles (ragged: masked), the
 * same on f16 tiles, and the FlashAttention forward program, whose score
 * scaling s * qk_scale - m must become one fma.rn.f32 per score in the
 * unmasked key loop (BLOCK_M * BLOCK_N / threads of them; the masked loop
 * selects -inf between the multiply and the subtraction, so it cannot fuse). Only the PTX is checked
 * (no GPU here); ptxas must accept the f32 kernel when it is installed.
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
    "fn madd(A, B, C, Y, n, const BLOCK: i32, const NEG: bool) {\n"
    "    let offs = program_id(0) * BLOCK + arange(BLOCK);\n"
    "    let m = offs < n;\n"
    "    let a = load(A + offs, mask = m, other = 0);\n"
    "    let b = load(B + offs, mask = m, other = 0);\n"
    "    let c = load(C + offs, mask = m, other = 0);\n"
    "    store(Y + offs, NEG ? a * b - c : a * b + c, mask = m);\n"
    "}\n"
    "kernel madd_f32(A: *f32, B: *f32, C: *f32, Y: *f32, n: i32, const BLOCK: i32 = 512,\n"
    "                const NEG: bool = false) {\n"
    "    madd(A, B, C, Y, n, BLOCK, NEG);\n"
    "}\n"
    "kernel madd_f16(A: *f16, B: *f16, C: *f16, Y: *f16, n: i32, const BLOCK: i32 = 512,\n"
    "                const NEG: bool = false) {\n"
    "    madd(A, B, C, Y, n, BLOCK, NEG);\n"
    "}\n";

/* f32: every multiply-add of the kernel is one fma.rn.f32; no mul/add/sub is
 * left (the address arithmetic is integer). */
static void check_f32(const char *arch, bool neg)
{
    KilnDefine d[] = {{"NEG", neg ? "true" : "false"}};
    KilnCompileResult r = pu_compile("madd.tile", SRC, "madd_f32", d, 1, arch, KILN_EMIT_PTX);
    int fma = pu_count_n(r.output, r.output_size, "fma.rn.f32");
    ck_assert_msg(fma >= 1, "%s NEG=%d: no fma.rn.f32 in the PTX of a * b %c c:\n%.*s", arch, neg, neg ? '-' : '+',
                  (int)r.output_size, r.output);
    ck_assert_int_eq(pu_count_n(r.output, r.output_size, "mul.rn.f32"), 0);
    ck_assert_int_eq(pu_count_n(r.output, r.output_size, "add.rn.f32"), 0);
    ck_assert_int_eq(pu_count_n(r.output, r.output_size, "sub.rn.f32"), 0);
    kiln_compile_result_free(&r);
}

START_TEST(f32_mul_add_is_fma)
{
    check_f32("sm_80", false);
    check_f32("sm_90a", false);
}
END_TEST

START_TEST(f32_mul_sub_is_fma)
{
    check_f32("sm_80", true);
    check_f32("sm_90a", true);
}
END_TEST

/* f16: a * b is rounded to f16 before + c (the interpreter's semantics), so
 * there must be no fma of any width, and the multiply must still be there. */
START_TEST(f16_mul_add_keeps_its_rounding)
{
    for (int neg = 0; neg < 2; neg++) {
        KilnDefine d[] = {{"NEG", neg ? "true" : "false"}};
        KilnCompileResult r = pu_compile("madd.tile", SRC, "madd_f16", d, 1, "sm_80", KILN_EMIT_PTX);
        ck_assert_msg(pu_count_n(r.output, r.output_size, "fma.rn") == 0,
                      "NEG=%d: f16 a * b %c c fused (skips the rounding to f16):\n%.*s", neg, neg ? '-' : '+',
                      (int)r.output_size, r.output);
        ck_assert_int_gt(pu_count_n(r.output, r.output_size, "mul.rn.f16") +
                             pu_count_n(r.output, r.output_size, "mul.rn.f32"),
                         0);
        kiln_compile_result_free(&r);
    }
}
END_TEST

START_TEST(f32_fma_accepted_by_ptxas)
{
    KilnDefine d[] = {{"NEG", "true"}};
    KilnCompileResult r = pu_compile("madd.tile", SRC, "madd_f32", d, 1, "sm_90a", KILN_EMIT_CUBIN);
    ck_assert_int_gt((int)r.output_size, 4);
    ck_assert_msg(memcmp(r.output, "\177ELF", 4) == 0, "cubin is not ELF");
    kiln_compile_result_free(&r);
}
END_TEST

/* The attention forward: 128 x 64 scores over 256 threads = 32 per thread;
 * in the unmasked key loop each one's exp2 argument s * qk_scale - m is one
 * fma (before: none in the whole kernel). */
START_TEST(attention_scores_use_fma)
{
    char *src = sup_read_file_text(tu_src_path("lang/lib/attention_fwd.tile"), NULL);
    ck_assert_ptr_nonnull(src);
    static const char *dims[] = {"64", "128"};
    for (int i = 0; i < 2; i++) {
        KilnDefine d[] = {{"HEAD_DIM", dims[i]}, {"BLOCK_M", "128"}, {"BLOCK_N", "64"}, {"CAUSAL", "false"}};
        KilnCompileResult r = pu_compile("lang/lib/attention_fwd.tile", src, "attn_fwd_f16", d, 4, "sm_90a",
                                         KILN_EMIT_PTX);
        int fma = pu_count_n(r.output, r.output_size, "fma.rn.f32");
        ck_assert_msg(fma >= 32, "HEAD_DIM %s: %d fma.rn.f32 in the attention PTX, want >= 32 (one per score)",
                      dims[i], fma);
        kiln_compile_result_free(&r);
    }
    free(src);
}
END_TEST

static Suite *alu_fma_suite(void)
{
    Suite *s = suite_create("codegen_e2e_alu_fma");
    TCase *tc = tcase_create("fma");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, f32_mul_add_is_fma);
    tcase_add_test(tc, f32_mul_sub_is_fma);
    tcase_add_test(tc, f16_mul_add_keeps_its_rounding);
    tcase_add_test(tc, attention_scores_use_fma);
    suite_add_tcase(s, tc);
    TCase *pt = pu_ptxas_tcase(s, 300);
    tcase_add_test(pt, f32_fma_accepted_by_ptxas);
    return s;
}

PU_MAIN(alu_fma_suite)
