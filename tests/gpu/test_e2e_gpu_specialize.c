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
 * And with examples/matmul.tile (runtime strides):
 *   - row-major A, B, C from kiln_malloc with ragged M, N, K (N, K multiples
 *     of 16, none a multiple of the blocks): C matches a float64 reference;
 *     the launch key has the unit strides (stride_ak, stride_bn, stride_cn
 *     == 1) and the 16-divisible values, and the chosen variant's code
 *     (its compile request recompiled to PTX) pipelines with cp.async;
 *   - a transposed B (stride_bk = 1) is another key and also right;
 *   - a module compiled with stride_ak==1 refuses stride_ak = 2.
 * Without a GPU: one line "SKIP: no GPU (<reason>)" and exit 77 (ctest: skipped).
 */
#include "tests/testutil.h"
#include "compiler/support/support.h"
#include "kiln.h"
#include "jit_internal.h"

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
    KilnParamHint h[] = {{"n", 16, 0}, {"X", 16, 0}};
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

/* ---- examples/matmul.tile: unit strides ---- */

#define MM_M 197
#define MM_N 176
#define MM_K 144
#define MM_PAD 64   /* floats after C that must stay NaN */

static char *g_mm_src;

typedef struct MatmulBufs {
    KilnDevPtr a, b, c;
    uint16_t *ha, *hb;  /* f16 bits: A row-major [M, K]; B [K, N] row-major or, transposed, [N, K] */
    float *hc;
} MatmulBufs;

static void mm_alloc(MatmulBufs *b)
{
    b->ha = malloc(MM_M * MM_K * 2);
    b->hb = malloc(MM_K * MM_N * 2);
    b->hc = malloc((MM_M * MM_N + MM_PAD) * 4);
    ck_assert(b->ha && b->hb && b->hc);
    OK(kiln_malloc(g_dev, MM_M * MM_K * 2, &b->a));
    OK(kiln_malloc(g_dev, MM_K * MM_N * 2, &b->b));
    OK(kiln_malloc(g_dev, (MM_M * MM_N + MM_PAD) * 4, &b->c));
}

static void mm_free(MatmulBufs *b)
{
    kiln_free(g_dev, b->a), kiln_free(g_dev, b->b), kiln_free(g_dev, b->c);
    free(b->ha), free(b->hb), free(b->hc);
}

/* The 12 runtime arguments of matmul; B transposed: stride_bk = 1, stride_bn = K. */
static void mm_args(const MatmulBufs *b, bool bt, int stride_ak, KilnArg a[12])
{
    a[0] = kiln_arg_ptr(b->a), a[1] = kiln_arg_ptr(b->b), a[2] = kiln_arg_ptr(b->c);
    a[3] = kiln_arg_i32(MM_M), a[4] = kiln_arg_i32(MM_N), a[5] = kiln_arg_i32(MM_K);
    a[6] = kiln_arg_i32(MM_K), a[7] = kiln_arg_i32(stride_ak);
    a[8] = kiln_arg_i32(bt ? 1 : MM_N), a[9] = kiln_arg_i32(bt ? MM_K : 1);
    a[10] = kiln_arg_i32(MM_N), a[11] = kiln_arg_i32(1);
}

