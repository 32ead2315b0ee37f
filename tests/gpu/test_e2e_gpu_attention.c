/* test_e2e_gpu_attention.c — kiln_attention_fwd on the GPU, against float64.
 *
 * The sweep: dtype (f16, bf16) x head dim (32, 64, 96, 128, 256) x causal, the
 * 20 variants the API compiles, each run on 7 length patterns: 1x1, 17x17,
 * below one block (45x61), ~1000 (999x999), seqlen_q < seqlen_k (77x1000),
 * seqlen_q > seqlen_k (1000x77: causal rows that see no key) and no keys at all
 * (130x0). GQA group sizes (1, 2, 4, MQA), layouts (bshd, bhsd), batch and
 * strides wider than dense rotate across them. Plus: caller-chosen tiles, a
 * custom scale on a created stream, zero rows, a rejected call on a real device.
 *
 * Inputs are random, written through the strides into NaN-filled buffers (a
 * stray read poisons the output); O and LSE are NaN-poisoned before the call, and
 * padding of O and a guard after LSE must still hold the poison afterwards.
 * Judged by FlashAttention's rule: max |O - ref| <= 2 * max |O_plain - ref| + 1e-5
 * (ref float64, O_plain plain attention in the storage dtype: attn_ref_torchlike),
 * LSE relative error <= 1e-4, rows that see no key exactly O = 0 and LSE = -inf.
 * The float64 references run on worker threads while the GPU works through the
 * cases. One table row per case, then a summary line.
 *
 * Also checked: a second call of a variant costs microseconds (the in-process
 * cache), the cache holds one entry per variant, clears, and refills from the
 * on-disk cache. The on-disk cache is a fresh temporary directory, so the first
 * call of each variant shows the real compile time (first_ms).
 *
 * KILN_TEST_PINGPONG=BMxBN (e.g. 128x64; "1" means 128x64): every case without
 * tiles of its own runs at BM x BN (head dim 256: BN <= 64, for SRAM) on 8 warps
 * with warpgroup ping-pong forced on
 * (KilnAttentionParams.pingpong; sm_90a, docs/tensor_cores.md 4b), the others
 * with ping-pong on too.
 *
 * KILN_TEST_MBARRIER=S (1: the table's stages): every case runs with the mbarrier
 * stage hand-off (KilnAttentionParams.mbarrier, docs/tensor_cores.md 0b); S >= 2 also
 * sets num_stages = S where the head dim is 128 or less (d 256 keeps its stages: SRAM).
 * Combines with KILN_TEST_PINGPONG.
 * KILN_TEST_TMA=1: every case with TMA copies of K and V (KilnAttentionParams.tma,
 * docs/tensor_cores.md 5c; implies the mbarrier hand-off): 4-D tensor maps encoded at
 * each launch. Combines with the others.
 * KILN_TEST_OVERLAP=1 or BMxBN/WARPS (e.g. 128x64/8): every case with rotated key loops,
 * the next key block's Q K^T in flight during the softmax (KilnAttentionParams.overlap;
 * sm_90a, docs/tensor_cores.md 4c); with tiles, the cases without tiles of their own at
 * those (head dim 256: BN <= 64). Combines with KILN_TEST_PINGPONG (applied first).
 * KILN_TEST_WARP_SPEC=1 or BMxBN/WARPS: the same for warp specialisation, a producer
 * warpgroup issuing the K/V copies (KilnAttentionParams.warp_specialize, implies the mbarrier
 * hand-off; sm_90a, docs/tensor_cores.md 5b).
 * KILN_TEST_LEAN_PRODUCER=1 or BMxBN/WARPS: the same for --lean-producer (implies warp
 * specialisation and TMA: the producer at 24 registers where it issues TMA copies alone).
 * KILN_TEST_PERSISTENT=1 or BMxBN/WARPS: the same for persistent programs (as many CTAs as
 * stay resident, each looping over the tiles; the table's warp specialisation gives way);
 * KILN_TEST_LONGEST_FIRST the same in longest-first order (causal: heavy query blocks first).
 * ATTN_HEAD_DIMS=64,128 keeps the cases of those head dims only (a quicker run).
 *
 * Without a GPU: one line "SKIP: no GPU (<reason>)" and exit 77 (ctest: skipped).
 */
