/* test_attention_decode_api.c — kiln_attention_decode's validation, split
 * choice and workspace size, without a GPU.
 *
 * Every rejected call must fail BEFORE the device is touched: the calls pass a
 * KilnDevice pointer that faults when dereferenced, so a check that ran after
 * the first device access would crash the test. Each case starts from a valid
 * problem (contiguous or paged cache, GQA 8/2, 3 new tokens, fake 16-byte
 * aligned device addresses), breaks one field, and checks the status and that
 * the message names the field. Block masks likewise: a descriptor laid out as
 * kiln_attention_block_mask_create fills it, then one field broken at a time.
 */
#include "testutil.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kiln.h"

#define POISON_DEV ((KilnDevice *)(uintptr_t)0x18)

/* [b, s, h, d] strides (batch, head, sequence) */
static void bshd(int64_t st[3], int heads, int seqlen, int d)
{
    st[0] = (int64_t)seqlen * heads * d, st[1] = d, st[2] = (int64_t)heads * d;
}

static KilnAttentionDecodeParams valid(int paged)
{
    KilnAttentionDecodeParams p = {.dtype = KILN_F16, .batch = 4, .heads_q = 8, .heads_kv = 2, .seqlen_q = 3,
                                   .head_dim = 128, .q = 0x7f0000000000ull, .o = 0x7f0010000000ull,
                                   .lse = 0x7f0020000000ull, .k = 0x7f0030000000ull, .v = 0x7f0040000000ull,
                                   .cache_seqlens = 0x7f0050000000ull, .max_seqlen_k = 4000, .causal = 1};
    bshd(p.q_stride, p.heads_q, p.seqlen_q, p.head_dim);
    bshd(p.o_stride, p.heads_q, p.seqlen_q, p.head_dim);
    if (paged) {
        p.block_table = 0x7f0060000000ull, p.page_size = 64, p.num_pages = 300, p.block_table_stride = 63;
        bshd(p.k_stride, p.heads_kv, p.page_size, p.head_dim);   /* [num_pages, page, h, d] */
    } else {
        bshd(p.k_stride, p.heads_kv, p.max_seqlen_k, p.head_dim);
    }
    memcpy(p.v_stride, p.k_stride, sizeof p.k_stride);
    return p;
}

typedef struct BadCase {
    const char *what;
    void (*mutate)(KilnAttentionDecodeParams *p);
    KilnStatus status;
    const char *needle;
} BadCase;

static void m_dtype(KilnAttentionDecodeParams *p) { p->dtype = (KilnDtype)5; }
static void m_batch(KilnAttentionDecodeParams *p) { p->batch = 0; }
static void m_heads_kv(KilnAttentionDecodeParams *p) { p->heads_kv = 3; }
static void m_tokens(KilnAttentionDecodeParams *p) { p->seqlen_q = 17; }
static void m_tokens_neg(KilnAttentionDecodeParams *p) { p->seqlen_q = -1; }
static void m_head_dim(KilnAttentionDecodeParams *p) { p->head_dim = 80; }
static void m_max_seqlen(KilnAttentionDecodeParams *p) { p->max_seqlen_k = -5; }
static void m_splits(KilnAttentionDecodeParams *p) { p->num_splits = 129; }
static void m_block_n(KilnAttentionDecodeParams *p) { p->block_n = 48; }
static void m_warps(KilnAttentionDecodeParams *p) { p->num_warps = 3; }
static void m_stages(KilnAttentionDecodeParams *p) { p->num_stages = 9; }
static void m_scale(KilnAttentionDecodeParams *p) { p->softmax_scale = NAN; }
static void m_page_size(KilnAttentionDecodeParams *p) { p->page_size = 48; }
static void m_num_pages(KilnAttentionDecodeParams *p) { p->num_pages = 0; }
static void m_bt_stride(KilnAttentionDecodeParams *p) { p->block_table_stride = 62; }
static void m_null_q(KilnAttentionDecodeParams *p) { p->q = 0; }
static void m_null_k(KilnAttentionDecodeParams *p) { p->k = 0; }
static void m_null_lens(KilnAttentionDecodeParams *p) { p->cache_seqlens = 0; }
static void m_lens_align(KilnAttentionDecodeParams *p) { p->cache_seqlens += 4; }
static void m_bt_align(KilnAttentionDecodeParams *p) { p->block_table += 8; }
static void m_o_overlap(KilnAttentionDecodeParams *p) { p->o_stride[1] = 0; }
static void m_v_neg(KilnAttentionDecodeParams *p) { p->v_stride[2] = -1; }
static void m_ws_align(KilnAttentionDecodeParams *p) { p->workspace = 0x7f0070000004ull; }
static void m_combine(KilnAttentionDecodeParams *p) { p->combine = 3; }

