/* sema.c — lang_compile: declarations, scopes, const parameters, schedules.
 *
 * What: builds the file scope (file-level consts, evaluated lazily on first
 * use; helpers), then specialises and lowers each selected kernel: runtime
 * parameters become IrFunc params, const parameters take their value from
 * LangOptions.defines (parsed per the declared type), else their default, and
 * are recorded in IrFunc.consts; `with (num_warps = ..., num_stages = ...)`
 * is evaluated and validated into IrFunc.sched (LangOptions overrides win);
 * LangOptions.hints set IrValue.divisibility of runtime integer / pointer
 * parameters (checked: a power of two, naming a runtime parameter), and an
 * equals-one hint binds an integer parameter's name to an IR constant 1 (the
 * IrFunc keeps the parameter, unused);
 * the body is lowered by lower_stmt.c and ends with `return`. Instances
 * (`kernel k_f16 = k(T = f16);`) are expanded first into kernels of their own
 * (expand_instances); a pointer's element type may name a `const T: dtype`
 * parameter (elem_param), and a kernel whose such T has no value is generic:
 * compiled only through its instances.
 * Invariants: scopes nest file -> kernel params -> blocks; a helper body's
 * scope hangs off the file scope (helpers never see the caller's locals);
 * lang_compile returns NULL iff it reported an error.
 * Example: `kernel k(X: *f32, const B: i32 = 64) with (num_warps = B / 16)`
 * compiled with -D B=128 -> IrFunc k(X: ptr<f32>) consts(B: i32 = 128)
 * num_warps = 8.
 */
#include "sema.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- scopes ---- */
void sema_push_scope(Sema *s)
{
    Scope *sc = ARENA_NEW(s->arena, Scope);
    sc->parent = s->scope;
    s->scope = sc;
}

void sema_pop_scope(Sema *s)
{
    if (s->scope) s->scope = s->scope->parent;
}

static uint32_t name_hash(const char *s)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 16777619u;
    return h;
}

static Sym *lookup_in(Scope *sc, const char *name)
{
    if (sc->buckets) {
        for (Sym *y = sc->buckets[name_hash(name) & (uint32_t)(sc->nbuckets - 1)]; y; y = y->hnext)
            if (strcmp(y->name, name) == 0) return y;
        return NULL;
    }
    for (Sym *y = sc->syms; y; y = y->next)
        if (strcmp(y->name, name) == 0) return y;
    return NULL;
}

/* Rebuilds the table with twice the buckets (or the first one), newest first
 * in each chain, so a lookup finds the latest declaration as the list does. */
static void rehash(Sema *s, Scope *sc)
{
    int nb = sc->nbuckets ? sc->nbuckets * 2 : 64;
    Sym **b = ARENA_ARRAY(s->arena, Sym *, nb);
    Sym *rev = NULL; /* oldest first, so pushing onto chains leaves the newest in front */
    for (Sym *y = sc->syms; y; y = y->next) y->hnext = rev, rev = y;
    while (rev) {
        Sym *y = rev;
        rev = y->hnext;
        uint32_t h = name_hash(y->name) & (uint32_t)(nb - 1);
        y->hnext = b[h];
        b[h] = y;
    }
    sc->buckets = b;
    sc->nbuckets = nb;
}

Sym *sema_lookup(Sema *s, const char *name)
{
    for (Scope *sc = s->scope; sc; sc = sc->parent) {
        Sym *y = lookup_in(sc, name);
        if (y) return y;
    }
    return NULL;
}

Sym *sema_define(Sema *s, const char *name, SymKind kind, Val v, SrcLoc loc)
{
    Scope *sc = s->scope;
    Sym *prev = lookup_in(sc, name);
    if (prev) {
        diag_error(s->diag, loc, "'%s' is already declared in this scope", name);
        diag_note(s->diag, prev->loc, "previous declaration of '%s'", name);
    }
    Sym *y = ARENA_NEW(s->arena, Sym);
    y->name = name;
    y->kind = kind;
    y->val = v;
    y->loc = loc;
    y->last_assign = loc;
    y->next = sc->syms;
    sc->syms = y;
    sc->nsyms++;
    if (sc->nsyms > 2 * sc->nbuckets && sc->nsyms > 16) {
        rehash(s, sc);
    } else if (sc->buckets) {
        uint32_t h = name_hash(name) & (uint32_t)(sc->nbuckets - 1);
        y->hnext = sc->buckets[h];
        sc->buckets[h] = y;
    }
    return y;
}

/* ---- suggestions ---- */
static void consider(const char *name, const char *cand, const char **best, int *bestd)
{
    if (!cand || strcmp(name, cand) == 0) return;
    /* a difference in case only is the best possible guess */
    int d = strcasecmp(name, cand) == 0 ? 0 : sup_edit_distance(name, cand);
    if (d < *bestd) {
        *bestd = d;
        *best = cand;
    }
}

const char *sema_suggest(Sema *s, const char *name, const char *const *extra, int nextra, bool values)
{
    /* Past the error limit the message is dropped: do not search (20k unknown
     * names in a big scope would be quadratic). */
    if (s->diag->nerrors >= DIAG_MAX_ERRORS) return "";
    const char *best = NULL;
    int bestd = 1000;
    for (Scope *sc = s->scope; sc; sc = sc->parent)
        for (Sym *y = sc->syms; y; y = y->next)
            if (values || y->kind == SYM_FN || y->val.kind == V_FN) consider(name, y->name, &best, &bestd);
    for (int i = 0; i < nextra; i++) consider(name, extra[i], &best, &bestd);
    /* Short names have too many neighbours to guess from: 'n' is not 'c'. */
    int len = (int)strlen(name);
    int limit = len <= 2 ? 0 : len <= 4 ? 1 : len <= 8 ? 2 : 3;
    if (!best || bestd > limit) return "";
    return arena_printf(s->arena, "; did you mean '%s'?", best);
}

