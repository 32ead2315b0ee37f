/* attn_harness.h — shared by the attention tests: compile the forward program
 * (optionally with a variant's hooks in front), lay out a problem through its
 * strides in NaN-filled buffers, run it on the interpreter with every
 * parameter bound by name, and judge it with FlashAttention's accuracy rule
 * against tools/attn_ref.c. Header-only (static functions): each test is one
 * translation unit.
 */
#ifndef KILN_ATTN_HARNESS_H
#define KILN_ATTN_HARNESS_H

#include "testutil.h"

#include <math.h>
#include <string.h>

#include "compiler/driver/driver.h"
#include "kiln_attention.h"
#include "compiler/interp/interp.h"
#include "tools/attn_ref.c"   /* the reference is a tool, not a library: compiled in here */

typedef struct Case {
    const char *what;
    AttnDtype dtype;
    int batch, hq, hkv, sq, sk, d;
    int causal;
    AttnLayout layout;
    double scale;          /* 0: 1/sqrt(d) */
    int block_m, block_n;
    int pad;               /* extra elements per row pitch: strides wider than dense */
} Case;

/* The text of a file of the source tree (malloc'd once per path, kept for the process). */
static const char *ah_text(const char *rel)
{
    static struct { const char *rel; char *text; } cache[8];
    for (int i = 0; i < 8; i++) {
        if (cache[i].rel && !strcmp(cache[i].rel, rel)) return cache[i].text;
        if (!cache[i].rel) {
            cache[i].text = sup_read_file_text(tu_src_path(rel), NULL);
            ck_assert_msg(cache[i].text != NULL, "cannot read %s", rel);
            cache[i].rel = rel;
            return cache[i].text;
        }
    }
    ck_abort_msg("ah_text: too many files");
    return NULL;
}

/* Kernel `kernel` of `src` (named `path` in diagnostics) compiled with `defs` to IR for the
 * interpreter; the module lives in `arena`; `what` names the case when it fails. */
static IrFunc *ah_compile(Arena *arena, const char *what, const char *path, const char *src, const char *kernel,
                          const KilnDefine *defs, int ndefs)
{
    KilnCompileOptions o = {.kernel = kernel, .defines = defs, .ndefines = ndefs, .emit = KILN_EMIT_IR};
    Diag d;
    diag_init(&d, path, src);
    IrModule *m = NULL;
    StrBuf out, dumps;
    sb_init(&out);
    sb_init(&dumps);
    KilnStatus st = kiln_compile_ir(arena, &d, src, &o, &m, &out, &dumps);
    ck_assert_msg(st == KILN_OK && m && m->nfuncs == 1, "%s: %s: compile failed (%d):\n%s", what, kernel, (int)st,
                  d.out.data ? d.out.data : "");
    sb_free(&out);
    sb_free(&dumps);
    diag_free(&d);
    return m->funcs[0];
}

/* Compile one specialisation of `src` (the program, maybe with a variant's
 * hooks in front) with the case's defines plus `extra`; the module lives in `arena`. */
static IrFunc *compile_src(Arena *arena, const Case *c, const char *path, const char *src,
                           const KilnDefine *extra, int nextra)
{
    char dbuf[16], bm[16], bn[16];
    snprintf(dbuf, sizeof dbuf, "%d", c->d);
    snprintf(bm, sizeof bm, "%d", c->block_m);
    snprintf(bn, sizeof bn, "%d", c->block_n);
    KilnDefine defs[16] = {{"HEAD_DIM", dbuf}, {"BLOCK_M", bm}, {"BLOCK_N", bn},
                           {"CAUSAL", c->causal ? "true" : "false"}};
    ck_assert_int_le(nextra, 12);
    for (int i = 0; i < nextra; i++) defs[4 + i] = extra[i];
    return ah_compile(arena, c->what, path, src, c->dtype == ATTN_F16 ? "attn_fwd_f16" : "attn_fwd_bf16", defs,
                      4 + nextra);
}

static inline IrFunc *compile_case(Arena *arena, const Case *c)
{
    return compile_src(arena, c, "lang/lib/attention_fwd.tile", ah_text("lang/lib/attention_fwd.tile"), NULL, 0);
}

