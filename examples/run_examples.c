/* run_examples.c — the README's main job (`kiln-examples`).
 *
 * Compiles every shipped program (the examples; FlashAttention forward, backward
 * and a paged decode step), runs it on random inputs with ragged sizes
 * (not multiples of the block) — on the GPU when there is one, else on the CPU
 * interpreter — with outputs poisoned (NaN) before the run, and prints what it
 * computed and its error against a float64 reference. Exit 0 when every
 * program is within its tolerance, 1 otherwise.
 *
 * Usage: kiln-examples [--cpu] [--root DIR]
 * The programs are found with kiln_data_path: --root DIR (a source tree or
 * an installed share/kiln; it sets $KILN_DATA_DIR), else share/kiln of the
 * prefix kiln-examples is installed in, else $KILN_SOURCE_DIR or the source
 * tree it was built from.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "examples/ref.h"
#include "examples/run_examples.h"

/* ---- deterministic random inputs ---- */
static uint64_t rng_state = 0x2545F4914F6CDD1DULL;
static double urand(void) /* uniform in [-1, 1), never exactly 0 */
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    double u = (double)((rng_state * 2685821657736338717ULL) >> 11) * (1.0 / 9007199254740992.0);
    double v = u * 2 - 1;
    return v == 0 ? 0.5 : v;
}
static float *rand_f32(size_t n, double scale)
{
    float *p = malloc(n * sizeof *p);
    for (size_t i = 0; i < n; i++) p[i] = (float)(urand() * scale);
    return p;
}
static uint16_t *rand_f16(size_t n)
{
    uint16_t *p = malloc(n * sizeof *p);
    for (size_t i = 0; i < n; i++) p[i] = kiln_f32_to_f16((float)urand());
    return p;
}
static float *poisoned_f32(size_t n)
{
    float *p = malloc(n * sizeof *p);
    for (size_t i = 0; i < n; i++) p[i] = NAN;
    return p;
}

/* ---- one example = source, kernel, defines, buffers, scalars, grid ---- */
static void set_scalar_i(ExArg *a, const char *name, int64_t v) { a->name = name; a->kind = EX_I32; a->i = v; }
static void set_scalar_f(ExArg *a, const char *name, double v) { a->name = name; a->kind = EX_F32; a->f = v; }
static void set_buf(ExArg *a, const char *name, void *p, size_t bytes, bool out)
{
    a->name = name;
    a->kind = EX_BUF;
    a->p = p;
    a->bytes = bytes;
    a->is_output = out;
}

static int report(const char *name, const char *shape, const char *where, RefErr e, double tol, double tol_abs)
{
    bool ok = !isnan(e.rel_l2) && !isnan(e.max_abs) && (e.rel_l2 <= tol || e.max_abs <= tol_abs);
    printf("%-11s %-28s %-24s max|err| %-10.3g rel L2 %-10.3g %s\n", name, shape, where, e.max_abs, e.rel_l2,
           ok ? "ok" : "FAIL");
    return ok ? 0 : 1;
}

static int ex_vec_add(ExRunner *r)
{
    int n = 100003;
    float *x = rand_f32((size_t)n, 1), *y = rand_f32((size_t)n, 1), *z = poisoned_f32((size_t)n);
    ExArg args[4];
    set_buf(&args[0], "X", x, (size_t)n * 4, false);
    set_buf(&args[1], "Y", y, (size_t)n * 4, false);
    set_buf(&args[2], "Z", z, (size_t)n * 4, true);
    set_scalar_i(&args[3], "n", n);
    ExProgram p = {"examples/vec_add.tile", "vec_add", NULL, 0, {(n + 1023) / 1024, 1, 1}, args, 4, false};
    int rc = 1;
    char where[128];
    if (ex_run(r, &p, where, sizeof where) == 0) {
        double *ref = malloc((size_t)n * sizeof *ref);
        ref_vec_add(x, y, n, ref);
        printf("  vec_add: z[0..3] = %.6g %.6g %.6g\n", z[0], z[1], z[2]);
        rc = report("vec_add", "n=100003", where, ref_compare(ref, z, 1, n, n), 1e-7, 1e-6);
        free(ref);
    }
    free(x); free(y); free(z);
    return rc;
}

static int ex_softmax(ExRunner *r)
{
    int rows = 37, cols = 781, stride = 800;
    float *x = rand_f32((size_t)rows * stride, 4), *y = poisoned_f32((size_t)rows * stride);
    ExArg args[5];
    set_buf(&args[0], "X", x, (size_t)rows * stride * 4, false);
    set_buf(&args[1], "Y", y, (size_t)rows * stride * 4, true);
    set_scalar_i(&args[2], "n_cols", cols);
    set_scalar_i(&args[3], "stride_x", stride);
    set_scalar_i(&args[4], "stride_y", stride);
    ExDefine defs[] = {{"BLOCK", "1024"}};
    ExProgram p = {"examples/softmax.tile", "softmax", defs, 1, {rows, 1, 1}, args, 5, false};
    int rc = 1;
    char where[128];
    if (ex_run(r, &p, where, sizeof where) == 0) {
        double *ref = malloc((size_t)rows * cols * sizeof *ref);
        ref_softmax(x, rows, cols, stride, ref);
        printf("  softmax: y[0][0..3] = %.6g %.6g %.6g\n", y[0], y[1], y[2]);
        rc = report("softmax", "37x781", where, ref_compare(ref, y, rows, cols, stride), 1e-5, 1e-7);
        free(ref);
    }
    free(x); free(y);
    return rc;
}

