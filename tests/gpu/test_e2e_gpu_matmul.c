/* test_e2e_gpu_matmul.c — the tensor-core matmul path on the GPU.
 *
 * tools/bench/matmul_tc.tile (row-major A [M,K], B [K,N], f32 C or C in the
 * input type; N and K are compile-time constants so aligned shapes take the
 * cp.async path; tiles in GROUP_M order, or persistent programs looping over
 * the tiles) and examples/matmul.tile (runtime strides: no cp.async, still
 * mma.sync), for f16 and bf16, on
 *   - a square shape (256^3), a ragged shape whose N and K are multiples of 8
 *     (pipelined 16-byte copies with masked zero-filling rows and k's), and a
 *     ragged shape with N, K not multiples of 8 (plain loads);
 *   - schedules: several block sizes and warp counts, num_stages 1..4 (1 =
 *     no pipelining), including trip counts shorter than the pipeline
 *     (K = 72 with BLOCK_K = 64: 2 iterations for 3-4 stages; K = 16: 1);
 *     on sm_90a the BLOCK_K 64 schedules whose warps can all lie along M
 *     (128x128/4, 128x256/8, 64x256/4, 256x128/8, 128x64/4) run on wgmma,
 *     pipelined (cp.async slots) or staged (plain loads, examples/matmul),
 *     and 64-row tiles on 8 warps (64x256/8, 64x128/8) on wgmma with two
 *     warpgroup columns (each warpgroup half of N, A read by both).
 * Inputs are random and non-zero; C is poisoned with NaN bytes before each
 * launch, with a poisoned tail after the M x N elements that must survive.
 * Each result is compared with a float64 reference (products of the rounded
 * inputs) and with the CPU interpreter; the PTX of each case is compiled on
 * the host too and its mma.sync / wgmma / ldmatrix / cp.async counts go in the table
 * printed at the end (so a run shows which path each case took).
 *
 * KILN_TEST_MBARRIER=1: every case compiles with the mbarrier stage hand-off
 * (KilnCompileOptions.mbarrier, docs/tensor_cores.md 0b); the pipelined ones then
 * wait on mbarriers instead of cp.async.wait_group + bar.sync.
 * KILN_TEST_TMA=1: every case compiles with the tma schedule option
 * (KilnCompileOptions.tma, docs/tensor_cores.md 5c): the pipelined loads a tensor
 * map reads exactly become TMA copies (a line per case says how many).
 * KILN_TEST_WARP_SPEC=1: every case with warp specialisation (KilnCompileOptions.
 * warp_specialize, docs/tensor_cores.md 5b): on sm_90a the wgmma cases with a top-level
 * pipelined loop launch a producer warpgroup on top of their warps, which issues the copies.
 *
 * Without a GPU: "SKIP: no GPU (...)" and exit 77 (ctest: skipped).
 */
#include "tests/gpu/gpu_util.h"
#include "tests/ptx_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static KilnDevice *g_dev;
static KilnDeviceInfo g_info;

typedef struct Sched { int bm, bn, bk, warps, stages; } Sched;

typedef struct Row {
    char what[56], shape[24], sched[32];
    int mma, wgmma, ldm, cpa;
    double err_ref, err_interp, tol;
    float ms;
    double tflops;
    int pass;
} Row;
static Row g_rows[160];
static int g_nrows;

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static float rnd(float scale) { return gu_rnd(&g_rng, scale); }

static uint16_t to_half(float x, bool bf) { return bf ? interp_f32_to_bf16(x) : interp_f32_to_f16(x); }
static double from_half(uint16_t h, bool bf) { return bf ? interp_bf16_to_f32(h) : interp_f16_to_f32(h); }

/* A problem: inputs, float64 reference and (once per problem) the interpreter's result. */
typedef struct Prob {
    int M, N, K;
    bool bf;
    bool cast_a;       /* A is bf16, converted to f16 in the kernel (matmul_tc_cast); B is f16 */
    uint16_t *a, *b;
    double *ref;
    double max_ref;
    float *interp;
} Prob;

