/* kiln_bench_compile.c — compile time, source -> PTX, of every shipped program
 * at the schedules the runtime uses, with the time of each compiler phase.
 * No GPU unless --device: this is the compiler alone (PTX -> loaded module and
 * the cache-hit path need a device: kiln-bench-attn --compile-bench).
 *
 *   kiln-bench-compile [--reps N] [--arch sm_80|sm_90a] [--only SUBSTR] [--ptx-dir DIR] [--budget MS] [--json]
 *
 * The kernels: the attention forward at k_tune's schedules (f16/bf16 x head dim
 * 64/128/256 x causal, plus sm_90's short-causal rows), the backward's kernels at
 * its tuning table (deterministic and atomic dQ), decode (split and combine), all
 * with the hints launch-time specialisation adds for aligned tensors (every
 * pointer and integer parameter a multiple of 16, as the runtime sees them for
 * the usual contiguous layouts); and the examples as kiln-examples compiles them.
 * The schedules are copied from jit/attention*.c (tests/codegen/
 * test_e2e_ptx_hashes.c pins the forward's).
 *
 * Each kernel compiles --reps times (cold every time: no cache is involved);
 * printed: the median wall time, the median CPU time (on a loaded machine the
 * honest number) and the median CPU time of each phase, from the "time <phase>:
 * W ms, cpu C ms" lines kiln_compile puts in its stats (--json: both clocks).
 * Then a summary: per group (forward, backward, decode, examples) and arch the
 * min / median / max CPU ms and how many kernels exceed --budget (default 100
 * ms, issue 27's per-kernel target), and which. --ptx-dir writes each kernel's PTX, so
 * two builds can be compared byte for byte, and (from one more, untimed compile)
 * its LLVM IR before LLVM's passes as NAME_ARCH.ll: the volume the lowering
 * emits, which LLVM's time follows (docs/performance.md, "Compile time").
 *
 * --variant-cold: what a never-seen variant's first forward and backward compile,
 * eager (generic + specialised kernel) against deferred (signature + specialised
 * kernel), by phase with ptxas, and on threads; --device (GPU host) adds each
 * cubin's load and the real first calls (see variant_cold below).
 *
 * --cache: also the host side of a cache hit (kiln_cache_key + kiln_cache_lookup of
 * the forward's entry, d 128 f16 sm_90a, in a fresh KILN_CACHE_DIR): what
 * kiln_module_compile does on a hit before the driver loads the module.
 */
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>
#include <sys/resource.h>
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
    KilnSchedule sched;   /* the table row's schedule options */
    int hints;   /* hint every pointer and integer parameter as a multiple of 16 */
} Job;

static Job g_jobs[256];
static double g_cpu[256];   /* each job's median CPU ms, -1 when not run */
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

/* The forward: jit/attention_tune.c's k_tune (tests/codegen/test_e2e_ptx_hashes.c). sm_90a:
 * d 64 64 x 128 (causal short 64 x 64) on 4 warps; d 128 128 x 128 on 8 warps with warp
 * specialisation and TMA (causal short: 64 x 64 on 4); d 256 128 x 64 on 8 with warp
 * specialisation. */
static void add_forward(const char *arch, const char *dtype, int d, int causal, int short_seq)
{
    int sm90 = !strcmp(arch, "sm_90a"), bm, bn, w = 4;
    KilnSchedule sc = {0};
    if (!sm90) bm = d == 256 ? 64 : 128, bn = d == 256 ? 32 : 64, w = d == 256 ? 4 : 8;
    else if (d == 64) bm = 64, bn = causal && short_seq ? 64 : 128;
    else if (d == 128 && causal && short_seq) bm = 64, bn = 64;
    else if (d == 128) bm = 128, bn = 128, w = 8, sc.warp_specialize = 1, sc.tma = 1;
    else bm = 128, bn = 64, w = 8, sc.warp_specialize = 1;
    Job *j = add_job("lang/lib/attention_fwd.tile", strcmp(dtype, "f16") ? "attn_fwd_bf16" : "attn_fwd_f16", arch, w,
                     2, 1);
    j->sched = sc;
    snprintf(j->name, sizeof j->name, "fwd_%s_d%d_%s%s", dtype, d, causal ? "causal" : "full", short_seq ? "_short" : "");
    def(j, "HEAD_DIM", d);
    def(j, "BLOCK_M", bm);
    def(j, "BLOCK_N", bn);
    def_bool(j, "CAUSAL", causal);
    def_bool(j, "PLAIN_SCORES", 1);
}

