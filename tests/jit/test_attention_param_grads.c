/* test_attention_param_grads.c — learnable params (`param X: *f32 differentiable;`): the
 * backward's dL/dX through kiln_attention_bwd_cpu, against float64 central finite differences
 * of L = sum(dO * O) over a float64 forward with the same score_mod.
 *
 * Variants: the shipped T5 bucketed bias (lang/lib/variants/relative_bias.tile, bias[h,
 * bucket(j - i)]) and ALiBi with learnable slopes (alibi.tile, slope[h] |i - j|). Random f16 /
 * bf16 inputs, GQA 4/2, lengths no multiple of the 16-row tiles, causal and not, both dQ
 * algorithms, both ways of summing the gradient (per-program rows, param_grads_atomic); the gradients and the scratch poisoned (NaN) before each run, and each run
 * twice: the two gradients must have the same bits. Judged by max |g - fd| <= 8 eps max |fd|
 * + 1e-4, eps the dtype's (the O the backward reads is rounded to the dtype: measured 3.3 to
 * 3.7 eps).
 * And what the call refuses: param_grads without a variant, a name that is no differentiable
 * param, a differentiable param without an entry, a short scratch; and the front end's
 * located errors (a differentiable param that is not *f32, one score_mod never loads).
 */
#include "testutil.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kiln.h"
#include "tools/attn_ref.c"   /* the reference is a tool, not a library: compiled in here */

#define NB 32          /* relative_bias.tile's NUM_BUCKETS */
#define MAXDIST 128    /* its MAX_DISTANCE */

typedef enum { V_T5, V_ALIBI } Kind;

typedef struct PgCase {
    const char *what;
    Kind kind;
    AttnDtype dtype;
    int batch, hq, hkv, sq, sk, d, causal, deterministic;
    int atomic;   /* param_grads_atomic */
} PgCase;

/* T5's bucket of kv - q, as relative_bias.tile computes it (f32 log2: exact at the powers of
 * two where buckets change). */
static int t5_bucket(int q, int kv)
{
    int half = NB / 2, exact = half / 2, rel = kv - q, n = rel < 0 ? -rel : rel;
    int big = exact + (int)(log2f((float)(n > 1 ? n : 1) * (1.0f / exact)) *
                            ((float)(half - exact) / log2f((float)MAXDIST / exact)));
    return (rel > 0 ? half : 0) + (n < exact ? n : (big < half - 1 ? big : half - 1));
}

typedef struct Problem {
    const PgCase *c;
    AttnProblem ap;
    void *q, *k, *v, *dout;
    size_t nq, nk;
} Problem;

static double score(const Problem *P, const double *theta, double s, int h, int i, int j)
{
    if (P->c->kind == V_T5) return s + theta[h * NB + t5_bucket(i, j)];
    return s - theta[h] * fabs((double)(i - j));
}

/* L(theta) = sum dO * O for the float64 forward with score_mod(theta) (causal bottom-right). */
static double loss(const Problem *P, const double *theta)
{
    const PgCase *c = P->c;
    const AttnProblem *ap = &P->ap;
    double L = 0, *sc = malloc(sizeof(double) * (size_t)c->sk);
    int diag = c->sk - c->sq;
    for (int b = 0; b < c->batch; b++)
        for (int h = 0; h < c->hq; h++) {
            int hk = h / (c->hq / c->hkv);
            for (int i = 0; i < c->sq; i++) {
                double m = -INFINITY, z = 0;
                for (int j = 0; j < c->sk; j++) {
                    sc[j] = -INFINITY;
                    if (c->causal && j > i + diag) continue;
                    double s = 0;
                    for (int e = 0; e < c->d; e++)
                        s += attn_get(c->dtype, P->q, (size_t)(b * ap->q_stride[0] + h * ap->q_stride[1] + i * ap->q_stride[2] + e)) *
                             attn_get(c->dtype, P->k, (size_t)(b * ap->k_stride[0] + hk * ap->k_stride[1] + j * ap->k_stride[2] + e));
                    sc[j] = score(P, theta, s * ap->scale, h, i, j);
                    if (sc[j] > m) m = sc[j];
                }
                if (m == -INFINITY) continue;
                for (int j = 0; j < c->sk; j++) z += sc[j] == -INFINITY ? 0 : exp(sc[j] - m);
                for (int e = 0; e < c->d; e++) {
                    double o = 0;
                    for (int j = 0; j < c->sk; j++)
                        if (sc[j] != -INFINITY)
                            o += exp(sc[j] - m) / z *
                                 attn_get(c->dtype, P->v, (size_t)(b * ap->v_stride[0] + hk * ap->v_stride[1] + j * ap->v_stride[2] + e));
                    L += o * attn_get(c->dtype, P->dout, (size_t)(b * ap->o_stride[0] + h * ap->o_stride[1] + i * ap->o_stride[2] + e));
                }
            }
        }
    free(sc);
    return L;
}

