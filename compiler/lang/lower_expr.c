/* lower_expr.c — type checking and lowering of expressions.
 *
 * What: every AstExpr becomes a Val: compile-time expressions fold (consteval.c),
 * runtime ones emit Tile IR at the builder's cursor with the node's SrcLoc.
 * Binary operators promote element types and broadcast shapes explicitly
 * (sema_types.c); `ptr + int` becomes addptr; comparisons give i1; `x[:, None]`
 * becomes expand_dims; `x.to(T)` a cast; `c ? a : b` a select (or, with a
 * compile-time `c`, only the taken side is evaluated).
 * Invariants: an operation on a V_ERR operand yields V_ERR silently; every
 * emitted elementwise op has operands of identical shape.
 * Example: `offs < n` with offs: i32[128], n: i32 -> splat n to i32[128], cmp lt
 * -> i1[128].
 */
#include "sema.h"

#include <math.h>
#include <string.h>

static Val val_kind(ValKind k, SrcLoc loc)
{
    Val v;
    memset(&v, 0, sizeof v);
    v.kind = k;
    v.loc = loc;
    return v;
}

/* ---- names ---- */
static const struct { const char *name; double value; } named_consts[] = {
    {"inf", INFINITY}, {"LOG2E", 1.4426950408889634}, {"LN2", 0.6931471805599453},
    {"PI", 3.141592653589793},
};

bool sema_is_named_const(const char *name)
{
    for (size_t k = 0; k < sizeof named_consts / sizeof named_consts[0]; k++)
        if (strcmp(named_consts[k].name, name) == 0) return true;
    return false;
}

static Val name_value(Sema *s, const AstExpr *e)
{
    Sym *sym = sema_lookup(s, e->sval);
    if (sym) {
        Val v = sema_sym_value(s, sym, e->loc);
        if (v.kind != V_ERR) v.loc = e->loc;
        return v;
    }
    for (size_t k = 0; k < sizeof named_consts / sizeof named_consts[0]; k++)
        if (strcmp(named_consts[k].name, e->sval) == 0)
            return cv_float(named_consts[k].value, IR_F32, true, e->loc);
    IrElem t = ir_elem_from_name(e->sval);
    if (t != IR_VOID && t != IR_PTR) {
        Val v = val_kind(V_TYPE, e->loc);
        v.type = ir_type_scalar(t);
        v.s = e->sval;
        return v;
    }
    if (sema_is_builtin_name(e->sval)) {
        diag_error(s->diag, e->loc, "'%s' is a built-in function; call it as %s(...)", e->sval, e->sval);
        return val_err();
    }
    static const char *const extra[] = {"inf", "LOG2E", "LN2", "PI"};
    diag_error(s->diag, e->loc, "unknown name '%s'%s", e->sval, sema_suggest(s, e->sval, extra, 4, true));
    return val_err();
}

/* ---- binary operators ---- */
static Val bad_operands(Sema *s, AstOp op, const Val *a, const Val *b, SrcLoc loc)
{
    diag_error(s->diag, loc, "invalid operands to '%s': %s and %s", ast_op_text(op),
               sema_val_desc(s, a), sema_val_desc(s, b));
    return val_err();
}

/* ptr + int, int + ptr, ptr - int: addptr on the broadcast shape. */
static Val ptr_binary(Sema *s, AstOp op, const Val *a, const Val *b, SrcLoc loc)
{
    IrType ta = sema_val_type(a), tb = sema_val_type(b);
    bool pa = ta.elem == IR_PTR, pb = tb.elem == IR_PTR;
    if ((pa && pb) || !(op == OP_ADD || (op == OP_SUB && pa))) return bad_operands(s, op, a, b, loc);
    const Val *p = pa ? a : b, *o = pa ? b : a;
    IrType tp = pa ? ta : tb, to = pa ? tb : ta;
    if (!ir_elem_is_int((IrElem)to.elem) || to.elem == IR_I1) {
        diag_error(s->diag, loc, "a pointer offset must be an integer, got %s", sema_val_desc(s, o));
        return val_err();
    }
    IrType shape;
    if (!sema_broadcast_or_error(s, ta, tb, &shape, loc)) return val_err();
    IrType pt = shape;
    pt.elem = IR_PTR;
    pt.pointee = tp.pointee;
    Val off = *o;
    if (op == OP_SUB && off.kind == V_CONST) off = cv_unary(s, OP_NEG, &off, loc);
    IrValue *ov = sema_convert(s, &off, ir_type_with_elem(shape, (IrElem)to.elem), loc);
    if (op == OP_SUB && off.kind == V_RT) ov = sema_emit(s, loc, IR_NEG, ov->type, 1, &ov);
    IrValue *args[2] = {sema_convert(s, p, pt, loc), ov};
    return val_rt(sema_emit(s, loc, IR_ADDPTR, pt, 2, args), loc);
}

