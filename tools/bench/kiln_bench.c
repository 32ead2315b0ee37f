/* kiln_bench.c — times Kiln's memory-bound example kernels on the GPU through
 * the public API (kiln.h) and prints one JSON object on one line.
 *
 *   kiln-bench vec_add --n 67108864 [--block 1024] [--warps 4] [--reps 100]
 *   kiln-bench softmax --rows 4096 --cols 4096 [--dtype f32|f16] [--block 4096] [--warps 8]
 *
 * It compiles examples/vec_add.tile or examples/softmax.tile (under --root, else
 * where kiln_data_path finds it: an installed share/kiln, $KILN_SOURCE_DIR or
 * the source tree it was built from), fills the inputs
 * with random non-zero values, poisons the outputs, runs the kernel once and
 * checks that run against a host reference (vec add: bit-exact, it is one f32
 * rounding; softmax: max relative error < 1e-5 in f32, < 1e-3 in f16), then warms
 * up and times `reps` launches, each between its own pair of CUDA events, and
 * reports the median.
 *
 * Bandwidth counts the bytes the kernel must move at least once: vec add
 * 3 * n * 4 (two reads, one write), softmax 2 * rows * cols * sizeof(dtype)
 * (one read, one write). GB/s = bytes / median time / 1e9.
 *
 * Caches: when one set of buffers (inputs and output) is smaller than twice the
 * L2 (--l2-mib, 50 MiB on H100/H200), the launches rotate over several sets
 * whose total is at least twice the L2, so a launch never finds its inputs in
 * L2 from the previous one; `sets` in the output says how many were used.
 *
 * Output: {"kernel": "vec_add", "shape": "67108864", "ms": ..., "gbps": ...,
 * "max_err": ..., "device": "NVIDIA H100 80GB HBM3", ...} on stdout.
 * Exit status: 0 measured and correct; 1 no GPU (one line "no GPU: ..." on
 * stderr), a compile/runtime error, or a wrong result (the JSON line is still
 * printed, with "ok": false); 2 bad usage.
 * --compile-only compiles to PTX for --arch (default sm_90a) without a GPU and
 * prints {"kernel": ..., "compile_only": true, "ptx_bytes": ...}: CPU machines
 * can check every schedule the benchmark scripts will ask for.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kiln.h"

#define MAX_SETS 256
#define MAX_REPS 100000

typedef enum Op { OP_VEC_ADD, OP_SOFTMAX } Op;

typedef struct Opts {
    Op op;
    const char *op_name, *dtype, *root, *arch;
    long long n, rows, cols;
    int block, warps, reps, warmup, sets, compile_only, no_queue_ahead;
    double l2_mib;
    unsigned long long seed;
} Opts;

/* ---------------------------------------------------------------- options */

/* A bad command line: one line, the reason and a pointer to --help (NULL: the
 * reason was printed already). */
static int bad_usage(const char *why)
{
    if (why) fprintf(stderr, "kiln-bench: %s (see kiln-bench --help)\n", why);
    return 2;
}

static int usage(void)
{
    fprintf(stderr,
            "usage: kiln-bench vec_add --n N [--dtype f32] [options]\n"
            "       kiln-bench softmax --rows R --cols C [--dtype f32|f16] [options]\n"
            "options: --reps R (100)  --warmup W (10)  --block B (power of two; vec_add 1024,\n"
            "         softmax the next power of two >= C)  --warps W (kernel default / by BLOCK)\n"
            "         --sets S (input sets to rotate; 0 = by --l2-mib)  --l2-mib M (50)\n"
            "         --root DIR (source tree or share/kiln; else kiln_data_path)  --seed S\n"
            "         --no-queue-ahead (launch straight from the host: times include launch overhead)\n"
            "         --compile-only [--arch sm_90a]  (no GPU needed)\n");
    return 2;
}

/* A whole decimal integer in [lo, hi]; anything else is a usage error. */
static int parse_int(const char *flag, const char *s, long long lo, long long hi, long long *out)
{
    char *end = NULL;
    errno = 0;
    long long v = s ? strtoll(s, &end, 10) : 0;
    if (!s || !*s || *end || errno || v < lo || v > hi) {
        fprintf(stderr, "kiln-bench: %s needs an integer in [%lld, %lld], got '%s' (see kiln-bench --help)\n",
                flag, lo, hi, s ? s : "(nothing)");
        return -1;
    }
    *out = v;
    return 0;
}