#include "kiln.h"
#include "tests/gpu/gpu_util.h"
#include "tools/attn_ref.c"   /* the reference is a tool, not a library: compiled in here */

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define LSE_GUARD 64   /* poisoned bytes after LSE that the kernel must not touch */

typedef struct Case {
    /* the problem */
    AttnDtype dtype;
    int d, causal, batch, hq, hkv, sq, sk, pad;
    AttnLayout layout;
    double scale;                       /* 0: the API's default 1/sqrt(d) */
    int block_m, block_n, num_warps;    /* 0: defaults */
    int pingpong;                       /* KilnAttentionParams.pingpong (KILN_TEST_PINGPONG) */
    int mbarrier, num_stages;           /* KilnAttentionParams.mbarrier, num_stages (KILN_TEST_MBARRIER) */
    int overlap;                        /* KilnAttentionParams.overlap (KILN_TEST_OVERLAP) */
    int tma;                            /* KilnAttentionParams.tma (KILN_TEST_TMA) */
    int warp_spec;                      /* KilnAttentionParams.warp_specialize (KILN_TEST_WARP_SPEC) */
    int lean_producer;                  /* KilnAttentionParams.lean_producer (KILN_TEST_LEAN_PRODUCER) */
    int persistent, longest_first;      /* schedule.persistent / longest_first (KILN_TEST_PERSISTENT / _LONGEST_FIRST) */
    int on_stream;
    /* host data (inputs, then the GPU's outputs) */
    AttnProblem p;
    void *q, *k, *v, *o;
    float *lse;
    size_t nq, nkv, nlse;
    /* the run */
    KilnStatus st;
    double first_ms, call_us;
    int compiled;                       /* the first call added a variant to the cache */
    float gpu_ms;
    /* the verdict */
    AttnErr e;
    double plain, bound;
    int64_t empty_bad, pad_bad;
    int pass;
    char why[160];
} Case;

static KilnDevice *g_dev;
static KilnStream *g_stream;
static Case *g_cases;
static int g_ncases;

/* ---------------- the cases ---------------- */

static Case *add_case(AttnDtype dt, int d, int causal, int batch, int hq, int hkv, int sq, int sk,
                      AttnLayout layout, int pad)
{
    Case *c = &g_cases[g_ncases++];
    memset(c, 0, sizeof *c);
    *c = (Case){.dtype = dt, .d = d, .causal = causal, .batch = batch, .hq = hq, .hkv = hkv,
                .sq = sq, .sk = sk, .layout = layout, .pad = pad};
    return c;
}

static void make_cases(void)
{
    static const int dims[] = {32, 64, 96, 128, 256};
    static const struct { int sq, sk; } lens[] = {{1, 1}, {17, 17}, {45, 61}, {999, 999}, {77, 1000},
                                                  {1000, 77}, {130, 0}};
    /* group sizes 1, 2, 4 and MQA */
    static const struct { int hq, hkv; } groups[] = {{2, 2}, {4, 2}, {8, 2}, {3, 1}};
    g_cases = calloc(200, sizeof *g_cases);
    int v = 0;
    for (int dt = 0; dt < 2; dt++)
        for (int di = 0; di < 5; di++)
            for (int causal = 0; causal < 2; causal++, v++)
                for (int li = 0; li < 7; li++) {
                    int r = li + v;
                    int hq = groups[r % 4].hq, hkv = groups[r % 4].hkv, batch = r % 3 == 0 ? 2 : 1;
                    if ((long)lens[li].sq * lens[li].sk > 50000) {   /* keep the float64 reference cheap */
                        batch = 1;
                        if (hq > 4) hq = 4, hkv = 1;
                    }
                    add_case(dt ? ATTN_BF16 : ATTN_F16, dims[di], causal, batch, hq, hkv, lens[li].sq,
                             lens[li].sk, (AttnLayout)((li + v / 2) % 2), r % 3 == 1 ? 8 : 0);
                }
    /* caller-chosen tiles (a variant of its own) */
    Case *t = add_case(ATTN_F16, 64, 1, 2, 4, 2, 300, 513, ATTN_BSHD, 0);
    t->block_m = 64, t->block_n = 32, t->num_warps = 4;
    t = add_case(ATTN_BF16, 128, 0, 1, 4, 4, 200, 333, ATTN_BHSD, 8);
    t->block_m = 32, t->block_n = 128;
    /* a custom scale, on a created stream */
    t = add_case(ATTN_BF16, 128, 0, 2, 4, 1, 129, 257, ATTN_BHSD, 0);
    t->scale = 0.3, t->on_stream = 1;
}

