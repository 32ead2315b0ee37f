/* kiln_bench_attn.c — times Kiln's FlashAttention forward on the GPU through
 * the public API (kiln.h) and prints one JSON object per line.
 *
 * Used by bench_attention.py (one process per (dtype, head dim, causal,
 * schedule), many sequence lengths each, so the program compiles once), and by
 * hand:
 *
 *   kiln-bench-attn --src lang/lib/attention_fwd.tile --dtype f16 --head-dim 128 \
 *       --heads 16 --tokens 16384 --seqlens 1024,4096 [--causal]
 *
 * Inputs are filled deterministically (uniform in [-1, 1)), or read from raw
 * files (--in DIR: q.bin, k.bin, v.bin, dense in --layout, in the dtype), so
 * the Python side can compare O (--out DIR: o.bin, lse.bin) with its own
 * reference. TFLOP/s uses FlashAttention's convention: 4 * B * H * Sq * Sk * D
 * (halved when causal, for Sq == Sk).
 * --compile-bench N: also times source -> PTX (kiln_compile, no cache), PTX ->
 * loaded module (kiln_module_load_ptx: the driver's JIT), source -> cubin
 * (ptxas included; -1 without ptxas) and cubin -> loaded module, and the
 * runtime's cached path (kiln_module_compile hitting the on-disk cache); -1
 * for a load the driver refused. Medians of N; *_first_ms: the first load.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kiln.h"
#include "../attn_ref.h"

typedef struct Opts {
    const char *src_path, *dtype, *layout, *in_dir, *out_dir, *seqlens;
    int batch, heads, heads_kv, tokens, seqlen_k, head_dim, causal;
    int block_m, block_n, warps, stages, compile_reps, no_wgmma, pingpong, mbarrier, overlap, tma, warp_spec, lean_producer;
    int persistent, longest_first;
    double min_ms, scale;
} Opts;

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
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

static void json_error(const char *what, int seqlen, KilnStatus st)
{
    /* keep the message one JSON string: replace quotes, backslashes and newlines */
    char msg[1024];
    snprintf(msg, sizeof msg, "%s: %s: %s", what, kiln_status_name(st), kiln_last_error());
    for (char *c = msg; *c; c++)
        if (*c == '"' || *c == '\\' || *c == '\n' || *c == '\t') *c = ' ';
    printf("{\"provider\": \"kiln\", \"seqlen\": %d, \"error\": \"%s\"}\n", seqlen, msg);
    fflush(stdout);
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    for (size_t got; buf && (got = fread(buf + n, 1, cap - n - 1, f)) > 0;) {
        n += got;
        if (n + 1 == cap) buf = realloc(buf, cap *= 2);
    }
    fclose(f);
    if (buf) buf[n] = 0;
    return buf;
}

static int usage(void)
{
    fprintf(stderr,
            "usage: kiln_bench_attn --src FILE --head-dim D --heads H (--batch B | --tokens T) --seqlens N[,N...]\n"
            "       [--dtype f16|bf16] [--heads-kv HK] [--seqlen-k NK] [--causal] [--layout bshd|bhsd]\n"
            "       [--block-m BM] [--block-n BN] [--warps W] [--stages S] [--scale X] [--no-wgmma] [--pingpong] [--mbarrier] [--tma]\n"
            "       [--overlap] [--warp-specialize] [--lean-producer]\n"
            "       [--min-ms MS (0: one timed launch)]\n"
            "       [--in DIR] [--out DIR] [--compile-bench N]\n");
    return 2;
}

