/* test_attention_varlen_api.c — the packed variable-length fields of KilnAttentionParams
 * (cu_seqlens_q/k, total_q/k) through kiln_attention_fwd's and kiln_attention_bwd's
 * validation, without a GPU.
 *
 * As in test_attention_api.c, every rejected call must fail before the device is touched
 * (a faulting KilnDevice pointer): each case starts from a valid packed problem
 * ([total, heads, d] tensors, GQA 8/2, fake 16-byte aligned addresses), breaks one field
 * and checks the status and that the message names the field, for the forward and for the
 * backward (whose forward fields are named fwd.*). Also: valid packed problems pass, a
 * zero-initialised varlen block keeps the fixed-length meaning, empty packs need no
 * tensors, the backward's scratch size counts heads_q * total_q rows, its plan launches
 * the varlen kernels over the max lengths, and the launch arguments bind the prefix sums
 * and total_q.
 */
#include "testutil.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "jit_internal.h"
#include "kiln.h"

#define POISON_DEV ((KilnDevice *)(uintptr_t)0x18)

/* [total, heads, d]: element at h * d + token * heads * d (stride[0] unused: poisoned). */
static void packed_strides(int64_t st[3], int heads, int d)
{
    st[0] = -12345, st[1] = d, st[2] = (int64_t)heads * d;
}

static KilnAttentionParams valid(void)
{
    KilnAttentionParams p = {.dtype = KILN_F16, .batch = 5, .heads_q = 8, .heads_kv = 2, .seqlen_q = 117,
                             .seqlen_k = 301, .head_dim = 128, .q = 0x7f0000000000ull, .k = 0x7f0010000000ull,
                             .v = 0x7f0020000000ull, .o = 0x7f0030000000ull, .lse = 0x7f0040000000ull,
                             .causal = 1, .cu_seqlens_q = 0x7f0050000000ull, .cu_seqlens_k = 0x7f0050001000ull,
                             .total_q = 400, .total_k = 1000};
    packed_strides(p.q_stride, p.heads_q, p.head_dim);
    packed_strides(p.o_stride, p.heads_q, p.head_dim);
    packed_strides(p.k_stride, p.heads_kv, p.head_dim);
    packed_strides(p.v_stride, p.heads_kv, p.head_dim);
    return p;
}

static KilnAttentionBwdParams valid_bwd(void)
{
    KilnAttentionBwdParams b = {.fwd = valid(), .dout = 0x7f0060000000ull, .dq = 0x7f0070000000ull,
                                .dk = 0x7f0080000000ull, .dv = 0x7f0090000000ull, .scratch = 0x7f00a0000000ull,
                                .scratch_size = (size_t)1 << 40};   /* ample: the size's own checks are in test_e2e_api_robust.c */
    packed_strides(b.dout_stride, 8, 128);
    packed_strides(b.dq_stride, 8, 128);
    packed_strides(b.dk_stride, 2, 128);
    packed_strides(b.dv_stride, 2, 128);
    return b;
}

typedef struct BadCase {
    const char *what;
    void (*mutate)(KilnAttentionParams *p);
    KilnStatus status;
    const char *needle;   /* in the message, after "fwd." for the backward when fwd_field */
    int fwd_field;        /* a tensor's name: the backward says fwd.<name> */
} BadCase;

static void m_only_q(KilnAttentionParams *p) { p->cu_seqlens_k = 0; }
static void m_only_k(KilnAttentionParams *p) { p->cu_seqlens_q = 0; }
static void m_totals_alone(KilnAttentionParams *p) { p->cu_seqlens_q = p->cu_seqlens_k = 0; }
static void m_total_q_neg(KilnAttentionParams *p) { p->total_q = -1; }
static void m_total_k_huge(KilnAttentionParams *p) { p->total_k = INT32_MAX; }
static void m_grid(KilnAttentionParams *p) { p->batch = 8193; }   /* 65544 > 65535: no batch splits */
static void m_cu_q_misaligned(KilnAttentionParams *p) { p->cu_seqlens_q += 4; }
static void m_cu_k_misaligned(KilnAttentionParams *p) { p->cu_seqlens_k += 8; }
static void m_k_neg(KilnAttentionParams *p) { p->k_stride[1] = -128; }
static void m_q_overflow(KilnAttentionParams *p) { p->q_stride[2] = INT64_MAX / 2; }

