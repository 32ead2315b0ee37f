/* test_attention_pos.c — whole-sequence positions (KilnAttentionParams.positions,
 * q_pos_offset, kv_pos_offset) on the CPU interpreter, against a float64 reference.
 *
 * One problem of N = 150 tokens (no multiple of the 64-row tiles), GQA 4/2, d 32, f16, dense
 * [b, h, s, d]. A shard call takes rows [qa, qa + lq) of Q and [ka, ka + lk) of K/V (pointer
 * offsets, the full tensors' strides) with the offsets qa, ka; its O and LSE must be those of
 * the float64 attention of those query rows over those keys under the WHOLE problem's masks
 * (causal: key <= query; the sliding window: left 37, right unlimited, in positions; gemma2's
 * soft-capping inside it, whose hooks come from the modules gemma2 imports). A shard against
 * all keys is thus the full call's rows. The backward of a shard, given the whole problem's O
 * and LSE (as a ring's backward does), must give that shard's part of dQ, dK, dV: sums over
 * the (query row, key) pairs of the two shards only. Outputs are NaN-poisoned before each run.
 * The same shard calls with a block mask of their own lengths classified in positions (what
 * kiln.distributed slices out of a whole-sequence mask), forward and backward.
 * And: the refusals (offsets without positions, negative offsets, positions in
 * kiln_attention_block_mask_create).
 */
#include "testutil.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kiln.h"
#include "tools/attn_ref.c"   /* f16 fill/get helpers */

#define N 150
#define HQ 4
#define HKV 2
#define D 32
#define WL 37

/* window 1: sliding_window.tile; 2: gemma2.tile (softcap CAP inside the window: its hooks come
 * from the modules it imports) */
typedef struct Shard { const char *what; int qa, lq, ka, lk, causal, window; } Shard;
#define CAP 2.0

static const Shard k_shards[] = {
    {"q rows 40..110 vs all keys, causal (the full call's rows)", 40, 70, 0, N, 1, 0},
    {"q 75..150 vs k 0..75, causal (every key visible)", 75, 75, 0, 75, 1, 0},
    {"q 75..150 vs k 50..125, causal (diagonal as a mask)", 75, 75, 50, 75, 1, 0},
    {"q 50..100 vs k 50..100, causal (the kernel's diagonal)", 50, 50, 50, 50, 1, 0},
    {"q 0..50 vs k 100..150, causal (every key hidden)", 0, 50, 100, 50, 1, 0},
    {"q 90..150 vs k 30..110, not causal", 90, 60, 30, 80, 0, 0},
    {"q 100..150 vs k 40..120, causal window 37", 100, 50, 40, 80, 1, 1},
    {"q 20..130 vs all keys, window 37 not causal", 20, 110, 0, N, 0, 1},
    {"q 60..120 vs k 30..90, causal gemma2 (softcap 2, window 37)", 60, 60, 30, 60, 1, 2},
};

static uint16_t *g_q, *g_k, *g_v, *g_do;      /* the whole problem, [1, h, N, D] */
static double g_scale;

static int visible(const Shard *s, int i, int j)
{
    if (s->causal && j > i) return 0;
    if (s->window && j < i - WL) return 0;
    return 1;
}

static double f16(const uint16_t *t, int h, int i, int d) { return attn_get(ATTN_F16, t, ((size_t)h * N + i) * D + d); }

/* float64 P of global row i (head h) over the keys of [ka, ka + lk), with their LSE; 0 where hidden */
static double ref_row(const Shard *s, int h, int i, int ka, int lk, double *p)
{
    int hk = h / (HQ / HKV);
    double m = -INFINITY;
    for (int j = 0; j < lk; j++) {
        p[j] = -INFINITY;
        if (!visible(s, i, ka + j)) continue;
        double dot = 0;
        for (int d = 0; d < D; d++) dot += f16(g_q, h, i, d) * f16(g_k, hk, ka + j, d);
        p[j] = dot * g_scale;
        if (s->window == 2) p[j] = CAP * tanh(p[j] / CAP);
        if (p[j] > m) m = p[j];
    }
    if (m == -INFINITY) return -INFINITY;
    double l = 0;
    for (int j = 0; j < lk; j++) l += p[j] == -INFINITY ? 0 : exp(p[j] - m);
    double lse = m + log(l);
    for (int j = 0; j < lk; j++) p[j] = p[j] == -INFINITY ? 0 : exp(p[j] - lse);
    return lse;
}

