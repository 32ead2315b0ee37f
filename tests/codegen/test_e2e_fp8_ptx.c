/* test_e2e_fp8_ptx.c — f8e4m3 in the GPU backend: what the PTX holds and that
 * ptxas takes it.
 *
 *   - casts: f32 -> e4m3 is cvt.rn.satfinite.e4m3x2.f32 (the rounding and
 *     saturation of fp16.c, which tests/interp/test_e2e_fp8.c checks bit for
 *     bit), e4m3 -> f16/f32 cvt.rn.f16x2.e4m3x2; e4m3 moves as bytes (st.global.b8);
 *     sm_89 gets PTX ISA 8.1 (what ptxas asks there), sm_90a keeps 8.0;
 *   - sm_80 has no e4m3 cvt: the cast is refused at its location;
 *   - dot(e4m3, e4m3) -> f32 on sm_90a: its operands are widened to f16
 *     (exact) and the dot runs on the f16 tensor cores (mma.sync / wgmma);
 *   - the FP8 attention forward (attn_fwd_fp8_f16) compiles at d 64 and 128.
 * The ptxas cases assemble each for sm_89 / sm_90a.
 */
#include "tests/testutil.h"
#include "tests/ptx_util.h"
#include "kiln.h"
#include "compiler/support/support.h"

#include <string.h>

static const char *CASTS =
    "kernel f8_casts(X: *f32, Q: *f8e4m3, Y: *f32, H: *f16, n: i32, const BLOCK: i32 = 128)\n"
    "{\n"
    "    let offs = program_id(0) * BLOCK + arange(BLOCK);\n"
    "    let m = offs < n;\n"
    "    let q = load(X + offs, mask = m).to(f8e4m3);\n"
    "    store(Q + offs, q, mask = m);\n"
    "    store(Y + offs, load(Q + offs, mask = m, other = 0.0).to(f32), mask = m);\n"
    "    store(H + offs, q.to(f16), mask = m);\n"
    "}\n";

static const char *DOT =
    "kernel f8_dot(A: *f8e4m3, B: *f8e4m3, C: *f32, const M: i32 = 64, const N: i32 = 64, const K: i32 = 64)\n"
    "    with (num_warps = 4)\n"
    "{\n"
    "    let a = load(A + arange(M)[:, None] * K + arange(K)[None, :]);\n"
    "    let b = load(B + arange(K)[:, None] * N + arange(N)[None, :]);\n"
    "    store(C + arange(M)[:, None] * N + arange(N)[None, :], dot(a, b));\n"
    "}\n";

START_TEST(casts_emit_the_e4m3_cvts)
{
    KilnCompileResult r = pu_compile("c.tile", CASTS, "f8_casts", NULL, 0, "sm_90a", KILN_EMIT_PTX);
    ck_assert_int_ge(pu_count_n(r.output, r.output_size, "cvt.rn.satfinite.e4m3x2.f32"), 1);
    ck_assert_int_ge(pu_count_n(r.output, r.output_size, "cvt.rn.f16x2.e4m3x2"), 2);
    ck_assert_int_ge(pu_count_n(r.output, r.output_size, "st.global.b8"), 1);
    ck_assert_int_eq(pu_count_n(r.output, r.output_size, ".version 8.0"), 1);
    kiln_compile_result_free(&r);
    r = pu_compile("c.tile", CASTS, "f8_casts", NULL, 0, "sm_89", KILN_EMIT_PTX);
    ck_assert_int_eq(pu_count_n(r.output, r.output_size, ".version 8.1"), 1);
    kiln_compile_result_free(&r);
}
END_TEST

/* 1024 elements on 4 warps: 8 registers a thread, converted two per cvt (cg_elementwise.c):
 * 4 cvt.rn.satfinite.e4m3x2.f32 for the f32 -> e4m3 cast, 4 + 4 cvt.rn.f16x2.e4m3x2 for the
 * e4m3 -> f32 and e4m3 -> f16 ones. */
