/* cg_control.c — structured control flow: for, if, assert.
 *
 * for (lo, hi, step, inits...) { ^(iv, carried...): ... yield next... }
 *   preheader -> header: iv and one phi per register of each carried value;
 *                        iv < hi ? body : exit
 *             -> body ... latch: iv + step, br header
 *             -> exit: the results are the header's phis.
 * The layout pass gave each carried block argument, its init, its yield
 * operand and the loop result one layout, so the register counts agree.
 * if (cond) then/else: both arms end in a yield; the merge block has one phi
 * per register of each result. The condition is a scalar, so every thread of
 * the CTA takes the same arm and barriers inside arms are safe.
 * assert(cond): any false element of this thread traps (llvm.trap).
 */
#include "cg_internal.h"

#include <string.h>

static IrOp *region_yield(IrBlock *b) { return b->last && b->last->op == IR_YIELD ? b->last : NULL; }

/* SRAM accesses pending when the loop is entered also reach its exit when
 * it runs zero times: merged back after the loop with everything the loop
 * touches (its buffers, and its stage buffers when pipelined). */
typedef struct Pending {
    CgRange r[CG_MAX_PENDING];
    int n;
} Pending;

static void pending_save(const CgCtx *c, Pending *p)
{
    p->n = c->npending;
    memcpy(p->r, c->pending, sizeof(CgRange) * (size_t)p->n);
}

static void pending_merge(CgCtx *c, const Pending *p, const IrOp *loop, bool stages)
{
    for (int i = 0; i < p->n; i++) cg_smem_pending_add(c, p->r[i].lo, p->r[i].hi);
    cg_smem_pending_span(c, loop, stages);
}

/* The loop-carried values of a `for` (op->args[3..], body->args[1..]): a phi
 * per register in the loop header (the builder's block), entered from `pre`. */
void cg_loop_carry_phis(CgCtx *c, IrOp *op, LLVMBasicBlockRef pre)
{
    IrBlock *body = op->regions[0];
    int ncar = op->nargs - 3;
    for (int i = 0; i < ncar; i++) {
        CgTile *init = cg_get(c, op->args[3 + i]);
        CgTile *t = cg_set(c, body->args[i + 1], init->n);
        for (int r = 0; r < init->n; r++) {
            t->r[r] = LLVMBuildPhi(c->b, LLVMTypeOf(init->r[r]), "");
            LLVMAddIncoming(t->r[r], &init->r[r], &pre, 1);
        }
    }
}

/* Closes those phis with the body's yield, reaching the header from `latch`;
 * the loop's results are the phis (the values after the last iteration). */
bool cg_loop_carry_close(CgCtx *c, IrOp *op, LLVMBasicBlockRef latch)
{
    IrBlock *body = op->regions[0];
    IrOp *y = region_yield(body);
    int ncar = op->nargs - 3;
    for (int i = 0; i < ncar; i++) {
        CgTile *t = cg_get(c, body->args[i + 1]);
        CgTile *yv = y && i < y->nargs ? cg_get(c, y->args[i]) : NULL;
        if (!yv || yv->n != t->n) {
            INTERNAL_ERROR("codegen: loop-carried value %d changes register count", i);
            return false;
        }
        for (int r = 0; r < t->n; r++) LLVMAddIncoming(t->r[r], &yv->r[r], &latch, 1);
        CgTile *res = cg_set(c, op->res[i], t->n);
        for (int r = 0; r < t->n; r++) res->r[r] = t->r[r];
    }
    return true;
}

static bool lower_pipelined(CgCtx *c, IrOp *op, GpPipeLoop *pl)
{
    if (!cg_pipeline_prologue(c, pl)) return false;   /* at the loop unless issued earlier */
    Pending before;
    pending_save(c, &before);
    bool ok = cg_lower_for_pipelined(c, op, pl);
    pending_merge(c, &before, op, true);
    return ok;
}

static bool lower_for(CgCtx *c, IrOp *op)
{
    GpPipeLoop *pl = gp_pipeline_of_loop(c->tc, op);
    if (pl) return lower_pipelined(c, op, pl);
    Pending before;
    pending_save(c, &before);
    IrBlock *body = op->regions[0];
    IrElem ie = (IrElem)op->args[0]->type.elem;
    LLVMValueRef lo = cg_get(c, op->args[0])->r[0];
    LLVMValueRef hi = cg_get(c, op->args[1])->r[0];
    LLVMValueRef step = cg_get(c, op->args[2])->r[0];
    LLVMBasicBlockRef pre = LLVMGetInsertBlock(c->b);
    LLVMBasicBlockRef header = cg_block(c, "for_header"), bb = cg_block(c, "for_body"),
                      exit = cg_block(c, "for_exit");
    LLVMBuildBr(c->b, header);
    LLVMPositionBuilderAtEnd(c->b, header);
    LLVMValueRef iv = LLVMBuildPhi(c->b, cg_type(c, ie), "iv");
    cg_set(c, body->args[0], 1)->r[0] = iv;
    cg_loop_carry_phis(c, op, pre);
    LLVMValueRef cond = LLVMBuildICmp(c->b, ir_elem_is_signed(ie) ? LLVMIntSLT : LLVMIntULT, iv, hi, "");
    LLVMBuildCondBr(c->b, cond, bb, exit);
    LLVMPositionBuilderAtEnd(c->b, bb);
    /* The previous iteration's SRAM accesses reach this point over the back edge. */
    cg_smem_pending_span(c, op, false);
    if (!cg_lower_block(c, body)) return false;
    LLVMValueRef next = LLVMBuildAdd(c->b, iv, step, "iv.next");
    LLVMBasicBlockRef latch = LLVMGetInsertBlock(c->b);
    LLVMBuildBr(c->b, header);
    LLVMAddIncoming(iv, &lo, &pre, 1);
    LLVMAddIncoming(iv, &next, &latch, 1);
    if (!cg_loop_carry_close(c, op, latch)) return false;
    LLVMPositionBuilderAtEnd(c->b, exit);
    pending_merge(c, &before, op, false);
    return true;
}

