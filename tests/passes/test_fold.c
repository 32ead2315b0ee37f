/* test_fold.c — unit tests of pass_fold on IR built with the builder. */
#include "passtest.h"

#include <float.h>
#include <stdint.h>

PT_FIXTURE
static IrValue *sink_ptr;

static void setup(void)
{
    pt_init(&t);
    sink_ptr = param(&t, ir_type_ptr(IR_F32), "out");
}

/* The folded constant behind v (fails the test when v's op is not a const). */
static const IrOp *K(IrValue *v)
{
    ck_assert_ptr_nonnull(v->def);
    ck_assert_msg(v->def->op == IR_CONST, "expected a const, got %s", ir_op_info[v->def->op].name);
    ck_assert_int_eq(v->def->nargs, 0);
    return v->def;
}

static bool is_kept(IrValue *v, IrOpcode opc) { return v->def && v->def->op == opc && v->def->parent; }

START_TEST(int_wraps_at_element_width)
{
    IrValue *max = ci(&t, IR_I32, INT32_MAX), *seven = ci(&t, IR_I32, 7);
    IrValue *add = bin(IR_ADD, T(IR_I32), max, seven);
    IrValue *mul = bin(IR_MUL, T(IR_I32), max, seven);
    IrValue *sub = bin(IR_SUB, T(IR_I32), ci(&t, IR_I32, INT32_MIN), seven);
    IrValue *i8 = bin(IR_ADD, T(IR_I8), ci(&t, IR_I8, 120), ci(&t, IR_I8, 9));
    IrValue *u32 = bin(IR_SUB, T(IR_U32), ci(&t, IR_U32, 0), ci(&t, IR_U32, 1));
    IrValue *u8 = bin(IR_MUL, T(IR_U8), ci(&t, IR_U8, 200), ci(&t, IR_U8, 3));
    IrValue *i64 = bin(IR_ADD, T(IR_I64), ci(&t, IR_I64, INT64_MAX), ci(&t, IR_I64, 1));
    IrValue *neg = irb_op1(&t.b, IR_NEG, T(IR_I32), ci(&t, IR_I32, INT32_MIN));
    IrValue *nt = irb_op1(&t.b, IR_NOT, T(IR_I1), ci(&t, IR_I1, 1));
    pt_done(&t);
    pass_fold(t.f);
    pt_check(&t);
    ck_assert_int_eq(K(add)->ival, (int64_t)INT32_MIN + 6);
    ck_assert_int_eq(K(mul)->ival, (int32_t)(uint32_t)(2147483647u * 7u));
    ck_assert_int_eq(K(sub)->ival, (int64_t)INT32_MAX - 6);
    ck_assert_int_eq(K(i8)->ival, -127);
    ck_assert_int_eq(K(u32)->ival, 4294967295LL);
    ck_assert_int_eq(K(u8)->ival, 600 % 256);
    ck_assert_int_eq(K(i64)->ival, INT64_MIN);
    ck_assert_int_eq(K(neg)->ival, INT32_MIN);
    ck_assert_int_eq(K(nt)->ival, 0);
}
END_TEST

