/* ast.c — AST constructors used by the parser, operator names, and the AST
 * printer behind `kiln compile --emit ast`.
 *
 * Height bookkeeping: every node made here is preceded in the arena by a
 * 16-byte header holding its height, so the parser can refuse trees taller
 * than AST_MAX_DEPTH in O(1) per node (see parse.h). Nodes not made here (a
 * later phase building AST) simply must not be passed to these constructors.
 *
 * Printed form (stable; tests/lang/test_parser.c holds a golden copy):
 *
 *   (kernel vec_add (param X *f32) (param n i32) (param const BLOCK i32 = 1024)
 *     (with (num_warps 4))
 *     (block
 *       (let offs (+ (* (call program_id 0) BLOCK) (call arange BLOCK)))
 *       (expr (call store (+ Z offs) x mask=mask))))
 *
 * Expressions print on one line as prefix forms: (+ a b), (- x), (? c a b),
 * (call f args), (index x : None), (method to x bf16), (list 128 64); keyword
 * arguments as name=value. Floats print in their shortest round-trip form
 * and always contain '.', 'e' or "inf" so they never read as integers.
 */
#include "parse.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- heights */

typedef struct NodeHeader {
    int height;
    int pad[3];          /* keeps the node 16-byte aligned */
} NodeHeader;

static void *node_alloc(ParseCtx *p, size_t size)
{
    NodeHeader *h = arena_alloc(p->arena, sizeof(NodeHeader) + size);
    h->height = 1;
    return h + 1;
}

static int height(const void *node)
{
    return node ? ((const NodeHeader *)node - 1)->height : 0;
}

static void set_height(void *node, int hgt) { ((NodeHeader *)node - 1)->height = hgt; }

static int imax(int a, int b) { return a > b ? a : b; }

/* Report the depth limit once per file. */
static void too_deep(ParseCtx *p, SrcLoc loc)
{
    if (p->depth_reported) return;
    p->depth_reported = true;
    diag_error(p->diag, loc, "expression or block nested too deeply (more than %d levels)",
               AST_MAX_DEPTH);
}

/* Finish an expression: compute its height from its children; past the limit
 * replace it by the leaf 0 so nothing built on top can grow further. */
static AstExpr *seal_expr(ParseCtx *p, AstExpr *e)
{
    int h = imax(height(e->lhs), imax(height(e->rhs), height(e->cond)));
    /* A left-associative chain `a + b + c + ...` is one level, not one per
     * operator: its left spine adds no height (every walker goes down a
     * binary's left spine in a loop, not by recursion). */
    if (e->kind == AST_BINARY && e->lhs && e->lhs->kind == AST_BINARY)
        h = imax(height(e->lhs) - 1, height(e->rhs));
    for (int i = 0; i < e->nargs; i++) h = imax(h, height(e->args[i].value));
    if (h + 1 > AST_MAX_DEPTH) {
        too_deep(p, e->loc);
        AstExpr *leaf = ast_new_expr(p, AST_INT, e->loc);
        return leaf;
    }
    set_height(e, h + 1);
    return e;
}

/* ---------------------------------------------------------------- constructors */

PtrVec *ast_new_vec(ParseCtx *p) { return ARENA_NEW(p->arena, PtrVec); }

AstExpr *ast_new_expr(ParseCtx *p, AstExprKind kind, SrcLoc loc)
{
    AstExpr *e = node_alloc(p, sizeof *e);
    e->kind = kind;
    e->loc = loc;
    return e;
}

AstExpr *ast_new_unary(ParseCtx *p, AstOp op, AstExpr *x, SrcLoc loc)
{
    AstExpr *e = ast_new_expr(p, AST_UNARY, loc);
    e->op = op;
    e->lhs = x;
    return seal_expr(p, e);
}

AstExpr *ast_new_binary(ParseCtx *p, AstOp op, AstExpr *l, AstExpr *r, SrcLoc loc)
{
    AstExpr *e = ast_new_expr(p, AST_BINARY, loc);
    e->op = op;
    e->lhs = l;
    e->rhs = r;
    return seal_expr(p, e);
}

AstExpr *ast_new_ternary(ParseCtx *p, AstExpr *c, AstExpr *a, AstExpr *b, SrcLoc loc)
{
    AstExpr *e = ast_new_expr(p, AST_TERNARY, loc);
    e->cond = c;
    e->lhs = a;
    e->rhs = b;
    return seal_expr(p, e);
}