static const BadCase k_bad[] = {
    {"cu_seqlens_k missing", m_only_q, KILN_ERR_USAGE, "cu_seqlens_k is 0 but cu_seqlens_q is set", 0},
    {"cu_seqlens_q missing", m_only_k, KILN_ERR_USAGE, "cu_seqlens_q is 0 but cu_seqlens_k is set", 0},
    {"totals without prefix sums", m_totals_alone, KILN_ERR_USAGE, "total_q (400) and total_k (1000) are for packed", 0},
    {"total_q < 0", m_total_q_neg, KILN_ERR_USAGE, "total_q must be in [0, ", 0},
    {"total_k huge", m_total_k_huge, KILN_ERR_USAGE, "total_k must be in [0, ", 0},
    {"grid y", m_grid, KILN_ERR_UNSUPPORTED, "batch * heads_q = 65544 exceeds 65535", 0},
    {"cu_seqlens_q misaligned", m_cu_q_misaligned, KILN_ERR_USAGE, "cu_seqlens_q (0x7f0050000004) is not 16-byte", 1},
    {"cu_seqlens_k misaligned", m_cu_k_misaligned, KILN_ERR_USAGE, "cu_seqlens_k (0x7f0050001008) is not 16-byte", 1},
    {"negative K head stride", m_k_neg, KILN_ERR_USAGE, "k_stride[1] (head) is negative", 1},
    {"q strides overflow", m_q_overflow, KILN_ERR_USAGE, "q strides overflow", 1},
};

START_TEST(fwd_rejects_before_touching_the_device)
{
    const BadCase *c = &k_bad[_i];
    KilnAttentionParams p = valid();
    c->mutate(&p);
    kiln_clear_error();
    KilnStatus st = kiln_attention_check(&p);
    ck_assert_msg(st == c->status, "%s: check gave %s (%s)", c->what, kiln_status_name(st), kiln_last_error());
    ck_assert_msg(strstr(kiln_last_error(), c->needle), "%s: message '%s' lacks '%s'", c->what, kiln_last_error(),
                  c->needle);
    ck_assert_msg(strncmp(kiln_last_error(), "kiln_attention_fwd: ", 20) == 0, "%s", kiln_last_error());
    ck_assert_int_eq(kiln_attention_fwd(POISON_DEV, &p, NULL), c->status);
}
END_TEST

START_TEST(bwd_rejects_before_touching_the_device)
{
    const BadCase *c = &k_bad[_i];
    KilnAttentionBwdParams b = valid_bwd();
    c->mutate(&b.fwd);
    kiln_clear_error();
    KilnStatus st = kiln_attention_bwd_check(&b);
    ck_assert_msg(st == c->status, "%s: check gave %s (%s)", c->what, kiln_status_name(st), kiln_last_error());
    char needle[160];
    snprintf(needle, sizeof needle, "%s%s", c->fwd_field ? "fwd." : "", c->needle);
    ck_assert_msg(strstr(kiln_last_error(), needle), "%s: message '%s' lacks '%s'", c->what, kiln_last_error(), needle);
    ck_assert_msg(strncmp(kiln_last_error(), "kiln_attention_bwd: ", 20) == 0, "%s", kiln_last_error());
    ck_assert_int_eq(kiln_attention_bwd(POISON_DEV, &b, NULL), c->status);
}
END_TEST

/* Outputs are packed tensors of total tokens: the forward's O and the backward's own. */
START_TEST(packed_outputs)
{
    KilnAttentionParams p = valid();
    p.o_stride[2] = 0;
    ck_assert_int_eq(kiln_attention_check(&p), KILN_ERR_USAGE);
    ck_assert_ptr_nonnull(strstr(kiln_last_error(), "o_stride[2] (sequence) is 0 with 400 sequence entries"));
    KilnAttentionBwdParams b = valid_bwd();
    b.dq_stride[2] = 0;
    ck_assert_int_eq(kiln_attention_bwd_check(&b), KILN_ERR_USAGE);
    ck_assert_ptr_nonnull(strstr(kiln_last_error(), "dq_stride[2] (sequence) is 0 with 400 sequence entries"));
    b = valid_bwd();
    b.dk = 0;
    ck_assert_int_eq(kiln_attention_bwd_check(&b), KILN_ERR_USAGE);
    ck_assert_ptr_nonnull(strstr(kiln_last_error(), "dk is a null pointer"));
    b = valid_bwd();
    b.scratch = 0;
    ck_assert_int_eq(kiln_attention_bwd_check(&b), KILN_ERR_USAGE);
    ck_assert_ptr_nonnull(strstr(kiln_last_error(), "scratch is a null pointer"));
}
END_TEST

