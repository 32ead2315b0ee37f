/* driver.h — internal entry points of compile.c for the kiln command (not public). */
#ifndef KILN_DRIVER_H
#define KILN_DRIVER_H

#include "kiln.h"
#include "ir/ir.h"
#include "support/diag.h"
#include "compiler/lang/ast.h"

/* Steps 1-3 of kiln_compile (parse, sema + lowering, target-independent passes).
 * For emit == KILN_EMIT_AST the AST text goes to `out` and *mod_out stays NULL.
 * The module lives in `arena`; diagnostics go to `d`. */
KilnStatus kiln_compile_ir(Arena *arena, Diag *d, const char *src, const KilnCompileOptions *opts,
                           IrModule **mod_out, StrBuf *out, StrBuf *dumps);
/* How many times this thread ran the front end (kiln_compile_ir, which every
 * kiln_compile calls): tests count the compiles a call makes. */
int64_t kiln_front_end_runs(void);
/* The signature of kernel f as the runtime checks launches against it, with smem
 * bytes of dynamic shared memory; k->params is malloc'd (free it). */
void kiln_describe_kernel(const IrFunc *f, int smem, KilnKernelInfo *k);

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