/* Promote, broadcast, emit `opc` (CMP gives i1). Both operands are values. */
static Val emit_binary(Sema *s, IrOpcode opc, IrCmp cmp, IrElem e, const Val *a, const Val *b,
                       SrcLoc loc)
{
    IrType shape;
    if (!sema_broadcast_or_error(s, sema_val_type(a), sema_val_type(b), &shape, loc)) return val_err();
    IrType ot = ir_type_with_elem(shape, e);
    IrValue *args[2] = {sema_convert(s, a, ot, loc), sema_convert(s, b, ot, loc)};
    IrType rt = opc == IR_CMP ? ir_type_with_elem(shape, IR_I1) : ot;
    IrValue *r = sema_emit(s, loc, opc, rt, 2, args);
    if (opc == IR_CMP) r->def->attr[0] = (int)cmp;
    return val_rt(r, loc);
}

static Val logical(Sema *s, AstOp op, const Val *a, const Val *b, SrcLoc loc)
{
    if (sema_val_type(a).elem != IR_I1 || sema_val_type(b).elem != IR_I1) {
        diag_error(s->diag, loc, "operator '%s' needs bool operands, got %s and %s", ast_op_text(op),
                   sema_val_desc(s, a), sema_val_desc(s, b));
        return val_err();
    }
    if (a->kind == V_CONST && b->kind == V_CONST) return cv_binary(s, op, a, b, loc);
    return emit_binary(s, sema_arith_opcode(op), IR_CMP_EQ, IR_I1, a, b, loc);
}

Val sema_binary(Sema *s, AstOp op, Val a, Val b, SrcLoc loc)
{
    if (a.kind == V_ERR || b.kind == V_ERR) return val_err();
    if (!sema_want_value(s, &a) | !sema_want_value(s, &b)) return val_err();
    IrType ta = sema_val_type(&a), tb = sema_val_type(&b);
    if (ta.elem == IR_PTR || tb.elem == IR_PTR) return ptr_binary(s, op, &a, &b, loc);
    if (op == OP_LAND || op == OP_LOR) return logical(s, op, &a, &b, loc);
    bool untyped;
    IrElem e = sema_promote((IrElem)ta.elem, a.kind == V_CONST && a.untyped, (IrElem)tb.elem,
                            b.kind == V_CONST && b.untyped, &untyped);
    bool int_only = op == OP_SHL || op == OP_SHR || op == OP_BITAND || op == OP_BITOR || op == OP_BITXOR;
    if (int_only && ir_elem_is_float(e)) {
        diag_error(s->diag, loc, "operator '%s' needs integer operands, got %s and %s", ast_op_text(op),
                   sema_val_desc(s, &a), sema_val_desc(s, &b));
        return val_err();
    }
    if (a.kind == V_CONST && b.kind == V_CONST) return cv_binary(s, op, &a, &b, loc);
    return emit_binary(s, sema_arith_opcode(op), sema_cmp_kind(op), e, &a, &b, loc);
}

