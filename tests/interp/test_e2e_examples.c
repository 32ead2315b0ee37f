/* test_e2e_examples.c — every example program, from source to numbers.
 *
 * Each kernel in examples/ (the .tile files) is parsed (ast_parse), compiled (lang_compile)
 * and run on the CPU interpreter over random non-zero inputs with ragged sizes
 * (never a multiple of the block), outputs poisoned with NaN before each run,
 * and compared with the float64 references of examples/ref.c. Output padding
 * (rows with a stride wider than the data) must still hold the poison after a
 * run: masked lanes never write. Then every target-independent pass of
 * pass_pipeline_tab is applied in order, and after each one the kernel must
 * verify and produce bit-identical outputs: passes must not change semantics.
 */
#include "tests/testutil.h"
#include "compiler/interp/interp.h"
#include "compiler/passes/passes.h"
#include "compiler/lang/lang.h"
#include "examples/ref.c"

#include <math.h>
#include <string.h>

/* ---- compiling an example ---- */
typedef struct Kern {
    Arena arena;
    Diag diag;
    char *src;
    IrFunc *f;
} Kern;

static IrFunc *kern_compile(Kern *k, const char *file, const char *kernel, const LangDefine *defs, int ndefs)
{
    const char *path = tu_src_path(file);
    size_t len;
    k->src = sup_read_file_text(path, &len);
    ck_assert_msg(k->src, "cannot read %s", path);
    arena_init(&k->arena);
    diag_init(&k->diag, file, k->src);
    AstFile *af = ast_parse(&k->arena, &k->diag, file, k->src);
    ck_assert_msg(af && k->diag.nerrors == 0, "%s: parse errors:\n%s", file, k->diag.out.data ? k->diag.out.data : "");
    LangOptions lo;
    memset(&lo, 0, sizeof lo);
    lo.kernel = kernel;
    lo.defines = defs;
    lo.ndefines = ndefs;
    IrModule *m = lang_compile(&k->arena, &k->diag, af, &lo);
    ck_assert_msg(m && k->diag.nerrors == 0, "%s: compile errors:\n%s", file, k->diag.out.data ? k->diag.out.data : "");
    k->f = NULL;
    for (int i = 0; i < m->nfuncs; i++)
        if (strcmp(m->funcs[i]->name, kernel) == 0) k->f = m->funcs[i];
    ck_assert_msg(k->f, "%s: no kernel %s", file, kernel);
    StrBuf err;
    sb_init(&err);
    ck_assert_msg(ir_verify(k->f, &err), "%s: %s", file, err.data ? err.data : "");
    sb_free(&err);
    return k->f;
}

static void kern_free(Kern *k)
{
    diag_free(&k->diag);
    arena_free(&k->arena);
    free(k->src);
}

/* ---- running with arguments by parameter name ---- */
typedef struct NamedArg {
    const char *name;
    InterpArg a;
} NamedArg;

#define MAX_ARGS 24

typedef struct Example {
    IrFunc *f;
    const NamedArg *args;
    int nargs;
    InterpOptions opts;
    void *out;            /* the whole output buffer, padding included */
    size_t out_len;       /* elements */
    int esize;            /* bytes per element: 4 (f32) or 2 (f16) */
} Example;

/* Quiet NaNs with a recognisable payload, as f32 and as f16 bits. */
static const uint32_t POISON32 = 0x7fc0bad0u;
static const uint16_t POISON16 = 0x7ebdu;

static void poison_fill(void *out, size_t n, int esize)
{
    for (size_t i = 0; i < n; i++) {
        if (esize == 4) memcpy((char *)out + 4 * i, &POISON32, 4);
        else memcpy((char *)out + 2 * i, &POISON16, 2);
    }
}

