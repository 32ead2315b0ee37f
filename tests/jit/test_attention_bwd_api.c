/* test_attention_bwd_api.c — kiln_attention_bwd's validation, without a GPU.
 *
 * As for the forward (test_attention_api.c): every rejected call must fail
 * BEFORE the device is touched, so the calls pass a KilnDevice pointer that
 * faults when dereferenced. Each case starts from a valid problem (GQA 8/2,
 * ragged lengths, fake aligned device addresses, both layouts), breaks one
 * field, and checks the status, the "kiln_attention_bwd: " prefix and that the
 * message names the field. Also: the scratch size, empty problems, and the
 * embedded program being the file on disk.
 */
#include "testutil.h"

#include <stdint.h>
#include <string.h>

#include "kiln.h"

#define POISON_DEV ((KilnDevice *)(uintptr_t)0x18)

static void dense_strides(int64_t st[3], int heads, int seqlen, int d, int bshd)
{
    if (bshd) {
        st[0] = (int64_t)seqlen * heads * d, st[1] = d, st[2] = (int64_t)heads * d;
    } else {
        st[0] = (int64_t)heads * seqlen * d, st[1] = (int64_t)seqlen * d, st[2] = d;
    }
}

static KilnAttentionBwdParams valid(int bshd)
{
    KilnAttentionBwdParams p = {
        .fwd = {.dtype = KILN_F16, .batch = 3, .heads_q = 8, .heads_kv = 2, .seqlen_q = 117, .seqlen_k = 301,
                .head_dim = 96, .q = 0x7f0000000000ull, .k = 0x7f0010000000ull, .v = 0x7f0020000000ull,
                .o = 0x7f0030000000ull, .lse = 0x7f0040000000ull, .causal = 1},
        .dout = 0x7f0050000000ull, .dq = 0x7f0060000000ull, .dk = 0x7f0070000000ull, .dv = 0x7f0080000000ull,
        .scratch = 0x7f0090000000ull, .scratch_size = (size_t)1 << 40};   /* ample (test_e2e_api_robust.c checks the size) */
    KilnAttentionParams *f = &p.fwd;
    dense_strides(f->q_stride, f->heads_q, f->seqlen_q, f->head_dim, bshd);
    dense_strides(f->o_stride, f->heads_q, f->seqlen_q, f->head_dim, bshd);
    dense_strides(f->k_stride, f->heads_kv, f->seqlen_k, f->head_dim, bshd);
    dense_strides(f->v_stride, f->heads_kv, f->seqlen_k, f->head_dim, bshd);
    memcpy(p.dout_stride, f->o_stride, sizeof p.dout_stride);
    memcpy(p.dq_stride, f->q_stride, sizeof p.dq_stride);
    memcpy(p.dk_stride, f->k_stride, sizeof p.dk_stride);
    memcpy(p.dv_stride, f->v_stride, sizeof p.dv_stride);
    return p;
}

typedef struct BadCase {
    const char *what;
    void (*mutate)(KilnAttentionBwdParams *p);
    KilnStatus status;
    const char *needle;
} BadCase;

