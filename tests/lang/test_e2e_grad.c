/* test_e2e_grad.c — grad(f) (lang/grad.c): every derivative rule, on the interpreter,
 * against central finite differences of a float64 C twin of f.
 *
 * Each case is a helper f(x, y, i, T) (x, y: f32 tiles, i: the element index, T: a
 * table of 16 floats) whose body exercises one rule or a mix. A kernel stores f and
 * grad(f) (and grad(grad(f))) for 1000 random points in the case's domain (ragged:
 * not a multiple of the block, outputs poisoned with NaN first); the derivative must
 * match (f(x + h) - f(x - h)) / 2h of the C twin (the second derivative the second
 * difference) to f32 accuracy. Each kernel must verify, and every target-independent
 * pass (CSE merging grad's copy of f with f) must leave the outputs bit-identical.
 * test_symbolic_constants checks that the identity's derivative is the literal 1.0
 * and a constant's 0.0, with no op emitted (what keeps the shipped backward's code);
 * test_const_param_round_trip that a `const d: fn = grad(...)` survives IR text;
 * test_dot_sum_along_ones the non-elementwise rules (dot, sum, trans, broadcasts);
 * test_derivative_as_written_by_hand that constants fold (2 tanh(s / 2) costs 1 - t*t);
 * test_define_grad that -D d=grad(f) names a derivative.
 * The error cases are the diagnostics corpus's tests/diag/sema_grad.tile.
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

typedef struct GradCase {
    const char *body;      /* f's return expression in Kiln */
    RefFn ref;             /* the same in float64 */
    double lo, hi;         /* the domain of x (and y) */
    int second;            /* also check grad(grad(f)) */
} GradCase;

static double r_add(double x, double y, int i) { return x + y; }
static double r_sub(double x, double y, int i) { return y - x; }
static double r_mul(double x, double y, int i) { return x * y + x * x; }
static double r_div(double x, double y, int i) { return x / y + y / x; }
static double r_rem(double x, double y, int i) { return fmod(x, 0.7) + fmod(3.0 * y, x); }
static double r_neg(double x, double y, int i) { return -x * 2.5; }
static double r_exp(double x, double y, int i) { return exp(x) + exp2(-x); }
static double r_log(double x, double y, int i) { return log(x) + log2(x * 3.0); }
static double r_sqrt(double x, double y, int i) { return sqrt(x) + 1.0 / sqrt(x * y); }
static double r_abs(double x, double y, int i) { return fabs(x - y); }
static double r_tanh(double x, double y, int i) { double c = 1.5 * 1.4426950408889634; return c * tanh(x / c); }
static double r_trig(double x, double y, int i) { return sin(3.0 * x) * cos(x * y); }
static double r_floor(double x, double y, int i) { return floor(x) + ceil(2 * x) + x; }
static double r_minmax(double x, double y, int i) { return fmin(x, y) + fmax(x * x, 0.5); }
static double r_where(double x, double y, int i) { return x > y ? x * x : 3.0 * x + y; }
static double r_cast(double x, double y, int i) { return 3.0 * x - (double)(int)(x * 4.0); }
static double r_index(double x, double y, int i) { return x * (double)(i % 7) - 0.3 * fabs((double)(i % 5 - 2)); }
static double r_load(double x, double y, int i) { return x * g_table[i % 16] + (x > 0 ? 2.0 * x : g_table[(i + 3) % 16]); }
static double r_const(double x, double y, int i) { return y * 2.0 + 1.0; }
static double r_ident(double x, double y, int i) { return x; }
static double r_softplus(double x, double y, int i) { return log(1.0 + exp(x)) / (1.0 + exp(-y * x)); }
static double r_alibi(double x, double y, int i)
{
    return x - exp2(-8.0 * (i % 4 + 1) / 4) * 1.4426950408889634 * fabs((double)(i % 9 - 4));
}
static double r_poly(double x, double y, int i) { return 3.0 * x * x * x - 2.0 * x * y + sqrt(x * x + y * y); }