/* KILN_TEST_PINGPONG: ping-pong on for every case, 8 warps at its tiles where a case has none. */
static void force_pingpong(void)
{
    const char *e = getenv("KILN_TEST_PINGPONG");
    if (!e || !*e || !strcmp(e, "0")) return;
    int bm = 128, bn = 64;
    if (strcmp(e, "1") && (sscanf(e, "%dx%d", &bm, &bn) != 2 || bm < 16 || bn < 16)) {
        printf("KILN_TEST_PINGPONG='%s': expected BMxBN (e.g. 128x64) or 1; using 128x64\n", e);
        bm = 128, bn = 64;
    }
    for (int i = 0; i < g_ncases; i++) {
        Case *c = &g_cases[i];
        c->pingpong = 1;
        /* d 256 at BN > 64 needs more SRAM than sm_90 has (Q, and K and V in two stages) */
        if (!c->block_m && !c->block_n)
            c->block_m = bm, c->block_n = c->d == 256 && bn > 64 ? 64 : bn, c->num_warps = 8;
    }
    printf("KILN_TEST_PINGPONG: warpgroup ping-pong on; cases without tiles of their own at %dx%d, 8 warps\n", bm,
           bn);
}

/* KILN_TEST_MBARRIER: the mbarrier hand-off on for every case, at S stages where d <= 128. */
static void force_mbarrier(void)
{
    const char *e = getenv("KILN_TEST_MBARRIER");
    if (!e || !*e || !strcmp(e, "0")) return;
    int S = atoi(e);
    if (S < 1 || S > 8) {
        printf("KILN_TEST_MBARRIER='%s': expected a stage count 1..8 (1: the table's); using 1\n", e);
        S = 1;
    }
    for (int i = 0; i < g_ncases; i++) {
        g_cases[i].mbarrier = 1;
        if (S >= 2 && g_cases[i].d <= 128) g_cases[i].num_stages = S;
    }
    printf("KILN_TEST_MBARRIER: mbarrier stage hand-off on; %s stages\n", S >= 2 ? e : "the table's");
}

/* ATTN_HEAD_DIMS: keep the cases of the listed head dims. */
static void keep_head_dims(void)
{
    const char *e = getenv("ATTN_HEAD_DIMS");
    if (!e || !*e) return;
    int n = 0;
    for (int i = 0; i < g_ncases; i++) {
        char want[16];
        snprintf(want, sizeof want, ",%d,", g_cases[i].d);
        char list[128];
        snprintf(list, sizeof list, ",%s,", e);
        if (strstr(list, want)) g_cases[n++] = g_cases[i];
    }
    printf("ATTN_HEAD_DIMS=%s: %d of %d cases\n", e, n, g_ncases);
    g_ncases = n;
}

/* KILN_TEST_OVERLAP / KILN_TEST_WARP_SPEC / KILN_TEST_TMA: the Case's flag at `field` on for every case, with
 * BMxBN/WARPS also those tiles for the cases without tiles of their own. */
static void force_option(const char *var, size_t field, const char *what)
{
    const char *e = getenv(var);
    if (!e || !*e || !strcmp(e, "0")) return;
    int bm = 0, bn = 0, w = 0;
    if (strcmp(e, "1") && (sscanf(e, "%dx%d/%d", &bm, &bn, &w) != 3 || bm < 16 || bn < 16 || w < 1)) {
        printf("%s='%s': expected 1 or BMxBN/WARPS (e.g. 128x64/8); using 1\n", var, e);
        bm = bn = w = 0;
    }
    for (int i = 0; i < g_ncases; i++) {
        Case *c = &g_cases[i];
        *(int *)((char *)c + field) = 1;
        if (bm && !c->block_m && !c->block_n)
            c->block_m = bm, c->block_n = c->d == 256 && bn > 64 ? 64 : bn, c->num_warps = w;
    }
    if (bm)
        printf("%s: %s on; cases without tiles of their own at %dx%d, %d warps\n", var, what, bm, bn, w);
    else
        printf("%s: %s on, at every case's own tiles\n", var, what);
}

