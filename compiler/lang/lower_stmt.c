/* lower_stmt.c — statements, structured control flow and helper inlining.
 *
 * What: let/var bindings and assignments update the symbol table (SSA: an
 * assignment rebinds the name to a new IrValue); `for` becomes IR_FOR whose
 * loop-carried values are the vars declared outside and assigned inside the
 * body (found by a scan of the body before lowering it); a runtime `if`
 * becomes IR_IF whose results merge the vars assigned in either branch; a
 * compile-time `if` lowers only the taken branch; a helper call inlines the
 * helper's body with the argument values bound to its parameters.
 * Invariants: every region ends with exactly one yield whose operands have the
 * types of the region's results; a carried var keeps its type across the loop
 * (else an error showing both types); inlining never recurses.
 * Example:
 *     var acc = zeros([64], f32);
 *     for i in range(0, n, 64) { acc += load(X + i + arange(64)); }
 *   -> %acc0 = const 0 : tensor<64xf32>
 *      %r = for %i = %c0 to %n step %c64 iter(%acc = %acc0) {
 *          ...; %s = add %acc, %x; yield %s }
 */
#include "sema.h"

#include <string.h>

/* ---- the assigned-variable scan ---- */
typedef struct NameSet {
    const char **names;
    int n, cap;
} NameSet;

static bool ns_has(const NameSet *ns, const char *name)
{
    for (int i = 0; i < ns->n; i++)
        if (strcmp(ns->names[i], name) == 0) return true;
    return false;
}

static void ns_add(Sema *s, NameSet *ns, const char *name)
{
    if (ns->n == ns->cap) {
        int nc = ns->cap ? ns->cap * 2 : 8;
        const char **nn = ARENA_ARRAY(s->arena, const char *, nc);
        if (ns->n) memcpy(nn, ns->names, sizeof(char *) * (size_t)ns->n);
        ns->names = nn;
        ns->cap = nc;
    }
    ns->names[ns->n++] = name;
}

/* Names assigned in `st` that are not declared inside it (`locals` tracks the
 * declarations in scope at each point; it is restored at every block's end). */
static void scan_assigned(Sema *s, const AstStmt *st, NameSet *locals, NameSet *out)
{
    if (!st) return;
    int mark = locals->n;
    switch (st->kind) {
    case AST_LET: case AST_VAR:
        ns_add(s, locals, st->name);
        return;
    case AST_ASSIGN:
        if (!ns_has(locals, st->name) && !ns_has(out, st->name)) ns_add(s, out, st->name);
        return;
    case AST_FOR:
        ns_add(s, locals, st->name);
        scan_assigned(s, st->body, locals, out);
        break;
    case AST_IF:
        scan_assigned(s, st->body, locals, out);
        scan_assigned(s, st->else_body, locals, out);
        break;
    case AST_BLOCK:
        for (int i = 0; i < st->nstmts; i++) scan_assigned(s, st->stmts[i], locals, out);
        break;
    default:
        return;
    }
    locals->n = mark;
}

/* The outer vars that `bodies` assign: the candidates for carrying/merging. */
static int assigned_vars(Sema *s, const AstStmt *a, const AstStmt *b, const char *iv, Sym ***out)
{
    NameSet locals = {0}, names = {0};
    if (iv) ns_add(s, &locals, iv);
    scan_assigned(s, a, &locals, &names);
    scan_assigned(s, b, &locals, &names);
    *out = ARENA_ARRAY(s->arena, Sym *, names.n ? names.n : 1);
    int n = 0;
    for (int i = 0; i < names.n; i++) {
        Sym *y = sema_lookup(s, names.names[i]);
        if (y && y->kind == SYM_VAR && y->val.kind == V_RT) (*out)[n++] = y;
    }
    return n;
}

/* ---- bindings ---- */
static void name_hint(IrValue *v, const char *name)
{
    if (v && !v->name && v->def && v->def->op != IR_CONST) v->name = name;
}

