/* test_e2e_rescale.c — rescale(f, a, b) (lang/rescale.c): x -> b * f(a * x, ...), the
 * factors folded through f's body.
 *
 * test_rule: each case is a helper f(x, y, i, T) exercising the fold rules (products,
 * quotients, sums with independent and constant terms, negation, abs, where, comparisons
 * and elementwise max/min — those with a negative factor too, where the fold must not
 * apply — tanh/exp, tables, sums along an axis). A kernel stores rescale(f, A, B)(x, ...) and
 * rescale(grad(f), A, 1.0) for 1000 random points (ragged, outputs poisoned with NaN); they
 * must match B * f(A * x) and f'(A * x) of a float64 C twin to f32 accuracy, for three
 * factor pairs (the attention programs' LN2, LOG2E; a negative one; a large one), and
 * every pass must keep the outputs bit for bit.
 * test_costs_nothing: rescale(f, LN2, LOG2E) of `return s;` is `s` itself (the IR of a
 * kernel storing x), and of ALiBi's `s - slope * d` has exactly the ops of the log2-unit
 * hook written by hand, `s - (slope * LOG2E) * d` (the factor lands on the scalar).
 * test_errors: a non-constant or zero factor, grad of a rescaled function.
 */
#include "tests/testutil.h"
#include "compiler/interp/interp.h"
#include "compiler/passes/passes.h"
#include "compiler/lang/lang.h"
#include "tests/lang/lang_case.h"

#include <math.h>
#include <string.h>

#define N 1000
#define BLOCK 128

static float g_table[16];

typedef double (*RefFn)(double x, double y, int i);

typedef struct RCase {
    const char *body;
    RefFn ref;
    double lo, hi;   /* the domain of x (and y) */
} RCase;

static double r_ident(double x, double y, int i) { return x; }
static double r_alibi(double x, double y, int i) { return x - y * y * fabs((double)(i % 9 - 4)); }
static double r_softcap(double x, double y, int i) { return 1.5 * tanh(x * (1.0 / 1.5)); }
static double r_muldiv(double x, double y, int i) { return (x * y) / (1.5 + y * y) + 2.0 * x / 3.0 - 1.0 / (x + 3.0); }
static double r_neg(double x, double y, int i) { return -(x + 0.25) - fabs(x); }
static double r_where(double x, double y, int i) { return x > 0.5 ? x * y : -x + 1.0; }
static double r_minmax(double x, double y, int i) { return fmax(x, y) + fmin(x * 2.0, 0.75); }
static double r_table(double x, double y, int i) { return x + g_table[i % 16] * y; }
static double r_exp(double x, double y, int i) { return exp(x * 0.5) + x * x; }

static const RCase cases[] = {
    {"x", r_ident, -3, 3},
    {"x - (y * y) * abs((i % 9 - 4).to(f32))", r_alibi, -3, 3},
    {"1.5 * tanh(x * (1.0 / 1.5))", r_softcap, -4, 4},
    {"(x * y) / (1.5 + y * y) + 2.0 * x / 3.0 - 1.0 / (x + 3.0)", r_muldiv, -1, 1},
    {"-(x + 0.25) - abs(x)", r_neg, -2, 2},
    {"where(x > 0.5, x * y, -x + 1.0)", r_where, -2, 2},
    {"max(x, y) + min(x * 2.0, 0.75)", r_minmax, -2, 2},
    {"x + load(T + i % 16) * y", r_table, -2, 2},
    {"exp(x * 0.5) + x * x", r_exp, -2, 2},
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))
static const double k_factors[][2] = {{0.6931471805599453, 1.4426950408889634}, {-0.5, 3.0}, {8.0, 0.125}};
#define NFACTORS 3

static IrFunc *compile_src(Compiled *c, const char *src) { return compile_named(c, "rescale_case.tile", src); }

typedef struct Bufs {
    float x[N], y[N], g[N], dg[N];
} Bufs;

static void run(const IrFunc *f, Bufs *b)
{
    for (int i = 0; i < N; i++) b->g[i] = b->dg[i] = NAN;
    InterpArg args[] = {{.ptr = b->x}, {.ptr = b->y}, {.ptr = g_table}, {.ptr = b->g}, {.ptr = b->dg}, {.i = N}};
    InterpBuffer bufs[] = {{b->x, sizeof b->x, "X"}, {b->y, sizeof b->y, "Y"}, {g_table, sizeof g_table, "T"},
                           {b->g, sizeof b->g, "G"}, {b->dg, sizeof b->dg, "DG"}};
    InterpOptions io = {.grid = {(N + BLOCK - 1) / BLOCK, 1, 1}, .buffers = bufs, .nbuffers = 5};
    StrBuf err;
    sb_init(&err);
    int rc = interp_run(f, args, 6, &io, &err);
    ck_assert_msg(rc == 0, "interpreter: %s", err.data ? err.data : "");
    sb_free(&err);
}

