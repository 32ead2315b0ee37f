/* test_e2e_matmul_tc.c — tools/bench/matmul_tc.tile on the CPU interpreter: the tile order
 * and the persistent loop, with every dimension ragged.
 *
 * Program t computes C's tile (pid_m, pid_n) in GROUP_M order (t walks down GROUP_M rows of
 * tiles, then to the next column; the last group is short when GROUP_M does not divide the
 * rows of tiles); with PERSISTENT each program loops over t = pid, pid + programs, ...
 * Checked here, for f16 and bf16 inputs with f32 and half (input type) outputs:
 *   - GROUP_M 0 (launch order), 1, 3 (ragged last group: 4 rows of tiles) and 8 (more than
 *     the rows: one group) on the (cdiv(M, BM), cdiv(N, BN)) grid;
 *   - PERSISTENT with fewer programs than tiles (1, 5 — not a divisor of 12 — and a 2 x 3
 *     grid), and with more programs than tiles (20: some run no tile);
 *   - every element against float64 with a rigorous bound: the f32 sum of K products errs by
 *     at most gamma_K sum |a b| (products of halves are exact in f32), and a half output
 *     adds its rounding, u_half |C| (u = 2^-11 f16, 2^-8 bf16; 2^-25 absolute below f16's
 *     normal range); a tile computed twice or
 *     never shows as a wrong or NaN element (C is poisoned, with a poisoned tail that must
 *     survive).
 * The GPU runs the same kernels: tests/gpu/test_e2e_gpu_matmul.c. */
#include "tests/testutil.h"
#include "compiler/interp/interp.h"
#include "compiler/lang/lang.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

enum { M = 100, N = 72, K = 50, BM = 32, BN = 32, BK = 16, TAIL = 64 };
static const double U32 = 0x1p-24;

static uint16_t g_a[M * K], g_b[K * N];
static double g_ref[M * N], g_mag[M * N];

static uint16_t to_half(float x, bool bf) { return bf ? interp_f32_to_bf16(x) : interp_f32_to_f16(x); }
static double from_half(uint16_t h, bool bf) { return bf ? interp_bf16_to_f32(h) : interp_f16_to_f32(h); }

/* Random non-zero inputs and the float64 reference with sum |a b| per element. */
static void make_inputs(bool bf)
{
    unsigned s = bf ? 7 : 3;
    for (int i = 0; i < M * K + K * N; i++) {
        s = s * 1103515245u + 12345u;
        float x = ((float)((s >> 8) & 0xffff) + 1.0f) / 32768.0f - 1.0f; /* (-1, 1], never 0 */
        if (i < M * K) g_a[i] = to_half(x, bf);
        else g_b[i - M * K] = to_half(x, bf);
    }
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            double sum = 0, mag = 0;
            for (int k = 0; k < K; k++) {
                double p = from_half(g_a[m * K + k], bf) * from_half(g_b[k * N + n], bf);
                sum += p, mag += fabs(p);
            }
            g_ref[m * N + n] = sum, g_mag[m * N + n] = mag;
        }
}

typedef struct Case {
    bool bf, half_out, persistent;
    int group_m;
    int grid[2];
} Case;

static IrFunc *compile_kernel(Arena *arena, Diag *d, char **src, const Case *c)
{
    const char *file = "tools/bench/matmul_tc.tile";
    size_t len;
    *src = sup_read_file_text(tu_src_path(file), &len);
    ck_assert_msg(*src, "cannot read %s", file);
    diag_init(d, file, *src);
    AstFile *af = ast_parse(arena, d, file, *src);
    ck_assert_msg(af && d->nerrors == 0, "%s", d->out.data ? d->out.data : "");
    char kname[48], g[16];
    const char *dt = c->bf ? "bf16" : "f16";
    snprintf(kname, sizeof kname, "matmul_tc_%s%s%s", dt, c->half_out ? "_" : "", c->half_out ? dt : "");
    snprintf(g, sizeof g, "%d", c->group_m);
    LangDefine defs[] = {{"N", "72"},       {"K", "50"},     {"BLOCK_M", "32"}, {"BLOCK_N", "32"},
                         {"BLOCK_K", "16"}, {"GROUP_M", g}, {"PERSISTENT", c->persistent ? "true" : "false"}};
    LangOptions lo;
    memset(&lo, 0, sizeof lo);
    lo.kernel = kname;
    lo.defines = defs;
    lo.ndefines = 7;
    IrModule *m = lang_compile(arena, d, af, &lo);
    ck_assert_msg(m && d->nerrors == 0, "%s: %s", kname, d->out.data ? d->out.data : "");
    for (int i = 0; i < m->nfuncs; i++)
        if (!strcmp(m->funcs[i]->name, kname)) return m->funcs[i];
    ck_abort_msg("no kernel %s", kname);
    return NULL;
}

