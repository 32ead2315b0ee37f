/* test_e2e_gpu_specialize.c — launch-time specialisation on a real GPU, with
 * examples/vec_add.tile through kiln_module_compile:
 *   - aligned buffers and n % 16 == 0, aligned with ragged n, and buffers
 *     offset by a few elements (X + 1: no longer assumed 16-byte aligned) all
 *     give exact results, with random inputs and NaN-poisoned outputs whose
 *     untouched neighbours must stay NaN;
 *   - one variant per key: same key reuses (and relaunches cost no compile),
 *     new keys add one; specialisation off adds none; the kernel handle and
 *     its info never change;
 *   - a module compiled with a hint refuses launches that break it.
 * Without a GPU: one line "SKIP: no GPU (<reason>)" and success.
 */
#include "tests/testutil.h"
#include "compiler/support/support.h"
#include "kiln.h"
#include "rt_internal.h"

#include <math.h>
#include <string.h>
#include <time.h>

#define CAP ((1 << 20) + 64)   /* floats per buffer */
#define BLOCK 1024

static KilnDevice *g_dev;
static KilnDevPtr g_x, g_y, g_z;
static float *g_hx, *g_hy, *g_hz;
static char *g_src;

#define OK(call) ck_assert_msg((call) == KILN_OK, "%s: %s", #call, kiln_last_error())

