/* interp_ops.c — elementwise ops and casts for the CPU interpreter.
 *
 * What: every IRF_ELEMWISE op: arithmetic, bitwise, shifts, comparisons,
 * math functions, select, cast and addptr, lane by lane. A scalar operand of a
 * tile-valued op is used for every lane.
 * Invariants (the numeric contract of the IR):
 *   - integers wrap to their width; `shr` is arithmetic for signed types and
 *     logical for unsigned; shift amounts >= the width give 0 (or the sign
 *     fill for an arithmetic shr), as PTX's clamped shifts do; division or
 *     remainder by zero is an error; INT_MIN / -1 wraps to INT_MIN (rem 0);
 *   - f16, bf16 and f32 are computed in float (C's float ops, expf & co) and
 *     rounded once to the result type; f64 in double; min/max ignore a NaN
 *     operand (fminf/fmaxf); float division is IEEE (x/0 = inf);
 *   - cast: float -> float and int -> float round to nearest even, once;
 *     float -> int truncates toward zero and saturates (NaN -> 0); any -> i1
 *     is `!= 0`; int -> int wraps (sign- or zero-extends by the source type).
 * Example: `add` of i32 2147483647 and 1 gives -2147483648; `cast` of f32
 * 65520.0 to f16 gives +inf; `cast` of f32 -3.7 to u8 gives 0.
 */
#include "interp_impl.h"

#include <math.h>
#include <string.h>

static float fbin_f(IrOpcode o, float a, float b)
{
    switch (o) {
    case IR_ADD: return a + b;
    case IR_SUB: return a - b;
    case IR_MUL: return a * b;
    case IR_DIV: return a / b;
    case IR_REM: return fmodf(a, b);
    case IR_MIN: return fminf(a, b);
    case IR_MAX: return fmaxf(a, b);
    default: return NAN;
    }
}

static double fbin_d(IrOpcode o, double a, double b)
{
    switch (o) {
    case IR_ADD: return a + b;
    case IR_SUB: return a - b;
    case IR_MUL: return a * b;
    case IR_DIV: return a / b;
    case IR_REM: return fmod(a, b);
    case IR_MIN: return fmin(a, b);
    case IR_MAX: return fmax(a, b);
    default: return NAN;
    }
}

static float fun_f(IrOpcode o, float a)
{
    switch (o) {
    case IR_NEG: return -a;
    case IR_ABS: return fabsf(a);
    case IR_EXP: return expf(a);
    case IR_EXP2: return exp2f(a);
    case IR_LOG: return logf(a);
    case IR_LOG2: return log2f(a);
    case IR_SQRT: return sqrtf(a);
    case IR_RSQRT: return 1.0f / sqrtf(a);
    case IR_TANH: return tanhf(a);
    case IR_SIN: return sinf(a);
    case IR_COS: return cosf(a);
    case IR_FLOOR: return floorf(a);
    case IR_CEIL: return ceilf(a);
    default: return NAN;
    }
}

static double fun_d(IrOpcode o, double a)
{
    switch (o) {
    case IR_NEG: return -a;
    case IR_ABS: return fabs(a);
    case IR_EXP: return exp(a);
    case IR_EXP2: return exp2(a);
    case IR_LOG: return log(a);
    case IR_LOG2: return log2(a);
    case IR_SQRT: return sqrt(a);
    case IR_RSQRT: return 1.0 / sqrt(a);
    case IR_TANH: return tanh(a);
    case IR_SIN: return sin(a);
    case IR_COS: return cos(a);
    case IR_FLOOR: return floor(a);
    case IR_CEIL: return ceil(a);
    default: return NAN;
    }
}

static bool float_binop(IrOpcode o)
{
    return o == IR_ADD || o == IR_SUB || o == IR_MUL || o == IR_DIV || o == IR_REM || o == IR_MIN ||
           o == IR_MAX;
}

static bool float_unop(IrOpcode o)
{
    return o == IR_NEG || (o >= IR_EXP && o <= IR_CEIL);
}

static int exec_float(Interp *it, const IrOp *op, IVal *r, int64_t n)
{
    IrElem e = (IrElem)op->res[0]->type.elem;
    bool bin = float_binop(op->op);
    if (!bin && !float_unop(op->op))
        return it_internal(it, op, "op %s is not defined on %s", ir_op_info[op->op].name, ir_elem_name(e));
    if (op->nargs != (bin ? 2 : 1)) return it_internal(it, op, "wrong operand count");
    IVal *a = it_in(it, op, 0), *b = bin ? it_in(it, op, 1) : a;
    if (!a || !b) return 1;
    int sa = it_operand_stride(it, op, 0, n), sb = bin ? it_operand_stride(it, op, 1, n) : 0;
    if (sa < 0 || sb < 0) return 1;
    for (int64_t i = 0; i < n; i++) {
        double x = a[i * sa].f, y = b[i * sb].f;
        double v;
        if (e == IR_F64) v = bin ? fbin_d(op->op, x, y) : fun_d(op->op, x);
        else v = bin ? fbin_f(op->op, (float)x, (float)y) : fun_f(op->op, (float)x);
        r[i].f = e == IR_F16 || e == IR_BF16 ? it_round_float(e, v) : v;
    }
    return 0;
}

