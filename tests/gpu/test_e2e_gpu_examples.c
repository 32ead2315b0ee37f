/* test_e2e_gpu_examples.c — every example program compiled by Kiln and run on the GPU.
 *
 * For each of examples/{vec_add,softmax,layer_norm,matmul}.tile: random
 * non-zero inputs with ragged sizes (never a multiple of the block), output
 * buffers poisoned with NaN (0xFF bytes) before the run and padding columns
 * that must still hold the poison afterwards; the GPU result is compared with
 * the CPU interpreter (compiler/interp, same inputs) and with the float64
 * references of examples/ref.c. One table row per example at the end.
 *
 * Without a GPU: one line "SKIP: no GPU (<reason>)" and exit 77 (ctest: skipped).
 * Compiles go through kiln_module_compile with the cache in a fresh temporary
 * directory (and a second compile of each example must hit it).
 */
#include "tests/gpu/gpu_util.h"
#include "examples/ref.c"

#include <math.h>
#include <string.h>
#include <time.h>

static KilnDevice *g_dev;
static KilnDeviceInfo g_info;

/* ---- one row of the final table per example ---- */
typedef struct Row {
    char name[32], shape[48];
    double err_ref, err_interp, tol;
    float ms;
    double compile_ms, cached_ms;
    int pass;
    char why[160];
} Row;
static Row g_rows[8];
static int g_nrows;

static Row *row_begin(const char *name, const char *shape)
{
    Row *r = &g_rows[g_nrows++];
    memset(r, 0, sizeof *r);
    snprintf(r->name, sizeof r->name, "%s", name);
    snprintf(r->shape, sizeof r->shape, "%s", shape);
    r->err_ref = r->err_interp = NAN;
    r->ms = NAN;
    snprintf(r->why, sizeof r->why, "did not finish (see the failure above)");
    return r;
}

static uint64_t g_rng = 0x243f6a8885a308d3ull;
static float rnd(float scale) { return gu_rnd(&g_rng, scale); }

/* ---- arguments by parameter name, for both the GPU and the interpreter ---- */
typedef struct Buf {
    const char *name;
    void *host;        /* inputs: the data; outputs: receives the GPU result */
    size_t bytes;
    int is_output;
    KilnDevPtr dev;
    void *interp;      /* the interpreter's copy */
} Buf;

typedef struct Scalar {
    const char *name;
    int is_float;
    int32_t i;
    float f;
} Scalar;

typedef struct Case {
    const char *file, *kernel;
    const KilnDefine *defines;
    int ndefines;
    Buf *bufs;
    int nbufs;
    Scalar *scalars;
    int nscalars;
    int grid[3];
} Case;

static Buf *find_buf(Case *c, const char *name)
{
    for (int i = 0; i < c->nbufs; i++)
        if (!strcmp(c->bufs[i].name, name)) return &c->bufs[i];
    return NULL;
}

static Scalar *find_scalar(Case *c, const char *name)
{
    for (int i = 0; i < c->nscalars; i++)
        if (!strcmp(c->scalars[i].name, name)) return &c->scalars[i];
    return NULL;
}

/* The signature the runtime launches with is the one kiln_compile reports
 * (this also links kiln_compile into the test: see docs/runtime.md, linking). */
static void check_signature(Case *c, const char *src, const KilnKernelInfo *ki)
{
    KilnCompileOptions o = {.kernel = c->kernel, .defines = c->defines, .ndefines = c->ndefines,
                            .emit = KILN_EMIT_IR};
    KilnCompileResult r;
    KilnStatus st = kiln_compile(c->file, src, &o, &r);
    ck_assert_msg(st == KILN_OK && r.nkernels == 1, "%s: %s", c->file, r.diagnostics ? r.diagnostics : "");
    ck_assert_int_eq(r.kernels[0].nparams, ki->nparams);
    for (int i = 0; i < ki->nparams; i++) {
        ck_assert_str_eq(r.kernels[0].params[i].name, ki->params[i].name);
        ck_assert_int_eq(r.kernels[0].params[i].kind, ki->params[i].kind);
    }
    kiln_compile_result_free(&r);
}