static void run_poisoned(const Example *ex, void *snapshot)
{
    const IrFunc *f = ex->f;
    InterpArg args[MAX_ARGS];
    ck_assert_int_le(f->nparams, MAX_ARGS);
    for (int p = 0; p < f->nparams; p++) {
        const char *name = f->params[p]->name;
        int found = -1;
        for (int k = 0; k < ex->nargs && name; k++)
            if (strcmp(ex->args[k].name, name) == 0) found = k;
        ck_assert_msg(found >= 0, "%s: no argument for parameter %d (%s)", f->name, p, name ? name : "?");
        args[p] = ex->args[found].a;
    }
    poison_fill(ex->out, ex->out_len, ex->esize);
    StrBuf err;
    sb_init(&err);
    int rc = interp_run(f, args, f->nparams, &ex->opts, &err);
    ck_assert_msg(rc == 0, "%s: %s", f->name, err.data ? err.data : "");
    sb_free(&err);
    memcpy(snapshot, ex->out, ex->out_len * (size_t)ex->esize);
}

/* Applies the passes one after another; after each, the kernel must verify and
 * give exactly the outputs of the unoptimised kernel. */
static void check_passes_preserve(const Example *ex, const void *baseline)
{
    size_t es = (size_t)ex->esize;
    unsigned char *snap = malloc(ex->out_len * es);
    const unsigned char *base = baseline;
    for (const PassInfo *p = pass_pipeline_tab; p->name; p++) {
        p->run(ex->f);
        ck_assert_msg(ice_message() == NULL, "%s after %s: %s", ex->f->name, p->name, ice_message());
        StrBuf err;
        sb_init(&err);
        ck_assert_msg(ir_verify(ex->f, &err), "%s after %s: %s", ex->f->name, p->name, err.data ? err.data : "");
        sb_free(&err);
        run_poisoned(ex, snap);
        for (size_t i = 0; i < ex->out_len; i++)
            ck_assert_msg(memcmp(snap + i * es, base + i * es, es) == 0, "%s after pass %s: output %zu changed",
                          ex->f->name, p->name, i);
    }
    free(snap);
}

/* Padding entries (columns cols..ld-1 of each row) must still hold the poison. */
static void check_padding(const void *out, int esize, int rows, int cols, int ld)
{
    const void *pz = esize == 4 ? (const void *)&POISON32 : (const void *)&POISON16;
    for (int r = 0; r < rows; r++)
        for (int c = cols; c < ld; c++)
            ck_assert_msg(memcmp((const char *)out + ((size_t)r * ld + c) * (size_t)esize, pz, (size_t)esize) == 0,
                          "padding [%d, %d] was written", r, c);
}

/* Uniform in [-scale, scale], never 0 (the odd offset keeps it off the grid). */
static float rnd(unsigned *s, float scale)
{
    *s = *s * 1664525u + 1013904223u;
    float u = ((float)(*s >> 9) + 0.5f) / 8388608.0f; /* (0, 1) */
    return (2.0f * u - 1.0f) * scale;
}

static float *rnd_array(size_t n, unsigned seed, float scale)
{
    float *a = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) a[i] = rnd(&seed, scale);
    return a;
}

static const double U32 = 0x1p-24; /* unit roundoff of f32 */

START_TEST(e2e_vec_add)
{
    const int n = 1000, block = 256;
    Kern k;
    LangDefine defs[] = {{"BLOCK", "256"}};
    kern_compile(&k, "examples/vec_add.tile", "vec_add", defs, 1);
    float *x = rnd_array(n, 11, 1.0f), *y = rnd_array(n, 12, 1.0f), *z = malloc(n * sizeof(float));
    InterpBuffer bufs[] = {{x, n * 4, "X"}, {y, n * 4, "Y"}, {z, n * 4, "Z"}};
    NamedArg args[] = {{"X", {.ptr = x}}, {"Y", {.ptr = y}}, {"Z", {.ptr = z}}, {"n", {.i = n}}};
    Example ex = {k.f, args, 4, {{(n + block - 1) / block, 1, 1}, bufs, 3}, z, (size_t)n, 4};
    float *base = malloc(n * sizeof(float));
    run_poisoned(&ex, base);
    double *ref = malloc(n * sizeof(double));
    ref_vec_add(x, y, n, ref);
    /* One f32 addition per element, correctly rounded: |z - ref| <= u |ref|. */
    for (int i = 0; i < n; i++)
        ck_assert_msg(fabs(base[i] - ref[i]) <= U32 * fabs(ref[i]), "Z[%d] = %a, want %a", i, (double)base[i], ref[i]);
    check_passes_preserve(&ex, base);
    free(x), free(y), free(z), free(base), free(ref);
    kern_free(&k);
}
END_TEST

