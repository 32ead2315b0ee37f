/* pass_pingpong.c — warpgroup ping-pong on sm_90a: the warpgroups of a CTA
 * take turns on the tensor cores, so one warpgroup's softmax (any non-dot
 * work) overlaps another's wgmmas (FlashAttention-3's scheduler barriers).
 * A schedule option (GpPassCtx.pingpong: kiln compile --pingpong,
 * KilnCompileOptions.pingpong), never the program's choice.
 *
 * What it decides (the lowering, cg_pingpong.c, does the rest): when the
 * option is on, the kernel is marked `wgmma = 1` (accelerate-dot on sm_90a),
 * it has G = num_warps / 4 >= 2 warpgroups, and at least one dot is in the
 * MMA accumulator layout with every warp along M (wm = num_warps, wn = 1: each
 * warpgroup owns its own rows, so the dots of different warpgroups are
 * independent), the kernel gets `pingpong = G` and each such dot
 * `pingpong = 1`. Anything else is left as it was (no attribute at all), so
 * with the option off the IR, and the PTX, are unchanged.
 *
 * The protocol the attributes stand for (warpgroup g, named barriers 1..G,
 * 256 threads each: the waiting warpgroup and the one arriving):
 *     kernel entry:        warpgroup G-1: bar.arrive 1         (warpgroup 0 goes first)
 *     each marked dot:     bar.sync 1+g; wgmma.fence; wgmmas; commit;
 *                          bar.arrive 1+(g+1)%G; wait_group 0
 *     return:              warpgroup 0: bar.sync 1             (takes the last arrival)
 * Control flow is CTA-uniform (loop bounds and branch conditions are
 * scalars), so every warpgroup runs the same marked dots in the same order:
 * barrier 1+g sees warpgroup g's syncs and warpgroup g-1's arrivals the same
 * number of times (for barrier 1, warpgroup 0 syncs once more at the return
 * and warpgroup G-1 arrives once more at the entry), and its phases never
 * overlap (a warpgroup's next arrival on it follows its next turn, which
 * follows the sync that completed the phase). No full barrier (bar.sync 0,
 * which the lowering places at SRAM hazards) lies between a sync on a named
 * barrier and the arrival that ends the turn, so none can wait on a
 * warpgroup that waits for its turn: a turn holds only the wgmma issue.
 *
 * Invariants (ir_verify): `pingpong` on the kernel is G = num_warps / 4 >= 2
 * and needs `wgmma = 1`; `pingpong = 1` only on dots, and only with the
 * kernel's; a kernel with the attribute has at least one marked dot.
 *
 * Example (attention, BLOCK_M = 128, 8 warps, sm_90a, --pingpong):
 *     kernel @attn(...) num_warps = 8 ... attributes {wgmma = 1, smem = 49152, pingpong = 2}
 *       %s = dot %30, %46, %23 {pingpong = 1} : tensor<128x64xf32, #L0>     #L0 = #mma<C, wm=8, wn=1>
 *       %68 = dot %66, %67, %23 {pingpong = 1} : tensor<128x128xf32, #L0>
 */
#include "gpuir.h"

typedef struct PpCtx {
    IrFunc *f;
    bool mark;   /* false: count only */
    int n;
} PpCtx;

/* Each warpgroup owns its own rows of the dot's accumulator. */
static bool turn_dot(const IrFunc *f, const IrOp *op)
{
    GpMmaFrag frag;
    int wm, wn;
    return op->op == IR_DOT && op->nres == 1 && gp_layout_is_mma(f, op->res[0]->layout, &frag, &wm, &wn) &&
           frag == GP_MMA_C && wm == f->sched.num_warps && wn == 1;
}

static void visit(IrOp *op, void *vctx)
{
    PpCtx *c = vctx;
    if (!turn_dot(c->f, op)) return;
    c->n++;
    if (c->mark) ir_attr_set_int(c->f->arena, &op->attrs, IR_ATTR_PINGPONG, 1);
}

bool gp_pass_pingpong(IrFunc *f, const GpPassCtx *ctx, Diag *d)
{
    (void)d;
    int W = f->sched.num_warps;
    if (!ctx->sched.pingpong || !ir_attr_int(&f->attrs, IR_ATTR_WGMMA, 0) || W % 4 || W / 4 < 2) return true;
    PpCtx c = {f, false, 0};
    ir_walk(f, visit, &c);
    if (!c.n) return true;
    c.mark = true;
    ir_walk(f, visit, &c);
    ir_attr_set_int(f->arena, &f->attrs, IR_ATTR_PINGPONG, W / 4);
    return true;
}
