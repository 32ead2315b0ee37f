/* test_e2e_fp8.c — the f8e4m3 element type (OCP FP8 E4M3, e4m3fn) on the host
 * and in the interpreter.
 *
 * The converters of compiler/support/fp16.c against an independent reference
 * (the nearest of the 253 finite values found by search, ties to the even
 * code, magnitudes past 448 saturating as PTX's cvt.rn.satfinite.e4m3x2 does):
 * all 256 codes decoded, every non-NaN code round-tripped, every rounding
 * boundary (the midpoints and one ulp either side, in f32 and in f64), an f32
 * bit-pattern sweep, saturation, NaN, signed zero, and the f64 path that must
 * not round twice. Then a kernel that casts f32 -> f8e4m3 -> f32 through
 * memory runs on the interpreter over every code and every boundary and must
 * give the same bits; and the language refuses arithmetic on f8e4m3 with a
 * located error.
 */
#include "tests/testutil.h"
#include "compiler/interp/interp.h"
#include "compiler/lang/lang.h"
#include "kiln_runtime.h"

#include <math.h>
#include <string.h>

/* ---- an independent reference: the finite values, by their definition ---- */
static double ref_value(int code) /* code 0..255, not NaN */
{
    int s = code >> 7, e = (code >> 3) & 15, m = code & 7;
    double v = e == 0 ? m / 8.0 * pow(2.0, -6) : (1.0 + m / 8.0) * pow(2.0, e - 7);
    return s ? -v : v;
}

static bool is_nan_code(int code) { return (code & 0x7f) == 0x7f; }

/* Nearest finite code to x by search; at a tie the even code; |x| > 448 -> +-448. */
static uint8_t ref_encode(double x)
{
    if (isnan(x)) return 0x7f;
    int sign = signbit(x) ? 0x80 : 0;
    double a = fabs(x);
    int best = 0;
    double bestd = INFINITY;
    for (int c = 0; c <= 0x7e; c++) {
        double d = fabs(ref_value(c) - a);
        if (d < bestd || (d == bestd && (c & 1) == 0)) best = c, bestd = d;
    }
    return (uint8_t)(sign | best);
}

START_TEST(decode_every_code)
{
    for (int c = 0; c < 256; c++) {
        float v = f8e4m3_to_f32((uint8_t)c);
        if (is_nan_code(c)) {
            ck_assert_msg(isnan(v), "code %02x decodes to NaN", c);
            continue;
        }
        ck_assert_msg((double)v == ref_value(c) && (signbit(v) != 0) == (c >> 7), "code %02x: %a, expected %a", c,
                      (double)v, ref_value(c));
        ck_assert_msg(kiln_e4m3_to_f32((uint8_t)c) == v, "public decode of %02x", c);
    }
    ck_assert(f8e4m3_to_f32(0x7e) == 448.0f);
    ck_assert(f8e4m3_to_f32(0x01) == 0x1p-9f);
    ck_assert(f8e4m3_to_f32(0x08) == 0x1p-6f);
    ck_assert(f8e4m3_to_f32(0x38) == 1.0f);
}
END_TEST

START_TEST(round_trip_every_code)
{
    for (int c = 0; c < 256; c++) {
        if (is_nan_code(c)) continue;
        float v = f8e4m3_to_f32((uint8_t)c);
        ck_assert_msg(f8e4m3_from_f32(v) == c, "round trip %02x -> %a -> %02x", c, (double)v, f8e4m3_from_f32(v));
        ck_assert_msg(f8e4m3_from_f64(v) == c, "round trip (f64) %02x", c);
        ck_assert_msg(kiln_f32_to_e4m3(v) == c, "public round trip %02x", c);
    }
}
END_TEST

/* Every pair of neighbouring finite values lo < hi (codes h, h + 1): the
 * midpoint goes to the even code, one ulp below it (f32 and f64) to lo, one
 * above to hi; the same negated. Past the last value: 448 .. inf saturate. */
