/* test_e2e_gpu_attention_variants.c — the shipped variants (lang/lib/variants/) through
 * kiln_attention_fwd, kiln_attention_bwd and kiln_attention_decode on the GPU, against
 * float64.
 *
 * Every variant (causal, sliding_window, softcap, alibi, document, prefix_lm,
 * relative_bias, gemma2) runs as embedded in libkiln (KilnAttentionVariant.path), its
 * tensors (ALiBi slopes, document ids, the T5 bias table) uploaded and passed by name
 * with its scalars, on two shapes (f16 d128 GQA causal-or-not ~1000 tokens; bf16 d64
 * ragged), forward then backward (deterministic), and once through decoding (a few new
 * tokens against a cache of ragged lengths). Inputs random through the strides in
 * NaN-filled buffers, outputs NaN-poisoned; FlashAttention's rules (tools/attn_ref.c):
 * forward |O - ref| <= 2 |O_plain - ref| + 1e-5, LSE 1e-4 relative, rows that see no key
 * O = 0 / LSE = -inf; gradients the same rule per dQ, dK, dV. One line per run with the
 * first call's time (a cold compile of the variant: the on-disk cache is a fresh
 * directory) and the second call's.
 *
 * Without a GPU: "SKIP: no GPU (...)" and exit 77.
 */
#include "kiln.h"
#include "tests/gpu/gpu_util.h"
#include "tools/attn_ref.c"   /* the reference is a tool, not a library: compiled in here */
#include "tests/attention/variant_refs.h"

#include <stdio.h>
#include <stdlib.h>

static KilnDevice *g_dev;
static int g_fail;

static const VarSpec k_specs[] = {
    {"lang/lib/variants/causal.tile", NULL, m_causal, {0}},
    {"lang/lib/variants/sliding_window.tile", NULL, m_window, {.left = 255, .right = 0}},
    {"lang/lib/variants/softcap.tile", s_softcap, NULL, {.softcap = 5.0}},
    {"lang/lib/variants/alibi.tile", s_alibi, NULL, {0}},
    {"lang/lib/variants/document.tile", NULL, m_document, {0}},
    {"lang/lib/variants/prefix_lm.tile", NULL, m_prefix, {.prefix = 300}},
    {"lang/lib/variants/relative_bias.tile", s_relbias, NULL, {0}},
    {"lang/lib/variants/gemma2.tile", s_softcap, m_window, {.softcap = 5.0, .left = 200, .right = 0}},
    /* composition (issue 28): shipped variants imported under aliases, combined in the language */
    {"tests/attention/variants/compose_softcap_alibi_sliding_window_or_prefix_lm.tile", s_cap_alibi,
     m_window_or_prefix, {.softcap = 5.0, .left = 150, .right = 3, .prefix = 40}},
    {"tests/attention/variants/compose_alibi_softcap_sliding_window_and_document.tile", s_alibi_cap,
     m_window_and_document, {.softcap = 5.0, .left = 200, .right = 0}},
};

typedef struct Shape {
    AttnDtype dt;
    int batch, hq, hkv, sq, sk, d, causal;
} Shape;

static const Shape k_shapes[] = {
    {ATTN_F16, 1, 4, 2, 1000, 1000, 128, 0},
    {ATTN_BF16, 2, 2, 2, 333, 517, 64, 1},
};

/* Device copies of the variant's tensors; the args then carry device addresses. */
static void upload_args(Inputs *in, KilnDevPtr *dev, int *ndev)
{
    for (int i = 0; i < in->nargs; i++) {
        KilnVariantArg *a = &in->args[i];
        if (a->value.kind != KILN_PARAM_PTR) continue;
        KilnDevPtr d = 0;
        if (kiln_malloc(g_dev, a->bytes, &d) != KILN_OK ||
            kiln_memcpy_htod(g_dev, d, (const void *)(uintptr_t)a->value.v.ptr, a->bytes) != KILN_OK) {
            printf("FAIL: upload %s: %s\n", a->name, kiln_last_error());
            g_fail++;
        }
        a->value = kiln_arg_ptr(d);
        dev[(*ndev)++] = d;
    }
}

