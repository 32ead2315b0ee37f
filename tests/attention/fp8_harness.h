/* fp8_harness.h — shared by the FP8 attention tests (tests/attention/test_e2e_attn_fp8.c on
 * the interpreter, tests/gpu/test_e2e_gpu_attention_fp8.c on the GPU): a problem of random
 * [b, s, h, d] tensors (never zero) quantised to e4m3 with descales per tensor or per (batch,
 * head), the float64 reference row (on the dequantised or the original values, with P exact or
 * quantised as the kernel does), and the KilnAttentionParams of a call. Header-only (static
 * functions): each test is one translation unit.
 */
#ifndef KILN_FP8_HARNESS_H
#define KILN_FP8_HARNESS_H

#include "kiln.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct F8Case {
    const char *what;
    int out_bf16, per_head;
    int batch, hq, hkv, sq, sk, d, causal;
    const char *variant;     /* NULL, "softcap" or "window" */
    int block_mask;          /* with the variant's block mask (32 x 32) */
} F8Case;


enum { WIN_LEFT_A = 9, WIN_RIGHT_A = 3, WIN_LEFT_B = 20, WIN_RIGHT_B = 0 };
static const float SOFTCAP = 2.0f;

static unsigned g_seed;
static double urand(void) /* (-1, 1), never 0 */
{
    g_seed = g_seed * 1103515245u + 12345u;
    double u = ((g_seed >> 8) & 0xffff) / 65536.0;
    return (u - 0.5) * 2 + 1.0 / 131072;
}

/* An FP8 problem: [b, s, h, d] tensors, original values, codes and descales. */
typedef struct Prob {
    const F8Case *c;
    int nq, nk;                       /* elements of Q/O and of K/V */
    double *q0, *k0, *v0;             /* original values */
    uint8_t *q8, *k8, *v8;
    float *qd, *kd, *vd;              /* descales: [batch, heads] or one */
    uint16_t *o;
    float *lse;
    float scale;
} Prob;

static size_t idx(int b, int s, int h, int d, int S, int H, int D)
{
    return (((size_t)b * S + s) * H + h) * D + d;
}

/* Quantise x (original values of nb x S x H x D) into codes with descales per tensor
 * (one) or per (batch, head): descale = amax / 448, code = e4m3(x / descale). */
static void quantise(const double *x, uint8_t *q, float *ds, int nb, int S, int H, int D, int per_head)
{
    for (int b = 0; b < nb; b++)
        for (int h = 0; h < H; h++) {
            int g = per_head ? b * H + h : 0;
            double amax = 0;
            for (int bb = per_head ? b : 0; bb < (per_head ? b + 1 : nb); bb++)
                for (int hh = per_head ? h : 0; hh < (per_head ? h + 1 : H); hh++)
                    for (int s = 0; s < S; s++)
                        for (int d = 0; d < D; d++) amax = fmax(amax, fabs(x[idx(bb, s, hh, d, S, H, D)]));
            ds[g] = (float)(amax / 448.0);
        }
    for (int b = 0; b < nb; b++)
        for (int s = 0; s < S; s++)
            for (int h = 0; h < H; h++)
                for (int d = 0; d < D; d++) {
                    size_t i = idx(b, s, h, d, S, H, D);
                    q[i] = kiln_f32_to_e4m3((float)(x[i] / ds[per_head ? b * H + h : 0]));
                }
}

static double dequant(const uint8_t *q, const float *ds, int per_head, int b, int s, int h, int d, int S, int H,
                      int D)
{
    return (double)kiln_e4m3_to_f32(q[idx(b, s, h, d, S, H, D)]) * ds[per_head ? b * H + h : 0];
}

