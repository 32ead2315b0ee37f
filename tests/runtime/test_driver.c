/* test_driver.c — the runtime without a GPU: driver loading, errors, status.
 *
 * Whatever this machine has (no libcuda.so.1, the stub, or a real driver with
 * or without a GPU), kiln_init must come back with a status and a message,
 * never crash. Each Check test runs in its own process, so setenv is local.
 */
#include "testutil.h"

#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "kiln.h"
#include "rt_internal.h"

static int starts_with(const char *s, const char *p) { return strncmp(s, p, strlen(p)) == 0; }

START_TEST(no_driver_forced)
{
    setenv("KILN_CUDA_LIBRARY", "/nonexistent/libcuda.so.1", 1);
    KilnDevice *dev = (KilnDevice *)0x1;
    KilnStatus st = kiln_init(&dev, 0);
    ck_assert_int_eq(st, KILN_ERR_NO_DRIVER);
    ck_assert_ptr_null(dev);
    ck_assert_msg(starts_with(kiln_last_error(), "no CUDA driver (libcuda.so.1 not found): "),
                  "message: %s", kiln_last_error());
    ck_assert_msg(strstr(kiln_last_error(), "/nonexistent/libcuda.so.1"), "message: %s", kiln_last_error());
    int n = 7;
    ck_assert_int_eq(kiln_device_count(&n), KILN_ERR_NO_DRIVER);
    ck_assert_int_eq(n, 0);
    /* a failed load is retried: still a clean status the second time */
    ck_assert_int_eq(kiln_init(&dev, 0), KILN_ERR_NO_DRIVER);
}
END_TEST

/* The machine's own state: the result depends on it, but it must be one of
 * the documented outcomes with a message. */
START_TEST(real_driver_path)
{
    unsetenv("KILN_CUDA_LIBRARY");
    KilnDevice *dev = NULL;
    KilnStatus st = kiln_init(&dev, 0);
    if (st == KILN_OK) {
        KilnDeviceInfo info;
        ck_assert_int_eq(kiln_device_info(dev, &info), KILN_OK);
        ck_assert(info.name[0] != 0);
        ck_assert_int_gt(info.sm_count, 0);
        ck_assert_int_gt(info.sm_version, 0);
        ck_assert(info.total_mem > 0);
        ck_assert_int_eq(kiln_shutdown(dev), KILN_OK);
        return;
    }
    ck_assert_msg(st == KILN_ERR_NO_DRIVER || st == KILN_ERR_NO_DEVICE, "status %s: %s", kiln_status_name(st),
                  kiln_last_error());
    ck_assert_ptr_null(dev);
    if (st == KILN_ERR_NO_DRIVER) ck_assert(starts_with(kiln_last_error(), "no CUDA driver ("));
    else ck_assert(starts_with(kiln_last_error(), "no GPU"));
}
END_TEST

/* The toolkit's stub libcuda loads but cannot initialise: NO_DRIVER, named. */
START_TEST(stub_library)
{
    const char *stubs[] = {"/usr/local/cuda/lib64/stubs/libcuda.so", "/usr/local/cuda/lib/stubs/libcuda.so"};
    const char *stub = NULL;
    for (int i = 0; i < 2 && !stub; i++)
        if (access(stubs[i], R_OK) == 0) stub = stubs[i];
    if (!stub) return; /* no toolkit here: nothing to load */
    setenv("KILN_CUDA_LIBRARY", stub, 1);
    KilnDevice *dev = NULL;
    KilnStatus st = kiln_init(&dev, 0);
    ck_assert_msg(st == KILN_ERR_NO_DRIVER || st == KILN_ERR_NO_DEVICE, "status %s: %s", kiln_status_name(st),
                  kiln_last_error());
    ck_assert_ptr_null(dev);
    if (st == KILN_ERR_NO_DRIVER) {
        ck_assert_msg(strstr(kiln_last_error(), "CUDA_ERROR_STUB_LIBRARY") || strstr(kiln_last_error(), "lacks"),
                      "message: %s", kiln_last_error());
    }
}
END_TEST

START_TEST(a_library_that_is_not_cuda)
{
    setenv("KILN_CUDA_LIBRARY", "libm.so.6", 1);
    KilnDevice *dev = NULL;
    ck_assert_int_eq(kiln_init(&dev, 0), KILN_ERR_NO_DRIVER);
    ck_assert_msg(strstr(kiln_last_error(), "lacks cuInit"), "message: %s", kiln_last_error());
}
END_TEST

START_TEST(driver_error_format)
{
    /* No driver loaded in this process: names and texts come from the runtime's table. */
    ck_assert_int_eq(rt_driver_error_code("cuLaunchKernel", 1), KILN_ERR_DRIVER);
    ck_assert_str_eq(kiln_last_error(), "cuLaunchKernel failed: CUDA_ERROR_INVALID_VALUE: invalid argument");
    ck_assert_int_eq(rt_driver_error_code("cuMemAlloc_v2", 2), KILN_ERR_DRIVER);
    ck_assert_str_eq(kiln_last_error(), "cuMemAlloc_v2 failed: CUDA_ERROR_OUT_OF_MEMORY: out of memory");
    ck_assert_int_eq(rt_driver_error_code("cuModuleLoadDataEx", 9999), KILN_ERR_DRIVER);
    ck_assert_str_eq(kiln_last_error(), "cuModuleLoadDataEx failed: CUresult 9999");
}
END_TEST