static void *poisoned(size_t bytes)
{
    void *p = aligned_alloc(256, (bytes + 255) / 256 * 256);
    ck_assert_ptr_nonnull(p);
    memset(p, 0xFF, bytes);
    return p;
}

static int numel_of(const PgCase *c) { return c->kind == V_T5 ? c->hq * NB : c->hq; }

static KilnAttentionVariant variant_of(const PgCase *c, float *theta, KilnVariantArg *arg)
{
    size_t n = (size_t)numel_of(c);
    *arg = (KilnVariantArg){c->kind == V_T5 ? "rel_bias" : "alibi_slopes", kiln_arg_ptr((uintptr_t)theta), n * 4};
    return (KilnAttentionVariant){
        .path = c->kind == V_T5 ? "lang/lib/variants/relative_bias.tile" : "lang/lib/variants/alibi.tile",
        .args = arg, .nargs = 1};
}

/* The forward (O, LSE) and the backward's call, on dense [b, h, s, d] tensors. */
static void setup(Problem *P, const PgCase *c, KilnAttentionBwdParams *p, const KilnAttentionVariant *var, float **lse)
{
    P->c = c;
    AttnProblem *ap = &P->ap;
    *ap = (AttnProblem){.batch = c->batch, .heads_q = c->hq, .heads_kv = c->hkv, .seqlen_q = c->sq,
                        .seqlen_k = c->sk, .head_dim = c->d, .causal = c->causal, .scale = 1.0 / sqrt(c->d),
                        .dtype = c->dtype};
    int64_t qs[3] = {(int64_t)c->hq * c->sq * c->d, (int64_t)c->sq * c->d, c->d};
    int64_t ks[3] = {(int64_t)c->hkv * c->sk * c->d, (int64_t)c->sk * c->d, c->d};
    memcpy(ap->q_stride, qs, sizeof qs), memcpy(ap->o_stride, qs, sizeof qs);
    memcpy(ap->k_stride, ks, sizeof ks), memcpy(ap->v_stride, ks, sizeof ks);
    P->nq = (size_t)c->batch * qs[0], P->nk = (size_t)c->batch * ks[0];
    P->q = poisoned(P->nq * 2), P->k = poisoned(P->nk * 2), P->v = poisoned(P->nk * 2), P->dout = poisoned(P->nq * 2);
    attn_fill_strided(c->dtype, P->q, qs, c->batch, c->hq, c->sq, c->d, 21);
    attn_fill_strided(c->dtype, P->k, ks, c->batch, c->hkv, c->sk, c->d, 22);
    attn_fill_strided(c->dtype, P->v, ks, c->batch, c->hkv, c->sk, c->d, 23);
    attn_fill_strided(c->dtype, P->dout, qs, c->batch, c->hq, c->sq, c->d, 24);
    void *o = poisoned(P->nq * 2);
    *lse = poisoned((size_t)c->batch * c->hq * c->sq * 4);
    KilnAttentionParams *f = &p->fwd;
    *f = (KilnAttentionParams){.dtype = c->dtype == ATTN_BF16 ? KILN_BF16 : KILN_F16, .batch = c->batch,
                               .heads_q = c->hq, .heads_kv = c->hkv, .seqlen_q = c->sq, .seqlen_k = c->sk,
                               .head_dim = c->d, .causal = c->causal, .q = (uintptr_t)P->q, .k = (uintptr_t)P->k,
                               .v = (uintptr_t)P->v, .o = (uintptr_t)o, .lse = (uintptr_t)*lse, .variant = var,
                               .block_m = 16, .block_n = 16};
    memcpy(f->q_stride, qs, sizeof qs), memcpy(f->o_stride, qs, sizeof qs);
    memcpy(f->k_stride, ks, sizeof ks), memcpy(f->v_stride, ks, sizeof ks);
    f->q_bytes = f->o_bytes = P->nq * 2, f->k_bytes = f->v_bytes = P->nk * 2;
    f->lse_bytes = (size_t)c->batch * c->hq * c->sq * 4;
    ck_assert_msg(kiln_attention_fwd_cpu(f) == KILN_OK, "%s: forward: %s", c->what, kiln_last_error());
    p->deterministic = c->deterministic;
    p->block_m = p->block_n = 16;
    p->dout = (uintptr_t)P->dout;
    p->dq = (uintptr_t)poisoned(P->nq * 2), p->dk = (uintptr_t)poisoned(P->nk * 2), p->dv = (uintptr_t)poisoned(P->nk * 2);
    memcpy(p->dout_stride, qs, sizeof qs), memcpy(p->dq_stride, qs, sizeof qs);
    memcpy(p->dk_stride, ks, sizeof ks), memcpy(p->dv_stride, ks, sizeof ks);
    p->dout_bytes = p->dq_bytes = P->nq * 2, p->dk_bytes = p->dv_bytes = P->nk * 2;
}

