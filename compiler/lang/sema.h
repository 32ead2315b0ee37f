/* sema.h — internal interface of semantic analysis and lowering (lang/sema*.c,
 * lang/lower*.c, lang/consteval.c, lang/builtins*.c).
 *
 * Sema and lowering are one walk over the AST: every expression evaluates to a
 * Val, which is either a compile-time value (a constant, a type, a helper, a
 * shape list) or a runtime SSA value already emitted into Tile IR. Doing both
 * at once is what makes compile-time `if` pruning, const specialisation and
 * helper inlining simple: only the code that survives is ever checked or
 * lowered, and every IR op is built with the SrcLoc of the node that made it.
 *
 * Errors produce a V_ERR value; every operation given a V_ERR operand returns
 * V_ERR without reporting, so one mistake gives one message.
 */
#ifndef KILN_SEMA_H
#define KILN_SEMA_H

#include "lang.h"

typedef enum ValKind {
    V_ERR,      /* an error was reported; silences further errors on this value */
    V_VOID,     /* store(...), a helper without return */
    V_CONST,    /* compile-time scalar: int, bool or float */
    V_RT,       /* runtime SSA value (scalar or tile) */
    V_TYPE,     /* a dtype name: f32, bf16, ... */
    V_FN,       /* a helper function (fn) */
    V_LIST,     /* [a, b, c] — shapes */
    V_STR,      /* "msg" — static_assert messages */
    V_NONE,     /* None inside an index or as a call argument */
    V_SLICE,    /* ':' inside an index */
} ValKind;

typedef struct Val {
    ValKind kind;
    bool untyped;              /* V_CONST from literals: adopts the other operand's type */
    IrType type;               /* V_CONST: scalar type; V_RT: v->type; V_TYPE: the type */
    int64_t i;                 /* V_CONST ints and bools (wrapped to the type's width) */
    double f;                  /* V_CONST floats */
    IrValue *v;                /* V_RT */
    const AstDecl *fn;         /* V_FN */
    int grad;                  /* V_FN: how many times grad() was applied to fn (grad.c) */
    bool rescaled;             /* V_FN: rescale(f, a, b) (rescale.c): x -> b * f(a * x, ...) */
    double rescale_in, rescale_out;
    struct Val *items;         /* V_LIST */
    int nitems;
    const char *s;             /* V_STR text; V_TYPE / V_FN: the name ("grad(f)" for a derivative) */
    SrcLoc loc;                /* the expression that produced it */
} Val;

typedef enum SymKind {
    SYM_LET,      /* immutable binding (also loop induction variables) */
    SYM_VAR,      /* mutable binding */
    SYM_ITER,     /* for-loop induction variable */
    SYM_CONST,    /* const parameter or file-level const (evaluated) */
    SYM_FILECONST,/* file-level const, evaluated on first use */
    SYM_PARAM,    /* runtime kernel or helper parameter; with decl (AST_PARAM): a module-level
                   * `param`, a parameter of each kernel that reads it (val: in kernel param_of) */
    SYM_FN,       /* helper */
} SymKind;

typedef struct Sym {
    const char *name;
    SymKind kind;
    Val val;
    SrcLoc loc;                /* declaration */
    SrcLoc last_assign;        /* latest assignment (for loop/if type errors) */
    const AstDecl *decl;       /* SYM_FN, SYM_FILECONST */
    int state;                 /* SYM_FILECONST: 0 unevaluated, 1 evaluating */
    const IrFunc *param_of;    /* module-level param: the kernel whose parameter val is */
    struct Sym *next;          /* the scope's list, newest first */
    struct Sym *hnext;         /* the scope's hash bucket */
} Sym;

/* A scope's symbols: a list (newest first, for suggestions) and, once it holds
 * more than a few, a hash table, so 100k `let`s in one block stay linear. */
typedef struct Scope {
    Sym *syms;
    int nsyms;
    Sym **buckets;             /* NULL while small; else nbuckets (a power of two) */
    int nbuckets;
    struct Scope *parent;
} Scope;

/* Limits of the language (docs/language.md, "Limits"). */
#define SEMA_MAX_CONST_DEPTH 256       /* file-level consts defined through one another */
#define SEMA_MAX_INLINE_DEPTH 64       /* helper calls nested in one another */
#define SEMA_MAX_INLINED_CALLS 100000  /* helper calls inlined into one kernel, in all */
#define SEMA_MAX_KERNEL_OPS 200000     /* IR ops of one kernel after inlining (the attention forward: ~1500) */
#define SEMA_MAX_STAGES 1024           /* num_stages */

/* One helper being inlined: for recursion detection. */
typedef struct InlineFrame {
    const AstDecl *fn;
    SrcLoc call_loc;
    struct InlineFrame *parent;
} InlineFrame;

