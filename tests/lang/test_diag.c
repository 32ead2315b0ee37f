/* test_diag.c — the diagnostics corpus: every tests/diag/NAME.tile is a bad
 * (or, rarely, good) program and tests/diag/NAME.expected holds the exact
 * diagnostic text it must produce, byte for byte (empty = no diagnostics).
 *
 * Each file runs with the path "tests/diag/NAME.tile" (relative to the source
 * root, so the expected text does not depend on where the tree lives)
 * through ast_parse and, when that reports no error and sema is part of
 * kiln_lang, through lang_compile with default options (every kernel, no
 * defines; -DKILN_NO_SEMA builds a parse-only runner). A first line of the form
 *     // defines: NAME=VALUE NAME=VALUE
 * supplies -D values for const parameters without defaults.
 *
 * KILN_DIAG_UPDATE=1 rewrites the .expected files from the current output;
 * review every such change by hand before committing it.
 */
#include "testutil.h"

#include "compiler/lang/ast.h"
#include "compiler/support/diag.h"

#include "compiler/lang/lang.h"

#include <dirent.h>
#include <string.h>

#define MAX_CASES 512
#define MIN_PARSE_CASES 15

static char *case_names[MAX_CASES];
static int ncases;

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Collect NAME for every tests/diag/NAME.tile, sorted. */
static void find_cases(void)
{
    DIR *d = opendir(tu_src_path("tests/diag"));
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d)) && ncases < MAX_CASES) {
        size_t n = strlen(e->d_name);
        if (n > 5 && strcmp(e->d_name + n - 5, ".tile") == 0)
            case_names[ncases++] = strndup(e->d_name, n - 5);
    }
    closedir(d);
    qsort(case_names, (size_t)ncases, sizeof case_names[0], cmp_str);
}

/* Parse "// defines: A=1 B=bf16" from the first line into `defs`. */
static int parse_defines(Arena *a, const char *src, LangDefine *defs, int max)
{
    const char *tag = "// defines:";
    if (strncmp(src, tag, strlen(tag)) != 0) return 0;
    const char *p = src + strlen(tag);
    int n = 0;
    while (*p && *p != '\n' && n < max) {
        while (*p == ' ' || *p == '\t') p++;
        const char *start = p;
        while (*p && *p != ' ' && *p != '\t' && *p != '\n') p++;
        const char *eq = memchr(start, '=', (size_t)(p - start));
        if (!eq) continue;
        defs[n].name = arena_strndup(a, start, (size_t)(eq - start));
        defs[n].value = arena_strndup(a, eq + 1, (size_t)(p - eq - 1));
        n++;
    }
    return n;
}

/* Run one source through the front end; returns the malloc'd diagnostics. */
static char *run_frontend(const char *path, const char *src)
{
    Arena arena;
    arena_init(&arena);
    Diag diag;
    diag_init(&diag, path, src);
    AstFile *file = ast_parse(&arena, &diag, path, src);
    if (file && diag.nerrors == 0) {
        LangDefine defs[32];
        LangOptions opts;
        memset(&opts, 0, sizeof opts);
        opts.defines = defs;
        opts.ndefines = parse_defines(&arena, src, defs, 32);
        lang_compile(&arena, &diag, file, &opts);
    }
    diag_flush_ice(&diag);
    char *out = strdup(diag.out.data ? diag.out.data : "");
    diag_free(&diag);
    arena_free(&arena);
    return out;
}

START_TEST(test_corpus_present)
{
    int nparse = 0;
    for (int i = 0; i < ncases; i++)
        if (strncmp(case_names[i], "parse_", 6) == 0) nparse++;
    ck_assert_msg(nparse >= MIN_PARSE_CASES, "found %d parse_*.tile cases in %s, want >= %d",
                  nparse, tu_src_path("tests/diag"), MIN_PARSE_CASES);
}
END_TEST

START_TEST(test_case)
{
    const char *name = case_names[_i];
    char rel[512], exp_rel[512];
    snprintf(rel, sizeof rel, "tests/diag/%s.tile", name);
    snprintf(exp_rel, sizeof exp_rel, "tests/diag/%s.expected", name);
    size_t len;
    char *src = sup_read_file_text(tu_src_path(rel), &len);
    ck_assert_msg(src != NULL, "cannot read %s", rel);
    char *got = run_frontend(rel, src);

    const char *update = getenv("KILN_DIAG_UPDATE");
    if (update && strcmp(update, "1") == 0) {
        FILE *f = fopen(tu_src_path(exp_rel), "wb");
        ck_assert_msg(f != NULL, "cannot write %s", exp_rel);
        fputs(got, f);
        fclose(f);
    }
    char *want = sup_read_file_text(tu_src_path(exp_rel), &len);
    ck_assert_msg(want != NULL, "%s has no %s", rel, exp_rel);
    ck_assert_msg(strcmp(got, want) == 0, "%s: diagnostics differ\n--- expected\n%s--- got\n%s---",
                  rel, want, got);
    free(want);
    free(got);
    free(src);
}
END_TEST

static Suite *diag_suite(void)
{
    find_cases();
    Suite *s = suite_create("diag");
    TCase *tc = tcase_create("corpus");
    tcase_add_test(tc, test_corpus_present);
    tcase_add_loop_test(tc, test_case, 0, ncases);
    suite_add_tcase(s, tc);
    return s;
}

TU_MAIN(diag_suite)