START_TEST(test_rule)
{
    const RCase *rc = &cases[_i / NFACTORS];
    double a = k_factors[_i % NFACTORS][0], bf = k_factors[_i % NFACTORS][1];
    rng_state = 0x51ed270b27a1f3c5ull + (uint64_t)_i;
    for (int t = 0; t < 16; t++) g_table[t] = (float)rnd(-2, 2);
    char src[4096];
    snprintf(src, sizeof src,
             "fn f(x, y, i, T) { return %s; }\n"
             "kernel k(X: *f32, Y: *f32, T: *f32, G: *f32, DG: *f32, n: i32, const BLOCK: i32 = %d)\n"
             "{\n"
             "    let i = program_id(0) * BLOCK + arange(BLOCK);\n"
             "    let m = i < n;\n"
             "    let x = load(X + i, mask = m, other = 1.0);\n"
             "    let y = load(Y + i, mask = m, other = 1.0);\n"
             "    let g = rescale(f, %.17g, %.17g);\n"
             "    let dg = rescale(grad(f), %.17g, 1.0);\n"
             "    store(G + i, g(x, y, i, T) + zeros([BLOCK], f32), mask = m);\n"
             "    store(DG + i, dg(x, y, i, T) + zeros([BLOCK], f32), mask = m);\n"
             "}\n",
             rc->body, BLOCK, a, bf, a);
    Compiled c;
    compile_src(&c, src);
    Bufs *b = malloc(sizeof *b);
    /* x is the argument in the rescaled units: a * x lies in the case's domain */
    for (int i = 0; i < N; i++) b->x[i] = (float)(rnd(rc->lo, rc->hi) / a), b->y[i] = (float)rnd(rc->lo, rc->hi);
    run(c.f, b);
    for (int i = 0; i < N; i++) {
        double x = b->x[i], y = b->y[i], xa = a * x, h = 1e-6 * fmax(1.0, fabs(xa));
        double want = bf * rc->ref(xa, y, i), fd = (rc->ref(xa + h, y, i) - rc->ref(xa - h, y, i)) / (2 * h);
        ck_assert_msg(fabs(b->g[i] - want) <= 2e-6 * fmax(1.0, fabs(want)) * fmax(1.0, fabs(bf)),
                      "%s, rescale(f, %g, %g) at x = %.9g (i = %d): %.9g, reference %.9g", rc->body, a, bf, x, i,
                      b->g[i], want);
        ck_assert_msg(fabs(b->dg[i] - fd) <= 2e-4 * fmax(1.0, fabs(fd)),
                      "%s, rescale(grad(f), %g, 1) at x = %.9g: %.9g, finite differences %.9g", rc->body, a, x,
                      b->dg[i], fd);
    }
    /* the passes keep every output bit for bit */
    Bufs *b2 = malloc(sizeof *b2);
    memcpy(b2->x, b->x, sizeof b->x);
    memcpy(b2->y, b->y, sizeof b->y);
    for (const PassInfo *p = pass_pipeline_tab; p->name; p++) p->run(c.f);
    run(c.f, b2);
    ck_assert(memcmp(b->g, b2->g, sizeof b->g) == 0);
    ck_assert(memcmp(b->dg, b2->dg, sizeof b->dg) == 0);
    free(b);
    free(b2);
    compiled_free(&c);
}
END_TEST

/* The reference must be able to catch a wrong factor: the last case's kernel judged with
 * a twin scaled 1% off fails. */
START_TEST(test_check_can_fail)
{
    Compiled c;
    compile_src(&c, "fn f(x, y, i, T) { return x * y; }\n"
                    "kernel k(X: *f32, Y: *f32, T: *f32, G: *f32, DG: *f32, n: i32) {\n"
                    "    let i = arange(1024); let m = i < n; let g = rescale(f, 0.5, 2.02);\n"
                    "    store(G + i, g(load(X + i, mask = m), load(Y + i, mask = m), i, T), mask = m); }\n");
    Bufs *b = malloc(sizeof *b);
    rng_state = 3;
    for (int i = 0; i < N; i++) b->x[i] = (float)rnd(1, 2), b->y[i] = (float)rnd(1, 2);
    run(c.f, b);
    int bad = 0;
    for (int i = 0; i < N; i++) bad += fabs(b->g[i] - (double)b->x[i] * b->y[i]) > 2e-6 * fabs(b->x[i] * b->y[i]);
    ck_assert_int_eq(bad, N);
    free(b);
    compiled_free(&c);
}
END_TEST

/* ops with a tile result: the per-element cost (a scalar op is once per program) */
static void count_ops_cb(IrOp *op, void *ctx)
{
    if (op->nres && op->res[0]->type.rank > 0) ((int *)ctx)[op->op]++;
}
static void op_counts(const char *src, int counts[IR_OP_COUNT], StrBuf *ir)
{
    Compiled c;
    IrFunc *f = compile_src(&c, src);
    for (const PassInfo *p = pass_pipeline_tab; p->name; p++) p->run(f);
    memset(counts, 0, sizeof(int) * IR_OP_COUNT);
    ir_walk(f, count_ops_cb, counts);
    if (ir) ir_print_func(ir, f);
    compiled_free(&c);
}