static const GradCase cases[] = {
    {"x + y", r_add, -2, 2, 1},
    {"y - x", r_sub, -2, 2, 1},
    {"x * y + x * x", r_mul, -2, 2, 1},
    {"x / y + y / x", r_div, 0.5, 2, 1},
    {"x % 0.7 + (3.0 * y) % x", r_rem, 0.5, 2, 0},
    {"-x * 2.5", r_neg, -2, 2, 1},
    {"exp(x) + exp2(-x)", r_exp, -2, 2, 1},
    {"log(x) + log2(x * 3.0)", r_log, 0.3, 3, 1},
    {"sqrt(x) + rsqrt(x * y)", r_sqrt, 0.3, 3, 1},
    {"abs(x - y)", r_abs, -2, 2, 0},
    {"1.5 * LOG2E * tanh(x * (1.0 / (1.5 * LOG2E)))", r_tanh, -4, 4, 1},
    {"sin(3.0 * x) * cos(x * y)", r_trig, -2, 2, 1},
    {"floor(x) + ceil(2 * x) + x", r_floor, -2, 2, 0},
    {"minimum(x, y) + maximum(x * x, 0.5)", r_minmax, -2, 2, 0},
    {"where(x > y, x * x, 3.0 * x + y)", r_where, -2, 2, 0},
    {"3.0 * x.to(f64).to(f32) - (x * 4.0).to(i32).to(f32)", r_cast, -2, 2, 0},
    {"x * (i % 7).to(f32) - 0.3 * abs((i % 5 - 2).to(f32))", r_index, -2, 2, 1},
    {"x * load(T + i % 16) + (x > 0.0 ? 2.0 * x : load(T + (i + 3) % 16))", r_load, -2, 2, 0},
    {"y * 2.0 + 1.0", r_const, -2, 2, 1},
    {"x", r_ident, -2, 2, 1},
    {"log(1.0 + exp(x)) / (1.0 + exp(-y * x))", r_softplus, -2, 2, 1},
    {"x - exp2((i % 4 + 1).to(f32) * (-8.0 / 4)) * LOG2E * abs((i % 9 - 4).to(f32))", r_alibi, -3, 3, 1},
    {"3.0 * x * x * x - 2.0 * x * y + sqrt(x * x + y * y)", r_poly, 0.2, 2, 1},
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))

static IrFunc *compile_src(Compiled *c, const char *src) { return compile_named(c, "grad_case.tile", src); }

static void compile_case(Compiled *c, const GradCase *gc)
{
    char src[4096];
    snprintf(src, sizeof src,
             "fn f(x, y, i, T) { return %s; }\n"
             "kernel k(X: *f32, Y: *f32, T: *f32, F: *f32, G: *f32, G2: *f32, n: i32, const BLOCK: i32 = %d)\n"
             "{\n"
             "    let i = program_id(0) * BLOCK + arange(BLOCK);\n"
             "    let m = i < n;\n"
             "    let x = load(X + i, mask = m, other = 1.0);\n"
             "    let y = load(Y + i, mask = m, other = 1.0);\n"
             "    let df = grad(f);\n"
             "    let d2f = grad(df);\n"
             "    store(F + i, f(x, y, i, T), mask = m);\n"
             "    store(G + i, df(x, y, i, T) + zeros([BLOCK], f32), mask = m);\n"
             "    store(G2 + i, d2f(x, y, i, T) + zeros([BLOCK], f32), mask = m);\n"
             "}\n",
             gc->body, BLOCK);
    compile_src(c, src);
}

typedef struct Bufs {
    float x[N], y[N], f[N], g[N], g2[N];
} Bufs;

