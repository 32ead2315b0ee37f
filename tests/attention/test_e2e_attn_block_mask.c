/* test_e2e_attn_block_mask.c — block masks (lang/lib/block_mask.tile, KilnBlockMask) on the
 * CPU interpreter, through the public calls kiln_attention_block_mask_create_cpu and
 * kiln_attention_fwd_cpu (the same validation, compile requests and argument binding as
 * the device calls).
 *
 * 1. Classification, exhaustively: for each case every (mask row, query block, key block)
 *    class is recomputed from the float64 reference's mask (tools/attn_ref.c's
 *    attn_visible: bounds, causal, the variant's mask_mod) evaluated on every element, and
 *    the lists (full and partial, per query block and transposed per key block) must be
 *    exactly the ascending lists of those classes. Variants: none (causal only), causal,
 *    sliding window (kv_start skips), document ids (a tensor, per-batch mask), prefix-LM,
 *    and a mask of our own that depends on the head and the batch (per-head / per-batch
 *    rows); ragged lengths that are no multiple of the blocks, seqlen_q != seqlen_k, masks
 *    broadcast over batch and heads (B / H = None) and stored per row. The buffer is
 *    poisoned (0xFF) first: a count or class not written is caught.
 * 2. The forward with the block mask against float64 (FlashAttention's rule: |O - ref| <=
 *    2 |O_plain - ref| + 1e-5, LSE 1e-4 relative, empty rows O = 0 / LSE = -inf) and against
 *    the same forward without the mask (same variant): random inputs in NaN-filled buffers,
 *    poisoned outputs, kernel tiles smaller than the mask's blocks (sub-blocks).
 * 3. The forward obeys the lists: a mask made for one variant and used with another shows
 *    that empty blocks are skipped, full blocks run with no mask_mod and partial blocks with
 *    the call's (the reference then sees exactly that).
 * 4. Validation: every bad field is named, before any device call.
 * 5. The forward's block-mask kernel keeps its K/V loads cp.async-pipelined through the
 *    list indirection (pipeline.stages on both key loops of the GPU IR).
 */
#include "attn_harness.h"

#include "kiln.h"
#include "jit_internal.h"
#include "variant_refs.h"
#include "block_mask_check.h"
#include "tests/ptx_util.h"

#include <stdlib.h>

#define V(name) "lang/lib/variants/" name ".tile"
static const BmCase k_cases[] = {
    {"causal flag only, sq > sk, broadcast", NULL, NULL, {0}, ATTN_F16, 2, 2, 1, 70, 50, 32, 1, 16, 32, 1, 1, 16, 16},
    {"causal variant 32x16 sq < sk", V("causal"), m_causal, {0}, ATTN_BF16, 1, 2, 2, 45, 77, 64, 0, 32, 16, 1, 1,
     16, 16},
    {"window 9/3 16x16", V("sliding_window"), m_window, {.left = 9, .right = 3}, ATTN_F16, 1, 2, 1, 100, 100, 32, 0,
     16, 16, 1, 1, 16, 16},
    {"window 20/0 causal 32x32 tiles 16", V("sliding_window"), m_window, {.left = 20, .right = 0}, ATTN_F16, 1, 1, 1,
     130, 130, 64, 1, 32, 32, 1, 1, 16, 16},
    {"document per batch 16x32", V("document"), m_document, {0}, ATTN_F16, 2, 2, 2, 61, 61, 64, 0, 16, 32, 2, 1, 16,
     16},
    {"document causal 32x32 tiles 16x32", V("document"), m_document, {0}, ATTN_BF16, 1, 1, 1, 77, 77, 32, 1, 32, 32,
     1, 1, 16, 32},
    {"prefix_lm 23 16x16", V("prefix_lm"), m_prefix, {.prefix = 23}, ATTN_F16, 1, 2, 2, 60, 60, 64, 0, 16, 16, 1, 1,
     16, 16},
    {"mixed per head, GQA", "mixed", m_mixed, {0}, ATTN_F16, 1, 4, 2, 70, 90, 32, 0, 16, 16, 1, 4, 16, 16},
    {"mixed per batch and head 32x16", "mixed", m_mixed, {0}, ATTN_BF16, 2, 2, 1, 66, 58, 64, 0, 32, 16, 2, 2, 16,
     16},
};

/* ---- making a case's call ---- */

