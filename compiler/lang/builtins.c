/* builtins.c — the built-in functions of docs/language.md: argument binding
 * and the non-memory builtins (program ids, arange, zeros/full, math, where,
 * maximum/minimum, reshape/trans/broadcast_to, cdiv, static_assert).
 *
 * What: a table names each builtin's parameters (so keyword and positional
 * arguments bind the same way, and a misspelt keyword gets a suggestion), its
 * arity, and the function that checks and lowers it. Memory ops, dot and the
 * reductions live in builtins_mem.c.
 * Invariants: every argument is evaluated exactly once, in source order; a
 * builtin given a V_ERR argument returns V_ERR without reporting; shapes are
 * compile-time powers of two.
 * Example: `full([64, 32], -inf, f32)` -> const -inf : tensor<64x32xf32>;
 * `exp2(x)` on an f32[64] tile -> exp2 : tensor<64xf32>.
 */
#include "sema.h"

#include <string.h>

/* ---- shared argument checks ---- */
bool bi_const_int(Sema *s, const Builtin *bi, BArgs *a, int i, int64_t *out)
{
    Val *v = &a->v[i];
    if (cv_is_int(v)) {
        *out = v->i;
        return true;
    }
    diag_error(s->diag, v->loc, "argument '%s' of '%s' must be a compile-time integer, got %s", bi->params[i],
               bi->name, v->kind == V_RT ? "a runtime value" : sema_val_desc(s, v));
    return false;
}

/* A shape: `[M, N]` of compile-time integers (or one integer for a 1-D shape). */
bool bi_shape(Sema *s, const Builtin *bi, BArgs *a, int i, IrType *shape)
{
    (void)bi;
    Val *v = &a->v[i];
    int n = v->kind == V_LIST ? v->nitems : 1;
    Val *items = v->kind == V_LIST ? v->items : v;
    int64_t dims[16] = {0}; /* zeroed: GCC cannot see n <= 16 entries are all set */
    if (n > 16) n = 16;
    for (int k = 0; k < n; k++) {
        if (!cv_is_int(&items[k])) {
            diag_error(s->diag, items[k].loc, "a shape holds compile-time integers; got %s",
                       items[k].kind == V_RT ? "a runtime value" : sema_val_desc(s, &items[k]));
            return false;
        }
        dims[k] = items[k].i;
    }
    if (!sema_check_shape(s, n, dims, v->loc)) return false;
    memset(shape, 0, sizeof *shape);
    shape->elem = IR_I32;
    shape->rank = (uint8_t)n;
    for (int k = 0; k < n; k++) shape->shape[k] = (int32_t)dims[k];
    return true;
}

static bool bi_type(Sema *s, const Builtin *bi, BArgs *a, int i, IrElem *out)
{
    Val *v = &a->v[i];
    if (v->kind == V_TYPE) {
        *out = (IrElem)v->type.elem;
        return true;
    }
    diag_error(s->diag, v->loc, "argument '%s' of '%s' must be a type such as f32, got %s", bi->params[i],
               bi->name, sema_val_desc(s, v));
    return false;
}

/* ---- program ids, arange, zeros, full ---- */
static Val b_program_id(Sema *s, const Builtin *bi, BArgs *a, const AstExpr *call)
{
    int64_t axis;
    if (!bi_const_int(s, bi, a, 0, &axis)) return val_err();
    if (axis < 0 || axis > 2) {
        diag_error(s->diag, a->v[0].loc, "the axis of '%s' must be 0, 1 or 2, got %lld", bi->name, (long long)axis);
        return val_err();
    }
    IrValue *r = sema_emit(s, call->loc, (IrOpcode)bi->code, ir_type_scalar(IR_I32), 0, NULL);
    r->def->attr[0] = (int)axis;
    return val_rt(r, call->loc);
}

static Val b_arange(Sema *s, const Builtin *bi, BArgs *a, const AstExpr *call)
{
    (void)bi;
    int64_t lo = 0, hi;
    for (int i = 0; i < 2; i++)
        if (a->have[i] && !cv_is_int(&a->v[i])) {
            diag_error(s->diag, a->v[i].loc, "the bounds of arange must be compile-time integers, got %s",
                       a->v[i].kind == V_RT ? "a runtime value" : sema_val_desc(s, &a->v[i]));
            return val_err();
        }
    if (a->have[1]) {
        lo = a->v[0].i;
        hi = a->v[1].i;
    } else {
        hi = a->v[0].i;
    }
    int64_t n = hi - lo;
    if (!sup_is_pow2(n) || n > 1048576 || lo < INT32_MIN || hi > INT32_MAX) {
        diag_error(s->diag, call->loc, "the size of arange must be a power of two (at most 1048576), got %lld",
                   (long long)n);
        return val_err();
    }
    int32_t dim = (int32_t)n;
    IrValue *r = sema_emit(s, call->loc, IR_ARANGE, ir_type_tile(ir_type_scalar(IR_I32), 1, &dim), 0, NULL);
    r->def->attr[0] = (int)lo;
    r->def->attr[1] = (int)hi;
    return val_rt(r, call->loc);
}

