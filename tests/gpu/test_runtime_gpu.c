/* test_runtime_gpu.c — the runtime on a real GPU, with hand-written CUDA kernels
 * (runtime_kernels.cu, as PTX) so that it does not depend on the Kiln compiler.
 *
 * Without a GPU it prints one line "SKIP: no GPU (<reason>)" and exits 77 (ctest: skipped).
 * Tests run without fork (CUDA does not survive fork after cuInit).
 */
#include "tests/testutil.h"

#include <math.h>
#include <string.h>

#include "kiln.h"
#define GPU_UTIL_RUNTIME_ONLY /* no compiler headers here */
#include "tests/gpu/gpu_util.h"
#include "tests/gpu/runtime_kernels_ptx.h"

static KilnDevice *g_dev;
static KilnDeviceInfo g_info;

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static float rnd(void) { return gu_rnd(&g_rng, 1.0f); }

#define OK(call) ck_assert_msg((call) == KILN_OK, "%s: %s", #call, kiln_last_error())

START_TEST(device_info)
{
    ck_assert(g_info.name[0]);
    ck_assert_int_gt(g_info.sm_count, 0);
    ck_assert_int_ge(g_info.sm_version, 70);
    ck_assert(g_info.total_mem > ((size_t)1 << 30));
    ck_assert_int_ge(g_info.max_smem_per_block_optin, g_info.max_smem_per_block);
    ck_assert(!strncmp(g_info.arch, "sm_", 3));
    int n = 0;
    OK(kiln_device_count(&n));
    ck_assert_int_ge(n, 1);
    KilnDevice *d2 = NULL;
    ck_assert_int_eq(kiln_init(&d2, n + 3), KILN_ERR_NO_DEVICE);
    ck_assert_msg(strstr(kiln_last_error(), "no GPU with ordinal"), "%s", kiln_last_error());
}
END_TEST

START_TEST(memory_round_trip)
{
    const size_t n = 100003;
    float *h = malloc(n * 4), *back = malloc(n * 4);
    for (size_t i = 0; i < n; i++) h[i] = rnd();
    KilnDevPtr a = 0, b = 0;
    OK(kiln_malloc(g_dev, n * 4, &a));
    OK(kiln_malloc(g_dev, n * 4, &b));
    OK(kiln_memcpy_htod(g_dev, a, h, n * 4));
    OK(kiln_memset(g_dev, b, 0xFF, n * 4));
    OK(kiln_memcpy_dtoh(g_dev, back, b, n * 4));
    for (size_t i = 0; i < n; i++) ck_assert(isnan(back[i]));
    OK(kiln_memcpy_dtod(g_dev, b, a, n * 4));
    OK(kiln_memcpy_dtoh(g_dev, back, b, n * 4));
    ck_assert(memcmp(h, back, n * 4) == 0);
    OK(kiln_free(g_dev, a));
    OK(kiln_free(g_dev, b));
    /* driver errors carry the call, the CUresult name and the driver's text */
    ck_assert_int_eq(kiln_memcpy_htod(g_dev, (KilnDevPtr)16, h, 64), KILN_ERR_DRIVER);
    ck_assert_msg(!strncmp(kiln_last_error(), "cuMemcpyHtoD_v2 failed: CUDA_ERROR_", 35), "%s", kiln_last_error());
    KilnDevPtr huge = 0;
    ck_assert_int_eq(kiln_malloc(g_dev, (size_t)1 << 52, &huge), KILN_ERR_DRIVER);
    ck_assert_msg(strstr(kiln_last_error(), "CUDA_ERROR_OUT_OF_MEMORY"), "%s", kiln_last_error());
    free(h);
    free(back);
}
END_TEST

