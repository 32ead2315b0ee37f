/* attn_bwd_harness.h — the backward program (lang/lib/attention_bwd.tile) on the
 * CPU interpreter: lay out a problem through its strides in NaN-filled buffers,
 * take O and LSE from the float64 forward (O rounded to the dtype, LSE to f32: what
 * the forward kernel writes, to within its own tolerance), run the backward's
 * kernels in the order the runtime does (preprocess; dK/dV with the atomic dQ and
 * the conversion, or dK/dV then the deterministic dQ pass) with every parameter
 * bound by name, and judge dQ, dK and dV with FlashAttention's rule for gradients
 * against tools/attn_ref.c. Header-only, on top of attn_harness.h.
 */
#ifndef KILN_ATTN_BWD_HARNESS_H
#define KILN_ATTN_BWD_HARNESS_H

#include "attn_harness.h"
#include "jit_internal.h"   /* rt_attn_bwd_plan: the runtime's launches */

#define BWD_PROGRAM "lang/lib/attention_bwd.tile"

typedef struct BwdCase {
    Case c;
    int deterministic;     /* the dQ pass over query blocks instead of atomic_add */
    const char *hooks;     /* NULL, or hook source prepended to the program ... */
    const char *mask_mod;  /* ... and the names given to -D mask_mod / kv_start / score_mod / */
    const char *kv_start;  /* score_mod_grad */
    const char *score_mod, *score_mod_grad;
    KilnDefine hook_defs[2];   /* -D values for the hooks' file-level consts (ALIBI_HEADS, ...) */
    int nhook_defs;
    int (*ref_mask)(int b, int h, int i, int j, const void *ctx);   /* the reference's hooks */
    double (*ref_score)(double s, int b, int h, int i, int j, const void *ctx);
    double (*ref_score_grad)(double s, int b, int h, int i, int j, const void *ctx);
    int plan_sm;           /* nonzero: run kiln_attention_bwd's plan for this sm_version (its
                              kernels, defines, tiles and grids) instead of the case's blocks */
    /* A KilnAttentionVariant (instead of hooks): compiled as the runtime does (its text,
     * then the program's import; hooks bound by name) and its arguments bound by name,
     * pointer arguments as host buffers of .bytes. */
    const KilnAttentionVariant *variant;
    /* A block mask (host data, from kiln_attention_block_mask_create_cpu) for the plan's
     * _bm kernels (needs plan_sm), its arrays and strides bound by the runtime's own
     * rt_attn_bwd_arg; own_tiles: pass the case's block_m x block_n as the caller's tiles. */
    const KilnBlockMask *block_mask;
    int own_tiles;
    /* the caller's schedule.warp_specialize and tma (needs plan_sm): the dK/dV kernel with
     * FLAT_GROUP (the whole GQA group in each of its two loops), as the plan asks for it */
    int warp_specialize;
} BwdCase;

typedef struct BwdRun {
    Run f;                     /* q, k, v, o (dtype), lse (f32) */
    void *dout, *dq, *dk, *dv;
    float *delta, *dq_acc;
    size_t ndq_acc;
} BwdRun;