static void run(const IrFunc *f, Bufs *b)
{
    for (int i = 0; i < N; i++) b->f[i] = b->g[i] = b->g2[i] = NAN;
    InterpArg args[] = {{.ptr = b->x}, {.ptr = b->y}, {.ptr = g_table}, {.ptr = b->f}, {.ptr = b->g}, {.ptr = b->g2},
                        {.i = N}};
    InterpBuffer bufs[] = {{b->x, sizeof b->x, "X"}, {b->y, sizeof b->y, "Y"}, {g_table, sizeof g_table, "T"},
                           {b->f, sizeof b->f, "F"}, {b->g, sizeof b->g, "G"}, {b->g2, sizeof b->g2, "G2"}};
    InterpOptions io = {.grid = {(N + BLOCK - 1) / BLOCK, 1, 1}, .buffers = bufs, .nbuffers = 6};
    StrBuf err;
    sb_init(&err);
    ck_assert_int_eq(f->nparams, 7);
    int rc = interp_run(f, args, 7, &io, &err);
    ck_assert_msg(rc == 0, "interpreter: %s", err.data ? err.data : "");
    sb_free(&err);
}

/* max over the points of |grad - finite differences| / max(1, |finite differences|) */
static double grad_err(RefFn ref, const Bufs *b)
{
    double worst = 0;
    for (int i = 0; i < N; i++) {
        double x = b->x[i], y = b->y[i], h = 1e-6 * fmax(1.0, fabs(x));
        double fd = (ref(x + h, y, i) - ref(x - h, y, i)) / (2 * h);
        worst = fmax(worst, fabs(b->g[i] - fd) / fmax(1.0, fabs(fd)));
    }
    return worst;
}

START_TEST(test_rule)
{
    const GradCase *gc = &cases[_i];
    rng_state = 0x9e3779b97f4a7c15ull + (uint64_t)_i;
    for (int t = 0; t < 16; t++) g_table[t] = (float)rnd(-2, 2);
    Compiled c;
    compile_case(&c, gc);
    Bufs *b = malloc(sizeof *b);
    for (int i = 0; i < N; i++) {
        b->x[i] = (float)rnd(gc->lo, gc->hi);
        b->y[i] = (float)rnd(gc->lo, gc->hi);
    }
    run(c.f, b);
    double worst = 0, worst2 = 0, mag = 0;
    int checked2 = 0;
    for (int i = 0; i < N; i++) {
        double x = b->x[i], y = b->y[i], h = 1e-6 * fmax(1.0, fabs(x));
        double fd = (gc->ref(x + h, y, i) - gc->ref(x - h, y, i)) / (2 * h);
        ck_assert_msg(fabs(b->f[i] - gc->ref(x, y, i)) <= 1e-4 * fmax(1.0, fabs(gc->ref(x, y, i))),
                      "%s: f(%g, %g) = %g, reference %g", gc->body, x, y, b->f[i], gc->ref(x, y, i));
        double e = fabs(b->g[i] - fd) / fmax(1.0, fabs(fd));
        ck_assert_msg(e <= 2e-4, "%s: at x = %.9g, y = %.9g (i = %d): grad %.9g, finite differences %.9g", gc->body,
                      x, y, i, b->g[i], fd);
        worst = fmax(worst, e);
        mag = fmax(mag, fabs(fd));
        if (gc->second) {
            double h2 = 1e-4 * fmax(1.0, fabs(x));
            double fd2 = (gc->ref(x + h2, y, i) - 2 * gc->ref(x, y, i) + gc->ref(x - h2, y, i)) / (h2 * h2);
            double e2 = fabs(b->g2[i] - fd2) / fmax(1.0, fabs(fd2));
            ck_assert_msg(e2 <= 2e-3, "%s: at x = %.9g, y = %.9g: grad(grad) %.9g, second differences %.9g",
                          gc->body, x, y, b->g2[i], fd2);
            worst2 = fmax(worst2, e2);
            checked2++;
        }
    }
    if (getenv("GRAD_VERBOSE"))
        fprintf(stderr, "%-60s max rel err %.2g, second %.2g (%d), max |f'| %.3g\n", gc->body, worst, worst2,
                checked2, mag);
    /* the passes (CSE merges f with grad's copy of it) keep every output bit for bit */
    Bufs *b2 = malloc(sizeof *b2);
    memcpy(b2->x, b->x, sizeof b->x);
    memcpy(b2->y, b->y, sizeof b->y);
    for (const PassInfo *p = pass_pipeline_tab; p->name; p++) p->run(c.f);
    StrBuf err;
    sb_init(&err);
    ck_assert_msg(ir_verify(c.f, &err), "%s after the passes: %s", gc->body, err.data ? err.data : "");
    sb_free(&err);
    run(c.f, b2);
    ck_assert(memcmp(b->f, b2->f, sizeof b->f) == 0);
    ck_assert(memcmp(b->g, b2->g, sizeof b->g) == 0);
    ck_assert(memcmp(b->g2, b2->g2, sizeof b->g2) == 0);
    free(b);
    free(b2);
    compiled_free(&c);
}
END_TEST