START_TEST(status_names_and_version)
{
    ck_assert_str_eq(kiln_status_name(KILN_OK), "KILN_OK");
    ck_assert_str_eq(kiln_status_name(KILN_ERR_NO_DRIVER), "KILN_ERR_NO_DRIVER");
    ck_assert_str_eq(kiln_status_name(KILN_ERR_ARGS), "KILN_ERR_ARGS");
    ck_assert_str_eq(kiln_status_name(KILN_ERR_INTERNAL), "KILN_ERR_INTERNAL");
    ck_assert_str_eq(kiln_status_name((KilnStatus)999), "KILN_ERR_UNKNOWN");
    for (int s = KILN_OK; s <= KILN_ERR_INTERNAL; s++)
        ck_assert(starts_with(kiln_status_name((KilnStatus)s), "KILN_"));
    ck_assert_str_eq(kiln_version(), KILN_VERSION);
}
END_TEST

static void *other_thread(void *arg)
{
    kiln_set_error(KILN_ERR_IO, "thread %d error", *(int *)arg);
    static _Thread_local char copy[64];
    snprintf(copy, sizeof copy, "%s", kiln_last_error());
    return strcmp(copy, "thread 2 error") == 0 ? arg : NULL;
}

START_TEST(last_error_is_thread_local)
{
    ck_assert_int_eq(kiln_set_error(KILN_ERR_USAGE, "main %s", "error"), KILN_ERR_USAGE);
    pthread_t t;
    int two = 2;
    void *ret = NULL;
    ck_assert_int_eq(pthread_create(&t, NULL, other_thread, &two), 0);
    pthread_join(t, &ret);
    ck_assert_ptr_eq(ret, &two);
    ck_assert_str_eq(kiln_last_error(), "main error");
    kiln_clear_error();
    ck_assert_str_eq(kiln_last_error(), "");
}
END_TEST

START_TEST(long_messages_are_truncated_visibly)
{
    char big[20000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = 0;
    kiln_set_error(KILN_ERR_COMPILE, "diagnostics: %s", big);
    size_t n = strlen(kiln_last_error());
    ck_assert(n > 4000 && n < sizeof big);
    ck_assert_str_eq(kiln_last_error() + n - 6, " [...]");
    kiln_set_error(KILN_ERR_COMPILE, "head");
    rt_append_error(big);
    ck_assert(starts_with(kiln_last_error(), "headxxx"));
    ck_assert_str_eq(kiln_last_error() + strlen(kiln_last_error()) - 6, " [...]");
}
END_TEST

START_TEST(null_arguments_are_usage_errors)
{
    ck_assert_int_eq(kiln_init(NULL, 0), KILN_ERR_USAGE);
    ck_assert_int_eq(kiln_device_count(NULL), KILN_ERR_USAGE);
    ck_assert_int_eq(kiln_shutdown(NULL), KILN_OK);
    ck_assert_int_eq(kiln_module_free(NULL), KILN_OK);
    ck_assert_int_eq(kiln_stream_destroy(NULL), KILN_OK);
    ck_assert_int_eq(kiln_event_destroy(NULL), KILN_OK);
    KilnStream *ws = (KilnStream *)0x1;
    ck_assert_int_eq(kiln_stream_wrap(NULL, NULL, &ws), KILN_ERR_USAGE);
    /* a wrapped stream is the caller's: destroying the handle never touches the device (a
     * bad KilnDevice here would fault if it did) */
    ck_assert_int_eq(kiln_stream_wrap((KilnDevice *)0x18, (void *)0x1234, &ws), KILN_OK);
    ck_assert_int_eq(kiln_stream_destroy(ws), KILN_OK);
    KilnDevPtr p = 0;
    ck_assert_int_eq(kiln_malloc(NULL, 16, &p), KILN_ERR_USAGE);
    ck_assert_msg(strstr(kiln_last_error(), "kiln_malloc"), "message: %s", kiln_last_error());
    int grid[3] = {1, 1, 1};
    ck_assert_int_eq(kiln_launch(NULL, grid, NULL, NULL, 0), KILN_ERR_USAGE);
    KilnKernel *k = (KilnKernel *)0x1;
    ck_assert_int_eq(kiln_kernel_get(NULL, "x", &k), KILN_ERR_USAGE);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("runtime_driver");
    TCase *tc = tcase_create("driver");
    tcase_add_test(tc, no_driver_forced);
    tcase_add_test(tc, real_driver_path);
    tcase_add_test(tc, stub_library);
    tcase_add_test(tc, a_library_that_is_not_cuda);
    tcase_add_test(tc, driver_error_format);
    tcase_add_test(tc, status_names_and_version);
    tcase_add_test(tc, last_error_is_thread_local);
    tcase_add_test(tc, long_messages_are_truncated_visibly);
    tcase_add_test(tc, null_arguments_are_usage_errors);
    suite_add_tcase(s, tc);
    return s;
}

TU_MAIN(suite)
