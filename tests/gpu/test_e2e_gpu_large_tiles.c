/* test_e2e_gpu_large_tiles.c — the code paths large tiles take (issue 12) on a
 * real GPU, against float64 / exact references on random inputs:
 *   - an unmasked f32 store of a [256, 256] tile: 512 registers a thread, so
 *     the stores are inline PTX (cg_memory.c, above CG_ASM_STORE_REGS), over 3
 *     programs; the output is device-filled (0xFF) first and one pad element
 *     past the last tile must stay that way;
 *   - the same with a mask on a ragged length (never a multiple of the tile);
 *   - an i8 64 x 64 x 64 dot with an i32 accumulator on CUDA cores: 2048
 *     multiply-adds a thread, emitted as mad.lo.s32 (cg_dot_fma.c), exact.
 * Without a GPU: "SKIP: no GPU (<reason>)" and exit 77.
 */
#define GPU_UTIL_RUNTIME_ONLY
#include "tests/gpu/gpu_util.h"

#include <stdlib.h>
#include <string.h>

static KilnDevice *g_dev;
static KilnDeviceInfo g_info;
static uint64_t g_rng = 0x2545f4914f6cdd1dull;

#define OK(call) ck_assert_msg((call) == KILN_OK, "%s: %s", #call, kiln_last_error())

static const char *SRC =
    "kernel big(X: *f32, Y: *f32, n: i32, const BM: i32 = 256, const BN: i32 = 256) {\n"
    "    let offs = (program_id(0) * BM + arange(BM))[:, None] * BN + arange(BN)[None, :];\n"
    "    store(Y + offs, load(X + offs) * 2.0 + 1.0);\n"
    "}\n"
    "kernel big_masked(X: *f32, Y: *f32, n: i32, const BM: i32 = 256, const BN: i32 = 256) {\n"
    "    let offs = (program_id(0) * BM + arange(BM))[:, None] * BN + arange(BN)[None, :];\n"
    "    store(Y + offs, load(X + offs, mask = offs < n, other = 0.0) * 2.0 + 1.0, mask = offs < n);\n"
    "}\n"
    "kernel dot_i8(A: *i8, C: *i32) {\n"
    "    let o = arange(64)[:, None] * 64 + arange(64)[None, :];\n"
    "    let a = load(A + o);\n"
    "    store(C + o, dot(a, a));\n"
    "}\n";

static KilnKernel *kernel(KilnModule **m, const char *name)
{
    KilnCompileOptions o = {.kernel = name};
    OK(kiln_module_compile(g_dev, "large.tile", SRC, &o, m));
    KilnKernel *k = NULL;
    OK(kiln_kernel_get(*m, name, &k));
    return k;
}

/* Y = 2 X + 1 on the first n of 3 tiles' elements; Y is one element longer. */
static void run_store(const char *name, int n)
{
    enum { TILE = 256 * 256, PROGRAMS = 3 };
    size_t cap = (size_t)TILE * PROGRAMS + 1;
    float *x = malloc(cap * 4), *y = malloc(cap * 4);
    ck_assert(x && y);
    for (size_t i = 0; i < cap; i++) x[i] = gu_rnd(&g_rng, 4.0f);
    KilnModule *m = NULL;
    KilnKernel *k = kernel(&m, name);
    KilnHostArg a[3] = {kiln_host_buf(x, cap * 4, KILN_HOST_IN), kiln_host_buf(y, cap * 4, KILN_HOST_OUT),
                        kiln_host_scalar(kiln_arg_i32(n))};
    int grid[3] = {PROGRAMS, 1, 1};
    KilnHostStep step = KILN_HOST_STEP_CHECK;
    OK(kiln_host_launch(k, grid, a, 3, &step));
    double worst = 0;
    for (int i = 0; i < n; i++) worst = gu_worse(worst, (double)y[i], 2.0 * (double)x[i] + 1.0);
    ck_assert_msg(worst <= 1e-6, "%s: max |error| %g against float64", name, worst);
    for (size_t i = (size_t)n; i < cap; i++) {
        uint32_t u;
        memcpy(&u, &y[i], 4);
        ck_assert_msg(u == 0xFFFFFFFFu, "%s: Y[%zu] past n = %d was written", name, i, n);
    }
    kiln_module_free(m);
    free(x), free(y);
}

START_TEST(unmasked_store_of_512_registers) { run_store("big", 3 * 256 * 256); }
END_TEST

START_TEST(masked_store_ragged) { run_store("big_masked", 2 * 256 * 256 + 12345); }
END_TEST

START_TEST(i8_dot_exact)
{
    int8_t a[64 * 64];
    int32_t c[64 * 64];
    for (int i = 0; i < 64 * 64; i++) a[i] = (int8_t)(gu_rnd(&g_rng, 127.0f));
    KilnModule *m = NULL;
    KilnKernel *k = kernel(&m, "dot_i8");
    KilnHostArg args[2] = {kiln_host_buf(a, sizeof a, KILN_HOST_IN), kiln_host_buf(c, sizeof c, KILN_HOST_OUT)};
    int grid[3] = {1, 1, 1};
    KilnHostStep step = KILN_HOST_STEP_CHECK;
    OK(kiln_host_launch(k, grid, args, 2, &step));
    for (int i = 0; i < 64; i++)
        for (int j = 0; j < 64; j++) {
            int64_t ref = 0;
            for (int t = 0; t < 64; t++) ref += (int64_t)a[i * 64 + t] * a[t * 64 + j];
            ck_assert_msg(c[i * 64 + j] == ref, "C[%d][%d] = %d, expected %lld", i, j, c[i * 64 + j],
                          (long long)ref);
        }
    kiln_module_free(m);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("gpu_large_tiles");
    TCase *tc = tcase_create("large_tiles");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, unmasked_store_of_512_registers);
    tcase_add_test(tc, masked_store_ragged);
    tcase_add_test(tc, i8_dot_exact);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return gu_main(&g_dev, &g_info, suite, "/tmp/kiln-large-tiles-cache-XXXXXX", NULL); }