typedef struct Call {
    Run r;
    Inputs in;
    KilnAttentionVariant var;
    KilnAttentionParams p;
    KilnBlockMask m;
    int32_t *buf;
    size_t bytes;
} Call;

static Case case_of(const BmCase *c)
{
    return (Case){c->what, c->dt, c->batch, c->hq, c->hkv, c->sq, c->sk, c->d, c->causal, ATTN_BSHD, 0,
                  c->block_m, c->block_n, 0};
}

/* The variant `name` with its arguments (in *in), or none. */
static const KilnAttentionVariant *variant_of(const char *name, const BmCase *c, Inputs *in,
                                              KilnAttentionVariant *var)
{
    if (!name) return NULL;
    if (!strcmp(name, "mixed")) {
        bm_mixed_inputs(in, 20, 13);
        *var = (KilnAttentionVariant){.source = k_mixed_src, .path = "mixed.tile", .args = in->args,
                                      .nargs = in->nargs};
        return var;
    }
    make_inputs_for(&(VarSpec){name, NULL, c->mask, c->ref}, c->batch, c->hq, c->sq > c->sk ? c->sq : c->sk, in);
    *var = (KilnAttentionVariant){.path = name, .args = in->args, .nargs = in->nargs};
    return var;
}

static void call_init(Call *k, const BmCase *c, const char *mask_variant, uint64_t seed)
{
    memset(k, 0, sizeof *k);
    Case cs = case_of(c);
    setup(&k->r, &cs, seed);
    k->r.p.scale = 1.0 / sqrt((double)c->d);
    KilnAttentionParams p = {.dtype = c->dt == ATTN_F16 ? KILN_F16 : KILN_BF16, .batch = c->batch, .heads_q = c->hq,
                             .heads_kv = c->hkv, .seqlen_q = c->sq, .seqlen_k = c->sk, .head_dim = c->d,
                             .q = (uintptr_t)k->r.q, .k = (uintptr_t)k->r.k, .v = (uintptr_t)k->r.v,
                             .o = (uintptr_t)k->r.o, .lse = (uintptr_t)k->r.lse, .causal = c->causal,
                             .block_m = c->block_m, .block_n = c->block_n};
    memcpy(p.q_stride, k->r.p.q_stride, sizeof p.q_stride);
    memcpy(p.k_stride, k->r.p.k_stride, sizeof p.k_stride);
    memcpy(p.v_stride, k->r.p.v_stride, sizeof p.v_stride);
    memcpy(p.o_stride, k->r.p.o_stride, sizeof p.o_stride);
    run_host_sizes(&k->r, &p);
    p.variant = variant_of(mask_variant, c, &k->in, &k->var);
    k->p = p;
    k->m = (KilnBlockMask){.block_q = c->bq, .block_kv = c->bk, .batch = c->mb, .heads = c->mh};
    k->bytes = kiln_attention_block_mask_size(&k->p, &k->m);
    ck_assert_msg(k->bytes > 0, "%s: size: %s", c->what, kiln_last_error());
    k->buf = aligned_alloc(16, (k->bytes + 15) / 16 * 16);
    memset(k->buf, 0xFF, k->bytes);   /* poison: -1 is never a count, class or index */
    k->m.data = (uintptr_t)k->buf;
    k->m.bytes = k->bytes;
}

static void call_free(Call *k)
{
    teardown(&k->r);
    free(k->buf);
}

static void create(Call *k, const BmCase *c)
{
    KilnStatus st = kiln_attention_block_mask_create_cpu(&k->p, &k->m);
    ck_assert_msg(st == KILN_OK, "%s: create: %s", c->what, kiln_last_error());
}

/* ---- 1. classification ---- */

START_TEST(classification_is_exact)
{
    const BmCase *c = &k_cases[_i];
    Call k;
    call_init(&k, c, c->variant, 10 + (uint64_t)_i);
    create(&k, c);
    ck_assert_int_eq(k.m.num_q_blocks, (c->sq + c->bq - 1) / c->bq);
    ck_assert_int_eq(k.m.num_kv_blocks, (c->sk + c->bk - 1) / c->bk);
    ck_assert_int_eq(k.m.seqlen_q, c->sq);
    ck_assert_int_eq(k.m.seqlen_k, c->sk);
    ck_assert_int_eq(k.m.causal, c->causal);
    AttnProblem pr = k.r.p;
    pr.mask_mod = c->mask;
    BmReport r = bm_check(&pr, &k.m, k.buf);
    ck_assert_msg(r.errors == 0, "%s: %d errors, first: %s", c->what, r.errors, r.first);
    /* every case mixes classes: partial blocks and full or empty ones */
    ck_assert_msg(r.seen[1] > 0 && r.seen[0] + r.seen[2] > 0, "%s: classes %d/%d/%d", c->what, r.seen[0], r.seen[1],
                  r.seen[2]);
    call_free(&k);
}
END_TEST

