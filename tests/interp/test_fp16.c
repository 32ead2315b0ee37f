/* test_fp16.c — the f16/bf16 converters: exhaustive round trips, every rounding
 * boundary (midpoints between neighbours and one f32 ulp either side of them),
 * known values, subnormals, infinities, NaNs, and the double -> 16-bit path
 * that must not round twice. */
#include "tests/testutil.h"
#include "compiler/interp/interp.h"

#include <math.h>
#include <string.h>


static bool is_nan16(uint16_t h, bool bf)
{
    return bf ? (h & 0x7f80) == 0x7f80 && (h & 0x7f) : (h & 0x7c00) == 0x7c00 && (h & 0x3ff);
}

static float dec(uint16_t h, bool bf) { return bf ? interp_bf16_to_f32(h) : interp_f16_to_f32(h); }
static uint16_t enc(float x, bool bf) { return bf ? interp_f32_to_bf16(x) : interp_f32_to_f16(x); }

static void round_trip_all(bool bf)
{
    for (uint32_t h = 0; h < 65536; h++) {
        float x = dec((uint16_t)h, bf);
        uint16_t back = enc(x, bf);
        if (is_nan16((uint16_t)h, bf)) {
            ck_assert_msg(isnan(x), "%04x should decode to NaN", h);
            ck_assert_msg(is_nan16(back, bf) && (back & 0x8000) == (h & 0x8000), "NaN %04x -> %04x", h, back);
        } else {
            ck_assert_msg(back == h, "round trip %04x -> %a -> %04x (bf=%d)", h, (double)x, back, bf);
        }
    }
}

START_TEST(f16_round_trip) { round_trip_all(false); }
END_TEST

START_TEST(bf16_round_trip) { round_trip_all(true); }
END_TEST

/* For every pair of neighbouring finite positive values lo < hi: the midpoint
 * (exact in f32) rounds to the even one, and one f32 ulp below/above it rounds
 * to lo/hi. Also for the negated values. This checks every rounding boundary. */
static void boundaries(bool bf)
{
    uint16_t maxfin = bf ? 0x7f7f : 0x7bff;
    for (uint16_t h = 0; h < maxfin; h++) {
        float lo = dec(h, bf), hi = dec((uint16_t)(h + 1), bf);
        float mid = (float)(((double)lo + (double)hi) / 2);
        ck_assert_msg((double)mid * 2 == (double)lo + (double)hi, "midpoint not exact at %04x", h);
        uint16_t even = (h & 1) ? (uint16_t)(h + 1) : h;
        for (int s = 0; s < 2; s++) {
            uint16_t sg = s ? 0x8000 : 0;
            float m = s ? -mid : mid;
            float below = nextafterf(m, 0.0f), above = nextafterf(m, s ? -INFINITY : INFINITY);
            ck_assert_msg(enc(m, bf) == (even | sg), "tie at %04x (bf=%d): got %04x", h, bf, enc(m, bf));
            ck_assert_msg(enc(below, bf) == (h | sg), "below mid %04x (bf=%d): got %04x", h, bf, enc(below, bf));
            ck_assert_msg(enc(above, bf) == ((h + 1) | sg), "above mid %04x (bf=%d)", h, bf);
            ck_assert_msg(enc(s ? -lo : lo, bf) == (h | sg), "exact %04x (bf=%d)", h, bf);
        }
    }
}

START_TEST(f16_rounding_boundaries) { boundaries(false); }
END_TEST

START_TEST(bf16_rounding_boundaries) { boundaries(true); }
END_TEST

START_TEST(f16_known_values)
{
    ck_assert_uint_eq(interp_f32_to_f16(1.0f), 0x3c00);
    ck_assert_uint_eq(interp_f32_to_f16(-2.0f), 0xc000);
    ck_assert_uint_eq(interp_f32_to_f16(0.0f), 0x0000);
    ck_assert_uint_eq(interp_f32_to_f16(-0.0f), 0x8000);
    ck_assert_uint_eq(interp_f32_to_f16(65504.0f), 0x7bff);
    ck_assert_uint_eq(interp_f32_to_f16(65519.99f), 0x7bff);
    ck_assert_uint_eq(interp_f32_to_f16(65520.0f), 0x7c00); /* tie with odd max -> inf */
    ck_assert_uint_eq(interp_f32_to_f16(1e10f), 0x7c00);
    ck_assert_uint_eq(interp_f32_to_f16(-INFINITY), 0xfc00);
    ck_assert_uint_eq(interp_f32_to_f16(0x1p-14f), 0x0400);   /* smallest normal */
    ck_assert_uint_eq(interp_f32_to_f16(0x1p-24f), 0x0001);   /* smallest subnormal */
    ck_assert_uint_eq(interp_f32_to_f16(0x1p-25f), 0x0000);   /* tie -> even (0) */
    ck_assert_uint_eq(interp_f32_to_f16(0x1.8p-25f), 0x0001);
    ck_assert_uint_eq(interp_f32_to_f16(0x1.8p-24f), 0x0002); /* 1.5 units: tie -> 2 */
    ck_assert_uint_eq(interp_f32_to_f16(0x1p-26f), 0x0000);
    ck_assert_uint_eq(interp_f32_to_f16(1.0f + 0x1p-11f), 0x3c00);     /* tie -> even */
    ck_assert_uint_eq(interp_f32_to_f16(1.0f + 0x3p-11f), 0x3c02);     /* tie -> even (up) */
    ck_assert_uint_eq(interp_f32_to_f16(0.1f), 0x2e66);
    ck_assert_uint_eq(interp_f32_to_f16(3.14159265f), 0x4248);
    ck_assert(isnan(interp_f16_to_f32(interp_f32_to_f16(NAN))));
    ck_assert_float_eq(interp_f16_to_f32(0x3555), 0x1.554p-2f);
    ck_assert_float_eq(interp_f16_to_f32(0x03ff), 0x3ffp-24f);         /* largest subnormal */
    ck_assert(isinf(interp_f16_to_f32(0x7c00)) && interp_f16_to_f32(0x7c00) > 0);
    ck_assert(signbit(interp_f16_to_f32(0x8000)));
}
END_TEST