START_TEST(valid_problems_pass)
{
    KilnAttentionParams p = valid();
    ck_assert_msg(kiln_attention_check(&p) == KILN_OK, "%s", kiln_last_error());
    ck_assert_int_eq(kiln_attention_fwd(NULL, &p, NULL), KILN_ERR_USAGE);
    ck_assert_ptr_nonnull(strstr(kiln_last_error(), "dev is NULL"));
    p.batch = 8191;   /* 65528 programs: one launch */
    ck_assert_msg(kiln_attention_check(&p) == KILN_OK, "%s", kiln_last_error());
    p = valid();      /* [heads, total, d] is just other strides */
    p.q_stride[1] = p.o_stride[1] = 400 * 128, p.q_stride[2] = p.o_stride[2] = 128;
    p.k_stride[1] = p.v_stride[1] = 1000 * 128, p.k_stride[2] = p.v_stride[2] = 128;
    ck_assert_msg(kiln_attention_check(&p) == KILN_OK, "%s", kiln_last_error());
    KilnAttentionBwdParams b = valid_bwd();
    ck_assert_msg(kiln_attention_bwd_check(&b) == KILN_OK, "%s", kiln_last_error());
    b.deterministic = 1;
    ck_assert_msg(kiln_attention_bwd_check(&b) == KILN_OK, "%s", kiln_last_error());
    /* a zero-initialised varlen block is the fixed-length call it always was */
    KilnAttentionParams f = valid();
    f.cu_seqlens_q = f.cu_seqlens_k = 0, f.total_q = f.total_k = 0;
    f.q_stride[0] = f.o_stride[0] = 117 * 8 * 128, f.k_stride[0] = f.v_stride[0] = 301 * 2 * 128;
    ck_assert_msg(kiln_attention_check(&f) == KILN_OK, "%s", kiln_last_error());
    ck_assert(!rt_attn_varlen(&f));
}
END_TEST

/* No query tokens: nothing to check or launch; no key tokens: K and V may be null. */
START_TEST(empty_packs)
{
    KilnAttentionParams p = valid();
    p.total_q = 0;
    p.q = p.k = p.v = p.o = p.lse = 0;
    ck_assert_msg(kiln_attention_check(&p) == KILN_OK, "%s", kiln_last_error());
    p = valid();
    p.total_k = 0;
    p.k = p.v = 0;
    ck_assert_msg(kiln_attention_check(&p) == KILN_OK, "%s", kiln_last_error());
    KilnAttentionBwdParams b = valid_bwd();
    b.fwd.total_k = 0;
    b.fwd.k = b.fwd.v = b.dk = b.dv = 0;
    ck_assert_msg(kiln_attention_bwd_check(&b) == KILN_OK, "%s", kiln_last_error());
    RtAttnBwdPlan pl;
    rt_attn_bwd_plan(90, &b, &pl);
    ck_assert_int_eq(pl.n, 2);   /* no dK/dV program */
    b = valid_bwd();
    b.fwd.total_q = 0;
    ck_assert_int_eq(kiln_attention_bwd_scratch_size(&b), 0);
    rt_attn_bwd_plan(90, &b, &pl);
    ck_assert_int_eq(pl.n, 1);   /* dK = dV = 0 only */
    ck_assert_str_eq(pl.k[0].kernel, "attn_bwd_dkdv_varlen_f16");
}
END_TEST

/* Scratch: delta for heads_q * total_q rows (256-byte rounded), then the f32 accumulator. */
START_TEST(scratch_size)
{
    KilnAttentionBwdParams b = valid_bwd();
    size_t rows = 8 * 400;
    ck_assert_uint_eq(kiln_attention_bwd_scratch_size(&b), (rows * 4 + 255) / 256 * 256 + rows * 128 * 4);
    b.deterministic = 1;
    ck_assert_uint_eq(kiln_attention_bwd_scratch_size(&b), (rows * 4 + 255) / 256 * 256);
}
END_TEST

