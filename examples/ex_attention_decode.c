/* ex_attention_decode.c — one step of paged flash-decoding in the main job.
 *
 * Four sequences whose KV caches hold ragged lengths (one shorter than a page, one
 * shorter than the new tokens, so its first token sees no key) in a paged cache of
 * page size 16 (vLLM's): the pages are shuffled through the block table and every
 * cache element no key owns is NaN, so a read past a sequence's length or through a
 * wrong page shows. Two new query tokens per sequence (causal among themselves),
 * GQA 8/2 (the four query heads of a KV head and the tokens packed into one tile),
 * keys split three ways and the partial results combined by their log-sum-exps.
 *
 * On the GPU through kiln_attention_decode (num_splits = 3); on the CPU interpreter
 * the split kernel of lang/lib/attention_decode.tile with kiln_run_cpu, FUSED as the
 * runtime runs it: the last split of each (sequence, KV head) combines, counted by
 * tickets that start (and end) at zero.
 * O, LSE and the split scratch start as NaN. Judged per sequence against the float64
 * forward (tools/attn_ref.c, attn_decode_judge) with FlashAttention's rule: max error
 * <= 2 x plain f16 attention's + 1e-5, LSE to 1e-4 relative, a token that sees no key
 * gets O = 0 and LSE = -inf.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "examples/run_examples.h"
#include "tools/attn_ref.h"

#define DEC_PROGRAM "lang/lib/attention_decode.tile"
#define BATCH 4
#define PAGE 16
#define SPLITS 3

typedef struct Dec {
    AttnProblem p;            /* seqlen_q = new tokens; seqlen_k = the longest cache */
    int lens[BATCH];          /* cache_seqlens */
    size_t nq, nkv, nl;
    uint16_t *q, *k, *v, *o;  /* k, v: the contiguous cache the reference reads */
    float *lse, *opart, *lsepart;
    AttnPaged pg;             /* the same keys in shuffled pages */
} Dec;

static void dec_setup(Dec *c, bool gpu)
{
    memset(c, 0, sizeof *c);
    static const int cpu_lens[BATCH] = {150, 7, 1, 93}, gpu_lens[BATCH] = {2500, 7, 1, 1333};
    memcpy(c->lens, gpu ? gpu_lens : cpu_lens, sizeof c->lens);
    AttnProblem *p = &c->p;
    p->batch = BATCH; p->heads_q = 8; p->heads_kv = 2;
    p->seqlen_q = 2; p->head_dim = 128; p->causal = 1;
    p->scale = 1.0 / sqrt(128.0);
    p->dtype = ATTN_F16;
    for (int b = 0; b < BATCH; b++) p->seqlen_k = c->lens[b] > p->seqlen_k ? c->lens[b] : p->seqlen_k;
    attn_set_strides(p, ATTN_BSHD);   /* Q, O: [batch, token, head, d]; the cache [batch, seq, head, d] */
    c->nq = attn_numel_q(p);
    c->nkv = attn_numel_kv(p);
    c->nl = (size_t)BATCH * p->heads_q * p->seqlen_q;
    c->q = malloc(c->nq * 2); c->o = malloc(c->nq * 2);
    c->k = malloc(c->nkv * 2); c->v = malloc(c->nkv * 2);
    memset(c->k, 0xFF, c->nkv * 2);
    memset(c->v, 0xFF, c->nkv * 2);
    attn_fill_strided(p->dtype, c->q, p->q_stride, BATCH, p->heads_q, p->seqlen_q, p->head_dim, 21);
    for (int b = 0; b < BATCH; b++) {   /* only each sequence's own keys get values */
        attn_fill_strided(p->dtype, c->k + b * p->k_stride[0], p->k_stride, 1, p->heads_kv, c->lens[b], p->head_dim,
                          22 + 2 * (uint64_t)b);
        attn_fill_strided(p->dtype, c->v + b * p->v_stride[0], p->v_stride, 1, p->heads_kv, c->lens[b], p->head_dim,
                          23 + 2 * (uint64_t)b);
    }
    attn_paged_make(p, c->lens, PAGE, c->k, c->v, 24, &c->pg);
    c->lse = malloc(c->nl * 4);
    c->opart = malloc(c->nl * SPLITS * (size_t)p->head_dim * 4);
    c->lsepart = malloc(c->nl * SPLITS * 4);
    memset(c->o, 0xFF, c->nq * 2);
    memset(c->lse, 0xFF, c->nl * 4);
    memset(c->opart, 0xFF, c->nl * SPLITS * (size_t)p->head_dim * 4);
    memset(c->lsepart, 0xFF, c->nl * SPLITS * 4);
}

