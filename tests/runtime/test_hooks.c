/* test_hooks.c — the runtime core's attachment points for the layers above
 * (rt_internal.h), without a GPU: per-device teardowns register once each, up
 * to RT_MAX_TEARDOWN, and the one past the limit is refused with a message
 * rather than dropped in silence (a dropped teardown would leak a layer's
 * per-device state at kiln_shutdown). kiln_shutdown(NULL) runs none of them.
 * That kiln_shutdown(dev) runs them needs a device: not tested here.
 */
#include "testutil.h"

#include <string.h>

#include "kiln_runtime.h"
#include "rt_internal.h"

static int g_calls;
static void t0(KilnDevice *d) { (void)d; g_calls++; }
static void t1(KilnDevice *d) { (void)d; g_calls++; }
static void t2(KilnDevice *d) { (void)d; g_calls++; }
static void t3(KilnDevice *d) { (void)d; g_calls++; }
static void t4(KilnDevice *d) { (void)d; g_calls++; }
static void t5(KilnDevice *d) { (void)d; g_calls++; }
static void t6(KilnDevice *d) { (void)d; g_calls++; }
static void t7(KilnDevice *d) { (void)d; g_calls++; }
static void t8(KilnDevice *d) { (void)d; g_calls++; }

START_TEST(teardowns_register_once_up_to_the_limit)
{
    RtDeviceTeardownFn fns[] = {t0, t1, t2, t3, t4, t5, t6, t7};
    ck_assert_int_eq((int)(sizeof fns / sizeof fns[0]), RT_MAX_TEARDOWN);
    for (int i = 0; i < RT_MAX_TEARDOWN; i++) {
        ck_assert_int_eq(rt_on_device_shutdown(fns[i]), KILN_OK);
        ck_assert_int_eq(rt_on_device_shutdown(fns[i]), KILN_OK);   /* again: a no-op, takes no slot */
    }
    ck_assert_int_eq(rt_on_device_shutdown(t0), KILN_OK);          /* known ones still register */
    ck_assert_int_eq(rt_on_device_shutdown(t8), KILN_ERR_INTERNAL);
    ck_assert_ptr_nonnull(strstr(kiln_last_error(), "internal error"));
    ck_assert_ptr_nonnull(strstr(kiln_last_error(), "rt_on_device_shutdown"));
    ck_assert_int_eq(kiln_shutdown(NULL), KILN_OK);
    ck_assert_int_eq(g_calls, 0);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("hooks");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, teardowns_register_once_up_to_the_limit);
    suite_add_tcase(s, tc);
    return s;
}

TU_MAIN(suite)
