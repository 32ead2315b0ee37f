/* test_diag.c — the diagnostics engine on its own (compiler/support/diag.c).
 *
 * Links kiln_support only: diagnostics belong to the bottom layer, so the IR
 * parser and the backend can report through them without the front end.
 * Checks the "file:line:col: error: message" shape, the source line with its
 * caret (tabs kept), notes and warnings, errors from another file (no source
 * line), the DIAG_MAX_ERRORS cut-off, the pending internal error and the
 * kinds of errors (user, unsupported, internal) the driver maps to a status.
 */
#include "testutil.h"

#include "compiler/support/diag.h"

#include <dirent.h>
#include <string.h>

static const char *SRC = "kernel k() {\n\tx = 1;\n}\n";

START_TEST(error_with_caret)
{
    Diag d;
    diag_init(&d, "a.tile", SRC);
    diag_error(&d, (SrcLoc){"a.tile", 2, 2}, "unknown name '%s'", "x");
    ck_assert_str_eq(d.out.data, "a.tile:2:2: error: unknown name 'x'\n\tx = 1;\n\t^\n");
    ck_assert_int_eq(d.nerrors, 1);
    diag_free(&d);
}
END_TEST

START_TEST(note_warning_and_no_location)
{
    Diag d;
    diag_init(&d, "a.tile", SRC);
    diag_warning(&d, (SrcLoc){NULL, 1, 8}, "w");
    diag_note(&d, (SrcLoc){0}, "n");
    ck_assert_str_eq(d.out.data, "a.tile:1:8: warning: w\nkernel k() {\n       ^\na.tile: note: n\n");
    ck_assert_int_eq(d.nwarnings, 1);
    ck_assert_int_eq(d.nnotes, 1);
    ck_assert_int_eq(d.nerrors, 0);
    diag_free(&d);
}
END_TEST

START_TEST(other_file_has_no_source_line)
{
    Diag d;
    diag_init(&d, "a.tile", SRC);
    diag_error(&d, (SrcLoc){"lib.tile", 1, 1}, "e");
    ck_assert_str_eq(d.out.data, "lib.tile:1:1: error: e\n");
    diag_free(&d);
}
END_TEST

START_TEST(too_many_errors)
{
    Diag d;
    diag_init(&d, NULL, NULL);
    for (int i = 0; i < DIAG_MAX_ERRORS + 5; i++) diag_error(&d, (SrcLoc){0}, "e%d", i);
    ck_assert(d.truncated);
    ck_assert_int_eq(d.nerrors, DIAG_MAX_ERRORS + 5);
    ck_assert_ptr_nonnull(strstr(d.out.data, "<input>: error: too many errors, stopping\n"));
    ck_assert_ptr_null(strstr(d.out.data, "e20\n"));
    diag_free(&d);
}
END_TEST

START_TEST(internal_error_flushed_once)
{
    Diag d;
    diag_init(&d, "a.tile", SRC);
    ck_assert(!diag_flush_ice(&d));
    INTERNAL_ERROR("bad %d", 7);
    ck_assert(diag_flush_ice(&d));
    ck_assert_ptr_nonnull(strstr(d.out.data, "a.tile: error: "));
    ck_assert_ptr_nonnull(strstr(d.out.data, "bad 7"));
    ck_assert_ptr_nonnull(strstr(d.out.data, "(please report this bug)"));
    ck_assert(!diag_flush_ice(&d));
    ck_assert_int_eq(d.nerrors, 1);
    ck_assert_int_eq(d.ninternal, 1);
    diag_free(&d);
}
END_TEST

START_TEST(kinds_are_counted)
{
    Diag d;
    diag_init(&d, "a.tile", SRC);
    diag_report(&d, DIAG_INTERNAL, (SrcLoc){"a.tile", 1, 8}, "no layout for %s", "x");
    diag_report(&d, DIAG_UNSUPPORTED, (SrcLoc){0}, "ptxas not found");
    diag_report(&d, DIAG_USER, (SrcLoc){0}, "too big");
    ck_assert_str_eq(d.out.data, "a.tile:1:8: error: internal error: no layout for x\nkernel k() {\n       ^\n"
                                 "a.tile: error: ptxas not found\na.tile: error: too big\n");
    ck_assert_int_eq(d.nerrors, 3);
    ck_assert_int_eq(d.ninternal, 1);
    ck_assert_int_eq(d.nunsupported, 1);
    diag_free(&d);
}
END_TEST

/* The layers below the front end include nothing of lang/ (the IR parser
 * reports through diag.h, which must therefore live here). */
START_TEST(no_lang_include_below_the_front_end)
{
    static const char *dirs[] = {"compiler/support", "compiler/ir"};
    int files = 0;
    for (int i = 0; i < 2; i++) {
        DIR *dir = opendir(tu_src_path(dirs[i]));
        ck_assert_msg(dir != NULL, "cannot open %s", dirs[i]);
        struct dirent *e;
        while ((e = readdir(dir))) {
            size_t n = strlen(e->d_name);
            if (n < 3 || (strcmp(e->d_name + n - 2, ".c") && strcmp(e->d_name + n - 2, ".h"))) continue;
            char rel[512];
            snprintf(rel, sizeof rel, "%s/%s", dirs[i], e->d_name);
            char *text = sup_read_file_text(tu_src_path(rel), NULL);
            ck_assert_msg(text != NULL, "cannot read %s", rel);
            for (const char *p = strstr(text, "#include"); p; p = strstr(p + 1, "#include")) {
                const char *eol = strchr(p, '\n');
                size_t len = eol ? (size_t)(eol - p) : strlen(p);
                ck_assert_msg(!memmem(p, len, "lang/", 5), "%s includes a front-end header: %.*s", rel, (int)len, p);
            }
            free(text);
            files++;
        }
        closedir(dir);
    }
    ck_assert_int_gt(files, 5);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("support_diag");
    TCase *t = tcase_create("diag");
    tcase_add_test(t, error_with_caret);
    tcase_add_test(t, note_warning_and_no_location);
    tcase_add_test(t, other_file_has_no_source_line);
    tcase_add_test(t, too_many_errors);
    tcase_add_test(t, internal_error_flushed_once);
    tcase_add_test(t, kinds_are_counted);
    tcase_add_test(t, no_lang_include_below_the_front_end);
    suite_add_tcase(s, t);
    return s;
}

TU_MAIN(suite)