/* Lowers one arm; returns its end block, and its yield through *y. */
static LLVMBasicBlockRef lower_arm(CgCtx *c, IrOp *op, int r, LLVMBasicBlockRef bb, LLVMBasicBlockRef merge,
                                   IrOp **y)
{
    LLVMPositionBuilderAtEnd(c->b, bb);
    *y = NULL;
    if (r < op->nregions) {
        if (!cg_lower_block(c, op->regions[r])) return NULL;
        *y = region_yield(op->regions[r]);
    }
    LLVMBasicBlockRef end = LLVMGetInsertBlock(c->b);
    LLVMBuildBr(c->b, merge);
    return end;
}

static bool lower_if(CgCtx *c, IrOp *op)
{
    LLVMValueRef cond = cg_get(c, op->args[0])->r[0];
    LLVMBasicBlockRef tb = cg_block(c, "if_then"), eb = cg_block(c, "if_else"), merge = cg_block(c, "if_end");
    LLVMBuildCondBr(c->b, cond, tb, eb);
    IrOp *ty, *ey;
    /* SRAM accesses pending after the if: those of either arm. */
    CgRange before[CG_MAX_PENDING], after_then[CG_MAX_PENDING];
    int nbefore = c->npending;
    memcpy(before, c->pending, sizeof(CgRange) * (size_t)nbefore);
    LLVMBasicBlockRef tend = lower_arm(c, op, 0, tb, merge, &ty);
    if (!tend) return false;
    int nthen = c->npending;
    memcpy(after_then, c->pending, sizeof(CgRange) * (size_t)nthen);
    memcpy(c->pending, before, sizeof(CgRange) * (size_t)nbefore);
    c->npending = nbefore;
    LLVMBasicBlockRef eend = lower_arm(c, op, 1, eb, merge, &ey);
    if (!eend) return false;
    for (int i = 0; i < nthen; i++) cg_smem_pending_add(c, after_then[i].lo, after_then[i].hi);
    LLVMPositionBuilderAtEnd(c->b, merge);
    for (int i = 0; i < op->nres; i++) {
        if (!ty || !ey || i >= ty->nargs || i >= ey->nargs) {
            INTERNAL_ERROR("codegen: 'if' with results needs a yield in both arms");
            return false;
        }
        CgTile *a = cg_get(c, ty->args[i]), *b = cg_get(c, ey->args[i]);
        if (a->n != b->n) {
            INTERNAL_ERROR("codegen: 'if' arms yield different register counts");
            return false;
        }
        CgTile *t = cg_set(c, op->res[i], a->n);
        for (int r = 0; r < a->n; r++) {
            t->r[r] = LLVMBuildPhi(c->b, LLVMTypeOf(a->r[r]), "");
            LLVMAddIncoming(t->r[r], &a->r[r], &tend, 1);
            LLVMAddIncoming(t->r[r], &b->r[r], &eend, 1);
        }
    }
    return true;
}

static bool lower_assert(CgCtx *c, IrOp *op)
{
    CgTile *t = cg_get(c, op->args[0]);
    LLVMValueRef all = LLVMConstInt(c->t_i1, 1, 0);
    for (int i = 0; i < t->n; i++) all = LLVMBuildAnd(c->b, all, t->r[i], "");
    LLVMBasicBlockRef fail = cg_block(c, "assert_fail"), ok = cg_block(c, "assert_ok");
    LLVMBuildCondBr(c->b, all, ok, fail);
    LLVMPositionBuilderAtEnd(c->b, fail);
    cg_call(c, "llvm.trap", c->t_void, 0, NULL, NULL);
    LLVMBuildUnreachable(c->b);
    LLVMPositionBuilderAtEnd(c->b, ok);
    return true;
}

bool cg_lower_control(CgCtx *c, IrOp *op)
{
    switch (op->op) {
    case IR_FOR: return lower_for(c, op);
    case IR_IF: return lower_if(c, op);
    case IR_ASSERT: return lower_assert(c, op);
    default: return false;
    }
}
