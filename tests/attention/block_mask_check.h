/* block_mask_check.h — what the block-mask tests share (interpreter and GPU): a mask's
 * arrays checked exhaustively against the float64 reference's visibility
 * (tools/attn_ref.c's attn_visible: bounds, causal, mask_mod) evaluated on every element
 * of every block, and a mask of their own that depends on the head and the batch.
 * Header-only; include after tools/attn_ref.c and variant_refs.h.
 */
#ifndef KILN_BLOCK_MASK_CHECK_H
#define KILN_BLOCK_MASK_CHECK_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>

#include "kiln.h"

/* The class of block (qb, kb) of mask row (b, h): 2 full (inside both sequences, every
 * pair visible), 1 partial (some visible), 0 empty. */
static inline int bm_ref_class(const AttnProblem *pr, const KilnBlockMask *m, int b, int h, int qb, int kb)
{
    int n = 0, inb = 1;
    for (int i = qb * m->block_q; i < (qb + 1) * m->block_q; i++)
        for (int j = kb * m->block_kv; j < (kb + 1) * m->block_kv; j++) {
            if (i >= pr->seqlen_q || j >= pr->seqlen_k) {
                inb = 0;
                continue;
            }
            n += attn_visible(pr, b, h, i, j) != 0;
        }
    return inb && n == m->block_q * m->block_kv ? 2 : n > 0 ? 1 : 0;
}

/* A block-mask test case: the call, its variant and its mask. */
typedef struct BmCase {
    const char *what;
    const char *variant;      /* lang/lib/variants/NAME.tile, "mixed" (k_mixed_src) or NULL */
    int (*mask)(int, int, int, int, const void *);
    Ref ref;
    AttnDtype dt;
    int batch, hq, hkv, sq, sk, d, causal;
    int bq, bk;               /* the mask's blocks */
    int mb, mh;               /* the mask's batch and heads: 1 (broadcast) or batch / hq */
    int block_m, block_n;     /* the call's tiles (the backward's: 0 x 0, the runtime's) */
} BmCase;

static inline const int32_t *bm_array(const KilnBlockMask *m, const void *buf, int a)
{
    return (const int32_t *)((const char *)buf + m->offset[a]);
}

typedef struct BmReport {
    int errors;
    int seen[3];              /* blocks of each class */
    char first[256];          /* the first error */
} BmReport;

static inline void bm_fail(BmReport *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline void bm_fail(BmReport *r, const char *fmt, ...)
{
    if (r->errors++) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->first, sizeof r->first, fmt, ap);
    va_end(ap);
}

/* One list (count `num`, entries idx[0..num)) against the blocks of class `want` among the
 * `len` classes cls[0], cls[step], ... in order. */
static inline void bm_check_list(BmReport *r, const char *which, int row, const int32_t *cls, size_t step, int len, int want,
                          int32_t num, const int32_t *idx)
{
    int n = 0;
    for (int x = 0; x < len; x++)
        if (cls[(size_t)x * step] == want) {
            if (n >= num || idx[n] != x)
                bm_fail(r, "%s row %d: entry %d is %d, expected %d", which, row, n, n < num ? idx[n] : -1, x);
            n++;
        }
    if (num != n) bm_fail(r, "%s row %d: count %d, expected %d", which, row, num, n);
}

/* Mask m's arrays (a host copy, buf) against pr: every class, then every list. Mask row
 * g = b * m->heads + h holds (b, h) (b = 0 / h = 0 where the mask is broadcast). */
