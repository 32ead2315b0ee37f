/* kiln_bench_compile.c — compile time, source -> PTX, of every shipped program
 * at the schedules the runtime uses, with the time of each compiler phase.
 * No GPU: this is the compiler alone (PTX -> loaded module and the cache-hit
 * path need a device: kiln-bench-attn --compile-bench).
 *
 *   kiln-bench-compile [--reps N] [--arch sm_80|sm_90a] [--only SUBSTR] [--ptx-dir DIR] [--json]
 *
 * The kernels: the attention forward at k_tune's schedules (f16/bf16 x head dim
 * 64/128/256 x causal, plus sm_90's short-causal rows), the backward's kernels at
 * its tuning table (deterministic and atomic dQ), decode (split and combine), all
 * with the hints launch-time specialisation adds for aligned tensors (every
 * pointer and integer parameter a multiple of 16, as the runtime sees them for
 * the usual contiguous layouts); and the examples as kiln-examples compiles them.
 * The schedules are copied from runtime/jit/attention*.c (tests/codegen/
 * test_e2e_ptx_hashes.c pins the forward's).
 *
 * Each kernel compiles --reps times (cold every time: no cache is involved);
 * printed: the median wall time, the CPU time of that run (on a loaded machine
 * the honest number) and the median of each phase, from the "time <phase>"
 * lines kiln_compile puts in its stats. --ptx-dir writes each kernel's PTX, so
 * two builds can be compared byte for byte.
 *
 * --cache: also the host side of a cache hit (kiln_cache_key + kiln_cache_lookup of
 * the forward's entry, d 128 f16 sm_90a, in a fresh KILN_CACHE_DIR): what
 * kiln_module_compile does on a hit before the driver loads the module.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "kiln.h"

#define MAX_REPS 64
#define NPHASES 5
static const char *const k_phases[NPHASES] = {"front-end", "gpu-passes", "lower", "llvm-opt", "llvm-codegen"};

typedef struct Job {
    char name[96];
    const char *file, *kernel, *arch;
    KilnDefine defs[8];
    char vals[8][16];
    int ndefs, warps, stages;
    int hints;   /* hint every pointer and integer parameter as a multiple of 16 */
} Job;

static Job g_jobs[256];
static int g_njobs;