static int is_pow2(long long v) { return v > 0 && (v & (v - 1)) == 0; }

static int next_pow2(long long v)
{
    int p = 1;
    while (p < v && p < (1 << 30)) p <<= 1;
    return p;
}

static int parse_flag(Opts *o, const char *a, const char *v)
{
    long long x;
    const long long imax = INT_MAX;
#define INT_OPT(flag, lo, hi, dst) \
    if (!strcmp(a, flag)) { if (parse_int(flag, v, lo, hi, &x)) return -1; dst = x; return 1; }
    INT_OPT("--n", 1, imax, o->n)
    INT_OPT("--rows", 1, imax, o->rows)
    INT_OPT("--cols", 1, 1 << 20, o->cols)
    INT_OPT("--block", 1, 1 << 20, o->block)
    INT_OPT("--warps", 1, 32, o->warps)
    INT_OPT("--reps", 1, MAX_REPS, o->reps)
    INT_OPT("--warmup", 0, MAX_REPS, o->warmup)
    INT_OPT("--sets", 0, MAX_SETS, o->sets)
    INT_OPT("--seed", 0, LLONG_MAX, o->seed)
#undef INT_OPT
    if (!strcmp(a, "--l2-mib")) {
        char *end = NULL;
        o->l2_mib = v ? strtod(v, &end) : -1;
        if (!v || *end || !(o->l2_mib >= 0 && o->l2_mib < 1e6)) {
            fprintf(stderr, "kiln-bench: --l2-mib needs a number of MiB, got '%s' (see kiln-bench --help)\n",
                    v ? v : "(nothing)");
            return -1;
        }
        return 1;
    }
    if (!strcmp(a, "--dtype") && v) { o->dtype = v; return 1; }
    if (!strcmp(a, "--root") && v) { o->root = v; return 1; }
    if (!strcmp(a, "--arch") && v) { o->arch = v; return 1; }
    if (!strcmp(a, "--compile-only")) { o->compile_only = 1; return 0; }
    if (!strcmp(a, "--no-queue-ahead")) { o->no_queue_ahead = 1; return 0; }
    fprintf(stderr, "kiln-bench: unknown or incomplete option '%s' (see kiln-bench --help)\n", a);
    return -1;
}

/* Checks what the kernels need: BLOCK a power of two, softmax BLOCK >= cols,
 * int32 offsets that cannot overflow. Fills the defaults. */
static int check_opts(Opts *o)
{
    if (!o->dtype) o->dtype = "f32";
    if (o->op == OP_VEC_ADD) {
        if (!o->n) return bad_usage("vec_add needs --n");
        if (strcmp(o->dtype, "f32")) return bad_usage("vec_add has only --dtype f32 (examples/vec_add.tile)");
        if (!o->block) o->block = 1024;
        /* offs = program_id * BLOCK + arange(BLOCK) is an i32 */
        if (o->n > (long long)INT_MAX - o->block) return bad_usage("--n too large for the kernel's i32 offsets");
    } else {
        if (!o->rows || !o->cols) return bad_usage("softmax needs --rows and --cols");
        if (strcmp(o->dtype, "f32") && strcmp(o->dtype, "f16")) return bad_usage("softmax --dtype is f32 or f16");
        if (!o->block) o->block = next_pow2(o->cols);
        if (o->block < o->cols) return bad_usage("softmax --block must be >= --cols (one program owns a row)");
        if (!o->warps) o->warps = o->block <= 1024 ? 4 : o->block <= 4096 ? 8 : 16;
    }
    if (!is_pow2(o->block)) return bad_usage("--block must be a power of two");
    return 0;
}

static int parse_opts(int argc, char **argv, Opts *o)
{
    *o = (Opts){.reps = 100, .warmup = 10, .l2_mib = 50, .seed = 1, .arch = "sm_90a"};
    if (argc < 2) return usage();
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) { usage(); return 1; }
    if (!strcmp(argv[1], "vec_add")) o->op = OP_VEC_ADD;
    else if (!strcmp(argv[1], "softmax")) o->op = OP_SOFTMAX;
    else return bad_usage("the first argument is the kernel: vec_add or softmax");
    o->op_name = argv[1];
    for (int i = 2; i < argc; i++) {
        int used = parse_flag(o, argv[i], i + 1 < argc ? argv[i + 1] : NULL);
        if (used < 0) return bad_usage(NULL);
        i += used;
    }
    return check_opts(o);
}