static inline BmReport bm_check(const AttnProblem *pr, const KilnBlockMask *m, const void *buf)
{
    BmReport r = {0};
    int nq = m->num_q_blocks, nk = m->num_kv_blocks, G = m->batch * m->heads;
    const int32_t *cls = bm_array(m, buf, KILN_BM_CLASS);
    for (int g = 0; g < G; g++)
        for (int qb = 0; qb < nq; qb++)
            for (int kb = 0; kb < nk; kb++) {
                int want = bm_ref_class(pr, m, g / m->heads, g % m->heads, qb, kb);
                int got = cls[((size_t)g * nq + qb) * nk + kb];
                if (got != want) bm_fail(&r, "row %d q block %d key block %d: class %d, expected %d", g, qb, kb, got, want);
                r.seen[want]++;
            }
    for (int g = 0; g < G; g++) {
        for (int qb = 0; qb < nq; qb++) {
            int w = g * nq + qb;
            const int32_t *row = cls + (size_t)w * nk;
            bm_check_list(&r, "partial kv", w, row, 1, nk, 1, bm_array(m, buf, KILN_BM_KV_NUM)[w],
                          bm_array(m, buf, KILN_BM_KV_IDX) + (size_t)w * nk);
            bm_check_list(&r, "full kv", w, row, 1, nk, 2, bm_array(m, buf, KILN_BM_FULL_KV_NUM)[w],
                          bm_array(m, buf, KILN_BM_FULL_KV_IDX) + (size_t)w * nk);
        }
        for (int kb = 0; kb < nk; kb++) {
            int w = g * nk + kb;
            const int32_t *col = cls + (size_t)g * nq * nk + kb;
            bm_check_list(&r, "partial q", w, col, (size_t)nk, nq, 1, bm_array(m, buf, KILN_BM_Q_NUM)[w],
                          bm_array(m, buf, KILN_BM_Q_IDX) + (size_t)w * nq);
            bm_check_list(&r, "full q", w, col, (size_t)nk, nq, 2, bm_array(m, buf, KILN_BM_FULL_Q_NUM)[w],
                          bm_array(m, buf, KILN_BM_FULL_Q_IDX) + (size_t)w * nq);
        }
    }
    return r;
}

/* Visibility by a mask's classes (a reference mask_mod, ctx a BmByClass): full blocks all,
 * empty none, partial ones by `inner` (NULL: all) — what a forward given that mask computes
 * when the mask was made for another variant. */
typedef struct BmByClass {
    const KilnBlockMask *m;
    const int32_t *cls;
    int (*inner)(int, int, int, int, const void *);
} BmByClass;

static inline int bm_by_class(int b, int h, int i, int j, const void *ctx)
{
    const BmByClass *r = ctx;
    const KilnBlockMask *m = r->m;
    int g = (m->batch > 1 ? b : 0) * m->heads + (m->heads > 1 ? h : 0);
    int c = r->cls[((size_t)g * m->num_q_blocks + i / m->block_q) * m->num_kv_blocks + j / m->block_kv];
    return c == 2 || (c == 1 && (!r->inner || r->inner(b, h, i, j, NULL)));
}

/* A mask of our own that depends on the head (a tensor) and the batch (a scalar rule), so
 * per-head and per-batch mask rows differ; shipped variants depend on neither. */
static const char *k_mixed_src =
    "import \"attention\";\n"
    "param head_lim: *i32;   // [heads]: keys at or past head_lim[h] + 9 b are hidden\n"
    "fn mask_mod(b, h, q_idx, kv_idx)\n"
    "{\n"
    "    return kv_idx < load(head_lim + h) + 9 * b &&\n"
    "           ((kv_idx / 8 + q_idx / 16 + h) % 3 != 0 || (q_idx * 7 + kv_idx) % 11 == 0);\n"
    "}\n";
static int32_t g_head_lim[VAR_MAX_HEADS];
static inline int m_mixed(int b, int h, int i, int j, const void *c)
{
    return j < g_head_lim[h] + 9 * b && ((j / 8 + i / 16 + h) % 3 != 0 || (i * 7 + j) % 11 == 0);
}

/* Its argument: head_lim[h] = base + step * h (host memory; the GPU test uploads it). */
static inline void bm_mixed_inputs(Inputs *in, int base, int step)
{
    memset(in, 0, sizeof *in);
    for (int h = 0; h < VAR_MAX_HEADS; h++) g_head_lim[h] = base + step * h;
    in->args[in->nargs++] = (KilnVariantArg){"head_lim", kiln_arg_ptr((uintptr_t)g_head_lim), sizeof g_head_lim};
}

#endif
