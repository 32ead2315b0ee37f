/* test_attention_persistent.c — the forward attention as persistent programs (the
 * schedule options --persistent and --longest-first, compiler/passes/persistent.c) on the
 * interpreter, bit for bit against the plain grid, and against float64.
 *
 * kiln_attention_fwd_cpu runs the program the GPU runs, before the GPU passes: with
 * persistent on, 3 programs (jit/run_cpu.c) share the logical tiles (query block x batch x
 * head), each several, in the static or the longest-first order. Each tile computes the
 * same ops on the same ids, so O and LSE must be the same bytes as the plain run's
 * (outputs poisoned before each run, padding included). Random f16 inputs in padded
 * [b, s, h, d] tensors, GQA and MHA, causal and not, lengths no multiple of the blocks;
 * the plain run is judged by the interpreter tests' rule against float64:
 * max |o - ref| <= 2 max |o_torchlike - ref| + 1e-5.
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

typedef struct Case { const char *what; int batch, hq, hkv, sq, sk, d, causal, block_m; } Case;

static const Case k_cases[] = {
    {"gqa 4/2, 150 x 93, causal, d 64", 2, 4, 2, 150, 93, 64, 1, 64},
    {"mha 2/2, 100 x 170, not causal, d 64", 1, 2, 2, 100, 170, 64, 0, 32},
    {"mha 3/3, 77 x 77, causal, d 32", 1, 3, 3, 77, 77, 32, 1, 16},
};

typedef struct Run { uint16_t *o; float *lse; } Run;

static Run run_fwd(const Case *c, KilnAttentionParams p, KilnSchedule sched, size_t nq, size_t nlse)
{
    Run r = {malloc(nq * 2), malloc(nlse * 4)};
    memset(r.o, 0xFF, nq * 2);   /* poisoned: NaN */
    memset(r.lse, 0xFF, nlse * 4);
    p.o = (uintptr_t)r.o, p.lse = (uintptr_t)r.lse;
    p.schedule = sched;
    ck_assert_msg(kiln_attention_fwd_cpu(&p) == KILN_OK, "%s: %s", c->what, kiln_last_error());
    return r;
}

START_TEST(persistent_forward_matches_plain_bit_for_bit)
{
    const Case *c = &k_cases[_i];
    const int d = c->d;
    AttnProblem ap = attn_padded_problem(c->batch, c->hq, c->hkv, c->sq, c->sk, d, c->causal);
    size_t nq = (size_t)c->batch * ap.q_stride[0], nk = (size_t)c->batch * ap.k_stride[0];
    size_t nlse = (size_t)c->batch * c->hq * c->sq;
    uint16_t *q = malloc(nq * 2), *k = malloc(nk * 2), *v = malloc(nk * 2);
    memset(q, 0xFF, nq * 2), memset(k, 0xFF, nk * 2), memset(v, 0xFF, nk * 2);
    attn_fill_strided(ATTN_F16, q, ap.q_stride, c->batch, c->hq, c->sq, d, 21 + _i);
    attn_fill_strided(ATTN_F16, k, ap.k_stride, c->batch, c->hkv, c->sk, d, 31 + _i);
    attn_fill_strided(ATTN_F16, v, ap.v_stride, c->batch, c->hkv, c->sk, d, 41 + _i);
    KilnAttentionParams p = {.dtype = KILN_F16, .batch = c->batch, .heads_q = c->hq, .heads_kv = c->hkv,
                             .seqlen_q = c->sq, .seqlen_k = c->sk, .head_dim = d, .causal = c->causal,
                             .block_m = c->block_m, .block_n = 32, .q = (uintptr_t)q, .k = (uintptr_t)k,
                             .v = (uintptr_t)v};
    memcpy(p.q_stride, ap.q_stride, sizeof ap.q_stride);
    memcpy(p.k_stride, ap.k_stride, sizeof ap.k_stride);
    memcpy(p.v_stride, ap.v_stride, sizeof ap.v_stride);
    memcpy(p.o_stride, ap.o_stride, sizeof ap.o_stride);
    p.q_bytes = p.o_bytes = nq * 2, p.k_bytes = p.v_bytes = nk * 2, p.lse_bytes = nlse * 4;

    Run plain = run_fwd(c, p, (KilnSchedule){0}, nq, nlse);
    /* the plain run against float64 (so that agreeing with it means something) */
    size_t no = (size_t)c->batch * c->hq * c->sq * d;
    double *ref = malloc(no * 8), *torch = malloc(no * 8), *ref_lse = malloc(nlse * 8);
    attn_ref_fwd(&ap, q, k, v, ref, ref_lse);
    attn_ref_torchlike(&ap, q, k, v, torch);
    int64_t nonfinite = 0;
    double err = attn_grad_max_err(ATTN_F16, plain.o, ap.o_stride, c->batch, c->hq, c->sq, d, ref, &nonfinite);
    double bound = 2 * attn_dense_max_diff(torch, ref, no) + 1e-5;
    ck_assert_msg(nonfinite == 0 && err <= bound, "%s: plain max |o - ref| = %.3g > %.3g (%lld non-finite)", c->what,
                  err, bound, (long long)nonfinite);

    static const char *const names[2] = {"persistent", "longest_first"};
    for (int m = 0; m < 2; m++) {
        KilnSchedule s = {0};
        if (m == 0) s.persistent = 1;
        else s.longest_first = 1;
        Run r = run_fwd(c, p, s, nq, nlse);
        ck_assert_msg(!memcmp(r.o, plain.o, nq * 2), "%s: %s: O differs from the plain grid's", c->what, names[m]);
        ck_assert_msg(!memcmp(r.lse, plain.lse, nlse * 4), "%s: %s: LSE differs", c->what, names[m]);
        free(r.o), free(r.lse);
    }
    free(plain.o), free(plain.lse), free(ref), free(torch), free(ref_lse);
    free(q), free(k), free(v);
}
END_TEST

