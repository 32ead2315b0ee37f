/* attn_ref.h — float64 reference for the attention forward pass, plus the
 * "plain attention in the storage dtype" emulation and error metrics that the
 * FlashAttention accuracy rule needs.
 *
 * Problem: Q [B, Hq, Sq, D], K/V [B, Hkv, Sk, D], O [B, Hq, Sq, D], LSE [B, Hq, Sq],
 * each addressed through (batch, head, seq) strides in elements; the head-dim
 * stride is 1. Query head h reads key/value head h / (Hq / Hkv) (GQA; Hkv = 1 is MQA).
 * Causal masking is aligned bottom-right: query i sees keys j <= i + Sk - Sq,
 * so a query row with i + Sk - Sq < 0 sees nothing (O = 0, LSE = -inf).
 * LSE is natural-log: log(sum_j exp(scale * q_i . k_j)) over visible j.
 *
 * Host arrays hold f16 or bf16 bit patterns (uint16_t) or f32 values.
 * The reference outputs (o, lse) are dense double arrays: o[((b*Hq + h)*Sq + i)*D + d],
 * lse[(b*Hq + h)*Sq + i].
 */
#ifndef KILN_ATTN_REF_H
#define KILN_ATTN_REF_H

#include <stddef.h>
#include <stdint.h>

typedef enum AttnDtype { ATTN_F16, ATTN_BF16, ATTN_F32 } AttnDtype;

typedef struct AttnProblem {
    int batch, heads_q, heads_kv;
    int seqlen_q, seqlen_k, head_dim;
    int causal;
    double scale;               /* softmax scale, usually 1/sqrt(head_dim) */
    AttnDtype dtype;            /* element type of Q, K, V and O */
    /* strides in elements: [0] batch, [1] head, [2] sequence */
    int64_t q_stride[3], k_stride[3], v_stride[3], o_stride[3];
    /* Optional variant hooks (NULL: none), mirroring the program's score_mod /
     * mask_mod with raw (unaligned) query and key indices. score_mod takes and
     * returns the score in natural units (sm_scale * q.k); mask_mod returns
     * nonzero where query i may see key j (on top of the bounds and causal). */
    double (*score_mod)(double s, int b, int h, int i, int j, const void *ctx);
    int (*mask_mod)(int b, int h, int i, int j, const void *ctx);
    /* The backward's: d score_mod / ds at s (natural units; NULL: 1, or no score_mod). */
    double (*score_mod_grad)(double s, int b, int h, int i, int j, const void *ctx);
    const void *mod_ctx;
} AttnProblem;

/* Layouts: [b, s, h, d] ("bshd", the usual activation layout) or [b, h, s, d] ("bhsd"). */
typedef enum AttnLayout { ATTN_BSHD, ATTN_BHSD } AttnLayout;

/* Fill the four stride triples of `p` for a dense tensor of the given layout. */
void attn_set_strides(AttnProblem *p, AttnLayout layout);
/* Elements needed for the dense Q/O (heads_q) or K/V (heads_kv) buffer under its strides. */
size_t attn_numel_q(const AttnProblem *p);
size_t attn_numel_kv(const AttnProblem *p);

size_t attn_dtype_size(AttnDtype t);
/* Element `idx` of a host array of dtype t, as a double. */
double attn_get(AttnDtype t, const void *base, size_t idx);
/* Store x (rounded to t, nearest even) at element idx. */
void attn_put(AttnDtype t, void *base, size_t idx, double x);
/* x rounded to the dtype and back (identity for f32 rounding of a double: rounds to f32). */
double attn_round(AttnDtype t, double x);

/* Deterministic uniform values in [lo, hi), rounded to the dtype, written at
 * every element of a buffer of n elements; `seed` selects the sequence. */
void attn_fill_random(AttnDtype t, void *base, size_t n, uint64_t seed, double lo, double hi);
/* attn_fill_random's values in [-1, 1) for the nb x nh x ns x d elements a
 * tensor with strides st (batch, head, row; elements contiguous) owns in buf;
 * the rest of buf is left as it is (the tests keep it NaN). */
void attn_fill_strided(AttnDtype t, void *buf, const int64_t st[3], int nb, int nh, int ns, int d, uint64_t seed);

/* True when query i may see key j (bounds, causal, mask_mod). */
int attn_visible(const AttnProblem *p, int b, int h, int i, int j);
/* True when query row i of (b, h) sees no key at all (causal with i + Sk - Sq < 0,
 * Sk == 0, or everything masked by mask_mod). */
int attn_row_empty(const AttnProblem *p, int b, int h, int i);

