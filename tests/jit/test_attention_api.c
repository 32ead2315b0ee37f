/* test_attention_api.c — kiln_attention_fwd's validation, without a GPU.
 *
 * Every rejected call must fail BEFORE the device is touched: the calls here
 * pass a KilnDevice pointer that faults when dereferenced (a near-null
 * address), so a check that ran after the first device access would crash the
 * test instead of returning the expected status. Each case starts from a valid
 * problem (bshd layout, GQA 8/2, ragged lengths, fake 16-byte aligned device
 * addresses), breaks one field, and checks the status and that the message
 * names the field. Also: valid problems pass kiln_attention_check; zero-row and
 * zero-key problems need no pointers; the embedded program is the file on disk;
 * the in-process cache starts empty and clears.
 */
#include "testutil.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kiln.h"

/* Dereferencing this faults: validation must not. */
#define POISON_DEV ((KilnDevice *)(uintptr_t)0x18)

static void dense_strides(int64_t st[3], int heads, int seqlen, int d, int bshd)
{
    if (bshd) {   /* [b, s, h, d] */
        st[0] = (int64_t)seqlen * heads * d, st[1] = d, st[2] = (int64_t)heads * d;
    } else {      /* [b, h, s, d] */
        st[0] = (int64_t)heads * seqlen * d, st[1] = (int64_t)seqlen * d, st[2] = d;
    }
}

static KilnAttentionParams valid(int bshd)
{
    KilnAttentionParams p = {.dtype = KILN_BF16, .batch = 3, .heads_q = 8, .heads_kv = 2,
                             .seqlen_q = 117, .seqlen_k = 301, .head_dim = 96,
                             .q = 0x7f0000000000ull, .k = 0x7f0010000000ull, .v = 0x7f0020000000ull,
                             .o = 0x7f0030000000ull, .lse = 0x7f0040000000ull, .causal = 1};
    dense_strides(p.q_stride, p.heads_q, p.seqlen_q, p.head_dim, bshd);
    dense_strides(p.o_stride, p.heads_q, p.seqlen_q, p.head_dim, bshd);
    dense_strides(p.k_stride, p.heads_kv, p.seqlen_k, p.head_dim, bshd);
    dense_strides(p.v_stride, p.heads_kv, p.seqlen_k, p.head_dim, bshd);
    return p;
}

/* ---- one broken field per case ---- */
typedef struct BadCase {
    const char *what;
    void (*mutate)(KilnAttentionParams *p);
    KilnStatus status;
    const char *needle;   /* must appear in kiln_last_error() */
} BadCase;

static void m_dtype(KilnAttentionParams *p) { p->dtype = (KilnDtype)7; }
static void m_batch0(KilnAttentionParams *p) { p->batch = 0; }
static void m_batch_neg(KilnAttentionParams *p) { p->batch = -2; }
static void m_heads_q0(KilnAttentionParams *p) { p->heads_q = 0; }
static void m_heads_kv0(KilnAttentionParams *p) { p->heads_kv = 0; }
static void m_gqa_mismatch(KilnAttentionParams *p) { p->heads_kv = 3; }
static void m_kv_more(KilnAttentionParams *p) { p->heads_q = 2, p->heads_kv = 8; }
static void m_seqlen_q_neg(KilnAttentionParams *p) { p->seqlen_q = -1; }
static void m_seqlen_k_neg(KilnAttentionParams *p) { p->seqlen_k = -5; }
static void m_seqlen_huge(KilnAttentionParams *p) { p->seqlen_k = INT32_MAX; }
static void m_head_dim80(KilnAttentionParams *p) { p->head_dim = 80; }
static void m_head_dim0(KilnAttentionParams *p) { p->head_dim = 0; }
static void m_head_dim512(KilnAttentionParams *p) { p->head_dim = 512; }
static void m_block_m_npot(KilnAttentionParams *p) { p->block_m = 48; }
static void m_block_m_small(KilnAttentionParams *p) { p->block_m = 8; }
static void m_block_n_big(KilnAttentionParams *p) { p->block_n = 512; }
static void m_block_n_neg(KilnAttentionParams *p) { p->block_n = -64; }
static void m_warps(KilnAttentionParams *p) { p->num_warps = 3; }
static void m_warps_big(KilnAttentionParams *p) { p->num_warps = 64; }
static void m_stages_neg(KilnAttentionParams *p) { p->num_stages = -1; }
static void m_stages_big(KilnAttentionParams *p) { p->num_stages = 9; }
static void m_scale_nan(KilnAttentionParams *p) { p->softmax_scale = NAN; }
static void m_scale_inf(KilnAttentionParams *p) { p->softmax_scale = INFINITY; }
static void m_grid(KilnAttentionParams *p) { p->heads_q = 65536; }
static void m_null_q(KilnAttentionParams *p) { p->q = 0; }
static void m_null_k(KilnAttentionParams *p) { p->k = 0; }
static void m_null_v(KilnAttentionParams *p) { p->v = 0; }
static void m_null_o(KilnAttentionParams *p) { p->o = 0; }
static void m_null_lse(KilnAttentionParams *p) { p->lse = 0; }
static void m_misaligned_q(KilnAttentionParams *p) { p->q += 2; }
static void m_misaligned_v(KilnAttentionParams *p) { p->v += 8; }
static void m_misaligned_lse(KilnAttentionParams *p) { p->lse += 4; }
static void m_neg_stride(KilnAttentionParams *p) { p->k_stride[2] = -96; }
static void m_o_overlap(KilnAttentionParams *p) { p->o_stride[1] = 0; }
static void m_stride_overflow(KilnAttentionParams *p) { p->v_stride[0] = INT64_MAX / 2; }
static void m_stride_bytes(KilnAttentionParams *p) { p->q_stride[0] = INT64_MAX / 4; }