static Val b_zeros(Sema *s, const Builtin *bi, BArgs *a, const AstExpr *call)
{
    IrType shape;
    IrElem e;
    if (!bi_shape(s, bi, a, 0, &shape) | !bi_type(s, bi, a, 1, &e)) return val_err();
    Val zero = cv_int(0, IR_I32, call->loc);
    return val_rt(sema_convert(s, &zero, ir_type_with_elem(shape, e), call->loc), call->loc);
}

static Val b_full(Sema *s, const Builtin *bi, BArgs *a, const AstExpr *call)
{
    IrType shape;
    IrElem e;
    if (!bi_shape(s, bi, a, 0, &shape) | !bi_type(s, bi, a, 2, &e)) return val_err();
    Val *v = &a->v[1];
    if (!sema_want_value(s, v)) return val_err();
    IrType vt = sema_val_type(v);
    if (vt.rank > 0 || vt.elem == IR_PTR) {
        diag_error(s->diag, v->loc, "the value of 'full' must be a number, got %s", sema_val_desc(s, v));
        return val_err();
    }
    return val_rt(sema_convert(s, v, ir_type_with_elem(shape, e), call->loc), call->loc);
}

/* ---- elementwise ---- */
static Val b_math(Sema *s, const Builtin *bi, BArgs *a, const AstExpr *call)
{
    Val *x = &a->v[0];
    if (!sema_want_value(s, x)) return val_err();
    IrType t = sema_val_type(x);
    if (x->kind == V_CONST && x->untyped && !ir_elem_is_float((IrElem)t.elem)) {
        *x = cv_float(cv_as_double(x), IR_F32, true, x->loc);   /* a literal adopts the float type: sqrt(2) */
        t = x->type;
    }
    if (!ir_elem_is_float((IrElem)t.elem)) {
        diag_error(s->diag, x->loc, "'%s' needs a floating-point operand, got %s; convert it with .to(f32)",
                   bi->name, sema_type_str(s, t));
        return val_err();
    }
    if (x->kind == V_CONST) return cv_math(s, (IrOpcode)bi->code, x, call->loc);
    return val_rt(sema_emit(s, call->loc, (IrOpcode)bi->code, t, 1, &x->v), call->loc);
}

static Val b_elementwise2(Sema *s, const Builtin *bi, BArgs *a, const AstExpr *call)
{
    return sema_elementwise2(s, (IrOpcode)bi->code, bi->name, a->v[0], a->v[1], call->loc);
}

static Val b_where(Sema *s, const Builtin *bi, BArgs *a, const AstExpr *call)
{
    (void)bi;
    return sema_select(s, a->v[0], a->v[1], a->v[2], call->loc);
}

/* max(x, axis = 1) reduces; max(a, b) with a second operand that is not a compile-time
 * integer (or a scalar first operand) is elementwise. max(tile, 1) is refused: Triton reads it
 * as a reduction along axis 1, a reader as a clamp (`max(x, 0)` in a hook was a reduction that
 * compiled and masked the wrong keys). */
static Val b_maxmin(Sema *s, const Builtin *bi, BArgs *a, const AstExpr *call)
{
    if (a->have[1] && !a->keyword[1] && cv_is_int(&a->v[1]) && a->v[0].kind == V_RT &&
        sema_val_type(&a->v[0]).rank > 0) {
        long long k = (long long)a->v[1].i;
        diag_error(s->diag, call->loc, "%s(x, %lld) on a tile is ambiguous: write %s(x, axis = %lld) for the "
                   "reduction along axis %lld, or %s(x, %lld) for the elementwise %s", bi->name, k, bi->name, k, k,
                   bi->code == IR_RED_MAX ? "maximum" : "minimum", k,
                   bi->code == IR_RED_MAX ? "maximum (a clamp from below)" : "minimum (a clamp from above)");
        return val_err();
    }
    bool elementwise = a->have[1] && !a->keyword[1] &&
                       (!cv_is_int(&a->v[1]) || sema_val_type(&a->v[0]).rank == 0);
    if (!elementwise) return bi_reduce(s, bi, a, call);
    return sema_elementwise2(s, bi->code == IR_RED_MAX ? IR_MAX : IR_MIN, bi->name, a->v[0], a->v[1], call->loc);
}

