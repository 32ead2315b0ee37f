/* test_debug.c — the debugging builtins and `None` arguments, source to IR:
 * static_print's notes (once per specialisation / inlining site, no errors, no
 * op of its own), device_assert's IR_ASSERT and its message (given, the
 * condition's source text, or "assertion failed" when that text spans lines),
 * and axis / mask / other / acc = None meaning "not given". */
#include "tests/testutil.h"
#include "compiler/lang/lang.h"

#include <stdio.h>
#include <string.h>

typedef struct Comp {
    Arena arena;
    Diag diag;
    IrModule *m;
} Comp;

static void comp(Comp *c, const char *src)
{
    arena_init(&c->arena);
    diag_init(&c->diag, "t.tile", src);
    AstFile *af = ast_parse(&c->arena, &c->diag, "t.tile", src);
    ck_assert_msg(af && c->diag.nerrors == 0, "parse: %s", c->diag.out.data ? c->diag.out.data : "");
    LangOptions lo;
    memset(&lo, 0, sizeof lo);
    c->m = lang_compile(&c->arena, &c->diag, af, &lo);
}

static void comp_free(Comp *c)
{
    diag_free(&c->diag);
    arena_free(&c->arena);
}

static const char *out(const Comp *c) { return c->diag.out.data ? c->diag.out.data : ""; }

static int count_substr(const char *s, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(s, needle); p; p = strstr(p + 1, needle)) n++;
    return n;
}

/* The ops of the kernel body (top level) with opcode `opc`, up to `max`. */
static int find_ops(const IrFunc *f, IrOpcode opc, const IrOp **ops, int max)
{
    int n = 0;
    for (const IrOp *op = f->body->first; op; op = op->next)
        if (op->op == opc && n < max) ops[n++] = op;
    return n;
}

static int count_ops(const IrFunc *f)
{
    int n = 0;
    for (const IrOp *op = f->body->first; op; op = op->next) n++;
    return n;
}

START_TEST(static_print_notes_once_per_site)
{
    Comp c;
    comp(&c, "fn h(v) {\n    static_print(\"h\", v);\n    return v;\n}\n"
             "kernel k(X: *f32, n: i32, const B: i32 = 64) {\n"
             "    let offs = arange(B);\n"
             "    static_print(offs, B, n, scale = 2.5);\n"
             "    let a = h(offs);\n    let b = h(n);\n    let c = h(B);\n"
             "    store(X + offs, (a + b + c).to(f32));\n}\n");
    ck_assert_msg(c.m && c.diag.nerrors == 0, "%s", out(&c));
    ck_assert_int_eq(c.diag.nnotes, 4);
    ck_assert_int_eq(count_substr(out(&c), "note: static_print:"), 4);
    ck_assert_msg(strstr(out(&c), "t.tile:7:5: note: static_print: offs = i32[64], B = 64, n = i32, scale = 2.5\n"),
                  "%s", out(&c));
    ck_assert_msg(strstr(out(&c), "note: static_print: h, v = i32[64]\n"), "%s", out(&c));
    ck_assert_msg(strstr(out(&c), "note: static_print: h, v = i32\n"), "%s", out(&c));
    ck_assert_msg(strstr(out(&c), "note: static_print: h, v = 64\n"), "%s", out(&c));
    comp_free(&c);
}
END_TEST

/* static_print adds no op: the kernel with it has as many ops as without it. */
START_TEST(static_print_emits_nothing)
{
    const char *body = "    let offs = arange(32);\n    store(X + offs, load(X + offs) * 2);\n}\n";
    Comp a, b;
    char src1[512], src2[512];
    snprintf(src1, sizeof src1, "kernel k(X: *f32) {\n%s", body);
    snprintf(src2, sizeof src2, "kernel k(X: *f32) {\n    static_print(1, f32);\n%s", body);
    comp(&a, src1);
    comp(&b, src2);
    ck_assert_ptr_nonnull(a.m);
    ck_assert_ptr_nonnull(b.m);
    ck_assert_int_eq(count_ops(a.m->funcs[0]), count_ops(b.m->funcs[0]));
    ck_assert_int_eq(b.diag.nnotes, 1);
    comp_free(&a);
    comp_free(&b);
}
END_TEST

