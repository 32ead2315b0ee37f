/* ast.h — the abstract syntax tree of a .tile file.
 *
 * The parser builds it, sema checks and specialises it, lower turns it into
 * Tile IR. Every node carries its SrcLoc. Nodes live in the compilation arena.
 * The AST is untyped: types, shapes and compile-time values are sema's job, so
 * a type name (f32, bf16) in an expression is just an AST_NAME, and `*f16` in
 * expression position never occurs (types appear only in parameter lists).
 */
#ifndef KILN_AST_H
#define KILN_AST_H

#include "../support/support.h"

typedef struct AstExpr AstExpr;
typedef struct AstStmt AstStmt;

typedef enum AstExprKind {
    AST_INT,      /* ival: 42, 0x10 */
    AST_FLOAT,    /* fval: 1.5, 1e-3, inf (AST_NAME "inf" is also accepted by sema) */
    AST_BOOL,     /* ival: true / false */
    AST_STRING,   /* sval: "message" (static_assert) */
    AST_NONE,     /* None: inside an index (x[:, None]) or as a call argument (axis = None) */
    AST_SLICE,    /* ':' inside an index */
    AST_NAME,     /* name */
    AST_UNARY,    /* op lhs:  -x  !x  ~x  +x */
    AST_BINARY,   /* lhs op rhs */
    AST_TERNARY,  /* cond ? lhs : rhs   (cond in `cond`) */
    AST_CALL,     /* callee(args...) with keyword args; callee is a name */
    AST_INDEX,    /* lhs[args...]: args are AST_SLICE / AST_NONE (expand) */
    AST_METHOD,   /* lhs.name(args...): x.to(bf16) */
    AST_LIST,     /* [a, b, c]: shapes in zeros([M, N], f32) */
} AstExprKind;

/* Binary and unary operator tokens, with C precedence in the parser. */
typedef enum AstOp {
    OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_MOD,
    OP_SHL, OP_SHR, OP_BITAND, OP_BITOR, OP_BITXOR,
    OP_LT, OP_LE, OP_GT, OP_GE, OP_EQ, OP_NE,
    OP_LAND, OP_LOR,
    OP_NEG, OP_NOT, OP_BITNOT, OP_PLUS,
} AstOp;

const char *ast_op_text(AstOp op);   /* "+", "<<", "&&", ... */
/* The left spine of a binary chain `a + b - c`: the number of AST_BINARY
 * nodes down e->lhs, e->lhs->lhs, ...; with `out`, stores them innermost
 * first (out[0]->lhs is the chain's first operand, out[n-1] == e). Walkers
 * loop over it: a chain of any length is one level of nesting. */
int ast_binary_spine(const AstExpr *e, const AstExpr **out, int max);

/* One argument of a call: positional (name == NULL) or keyword (name = value). */
typedef struct AstArg {
    const char *name;
    AstExpr *value;
    SrcLoc loc;
} AstArg;

struct AstExpr {
    AstExprKind kind;
    SrcLoc loc;
    AstOp op;
    int64_t ival;
    double fval;
    const char *sval;         /* AST_NAME, AST_STRING, AST_METHOD (method name), AST_CALL (callee) */
    AstExpr *lhs, *rhs, *cond;
    AstArg *args;             /* AST_CALL, AST_INDEX, AST_METHOD, AST_LIST (names NULL) */
    int nargs;
};

/* ---- types written in parameter lists ---- */
typedef struct AstType {
    SrcLoc loc;
    const char *name;     /* scalar name: i32, f16, bf16, bool, ... or "fn" */
    bool is_ptr;          /* *name */
} AstType;

typedef enum AstStmtKind {
    AST_LET,          /* let name = init;          (immutable) */
    AST_VAR,          /* var name = init;          (mutable)   */
    AST_ASSIGN,       /* name = value; name += value; (op in `op`, OP_ADD.. or -1 for plain) */
    AST_EXPR,         /* expr;  (store(...), atomic_add(...), static_assert(...)) */
    AST_FOR,          /* for name in range(lo, hi[, step]) body */
    AST_IF,           /* if cond then_body [else else_body] (else may be another AST_IF) */
    AST_BLOCK,        /* { stmts } */
    AST_RETURN,       /* return [value];  (helpers only) */
} AstStmtKind;

