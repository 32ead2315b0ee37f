/* parse.h — internal interface between the lexer (lexer.l), the parser
 * (parser.y) and the AST constructors (ast.c). Not for use outside lang/.
 *
 * The lexer and the parser share one ParseCtx: it owns the arena and the Diag,
 * tracks the position of the scanner (1-based line and column, counted in
 * bytes so the caret of diag.c lines up), remembers the last two tokens for
 * "expected ';' after expression" messages, and counts bracket nesting so that
 * absurd inputs stop with an error instead of exhausting the stack.
 *
 * Depth limits: every AST node built by the constructors below records its
 * height (1 + the tallest child). A node that would exceed AST_MAX_DEPTH is
 * replaced by a leaf after one "nested too deeply" error, so every later
 * recursive walk (sema, lowering, ast_print) is bounded whatever the input.
 */
#ifndef KILN_PARSE_H
#define KILN_PARSE_H

#include "ast.h"
#include "../support/diag.h"

#include <setjmp.h>

#define AST_MAX_DEPTH 256     /* height of an expression/statement tree */
#define PARSE_MAX_NEST 256    /* open brackets ( [ { at one time */

typedef struct ParseCtx {
    Arena *arena;
    Diag *diag;
    const char *path;
    PtrVec decls;             /* AstDecl*, in source order */

    /* scanner position of the next character */
    int line, col;
    /* the last token returned (the parser's lookahead during an error) and the
     * one before it; *_end is the column just past the token */
    int last_kind, prev_kind;
    SrcLoc last_loc, last_end, prev_end;
    char last_text[64];
    int ntok;                 /* tokens returned so far */
    int sync_tok;             /* index of the last ';' or '}' returned */
    int err_tok, err_line;    /* lookahead index and line of the last syntax error */       /* text of the last token, cut short, for messages */

    int nest;                 /* currently open brackets */
    SrcLoc brace_loc[PARSE_MAX_NEST]; /* where each open bracket is */
    char brace_ch[PARSE_MAX_NEST];
    char pending_close;       /* ')' ']' '}' or ';' not yet applied to the stack */
    bool closing_blocks;      /* handing out '}' for blocks left open before `kernel` */
    bool stop;                /* a fatal lexical limit was hit: stay silent, end */
    bool depth_reported;      /* "nested too deeply" given once per file */
    jmp_buf fatal;            /* where the scanner's fatal errors (no memory) return */
} ParseCtx;

/* ---- constructors (ast.c); all return arena nodes, never NULL ---- */
AstExpr *ast_new_expr(ParseCtx *p, AstExprKind kind, SrcLoc loc);
AstExpr *ast_new_unary(ParseCtx *p, AstOp op, AstExpr *e, SrcLoc loc);
AstExpr *ast_new_binary(ParseCtx *p, AstOp op, AstExpr *l, AstExpr *r, SrcLoc loc);
AstExpr *ast_new_ternary(ParseCtx *p, AstExpr *c, AstExpr *a, AstExpr *b, SrcLoc loc);
/* callee/method name in `name`; lhs NULL for calls and lists; args is a PtrVec of AstArg* */
AstExpr *ast_new_call(ParseCtx *p, AstExprKind kind, const char *name, AstExpr *lhs,
                      PtrVec *args, SrcLoc loc);
AstArg *ast_new_arg(ParseCtx *p, const char *name, AstExpr *value, SrcLoc loc);

AstStmt *ast_new_stmt(ParseCtx *p, AstStmtKind kind, SrcLoc loc);
/* Recompute the height of `s` from its children (after filling them in);
 * returns `s`, or an empty block when the limit is exceeded. */
AstStmt *ast_seal_stmt(ParseCtx *p, AstStmt *s);
AstStmt *ast_new_block(ParseCtx *p, PtrVec *stmts, SrcLoc loc);

PtrVec *ast_new_vec(ParseCtx *p);

/* `tune KERNEL { items }` (tune_space.c): items is a PtrVec of AstTuneItem*. */
AstDecl *ast_new_tune(ParseCtx *p, SrcLoc loc, const char *kernel, SrcLoc name_loc, PtrVec *items);
AstTuneItem *ast_new_tune_item(ParseCtx *p, SrcLoc loc, const char *name, bool is_dim, PtrVec *args);

#endif