static int parse_opts(int argc, char **argv, Opts *o)
{
    *o = (Opts){.dtype = "f16", .layout = "bshd", .heads_kv = 0, .block_m = 128, .block_n = 64,
                .min_ms = 50, .head_dim = 64, .heads = 16};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
#define STR(flag, field) if (!strcmp(a, flag) && v) { o->field = v; i++; continue; }
#define INT(flag, field) if (!strcmp(a, flag) && v) { o->field = atoi(v); i++; continue; }
#define DBL(flag, field) if (!strcmp(a, flag) && v) { o->field = atof(v); i++; continue; }
        STR("--src", src_path) STR("--dtype", dtype) STR("--layout", layout) STR("--in", in_dir)
        STR("--out", out_dir) STR("--seqlens", seqlens)
        INT("--batch", batch) INT("--heads", heads) INT("--heads-kv", heads_kv) INT("--tokens", tokens)
        INT("--seqlen-k", seqlen_k) INT("--head-dim", head_dim) INT("--block-m", block_m)
        INT("--block-n", block_n) INT("--warps", warps) INT("--stages", stages)
        INT("--compile-bench", compile_reps)
        DBL("--min-ms", min_ms) DBL("--scale", scale)
#undef STR
#undef INT
#undef DBL
        if (!strcmp(a, "--causal")) { o->causal = 1; continue; }
        if (!strcmp(a, "--no-wgmma")) { o->no_wgmma = 1; continue; }
        if (!strcmp(a, "--pingpong")) { o->pingpong = 1; continue; }   /* warpgroup ping-pong (8 warps, sm_90a) */
        if (!strcmp(a, "--mbarrier")) { o->mbarrier = 1; continue; }   /* mbarrier stage hand-off */
        if (!strcmp(a, "--tma")) { o->tma = 1; continue; }             /* TMA copies of K/V (implies mbarrier) */
        if (!strcmp(a, "--overlap")) { o->overlap = 1; continue; }     /* next Q K^T in flight during the softmax (sm_90a) */
        if (!strcmp(a, "--warp-specialize")) { o->warp_spec = 1; continue; }   /* a producer warpgroup (sm_90a) */
        if (!strcmp(a, "--lean-producer")) { o->lean_producer = 1; continue; }   /* TMA producer at 24 registers */
        if (!strcmp(a, "--persistent")) { o->persistent = 1; continue; }   /* resident programs loop over the tiles */
        if (!strcmp(a, "--longest-first")) { o->longest_first = 1; continue; }   /* ... heavy query blocks first */
        fprintf(stderr, "kiln_bench_attn: unknown or incomplete option '%s'\n", a);
        return usage();
    }
    if (!o->src_path || !o->seqlens || (!o->batch && !o->tokens)) return usage();
    if (strcmp(o->dtype, "f16") && strcmp(o->dtype, "bf16")) return usage();
    if (!o->heads_kv) o->heads_kv = o->heads;
    return 0;
}

/* ---- one compiled specialisation ---- */

typedef struct Prog {
    char *src;
    KilnDefine defs[5];
    char dbuf[16], bm[16], bn[16];
    KilnCompileOptions co;
} Prog;

static void prog_init(Prog *p, const Opts *o)
{
    snprintf(p->dbuf, sizeof p->dbuf, "%d", o->head_dim);
    snprintf(p->bm, sizeof p->bm, "%d", o->block_m);
    snprintf(p->bn, sizeof p->bn, "%d", o->block_n);
    p->defs[0] = (KilnDefine){"HEAD_DIM", p->dbuf};
    p->defs[1] = (KilnDefine){"BLOCK_M", p->bm};
    p->defs[2] = (KilnDefine){"BLOCK_N", p->bn};
    p->defs[3] = (KilnDefine){"CAUSAL", o->causal ? "true" : "false"};
    p->defs[4] = (KilnDefine){"PLAIN_SCORES", "true"};  /* as kiln_attention_fwd compiles it */
    p->co = (KilnCompileOptions){.kernel = strcmp(o->dtype, "f16") ? "attn_fwd_bf16" : "attn_fwd_f16",
                                 .defines = p->defs, .ndefines = 5, .num_warps = o->warps,
                                 .num_stages = o->stages, .emit = KILN_EMIT_PTX, .schedule.no_wgmma = o->no_wgmma,
                                 .schedule.pingpong = o->pingpong, .schedule.mbarrier = o->mbarrier, .schedule.overlap = o->overlap,
                                 .schedule.tma = o->tma, .schedule.warp_specialize = o->warp_spec,
                                 .schedule.lean_producer = o->lean_producer, .schedule.persistent = o->persistent,
                                 .schedule.longest_first = o->longest_first};
}