/* The check must be able to fail: the same kernel judged against a twin whose
 * derivative is 1% off (x^3 against 1.01 x^3) breaks the bound everywhere. */
static double r_cube(double x, double y, int i) { return x * x * x; }
static double r_cube_off(double x, double y, int i) { return 1.01 * x * x * x; }
START_TEST(test_check_can_fail)
{
    GradCase gc = {"x * x * x", r_cube, 0.5, 2, 0};
    Compiled c;
    compile_case(&c, &gc);
    Bufs *b = malloc(sizeof *b);
    rng_state = 7;
    for (int i = 0; i < N; i++) b->x[i] = (float)rnd(0.5, 2), b->y[i] = (float)rnd(0.5, 2);
    run(c.f, b);
    ck_assert_double_le(grad_err(r_cube, b), 2e-4);
    ck_assert_double_gt(grad_err(r_cube_off, b), 2e-3);
    free(b);
    compiled_free(&c);
}
END_TEST

/* The identity's derivative is the untyped literal 1.0 and a constant's 0.0: no op at all,
 * so `p * grad(no_score_mod)(s, ...)` is exactly `p * 1.0` (the shipped backward's code).
 * The constant's case also checks that another argument that is the same value as x
 * (c(x, x) = 2x in its second parameter) stays a constant. */
START_TEST(test_symbolic_constants)
{
    const char *a = "fn id(s, b) { return s; }\n"
                    "kernel k(X: *f32) { let x = load(X + arange(16)); let d = grad(id); store(X + arange(16), x * d(x, 1)); }\n";
    const char *b = "kernel k(X: *f32) { let x = load(X + arange(16)); store(X + arange(16), x * 1.0); }\n";
    const char *c = "fn c(s, b) { return b * 2.0; }\n"
                    "kernel k(X: *f32) { let x = load(X + arange(16)); let d = grad(c); store(X + arange(16), x * d(x, x)); }\n";
    const char *d = "kernel k(X: *f32) { let x = load(X + arange(16)); store(X + arange(16), x * 0.0); }\n";
    const char *pairs[2][2] = {{a, b}, {c, d}};
    for (int k = 0; k < 2; k++) {
        StrBuf out[2];
        for (int j = 0; j < 2; j++) {
            Compiled c;
            IrFunc *f = compile_src(&c, pairs[k][j]);
            if (k == 1) /* the constant's copy of f is dead code */
                for (const PassInfo *p = pass_pipeline_tab; p->name; p++) p->run(f);
            sb_init(&out[j]);
            ir_print_func(&out[j], f);
            compiled_free(&c);
        }
        /* identical IR */
        ck_assert_msg(strcmp(out[0].data, out[1].data) == 0, "with grad:\n%s\nliteral:\n%s", out[0].data, out[1].data);
        sb_free(&out[0]);
        sb_free(&out[1]);
    }
}
END_TEST

/* The ops of kernel `src` after the target-independent passes, counted by opcode. */
static void count_ops_cb(IrOp *op, void *ctx) { ((int *)ctx)[op->op]++; }
static void op_counts(const char *src, int counts[IR_OP_COUNT])
{
    Compiled c;
    IrFunc *f = compile_src(&c, src);
    for (const PassInfo *p = pass_pipeline_tab; p->name; p++) p->run(f);
    memset(counts, 0, sizeof(int) * IR_OP_COUNT);
    ir_walk(f, count_ops_cb, counts);
    compiled_free(&c);
}

