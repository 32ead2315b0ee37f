/* grad.c — `grad(f)`: the derivative of a helper with respect to its first
 * argument, by forward-mode symbolic differentiation of the inlined body.
 *
 * What: calling `g = grad(f)` as `g(x, a, b)` inlines `f(x, a, b)` as any call
 * does, then walks the Tile IR ops that inlining emitted, in order, giving each
 * op whose operands depend on x a tangent (d op / d x) built from its
 * operands' tangents by the op's rule (add, mul, div, exp2, tanh, select, cast,
 * ...). The call's value is the tangent of f's result. Everything else f reads
 * (the other arguments, loads, program_id) is a constant with respect to x.
 * A tangent is a compile-time factor times a value, or a constant: constants of
 * the body fold into the factor (the tangent of s * 0.5 is the constant 0.5, of
 * tanh(s * 0.5) it is 0.5 * (1 - t*t)), zero and one cost nothing, and a factor
 * is multiplied in only where it is not 1 in the value's type. So
 * `grad(fn(s, ...) { return s; })` is the untyped literal 1.0, exactly what a
 * hand-written `return 1.0;` gives (the shipped backward's default keeps its
 * code), and the derivative of 2 * tanh(s * 0.5) is the op sequence of a
 * hand-written 1 - t*t. The tangent ops reuse the primal values (tanh's reads t):
 * when the caller also calls f on the same arguments, CSE (compiler/passes/cse.c)
 * merges the two copies of f's body. grad(grad(f)) differentiates the
 * derivative's ops the same way.
 *
 * Invariants: a tangent's value has its primal value's type; tangent ops
 * are inserted after the inlined body at the builder's cursor and carry the
 * SrcLoc of the op they differentiate; an op the differentiator cannot handle
 * when it depends on x — no rule (a max/min reduction), a load or atomic whose
 * address depends on x, a runtime if/for whose condition, bounds or body reads
 * x — is an error at that op's location in f, naming the op, with a note at
 * the call; integer, boolean and pointer results have a zero tangent (they are
 * piecewise constant in x), so comparisons, casts to ints and index arithmetic
 * need no rule.
 *
 * Example: `fn sc(s, b) { let c = 43.3; return c * tanh(s * (1.0 / c)); }`
 *     %u = mul %s, %k        ; inlined f: %k = const 1/c, %c = const c
 *     %t = tanh %u
 *     %y = mul %c, %t
 *   grad(sc): tangent of %u is the constant k, of %t k * %w, of %y (c k) * %w, with
 *     %t2 = mul %t, %t ; %w = sub %one, %t2   (and `mul %w, %ck` only if c k != 1 in f32)
 */
#include "sema.h"

#include <string.h>

/* A tangent is k * v: a compile-time factor times a value, or (v NULL) the constant k.
 * Constants of the body fold into k instead of costing a multiply per element. */
typedef struct Tan {
    double k;
    IrValue *v;
} Tan;

typedef struct Diff {
    Sema *s;
    const AstDecl *fn;
    SrcLoc call;
    IrValue *seed;   /* x */
    int base, end;   /* ids [base, end) were made by the inlined body */
    Tan *tan;        /* by id - base */
    bool *dep;       /* by id - base: depends on x */
    bool failed;
    const char *wrt; /* param_grads: the differentiable param whose load is x (messages) */
} Diff;

static const Tan ZERO = {0.0, NULL}, ONE = {1.0, NULL};
static Tan tv(IrValue *v) { return (Tan){1.0, v}; }
static bool is_zero(Tan a) { return !a.v && a.k == 0.0; }
static bool is_const(Tan a) { return !a.v; }

/* The value of a float constant (a splat), for folding into a factor. */
static bool const_value(const IrValue *x, double *out)
{
    if (!x->def || x->def->op != IR_CONST || !ir_elem_is_float((IrElem)x->type.elem)) return false;
    *out = x->def->fval;
    return true;
}

static bool in_body(const Diff *D, const IrValue *v) { return v->id >= D->base && v->id < D->end; }
static bool dep_of(const Diff *D, const IrValue *v)
{
    return v == D->seed || (in_body(D, v) && D->dep[v->id - D->base]);
}
static Tan tan_of(const Diff *D, const IrValue *v)
{
    if (v == D->seed) return ONE;
    return in_body(D, v) ? D->tan[v->id - D->base] : ZERO;
}

static const char *param_name(const Diff *D) { return D->wrt ? D->wrt : D->fn->params[0].name; }

/* "grad(f): cannot differentiate 'op' with respect to 'x': why", at the op. */
static void fail(Diff *D, const IrOp *op, const char *what, const char *why)
{
    if (D->failed) return;
    D->failed = true;
    diag_error(D->s->diag, op->loc, "%s(%s): cannot differentiate '%s' with respect to '%s': %s",
               D->wrt ? "param_grads" : "grad", D->fn->name, what, param_name(D), why);
    diag_note(D->s->diag, D->call, "the derivative of '%s' is taken here", D->fn->name);
}