static void m_dtype(KilnAttentionBwdParams *p) { p->fwd.dtype = (KilnDtype)9; }
static void m_batch(KilnAttentionBwdParams *p) { p->fwd.batch = 0; }
static void m_gqa(KilnAttentionBwdParams *p) { p->fwd.heads_kv = 3; }
static void m_head_dim(KilnAttentionBwdParams *p) { p->fwd.head_dim = 80; }
static void m_seqlen(KilnAttentionBwdParams *p) { p->fwd.seqlen_k = -1; }
static void m_scale(KilnAttentionBwdParams *p) { p->fwd.softmax_scale = 1.0f / 0.0f; }
static void m_block_m(KilnAttentionBwdParams *p) { p->block_m = 48; }
static void m_block_n(KilnAttentionBwdParams *p) { p->block_n = 512; }
static void m_warps(KilnAttentionBwdParams *p) { p->num_warps = 3; }
static void m_stages(KilnAttentionBwdParams *p) { p->num_stages = 9; }
static void m_fwd_tuning(KilnAttentionBwdParams *p) { p->fwd.block_m = 7; }
static void m_dq_block_m(KilnAttentionBwdParams *p) { p->dq_block_m = 48; }
static void m_dq_warps(KilnAttentionBwdParams *p) { p->dq_num_warps = 3; }
static void m_schedule(KilnAttentionBwdParams *p) { p->schedule.warp_specialize = 1, p->schedule.mbarrier = -1; }
static void m_null_q(KilnAttentionBwdParams *p) { p->fwd.q = 0; }
static void m_null_k(KilnAttentionBwdParams *p) { p->fwd.k = 0; }
static void m_null_o(KilnAttentionBwdParams *p) { p->fwd.o = 0; }
static void m_null_lse(KilnAttentionBwdParams *p) { p->fwd.lse = 0; }
static void m_null_dout(KilnAttentionBwdParams *p) { p->dout = 0; }
static void m_null_dq(KilnAttentionBwdParams *p) { p->dq = 0; }
static void m_null_dk(KilnAttentionBwdParams *p) { p->dk = 0; }
static void m_null_dv(KilnAttentionBwdParams *p) { p->dv = 0; }
static void m_null_scratch(KilnAttentionBwdParams *p) { p->scratch = 0; }
static void m_misaligned_dout(KilnAttentionBwdParams *p) { p->dout += 2; }
static void m_misaligned_dk(KilnAttentionBwdParams *p) { p->dk += 8; }
static void m_misaligned_scratch(KilnAttentionBwdParams *p) { p->scratch += 4; }
static void m_neg_dout_stride(KilnAttentionBwdParams *p) { p->dout_stride[2] = -1; }
static void m_dq_overlap(KilnAttentionBwdParams *p) { p->dq_stride[1] = 0; }
static void m_dk_overlap(KilnAttentionBwdParams *p) { p->dk_stride[2] = 0; }
static void m_dv_overflow(KilnAttentionBwdParams *p) { p->dv_stride[0] = INT64_MAX / 2; }
/* above 65535 batch * heads_q the backward runs launches of whole batches (issue 24),
 * unless no batch count keeps their pointer advances aligned: here an odd batch stride
 * wants counts that are multiples of 8, and 16384 heads allow at most 3 batches a launch */
static void m_grid(KilnAttentionBwdParams *p)
{
    p->fwd.batch = 9, p->fwd.heads_q = 16384, p->fwd.q_stride[0] += 1;
}

static const BadCase k_bad[] = {
    {"dtype", m_dtype, KILN_ERR_USAGE, "dtype 9 is neither"},
    {"batch", m_batch, KILN_ERR_USAGE, "batch must be positive"},
    {"gqa", m_gqa, KILN_ERR_USAGE, "must be a multiple of heads_kv"},
    {"head dim", m_head_dim, KILN_ERR_UNSUPPORTED, "head_dim 80 is not supported"},
    {"seqlen", m_seqlen, KILN_ERR_USAGE, "seqlen_k -1"},
    {"scale", m_scale, KILN_ERR_USAGE, "softmax_scale must be finite"},
    {"block_m", m_block_m, KILN_ERR_USAGE, "block_m 48"},
    {"block_n", m_block_n, KILN_ERR_USAGE, "block_n 512"},
    {"warps", m_warps, KILN_ERR_USAGE, "num_warps 3"},
    {"stages", m_stages, KILN_ERR_USAGE, "num_stages 9"},
    {"forward's tuning", m_fwd_tuning, KILN_ERR_USAGE, "block_m 7"},
    {"dq_block_m", m_dq_block_m, KILN_ERR_USAGE, "the dQ pass's tuning (dq_*): block_m 48"},
    {"dq_num_warps", m_dq_warps, KILN_ERR_USAGE, "the dQ pass's tuning (dq_*): num_warps 3"},
    {"schedule", m_schedule, KILN_ERR_USAGE, "schedule: the schedule option warp_specialize (--warp-specialize) needs mbarrier"},
    {"null q", m_null_q, KILN_ERR_USAGE, "fwd.q is a null pointer"},
    {"null k", m_null_k, KILN_ERR_USAGE, "fwd.k is a null pointer"},
    {"null o", m_null_o, KILN_ERR_USAGE, "fwd.o is a null pointer"},
    {"null lse", m_null_lse, KILN_ERR_USAGE, "fwd.lse is a null pointer"},
    {"null dout", m_null_dout, KILN_ERR_USAGE, "dout is a null pointer"},
    {"null dq", m_null_dq, KILN_ERR_USAGE, "dq is a null pointer"},
    {"null dk", m_null_dk, KILN_ERR_USAGE, "dk is a null pointer"},
    {"null dv", m_null_dv, KILN_ERR_USAGE, "dv is a null pointer"},
    {"null scratch", m_null_scratch, KILN_ERR_USAGE, "scratch is a null pointer"},
    {"misaligned dout", m_misaligned_dout, KILN_ERR_USAGE, "dout (0x7f0050000002) is not 16-byte aligned"},
    {"misaligned dk", m_misaligned_dk, KILN_ERR_USAGE, "dk (0x7f0070000008) is not 16-byte aligned"},
    {"misaligned scratch", m_misaligned_scratch, KILN_ERR_USAGE, "scratch (0x7f0090000004) is not 16-byte aligned"},
    {"negative dout stride", m_neg_dout_stride, KILN_ERR_USAGE, "dout_stride[2] (sequence) is negative"},
    {"dq overlaps itself", m_dq_overlap, KILN_ERR_USAGE, "dq_stride[1] (head) is 0 with 8 head entries"},
    {"dk overlaps itself", m_dk_overlap, KILN_ERR_USAGE, "dk_stride[2] (sequence) is 0 with 301 sequence entries"},
    {"dv overflow", m_dv_overflow, KILN_ERR_USAGE, "dv strides overflow 64-bit offsets"},
    {"grid", m_grid, KILN_ERR_UNSUPPORTED, "exceeds 65535"},
};

