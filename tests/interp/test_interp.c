/* test_interp.c — the CPU interpreter on IR built with the builder: masked
 * loads/stores over a ragged grid, out-of-bounds errors (with messages) and
 * masked lanes next to guard pages, integer wrap, shifts, division by zero,
 * float/int casts with rounding and saturation, f16 arithmetic rounding,
 * loops with carried values, if, dot, reduce, shape ops, atomics, assert. */
#include "tests/testutil.h"
#include "compiler/interp/interp.h"
#include "compiler/support/diag.h"

#include <math.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* ---- building kernels ---- */
typedef struct T {
    Arena a;
    IrFunc *f;
    IrBuilder b;
} T;

static void t_init(T *t, const char *name)
{
    arena_init(&t->a);
    SrcLoc loc = {"t.tile", 1, 1};
    t->f = ir_func_new(&t->a, name, loc);
    t->b.f = t->f;
    t->b.block = t->f->body;
    t->b.before = NULL;
    t->b.loc = loc;
}

static void at(T *t, int line) { t->b.loc.line = line, t->b.loc.col = 5; }
static IrType sc(IrElem e) { return ir_type_scalar(e); }
static IrType tile(IrElem e, int n) { return ir_type_tile(ir_type_scalar(e), 1, &n); }
static IrType tile2(IrElem e, int m, int n) { int32_t s[2] = {m, n}; return ir_type_tile(ir_type_scalar(e), 2, s); }
static IrType ptile(IrElem pointee, int n) { return ir_type_tile(ir_type_ptr(pointee), 1, &n); }
static IrType ptile2(IrElem pointee, int m, int n) { int32_t s[2] = {m, n}; return ir_type_tile(ir_type_ptr(pointee), 2, s); }

static IrValue *op1(T *t, IrOpcode o, IrType rt, IrValue *x) { return irb_op1(&t->b, o, rt, x); }
static IrValue *op2(T *t, IrOpcode o, IrType rt, IrValue *x, IrValue *y) { return irb_op2(&t->b, o, rt, x, y); }
static IrValue *cmp(T *t, IrCmp c, IrType rt, IrValue *x, IrValue *y)
{
    IrValue *v = op2(t, IR_CMP, rt, x, y);
    v->def->attr[0] = c;
    return v;
}
static IrValue *ci(T *t, IrType ty, int64_t v) { return irb_const_int(&t->b, ty, v); }
static IrValue *cf(T *t, IrType ty, double v) { return irb_const_float(&t->b, ty, v); }
static IrValue *arange(T *t, int n)
{
    IrValue *v = irb_op(&t->b, IR_ARANGE, tile(IR_I32, n), 0, NULL);
    v->def->attr[1] = n;
    return v;
}
static IrValue *pid(T *t, int axis)
{
    IrValue *v = irb_op(&t->b, IR_PROGRAM_ID, sc(IR_I32), 0, NULL);
    v->def->attr[0] = axis;
    return v;
}
static void emit0(T *t, IrOpcode o, int nargs, IrValue **args)
{
    irb_insert(&t->b, ir_op_new(t->f, o, t->b.loc, nargs, args, 0, NULL));
}
static void ret(T *t) { emit0(t, IR_RETURN, 0, NULL); }
static IrValue *load(T *t, IrType rt, IrValue *p, IrValue *mask, IrValue *other)
{
    IrValue *args[3] = {p, mask, other};
    return irb_op(&t->b, IR_LOAD, rt, other ? 3 : mask ? 2 : 1, args);
}
static void store(T *t, IrValue *p, IrValue *v, IrValue *mask)
{
    IrValue *args[3] = {p, v, mask};
    emit0(t, IR_STORE, mask ? 3 : 2, args);
}

static void t_free(T *t) { arena_free(&t->a); }

/* offs = program_id(0) * BLOCK + arange(BLOCK); mask = offs < n */
static IrValue *block_offsets(T *t, int block, IrValue *n, IrValue **mask)
{
    IrValue *base = op2(t, IR_MUL, sc(IR_I32), pid(t, 0), ci(t, sc(IR_I32), block));
    IrValue *offs = op2(t, IR_ADD, tile(IR_I32, block), op1(t, IR_SPLAT, tile(IR_I32, block), base), arange(t, block));
    *mask = cmp(t, IR_CMP_LT, tile(IR_I1, block), offs, op1(t, IR_SPLAT, tile(IR_I32, block), n));
    return offs;
}

static IrValue *ptrs(T *t, IrValue *p, IrValue *offs, int block)
{
    IrElem pe = (IrElem)p->type.pointee;
    return op2(t, IR_ADDPTR, ptile(pe, block), op1(t, IR_SPLAT, ptile(pe, block), p), offs);
}

/* z = x + y over n elements, BLOCK per program, masked (masked = true) or not. */
static void build_vec_add(T *t, int block, bool masked)
{
    t_init(t, "vec_add");
    IrValue *X = ir_func_add_param(t->f, ir_type_ptr(IR_F32), "X");
    IrValue *Y = ir_func_add_param(t->f, ir_type_ptr(IR_F32), "Y");
    IrValue *Z = ir_func_add_param(t->f, ir_type_ptr(IR_F32), "Z");
    IrValue *n = ir_func_add_param(t->f, sc(IR_I32), "n");
    IrValue *mask;
    IrValue *offs = block_offsets(t, block, n, &mask);
    if (!masked) mask = NULL;
    at(t, 5);
    IrValue *x = load(t, tile(IR_F32, block), ptrs(t, X, offs, block), mask, NULL);
    at(t, 6);
    IrValue *y = load(t, tile(IR_F32, block), ptrs(t, Y, offs, block), mask, NULL);
    IrValue *z = op2(t, IR_ADD, tile(IR_F32, block), x, y);
    at(t, 7);
    store(t, ptrs(t, Z, offs, block), z, mask);
    ret(t);
}

/* A page-aligned region whose end abuts a PROT_NONE page: `bytes` usable bytes
 * ending exactly at the guard, so any access past the end faults. */
typedef struct Guarded {
    void *base;
    size_t len;
    void *data;
} Guarded;