static KilnDevPtr up(const void *host, size_t bytes) { return gu_upload(g_dev, host, bytes); }

static void *down(KilnDevPtr d, size_t bytes)
{
    void *h = malloc(bytes ? bytes : 16);
    kiln_synchronize(g_dev);
    kiln_memcpy_dtoh(g_dev, h, d, bytes);
    return h;
}

/* Forward then deterministic backward of spec v on shape s. */
static void run_fwd_bwd(const VarSpec *v, const Shape *s, uint64_t seed)
{
    AttnProblem p = {.batch = s->batch, .heads_q = s->hq, .heads_kv = s->hkv, .seqlen_q = s->sq, .seqlen_k = s->sk,
                     .head_dim = s->d, .causal = s->causal, .scale = 1.0 / sqrt((double)s->d), .dtype = s->dt};
    attn_set_strides(&p, ATTN_BSHD);
    Inputs in;
    make_inputs_for(v, s->batch, s->hq, s->sk > s->sq ? s->sk : s->sq, &in);
    p.score_mod = var_ref_score(v);
    p.mask_mod = v->mask;
    p.score_mod_grad = var_ref_grad(v);
    size_t es = attn_dtype_size(s->dt), nq = attn_numel_q(&p), nkv = attn_numel_kv(&p);
    size_t nlse = (size_t)s->batch * s->hq * s->sq;
    void *q = malloc(nq * es), *k = malloc(nkv * es), *vv = malloc(nkv * es), *dout = malloc(nq * es);
    attn_fill_random(s->dt, q, nq, seed, -1, 1);
    attn_fill_random(s->dt, k, nkv, seed + 1, -1, 1);
    attn_fill_random(s->dt, vv, nkv, seed + 2, -1, 1);
    attn_fill_random(s->dt, dout, nq, seed + 3, -1, 1);
    KilnDevPtr targs[8];
    int nt = 0;
    upload_args(&in, targs, &nt);
    KilnAttentionVariant var = {.path = var_path(v->variant), .args = in.args, .nargs = in.nargs};
    KilnAttentionParams a = {.dtype = s->dt == ATTN_BF16 ? KILN_BF16 : KILN_F16, .batch = s->batch,
                             .heads_q = s->hq, .heads_kv = s->hkv, .seqlen_q = s->sq, .seqlen_k = s->sk,
                             .head_dim = s->d, .q = up(q, nq * es), .k = up(k, nkv * es), .v = up(vv, nkv * es),
                             .o = up(NULL, nq * es), .lse = up(NULL, nlse * 4), .causal = s->causal, .variant = &var};
    memcpy(a.q_stride, p.q_stride, sizeof a.q_stride);
    memcpy(a.k_stride, p.k_stride, sizeof a.k_stride);
    memcpy(a.v_stride, p.v_stride, sizeof a.v_stride);
    memcpy(a.o_stride, p.o_stride, sizeof a.o_stride);
    double t0 = gu_now_ms();
    KilnStatus st = kiln_attention_fwd(g_dev, &a, NULL);
    kiln_synchronize(g_dev);
    double first = gu_now_ms() - t0;
    t0 = gu_now_ms();
    if (st == KILN_OK) st = kiln_attention_fwd(g_dev, &a, NULL);
    kiln_synchronize(g_dev);
    double second = gu_now_ms() - t0;
    const char *name = strrchr(v->variant, '/') + 1;
    if (st != KILN_OK) {
        printf("FAIL fwd %-20s %s d%d: %s: %s\n", name, s->dt == ATTN_BF16 ? "bf16" : "f16", s->d,
               kiln_status_name(st), kiln_last_error());
        g_fail++;
        return;
    }
    void *o = down(a.o, nq * es);
    float *lse = down(a.lse, nlse * 4);
    size_t nrow = nlse;
    double *ref = malloc(sizeof(double) * nrow * s->d), *plain = malloc(sizeof(double) * nrow * s->d);
    double *rlse = malloc(sizeof(double) * nrow);
    attn_ref_fwd(&p, q, k, vv, ref, rlse);
    attn_ref_torchlike(&p, q, k, vv, plain);
    AttnErr e = attn_compare(&p, o, lse, ref, rlse);
    double bound = 2 * attn_max_abs_diff(&p, plain, ref) + 1e-5;
    int64_t empty = attn_check_empty_rows(&p, o, lse);
    bool ok = e.nonfinite == 0 && e.o_max_abs <= bound && e.lse_max_rel <= 1e-4 && empty == 0;
    printf("%s fwd %-20s %s d%-3d %4dx%-4d first %8.1f ms  then %7.3f ms  err %.3g bound %.3g lse %.3g\n",
           ok ? "ok  " : "FAIL", name, s->dt == ATTN_BF16 ? "bf16" : "f16", s->d, s->sq, s->sk, first, second,
           e.o_max_abs, bound, e.lse_max_rel);
    g_fail += !ok;

    /* the backward, deterministic, O and LSE the forward's */
    KilnAttentionBwdParams b = {.fwd = a, .dout = up(dout, nq * es), .dq = up(NULL, nq * es), .dk = up(NULL, nkv * es),
                                .dv = up(NULL, nkv * es), .deterministic = 1};
    memcpy(b.dout_stride, p.o_stride, sizeof b.dout_stride);
    memcpy(b.dq_stride, p.q_stride, sizeof b.dq_stride);
    memcpy(b.dk_stride, p.k_stride, sizeof b.dk_stride);
    memcpy(b.dv_stride, p.v_stride, sizeof b.dv_stride);
    b.scratch_size = kiln_attention_bwd_scratch_size(&b);
    b.scratch = up(NULL, b.scratch_size);
    t0 = gu_now_ms();
    st = kiln_attention_bwd(g_dev, &b, NULL);
    kiln_synchronize(g_dev);
    first = gu_now_ms() - t0;
    if (st != KILN_OK) {
        printf("FAIL bwd %-20s: %s: %s\n", name, kiln_status_name(st), kiln_last_error());
        g_fail++;
        return;
    }
    void *g3[3] = {down(b.dq, nq * es), down(b.dk, nkv * es), down(b.dv, nkv * es)};
    size_t nqd = nrow * s->d, nkd = (size_t)s->batch * s->hkv * s->sk * s->d;
    double *gr = malloc(sizeof(double) * (nqd + 2 * nkd)), *gp = malloc(sizeof(double) * (nqd + 2 * nkd));
    attn_ref_bwd(&p, q, k, vv, dout, gr, gr + nqd, gr + nqd + nkd);
    attn_ref_bwd_torchlike(&p, q, k, vv, dout, gp, gp + nqd, gp + nqd + nkd);
    const int64_t *sts[3] = {p.q_stride, p.k_stride, p.v_stride};
    int64_t nonfinite = 0;
    bool gok = true;
    printf("     bwd %-20s first %8.1f ms ", name, first);
    for (int t = 0; t < 3; t++) {
        size_t off = t == 0 ? 0 : t == 1 ? nqd : nqd + nkd, n = t ? nkd : nqd;
        double err = attn_grad_max_err(p.dtype, g3[t], sts[t], s->batch, t ? s->hkv : s->hq, t ? s->sk : s->sq, s->d,
                                       gr + off, &nonfinite);
        double bd = 2 * attn_dense_max_diff(gp + off, gr + off, n) + 1e-5;
        printf(" %s %.3g/%.3g", t == 0 ? "dQ" : t == 1 ? "dK" : "dV", err, bd);
        gok = gok && err <= bd;
    }
    gok = gok && nonfinite == 0;
    printf("  %s\n", gok ? "ok" : "FAIL");
    g_fail += !gok;
    free(gr), free(gp), free(ref), free(plain), free(rlse), free(o), free(lse);
    for (int t = 0; t < 3; t++) free(g3[t]);
    free(q), free(k), free(vv), free(dout);
}