static void teardown(Problem *P, KilnAttentionBwdParams *p, float *lse)
{
    free(P->q), free(P->k), free(P->v), free(P->dout), free((void *)(uintptr_t)p->fwd.o), free(lse);
    free((void *)(uintptr_t)p->dq), free((void *)(uintptr_t)p->dk), free((void *)(uintptr_t)p->dv);
}

/* The call of case c with tensor theta and one param_grads entry g (grad set by run_once):
 * what a test keeps while it runs (p points into it: keep it in place). */
typedef struct PgCall {
    Problem P;
    KilnVariantArg arg;
    KilnAttentionVariant var;
    KilnAttentionBwdParams p;
    KilnParamGrad g;
    float *lse;
} PgCall;

static void setup_call(PgCall *k, const PgCase *c, float *theta)
{
    k->var = variant_of(c, theta, &k->arg);
    memset(&k->p, 0, sizeof k->p);
    setup(&k->P, c, &k->p, &k->var, &k->lse);
    k->g = (KilnParamGrad){k->arg.name, 0, (size_t)numel_of(c)};
    k->p.param_grads = &k->g, k->p.nparam_grads = 1, k->p.param_grads_atomic = c->atomic;
}

/* One backward with poisoned scratch and gradient; the gradient copied to out. */
static void run_once(KilnAttentionBwdParams *p, KilnParamGrad *g, float *out)
{
    size_t bytes = kiln_attention_bwd_scratch_size(p);
    ck_assert_uint_gt(bytes, 0);
    void *scratch = poisoned(bytes);
    float *grad = poisoned(g->numel * 4);
    g->grad = (uintptr_t)grad;
    p->scratch = (uintptr_t)scratch, p->scratch_size = bytes;
    ck_assert_msg(kiln_attention_bwd_cpu(p) == KILN_OK, "backward: %s", kiln_last_error());
    memcpy(out, grad, g->numel * 4);
    free(scratch), free(grad);
}

