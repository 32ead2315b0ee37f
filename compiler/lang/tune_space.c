/* tune_space.c — `tune` declarations: the space of schedules a kernel may be tuned over.
 *
 * What: the parser builds an AST_TUNE decl (ast_new_tune) from
 *
 *     tune attn_fwd {
 *         BLOCK_M in [64, 128];           // a const parameter of the kernel
 *         BLOCK_N in [32, 64, 128];
 *         num_warps in [4, 8];            // a setting of `with (...)`
 *         pingpong in [false, true];      // a schedule option (schedule.h's table)
 *         require BLOCK_N <= BLOCK_M;     // constraints: every config must satisfy each
 *         key HEAD_DIM, CAUSAL, seqlen_q; // the parameters that select a tuned entry
 *     }
 *
 * sema_tune_space checks one (located errors: an unknown kernel, dimension or key name, an
 * empty list, a value that is not compile-time, a constraint that removes every config)
 * and enumerates the configs every constraint keeps, in order (the first dimension
 * varies slowest). The values a constraint reads: the config's, then the caller's defines
 * (the key's consts, say HEAD_DIM=128), then the kernel's const defaults, then file consts.
 * sema_tune_check runs it for every tune decl of a file compiled (lang_compile).
 *
 * Invariants: a tune decl never changes what any kernel compiles to (sema skips it;
 * only the tuner reads it, turning a config into defines, num_warps/num_stages and
 * schedule options); constraints are integer/bool arithmetic evaluated here, in 64 bits;
 * a space holds at most TUNE_MAX_CONFIGS configs before constraints.
 *
 * Example: for the space above with HEAD_DIM=128, config 0 is BLOCK_M=64 BLOCK_N=32
 * num_warps=4 pingpong=false; the tuner compiles it as `-D BLOCK_M=64 -D BLOCK_N=32
 * --num-warps 4`.
 */
#include "compiler/lang/parse.h"
#include "compiler/lang/lang.h"
#include "compiler/support/schedule.h"

#include <stdlib.h>
#include <string.h>

#define TUNE_MAX_CONFIGS (1 << 20)
#define EVAL_MAX_DEPTH 64

/* ---------------- AST constructors (the parser's actions) ---------------- */

AstTuneItem *ast_new_tune_item(ParseCtx *p, SrcLoc loc, const char *name, bool is_dim, PtrVec *args)
{
    AstTuneItem *t = ARENA_NEW(p->arena, AstTuneItem);
    t->loc = loc;
    t->name = name;
    t->is_dim = is_dim;
    t->nargs = args->len;
    t->args = ARENA_ARRAY(p->arena, AstArg, args->len ? args->len : 1);
    for (int i = 0; i < args->len; i++) t->args[i] = *(AstArg *)args->data[i];
    return t;
}

AstDecl *ast_new_tune(ParseCtx *p, SrcLoc loc, const char *kernel, SrcLoc name_loc, PtrVec *items)
{
    AstDecl *d = ARENA_NEW(p->arena, AstDecl);
    d->kind = AST_TUNE;
    d->loc = loc;
    d->name = kernel;
    d->name_loc = name_loc;
    d->ntune = items->len;
    d->tune = ARENA_ARRAY(p->arena, AstTuneItem, items->len ? items->len : 1);
    for (int i = 0; i < items->len; i++) d->tune[i] = *(AstTuneItem *)items->data[i];
    return d;
}

/* ---------------- finding the kernel ---------------- */

static const AstDecl *find_kind(const AstFile *f, AstDeclKind kind, const char *name)
{
    for (int i = 0; i < f->ndecls; i++)
        if (f->decls[i]->kind == kind && f->decls[i]->name && !strcmp(f->decls[i]->name, name)) return f->decls[i];
    return NULL;
}