static Val b_cdiv(Sema *s, const Builtin *bi, BArgs *a, const AstExpr *call)
{
    (void)bi;
    for (int i = 0; i < 2; i++) {
        if (!sema_want_value(s, &a->v[i])) return val_err();
        IrType t = sema_val_type(&a->v[i]);
        if (!ir_elem_is_int((IrElem)t.elem) || t.elem == IR_I1) {
            diag_error(s->diag, a->v[i].loc, "'cdiv' needs integer operands, got %s", sema_val_desc(s, &a->v[i]));
            return val_err();
        }
    }
    Val one = cv_untyped_int(1, call->loc);
    Val sum = sema_binary(s, OP_ADD, a->v[0], a->v[1], call->loc);
    Val num = sema_binary(s, OP_SUB, sum, one, call->loc);
    return sema_binary(s, OP_DIV, num, a->v[1], call->loc);
}

/* ---- shapes ---- */
static Val b_reshape(Sema *s, const Builtin *bi, BArgs *a, const AstExpr *call)
{
    IrType shape;
    if (!sema_want_value(s, &a->v[0]) || !bi_shape(s, bi, a, 1, &shape)) return val_err();
    IrType t = sema_val_type(&a->v[0]);
    if (ir_type_numel(t) != ir_type_numel(shape)) {
        diag_error(s->diag, call->loc, "cannot reshape %s to %s: %lld elements vs %lld", sema_shape_str(s, t),
                   sema_shape_str(s, shape), (long long)ir_type_numel(t), (long long)ir_type_numel(shape));
        return val_err();
    }
    IrValue *x = sema_materialize(s, &a->v[0], call->loc);
    IrType rt = shape;
    rt.elem = t.elem;
    rt.pointee = t.pointee;
    if (ir_type_eq(rt, x->type)) return val_rt(x, call->loc);
    IrOpcode op = t.rank == 0 ? IR_SPLAT : IR_RESHAPE;
    return val_rt(sema_emit(s, call->loc, op, rt, 1, &x), call->loc);
}

static Val b_trans(Sema *s, const Builtin *bi, BArgs *a, const AstExpr *call)
{
    (void)bi;
    if (!sema_want_value(s, &a->v[0])) return val_err();
    IrType t = sema_val_type(&a->v[0]);
    if (t.rank != 2) {
        diag_error(s->diag, a->v[0].loc, "'trans' needs a 2-D tile, got %s", sema_type_str(s, t));
        return val_err();
    }
    IrType rt = t;
    rt.shape[0] = t.shape[1];
    rt.shape[1] = t.shape[0];
    IrValue *r = sema_emit(s, call->loc, IR_TRANS, rt, 1, &a->v[0].v);
    r->def->attr[0] = 1;
    r->def->attr[1] = 0;
    return val_rt(r, call->loc);
}

static Val b_broadcast_to(Sema *s, const Builtin *bi, BArgs *a, const AstExpr *call)
{
    IrType shape, out;
    if (!sema_want_value(s, &a->v[0]) || !bi_shape(s, bi, a, 1, &shape)) return val_err();
    IrType t = sema_val_type(&a->v[0]);
    if (!sema_broadcast_shape(t, shape, &out) || out.rank != shape.rank ||
        memcmp(out.shape, shape.shape, sizeof out.shape) != 0) {
        diag_error(s->diag, call->loc, "cannot broadcast %s to %s", sema_shape_str(s, t), sema_shape_str(s, shape));
        return val_err();
    }
    IrType rt = shape;
    rt.elem = t.elem;
    rt.pointee = t.pointee;
    return val_rt(sema_convert(s, &a->v[0], rt, call->loc), call->loc);
}

/* The source text of an argument, from its first token to the ',' or ')' that
 * ends it, so a failed static_assert can show the condition. NULL if unknown.
 * Also names static_print's arguments and device_assert's default message. */