/* One kernel of the backward program, compiled to IR for the interpreter. */
static IrFunc *bwd_compile(Arena *arena, const BwdCase *bc, const char *kernel, const KilnDefine *defs, int ndefs)
{
    const char *prog = ah_text(BWD_PROGRAM);
    char *src = NULL;
    const char *path = BWD_PROGRAM;
    if (bc->variant) {   /* the runtime's root text for the variant */
        RtAttnVarSrc vs;
        ck_assert_int_eq(rt_attn_var_open("test", bc->variant, &vs), KILN_OK);
        char *root = rt_attn_var_root(&vs, BWD_PROGRAM);
        src = arena_strdup(arena, root);
        path = arena_strdup(arena, vs.path);
        free(root);
        /* as rt_attn_compile_request: the dK/dV kernels read a q_end the variant binds */
        if (strstr(kernel, "_dkdv") && !strstr(kernel, "_dkdv_bm") && rt_attn_var_binds(&vs, BWD_PROGRAM, "q_end")) {
            KilnDefine *d = arena_alloc(arena, ((size_t)ndefs + 1) * sizeof *d);
            if (ndefs) memcpy(d, defs, (size_t)ndefs * sizeof *d);
            d[ndefs++] = (KilnDefine){"Q_END", "true"};
            defs = d;
        }
        rt_attn_var_close(&vs);
    } else if (bc->hooks) {
        src = arena_alloc(arena, strlen(bc->hooks) + strlen(prog) + 2);
        sprintf(src, "%s\n%s", bc->hooks, prog);
    }
    return ah_compile(arena, bc->c.what, path, src ? src : prog, kernel, defs, ndefs);
}

static void *poisoned(size_t bytes)
{
    void *p = malloc(bytes + 8);
    memset(p, 0xFF, bytes + 8);   /* NaN in f16, bf16 and f32 */
    return p;
}

static void bwd_setup(BwdRun *r, const BwdCase *bc, uint64_t seed)
{
    const Case *c = &bc->c;
    setup(&r->f, c, seed);
    AttnProblem *p = &r->f.p;
    p->mask_mod = bc->ref_mask;
    p->score_mod = bc->ref_score;
    p->score_mod_grad = bc->ref_score_grad;
    size_t es = attn_dtype_size(c->dtype);
    r->dout = poisoned(r->f.nq * es);
    r->dq = poisoned(r->f.nq * es);
    r->dk = poisoned(r->f.nkv * es);
    r->dv = poisoned(r->f.nkv * es);
    r->delta = poisoned(r->f.nlse * sizeof(float));
    r->ndq_acc = r->f.nlse * (size_t)c->d;
    r->dq_acc = poisoned(r->ndq_acc * sizeof(float));
    attn_fill_strided(c->dtype, r->dout, p->o_stride, c->batch, c->hq, c->sq, c->d, seed + 3);
    /* O and LSE from the float64 forward, stored as the forward kernel would */
    size_t nrow = r->f.nlse;
    double *o = malloc(sizeof(double) * nrow * (size_t)c->d + 8), *lse = malloc(sizeof(double) * nrow + 8);
    attn_ref_fwd(p, r->f.q, r->f.k, r->f.v, o, lse);
    size_t row = 0;
    for (int b = 0; b < c->batch; b++)
        for (int h = 0; h < c->hq; h++)
            for (int i = 0; i < c->sq; i++, row++) {
                for (int d = 0; d < c->d; d++)
                    attn_put(c->dtype, r->f.o, (size_t)(b * p->o_stride[0] + h * p->o_stride[1] + i * p->o_stride[2] + d),
                             o[row * c->d + d]);
                r->f.lse[row] = (float)lse[row];
            }
    free(o);
    free(lse);
}

static void bwd_teardown(BwdRun *r)
{
    teardown(&r->f);
    free(r->dout); free(r->dq); free(r->dk); free(r->dv); free(r->delta); free(r->dq_acc);
}

typedef struct NamedArg { const char *name; InterpArg v; } NamedArg;