/* The kernel `name` as declared (an instance: its generic) and, for an instance, its decl. */
static const AstDecl *kernel_decl(const AstFile *f, const char *name, const AstDecl **inst)
{
    *inst = NULL;
    const AstDecl *k = find_kind(f, AST_KERNEL, name);
    if (k) return k->generic ? k->generic : k;
    const AstDecl *i = find_kind(f, AST_INSTANCE, name);
    if (!i) return NULL;
    *inst = i;
    return find_kind(f, AST_KERNEL, i->of);
}

static bool bound_by(const AstDecl *inst, const char *name)
{
    for (int i = 0; inst && i < inst->nbindings; i++)
        if (inst->bindings[i].name && !strcmp(inst->bindings[i].name, name)) return true;
    return false;
}

static const AstParam *kernel_param(const AstDecl *k, const AstDecl *inst, const char *name)
{
    for (int i = 0; i < k->nparams; i++)
        if (!strcmp(k->params[i].name, name) && !bound_by(inst, name)) return &k->params[i];
    return NULL;
}

/* ---------------- evaluating values and constraints ---------------- */

typedef struct Ev {
    Arena *arena;
    Diag *diag;
    const AstFile *file;
    const AstDecl *kernel, *inst;
    const TuneSpace *sp;
    const int *cfg;            /* value index per dimension, or NULL (only defines and defaults) */
    const LangDefine *defs;
    int ndefs;
    int depth;
    bool quiet;                /* failures are not reported (the caller reports once) */
} Ev;

static bool eval(Ev *e, const AstExpr *x, int64_t *out);

static bool fail(Ev *e, SrcLoc loc, const char *msg, const char *name)
{
    if (!e->quiet) diag_error(e->diag, loc, msg, name);
    return false;
}

static bool parse_number(const char *s, int64_t *out)
{
    if (!strcmp(s, "true") || !strcmp(s, "false")) {
        *out = s[0] == 't';
        return true;
    }
    char *end;
    long long v = strtoll(s, &end, 0);
    if (end == s || *end) return false;
    *out = v;
    return true;
}

static bool eval_name(Ev *e, const AstExpr *x, int64_t *out)
{
    const char *n = x->sval;
    for (int i = 0; e->sp && e->cfg && i < e->sp->ndims; i++)
        if (!strcmp(e->sp->dims[i].name, n)) {
            *out = e->sp->dims[i].vals[e->cfg[i]].num;
            return true;
        }
    for (int i = 0; i < e->ndefs; i++)
        if (!strcmp(e->defs[i].name, n)) {
            if (parse_number(e->defs[i].value, out)) return true;
            return fail(e, x->loc, "'%s' is not a number here (a tune constraint computes on integers and bools)", n);
        }
    if (++e->depth > EVAL_MAX_DEPTH) return fail(e, x->loc, "'%s' is defined through itself", n);
    bool ok;
    const AstParam *pm = e->kernel ? kernel_param(e->kernel, e->inst, n) : NULL;
    const AstDecl *c = find_kind(e->file, AST_CONST, n);
    for (int i = 0; e->inst && i < e->inst->nbindings; i++)
        if (e->inst->bindings[i].name && !strcmp(e->inst->bindings[i].name, n)) {
            ok = eval(e, e->inst->bindings[i].value, out);
            e->depth--;
            return ok;
        }
    if (pm && pm->is_const && pm->default_value) ok = eval(e, pm->default_value, out);
    else if (pm && pm->is_const) ok = fail(e, x->loc, "const '%s' has no default: give it with -D", n);
    else if (pm) ok = fail(e, x->loc, "'%s' is a runtime parameter: a tune constraint reads compile-time values", n);
    else if (c) ok = eval(e, c->value, out);
    else ok = fail(e, x->loc, "unknown name '%s' in a tune space (a dimension, a const parameter or a file const)", n);
    e->depth--;
    return ok;
}

