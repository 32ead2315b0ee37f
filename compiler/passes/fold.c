/* fold.c — constant folding and canonicalisation of Tile IR (pass "fold").
 *
 * What it does, in one pre-order sweep per round (rounds repeat until nothing
 * changes):
 *   - an elementwise/scalar pure op whose operands are all CONST becomes a CONST
 *     itself (the op is rewritten in place, so its result value keeps its
 *     identity and no use needs rewriting). Integers wrap at the element width
 *     (i32 arithmetic wraps at 32 bits, unsigned types are zero-extended); f32
 *     is computed in float, f64 in double, f16/bf16 in float and then rounded to
 *     nearest even in the 16-bit format (own helpers below: the interpreter's
 *     are another layer);
 *   - splat of a CONST, and broadcast / expand_dims / reshape / trans of a CONST
 *     tile (constants are uniform), become a CONST of the result type; so does a
 *     cast of a CONST;
 *   - canonicalisation that replaces a result by an existing value: x+0, x-0,
 *     x*1, x/1, x*0 -> 0 (ints only), select with a constant condition, cmp of
 *     one integer value with itself, neg(neg x), not(not x), addptr(p, 0), cast
 *     to the same type;
 *   - `for` whose constant bounds give zero trips is replaced by its inits;
 *     `if` on a constant condition is replaced by the ops of the taken region.
 *
 * Invariants:
 *   - folding never traps and never evaluates C undefined behaviour: integer
 *     division/remainder by zero and MIN / -1, shifts by >= the width or by a
 *     negative amount, float -> int casts of NaN or out-of-range values are all
 *     left unfolded (they keep their run-time meaning);
 *   - observable float semantics are kept: no x*0 -> 0 for floats, no
 *     reassociation, x+0 is only removed for x + (-0.0) (since -0 + +0 = +0), x-0
 *     only for x - (+0.0); math functions use the host libm in the type's
 *     precision, as the interpreter (the IR's reference semantics) does;
 *   - a replacement always dominates the uses it takes over (an operand of the
 *     op, an init of the loop, or a value of the inlined region placed at the
 *     `if`), and its type equals the replaced result's type, else no rewrite;
 *   - the pass never creates values; dead constants are left for dce.
 *
 * Example (tests/golden/fold/int_wrap.ir, div_by_zero.ir, float_identities.ir):
 *     %max = const 2147483647 : i32            %max = const 2147483647 : i32
 *     %one = const 1 : i32                     %one = const 1 : i32
 *     %a = add %max, %one : i32        ==>     %a = const -2147483648 : i32
 *     %d0 = div %one, %zero : i32              %d0 = div %one, %zero : i32   (traps: kept)
 *     %b = add %nz, %x : f32  (%nz = -0.0)     uses of %b now use %x
 *     %e = mul %x, %pz : f32  (%pz = +0.0)     %e = mul %x, %pz : f32        (NaN, inf: kept)
 */
#include "passes.h"
#include "compiler/support/fp16.h"

#include <math.h>
#include <string.h>

typedef struct Fold {
    IrFunc *f;
    IrValue **fwd;    /* by value id: the value that replaces it, or NULL */
    int nfwd;
    bool changed;
} Fold;

static void fold_block(Fold *c, IrBlock *b);

/* ---- numeric helpers ---- */

/* Reduces an integer to the element type's width: sign-extended for signed
 * types, zero-extended for unsigned ones and i1 (so true is 1). */
static int64_t wrap_int(IrElem e, uint64_t v)
{
    int bits = ir_elem_bits(e);
    if (bits >= 64 || bits <= 0) return (int64_t)v;
    uint64_t mask = (UINT64_C(1) << bits) - 1;
    v &= mask;
    if (ir_elem_is_signed(e) && (v >> (bits - 1)) & 1) v |= ~mask;
    return (int64_t)v;
}

/* Rounds x to the value set of a float element type. */
static double round_to(IrElem e, double x)
{
    switch (e) {
    case IR_F16: return fp16_to_f32(fp16_from_f64(x));
    case IR_BF16: return bf16_to_f32(bf16_from_f64(x));
    case IR_F32: return (double)(float)x;
    default: return x;
    }
}