/* Random inputs, NaN-poisoned C, one launch, C against float64. */
static void mm_run_and_check(KilnKernel *k, MatmulBufs *b, bool bt)
{
    for (int i = 0; i < MM_M * MM_K; i++) b->ha[i] = kiln_f32_to_f16(rnd());
    for (int i = 0; i < MM_K * MM_N; i++) b->hb[i] = kiln_f32_to_f16(rnd());
    OK(kiln_memcpy_htod(g_dev, b->a, b->ha, MM_M * MM_K * 2));
    OK(kiln_memcpy_htod(g_dev, b->b, b->hb, MM_K * MM_N * 2));
    OK(kiln_memset(g_dev, b->c, 0xFF, (MM_M * MM_N + MM_PAD) * 4));
    KilnArg a[12];
    mm_args(b, bt, 1, a);
    int grid[3] = {(MM_M + 63) / 64, (MM_N + 63) / 64, 1};
    OK(kiln_launch(k, grid, NULL, a, 12));
    OK(kiln_synchronize(g_dev));
    OK(kiln_memcpy_dtoh(g_dev, b->hc, b->c, (MM_M * MM_N + MM_PAD) * 4));
    for (int i = 0; i < MM_M; i++)
        for (int j = 0; j < MM_N; j++) {
            double ref = 0;
            for (int q = 0; q < MM_K; q++)
                ref += (double)kiln_f16_to_f32(b->ha[i * MM_K + q]) * kiln_f16_to_f32(bt ? b->hb[j * MM_K + q] : b->hb[q * MM_N + j]);
            double got = b->hc[i * MM_N + j];
            ck_assert_msg(fabs(got - ref) <= 1e-3 * (1 + fabs(ref)), "%s B: C[%d][%d] = %.6g, want %.6g",
                          bt ? "transposed" : "row-major", i, j, got, ref);
        }
    for (int i = MM_M * MM_N; i < MM_M * MM_N + MM_PAD; i++)
        ck_assert_msg(isnan(b->hc[i]), "C[%d] past M x N was written", i);
}

static int count_str(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle)) n++;
    return n;
}

/* Variant `i` of `m`: its hints include NAME==1 for exactly `ones` (names,
 * NULL-terminated) and its code, recompiled to PTX from the same request,
 * has `want_cp_async` (> 0) cp.async instructions or none (0). */
static void check_variant(KilnModule *m, int i, const char *const *ones, bool want_cp_async)
{
    KilnCompileOptions o;
    KilnParamHint *h = NULL;
    const char *path, *src;
    OK(rt_module_variant_request(m, i, &o, &h, &path, &src));
    int nones = 0;
    for (int j = 0; j < o.nhints; j++) {
        if (!h[j].equals_one) continue;
        bool listed = false;
        for (int q = 0; ones[q]; q++) listed |= !strcmp(ones[q], h[j].name);
        ck_assert_msg(listed, "variant %d: unexpected hint %s==1", i, h[j].name);
        nones++;
    }
    int want = 0;
    while (ones[want]) want++;
    ck_assert_int_eq(nones, want);
    o.emit = KILN_EMIT_PTX;
    KilnCompileResult r;
    KilnStatus st = kiln_compile(path, src, &o, &r);
    ck_assert_msg(st == KILN_OK, "recompiling variant %d: %s\n%s", i, kiln_status_name(st),
                  r.diagnostics ? r.diagnostics : "");
    int n = count_str(r.output, "cp.async");
    ck_assert_msg(want_cp_async ? n > 0 : n == 0, "variant %d (%s): %d cp.async", i, o.arch ? o.arch : "?", n);
    kiln_compile_result_free(&r);
    free(h);
}

