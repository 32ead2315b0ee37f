/* attn_padded.h — the f16 attention problem of the jit layer's interpreter tests
 * (test_attention_cpu.c, test_attention_persistent.c): [b, s, h, d + ATTN_PAD] tensors,
 * whose ATTN_PAD elements after each row stay poisoned (the calls must never write them),
 * V laid out as K and O as Q. Include after tools/attn_ref.c.
 *
 *   AttnProblem ap = attn_padded_problem(2, 4, 2, 70, 93, 64, 1);   // GQA 4/2, causal
 */
#ifndef KILN_TESTS_ATTN_PADDED_H
#define KILN_TESTS_ATTN_PADDED_H

#include <math.h>
#include <string.h>

#define ATTN_PAD 8   /* extra elements per row: the padding that must stay poisoned */

/* [b, s, h, d + ATTN_PAD] strides (batch, head, sequence) */
static inline void attn_padded_strides(int64_t st[3], int heads, int seqlen, int d)
{
    st[2] = (int64_t)heads * (d + ATTN_PAD), st[1] = d + ATTN_PAD, st[0] = (int64_t)seqlen * st[2];
}

static inline AttnProblem attn_padded_problem(int batch, int hq, int hkv, int sq, int sk, int d, int causal)
{
    AttnProblem ap = {.batch = batch, .heads_q = hq, .heads_kv = hkv, .seqlen_q = sq, .seqlen_k = sk,
                      .head_dim = d, .causal = causal, .scale = 1.0 / sqrt(d), .dtype = ATTN_F16};
    attn_padded_strides(ap.q_stride, hq, sq, d);
    attn_padded_strides(ap.k_stride, hkv, sk, d);
    memcpy(ap.v_stride, ap.k_stride, sizeof ap.k_stride);
    memcpy(ap.o_stride, ap.q_stride, sizeof ap.q_stride);
    return ap;
}

#endif
