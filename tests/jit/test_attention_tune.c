/* test_attention_tune.c — the attention calls' one tuning table (jit/attention_tune.c)
 * and their schedule options, without a GPU: every call has a row for every head dim it
 * takes, every row's options resolve, the one matching rule picks the rows the calls used
 * to pick (the forward's causal / max_n refinements, the backward's sm_90 rows, decode by
 * head dim); the forward refuses a refused combination the caller asked for, naming both
 * options, and lets a table default give way to the caller's option. */
#include "testutil.h"

#include <string.h>

#include "kiln.h"
#include "jit_internal.h"

static const int k_dims[] = {32, 64, 96, 128, 256};

START_TEST(every_call_has_every_head_dim)
{
    for (int c = RT_TUNE_FWD; c <= RT_TUNE_DECODE; c++)
        for (size_t i = 0; i < sizeof k_dims / sizeof k_dims[0]; i++) {
            const RtTuneRow *t = rt_attn_tune((RtTuneCall)c, 0, k_dims[i], 0, 1);
            ck_assert_msg(t && t->min_sm == 0, "call %d: no min_sm 0 row for d %d", c, k_dims[i]);
            ck_assert_int_eq(rt_attn_tune((RtTuneCall)c, 0, k_dims[i], 1, 1 << 20)->head_dim, k_dims[i]);
        }
    ck_assert_ptr_null(rt_attn_tune(RT_TUNE_FWD, 90, 80, 0, 1));
    ck_assert_ptr_null(rt_attn_tune(RT_TUNE_DECODE, 90, 512, 0, 1));
    int n = 0;
    for (const RtTuneRow *r; (r = rt_attn_tune_row(n)); n++) {
        char why[256];
        ck_assert_msg(sched_resolve(&r->schedule, NULL, NULL, why, sizeof why), "row %d: %s", n, why);
        ck_assert_msg(r->block_n > 0 && r->num_warps > 0, "row %d", n);
        ck_assert_msg(!r->dq_pass || r->call == RT_TUNE_BWD_DQ, "row %d: dq_pass on a row of call %d", n, r->call);
    }
    ck_assert_int_gt(n, 20);
}
END_TEST

START_TEST(one_rule_picks_the_rows)
{
    /* the forward: the last matching row; causal and max_n refine */
    const RtTuneRow *t = rt_attn_tune(RT_TUNE_FWD, 90, 128, 1, 512);
    ck_assert_int_eq(t->block_m, 64);
    ck_assert_int_eq(t->max_n, 1024);
    t = rt_attn_tune(RT_TUNE_FWD, 90, 128, 1, 4096);
    ck_assert_int_eq(t->block_m, 128);
    ck_assert_int_eq(t->block_n, 128);
    ck_assert_int_eq(t->num_warps, 8);
    ck_assert_int_eq(t->schedule.warp_specialize + t->schedule.tma, 2);
    t = rt_attn_tune(RT_TUNE_FWD, 90, 128, 0, 512);
    ck_assert_int_eq(t->block_m, 128);
    t = rt_attn_tune(RT_TUNE_FWD, 80, 128, 0, 512);
    ck_assert_int_eq(t->min_sm, 0);
    ck_assert_int_eq(t->num_warps, 8);
    t = rt_attn_tune(RT_TUNE_FWD, 90, 256, 1, 8192);
    ck_assert_int_eq(t->schedule.warp_specialize, 1);
    ck_assert_int_eq(rt_attn_tune(RT_TUNE_FWD, 80, 256, 1, 8192)->schedule.warp_specialize, 0);
    /* the backward: sm_90 rows for d 64..256 with the separate dQ pass; d 256 on 8 warps
     * (two warpgroup columns), the generic 16 x 32 before sm_90 */
    t = rt_attn_tune(RT_TUNE_BWD_DQ, 90, 96, 1, 1000);
    ck_assert_int_eq(t->block_m, 64);
    ck_assert_int_eq(t->dq_pass, 1);
    t = rt_attn_tune(RT_TUNE_BWD_DKDV, 90, 256, 1, 1000);
    ck_assert_int_eq(t->block_m, 64);
    ck_assert_int_eq(t->block_n, 64);
    ck_assert_int_eq(t->num_warps, 8);
    ck_assert_int_eq(rt_attn_tune(RT_TUNE_BWD_DQ, 90, 256, 0, 1000)->dq_pass, 1);
    t = rt_attn_tune(RT_TUNE_BWD_DKDV, 80, 256, 1, 1000);
    ck_assert_int_eq(t->block_m, 16);
    ck_assert_int_eq(t->block_n, 32);
    ck_assert_int_eq(rt_attn_tune(RT_TUNE_BWD_DQ, 86, 64, 0, 1)->dq_pass, 0);
    /* decode: by head dim */
    ck_assert_int_eq(rt_attn_tune(RT_TUNE_DECODE, 90, 256, 1, 4)->block_n, 32);
    ck_assert_int_eq(rt_attn_tune(RT_TUNE_DECODE, 90, 64, 0, 1)->block_n, 64);
}
END_TEST