static const BadCase k_bad[] = {
    {"dtype", m_dtype, KILN_ERR_USAGE, "dtype 5"},
    {"batch", m_batch, KILN_ERR_USAGE, "batch must be positive"},
    {"gqa", m_heads_kv, KILN_ERR_USAGE, "heads_q (8) must be a multiple of heads_kv (3)"},
    {"17 tokens", m_tokens, KILN_ERR_UNSUPPORTED, "seqlen_q 17 is outside [0, 16]"},
    {"-1 tokens", m_tokens_neg, KILN_ERR_UNSUPPORTED, "seqlen_q -1"},
    {"head dim", m_head_dim, KILN_ERR_UNSUPPORTED, "head_dim 80 is not supported"},
    {"max_seqlen_k", m_max_seqlen, KILN_ERR_USAGE, "max_seqlen_k -5"},
    {"splits", m_splits, KILN_ERR_USAGE, "num_splits 129"},
    {"block_n", m_block_n, KILN_ERR_USAGE, "block_n 48"},
    {"warps", m_warps, KILN_ERR_USAGE, "num_warps 3"},
    {"stages", m_stages, KILN_ERR_USAGE, "num_stages 9"},
    {"scale", m_scale, KILN_ERR_USAGE, "softmax_scale must be finite"},
    {"null q", m_null_q, KILN_ERR_USAGE, "q is a null pointer"},
    {"null k", m_null_k, KILN_ERR_USAGE, "k is a null pointer"},
    {"null lens", m_null_lens, KILN_ERR_USAGE, "cache_seqlens is a null pointer"},
    {"lens align", m_lens_align, KILN_ERR_USAGE, "cache_seqlens (0x7f0050000004) is not 16-byte aligned"},
    {"o overlap", m_o_overlap, KILN_ERR_USAGE, "o_stride[1] (head) is 0 with 8 head entries"},
    {"v negative", m_v_neg, KILN_ERR_USAGE, "v_stride[2] (sequence) is negative"},
    {"workspace align", m_ws_align, KILN_ERR_USAGE, "workspace (0x7f0070000004) is not 16-byte aligned"},
    {"combine", m_combine, KILN_ERR_USAGE, "combine 3 must be 0 (automatic)"},
};

static const BadCase k_bad_paged[] = {
    {"page size", m_page_size, KILN_ERR_UNSUPPORTED, "page_size 48 is not supported"},
    {"num pages", m_num_pages, KILN_ERR_USAGE, "num_pages must be positive"},
    {"table stride", m_bt_stride, KILN_ERR_USAGE, "block_table_stride 62 is below the 63 pages"},
    {"table align", m_bt_align, KILN_ERR_USAGE, "block_table (0x7f0060000008) is not 16-byte aligned"},
};

static void expect_rejected(const BadCase *c, int paged)
{
    KilnAttentionDecodeParams p = valid(paged);
    c->mutate(&p);
    kiln_clear_error();
    KilnStatus st = kiln_attention_decode_check(&p);
    ck_assert_msg(st == c->status, "%s: check gave %s (%s), want %s", c->what, kiln_status_name(st),
                  kiln_last_error(), kiln_status_name(c->status));
    ck_assert_msg(strstr(kiln_last_error(), c->needle), "%s: message '%s' lacks '%s'", c->what, kiln_last_error(),
                  c->needle);
    ck_assert_msg(strncmp(kiln_last_error(), "kiln_attention_decode: ", 23) == 0, "%s: '%s'", c->what,
                  kiln_last_error());
    kiln_clear_error();
    st = kiln_attention_decode(POISON_DEV, &p, NULL);
    ck_assert_msg(st == c->status, "%s: decode gave %s (%s)", c->what, kiln_status_name(st), kiln_last_error());
    ck_assert_msg(strstr(kiln_last_error(), c->needle), "%s: decode message '%s'", c->what, kiln_last_error());
}