static bool eval_binary(Ev *e, const AstExpr *x, int64_t a, int64_t b, int64_t *out)
{
    switch (x->op) {
    case OP_ADD: *out = a + b; return true;
    case OP_SUB: *out = a - b; return true;
    case OP_MUL: *out = a * b; return true;
    case OP_DIV:
    case OP_MOD:
        if (!b) return fail(e, x->loc, "division by zero in a tune constraint%s", "");
        *out = x->op == OP_DIV ? a / b : a % b;
        return true;
    case OP_SHL: *out = b >= 0 && b < 63 ? a << b : 0; return true;
    case OP_SHR: *out = b >= 0 && b < 63 ? a >> b : 0; return true;
    case OP_BITAND: *out = a & b; return true;
    case OP_BITOR: *out = a | b; return true;
    case OP_BITXOR: *out = a ^ b; return true;
    case OP_LT: *out = a < b; return true;
    case OP_LE: *out = a <= b; return true;
    case OP_GT: *out = a > b; return true;
    case OP_GE: *out = a >= b; return true;
    case OP_EQ: *out = a == b; return true;
    case OP_NE: *out = a != b; return true;
    case OP_LAND: *out = a && b; return true;
    case OP_LOR: *out = a || b; return true;
    default: return fail(e, x->loc, "operator '%s' is not allowed in a tune space", ast_op_text(x->op));
    }
}

/* min, max and cdiv of two integers: the calls a constraint on tiles needs. */
static bool eval_call(Ev *e, const AstExpr *x, int64_t *out)
{
    int64_t a, b;
    if (x->nargs != 2 || (strcmp(x->sval, "min") && strcmp(x->sval, "max") && strcmp(x->sval, "cdiv")))
        return fail(e, x->loc, "a tune space may call min(a, b), max(a, b) and cdiv(a, b), not '%s'", x->sval);
    if (!eval(e, x->args[0].value, &a) || !eval(e, x->args[1].value, &b)) return false;
    if (!strcmp(x->sval, "cdiv")) {
        if (b <= 0) return fail(e, x->loc, "cdiv by a value <= 0 in a tune space%s", "");
        *out = (a + b - 1) / b;
    } else {
        *out = (x->sval[1] == 'i') == (a < b) ? a : b;
    }
    return true;
}

static bool eval(Ev *e, const AstExpr *x, int64_t *out)
{
    int64_t a, b;
    switch (x->kind) {
    case AST_INT:
    case AST_BOOL: *out = x->ival; return true;
    case AST_NAME: return eval_name(e, x, out);
    case AST_CALL: return eval_call(e, x, out);
    case AST_UNARY:
        if (!eval(e, x->lhs, &a)) return false;
        *out = x->op == OP_NEG ? -a : x->op == OP_NOT ? !a : x->op == OP_BITNOT ? ~a : a;
        return true;
    case AST_BINARY:
        if (!eval(e, x->lhs, &a)) return false;
        if ((x->op == OP_LAND && !a) || (x->op == OP_LOR && a)) { /* C's short circuit */
            *out = x->op == OP_LOR;
            return true;
        }
        return eval(e, x->rhs, &b) && eval_binary(e, x, a, b, out);
    case AST_TERNARY:
        if (!eval(e, x->cond, &a)) return false;
        return eval(e, a ? x->lhs : x->rhs, out);
    default: return fail(e, x->loc, "a tune space computes on integers and bools only%s", "");
    }
}

/* ---------------- checking and enumerating ---------------- */

static const char *suggest(Arena *a, const AstDecl *k, const AstDecl *inst, const char *name)
{
    static const char *const settings[] = {"num_warps", "num_stages"};
    const char *best = NULL;
    int bestd = 3;
    for (int i = 0; i < k->nparams; i++) {
        int d = sup_edit_distance(name, k->params[i].name);
        if (d < bestd && !bound_by(inst, k->params[i].name)) bestd = d, best = k->params[i].name;
    }
    for (int i = 0; i < 2; i++) {
        int d = sup_edit_distance(name, settings[i]);
        if (d < bestd) bestd = d, best = settings[i];
    }
    for (int i = 0; i < SCHED_COUNT; i++) {
        int d = sup_edit_distance(name, sched_options[i].name);
        if (d < bestd) bestd = d, best = sched_options[i].name;
    }
    return best ? arena_printf(a, "; did you mean '%s'?", best) : "";
}