static void prob_init_ex(Prob *p, int M, int N, int K, bool bf, bool cast_a)
{
    memset(p, 0, sizeof *p);
    p->M = M, p->N = N, p->K = K, p->bf = bf, p->cast_a = cast_a;
    bool abf = bf || cast_a, bbf = bf && !cast_a;
    p->a = malloc((size_t)M * K * 2);
    p->b = malloc((size_t)K * N * 2);
    p->ref = malloc((size_t)M * N * 8);
    for (int i = 0; i < M * K; i++) p->a[i] = to_half(rnd(2), abf);
    for (int i = 0; i < K * N; i++) p->b[i] = to_half(rnd(2), bbf);
    /* With the cast, the kernel multiplies A rounded to f16 (one rounding). */
    double *av = malloc(sizeof(double) * (size_t)M * K);
    for (int i = 0; i < M * K; i++)
        av[i] = cast_a ? from_half(interp_f64_to_f16(from_half(p->a[i], true)), false) : from_half(p->a[i], abf);
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0;
            for (int k = 0; k < K; k++) s += av[i * K + k] * from_half(p->b[k * N + j], bbf);
            p->ref[i * N + j] = s;
            if (fabs(s) > p->max_ref) p->max_ref = fabs(s);
        }
    free(av);
}

static void prob_init(Prob *p, int M, int N, int K, bool bf) { prob_init_ex(p, M, N, K, bf, false); }

static void prob_free(Prob *p)
{
    free(p->a), free(p->b), free(p->ref), free(p->interp);
}

/* Which program and which defines. */
typedef struct Prog {
    const char *file, *kernel;
    bool strided;  /* examples/matmul.tile: runtime M, N, K and strides */
    bool half_out; /* C is f16/bf16 (matmul_tc_<t>_<t>): compared after its rounding */
    int group_m;   /* GROUP_M, or -1: the program's default / no such parameter */
    int programs;  /* > 0: PERSISTENT with this many programs (a 1-D grid) */
} Prog;

/* The launch grid: one program per tile, or g->programs looping over them. */
static void grid_for(const Prog *g, const Prob *p, const Sched *s, int grid[3])
{
    grid[0] = g->programs ? g->programs : (p->M + s->bm - 1) / s->bm;
    grid[1] = g->programs ? 1 : (p->N + s->bn - 1) / s->bn;
    grid[2] = 1;
}

/* C's element as a double (f32, or the half type of the inputs). */
static double c_at(const Prog *g, const Prob *p, const void *c, size_t i)
{
    return g->half_out ? from_half(((const uint16_t *)c)[i], p->bf) : ((const float *)c)[i];
}

static int make_defines(const Prog *g, const Prob *p, const Sched *s, KilnDefine *d, char (*buf)[16])
{
    int n = 0;
    snprintf(buf[0], 16, "%d", s->bm), d[n++] = (KilnDefine){"BLOCK_M", buf[0]};
    snprintf(buf[1], 16, "%d", s->bn), d[n++] = (KilnDefine){"BLOCK_N", buf[1]};
    snprintf(buf[2], 16, "%d", s->bk), d[n++] = (KilnDefine){"BLOCK_K", buf[2]};
    if (!g->strided) {
        snprintf(buf[3], 16, "%d", p->N), d[n++] = (KilnDefine){"N", buf[3]};
        snprintf(buf[4], 16, "%d", p->K), d[n++] = (KilnDefine){"K", buf[4]};
    }
    if (g->group_m >= 0) snprintf(buf[5], 16, "%d", g->group_m), d[n++] = (KilnDefine){"GROUP_M", buf[5]};
    if (g->programs) d[n++] = (KilnDefine){"PERSISTENT", "true"};
    return n;
}

static char *read_src(const char *rel)
{
    size_t len;
    char *src = sup_read_file_text(tu_src_path(rel), &len);
    ck_assert_msg(src, "cannot read %s", rel);
    return src;
}

