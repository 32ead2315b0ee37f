/* rescale.c — `rescale(f, a, b)`: the function x -> b * f(a * x, ...) for compile-time
 * floats a and b, with the two factors folded through f's body where that costs nothing.
 *
 * Why: the attention programs keep their scores in log2 units (s2 = log2(e) * sm_scale *
 * q.k, so the softmax can use exp2), while a user's score_mod is written in natural units
 * (FlexAttention's `s - slope * |i - j|`). The programs call rescale(score_mod, LN2, LOG2E):
 * the hook sees ln(2) * s2 = the natural score and its result goes back to log2 units. Done
 * literally that is two multiplies per score; folded, most hooks cost what a hook written
 * in log2 units by hand cost: `s - slope * d` becomes `s2 - (slope * LOG2E) * d` (the
 * factor moves to the scalar), `c * tanh(s * (1 / c))` becomes
 * `(c * LOG2E) * tanh(s2 * (LN2 / c))`, and the default `return s;` becomes s2 itself with
 * no op at all (LN2 * LOG2E rounds to exactly 1 in f32), so programs that take no hook
 * keep their exact code.
 *
 * How: f (or grad(f)) is inlined as any call with x_nat = mul(x, a) as its first argument,
 * then the ops that inlining emitted are walked in order: every value that depends on x
 * gets a rewritten form k * v (a compile-time factor k times a new value v), as grad.c's
 * tangents do. Factors are carried through *, /, neg, abs, shape ops and sums, merged into
 * an operand that is a constant or has fewer elements (a scalar under a splat) where one
 * exists, and otherwise multiplied in before the op that needs the true value (tanh, exp,
 * a comparison with a negative factor, ...), which is re-emitted on it. The originals are
 * left dead for DCE. The result is b * k * v, materialised the same way.
 *
 * Invariants: the rewritten value equals the original up to rounding (reassociated
 * products of constants, at most a few ulps); a value that does not depend on x is
 * shared, never re-emitted, unless a factor is pushed into it; an op with regions that
 * reads x (a runtime if/for in the hook) or with several results stops the rewrite and the
 * result is the literal b * f(a * x) (correct, one or two multiplies per element more).
 *
 * Example: f = `fn alibi(s, b, h, i, j) { return s - slope * abs((i - j).to(f32)); }`,
 * rescale(f, LN2, LOG2E)(s2, ...):
 *     %xn = mul %s2, 0.693       ; dead after the rewrite
 *     %d  = abs ...              ; independent of x: shared
 *     %w  = mul (splat %slope), %d
 *     %r  = sub %xn, %w          ; -> (LN2, sub %s2, %w')  with %w' = mul (splat (mul %slope, 1.4427)), %d
 *   result: LOG2E * LN2 = 1 in f32, so %r' = sub %s2, %w' is returned as is.
 */
#include "sema.h"

#include <math.h>
#include <string.h>

/* A rewritten value: k * v (v NULL: the constant k). */
typedef struct RVal {
    double k;
    IrValue *v;
} RVal;

typedef struct Rescale {
    Sema *s;
    int base, end;     /* ids [base, end) were made by the inlined body */
    RVal *map;         /* by id - base */
    bool *dep;
    bool failed;
} Rescale;

static bool r_in(const Rescale *R, const IrValue *v) { return v->id >= R->base && v->id < R->end; }
static bool r_dep(const Rescale *R, const IrValue *v) { return r_in(R, v) && R->dep[v->id - R->base]; }
static RVal r_of(const Rescale *R, IrValue *v)
{
    return r_dep(R, v) ? R->map[v->id - R->base] : (RVal){1.0, v};
}

static IrValue *r_emit(Rescale *R, const IrOp *at, IrOpcode opc, IrType t, int n, IrValue *const *args)
{
    IrValue *r = sema_emit(R->s, at->loc, opc, t, n, args);
    if (at->op == opc) memcpy(r->def->attr, at->attr, sizeof at->attr);
    return r;
}
static IrValue *r_cst(Rescale *R, const IrOp *at, IrType t, double x)
{
    IrValue *r = sema_emit(R->s, at->loc, IR_CONST, t, 0, NULL);
    r->def->fval = x;
    return r;
}
static bool unit_in(double k, IrType t) { return t.elem == IR_F32 ? (float)k == 1.0f : k == 1.0; }
static bool is_float(const IrValue *v) { return ir_elem_is_float((IrElem)v->type.elem); }

/* v * c without a multiply over all of v's elements, or NULL: through a constant, or into
 * the smaller operand of a splat/broadcast/expand_dims/reshape, a mul, a div's dividend or
 * a negation. A scalar is scaled by one multiply. */
