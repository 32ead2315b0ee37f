/* replay_main.c — a main() for the libFuzzer targets without libFuzzer: every
 * build runs each target (its LLVMFuzzerTestOneInput) over the seed corpus as
 * a ctest (tests/CMakeLists.txt: fuzz/replay_*), so the targets keep compiling
 * and a seed that crashes them, trips a sanitizer or hits an internal error
 * (the targets abort) fails the build's tests, not only a fuzzing session.
 *
 *   fuzz_frontend_replay FILE|DIR...
 *
 * Besides the files, a few inputs no seed has: empty, one NUL, a source cut in
 * the middle of a token, text after an embedded NUL, and a byte past every
 * ASCII range. Exit 0 when every input ran (prints how many), 2 on a file that
 * cannot be read, 1 when fewer than 3 files were given inputs (a wrong path).
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int nfiles;

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) { fprintf(stderr, "replay: cannot open %s\n", path); return 2; }
    size_t cap = 1 << 16, n = 0;
    uint8_t *buf = malloc(cap);
    for (size_t got; buf && (got = fread(buf + n, 1, cap - n, f)) > 0;) {
        n += got;
        if (n == cap) {
            uint8_t *b = realloc(buf, cap *= 2);
            if (!b) { free(buf); buf = NULL; }
            else buf = b;
        }
    }
    fclose(f);
    if (!buf) { fprintf(stderr, "replay: out of memory reading %s\n", path); return 2; }
    LLVMFuzzerTestOneInput(buf, n);
    free(buf);
    nfiles++;
    return 0;
}

static int run_path(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0) { fprintf(stderr, "replay: no such file or folder %s\n", path); return 2; }
    if (!S_ISDIR(st.st_mode)) return run_file(path);
    DIR *d = opendir(path);
    if (!d) { fprintf(stderr, "replay: cannot read folder %s\n", path); return 2; }
    int rc = 0;
    for (struct dirent *e; rc == 0 && (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", path, e->d_name);
        struct stat es;
        if (stat(p, &es) == 0 && S_ISREG(es.st_mode)) rc = run_file(p);
    }
    closedir(d);
    return rc;
}

int main(int argc, char **argv)
{
    static const char cut[] = "kernel k(X: *f32, n: i32) { let i = program_id(0) * 12";
    static const char after_nul[] = "kernel k(X: *f32) {}\0kernel j(";
    static const uint8_t high[] = {'k', 'e', 'r', 'n', 'e', 'l', ' ', 0xff, 0xfe, '(', ')'};
    LLVMFuzzerTestOneInput((const uint8_t *)"", 0);
    LLVMFuzzerTestOneInput((const uint8_t *)"\0", 1);
    LLVMFuzzerTestOneInput((const uint8_t *)cut, sizeof cut - 1);
    LLVMFuzzerTestOneInput((const uint8_t *)after_nul, sizeof after_nul - 1);
    LLVMFuzzerTestOneInput(high, sizeof high);
    for (int i = 1; i < argc; i++) {
        int rc = run_path(argv[i]);
        if (rc) return rc;
    }
    printf("replay: %d files and 5 built-in inputs, no finding\n", nfiles);
    return nfiles >= 3 ? 0 : 1;
}
