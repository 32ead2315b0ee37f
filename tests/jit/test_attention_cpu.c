/* test_attention_cpu.c — kiln_attention_bwd_cpu and kiln_attention_decode_cpu, the public
 * interpreter forms of the backward and the decode, against float64 references
 * (tools/attn_ref.c), without a GPU.
 *
 * Backward: random f16 inputs in padded [b, s, h, d] tensors (the bytes between rows
 * poisoned), GQA 4/2, causal and not, lengths that are no multiple of the 64-row tiles; the
 * forward by kiln_attention_fwd_cpu, then the backward both ways (atomic dQ accumulator and
 * the deterministic dQ pass), the gradients poisoned before each run. Judged by the accuracy
 * rule of the interpreter tests: max |g - ref| <= 2 max |g_plain - ref| + 1e-5 (g_plain the
 * backward as PyTorch computes it in f16), no NaN, and no byte between the rows written.
 * Decode: a contiguous and a paged cache of ragged lengths, judged by attn_decode_judge.
 * And: what the calls refuse (NULL, a missing scratch, a host buffer or scratch smaller than
 * the shape spans, naming its size field) before running anything.
 */
#include "testutil.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kiln.h"
#include "tools/attn_ref.c"   /* the reference is a tool, not a library: compiled in here */
#include "jit/attn_padded.h"

typedef struct Buf { uint16_t *p; size_t n; } Buf;

static Buf poisoned(size_t n)
{
    Buf b = {malloc(n * 2), n};
    ck_assert_ptr_nonnull(b.p);
    memset(b.p, 0xFF, n * 2);
    return b;
}

typedef struct BwdCase { const char *what; int batch, hq, hkv, sq, sk, causal; } BwdCase;