START_TEST(matmul_unit_strides_get_cp_async)
{
    KilnCompileOptions o = {.kernel = "matmul"};
    KilnModule *m = NULL;
    KilnStatus st = kiln_module_compile(g_dev, "examples/matmul.tile", g_mm_src, &o, &m);
    ck_assert_msg(st == KILN_OK, "kiln_module_compile: %s: %s", kiln_status_name(st), kiln_last_error());
    KilnKernel *k = NULL;
    OK(kiln_kernel_get(m, NULL, &k));
    ck_assert_int_eq(kiln_kernel_info(k)->nparams, 12);
    MatmulBufs b;
    mm_alloc(&b);

    mm_run_and_check(k, &b, false);
    ck_assert_int_eq(rt_module_variants(m), 1);
    static const char *const rowmajor_ones[] = {"stride_ak", "stride_bn", "stride_cn", NULL};
    check_variant(m, 0, rowmajor_ones, true);
    mm_run_and_check(k, &b, false); /* same key: reused */
    ck_assert_int_eq(rt_module_variants(m), 1);

    /* B transposed: stride_bk == 1 instead of stride_bn; another variant, still right
     * (B's tile is contiguous along k now: whether it pipelines is the backend's call) */
    mm_run_and_check(k, &b, true);
    ck_assert_int_eq(rt_module_variants(m), 2);
    static const char *const bt_ones[] = {"stride_ak", "stride_bk", "stride_cn", NULL};
    KilnCompileOptions vo;
    KilnParamHint *vh = NULL;
    const char *vp, *vs;
    OK(rt_module_variant_request(m, 1, &vo, &vh, &vp, &vs));
    int n1 = 0;
    for (int j = 0; j < vo.nhints; j++)
        if (vh[j].equals_one)
            for (int q = 0; bt_ones[q]; q++) n1 += !strcmp(bt_ones[q], vh[j].name);
    ck_assert_int_eq(n1, 3);
    free(vh);
    ck_assert_int_eq(rt_module_variant_request(m, 2, &vo, &vh, &vp, &vs), KILN_ERR_NOT_FOUND);
    OK(kiln_module_free(m));

    /* a module compiled with stride_ak==1 refuses another stride, naming it */
    KilnParamHint h[] = {{"stride_ak", 1, 1}};
    o.hints = h;
    o.nhints = 1;
    st = kiln_module_compile(g_dev, "examples/matmul.tile", g_mm_src, &o, &m);
    ck_assert_msg(st == KILN_OK, "kiln_module_compile: %s: %s", kiln_status_name(st), kiln_last_error());
    OK(kiln_kernel_get(m, NULL, &k));
    KilnArg a[12];
    mm_args(&b, false, 2, a);
    int grid[3] = {1, 1, 1};
    ck_assert_int_eq(kiln_launch(k, grid, NULL, a, 12), KILN_ERR_ARGS);
    ck_assert_msg(strstr(kiln_last_error(), "(stride_ak) = 2 is not 1") &&
                      strstr(kiln_last_error(), "(hint stride_ak==1)"),
                  "%s", kiln_last_error());
    mm_run_and_check(k, &b, false);
    OK(kiln_module_free(m));
    mm_free(&b);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("gpu_specialize");
    TCase *tc = tcase_create("all");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, variants_per_key);
    tcase_add_test(tc, module_hints_are_promises);
    tcase_add_test(tc, matmul_unit_strides_get_cp_async);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    KilnStatus st = kiln_init(&g_dev, 0);
    if (st == KILN_ERR_NO_DRIVER || st == KILN_ERR_NO_DEVICE) {
        char why[600];
        snprintf(why, sizeof why, "no GPU (%s)", kiln_last_error());
        return tu_skip(why);   /* exit 77: ctest reports it skipped */
    }
    if (st != KILN_OK) {
        printf("FAIL: kiln_init: %s: %s\n", kiln_status_name(st), kiln_last_error());
        return EXIT_FAILURE;
    }
    char dir[] = "/tmp/kiln-spec-cache-XXXXXX"; /* a fresh cache: variants really compile */
    if (mkdtemp(dir)) setenv("KILN_CACHE_DIR", dir, 1);
    g_src = sup_read_file_text(tu_src_path("examples/vec_add.tile"), NULL);
    g_mm_src = sup_read_file_text(tu_src_path("examples/matmul.tile"), NULL);
    g_hx = malloc(CAP * 4), g_hy = malloc(CAP * 4), g_hz = malloc(CAP * 4);
    if (!g_src || !g_mm_src || !g_hx || !g_hy || !g_hz || kiln_malloc(g_dev, CAP * 4, &g_x) != KILN_OK ||
        kiln_malloc(g_dev, CAP * 4, &g_y) != KILN_OK || kiln_malloc(g_dev, CAP * 4, &g_z) != KILN_OK) {
        printf("FAIL: setup: %s\n", g_src && g_mm_src ? kiln_last_error() : "cannot read examples/*.tile");
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
    free(g_hx), free(g_hy), free(g_hz), free(g_src), free(g_mm_src);
    kiln_shutdown(g_dev);
    return nf == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