/* ---- emitting tangent arithmetic ---- */
static IrValue *emit(Diff *D, const IrOp *at, IrOpcode opc, IrType t, int n, IrValue *const *args)
{
    return sema_emit(D->s, at->loc, opc, t, n, args);
}
static IrValue *emit2(Diff *D, const IrOp *at, IrOpcode opc, IrValue *a, IrValue *b)
{
    return emit(D, at, opc, a->type, 2, (IrValue *[]){a, b});
}
static IrValue *cst(Diff *D, const IrOp *at, IrType t, double x)
{
    IrValue *r = emit(D, at, IR_CONST, t, 0, NULL);
    r->def->fval = x;
    return r;
}
static IrValue *cmp(Diff *D, const IrOp *at, IrCmp c, IrValue *a, IrValue *b)
{
    IrValue *r = emit(D, at, IR_CMP, ir_type_with_elem(a->type, IR_I1), 2, (IrValue *[]){a, b});
    r->def->attr[0] = c;
    return r;
}
/* k as a constant of type t is exactly 1 (then k * v is v). */
static bool unit_in(double k, IrType t)
{
    return t.elem == IR_F32 ? (float)k == 1.0f : k == 1.0;
}
static IrValue *mat(Diff *D, const IrOp *at, Tan a, IrType t)
{
    if (!a.v) return cst(D, at, t, a.k);
    if (unit_in(a.k, t)) return a.v;
    return emit2(D, at, IR_MUL, a.v, cst(D, at, t, a.k));
}
static Tan t_add(Diff *D, const IrOp *at, Tan a, Tan b, IrType t)
{
    if (is_zero(a)) return b;
    if (is_zero(b)) return a;
    if (a.v == b.v) return (Tan){a.k + b.k, a.v};
    IrValue *x = mat(D, at, a, t), *y = mat(D, at, b, t);
    return tv(emit2(D, at, IR_ADD, x, y));
}
static Tan t_neg(Tan a) { return (Tan){-a.k, a.v}; }
static Tan t_sub(Diff *D, const IrOp *at, Tan a, Tan b, IrType t)
{
    if (is_zero(b)) return a;
    if (is_zero(a) || a.v == b.v) return t_add(D, at, a, t_neg(b), t);
    IrValue *x = mat(D, at, a, t), *y = mat(D, at, b, t);
    return tv(emit2(D, at, IR_SUB, x, y));
}
/* a * x for a value x of the tangent's type */
static Tan t_mul(Diff *D, const IrOp *at, Tan a, IrValue *x)
{
    double c;
    if (is_zero(a)) return a;
    if (const_value(x, &c)) return (Tan){a.k * c, a.v};
    return (Tan){a.k, a.v ? emit2(D, at, IR_MUL, a.v, x) : x};
}
static Tan t_div(Diff *D, const IrOp *at, Tan a, IrValue *x)
{
    double c;
    if (is_zero(a)) return a;
    if (const_value(x, &c)) return (Tan){a.k / c, a.v};
    if (!a.v) return tv(emit2(D, at, IR_DIV, cst(D, at, x->type, a.k), x));
    return (Tan){a.k, emit2(D, at, IR_DIV, a.v, x)};
}
static Tan t_scale(Tan a, double c) { return (Tan){a.k * c, a.v}; }
static Tan t_select(Diff *D, const IrOp *at, IrValue *c, Tan a, Tan b, IrType t)
{
    if (a.v == b.v && a.k == b.k) return a;
    IrValue *x = mat(D, at, a, t), *y = mat(D, at, b, t);
    return tv(emit(D, at, IR_SELECT, t, 3, (IrValue *[]){c, x, y}));
}
/* A reduction or a shape op (splat, broadcast, expand_dims, reshape, trans) on a tangent:
 * a shape op keeps a constant's value and commutes with the factor. */
static Tan t_clone(Diff *D, const IrOp *op, Tan a)
{
    if (is_zero(a)) return a;
    bool shape = op->op != IR_REDUCE;
    if (shape && !a.v) return a;
    IrValue *x = shape ? a.v : mat(D, op, a, op->args[0]->type);
    IrValue *r = emit(D, op, op->op, shape ? ir_type_with_elem(op->res[0]->type, (IrElem)x->type.elem)
                                           : op->res[0]->type, 1, &x);
    memcpy(r->def->attr, op->attr, sizeof op->attr);
    return (Tan){shape ? a.k : 1.0, r};
}

/* ---- the rules ---- */
#define LN2 0.6931471805599453