/* The backward: jit/attention_tune.c's backward rows and rt_attn_bwd_plan (sm_90a: 64 x 64
 * for both kernels, 4 warps, 8 at d 256, 2 stages). */
static void add_backward(const char *arch, int d, int causal, int atomic)
{
    static const struct { int d, kbm, kbn, kw, qbm, qbn, qw; } t80[] = {
        {64, 32, 128, 8, 128, 32, 8}, {128, 16, 64, 8, 64, 32, 8}, {256, 16, 32, 8, 32, 16, 8}};
    static const struct { int d, kbm, kbn, kw, qbm, qbn, qw; } t90[] = {
        {64, 64, 64, 4, 64, 64, 4}, {128, 64, 64, 4, 64, 64, 4}, {256, 64, 64, 8, 64, 64, 8}};
    int r = d == 64 ? 0 : d == 128 ? 1 : 2, sm90 = !strcmp(arch, "sm_90a"), st = sm90 ? 2 : 0;
    int kbm = sm90 ? t90[r].kbm : t80[r].kbm, kbn = sm90 ? t90[r].kbn : t80[r].kbn, kw = sm90 ? t90[r].kw : t80[r].kw;
    int qbm = sm90 ? t90[r].qbm : t80[r].qbm, qbn = sm90 ? t90[r].qbn : t80[r].qbn, qw = sm90 ? t90[r].qw : t80[r].qw;
    const char *f = "lang/lib/attention_bwd.tile";
    Job *j = add_job(f, "attn_bwd_pre_f16", arch, 4, 0, 1);
    snprintf(j->name, sizeof j->name, "bwd_pre_d%d%s", d, atomic ? "_atomic" : "");
    def(j, "HEAD_DIM", d), def(j, "BLOCK_M", qbm), def_bool(j, "ZERO_DQ_ACC", atomic);
    if (atomic) {
        j = add_job(f, "attn_bwd_dq_cvt_f16", arch, 4, 0, 1);
        snprintf(j->name, sizeof j->name, "bwd_dq_cvt_d%d", d);
        def(j, "HEAD_DIM", d), def(j, "BLOCK_M", qbm);
    } else {
        j = add_job(f, "attn_bwd_dq_f16", arch, qw, st, 1);
        snprintf(j->name, sizeof j->name, "bwd_dq_d%d_%s", d, causal ? "causal" : "full");
        def(j, "HEAD_DIM", d), def(j, "BLOCK_M", qbm), def(j, "BLOCK_N", qbn), def_bool(j, "CAUSAL", causal);
    }
    j = add_job(f, "attn_bwd_dkdv_f16", arch, kw, st, 1);
    snprintf(j->name, sizeof j->name, "bwd_dkdv_d%d_%s%s", d, causal ? "causal" : "full", atomic ? "_atomic" : "");
    def(j, "HEAD_DIM", d), def(j, "BLOCK_M", kbm), def(j, "BLOCK_N", kbn), def_bool(j, "CAUSAL", causal);
    def_bool(j, "COMPUTE_DQ", atomic);
}

/* Decode: jit/attention_tune.c's decode rows (4 warps, 2 stages), one
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
    int reps, json, cache, variant_cold, device;
    const char *arch, *only, *ptx_dir, *src_dir;
    double budget;   /* --budget: the per-kernel CPU ms the summary judges against */
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

/* A phase's wall (cpu = 0) or CPU (cpu = 1) ms from its stats line
 * "time <phase>: W ms, cpu C ms". */
