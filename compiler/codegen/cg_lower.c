/* cg_lower.c — the lowering's dispatch: one IR op (or a block of them) to
 * per-thread LLVM IR, by op family (cg_*.c, one family per file).
 *
 * What it does: cg_lower_op picks the family's lowering; cg_lower_block walks
 * a block in program order and issues a pipelined loop's prologue at the op
 * the plan names (pipeline.issue, read through GpTcState). Layering: the
 * GPU passes (pass_*.c) run before this and may ask lowering files for
 * facts (scratch sizes, vector widths); lowering never calls a pass; both
 * are driven by codegen.c, and emission (cg_emit.c) comes last.
 *
 * Invariants: lowering reads decisions, never makes them: layouts from
 * IrValue.layout, SRAM and pipeline plans from GpTcState (built from the IR).
 * Example: `%y = convert_layout %x : tensor<64x64xf32, #L3>` goes to
 * cg_lower_convert, which stores %x through the buffer its smem.* attributes
 * name and reads it back in #L3.
 */
#include "cg_internal.h"

/* Converting f8e4m3 (a cast, or a dot that widens its operands) takes the
 * cvt ... e4m3x2 instructions of sm_89 and newer; moving its bytes does not. */
static bool f8_needs_cvt(const CgCtx *c, const IrOp *op)
{
    if (c->sm >= 89 || (op->op != IR_CAST && op->op != IR_DOT)) return false;
    return op->args[0]->type.elem == IR_F8E4M3 || op->res[0]->type.elem == IR_F8E4M3;
}

bool cg_lower_op(CgCtx *c, IrOp *op)
{
    if (f8_needs_cvt(c, op)) {
        cg_fail(c, op, "f8e4m3 %s needs sm_89 or newer (PTX cvt ... e4m3x2); the target is sm_%d",
                op->op == IR_DOT ? "dot" : "conversion", c->sm);
        return false;
    }
    c->smem_base = 0;
    c->cur = (CgRange){-1, -1};
    /* A pipelined load has no registers: its copies are issued by the loop
     * (cg_pipeline.c) and its convert_layout reads the stage buffer. */
    if ((op->op == IR_LOAD || op->op == IR_CAST || op->op == IR_TRANS) && c->pipe && gp_pipeline_load(c->tc, op, NULL))
        return true;
    /* Nor do the slice ops only the copies for later iterations read (a paged cache's
     * block-table read in the body: cg_pipeline.c, mark_dead_in_place). */
    if (c->pipe && !c->slice_eval && gp_pipeline_dead_in_place(c->tc, op)) return true;
    switch (op->op) {
    case IR_CONST: case IR_ARANGE: case IR_SPLAT: case IR_BROADCAST: case IR_EXPAND_DIMS:
    case IR_TRANS: case IR_PROGRAM_ID: case IR_NUM_PROGRAMS:
        return cg_lower_shape_op(c, op);
    case IR_LOAD: case IR_STORE: case IR_ATOMIC_ADD: case IR_FENCE:
        return cg_lower_memory(c, op);
    case IR_REDUCE:
        return cg_lower_reduce(c, op);
    case IR_CONVERT_LAYOUT: case IR_RESHAPE:
        return cg_lower_convert(c, op);
    case IR_DOT:
        return cg_lower_dot(c, op);
    case IR_FOR: case IR_IF: case IR_ASSERT:
        return cg_lower_control(c, op);
    case IR_YIELD:
        cg_wgmma_retire(c);  /* nothing reads registers a wgmma group may still write */
        return true; /* read by the parent for/if */
    case IR_RETURN:
        cg_pingpong_return(c);
        LLVMBuildRetVoid(c->b);
        return true;
    default:
        if (ir_op_info[op->op].flags & IRF_ELEMWISE) return cg_lower_elementwise(c, op);
        cg_fail(c, op, "the GPU backend cannot lower '%s'", ir_op_info[op->op].name);
        return false;
    }
}

bool cg_lower_block(CgCtx *c, IrBlock *blk)
{
    for (IrOp *op = blk->first; op; op = op->next) {
        for (int i = 0; c->tc && i < c->tc->loops.len; i++) {   /* a loop's copies issued early */
            GpPipeLoop *pl = c->tc->loops.data[i];
            if (pl->issue_at == op && pl->loop != op && !cg_pipeline_prologue(c, pl)) return false;
        }
        if (!cg_lower_op(c, op) || c->failed) return false;
        if (ice_message()) return false;
        if (c->pipe && c->pipe->mbarrier && c->pipe->release_after == op) cg_mbar_release(c, c->pipe);
    }
    return true;
}