static void host_setup(Case *c, uint64_t seed)
{
    AttnProblem *p = &c->p;
    *p = (AttnProblem){.batch = c->batch, .heads_q = c->hq, .heads_kv = c->hkv, .seqlen_q = c->sq,
                       .seqlen_k = c->sk, .head_dim = c->d + c->pad, .causal = c->causal,
                       .scale = c->scale > 0 ? c->scale : 1.0 / sqrt((double)c->d), .dtype = c->dtype};
    attn_set_strides(p, c->layout);   /* with the padded pitch ... */
    p->head_dim = c->d;               /* ... and the real head dim */
    c->nq = attn_numel_q(p) + 8;      /* never 0: kiln_malloc refuses 0 bytes */
    c->nkv = attn_numel_kv(p) + 8;
    c->nlse = (size_t)c->batch * c->hq * c->sq;
    size_t es = attn_dtype_size(c->dtype);
    c->q = malloc(c->nq * es), c->o = malloc(c->nq * es);
    c->k = malloc(c->nkv * es), c->v = malloc(c->nkv * es);
    c->lse = malloc(c->nlse * sizeof(float) + LSE_GUARD);
    memset(c->q, 0xFF, c->nq * es);
    memset(c->k, 0xFF, c->nkv * es);
    memset(c->v, 0xFF, c->nkv * es);
    /* random values through the strides; everything else stays NaN (0xFF bytes) */
    attn_fill_strided(c->dtype, c->q, p->q_stride, c->batch, c->hq, c->sq, c->d, seed);
    attn_fill_strided(c->dtype, c->k, p->k_stride, c->batch, c->hkv, c->sk, c->d, seed + 1);
    attn_fill_strided(c->dtype, c->v, p->v_stride, c->batch, c->hkv, c->sk, c->d, seed + 2);
}

/* ---------------- running on the GPU ---------------- */

static KilnAttentionParams api_params(const Case *c, const KilnDevPtr ptr[5])
{
    KilnAttentionParams a = {.dtype = c->dtype == ATTN_BF16 ? KILN_BF16 : KILN_F16, .batch = c->batch,
                             .heads_q = c->hq, .heads_kv = c->hkv, .seqlen_q = c->sq, .seqlen_k = c->sk,
                             .head_dim = c->d, .q = ptr[0], .k = ptr[1], .v = ptr[2], .o = ptr[3],
                             .lse = ptr[4], .softmax_scale = (float)c->scale, .causal = c->causal,
                             .block_m = c->block_m, .block_n = c->block_n, .num_warps = c->num_warps,
                             .schedule.pingpong = c->pingpong, .schedule.mbarrier = c->mbarrier, .num_stages = c->num_stages,
                             .schedule.overlap = c->overlap, .schedule.tma = c->tma, .schedule.warp_specialize = c->warp_spec,
                             .schedule.lean_producer = c->lean_producer, .schedule.persistent = c->persistent,
                             .schedule.longest_first = c->longest_first};
    memcpy(a.q_stride, c->p.q_stride, sizeof a.q_stride);
    memcpy(a.k_stride, c->p.k_stride, sizeof a.k_stride);
    memcpy(a.v_stride, c->p.v_stride, sizeof a.v_stride);
    memcpy(a.o_stride, c->p.o_stride, sizeof a.o_stride);
    return a;
}

#define TRY(call)                                           \
    do {                                                    \
        if ((c->st = (call)) != KILN_OK) goto done;         \
    } while (0)

/* Upload, call twice (the first may compile; the second is timed on the GPU and
 * on the host), download. Failures land in c->st / c->why. */