static double phase_ms(const char *stats, const char *phase, int cpu)
{
    char key[64];
    snprintf(key, sizeof key, "time %s: ", phase);
    const char *p = stats ? strstr(stats, key) : NULL;
    if (!p) return 0;
    p += strlen(key);
    if (!cpu) return atof(p);
    const char *c = strstr(p, ", cpu "), *nl = strchr(p, '\n');
    return c && (!nl || c < nl) ? atof(c + 6) : 0;
}

static void write_file(const Opts *o, const Job *j, const char *ext, const char *data, size_t n)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s_%s.%s", o->ptx_dir, j->name, j->arch, ext);
    FILE *f = fopen(path, "wb");
    if (!f) return;
    fwrite(data, 1, n, f);
    fclose(f);
}

/* The kernel's LLVM IR as the lowering hands it to LLVM (the dump after
 * "lower"), written next to its PTX. */
static void write_ir(const Opts *o, const Job *j, const char *src, KilnCompileOptions co)
{
    KilnCompileResult r;
    co.dump_after = "all"; /* "lower" alone is not a pass name the driver takes */
    const char *mark = "before LLVM's passes -----\n";
    const char *ir = kiln_compile(j->file, src, &co, &r) == KILN_OK && r.dumps ? strstr(r.dumps, mark) : NULL;
    if (ir) write_file(o, j, "ll", ir + strlen(mark), strlen(ir + strlen(mark)));
    kiln_compile_result_free(&r);
}

/* Returns the median wall time (and in *cpu_ms the median CPU time), or -1
 * when the kernel does not compile. */
static double bench_job(const Opts *o, const Job *j, double *cpu_ms)
{
    char *src = read_source(o, j->file);
    if (!src) {
        fprintf(stderr, "cannot read %s/%s (--src-dir)\n", o->src_dir, j->file);
        return -1;
    }
    KilnCompileOptions co = {.kernel = j->kernel, .defines = j->defs, .ndefines = j->ndefs, .arch = j->arch,
                             .num_warps = j->warps, .num_stages = j->stages, .schedule = j->sched,
                             .emit = KILN_EMIT_PTX};
    KilnParamHint hints[64];
    static char names[64][64];
    if (j->hints) co.nhints = make_hints(j->file, src, &co, hints, names, 64), co.hints = hints;
    double wall[MAX_REPS], cpu[MAX_REPS], ph[NPHASES][MAX_REPS], phc[NPHASES][MAX_REPS];
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
        for (int k = 0; k < NPHASES; k++) {
            ph[k][i] = phase_ms(r.stats, k_phases[k], 0);
            phc[k][i] = phase_ms(r.stats, k_phases[k], 1);
        }
        bytes = r.output_size;
        if (i == 0 && o->ptx_dir) write_file(o, j, "ptx", r.output, r.output_size);
        kiln_compile_result_free(&r);
    }
    if (o->ptx_dir) write_ir(o, j, src, co);
    free(src);
    double cpu_med = median(cpu, o->reps), m = median(wall, o->reps);
    if (o->json) {
        printf("{\"kernel\": \"%s\", \"arch\": \"%s\", \"reps\": %d, \"wall_ms\": %.3f, \"cpu_ms\": %.3f", j->name,
               j->arch, o->reps, m, cpu_med);
        for (int k = 0; k < NPHASES; k++)
            printf(", \"%s_ms\": %.3f, \"%s_cpu_ms\": %.3f", k_phases[k], median(ph[k], o->reps), k_phases[k],
                   median(phc[k], o->reps));
        printf(", \"ptx_bytes\": %zu}\n", bytes);
    } else {
        printf("%-28s %-7s %8.1f %8.1f", j->name, j->arch, m, cpu_med);
        for (int k = 0; k < NPHASES; k++) printf(" %9.1f", median(phc[k], o->reps));
        printf(" %8zu\n", bytes);
    }
    fflush(stdout);
    *cpu_ms = cpu_med;
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
                             .num_warps = j->warps, .num_stages = j->stages, .schedule = j->sched,
                             .emit = KILN_EMIT_PTX};
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

