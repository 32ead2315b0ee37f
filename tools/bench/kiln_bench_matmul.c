/* kiln_bench_matmul.c — times Kiln's tensor-core matmul (tools/bench/matmul_tc.tile)
 * on the GPU through the public API (kiln.h); one JSON object per line on stdout.
 *
 *   kiln-bench-matmul --src tools/bench/matmul_tc.tile --dtype f16 --size 4096 \
 *       [--m M --n N --k K] [--block-m 128 --block-n 128 --block-k 32] [--warps 4]
 *       [--stages 3] [--min-ms 100]
 *
 * A and B are row-major, uniform in [-1, 1) (deterministic), C is f32. The
 * result is checked on 512 sampled elements against a float64 dot product of
 * the same rounded inputs (max error relative to the largest |C|; reported as
 * "max_rel_err", and the run fails above 1e-2 — a wrong kernel is off by O(1)).
 * TFLOP/s = 2 M N K / median time. Used by bench_matmul.py. KILN_BENCH_MBARRIER=1 in
 * the environment compiles with the mbarrier stage hand-off (docs/tensor_cores.md 0b).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln.h"

typedef struct Opts {
    const char *src, *dtype;
    int m, n, k, bm, bn, bk, warps, stages;
    double min_ms;
} Opts;

static void json_error(const Opts *o, const char *what, KilnStatus st)
{
    char msg[1024];
    snprintf(msg, sizeof msg, "%s: %s: %s", what, kiln_status_name(st), kiln_last_error());
    for (char *c = msg; *c; c++)
        if (*c == '"' || *c == '\\' || *c == '\n' || *c == '\t') *c = ' ';
    printf("{\"provider\": \"kiln\", \"m\": %d, \"n\": %d, \"k\": %d, \"error\": \"%s\"}\n", o->m, o->n, o->k, msg);
    fflush(stdout);
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    if (buf) buf[n] = 0;
    fclose(f);
    return buf;
}

/* f16 / bf16 bits -> float (the public helpers: the bits the kernel reads). */
static float from_bits(uint16_t h, int bf) { return bf ? kiln_bf16_to_f32(h) : kiln_f16_to_f32(h); }

static int usage(void)
{
    fprintf(stderr, "usage: kiln_bench_matmul --src FILE [--dtype f16|bf16] (--size S | --m M --n N --k K)\n"
                    "       [--block-m BM] [--block-n BN] [--block-k BK] [--warps W] [--stages S] [--min-ms MS]\n");
    return 2;
}

static int parse(int argc, char **argv, Opts *o)
{
    *o = (Opts){.dtype = "f16", .bm = 128, .bn = 128, .bk = 32, .min_ms = 100};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) return usage();
        if (!strcmp(a, "--src")) o->src = v;
        else if (!strcmp(a, "--dtype")) o->dtype = v;
        else if (!strcmp(a, "--size")) o->m = o->n = o->k = atoi(v);
        else if (!strcmp(a, "--m")) o->m = atoi(v);
        else if (!strcmp(a, "--n")) o->n = atoi(v);
        else if (!strcmp(a, "--k")) o->k = atoi(v);
        else if (!strcmp(a, "--block-m")) o->bm = atoi(v);
        else if (!strcmp(a, "--block-n")) o->bn = atoi(v);
        else if (!strcmp(a, "--block-k")) o->bk = atoi(v);
        else if (!strcmp(a, "--warps")) o->warps = atoi(v);
        else if (!strcmp(a, "--stages")) o->stages = atoi(v);
        else if (!strcmp(a, "--min-ms")) o->min_ms = atof(v);
        else return usage();
        i++;
    }
    if (!o->src || o->m <= 0 || o->n <= 0 || o->k <= 0) return usage();
    if (strcmp(o->dtype, "f16") && strcmp(o->dtype, "bf16")) return usage();
    return 0;
}