static void bind(Sema *s, const AstStmt *st)
{
    Val v = sema_expr(s, st->value);
    bool is_var = st->kind == AST_VAR;
    if (v.kind == V_VOID || v.kind == V_STR || v.kind == V_LIST || v.kind == V_NONE || v.kind == V_SLICE) {
        sema_want_value(s, &v);
        v = val_err();
    }
    if (is_var && (v.kind == V_TYPE || v.kind == V_FN)) {
        diag_error(s->diag, st->value->loc, "a 'var' holds a value, not %s; use 'let' to name it",
                   sema_val_desc(s, &v));
        v = val_err();
    }
    if (is_var && v.kind == V_CONST) v = val_rt(sema_materialize(s, &v, st->value->loc), st->value->loc);
    if (v.kind == V_RT) name_hint(v.v, st->name);
    sema_define(s, st->name, is_var ? SYM_VAR : SYM_LET, v, st->name_loc);
}

static void not_assignable(Sema *s, const AstStmt *st, const Sym *y)
{
    switch (y->kind) {
    case SYM_LET:
        diag_error(s->diag, st->name_loc, "cannot assign to '%s': it is declared with 'let' (use 'var' for a "
                   "mutable variable)", st->name);
        diag_note(s->diag, y->loc, "'%s' is declared here", st->name);
        break;
    case SYM_ITER:
        diag_error(s->diag, st->name_loc, "cannot assign to loop variable '%s'", st->name);
        break;
    case SYM_CONST: case SYM_FILECONST:
        diag_error(s->diag, st->name_loc, "cannot assign to const '%s'", st->name);
        break;
    case SYM_PARAM:
        diag_error(s->diag, st->name_loc, "cannot assign to parameter '%s'; copy it into a 'var' first",
                   st->name);
        break;
    default:
        diag_error(s->diag, st->name_loc, "cannot assign to function '%s'", st->name);
        break;
    }
}

static void assign(Sema *s, const AstStmt *st)
{
    Sym *y = sema_lookup(s, st->name);
    if (!y) {
        diag_error(s->diag, st->name_loc, "unknown name '%s'%s", st->name, sema_suggest(s, st->name, NULL, 0, true));
        sema_expr(s, st->value);
        return;
    }
    Val rhs = sema_expr(s, st->value);
    if (y->kind != SYM_VAR) {
        not_assignable(s, st, y);
        return;
    }
    if (y->val.kind == V_ERR) return;
    if (st->op >= 0) rhs = sema_binary(s, (AstOp)st->op, y->val, rhs, st->loc);
    if (rhs.kind == V_ERR || !sema_want_value(s, &rhs)) {
        y->val = val_err();
        return;
    }
    /* A compile-time value takes the var's type: `m = 0` keeps m an f32 tile. */
    if (rhs.kind == V_CONST) rhs = val_rt(sema_convert(s, &rhs, y->val.v->type, st->value->loc), rhs.loc);
    name_hint(rhs.v, st->name);
    y->val = rhs;
    y->last_assign = st->loc;
}

/* ---- for ---- */
static bool range_bound(Sema *s, const Val *v, const char *what)
{
    if (v->kind == V_ERR || !sema_want_value(s, v)) return false;
    IrType t = sema_val_type(v);
    if (t.rank == 0 && ir_elem_is_int((IrElem)t.elem) && t.elem != IR_I1) return true;
    diag_error(s->diag, v->loc, "the %s of range must be an integer scalar, got %s", what, sema_val_desc(s, v));
    return false;
}