const char *bi_arg_text(Sema *s, SrcLoc loc)
{
    const char *p = s->diag->src;
    if (!p || loc.line <= 0 || (loc.file && s->diag->file && strcmp(loc.file, s->diag->file) != 0)) return NULL;
    for (int l = 1; l < loc.line && *p; p++)
        if (*p == '\n') l++;
    for (int c = 1; c < loc.col && *p && *p != '\n'; c++) p++;
    const char *q = p;
    int depth = 0;
    for (; *q && *q != '\n' && *q != '"'; q++) {
        if (*q == '(' || *q == '[') depth++;
        else if ((*q == ')' || *q == ']') && depth-- == 0) break;
        else if (*q == ',' && depth == 0) break;
    }
    if (*q != ')' && *q != ',') return NULL;
    while (q > p && q[-1] == ' ') q--;
    return q > p && q - p < 200 ? arena_strndup(s->arena, p, (size_t)(q - p)) : NULL;
}

static Val b_static_assert(Sema *s, const Builtin *bi, BArgs *a, const AstExpr *call)
{
    (void)bi;
    Val *c = &a->v[0];
    if (a->have[1] && a->v[1].kind != V_STR) {
        diag_error(s->diag, a->v[1].loc, "the message of static_assert must be a string, got %s",
                   sema_val_desc(s, &a->v[1]));
        return val_err();
    }
    if (c->kind != V_CONST) {
        diag_error(s->diag, c->loc, "static_assert needs a compile-time condition, got %s",
                   c->kind == V_RT ? "a runtime value" : sema_val_desc(s, c));
        return val_err();
    }
    if (!cv_truthy(c)) {
        if (a->have[1]) diag_error(s->diag, call->loc, "static assertion failed: %s", a->v[1].s);
        else {
            const char *text = call->nargs > 0 && !call->args[0].name ? bi_arg_text(s, call->args[0].loc) : NULL;
            if (text) diag_error(s->diag, call->loc, "static assertion failed: %s", text);
            else diag_error(s->diag, call->loc, "static assertion failed");
        }
    }
    Val v;
    memset(&v, 0, sizeof v);
    v.kind = V_VOID;
    v.loc = call->loc;
    return v;
}

/* ---- the table ---- */
#define MATH(n, op) {n, {"x"}, 1, 1, b_math, IR_##op, 0}
static const Builtin builtins[] = {
    {"program_id", {"axis"}, 1, 1, b_program_id, IR_PROGRAM_ID, 0},
    {"num_programs", {"axis"}, 1, 1, b_program_id, IR_NUM_PROGRAMS, 0},
    {"arange", {"start", "end"}, 1, 2, b_arange, 0, 0},
    {"zeros", {"shape", "dtype"}, 2, 2, b_zeros, 0, 0},
    {"full", {"shape", "value", "dtype"}, 3, 3, b_full, 0, 0},
    /* mask = None, other = None, acc = None, axis = None: as if omitted (Triton's spelling) */
    {"load", {"ptr", "mask", "other"}, 1, 3, bi_load, IR_LOAD, 6u},
    {"store", {"ptr", "value", "mask"}, 2, 3, bi_store, IR_STORE, 4u},
    {"atomic_add", {"ptr", "value", "mask"}, 2, 3, bi_store, IR_ATOMIC_ADD, 4u},
    {"dot", {"a", "b", "acc"}, 2, 3, bi_dot, 0, 4u},
    {"sum", {"x", "axis"}, 1, 2, bi_reduce, IR_RED_SUM, 2u},
    {"max", {"x", "axis"}, 1, 2, b_maxmin, IR_RED_MAX, 2u},
    {"min", {"x", "axis"}, 1, 2, b_maxmin, IR_RED_MIN, 2u},
    {"argmax", {"x", "axis"}, 1, 2, bi_reduce, IR_RED_ARGMAX, 2u},
    {"argmin", {"x", "axis"}, 1, 2, bi_reduce, IR_RED_ARGMIN, 2u},
    {"maximum", {"a", "b"}, 2, 2, b_elementwise2, IR_MAX, 0},
    {"minimum", {"a", "b"}, 2, 2, b_elementwise2, IR_MIN, 0},
    MATH("exp", EXP), MATH("exp2", EXP2), MATH("log", LOG), MATH("log2", LOG2), MATH("sqrt", SQRT),
    MATH("rsqrt", RSQRT), MATH("abs", ABS), MATH("tanh", TANH), MATH("sin", SIN), MATH("cos", COS),
    MATH("floor", FLOOR), MATH("ceil", CEIL),
    {"where", {"cond", "x", "y"}, 3, 3, b_where, 0, 0},
    {"reshape", {"x", "shape"}, 2, 2, b_reshape, 0, 0},
    {"trans", {"x"}, 1, 1, b_trans, 0, 0},
    {"cdiv", {"a", "b"}, 2, 2, b_cdiv, 0, 0},
    {"broadcast_to", {"x", "shape"}, 2, 2, b_broadcast_to, 0, 0},
    {"static_assert", {"cond", "msg"}, 1, 2, b_static_assert, 0, 0},
    {"static_print", {NULL}, 0, 0, NULL, 0, 0},
    {"device_assert", {"cond", "msg"}, 1, 2, bi_device_assert, 0, 0},
    {"fence", {NULL}, 0, 0, bi_fence, 0, 0},
    {"grad", {"f"}, 1, 1, bi_grad, 0, 0},
    {"param_grads", {"f", "slot", "dt", "s", "b", "h", "q_idx", "kv_idx", "atomic"}, 8, 9, bi_param_grads, 0, 0},
    {"rescale", {"f", "a", "b"}, 3, 3, bi_rescale, 0, 0},
};
#define NBUILTINS ((int)(sizeof builtins / sizeof builtins[0]))

