/* test_licm.c — unit tests of pass_licm on IR built with the builder. */
#include "passtest.h"

PT_LOOP_FIXTURE

/* The block an op lives in now. */
static IrBlock *home(IrValue *v) { return v->def->parent; }

START_TEST(hoists_invariants_in_order)
{
    IrValue *s = param(&t, T(IR_F32), "s");
    IrOp *loop = pt_for(&t, z, n, one, 0, NULL);
    IrBlock *body = loop->regions[0];
    IrValue *k = cf(&t, IR_F32, 1.4426950408889634);
    IrValue *inv = bin(IR_MUL, T(IR_F32), s, k);             /* invariant, uses hoisted k */
    IrValue *iv = irb_op1(&t.b, IR_CAST, T(IR_F32), body->args[0]); /* variant */
    IrValue *var = bin(IR_MUL, T(IR_F32), iv, inv);
    IrValue *ld = irb_op1(&t.b, IR_LOAD, T(IR_F32), out);    /* invariant address, not hoisted */
    IrValue *sum = bin(IR_ADD, T(IR_F32), var, ld);
    pt_store(&t, out, sum);
    pt_yield(&t, 0, NULL);
    pt_end(&t, loop);
    pt_done(&t);
    pass_licm(t.f);
    pt_check(&t);
    ck_assert_ptr_eq(home(k), t.f->body);
    ck_assert_ptr_eq(home(inv), t.f->body);
    ck_assert_ptr_eq(k->def->next, inv->def);   /* order kept ... */
    ck_assert_ptr_eq(inv->def->next, loop);     /* ... just before the loop */
    ck_assert_ptr_eq(home(iv), body);
    ck_assert_ptr_eq(home(var), body);
    ck_assert_ptr_eq(home(ld), body);
    ck_assert_ptr_eq(home(sum), body);
}
END_TEST

/* An invariant of both loops of a nest bubbles out of both; one that uses the
 * outer induction variable stops between them. */
START_TEST(nested_invariants_bubble_up)
{
    IrValue *a = param(&t, T(IR_I32), "a");
    IrOp *outer = pt_for(&t, z, n, one, 0, NULL);
    IrValue *oiv = outer->regions[0]->args[0];
    IrOp *inner = pt_for(&t, z, n, one, 0, NULL);
    IrValue *both = bin(IR_MUL, T(IR_I32), a, a);            /* -> top */
    IrValue *both2 = bin(IR_ADD, T(IR_I32), both, one);       /* -> top */
    IrValue *mid = bin(IR_ADD, T(IR_I32), oiv, both2);        /* -> outer body */
    IrValue *in = bin(IR_ADD, T(IR_I32), mid, inner->regions[0]->args[0]); /* stays */
    pt_store(&t, out, irb_op1(&t.b, IR_CAST, T(IR_F32), in));
    pt_yield(&t, 0, NULL);
    pt_end(&t, inner);
    pt_yield(&t, 0, NULL);
    pt_end(&t, outer);
    pt_done(&t);
    pass_licm(t.f);
    pt_check(&t);
    ck_assert_ptr_eq(home(both), t.f->body);
    ck_assert_ptr_eq(home(both2), t.f->body);
    ck_assert_ptr_eq(both2->def->next, outer);
    ck_assert_ptr_eq(home(mid), outer->regions[0]);
    ck_assert_ptr_eq(mid->def->next, inner);
    ck_assert_ptr_eq(home(in), inner->regions[0]);
}
END_TEST

/* Carried values, ops under an if, int division by a possibly-zero divisor stay. */
START_TEST(what_stays)
{
    IrValue *a = param(&t, T(IR_I32), "a"), *d = param(&t, T(IR_I32), "d");
    IrValue *x = param(&t, T(IR_F32), "x");
    IrOp *loop = pt_for(&t, z, n, one, 1, &x);
    IrBlock *body = loop->regions[0];
    IrValue *carried = bin(IR_MUL, T(IR_F32), body->args[1], x); /* uses the carried arg */
    IrValue *dv = bin(IR_DIV, T(IR_I32), a, d);                  /* may trap: stays */
    IrValue *dk = bin(IR_DIV, T(IR_I32), a, ci(&t, IR_I32, 4));  /* safe: hoisted */
    IrValue *dm = bin(IR_DIV, T(IR_I32), a, ci(&t, IR_I32, -1)); /* MIN / -1: stays */
    IrValue *fd = bin(IR_DIV, T(IR_F32), x, x);                  /* floats never trap */
    IrValue *c = bin(IR_CMP, T(IR_I1), a, d);
    IrOp *iff = pt_if(&t, c, 0, NULL, false);
    IrValue *guarded = bin(IR_SUB, T(IR_I32), a, d);             /* under the if: stays */
    pt_store(&t, out, irb_op1(&t.b, IR_CAST, T(IR_F32), guarded));
    pt_yield(&t, 0, NULL);
    pt_end(&t, iff);
    IrValue *u[3] = {dv, dk, dm};
    for (int i = 0; i < 3; i++) pt_store(&t, out, irb_op1(&t.b, IR_CAST, T(IR_F32), u[i]));
    pt_store(&t, out, fd);
    pt_yield(&t, 1, &carried);
    pt_end(&t, loop);
    pt_done(&t);
    pass_licm(t.f);
    pt_check(&t);
    ck_assert_ptr_eq(home(carried), body);
    ck_assert_ptr_eq(home(dv), body);
    ck_assert_ptr_eq(home(dk), t.f->body);
    ck_assert_ptr_eq(home(dm), body);
    ck_assert_ptr_eq(home(fd), t.f->body);
    ck_assert_ptr_eq(home(c), t.f->body);
    ck_assert_ptr_eq(home(guarded), iff->regions[0]);
    ck_assert_ptr_eq(iff->parent, body);
}
END_TEST

/* A loop inside an if inside a loop: the inner loop's invariants reach the outer body,
 * are not pulled out of the if, and stop there. */
START_TEST(loop_under_if)
{
    IrValue *a = param(&t, T(IR_I32), "a");
    IrOp *outer = pt_for(&t, z, n, one, 0, NULL);
    IrValue *c = bin(IR_CMP, T(IR_I1), outer->regions[0]->args[0], a);
    IrOp *iff = pt_if(&t, c, 0, NULL, false);
    IrOp *inner = pt_for(&t, z, n, one, 0, NULL);
    IrValue *inv = bin(IR_MUL, T(IR_I32), a, a);
    pt_store(&t, out, irb_op1(&t.b, IR_CAST, T(IR_F32), bin(IR_ADD, T(IR_I32), inv, inner->regions[0]->args[0])));
    pt_yield(&t, 0, NULL);
    pt_end(&t, inner);
    pt_yield(&t, 0, NULL);
    pt_end(&t, iff);
    pt_yield(&t, 0, NULL);
    pt_end(&t, outer);
    pt_done(&t);
    pass_licm(t.f);
    pt_check(&t);
    ck_assert_ptr_eq(home(inv), iff->regions[0]);
    ck_assert_ptr_eq(inv->def->next, inner);
    ck_assert_ptr_eq(home(c), outer->regions[0]);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("licm");
    TCase *tc = tcase_create("licm");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, hoists_invariants_in_order);
    tcase_add_test(tc, nested_invariants_bubble_up);
    tcase_add_test(tc, what_stays);
    tcase_add_test(tc, loop_under_if);
    suite_add_tcase(s, tc);
    return s;
}

TU_MAIN(suite)