START_TEST(int_ops_signedness)
{
    IrValue *sdiv = bin(IR_DIV, T(IR_I32), ci(&t, IR_I32, -7), ci(&t, IR_I32, 2));
    IrValue *srem = bin(IR_REM, T(IR_I32), ci(&t, IR_I32, -7), ci(&t, IR_I32, 2));
    IrValue *udiv = bin(IR_DIV, T(IR_U32), ci(&t, IR_U32, 4294967289LL), ci(&t, IR_U32, 2));
    IrValue *sshr = bin(IR_SHR, T(IR_I32), ci(&t, IR_I32, -16), ci(&t, IR_I32, 2));
    IrValue *ushr = bin(IR_SHR, T(IR_U32), ci(&t, IR_U32, 4294967280LL), ci(&t, IR_U32, 2));
    IrValue *shl = bin(IR_SHL, T(IR_I32), ci(&t, IR_I32, 3), ci(&t, IR_I32, 30));
    IrValue *smin = bin(IR_MIN, T(IR_I32), ci(&t, IR_I32, -1), ci(&t, IR_I32, 1));
    IrValue *umin = bin(IR_MIN, T(IR_U32), ci(&t, IR_U32, 4294967295LL), ci(&t, IR_U32, 1));
    IrValue *x = bin(IR_XOR, T(IR_I32), ci(&t, IR_I32, 0x0ff0), ci(&t, IR_I32, 0x00ff));
    IrValue *lt = bin(IR_CMP, T(IR_I1), ci(&t, IR_I32, -1), ci(&t, IR_I32, 1));
    lt->def->attr[0] = IR_CMP_LT;
    IrValue *ult = bin(IR_CMP, T(IR_I1), ci(&t, IR_U32, 4294967295LL), ci(&t, IR_U32, 1));
    ult->def->attr[0] = IR_CMP_LT;
    pt_done(&t);
    pass_fold(t.f);
    pt_check(&t);
    ck_assert_int_eq(K(sdiv)->ival, -3);
    ck_assert_int_eq(K(srem)->ival, -1);
    ck_assert_int_eq(K(udiv)->ival, 2147483644LL);
    ck_assert_int_eq(K(sshr)->ival, -4);
    ck_assert_int_eq(K(ushr)->ival, 1073741820LL);
    ck_assert_int_eq(K(shl)->ival, INT32_MIN + (1 << 30)); /* 3 << 30 wraps */
    ck_assert_int_eq(K(smin)->ival, -1);
    ck_assert_int_eq(K(umin)->ival, 1);
    ck_assert_int_eq(K(x)->ival, 0x0f0f);
    ck_assert_int_eq(K(lt)->ival, 1);
    ck_assert_int_eq(K(ult)->ival, 0);
}
END_TEST

/* Only a division by zero stays (a run-time error); the rest folds to the
 * IR's defined value (compiler/ir/eval.h), what the interpreter computes. */
START_TEST(only_div_by_zero_stays)
{
    IrValue *d0 = bin(IR_DIV, T(IR_I32), ci(&t, IR_I32, 5), ci(&t, IR_I32, 0));
    IrValue *r0 = bin(IR_REM, T(IR_U32), ci(&t, IR_U32, 5), ci(&t, IR_U32, 0));
    IrValue *dm = bin(IR_DIV, T(IR_I32), ci(&t, IR_I32, INT32_MIN), ci(&t, IR_I32, -1));
    IrValue *rm = bin(IR_REM, T(IR_I32), ci(&t, IR_I32, INT32_MIN), ci(&t, IR_I32, -1));
    IrValue *dm64 = bin(IR_DIV, T(IR_I64), ci(&t, IR_I64, INT64_MIN), ci(&t, IR_I64, -1));
    IrValue *sh = bin(IR_SHL, T(IR_I32), ci(&t, IR_I32, 1), ci(&t, IR_I32, 32));
    IrValue *shn = bin(IR_SHR, T(IR_I32), ci(&t, IR_I32, 1), ci(&t, IR_I32, -1));
    IrValue *ok = bin(IR_DIV, T(IR_I32), ci(&t, IR_I32, INT32_MIN), ci(&t, IR_I32, 1));
    IrValue *f2i = irb_op1(&t.b, IR_CAST, T(IR_I32), cf(&t, IR_F32, 3e9));
    IrValue *nan2i = irb_op1(&t.b, IR_CAST, T(IR_I32), cf(&t, IR_F32, NAN));
    IrValue *neg2u = irb_op1(&t.b, IR_CAST, T(IR_U8), cf(&t, IR_F32, -1.5));
    pt_done(&t);
    pass_fold(t.f);
    pt_check(&t);
    ck_assert(is_kept(d0, IR_DIV));
    ck_assert(is_kept(r0, IR_REM));
    ck_assert_int_eq(K(dm)->ival, INT32_MIN);  /* MIN / -1 wraps */
    ck_assert_int_eq(K(rm)->ival, 0);
    ck_assert_int_eq(K(dm64)->ival, INT64_MIN);
    ck_assert_int_eq(K(sh)->ival, 0);          /* shift >= width clamps to 0 */
    ck_assert_int_eq(K(shn)->ival, 0);         /* a negative amount reads as huge */
    ck_assert_int_eq(K(f2i)->ival, INT32_MAX); /* float -> int saturates */
    ck_assert_int_eq(K(nan2i)->ival, 0);       /* NaN -> 0 */
    ck_assert_int_eq(K(neg2u)->ival, 0);
    ck_assert_int_eq(K(ok)->ival, INT32_MIN); /* x / 1 */
}
END_TEST