static double now_ms(clockid_t clk)
{
    struct timespec ts;
    clock_gettime(clk, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static Job *add_job(const char *file, const char *kernel, const char *arch, int warps, int stages, int hints)
{
    Job *j = &g_jobs[g_njobs++];
    *j = (Job){.file = file, .kernel = kernel, .arch = arch, .warps = warps, .stages = stages, .hints = hints};
    return j;
}

static void def(Job *j, const char *name, int v)
{
    snprintf(j->vals[j->ndefs], sizeof j->vals[0], "%d", v);
    j->defs[j->ndefs] = (KilnDefine){name, j->vals[j->ndefs]};
    j->ndefs++;
}

static void def_bool(Job *j, const char *name, int v)
{
    j->defs[j->ndefs++] = (KilnDefine){name, v ? "true" : "false"};
}

/* ---- the kernels ---- */

/* The forward: runtime/jit/attention.c's k_tune (tests/codegen/test_e2e_ptx_hashes.c). */
static void add_forward(const char *arch, const char *dtype, int d, int causal, int short_seq)
{
    int sm90 = !strcmp(arch, "sm_90a"), bm, bn, w = 4;
    if (!sm90) bm = d == 256 ? 64 : 128, bn = d == 256 ? 32 : 64, w = d == 256 ? 4 : 8;
    else if (d == 64) bm = 64, bn = causal && short_seq ? 64 : 128;
    else if (d == 128) bm = causal && short_seq ? 64 : 128, bn = 64;
    else bm = 64, bn = 64;
    Job *j = add_job("lang/lib/attention_fwd.tile", strcmp(dtype, "f16") ? "attn_fwd_bf16" : "attn_fwd_f16", arch, w,
                     2, 1);
    snprintf(j->name, sizeof j->name, "fwd_%s_d%d_%s%s", dtype, d, causal ? "causal" : "full", short_seq ? "_short" : "");
    def(j, "HEAD_DIM", d);
    def(j, "BLOCK_M", bm);
    def(j, "BLOCK_N", bn);
    def_bool(j, "CAUSAL", causal);
    def_bool(j, "PLAIN_SCORES", 1);
}

/* The backward: runtime/jit/attention_bwd.c's k_bwd_tune and rt_attn_bwd_plan. */
static void add_backward(const char *arch, int d, int causal, int atomic)
{
    static const struct { int d, kbm, kbn, kw, qbm, qbn, qw; } t[] = {
        {64, 32, 128, 8, 128, 32, 8}, {128, 16, 64, 8, 64, 32, 8}, {256, 16, 32, 8, 32, 16, 8}};
    int r = d == 64 ? 0 : d == 128 ? 1 : 2;
    const char *f = "lang/lib/attention_bwd.tile";
    Job *j = add_job(f, "attn_bwd_pre_f16", arch, 4, 0, 1);
    snprintf(j->name, sizeof j->name, "bwd_pre_d%d%s", d, atomic ? "_atomic" : "");
    def(j, "HEAD_DIM", d), def(j, "BLOCK_M", t[r].qbm), def_bool(j, "ZERO_DQ_ACC", atomic);
    if (atomic) {
        j = add_job(f, "attn_bwd_dq_cvt_f16", arch, 4, 0, 1);
        snprintf(j->name, sizeof j->name, "bwd_dq_cvt_d%d", d);
        def(j, "HEAD_DIM", d), def(j, "BLOCK_M", t[r].qbm);
    } else {
        j = add_job(f, "attn_bwd_dq_f16", arch, t[r].qw, 0, 1);
        snprintf(j->name, sizeof j->name, "bwd_dq_d%d_%s", d, causal ? "causal" : "full");
        def(j, "HEAD_DIM", d), def(j, "BLOCK_M", t[r].qbm), def(j, "BLOCK_N", t[r].qbn), def_bool(j, "CAUSAL", causal);
    }
    j = add_job(f, "attn_bwd_dkdv_f16", arch, t[r].kw, 0, 1);
    snprintf(j->name, sizeof j->name, "bwd_dkdv_d%d_%s%s", d, causal ? "causal" : "full", atomic ? "_atomic" : "");
    def(j, "HEAD_DIM", d), def(j, "BLOCK_M", t[r].kbm), def(j, "BLOCK_N", t[r].kbn), def_bool(j, "CAUSAL", causal);
    def_bool(j, "COMPUTE_DQ", atomic);
}

/* Decode: runtime/jit/attention_decode.c's k_dec_tune (4 warps, 2 stages), one
 * query per KV head (BLOCK_M 16), split-K, and its combine kernel. */
static void add_decode(const char *arch, int d)
{
    Job *j = add_job("lang/lib/attention_decode.tile", "attn_decode_f16", arch, 4, 2, 1);
    snprintf(j->name, sizeof j->name, "decode_d%d", d);
    def(j, "HEAD_DIM", d), def(j, "BLOCK_M", 16), def(j, "BLOCK_N", d == 256 ? 32 : 64);
    def_bool(j, "CAUSAL", 0), def_bool(j, "PAGED", 0), def_bool(j, "DIRECT", 0);
    if (d != 128) return;
    j = add_job("lang/lib/attention_decode.tile", "attn_decode_combine_f16", arch, 0, 0, 1);
    snprintf(j->name, sizeof j->name, "decode_combine_d%d", d);
    def(j, "HEAD_DIM", d);
}

static void add_examples(const char *arch)
{
    Job *j = add_job("examples/vec_add.tile", "vec_add", arch, 0, 0, 0);
    snprintf(j->name, sizeof j->name, "vec_add");
    j = add_job("examples/softmax.tile", "softmax", arch, 0, 0, 0);
    snprintf(j->name, sizeof j->name, "softmax");
    def(j, "BLOCK", 1024);
    j = add_job("examples/layer_norm.tile", "layer_norm", arch, 0, 0, 0);
    snprintf(j->name, sizeof j->name, "layer_norm");
    j = add_job("examples/matmul.tile", "matmul", arch, 0, 0, 0);
    snprintf(j->name, sizeof j->name, "matmul_64x64x32");
    def(j, "BLOCK_M", 64), def(j, "BLOCK_N", 64), def(j, "BLOCK_K", 32);
}

static void add_all(const char *arch)
{
    static const int dims[] = {64, 128, 256};
    for (int t = 0; t < 2; t++)
        for (int d = 0; d < 3; d++)
            for (int c = 0; c < 2; c++) add_forward(arch, t ? "bf16" : "f16", dims[d], c, 0);
    if (!strcmp(arch, "sm_90a")) add_forward(arch, "f16", 64, 1, 1), add_forward(arch, "f16", 128, 1, 1);
    for (int d = 0; d < 3; d++) add_backward(arch, dims[d], d == 1, 0), add_backward(arch, dims[d], d != 1, 1);
    for (int d = 0; d < 3; d++) add_decode(arch, dims[d]);
    add_examples(arch);
}

/* ---- one kernel ---- */

typedef struct Opts {
    int reps, json, cache;
    const char *arch, *only, *ptx_dir, *src_dir;
} Opts;

static char *read_source(const Opts *o, const char *file)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", o->src_dir, file);
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) n = 0;
    if (s) s[n] = 0;
    fclose(f);
    return s;
}