/* Run kernel f on grid (g0, g1) with every parameter found by name in `named`. */
static void bwd_run_kernel(const IrFunc *f, BwdRun *r, const NamedArg *named, int nnamed, int g0, int g1,
                           const KilnAttentionVariant *var, const KilnBlockMask *bm)
{
    InterpArg args[64];
    ck_assert_int_le(f->nparams, 64);
    for (int i = 0; i < f->nparams; i++) {
        int j = 0;
        while (j < nnamed && strcmp(named[j].name, f->params[i]->name)) j++;
        ck_assert_msg(j < nnamed, "kernel %s: no value for parameter %s", f->name, f->params[i]->name);
        args[i] = named[j].v;
    }
    size_t es = attn_dtype_size(r->f.p.dtype);
    InterpBuffer bufs[] = {{r->f.q, r->f.nq * es, "Q"}, {r->f.k, r->f.nkv * es, "K"}, {r->f.v, r->f.nkv * es, "V"},
                           {r->f.o, r->f.nq * es, "O"}, {r->f.lse, r->f.nlse * sizeof(float), "LSE"},
                           {r->dout, r->f.nq * es, "DO"}, {r->dq, r->f.nq * es, "DQ"}, {r->dk, r->f.nkv * es, "DK"},
                           {r->dv, r->f.nkv * es, "DV"}, {r->delta, r->f.nlse * sizeof(float), "DELTA"},
                           {r->dq_acc, r->ndq_acc * sizeof(float), "DQ_ACC"}};
    InterpBuffer all[sizeof bufs / sizeof bufs[0] + 8 + KILN_BM_NARRAYS];
    int nb = (int)(sizeof bufs / sizeof bufs[0]);
    memcpy(all, bufs, sizeof bufs);
    static const char *const bm_arrays[] = {"KV_NUM", "KV_IDX", "FULL_KV_NUM", "FULL_KV_IDX", "Q_NUM", "Q_IDX",
                                            "FULL_Q_NUM", "FULL_Q_IDX", "CLASS"};
    for (int i = 0; bm && i < KILN_BM_NARRAYS; i++)
        all[nb++] = (InterpBuffer){(void *)(uintptr_t)(bm->data + bm->offset[i]),
                                   rt_attn_bm_array_bytes(bm, bm_arrays[i]), bm_arrays[i]};
    for (int i = 0; var && i < var->nargs && nb < (int)(sizeof all / sizeof all[0]); i++)
        if (var->args[i].value.kind == KILN_PARAM_PTR)
            all[nb++] = (InterpBuffer){(void *)(uintptr_t)var->args[i].value.v.ptr, var->args[i].bytes, var->args[i].name};
    InterpOptions io = {.grid = {g0, g1, 1}, .buffers = all, .nbuffers = nb};
    StrBuf err;
    sb_init(&err);
    int rc = interp_run(f, args, f->nparams, &io, &err);
    ck_assert_msg(rc == 0, "%s: interpreter failed: %s", f->name, err.data ? err.data : "");
    sb_free(&err);
}

