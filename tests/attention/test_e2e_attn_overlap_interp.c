/* test_e2e_attn_overlap_interp.c — the forward's rotated key loop
 * (lang/lib/attention_fwd.tile, OVERLAP = true: each iteration computes the
 * next key block's Q K^T and carries it, the first one peeled before the
 * loop; on sm_90a the compiler's dot-overlap pass leaves that dot in flight
 * during the softmax) on the CPU interpreter.
 *
 * Every case, with PLAIN_SCORES false and true:
 *   - the accuracy rule of test_e2e_attn_interp.c against the float64
 *     reference (random inputs, NaN-poisoned buffers and outputs, ragged
 *     lengths, causal and not, empty rows);
 *   - bit for bit the output of OVERLAP = false on the same inputs: the
 *     rotation moves when a dot is computed, not what it computes (the last
 *     iteration's extra dot reads a zero-filled K tile and is discarded).
 * And the rotated program really is another program: one dot more (the
 * peeled one), so the comparison cannot pass by OVERLAP being ignored.
 */
#include "attn_harness.h"

static const Case cases[] = {
    {"f16 d64 ragged", ATTN_F16, 1, 2, 2, 37, 37, 64, 0, ATTN_BSHD, 0, 16, 16, 0},
    {"bf16 d64 causal bhsd", ATTN_BF16, 1, 2, 2, 37, 37, 64, 1, ATTN_BHSD, 0, 16, 16, 0},
    {"f16 d128 sq=1", ATTN_F16, 1, 2, 2, 1, 33, 128, 0, ATTN_BSHD, 0, 16, 16, 0},
    {"bf16 d128 causal sk=1 (no whole block)", ATTN_BF16, 1, 1, 1, 9, 1, 128, 1, ATTN_BSHD, 0, 16, 16, 0},
    {"bf16 d96 causal sq>sk (empty rows)", ATTN_BF16, 1, 1, 1, 45, 20, 96, 1, ATTN_BHSD, 0, 16, 16, 0},
    {"f16 d32 blocks 16x32 wide strides", ATTN_F16, 2, 2, 2, 29, 61, 32, 1, ATTN_BSHD, 0, 16, 32, 8},
    {"f16 d64 GQA 4/2 causal", ATTN_F16, 1, 4, 2, 24, 24, 64, 1, ATTN_BSHD, 0, 16, 16, 0},
    {"f16 d128 causal 128x64 blocks", ATTN_F16, 1, 2, 2, 300, 300, 128, 1, ATTN_BSHD, 0, 128, 64, 0},
    {"bf16 d64 64x64 blocks sq<sk", ATTN_BF16, 1, 2, 1, 200, 333, 64, 0, ATTN_BHSD, 0, 64, 64, 0},
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))

static IrFunc *compile_with(Arena *arena, const Case *c, bool overlap, bool plain)
{
    KilnDefine extra[2] = {{"OVERLAP", overlap ? "true" : "false"}, {"PLAIN_SCORES", plain ? "true" : "false"}};
    return compile_src(arena, c, "lang/lib/attention_fwd.tile", ah_text("lang/lib/attention_fwd.tile"), extra, 2);
}

static void count_dot(IrOp *op, void *n)
{
    if (op->op == IR_DOT) ++*(int *)n;
}

static int ndots(IrFunc *f)
{
    int n = 0;
    ir_walk(f, count_dot, &n);
    return n;
}

/* _i: case * 2 + PLAIN_SCORES */
START_TEST(test_case)
{
    const Case *c = &cases[_i / 2];
    bool plain = _i % 2;
    Arena arena;
    arena_init(&arena);
    IrFunc *rot = compile_with(&arena, c, true, plain), *base = compile_with(&arena, c, false, plain);
    ck_assert_int_eq(ndots(rot), ndots(base) + 1);
    uint64_t seed = (uint64_t)_i * 389 + 7;
    check_case(c, rot, seed, NULL);
    Run a, b;
    setup(&a, c, seed);
    setup(&b, c, seed);
    run_kernel(rot, &a, c, a.p.scale);
    run_kernel(base, &b, c, b.p.scale);
    ck_assert_msg(memcmp(a.o, b.o, a.nq * attn_dtype_size(c->dtype)) == 0, "%s: O differs from OVERLAP = false",
                  c->what);
    ck_assert_msg(memcmp(a.lse, b.lse, a.nlse * sizeof(float)) == 0, "%s: LSE differs from OVERLAP = false",
                  c->what);
    teardown(&a);
    teardown(&b);
    arena_free(&arena);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("attention_overlap_interp");
    TCase *tc = tcase_create("fwd");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, test_case, 0, 2 * NCASES);
    suite_add_tcase(s, tc);
    return s;
}

TU_MAIN(suite)
