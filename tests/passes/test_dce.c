/* test_dce.c — unit tests of pass_dce on IR built with the builder. */
#include "passtest.h"

PT_LOOP_FIXTURE

START_TEST(removes_dead_chains_keeps_effects)
{
    IrValue *x = param(&t, T(IR_F32), "x");
    IrValue *d1 = bin(IR_MUL, T(IR_F32), x, x);
    IrValue *d2 = irb_op1(&t.b, IR_EXP, T(IR_F32), d1); /* dead chain d1 -> d2 */
    (void)d2;
    IrValue *l = irb_op1(&t.b, IR_LOAD, T(IR_F32), out); /* unused load: kept */
    (void)l;
    IrValue *live = bin(IR_ADD, T(IR_F32), x, cf(&t, IR_F32, 1.0));
    pt_store(&t, out, live);
    pt_done(&t);
    pass_dce(t.f);
    pt_check(&t);
    ck_assert_int_eq(pt_count(&t, IR_MUL), 0);
    ck_assert_int_eq(pt_count(&t, IR_EXP), 0);
    ck_assert_int_eq(pt_count(&t, IR_LOAD), 1);
    ck_assert_int_eq(pt_count(&t, IR_ADD), 1);
    ck_assert_int_eq(pt_count(&t, IR_CONST), 1); /* z and one were dead */
    ck_assert_int_eq(pt_count(&t, IR_STORE), 1);
    ck_assert_int_eq(pt_count(&t, IR_RETURN), 1);
}
END_TEST

/* acc = acc + x carried around, result unused: removed, the loop (with its store) stays. */
START_TEST(dead_carried_value_in_effectful_loop)
{
    IrValue *x = param(&t, T(IR_F32), "x");
    IrValue *inits[3] = {cf(&t, IR_F32, 0.5), cf(&t, IR_F32, 2.0), x};
    IrOp *loop = pt_for(&t, z, n, one, 3, inits);
    IrBlock *body = loop->regions[0];
    IrValue *acc = bin(IR_ADD, T(IR_F32), body->args[1], x);     /* dead carried 0 */
    IrValue *live = bin(IR_MUL, T(IR_F32), body->args[2], x);    /* carried 1: result used */
    IrValue *sq = bin(IR_MUL, T(IR_F32), body->args[3], body->args[3]); /* carried 2: stored */
    pt_store(&t, out, sq);
    IrValue *ys[3] = {acc, live, sq};
    pt_yield(&t, 3, ys);
    pt_end(&t, loop);
    pt_store(&t, out, loop->res[1]);
    pt_done(&t);
    IrValue *r1 = loop->res[1], *r2 = loop->res[2];
    pass_dce(t.f);
    pt_check(&t);
    ck_assert_int_eq(pt_count(&t, IR_FOR), 1);
    ck_assert_int_eq(loop->nres, 2);
    ck_assert_int_eq(loop->nargs, 5);
    ck_assert_int_eq(body->nargs, 3);
    ck_assert_ptr_eq(loop->res[0], r1);
    ck_assert_int_eq(r1->index, 0);
    ck_assert_ptr_eq(loop->res[1], r2);
    ck_assert_ptr_eq(loop->args[3], inits[1]);
    ck_assert_ptr_eq(loop->args[4], x);
    ck_assert_int_eq(body->args[1]->index, 1);
    ck_assert_int_eq(body->last->nargs, 2);
    ck_assert_ptr_eq(body->last->args[0], live);
    ck_assert_ptr_eq(body->last->args[1], sq);
    ck_assert_int_eq(pt_count(&t, IR_ADD), 0);
    ck_assert_int_eq(pt_count(&t, IR_CONST), 3); /* z, one, 2.0 (0.5 was the dead init) */
}
END_TEST

