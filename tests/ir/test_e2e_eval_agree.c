/* test_e2e_eval_agree.c — the three hosts of the IR's scalar semantics agree
 * bit for bit: the front end's constant evaluation (lang/consteval.c), the
 * constant folder (pass "fold") and the interpreter.
 *
 * A seeded generator draws (op, element type, operands): every binary op,
 * comparison, unary op and cast the IR has, over every element type, with
 * operands from edge values (0, -0.0, 1, -1, MIN, MAX, shift amounts around
 * the width, inf, NaN, subnormals, f16/bf16 rounding ties) and random bits.
 * For each case:
 *   - IR: `%r = OP %a, %b` on two constants, stored through a pointer; the
 *     interpreter runs it and the stored bytes are read back; then fold runs
 *     and the stored value must be a constant with the same bits;
 *   - front end (for the types and ops the language has): a .tile program
 *     `const A: T = a; const B: T = b; kernel k(out: *R) { store(out, A op B); }`
 *     compiled without passes; the stored constant must have the same bits.
 * Integer division by zero is refused by all three (run-time error, left
 * unfolded, compile error); a constant shift by an amount outside [0, width)
 * is a compile error in the language and must be refused there.
 */
#include "testutil.h"

#include "compiler/interp/interp.h"
#include "compiler/ir/eval.h"
#include "compiler/passes/passes.h"
#include "compiler/lang/lang.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

enum { K_BIN, K_CMP, K_UN, K_CAST };

typedef struct Case {
    int kind;
    IrOpcode op;
    IrCmp cmp;
    IrElem e, re;   /* operand and result element types */
    IrScalar a, b;
} Case;

typedef struct Outcome {
    bool ok;        /* a value was produced (else: refused, e.g. x / 0) */
    uint64_t bits;
} Outcome;

static uint64_t rng_state;
static uint64_t rnd64(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}
static int pick(int n) { return (int)(rnd64() % (uint64_t)n); }

static const IrElem all_types[] = {IR_I1, IR_I8, IR_I16, IR_I32, IR_I64, IR_U8, IR_U16, IR_U32, IR_U64,
                                   IR_F16, IR_BF16, IR_F32, IR_F64};
#define NELEMS(a) ((int)(sizeof(a) / sizeof((a)[0])))

static IrScalar rand_value(IrElem e)
{
    if (ir_elem_is_float(e)) {
        static const double edge[] = {0.0, -0.0, 1.0, -1.0, 0.5, 2.5, 3.0, -7.25, 65504.0, 65520.0,
                                      1e-8, 0x1p-24, 0x1p-14, 3e38, 1e300, INFINITY, -INFINITY, NAN,
                                      1.0 + 0x1p-11, 1.0 + 0x1p-8, 300.7, -128.9, 4294967296.5,
                                      -9.3e18, 1.8e19};
        switch (pick(3)) {
        case 0: return ir_eval_float(e, edge[pick(NELEMS(edge))]);
        case 1: return ir_eval_from_bits(e, rnd64());
        default: return ir_eval_float(e, ldexp((double)(int64_t)rnd64(), -pick(80)));
        }
    }
    static const int64_t edge[] = {0, 1, -1, 2, 3, 7, -7, 31, 32, 33, 63, 64, 65, 127, 128, 255, 256,
                                   INT32_MIN, INT32_MAX, INT64_MIN, INT64_MAX, 65535, -32768};
    switch (pick(3)) {
    case 0: return ir_eval_int(e, edge[pick(NELEMS(edge))]);
    case 1: return ir_eval_int(e, (int64_t)rnd64());
    default: return ir_eval_int(e, pick(80) - 8);
    }
}