static void gpu_run(Case *c)
{
    size_t es = attn_dtype_size(c->dtype), lse_bytes = c->nlse * sizeof(float) + LSE_GUARD;
    KilnDevPtr ptr[5] = {0};
    KilnEvent *e0 = NULL, *e1 = NULL;
    KilnStream *s = c->on_stream ? g_stream : NULL;
    TRY(kiln_malloc(g_dev, c->nq * es, &ptr[0]));
    TRY(kiln_malloc(g_dev, c->nkv * es, &ptr[1]));
    TRY(kiln_malloc(g_dev, c->nkv * es, &ptr[2]));
    TRY(kiln_malloc(g_dev, c->nq * es, &ptr[3]));
    TRY(kiln_malloc(g_dev, lse_bytes, &ptr[4]));
    TRY(kiln_memcpy_htod(g_dev, ptr[0], c->q, c->nq * es));
    TRY(kiln_memcpy_htod(g_dev, ptr[1], c->k, c->nkv * es));
    TRY(kiln_memcpy_htod(g_dev, ptr[2], c->v, c->nkv * es));
    TRY(kiln_memset(g_dev, ptr[3], 0xFF, c->nq * es));
    TRY(kiln_memset(g_dev, ptr[4], 0xFF, lse_bytes));
    KilnAttentionParams a = api_params(c, ptr);
    int cached = kiln_attention_cache_size(g_dev);
    double t0 = gu_now_ms();
    TRY(kiln_attention_fwd(g_dev, &a, s));
    c->first_ms = gu_now_ms() - t0;
    c->compiled = kiln_attention_cache_size(g_dev) > cached;
    TRY(kiln_event_create(g_dev, &e0));
    TRY(kiln_event_create(g_dev, &e1));
    TRY(kiln_event_record(e0, s));
    t0 = gu_now_ms();
    TRY(kiln_attention_fwd(g_dev, &a, s));
    c->call_us = (gu_now_ms() - t0) * 1e3;
    TRY(kiln_event_record(e1, s));
    TRY(kiln_event_synchronize(e1));
    TRY(kiln_event_elapsed_ms(e0, e1, &c->gpu_ms));
    TRY(kiln_synchronize(g_dev));
    TRY(kiln_memcpy_dtoh(g_dev, c->o, ptr[3], c->nq * es));
    TRY(kiln_memcpy_dtoh(g_dev, c->lse, ptr[4], lse_bytes));
done:
    if (c->st != KILN_OK) snprintf(c->why, sizeof c->why, "%s: %.140s", kiln_status_name(c->st), kiln_last_error());
    if (c->st != KILN_OK && strstr(kiln_last_error(), "cannot build"))
        fprintf(stderr, "---- case failed to build ----\n%s\n", kiln_last_error());
    kiln_event_destroy(e0);
    kiln_event_destroy(e1);
    for (int i = 0; i < 5; i++) kiln_free(g_dev, ptr[i]);
}

/* ---------------- judging (worker threads) ---------------- */

/* Elements of O outside the problem (row padding, the slack at the end) that lost their poison. */
static int64_t pad_clobbered(const Case *c)
{
    const AttnProblem *p = &c->p;
    unsigned char *mine = calloc(c->nq, 1);
    for (int b = 0; b < p->batch; b++)
        for (int h = 0; h < p->heads_q; h++)
            for (int i = 0; i < p->seqlen_q; i++)
                memset(mine + b * p->o_stride[0] + h * p->o_stride[1] + i * p->o_stride[2], 1, (size_t)p->head_dim);
    int64_t bad = 0;
    for (size_t i = 0; i < c->nq; i++) bad += !mine[i] && ((const uint16_t *)c->o)[i] != 0xFFFF;
    free(mine);
    const unsigned char *guard = (const unsigned char *)(c->lse + c->nlse);
    for (int i = 0; i < LSE_GUARD; i++) bad += guard[i] != 0xFF;
    return bad;
}

static void judge(Case *c)
{
    if (c->st != KILN_OK) return;
    const AttnProblem *p = &c->p;
    size_t nrow = c->nlse, D = (size_t)p->head_dim;
    double *ref = malloc(sizeof(double) * (nrow * D + 1));
    double *plain = malloc(sizeof(double) * (nrow * D + 1));
    double *lse = malloc(sizeof(double) * (nrow + 1));
    attn_ref_fwd(p, c->q, c->k, c->v, ref, lse);
    attn_ref_torchlike(p, c->q, c->k, c->v, plain);
    c->e = attn_compare(p, c->o, c->lse, ref, lse);
    c->plain = attn_max_abs_diff(p, plain, ref);
    c->bound = 2 * c->plain + 1e-5;
    c->empty_bad = attn_check_empty_rows(p, c->o, c->lse);
    c->pad_bad = pad_clobbered(c);
    free(ref), free(plain), free(lse);
    if (c->e.nonfinite)
        snprintf(c->why, sizeof c->why, "%lld non-finite outputs in visible rows", (long long)c->e.nonfinite);
    else if (c->e.o_max_abs > c->bound)
        snprintf(c->why, sizeof c->why, "max |O - ref| %.3g > bound %.3g at b%d h%d i%d d%d", c->e.o_max_abs,
                 c->bound, c->e.worst_b, c->e.worst_h, c->e.worst_i, c->e.worst_d);
    else if (c->e.lse_max_rel > 1e-4)
        snprintf(c->why, sizeof c->why, "LSE relative error %.3g > 1e-4", c->e.lse_max_rel);
    else if (c->empty_bad)
        snprintf(c->why, sizeof c->why, "%lld elements of rows with no key are not O = 0 / LSE = -inf",
                 (long long)c->empty_bad);
    else if (c->pad_bad)
        snprintf(c->why, sizeof c->why, "%lld poisoned bytes/elements outside the outputs were written",
                 (long long)c->pad_bad);
    else
        c->pass = 1;
}

