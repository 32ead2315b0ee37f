/* test_e2e_gpu_attention_varlen.c — packed variable-length batches (cu_seqlens_q/k) through
 * kiln_attention_fwd and kiln_attention_bwd on the GPU, against float64.
 *
 * The sweep: dtype (f16, bf16) x head dim (64, 128, 256) x causal x deterministic (24 cases)
 * with GQA/MQA, [total, heads, d] and [heads, total, d] layouts and padded pitches rotating;
 * every pack holds ragged sequences (a 0-length and a 1-length one, lengths not multiples of
 * any block, len_q > len_k: causal rows that see no key, a sequence with no keys), plus one
 * long pack (sequences of ~1000 tokens) per dtype.
 *
 * Each case: the packed forward (O, LSE [heads, total_q]) and backward (dQ, dK, dV) into
 * NaN-poisoned buffers; judged per sequence against tools/attn_ref.c with FlashAttention's
 * rules (O: max |O - ref| <= 2 * max |O_plain - ref| + 1e-5, LSE within 1e-4 relative, rows
 * that see no key O = 0, LSE = -inf, dQ = 0; dQ, dK, dV: the same rule on gradients); the
 * padding of every output keeps its poison. Then, with the forward's tiles pinned (64 x 64:
 * the defaults table picks tiles by seqlen_q, which is the max length for the pack and each
 * sequence's own length alone), the pack runs again and every sequence runs alone through
 * the fixed-length calls (batch 1, pointers advanced to its first token): O and LSE must be
 * bit-identical, and so must dQ, dK, dV in deterministic mode (the atomic dQ path sums in a
 * run-dependent order, so there dQ is only judged by the rule).
 *
 * One line per case, then `ROW attn_varlen ...`: the summary the lead reads.
 * Without a GPU: one line "SKIP: no GPU (<reason>)" and success.
 */
#include "kiln.h"
#include "tests/gpu/gpu_util.h"
#include "tools/attn_ref.c"   /* the reference is a tool, not a library: compiled in here */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXSEQ 8

typedef struct Case {
    AttnDtype dtype;
    int d, causal, det, hq, hkv, head_major, pad, nseq;
    int lens_q[MAXSEQ], lens_k[MAXSEQ];
    int cu_q[MAXSEQ + 1], cu_k[MAXSEQ + 1], total_q, total_k, max_q, max_k;
    AttnProblem p;                 /* strides {0, head, token} */
    void *q, *k, *v, *dout;        /* inputs */
    /* [0] the pack at the default tiles, [1] at pinned tiles, [2] the sequences alone (pinned) */
    void *o[3], *dq[3], *dk[3], *dv[3];
    float *lse[3];                 /* [heads, total_q] */
    size_t nq, nkv;
    KilnStatus st;
    double ms_fwd, ms_bwd;
    double o_err, o_bound, lse_err, err[3], bound[3];
    int64_t nonfinite, empty_bad, pad_bad;
    int identical;
    int pass;
    char why[200];
} Case;

static KilnDevice *g_dev;

static void host_setup(Case *c, uint64_t seed)
{
    int pitch = c->d + c->pad;
    AttnProblem *p = &c->p;
    *p = (AttnProblem){.heads_q = c->hq, .heads_kv = c->hkv, .head_dim = c->d, .causal = c->causal,
                       .scale = 1.0 / sqrt((double)c->d), .dtype = c->dtype};
    attn_varlen_pack(p, c->nseq, c->lens_q, c->lens_k, c->head_major, pitch, c->cu_q, c->cu_k);
    c->max_q = p->seqlen_q, c->max_k = p->seqlen_k;
    c->total_q = c->cu_q[c->nseq], c->total_k = c->cu_k[c->nseq];
    c->nq = (size_t)c->total_q * c->hq * pitch + 8;
    c->nkv = (size_t)c->total_k * c->hkv * pitch + 8;
    size_t es = attn_dtype_size(c->dtype);
    void **bufs[] = {&c->q, &c->dout, &c->o[0], &c->o[1], &c->o[2], &c->dq[0], &c->dq[1], &c->dq[2],
                     &c->k, &c->v, &c->dk[0], &c->dk[1], &c->dk[2], &c->dv[0], &c->dv[1], &c->dv[2]};
    for (int i = 0; i < 16; i++) {
        size_t n = (i < 8 ? c->nq : c->nkv) * es;
        *bufs[i] = malloc(n);
        memset(*bufs[i], 0xFF, n);
    }
    for (int i = 0; i < 3; i++) {
        c->lse[i] = malloc(sizeof(float) * ((size_t)c->hq * c->total_q + 4));
        memset(c->lse[i], 0xFF, sizeof(float) * ((size_t)c->hq * c->total_q + 4));
    }
    attn_fill_strided(c->dtype, c->q, p->q_stride, 1, c->hq, c->total_q, c->d, seed);
    attn_fill_strided(c->dtype, c->k, p->k_stride, 1, c->hkv, c->total_k, c->d, seed + 1);
    attn_fill_strided(c->dtype, c->v, p->v_stride, 1, c->hkv, c->total_k, c->d, seed + 2);
    attn_fill_strided(c->dtype, c->dout, p->o_stride, 1, c->hq, c->total_q, c->d, seed + 3);
}