AstArg *ast_new_arg(ParseCtx *p, const char *name, AstExpr *value, SrcLoc loc)
{
    AstArg *a = ARENA_NEW(p->arena, AstArg);
    a->name = name;
    a->value = value;
    a->loc = loc;
    return a;
}

AstExpr *ast_new_call(ParseCtx *p, AstExprKind kind, const char *name, AstExpr *lhs,
                      PtrVec *args, SrcLoc loc)
{
    AstExpr *e = ast_new_expr(p, kind, loc);
    e->sval = name;
    e->lhs = lhs;
    int n = args ? args->len : 0;
    e->args = ARENA_ARRAY(p->arena, AstArg, n);
    for (int i = 0; i < n; i++) e->args[i] = *(AstArg *)args->data[i];
    e->nargs = n;
    return seal_expr(p, e);
}

AstStmt *ast_new_stmt(ParseCtx *p, AstStmtKind kind, SrcLoc loc)
{
    AstStmt *s = node_alloc(p, sizeof *s);
    s->kind = kind;
    s->loc = loc;
    s->op = -1;
    return s;
}

AstStmt *ast_seal_stmt(ParseCtx *p, AstStmt *s)
{
    int h = imax(imax(height(s->value), height(s->lo)), imax(height(s->hi), height(s->step)));
    h = imax(h, imax(height(s->body), height(s->else_body)));
    for (int i = 0; i < s->nstmts; i++) h = imax(h, height(s->stmts[i]));
    /* A block is no level of its own: `for ... { if ... { } }` is two deep. */
    if (s->kind == AST_BLOCK && h > 0) h--;
    if (h + 1 > AST_MAX_DEPTH) {
        too_deep(p, s->loc);
        return ast_new_stmt(p, AST_BLOCK, s->loc);
    }
    set_height(s, h + 1);
    return s;
}

AstStmt *ast_new_block(ParseCtx *p, PtrVec *stmts, SrcLoc loc)
{
    AstStmt *s = ast_new_stmt(p, AST_BLOCK, loc);
    int n = stmts ? stmts->len : 0;
    s->stmts = ARENA_ARRAY(p->arena, AstStmt *, n);
    for (int i = 0; i < n; i++) s->stmts[i] = stmts->data[i];
    s->nstmts = n;
    return ast_seal_stmt(p, s);
}

int ast_binary_spine(const AstExpr *e, const AstExpr **out, int max)
{
    int n = 0;
    for (const AstExpr *x = e; x && x->kind == AST_BINARY; x = x->lhs) n++;
    int i = n;
    for (const AstExpr *x = e; out && x && x->kind == AST_BINARY; x = x->lhs)
        if (--i < max) out[i] = x;
    return n;
}

/* ---------------------------------------------------------------- operators */

const char *ast_op_text(AstOp op)
{
    switch (op) {
    case OP_ADD: return "+";
    case OP_SUB: return "-";
    case OP_MUL: return "*";
    case OP_DIV: return "/";
    case OP_MOD: return "%";
    case OP_SHL: return "<<";
    case OP_SHR: return ">>";
    case OP_BITAND: return "&";
    case OP_BITOR: return "|";
    case OP_BITXOR: return "^";
    case OP_LT: return "<";
    case OP_LE: return "<=";
    case OP_GT: return ">";
    case OP_GE: return ">=";
    case OP_EQ: return "==";
    case OP_NE: return "!=";
    case OP_LAND: return "&&";
    case OP_LOR: return "||";
    case OP_NEG: return "-";
    case OP_NOT: return "!";
    case OP_BITNOT: return "~";
    case OP_PLUS: return "+";
    }
    return "?";
}

/* ---------------------------------------------------------------- printer */

/* Shortest decimal form that reads back as the same double. */
static void print_float(StrBuf *out, double v)
{
    if (isinf(v)) {
        sb_puts(out, v > 0 ? "inf" : "-inf");
        return;
    }
    if (isnan(v)) {
        sb_puts(out, "nan");
        return;
    }
    char buf[40];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, v);
        if (strtod(buf, NULL) == v) break;
    }
    /* 25000 reads better than 2.5e+04: fixed notation for moderate values */
    double mag = fabs(v);
    if (strchr(buf, 'e') && mag >= 1e-4 && mag < 1e16) {
        for (int dec = 0; dec <= 20; dec++) {
            snprintf(buf, sizeof buf, "%.*f", dec, v);
            if (strtod(buf, NULL) == v) break;
        }
    }
    sb_puts(out, buf);
    if (!strpbrk(buf, ".e")) sb_puts(out, ".0");
}