static void run_bwd(const BwdCase *c, int deterministic)
{
    const int d = 64;
    AttnProblem ap = attn_padded_problem(c->batch, c->hq, c->hkv, c->sq, c->sk, d, c->causal);
    size_t nq = (size_t)c->batch * ap.q_stride[0], nk = (size_t)c->batch * ap.k_stride[0];
    Buf q = poisoned(nq), k = poisoned(nk), v = poisoned(nk), o = poisoned(nq), dout = poisoned(nq);
    attn_fill_strided(ATTN_F16, q.p, ap.q_stride, c->batch, c->hq, c->sq, d, 11);
    attn_fill_strided(ATTN_F16, k.p, ap.k_stride, c->batch, c->hkv, c->sk, d, 12);
    attn_fill_strided(ATTN_F16, v.p, ap.v_stride, c->batch, c->hkv, c->sk, d, 13);
    attn_fill_strided(ATTN_F16, dout.p, ap.o_stride, c->batch, c->hq, c->sq, d, 14);
    float *lse = malloc((size_t)c->batch * c->hq * c->sq * 4);
    KilnAttentionBwdParams p = {.deterministic = deterministic};
    KilnAttentionParams *f = &p.fwd;
    *f = (KilnAttentionParams){.dtype = KILN_F16, .batch = c->batch, .heads_q = c->hq, .heads_kv = c->hkv,
                               .seqlen_q = c->sq, .seqlen_k = c->sk, .head_dim = d, .causal = c->causal,
                               .q = (uintptr_t)q.p, .k = (uintptr_t)k.p, .v = (uintptr_t)v.p, .o = (uintptr_t)o.p,
                               .lse = (uintptr_t)lse};
    memcpy(f->q_stride, ap.q_stride, sizeof ap.q_stride);
    memcpy(f->k_stride, ap.k_stride, sizeof ap.k_stride);
    memcpy(f->v_stride, ap.v_stride, sizeof ap.v_stride);
    memcpy(f->o_stride, ap.o_stride, sizeof ap.o_stride);
    f->q_bytes = f->o_bytes = nq * 2;   /* the host buffers' sizes: the _cpu calls bound every access */
    f->k_bytes = f->v_bytes = nk * 2;
    f->lse_bytes = (size_t)c->batch * c->hq * c->sq * 4;
    ck_assert_msg(kiln_attention_fwd_cpu(f) == KILN_OK, "%s: forward: %s", c->what, kiln_last_error());

    Buf dq = poisoned(nq), dk = poisoned(nk), dv = poisoned(nk);
    size_t scratch_bytes = kiln_attention_bwd_scratch_size(&p);
    ck_assert_uint_gt(scratch_bytes, 0);
    void *scratch = aligned_alloc(256, (scratch_bytes + 255) / 256 * 256);
    memset(scratch, 0xFF, scratch_bytes);
    p.dout = (uintptr_t)dout.p, p.dq = (uintptr_t)dq.p, p.dk = (uintptr_t)dk.p, p.dv = (uintptr_t)dv.p;
    p.scratch = (uintptr_t)scratch;
    p.scratch_size = scratch_bytes;
    memcpy(p.dout_stride, ap.o_stride, sizeof ap.o_stride);
    memcpy(p.dq_stride, ap.q_stride, sizeof ap.q_stride);
    memcpy(p.dk_stride, ap.k_stride, sizeof ap.k_stride);
    memcpy(p.dv_stride, ap.v_stride, sizeof ap.v_stride);
    p.dout_bytes = p.dq_bytes = nq * 2, p.dk_bytes = p.dv_bytes = nk * 2;
    ck_assert_msg(kiln_attention_bwd_cpu(&p) == KILN_OK, "%s: backward: %s", c->what, kiln_last_error());

    size_t dq_n = (size_t)c->batch * c->hq * c->sq * d, dk_n = (size_t)c->batch * c->hkv * c->sk * d;
    double *ref[3], *plain[3];
    size_t ns[3] = {dq_n, dk_n, dk_n};
    for (int t = 0; t < 3; t++) ref[t] = malloc(ns[t] * 8), plain[t] = malloc(ns[t] * 8);
    attn_ref_bwd(&ap, q.p, k.p, v.p, dout.p, ref[0], ref[1], ref[2]);
    attn_ref_bwd_torchlike(&ap, q.p, k.p, v.p, dout.p, plain[0], plain[1], plain[2]);
    const Buf *g[3] = {&dq, &dk, &dv};
    const int64_t *st[3] = {ap.q_stride, ap.k_stride, ap.v_stride};
    const int heads[3] = {c->hq, c->hkv, c->hkv}, lens[3] = {c->sq, c->sk, c->sk};
    static const char *const nm[3] = {"dQ", "dK", "dV"};
    for (int t = 0; t < 3; t++) {
        int64_t nonfinite = 0;
        double err = attn_grad_max_err(ATTN_F16, g[t]->p, st[t], c->batch, heads[t], lens[t], d, ref[t], &nonfinite);
        double bound = 2 * attn_dense_max_diff(plain[t], ref[t], ns[t]) + 1e-5;
        ck_assert_msg(nonfinite == 0, "%s (det %d): %lld non-finite %s", c->what, deterministic, (long long)nonfinite,
                      nm[t]);
        ck_assert_msg(err <= bound, "%s (det %d): max |%s - ref| = %.3g > %.3g", c->what, deterministic, nm[t], err,
                      bound);
        int64_t clobbered = attn_pad_clobbered(g[t]->p, g[t]->n, st[t], c->batch, heads[t], lens[t], d);
        ck_assert_msg(clobbered == 0, "%s: %s wrote %lld padding elements", c->what, nm[t], (long long)clobbered);
    }
    for (int t = 0; t < 3; t++) free(ref[t]), free(plain[t]);
    free(q.p), free(k.p), free(v.p), free(o.p), free(dout.p), free(dq.p), free(dk.p), free(dv.p);
    free(lse), free(scratch);
}

static const BwdCase k_bwd[] = {
    {"gqa 4/2, 70 x 93, causal", 2, 4, 2, 70, 93, 1},
    {"mha 2/2, 100 x 37, not causal", 1, 2, 2, 100, 37, 0},
};

START_TEST(bwd_cpu_matches_float64)
{
    run_bwd(&k_bwd[_i / 2], _i % 2);
}
END_TEST

START_TEST(bwd_cpu_refuses_before_running)
{
    ck_assert_int_eq(kiln_attention_bwd_cpu(NULL), KILN_ERR_USAGE);
    ck_assert_int_eq(kiln_attention_decode_cpu(NULL), KILN_ERR_USAGE);
    /* a valid forward call with no scratch */
    static uint16_t buf[4096] __attribute__((aligned(16)));
    static float lse[64] __attribute__((aligned(16)));
    KilnAttentionBwdParams p = {0};
    p.fwd = (KilnAttentionParams){.dtype = KILN_F16, .batch = 1, .heads_q = 1, .heads_kv = 1, .seqlen_q = 16,
                                  .seqlen_k = 16, .head_dim = 64, .q = (uintptr_t)buf, .k = (uintptr_t)buf,
                                  .v = (uintptr_t)buf, .o = (uintptr_t)buf, .lse = (uintptr_t)lse,
                                  .q_stride = {1024, 1024, 64}, .k_stride = {1024, 1024, 64},
                                  .v_stride = {1024, 1024, 64}, .o_stride = {1024, 1024, 64}};
    p.dout = p.dq = p.dk = p.dv = (uintptr_t)buf;
    memcpy(p.dout_stride, p.fwd.q_stride, sizeof p.dout_stride);
    memcpy(p.dq_stride, p.fwd.q_stride, sizeof p.dq_stride);
    memcpy(p.dk_stride, p.fwd.q_stride, sizeof p.dk_stride);
    memcpy(p.dv_stride, p.fwd.q_stride, sizeof p.dv_stride);
    ck_assert_int_eq(kiln_attention_bwd_cpu(&p), KILN_ERR_USAGE);
    ck_assert_ptr_nonnull(strstr(kiln_last_error(), "scratch"));
}
END_TEST

