/* lang.h — the language layer's entry: source text -> specialised Tile IR.
 *
 * lang_compile parses, runs sema (names, types, shapes, broadcasting, const
 * evaluation, specialisation of const params, inlining of helpers) and lowers
 * each selected kernel to Tile IR. All allocation is in `arena`.
 */
#ifndef KILN_LANG_H
#define KILN_LANG_H

#include "ast.h"
#include "../support/diag.h"
#include "../ir/ir.h"

typedef struct LangDefine {
    const char *name;     /* a const parameter of the kernel (or file-level const) */
    const char *value;    /* its value as written: "128", "true", "0.5", "bf16", or a fn name */
} LangDefine;

/* A runtime integer parameter's value is a multiple of `divisibility`, or a
 * pointer parameter's address is a multiple of `divisibility` bytes (a power
 * of two). Sets IrValue.divisibility of the parameter in every kernel.
 * equals_one: the integer parameter's value is exactly 1 (divisibility 0 or
 * 1): the parameter stays in the signature, but its uses read an IR constant
 * 1 of its type, so folding and axis analysis see a unit stride. */
typedef struct LangHint {
    const char *name;
    int divisibility;
    bool equals_one;
} LangHint;

typedef struct LangOptions {
    const char *kernel;           /* only this kernel; NULL = every kernel in the file */
    const LangDefine *defines;
    int ndefines;
    int num_warps, num_stages;    /* > 0 overrides the kernel's `with (...)` settings */
    const LangHint *hints;        /* by runtime parameter name (unknown names are errors) */
    int nhints;
} LangOptions;

/* Returns NULL when there were errors (they are in `diag`). */
IrModule *lang_compile(Arena *arena, Diag *diag, const AstFile *file, const LangOptions *opts);

/* ---- kernel parameters that lowering generates ----
 * Lowering adds parameters the source never declares, named after a module-level param X:
 * param_grads (grad.c) gives each kernel whose call differentiates a load of a differentiable
 * X the gradient rows X__grad (*f32) and a row's length X__numel (i32). The launch binds them
 * by name (jit/attention_bwd_params.c) and the hint check (sema.c) accepts a hint naming one
 * for a kernel that has it. This is the one list of them: a new generated parameter is added
 * here, so neither the check nor the launch can miss it. */
typedef enum LangGenParam {
    LANG_GEN_GRAD,     /* X__grad: X's gradient rows (or the gradient itself, atomic) */
    LANG_GEN_NUMEL,    /* X__numel: X's element count, a row's length */
    LANG_GEN_COUNT
} LangGenParam;

extern const char *const lang_gen_param_suffix[LANG_GEN_COUNT];   /* "__grad", "__numel" */

/* Is `name` a generated parameter's name X<suffix> (X not empty)? Its kind in *which and the
 * length of X in *base_len. E.g. "bias__numel": LANG_GEN_NUMEL, 4. */
bool lang_gen_param_split(const char *name, LangGenParam *which, size_t *base_len);

/* ---- tune spaces (tune_space.c; docs/language.md, "Tune spaces") ---- */
typedef enum TuneDimKind {
    TUNE_CONST,    /* a const parameter: -D NAME=VALUE */
    TUNE_WARPS,    /* num_warps */
    TUNE_STAGES,   /* num_stages */
    TUNE_SCHED,    /* a schedule option (schedule.h's row `sched`) */
} TuneDimKind;

typedef struct TuneValue {
    int64_t num;               /* the value (a dtype: its index) */
    const char *text;          /* as a -D value: "128", "true", "f16" */
} TuneValue;

typedef struct TuneDim {
    const char *name;
    SrcLoc loc;
    TuneDimKind kind;
    int sched;                 /* TUNE_SCHED: the option's index in sched_options */
    bool is_dtype;
    TuneValue *vals;
    int nvals;
} TuneDim;

typedef struct TuneSpace {
    const AstDecl *decl;       /* the `tune` declaration */
    const char *kernel;
    TuneDim *dims;
    int ndims;
    const AstExpr **require;
    int nrequire;
    const char **key;          /* the key's parameter names, in order */
    bool *key_runtime;         /* a runtime integer (bucketed) rather than a const */
    int nkey;
    int *configs;              /* nconfigs x ndims value indices that every constraint keeps */
    int nconfigs, ntotal;      /* kept; before the constraints */
} TuneSpace;

/* The space of kernel `kernel` (its own tune decl, else its generic's), checked and
 * enumerated with `defs` (the fixed consts: the key's values) over the kernel's
 * defaults. NULL after a located error in `diag`. */
TuneSpace *sema_tune_space(Arena *arena, Diag *diag, const AstFile *file, const char *kernel,
                           const LangDefine *defs, int ndefs);
/* Check every tune decl of `file` over the kernels' defaults (lang_compile calls it). */
void sema_tune_check(Arena *arena, Diag *diag, const AstFile *file);

#endif
