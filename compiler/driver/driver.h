/* driver.h — internal entry points of compile.c for the kiln command (not public). */
#ifndef KILN_DRIVER_H
#define KILN_DRIVER_H

#include "kiln.h"
#include "ir/ir.h"
#include "support/diag.h"
#include "lang/ast.h"

/* Steps 1-3 of kiln_compile (parse, sema + lowering, target-independent passes).
 * For emit == KILN_EMIT_AST the AST text goes to `out` and *mod_out stays NULL.
 * The module lives in `arena`; diagnostics go to `d`. */
KilnStatus kiln_compile_ir(Arena *arena, Diag *d, const char *src, const KilnCompileOptions *opts,
                           IrModule **mod_out, StrBuf *out, StrBuf *dumps);

/* ---- modules (modules.c) ---- */

/* One program of the library, embedded at build time (CMake generates
 * kiln_lib_files from the .tile files of lang/lib and lang/lib/variants). */
typedef struct KilnLibFile {
    const char *path;     /* "lang/lib/attention_fwd.tile" */
    const char *text;     /* the file's bytes, NUL-terminated */
    size_t size;          /* bytes, without the NUL */
} KilnLibFile;
/* Ends with an entry whose path is NULL. */
extern const KilnLibFile kiln_lib_files[];
/* The embedded file of that path, or NULL. */
const KilnLibFile *kiln_lib_file(const char *path);

/* Parse `src` (the root file, named d->file) and every module it imports (see
 * modules.c for the search order) into one AstFile: imported decls first. The
 * import decls themselves are dropped. Errors go to `d`; NULL only when the root
 * could not be parsed at all. With `digest`, the path and text of every module
 * read from disk are appended to it (the on-disk cache keys on them). */
AstFile *kiln_modules_load(Arena *arena, Diag *d, const char *src, const KilnCompileOptions *o, StrBuf *digest);
/* The digest of kiln_modules_load for a source (malloc'd text; NULL when it
 * imports nothing from disk). Errors are ignored here: the compile reports them. */
char *kiln_import_digest(const char *path, const char *src, const KilnCompileOptions *o);

#endif