/* PTX on the host: which instructions this schedule uses. */
static void ptx_counts(const Prog *g, const char *src, const KilnCompileOptions *o, Row *row)
{
    KilnCompileOptions po = *o;
    /* What the runtime's launch-time specialisation knows of our buffers
     * (kiln_malloc'd, so 16-byte aligned): the same facts as hints. */
    KilnParamHint h[3] = {{"A", 16, 0}, {"B", 16, 0}, {"C", 16, 0}};
    po.hints = h;
    po.nhints = 3;
    po.emit = KILN_EMIT_PTX;
    po.arch = g_info.arch[0] ? g_info.arch : "sm_90a";
    KilnCompileResult r;
    KilnStatus st = kiln_compile(g->file, src, &po, &r);
    ck_assert_msg(st == KILN_OK, "%s: %s", g->file, r.diagnostics ? r.diagnostics : "");
    row->mma = pu_count(r.output, "mma.sync");
    row->wgmma = pu_count(r.output, "wgmma.mma_async");
    row->ldm = pu_count(r.output, "ldmatrix");
    row->cpa = pu_count(r.output, "cp.async.cg");
    if (o->schedule.tma)
        printf("KILN_TEST_TMA: %s %s: %d TMA copies, %d tensor maps, %d cp.async\n", row->what, row->sched,
               pu_count(r.output, "cp.async.bulk.tensor"), r.kernels[0].ntmaps, row->cpa);
    kiln_compile_result_free(&r);
}

static void run_interp(const Prog *g, Prob *p, const Sched *s)
{
    char *src = read_src(g->file);
    Arena arena;
    arena_init(&arena);
    Diag d;
    KilnDefine kd[8];
    char buf[8][16];
    int nd = make_defines(g, p, s, kd, buf);
    IrFunc *f = gu_interp_kernel(&arena, &d, g->file, src, g->kernel, kd, nd);
    StrBuf err;
    sb_init(&err);
    size_t cn = (size_t)p->M * p->N, cb = cn * (g->half_out ? 2 : 4);
    void *c = malloc(cb);
    memset(c, GU_POISON_BYTE, cb);
    InterpBuffer ib[3] = {{p->a, (size_t)p->M * p->K * 2, "A"}, {p->b, (size_t)p->K * p->N * 2, "B"}, {c, cb, "C"}};
    InterpArg args[16];
    memset(args, 0, sizeof args);
    for (int i = 0; i < f->nparams; i++) {
        const char *nm = f->params[i]->name;
        if (!strcmp(nm, "A")) args[i].ptr = p->a;
        else if (!strcmp(nm, "B")) args[i].ptr = p->b;
        else if (!strcmp(nm, "C")) args[i].ptr = c;
        else if (!strcmp(nm, "M")) args[i].i = p->M;
        else if (!strcmp(nm, "N") || !strcmp(nm, "stride_bk") || !strcmp(nm, "stride_cm")) args[i].i = p->N;
        else if (!strcmp(nm, "K") || !strcmp(nm, "stride_am")) args[i].i = p->K;
        else args[i].i = 1; /* stride_ak, stride_bn, stride_cn */
    }
    int grid[3];
    grid_for(g, p, s, grid);
    InterpOptions io = {.grid = {grid[0], grid[1], 1}, .buffers = ib, .nbuffers = 3};
    ck_assert_msg(interp_run(f, args, f->nparams, &io, &err) == 0, "%s", err.data ? err.data : "");
    p->interp = malloc(cn * sizeof(float));
    for (size_t i = 0; i < cn; i++) p->interp[i] = (float)c_at(g, p, c, i);
    free(c);
    sb_free(&err);
    diag_free(&d);
    arena_free(&arena);
    free(src);
}

static KilnArg arg_for(const char *nm, const Prob *p, KilnDevPtr da, KilnDevPtr db, KilnDevPtr dc)
{
    if (!strcmp(nm, "A")) return kiln_arg_ptr(da);
    if (!strcmp(nm, "B")) return kiln_arg_ptr(db);
    if (!strcmp(nm, "C")) return kiln_arg_ptr(dc);
    if (!strcmp(nm, "M")) return kiln_arg_i32(p->M);
    if (!strcmp(nm, "N") || !strcmp(nm, "stride_bk") || !strcmp(nm, "stride_cm")) return kiln_arg_i32(p->N);
    if (!strcmp(nm, "K") || !strcmp(nm, "stride_am")) return kiln_arg_i32(p->K);
    return kiln_arg_i32(1);
}

enum { TAIL = 1024 }; /* poisoned floats after C that must survive */

