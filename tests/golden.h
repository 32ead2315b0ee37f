/* golden.h — what the golden-file runners share (tests/passes/test_golden.c,
 * tests/codegen/test_tc_golden.c): listing a folder's cases, comparing an
 * output with its .expected file (and pointing at the first differing line),
 * and KILN_UPDATE_GOLDEN=1, which rewrites the .expected files instead.
 *
 * Include after testutil.h and compiler/support/support.h (StrBuf,
 * sup_read_file_text).
 */
#ifndef KILN_TESTS_GOLDEN_H
#define KILN_TESTS_GOLDEN_H

#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* KILN_UPDATE_GOLDEN=1: write the current output as the expected text. */
static inline bool golden_updating(void)
{
    const char *u = getenv("KILN_UPDATE_GOLDEN");
    return u && strcmp(u, "1") == 0;
}

static inline int golden_cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names (without `ext`, e.g. ".ir") of the files of `dir` ending in ext,
 * sorted; *out and each name are malloc'd. A missing folder has no cases. */
static inline int golden_list_cases(const char *dir, const char *ext, char ***out)
{
    DIR *d = opendir(dir);
    int n = 0, cap = 16;
    size_t elen = strlen(ext);
    char **names = malloc(sizeof(char *) * (size_t)cap);
    if (d) {
        for (struct dirent *e; (e = readdir(d));) {
            size_t len = strlen(e->d_name);
            if (len <= elen || strcmp(e->d_name + len - elen, ext) != 0) continue;
            if (n == cap) names = realloc(names, sizeof(char *) * (size_t)(cap *= 2));
            names[n++] = strndup(e->d_name, len - elen);
        }
        closedir(d);
    }
    qsort(names, (size_t)n, sizeof(char *), golden_cmp_str);
    *out = names;
    return n;
}

static inline void golden_free_cases(char **names, int n)
{
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
}

/* The first line where two texts differ, for the failure message. */
static inline void golden_first_diff(StrBuf *msg, const char *want, const char *got)
{
    int line = 1;
    const char *w = want, *g = got;
    while (*w && *w == *g) {
        if (*w == '\n') line++;
        w++, g++;
    }
    const char *wl = w, *gl = g;
    while (wl > want && wl[-1] != '\n') wl--;
    while (gl > got && gl[-1] != '\n') gl--;
    sb_printf(msg, "  first difference at line %d:\n    expected: %.*s\n    got:      %.*s\n", line,
              (int)strcspn(wl, "\n"), wl, (int)strcspn(gl, "\n"), gl);
}

/* `got` against the file exp_path; when updating, writes got there instead.
 * True when they are equal (or the file was written); otherwise appends
 * "<what> differs from <exp_path>" and the first differing line, or why the
 * file could not be read or written, to msg. */
static inline bool golden_compare(const char *exp_path, const char *got, const char *what, StrBuf *msg)
{
    if (golden_updating()) {
        FILE *fp = fopen(exp_path, "w");
        bool ok = fp && fputs(got, fp) >= 0;
        if (fp) ok = fclose(fp) == 0 && ok;
        if (!ok) sb_printf(msg, "%s: cannot write\n", exp_path);
        return ok;
    }
    char *want = sup_read_file_text(exp_path, NULL);
    bool ok = want && strcmp(want, got) == 0;
    if (!want) {
        sb_printf(msg, "%s: missing (KILN_UPDATE_GOLDEN=1 writes it)\n", exp_path);
    } else if (!ok) {
        sb_printf(msg, "%s differs from %s\n", what, exp_path);
        golden_first_diff(msg, want, got);
    }
    free(want);
    return ok;
}

#endif