/* ---------------------------------------------------------------- host data */

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 14, n = 0, got;
    char *buf = malloc(cap);
    while (buf && (got = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += got;
        if (n + 1 == cap) {
            char *nb = realloc(buf, cap *= 2);
            if (!nb) free(buf);
            buf = nb;
        }
    }
    fclose(f);
    if (buf) buf[n] = 0;
    return buf;
}

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform in [-scale, scale) on a grid of 2^-22 * scale, never 0: sums and
 * differences of two such values are exact in f32, so vec add has one answer. */
static float rand_value(uint64_t *s, float scale)
{
    int32_t k = (int32_t)(splitmix(s) >> 41) - (1 << 22);   /* [-2^22, 2^22) */
    if (k == 0) k = 1 << 21;
    return (float)k * (scale / (float)(1 << 22));
}

/* ---------------------------------------------------------------- the benchmark */

typedef struct Bench {
    const Opts *o;
    KilnDevice *dev;
    KilnKernel *k;
    const KilnKernelInfo *ki;
    size_t esize;          /* bytes per element of the storage dtype */
    size_t elems;          /* elements per input (and per output) */
    int nin;               /* inputs per set: 2 for vec add, 1 for softmax */
    int nsets;
    KilnDevPtr in[MAX_SETS][2], out[MAX_SETS];
    KilnArg args[MAX_SETS][8];
    KilnDevPtr scratch;    /* queue_ahead's buffer, freed with the sets */
    int grid[3];
    double bytes;          /* bytes counted per launch */
} Bench;

static KilnStatus fail_status(const char *what, KilnStatus st)
{
    fprintf(stderr, "kiln-bench: %s: %s: %s\n", what, kiln_status_name(st), kiln_last_error());
    return st;
}

/* How many sets of buffers: enough that their total is >= 2x L2 (one set when
 * a set alone is), capped by MAX_SETS and by half the device memory. */
static int choose_sets(const Opts *o, double set_bytes, double total_mem)
{
    if (o->sets > 0) return o->sets;
    double want = 2.0 * o->l2_mib * 1048576.0;
    int s = set_bytes >= want ? 1 : (int)ceil(want / set_bytes);
    if (s < 2 && set_bytes < want) s = 2;
    if (s > MAX_SETS) s = MAX_SETS;
    while (s > 1 && s * set_bytes > 0.5 * total_mem) s--;
    return s;
}

/* Host data for input `which` of set `set`: deterministic from the seed. */
static void fill_host(const Bench *b, int set, int which, void *h)
{
    uint64_t s = b->o->seed * 1000003ull + (uint64_t)set * 16 + (uint64_t)which + 1;
    float scale = b->o->op == OP_VEC_ADD ? 1.0f : 4.0f;
    for (size_t i = 0; i < b->elems; i++) {
        float v = rand_value(&s, scale);
        if (b->esize == 2) ((uint16_t *)h)[i] = kiln_f32_to_f16(v);
        else ((float *)h)[i] = v;
    }
}

static KilnStatus make_args(Bench *b, int set)
{
    const KilnKernelInfo *ki = b->ki;
    if (ki->nparams > 8) return kiln_set_error(KILN_ERR_ARGS, "kernel %s has %d parameters", ki->name, ki->nparams);
    for (int i = 0; i < ki->nparams; i++) {
        const char *n = ki->params[i].name;
        KilnArg *a = &b->args[set][i];
        if (!strcmp(n, "X")) *a = kiln_arg_ptr(b->in[set][0]);
        else if (!strcmp(n, "Y") && b->nin == 2) *a = kiln_arg_ptr(b->in[set][1]);
        else if (!strcmp(n, "Y") || !strcmp(n, "Z")) *a = kiln_arg_ptr(b->out[set]);
        else if (!strcmp(n, "n")) *a = kiln_arg_i32((int32_t)b->o->n);
        else if (!strcmp(n, "n_cols") || !strcmp(n, "stride_x") || !strcmp(n, "stride_y"))
            *a = kiln_arg_i32((int32_t)b->o->cols);
        else return kiln_set_error(KILN_ERR_ARGS, "kiln-bench does not know parameter '%s' of %s", n, ki->name);
        if (ki->params[i].kind != a->kind && !(a->kind == KILN_PARAM_I32 && ki->params[i].kind == KILN_PARAM_I64))
            return kiln_set_error(KILN_ERR_ARGS, "parameter '%s' of %s has an unexpected type", n, ki->name);
        if (ki->params[i].kind == KILN_PARAM_I64) *a = kiln_arg_i64(a->v.i);
    }
    return KILN_OK;
}