/* Evaluate lo/hi/step as scalars of one integer type. */
static bool range_values(Sema *s, const AstStmt *st, IrValue *out[3])
{
    Val v[3];
    v[0] = sema_expr(s, st->lo);
    v[1] = sema_expr(s, st->hi);
    v[2] = st->step ? sema_expr(s, st->step) : cv_untyped_int(1, st->hi->loc);
    bool ok = range_bound(s, &v[0], "start") & range_bound(s, &v[1], "end") & range_bound(s, &v[2], "step");
    if (!ok) return false;
    if (v[2].kind == V_CONST && v[2].i <= 0) {
        diag_error(s->diag, v[2].loc, "the step of range must be positive, got %lld", (long long)v[2].i);
        return false;
    }
    bool u01, u;
    IrElem e01 = sema_promote((IrElem)sema_val_type(&v[0]).elem, v[0].kind == V_CONST && v[0].untyped,
                              (IrElem)sema_val_type(&v[1]).elem, v[1].kind == V_CONST && v[1].untyped, &u01);
    IrElem e = sema_promote(e01, u01, (IrElem)sema_val_type(&v[2]).elem, v[2].kind == V_CONST && v[2].untyped, &u);
    for (int i = 0; i < 3; i++) out[i] = sema_convert(s, &v[i], ir_type_scalar(e), v[i].loc);
    return true;
}

static void yield_values(Sema *s, SrcLoc loc, int n, IrValue **vals)
{
    sema_emit(s, loc, IR_YIELD, ir_type_scalar(IR_VOID), n, vals);
}

static void lower_for(Sema *s, const AstStmt *st)
{
    IrValue *bounds[3];
    if (!range_values(s, st, bounds)) {
        IrValue *zero = sema_materialize(s, (Val[]){cv_int(0, IR_I32, st->loc)}, st->loc);
        bounds[0] = bounds[1] = bounds[2] = zero; /* keep checking the body */
    }
    Sym **carried;
    int n = assigned_vars(s, st->body, NULL, st->name, &carried);
    IrValue **args = ARENA_ARRAY(s->arena, IrValue *, n + 3);
    IrType *types = ARENA_ARRAY(s->arena, IrType, n ? n : 1);
    memcpy(args, bounds, sizeof bounds);
    for (int i = 0; i < n; i++) {
        args[3 + i] = carried[i]->val.v;
        types[i] = carried[i]->val.v->type;
    }
    IrOp *op = ir_op_new(s->b.f, IR_FOR, st->loc, n + 3, args, n, types);
    irb_insert(&s->b, op);
    IrBlock *body = ir_op_add_region(s->b.f, op);
    IrValue *iv = ir_block_add_arg(body, bounds[0]->type, st->name);
    for (int i = 0; i < n; i++) {
        IrValue *a = ir_block_add_arg(body, types[i], carried[i]->name);
        carried[i]->val = val_rt(a, carried[i]->val.loc);
    }
    IrBuilder saved = s->b;
    s->b.block = body;
    s->b.before = NULL;
    sema_push_scope(s);
    sema_define(s, st->name, SYM_ITER, val_rt(iv, st->name_loc), st->name_loc);
    sema_block(s, st->body);
    sema_pop_scope(s);
    IrValue **ys = ARENA_ARRAY(s->arena, IrValue *, n ? n : 1);
    bool *bad = ARENA_ARRAY(s->arena, bool, n ? n : 1);
    for (int i = 0; i < n; i++) {
        Sym *y = carried[i];
        ys[i] = body->args[i + 1];
        bad[i] = true;
        if (y->val.kind != V_RT) continue;
        if (!ir_type_eq(y->val.v->type, types[i])) {
            diag_error(s->diag, y->last_assign, "loop-carried variable '%s' changes type in the loop: %s before, "
                       "%s after this assignment", y->name, sema_type_str(s, types[i]),
                       sema_type_str(s, y->val.v->type));
            continue;
        }
        ys[i] = y->val.v;
        bad[i] = false;
    }
    yield_values(s, st->loc, n, ys);
    s->b = saved;
    for (int i = 0; i < n; i++) {
        op->res[i]->name = carried[i]->name;
        carried[i]->val = bad[i] ? val_err() : val_rt(op->res[i], st->loc);
    }
}

/* ---- if ---- */
static void set_results(Sema *s, IrOp *op, int n, const IrType *types)
{
    op->nres = n;
    op->res = n ? ARENA_ARRAY(s->arena, IrValue *, n) : NULL;
    for (int i = 0; i < n; i++) {
        IrValue *v = ir_value_new(s->b.f, types[i]);
        v->def = op;
        v->index = i;
        op->res[i] = v;
    }
}

