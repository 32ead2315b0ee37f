/* test_e2e_attn_bwd_block_mask.c — the backward with a block mask (KilnAttentionParams.block_mask
 * through KilnAttentionBwdParams.fwd) on the CPU interpreter: the runtime's own plan
 * (rt_attn_bwd_plan: attn_bwd_dkdv_bm_* and attn_bwd_dq_bm_*, tiles fitted to the mask's
 * blocks) with every argument bound by the runtime's rt_attn_bwd_arg / rt_attn_bm_arg.
 *
 * 1. Gradients against float64 (FlashAttention's rule, attn_bwd_harness.h: |g - ref| <=
 *    2 |g_plain - ref| + 1e-5, rows that see no key dQ = 0, no non-finite element) and against
 *    the backward of the same variant without the mask (the same plan's plain kernels):
 *    random inputs, NaN-filled outputs, ragged lengths no multiple of the blocks, seqlen_q !=
 *    seqlen_k, GQA with a per-head mask (the dK/dV program walks one mask row per query head
 *    of its group), per-batch masks, tiles smaller than the mask's blocks, both dQ paths
 *    (the atomic dQ in the dK/dV kernel, and the dQ pass).
 * 2. The plan picks the _bm kernels and fits the table's tiles to the mask; the backward's
 *    check refuses a mask made for another call, naming the field.
 */
#include "attn_bwd_harness.h"

#include "kiln.h"
#include "variant_refs.h"
#include "block_mask_check.h"

#include <stdlib.h>

typedef struct BbCase {
    BmCase m;                 /* block_m x block_n 0 x 0: the runtime's tiles (fitted to the mask) */
    int sm, deterministic;    /* the plan's device, and the dQ path */
} BbCase;

#define V(name) "lang/lib/variants/" name ".tile"
static const BbCase k_cases[] = {
    {{"causal flag, sq > sk, atomic dQ", NULL, NULL, {0}, ATTN_F16, 2, 2, 1, 70, 50, 32, 1, 16, 32, 1, 1, 16, 16}, 80,
     0},
    {{"causal flag 16x16, dQ pass", NULL, NULL, {0}, ATTN_F16, 1, 2, 2, 100, 100, 32, 1, 16, 16, 1, 1, 16, 16}, 90, 1},
    {{"causal flag 32x32 tiles 16, atomic dQ", NULL, NULL, {0}, ATTN_BF16, 2, 2, 1, 90, 100, 64, 1, 32, 32, 1, 1, 16,
     16}, 80, 0},
    {{"causal variant 32x16 sq < sk, table tiles", V("causal"), m_causal, {0}, ATTN_BF16, 1, 2, 2, 45, 77, 64, 0, 32,
     16, 1, 1, 0, 0}, 90, 0},
    {{"window 9/3 16x16 deterministic", V("sliding_window"), m_window, {.left = 9, .right = 3}, ATTN_F16, 1, 2, 1, 100,
     100, 32, 0, 16, 16, 1, 1, 16, 16}, 80, 1},
    {{"window 20/0 causal 32x32 tiles 16", V("sliding_window"), m_window, {.left = 20, .right = 0}, ATTN_F16, 1, 1, 1,
     130, 130, 64, 1, 32, 32, 1, 1, 16, 16}, 80, 0},
    {{"document per batch 16x32 tiles 16", V("document"), m_document, {0}, ATTN_F16, 2, 2, 2, 61, 61, 64, 0, 16, 32, 2,
     1, 16, 16}, 90, 1},
    {{"document causal 32x32 table tiles", V("document"), m_document, {0}, ATTN_BF16, 1, 1, 1, 77, 77, 32, 1, 32, 32,
     1, 1, 0, 0}, 80, 1},
    {{"prefix_lm 23 16x16 atomic", V("prefix_lm"), m_prefix, {.prefix = 23}, ATTN_F16, 1, 2, 2, 60, 60, 64, 0, 16, 16,
     1, 1, 16, 16}, 90, 0},
    {{"mixed per head, GQA", "mixed", m_mixed, {0}, ATTN_F16, 1, 4, 2, 70, 90, 32, 0, 16, 16, 1, 4, 16, 16}, 80, 1},
    {{"mixed per batch and head 32x16, GQA atomic", "mixed", m_mixed, {0}, ATTN_BF16, 2, 2, 1, 66, 58, 64, 0, 32, 16,
     2, 2, 16, 16}, 80, 0},
};

typedef struct BbCall {
    Inputs in;
    KilnAttentionVariant var;
    const KilnAttentionVariant *vp;
    KilnAttentionParams p;    /* shape, causal and variant: what the mask is made for */
    KilnBlockMask m;
    int32_t *buf;
} BbCall;

static Case case_of(const BbCase *c)
{
    return (Case){c->m.what, c->m.dt, c->m.batch, c->m.hq, c->m.hkv, c->m.sq, c->m.sk, c->m.d, c->m.causal, ATTN_BSHD, 0,
                  c->m.block_m, c->m.block_n, 0};
}