static const BadCase k_bad[] = {
    {"dtype", m_dtype, KILN_ERR_USAGE, "dtype 7"},
    {"batch 0", m_batch0, KILN_ERR_USAGE, "batch must be positive"},
    {"batch < 0", m_batch_neg, KILN_ERR_USAGE, "batch must be positive, got -2"},
    {"heads_q 0", m_heads_q0, KILN_ERR_USAGE, "heads_q must be positive"},
    {"heads_kv 0", m_heads_kv0, KILN_ERR_USAGE, "heads_kv must be positive"},
    {"GQA 8/3", m_gqa_mismatch, KILN_ERR_USAGE, "heads_q (8) must be a multiple of heads_kv (3)"},
    {"GQA 2/8", m_kv_more, KILN_ERR_USAGE, "heads_q (2) must be a multiple of heads_kv (8)"},
    {"seqlen_q < 0", m_seqlen_q_neg, KILN_ERR_USAGE, "seqlen_q -1"},
    {"seqlen_k < 0", m_seqlen_k_neg, KILN_ERR_USAGE, "seqlen_k -5"},
    {"seqlen_k 2^31-1", m_seqlen_huge, KILN_ERR_USAGE, "32-bit row index"},
    {"head_dim 80", m_head_dim80, KILN_ERR_UNSUPPORTED, "head_dim 80 is not supported"},
    {"head_dim 0", m_head_dim0, KILN_ERR_UNSUPPORTED, "head_dim 0"},
    {"head_dim 512", m_head_dim512, KILN_ERR_UNSUPPORTED, "(supported: 32, 64, 96, 128, 256)"},
    {"block_m 48", m_block_m_npot, KILN_ERR_USAGE, "block_m 48"},
    {"block_m 8", m_block_m_small, KILN_ERR_USAGE, "block_m 8"},
    {"block_n 512", m_block_n_big, KILN_ERR_USAGE, "block_n 512"},
    {"block_n -64", m_block_n_neg, KILN_ERR_USAGE, "block_n -64"},
    {"num_warps 3", m_warps, KILN_ERR_USAGE, "num_warps 3"},
    {"num_warps 64", m_warps_big, KILN_ERR_USAGE, "num_warps 64"},
    {"num_stages -1", m_stages_neg, KILN_ERR_USAGE, "num_stages -1"},
    {"num_stages 9", m_stages_big, KILN_ERR_USAGE, "num_stages 9"},
    {"scale NaN", m_scale_nan, KILN_ERR_USAGE, "softmax_scale must be finite"},
    {"scale inf", m_scale_inf, KILN_ERR_USAGE, "softmax_scale must be finite"},
    {"grid y", m_grid, KILN_ERR_UNSUPPORTED, "heads_q = 65536 exceeds 65535"},
    {"null q", m_null_q, KILN_ERR_USAGE, "q is a null pointer"},
    {"null k", m_null_k, KILN_ERR_USAGE, "k is a null pointer"},
    {"null v", m_null_v, KILN_ERR_USAGE, "v is a null pointer"},
    {"null o", m_null_o, KILN_ERR_USAGE, "o is a null pointer"},
    {"null lse", m_null_lse, KILN_ERR_USAGE, "lse is a null pointer"},
    {"misaligned q", m_misaligned_q, KILN_ERR_USAGE, "q (0x7f0000000002) is not 16-byte aligned"},
    {"misaligned v", m_misaligned_v, KILN_ERR_USAGE, "v (0x7f0020000008) is not 16-byte aligned"},
    {"misaligned lse", m_misaligned_lse, KILN_ERR_USAGE, "lse (0x7f0040000004) is not 16-byte aligned"},
    {"negative stride", m_neg_stride, KILN_ERR_USAGE, "k_stride[2] (sequence) is negative"},
    {"O overlaps itself", m_o_overlap, KILN_ERR_USAGE, "o_stride[1] (head) is 0 with 8 head entries"},
    {"stride overflow", m_stride_overflow, KILN_ERR_USAGE, "v strides overflow 64-bit offsets"},
    {"stride bytes", m_stride_bytes, KILN_ERR_USAGE, "q strides reach element"},
};