/* Every runtime parameter the backward's kernels take, by name. */
static int bwd_named_args(BwdRun *r, const BwdCase *bc, double scale, NamedArg *a)
{
    const AttnProblem *p = &r->f.p;
    const Case *c = &bc->c;
    int n = 0;
    const struct { const char *name; void *ptr; } ptrs[] = {
        {"Q", r->f.q}, {"K", r->f.k}, {"V", r->f.v}, {"O", r->f.o}, {"LSE", r->f.lse}, {"DO", r->dout},
        {"DQ", r->dq}, {"DK", r->dk}, {"DV", r->dv}, {"DELTA", r->delta}, {"DQ_ACC", r->dq_acc}};
    for (size_t i = 0; i < sizeof ptrs / sizeof ptrs[0]; i++) a[n++] = (NamedArg){ptrs[i].name, a_ptr(ptrs[i].ptr)};
    /* dO has O's strides, dQ Q's, dK K's, dV V's */
    static const char *names[8][3] = {
        {"stride_qb", "stride_qh", "stride_qm"},   {"stride_kb", "stride_kh", "stride_kn"},
        {"stride_vb", "stride_vh", "stride_vn"},   {"stride_ob", "stride_oh", "stride_om"},
        {"stride_dob", "stride_doh", "stride_dom"}, {"stride_dqb", "stride_dqh", "stride_dqm"},
        {"stride_dkb", "stride_dkh", "stride_dkn"}, {"stride_dvb", "stride_dvh", "stride_dvn"}};
    const int64_t *st[8] = {p->q_stride, p->k_stride, p->v_stride, p->o_stride,
                            p->o_stride, p->q_stride, p->k_stride, p->v_stride};
    for (int t = 0; t < 8; t++)
        for (int j = 0; j < 3; j++) a[n++] = (NamedArg){names[t][j], a_int(st[t][j])};
    a[n++] = (NamedArg){"heads", a_int(c->hq)};
    a[n++] = (NamedArg){"heads_kv", a_int(c->hkv)};
    a[n++] = (NamedArg){"seqlen_q", a_int(c->sq)};
    a[n++] = (NamedArg){"seqlen_k", a_int(c->sk)};
    a[n++] = (NamedArg){"sm_scale", (InterpArg){.f = scale}};
    for (int i = 0; bc->variant && i < bc->variant->nargs; i++) {
        const KilnArg *v = &bc->variant->args[i].value;
        InterpArg x = {0};
        if (v->kind == KILN_PARAM_PTR) x.ptr = (void *)(uintptr_t)v->v.ptr;
        else if (v->kind == KILN_PARAM_F32) x.f = v->v.f32;
        else if (v->kind == KILN_PARAM_F64) x.f = v->v.f64;
        else x.i = v->v.i, x.f = (double)v->v.i;
        a[n++] = (NamedArg){bc->variant->args[i].name, x};
    }
    /* the block mask's arrays and strides, as the runtime binds them */
    static const char *const bm_names[] = {"KV_NUM", "KV_IDX", "FULL_KV_NUM", "FULL_KV_IDX", "Q_NUM", "Q_IDX",
                                           "FULL_Q_NUM", "FULL_Q_IDX", "bm_stride_b", "bm_stride_h",
                                           "bm_num_kv_blocks", "bm_tstride_b", "bm_tstride_h", "bm_num_q_blocks"};
    KilnAttentionParams fp = {.block_mask = bc->block_mask};
    for (size_t i = 0; bc->block_mask && i < sizeof bm_names / sizeof bm_names[0]; i++) {
        KilnParam prm = {.kind = i < 8 ? KILN_PARAM_PTR : KILN_PARAM_I64};
        snprintf(prm.name, sizeof prm.name, "%s", bm_names[i]);
        KilnArg v;
        KilnStatus st = KILN_ERR_USAGE;
        ck_assert_msg(rt_attn_bm_arg(&fp, &prm, &v, &st) && st == KILN_OK, "no block-mask argument %s", bm_names[i]);
        InterpArg x = {0};
        if (i < 8) x.ptr = (void *)(uintptr_t)v.v.ptr;
        else x.i = v.v.i, x.f = (double)v.v.i;
        a[n++] = (NamedArg){bm_names[i], x};
    }
    return n;
}

/* The runtime's own plan (rt_attn_bwd_plan) run on the interpreter. */
static void bwd_run_plan(Arena *arena, BwdRun *r, const BwdCase *bc, const NamedArg *named, int nn)
{
    const Case *c = &bc->c;
    KilnAttentionBwdParams p = {.fwd = {.dtype = c->dtype == ATTN_BF16 ? KILN_BF16 : KILN_F16, .batch = c->batch,
                                        .heads_q = c->hq, .heads_kv = c->hkv, .seqlen_q = c->sq, .seqlen_k = c->sk,
                                        .head_dim = c->d, .causal = c->causal},
                                .deterministic = bc->deterministic};
    p.fwd.block_mask = bc->block_mask;
    if (bc->own_tiles) p.block_m = c->block_m, p.block_n = c->block_n;
    if (bc->warp_specialize) p.schedule.warp_specialize = p.schedule.tma = 1;
    RtAttnBwdPlan plan;
    rt_attn_bwd_plan(bc->plan_sm, &p, &plan);
    for (int i = 0; i < plan.n; i++) {
        bool flat = false;
        for (int j = 0; j < plan.k[i].ndefines; j++) flat |= !strcmp(plan.k[i].defines[j].name, "FLAT_GROUP");
        /* warp specialisation (asked for, or the table's row) walks the group flat */
        ck_assert_int_eq(flat, plan.k[i].schedule.warp_specialize > 0 && strstr(plan.k[i].kernel, "dkdv") && !bc->block_mask);
        IrFunc *f = bwd_compile(arena, bc, plan.k[i].kernel, plan.k[i].defines, plan.k[i].ndefines);
        bwd_run_kernel(f, r, named, nn, plan.grid[i][0], plan.grid[i][1], bc->variant, bc->block_mask);
    }
}

