/* eval.c — scalar evaluation of IR ops: the one definition of the numeric
 * semantics that constant evaluation, folding and interpretation share.
 *
 * What: integer and float binary and unary ops, comparisons and casts between
 * every IrElem, on normalised values (see eval.h for the representation and
 * the semantics). The 16-bit float formats round through
 * compiler/support/fp16.c, which rounds a double once (no double rounding).
 * Invariants: every result is normalised for its type (an int wrapped, a
 * float exactly representable); nothing here traps or evaluates C undefined
 * behaviour (shifts, INT_MIN / -1, float -> int of NaN or out of range are
 * all defined above C's rules).
 * Example: ir_eval_binary(IR_ADD, IR_I32, {.i = INT32_MAX}, {.i = 1}) gives
 * INT32_MIN; ir_eval_cast(IR_F32, IR_U8, {.f = -3.7}) gives 0;
 * ir_eval_cast(IR_I64, IR_F16, {.i = 2049}) gives 2048 (a tie, to even).
 */
#include "eval.h"
#include "compiler/support/fp16.h"

#include <math.h>
#include <string.h>

int64_t ir_eval_wrap(IrElem e, uint64_t v)
{
    switch (e) {
    case IR_I1: return (int64_t)(v & 1u);
    case IR_I8: return (int64_t)(int8_t)(uint8_t)v;
    case IR_I16: return (int64_t)(int16_t)(uint16_t)v;
    case IR_I32: return (int64_t)(int32_t)(uint32_t)v;
    case IR_U8: return (int64_t)(v & 0xffu);
    case IR_U16: return (int64_t)(v & 0xffffu);
    case IR_U32: return (int64_t)(v & 0xffffffffu);
    default: return (int64_t)v; /* i64, u64, ptr */
    }
}

double ir_eval_round(IrElem e, double x)
{
    switch (e) {
    case IR_F16: return fp16_to_f32(fp16_from_f64(x));
    case IR_BF16: return bf16_to_f32(bf16_from_f64(x));
    case IR_F8E4M3: return f8e4m3_to_f32(f8e4m3_from_f64(x));
    case IR_F32: return (double)(float)x;
    default: return x;
    }
}

IrScalar ir_eval_int(IrElem e, int64_t v) { return (IrScalar){.i = ir_eval_wrap(e, (uint64_t)v)}; }
IrScalar ir_eval_float(IrElem e, double x) { return (IrScalar){.f = ir_eval_round(e, x)}; }

/* ---- floats ---- */

static bool float_bin(IrOpcode o, IrElem e, double a, double b, double *out)
{
    if (e == IR_F64) {
        switch (o) {
        case IR_ADD: *out = a + b; return true;
        case IR_SUB: *out = a - b; return true;
        case IR_MUL: *out = a * b; return true;
        case IR_DIV: *out = a / b; return true;
        case IR_REM: *out = fmod(a, b); return true;
        case IR_MIN: *out = fmin(a, b); return true;
        case IR_MAX: *out = fmax(a, b); return true;
        default: return false;
        }
    }
    float x = (float)a, y = (float)b, r; /* exact: the operands are values of e */
    switch (o) {
    case IR_ADD: r = x + y; break;
    case IR_SUB: r = x - y; break;
    case IR_MUL: r = x * y; break;
    case IR_DIV: r = x / y; break;
    case IR_REM: r = fmodf(x, y); break;
    case IR_MIN: r = fminf(x, y); break;
    case IR_MAX: r = fmaxf(x, y); break;
    default: return false;
    }
    *out = ir_eval_round(e, r);
    return true;
}