START_TEST(device_assert_lowers_with_messages)
{
    Comp c;
    comp(&c, "kernel k(X: *f32, n: i32) {\n"
             "    let offs = arange(128);\n"
             "    device_assert(offs < n);\n"
             "    device_assert(n > 3, \"n is small\");\n"
             "    device_assert(n !=\n        7);\n"
             "    device_assert(cond = offs >= 0);\n"
             "}\n");
    ck_assert_msg(c.m && c.diag.nerrors == 0, "%s", out(&c));
    const IrOp *ops[8];
    ck_assert_int_eq(find_ops(c.m->funcs[0], IR_ASSERT, ops, 8), 4);
    ck_assert_str_eq(ops[0]->sattr, "offs < n");
    ck_assert_int_eq(ops[0]->args[0]->type.rank, 1);
    ck_assert_int_eq(ops[0]->args[0]->type.shape[0], 128);
    ck_assert_int_eq(ops[0]->args[0]->type.elem, IR_I1);
    ck_assert_int_eq(ops[0]->loc.line, 3);
    ck_assert_str_eq(ops[1]->sattr, "n is small");
    ck_assert_int_eq(ops[1]->args[0]->type.rank, 0);
    ck_assert_str_eq(ops[2]->sattr, "assertion failed"); /* the condition spans two lines */
    ck_assert_str_eq(ops[3]->sattr, "assertion failed"); /* a keyword argument has no text */
    ck_assert_int_eq(ops[3]->loc.line, 7);
    comp_free(&c);
}
END_TEST

/* sum(x, axis = None) reduces every axis to a scalar, exactly as sum(x). */
START_TEST(axis_none_reduces_to_scalar)
{
    Comp c;
    comp(&c, "kernel k(X: *f32, Y: *f32) {\n"
             "    let r = arange(16);\n"
             "    let x = load(X + r[:, None] * 8 + arange(8)[None, :], mask = None, other = None);\n"
             "    let a = sum(x, axis = None);\n"
             "    let b = max(x, None);\n"
             "    let d = argmin(load(X + r), axis = None);\n"
             "    let e = sum(x, 1);\n"
             "    store(Y + r, e + a + b + d.to(f32), mask = None);\n"
             "}\n");
    ck_assert_msg(c.m && c.diag.nerrors == 0, "%s", out(&c));
    const IrOp *red[8], *ld[4], *st[4];
    ck_assert_int_eq(find_ops(c.m->funcs[0], IR_REDUCE, red, 8), 4);
    ck_assert_int_eq(red[0]->res[0]->type.rank, 0);     /* sum, axis None: scalar */
    ck_assert_int_eq(red[0]->args[0]->type.rank, 1);    /* over the flattened tile */
    ck_assert_int_eq(red[0]->args[0]->type.shape[0], 128);
    ck_assert_int_eq(red[0]->attr[1], IR_RED_SUM);
    ck_assert_int_eq(red[1]->res[0]->type.rank, 0);
    ck_assert_int_eq(red[1]->attr[1], IR_RED_MAX);
    ck_assert_int_eq(red[2]->res[0]->type.rank, 0);
    ck_assert_int_eq(red[2]->attr[1], IR_RED_ARGMIN);
    ck_assert_int_eq(red[3]->res[0]->type.rank, 1);     /* axis 1 still reduces one axis */
    ck_assert_int_eq(find_ops(c.m->funcs[0], IR_LOAD, ld, 4), 2);
    ck_assert_int_eq(ld[0]->nargs, 1);                  /* mask = None: no mask */
    ck_assert_int_eq(find_ops(c.m->funcs[0], IR_STORE, st, 4), 1);
    ck_assert_int_eq(st[0]->nargs, 2);
    comp_free(&c);
}
END_TEST

START_TEST(none_rejected_where_not_optional)
{
    Comp c;
    comp(&c, "kernel k(X: *f32) {\n    let x = load(X + arange(16));\n    let y = sum(None);\n}\n");
    ck_assert_ptr_null(c.m);
    ck_assert_int_eq(c.diag.nerrors, 1);
    ck_assert_msg(strstr(out(&c), "t.tile:3:17: error: 'None' is not a value"), "%s", out(&c));
    comp_free(&c);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("lang_debug");
    TCase *tc = tcase_create("all");
    tcase_add_test(tc, static_print_notes_once_per_site);
    tcase_add_test(tc, static_print_emits_nothing);
    tcase_add_test(tc, device_assert_lowers_with_messages);
    tcase_add_test(tc, axis_none_reduces_to_scalar);
    tcase_add_test(tc, none_rejected_where_not_optional);
    suite_add_tcase(s, tc);
    return s;
}

TU_MAIN(suite)