/* Each case, in both layouts: kiln_attention_check and kiln_attention_fwd agree,
 * and fwd never reaches the (faulting) device. */
START_TEST(rejects_before_touching_the_device)
{
    const BadCase *c = &k_bad[_i / 2];
    KilnAttentionParams p = valid(_i % 2);
    c->mutate(&p);
    kiln_clear_error();
    KilnStatus st = kiln_attention_check(&p);
    ck_assert_msg(st == c->status, "%s: check gave %s (%s), want %s", c->what, kiln_status_name(st),
                  kiln_last_error(), kiln_status_name(c->status));
    ck_assert_msg(strstr(kiln_last_error(), c->needle), "%s: message '%s' lacks '%s'", c->what, kiln_last_error(),
                  c->needle);
    ck_assert_msg(strncmp(kiln_last_error(), "kiln_attention_fwd: ", 20) == 0, "%s: '%s'", c->what,
                  kiln_last_error());
    kiln_clear_error();
    st = kiln_attention_fwd(POISON_DEV, &p, NULL);
    ck_assert_msg(st == c->status, "%s: fwd gave %s (%s)", c->what, kiln_status_name(st), kiln_last_error());
    ck_assert_msg(strstr(kiln_last_error(), c->needle), "%s: fwd message '%s'", c->what, kiln_last_error());
}
END_TEST

START_TEST(null_params)
{
    ck_assert_int_eq(kiln_attention_check(NULL), KILN_ERR_USAGE);
    ck_assert_ptr_nonnull(strstr(kiln_last_error(), "params is NULL"));
    ck_assert_int_eq(kiln_attention_fwd(POISON_DEV, NULL, NULL), KILN_ERR_USAGE);
}
END_TEST

/* The base problems and their legal relatives pass; with no device the call
 * then stops at "dev is NULL" — proof that validation ran first and passed. */
START_TEST(valid_problems_pass)
{
    for (int layout = 0; layout < 2; layout++) {
        KilnAttentionParams p = valid(layout);
        ck_assert_msg(kiln_attention_check(&p) == KILN_OK, "layout %d: %s", layout, kiln_last_error());
        ck_assert_int_eq(kiln_attention_fwd(NULL, &p, NULL), KILN_ERR_USAGE);
        ck_assert_ptr_nonnull(strstr(kiln_last_error(), "dev is NULL"));

        int dims[] = {32, 64, 96, 128, 256};
        for (int i = 0; i < 5; i++) {
            KilnAttentionParams d = valid(layout);
            d.head_dim = dims[i];   /* dense for this head dim: O's rows must not overlap */
            dense_strides(d.q_stride, d.heads_q, d.seqlen_q, d.head_dim, layout);
            dense_strides(d.o_stride, d.heads_q, d.seqlen_q, d.head_dim, layout);
            dense_strides(d.k_stride, d.heads_kv, d.seqlen_k, d.head_dim, layout);
            dense_strides(d.v_stride, d.heads_kv, d.seqlen_k, d.head_dim, layout);
            d.dtype = i % 2 ? KILN_F16 : KILN_BF16;
            ck_assert_msg(kiln_attention_check(&d) == KILN_OK, "d=%d: %s", dims[i], kiln_last_error());
        }
        KilnAttentionParams t = valid(layout);   /* every tuning field at a legal extreme */
        t.block_m = 16, t.block_n = 256, t.num_warps = 32, t.num_stages = 8, t.softmax_scale = -0.5f;
        ck_assert_msg(kiln_attention_check(&t) == KILN_OK, "%s", kiln_last_error());
        KilnAttentionParams mqa = valid(layout);
        mqa.heads_kv = 1;
        mqa.k_stride[1] = mqa.v_stride[1] = 0;   /* one K/V head: a broadcast stride is fine for inputs */
        ck_assert_msg(kiln_attention_check(&mqa) == KILN_OK, "%s", kiln_last_error());
        KilnAttentionParams grid = valid(layout);
        grid.batch = 8191, grid.heads_q = 8;     /* 65528 programs on the grid's second axis */
        ck_assert_msg(kiln_attention_check(&grid) == KILN_OK, "%s", kiln_last_error());
        grid.batch = 8193;                       /* 65544: several launches of whole batches */
        ck_assert_msg(kiln_attention_check(&grid) == KILN_OK, "%s", kiln_last_error());
    }
}
END_TEST