START_TEST(rejects_before_touching_the_device)
{
    expect_rejected(&k_bad[_i / 2], _i % 2);
}
END_TEST

START_TEST(rejects_bad_paging)
{
    expect_rejected(&k_bad_paged[_i], 1);
}
END_TEST

/* Valid problems pass; with no device the call stops at "dev is NULL". */
START_TEST(valid_problems_pass)
{
    ck_assert_int_eq(kiln_attention_decode_check(NULL), KILN_ERR_USAGE);
    for (int paged = 0; paged < 2; paged++) {
        KilnAttentionDecodeParams p = valid(paged);
        ck_assert_msg(kiln_attention_decode_check(&p) == KILN_OK, "paged %d: %s", paged, kiln_last_error());
        ck_assert_int_eq(kiln_attention_decode(NULL, &p, NULL), KILN_ERR_USAGE);
        ck_assert_ptr_nonnull(strstr(kiln_last_error(), "dev is NULL"));
        int dims[] = {32, 64, 96, 128, 256}, pages[] = {16, 32, 64, 128, 256};
        for (int i = 0; i < 5; i++) {
            KilnAttentionDecodeParams d = valid(paged);
            d.head_dim = dims[i];
            bshd(d.q_stride, d.heads_q, d.seqlen_q, d.head_dim);
            bshd(d.o_stride, d.heads_q, d.seqlen_q, d.head_dim);
            d.k_stride[1] = d.v_stride[1] = d.head_dim;
            d.page_size = pages[i];
            d.block_table_stride = (d.max_seqlen_k + d.page_size - 1) / d.page_size;
            ck_assert_msg(kiln_attention_decode_check(&d) == KILN_OK, "d=%d page %d: %s", dims[i], pages[i],
                          kiln_last_error());
        }
        /* no limit on batch * heads: 100000 sequences of 64 query heads */
        KilnAttentionDecodeParams big = valid(paged);
        big.batch = 100000, big.heads_q = 64, big.heads_kv = 8, big.seqlen_q = 1;
        bshd(big.q_stride, big.heads_q, 1, big.head_dim);
        bshd(big.o_stride, big.heads_q, 1, big.head_dim);
        ck_assert_msg(kiln_attention_decode_check(&big) == KILN_OK, "%s", kiln_last_error());
    }
    /* no new tokens: nothing to do, no pointers needed; an empty cache needs no K/V */
    KilnAttentionDecodeParams e = valid(0);
    e.seqlen_q = 0, e.q = e.o = e.lse = e.k = e.v = e.cache_seqlens = 0;
    ck_assert_msg(kiln_attention_decode_check(&e) == KILN_OK, "%s", kiln_last_error());
    KilnAttentionDecodeParams z = valid(0);
    z.max_seqlen_k = 0, z.k = z.v = 0;
    ck_assert_msg(kiln_attention_decode_check(&z) == KILN_OK, "%s", kiln_last_error());
}
END_TEST

/* The split choice: 1 when the (batch, KV head) programs fill the GPU or the keys are
 * few, else at most two CTAs per SM (rounded down: one wave) with >= 128 KB of K+V (4 blocks
 * at d 128) per split, rounded so that no split is empty; the override wins. */
