/* attn_ref.c — float64 attention forward and backward references, the storage-dtype
 * emulation of plain (PyTorch-style) attention, and error metrics.
 *
 * Why two references: FlashAttention's accuracy rule compares the kernel's
 * error against the float64 truth with the error that plain attention makes
 * in the same storage dtype: |O - ref| <= 2 * |O_plain - ref| + eps. The
 * float64 pass is the truth; attn_ref_torchlike is O_plain.
 *
 * Invariants: inputs are read through the problem's strides only (any layout,
 * GQA/MQA head mapping); causal masking is bottom-right aligned (query i sees
 * key j when j <= i + Sk - Sq); rows that see no key give O = 0 and LSE = -inf
 * in both references. Example: Sq = 4, Sk = 2, causal: rows 0 and 1 are empty,
 * row 2 sees key 0, row 3 sees keys 0 and 1.
 */
#include "attn_ref.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kiln_runtime.h"

size_t attn_dtype_size(AttnDtype t) { return t == ATTN_F32 ? 4 : 2; }

double attn_get(AttnDtype t, const void *base, size_t idx)
{
    switch (t) {
    case ATTN_F16: return kiln_f16_to_f32(((const uint16_t *)base)[idx]);
    case ATTN_BF16: return kiln_bf16_to_f32(((const uint16_t *)base)[idx]);
    default: return ((const float *)base)[idx];
    }
}

void attn_put(AttnDtype t, void *base, size_t idx, double x)
{
    switch (t) {
    case ATTN_F16: ((uint16_t *)base)[idx] = kiln_f32_to_f16((float)x); break;
    case ATTN_BF16: ((uint16_t *)base)[idx] = kiln_f32_to_bf16((float)x); break;
    default: ((float *)base)[idx] = (float)x; break;
    }
}

double attn_round(AttnDtype t, double x)
{
    switch (t) {
    case ATTN_F16: return kiln_f16_to_f32(kiln_f32_to_f16((float)x));
    case ATTN_BF16: return kiln_bf16_to_f32(kiln_f32_to_bf16((float)x));
    default: return (float)x;
    }
}

static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void attn_fill_random(AttnDtype t, void *base, size_t n, uint64_t seed, double lo, double hi)
{
    uint64_t s = seed * 0x2545f4914f6cdd1dull + 1;
    for (size_t i = 0; i < n; i++) {
        double u = (double)(splitmix64(&s) >> 11) * 0x1p-53;
        attn_put(t, base, i, lo + (hi - lo) * u);
    }
}

void attn_fill_strided(AttnDtype t, void *buf, const int64_t st[3], int nb, int nh, int ns, int d, uint64_t seed)
{
    size_t n = (size_t)nb * nh * ns * d;
    void *dense = malloc(n * attn_dtype_size(t) + 2);
    attn_fill_random(t, dense, n, seed, -1.0, 1.0);
    size_t k = 0;
    for (int b = 0; b < nb; b++)
        for (int h = 0; h < nh; h++)
            for (int s = 0; s < ns; s++)
                for (int e = 0; e < d; e++)
                    attn_put(t, buf, (size_t)(b * st[0] + h * st[1] + s * st[2] + e), attn_get(t, dense, k++));
    free(dense);
}

void attn_set_strides(AttnProblem *p, AttnLayout layout)
{
    int64_t d = p->head_dim;
    int64_t *st[4] = {p->q_stride, p->k_stride, p->v_stride, p->o_stride};
    for (int t = 0; t < 4; t++) {
        int64_t h = (t == 1 || t == 2) ? p->heads_kv : p->heads_q;
        int64_t s = (t == 1 || t == 2) ? p->seqlen_k : p->seqlen_q;
        if (layout == ATTN_BSHD) {
            st[t][0] = s * h * d; st[t][1] = d; st[t][2] = h * d;
        } else {
            st[t][0] = h * s * d; st[t][1] = s * d; st[t][2] = d;
        }
    }
}

/* One past the largest element index reachable through the strides. */
static size_t span(const int64_t st[3], int64_t nb, int64_t nh, int64_t ns, int64_t d)
{
    if (nb == 0 || nh == 0 || ns == 0) return 0;
    return (size_t)((nb - 1) * st[0] + (nh - 1) * st[1] + (ns - 1) * st[2] + d);
}

size_t attn_numel_q(const AttnProblem *p)
{
    size_t a = span(p->q_stride, p->batch, p->heads_q, p->seqlen_q, p->head_dim);
    size_t b = span(p->o_stride, p->batch, p->heads_q, p->seqlen_q, p->head_dim);
    return a > b ? a : b;
}

