/* ex_attention_bwd.c — the shipped FlashAttention backward in the main job.
 *
 * A causal GQA problem with ragged lengths: seqlen_q > seqlen_k, so the first
 * seqlen_q - seqlen_k query rows of each head see no key (bottom-right causal), and
 * neither length is a multiple of any block. Random Q, K, V and dO. The forward gives O
 * and LSE; then the backward writes dQ, dK and dV into NaN-poisoned buffers, once in
 * each mode: dQ by f32 atomic adds (the default), and the deterministic dQ pass.
 *
 * On the GPU it calls what users call: kiln_attention_fwd, kiln_attention_bwd. On the
 * CPU interpreter it runs the same kernels of lang/lib/attention_fwd.tile and
 * attention_bwd.tile with kiln_run_cpu, in the order kiln_attention_bwd launches them:
 * preprocess (delta = rowsum(dO * O), zeroing the f32 dQ accumulator unless
 * deterministic), dK/dV over key blocks (adding dQ atomically unless deterministic),
 * then the dQ conversion or the deterministic dQ pass.
 *
 * Judged by FlashAttention's rule for gradients, dQ, dK and dV separately:
 * max |g - ref| <= 2 max |g_plain - ref| + 1e-5, with ref the float64 gradient and
 * g_plain the backward of plain attention computed in f16 (tools/attn_ref.c); rows
 * that see no key must get dQ = 0 exactly, and no gradient may be NaN.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "examples/run_examples.h"
#include "tools/attn_ref.h"

#define FWD_PROGRAM "lang/lib/attention_fwd.tile"
#define BWD_PROGRAM "lang/lib/attention_bwd.tile"
#define CPU_BLOCK "32"   /* the interpreter's tiles: several blocks per sequence, none full */
#define CPU_TILE 32      /* CPU_BLOCK as a number */

typedef struct Bwd {
    AttnProblem p;
    size_t nq, nkv, nl;                  /* elements of Q/O/dO, of K/V, of LSE */
    uint16_t *q, *k, *v, *dout, *o;
    float *lse, *delta, *dq_acc;         /* delta and dq_acc: the interpreter's scratch */
    uint16_t *dq[2], *dk[2], *dv[2];     /* [0]: atomic dQ, [1]: deterministic */
} Bwd;

static void *nan_buf(size_t bytes)
{
    void *p = malloc(bytes);
    memset(p, 0xFF, bytes);   /* NaN in f16 and f32 */
    return p;
}

static void bwd_setup(Bwd *b, bool gpu)
{
    memset(b, 0, sizeof *b);
    AttnProblem *p = &b->p;
    p->batch = 2; p->heads_q = 4; p->heads_kv = 2;
    p->seqlen_q = gpu ? 600 : 90;
    p->seqlen_k = gpu ? 450 : 75;
    p->head_dim = 64; p->causal = 1;
    p->scale = 1.0 / sqrt(64.0);
    p->dtype = ATTN_F16;
    attn_set_strides(p, ATTN_BSHD);
    b->nq = attn_numel_q(p);
    b->nkv = attn_numel_kv(p);
    b->nl = (size_t)p->batch * p->heads_q * p->seqlen_q;
    b->q = malloc(b->nq * 2); b->dout = malloc(b->nq * 2);
    b->k = malloc(b->nkv * 2); b->v = malloc(b->nkv * 2);
    attn_fill_random(p->dtype, b->q, b->nq, 11, -1, 1);
    attn_fill_random(p->dtype, b->k, b->nkv, 12, -1, 1);
    attn_fill_random(p->dtype, b->v, b->nkv, 13, -1, 1);
    attn_fill_random(p->dtype, b->dout, b->nq, 14, -1, 1);
    b->o = nan_buf(b->nq * 2);
    b->lse = nan_buf(b->nl * 4);
    b->delta = nan_buf(b->nl * 4);
    b->dq_acc = nan_buf(b->nl * (size_t)p->head_dim * 4);
    for (int m = 0; m < 2; m++) {
        b->dq[m] = nan_buf(b->nq * 2);
        b->dk[m] = nan_buf(b->nkv * 2);
        b->dv[m] = nan_buf(b->nkv * 2);
    }
}

static void bwd_free(Bwd *b)
{
    free(b->q); free(b->k); free(b->v); free(b->dout); free(b->o);
    free(b->lse); free(b->delta); free(b->dq_acc);
    for (int m = 0; m < 2; m++) {
        free(b->dq[m]); free(b->dk[m]); free(b->dv[m]);
    }
}

/* ---------------- on the CPU interpreter: the kernels, bound by parameter name ---------------- */

