/* main.c — the `kiln` command: check, compile and run .tile programs.
 *
 * Exit codes: 0 success, 1 user error (the program has errors, or running it
 * failed), 2 usage error (bad command line). The command never dies on a
 * signal: everything below returns error codes.
 */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "compiler/driver/driver.h"
#include "compiler/interp/interp.h"
#include "compiler/support/schedule.h"
#include "cli.h"

#define EXIT_USER 1
#define EXIT_USAGE 2

static const char usage_text[] =
    "usage: kiln <command> [options]\n"
    "\n"
    "commands:\n"
    "  check FILE                 check a program; print diagnostics only\n"
    "  compile FILE [options]     compile and print the chosen stage\n"
    "  run FILE [options] [ARG=SPEC]...\n"
    "                             run a kernel (GPU when there is one, else the CPU interpreter)\n"
    "  tune FILE -k KERNEL [options] [ARG=SPEC]...\n"
    "                             tune a kernel over its declared `tune` space (docs/language.md)\n"
    "  --help, --version\n"
    "\n"
    "options:\n"
    "  -k, --kernel NAME          the kernel to use (needed when the file has several)\n"
    "  -D NAME=VALUE              value of a const parameter (repeatable)\n"
    "  -I DIR                     where `import NAME;` looks, after the file's own directory and\n"
    "                             before the library built into kiln (repeatable)\n"
    "  --assume NAME=DIV          integer parameter NAME is a multiple of DIV, or pointer NAME is\n"
    "                             DIV-byte aligned (a power of two; repeatable): lets masked\n"
    "                             loads/stores use 16-byte vectors\n"
    "  --assume NAME==1           integer parameter NAME is exactly 1 (repeatable): its uses\n"
    "                             compile as the constant 1 (a unit stride: vector loads,\n"
    "                             cp.async pipelining); launches must pass 1\n"
    "  --emit STAGE               ast | ir | gpu-ir | llvm | ptx | cubin   (compile; default ir)\n"
    "  --arch ARCH                sm_80 | sm_86 | sm_89 | sm_90 | sm_90a   (default sm_90a)\n"
    "  --num-warps N              override the kernel's num_warps (a power of two, 1 to 32)\n"
    "  --num-stages N             override the kernel's num_stages (1 to 1024)\n"
    "  --dump-after PASS|all      print the IR after a pass (to stderr)\n"
    "  --stats                    print warps and SRAM use (to stderr)\n"
    "  --time                     print each compiler phase's wall time in ms (to stderr)\n"
    "  -O0                        skip the target-independent passes\n"
    "  -o FILE                    write the output to FILE instead of stdout\n"
    "\n"
    "schedule options (compile and run):\n"
    "%s"
    "\n"
    "run options:\n"
    "  --grid X[,Y[,Z]]           programs per axis (default 1)\n"
    "  --cpu                      use the CPU interpreter even when a GPU is present\n"
    "  --seed N                   seed for random inputs (default 1)\n"
    "  --show N                   print the first N elements of each buffer (default 8)\n"
    "  ARG=SPEC                   a kernel argument: a number for scalars; for pointers\n"
    "                             rand:N (uniform in [-1,1)), randn:N, zeros:N, ones:N, iota:N\n"
    "\n"
    "tune options (and -k, -D, -I, --assume, --arch, --cpu; ARG=SPEC: rand:N inputs, out:N outputs, numbers):\n"
    "  --grid X[,Y[,Z]]           programs per axis, each N or N/NAME (cdiv(N, the config's NAME))\n"
    "  --jobs N                   compile threads (default: the CPUs)\n"
    "  --max-spill BYTES          prune configs that spill more (default 0; -1 keeps all)\n"
    "  --max-configs N            only the first N configs of the space\n"
    "  --warmup N, --repeats N    launches before timing (5), timed launches (20; the median)\n"
    "  --flops F, --bytes B       work per launch, for TFLOP/s and GB/s\n"
    "  --rtol R, --atol A         agreement with config 0 (2e-2, 2e-3)\n"
    "  --no-run                   compile and prune only\n"
    "  --store                    keep the winner on disk (later launches look it up)\n"
    "  --key TEXT                 the key the winner is stored under (default: from -D and ARGs)\n"
    "  --csv FILE, --svg FILE     write the report as CSV / an SVG plot\n";

/* The usage text with the schedule options' lines, one per row of the table. */
static void print_usage(FILE *out)
{
    char opts[2048];
    size_t used = 0;
    opts[0] = 0;
    for (int i = 0; i < SCHED_COUNT && used < sizeof opts; i++)
        used += (size_t)snprintf(opts + used, sizeof opts - used, "  %-26s %s\n", sched_options[i].flag,
                                 sched_options[i].help);
    fprintf(out, usage_text, opts);
}