static void print_string(StrBuf *out, const char *s)
{
    sb_putc(out, '"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') {
            sb_putc(out, '\\');
            sb_putc(out, *s);
        } else if (*s == '\n') {
            sb_puts(out, "\\n");
        } else {
            sb_putc(out, *s);
        }
    }
    sb_putc(out, '"');
}

static void print_expr(StrBuf *out, const AstExpr *e);

static void print_args(StrBuf *out, const AstExpr *e)
{
    for (int i = 0; i < e->nargs; i++) {
        sb_putc(out, ' ');
        if (e->args[i].name) sb_printf(out, "%s=", e->args[i].name);
        print_expr(out, e->args[i].value);
    }
}

static void print_expr(StrBuf *out, const AstExpr *e)
{
    if (!e) {
        sb_puts(out, "<null>");
        return;
    }
    switch (e->kind) {
    case AST_INT: sb_printf(out, "%lld", (long long)e->ival); break;
    case AST_FLOAT: print_float(out, e->fval); break;
    case AST_BOOL: sb_puts(out, e->ival ? "true" : "false"); break;
    case AST_STRING: print_string(out, e->sval ? e->sval : ""); break;
    case AST_NONE: sb_puts(out, "None"); break;
    case AST_SLICE: sb_puts(out, ":"); break;
    case AST_NAME: sb_puts(out, e->sval); break;
    case AST_UNARY:
        sb_printf(out, "(%s ", ast_op_text(e->op));
        print_expr(out, e->lhs);
        sb_putc(out, ')');
        break;
    case AST_BINARY: { /* (op lhs rhs), the left spine in a loop */
        int n = ast_binary_spine(e, NULL, 0);
        const AstExpr **spine = malloc(sizeof *spine * (size_t)n);
        if (!spine) {
            sb_puts(out, "<out of memory>");
            break;
        }
        ast_binary_spine(e, spine, n);
        for (int i = n - 1; i >= 0; i--) sb_printf(out, "(%s ", ast_op_text(spine[i]->op));
        print_expr(out, spine[0]->lhs);
        for (int i = 0; i < n; i++) {
            sb_putc(out, ' ');
            print_expr(out, spine[i]->rhs);
            sb_putc(out, ')');
        }
        free(spine);
        break;
    }
    case AST_TERNARY:
        sb_puts(out, "(? ");
        print_expr(out, e->cond);
        sb_putc(out, ' ');
        print_expr(out, e->lhs);
        sb_putc(out, ' ');
        print_expr(out, e->rhs);
        sb_putc(out, ')');
        break;
    case AST_CALL:
        sb_printf(out, "(call %s", e->sval);
        print_args(out, e);
        sb_putc(out, ')');
        break;
    case AST_INDEX:
        sb_puts(out, "(index ");
        print_expr(out, e->lhs);
        print_args(out, e);
        sb_putc(out, ')');
        break;
    case AST_METHOD:
        sb_printf(out, "(method %s ", e->sval);
        print_expr(out, e->lhs);
        print_args(out, e);
        sb_putc(out, ')');
        break;
    case AST_LIST:
        sb_puts(out, "(list");
        print_args(out, e);
        sb_putc(out, ')');
        break;
    }
}

static void indent(StrBuf *out, int depth)
{
    sb_putc(out, '\n');
    for (int i = 0; i < depth; i++) sb_puts(out, "  ");
}