/* Head h of Q and K is scaled by qk_amp^h, of V by v_amp^h; outliers: one entry in 97 x20. */
static void prob_init(Prob *p, const F8Case *c, unsigned seed, double qk_amp, double v_amp, bool outliers,
                      int per_head)
{
    memset(p, 0, sizeof *p);
    p->c = c;
    g_seed = seed;
    p->nq = c->batch * c->sq * c->hq * c->d;
    p->nk = c->batch * c->sk * c->hkv * c->d;
    p->q0 = malloc(sizeof(double) * (size_t)p->nq);
    p->k0 = malloc(sizeof(double) * (size_t)p->nk);
    p->v0 = malloc(sizeof(double) * (size_t)p->nk);
    double *t[3] = {p->q0, p->k0, p->v0};
    int n[3] = {p->nq, p->nk, p->nk}, H[3] = {c->hq, c->hkv, c->hkv};
    for (int a = 0; a < 3; a++)
        for (int i = 0; i < n[a]; i++) {
            int h = (i / c->d) % H[a];
            t[a][i] = urand() * 2.0 * pow(a == 2 ? v_amp : qk_amp, h) * (outliers && i % 97 == 5 ? 20.0 : 1.0);
        }
    /* 16-byte aligned host buffers (the kernels assume aligned pointers) */
    p->q8 = aligned_alloc(16, ((size_t)p->nq + 15) / 16 * 16);
    p->k8 = aligned_alloc(16, ((size_t)p->nk + 15) / 16 * 16);
    p->v8 = aligned_alloc(16, ((size_t)p->nk + 15) / 16 * 16);
    size_t nd = (size_t)c->batch * c->hq;
    p->qd = aligned_alloc(16, (nd * 4 + 15) / 16 * 16);
    p->kd = aligned_alloc(16, (nd * 4 + 15) / 16 * 16);
    p->vd = aligned_alloc(16, (nd * 4 + 15) / 16 * 16);
    quantise(p->q0, p->q8, p->qd, c->batch, c->sq, c->hq, c->d, per_head);
    quantise(p->k0, p->k8, p->kd, c->batch, c->sk, c->hkv, c->d, per_head);
    quantise(p->v0, p->v8, p->vd, c->batch, c->sk, c->hkv, c->d, per_head);
    p->o = aligned_alloc(16, ((size_t)p->nq * 2 + 15) / 16 * 16);
    p->lse = aligned_alloc(16, ((size_t)c->batch * c->hq * c->sq * 4 + 15) / 16 * 16);
    p->scale = (float)(1.0 / sqrt((double)c->d));
}

static void prob_free(Prob *p)
{
    free(p->q0), free(p->k0), free(p->v0), free(p->q8), free(p->k8), free(p->v8);
    free(p->qd), free(p->kd), free(p->vd), free(p->o), free(p->lse);
}

/* ---- the reference ---- */
typedef struct Hooks {
    bool softcap, window;
    int left, right;
} Hooks;

static Hooks hooks_of(const F8Case *c)
{
    Hooks k = {0};
    if (c->variant && !strcmp(c->variant, "softcap")) k.softcap = true;
    if (c->variant && !strcmp(c->variant, "window")) {
        k.window = true;
        k.left = c->block_mask ? WIN_LEFT_B : WIN_LEFT_A;
        k.right = c->block_mask ? WIN_RIGHT_B : WIN_RIGHT_A;
    }
    return k;
}

/* O and LSE of one row in double: exact (p8 false) or with P quantised as the kernel does
 * (p8 true: e4m3(p * 256) / 256 in P V, the sum unquantised). Values from `orig` (the
 * original inputs) or the dequantised codes. Returns false for a row that sees no key. */
