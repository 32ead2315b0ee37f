/* test_ptxas.c — the one ptxas locator and runner (compiler/support/ptxas.c),
 * with fake ptxas scripts so it runs on any machine:
 *   - KILN_PTXAS names the ptxas to run; the runner passes -v -arch=ARCH -o
 *     OUT IN, returns the cubin the program wrote and its log, and removes its
 *     temporary directory;
 *   - a ptxas that fails is PTXAS_REJECTED with its own complaint;
 *   - KILN_PTXAS naming a missing file is "ptxas not found" (no other ptxas
 *     is tried), and so is an empty search when neither CUDA nor PATH has one;
 *   - without KILN_PTXAS, PATH is searched (when /usr/local/cuda has none).
 */
#include "testutil.h"

#include "compiler/support/ptxas.h"

#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[] = "/tmp/kiln-test-ptxas-XXXXXX";

/* Writes an executable script DIR/name with `body` after the #! line. */
static const char *script(const char *name, const char *body)
{
    static char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "#!/bin/sh\n%s", body);
    fclose(f);
    chmod(path, 0755);
    return path;
}

/* Records its arguments in DIR/args, copies IN to OUT behind "CUBIN:" and
 * reports like ptxas -v. */
static const char *FAKE = "printf '%%s\\n' \"$@\" > %s/args\n"
                          "out=$4; in=$5\n"
                          "{ printf 'CUBIN:'; cat \"$in\"; } > \"$out\"\n"
                          "echo 'ptxas info    : Used 40 registers' >&2\n";

static void setup(void)
{
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void teardown(void)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
    strcpy(dir, "/tmp/kiln-test-ptxas-XXXXXX");
}

START_TEST(runs_kiln_ptxas_with_its_arguments)
{
    char body[512];
    snprintf(body, sizeof body, FAKE, dir);
    setenv("KILN_PTXAS", script("fake-ptxas", body), 1);
    StrBuf cubin, log, err;
    sb_init(&cubin), sb_init(&log), sb_init(&err);
    ck_assert_int_eq(ptxas_run(".version 8.0\n", 13, "sm_90a", &cubin, &log, &err), PTXAS_OK);
    ck_assert_str_eq(cubin.data, "CUBIN:.version 8.0\n");
    ck_assert_ptr_nonnull(strstr(log.data, "Used 40 registers"));
    ck_assert_uint_eq(err.len, 0);

    char args_path[300];
    snprintf(args_path, sizeof args_path, "%s/args", dir);
    char *args = sup_read_file_text(args_path, NULL);
    ck_assert_ptr_nonnull(args);
    char out[128] = "", in[128] = "";
    ck_assert_int_eq(sscanf(args, "-v\n-arch=sm_90a\n-o\n%127s\n%127s\n", out, in), 2);
    ck_assert_ptr_nonnull(strstr(out, "/kernel.cubin"));
    ck_assert_ptr_nonnull(strstr(in, "/kernel.ptx"));
    /* the temporary directory is gone */
    *strrchr(in, '/') = 0;
    ck_assert_int_ne(access(in, F_OK), 0);
    free(args);
    sb_free(&cubin), sb_free(&log), sb_free(&err);
}
END_TEST

START_TEST(rejection_carries_ptxas_message)
{
    setenv("KILN_PTXAS", script("bad-ptxas", "echo 'ptxas fatal   : Unknown symbol' >&2\nexit 255\n"), 1);
    StrBuf cubin, err;
    sb_init(&cubin), sb_init(&err);
    ck_assert_int_eq(ptxas_run("x", 1, "sm_80", &cubin, NULL, &err), PTXAS_REJECTED);
    ck_assert_ptr_nonnull(strstr(err.data, "-arch=sm_80) rejected the kernel:\n"));
    ck_assert_ptr_nonnull(strstr(err.data, "ptxas fatal   : Unknown symbol"));
    ck_assert_uint_eq(cubin.len, 0);
    sb_free(&cubin), sb_free(&err);
}
END_TEST

START_TEST(missing_kiln_ptxas_is_not_found)
{
    char missing[300];
    snprintf(missing, sizeof missing, "%s/no-such-ptxas", dir);
    setenv("KILN_PTXAS", missing, 1);
    StrBuf why, cubin;
    sb_init(&why), sb_init(&cubin);
    ck_assert_ptr_null(ptxas_find(&why));
    ck_assert_ptr_nonnull(strstr(why.data, "ptxas not found: KILN_PTXAS="));
    ck_assert_ptr_nonnull(strstr(why.data, "is not an executable file"));
    why.len = 0;
    ck_assert_int_eq(ptxas_run("x", 1, "sm_80", &cubin, NULL, &why), PTXAS_NOT_FOUND);
    ck_assert_ptr_nonnull(strstr(why.data, "ptxas not found"));
    sb_free(&why), sb_free(&cubin);
}
END_TEST

START_TEST(searches_path)
{
    if (access("/usr/local/cuda/bin/ptxas", X_OK) == 0) return; /* that one comes first */
    unsetenv("KILN_PTXAS");
    const char *fake = script("ptxas", "exit 0\n");
    char path[400];
    snprintf(path, sizeof path, "/nonexistent-dir::%s", dir);
    setenv("PATH", path, 1);
    char *found = ptxas_find(NULL);
    ck_assert_ptr_nonnull(found);
    ck_assert_str_eq(found, fake);
    free(found);
    setenv("PATH", "/nonexistent-dir", 1);
    StrBuf why;
    sb_init(&why);
    ck_assert_ptr_null(ptxas_find(&why));
    ck_assert_str_eq(why.data, "ptxas not found: install the CUDA toolkit (/usr/local/cuda/bin/ptxas), put "
                               "ptxas on PATH or set KILN_PTXAS");
    sb_free(&why);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("support_ptxas");
    TCase *t = tcase_create("ptxas");
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_add_test(t, runs_kiln_ptxas_with_its_arguments);
    tcase_add_test(t, rejection_carries_ptxas_message);
    tcase_add_test(t, missing_kiln_ptxas_is_not_found);
    tcase_add_test(t, searches_path);
    suite_add_tcase(s, t);
    return s;
}

TU_MAIN(suite)
