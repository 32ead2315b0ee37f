/* test_e2e_attn_fp8.c — the FP8 forward (dtype KILN_E4M3) through the public call on the
 * CPU interpreter (kiln_attention_fwd_cpu: the same validation, kernel choice and
 * argument binding as kiln_attention_fwd).
 *
 * 1. Against float64: random Q, K, V (never zero), quantised to e4m3 with descales (per
 *    tensor, or per (batch, head) with heads of different magnitudes); the reference is
 *    attention in double on the dequantised values (code * descale), so what remains is
 *    the kernel's own error: P quantised to e4m3, f32 accumulation, O rounded to f16/bf16.
 *    The rule: the kernel's RMSE is at most twice that of an FP8 emulation in double (the
 *    same P quantisation, p * 256 to e4m3, on the exact softmax) plus O's own rounding; the
 *    LSE within 1e-4 relative. Ragged lengths (no multiple of the 16 x 16 tiles), GQA,
 *    causal with seqlen_q != seqlen_k, outputs poisoned with NaN before the call.
 * 2. Variants in FP8: soft-capping (score_mod), a sliding window (mask_mod + kv_start),
 *    and a block mask (the window's, 32 x 32 blocks): each against the reference with the
 *    hook, and not a no-op (the plain reference fails the same rule).
 * 3. FlashAttention-3's accuracy report: RMSE against float64 attention on the ORIGINAL
 *    (unquantised) inputs, per-tensor descales vs per-head ones, on inputs whose heads
 *    differ in magnitude (16x) with outliers; per-head must not be worse (printed).
 * 4. Validation: out_dtype, descale_per_head, a missing descale, packed batches, a short
 *    descale buffer, each named.
 */
#include "tests/testutil.h"
#include "kiln.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp8_harness.h"

static const F8Case k_cases[] = {
    {"f16 per-tensor GQA d64", 0, 0, 1, 4, 2, 50, 70, 64, 0, NULL, 0},
    {"bf16 per-head causal sq<sk d32", 1, 1, 2, 2, 2, 37, 61, 32, 1, NULL, 0},
    {"f16 per-head d128", 0, 1, 1, 2, 1, 33, 40, 128, 0, NULL, 0},
    {"softcap 2 f16 per-head", 0, 1, 1, 2, 2, 45, 45, 64, 0, "softcap", 0},
    {"window 9/3 bf16 causal", 1, 0, 1, 2, 1, 70, 70, 64, 1, "window", 0},
    {"window 20/0 block mask f16", 0, 1, 1, 2, 2, 90, 90, 32, 0, "window", 1},
};

/* Run case c (with its variant and block mask) and compare with the reference of `hk`. */
static Verdict run_case(const F8Case *c, Prob *p, const Hooks *hk)
{
    KilnVariantArg args[2];
    KilnAttentionVariant var;
    bool have_var = fp8_variant(c, args, &var);
    KilnBlockMask bm = {.block_q = 32, .block_kv = 32, .batch = 1, .heads = 1};
    void *bm_buf = NULL;
    KilnAttentionParams a = params_of(p, have_var ? &var : NULL, NULL);
    if (c->block_mask) {
        bm.bytes = kiln_attention_block_mask_size(&a, &bm);
        ck_assert_msg(bm.bytes > 0, "%s: block mask size: %s", c->what, kiln_last_error());
        bm_buf = aligned_alloc(16, (bm.bytes + 15) / 16 * 16);
        bm.data = (uintptr_t)bm_buf;
        ck_assert_msg(kiln_attention_block_mask_create_cpu(&a, &bm) == KILN_OK, "%s: %s", c->what, kiln_last_error());
        a.block_mask = &bm;
    }
    fp8_poison(p);
    KilnStatus st = kiln_attention_fwd_cpu(&a);
    ck_assert_msg(st == KILN_OK, "%s: %s", c->what, kiln_last_error());
    free(bm_buf);
    return fp8_judge(p, hk);
}

START_TEST(fp8_forward_matches_float64)
{
    const F8Case *c = &k_cases[_i];
    Prob p;
    double amp = c->per_head ? 2.0 : 1.0;
    prob_init(&p, c, 77 + (unsigned)_i * 13, amp, amp, false, c->per_head);
    Hooks hk = hooks_of(c);
    Verdict v = run_case(c, &p, &hk);
    double bound = fp8_bound(c, &v);
    if (getenv("ATTN_VERBOSE"))
        fprintf(stderr, "%-32s rmse %.3g (emulation %.3g, bound %.3g, rms %.3g) lse %.3g\n", c->what, v.rmse,
                v.rmse_emul, bound, v.rms_ref, v.lse_rel);
    ck_assert_msg(v.nonfinite == 0, "%s: %lld non-finite or wrong empty-row outputs", c->what, v.nonfinite);
    ck_assert_msg(v.rmse <= bound, "%s: RMSE %.3g > %.3g (emulation %.3g)", c->what, v.rmse, bound, v.rmse_emul);
    ck_assert_msg(v.rmse_emul > 0, "%s: P quantisation changed nothing", c->what);
    ck_assert_msg(v.lse_rel <= 1e-4, "%s: LSE relative error %.3g", c->what, v.lse_rel);
    if (c->variant) {   /* not a no-op: the plain reference breaks the rule */
        Hooks none = {0};
        Verdict w = run_case(c, &p, &none);
        ck_assert_msg(w.rmse > fp8_bound(c, &w) || w.nonfinite, "%s: the variant made no difference", c->what);
    }
    prob_free(&p);
}
END_TEST