/* A persistent compile says so in its kernel info (three hidden parameters after the
 * program's own, which the launch passes) and in its IR; warp specialisation is refused
 * with it, naming both options. */
START_TEST(persistent_kernel_info_and_refusal)
{
    const char *src = "kernel k(X: *i32, n: i32) {\n  let o = program_id(0) * 16 + arange(16);\n"
                      "  store(X + program_id(1) * 80 + o, o + program_id(1) * 1000 + num_programs(0) * 100000,"
                      " o < n);\n}\n";
    KilnCompileOptions o = {.emit = KILN_EMIT_IR};
    o.schedule.persistent = 1;
    KilnCompileResult r;
    ck_assert_int_eq(kiln_compile("k.tile", src, &o, &r), KILN_OK);
    ck_assert_int_eq(r.nkernels, 1);
    ck_assert_int_eq(r.kernels[0].persistent, 1);
    ck_assert_int_eq(r.kernels[0].nparams, 2);
    ck_assert_msg(r.output && strstr(r.output, "persistent = 1") && strstr(r.output, "tiles_z"), "%s", r.output);
    kiln_compile_result_free(&r);
    o.schedule.warp_specialize = 1;
    o.emit = KILN_EMIT_PTX;
    ck_assert_int_eq(kiln_compile("k.tile", src, &o, &r), KILN_ERR_USAGE);
    ck_assert_msg(r.diagnostics && strstr(r.diagnostics, "--persistent") && strstr(r.diagnostics, "--warp-specialize"),
                  "%s", r.diagnostics ? r.diagnostics : "");
    kiln_compile_result_free(&r);

    /* kiln_run_cpu: 5 x 3 tiles on 3 persistent programs write what the plain grid writes */
    enum { N = 75 };
    int32_t a[3 * 80], b[3 * 80];
    int grid[3] = {5, 3, 1};
    for (int m = 0; m < 3; m++) {
        int32_t *x = m ? b : a;
        KilnCompileOptions c = {0};
        c.schedule.persistent = m == 1;
        c.schedule.longest_first = m == 2;
        memset(x, 0x5A, sizeof a);
        KilnHostArg args[2] = {kiln_host_buf(x, sizeof a, KILN_HOST_INOUT), kiln_host_scalar(kiln_arg_i32(N))};
        ck_assert_msg(kiln_run_cpu("k.tile", src, &c, grid, args, 2) == KILN_OK, "%s", kiln_last_error());
        if (m) ck_assert_msg(!memcmp(a, b, sizeof a), "mode %d differs from the plain grid", m);
    }
    /* program_id(1) and num_programs(0) are the logical ones; the masked tail untouched */
    ck_assert_int_eq(a[0], 500000);
    ck_assert_int_eq(a[2 * 80 + N - 1], N - 1 + 2000 + 500000);
    ck_assert_int_eq(a[N], 0x5A5A5A5A);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("attention_persistent");
    TCase *tc = tcase_create("cpu");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, persistent_forward_matches_plain_bit_for_bit, 0, (int)(sizeof k_cases / sizeof k_cases[0]));
    tcase_add_test(tc, persistent_kernel_info_and_refusal);
    suite_add_tcase(s, tc);
    return s;
}

TU_MAIN(suite)