/* ---- compile-time evaluation contexts ---- */
Val sema_const_expr(Sema *s, const AstExpr *e)
{
    IrBuilder saved = s->b;
    s->b.f = s->scratch;
    s->b.block = s->scratch->body;
    s->b.before = NULL;
    Val v = sema_expr(s, e);
    s->b = saved;
    return v;
}

static bool is_const_like(const Val *v) { return v->kind == V_CONST || v->kind == V_TYPE || v->kind == V_FN; }

static const AstDecl *find_decl(Sema *s, AstDeclKind kind, const char *name)
{
    for (int i = 0; i < s->file->ndecls; i++) {
        const AstDecl *d = s->file->decls[i];
        if (d->kind == kind && strcmp(d->name, name) == 0) return d;
    }
    return NULL;
}

static int find_define(Sema *s, const char *name)
{
    for (int i = 0; s->opts && i < s->opts->ndefines; i++)
        if (strcmp(s->opts->defines[i].name, name) == 0) {
            s->define_used[i] = true;
            return i;
        }
    return -1;
}

/* Parse "128", "0x10", "1_024", "-3" fully; false if anything is left over. */
static bool parse_int_text(const char *t, int64_t *out)
{
    char buf[80];
    size_t k = 0;
    for (const char *p = t; *p && k + 1 < sizeof buf; p++)
        if (*p != '_') buf[k++] = *p;
    buf[k] = 0;
    if (k == 0) return false;
    const char *q = buf;
    bool neg = *q == '-';
    if (*q == '-' || *q == '+') q++;
    int base = 10;
    if (q[0] == '0' && (q[1] == 'x' || q[1] == 'X')) { base = 16; q += 2; }
    else if (q[0] == '0' && (q[1] == 'b' || q[1] == 'B')) { base = 2; q += 2; }
    if (!*q) return false;
    char *end;
    errno = 0;
    unsigned long long u = strtoull(q, &end, base);
    if (*end || errno) return false;
    *out = neg ? (int64_t)(0 - u) : (int64_t)u;
    return true;
}

/* A -D value, read as the declared type of the const (or, for a file-level
 * const, as whatever literal it looks like). */
static bool parse_define(Sema *s, const char *text, const char *tname, IrElem te, Val *out, SrcLoc loc)
{
    int64_t iv;
    char *end;
    bool is_dtype = tname && strcmp(tname, "dtype") == 0, is_fn = tname && strcmp(tname, "fn") == 0;
    if (is_fn || (!tname && find_decl(s, AST_FN, text))) {
        /* a helper's name, or its derivative grad(name), grad(grad(name)), ... */
        int order = 0;
        size_t n = strlen(text);
        const char *name = text;
        for (; n > 6 && strncmp(name, "grad(", 5) == 0 && name[n - 1] == ')'; order++) name += 5, n -= 6;
        const AstDecl *d = find_decl(s, AST_FN, arena_strndup(s->arena, name, n));
        if (!d || (order && d->nparams == 0)) return false;
        memset(out, 0, sizeof *out);
        out->kind = V_FN, out->fn = d, out->grad = order, out->s = order ? text : d->name, out->loc = loc;
        return true;
    }
    IrElem named = ir_elem_from_name(text);
    if (is_dtype || (!tname && named != IR_VOID && named != IR_PTR)) {
        if (named == IR_VOID || named == IR_PTR) return false;
        memset(out, 0, sizeof *out);
        out->kind = V_TYPE, out->type = ir_type_scalar(named), out->s = text, out->loc = loc;
        return true;
    }
    if (strcmp(text, "true") == 0 || strcmp(text, "false") == 0) {
        if (tname && te != IR_I1) return false;
        *out = cv_bool(text[0] == 't', loc);
        return true;
    }
    if (parse_int_text(text, &iv)) {
        if (tname && te == IR_I1 && iv != 0 && iv != 1) return false;
        *out = tname ? cv_convert((Val[]){cv_untyped_int(iv, loc)}, te) : cv_untyped_int(iv, loc);
        if (tname && ir_elem_is_int(te) && out->i != iv) return false; /* does not fit */
        return true;
    }
    double d = strtod(text, &end);
    if (*text && !*end && (!tname || ir_elem_is_float(te))) {
        *out = tname ? cv_float(d, te, false, loc) : cv_float(d, IR_F32, true, loc);
        return true;
    }
    return false;
}

/* ---- module-level runtime parameters (`param NAME: type;`) ----
 * A hook reads one as a name; the kernel it is inlined into gets it as a runtime
 * parameter after its own (in declaration order: order_module_params), once per
 * kernel however often it is read. A kernel that never reads it does not have it,
 * so a program with no variant params keeps its signature and its code. */
typedef enum { PT_VALUE, PT_FN, PT_DTYPE } ParamClass;
static bool param_type(Sema *s, const AstParam *p, IrType *t, ParamClass *pc);
static bool apply_hint(Sema *s, const AstParam *p, IrValue *pv);

/* A module-level param is a runtime value of a value type (fn and dtype are
 * compile-time choices; an unknown type is param_type's error). */
static bool module_param_type_ok(Sema *s, const AstParam *p)
{
    if (!strcmp(p->type.name, "fn") || !strcmp(p->type.name, "dtype")) {
        diag_error(s->diag, p->type.loc, "a module-level param is a runtime value: '%s' cannot be a '%s' "
                   "(a compile-time choice is a `const NAME = ...;`)", p->name, p->type.name);
        return false;
    }
    IrType t;
    ParamClass pc;
    if (!param_type(s, p, &t, &pc)) return false;
    /* a differentiable param's gradient is accumulated in f32 at the addresses it is read at */
    if (p->differentiable && !(t.elem == IR_PTR && t.pointee == IR_F32)) {
        diag_error(s->diag, p->differentiable_loc, "a differentiable param must be an f32 tensor ('*f32': its "
                   "gradient is accumulated in f32 where it is loaded), but '%s' is '%s%s'", p->name,
                   p->type.is_ptr ? "*" : "", p->type.name);
        return false;
    }
    return true;
}

