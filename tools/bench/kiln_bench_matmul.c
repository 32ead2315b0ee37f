/* kiln_bench_matmul.c — times Kiln's tensor-core matmul (tools/bench/matmul_tc.tile)
 * on the GPU through the public API (kiln.h); one JSON object per line on stdout.
 *
 *   kiln-bench-matmul --src tools/bench/matmul_tc.tile --dtype f16 --size 4096 \
 *       [--m M --n N --k K] [--block-m 128 --block-n 256 --block-k 64] [--warps 8]
 *       [--stages 4] [--out half|f32] [--group-m 8] [--persistent 1]
 *       [--min-ms 100]
 *
 * A and B are row-major, uniform in [-1, 1) (deterministic). C is the input
 * type (--out half, the default: kernel matmul_tc_<dtype>_<dtype>, what
 * torch.matmul and so cuBLAS write) or f32 (--out f32: matmul_tc_<dtype>).
 * --group-m is the program's GROUP_M (0: launch order); --persistent P
 * launches min(tiles, P x SMs) programs that loop over the tiles (PERSISTENT;
 * default 1, the fastest on the H200; 0: one program per tile). Defaults: the
 * fastest schedule, 128x256x64 / 8 warps / 4 stages, GROUP_M 8.
 * "smem_bytes" is the kernel's as kiln_kernel_info reports it, i.e. of the
 * generic (unspecialised) variant; the launched one, specialised on aligned
 * buffers, pipelines its loads: "stage_bytes" = stages x (BM + BN) x BK x 2.
 * The result is checked on 512 sampled elements against a float64 dot product
 * of the same rounded inputs (max error relative to the largest |C|; reported
 * as "max_rel_err", and the run fails above 1e-2 — a wrong kernel is off by
 * O(1), a half output's rounding by 2^-8 at most, bf16). TFLOP/s = 2 M N K / median
 * time. Used by bench_matmul.py. KILN_BENCH_MBARRIER=1 in the environment compiles
 * with the mbarrier stage hand-off (docs/tensor_cores.md 0b).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln.h"

typedef struct Opts {
    const char *src, *dtype, *out;
    int m, n, k, bm, bn, bk, warps, stages, group_m, persistent;
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
                    "       [--block-m BM] [--block-n BN] [--block-k BK] [--warps W] [--stages S]\n"
                    "       [--out half|f32] [--group-m G] [--persistent CTAS_PER_SM] [--min-ms MS]\n");
    return 2;
}

static int parse(int argc, char **argv, Opts *o)
{
    *o = (Opts){.dtype = "f16", .out = "half", .bm = 128, .bn = 256, .bk = 64, .warps = 8, .stages = 4, .group_m = 8,
                .persistent = 1, .min_ms = 100};
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
        else if (!strcmp(a, "--out")) o->out = v;
        else if (!strcmp(a, "--group-m")) o->group_m = atoi(v);
        else if (!strcmp(a, "--persistent")) o->persistent = atoi(v);
        else if (!strcmp(a, "--min-ms")) o->min_ms = atof(v);
        else return usage();
        i++;
    }
    if (!o->src || o->m <= 0 || o->n <= 0 || o->k <= 0) return usage();
    if (strcmp(o->dtype, "f16") && strcmp(o->dtype, "bf16")) return usage();
    if (strcmp(o->out, "half") && strcmp(o->out, "f32")) return usage();
    if (o->group_m < 0 || o->persistent < 0) return usage();
    return 0;
}

/* Compiles the kernel for o's schedule: matmul_tc_<dtype> (f32 C) or matmul_tc_<dtype>_<dtype>. */
static KilnStatus compile_kernel(KilnDevice *dev, const Opts *o, const char *src, KilnModule **mod, KilnKernel **k)
{
    char kname[64], v[6][16];
    snprintf(kname, sizeof kname, "matmul_tc_%s%s%s", o->dtype, strcmp(o->out, "f32") ? "_" : "",
             strcmp(o->out, "f32") ? o->dtype : "");
    snprintf(v[0], 16, "%d", o->n), snprintf(v[1], 16, "%d", o->k), snprintf(v[2], 16, "%d", o->bm);
    snprintf(v[3], 16, "%d", o->bn), snprintf(v[4], 16, "%d", o->bk), snprintf(v[5], 16, "%d", o->group_m);
    KilnDefine defs[7] = {{"N", v[0]},       {"K", v[1]},       {"BLOCK_M", v[2]},
                          {"BLOCK_N", v[3]}, {"BLOCK_K", v[4]}, {"GROUP_M", v[5]},
                          {"PERSISTENT", o->persistent ? "true" : "false"}};
    KilnCompileOptions co = {.kernel = kname, .defines = defs, .ndefines = 7, .num_warps = o->warps,
                             .num_stages = o->stages};
    /* KILN_BENCH_MBARRIER=1: the mbarrier stage hand-off (KilnCompileOptions.mbarrier), so
     * a whole bench_matmul.py sweep can be repeated with it */
    const char *mb = getenv("KILN_BENCH_MBARRIER");
    co.schedule.mbarrier = mb && *mb && strcmp(mb, "0");
    /* KILN_BENCH_TMA=1: the TMA copies (KilnCompileOptions.tma, implies the mbarrier hand-off) */
    const char *tma = getenv("KILN_BENCH_TMA");
    co.schedule.tma = tma && *tma && strcmp(tma, "0");
    /* KILN_BENCH_WARP_SPEC=1: a producer warpgroup issues the copies (warp_specialize,
     * which implies the mbarrier hand-off; docs/tensor_cores.md 5b) */
    const char *ws = getenv("KILN_BENCH_WARP_SPEC");
    co.schedule.warp_specialize = ws && *ws && strcmp(ws, "0");
    KilnStatus st = kiln_module_compile(dev, o->src, src, &co, mod);
    return st != KILN_OK ? st : kiln_kernel_get(*mod, kname, k);
}