/* A dimension's kind and the text its values take. */
static bool dim_kind(Ev *e, const AstTuneItem *it, TuneDim *d)
{
    d->sched = -1;
    if (!strcmp(it->name, "num_warps")) d->kind = TUNE_WARPS;
    else if (!strcmp(it->name, "num_stages")) d->kind = TUNE_STAGES;
    else {
        for (int i = 0; i < SCHED_COUNT; i++)
            if (!strcmp(it->name, sched_options[i].name)) d->kind = TUNE_SCHED, d->sched = i;
        if (d->sched < 0) {
            const AstParam *pm = kernel_param(e->kernel, e->inst, it->name);
            if (!pm || !pm->is_const) {
                diag_error(e->diag, it->loc,
                           "'%s' is %s of kernel '%s' (a tune dimension is a const parameter, num_warps, "
                           "num_stages or a schedule option)%s",
                           it->name, pm ? "a runtime parameter" : "no const parameter", e->kernel->name,
                           pm ? "" : suggest(e->arena, e->kernel, e->inst, it->name));
                return false;
            }
            d->kind = TUNE_CONST;
            d->is_dtype = pm->type.name && !strcmp(pm->type.name, "dtype");
            if (pm->type.name && !strcmp(pm->type.name, "fn")) {
                diag_error(e->diag, it->loc, "'%s' is a function parameter: a tune dimension takes numbers, bools "
                           "or types", it->name);
                return false;
            }
        }
    }
    return true;
}

static bool dim_values(Ev *e, const AstTuneItem *it, TuneDim *d)
{
    if (!it->nargs) {
        diag_error(e->diag, it->loc, "empty space: '%s' has no candidate values", it->name);
        return false;
    }
    d->nvals = it->nargs;
    d->vals = ARENA_ARRAY(e->arena, TuneValue, it->nargs);
    for (int j = 0; j < it->nargs; j++) {
        const AstExpr *x = it->args[j].value;
        TuneValue *v = &d->vals[j];
        if (d->is_dtype) {
            if (x->kind != AST_NAME) {
                diag_error(e->diag, x->loc, "'%s' is a dtype: its values are type names (f16, bf16)", it->name);
                return false;
            }
            v->text = x->sval;
            v->num = j;
            continue;
        }
        if (!eval(e, x, &v->num)) return false;
        bool is_bool = x->kind == AST_BOOL || d->kind == TUNE_SCHED;
        if (d->kind == TUNE_SCHED && v->num != 0 && v->num != 1) {
            diag_error(e->diag, x->loc, "schedule option '%s' takes false or true", it->name);
            return false;
        }
        if (d->kind == TUNE_WARPS && (v->num < 1 || v->num > 32 || (v->num & (v->num - 1)))) {
            diag_error(e->diag, x->loc, "num_warps must be a power of two between 1 and 32, got %lld",
                       (long long)v->num);
            return false;
        }
        if (d->kind == TUNE_STAGES && (v->num < 1 || v->num > 1024)) {
            diag_error(e->diag, x->loc, "num_stages must be between 1 and 1024, got %lld", (long long)v->num);
            return false;
        }
        v->text = is_bool ? (v->num ? "true" : "false") : arena_printf(e->arena, "%lld", (long long)v->num);
    }
    return true;
}