/* One integer binary op on normalised operands; wraps to e. Returns false on
 * division by zero. */
static bool ibin(IrOpcode o, IrElem e, int64_t a, int64_t b, int64_t *out)
{
    bool sg = ir_elem_is_signed(e);
    int bits = ir_elem_bits(e);
    uint64_t ua = (uint64_t)a, ub = (uint64_t)b, r;
    switch (o) {
    case IR_ADD: r = ua + ub; break;
    case IR_SUB: r = ua - ub; break;
    case IR_MUL: r = ua * ub; break;
    case IR_DIV:
    case IR_REM:
        if (b == 0) return false;
        if (sg && b == -1) r = o == IR_DIV ? 0 - ua : 0; /* INT_MIN / -1 wraps */
        else if (sg) r = (uint64_t)(o == IR_DIV ? a / b : a % b);
        else r = o == IR_DIV ? ua / ub : ua % ub;
        break;
    case IR_MIN: r = (sg ? a < b : ua < ub) ? ua : ub; break;
    case IR_MAX: r = (sg ? a > b : ua > ub) ? ua : ub; break;
    case IR_AND: r = ua & ub; break;
    case IR_OR: r = ua | ub; break;
    case IR_XOR: r = ua ^ ub; break;
    case IR_SHL: r = ub >= (uint64_t)bits ? 0 : ua << ub; break;
    case IR_SHR:
        if (sg) r = ub >= (uint64_t)bits ? (a < 0 ? ~(uint64_t)0 : 0)
                    : (a < 0 ? ~(~ua >> ub) : ua >> ub); /* arithmetic, no implementation-defined >> */
        else r = ub >= (uint64_t)bits ? 0 : ua >> ub;
        break;
    default: r = 0; break;
    }
    *out = it_norm_int(e, r);
    return true;
}

static bool int_binop(IrOpcode o) { return float_binop(o) || (o >= IR_AND && o <= IR_SHR); }

static int exec_int(Interp *it, const IrOp *op, IVal *r, int64_t n)
{
    IrElem e = (IrElem)op->res[0]->type.elem;
    IrOpcode o = op->op;
    bool bin = int_binop(o);
    if (!bin && o != IR_NEG && o != IR_NOT && o != IR_ABS)
        return it_internal(it, op, "op %s is not defined on %s", ir_op_info[o].name, ir_elem_name(e));
    if (op->nargs != (bin ? 2 : 1)) return it_internal(it, op, "wrong operand count");
    IVal *a = it_in(it, op, 0), *b = bin ? it_in(it, op, 1) : a;
    if (!a || !b) return 1;
    int sa = it_operand_stride(it, op, 0, n), sb = bin ? it_operand_stride(it, op, 1, n) : 0;
    if (sa < 0 || sb < 0) return 1;
    for (int64_t i = 0; i < n; i++) {
        int64_t x = a[i * sa].i;
        if (bin) {
            if (!ibin(o, e, x, b[i * sb].i, &r[i].i)) {
                char idx[96];
                it_fmt_index(idx, sizeof idx, op->res[0]->type, i);
                return it_error(it, op, "integer division by zero at lane %lld (index %s)", (long long)i, idx);
            }
            continue;
        }
        uint64_t ux = (uint64_t)x;
        uint64_t v = o == IR_NEG ? 0 - ux : o == IR_NOT ? ~ux : (x < 0 && ir_elem_is_signed(e) ? 0 - ux : ux);
        r[i].i = it_norm_int(e, v);
    }
    return 0;
}