static Val module_param_value(Sema *s, Sym *y)
{
    if (y->param_of == s->f) return y->val;
    const AstParam *p = &y->decl->params[0];
    IrType t;
    ParamClass pc;
    y->param_of = s->f;
    y->val = val_err();
    if (!param_type(s, p, &t, &pc) || pc != PT_VALUE) return y->val;   /* build_file_scope reported it */
    for (int i = 0; i < s->f->nparams; i++)
        if (s->f->params[i]->name && !strcmp(s->f->params[i]->name, p->name)) {
            diag_error(s->diag, y->decl->name_loc, "param '%s' has the name of a parameter of kernel '%s'; "
                       "rename it", p->name, s->f->name);
            return y->val;
        }
    IrValue *pv = ir_func_add_param(s->f, t, p->name);
    y->val = val_rt(pv, p->loc);
    if (apply_hint(s, p, pv)) {   /* NAME==1: as for a kernel parameter (bind_params) */
        Val one = cv_int(1, (IrElem)t.elem, p->loc);
        IrBuilder saved = s->b;   /* the constant goes at the top of the kernel, where every use sees it */
        s->b.f = s->f;
        s->b.block = s->f->body;
        s->b.before = s->f->body->first;
        y->val = val_rt(sema_materialize(s, &one, p->loc), p->loc);
        s->b = saved;
    }
    return y->val;
}

/* The module params the kernel read were appended in the order of first use:
 * put them in declaration order, so the signature does not depend on the hooks' code. */
static void order_module_params(Sema *s)
{
    IrFunc *f = s->f;
    int k = s->nown_params;
    for (int i = 0; i < s->file->ndecls; i++) {
        const AstDecl *d = s->file->decls[i];
        if (d->kind != AST_PARAM) continue;
        for (int j = k; j < f->nparams; j++)
            if (f->params[j]->name && !strcmp(f->params[j]->name, d->name)) {
                IrValue *tmp = f->params[k];
                f->params[k] = f->params[j];
                f->params[j] = tmp;
                k++;
                break;
            }
    }
    for (int i = 0; i < f->nparams; i++) f->params[i]->index = i;
}

/* ---- file scope ---- */
Val sema_sym_value(Sema *s, Sym *y, SrcLoc use)
{
    if (y->kind == SYM_PARAM && y->decl && y->decl->kind == AST_PARAM) return module_param_value(s, y);
    if (y->kind != SYM_FILECONST) return y->val;
    if (y->state == 1) {
        diag_error(s->diag, use, "file-level const '%s' is defined in terms of itself", y->name);
        y->kind = SYM_CONST;
        y->val = val_err();
        return y->val;
    }
    if (s->const_depth >= SEMA_MAX_CONST_DEPTH) {
        diag_error(s->diag, use, "file-level consts defined through one another more than %d deep "
                   "(evaluating '%s')", SEMA_MAX_CONST_DEPTH, y->name);
        y->kind = SYM_CONST;
        y->val = val_err();
        return y->val;
    }
    y->state = 1;
    s->const_depth++;
    Scope *saved_scope = s->scope;
    InlineFrame *saved_inl = s->inl;
    s->scope = s->file_scope;
    s->inl = NULL;
    Val v;
    int di = find_define(s, y->name);
    if (di >= 0) {
        const char *text = s->opts->defines[di].value;
        if (!parse_define(s, text, NULL, IR_VOID, &v, y->decl->loc)) {
            diag_error(s->diag, y->decl->name_loc, "invalid value '%s' given for const '%s' (-D %s=%s)",
                       text, y->name, y->name, text);
            v = val_err();
        }
    } else {
        v = sema_const_expr(s, y->decl->value);
        if (v.kind != V_ERR && !is_const_like(&v)) {
            diag_error(s->diag, y->decl->value->loc, "the value of const '%s' is not a compile-time constant",
                       y->name);
            v = val_err();
        }
    }
    s->scope = saved_scope;
    s->inl = saved_inl;
    s->const_depth--;
    y->kind = SYM_CONST;
    y->val = v;
    return v;
}

/* A file-level fn, const or param named like a built-in function, a named constant or a
 * type would replace it in every kernel of the file: in a variant, inside the imported
 * programs too (`fn store` made an attention kernel with no stores). Refused, at the name. */
static bool reserved_name(Sema *s, const AstDecl *d)
{
    const char *what = sema_is_builtin_name(d->name)    ? "a built-in function"
                       : sema_is_named_const(d->name)    ? "a built-in constant"
                       : ir_elem_from_name(d->name) != IR_VOID && ir_elem_from_name(d->name) != IR_PTR ? "a type"
                                                         : NULL;
    if (!what) return false;
    const char *kind = d->kind == AST_FN ? "helper" : d->kind == AST_PARAM ? "param" : "const";
    diag_error(s->diag, d->name_loc, "'%s' is %s; a file-level %s of that name would replace it in every kernel "
               "of the file (the imported programs' too): rename the %s", d->name, what, kind, kind);
    return true;
}