/* axpy from PTX read without a signature: ragged n, checked arguments. */
START_TEST(axpy_from_ptx_signature)
{
    KilnModule *m = NULL;
    OK(kiln_module_load_ptx(g_dev, runtime_kernels_ptx, NULL, 0, &m));
    KilnKernel *k = NULL;
    OK(kiln_kernel_get(m, "axpy", &k));
    const KilnKernelInfo *ki = kiln_kernel_info(k);
    ck_assert_int_eq(ki->nparams, 4);
    ck_assert_int_eq(ki->num_warps, 4);
    const int n = 1000 * 128 + 37;
    float *x = malloc(n * 4), *y = malloc(n * 4), *out = malloc(n * 4);
    for (int i = 0; i < n; i++) x[i] = rnd(), y[i] = rnd();
    KilnDevPtr dx, dy;
    OK(kiln_malloc(g_dev, n * 4, &dx));
    OK(kiln_malloc(g_dev, n * 4, &dy));
    OK(kiln_memcpy_htod(g_dev, dx, x, n * 4));
    OK(kiln_memcpy_htod(g_dev, dy, y, n * 4));
    int grid[3] = {(n + 127) / 128, 1, 1};
    KilnArg args[4] = {kiln_arg_ptr(dy), kiln_arg_ptr(dx), kiln_arg_f32(1.5f), kiln_arg_i32(n)};
    OK(kiln_launch(k, grid, NULL, args, 4));
    OK(kiln_synchronize(g_dev));
    OK(kiln_memcpy_dtoh(g_dev, out, dy, n * 4));
    for (int i = 0; i < n; i++)
        ck_assert_msg(fabsf(out[i] - (1.5f * x[i] + y[i])) <= 1e-6f, "y[%d] = %g, want %g", i, out[i],
                      1.5f * x[i] + y[i]);
    /* the checks, with real device memory */
    ck_assert_int_eq(kiln_launch(k, grid, NULL, args, 3), KILN_ERR_ARGS);
    ck_assert_msg(!strncmp(kiln_last_error(), "kernel axpy takes 4 arguments, got 3", 36), "%s", kiln_last_error());
    args[1] = kiln_arg_ptr((KilnDevPtr)(uintptr_t)x);
    ck_assert_int_eq(kiln_launch(k, grid, NULL, args, 4), KILN_ERR_ARGS);
    ck_assert_msg(strstr(kiln_last_error(), "argument 2 (param_1) is a host pointer"), "%s", kiln_last_error());
    args[1] = kiln_arg_ptr(dx + 4 * 10); /* inside an allocation: fine */
    args[2] = kiln_arg_f64(1.5);
    ck_assert_int_eq(kiln_launch(k, grid, NULL, args, 4), KILN_ERR_ARGS);
    ck_assert_msg(strstr(kiln_last_error(), "argument 3 (param_2) must be f32"), "%s", kiln_last_error());
    KilnKernel *none = NULL;
    ck_assert_int_eq(kiln_kernel_get(m, "axpby", &none), KILN_ERR_NOT_FOUND);
    ck_assert_msg(strstr(kiln_last_error(), "axpy, kinds, big_smem"), "%s", kiln_last_error());
    OK(kiln_free(g_dev, dx));
    OK(kiln_free(g_dev, dy));
    OK(kiln_module_free(m));
    free(x), free(y), free(out);
}
END_TEST

/* Every scalar kind reaches the kernel intact (explicit signature). */
START_TEST(scalar_kinds)
{
    KilnParam p[8] = {{"out", KILN_PARAM_PTR, 64}, {"d", KILN_PARAM_F64, 0}, {"i64", KILN_PARAM_I64, 0},
                      {"i8", KILN_PARAM_I8, 0},    {"u16", KILN_PARAM_U16, 0}, {"h", KILN_PARAM_F16, 0},
                      {"flag", KILN_PARAM_I1, 0},  {"u32", KILN_PARAM_U32, 0}};
    KilnKernelInfo ki = {.name = "kinds", .params = p, .nparams = 8, .num_warps = 2};
    KilnModule *m = NULL;
    OK(kiln_module_load_ptx(g_dev, runtime_kernels_ptx, &ki, 1, &m));
    KilnKernel *k = NULL;
    OK(kiln_kernel_get(m, NULL, &k));
    KilnDevPtr d;
    OK(kiln_malloc(g_dev, 8 * 8, &d));
    OK(kiln_memset(g_dev, d, 0xFF, 64));
    KilnArg a[8] = {kiln_arg_ptr(d), kiln_arg_f64(-2.25), kiln_arg_i64(-5000000000LL), kiln_arg_i8(-7),
                    kiln_arg_u16(65000), kiln_arg_f16_bits(0x3e00 /* 1.5 */), kiln_arg_bool(1),
                    kiln_arg_u32(4000000000u)};
    int grid[3] = {1, 0, 0};
    OK(kiln_launch(k, grid, NULL, a, 8));
    double got[8];
    OK(kiln_memcpy_dtoh(g_dev, got, d, sizeof got));
    double want[8] = {-2.25, -5000000000.0, -7, 65000, 1.5, 1, 4000000000.0, 64};
    for (int i = 0; i < 8; i++) ck_assert_msg(got[i] == want[i], "out[%d] = %g, want %g", i, got[i], want[i]);
    OK(kiln_free(g_dev, d));
    OK(kiln_module_free(m));
}
END_TEST

