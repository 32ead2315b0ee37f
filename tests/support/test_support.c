/* test_support.c — the support layer's failure paths (issue 12): reading a
 * source never hangs, never drops data and refuses what it cannot read whole;
 * arenas and string buffers report running out of memory instead of wrapping
 * sizes or silently losing text. */
#include "testutil.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "compiler/support/support.h"

static char g_dir[64];

static void make_dir(void)
{
    snprintf(g_dir, sizeof g_dir, "/tmp/kiln-support-test-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(g_dir));
}

static void remove_dir(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    ck_assert_int_eq(system(cmd), 0);
}

static const char *in_dir(const char *name)
{
    static char p[128];
    snprintf(p, sizeof p, "%s/%s", g_dir, name);
    return p;
}

/* A file of `size` bytes (sparse: costs no disk). */
static void sparse_file(const char *path, off_t size)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(ftruncate(fd, size), 0);
    close(fd);
}

START_TEST(reads_a_regular_file_whole)
{
    FILE *f = fopen(in_dir("a.tile"), "wb");
    ck_assert_ptr_nonnull(f);
    fputs("kernel k() {}\n", f);
    fputc(0, f); /* bytes after a NUL are kept: the length says where the text ends */
    fputs("tail", f);
    fclose(f);
    size_t len = 0;
    char *s = sup_read_file_text(in_dir("a.tile"), &len);
    ck_assert_ptr_nonnull(s);
    ck_assert_uint_eq(len, 19);
    ck_assert_str_eq(s + 15, "tail");
    free(s);
    /* exactly at the limit is accepted */
    sparse_file(in_dir("max.tile"), (off_t)KILN_MAX_SOURCE_BYTES);
    s = sup_read_file_text(in_dir("max.tile"), &len);
    ck_assert_ptr_nonnull(s);
    ck_assert_uint_eq(len, KILN_MAX_SOURCE_BYTES);
    ck_assert_int_eq(s[len], 0);
    free(s);
}
END_TEST

START_TEST(refuses_what_it_cannot_read_whole)
{
    errno = 0;
    ck_assert_ptr_null(sup_read_file_text(in_dir("missing.tile"), NULL));
    ck_assert_int_eq(errno, ENOENT);
    ck_assert_ptr_null(sup_read_file_text(g_dir, NULL));
    ck_assert_int_eq(errno, EISDIR);
    ck_assert_ptr_null(sup_read_file_text("/dev/zero", NULL)); /* would never end */
    ck_assert_int_eq(errno, ENODEV);
    sparse_file(in_dir("big.tile"), (off_t)KILN_MAX_SOURCE_BYTES + 1);
    ck_assert_ptr_null(sup_read_file_text(in_dir("big.tile"), NULL));
    ck_assert_int_eq(errno, EFBIG);
}
END_TEST

/* A pipe that delivers more than the limit is refused once the limit is
 * passed, not read to its end (the writer here would go on for ever). */
START_TEST(a_pipe_is_read_up_to_the_limit)
{
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(fds[0]);
        static char buf[65536];
        memset(buf, ' ', sizeof buf);
        for (;;)
            if (write(fds[1], buf, sizeof buf) < 0) _exit(0);
    }
    close(fds[1]);
    char path[64];
    snprintf(path, sizeof path, "/dev/fd/%d", fds[0]);
    errno = 0;
    ck_assert_ptr_null(sup_read_file_text(path, NULL));
    ck_assert_int_eq(errno, EFBIG);
    close(fds[0]);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}
END_TEST

/* A FIFO nobody writes to: opening it does not wait for a writer. */
START_TEST(a_fifo_without_writer_does_not_hang)
{
    ck_assert_int_eq(mkfifo(in_dir("fifo"), 0600), 0);
    size_t len = 1;
    char *s = sup_read_file_text(in_dir("fifo"), &len);
    ck_assert_ptr_nonnull(s);
    ck_assert_uint_eq(len, 0);
    free(s);
}
END_TEST