static void build_file_scope(Sema *s)
{
    sema_push_scope(s);
    s->file_scope = s->scope;
    for (int i = 0; i < s->file->ndecls; i++) {
        const AstDecl *d = s->file->decls[i];
        if (d->kind == AST_KERNEL) {
            const AstDecl *first = find_decl(s, AST_KERNEL, d->name);
            if (first != d) {
                diag_error(s->diag, d->name_loc, "kernel '%s' is already defined", d->name);
                diag_note(s->diag, first->name_loc, "previous definition of '%s'", d->name);
            }
            continue;
        }
        if (d->kind == AST_TUNE) continue;   /* the tuner's: sema_tune_check below */
        if (d->kind == AST_IMPORT) {   /* kiln_compile resolves imports before sema */
            diag_error(s->diag, d->loc, "import of '%s' reached the front end unresolved; compile through "
                       "kiln_compile (the driver loads modules)", d->name);
            continue;
        }
        if (reserved_name(s, d)) continue;
        Val v;
        memset(&v, 0, sizeof v);
        if (d->kind == AST_FN) {
            v.kind = V_FN, v.fn = d, v.s = d->name, v.loc = d->name_loc;
        }
        SymKind kind = d->kind == AST_FN ? SYM_FN : d->kind == AST_PARAM ? SYM_PARAM : SYM_FILECONST;
        /* a param's type is checked here, used or not (once per file); a bad one is an
         * error value, so its uses add nothing */
        if (d->kind == AST_PARAM && !module_param_type_ok(s, &d->params[0])) kind = SYM_CONST;
        Sym *y = sema_define(s, d->name, kind, d->kind == AST_PARAM ? val_err() : v, d->name_loc);
        y->decl = d;
    }
}

/* ---- kernel parameters ---- */

static bool param_type(Sema *s, const AstParam *p, IrType *t, ParamClass *pc)
{
    const AstType *at = &p->type;
    *pc = PT_VALUE;
    if (strcmp(at->name, "fn") == 0 || strcmp(at->name, "dtype") == 0) {
        *pc = at->name[0] == 'f' ? PT_FN : PT_DTYPE;
        *t = ir_type_scalar(IR_VOID);
        if (at->is_ptr || !p->is_const) {
            diag_error(s->diag, at->loc, "a '%s%s' parameter must be const", at->is_ptr ? "*" : "", at->name);
            return false;
        }
        return true;
    }
    IrElem e = ir_elem_from_name(at->name);
    if (e == IR_VOID || e == IR_PTR) {
        static const char *const names[] = {"i1", "bool", "i8", "i16", "i32", "i64", "u8", "u16", "u32",
                                            "u64", "f16", "bf16", "f32", "f64", "f8e4m3", "fn", "dtype"};
        const char *best = NULL;
        int bestd = 3;
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
            int d = sup_edit_distance(at->name, names[i]);
            if (d < bestd) { bestd = d; best = names[i]; }
        }
        diag_error(s->diag, at->loc, "unknown type '%s'%s", at->name,
                   best ? arena_printf(s->arena, "; did you mean '%s'?", best) : "");
        return false;
    }
    if (at->is_ptr && p->is_const) {
        diag_error(s->diag, at->loc, "a const parameter cannot be a pointer");
        return false;
    }
    *t = at->is_ptr ? ir_type_ptr(e) : ir_type_scalar(e);
    return true;
}

/* Bring a compile-time value to the declared class/type of a const parameter. */
static bool fit_const(Sema *s, const AstParam *p, ParamClass pc, IrType t, Val *v, const char *what)
{
    bool ok = pc == PT_FN ? v->kind == V_FN : pc == PT_DTYPE ? v->kind == V_TYPE : v->kind == V_CONST;
    if (!ok) {
        static const char *const need[] = {"a number or bool", "a helper function", "a type"};
        diag_error(s->diag, v->loc.line ? v->loc : p->loc, "%s for '%s' must be %s, got %s", what, p->name,
                   need[pc], sema_val_desc(s, v));
        return false;
    }
    if (pc == PT_VALUE) *v = cv_convert(v, (IrElem)t.elem);
    return true;
}

static void record_const(Sema *s, IrConstParam *c, const AstParam *p, ParamClass pc, IrType t, const Val *v)
{
    (void)s;
    c->name = p->name;
    c->type = t;
    if (pc == PT_FN) c->sval = v->s;
    else if (pc == PT_DTYPE) { c->type = v->type; c->sval = v->s; }
    else { c->ival = v->i; c->fval = v->kind == V_CONST && ir_elem_is_float((IrElem)t.elem) ? v->f : (double)v->i; }
}

static Val const_param_value(Sema *s, const AstDecl *k, const AstParam *p, ParamClass pc, IrType t)
{
    int di = find_define(s, p->name);
    Val v;
    if (di >= 0) {
        const char *text = s->opts->defines[di].value;
        IrElem te = (IrElem)t.elem;
        if (!parse_define(s, text, p->type.name, te, &v, p->loc)) {
            diag_error(s->diag, p->loc, "invalid value '%s' for const parameter '%s: %s' (-D %s=%s)", text,
                       p->name, p->type.name, p->name, text);
            return val_err();
        }
        return v;
    }
    /* A helper named like a `const NAME: fn` parameter is that parameter's value: a
     * variant file binds the program's hooks by defining them (fn score_mod ...). */
    const AstDecl *hook = pc == PT_FN ? find_decl(s, AST_FN, p->name) : NULL;
    if (hook) {
        memset(&v, 0, sizeof v);
        v.kind = V_FN, v.fn = hook, v.s = hook->name, v.loc = hook->name_loc;
        return v;
    }
    if (!p->default_value) {
        diag_error(s->diag, p->loc,
                   "no value for const parameter '%s' of kernel '%s'; pass -D %s=VALUE or give it a default",
                   p->name, k->name, p->name);
        return val_err();
    }
    v = sema_const_expr(s, p->default_value);
    if (v.kind == V_RT) {
        diag_error(s->diag, p->default_value->loc, "the default of '%s' is not a compile-time constant",
                   p->name);
        return val_err();
    }
    if (v.kind == V_ERR || !fit_const(s, p, pc, t, &v, "the default")) return val_err();
    return v;
}

/* ---- divisibility / equals-one hints (LangOptions.hints) ---- */
static bool hint_value_ok(const LangHint *h)
{
    if (h->equals_one) return h->divisibility == 0 || h->divisibility == 1;
    return h->divisibility >= 1 && h->divisibility <= (1 << 30) && sup_is_pow2(h->divisibility);
}