START_TEST(every_rounding_boundary)
{
    for (int h = 0; h < 0x7e; h++) {
        double lo = ref_value(h), hi = ref_value(h + 1), mid = (lo + hi) / 2;
        int even = (h & 1) ? h + 1 : h;
        for (int s = 0; s < 2; s++) {
            int sg = s ? 0x80 : 0;
            double m = s ? -mid : mid;
            float mf = (float)m;
            ck_assert_msg((double)mf == m, "midpoint exact in f32");
            ck_assert_msg(f8e4m3_from_f32(mf) == (even | sg), "tie after %02x: %02x", h, f8e4m3_from_f32(mf));
            ck_assert_msg(f8e4m3_from_f32(nextafterf(mf, 0.0f)) == (h | sg), "below the tie after %02x", h);
            ck_assert_msg(f8e4m3_from_f32(nextafterf(mf, s ? -INFINITY : INFINITY)) == ((h + 1) | sg),
                          "above the tie after %02x", h);
            ck_assert_msg(f8e4m3_from_f64(nextafter(m, 0.0)) == (h | sg), "f64 below the tie after %02x", h);
            ck_assert_msg(f8e4m3_from_f64(nextafter(m, s ? -INFINITY : INFINITY)) == ((h + 1) | sg),
                          "f64 above the tie after %02x", h);
        }
    }
    /* saturation (satfinite): past 448 the largest finite value, infinities too */
    const float big[] = {448.0f, 449.0f, 464.0f, 480.0f, 1e6f, 3.4e38f, INFINITY};
    for (size_t i = 0; i < sizeof big / sizeof big[0]; i++) {
        ck_assert_uint_eq(f8e4m3_from_f32(big[i]), 0x7e);
        ck_assert_uint_eq(f8e4m3_from_f32(-big[i]), 0xfe);
    }
    ck_assert_uint_eq(f8e4m3_from_f32(NAN), 0x7f);
    ck_assert_uint_eq(f8e4m3_from_f32(-0.0f), 0x80);
    ck_assert_uint_eq(f8e4m3_from_f32(0x1p-10f), 0x00);             /* half the smallest subnormal: tie to 0 */
    ck_assert_uint_eq(f8e4m3_from_f32(nextafterf(0x1p-10f, 1)), 0x01);
    ck_assert_uint_eq(f8e4m3_from_f32(1.0625f), 0x38);               /* 1 + 1/16: tie to even 1.0 */
    /* f64 -> e4m3 is one rounding: 1.0625 + 2^-40 rounds up, though its f32 is the tie */
    ck_assert_uint_eq(f8e4m3_from_f64(1.0625 + 0x1p-40), 0x39);
}
END_TEST

/* A sweep of f32 bit patterns (every exponent) against the search reference. */
START_TEST(encode_matches_reference_sweep)
{
    for (uint64_t u = 0; u <= 0xffffffffu; u += 0x7ff1) {
        uint32_t w = (uint32_t)u;
        float x;
        memcpy(&x, &w, 4);
        ck_assert_msg(f8e4m3_from_f32(x) == ref_encode(x), "encode %08x: %02x, expected %02x", w,
                      f8e4m3_from_f32(x), ref_encode(x));
    }
}
END_TEST

/* ---- the interpreter: cast f32 -> f8e4m3, store, load, cast back ---- */
static const char *const ROUND_TRIP_SRC =
    "kernel f8_round_trip(X: *f32, Q: *f8e4m3, Y: *f32, n: i32, const BLOCK: i32 = 128)\n"
    "{\n"
    "    let offs = program_id(0) * BLOCK + arange(BLOCK);\n"
    "    let m = offs < n;\n"
    "    store(Q + offs, load(X + offs, mask = m).to(f8e4m3), mask = m);\n"
    "    store(Y + offs, load(Q + offs, mask = m, other = 0.0).to(f32), mask = m);\n"
    "}\n";

static IrFunc *compile_src(Arena *a, Diag *d, const char *src, const char *kernel)
{
    arena_init(a);
    diag_init(d, "t.tile", src);
    AstFile *af = ast_parse(a, d, "t.tile", src);
    LangOptions lo;
    memset(&lo, 0, sizeof lo);
    lo.kernel = kernel;
    IrModule *m = af ? lang_compile(a, d, af, &lo) : NULL;
    if (!m || d->nerrors) return NULL;
    for (int i = 0; i < m->nfuncs; i++)
        if (strcmp(m->funcs[i]->name, kernel) == 0) return m->funcs[i];
    return NULL;
}