size_t attn_numel_kv(const AttnProblem *p)
{
    size_t a = span(p->k_stride, p->batch, p->heads_kv, p->seqlen_k, p->head_dim);
    size_t b = span(p->v_stride, p->batch, p->heads_kv, p->seqlen_k, p->head_dim);
    return a > b ? a : b;
}

/* Keys 0 .. n-1 are within the sequence and the causal bound of query row i. */
static int causal_keys(const AttnProblem *p, int i)
{
    if (!p->causal) return p->seqlen_k;
    long n = (long)i + p->seqlen_k - p->seqlen_q + 1;
    if (n < 0) n = 0;
    return n > p->seqlen_k ? p->seqlen_k : (int)n;
}

int attn_visible(const AttnProblem *p, int b, int h, int i, int j)
{
    if (j < 0 || j >= causal_keys(p, i)) return 0;
    return !p->mask_mod || p->mask_mod(b, h, i, j, p->mod_ctx);
}

int attn_row_empty(const AttnProblem *p, int b, int h, int i)
{
    for (int j = 0; j < causal_keys(p, i); j++)
        if (attn_visible(p, b, h, i, j)) return 0;
    return 1;
}

static size_t at(const int64_t st[3], int b, int h, int s) { return (size_t)(b * st[0] + h * st[1] + s * st[2]); }
static size_t dense_row(const AttnProblem *p, int b, int h, int i) { return ((size_t)b * p->heads_q + h) * p->seqlen_q + i; }
static int kv_head(const AttnProblem *p, int h) { return h / (p->heads_q / p->heads_kv); }

void attn_ref_fwd(const AttnProblem *p, const void *q, const void *k, const void *v, double *o, double *lse)
{
    int D = p->head_dim;
    double *s = malloc(sizeof(double) * (size_t)(p->seqlen_k > 0 ? p->seqlen_k : 1));
    double *acc = malloc(sizeof(double) * (size_t)D);
    for (int b = 0; b < p->batch; b++)
        for (int h = 0; h < p->heads_q; h++)
            for (int i = 0; i < p->seqlen_q; i++) {
                int hk = kv_head(p, h), n = causal_keys(p, i), any = 0;
                size_t qi = at(p->q_stride, b, h, i), row = dense_row(p, b, h, i);
                double m = -INFINITY, l = 0;
                for (int j = 0; j < n; j++) {
                    s[j] = -INFINITY;
                    if (!attn_visible(p, b, h, i, j)) continue;
                    size_t kj = at(p->k_stride, b, hk, j);
                    double dotp = 0;
                    for (int d = 0; d < D; d++) dotp += attn_get(p->dtype, q, qi + d) * attn_get(p->dtype, k, kj + d);
                    s[j] = dotp * p->scale;
                    if (p->score_mod) s[j] = p->score_mod(s[j], b, h, i, j, p->mod_ctx);
                    if (s[j] > m) m = s[j];
                    any = 1;
                }
                memset(acc, 0, sizeof(double) * (size_t)D);
                for (int j = 0; any && j < n; j++) {
                    if (s[j] == -INFINITY) continue;
                    double e = exp(s[j] - m);
                    size_t vj = at(p->v_stride, b, hk, j);
                    l += e;
                    for (int d = 0; d < D; d++) acc[d] += e * attn_get(p->dtype, v, vj + d);
                }
                for (int d = 0; o && d < D; d++) o[row * D + d] = any ? acc[d] / l : 0.0;
                if (lse) lse[row] = any ? m + log(l) : -INFINITY;
            }
    free(s);
    free(acc);
}

void attn_ref_torchlike(const AttnProblem *p, const void *q, const void *k, const void *v, double *o)
{
    int D = p->head_dim;
    float *s = malloc(sizeof(float) * (size_t)(p->seqlen_k > 0 ? p->seqlen_k : 1));
    float *acc = malloc(sizeof(float) * (size_t)D);
    float scale = (float)p->scale;
    for (int b = 0; b < p->batch; b++)
        for (int h = 0; h < p->heads_q; h++)
            for (int i = 0; i < p->seqlen_q; i++) {
                int hk = kv_head(p, h), n = causal_keys(p, i), any = 0;
                size_t qi = at(p->q_stride, b, h, i), row = dense_row(p, b, h, i);
                float m = -INFINITY, l = 0;
                for (int j = 0; j < n; j++) {
                    s[j] = -INFINITY;
                    if (!attn_visible(p, b, h, i, j)) continue;
                    size_t kj = at(p->k_stride, b, hk, j);
                    float dotp = 0;
                    for (int d = 0; d < D; d++)
                        dotp += (float)attn_get(p->dtype, q, qi + d) * (float)attn_get(p->dtype, k, kj + d);
                    s[j] = dotp * scale;
                    if (p->score_mod) s[j] = (float)p->score_mod(s[j], b, h, i, j, p->mod_ctx);
                    if (s[j] > m) m = s[j];
                    any = 1;
                }
                for (int j = 0; any && j < n; j++) {
                    s[j] = expf(s[j] - m);
                    l += s[j];
                }
                memset(acc, 0, sizeof(float) * (size_t)D);
                for (int j = 0; any && j < n; j++) {
                    float pj = (float)attn_round(p->dtype, s[j] / l);
                    size_t vj = at(p->v_stride, b, hk, j);
                    for (int d = 0; d < D; d++) acc[d] += pj * (float)attn_get(p->dtype, v, vj + d);
                }
                for (int d = 0; d < D; d++) o[row * D + d] = any ? attn_round(p->dtype, acc[d]) : 0.0;
            }
    free(s);
    free(acc);
}