static void host_free(Case *c)
{
    void *bufs[] = {c->q, c->dout, c->k, c->v};
    for (int i = 0; i < 4; i++) free(bufs[i]);
    for (int r = 0; r < 3; r++) {
        free(c->o[r]), free(c->dq[r]), free(c->dk[r]), free(c->dv[r]);
        free(c->lse[r]);
    }
}

#define TRY(call)                                   \
    do {                                            \
        if ((c->st = (call)) != KILN_OK) goto done; \
    } while (0)

/* Device buffers: q k v o lse dout dq dk dv scratch cu_q cu_k. */
enum { NBUF = 12 };

/* The call for the whole pack, or (b >= 0) for sequence b alone through the fixed-length API;
 * pin: the forward's tiles 64 x 64 instead of the table's. */
static KilnAttentionBwdParams params(const Case *c, const KilnDevPtr ptr[NBUF], int b, bool pin)
{
    size_t es = attn_dtype_size(c->dtype);
    const AttnProblem *p = &c->p;
    KilnAttentionBwdParams bp = {.deterministic = c->det};
    KilnAttentionParams *f = &bp.fwd;
    *f = (KilnAttentionParams){.dtype = c->dtype == ATTN_BF16 ? KILN_BF16 : KILN_F16, .batch = c->nseq,
                               .heads_q = c->hq, .heads_kv = c->hkv, .seqlen_q = c->max_q, .seqlen_k = c->max_k,
                               .head_dim = c->d, .causal = c->causal, .q = ptr[0], .k = ptr[1], .v = ptr[2],
                               .o = ptr[3], .lse = ptr[4], .cu_seqlens_q = ptr[10], .cu_seqlens_k = ptr[11],
                               .total_q = c->total_q, .total_k = c->total_k};
    bp.dout = ptr[5], bp.dq = ptr[6], bp.dk = ptr[7], bp.dv = ptr[8], bp.scratch = ptr[9];
    memcpy(f->q_stride, p->q_stride, sizeof f->q_stride);
    memcpy(f->k_stride, p->k_stride, sizeof f->k_stride);
    memcpy(f->v_stride, p->v_stride, sizeof f->v_stride);
    memcpy(f->o_stride, p->o_stride, sizeof f->o_stride);
    memcpy(bp.dout_stride, p->o_stride, sizeof bp.dout_stride);
    memcpy(bp.dq_stride, p->q_stride, sizeof bp.dq_stride);
    memcpy(bp.dk_stride, p->k_stride, sizeof bp.dk_stride);
    memcpy(bp.dv_stride, p->v_stride, sizeof bp.dv_stride);
    /* the whole call's scratch (a sequence alone below needs less of the same buffer) */
    bp.scratch_size = kiln_attention_bwd_scratch_size(&bp);
    if (pin) f->block_m = f->block_n = 64;
    if (b < 0) return bp;
    /* sequence b alone: batch 1, its lengths, pointers at its first token, LSE dense [heads, len] */
    AttnVarlenSeq s = attn_varlen_seq(p, c->cu_q, c->cu_k, b);
    f->batch = 1, f->seqlen_q = s.p.seqlen_q, f->seqlen_k = s.p.seqlen_k;
    f->cu_seqlens_q = f->cu_seqlens_k = 0, f->total_q = f->total_k = 0;
    f->q += s.q_off * es, f->o += s.o_off * es, bp.dout += s.o_off * es, bp.dq += s.q_off * es;
    f->k += s.k_off * es, f->v += s.v_off * es, bp.dk += s.k_off * es, bp.dv += s.v_off * es;
    if (s.p.seqlen_k == 0) f->k = f->v = 0;
    return bp;
}