START_TEST(e2e_softmax)
{
    const int rows = 37, cols = 781, sx = 803, sy = 797;
    Kern k;
    LangDefine defs[] = {{"BLOCK", "1024"}};
    kern_compile(&k, "examples/softmax.tile", "softmax", defs, 1);
    /* Inputs in [-5, 5]; the stride padding of X holds huge values, which would
     * dominate the max and the sum if a masked-off lane were read. */
    float *x = rnd_array((size_t)rows * sx, 21, 5.0f), *y = malloc((size_t)rows * sy * sizeof(float));
    for (int r = 0; r < rows; r++)
        for (int c = cols; c < sx; c++) x[(size_t)r * sx + c] = 1e30f;
    InterpBuffer bufs[] = {{x, (size_t)rows * sx * 4, "X"}, {y, (size_t)rows * sy * 4, "Y"}};
    NamedArg args[] = {{"X", {.ptr = x}}, {"Y", {.ptr = y}}, {"n_cols", {.i = cols}},
                       {"stride_x", {.i = sx}}, {"stride_y", {.i = sy}}};
    Example ex = {k.f, args, 5, {{rows, 1, 1}, bufs, 2}, y, (size_t)rows * sy, 4};
    float *base = malloc(ex.out_len * sizeof(float));
    run_poisoned(&ex, base);
    double *ref = malloc((size_t)rows * cols * sizeof(double));
    ref_softmax(x, rows, cols, sx, ref);
    RefErr e = ref_compare(ref, base, rows, cols, sy);
    /* f32 exp is accurate to ~1 ulp; the row sum of 781 positive terms adds at
     * most 781 u relative (4.7e-5) in the worst case and ~sqrt(781) u (1.7e-6)
     * typically; the division adds u. 1e-5 relative leaves room for the
     * typical case and still catches any real bug (a wrong max, a read of the
     * padding, a missing mask all give errors of order 1). */
    ck_assert_msg(e.rel_l2 <= 1e-5, "softmax rel L2 error %g", e.rel_l2);
    ck_assert_msg(e.max_abs <= 1e-5 * e.max_ref, "softmax max abs error %g (max %g)", e.max_abs, e.max_ref);
    check_padding(base, 4, rows, cols, sy);
    check_passes_preserve(&ex, base);
    free(x), free(y), free(base), free(ref);
    kern_free(&k);
}
END_TEST

START_TEST(e2e_softmax_f16)
{
    const int rows = 29, cols = 600, sx = 611, sy = 605;
    Kern k;
    kern_compile(&k, "examples/softmax.tile", "softmax_f16", NULL, 0); /* BLOCK = 1024 by default */
    uint16_t *x = malloc((size_t)rows * sx * 2), *y = malloc((size_t)rows * sy * 2);
    float *xf = malloc((size_t)rows * sx * sizeof(float));
    unsigned s = 51;
    for (size_t i = 0; i < (size_t)rows * sx; i++) {
        bool pad = (int)(i % (size_t)sx) >= cols;
        x[i] = interp_f32_to_f16(pad ? 60000.0f : rnd(&s, 6.0f)); /* padding: huge, must not be read */
        xf[i] = (float)ref_f16_to_double(x[i]);
    }
    InterpBuffer bufs[] = {{x, (size_t)rows * sx * 2, "X"}, {y, (size_t)rows * sy * 2, "Y"}};
    NamedArg args[] = {{"X", {.ptr = x}}, {"Y", {.ptr = y}}, {"n_cols", {.i = cols}},
                       {"stride_x", {.i = sx}}, {"stride_y", {.i = sy}}};
    Example ex = {k.f, args, 5, {{rows, 1, 1}, bufs, 2}, y, (size_t)rows * sy, 2};
    uint16_t *base = malloc(ex.out_len * 2);
    run_poisoned(&ex, base);
    double *ref = malloc((size_t)rows * cols * sizeof(double));
    ref_softmax(xf, rows, cols, sx, ref);
    /* Computed in f32 (error <= ~1e-5 relative, as for the f32 kernel) and
     * rounded once to f16: half an ulp, 2^-11 relative for normal values and
     * 2^-25 absolute in the subnormal range (outputs go down to ~e^-12 / 600). */
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) {
            double want = ref[(size_t)r * cols + c], have = ref_f16_to_double(base[(size_t)r * sy + c]);
            ck_assert_msg(fabs(have - want) <= (0x1p-11 + 2e-5) * fabs(want) + 0x1p-25,
                          "Y[%d][%d] = %.8g, want %.8g", r, c, have, want);
        }
    check_padding(base, 2, rows, cols, sy);
    check_passes_preserve(&ex, base);
    free(x), free(y), free(xf), free(base), free(ref);
    kern_free(&k);
}
END_TEST