/* Uniform in [-1, 1), rounded to f16 / bf16 bits; deterministic. */
static void fill(uint16_t *x, size_t n, int bf, uint64_t *s)
{
    for (size_t i = 0; i < n; i++) {
        *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
        float f = (float)((*s >> 40) & 0xffffff) / 8388608.0f - 1.0f;
        x[i] = bf ? kiln_f32_to_bf16(f) : kiln_f32_to_f16(f);
    }
}

/* Max |C - float64 reference| on 512 sampled elements, relative to the largest |reference|. */
static double check(const Opts *o, const uint16_t *a, const uint16_t *b, const void *c, uint64_t *s)
{
    int bf = !strcmp(o->dtype, "bf16"), half = strcmp(o->out, "f32") != 0;
    double worst = 0, maxref = 0;
    for (int t = 0; t < 512; t++) {
        *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
        size_t i = (*s >> 11) % (size_t)o->m, j = (*s >> 37) % (size_t)o->n, at = i * o->n + j;
        double ref = 0;
        for (int kk = 0; kk < o->k; kk++) ref += (double)from_bits(a[i * o->k + kk], bf) * from_bits(b[(size_t)kk * o->n + j], bf);
        double got = half ? from_bits(((const uint16_t *)c)[at], bf) : ((const float *)c)[at];
        double d = fabs(got - ref);
        if (!(d <= worst)) worst = d;
        if (fabs(ref) > maxref) maxref = fabs(ref);
    }
    return worst / (maxref > 1 ? maxref : 1);
}

int main(int argc, char **argv)
{
    Opts o;
    if (parse(argc, argv, &o)) return 2;
    int bf = !strcmp(o.dtype, "bf16");
    size_t csize = strcmp(o.out, "f32") ? 2 : 4;
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
    KilnModule *mod = NULL;
    KilnKernel *k = NULL;
    if ((st = compile_kernel(dev, &o, src, &mod, &k)) != KILN_OK) {
        json_error(&o, "compile", st);
        return 1;
    }
    size_t na = (size_t)o.m * o.k, nbel = (size_t)o.k * o.n, nc = (size_t)o.m * o.n;
    uint16_t *a = malloc(na * 2), *b = malloc(nbel * 2);
    void *c = malloc(nc * csize);
    uint64_t s = 0x2545F4914F6CDD1Dull;
    fill(a, na, bf, &s), fill(b, nbel, bf, &s);
    KilnDevPtr da, db, dc;
    if (kiln_malloc(dev, na * 2, &da) || kiln_malloc(dev, nbel * 2, &db) || kiln_malloc(dev, nc * csize, &dc)) {
        json_error(&o, "malloc", KILN_ERR_DRIVER);
        return 1;
    }
    kiln_memcpy_htod(dev, da, a, na * 2);
    kiln_memcpy_htod(dev, db, b, nbel * 2);
    kiln_memset(dev, dc, 0xFF, nc * csize);
    KilnArg args[4] = {kiln_arg_ptr(da), kiln_arg_ptr(db), kiln_arg_ptr(dc), kiln_arg_i32(o.m)};
    int gm = (o.m + o.bm - 1) / o.bm, gn = (o.n + o.bn - 1) / o.bn, grid[3] = {gm, gn, 1};
    if (o.persistent) { /* one program per CTA slot, each looping over tiles */
        KilnDeviceInfo di;
        kiln_device_info(dev, &di);
        long slots = (long)o.persistent * di.sm_count, tiles = (long)gm * gn;
        grid[0] = (int)(slots < tiles ? slots : tiles), grid[1] = 1;
    }
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
    kiln_memcpy_dtoh(dev, c, dc, nc * csize);
    double rel = check(&o, a, b, c, &s);
    double tflops = 2.0 * o.m * o.n * o.k / (ms * 1e-3) / 1e12;
    const KilnKernelInfo *ki = kiln_kernel_info(k);
    printf("{\"provider\": \"kiln\", \"dtype\": \"%s\", \"out\": \"%s\", \"m\": %d, \"n\": %d, \"k\": %d, "
           "\"block_m\": %d, \"block_n\": %d, \"block_k\": %d, \"warps\": %d, \"stages\": %d, \"group_m\": %d, "
           "\"persistent\": %d, \"grid\": %d, \"smem_bytes\": %d, \"stage_bytes\": %d, \"ms\": %.5f, \"tflops\": %.2f, "
           "\"max_rel_err\": %.3g%s}\n",
           o.dtype, csize == 4 ? "f32" : o.dtype, o.m, o.n, o.k, o.bm, o.bn, o.bk, ki->num_warps, ki->num_stages,
           o.group_m, o.persistent, grid[0] * grid[1], ki->smem_bytes, ki->num_stages * (o.bm + o.bn) * o.bk * 2, (double)ms, tflops, rel,
           rel > 1e-2 ? ", \"error\": \"wrong result\"" : "");
    kiln_free(dev, da), kiln_free(dev, db), kiln_free(dev, dc);
    kiln_module_free(mod);
    kiln_shutdown(dev);
    free(a), free(b), free(c), free(src);
    return rel > 1e-2 ? 1 : 0;
}