AttnErr attn_compare(const AttnProblem *p, const void *o_dev, const float *lse_dev,
                     const double *ref_o, const double *ref_lse)
{
    AttnErr e;
    memset(&e, 0, sizeof e);
    int D = p->head_dim;
    double sum = 0;
    int64_t count = 0;
    for (int b = 0; b < p->batch; b++)
        for (int h = 0; h < p->heads_q; h++)
            for (int i = 0; i < p->seqlen_q; i++) {
                if (attn_row_empty(p, b, h, i)) continue;
                size_t oi = at(p->o_stride, b, h, i), row = dense_row(p, b, h, i);
                for (int d = 0; d < D; d++) {
                    double x = attn_get(p->dtype, o_dev, oi + d);
                    double err = fabs(x - ref_o[row * D + d]);
                    if (!isfinite(x)) { e.nonfinite++; continue; }
                    sum += err;
                    count++;
                    if (err > e.o_max_abs) {
                        e.o_max_abs = err;
                        e.worst_b = b; e.worst_h = h; e.worst_i = i; e.worst_d = d;
                    }
                }
                if (lse_dev) {
                    double x = lse_dev[row];
                    if (!isfinite(x)) { e.nonfinite++; continue; }
                    double rel = fabs(x - ref_lse[row]) / fmax(1.0, fabs(ref_lse[row]));
                    if (rel > e.lse_max_rel) e.lse_max_rel = rel;
                }
            }
    e.o_mean_abs = count ? sum / (double)count : 0;
    return e;
}

double attn_max_abs_diff(const AttnProblem *p, const double *a, const double *b)
{
    double mx = 0;
    int D = p->head_dim;
    for (int bb = 0; bb < p->batch; bb++)
        for (int h = 0; h < p->heads_q; h++)
            for (int i = 0; i < p->seqlen_q; i++) {
                if (attn_row_empty(p, bb, h, i)) continue;
                size_t row = dense_row(p, bb, h, i);
                for (int d = 0; d < D; d++) mx = fmax(mx, fabs(a[row * D + d] - b[row * D + d]));
            }
    return mx;
}

int64_t attn_check_empty_rows(const AttnProblem *p, const void *o_dev, const float *lse_dev)
{
    int64_t bad = 0;
    for (int b = 0; b < p->batch; b++)
        for (int h = 0; h < p->heads_q; h++)
            for (int i = 0; i < p->seqlen_q; i++) {
                if (!attn_row_empty(p, b, h, i)) continue;
                size_t oi = at(p->o_stride, b, h, i);
                for (int d = 0; d < p->head_dim; d++)
                    if (attn_get(p->dtype, o_dev, oi + d) != 0.0) bad++;
                if (lse_dev) {
                    float x = lse_dev[dense_row(p, b, h, i)];
                    if (!(isinf(x) && x < 0)) bad++;
                }
            }
    return bad;
}

/* ---- decode: one forward problem per sequence ---- */

/* The decode program's hooks see token i of sequence b at its position i + L - Sq and the
 * real batch index; the per-sequence forward problem numbers them 0.. and 0. */
typedef struct DecodeHooks { const AttnProblem *p; int b, off; } DecodeHooks;
static double dec_score(double s, int b, int h, int i, int j, const void *ctx)
{
    const DecodeHooks *w = ctx;
    return w->p->score_mod(s, w->b, h, i + w->off, j, w->p->mod_ctx);
}
static int dec_mask(int b, int h, int i, int j, const void *ctx)
{
    const DecodeHooks *w = ctx;
    return w->p->mask_mod(w->b, h, i + w->off, j, w->p->mod_ctx);
}

/* Judge one sequence's problem pb (batch 1) against the references and merge the result into
 * r (maxima; sum collects the mean errors; b is the sequence reported as worst_b). */