/* Workers judge case i once the GPU is done with it (g_ready > i). */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
static int g_ready, g_next;

static void *worker(void *arg)
{
    (void)arg;
    for (;;) {
        pthread_mutex_lock(&g_mu);
        while (g_next >= g_ready && g_ready < g_ncases) pthread_cond_wait(&g_cv, &g_mu);
        int i = g_next < g_ready ? g_next++ : -1;
        pthread_mutex_unlock(&g_mu);
        if (i < 0) return NULL;
        judge(&g_cases[i]);
        Case *c = &g_cases[i];
        free(c->q), free(c->k), free(c->v), free(c->o), free(c->lse);
        c->q = c->k = c->v = c->o = NULL, c->lse = NULL;
    }
}

static void publish(int ready)
{
    pthread_mutex_lock(&g_mu);
    g_ready = ready;
    pthread_cond_broadcast(&g_cv);
    pthread_mutex_unlock(&g_mu);
}

/* ---------------- the table ---------------- */

static void print_row(int i, const Case *c)
{
    char heads[16], len[24], tiles[24];
    snprintf(heads, sizeof heads, "%d/%d", c->hq, c->hkv);
    snprintf(len, sizeof len, "%dx%d", c->sq, c->sk);
    if (c->block_m || c->block_n) snprintf(tiles, sizeof tiles, "%dx%d", c->block_m, c->block_n);
    else snprintf(tiles, sizeof tiles, "default");
    printf("%3d %-4s %3d %-6s %d %-5s %-9s %-4s%s %-7s %9.3g %9.3g %9.2g %9.1f %8.1f %8.4f  %s%s%s\n", i,
           c->dtype == ATTN_BF16 ? "bf16" : "f16", c->d, c->causal ? "causal" : "full", c->batch, heads, len,
           c->layout == ATTN_BSHD ? "bshd" : "bhsd", c->pad ? "+" : " ", tiles, c->e.o_max_abs, c->bound,
           c->e.lse_max_rel, c->first_ms, c->call_us, (double)c->gpu_ms, c->pass ? "PASS" : "FAIL",
           c->pass ? "" : ": ", c->why);
}

static void print_table(void)
{
    printf("\n  # dtype  d  mask   B Hq/kv len       lay  tiles        err     bound   lse_rel  first_ms  call_us   gpu_ms  result\n");
    for (int i = 0; i < g_ncases; i++) print_row(i, &g_cases[i]);
    printf("(err = max |O - ref| over rows that see keys; bound = 2 * max |O_plain - ref| + 1e-5; lay '+': "
           "row pitch wider than dense;\n first_ms = host time of the first call, which compiles when the "
           "variant is new; call_us = host time of the second call;\n gpu_ms = that call on the GPU)\n");
}

/* ---------------- checks beyond the table ---------------- */