START_TEST(casts_convert_register_pairs)
{
    KilnDefine big[] = {{"BLOCK", "1024"}};
    KilnCompileResult r = pu_compile("c.tile", CASTS, "f8_casts", big, 1, "sm_90a", KILN_EMIT_PTX);
    ck_assert_int_eq(pu_count_n(r.output, r.output_size, "cvt.rn.satfinite.e4m3x2.f32"), 4);
    ck_assert_int_eq(pu_count_n(r.output, r.output_size, "cvt.rn.f16x2.e4m3x2"), 8);
    kiln_compile_result_free(&r);
}
END_TEST

START_TEST(sm_80_refuses_the_cast_at_its_location)
{
    KilnCompileResult r;
    ck_assert_int_eq(pu_compile_status("c.tile", CASTS, "f8_casts", NULL, 0, "sm_80", KILN_EMIT_PTX, &r),
                     KILN_ERR_COMPILE);
    ck_assert_msg(r.diagnostics && strstr(r.diagnostics, "c.tile:5:38: error: f8e4m3 conversion needs sm_89 or newer"),
                  "%s", r.diagnostics ? r.diagnostics : "(none)");
    kiln_compile_result_free(&r);
}
END_TEST

START_TEST(dot_runs_on_f16_tensor_cores)
{
    KilnCompileResult r = pu_compile("d.tile", DOT, "f8_dot", NULL, 0, "sm_90a", KILN_EMIT_PTX);
    int tc = pu_count_n(r.output, r.output_size, "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32") +
             pu_count_n(r.output, r.output_size, "wgmma.mma_async");
    ck_assert_msg(tc > 0, "no tensor-core instruction in the e4m3 dot");
    ck_assert_int_ge(pu_count_n(r.output, r.output_size, "cvt.rn.f16x2.e4m3x2"), 1);
    kiln_compile_result_free(&r);
}
END_TEST

static KilnCompileResult fp8_attention(const char *d, const char *arch, KilnEmit emit)
{
    static char *src;
    if (!src) src = sup_read_file_text(tu_src_path("lang/lib/attention_fwd.tile"), NULL);
    ck_assert_ptr_nonnull(src);
    KilnDefine defs[] = {{"HEAD_DIM", d}, {"BLOCK_M", "64"}, {"BLOCK_N", "64"}, {"CAUSAL", "true"}};
    KilnCompileResult r = pu_compile("lang/lib/attention_fwd.tile", src, "attn_fwd_fp8_f16", defs, 4, arch, emit);
    return r;
}

START_TEST(fp8_attention_compiles)
{
    KilnCompileResult r = fp8_attention("128", "sm_90a", KILN_EMIT_PTX);
    ck_assert_int_ge(pu_count_n(r.output, r.output_size, "cvt.rn.satfinite.e4m3x2.f32"), 1);
    kiln_compile_result_free(&r);
}
END_TEST

START_TEST(ptxas_takes_them)
{
    const char *archs[] = {"sm_89", "sm_90a"};
    for (int i = 0; i < 2; i++) {
        KilnCompileResult r = pu_compile("c.tile", CASTS, "f8_casts", NULL, 0, archs[i], KILN_EMIT_CUBIN);
        kiln_compile_result_free(&r);
        r = pu_compile("d.tile", DOT, "f8_dot", NULL, 0, archs[i], KILN_EMIT_CUBIN);
        kiln_compile_result_free(&r);
    }
    KilnCompileResult r = fp8_attention("64", "sm_90a", KILN_EMIT_CUBIN);
    kiln_compile_result_free(&r);
    r = fp8_attention("128", "sm_90a", KILN_EMIT_CUBIN);
    kiln_compile_result_free(&r);
}
END_TEST

static Suite *fp8_ptx_suite(void)
{
    Suite *s = suite_create("fp8_ptx");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, casts_emit_the_e4m3_cvts);
    tcase_add_test(tc, casts_convert_register_pairs);
    tcase_add_test(tc, sm_80_refuses_the_cast_at_its_location);
    tcase_add_test(tc, dot_runs_on_f16_tensor_cores);
    tcase_add_test(tc, fp8_attention_compiles);
    suite_add_tcase(s, tc);
    tcase_add_test(pu_ptxas_tcase(s, 600), ptxas_takes_them);
    return s;
}

PU_MAIN(fp8_ptx_suite)