static void dec_free(Dec *c)
{
    free(c->q); free(c->k); free(c->v); free(c->o);
    free(c->lse); free(c->opart); free(c->lsepart);
    attn_paged_free(&c->pg);
}

/* The paged cache's strides: page, KV head, row of [num_pages, PAGE, heads_kv, d]. */
static void paged_strides(const Dec *c, int64_t st[3])
{
    int64_t row = (int64_t)c->p.heads_kv * c->p.head_dim;
    st[0] = PAGE * row;
    st[1] = c->p.head_dim;
    st[2] = row;
}

/* ---------------- on the CPU interpreter: the split kernel, combining in its last split ---------------- */

static int dec_cpu(ExRunner *r, Dec *c, char *where)
{
    const AttnProblem *p = &c->p;
    size_t es = 2, kvb = c->pg.numel * es;
    int64_t kst[3];
    paged_strides(c, kst);
    ExArg a[40];
    int n = 0;
    int32_t tickets[BATCH * 8] = {0};   /* one per (sequence, KV head, row block): 4 x 2 x 1 */
    const struct { const char *name; void *ptr; size_t bytes; bool out; } bufs[] = {
        {"Q", c->q, c->nq * es, false},     {"K", c->pg.k, kvb, false},       {"V", c->pg.v, kvb, false},
        {"O", c->o, c->nq * es, true},      {"LSE", c->lse, c->nl * 4, true},
        {"O_part", c->opart, c->nl * SPLITS * (size_t)p->head_dim * 4, true},
        {"LSE_part", c->lsepart, c->nl * SPLITS * 4, true},
        {"cache_seqlens", c->lens, sizeof c->lens, false}, {"counters", tickets, sizeof tickets, true},
        {"block_table", c->pg.block_table, sizeof(int32_t) * BATCH * c->pg.max_pages, false}};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        a[n++] = (ExArg){.name = bufs[i].name, .kind = EX_BUF, .p = bufs[i].ptr, .bytes = bufs[i].bytes,
                         .is_output = bufs[i].out};
    static const char *const names[4][3] = {{"stride_qb", "stride_qh", "stride_qm"}, {"stride_kb", "stride_kh", "stride_kn"},
                                            {"stride_vb", "stride_vh", "stride_vn"}, {"stride_ob", "stride_oh", "stride_om"}};
    const int64_t *st[4] = {p->q_stride, kst, kst, p->o_stride};
    for (int t = 0; t < 4; t++)
        for (int j = 0; j < 3; j++) a[n++] = (ExArg){.name = names[t][j], .kind = EX_I64, .i = st[t][j]};
    a[n++] = (ExArg){.name = "stride_bt", .kind = EX_I64, .i = c->pg.max_pages};
    a[n++] = (ExArg){.name = "batch", .kind = EX_I32, .i = BATCH};
    a[n++] = (ExArg){.name = "heads", .kind = EX_I32, .i = p->heads_q};
    a[n++] = (ExArg){.name = "heads_kv", .kind = EX_I32, .i = p->heads_kv};
    a[n++] = (ExArg){.name = "seqlen_q", .kind = EX_I32, .i = p->seqlen_q};
    a[n++] = (ExArg){.name = "num_splits", .kind = EX_I32, .i = SPLITS};
    a[n++] = (ExArg){.name = "sm_scale", .kind = EX_F32, .f = p->scale};
    /* BLOCK_N 32 keys: each block spans two pages */
    ExDefine defs[] = {{"HEAD_DIM", "128"}, {"BLOCK_N", "32"}, {"PAGED", "true"}, {"PAGE_SIZE", "16"},
                       {"DIRECT", "false"}, {"FUSED", "true"}};
    int rows_per_kv = p->heads_q / p->heads_kv * p->seqlen_q;   /* the packed M dimension */
    int blocks = (rows_per_kv + 15) / 16;
    if (BATCH * p->heads_kv * blocks > (int)(sizeof tickets / sizeof tickets[0])) {
        snprintf(where, 128, "attn_decode_f16: more than %d tickets", (int)(sizeof tickets / sizeof tickets[0]));
        return 1;
    }
    ExProgram split = {DEC_PROGRAM, "attn_decode_f16", defs, 6, {BATCH * p->heads_kv, SPLITS, blocks}, a, n, true};
    return ex_run(r, &split, where, 128);
}

