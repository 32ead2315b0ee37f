/* test_cse.c — unit tests of pass_cse on IR built with the builder. */
#include "passtest.h"

PT_FIXTURE
static IrValue *out;

static void setup(void)
{
    pt_init(&t);
    out = param(&t, ir_type_ptr(IR_I32), "out");
}

START_TEST(merges_identical_pure_ops)
{
    IrValue *a = param(&t, T(IR_I32), "a"), *b = param(&t, T(IR_I32), "b");
    IrValue *m1 = bin(IR_MUL, T(IR_I32), a, b);
    IrValue *m2 = bin(IR_MUL, T(IR_I32), a, b);
    IrValue *m3 = bin(IR_MUL, T(IR_I32), b, a);        /* commutative int: same */
    IrValue *s1 = bin(IR_SUB, T(IR_I32), a, b);
    IrValue *s2 = bin(IR_SUB, T(IR_I32), b, a);        /* not commutative: kept */
    IrValue *k1 = ci(&t, IR_I32, 7), *k2 = ci(&t, IR_I32, 7), *k3 = ci(&t, IR_I32, 8);
    IrValue *w1 = irb_op1(&t.b, IR_CAST, T(IR_I64), a);
    IrValue *w2 = irb_op1(&t.b, IR_CAST, T(IR_F32), a); /* other result type: kept */
    IrValue *w3 = irb_op1(&t.b, IR_CAST, T(IR_I64), a); /* == w1 */
    IrValue *c1 = bin(IR_CMP, T(IR_I1), a, b);
    c1->def->attr[0] = IR_CMP_LT;
    IrValue *c2 = bin(IR_CMP, T(IR_I1), a, b);
    c2->def->attr[0] = IR_CMP_GT;                      /* other attribute: kept */
    IrValue *all[] = {m1, m2, m3, s1, s2, k1, k2, k3, w1, w2, w3, c1, c2};
    for (int i = 0; i < 13; i++) pt_sink(&t, all[i]);
    pt_done(&t);
    pass_cse(t.f);
    pt_check(&t);
    ck_assert_int_eq(pt_count(&t, IR_MUL), 1);
    ck_assert_int_eq(pt_count(&t, IR_SUB), 2);
    ck_assert_int_eq(pt_count(&t, IR_CONST), 2);
    ck_assert_int_eq(pt_count(&t, IR_CMP), 2);
    ck_assert_int_eq(pt_count(&t, IR_CAST), 2);
    IrValue *want[] = {m1, m1, m1, s1, s2, k1, k1, k3, w1, w2, w1, c1, c2};
    int i = 0;
    for (IrOp *op = t.f->body->first; op; op = op->next)
        if (op->op == IR_STORE) ck_assert_ptr_eq(op->args[1], want[i++]);
    ck_assert_int_eq(i, 13);
}
END_TEST

START_TEST(float_operand_order_and_effects)
{
    IrValue *x = param(&t, T(IR_F32), "x"), *y = param(&t, T(IR_F32), "y");
    IrValue *p = param(&t, ir_type_ptr(IR_F32), "p");
    IrValue *m1 = bin(IR_MAX, T(IR_F32), x, y);
    IrValue *m2 = bin(IR_MAX, T(IR_F32), y, x);        /* float: order kept */
    IrValue *l1 = irb_op1(&t.b, IR_LOAD, T(IR_F32), p);
    IrValue *l2 = irb_op1(&t.b, IR_LOAD, T(IR_F32), p); /* loads are never merged */
    IrValue *f1 = cf(&t, IR_F32, 0.0), *f2 = cf(&t, IR_F32, -0.0); /* differ by sign */
    IrValue *all[] = {m1, m2, l1, l2, f1, f2};
    for (int i = 0; i < 6; i++) pt_store(&t, p, all[i]);
    pt_done(&t);
    pass_cse(t.f);
    pt_check(&t);
    ck_assert_int_eq(pt_count(&t, IR_MAX), 2);
    ck_assert_int_eq(pt_count(&t, IR_LOAD), 2);
    ck_assert_int_eq(pt_count(&t, IR_CONST), 2);
}
END_TEST