static KilnAttentionParams problem(int d)
{
    KilnAttentionParams p = {.dtype = KILN_F16, .batch = 1, .heads_q = 2, .heads_kv = 2, .seqlen_q = 4000,
                             .seqlen_k = 4000, .head_dim = d, .q = 0x7f0000000000ull, .k = 0x7f0010000000ull,
                             .v = 0x7f0020000000ull, .o = 0x7f0030000000ull, .lse = 0x7f0040000000ull};
    int64_t st[3] = {(int64_t)2 * 4000 * d, (int64_t)4000 * d, d};
    memcpy(p.q_stride, st, sizeof st);
    memcpy(p.k_stride, st, sizeof st);
    memcpy(p.v_stride, st, sizeof st);
    memcpy(p.o_stride, st, sizeof st);
    return p;
}

START_TEST(forward_options_over_the_table)
{
    KilnAttentionParams p = problem(256);
    ck_assert_int_eq(kiln_attention_check(&p), KILN_OK);
    RtAttnVariant v;
    RtAttnRequest r;
    /* the table's d 256 row: warp specialisation, and the mbarrier hand-off it implies */
    ck_assert_int_eq(rt_attn_fwd_request(90, &p, &v, &r), KILN_OK);
    ck_assert_int_eq(r.opts.schedule.warp_specialize + r.opts.schedule.mbarrier, 2);
    free(r.owned);
    /* the caller's tma: with the table's warp specialisation (the producer issues TMA copies) */
    p.schedule.tma = 1;
    ck_assert_int_eq(kiln_attention_check(&p), KILN_OK);
    ck_assert_int_eq(rt_attn_fwd_request(90, &p, &v, &r), KILN_OK);
    ck_assert_int_eq(r.opts.schedule.tma, 1);
    ck_assert_int_eq(r.opts.schedule.mbarrier, 1);
    ck_assert_int_eq(r.opts.schedule.warp_specialize, 1);
    free(r.owned);
    /* the d 128 row's tma gives way where K/V cannot be mapped (a broadcast stride 0, a stride of
     * less than 16 bytes' worth); the caller's own tma does not (the launch then says why) */
    {
        KilnAttentionParams q = problem(128);
        ck_assert_int_eq(rt_attn_fwd_request(90, &q, &v, &r), KILN_OK);
        ck_assert_int_eq(r.opts.schedule.tma + r.opts.schedule.warp_specialize, 2);
        free(r.owned);
        q.k_stride[0] = 0;
        ck_assert_int_eq(rt_attn_fwd_request(90, &q, &v, &r), KILN_OK);
        ck_assert_int_eq(r.opts.schedule.tma, 0);
        ck_assert_int_eq(r.opts.schedule.warp_specialize, 1);
        free(r.owned);
        q.k_stride[0] = q.k_stride[1] * 2;
        q.v_stride[2] = 132;
        ck_assert_int_eq(rt_attn_fwd_request(90, &q, &v, &r), KILN_OK);
        ck_assert_int_eq(r.opts.schedule.tma, 0);
        free(r.owned);
        q.schedule.tma = 1;
        ck_assert_int_eq(rt_attn_fwd_request(90, &q, &v, &r), KILN_OK);
        ck_assert_int_eq(r.opts.schedule.tma, 1);
        free(r.owned);
        /* --lean-producer implies tma, and goes with it where the maps cannot be encoded
         * (else the compile would turn tma back on); warp specialisation stays */
        KilnAttentionParams l = problem(128);
        l.schedule.lean_producer = 1;
        ck_assert_int_eq(rt_attn_fwd_request(90, &l, &v, &r), KILN_OK);
        ck_assert_int_eq(r.opts.schedule.lean_producer + r.opts.schedule.tma + r.opts.schedule.warp_specialize, 3);
        free(r.owned);
        l.k_stride[0] = 0;
        ck_assert_int_eq(rt_attn_fwd_request(90, &l, &v, &r), KILN_OK);
        ck_assert_int_eq(r.opts.schedule.lean_producer + r.opts.schedule.tma, 0);
        ck_assert_int_eq(r.opts.schedule.warp_specialize, 1);
        free(r.owned);
        l = problem(128);
        l.schedule.lean_producer = 1;
        l.seqlen_k = 0;
        ck_assert_int_eq(rt_attn_fwd_request(90, &l, &v, &r), KILN_OK);
        ck_assert_int_eq(r.opts.schedule.lean_producer + r.opts.schedule.tma, 0);
        free(r.owned);
    }
    /* no keys: nothing is copied, and an empty K's maps could not be encoded (strides 0): no tma */
    p.seqlen_k = 0;
    ck_assert_int_eq(rt_attn_fwd_request(90, &p, &v, &r), KILN_OK);
    ck_assert_int_eq(r.opts.schedule.tma, 0);
    free(r.owned);
    p.seqlen_k = problem(256).seqlen_k;
    /* the table's warp specialisation asked off: tma alone */
    p.schedule.warp_specialize = -1;
    ck_assert_int_eq(kiln_attention_check(&p), KILN_OK);
    ck_assert_int_eq(rt_attn_fwd_request(90, &p, &v, &r), KILN_OK);
    ck_assert_int_eq(r.opts.schedule.tma + r.opts.schedule.mbarrier, 2);
    ck_assert_int_eq(r.opts.schedule.warp_specialize, 0);
    free(r.owned);
    /* a refused combination (tma needs mbarrier): named, and the backward checks the forward's options too */
    p.schedule.mbarrier = -1;
    ck_assert_int_eq(kiln_attention_check(&p), KILN_ERR_USAGE);
    const char *e = kiln_last_error();
    ck_assert_msg(strstr(e, "kiln_attention_fwd: schedule: ") && strstr(e, "--tma") && strstr(e, "--mbarrier"), "%s", e);
    KilnAttentionBwdParams b = {.fwd = p};
    ck_assert_int_eq(kiln_attention_bwd_check(&b), KILN_ERR_USAGE);
    ck_assert_ptr_nonnull(strstr(kiln_last_error(), "--mbarrier"));
    /* asked off: off, whatever the table says */
    p = problem(256);
    p.schedule.warp_specialize = -1;
    ck_assert_int_eq(rt_attn_fwd_request(90, &p, &v, &r), KILN_OK);
    ck_assert_int_eq(r.opts.schedule.warp_specialize + r.opts.schedule.mbarrier, 0);
    free(r.owned);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("attention_tune");
    TCase *tc = tcase_create("table");
    tcase_add_test(tc, every_call_has_every_head_dim);
    tcase_add_test(tc, one_rule_picks_the_rows);
    tcase_add_test(tc, forward_options_over_the_table);
    suite_add_tcase(s, tc);
    return s;
}

TU_MAIN(suite)