START_TEST(splits_from_shape_and_sms)
{
    KilnAttentionDecodeParams p = valid(0);
    p.batch = 1, p.max_seqlen_k = 32768, p.seqlen_q = 1;   /* 2 programs, 512 key blocks of 64 */
    ck_assert_int_eq(kiln_attention_decode_splits(&p, 132), 128);   /* 264 / 2 = 132, capped */
    p.batch = 16;                                                   /* 32 programs */
    ck_assert_int_eq(kiln_attention_decode_splits(&p, 132), 8);     /* 264 / 32, rounded down: one wave */
    p.batch = 64;                                                   /* 128 programs: 97% of 132 SMs */
    ck_assert_int_eq(kiln_attention_decode_splits(&p, 132), 1);
    p.batch = 1, p.max_seqlen_k = 300;                              /* 5 key blocks: too few to split */
    ck_assert_int_eq(kiln_attention_decode_splits(&p, 132), 1);
    p.max_seqlen_k = 2048;                                          /* 32 blocks: at most 8 splits */
    ck_assert_int_eq(kiln_attention_decode_splits(&p, 132), 8);
    p.heads_q = 32, p.heads_kv = 8, p.max_seqlen_k = 16384;         /* 8 programs, 256 blocks */
    ck_assert_int_eq(kiln_attention_decode_splits(&p, 132), 32);    /* 264 / 8 = 33 -> 8 blocks each: 32 */
    p.max_seqlen_k = 131072;                                        /* 2048 blocks: 33 of 63 */
    ck_assert_int_eq(kiln_attention_decode_splits(&p, 132), 33);
    p.head_dim = 64, p.max_seqlen_k = 4096;     /* 64 blocks of 16 KB: >= 8 per split, at most 8 */
    ck_assert_int_eq(kiln_attention_decode_splits(&p, 132), 8);
    p.head_dim = 128, p.batch = 8;                                  /* 64 programs: 264 / 64 = 4, 256 CTAs */
    ck_assert_int_eq(kiln_attention_decode_splits(&p, 132), 4);
    p.batch = 1, p.heads_q = 8, p.heads_kv = 2, p.max_seqlen_k = 2048;
    p.num_splits = 3;
    ck_assert_int_eq(kiln_attention_decode_splits(&p, 132), 3);
    /* workspace: O_part f32 and LSE_part f32 per split and row */
    p.num_splits = 0;
    size_t rows = (size_t)p.batch * p.heads_q * p.seqlen_q;
    ck_assert_uint_eq(kiln_attention_decode_workspace(&p, 1), 0);
    ck_assert_uint_eq(kiln_attention_decode_workspace(&p, 5), 5 * rows * (p.head_dim * 4 + 4));
    /* the fused combine's tickets before them: an i32 per (batch, KV head, row block), to 16
     * bytes; 8/2 heads x 1 token = 4 packed rows, one block of 16 */
    p.combine = KILN_DECODE_COMBINE_FUSED;
    ck_assert_uint_eq(kiln_attention_decode_workspace(&p, 1), 0);
    ck_assert_uint_eq(kiln_attention_decode_workspace(&p, 5), 5 * rows * (p.head_dim * 4 + 4) + 16);
    p.batch = 3, p.heads_q = 256, p.heads_kv = 2;   /* 128 packed rows: two blocks of 64, 12 tickets */
    rows = (size_t)p.batch * p.heads_q * p.seqlen_q;
    ck_assert_uint_eq(kiln_attention_decode_workspace(&p, 2), 2 * rows * (p.head_dim * 4 + 4) + 3 * 2 * 2 * 4);
    p.combine = KILN_DECODE_COMBINE_KERNEL;
    ck_assert_uint_eq(kiln_attention_decode_workspace(&p, 2), 2 * rows * (p.head_dim * 4 + 4));
}
END_TEST

/* ---- block masks: a descriptor as kiln_attention_block_mask_create fills it (the documented
 * layout: nine i32 arrays, each rounded up to 16 bytes), at a fake device address ---- */
static KilnBlockMask fake_mask(int n, int bq, int bk, int batch, int heads, int causal)
{
    KilnBlockMask m = {.block_q = bq, .block_kv = bk, .batch = batch, .heads = heads, .data = 0x7f0080000000ull,
                       .seqlen_q = n, .seqlen_k = n, .causal = causal};
    m.num_q_blocks = (n + bq - 1) / bq, m.num_kv_blocks = (n + bk - 1) / bk;
    size_t g = (size_t)batch * heads, nq = m.num_q_blocks, nk = m.num_kv_blocks, at = 0;
    size_t e[9] = {g * nq, g * nq * nk, g * nq, g * nq * nk, g * nk, g * nk * nq, g * nk, g * nk * nq, g * nq * nk};
    for (int i = 0; i < 9; i++) m.offset[i] = at, at += (e[i] + 3) / 4 * 16;
    m.bytes = at;
    return m;
}

static void expect_bad_mask(const KilnAttentionDecodeParams *p, KilnStatus want, const char *needle)
{
    kiln_clear_error();
    KilnStatus st = kiln_attention_decode_check(p);
    ck_assert_msg(st == want && strstr(kiln_last_error(), needle), "check gave %s: '%s', want '%s'",
                  kiln_status_name(st), kiln_last_error(), needle);
    ck_assert_msg(strncmp(kiln_last_error(), "kiln_attention_decode: ", 23) == 0, "'%s'", kiln_last_error());
    st = kiln_attention_decode(POISON_DEV, p, NULL);
    ck_assert_msg(st == want && strstr(kiln_last_error(), needle), "decode gave %s: '%s'", kiln_status_name(st),
                  kiln_last_error());
}