START_TEST(half_precision_rounds_to_nearest_even)
{
    /* 1 + 1.5 ulp(1) in f16: a tie between 1+2^-10 (odd) and 1+2^-9 (even). */
    IrValue *tie = bin(IR_ADD, T(IR_F16), cf(&t, IR_F16, 1.0), cf(&t, IR_F16, 3 * 0x1p-11));
    /* 1 + 0.5 ulp: tie, rounds down to the even 1.0. */
    IrValue *tie2 = bin(IR_ADD, T(IR_F16), cf(&t, IR_F16, 1.0), cf(&t, IR_F16, 0x1p-11));
    IrValue *ovf = bin(IR_ADD, T(IR_F16), cf(&t, IR_F16, 60000.0), cf(&t, IR_F16, 10000.0));
    IrValue *sub = bin(IR_MUL, T(IR_F16), cf(&t, IR_F16, 0x1p-14), cf(&t, IR_F16, 0.25));
    IrValue *bf = bin(IR_ADD, T(IR_BF16), cf(&t, IR_BF16, 1.0), cf(&t, IR_BF16, 0x1p-8));
    IrValue *bf2 = bin(IR_ADD, T(IR_BF16), cf(&t, IR_BF16, 1.0), cf(&t, IR_BF16, 3 * 0x1p-8));
    IrValue *f32 = bin(IR_ADD, T(IR_F32), cf(&t, IR_F32, (double)0.1f), cf(&t, IR_F32, (double)0.2f));
    IrValue *f64 = bin(IR_ADD, T(IR_F64), cf(&t, IR_F64, 0.1), cf(&t, IR_F64, 0.2));
    IrValue *c16 = irb_op1(&t.b, IR_CAST, T(IR_F16), cf(&t, IR_F32, 0.1));
    IrValue *i2h = irb_op1(&t.b, IR_CAST, T(IR_F16), ci(&t, IR_I32, 2049));
    IrValue *i2h2 = irb_op1(&t.b, IR_CAST, T(IR_F16), ci(&t, IR_I32, 2051));
    IrValue *i2b = irb_op1(&t.b, IR_CAST, T(IR_BF16), ci(&t, IR_I64, (INT64_C(1) << 60) + (INT64_C(1) << 52) + 1));
    IrValue *i2hinf = irb_op1(&t.b, IR_CAST, T(IR_F16), ci(&t, IR_I32, 65520));
    IrValue *sq = irb_op1(&t.b, IR_SQRT, T(IR_F16), cf(&t, IR_F16, 2.0));
    pt_done(&t);
    pass_fold(t.f);
    pt_check(&t);
    ck_assert(K(tie)->fval == 1.0 + 0x1p-9);
    ck_assert(K(tie2)->fval == 1.0);
    ck_assert(isinf(K(ovf)->fval) && K(ovf)->fval > 0);
    ck_assert(K(sub)->fval == 0x1p-16); /* f16 subnormal, exact */
    ck_assert(K(bf)->fval == 1.0);       /* tie to even */
    ck_assert(K(bf2)->fval == 1.0 + 0x1p-6);
    ck_assert(K(f32)->fval == (double)(0.1f + 0.2f));
    ck_assert(K(f32)->fval != 0.1 + 0.2);
    ck_assert(K(f64)->fval == 0.1 + 0.2);
    ck_assert(K(c16)->fval == 0.0999755859375); /* nearest f16 to 0.1 */
    ck_assert(K(i2h)->fval == 2048.0);
    ck_assert(K(i2h2)->fval == 2052.0);
    /* 2^60 + 2^52 + 1: just above the tie between 2^60 and 2^60 + 2^53 -> rounds up. */
    ck_assert(K(i2b)->fval == 0x1p60 + 0x1p53);
    ck_assert(isinf(K(i2hinf)->fval));
    ck_assert(K(sq)->fval == 1.4140625); /* sqrt(2) rounded to f16 */
}
END_TEST