int main(int argc, char **argv)
{
    Opts o;
    if (parse(argc, argv, &o)) return 2;
    int bf = !strcmp(o.dtype, "bf16");
    char *src = slurp(o.src);
    if (!src) {
        fprintf(stderr, "kiln_bench_matmul: cannot read %s\n", o.src);
        return 1;
    }
    KilnDevice *dev = NULL;
    KilnStatus st = kiln_init(&dev, 0);
    if (st != KILN_OK) {
        json_error(&o, "init", st);
        return 1;
    }
    char nb[16], kb[16], bmb[16], bnb[16], bkb[16];
    snprintf(nb, sizeof nb, "%d", o.n), snprintf(kb, sizeof kb, "%d", o.k);
    snprintf(bmb, sizeof bmb, "%d", o.bm), snprintf(bnb, sizeof bnb, "%d", o.bn), snprintf(bkb, sizeof bkb, "%d", o.bk);
    KilnDefine defs[5] = {{"N", nb}, {"K", kb}, {"BLOCK_M", bmb}, {"BLOCK_N", bnb}, {"BLOCK_K", bkb}};
    KilnCompileOptions co = {.kernel = bf ? "matmul_tc_bf16" : "matmul_tc_f16", .defines = defs, .ndefines = 5,
                             .num_warps = o.warps, .num_stages = o.stages};
    /* KILN_BENCH_MBARRIER=1: the mbarrier stage hand-off (KilnCompileOptions.mbarrier), so
     * a whole bench_matmul.py sweep can be repeated with it */
    const char *mb = getenv("KILN_BENCH_MBARRIER");
    co.mbarrier = mb && *mb && strcmp(mb, "0");
    KilnModule *mod = NULL;
    if ((st = kiln_module_compile(dev, o.src, src, &co, &mod)) != KILN_OK) {
        json_error(&o, "compile", st);
        return 1;
    }
    KilnKernel *k = NULL;
    kiln_kernel_get(mod, co.kernel, &k);
    size_t na = (size_t)o.m * o.k, nbel = (size_t)o.k * o.n, nc = (size_t)o.m * o.n;
    uint16_t *a = malloc(na * 2), *b = malloc(nbel * 2);
    float *c = malloc(nc * 4);
    uint64_t s = 0x2545F4914F6CDD1Dull;
    for (size_t i = 0; i < na + nbel; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        float f = (float)((s >> 40) & 0xffffff) / 8388608.0f - 1.0f;
        uint16_t h = bf ? kiln_f32_to_bf16(f) : kiln_f32_to_f16(f);
        if (i < na) a[i] = h;
        else b[i - na] = h;
    }
    KilnDevPtr da, db, dc;
    if (kiln_malloc(dev, na * 2, &da) || kiln_malloc(dev, nbel * 2, &db) || kiln_malloc(dev, nc * 4, &dc)) {
        json_error(&o, "malloc", KILN_ERR_DRIVER);
        return 1;
    }
    kiln_memcpy_htod(dev, da, a, na * 2);
    kiln_memcpy_htod(dev, db, b, nbel * 2);
    kiln_memset(dev, dc, 0xFF, nc * 4);
    KilnArg args[4] = {kiln_arg_ptr(da), kiln_arg_ptr(db), kiln_arg_ptr(dc), kiln_arg_i32(o.m)};
    int grid[3] = {(o.m + o.bm - 1) / o.bm, (o.n + o.bn - 1) / o.bn, 1};
    float one = 0;
    if ((st = kiln_time_launch(k, grid, NULL, args, 4, 1, &one)) != KILN_OK) {
        json_error(&o, "launch", st);
        return 1;
    }
    int reps = one > 0 ? (int)(o.min_ms / one) : 10;
    if (reps < 5) reps = 5;
    if (reps > 1000) reps = 1000;
    float ms = 0;
    if ((st = kiln_time_launch(k, grid, NULL, args, 4, reps, &ms)) != KILN_OK) {
        json_error(&o, "timing", st);
        return 1;
    }
    kiln_memcpy_dtoh(dev, c, dc, nc * 4);
    /* 512 sampled elements against float64. */
    double worst = 0, maxref = 0;
    for (int t = 0; t < 512; t++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        size_t i = (s >> 11) % (size_t)o.m, j = (s >> 37) % (size_t)o.n;
        double ref = 0;
        for (int kk = 0; kk < o.k; kk++) ref += (double)from_bits(a[i * o.k + kk], bf) * from_bits(b[(size_t)kk * o.n + j], bf);
        double d = fabs((double)c[i * o.n + j] - ref);
        if (!(d <= worst)) worst = d;
        if (fabs(ref) > maxref) maxref = fabs(ref);
    }
    double rel = worst / (maxref > 1 ? maxref : 1);
    double tflops = 2.0 * o.m * o.n * o.k / (ms * 1e-3) / 1e12;
    printf("{\"provider\": \"kiln\", \"dtype\": \"%s\", \"m\": %d, \"n\": %d, \"k\": %d, \"block_m\": %d, "
           "\"block_n\": %d, \"block_k\": %d, \"warps\": %d, \"stages\": %d, \"smem_bytes\": %d, \"ms\": %.5f, "
           "\"tflops\": %.2f, \"max_rel_err\": %.3g%s}\n",
           o.dtype, o.m, o.n, o.k, o.bm, o.bn, o.bk, kiln_kernel_info(k)->num_warps, kiln_kernel_info(k)->num_stages,
           kiln_kernel_info(k)->smem_bytes, (double)ms, tflops, rel, rel > 1e-2 ? ", \"error\": \"wrong result\"" : "");
    kiln_free(dev, da), kiln_free(dev, db), kiln_free(dev, dc);
    kiln_module_free(mod);
    kiln_shutdown(dev);
    free(a), free(b), free(c), free(src);
    return rel > 1e-2 ? 1 : 0;
}