static void set_decode_sizes(KilnAttentionDecodeParams *p, size_t q_bytes);

/* A host buffer smaller than the shape spans is refused naming its field, before anything
 * runs (issue 29: the _cpu calls read past it and returned KILN_OK). Each short buffer is
 * malloc'd at exactly the size claimed, so under ASan a read past it is a report. */
START_TEST(bwd_cpu_refuses_short_buffers)
{
    const int n = 16, d = 64;
    size_t span = (size_t)n * d * 2, lse_n = (size_t)n * 4;
    uint16_t *q = malloc(span), *k = malloc(span), *v = malloc(span), *o = malloc(span), *dout = malloc(span);
    uint16_t *dq = malloc(span), *dk = malloc(span), *dv = malloc(span);
    float *lse = malloc(lse_n);
    uint16_t *t[] = {q, k, v, o, dout, dq, dk, dv};
    for (int i = 0; i < 8; i++) {
        ck_assert_ptr_nonnull(t[i]);
        for (size_t j = 0; j < span / 2; j++) t[i][j] = 0x3c00 ^ (uint16_t)(j * 37 % 512);   /* f16 near 1 */
    }
    for (int i = 0; i < n; i++) lse[i] = 2.0f + 0.01f * (float)i;
    KilnAttentionBwdParams p = {.deterministic = 0};
    p.fwd = (KilnAttentionParams){.dtype = KILN_F16, .batch = 1, .heads_q = 1, .heads_kv = 1, .seqlen_q = n,
                                  .seqlen_k = n, .head_dim = d, .q = (uintptr_t)q, .k = (uintptr_t)k,
                                  .v = (uintptr_t)v, .o = (uintptr_t)o, .lse = (uintptr_t)lse,
                                  .q_stride = {n * d, n * d, d}, .k_stride = {n * d, n * d, d},
                                  .v_stride = {n * d, n * d, d}, .o_stride = {n * d, n * d, d}, .q_bytes = span,
                                  .k_bytes = span, .v_bytes = span, .o_bytes = span, .lse_bytes = lse_n};
    p.dout = (uintptr_t)dout, p.dq = (uintptr_t)dq, p.dk = (uintptr_t)dk, p.dv = (uintptr_t)dv;
    memcpy(p.dout_stride, p.fwd.q_stride, sizeof p.dout_stride);
    memcpy(p.dq_stride, p.fwd.q_stride, sizeof p.dq_stride);
    memcpy(p.dk_stride, p.fwd.q_stride, sizeof p.dk_stride);
    memcpy(p.dv_stride, p.fwd.q_stride, sizeof p.dv_stride);
    p.dout_bytes = p.dq_bytes = p.dk_bytes = p.dv_bytes = span;
    p.scratch_size = kiln_attention_bwd_scratch_size(&p);
    void *scratch = malloc(p.scratch_size);
    p.scratch = (uintptr_t)scratch;
    ck_assert_msg(kiln_attention_bwd_cpu(&p) == KILN_OK, "%s", kiln_last_error());   /* all sizes right */
    /* each size one element short, in turn */
    size_t *sz[] = {&p.fwd.q_bytes, &p.fwd.k_bytes, &p.fwd.v_bytes, &p.fwd.o_bytes, &p.fwd.lse_bytes,
                    &p.dout_bytes, &p.dq_bytes, &p.dk_bytes, &p.dv_bytes, &p.scratch_size};
    static const char *const field[] = {"fwd.q_bytes", "fwd.k_bytes", "fwd.v_bytes", "fwd.o_bytes", "fwd.lse_bytes",
                                        "dout_bytes", "dq_bytes", "dk_bytes", "dv_bytes", "scratch_size"};
    for (int i = 0; i < 10; i++) {
        size_t keep = *sz[i];
        *sz[i] = keep - 2;
        ck_assert_int_eq(kiln_attention_bwd_cpu(&p), KILN_ERR_USAGE);
        ck_assert_msg(strstr(kiln_last_error(), field[i]), "%s: %s", field[i], kiln_last_error());
        *sz[i] = keep;
    }
    /* a K truly shorter than its shape: its own allocation, as the size says */
    uint16_t *k_short = malloc(span - 128);
    memcpy(k_short, k, span - 128);
    p.fwd.k = (uintptr_t)k_short, p.fwd.k_bytes = span - 128;
    ck_assert_int_eq(kiln_attention_bwd_cpu(&p), KILN_ERR_USAGE);
    for (int i = 0; i < 8; i++) free(t[i]);
    free(k_short), free(lse), free(scratch);
}
END_TEST