/* d/dx of a binary elementwise op y = a OP b. */
static Tan rule_binary(Diff *D, const IrOp *op, Tan ta, Tan tb, bool *known)
{
    IrValue *a = op->args[0], *b = op->args[1], *y = op->res[0];
    IrType t = y->type;
    switch (op->op) {
    case IR_ADD: return t_add(D, op, ta, tb, t);
    case IR_SUB: return t_sub(D, op, ta, tb, t);
    case IR_MUL: {
        Tan u = t_mul(D, op, ta, b);
        return t_add(D, op, u, t_mul(D, op, tb, a), t);
    }
    case IR_DIV: /* (ta - y tb) / b */
        return t_div(D, op, t_sub(D, op, ta, t_mul(D, op, tb, y), t), b);
    case IR_REM: { /* a - trunc(a / b) b, with trunc(a / b) = (a - y) / b */
        if (is_zero(tb)) return ta;
        IrValue *q = emit2(D, op, IR_DIV, emit2(D, op, IR_SUB, a, y), b);
        return t_sub(D, op, ta, t_mul(D, op, tb, q), t);
    }
    case IR_MIN: case IR_MAX: /* the tangent of the operand taken (a on ties) */
        return t_select(D, op, cmp(D, op, op->op == IR_MIN ? IR_CMP_LE : IR_CMP_GE, a, b), ta, tb, t);
    default: *known = false; return ZERO;
    }
}

/* d/dx of a unary math op y = g(a). */
static Tan rule_unary(Diff *D, const IrOp *op, Tan ta, bool *known)
{
    IrValue *a = op->args[0], *y = op->res[0];
    IrType t = y->type;
    switch (op->op) {
    case IR_NEG: return t_neg(ta);
    case IR_EXP: return t_mul(D, op, ta, y);
    case IR_EXP2: return t_mul(D, op, t_scale(ta, LN2), y);
    case IR_LOG: return t_div(D, op, ta, a);
    case IR_LOG2: return t_div(D, op, t_scale(ta, 1.0 / LN2), a);
    case IR_SQRT: return t_div(D, op, t_scale(ta, 0.5), y);               /* 1 / (2 sqrt a) */
    case IR_RSQRT: return t_div(D, op, t_mul(D, op, t_scale(ta, -0.5), y), a); /* -y / (2a) */
    case IR_ABS: {
        IrValue *zero = cst(D, op, t, 0.0);
        return t_select(D, op, cmp(D, op, IR_CMP_LT, a, zero), t_neg(ta), ta, t);
    }
    case IR_TANH: { /* 1 - y^2 */
        IrValue *yy = emit2(D, op, IR_MUL, y, y);
        return t_mul(D, op, ta, emit2(D, op, IR_SUB, cst(D, op, t, 1.0), yy));
    }
    case IR_SIN: return t_mul(D, op, ta, emit(D, op, IR_COS, t, 1, &a));
    case IR_COS: return t_neg(t_mul(D, op, ta, emit(D, op, IR_SIN, t, 1, &a)));
    case IR_FLOOR: case IR_CEIL: return ZERO; /* piecewise constant */
    case IR_CAST: /* between float types: the tangent rounded alike */
        if (is_const(ta)) return ta;
        return (Tan){ta.k, emit(D, op, IR_CAST, t, 1, &ta.v)};
    case IR_SPLAT: case IR_BROADCAST: case IR_EXPAND_DIMS: case IR_RESHAPE: case IR_TRANS:
        return t_clone(D, op, ta);
    default: *known = false; return ZERO;
    }
}

/* dot(a, b, acc): bilinear. */
static Tan rule_dot(Diff *D, const IrOp *op)
{
    IrValue *a = op->args[0], *b = op->args[1];
    IrType t = op->res[0]->type;
    Tan ta = tan_of(D, a), tb = tan_of(D, b), r = tan_of(D, op->args[2]);
    if (!is_zero(ta)) {
        IrValue *da = mat(D, op, ta, a->type), *zero = cst(D, op, t, 0);
        IrValue *args[3] = {da, b, zero};
        r = t_add(D, op, r, tv(emit(D, op, IR_DOT, t, 3, args)), t);
    }
    if (!is_zero(tb)) {
        IrValue *db = mat(D, op, tb, b->type), *zero = cst(D, op, t, 0);
        IrValue *args[3] = {a, db, zero};
        r = t_add(D, op, r, tv(emit(D, op, IR_DOT, t, 3, args)), t);
    }
    return r;
}

/* True when an op of `blk` (nested regions included) reads a value that depends on x. */
static bool block_reads_dep(const Diff *D, const IrBlock *blk)
{
    for (const IrOp *o = blk->first; o; o = o->next) {
        for (int i = 0; i < o->nargs; i++)
            if (dep_of(D, o->args[i])) return true;
        for (int r = 0; r < o->nregions; r++)
            if (block_reads_dep(D, o->regions[r])) return true;
    }
    return false;
}