static void judge_seq(AttnDecodeErr *r, double *sum, int b, const AttnProblem *pb, const void *qb, const void *kb,
                      const void *vb, const void *ob, const float *lb, double *ref, double *plain, double *lse)
{
    attn_ref_fwd(pb, qb, kb, vb, ref, lse);
    attn_ref_torchlike(pb, qb, kb, vb, plain);
    AttnErr e = attn_compare(pb, ob, lb, ref, lse);
    if (e.o_max_abs > r->e.o_max_abs) {
        r->e.o_max_abs = e.o_max_abs;
        r->e.worst_b = b, r->e.worst_h = e.worst_h, r->e.worst_i = e.worst_i, r->e.worst_d = e.worst_d;
    }
    r->e.lse_max_rel = fmax(r->e.lse_max_rel, e.lse_max_rel);
    r->e.nonfinite += e.nonfinite;
    *sum += e.o_mean_abs;
    r->plain_err = fmax(r->plain_err, attn_max_abs_diff(pb, plain, ref));
    r->empty_bad += attn_check_empty_rows(pb, ob, lb);
}

AttnDecodeErr attn_decode_judge(const AttnProblem *p, const int *seqlens, const void *q, const void *k,
                                const void *v, const void *o_dev, const float *lse_dev)
{
    AttnDecodeErr r = {{0}, 0, 0};
    size_t es = attn_dtype_size(p->dtype), rows = (size_t)p->heads_q * p->seqlen_q;
    double *ref = malloc(sizeof(double) * rows * (size_t)p->head_dim + 8);
    double *plain = malloc(sizeof(double) * rows * (size_t)p->head_dim + 8);
    double *lse = malloc(sizeof(double) * rows + 8);
    double sum = 0;
    for (int b = 0; b < p->batch; b++) {
        AttnProblem pb = *p;
        pb.batch = 1;
        pb.seqlen_k = seqlens[b];
        DecodeHooks w = {p, b, seqlens[b] - p->seqlen_q};
        pb.score_mod = p->score_mod ? dec_score : NULL;
        pb.mask_mod = p->mask_mod ? dec_mask : NULL;
        pb.mod_ctx = &w;
        const char *qb = (const char *)q + (size_t)(b * p->q_stride[0]) * es;
        const char *kb = (const char *)k + (size_t)(b * p->k_stride[0]) * es;
        const char *vb = (const char *)v + (size_t)(b * p->v_stride[0]) * es;
        const char *ob = (const char *)o_dev + (size_t)(b * p->o_stride[0]) * es;
        const float *lb = lse_dev ? lse_dev + (size_t)b * rows : NULL;
        judge_seq(&r, &sum, b, &pb, qb, kb, vb, ob, lb, ref, plain, lse);
    }
    r.e.o_mean_abs = p->batch ? sum / p->batch : 0;
    free(ref);
    free(plain);
    free(lse);
    return r;
}

/* ---- varlen: one forward problem per packed sequence ---- */

void attn_varlen_pack(AttnProblem *p, int nseq, const int *lens_q, const int *lens_k, int head_major, int pitch,
                      int *cu_q, int *cu_k)
{
    p->batch = nseq;
    p->seqlen_q = p->seqlen_k = 0;
    cu_q[0] = cu_k[0] = 0;
    for (int b = 0; b < nseq; b++) {
        cu_q[b + 1] = cu_q[b] + lens_q[b];
        cu_k[b + 1] = cu_k[b] + lens_k[b];
        p->seqlen_q = lens_q[b] > p->seqlen_q ? lens_q[b] : p->seqlen_q;
        p->seqlen_k = lens_k[b] > p->seqlen_k ? lens_k[b] : p->seqlen_k;
    }
    for (int t = 0; t < 4; t++) {
        int64_t *st = t == 0 ? p->q_stride : t == 1 ? p->k_stride : t == 2 ? p->v_stride : p->o_stride;
        int kv = t == 1 || t == 2, heads = kv ? p->heads_kv : p->heads_q, total = kv ? cu_k[nseq] : cu_q[nseq];
        st[0] = 0;
        st[1] = head_major ? (int64_t)total * pitch : pitch;
        st[2] = head_major ? pitch : (int64_t)heads * pitch;
    }
}

AttnVarlenSeq attn_varlen_seq(const AttnProblem *p, const int *cu_q, const int *cu_k, int b)
{
    AttnVarlenSeq s = {.p = *p};
    s.p.batch = 1;
    s.p.seqlen_q = cu_q[b + 1] - cu_q[b];
    s.p.seqlen_k = cu_k[b + 1] - cu_k[b];
    s.q_off = (size_t)((int64_t)cu_q[b] * p->q_stride[2]);
    s.o_off = (size_t)((int64_t)cu_q[b] * p->o_stride[2]);
    s.k_off = (size_t)((int64_t)cu_k[b] * p->k_stride[2]);
    s.v_off = (size_t)((int64_t)cu_k[b] * p->v_stride[2]);
    return s;
}