START_TEST(casts_and_compares)
{
    IrValue *f2i = irb_op1(&t.b, IR_CAST, T(IR_I32), cf(&t, IR_F32, -3.7));
    IrValue *f2u = irb_op1(&t.b, IR_CAST, T(IR_U8), cf(&t, IR_F32, 255.9));
    IrValue *i2i = irb_op1(&t.b, IR_CAST, T(IR_I8), ci(&t, IR_I32, 300));
    IrValue *u2i = irb_op1(&t.b, IR_CAST, T(IR_I64), ci(&t, IR_U32, 4294967295LL));
    IrValue *s2i = irb_op1(&t.b, IR_CAST, T(IR_I64), ci(&t, IR_I32, -1));
    IrValue *i2b = irb_op1(&t.b, IR_CAST, T(IR_I1), ci(&t, IR_I32, 4));
    IrValue *b2i = irb_op1(&t.b, IR_CAST, T(IR_I32), ci(&t, IR_I1, 1));
    IrValue *nan = cf(&t, IR_F32, NAN);
    IrValue *ne = bin(IR_CMP, T(IR_I1), nan, nan);
    ne->def->attr[0] = IR_CMP_NE;
    IrValue *eq = bin(IR_CMP, T(IR_I1), nan, nan);
    eq->def->attr[0] = IR_CMP_EQ;
    IrValue *fle = bin(IR_CMP, T(IR_I1), cf(&t, IR_F32, -0.0), cf(&t, IR_F32, 0.0));
    fle->def->attr[0] = IR_CMP_GE;
    pt_done(&t);
    pass_fold(t.f);
    pt_check(&t);
    ck_assert_int_eq(K(f2i)->ival, -3);
    ck_assert_int_eq(K(f2u)->ival, 255);
    ck_assert_int_eq(K(i2i)->ival, 44);
    ck_assert_int_eq(K(u2i)->ival, 4294967295LL);
    ck_assert_int_eq(K(s2i)->ival, -1);
    ck_assert_int_eq(K(i2b)->ival, 1);
    ck_assert_int_eq(K(b2i)->ival, 1);
    ck_assert_int_eq(K(ne)->ival, 1);
    ck_assert_int_eq(K(eq)->ival, 0);
    ck_assert_int_eq(K(fle)->ival, 1);
}
END_TEST