/* ---- a new variant, cold (--variant-cold [--device]) ---- */

/* What a first kiln_attention_fwd / kiln_attention_bwd with a never-seen variant
 * compiles (lang/lib/variants/softcap.tile, f16, d 128, causal, sm_90a, the
 * runtime's schedules; the backward's default atomic-dQ plan), each kernel with
 * the hints specialisation adds for aligned tensors (what actually runs):
 *   eager    = kiln_module_compile + first launch: the generic cubin, then the
 *              specialised one (the runtime before rt_module_compile_deferred);
 *   deferred = the signature (front end, emit IR), then the specialised cubin.
 * Times are wall and CPU (this process + ptxas children), medians of --reps;
 * the phases are the specialised compile's. Then the backward's kernels (and
 * forward + backward) compiled on threads at once. --device adds the driver's
 * load of each cubin and the real first calls in a fresh KILN_CACHE_DIR. */
typedef struct ColdKernel {
    const char *program, *kernel;
    int warps, stages;
    KilnDefine defs[6];
    int ndefs;
    char *src;                 /* the variant's text + an import of the program (rt_attn_var_root) */
    KilnCompileOptions co;     /* with the aligned hints */
    KilnParamHint hints[64];
    char names[64][64];
    KilnCompileResult cubin;   /* the specialised compile of the last rep */
} ColdKernel;

static ColdKernel g_cold[] = {
    {.program = "attention_fwd.tile", .kernel = "attn_fwd_f16", .warps = 4, .stages = 2, .ndefs = 4,
     .defs = {{"HEAD_DIM", "128"}, {"BLOCK_M", "128"}, {"BLOCK_N", "64"}, {"CAUSAL", "true"}}},
    {.program = "attention_bwd.tile", .kernel = "attn_bwd_pre_f16", .warps = 4, .ndefs = 3,
     .defs = {{"HEAD_DIM", "128"}, {"BLOCK_M", "64"}, {"ZERO_DQ_ACC", "true"}}},
    {.program = "attention_bwd.tile", .kernel = "attn_bwd_dkdv_f16", .warps = 8, .ndefs = 5,
     .defs = {{"HEAD_DIM", "128"}, {"BLOCK_M", "16"}, {"BLOCK_N", "64"}, {"CAUSAL", "true"}, {"COMPUTE_DQ", "true"}}},
    {.program = "attention_bwd.tile", .kernel = "attn_bwd_dq_cvt_f16", .warps = 4, .ndefs = 2,
     .defs = {{"HEAD_DIM", "128"}, {"BLOCK_M", "64"}}},
};
#define NCOLD ((int)(sizeof g_cold / sizeof g_cold[0]))
#define COLD_VARIANT "lang/lib/variants/softcap.tile"

static double cpu_all_ms(void)   /* this process and its waited-for children (ptxas) */
{
    struct rusage s, c;
    getrusage(RUSAGE_SELF, &s);
    getrusage(RUSAGE_CHILDREN, &c);
    double us = (double)(s.ru_utime.tv_sec + s.ru_stime.tv_sec + c.ru_utime.tv_sec + c.ru_stime.tv_sec) * 1e6 +
                (double)(s.ru_utime.tv_usec + s.ru_stime.tv_usec + c.ru_utime.tv_usec + c.ru_stime.tv_usec);
    return us * 1e-3;
}

static KilnStatus cold_compile(ColdKernel *k, KilnEmit emit, int hinted, KilnCompileResult *r)
{
    KilnCompileOptions co = k->co;
    co.emit = emit;
    if (!hinted) co.hints = NULL, co.nhints = 0;
    KilnStatus st = kiln_compile(COLD_VARIANT, k->src, &co, r);
    if (st != KILN_OK)
        fprintf(stderr, "%s: %s\n%s", k->kernel, kiln_status_name(st), r->diagnostics ? r->diagnostics : "");
    return st;
}