START_TEST(decode_cpu_refuses_short_buffers)
{
    const int batch = 2, sq = 2, d = 32, cap = 40;
    size_t qn = (size_t)batch * sq * d * 2, kn = (size_t)batch * cap * d * 2;
    uint16_t *q = malloc(qn), *o = malloc(qn), *k = malloc(kn), *v = malloc(kn);
    float *lse = malloc((size_t)batch * sq * 4);
    int32_t *lens = malloc(batch * 4);
    for (size_t j = 0; j < qn / 2; j++) q[j] = 0x3c00 ^ (uint16_t)(j * 37 % 512);
    for (size_t j = 0; j < kn / 2; j++) k[j] = v[j] = 0x3800 ^ (uint16_t)(j * 53 % 512);
    lens[0] = 33, lens[1] = 7;
    KilnAttentionDecodeParams p = {.dtype = KILN_F16, .batch = batch, .heads_q = 1, .heads_kv = 1, .seqlen_q = sq,
                                   .head_dim = d, .q = (uintptr_t)q, .o = (uintptr_t)o, .lse = (uintptr_t)lse,
                                   .k = (uintptr_t)k, .v = (uintptr_t)v, .cache_seqlens = (uintptr_t)lens,
                                   .max_seqlen_k = cap, .q_stride = {sq * d, d, d}, .o_stride = {sq * d, d, d},
                                   .k_stride = {cap * d, cap * d, d}, .v_stride = {cap * d, cap * d, d}};
    set_decode_sizes(&p, qn);
    ck_assert_msg(kiln_attention_decode_cpu(&p) == KILN_OK, "%s", kiln_last_error());
    size_t *sz[] = {&p.q_bytes, &p.o_bytes, &p.lse_bytes, &p.k_bytes, &p.v_bytes, &p.cache_seqlens_bytes};
    static const char *const field[] = {"q_bytes", "o_bytes", "lse_bytes", "k_bytes", "v_bytes",
                                        "cache_seqlens_bytes"};
    for (int i = 0; i < 6; i++) {
        size_t keep = *sz[i];
        *sz[i] = keep - 2;
        ck_assert_int_eq(kiln_attention_decode_cpu(&p), KILN_ERR_USAGE);
        ck_assert_msg(strstr(kiln_last_error(), field[i]), "%s: %s", field[i], kiln_last_error());
        *sz[i] = keep;
    }
    /* a V cache truly shorter than max_seqlen_k rows: refused, never read past */
    uint16_t *v_short = malloc(kn - 256);
    memcpy(v_short, v, kn - 256);
    p.v = (uintptr_t)v_short, p.v_bytes = kn - 256;
    ck_assert_int_eq(kiln_attention_decode_cpu(&p), KILN_ERR_USAGE);
    ck_assert_ptr_nonnull(strstr(kiln_last_error(), "v_bytes"));
    free(q), free(o), free(k), free(v), free(v_short), free(lse), free(lens);
}
END_TEST

/* ---------------- decode ---------------- */

/* The host buffers' sizes of a decode call: q and o of q_bytes, lse dense, K and V and the
 * table what the shape spans (their own buffers are exactly that). */
static void set_decode_sizes(KilnAttentionDecodeParams *p, size_t q_bytes)
{
    bool paged = p->block_table != 0;
    int kb = paged ? p->num_pages : p->batch, ks = paged ? p->page_size : p->max_seqlen_k;
    const int64_t *st = p->k_stride;
    p->q_bytes = p->o_bytes = q_bytes;
    p->lse_bytes = (size_t)p->batch * p->heads_q * p->seqlen_q * 4;
    p->k_bytes = p->v_bytes = (size_t)(st[0] * (kb - 1) + st[1] * (p->heads_kv - 1) + st[2] * (ks - 1) + p->head_dim) * 2;
    p->cache_seqlens_bytes = (size_t)p->batch * 4;
    p->block_table_bytes = paged ? (size_t)p->batch * p->block_table_stride * 4 : 0;
}

