/* test_e2e_gpu_host_launch.c — kiln_host_launch on a real GPU, with
 * examples/vec_add.tile through kiln_module_compile:
 *   - ragged n (never a multiple of the block), random non-zero inputs, Z one
 *     pad longer than n: KILN_HOST_OUT gives x + y within float rounding of a
 *     float64 reference, and the pad comes back as the device fill (0xFF);
 *     KILN_HOST_INOUT keeps the host's own (different) poison in the pad,
 *     since it was copied in; a buffer passed KILN_HOST_IN is never written
 *     back; the inputs are unchanged; the launch went through the module's
 *     launch-time specialisation (a variant exists unless KILN_SPECIALIZE=0);
 *   - a launch the runtime refuses (3 arguments for 4) reports kiln_launch's
 *     own KILN_ERR_ARGS message at KILN_HOST_STEP_RUN and writes nothing back;
 *     repeated with 4 GiB OUT buffers it must free them every time (a leak
 *     runs the device out of memory within a few calls).
 * Without a GPU: one line "SKIP: no GPU (<reason>)" and exit 77 (ctest: skipped).
 */
#define GPU_UTIL_RUNTIME_ONLY
#include "tests/gpu/gpu_util.h"
#include "compiler/support/support.h"
#include "jit_internal.h"

#include <stdlib.h>
#include <string.h>

#define BLOCK 1024
#define PAD 37

static KilnDevice *g_dev;
static KilnDeviceInfo g_info;
static uint64_t g_rng = 0x9e3779b97f4a7c15ull;

#define OK(call) ck_assert_msg((call) == KILN_OK, "%s: %s", #call, kiln_last_error())

static KilnModule *compile_vec_add(KilnKernel **k)
{
    char *src = sup_read_file_text(tu_src_path("examples/vec_add.tile"), NULL);
    ck_assert_msg(src, "cannot read examples/vec_add.tile");
    KilnCompileOptions o = {.kernel = "vec_add"};
    KilnModule *m = NULL;
    OK(kiln_module_compile(g_dev, "examples/vec_add.tile", src, &o, &m));
    free(src);
    OK(kiln_kernel_get(m, "vec_add", k));
    return m;
}

static bool has_bits(float f, uint32_t bits)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u == bits;
}

/* One run of vec_add on n elements with Z passed as `zdir`. */
static void run_n(KilnKernel *k, int n, KilnHostDir zdir)
{
    size_t cap = (size_t)n + PAD;
    float *x = malloc(cap * 4), *y = malloc(cap * 4), *z = malloc(cap * 4), *x0 = malloc(cap * 4);
    ck_assert(x && y && z && x0);
    for (size_t i = 0; i < cap; i++) x[i] = gu_rnd(&g_rng, 4.0f), y[i] = gu_rnd(&g_rng, 4.0f);
    memcpy(x0, x, cap * 4);
    const uint32_t host_poison = 0x7fc0beefu; /* a NaN, not the device fill */
    for (size_t i = 0; i < cap; i++) memcpy(&z[i], &host_poison, 4);
    KilnHostArg a[4] = {kiln_host_buf(x, cap * 4, KILN_HOST_IN), kiln_host_buf(y, cap * 4, KILN_HOST_IN),
                        kiln_host_buf(z, cap * 4, zdir), kiln_host_scalar(kiln_arg_i32(n))};
    int grid[3] = {(n + BLOCK - 1) / BLOCK, 1, 1};
    KilnHostStep step = KILN_HOST_STEP_CHECK;
    OK(kiln_host_launch(k, grid, a, 4, &step));
    ck_assert_int_eq(step, KILN_HOST_STEP_NONE);
    ck_assert(memcmp(x, x0, cap * 4) == 0);
    if (zdir == KILN_HOST_IN) {
        for (size_t i = 0; i < cap; i++) ck_assert_msg(has_bits(z[i], host_poison), "Z[%zu] written back", i);
    } else {
        double worst = 0;
        for (int i = 0; i < n; i++) worst = gu_worse(worst, (double)z[i], (double)x[i] + (double)y[i]);
        /* |x + y| < 8: one f32 rounding is at most 2^-21 */
        ck_assert_msg(worst <= 1e-6, "n=%d: max |error| %g against float64", n, worst);
        uint32_t pad = zdir == KILN_HOST_OUT ? 0xFFFFFFFFu : host_poison;
        for (size_t i = (size_t)n; i < cap; i++)
            ck_assert_msg(has_bits(z[i], pad), "n=%d: pad Z[%zu] changed", n, i);
    }
    free(x), free(y), free(z), free(x0);
}