static int usage_error(const char *fmt, const char *arg)
{
    fprintf(stderr, "kiln: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nTry 'kiln --help'.\n");
    return EXIT_USAGE;
}

static const struct { const char *name; KilnEmit emit; } emit_names[] = {
    {"ast", KILN_EMIT_AST},   {"ir", KILN_EMIT_IR},   {"gpu-ir", KILN_EMIT_GPU_IR},
    {"llvm", KILN_EMIT_LLVM}, {"ptx", KILN_EMIT_PTX}, {"cubin", KILN_EMIT_CUBIN},
};

/* Parse the shared options; positional FILE and ARG=SPEC go to `rest`. */
static int parse_args(int argc, char **argv, KilnCliArgs *a)
{
    memset(a, 0, sizeof *a);
    a->opts.emit = KILN_EMIT_IR;
    a->seed = 1;
    a->show = 8;
    a->grid[0] = a->grid[1] = a->grid[2] = 1;
    for (int i = 2; i < argc; i++) {
        const char *s = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define NEED_VALUE() do { if (!v) return usage_error("option '%s' needs a value", s); i++; } while (0)
        if (!strcmp(s, "-k") || !strcmp(s, "--kernel")) { NEED_VALUE(); a->opts.kernel = v; }
        else if (!strcmp(s, "-D") || (!strncmp(s, "-D", 2) && s[2])) {
            const char *d = s + 2;
            if (!s[2]) {
                NEED_VALUE();
                d = v;
            }
            const char *eq = strchr(d, '=');
            if (!eq || eq == d) return usage_error("-D expects NAME=VALUE, got '%s'", d);
            if (a->ndefines == KILN_CLI_MAX_DEFINES) return usage_error("too many -D options (at most %s)", "64");
            a->defines[a->ndefines].name = strndup(d, (size_t)(eq - d));
            a->defines[a->ndefines].value = eq + 1;
            a->ndefines++;
        } else if (!strcmp(s, "-I") || (!strncmp(s, "-I", 2) && s[2])) {
            const char *dir = s + 2;
            if (!s[2]) {
                NEED_VALUE();
                dir = v;
            }
            if (a->ninclude_dirs == KILN_CLI_MAX_DEFINES) return usage_error("too many -I options (at most %s)", "64");
            a->include_dirs[a->ninclude_dirs++] = dir;
        } else if (!strcmp(s, "--assume")) {
            NEED_VALUE();
            const char *eq = strchr(v, '=');
            bool one = eq && eq[1] == '=';   /* NAME==1: the value is exactly 1 */
            char *end = NULL;
            long n = eq ? (errno = 0, strtol(eq + 1 + one, &end, 10)) : 0;
            if (one && (eq == v || strcmp(eq + 2, "1")))
                return usage_error("--assume NAME==1 takes only the value 1, got '%s'", v);
            /* the rule sema applies to hints (lang/sema.c): a power of two up to 2^30 */
            if (!one && (!eq || eq == v || end == eq + 1 || *end || errno || n < 1 || n > 1 << 30 || (n & (n - 1))))
                return usage_error("--assume expects NAME=DIV with DIV a power of two (1 to 2^30), or NAME==1, got '%s'",
                                   v);
            if (a->nhints == KILN_CLI_MAX_DEFINES) return usage_error("too many --assume options (at most %s)", "64");
            a->hints[a->nhints].name = strndup(v, (size_t)(eq - v));
            a->hints[a->nhints].divisibility = one ? 1 : (int)n;
            a->hints[a->nhints].equals_one = one;
            a->nhints++;
        } else if (!strcmp(s, "--emit")) {
            NEED_VALUE();
            size_t k = 0;
            while (k < sizeof emit_names / sizeof emit_names[0] && strcmp(emit_names[k].name, v)) k++;
            if (k == sizeof emit_names / sizeof emit_names[0])
                return usage_error("unknown --emit stage '%s' (ast, ir, gpu-ir, llvm, ptx, cubin)", v);
            a->opts.emit = emit_names[k].emit;
        } else if (!strcmp(s, "--arch")) { NEED_VALUE(); a->opts.arch = v; }
        else if (!strcmp(s, "--num-warps") || !strcmp(s, "--num-stages") || !strcmp(s, "--seed") ||
                 !strcmp(s, "--show")) {
            NEED_VALUE();
            char *end;
            errno = 0;
            long n = strtol(v, &end, 10);
            if (end == v || *end || errno || n < 0 || n > 1 << 20) return usage_error("bad number '%s'", v);
            /* the same rule sema applies to a kernel's own num_warps */
            if (!strcmp(s, "--num-warps") && (n < 1 || n > 32 || (n & (n - 1))))
                return usage_error("--num-warps must be a power of two between 1 and 32, got '%s'", v);
            if (!strcmp(s, "--num-stages") && (n < 1 || n > 1024)) /* SEMA_MAX_STAGES (lang/sema.h) */
                return usage_error("--num-stages must be between 1 and 1024, got '%s'", v);
            if (!strcmp(s, "--num-warps")) a->opts.num_warps = (int)n;
            else if (!strcmp(s, "--num-stages")) a->opts.num_stages = (int)n;
            else if (!strcmp(s, "--seed")) a->seed = (unsigned)n;
            else a->show = (int)n;
        } else if (!strcmp(s, "--dump-after")) { NEED_VALUE(); a->opts.dump_after = v; }
        else if (!strcmp(s, "--stats")) a->stats = true;
        else if (!strcmp(s, "--time")) a->time = true;
        else if (!strcmp(s, "-O0")) a->opts.no_opt = 1;
        else if (sched_find_flag(s) >= 0) sched_set(&a->opts.schedule, sched_find_flag(s), 1);
        else if (!strcmp(s, "--cpu")) a->cpu = true;
        else if (!strcmp(s, "-o")) { NEED_VALUE(); a->out_path = v; }
        else if (!strcmp(s, "--grid")) {
            NEED_VALUE();
            char *end;
            const char *p = v;
            for (int k = 0; k < 3; k++) {
                long n = strtol(p, &end, 10);
                if (end == p || n < 1 || n > 1 << 30) return usage_error("bad --grid '%s' (expected X[,Y[,Z]])", v);
                a->grid[k] = (int)n;
                if (*end != ',') break;
                p = end + 1;
            }
            if (*end) return usage_error("bad --grid '%s' (expected X[,Y[,Z]])", v);
        } else if (s[0] == '-' && s[1]) return usage_error("unknown option '%s'", s);
        else if (!a->file) a->file = s;
        else if (strchr(s, '=') && a->nrunargs == KILN_CLI_MAX_ARGS)
            return usage_error("too many ARG=SPEC arguments (at most " KILN_CLI_MAX_ARGS_STR "), at '%s'", s);
        else if (strchr(s, '=')) a->runargs[a->nrunargs++] = s;
        else return usage_error("unexpected argument '%s'", s);
#undef NEED_VALUE
    }
    if (!a->file) return usage_error("%s", "no input file");
    a->opts.defines = a->defines;
    a->opts.ndefines = a->ndefines;
    a->opts.hints = a->hints;
    a->opts.nhints = a->nhints;
    a->opts.include_dirs = a->include_dirs;
    a->opts.ninclude_dirs = a->ninclude_dirs;
    return 0;
}

