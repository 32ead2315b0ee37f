/* test_e2e_gpu_attention_decode.c — kiln_attention_decode on the GPU against
 * the float64 reference (tools/attn_ref.c, attn_decode_judge), FlashAttention's
 * accuracy rule: max |O - ref| <= 2 * max |O_plain - ref| + 1e-5, LSE within
 * 1e-4 relative, tokens that see no key exactly O = 0 / LSE = -inf.
 *
 * Sweep: dtype x head dim (64, 128, 256) x GQA (8/1, 8/2, 4/4) x new tokens
 * (1, 4, 16) x cache (contiguous, paged 16 / 64 / 256), batch 5 with ragged
 * lengths (0, 1, a few thousand, random); each case runs with the automatic
 * split count, 1 split and 7 splits, fused combine (the default), and 7 splits
 * with the combine kernel (every one must pass the rule; the split runs must
 * agree with the one-split run within the bound; every call runs twice, so the
 * second fused call starts from the tickets the first left zero), and paged
 * cases also on the contiguous copy of the same keys (the results must be
 * identical). Cache rows past each length and unused pages are NaN, outputs
 * NaN-poisoned before every call. Also the forward with batch * heads_q above 65535
 * (several launches of whole batches) against float64. One ROW line per case (error, bound, splits
 * chosen, GPU time, GB/s of K+V read) and a summary line.
 * Without a GPU: one line "SKIP: no GPU (<reason>)" and exit 77 (ctest: Skipped).
 */
#include "gpu_util.h"

#include <stdio.h>
#include <stdlib.h>

#include "tools/attn_ref.c"   /* the reference is a tool, not a library: compiled in here */

#define B 5
#define NSPLIT_RUNS 4

static KilnDevice *g_dev;
static KilnDeviceInfo g_info;

typedef struct DCase {
    AttnDtype dtype;
    int d, hq, hkv, tokens, page;   /* page 0: contiguous */
    int lens[B];
} DCase;

typedef struct Bufs { KilnDevPtr q, k, v, o, lse, lens, bt; } Bufs;

#define TRY(x) do { if ((st = (x)) != KILN_OK) goto done; } while (0)

static KilnAttentionDecodeParams params(const DCase *c, const AttnProblem *p, const Bufs *g, const AttnPaged *pg,
                                        int splits)
{
    KilnAttentionDecodeParams a = {.dtype = c->dtype == ATTN_BF16 ? KILN_BF16 : KILN_F16, .batch = B,
                                   .heads_q = c->hq, .heads_kv = c->hkv, .seqlen_q = c->tokens, .head_dim = c->d,
                                   .q = g->q, .o = g->o, .lse = g->lse, .k = g->k, .v = g->v,
                                   .cache_seqlens = g->lens, .max_seqlen_k = p->seqlen_k, .causal = 1,
                                   .num_splits = splits};
    memcpy(a.q_stride, p->q_stride, sizeof a.q_stride);
    memcpy(a.o_stride, p->o_stride, sizeof a.o_stride);
    if (pg) {
        int64_t row = (int64_t)c->hkv * c->d;
        int64_t st[3] = {pg->page * row, c->d, row};
        memcpy(a.k_stride, st, sizeof st);
        memcpy(a.v_stride, st, sizeof st);
        a.block_table = g->bt, a.block_table_stride = pg->max_pages, a.page_size = pg->page;
        a.num_pages = pg->num_pages;
    } else {
        memcpy(a.k_stride, p->k_stride, sizeof a.k_stride);
        memcpy(a.v_stride, p->v_stride, sizeof a.v_stride);
    }
    return a;
}

/* One call: poison, run (timed by events), download into o/lse. */
static KilnStatus call(const KilnAttentionDecodeParams *a, const Bufs *g, size_t no, size_t nl, void *o, float *lse,
                       float *ms)
{
    KilnStatus st;
    KilnEvent *e0 = NULL, *e1 = NULL;
    TRY(kiln_memset(g_dev, g->o, 0xFF, no));
    TRY(kiln_memset(g_dev, g->lse, 0xFF, nl));
    TRY(kiln_attention_decode(g_dev, a, NULL));   /* the first call may compile */
    TRY(kiln_event_create(g_dev, &e0));
    TRY(kiln_event_create(g_dev, &e1));
    TRY(kiln_event_record(e0, NULL));
    TRY(kiln_attention_decode(g_dev, a, NULL));
    TRY(kiln_event_record(e1, NULL));
    TRY(kiln_event_synchronize(e1));
    TRY(kiln_event_elapsed_ms(e0, e1, ms));
    TRY(kiln_memcpy_dtoh(g_dev, o, g->o, no));
    TRY(kiln_memcpy_dtoh(g_dev, lse, g->lse, nl));
done:
    kiln_event_destroy(e0);
    kiln_event_destroy(e1);
    return st;
}