/* ---- 2. the forward with the mask ---- */

static void assert_rule(const BmCase *c, const Verdict *v, const char *how)
{
    if (getenv("ATTN_VERBOSE"))
        fprintf(stderr, "%-40s %-10s err %.3g bound %.3g lse %.3g\n", c->what, how, v->e.o_max_abs, v->bound,
                v->e.lse_max_rel);
    ck_assert_msg(v->e.nonfinite == 0, "%s (%s): %lld non-finite outputs", c->what, how, (long long)v->e.nonfinite);
    ck_assert_msg(v->e.o_max_abs <= v->bound, "%s (%s): max |O - ref| = %.3g > %.3g at b%d h%d i%d d%d", c->what, how,
                  v->e.o_max_abs, v->bound, v->e.worst_b, v->e.worst_h, v->e.worst_i, v->e.worst_d);
    ck_assert_msg(v->e.lse_max_rel <= 1e-4, "%s (%s): LSE relative error %.3g", c->what, how, v->e.lse_max_rel);
    ck_assert_msg(v->empty_bad == 0, "%s (%s): %lld elements of empty rows are not O = 0 / LSE = -inf", c->what, how,
                  (long long)v->empty_bad);
}

START_TEST(forward_matches_reference)
{
    const BmCase *c = &k_cases[_i];
    Call k;
    call_init(&k, c, c->variant, 100 + (uint64_t)_i);
    create(&k, c);
    k.p.block_mask = &k.m;
    KilnStatus st = kiln_attention_fwd_cpu(&k.p);
    ck_assert_msg(st == KILN_OK, "%s: forward: %s", c->what, kiln_last_error());
    k.r.p.mask_mod = c->mask;
    Verdict with = judge(&k.r);
    assert_rule(c, &with, "block mask");
    /* the same call without the mask: the same attention (blocks in another order) */
    size_t es = attn_dtype_size(c->dt);
    void *o_bm = malloc(k.r.nq * es);
    float *lse_bm = malloc(k.r.nlse * sizeof(float) + 4);
    memcpy(o_bm, k.r.o, k.r.nq * es);
    memcpy(lse_bm, k.r.lse, k.r.nlse * sizeof(float));
    memset(k.r.o, 0xFF, k.r.nq * es);
    memset(k.r.lse, 0xFF, k.r.nlse * sizeof(float));
    k.p.block_mask = NULL;
    st = kiln_attention_fwd_cpu(&k.p);
    ck_assert_msg(st == KILN_OK, "%s: forward without the mask: %s", c->what, kiln_last_error());
    Verdict without = judge(&k.r);
    assert_rule(c, &without, "no mask");
    const AttnProblem *pr = &k.r.p;
    double od = 0, ld = 0;
    for (int b = 0; b < c->batch; b++)
        for (int h = 0; h < c->hq; h++)
            for (int i = 0; i < c->sq; i++) {
                size_t row = ((size_t)b * c->hq + h) * c->sq + i;
                float l0 = lse_bm[row], l1 = k.r.lse[row];
                if (!(isinf(l0) && isinf(l1) && l0 == l1)) ld = fmax(ld, fabs(l0 - l1) / fmax(1.0, fabs(l1)));
                for (int x = 0; x < c->d; x++) {
                    size_t e = (size_t)(b * pr->o_stride[0] + h * pr->o_stride[1] + i * pr->o_stride[2] + x);
                    od = fmax(od, fabs(attn_get(c->dt, o_bm, e) - attn_get(c->dt, k.r.o, e)));
                }
            }
    ck_assert_msg(!isnan(od) && od <= with.bound, "%s: |O_mask - O_nomask| = %.3g > %.3g", c->what, od, with.bound);
    ck_assert_msg(!isnan(ld) && ld <= 1e-5, "%s: LSE differs by %.3g (relative)", c->what, ld);
    free(o_bm);
    free(lse_bm);
    call_free(&k);
}
END_TEST