static bool check_key(Ev *e, TuneSpace *sp, const AstTuneItem *it)
{
    for (int j = 0; j < it->nargs; j++) {
        const AstExpr *x = it->args[j].value;
        if (x->kind != AST_NAME || it->args[j].name) {
            diag_error(e->diag, it->args[j].loc, "a tune key lists parameter names (key HEAD_DIM, seqlen_q;)");
            return false;
        }
        const AstParam *pm = kernel_param(e->kernel, e->inst, x->sval);
        if (!pm) {
            diag_error(e->diag, x->loc, "'%s' is no parameter of kernel '%s'%s", x->sval, e->kernel->name,
                       suggest(e->arena, e->kernel, e->inst, x->sval));
            return false;
        }
        for (int i = 0; i < sp->ndims; i++)
            if (!strcmp(sp->dims[i].name, x->sval)) {
                diag_error(e->diag, x->loc, "'%s' is tuned: a key names what selects an entry, not what varies",
                           x->sval);
                return false;
            }
        if (!pm->is_const && (pm->type.is_ptr || !pm->type.name || pm->type.name[0] == 'f' ||
                              pm->type.name[0] == 'b')) {
            diag_error(e->diag, x->loc, "runtime key '%s' must be an integer (its bucket is the next power of two)",
                       x->sval);
            return false;
        }
        sp->key[sp->nkey] = x->sval;
        sp->key_runtime[sp->nkey++] = !pm->is_const;
    }
    return true;
}

/* Walks every combination; keeps those each constraint accepts; reports the first
 * constraint after which nothing remains. */
static bool enumerate(Ev *e, TuneSpace *sp)
{
    int64_t total = 1;
    for (int i = 0; i < sp->ndims; i++)
        if ((total *= sp->dims[i].nvals) > TUNE_MAX_CONFIGS) {
            diag_error(e->diag, sp->decl->loc, "this tune space has more than %d configurations", TUNE_MAX_CONFIGS);
            return false;
        }
    sp->ntotal = (int)total;
    int *removed = ARENA_ARRAY(e->arena, int, sp->nrequire + 1);
    int *cfg = ARENA_ARRAY(e->arena, int, sp->ndims + 1);
    sp->configs = ARENA_ARRAY(e->arena, int, total * (sp->ndims ? sp->ndims : 1));
    e->cfg = cfg;
    for (int64_t n = 0; n < total; n++) {
        int64_t r = n;
        for (int i = sp->ndims - 1; i >= 0; i--) {
            cfg[i] = (int)(r % sp->dims[i].nvals);
            r /= sp->dims[i].nvals;
        }
        int k = 0;
        for (; k < sp->nrequire; k++) {
            int64_t ok;
            if (!eval(e, sp->require[k], &ok)) return false;
            if (!ok) break;
        }
        if (k < sp->nrequire) {
            removed[k]++;
            continue;
        }
        memcpy(&sp->configs[(int64_t)sp->nconfigs++ * sp->ndims], cfg, sizeof(int) * (size_t)sp->ndims);
    }
    int64_t left = total;
    for (int k = 0; k < sp->nrequire; k++) {
        if (left && left == removed[k]) {
            diag_error(e->diag, sp->require[k]->loc, "this constraint removes every configuration (%lld remained "
                       "before it)", (long long)left);
            return false;
        }
        left -= removed[k];
    }
    return true;
}

static bool add_items(Ev *e, TuneSpace *sp, const AstDecl *td)
{
    for (int i = 0; i < td->ntune; i++) {
        const AstTuneItem *it = &td->tune[i];
        if (it->is_dim) {
            for (int j = 0; j < sp->ndims; j++)
                if (!strcmp(sp->dims[j].name, it->name)) {
                    diag_error(e->diag, it->loc, "'%s' is tuned twice", it->name);
                    return false;
                }
            TuneDim *d = &sp->dims[sp->ndims];
            d->name = it->name;
            d->loc = it->loc;
            if (!dim_kind(e, it, d) || !dim_values(e, it, d)) return false;
            sp->ndims++;
        } else if (!strcmp(it->name, "require")) {
            if (it->nargs != 1 || it->args[0].name) {
                diag_error(e->diag, it->loc, "'require' takes one condition (require BLOCK_N <= BLOCK_M;)");
                return false;
            }
            sp->require[sp->nrequire++] = it->args[0].value;
        } else if (!strcmp(it->name, "key")) {
            if (!check_key(e, sp, it)) return false;
        } else {
            diag_error(e->diag, it->loc, "expected 'NAME in [values]', 'require' or 'key' in a tune space, got '%s'",
                       it->name);
            return false;
        }
    }
    if (!sp->ndims) {
        diag_error(e->diag, td->loc, "empty space: tune '%s' varies nothing (add 'NAME in [values];')", td->name);
        return false;
    }
    return true;
}