static void set_tan(Diff *D, const IrValue *v, Tan t)
{
    D->dep[v->id - D->base] = true;
    D->tan[v->id - D->base] = t;
}

static void diff_op(Diff *D, const IrOp *op)
{
    bool any = false;
    for (int i = 0; i < op->nargs; i++) any |= dep_of(D, op->args[i]);
    const char *name = ir_op_info[op->op].name;
    if (op->nregions) {
        for (int r = 0; r < op->nregions && !any; r++) any = block_reads_dep(D, op->regions[r]);
        if (any)
            fail(D, op, op->op == IR_IF ? "if" : "for",
                 "the differentiator does not follow runtime control flow; compute both sides and pick "
                 "one with where(...)");
        return;
    }
    if (!any || op->nres == 0) return;   /* independent of x, or a store */
    const IrValue *y = op->res[0];
    if ((op->op == IR_LOAD || op->op == IR_ATOMIC_ADD) && dep_of(D, op->args[0])) {
        fail(D, op, name, "its address depends on it (a lookup by value has no derivative)");
        return;
    }
    if (!ir_elem_is_float((IrElem)y->type.elem)) { /* piecewise constant: ints, bools, pointers */
        set_tan(D, y, ZERO);
        return;
    }
    bool known = true;
    Tan t = ZERO;
    if (op->op == IR_LOAD) {   /* where(mask, *ptr, other): other's tangent where masked off */
        Tan to = op->nargs == 3 ? tan_of(D, op->args[2]) : ZERO;
        t = is_zero(to) ? ZERO : t_select(D, op, op->args[1], ZERO, to, y->type);
    } else if (op->op == IR_ATOMIC_ADD) {
        t = ZERO;              /* the old value in memory */
    } else if (op->op == IR_DOT) {
        t = rule_dot(D, op);
    } else if (op->op == IR_REDUCE) {
        if (op->attr[1] == IR_RED_SUM) t = t_clone(D, op, tan_of(D, op->args[0]));
        else known = false;
    } else if (op->op == IR_SELECT) {
        t = t_select(D, op, op->args[0], tan_of(D, op->args[1]), tan_of(D, op->args[2]), y->type);
    } else if (op->nargs == 2) {
        t = rule_binary(D, op, tan_of(D, op->args[0]), tan_of(D, op->args[1]), &known);
    } else if (op->nargs == 1) {
        t = rule_unary(D, op, tan_of(D, op->args[0]), &known);
    } else {
        known = false;
    }
    if (!known) {
        const char *what = op->op != IR_REDUCE ? name
                           : arena_printf(D->s->arena, "%s(...)", ir_reduce_name((IrReduce)op->attr[1]));
        fail(D, op, what, "the differentiator has no rule for it");
        return;
    }
    set_tan(D, y, t);
}

/* The Val of y's derivative t: a constant one is an untyped literal (1.0, 0.0, ...). */
static Val tan_val(Diff *D, const IrValue *y, Tan t, SrcLoc loc)
{
    if (!t.v) return cv_float(t.k, IR_F32, true, loc);
    IrOp at = {.loc = loc};
    return val_rt(mat(D, &at, t, y->type), loc);
}

/* The seed: the first argument as a runtime float value (a constant is materialised,
 * so that f's ops on it are emitted and can be differentiated). */
static bool seed_arg(Sema *s, const AstDecl *fn, Val *x)
{
    if (fn->params[0].is_const) {
        diag_error(s->diag, x->loc, "grad(%s): its first parameter '%s' is const; grad differentiates with "
                   "respect to a runtime value", fn->name, fn->params[0].name);
        return false;
    }
    if (x->kind == V_ERR || !sema_want_value(s, x)) return false;
    IrType t = sema_val_type(x);
    if (!ir_elem_is_float((IrElem)t.elem)) {
        diag_error(s->diag, x->loc, "grad(%s): the argument '%s' must be a float value (the derivative is taken "
                   "with respect to it), got %s", fn->name, fn->params[0].name, sema_val_desc(s, x));
        return false;
    }
    if (x->kind == V_CONST) *x = val_rt(sema_materialize(s, x, x->loc), x->loc);
    return true;
}

/* Every use of `from` in op (nested regions included) becomes `to`. */
static void replace_in_op(IrOp *op, IrValue *from, IrValue *to)
{
    for (int i = 0; i < op->nargs; i++)
        if (op->args[i] == from) op->args[i] = to;
    for (int r = 0; r < op->nregions; r++)
        for (IrOp *o = op->regions[r]->first; o; o = o->next) replace_in_op(o, from, to);
}

