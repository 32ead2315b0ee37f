/* diag.h — user-facing diagnostics.
 *
 * Every user error is "FILE:LINE:COL: error: MESSAGE", then the source line and
 * a caret under the offending column. Messages are collected into a buffer (the
 * library never prints uninvited); the kiln driver prints them to stderr.
 * Several errors per file are allowed; after DIAG_MAX_ERRORS the rest are
 * dropped with one "too many errors" line.
 *
 * Every layer reports through the same Diag: the front end, the IR parser and
 * the backend (codegen limits, ptxas). An error has a kind so that the driver
 * can tell a wrong program from a compiler bug or a missing tool without
 * reading the text back.
 */
#ifndef KILN_DIAG_H
#define KILN_DIAG_H

#include "support.h"

#define DIAG_MAX_ERRORS 20

/* What an error means for the caller (kiln_compile maps it to a KilnStatus). */
typedef enum DiagKind {
    DIAG_USER,          /* the program is wrong or exceeds a limit of the target */
    DIAG_UNSUPPORTED,   /* a valid request this machine cannot do (e.g. no ptxas) */
    DIAG_INTERNAL,      /* a compiler bug: the message starts "internal error: " */
} DiagKind;

#define DIAG_MAX_SOURCES 32

typedef struct Diag {
    const char *file;   /* name shown in messages */
    const char *src;    /* whole source text, NUL-terminated (may be NULL) */
    /* Other files a compilation reads (imported modules): an error located in one
     * of them shows its line too. The texts are the caller's (not copied). */
    const char *extra_file[DIAG_MAX_SOURCES];
    const char *extra_src[DIAG_MAX_SOURCES];
    int nextra;
    int nerrors, nwarnings, nnotes;
    int ninternal, nunsupported; /* errors of those kinds (also counted in nerrors) */
    bool truncated;
    StrBuf out;         /* collected text */
} Diag;

void diag_init(Diag *d, const char *file, const char *src);
void diag_free(Diag *d);
/* Register the text of another file (an imported module) so that errors located
 * in it show the source line and caret; beyond DIAG_MAX_SOURCES they show the
 * location only. */
void diag_add_source(Diag *d, const char *file, const char *src);
void diag_error(Diag *d, SrcLoc loc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void diag_verror(Diag *d, SrcLoc loc, const char *fmt, va_list ap);
/* An error of a given kind; diag_error is diag_report(d, DIAG_USER, ...). */
void diag_report(Diag *d, DiagKind kind, SrcLoc loc, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
void diag_vreport(Diag *d, DiagKind kind, SrcLoc loc, const char *fmt, va_list ap);
void diag_warning(Diag *d, SrcLoc loc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* A note attached to the previous error (e.g. "declared here"). */
void diag_note(Diag *d, SrcLoc loc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Report a pending internal error (see INTERNAL_ERROR) if there is one, as a
 * DIAG_INTERNAL error; returns true if so. */
bool diag_flush_ice(Diag *d);

#endif