/* The packed calls, then the sequences alone (their pointers advanced by token offsets
 * times a token stride that is a multiple of 8 elements, so they stay 16-byte aligned). */
static void gpu_run(Case *c)
{
    size_t es = attn_dtype_size(c->dtype), nlse = (size_t)c->hq * c->total_q + 4;
    KilnDevPtr ptr[NBUF] = {0};
    size_t bytes[NBUF] = {c->nq * es, c->nkv * es, c->nkv * es, c->nq * es, nlse * 4, c->nq * es, c->nq * es,
                          c->nkv * es, c->nkv * es, 0, sizeof c->cu_q, sizeof c->cu_k};
    for (int i = 0; i < NBUF; i++)
        if (i != 9) TRY(kiln_malloc(g_dev, bytes[i], &ptr[i]));
    /* the scratch's size from the complete call (its packed lengths need cu_seqlens: a call
     * the size function would refuse has size 0) */
    KilnAttentionBwdParams bp = params(c, ptr, -1, false);
    bytes[9] = kiln_attention_bwd_scratch_size(&bp);
    if (bytes[9] == 0) {   /* the call is refused: its message, from kiln_last_error */
        c->st = kiln_attention_bwd_check(&bp);
        if (c->st == KILN_OK) c->st = KILN_ERR_INTERNAL;
        goto done;
    }
    TRY(kiln_malloc(g_dev, bytes[9], &ptr[9]));
    TRY(kiln_memcpy_htod(g_dev, ptr[0], c->q, bytes[0]));
    TRY(kiln_memcpy_htod(g_dev, ptr[1], c->k, bytes[1]));
    TRY(kiln_memcpy_htod(g_dev, ptr[2], c->v, bytes[2]));
    TRY(kiln_memcpy_htod(g_dev, ptr[5], c->dout, bytes[5]));
    TRY(kiln_memcpy_htod(g_dev, ptr[10], c->cu_q, bytes[10]));
    TRY(kiln_memcpy_htod(g_dev, ptr[11], c->cu_k, bytes[11]));
    for (int run = 0; run < 3; run++) {
        for (int i = 3; i < 10; i++)
            if (i != 5) TRY(kiln_memset(g_dev, ptr[i], 0xFF, bytes[i]));
        TRY(kiln_synchronize(g_dev));
        double t0 = gu_now_ms();
        if (run < 2) {
            bp = params(c, ptr, -1, run == 1);
            TRY(kiln_attention_fwd(g_dev, &bp.fwd, NULL));
            TRY(kiln_synchronize(g_dev));
            if (run == 0) c->ms_fwd = gu_now_ms() - t0;
            t0 = gu_now_ms();
            TRY(kiln_attention_bwd(g_dev, &bp, NULL));
            TRY(kiln_synchronize(g_dev));
            if (run == 0) c->ms_bwd = gu_now_ms() - t0;
            TRY(kiln_memcpy_dtoh(g_dev, c->lse[run], ptr[4], nlse * 4));
        } else {
            /* one sequence at a time; its LSE [heads, len] goes to the start of the LSE buffer */
            for (int b = 0; b < c->nseq; b++) {
                KilnAttentionBwdParams one = params(c, ptr, b, true);
                if (one.fwd.seqlen_q == 0 && one.fwd.seqlen_k == 0) continue;
                TRY(kiln_attention_fwd(g_dev, &one.fwd, NULL));
                TRY(kiln_attention_bwd(g_dev, &one, NULL));
                TRY(kiln_synchronize(g_dev));
                size_t nl = (size_t)c->hq * one.fwd.seqlen_q + 1;
                float *l = malloc(sizeof(float) * nl);
                c->st = kiln_memcpy_dtoh(g_dev, l, ptr[4], sizeof(float) * nl);
                for (int h = 0; h < c->hq && c->st == KILN_OK; h++)
                    for (int i = 0; i < one.fwd.seqlen_q; i++)
                        c->lse[2][(size_t)h * c->total_q + c->cu_q[b] + i] = l[(size_t)h * one.fwd.seqlen_q + i];
                free(l);
                if (c->st != KILN_OK) goto done;
            }
        }
        TRY(kiln_memcpy_dtoh(g_dev, c->o[run], ptr[3], bytes[3]));
        TRY(kiln_memcpy_dtoh(g_dev, c->dq[run], ptr[6], bytes[6]));
        TRY(kiln_memcpy_dtoh(g_dev, c->dk[run], ptr[7], bytes[7]));
        TRY(kiln_memcpy_dtoh(g_dev, c->dv[run], ptr[8], bytes[8]));
    }
done:
    if (c->st != KILN_OK) snprintf(c->why, sizeof c->why, "%s: %.180s", kiln_status_name(c->st), kiln_last_error());
    for (int i = 0; i < NBUF; i++) kiln_free(g_dev, ptr[i]);
}