/* maximum/minimum and two-operand max/min: promote and broadcast like `+`. */
Val sema_elementwise2(Sema *s, IrOpcode opc, const char *what, Val a, Val b, SrcLoc loc)
{
    if (a.kind == V_ERR || b.kind == V_ERR) return val_err();
    if (!sema_want_value(s, &a) | !sema_want_value(s, &b)) return val_err();
    IrType ta = sema_val_type(&a), tb = sema_val_type(&b);
    if (ta.elem == IR_PTR || tb.elem == IR_PTR) {
        diag_error(s->diag, loc, "'%s' needs numeric operands, got %s and %s", what,
                   sema_val_desc(s, &a), sema_val_desc(s, &b));
        return val_err();
    }
    bool untyped;
    IrElem e = sema_promote((IrElem)ta.elem, a.kind == V_CONST && a.untyped, (IrElem)tb.elem,
                            b.kind == V_CONST && b.untyped, &untyped);
    if (a.kind == V_CONST && b.kind == V_CONST) return cv_minmax(s, opc, &a, &b, loc);
    return emit_binary(s, opc, IR_CMP_EQ, e, &a, &b, loc);
}

/* where(c, a, b) and a runtime `c ? a : b`. */
Val sema_select(Sema *s, Val c, Val a, Val b, SrcLoc loc)
{
    if (c.kind == V_ERR || a.kind == V_ERR || b.kind == V_ERR) return val_err();
    if (!sema_want_value(s, &c) | !sema_want_value(s, &a) | !sema_want_value(s, &b)) return val_err();
    IrType tc = sema_val_type(&c), ta = sema_val_type(&a), tb = sema_val_type(&b);
    if (tc.elem != IR_I1) {
        diag_error(s->diag, c.loc, "a select condition must be bool, got %s", sema_val_desc(s, &c));
        return val_err();
    }
    IrElem e;
    if (ta.elem == IR_PTR || tb.elem == IR_PTR) {
        if (!ir_type_eq(ir_type_scalar_of(ta), ir_type_scalar_of(tb))) {
            diag_error(s->diag, loc, "select operands have different types: %s and %s",
                       sema_val_desc(s, &a), sema_val_desc(s, &b));
            return val_err();
        }
        e = IR_PTR;
    } else {
        bool untyped;
        e = sema_promote((IrElem)ta.elem, a.kind == V_CONST && a.untyped, (IrElem)tb.elem,
                         b.kind == V_CONST && b.untyped, &untyped);
        if (c.kind == V_CONST && a.kind == V_CONST && b.kind == V_CONST) {
            Val r = cv_truthy(&c) ? a : b;
            if (!untyped) r = cv_convert(&r, e);
            r.loc = loc;
            return r;
        }
    }
    IrType sh1, shape;
    if (!sema_broadcast_or_error(s, ta, tb, &sh1, loc) || !sema_broadcast_or_error(s, tc, sh1, &shape, loc))
        return val_err();
    IrType ot = ir_type_with_elem(shape, e);
    if (e == IR_PTR) ot.pointee = ta.pointee;
    IrValue *args[3] = {sema_convert(s, &c, ir_type_with_elem(shape, IR_I1), loc),
                        sema_convert(s, &a, ot, loc), sema_convert(s, &b, ot, loc)};
    return val_rt(sema_emit(s, loc, IR_SELECT, ot, 3, args), loc);
}

/* ---- unary, ternary, index, method ---- */
static Val unary(Sema *s, const AstExpr *e)
{
    Val a = sema_expr(s, e->lhs);
    if (a.kind == V_ERR || !sema_want_value(s, &a)) return val_err();
    IrType t = sema_val_type(&a);
    IrElem el = (IrElem)t.elem;
    bool ok = el != IR_PTR && (e->op == OP_NOT ? el == IR_I1
                               : e->op == OP_BITNOT ? ir_elem_is_int(el)
                                                    : el != IR_I1);
    if (!ok) {
        const char *need = e->op == OP_NOT ? "a bool" : e->op == OP_BITNOT ? "an integer" : "a numeric";
        diag_error(s->diag, e->loc, "operator '%s' needs %s operand, got %s", ast_op_text(e->op), need,
                   sema_val_desc(s, &a));
        return val_err();
    }
    if (a.kind == V_CONST) return cv_unary(s, e->op, &a, e->loc);
    if (e->op == OP_PLUS) return a;
    return val_rt(sema_emit(s, e->loc, e->op == OP_NEG ? IR_NEG : IR_NOT, t, 1, &a.v), e->loc);
}