/* Allocates every set, uploads its inputs (host0 keeps set 0's for the check),
 * poisons the outputs (0xFF bytes are NaN in f32 and f16). */
static KilnStatus setup(Bench *b, void *host0[2])
{
    size_t bytes = b->elems * b->esize;
    void *tmp = malloc(bytes);
    KilnStatus st = tmp ? KILN_OK : kiln_set_error(KILN_ERR_USAGE, "out of host memory (%zu bytes)", bytes);
    for (int s = 0; s < b->nsets && !st; s++) {
        for (int w = 0; w < b->nin && !st; w++) {
            void *h = s == 0 ? host0[w] : tmp;
            fill_host(b, s, w, h);
            st = kiln_malloc(b->dev, bytes, &b->in[s][w]);
            if (!st) st = kiln_memcpy_htod(b->dev, b->in[s][w], h, bytes);
        }
        if (!st) st = kiln_malloc(b->dev, bytes, &b->out[s]);
        if (!st) st = kiln_memset(b->dev, b->out[s], 0xFF, bytes);
        if (!st) st = make_args(b, s);
    }
    free(tmp);
    return st;
}

static void teardown(Bench *b)
{
    for (int s = 0; s < b->nsets; s++) {
        for (int w = 0; w < 2; w++) kiln_free(b->dev, b->in[s][w]);
        kiln_free(b->dev, b->out[s]);
    }
    kiln_free(b->dev, b->scratch);
}

static double host_value(const Bench *b, const void *h, size_t i)
{
    return b->esize == 2 ? (double)kiln_f16_to_f32(((const uint16_t *)h)[i]) : (double)((const float *)h)[i];
}

/* vec add: the device result must equal the host's f32 sum bit for bit
 * (max_err is then 0; NaN poison left behind counts as an infinite error). */
static double check_vec_add(const Bench *b, void *const host0[2], const float *got)
{
    const float *x = host0[0], *y = host0[1];
    double worst = 0;
    for (size_t i = 0; i < b->elems; i++) {
        float want = x[i] + y[i];
        double e = got[i] == want ? 0.0 : isnan(got[i]) ? INFINITY : fabs((double)got[i] - want);
        if (e > worst) worst = e;
    }
    return worst;
}

/* softmax: the largest |got - ref| / ref over all elements, ref in float64 from
 * the (stored) inputs; every ref is > 0 (inputs lie in [-4, 4)). In f16 the
 * denominator is at least 2^-14 (the smallest normal f16): below it the output
 * is subnormal and its rounding error is absolute, not relative. */
static double check_softmax(const Bench *b, void *const host0[2], const void *got)
{
    size_t rows = (size_t)b->o->rows, cols = (size_t)b->o->cols;
    double worst = 0, den_min = b->esize == 2 ? 0x1p-14 : 0.0;
    for (size_t r = 0; r < rows; r++) {
        double mx = -INFINITY, sum = 0;
        for (size_t c = 0; c < cols; c++) mx = fmax(mx, host_value(b, host0[0], r * cols + c));
        for (size_t c = 0; c < cols; c++) sum += exp(host_value(b, host0[0], r * cols + c) - mx);
        for (size_t c = 0; c < cols; c++) {
            double ref = exp(host_value(b, host0[0], r * cols + c) - mx) / sum;
            double g = host_value(b, got, r * cols + c);
            double e = isnan(g) ? INFINITY : fabs(g - ref) / fmax(ref, den_min);
            if (e > worst) worst = e;
        }
    }
    return worst;
}

