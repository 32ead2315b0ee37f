/* test_eval.c — the IR's scalar semantics (compiler/ir/eval.c) on the cases
 * where C, PTX and the old per-user code disagreed: integer wrap, C
 * truncating division, MIN / -1, shift amounts outside [0, width), fmod,
 * NaN-ignoring min/max, unordered comparisons, f16/bf16 rounding ties, int ->
 * f16 from 64 bits (one rounding), saturating float -> int, bits round trips.
 */
#include "testutil.h"

#include "compiler/ir/eval.h"

#include <math.h>
#include <stdint.h>

static IrScalar I(IrElem e, int64_t v) { return ir_eval_int(e, v); }
static IrScalar F(IrElem e, double v) { return ir_eval_float(e, v); }

static int64_t bin_i(IrOpcode op, IrElem e, int64_t a, int64_t b)
{
    IrScalar r;
    ck_assert_int_eq(ir_eval_binary(op, e, I(e, a), I(e, b), &r), IR_EVAL_OK);
    return r.i;
}

static double bin_f(IrOpcode op, IrElem e, double a, double b)
{
    IrScalar r;
    ck_assert_int_eq(ir_eval_binary(op, e, F(e, a), F(e, b), &r), IR_EVAL_OK);
    return r.f;
}

START_TEST(integers)
{
    ck_assert_int_eq(bin_i(IR_ADD, IR_I32, INT32_MAX, 1), INT32_MIN);
    ck_assert_int_eq(bin_i(IR_ADD, IR_U8, 255, 1), 0);
    ck_assert_int_eq(bin_i(IR_SUB, IR_U16, 0, 1), 65535);           /* zero-extended */
    ck_assert_int_eq(bin_i(IR_DIV, IR_I32, -7, 2), -3);              /* C truncation */
    ck_assert_int_eq(bin_i(IR_REM, IR_I32, -7, 2), -1);
    ck_assert_int_eq(bin_i(IR_DIV, IR_I32, INT32_MIN, -1), INT32_MIN); /* wraps */
    ck_assert_int_eq(bin_i(IR_REM, IR_I64, INT64_MIN, -1), 0);
    ck_assert_int_eq(bin_i(IR_DIV, IR_U32, 0xffffffffll, 2), 0x7fffffff); /* unsigned */
    ck_assert_int_eq(bin_i(IR_MIN, IR_U8, 200, 100), 100);
    ck_assert_int_eq(bin_i(IR_MIN, IR_I8, -56, 100), -56);
    ck_assert_int_eq(bin_i(IR_SHL, IR_I32, 1, 31), INT32_MIN);
    ck_assert_int_eq(bin_i(IR_SHL, IR_I32, 1, 32), 0);               /* >= width: 0 */
    ck_assert_int_eq(bin_i(IR_SHR, IR_I32, -8, 1), -4);              /* arithmetic */
    ck_assert_int_eq(bin_i(IR_SHR, IR_I32, -8, 40), -1);             /* sign fill */
    ck_assert_int_eq(bin_i(IR_SHR, IR_I32, 8, -1), 0);               /* negative amount: huge */
    ck_assert_int_eq(bin_i(IR_SHR, IR_U8, 0x80, 7), 1);              /* logical */
    ck_assert_int_eq(bin_i(IR_XOR, IR_I1, 1, 1), 0);
    IrScalar r;
    ck_assert_int_eq(ir_eval_binary(IR_DIV, IR_I32, I(IR_I32, 1), I(IR_I32, 0), &r), IR_EVAL_DIV_ZERO);
    ck_assert_int_eq(ir_eval_binary(IR_REM, IR_U8, I(IR_U8, 1), I(IR_U8, 256), &r), IR_EVAL_DIV_ZERO);
    ck_assert_int_eq(ir_eval_unary(IR_NEG, IR_I8, I(IR_I8, -128), &r), IR_EVAL_OK);
    ck_assert_int_eq(r.i, -128);
    ck_assert_int_eq(ir_eval_unary(IR_NOT, IR_I1, I(IR_I1, 1), &r), IR_EVAL_OK);
    ck_assert_int_eq(r.i, 0);
    ck_assert_int_eq(ir_eval_unary(IR_EXP, IR_I32, I(IR_I32, 1), &r), IR_EVAL_UNDEFINED);
    ck_assert_int_eq(ir_eval_binary(IR_AND, IR_F32, F(IR_F32, 1), F(IR_F32, 1), &r), IR_EVAL_UNDEFINED);
}
END_TEST