static const PgCase k_cases[] = {
    {"t5 f16 gqa 4/2 37 x 45 det", V_T5, ATTN_F16, 2, 4, 2, 37, 45, 32, 0, 1, 0},
    {"t5 bf16 mha 2/2 29 x 53 causal atomic-dq", V_T5, ATTN_BF16, 1, 2, 2, 29, 53, 32, 1, 0, 0},
    {"alibi f16 gqa 4/2 37 x 45 causal det", V_ALIBI, ATTN_F16, 2, 4, 2, 37, 45, 32, 1, 1, 0},
    {"alibi bf16 mha 2/2 53 x 29 atomic-dq", V_ALIBI, ATTN_BF16, 1, 2, 2, 53, 29, 32, 0, 0, 0},
    {"t5 f16 gqa 4/2 37 x 45 atomic grads", V_T5, ATTN_F16, 2, 4, 2, 37, 45, 32, 1, 1, 1},
    {"alibi bf16 gqa 4/2 45 x 37 atomic grads", V_ALIBI, ATTN_BF16, 2, 4, 2, 45, 37, 32, 0, 0, 1},
};

START_TEST(param_grads_match_finite_differences)
{
    const PgCase *c = &k_cases[_i];
    int n = numel_of(c);
    float *theta = malloc((size_t)n * 4);
    uint64_t x = 0x9E3779B97F4A7C15ull * (uint64_t)(_i + 1);
    for (int i = 0; i < n; i++) {   /* T5: a bias in [-1, 1]; ALiBi: slopes in [0.02, 0.3] */
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        double u = (double)(x >> 11) / 9007199254740992.0;
        theta[i] = c->kind == V_T5 ? (float)(2 * u - 1) : (float)(0.02 + 0.28 * u);
    }
    PgCall k;
    setup_call(&k, c, theta);
    float *g1 = malloc((size_t)n * 4), *g2 = malloc((size_t)n * 4);
    run_once(&k.p, &k.g, g1);
    run_once(&k.p, &k.g, g2);
    /* the atomic mode's bits may differ on a GPU; here the programs run one after another */
    ck_assert_msg(!memcmp(g1, g2, (size_t)n * 4), "%s: two runs differ", c->what);
    /* central differences in float64 around the f32 parameters */
    double *th = malloc(sizeof(double) * (size_t)n), maxfd = 0, err = 0;
    double *fd = malloc(sizeof(double) * (size_t)n);
    for (int i = 0; i < n; i++) th[i] = theta[i];
    for (int i = 0; i < n; i++) {
        double h = 1e-4, t0 = th[i];
        th[i] = t0 + h;
        double lp = loss(&k.P, th);
        th[i] = t0 - h;
        double lm = loss(&k.P, th);
        th[i] = t0;
        fd[i] = (lp - lm) / (2 * h);
        maxfd = fmax(maxfd, fabs(fd[i]));
    }
    int worst = 0;
    for (int i = 0; i < n; i++) {
        ck_assert_msg(isfinite(g1[i]), "%s: grad[%d] = %g", c->what, i, g1[i]);
        if (fabs(g1[i] - fd[i]) > err) err = fabs(g1[i] - fd[i]), worst = i;
    }
    if (getenv("ATTN_VERBOSE"))
        fprintf(stderr, "%-44s max |g - fd| %.3g of max |fd| %.3g\n", c->what, err, maxfd);
    ck_assert_msg(maxfd > 1e-3, "%s: the finite differences are all ~0 (%.3g): the test cannot fail", c->what, maxfd);
    /* the backward reads O rounded to the dtype: its error scales with the dtype's epsilon
     * (measured: 3.3 to 3.7 eps of max |fd| for both dtypes) */
    double eps = c->dtype == ATTN_BF16 ? 0x1p-8 : 0x1p-11;
    ck_assert_msg(err <= 8 * eps * maxfd + 1e-4, "%s: grad[%d] = %.6g, finite differences %.6g (max |fd| %.3g)", c->what,
                  worst, g1[worst], fd[worst], maxfd);
    free(th), free(fd), free(g1), free(g2), free(theta);
    teardown(&k.P, &k.p, k.lse);
}
END_TEST

/* What the call refuses, before running: no variant, an unknown name, a missing entry, a
 * short scratch. */