/* The hint as the user wrote it, for messages: "n=16" or "n==1". */
static const char *hint_text(Sema *s, const LangHint *h)
{
    const char *name = h->name ? h->name : "";
    return h->equals_one ? arena_printf(s->arena, "%s==1", name)
                         : arena_printf(s->arena, "%s=%d", name, h->divisibility);
}

/* The hints for runtime parameter `p`: divisibility ones become the IR
 * parameter's divisibility (bytes of alignment for pointers), which the
 * backend's axis info reads. Returns true when an equals-one hint applies
 * (the caller then binds the name to a constant 1). */
static bool apply_hint(Sema *s, const AstParam *p, IrValue *pv)
{
    bool one = false;
    IrElem e = (IrElem)pv->type.elem;
    bool is_int = ir_elem_is_int(e) && e != IR_I1;
    for (int i = 0; s->opts && i < s->opts->nhints; i++) {
        const LangHint *h = &s->opts->hints[i];
        if (!h->name || strcmp(h->name, p->name) || !hint_value_ok(h)) continue;
        if (h->equals_one) {
            if (is_int) one = true;
            else
                diag_error(s->diag, p->loc, "hint %s==1: '%s' is a %s parameter; ==1 hints apply to integer "
                           "parameters", h->name, p->name, e == IR_I1 ? "bool" : sema_type_str(s, pv->type));
            continue;
        }
        if (e != IR_PTR && !is_int) {
            diag_error(s->diag, p->loc,
                       "hint %s=%d: '%s' is a %s parameter; divisibility hints apply to integer and pointer "
                       "parameters", h->name, h->divisibility, p->name, ir_elem_name(e));
            continue;
        }
        if (h->divisibility > pv->divisibility) pv->divisibility = h->divisibility;
    }
    if (one && pv->divisibility > 1) {
        diag_error(s->diag, p->loc, "hints %s==1 and %s=%d contradict each other (1 is not a multiple of %d)",
                   p->name, p->name, pv->divisibility, pv->divisibility);
        return false;
    }
    return one;
}

/* A hint naming a parameter that lowering generates (lang.h's list: X__grad, X__numel of a
 * differentiable param X, X's length in *xlen): 1 when a compiled kernel of m has it, 0 when
 * none does; -1: not such a name. */
static int generated_param_hint(const Sema *s, const IrModule *m, const char *name, int *xlen)
{
    LangGenParam which;
    size_t n;
    if (!lang_gen_param_split(name, &which, &n)) return -1;
    bool declared = false;
    for (int j = 0; j < s->file->ndecls && !declared; j++) {
        const AstDecl *d = s->file->decls[j];
        declared = d->kind == AST_PARAM && d->nparams && d->params[0].differentiable && strlen(d->name) == n &&
                   !strncmp(d->name, name, n);
    }
    if (!declared) return -1;
    *xlen = (int)n;
    for (int f = 0; f < m->nfuncs; f++)
        for (int q = 0; q < m->funcs[f]->nparams; q++)
            if (m->funcs[f]->params[q]->name && !strcmp(m->funcs[f]->params[q]->name, name)) return 1;
    return 0;
}

/* Every hint must name a runtime parameter of a selected kernel and be a
 * power of two (the axis analysis works in powers of two). A parameter that lowering
 * generates counts for the compiled kernels that have it (compiled: none failed). */
static void check_hints(Sema *s, const AstDecl *only, const IrModule *m, bool compiled)
{
    SrcLoc none = {s->file->path, 0, 0};
    for (int i = 0; s->opts && i < s->opts->nhints; i++) {
        const LangHint *h = &s->opts->hints[i];
        const char *name = h->name ? h->name : "";
        if (!hint_value_ok(h) && h->equals_one)
            diag_error(s->diag, none, "hint %s==1 with divisibility %d: an equals-one hint carries no "
                       "divisibility (0 or 1)", name, h->divisibility);
        else if (!hint_value_ok(h))
            diag_error(s->diag, none, "hint %s=%d: the divisibility must be a power of two between 1 and 2^30",
                       name, h->divisibility);
        bool found = false, is_const = false;
        const char *best = NULL;
        /* consider() keeps a candidate only when strictly closer than bestd:
         * start one past the largest distance worth suggesting. */
        int bestd = (strlen(name) <= 2 ? 1 : strlen(name) <= 4 ? 2 : 3) + 1;
        for (int j = 0; j < s->file->ndecls && !found; j++) {
            const AstDecl *d = s->file->decls[j];
            if (d->kind == AST_PARAM) {   /* a kernel's parameter when one of its hooks reads it */
                found = !strcmp(d->name, name);
                continue;
            }
            if (d->kind != AST_KERNEL || (only && d != only)) continue;
            for (int q = 0; q < d->nparams; q++) {
                if (!strcmp(d->params[q].name, name)) {
                    found = !d->params[q].is_const;
                    is_const |= d->params[q].is_const;
                } else if (!d->params[q].is_const) {
                    consider(name, d->params[q].name, &best, &bestd);
                }
            }
        }
        if (found) continue;
        int xlen = 0, gen = generated_param_hint(s, m, name, &xlen);
        if (gen > 0 || (gen == 0 && !compiled)) continue;   /* a kernel that failed lacks them: no second error */
        if (gen == 0)
            diag_error(s->diag, none, "hint %s: param_grads adds '%s' only to a kernel whose call differentiates a "
                       "load of '%.*s'; %s has none", hint_text(s, h), name, xlen, name,
                       only ? arena_printf(s->arena, "kernel '%s'", only->name) : "no kernel of the file");
        else if (is_const)
            diag_error(s->diag, none, "hint %s: '%s' is a const parameter (its value is known; hints are for "
                       "runtime parameters)", hint_text(s, h), name);
        else
            diag_error(s->diag, none, "hint %s: no runtime parameter is named '%s'%s", hint_text(s, h), name,
                       best ? arena_printf(s->arena, "; did you mean '%s'?", best) : "");
    }
}

