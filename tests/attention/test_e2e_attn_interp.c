/* test_e2e_attn_interp.c — the shipped FlashAttention forward program
 * (lang/lib/attention_fwd.tile) on the CPU interpreter, against the float64
 * reference of tools/attn_ref.c.
 *
 * Every case: random inputs (never zeros) written through the case's strides
 * into buffers pre-filled with NaN (so a read of any element the problem does
 * not own poisons the result), outputs poisoned with NaN, then FlashAttention's
 * accuracy rule: max |O - ref| <= 2 * max |O_plain - ref| + 1e-5, where O_plain
 * is plain attention computed in the storage dtype; LSE within 1e-4 relative;
 * rows that see no key must give O = 0 and LSE = -inf exactly.
 * Shapes are small (the interpreter is slow) but ragged: lengths of 1, below
 * one block, not multiples of the block, seqlen_q != seqlen_k both ways.
 */
#include "attn_harness.h"

static const Case cases[] = {
    {"f16 d64 ragged", ATTN_F16, 1, 2, 2, 37, 37, 64, 0, ATTN_BSHD, 0, 16, 16, 0},
    {"bf16 d64 causal bhsd", ATTN_BF16, 1, 2, 2, 37, 37, 64, 1, ATTN_BHSD, 0, 16, 16, 0},
    {"f16 d32 causal sq<sk", ATTN_F16, 1, 1, 1, 20, 45, 32, 1, ATTN_BSHD, 0, 16, 16, 0},
    {"bf16 d96 causal sq>sk (empty rows)", ATTN_BF16, 1, 1, 1, 45, 20, 96, 1, ATTN_BHSD, 0, 16, 16, 0},
    {"f16 d128 sq=1", ATTN_F16, 1, 2, 2, 1, 33, 128, 0, ATTN_BSHD, 0, 16, 16, 0},
    {"bf16 d128 causal sk=1", ATTN_BF16, 1, 1, 1, 9, 1, 128, 1, ATTN_BSHD, 0, 16, 16, 0},
    {"f16 d64 causal below one block", ATTN_F16, 2, 1, 1, 5, 7, 64, 1, ATTN_BHSD, 0, 16, 16, 0},
    {"f16 d64 GQA 4/2 causal", ATTN_F16, 1, 4, 2, 24, 24, 64, 1, ATTN_BSHD, 0, 16, 16, 0},
    {"bf16 d32 MQA 4/1 scale 0.3", ATTN_BF16, 1, 4, 1, 19, 27, 32, 0, ATTN_BHSD, 0.3, 16, 16, 0},
    {"f16 d96 sq>sk not causal", ATTN_F16, 1, 1, 1, 33, 18, 96, 0, ATTN_BSHD, 0, 16, 16, 0},
    {"bf16 d64 causal blocks 32x16", ATTN_BF16, 2, 2, 1, 70, 50, 64, 1, ATTN_BSHD, 0, 32, 16, 0},
    {"f16 d32 blocks 16x32 wide strides", ATTN_F16, 2, 2, 2, 29, 61, 32, 1, ATTN_BSHD, 0, 16, 32, 8},
    {"bf16 d128 causal sq<sk bhsd strides", ATTN_BF16, 1, 2, 2, 17, 40, 128, 1, ATTN_BHSD, 0.2, 16, 16, 4},
    {"f16 d256 small", ATTN_F16, 1, 1, 1, 17, 17, 256, 0, ATTN_BSHD, 0, 16, 16, 0},
    /* the GPU's block sizes, several blocks each way */
    {"f16 d128 causal 128x64 blocks", ATTN_F16, 2, 2, 2, 300, 300, 128, 1, ATTN_BSHD, 0, 128, 64, 0},
    {"bf16 d64 64x64 blocks sq<sk", ATTN_BF16, 1, 2, 1, 200, 333, 64, 0, ATTN_BHSD, 0, 64, 64, 0},
    {"f16 d96 causal 64x32 sq<sk", ATTN_F16, 1, 2, 2, 130, 257, 96, 1, ATTN_BSHD, 0, 64, 32, 0},
    {"bf16 d32 causal 32x32 whole empty blocks", ATTN_BF16, 1, 1, 1, 100, 20, 32, 1, ATTN_BSHD, 0, 32, 32, 0},
};

START_TEST(test_case)
{
    Arena arena;
    arena_init(&arena);
    check_case(&cases[_i], compile_case(&arena, &cases[_i]), (uint64_t)_i * 977 + 13, NULL);
    arena_free(&arena);
}
END_TEST

/* The check itself must be able to fail: a kernel run with a 2% wrong softmax
 * scale must break the accuracy rule (or the LSE bound). */
START_TEST(test_rule_catches_wrong_scale)
{
    const Case *c = &cases[0];
    Arena arena;
    arena_init(&arena);
    IrFunc *f = compile_case(&arena, c);
    Run r;
    setup(&r, c, 13);
    run_kernel(f, &r, c, r.p.scale * 1.02);
    Verdict v = judge(&r);
    ck_assert_msg(v.e.o_max_abs > v.bound || v.e.lse_max_rel > 1e-4,
                  "a wrong scale went unnoticed: err %.3g bound %.3g lse %.3g", v.e.o_max_abs, v.bound,
                  v.e.lse_max_rel);
    teardown(&r);
    arena_free(&arena);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("attention_interp");
    TCase *tc = tcase_create("fwd");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, test_case, 0, (int)(sizeof cases / sizeof cases[0]));
    tcase_add_test(tc, test_rule_catches_wrong_scale);
    suite_add_tcase(s, tc);
    return s;
}

TU_MAIN(suite)