static Val differentiate(Diff *D, Val r, IrOp *first, SrcLoc loc);

/* The tangents of the ops [first, last] (first NULL: none), in order. */
static void diff_ops(Diff *D, IrOp *first, IrOp *last)
{
    Sema *s = D->s;
    const AstDecl *fn = D->fn;
    for (IrOp *op = first; op && !D->failed; op = op->next) {
        diff_op(D, op);
        /* Each grad of a grad differentiates every op of the one inside: the ops grow
         * geometrically with the nesting (16 deep: tens of GB). The kernel-size limit the
         * inliner applies (SEMA_MAX_KERNEL_OPS) applies to what grad emits too. */
        if (s->kernel_ops > SEMA_MAX_KERNEL_OPS) {
            if (!s->inline_budget_reported)
                diag_error(s->diag, D->call, "the kernel is too large after differentiating: %s's derivative "
                           "takes more than %d operations (each grad of a grad differentiates all of it; "
                           "nest grad less deeply)", fn->name, SEMA_MAX_KERNEL_OPS);
            s->inline_budget_reported = true;
            D->failed = true;
        }
        if (op == last) break;
    }
}

Val sema_inline_grad(Sema *s, const AstDecl *fn, Val *args, int order, SrcLoc loc)
{
    if (fn->nparams < 1) {
        diag_error(s->diag, loc, "grad(%s): '%s' has no parameter to differentiate with respect to", fn->name,
                   fn->name);
        return val_err();
    }
    if (!seed_arg(s, fn, &args[0])) return val_err();
    /* x is bound to a fresh placeholder value: another argument may be the same
     * IrValue (f(s, s)) and must stay a constant. Its uses become x at the end. */
    IrValue *x = args[0].v, *seed = ir_value_new(s->b.f, x->type);
    seed->name = x->name;
    args[0].v = seed;
    IrBlock *blk = s->b.block;
    IrOp *mark = s->b.before ? s->b.before->prev : blk->last;
    Diff D = {.s = s, .fn = fn, .call = loc, .seed = seed, .base = s->b.f->next_id};
    Val r = order > 1 ? sema_inline_grad(s, fn, args, order - 1, loc) : sema_inline_call(s, fn, args, loc);
    IrOp *first = mark ? mark->next : blk->first, *stop = s->b.before;
    Val d = differentiate(&D, r, first == stop ? NULL : first, loc);
    for (IrOp *op = first; op != stop; op = op->next) replace_in_op(op, seed, x);
    if (d.kind == V_RT && d.v == seed) d.v = x;
    return d;
}

/* The derivative of the inlined body's result r; `first` is its first op (NULL: none). */
static Val differentiate(Diff *D, Val r, IrOp *first, SrcLoc loc)
{
    Sema *s = D->s;
    const AstDecl *fn = D->fn;
    if (r.kind == V_ERR) return r;
    if (r.kind == V_CONST) return cv_float(0.0, IR_F32, true, loc);
    if (r.kind != V_RT) {
        diag_error(s->diag, loc, "grad(%s): '%s' returns %s; it must return a value", fn->name, fn->name,
                   sema_val_desc(s, &r));
        return val_err();
    }
    D->end = s->b.f->next_id;
    int n = D->end - D->base;
    D->tan = ARENA_ARRAY(s->arena, Tan, n ? n : 1);
    D->dep = ARENA_ARRAY(s->arena, bool, n ? n : 1);
    memset(D->tan, 0, sizeof(Tan) * (size_t)(n ? n : 1));
    memset(D->dep, 0, sizeof(bool) * (size_t)(n ? n : 1));
    /* the body's ops end where the tangent ops begin: at the builder's cursor */
    IrOp *last = s->b.before ? s->b.before->prev : s->b.block->last;
    diff_ops(D, first, last);
    if (D->failed) return val_err();
    return tan_val(D, r.v, tan_of(D, r.v), loc);
}

/* grad(f): f's derivative with respect to its first argument, a function value. */
Val bi_grad(Sema *s, const Builtin *bi, BArgs *a, const AstExpr *call)
{
    (void)bi;
    Val f = a->v[0];
    if (f.kind != V_FN) {
        diag_error(s->diag, f.loc, "grad expects a helper function (fn), got %s", sema_val_desc(s, &f));
        return val_err();
    }
    if (f.rescaled) {
        diag_error(s->diag, f.loc, "grad(%s): write rescale(grad(...), ...) instead (the derivative of a rescaled "
                   "function is the rescaled derivative times both factors)", f.s);
        return val_err();
    }
    if (f.fn->nparams < 1) {
        diag_error(s->diag, f.loc, "grad(%s): '%s' has no parameter to differentiate with respect to",
                   f.s ? f.s : f.fn->name, f.fn->name);
        return val_err();
    }
    f.grad++;
    f.s = arena_printf(s->arena, "grad(%s)", f.s ? f.s : f.fn->name);
    f.loc = call->loc;
    return f;
}