/* The exact forward pass in float64: o (dense, see above) and lse (natural log;
 * -inf for empty rows, whose o is 0). Either output may be NULL. */
void attn_ref_fwd(const AttnProblem *p, const void *q, const void *k, const void *v,
                  double *o, double *lse);

/* Plain attention as PyTorch computes it in the storage dtype, emulated:
 * S = scale * Q K^T in f32 from the stored inputs, softmax in f32, P rounded to
 * the dtype, P V accumulated in f32, rounded to the dtype. Empty rows give 0.
 * o is dense like attn_ref_fwd's. */
void attn_ref_torchlike(const AttnProblem *p, const void *q, const void *k, const void *v, double *o);

/* Error of a kernel's outputs against the reference (rows that see no key are
 * checked separately by attn_check_empty_rows). */
typedef struct AttnErr {
    double o_max_abs;       /* max |O - ref| over visible rows */
    double o_mean_abs;
    double lse_max_rel;     /* max |LSE - ref| / max(1, |ref|) over visible rows */
    int64_t nonfinite;      /* NaN/inf in O or LSE of visible rows (poison left behind) */
    int worst_b, worst_h, worst_i, worst_d;   /* where o_max_abs happened */
} AttnErr;

/* o_dev: the kernel's O in p->dtype under p->o_stride; lse_dev: f32 [B, Hq, Sq] dense
 * (may be NULL to skip LSE). ref_o/ref_lse: dense doubles from attn_ref_fwd. */
AttnErr attn_compare(const AttnProblem *p, const void *o_dev, const float *lse_dev,
                     const double *ref_o, const double *ref_lse);
/* Max |a - b| between two dense double O arrays over visible rows. */
double attn_max_abs_diff(const AttnProblem *p, const double *a, const double *b);
/* Number of elements of empty rows where O != 0 or LSE != -inf (should be 0). */
int64_t attn_check_empty_rows(const AttnProblem *p, const void *o_dev, const float *lse_dev);

/* ---- decode (lang/lib/attention_decode.tile) ----
 * A decode problem is p with seqlen_q = the new tokens per sequence and a KV
 * cache whose sequence b holds seqlens[b] keys (p->seqlen_k is the cache's
 * capacity; the K/V strides address the contiguous cache). Token i of batch b
 * is the forward's row i of a problem with seqlen_k = seqlens[b], so causal
 * masking stays bottom-right aligned per sequence; p's hooks see the token's position
 * i + seqlens[b] - seqlen_q and the real b, as the program's do. Judged per batch against
 * attn_ref_fwd / attn_ref_torchlike; the errors are the maxima over batches. */
typedef struct AttnDecodeErr {
    AttnErr e;              /* merged: maxima, nonfinite summed, worst_b the global batch */
    double plain_err;       /* max |O_plain - ref| (the accuracy rule's yardstick) */
    int64_t empty_bad;      /* elements of rows seeing no key that are not O = 0 / LSE = -inf */
} AttnDecodeErr;
AttnDecodeErr attn_decode_judge(const AttnProblem *p, const int *seqlens, const void *q, const void *k,
                                const void *v, const void *o_dev, const float *lse_dev);

/* ---- packed variable-length batches (attn_fwd_varlen_*, FlashAttention's varlen) ----
 * p->batch sequences packed along one token axis: sequence b owns query tokens
 * [cu_q[b], cu_q[b + 1]) and key tokens [cu_k[b], cu_k[b + 1]) (batch + 1 prefix sums).
 * The strides' [1] is the head stride and [2] the token stride ([0] is not used); the
 * outputs' LSE is f32 [heads_q, total_q], total_q = cu_q[batch]. Sequence b is a problem
 * of its own (causal bottom-right aligned within it). Hooks are not supported (NULL). */
/* Lay out a pack: p->batch = nseq, the prefix sums cu_q/cu_k (nseq + 1 entries) of the lengths,
 * p->seqlen_q/k = the max lengths, and the four stride triples {0, head, token} of dense
 * [total, heads, pitch] tensors, or [heads, total, pitch] when head_major (pitch >= head_dim:
 * wider rows). The other fields of p are left as they are. */
void attn_varlen_pack(AttnProblem *p, int nseq, const int *lens_q, const int *lens_k, int head_major, int pitch,
                      int *cu_q, int *cu_k);
typedef struct AttnVarlenSeq {
    AttnProblem p;                      /* batch 1, the sequence's own lengths */
    size_t q_off, k_off, v_off, o_off;  /* element offset of its first token in each tensor */
} AttnVarlenSeq;
AttnVarlenSeq attn_varlen_seq(const AttnProblem *p, const int *cu_q, const int *cu_k, int b);
/* Judged per sequence like attn_decode_judge (same merged result). */
AttnDecodeErr attn_varlen_judge(const AttnProblem *p, const int *cu_q, const int *cu_k, const void *q,
                                const void *k, const void *v, const void *o_dev, const float *lse_dev);