static Case rand_case(void)
{
    static const IrOpcode bin_f[] = {IR_ADD, IR_SUB, IR_MUL, IR_DIV, IR_REM, IR_MIN, IR_MAX};
    static const IrOpcode bin_i[] = {IR_ADD, IR_SUB, IR_MUL, IR_DIV, IR_REM, IR_MIN, IR_MAX,
                                     IR_AND, IR_OR, IR_XOR, IR_SHL, IR_SHR};
    static const IrOpcode un_f[] = {IR_NEG, IR_ABS, IR_EXP, IR_EXP2, IR_LOG, IR_LOG2, IR_SQRT,
                                    IR_RSQRT, IR_TANH, IR_SIN, IR_COS, IR_FLOOR, IR_CEIL};
    static const IrOpcode un_i[] = {IR_NEG, IR_NOT, IR_ABS};
    Case c;
    memset(&c, 0, sizeof c);
    c.kind = pick(4);
    c.e = all_types[pick(NELEMS(all_types))];
    bool fl = ir_elem_is_float(c.e);
    c.re = c.e;
    switch (c.kind) {
    case K_BIN: c.op = fl ? bin_f[pick(NELEMS(bin_f))] : bin_i[pick(NELEMS(bin_i))]; break;
    case K_CMP: c.op = IR_CMP, c.cmp = (IrCmp)pick(6), c.re = IR_I1; break;
    case K_UN: c.op = fl ? un_f[pick(NELEMS(un_f))] : un_i[pick(NELEMS(un_i))]; break;
    default: c.op = IR_CAST, c.re = all_types[pick(NELEMS(all_types))]; break;
    }
    c.a = rand_value(c.e);
    c.b = rand_value(c.e);
    if (c.kind == K_BIN && (c.op == IR_SHL || c.op == IR_SHR) && pick(2)) c.b = ir_eval_int(c.e, pick(70) - 3);
    return c;
}

static const char *case_str(const Case *c, char *buf, size_t n)
{
    snprintf(buf, n, "%s%s%s %s: a = 0x%" PRIx64 " (%.17g / %" PRId64 "), b = 0x%" PRIx64 " (%.17g / %" PRId64
             ") -> %s",
             ir_op_info[c->op].name, c->kind == K_CMP ? "." : "", c->kind == K_CMP ? ir_cmp_name(c->cmp) : "",
             ir_elem_name(c->e), ir_eval_to_bits(c->e, c->a), c->a.f, c->a.i, ir_eval_to_bits(c->e, c->b),
             c->b.f, c->b.i, ir_elem_name(c->re));
    return buf;
}

/* ---- the IR: interpreter, then fold ---- */

static IrValue *const_of(IrBuilder *b, IrElem e, IrScalar v)
{
    if (ir_elem_is_float(e)) return irb_const_float(b, ir_type_scalar(e), v.f);
    return irb_const_int(b, ir_type_scalar(e), v.i);
}

static void run_ir(const Case *c, Outcome *interp, Outcome *fold)
{
    Arena arena;
    arena_init(&arena);
    IrFunc *f = ir_func_new(&arena, "k", (SrcLoc){"t.tile", 1, 1});
    IrValue *out = ir_func_add_param(f, ir_type_ptr(c->re), "out");
    IrBuilder b = {.f = f, .block = f->body, .loc = {"t.tile", 2, 3}};
    IrValue *x = const_of(&b, c->e, c->a), *y = const_of(&b, c->e, c->b), *r;
    if (c->kind == K_BIN || c->kind == K_CMP) r = irb_op2(&b, c->op, ir_type_scalar(c->re), x, y);
    else r = irb_op1(&b, c->op, ir_type_scalar(c->re), x);
    if (c->kind == K_CMP) r->def->attr[0] = (int)c->cmp;
    IrValue *sargs[2] = {out, r};
    IrOp *store = irb_insert(&b, ir_op_new(f, IR_STORE, b.loc, 2, sargs, 0, NULL));
    irb_insert(&b, ir_op_new(f, IR_RETURN, b.loc, 0, NULL, 0, NULL));

    uint64_t mem = 0;
    InterpBuffer buf = {&mem, sizeof mem, "out"};
    InterpArg arg = {.ptr = &mem};
    InterpOptions o = {{1, 1, 1}, &buf, 1};
    StrBuf err;
    sb_init(&err);
    interp->ok = interp_run(f, &arg, 1, &o, &err) == 0;
    interp->bits = mem;
    sb_free(&err);

    pass_fold(f);
    IrOp *k = store->args[1]->def;
    fold->ok = k && k->op == IR_CONST;
    if (fold->ok) {
        IrScalar v;
        if (ir_elem_is_float(c->re)) v.f = ir_eval_round(c->re, k->fval);
        else v.i = ir_eval_wrap(c->re, (uint64_t)k->ival);
        fold->bits = ir_eval_to_bits(c->re, v);
    }
    arena_free(&arena);
}