AttnDecodeErr attn_varlen_judge(const AttnProblem *p, const int *cu_q, const int *cu_k, const void *q,
                                const void *k, const void *v, const void *o_dev, const float *lse_dev)
{
    AttnDecodeErr r = {{0}, 0, 0};
    size_t es = attn_dtype_size(p->dtype), total_q = (size_t)cu_q[p->batch];
    size_t rows = (size_t)p->heads_q * (total_q + 1);   /* enough for any one sequence */
    double *ref = malloc(sizeof(double) * rows * (size_t)p->head_dim + 8);
    double *plain = malloc(sizeof(double) * rows * (size_t)p->head_dim + 8);
    double *lse = malloc(sizeof(double) * rows + 8);
    float *lb = malloc(sizeof(float) * rows + 8);
    double sum = 0;
    for (int b = 0; b < p->batch; b++) {
        AttnVarlenSeq s = attn_varlen_seq(p, cu_q, cu_k, b);
        /* the sequence's LSE rows, [heads, total_q] -> dense [heads, seqlen] */
        for (int h = 0; h < p->heads_q; h++)
            for (int i = 0; i < s.p.seqlen_q; i++)
                lb[(size_t)h * s.p.seqlen_q + i] = lse_dev[(size_t)h * total_q + (size_t)cu_q[b] + i];
        judge_seq(&r, &sum, b, &s.p, (const char *)q + s.q_off * es, (const char *)k + s.k_off * es,
                  (const char *)v + s.v_off * es, (const char *)o_dev + s.o_off * es, lb, ref, plain, lse);
    }
    r.e.o_mean_abs = p->batch ? sum / p->batch : 0;
    free(ref);
    free(plain);
    free(lse);
    free(lb);
    return r;
}

void attn_paged_make(const AttnProblem *p, const int *seqlens, int page, const void *k, const void *v,
                     uint64_t seed, AttnPaged *out)
{
    size_t es = attn_dtype_size(p->dtype), row = (size_t)p->heads_kv * p->head_dim;
    int maxlen = 1;
    for (int b = 0; b < p->batch; b++) maxlen = seqlens[b] > maxlen ? seqlens[b] : maxlen;
    int pps = (maxlen + page - 1) / page;
    *out = (AttnPaged){.page = page, .max_pages = pps + 1, .num_pages = p->batch * pps + 3};
    out->numel = (size_t)out->num_pages * page * row;
    out->k = malloc(out->numel * es);
    out->v = malloc(out->numel * es);
    memset(out->k, 0xFF, out->numel * es);
    memset(out->v, 0xFF, out->numel * es);
    int *perm = malloc(sizeof(int) * out->num_pages);
    for (int i = 0; i < out->num_pages; i++) perm[i] = i;
    for (int i = out->num_pages - 1; i > 0; i--) {   /* Fisher-Yates */
        int j = (int)(splitmix64(&seed) % (uint64_t)(i + 1)), t = perm[i];
        perm[i] = perm[j], perm[j] = t;
    }
    out->block_table = malloc(sizeof(int32_t) * p->batch * out->max_pages);
    for (int b = 0; b < p->batch; b++)
        for (int i = 0; i < out->max_pages; i++)
            out->block_table[b * out->max_pages + i] = i < pps ? perm[b * pps + i] : -1;
    for (int b = 0; b < p->batch; b++)
        for (int j = 0; j < seqlens[b]; j++) {
            size_t dst = ((size_t)out->block_table[b * out->max_pages + j / page] * page + j % page) * row;
            size_t ks = (size_t)(b * p->k_stride[0] + j * p->k_stride[2]);
            size_t vs = (size_t)(b * p->v_stride[0] + j * p->v_stride[2]);
            for (int h = 0; h < p->heads_kv; h++) {   /* K/V heads through their strides */
                memcpy((char *)out->k + (dst + (size_t)h * p->head_dim) * es,
                       (const char *)k + (ks + (size_t)(h * p->k_stride[1])) * es, (size_t)p->head_dim * es);
                memcpy((char *)out->v + (dst + (size_t)h * p->head_dim) * es,
                       (const char *)v + (vs + (size_t)(h * p->v_stride[1])) * es, (size_t)p->head_dim * es);
            }
        }
    free(perm);
}

void attn_paged_free(AttnPaged *pg)
{
    free(pg->k);
    free(pg->v);
    free(pg->block_table);
    memset(pg, 0, sizeof *pg);
}

/* ---------------- backward ---------------- */

static size_t dense_kv_row(const AttnProblem *p, int b, int hk, int j)
{
    return ((size_t)b * p->heads_kv + hk) * p->seqlen_k + j;
}