/* A rejected call on a real device leaves the poisoned output alone; zero rows are a no-op. */
static int check_rejections(void)
{
    int fails = 0;
    KilnDevPtr buf = 0;
    if (kiln_malloc(g_dev, 1 << 16, &buf) != KILN_OK) return printf("FAIL: kiln_malloc: %s\n", kiln_last_error()), 1;
    kiln_memset(g_dev, buf, 0xFF, 1 << 16);
    KilnAttentionParams a = {.dtype = KILN_F16, .batch = 1, .heads_q = 4, .heads_kv = 3, .seqlen_q = 16,
                             .seqlen_k = 16, .head_dim = 64, .q = buf, .k = buf, .v = buf,
                             .o = buf + 16384, .lse = buf + 49152,
                             .q_stride = {4096, 1024, 64}, .k_stride = {3072, 1024, 64},
                             .v_stride = {3072, 1024, 64}, .o_stride = {4096, 1024, 64}};
    KilnStatus st = kiln_attention_fwd(g_dev, &a, NULL);
    if (st != KILN_ERR_USAGE || !strstr(kiln_last_error(), "multiple of heads_kv"))
        fails++, printf("FAIL: GQA 4/3 gave %s: %s\n", kiln_status_name(st), kiln_last_error());
    a.heads_kv = 2, a.head_dim = 80;
    st = kiln_attention_fwd(g_dev, &a, NULL);
    if (st != KILN_ERR_UNSUPPORTED)
        fails++, printf("FAIL: head_dim 80 gave %s: %s\n", kiln_status_name(st), kiln_last_error());
    a.head_dim = 64, a.seqlen_q = 0;
    st = kiln_attention_fwd(g_dev, &a, NULL);
    if (st != KILN_OK) fails++, printf("FAIL: seqlen_q 0 gave %s: %s\n", kiln_status_name(st), kiln_last_error());
    kiln_synchronize(g_dev);
    static uint16_t host[1 << 15];
    kiln_memcpy_dtoh(g_dev, host, buf, sizeof host);
    int64_t touched = 0;
    for (size_t i = 0; i < sizeof host / 2; i++) touched += host[i] != 0xFFFF;
    if (touched) fails++, printf("FAIL: rejected / empty calls wrote %lld elements\n", (long long)touched);
    kiln_free(g_dev, buf);
    printf("checks: rejected calls (GQA 4/3, head_dim 80) and seqlen_q = 0 launch nothing: %s\n",
           fails ? "FAIL" : "PASS");
    return fails;
}

static int g_sm;   /* the device's sm_version */

/* Whether the call of case c copies K/V through TMA, which makes a variant of its own: asked
 * (KILN_TEST_TMA), or the sm_90 d 128 table row's (jit/attention_tune.c: not the causal
 * N <= 1024 row) where K/V can be mapped (16-byte strides, none 0); never without keys. */
static int tma_of(const Case *c)
{
    if (c->sk == 0) return 0;
    if (c->tma) return 1;
    if (g_sm < 90 || c->d != 128 || c->block_m || c->block_n || (c->causal && c->sq <= 1024)) return 0;
    for (int i = 0; i < 3; i++)
        if (c->p.k_stride[i] <= 0 || c->p.k_stride[i] % 8 || c->p.v_stride[i] <= 0 || c->p.v_stride[i] % 8) return 0;
    return 1;
}

static int distinct_variants(void)
{
    int n = 0;
    for (int i = 0; i < g_ncases; i++) {
        const Case *c = &g_cases[i];
        int seen = c->sq == 0;
        for (int j = 0; j < i && !seen; j++) {
            const Case *o = &g_cases[j];
            seen = o->dtype == c->dtype && o->d == c->d && o->causal == c->causal && o->block_m == c->block_m &&
                   o->block_n == c->block_n && o->num_warps == c->num_warps && tma_of(o) == tma_of(c);
        }
        n += !seen;
    }
    return n;
}

/* The in-process cache: one entry per variant; a cached call costs microseconds;
 * after a clear the variant comes back from the on-disk cache. */
static int check_cache(void)
{
    int fails = 0, want = distinct_variants(), have = kiln_attention_cache_size(g_dev);
    if (have != want) fails++, printf("FAIL: %d variants cached, expected %d\n", have, want);
    Case *c = &g_cases[1];   /* f16 d=32, 17x17: a small, already compiled variant */
    host_setup(c, 99);
    size_t es = attn_dtype_size(c->dtype);
    KilnDevPtr ptr[5] = {0};
    size_t bytes[5] = {c->nq * es, c->nkv * es, c->nkv * es, c->nq * es, c->nlse * sizeof(float)};
    for (int i = 0; i < 5; i++) kiln_malloc(g_dev, bytes[i], &ptr[i]);
    KilnAttentionParams a = api_params(c, ptr);
    const int reps = 200;
    double t0 = gu_now_ms();
    KilnStatus st = KILN_OK;
    for (int r = 0; r < reps && st == KILN_OK; r++) st = kiln_attention_fwd(g_dev, &a, NULL);
    double us = (gu_now_ms() - t0) * 1e3 / reps;
    kiln_synchronize(g_dev);
    if (st != KILN_OK || us > 1000) fails++, printf("FAIL: cached calls: %s, %.1f us each\n", kiln_status_name(st), us);
    kiln_attention_cache_clear(g_dev);
    if (kiln_attention_cache_size(g_dev) != 0) fails++, printf("FAIL: cache not empty after clear\n");
    t0 = gu_now_ms();
    st = kiln_attention_fwd(g_dev, &a, NULL);
    double disk_ms = gu_now_ms() - t0;
    kiln_synchronize(g_dev);
    if (st != KILN_OK || kiln_attention_cache_size(g_dev) != 1)
        fails++, printf("FAIL: call after clear: %s (%s), %d cached\n", kiln_status_name(st), kiln_last_error(),
                        kiln_attention_cache_size(g_dev));
    for (int i = 0; i < 5; i++) kiln_free(g_dev, ptr[i]);
    free(c->q), free(c->k), free(c->v), free(c->o), free(c->lse);
    printf("checks: %d variants cached (expected %d); cached call %.1f us (host, mean of %d); after a clear, "
           "the on-disk cache served it in %.1f ms: %s\n", have, want, us, reps, disk_ms, fails ? "FAIL" : "PASS");
    return fails;
}