static void judge(Case *c)
{
    if (c->st != KILN_OK) return;
    AttnDecodeErr f = attn_varlen_judge(&c->p, c->cu_q, c->cu_k, c->q, c->k, c->v, c->o[0], c->lse[0]);
    c->o_err = f.e.o_max_abs, c->o_bound = 2 * f.plain_err + 1e-5, c->lse_err = f.e.lse_max_rel;
    c->nonfinite = f.e.nonfinite, c->empty_bad = f.empty_bad;
    AttnVarlenBwdErr g = attn_varlen_bwd_judge(&c->p, c->cu_q, c->cu_k, c->q, c->k, c->v, c->dout, c->dq[0],
                                               c->dk[0], c->dv[0]);
    for (int t = 0; t < 3; t++) c->err[t] = g.err[t], c->bound[t] = 2 * g.plain[t] + 1e-5;
    c->nonfinite += g.nonfinite, c->empty_bad += g.empty_bad;
    const AttnProblem *p = &c->p;
    const void *outs[4] = {c->o[0], c->dq[0], c->dk[0], c->dv[0]};
    const int64_t *sts[4] = {p->o_stride, p->q_stride, p->k_stride, p->v_stride};
    for (int t = 0; t < 4; t++)
        c->pad_bad += attn_pad_clobbered(outs[t], t < 2 ? c->nq : c->nkv, sts[t], 1, t < 2 ? c->hq : c->hkv,
                                         t < 2 ? c->total_q : c->total_k, c->d);
    size_t es = attn_dtype_size(c->dtype);
    c->identical = !memcmp(c->o[1], c->o[2], c->nq * es) &&
                   !memcmp(c->lse[1], c->lse[2], sizeof(float) * (size_t)c->hq * c->total_q) &&
                   (!c->det || (!memcmp(c->dq[1], c->dq[2], c->nq * es) && !memcmp(c->dk[1], c->dk[2], c->nkv * es) &&
                                !memcmp(c->dv[1], c->dv[2], c->nkv * es)));
    static const char *nm[3] = {"dQ", "dK", "dV"};
    int bad_t = -1;
    for (int t = 0; t < 3 && bad_t < 0; t++)
        if (!(c->err[t] <= c->bound[t])) bad_t = t;
    if (c->nonfinite)
        snprintf(c->why, sizeof c->why, "%lld non-finite outputs", (long long)c->nonfinite);
    else if (!(c->o_err <= c->o_bound))
        snprintf(c->why, sizeof c->why, "max |O - ref| %.3g > bound %.3g", c->o_err, c->o_bound);
    else if (!(c->lse_err <= 1e-4))
        snprintf(c->why, sizeof c->why, "LSE relative error %.3g", c->lse_err);
    else if (bad_t >= 0)
        snprintf(c->why, sizeof c->why, "max |%s - ref| %.3g > bound %.3g", nm[bad_t], c->err[bad_t], c->bound[bad_t]);
    else if (c->empty_bad)
        snprintf(c->why, sizeof c->why, "%lld elements of rows with no key are not O = 0, LSE = -inf, dQ = 0",
                 (long long)c->empty_bad);
    else if (c->pad_bad)
        snprintf(c->why, sizeof c->why, "%lld elements outside the outputs were written", (long long)c->pad_bad);
    else if (!c->identical)
        snprintf(c->why, sizeof c->why, "the packed run differs from the sequences run alone");
    else
        c->pass = 1;
}

