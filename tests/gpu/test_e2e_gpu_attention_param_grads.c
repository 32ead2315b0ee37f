/* test_e2e_gpu_attention_param_grads.c — learnable params on the GPU: the gradients of the
 * shipped T5 bias table (relative_bias.tile, bias[h, bucket(j - i)]) and of ALiBi's slopes
 * (alibi.tile) from kiln_attention_bwd's param_grads, against float64.
 *
 * Two shapes (f16 d128 GQA 4/2 1000 x 1000; bf16 d64 333 x 517 causal), both dQ algorithms,
 * both ways of summing (per-program rows; param_grads_atomic): random inputs in NaN-filled
 * buffers, the forward's O and LSE, then the backward twice with the gradient and the scratch
 * NaN-poisoned before each run: the rows' two gradients must have the same bits (deterministic
 * by construction: per-program rows reduced in order; the atomic ones' are reported), and match the
 * float64 gradient dL/dtheta = sum over (b, h, i, j) of P (dP - delta) d(score)/d(theta) with
 * O, P exact: max |g - ref| <= 8 eps max |ref| + 1e-4, eps the dtype's (the backward reads O
 * rounded to the dtype; the interpreter test measures 3.3 to 3.7 eps against finite differences).
 * Each line also gives the backward's time with and without the gradient (second calls).
 *
 * Without a GPU: "SKIP: no GPU (...)" and exit 77.
 */
#include "kiln.h"
#include "tests/gpu/gpu_util.h"
#include "tools/attn_ref.c"   /* the reference is a tool, not a library: compiled in here */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NB 32          /* relative_bias.tile's NUM_BUCKETS */
#define MAXDIST 128    /* its MAX_DISTANCE */

static KilnDevice *g_dev;
static int g_fail;

typedef enum { V_T5, V_ALIBI } Kind;

typedef struct Shape {
    AttnDtype dt;
    int batch, hq, hkv, sq, sk, d, causal;
} Shape;

static const Shape k_shapes[] = {
    {ATTN_F16, 1, 4, 2, 1000, 1000, 128, 0},
    {ATTN_BF16, 2, 2, 2, 333, 517, 64, 1},
};

static int t5_bucket(int q, int kv)
{
    int half = NB / 2, exact = half / 2, rel = kv - q, n = rel < 0 ? -rel : rel;
    int big = exact + (int)(log2f((float)(n > 1 ? n : 1) * (1.0f / exact)) *
                            ((float)(half - exact) / log2f((float)MAXDIST / exact)));
    return (rel > 0 ? half : 0) + (n < exact ? n : (big < half - 1 ? big : half - 1));
}

/* dL/dtheta in float64 (L = sum dO * O), O and P exact, from the inputs the kernels read. */
static void reference(Kind kind, const AttnProblem *p, const void *q, const void *k, const void *v, const void *dout,
                      const float *theta, double *g, int numel)
{
    int sq = p->seqlen_q, sk = p->seqlen_k, D = p->head_dim, diag = sk - sq;
    double *t = malloc(sizeof(double) * sk), *P = malloc(sizeof(double) * sk), *o = malloc(sizeof(double) * D);
    memset(g, 0, sizeof(double) * numel);
    for (int b = 0; b < p->batch; b++)
        for (int h = 0; h < p->heads_q; h++) {
            int hk = h / (p->heads_q / p->heads_kv);
            for (int i = 0; i < sq; i++) {
                double m = -INFINITY, z = 0;
                for (int j = 0; j < sk; j++) {
                    t[j] = -INFINITY;
                    if (p->causal && j > i + diag) continue;
                    double s = 0;
                    for (int e = 0; e < D; e++)
                        s += attn_get(p->dtype, q, (size_t)(b * p->q_stride[0] + h * p->q_stride[1] + i * p->q_stride[2] + e)) *
                             attn_get(p->dtype, k, (size_t)(b * p->k_stride[0] + hk * p->k_stride[1] + j * p->k_stride[2] + e));
                    s *= p->scale;
                    t[j] = kind == V_T5 ? s + theta[h * NB + t5_bucket(i, j)] : s - theta[h] * fabs((double)(i - j));
                    if (t[j] > m) m = t[j];
                }
                if (m == -INFINITY) continue;
                for (int j = 0; j < sk; j++) z += P[j] = t[j] == -INFINITY ? 0 : exp(t[j] - m);
                double delta = 0;
                for (int e = 0; e < D; e++) {
                    o[e] = 0;
                    for (int j = 0; j < sk; j++)
                        if (P[j] != 0)
                            o[e] += P[j] / z * attn_get(p->dtype, v, (size_t)(b * p->v_stride[0] + hk * p->v_stride[1] + j * p->v_stride[2] + e));
                    delta += o[e] * attn_get(p->dtype, dout, (size_t)(b * p->o_stride[0] + h * p->o_stride[1] + i * p->o_stride[2] + e));
                }
                for (int j = 0; j < sk; j++) {
                    if (P[j] == 0) continue;
                    double dp = 0;
                    for (int e = 0; e < D; e++)
                        dp += attn_get(p->dtype, dout, (size_t)(b * p->o_stride[0] + h * p->o_stride[1] + i * p->o_stride[2] + e)) *
                              attn_get(p->dtype, v, (size_t)(b * p->v_stride[0] + hk * p->v_stride[1] + j * p->v_stride[2] + e));
                    double dt = P[j] / z * (dp - delta);
                    if (kind == V_T5) g[h * NB + t5_bucket(i, j)] += dt;
                    else g[h] += -dt * fabs((double)(i - j));
                }
            }
        }
    free(t), free(P), free(o);
}

