/* test_e2e_assert.c — device_assert from source to the interpreter.
 *
 * A kernel with device_assert is compiled from source (ast_parse, lang_compile)
 * and run on the CPU interpreter over a ragged size with random non-zero
 * inputs. When every element holds, the run succeeds and the output is right;
 * when an element fails in one program, the error names the message (given or
 * the condition's source text), that program's id and the assert's source
 * location. The assert must also survive the target-independent pass pipeline
 * (it is an effect, never dead code).
 */
#include "tests/testutil.h"
#include "compiler/interp/interp.h"
#include "compiler/passes/passes.h"
#include "compiler/lang/lang.h"

#include <string.h>

static const char *SRC =
    "kernel checked(X: *f32, Y: *f32, n: i32, limit: f32, const BLOCK: i32 = 64) {\n"
    "    let offs = program_id(0) * BLOCK + arange(BLOCK);\n"
    "    let mask = offs < n;\n"
    "    let x = load(X + offs, mask = mask, other = 0);\n"
    "    device_assert(!mask || x < limit, \"x out of range\");\n"
    "    device_assert(n > 0);\n"
    "    store(Y + offs, x * 2, mask = mask);\n"
    "}\n";

typedef struct Kern {
    Arena arena;
    Diag diag;
    IrFunc *f;
} Kern;

static void kern_compile(Kern *k)
{
    arena_init(&k->arena);
    diag_init(&k->diag, "assert.tile", SRC);
    AstFile *af = ast_parse(&k->arena, &k->diag, "assert.tile", SRC);
    ck_assert_msg(af && k->diag.nerrors == 0, "parse: %s", k->diag.out.data ? k->diag.out.data : "");
    LangOptions lo;
    memset(&lo, 0, sizeof lo);
    IrModule *m = lang_compile(&k->arena, &k->diag, af, &lo);
    ck_assert_msg(m && m->nfuncs == 1, "compile: %s", k->diag.out.data ? k->diag.out.data : "");
    k->f = m->funcs[0];
}

static void kern_free(Kern *k)
{
    diag_free(&k->diag);
    arena_free(&k->arena);
}

static int count_asserts(const IrBlock *b)
{
    int n = 0;
    for (const IrOp *op = b->first; op; op = op->next) {
        n += op->op == IR_ASSERT;
        for (int r = 0; r < op->nregions; r++) n += count_asserts(op->regions[r]);
    }
    return n;
}

enum { N = 300, BLOCK = 64 };

/* Runs with n = N (5 programs, the last one ragged); x[bad] (if >= 0) is set
 * above the limit. Returns the interpreter's code; its message goes to `err`. */
static int run(IrFunc *f, int bad, int n, StrBuf *err, float *y)
{
    static float x[N];
    uint32_t seed = 12345u;
    for (int i = 0; i < N; i++) {
        seed = seed * 1664525u + 1013904223u;
        x[i] = 0.25f + (float)(seed >> 8) / (float)(1u << 24) * 3.5f; /* in (0.25, 3.75) */
    }
    if (bad >= 0) x[bad] = 9.5f;
    for (int i = 0; i < N; i++) y[i] = -777.0f; /* poison */
    InterpBuffer bufs[2] = {{x, sizeof x, "X"}, {y, N * sizeof(float), "Y"}};
    InterpOptions o;
    memset(&o, 0, sizeof o);
    o.grid[0] = (N + BLOCK - 1) / BLOCK;
    o.buffers = bufs;
    o.nbuffers = 2;
    InterpArg args[4];
    memset(args, 0, sizeof args);
    args[0].ptr = x;
    args[1].ptr = y;
    args[2].i = n;
    args[3].f = 4.0;
    ck_assert_int_eq(f->nparams, 4);
    return interp_run(f, args, 4, &o, err);
}

static void check_all(IrFunc *f)
{
    float y[N];
    StrBuf err;
    sb_init(&err);

    /* every element holds: the kernel runs and computes */
    ck_assert_msg(run(f, -1, N, &err, y) == 0, "%s", err.data ? err.data : "");
    for (int i = 0; i < N; i++) ck_assert_msg(y[i] > 0.4f && y[i] < 7.6f, "y[%d] = %g", i, (double)y[i]);

    /* x[200] breaks the first assert: program 3 (elements 192..255), lane 8 */
    sb_free(&err);
    sb_init(&err);
    ck_assert_int_ne(run(f, 200, N, &err, y), 0);
    const char *m = err.data ? err.data : "";
    ck_assert_msg(strstr(m, "x out of range"), "message missing: %s", m);
    ck_assert_msg(strstr(m, "program (3, 0, 0)"), "program id missing: %s", m);
    ck_assert_msg(strstr(m, "assert.tile:5:5"), "source location missing: %s", m);
    ck_assert_msg(strstr(m, "lane 8"), "lane missing: %s", m);

    /* n = 0 breaks the second, whose default message is its condition's text: program 0 */
    sb_free(&err);
    sb_init(&err);
    ck_assert_int_ne(run(f, -1, 0, &err, y), 0);
    m = err.data ? err.data : "";
    ck_assert_msg(strstr(m, "n > 0"), "default message missing: %s", m);
    ck_assert_msg(strstr(m, "program (0, 0, 0)"), "program id missing: %s", m);
    ck_assert_msg(strstr(m, "assert.tile:6:5"), "source location missing: %s", m);
    sb_free(&err);
}

START_TEST(assert_reports_message_program_and_location)
{
    Kern k;
    kern_compile(&k);
    ck_assert_int_eq(count_asserts(k.f->body), 2);
    check_all(k.f);
    kern_free(&k);
}
END_TEST

START_TEST(assert_survives_passes)
{
    Kern k;
    kern_compile(&k);
    StrBuf err;
    sb_init(&err);
    ck_assert_msg(pass_pipeline(k.f, NULL, NULL, &err), "%s", err.data ? err.data : "");
    sb_free(&err);
    ck_assert_int_eq(count_asserts(k.f->body), 2);
    check_all(k.f);
    kern_free(&k);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("interp_e2e_assert");
    TCase *tc = tcase_create("all");
    tcase_add_test(tc, assert_reports_message_program_and_location);
    tcase_add_test(tc, assert_survives_passes);
    suite_add_tcase(s, tc);
    return s;
}

TU_MAIN(suite)