/* One launch of set 0, synchronised, read back and compared. */
static KilnStatus run_check(Bench *b, void *const host0[2], double *max_err)
{
    size_t bytes = b->elems * b->esize;
    void *got = malloc(bytes);
    if (!got) return kiln_set_error(KILN_ERR_USAGE, "out of host memory (%zu bytes)", bytes);
    KilnStatus st = kiln_launch(b->k, b->grid, NULL, b->args[0], b->ki->nparams);
    if (!st) st = kiln_synchronize(b->dev);
    if (!st) st = kiln_memcpy_dtoh(b->dev, got, b->out[0], bytes);
    if (!st) *max_err = b->o->op == OP_VEC_ADD ? check_vec_add(b, host0, got) : check_softmax(b, host0, got);
    free(got);
    return st;
}

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

/* Queue-ahead: a launch whose start event the GPU reaches before the host has
 * queued the kernel would time the host's launch overhead too (kernels of a few
 * microseconds are that short). So before the timed launches the GPU gets
 * memsets of a scratch buffer, enough to last 1.5x the host time it takes to
 * queue them all (measured on the warm-up launches): by the time it reaches the
 * first start event, every launch is already queued. memsets of device memory
 * do not block the host; if a driver made them, only this protection is lost. */
static KilnStatus queue_ahead(Bench *b, double host_ms_per_launch, double *busy_ms)
{
    size_t bytes = (size_t)256 << 20;
    KilnDevPtr scratch = 0;
    KilnEvent *e0 = NULL, *e1 = NULL;
    float one = 0;
    KilnStatus st = kiln_malloc(b->dev, bytes, &scratch);
    if (st) { kiln_clear_error(); *busy_ms = 0; return KILN_OK; }   /* no room: go without */
    if (!st) st = kiln_event_create(b->dev, &e0);
    if (!st) st = kiln_event_create(b->dev, &e1);
    if (!st) st = kiln_event_record(e0, NULL);
    if (!st) st = kiln_memset(b->dev, scratch, 0x5A, bytes);
    if (!st) st = kiln_event_record(e1, NULL);
    if (!st) st = kiln_event_synchronize(e1);
    if (!st) st = kiln_event_elapsed_ms(e0, e1, &one);
    double want = 1.5 * host_ms_per_launch * b->o->reps;
    int k = one > 0 ? (int)ceil(want / one) : 1;
    k = k < 1 ? 1 : k > 2000 ? 2000 : k;
    for (int i = 0; i < k && !st; i++) st = kiln_memset(b->dev, scratch, (uint8_t)i, bytes);
    *busy_ms = k * (double)one;
    kiln_event_destroy(e0);
    kiln_event_destroy(e1);
    /* freeing now would wait for the memsets: the scratch goes after the timing */
    b->scratch = scratch;
    return st;
}

/* Warm-up launches, then `reps` launches rotating over the sets, each between
 * its own pair of events, all queued (behind queue_ahead's memsets) before one
 * synchronisation. */
static KilnStatus time_kernel(Bench *b, float *median_ms, float *min_ms, double *busy_ms)
{
    int reps = b->o->reps;
    KilnEvent **ev = calloc((size_t)reps * 2, sizeof *ev);
    float *t = calloc((size_t)reps, sizeof *t);
    KilnStatus st = ev && t ? KILN_OK : kiln_set_error(KILN_ERR_USAGE, "out of host memory");
    for (int i = 0; i < 2 * reps && !st; i++) st = kiln_event_create(b->dev, &ev[i]);
    /* the warm-up also measures what queueing one timed launch costs the host */
    double t0 = now_ms();
    for (int i = 0; i < b->o->warmup && !st; i++) {
        st = kiln_event_record(ev[0], NULL);
        if (!st) st = kiln_launch(b->k, b->grid, NULL, b->args[i % b->nsets], b->ki->nparams);
        if (!st) st = kiln_event_record(ev[1], NULL);
    }
    double host_ms = b->o->warmup ? (now_ms() - t0) / b->o->warmup : 0.02;
    if (!st) st = kiln_synchronize(b->dev);
    *busy_ms = 0;
    if (!st && !b->o->no_queue_ahead) st = queue_ahead(b, host_ms, busy_ms);
    for (int i = 0; i < reps && !st; i++) {
        st = kiln_event_record(ev[2 * i], NULL);
        if (!st) st = kiln_launch(b->k, b->grid, NULL, b->args[i % b->nsets], b->ki->nparams);
        if (!st) st = kiln_event_record(ev[2 * i + 1], NULL);
    }
    if (!st) st = kiln_synchronize(b->dev);
    for (int i = 0; i < reps && !st; i++) st = kiln_event_elapsed_ms(ev[2 * i], ev[2 * i + 1], &t[i]);
    if (!st) {
        qsort(t, (size_t)reps, sizeof *t, cmp_float);
        *median_ms = reps % 2 ? t[reps / 2] : 0.5f * (t[reps / 2 - 1] + t[reps / 2]);
        *min_ms = t[0];
    }
    for (int i = 0; ev && i < 2 * reps; i++) kiln_event_destroy(ev[i]);
    free(ev);
    free(t);
    return st;
}