typedef struct Sema {
    Arena *arena;
    Diag *diag;
    const AstFile *file;
    const LangOptions *opts;
    Scope *file_scope;
    Scope *scope;              /* innermost */
    IrFunc *f;                 /* kernel being lowered */
    IrBuilder b;               /* insertion point (b.loc unused: every emit names its loc) */
    IrFunc *scratch;           /* absorbs ops of const-context evaluation (discarded) */
    InlineFrame *inl;
    int inline_depth;
    int inlined_calls;         /* in the current kernel (SEMA_MAX_INLINED_CALLS) */
    bool inline_budget_reported;
    int64_t kernel_ops;        /* ops emitted for the current kernel (SEMA_MAX_KERNEL_OPS) */
    bool tile_limit_reported;  /* a tile past IR_MAX_TILE_NUMEL, reported once per kernel */
    bool f8_op_reported;       /* arithmetic on f8e4m3, reported once per kernel */
    int const_depth;           /* file-level consts being evaluated (SEMA_MAX_CONST_DEPTH) */
    bool *define_used;         /* per LangOptions.defines entry */
    PtrVec bad_helpers;        /* helpers whose body gave errors: not inlined again */
    int nown_params;           /* the kernel's own parameters; module params come after */
} Sema;

/* ---- sema.c: scopes, names ---- */
void   sema_push_scope(Sema *s);
void   sema_pop_scope(Sema *s);
Sym   *sema_define(Sema *s, const char *name, SymKind kind, Val v, SrcLoc loc);
Sym   *sema_lookup(Sema *s, const char *name);
/* Value of a symbol (evaluates lazy file consts). */
Val    sema_sym_value(Sema *s, Sym *sym, SrcLoc use);
/* "; did you mean 'x'?" or "" — closest visible name (scopes + extra list). */
const char *sema_suggest(Sema *s, const char *name, const char *const *extra, int nextra,
                         bool values);
/* Evaluate `e` as a compile-time expression (ops go to the scratch function). */
Val    sema_const_expr(Sema *s, const AstExpr *e);
bool   sema_is_builtin_name(const char *name);
const char *const *sema_builtin_names(int *n);

/* ---- sema_types.c: types, promotion, broadcasting, conversions ---- */
const char *sema_type_str(Sema *s, IrType t);     /* "f32", "*f16", "f32[128, 64]" */
const char *sema_shape_str(Sema *s, IrType t);    /* "[128, 64]", "[]" for scalars */
const char *sema_val_desc(Sema *s, const Val *v); /* a type, or "type", "function", ... */
IrType sema_val_type(const Val *v);               /* V_CONST / V_RT */
IrElem sema_promote(IrElem a, bool ua, IrElem b, bool ub, bool *untyped);
bool   sema_broadcast_shape(IrType a, IrType b, IrType *out);
/* Reports "cannot broadcast A with B" at loc when incompatible. */
bool   sema_broadcast_or_error(Sema *s, IrType a, IrType b, IrType *out, SrcLoc loc);
bool   sema_check_shape(Sema *s, int rank, const int64_t *dims, SrcLoc loc);
IrValue *sema_emit(Sema *s, SrcLoc loc, IrOpcode op, IrType t, int n, IrValue *const *args);
/* A V_CONST or V_RT value converted to exactly `target` (element cast, then
 * splat / expand_dims / broadcast). The shapes must be broadcast-compatible. */
IrValue *sema_convert(Sema *s, const Val *v, IrType target, SrcLoc loc);
IrValue *sema_cast(Sema *s, IrValue *x, IrElem e, SrcLoc loc);
IrValue *sema_reshape_to(Sema *s, IrValue *x, IrType target, SrcLoc loc);
/* A const materialised with its own type (scalar). */
IrValue *sema_materialize(Sema *s, const Val *v, SrcLoc loc);
/* True for V_CONST / V_RT; otherwise reports why `v` is not a value (silent on V_ERR). */
bool   sema_want_value(Sema *s, const Val *v);
Val    val_rt(IrValue *x, SrcLoc loc);
Val    val_err(void);

/* ---- consteval.c ---- */
Val    cv_int(int64_t i, IrElem e, SrcLoc loc);      /* typed int */
Val    cv_untyped_int(int64_t i, SrcLoc loc);         /* i32 if it fits, else i64 */
Val    cv_float(double f, IrElem e, bool untyped, SrcLoc loc);
Val    cv_bool(bool b, SrcLoc loc);
Val    cv_convert(const Val *v, IrElem e);            /* typed result */
bool   cv_is_int(const Val *v);                       /* V_CONST of an integer type (not i1) */
double cv_as_double(const Val *v);
bool   cv_truthy(const Val *v);
Val    cv_binary(Sema *s, AstOp op, const Val *a, const Val *b, SrcLoc loc);
Val    cv_unary(Sema *s, AstOp op, const Val *a, SrcLoc loc);
Val    cv_minmax(Sema *s, IrOpcode op, const Val *a, const Val *b, SrcLoc loc); /* IR_MIN, IR_MAX */
Val    cv_math(Sema *s, IrOpcode op, const Val *a, SrcLoc loc);   /* exp, sqrt, ... */
/* The IR op of a binary operator (IR_CMP for comparisons) and its predicate. */
IrOpcode sema_arith_opcode(AstOp op);
IrCmp    sema_cmp_kind(AstOp op);