static void print_stmt(StrBuf *out, const AstStmt *s, int depth)
{
    indent(out, depth);
    switch (s->kind) {
    case AST_LET:
    case AST_VAR:
        sb_printf(out, "(%s %s ", s->kind == AST_LET ? "let" : "var", s->name);
        print_expr(out, s->value);
        sb_putc(out, ')');
        break;
    case AST_ASSIGN:
        sb_printf(out, "(%s= %s ", s->op < 0 ? "" : ast_op_text((AstOp)s->op), s->name);
        print_expr(out, s->value);
        sb_putc(out, ')');
        break;
    case AST_EXPR:
        sb_puts(out, "(expr ");
        print_expr(out, s->value);
        sb_putc(out, ')');
        break;
    case AST_RETURN:
        sb_puts(out, "(return");
        if (s->value) {
            sb_putc(out, ' ');
            print_expr(out, s->value);
        }
        sb_putc(out, ')');
        break;
    case AST_FOR:
        sb_printf(out, "(for %s (range ", s->name);
        print_expr(out, s->lo);
        sb_putc(out, ' ');
        print_expr(out, s->hi);
        if (s->step) {
            sb_putc(out, ' ');
            print_expr(out, s->step);
        }
        sb_putc(out, ')');
        print_stmt(out, s->body, depth + 1);
        sb_putc(out, ')');
        break;
    case AST_IF:
        sb_puts(out, "(if ");
        print_expr(out, s->value);
        print_stmt(out, s->body, depth + 1);
        if (s->else_body) {
            indent(out, depth + 1);
            sb_puts(out, "(else");
            print_stmt(out, s->else_body, depth + 2);
            sb_putc(out, ')');
        }
        sb_putc(out, ')');
        break;
    case AST_BLOCK:
        sb_puts(out, "(block");
        for (int i = 0; i < s->nstmts; i++) print_stmt(out, s->stmts[i], depth + 1);
        sb_putc(out, ')');
        break;
    }
}

static void print_param(StrBuf *out, const AstParam *pm)
{
    sb_printf(out, " (param %s%s", pm->is_const ? "const " : "", pm->name);
    if (pm->type.name) sb_printf(out, " %s%s", pm->type.is_ptr ? "*" : "", pm->type.name);
    if (pm->default_value) {
        sb_puts(out, " = ");
        print_expr(out, pm->default_value);
    }
    sb_putc(out, ')');
}

static void print_decl(StrBuf *out, const AstDecl *d)
{
    if (d->kind == AST_IMPORT) {
        if (d->of) sb_printf(out, "(import \"%s\" as %s)\n", d->name, d->of);
        else sb_printf(out, "(import \"%s\")\n", d->name);
        return;
    }
    if (d->kind == AST_PARAM) {
        sb_puts(out, "(module-param");
        print_param(out, &d->params[0]);
        sb_puts(out, ")\n");
        return;
    }
    if (d->kind == AST_INSTANCE) {
        sb_printf(out, "(kernel %s = %s", d->name, d->of);
        for (int i = 0; i < d->nbindings; i++) {
            sb_printf(out, " (%s ", d->bindings[i].name ? d->bindings[i].name : "?");
            print_expr(out, d->bindings[i].value);
            sb_putc(out, ')');
        }
        sb_puts(out, ")\n");
        return;
    }
    if (d->kind == AST_TUNE) {
        sb_printf(out, "(tune %s", d->name);
        for (int i = 0; i < d->ntune; i++) {
            const AstTuneItem *t = &d->tune[i];
            indent(out, 1);
            sb_printf(out, "(%s%s", t->is_dim ? "in " : "", t->name);
            for (int j = 0; j < t->nargs; j++) {
                sb_putc(out, ' ');
                print_expr(out, t->args[j].value);
            }
            sb_putc(out, ')');
        }
        sb_puts(out, ")\n");
        return;
    }
    if (d->kind == AST_CONST) {
        sb_printf(out, "(const %s ", d->name);
        print_expr(out, d->value);
        sb_puts(out, ")\n");
        return;
    }
    sb_printf(out, "(%s %s", d->kind == AST_KERNEL ? "kernel" : "fn", d->name);
    for (int i = 0; i < d->nparams; i++) print_param(out, &d->params[i]);
    if (d->nsettings) {
        indent(out, 1);
        sb_puts(out, "(with");
        for (int i = 0; i < d->nsettings; i++) {
            sb_printf(out, " (%s ", d->settings[i].name);
            print_expr(out, d->settings[i].value);
            sb_putc(out, ')');
        }
        sb_putc(out, ')');
    }
    if (d->body) print_stmt(out, d->body, 1);
    sb_puts(out, ")\n");
}

void ast_print(StrBuf *out, const AstFile *file)
{
    if (!file) return;
    for (int i = 0; i < file->ndecls; i++) print_decl(out, file->decls[i]);
}