/* ---- 3. the forward does what the lists say ---- */

/* A mask made with `mask_variant` used by a forward with `fwd_variant`. */
static void check_lists_drive(const BmCase *c, const char *mask_variant, const char *fwd_variant,
                              int (*fwd_mask)(int, int, int, int, const void *))
{
    Call k;
    call_init(&k, c, mask_variant, 7);
    create(&k, c);
    Inputs in2;
    KilnAttentionVariant var2;
    k.p.variant = variant_of(fwd_variant, c, &in2, &var2);
    k.p.block_mask = &k.m;
    KilnStatus st = kiln_attention_fwd_cpu(&k.p);
    ck_assert_msg(st == KILN_OK, "%s: forward: %s", c->what, kiln_last_error());
    BmByClass cr = {&k.m, bm_array(&k.m, k.buf, KILN_BM_CLASS), fwd_mask};
    k.r.p.mask_mod = bm_by_class;
    k.r.p.mod_ctx = &cr;
    Verdict v = judge(&k.r);
    assert_rule(c, &v, "lists");
    call_free(&k);
}

START_TEST(forward_follows_the_lists)
{
    /* a window's mask with no variant in the forward: partial blocks run unmasked, empty
     * ones are skipped (the reference sees whole blocks) */
    const BmCase *w = &k_cases[2];
    check_lists_drive(w, w->variant, NULL, NULL);
    /* a mask of no variant (every in-bounds block full, ragged ones partial) with the window
     * in the forward: full blocks never evaluate mask_mod, partial ones do */
    check_lists_drive(w, NULL, w->variant, m_window);
}
END_TEST

/* ---- 4. validation ---- */

static void expect(KilnStatus st, KilnStatus want, const char *needle)
{
    ck_assert_msg(st == want, "status %s, expected %s: %s", kiln_status_name(st), kiln_status_name(want),
                  kiln_last_error());
    ck_assert_msg(strstr(kiln_last_error(), needle), "no '%s' in: %s", needle, kiln_last_error());
}