static int cold_setup(const Opts *o)
{
    char *var = read_source(o, COLD_VARIANT);
    if (!var) {
        fprintf(stderr, "cannot read %s/%s (--src-dir)\n", o->src_dir, COLD_VARIANT);
        return -1;
    }
    for (int i = 0; i < NCOLD; i++) {
        ColdKernel *k = &g_cold[i];
        size_t n = strlen(var) + strlen(k->program) + 32;
        k->src = malloc(n);
        snprintf(k->src, n, "%s\nimport \"%s\";\n", var, k->program);
        k->co = (KilnCompileOptions){.kernel = k->kernel, .defines = k->defs, .ndefines = k->ndefs,
                                     .arch = "sm_90a", .num_warps = k->warps, .num_stages = k->stages};
        k->co.nhints = make_hints(COLD_VARIANT, k->src, &k->co, k->hints, k->names, 64);
        k->co.hints = k->hints;
    }
    free(var);
    return 0;
}

/* One kernel: eager and deferred sequences, --reps each, medians. */
static int cold_kernel(const Opts *o, ColdKernel *k)
{
    double ew[MAX_REPS], ec[MAX_REPS], dw[MAX_REPS], dc[MAX_REPS], ph[NPHASES + 1][MAX_REPS];
    for (int i = 0; i < o->reps; i++) {
        KilnCompileResult g, ir;
        double w0 = now_ms(CLOCK_MONOTONIC), c0 = cpu_all_ms();
        if (cold_compile(k, KILN_EMIT_CUBIN, 0, &g) != KILN_OK) return -1;
        double w1 = now_ms(CLOCK_MONOTONIC), c1 = cpu_all_ms();
        if (cold_compile(k, KILN_EMIT_IR, 0, &ir) != KILN_OK) return -1;
        double w2 = now_ms(CLOCK_MONOTONIC), c2 = cpu_all_ms();
        kiln_compile_result_free(&k->cubin);
        if (cold_compile(k, KILN_EMIT_CUBIN, 1, &k->cubin) != KILN_OK) return -1;
        double w3 = now_ms(CLOCK_MONOTONIC), c3 = cpu_all_ms();
        ew[i] = (w1 - w0) + (w3 - w2), ec[i] = (c1 - c0) + (c3 - c2);
        dw[i] = w3 - w1, dc[i] = c3 - c1;
        for (int p = 0; p < NPHASES; p++) ph[p][i] = phase_ms(k->cubin.stats, k_phases[p], 0);
        ph[NPHASES][i] = phase_ms(k->cubin.stats, "ptxas", 0);
        kiln_compile_result_free(&g);
        kiln_compile_result_free(&ir);
    }
    printf("%-22s %8.0f %8.0f %8.0f %8.0f", k->kernel, median(ew, o->reps), median(ec, o->reps),
           median(dw, o->reps), median(dc, o->reps));
    for (int p = 0; p <= NPHASES; p++) printf(" %8.1f", median(ph[p], o->reps));
    printf(" %7zu\n", k->cubin.output_size);
    fflush(stdout);
    return 0;
}

typedef struct ColdThread {
    ColdKernel *k;
    KilnStatus st;
} ColdThread;

static void *cold_thread(void *p)
{
    ColdThread *t = p;
    KilnCompileResult r;
    t->st = cold_compile(t->k, KILN_EMIT_CUBIN, 1, &r);
    kiln_compile_result_free(&r);
    return NULL;
}

/* Kernels [first, first + n) compiled one after another and on n threads at once. */
static void cold_threads(const Opts *o, int first, int n, const char *what)
{
    double seq[MAX_REPS], par[MAX_REPS];
    for (int i = 0; i < o->reps; i++) {
        double t0 = now_ms(CLOCK_MONOTONIC);
        for (int j = 0; j < n; j++) {
            ColdThread t = {&g_cold[first + j], KILN_OK};
            cold_thread(&t);
        }
        double t1 = now_ms(CLOCK_MONOTONIC);
        pthread_t th[NCOLD];
        ColdThread ts[NCOLD];
        for (int j = 0; j < n; j++) {
            ts[j] = (ColdThread){&g_cold[first + j], KILN_OK};
            pthread_create(&th[j], NULL, cold_thread, &ts[j]);
        }
        for (int j = 0; j < n; j++) pthread_join(th[j], NULL);
        seq[i] = t1 - t0, par[i] = now_ms(CLOCK_MONOTONIC) - t1;
    }
    printf("%s: %.0f ms one after another, %.0f ms on %d threads (wall, median of %d)\n", what,
           median(seq, o->reps), median(par, o->reps), n, o->reps);
}