/* ---------------------------------------------------------------- output */

static void json_string(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') printf("\\%c", c);
        else if (c < 0x20) printf("\\u%04x", c);
        else putchar(c);
    }
    putchar('"');
}

static void shape_text(const Opts *o, char *buf, size_t n)
{
    if (o->op == OP_VEC_ADD) snprintf(buf, n, "%lld", o->n);
    else snprintf(buf, n, "%lldx%lld", o->rows, o->cols);
}

static void print_result(const Bench *b, const KilnDeviceInfo *di, float ms, float min_ms, double busy_ms,
                         double err, int ok)
{
    const Opts *o = b->o;
    char shape[64];
    shape_text(o, shape, sizeof shape);
    printf("{\"kernel\": ");
    json_string(o->op_name);
    printf(", \"shape\": \"%s\", \"dtype\": \"%s\", \"ms\": %.6f, \"min_ms\": %.6f, \"gbps\": %.2f, "
           "\"bytes\": %.0f, \"max_err\": %.3g, \"ok\": %s, \"block\": %d, \"num_warps\": %d, "
           "\"reps\": %d, \"warmup\": %d, \"sets\": %d, \"queued_ahead_ms\": %.3f, \"device\": ",
           shape, o->dtype, ms, min_ms, ms > 0 ? b->bytes / (ms * 1e-3) / 1e9 : 0.0, b->bytes,
           isinf(err) ? 1e300 : err, ok ? "true" : "false", o->block, b->ki->num_warps, o->reps, o->warmup,
           b->nsets, busy_ms);
    json_string(di->name);
    printf(", \"arch\": \"%s\"}\n", di->arch);
    fflush(stdout);
}

/* ---------------------------------------------------------------- main */

typedef struct Prog {
    char path[4096];
    char *src;
    char block[16];
    KilnDefine def;
    KilnCompileOptions co;
} Prog;

static int prog_load(Prog *p, const Opts *o)
{
    const char *rel = o->op == OP_VEC_ADD ? "examples/vec_add.tile" : "examples/softmax.tile";
    if (o->root) snprintf(p->path, sizeof p->path, "%s/%s", o->root, rel);
    else if (kiln_data_path(rel, p->path, sizeof p->path) != KILN_OK) {
        fprintf(stderr, "kiln-bench: %s (give the source tree with --root)\n", kiln_last_error());
        return -1;
    }
    p->src = slurp(p->path);
    if (!p->src) {
        fprintf(stderr, "kiln-bench: cannot read %s: %s (give the source tree with --root)\n", p->path,
                strerror(errno));
        return -1;
    }
    snprintf(p->block, sizeof p->block, "%d", o->block);
    p->def = (KilnDefine){"BLOCK", p->block};
    const char *kernel = o->op == OP_VEC_ADD ? "vec_add" : strcmp(o->dtype, "f16") ? "softmax" : "softmax_f16";
    p->co = (KilnCompileOptions){.kernel = kernel, .defines = &p->def, .ndefines = 1, .num_warps = o->warps};
    return 0;
}

static int compile_only(Prog *p, const Opts *o)
{
    KilnCompileResult r;
    memset(&r, 0, sizeof r);
    p->co.emit = KILN_EMIT_PTX;
    p->co.arch = o->arch;
    KilnStatus st = kiln_compile(p->path, p->src, &p->co, &r);
    if (st) {
        fprintf(stderr, "%s", r.diagnostics ? r.diagnostics : "");
        fail_status("compile", st);
    } else {
        printf("{\"kernel\": \"%s\", \"compile_only\": true, \"arch\": \"%s\", \"block\": %d, "
               "\"num_warps\": %d, \"smem_bytes\": %d, \"ptx_bytes\": %zu}\n",
               o->op_name, o->arch, o->block, r.nkernels ? r.kernels[0].num_warps : 0,
               r.nkernels ? r.kernels[0].smem_bytes : 0, r.output_size);
    }
    kiln_compile_result_free(&r);
    return st ? 1 : 0;
}