/* The case's variant and its block mask (made by the public call into a poisoned buffer). */
static void call_init(BbCall *k, const BbCase *c)
{
    memset(k, 0, sizeof *k);
    if (c->m.variant && !strcmp(c->m.variant, "mixed")) {
        bm_mixed_inputs(&k->in, 20, 13);
        k->var = (KilnAttentionVariant){.source = k_mixed_src, .path = "mixed.tile", .args = k->in.args,
                                        .nargs = k->in.nargs};
        k->vp = &k->var;
    } else if (c->m.variant) {
        make_inputs_for(&(VarSpec){c->m.variant, NULL, c->m.mask, c->m.ref}, c->m.batch, c->m.hq, c->m.sq > c->m.sk ? c->m.sq : c->m.sk,
                        &k->in);
        k->var = (KilnAttentionVariant){.path = c->m.variant, .args = k->in.args, .nargs = k->in.nargs};
        k->vp = &k->var;
    }
    k->p = (KilnAttentionParams){.dtype = c->m.dt == ATTN_F16 ? KILN_F16 : KILN_BF16, .batch = c->m.batch,
                                 .heads_q = c->m.hq, .heads_kv = c->m.hkv, .seqlen_q = c->m.sq, .seqlen_k = c->m.sk,
                                 .head_dim = c->m.d, .causal = c->m.causal, .variant = k->vp};
    k->m = (KilnBlockMask){.block_q = c->m.bq, .block_kv = c->m.bk, .batch = c->m.mb, .heads = c->m.mh};
    size_t bytes = kiln_attention_block_mask_size(&k->p, &k->m);
    ck_assert_msg(bytes > 0, "%s: size: %s", c->m.what, kiln_last_error());
    k->buf = aligned_alloc(16, (bytes + 15) / 16 * 16);
    memset(k->buf, 0xFF, bytes);
    k->m.data = (uintptr_t)k->buf;
    k->m.bytes = bytes;
    KilnStatus st = kiln_attention_block_mask_create_cpu(&k->p, &k->m);
    ck_assert_msg(st == KILN_OK, "%s: create: %s", c->m.what, kiln_last_error());
}

static BwdCase bwd_case(const BbCase *c, const BbCall *k, const KilnBlockMask *m)
{
    return (BwdCase){.c = case_of(c), .deterministic = c->deterministic, .ref_mask = c->m.mask, .variant = k->vp,
                     .plan_sm = c->sm, .block_mask = m, .own_tiles = c->m.block_m != 0};
}

/* g (a gradient in the dtype, strides st) as a dense double array. */
static double *dense(AttnDtype t, const void *g, const int64_t st[3], int nb, int nh, int ns, int d)
{
    double *out = malloc(sizeof(double) * (size_t)nb * nh * ns * d + 8);
    size_t at = 0;
    for (int b = 0; b < nb; b++)
        for (int h = 0; h < nh; h++)
            for (int i = 0; i < ns; i++)
                for (int x = 0; x < d; x++)
                    out[at++] = attn_get(t, g, (size_t)(b * st[0] + h * st[1] + i * st[2] + x));
    return out;
}

/* ---- 1. gradients ---- */

START_TEST(backward_with_mask_matches_reference_and_plain)
{
    const BbCase *c = &k_cases[_i];
    BbCall k;
    call_init(&k, c);
    Arena arena;
    arena_init(&arena);
    uint64_t seed = 700 + (uint64_t)_i * 11;
    BwdCase with = bwd_case(c, &k, &k.m), without = bwd_case(c, &k, NULL);
    BwdRun r, plain;
    bwd_setup(&r, &with, seed);
    bwd_run(&arena, &r, &with, r.f.p.scale);
    BwdVerdict v = bwd_judge(&r);
    bwd_setup(&plain, &without, seed);
    bwd_run(&arena, &plain, &without, plain.f.p.scale);
    BwdVerdict vp = bwd_judge(&plain);
    static const char *nm[3] = {"dQ", "dK", "dV"};
    if (getenv("ATTN_VERBOSE"))
        fprintf(stderr, "%-44s dQ %.3g (%.3g)  dK %.3g (%.3g)  dV %.3g (%.3g)\n", c->m.what, v.err[0], v.bound[0],
                v.err[1], v.bound[1], v.err[2], v.bound[2]);
    ck_assert_msg(v.nonfinite == 0, "%s: %lld non-finite gradient elements", c->m.what, (long long)v.nonfinite);
    ck_assert_msg(v.empty_bad == 0, "%s: %lld dQ elements of rows that see no key are not 0", c->m.what,
                  (long long)v.empty_bad);
    const AttnProblem *p = &r.f.p;
    const void *x[3] = {r.dq, r.dk, r.dv}, *y[3] = {plain.dq, plain.dk, plain.dv};
    const int64_t *st[3] = {p->q_stride, p->k_stride, p->v_stride};
    for (int t = 0; t < 3; t++) {
        ck_assert_msg(v.err[t] <= v.bound[t], "%s: max |%s - ref| = %.3g > bound %.3g", c->m.what, nm[t], v.err[t],
                      v.bound[t]);
        /* against the same backward without the mask: both within their bounds of float64 */
        int nh = t ? c->m.hkv : c->m.hq, ns = t ? c->m.sk : c->m.sq;
        double *yd = dense(c->m.dt, y[t], st[t], c->m.batch, nh, ns, c->m.d);
        int64_t nf = 0;
        double diff = attn_grad_max_err(c->m.dt, x[t], st[t], c->m.batch, nh, ns, c->m.d, yd, &nf);
        free(yd);
        ck_assert_msg(nf == 0 && diff <= v.bound[t] + vp.bound[t], "%s: %s with and without the mask differ by %.3g",
                      c->m.what, nm[t], diff);
    }
    bwd_teardown(&r);
    bwd_teardown(&plain);
    arena_free(&arena);
    free(k.buf);
}
END_TEST