static void run_case(const Prog *g, Prob *p, const Sched *s)
{
    Row *row = &g_rows[g_nrows++];
    memset(row, 0, sizeof *row);
    snprintf(row->what, sizeof row->what, "%s %s%s%s", g->strided ? "matmul.tile" : "matmul_tc",
             p->cast_a ? "bf16->f16 x f16" : p->bf ? "bf16" : "f16", g->half_out ? " half out" : "",
             g->programs ? " persistent" : g->group_m == 0 ? " g0" : "");
    snprintf(row->shape, sizeof row->shape, "%dx%dx%d", p->M, p->N, p->K);
    snprintf(row->sched, sizeof row->sched, "%dx%dx%d w%d s%d", s->bm, s->bn, s->bk, s->warps, s->stages);
    row->err_ref = row->err_interp = NAN;
    row->ms = NAN;
    if (!p->interp) run_interp(g, p, s);
    char *src = read_src(g->file);
    KilnDefine kd[8];
    char buf[8][16];
    KilnCompileOptions o = {.kernel = g->kernel, .defines = kd, .ndefines = make_defines(g, p, s, kd, buf),
                            .num_warps = s->warps, .num_stages = s->stages};
    const char *mb = getenv("KILN_TEST_MBARRIER");
    o.schedule.mbarrier = mb && *mb && strcmp(mb, "0");
    const char *tma = getenv("KILN_TEST_TMA");
    o.schedule.tma = tma && *tma && strcmp(tma, "0");
    const char *ws = getenv("KILN_TEST_WARP_SPEC");
    o.schedule.warp_specialize = ws && *ws && strcmp(ws, "0");
    ptx_counts(g, src, &o, row);
    KilnModule *m = NULL;
    KilnStatus st = kiln_module_compile(g_dev, g->file, src, &o, &m);
    ck_assert_msg(st == KILN_OK, "%s %s: compile: %s", row->what, row->sched, kiln_last_error());
    free(src);
    KilnKernel *k = NULL;
    ck_assert_msg(kiln_kernel_get(m, g->kernel, &k) == KILN_OK, "%s", kiln_last_error());
    const KilnKernelInfo *ki = kiln_kernel_info(k);
    size_t cn = (size_t)p->M * p->N, es = g->half_out ? 2 : 4;
    KilnDevPtr da, db, dc;
    ck_assert(kiln_malloc(g_dev, (size_t)p->M * p->K * 2, &da) == KILN_OK);
    ck_assert(kiln_malloc(g_dev, (size_t)p->K * p->N * 2, &db) == KILN_OK);
    ck_assert(kiln_malloc(g_dev, (cn + TAIL) * es, &dc) == KILN_OK);
    ck_assert(kiln_memcpy_htod(g_dev, da, p->a, (size_t)p->M * p->K * 2) == KILN_OK);
    ck_assert(kiln_memcpy_htod(g_dev, db, p->b, (size_t)p->K * p->N * 2) == KILN_OK);
    ck_assert(kiln_memset(g_dev, dc, GU_POISON_BYTE, (cn + TAIL) * es) == KILN_OK);
    KilnArg args[16];
    for (int i = 0; i < ki->nparams; i++) args[i] = arg_for(ki->params[i].name, p, da, db, dc);
    int grid[3];
    grid_for(g, p, s, grid);
    st = kiln_launch(k, grid, NULL, args, ki->nparams);
    ck_assert_msg(st == KILN_OK, "launch: %s", kiln_last_error());
    st = kiln_synchronize(g_dev);
    ck_assert_msg(st == KILN_OK, "%s %s %s: running: %s", row->what, row->shape, row->sched, kiln_last_error());
    unsigned char *c = malloc((cn + TAIL) * es);
    ck_assert(kiln_memcpy_dtoh(g_dev, c, dc, (cn + TAIL) * es) == KILN_OK);
    float ms = NAN;
    if (kiln_time_launch(k, grid, NULL, args, ki->nparams, 10, &ms) == KILN_OK) row->ms = ms;
    row->tflops = 2.0 * p->M * p->N * p->K / (ms * 1e-3) / 1e12;
    kiln_free(g_dev, da), kiln_free(g_dev, db), kiln_free(g_dev, dc);
    kiln_module_free(m);
    for (size_t i = cn * es; i < (cn + TAIL) * es; i++)
        ck_assert_msg(c[i] == GU_POISON_BYTE, "%s %s: wrote past C (byte %zu)", row->what, row->sched, i);
    double scale = p->max_ref > 1 ? p->max_ref : 1, er = 0, ei = 0;
    for (size_t i = 0; i < cn; i++) {
        er = gu_worse(er, c_at(g, p, c, i), p->ref[i]);
        ei = gu_worse(ei, c_at(g, p, c, i), p->interp[i]);
    }
    row->err_ref = er / scale;
    row->err_interp = ei / scale;
    /* Products of f16/bf16 are exact in f32; only the f32 summation order
     * differs (tensor cores, block order): errors grow like sqrt(K). A wrong fragment
     * mapping or a stale pipeline stage gives errors of order 1. */
    row->tol = 1e-4 * (p->K > 64 ? sqrt(p->K / 64.0) : 1.0);
    /* A half C also rounds each element (relative 2^-11 f16, 2^-8 bf16), and the
     * interpreter's may round the other way: twice that of the largest |C|. */
    if (g->half_out) row->tol += 2 * (p->bf ? 0x1p-8 : 0x1p-11);
    row->pass = row->err_ref <= row->tol && row->err_interp <= row->tol;
    free(c);
    ck_assert_msg(row->pass, "%s %s %s: error %.3g vs float64, %.3g vs interpreter (tolerance %.3g)", row->what,
                  row->shape, row->sched, row->err_ref, row->err_interp, row->tol);
}

