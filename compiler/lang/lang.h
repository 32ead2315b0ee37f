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

#endif