/* Every write of the command ends here or in finish_stdout: a full disk or a
 * closed pipe is an error (exit 1), never a silent success. */
static int write_failed(const char *path, int err)
{
    fprintf(stderr, "kiln: cannot write '%s': %s\n", path, strerror(err ? err : EIO));
    return EXIT_USER;
}

/* Why a write to stdout failed, when it failed before the final flush (a
 * large output is written through as it goes). */
static int stdout_errno;

static int write_output(const char *path, const char *data, size_t n)
{
    if (!path) {
        /* reported once, at exit (finish_stdout) */
        errno = 0;
        if (fwrite(data, 1, n, stdout) != n && !stdout_errno) stdout_errno = errno;
        return 0;
    }
    FILE *f = fopen(path, "wb");
    if (!f) return write_failed(path, errno);
    errno = 0;
    int err = fwrite(data, 1, n, f) == n ? 0 : errno ? errno : EIO;
    if (fflush(f) != 0 && !err) err = errno ? errno : EIO;
    if (fclose(f) != 0 && !err) err = errno ? errno : EIO;
    return err ? write_failed(path, err) : 0;
}

/* Flushes stdout and reports a failure that happened at any point of the
 * command (buffered output only fails when it is flushed). */
static int finish_stdout(int rc)
{
    errno = 0;
    int bad = fflush(stdout) != 0;
    int err = stdout_errno ? stdout_errno : errno;
    if (ferror(stdout) || bad) {
        write_failed("stdout", err);
        return rc ? rc : EXIT_USER;
    }
    return rc;
}

/* A NUL byte would silently end the source (the compiler takes C strings):
 * reported at its place, in the compiler's diagnostic form. */
static bool reject_nul(const char *path, const char *src, size_t len)
{
    const char *nul = memchr(src, 0, len);
    if (!nul) return false;
    const char *line = src;
    int lno = 1;
    for (const char *p = src; p < nul; p++)
        if (*p == '\n') lno++, line = p + 1;
    int col = (int)(nul - line) + 1;
    fprintf(stderr, "%s:%d:%d: error: NUL byte in the source (not a text file?)\n%.*s\n%*s^\n", path, lno, col,
            col > 200 ? 0 : col - 1, line, col > 200 ? 0 : col - 1, "");
    return true;
}