START_TEST(test_costs_nothing)
{
    const char *pairs[][2] = {
        {"fn id(s, b) { return s; }\n"
         "kernel k(X: *f32) { let x = load(X + arange(16)); let g = rescale(id, LN2, LOG2E); store(X + arange(16), g(x, 1)); }\n",
         "kernel k(X: *f32) { let x = load(X + arange(16)); store(X + arange(16), x); }\n"},
        {"fn alibi(s, sl, d) { return s - sl * abs(d.to(f32)); }\n"
         "kernel k(X: *f32, S: *f32) { let r = arange(16); let x = load(X + r[:, None] * 16 + r[None, :]);\n"
         "    let g = rescale(alibi, LN2, LOG2E); let d = r[:, None] - r[None, :];\n"
         "    store(X + r[:, None] * 16 + r[None, :], exp2(g(x, load(S), d))); }\n",
         "fn alibi2(s, sl, d) { return s - (sl * LOG2E) * abs(d.to(f32)); }\n"
         "kernel k(X: *f32, S: *f32) { let r = arange(16); let x = load(X + r[:, None] * 16 + r[None, :]);\n"
         "    let d = r[:, None] - r[None, :];\n"
         "    store(X + r[:, None] * 16 + r[None, :], exp2(alibi2(x, load(S), d))); }\n"},
        {"fn sc(s, c) { return c * tanh(s * (1.0 / c)); }\n"
         "kernel k(X: *f32, C: *f32) { let x = load(X + arange(16)); let g = rescale(sc, LN2, LOG2E);\n"
         "    store(X + arange(16), g(x, load(C))); }\n",
         "fn sc2(s, c) { let c2 = c * LOG2E; return c2 * tanh(s * (1.0 / c2)); }\n"
         "kernel k(X: *f32, C: *f32) { let x = load(X + arange(16)); store(X + arange(16), sc2(x, load(C))); }\n"},
    };
    for (int k = 0; k < 3; k++) {
        int a[IR_OP_COUNT], b[IR_OP_COUNT];
        StrBuf ia, ib;
        sb_init(&ia), sb_init(&ib);
        op_counts(pairs[k][0], a, &ia);
        op_counts(pairs[k][1], b, &ib);
        int tile_a = 0, tile_b = 0;
        for (int i = 0; i < IR_OP_COUNT; i++) tile_a += a[i], tile_b += b[i];
        if (k == 0) ck_assert_msg(!strcmp(ia.data, ib.data), "rescaled identity:\n%s\nplain:\n%s", ia.data, ib.data);
        ck_assert_msg(a[IR_MUL] == b[IR_MUL] && a[IR_SUB] == b[IR_SUB] && a[IR_TANH] == b[IR_TANH] &&
                          tile_a == tile_b,
                      "case %d: %d ops rescaled (%d mul), %d written in log2 units (%d mul)\n%s\n%s", k, tile_a,
                      a[IR_MUL], tile_b, b[IR_MUL], ia.data, ib.data);
        sb_free(&ia), sb_free(&ib);
    }
}
END_TEST

static const char *compile_errors(const char *src)
{
    static char out[2048];
    Arena arena;
    arena_init(&arena);
    Diag d;
    diag_init(&d, "e.tile", src);
    AstFile *af = ast_parse(&arena, &d, "e.tile", src);
    LangOptions lo;
    memset(&lo, 0, sizeof lo);
    if (af) lang_compile(&arena, &d, af, &lo);
    snprintf(out, sizeof out, "%s", d.out.data ? d.out.data : "");
    diag_free(&d);
    arena_free(&arena);
    return out;
}

START_TEST(test_errors)
{
    const char *e = compile_errors("fn f(s) { return s; }\n"
                                   "kernel k(X: *f32, a: f32) { let g = rescale(f, a, 1.0); store(X, g(load(X))); }\n");
    ck_assert_msg(strstr(e, "e.tile:2:48: error: rescale: the argument's factor must be a finite, nonzero "
                            "compile-time number"), "%s", e);
    e = compile_errors("fn f(s) { return s; }\n"
                       "kernel k(X: *f32) { let g = rescale(f, 2.0, 0.0); store(X, g(load(X))); }\n");
    ck_assert_msg(strstr(e, "error: rescale: the result's factor must be"), "%s", e);
    e = compile_errors("fn f(s) { return s; }\n"
                       "kernel k(X: *f32) { let g = rescale(f, 2.0, 1.0); let d = grad(g); store(X, d(load(X))); }\n");
    ck_assert_msg(strstr(e, "error: grad(rescale(f)): write rescale(grad(...), ...) instead"), "%s", e);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("rescale");
    TCase *tc = tcase_create("rules");
    tcase_add_loop_test(tc, test_rule, 0, NCASES * NFACTORS);
    tcase_add_test(tc, test_check_can_fail);
    tcase_add_test(tc, test_costs_nothing);
    tcase_add_test(tc, test_errors);
    suite_add_tcase(s, tc);
    return s;
}

TU_MAIN(suite)