/* ---------------- on the GPU: kiln_attention_decode ---------------- */

static int dec_gpu(ExRunner *r, Dec *c, char *where, size_t where_size)
{
    const AttnProblem *p = &c->p;
    KilnAttentionDecodeParams a = {.dtype = KILN_F16, .batch = BATCH, .heads_q = p->heads_q, .heads_kv = p->heads_kv,
                                   .seqlen_q = p->seqlen_q, .head_dim = p->head_dim, .max_seqlen_k = p->seqlen_k,
                                   .block_table_stride = c->pg.max_pages, .page_size = PAGE,
                                   .num_pages = c->pg.num_pages, .softmax_scale = (float)p->scale, .causal = 1,
                                   .num_splits = SPLITS};
    memcpy(a.q_stride, p->q_stride, sizeof a.q_stride);
    memcpy(a.o_stride, p->o_stride, sizeof a.o_stride);
    paged_strides(c, a.k_stride);
    paged_strides(c, a.v_stride);
    size_t kvb = c->pg.numel * 2;
    int rc = ex_dev_put(r, c->q, c->nq * 2, &a.q) || ex_dev_put(r, NULL, c->nq * 2, &a.o) ||
             ex_dev_put(r, NULL, c->nl * 4, &a.lse) || ex_dev_put(r, c->pg.k, kvb, &a.k) ||
             ex_dev_put(r, c->pg.v, kvb, &a.v) || ex_dev_put(r, c->lens, sizeof c->lens, &a.cache_seqlens) ||
             ex_dev_put(r, c->pg.block_table, sizeof(int32_t) * BATCH * c->pg.max_pages, &a.block_table) ||
             ex_check(kiln_attention_decode(r->dev, &a, NULL), "kiln_attention_decode") ||
             ex_dev_get(r, c->o, a.o, c->nq * 2) || ex_dev_get(r, c->lse, a.lse, c->nl * 4);
    KilnDevPtr all[] = {a.q, a.o, a.lse, a.k, a.v, a.cache_seqlens, a.block_table};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) kiln_free(r->dev, all[i]);
    snprintf(where, where_size, "on the GPU");
    return rc;
}

int ex_attention_decode(ExRunner *r)
{
    Dec c;
    dec_setup(&c, r->dev != NULL);
    char where[128];
    int rc = r->dev ? dec_gpu(r, &c, where, sizeof where) : dec_cpu(r, &c, where);
    if (rc == 0) {
        const AttnProblem *p = &c.p;
        AttnDecodeErr e = attn_decode_judge(p, c.lens, c.q, c.k, c.v, c.o, c.lse);
        bool ok = e.e.nonfinite == 0 && e.empty_bad == 0 && e.e.o_max_abs <= 2 * e.plain_err + 1e-5 &&
                  e.e.lse_max_rel <= 1e-4;
        printf("  decode: cache lengths %d,%d,%d,%d in %d shuffled pages of %d, %d new tokens, %d splits: "
               "o[0][0..3] = %.6g %.6g %.6g  lse[0] = %.6g\n", c.lens[0], c.lens[1], c.lens[2], c.lens[3],
               c.pg.num_pages, PAGE, p->seqlen_q, SPLITS, attn_get(p->dtype, c.o, 0), attn_get(p->dtype, c.o, 1),
               attn_get(p->dtype, c.o, 2), c.lse[0]);
        if (e.e.nonfinite || e.empty_bad)
            printf("  decode: %lld NaN/inf outputs, %lld elements of tokens that see no key are not O = 0 / "
                   "LSE = -inf\n", (long long)e.e.nonfinite, (long long)e.empty_bad);
        char shape[64];
        snprintf(shape, sizeof shape, "paged%d GQA %d/%d t%d d%d", PAGE, p->heads_q, p->heads_kv, p->seqlen_q,
                 p->head_dim);
        printf("%-11s %-28s %-24s max|err| %-10.3g (plain f16 attention: %.3g; LSE rel %.2g) %s\n", "decode", shape,
               where, e.e.o_max_abs, e.plain_err, e.e.lse_max_rel, ok ? "ok" : "FAIL");
        rc = ok ? 0 : 1;
    }
    dec_free(&c);
    return rc;
}