START_TEST(rejects_before_touching_the_device)
{
    const BadCase *c = &k_bad[_i / 2];
    KilnAttentionBwdParams p = valid(_i % 2);
    c->mutate(&p);
    kiln_clear_error();
    KilnStatus st = kiln_attention_bwd_check(&p);
    ck_assert_msg(st == c->status, "%s: check gave %s (%s), want %s", c->what, kiln_status_name(st),
                  kiln_last_error(), kiln_status_name(c->status));
    ck_assert_msg(strstr(kiln_last_error(), c->needle), "%s: message '%s' lacks '%s'", c->what, kiln_last_error(),
                  c->needle);
    ck_assert_msg(strncmp(kiln_last_error(), "kiln_attention_bwd: ", 20) == 0, "%s: '%s'", c->what,
                  kiln_last_error());
    kiln_clear_error();
    st = kiln_attention_bwd(POISON_DEV, &p, NULL);
    ck_assert_msg(st == c->status, "%s: bwd gave %s (%s)", c->what, kiln_status_name(st), kiln_last_error());
    ck_assert_msg(strstr(kiln_last_error(), c->needle), "%s: bwd message '%s'", c->what, kiln_last_error());
}
END_TEST

START_TEST(null_params)
{
    ck_assert_int_eq(kiln_attention_bwd_check(NULL), KILN_ERR_USAGE);
    ck_assert_ptr_nonnull(strstr(kiln_last_error(), "params is NULL"));
    ck_assert_int_eq(kiln_attention_bwd(POISON_DEV, NULL, NULL), KILN_ERR_USAGE);
    ck_assert_uint_eq(kiln_attention_bwd_scratch_size(NULL), 0);
}
END_TEST

/* Valid problems pass; with no device the call stops at "dev is NULL". */
START_TEST(valid_problems_pass)
{
    for (int layout = 0; layout < 2; layout++) {
        KilnAttentionBwdParams p = valid(layout);
        ck_assert_msg(kiln_attention_bwd_check(&p) == KILN_OK, "%s", kiln_last_error());
        ck_assert_int_eq(kiln_attention_bwd(NULL, &p, NULL), KILN_ERR_USAGE);
        ck_assert_ptr_nonnull(strstr(kiln_last_error(), "kiln_attention_bwd: dev is NULL"));
        int dims[] = {32, 64, 96, 128, 256};
        for (int i = 0; i < 5; i++) {
            KilnAttentionBwdParams d = valid(layout);
            d.fwd.head_dim = dims[i];   /* dense for this head dim: outputs must not overlap */
            KilnAttentionParams *f = &d.fwd;
            dense_strides(f->q_stride, f->heads_q, f->seqlen_q, dims[i], layout);
            dense_strides(f->o_stride, f->heads_q, f->seqlen_q, dims[i], layout);
            dense_strides(f->k_stride, f->heads_kv, f->seqlen_k, dims[i], layout);
            dense_strides(f->v_stride, f->heads_kv, f->seqlen_k, dims[i], layout);
            memcpy(d.dout_stride, f->o_stride, sizeof d.dout_stride);
            memcpy(d.dq_stride, f->q_stride, sizeof d.dq_stride);
            memcpy(d.dk_stride, f->k_stride, sizeof d.dk_stride);
            memcpy(d.dv_stride, f->v_stride, sizeof d.dv_stride);
            d.fwd.dtype = i % 2 ? KILN_BF16 : KILN_F16;
            d.deterministic = i % 2;
            ck_assert_msg(kiln_attention_bwd_check(&d) == KILN_OK, "d=%d: %s", dims[i], kiln_last_error());
        }
        KilnAttentionBwdParams mqa = valid(layout);   /* inputs may broadcast a single K/V head */
        mqa.fwd.heads_kv = 1;
        mqa.fwd.k_stride[1] = mqa.fwd.v_stride[1] = 0;
        ck_assert_msg(kiln_attention_bwd_check(&mqa) == KILN_OK, "%s", kiln_last_error());
        KilnAttentionBwdParams t = valid(layout);
        t.block_m = 16, t.block_n = 256, t.num_warps = 32, t.num_stages = 8;
        ck_assert_msg(kiln_attention_bwd_check(&t) == KILN_OK, "%s", kiln_last_error());
    }
}
END_TEST