/* Compile, upload, poison, launch, download; the GPU results land in the output bufs' host memory. */
static void run_gpu(Case *c, Row *row)
{
    const char *path = tu_src_path(c->file);
    size_t len = 0;
    char *src = sup_read_file_text(path, &len);
    ck_assert_msg(src, "cannot read %s", path);
    KilnCompileOptions o = {.kernel = c->kernel, .defines = c->defines, .ndefines = c->ndefines};
    KilnModule *m = NULL;
    double t0 = gu_now_ms();
    KilnStatus st = kiln_module_compile(g_dev, c->file, src, &o, &m);
    row->compile_ms = gu_now_ms() - t0;
    if (st != KILN_OK) snprintf(row->why, sizeof row->why, "compile: %s", kiln_status_name(st));
    ck_assert_msg(st == KILN_OK, "%s: kiln_module_compile: %s: %s", c->file, kiln_status_name(st), kiln_last_error());
    /* the same request again must come from the cache */
    KilnModule *m2 = NULL;
    t0 = gu_now_ms();
    st = kiln_module_compile(g_dev, c->file, src, &o, &m2);
    row->cached_ms = gu_now_ms() - t0;
    ck_assert_msg(st == KILN_OK, "%s: second compile: %s", c->file, kiln_last_error());
    kiln_module_free(m2);

    KilnKernel *k = NULL;
    ck_assert_msg(kiln_kernel_get(m, c->kernel, &k) == KILN_OK, "%s", kiln_last_error());
    const KilnKernelInfo *ki = kiln_kernel_info(k);
    check_signature(c, src, ki);
    free(src);
    KilnArg args[32];
    ck_assert_int_le(ki->nparams, 32);
    for (int i = 0; i < c->nbufs; i++) {
        Buf *b = &c->bufs[i];
        ck_assert_msg(kiln_malloc(g_dev, b->bytes, &b->dev) == KILN_OK, "%s", kiln_last_error());
        if (b->is_output) ck_assert(kiln_memset(g_dev, b->dev, GU_POISON_BYTE, b->bytes) == KILN_OK);
        else ck_assert(kiln_memcpy_htod(g_dev, b->dev, b->host, b->bytes) == KILN_OK);
    }
    for (int p = 0; p < ki->nparams; p++) {
        const KilnParam *kp = &ki->params[p];
        Buf *b = find_buf(c, kp->name);
        Scalar *s = find_scalar(c, kp->name);
        ck_assert_msg(b || s, "%s: no argument for parameter %s", c->kernel, kp->name);
        args[p] = b ? kiln_arg_ptr(b->dev) : s->is_float ? kiln_arg_f32(s->f) : kiln_arg_i32(s->i);
    }
    st = kiln_launch(k, c->grid, NULL, args, ki->nparams);
    ck_assert_msg(st == KILN_OK, "%s: launch: %s", c->kernel, kiln_last_error());
    st = kiln_synchronize(g_dev);
    ck_assert_msg(st == KILN_OK, "%s: running the kernel: %s", c->kernel, kiln_last_error());
    for (int i = 0; i < c->nbufs; i++)
        if (c->bufs[i].is_output)
            ck_assert(kiln_memcpy_dtoh(g_dev, c->bufs[i].host, c->bufs[i].dev, c->bufs[i].bytes) == KILN_OK);
    /* timing last: it runs the kernel again over the same inputs */
    float ms = NAN;
    if (kiln_time_launch(k, c->grid, NULL, args, ki->nparams, 20, &ms) == KILN_OK) row->ms = ms;
    for (int i = 0; i < c->nbufs; i++) kiln_free(g_dev, c->bufs[i].dev);
    kiln_module_free(m);
}

/* The same kernel on the interpreter; outputs (poisoned the same way) land in bufs[].interp. */
static void run_interp(Case *c)
{
    const char *path = tu_src_path(c->file);
    size_t len = 0;
    char *src = sup_read_file_text(path, &len);
    ck_assert(src);
    Arena arena;
    arena_init(&arena);
    Diag d;
    IrFunc *f = gu_interp_kernel(&arena, &d, c->file, src, c->kernel, c->defines, c->ndefines);
    StrBuf err;
    sb_init(&err);
    InterpBuffer ib[8];
    InterpArg args[32];
    for (int i = 0; i < c->nbufs; i++) {
        Buf *b = &c->bufs[i];
        b->interp = malloc(b->bytes);
        if (b->is_output) memset(b->interp, GU_POISON_BYTE, b->bytes);
        else memcpy(b->interp, b->host, b->bytes);
        ib[i] = (InterpBuffer){b->interp, b->bytes, b->name};
    }
    for (int p = 0; p < f->nparams; p++) {
        Buf *b = find_buf(c, f->params[p]->name);
        Scalar *s = find_scalar(c, f->params[p]->name);
        ck_assert(b || s);
        memset(&args[p], 0, sizeof args[p]);
        if (b) args[p].ptr = b->interp;
        else if (s->is_float) args[p].f = s->f;
        else args[p].i = s->i;
    }
    InterpOptions io = {.grid = {c->grid[0], c->grid[1], c->grid[2]}, .buffers = ib, .nbuffers = c->nbufs};
    ck_assert_msg(interp_run(f, args, f->nparams, &io, &err) == 0, "%s", err.data ? err.data : "");
    sb_free(&err);
    diag_free(&d);
    arena_free(&arena);
    free(src);
}