/* Constants fold into the derivative: the softcap-shaped 2 tanh(s / 2), stored with its
 * derived derivative, compiles to the ops of the same kernel with the derivative written
 * by hand (1 - t*t), and CSE leaves one tanh. */
START_TEST(test_derivative_as_written_by_hand)
{
    const char *derived =
        "fn sc(s, b) { return 2.0 * tanh(s / 2.0); }\n"
        "kernel k(X: *f32, Y: *f32) { let x = load(X + arange(16)); let d = grad(sc);\n"
        "    store(Y + arange(16), exp2(sc(x, 0)) * d(x, 0)); }\n";
    const char *by_hand =
        "fn sc(s, b) { return 2.0 * tanh(s / 2.0); }\n"
        "fn sc_grad(s, b) { let t = tanh(s / 2.0); return 1.0 - t * t; }\n"
        "kernel k(X: *f32, Y: *f32) { let x = load(X + arange(16));\n"
        "    store(Y + arange(16), exp2(sc(x, 0)) * sc_grad(x, 0)); }\n";
    int a[IR_OP_COUNT], b[IR_OP_COUNT];
    op_counts(derived, a);
    op_counts(by_hand, b);
    for (int i = 0; i < IR_OP_COUNT; i++)
        ck_assert_msg(a[i] == b[i], "%s: %d ops derived, %d by hand", ir_op_info[i].name, a[i], b[i]);
    ck_assert_int_eq(a[IR_TANH], 1);
}
END_TEST

/* On tiles, grad(f)(x, ...) is the derivative along x + eps * ones (forward mode seeds
 * every element with 1): the rules of dot, sum, trans and the broadcasts, for
 * f = dot(x, W) + sum(x * x, axis = 1)[:, None] + trans(x), against the float64
 * central difference of f along that direction. */
static double f_tile(const double *x, const float *w, int i, int j)
{
    double r = x[j * 16 + i];
    for (int k = 0; k < 16; k++) r += x[i * 16 + k] * w[k * 16 + j] + x[i * 16 + k] * x[i * 16 + k];
    return r;
}

START_TEST(test_dot_sum_along_ones)
{
    const char *src = "fn f(x, W) { return dot(x, W) + sum(x * x, axis = 1)[:, None] + trans(x); }\n"
                      "kernel k(X: *f32, W: *f32, G: *f32)\n"
                      "{\n"
                      "    let o = arange(16)[:, None] * 16 + arange(16)[None, :];\n"
                      "    let d = grad(f);\n"
                      "    store(G + o, d(load(X + o), load(W + o)));\n"
                      "}\n";
    Compiled c;
    IrFunc *f = compile_src(&c, src);
    static float x[256], w[256], g[256];
    rng_state = 99;
    for (int i = 0; i < 256; i++) x[i] = (float)rnd(-1, 1), w[i] = (float)rnd(-1, 1), g[i] = NAN;
    InterpArg args[] = {{.ptr = x}, {.ptr = w}, {.ptr = g}};
    InterpBuffer bufs[] = {{x, sizeof x, "X"}, {w, sizeof w, "W"}, {g, sizeof g, "G"}};
    InterpOptions io = {.grid = {1, 1, 1}, .buffers = bufs, .nbuffers = 3};
    StrBuf err;
    sb_init(&err);
    ck_assert_msg(interp_run(f, args, 3, &io, &err) == 0, "%s", err.data ? err.data : "");
    sb_free(&err);
    double xp[256], xm[256], h = 1e-4;
    for (int i = 0; i < 256; i++) xp[i] = x[i] + h, xm[i] = x[i] - h;
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++) {
            double fd = (f_tile(xp, w, i, j) - f_tile(xm, w, i, j)) / (2 * h);
            ck_assert_msg(fabs(g[i * 16 + j] - fd) <= 1e-4 * fmax(1.0, fabs(fd)), "[%d, %d]: grad %.9g, fd %.9g", i,
                          j, g[i * 16 + j], fd);
        }
    compiled_free(&c);
}
END_TEST

