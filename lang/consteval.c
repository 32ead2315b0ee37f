/* consteval.c — compile-time evaluation of scalar constants.
 *
 * What: arithmetic, comparison, logic and math on V_CONST values (literals,
 * const parameters, file-level consts), with the same promotion rules as the
 * runtime lowering (sema_promote), so `BLOCK_M / 2` and `D % 16 == 0` fold.
 * Invariants: an int constant's `i` is always wrapped to its type's width
 * (sign-extended for signed types, zero-extended for unsigned, 0/1 for i1);
 * an untyped int result is retyped i32 when it fits, else i64; a float
 * constant keeps a double in `f` (rounding to f16/bf16 happens at run time).
 * Example: `const N: i32 = 100; N / 8 * 8` folds to i32 96; `1 << 40` to an
 * untyped i64.
 */
#include "sema.h"

#include <math.h>
#include <string.h>

int64_t cv_wrap(IrElem e, int64_t v)
{
    int bits = ir_elem_bits(e);
    if (e == IR_I1) return v != 0;
    if (bits >= 64 || bits <= 0) return v;
    uint64_t mask = ((uint64_t)1 << bits) - 1;
    uint64_t u = (uint64_t)v & mask;
    if (ir_elem_is_signed(e) && (u >> (bits - 1)) & 1) u |= ~mask;
    return (int64_t)u;
}