static bool float_un(IrOpcode o, IrElem e, double a, double *out)
{
    if (e == IR_F64) {
        switch (o) {
        case IR_NEG: *out = -a; return true;
        case IR_ABS: *out = fabs(a); return true;
        case IR_EXP: *out = exp(a); return true;
        case IR_EXP2: *out = exp2(a); return true;
        case IR_LOG: *out = log(a); return true;
        case IR_LOG2: *out = log2(a); return true;
        case IR_SQRT: *out = sqrt(a); return true;
        case IR_RSQRT: *out = 1.0 / sqrt(a); return true;
        case IR_TANH: *out = tanh(a); return true;
        case IR_SIN: *out = sin(a); return true;
        case IR_COS: *out = cos(a); return true;
        case IR_FLOOR: *out = floor(a); return true;
        case IR_CEIL: *out = ceil(a); return true;
        default: return false;
        }
    }
    float x = (float)a, r;
    switch (o) {
    case IR_NEG: r = -x; break;
    case IR_ABS: r = fabsf(x); break;
    case IR_EXP: r = expf(x); break;
    case IR_EXP2: r = exp2f(x); break;
    case IR_LOG: r = logf(x); break;
    case IR_LOG2: r = log2f(x); break;
    case IR_SQRT: r = sqrtf(x); break;
    case IR_RSQRT: r = 1.0f / sqrtf(x); break;
    case IR_TANH: r = tanhf(x); break;
    case IR_SIN: r = sinf(x); break;
    case IR_COS: r = cosf(x); break;
    case IR_FLOOR: r = floorf(x); break;
    case IR_CEIL: r = ceilf(x); break;
    default: return false;
    }
    *out = ir_eval_round(e, r);
    return true;
}

/* ---- integers ---- */

static IrEvalStatus int_bin(IrOpcode o, IrElem e, int64_t a, int64_t b, int64_t *out)
{
    bool sg = ir_elem_is_signed(e);
    int bits = ir_elem_bits(e); /* ptr: 64 */
    uint64_t ua = (uint64_t)a, ub = (uint64_t)b, r;
    switch (o) {
    case IR_ADD: r = ua + ub; break;
    case IR_SUB: r = ua - ub; break;
    case IR_MUL: r = ua * ub; break;
    case IR_DIV:
    case IR_REM:
        if (b == 0) return IR_EVAL_DIV_ZERO;
        if (sg && b == -1) r = o == IR_DIV ? 0 - ua : 0; /* MIN / -1 wraps; no C overflow */
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
        if (sg) /* arithmetic, without C's implementation-defined >> of negatives */
            r = ub >= (uint64_t)bits ? (a < 0 ? ~(uint64_t)0 : 0) : (a < 0 ? ~(~ua >> ub) : ua >> ub);
        else
            r = ub >= (uint64_t)bits ? 0 : ua >> ub;
        break;
    default: return IR_EVAL_UNDEFINED;
    }
    *out = ir_eval_wrap(e, r);
    return IR_EVAL_OK;
}

static bool int_un(IrOpcode o, IrElem e, int64_t a, int64_t *out)
{
    uint64_t ua = (uint64_t)a;
    switch (o) {
    case IR_NEG: *out = ir_eval_wrap(e, 0 - ua); return true;
    case IR_NOT: *out = ir_eval_wrap(e, ~ua); return true;
    case IR_ABS: *out = ir_eval_wrap(e, ir_elem_is_signed(e) && a < 0 ? 0 - ua : ua); return true;
    default: return false;
    }
}

/* ---- the entry points ---- */

IrEvalStatus ir_eval_binary(IrOpcode op, IrElem e, IrScalar a, IrScalar b, IrScalar *out)
{
    if (ir_elem_is_float(e))
        return float_bin(op, e, a.f, b.f, &out->f) ? IR_EVAL_OK : IR_EVAL_UNDEFINED;
    if (!ir_elem_is_int(e)) return IR_EVAL_UNDEFINED;
    return int_bin(op, e, a.i, b.i, &out->i);
}

IrEvalStatus ir_eval_unary(IrOpcode op, IrElem e, IrScalar a, IrScalar *out)
{
    bool ok = ir_elem_is_float(e) ? float_un(op, e, a.f, &out->f)
              : ir_elem_is_int(e) ? int_un(op, e, a.i, &out->i)
                                  : false;
    return ok ? IR_EVAL_OK : IR_EVAL_UNDEFINED;
}

bool ir_eval_cmp(IrCmp c, IrElem e, IrScalar a, IrScalar b)
{
    int ord; /* -1, 0, 1; 2 = unordered */
    if (ir_elem_is_float(e))
        ord = isnan(a.f) || isnan(b.f) ? 2 : a.f < b.f ? -1 : a.f > b.f;
    else if (ir_elem_is_signed(e))
        ord = a.i < b.i ? -1 : a.i > b.i;
    else
        ord = a.u < b.u ? -1 : a.u > b.u;
    switch (c) {
    case IR_CMP_EQ: return ord == 0;
    case IR_CMP_NE: return ord != 0;
    case IR_CMP_LT: return ord == -1;
    case IR_CMP_LE: return ord == -1 || ord == 0;
    case IR_CMP_GT: return ord == 1;
    case IR_CMP_GE: return ord == 1 || ord == 0;
    }
    return false;
}