static int make_cases(Case *cases)
{
    static const int dims[] = {64, 128, 256};
    static const struct { int n, q[MAXSEQ], k[MAXSEQ]; } packs[] = {
        {5, {37, 0, 1, 200, 129}, {37, 5, 1, 333, 64}},
        {6, {64, 1, 300, 0, 77, 15}, {64, 1, 250, 9, 0, 40}},
        {4, {513, 3, 0, 190}, {400, 3, 17, 190}},
    };
    static const struct { int hq, hkv; } groups[] = {{2, 2}, {4, 2}, {4, 1}};
    int n = 0;
    for (int dt = 0; dt < 2; dt++)
        for (int di = 0; di < 3; di++)
            for (int causal = 0; causal < 2; causal++)
                for (int det = 0; det < 2; det++, n++) {
                    int r = n + di, k = r % 3, g = (n / 3 + dt) % 3;
                    cases[n] = (Case){.dtype = dt ? ATTN_BF16 : ATTN_F16, .d = dims[di], .causal = causal, .det = det,
                                      .hq = groups[g].hq, .hkv = groups[g].hkv, .head_major = r % 2,
                                      .pad = r % 3 == 1 ? 8 : 0, .nseq = packs[k].n};
                    memcpy(cases[n].lens_q, packs[k].q, sizeof packs[k].q);
                    memcpy(cases[n].lens_k, packs[k].k, sizeof packs[k].k);
                }
    for (int dt = 0; dt < 2; dt++, n++)   /* a long pack: several blocks of every tile size */
        cases[n] = (Case){.dtype = dt ? ATTN_BF16 : ATTN_F16, .d = 128, .causal = 1, .det = dt, .hq = 4, .hkv = 2,
                          .nseq = 3, .lens_q = {1000, 1, 1500}, .lens_k = {1000, 700, 1501}};
    return n;
}

int main(void)
{
    KilnDeviceInfo info;
    int started = gu_begin(&g_dev, &info, "/tmp/kiln-attn-varlen-cache-XXXXXX");
    if (started >= 0) return started;
    static Case cases[32];
    int n = make_cases(cases), pass = 0;
    double worst[4] = {0, 0, 0, 0};
    printf("  # dtype   d mask   det Hq/kv lay  seqs total_q/k  O err/bound        dQ err/bound       dK err/bound"
           "       dV err/bound      fwd_ms  bwd_ms  result\n");
    for (int i = 0; i < n; i++) {
        Case *c = &cases[i];
        host_setup(c, 7000 + 17 * (uint64_t)i);
        gpu_run(c);
        fprintf(stderr, "[%d/%d] %s d=%d %s det=%d: fwd %.0f ms bwd %.0f ms %s\n", i + 1, n,
                c->dtype == ATTN_BF16 ? "bf16" : "f16", c->d, c->causal ? "causal" : "full", c->det, c->ms_fwd,
                c->ms_bwd, c->why);
        judge(c);
        pass += c->pass;
        if (c->st == KILN_OK) {
            worst[0] = fmax(worst[0], c->o_err / c->o_bound);
            for (int t = 0; t < 3; t++) worst[t + 1] = fmax(worst[t + 1], c->err[t] / c->bound[t]);
        }
        printf("%3d %-5s %3d %-6s %d   %d/%d %s%s %4d %5d/%-5d %8.2g/%-8.2g %8.2g/%-8.2g %8.2g/%-8.2g %8.2g/%-8.2g "
               "%7.1f %7.1f  %s%s%s\n",
               i, c->dtype == ATTN_BF16 ? "bf16" : "f16", c->d, c->causal ? "causal" : "full", c->det, c->hq, c->hkv,
               c->head_major ? "htd" : "thd", c->pad ? "+" : " ", c->nseq, c->total_q, c->total_k, c->o_err,
               c->o_bound, c->err[0], c->bound[0], c->err[1], c->bound[1], c->err[2], c->bound[2], c->ms_fwd,
               c->ms_bwd, c->pass ? "PASS" : "FAIL", c->pass ? "" : ": ", c->why);
        host_free(c);
    }
    printf("ROW attn_varlen %s: %d/%d cases pass; worst err/bound O %.2f dQ %.2f dK %.2f dV %.2f; %d variants cached\n",
           info.name, pass, n, worst[0], worst[1], worst[2], worst[3], kiln_attention_cache_size(g_dev));
    kiln_attention_cache_clear(g_dev);
    kiln_shutdown(g_dev);
    return pass == n ? EXIT_SUCCESS : EXIT_FAILURE;
}