/* The launch-time hints: every pointer and integer parameter a multiple of 16
 * (what specialisation sees for contiguous tensors with d and lengths of 16k). */
static int make_hints(const char *file, const char *src, const KilnCompileOptions *base, KilnParamHint *h,
                      char (*names)[64], int max)
{
    KilnCompileOptions o = *base;
    o.emit = KILN_EMIT_IR;
    KilnCompileResult r;
    int n = 0;
    if (kiln_compile(file, src, &o, &r) == KILN_OK && r.nkernels == 1)
        for (int i = 0; i < r.kernels[0].nparams && n < max; i++) {
            const KilnParam *p = &r.kernels[0].params[i];
            if (p->kind == KILN_PARAM_F32 || p->kind == KILN_PARAM_F16 || p->kind == KILN_PARAM_BF16 ||
                p->kind == KILN_PARAM_F64 || p->kind == KILN_PARAM_I1)
                continue;
            snprintf(names[n], 64, "%s", p->name);
            h[n] = (KilnParamHint){names[n], 16, 0};
            n++;
        }
    kiln_compile_result_free(&r);
    return n;
}

static double phase_ms(const char *stats, const char *phase)
{
    char key[64];
    snprintf(key, sizeof key, "time %s: ", phase);
    const char *p = stats ? strstr(stats, key) : NULL;
    return p ? atof(p + strlen(key)) : 0;
}

static void write_ptx(const Opts *o, const Job *j, const KilnCompileResult *r)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s_%s.ptx", o->ptx_dir, j->name, j->arch);
    FILE *f = fopen(path, "wb");
    if (!f) return;
    fwrite(r->output, 1, r->output_size, f);
    fclose(f);
}