static void run_case(const Case *c)
{
    Arena arena;
    arena_init(&arena);
    Diag d;
    char *src;
    IrFunc *f = compile_kernel(&arena, &d, &src, c);
    int es = c->half_out ? 2 : 4;
    size_t n = (size_t)M * N + TAIL;
    unsigned char *out = malloc(n * (size_t)es);
    memset(out, 0xFF, n * (size_t)es); /* NaN as f32, f16 and bf16 */
    InterpBuffer bufs[] = {{g_a, sizeof g_a, "A"}, {g_b, sizeof g_b, "B"}, {out, n * (size_t)es, "C"}};
    InterpArg args[4] = {{.ptr = g_a}, {.ptr = g_b}, {.ptr = out}, {.i = M}};
    ck_assert_int_eq(f->nparams, 4);
    InterpOptions io = {.grid = {c->grid[0], c->grid[1], 1}, .buffers = bufs, .nbuffers = 3};
    StrBuf err;
    sb_init(&err);
    ck_assert_msg(interp_run(f, args, 4, &io, &err) == 0, "%s", err.data ? err.data : "");
    sb_free(&err);
    double gamma = K * U32 / (1 - K * U32), u = c->half_out ? (c->bf ? 0x1p-8 : 0x1p-11) : 0;
    for (size_t i = 0; i < n; i++) {
        uint16_t h;
        float x;
        memcpy(c->half_out ? (void *)&h : (void *)&x, out + i * (size_t)es, (size_t)es);
        double have = c->half_out ? from_half(h, c->bf) : x;
        if (i >= (size_t)M * N) {
            ck_assert_msg(isnan(have), "group %d persistent %d: wrote past C (element %zu)", c->group_m,
                          c->persistent, i);
            continue;
        }
        double want = g_ref[i], bound = gamma * g_mag[i];
        bound += u * (fabs(want) + bound) + (c->half_out && !c->bf ? 0x1p-25 : 0); /* f16 subnormals */
        ck_assert_msg(fabs(have - want) <= bound, "%s %s out, GROUP_M %d, persistent %d, grid %dx%d: C[%zu][%zu] = %.9g, "
                      "want %.9g (bound %.3g)", c->bf ? "bf16" : "f16", c->half_out ? "half" : "f32", c->group_m,
                      c->persistent, c->grid[0], c->grid[1], i / N, i % N, have, want, bound);
    }
    free(out);
    free(src);
    diag_free(&d);
    arena_free(&arena);
}

/* The grid of tiles: 4 x 3 (M = 100, N = 72 over 32 x 32 blocks). */
static void sweep(bool bf, bool half_out)
{
    make_inputs(bf);
    static const int groups[] = {0, 1, 3, 8};
    for (int g = 0; g < 4; g++) run_case(&(Case){bf, half_out, false, groups[g], {4, 3}});
    static const int grids[][2] = {{1, 1}, {5, 1}, {2, 3}, {20, 1}};
    for (int i = 0; i < 4; i++) run_case(&(Case){bf, half_out, true, 3, {grids[i][0], grids[i][1]}});
    run_case(&(Case){bf, half_out, true, 0, {5, 1}});
}

START_TEST(f16_f32_out) { sweep(false, false); }
END_TEST
START_TEST(f16_half_out) { sweep(false, true); }
END_TEST
START_TEST(bf16_f32_out) { sweep(true, false); }
END_TEST
START_TEST(bf16_half_out) { sweep(true, true); }
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("e2e_matmul_tc");
    TCase *tc = tcase_create("matmul_tc");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, f16_f32_out);
    tcase_add_test(tc, f16_half_out);
    tcase_add_test(tc, bf16_f32_out);
    tcase_add_test(tc, bf16_half_out);
    suite_add_tcase(s, tc);
    return s;
}

TU_MAIN(suite)
