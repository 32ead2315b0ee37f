/* fold.c — constant folding and canonicalisation of Tile IR (pass "fold").
 *
 * What it does, in one pre-order sweep per round (rounds repeat until nothing
 * changes):
 *   - an elementwise/scalar pure op whose operands are all CONST becomes a CONST
 *     itself (the op is rewritten in place, so its result value keeps its
 *     identity and no use needs rewriting). The numbers are compiler/ir/eval.c's
 *     (ir_eval_binary & co.), the IR's one definition that the interpreter and
 *     the front end's constant evaluation use too: integers wrap at the element
 *     width, f16/bf16/f32 compute in float and round once to nearest even;
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
 *   - folding never traps: integer division/remainder by zero is left
 *     unfolded (it is a run-time error); everything else the IR defines
 *     (MIN / -1 wraps, shifts by >= the width clamp, float -> int saturates
 *     with NaN -> 0) folds to what a run computes;
 *   - observable float semantics are kept: no x*0 -> 0 for floats, no
 *     reassociation, x+0 is only removed for x + (-0.0) (since -0 + +0 = +0), x-0
 *     only for x - (+0.0); math functions use the host libm in the type's
 *     precision, as the interpreter does (both through ir_eval_unary);
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
#include "compiler/ir/eval.h"

#include <math.h>
#include <string.h>

typedef struct Fold {
    IrFunc *f;
    IrValue **fwd;    /* by value id: the value that replaces it, or NULL */
    int nfwd;
    bool changed;
} Fold;

static void fold_block(Fold *c, IrBlock *b);

/* ---- reading constants ---- */

static IrOp *const_def(IrValue *v) { return v && v->def && v->def->op == IR_CONST ? v->def : NULL; }
static IrElem elem_of(const IrValue *v) { return (IrElem)v->type.elem; }
static int64_t cint(const IrOp *k) { return ir_eval_wrap((IrElem)k->res[0]->type.elem, (uint64_t)k->ival); }
static double cflt(const IrOp *k) { return ir_eval_round((IrElem)k->res[0]->type.elem, k->fval); }

/* A constant's value as the evaluator holds it. */
static IrScalar cval(const IrOp *k)
{
    IrScalar v;
    if (ir_elem_is_float((IrElem)k->res[0]->type.elem)) v.f = cflt(k);
    else v.i = cint(k);
    return v;
}

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
    op->ival = ir_elem_is_float(e) ? 0 : ir_eval_wrap(e, (uint64_t)iv);
    op->fval = ir_elem_is_float(e) ? ir_eval_round(e, fv) : (double)op->ival;
    c->changed = true;
}

/* Turns `op` into the constant v (a value of op's result element type). */
static void become_value(Fold *c, IrOp *op, IrScalar v)
{
    if (ir_elem_is_float(elem_of(op->res[0]))) become_const(c, op, 0, v.f);
    else become_const(c, op, v.i, 0);
}

/* Copies constant `k`'s value into `op` (splat, broadcast, select ...). */
static void become_copy_of(Fold *c, IrOp *op, const IrOp *k) { become_value(c, op, cval(k)); }

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

/* An elementwise op whose operands are all constants. */
static bool fold_elementwise(Fold *c, IrOp *op)
{
    IrOp *k[3] = {NULL, NULL, NULL};
    if (op->nargs < 1 || op->nargs > 3 || op->nres != 1) return false;
    for (int i = 0; i < op->nargs; i++)
        if (!(k[i] = const_def(op->args[i]))) return false;
    IrElem e = elem_of(op->args[0]), re = elem_of(op->res[0]);
    if (e == IR_PTR || re == IR_PTR) return false; /* addresses are run-time values */
    IrScalar r;
    switch (op->op) {
    case IR_CMP:
        if ((unsigned)op->attr[0] > IR_CMP_GE) return false;
        become_const(c, op, ir_eval_cmp((IrCmp)op->attr[0], e, cval(k[0]), cval(k[1])), 0);
        return true;
    case IR_CAST:
        become_value(c, op, ir_eval_cast(e, re, cval(k[0])));
        return true;
    case IR_SELECT: case IR_ADDPTR: return false; /* canonicalised instead */
    default: break;
    }
    if (e != re) return false; /* malformed: leave it to the verifier */
    IrEvalStatus st = op->nargs == 2 ? ir_eval_binary(op->op, e, cval(k[0]), cval(k[1]), &r)
                      : op->nargs == 1 ? ir_eval_unary(op->op, e, cval(k[0]), &r)
                                       : IR_EVAL_UNDEFINED;
    if (st != IR_EVAL_OK) return false; /* x / 0 keeps its run-time error */
    become_value(c, op, r);
    return true;
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