/* The softmax row of query i of (b, h) in float64: prob[j] (0 where hidden) and the
 * factor grad[j] = score_mod'(scale * q.k) (1 without a score_mod_grad); returns 0 when
 * the row sees no key. */
static int ref_prob_row(const AttnProblem *p, const void *q, const void *k, int b, int h, int i, double *prob,
                        double *grad)
{
    int hk = kv_head(p, h), any = 0;
    size_t qi = at(p->q_stride, b, h, i);
    double m = -INFINITY, l = 0;
    for (int j = 0; j < p->seqlen_k; j++) {
        prob[j] = -INFINITY;
        grad[j] = 0;   /* a hidden pair: P = 0, and its g' must not be garbage (0 * NaN = NaN) */
        if (!attn_visible(p, b, h, i, j)) continue;
        size_t kj = at(p->k_stride, b, hk, j);
        double dotp = 0;
        for (int d = 0; d < p->head_dim; d++) dotp += attn_get(p->dtype, q, qi + d) * attn_get(p->dtype, k, kj + d);
        prob[j] = dotp * p->scale;
        grad[j] = p->score_mod_grad ? p->score_mod_grad(prob[j], b, h, i, j, p->mod_ctx) : 1.0;
        if (p->score_mod) prob[j] = p->score_mod(prob[j], b, h, i, j, p->mod_ctx);
        if (prob[j] > m) m = prob[j];
        any = 1;
    }
    for (int j = 0; j < p->seqlen_k; j++) {
        prob[j] = any && prob[j] != -INFINITY ? exp(prob[j] - m) : 0.0;
        l += prob[j];
    }
    for (int j = 0; any && j < p->seqlen_k; j++) prob[j] /= l;
    return any;
}

void attn_ref_bwd(const AttnProblem *p, const void *q, const void *k, const void *v, const void *dout,
                  double *dq, double *dk, double *dv)
{
    int D = p->head_dim, Sk = p->seqlen_k;
    size_t nkv = (size_t)p->batch * p->heads_kv * Sk * D;
    memset(dq, 0, sizeof(double) * (size_t)p->batch * p->heads_q * p->seqlen_q * D);
    memset(dk, 0, sizeof(double) * nkv);
    memset(dv, 0, sizeof(double) * nkv);
    double *prob = malloc(sizeof(double) * (size_t)(Sk > 0 ? Sk : 1));
    double *dp = malloc(sizeof(double) * (size_t)(Sk > 0 ? Sk : 1));
    double *grad = malloc(sizeof(double) * (size_t)(Sk > 0 ? Sk : 1));
    for (int b = 0; b < p->batch; b++)
        for (int h = 0; h < p->heads_q; h++)
            for (int i = 0; i < p->seqlen_q; i++) {
                if (!ref_prob_row(p, q, k, b, h, i, prob, grad)) continue;
                int hk = kv_head(p, h);
                size_t qi = at(p->q_stride, b, h, i), oi = at(p->o_stride, b, h, i), row = dense_row(p, b, h, i);
                double delta = 0;   /* rowsum(dO * O) = sum_j P_j dP_j */
                for (int j = 0; j < Sk; j++) {
                    dp[j] = 0;
                    if (prob[j] == 0) continue;
                    size_t vj = at(p->v_stride, b, hk, j);
                    for (int d = 0; d < D; d++) dp[j] += attn_get(p->dtype, dout, oi + d) * attn_get(p->dtype, v, vj + d);
                    delta += prob[j] * dp[j];
                }
                for (int j = 0; j < Sk; j++) {
                    if (prob[j] == 0) continue;
                    double ds = prob[j] * (dp[j] - delta) * grad[j] * p->scale;
                    size_t kj = at(p->k_stride, b, hk, j), kr = dense_kv_row(p, b, hk, j);
                    for (int d = 0; d < D; d++) {
                        dq[row * D + d] += ds * attn_get(p->dtype, k, kj + d);
                        dk[kr * D + d] += ds * attn_get(p->dtype, q, qi + d);
                        dv[kr * D + d] += prob[j] * attn_get(p->dtype, dout, oi + d);
                    }
                }
            }
    free(prob);
    free(dp);
    free(grad);
}

/* f32 scores and softmax of one row, P rounded to the dtype (attn_ref_torchlike's forward),
 * and score_mod's derivative in f32 (1 without one). */