/* The driver's load of each specialised cubin (first load in this process). */
static void cold_loads(KilnDevice *dev)
{
    for (int i = 0; i < NCOLD; i++) {
        ColdKernel *k = &g_cold[i];
        KilnModule *m = NULL;
        double t0 = now_ms(CLOCK_MONOTONIC);
        KilnStatus st = kiln_module_load_cubin(dev, k->cubin.output, k->cubin.output_size, k->cubin.kernels, 1, &m);
        double t = now_ms(CLOCK_MONOTONIC) - t0;
        if (st != KILN_OK) fprintf(stderr, "load %s: %s\n", k->kernel, kiln_last_error());
        else printf("load %-22s %8.1f ms (cuModuleLoadDataEx of a %zu-byte cubin)\n", k->kernel, t, k->cubin.output_size);
        kiln_module_free(m);
    }
}

static void rm_dir(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        char p[1200];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) unlink(p);
    }
    if (d) closedir(d);
    rmdir(dir);
}

/* The real thing: first and second kiln_attention_fwd / _bwd with the variant
 * (B 1, H 16, N 1024, d 128, f16, causal) in a fresh cache directory. */
static int cold_calls(const Opts *o, KilnDevice *dev)
{
    char dir[] = "/tmp/kiln-bench-cold-XXXXXX";
    char *text = read_source(o, COLD_VARIANT);
    if (!text || !mkdtemp(dir)) return -1;
    setenv("KILN_CACHE_DIR", dir, 1);
    const int H = 16, N = 1024, D = 128;
    size_t bytes = (size_t)H * N * D * 2;
    KilnDevPtr b[9] = {0};   /* q k v o dO dq dk dv lse */
    KilnStatus st = KILN_OK;
    for (int i = 0; i < 9 && st == KILN_OK; i++) {
        size_t n = i == 8 ? (size_t)H * N * 4 : bytes;
        st = kiln_malloc(dev, n, &b[i]);
        if (st == KILN_OK) st = kiln_memset(dev, b[i], 0, n);   /* zeros: finite scores, timing only */
    }
    KilnVariantArg arg = {"softcap", kiln_arg_f32(50.0f), 0};
    KilnAttentionVariant var = {.source = text, .path = COLD_VARIANT, .args = &arg, .nargs = 1};
    KilnAttentionParams p = {.dtype = KILN_F16, .batch = 1, .heads_q = H, .heads_kv = H, .seqlen_q = N, .seqlen_k = N,
                             .head_dim = D, .q = b[0], .k = b[1], .v = b[2], .o = b[3], .lse = b[8], .causal = 1,
                             .variant = &var};
    int64_t s[3] = {(int64_t)H * N * D, (int64_t)N * D, D};
    memcpy(p.q_stride, s, sizeof s), memcpy(p.k_stride, s, sizeof s), memcpy(p.v_stride, s, sizeof s);
    memcpy(p.o_stride, s, sizeof s);
    KilnAttentionBwdParams bp = {.fwd = p, .dout = b[4], .dq = b[5], .dk = b[6], .dv = b[7]};
    memcpy(bp.dout_stride, s, sizeof s), memcpy(bp.dq_stride, s, sizeof s), memcpy(bp.dk_stride, s, sizeof s);
    memcpy(bp.dv_stride, s, sizeof s);
    KilnDevPtr scratch = 0;
    if (st == KILN_OK) st = kiln_malloc(dev, kiln_attention_bwd_scratch_size(&bp), &scratch);
    bp.scratch = scratch;
    bp.scratch_size = kiln_attention_bwd_scratch_size(&bp);
    const char *what[4] = {"kiln_attention_fwd first call", "kiln_attention_fwd second call",
                           "kiln_attention_bwd first call", "kiln_attention_bwd second call"};
    for (int i = 0; i < 4 && st == KILN_OK; i++) {
        double w0 = now_ms(CLOCK_MONOTONIC), c0 = cpu_all_ms();
        st = i < 2 ? kiln_attention_fwd(dev, &p, NULL) : kiln_attention_bwd(dev, &bp, NULL);
        if (st == KILN_OK) st = kiln_synchronize(dev);
        printf("%-32s %8.1f ms wall %8.1f ms CPU (softcap variant, fresh cache; KILN_DEFER=%s)\n", what[i],
               now_ms(CLOCK_MONOTONIC) - w0, cpu_all_ms() - c0, getenv("KILN_DEFER") ? getenv("KILN_DEFER") : "1");
    }
    if (st != KILN_OK) fprintf(stderr, "--device: %s\n", kiln_last_error());
    for (int i = 0; i < 9; i++) kiln_free(dev, b[i]);
    kiln_free(dev, scratch);
    rm_dir(dir);
    free(text);
    return st == KILN_OK ? 0 : -1;
}