static bool ref_row(const Prob *p, const Hooks *hk, bool orig, bool p8, int b, int h, int i, double *o, double *lse)
{
    const F8Case *c = p->c;
    int hk_ = h / (c->hq / c->hkv), ph = c->per_head;
    double *s = malloc(sizeof(double) * (size_t)c->sk);
    double m = -INFINITY;
    for (int j = 0; j < c->sk; j++) {
        bool vis = !c->causal || j <= i + c->sk - c->sq;
        if (hk->window) vis = vis && j >= i - hk->left && j <= i + hk->right;
        if (!vis) { s[j] = -INFINITY; continue; }
        double dot = 0;
        for (int d = 0; d < c->d; d++) {
            double qv = orig ? p->q0[idx(b, i, h, d, c->sq, c->hq, c->d)] : dequant(p->q8, p->qd, ph, b, i, h, d, c->sq, c->hq, c->d);
            double kv = orig ? p->k0[idx(b, j, hk_, d, c->sk, c->hkv, c->d)] : dequant(p->k8, p->kd, ph, b, j, hk_, d, c->sk, c->hkv, c->d);
            dot += qv * kv;
        }
        s[j] = dot * p->scale;
        if (hk->softcap) s[j] = SOFTCAP * tanh(s[j] / SOFTCAP);
        m = fmax(m, s[j]);
    }
    for (int d = 0; d < c->d; d++) o[d] = 0;
    if (m == -INFINITY) {
        *lse = -INFINITY;
        free(s);
        return false;
    }
    double l = 0;
    for (int j = 0; j < c->sk; j++) {
        if (s[j] == -INFINITY) continue;
        double pj = exp(s[j] - m);
        l += pj;
        double pv = p8 ? kiln_e4m3_to_f32(kiln_f32_to_e4m3((float)(pj * 256.0))) / 256.0 : pj;
        for (int d = 0; d < c->d; d++)
            o[d] += pv * (orig ? p->v0[idx(b, j, hk_, d, c->sk, c->hkv, c->d)]
                               : dequant(p->v8, p->vd, ph, b, j, hk_, d, c->sk, c->hkv, c->d));
    }
    for (int d = 0; d < c->d; d++) o[d] /= l;
    *lse = m + log(l);
    free(s);
    return true;
}

/* ---- the call ---- */
static KilnAttentionParams params_of(const Prob *p, const KilnAttentionVariant *var, const KilnBlockMask *bm)
{
    const F8Case *c = p->c;
    size_t nd_q = c->per_head ? (size_t)c->batch * c->hq * 4 : 4, nd_kv = c->per_head ? (size_t)c->batch * c->hkv * 4 : 4;
    KilnAttentionParams a = {.dtype = KILN_E4M3, .out_dtype = c->out_bf16 ? KILN_BF16 : KILN_F16, .batch = c->batch,
                             .heads_q = c->hq, .heads_kv = c->hkv, .seqlen_q = c->sq, .seqlen_k = c->sk,
                             .head_dim = c->d, .q = (uintptr_t)p->q8, .k = (uintptr_t)p->k8, .v = (uintptr_t)p->v8,
                             .o = (uintptr_t)p->o, .lse = (uintptr_t)p->lse, .softmax_scale = p->scale,
                             .causal = c->causal, .block_m = 16, .block_n = 16, .variant = var, .block_mask = bm,
                             .descale_per_head = c->per_head, .q_descale = (uintptr_t)p->qd,
                             .k_descale = (uintptr_t)p->kd, .v_descale = (uintptr_t)p->vd,
                             .q_descale_bytes = nd_q, .k_descale_bytes = nd_kv, .v_descale_bytes = nd_kv};
    int64_t qs[3] = {(int64_t)c->sq * c->hq * c->d, c->d, (int64_t)c->hq * c->d};
    int64_t ks[3] = {(int64_t)c->sk * c->hkv * c->d, c->d, (int64_t)c->hkv * c->d};
    memcpy(a.q_stride, qs, sizeof qs), memcpy(a.o_stride, qs, sizeof qs);
    memcpy(a.k_stride, ks, sizeof ks), memcpy(a.v_stride, ks, sizeof ks);
    a.q_bytes = (size_t)p->nq, a.k_bytes = a.v_bytes = (size_t)p->nk;
    a.o_bytes = (size_t)p->nq * 2, a.lse_bytes = (size_t)c->batch * c->hq * c->sq * 4;
    return a;
}