/* An integer (value of type `se`) converted to float type `de`, correctly
 * rounded: C's conversions are for f32/f64; for the 16-bit formats the
 * magnitude is first rounded to 11 or 8 significant bits in integer arithmetic
 * (converting through float would round twice). */
static double int_to_float(IrElem se, int64_t a, IrElem de)
{
    bool neg = ir_elem_is_signed(se) && a < 0;
    uint64_t mag = neg ? 0 - (uint64_t)a : (uint64_t)a;
    if (de == IR_F64) return neg ? -(double)mag : (double)mag;
    if (de == IR_F32) return (double)(neg ? -(float)mag : (float)mag);
    int p = de == IR_F16 ? 11 : 8; /* significant bits */
    int len = 0;
    while (len < 64 && (mag >> len) != 0) len++;
    if (len > p) {
        int sh = len - p;
        uint64_t keep = mag >> sh, rem = mag & ((UINT64_C(1) << sh) - 1), half = UINT64_C(1) << (sh - 1);
        if (rem > half || (rem == half && (keep & 1))) keep++;
        double r = ldexp((double)keep, sh);
        return round_to(de, neg ? -r : r); /* exact now; only the overflow check remains */
    }
    return round_to(de, neg ? -(double)mag : (double)mag);
}

/* A float -> integer cast (truncation), when the result is defined. */
static bool float_to_int(double x, IrElem de, int64_t *out)
{
    if (isnan(x)) return false;
    if (de == IR_I1) {
        *out = x != 0;
        return true;
    }
    double t = trunc(x);
    int bits = ir_elem_bits(de);
    if (ir_elem_is_signed(de)) {
        double lo = -ldexp(1.0, bits - 1), hi = ldexp(1.0, bits - 1);
        if (!(t >= lo && t < hi)) return false;
        *out = (int64_t)t;
    } else {
        if (!(t >= 0 && t < ldexp(1.0, bits))) return false;
        *out = (int64_t)(uint64_t)t;
    }
    return true;
}

/* ---- reading constants ---- */

static IrOp *const_def(IrValue *v) { return v && v->def && v->def->op == IR_CONST ? v->def : NULL; }
static IrElem elem_of(const IrValue *v) { return (IrElem)v->type.elem; }
static int64_t cint(const IrOp *k) { return wrap_int((IrElem)k->res[0]->type.elem, (uint64_t)k->ival); }
static double cflt(const IrOp *k) { return round_to((IrElem)k->res[0]->type.elem, k->fval); }

static bool is_const_int(IrValue *v, int64_t want)
{
    IrOp *k = const_def(v);
    return k && ir_elem_is_int(elem_of(v)) && cint(k) == want;
}

/* A float constant equal to `want`, with the same sign bit (+0 and -0 differ). */
static bool is_const_float(IrValue *v, double want)
{
    IrOp *k = const_def(v);
    if (!k || !ir_elem_is_float(elem_of(v))) return false;
    double x = cflt(k);
    return x == want && signbit(x) == signbit(want);
}

/* ---- rewriting ---- */

static IrValue *resolve(Fold *c, IrValue *v)
{
    while (v && v->id < c->nfwd && c->fwd[v->id]) v = c->fwd[v->id];
    return v;
}

/* Turns `op` into `const` in place: its result value keeps every use. */
static void become_const(Fold *c, IrOp *op, int64_t iv, double fv)
{
    IrElem e = elem_of(op->res[0]);
    op->op = IR_CONST;
    op->args = NULL;
    op->nargs = 0;
    memset(op->attr, 0, sizeof op->attr);
    op->sattr = NULL;
    op->ival = ir_elem_is_float(e) ? 0 : wrap_int(e, (uint64_t)iv);
    op->fval = ir_elem_is_float(e) ? round_to(e, fv) : (double)op->ival;
    c->changed = true;
}

/* Copies constant `k`'s value into `op` (splat, broadcast, select ...). */
static void become_copy_of(Fold *c, IrOp *op, const IrOp *k)
{
    if (ir_elem_is_float(elem_of(op->res[0]))) become_const(c, op, 0, cflt(k));
    else become_const(c, op, cint(k), 0);
}