static int torch_prob_row(const AttnProblem *p, const void *q, const void *k, int b, int h, int i, float *prob,
                          float *grad)
{
    int hk = kv_head(p, h), any = 0;
    size_t qi = at(p->q_stride, b, h, i);
    float m = -INFINITY, l = 0;
    for (int j = 0; j < p->seqlen_k; j++) {
        prob[j] = -INFINITY;
        grad[j] = 0;   /* a hidden pair: P = 0, and its g' must not be garbage (0 * NaN = NaN) */
        if (!attn_visible(p, b, h, i, j)) continue;
        size_t kj = at(p->k_stride, b, hk, j);
        float dotp = 0;
        for (int d = 0; d < p->head_dim; d++)
            dotp += (float)attn_get(p->dtype, q, qi + d) * (float)attn_get(p->dtype, k, kj + d);
        prob[j] = dotp * (float)p->scale;
        grad[j] = p->score_mod_grad ? (float)p->score_mod_grad(prob[j], b, h, i, j, p->mod_ctx) : 1.0f;
        if (p->score_mod) prob[j] = (float)p->score_mod(prob[j], b, h, i, j, p->mod_ctx);
        if (prob[j] > m) m = prob[j];
        any = 1;
    }
    for (int j = 0; j < p->seqlen_k; j++) {
        prob[j] = any && prob[j] != -INFINITY ? expf(prob[j] - m) : 0.0f;
        l += prob[j];
    }
    for (int j = 0; any && j < p->seqlen_k; j++) prob[j] = (float)attn_round(p->dtype, prob[j] / l);
    return any;
}

void attn_ref_bwd_torchlike(const AttnProblem *p, const void *q, const void *k, const void *v,
                            const void *dout, double *dq, double *dk, double *dv)
{
    int D = p->head_dim, Sk = p->seqlen_k;
    size_t nq = (size_t)p->batch * p->heads_q * p->seqlen_q * D, nkv = (size_t)p->batch * p->heads_kv * Sk * D;
    float *dk32 = calloc(nkv + 1, sizeof(float)), *dv32 = calloc(nkv + 1, sizeof(float));
    float *prob = malloc(sizeof(float) * (size_t)(Sk > 0 ? Sk : 1));
    float *ds = malloc(sizeof(float) * (size_t)(Sk > 0 ? Sk : 1));
    float *grad = malloc(sizeof(float) * (size_t)(Sk > 0 ? Sk : 1));
    float *acc = malloc(sizeof(float) * (size_t)D);
    AttnDtype t = p->dtype;
    for (size_t x = 0; x < nq; x++) dq[x] = 0;
    for (int b = 0; b < p->batch; b++)
        for (int h = 0; h < p->heads_q; h++)
            for (int i = 0; i < p->seqlen_q; i++) {
                if (!torch_prob_row(p, q, k, b, h, i, prob, grad)) continue;
                int hk = kv_head(p, h);
                size_t qi = at(p->q_stride, b, h, i), oi = at(p->o_stride, b, h, i), row = dense_row(p, b, h, i);
                float delta = 0;
                for (int j = 0; j < Sk; j++) {   /* dP rounded, then softmax's backward in f32 */
                    size_t vj = at(p->v_stride, b, hk, j);
                    float dpj = 0;
                    for (int d = 0; d < D; d++) dpj += (float)attn_get(t, dout, oi + d) * (float)attn_get(t, v, vj + d);
                    ds[j] = (float)attn_round(t, dpj);
                    delta += prob[j] * ds[j];
                }
                memset(acc, 0, sizeof(float) * (size_t)D);
                for (int j = 0; j < Sk; j++) {
                    float dsj = (float)attn_round(t, attn_round(t, prob[j] * (ds[j] - delta) * grad[j]) * (float)p->scale);
                    size_t kj = at(p->k_stride, b, hk, j), kr = dense_kv_row(p, b, hk, j);
                    for (int d = 0; d < D; d++) {
                        acc[d] += dsj * (float)attn_get(t, k, kj + d);
                        dk32[kr * D + d] += dsj * (float)attn_get(t, q, qi + d);
                        dv32[kr * D + d] += prob[j] * (float)attn_get(t, dout, oi + d);
                    }
                }
                for (int d = 0; d < D; d++) dq[row * D + d] = attn_round(t, acc[d]);
            }
    for (size_t x = 0; x < nkv; x++) {
        dk[x] = attn_round(t, dk32[x]);
        dv[x] = attn_round(t, dv32[x]);
    }
    free(dk32); free(dv32); free(prob); free(ds); free(grad); free(acc);
}

double attn_ref_loss(const AttnProblem *p, const void *q, const void *k, const void *v, const void *dout)
{
    int D = p->head_dim;
    double *o = malloc(sizeof(double) * ((size_t)p->batch * p->heads_q * p->seqlen_q * D + 1));
    attn_ref_fwd(p, q, k, v, o, NULL);
    double loss = 0;
    for (int b = 0; b < p->batch; b++)
        for (int h = 0; h < p->heads_q; h++)
            for (int i = 0; i < p->seqlen_q; i++)
                for (int d = 0; d < D; d++)
                    loss += o[dense_row(p, b, h, i) * D + d] * attn_get(p->dtype, dout, at(p->o_stride, b, h, i) + d);
    free(o);
    return loss;
}

