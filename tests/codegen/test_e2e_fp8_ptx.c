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
 *   - the FP8 attention forward (attn_fwd_fp8_f16) compiles at d 64 and 128;
 *   - FP8 wgmma (sm_90a, pass_accelerate_dot.c's wgmma.e4m3): as the runtime
 *     compiles it (launch hints, 128 x 128 tiles on 8 warps at d 128) both
 *     dots are wgmma ...m64n128k32.f32.e4m3.e4m3, 4 + 4 per key block and
 *     warpgroup, with no e4m3 -> f16 widening and no f16 tensor-core
 *     instruction, P converted two per cvt; with --overlap (dot-rotate's
 *     copies) too; at d 256 with 64-key blocks (the table's tiles) Q K^T is
 *     native and P V (64-byte V^T rows) widened; sm_89 widens every dot;
 *     ptxas: no spills at the runtime's FP8 schedules.
 * The ptxas cases assemble each for sm_89 / sm_90a.
 */
#include "tests/testutil.h"
#include "tests/ptx_util.h"
#include "kiln.h"
#include "compiler/support/support.h"
#include "jit_internal.h"   /* rt_attn_fwd_request: what the runtime compiles */

#include <stdio.h>
#include <stdlib.h>
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

/* attn_fwd_fp8_f16 as the runtime compiles it: d, BM x BN tiles on `warps`, 2 stages, the
 * launch-time hints, `overlap` and `no_fp8_wgmma` (FP8 keeps no TMA / warp specialisation:
 * jit/attention.c). */
static KilnCompileResult fp8_attn_tiles(const char *d, const char *bm, const char *bn, int warps, const char *causal,
                                        const char *arch, int overlap, int no_fp8_wgmma, KilnEmit emit)
{
    static char *src;
    if (!src) src = sup_read_file_text(tu_src_path("lang/lib/attention_fwd.tile"), NULL);
    ck_assert_ptr_nonnull(src);
    KilnDefine defs[] = {{"HEAD_DIM", d}, {"BLOCK_M", bm}, {"BLOCK_N", bn}, {"CAUSAL", causal}};
    KilnParamHint h[PU_ATTN_NHINTS];
    KilnCompileOptions o;
    pu_attention_options(&o, defs, 4, arch, warps, 2, emit, h);
    o.kernel = "attn_fwd_fp8_f16";
    o.schedule.overlap = overlap;
    o.schedule.no_fp8_wgmma = no_fp8_wgmma;
    KilnCompileResult r;
    KilnStatus st = kiln_compile("lang/lib/attention_fwd.tile", src, &o, &r);
    ck_assert_msg(st == KILN_OK, "d %s %sx%s: %s\n%s", d, bm, bn, kiln_status_name(st),
                  r.diagnostics ? r.diagnostics : "");
    return r;
}

#define E4M3_N128 "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3"
#define COUNT(r, what) pu_count_n((r).output, (r).output_size, what)

/* d 128, 128 x 128 on 8 warps (two warpgroups of 64 rows): per key block and warpgroup
 * Q K^T is 4 k32 steps over d and P V 4 over the keys; two key loops (whole blocks, then
 * the causal diagonal) -> 16; P (64 values a thread) -> 32 cvt e4m3x2 per loop. */
START_TEST(attention_runs_on_fp8_wgmma)
{
    for (int causal = 0; causal < 2; causal++) {
        KilnCompileResult r = fp8_attn_tiles("128", "128", "128", 8, causal ? "true" : "false", "sm_90a", 0, 0,
                                             KILN_EMIT_PTX);
        ck_assert_int_eq(COUNT(r, E4M3_N128), 16);
        ck_assert_int_eq(COUNT(r, "wgmma.mma_async"), 16);
        ck_assert_int_eq(COUNT(r, "cvt.rn.f16x2.e4m3x2"), 0);   /* no widening */
        ck_assert_int_eq(COUNT(r, "mma.sync"), 0);
        ck_assert_int_eq(COUNT(r, "cvt.rn.satfinite.e4m3x2.f32"), 64);
        /* the operand tiles go to SRAM in whole 16-byte chunks of K (64 bytes a thread:
         * Q once, K^T and V^T per loop), V read 4 bytes of d at a time (16 loads a loop) */
        ck_assert_int_eq(COUNT(r, "st.shared.v4.b32"), 4 + 2 * (4 + 4));
        ck_assert_int_eq(COUNT(r, "st.shared.u8"), 0);
        ck_assert_int_eq(COUNT(r, "ld.global.u32") + COUNT(r, "ld.global.b32"), 2 * 16);
        kiln_compile_result_free(&r);
    }
    /* the decision is on the GPU IR: four dots marked wgmma.e4m3, no cast to f16 */
    KilnCompileResult r = fp8_attn_tiles("128", "128", "128", 8, "true", "sm_90a", 0, 0, KILN_EMIT_GPU_IR);
    ck_assert_int_eq(COUNT(r, "{wgmma.e4m3 = 1}"), 4);
    ck_assert_int_eq(COUNT(r, "cast %q"), 0);
    kiln_compile_result_free(&r);
}
END_TEST

/* The PTX of fp8_attn_tiles(d, bm, bn, warps, causal, arch, overlap, no_fp8) holds `n1` of
 * `i1` and `n2` of `i2` (n < 0: some), and e4m3 -> f16 widening cvts (`widen` 1) or none (0). */
static void expect_ptx(const char *d, const char *bm, const char *bn, int warps, const char *arch, int overlap,
                       int no_fp8, const char *i1, int n1, const char *i2, int n2, int widen)
{
    KilnCompileResult r = fp8_attn_tiles(d, bm, bn, warps, "true", arch, overlap, no_fp8, KILN_EMIT_PTX);
    const char *is[2] = {i1, i2};
    int ns[2] = {n1, n2};
    for (int i = 0; i < 2; i++) {
        int got = COUNT(r, is[i]);
        ck_assert_msg(ns[i] < 0 ? got > 0 : got == ns[i], "d %s %sx%s/%d %s: %d of %s, want %d", d, bm, bn, warps,
                      arch, got, is[i], ns[i]);
    }
    ck_assert_int_eq(COUNT(r, "cvt.rn.f16x2.e4m3x2") > 0, widen);
    kiln_compile_result_free(&r);
}

#define E4M3_N64 "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3"

/* --overlap: dot-rotate peels Q K^T out of the loops; its copies stay FP8 wgmma (24).
 * d 256 at the table's 128 x 64 tiles: Q K^T native (8 k32 steps over d, two loops), P V
 * widened (V^T rows of 64 keys are 64 bytes: no 128-byte swizzle atom): f16 wgmma k16 x 4
 * per loop, V and P widened by cvt f16x2.e4m3x2. 64 x 64 on 4 warps at d 128 (the causal
 * short-sequence row) likewise. sm_89 and --no-fp8-wgmma (f16 wgmma, k16: 8 + 8 per key
 * block) widen everything. */
START_TEST(where_fp8_wgmma_applies)
{
    expect_ptx("128", "128", "128", 8, "sm_90a", 1, 0, E4M3_N128, 24, "wgmma.mma_async", 24, 0);
    expect_ptx("256", "128", "64", 8, "sm_90a", 0, 0, E4M3_N64, 16, "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16",
               8, 1);
    expect_ptx("128", "64", "64", 4, "sm_90a", 0, 0, E4M3_N64, 8, "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16",
               8, 1);
    expect_ptx("128", "128", "128", 8, "sm_89", 0, 0, "wgmma", 0, "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32",
               -1, 1);
    expect_ptx("128", "128", "128", 8, "sm_90a", 0, 1, "e4m3.e4m3", 0,
               "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16", 32, 1);
}
END_TEST

/* ptxas at the runtime's FP8 schedules on sm_90a (jit/attention.c: no overlap, TMA or
 * warp specialisation for FP8): no spills. */
START_TEST(fp8_wgmma_assembles_without_spills)
{
    static const char *cfg[][5] = {{"128", "128", "128", "8", "false"}, {"128", "128", "128", "8", "true"},
                                   {"128", "64", "64", "4", "true"},    {"256", "128", "64", "8", "false"},
                                   {"64", "128", "64", "4", "false"}};
    for (int i = 0; i < 5; i++) {
        KilnCompileResult r = fp8_attn_tiles(cfg[i][0], cfg[i][1], cfg[i][2], atoi(cfg[i][3]), cfg[i][4], "sm_90a", 0, 0,
                                             KILN_EMIT_CUBIN);
        char what[64];
        snprintf(what, sizeof what, "fp8 d %s %sx%s/%s causal %s", cfg[i][0], cfg[i][1], cfg[i][2], cfg[i][3],
                 cfg[i][4]);
        pu_assert_no_spills(&r, what);
        kiln_compile_result_free(&r);
    }
}
END_TEST

/* What kiln_attention_fwd compiles for an FP8 call on sm_90 (rt_attn_fwd_request): at d 128
 * the table's 128 x 128 tiles on 8 warps without its overlap (TMA and warp specialisation
 * off too). By default the widened kernel (no FP8 wgmma until a GPU has checked it:
 * jit/attention.c); with schedule.no_fp8_wgmma = -1 the native one: 16 FP8 wgmma, no
 * widening; a caller's overlap stays. */
START_TEST(runtime_compiles_fp8_wgmma)
{
    KilnAttentionParams p = {.dtype = KILN_E4M3, .out_dtype = KILN_F16, .batch = 1, .heads_q = 2, .heads_kv = 2,
                             .seqlen_q = 4096, .seqlen_k = 4096, .head_dim = 128};
    RtAttnVariant v;
    RtAttnRequest q;
    ck_assert_int_eq(rt_attn_fwd_request(90, &p, &v, &q), KILN_OK);
    ck_assert_str_eq(q.opts.kernel, "attn_fwd_fp8_f16");
    ck_assert_int_eq(q.opts.num_warps, 8);
    ck_assert_int_eq(q.opts.schedule.overlap + q.opts.schedule.tma + q.opts.schedule.warp_specialize, 0);
    ck_assert_int_eq(q.opts.schedule.no_fp8_wgmma, 1);   /* the default: widened */
    free(q.owned);
    p.schedule.no_fp8_wgmma = -1;                         /* the caller opts in to FP8 wgmma */
    ck_assert_int_eq(rt_attn_fwd_request(90, &p, &v, &q), KILN_OK);
    ck_assert_int_eq(q.opts.schedule.no_fp8_wgmma, 0);
    KilnCompileOptions o = q.opts;
    KilnParamHint h[PU_ATTN_NHINTS];
    pu_attention_hints(h);
    o.hints = h, o.nhints = PU_ATTN_NHINTS, o.arch = "sm_90a", o.emit = KILN_EMIT_PTX;
    KilnCompileResult r;
    ck_assert_int_eq(kiln_compile(q.path, q.src, &o, &r), KILN_OK);
    ck_assert_int_eq(COUNT(r, E4M3_N128), 16);
    ck_assert_int_eq(COUNT(r, "cvt.rn.f16x2.e4m3x2"), 0);
    kiln_compile_result_free(&r);
    free(q.owned);
    p.schedule.overlap = 1;
    ck_assert_int_eq(rt_attn_fwd_request(90, &p, &v, &q), KILN_OK);
    ck_assert_int_eq(q.opts.schedule.overlap, 1);
    free(q.owned);
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
    tcase_add_test(tc, attention_runs_on_fp8_wgmma);
    tcase_add_test(tc, where_fp8_wgmma_applies);
    tcase_add_test(tc, runtime_compiles_fp8_wgmma);
    suite_add_tcase(s, tc);
    TCase *tp = pu_ptxas_tcase(s, 600);
    tcase_add_test(tp, ptxas_takes_them);
    tcase_add_test(tp, fp8_wgmma_assembles_without_spills);
    return s;
}

PU_MAIN(fp8_ptx_suite)