/* ---- 2. the plan and the checks ---- */

START_TEST(plan_picks_the_bm_kernels)
{
    const BbCase *c = &k_cases[3];   /* mask 32 x 16, sm_90: the table's 64 x 64 tiles shrink */
    BbCall k;
    call_init(&k, c);
    KilnAttentionBwdParams p = {.fwd = k.p};
    p.fwd.block_mask = &k.m;
    RtAttnBwdPlan plan;
    rt_attn_bwd_plan(90, &p, &plan);
    ck_assert_int_eq(plan.n, 3);
    ck_assert_str_eq(plan.k[1].kernel, "attn_bwd_dkdv_bm_bf16");
    ck_assert_str_eq(plan.k[2].kernel, "attn_bwd_dq_bm_bf16");
    for (int i = 1; i < 3; i++) {
        const RtAttnVariant *v = &plan.k[i];
        int found = 0;
        for (int j = 0; j < v->ndefines; j++) {
            const char *n = v->defines[j].name, *val = v->defines[j].value;
            if (!strcmp(n, "BLOCK_M") || !strcmp(n, "MASK_BLOCK_M")) found += !strcmp(val, "32");
            if (!strcmp(n, "BLOCK_N") || !strcmp(n, "MASK_BLOCK_N")) found += !strcmp(val, "16");
        }
        ck_assert_msg(found == 4, "%s: tiles not fitted to the mask's 32 x 16 blocks", v->kernel);
        ck_assert_int_eq(v->num_warps, 0);   /* the table's warps belonged to its tiles */
    }
    ck_assert_int_eq(plan.grid[1][0], (c->m.sk + 15) / 16);
    ck_assert_int_eq(plan.grid[2][0], (c->m.sq + 31) / 32);
    /* without the mask: the plain kernels */
    p.fwd.block_mask = NULL;
    rt_attn_bwd_plan(90, &p, &plan);
    ck_assert_str_eq(plan.k[1].kernel, "attn_bwd_dkdv_bf16");
    free(k.buf);
}
END_TEST

START_TEST(bwd_check_names_bad_masks)
{
    const BbCase *c = &k_cases[4];   /* mask 16 x 16, seqlen 100 */
    BbCall k;
    call_init(&k, c);
    KilnAttentionBwdParams p = {.fwd = k.p};
    p.fwd.block_mask = &k.m;
    p.fwd.seqlen_k = c->m.sk - 1;
    ck_assert_int_eq(kiln_attention_bwd_check(&p), KILN_ERR_USAGE);
    ck_assert_msg(strstr(kiln_last_error(), "kiln_attention_bwd") &&
                  strstr(kiln_last_error(), "block_mask was made for seqlen_q 100, seqlen_k 100"), "%s",
                  kiln_last_error());
    p.fwd.seqlen_k = c->m.sk;
    p.block_m = 32;
    p.block_n = 16;
    ck_assert_int_eq(kiln_attention_bwd_check(&p), KILN_ERR_USAGE);
    ck_assert_msg(strstr(kiln_last_error(), "must divide the block mask's blocks (16 x 16)"), "%s", kiln_last_error());
    free(k.buf);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("attention_bwd_block_mask");
    TCase *tc = tcase_create("bwd_block_mask");
    tcase_set_timeout(tc, 1200);
    tcase_add_loop_test(tc, backward_with_mask_matches_reference_and_plain, 0,
                        (int)(sizeof k_cases / sizeof k_cases[0]));
    tcase_add_test(tc, plan_picks_the_bm_kernels);
    tcase_add_test(tc, bwd_check_names_bad_masks);
    suite_add_tcase(s, tc);
    return s;
}

TU_MAIN(suite)