/* Returns the median wall time, or -1 when the kernel does not compile. */
static double bench_job(const Opts *o, const Job *j)
{
    char *src = read_source(o, j->file);
    if (!src) {
        fprintf(stderr, "cannot read %s/%s (--src-dir)\n", o->src_dir, j->file);
        return -1;
    }
    KilnCompileOptions co = {.kernel = j->kernel, .defines = j->defs, .ndefines = j->ndefs, .arch = j->arch,
                             .num_warps = j->warps, .num_stages = j->stages, .emit = KILN_EMIT_PTX};
    KilnParamHint hints[64];
    static char names[64][64];
    if (j->hints) co.nhints = make_hints(j->file, src, &co, hints, names, 64), co.hints = hints;
    double wall[MAX_REPS], cpu[MAX_REPS], ph[NPHASES][MAX_REPS];
    size_t bytes = 0;
    for (int i = 0; i < o->reps; i++) {
        KilnCompileResult r;
        double w0 = now_ms(CLOCK_MONOTONIC), c0 = now_ms(CLOCK_PROCESS_CPUTIME_ID);
        KilnStatus st = kiln_compile(j->file, src, &co, &r);
        wall[i] = now_ms(CLOCK_MONOTONIC) - w0;
        cpu[i] = now_ms(CLOCK_PROCESS_CPUTIME_ID) - c0;
        if (st != KILN_OK) {
            fprintf(stderr, "%s %s: %s\n%s", j->name, j->arch, kiln_status_name(st), r.diagnostics ? r.diagnostics : "");
            kiln_compile_result_free(&r);
            free(src);
            return -1;
        }
        for (int k = 0; k < NPHASES; k++) ph[k][i] = phase_ms(r.stats, k_phases[k]);
        bytes = r.output_size;
        if (i == 0 && o->ptx_dir) write_ptx(o, j, &r);
        kiln_compile_result_free(&r);
    }
    free(src);
    double cpu_med = median(cpu, o->reps), m = median(wall, o->reps);
    if (o->json) {
        printf("{\"kernel\": \"%s\", \"arch\": \"%s\", \"reps\": %d, \"wall_ms\": %.3f, \"cpu_ms\": %.3f", j->name,
               j->arch, o->reps, m, cpu_med);
        for (int k = 0; k < NPHASES; k++) printf(", \"%s_ms\": %.3f", k_phases[k], median(ph[k], o->reps));
        printf(", \"ptx_bytes\": %zu}\n", bytes);
    } else {
        printf("%-28s %-7s %8.1f %8.1f", j->name, j->arch, m, cpu_med);
        for (int k = 0; k < NPHASES; k++) printf(" %9.1f", median(ph[k], o->reps));
        printf(" %8zu\n", bytes);
    }
    fflush(stdout);
    return m;
}

/* The host side of a cache hit for `j`: key (SHA-256 of the source and the
 * request) and lookup (read, verify, decode), median over --reps x 10. */
static void bench_cache_hit(const Opts *o, const Job *j)
{
    char dir[] = "/tmp/kiln-bench-cache-XXXXXX";
    char *src = read_source(o, j->file);
    if (!src || !mkdtemp(dir)) {
        fprintf(stderr, "--cache: cannot read the source or make a temporary directory\n");
        free(src);
        return;
    }
    setenv("KILN_CACHE_DIR", dir, 1);
    KilnCompileOptions co = {.kernel = j->kernel, .defines = j->defs, .ndefines = j->ndefs, .arch = j->arch,
                             .num_warps = j->warps, .num_stages = j->stages, .emit = KILN_EMIT_PTX};
    KilnParamHint hints[64];
    static char names[64][64];
    if (j->hints) co.nhints = make_hints(j->file, src, &co, hints, names, 64), co.hints = hints;
    KilnCompileResult r;
    char key[65];
    KilnCacheEntry e = {.emit = KILN_EMIT_PTX};
    memset(&r, 0, sizeof r);
    if (kiln_compile(j->file, src, &co, &r) != KILN_OK || kiln_cache_key(src, &co, key) != KILN_OK) {
        fprintf(stderr, "--cache: cannot compile %s\n", j->name);
    } else {
        e.payload = r.output, e.payload_size = r.output_size, e.info = r.kernels[0];
        KilnStatus st = kiln_cache_store(key, &e);
        int n = o->reps * 10 > MAX_REPS ? MAX_REPS : o->reps * 10;
        double tk[MAX_REPS], tl[MAX_REPS];
        for (int i = 0; st == KILN_OK && i < n; i++) {
            double t0 = now_ms(CLOCK_MONOTONIC);
            st = kiln_cache_key(src, &co, key);
            double t1 = now_ms(CLOCK_MONOTONIC);
            KilnCacheEntry hit;
            if (st == KILN_OK) st = kiln_cache_lookup(key, &hit);
            tk[i] = t1 - t0, tl[i] = now_ms(CLOCK_MONOTONIC) - t1;
            if (st == KILN_OK) kiln_cache_entry_free(&hit);
        }
        if (st != KILN_OK) fprintf(stderr, "--cache: %s\n", kiln_last_error());
        else if (o->json)
            printf("{\"cache_hit\": \"%s\", \"arch\": \"%s\", \"key_ms\": %.3f, \"lookup_ms\": %.3f, "
                   "\"payload_bytes\": %zu}\n", j->name, j->arch, median(tk, n), median(tl, n), r.output_size);
        else
            printf("cache hit (host side) %s %s: key %.3f ms, lookup %.3f ms (%zu-byte PTX; median of %d)\n",
                   j->name, j->arch, median(tk, n), median(tl, n), r.output_size, n);
        char path[1024];
        snprintf(path, sizeof path, "%s/%s.kc", dir, key);
        unlink(path);
    }
    kiln_compile_result_free(&r);
    rmdir(dir);
    free(src);
}

