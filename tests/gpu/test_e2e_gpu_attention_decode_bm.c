/* test_e2e_gpu_attention_decode_bm.c — kiln_attention_decode with a block mask
 * (KilnAttentionDecodeParams.block_mask) on the GPU, against float64.
 *
 * For each case the mask of the full problem (seqlen_q = seqlen_k = the cache's capacity)
 * is made on the device by kiln_attention_block_mask_create with the case's variant; then
 * the decode with the mask runs at the automatic split count, 1 split, and 7 splits with
 * each combine (fused, kernel), every result judged by FlashAttention's rule against the
 * float64 reference with the per-element mask at the tokens' positions (|O - ref| <=
 * 2 |O_plain - ref| + 1e-5, LSE 1e-4 relative, tokens that see no key O = 0 / LSE = -inf),
 * and (automatic splits) compared with the same decode without the mask (the mask only skips
 * work: the two agree within the bound plus one rounding step of the storage dtype). Variants: sliding
 * window (causal), document ids (non-causal, per-batch mask), prefix-LM (non-causal), a
 * per-head mask (block_mask_check.h's, GQA packing several heads per tile), the causal flag
 * alone; contiguous and paged caches, 1..16 new tokens, ragged lengths with 0 and 1, masks
 * of 128 x 128 and 64 x 64 blocks. Cache rows past each length and unused pages are NaN,
 * outputs poisoned before every call. One ROW line per case with the warm call's time with
 * and without the mask (automatic splits), and a summary line.
 * Without a GPU: "SKIP: no GPU (...)" and exit 77.
 */
#pragma GCC diagnostic ignored "-Wunused-function"   /* the shared headers' helpers for other tests */
#include "kiln.h"
#include "tests/gpu/gpu_util.h"
#include "tools/attn_ref.c"   /* the reference is a tool, not a library: compiled in here */
#include "tests/attention/variant_refs.h"
#include "tests/attention/block_mask_check.h"

#include <stdio.h>
#include <stdlib.h>

#define MAXB 4

static KilnDevice *g_dev;
static KilnDeviceInfo g_info;

typedef struct GCase {
    const char *what;
    VarSpec v;                /* v.variant NULL: no variant; "mixed": block_mask_check.h's */
    AttnDtype dt;
    int batch, hq, hkv, tokens, d, causal, page;   /* page 0: contiguous */
    int lens[MAXB];
    int bq, bk, mb, mh;       /* the mask's blocks, batch and heads */
} GCase;

#define V(name) "lang/lib/variants/" name ".tile"
static const GCase k_cases[] = {
    {"window 255", {V("sliding_window"), NULL, m_window, {.left = 255, .right = 0}}, ATTN_F16, 4, 8, 2, 1, 128, 1, 0,
     {0, 1, 3000, 4096}, 128, 128, 1, 1},
    {"window 100 paged", {V("sliding_window"), NULL, m_window, {.left = 100, .right = 0}}, ATTN_BF16, 4, 8, 1, 4, 64,
     1, 64, {4096, 77, 1, 2900}, 64, 64, 1, 1},
    {"document", {V("document"), NULL, m_document, {0}}, ATTN_F16, 2, 4, 4, 2, 128, 0, 0, {2000, 700}, 128, 128, 2,
     1},
    {"prefix_lm 300 paged", {V("prefix_lm"), NULL, m_prefix, {.prefix = 300}}, ATTN_F16, 4, 4, 4, 16, 128, 0, 16,
     {2500, 17, 0, 1200}, 128, 128, 1, 1},
    {"mixed per head", {"mixed", NULL, m_mixed, {0}}, ATTN_F16, 2, 8, 2, 3, 128, 1, 0, {1500, 900}, 64, 64, 2, 8},
    {"causal flag paged", {NULL, NULL, NULL, {0}}, ATTN_BF16, 4, 8, 1, 16, 128, 1, 256, {4096, 5, 2000, 0}, 64, 64,
     1, 1},
};

static KilnDevPtr up(const void *host, size_t bytes) { return gu_upload(g_dev, host, bytes); }