static KilnDevPtr up(const void *host, size_t bytes) { return gu_upload(g_dev, host, bytes); }
static void *down(KilnDevPtr d, size_t bytes) { return gu_download(g_dev, d, bytes); }

/* One backward (poisoned gradient and scratch); its time in ms (synchronised). */
static double bwd_once(KilnAttentionBwdParams *b, KilnStatus *st)
{
    kiln_memset(g_dev, b->scratch, 0xFF, b->scratch_size);
    if (b->nparam_grads) kiln_memset(g_dev, b->param_grads[0].grad, 0xFF, b->param_grads[0].numel * 4);
    kiln_synchronize(g_dev);
    double t0 = gu_now_ms();
    *st = kiln_attention_bwd(g_dev, b, NULL);
    kiln_synchronize(g_dev);
    return gu_now_ms() - t0;
}

/* One backward mode (dQ algorithm, way of summing) of a call whose forward has run: the
 * gradient twice, then the plain backward, against ref. */
typedef struct Call {
    const char *what, *pname;
    const Shape *s;
    KilnAttentionParams a;
    const AttnProblem *p;
    KilnDevPtr dout;
    int numel;
    const double *ref;
} Call;

static void mode(const Call *c, int deterministic, int atomic)
{
    const Shape *s = c->s;
    size_t es = attn_dtype_size(s->dt), nq = attn_numel_q(c->p), nkv = attn_numel_kv(c->p);
    KilnParamGrad pg = {c->pname, up(NULL, (size_t)c->numel * 4), (size_t)c->numel};
    KilnAttentionBwdParams b = {.fwd = c->a, .dout = c->dout, .dq = up(NULL, nq * es), .dk = up(NULL, nkv * es),
                                .dv = up(NULL, nkv * es), .deterministic = deterministic};
    memcpy(b.dout_stride, c->p->o_stride, sizeof b.dout_stride);
    memcpy(b.dq_stride, c->p->q_stride, sizeof b.dq_stride);
    memcpy(b.dk_stride, c->p->k_stride, sizeof b.dk_stride);
    memcpy(b.dv_stride, c->p->v_stride, sizeof b.dv_stride);
    b.param_grads = &pg, b.nparam_grads = 1, b.param_grads_atomic = atomic;
    b.scratch_size = kiln_attention_bwd_scratch_size(&b);
    b.scratch = up(NULL, b.scratch_size);
    KilnStatus st;
    double first = bwd_once(&b, &st);
    float *g1 = NULL, *g2 = NULL;
    double with = 0, without = 0;
    if (st == KILN_OK) g1 = down(pg.grad, (size_t)c->numel * 4), with = bwd_once(&b, &st);
    if (st == KILN_OK) g2 = down(pg.grad, (size_t)c->numel * 4);
    if (st == KILN_OK) {   /* the same call without the gradient: the plain kernels */
        b.nparam_grads = 0;
        bwd_once(&b, &st);
        if (st == KILN_OK) without = bwd_once(&b, &st);
    }
    kiln_free(g_dev, b.dq), kiln_free(g_dev, b.dk), kiln_free(g_dev, b.dv), kiln_free(g_dev, b.scratch);
    kiln_free(g_dev, pg.grad);
    if (st != KILN_OK) {
        printf("FAIL bwd %s: %s: %s\n", c->what, kiln_status_name(st), kiln_last_error());
        g_fail++;
        free(g1);
        return;
    }
    double maxref = 0, err = 0;
    int64_t nonfinite = 0;
    for (int i = 0; i < c->numel; i++) {
        maxref = fmax(maxref, fabs(c->ref[i]));
        if (!isfinite(g1[i])) nonfinite++;
        else err = fmax(err, fabs(g1[i] - c->ref[i]));
    }
    double eps = s->dt == ATTN_BF16 ? 0x1p-8 : 0x1p-11, bound = 8 * eps * maxref + 1e-4;
    bool same = !memcmp(g1, g2, (size_t)c->numel * 4);   /* required of the deterministic sums only */
    bool ok = nonfinite == 0 && err <= bound && (same || atomic) && maxref > 1e-3;
    printf("ROW %s %-12s %s d%-3d %4dx%-4d %s det=%d %s  err %.3g bound %.3g (max %.3g)  bits %s  bwd first %.1f ms, "
           "with grad %.3f ms, without %.3f ms\n",
           ok ? "ok  " : "FAIL", c->what, s->dt == ATTN_BF16 ? "bf16" : "f16", s->d, s->sq, s->sk,
           s->causal ? "causal" : "full  ", deterministic, atomic ? "atomic" : "rows  ", err, bound, maxref,
           same ? "same" : "differ", first, with, without);
    g_fail += !ok;
    free(g1), free(g2);
}