static int usage(void)
{
    fprintf(stderr, "usage: kiln-bench-compile [--reps N] [--arch sm_80|sm_90a] [--only SUBSTR] [--ptx-dir DIR]\n"
                    "                          [--src-dir DIR] [--cache] [--json]\n");
    return 2;
}

int main(int argc, char **argv)
{
    Opts o = {.reps = 3, .src_dir = "."};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--json")) o.json = 1;
        else if (!strcmp(a, "--cache")) o.cache = 1;
        else if (!strcmp(a, "--reps") && v) o.reps = atoi(v), i++;
        else if (!strcmp(a, "--arch") && v) o.arch = v, i++;
        else if (!strcmp(a, "--only") && v) o.only = v, i++;
        else if (!strcmp(a, "--ptx-dir") && v) o.ptx_dir = v, i++;
        else if (!strcmp(a, "--src-dir") && v) o.src_dir = v, i++;
        else return usage();
    }
    if (o.reps < 1 || o.reps > MAX_REPS) return usage();
    if (o.ptx_dir) mkdir(o.ptx_dir, 0755);
    if (!o.arch || !strcmp(o.arch, "sm_80")) add_all("sm_80");
    if (!o.arch || !strcmp(o.arch, "sm_90a")) add_all("sm_90a");
    if (!o.json)
        printf("%-28s %-7s %8s %8s %9s %9s %9s %9s %9s %8s\n", "kernel", "arch", "wall_ms", "cpu_ms", "front", "gpu",
               "lower", "llvm-opt", "codegen", "ptx_B");
    double worst = 0, sum = 0;
    int n = 0, failed = 0;
    for (int i = 0; i < g_njobs; i++) {
        if (o.only && !strstr(g_jobs[i].name, o.only)) continue;
        double m = bench_job(&o, &g_jobs[i]);
        if (m < 0) { failed++; continue; }
        worst = m > worst ? m : worst;
        sum += m;
        n++;
    }
    if (!o.json) printf("%d kernels: slowest %.1f ms, mean %.1f ms (wall, median of %d)\n", n, worst, n ? sum / n : 0,
                        o.reps);
    for (int i = 0; o.cache && i < g_njobs; i++)
        if (!strcmp(g_jobs[i].name, "fwd_f16_d128_full") && !strcmp(g_jobs[i].arch, o.arch ? o.arch : "sm_90a"))
            bench_cache_hit(&o, &g_jobs[i]);
    return failed ? 1 : 0;
}