/* Replaces op's (single) result by `v` and drops the op, when the types agree. */
static bool replace_with(Fold *c, IrOp *op, IrValue *v)
{
    if (!v || !ir_type_eq(v->type, op->res[0]->type)) return false;
    if (op->res[0]->id < c->nfwd) c->fwd[op->res[0]->id] = v;
    ir_op_unlink(op);
    c->changed = true;
    return true;
}

/* ---- folding of constant operands ---- */

static bool fold_int_bin(IrOpcode opc, IrElem e, int64_t a, int64_t b, int64_t *out)
{
    bool s = ir_elem_is_signed(e);
    int bits = ir_elem_bits(e);
    uint64_t ua = (uint64_t)a, ub = (uint64_t)b, r;
    int64_t smin = bits >= 64 ? INT64_MIN : -(INT64_C(1) << (bits - 1));
    switch (opc) {
    case IR_ADD: r = ua + ub; break;
    case IR_SUB: r = ua - ub; break;
    case IR_MUL: r = ua * ub; break;
    case IR_DIV:
    case IR_REM:
        if (b == 0 || (s && a == smin && b == -1)) return false; /* traps or UB at run time */
        if (s) r = (uint64_t)(opc == IR_DIV ? a / b : a % b);
        else r = opc == IR_DIV ? ua / ub : ua % ub;
        break;
    case IR_MIN: r = (s ? a < b : ua < ub) ? ua : ub; break;
    case IR_MAX: r = (s ? a > b : ua > ub) ? ua : ub; break;
    case IR_AND: r = ua & ub; break;
    case IR_OR: r = ua | ub; break;
    case IR_XOR: r = ua ^ ub; break;
    case IR_SHL:
    case IR_SHR:
        if ((s && b < 0) || ub >= (uint64_t)bits) return false; /* undefined shift amount */
        if (opc == IR_SHL) r = ua << ub;
        else if (s) r = a < 0 ? ~(~ua >> ub) : ua >> ub; /* arithmetic (a is sign-extended) */
        else r = ua >> ub;
        break;
    default: return false;
    }
    *out = wrap_int(e, r);
    return true;
}

