/* ref.c — float64 references for the example programs; see ref.h.
 *
 * Straightforward loops in double: accurate to ~1e-16 relative, far below
 * the f32 and f16 kernels' errors, so the kernels' error against them is
 * the kernels' own. */
#include "ref.h"

#include <math.h>

double ref_f16_to_double(uint16_t h)
{
    int sign = h >> 15, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
    double v;
    if (exp == 0) v = ldexp((double)mant, -24);
    else if (exp == 31) v = mant ? NAN : INFINITY;
    else v = ldexp((double)(mant + 1024), exp - 25);
    return sign ? -v : v;
}

void ref_vec_add(const float *x, const float *y, int n, double *out)
{
    for (int i = 0; i < n; i++) out[i] = (double)x[i] + (double)y[i];
}

void ref_softmax(const float *x, int n_rows, int n_cols, int stride_x, double *out)
{
    for (int r = 0; r < n_rows; r++) {
        const float *row = x + (size_t)r * (size_t)stride_x;
        double m = -INFINITY, s = 0;
        for (int c = 0; c < n_cols; c++) m = fmax(m, (double)row[c]);
        for (int c = 0; c < n_cols; c++) s += exp((double)row[c] - m);
        for (int c = 0; c < n_cols; c++) out[(size_t)r * n_cols + c] = exp((double)row[c] - m) / s;
    }
}

void ref_layer_norm(const float *x, const float *w, const float *b, int n_rows, int n_cols,
                    int stride_x, double eps, double *out)
{
    for (int r = 0; r < n_rows; r++) {
        const float *row = x + (size_t)r * (size_t)stride_x;
        double mean = 0, var = 0;
        for (int c = 0; c < n_cols; c++) mean += row[c];
        mean /= n_cols;
        for (int c = 0; c < n_cols; c++) var += ((double)row[c] - mean) * ((double)row[c] - mean);
        var /= n_cols;
        double rstd = 1.0 / sqrt(var + eps);
        for (int c = 0; c < n_cols; c++)
            out[(size_t)r * n_cols + c] = ((double)row[c] - mean) * rstd * (double)w[c] + (double)b[c];
    }
}

void ref_matmul_f16(const uint16_t *a, const uint16_t *b, int M, int N, int K,
                    int stride_am, int stride_ak, int stride_bk, int stride_bn,
                    double *out, double *abs_out)
{
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            double s = 0, sa = 0;
            for (int k = 0; k < K; k++) {
                double p = ref_f16_to_double(a[(size_t)m * stride_am + (size_t)k * stride_ak]) *
                           ref_f16_to_double(b[(size_t)k * stride_bk + (size_t)n * stride_bn]);
                s += p;
                sa += fabs(p);
            }
            out[(size_t)m * N + n] = s;
            if (abs_out) abs_out[(size_t)m * N + n] = sa;
        }
}

RefErr ref_compare(const double *ref, const float *got, int rows, int cols, int ld_got)
{
    RefErr e = {0, 0, 0};
    double num = 0, den = 0;
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) {
            double want = ref[(size_t)r * cols + c], have = got[(size_t)r * ld_got + c];
            double d = fabs(have - want);
            if (isnan(d)) {
                e.max_abs = e.rel_l2 = NAN;
                return e;
            }
            if (d > e.max_abs) e.max_abs = d;
            if (fabs(want) > e.max_ref) e.max_ref = fabs(want);
            num += d * d;
            den += want * want;
        }
    e.rel_l2 = den > 0 ? sqrt(num / den) : sqrt(num);
    return e;
}