static int run_bench(Prog *p, const Opts *o, KilnDevice *dev)
{
    Bench *b = calloc(1, sizeof *b);
    KilnModule *mod = NULL;
    KilnDeviceInfo di;
    void *host0[2] = {NULL, NULL};
    double err = INFINITY;
    float ms = 0, min_ms = 0;
    double busy_ms = 0;
    int rc = 1;
    if (!b) { fprintf(stderr, "kiln-bench: out of host memory\n"); return 1; }
    *b = (Bench){.o = o, .dev = dev, .esize = strcmp(o->dtype, "f16") ? 4 : 2};
    b->nin = o->op == OP_VEC_ADD ? 2 : 1;
    b->elems = o->op == OP_VEC_ADD ? (size_t)o->n : (size_t)o->rows * (size_t)o->cols;
    b->bytes = (double)b->elems * (double)b->esize * (o->op == OP_VEC_ADD ? 3 : 2);
    b->grid[0] = o->op == OP_VEC_ADD ? (int)((o->n + o->block - 1) / o->block) : (int)o->rows;
    b->grid[1] = b->grid[2] = 1;
    KilnStatus st = kiln_device_info(dev, &di);
    if (st) { fail_status("device info", st); goto done; }
    /* any stage but PTX/CUBIN means "auto": a cubin when ptxas is there, else PTX */
    p->co.emit = KILN_EMIT_AST;
    if ((st = kiln_module_compile(dev, p->path, p->src, &p->co, &mod)) ||
        (st = kiln_kernel_get(mod, NULL, &b->k))) {   /* a GPU module holds exactly one kernel */
        fail_status("compile", st);
        goto done;
    }
    b->ki = kiln_kernel_info(b->k);
    /* a set (inputs and output) holds exactly the bytes counted */
    b->nsets = choose_sets(o, b->bytes, (double)di.total_mem);
    for (int w = 0; w < b->nin; w++) host0[w] = malloc(b->elems * b->esize);
    if (!host0[0] || (b->nin == 2 && !host0[1])) { fprintf(stderr, "kiln-bench: out of host memory\n"); goto done; }
    if ((st = setup(b, host0))) { fail_status("setup", st); goto done; }
    if ((st = run_check(b, host0, &err))) { fail_status("check run", st); goto done; }
    if ((st = time_kernel(b, &ms, &min_ms, &busy_ms))) { fail_status("timing", st); goto done; }
    /* f16: one rounding of the output is 2^-11 relative; f32: exp/div/sum errors are ~1e-6 */
    double tol = o->op == OP_VEC_ADD ? 0.0 : b->esize == 2 ? 1e-3 : 1e-5;
    int ok = err <= tol;
    print_result(b, &di, ms, min_ms, busy_ms, err, ok);
    if (!ok) fprintf(stderr, "kiln-bench: WRONG RESULT: max error %.3g > %.3g\n", err, tol);
    rc = ok ? 0 : 1;
done:
    teardown(b);
    kiln_module_free(mod);
    free(host0[0]);
    free(host0[1]);
    free(b);
    return rc;
}

int main(int argc, char **argv)
{
    Opts o;
    int prc = parse_opts(argc, argv, &o);
    if (prc) return prc == 1 ? 0 : prc;
    Prog p;
    memset(&p, 0, sizeof p);
    if (prog_load(&p, &o)) return 1;
    if (o.compile_only) {
        int rc = compile_only(&p, &o);
        free(p.src);
        return rc;
    }
    KilnDevice *dev = NULL;
    KilnStatus st = kiln_init(&dev, 0);
    if (st) {
        /* one line, whatever the reason (no driver, no device, a driver error at init) */
        const char *msg = kiln_last_error();
        if (!msg || !*msg) msg = kiln_status_name(st);
        fprintf(stderr, "%s%s\n", strncmp(msg, "no GPU", 6) ? "no GPU: " : "", msg);
        free(p.src);
        return 1;
    }
    int rc = run_bench(&p, &o, dev);
    kiln_shutdown(dev);
    free(p.src);
    return rc;
}
