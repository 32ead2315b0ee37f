/* testutil.h — helpers shared by the Check tests. */
#ifndef KILN_TESTUTIL_H
#define KILN_TESTUTIL_H

#include <check.h>
#include <stdio.h>
#include <stdlib.h>

/* Path of a file in the source tree (KILN_SOURCE_DIR is set by ctest and compiled in). */
static inline const char *tu_src_path(const char *rel)
{
    static char buf[8][1024];
    static int k;
    const char *root = getenv("KILN_SOURCE_DIR");
    if (!root) root = KILN_SOURCE_DIR;
    char *b = buf[k++ & 7];
    snprintf(b, sizeof buf[0], "%s/%s", root, rel);
    return b;
}

/* The exit status that tells ctest a test was skipped, not passed: every test
 * has SKIP_RETURN_CODE 77 (tests/CMakeLists.txt). A test exits with it only
 * when nothing it checks could run here (no GPU, no ptxas). */
#define TU_SKIP 77

static inline int tu_skip(const char *why)
{
    printf("SKIP: %s\n", why);
    return TU_SKIP;
}

/* Runs one suite; main's exit status (non-zero on failure). */
static inline int tu_run_suite(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int nf = srunner_ntests_failed(sr);
    srunner_free(sr);
    return nf == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

/* A main() that runs one suite and returns non-zero on failure. */
#define TU_MAIN(suite_fn) \
    int main(void) { return tu_run_suite(suite_fn()); }

#endif