/* The mask must be the full problem's (seqlen_q = seqlen_k >= max_seqlen_k) with the call's
 * causal flag, batch and heads (or 1), laid out as create made it, its key blocks whole tiles. */
START_TEST(block_masks_checked)
{
    for (int paged = 0; paged < 2; paged++) {
        KilnAttentionDecodeParams p = valid(paged);   /* batch 4, heads 8/2, causal, 4000 keys */
        KilnBlockMask m = fake_mask(4000, 128, 128, 1, 1, 1);
        p.block_mask = &m;
        ck_assert_msg(kiln_attention_decode_check(&p) == KILN_OK, "%s", kiln_last_error());
        KilnBlockMask per = fake_mask(4096, 64, 32, 4, 8, 1);   /* per row, longer, blocks 32: tiles 32 */
        p.block_mask = &per;
        ck_assert_msg(kiln_attention_decode_check(&p) == KILN_OK, "%s", kiln_last_error());
        p.block_n = 64;
        expect_bad_mask(&p, KILN_ERR_USAGE, "block_n 64 must divide the block mask's key blocks (block_kv 32)");
        p.block_n = 0;
        KilnBlockMask x = m;
        p.block_mask = &x;
        x.seqlen_q = 1;
        expect_bad_mask(&p, KILN_ERR_USAGE, "block_mask was made for seqlen_q 1, seqlen_k 4000: decoding reads the "
                                            "mask of the full problem");
        x = fake_mask(3000, 128, 128, 1, 1, 1);
        expect_bad_mask(&p, KILN_ERR_USAGE, "block_mask was made for 3000 tokens, below max_seqlen_k 4000");
        x = fake_mask(4000, 128, 128, 1, 1, 0);
        expect_bad_mask(&p, KILN_ERR_USAGE, "block_mask was made without the causal mask, the call is causal");
        x = fake_mask(4000, 128, 128, 3, 1, 1);
        expect_bad_mask(&p, KILN_ERR_USAGE, "block_mask.batch 3 must be 1 (the same mask for every sequence) or the "
                                            "call's batch 4");
        x = fake_mask(4000, 128, 128, 1, 2, 1);
        expect_bad_mask(&p, KILN_ERR_USAGE, "block_mask.heads 2 must be 1 (the same mask for every head) or the "
                                            "call's heads_q 8");
        x = m;
        x.offset[KILN_BM_FULL_KV_IDX] += 16;
        expect_bad_mask(&p, KILN_ERR_USAGE, "do not agree (make it with kiln_attention_block_mask_create)");
        x = m;
        x.bytes -= 4;
        expect_bad_mask(&p, KILN_ERR_USAGE, "block_mask.bytes is");
        x = m;
        x.data += 8;
        expect_bad_mask(&p, KILN_ERR_USAGE, "block_mask.data (0x7f0080000008) is not 16-byte aligned");
        x = m;
        x.block_q = 0;   /* not what create leaves */
        expect_bad_mask(&p, KILN_ERR_USAGE, "do not agree");
    }
}
END_TEST

/* The program is embedded, and kiln_attention_decode shares the forward's cache. */
START_TEST(program_embedded)
{
    const char *src = kiln_lib_source("lang/lib/attention_decode.tile");
    ck_assert_ptr_nonnull(src);
    ck_assert_ptr_nonnull(strstr(src, "kernel attn_decode_combine_bf16"));
    ck_assert_ptr_nonnull(strstr(src, "kernel attn_decode_bm_bf16"));
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("attention_decode_api");
    TCase *tc = tcase_create("api");
    tcase_add_loop_test(tc, rejects_before_touching_the_device, 0, (int)(2 * sizeof k_bad / sizeof k_bad[0]));
    tcase_add_loop_test(tc, rejects_bad_paging, 0, (int)(sizeof k_bad_paged / sizeof k_bad_paged[0]));
    tcase_add_test(tc, valid_problems_pass);
    tcase_add_test(tc, splits_from_shape_and_sms);
    tcase_add_test(tc, program_embedded);
    tcase_add_test(tc, block_masks_checked);
    suite_add_tcase(s, tc);
    return s;
}

TU_MAIN(suite)