static KilnAttentionParams shard_params(const Shard *s, void *o, float *lse)
{
    int64_t st[3] = {(int64_t)HQ * N * D, (int64_t)N * D, D}, stk[3] = {(int64_t)HKV * N * D, (int64_t)N * D, D};
    KilnAttentionParams p = {.dtype = KILN_F16, .batch = 1, .heads_q = HQ, .heads_kv = HKV, .seqlen_q = s->lq,
                             .seqlen_k = s->lk, .head_dim = D, .causal = s->causal,
                             .q = (uintptr_t)(g_q + (size_t)s->qa * D), .k = (uintptr_t)(g_k + (size_t)s->ka * D),
                             .v = (uintptr_t)(g_v + (size_t)s->ka * D), .o = (uintptr_t)o, .lse = (uintptr_t)lse,
                             .positions = 1, .q_pos_offset = s->qa, .kv_pos_offset = s->ka};
    memcpy(p.q_stride, st, sizeof st), memcpy(p.o_stride, st, sizeof st);
    memcpy(p.k_stride, stk, sizeof stk), memcpy(p.v_stride, stk, sizeof stk);
    p.q_bytes = ((size_t)HQ * N - s->qa) * D * 2;
    p.k_bytes = p.v_bytes = ((size_t)HKV * N - s->ka) * D * 2;
    p.o_bytes = (size_t)HQ * N * D * 2;   /* o: a [1, HQ, N, D] buffer whose rows 0..lq are written */
    p.lse_bytes = (size_t)HQ * s->lq * 4;
    return p;
}

static KilnAttentionVariant g_window, g_gemma2;
static KilnVariantArg g_window_args[2], g_gemma2_args[3];

static void setup(void)
{
    size_t nq = (size_t)HQ * N * D, nk = (size_t)HKV * N * D;
    g_q = malloc(nq * 2), g_k = malloc(nk * 2), g_v = malloc(nk * 2), g_do = malloc(nq * 2);
    attn_fill_random(ATTN_F16, g_q, nq, 31, -1.5, 1.5);
    attn_fill_random(ATTN_F16, g_k, nk, 32, -1.5, 1.5);
    attn_fill_random(ATTN_F16, g_v, nk, 33, -1, 1);
    attn_fill_random(ATTN_F16, g_do, nq, 34, -1, 1);
    g_scale = 1.0 / sqrt(D);
    g_window_args[0] = (KilnVariantArg){"window_left", kiln_arg_i32(WL), 0};
    g_window_args[1] = (KilnVariantArg){"window_right", kiln_arg_i32(-1), 0};
    g_window = (KilnAttentionVariant){.path = "lang/lib/variants/sliding_window.tile", .args = g_window_args,
                                      .nargs = 2};
    g_gemma2_args[0] = g_window_args[0], g_gemma2_args[1] = g_window_args[1];
    g_gemma2_args[2] = (KilnVariantArg){"softcap", kiln_arg_f32((float)CAP), 0};
    g_gemma2 = (KilnAttentionVariant){.path = "lang/lib/variants/gemma2.tile", .args = g_gemma2_args, .nargs = 3};
}

static void teardown(void) { free(g_q), free(g_k), free(g_v), free(g_do); }

/* A block mask of shard s's call (16 x 16 blocks; the shards' lengths are no multiples of 16, so
 * the last blocks cross the ends and are PARTIAL) classified in POSITIONS by visible(): what a
 * slice of the whole problem's mask holds (kiln.distributed's). Its layout comes from
 * kiln_attention_block_mask_create_cpu for the same lengths without positions; then every
 * array is rewritten (*data: the buffer, the caller frees it). */