static bool cmp_holds(IrCmp c, int ord /* -1, 0, 1 */)
{
    switch (c) {
    case IR_CMP_EQ: return ord == 0;
    case IR_CMP_NE: return ord != 0;
    case IR_CMP_LT: return ord < 0;
    case IR_CMP_LE: return ord <= 0;
    case IR_CMP_GT: return ord > 0;
    case IR_CMP_GE: return ord >= 0;
    }
    return false;
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
    for (int64_t i = 0; i < n; i++) {
        IVal x = a[i * sa], y = b[i * sb];
        bool v;
        if (ir_elem_is_float(e)) {
            /* IEEE: every ordered comparison with a NaN is false, != is true. */
            if (isnan(x.f) || isnan(y.f)) v = c == IR_CMP_NE;
            else v = cmp_holds(c, x.f < y.f ? -1 : x.f > y.f ? 1 : 0);
        } else if (ir_elem_is_signed(e)) {
            v = cmp_holds(c, x.i < y.i ? -1 : x.i > y.i ? 1 : 0);
        } else {
            v = cmp_holds(c, x.u < y.u ? -1 : x.u > y.u ? 1 : 0);
        }
        r[i].i = v;
    }
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

/* Float -> integer: truncate toward zero, saturate to the range of e, NaN -> 0. */
static int64_t float_to_int(IrElem e, double x)
{
    if (e == IR_I1) return x != 0.0;
    if (isnan(x)) return 0;
    double t = trunc(x);
    int bits = ir_elem_bits(e);
    if (ir_elem_is_signed(e)) {
        double lim = ldexp(1.0, bits - 1); /* 2^(bits-1), exact */
        if (t >= lim) return it_norm_int(e, ((uint64_t)1 << (bits - 1)) - 1);
        if (t <= -lim) return it_norm_int(e, (uint64_t)1 << (bits - 1));
        return (int64_t)t;
    }
    double lim = ldexp(1.0, bits);
    if (t <= 0.0) return 0;
    if (t >= lim) return it_norm_int(e, ~(uint64_t)0);
    return (int64_t)(uint64_t)t;
}

/* Integer -> double with round-to-odd beyond 2^53, so a later rounding to a
 * narrower float (f16/bf16) is still a single correct rounding. */
static double int_to_double_odd(uint64_t mag)
{
    if (mag < ((uint64_t)1 << 53)) return (double)mag;
    const uint64_t low = ((uint64_t)1 << 12) - 1; /* keep bits 63..12: at most 52 significant */
    if (mag & low) mag = (mag & ~low) | (low + 1);
    return (double)mag;
}

static double int_to_float(IrElem src, IrElem dst, int64_t v)
{
    bool neg = ir_elem_is_signed(src) && v < 0;
    uint64_t mag = neg ? 0 - (uint64_t)v : (uint64_t)v;
    if (dst == IR_F32) {
        float f = (float)mag; /* one rounding, to nearest even */
        return neg ? -(double)f : (double)f;
    }
    if (dst == IR_F64) {
        double d = (double)mag;
        return neg ? -d : d;
    }
    double d = int_to_double_odd(mag);
    return it_round_float(dst, neg ? -d : d);
}

static int exec_cast(Interp *it, const IrOp *op, IVal *r, int64_t n)
{
    if (op->nargs != 1) return it_internal(it, op, "wrong operand count");
    IVal *a = it_in(it, op, 0);
    if (!a) return 1;
    int sa = it_operand_stride(it, op, 0, n);
    if (sa < 0) return 1;
    IrElem s = (IrElem)op->args[0]->type.elem, d = (IrElem)op->res[0]->type.elem;
    bool sf = ir_elem_is_float(s), df = ir_elem_is_float(d);
    for (int64_t i = 0; i < n; i++) {
        IVal x = a[i * sa];
        if (sf && df) r[i].f = it_round_float(d, x.f);
        else if (sf) r[i].i = float_to_int(d, x.f);
        else if (df) r[i].f = int_to_float(s, d, x.i);
        else if (d == IR_I1) r[i].i = x.i != 0;
        else r[i].i = it_norm_int(d, x.u); /* ints and pointers: stored sign/zero-extended */
    }
    return 0;
}

static int exec_addptr(Interp *it, const IrOp *op, IVal *r, int64_t n)
{
    if (op->nargs != 2) return it_internal(it, op, "wrong operand count");
    IVal *p = it_in(it, op, 0), *o = it_in(it, op, 1);
    if (!p || !o) return 1;
    int sp = it_operand_stride(it, op, 0, n), so = it_operand_stride(it, op, 1, n);
    if (sp < 0 || so < 0) return 1;
    uint64_t size = (uint64_t)it_elem_bytes((IrElem)op->res[0]->type.pointee);
    for (int64_t i = 0; i < n; i++) r[i].u = p[i * sp].u + (uint64_t)o[i * so].i * size;
    return 0;
}

int it_exec_elementwise(Interp *it, const IrOp *op)
{
    if (op->nres != 1) return it_internal(it, op, "elementwise op without one result");
    int64_t n = ir_type_numel(op->res[0]->type);
    IVal *r = it_out(it, op, 0);
    if (!r) return it_error(it, op, "out of host memory for the interpreter's values");
    IrElem e = (IrElem)op->res[0]->type.elem;
    switch (op->op) {
    case IR_CMP: return exec_cmp(it, op, r, n);
    case IR_SELECT: return exec_select(it, op, r, n);
    case IR_CAST: return exec_cast(it, op, r, n);
    case IR_ADDPTR: return exec_addptr(it, op, r, n);
    default: break;
    }
    if (ir_elem_is_float(e)) return exec_float(it, op, r, n);
    if (ir_elem_is_int(e)) return exec_int(it, op, r, n);
    return it_internal(it, op, "op %s is not defined on %s", ir_op_info[op->op].name, ir_elem_name(e));
}