double attn_grad_max_err(AttnDtype t, const void *x, const int64_t st[3], int nb, int nh, int ns, int d,
                         const double *ref, int64_t *nonfinite)
{
    double mx = 0;
    size_t r = 0;
    for (int b = 0; b < nb; b++)
        for (int h = 0; h < nh; h++)
            for (int s = 0; s < ns; s++)
                for (int e = 0; e < d; e++, r++) {
                    double y = attn_get(t, x, at(st, b, h, s) + e);
                    if (!isfinite(y)) {
                        if (nonfinite) ++*nonfinite;
                        continue;
                    }
                    mx = fmax(mx, fabs(y - ref[r]));
                }
    return mx;
}

int64_t attn_pad_clobbered(const void *buf, size_t n, const int64_t st[3], int nb, int nh, int ns, int d)
{
    unsigned char *mine = calloc(n + 1, 1);
    for (int b = 0; b < nb; b++)
        for (int h = 0; h < nh; h++)
            for (int i = 0; i < ns; i++) memset(mine + at(st, b, h, i), 1, (size_t)d);
    int64_t bad = 0;
    for (size_t i = 0; i < n; i++) bad += !mine[i] && ((const uint16_t *)buf)[i] != 0xFFFF;
    free(mine);
    return bad;
}

double attn_dense_max_diff(const double *a, const double *b, size_t n)
{
    double mx = 0;
    for (size_t i = 0; i < n; i++) mx = fmax(mx, fabs(a[i] - b[i]));
    return mx;
}

AttnVarlenBwdErr attn_varlen_bwd_judge(const AttnProblem *p, const int *cu_q, const int *cu_k, const void *q,
                                       const void *k, const void *v, const void *dout, const void *dq,
                                       const void *dk, const void *dv)
{
    AttnVarlenBwdErr r;
    memset(&r, 0, sizeof r);
    size_t es = attn_dtype_size(p->dtype);
    int D = p->head_dim, hq = p->heads_q, hkv = p->heads_kv;
    size_t cap = 8;   /* the largest sequence's dense dq + dk + dv */
    for (int b = 0; b < p->batch; b++) {
        size_t n = ((size_t)hq * (cu_q[b + 1] - cu_q[b]) + 2 * (size_t)hkv * (cu_k[b + 1] - cu_k[b])) * D;
        cap = n > cap ? n : cap;
    }
    double *ref = malloc(sizeof(double) * cap), *pl = malloc(sizeof(double) * cap);
    for (int b = 0; b < p->batch; b++) {
        AttnVarlenSeq s = attn_varlen_seq(p, cu_q, cu_k, b);
        const AttnProblem *sp = &s.p;
        const char *qb = (const char *)q + s.q_off * es, *kb = (const char *)k + s.k_off * es;
        const char *vb = (const char *)v + s.v_off * es, *ob = (const char *)dout + s.o_off * es;
        size_t nq = (size_t)hq * sp->seqlen_q * D, nkv = (size_t)hkv * sp->seqlen_k * D;
        attn_ref_bwd(sp, qb, kb, vb, ob, ref, ref + nq, ref + nq + nkv);
        attn_ref_bwd_torchlike(sp, qb, kb, vb, ob, pl, pl + nq, pl + nq + nkv);
        const void *x[3] = {(const char *)dq + s.q_off * es, (const char *)dk + s.k_off * es,
                            (const char *)dv + s.v_off * es};
        const int64_t *st[3] = {sp->q_stride, sp->k_stride, sp->v_stride};
        size_t off[3] = {0, nq, nq + nkv};
        for (int t = 0; t < 3; t++) {
            int nh = t ? hkv : hq, ns = t ? sp->seqlen_k : sp->seqlen_q;
            r.err[t] = fmax(r.err[t], attn_grad_max_err(p->dtype, x[t], st[t], 1, nh, ns, D, ref + off[t], &r.nonfinite));
            r.plain[t] = fmax(r.plain[t], attn_dense_max_diff(pl + off[t], ref + off[t], t ? nkv : nq));
        }
        for (int h = 0; h < hq; h++)
            for (int i = 0; i < sp->seqlen_q; i++)
                for (int d = 0; attn_row_empty(sp, 0, h, i) && d < D; d++)
                    r.empty_bad += attn_get(p->dtype, x[0], at(st[0], 0, h, i) + d) != 0.0;
    }
    free(ref);
    free(pl);
    return r;
}