/* Every value a kernel of the forward or backward program takes, by name (mode m's outputs). */
static int bwd_table(Bwd *b, int m, ExArg *a)
{
    const AttnProblem *p = &b->p;
    size_t q2 = b->nq * 2, kv2 = b->nkv * 2, l4 = b->nl * 4;
    const struct { const char *name; void *ptr; size_t bytes; bool out; } bufs[] = {
        {"Q", b->q, q2, false},       {"K", b->k, kv2, false},         {"V", b->v, kv2, false},
        {"DO", b->dout, q2, false},   {"O", b->o, q2, true},           {"LSE", b->lse, l4, true},
        {"DQ", b->dq[m], q2, true},   {"DK", b->dk[m], kv2, true},     {"DV", b->dv[m], kv2, true},
        {"DELTA", b->delta, l4, true}, {"DQ_ACC", b->dq_acc, l4 * (size_t)p->head_dim, true}};
    int n = 0;
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        a[n++] = (ExArg){.name = bufs[i].name, .kind = EX_BUF, .p = bufs[i].ptr, .bytes = bufs[i].bytes,
                         .is_output = bufs[i].out};
    /* stride_<t><b|h|m|n>: dO has O's strides, dQ Q's, dK K's, dV V's; m and n both name
     * the sequence stride (the programs say m for query rows, n for keys) */
    static const char *const names[8][4] = {
        {"stride_qb", "stride_qh", "stride_qm", "stride_qn"},     {"stride_kb", "stride_kh", "stride_km", "stride_kn"},
        {"stride_vb", "stride_vh", "stride_vm", "stride_vn"},     {"stride_ob", "stride_oh", "stride_om", "stride_on"},
        {"stride_dob", "stride_doh", "stride_dom", "stride_don"}, {"stride_dqb", "stride_dqh", "stride_dqm", "stride_dqn"},
        {"stride_dkb", "stride_dkh", "stride_dkm", "stride_dkn"}, {"stride_dvb", "stride_dvh", "stride_dvm", "stride_dvn"}};
    const int64_t *st[8] = {p->q_stride, p->k_stride, p->v_stride, p->o_stride,
                            p->o_stride, p->q_stride, p->k_stride, p->v_stride};
    for (int t = 0; t < 8; t++)
        for (int j = 0; j < 4; j++) a[n++] = (ExArg){.name = names[t][j], .kind = EX_I64, .i = st[t][j < 3 ? j : 2]};
    a[n++] = (ExArg){.name = "heads", .kind = EX_I32, .i = p->heads_q};
    a[n++] = (ExArg){.name = "heads_kv", .kind = EX_I32, .i = p->heads_kv};
    a[n++] = (ExArg){.name = "seqlen_q", .kind = EX_I32, .i = p->seqlen_q};
    a[n++] = (ExArg){.name = "seqlen_k", .kind = EX_I32, .i = p->seqlen_k};
    a[n++] = (ExArg){.name = "sm_scale", .kind = EX_F32, .f = p->scale};
    return n;
}

static int cpu_kernel(ExRunner *r, const char *path, const char *kernel, const ExDefine *defs, int ndefs,
                      int rows, int block, int programs, ExArg *tab, int n, char *where)
{
    ExProgram prog = {path, kernel, defs, ndefs, {(rows + block - 1) / block, programs, 1}, tab, n, true};
    return ex_run(r, &prog, where, 128);
}