static TuneSpace *build(Arena *arena, Diag *diag, const AstFile *file, const AstDecl *td, const char *kernel,
                        const LangDefine *defs, int ndefs)
{
    Ev e = {.arena = arena, .diag = diag, .file = file, .defs = defs, .ndefs = ndefs};
    e.kernel = kernel_decl(file, kernel, &e.inst);
    if (!e.kernel) {
        const char *best = NULL;
        int bestd = 3;
        for (int i = 0; i < file->ndecls; i++) {
            const AstDecl *k = file->decls[i];
            int d = k->kind == AST_KERNEL || k->kind == AST_INSTANCE ? sup_edit_distance(kernel, k->name) : 99;
            if (d < bestd) bestd = d, best = k->name;
        }
        diag_error(diag, td->name_loc, "tune names no kernel: '%s'%s", kernel,
                   best ? arena_printf(arena, "; did you mean '%s'?", best) : "");
        return NULL;
    }
    TuneSpace *sp = ARENA_NEW(arena, TuneSpace);
    sp->decl = td;
    sp->kernel = kernel;
    int n = td->ntune + 1;
    sp->dims = ARENA_ARRAY(arena, TuneDim, n);
    sp->require = ARENA_ARRAY(arena, const AstExpr *, n);
    int nk = 1;
    for (int i = 0; i < td->ntune; i++) nk += td->tune[i].nargs;
    sp->key = ARENA_ARRAY(arena, const char *, nk);
    sp->key_runtime = ARENA_ARRAY(arena, bool, nk);
    e.sp = sp;
    if (!add_items(&e, sp, td) || !enumerate(&e, sp)) return NULL;
    return sp;
}

/* The tune decl of kernel `name`: its own, else its generic's (an instance is tuned by
 * the space declared for the kernel it instantiates). */
static const AstDecl *tune_decl_of(const AstFile *f, const char *name)
{
    const AstDecl *t = find_kind(f, AST_TUNE, name);
    if (t) return t;
    const AstDecl *k = find_kind(f, AST_KERNEL, name);
    if (k && k->generic) return find_kind(f, AST_TUNE, k->generic->name);
    const AstDecl *i = find_kind(f, AST_INSTANCE, name);
    return i ? find_kind(f, AST_TUNE, i->of) : NULL;
}

TuneSpace *sema_tune_space(Arena *arena, Diag *diag, const AstFile *file, const char *kernel,
                           const LangDefine *defs, int ndefs)
{
    const AstDecl *td = tune_decl_of(file, kernel);
    if (!td) {
        diag_error(diag, (SrcLoc){0}, "kernel '%s' declares no tune space (tune %s { NAME in [values]; ... })",
                   kernel, kernel);
        return NULL;
    }
    return build(arena, diag, file, td, kernel, defs, ndefs);
}

void sema_tune_check(Arena *arena, Diag *diag, const AstFile *file)
{
    for (int i = 0; i < file->ndecls; i++) {
        const AstDecl *d = file->decls[i];
        if (d->kind != AST_TUNE) continue;
        for (int j = 0; j < i; j++)
            if (file->decls[j]->kind == AST_TUNE && !strcmp(file->decls[j]->name, d->name)) {
                diag_error(diag, d->name_loc, "kernel '%s' has two tune spaces", d->name);
                diag_note(diag, file->decls[j]->name_loc, "the other one");
            }
        build(arena, diag, file, d, d->name, NULL, 0);
    }
}