static IrValue *scale_cheap(Rescale *R, const IrOp *at, IrValue *v, double c, int depth)
{
    if (!is_float(v) || depth > 16) return NULL;
    if (unit_in(c, v->type)) return v;
    const IrOp *d = v->def;
    if (d && d->op == IR_CONST) return r_cst(R, at, v->type, d->fval * c);
    if (v->type.rank == 0) return r_emit(R, at, IR_MUL, v->type, 2, (IrValue *[]){v, r_cst(R, at, v->type, c)});
    if (!d) return NULL;
    IrValue *a0 = d->nargs > 0 ? d->args[0] : NULL, *a1 = d->nargs > 1 ? d->args[1] : NULL, *x;
    switch (d->op) {
    case IR_SPLAT: case IR_BROADCAST: case IR_EXPAND_DIMS: case IR_RESHAPE:
        if (!(x = scale_cheap(R, at, a0, c, depth + 1))) return NULL;
        return r_emit(R, d, d->op, v->type, 1, &x);
    case IR_NEG:
        if (!(x = scale_cheap(R, at, a0, c, depth + 1))) return NULL;
        return r_emit(R, d, IR_NEG, v->type, 1, &x);
    case IR_MUL:
        if ((x = scale_cheap(R, at, a1, c, depth + 1))) return r_emit(R, d, IR_MUL, v->type, 2, (IrValue *[]){a0, x});
        if ((x = scale_cheap(R, at, a0, c, depth + 1))) return r_emit(R, d, IR_MUL, v->type, 2, (IrValue *[]){x, a1});
        return NULL;
    case IR_DIV:
        if ((x = scale_cheap(R, at, a0, c, depth + 1))) return r_emit(R, d, IR_DIV, v->type, 2, (IrValue *[]){x, a1});
        return NULL;
    default: return NULL;
    }
}

/* The true value of k * v, as an IR value of type t. */
static IrValue *r_mat(Rescale *R, const IrOp *at, RVal a, IrType t)
{
    if (!a.v) return r_cst(R, at, t, a.k);
    if (unit_in(a.k, a.v->type)) return a.v;
    IrValue *x = scale_cheap(R, at, a.v, a.k, 0);
    return x ? x : r_emit(R, at, IR_MUL, a.v->type, 2, (IrValue *[]){a.v, r_cst(R, at, a.v->type, a.k)});
}

/* An independent value w as (k, w / k) when w / k is cheap; else false. */
static bool r_over(Rescale *R, const IrOp *at, IrValue *w, double k, IrValue **out)
{
    *out = scale_cheap(R, at, w, 1.0 / k, 0);
    return *out != NULL;
}

/* The op re-emitted on the true values of its operands. */
static RVal r_generic(Rescale *R, const IrOp *op)
{
    IrValue *args[8];
    if (op->nargs > 8) { R->failed = true; return (RVal){1.0, NULL}; }
    for (int i = 0; i < op->nargs; i++) {
        RVal a = r_of(R, op->args[i]);
        args[i] = r_mat(R, op, a, op->args[i]->type);
    }
    IrValue *r = r_emit(R, op, op->op, op->res[0]->type, op->nargs, args);
    r->def->ival = op->ival, r->def->fval = op->fval, r->def->sattr = op->sattr;
    return (RVal){1.0, r};
}