static Val ternary(Sema *s, const AstExpr *e)
{
    Val c = sema_expr(s, e->cond);
    if (c.kind == V_CONST) {
        if (c.type.elem != IR_I1) {
            diag_error(s->diag, c.loc, "a condition must be bool, got %s", sema_val_desc(s, &c));
            return val_err();
        }
        return sema_expr(s, cv_truthy(&c) ? e->lhs : e->rhs);
    }
    Val a = sema_expr(s, e->lhs), b = sema_expr(s, e->rhs);
    return sema_select(s, c, a, b, e->loc);
}

static Val index_expr(Sema *s, const AstExpr *e)
{
    Val x = sema_expr(s, e->lhs);
    if (x.kind == V_ERR || !sema_want_value(s, &x)) return val_err();
    int nslice = 0, nnone = 0;
    for (int i = 0; i < e->nargs; i++) {
        AstExprKind k = e->args[i].value->kind;
        if (k == AST_SLICE) nslice++;
        else if (k == AST_NONE) nnone++;
        else {
            diag_error(s->diag, e->args[i].value->loc,
                       "an index may only hold ':' and None (tiles are not indexed by value)");
            return val_err();
        }
    }
    IrType t = sema_val_type(&x);
    if (nslice != t.rank) {
        diag_error(s->diag, e->loc, "index has %d ':' but the value has %d dimension%s (%s)", nslice,
                   t.rank, t.rank == 1 ? "" : "s", sema_type_str(s, t));
        return val_err();
    }
    if (t.rank + nnone > IR_MAX_RANK) {
        diag_error(s->diag, e->loc, "indexing gives %d dimensions; tiles have at most %d", t.rank + nnone,
                   IR_MAX_RANK);
        return val_err();
    }
    IrValue *v = sema_materialize(s, &x, e->loc);
    int pos = 0;
    for (int i = 0; i < e->nargs; i++, pos++) {
        if (e->args[i].value->kind == AST_SLICE) continue;
        IrType nt = v->type;
        for (int k = nt.rank; k > pos; k--) nt.shape[k] = nt.shape[k - 1];
        nt.shape[pos] = 1;
        nt.rank++;
        if (v->type.rank == 0) {
            v = sema_emit(s, e->loc, IR_SPLAT, nt, 1, &v);
        } else {
            v = sema_emit(s, e->loc, IR_EXPAND_DIMS, nt, 1, &v);
            v->def->attr[0] = pos;
        }
    }
    return val_rt(v, e->loc);
}

static Val method(Sema *s, const AstExpr *e)
{
    Val x = sema_expr(s, e->lhs);
    if (strcmp(e->sval, "to") != 0) {
        diag_error(s->diag, e->loc, "unknown method '%s'; the only method is '.to(T)'", e->sval);
        return val_err();
    }
    if (e->nargs != 1 || e->args[0].name) {
        diag_error(s->diag, e->loc, "'.to' takes one type argument, got %d argument%s", e->nargs,
                   e->nargs == 1 ? " (a keyword)" : "s");
        return val_err();
    }
    Val t = sema_expr(s, e->args[0].value);
    if (x.kind == V_ERR || t.kind == V_ERR || !sema_want_value(s, &x)) return val_err();
    if (t.kind != V_TYPE) {
        diag_error(s->diag, t.loc, "'.to' expects a type such as f16, got %s", sema_val_desc(s, &t));
        return val_err();
    }
    IrType xt = sema_val_type(&x);
    if (xt.elem == IR_PTR) {
        diag_error(s->diag, e->loc, "cannot cast %s to %s", sema_type_str(s, xt), t.s);
        return val_err();
    }
    if (x.kind == V_CONST) {
        Val r = cv_convert(&x, (IrElem)t.type.elem);
        r.loc = e->loc;
        return r;
    }
    return val_rt(sema_cast(s, x.v, (IrElem)t.type.elem, e->loc), e->loc);
}

