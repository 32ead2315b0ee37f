/* interp_ops.c — elementwise ops and casts for the CPU interpreter.
 *
 * What: every IRF_ELEMWISE op: arithmetic, bitwise, shifts, comparisons,
 * math functions, select, cast and addptr, lane by lane. A scalar operand of a
 * tile-valued op is used for every lane.
 * Invariants: the numbers are compiler/ir/eval.c's (ir_eval_binary & co.),
 * the IR's one definition that the front end's constant evaluation and the
 * constant folder share, so a run computes bit for bit what folding does.
 * This file only adds lanes, broadcasting and errors: integer division or
 * remainder by zero is a run-time error naming the lane.
 * Example: `add` of i32 2147483647 and 1 gives -2147483648; `cast` of f32
 * 65520.0 to f16 gives +inf; `cast` of f32 -3.7 to u8 gives 0.
 */
#include "interp_impl.h"

#include <string.h>

static bool is_binary(IrOpcode o) { return (o >= IR_ADD && o <= IR_SHR); }

static int exec_arith(Interp *it, const IrOp *op, IVal *r, int64_t n)
{
    IrElem e = (IrElem)op->res[0]->type.elem;
    bool bin = is_binary(op->op);
    if (op->nargs != (bin ? 2 : 1)) return it_internal(it, op, "wrong operand count");
    IVal *a = it_in(it, op, 0), *b = bin ? it_in(it, op, 1) : a;
    if (!a || !b) return 1;
    int sa = it_operand_stride(it, op, 0, n), sb = bin ? it_operand_stride(it, op, 1, n) : 0;
    if (sa < 0 || sb < 0) return 1;
    for (int64_t i = 0; i < n; i++) {
        IrEvalStatus st = bin ? ir_eval_binary(op->op, e, a[i * sa], b[i * sb], &r[i])
                              : ir_eval_unary(op->op, e, a[i * sa], &r[i]);
        if (st == IR_EVAL_UNDEFINED)
            return it_internal(it, op, "op %s is not defined on %s", ir_op_info[op->op].name, ir_elem_name(e));
        if (st == IR_EVAL_DIV_ZERO) {
            char idx[96];
            it_fmt_index(idx, sizeof idx, op->res[0]->type, i);
            return it_error(it, op, "integer division by zero at lane %lld (index %s)", (long long)i, idx);
        }
    }
    return 0;
}

static int exec_cmp(Interp *it, const IrOp *op, IVal *r, int64_t n)
{
    if (op->nargs != 2) return it_internal(it, op, "wrong operand count");
    IVal *a = it_in(it, op, 0), *b = it_in(it, op, 1);
    if (!a || !b) return 1;
    int sa = it_operand_stride(it, op, 0, n), sb = it_operand_stride(it, op, 1, n);
    if (sa < 0 || sb < 0) return 1;
    IrElem e = (IrElem)op->args[0]->type.elem;
    IrCmp c = (IrCmp)op->attr[0];
    if ((unsigned)c > IR_CMP_GE) return it_internal(it, op, "bad comparison %d", op->attr[0]);
    for (int64_t i = 0; i < n; i++) r[i].i = ir_eval_cmp(c, e, a[i * sa], b[i * sb]);
    return 0;
}

static int exec_select(Interp *it, const IrOp *op, IVal *r, int64_t n)
{
    if (op->nargs != 3) return it_internal(it, op, "wrong operand count");
    IVal *c = it_in(it, op, 0), *a = it_in(it, op, 1), *b = it_in(it, op, 2);
    if (!c || !a || !b) return 1;
    int sc = it_operand_stride(it, op, 0, n), sa = it_operand_stride(it, op, 1, n),
        sb = it_operand_stride(it, op, 2, n);
    if (sc < 0 || sa < 0 || sb < 0) return 1;
    for (int64_t i = 0; i < n; i++) r[i] = c[i * sc].i ? a[i * sa] : b[i * sb];
    return 0;
}

static int exec_cast(Interp *it, const IrOp *op, IVal *r, int64_t n)
{
    if (op->nargs != 1) return it_internal(it, op, "wrong operand count");
    IVal *a = it_in(it, op, 0);
    if (!a) return 1;
    int sa = it_operand_stride(it, op, 0, n);
    if (sa < 0) return 1;
    IrElem s = (IrElem)op->args[0]->type.elem, d = (IrElem)op->res[0]->type.elem;
    for (int64_t i = 0; i < n; i++) r[i] = ir_eval_cast(s, d, a[i * sa]);
    return 0;
}

static int exec_addptr(Interp *it, const IrOp *op, IVal *r, int64_t n)
{
    if (op->nargs != 2) return it_internal(it, op, "wrong operand count");
    IVal *p = it_in(it, op, 0), *o = it_in(it, op, 1);
    if (!p || !o) return 1;
    int sp = it_operand_stride(it, op, 0, n), so = it_operand_stride(it, op, 1, n);
    if (sp < 0 || so < 0) return 1;
    int64_t size = it_elem_bytes((IrElem)op->res[0]->type.pointee);
    bool u64 = op->args[1]->type.elem == IR_U64; /* above INT64_MAX: out of any buffer */
    for (int64_t i = 0; i < n; i++) {
        /* in element space, exactly: the byte offset and the address must not
         * overflow, nor the address leave [0, INT64_MAX] (IT_WILD_PTR) */
        int64_t off, addr;
        uint64_t base = p[i * sp].u;
        bool wild = base > INT64_MAX || (u64 && o[i * so].u > INT64_MAX) || __builtin_mul_overflow(o[i * so].i, size, &off) ||
                    __builtin_add_overflow((int64_t)base, off, &addr) || addr < 0;
        r[i].u = wild ? IT_WILD_PTR : (uint64_t)addr;
    }
    return 0;
}

int it_exec_elementwise(Interp *it, const IrOp *op)
{
    if (op->nres != 1) return it_internal(it, op, "elementwise op without one result");
    int64_t n = ir_type_numel(op->res[0]->type);
    IVal *r = it_out(it, op, 0);
    if (!r) return it_error(it, op, "out of host memory for the interpreter's values");
    switch (op->op) {
    case IR_CMP: return exec_cmp(it, op, r, n);
    case IR_SELECT: return exec_select(it, op, r, n);
    case IR_CAST: return exec_cast(it, op, r, n);
    case IR_ADDPTR: return exec_addptr(it, op, r, n);
    default: break;
    }
    return exec_arith(it, op, r, n);
}
