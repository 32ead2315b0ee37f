/* test_e2e_host_launch.c — kiln_host_launch without a GPU: its argument checks and
 * the path a host program takes when there is no GPU.
 *
 * A bad argument list must be refused BEFORE the kernel or any device is
 * touched: the calls pass a kernel pointer that faults when dereferenced, so a
 * check made after the first device access would crash the test instead of
 * returning KILN_ERR_USAGE. Every refusal must leave the host buffers as they
 * were (inputs random, the output poisoned). The no-GPU flow is the one a host
 * program follows (kiln_init, kiln_module_compile, kiln_kernel_get,
 * kiln_host_launch) with the driver forced missing, and with whatever this
 * machine really has. (On a GPU, tests/gpu/test_e2e_gpu_host_launch.c runs it.)
 */
#include "testutil.h"

#include <stdint.h>
#include <string.h>

#include "kiln.h"

/* Dereferencing this faults: the checks must not. */
#define POISON_KERNEL ((KilnKernel *)(uintptr_t)0x18)

enum { N = 1001 };

static float g_x[N], g_y[N], g_z[N];

/* Random non-zero inputs, a NaN-poisoned output (0xFF bytes). */
static void fill_buffers(void)
{
    uint64_t s = 0x9E3779B97F4A7C15ull;
    for (int i = 0; i < N; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        g_x[i] = (float)((s >> 40) & 0xffff) / 65536.0f + 0.5f;
        g_y[i] = -(float)((s >> 20) & 0xffff) / 65536.0f - 0.25f;
    }
    memset(g_z, 0xFF, sizeof g_z);
}

/* vec_add(X, Y, Z, n), valid. */
static void valid_args(KilnHostArg a[4])
{
    a[0] = kiln_host_buf(g_x, sizeof g_x, KILN_HOST_IN);
    a[1] = kiln_host_buf(g_y, sizeof g_y, KILN_HOST_IN);
    a[2] = kiln_host_buf(g_z, sizeof g_z, KILN_HOST_OUT);
    a[3] = kiln_host_scalar(kiln_arg_i32(N));
}

/* The buffers still hold what fill_buffers put there: nothing was written back. */
static void assert_untouched(void)
{
    float x[N], y[N];
    memcpy(x, g_x, sizeof x);
    memcpy(y, g_y, sizeof y);
    fill_buffers();
    ck_assert(memcmp(x, g_x, sizeof x) == 0);
    ck_assert(memcmp(y, g_y, sizeof y) == 0);
    for (int i = 0; i < N; i++) {
        uint32_t u;
        memcpy(&u, &g_z[i], 4);
        ck_assert_uint_eq(u, 0xFFFFFFFFu);
    }
}

/* One broken argument list: USAGE from both entry points, with `want` in the message. */
static void refused(const KilnHostArg *a, int n, const char *want)
{
    ck_assert_int_eq(kiln_host_args_check(a, n), KILN_ERR_USAGE);
    ck_assert_msg(strstr(kiln_last_error(), want), "message: %s (wanted %s)", kiln_last_error(), want);
    KilnHostStep step = KILN_HOST_STEP_NONE;
    int grid[3] = {1, 1, 1};
    ck_assert_int_eq(kiln_host_launch(POISON_KERNEL, grid, a, n, &step), KILN_ERR_USAGE);
    ck_assert_msg(strstr(kiln_last_error(), want), "message: %s (wanted %s)", kiln_last_error(), want);
    ck_assert_int_eq(step, KILN_HOST_STEP_CHECK);
    assert_untouched();
}

START_TEST(constructors)
{
    fill_buffers();
    KilnHostArg a[4];
    valid_args(a);
    ck_assert_int_eq(a[0].value.kind, KILN_PARAM_PTR);
    ck_assert_ptr_eq(a[0].host, g_x);
    ck_assert_uint_eq(a[0].bytes, sizeof g_x);
    ck_assert_int_eq(a[0].dir, KILN_HOST_IN);
    ck_assert_int_eq(a[2].dir, KILN_HOST_OUT);
    ck_assert_int_eq(a[3].value.kind, KILN_PARAM_I32);
    ck_assert_int_eq(a[3].value.v.i, N);
    ck_assert_ptr_null(a[3].host);
    KilnHostArg f = kiln_host_scalar(kiln_arg_f32(-2.5f));
    ck_assert_int_eq(f.value.kind, KILN_PARAM_F32);
    ck_assert(f.value.v.f32 == -2.5f);
    ck_assert_int_eq(kiln_host_args_check(a, 4), KILN_OK);
    ck_assert_int_eq(kiln_host_args_check(NULL, 0), KILN_OK);
}
END_TEST