/* Scratch: delta (f32 per row, rounded up to 256 bytes), then the f32 dQ
 * accumulator unless deterministic. */
START_TEST(scratch_size)
{
    KilnAttentionBwdParams p = valid(1);
    size_t rows = 3 * 8 * 117;
    size_t delta = (rows * 4 + 255) / 256 * 256;
    ck_assert_uint_eq(kiln_attention_bwd_scratch_size(&p), delta + rows * 96 * 4);
    p.deterministic = 1;
    ck_assert_uint_eq(kiln_attention_bwd_scratch_size(&p), delta);
    p.fwd.seqlen_q = 0;
    ck_assert_uint_eq(kiln_attention_bwd_scratch_size(&p), 0);
}
END_TEST

/* No rows: only dK, dV (zeros) are written, so q, o, dout, dq, lse and scratch may
 * be null; no keys: k, v, dk, dv may be null but the rows need the rest. */
START_TEST(empty_problems)
{
    KilnAttentionBwdParams p = valid(0);
    p.fwd.seqlen_q = 0;
    p.fwd.q = p.fwd.o = p.fwd.lse = p.dout = p.dq = p.scratch = 0;
    ck_assert_msg(kiln_attention_bwd_check(&p) == KILN_OK, "%s", kiln_last_error());
    p.dk = 0;
    ck_assert_int_eq(kiln_attention_bwd_check(&p), KILN_ERR_USAGE);
    ck_assert_ptr_nonnull(strstr(kiln_last_error(), "dk is a null pointer"));

    KilnAttentionBwdParams z = valid(1);
    z.fwd.seqlen_k = 0;
    z.fwd.k = z.fwd.v = z.dk = z.dv = 0;
    ck_assert_msg(kiln_attention_bwd_check(&z) == KILN_OK, "%s", kiln_last_error());
    z.scratch = 0;
    ck_assert_int_eq(kiln_attention_bwd_check(&z), KILN_ERR_USAGE);
    ck_assert_ptr_nonnull(strstr(kiln_last_error(), "scratch is a null pointer"));
}
END_TEST

START_TEST(embedded_program_is_current)
{
    const char *emb = kiln_lib_source("lang/lib/attention_bwd.tile");
    ck_assert_ptr_nonnull(emb);
    FILE *f = fopen(tu_src_path("lang/lib/attention_bwd.tile"), "rb");
    ck_assert_ptr_nonnull(f);
    static char disk[1 << 20];
    size_t n = fread(disk, 1, sizeof disk - 1, f);
    fclose(f);
    ck_assert_uint_eq(strlen(emb), n);
    ck_assert_msg(memcmp(emb, disk, n) == 0, "embedded attention_bwd.tile differs from the file: re-run cmake");
    static const char *kernels[] = {"attn_bwd_pre_", "attn_bwd_dkdv_", "attn_bwd_dq_", "attn_bwd_dq_cvt_"};
    for (int i = 0; i < 4; i++)
        for (int bf = 0; bf < 2; bf++) {
            char k[96];   /* the instance of the generic kernel that the runtime launches */
            snprintf(k, sizeof k, "kernel %s%s = %.*s(T = %s);", kernels[i], bf ? "bf16" : "f16",
                     (int)strlen(kernels[i]) - 1, kernels[i], bf ? "bf16" : "f16");
            ck_assert_msg(strstr(emb, k), "no '%s'", k);
        }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("attention_bwd_api");
    TCase *tc = tcase_create("validation");
    tcase_add_loop_test(tc, rejects_before_touching_the_device, 0, (int)(2 * sizeof k_bad / sizeof k_bad[0]));
    tcase_add_test(tc, null_params);
    tcase_add_test(tc, valid_problems_pass);
    tcase_add_test(tc, scratch_size);
    tcase_add_test(tc, empty_problems);
    tcase_add_test(tc, embedded_program_is_current);
    suite_add_tcase(s, tc);
    return s;
}

TU_MAIN(suite)