Val cv_int(int64_t i, IrElem e, SrcLoc loc)
{
    Val v;
    memset(&v, 0, sizeof v);
    v.kind = V_CONST;
    v.type = ir_type_scalar(e);
    v.i = cv_wrap(e, i);
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
    v.f = f;
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

Val cv_convert(const Val *v, IrElem e)
{
    if (ir_elem_is_float(e)) return cv_float(cv_as_double(v), e, false, v->loc);
    if (e == IR_I1) return cv_bool(cv_truthy(v), v->loc);
    if (is_float_c(v)) {
        double d = v->f;
        /* float -> int truncates; out-of-range and NaN saturate like C-on-GPU (cvt.rzi.sat) */
        int64_t i = isnan(d) ? 0 : d >= 9.2e18 ? INT64_MAX : d <= -9.2e18 ? INT64_MIN : (int64_t)d;
        return cv_int(i, e, v->loc);
    }
    return cv_int(v->i, e, v->loc);
}

/* Retype an int result: untyped -> i32/i64 by value, typed -> wrapped. */
static Val int_result(int64_t r, IrElem e, bool untyped, SrcLoc loc)
{
    if (untyped) return cv_untyped_int(r, loc);
    return cv_int(r, e, loc);
}

static bool fold_int(Sema *s, AstOp op, IrElem e, int64_t x, int64_t y, int64_t *r, SrcLoc loc)
{
    uint64_t ux = (uint64_t)x, uy = (uint64_t)y;
    bool uns = !ir_elem_is_signed(e);
    switch (op) {
    case OP_ADD: *r = (int64_t)(ux + uy); return true;
    case OP_SUB: *r = (int64_t)(ux - uy); return true;
    case OP_MUL: *r = (int64_t)(ux * uy); return true;
    case OP_DIV: case OP_MOD:
        if (y == 0) {
            diag_error(s->diag, loc, "division by zero in a constant expression");
            return false;
        }
        if (uns && e == IR_U64) *r = (int64_t)(op == OP_DIV ? ux / uy : ux % uy);
        else if (x == INT64_MIN && y == -1) *r = op == OP_DIV ? INT64_MIN : 0;
        else *r = op == OP_DIV ? x / y : x % y;
        return true;
    case OP_SHL: case OP_SHR: {
        int bits = ir_elem_bits(e);
        if (y < 0 || y >= bits) {
            diag_error(s->diag, loc, "shift amount %lld is out of range for %s",
                       (long long)y, ir_elem_name(e));
            return false;
        }
        if (op == OP_SHL) *r = (int64_t)(ux << y);
        else if (uns) *r = (int64_t)((ux & (bits == 64 ? ~0ull : ((1ull << bits) - 1))) >> y);
        else *r = x >> y;
        return true;
    }
    case OP_BITAND: *r = x & y; return true;
    case OP_BITOR: *r = x | y; return true;
    case OP_BITXOR: *r = x ^ y; return true;
    default: return false;
    }
}

static bool fold_cmp(AstOp op, double x, double y, int64_t ix, int64_t iy, bool is_float)
{
    int c = is_float ? (x < y ? -1 : x > y ? 1 : x == y ? 0 : 2)
                     : (ix < iy ? -1 : ix > iy ? 1 : 0);
    switch (op) {
    case OP_LT: return c == -1;
    case OP_LE: return c == -1 || c == 0;
    case OP_GT: return c == 1;
    case OP_GE: return c == 1 || c == 0;
    case OP_EQ: return c == 0;
    default: return c != 0;   /* OP_NE (unordered compares unequal) */
    }
}

static Val fold_float(Sema *s, AstOp op, IrElem e, bool untyped, double x, double y, SrcLoc loc)
{
    double r;
    switch (op) {
    case OP_ADD: r = x + y; break;
    case OP_SUB: r = x - y; break;
    case OP_MUL: r = x * y; break;
    case OP_DIV: r = x / y; break;
    case OP_MOD: r = fmod(x, y); break;
    default:
        diag_error(s->diag, loc, "operator '%s' needs integer operands, got %s",
                   ast_op_text(op), ir_elem_name(e));
        return val_err();
    }
    return cv_float(r, e, untyped, loc);
}

Val cv_binary(Sema *s, AstOp op, const Val *a, const Val *b, SrcLoc loc)
{
    if (op == OP_LAND || op == OP_LOR) {
        bool r = op == OP_LAND ? cv_truthy(a) && cv_truthy(b) : cv_truthy(a) || cv_truthy(b);
        return cv_bool(r, loc);
    }
    bool untyped;
    IrElem e = sema_promote((IrElem)a->type.elem, a->untyped, (IrElem)b->type.elem, b->untyped,
                            &untyped);
    /* Literal arithmetic is done in 64 bits, then retyped by value: 1 << 40 is an i64. */
    if (untyped && ir_elem_is_int(e) && e != IR_I1) e = IR_I64;
    Val x = cv_convert(a, e), y = cv_convert(b, e);
    bool fl = ir_elem_is_float(e);
    if (op >= OP_LT && op <= OP_NE) {
        int64_t ix = x.i, iy = y.i;
        if (!fl && e == IR_U64 && ((ix < 0) != (iy < 0))) { ix = ix < 0; iy = iy < 0; }
        return cv_bool(fold_cmp(op, x.f, y.f, ix, iy, fl), loc);
    }
    if (fl) return fold_float(s, op, e, untyped, x.f, y.f, loc);
    int64_t r;
    if (!fold_int(s, op, e, x.i, y.i, &r, loc)) return val_err();
    return int_result(r, e, untyped, loc);
}

Val cv_unary(Sema *s, AstOp op, const Val *a, SrcLoc loc)
{
    (void)s;
    IrElem e = (IrElem)a->type.elem;
    switch (op) {
    case OP_PLUS: { Val r = *a; r.loc = loc; return r; }
    case OP_NEG:
        if (ir_elem_is_float(e)) return cv_float(-a->f, e, a->untyped, loc);
        return int_result((int64_t)(0 - (uint64_t)a->i), e, a->untyped, loc);
    case OP_NOT:
        return cv_bool(!cv_truthy(a), loc);
    case OP_BITNOT:
        if (e == IR_I1) return cv_bool(!a->i, loc);
        return int_result(~a->i, e, a->untyped, loc);
    default:
        INTERNAL_ERROR("cv_unary: unexpected operator %d", (int)op);
        return val_err();
    }
}

/* Elementwise math on a float constant: `exp2(0.5)` folds like the runtime op would. */
Val cv_math(Sema *s, const char *fname, const Val *a, SrcLoc loc)
{
    static const struct { const char *name; double (*fn)(double); } tab[] = {
        {"exp", exp}, {"exp2", exp2}, {"log", log}, {"log2", log2}, {"sqrt", sqrt},
        {"abs", fabs}, {"tanh", tanh}, {"sin", sin}, {"cos", cos}, {"floor", floor},
        {"ceil", ceil},
    };
    double x = a->f;
    for (size_t k = 0; k < sizeof tab / sizeof tab[0]; k++)
        if (strcmp(tab[k].name, fname) == 0)
            return cv_float(tab[k].fn(x), (IrElem)a->type.elem, a->untyped, loc);
    if (strcmp(fname, "rsqrt") == 0) return cv_float(1.0 / sqrt(x), (IrElem)a->type.elem, a->untyped, loc);
    INTERNAL_ERROR("cv_math: unknown function '%s'", fname);
    (void)s;
    return val_err();
}