/* ---- the front end ---- */

static const char *tile_type(IrElem e) { return e == IR_I1 ? "bool" : ir_elem_name(e); }

/* A literal expression with exactly the value v of type e; false if the
 * language cannot spell it (NaN). */
static bool literal(IrElem e, IrScalar v, char *buf, size_t n)
{
    if (ir_elem_is_float(e)) {
        if (isnan(v.f)) return false;
        if (isinf(v.f)) snprintf(buf, n, "%sinf", v.f < 0 ? "-" : "");
        else snprintf(buf, n, "%s%.17g", signbit(v.f) ? "-" : "", fabs(v.f));
        if (!strpbrk(buf, ".en")) strncat(buf, ".0", n - strlen(buf) - 1); /* a float literal: -0.0 */
        return true;
    }
    if (v.i == INT64_MIN) snprintf(buf, n, "(-9223372036854775807 - 1)");
    else snprintf(buf, n, "%" PRId64, v.i); /* u64 above INT64_MAX: a negative literal wraps */
    return true;
}

static bool fe_types_ok(const Case *c)
{
    if (c->e == IR_I1 || (c->kind == K_CAST && c->re == IR_I1)) return false; /* no bool arithmetic */
    if (c->kind == K_UN && c->op == IR_ABS && !ir_elem_is_float(c->e)) return false; /* abs is float-only */
    return true;
}

static const char *op_expr(const Case *c, char *buf, size_t n)
{
    static const char *cmp_text[] = {"==", "!=", "<", "<=", ">", ">="};
    switch (c->kind) {
    case K_CMP: snprintf(buf, n, "A %s B", cmp_text[c->cmp]); break;
    case K_CAST: snprintf(buf, n, "A.to(%s)", tile_type(c->re)); break;
    case K_UN:
        if (c->op == IR_NEG || c->op == IR_NOT) snprintf(buf, n, "%sA", c->op == IR_NEG ? "-" : "~");
        else snprintf(buf, n, "%s(A)", ir_op_info[c->op].name);
        break;
    default:
        switch (c->op) {
        case IR_MIN: snprintf(buf, n, "minimum(A, B)"); break;
        case IR_MAX: snprintf(buf, n, "maximum(A, B)"); break;
        default: {
            static const struct { IrOpcode op; const char *t; } tab[] = {
                {IR_ADD, "+"}, {IR_SUB, "-"}, {IR_MUL, "*"}, {IR_DIV, "/"}, {IR_REM, "%"}, {IR_AND, "&"},
                {IR_OR, "|"}, {IR_XOR, "^"}, {IR_SHL, "<<"}, {IR_SHR, ">>"}};
            const char *t = "?";
            for (int k = 0; k < NELEMS(tab); k++)
                if (tab[k].op == c->op) t = tab[k].t;
            snprintf(buf, n, "A %s B", t);
        }
        }
    }
    return buf;
}