static double max_diff(AttnDtype t, const void *a, const void *b, size_t n)
{
    double w = 0;
    for (size_t i = 0; i < n; i++) w = gu_worse(w, attn_get(t, a, i), attn_get(t, b, i));
    return w;
}

/* Runs case c; prints its ROW line; returns 1 on failure. */
static int run_case(int idx, const DCase *c)
{
    AttnProblem p = {.batch = B, .heads_q = c->hq, .heads_kv = c->hkv, .seqlen_q = c->tokens, .head_dim = c->d,
                     .causal = 1, .scale = 1.0 / sqrt((double)c->d), .dtype = c->dtype};
    for (int b = 0; b < B; b++) p.seqlen_k = c->lens[b] > p.seqlen_k ? c->lens[b] : p.seqlen_k;
    attn_set_strides(&p, ATTN_BSHD);
    size_t es = attn_dtype_size(c->dtype), nq = attn_numel_q(&p), nkv = attn_numel_kv(&p);
    size_t nl = (size_t)B * c->hq * c->tokens * sizeof(float);
    void *q = malloc(nq * es), *k = malloc(nkv * es), *v = malloc(nkv * es), *o = malloc(nq * es);
    void *o1 = malloc(nq * es), *oc = malloc(nq * es);
    float *lse = malloc(nl);
    memset(k, 0xFF, nkv * es);
    memset(v, 0xFF, nkv * es);
    uint64_t seed = 4242 + 31 * (uint64_t)idx;
    attn_fill_strided(c->dtype, q, p.q_stride, B, c->hq, c->tokens, c->d, seed);
    for (int b = 0; b < B; b++) {
        attn_fill_strided(c->dtype, (char *)k + (size_t)(b * p.k_stride[0]) * es, p.k_stride, 1, c->hkv, c->lens[b],
                          c->d, seed + 1 + 2 * b);
        attn_fill_strided(c->dtype, (char *)v + (size_t)(b * p.v_stride[0]) * es, p.v_stride, 1, c->hkv, c->lens[b],
                          c->d, seed + 2 + 2 * b);
    }
    AttnPaged pg = {0};
    if (c->page) attn_paged_make(&p, c->lens, c->page, k, v, seed + 99, &pg);
    size_t nk = c->page ? pg.numel : nkv;
    Bufs g = {0};
    KilnStatus st;
    char why[200] = "";
    double err = 0, bound = 0, lse_rel = 0, split_diff = 0;
    float ms = 0;
    int fail = 0, auto_splits = 0;
    TRY(kiln_malloc(g_dev, nq * es, &g.q));
    TRY(kiln_malloc(g_dev, nk * es, &g.k));
    TRY(kiln_malloc(g_dev, nk * es, &g.v));
    TRY(kiln_malloc(g_dev, nq * es, &g.o));
    TRY(kiln_malloc(g_dev, nl, &g.lse));
    TRY(kiln_malloc(g_dev, sizeof(int) * B, &g.lens));
    TRY(kiln_memcpy_htod(g_dev, g.q, q, nq * es));
    TRY(kiln_memcpy_htod(g_dev, g.k, c->page ? pg.k : k, nk * es));
    TRY(kiln_memcpy_htod(g_dev, g.v, c->page ? pg.v : v, nk * es));
    TRY(kiln_memcpy_htod(g_dev, g.lens, c->lens, sizeof(int) * B));
    if (c->page) {
        TRY(kiln_malloc(g_dev, sizeof(int32_t) * B * pg.max_pages, &g.bt));
        TRY(kiln_memcpy_htod(g_dev, g.bt, pg.block_table, sizeof(int32_t) * B * pg.max_pages));
    }
    /* the automatic split count last: the paged check below compares its output with the
     * contiguous call's, which makes the same choice */
    int splits[NSPLIT_RUNS] = {1, 7, 7, 0};
    int combine[NSPLIT_RUNS] = {0, KILN_DECODE_COMBINE_FUSED, KILN_DECODE_COMBINE_KERNEL, 0};
    for (int r = 0; r < NSPLIT_RUNS; r++) {
        KilnAttentionDecodeParams a = params(c, &p, &g, c->page ? &pg : NULL, splits[r]);
        a.combine = combine[r];
        if (!splits[r]) auto_splits = kiln_attention_decode_splits(&a, g_info.sm_count);
        TRY(call(&a, &g, nq * es, nl, o, lse, &ms));
        AttnDecodeErr e = attn_decode_judge(&p, c->lens, q, k, v, o, lse);
        err = fmax(err, e.e.o_max_abs), bound = 2 * e.plain_err + 1e-5, lse_rel = fmax(lse_rel, e.e.lse_max_rel);
        if (e.e.nonfinite || e.e.o_max_abs > bound || e.e.lse_max_rel > 1e-4 || e.empty_bad) {
            fail = 1;
            snprintf(why, sizeof why, "splits %d%s: err %.3g, %lld non-finite, %lld bad empty", splits[r],
                     combine[r] ? " (combine kernel)" : "", e.e.o_max_abs, (long long)e.e.nonfinite, (long long)e.empty_bad);
        }
        if (r == 0) memcpy(o1, o, nq * es);
        else split_diff = fmax(split_diff, max_diff(c->dtype, o, o1, nq));
    }
    /* each split count is within `bound` of the float64 result, so two of them are within
     * twice that of each other (bf16 rounds the outputs of different splits apart) */
    if (split_diff > 2 * bound) fail = 1, snprintf(why, sizeof why, "splits disagree by %.3g", split_diff);
    if (c->page) {   /* the same keys, contiguous: identical results */
        Bufs gc = g;
        TRY(kiln_malloc(g_dev, nkv * es, &gc.k));
        TRY(kiln_malloc(g_dev, nkv * es, &gc.v));
        TRY(kiln_memcpy_htod(g_dev, gc.k, k, nkv * es));
        TRY(kiln_memcpy_htod(g_dev, gc.v, v, nkv * es));
        KilnAttentionDecodeParams a = params(c, &p, &gc, NULL, 0);
        float ms2;
        st = call(&a, &gc, nq * es, nl, oc, lse, &ms2);
        kiln_free(g_dev, gc.k);
        kiln_free(g_dev, gc.v);
        if (st != KILN_OK) goto done;
        if (memcmp(oc, o, nq * es)) fail = 1, snprintf(why, sizeof why, "paged != contiguous");
    }
done:
    if (st != KILN_OK) fail = 1, snprintf(why, sizeof why, "%s: %.150s", kiln_status_name(st), kiln_last_error());
    double kv_bytes = 0;
    for (int b = 0; b < B; b++) kv_bytes += 2.0 * c->lens[b] * c->hkv * c->d * es;
    printf("ROW %3d %-4s d%-3d %d/%d t%-2d %-8s splits %3d err %9.3g bound %9.3g lse %8.2g gpu_ms %8.4f GB/s %7.1f %s%s%s\n",
           idx, c->dtype == ATTN_BF16 ? "bf16" : "f16", c->d, c->hq, c->hkv, c->tokens,
           c->page ? (c->page == 16 ? "paged16" : c->page == 64 ? "paged64" : "paged256") : "contig", auto_splits,
           err, bound, lse_rel, (double)ms, ms > 0 ? kv_bytes / (ms * 1e6) : 0.0, fail ? "FAIL" : "PASS",
           fail ? ": " : "", why);
    KilnDevPtr all[] = {g.q, g.k, g.v, g.o, g.lse, g.lens, g.bt};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) kiln_free(g_dev, all[i]);
    if (c->page) attn_paged_free(&pg);
    free(q), free(k), free(v), free(o), free(o1), free(oc), free(lse);
    return fail;
}