static KilnBlockMask shard_mask(const Shard *s, int32_t **data)
{
    enum { B = 16 };
    KilnAttentionParams p = shard_params(s, NULL, NULL);
    p.positions = p.q_pos_offset = p.kv_pos_offset = 0;
    KilnBlockMask m = {.block_q = B, .block_kv = B, .batch = 1, .heads = 1};
    size_t bytes = kiln_attention_block_mask_size(&p, &m);
    ck_assert_uint_gt(bytes, 0);
    *data = aligned_alloc(16, (bytes + 15) / 16 * 16);
    m.data = (uintptr_t)*data, m.bytes = bytes;
    ck_assert_msg(kiln_attention_block_mask_create_cpu(&p, &m) == KILN_OK, "%s", kiln_last_error());
    int nq = m.num_q_blocks, nk = m.num_kv_blocks;
    int32_t *a[KILN_BM_NARRAYS];
    for (int i = 0; i < KILN_BM_NARRAYS; i++) a[i] = (int32_t *)((char *)*data + m.offset[i]);
    memset(a[KILN_BM_KV_NUM], 0, 4 * (size_t)nq), memset(a[KILN_BM_FULL_KV_NUM], 0, 4 * (size_t)nq);
    memset(a[KILN_BM_Q_NUM], 0, 4 * (size_t)nk), memset(a[KILN_BM_FULL_Q_NUM], 0, 4 * (size_t)nk);
    for (int qb = 0; qb < nq; qb++)
        for (int kb = 0; kb < nk; kb++) {
            int vis = 0, in = 0;
            for (int i = qb * B; i < (qb + 1) * B; i++)
                for (int j = kb * B; j < (kb + 1) * B; j++) {
                    bool inside = i < s->lq && j < s->lk;
                    in += inside;
                    vis += inside && visible(s, s->qa + i, s->ka + j);
                }
            int cls = vis == 0 ? 0 : vis == B * B ? 2 : 1;
            a[KILN_BM_CLASS][qb * nk + kb] = cls;
            if (!cls) continue;
            int r = cls == 2 ? KILN_BM_FULL_KV_NUM : KILN_BM_KV_NUM, t = cls == 2 ? KILN_BM_FULL_Q_NUM : KILN_BM_Q_NUM;
            a[r + 1][qb * nk + a[r][qb]++] = kb;
            a[t + 1][kb * nq + a[t][kb]++] = qb;
        }
    return m;
}

/* Shard s's forward (with block mask bm, or none) against float64. */
static void check_fwd(const Shard *s, const KilnBlockMask *bm)
{
    uint16_t *o = malloc((size_t)HQ * N * D * 2);
    float *lse = malloc((size_t)HQ * s->lq * 4);
    memset(o, 0xFF, (size_t)HQ * N * D * 2);
    memset(lse, 0xFF, (size_t)HQ * s->lq * 4);
    KilnAttentionParams p = shard_params(s, o, lse);
    if (s->window) p.variant = s->window == 2 ? &g_gemma2 : &g_window;
    p.block_mask = bm;
    ck_assert_msg(kiln_attention_fwd_cpu(&p) == KILN_OK, "%s: %s", s->what, kiln_last_error());
    double *pr = malloc(sizeof(double) * N), err_o = 0, err_l = 0;
    int bad = 0;
    for (int h = 0; h < HQ; h++)
        for (int i = 0; i < s->lq; i++) {
            double l = ref_row(s, h, s->qa + i, s->ka, s->lk, pr);
            float got_l = lse[(size_t)h * s->lq + i];
            if (l == -INFINITY) bad += !(got_l == -INFINITY);
            else err_l = fmax(err_l, fabs(got_l - l) / fmax(1, fabs(l)));
            for (int d = 0; d < D; d++) {
                double r = 0;
                for (int j = 0; j < s->lk; j++) r += pr[j] * f16(g_v, h / (HQ / HKV), s->ka + j, d);
                double got = attn_get(ATTN_F16, o, ((size_t)h * N + i) * D + d);
                if (!isfinite(got)) bad++;
                else err_o = fmax(err_o, fabs(got - r));
            }
        }
    ck_assert_msg(bad == 0, "%s: %d non-finite or wrong empty rows", s->what, bad);
    ck_assert_msg(err_o <= 2e-3, "%s: max |O - ref| = %.3g", s->what, err_o);
    ck_assert_msg(err_l <= 1e-4, "%s: LSE relative error %.3g", s->what, err_l);
    free(pr), free(o), free(lse);
}

START_TEST(shard_fwd_matches_float64)
{
    check_fwd(&k_shards[_i], NULL);
}
END_TEST

/* The whole problem's O and LSE in float64, rounded as a forward stores them (O in f16). */
static void full_forward(const Shard *s, uint16_t *o, float *lse)
{
    double *pr = malloc(sizeof(double) * N);
    for (int h = 0; h < HQ; h++)
        for (int i = 0; i < N; i++) {
            double l = ref_row(s, h, i, 0, N, pr);
            lse[(size_t)h * N + i] = (float)l;
            for (int d = 0; d < D; d++) {
                double r = 0;
                for (int j = 0; j < N; j++) r += pr[j] * f16(g_v, h / (HQ / HKV), j, d);
                attn_put(ATTN_F16, o, ((size_t)h * N + i) * D + d, r);
            }
        }
    free(pr);
}