static Guarded guarded_alloc(size_t bytes)
{
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    size_t body = (bytes + pg - 1) / pg * pg;
    Guarded g;
    g.len = body + 2 * pg;
    g.base = mmap(NULL, g.len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ck_assert(g.base != MAP_FAILED);
    ck_assert_int_eq(mprotect(g.base, pg, PROT_NONE), 0);                    /* before */
    ck_assert_int_eq(mprotect((char *)g.base + pg + body, pg, PROT_NONE), 0);  /* after */
    g.data = (char *)g.base + pg + body - bytes;
    return g;
}

static void guarded_free(Guarded *g) { munmap(g->base, g->len); }

static float rnd(unsigned *s)
{
    *s = *s * 1103515245u + 12345u;
    return (float)((*s >> 8) & 0xffff) / 65536.0f * 2.0f - 1.0f + 1.0f / 1024.0f; /* never 0 */
}

START_TEST(vec_add_masked_ragged)
{
    /* n = 1000 with BLOCK 256: the last program has 24 live lanes; the other 232
     * point into a guard page, so touching one would crash the test. */
    const int n = 1000, block = 256;
    T t;
    build_vec_add(&t, block, true);
    Guarded gx = guarded_alloc(n * 4), gy = guarded_alloc(n * 4), gz = guarded_alloc(n * 4);
    float *x = gx.data, *y = gy.data, *z = gz.data;
    unsigned s = 7;
    for (int i = 0; i < n; i++) x[i] = rnd(&s), y[i] = rnd(&s), z[i] = NAN;
    InterpBuffer bufs[3] = {{x, n * 4, "X"}, {y, n * 4, "Y"}, {z, n * 4, "Z"}};
    InterpArg args[4] = {{.ptr = x}, {.ptr = y}, {.ptr = z}, {.i = n}};
    InterpOptions o = {{(n + block - 1) / block, 1, 1}, bufs, 3};
    StrBuf err;
    sb_init(&err);
    int rc = interp_run(t.f, args, 4, &o, &err);
    ck_assert_msg(rc == 0, "%s", err.data ? err.data : "");
    for (int i = 0; i < n; i++) ck_assert_float_eq(z[i], x[i] + y[i]);
    sb_free(&err);
    guarded_free(&gx), guarded_free(&gy), guarded_free(&gz);
    t_free(&t);
}
END_TEST

START_TEST(unmasked_oob_load_reports)
{
    const int n = 1000, block = 256;
    T t;
    build_vec_add(&t, block, false);
    /* Buffers inside larger arrays with poisoned neighbours: the registered part
     * is only n floats, the rest must never be read (reported) or written. */
    float *x = calloc(2048, 4), *y = calloc(2048, 4), *z = calloc(2048, 4);
    for (int i = 0; i < 2048; i++) x[i] = y[i] = 1.0f, z[i] = -7.0f;
    InterpBuffer bufs[3] = {{x, n * 4, "X"}, {y, n * 4, "Y"}, {z, n * 4, "Z"}};
    InterpArg args[4] = {{.ptr = x}, {.ptr = y}, {.ptr = z}, {.i = n}};
    InterpOptions o = {{4, 1, 1}, bufs, 3};
    StrBuf err;
    sb_init(&err);
    int rc = interp_run(t.f, args, 4, &o, &err);
    ck_assert_int_eq(rc, 1);
    ck_assert_ptr_nonnull(err.data);
    /* Program 3 covers 768..1023; lane 232 is element 1000, 4000 bytes into X. */
    ck_assert_msg(strstr(err.data, "program (3, 0, 0)"), "%s", err.data);
    ck_assert_msg(strstr(err.data, "t.tile:5:5"), "%s", err.data);
    ck_assert_msg(strstr(err.data, "op 'load'"), "%s", err.data);
    ck_assert_msg(strstr(err.data, "lane 232 (index [232])"), "%s", err.data);
    ck_assert_msg(strstr(err.data, "buffer 'X' + 4000 bytes"), "%s", err.data);
    for (int i = n; i < 2048; i++) ck_assert_float_eq(z[i], -7.0f);
    for (int i = 0; i < 768; i++) ck_assert_float_eq(z[i], 2.0f); /* programs 0..2 ran */
    sb_free(&err);
    free(x), free(y), free(z);
    t_free(&t);
}
END_TEST

START_TEST(oob_store_before_buffer_reports)
{
    /* store to Z - 2 + arange(4): lane 0 is 8 bytes before Z. */
    T t;
    t_init(&t, "neg");
    IrValue *Z = ir_func_add_param(t.f, ir_type_ptr(IR_F32), "Z");
    IrValue *offs = op2(&t, IR_SUB, tile(IR_I32, 4), arange(&t, 4), ci(&t, tile(IR_I32, 4), 2));
    at(&t, 9);
    store(&t, ptrs(&t, Z, offs, 4), cf(&t, tile(IR_F32, 4), 1.5), NULL);
    ret(&t);
    float buf[8] = {0};
    InterpBuffer b = {buf + 2, 16, "Z"};
    InterpArg a = {.ptr = buf + 2};
    InterpOptions o = {{1, 1, 1}, &b, 1};
    StrBuf err;
    sb_init(&err);
    ck_assert_int_eq(interp_run(t.f, &a, 1, &o, &err), 1);
    ck_assert_msg(strstr(err.data, "t.tile:9:5: op 'store'"), "%s", err.data);
    ck_assert_msg(strstr(err.data, "lane 0 (index [0]): address is buffer 'Z' - 8 bytes"), "%s", err.data);
    ck_assert_float_eq(buf[0], 0.0f);
    ck_assert_float_eq(buf[1], 0.0f);
    sb_free(&err);
    t_free(&t);
}
END_TEST

/* Pointer arithmetic is checked in element space: X + 2^62 f32 elements is
 * X + 2^64 bytes, which wraps to X itself in 64-bit addresses; it must be an
 * out-of-bounds error, not a read of X[0]. So must an offset below address 0,
 * a u64 offset above INT64_MAX, and a wild pointer brought back by a second
 * addptr. A masked-off wild lane touches nothing and is no error. */
static int run_wild(IrElem off_elem, int64_t k, int64_t back, bool masked, StrBuf *err)
{
    T t;
    t_init(&t, "wild");
    IrValue *X = ir_func_add_param(t.f, ir_type_ptr(IR_F32), "X");
    IrValue *Z = ir_func_add_param(t.f, ir_type_ptr(IR_F32), "Z");
    IrValue *p = ptrs(&t, X, ci(&t, tile(off_elem, 4), k), 4);
    if (back) p = op2(&t, IR_ADDPTR, ptile(IR_F32, 4), p, ci(&t, tile(IR_I64, 4), back));
    IrValue *mask = masked ? cmp(&t, IR_CMP_LT, tile(IR_I1, 4), arange(&t, 4), ci(&t, tile(IR_I32, 4), 0)) : NULL;
    at(&t, 3);
    IrValue *v = load(&t, tile(IR_F32, 4), p, mask, NULL);
    store(&t, ptrs(&t, Z, arange(&t, 4), 4), v, NULL);
    ret(&t);
    static float x[4] = {1, 2, 3, 4}, z[4];
    InterpBuffer bufs[2] = {{x, sizeof x, "X"}, {z, sizeof z, "Z"}};
    InterpArg args[2] = {{.ptr = x}, {.ptr = z}};
    InterpOptions o = {{1, 1, 1}, bufs, 2};
    int rc = interp_run(t.f, args, 2, &o, err);
    t_free(&t);
    return rc;
}

START_TEST(addptr_overflow_is_out_of_bounds)
{
    const struct { IrElem e; int64_t k, back; } cases[] = {
        {IR_I64, INT64_C(1) << 62, 0},              /* wraps to X exactly */
        {IR_I64, INT64_C(1) << 61, INT64_C(1) << 61}, /* in two steps */
        {IR_I64, -(INT64_C(1) << 62), 0},           /* below address 0 */
        {IR_I64, INT64_MAX, 0},                     /* the byte offset overflows */
        {IR_I64, INT64_C(1) << 62, -(INT64_C(1) << 62)}, /* wild stays wild */
        {IR_U64, -(INT64_C(1) << 62), 0},           /* as u64: 3 * 2^62, above INT64_MAX */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        StrBuf err;
        sb_init(&err);
        ck_assert_msg(run_wild(cases[c].e, cases[c].k, cases[c].back, false, &err) == 1, "case %zu ran", c);
        ck_assert_msg(err.data && strstr(err.data, "t.tile:3:5: op 'load'"), "case %zu: %s", c, err.data);
        ck_assert_msg(strstr(err.data, "overflowed the address space"), "case %zu: %s", c, err.data);
        sb_free(&err);
        sb_init(&err);
        ck_assert_msg(run_wild(cases[c].e, cases[c].k, cases[c].back, true, &err) == 0, "case %zu masked: %s", c,
                      err.data ? err.data : "");
        sb_free(&err);
    }
    /* in-range offsets of every sign still work: X + 3 - 3 reads X */
    StrBuf err;
    sb_init(&err);
    ck_assert_msg(run_wild(IR_I64, 3, -3, false, &err) == 0, "%s", err.data ? err.data : "");
    sb_free(&err);
}
END_TEST

START_TEST(masked_load_reads_other)
{
    /* load(X + arange(8), mask = arange(8) < 3, other = -2.5) on a 3-float buffer
     * followed by a guard page. */
    T t;
    t_init(&t, "other");
    IrValue *X = ir_func_add_param(t.f, ir_type_ptr(IR_F32), "X");
    IrValue *Z = ir_func_add_param(t.f, ir_type_ptr(IR_F32), "Z");
    IrValue *ar = arange(&t, 8);
    IrValue *m = cmp(&t, IR_CMP_LT, tile(IR_I1, 8), ar, ci(&t, tile(IR_I32, 8), 3));
    IrValue *v = load(&t, tile(IR_F32, 8), ptrs(&t, X, ar, 8), m, cf(&t, tile(IR_F32, 8), -2.5));
    store(&t, ptrs(&t, Z, ar, 8), v, NULL);
    ret(&t);
    Guarded g = guarded_alloc(12);
    float *x = g.data, z[8];
    x[0] = 1, x[1] = 2, x[2] = 3;
    InterpBuffer b[2] = {{x, 12, "X"}, {z, sizeof z, "Z"}};
    InterpArg a[2] = {{.ptr = x}, {.ptr = z}};
    InterpOptions o = {{1, 1, 1}, b, 2};
    StrBuf err;
    sb_init(&err);
    ck_assert_int_eq(interp_run(t.f, a, 2, &o, &err), 0);
    float want[8] = {1, 2, 3, -2.5, -2.5, -2.5, -2.5, -2.5};
    for (int i = 0; i < 8; i++) ck_assert_float_eq(z[i], want[i]);
    sb_free(&err);
    guarded_free(&g);
    t_free(&t);
}
END_TEST

/* ---- scalar ops, table driven: P[0] = op(a, b) ---- */
typedef struct Case {
    IrOpcode op;
    int attr;             /* cmp predicate */
    IrElem e, re;         /* operand and result element types */
    double fa, fb;        /* float operands */
    int64_t ia, ib;       /* integer operands */
    uint64_t want;        /* expected bits in memory, zero-extended */
} Case;

static int run_case(const Case *c, uint64_t *out, StrBuf *err)
{
    T t;
    t_init(&t, "scalar");
    IrValue *P = ir_func_add_param(t.f, ir_type_ptr(c->re), "P");
    IrValue *a = ir_func_add_param(t.f, sc(c->e), "a");
    IrValue *b = ir_func_add_param(t.f, sc(c->e), "b");
    bool bin = c->op != IR_CAST && c->op != IR_NEG && c->op != IR_NOT && c->op != IR_ABS &&
               !(c->op >= IR_EXP && c->op <= IR_CEIL);
    at(&t, 3);
    IrValue *r = bin ? op2(&t, c->op, sc(c->re), a, b) : op1(&t, c->op, sc(c->re), a);
    r->def->attr[0] = c->attr;
    store(&t, P, r, NULL);
    ret(&t);
    *out = 0;
    InterpBuffer buf = {out, 8, "P"};
    InterpArg args[3] = {{.ptr = out}, {.i = c->ia, .f = c->fa}, {.i = c->ib, .f = c->fb}};
    InterpOptions o = {{1, 1, 1}, &buf, 1};
    int rc = interp_run(t.f, args, 3, &o, err);
    t_free(&t);
    return rc;
}

static uint64_t fbits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static uint64_t dbits(double d) { uint64_t u; memcpy(&u, &d, 8); return u; }

START_TEST(scalar_op_table)
{
    const Case cases[] = {
        /* integer wrap */
        {IR_ADD, 0, IR_I32, IR_I32, 0, 0, 2147483647, 1, 0x80000000u},
        {IR_MUL, 0, IR_I8, IR_I8, 0, 0, 100, 3, 44},
        {IR_SUB, 0, IR_U32, IR_U32, 0, 0, 0, 1, 0xffffffffu},
        {IR_SUB, 0, IR_U8, IR_U8, 0, 0, 3, 5, 254},
        {IR_MUL, 0, IR_I64, IR_I64, 0, 0, INT64_MAX, 2, (uint64_t)-2},
        {IR_NEG, 0, IR_I32, IR_I32, 0, 0, INT32_MIN, 0, 0x80000000u},
        {IR_ABS, 0, IR_I16, IR_I16, 0, 0, -300, 0, 300},
        {IR_NOT, 0, IR_I1, IR_I1, 0, 0, 1, 0, 0},
        {IR_NOT, 0, IR_U8, IR_U8, 0, 0, 5, 0, 250},
        /* shifts: arithmetic for signed, logical for unsigned, clamped amounts */
        {IR_SHR, 0, IR_I32, IR_I32, 0, 0, -8, 1, (uint32_t)-4},
        {IR_SHR, 0, IR_U32, IR_U32, 0, 0, 0x80000000u, 31, 1},
        {IR_SHR, 0, IR_I32, IR_I32, 0, 0, -1, 40, 0xffffffffu},
        {IR_SHR, 0, IR_I32, IR_I32, 0, 0, 5, 40, 0},
        {IR_SHL, 0, IR_I32, IR_I32, 0, 0, 1, 32, 0},
        {IR_SHL, 0, IR_I32, IR_I32, 0, 0, 3, 30, 0xc0000000u},
        {IR_SHL, 0, IR_I8, IR_I8, 0, 0, 1, 7, 0x80},
        /* division: truncation, INT_MIN / -1 wraps */
        {IR_DIV, 0, IR_I32, IR_I32, 0, 0, -7, 2, (uint32_t)-3},
        {IR_REM, 0, IR_I32, IR_I32, 0, 0, -7, 2, (uint32_t)-1},
        {IR_DIV, 0, IR_I32, IR_I32, 0, 0, INT32_MIN, -1, 0x80000000u},
        {IR_REM, 0, IR_I32, IR_I32, 0, 0, INT32_MIN, -1, 0},
        {IR_DIV, 0, IR_U32, IR_U32, 0, 0, 0xffffffffu, 2, 0x7fffffffu},
        {IR_DIV, 0, IR_I64, IR_I64, 0, 0, INT64_MIN, -1, (uint64_t)INT64_MIN},
        /* min/max: signedness */
        {IR_MAX, 0, IR_U8, IR_U8, 0, 0, 200, 100, 200},
        {IR_MAX, 0, IR_I8, IR_I8, 0, 0, -56, 100, 100},
        {IR_MIN, 0, IR_U32, IR_U32, 0, 0, 0xffffffffu, 1, 1},
        /* comparisons */
        {IR_CMP, IR_CMP_LT, IR_U32, IR_I1, 0, 0, 0xffffffffu, 1, 0},
        {IR_CMP, IR_CMP_LT, IR_I32, IR_I1, 0, 0, -1, 1, 1},
        {IR_CMP, IR_CMP_LT, IR_F32, IR_I1, NAN, 1, 0, 0, 0},
        {IR_CMP, IR_CMP_GE, IR_F32, IR_I1, NAN, 1, 0, 0, 0},
        {IR_CMP, IR_CMP_NE, IR_F32, IR_I1, NAN, NAN, 0, 0, 1},
        {IR_CMP, IR_CMP_EQ, IR_F16, IR_I1, 0.1, 0.09999, 0, 0, 1}, /* both round to 0x2e66 */
        /* floats: f32 in float, IEEE division, NaN-ignoring min/max */
        {IR_ADD, 0, IR_F32, IR_F32, 0.1, 0.2, 0, 0, 0},
        {IR_DIV, 0, IR_F32, IR_F32, 1, 0, 0, 0, 0x7f800000u},
        {IR_MAX, 0, IR_F32, IR_F32, NAN, 1, 0, 0, 0x3f800000u},
        {IR_MIN, 0, IR_F32, IR_F32, 2, NAN, 0, 0, 0x40000000u},
        {IR_REM, 0, IR_F32, IR_F32, 7.5, 2, 0, 0, 0x3fc00000u},
        {IR_RSQRT, 0, IR_F32, IR_F32, 4, 0, 0, 0, 0x3f000000u},
        {IR_EXP2, 0, IR_F32, IR_F32, 3, 0, 0, 0, 0x41000000u},
        {IR_FLOOR, 0, IR_F32, IR_F32, -1.5, 0, 0, 0, 0xc0000000u},
        {IR_ADD, 0, IR_F64, IR_F64, 0.1, 0.2, 0, 0, 0},
        /* f16 arithmetic rounds once to f16: 2048 + 1 -> 2048 (tie, even), 2048 + 3 -> 2052 */
        {IR_ADD, 0, IR_F16, IR_F16, 2048, 1, 0, 0, 0x6800},
        {IR_ADD, 0, IR_F16, IR_F16, 2048, 3, 0, 0, 0x6802},
        {IR_MUL, 0, IR_F16, IR_F16, 300, 300, 0, 0, 0x7c00},             /* overflow -> inf */
        {IR_MUL, 0, IR_BF16, IR_BF16, 1.0078125, 1.0078125, 0, 0, 0x3f82}, /* 1.01568.. -> 1.015625 */
        /* casts */
        {IR_CAST, 0, IR_F32, IR_I32, 3e9, 0, 0, 0, 0x7fffffffu},
        {IR_CAST, 0, IR_F32, IR_I32, -3e9, 0, 0, 0, 0x80000000u},
        {IR_CAST, 0, IR_F32, IR_I32, -3.7, 0, 0, 0, (uint32_t)-3},
        {IR_CAST, 0, IR_F32, IR_I32, NAN, 0, 0, 0, 0},
        {IR_CAST, 0, IR_F32, IR_U8, -1, 0, 0, 0, 0},
        {IR_CAST, 0, IR_F32, IR_U8, 300, 0, 0, 0, 255},
        {IR_CAST, 0, IR_F64, IR_I64, 1e30, 0, 0, 0, (uint64_t)INT64_MAX},
        {IR_CAST, 0, IR_F32, IR_I1, 0.5, 0, 0, 0, 1},
        {IR_CAST, 0, IR_I32, IR_U32, 0, 0, -1, 0, 0xffffffffu},
        {IR_CAST, 0, IR_I32, IR_I8, 0, 0, 0x1ff, 0, 0xff},
        {IR_CAST, 0, IR_I8, IR_I32, 0, 0, -1, 0, 0xffffffffu},
        {IR_CAST, 0, IR_U8, IR_I32, 0, 0, 255, 0, 255},
        {IR_CAST, 0, IR_I32, IR_I1, 0, 0, 4, 0, 1},
        {IR_CAST, 0, IR_I32, IR_F32, 0, 0, -1, 0, 0xbf800000u},
        {IR_CAST, 0, IR_I32, IR_F32, 0, 0, 16777217, 0, 0x4b800000u},    /* tie -> even */
        {IR_CAST, 0, IR_U32, IR_F32, 0, 0, 0xffffffffu, 0, 0x4f800000u},
        {IR_CAST, 0, IR_I32, IR_F16, 0, 0, 2049, 0, 0x6800},
        {IR_CAST, 0, IR_I32, IR_F16, 0, 0, 2051, 0, 0x6802},
        {IR_CAST, 0, IR_I32, IR_F16, 0, 0, 70000, 0, 0x7c00},
        /* 2^24 + 2^16 + 1: just above a bf16 tie; via f32 it would round twice to 2^24 */
        {IR_CAST, 0, IR_I32, IR_BF16, 0, 0, 16777216 + 65536 + 1, 0, 0x4b81},
        {IR_CAST, 0, IR_F32, IR_F16, 65520, 0, 0, 0, 0x7c00},
        {IR_CAST, 0, IR_F32, IR_BF16, 0.1, 0, 0, 0, 0x3dcd},
        {IR_CAST, 0, IR_F64, IR_F16, 1.0 + 0x1p-11 + 0x1p-40, 0, 0, 0, 0x3c01},
        {IR_CAST, 0, IR_F16, IR_F32, 0.1, 0, 0, 0, 0x3dccc000u},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        Case c = cases[k];
        if (c.op == IR_ADD && c.e == IR_F32) c.want = fbits(0.1f + 0.2f);
        if (c.op == IR_ADD && c.e == IR_F64) c.want = dbits(0.1 + 0.2);
        uint64_t out;
        StrBuf err;
        sb_init(&err);
        int rc = run_case(&c, &out, &err);
        ck_assert_msg(rc == 0, "case %zu: %s", k, err.data ? err.data : "");
        ck_assert_msg(out == c.want, "case %zu (%s %s -> %s): got 0x%llx, want 0x%llx", k,
                      ir_op_info[c.op].name, ir_elem_name(c.e), ir_elem_name(c.re),
                      (unsigned long long)out, (unsigned long long)c.want);
        sb_free(&err);
    }
}
END_TEST

/* Rounding happens on every f16/bf16 op, not only at the store: in f16,
 * (2048 + 1) + 1 is 2048 (each add is a tie that rounds to even), while one
 * rounding at the end would give 2050. Same for bf16 at 256. */
START_TEST(f16_rounds_every_op)
{
    IrElem es[2] = {IR_F16, IR_BF16};
    double big[2] = {2048, 256};
    uint16_t want[2] = {0x6800, 0x4380};
    for (int k = 0; k < 2; k++) {
        T t;
        t_init(&t, "chain");
        IrValue *P = ir_func_add_param(t.f, ir_type_ptr(es[k]), "P");
        IrValue *a = ir_func_add_param(t.f, sc(es[k]), "a");
        IrValue *one = cf(&t, sc(es[k]), 1.0);
        IrValue *r = op2(&t, IR_ADD, sc(es[k]), op2(&t, IR_ADD, sc(es[k]), a, one), one);
        store(&t, P, r, NULL);
        ret(&t);
        uint16_t out = 0;
        InterpBuffer b = {&out, 2, "P"};
        InterpArg ia[2] = {{.ptr = &out}, {.f = big[k]}};
        InterpOptions o = {{1, 1, 1}, &b, 1};
        StrBuf err;
        sb_init(&err);
        ck_assert_msg(interp_run(t.f, ia, 2, &o, &err) == 0, "%s", err.data);
        ck_assert_uint_eq(out, want[k]);
        sb_free(&err);
        t_free(&t);
    }
}
END_TEST

START_TEST(int_division_by_zero_is_an_error)
{
    const Case cases[] = {
        {IR_DIV, 0, IR_I32, IR_I32, 0, 0, 1, 0, 0},
        {IR_REM, 0, IR_U64, IR_U64, 0, 0, 1, 0, 0},
    };
    for (int k = 0; k < 2; k++) {
        uint64_t out;
        StrBuf err;
        sb_init(&err);
        ck_assert_int_eq(run_case(&cases[k], &out, &err), 1);
        ck_assert_msg(strstr(err.data, "t.tile:3:5:") && strstr(err.data, "integer division by zero"), "%s", err.data);
        sb_free(&err);
    }
}
END_TEST

/* ---- control flow ---- */

/* for i in range(lo, hi, step): s += i; acc = acc * 2 + i  (carried scalar and tile) */
static int run_loop(int lo, int hi, int step, int64_t *s_out, float *acc_out, StrBuf *err)
{
    T t;
    t_init(&t, "loop");
    IrValue *P = ir_func_add_param(t.f, ir_type_ptr(IR_I64), "P");
    IrValue *A = ir_func_add_param(t.f, ir_type_ptr(IR_F32), "A");
    IrValue *plo = ir_func_add_param(t.f, sc(IR_I32), "lo");
    IrValue *phi = ir_func_add_param(t.f, sc(IR_I32), "hi");
    IrValue *pst = ir_func_add_param(t.f, sc(IR_I32), "step");
    IrValue *s0 = ci(&t, sc(IR_I64), 100);
    IrValue *acc0 = cf(&t, tile(IR_F32, 4), 1.0);
    IrValue *fargs[5] = {plo, phi, pst, s0, acc0};
    IrType rts[2] = {sc(IR_I64), tile(IR_F32, 4)};
    at(&t, 4);
    IrOp *fo = ir_op_new(t.f, IR_FOR, t.b.loc, 5, fargs, 2, rts);
    IrBlock *body = ir_op_add_region(t.f, fo);
    IrValue *iv = ir_block_add_arg(body, sc(IR_I32), "i");
    IrValue *s = ir_block_add_arg(body, sc(IR_I64), "s");
    IrValue *acc = ir_block_add_arg(body, tile(IR_F32, 4), "acc");
    irb_insert(&t.b, fo);
    IrBuilder outer = t.b;
    t.b.block = body;
    IrValue *s1 = op2(&t, IR_ADD, sc(IR_I64), s, op1(&t, IR_CAST, sc(IR_I64), iv));
    IrValue *ivf = op1(&t, IR_SPLAT, tile(IR_F32, 4), op1(&t, IR_CAST, sc(IR_F32), iv));
    IrValue *acc1 = op2(&t, IR_ADD, tile(IR_F32, 4), op2(&t, IR_MUL, tile(IR_F32, 4), acc, cf(&t, sc(IR_F32), 2.0)), ivf);
    IrValue *ys[2] = {s1, acc1};
    emit0(&t, IR_YIELD, 2, ys);
    t.b = outer;
    store(&t, P, fo->res[0], NULL);
    store(&t, ptrs(&t, A, arange(&t, 4), 4), fo->res[1], NULL);
    ret(&t);
    InterpBuffer b[2] = {{s_out, 8, "P"}, {acc_out, 16, "A"}};
    InterpArg args[5] = {{.ptr = s_out}, {.ptr = acc_out}, {.i = lo}, {.i = hi}, {.i = step}};
    InterpOptions o = {{1, 1, 1}, b, 2};
    int rc = interp_run(t.f, args, 5, &o, err);
    t_free(&t);
    return rc;
}

START_TEST(for_loop_carried_values)
{
    int64_t s;
    float acc[4];
    StrBuf err;
    sb_init(&err);
    struct { int lo, hi, step; } r[] = {{0, 10, 3}, {5, 5, 1}, {7, 3, 2}, {-4, 9, 1}, {0, 1, 100}};
    for (int k = 0; k < 5; k++) {
        ck_assert_msg(run_loop(r[k].lo, r[k].hi, r[k].step, &s, acc, &err) == 0, "%s", err.data);
        int64_t ws = 100;
        float wa = 1.0f;
        for (int i = r[k].lo; i < r[k].hi; i += r[k].step) ws += i, wa = wa * 2.0f + (float)i;
        ck_assert_int_eq(s, ws);
        for (int j = 0; j < 4; j++) ck_assert_float_eq(acc[j], wa);
    }
    ck_assert_int_eq(run_loop(0, 10, 0, &s, acc, &err), 1);
    ck_assert_msg(strstr(err.data, "t.tile:4:5: op 'for': range step must be positive"), "%s", err.data);
    sb_free(&err);
}
END_TEST

START_TEST(if_with_results)
{
    /* v = if program_id(0) < 2 { yield 10 } else { yield pid * 100 }; P[pid] = v */
    T t;
    t_init(&t, "branch");
    IrValue *P = ir_func_add_param(t.f, ir_type_ptr(IR_I32), "P");
    IrValue *p = pid(&t, 0);
    IrValue *c = cmp(&t, IR_CMP_LT, sc(IR_I1), p, ci(&t, sc(IR_I32), 2));
    IrType rt = sc(IR_I32);
    IrOp *io = ir_op_new(t.f, IR_IF, t.b.loc, 1, &c, 1, &rt);
    IrBlock *th = ir_op_add_region(t.f, io), *el = ir_op_add_region(t.f, io);
    irb_insert(&t.b, io);
    IrBuilder outer = t.b;
    t.b.block = th;
    IrValue *ten = ci(&t, sc(IR_I32), 10);
    emit0(&t, IR_YIELD, 1, &ten);
    t.b.block = el;
    IrValue *h = op2(&t, IR_MUL, sc(IR_I32), p, ci(&t, sc(IR_I32), 100));
    emit0(&t, IR_YIELD, 1, &h);
    t.b = outer;
    store(&t, op2(&t, IR_ADDPTR, ir_type_ptr(IR_I32), P, p), io->res[0], NULL);
    ret(&t);
    int32_t out[5];
    InterpBuffer b = {out, sizeof out, "P"};
    InterpArg a = {.ptr = out};
    InterpOptions o = {{5, 1, 1}, &b, 1};
    StrBuf err;
    sb_init(&err);
    ck_assert_msg(interp_run(t.f, &a, 1, &o, &err) == 0, "%s", err.data);
    int32_t want[5] = {10, 10, 200, 300, 400};
    for (int i = 0; i < 5; i++) ck_assert_int_eq(out[i], want[i]);
    sb_free(&err);
    t_free(&t);
}
END_TEST

/* ---- tiles: dot, reduce, shape ops ---- */
START_TEST(dot_f16_accumulates_in_f32)
{
    /* C[4x2] = A[4x8] (f16) . B[8x2] (f16) + 0.5, accumulated in float in k order. */
    T t;
    t_init(&t, "dot");
    IrValue *A = ir_func_add_param(t.f, ir_type_ptr(IR_F16), "A");
    IrValue *B = ir_func_add_param(t.f, ir_type_ptr(IR_F16), "B");
    IrValue *C = ir_func_add_param(t.f, ir_type_ptr(IR_F32), "C");
    IrValue *a = load(&t, tile2(IR_F16, 4, 8), op1(&t, IR_RESHAPE, ptile2(IR_F16, 4, 8), ptrs(&t, A, arange(&t, 32), 32)), NULL, NULL);
    IrValue *b = load(&t, tile2(IR_F16, 8, 2), op1(&t, IR_RESHAPE, ptile2(IR_F16, 8, 2), ptrs(&t, B, arange(&t, 16), 16)), NULL, NULL);
    IrValue *args[3] = {a, b, cf(&t, tile2(IR_F32, 4, 2), 0.5)};
    IrValue *d = irb_op(&t.b, IR_DOT, tile2(IR_F32, 4, 2), 3, args);
    IrValue *cp = op1(&t, IR_RESHAPE, ptile2(IR_F32, 4, 2), ptrs(&t, C, arange(&t, 8), 8));
    store(&t, cp, d, NULL);
    ret(&t);
    uint16_t ha[32], hb[16];
    float fa[32], fb[16], c[8];
    unsigned s = 3;
    for (int i = 0; i < 32; i++) ha[i] = interp_f32_to_f16(rnd(&s) * 3), fa[i] = interp_f16_to_f32(ha[i]);
    for (int i = 0; i < 16; i++) hb[i] = interp_f32_to_f16(rnd(&s) * 3), fb[i] = interp_f16_to_f32(hb[i]);
    InterpBuffer bufs[3] = {{ha, sizeof ha, "A"}, {hb, sizeof hb, "B"}, {c, sizeof c, "C"}};
    InterpArg ia[3] = {{.ptr = ha}, {.ptr = hb}, {.ptr = c}};
    InterpOptions o = {{1, 1, 1}, bufs, 3};
    StrBuf err;
    sb_init(&err);
    ck_assert_msg(interp_run(t.f, ia, 3, &o, &err) == 0, "%s", err.data);
    for (int m = 0; m < 4; m++)
        for (int n = 0; n < 2; n++) {
            float acc = 0.5f;
            for (int k = 0; k < 8; k++) acc += fa[m * 8 + k] * fb[k * 2 + n];
            ck_assert_msg(fbits(c[m * 2 + n]) == fbits(acc), "C[%d][%d] = %a, want %a", m, n, c[m * 2 + n], acc);
        }
    sb_free(&err);
    t_free(&t);
}
END_TEST

START_TEST(reduce_trans_broadcast)
{
    /* x[2x4] = reshape(load 8 floats); t = trans(x) [4x2];
     * out = [sum(x,1) (2), max(x,0) (4), argmax(x,1) as f32 (2), t (8),
     *        broadcast(expand_dims(sum(x,1),1)) [2x4] (8)] */
    T t;
    t_init(&t, "red");
    IrValue *X = ir_func_add_param(t.f, ir_type_ptr(IR_F32), "X");
    IrValue *O = ir_func_add_param(t.f, ir_type_ptr(IR_F32), "O");
    IrValue *x = op1(&t, IR_RESHAPE, tile2(IR_F32, 2, 4), load(&t, tile(IR_F32, 8), ptrs(&t, X, arange(&t, 8), 8), NULL, NULL));
    IrValue *sum = op1(&t, IR_REDUCE, tile(IR_F32, 2), x);
    sum->def->attr[0] = 1, sum->def->attr[1] = IR_RED_SUM;
    IrValue *mx = op1(&t, IR_REDUCE, tile(IR_F32, 4), x);
    mx->def->attr[0] = 0, mx->def->attr[1] = IR_RED_MAX;
    IrValue *am = op1(&t, IR_REDUCE, tile(IR_I32, 2), x);
    am->def->attr[0] = 1, am->def->attr[1] = IR_RED_ARGMAX;
    IrValue *tr = op1(&t, IR_TRANS, tile2(IR_F32, 4, 2), x);
    tr->def->attr[0] = 1, tr->def->attr[1] = 0;
    IrValue *ex = op1(&t, IR_EXPAND_DIMS, tile2(IR_F32, 2, 1), sum);
    ex->def->attr[0] = 1;
    IrValue *bc = op1(&t, IR_BROADCAST, tile2(IR_F32, 2, 4), ex);
    IrValue *tot = op1(&t, IR_REDUCE, sc(IR_F32), sum);
    tot->def->attr[0] = 0, tot->def->attr[1] = IR_RED_SUM;
    IrValue *off[6] = {arange(&t, 2), arange(&t, 4), arange(&t, 2), arange(&t, 8), arange(&t, 8), NULL};
    int base[5] = {0, 2, 6, 8, 16}, len[5] = {2, 4, 2, 8, 8};
    IrValue *vals[5] = {sum, mx, op1(&t, IR_CAST, tile(IR_F32, 2), am), op1(&t, IR_RESHAPE, tile(IR_F32, 8), tr),
                        op1(&t, IR_RESHAPE, tile(IR_F32, 8), bc)};
    for (int k = 0; k < 5; k++) {
        IrValue *o = op2(&t, IR_ADD, tile(IR_I32, len[k]), off[k], ci(&t, sc(IR_I32), base[k]));
        store(&t, ptrs(&t, O, o, len[k]), vals[k], NULL);
    }
    store(&t, op2(&t, IR_ADDPTR, ir_type_ptr(IR_F32), O, ci(&t, sc(IR_I32), 24)), tot, NULL);
    ret(&t);
    float xin[8] = {1, 5, -2, 5, 0.5f, -1, 3, 2}, out[25];
    for (int i = 0; i < 25; i++) out[i] = NAN;
    InterpBuffer bufs[2] = {{xin, sizeof xin, "X"}, {out, sizeof out, "O"}};
    InterpArg ia[2] = {{.ptr = xin}, {.ptr = out}};
    InterpOptions o = {{1, 1, 1}, bufs, 2};
    StrBuf err;
    sb_init(&err);
    ck_assert_msg(interp_run(t.f, ia, 2, &o, &err) == 0, "%s", err.data);
    float want[25] = {9, 4.5f, 1, 5, 3, 5, 1, 2, 1, 0.5f, 5, -1, -2, 3, 5, 2, 9, 9, 9, 9, 4.5f, 4.5f, 4.5f, 4.5f, 13.5f};
    for (int i = 0; i < 25; i++) ck_assert_msg(out[i] == want[i], "out[%d] = %g, want %g", i, out[i], want[i]);
    sb_free(&err);
    t_free(&t);
}
END_TEST

START_TEST(atomic_add_returns_old)
{
    /* Every program adds pid+1 to C[0] and stores the old value to O[pid]. */
    T t;
    t_init(&t, "atom");
    IrValue *C = ir_func_add_param(t.f, ir_type_ptr(IR_I32), "C");
    IrValue *O = ir_func_add_param(t.f, ir_type_ptr(IR_I32), "O");
    IrValue *p = pid(&t, 0);
    IrValue *args[2] = {C, op2(&t, IR_ADD, sc(IR_I32), p, ci(&t, sc(IR_I32), 1))};
    IrValue *old = irb_op(&t.b, IR_ATOMIC_ADD, sc(IR_I32), 2, args);
    store(&t, op2(&t, IR_ADDPTR, ir_type_ptr(IR_I32), O, p), old, NULL);
    ret(&t);
    int32_t c = 1000, out[6];
    InterpBuffer b[2] = {{&c, 4, "C"}, {out, sizeof out, "O"}};
    InterpArg ia[2] = {{.ptr = &c}, {.ptr = out}};
    InterpOptions o = {{3, 2, 1}, b, 2};
    StrBuf err;
    sb_init(&err);
    /* grid (3, 2): program_id(0) in 0..2 runs twice; x is fastest. */
    ck_assert_msg(interp_run(t.f, ia, 2, &o, &err) == 0, "%s", err.data);
    ck_assert_int_eq(c, 1000 + 2 * (1 + 2 + 3));
    ck_assert_int_eq(out[0], 1006);
    ck_assert_int_eq(out[1], 1007);
    ck_assert_int_eq(out[2], 1009);
    sb_free(&err);
    t_free(&t);
}
END_TEST

START_TEST(assert_and_gpu_ops_report)
{
    T t;
    t_init(&t, "chk");
    IrValue *c = cmp(&t, IR_CMP_LT, tile(IR_I1, 8), arange(&t, 8), ci(&t, tile(IR_I32, 8), 6));
    at(&t, 12);
    emit0(&t, IR_ASSERT, 1, &c);
    t.f->body->last->sattr = "offs in range";
    ret(&t);
    StrBuf err;
    sb_init(&err);
    InterpOptions o = {{1, 1, 1}, NULL, 0};
    ck_assert_int_eq(interp_run(t.f, NULL, 0, &o, &err), 1);
    ck_assert_msg(strstr(err.data, "t.tile:12:5: op 'assert': device_assert failed at lane 6 (index [6]): offs in range"), "%s", err.data);
    t_free(&t);
    sb_free(&err);

    t_init(&t, "gpu");
    IrValue *x = arange(&t, 8);
    op1(&t, IR_CONVERT_LAYOUT, tile(IR_I32, 8), x);
    ret(&t);
    sb_init(&err);
    ck_assert_int_eq(interp_run(t.f, NULL, 0, &o, &err), 1);
    ck_assert_msg(strstr(err.data, "internal error: op convert_layout not supported by the interpreter"), "%s", err.data);
    sb_free(&err);
    t_free(&t);
}
END_TEST

/* ---- IR text (ir_parse) ---- */
static IrFunc *parse_one(Arena *a, Diag *d, const char *path, const char *src)
{
    diag_init(d, path, src);
    IrModule *m = ir_parse(a, d, path, src);
    ck_assert_msg(m && m->nfuncs == 1, "%s", d->out.data ? d->out.data : "");
    StrBuf err;
    sb_init(&err);
    ck_assert_msg(ir_verify(m->funcs[0], &err), "%s", err.data ? err.data : "");
    sb_free(&err);
    return m->funcs[0];
}

/* Program p sums i over [0, p] onto INT32_MAX in a loop-carried i32 (which
 * wraps from p = 1 on), then keeps the sum only if it went negative. */
START_TEST(ir_text_loop_wrap_if)
{
    const char *src =
        "kernel @wrap(%P: ptr<i32>) {\n"
        "  %pid = program_id 0 : i32\n"
        "  %c0 = const 0 : i32\n"
        "  %c1 = const 1 : i32\n"
        "  %big = const 2147483647 : i32\n"
        "  %n = add %pid, %c1 : i32\n"
        "  %s = for %i = %c0 to %n step %c1 iter_args(%acc = %big) : (i32) {\n"
        "    %a2 = add %acc, %i : i32\n"
        "    yield %a2\n"
        "  }\n"
        "  %neg = cmp lt %s, %c0 : i1\n"
        "  %r = if %neg : (i32) {\n"
        "    yield %s\n"
        "  } else {\n"
        "    yield %c0\n"
        "  }\n"
        "  %p = addptr %P, %pid : ptr<i32>\n"
        "  store %p, %r\n"
        "  return\n"
        "}\n";
    Arena a;
    arena_init(&a);
    Diag d;
    IrFunc *f = parse_one(&a, &d, "wrap.ir", src);
    int32_t out[4] = {7, 7, 7, 7};
    InterpBuffer b = {out, sizeof out, "P"};
    InterpArg arg = {.ptr = out};
    InterpOptions o = {{4, 1, 1}, &b, 1};
    StrBuf err;
    sb_init(&err);
    ck_assert_msg(interp_run(f, &arg, 1, &o, &err) == 0, "%s", err.data);
    ck_assert_int_eq(out[0], 0);
    ck_assert_int_eq(out[1], INT32_MIN);
    ck_assert_int_eq(out[2], INT32_MIN + 2);
    ck_assert_int_eq(out[3], INT32_MIN + 5);
    sb_free(&err);
    diag_free(&d);
    arena_free(&a);
}
END_TEST

/* An unmasked 2-D load one row past the end: the message names the IR file's
 * line and column of the load, the lane as a 2-D index and the offset. */
START_TEST(ir_text_oob_2d)
{
    const char *src =
        "kernel @rows(%X: ptr<f32>, %Y: ptr<f32>) {\n"
        "  %r = arange 0, 4 : tensor<4xi32>\n"
        "  %c = arange 0, 8 : tensor<8xi32>\n"
        "  %r1 = expand_dims 1 %r : tensor<4x1xi32>\n"
        "  %c8 = const 8 : tensor<4x1xi32>\n"
        "  %ro = mul %r1, %c8 : tensor<4x1xi32>\n"
        "  %c1 = expand_dims 0 %c : tensor<1x8xi32>\n"
        "  %rb = broadcast %ro : tensor<4x8xi32>\n"
        "  %cb = broadcast %c1 : tensor<4x8xi32>\n"
        "  %off = add %rb, %cb : tensor<4x8xi32>\n"
        "  %xp = splat %X : tensor<4x8xptr<f32>>\n"
        "  %p = addptr %xp, %off : tensor<4x8xptr<f32>>\n"
        "  %v = load %p : tensor<4x8xf32>\n"
        "  %yp = splat %Y : tensor<4x8xptr<f32>>\n"
        "  %q = addptr %yp, %off : tensor<4x8xptr<f32>>\n"
        "  store %q, %v\n"
        "  return\n"
        "}\n";
    Arena a;
    arena_init(&a);
    Diag d;
    IrFunc *f = parse_one(&a, &d, "rows.ir", src);
    /* Separate heap blocks: on the stack Y may sit right after X, and then
     * X + 96 is a valid address inside Y (the check is per buffer, by design). */
    float *x = malloc(24 * sizeof *x), *y = malloc(32 * sizeof *y);
    for (int i = 0; i < 24; i++) x[i] = (float)i + 0.5f;
    InterpBuffer b[2] = {{x, 24 * sizeof *x, "X"}, {y, 32 * sizeof *y, "Y"}};
    InterpArg args[2] = {{.ptr = x}, {.ptr = y}};
    InterpOptions o = {{1, 1, 1}, b, 2};
    StrBuf err;
    sb_init(&err);
    ck_assert_int_eq(interp_run(f, args, 2, &o, &err), 1);
    ck_assert_msg(strstr(err.data, "kernel rows, program (0, 0, 0): rows.ir:13:"), "%s", err.data);
    ck_assert_msg(strstr(err.data, "lane 24 (index [3, 0]): address is buffer 'X' + 96 bytes (buffer 'X' has 96 bytes)"),
                  "%s", err.data);
    sb_free(&err);
    /* With a 32-float X the same kernel copies X to Y. */
    float x2[32];
    for (int i = 0; i < 32; i++) x2[i] = (float)i * 0.25f + 1.0f, y[i] = NAN;
    InterpBuffer b2[2] = {{x2, sizeof x2, "X"}, {y, 32 * sizeof *y, "Y"}};
    InterpArg args2[2] = {{.ptr = x2}, {.ptr = y}};
    InterpOptions o2 = {{1, 1, 1}, b2, 2};
    sb_init(&err);
    ck_assert_msg(interp_run(f, args2, 2, &o2, &err) == 0, "%s", err.data);
    for (int i = 0; i < 32; i++) ck_assert_float_eq(y[i], x2[i]);
    sb_free(&err);
    free(x);
    free(y);
    diag_free(&d);
    arena_free(&a);
}
END_TEST

static Suite *interp_suite(void)
{
    Suite *s = suite_create("interp");
    TCase *tc = tcase_create("ops");
    tcase_add_test(tc, vec_add_masked_ragged);
    tcase_add_test(tc, unmasked_oob_load_reports);
    tcase_add_test(tc, oob_store_before_buffer_reports);
    tcase_add_test(tc, addptr_overflow_is_out_of_bounds);
    tcase_add_test(tc, masked_load_reads_other);
    tcase_add_test(tc, scalar_op_table);
    tcase_add_test(tc, f16_rounds_every_op);
    tcase_add_test(tc, int_division_by_zero_is_an_error);
    tcase_add_test(tc, for_loop_carried_values);
    tcase_add_test(tc, if_with_results);
    tcase_add_test(tc, dot_f16_accumulates_in_f32);
    tcase_add_test(tc, reduce_trans_broadcast);
    tcase_add_test(tc, atomic_add_returns_old);
    tcase_add_test(tc, assert_and_gpu_ops_report);
    tcase_add_test(tc, ir_text_loop_wrap_if);
    tcase_add_test(tc, ir_text_oob_2d);
    suite_add_tcase(s, tc);
    return s;
}

TU_MAIN(interp_suite)
