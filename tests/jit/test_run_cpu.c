/* test_run_cpu.c — kiln_run_cpu: a .tile kernel on the CPU interpreter through
 * the public API, with the argument list kiln_host_launch takes.
 *
 * What it must do: compute the right thing (vec_add against x + y, an f16
 * scalar and a u32 scalar reaching the kernel); keep kiln_host_launch's
 * buffer semantics (an IN buffer the kernel writes stays as the caller had
 * it, an OUT buffer comes back 0xFF where the kernel does not write, INOUT is
 * updated in place); refuse bad calls before running, naming the argument or
 * parameter (count, buffer for a scalar, float for an integer, a bad list);
 * report compile errors with their diagnostics and a program's own failure
 * (an access outside every buffer) as KILN_ERR_KERNEL with its location.
 * kiln_attention_fwd_cpu, which binds by the compiled kernel's parameter names,
 * runs the front end once per call.
 */
#include "testutil.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kiln.h"
#include "compiler/driver/driver.h"

static const char *VEC_ADD =
    "kernel vec_add(X: *f32, Y: *f32, Z: *f32, n: i32, const BLOCK: i32 = 64) {\n"
    "    let offs = program_id(0) * BLOCK + arange(BLOCK);\n"
    "    let mask = offs < n;\n"
    "    let x = load(X + offs, mask = mask, other = 0);\n"
    "    let y = load(Y + offs, mask = mask, other = 0);\n"
    "    store(Z + offs, x + y, mask = mask);\n"
    "    store(X + offs, x * 0, mask = mask);\n"   /* writes its input: must not reach the caller */
    "}\n";

enum { N = 150 };

START_TEST(vec_add_in_out_semantics)
{
    float x[N], y[N], z[N + 8];
    for (int i = 0; i < N; i++) x[i] = (float)i * 0.5f, y[i] = 1.0f / (float)(i + 1);
    memset(z, 0, sizeof z);
    KilnHostArg a[4] = {kiln_host_buf(x, sizeof x, KILN_HOST_IN), kiln_host_buf(y, sizeof y, KILN_HOST_IN),
                        kiln_host_buf(z, sizeof z, KILN_HOST_OUT), kiln_host_scalar(kiln_arg_i32(N))};
    KilnCompileOptions o = {0};
    int grid[3] = {(N + 63) / 64, 1, 1};
    ck_assert_msg(kiln_run_cpu("vec_add.tile", VEC_ADD, &o, grid, a, 4) == KILN_OK, "%s", kiln_last_error());
    for (int i = 0; i < N; i++) {
        ck_assert_float_eq(z[i], (float)i * 0.5f + 1.0f / (float)(i + 1));
        ck_assert_float_eq(x[i], (float)i * 0.5f);   /* IN: the kernel wrote a copy */
    }
    for (int i = N; i < N + 8; i++) ck_assert_msg(isnan(z[i]), "z[%d] not written: must come back NaN", i);
    /* INOUT: the same kernel's write to X lands in the caller's buffer. */
    a[0] = kiln_host_buf(x, sizeof x, KILN_HOST_INOUT);
    ck_assert_int_eq(kiln_run_cpu("vec_add.tile", VEC_ADD, &o, grid, a, 4), KILN_OK);
    for (int i = 0; i < N; i++) ck_assert_float_eq(x[i], 0.0f);
}
END_TEST

/* Scalars of other kinds reach the kernel: f16 bits for an f16 parameter and
 * a u32 for an integer one; a define picks the block. */
START_TEST(scalar_kinds_and_defines)
{
    const char *src = "kernel axpb(Y: *f32, a: f16, n: i32, const B: i32 = 8) {\n"
                      "    let offs = program_id(0) * B + arange(B);\n"
                      "    store(Y + offs, a * offs + n, mask = offs < n);\n"
                      "}\n";
    float y[32];
    KilnHostArg a[3] = {kiln_host_buf(y, sizeof y, KILN_HOST_OUT),
                        kiln_host_scalar(kiln_arg_f16_bits(kiln_f32_to_f16(1.5f))),
                        kiln_host_scalar(kiln_arg_u32(32))};
    KilnDefine d = {"B", "16"};
    KilnCompileOptions o = {.defines = &d, .ndefines = 1};
    int grid[3] = {2, 0, 0};
    ck_assert_msg(kiln_run_cpu("axpb.tile", src, &o, grid, a, 3) == KILN_OK, "%s", kiln_last_error());
    for (int i = 0; i < 32; i++) ck_assert_float_eq_tol(y[i], 1.5f * (float)i + 32.0f, 1e-3f);
}
END_TEST