typedef struct Data {
    AttnProblem p;            /* seqlen_k: the cache's capacity */
    void *q, *k, *v, *o, *o_plain;
    float *lse;
    AttnPaged pg;
    size_t nq, nkv, nk, nl;   /* elements of Q/O, of the contiguous cache, of the cache used; LSE bytes */
    KilnDevPtr dq, dk, dv, d_o, dlse, dlens, dbt;
} Data;

static int max_len(const GCase *c)
{
    int m = 1;
    for (int b = 0; b < c->batch; b++) m = c->lens[b] > m ? c->lens[b] : m;
    return m;
}

static void setup(Data *r, const GCase *c, uint64_t seed)
{
    memset(r, 0, sizeof *r);
    AttnProblem *p = &r->p;
    *p = (AttnProblem){.batch = c->batch, .heads_q = c->hq, .heads_kv = c->hkv, .seqlen_q = c->tokens,
                       .seqlen_k = max_len(c), .head_dim = c->d, .causal = c->causal,
                       .scale = 1.0 / sqrt((double)c->d), .dtype = c->dt, .mask_mod = c->v.mask};
    attn_set_strides(p, ATTN_BSHD);
    size_t es = attn_dtype_size(c->dt);
    r->nq = attn_numel_q(p), r->nkv = attn_numel_kv(p), r->nl = (size_t)c->batch * c->hq * c->tokens * 4;
    r->q = malloc(r->nq * es), r->o = malloc(r->nq * es), r->o_plain = malloc(r->nq * es);
    r->k = malloc(r->nkv * es), r->v = malloc(r->nkv * es), r->lse = malloc(r->nl);
    memset(r->k, 0xFF, r->nkv * es);
    memset(r->v, 0xFF, r->nkv * es);
    attn_fill_strided(c->dt, r->q, p->q_stride, c->batch, c->hq, c->tokens, c->d, seed);
    for (int b = 0; b < c->batch; b++) {   /* only each sequence's keys: the rest stays NaN */
        attn_fill_strided(c->dt, (char *)r->k + (size_t)(b * p->k_stride[0]) * es, p->k_stride, 1, c->hkv,
                          c->lens[b], c->d, seed + 1 + 2 * b);
        attn_fill_strided(c->dt, (char *)r->v + (size_t)(b * p->v_stride[0]) * es, p->v_stride, 1, c->hkv,
                          c->lens[b], c->d, seed + 2 + 2 * b);
    }
    if (c->page) attn_paged_make(p, c->lens, c->page, r->k, r->v, seed + 99, &r->pg);
    r->nk = c->page ? r->pg.numel : r->nkv;
    r->dq = up(r->q, r->nq * es);
    r->dk = up(c->page ? r->pg.k : r->k, r->nk * es);
    r->dv = up(c->page ? r->pg.v : r->v, r->nk * es);
    r->d_o = up(NULL, r->nq * es);
    r->dlse = up(NULL, r->nl);
    r->dlens = up(c->lens, sizeof(int) * c->batch);
    if (c->page) r->dbt = up(r->pg.block_table, sizeof(int32_t) * c->batch * r->pg.max_pages);
}

static void teardown(Data *r, const GCase *c)
{
    KilnDevPtr all[] = {r->dq, r->dk, r->dv, r->d_o, r->dlse, r->dlens, r->dbt};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) kiln_free(g_dev, all[i]);
    if (c->page) attn_paged_free(&r->pg);
    free(r->q), free(r->k), free(r->v), free(r->o), free(r->o_plain), free(r->lse);
}