struct AstStmt {
    AstStmtKind kind;
    SrcLoc loc;
    const char *name;         /* LET/VAR/ASSIGN target, FOR induction variable */
    SrcLoc name_loc;
    int op;                   /* ASSIGN: -1 for '=', else the AstOp of 'op=' */
    AstExpr *value;           /* LET/VAR init, ASSIGN rhs, EXPR, RETURN (may be NULL), IF cond */
    AstExpr *lo, *hi, *step;  /* FOR range (step may be NULL = 1) */
    AstStmt *body;            /* FOR body, IF then (an AST_BLOCK) */
    AstStmt *else_body;       /* IF else: AST_BLOCK or AST_IF or NULL */
    AstStmt **stmts;          /* BLOCK */
    int nstmts;
};

/* A parameter: `name: type`, `const name: type [= default]`, or in a helper `name` alone. */
typedef struct AstParam {
    SrcLoc loc;
    const char *name;
    AstType type;             /* type.name == NULL when omitted (helpers only) */
    bool is_const;
    AstExpr *default_value;   /* kernels: const params only; helpers: any param; may be NULL */
    SrcLoc default_loc;       /* the '=' of the default */
    bool differentiable;      /* a module param `param X: *f32 differentiable;` (grad.c: param_grads) */
    SrcLoc differentiable_loc;
} AstParam;

/* A schedule setting: `with (num_warps = 4, num_stages = 3)`; values are const exprs. */
typedef struct AstSetting {
    SrcLoc loc;
    const char *name;
    AstExpr *value;
} AstSetting;

typedef enum AstDeclKind {
    AST_KERNEL,   /* kernel name(params) [with (settings)] { body } */
    AST_FN,       /* fn name(params) { body }   — inlined helper */
    AST_CONST,    /* const NAME = expr;           — file-level compile-time constant */
    AST_IMPORT,   /* import "module";  (name: the module as written; resolved by the driver) */
    AST_PARAM,    /* param NAME: type;  — a module-level runtime parameter (params[0]) */
    AST_INSTANCE, /* kernel NAME = GENERIC(T = f16, ...);  — a kernel of a generic kernel with
                   * some const parameters bound (of, bindings); sema expands it into an
                   * AST_KERNEL (generic set) before anything else reads the file */
    AST_TUNE,     /* tune KERNEL { NAME in [v, ...]; require expr; key NAME, ...; }  — a tuning
                   * space (tune, ntune): read by the tuner and checked by sema; it never changes
                   * what any kernel compiles to (tune_space.c) */
} AstDeclKind;

/* One item of a `tune` declaration: a dimension `NAME in [values];` (args: the values),
 * or a clause `require expr;` / `key NAME, ...;` (word: "require" / "key"; args: its
 * operands). The parser keeps the words as written; sema_tune_space checks them. */
typedef struct AstTuneItem {
    SrcLoc loc;
    const char *name;         /* the dimension's name, or the clause's word */
    bool is_dim;
    AstArg *args;
    int nargs;
} AstTuneItem;

typedef struct AstDecl {
    AstDeclKind kind;
    SrcLoc loc;
    const char *name;
    SrcLoc name_loc;
    AstParam *params;
    int nparams;
    AstSetting *settings;
    int nsettings;
    AstStmt *body;            /* AST_BLOCK */
    AstExpr *value;           /* AST_CONST */
    const char *of;           /* AST_INSTANCE: the generic kernel's name; AST_IMPORT: the alias of
                               * `import "m" as alias;` (NULL: none) */
    SrcLoc of_loc;
    AstArg *bindings;         /* AST_INSTANCE, and the AST_KERNEL expanded from it: NAME = const expr */
    int nbindings;
    const struct AstDecl *generic; /* an expanded instance: the generic kernel (params: its own
                                    * minus the bound ones, body: the generic's) */
    AstTuneItem *tune;        /* AST_TUNE: its items in order (name: the kernel tuned) */
    int ntune;
} AstDecl;

typedef struct AstFile {
    const char *path;
    AstDecl **decls;
    int ndecls;               /* merged by the driver's module loader (compiler/driver/modules.c):
                               * imported modules' decls first, then the file's own */
} AstFile;

/* ---- entry points ---- */
struct Diag;
/* Parse `src` (NUL-terminated) into an AstFile allocated in `arena`. Errors go
 * to `diag`; returns NULL only when nothing could be recovered. */
AstFile *ast_parse(Arena *arena, struct Diag *diag, const char *path, const char *src);
/* Print the AST as an indented S-expression-like tree (kiln compile --emit ast). */
void ast_print(StrBuf *out, const AstFile *file);

#endif
