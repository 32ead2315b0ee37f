/* ex_attention.c — the shipped FlashAttention forward program in the main job:
 * causal GQA attention with ragged lengths (seqlen_q != seqlen_k, neither a
 * multiple of the block), judged by FlashAttention's rule against float64. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "examples/run_examples.h"
#include "tools/attn_ref.h"

int ex_attention(ExRunner *r)
{
    AttnProblem p;
    memset(&p, 0, sizeof p);
    p.batch = 2; p.heads_q = 4; p.heads_kv = 2;
    p.seqlen_q = r->dev ? 1000 : 100;
    p.seqlen_k = r->dev ? 1300 : 150;
    p.head_dim = 64; p.causal = 1;
    p.scale = 1.0 / sqrt(64.0);
    p.dtype = ATTN_F16;
    attn_set_strides(&p, ATTN_BSHD);
    size_t nq = attn_numel_q(&p), nkv = attn_numel_kv(&p), nl = (size_t)p.batch * p.heads_q * p.seqlen_q;
    uint16_t *q = malloc(nq * 2), *k = malloc(nkv * 2), *v = malloc(nkv * 2), *o = malloc(nq * 2);
    float *lse = malloc(nl * sizeof *lse);
    attn_fill_random(p.dtype, q, nq, 1, -1, 1);
    attn_fill_random(p.dtype, k, nkv, 2, -1, 1);
    attn_fill_random(p.dtype, v, nkv, 3, -1, 1);
    memset(o, 0xFF, nq * 2);          /* NaN poison */
    for (size_t i = 0; i < nl; i++) lse[i] = NAN;

    /* bound by parameter name (ExProgram.by_name): the program's signature decides the order */
    ExArg a[22];
    void *bufs[5] = {q, k, v, o, lse};
    size_t bytes[5] = {nq * 2, nkv * 2, nkv * 2, nq * 2, nl * 4};
    const char *names[5] = {"Q", "K", "V", "O", "LSE"};
    for (int i = 0; i < 5; i++)
        a[i] = (ExArg){.name = names[i], .kind = EX_BUF, .p = bufs[i], .bytes = bytes[i], .is_output = i >= 3};
    static const char *const stride_names[4][3] = {{"stride_qb", "stride_qh", "stride_qm"},
                                                   {"stride_kb", "stride_kh", "stride_kn"},
                                                   {"stride_vb", "stride_vh", "stride_vn"},
                                                   {"stride_ob", "stride_oh", "stride_om"}};
    const int64_t *strides[4] = {p.q_stride, p.k_stride, p.v_stride, p.o_stride};
    for (int t = 0; t < 4; t++)
        for (int s = 0; s < 3; s++)
            a[5 + t * 3 + s] = (ExArg){.name = stride_names[t][s], .kind = EX_I64, .i = strides[t][s]};
    a[17] = (ExArg){.name = "heads", .kind = EX_I32, .i = p.heads_q};
    a[18] = (ExArg){.name = "heads_kv", .kind = EX_I32, .i = p.heads_kv};
    a[19] = (ExArg){.name = "seqlen_q", .kind = EX_I32, .i = p.seqlen_q};
    a[20] = (ExArg){.name = "seqlen_k", .kind = EX_I32, .i = p.seqlen_k};
    a[21] = (ExArg){.name = "sm_scale", .kind = EX_F32, .f = p.scale};
    ExDefine defs[] = {{"HEAD_DIM", "64"}, {"CAUSAL", "true"}, {"BLOCK_M", "64"}, {"BLOCK_N", "64"}};
    ExProgram prog = {"lang/lib/attention_fwd.tile", "attn_fwd_f16", defs, 4,
                      {(p.seqlen_q + 63) / 64, p.batch * p.heads_q, 1}, a, 22, true};
    char where[128];
    int rc = 1;
    if (ex_run(r, &prog, where, sizeof where) == 0) {
        double *ref_o = malloc(nq * sizeof(double)), *ref_lse = malloc(nl * sizeof(double));
        double *plain = malloc(nq * sizeof(double));
        attn_ref_fwd(&p, q, k, v, ref_o, ref_lse);
        attn_ref_torchlike(&p, q, k, v, plain);
        AttnErr e = attn_compare(&p, o, lse, ref_o, ref_lse);
        double plain_err = attn_max_abs_diff(&p, plain, ref_o);
        int64_t bad_empty = attn_check_empty_rows(&p, o, lse);
        /* FlashAttention's rule: at most twice the error of plain attention in
         * the same dtype, plus a small epsilon; LSE to f32 accuracy. */
        bool ok = e.nonfinite == 0 && bad_empty == 0 && e.o_max_abs <= 2 * plain_err + 1e-5 &&
                  e.lse_max_rel <= 1e-4;
        char shape[64];
        snprintf(shape, sizeof shape, "causal GQA 4/2 %dx%d d64", p.seqlen_q, p.seqlen_k);
        printf("  attention: o[0][0..3] = %.6g %.6g %.6g  lse[0] = %.6g\n", attn_get(p.dtype, o, 0),
               attn_get(p.dtype, o, 1), attn_get(p.dtype, o, 2), lse[0]);
        printf("%-11s %-28s %-24s max|err| %-10.3g (plain f16 attention: %.3g; LSE rel %.2g) %s\n", "attention",
               shape, where, e.o_max_abs, plain_err, e.lse_max_rel, ok ? "ok" : "FAIL");
        rc = ok ? 0 : 1;
        free(ref_o); free(ref_lse); free(plain);
    }
    free(q); free(k); free(v); free(o); free(lse);
    return rc;
}