START_TEST(float_semantics_are_kept)
{
    IrValue *x = param(&t, T(IR_F32), "x");
    IrValue *xi = param(&t, T(IR_I32), "n");
    IrValue *add0 = bin(IR_ADD, T(IR_F32), x, cf(&t, IR_F32, 0.0));   /* -0 + 0 = +0: kept */
    IrValue *addm0 = bin(IR_ADD, T(IR_F32), cf(&t, IR_F32, -0.0), x); /* -> x */
    IrValue *sub0 = bin(IR_SUB, T(IR_F32), x, cf(&t, IR_F32, 0.0));   /* -> x */
    IrValue *subm0 = bin(IR_SUB, T(IR_F32), x, cf(&t, IR_F32, -0.0)); /* kept */
    IrValue *mul0 = bin(IR_MUL, T(IR_F32), x, cf(&t, IR_F32, 0.0));   /* kept: NaN, inf, -0 */
    IrValue *mul1 = bin(IR_MUL, T(IR_F32), cf(&t, IR_F32, 1.0), x);   /* -> x */
    IrValue *div1 = bin(IR_DIV, T(IR_F32), x, cf(&t, IR_F32, 1.0));   /* -> x */
    IrValue *cmpf = bin(IR_CMP, T(IR_I1), x, x);                       /* kept: NaN */
    cmpf->def->attr[0] = IR_CMP_EQ;
    IrValue *imul0 = bin(IR_MUL, T(IR_I32), ci(&t, IR_I32, 0), xi);     /* -> 0 */
    IrValue *iadd0 = bin(IR_ADD, T(IR_I32), ci(&t, IR_I32, 0), xi);     /* -> n */
    IrValue *isub0 = bin(IR_SUB, T(IR_I32), xi, ci(&t, IR_I32, 0));     /* -> n */
    IrValue *icmp = bin(IR_CMP, T(IR_I1), xi, xi);
    icmp->def->attr[0] = IR_CMP_LE;
    IrValue *icmp2 = bin(IR_CMP, T(IR_I1), xi, xi);
    icmp2->def->attr[0] = IR_CMP_NE;
    IrValue *uses[] = {add0, addm0, sub0, subm0, mul0, mul1, div1};
    for (int i = 0; i < 7; i++) pt_sink(&t, uses[i]);
    IrValue *iuses[] = {imul0, iadd0, isub0};
    for (int i = 0; i < 3; i++) pt_sink(&t, iuses[i]);
    pt_done(&t);
    pass_fold(t.f);
    pt_check(&t);
    ck_assert(is_kept(add0, IR_ADD));
    ck_assert(is_kept(subm0, IR_SUB));
    ck_assert(is_kept(mul0, IR_MUL));
    ck_assert(is_kept(cmpf, IR_CMP));
    ck_assert_ptr_null(addm0->def->parent);
    ck_assert_ptr_null(sub0->def->parent);
    ck_assert_ptr_null(mul1->def->parent);
    ck_assert_ptr_null(div1->def->parent);
    ck_assert_int_eq(K(imul0)->ival, 0);
    ck_assert_ptr_null(iadd0->def->parent);
    ck_assert_int_eq(K(icmp)->ival, 1);
    ck_assert_int_eq(K(icmp2)->ival, 0);
    /* The stores now use x / n directly. */
    int direct = 0;
    for (IrOp *op = t.f->body->first; op; op = op->next)
        if (op->op == IR_STORE && (op->args[1] == x || op->args[1] == xi)) direct++;
    ck_assert_int_eq(direct, 6); /* addm0, sub0, mul1, div1, iadd0, isub0 */
}
END_TEST

START_TEST(canonical_forms)
{
    IrValue *x = param(&t, T(IR_F32), "x");
    IrValue *b = param(&t, T(IR_I1), "b");
    IrValue *p = param(&t, ir_type_ptr(IR_F32), "p");
    IrValue *nn = irb_op1(&t.b, IR_NEG, T(IR_F32), irb_op1(&t.b, IR_NEG, T(IR_F32), x));
    IrValue *nb = irb_op1(&t.b, IR_NOT, T(IR_I1), irb_op1(&t.b, IR_NOT, T(IR_I1), b));
    IrValue *sel_args[3] = {ci(&t, IR_I1, 0), x, cf(&t, IR_F32, 2.5)};
    IrValue *sel = irb_op(&t.b, IR_SELECT, T(IR_F32), 3, sel_args);
    IrValue *sel2_args[3] = {ci(&t, IR_I1, 1), x, cf(&t, IR_F32, 2.5)};
    IrValue *sel2 = irb_op(&t.b, IR_SELECT, T(IR_F32), 3, sel2_args);
    IrValue *ap = bin(IR_ADDPTR, p->type, p, ci(&t, IR_I32, 0));
    IrValue *cs = irb_op1(&t.b, IR_CAST, T(IR_F32), x);
    IrValue *all[] = {nn, nb, sel, sel2, cs};
    for (int i = 0; i < 5; i++) pt_sink(&t, all[i]);
    pt_store(&t, ap, x);
    pt_done(&t);
    pass_fold(t.f);
    pt_check(&t);
    IrValue *want[] = {x, b, NULL, x, x, x};
    int i = 0;
    for (IrOp *op = t.f->body->first; op; op = op->next) {
        if (op->op != IR_STORE) continue;
        if (want[i]) ck_assert_ptr_eq(op->args[1], want[i]);
        else ck_assert(K(op->args[1])->fval == 2.5);
        if (i == 5) ck_assert_ptr_eq(op->args[0], p); /* addptr p, 0 */
        i++;
    }
    ck_assert_int_eq(i, 6);
    ck_assert_int_eq(pt_count(&t, IR_SELECT) + pt_count(&t, IR_ADDPTR) + pt_count(&t, IR_CAST), 0);
}
END_TEST

