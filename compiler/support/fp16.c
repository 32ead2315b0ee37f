/* fp16.c — exact conversions between f32/f64 and the 16-bit float formats
 * (support: compiler/ir/eval.c rounds through these, and every host evaluation
 * of IR values goes through it, so folding and running can never disagree).
 *
 * What: IEEE binary16 (f16) and bfloat16 (bf16) encode/decode with round to
 * nearest, ties to even, including subnormals, infinities and NaNs (NaNs stay
 * NaN and keep the sign and the top payload bits, quietened).
 * Invariant: decode(encode(x)) is the representable 16-bit value nearest to x,
 * and encode(decode(h)) == h for every non-NaN pattern h (tests check all 65536).
 * Example: fp16_from_f32(1.0f + 0x1p-11f) == 0x3c00 (a tie: rounds to the
 * even mantissa), fp16_from_f32(65520.0f) == 0x7c00 (+inf).
 *
 * fp16_from_f64/bf16_from_f64 round a double *once* (no double rounding through
 * f32): they first round the double to f32 with round-to-odd, which keeps a
 * sticky bit, and f32 has far more than the two extra bits that this needs.
 */
#include "fp16.h"

#include <math.h>
#include <string.h>

static uint32_t f32_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}

static float bits_f32(uint32_t u)
{
    float x;
    memcpy(&x, &u, 4);
    return x;
}

uint16_t fp16_from_f32(float x)
{
    uint32_t u = f32_bits(x);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) /* NaN: quiet it, keep the top payload bits */
        return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
    if (a >= 0x477ff000u) /* >= 65520 (half-way above 65504, odd): rounds to inf */
        return (uint16_t)(sign | 0x7c00u);
    if (a >= 0x38800000u) { /* normal in f16: >= 2^-14 */
        uint32_t h = (a >> 13) - (112u << 10); /* rebias exponent 127 -> 15 */
        uint32_t rem = a & 0x1fffu;
        if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++; /* carry may bump the exponent: fine */
        return (uint16_t)(sign | h);
    }
    if (a <= 0x33000000u) /* <= 2^-25: half of the smallest subnormal or less, ties to 0 */
        return sign;
    /* Subnormal: value / 2^-24 = mant * 2^(exp - 126), shift = 126 - exp in [14, 24]. */
    uint32_t exp = a >> 23;
    uint32_t mant = (a & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126u - exp;
    uint32_t h = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (h & 1u))) h++;
    return (uint16_t)(sign | h);
}

float fp16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    if (exp == 0) { /* zero or subnormal: mant * 2^-24, exact in f32 */
        float v = (float)mant * 0x1p-24f;
        return sign ? -v : v;
    }
    if (exp == 31) return bits_f32(sign | 0x7f800000u | (mant << 13));
    return bits_f32(sign | ((exp + 112u) << 23) | (mant << 13));
}

uint16_t bf16_from_f32(float x)
{
    uint32_t u = f32_bits(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: truncate and quieten */
        return (uint16_t)((u >> 16) | 0x40u);
    /* Round to nearest even on the low 16 bits; overflow carries into inf. */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

float bf16_to_f32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

/* Round a double to f32 with round-to-odd: the result is the truncation toward
 * zero with its lowest bit forced to 1 whenever the conversion was inexact. A
 * later round-to-nearest to a format at least 2 bits narrower is then exact. */
static float f64_to_f32_odd(double d)
{
    if (isnan(d) || isinf(d)) return (float)d;
    float f = (float)d;
    if ((double)f == d) return f;
    if (isinf(f)) f = copysignf(3.4028234663852886e38f, f); /* beyond FLT_MAX: truncate to it */
    else if (fabs((double)f) > fabs(d)) f = nextafterf(f, 0.0f);
    uint32_t u = f32_bits(f) | 1u;
    return bits_f32(u);
}

uint16_t fp16_from_f64(double d) { return fp16_from_f32(f64_to_f32_odd(d)); }
uint16_t bf16_from_f64(double d) { return bf16_from_f32(f64_to_f32_odd(d)); }

/* ---- OCP FP8 E4M3 ("e4m3fn": bias 7, no infinities, S.1111.111 is NaN) ----
 * Encoding rounds once, to nearest even, and saturates like PTX's
 * cvt.rn.satfinite.e4m3x2.{f32,f16x2}: a magnitude past the largest finite
 * value (448, 0x7e), infinities included, gives +-448; NaN gives 0x7f.
 * Subnormals step by 2^-9; half of that (2^-10) is a tie and goes to zero.
 * A double is scaled by a power of two (exact) and rounded as an integer, so
 * there is no double rounding. Example: f8e4m3_from_f64(1.0625) == 0x38 (the
 * tie between 1 and 1.125 goes to the even mantissa), (464.0) == 0x7e. */
static double round_half_even(double q) /* q >= 0, below 2^52 */
{
    double f = floor(q), r = q - f;
    if (r > 0.5 || (r == 0.5 && fmod(f, 2.0) != 0.0)) f += 1.0;
    return f;
}

uint8_t f8e4m3_from_f64(double d)
{
    if (isnan(d)) return 0x7f;
    uint8_t sign = signbit(d) ? 0x80 : 0;
    double a = fabs(d);
    if (a >= 448.0) return (uint8_t)(sign | 0x7e); /* satfinite, inf included */
    if (a < 0x1p-6) /* subnormal range: code = round(a / 2^-9); 8 is the smallest normal, 0x08 */
        return (uint8_t)(sign | (uint8_t)round_half_even(ldexp(a, 9)));
    int e2;
    (void)frexp(a, &e2); /* a = f * 2^e2, f in [0.5, 1): the unbiased exponent is e2 - 1 */
    int ex = e2 - 1;
    double m = round_half_even(ldexp(a, 3 - ex)); /* [8, 16] */
    if (m == 16.0) m = 8.0, ex++;
    int code = ((ex + 7) << 3) | ((int)m - 8);
    if (code > 0x7e) code = 0x7e; /* 464 and up rounded past 448: saturate */
    return (uint8_t)(sign | code);
}

uint8_t f8e4m3_from_f32(float x) { return f8e4m3_from_f64((double)x); }

float f8e4m3_to_f32(uint8_t c)
{
    float sign = (c & 0x80) ? -1.0f : 1.0f;
    int ex = (c >> 3) & 15, man = c & 7;
    if (ex == 15 && man == 7) return sign * NAN;
    if (ex == 0) return sign * ldexpf((float)man, -9);
    return sign * ldexpf((float)(8 + man), ex - 10);
}