/* The backward of a packed problem judged per sequence: dq/dk/dv (p->dtype, p's strides) against
 * attn_ref_bwd, the plain error from attn_ref_bwd_torchlike; maxima over the sequences, and the
 * dq elements of rows that see no key that are not 0 (declared below with the backward). */
typedef struct AttnVarlenBwdErr {
    double err[3], plain[3];    /* dQ, dK, dV: max |g - ref| and max |g_plain - ref| */
    int64_t nonfinite, empty_bad;
} AttnVarlenBwdErr;

/* The keys of a contiguous decode cache (p's K/V strides, sequence b's first seqlens[b]
 * rows) copied into a paged cache [num_pages, page, heads_kv, head_dim] whose pages are
 * shuffled (seed) through a block table [batch, max_pages] (one spare column of -1, three
 * spare pages); every element no key owns is NaN. Free with attn_paged_free. */
typedef struct AttnPaged {
    void *k, *v;                /* num_pages * page * heads_kv * head_dim elements each */
    int32_t *block_table;       /* [batch, max_pages] */
    int page, max_pages, num_pages;
    size_t numel;
} AttnPaged;
void attn_paged_make(const AttnProblem *p, const int *seqlens, int page, const void *k, const void *v,
                     uint64_t seed, AttnPaged *out);
void attn_paged_free(AttnPaged *pg);

/* ---------------- backward ----------------
 * Gradients of O = softmax(scale * Q K^T) V given dO (same shape and strides as O:
 * p->o_stride). Outputs are dense doubles: dq like o ([B, Hq, Sq, D]), dk and dv
 * [B, Hkv, Sk, D] (dk[((b*Hkv + hk)*Sk + j)*D + d]); under GQA a K/V head's gradient is
 * the sum over the query heads of its group. Rows that see no key contribute nothing
 * (their dq is 0); keys no row sees get dk = dv = 0. A score_mod g needs its derivative
 * p->score_mod_grad: dS is multiplied by g'(s) (s = scale * q.k before g). */

/* The exact backward in float64 (analytic: dS = P * (dP - rowsum(dO * O))). */
void attn_ref_bwd(const AttnProblem *p, const void *q, const void *k, const void *v, const void *dout,
                  double *dq, double *dk, double *dv);
/* The backward as PyTorch computes it in the storage dtype, emulated: P (f32 softmax,
 * rounded to the dtype), O rounded; dV = P^T dO, dP = dO V^T and dS = P * (dP - rowsum(P * dP))
 * each accumulated in f32 and rounded to the dtype; dQ = scale * dS K and dK = scale * dS^T Q
 * likewise. Outputs dense like attn_ref_bwd's: the "plain" error of the accuracy rule. */
void attn_ref_bwd_torchlike(const AttnProblem *p, const void *q, const void *k, const void *v,
                            const void *dout, double *dq, double *dk, double *dv);
/* The loss sum(O * dO) of the float64 forward, dO read through p->o_stride:
 * its gradient with respect to Q, K and V is attn_ref_bwd's (for finite differences). */
double attn_ref_loss(const AttnProblem *p, const void *q, const void *k, const void *v, const void *dout);

/* Max |x - ref| of a kernel's gradient (dtype t, strides st, nb x nh x ns x d) against a
 * dense double reference; NaN/inf elements are counted in *nonfinite (not in the max). */
double attn_grad_max_err(AttnDtype t, const void *x, const int64_t st[3], int nb, int nh, int ns, int d,
                         const double *ref, int64_t *nonfinite);
/* Elements of a 16-bit buffer of n elements outside the nb x nh x ns x d tensor at strides st
 * that are no longer the 0xFFFF poison (an output wrote where it must not). */
int64_t attn_pad_clobbered(const void *buf, size_t n, const int64_t st[3], int nb, int nh, int ns, int d);
/* Max |a - b| of two dense double arrays of n elements. */
double attn_dense_max_diff(const double *a, const double *b, size_t n);
/* See AttnVarlenBwdErr: q, k, v, dout are the packed inputs, dq, dk, dv the packed gradients. */
AttnVarlenBwdErr attn_varlen_bwd_judge(const AttnProblem *p, const int *cu_q, const int *cu_k, const void *q,
                                       const void *k, const void *v, const void *dout, const void *dq,
                                       const void *dk, const void *dv);

#endif