/* a OP b where exactly the operands that depend on x are rewritten. */
static RVal r_binary(Rescale *R, const IrOp *op)
{
    IrValue *a = op->args[0], *b = op->args[1], *x;
    bool da = r_dep(R, a), db = r_dep(R, b);
    RVal ra = r_of(R, a), rb = r_of(R, b);
    IrType t = op->res[0]->type;
    if (!is_float(op->res[0]) && op->op != IR_CMP) return r_generic(R, op);
    switch (op->op) {
    case IR_MUL:
        if (da && db) return (RVal){ra.k * rb.k, r_emit(R, op, IR_MUL, t, 2, (IrValue *[]){ra.v, rb.v})};
        if (da) return (RVal){ra.k, r_emit(R, op, IR_MUL, t, 2, (IrValue *[]){ra.v, b})};
        return (RVal){rb.k, r_emit(R, op, IR_MUL, t, 2, (IrValue *[]){a, rb.v})};
    case IR_DIV:
        if (da && db) return (RVal){ra.k / rb.k, r_emit(R, op, IR_DIV, t, 2, (IrValue *[]){ra.v, rb.v})};
        if (da) return (RVal){ra.k, r_emit(R, op, IR_DIV, t, 2, (IrValue *[]){ra.v, b})};
        return (RVal){1.0 / rb.k, r_emit(R, op, IR_DIV, t, 2, (IrValue *[]){a, rb.v})};
    case IR_ADD: case IR_SUB: case IR_MIN: case IR_MAX:
        if ((op->op == IR_MIN || op->op == IR_MAX) && ((da && ra.k <= 0) || (db && rb.k <= 0))) break;
        if (da && db && ra.k == rb.k) return (RVal){ra.k, r_emit(R, op, op->op, t, 2, (IrValue *[]){ra.v, rb.v})};
        if (da && !db && r_over(R, op, b, ra.k, &x)) return (RVal){ra.k, r_emit(R, op, op->op, t, 2, (IrValue *[]){ra.v, x})};
        if (db && !da && r_over(R, op, a, rb.k, &x)) return (RVal){rb.k, r_emit(R, op, op->op, t, 2, (IrValue *[]){x, rb.v})};
        break;
    case IR_CMP: {
        if (!da || db || ra.k <= 0 || !r_over(R, op, b, ra.k, &x)) break;
        IrValue *r = r_emit(R, op, IR_CMP, t, 2, (IrValue *[]){ra.v, x});
        return (RVal){1.0, r};
    }
    default: break;
    }
    return r_generic(R, op);
}

/* where(c, a, b): both sides under one factor when one side's factor is cheap to take. */
static RVal r_select(Rescale *R, const IrOp *op)
{
    IrValue *a = op->args[1], *b = op->args[2], *x, *c = r_mat(R, op, r_of(R, op->args[0]), op->args[0]->type);
    bool da = r_dep(R, a), db = r_dep(R, b);
    RVal ra = r_of(R, a), rb = r_of(R, b);
    IrType t = op->res[0]->type;
    if (is_float(op->res[0])) {
        if (da && db && ra.k == rb.k) return (RVal){ra.k, r_emit(R, op, IR_SELECT, t, 3, (IrValue *[]){c, ra.v, rb.v})};
        if (da && !db && r_over(R, op, b, ra.k, &x))
            return (RVal){ra.k, r_emit(R, op, IR_SELECT, t, 3, (IrValue *[]){c, ra.v, x})};
        if (db && !da && r_over(R, op, a, rb.k, &x))
            return (RVal){rb.k, r_emit(R, op, IR_SELECT, t, 3, (IrValue *[]){c, x, rb.v})};
    }
    return r_generic(R, op);
}

static void r_op(Rescale *R, const IrOp *op)
{
    bool any = false;
    for (int i = 0; i < op->nargs; i++) any |= r_dep(R, op->args[i]);
    if (op->nregions) {
        for (int r = 0; r < op->nregions && !any; r++)
            for (const IrOp *o = op->regions[r]->first; o && !any; o = o->next)
                for (int i = 0; i < o->nargs; i++) any |= r_dep(R, o->args[i]);
        if (any) R->failed = true;   /* nested regions of regions: the generic fallback below is never reached */
        return;
    }
    if (!any || op->nres == 0) return;
    if (op->nres != 1) { R->failed = true; return; }
    RVal out;
    IrValue *a0 = op->args[0];
    RVal r0 = r_of(R, a0);
    switch (op->op) {
    case IR_NEG:   /* folds into the factor */
        out = is_float(a0) ? (RVal){-r0.k, r0.v} : r_generic(R, op);
        break;
    case IR_SELECT:
        out = r_select(R, op);
        break;
    case IR_ABS:
        out = (RVal){fabs(r0.k), r_emit(R, op, IR_ABS, op->res[0]->type, 1, &r0.v)};
        break;
    case IR_SPLAT: case IR_BROADCAST: case IR_EXPAND_DIMS: case IR_RESHAPE: case IR_TRANS:
        out = (RVal){r0.k, r_emit(R, op, op->op, ir_type_with_elem(op->res[0]->type, (IrElem)r0.v->type.elem), 1,
                                  &r0.v)};
        break;
    case IR_REDUCE:
        if (op->attr[1] == IR_RED_SUM || ((op->attr[1] == IR_RED_MAX || op->attr[1] == IR_RED_MIN) && r0.k > 0)) {
            out = (RVal){r0.k, r_emit(R, op, IR_REDUCE, op->res[0]->type, 1, &r0.v)};
            break;
        }
        out = r_generic(R, op);
        break;
    default:
        out = op->nargs == 2 ? r_binary(R, op) : r_generic(R, op);
        break;
    }
    IrValue *y = op->res[0];
    R->dep[y->id - R->base] = true;
    R->map[y->id - R->base] = out;
}