static void free_case(Case *c)
{
    for (int i = 0; i < c->nbufs; i++) {
        free(c->bufs[i].interp);
        c->bufs[i].interp = NULL;
    }
}

/* Compare an output (rows x cols at leading dimension ld) with the reference
 * and the interpreter; padding columns must still be poisoned. */
static void judge(Row *row, const float *gpu, const float *interp, const double *ref, int rows, int cols, int ld,
                  double tol)
{
    for (int r = 0; r < rows; r++)
        for (int cc = cols; cc < ld; cc++) {
            bool kept = gu_is_poison(gpu[(size_t)r * ld + cc]);
            if (!kept) snprintf(row->why, sizeof row->why, "padding [%d,%d] overwritten", r, cc);
            ck_assert_msg(kept, "%s: padding [%d, %d] was written", row->name, r, cc);
        }
    RefErr e = ref_compare(ref, gpu, rows, cols, ld);
    double scale = e.max_ref > 1 ? e.max_ref : 1;
    row->err_ref = e.max_abs / scale;
    double worst = 0;
    for (int r = 0; r < rows; r++)
        for (int cc = 0; cc < cols; cc++) worst = gu_worse(worst, gpu[(size_t)r * ld + cc], interp[(size_t)r * ld + cc]);
    row->err_interp = worst / scale;
    row->tol = tol;
    row->pass = row->err_ref <= tol && row->err_interp <= tol;
    if (!row->pass) snprintf(row->why, sizeof row->why, "error above tolerance");
    else row->why[0] = 0;
    ck_assert_msg(row->pass, "%s: max error %.3g vs float64, %.3g vs interpreter (tolerance %.3g, relative to %.3g)",
                  row->name, row->err_ref, row->err_interp, tol, scale);
}

/* ---- the examples ---- */

START_TEST(vec_add)
{
    const int n = 300 * 1024 + 77;
    Row *row = row_begin("vec_add", "n=307277");
    float *x = malloc(n * 4), *y = malloc(n * 4), *z = malloc(n * 4);
    double *ref = malloc(n * 8);
    for (int i = 0; i < n; i++) x[i] = rnd(4), y[i] = rnd(4);
    Buf bufs[] = {{"X", x, n * 4, 0, 0, 0}, {"Y", y, n * 4, 0, 0, 0}, {"Z", z, n * 4, 1, 0, 0}};
    Scalar sc[] = {{"n", 0, n, 0}};
    Case c = {"examples/vec_add.tile", "vec_add", NULL, 0, bufs, 3, sc, 1, {(n + 1023) / 1024, 1, 1}};
    run_interp(&c);
    run_gpu(&c, row);
    ref_vec_add(x, y, n, ref);
    judge(row, z, bufs[2].interp, ref, 1, n, n, 1e-6);
    /* f32 addition is exact-rounded on both: the GPU must match the interpreter bit for bit */
    ck_assert(memcmp(z, bufs[2].interp, (size_t)n * 4) == 0);
    free_case(&c);
    free(x), free(y), free(z), free(ref);
}
END_TEST

START_TEST(softmax)
{
    const int rows = 333, cols = 781, sx = 800, sy = 790;
    Row *row = row_begin("softmax", "333x781 (ld 800/790)");
    float *x = malloc((size_t)rows * sx * 4), *y = malloc((size_t)rows * sy * 4);
    double *ref = malloc((size_t)rows * cols * 8);
    for (int i = 0; i < rows * sx; i++) x[i] = rnd(8);
    Buf bufs[] = {{"X", x, (size_t)rows * sx * 4, 0, 0, 0}, {"Y", y, (size_t)rows * sy * 4, 1, 0, 0}};
    Scalar sc[] = {{"n_cols", 0, cols, 0}, {"stride_x", 0, sx, 0}, {"stride_y", 0, sy, 0}};
    Case c = {"examples/softmax.tile", "softmax", NULL, 0, bufs, 2, sc, 3, {rows, 1, 1}};
    run_interp(&c);
    run_gpu(&c, row);
    ref_softmax(x, rows, cols, sx, ref);
    judge(row, y, bufs[1].interp, ref, rows, cols, sy, 1e-5);
    free_case(&c);
    free(x), free(y), free(ref);
}
END_TEST