/* ---- generic kernels: `Q: *T` with `const T: dtype`, and their instances ---- */

static const AstParam *find_param(const AstDecl *k, const char *name, int *index)
{
    for (int i = 0; i < k->nparams; i++)
        if (!strcmp(k->params[i].name, name)) {
            if (index) *index = i;
            return &k->params[i];
        }
    return NULL;
}

/* An instance's bindings, as consts of the kernel's scope. They are not the
 * kernel's const parameters (it has none of these names): IrFunc.consts, -D and
 * the signature are those of a kernel written with the values in place. */
static void bind_instance(Sema *s, const AstDecl *k)
{
    for (int i = 0; i < k->nbindings; i++) {
        const AstArg *a = &k->bindings[i];
        const AstParam *p = find_param(k->generic, a->name, NULL);
        IrType t;
        ParamClass pc;
        Val v = sema_const_expr(s, a->value);
        if (v.kind == V_RT) {
            diag_error(s->diag, a->value->loc, "the value bound to '%s' is not a compile-time constant", a->name);
            v = val_err();
        }
        if (v.kind != V_ERR && (!param_type(s, p, &t, &pc) || !fit_const(s, p, pc, t, &v, "the value bound")))
            v = val_err();
        v.untyped = false;
        sema_define(s, p->name, SYM_CONST, v, a->loc);
    }
}

/* The element type of pointer parameter `p` when it names a `const T: dtype`
 * parameter of the kernel (or a binding of its instance) instead of a scalar
 * type. The dtype parameter is bound here if it comes later in the list
 * (bound[] marks it). Returns false, having reported, when the name is one of
 * the kernel's parameters but not a const dtype; *found = false when it is no
 * parameter at all (param_type then reports an unknown type). */
static bool elem_param(Sema *s, const AstDecl *k, const AstParam *p, bool *bound, IrType *t, bool *found)
{
    const char *tn = p->type.name;
    *found = false;
    Sym *y = NULL;
    for (Sym *q = s->scope->syms; q && !y; q = q->next)
        if (!strcmp(q->name, tn)) y = q;
    int j = -1;
    const AstParam *tp = y ? NULL : find_param(k, tn, &j);
    if (!y && !tp) return true;
    *found = true;
    if (tp && !bound[j]) {
        IrType tt;
        ParamClass tpc;
        if (!tp->is_const || !tp->type.name || strcmp(tp->type.name, "dtype")) {
            diag_error(s->diag, p->type.loc, "the element type of '%s' is parameter '%s', which is not a "
                       "const dtype (declare it 'const %s: dtype')", p->name, tn, tn);
            return false;
        }
        if (!param_type(s, tp, &tt, &tpc)) return false;
        Val v = const_param_value(s, k, tp, tpc, tt);
        if (v.kind != V_ERR) {
            v.untyped = false;
            record_const(s, &s->f->consts[s->f->nconsts++], tp, tpc, tt, &v);
        }
        y = sema_define(s, tp->name, SYM_CONST, v, tp->loc);
        bound[j] = true;
    }
    if (y->val.kind == V_ERR) return false;
    if (y->val.kind != V_TYPE) {
        diag_error(s->diag, p->type.loc, "the element type of '%s' is '%s', which is %s, not a dtype", p->name,
                   tn, sema_val_desc(s, &y->val));
        return false;
    }
    *t = ir_type_ptr((IrElem)y->val.type.elem);
    return true;
}

/* A kernel is generic when a pointer's element type is a `const T: dtype`
 * parameter that has no value (no default, no -D): it compiles through its
 * instances, or when selected by name with -D T=.... */
static bool is_generic(Sema *s, const AstDecl *k)
{
    for (int i = 0; i < k->nparams; i++) {
        const AstParam *p = &k->params[i];
        if (!p->type.is_ptr || !p->type.name || ir_elem_from_name(p->type.name) != IR_VOID) continue;
        const AstParam *tp = find_param(k, p->type.name, NULL);
        if (!tp || !tp->is_const || tp->default_value) continue;
        bool given = false;
        for (int d = 0; s->opts && d < s->opts->ndefines; d++) given |= !strcmp(s->opts->defines[d].name, tp->name);
        if (!given) return true;
    }
    return false;
}

/* `kernel NAME = GENERIC(T = f16, ...);` becomes an AST_KERNEL named NAME with
 * the generic's body, settings and parameters minus the bound ones (in their
 * order), so its signature is the one a kernel written out by hand would have.
 * Returns a new file when there is anything to expand. */