/* A loop whose only work is dead carried values goes away entirely. */
START_TEST(loop_without_effects_removed)
{
    IrValue *x = param(&t, T(IR_F32), "x");
    IrOp *outer = pt_for(&t, z, n, one, 1, &x);
    IrValue *c = outer->regions[0]->args[1];
    IrOp *inner = pt_for(&t, z, n, one, 1, &c);
    IrValue *e = irb_op1(&t.b, IR_EXP, T(IR_F32), inner->regions[0]->args[1]);
    pt_yield(&t, 1, &e);
    pt_end(&t, inner);
    pt_yield(&t, 1, &inner->res[0]);
    pt_end(&t, outer);
    /* an if with a result nobody uses and no effects */
    IrType f32 = T(IR_F32);
    IrValue *cond = bin(IR_CMP, T(IR_I1), n, z);
    IrOp *iff = pt_if(&t, cond, 1, &f32, true);
    IrValue *a = irb_op1(&t.b, IR_NEG, f32, x);
    pt_yield(&t, 1, &a);
    pt_in(&t, iff->regions[1]);
    pt_yield(&t, 1, &x);
    pt_end(&t, iff);
    pt_done(&t);
    pass_dce(t.f);
    pt_check(&t);
    ck_assert_int_eq(pt_count(&t, IR_FOR), 0);
    ck_assert_int_eq(pt_count(&t, IR_IF), 0);
    ck_assert_int_eq(pt_count(&t, IR_OP_COUNT), 1); /* return */
}
END_TEST

/* Effects nested two loops deep keep both loops and their bounds. */
START_TEST(nested_effects_keep_loops)
{
    IrValue *m = bin(IR_MUL, T(IR_I32), n, n);
    IrOp *outer = pt_for(&t, z, m, one, 0, NULL);
    IrOp *inner = pt_for(&t, z, n, one, 0, NULL);
    IrValue *iv = inner->regions[0]->args[0];
    IrValue *f = irb_op1(&t.b, IR_CAST, T(IR_F32), iv);
    IrValue *dead = bin(IR_ADD, T(IR_I32), iv, one);
    (void)dead;
    IrValue *args[2] = {out, f};
    IrOp *st = ir_op_new(t.f, IR_ATOMIC_ADD, t.b.loc, 2, args, 1, &f->type); /* result unused */
    irb_insert(&t.b, st);
    pt_yield(&t, 0, NULL);
    pt_end(&t, inner);
    pt_yield(&t, 0, NULL);
    pt_end(&t, outer);
    pt_done(&t);
    pass_dce(t.f);
    pt_check(&t);
    ck_assert_int_eq(pt_count(&t, IR_FOR), 2);
    ck_assert_int_eq(pt_count(&t, IR_MUL), 1);
    ck_assert_int_eq(pt_count(&t, IR_CAST), 1);
    ck_assert_int_eq(pt_count(&t, IR_ADD), 0);
    ck_assert_int_eq(pt_count(&t, IR_ATOMIC_ADD), 1);
}
END_TEST

/* A kept if loses the result nobody uses, keeps the one that is used. */
START_TEST(if_results_pruned)
{
    IrValue *x = param(&t, T(IR_F32), "x");
    IrType rt[2] = {T(IR_F32), T(IR_F32)};
    IrValue *cond = bin(IR_CMP, T(IR_I1), n, z);
    IrOp *iff = pt_if(&t, cond, 2, rt, true);
    IrValue *a = irb_op1(&t.b, IR_NEG, rt[0], x);
    IrValue *b = irb_op1(&t.b, IR_EXP, rt[0], x);
    IrValue *ya[2] = {a, b};
    pt_yield(&t, 2, ya);
    pt_in(&t, iff->regions[1]);
    IrValue *yb[2] = {x, x};
    pt_yield(&t, 2, yb);
    pt_end(&t, iff);
    pt_store(&t, out, iff->res[1]);
    pt_done(&t);
    IrValue *r1 = iff->res[1];
    pass_dce(t.f);
    pt_check(&t);
    ck_assert_int_eq(pt_count(&t, IR_IF), 1);
    ck_assert_int_eq(iff->nres, 1);
    ck_assert_ptr_eq(iff->res[0], r1);
    ck_assert_int_eq(r1->index, 0);
    ck_assert_int_eq(pt_count(&t, IR_NEG), 0);
    ck_assert_int_eq(pt_count(&t, IR_EXP), 1);
    ck_assert_int_eq(iff->regions[0]->last->nargs, 1);
    ck_assert_ptr_eq(iff->regions[0]->last->args[0], b);
    ck_assert_int_eq(iff->regions[1]->last->nargs, 1);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("dce");
    TCase *tc = tcase_create("dce");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, removes_dead_chains_keeps_effects);
    tcase_add_test(tc, dead_carried_value_in_effectful_loop);
    tcase_add_test(tc, loop_without_effects_removed);
    tcase_add_test(tc, nested_effects_keep_loops);
    tcase_add_test(tc, if_results_pruned);
    suite_add_tcase(s, tc);
    return s;
}

TU_MAIN(suite)