/* Bind a runtime parameter by name (the program's parameter order is its own business). */
static void bind(const IrFunc *f, InterpArg *args, bool *set, const char *name, InterpArg v)
{
    for (int i = 0; i < f->nparams; i++)
        if (f->params[i]->name && !strcmp(f->params[i]->name, name)) {
            args[i] = v;
            set[i] = true;
            return;
        }
    ck_abort_msg("kernel %s has no parameter '%s'", f->name, name);
}

static InterpArg a_ptr(void *p) { return (InterpArg){.ptr = p}; }
static InterpArg a_int(int64_t i) { return (InterpArg){.i = i}; }

typedef struct Run {
    AttnProblem p;
    void *q, *k, *v, *o;
    float *lse;
    size_t nq, nkv, nlse;
} Run;

/* The sizes of r's host buffers, which kiln_attention_fwd_cpu needs (and bounds by). */
static inline void run_host_sizes(const Run *r, KilnAttentionParams *p)
{
    size_t es = attn_dtype_size(r->p.dtype);
    p->q_bytes = p->o_bytes = r->nq * es;
    p->k_bytes = p->v_bytes = r->nkv * es;
    p->lse_bytes = r->nlse * sizeof(float);
}

static void setup(Run *r, const Case *c, uint64_t seed)
{
    memset(r, 0, sizeof *r);
    AttnProblem *p = &r->p;
    *p = (AttnProblem){.batch = c->batch, .heads_q = c->hq, .heads_kv = c->hkv, .seqlen_q = c->sq,
                       .seqlen_k = c->sk, .head_dim = c->d + c->pad, .causal = c->causal,
                       .scale = c->scale > 0 ? c->scale : 1.0 / sqrt((double)c->d), .dtype = c->dtype};
    attn_set_strides(p, c->layout);   /* with the padded pitch ... */
    p->head_dim = c->d;               /* ... and the real head dim */
    r->nq = attn_numel_q(p);
    r->nkv = attn_numel_kv(p);
    r->nlse = (size_t)c->batch * c->hq * c->sq;
    size_t es = attn_dtype_size(c->dtype);
    r->q = malloc(r->nq * es);
    r->o = malloc(r->nq * es);
    r->k = malloc(r->nkv * es);
    r->v = malloc(r->nkv * es);
    r->lse = malloc(r->nlse * sizeof(float) + 4);
    /* 0xFF bytes are NaN in f16, bf16 and f32 alike */
    memset(r->q, 0xFF, r->nq * es);
    memset(r->k, 0xFF, r->nkv * es);
    memset(r->v, 0xFF, r->nkv * es);
    memset(r->o, 0xFF, r->nq * es);
    memset(r->lse, 0xFF, r->nlse * sizeof(float));
    /* random values where the problem owns elements (through the strides); the rest stays NaN */
    attn_fill_strided(c->dtype, r->q, p->q_stride, c->batch, c->hq, c->sq, c->d, seed);
    attn_fill_strided(c->dtype, r->k, p->k_stride, c->batch, c->hkv, c->sk, c->d, seed + 1);
    attn_fill_strided(c->dtype, r->v, p->v_stride, c->batch, c->hkv, c->sk, c->d, seed + 2);
}

static void teardown(Run *r)
{
    free(r->q); free(r->k); free(r->v); free(r->o); free(r->lse);
}