/* FlashAttention-3's report: RMSE against float64 on the original inputs, per-tensor
 * descales vs per-head ones. Q and K are unit-sized with outliers (x20 in one entry of 97);
 * V's heads differ 16x each (1x .. 4096x): one descale for all of V pushes its small heads
 * into e4m3's subnormals (below 2^-6 of 448 / amax), per-head descales do not. */
START_TEST(fp8_rmse_per_head_vs_per_tensor)
{
    /* bf16 O: V's largest head (4096 x 2 x 20) is past f16's range */
    F8Case c = {"rmse report", 1, 0, 1, 4, 4, 64, 64, 64, 0, NULL, 0};
    double rmse[2][4];
    for (int ph = 0; ph < 2; ph++) {
        c.per_head = ph;
        Prob p;
        prob_init(&p, &c, 4242, 1.0, 16.0, true, ph);
        Hooks none = {0};
        KilnAttentionParams a = params_of(&p, NULL, NULL);
        ck_assert_msg(kiln_attention_fwd_cpu(&a) == KILN_OK, "%s", kiln_last_error());
        double *o = malloc(sizeof(double) * (size_t)c.d), lse;
        for (int h = 0; h < c.hq; h++) {
            double se = 0, sr = 0;
            for (int i = 0; i < c.sq; i++) {
                ref_row(&p, &none, true, false, 0, h, i, o, &lse);
                for (int d = 0; d < c.d; d++) {
                    double e = out_value(&p, idx(0, i, h, d, c.sq, c.hq, c.d)) - o[d];
                    se += e * e, sr += o[d] * o[d];
                }
            }
            rmse[ph][h] = sqrt(se / sr);   /* relative, per head: the large heads would hide the small */
        }
        free(o);
        prob_free(&p);
    }
    printf("FP8 forward, relative RMSE per head vs float64 on the original inputs (V heads 1x, 16x, 256x, 4096x; "
           "outliers x20):\n  per-tensor descales %.3g %.3g %.3g %.3g\n  per-head descales   %.3g %.3g %.3g %.3g\n",
           rmse[0][0], rmse[0][1], rmse[0][2], rmse[0][3], rmse[1][0], rmse[1][1], rmse[1][2], rmse[1][3]);
    /* the smallest head gains; the largest (which sets the per-tensor descale) is the same */
    ck_assert_msg(rmse[1][0] < 0.8 * rmse[0][0], "head 0: per-head %.3g, per-tensor %.3g", rmse[1][0], rmse[0][0]);
    ck_assert_msg(rmse[1][3] <= 1.5 * rmse[0][3] && rmse[0][3] <= 1.5 * rmse[1][3], "head 3: %.3g vs %.3g",
                  rmse[1][3], rmse[0][3]);
}
END_TEST

/* ---- validation ---- */
static void expect_refused(KilnAttentionParams a, KilnStatus want, const char *needle)
{
    KilnStatus st = kiln_attention_fwd_cpu(&a);
    ck_assert_msg(st == want && strstr(kiln_last_error(), needle), "want %s '%s', got %s: %s", kiln_status_name(want),
                  needle, kiln_status_name(st), kiln_last_error());
}

START_TEST(fp8_validation_names_the_field)
{
    const F8Case *c = &k_cases[0];
    Prob p;
    prob_init(&p, c, 5, 1.0, 1.0, false, 0);
    KilnAttentionParams a = params_of(&p, NULL, NULL);
    KilnAttentionParams b = a;
    b.out_dtype = KILN_E4M3;
    expect_refused(b, KILN_ERR_USAGE, "out_dtype");
    b = a, b.descale_per_head = 2;
    expect_refused(b, KILN_ERR_USAGE, "descale_per_head");
    b = a, b.k_descale = 0;
    expect_refused(b, KILN_ERR_USAGE, "k_descale");
    b = a, b.v_descale_bytes = 2;
    expect_refused(b, KILN_ERR_USAGE, "v_descale_bytes");
    b = a, b.q_bytes = (size_t)p.nq - 1;
    expect_refused(b, KILN_ERR_USAGE, "q_bytes");
    int32_t cu[2] = {0, 50};
    b = a, b.cu_seqlens_q = b.cu_seqlens_k = (uintptr_t)cu;
    expect_refused(b, KILN_ERR_UNSUPPORTED, "packed");
    prob_free(&p);
}
END_TEST

static Suite *attn_fp8_suite(void)
{
    Suite *s = suite_create("attn_fp8");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, fp8_forward_matches_float64, 0, (int)(sizeof k_cases / sizeof k_cases[0]));
    tcase_add_test(tc, fp8_rmse_per_head_vs_per_tensor);
    tcase_add_test(tc, fp8_validation_names_the_field);
    suite_add_tcase(s, tc);
    return s;
}

TU_MAIN(attn_fp8_suite)