int main(void)
{
    KilnDeviceInfo info;
    int started = gu_begin(&g_dev, &info, "/tmp/kiln-attn-cache-XXXXXX");
    if (started >= 0) return started;
    g_sm = info.sm_version;
    if (kiln_stream_create(g_dev, &g_stream) != KILN_OK) return printf("FAIL: stream: %s\n", kiln_last_error()), 1;
    double t_start = gu_now_ms();
    make_cases();
    const char *max_cases = getenv("ATTN_MAX_CASES");   /* a quick partial run */
    if (max_cases && atoi(max_cases) > 0 && atoi(max_cases) < g_ncases) g_ncases = atoi(max_cases);
    keep_head_dims();
    force_pingpong();
    force_mbarrier();
    force_option("KILN_TEST_TMA", offsetof(Case, tma), "TMA copies of K and V");
    force_option("KILN_TEST_OVERLAP", offsetof(Case, overlap), "rotated key loop");
    force_option("KILN_TEST_WARP_SPEC", offsetof(Case, warp_spec), "warp specialisation (a producer warpgroup)");
    force_option("KILN_TEST_LEAN_PRODUCER", offsetof(Case, lean_producer), "a TMA producer at 24 registers");
    force_option("KILN_TEST_PERSISTENT", offsetof(Case, persistent), "persistent programs (static tile order)");
    force_option("KILN_TEST_LONGEST_FIRST", offsetof(Case, longest_first), "persistent programs, longest first");
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    int nthreads = ncpu > 2 ? (int)(ncpu > 33 ? 32 : ncpu - 1) : 1;
    pthread_t th[32];
    for (int i = 0; i < nthreads; i++) pthread_create(&th[i], NULL, worker, NULL);
    double compile_ms = 0;
    for (int i = 0; i < g_ncases; i++) {
        Case *c = &g_cases[i];
        host_setup(c, 1000 + 7 * (uint64_t)i);
        gpu_run(c);
        /* progress, so a slow compile or a hung kernel shows where */
        fprintf(stderr, "[%d/%d] %s d=%d %s %dx%d: first call %.0f ms%s, second %.0f us, gpu %.3f ms%s%s\n",
                i + 1, g_ncases, c->dtype == ATTN_BF16 ? "bf16" : "f16", c->d, c->causal ? "causal" : "full",
                c->sq, c->sk, c->first_ms, c->compiled ? " (compiled)" : "", c->call_us, (double)c->gpu_ms,
                c->st ? " " : "", c->why);
        if (c->compiled) compile_ms += c->first_ms;
        publish(i + 1);
    }
    double gpu_done = gu_now_ms();
    for (int i = 0; i < nthreads; i++) pthread_join(th[i], NULL);
    print_table();
    int fails = 0;
    for (int i = 0; i < g_ncases; i++) fails += !g_cases[i].pass;
    int check_fails = check_rejections() + check_cache();
    kiln_attention_cache_clear(g_dev);
    kiln_stream_destroy(g_stream);
    kiln_shutdown(g_dev);
    printf("summary: %d/%d cases pass, %d check failures; %d variants, %.1f s compiling (first calls that "
           "compiled); GPU phase %.1f s, total %.1f s\n",
           g_ncases - fails, g_ncases, check_fails, distinct_variants(), compile_ms / 1e3,
           (gpu_done - t_start) / 1e3, (gu_now_ms() - t_start) / 1e3);
    free(g_cases);
    return fails || check_fails ? EXIT_FAILURE : EXIT_SUCCESS;
}