START_TEST(bad_calls_are_refused)
{
    float x[4] = {0}, y[4] = {0}, z[4] = {0};
    KilnCompileOptions o = {0};
    int grid[3] = {1, 1, 1};
    KilnHostArg a[4] = {kiln_host_buf(x, sizeof x, KILN_HOST_IN), kiln_host_buf(y, sizeof y, KILN_HOST_IN),
                        kiln_host_buf(z, sizeof z, KILN_HOST_OUT), kiln_host_scalar(kiln_arg_i32(4))};
    ck_assert_int_eq(kiln_run_cpu("v.tile", VEC_ADD, &o, grid, a, 3), KILN_ERR_ARGS);
    ck_assert_ptr_nonnull(strstr(kiln_last_error(), "takes 4 arguments, got 3"));
    KilnHostArg b[4];
    memcpy(b, a, sizeof b);
    b[3] = kiln_host_scalar(kiln_arg_f32(4.0f));
    ck_assert_int_eq(kiln_run_cpu("v.tile", VEC_ADD, &o, grid, b, 4), KILN_ERR_ARGS);
    ck_assert_ptr_nonnull(strstr(kiln_last_error(), "parameter n (i32) takes an integer, got f32"));
    memcpy(b, a, sizeof b);
    b[3] = kiln_host_buf(z, sizeof z, KILN_HOST_IN);
    ck_assert_int_eq(kiln_run_cpu("v.tile", VEC_ADD, &o, grid, b, 4), KILN_ERR_ARGS);
    ck_assert_ptr_nonnull(strstr(kiln_last_error(), "parameter n"));
    b[3] = kiln_host_scalar(kiln_arg_i32(4));
    b[1] = kiln_host_scalar(kiln_arg_i32(4));
    ck_assert_int_eq(kiln_run_cpu("v.tile", VEC_ADD, &o, grid, b, 4), KILN_ERR_ARGS);
    ck_assert_ptr_nonnull(strstr(kiln_last_error(), "parameter Y is a pointer"));
    memcpy(b, a, sizeof b);
    b[0].bytes = 0;   /* the list check kiln_host_launch makes */
    ck_assert_int_eq(kiln_run_cpu("v.tile", VEC_ADD, &o, grid, b, 4), KILN_ERR_USAGE);
    ck_assert_int_eq(kiln_run_cpu("v.tile", NULL, &o, grid, a, 4), KILN_ERR_USAGE);
    for (int i = 0; i < 4; i++) ck_assert_float_eq(z[i], 0.0f);   /* nothing ran */
}
END_TEST

START_TEST(compile_and_kernel_errors)
{
    float z[4];
    KilnCompileOptions o = {0};
    KilnHostArg a[1] = {kiln_host_buf(z, sizeof z, KILN_HOST_OUT)};
    ck_assert_int_eq(kiln_run_cpu("bad.tile", "kernel k(Z: *f32) { store(Z, q); }\n", &o, NULL, a, 1),
                     KILN_ERR_COMPILE);
    ck_assert_ptr_nonnull(strstr(kiln_last_error(), "bad.tile:1:"));
    ck_assert_ptr_nonnull(strstr(kiln_last_error(), "error:"));
    /* 16 stores into a 4-float buffer: the interpreter stops it, naming the place. */
    const char *oob = "kernel k(Z: *f32) {\n    store(Z + arange(16), 1.0);\n}\n";
    ck_assert_int_eq(kiln_run_cpu("oob.tile", oob, &o, NULL, a, 1), KILN_ERR_KERNEL);
    ck_assert_ptr_nonnull(strstr(kiln_last_error(), "oob.tile"));
    ck_assert_str_eq(kiln_status_name(KILN_ERR_KERNEL), "KILN_ERR_KERNEL");
}
END_TEST

/* kiln_attention_fwd_cpu runs the front end once per call (the arguments are bound
 * by the compiled kernel's parameter names, and the same IR runs), and computes
 * attention: a small causal GQA problem with lengths not multiples of the 16-row
 * tiles, random inputs, outputs poisoned, against a float64 reference. */
enum { AB = 1, AHQ = 2, AHK = 1, ASQ = 21, ASK = 27, AD = 32 };

