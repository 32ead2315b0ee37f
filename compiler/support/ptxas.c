/* ptxas.c — the ptxas locator and runner; see ptxas.h.
 *
 * ptxas runs as a child process (posix_spawn, no shell) on files in a fresh
 * mkdtemp directory, its stdout and stderr both going to a log file; the
 * directory is removed afterwards whatever happened. Exit status 127 from the
 * child means the exec itself failed.
 */
#include "ptxas.h"

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define CUDA_PTXAS "/usr/local/cuda/bin/ptxas"
#define NOT_FOUND "ptxas not found: "

static bool is_exec_file(const char *p)
{
    struct stat st;
    return p && access(p, X_OK) == 0 && stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

static char *dup_str(const char *s)
{
    char *p = malloc(strlen(s) + 1);
    if (p) strcpy(p, s);
    return p;
}

char *ptxas_find(StrBuf *why)
{
    const char *env = getenv("KILN_PTXAS");
    if (env && *env) {
        if (is_exec_file(env)) return dup_str(env);
        if (why) sb_printf(why, NOT_FOUND "KILN_PTXAS=%s is not an executable file", env);
        return NULL;
    }
    if (is_exec_file(CUDA_PTXAS)) return dup_str(CUDA_PTXAS);
    StrBuf cand;
    sb_init(&cand);
    for (const char *path = getenv("PATH"); path && *path;) {
        size_t n = strcspn(path, ":");
        if (n) {
            cand.len = 0;
            sb_putn(&cand, path, n);
            sb_puts(&cand, "/ptxas");
            if (is_exec_file(cand.data)) return sb_steal(&cand);
        }
        path += n + (path[n] == ':');
    }
    sb_free(&cand);
    if (why)
        sb_puts(why, NOT_FOUND "install the CUDA toolkit (" CUDA_PTXAS "), put ptxas on PATH or set KILN_PTXAS");
    return NULL;
}

static bool write_file(const char *path, const char *data, size_t n)
{
    FILE *fp = fopen(path, "wb");
    if (!fp) return false;
    bool ok = fwrite(data, 1, n, fp) == n;
    return fclose(fp) == 0 && ok;
}

/* Appends the file's text to `sb`; false when it cannot be read. */
static bool append_file(const char *path, StrBuf *sb)
{
    size_t n = 0;
    char *text = sup_read_file_text(path, &n);
    if (!text) return false;
    sb_putn(sb, text, n);
    free(text);
    return true;
}

/* posix_spawn, not fork: the caller may be a large multi-threaded process
 * (PyTorch with a CUDA context maps tens of GB of address space), where
 * fork() copies the page tables before the exec — hundreds of ms per ptxas
 * run — and a forked child of a threaded process may only call
 * async-signal-safe functions. glibc's posix_spawn shares the address space
 * until the exec (CLONE_VM | CLONE_VFORK) and sets up the log through file
 * actions. Returns the child's exit status, 127 when it could not start. */
static int spawn(const char *ptxas, const char *arch_flag, const char *in, const char *out, const char *log)
{
    posix_spawn_file_actions_t fa;
    if (posix_spawn_file_actions_init(&fa) != 0) return 127;
    int rc = posix_spawn_file_actions_addopen(&fa, 2, log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (rc == 0) rc = posix_spawn_file_actions_adddup2(&fa, 2, 1);
    char *argv[] = {(char *)ptxas, "-v", (char *)arch_flag, "-o", (char *)out, (char *)in, NULL};
    pid_t pid = -1;
    if (rc == 0) rc = posix_spawn(&pid, ptxas, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    int st = 0;
    if (rc != 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st)) return 127;
    return WEXITSTATUS(st);
}

PtxasStatus ptxas_run(const char *ptx, size_t n, const char *arch, StrBuf *cubin, StrBuf *log, StrBuf *err)
{
    char *ptxas = ptxas_find(err);
    if (!ptxas) return PTXAS_NOT_FOUND;
    char dir[] = "/tmp/kiln-ptxas-XXXXXX";
    if (!mkdtemp(dir)) {
        sb_printf(err, "cannot create a temporary directory for ptxas: %s", strerror(errno));
        free(ptxas);
        return PTXAS_FAILED;
    }
    char in[64], out[64], logf[64], arch_flag[64];
    snprintf(in, sizeof in, "%s/kernel.ptx", dir);
    snprintf(out, sizeof out, "%s/kernel.cubin", dir);
    snprintf(logf, sizeof logf, "%s/ptxas.log", dir);
    snprintf(arch_flag, sizeof arch_flag, "-arch=%s", arch);
    PtxasStatus st = PTXAS_OK;
    int rc = 0;
    if (!write_file(in, ptx, n)) {
        sb_printf(err, "cannot write %s", in);
        st = PTXAS_FAILED;
    } else if ((rc = spawn(ptxas, arch_flag, in, out, logf)) == 127) {
        sb_printf(err, "cannot run ptxas at '%s'", ptxas);
        st = PTXAS_FAILED;
    } else if (rc != 0) {
        sb_printf(err, "ptxas (%s %s) rejected the kernel:\n", ptxas, arch_flag);
        append_file(logf, err);
        st = PTXAS_REJECTED;
    } else if (!append_file(out, cubin)) {
        sb_printf(err, "ptxas wrote no cubin at %s", out);
        st = PTXAS_FAILED;
    } else if (log) {
        append_file(logf, log);
    }
    unlink(in);
    unlink(out);
    unlink(logf);
    rmdir(dir);
    free(ptxas);
    return st;
}
