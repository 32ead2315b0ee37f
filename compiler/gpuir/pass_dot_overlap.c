/* pass_dot_overlap.c — software pipelining across dots on sm_90a: a dot whose
 * wgmma group stays in flight while the ops after it run, retired by the wait
 * of the next dot (FlashAttention-3's intra-warpgroup overlap: the next key
 * block's Q K^T on the tensor cores during this block's softmax). A schedule
 * option (GpPassCtx.overlap: kiln compile --overlap,
 * KilnCompileOptions.overlap), never the program's choice; off, the IR and
 * the PTX are unchanged.
 *
 * What it marks: in the body of a pipelined loop (pipeline.stages, so it runs
 * after the pipeline pass), a dot D1 of a wgmma kernel in wgmma's warp grid
 * (MMA C layout, every warp along M) whose
 *   - operands are each the loop's pipelined load (a stage slot) or defined
 *     outside the loop (loop-invariant: Q),
 *   - accumulator is defined outside the loop (a zero tile),
 *   - result is used only by the yield (a loop-carried value: the scores of
 *     the next iteration),
 * followed in the body, before any region op, by another dot D2 in the same
 * grid (attention: O += P V). D1 gets wgmma.overlap = 1. The lowering
 * (cg_dot_wgmma.c) then commits D1's group without waiting and ties D1's
 * registers through D2's wgmma.wait_group, so D1's wgmmas run during every op
 * between the two and nothing reads its registers before the wait.
 *
 * Which loop has such a dot: a rotated one, where iteration i computes the
 * dot of iteration i + 1 and carries it: what pass_dot_rotate.c makes of the
 * attention key loops under the same option (or a program written so).
 *
 * Why it is safe (ir_verify checks the same): D1's SRAM operands are a stage
 * slot, refilled only by the copies at the top of a later iteration, after
 * D2's wait and the barrier there (so no extra pipeline stage is needed: the
 * group never crosses the back edge), or a tile defined before the loop, live
 * across all of it (so no scratch placed between D1 and D2 overlaps it); its
 * result's only reader, the yield, comes after D2. The matmul's
 * wgmma.pending (pass_pipeline.c) is for a loop's only dot; a body with two
 * dots never has it, so the two never meet.
 *
 * Example (attention, d = 64, 128 x 64 tile, 8 warps, sm_90a, --overlap):
 *     %s1 = dot %q, %kt1, %z {wgmma.overlap = 1} : tensor<128x64xf32, #L0>   (block it + 64)
 *     ... softmax of the carried %s (block it) ...
 *     %o = dot %p, %v, %acc : tensor<128x64xf32, #L0>      (its wait retires %s1 too)
 *     yield %s1, %o, ...
 */
#include "gpuir.h"

/* In wgmma's warp grid: MMA C layout, every warp along M. */
static bool grid_dot(const IrFunc *f, const IrOp *op)
{
    GpMmaFrag frag;
    int wm, wn;
    return op->op == IR_DOT && op->nres == 1 && gp_layout_is_mma(f, op->res[0]->layout, &frag, &wm, &wn) &&
           frag == GP_MMA_C && wn == 1 && wm == f->sched.num_warps && wm % 4 == 0;
}

static bool outside(const IrValue *v, const IrBlock *body)
{
    return v->block != body && (!v->def || v->def->parent != body);
}

/* A convert_layout in `body` of a load of `body` with a pipeline slot. */
static bool stage_slot(const IrValue *v, const IrBlock *body)
{
    const IrOp *cv = v->def;
    if (!cv || cv->op != IR_CONVERT_LAYOUT || cv->parent != body) return false;
    const IrOp *ld = cv->args[0]->def;
    return ld && ld->op == IR_LOAD && ld->parent == body && ir_attr_get(&ld->attrs, IR_ATTR_SLOT_BYTES);
}

/* Whether D1 = `op` qualifies (see the header); `uses`: ir_use_counts. */
static bool overlap_dot(const IrFunc *f, const IrBlock *body, const IrOp *op, const int *uses)
{
    if (!grid_dot(f, op) || ir_attr_get(&op->attrs, IR_ATTR_MMA_PENDING)) return false;
    for (int i = 0; i < 2; i++)
        if (!stage_slot(op->args[i], body) && !outside(op->args[i], body)) return false;
    if (!outside(op->args[2], body) || uses[op->res[0]->id] != 1) return false;
    const IrOp *y = body->last;
    bool yielded = false;
    for (int k = 0; y && y->op == IR_YIELD && k < y->nargs; k++) yielded |= y->args[k] == op->res[0];
    if (!yielded) return false;
    const IrOp *next = op->next;
    while (next && next->op != IR_DOT && !next->nregions) next = next->next;
    return next && grid_dot(f, next);
}

static void visit(IrOp *loop, void *vctx)
{
    IrFunc *f = vctx;
    if (loop->op != IR_FOR || !ir_attr_get(&loop->attrs, IR_ATTR_STAGES)) return;
    IrBlock *body = loop->regions[0];
    int *uses = ir_use_counts(f);
    for (IrOp *x = body->first; x; x = x->next)
        if (overlap_dot(f, body, x, uses)) {
            ir_attr_set_int(f->arena, &x->attrs, IR_ATTR_MMA_OVERLAP, 1);
            x = x->next;   /* the dot that retires it is not itself in flight */
            while (x && x->op != IR_DOT) x = x->next;
            if (!x) break;
        }
}

bool gp_pass_dot_overlap(IrFunc *f, const GpPassCtx *ctx, Diag *d)
{
    (void)d;
    if (!ctx->sched.overlap || !ir_attr_int(&f->attrs, IR_ATTR_WGMMA, 0)) return true;
    ir_walk(f, visit, f);
    return true;
}