static const Prog TC_F16 = {"tools/bench/matmul_tc.tile", "matmul_tc_f16", false, false, -1, 0};
static const Prog TC_BF16 = {"tools/bench/matmul_tc.tile", "matmul_tc_bf16", false, false, -1, 0};
static const Prog EXAMPLE = {"examples/matmul.tile", "matmul", true, false, -1, 0};
static const Prog TC_CAST = {"tools/bench/matmul_tc.tile", "matmul_tc_cast", false, false, -1, 0};
/* C in the input type (the benchmark's default, like cuBLAS); launch order; persistent
 * programs (fewer than the tiles, and not dividing them: 200x136 is 4 x 3 tiles of 64 x 64,
 * 2 x 1 of 128 x 128 ...) */
static const Prog TC_F16_H = {"tools/bench/matmul_tc.tile", "matmul_tc_f16_f16", false, true, -1, 0};
static const Prog TC_BF16_H = {"tools/bench/matmul_tc.tile", "matmul_tc_bf16_bf16", false, true, -1, 0};
static const Prog TC_F16_G0 = {"tools/bench/matmul_tc.tile", "matmul_tc_f16", false, false, 0, 0};
static const Prog TC_F16_H_P = {"tools/bench/matmul_tc.tile", "matmul_tc_f16_f16", false, true, 3, 5};
static const Prog TC_BF16_P = {"tools/bench/matmul_tc.tile", "matmul_tc_bf16", false, false, 2, 3};

static const Sched SCHEDS[] = {
    {64, 64, 32, 4, 1},  {64, 64, 32, 4, 2},   {64, 64, 32, 4, 3},   {64, 64, 32, 4, 4},
    {128, 128, 32, 4, 3}, {128, 64, 64, 4, 4}, {128, 256, 32, 8, 3}, {32, 32, 16, 1, 2},
    {16, 16, 16, 1, 3},  {64, 128, 64, 8, 2},
    /* sm_90a: wgmma (all warps along M, BLOCK_K 64: 128-byte swizzle rows) */
    {128, 128, 64, 4, 3}, {128, 256, 64, 8, 3}, {64, 256, 64, 4, 3}, {256, 128, 64, 8, 4},
    /* sm_90a: wgmma with two warpgroup columns (64 rows on 8 warps: #mma<C, wm=4, wn=2, rn=16>,
     * warps 4-7 compute the columns 128..255 with their own m64n128k16; index 9, 64x128/8,
     * takes it too, rn = 8) */
    {64, 256, 64, 8, 3},
};
enum { NSCHED = sizeof SCHEDS / sizeof SCHEDS[0] };

static void sweep(const Prog *g, int M, int N, int K, bool bf, int first, int last)
{
    Prob p;
    prob_init(&p, M, N, K, bf);
    for (int i = first; i <= last && i < NSCHED; i++) run_case(g, &p, &SCHEDS[i]);
    prob_free(&p);
}