/* The forward (O, LSE), then both modes of the backward, as kiln_attention_bwd plans them. */
static int bwd_cpu(ExRunner *r, Bwd *b, char *where)
{
    const AttnProblem *p = &b->p;
    int bhq = p->batch * p->heads_q, bhk = p->batch * p->heads_kv;
    ExArg tab[64];
    int n = bwd_table(b, 0, tab);
    ExDefine fwd[] = {{"HEAD_DIM", "64"}, {"CAUSAL", "true"}, {"BLOCK_M", "64"}, {"BLOCK_N", "64"}};
    if (cpu_kernel(r, FWD_PROGRAM, "attn_fwd_f16", fwd, 4, p->seqlen_q, 64, bhq, tab, n, where)) return 1;
    for (int m = 0; m < 2; m++) {
        const char *atomic = m ? "false" : "true";
        n = bwd_table(b, m, tab);
        ExDefine pre[] = {{"HEAD_DIM", "64"}, {"BLOCK_M", CPU_BLOCK}, {"ZERO_DQ_ACC", atomic}};
        ExDefine dkdv[] = {{"HEAD_DIM", "64"}, {"BLOCK_M", CPU_BLOCK}, {"BLOCK_N", CPU_BLOCK}, {"CAUSAL", "true"},
                           {"COMPUTE_DQ", atomic}};
        memset(b->delta, 0xFF, b->nl * 4);
        memset(b->dq_acc, 0xFF, b->nl * (size_t)p->head_dim * 4);
        if (cpu_kernel(r, BWD_PROGRAM, "attn_bwd_pre_f16", pre, 3, p->seqlen_q, CPU_TILE, bhq, tab, n, where) ||
            cpu_kernel(r, BWD_PROGRAM, "attn_bwd_dkdv_f16", dkdv, 5, p->seqlen_k, CPU_TILE, bhk, tab, n, where))
            return 1;
        /* deterministic: the dQ pass over query blocks; else dQ = sm_scale * the accumulator */
        int rc = m ? cpu_kernel(r, BWD_PROGRAM, "attn_bwd_dq_f16", dkdv, 4, p->seqlen_q, CPU_TILE, bhq, tab, n, where)
                   : cpu_kernel(r, BWD_PROGRAM, "attn_bwd_dq_cvt_f16", pre, 2, p->seqlen_q, CPU_TILE, bhq, tab, n,
                                where);
        if (rc) return 1;
    }
    return 0;
}

/* ---------------- on the GPU: the public entry points ---------------- */

static int bwd_gpu(ExRunner *r, Bwd *b, char *where, size_t where_size)
{
    const AttnProblem *p = &b->p;
    KilnAttentionBwdParams bp = {
        .fwd = {.dtype = KILN_F16, .batch = p->batch, .heads_q = p->heads_q, .heads_kv = p->heads_kv,
                .seqlen_q = p->seqlen_q, .seqlen_k = p->seqlen_k, .head_dim = p->head_dim, .causal = 1,
                .softmax_scale = (float)p->scale}};
    KilnAttentionParams *f = &bp.fwd;
    memcpy(f->q_stride, p->q_stride, sizeof f->q_stride);
    memcpy(f->k_stride, p->k_stride, sizeof f->k_stride);
    memcpy(f->v_stride, p->v_stride, sizeof f->v_stride);
    memcpy(f->o_stride, p->o_stride, sizeof f->o_stride);
    memcpy(bp.dout_stride, p->o_stride, sizeof bp.dout_stride);
    memcpy(bp.dq_stride, p->q_stride, sizeof bp.dq_stride);
    memcpy(bp.dk_stride, p->k_stride, sizeof bp.dk_stride);
    memcpy(bp.dv_stride, p->v_stride, sizeof bp.dv_stride);
    bp.deterministic = 0;   /* the larger scratch of the two modes */
    size_t scratch = kiln_attention_bwd_scratch_size(&bp), q2 = b->nq * 2, kv2 = b->nkv * 2;
    int rc = ex_dev_put(r, b->q, q2, &f->q) || ex_dev_put(r, b->k, kv2, &f->k) || ex_dev_put(r, b->v, kv2, &f->v) ||
             ex_dev_put(r, NULL, q2, &f->o) || ex_dev_put(r, NULL, b->nl * 4, &f->lse) ||
             ex_dev_put(r, b->dout, q2, &bp.dout) || ex_dev_put(r, NULL, q2, &bp.dq) ||
             ex_dev_put(r, NULL, kv2, &bp.dk) || ex_dev_put(r, NULL, kv2, &bp.dv) ||
             ex_dev_put(r, NULL, scratch, &bp.scratch) || (bp.scratch_size = scratch, 0) || ex_check(kiln_attention_fwd(r->dev, f, NULL), "kiln_attention_fwd");
    for (int m = 0; m < 2 && !rc; m++) {
        bp.deterministic = m;
        rc = ex_check(kiln_memset(r->dev, bp.dq, 0xFF, q2), "kiln_memset") ||
             ex_check(kiln_memset(r->dev, bp.dk, 0xFF, kv2), "kiln_memset") ||
             ex_check(kiln_memset(r->dev, bp.dv, 0xFF, kv2), "kiln_memset") ||
             ex_check(kiln_memset(r->dev, bp.scratch, 0xFF, scratch), "kiln_memset") ||
             ex_check(kiln_attention_bwd(r->dev, &bp, NULL), "kiln_attention_bwd") ||
             ex_dev_get(r, b->dq[m], bp.dq, q2) || ex_dev_get(r, b->dk[m], bp.dk, kv2) ||
             ex_dev_get(r, b->dv[m], bp.dv, kv2);
    }
    KilnDevPtr all[] = {f->q, f->k, f->v, f->o, f->lse, bp.dout, bp.dq, bp.dk, bp.dv, bp.scratch};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) kiln_free(r->dev, all[i]);
    snprintf(where, where_size, "on the GPU");
    return rc;
}