/* Shard s's backward (with block mask bm, or none; deterministic or not) against float64. */
static void check_bwd(const Shard *s, const KilnBlockMask *bm, int deterministic)
{
    size_t nq = (size_t)HQ * N * D, nk = (size_t)HKV * N * D;
    uint16_t *o = malloc(nq * 2), *dq = malloc(nq * 2), *dk = malloc(nk * 2), *dv = malloc(nk * 2);
    float *lse = malloc((size_t)HQ * N * 4);
    full_forward(s, o, lse);
    memset(dq, 0xFF, nq * 2), memset(dk, 0xFF, nk * 2), memset(dv, 0xFF, nk * 2);
    KilnAttentionBwdParams b = {.fwd = shard_params(s, NULL, NULL), .deterministic = deterministic};
    if (s->window) b.fwd.variant = s->window == 2 ? &g_gemma2 : &g_window;
    b.fwd.block_mask = bm;
    /* the shard's rows of the whole O and LSE: LSE dense [HQ, N] is no [HQ, lq] shard, so copy */
    float *lse_s = malloc((size_t)HQ * s->lq * 4);
    for (int h = 0; h < HQ; h++) memcpy(lse_s + (size_t)h * s->lq, lse + (size_t)h * N + s->qa, (size_t)s->lq * 4);
    b.fwd.o = (uintptr_t)(o + (size_t)s->qa * D), b.fwd.lse = (uintptr_t)lse_s;
    b.fwd.o_bytes = (nq - (size_t)s->qa * D) * 2;
    b.dout = (uintptr_t)(g_do + (size_t)s->qa * D), b.dq = (uintptr_t)(dq + (size_t)s->qa * D);
    b.dk = (uintptr_t)(dk + (size_t)s->ka * D), b.dv = (uintptr_t)(dv + (size_t)s->ka * D);
    memcpy(b.dout_stride, b.fwd.q_stride, sizeof b.dout_stride), memcpy(b.dq_stride, b.fwd.q_stride, sizeof b.dq_stride);
    memcpy(b.dk_stride, b.fwd.k_stride, sizeof b.dk_stride), memcpy(b.dv_stride, b.fwd.k_stride, sizeof b.dv_stride);
    /* the host buffers' sizes from the shard's first row on (the _cpu calls bound every access) */
    b.dout_bytes = b.dq_bytes = (nq - (size_t)s->qa * D) * 2;
    b.dk_bytes = b.dv_bytes = (nk - (size_t)s->ka * D) * 2;
    b.scratch_size = kiln_attention_bwd_scratch_size(&b);
    void *scratch = aligned_alloc(64, (b.scratch_size + 63) / 64 * 64);
    b.scratch = (uintptr_t)scratch;
    ck_assert_msg(kiln_attention_bwd_cpu(&b) == KILN_OK, "%s: %s", s->what, kiln_last_error());
    /* float64 partial gradients over the shard pairs */
    double *rq = calloc(nq, 8), *rk = calloc(nk, 8), *rv = calloc(nk, 8), *pr = malloc(sizeof(double) * N);
    for (int h = 0; h < HQ; h++) {
        int hk = h / (HQ / HKV);
        for (int i = s->qa; i < s->qa + s->lq; i++) {
            ref_row(s, h, i, 0, N, pr);   /* P with the whole row's LSE */
            double delta = 0;
            for (int d = 0; d < D; d++) delta += f16(g_do, h, i, d) * attn_get(ATTN_F16, o, ((size_t)h * N + i) * D + d);
            for (int j = s->ka; j < s->ka + s->lk; j++) {
                if (pr[j] == 0) continue;
                double dp = 0, sc = 0;
                for (int d = 0; d < D; d++) dp += f16(g_do, h, i, d) * f16(g_v, hk, j, d);
                for (int d = 0; d < D; d++) sc += f16(g_q, h, i, d) * f16(g_k, hk, j, d);
                double th = tanh(sc * g_scale / CAP), cap_grad = s->window == 2 ? 1 - th * th : 1;
                double ds = pr[j] * (dp - delta) * cap_grad * g_scale;
                for (int d = 0; d < D; d++) {
                    rq[((size_t)h * N + i) * D + d] += ds * f16(g_k, hk, j, d);
                    rk[((size_t)hk * N + j) * D + d] += ds * f16(g_q, h, i, d);
                    rv[((size_t)hk * N + j) * D + d] += pr[j] * f16(g_do, h, i, d);
                }
            }
        }
    }
    double err[3] = {0, 0, 0}, mag[3] = {0, 0, 0};
    int bad = 0;
    for (int h = 0; h < HQ; h++)
        for (int i = s->qa; i < s->qa + s->lq; i++)
            for (int d = 0; d < D; d++) {
                size_t x = ((size_t)h * N + i) * D + d;
                double g = attn_get(ATTN_F16, dq, x);
                bad += !isfinite(g);
                err[0] = fmax(err[0], fabs(g - rq[x])), mag[0] = fmax(mag[0], fabs(rq[x]));
            }
    for (int h = 0; h < HKV; h++)
        for (int j = s->ka; j < s->ka + s->lk; j++)
            for (int d = 0; d < D; d++) {
                size_t x = ((size_t)h * N + j) * D + d;
                double gk = attn_get(ATTN_F16, dk, x), gv = attn_get(ATTN_F16, dv, x);
                bad += !isfinite(gk) + !isfinite(gv);
                err[1] = fmax(err[1], fabs(gk - rk[x])), mag[1] = fmax(mag[1], fabs(rk[x]));
                err[2] = fmax(err[2], fabs(gv - rv[x])), mag[2] = fmax(mag[2], fabs(rv[x]));
            }
    ck_assert_msg(bad == 0, "%s: %d non-finite gradients", s->what, bad);
    for (int t = 0; t < 3; t++)   /* f16 outputs of sums of a few dozen terms */
        ck_assert_msg(err[t] <= 4e-3 * fmax(1, mag[t]), "%s: %s error %.3g (max |ref| %.3g)", s->what,
                      t == 0 ? "dQ" : t == 1 ? "dK" : "dV", err[t], mag[t]);
    free(rq), free(rk), free(rv), free(pr), free(o), free(dq), free(dk), free(dv), free(lse), free(lse_s);
    free(scratch);
}

