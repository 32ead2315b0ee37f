/* parser.c — reads the Tile IR text that printer.c writes (docs/ir.md).
 *
 * What it does: hand-written recursive descent straight over the characters
 * (no separate token stream: `tensor<64x64xf32>` is read by the type routine
 * character by character). Builds IrFuncs with the ir.c constructors.
 *
 * Invariants:
 *   - names are resolved while parsing: a use must follow its definition in
 *     the same or an enclosing region (regions close their scope), and a name
 *     may not be defined twice in one scope chain. Everything else (operand
 *     counts, types, terminators) is left to ir_verify, so broken IR can be
 *     written as text to test the verifier;
 *   - an op's SrcLoc is its `loc(LINE:COL)` when given (file: the kernel's
 *     `loc("FILE":...)`, or none), else its own place in the IR file;
 *   - the first error stops the parse: diag_error with file:line:col and a
 *     caret, and ir_parse returns NULL.
 *   - newlines matter in one place: an op's operands and its `loc(...)` start
 *     on the op's own line (so `return` is not followed by the next line's %x).
 *
 *   - GPU IR: `#Ln = ...` lines before a kernel make its layout table, in
 *     order (a slice names an earlier parent); tile types may carry
 *     `, #Ln`; `{name = int | [ints], ...}` after an op's operands and
 *     `attributes {...}` after the kernel's settings are named attributes.
 *     What they mean is checked by ir_verify (and the codegen layer).
 *
 * Example input:
 *   kernel @k(%X: ptr<f32>) num_warps = 4 num_stages = 2 {
 *     %0 = const 1.5 : f32
 *     store %X, %0
 *     return
 *   }
 */
#include "ir.h"
#include "../support/diag.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct Sym {
    const char *name;
    IrValue *v;
} Sym;

typedef struct Parser {
    Arena *a;
    Diag *d;
    const char *path;
    const char *p;          /* cursor */
    const char *line_start;
    int line;
    bool failed;
    IrFunc *f;
    const char *func_file;  /* file of loc(L:C) inside the current kernel */
    Sym *syms;              /* scope stack of visible names */
    int nsyms, capsyms;
    PtrVec layouts;         /* GPU IR: `#Ln = ...` lines before the next kernel */
} Parser;

/* ---- characters ---- */
static bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static bool is_digit(char c) { return c >= '0' && c <= '9'; }
static bool is_ident(char c) { return is_alpha(c) || is_digit(c) || c == '.'; }

static SrcLoc here(const Parser *P)
{
    SrcLoc l = {P->path, P->line, (int)(P->p - P->line_start) + 1};
    return l;
}

static void advance(Parser *P)
{
    if (*P->p == '\n') { P->line++; P->line_start = P->p + 1; }
    if (*P->p) P->p++;
}

static void skip_ws(Parser *P)
{
    for (;;) {
        char c = *P->p;
        if (c == ' ' || c == '\t' || c == '\r' || c == '\n') advance(P);
        else if (c == '/' && P->p[1] == '/') while (*P->p && *P->p != '\n') advance(P);
        else return;
    }
}

/* Skip blanks but not newlines: is the next thing on this line `c`? */
static bool peek_inline(Parser *P, char c)
{
    while (*P->p == ' ' || *P->p == '\t' || *P->p == '\r') advance(P);
    return *P->p == c;
}