START_TEST(param_grads_refused)
{
    const PgCase *c = &k_cases[2];
    float theta[4] = {0.1f, 0.2f, 0.05f, 0.3f};
    PgCall k;
    setup_call(&k, c, theta);
    float grad[4];
    k.g.grad = (uintptr_t)grad;
    size_t with = kiln_attention_bwd_scratch_size(&k.p);
    k.p.nparam_grads = 0;
    size_t without = kiln_attention_bwd_scratch_size(&k.p);
    /* one row of 4 floats per possible 16-key program: cdiv(45, 16) * 2 * 2 rows, rounded to 256 bytes */
    ck_assert_uint_eq(with - without, 256);
    k.p.nparam_grads = 1, k.p.param_grads_atomic = 1;   /* atomics into the gradient: no rows */
    ck_assert_uint_eq(kiln_attention_bwd_scratch_size(&k.p), without);
    k.p.param_grads_atomic = 0;
    void *scratch = poisoned(with);
    k.p.scratch = (uintptr_t)scratch, k.p.scratch_size = without;
    k.p.nparam_grads = 1;
    ck_assert_int_eq(kiln_attention_bwd_cpu(&k.p), KILN_ERR_USAGE);   /* short scratch */
    ck_assert_ptr_nonnull(strstr(kiln_last_error(), "scratch_size"));
    k.p.scratch_size = with;
    k.g.name = "slopes";
    ck_assert_int_eq(kiln_attention_bwd_cpu(&k.p), KILN_ERR_USAGE);
    ck_assert_msg(strstr(kiln_last_error(), "'slopes', which is not a differentiable param"), "%s", kiln_last_error());
    k.g.name = "alibi_slopes", k.g.numel = 0;
    ck_assert_int_eq(kiln_attention_bwd_cpu(&k.p), KILN_ERR_USAGE);
    ck_assert_ptr_nonnull(strstr(kiln_last_error(), "numel 0"));
    k.g.numel = 4;
    k.p.fwd.variant = NULL;
    ck_assert_int_eq(kiln_attention_bwd_cpu(&k.p), KILN_ERR_USAGE);
    ck_assert_ptr_nonnull(strstr(kiln_last_error(), "param_grads without a variant"));
    k.p.fwd.variant = &k.var;
    /* a variant with two differentiable params, one entry given */
    KilnVariantArg args2[2] = {k.arg, {"extra", kiln_arg_ptr((uintptr_t)theta), 16}};
    KilnAttentionVariant two = {.source = "import \"attention\";\n"
                                          "param alibi_slopes: *f32 differentiable;\n"
                                          "param extra: *f32 differentiable;\n"
                                          "fn score_mod(s, b, h, q_idx, kv_idx) { return s * load(extra + h) - "
                                          "load(alibi_slopes + h) * abs((q_idx - kv_idx).to(f32)); }\n",
                                .args = args2, .nargs = 2};
    k.p.fwd.variant = &two;
    ck_assert_int_eq(kiln_attention_bwd_cpu(&k.p), KILN_ERR_USAGE);
    ck_assert_msg(strstr(kiln_last_error(), "'extra' is differentiable, but param_grads has no entry"), "%s",
                  kiln_last_error());
    k.p.fwd.variant = &k.var;
    free(scratch);
    teardown(&k.P, &k.p, k.lse);
}
END_TEST

/* The front end's located errors: a differentiable param of another type, one score_mod never
 * loads, and a word other than `differentiable` after the type. */