/* Float -> integer: truncate toward zero, saturate to e's range, NaN -> 0. */
static int64_t float_to_int(IrElem e, double x)
{
    if (e == IR_I1) return x != 0.0;
    if (isnan(x)) return 0;
    double t = trunc(x);
    int bits = ir_elem_bits(e); /* ptr: 64 */
    if (ir_elem_is_signed(e)) {
        double lim = ldexp(1.0, bits - 1); /* 2^(bits-1), exact */
        if (t >= lim) return ir_eval_wrap(e, ((uint64_t)1 << (bits - 1)) - 1);
        if (t <= -lim) return ir_eval_wrap(e, (uint64_t)1 << (bits - 1));
        return (int64_t)t;
    }
    if (t <= 0.0) return 0;
    if (t >= ldexp(1.0, bits)) return ir_eval_wrap(e, ~(uint64_t)0);
    return (int64_t)(uint64_t)t;
}

/* An integer magnitude as a double, rounded to odd beyond 2^53: the later
 * rounding to f16/bf16 (itself through round-to-odd f32) is then a single
 * correct rounding of the integer. */
static double mag_to_double_odd(uint64_t mag)
{
    if (mag < ((uint64_t)1 << 53)) return (double)mag;
    const uint64_t low = ((uint64_t)1 << 12) - 1; /* keep bits 63..12: at most 52 significant */
    if (mag & low) mag = (mag & ~low) | (low + 1);
    return (double)mag;
}

static double int_to_float(IrElem from, IrElem to, int64_t v)
{
    bool neg = ir_elem_is_signed(from) && v < 0;
    uint64_t mag = neg ? 0 - (uint64_t)v : (uint64_t)v;
    if (to == IR_F32) {
        float f = (float)mag; /* one rounding, to nearest even */
        return neg ? -(double)f : (double)f;
    }
    if (to == IR_F64) return neg ? -(double)mag : (double)mag;
    double d = mag_to_double_odd(mag);
    return ir_eval_round(to, neg ? -d : d);
}

IrScalar ir_eval_cast(IrElem from, IrElem to, IrScalar a)
{
    bool ff = ir_elem_is_float(from), tf = ir_elem_is_float(to);
    IrScalar r;
    if (ff && tf) r.f = ir_eval_round(to, a.f);
    else if (ff) r.i = float_to_int(to, a.f);
    else if (tf) r.f = int_to_float(from, to, a.i);
    else if (to == IR_I1) r.i = a.i != 0;
    else r.i = ir_eval_wrap(to, a.u); /* a is normalised for `from`: sign/zero extension done */
    return r;
}

uint64_t ir_eval_to_bits(IrElem e, IrScalar x)
{
    switch (e) {
    case IR_F16: return fp16_from_f64(x.f);
    case IR_BF16: return bf16_from_f64(x.f);
    case IR_F8E4M3: return f8e4m3_from_f64(x.f);
    case IR_F32: {
        float f = (float)x.f;
        uint32_t u;
        memcpy(&u, &f, 4);
        return u;
    }
    case IR_F64: return x.u;
    case IR_I1: return x.i != 0;
    default: {
        int bits = ir_elem_bits(e); /* ptr: 64 */
        return bits >= 64 ? x.u : x.u & (((uint64_t)1 << bits) - 1);
    }
    }
}

IrScalar ir_eval_from_bits(IrElem e, uint64_t bits)
{
    IrScalar r;
    switch (e) {
    case IR_F16: r.f = fp16_to_f32((uint16_t)bits); break;
    case IR_BF16: r.f = bf16_to_f32((uint16_t)bits); break;
    case IR_F8E4M3: r.f = f8e4m3_to_f32((uint8_t)bits); break;
    case IR_F32: {
        uint32_t u = (uint32_t)bits;
        float f;
        memcpy(&f, &u, 4);
        r.f = f;
        break;
    }
    case IR_F64: r.u = bits; break;
    case IR_I1: r.i = (bits & 0xffu) != 0; break;
    default: r.i = ir_eval_wrap(e, bits); break;
    }
    return r;
}