static KilnAttentionDecodeParams params(const GCase *c, const Data *r, const KilnAttentionVariant *var, int splits)
{
    KilnAttentionDecodeParams a = {.dtype = c->dt == ATTN_BF16 ? KILN_BF16 : KILN_F16, .batch = c->batch,
                                   .heads_q = c->hq, .heads_kv = c->hkv, .seqlen_q = c->tokens, .head_dim = c->d,
                                   .q = r->dq, .o = r->d_o, .lse = r->dlse, .k = r->dk, .v = r->dv,
                                   .cache_seqlens = r->dlens, .max_seqlen_k = r->p.seqlen_k, .causal = c->causal,
                                   .num_splits = splits, .variant = var};
    memcpy(a.q_stride, r->p.q_stride, sizeof a.q_stride);
    memcpy(a.o_stride, r->p.o_stride, sizeof a.o_stride);
    if (c->page) {
        int64_t row = (int64_t)c->hkv * c->d, st[3] = {c->page * row, c->d, row};
        memcpy(a.k_stride, st, sizeof st);
        memcpy(a.v_stride, st, sizeof st);
        a.block_table = r->dbt, a.block_table_stride = r->pg.max_pages, a.page_size = c->page;
        a.num_pages = r->pg.num_pages;
    } else {
        memcpy(a.k_stride, r->p.k_stride, sizeof a.k_stride);
        memcpy(a.v_stride, r->p.v_stride, sizeof a.v_stride);
    }
    return a;
}

/* One call: poison, run twice (the first may compile; the second timed), download. */
static KilnStatus call(const KilnAttentionDecodeParams *a, Data *r, void *o, double *ms)
{
    size_t es = attn_dtype_size(r->p.dtype);
    KilnStatus st = kiln_memset(g_dev, r->d_o, 0xFF, r->nq * es);
    if (st == KILN_OK) st = kiln_memset(g_dev, r->dlse, 0xFF, r->nl);
    if (st == KILN_OK) st = kiln_attention_decode(g_dev, a, NULL);
    if (st == KILN_OK) st = kiln_synchronize(g_dev);
    double t0 = gu_now_ms();
    if (st == KILN_OK) st = kiln_attention_decode(g_dev, a, NULL);
    if (st == KILN_OK) st = kiln_synchronize(g_dev);
    *ms = gu_now_ms() - t0;
    if (st == KILN_OK) st = kiln_memcpy_dtoh(g_dev, o, r->d_o, r->nq * es);
    if (st == KILN_OK) st = kiln_memcpy_dtoh(g_dev, r->lse, r->dlse, r->nl);
    return st;
}