/* Empty tensors: no rows need no pointers at all; no keys need no K/V. */
START_TEST(empty_problems)
{
    KilnAttentionParams p = valid(1);
    p.seqlen_q = 0;
    p.q = p.k = p.v = p.o = p.lse = 0;
    ck_assert_msg(kiln_attention_check(&p) == KILN_OK, "%s", kiln_last_error());
    /* still a usage error without a device */
    ck_assert_int_eq(kiln_attention_fwd(NULL, &p, NULL), KILN_ERR_USAGE);

    KilnAttentionParams z = valid(0);
    z.seqlen_k = 0;
    z.k = z.v = 0;
    ck_assert_msg(kiln_attention_check(&z) == KILN_OK, "%s", kiln_last_error());
    z.o = 0;   /* but the rows still need O (they get O = 0, LSE = -inf) */
    ck_assert_int_eq(kiln_attention_check(&z), KILN_ERR_USAGE);
    ck_assert_ptr_nonnull(strstr(kiln_last_error(), "o is a null pointer"));
}
END_TEST

/* The embedded program is byte for byte the file in the source tree. */
START_TEST(embedded_program_is_current)
{
    const char *emb = kiln_lib_source("lang/lib/attention_fwd.tile");
    ck_assert_ptr_nonnull(emb);
    FILE *f = fopen(tu_src_path("lang/lib/attention_fwd.tile"), "rb");
    ck_assert_ptr_nonnull(f);
    static char disk[1 << 20];
    size_t n = fread(disk, 1, sizeof disk - 1, f);
    fclose(f);
    disk[n] = 0;
    ck_assert_uint_eq(strlen(emb), n);
    ck_assert_msg(memcmp(emb, disk, n) == 0, "embedded attention_fwd.tile differs from the file: re-run cmake");
    ck_assert_ptr_nonnull(strstr(emb, "kernel attn_fwd_f16"));
    ck_assert_ptr_nonnull(strstr(emb, "kernel attn_fwd_bf16"));
    ck_assert_ptr_null(kiln_lib_source("lang/lib/nope.tile"));
    ck_assert_ptr_null(kiln_lib_source(NULL));
}
END_TEST

START_TEST(cache_starts_empty)
{
    ck_assert_int_eq(kiln_attention_cache_size(NULL), 0);
    ck_assert_int_eq(kiln_attention_cache_size(POISON_DEV), 0);
    ck_assert_int_eq(kiln_attention_cache_clear(NULL), KILN_OK);
    ck_assert_int_eq(kiln_attention_cache_clear(POISON_DEV), KILN_OK);   /* nothing of it: not touched */
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("runtime_attention_api");
    TCase *tc = tcase_create("validation");
    tcase_add_loop_test(tc, rejects_before_touching_the_device, 0, (int)(2 * sizeof k_bad / sizeof k_bad[0]));
    tcase_add_test(tc, null_params);
    tcase_add_test(tc, valid_problems_pass);
    tcase_add_test(tc, empty_problems);
    tcase_add_test(tc, embedded_program_is_current);
    tcase_add_test(tc, cache_starts_empty);
    suite_add_tcase(s, tc);
    return s;
}

TU_MAIN(suite)