/* Dynamic shared memory above 48 KB, and above the device's limit. */
START_TEST(big_shared_memory)
{
    int want_bytes = 100 * 1024;
    if (g_info.max_smem_per_block_optin < want_bytes) want_bytes = g_info.max_smem_per_block_optin;
    KilnParam p[2] = {{"out", KILN_PARAM_PTR, 32}, {"nfloats", KILN_PARAM_I32, 0}};
    KilnKernelInfo ki = {.name = "big_smem", .params = p, .nparams = 2, .num_warps = 8, .smem_bytes = want_bytes};
    KilnModule *m = NULL;
    OK(kiln_module_load_ptx(g_dev, runtime_kernels_ptx, &ki, 1, &m));
    KilnKernel *k = NULL;
    OK(kiln_kernel_get(m, "big_smem", &k));
    KilnDevPtr d;
    OK(kiln_malloc(g_dev, 256 * 4, &d));
    int nf = want_bytes / 4;
    KilnArg a[2] = {kiln_arg_ptr(d), kiln_arg_i32(nf)};
    int grid[3] = {3, 1, 1};
    KilnStream *s = NULL;
    OK(kiln_stream_create(g_dev, &s));
    OK(kiln_launch(k, grid, s, a, 2));
    OK(kiln_stream_synchronize(s));
    float got[256];
    OK(kiln_memcpy_dtoh(g_dev, got, d, sizeof got));
    for (int t = 0; t < 256; t++) ck_assert_msg(got[t] == (float)(nf - 1 - t), "out[%d] = %g", t, got[t]);
    OK(kiln_module_free(m));
    /* one byte too many for the device: refused before the launch, with numbers */
    ki.smem_bytes = g_info.max_smem_per_block_optin + 1;
    OK(kiln_module_load_ptx(g_dev, runtime_kernels_ptx, &ki, 1, &m));
    OK(kiln_kernel_get(m, "big_smem", &k));
    ck_assert_int_eq(kiln_launch(k, grid, s, a, 2), KILN_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(kiln_last_error(), "bytes of shared memory") && strstr(kiln_last_error(), g_info.name), "%s",
                  kiln_last_error());
    OK(kiln_module_free(m));
    OK(kiln_stream_destroy(s));
    OK(kiln_free(g_dev, d));
}
END_TEST

START_TEST(bad_ptx_reports_the_jit_log)
{
    const char *bad = ".version 7.0\n.target sm_80\n.address_size 64\n"
                      ".visible .entry bad()\n{\n\tbogus.instruction %r1;\n\tret;\n}\n";
    KilnModule *m = (KilnModule *)0x1;
    ck_assert_int_eq(kiln_module_load_ptx(g_dev, bad, NULL, 0, &m), KILN_ERR_DRIVER);
    ck_assert_ptr_null(m);
    ck_assert_msg(!strncmp(kiln_last_error(), "cuModuleLoadDataEx failed: CUDA_ERROR_INVALID_PTX", 49), "%s",
                  kiln_last_error());
    ck_assert_msg(strchr(kiln_last_error(), '\n'), "no JIT log: %s", kiln_last_error());
}
END_TEST

START_TEST(timing)
{
    KilnModule *m = NULL;
    OK(kiln_module_load_ptx(g_dev, runtime_kernels_ptx, NULL, 0, &m));
    KilnKernel *k = NULL;
    OK(kiln_kernel_get(m, "axpy", &k));
    const int n = 1 << 22;
    KilnDevPtr dx, dy;
    OK(kiln_malloc(g_dev, (size_t)n * 4, &dx));
    OK(kiln_malloc(g_dev, (size_t)n * 4, &dy));
    OK(kiln_memset(g_dev, dx, 0, (size_t)n * 4));
    OK(kiln_memset(g_dev, dy, 0, (size_t)n * 4));
    int grid[3] = {n / 128, 1, 1};
    KilnArg a[4] = {kiln_arg_ptr(dy), kiln_arg_ptr(dx), kiln_arg_f32(2.0f), kiln_arg_i32(n)};
    float ms = -1;
    OK(kiln_time_launch(k, grid, NULL, a, 4, 11, &ms));
    ck_assert_msg(ms > 0 && ms < 100, "median %g ms", ms);
    KilnEvent *e0, *e1;
    OK(kiln_event_create(g_dev, &e0));
    OK(kiln_event_create(g_dev, &e1));
    OK(kiln_event_record(e0, NULL));
    OK(kiln_launch(k, grid, NULL, a, 4));
    OK(kiln_event_record(e1, NULL));
    OK(kiln_event_synchronize(e1));
    float ms2 = -1;
    OK(kiln_event_elapsed_ms(e0, e1, &ms2));
    ck_assert(ms2 > 0);
    printf("timing: axpy over %d floats: median %.4f ms (%.0f GB/s)\n", n, ms, 3.0 * 4 * n / (ms * 1e6));
    OK(kiln_event_destroy(e0));
    OK(kiln_event_destroy(e1));
    OK(kiln_free(g_dev, dx));
    OK(kiln_free(g_dev, dy));
    OK(kiln_module_free(m));
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("runtime_gpu");
    TCase *tc = tcase_create("gpu");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, device_info);
    tcase_add_test(tc, memory_round_trip);
    tcase_add_test(tc, axpy_from_ptx_signature);
    tcase_add_test(tc, scalar_kinds);
    tcase_add_test(tc, big_shared_memory);
    tcase_add_test(tc, bad_ptx_reports_the_jit_log);
    tcase_add_test(tc, timing);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return gu_main(&g_dev, &g_info, suite, NULL, NULL); }