/* Outer replaces inner; inner never replaces outer; then/else stay apart. */
START_TEST(scoped_across_regions)
{
    IrValue *a = param(&t, T(IR_I32), "a"), *n = param(&t, T(IR_I32), "n");
    IrValue *outer1 = bin(IR_ADD, T(IR_I32), a, n);
    IrValue *z = ci(&t, IR_I32, 0), *one = ci(&t, IR_I32, 1);
    IrOp *loop = pt_for(&t, z, n, one, 0, NULL);
    IrValue *inner1 = bin(IR_ADD, T(IR_I32), a, n);    /* == outer1: replaced */
    IrValue *inner2 = bin(IR_MUL, T(IR_I32), a, a);    /* only inside */
    IrValue *inner3 = bin(IR_MUL, T(IR_I32), a, a);    /* == inner2 */
    IrValue *inner4 = bin(IR_SUB, T(IR_I32), a, loop->regions[0]->args[0]);
    pt_store(&t, out, inner1);
    pt_store(&t, out, inner3);
    pt_store(&t, out, inner4);
    pt_yield(&t, 0, NULL);
    pt_end(&t, loop);
    IrValue *after = bin(IR_MUL, T(IR_I32), a, a);     /* must not use the loop's */
    pt_store(&t, out, after);
    IrValue *c = bin(IR_CMP, T(IR_I1), a, n);
    IrOp *iff = pt_if(&t, c, 0, NULL, true);
    IrValue *th = bin(IR_XOR, T(IR_I32), a, n);
    pt_store(&t, out, th);
    pt_yield(&t, 0, NULL);
    pt_in(&t, iff->regions[1]);
    IrValue *el = bin(IR_XOR, T(IR_I32), a, n);        /* not replaced by then's */
    pt_store(&t, out, el);
    pt_yield(&t, 0, NULL);
    pt_end(&t, iff);
    pt_done(&t);
    pass_cse(t.f);
    pt_check(&t);
    ck_assert_int_eq(pt_count(&t, IR_ADD), 1);
    ck_assert_int_eq(pt_count(&t, IR_MUL), 2); /* one in the loop, one after */
    ck_assert_int_eq(pt_count(&t, IR_XOR), 2);
    ck_assert_ptr_nonnull(after->def->parent);
    ck_assert_ptr_eq(after->def->parent, t.f->body);
    IrOp *st = loop->regions[0]->first;
    while (st->op != IR_STORE) st = st->next;
    ck_assert_ptr_eq(st->args[1], outer1);
    ck_assert_ptr_eq(st->next->args[1], inner2);
    (void)inner1;
}
END_TEST

START_TEST(region_ops_are_not_merged)
{
    IrValue *n = param(&t, T(IR_I32), "n");
    IrValue *z = ci(&t, IR_I32, 0), *one = ci(&t, IR_I32, 1);
    for (int k = 0; k < 2; k++) {
        IrOp *loop = pt_for(&t, z, n, one, 1, &z);
        IrValue *s = bin(IR_ADD, T(IR_I32), loop->regions[0]->args[1], one);
        pt_yield(&t, 1, &s);
        pt_end(&t, loop);
        pt_store(&t, out, loop->res[0]);
    }
    pt_done(&t);
    pass_cse(t.f);
    pt_check(&t);
    ck_assert_int_eq(pt_count(&t, IR_FOR), 2);
    ck_assert_int_eq(pt_count(&t, IR_ADD), 2); /* different block args */
}
END_TEST

/* Chains collapse in one pass: once a's duplicate is replaced, b's duplicate matches. */
START_TEST(chains_and_many_ops)
{
    IrValue *a = param(&t, T(IR_I32), "a");
    IrValue *x = a, *y = a;
    for (int i = 0; i < 2000; i++) {
        x = bin(IR_ADD, T(IR_I32), x, ci(&t, IR_I32, i % 7));
        y = bin(IR_ADD, T(IR_I32), y, ci(&t, IR_I32, i % 7));
    }
    pt_store(&t, out, x);
    pt_store(&t, out, y);
    pt_done(&t);
    pass_cse(t.f);
    pt_check(&t);
    ck_assert_int_eq(pt_count(&t, IR_ADD), 2000);
    ck_assert_int_eq(pt_count(&t, IR_CONST), 7);
    IrOp *last = t.f->body->last->prev;
    ck_assert_ptr_eq(last->args[1], x);
    ck_assert_ptr_eq(last->prev->args[1], x);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("cse");
    TCase *tc = tcase_create("cse");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, merges_identical_pure_ops);
    tcase_add_test(tc, float_operand_order_and_effects);
    tcase_add_test(tc, scoped_across_regions);
    tcase_add_test(tc, region_ops_are_not_merged);
    tcase_add_test(tc, chains_and_many_ops);
    suite_add_tcase(s, tc);
    return s;
}

TU_MAIN(suite)