START_TEST(differentiable_param_errors)
{
    static const struct { const char *src, *msg; int line, col; } k[] = {
        {"param bias: *f16 differentiable;\nfn score_mod(s, b, h, q_idx, kv_idx) { return s + load(bias + h).to(f32); }\n",
         "a differentiable param must be an f32 tensor", 1, 18},
        {"param bias: i32 differentiable;\nfn score_mod(s, b, h, q_idx, kv_idx) { return s + bias; }\n",
         "a differentiable param must be an f32 tensor", 1, 17},
        {"param bias: *f32 differentiable;\nparam scale: *f32;\n"
         "fn score_mod(s, b, h, q_idx, kv_idx) { return s * load(scale + h); }\n",
         "differentiable param 'bias' is never loaded by score_mod", 1, 18},
        {"param bias: *f32 learnable;\nfn score_mod(s, b, h, q_idx, kv_idx) { return s + load(bias + h); }\n",
         "expected ';' or 'differentiable' after the type of param 'bias', got 'learnable'", 1, 18},
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        char src[1024];
        snprintf(src, sizeof src, "%simport \"attention_bwd\";\n", k[i].src);
        KilnDefine defs[] = {{"PARAM_GRADS", "true"}, {"HEAD_DIM", "32"}};
        KilnCompileOptions o = {.arch = "sm_90a", .emit = KILN_EMIT_IR, .kernel = "attn_bwd_dkdv_f16",
                                .defines = defs, .ndefines = 2};
        KilnCompileResult r;
        ck_assert_msg(kiln_compile("variant.tile", src, &o, &r) != KILN_OK, "case %zu compiled", i);
        char want[64];
        snprintf(want, sizeof want, "variant.tile:%d:%d: error: ", k[i].line, k[i].col);
        ck_assert_msg(r.diagnostics && strstr(r.diagnostics, want) && strstr(r.diagnostics, k[i].msg),
                      "case %zu: want '%s%s' in:\n%s", i, want, k[i].msg, r.diagnostics ? r.diagnostics : "");
        kiln_compile_result_free(&r);
    }
}
END_TEST

/* The GPU launch specialises the kernel with a hint per argument (jit/specialize.c), the
 * gradient row X__grad and its length X__numel included, which param_grads adds to the kernel
 * in lowering: the hint check must know them (it refused them, and every learnable-bias
 * backward on the GPU failed to compile), and still refuse a near miss. It knows them from
 * lang.h's one list of generated params, for the kernels that have them: the dK/dV kernel
 * does, the dQ kernel (which reads bias but computes no gradient of it) does not. */
START_TEST(hints_name_the_gradient_params)
{
    const char *src = "param bias: *f32 differentiable;\n"
                      "fn score_mod(s, b, h, q_idx, kv_idx) { return s + load(bias + h); }\nimport \"attention_bwd\";\n";
    KilnDefine defs[] = {{"HEAD_DIM", "32"}, {"PARAM_GRADS", "true"}};
    static const struct {
        const char *kernel, *name, *error;   /* error NULL: the hints compile */
    } cases[] = {
        {"attn_bwd_dkdv_f16", "bias__grad", NULL},
        {"attn_bwd_dkdv_f16", "bias__grads", "no runtime parameter is named 'bias__grads'"},
        {"attn_bwd_dq_f16", "bias__grad", "param_grads adds 'bias__grad' only to a kernel whose call differentiates a "
                                          "load of 'bias'; kernel 'attn_bwd_dq_f16' has none"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        KilnParamHint hints[] = {{"bias", 16, 0}, {cases[c].name, 16, 0}, {"bias__numel", 16, 0}};
        /* the dQ kernel has no PARAM_GRADS and lacks bias__numel too: the name under test only */
        int dkdv = !strcmp(cases[c].kernel, "attn_bwd_dkdv_f16");
        KilnCompileOptions o = {.arch = "sm_90a", .emit = KILN_EMIT_IR, .kernel = cases[c].kernel,
                                .defines = defs, .ndefines = dkdv ? 2 : 1, .hints = hints, .nhints = dkdv ? 3 : 2};
        KilnCompileResult r;
        KilnStatus st = kiln_compile("variant.tile", src, &o, &r);
        if (cases[c].error)
            ck_assert_msg(st != KILN_OK && r.diagnostics && strstr(r.diagnostics, cases[c].error), "%s: %s",
                          cases[c].kernel, r.diagnostics ? r.diagnostics : "");
        else
            ck_assert_msg(st == KILN_OK, "%s", r.diagnostics ? r.diagnostics : "");
        kiln_compile_result_free(&r);
    }
}
END_TEST

static Suite *make_suite(void)
{
    Suite *s = suite_create("attention_param_grads");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, param_grads_match_finite_differences, 0, (int)(sizeof k_cases / sizeof k_cases[0]));
    tcase_add_test(tc, param_grads_refused);
    tcase_add_test(tc, differentiable_param_errors);
    tcase_add_test(tc, hints_name_the_gradient_params);
    suite_add_tcase(s, tc);
    return s;
}

TU_MAIN(make_suite)