START_TEST(vec_add_through_the_helper)
{
    KilnKernel *k = NULL;
    KilnModule *m = compile_vec_add(&k);
    const int sizes[] = {1, 1000, 100003, 1 << 20 | 77};
    for (int i = 0; i < 4; i++) {
        run_n(k, sizes[i], KILN_HOST_OUT);
        run_n(k, sizes[i], KILN_HOST_INOUT);
    }
    run_n(k, 4099, KILN_HOST_IN);
    const char *spec = getenv("KILN_SPECIALIZE");
    if (!spec || strcmp(spec, "0") != 0)
        ck_assert_int_ge(rt_module_variants(m), 1);
    kiln_module_free(m);
}
END_TEST

START_TEST(refused_launch_frees_everything)
{
    KilnKernel *k = NULL;
    KilnModule *m = compile_vec_add(&k);
    enum { N = 3001 };
    float x[N], y[N], z[N];
    for (int i = 0; i < N; i++) x[i] = gu_rnd(&g_rng, 1.0f), y[i] = gu_rnd(&g_rng, 1.0f);
    memset(z, GU_POISON_BYTE, sizeof z);
    KilnHostArg a[3] = {kiln_host_buf(x, sizeof x, KILN_HOST_IN), kiln_host_buf(y, sizeof y, KILN_HOST_IN),
                        kiln_host_buf(z, sizeof z, KILN_HOST_INOUT)};
    int grid[3] = {(N + BLOCK - 1) / BLOCK, 1, 1};
    KilnHostStep step = KILN_HOST_STEP_NONE;
    ck_assert_int_eq(kiln_host_launch(k, grid, a, 3, &step), KILN_ERR_ARGS);
    ck_assert_int_eq(step, KILN_HOST_STEP_RUN);
    ck_assert_msg(strstr(kiln_last_error(), "kernel vec_add takes 4 arguments, got 3"), "%s", kiln_last_error());
    for (int i = 0; i < N; i++) ck_assert(gu_is_poison(z[i]));

    /* Big OUT buffers: device-filled, never copied, so only the device
     * allocation is large (the host memory is never touched). */
    size_t big = (size_t)4 << 30;
    if (big * 2 > g_info.total_mem / 2) big = g_info.total_mem / 8;
    void *hb = malloc(big);
    ck_assert(hb);
    KilnHostArg b[3] = {kiln_host_buf(hb, big, KILN_HOST_OUT), kiln_host_buf(hb, big, KILN_HOST_OUT),
                        kiln_host_scalar(kiln_arg_i32(N))};
    int calls = (int)(4 * g_info.total_mem / (2 * big)) + 1;  /* 4x the device's memory if leaked */
    for (int i = 0; i < calls; i++) {
        KilnStatus st = kiln_host_launch(k, grid, b, 3, &step);
        ck_assert_msg(st == KILN_ERR_ARGS && step == KILN_HOST_STEP_RUN, "call %d: %s at step %d: %s", i,
                      kiln_status_name(st), (int)step, kiln_last_error());
    }
    free(hb);
    kiln_module_free(m);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("gpu_host_launch");
    TCase *tc = tcase_create("host_launch");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, vec_add_through_the_helper);
    tcase_add_test(tc, refused_launch_frees_everything);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return gu_main(&g_dev, &g_info, suite, "/tmp/kiln-host-launch-cache-XXXXXX", NULL); }