/* Median wall time of `reps` loads of one module image (PTX: the driver
 * JIT-compiles it, its own compute cache may serve the repeats; cubin: a load). */
static double load_ms(KilnDevice *dev, const KilnCompileResult *r, int cubin, int n, double *first)
{
    double t[64];
    for (int i = 0; i < n; i++) {
        KilnModule *m = NULL;
        double t0 = now_ms();
        KilnStatus st = cubin ? kiln_module_load_cubin(dev, r->output, r->output_size, r->kernels, 1, &m)
                              : kiln_module_load_ptx(dev, r->output, r->kernels, 1, &m);
        t[i] = now_ms() - t0;
        kiln_module_free(m);
        if (st != KILN_OK) return -1;
    }
    *first = t[0];
    return median(t, n);
}

/* Median wall time of source -> PTX (no cache involved), of PTX -> loaded
 * module, of source -> cubin (ptxas included, when there is one) and cubin ->
 * loaded module, and of the runtime's cache-hit path; printed as one JSON line. */
static void compile_bench(KilnDevice *dev, Prog *p, const Opts *o)
{
    int n = o->compile_reps > 64 ? 64 : o->compile_reps;
    double t_ptx[64], t_cubin[64], t_hit[64];
    KilnCompileOptions co = p->co;
    co.arch = NULL;
    KilnDeviceInfo info;
    if (kiln_device_info(dev, &info) == KILN_OK) co.arch = info.arch;
    KilnCompileResult ptx, cubin;
    memset(&ptx, 0, sizeof ptx);
    memset(&cubin, 0, sizeof cubin);
    int have_cubin = 1;
    for (int i = 0; i < n; i++) {
        KilnCompileResult *r = i + 1 == n ? &ptx : &(KilnCompileResult){0};
        double t0 = now_ms();
        KilnStatus st = kiln_compile(o->src_path, p->src, &co, r);
        t_ptx[i] = now_ms() - t0;
        if (st != KILN_OK) {
            fprintf(stderr, "%s", r->diagnostics ? r->diagnostics : "");
            kiln_compile_result_free(r);
            json_error("compile", 0, st);
            return;
        }
        if (r != &ptx) kiln_compile_result_free(r);
    }
    co.emit = KILN_EMIT_CUBIN;
    for (int i = 0; have_cubin && i < n; i++) {
        KilnCompileResult *r = i + 1 == n ? &cubin : &(KilnCompileResult){0};
        double t0 = now_ms();
        have_cubin = kiln_compile(o->src_path, p->src, &co, r) == KILN_OK; /* no ptxas: PTX only */
        t_cubin[i] = now_ms() - t0;
        if (r != &cubin || !have_cubin) kiln_compile_result_free(r);
    }
    double ptx_first = -1, cubin_first = -1;
    double ptx_load = load_ms(dev, &ptx, 0, n, &ptx_first);
    double cubin_load = have_cubin ? load_ms(dev, &cubin, 1, n, &cubin_first) : -1;
    kiln_compile_result_free(&ptx);
    kiln_compile_result_free(&cubin);
    /* the cached path: one call to fill the cache, then hits */
    KilnModule *m = NULL;
    KilnStatus st = kiln_module_compile(dev, o->src_path, p->src, &p->co, &m);
    kiln_module_free(m);
    for (int i = 0; st == KILN_OK && i < n; i++) {
        double t0 = now_ms();
        st = kiln_module_compile(dev, o->src_path, p->src, &p->co, &m);
        t_hit[i] = now_ms() - t0;
        kiln_module_free(m);
    }
    if (st != KILN_OK) { json_error("module_compile", 0, st); return; }
    printf("{\"provider\": \"kiln\", \"compile\": true, \"reps\": %d, \"compile_ptx_ms\": %.3f, "
           "\"ptx_load_ms\": %.3f, \"ptx_load_first_ms\": %.3f, \"compile_cubin_ms\": %.3f, "
           "\"cubin_load_ms\": %.3f, \"cubin_load_first_ms\": %.3f, \"cache_hit_ms\": %.3f, \"cache_enabled\": %d}\n",
           n, median(t_ptx, n), ptx_load, ptx_first, have_cubin ? median(t_cubin, n) : -1.0, cubin_load, cubin_first,
           median(t_hit, n), kiln_cache_enabled());
    fflush(stdout);
}