START_TEST(shard_bwd_matches_float64)
{
    check_bwd(&k_shards[_i], NULL, _i % 2);
}
END_TEST

/* The same shard calls with a block mask classified in positions: its EMPTY blocks skipped,
 * FULL ones run without the mask, PARTIAL ones with the hooks and the causal term at positions. */
START_TEST(shard_with_block_mask)
{
    const Shard *s = &k_shards[_i];
    int32_t *data;
    KilnBlockMask m = shard_mask(s, &data);
    check_fwd(s, &m);
    check_bwd(s, &m, _i % 2);
    free(data);
}
END_TEST

START_TEST(positions_refused)
{
    static uint16_t buf[4096] __attribute__((aligned(16)));
    static float lse[64] __attribute__((aligned(16)));
    KilnAttentionParams p = {.dtype = KILN_F16, .batch = 1, .heads_q = 1, .heads_kv = 1, .seqlen_q = 16,
                             .seqlen_k = 16, .head_dim = 64, .q = (uintptr_t)buf, .k = (uintptr_t)buf,
                             .v = (uintptr_t)buf, .o = (uintptr_t)buf, .lse = (uintptr_t)lse,
                             .q_stride = {1024, 1024, 64}, .k_stride = {1024, 1024, 64},
                             .v_stride = {1024, 1024, 64}, .o_stride = {1024, 1024, 64}, .q_pos_offset = 5};
    ck_assert_int_eq(kiln_attention_check(&p), KILN_ERR_USAGE);
    ck_assert_ptr_nonnull(strstr(kiln_last_error(), "positions"));
    p.positions = 1;
    ck_assert_int_eq(kiln_attention_check(&p), KILN_OK);
    p.kv_pos_offset = -1;
    ck_assert_int_eq(kiln_attention_check(&p), KILN_ERR_USAGE);
    ck_assert_ptr_nonnull(strstr(kiln_last_error(), "kv_pos_offset"));
    p.kv_pos_offset = 0;
    p.q_pos_offset = INT32_MAX - 100;
    ck_assert_int_eq(kiln_attention_check(&p), KILN_ERR_USAGE);
    p.q_pos_offset = 5;   /* the classifier runs on local indices */
    KilnBlockMask m = {.block_q = 16, .block_kv = 16, .batch = 1, .heads = 1};
    ck_assert_int_eq(kiln_attention_block_mask_create_cpu(&p, &m), KILN_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(kiln_last_error(), "positions"));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("attention_pos");
    TCase *t = tcase_create("cpu");
    tcase_add_unchecked_fixture(t, setup, teardown);
    tcase_set_timeout(t, 600);
    int n = (int)(sizeof k_shards / sizeof k_shards[0]);
    tcase_add_loop_test(t, shard_fwd_matches_float64, 0, n);
    tcase_add_loop_test(t, shard_bwd_matches_float64, 0, n);
    tcase_add_loop_test(t, shard_with_block_mask, 0, n);
    tcase_add_test(t, positions_refused);
    suite_add_tcase(s, t);
    return tu_run_suite(s);
}