START_TEST(square_f16) { sweep(&TC_F16, 256, 256, 256, false, 0, NSCHED - 1); }
END_TEST
START_TEST(square_bf16) { sweep(&TC_BF16, 256, 256, 256, true, 0, NSCHED - 1); }
END_TEST
/* N, K multiples of 8: cp.async with zero-filled rows past M and k's past K;
 * K = 72 with BLOCK_K 64 gives 2 iterations (fewer than 3-4 stages). */
START_TEST(ragged_aligned_f16) { sweep(&TC_F16, 200, 136, 72, false, 0, NSCHED - 1); }
END_TEST
START_TEST(ragged_aligned_bf16) { sweep(&TC_BF16, 333, 200, 1000, true, 0, NSCHED - 1); }
END_TEST
/* N, K not multiples of 8: plain loads, still tensor cores. */
START_TEST(ragged_unaligned) { sweep(&TC_F16, 131, 130, 77, false, 0, NSCHED - 1); }
END_TEST
/* One k-step (K = 16): trip count 1 for every pipeline depth; and K = 8 < BLOCK_K. */
START_TEST(short_loops)
{
    sweep(&TC_F16, 70, 64, 16, false, 0, 3);
    sweep(&TC_BF16, 64, 40, 8, true, 0, 3);
}
END_TEST
START_TEST(examples_matmul) { sweep(&EXAMPLE, 200, 130, 77, false, 0, 5); }
END_TEST
/* Half outputs, the launch order and persistent programs, on ragged shapes; the wgmma
 * schedules (10..14 on sm_90a) and a few mma.sync ones. */
START_TEST(half_out_and_order)
{
    sweep(&TC_F16_H, 200, 136, 72, false, 2, 5);
    sweep(&TC_F16_H, 200, 136, 72, false, 10, NSCHED - 1);
    sweep(&TC_BF16_H, 333, 200, 1000, true, 10, NSCHED - 1);
    sweep(&TC_F16_G0, 333, 200, 1000, false, 10, 11);
}
END_TEST
START_TEST(persistent)
{
    sweep(&TC_F16_H_P, 333, 200, 1000, false, 4, 5);
    sweep(&TC_F16_H_P, 333, 200, 1000, false, 10, NSCHED - 1);
    sweep(&TC_BF16_P, 200, 136, 72, true, 10, NSCHED - 1);
    sweep(&TC_F16_H_P, 131, 130, 77, false, 10, 11); /* plain loads */
}
END_TEST
/* A loaded as bf16 and cast to f16 before the dot: the cast runs after ldmatrix. */
START_TEST(cast_operand)
{
    Prob p;
    prob_init_ex(&p, 200, 136, 72, false, true);
    for (int i = 0; i < 5; i++) run_case(&TC_CAST, &p, &SCHEDS[i]);
    prob_free(&p);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("gpu_matmul");
    TCase *tc = tcase_create("matmul");
    tcase_set_timeout(tc, 1200);
    tcase_add_test(tc, square_f16);
    tcase_add_test(tc, square_bf16);
    tcase_add_test(tc, ragged_aligned_f16);
    tcase_add_test(tc, ragged_aligned_bf16);
    tcase_add_test(tc, ragged_unaligned);
    tcase_add_test(tc, short_loops);
    tcase_add_test(tc, examples_matmul);
    tcase_add_test(tc, cast_operand);
    tcase_add_test(tc, half_out_and_order);
    tcase_add_test(tc, persistent);
    suite_add_tcase(s, tc);
    return s;
}

static void print_table(void)
{
    printf("\n| case | shape | schedule (BMxBNxBK warps stages) | mma.sync/wgmma/ldmatrix/cp.async in PTX | err/f64 | err/interp "
           "| tol | ms | TFLOP/s | result |\n|---|---|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < g_nrows; i++) {
        Row *r = &g_rows[i];
        printf("| %s | %s | %s | %d/%d/%d/%d | %.3g | %.3g | %.2g | %.4f | %.2f | %s |\n", r->what, r->shape, r->sched,
               r->mma, r->wgmma, r->ldm, r->cpa, r->err_ref, r->err_interp, r->tol, (double)r->ms, r->tflops,
               r->pass ? "PASS" : "FAIL");
    }
}

int main(void) { return gu_main(&g_dev, &g_info, suite, "/tmp/kiln-gpu-mm-cache-XXXXXX", print_table); }
