/* pass_accelerate_dot.c — put dots on tensor cores: choose the warps of each
 * eligible dot and give its result the MMA accumulator layout, before layout
 * assignment (which then treats that layout as the dot's anchor, converts the
 * operands to the matching A/B-operand layouts and propagates the accumulator
 * layout forward through elementwise ops, reductions and loop-carried values).
 *
 * Eligible (mma.sync.m16n8k16 with f32 accumulation, sm_80 and later):
 * a and b both f16 or both bf16, the accumulator/result f32, M >= 16, N >= 8,
 * K >= 16 (tile dims are powers of two, so M % 16 == N % 8 == K % 16 == 0).
 * Everything else (f32 or integer dots, tiny shapes, older GPUs) stays on
 * the FMA path of cg_dot_fma.c.
 *
 * Warps: wm x wn with wm = min(num_warps, M / 16) first — whole warps along M
 * keep every row of the accumulator inside one warp, so row reductions (the
 * softmax of attention) need only in-thread work and two xor shuffles (lanes
 * 1 and 2), and the accumulator of one dot is already the A operand of the
 * next (P @ V) with no data movement — then wn = min(num_warps / wm, N / 8).
 * When wm * wn < num_warps (small tiles) the remaining warps hold copies of
 * the accumulator (replication; only one copy stores).
 *
 * Example (attention, 4 warps, BLOCK_M = 128, BLOCK_N = 64, D = 64):
 *     %s = dot %q, %kt, %zero : tensor<128x64xf32>        before
 *     %s = dot %q, %kt, %zero : tensor<128x64xf32> #L0    after
 *     #L0 = #mma<C, wm=4, wn=1>
 */
#include "cg_internal.h"
#include "cg_tc.h"

bool cg_mma_choose_warps(int M, int N, int K, int W, int *wm, int *wn)
{
    if (M < 16 || N < 8 || K < 16 || M % 16 || N % 8 || K % 16) return false;
    int m = M / 16 < W ? M / 16 : W;
    int n = W / m;
    if (N / 8 < n) n = N / 8;
    *wm = m;
    *wn = n < 1 ? 1 : n;
    return true;
}

bool cg_dot_mma_eligible(const IrOp *op, int sm)
{
    if (op->op != IR_DOT || sm < 80) return false;
    IrElem ea = (IrElem)op->args[0]->type.elem, eb = (IrElem)op->args[1]->type.elem;
    IrElem er = (IrElem)op->res[0]->type.elem;
    return ea == eb && (ea == IR_F16 || ea == IR_BF16) && er == IR_F32;
}

typedef struct AdCtx {
    IrFunc *f;
    int sm, n;
} AdCtx;

static void visit(IrOp *op, void *vctx)
{
    AdCtx *c = vctx;
    if (!cg_dot_mma_eligible(op, c->sm)) return;
    const IrType *ta = &op->args[0]->type, *tc = &op->res[0]->type;
    int wm, wn;
    if (!cg_mma_choose_warps(tc->shape[0], tc->shape[1], ta->shape[1], c->f->sched.num_warps, &wm, &wn)) return;
    op->res[0]->layout = cg_layout_mma(c->f, CG_MMA_C, wm, wn);
    c->n++;
}

int cg_accelerate_dot(IrFunc *f, int sm)
{
    AdCtx c = {f, sm, 0};
    ir_walk(f, visit, &c);
    return c.n;
}