static const Builtin *find_builtin(const char *name)
{
    for (int i = 0; i < NBUILTINS; i++)
        if (strcmp(builtins[i].name, name) == 0) return &builtins[i];
    return NULL;
}

bool sema_is_builtin_name(const char *name) { return find_builtin(name) != NULL; }

const char *const *sema_builtin_names(int *n)
{
    static const char *names[NBUILTINS];
    for (int i = 0; i < NBUILTINS; i++) names[i] = builtins[i].name;
    *n = NBUILTINS;
    return names;
}

static void arity_error(Sema *s, const Builtin *bi, const AstExpr *call)
{
    if (bi->nmin == bi->nmax)
        diag_error(s->diag, call->loc, "'%s' takes %d argument%s, got %d", bi->name, bi->nmin,
                   bi->nmin == 1 ? "" : "s", call->nargs);
    else
        diag_error(s->diag, call->loc, "'%s' takes %d to %d arguments, got %d", bi->name, bi->nmin, bi->nmax,
                   call->nargs);
}

static int param_index(const Builtin *bi, const char *name)
{
    for (int k = 0; k < bi->nmax; k++)
        if (strcmp(bi->params[k], name) == 0) return k;
    return -1;
}

/* Bind the call's arguments; false (reported) on a binding error. */
static bool bind_args(Sema *s, const Builtin *bi, const AstExpr *call, BArgs *a)
{
    memset(a, 0, sizeof *a);
    if (call->nargs > bi->nmax) {
        arity_error(s, bi, call);
        return false;
    }
    for (int i = 0; i < call->nargs; i++) {
        const AstArg *arg = &call->args[i];
        int k = arg->name ? param_index(bi, arg->name) : i;
        if (k < 0) {
            const char *best = NULL;
            int bestd = 3;
            for (int j = 0; j < bi->nmax; j++) {
                int d = sup_edit_distance(arg->name, bi->params[j]);
                if (d < bestd) { bestd = d; best = bi->params[j]; }
            }
            diag_error(s->diag, arg->loc, "unknown keyword argument '%s' to '%s'%s", arg->name, bi->name,
                       best ? arena_printf(s->arena, "; did you mean '%s'?", best) : "");
            return false;
        }
        if (a->have[k]) {
            diag_error(s->diag, arg->loc, "argument '%s' of '%s' is given twice", bi->params[k], bi->name);
            return false;
        }
        a->have[k] = true;
        a->keyword[k] = arg->name != NULL;
    }
    for (int k = 0; k < bi->nmin; k++)
        if (!a->have[k]) {
            bool any_kw = false;
            for (int i = 0; i < call->nargs; i++) any_kw |= call->args[i].name != NULL;
            if (any_kw) diag_error(s->diag, call->loc, "missing argument '%s' in call to '%s'", bi->params[k], bi->name);
            else arity_error(s, bi, call);
            return false;
        }
    return true;
}

Val sema_builtin_call(Sema *s, const AstExpr *call)
{
    const Builtin *bi = find_builtin(call->sval);
    if (!bi->fn) return bi_static_print(s, call);
    BArgs a;
    if (!bind_args(s, bi, call, &a)) {
        for (int i = 0; i < call->nargs; i++) sema_expr(s, call->args[i].value); /* their own errors */
        return val_err();
    }
    bool err = false;
    for (int i = 0; i < call->nargs; i++) {
        const AstArg *arg = &call->args[i];
        int k = arg->name ? param_index(bi, arg->name) : i;
        a.v[k] = sema_expr(s, arg->value);
        err |= a.v[k].kind == V_ERR;
        if (a.v[k].kind == V_NONE && (bi->none_ok >> k & 1u)) a.have[k] = a.keyword[k] = false;
    }
    if (err) return val_err();
    return bi->fn(s, bi, &a, call);
}