/* Lower one branch into `region`; collect the merged vars' values, restore them. */
static void lower_branch(Sema *s, IrBlock *region, const AstStmt *body, Sym **merged, int n, Val *before,
                         Val *after)
{
    IrBuilder saved = s->b;
    s->b.block = region;
    s->b.before = NULL;
    if (body && body->kind == AST_BLOCK) sema_block(s, body);
    else if (body) sema_stmt(s, body);
    for (int i = 0; i < n; i++) {
        after[i] = merged[i]->val;
        merged[i]->val = before[i];
    }
    s->b = saved;
}

static IrValue *if_condition(Sema *s, const Val *c)
{
    IrType t = sema_val_type(c);
    if (t.rank > 0) {
        diag_error(s->diag, c->loc, "the condition of 'if' must be a scalar, got %s; use where(...) for tiles",
                   sema_type_str(s, t));
    } else if (t.elem == IR_I1) {
        return c->v;
    } else if (ir_elem_is_int((IrElem)t.elem)) {
        Val zero = cv_untyped_int(0, c->loc);
        Val r = sema_binary(s, OP_NE, *c, zero, c->loc);
        if (r.kind == V_RT) return r.v;
    } else {
        diag_error(s->diag, c->loc, "the condition of 'if' must be bool, got %s", sema_type_str(s, t));
    }
    return sema_materialize(s, (Val[]){cv_bool(true, c->loc)}, c->loc);
}

static void lower_if(Sema *s, const AstStmt *st)
{
    Val c = sema_expr(s, st->value);
    if (c.kind == V_CONST) {
        if (c.type.elem != IR_I1 && !cv_is_int(&c)) {
            diag_error(s->diag, c.loc, "the condition of 'if' must be bool, got %s", sema_val_desc(s, &c));
            return;
        }
        const AstStmt *taken = cv_truthy(&c) ? st->body : st->else_body;
        if (taken && taken->kind == AST_BLOCK) sema_block(s, taken);
        else if (taken) sema_stmt(s, taken);
        return;
    }
    /* Runtime (or erroneous: lower both branches anyway to find their errors). */
    IrValue *cond = c.kind == V_ERR || !sema_want_value(s, &c)
                        ? sema_materialize(s, (Val[]){cv_bool(true, st->loc)}, st->loc)
                        : if_condition(s, &c);
    Sym **merged;
    int n = assigned_vars(s, st->body, st->else_body, NULL, &merged);
    Val *before = ARENA_ARRAY(s->arena, Val, n + 1), *vt = ARENA_ARRAY(s->arena, Val, n + 1),
        *ve = ARENA_ARRAY(s->arena, Val, n + 1);
    for (int i = 0; i < n; i++) before[i] = merged[i]->val;
    IrOp *op = ir_op_new(s->b.f, IR_IF, st->loc, 1, &cond, 0, NULL);
    irb_insert(&s->b, op);
    IrBlock *rt = ir_op_add_region(s->b.f, op), *re = ir_op_add_region(s->b.f, op);
    lower_branch(s, rt, st->body, merged, n, before, vt);
    lower_branch(s, re, st->else_body, merged, n, before, ve);
    IrValue **yt = ARENA_ARRAY(s->arena, IrValue *, n + 1), **ye = ARENA_ARRAY(s->arena, IrValue *, n + 1);
    IrType *types = ARENA_ARRAY(s->arena, IrType, n + 1);
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (vt[i].kind != V_RT || ve[i].kind != V_RT) { merged[i]->val = val_err(); continue; }
        if (!ir_type_eq(vt[i].v->type, ve[i].v->type)) {
            diag_error(s->diag, merged[i]->last_assign, "variable '%s' has type %s after the then-branch of "
                       "this 'if' but %s after the else-branch", merged[i]->name,
                       sema_type_str(s, vt[i].v->type), sema_type_str(s, ve[i].v->type));
            merged[i]->val = val_err();
            continue;
        }
        merged[m] = merged[i];
        yt[m] = vt[i].v;
        ye[m] = ve[i].v;
        types[m++] = vt[i].v->type;
    }
    IrBuilder saved = s->b;
    s->b.block = rt;
    yield_values(s, st->loc, m, yt);
    s->b.block = re;
    yield_values(s, st->loc, m, ye);
    s->b = saved;
    set_results(s, op, m, types);
    for (int i = 0; i < m; i++) {
        op->res[i]->name = merged[i]->name;
        merged[i]->val = val_rt(op->res[i], st->loc);
    }
}

