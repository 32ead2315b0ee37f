/* driver.h — internal entry points of compile.c for the kiln command (not public). */
#ifndef KILN_DRIVER_H
#define KILN_DRIVER_H

#include "kiln.h"
#include "ir/ir.h"
#include "support/diag.h"

/* Steps 1-3 of kiln_compile (parse, sema + lowering, target-independent passes).
 * For emit == KILN_EMIT_AST the AST text goes to `out` and *mod_out stays NULL.
 * The module lives in `arena`; diagnostics go to `d`. */
KilnStatus kiln_compile_ir(Arena *arena, Diag *d, const char *src, const KilnCompileOptions *opts,
                           IrModule **mod_out, StrBuf *out, StrBuf *dumps);

#endif