/* ---- param_grads: the gradients of a hook's differentiable params ----
 *
 * `param_grads(f, slot, dt, s, b, h, q_idx, kv_idx[, atomic])` inlines f(s, b, h, q_idx, kv_idx) and,
 * for every load of f from a differentiable param X (`param X: *f32 differentiable;`),
 * takes the derivative of f's result with respect to the loaded value (forward mode, as
 * grad does, seeded at the load), multiplies it by dt (dL/d(f's result), elementwise) and
 * hands (this program's scratch row of X, X's size, the load's element offsets, the products)
 * to the library helper attn_param_grad_acc (lang/lib/attention_bwd.tile), which adds each
 * product to the row at its offset in a fixed order. The row is X__grad + slot * X__numel:
 * two kernel parameters the call binds (jit/attention_bwd_params.c); with `atomic` (a const
 * bool) the row is X__grad itself and attn_param_grad_atomic adds each element with an f32
 * atomic (not deterministic). A load's address must be
 * X plus integer offsets (`load(X + h * 32 + bucket(...))`); a masked load's derivative is 0
 * where masked off. Errors are located: no differentiable param, one that f never loads, an
 * address the differentiator cannot follow, an op on the path to f's result with no rule. */

const char *const lang_gen_param_suffix[LANG_GEN_COUNT] = {"__grad", "__numel"};

bool lang_gen_param_split(const char *name, LangGenParam *which, size_t *base_len)
{
    size_t n = strlen(name);
    for (int k = 0; k < LANG_GEN_COUNT; k++) {
        size_t m = strlen(lang_gen_param_suffix[k]);
        if (n > m && !strcmp(name + n - m, lang_gen_param_suffix[k])) {
            *which = (LangGenParam)k;
            *base_len = n - m;
            return true;
        }
    }
    return false;
}

/* Kernel parameter `name` of type t: found, or added (once per kernel). */
static IrValue *kernel_param(Sema *s, IrType t, const char *name)
{
    for (int i = 0; i < s->f->nparams; i++)
        if (s->f->params[i]->name && !strcmp(s->f->params[i]->name, name)) return s->f->params[i];
    return ir_func_add_param(s->f, t, name);
}

/* Does v depend on `root` (through its defining ops)? */
static bool reaches(const IrValue *v, const IrValue *root, int depth)
{
    if (v == root) return true;
    if (!v->def || depth > 64) return false;
    for (int i = 0; i < v->def->nargs; i++)
        if (reaches(v->def->args[i], root, depth + 1)) return true;
    return false;
}

/* The element offsets of a load address `root + o1 + o2 + ...` (splats and broadcasts of the
 * pointer between): their sum, as a Val; false when the address is not of that form. */
static bool load_offset(Sema *s, const IrValue *addr, const IrValue *root, Val *off, SrcLoc loc)
{
    *off = cv_int(0, IR_I32, loc);
    for (const IrValue *v = addr; v != root;) {
        if (!v->def) return false;
        const IrOp *d = v->def;
        if (d->op == IR_ADDPTR) {
            IrValue *o = d->args[1];
            if (o->type.elem != IR_I32) o = sema_cast(s, o, IR_I32, loc);
            *off = sema_binary(s, OP_ADD, *off, val_rt(o, loc), loc);
            if (off->kind == V_ERR) return false;
            v = d->args[0];
        } else if (d->op == IR_SPLAT || d->op == IR_BROADCAST) {
            v = d->args[0];
        } else {
            return false;
        }
    }
    return true;
}

typedef struct PgLoad {
    IrOp *op;
    const AstParam *param;
    IrValue *root;
} PgLoad;

/* The loads of the inlined body [first, last] from differentiable params (roots[k] the kernel
 * parameter of params[k], NULL where the kernel has none); a load inside control flow is an error. */
static int find_param_loads(Sema *s, const char *fname, IrOp *first, IrOp *last, const AstParam **params,
                            IrValue **roots, int np, PgLoad *out, int max, bool *bad)
{
    int n = 0;
    for (IrOp *op = first; op; op = op->next) {
        for (int k = 0; k < np; k++) {
            if (!roots[k]) continue;
            bool nested = false;
            for (int r = 0; r < op->nregions && !nested; r++)
                for (const IrOp *o = op->regions[r]->first; o && !nested; o = o->next)
                    nested = o->op == IR_LOAD && reaches(o->args[0], roots[k], 0);
            if (nested) {
                diag_error(s->diag, op->loc, "param_grads(%s): '%s' is loaded inside an if or for; the "
                           "differentiator does not follow runtime control flow (load it before, pick with where(...))",
                           fname, params[k]->name);
                *bad = true;
            }
            if (op->op != IR_LOAD || !reaches(op->args[0], roots[k], 0)) continue;
            if (n == max) {
                diag_error(s->diag, op->loc, "param_grads(%s): more than %d loads from differentiable params", fname,
                           max);
                *bad = true;
                return n;
            }
            out[n++] = (PgLoad){op, params[k], roots[k]};
        }
        if (op == last) break;
    }
    return n;
}