START_TEST(bad_lists_are_refused_before_the_device)
{
    fill_buffers();
    KilnHostArg a[4];
    valid_args(a);
    refused(a, -1, "nargs is -1 (must be >= 0)");
    refused(NULL, 2, "2 arguments but no argument array");

    valid_args(a);
    a[1].host = NULL;
    refused(a, 4, "argument 2 is a buffer without host memory");

    valid_args(a);
    a[2].bytes = 0;
    refused(a, 4, "argument 3 is a buffer of 0 bytes");

    valid_args(a);
    a[0].dir = (KilnHostDir)0;
    refused(a, 4, "argument 1 has no valid direction (0;");
    a[0].dir = (KilnHostDir)7;
    refused(a, 4, "argument 1 has no valid direction (7;");

    valid_args(a);
    a[3].host = g_y;
    refused(a, 4, "argument 4 is a scalar (i32) but has a host buffer");

    valid_args(a);
    a[3].value.kind = (KilnParamKind)99;
    refused(a, 4, "argument 4 has no valid kind (99)");

    /* A pointer kind built as a scalar is a buffer without host memory, not a raw address. */
    valid_args(a);
    a[1] = kiln_host_scalar(kiln_arg_ptr(0x7f0000000000ull));
    refused(a, 4, "argument 2 is a buffer without host memory");
}
END_TEST

START_TEST(null_kernel)
{
    fill_buffers();
    KilnHostArg a[4];
    valid_args(a);
    KilnHostStep step = KILN_HOST_STEP_NONE;
    ck_assert_int_eq(kiln_host_launch(NULL, NULL, a, 4, &step), KILN_ERR_USAGE);
    ck_assert_str_eq(kiln_last_error(), "kiln_host_launch: kernel is NULL");
    ck_assert_int_eq(step, KILN_HOST_STEP_CHECK);
    /* step may be NULL */
    ck_assert_int_eq(kiln_host_launch(NULL, NULL, a, 4, NULL), KILN_ERR_USAGE);
    assert_untouched();
}
END_TEST

/* What a host program sees without a GPU: kiln_init fails cleanly, nothing
 * after it gets a device or a kernel, and kiln_host_launch on the kernel it
 * never got refuses without touching the buffers. */
static void no_gpu_flow(KilnStatus init_status)
{
    ck_assert_msg(init_status == KILN_ERR_NO_DRIVER || init_status == KILN_ERR_NO_DEVICE, "kiln_init: %s: %s",
                  kiln_status_name(init_status), kiln_last_error());
    KilnDevice *dev = (KilnDevice *)0x1;
    ck_assert_int_eq(kiln_init(&dev, 0), init_status);
    ck_assert_ptr_null(dev);
    KilnModule *mod = (KilnModule *)0x1;
    KilnCompileOptions o = {0};
    ck_assert_int_eq(kiln_module_compile(dev, "vec_add.tile", "", &o, &mod), KILN_ERR_USAGE);
    ck_assert_ptr_null(mod);
    KilnKernel *k = (KilnKernel *)0x1;
    ck_assert_int_eq(kiln_kernel_get(mod, "vec_add", &k), KILN_ERR_USAGE);
    k = NULL;
    fill_buffers();
    KilnHostArg a[4];
    valid_args(a);
    int grid[3] = {1, 1, 1};
    ck_assert_int_eq(kiln_host_launch(k, grid, a, 4, NULL), KILN_ERR_USAGE);
    assert_untouched();
}

START_TEST(no_driver)
{
    setenv("KILN_CUDA_LIBRARY", "/nonexistent/libcuda.so.1", 1);
    KilnDevice *dev = NULL;
    ck_assert_int_eq(kiln_init(&dev, 0), KILN_ERR_NO_DRIVER);
    ck_assert_msg(strncmp(kiln_last_error(), "no CUDA driver (", 16) == 0, "message: %s", kiln_last_error());
    no_gpu_flow(KILN_ERR_NO_DRIVER);
}
END_TEST

/* This machine as it is (test_driver.c checks kiln_init's own statuses and
 * messages): without a GPU, the flow above; with one, tests/gpu runs the
 * helper for real. */
START_TEST(this_machine)
{
    unsetenv("KILN_CUDA_LIBRARY");
    KilnDevice *dev = NULL;
    KilnStatus st = kiln_init(&dev, 0);
    if (st == KILN_OK) ck_assert_int_eq(kiln_shutdown(dev), KILN_OK);
    else no_gpu_flow(st);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("runtime_host_launch");
    TCase *tc = tcase_create("host_launch");
    tcase_add_test(tc, constructors);
    tcase_add_test(tc, bad_lists_are_refused_before_the_device);
    tcase_add_test(tc, null_kernel);
    tcase_add_test(tc, no_driver);
    tcase_add_test(tc, this_machine);
    suite_add_tcase(s, tc);
    return s;
}

TU_MAIN(suite)