/* ---- buffers ---- */

typedef struct Bufs {
    KilnDevPtr q, k, v, o, lse;
    size_t nq, nkv, nlse;
} Bufs;

static int read_raw(const char *dir, const char *name, void *dst, size_t bytes)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    size_t got = fread(dst, 1, bytes, f);
    fclose(f);
    return got == bytes ? 0 : -1;
}

static int write_raw(const char *dir, const char *name, const void *src, size_t bytes)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t put = fwrite(src, 1, bytes, f);
    return (fclose(f) == 0 && put == bytes) ? 0 : -1;
}

/* Host data for one input: read from --in, else deterministic random values. */
static KilnStatus upload(KilnDevice *dev, const Opts *o, AttnDtype t, const char *file, size_t n,
                         uint64_t seed, KilnDevPtr dst)
{
    size_t bytes = n * attn_dtype_size(t);
    void *h = malloc(bytes ? bytes : 1);
    if (!h) return kiln_set_error(KILN_ERR_USAGE, "out of host memory (%zu bytes)", bytes);
    if (o->in_dir) {
        if (read_raw(o->in_dir, file, h, bytes)) {
            free(h);
            return kiln_set_error(KILN_ERR_IO, "cannot read %zu bytes from %s/%s", bytes, o->in_dir, file);
        }
    } else {
        attn_fill_random(t, h, n, seed, -1.0, 1.0);
    }
    KilnStatus st = kiln_memcpy_htod(dev, dst, h, bytes);
    free(h);
    return st;
}

static KilnStatus alloc_all(KilnDevice *dev, const AttnProblem *p, const Opts *o, Bufs *b)
{
    memset(b, 0, sizeof *b);
    size_t es = attn_dtype_size(p->dtype);
    b->nq = attn_numel_q(p);
    b->nkv = attn_numel_kv(p);
    b->nlse = (size_t)p->batch * p->heads_q * p->seqlen_q;
    KilnStatus st;
    if ((st = kiln_malloc(dev, b->nq * es, &b->q)) || (st = kiln_malloc(dev, b->nkv * es, &b->k)) ||
        (st = kiln_malloc(dev, b->nkv * es, &b->v)) || (st = kiln_malloc(dev, b->nq * es, &b->o)) ||
        (st = kiln_malloc(dev, b->nlse * 4, &b->lse)))
        return st;
    if ((st = upload(dev, o, p->dtype, "q.bin", b->nq, 1, b->q)) ||
        (st = upload(dev, o, p->dtype, "k.bin", b->nkv, 2, b->k)) ||
        (st = upload(dev, o, p->dtype, "v.bin", b->nkv, 3, b->v)))
        return st;
    /* poison the outputs: 0xFF bytes are NaN in f16, bf16 and f32 */
    if ((st = kiln_memset(dev, b->o, 0xFF, b->nq * es)) || (st = kiln_memset(dev, b->lse, 0xFF, b->nlse * 4)))
        return st;
    return KILN_OK;
}