/* ---------------- judging ---------------- */

/* Prints mode m's three lines; 0 when all three meet the rule. */
static int bwd_judge(const Bwd *b, int m, const double *ref, const double *plain, const char *where)
{
    const AttnProblem *p = &b->p;
    int D = p->head_dim;
    size_t nq = b->nl * (size_t)D, nkv = (size_t)p->batch * p->heads_kv * p->seqlen_k * D;
    const uint16_t *x[3] = {b->dq[m], b->dk[m], b->dv[m]};
    const int64_t *st[3] = {p->q_stride, p->k_stride, p->v_stride};
    size_t off[3] = {0, nq, nq + nkv};
    int64_t empty_bad = 0;   /* dQ of rows that see no key: exactly 0 */
    for (int bb = 0; bb < p->batch; bb++)
        for (int h = 0; h < p->heads_q; h++)
            for (int i = 0; i < p->seqlen_q; i++)
                for (int d = 0; attn_row_empty(p, bb, h, i) && d < D; d++)
                    empty_bad += attn_get(p->dtype, x[0], (size_t)(bb * st[0][0] + h * st[0][1] + i * st[0][2] + d)) != 0;
    char shape[64];
    snprintf(shape, sizeof shape, "causal GQA %d/%d %dx%d d%d", p->heads_q, p->heads_kv, p->seqlen_q, p->seqlen_k, D);
    static const char *const names[3] = {"attn_bwd dQ", "attn_bwd dK", "attn_bwd dV"};
    int fails = 0;
    for (int t = 0; t < 3; t++) {
        int nh = t ? p->heads_kv : p->heads_q, ns = t ? p->seqlen_k : p->seqlen_q;
        int64_t nonfinite = 0;
        double err = attn_grad_max_err(p->dtype, x[t], st[t], p->batch, nh, ns, D, ref + off[t], &nonfinite);
        double plain_err = attn_dense_max_diff(plain + off[t], ref + off[t], t ? nkv : nq);
        bool ok = nonfinite == 0 && err <= 2 * plain_err + 1e-5 && (t || empty_bad == 0);
        printf("%-11s %-28s %-24s max|err| %-10.3g (plain f16 attention: %.3g; %s) %s\n", names[t], shape, where, err,
               plain_err, m ? "deterministic" : "atomic dQ", ok ? "ok" : "FAIL");
        if (nonfinite || (!t && empty_bad))
            printf("  %s: %lld NaN/inf elements, %lld dQ elements of rows that see no key are not 0\n", names[t],
                   (long long)nonfinite, t ? 0LL : (long long)empty_bad);
        fails += !ok;
    }
    return fails ? 1 : 0;
}

int ex_attention_bwd(ExRunner *r)
{
    Bwd b;
    bwd_setup(&b, r->dev != NULL);
    char where[128];
    int rc = r->dev ? bwd_gpu(r, &b, where, sizeof where) : bwd_cpu(r, &b, where);
    if (rc == 0) {
        const AttnProblem *p = &b.p;
        size_t nq = b.nl * (size_t)p->head_dim, nkv = b.nkv;
        double *ref = malloc(sizeof(double) * (nq + 2 * nkv)), *plain = malloc(sizeof(double) * (nq + 2 * nkv));
        attn_ref_bwd(p, b.q, b.k, b.v, b.dout, ref, ref + nq, ref + nq + nkv);
        attn_ref_bwd_torchlike(p, b.q, b.k, b.v, b.dout, plain, plain + nq, plain + nq + nkv);
        int last = p->seqlen_q - 1;
        size_t row = (size_t)(last * p->q_stride[2]);
        printf("  attention backward: rows 0..%d of each head see no key; dq[%d][0..3] = %.6g %.6g %.6g  "
               "dk[0][0..3] = %.6g %.6g %.6g\n", p->seqlen_q - p->seqlen_k - 1, last, attn_get(p->dtype, b.dq[0], row),
               attn_get(p->dtype, b.dq[0], row + 1), attn_get(p->dtype, b.dq[0], row + 2),
               attn_get(p->dtype, b.dk[0], 0), attn_get(p->dtype, b.dk[0], 1), attn_get(p->dtype, b.dk[0], 2));
        rc = bwd_judge(&b, 0, ref, plain, where) | bwd_judge(&b, 1, ref, plain, where);
        free(ref);
        free(plain);
    }
    bwd_free(&b);
    return rc;
}