static const AstFile *expand_instances(Sema *s, const AstFile *file)
{
    bool any = false;
    for (int i = 0; i < file->ndecls && !any; i++) any = file->decls[i]->kind == AST_INSTANCE;
    if (!any) return file;
    AstFile *out = ARENA_NEW(s->arena, AstFile);
    *out = *file;
    out->decls = ARENA_ARRAY(s->arena, AstDecl *, file->ndecls);
    out->ndecls = 0;
    for (int i = 0; i < file->ndecls; i++) {
        AstDecl *d = file->decls[i];
        if (d->kind != AST_INSTANCE) {
            out->decls[out->ndecls++] = d;
            continue;
        }
        const AstDecl *g = NULL;
        const char *best = NULL;
        int bestd = 4;
        for (int j = 0; j < file->ndecls && !g; j++) {
            const AstDecl *c = file->decls[j];
            if (c->kind == AST_KERNEL && !strcmp(c->name, d->of)) g = c;
            else if (c->kind == AST_KERNEL) consider(d->of, c->name, &best, &bestd);
        }
        if (!g) {
            diag_error(s->diag, d->of_loc, "no kernel named '%s' to instantiate%s", d->of,
                       best ? arena_printf(s->arena, "; did you mean '%s'?", best) : "");
            continue;
        }
        bool ok = true;
        for (int b = 0; b < d->nbindings; b++) {
            const AstArg *a = &d->bindings[b];
            if (!a->name) { ok = false; continue; }   /* reported by the parser */
            const AstParam *p = find_param(g, a->name, NULL);
            if (!p) {
                const char *near = NULL;
                int nd = 3;
                for (int q = 0; q < g->nparams; q++)
                    if (g->params[q].is_const) consider(a->name, g->params[q].name, &near, &nd);
                diag_error(s->diag, a->loc, "kernel '%s' has no parameter named '%s'%s", g->name, a->name,
                           near ? arena_printf(s->arena, "; did you mean '%s'?", near) : "");
                ok = false;
            } else if (!p->is_const) {
                diag_error(s->diag, a->loc, "'%s' is a runtime parameter of kernel '%s'; an instantiation binds "
                           "const parameters only", a->name, g->name);
                ok = false;
            }
        }
        if (!ok) continue;
        AstDecl *k = ARENA_NEW(s->arena, AstDecl);
        *k = *g;
        k->name = d->name;
        k->name_loc = d->name_loc;
        k->bindings = d->bindings;
        k->nbindings = d->nbindings;
        k->generic = g;
        k->params = ARENA_ARRAY(s->arena, AstParam, g->nparams ? g->nparams : 1);
        k->nparams = 0;
        for (int q = 0; q < g->nparams; q++) {
            bool bound = false;
            for (int b = 0; b < d->nbindings; b++) bound |= !strcmp(d->bindings[b].name, g->params[q].name);
            if (!bound) k->params[k->nparams++] = g->params[q];
        }
        out->decls[out->ndecls++] = k;
    }
    return out;
}

static void bind_params(Sema *s, const AstDecl *k)
{
    s->f->consts = ARENA_ARRAY(s->arena, IrConstParam, k->nparams ? k->nparams : 1);
    bool *bound = ARENA_ARRAY(s->arena, bool, k->nparams ? k->nparams : 1);
    bind_instance(s, k);
    for (int i = 0; i < k->nparams; i++) {
        const AstParam *p = &k->params[i];
        if (bound[i]) continue;   /* a dtype bound early by elem_param */
        const AstDecl *mp = find_decl(s, AST_PARAM, p->name);
        if (mp) {   /* inside the kernel its own parameter would hide the module's */
            diag_error(s->diag, mp->name_loc, "param '%s' has the name of a parameter of kernel '%s'; rename it",
                       p->name, k->name);
            diag_note(s->diag, p->loc, "the kernel's parameter '%s'", p->name);
        }
        IrType t;
        ParamClass pc;
        if (!p->type.name) {
            diag_error(s->diag, p->loc, "kernel parameter '%s' needs a type", p->name);
            sema_define(s, p->name, SYM_PARAM, val_err(), p->loc);
            continue;
        }
        bool elem_found = false;
        if (!p->is_const && p->type.is_ptr && ir_elem_from_name(p->type.name) == IR_VOID &&
            !elem_param(s, k, p, bound, &t, &elem_found)) {
            sema_define(s, p->name, SYM_PARAM, val_err(), p->loc);
            continue;
        }
        pc = PT_VALUE;
        if (!elem_found && !param_type(s, p, &t, &pc)) {
            sema_define(s, p->name, SYM_PARAM, val_err(), p->loc);
            continue;
        }
        if (!p->is_const) {
            if (find_define(s, p->name) >= 0)
                diag_error(s->diag, p->loc, "'%s' is not a const parameter; it cannot be given with -D %s",
                           p->name, p->name);
            IrValue *pv = ir_func_add_param(s->f, t, p->name);
            Val v = val_rt(pv, p->loc);
            if (apply_hint(s, p, pv)) {
                /* n==1: the name reads an IR constant 1 of n's type. It stays a
                 * runtime value in the language (what compiles does not change
                 * with a hint), but every pass folds it: n * x -> x, and the
                 * axis info sees unit strides. The parameter itself stays, so
                 * the launch ABI is the generic kernel's. */
                Val one = cv_int(1, (IrElem)t.elem, p->loc);
                v = val_rt(sema_materialize(s, &one, p->loc), p->loc);
            }
            sema_define(s, p->name, SYM_PARAM, v, p->loc);
            continue;
        }
        Val v = const_param_value(s, k, p, pc, t);
        if (v.kind != V_ERR) {
            v.untyped = false;
            record_const(s, &s->f->consts[s->f->nconsts++], p, pc, t, &v);
        }
        sema_define(s, p->name, SYM_CONST, v, p->loc);
    }
}

/* ---- schedule ---- */
static bool check_warps(Sema *s, int64_t w, SrcLoc loc, const char *how)
{
    if (sup_is_pow2(w) && w <= 32) return true;
    diag_error(s->diag, loc, "%snum_warps must be a power of two between 1 and 32, got %lld", how, (long long)w);
    return false;
}

static bool check_stages(Sema *s, int64_t n, SrcLoc loc, const char *how)
{
    if (n >= 1 && n <= SEMA_MAX_STAGES) return true;
    if (n < 1) diag_error(s->diag, loc, "%snum_stages must be at least 1, got %lld", how, (long long)n);
    else diag_error(s->diag, loc, "%snum_stages is too large: at most %d, got %lld", how, SEMA_MAX_STAGES,
                    (long long)n);
    return false;
}