static Val list_expr(Sema *s, const AstExpr *e)
{
    Val v = val_kind(V_LIST, e->loc);
    v.items = ARENA_ARRAY(s->arena, Val, e->nargs ? e->nargs : 1);
    v.nitems = e->nargs;
    for (int i = 0; i < e->nargs; i++) {
        v.items[i] = sema_expr(s, e->args[i].value);
        if (v.items[i].kind == V_ERR) return val_err();
    }
    return v;
}

static bool is_kernel_name(Sema *s, const char *name)
{
    for (int i = 0; i < s->file->ndecls; i++)
        if (s->file->decls[i]->kind == AST_KERNEL && strcmp(s->file->decls[i]->name, name) == 0) return true;
    return false;
}

static Val call(Sema *s, const AstExpr *e)
{
    Sym *sym = sema_lookup(s, e->sval);
    if (sym) {
        Val f = sema_sym_value(s, sym, e->loc);
        if (f.kind == V_FN) return sema_call_helper(s, &f, e);
        if (f.kind != V_ERR)
            diag_error(s->diag, e->loc, "'%s' is not a function (it is %s)", e->sval, sema_val_desc(s, &f));
        return val_err();
    }
    if (sema_is_builtin_name(e->sval)) return sema_builtin_call(s, e);
    if (is_kernel_name(s, e->sval)) {
        diag_error(s->diag, e->loc, "cannot call kernel '%s'; only helpers (fn) can be called", e->sval);
        return val_err();
    }
    int n;
    const char *const *names = sema_builtin_names(&n);
    diag_error(s->diag, e->loc, "unknown function '%s'%s", e->sval, sema_suggest(s, e->sval, names, n, false));
    return val_err();
}

/* `a + b - c ...`: the left spine in a loop (ast_binary_spine), so a flat
 * chain of any length needs no recursion; operands left to right. */
static Val binary_chain(Sema *s, const AstExpr *e)
{
    const AstExpr *small[32], **spine = small;
    int n = ast_binary_spine(e, NULL, 0);
    if (n > 32) spine = ARENA_ARRAY(s->arena, const AstExpr *, n);
    ast_binary_spine(e, spine, n);
    Val acc = sema_expr(s, spine[0]->lhs);
    for (int i = 0; i < n; i++) {
        /* A compile-time left side decides `true || x` and `false && x`, like the
         * condition of `c ? a : b`: x is not evaluated, so a static_assert may probe
         * a hook that reads a runtime `param` behind a flag that rules it out. */
        AstOp op = spine[i]->op;
        if ((op == OP_LOR || op == OP_LAND) && acc.kind == V_CONST && acc.type.elem == IR_I1 &&
            cv_truthy(&acc) == (op == OP_LOR))
            continue;
        Val b = sema_expr(s, spine[i]->rhs);
        acc = sema_binary(s, spine[i]->op, acc, b, spine[i]->loc);
    }
    return acc;
}

Val sema_expr(Sema *s, const AstExpr *e)
{
    switch (e->kind) {
    case AST_INT: return cv_untyped_int(e->ival, e->loc);
    case AST_FLOAT: return cv_float(e->fval, IR_F32, true, e->loc);
    case AST_BOOL: return cv_bool(e->ival != 0, e->loc);
    case AST_STRING: { Val v = val_kind(V_STR, e->loc); v.s = e->sval; return v; }
    case AST_NONE: return val_kind(V_NONE, e->loc);
    case AST_SLICE: return val_kind(V_SLICE, e->loc);
    case AST_NAME: return name_value(s, e);
    case AST_UNARY: return unary(s, e);
    case AST_BINARY: return binary_chain(s, e);
    case AST_TERNARY: return ternary(s, e);
    case AST_CALL: return call(s, e);
    case AST_INDEX: return index_expr(s, e);
    case AST_METHOD: return method(s, e);
    case AST_LIST: return list_expr(s, e);
    }
    INTERNAL_ERROR("sema_expr: unknown expression kind %d", (int)e->kind);
    return val_err();
}