/* Runs case c; prints its ROW line; returns 1 on failure. */
static int run_case(int idx, const GCase *c)
{
    Data r;
    setup(&r, c, 777 + 31 * (uint64_t)idx);
    Inputs in = {0};
    KilnAttentionVariant var;
    const KilnAttentionVariant *vp = NULL;
    if (c->v.variant && !strcmp(c->v.variant, "mixed")) {
        bm_mixed_inputs(&in, 500, 97);
        var = (KilnAttentionVariant){.source = k_mixed_src, .path = "mixed.tile", .args = in.args, .nargs = in.nargs};
        vp = &var;
    } else if (c->v.variant) {
        make_inputs_for(&c->v, c->batch, c->hq, r.p.seqlen_k, &in);
        var = (KilnAttentionVariant){.path = c->v.variant, .args = in.args, .nargs = in.nargs};
        vp = &var;
    }
    for (int i = 0; i < in.nargs; i++)   /* the variant's tensors on the device */
        if (in.args[i].value.kind == KILN_PARAM_PTR)
            in.args[i].value = kiln_arg_ptr(up((const void *)(uintptr_t)in.args[i].value.v.ptr, in.args[i].bytes));
    char why[200] = "";
    int fail = 0, auto_splits = 0;
    double err = 0, bound = 0, ms_bm = 0, ms_plain = 0, ms;
    /* the mask of the full problem */
    KilnAttentionParams fp = {.dtype = c->dt == ATTN_BF16 ? KILN_BF16 : KILN_F16, .batch = c->batch,
                              .heads_q = c->hq, .heads_kv = c->hkv, .seqlen_q = r.p.seqlen_k,
                              .seqlen_k = r.p.seqlen_k, .head_dim = c->d, .causal = c->causal, .variant = vp};
    KilnBlockMask m = {.block_q = c->bq, .block_kv = c->bk, .batch = c->mb, .heads = c->mh};
    m.bytes = kiln_attention_block_mask_size(&fp, &m);
    m.data = up(NULL, m.bytes);
    KilnStatus st = kiln_attention_block_mask_create(g_dev, &fp, &m, NULL);
    double step = c->dt == ATTN_F16 ? 0x1p-11 : 0x1p-8;
    int splits[] = {0, 1, 7, 7}, combine[] = {0, 0, KILN_DECODE_COMBINE_FUSED, KILN_DECODE_COMBINE_KERNEL};
    for (int i = 0; i < 4 && st == KILN_OK; i++) {
        KilnAttentionDecodeParams a = params(c, &r, vp, splits[i]);
        a.combine = combine[i];
        a.block_mask = &m;
        if (!splits[i]) auto_splits = kiln_attention_decode_splits(&a, g_info.sm_count);
        if ((st = call(&a, &r, r.o, &ms)) != KILN_OK) break;
        if (i == 0) ms_bm = ms;
        AttnDecodeErr e = attn_decode_judge(&r.p, c->lens, r.q, r.k, r.v, r.o, r.lse);
        err = fmax(err, e.e.o_max_abs), bound = 2 * e.plain_err + 1e-5;
        if (e.e.nonfinite || e.e.o_max_abs > bound || e.e.lse_max_rel > 1e-4 || e.empty_bad) {
            fail = 1;
            snprintf(why, sizeof why, "splits %d combine %d: err %.3g > %.3g, lse %.3g, %lld non-finite, %lld bad "
                     "empty", splits[i], combine[i], e.e.o_max_abs, bound, e.e.lse_max_rel,
                     (long long)e.e.nonfinite, (long long)e.empty_bad);
        }
        if (i) continue;   /* the same call without the mask, at the automatic split count (the
                              interpreter test compares every split count) */
        a.block_mask = NULL;
        if ((st = call(&a, &r, r.o_plain, &ms)) != KILN_OK) break;
        ms_plain = ms;
        double d = 0;
        for (size_t x = 0; x < r.nq; x++) d = gu_worse(d, attn_get(c->dt, r.o, x), attn_get(c->dt, r.o_plain, x));
        if (d > bound + step) fail = 1, snprintf(why, sizeof why, "with/without the mask differ by %.3g", d);
    }
    if (st != KILN_OK) fail = 1, snprintf(why, sizeof why, "%s: %.150s", kiln_status_name(st), kiln_last_error());
    printf("ROW %d %-22s %-4s d%-3d %d/%d t%-2d %-9s mask %dx%d splits %3d err %9.3g bound %9.3g "
           "ms mask %7.3f plain %7.3f %s%s%s\n", idx, c->what, c->dt == ATTN_BF16 ? "bf16" : "f16", c->d, c->hq,
           c->hkv, c->tokens, c->page ? "paged" : "contig", c->bq, c->bk, auto_splits, err, bound, ms_bm, ms_plain,
           fail ? "FAIL" : "PASS", fail ? ": " : "", why);
    kiln_free(g_dev, m.data);
    for (int i = 0; i < in.nargs; i++)
        if (in.args[i].value.kind == KILN_PARAM_PTR) kiln_free(g_dev, in.args[i].value.v.ptr);
    teardown(&r, c);
    return fail;
}

int main(void)
{
    int started = gu_begin(&g_dev, &g_info, "/tmp/kiln-decode-bm-cache-XXXXXX");
    if (started >= 0) return started;
    int n = (int)(sizeof k_cases / sizeof k_cases[0]), fails = 0;
    double t0 = gu_now_ms();
    for (int i = 0; i < n; i++) fails += run_case(i, &k_cases[i]);
    kiln_attention_cache_clear(g_dev);
    kiln_shutdown(g_dev);
    printf("summary: %d/%d decode block-mask cases pass, %.1f s\n", n - fails, n, (gu_now_ms() - t0) / 1e3);
    return fails ? EXIT_FAILURE : EXIT_SUCCESS;
}