/* The backward as the runtime runs it, with softmax scale `scale`. */
static void bwd_run(Arena *arena, BwdRun *r, const BwdCase *bc, double scale)
{
    const Case *c = &bc->c;
    bool bf = c->dtype == ATTN_BF16;
    char dbuf[16], bm[16], bn[16];
    snprintf(dbuf, sizeof dbuf, "%d", c->d);
    snprintf(bm, sizeof bm, "%d", c->block_m);
    snprintf(bn, sizeof bn, "%d", c->block_n);
    KilnDefine pre[] = {{"HEAD_DIM", dbuf}, {"BLOCK_M", bm}, {"ZERO_DQ_ACC", bc->deterministic ? "false" : "true"}};
    KilnDefine body[12] = {{"HEAD_DIM", dbuf}, {"BLOCK_M", bm}, {"BLOCK_N", bn}, {"CAUSAL", c->causal ? "true" : "false"}};
    int nmain = 4;
    if (bc->mask_mod) body[nmain++] = (KilnDefine){"mask_mod", bc->mask_mod};
    if (bc->score_mod) body[nmain++] = (KilnDefine){"score_mod", bc->score_mod};
    if (bc->score_mod_grad) body[nmain++] = (KilnDefine){"score_mod_grad", bc->score_mod_grad};
    for (int i = 0; i < bc->nhook_defs; i++) body[nmain++] = bc->hook_defs[i];
    KilnDefine dkdv[12];
    memcpy(dkdv, body, sizeof body);
    int ndkdv = nmain;
    dkdv[ndkdv++] = (KilnDefine){"COMPUTE_DQ", bc->deterministic ? "false" : "true"};
    if (bc->kv_start) body[nmain++] = (KilnDefine){"kv_start", bc->kv_start};

    NamedArg named[96];
    int nn = bwd_named_args(r, bc, scale, named);
    if (bc->plan_sm) {
        bwd_run_plan(arena, r, bc, named, nn);
        return;
    }
    int gq = (c->sq + c->block_m - 1) / c->block_m, gk = (c->sk + c->block_n - 1) / c->block_n;
    IrFunc *f = bwd_compile(arena, bc, bf ? "attn_bwd_pre_bf16" : "attn_bwd_pre_f16", pre, 3);
    bwd_run_kernel(f, r, named, nn, gq, c->batch * c->hq, bc->variant, NULL);
    f = bwd_compile(arena, bc, bf ? "attn_bwd_dkdv_bf16" : "attn_bwd_dkdv_f16", dkdv, ndkdv);
    bwd_run_kernel(f, r, named, nn, gk, c->batch * c->hkv, bc->variant, NULL);
    if (bc->deterministic) {
        f = bwd_compile(arena, bc, bf ? "attn_bwd_dq_bf16" : "attn_bwd_dq_f16", body, nmain);
    } else {
        KilnDefine cvt[] = {{"HEAD_DIM", dbuf}, {"BLOCK_M", bm}};
        f = bwd_compile(arena, bc, bf ? "attn_bwd_dq_cvt_bf16" : "attn_bwd_dq_cvt_f16", cvt, 2);
    }
    bwd_run_kernel(f, r, named, nn, gq, c->batch * c->hq, bc->variant, NULL);
}

