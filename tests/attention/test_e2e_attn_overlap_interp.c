/* test_e2e_attn_overlap_interp.c — the forward's key loops as the dot-rotate
 * pass leaves them (compiler/gpuir/pass_dot_rotate.c: each loop's Q K^T
 * computed one iteration early and carried, the first one peeled before the
 * loop; on sm_90a the dot-overlap pass then leaves it in flight during the
 * softmax), run on the CPU interpreter.
 *
 * The shipped program (lang/lib/attention_fwd.tile) is compiled to Tile IR,
 * the GPU passes run on it for sm_90a with the overlap option, up to and
 * including dot-rotate, and the layout conversions (GPU-only ops that move
 * no value) are taken out; the interpreter runs what is left. Every case,
 * with PLAIN_SCORES false and true:
 *   - both key loops were rotated: two dots more than the program's (the
 *     peeled ones), so the comparison cannot pass by the pass doing nothing;
 *   - bit for bit the output of the program as written, on the same inputs:
 *     the rotation moves when a dot is computed, not what it computes (the
 *     last iteration's extra dot reads a zero-filled K tile and is dropped);
 *   - the accuracy rule of test_e2e_attn_interp.c against the float64
 *     reference (random inputs, NaN-poisoned buffers and outputs, ragged
 *     lengths, causal and not, GQA, empty rows, strides wider than dense).
 */
#include "attn_harness.h"
#include "compiler/gpuir/gpuir.h"
#include "compiler/support/diag.h"

static const Case cases[] = {
    {"f16 d64 ragged 64x64", ATTN_F16, 1, 2, 2, 37, 37, 64, 0, ATTN_BSHD, 0, 64, 64, 0},
    {"bf16 d64 causal bhsd 64x64", ATTN_BF16, 1, 2, 2, 150, 150, 64, 1, ATTN_BHSD, 0, 64, 64, 0},
    {"f16 d128 sq=1", ATTN_F16, 1, 2, 2, 1, 200, 128, 0, ATTN_BSHD, 0, 64, 64, 0},
    {"bf16 d128 causal sq>sk (empty rows)", ATTN_BF16, 1, 1, 1, 130, 70, 128, 1, ATTN_BHSD, 0, 64, 64, 0},
    {"f16 d64 GQA 4/2 causal sq<sk wide strides", ATTN_F16, 1, 4, 2, 70, 333, 64, 1, ATTN_BSHD, 0, 64, 64, 8},
    {"f16 d128 causal 128x64 blocks", ATTN_F16, 1, 2, 2, 300, 300, 128, 1, ATTN_BSHD, 0, 128, 64, 0},
    {"bf16 d64 128x128 blocks sq<sk", ATTN_BF16, 1, 2, 1, 200, 333, 64, 0, ATTN_BHSD, 0, 128, 128, 0},
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))

static IrFunc *compile_plain(Arena *arena, const Case *c, bool plain)
{
    KilnDefine extra[1] = {{"PLAIN_SCORES", plain ? "true" : "false"}};
    return compile_src(arena, c, "lang/lib/attention_fwd.tile", ah_text("lang/lib/attention_fwd.tile"), extra, 1);
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

static void drop_convert(IrOp *op, void *vf)
{
    if (op->op != IR_CONVERT_LAYOUT) return;
    ir_replace_uses(vf, op->res[0], op->args[0]);
    ir_op_unlink(op);
}

/* f after the GPU passes up to dot-rotate (sm_90a, overlap on), conversions taken out. */
static void rotate(IrFunc *f, const char *what)
{
    GpPassCtx ctx = {.target = tgt_parse("sm_90a"), .wgmma = true, .axis = gp_axis_info(f), .sched.overlap = true};
    Diag d;
    diag_init(&d, "attention_fwd.tile", NULL);
    bool ok = gp_run_gpu_passes(f, &ctx, NULL, "dot-rotate", NULL, NULL, &d);
    ck_assert_msg(ok, "%s: the GPU passes failed:\n%s", what, d.out.data ? d.out.data : "");
    diag_free(&d);
    ir_walk(f, drop_convert, f);
}

/* _i: case * 2 + PLAIN_SCORES */
START_TEST(test_case)
{
    const Case *c = &cases[_i / 2];
    bool plain = _i % 2;
    Arena arena;
    arena_init(&arena);
    IrFunc *rot = compile_plain(&arena, c, plain), *base = compile_plain(&arena, c, plain);
    rotate(rot, c->what);
    ck_assert_int_eq(ndots(rot), ndots(base) + 2);
    uint64_t seed = (uint64_t)_i * 389 + 7;
    check_case(c, rot, seed, NULL);
    Run a, b;
    setup(&a, c, seed);
    setup(&b, c, seed);
    run_kernel(rot, &a, c, a.p.scale);
    run_kernel(base, &b, c, b.p.scale);
    ck_assert_msg(memcmp(a.o, b.o, a.nq * attn_dtype_size(c->dtype)) == 0, "%s: O differs from the program's",
                  c->what);
    ck_assert_msg(memcmp(a.lse, b.lse, a.nlse * sizeof(float)) == 0, "%s: LSE differs from the program's", c->what);
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
