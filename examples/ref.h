/* ref.h — float64 references for the example programs, and error metrics.
 *
 * Shared by the interpreter's end-to-end tests and the kiln driver's checks.
 * Inputs are the exact values the kernels see (f32 arrays, or f16 bit
 * patterns decoded exactly); every reference computes in double and writes a
 * dense row-major double array. Depends only on libc/libm, so it can be
 * compiled into any test or tool (`#include "examples/ref.c"` or linked).
 */
#ifndef KILN_EXAMPLES_REF_H
#define KILN_EXAMPLES_REF_H

#include <stddef.h>
#include <stdint.h>

/* IEEE binary16 bit pattern -> double, exactly (independent of the interpreter's converter). */
double ref_f16_to_double(uint16_t h);

/* out[i] = x[i] + y[i], i < n */
void ref_vec_add(const float *x, const float *y, int n, double *out);

/* out[r * n_cols + c] = softmax of row r (row r of x starts at x + r * stride_x) */
void ref_softmax(const float *x, int n_rows, int n_cols, int stride_x, double *out);

/* out[r * n_cols + c] = (x - mean) / sqrt(var + eps) * w[c] + b[c], biased variance */
void ref_layer_norm(const float *x, const float *w, const float *b, int n_rows, int n_cols,
                    int stride_x, double eps, double *out);

/* out[m * N + n] = sum_k A[m, k] * B[k, n] with f16 inputs at the given strides
 * (elements). When abs_out is not NULL it receives sum_k |A[m, k] * B[k, n]|,
 * the scale that bounds any summation's rounding error. */
void ref_matmul_f16(const uint16_t *a, const uint16_t *b, int M, int N, int K,
                    int stride_am, int stride_ak, int stride_bk, int stride_bn,
                    double *out, double *abs_out);

/* Errors of a strided f32 result against a dense double reference of rows x cols.
 * Any NaN in `got` makes both metrics NaN (so every `err <= tol` check fails). */
typedef struct RefErr {
    double max_abs;       /* max |got - ref| */
    double rel_l2;        /* ||got - ref||_2 / ||ref||_2 (or the absolute norm when ref is 0) */
    double max_ref;       /* max |ref|, to scale absolute tolerances */
} RefErr;
RefErr ref_compare(const double *ref, const float *got, int rows, int cols, int ld_got);

#endif