typedef struct BwdVerdict {
    double err[3], plain[3], bound[3];   /* dQ, dK, dV */
    int64_t nonfinite, empty_bad;
} BwdVerdict;

static BwdVerdict bwd_judge(const BwdRun *r)
{
    const AttnProblem *p = &r->f.p;
    int D = p->head_dim;
    size_t nq = (size_t)p->batch * p->heads_q * p->seqlen_q * D, nkv = (size_t)p->batch * p->heads_kv * p->seqlen_k * D;
    double *ref = malloc(sizeof(double) * (nq + 2 * nkv) + 8), *pl = malloc(sizeof(double) * (nq + 2 * nkv) + 8);
    attn_ref_bwd(p, r->f.q, r->f.k, r->f.v, r->dout, ref, ref + nq, ref + nq + nkv);
    attn_ref_bwd_torchlike(p, r->f.q, r->f.k, r->f.v, r->dout, pl, pl + nq, pl + nq + nkv);
    BwdVerdict v = {0};
    const void *x[3] = {r->dq, r->dk, r->dv};
    const int64_t *st[3] = {p->q_stride, p->k_stride, p->v_stride};
    const double *rr[3] = {ref, ref + nq, ref + nq + nkv}, *pp[3] = {pl, pl + nq, pl + nq + nkv};
    for (int t = 0; t < 3; t++) {
        int nh = t ? p->heads_kv : p->heads_q, ns = t ? p->seqlen_k : p->seqlen_q;
        v.err[t] = attn_grad_max_err(p->dtype, x[t], st[t], p->batch, nh, ns, D, rr[t], &v.nonfinite);
        v.plain[t] = attn_dense_max_diff(pp[t], rr[t], t ? nkv : nq);
        v.bound[t] = 2 * v.plain[t] + 1e-5;
    }
    /* rows that see no key: dQ exactly 0 */
    for (int b = 0; b < p->batch; b++)
        for (int h = 0; h < p->heads_q; h++)
            for (int i = 0; i < p->seqlen_q; i++)
                for (int d = 0; attn_row_empty(p, b, h, i) && d < D; d++)
                    v.empty_bad += attn_get(p->dtype, r->dq, (size_t)(b * p->q_stride[0] + h * p->q_stride[1] +
                                                                        i * p->q_stride[2] + d)) != 0.0;
    free(ref);
    free(pl);
    return v;
}

static inline void bwd_check(const BwdCase *bc, uint64_t seed)
{
    Arena arena;
    arena_init(&arena);
    BwdRun r;
    bwd_setup(&r, bc, seed);
    bwd_run(&arena, &r, bc, r.f.p.scale);
    BwdVerdict v = bwd_judge(&r);
    static const char *nm[3] = {"dQ", "dK", "dV"};
    if (getenv("ATTN_VERBOSE"))
        fprintf(stderr, "%-44s dQ %.3g (plain %.3g)  dK %.3g (%.3g)  dV %.3g (%.3g)\n", bc->c.what, v.err[0],
                v.plain[0], v.err[1], v.plain[1], v.err[2], v.plain[2]);
    ck_assert_msg(v.nonfinite == 0, "%s: %lld non-finite gradient elements", bc->c.what, (long long)v.nonfinite);
    for (int t = 0; t < 3; t++)
        ck_assert_msg(v.err[t] <= v.bound[t], "%s: max |%s - ref| = %.3g > bound %.3g (plain: %.3g)", bc->c.what,
                      nm[t], v.err[t], v.bound[t], v.plain[t]);
    ck_assert_msg(v.empty_bad == 0, "%s: %lld dQ elements of rows that see no key are not 0", bc->c.what,
                  (long long)v.empty_bad);
    bwd_teardown(&r);
    arena_free(&arena);
}

#endif