START_TEST(tile_constants)
{
    int32_t s2[2] = {4, 8}, s1x8[2] = {1, 8}, s32[1] = {32};
    IrValue *k = ci(&t, IR_I32, 5);
    IrValue *sp = irb_op1(&t.b, IR_SPLAT, TT(IR_I32, 8), k);
    IrValue *ex = irb_op1(&t.b, IR_EXPAND_DIMS, ir_type_tile(T(IR_I32), 2, s1x8), sp);
    IrValue *bc = irb_op1(&t.b, IR_BROADCAST, ir_type_tile(T(IR_I32), 2, s2), ex);
    IrValue *rs = irb_op1(&t.b, IR_RESHAPE, ir_type_tile(T(IR_I32), 1, s32), bc);
    IrValue *ad = bin(IR_ADD, ir_type_tile(T(IR_I32), 1, s32), rs, rs);
    IrValue *ar = irb_op(&t.b, IR_ARANGE, TT(IR_I32, 8), 0, NULL);
    ar->def->attr[1] = 8;
    IrValue *ad2 = bin(IR_ADD, TT(IR_I32, 8), ar, sp); /* arange is not a const: kept */
    pt_done(&t);
    pass_fold(t.f);
    pt_check(&t);
    ck_assert_int_eq(K(sp)->ival, 5);
    ck_assert_int_eq(K(ex)->ival, 5);
    ck_assert_int_eq(K(bc)->ival, 5);
    ck_assert(ir_type_eq(bc->type, ir_type_tile(T(IR_I32), 2, s2)));
    ck_assert_int_eq(K(rs)->ival, 5);
    ck_assert_int_eq(K(ad)->ival, 10);
    ck_assert(ir_type_eq(ad->type, ir_type_tile(T(IR_I32), 1, s32)));
    ck_assert(is_kept(ad2, IR_ADD));
}
END_TEST