/* Kind on shape s: the inputs, the forward, the float64 gradient once, then every mode. */
static void run(Kind kind, const Shape *s, uint64_t seed)
{
    AttnProblem p = {.batch = s->batch, .heads_q = s->hq, .heads_kv = s->hkv, .seqlen_q = s->sq, .seqlen_k = s->sk,
                     .head_dim = s->d, .causal = s->causal, .scale = 1.0 / sqrt((double)s->d), .dtype = s->dt};
    attn_set_strides(&p, ATTN_BSHD);
    size_t es = attn_dtype_size(s->dt), nq = attn_numel_q(&p), nkv = attn_numel_kv(&p);
    size_t nlse = (size_t)s->batch * s->hq * s->sq;
    void *q = malloc(nq * es), *k = malloc(nkv * es), *vv = malloc(nkv * es), *dout = malloc(nq * es);
    attn_fill_random(s->dt, q, nq, seed, -1, 1);
    attn_fill_random(s->dt, k, nkv, seed + 1, -1, 1);
    attn_fill_random(s->dt, vv, nkv, seed + 2, -1, 1);
    attn_fill_random(s->dt, dout, nq, seed + 3, -1, 1);
    int numel = kind == V_T5 ? s->hq * NB : s->hq;
    float *theta = malloc((size_t)numel * 4);
    uint64_t r = seed * 7 + 1;
    for (int i = 0; i < numel; i++) {
        float u = gu_rnd(&r, 1.0f);   /* [-1, 1) */
        theta[i] = kind == V_T5 ? u : 0.02f + 0.14f * (u + 1.0f);
    }
    const char *pname = kind == V_T5 ? "rel_bias" : "alibi_slopes";
    KilnVariantArg arg = {pname, kiln_arg_ptr(up(theta, (size_t)numel * 4)), (size_t)numel * 4};
    KilnAttentionVariant var = {.path = kind == V_T5 ? "lang/lib/variants/relative_bias.tile"
                                                     : "lang/lib/variants/alibi.tile",
                                .args = &arg, .nargs = 1};
    KilnAttentionParams a = {.dtype = s->dt == ATTN_BF16 ? KILN_BF16 : KILN_F16, .batch = s->batch,
                             .heads_q = s->hq, .heads_kv = s->hkv, .seqlen_q = s->sq, .seqlen_k = s->sk,
                             .head_dim = s->d, .q = up(q, nq * es), .k = up(k, nkv * es), .v = up(vv, nkv * es),
                             .o = up(NULL, nq * es), .lse = up(NULL, nlse * 4), .causal = s->causal, .variant = &var};
    memcpy(a.q_stride, p.q_stride, sizeof a.q_stride);
    memcpy(a.k_stride, p.k_stride, sizeof a.k_stride);
    memcpy(a.v_stride, p.v_stride, sizeof a.v_stride);
    memcpy(a.o_stride, p.o_stride, sizeof a.o_stride);
    const char *what = kind == V_T5 ? "t5-bias" : "alibi-slopes";
    KilnStatus st = kiln_attention_fwd(g_dev, &a, NULL);
    if (st != KILN_OK) {
        printf("FAIL fwd %s: %s: %s\n", what, kiln_status_name(st), kiln_last_error());
        g_fail++;
    } else {
        double *ref = malloc(sizeof(double) * numel);
        reference(kind, &p, q, k, vv, dout, theta, ref, numel);
        Call c = {what, pname, s, a, &p, up(dout, nq * es), numel, ref};
        for (int det = 0; det < 2; det++)
            for (int atomic = 0; atomic < 2; atomic++) mode(&c, det, atomic);
        kiln_free(g_dev, c.dout);
        free(ref);
    }
    kiln_free(g_dev, a.q), kiln_free(g_dev, a.k), kiln_free(g_dev, a.v), kiln_free(g_dev, a.o), kiln_free(g_dev, a.lse);
    kiln_free(g_dev, arg.value.v.ptr);
    free(theta), free(q), free(k), free(vv), free(dout);
}

int main(void)
{
    KilnDeviceInfo info;
    int started = gu_begin(&g_dev, &info, "/tmp/kiln-attn-param-grads-cache-XXXXXX");
    if (started >= 0) return started;
    for (int kind = 0; kind < 2; kind++)
        for (size_t j = 0; j < sizeof k_shapes / sizeof k_shapes[0]; j++)
            run((Kind)kind, &k_shapes[j], 500 + (uint64_t)kind * 10 + j);
    return gu_end(g_dev, g_fail);
}