/* The differentiable params of the file (at most max). */
static int differentiable_params(const Sema *s, const AstParam **out, int max)
{
    int n = 0;
    for (int i = 0; i < s->file->ndecls && n < max; i++) {
        const AstDecl *d = s->file->decls[i];
        if (d->kind == AST_PARAM && d->params[0].differentiable) out[n++] = &d->params[0];
    }
    return n;
}

#define PG_MAX_PARAMS 8
#define PG_MAX_LOADS 16

/* One load's contribution: dt * d(result)/d(load), masked like the load, added by
 * attn_param_grad_acc to X's row at the load's offsets. */
static bool param_grad_of_load(Sema *s, const AstDecl *fn, const PgLoad *L, Val r, Val dt, Val slot, int base,
                               IrOp *last, const AstDecl *const acc[2], bool atomic, SrcLoc loc)
{
    Diff D = {.s = s, .fn = fn, .call = loc, .seed = L->op->res[0], .base = base, .wrt = L->param->name};
    D.end = s->b.f->next_id;
    int n = D.end - D.base;
    D.tan = ARENA_ARRAY(s->arena, Tan, n ? n : 1);
    D.dep = ARENA_ARRAY(s->arena, bool, n ? n : 1);
    memset(D.tan, 0, sizeof(Tan) * (size_t)(n ? n : 1));
    memset(D.dep, 0, sizeof(bool) * (size_t)(n ? n : 1));
    if (L->op != last) diff_ops(&D, L->op->next, last);
    if (D.failed) return false;
    Val t = tan_val(&D, r.v, tan_of(&D, r.v), loc);
    Val c = sema_binary(s, OP_MUL, dt, t, loc);
    if (L->op->nargs >= 2) {   /* a masked load reads `other` where masked off: no derivative there */
        IrValue *zero = cst(&D, L->op, ir_type_scalar(IR_F32), 0.0);
        IrType shape;
        if (!sema_broadcast_or_error(s, sema_val_type(&c), L->op->args[1]->type, &shape, loc)) return false;
        Val m = val_rt(L->op->args[1], loc), z = val_rt(zero, loc);
        IrType ft = ir_type_with_elem(shape, IR_F32);
        IrValue *args[3] = {sema_convert(s, &m, ir_type_with_elem(shape, IR_I1), loc), sema_convert(s, &c, ft, loc),
                            sema_convert(s, &z, ft, loc)};
        c = val_rt(sema_emit(s, loc, IR_SELECT, ft, 3, args), loc);
    }
    Val off;
    if (!load_offset(s, L->op->args[0], L->root, &off, loc)) {
        diag_error(s->diag, L->op->loc, "param_grads(%s): the address of this load of differentiable param '%s' must "
                   "be '%s' plus integer offsets (e.g. load(%s + h * N + i))", fn->name, L->param->name,
                   L->param->name, L->param->name);
        return false;
    }
    IrType pf = ir_type_scalar(IR_PTR);
    pf.pointee = IR_F32;
    const char *name = L->param->name;
    IrValue *g = kernel_param(s, pf, arena_printf(s->arena, "%s%s", name, lang_gen_param_suffix[LANG_GEN_GRAD]));
    IrValue *numel = kernel_param(s, ir_type_scalar(IR_I32),
                                  arena_printf(s->arena, "%s%s", name, lang_gen_param_suffix[LANG_GEN_NUMEL]));
    /* this program's row: X__grad + slot * X__numel (i64: rows of many programs); atomic:
     * the gradient itself, every program adding into it */
    IrValue *row = g;
    if (!atomic) {
        IrValue *sl = sema_cast(s, sema_convert(s, &slot, ir_type_scalar(IR_I32), loc), IR_I64, loc);
        IrValue *nl = sema_cast(s, numel, IR_I64, loc);
        IrValue *rowoff = sema_emit(s, loc, IR_MUL, sl->type, 2, (IrValue *[]){sl, nl});
        row = sema_emit(s, loc, IR_ADDPTR, pf, 2, (IrValue *[]){g, rowoff});
    }
    Val args[4] = {val_rt(row, loc), val_rt(numel, loc), off, c};
    bool scalar = off.kind == V_CONST || sema_val_type(&off).rank == 0;   /* ALiBi's slope[h]: one sum */
    return sema_inline_call(s, acc[scalar], args, loc).kind != V_ERR;
}