static void schedule(Sema *s, const AstDecl *k)
{
    static const char *const names[] = {"num_warps", "num_stages"};
    bool seen[2] = {false, false};
    for (int i = 0; i < k->nsettings; i++) {
        const AstSetting *st = &k->settings[i];
        int which = strcmp(st->name, names[0]) == 0 ? 0 : strcmp(st->name, names[1]) == 0 ? 1 : -1;
        if (which < 0) {
            const char *best = sup_edit_distance(st->name, names[0]) <= sup_edit_distance(st->name, names[1])
                                   ? names[0] : names[1];
            bool close = sup_edit_distance(st->name, best) <= 3;
            diag_error(s->diag, st->loc, "unknown schedule setting '%s'%s", st->name,
                       close ? arena_printf(s->arena, "; did you mean '%s'?", best)
                             : " (settings are num_warps and num_stages)");
            continue;
        }
        if (seen[which]) diag_error(s->diag, st->loc, "'%s' is set twice", st->name);
        seen[which] = true;
        Val v = sema_const_expr(s, st->value);
        if (v.kind == V_ERR) continue;
        if (!cv_is_int(&v)) {
            diag_error(s->diag, st->value->loc, "%s must be a compile-time integer, got %s", st->name,
                       v.kind == V_RT ? "a runtime value" : sema_val_desc(s, &v));
            continue;
        }
        if (which == 0 && check_warps(s, v.i, st->value->loc, "")) s->f->sched.num_warps = (int)v.i;
        if (which == 1 && check_stages(s, v.i, st->value->loc, "")) s->f->sched.num_stages = (int)v.i;
    }
    const LangOptions *o = s->opts;
    if (o && o->num_warps > 0 && check_warps(s, o->num_warps, k->name_loc, "--num-warps: "))
        s->f->sched.num_warps = o->num_warps;
    if (o && o->num_stages > 0 && check_stages(s, o->num_stages, k->name_loc, "--num-stages: "))
        s->f->sched.num_stages = o->num_stages;
}

/* ---- kernels ---- */
static IrFunc *compile_kernel(Sema *s, const AstDecl *k)
{
    int errors = s->diag->nerrors;
    s->f = ir_func_new(s->arena, k->name, k->name_loc);
    s->b.f = s->f;
    s->b.block = s->f->body;
    s->b.before = NULL;
    s->scope = s->file_scope;
    s->inl = NULL;
    sema_push_scope(s);
    bind_params(s, k);
    s->nown_params = s->f->nparams;
    schedule(s, k);
    sema_block(s, k->body);
    sema_pop_scope(s);
    order_module_params(s);
    sema_emit(s, k->body->loc, IR_RETURN, ir_type_scalar(IR_VOID), 0, NULL);
    return s->diag->nerrors == errors ? s->f : NULL;
}

static void check_defines_used(Sema *s)
{
    SrcLoc none = {s->file->path, 0, 0};
    for (int i = 0; s->opts && i < s->opts->ndefines; i++) {
        const char *name = s->opts->defines[i].name;
        int first = 0;
        while (strcmp(s->opts->defines[first].name, name) != 0) first++;
        if (first < i) { /* the first one is used, this one would be silently ignored */
            diag_error(s->diag, none, "-D %s is given twice (-D %s=%s and -D %s=%s)", name, name,
                       s->opts->defines[first].value, name, s->opts->defines[i].value);
            continue;
        }
        if (s->define_used[i] || find_decl(s, AST_CONST, name)) continue;
        const char *best = NULL;
        int bestd = 3;
        for (int j = 0; j < s->file->ndecls; j++) {
            const AstDecl *d = s->file->decls[j];
            if (d->kind == AST_CONST) consider(name, d->name, &best, &bestd);
            for (int q = 0; d->kind == AST_KERNEL && q < d->nparams; q++)
                if (d->params[q].is_const) consider(name, d->params[q].name, &best, &bestd);
        }
        diag_error(s->diag, none, "-D %s: no const parameter or file-level const is named '%s'%s", name, name,
                   best ? arena_printf(s->arena, "; did you mean '%s'?", best) : "");
    }
}

static const AstDecl *select_kernel(Sema *s, const char *name)
{
    const AstDecl *k = find_decl(s, AST_KERNEL, name);
    if (k) return k;
    const char *best = NULL;
    int bestd = 4;
    for (int j = 0; j < s->file->ndecls; j++)
        if (s->file->decls[j]->kind == AST_KERNEL) consider(name, s->file->decls[j]->name, &best, &bestd);
    SrcLoc none = {s->file->path, 0, 0};
    diag_error(s->diag, none, "no kernel named '%s' in this file%s", name,
               best ? arena_printf(s->arena, "; did you mean '%s'?", best) : "");
    return NULL;
}

IrModule *lang_compile(Arena *arena, Diag *diag, const AstFile *file, const LangOptions *opts)
{
    if (!file) return NULL;
    int errors = diag->nerrors;
    Sema s;
    memset(&s, 0, sizeof s);
    s.arena = arena;
    s.diag = diag;
    s.file = file;
    s.opts = opts;
    s.scratch = ir_func_new(arena, "<const>", (SrcLoc){file->path, 0, 0});
    s.define_used = ARENA_ARRAY(arena, bool, opts && opts->ndefines ? opts->ndefines : 1);
    s.b.f = s.scratch;
    s.b.block = s.scratch->body;
    s.file = file = expand_instances(&s, file);
    build_file_scope(&s);
    sema_tune_check(arena, diag, file);
    IrModule *m = ir_module_new(arena);
    const AstDecl *only = opts && opts->kernel ? select_kernel(&s, opts->kernel) : NULL;
    for (int i = 0; i < file->ndecls; i++) {
        const AstDecl *d = file->decls[i];
        if (d->kind != AST_KERNEL || (opts && opts->kernel && d != only)) continue;
        if (find_decl(&s, AST_KERNEL, d->name) != d) continue; /* duplicate, reported */
        if (!only && is_generic(&s, d)) continue;              /* compiles through its instances */
        s.inlined_calls = 0;
        s.inline_budget_reported = false;
        s.kernel_ops = 0;
        s.tile_limit_reported = false;
        s.f8_op_reported = false;
        IrFunc *f = compile_kernel(&s, d);
        if (f) ir_module_add(m, f);
    }
    check_defines_used(&s);
    if (!opts || !opts->kernel || only) check_hints(&s, only, m, diag->nerrors == errors);
    diag_flush_ice(diag);
    return diag->nerrors == errors ? m : NULL;
}
