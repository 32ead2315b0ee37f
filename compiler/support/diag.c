/* diag.c — formatting of diagnostics with the source line and a caret; see diag.h. */
#include "diag.h"

#include <string.h>

void diag_init(Diag *d, const char *file, const char *src)
{
    memset(d, 0, sizeof *d);
    d->file = file ? file : "<input>";
    d->src = src;
    sb_init(&d->out);
}

void diag_free(Diag *d) { sb_free(&d->out); }

void diag_add_source(Diag *d, const char *file, const char *src)
{
    if (!file || !src || d->nextra >= DIAG_MAX_SOURCES) return;
    d->extra_file[d->nextra] = file;
    d->extra_src[d->nextra] = src;
    d->nextra++;
}

/* Append the source line `line` and a caret under column `col`. Tabs in the
 * prefix are kept so the caret lines up in a terminal. A long line is cut to
 * 80 columns either side of the caret, the cuts marked "...". */
static void show_line(Diag *d, const char *src, int line, int col)
{
    enum { EXCERPT = 80 };
    if (!src || line <= 0) return;
    const char *p = src;
    for (int l = 1; l < line && *p; p++)
        if (*p == '\n') l++;
    const char *e = p;
    while (*e && *e != '\n') e++;
    if (p == e && !*p) return;
    size_t len = (size_t)(e - p), at = col > 1 ? (size_t)col - 1 : 0;
    if (at > len) at = len;
    size_t lo = at > EXCERPT ? at - EXCERPT : 0, hi = len - at > EXCERPT ? at + EXCERPT : len;
    if (lo) sb_puts(&d->out, "...");
    sb_putn(&d->out, p + lo, hi - lo);
    if (hi < len) sb_puts(&d->out, "...");
    sb_putc(&d->out, '\n');
    if (lo) sb_puts(&d->out, "   ");
    for (const char *q = p + lo; q < p + at; q++) sb_putc(&d->out, *q == '\t' ? '\t' : ' ');
    sb_puts(&d->out, "^\n");
}

static void emit(Diag *d, const char *kind, const char *prefix, SrcLoc loc, const char *fmt, va_list ap)
{
    const char *file = loc.file ? loc.file : d->file;
    if (loc.line > 0)
        sb_printf(&d->out, "%s:%d:%d: %s: %s", file, loc.line, loc.col, kind, prefix);
    else
        sb_printf(&d->out, "%s: %s: %s", file, kind, prefix);
    sb_vprintf(&d->out, fmt, ap);
    sb_putc(&d->out, '\n');
    /* Only show the line when it comes from a file whose text we hold. */
    if (!loc.file || !d->file || strcmp(loc.file, d->file) == 0) {
        show_line(d, d->src, loc.line, loc.col);
        return;
    }
    for (int i = 0; i < d->nextra; i++)
        if (!strcmp(loc.file, d->extra_file[i])) {
            show_line(d, d->extra_src[i], loc.line, loc.col);
            return;
        }
}

void diag_vreport(Diag *d, DiagKind kind, SrcLoc loc, const char *fmt, va_list ap)
{
    if (kind == DIAG_INTERNAL) d->ninternal++;
    if (kind == DIAG_UNSUPPORTED) d->nunsupported++;
    if (d->nerrors >= DIAG_MAX_ERRORS) {
        if (!d->truncated) {
            sb_printf(&d->out, "%s: error: too many errors, stopping\n", d->file);
            d->truncated = true;
        }
        d->nerrors++;
        return;
    }
    d->nerrors++;
    emit(d, "error", kind == DIAG_INTERNAL ? "internal error: " : "", loc, fmt, ap);
}

void diag_verror(Diag *d, SrcLoc loc, const char *fmt, va_list ap) { diag_vreport(d, DIAG_USER, loc, fmt, ap); }

void diag_report(Diag *d, DiagKind kind, SrcLoc loc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    diag_vreport(d, kind, loc, fmt, ap);
    va_end(ap);
}

void diag_error(Diag *d, SrcLoc loc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    diag_verror(d, loc, fmt, ap);
    va_end(ap);
}

void diag_warning(Diag *d, SrcLoc loc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    d->nwarnings++;
    emit(d, "warning", "", loc, fmt, ap);
    va_end(ap);
}

void diag_note(Diag *d, SrcLoc loc, const char *fmt, ...)
{
    if (d->truncated) return;
    va_list ap;
    va_start(ap, fmt);
    d->nnotes++;
    emit(d, "note", "", loc, fmt, ap);
    va_end(ap);
}

bool diag_flush_ice(Diag *d)
{
    const char *m = ice_message();
    if (!m) return false;
    sb_printf(&d->out, "%s: error: %s (please report this bug)\n", d->file, m);
    d->nerrors++;
    d->ninternal++;
    ice_clear();
    return true;
}