START_TEST(bf16_known_values)
{
    ck_assert_uint_eq(interp_f32_to_bf16(1.0f), 0x3f80);
    ck_assert_uint_eq(interp_f32_to_bf16(-1.5f), 0xbfc0);
    ck_assert_uint_eq(interp_f32_to_bf16(1.0f + 0x1p-8f), 0x3f80);     /* tie -> even */
    ck_assert_uint_eq(interp_f32_to_bf16(1.0f + 0x3p-8f), 0x3f82);
    ck_assert_uint_eq(interp_f32_to_bf16(3.14159265f), 0x4049);
    ck_assert_uint_eq(interp_f32_to_bf16(3.4028235e38f), 0x7f80);      /* FLT_MAX rounds to inf */
    ck_assert_uint_eq(interp_f32_to_bf16(0x1p-133f), 0x0001);          /* smallest subnormal */
    ck_assert_uint_eq(interp_f32_to_bf16(0x1p-134f), 0x0000);          /* tie -> 0 */
    ck_assert_uint_eq(interp_f32_to_bf16(-0.0f), 0x8000);
    ck_assert(isnan(interp_bf16_to_f32(interp_f32_to_bf16(NAN))));
    ck_assert(isnan(interp_bf16_to_f32(interp_f32_to_bf16(-NAN))));
    /* A NaN whose payload sits only in the low bits must stay NaN, not become inf. */
    uint32_t u = 0x7f800001u;
    float snan;
    memcpy(&snan, &u, 4);
    ck_assert(isnan(interp_bf16_to_f32(interp_f32_to_bf16(snan))));
    ck_assert(isnan(interp_f16_to_f32(interp_f32_to_f16(snan))));
}
END_TEST

/* double -> f16 must round once: 1 + 2^-11 + 2^-40 is just above the tie, so
 * it rounds up, while rounding to f32 first would land on the tie and round
 * down to even. */
START_TEST(f64_single_rounding)
{
    double x = 1.0 + 0x1p-11 + 0x1p-40;
    ck_assert_uint_eq(interp_f32_to_f16((float)x), 0x3c00);   /* the double-rounding answer */
    ck_assert_uint_eq(interp_f64_to_f16(x), 0x3c01);
    ck_assert_uint_eq(interp_f64_to_f16(1.0 + 0x1p-11 - 0x1p-40), 0x3c00);
    ck_assert_uint_eq(interp_f64_to_f16(1.0 + 0x1p-11), 0x3c00);
    double y = 1.0 + 0x1p-8 + 0x1p-45;
    ck_assert_uint_eq(interp_f64_to_bf16(y), 0x3f81);
    ck_assert_uint_eq(interp_f64_to_bf16(1e300), 0x7f80);
    ck_assert_uint_eq(interp_f64_to_f16(-1e300), 0xfc00);
    ck_assert_uint_eq(interp_f64_to_f16(1e-300), 0x0000);
    ck_assert_uint_eq(interp_f64_to_bf16(3.3961775292304126e38), 0x7f7f);  /* bf16 max, exact */
    ck_assert(is_nan16(interp_f64_to_f16(NAN), false));
    /* Every f16 value survives the f64 path too. */
    for (uint32_t h = 0; h < 0x7c00; h++)
        ck_assert_uint_eq(interp_f64_to_f16((double)interp_f16_to_f32((uint16_t)h)), h);
}
END_TEST

static Suite *fp16_suite(void)
{
    Suite *s = suite_create("interp_fp16");
    TCase *tc = tcase_create("convert");
    tcase_add_test(tc, f16_round_trip);
    tcase_add_test(tc, bf16_round_trip);
    tcase_add_test(tc, f16_rounding_boundaries);
    tcase_add_test(tc, bf16_rounding_boundaries);
    tcase_add_test(tc, f16_known_values);
    tcase_add_test(tc, bf16_known_values);
    tcase_add_test(tc, f64_single_rounding);
    suite_add_tcase(s, tc);
    return s;
}

TU_MAIN(fp16_suite)