START_TEST(floats)
{
    ck_assert(bin_f(IR_REM, IR_F32, -7.5, 2.0) == -1.5);            /* fmod: sign of the dividend */
    ck_assert(bin_f(IR_MIN, IR_F32, NAN, 3.0) == 3.0);              /* NaN ignored */
    ck_assert(bin_f(IR_MAX, IR_F64, 2.0, NAN) == 2.0);
    ck_assert(isinf(bin_f(IR_DIV, IR_F16, 1.0, 0.0)));
    ck_assert(bin_f(IR_ADD, IR_F16, 65504.0, 15.5) == 65504.0);     /* below the tie: stays */
    ck_assert(isinf(bin_f(IR_ADD, IR_F16, 65504.0, 16.0)));          /* the tie 65520: inf */
    ck_assert(bin_f(IR_ADD, IR_F16, 1.0, 0x1p-11) == 1.0);          /* tie to even */
    ck_assert(bin_f(IR_ADD, IR_F16, 1.0 + 0x1p-10, 0x1p-11) == 1.0 + 0x1p-9);
    ck_assert(bin_f(IR_ADD, IR_BF16, 1.0, 0x1p-8) == 1.0);
    ck_assert(bin_f(IR_ADD, IR_F32, 1.0, 0x1p-24) == 1.0);          /* f32 computes in float */
    ck_assert(bin_f(IR_ADD, IR_F64, 1.0, 0x1p-24) == 1.0 + 0x1p-24);
    ck_assert(ir_eval_cmp(IR_CMP_NE, IR_F32, F(IR_F32, NAN), F(IR_F32, NAN)));
    ck_assert(!ir_eval_cmp(IR_CMP_EQ, IR_F32, F(IR_F32, NAN), F(IR_F32, NAN)));
    ck_assert(!ir_eval_cmp(IR_CMP_GE, IR_F64, F(IR_F64, NAN), F(IR_F64, 1)));
    ck_assert(ir_eval_cmp(IR_CMP_EQ, IR_F32, F(IR_F32, 0.0), F(IR_F32, -0.0)));
    ck_assert(ir_eval_cmp(IR_CMP_GT, IR_U32, I(IR_U32, -1), I(IR_U32, 1)));   /* unsigned */
    ck_assert(ir_eval_cmp(IR_CMP_LT, IR_I32, I(IR_I32, -1), I(IR_I32, 1)));
}
END_TEST

static IrScalar cast(IrElem from, IrElem to, IrScalar v) { return ir_eval_cast(from, to, v); }

START_TEST(casts)
{
    /* int -> f16 from 64 bits: one rounding (2049 is a tie between 2048 and 2050). */
    ck_assert(cast(IR_I64, IR_F16, I(IR_I64, 2049)).f == 2048.0);
    ck_assert(cast(IR_I64, IR_F16, I(IR_I64, 2051)).f == 2052.0);
    ck_assert(isinf(cast(IR_I32, IR_F16, I(IR_I32, 65520)).f));
    /* 2^60 + 2^52 + 1 is just above a bf16 tie: a double rounding would go to even (down). */
    ck_assert(cast(IR_U64, IR_BF16, I(IR_U64, (1ll << 60) + (1ll << 52) + 1)).f == 0x1p60 + 0x1p53);
    ck_assert(cast(IR_U64, IR_F32, I(IR_U64, -1)).f == 0x1p64);
    ck_assert(cast(IR_F64, IR_F16, F(IR_F64, 1.0 + 0x1p-11 + 0x1p-40)).f == 1.0 + 0x1p-10);
    /* float -> int: truncation, saturation, NaN -> 0. */
    ck_assert_int_eq(cast(IR_F32, IR_I32, F(IR_F32, -2.75)).i, -2);
    ck_assert_int_eq(cast(IR_F32, IR_I32, F(IR_F32, 3e9)).i, INT32_MAX);
    ck_assert_int_eq(cast(IR_F32, IR_I32, F(IR_F32, -3e9)).i, INT32_MIN);
    ck_assert_int_eq(cast(IR_F32, IR_U8, F(IR_F32, -3.7)).i, 0);
    ck_assert_int_eq(cast(IR_F32, IR_U8, F(IR_F32, 300.0)).i, 255);
    ck_assert_int_eq(cast(IR_F64, IR_I64, F(IR_F64, 1e19)).i, INT64_MAX);
    ck_assert_int_eq(cast(IR_F64, IR_U64, F(IR_F64, 1e20)).u, UINT64_MAX);
    ck_assert_int_eq(cast(IR_F32, IR_I32, F(IR_F32, NAN)).i, 0);
    ck_assert_int_eq(cast(IR_F32, IR_I1, F(IR_F32, NAN)).i, 1);      /* != 0 */
    ck_assert_int_eq(cast(IR_F32, IR_I1, F(IR_F32, -0.0)).i, 0);
    /* int -> int: wrap by the target, extension by the source. */
    ck_assert_int_eq(cast(IR_I8, IR_U32, I(IR_I8, -1)).i, 0xffffffffll);
    ck_assert_int_eq(cast(IR_U8, IR_I32, I(IR_U8, 255)).i, 255);
    ck_assert_int_eq(cast(IR_I32, IR_I8, I(IR_I32, 300)).i, 44);
    ck_assert_int_eq(cast(IR_I32, IR_I1, I(IR_I32, 2)).i, 1);
}
END_TEST

START_TEST(bits_round_trip)
{
    static const IrElem es[] = {IR_I1, IR_I8, IR_I16, IR_I32, IR_I64, IR_U8, IR_U16, IR_U32, IR_U64,
                                IR_F16, IR_BF16, IR_F32, IR_F64};
    uint64_t s = 12345;
    for (int k = 0; k < 13; k++)
        for (int i = 0; i < 2000; i++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            IrElem e = es[k];
            int bits = ir_elem_bits(e);
            uint64_t b = bits >= 64 ? s : s & ((1ull << bits) - 1);
            IrScalar v = ir_eval_from_bits(e, b);
            if (ir_elem_is_float(e) && isnan(v.f)) continue; /* NaNs are quietened */
            ck_assert_msg(ir_eval_to_bits(e, v) == b, "%s 0x%llx", ir_elem_name(e), (unsigned long long)b);
        }
    ck_assert_int_eq(ir_eval_to_bits(IR_F16, F(IR_F16, -0.0)), 0x8000);
    ck_assert_int_eq(ir_eval_to_bits(IR_I8, I(IR_I8, -1)), 0xff);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("eval");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, integers);
    tcase_add_test(tc, floats);
    tcase_add_test(tc, casts);
    tcase_add_test(tc, bits_round_trip);
    suite_add_tcase(s, tc);
    return s;
}

TU_MAIN(suite)