static void run_decode(int paged, int causal)
{
    const int batch = 3, hq = 4, hkv = 2, sq = 3, d = 64, cap = 150;
    const int seqlens[3] = {150, 41, 3};
    AttnProblem ap = attn_padded_problem(batch, hq, hkv, sq, cap, d, causal);
    size_t nq = (size_t)batch * ap.q_stride[0], nk = (size_t)batch * ap.k_stride[0];
    Buf q = poisoned(nq), k = poisoned(nk), v = poisoned(nk), o = poisoned(nq);
    attn_fill_strided(ATTN_F16, q.p, ap.q_stride, batch, hq, sq, d, 21);
    attn_fill_strided(ATTN_F16, k.p, ap.k_stride, batch, hkv, cap, d, 22);
    attn_fill_strided(ATTN_F16, v.p, ap.v_stride, batch, hkv, cap, d, 23);
    float *lse = malloc((size_t)batch * hq * sq * 4);
    memset(lse, 0xFF, (size_t)batch * hq * sq * 4);
    int32_t lens[3];
    for (int b = 0; b < batch; b++) lens[b] = seqlens[b];
    KilnAttentionDecodeParams p = {.dtype = KILN_F16, .batch = batch, .heads_q = hq, .heads_kv = hkv, .seqlen_q = sq,
                                   .head_dim = d, .q = (uintptr_t)q.p, .o = (uintptr_t)o.p, .lse = (uintptr_t)lse,
                                   .cache_seqlens = (uintptr_t)lens, .max_seqlen_k = cap, .causal = causal,
                                   .num_splits = 4};   /* the CPU form runs one split whatever this says */
    memcpy(p.q_stride, ap.q_stride, sizeof ap.q_stride);
    memcpy(p.o_stride, ap.o_stride, sizeof ap.o_stride);
    AttnPaged pg = {0};
    if (paged) {
        attn_paged_make(&ap, seqlens, 32, k.p, v.p, 5, &pg);
        p.k = (uintptr_t)pg.k, p.v = (uintptr_t)pg.v, p.block_table = (uintptr_t)pg.block_table;
        p.block_table_stride = pg.max_pages, p.page_size = pg.page, p.num_pages = pg.num_pages;
        int64_t pst[3] = {(int64_t)pg.page * hkv * d, d, (int64_t)hkv * d};
        memcpy(p.k_stride, pst, sizeof pst);
        memcpy(p.v_stride, pst, sizeof pst);
    } else {
        p.k = (uintptr_t)k.p, p.v = (uintptr_t)v.p;
        memcpy(p.k_stride, ap.k_stride, sizeof ap.k_stride);
        memcpy(p.v_stride, ap.v_stride, sizeof ap.v_stride);
    }
    set_decode_sizes(&p, nq * 2);
    ck_assert_msg(kiln_attention_decode_cpu(&p) == KILN_OK, "decode (paged %d): %s", paged, kiln_last_error());
    AttnDecodeErr e = attn_decode_judge(&ap, seqlens, q.p, k.p, v.p, o.p, lse);
    ck_assert_msg(e.e.nonfinite == 0, "paged %d: %lld non-finite outputs", paged, (long long)e.e.nonfinite);
    ck_assert_msg(e.e.o_max_abs <= 2 * e.plain_err + 1e-5, "paged %d: max |O - ref| = %.3g (plain %.3g)", paged,
                  e.e.o_max_abs, e.plain_err);
    ck_assert_msg(e.e.lse_max_rel <= 1e-4, "paged %d: LSE relative error %.3g", paged, e.e.lse_max_rel);
    ck_assert_msg(e.empty_bad == 0, "paged %d: rows that see no key are not O = 0 / LSE = -inf", paged);
    ck_assert_int_eq(attn_pad_clobbered(o.p, o.n, ap.o_stride, batch, hq, sq, d), 0);
    if (paged) attn_paged_free(&pg);
    free(q.p), free(k.p), free(v.p), free(o.p), free(lse);
}

START_TEST(decode_cpu_matches_float64)
{
    run_decode(_i / 2, _i % 2);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("attention_cpu");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, bwd_cpu_matches_float64, 0, 4);
    tcase_add_test(tc, bwd_cpu_refuses_before_running);
    tcase_add_loop_test(tc, decode_cpu_matches_float64, 0, 4);
    tcase_add_test(tc, bwd_cpu_refuses_short_buffers);
    tcase_add_test(tc, decode_cpu_refuses_short_buffers);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