START_TEST(bad_masks_are_named)
{
    const BmCase *c = &k_cases[4];   /* document, per-batch mask, batch 2 */
    Call k;
    call_init(&k, c, c->variant, 3);
    KilnDevice *fake = (KilnDevice *)(uintptr_t)0x18;   /* faults if the call touched it */
    const char *api = "kiln_attention_block_mask_create";
    KilnBlockMask m = k.m;
    m.block_q = 48;
    expect(kiln_attention_block_mask_create(fake, &k.p, &m, NULL), KILN_ERR_USAGE,
           "block_mask.block_q 48 must be 0 (128) or a power of two in [16, 1024]");
    ck_assert_int_eq(kiln_attention_block_mask_size(&k.p, &m), 0);
    m = k.m;
    m.block_kv = 2048;
    expect(kiln_attention_block_mask_create_cpu(&k.p, &m), KILN_ERR_USAGE, "block_mask.block_kv 2048");
    m = k.m;
    m.batch = 3;
    expect(kiln_attention_block_mask_create(fake, &k.p, &m, NULL), KILN_ERR_USAGE,
           "block_mask.batch 3 must be 1 (the same mask for every sequence) or the call's batch 2");
    m = k.m;
    m.heads = 0;
    expect(kiln_attention_block_mask_create(fake, &k.p, &m, NULL), KILN_ERR_USAGE, "block_mask.heads 0 must be 1");
    m = k.m;
    m.bytes = k.bytes - 4;
    expect(kiln_attention_block_mask_create(fake, &k.p, &m, NULL), KILN_ERR_USAGE, "block_mask.bytes is");
    m = k.m;
    m.data = 0;
    expect(kiln_attention_block_mask_create(fake, &k.p, &m, NULL), KILN_ERR_USAGE, "block_mask.data is a null pointer");
    m.data = k.m.data + 4;
    expect(kiln_attention_block_mask_create(fake, &k.p, &m, NULL), KILN_ERR_USAGE, "is not 16-byte aligned");
    ck_assert_msg(strstr(kiln_last_error(), api) == kiln_last_error(), "%s", kiln_last_error());
    KilnAttentionParams vl = k.p;
    vl.cu_seqlens_q = vl.cu_seqlens_k = 0x1000;
    vl.total_q = vl.total_k = 10;
    expect(kiln_attention_block_mask_create(fake, &vl, &k.m, NULL), KILN_ERR_UNSUPPORTED, "packed (varlen)");
    expect(kiln_attention_block_mask_create(NULL, &k.p, &k.m, NULL), KILN_ERR_USAGE,
           "kiln_attention_block_mask_create: dev is NULL");
    /* the forward checks the mask against its call */
    create(&k, c);
    KilnAttentionParams p = k.p;
    p.block_mask = &k.m;
    expect(kiln_attention_check(&p), KILN_OK, "");
    p.seqlen_k = c->sk - 1;
    expect(kiln_attention_fwd(fake, &p, NULL), KILN_ERR_USAGE, "block_mask was made for seqlen_q 61, seqlen_k 61");
    p = k.p;
    p.block_mask = &k.m;
    p.causal = 1;
    expect(kiln_attention_fwd(fake, &p, NULL), KILN_ERR_USAGE,
           "block_mask was made without the causal mask, the call is causal");
    p.causal = 0;
    p.block_m = 32;   /* the mask's 16-row blocks */
    expect(kiln_attention_check(&p), KILN_ERR_USAGE, "block_m x block_n (32 x 16) must divide the block mask's blocks "
                                                     "(16 x 32)");
    p.block_m = 16;
    m = k.m;
    m.offset[KILN_BM_KV_IDX] += 16;
    p.block_mask = &m;
    expect(kiln_attention_check(&p), KILN_ERR_USAGE, "do not agree (make it with kiln_attention_block_mask_create)");
    m = k.m;
    m.batch = 1;
    expect(kiln_attention_check(&p), KILN_ERR_USAGE, "do not agree");
    /* the documented size: nine i32 arrays, each rounded up to 16 bytes */
    int G = c->mb * c->mh, nq = k.m.num_q_blocks, nk = k.m.num_kv_blocks;
    size_t e[9] = {G * nq, G * nq * nk, G * nq, G * nq * nk, G * nk, G * nk * nq, G * nk, G * nk * nq, G * nq * nk};
    size_t want = 0;
    for (int i = 0; i < 9; i++) {
        ck_assert_uint_eq(k.m.offset[i], want);
        want += (e[i] + 3) / 4 * 16;
    }
    ck_assert_uint_eq(k.bytes, want);
    call_free(&k);
}
END_TEST

/* ---- 5. pipelining through the lists ---- */

START_TEST(bm_kernel_loads_are_pipelined)
{
    KilnDefine defs[] = {{"HEAD_DIM", "128"}, {"BLOCK_M", "128"}, {"BLOCK_N", "64"}, {"CAUSAL", "true"},
                         {"PLAIN_SCORES", "true"}, {"MASK_BLOCK_M", "128"}, {"MASK_BLOCK_N", "128"}};
    KilnParamHint h[PU_ATTN_NHINTS];
    KilnCompileOptions o;
    pu_attention_options(&o, defs, 7, "sm_90a", 4, 2, KILN_EMIT_GPU_IR, h);
    o.kernel = "attn_fwd_bm_f16";
    KilnCompileResult r;
    const char *src = kiln_lib_source("lang/lib/attention_fwd.tile");
    ck_assert_ptr_nonnull(src);
    KilnStatus st = kiln_compile("attention_fwd.tile", src, &o, &r);
    ck_assert_msg(st == KILN_OK, "%s", r.diagnostics ? r.diagnostics : "");
    /* both key loops (full and partial blocks), and their K and V loads */
    ck_assert_int_eq(pu_count(r.output, "pipeline.stages = 2"), 2);
    ck_assert_int_eq(pu_count(r.output, "pipeline.slot_bytes"), 4);
    kiln_compile_result_free(&r);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("attention_block_mask");
    TCase *tc = tcase_create("block_mask");
    tcase_set_timeout(tc, 900);
    int n = (int)(sizeof k_cases / sizeof k_cases[0]);
    tcase_add_loop_test(tc, classification_is_exact, 0, n);
    tcase_add_loop_test(tc, forward_matches_reference, 0, n);
    tcase_add_test(tc, forward_follows_the_lists);
    tcase_add_test(tc, bad_masks_are_named);
    tcase_add_test(tc, bm_kernel_loads_are_pipelined);
    suite_add_tcase(s, tc);
    return s;
}

TU_MAIN(suite)