/* Run the kernel on the interpreter with softmax scale `scale`. */
static void run_kernel(const IrFunc *f, Run *r, const Case *c, double scale)
{
    InterpArg args[64];
    bool set[64] = {0};
    ck_assert_int_le(f->nparams, 64);
    const AttnProblem *p = &r->p;
    bind(f, args, set, "Q", a_ptr(r->q));
    bind(f, args, set, "K", a_ptr(r->k));
    bind(f, args, set, "V", a_ptr(r->v));
    bind(f, args, set, "O", a_ptr(r->o));
    bind(f, args, set, "LSE", a_ptr(r->lse));
    const char *names[4] = {"q", "k", "v", "o"};
    const int64_t *st[4] = {p->q_stride, p->k_stride, p->v_stride, p->o_stride};
    const char *dims[3] = {"b", "h", "m"};
    for (int t = 0; t < 4; t++)
        for (int j = 0; j < 3; j++) {
            char nm[32];
            snprintf(nm, sizeof nm, "stride_%s%s", names[t], (t == 1 || t == 2) && j == 2 ? "n" : dims[j]);
            bind(f, args, set, nm, a_int(st[t][j]));
        }
    bind(f, args, set, "heads", a_int(c->hq));
    bind(f, args, set, "heads_kv", a_int(c->hkv));
    bind(f, args, set, "seqlen_q", a_int(c->sq));
    bind(f, args, set, "seqlen_k", a_int(c->sk));
    bind(f, args, set, "sm_scale", (InterpArg){.f = scale});
    for (int i = 0; i < f->nparams; i++)
        ck_assert_msg(set[i], "parameter %s left unbound", f->params[i]->name);
    size_t es = attn_dtype_size(c->dtype);
    InterpBuffer bufs[] = {{r->q, r->nq * es, "Q"}, {r->k, r->nkv * es, "K"}, {r->v, r->nkv * es, "V"},
                           {r->o, r->nq * es, "O"}, {r->lse, r->nlse * sizeof(float), "LSE"}};
    InterpOptions io = {.grid = {(c->sq + c->block_m - 1) / c->block_m, c->batch * c->hq, 1},
                        .buffers = bufs, .nbuffers = 5};
    StrBuf err;
    sb_init(&err);
    int rc = interp_run(f, args, f->nparams, &io, &err);
    ck_assert_msg(rc == 0, "%s: interpreter failed: %s", c->what, err.data ? err.data : "");
    sb_free(&err);
}

typedef struct Verdict {
    AttnErr e;
    double plain_err, bound;
    int64_t empty_bad;
} Verdict;

static Verdict judge(const Run *r)
{
    const AttnProblem *p = &r->p;
    size_t nrow = (size_t)p->batch * p->heads_q * p->seqlen_q;
    double *ref = malloc(sizeof(double) * nrow * (size_t)p->head_dim + 8);
    double *plain = malloc(sizeof(double) * nrow * (size_t)p->head_dim + 8);
    double *lse = malloc(sizeof(double) * nrow + 8);
    attn_ref_fwd(p, r->q, r->k, r->v, ref, lse);
    attn_ref_torchlike(p, r->q, r->k, r->v, plain);
    Verdict v;
    v.e = attn_compare(p, r->o, r->lse, ref, lse);
    v.plain_err = attn_max_abs_diff(p, plain, ref);
    v.bound = 2 * v.plain_err + 1e-5;
    v.empty_bad = attn_check_empty_rows(p, r->o, r->lse);
    free(ref); free(plain); free(lse);
    return v;
}

/* Run a case end to end and check the rule; `p_hook` lets a variant set the
 * reference's score_mod / mask_mod before the reference runs. */
static inline void check_case(const Case *c, IrFunc *f, uint64_t seed, void (*p_hook)(AttnProblem *p))
{
    Run r;
    setup(&r, c, seed);
    if (p_hook) p_hook(&r.p);
    run_kernel(f, &r, c, r.p.scale);
    Verdict v = judge(&r);
    if (getenv("ATTN_VERBOSE"))
        fprintf(stderr, "%-44s err %.3g  plain %.3g  mean %.3g  lse %.3g  empty-bad %lld\n", c->what,
                v.e.o_max_abs, v.plain_err, v.e.o_mean_abs, v.e.lse_max_rel, (long long)v.empty_bad);
    ck_assert_msg(v.e.nonfinite == 0, "%s: %lld non-finite outputs in visible rows", c->what,
                  (long long)v.e.nonfinite);
    ck_assert_msg(v.e.o_max_abs <= v.bound,
                  "%s: max |O - ref| = %.3g > bound %.3g (plain %s attention: %.3g) at b%d h%d i%d d%d",
                  c->what, v.e.o_max_abs, v.bound, c->dtype == ATTN_F16 ? "f16" : "bf16", v.plain_err,
                  v.e.worst_b, v.e.worst_h, v.e.worst_i, v.e.worst_d);
    ck_assert_msg(v.e.lse_max_rel <= 1e-4, "%s: LSE relative error %.3g", c->what, v.e.lse_max_rel);
    ck_assert_msg(v.empty_bad == 0, "%s: %lld elements of fully masked rows are not O = 0 / LSE = -inf",
                  c->what, (long long)v.empty_bad);
    teardown(&r);
}

#endif