START_TEST(layer_norm)
{
    const int rows = 257, cols = 999, sx = 1003, sy = 1001;
    const float eps = 1e-5f;
    Row *row = row_begin("layer_norm", "257x999 (ld 1003/1001)");
    float *x = malloc((size_t)rows * sx * 4), *y = malloc((size_t)rows * sy * 4);
    float *w = malloc(cols * 4), *b = malloc(cols * 4);
    double *ref = malloc((size_t)rows * cols * 8);
    for (int i = 0; i < rows * sx; i++) x[i] = rnd(3) + 0.5f;
    for (int i = 0; i < cols; i++) w[i] = rnd(2), b[i] = rnd(1);
    Buf bufs[] = {{"X", x, (size_t)rows * sx * 4, 0, 0, 0}, {"Y", y, (size_t)rows * sy * 4, 1, 0, 0},
                  {"W", w, (size_t)cols * 4, 0, 0, 0}, {"B", b, (size_t)cols * 4, 0, 0, 0}};
    Scalar sc[] = {{"stride_x", 0, sx, 0}, {"stride_y", 0, sy, 0}, {"n_cols", 0, cols, 0}, {"eps", 1, 0, eps}};
    Case c = {"examples/layer_norm.tile", "layer_norm", NULL, 0, bufs, 4, sc, 4, {rows, 1, 1}};
    run_interp(&c);
    run_gpu(&c, row);
    ref_layer_norm(x, w, b, rows, cols, sx, (double)eps, ref);
    judge(row, y, bufs[1].interp, ref, rows, cols, sy, 2e-5);
    free_case(&c);
    free(x), free(y), free(w), free(b), free(ref);
}
END_TEST

START_TEST(matmul)
{
    const int M = 200, N = 130, K = 77, ldc = N + 3;
    Row *row = row_begin("matmul", "200x130x77 f16->f32 (ldc 133)");
    uint16_t *a = malloc((size_t)M * K * 2), *bm = malloc((size_t)K * N * 2);
    float *cm = malloc((size_t)M * ldc * 4);
    double *ref = malloc((size_t)M * N * 8), *mag = malloc((size_t)M * N * 8);
    for (int i = 0; i < M * K; i++) a[i] = interp_f32_to_f16(rnd(2));
    for (int i = 0; i < K * N; i++) bm[i] = interp_f32_to_f16(rnd(2));
    Buf bufs[] = {{"A", a, (size_t)M * K * 2, 0, 0, 0}, {"B", bm, (size_t)K * N * 2, 0, 0, 0},
                  {"C", cm, (size_t)M * ldc * 4, 1, 0, 0}};
    Scalar sc[] = {{"M", 0, M, 0},         {"N", 0, N, 0},         {"K", 0, K, 0},
                   {"stride_am", 0, K, 0}, {"stride_ak", 0, 1, 0}, {"stride_bk", 0, N, 0},
                   {"stride_bn", 0, 1, 0}, {"stride_cm", 0, ldc, 0}, {"stride_cn", 0, 1, 0}};
    Case c = {"examples/matmul.tile", "matmul", NULL, 0, bufs, 3, sc, 9, {(M + 63) / 64, (N + 63) / 64, 1}};
    run_interp(&c);
    run_gpu(&c, row);
    ref_matmul_f16(a, bm, M, N, K, K, 1, N, 1, ref, mag);
    /* f16 products are exact in f32; the summation order (and tensor-core accumulation) differ */
    judge(row, cm, bufs[2].interp, ref, M, N, ldc, 1e-4);
    free_case(&c);
    free(a), free(bm), free(cm), free(ref), free(mag);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("gpu_examples");
    TCase *tc = tcase_create("examples");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, vec_add);
    tcase_add_test(tc, softmax);
    tcase_add_test(tc, layer_norm);
    tcase_add_test(tc, matmul);
    suite_add_tcase(s, tc);
    return s;
}

static void print_table(void)
{
    printf("\n    %-11s %-30s %11s %11s %9s %9s %10s %9s  %s\n", "example", "shape", "err/f64", "err/interp", "tol",
           "time_ms", "compile_ms", "cached_ms", "result");
    for (int i = 0; i < g_nrows; i++) {
        Row *r = &g_rows[i];
        printf("ROW %-11s %-30s %11.3g %11.3g %9.1g %9.4f %10.1f %9.2f  %s%s%s\n", r->name, r->shape, r->err_ref,
               r->err_interp, r->tol, (double)r->ms, r->compile_ms, r->cached_ms, r->pass ? "PASS" : "FAIL",
               r->why[0] ? ": " : "", r->why);
    }
}

int main(void)
{
    /* a fresh cache: the first compile of each example really compiles */
    return gu_main(&g_dev, &g_info, suite, "/tmp/kiln-gpu-cache-XXXXXX", print_table);
}