static int ex_layer_norm(ExRunner *r)
{
    int rows = 29, cols = 600, stride = 640;
    float *x = rand_f32((size_t)rows * stride, 3), *y = poisoned_f32((size_t)rows * stride);
    float *w = rand_f32((size_t)cols, 1), *b = rand_f32((size_t)cols, 1);
    ExArg args[8];
    set_buf(&args[0], "X", x, (size_t)rows * stride * 4, false);
    set_buf(&args[1], "Y", y, (size_t)rows * stride * 4, true);
    set_buf(&args[2], "W", w, (size_t)cols * 4, false);
    set_buf(&args[3], "B", b, (size_t)cols * 4, false);
    set_scalar_i(&args[4], "stride_x", stride);
    set_scalar_i(&args[5], "stride_y", stride);
    set_scalar_i(&args[6], "n_cols", cols);
    set_scalar_f(&args[7], "eps", 1e-5);
    ExProgram p = {"examples/layer_norm.tile", "layer_norm", NULL, 0, {rows, 1, 1}, args, 8, false};
    int rc = 1;
    char where[128];
    if (ex_run(r, &p, where, sizeof where) == 0) {
        double *ref = malloc((size_t)rows * cols * sizeof *ref);
        ref_layer_norm(x, w, b, rows, cols, stride, 1e-5, ref);
        printf("  layer_norm: y[0][0..3] = %.6g %.6g %.6g\n", y[0], y[1], y[2]);
        rc = report("layer_norm", "29x600", where, ref_compare(ref, y, rows, cols, stride), 1e-5, 1e-6);
        free(ref);
    }
    free(x); free(y); free(w); free(b);
    return rc;
}

static int ex_matmul(ExRunner *r)
{
    int M = 200, N = 136, K = 100;
    uint16_t *a = rand_f16((size_t)M * K), *b = rand_f16((size_t)K * N);
    float *c = poisoned_f32((size_t)M * N);
    ExArg args[12];
    set_buf(&args[0], "A", a, (size_t)M * K * 2, false);
    set_buf(&args[1], "B", b, (size_t)K * N * 2, false);
    set_buf(&args[2], "C", c, (size_t)M * N * 4, true);
    set_scalar_i(&args[3], "M", M);
    set_scalar_i(&args[4], "N", N);
    set_scalar_i(&args[5], "K", K);
    set_scalar_i(&args[6], "stride_am", K);
    set_scalar_i(&args[7], "stride_ak", 1);
    set_scalar_i(&args[8], "stride_bk", N);
    set_scalar_i(&args[9], "stride_bn", 1);
    set_scalar_i(&args[10], "stride_cm", N);
    set_scalar_i(&args[11], "stride_cn", 1);
    ExDefine defs[] = {{"BLOCK_M", "64"}, {"BLOCK_N", "64"}, {"BLOCK_K", "32"}};
    ExProgram p = {"examples/matmul.tile", "matmul", defs, 3, {(M + 63) / 64, (N + 63) / 64, 1}, args, 12, false};
    int rc = 1;
    char where[128];
    if (ex_run(r, &p, where, sizeof where) == 0) {
        double *ref = malloc((size_t)M * N * sizeof *ref);
        ref_matmul_f16(a, b, M, N, K, K, 1, N, 1, ref, NULL);
        printf("  matmul: c[0][0..3] = %.6g %.6g %.6g\n", c[0], c[1], c[2]);
        /* f16 inputs are exact in f32; only the f32 accumulation of K=100 terms rounds. */
        rc = report("matmul", "200x136x100 f16", where, ref_compare(ref, c, M, N, N), 1e-5, 1e-4);
        free(ref);
    }
    free(a); free(b); free(c);
    return rc;
}

int main(int argc, char **argv)
{
    ExRunner r;
    memset(&r, 0, sizeof r);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--cpu")) r.force_cpu = true;
        else if (!strcmp(argv[i], "--root") && i + 1 < argc) setenv("KILN_DATA_DIR", argv[++i], 1);
        else {
            fprintf(stderr, "usage: kiln-examples [--cpu] [--root DIR]\n");
            return 2;
        }
    }
    ex_runner_init(&r);
    printf("Kiln %s — shipped programs on %s\n\n", kiln_version(), r.device_name);
    int fails = 0;
    fails += ex_vec_add(&r);
    fails += ex_softmax(&r);
    fails += ex_layer_norm(&r);
    fails += ex_matmul(&r);
    fails += ex_attention(&r);
    fails += ex_attention_bwd(&r);
    fails += ex_attention_decode(&r);
    ex_runner_free(&r);
    printf("\n%s\n", fails ? "SOME PROGRAMS FAILED" : "all programs match their float64 references");
    return fails ? 1 : 0;
}