/* A kernel's const derivative parameter (`const d: fn = grad(grad(f))`) prints as
 * `fn = @grad(grad(f))` and the IR parser reads it back. */
START_TEST(test_const_param_round_trip)
{
    const char *src = "fn f(s, b) { return s * s * s; }\n"
                      "kernel k(X: *f32, const g: fn = f, const d: fn = grad(grad(g)))\n"
                      "{ let x = load(X + arange(16)); store(X + arange(16), d(x, 0) + zeros([16], f32)); }\n";
    Compiled c;
    IrFunc *f = compile_src(&c, src);
    StrBuf a, b;
    sb_init(&a);
    sb_init(&b);
    ir_print_func(&a, f);
    ck_assert_msg(strstr(a.data, "d: fn = @grad(grad(f))"), "%s", a.data);
    Diag d2;
    diag_init(&d2, "t.ir", a.data);
    IrModule *m2 = ir_parse(&c.arena, &d2, "t.ir", a.data);
    ck_assert_msg(m2 && d2.nerrors == 0, "%s", d2.out.data ? d2.out.data : "");
    ir_print_func(&b, m2->funcs[0]);
    ck_assert_str_eq(a.data, b.data);
    sb_free(&a);
    sb_free(&b);
    diag_free(&d2);
    compiled_free(&c);
}
END_TEST

/* -D d=grad(f) (and grad(grad(f))) gives a `const d: fn` the derivative, like the default. */
START_TEST(test_define_grad)
{
    const char *src = "fn f(s, b) { return s * s * s; }\n"
                      "kernel k(X: *f32, Y: *f32, const d: fn = f)\n"
                      "{ store(Y + arange(16), d(load(X + arange(16)), 0) + zeros([16], f32)); }\n";
    static const char *values[2] = {"grad(f)", "grad(grad(f))"};
    for (int order = 1; order <= 2; order++) {
        Arena arena;
        arena_init(&arena);
        Diag dg;
        diag_init(&dg, "t.tile", src);
        LangDefine def = {"d", values[order - 1]};
        LangOptions lo;
        memset(&lo, 0, sizeof lo);
        lo.defines = &def;
        lo.ndefines = 1;
        IrModule *m = lang_compile(&arena, &dg, ast_parse(&arena, &dg, "t.tile", src), &lo);
        ck_assert_msg(m && dg.nerrors == 0, "%s", dg.out.data ? dg.out.data : "");
        float x[16], y[16];
        for (int i = 0; i < 16; i++) x[i] = 0.25f * (float)(i - 7), y[i] = NAN;
        InterpArg args[] = {{.ptr = x}, {.ptr = y}};
        InterpBuffer bufs[] = {{x, sizeof x, "X"}, {y, sizeof y, "Y"}};
        InterpOptions io = {.grid = {1, 1, 1}, .buffers = bufs, .nbuffers = 2};
        StrBuf err;
        sb_init(&err);
        ck_assert_msg(interp_run(m->funcs[0], args, 2, &io, &err) == 0, "%s", err.data ? err.data : "");
        sb_free(&err);
        for (int i = 0; i < 16; i++) /* 3 x^2, then 6 x: exact in f32 for these x */
            ck_assert_float_eq(y[i], order == 1 ? 3 * x[i] * x[i] : 6 * x[i]);
        diag_free(&dg);
        arena_free(&arena);
    }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("grad");
    TCase *tc = tcase_create("rules");
    tcase_add_loop_test(tc, test_rule, 0, NCASES);
    tcase_add_test(tc, test_check_can_fail);
    tcase_add_test(tc, test_symbolic_constants);
    tcase_add_test(tc, test_const_param_round_trip);
    tcase_add_test(tc, test_dot_sum_along_ones);
    tcase_add_test(tc, test_derivative_as_written_by_hand);
    tcase_add_test(tc, test_define_grad);
    suite_add_tcase(s, tc);
    return s;
}

TU_MAIN(suite)