/* f16/bf16/f32 are computed in float, f64 in double; the caller rounds. */
static bool fold_float_bin(IrOpcode opc, IrElem e, double a, double b, double *out)
{
    if (e == IR_F64) {
        switch (opc) {
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
    float x = (float)a, y = (float)b;
    switch (opc) {
    case IR_ADD: *out = x + y; return true;
    case IR_SUB: *out = x - y; return true;
    case IR_MUL: *out = x * y; return true;
    case IR_DIV: *out = x / y; return true;
    case IR_REM: *out = fmodf(x, y); return true;
    case IR_MIN: *out = fminf(x, y); return true;
    case IR_MAX: *out = fmaxf(x, y); return true;
    default: return false;
    }
}

static bool fold_int_un(IrOpcode opc, IrElem e, int64_t a, int64_t *out)
{
    uint64_t ua = (uint64_t)a;
    switch (opc) {
    case IR_NEG: *out = wrap_int(e, 0 - ua); return true;
    case IR_NOT: *out = wrap_int(e, ~ua); return true;
    case IR_ABS: *out = wrap_int(e, ir_elem_is_signed(e) && a < 0 ? 0 - ua : ua); return true;
    default: return false;
    }
}

static bool fold_float_un(IrOpcode opc, IrElem e, double a, double *out)
{
    if (e == IR_F64) {
        switch (opc) {
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
    float x = (float)a;
    switch (opc) {
    case IR_NEG: *out = -x; return true;
    case IR_ABS: *out = fabsf(x); return true;
    case IR_EXP: *out = expf(x); return true;
    case IR_EXP2: *out = exp2f(x); return true;
    case IR_LOG: *out = logf(x); return true;
    case IR_LOG2: *out = log2f(x); return true;
    case IR_SQRT: *out = sqrtf(x); return true;
    case IR_RSQRT: *out = 1.0f / sqrtf(x); return true;
    case IR_TANH: *out = tanhf(x); return true;
    case IR_SIN: *out = sinf(x); return true;
    case IR_COS: *out = cosf(x); return true;
    case IR_FLOOR: *out = floorf(x); return true;
    case IR_CEIL: *out = ceilf(x); return true;
    default: return false;
    }
}

/* cmp of two constants of element type e; NaN compares unordered (only ne is true). */
static bool fold_cmp(IrCmp p, IrElem e, const IrOp *ka, const IrOp *kb, int64_t *out)
{
    int ord; /* -1, 0, 1; 2 = unordered */
    if (ir_elem_is_float(e)) {
        double a = cflt(ka), b = cflt(kb);
        ord = isnan(a) || isnan(b) ? 2 : a < b ? -1 : a > b ? 1 : 0;
    } else if (ir_elem_is_int(e)) {
        int64_t a = cint(ka), b = cint(kb);
        if (ir_elem_is_signed(e)) ord = a < b ? -1 : a > b;
        else ord = (uint64_t)a < (uint64_t)b ? -1 : (uint64_t)a > (uint64_t)b;
    } else {
        return false;
    }
    switch (p) {
    case IR_CMP_EQ: *out = ord == 0; break;
    case IR_CMP_NE: *out = ord != 0; break;
    case IR_CMP_LT: *out = ord == -1; break;
    case IR_CMP_LE: *out = ord == -1 || ord == 0; break;
    case IR_CMP_GT: *out = ord == 1; break;
    case IR_CMP_GE: *out = ord == 1 || ord == 0; break;
    default: return false;
    }
    return true;
}

/* cast of a constant; pointers and undefined conversions are left alone. */
static bool fold_cast(Fold *c, IrOp *op, const IrOp *k)
{
    IrElem se = elem_of(k->res[0]), de = elem_of(op->res[0]);
    if (se == IR_PTR || de == IR_PTR) return false;
    if (ir_elem_is_int(se)) {
        int64_t a = cint(k);
        if (ir_elem_is_float(de)) become_const(c, op, 0, int_to_float(se, a, de));
        else if (de == IR_I1) become_const(c, op, a != 0, 0);
        else become_const(c, op, a, 0);
        return true;
    }
    if (!ir_elem_is_float(se)) return false;
    double x = cflt(k);
    if (ir_elem_is_float(de)) {
        become_const(c, op, 0, x); /* become_const rounds once, from the exact value */
        return true;
    }
    int64_t r;
    if (!float_to_int(x, de, &r)) return false;
    become_const(c, op, r, 0);
    return true;
}

/* An elementwise op whose operands are all constants. */
static bool fold_elementwise(Fold *c, IrOp *op)
{
    IrOp *k[3] = {NULL, NULL, NULL};
    if (op->nargs < 1 || op->nargs > 3 || op->nres != 1) return false;
    for (int i = 0; i < op->nargs; i++)
        if (!(k[i] = const_def(op->args[i]))) return false;
    IrElem e = elem_of(op->args[op->nargs - 1]); /* select: the value type */
    bool flt = ir_elem_is_float(e);
    int64_t ir;
    double fr;
    if (op->op == IR_CMP) {
        if (!fold_cmp((IrCmp)op->attr[0], elem_of(op->args[0]), k[0], k[1], &ir)) return false;
        become_const(c, op, ir, 0);
        return true;
    }
    if (op->op == IR_CAST) return fold_cast(c, op, k[0]);
    if (op->op == IR_SELECT || op->op == IR_ADDPTR) return false; /* canonicalised instead */
    if (!ir_elem_is_float(elem_of(op->res[0])) != !flt) return false;
    if (op->nargs == 2 && !flt && ir_elem_is_int(e) && fold_int_bin(op->op, e, cint(k[0]), cint(k[1]), &ir)) {
        become_const(c, op, ir, 0);
        return true;
    }
    if (op->nargs == 2 && flt && fold_float_bin(op->op, e, cflt(k[0]), cflt(k[1]), &fr)) {
        become_const(c, op, 0, fr);
        return true;
    }
    if (op->nargs == 1 && !flt && ir_elem_is_int(e) && fold_int_un(op->op, e, cint(k[0]), &ir)) {
        become_const(c, op, ir, 0);
        return true;
    }
    if (op->nargs == 1 && flt && fold_float_un(op->op, e, cflt(k[0]), &fr)) {
        become_const(c, op, 0, fr);
        return true;
    }
    return false;
}

/* ---- canonicalisation ---- */

static bool canon_arith(Fold *c, IrOp *op)
{
    IrValue *a = op->args[0], *b = op->args[1];
    IrElem e = elem_of(op->res[0]);
    bool flt = ir_elem_is_float(e), in = ir_elem_is_int(e);
    switch (op->op) {
    case IR_ADD: /* x + (-0.0) == x for every float x; x + 0.0 is not (-0 + 0 = +0) */
        if (in && is_const_int(b, 0)) return replace_with(c, op, a);
        if (in && is_const_int(a, 0)) return replace_with(c, op, b);
        if (flt && is_const_float(b, -0.0)) return replace_with(c, op, a);
        if (flt && is_const_float(a, -0.0)) return replace_with(c, op, b);
        return false;
    case IR_SUB: /* x - (+0.0) == x, -0 included */
        if (in && is_const_int(b, 0)) return replace_with(c, op, a);
        if (flt && is_const_float(b, 0.0)) return replace_with(c, op, a);
        return false;
    case IR_MUL:
        if (in && (is_const_int(a, 0) || is_const_int(b, 0))) {
            become_const(c, op, 0, 0);
            return true;
        }
        if ((in && is_const_int(b, 1)) || (flt && is_const_float(b, 1.0))) return replace_with(c, op, a);
        if ((in && is_const_int(a, 1)) || (flt && is_const_float(a, 1.0))) return replace_with(c, op, b);
        return false;
    case IR_DIV:
        if ((in && is_const_int(b, 1)) || (flt && is_const_float(b, 1.0))) return replace_with(c, op, a);
        return false;
    default: return false;
    }
}

static bool canonicalise(Fold *c, IrOp *op)
{
    switch (op->op) {
    case IR_ADD: case IR_SUB: case IR_MUL: case IR_DIV:
        return canon_arith(c, op);
    case IR_SELECT: {
        IrOp *k = const_def(op->args[0]);
        if (!k) return op->args[1] == op->args[2] && replace_with(c, op, op->args[1]);
        IrValue *v = cint(k) ? op->args[1] : op->args[2];
        if (replace_with(c, op, v)) return true;
        IrOp *kv = const_def(v); /* a scalar constant selected into a tile */
        if (!kv || kv->res[0]->type.elem != op->res[0]->type.elem) return false;
        become_copy_of(c, op, kv);
        return true;
    }
    case IR_CMP: /* x cmp x on integers: decided by the predicate alone */
        if (op->args[0] != op->args[1] || !ir_elem_is_int(elem_of(op->args[0]))) return false;
        switch ((IrCmp)op->attr[0]) {
        case IR_CMP_EQ: case IR_CMP_LE: case IR_CMP_GE: become_const(c, op, 1, 0); return true;
        case IR_CMP_NE: case IR_CMP_LT: case IR_CMP_GT: become_const(c, op, 0, 0); return true;
        default: return false;
        }
    case IR_NEG:
    case IR_NOT: {
        IrOp *d = op->args[0]->def;
        return d && d->op == op->op && d->nargs == 1 && replace_with(c, op, d->args[0]);
    }
    case IR_ADDPTR:
        return is_const_int(op->args[1], 0) && replace_with(c, op, op->args[0]);
    case IR_CAST:
        return replace_with(c, op, op->args[0]); /* only when the types agree */
    default: return false;
    }
}

/* ---- region ops ---- */

/* `for` whose constant bounds run zero times: its results are its inits. */
static bool fold_for(Fold *c, IrOp *op)
{
    if (op->nargs < 3 || op->nargs - 3 != op->nres) return false;
    IrOp *lo = const_def(op->args[0]), *hi = const_def(op->args[1]), *st = const_def(op->args[2]);
    if (!lo || !hi || !st || !ir_elem_is_int(elem_of(op->args[0]))) return false;
    bool s = ir_elem_is_signed(elem_of(op->args[0]));
    int64_t l = cint(lo), h = cint(hi), step = cint(st);
    bool zero_trip = s ? (step > 0 && l >= h) : (step != 0 && (uint64_t)l >= (uint64_t)h);
    if (!zero_trip) return false;
    for (int i = 0; i < op->nres; i++)
        if (!ir_type_eq(op->res[i]->type, op->args[3 + i]->type)) return false;
    for (int i = 0; i < op->nres; i++)
        if (op->res[i]->id < c->nfwd) c->fwd[op->res[i]->id] = op->args[3 + i];
    ir_op_unlink(op);
    c->changed = true;
    return true;
}

/* `if` on a constant: the taken region's ops move before the `if`, whose
 * results become the region's yielded values. Returns the first moved op (to
 * visit next) or the op after the `if`; NULL in *done means "not folded". */
static IrOp *fold_if(Fold *c, IrOp *op, bool *done)
{
    *done = false;
    IrOp *k = const_def(op->args[0]);
    if (!k || op->args[0]->type.rank != 0) return NULL;
    IrBlock *taken = cint(k) ? op->regions[0] : (op->nregions > 1 ? op->regions[1] : NULL);
    IrOp *yield = taken ? taken->last : NULL;
    int ny = yield && yield->op == IR_YIELD ? yield->nargs : 0;
    if (ny != op->nres) return NULL;
    for (int i = 0; i < ny; i++)
        if (!ir_type_eq(op->res[i]->type, yield->args[i]->type)) return NULL;
    IrOp *first = NULL;
    while (taken && taken->first && taken->first != yield) {
        IrOp *m = taken->first;
        ir_op_unlink(m);
        ir_insert_before(op, m);
        if (!first) first = m;
    }
    for (int i = 0; i < ny; i++)
        if (op->res[i]->id < c->nfwd) c->fwd[op->res[i]->id] = yield->args[i];
    IrOp *next = first ? first : op->next;
    ir_op_unlink(op);
    c->changed = true;
    *done = true;
    return next;
}

/* ---- the sweep ---- */

static bool foldable_shape_op(IrOpcode o)
{
    return o == IR_SPLAT || o == IR_BROADCAST || o == IR_EXPAND_DIMS || o == IR_RESHAPE || o == IR_TRANS;
}

/* Visits one op; returns the op to visit next. */
static IrOp *fold_op(Fold *c, IrOp *op)
{
    IrOp *next = op->next;
    for (int i = 0; i < op->nargs; i++) op->args[i] = resolve(c, op->args[i]);
    unsigned fl = ir_op_info[op->op].flags;
    if (op->op == IR_IF) {
        bool done;
        IrOp *n = fold_if(c, op, &done);
        if (done) return n;
    } else if (op->op == IR_FOR && fold_for(c, op)) {
        return next;
    }
    if (fl & IRF_REGIONS) {
        for (int r = 0; r < op->nregions; r++) fold_block(c, op->regions[r]);
        return next;
    }
    if (op->nres != 1 || !(fl & IRF_PURE)) return next;
    if (foldable_shape_op(op->op) && op->nargs == 1) {
        IrOp *k = const_def(op->args[0]);
        if (k && k->res[0]->type.elem == op->res[0]->type.elem) become_copy_of(c, op, k);
        return next;
    }
    if (!(fl & IRF_ELEMWISE)) return next;
    if (!fold_elementwise(c, op)) canonicalise(c, op);
    return next;
}

static void fold_block(Fold *c, IrBlock *b)
{
    for (IrOp *op = b->first; op;) op = fold_op(c, op);
}

void pass_fold(IrFunc *f)
{
    Fold c = {.f = f, .nfwd = f->next_id};
    c.fwd = ARENA_ARRAY(f->arena, IrValue *, f->next_id + 1);
    /* One sweep folds chains (operands are visited first); another round only
     * matters after an `if` was inlined or a loop removed. Bounded for safety. */
    for (int round = 0; round < 8; round++) {
        c.changed = false;
        fold_block(&c, f->body);
        if (!c.changed) break;
    }
}