/* ---- statements ---- */
void sema_stmt(Sema *s, const AstStmt *st)
{
    if (!st) return;
    switch (st->kind) {
    case AST_LET: case AST_VAR: bind(s, st); break;
    case AST_ASSIGN: assign(s, st); break;
    case AST_EXPR: sema_expr(s, st->value); break;
    case AST_FOR: lower_for(s, st); break;
    case AST_IF: lower_if(s, st); break;
    case AST_BLOCK: sema_block(s, st); break;
    case AST_RETURN:
        if (!s->inl)
            diag_error(s->diag, st->loc, "'return' is not allowed in a kernel (kernels write results with store)");
        else
            diag_error(s->diag, st->loc, "'return' must be the last statement of helper '%s'", s->inl->fn->name);
        if (st->value) sema_expr(s, st->value);
        break;
    }
}

void sema_block(Sema *s, const AstStmt *block)
{
    sema_push_scope(s);
    if (block->kind != AST_BLOCK) sema_stmt(s, block);
    for (int i = 0; block->kind == AST_BLOCK && i < block->nstmts; i++) sema_stmt(s, block->stmts[i]);
    sema_pop_scope(s);
}

/* ---- helpers ---- */

/* Bring an argument to a helper parameter's declared type, if it has one. */
static bool fit_helper_arg(Sema *s, const AstDecl *fn, const AstParam *p, Val *v)
{
    if (v->kind == V_ERR) return true;
    const char *tn = p->type.name;
    if (p->is_const && v->kind != V_CONST && v->kind != V_TYPE && v->kind != V_FN) {
        diag_error(s->diag, v->loc, "argument '%s' of '%s' must be a compile-time constant, got %s", p->name,
                   fn->name, v->kind == V_RT ? "a runtime value" : sema_val_desc(s, v));
        return false;
    }
    if (!tn) return true;
    if (strcmp(tn, "fn") == 0 || strcmp(tn, "dtype") == 0) {
        if (v->kind == (tn[0] == 'f' ? V_FN : V_TYPE)) return true;
        diag_error(s->diag, v->loc, "argument '%s' of '%s' must be %s, got %s", p->name, fn->name,
                   tn[0] == 'f' ? "a helper function" : "a type", sema_val_desc(s, v));
        return false;
    }
    IrElem e = ir_elem_from_name(tn);
    if (!sema_want_value(s, v)) return false;
    if (v->kind == V_CONST && !p->type.is_ptr && e != IR_VOID) {
        *v = cv_convert(v, e);
        return true;
    }
    IrType t = sema_val_type(v);
    bool ok = p->type.is_ptr ? t.elem == IR_PTR && t.pointee == e : t.elem == e;
    if (!ok) {
        diag_error(s->diag, v->loc, "argument '%s' of '%s' must be %s%s, got %s", p->name, fn->name,
                   p->type.is_ptr ? "*" : "", tn, sema_val_desc(s, v));
        return false;
    }
    return true;
}

static Val inline_body(Sema *s, const AstDecl *fn)
{
    const AstStmt *body = fn->body;
    Val result;
    memset(&result, 0, sizeof result);
    result.kind = V_VOID;
    result.loc = fn->name_loc;
    sema_push_scope(s);
    for (int i = 0; i < body->nstmts; i++) {
        const AstStmt *st = body->stmts[i];
        if (st->kind == AST_RETURN && i == body->nstmts - 1) {
            if (st->value) result = sema_expr(s, st->value);
        } else {
            sema_stmt(s, st);
        }
    }
    sema_pop_scope(s);
    return result;
}

