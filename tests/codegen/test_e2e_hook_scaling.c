/* test_e2e_hook_scaling.c — the compile time of a long score_mod hook grows about
 * linearly with its length, to GPU IR and to PTX (issue 29).
 *
 * A score_mod of N lines (one tanh each) compiled into the backward's dK/dV kernel
 * (sm_90a, d 128, 64 x 64, 4 warps), timed in process CPU time (other processes on the
 * machine do not count).
 *   - To GPU IR, N = 500 and 2000: accelerate_dot's search for attention's dot chain
 *     walked the whole function once per value it reached: 2000 lines took 11.8 s, 42x the
 *     281 ms of 500; now 0.22 s, ~4x. The bound, 7x, sits between.
 *   - To PTX, N = 300 and 1200: LLVM's instruction selection was quadratic in the asm
 *     calls of a block (cg_asm, cg_context.c): 4.7 s and 75.8 s (16.2x); now 3.8 s and
 *     18.9 s (5.0x; 2000 lines 32 s, was 206 s). The bound, 7.5x, sits between.
 *     tools/llvm_time_passes.sh profiles LLVM's share pass by pass.
 */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kiln.h"

static char *hook(int lines)
{
    size_t cap = (size_t)lines * 64 + 256, n = 0;
    char *t = malloc(cap);
    n += (size_t)snprintf(t + n, cap - n, "fn score_mod(s, b, h, q_idx, kv_idx) {\n    var t = s;\n");
    for (int i = 0; i < lines; i++)
        n += (size_t)snprintf(t + n, cap - n, "    t = t + 0.001 * tanh(t * %.4f);\n", 1.0 + i * 0.0001);
    snprintf(t + n, cap - n, "    return t;\n}\nimport \"attention_bwd\";\n");
    return t;
}

static double cpu_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static double compile_ms(int lines, KilnEmit emit)
{
    char *src = hook(lines);
    KilnDefine defs[] = {{"HEAD_DIM", "128"}, {"BLOCK_M", "64"}, {"BLOCK_N", "64"}, {"CAUSAL", "false"},
                         {"COMPUTE_DQ", "false"}};
    KilnCompileOptions o = {.kernel = "attn_bwd_dkdv_f16", .defines = defs, .ndefines = 5, .arch = "sm_90a",
                            .num_warps = 4, .num_stages = 2, .emit = emit};
    KilnCompileResult r;
    double t0 = cpu_ms();
    KilnStatus st = kiln_compile("hook.tile", src, &o, &r);
    double t = cpu_ms() - t0;
    ck_assert_msg(st == KILN_OK, "%d lines: %s", lines, r.diagnostics ? r.diagnostics : "");
    kiln_compile_result_free(&r);
    free(src);
    return t;
}

START_TEST(gpu_passes_linear_in_hook_length)
{
    (void)compile_ms(50, KILN_EMIT_GPU_IR);   /* warm: the library's text, first-use tables */
    double a = compile_ms(500, KILN_EMIT_GPU_IR), b = compile_ms(2000, KILN_EMIT_GPU_IR);
    printf("hook of 500 lines: %.0f ms, 2000 lines: %.0f ms (x%.1f)\n", a, b, b / a);
    ck_assert_msg(b < 7 * a, "2000 lines took %.0f ms, %.1fx the %.0f ms of 500: quadratic", b, b / a, a);
}
END_TEST

START_TEST(ptx_about_linear_in_hook_length)
{
    (void)compile_ms(50, KILN_EMIT_PTX);   /* warm: LLVM's target, the library's text */
    double a = compile_ms(300, KILN_EMIT_PTX), b = compile_ms(1200, KILN_EMIT_PTX);
    printf("to PTX, hook of 300 lines: %.0f ms, 1200 lines: %.0f ms (x%.1f)\n", a, b, b / a);
    ck_assert_msg(b < 7.5 * a, "1200 lines took %.0f ms to PTX, %.1fx the %.0f ms of 300: quadratic", b, b / a, a);
}
END_TEST

static Suite *scaling_suite(void)
{
    Suite *s = suite_create("hook_scaling");
    TCase *tc = tcase_create("scaling");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, gpu_passes_linear_in_hook_length);
    tcase_add_test(tc, ptx_about_linear_in_hook_length);
    suite_add_tcase(s, tc);
    return s;
}

TU_MAIN(scaling_suite)