Val sema_inline_rescaled(Sema *s, const Val *f, Val *args, SrcLoc loc)
{
    const AstDecl *fn = f->fn;
    Val *x = &args[0];
    if (x->kind == V_ERR || !sema_want_value(s, x)) return val_err();
    IrType xt = sema_val_type(x);
    if (!ir_elem_is_float((IrElem)xt.elem)) {
        diag_error(s->diag, x->loc, "rescale(%s): the argument '%s' must be a float value, got %s", fn->name,
                   fn->params[0].name, sema_val_desc(s, x));
        return val_err();
    }
    IrValue *x0 = x->kind == V_CONST ? sema_materialize(s, x, x->loc) : x->v;
    IrOp at = {.loc = loc};
    int base = s->b.f->next_id;
    Rescale R = {.s = s, .base = base};
    IrValue *ka = r_cst(&R, &at, x0->type, f->rescale_in);
    IrValue *xn = sema_emit(s, loc, IR_MUL, x0->type, 2, (IrValue *[]){x0, ka});
    IrBlock *blk = s->b.block;
    IrOp *mark = s->b.before ? s->b.before->prev : blk->last;
    args[0] = val_rt(xn, x->loc);
    Val r = f->grad ? sema_inline_grad(s, fn, args, f->grad, loc) : sema_inline_call(s, fn, args, loc);
    if (r.kind == V_ERR) return r;
    double out = f->rescale_out;
    if (r.kind == V_CONST && ir_elem_is_float((IrElem)r.type.elem)) return cv_float(r.f * out, (IrElem)r.type.elem,
                                                                                     r.untyped, loc);
    if (r.kind != V_RT || !is_float(r.v)) {
        diag_error(s->diag, loc, "rescale(%s): '%s' must return a float value, got %s", fn->name, fn->name,
                   sema_val_desc(s, &r));
        return val_err();
    }
    R.end = s->b.f->next_id;
    int n = R.end - R.base;
    R.map = ARENA_ARRAY(s->arena, RVal, n ? n : 1);
    R.dep = ARENA_ARRAY(s->arena, bool, n ? n : 1);
    memset(R.dep, 0, sizeof(bool) * (size_t)(n ? n : 1));
    R.dep[xn->id - base] = true;
    R.map[xn->id - base] = (RVal){f->rescale_in, x0};
    IrOp *last = s->b.before ? s->b.before->prev : blk->last;
    for (IrOp *op = mark ? mark->next : blk->first; op && !R.failed; op = op->next) {
        r_op(&R, op);
        if (op == last) break;
    }
    RVal res = r_of(&R, r.v);
    if (R.failed) res = (RVal){1.0, r.v};
    res.k *= out;
    return val_rt(r_mat(&R, &at, res, r.v->type), loc);
}

/* rescale(f, a, b): the function value x -> b * f(a * x, ...). */
Val bi_rescale(Sema *s, const Builtin *bi, BArgs *a, const AstExpr *call)
{
    (void)bi;
    Val f = a->v[0];
    if (f.kind != V_FN) {
        diag_error(s->diag, f.loc, "rescale expects a helper function (fn), got %s", sema_val_desc(s, &f));
        return val_err();
    }
    if (f.rescaled) {
        diag_error(s->diag, f.loc, "rescale(%s, ...): '%s' is already rescaled; combine the factors", f.s, f.s);
        return val_err();
    }
    if (f.fn->nparams < 1) {
        diag_error(s->diag, f.loc, "rescale(%s): '%s' has no parameter to scale", f.s ? f.s : f.fn->name,
                   f.fn->name);
        return val_err();
    }
    double k[2];
    for (int i = 1; i <= 2; i++) {
        Val *v = &a->v[i];
        if (v->kind != V_CONST || !(ir_elem_is_float((IrElem)v->type.elem) || cv_is_int(v)) ||
            !isfinite(cv_as_double(v)) || cv_as_double(v) == 0.0) {
            diag_error(s->diag, v->loc, "rescale: the %s factor must be a finite, nonzero compile-time number",
                       i == 1 ? "argument's" : "result's");
            return val_err();
        }
        k[i - 1] = cv_as_double(v);
    }
    f.rescaled = true;
    f.rescale_in = k[0];
    f.rescale_out = k[1];
    f.s = arena_printf(s->arena, "rescale(%s)", f.s ? f.s : f.fn->name);
    f.loc = call->loc;
    return f;
}