START_TEST(zero_trip_for_and_const_if)
{
    IrValue *x = param(&t, T(IR_F32), "x");
    IrValue *n = param(&t, T(IR_I32), "n");
    /* for i in 8..8: results are the inits */
    IrValue *init = x;
    IrOp *loop = pt_for(&t, ci(&t, IR_I32, 8), ci(&t, IR_I32, 8), ci(&t, IR_I32, 1), 1, &init);
    IrValue *nx = bin(IR_MUL, T(IR_F32), loop->regions[0]->args[1], x);
    pt_yield(&t, 1, &nx);
    pt_end(&t, loop);
    pt_sink(&t, loop->res[0]);
    /* a loop with a run-time bound stays */
    IrOp *loop2 = pt_for(&t, ci(&t, IR_I32, 0), n, ci(&t, IR_I32, 1), 1, &init);
    IrValue *nx2 = bin(IR_MUL, T(IR_F32), loop2->regions[0]->args[1], x);
    pt_yield(&t, 1, &nx2);
    pt_end(&t, loop2);
    pt_sink(&t, loop2->res[0]);
    /* if false -> else region inlined; its add of constants folds too */
    IrType f32 = T(IR_F32);
    IrValue *c = bin(IR_CMP, T(IR_I1), ci(&t, IR_I32, 3), ci(&t, IR_I32, 2));
    c->def->attr[0] = IR_CMP_LT;
    IrOp *iff = pt_if(&t, c, 1, &f32, true);
    pt_sink(&t, x); /* then: never runs */
    pt_yield(&t, 1, &x);
    pt_in(&t, iff->regions[1]);
    IrValue *e = bin(IR_ADD, f32, cf(&t, IR_F32, 1.5), cf(&t, IR_F32, 2.0));
    pt_yield(&t, 1, &e);
    pt_end(&t, iff);
    pt_sink(&t, iff->res[0]);
    /* if true without else and no results: the then-region's store stays */
    IrOp *if2 = pt_if(&t, ci(&t, IR_I1, 1), 0, NULL, false);
    pt_sink(&t, n);
    pt_yield(&t, 0, NULL);
    pt_end(&t, if2);
    /* if false without else: gone, store and all */
    IrOp *if3 = pt_if(&t, ci(&t, IR_I1, 0), 0, NULL, false);
    pt_sink(&t, n);
    pt_yield(&t, 0, NULL);
    pt_end(&t, if3);
    pt_done(&t);
    pass_fold(t.f);
    pt_check(&t);
    ck_assert_int_eq(pt_count(&t, IR_FOR), 1);
    ck_assert_int_eq(pt_count(&t, IR_IF), 0);
    IrValue *stored[8];
    int ns = 0;
    for (IrOp *op = t.f->body->first; op; op = op->next)
        if (op->op == IR_STORE) stored[ns++] = op->args[1];
    ck_assert_int_eq(ns, 4);
    ck_assert_ptr_eq(stored[0], x);
    ck_assert_ptr_eq(stored[1], loop2->res[0]);
    ck_assert(K(stored[2])->fval == 3.5);
    ck_assert_ptr_eq(stored[3], n);
}
END_TEST

START_TEST(folds_inside_nested_loops)
{
    IrValue *n = param(&t, T(IR_I32), "n");
    IrValue *z = ci(&t, IR_I32, 0);
    IrOp *outer = pt_for(&t, z, n, ci(&t, IR_I32, 1), 0, NULL);
    IrOp *inner = pt_for(&t, z, n, ci(&t, IR_I32, 1), 0, NULL);
    IrValue *k = bin(IR_MUL, T(IR_I32), bin(IR_ADD, T(IR_I32), ci(&t, IR_I32, 2), ci(&t, IR_I32, 3)),
                     ci(&t, IR_I32, 4));
    IrValue *v = bin(IR_ADD, T(IR_I32), inner->regions[0]->args[0], k);
    pt_sink(&t, v);
    pt_yield(&t, 0, NULL);
    pt_end(&t, inner);
    pt_yield(&t, 0, NULL);
    pt_end(&t, outer);
    pt_done(&t);
    pass_fold(t.f);
    pt_check(&t);
    ck_assert_int_eq(K(k)->ival, 20);
    ck_assert(is_kept(v, IR_ADD));
    ck_assert_int_eq(pt_count(&t, IR_FOR), 2);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("fold");
    TCase *tc = tcase_create("fold");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, int_wraps_at_element_width);
    tcase_add_test(tc, int_ops_signedness);
    tcase_add_test(tc, only_div_by_zero_stays);
    tcase_add_test(tc, half_precision_rounds_to_nearest_even);
    tcase_add_test(tc, casts_and_compares);
    tcase_add_test(tc, float_semantics_are_kept);
    tcase_add_test(tc, canonical_forms);
    tcase_add_test(tc, tile_constants);
    tcase_add_test(tc, zero_trip_for_and_const_if);
    tcase_add_test(tc, folds_inside_nested_loops);
    suite_add_tcase(s, tc);
    return s;
}

TU_MAIN(suite)