/* ---- lower_expr.c ---- */
Val    sema_expr(Sema *s, const AstExpr *e);
bool   sema_is_named_const(const char *name);   /* inf, LOG2E, LN2, PI */
Val    sema_binary(Sema *s, AstOp op, Val a, Val b, SrcLoc loc);
Val    sema_select(Sema *s, Val c, Val a, Val b, SrcLoc loc);
Val    sema_elementwise2(Sema *s, IrOpcode opc, const char *what, Val a, Val b, SrcLoc loc);

/* ---- lower_stmt.c ---- */
void   sema_block(Sema *s, const AstStmt *block);   /* in a new scope */
void   sema_stmt(Sema *s, const AstStmt *st);
/* Inline helper `fn` with bound argument values (nargs == fn->nparams). */
Val    sema_inline_call(Sema *s, const AstDecl *fn, Val *args, SrcLoc loc);
/* Bind a call's arguments to `fn`'s parameters and inline it, or, with grad > 0,
 * its grad-th derivative with respect to the first argument. */
Val    sema_call_helper(Sema *s, const Val *f, const AstExpr *call);

/* ---- grad.c ---- */
/* Inline `fn` with bound arguments and return the order-th derivative of its
 * result with respect to args[0] (forward-mode differentiation of the inlined IR). */
Val    sema_inline_grad(Sema *s, const AstDecl *fn, Val *args, int order, SrcLoc loc);

/* ---- rescale.c ---- */
/* Inline the rescaled function value f (f->rescaled) with bound arguments:
 * f->rescale_out * fn(f->rescale_in * args[0], ...), the factors folded through fn's body. */
Val    sema_inline_rescaled(Sema *s, const Val *f, Val *args, SrcLoc loc);

/* ---- builtins.c, builtins_mem.c ---- */
Val    sema_builtin_call(Sema *s, const AstExpr *call);

#define BUILTIN_MAX_ARGS 9
typedef struct Builtin Builtin;
/* Arguments bound to a builtin's parameters (positional first, then keyword). */
typedef struct BArgs {
    Val v[BUILTIN_MAX_ARGS];
    bool have[BUILTIN_MAX_ARGS];
    bool keyword[BUILTIN_MAX_ARGS];
} BArgs;
typedef Val (*BuiltinFn)(Sema *s, const Builtin *bi, BArgs *a, const AstExpr *call);
struct Builtin {
    const char *name;
    const char *params[BUILTIN_MAX_ARGS];
    int nmin, nmax;
    BuiltinFn fn;          /* NULL: variadic, bi_static_print takes the call itself */
    int code;              /* opcode or IrReduce, per builtin */
    unsigned none_ok;      /* bit k: optional parameter k given None counts as omitted */
};
/* Argument checks shared by the builtins; each reports and returns false. */
bool   bi_const_int(Sema *s, const Builtin *bi, BArgs *a, int i, int64_t *out);
bool   bi_shape(Sema *s, const Builtin *bi, BArgs *a, int i, IrType *shape);
Val    bi_load(Sema *s, const Builtin *bi, BArgs *a, const AstExpr *call);
Val    bi_store(Sema *s, const Builtin *bi, BArgs *a, const AstExpr *call);
Val    bi_dot(Sema *s, const Builtin *bi, BArgs *a, const AstExpr *call);
Val    bi_reduce(Sema *s, const Builtin *bi, BArgs *a, const AstExpr *call);
Val    bi_grad(Sema *s, const Builtin *bi, BArgs *a, const AstExpr *call);   /* grad.c */
Val    bi_param_grads(Sema *s, const Builtin *bi, BArgs *a, const AstExpr *call);   /* grad.c */
Val    bi_rescale(Sema *s, const Builtin *bi, BArgs *a, const AstExpr *call); /* rescale.c */
/* builtins_debug.c: static_print (variadic, unbound arguments) and device_assert. */
Val    bi_static_print(Sema *s, const AstExpr *call);
Val    bi_device_assert(Sema *s, const Builtin *bi, BArgs *a, const AstExpr *call);
Val    bi_fence(Sema *s, const Builtin *bi, BArgs *a, const AstExpr *call);
/* The source text of a call argument starting at `loc`, up to the ',' or ')'
 * that ends it, when it is on one line; NULL otherwise. */
const char *bi_arg_text(Sema *s, SrcLoc loc);

#endif