/* "k -> h0 -> h1 -> h2": the kernel, then the helpers being inlined, outermost
 * first, then `fn` (at most 6 helpers named from each end). */
static const char *inline_chain(Sema *s, const AstDecl *fn)
{
    const InlineFrame *fr[SEMA_MAX_INLINE_DEPTH + 1];
    int n = 0;
    for (const InlineFrame *f = s->inl; f && n < SEMA_MAX_INLINE_DEPTH; f = f->parent) fr[n++] = f;
    StrBuf sb;
    sb_init(&sb);
    sb_puts(&sb, s->f ? s->f->name : "kernel");
    for (int i = n - 1; i >= 0; i--) {
        int outer = n - 1 - i;
        if (outer < 6 || i < 6) sb_printf(&sb, " -> %s", fr[i]->fn->name);
        else if (outer == 6) sb_printf(&sb, " -> ... (%d more)", n - 12);
    }
    sb_printf(&sb, " -> %s", fn->name);
    const char *r = arena_strdup(s->arena, sb.data ? sb.data : "");
    sb_free(&sb);
    return r;
}

static void report_inline_budget(Sema *s, const AstDecl *fn, SrcLoc loc, bool calls)
{
    if (calls)
        diag_error(s->diag, loc, "too many helper calls to inline: more than %d in this kernel (helpers are "
                   "inlined at every call; call '%s' fewer times; calls: %s)", SEMA_MAX_INLINED_CALLS,
                   fn->name, inline_chain(s, fn));
    else
        diag_error(s->diag, loc, "the kernel is too large after inlining helpers: more than %d operations "
                   "(helpers are inlined at every call; call '%s' fewer times; calls: %s)", SEMA_MAX_KERNEL_OPS,
                   fn->name, inline_chain(s, fn));
}

Val sema_inline_call(Sema *s, const AstDecl *fn, Val *args, SrcLoc loc)
{
    for (InlineFrame *fr = s->inl; fr; fr = fr->parent)
        if (fr->fn == fn) {
            diag_error(s->diag, loc, "recursive call to helper '%s'; helpers are inlined, so they cannot "
                       "call themselves", fn->name);
            return val_err();
        }
    for (int i = 0; i < s->bad_helpers.len; i++)
        if (s->bad_helpers.data[i] == fn) return val_err(); /* its errors were reported once */
    if (s->inline_depth >= SEMA_MAX_INLINE_DEPTH) {
        diag_error(s->diag, loc, "helpers nested more than %d calls deep", SEMA_MAX_INLINE_DEPTH);
        return val_err();
    }
    /* Helpers are inlined: two calls of the next helper per helper, 22 deep,
     * would be 4 million copies; eight calls of a helper of 2000 ops, 7 deep,
     * would be 4 billion ops. Bound the work per kernel (calls and ops),
     * report it once, naming the chain of calls that got there. */
    bool too_many_calls = ++s->inlined_calls > SEMA_MAX_INLINED_CALLS;
    if (too_many_calls || s->kernel_ops > SEMA_MAX_KERNEL_OPS) {
        if (!s->inline_budget_reported) report_inline_budget(s, fn, loc, too_many_calls);
        s->inline_budget_reported = true;
        return val_err();
    }
    Scope *saved = s->scope;
    s->scope = s->file_scope;
    sema_push_scope(s);
    bool ok = true;
    for (int i = 0; i < fn->nparams; i++) {
        const AstParam *p = &fn->params[i];
        if (!fit_helper_arg(s, fn, p, &args[i])) { args[i] = val_err(); ok = false; }
        sema_define(s, p->name, p->is_const ? SYM_CONST : SYM_PARAM, args[i], p->loc);
    }
    InlineFrame fr = {fn, loc, s->inl};
    s->inl = &fr;
    s->inline_depth++;
    int errors = s->diag->nerrors;
    Val r = inline_body(s, fn);
    s->inline_depth--;
    s->inl = fr.parent;
    s->scope = saved;
    if (s->diag->nerrors > errors) {
        vec_push(s->arena, &s->bad_helpers, (void *)fn);
        return val_err();
    }
    if (!ok && r.kind != V_VOID) return val_err();
    if (r.kind != V_ERR) r.loc = loc;
    return r;
}