/* Decoding: 3 new tokens per sequence against caches of ragged lengths. */
static void run_decode(const VarSpec *v, uint64_t seed)
{
    const int B = 2, HQ = 8, HKV = 2, SQ = 3, CAP = 1200, D = 128;
    int seqlens[2] = {1100, 517};
    AttnProblem p = {.batch = B, .heads_q = HQ, .heads_kv = HKV, .seqlen_q = SQ, .seqlen_k = CAP, .head_dim = D,
                     .causal = 1, .scale = 1.0 / sqrt((double)D), .dtype = ATTN_F16};
    attn_set_strides(&p, ATTN_BSHD);
    Inputs in;
    make_inputs_for(v, B, HQ, CAP, &in);
    p.score_mod = var_ref_score(v);
    p.mask_mod = v->mask;
    size_t nq = attn_numel_q(&p), nkv = attn_numel_kv(&p), nlse = (size_t)B * HQ * SQ;
    void *q = malloc(nq * 2), *k = malloc(nkv * 2), *vv = malloc(nkv * 2);
    attn_fill_random(ATTN_F16, q, nq, seed, -1, 1);
    attn_fill_random(ATTN_F16, k, nkv, seed + 1, -1, 1);
    attn_fill_random(ATTN_F16, vv, nkv, seed + 2, -1, 1);
    KilnDevPtr targs[8];
    int nt = 0;
    upload_args(&in, targs, &nt);
    KilnAttentionVariant var = {.path = var_path(v->variant), .args = in.args, .nargs = in.nargs};
    KilnAttentionDecodeParams a = {.dtype = KILN_F16, .batch = B, .heads_q = HQ, .heads_kv = HKV, .seqlen_q = SQ,
                                   .head_dim = D, .q = up(q, nq * 2), .o = up(NULL, nq * 2), .lse = up(NULL, nlse * 4),
                                   .k = up(k, nkv * 2), .v = up(vv, nkv * 2), .cache_seqlens = up(seqlens, sizeof seqlens),
                                   .max_seqlen_k = CAP, .causal = 1, .variant = &var};
    memcpy(a.q_stride, p.q_stride, sizeof a.q_stride);
    memcpy(a.o_stride, p.o_stride, sizeof a.o_stride);
    memcpy(a.k_stride, p.k_stride, sizeof a.k_stride);
    memcpy(a.v_stride, p.v_stride, sizeof a.v_stride);
    KilnStatus st = kiln_attention_decode(g_dev, &a, NULL);
    const char *name = strrchr(v->variant, '/') + 1;
    if (st != KILN_OK) {
        printf("FAIL decode %-20s: %s: %s\n", name, kiln_status_name(st), kiln_last_error());
        g_fail++;
        return;
    }
    void *o = down(a.o, nq * 2);
    float *lse = down(a.lse, nlse * 4);
    AttnDecodeErr e = attn_decode_judge(&p, seqlens, q, k, vv, o, lse);
    double bound = 2 * e.plain_err + 1e-5;
    bool ok = e.e.nonfinite == 0 && e.e.o_max_abs <= bound && e.e.lse_max_rel <= 1e-4 && e.empty_bad == 0;
    printf("%s decode %-20s err %.3g bound %.3g lse %.3g\n", ok ? "ok  " : "FAIL", name, e.e.o_max_abs, bound,
           e.e.lse_max_rel);
    g_fail += !ok;
    free(q), free(k), free(vv), free(o), free(lse);
}

int main(void)
{
    KilnDeviceInfo info;
    int started = gu_begin(&g_dev, &info, "/tmp/kiln-attn-variants-cache-XXXXXX");
    if (started >= 0) return started;
    int n = (int)(sizeof k_specs / sizeof k_specs[0]);
    for (int i = 0; i < n; i++)
        for (size_t j = 0; j < sizeof k_shapes / sizeof k_shapes[0]; j++)
            run_fwd_bwd(&k_specs[i], &k_shapes[j], 100 + (uint64_t)i * 10 + j);
    for (int i = 0; i < n; i++) run_decode(&k_specs[i], 900 + (uint64_t)i);
    return gu_end(g_dev, g_fail);
}