START_TEST(interpreter_casts_bit_faithfully)
{
    /* inputs: every decoded code, every midpoint and one f32 ulp either side, saturation, NaN */
    enum { MAXN = 256 + 6 * 0x7e + 8 };
    static float x[MAXN], y[MAXN];
    static uint8_t q[MAXN];
    int n = 0;
    for (int c = 0; c < 256; c++) x[n++] = f8e4m3_to_f32((uint8_t)c);
    for (int h = 0; h < 0x7e; h++) {
        float mid = (float)((ref_value(h) + ref_value(h + 1)) / 2);
        for (int s = 0; s < 2; s++) {
            float m = s ? -mid : mid;
            x[n++] = m, x[n++] = nextafterf(m, 0.0f), x[n++] = nextafterf(m, s ? -INFINITY : INFINITY);
        }
    }
    const float extra[] = {449.0f, -500.0f, INFINITY, -INFINITY, 1e30f, 0x1p-10f, -0x1p-12f};
    for (size_t i = 0; i < sizeof extra / sizeof extra[0]; i++) x[n++] = extra[i];
    ck_assert_int_le(n, MAXN);

    Arena a;
    Diag d;
    IrFunc *f = compile_src(&a, &d, ROUND_TRIP_SRC, "f8_round_trip");
    ck_assert_msg(f, "compile: %s", d.out.data ? d.out.data : "");
    memset(q, 0xa5, sizeof q);
    for (int i = 0; i < MAXN; i++) y[i] = NAN;
    InterpBuffer bufs[3] = {{x, sizeof x, "X"}, {q, sizeof q, "Q"}, {y, sizeof y, "Y"}};
    InterpArg args[4] = {{.ptr = x}, {.ptr = q}, {.ptr = y}, {.i = n}};
    InterpOptions o = {.grid = {(n + 127) / 128, 1, 1}, .buffers = bufs, .nbuffers = 3};
    StrBuf err;
    sb_init(&err);
    ck_assert_msg(interp_run(f, args, 4, &o, &err) == 0, "%s", err.data ? err.data : "");
    sb_free(&err);
    for (int i = 0; i < n; i++) {
        uint8_t want = ref_encode(x[i]);
        ck_assert_msg(q[i] == want, "x[%d] = %a: stored %02x, expected %02x", i, (double)x[i], q[i], want);
        float back = (float)ref_value(want);
        ck_assert_msg(is_nan_code(want) ? isnan(y[i]) : y[i] == back, "y[%d]", i);
    }
    for (int i = n; i < MAXN; i++) ck_assert_msg(q[i] == 0xa5 && isnan(y[i]), "masked lane %d written", i);
    diag_free(&d);
    arena_free(&a);
}
END_TEST

/* Arithmetic on f8e4m3 is refused where it is written, with the fix. */
START_TEST(arithmetic_is_refused)
{
    const char *src = "kernel k(X: *f8e4m3, Y: *f32)\n"
                      "{\n"
                      "    let x = load(X + arange(16));\n"
                      "    store(Y + arange(16), (x * x).to(f32));\n"
                      "}\n";
    Arena a;
    Diag d;
    ck_assert(compile_src(&a, &d, src, "k") == NULL);
    ck_assert_msg(d.out.data && strstr(d.out.data, "t.tile:4:30: error: 'mul' is not defined on f8e4m3") &&
                      strstr(d.out.data, "cast to f32 first"),
                  "%s", d.out.data ? d.out.data : "(none)");
    diag_free(&d);
    arena_free(&a);
}
END_TEST

static Suite *fp8_suite(void)
{
    Suite *s = suite_create("fp8");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, decode_every_code);
    tcase_add_test(tc, round_trip_every_code);
    tcase_add_test(tc, every_rounding_boundary);
    tcase_add_test(tc, encode_matches_reference_sweep);
    tcase_add_test(tc, interpreter_casts_bit_faithfully);
    tcase_add_test(tc, arithmetic_is_refused);
    suite_add_tcase(s, tc);
    return s;
}

TU_MAIN(fp8_suite)