/* The forward with batch * heads_q above 65535 (several launches of whole batches): every
 * row must be written and right. 8193 x 8 heads, 2 x 3 tokens, d 64, causal. */
static int check_forward_many_heads(void)
{
    AttnProblem p = {.batch = 8193, .heads_q = 8, .heads_kv = 2, .seqlen_q = 2, .seqlen_k = 3, .head_dim = 64,
                     .causal = 1, .scale = 0.125, .dtype = ATTN_F16};
    attn_set_strides(&p, ATTN_BSHD);
    size_t nq = attn_numel_q(&p), nkv = attn_numel_kv(&p), nl = (size_t)p.batch * p.heads_q * p.seqlen_q;
    void *q = malloc(nq * 2), *k = malloc(nkv * 2), *v = malloc(nkv * 2), *o = malloc(nq * 2);
    float *lse = malloc(nl * 4);
    double *ref = malloc(nq * sizeof(double)), *rlse = malloc(nl * sizeof(double));
    double *plain = malloc(nq * sizeof(double)), bound = 0;
    attn_fill_random(ATTN_F16, q, nq, 1, -1, 1);
    attn_fill_random(ATTN_F16, k, nkv, 2, -1, 1);
    attn_fill_random(ATTN_F16, v, nkv, 3, -1, 1);
    KilnDevPtr g[5] = {0};
    KilnStatus st;
    AttnErr e = {0};
    TRY(kiln_malloc(g_dev, nq * 2, &g[0]));
    TRY(kiln_malloc(g_dev, nkv * 2, &g[1]));
    TRY(kiln_malloc(g_dev, nkv * 2, &g[2]));
    TRY(kiln_malloc(g_dev, nq * 2, &g[3]));
    TRY(kiln_malloc(g_dev, nl * 4, &g[4]));
    TRY(kiln_memcpy_htod(g_dev, g[0], q, nq * 2));
    TRY(kiln_memcpy_htod(g_dev, g[1], k, nkv * 2));
    TRY(kiln_memcpy_htod(g_dev, g[2], v, nkv * 2));
    TRY(kiln_memset(g_dev, g[3], 0xFF, nq * 2));
    TRY(kiln_memset(g_dev, g[4], 0xFF, nl * 4));
    KilnAttentionParams a = {.dtype = KILN_F16, .batch = p.batch, .heads_q = p.heads_q, .heads_kv = p.heads_kv,
                             .seqlen_q = p.seqlen_q, .seqlen_k = p.seqlen_k, .head_dim = p.head_dim, .q = g[0],
                             .k = g[1], .v = g[2], .o = g[3], .lse = g[4], .softmax_scale = 0.125f, .causal = 1};
    memcpy(a.q_stride, p.q_stride, sizeof a.q_stride);
    memcpy(a.k_stride, p.k_stride, sizeof a.k_stride);
    memcpy(a.v_stride, p.v_stride, sizeof a.v_stride);
    memcpy(a.o_stride, p.o_stride, sizeof a.o_stride);
    TRY(kiln_attention_fwd(g_dev, &a, NULL));
    TRY(kiln_synchronize(g_dev));
    TRY(kiln_memcpy_dtoh(g_dev, o, g[3], nq * 2));
    TRY(kiln_memcpy_dtoh(g_dev, lse, g[4], nl * 4));
    attn_ref_fwd(&p, q, k, v, ref, rlse);
    e = attn_compare(&p, o, lse, ref, rlse);
    attn_ref_torchlike(&p, q, k, v, plain);
    bound = 2 * attn_max_abs_diff(&p, plain, ref) + 1e-5;
done:;
    int fail = st != KILN_OK || e.nonfinite || e.o_max_abs > bound || e.lse_max_rel > 1e-4 ||
               attn_check_empty_rows(&p, o, lse);
    printf("ROW fwd batch*heads_q=%d (>65535) err %.3g bound %.3g lse %.3g nonfinite %lld %s%s%s\n",
           p.batch * p.heads_q, e.o_max_abs, bound, e.lse_max_rel, (long long)e.nonfinite, fail ? "FAIL" : "PASS",
           st ? ": " : "",
           st ? kiln_last_error() : "");
    for (int i = 0; i < 5; i++) kiln_free(g_dev, g[i]);
    free(q), free(k), free(v), free(o), free(lse), free(ref), free(rlse), free(plain);
    return fail;
}

