/* diag.h — user-facing diagnostics.
 *
 * Every user error is "FILE:LINE:COL: error: MESSAGE", then the source line and
 * a caret under the offending column. Messages are collected into a buffer (the
 * library never prints uninvited); the kiln driver prints them to stderr.
 * Several errors per file are allowed; after DIAG_MAX_ERRORS the rest are
 * dropped with one "too many errors" line.
 */
#ifndef KILN_DIAG_H
#define KILN_DIAG_H

#include "support.h"

#define DIAG_MAX_ERRORS 20

typedef struct Diag {
    const char *file;   /* name shown in messages */
    const char *src;    /* whole source text, NUL-terminated (may be NULL) */
    int nerrors, nwarnings, nnotes;
    bool truncated;
    StrBuf out;         /* collected text */
} Diag;

void diag_init(Diag *d, const char *file, const char *src);
void diag_free(Diag *d);
void diag_error(Diag *d, SrcLoc loc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void diag_verror(Diag *d, SrcLoc loc, const char *fmt, va_list ap);
void diag_warning(Diag *d, SrcLoc loc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* A note attached to the previous error (e.g. "declared here"). */
void diag_note(Diag *d, SrcLoc loc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Report a pending internal error (see INTERNAL_ERROR) if there is one; returns true if so. */
bool diag_flush_ice(Diag *d);

#endif