static double ref_row(const uint16_t *q, const uint16_t *k, const uint16_t *v, int h, int i, double *o)
{
    double s[ASK], m = -INFINITY, l = 0, scale = 1.0 / sqrt((double)AD);
    int last = i + (ASK - ASQ);   /* causal, bottom-right aligned */
    for (int j = 0; j <= last && j < ASK; j++) {
        s[j] = 0;
        for (int d = 0; d < AD; d++)
            s[j] += (double)kiln_f16_to_f32(q[((size_t)h * ASQ + i) * AD + d]) * kiln_f16_to_f32(k[(size_t)j * AD + d]);
        s[j] *= scale;
        if (s[j] > m) m = s[j];
    }
    for (int d = 0; d < AD; d++) o[d] = 0;
    for (int j = 0; j <= last && j < ASK; j++) {
        double p = exp(s[j] - m);
        l += p;
        for (int d = 0; d < AD; d++) o[d] += p * kiln_f16_to_f32(v[(size_t)j * AD + d]);
    }
    for (int d = 0; d < AD; d++) o[d] /= l;
    return m + log(l);
}

START_TEST(attention_fwd_cpu_runs_the_front_end_once)
{
    static uint16_t q[AB * AHQ * ASQ * AD], k[AB * AHK * ASK * AD], v[AB * AHK * ASK * AD], o[AB * AHQ * ASQ * AD];
    static float lse[AB * AHQ * ASQ];
    uint64_t s = 0x9E3779B97F4A7C15ull;
    uint16_t *in[] = {q, k, v};
    size_t n[] = {sizeof q / 2, sizeof k / 2, sizeof v / 2};
    for (int t = 0; t < 3; t++)
        for (size_t i = 0; i < n[t]; i++) {
            s ^= s << 13, s ^= s >> 7, s ^= s << 17;
            in[t][i] = kiln_f32_to_f16((float)((s >> 40) & 0xffffff) / 8388608.0f - 1.0f);
        }
    memset(o, 0xFF, sizeof o);   /* NaN */
    memset(lse, 0xFF, sizeof lse);
    /* [batch, heads, seqlen, d] */
    KilnAttentionParams p = {.dtype = KILN_F16, .batch = AB, .heads_q = AHQ, .heads_kv = AHK, .seqlen_q = ASQ,
                             .seqlen_k = ASK, .head_dim = AD, .q = (uintptr_t)q, .k = (uintptr_t)k,
                             .v = (uintptr_t)v, .o = (uintptr_t)o, .lse = (uintptr_t)lse, .causal = 1,
                             .block_m = 16, .block_n = 16,
                             .q_stride = {AHQ * ASQ * AD, ASQ * AD, AD}, .o_stride = {AHQ * ASQ * AD, ASQ * AD, AD},
                             .k_stride = {AHK * ASK * AD, ASK * AD, AD}, .v_stride = {AHK * ASK * AD, ASK * AD, AD},
                             .q_bytes = sizeof q, .k_bytes = sizeof k, .v_bytes = sizeof v, .o_bytes = sizeof o,
                             .lse_bytes = sizeof lse};
    int64_t before = kiln_front_end_runs();
    ck_assert_msg(kiln_attention_fwd_cpu(&p) == KILN_OK, "%s", kiln_last_error());
    ck_assert_int_eq(kiln_front_end_runs() - before, 1);
    double worst = 0;
    for (int h = 0; h < AHQ; h++)
        for (int i = 0; i < ASQ; i++) {
            double ro[AD], rl = ref_row(q, k, v, h, i, ro);
            for (int d = 0; d < AD; d++) {
                double got = kiln_f16_to_f32(o[((size_t)h * ASQ + i) * AD + d]);
                ck_assert_msg(isfinite(got), "O[%d][%d][%d] not written", h, i, d);
                if (fabs(got - ro[d]) > worst) worst = fabs(got - ro[d]);
            }
            ck_assert_msg(fabs(lse[h * ASQ + i] - rl) <= 1e-4 * fabs(rl) + 1e-5, "LSE[%d][%d] %g vs %g", h, i,
                          lse[h * ASQ + i], rl);
        }
    ck_assert_msg(worst <= 4e-3, "max |O - ref| = %g", worst);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("run_cpu");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, vec_add_in_out_semantics);
    tcase_add_test(tc, scalar_kinds_and_defines);
    tcase_add_test(tc, bad_calls_are_refused);
    tcase_add_test(tc, compile_and_kernel_errors);
    tcase_add_test(tc, attention_fwd_cpu_runs_the_front_end_once);
    suite_add_tcase(s, tc);
    return s;
}

TU_MAIN(suite)