static void free_all(KilnDevice *dev, Bufs *b)
{
    kiln_free(dev, b->q); kiln_free(dev, b->k); kiln_free(dev, b->v);
    kiln_free(dev, b->o); kiln_free(dev, b->lse);
}

/* Arguments by parameter name, in the kernel's own order. */
static KilnStatus make_args(const KilnKernelInfo *ki, const AttnProblem *p, const Bufs *b, KilnArg *args)
{
    const int64_t *st[4] = {p->q_stride, p->k_stride, p->v_stride, p->o_stride};
    const char *tn = "qkvo";
    for (int i = 0; i < ki->nparams; i++) {
        const char *n = ki->params[i].name;
        if (!strcmp(n, "Q")) args[i] = kiln_arg_ptr(b->q);
        else if (!strcmp(n, "K")) args[i] = kiln_arg_ptr(b->k);
        else if (!strcmp(n, "V")) args[i] = kiln_arg_ptr(b->v);
        else if (!strcmp(n, "O")) args[i] = kiln_arg_ptr(b->o);
        else if (!strcmp(n, "LSE")) args[i] = kiln_arg_ptr(b->lse);
        else if (!strcmp(n, "heads")) args[i] = kiln_arg_i32(p->heads_q);
        else if (!strcmp(n, "heads_kv")) args[i] = kiln_arg_i32(p->heads_kv);
        else if (!strcmp(n, "seqlen_q")) args[i] = kiln_arg_i32(p->seqlen_q);
        else if (!strcmp(n, "seqlen_k")) args[i] = kiln_arg_i32(p->seqlen_k);
        else if (!strcmp(n, "sm_scale")) args[i] = kiln_arg_f32((float)p->scale);
        else if (!strncmp(n, "stride_", 7) && strlen(n) == 9 && strchr(tn, n[7])) {
            int t = (int)(strchr(tn, n[7]) - tn);
            int j = n[8] == 'b' ? 0 : n[8] == 'h' ? 1 : 2;
            args[i] = ki->params[i].kind == KILN_PARAM_I32 ? kiln_arg_i32((int32_t)st[t][j])
                                                          : kiln_arg_i64(st[t][j]);
        } else {
            return kiln_set_error(KILN_ERR_ARGS, "kiln_bench_attn does not know parameter '%s'", n);
        }
    }
    return KILN_OK;
}