/* Under a memory limit (ulimit -v) reading fails with ENOMEM; before, a failed
 * realloc dropped the data and reading went on. */
START_TEST(out_of_memory_is_an_error)
{
#ifdef __SANITIZE_ADDRESS__
    /* ASan's allocator reserves its shadow up front and dies instead of
     * returning NULL under RLIMIT_AS: this case is for the plain build (it runs
     * there in every CI run). */
    return;
#endif
    sparse_file(in_dir("mid.tile"), (off_t)(KILN_MAX_SOURCE_BYTES - 4096));
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        /* room for what is mapped now plus a little: not for 16 MiB more */
        long vm_kb = 0;
        char line[256];
        FILE *st = fopen("/proc/self/status", "r");
        while (st && fgets(line, sizeof line, st))
            if (sscanf(line, "VmSize: %ld kB", &vm_kb) == 1) break;
        if (st) fclose(st);
        if (vm_kb <= 0) _exit(3);
        struct rlimit rl = {(rlim_t)(vm_kb + 4096) * 1024, (rlim_t)(vm_kb + 4096) * 1024};
        if (setrlimit(RLIMIT_AS, &rl) != 0) _exit(3);
        errno = 0;
        char *s = sup_read_file_text(in_dir("mid.tile"), NULL);
        _exit(s ? 1 : errno == ENOMEM ? 0 : 2);
    }
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status), "the reader died on a signal");
    ck_assert_int_eq(WEXITSTATUS(status), 0);
}
END_TEST

START_TEST(arena_sizes_do_not_wrap)
{
    ice_clear();
    Arena a;
    arena_init(&a);
    /* n rounded up to 16 would wrap to 0: a 16-byte chunk for a huge request */
    ck_assert_ptr_null(arena_alloc(&a, SIZE_MAX - 7));
    ck_assert_ptr_nonnull(ice_message());
    ck_assert_ptr_nonnull(strstr(ice_message(), "out of host memory"));
    ice_clear();
    /* count x size overflows */
    ck_assert_ptr_null(ARENA_ARRAY(&a, double, INT64_MAX / 4));
    ck_assert_ptr_null(ARENA_ARRAY(&a, double, -1));
    ck_assert_ptr_nonnull(ice_message());
    ice_clear();
    int *ok = ARENA_ARRAY(&a, int, 1000);
    ck_assert_ptr_nonnull(ok);
    ck_assert_int_eq(ok[999], 0);
    ck_assert_ptr_null(ice_message());
    arena_free(&a);
}
END_TEST

START_TEST(strbuf_failure_is_sticky_not_silent)
{
    StrBuf sb;
    sb_init(&sb);
    sb_puts(&sb, "abc");
    ck_assert(!sb_failed(&sb));
    sb_putn(&sb, "x", SIZE_MAX / 2); /* cannot be had: dropped, and said so */
    ck_assert(sb_failed(&sb));
    ck_assert_uint_eq(sb.len, 3);
    sb_puts(&sb, "def"); /* a later append would leave a hole: dropped too */
    ck_assert_str_eq(sb.data, "abc");
    sb_free(&sb);
    ck_assert(!sb_failed(&sb));
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("support");
    TCase *tc = tcase_create("failure paths");
    tcase_add_checked_fixture(tc, make_dir, remove_dir);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, reads_a_regular_file_whole);
    tcase_add_test(tc, refuses_what_it_cannot_read_whole);
    tcase_add_test(tc, a_pipe_is_read_up_to_the_limit);
    tcase_add_test(tc, a_fifo_without_writer_does_not_hang);
    tcase_add_test(tc, out_of_memory_is_an_error);
    tcase_add_test(tc, arena_sizes_do_not_wrap);
    tcase_add_test(tc, strbuf_failure_is_sticky_not_silent);
    suite_add_tcase(s, tc);
    return s;
}

TU_MAIN(suite)