/* Returns false when the case is not expressible; *res = what the front end made. */
static bool run_front_end(const Case *c, Outcome *res, char *src, size_t n)
{
    char la[64], lb[64], ex[64];
    if (!fe_types_ok(c) || !literal(c->e, c->a, la, sizeof la) || !literal(c->e, c->b, lb, sizeof lb))
        return false;
    snprintf(src, n, "const A = (%s).to(%s);\nconst B = (%s).to(%s);\nkernel k(out: *%s) {\n    store(out, %s);\n}\n",
             la, tile_type(c->e), lb, tile_type(c->e), tile_type(c->re), op_expr(c, ex, sizeof ex));
    Arena arena;
    arena_init(&arena);
    Diag diag;
    diag_init(&diag, "t.tile", src);
    LangOptions o = {0};
    AstFile *file = ast_parse(&arena, &diag, "t.tile", src);
    ck_assert_msg(file && diag.nerrors == 0, "parse errors:\n%s\n%s", diag.out.data, src);
    IrModule *m = lang_compile(&arena, &diag, file, &o);
    res->ok = false;
    if (m) {
        IrOp *st = NULL;
        for (IrOp *op = m->funcs[0]->body->first; op; op = op->next)
            if (op->op == IR_STORE) st = op;
        ck_assert_msg(st != NULL, "no store in\n%s", src);
        IrOp *k = st->args[1]->def;
        ck_assert_msg(k && k->op == IR_CONST, "the front end did not fold:\n%s", src);
        IrScalar v;
        if (ir_elem_is_float(c->re)) v.f = ir_eval_round(c->re, k->fval);
        else v.i = ir_eval_wrap(c->re, (uint64_t)k->ival);
        res->ok = true;
        res->bits = ir_eval_to_bits(c->re, v);
    } else {
        /* The language's own refusals: x / 0 and constant shifts out of range. */
        bool expected = strstr(diag.out.data, "division by zero") || strstr(diag.out.data, "shift amount");
        ck_assert_msg(expected, "unexpected front-end error:\n%s\n%s", diag.out.data, src);
    }
    diag_free(&diag);
    arena_free(&arena);
    return true;
}

static bool shift_out_of_range(const Case *c)
{
    if (c->kind != K_BIN || (c->op != IR_SHL && c->op != IR_SHR)) return false;
    return c->b.i < 0 || c->b.i >= ir_elem_bits(c->e);
}

static bool int_div_zero(const Case *c)
{
    return c->kind == K_BIN && (c->op == IR_DIV || c->op == IR_REM) && !ir_elem_is_float(c->e) && c->b.i == 0;
}

START_TEST(test_three_way_agreement)
{
    rng_state = 0x9e3779b97f4a7c15ull;
    int fe_checked = 0;
    char desc[256], src[512];
    for (int iter = 0; iter < 20000; iter++) {
        Case c = rand_case();
        Outcome in, fo, fe;
        run_ir(&c, &in, &fo);
        case_str(&c, desc, sizeof desc);
        bool dz = int_div_zero(&c);
        ck_assert_msg(in.ok == !dz, "interpreter %s: %s", in.ok ? "ran" : "failed", desc);
        ck_assert_msg(fo.ok == !dz, "fold %s: %s", fo.ok ? "folded" : "kept the op", desc);
        if (dz) continue;
        ck_assert_msg(in.bits == fo.bits, "interp 0x%" PRIx64 " != fold 0x%" PRIx64 ": %s", in.bits, fo.bits, desc);
        if (!run_front_end(&c, &fe, src, sizeof src)) continue;
        fe_checked++;
        if (shift_out_of_range(&c)) {
            ck_assert_msg(!fe.ok, "the front end accepted a constant shift out of range:\n%s", src);
            continue;
        }
        ck_assert_msg(fe.ok, "the front end refused:\n%s", src);
        ck_assert_msg(fe.bits == in.bits, "front end 0x%" PRIx64 " != interp 0x%" PRIx64 ": %s\n%s", fe.bits,
                      in.bits, desc, src);
    }
    ck_assert_int_gt(fe_checked, 10000); /* most cases reach the front end too */
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("eval_agree");
    TCase *tc = tcase_create("agree");
    tcase_add_test(tc, test_three_way_agreement);
    suite_add_tcase(s, tc);
    return s;
}

TU_MAIN(suite)