/* Times one sequence length and prints its JSON line. */
static KilnStatus bench_one(KilnDevice *dev, KilnKernel *k, const Opts *o, int seqlen)
{
    AttnProblem p = {.batch = o->batch ? o->batch : o->tokens / seqlen, .heads_q = o->heads,
                     .heads_kv = o->heads_kv, .seqlen_q = seqlen,
                     .seqlen_k = o->seqlen_k ? o->seqlen_k : seqlen, .head_dim = o->head_dim,
                     .causal = o->causal, .scale = o->scale > 0 ? o->scale : 1.0 / sqrt(o->head_dim),
                     .dtype = strcmp(o->dtype, "f16") ? ATTN_BF16 : ATTN_F16};
    if (p.batch < 1) p.batch = 1;
    attn_set_strides(&p, strcmp(o->layout, "bhsd") ? ATTN_BSHD : ATTN_BHSD);
    const KilnKernelInfo *ki = kiln_kernel_info(k);
    Bufs b;
    KilnArg args[64];
    KilnStatus st = ki->nparams > 64 ? kiln_set_error(KILN_ERR_ARGS, "too many parameters") : KILN_OK;
    if (!st) st = alloc_all(dev, &p, o, &b);
    if (!st) st = make_args(ki, &p, &b, args);
    int grid[3] = {(p.seqlen_q + o->block_m - 1) / o->block_m, p.batch * p.heads_q, 1};
    float est = 0, ms = 0;
    int reps = 1;
    if (o->min_ms > 0) {
        /* a short run to size the measurement: about min_ms of kernel time */
        if (!st) st = kiln_time_launch(k, grid, NULL, args, ki->nparams, 3, &est);
        reps = est > 0 ? (int)(o->min_ms / est) : 100;
        int floor = est > 200 ? 2 : 5;   /* a slow kernel: a few launches tell enough */
        reps = reps < floor ? floor : reps > 1000 ? 1000 : reps;
    }
    if (!st) st = kiln_time_launch(k, grid, NULL, args, ki->nparams, reps, &ms);
    if (!st && o->out_dir) {
        size_t es = attn_dtype_size(p.dtype);
        void *h = malloc(b.nq * es + b.nlse * 4 + 1);
        st = kiln_memcpy_dtoh(dev, h, b.o, b.nq * es);
        if (!st) st = kiln_memcpy_dtoh(dev, (char *)h + b.nq * es, b.lse, b.nlse * 4);
        if (!st && (write_raw(o->out_dir, "o.bin", h, b.nq * es) ||
                    write_raw(o->out_dir, "lse.bin", (char *)h + b.nq * es, b.nlse * 4)))
            st = kiln_set_error(KILN_ERR_IO, "cannot write the outputs to %s", o->out_dir);
        free(h);
    }
    size_t es = attn_dtype_size(p.dtype);
    free_all(dev, &b);
    if (st) { json_error("run", seqlen, st); return st; }
    double flops = 4.0 * p.batch * p.heads_q * (double)p.seqlen_q * p.seqlen_k * p.head_dim;
    if (p.causal) flops *= 0.5;
    printf("{\"provider\": \"kiln\", \"dtype\": \"%s\", \"batch\": %d, \"heads\": %d, \"heads_kv\": %d, "
           "\"seqlen\": %d, \"seqlen_k\": %d, \"head_dim\": %d, \"causal\": %s, \"block_m\": %d, "
           "\"block_n\": %d, \"num_warps\": %d, \"num_stages\": %d, \"reps\": %d, \"ms\": %.5f, "
           "\"tflops\": %.2f, \"alloc_bytes\": %zu, \"extra_bytes\": %zu}\n",
           o->dtype, p.batch, p.heads_q, p.heads_kv, p.seqlen_q, p.seqlen_k, p.head_dim,
           p.causal ? "true" : "false", o->block_m, o->block_n, ki->num_warps, ki->num_stages, reps, ms,
           flops / (ms * 1e-3) / 1e12, (2 * b.nq + 2 * b.nkv) * es + b.nlse * 4, b.nq * es + b.nlse * 4);
    fflush(stdout);
    return KILN_OK;
}

int main(int argc, char **argv)
{
    Opts o;
    if (parse_opts(argc, argv, &o)) return 2;
    Prog p;
    prog_init(&p, &o);
    p.src = slurp(o.src_path);
    if (!p.src) { fprintf(stderr, "kiln_bench_attn: cannot read %s\n", o.src_path); return 1; }
    KilnDevice *dev = NULL;
    KilnModule *mod = NULL;
    KilnKernel *k = NULL;
    KilnStatus st = kiln_init(&dev, 0);
    if (st) { json_error("init", 0, st); free(p.src); return 1; }
    if (o.compile_reps > 0) compile_bench(dev, &p, &o);
    /* Any stage other than PTX/CUBIN means "auto" to kiln_module_compile: a cubin
     * when ptxas is there, else PTX for the driver to JIT. */
    p.co.emit = KILN_EMIT_AST;
    st = kiln_module_compile(dev, o.src_path, p.src, &p.co, &mod);
    if (!st) st = kiln_kernel_get(mod, NULL, &k);
    if (st) {
        json_error("compile", 0, st);
    } else {
        char *list = strdup(o.seqlens);
        for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ","))
            bench_one(dev, k, &o, atoi(tok));
        free(list);
    }
    kiln_module_free(mod);
    kiln_shutdown(dev);
    free(p.src);
    return st ? 1 : 0;
}
