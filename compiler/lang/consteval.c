/* consteval.c — compile-time evaluation of scalar constants.
 *
 * What: arithmetic, comparison, logic and math on V_CONST values (literals,
 * const parameters, file-level consts), with the same promotion rules as the
 * runtime lowering (sema_promote), so `BLOCK_M / 2` and `D % 16 == 0` fold.
 * Invariants: the numbers are compiler/ir/eval.c's (ir_eval_binary & co.),
 * the IR's one definition that fold and the interpreter share, so a typed
 * constant folds bit for bit to what a run computes. An int constant's `i`
 * is always wrapped to its type's width (sign-extended for signed types,
 * zero-extended for unsigned, 0/1 for i1); an untyped int is computed in i64
 * and retyped i32 when it fits, else i64. A typed float constant holds a
 * value of its type (f32 ops compute in float and round, as at run time); an
 * untyped float (a literal, or arithmetic on literals only) is computed in
 * f64 and rounded once, where it meets a type. The language rejects what the
 * IR would trap on or clamp: division by zero and shift amounts outside
 * [0, width) are errors here.
 * Example: `const N: i32 = 100; N / 8 * 8` folds to i32 96; `1 << 40` to an
 * untyped i64; `0.1.to(f16) * 3.0` to f16 0.2998046875 (0.0999755859375 * 3
 * = 0.2999267578125 is a tie between two f16 values: to even), as a run gives.
 */
#include "sema.h"
#include "compiler/ir/eval.h"

#include <math.h>
#include <string.h>

Val cv_int(int64_t i, IrElem e, SrcLoc loc)
{
    Val v;
    memset(&v, 0, sizeof v);
    v.kind = V_CONST;
    v.type = ir_type_scalar(e);
    v.i = e == IR_I1 ? i != 0 : ir_eval_wrap(e, (uint64_t)i);
    v.f = (double)v.i;
    v.loc = loc;
    return v;
}

Val cv_untyped_int(int64_t i, SrcLoc loc)
{
    Val v = cv_int(i, (i >= INT32_MIN && i <= INT32_MAX) ? IR_I32 : IR_I64, loc);
    v.untyped = true;
    return v;
}

Val cv_float(double f, IrElem e, bool untyped, SrcLoc loc)
{
    Val v;
    memset(&v, 0, sizeof v);
    v.kind = V_CONST;
    v.type = ir_type_scalar(e);
    v.f = untyped ? f : ir_eval_round(e, f);
    v.untyped = untyped;
    v.loc = loc;
    return v;
}

Val cv_bool(bool b, SrcLoc loc) { return cv_int(b, IR_I1, loc); }

bool cv_is_int(const Val *v)
{
    return v->kind == V_CONST && ir_elem_is_int((IrElem)v->type.elem) && v->type.elem != IR_I1;
}

static bool is_float_c(const Val *v) { return ir_elem_is_float((IrElem)v->type.elem); }

double cv_as_double(const Val *v)
{
    if (is_float_c(v)) return v->f;
    if (v->type.elem == IR_U64) return (double)(uint64_t)v->i;
    return (double)v->i;
}

bool cv_truthy(const Val *v) { return is_float_c(v) ? v->f != 0.0 : v->i != 0; }

/* The type a constant is evaluated in: untyped floats in f64, untyped ints
 * in i64 (their retyping by value happens on the result). */
static IrElem eval_elem(const Val *v)
{
    if (!v->untyped) return (IrElem)v->type.elem;
    return is_float_c(v) ? IR_F64 : ir_elem_is_int((IrElem)v->type.elem) && v->type.elem != IR_I1 ? IR_I64
                                                                                                    : (IrElem)v->type.elem;
}

static IrScalar scalar_of(const Val *v)
{
    IrScalar x;
    if (is_float_c(v)) x.f = v->f;
    else x.i = v->i;
    return x;
}

/* v's value converted to element type e with the IR's cast. */
static IrScalar convert_to(const Val *v, IrElem e) { return ir_eval_cast(eval_elem(v), e, scalar_of(v)); }

Val cv_convert(const Val *v, IrElem e)
{
    IrScalar r = convert_to(v, e);
    if (ir_elem_is_float(e)) return cv_float(r.f, e, false, v->loc);
    return cv_int(r.i, e, v->loc);
}

/* Retype an int result: untyped -> i32/i64 by value, typed -> wrapped. */
static Val int_result(int64_t r, IrElem e, bool untyped, SrcLoc loc)
{
    if (untyped) return cv_untyped_int(r, loc);
    return cv_int(r, e, loc);
}

IrOpcode sema_arith_opcode(AstOp op)
{
    switch (op) {
    case OP_ADD: return IR_ADD;
    case OP_SUB: return IR_SUB;
    case OP_MUL: return IR_MUL;
    case OP_DIV: return IR_DIV;
    case OP_MOD: return IR_REM;
    case OP_SHL: return IR_SHL;
    case OP_SHR: return IR_SHR;
    case OP_BITAND: case OP_LAND: return IR_AND;
    case OP_BITOR: case OP_LOR: return IR_OR;
    case OP_BITXOR: return IR_XOR;
    default: return IR_CMP;
    }
}