START_TEST(e2e_layer_norm)
{
    const int rows = 37, cols = 781, sx = 800, sy = 790;
    const float eps = 1e-5f;
    Kern k;
    LangDefine defs[] = {{"BLOCK", "1024"}};
    kern_compile(&k, "examples/layer_norm.tile", "layer_norm", defs, 1);
    float *x = rnd_array((size_t)rows * sx, 31, 2.0f), *y = malloc((size_t)rows * sy * sizeof(float));
    for (int r = 0; r < rows; r++) /* an offset per row makes the mean matter */
        for (int c = 0; c < sx; c++) x[(size_t)r * sx + c] = c < cols ? x[(size_t)r * sx + c] + (float)(r % 5) : 1e30f;
    float *w = rnd_array(cols, 32, 1.5f), *b = rnd_array(cols, 33, 0.5f);
    InterpBuffer bufs[] = {{x, (size_t)rows * sx * 4, "X"}, {y, (size_t)rows * sy * 4, "Y"},
                           {w, (size_t)cols * 4, "W"}, {b, (size_t)cols * 4, "B"}};
    NamedArg args[] = {{"X", {.ptr = x}}, {"Y", {.ptr = y}}, {"W", {.ptr = w}}, {"B", {.ptr = b}},
                       {"stride_x", {.i = sx}}, {"stride_y", {.i = sy}}, {"n_cols", {.i = cols}},
                       {"eps", {.f = eps}}};
    Example ex = {k.f, args, 8, {{rows, 1, 1}, bufs, 4}, y, (size_t)rows * sy, 4};
    float *base = malloc(ex.out_len * sizeof(float));
    run_poisoned(&ex, base);
    double *ref = malloc((size_t)rows * cols * sizeof(double));
    ref_layer_norm(x, w, b, rows, cols, sx, (double)eps, ref);
    RefErr e = ref_compare(ref, base, rows, cols, sy);
    /* The mean and the variance are f32 sums of 781 terms (relative error
     * ~sqrt(n) u typically, n u = 4.7e-5 at worst); the normalised value
     * (x - mean) * rstd has magnitude ~1-3, times |w| <= 1.5. 1e-5 relative
     * L2 and 1e-4 absolute (outputs are ~1) hold for correct f32 code and
     * fail by orders of magnitude for a wrong mean, variance or mask. */
    ck_assert_msg(e.rel_l2 <= 1e-5, "layer_norm rel L2 error %g", e.rel_l2);
    ck_assert_msg(e.max_abs <= 1e-4, "layer_norm max abs error %g", e.max_abs);
    check_padding(base, 4, rows, cols, sy);
    check_passes_preserve(&ex, base);
    free(x), free(y), free(w), free(b), free(base), free(ref);
    kern_free(&k);
}
END_TEST

/* C = A . B for M = 100, N = 72, K = 50 with 32/32/16 blocks: every dimension
 * ragged. b_trans stores B as [N, K] (stride_bk = 1, stride_bn = K). The tiles
 * (4 x 3) go in GROUP_M order: the default 8 (one group: the launch order), and
 * 3 with the transposed B (a group of 3 rows of tiles, then a short one of 1). */