/* `path` as given, else (a relative path that is not there) the shipped
 * program of that name: `kiln check examples/softmax.tile` works from any
 * directory with an installed prefix (kiln_data_path). */
char *kiln_cli_read_source(const char *path)
{
    size_t len = 0;
    char *src = sup_read_file_text(path, &len);
    int err = errno;
    char shipped[4096];
    if (!src && err == ENOENT && path[0] != '/' && kiln_data_path(path, shipped, sizeof shipped) == KILN_OK) {
        src = sup_read_file_text(shipped, &len);
        if (!src) err = errno; /* the shipped file's own reason */
    }
    if (!src && err == EFBIG)
        fprintf(stderr, "kiln: cannot read '%s': larger than %zu MiB, the limit for a source file\n", path,
                KILN_MAX_SOURCE_BYTES >> 20);
    else if (!src && err == ENODEV)
        fprintf(stderr, "kiln: cannot read '%s': not a regular file or a pipe\n", path);
    else if (!src)
        fprintf(stderr, "kiln: cannot read '%s': %s\n", path, strerror(err));
    if (src && reject_nul(path, src, len)) {
        free(src);
        return NULL;
    }
    return src;
}

/* The library's stats: --stats prints the kernel's lines, --time the
 * "time <phase>: N ms" lines (they differ from run to run). */
static void print_stats(const char *stats, bool kernel, bool time)
{
    for (const char *l = stats; l && *l;) {
        size_t n = strcspn(l, "\n");
        bool is_time = strncmp(l, "time ", 5) == 0;
        if (is_time ? time : kernel) fprintf(stderr, "%.*s\n", (int)n, l);
        l += n + (l[n] == '\n');
    }
}

static int cmd_compile(KilnCliArgs *a, bool check_only)
{
    char *src = kiln_cli_read_source(a->file);
    if (!src) return EXIT_USER;
    if (check_only) a->opts.emit = KILN_EMIT_IR;
    KilnCompileResult r;
    KilnStatus st = kiln_compile(a->file, src, &a->opts, &r);
    free(src);
    if (r.diagnostics) fputs(r.diagnostics, stderr);
    if (r.dumps) fputs(r.dumps, stderr);
    int rc = 0;
    if (st == KILN_ERR_USAGE) rc = EXIT_USAGE;
    else if (st != KILN_OK) rc = EXIT_USER;
    else if (!check_only) {
        print_stats(r.stats, a->stats, a->time);
        rc = write_output(a->out_path, r.output, r.output_size);
    }
    kiln_compile_result_free(&r);
    return rc;
}

/* -o is compile's: check and run write no output file (accepting it and writing nothing
 * would look like success), and compile never writes over its own input (the source
 * would be lost to the PTX). One file: the same path, or the same inode by another name. */
static int check_out_path(const char *cmd, const KilnCliArgs *a)
{
    if (!a->out_path) return 0;
    if (strcmp(cmd, "compile")) return usage_error("-o is for kiln compile; kiln %s writes no output file", cmd);
    struct stat in, out;
    bool same = !strcmp(a->out_path, a->file) ||
                (stat(a->file, &in) == 0 && stat(a->out_path, &out) == 0 && in.st_dev == out.st_dev &&
                 in.st_ino == out.st_ino);
    if (same) return usage_error("-o '%s' names the input file: it would be overwritten", a->out_path);
    return 0;
}

int main(int argc, char **argv)
{
    /* A reader that went away (kiln ... | head -1) is a write error reported
     * like any other (finish_stdout), not a death by SIGPIPE. */
    signal(SIGPIPE, SIG_IGN);
    if (argc < 2) {
        print_usage(stderr);
        return EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
        print_usage(stdout);
        return finish_stdout(0);
    }
    if (!strcmp(cmd, "--version")) {
        printf("kiln %s (LLVM 19 NVPTX backend)\n", KILN_VERSION);
        return finish_stdout(0);
    }
    if (!strcmp(cmd, "tune")) return finish_stdout(kiln_cli_tune(argc, argv, parse_args));
    if (strcmp(cmd, "check") && strcmp(cmd, "compile") && strcmp(cmd, "run"))
        return usage_error("unknown command '%s' (check, compile, run, tune)", cmd);
    KilnCliArgs a;
    int rc = parse_args(argc, argv, &a);
    if (rc == 0) rc = check_out_path(cmd, &a);
    if (rc == 0) {
        if (!strcmp(cmd, "run")) rc = kiln_cli_run(&a);
        else rc = cmd_compile(&a, !strcmp(cmd, "check"));
    }
    for (int i = 0; i < a.ndefines; i++) free((char *)a.defines[i].name);
    for (int i = 0; i < a.nhints; i++) free((char *)a.hints[i].name);
    return finish_stdout(rc);
}
