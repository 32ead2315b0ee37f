/* test_fp16_api.c — the public f16/bf16 helpers of kiln_runtime.h give the
 * same bits as the compiler's converters (compiler/support/fp16.c, which
 * tests/interp/test_fp16.c checks exhaustively), so host data a program
 * prepares with them rounds exactly as the folder, the interpreter and the GPU
 * do; and they are reachable from the runtime library alone (this test links
 * kiln_runtime, no compiler layer). */
#include "tests/testutil.h"

#include <math.h>
#include <string.h>

#include "compiler/support/fp16.h"
#include "kiln_runtime.h"

static uint32_t bits_of(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}

/* Every 16-bit pattern decodes to the same float (NaNs: both NaN). */
START_TEST(decode_matches_every_pattern)
{
    for (uint32_t h = 0; h < 65536; h++) {
        float a = kiln_f16_to_f32((uint16_t)h), b = fp16_to_f32((uint16_t)h);
        ck_assert_msg(isnan(a) ? isnan(b) : bits_of(a) == bits_of(b), "f16 %04x", h);
        a = kiln_bf16_to_f32((uint16_t)h), b = bf16_to_f32((uint16_t)h);
        ck_assert_msg(isnan(a) ? isnan(b) : bits_of(a) == bits_of(b), "bf16 %04x", h);
    }
}
END_TEST

/* Encoding agrees on a sweep of f32 bit patterns covering every exponent
 * (normals, subnormals, ties, overflow, infinities and NaNs). */
START_TEST(encode_matches_a_sweep)
{
    for (uint64_t u = 0; u <= 0xffffffffu; u += 0x1003) {
        float x;
        uint32_t w = (uint32_t)u;
        memcpy(&x, &w, 4);
        ck_assert_msg(kiln_f32_to_f16(x) == fp16_from_f32(x), "f16 of %08x", w);
        ck_assert_msg(kiln_f32_to_bf16(x) == bf16_from_f32(x), "bf16 of %08x", w);
    }
    /* known values, round to nearest even at a tie */
    ck_assert_uint_eq(kiln_f32_to_f16(1.0f), 0x3c00);
    ck_assert_uint_eq(kiln_f32_to_f16(65520.0f), 0x7c00);
    ck_assert_uint_eq(kiln_f32_to_bf16(1.0f + 0x1p-8f), 0x3f80);
    ck_assert_uint_eq(kiln_f32_to_bf16(1.0f + 0x3p-8f), 0x3f82);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("fp16_api");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, decode_matches_every_pattern);
    tcase_add_test(tc, encode_matches_a_sweep);
    suite_add_tcase(s, tc);
    return s;
}

TU_MAIN(suite)
