/* lang.h — the language layer's entry: source text -> specialised Tile IR.
 *
 * lang_compile parses, runs sema (names, types, shapes, broadcasting, const
 * evaluation, specialisation of const params, inlining of helpers) and lowers
 * each selected kernel to Tile IR. All allocation is in `arena`.
 */
#ifndef KILN_LANG_H
#define KILN_LANG_H

#include "ast.h"
#include "diag.h"
#include "../compiler/ir/ir.h"

typedef struct LangDefine {
    const char *name;     /* a const parameter of the kernel (or file-level const) */
    const char *value;    /* its value as written: "128", "true", "0.5", "bf16", or a fn name */
} LangDefine;

typedef struct LangOptions {
    const char *kernel;           /* only this kernel; NULL = every kernel in the file */
    const LangDefine *defines;
    int ndefines;
    int num_warps, num_stages;    /* > 0 overrides the kernel's `with (...)` settings */
} LangOptions;

/* Returns NULL when there were errors (they are in `diag`). */
IrModule *lang_compile(Arena *arena, Diag *diag, const AstFile *file, const LangOptions *opts);

#endif