static int variant_cold(const Opts *o)
{
    if (cold_setup(o)) return 1;
    printf("a new variant, cold (%s, f16, d 128, causal, sm_90a; ms, median of %d)\n", COLD_VARIANT, o->reps);
    printf("%-22s %8s %8s %8s %8s", "kernel", "eager_w", "eager_c", "defer_w", "defer_c");
    for (int p = 0; p < NPHASES; p++) printf(" %8.8s", k_phases[p]);
    printf(" %8s %7s\n", "ptxas", "cubin_B");
    for (int i = 0; i < NCOLD; i++)
        if (cold_kernel(o, &g_cold[i])) return 1;
    cold_threads(o, 1, NCOLD - 1, "the backward's kernels");
    cold_threads(o, 0, NCOLD, "forward + backward kernels");
    int rc = 0;
    if (o->device) {
        KilnDevice *dev = NULL;
        if (kiln_init(&dev, 0) != KILN_OK) {
            fprintf(stderr, "--device: %s\n", kiln_last_error());
            return 1;
        }
        cold_loads(dev);
        rc = cold_calls(o, dev);
        kiln_shutdown(dev);
    }
    for (int i = 0; i < NCOLD; i++) free(g_cold[i].src), kiln_compile_result_free(&g_cold[i].cubin);
    return rc ? 1 : 0;
}

/* ---- the summary: per group (forward, backward, decode, examples) and arch,
 * min / median / max of the kernels' median CPU ms and how many exceed
 * --budget, then the kernels over it (the per-kernel target) ---- */

static const char *group_of(const Job *j)
{
    if (!strncmp(j->name, "fwd_", 4)) return "forward";
    if (!strncmp(j->name, "bwd_", 4)) return "backward";
    if (!strncmp(j->name, "decode_", 7)) return "decode";
    return "examples";
}

/* One row: the jobs of `group` (NULL: all) on `arch` (NULL: both). */
static void summary_row(const Opts *o, const char *group, const char *arch)
{
    double v[256];
    int n = 0, over = 0;
    for (int i = 0; i < g_njobs; i++) {
        if (g_cpu[i] < 0 || (group && strcmp(group_of(&g_jobs[i]), group)) || (arch && strcmp(g_jobs[i].arch, arch)))
            continue;
        over += g_cpu[i] > o->budget;
        v[n++] = g_cpu[i];
    }
    if (!n) return;
    double med = median(v, n); /* sorts v */
    printf("%-10s %-7s %7d %8.1f %8.1f %8.1f %6d\n", group ? group : "all", arch ? arch : "both", n, v[0], med,
           v[n - 1], over);
}