/* The plan: the varlen kernels, grids over the max lengths and batch * heads. */
START_TEST(plan_and_arguments)
{
    KilnAttentionBwdParams b = valid_bwd();
    b.fwd.dtype = KILN_BF16;
    b.block_m = 32, b.block_n = 64;
    RtAttnBwdPlan pl;
    rt_attn_bwd_plan(80, &b, &pl);
    ck_assert_int_eq(pl.n, 3);
    ck_assert_str_eq(pl.k[0].kernel, "attn_bwd_pre_varlen_bf16");
    ck_assert_str_eq(pl.k[1].kernel, "attn_bwd_dkdv_varlen_bf16");
    ck_assert_str_eq(pl.k[2].kernel, "attn_bwd_dq_cvt_varlen_bf16");
    ck_assert_int_eq(pl.grid[0][0], (117 + 31) / 32);
    ck_assert_int_eq(pl.grid[1][0], (301 + 63) / 64);
    ck_assert_int_eq(pl.grid[1][1], 5 * 2);
    ck_assert_int_eq(pl.grid[2][1], 5 * 8);
    b.deterministic = 1;
    rt_attn_bwd_plan(80, &b, &pl);
    ck_assert_str_eq(pl.k[2].kernel, "attn_bwd_dq_varlen_bf16");
    /* every parameter of every kernel gets its argument by name */
    const char *src = kiln_lib_source("lang/lib/attention_bwd.tile");
    int seen = 0;
    for (int det = 0; det < 2; det++) {
        b.deterministic = det;
        rt_attn_bwd_plan(80, &b, &pl);
        for (int k = 0; k < pl.n; k++) {
            KilnCompileOptions o = {.kernel = pl.k[k].kernel, .defines = pl.k[k].defines,
                                    .ndefines = pl.k[k].ndefines, .emit = KILN_EMIT_IR};
            KilnCompileResult r;
            ck_assert_msg(kiln_compile("lang/lib/attention_bwd.tile", src, &o, &r) == KILN_OK, "%s", r.diagnostics);
            for (int i = 0; i < r.kernels[0].nparams; i++) {
                const KilnParam *prm = &r.kernels[0].params[i];
                KilnArg a;
                ck_assert_msg(rt_attn_bwd_arg(&b, prm, &a) == KILN_OK, "%s: %s: %s", o.kernel, prm->name,
                              kiln_last_error());
                if (!strcmp(prm->name, "cu_seqlens_q")) ck_assert(a.v.ptr == b.fwd.cu_seqlens_q), seen++;
                if (!strcmp(prm->name, "cu_seqlens_k")) ck_assert(a.v.ptr == b.fwd.cu_seqlens_k), seen++;
                if (!strcmp(prm->name, "total_q")) ck_assert(a.v.i == 400), seen++;
                ck_assert_msg(strcmp(prm->name, "seqlen_q") && strcmp(prm->name, "stride_qb"),
                              "%s: a varlen kernel takes no %s", o.kernel, prm->name);
            }
            kiln_compile_result_free(&r);
        }
    }
    /* cu_seqlens_q and total_q everywhere, cu_seqlens_k in dK/dV and dQ: pre, dkdv, cvt, then pre, dkdv, dq */
    ck_assert_int_eq(seen, 2 + 3 + 2 + 2 + 3 + 3);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("attention_varlen_api");
    TCase *tc = tcase_create("varlen");
    tcase_set_timeout(tc, 300);
    int n = (int)(sizeof k_bad / sizeof k_bad[0]);
    tcase_add_loop_test(tc, fwd_rejects_before_touching_the_device, 0, n);
    tcase_add_loop_test(tc, bwd_rejects_before_touching_the_device, 0, n);
    tcase_add_test(tc, packed_outputs);
    tcase_add_test(tc, valid_problems_pass);
    tcase_add_test(tc, empty_packs);
    tcase_add_test(tc, scratch_size);
    tcase_add_test(tc, plan_and_arguments);
    suite_add_tcase(s, tc);
    return s;
}

TU_MAIN(suite)