Val bi_param_grads(Sema *s, const Builtin *bi, BArgs *a, const AstExpr *call)
{
    (void)bi;
    SrcLoc loc = call->loc;
    Val f = a->v[0];
    if (f.kind != V_FN || f.grad || f.rescaled) {
        diag_error(s->diag, f.loc, "param_grads expects a helper function (fn), got %s", sema_val_desc(s, &f));
        return val_err();
    }
    const AstDecl *fn = f.fn;
    if (fn->nparams != 5) {
        diag_error(s->diag, f.loc, "param_grads(%s): '%s' takes %d parameters; a score_mod takes 5 (s, b, h, q_idx, "
                   "kv_idx)", fn->name, fn->name, fn->nparams);
        return val_err();
    }
    const AstParam *params[PG_MAX_PARAMS];
    int np = differentiable_params(s, params, PG_MAX_PARAMS);
    if (np == 0) {
        diag_error(s->diag, loc, "param_grads(%s): no param is marked differentiable (`param NAME: *f32 "
                   "differentiable;`)", fn->name);
        return val_err();
    }
    bool atomic = false;
    if (a->have[8]) {   /* a compile-time bool: atomics straight into the gradient */
        Val at = a->v[8];
        if (at.kind != V_CONST || at.type.elem != IR_I1) {
            diag_error(s->diag, at.loc, "param_grads: 'atomic' must be a compile-time bool, got %s",
                       sema_val_desc(s, &at));
            return val_err();
        }
        atomic = at.i != 0;
    }
    const AstDecl *acc[2];
    const char *const acc_names[2] = {atomic ? "attn_param_grad_atomic" : "attn_param_grad_acc",
                                      "attn_param_grad_acc1"};
    for (int i = 0; i < 2; i++) {
        Sym *ay = sema_lookup(s, acc_names[i]);
        if (!ay || ay->kind != SYM_FN || !ay->decl) {
            diag_error(s->diag, loc, "param_grads needs the helper %s (lang/lib/attention_bwd.tile)", acc_names[i]);
            return val_err();
        }
        acc[i] = ay->decl;
    }
    for (int i = 1; i < 8; i++)
        if (a->v[i].kind == V_ERR || !sema_want_value(s, &a->v[i])) return val_err();
    Val slot = a->v[1], dt = a->v[2];
    Val args[5];
    for (int i = 0; i < 5; i++) args[i] = a->v[3 + i];
    IrBlock *blk = s->b.block;
    IrOp *mark = s->b.before ? s->b.before->prev : blk->last;
    int base = s->b.f->next_id;
    Val r = sema_inline_call(s, fn, args, loc);
    if (r.kind == V_ERR) return r;
    IrOp *first = mark ? mark->next : blk->first, *stop = s->b.before;
    IrOp *last = s->b.before ? s->b.before->prev : s->b.block->last;
    if (first == stop) first = NULL;
    /* each differentiable param's kernel parameter: read by the body just inlined, if at all */
    IrValue *roots[PG_MAX_PARAMS] = {0};
    for (int k = 0; k < np; k++) {
        Sym *y = sema_lookup(s, params[k]->name);
        if (y && y->decl && y->decl->kind == AST_PARAM && y->param_of == s->f && y->val.kind == V_RT)
            roots[k] = y->val.v;
    }
    PgLoad loads[PG_MAX_LOADS];
    bool bad = false;
    int nl = first ? find_param_loads(s, fn->name, first, last, params, roots, np, loads, PG_MAX_LOADS, &bad) : 0;
    for (int k = 0; k < np && !bad; k++) {
        bool read = false;
        for (int i = 0; i < nl; i++) read |= loads[i].param == params[k];
        if (read) continue;
        diag_error(s->diag, params[k]->differentiable_loc, "differentiable param '%s' is never loaded by %s: it has no "
                   "gradient (drop 'differentiable', or read it in %s)", params[k]->name, fn->name, fn->name);
        diag_note(s->diag, loc, "its gradient is taken here");
        bad = true;
    }
    if (bad) return val_err();
    if (r.kind != V_RT) {   /* a constant result: no load reaches it; every gradient is 0 */
        Val v;
        memset(&v, 0, sizeof v);
        v.kind = V_VOID;
        v.loc = loc;
        return v;
    }
    for (int i = 0; i < nl; i++)
        if (!param_grad_of_load(s, fn, &loads[i], r, dt, slot, base, last, acc, atomic, loc)) return val_err();
    Val v;
    memset(&v, 0, sizeof v);
    v.kind = V_VOID;
    v.loc = loc;
    return v;
}