static bool fail(Parser *P, SrcLoc loc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static bool fail(Parser *P, SrcLoc loc, const char *fmt, ...)
{
    if (!P->failed) {
        va_list ap;
        va_start(ap, fmt);
        diag_verror(P->d, loc, fmt, ap);
        va_end(ap);
        P->failed = true;
    }
    return false;
}

/* A short description of what is at the cursor, for "expected X, found Y".
 * It does not move the cursor (callers take here() in the same call). */
static const char *found(Parser *P)
{
    const char *s = P->p;
    for (;;) {
        if (*s == ' ' || *s == '\t' || *s == '\r' || *s == '\n') s++;
        else if (s[0] == '/' && s[1] == '/') while (*s && *s != '\n') s++;
        else break;
    }
    if (!*s) return "end of file";
    size_t n = 1;
    if (is_ident(*s) || *s == '%' || *s == '@' || *s == '-')
        while (n < 32 && is_ident(s[n])) n++;
    return arena_printf(P->a, "'%.*s'", (int)n, s);
}

/* Accept punctuation or a keyword (a keyword must not run into more letters). */
static bool accept(Parser *P, const char *s)
{
    skip_ws(P);
    size_t n = strlen(s);
    if (strncmp(P->p, s, n) != 0) return false;
    if (is_alpha(s[0]) && is_ident(P->p[n])) return false;
    for (size_t i = 0; i < n; i++) advance(P);
    return true;
}

static bool expect(Parser *P, const char *s)
{
    if (accept(P, s)) return true;
    return fail(P, here(P), "expected '%s', found %s", s, found(P));
}

static bool parse_word(Parser *P, const char *what, const char **out)
{
    skip_ws(P);
    if (!is_alpha(*P->p)) return fail(P, here(P), "expected %s, found %s", what, found(P));
    const char *s = P->p;
    while (is_ident(*P->p)) advance(P);
    *out = arena_strndup(P->a, s, (size_t)(P->p - s));
    return true;
}

static bool parse_int(Parser *P, const char *what, int64_t *out)
{
    skip_ws(P);
    SrcLoc loc = here(P);
    const char *s = P->p;
    if (*P->p == '-') advance(P);
    if (!is_digit(*P->p)) return fail(P, loc, "expected %s, found %s", what, found(P));
    while (is_digit(*P->p)) advance(P);
    errno = 0;
    long long v = strtoll(s, NULL, 10);
    if (errno == ERANGE) return fail(P, loc, "%s out of range", what);
    *out = v;
    return true;
}

/* An int attribute that must fit an `int`. */
static bool parse_small(Parser *P, const char *what, int *out)
{
    SrcLoc loc;
    skip_ws(P);
    loc = here(P);
    int64_t v;
    if (!parse_int(P, what, &v)) return false;
    if (v < INT_MIN || v > INT_MAX) return fail(P, loc, "%s out of range", what);
    *out = (int)v;
    return true;
}

static bool parse_string(Parser *P, const char **out)
{
    skip_ws(P);
    if (*P->p != '"') return fail(P, here(P), "expected a string, found %s", found(P));
    advance(P);
    StrBuf sb;
    sb_init(&sb);
    while (*P->p != '"') {
        SrcLoc loc = here(P);
        char c = *P->p;
        if (!c || c == '\n') { sb_free(&sb); return fail(P, loc, "unterminated string"); }
        advance(P);
        if (c == '\\') {
            char e = *P->p;
            advance(P);
            if (e == 'n') c = '\n';
            else if (e == 't') c = '\t';
            else if (e == '"' || e == '\\') c = e;
            else if (e == 'x' && strchr("0123456789abcdefABCDEF", P->p[0]) && P->p[0] &&
                     strchr("0123456789abcdefABCDEF", P->p[1]) && P->p[1]) {
                char hex[3] = {P->p[0], P->p[1], 0};
                c = (char)strtol(hex, NULL, 16);
                advance(P);
                advance(P);
            } else { sb_free(&sb); return fail(P, loc, "unknown escape in string"); }
        }
        sb_putc(&sb, c);
    }
    advance(P);
    *out = arena_strndup(P->a, sb.data ? sb.data : "", sb.len);
    sb_free(&sb);
    return true;
}

/* ---- types ---- */
static bool parse_scalar_type(Parser *P, IrType *t)
{
    skip_ws(P);
    SrcLoc loc = here(P);
    const char *w;
    if (!parse_word(P, "a type", &w)) return false;
    if (strcmp(w, "ptr") == 0) {
        if (*P->p != '<') return fail(P, here(P), "expected '<' after 'ptr'");
        advance(P);
        SrcLoc eloc = here(P);
        const char *e;
        if (!parse_word(P, "a pointee type", &e)) return false;
        IrElem pe = ir_elem_from_name(e);
        if (pe == IR_VOID || pe == IR_PTR) return fail(P, eloc, "bad pointee type '%s'", e);
        if (*P->p != '>') return fail(P, here(P), "expected '>', found %s", found(P));
        advance(P);
        *t = ir_type_ptr(pe);
        return true;
    }
    IrElem e = ir_elem_from_name(w);
    if (e == IR_VOID) return fail(P, loc, "unknown type '%s'", w);
    *t = ir_type_scalar(e);
    return true;
}

/* `#L<n>`: an index into the layout table read so far. */
static bool parse_layout_ref(Parser *P, int *layout)
{
    skip_ws(P);
    SrcLoc loc = here(P);
    int64_t n;
    if (!(P->p[0] == '#' && P->p[1] == 'L')) return fail(P, loc, "expected a layout '#L<n>', found %s", found(P));
    advance(P);
    advance(P);
    if (!parse_int(P, "a layout number", &n)) return false;
    if (n < 0 || n >= P->layouts.len) return fail(P, loc, "undefined layout '#L%lld'", (long long)n);
    *layout = (int)n;
    return true;
}

/* A type; `layout` (NULL: none allowed) gets the GPU layout of a tile type
 * `tensor<...xT, #Ln>`, else -1. */
static bool parse_type_l(Parser *P, IrType *t, int *layout)
{
    skip_ws(P);
    if (layout) *layout = -1;
    if (!(strncmp(P->p, "tensor", 6) == 0 && P->p[6] == '<')) return parse_scalar_type(P, t);
    for (int i = 0; i < 7; i++) advance(P);
    int32_t shape[IR_MAX_RANK];
    int rank = 0;
    while (is_digit(*P->p)) {
        SrcLoc loc = here(P);
        int64_t dim = 0;
        while (is_digit(*P->p)) {
            if (dim <= INT32_MAX) dim = dim * 10 + (*P->p - '0');
            advance(P);
        }
        if (dim <= 0 || dim > INT32_MAX) return fail(P, loc, "bad tensor dimension");
        if (rank == IR_MAX_RANK) return fail(P, loc, "tensor rank above %d", IR_MAX_RANK);
        shape[rank++] = (int32_t)dim;
        if (*P->p != 'x') return fail(P, here(P), "expected 'x' after a tensor dimension");
        advance(P);
    }
    if (rank == 0) return fail(P, here(P), "expected a tensor dimension, found %s", found(P));
    SrcLoc at = here(P);
    IrType s;
    if (!parse_scalar_type(P, &s)) return false;
    if (ir_type_numel(ir_type_tile(s, rank, shape)) > IR_MAX_TILE_NUMEL)
        return fail(P, at, "a tensor of more than %d elements", IR_MAX_TILE_NUMEL);
    if (*P->p == ',') {
        SrcLoc loc = here(P);
        if (!layout) return fail(P, loc, "a layout is not allowed here");
        advance(P);
        if (!parse_layout_ref(P, layout)) return false;
        skip_ws(P);
    }
    if (*P->p != '>') return fail(P, here(P), "expected '>' to close the tensor type, found %s", found(P));
    advance(P);
    *t = ir_type_tile(s, rank, shape);
    return true;
}

static bool parse_type(Parser *P, IrType *t) { return parse_type_l(P, t, NULL); }

/* `: T` or `: (T, U, ...)`, exactly n types; their layouts in *lays. */
static bool parse_result_types(Parser *P, int n, IrType **out, int **lays)
{
    skip_ws(P);
    SrcLoc loc = here(P);
    if (n == 0) {
        if (peek_inline(P, ':')) return fail(P, here(P), "an op without results takes no result type");
        *out = NULL;
        *lays = NULL;
        return true;
    }
    if (!expect(P, ":")) return false;
    IrType *ts = ARENA_ARRAY(P->a, IrType, n);
    *lays = ARENA_ARRAY(P->a, int, n);
    bool paren = accept(P, "(");
    int k = 0;
    do {
        IrType t;
        int l;
        if (!parse_type_l(P, &t, &l)) return false;
        if (k < n) ts[k] = t, (*lays)[k] = l;
        k++;
    } while ((paren || n > 1) && accept(P, ","));
    if (paren && !expect(P, ")")) return false;
    if (k != n) return fail(P, loc, "%d result type%s for %d result%s", k, k == 1 ? "" : "s", n, n == 1 ? "" : "s");
    *out = ts;
    return true;
}

/* ---- names ---- */
static bool parse_value_name(Parser *P, const char **name, SrcLoc *loc)
{
    skip_ws(P);
    *loc = here(P);
    if (*P->p != '%') return fail(P, *loc, "expected a value (%%name), found %s", found(P));
    advance(P);
    const char *s = P->p;
    while (is_ident(*P->p)) advance(P);
    size_t n = (size_t)(P->p - s);
    if (n == 0) return fail(P, *loc, "expected a value name after '%%'");
    bool numeric = true;
    for (size_t i = 0; i < n; i++) numeric = numeric && is_digit(s[i]);
    if (!numeric && is_digit(s[0])) return fail(P, *loc, "bad value name '%%%.*s'", (int)n, s);
    *name = arena_strndup(P->a, s, n);
    return true;
}

static IrValue *lookup(Parser *P, const char *name)
{
    for (int i = P->nsyms - 1; i >= 0; i--)
        if (strcmp(P->syms[i].name, name) == 0) return P->syms[i].v;
    return NULL;
}

static bool define(Parser *P, const char *name, SrcLoc loc, IrValue *v)
{
    if (lookup(P, name)) return fail(P, loc, "redefinition of '%%%s'", name);
    if (P->nsyms == P->capsyms) {
        int nc = P->capsyms ? P->capsyms * 2 : 64;
        Sym *ns = ARENA_ARRAY(P->a, Sym, nc);
        if (P->nsyms) memcpy(ns, P->syms, sizeof(Sym) * (size_t)P->nsyms);
        P->syms = ns;
        P->capsyms = nc;
    }
    P->syms[P->nsyms].name = name;
    P->syms[P->nsyms].v = v;
    P->nsyms++;
    if (!is_digit(name[0])) v->name = name;
    return true;
}

static bool parse_use(Parser *P, IrValue **out)
{
    const char *name;
    SrcLoc loc;
    if (!parse_value_name(P, &name, &loc)) return false;
    *out = lookup(P, name);
    if (!*out) return fail(P, loc, "use of undefined value '%%%s'", name);
    return true;
}

/* ---- op pieces ---- */
typedef struct OpText {
    IrOpcode opc;
    SrcLoc loc;                 /* start of the op */
    int nres;
    const char **res_names;
    SrcLoc *res_locs;
    IrValue **args;
    int nargs, capargs;
    int attr[IR_MAX_RANK];
    const char *lit;            /* CONST literal text */
    SrcLoc lit_loc;
    const char *sattr;
} OpText;

static void push_arg(Parser *P, OpText *t, IrValue *v)
{
    if (t->nargs == t->capargs) {
        int nc = t->capargs ? t->capargs * 2 : 4;
        IrValue **na = ARENA_ARRAY(P->a, IrValue *, nc);
        if (t->nargs) memcpy(na, t->args, sizeof(IrValue *) * (size_t)t->nargs);
        t->args = na;
        t->capargs = nc;
    }
    t->args[t->nargs++] = v;
}

/* Operands `%a, %b, ...`; the first must be on the op's line. */
static bool parse_operands(Parser *P, OpText *t)
{
    if (!peek_inline(P, '%')) return true;
    do {
        IrValue *v;
        if (!parse_use(P, &v)) return false;
        push_arg(P, t, v);
    } while (accept(P, ","));
    return true;
}

/* The part after `loc`: `(L:C)` or `("FILE":L:C)`. */
static bool parse_loc_body(Parser *P, SrcLoc *loc, const char *default_file)
{
    if (!expect(P, "(")) return false;
    const char *file = default_file;
    skip_ws(P);
    if (*P->p == '"') {
        if (!parse_string(P, &file) || !expect(P, ":")) return false;
    }
    int line, col;
    if (!parse_small(P, "a line number", &line) || !expect(P, ":") ||
        !parse_small(P, "a column number", &col) || !expect(P, ")"))
        return false;
    loc->file = file;
    loc->line = line;
    loc->col = col;
    return true;
}

/* `loc(...)` on the current line, if there. */
static bool parse_opt_loc(Parser *P, SrcLoc *loc, const char *default_file)
{
    if (!peek_inline(P, 'l') || !accept(P, "loc")) return true;
    return parse_loc_body(P, loc, default_file);
}

/* Number literal text: sign, digits, '.', exponent, hex; or inf/nan/true/false. */
static bool parse_literal_text(Parser *P, OpText *t)
{
    skip_ws(P);
    t->lit_loc = here(P);
    const char *s = P->p;
    if (*P->p == '-' || *P->p == '+') advance(P);
    if (!is_ident(*P->p)) return fail(P, t->lit_loc, "expected a constant, found %s", found(P));
    while (is_ident(*P->p) ||
           ((*P->p == '+' || *P->p == '-') && strchr("eEpP", P->p[-1]) && is_digit(s[s[0] == '-' || s[0] == '+'])))
        advance(P);
    t->lit = arena_strndup(P->a, s, (size_t)(P->p - s));
    return true;
}

static bool literal_value(Parser *P, const char *lit, SrcLoc loc, IrType type, int64_t *iv, double *fv)
{
    const char *s = lit;
    if (ir_elem_is_float((IrElem)type.elem)) {
        bool neg = *s == '-';
        const char *m = (*s == '-' || *s == '+') ? s + 1 : s;
        if (strcmp(m, "inf") == 0) *fv = neg ? -INFINITY : INFINITY;
        else if (strcmp(m, "nan") == 0) *fv = neg ? -NAN : NAN;
        else {
            char *end;
            *fv = strtod(s, &end);
            if (*end || end == s || !(is_digit(*m) || *m == '.'))
                return fail(P, loc, "bad float constant '%s'", lit);
        }
        *iv = 0;
        return true;
    }
    if (!ir_elem_is_int((IrElem)type.elem))
        return fail(P, loc, "constants of type %s are not allowed", ir_elem_name((IrElem)type.elem));
    if (strcmp(s, "true") == 0) *iv = 1;
    else if (strcmp(s, "false") == 0) *iv = 0;
    else {
        char *end;
        errno = 0;
        const char *m = (*s == '-' || *s == '+') ? s + 1 : s;
        bool hex = m[0] == '0' && (m[1] == 'x' || m[1] == 'X');
        long long v = strtoll(s, &end, hex ? 16 : 10);
        if (*end || !is_digit(*m)) return fail(P, loc, "bad integer constant '%s'", lit);
        if (errno == ERANGE) return fail(P, loc, "integer constant '%s' out of range", lit);
        *iv = v;
    }
    *fv = (double)*iv;
    return true;
}

/* Attributes between the op name and the operands; see print_attrs. */
static bool parse_attrs(Parser *P, OpText *t)
{
    switch (t->opc) {
    case IR_CONST: return parse_literal_text(P, t);
    case IR_PROGRAM_ID:
    case IR_NUM_PROGRAMS: return parse_small(P, "an axis", &t->attr[0]);
    case IR_EXPAND_DIMS: return parse_small(P, "an axis", &t->attr[0]);
    case IR_ARANGE:
        return parse_small(P, "the start", &t->attr[0]) && expect(P, ",") &&
               parse_small(P, "the end", &t->attr[1]);
    case IR_CMP: {
        skip_ws(P);
        SrcLoc loc = here(P);
        const char *w;
        if (!parse_word(P, "a predicate (eq ne lt le gt ge)", &w)) return false;
        for (int i = 0; i <= IR_CMP_GE; i++)
            if (strcmp(w, ir_cmp_name((IrCmp)i)) == 0) { t->attr[0] = i; return true; }
        return fail(P, loc, "unknown predicate '%s' (eq ne lt le gt ge)", w);
    }
    case IR_REDUCE: {
        skip_ws(P);
        SrcLoc loc = here(P);
        const char *w;
        if (!parse_word(P, "a reduction (sum max min argmax argmin)", &w)) return false;
        t->attr[1] = -1;
        for (int i = 0; i <= IR_RED_ARGMIN; i++)
            if (strcmp(w, ir_reduce_name((IrReduce)i)) == 0) t->attr[1] = i;
        if (t->attr[1] < 0) return fail(P, loc, "unknown reduction '%s' (sum max min argmax argmin)", w);
        return parse_small(P, "an axis", &t->attr[0]);
    }
    case IR_TRANS: {
        if (!expect(P, "[")) return false;
        int k = 0;
        do {
            skip_ws(P);
            if (k == IR_MAX_RANK) return fail(P, here(P), "permutation longer than %d", IR_MAX_RANK);
            if (!parse_small(P, "a dimension", &t->attr[k++])) return false;
        } while (accept(P, ","));
        return expect(P, "]");
    }
    default: return true;
    }
}

/* Is the next thing on this line an attribute dictionary `{name = ...`
 * (and not a region, whose first op never has `=` after a bare word)? */
static bool at_attr_dict(Parser *P)
{
    if (!peek_inline(P, '{')) return false;
    const char *s = P->p + 1;
    while (*s == ' ' || *s == '\t') s++;
    if (!is_alpha(*s)) return false;
    while (is_ident(*s)) s++;
    while (*s == ' ' || *s == '\t') s++;
    return *s == '=';
}

/* `{name = 3, other = [1, 2], ...}` into `l`. */
static bool parse_attr_dict(Parser *P, IrAttrList *l)
{
    if (!expect(P, "{")) return false;
    do {
        const char *name;
        skip_ws(P);
        SrcLoc loc = here(P);
        if (!parse_word(P, "an attribute name", &name)) return false;
        if (ir_attr_get(l, name)) return fail(P, loc, "attribute '%s' given twice", name);
        if (!expect(P, "=")) return false;
        int64_t vals[64];
        int n = 0;
        bool list = accept(P, "[");
        if (!list || !accept(P, "]")) {
            do {
                skip_ws(P);
                if (n == 64) return fail(P, here(P), "more than 64 values in attribute '%s'", name);
                if (!parse_int(P, "an integer", &vals[n++])) return false;
            } while (list && accept(P, ","));
            if (list && !expect(P, "]")) return false;
        }
        ir_attr_set(P->a, l, name, n, vals, list);
    } while (accept(P, ","));
    return expect(P, "}");
}

static bool parse_opt_attr_dict(Parser *P, IrAttrList *l)
{
    return !at_attr_dict(P) || parse_attr_dict(P, l);
}

/* The results of a new op get their GPU layouts; returns op. */
static IrOp *with_layouts(IrOp *op, const int *lays)
{
    for (int i = 0; lays && i < op->nres; i++) op->res[i]->layout = lays[i];
    return op;
}

/* ---- ops and blocks ---- */
static bool parse_block_body(Parser *P, IrBlock *b);

static bool finish_results(Parser *P, OpText *t, IrOp *op)
{
    for (int i = 0; i < t->nres; i++)
        if (!define(P, t->res_names[i], t->res_locs[i], op->res[i])) return false;
    return true;
}

/* `for %iv = %lo to %hi step %s [iter_args(%a = %x, ...)] [: (T...)] { ... }` */
static bool parse_for(Parser *P, OpText *t, IrOp **out)
{
    const char *iv_name, **names = NULL;
    SrcLoc iv_loc, *locs = NULL;
    IrValue *v;
    if (!parse_value_name(P, &iv_name, &iv_loc) || !expect(P, "=")) return false;
    if (!parse_use(P, &v)) return false;
    push_arg(P, t, v);
    if (!expect(P, "to") || !parse_use(P, &v)) return false;
    push_arg(P, t, v);
    if (!expect(P, "step") || !parse_use(P, &v)) return false;
    push_arg(P, t, v);
    int ncar = 0;
    SrcLoc iter_loc = here(P);
    if (accept(P, "iter_args")) {
        names = ARENA_ARRAY(P->a, const char *, 64);
        locs = ARENA_ARRAY(P->a, SrcLoc, 64);
        if (!expect(P, "(")) return false;
        do {
            if (ncar == 64) return fail(P, here(P), "more than 64 iter_args");
            if (!parse_value_name(P, &names[ncar], &locs[ncar]) || !expect(P, "=") || !parse_use(P, &v))
                return false;
            push_arg(P, t, v);
            ncar++;
        } while (accept(P, ","));
        if (!expect(P, ")")) return false;
    }
    if (ncar != t->nres)
        return fail(P, ncar ? iter_loc : t->loc, "'for' has %d iter_args but %d result%s", ncar, t->nres,
                    t->nres == 1 ? "" : "s");
    IrAttrList attrs = {0};
    IrType *types;
    int *lays;
    if (!parse_opt_attr_dict(P, &attrs) || !parse_result_types(P, t->nres, &types, &lays)) return false;
    IrOp *op = with_layouts(ir_op_new(P->f, IR_FOR, t->loc, t->nargs, t->args, t->nres, types), lays);
    op->attrs = attrs;
    IrBlock *body = ir_op_add_region(P->f, op);
    int mark = P->nsyms;
    IrValue *iv = ir_block_add_arg(body, t->args[0]->type, NULL);
    if (!define(P, iv_name, iv_loc, iv)) return false;
    for (int i = 0; i < ncar; i++) {
        IrValue *arg = ir_block_add_arg(body, types[i], NULL);
        arg->layout = lays[i]; /* a carried value keeps the for result's layout */
        if (!define(P, names[i], locs[i], arg)) return false;
    }
    if (!parse_block_body(P, body)) return false;
    P->nsyms = mark;
    *out = op;
    return true;
}

/* `if %c [: (T...)] { ... } [else { ... }]` */
static bool parse_if(Parser *P, OpText *t, IrOp **out)
{
    IrValue *c;
    if (!parse_use(P, &c)) return false;
    push_arg(P, t, c);
    IrAttrList attrs = {0};
    IrType *types;
    int *lays;
    if (!parse_opt_attr_dict(P, &attrs) || !parse_result_types(P, t->nres, &types, &lays)) return false;
    IrOp *op = with_layouts(ir_op_new(P->f, IR_IF, t->loc, t->nargs, t->args, t->nres, types), lays);
    op->attrs = attrs;
    for (int r = 0; r < 2; r++) {
        if (r == 1 && !accept(P, "else")) break;
        IrBlock *b = ir_op_add_region(P->f, op);
        int mark = P->nsyms;
        if (!parse_block_body(P, b)) return false;
        P->nsyms = mark;
    }
    *out = op;
    return true;
}

static bool parse_plain(Parser *P, OpText *t, IrOp **out)
{
    if (!parse_attrs(P, t)) return false;
    if (t->opc == IR_ASSERT) {
        IrValue *c;
        if (!parse_use(P, &c) || !expect(P, ",") || !parse_string(P, &t->sattr)) return false;
        push_arg(P, t, c);
    } else if (!parse_operands(P, t)) {
        return false;
    }
    IrAttrList attrs = {0};
    IrType *types;
    int *lays;
    if (!parse_opt_attr_dict(P, &attrs) || !parse_result_types(P, t->nres, &types, &lays)) return false;
    IrOp *op = with_layouts(ir_op_new(P->f, t->opc, t->loc, t->nargs, t->args, t->nres, types), lays);
    op->attrs = attrs;
    memcpy(op->attr, t->attr, sizeof op->attr);
    op->sattr = t->sattr;
    if (t->opc == IR_CONST && !literal_value(P, t->lit, t->lit_loc, types[0], &op->ival, &op->fval))
        return false;
    *out = op;
    return true;
}

static const char *suggest_op(const char *w)
{
    int best = 3;
    const char *s = NULL;
    for (int i = 0; i < IR_OP_COUNT; i++) {
        int d = sup_edit_distance(w, ir_op_info[i].name);
        if (d < best) { best = d; s = ir_op_info[i].name; }
    }
    return s;
}

static bool parse_op(Parser *P, IrBlock *b)
{
    OpText t;
    memset(&t, 0, sizeof t);
    skip_ws(P);
    t.loc = here(P);
    const char *names[64];
    SrcLoc locs[64];
    if (*P->p == '%') {
        do {
            if (t.nres == 64) return fail(P, here(P), "more than 64 results");
            if (!parse_value_name(P, &names[t.nres], &locs[t.nres])) return false;
            t.nres++;
        } while (accept(P, ","));
        if (!expect(P, "=")) return false;
    }
    t.res_names = names;
    t.res_locs = locs;
    skip_ws(P);
    SrcLoc op_loc = here(P);
    const char *w;
    if (!parse_word(P, "an op name", &w)) return false;
    t.opc = ir_opcode_from_name(w);
    if (t.opc == IR_OP_COUNT) {
        const char *s = suggest_op(w);
        if (s) return fail(P, op_loc, "unknown op '%s'; did you mean '%s'?", w, s);
        return fail(P, op_loc, "unknown op '%s'", w);
    }
    int want = ir_op_info[t.opc].nres;
    if (want >= 0 && t.nres != want)
        return fail(P, t.nres ? t.loc : op_loc, "'%s' has %d result%s, %d named", w, want,
                    want == 1 ? "" : "s", t.nres);
    IrOp *op = NULL;
    bool ok = t.opc == IR_FOR ? parse_for(P, &t, &op)
            : t.opc == IR_IF  ? parse_if(P, &t, &op)
                              : parse_plain(P, &t, &op);
    if (!ok || !parse_opt_loc(P, &op->loc, P->func_file)) return false;
    ir_block_append(b, op);
    return finish_results(P, &t, op);
}

static bool parse_block_body(Parser *P, IrBlock *b)
{
    skip_ws(P);
    SrcLoc open = here(P);
    if (!expect(P, "{")) return false;
    for (;;) {
        skip_ws(P);
        if (accept(P, "}")) return true;
        if (!*P->p)
            return fail(P, here(P), "expected '}' to close the block opened at %d:%d", open.line, open.col);
        if (!parse_op(P, b)) return false;
    }
}

/* ---- kernels ---- */
static bool parse_params(Parser *P, IrFunc *f)
{
    if (!expect(P, "(")) return false;
    if (accept(P, ")")) return true;
    do {
        const char *name;
        SrcLoc loc;
        IrType ty;
        int lay;
        if (!parse_value_name(P, &name, &loc) || !expect(P, ":") || !parse_type_l(P, &ty, &lay)) return false;
        IrValue *v = ir_func_add_param(f, ty, NULL);
        v->layout = lay;
        if (!define(P, name, loc, v)) return false;
        if (accept(P, "{")) {
            int div;
            skip_ws(P);
            SrcLoc dloc = here(P);
            if (!expect(P, "div") || !expect(P, "=") || !parse_small(P, "a divisibility", &div)) return false;
            if (div < 1) return fail(P, dloc, "divisibility must be at least 1");
            if (!expect(P, "}")) return false;
            v->divisibility = div;
        }
    } while (accept(P, ","));
    return expect(P, ")");
}

/* `name`, `grad(name)`, `grad(grad(name))`, ...: the text as the printer wrote it. */
static bool parse_fn_value(Parser *P, const char **out)
{
    skip_ws(P);
    const char *start = P->p, *name;
    int depth = 0;
    for (;;) {
        if (!parse_word(P, "a function name", &name)) return false;
        if (strcmp(name, "grad") != 0 || !accept(P, "(")) break;
        depth++;
    }
    for (int i = 0; i < depth; i++)
        if (!expect(P, ")")) return false;
    *out = arena_strndup(P->a, start, (size_t)(P->p - start));
    return true;
}

static bool parse_consts(Parser *P, IrFunc *f)
{
    if (!expect(P, "(")) return false;
    IrConstParam tmp[64];
    int n = 0;
    do {
        skip_ws(P);
        if (n == 64) return fail(P, here(P), "more than 64 consts");
        IrConstParam *c = &tmp[n++];
        memset(c, 0, sizeof *c);
        OpText t;
        memset(&t, 0, sizeof t);
        if (!parse_word(P, "a const name", &c->name) || !expect(P, ":")) return false;
        if (accept(P, "fn")) { /* a helper function: `F: fn = @name`, or its derivative `@grad(name)` */
            skip_ws(P);
            if (!expect(P, "=") || !expect(P, "@") || !parse_fn_value(P, &c->sval)) return false;
            continue;
        }
        if (accept(P, "dtype")) { /* an element type: `T: dtype = f16` */
            if (!expect(P, "=")) return false;
            skip_ws(P);
            const char *s = P->p;
            if (!parse_type(P, &c->type)) return false;
            c->sval = arena_strndup(P->a, s, (size_t)(P->p - s));
            continue;
        }
        if (!parse_type(P, &c->type) || !expect(P, "=") || !parse_literal_text(P, &t) ||
            !literal_value(P, t.lit, t.lit_loc, c->type, &c->ival, &c->fval))
            return false;
    } while (accept(P, ","));
    if (!expect(P, ")")) return false;
    f->consts = ARENA_ARRAY(P->a, IrConstParam, n);
    memcpy(f->consts, tmp, sizeof(IrConstParam) * (size_t)n);
    f->nconsts = n;
    return true;
}

static bool parse_settings(Parser *P, IrFunc *f)
{
    bool seen_w = false, seen_s = false;
    for (;;) {
        skip_ws(P);
        SrcLoc loc = here(P);
        bool w = accept(P, "num_warps");
        if (!w && !accept(P, "num_stages")) return true;
        if (w ? seen_w : seen_s) return fail(P, loc, "'%s' given twice", w ? "num_warps" : "num_stages");
        int v;
        if (!expect(P, "=") || !parse_small(P, "a number", &v)) return false;
        if (w) { f->sched.num_warps = v; seen_w = true; }
        else { f->sched.num_stages = v; seen_s = true; }
    }
}

/* ---- GPU IR layouts: `#L<n> = #blocked<...> | #mma<...> | #slice<...>` ---- */
static bool parse_int_list(Parser *P, int *v, int *n)
{
    if (!expect(P, "[")) return false;
    *n = 0;
    do {
        skip_ws(P);
        if (*n == IR_MAX_RANK) return fail(P, here(P), "more than %d dimensions", IR_MAX_RANK);
        if (!parse_small(P, "an integer", &v[(*n)++])) return false;
    } while (accept(P, ","));
    return expect(P, "]");
}

static bool parse_blocked(Parser *P, IrLayout *l)
{
    static const char *const keys[6] = {"spt", "tpw", "rpw", "wpc", "order", "wst"};
    int *fields[6] = {l->spt, l->tpw, l->rpw, l->wpc, l->order, l->wst};
    bool seen[6] = {false};
    l->kind = IR_LAYOUT_BLOCKED;
    l->rank = -1;
    do {
        skip_ws(P);
        SrcLoc loc = here(P);
        const char *w;
        if (!parse_word(P, "a layout field (spt tpw rpw wpc order wst)", &w)) return false;
        int k = 0;
        while (k < 6 && strcmp(w, keys[k]) != 0) k++;
        if (k == 6) return fail(P, loc, "unknown layout field '%s' (spt tpw rpw wpc order wst)", w);
        if (seen[k]) return fail(P, loc, "layout field '%s' given twice", w);
        int n;
        if (!expect(P, "=") || !parse_int_list(P, fields[k], &n)) return false;
        if (l->rank >= 0 && n != l->rank) return fail(P, loc, "'%s' has %d entries, the layout rank is %d", w, n, l->rank);
        l->rank = n;
        seen[k] = true;
    } while (accept(P, ","));
    for (int k = 0; k < 6; k++)
        if (!seen[k] && k != 2 && k != 5) return fail(P, here(P), "#blocked needs '%s'", keys[k]);
    return true;
}

static bool parse_layout_def(Parser *P)
{
    skip_ws(P);
    SrcLoc loc = here(P);
    int64_t n;
    if (!(P->p[0] == '#' && P->p[1] == 'L')) return fail(P, loc, "expected '#L<n> = <layout>'");
    advance(P);
    advance(P);
    if (!parse_int(P, "a layout number", &n)) return false;
    if (n != P->layouts.len) return fail(P, loc, "layout '#L%lld' out of order (expected #L%d)", (long long)n, P->layouts.len);
    if (!expect(P, "=")) return false;
    IrLayout *l = ARENA_NEW(P->a, IrLayout);
    skip_ws(P);
    SrcLoc kloc = here(P);
    const char *kind;
    if (!expect(P, "#") || !parse_word(P, "a layout kind", &kind) || !expect(P, "<")) return false;
    if (strcmp(kind, "blocked") == 0) {
        if (!parse_blocked(P, l)) return false;
    } else if (strcmp(kind, "slice") == 0) {
        l->kind = IR_LAYOUT_SLICE;
        if (!expect(P, "dim") || !expect(P, "=") || !parse_small(P, "a dimension", &l->dim) || !expect(P, ",") ||
            !expect(P, "parent") || !expect(P, "=") || !parse_layout_ref(P, &l->parent))
            return false;
        const IrLayout *par = P->layouts.data[l->parent];
        l->rank = par->rank - 1;
        if (l->dim < 0 || l->dim > l->rank) return fail(P, kloc, "slice dimension %d out of range", l->dim);
    } else if (strcmp(kind, "mma") == 0) {
        const char *frag;
        int wm, wn;
        skip_ws(P);
        SrcLoc floc = here(P);
        if (!parse_word(P, "a fragment (A B C)", &frag)) return false;
        if (strlen(frag) != 1 || frag[0] < 'A' || frag[0] > 'C') return fail(P, floc, "unknown fragment '%s' (A B C)", frag);
        if (!expect(P, ",") || !expect(P, "wm") || !expect(P, "=") || !parse_small(P, "a warp count", &wm) ||
            !expect(P, ",") || !expect(P, "wn") || !expect(P, "=") || !parse_small(P, "a warp count", &wn))
            return false;
        if (wm < 1 || wn < 1) return fail(P, floc, "warp counts must be positive");
        int rn = 0; /* optional: `, rn=R` (n8 tiles side by side per warp) */
        skip_ws(P);
        if (*P->p == ',' && (!expect(P, ",") || !expect(P, "rn") || !expect(P, "=") ||
                             !parse_small(P, "a tile count", &rn)))
            return false;
        if (rn < 0 || (rn && frag[0] == 'A')) return fail(P, floc, "rn applies to the C and B fragments, and is positive");
        /* The fields are fixed by the fragment: build them in a scratch function. */
        IrFunc tmp;
        memset(&tmp, 0, sizeof tmp);
        tmp.arena = P->a;
        *l = *ir_layout_get(&tmp, ir_layout_mma_rn(&tmp, frag[0] - 'A' + IR_MMA_A, wm, wn, rn));
    } else {
        return fail(P, kloc, "unknown layout kind '#%s' (blocked mma slice)", kind);
    }
    if (!expect(P, ">")) return false;
    for (int d = 0; d < l->rank; d++)
        if (l->rpw[d] < 1) l->rpw[d] = 1;
    vec_push(P->a, &P->layouts, l);
    return true;
}

static bool parse_kernel(Parser *P, IrModule *m)
{
    skip_ws(P);
    SrcLoc kloc = here(P);
    if (!expect(P, "kernel")) return false;
    skip_ws(P);
    SrcLoc nloc = here(P);
    if (*P->p != '@') return fail(P, nloc, "expected '@name' after 'kernel', found %s", found(P));
    advance(P);
    const char *name;
    if (!parse_word(P, "a kernel name", &name)) return false;
    for (int i = 0; i < m->nfuncs; i++)
        if (strcmp(m->funcs[i]->name, name) == 0) return fail(P, nloc, "redefinition of kernel '@%s'", name);
    IrFunc *f = ir_func_new(P->a, name, kloc);
    f->layouts = P->layouts; /* the `#Ln` lines read before this kernel */
    P->f = f;
    P->nsyms = 0;
    P->func_file = NULL;
    if (!parse_params(P, f)) return false;
    if (accept(P, "consts") && !parse_consts(P, f)) return false;
    if (!parse_settings(P, f)) return false;
    if (accept(P, "attributes") && !parse_attr_dict(P, &f->attrs)) return false;
    if (accept(P, "loc")) {
        if (!parse_loc_body(P, &f->loc, NULL)) return false;
        P->func_file = f->loc.file;
    }
    if (!parse_block_body(P, f->body)) return false;
    ir_module_add(m, f);
    memset(&P->layouts, 0, sizeof P->layouts);
    return true;
}

IrModule *ir_parse(Arena *a, struct Diag *d, const char *path, const char *src)
{
    Parser P;
    memset(&P, 0, sizeof P);
    P.a = a;
    P.d = d;
    P.path = path;
    P.p = src ? src : "";
    P.line_start = P.p;
    P.line = 1;
    IrModule *m = ir_module_new(a);
    for (;;) {
        skip_ws(&P);
        if (!*P.p) break;
        if (*P.p == '#') {
            if (!parse_layout_def(&P)) return NULL;
            continue;
        }
        if (!parse_kernel(&P, m)) return NULL;
    }
    return m;
}
