/* licm.c — loop-invariant code motion (pass "licm").
 *
 * What it does: moves pure ops out of `for` bodies to just before the loop when
 * every operand is defined outside the loop. Loops are handled innermost first
 * (post-order), and each body is scanned in order, so an op whose operands were
 * hoisted a moment ago is hoisted too, and an invariant of a nest bubbles up
 * through every loop it does not depend on.
 *
 * What it leaves in place:
 *   - loads and every other op with effects (memory may change inside the loop;
 *     a mask may be what protects the access);
 *   - ops nested in an `if` inside the loop body (hoisting them would run them
 *     when the condition is false), and for/if ops themselves;
 *   - integer div/rem unless the divisor is a constant that cannot trap (not 0,
 *     not -1): a loop that runs zero times must not start dividing by zero.
 * Other pure ops cannot trap, so running them when the loop runs zero times is
 * harmless (and dce removes them if unused).
 *
 * Invariants: an op moves only to a point its operands dominate (all are
 * defined outside the loop, hence before it); relative order of hoisted ops is
 * kept; nothing is duplicated or deleted.
 *
 * Example:
 *     for %i = ... {                              %s = mul %scale, %log2e : f32
 *       %s = mul %scale, %log2e : f32      ==>    for %i = ... {
 *       %t = mul %x, %s : f32                       %t = mul %x, %s : f32
 */
#include "passes.h"

static bool int_div_may_trap(const IrOp *op)
{
    if (op->op != IR_DIV && op->op != IR_REM) return false;
    if (!ir_elem_is_int((IrElem)op->res[0]->type.elem)) return false;
    const IrOp *k = op->args[1]->def;
    if (!k || k->op != IR_CONST) return true;
    int bits = ir_elem_bits((IrElem)k->res[0]->type.elem);
    uint64_t mask = bits >= 64 ? ~UINT64_C(0) : (UINT64_C(1) << bits) - 1;
    uint64_t v = (uint64_t)k->ival & mask;
    return v == 0 || v == mask; /* zero, or -1 (MIN / -1 traps) */
}

static bool hoistable(const IrOp *op, const IrOp *loop)
{
    unsigned fl = ir_op_info[op->op].flags;
    if (!(fl & IRF_PURE) || (fl & (IRF_REGIONS | IRF_TERM)) || op->nregions) return false;
    if (int_div_may_trap(op)) return false;
    for (int i = 0; i < op->nargs; i++)
        if (!ir_value_defined_outside(op->args[i], loop)) return false;
    return true;
}

static void licm_block(IrBlock *b);

static void licm_loop(IrOp *loop)
{
    IrBlock *body = loop->regions[0];
    licm_block(body); /* inner loops first */
    for (IrOp *op = body->first, *next; op; op = next) {
        next = op->next;
        if (!hoistable(op, loop)) continue;
        ir_op_unlink(op);
        ir_insert_before(loop, op);
    }
}

/* Visits every loop in b (and in nested ifs), innermost first. */
static void licm_block(IrBlock *b)
{
    for (IrOp *op = b->first; op; op = op->next) {
        if (op->op == IR_FOR && op->nregions >= 1) licm_loop(op);
        else
            for (int r = 0; r < op->nregions; r++) licm_block(op->regions[r]);
    }
}

void pass_licm(IrFunc *f) { licm_block(f->body); }