static uint64_t g_rng = 0x2545f4914f6cdd1dull;
static float rnd(void) /* uniform in [-1, 1), never exactly 0 */
{
    g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
    float f = (float)((g_rng >> 40) & 0xffffff) / 8388608.0f - 1.0f;
    return f == 0.0f ? 0.5f : f;
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static KilnModule *compile(const KilnParamHint *hints, int nhints)
{
    KilnCompileOptions o = {.kernel = "vec_add", .hints = hints, .nhints = nhints};
    KilnModule *m = NULL;
    KilnStatus st = kiln_module_compile(g_dev, "examples/vec_add.tile", g_src, &o, &m);
    ck_assert_msg(st == KILN_OK, "kiln_module_compile: %s: %s", kiln_status_name(st), kiln_last_error());
    return m;
}

static void args_for(KilnArg a[4], int xo, int yo, int zo, int n)
{
    a[0] = kiln_arg_ptr(g_x + 4 * (KilnDevPtr)xo);
    a[1] = kiln_arg_ptr(g_y + 4 * (KilnDevPtr)yo);
    a[2] = kiln_arg_ptr(g_z + 4 * (KilnDevPtr)zo);
    a[3] = kiln_arg_i32(n);
}

/* Z[zo + i] = X[xo + i] + Y[yo + i] for i < n, exactly; Z elsewhere stays NaN. */
static void run_and_check(KilnKernel *k, int xo, int yo, int zo, int n)
{
    for (int i = 0; i < CAP; i++) g_hx[i] = rnd(), g_hy[i] = rnd();
    OK(kiln_memcpy_htod(g_dev, g_x, g_hx, CAP * 4));
    OK(kiln_memcpy_htod(g_dev, g_y, g_hy, CAP * 4));
    OK(kiln_memset(g_dev, g_z, 0xFF, CAP * 4));
    KilnArg a[4];
    args_for(a, xo, yo, zo, n);
    int grid[3] = {(n + BLOCK - 1) / BLOCK, 1, 1};
    OK(kiln_launch(k, grid, NULL, a, 4));
    OK(kiln_synchronize(g_dev));
    OK(kiln_memcpy_dtoh(g_dev, g_hz, g_z, CAP * 4));
    for (int i = 0; i < n; i++) {
        float want = g_hx[xo + i] + g_hy[yo + i];
        ck_assert_msg(g_hz[zo + i] == want, "offsets %d/%d/%d n %d: Z[%d] = %g, want %g", xo, yo, zo, n, i,
                      (double)g_hz[zo + i], (double)want);
    }
    for (int i = 0; i < zo; i++) ck_assert_msg(isnan(g_hz[i]), "Z[%d] before the output was written", i);
    for (int i = zo + n; i < CAP; i++) ck_assert_msg(isnan(g_hz[i]), "Z[%d] past n was written", i);
}

START_TEST(variants_per_key)
{
    KilnModule *m = compile(NULL, 0);
    KilnKernel *k = NULL;
    OK(kiln_kernel_get(m, NULL, &k));
    const KilnKernelInfo *info = kiln_kernel_info(k);
    ck_assert_int_eq(info->nparams, 4);
    ck_assert_int_eq(rt_module_variants(m), 0);

    run_and_check(k, 0, 0, 0, 1 << 20);            /* key {X, Y, Z, n} */
    ck_assert_int_eq(rt_module_variants(m), 1);
    run_and_check(k, 0, 0, 0, 1 << 19);            /* same key */
    run_and_check(k, 4, 8, 12, (1 << 20) - 32);    /* 16-byte offsets: same key */
    ck_assert_int_eq(rt_module_variants(m), 1);
    run_and_check(k, 0, 0, 0, 1000003);            /* ragged n: key {X, Y, Z} */
    ck_assert_int_eq(rt_module_variants(m), 2);
    run_and_check(k, 1, 3, 1, 1 << 19);            /* X + 1 etc.: key {n} */
    ck_assert_int_eq(rt_module_variants(m), 3);
    run_and_check(k, 1, 2, 3, 777777);             /* nothing aligned: the generic kernel */
    ck_assert_int_eq(rt_module_variants(m), 3);

    /* relaunching a known key compiles nothing: launch-only cost */
    KilnArg a[4];
    args_for(a, 0, 0, 0, 1 << 20);
    int grid[3] = {(1 << 20) / BLOCK, 1, 1};
    double t0 = now_ms();
    for (int r = 0; r < 100; r++) OK(kiln_launch(k, grid, NULL, a, 4));
    double per = (now_ms() - t0) / 100;
    OK(kiln_synchronize(g_dev));
    ck_assert_msg(per < 0.5, "%.3f ms per launch of a known variant", per);
    ck_assert_int_eq(rt_module_variants(m), 3);

    /* off: new keys use the generic kernel, results stay right */
    OK(kiln_module_set_specialize(m, 0));
    run_and_check(k, 0, 2, 0, 1 << 18);             /* key {X, Z, n}: not compiled */
    ck_assert_int_eq(rt_module_variants(m), 3);
    OK(kiln_module_set_specialize(m, 1));
    run_and_check(k, 0, 2, 0, 1 << 18);
    ck_assert_int_eq(rt_module_variants(m), 4);

    /* the handle and its signature never changed */
    KilnKernel *k2 = NULL;
    OK(kiln_kernel_get(m, "vec_add", &k2));
    ck_assert_ptr_eq(k2, k);
    ck_assert_ptr_eq(kiln_kernel_info(k), info);
    ck_assert_str_eq(info->name, "vec_add");
    OK(kiln_module_free(m));
}
END_TEST

START_TEST(module_hints_are_promises)
{
    KilnParamHint h[] = {{"n", 16}, {"X", 16}};
    KilnModule *m = compile(h, 2);
    KilnKernel *k = NULL;
    OK(kiln_kernel_get(m, NULL, &k));
    run_and_check(k, 0, 1, 2, 1 << 18);
    OK(kiln_memset(g_dev, g_z, 0xFF, CAP * 4));
    KilnArg a[4];
    int grid[3] = {1000, 1, 1};
    args_for(a, 0, 0, 0, 1000003);
    ck_assert_int_eq(kiln_launch(k, grid, NULL, a, 4), KILN_ERR_ARGS);
    ck_assert_msg(strstr(kiln_last_error(), "(hint n=16)"), "%s", kiln_last_error());
    args_for(a, 1, 0, 0, 1 << 18);
    ck_assert_int_eq(kiln_launch(k, grid, NULL, a, 4), KILN_ERR_ARGS);
    ck_assert_msg(strstr(kiln_last_error(), "is not 16-byte aligned"), "%s", kiln_last_error());
    /* refused launches never ran */
    OK(kiln_synchronize(g_dev));
    OK(kiln_memcpy_dtoh(g_dev, g_hz, g_z, CAP * 4));
    for (int i = 0; i < CAP; i++) ck_assert(isnan(g_hz[i]));
    OK(kiln_module_free(m));
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("gpu_specialize");
    TCase *tc = tcase_create("all");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, variants_per_key);
    tcase_add_test(tc, module_hints_are_promises);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    KilnStatus st = kiln_init(&g_dev, 0);
    if (st == KILN_ERR_NO_DRIVER || st == KILN_ERR_NO_DEVICE) {
        printf("SKIP: no GPU (%s)\n", kiln_last_error());
        return EXIT_SUCCESS;
    }
    if (st != KILN_OK) {
        printf("FAIL: kiln_init: %s: %s\n", kiln_status_name(st), kiln_last_error());
        return EXIT_FAILURE;
    }
    char dir[] = "/tmp/kiln-spec-cache-XXXXXX"; /* a fresh cache: variants really compile */
    if (mkdtemp(dir)) setenv("KILN_CACHE_DIR", dir, 1);
    g_src = read_file_text(tu_src_path("examples/vec_add.tile"), NULL);
    g_hx = malloc(CAP * 4), g_hy = malloc(CAP * 4), g_hz = malloc(CAP * 4);
    if (!g_src || !g_hx || !g_hy || !g_hz || kiln_malloc(g_dev, CAP * 4, &g_x) != KILN_OK ||
        kiln_malloc(g_dev, CAP * 4, &g_y) != KILN_OK || kiln_malloc(g_dev, CAP * 4, &g_z) != KILN_OK) {
        printf("FAIL: setup: %s\n", g_src ? kiln_last_error() : "cannot read examples/vec_add.tile");
        return EXIT_FAILURE;
    }
    SRunner *sr = srunner_create(suite());
    srunner_set_fork_status(sr, CK_NOFORK); /* CUDA does not survive fork */
    srunner_run_all(sr, CK_NORMAL);
    int nf = srunner_ntests_failed(sr);
    srunner_free(sr);
    kiln_free(g_dev, g_x);
    kiln_free(g_dev, g_y);
    kiln_free(g_dev, g_z);
    free(g_hx), free(g_hy), free(g_hz), free(g_src);
    kiln_shutdown(g_dev);
    return nf == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