int main(void)
{
    int started = gu_begin(&g_dev, &g_info, "/tmp/kiln-decode-cache-XXXXXX");
    if (started >= 0) return started;
    static const int dims[] = {64, 128, 256}, gqa[][2] = {{8, 1}, {8, 2}, {4, 4}}, toks[] = {1, 4, 16};
    static const int pages[] = {0, 16, 64, 256};
    const char *max_cases = getenv("ATTN_MAX_CASES");
    int limit = max_cases && atoi(max_cases) > 0 ? atoi(max_cases) : 1 << 30;
    int n = 0, fails = 0;
    double t0 = gu_now_ms();
    for (int dt = 0; dt < 2; dt++)
        for (int di = 0; di < 3; di++)
            for (int gi = 0; gi < 3; gi++)
                for (int ti = 0; ti < 3 && n < limit; ti++) {
                    /* the cache kind and the long length rotate with the case */
                    DCase c = {.dtype = dt ? ATTN_BF16 : ATTN_F16, .d = dims[di], .hq = gqa[gi][0],
                               .hkv = gqa[gi][1], .tokens = toks[ti], .page = pages[n % 4],
                               .lens = {0, 1, 1000 + 977 * (n % 5), 3 + 131 * (n % 7), 4096}};
                    fails += run_case(n++, &c);
                }
    int fwd_fail = check_forward_many_heads();
    kiln_attention_cache_clear(g_dev);
    kiln_shutdown(g_dev);
    printf("summary: %d/%d cases pass, forward above 65535 (batch * heads_q) %s, %.1f s\n", n - fails, n,
           fwd_fail ? "FAIL" : "PASS", (gu_now_ms() - t0) / 1e3);
    return fails || fwd_fail ? EXIT_FAILURE : EXIT_SUCCESS;
}