/* A call whose helper lives in another file than the call: a hook bound by a variant
 * and called by a library program. Its arity error belongs at the user's helper, with
 * the program's call as a note (the user cannot change the program). */
static void arity_error(Sema *s, const AstDecl *fn, SrcLoc at, SrcLoc call, const char *msg)
{
    bool elsewhere = fn->name_loc.file && call.file && strcmp(fn->name_loc.file, call.file) != 0;
    for (int i = 0; elsewhere && i < s->bad_helpers.len; i++)
        if (s->bad_helpers.data[i] == fn) return;   /* once per helper, not once per call site */
    diag_error(s->diag, elsewhere ? fn->name_loc : at, "%s", msg);
    if (!elsewhere) return;
    diag_note(s->diag, call, "'%s' is called here", fn->name);
    vec_push(s->arena, &s->bad_helpers, (void *)fn);
}

/* Bind call arguments (positional, then keyword) to the helper's parameters. */
Val sema_call_helper(Sema *s, const Val *f, const AstExpr *call)
{
    const AstDecl *fn = f->fn;
    int grad = f->grad;
    int np = fn->nparams;
    Val *args = ARENA_ARRAY(s->arena, Val, np ? np : 1);
    bool *have = ARENA_ARRAY(s->arena, bool, np ? np : 1);
    bool ok = true;
    for (int i = 0; i < call->nargs; i++) {
        const AstArg *a = &call->args[i];
        int k = -1;
        if (!a->name) {
            k = i < np ? i : -1;
            if (k < 0) {
                arity_error(s, fn, a->loc, call->loc,
                            arena_printf(s->arena, "helper '%s' takes %d argument%s, got %d", fn->name, np,
                                         np == 1 ? "" : "s", call->nargs));
                return val_err();
            }
        } else {
            for (int j = 0; j < np; j++)
                if (strcmp(fn->params[j].name, a->name) == 0) k = j;
            if (k < 0) {
                diag_error(s->diag, a->loc, "helper '%s' has no parameter named '%s'", fn->name, a->name);
                ok = false;
                continue;
            }
            if (have[k]) {
                diag_error(s->diag, a->loc, "argument '%s' of '%s' is given twice", a->name, fn->name);
                ok = false;
                continue;
            }
        }
        args[k] = sema_expr(s, a->value);
        have[k] = true;
    }
    for (int j = 0; j < np && ok; j++) {
        if (have[j]) continue;
        const AstParam *p = &fn->params[j];
        if (!p->default_value) {
            arity_error(s, fn, call->loc, call->loc,
                        arena_printf(s->arena, "missing argument '%s' in call to helper '%s'", p->name, fn->name));
            ok = false;
            break;
        }
        /* A default sees the file and the helper's earlier parameters that hold
         * compile-time values (`const MASK_BLOCK_N: i32 = BLOCK_N`). */
        Scope *saved = s->scope;
        s->scope = s->file_scope;
        sema_push_scope(s);
        for (int q = 0; q < j; q++)
            if (args[q].kind == V_CONST || args[q].kind == V_TYPE || args[q].kind == V_FN)
                sema_define(s, fn->params[q].name, SYM_CONST, args[q], fn->params[q].loc);
        args[j] = sema_const_expr(s, p->default_value);
        s->scope = saved;
        if (args[j].kind == V_RT) {
            diag_error(s->diag, p->default_value->loc, "the default of '%s' is not a compile-time constant",
                       p->name);
            ok = false;
        }
    }
    if (!ok) return val_err();
    if (f->rescaled) return sema_inline_rescaled(s, f, args, call->loc);
    if (grad) return sema_inline_grad(s, fn, args, grad, call->loc);
    return sema_inline_call(s, fn, args, call->loc);
}