IrCmp sema_cmp_kind(AstOp op)
{
    switch (op) {
    case OP_LT: return IR_CMP_LT;
    case OP_LE: return IR_CMP_LE;
    case OP_GT: return IR_CMP_GT;
    case OP_GE: return IR_CMP_GE;
    case OP_EQ: return IR_CMP_EQ;
    default: return IR_CMP_NE;
    }
}

/* The language's rules on top of the IR's: no division by zero, no shift
 * amount outside [0, width) in a constant (the IR would trap or clamp). */
static bool int_op_allowed(Sema *s, AstOp op, IrElem e, int64_t y, SrcLoc loc)
{
    if ((op == OP_DIV || op == OP_MOD) && y == 0) {
        diag_error(s->diag, loc, "division by zero in a constant expression");
        return false;
    }
    if ((op == OP_SHL || op == OP_SHR) && (y < 0 || y >= ir_elem_bits(e))) {
        diag_error(s->diag, loc, "shift amount %lld is out of range for %s", (long long)y, ir_elem_name(e));
        return false;
    }
    return true;
}

/* Promotes a and b (sema_promote) to *e and converts them to the type *ce
 * the op is evaluated in. Literal arithmetic is done in 64 bits, then retyped
 * by value: 1 << 40 is an i64. */
static void promote_pair(const Val *a, const Val *b, IrElem *e, IrElem *ce, bool *untyped, IrScalar *x,
                         IrScalar *y)
{
    *e = sema_promote((IrElem)a->type.elem, a->untyped, (IrElem)b->type.elem, b->untyped, untyped);
    bool fl = ir_elem_is_float(*e);
    *ce = !*untyped ? *e : fl ? IR_F64 : ir_elem_is_int(*e) && *e != IR_I1 ? IR_I64 : *e;
    *x = convert_to(a, *ce);
    *y = convert_to(b, *ce);
}

static Val result_of(IrScalar r, IrElem e, bool untyped, SrcLoc loc)
{
    if (ir_elem_is_float(e)) return cv_float(r.f, e, untyped, loc);
    return int_result(r.i, e, untyped, loc);
}

Val cv_minmax(Sema *s, IrOpcode opc, const Val *a, const Val *b, SrcLoc loc)
{
    IrElem e, ce;
    bool untyped;
    IrScalar x, y, r;
    promote_pair(a, b, &e, &ce, &untyped, &x, &y);
    if (ir_eval_binary(opc, ce, x, y, &r) != IR_EVAL_OK) {
        INTERNAL_ERROR("cv_minmax: %s on %s", ir_op_info[opc].name, ir_elem_name(ce));
        (void)s;
        return val_err();
    }
    return result_of(r, e, untyped, loc);
}

Val cv_binary(Sema *s, AstOp op, const Val *a, const Val *b, SrcLoc loc)
{
    if (op == OP_LAND || op == OP_LOR) {
        bool r = op == OP_LAND ? cv_truthy(a) && cv_truthy(b) : cv_truthy(a) || cv_truthy(b);
        return cv_bool(r, loc);
    }
    IrElem e, ce;
    bool untyped;
    IrScalar x, y, r;
    promote_pair(a, b, &e, &ce, &untyped, &x, &y);
    bool fl = ir_elem_is_float(e);
    IrOpcode opc = sema_arith_opcode(op);
    if (opc == IR_CMP) return cv_bool(ir_eval_cmp(sema_cmp_kind(op), ce, x, y), loc);
    if (!fl && !int_op_allowed(s, op, ce, y.i, loc)) return val_err();
    if (ir_eval_binary(opc, ce, x, y, &r) != IR_EVAL_OK) {
        diag_error(s->diag, loc, "operator '%s' needs integer operands, got %s", ast_op_text(op),
                   ir_elem_name(e));
        return val_err();
    }
    return result_of(r, e, untyped, loc);
}

Val cv_unary(Sema *s, AstOp op, const Val *a, SrcLoc loc)
{
    IrElem e = (IrElem)a->type.elem, ce = eval_elem(a);
    IrScalar r;
    switch (op) {
    case OP_PLUS: { Val v = *a; v.loc = loc; return v; }
    case OP_NOT:
        return cv_bool(!cv_truthy(a), loc);
    case OP_NEG:
    case OP_BITNOT:
        if (ir_eval_unary(op == OP_NEG ? IR_NEG : IR_NOT, ce, scalar_of(a), &r) != IR_EVAL_OK) break;
        if (ir_elem_is_float(e)) return cv_float(r.f, e, a->untyped, loc);
        if (e == IR_I1) return cv_bool(r.i, loc);
        return int_result(r.i, e, a->untyped, loc);
    default:
        break;
    }
    INTERNAL_ERROR("cv_unary: unexpected operator %d on %s", (int)op, ir_elem_name(e));
    (void)s;
    return val_err();
}

/* Elementwise math on a float constant: `exp2(0.5)` folds like the runtime op would. */
Val cv_math(Sema *s, IrOpcode op, const Val *a, SrcLoc loc)
{
    IrScalar r;
    if (ir_eval_unary(op, eval_elem(a), scalar_of(a), &r) == IR_EVAL_OK)
        return cv_float(r.f, (IrElem)a->type.elem, a->untyped, loc);
    INTERNAL_ERROR("cv_math: '%s' is not a math function", ir_op_info[op].name);
    (void)s;
    return val_err();
}
