/* fuzz_frontend.c — libFuzzer target: arbitrary bytes through the front end.
 *
 * Each input becomes a NUL-terminated source (an embedded NUL simply ends it,
 * as it would for a file read by the driver) and goes through ast_parse,
 * ast_print and, when the parse is clean and sema is part of kiln_lang,
 * lang_compile with default options, then the IR verifier and the pass
 * pipeline on every kernel; every input gets a fresh Arena and Diag
 * and frees them. Crashes, sanitizer reports, leaks and timeouts are the
 * findings. An internal error (INTERNAL_ERROR) is reported as a finding too
 * when KILN_FUZZ_TRAP_ICE=1, since it is a compiler bug, not a user error.
 */
#include "fuzz_input.h"

#if !defined(KILN_HAVE_SEMA) && !defined(KILN_NO_SEMA) && defined(__has_include)
#if __has_include("lang/sema.h")
#define KILN_HAVE_SEMA 1
#endif
#endif
#ifdef KILN_HAVE_SEMA
#include "compiler/lang/lang.h"
#include "compiler/passes/passes.h"
#endif

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Longer inputs add time per run, not coverage. */
#define MAX_INPUT (64 * 1024)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > MAX_INPUT) return -1; /* rejected: not added to the corpus */
    FuzzInput in;
    if (!fuzz_input_open(&in, data, size)) return 0;
    AstFile *file = in.file;
    Diag *diag = &in.diag;
    if (file) {
        StrBuf sb;
        sb_init(&sb);
        ast_print(&sb, file);
        sb_free(&sb);
    }
#ifdef KILN_HAVE_SEMA
    if (file && diag->nerrors == 0) {
        LangOptions opts;
        memset(&opts, 0, sizeof opts);
        IrModule *m = lang_compile(&in.arena, diag, file, &opts);
        /* The rest of the front end: the verifier and every target-independent
         * pass (a verifier failure is a compiler bug: trap it). */
        for (int i = 0; m && diag->nerrors == 0 && i < m->nfuncs; i++) {
            StrBuf err, dump;
            sb_init(&err);
            sb_init(&dump);
            if (!ir_verify(m->funcs[i], &err) || !pass_pipeline(m->funcs[i], NULL, &dump, &err)) {
                fprintf(stderr, "invalid IR from a valid program:\n%s\n", err.data ? err.data : "");
                abort();
            }
            sb_free(&err);
            sb_free(&dump);
        }
    }
#endif
    if (diag_flush_ice(diag)) {
        const char *trap = getenv("KILN_FUZZ_TRAP_ICE");
        if (trap && strcmp(trap, "1") == 0) {
            fprintf(stderr, "%s", diag->out.data);
            abort();
        }
    }
    fuzz_input_close(&in);
    return 0;
}