static void summary(const Opts *o)
{
    static const char *const groups[] = {"forward", "backward", "decode", "examples"};
    static const char *const archs[] = {"sm_80", "sm_90a"};
    printf("\nsummary: CPU ms per cold source -> PTX (median of %d), budget %.0f ms\n", o->reps, o->budget);
    printf("%-10s %-7s %7s %8s %8s %8s %6s\n", "group", "arch", "kernels", "min", "median", "max", "over");
    for (int a = 0; a < 2; a++)
        for (int g = 0; g < 4; g++) summary_row(o, groups[g], archs[a]);
    summary_row(o, NULL, NULL);
    int first = 1;
    for (int i = 0; i < g_njobs; i++)
        if (g_cpu[i] > o->budget) {
            printf("%s%s %s %.1f", first ? "over budget: " : ", ", g_jobs[i].name, g_jobs[i].arch, g_cpu[i]);
            first = 0;
        }
    printf("%s\n", first ? "over budget: none" : "");
}

static int usage(void)
{
    fprintf(stderr, "usage: kiln-bench-compile [--reps N] [--arch sm_80|sm_90a] [--only SUBSTR] [--ptx-dir DIR]\n"
                    "                          [--src-dir DIR] [--budget MS] [--cache] [--json]\n"
                    "       kiln-bench-compile --variant-cold [--device] [--reps N] [--src-dir DIR]\n");
    return 2;
}

int main(int argc, char **argv)
{
    Opts o = {.reps = 3, .src_dir = ".", .budget = 100};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--json")) o.json = 1;
        else if (!strcmp(a, "--cache")) o.cache = 1;
        else if (!strcmp(a, "--variant-cold")) o.variant_cold = 1;
        else if (!strcmp(a, "--device")) o.device = 1;
        else if (!strcmp(a, "--reps") && v) o.reps = atoi(v), i++;
        else if (!strcmp(a, "--arch") && v) o.arch = v, i++;
        else if (!strcmp(a, "--only") && v) o.only = v, i++;
        else if (!strcmp(a, "--ptx-dir") && v) o.ptx_dir = v, i++;
        else if (!strcmp(a, "--src-dir") && v) o.src_dir = v, i++;
        else if (!strcmp(a, "--budget") && v) o.budget = atof(v), i++;
        else return usage();
    }
    if (o.reps < 1 || o.reps > MAX_REPS) return usage();
    if (o.variant_cold) return variant_cold(&o);
    if (o.ptx_dir) mkdir(o.ptx_dir, 0755);
    if (!o.arch || !strcmp(o.arch, "sm_80")) add_all("sm_80");
    if (!o.arch || !strcmp(o.arch, "sm_90a")) add_all("sm_90a");
    if (!o.json)
        printf("%-28s %-7s %8s %8s %9s %9s %9s %9s %9s %8s\n", "kernel", "arch", "wall_ms", "cpu_ms", "front", "gpu",
               "lower", "llvm-opt", "codegen", "ptx_B");
    double worst = 0, sum = 0;
    int n = 0, failed = 0;
    for (int i = 0; i < g_njobs; i++) {
        g_cpu[i] = -1;
        if (o.only && !strstr(g_jobs[i].name, o.only)) continue;
        double m = bench_job(&o, &g_jobs[i], &g_cpu[i]);
        if (m < 0) { failed++; g_cpu[i] = -1; continue; }
        worst = m > worst ? m : worst;
        sum += m;
        n++;
    }
    if (!o.json) {
        printf("%d kernels: slowest %.1f ms, mean %.1f ms (wall, median of %d)\n", n, worst, n ? sum / n : 0, o.reps);
        summary(&o);
    }
    for (int i = 0; o.cache && i < g_njobs; i++)
        if (!strcmp(g_jobs[i].name, "fwd_f16_d128_full") && !strcmp(g_jobs[i].arch, o.arch ? o.arch : "sm_90a"))
            bench_cache_hit(&o, &g_jobs[i]);
    return failed ? 1 : 0;
}