static void matmul_case(bool b_trans)
{
    const int M = 100, N = 72, K = 50, ldc = 75, bm = 32, bn = 32;
    Kern k;
    LangDefine defs[] = {{"BLOCK_M", "32"}, {"BLOCK_N", "32"}, {"BLOCK_K", "16"}, {"GROUP_M", b_trans ? "3" : "8"}};
    kern_compile(&k, "examples/matmul.tile", "matmul", defs, 4);
    uint16_t *a = malloc((size_t)M * K * 2), *b = malloc((size_t)K * N * 2);
    unsigned s = b_trans ? 41 : 42;
    for (int i = 0; i < M * K; i++) a[i] = interp_f32_to_f16(rnd(&s, 2.0f));
    for (int i = 0; i < K * N; i++) b[i] = interp_f32_to_f16(rnd(&s, 2.0f));
    float *c = malloc((size_t)M * ldc * sizeof(float));
    int sbk = b_trans ? 1 : N, sbn = b_trans ? K : 1;
    InterpBuffer bufs[] = {{a, (size_t)M * K * 2, "A"}, {b, (size_t)K * N * 2, "B"}, {c, (size_t)M * ldc * 4, "C"}};
    NamedArg args[] = {{"A", {.ptr = a}}, {"B", {.ptr = b}}, {"C", {.ptr = c}},
                       {"M", {.i = M}}, {"N", {.i = N}}, {"K", {.i = K}},
                       {"stride_am", {.i = K}}, {"stride_ak", {.i = 1}},
                       {"stride_bk", {.i = sbk}}, {"stride_bn", {.i = sbn}},
                       {"stride_cm", {.i = ldc}}, {"stride_cn", {.i = 1}}};
    Example ex = {k.f, args, 12, {{(M + bm - 1) / bm, (N + bn - 1) / bn, 1}, bufs, 3}, c, (size_t)M * ldc, 4};
    float *base = malloc(ex.out_len * sizeof(float));
    run_poisoned(&ex, base);
    double *ref = malloc((size_t)M * N * sizeof(double)), *mag = malloc((size_t)M * N * sizeof(double));
    ref_matmul_f16(a, b, M, N, K, K, 1, sbk, sbn, ref, mag);
    /* The reference uses the same f16 inputs, so the only error is the f32
     * accumulation: products of two f16 values are exact in f32, and K
     * additions err by at most gamma_K * sum|a_k b_k| with gamma_K = K u / (1 - K u)
     * (Higham, Accuracy and Stability, 3.1). A rigorous per-element bound. */
    double gamma = K * U32 / (1 - K * U32);
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            double want = ref[(size_t)m * N + n], have = base[(size_t)m * ldc + n];
            ck_assert_msg(fabs(have - want) <= gamma * mag[(size_t)m * N + n], "C[%d][%d] = %.9g, want %.9g",
                          m, n, have, want);
        }
    RefErr e = ref_compare(ref, base, M, N, ldc);
    ck_assert_msg(e.rel_l2 <= 1e-5, "matmul rel L2 error %g", e.rel_l2); /* typical f32 accumulation: ~1e-7 */
    check_padding(base, 4, M, N, ldc);
    check_passes_preserve(&ex, base);
    free(a), free(b), free(c), free(base), free(ref), free(mag);
    kern_free(&k);
}

START_TEST(e2e_matmul) { matmul_case(false); }
END_TEST

START_TEST(e2e_matmul_b_transposed) { matmul_case(true); }
END_TEST

static Suite *examples_suite(void)
{
    Suite *s = suite_create("e2e_examples");
    TCase *tc = tcase_create("examples");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, e2e_vec_add);
    tcase_add_test(tc, e2e_softmax);
    tcase_add_test(tc, e2e_softmax_f16);
    tcase_add_test(tc, e2e_layer_norm);
    tcase_add_test(tc, e2e_matmul);
    tcase_add_test(tc, e2e_matmul_b_transposed);
    suite_add_tcase(s, tc);
    return s;
}

TU_MAIN(examples_suite)