static float out_value(const Prob *p, size_t i)
{
    return p->c->out_bf16 ? kiln_bf16_to_f32(p->o[i]) : kiln_f16_to_f32(p->o[i]);
}

typedef struct Verdict {
    double rmse, rmse_emul, rms_ref, lse_rel;
    long long nonfinite;
} Verdict;

/* The variant of case c ("softcap" or "window"): false for none. args: 2 entries. */
static bool fp8_variant(const F8Case *c, KilnVariantArg *args, KilnAttentionVariant *var)
{
    memset(var, 0, sizeof *var);
    if (!c->variant) return false;
    if (!strcmp(c->variant, "softcap")) {
        var->path = "lang/lib/variants/softcap.tile";
        args[0] = (KilnVariantArg){"softcap", kiln_arg_f32(SOFTCAP), 0};
        var->nargs = 1;
    } else {
        var->path = "lang/lib/variants/sliding_window.tile";
        Hooks w = hooks_of(c);
        args[0] = (KilnVariantArg){"window_left", kiln_arg_i32(w.left), 0};
        args[1] = (KilnVariantArg){"window_right", kiln_arg_i32(w.right), 0};
        var->nargs = 2;
    }
    var->args = args;
    return true;
}

/* O and LSE poisoned (NaN) before a call. */
static void fp8_poison(Prob *p)
{
    for (int i = 0; i < p->nq; i++) p->o[i] = 0x7e00;   /* NaN in f16 and bf16 alike */
    for (int i = 0; i < p->c->batch * p->c->hq * p->c->sq; i++) p->lse[i] = NAN;
}

/* The host O and LSE of p against the reference of hooks hk: the RMSE, that of the FP8
 * emulation (P quantised), the LSE's relative error and the outputs that are not finite
 * (or not -inf for a row that sees no key). */
static Verdict fp8_judge(const Prob *p, const Hooks *hk)
{
    const F8Case *c = p->c;
    Verdict v = {0};
    double se = 0, se_emul = 0, sr = 0;
    double *o = malloc(sizeof(double) * (size_t)c->d), *oe = malloc(sizeof(double) * (size_t)c->d);
    long long n = 0;
    for (int b = 0; b < c->batch; b++)
        for (int h = 0; h < c->hq; h++)
            for (int i = 0; i < c->sq; i++) {
                double lse, lse_e;
                ref_row(p, hk, false, false, b, h, i, o, &lse);
                ref_row(p, hk, false, true, b, h, i, oe, &lse_e);
                float got_lse = p->lse[((size_t)b * c->hq + h) * c->sq + i];
                if (isinf(lse)) {
                    if (!(isinf(got_lse) && got_lse < 0)) v.nonfinite++;
                } else {
                    if (!isfinite(got_lse)) v.nonfinite++;
                    v.lse_rel = fmax(v.lse_rel, fabs(got_lse - lse) / fmax(fabs(lse), 1.0));
                }
                for (int d = 0; d < c->d; d++) {
                    float got = out_value(p, idx(b, i, h, d, c->sq, c->hq, c->d));
                    if (!isfinite(got)) v.nonfinite++;
                    se += (got - o[d]) * (got - o[d]);
                    se_emul += (oe[d] - o[d]) * (oe[d] - o[d]);
                    sr += o[d] * o[d];
                    n++;
                }
            }
    free(o), free(oe);
    v.rmse = sqrt(se / (double)n);
    v.rmse_emul = sqrt(se_emul / (double)n);
    v.rms_ref = sqrt(sr / (double)n);
    return v;
}

/* The rule: twice the emulation's RMSE, plus O's rounding to its dtype (half an ulp, rms). */
static double fp8_bound(const F8Case *c, const Verdict *v)
{
    double ulp = c->out_bf16 ? 0x1p-8 : 0x1p-11;
    return 2 * v->rmse_emul + ulp * v->rms_ref + 1e-6;
}

#endif
