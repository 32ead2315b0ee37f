/* test_sram_alloc.c — the SRAM allocator (pass_sram_alloc.c) on synthetic
 * live intervals: hand-checked placements, reuse of bytes by buffers that
 * are never live together, alignment, and random interval sets checked for
 * interference and against the lower bound (the largest sum of sizes live at
 * one position). */
#include "tests/testutil.h"
#include "compiler/gpuir/gpuir.h"

#include <string.h>

static GpSmemBuf mk(const char *what, int bytes, int start, int end)
{
    GpSmemBuf b;
    memset(&b, 0, sizeof b);
    b.what = what;
    b.value_id = -1;
    b.bytes = bytes;
    b.align = 16;
    b.start = start;
    b.end = end;
    b.offset = -1;
    return b;
}

static int place(GpSmemBuf *v, int n)
{
    GpSmemBuf *p[64];
    for (int i = 0; i < n; i++) p[i] = &v[i];
    int total = (int)gp_sram_place(p, n);
    StrBuf why;
    sb_init(&why);
    ck_assert_msg(gp_sram_check(p, n, &why), "%s", why.data ? why.data : "");
    sb_free(&why);
    return total;
}

START_TEST(doc_example)
{
    GpSmemBuf v[3] = {mk("A", 32768, 0, 9), mk("B", 8192, 2, 2), mk("C", 16384, 11, 11)};
    int total = place(v, 3);
    ck_assert_int_eq(v[0].offset, 0);
    ck_assert_int_eq(v[2].offset, 0);     /* C is never live with A: reuses its bytes */
    ck_assert_int_eq(v[1].offset, 32768); /* B is live with A */
    ck_assert_int_eq(total, 40960);
}
END_TEST

START_TEST(disjoint_share_offset_zero)
{
    GpSmemBuf v[5];
    for (int i = 0; i < 5; i++) v[i] = mk("scratch", 1000 + 100 * i, i, i);
    int total = place(v, 5);
    for (int i = 0; i < 5; i++) ck_assert_int_eq(v[i].offset, 0);
    ck_assert_int_eq(total, 1408); /* the largest, 16-byte rounded */
}
END_TEST

START_TEST(first_fit_uses_gap)
{
    /* Big [0,10] at 0; then medium [0,3] goes above big; small [5,6] live
     * with big only: it fits right above big too (medium is not live then),
     * and a tiny one live with everything goes above medium. */
    GpSmemBuf v[4] = {mk("big", 4096, 0, 10), mk("medium", 2048, 0, 3), mk("small", 1024, 5, 6),
                      mk("tiny", 16, 0, 10)};
    int total = place(v, 4);
    ck_assert_int_eq(v[0].offset, 0);
    ck_assert_int_eq(v[1].offset, 4096);
    ck_assert_int_eq(v[2].offset, 4096);
    ck_assert_int_eq(v[3].offset, 4096 + 2048);
    ck_assert_int_eq(total, 4096 + 2048 + 16);
}
END_TEST

START_TEST(lower_gap_is_taken)
{
    /* a [0,1] 256 and b [2,3] 256 both at 0; c [0,3] 512 above them at 256;
     * d [1,2] 256 overlaps a, b and c in time: first free byte is 768.
     * e [3,3] 128 is live with b and c: the gap below b's end is taken only
     * when free, so e goes to 768 (b covers 0..256, c 256..768). */
    GpSmemBuf v[5] = {mk("a", 256, 0, 1), mk("b", 256, 2, 3), mk("c", 512, 0, 3), mk("d", 256, 1, 2),
                      mk("e", 128, 3, 3)};
    int total = place(v, 5);
    ck_assert_int_eq(v[2].offset, 0); /* largest first */
    ck_assert_int_eq(v[0].offset, 512);
    ck_assert_int_eq(v[1].offset, 512);
    ck_assert_int_eq(v[3].offset, 768);
    ck_assert_int_eq(v[4].offset, 768);
    ck_assert_int_eq(total, 1024);
}
END_TEST

START_TEST(alignment)
{
    GpSmemBuf v[2] = {mk("odd", 100, 0, 5), mk("aligned", 4096, 0, 5)};
    v[0].align = 4;
    v[1].align = 128;
    place(v, 2);
    ck_assert_int_eq(v[1].offset, 0);
    ck_assert_int_eq(v[0].offset, 4096);
    GpSmemBuf w[2] = {mk("odd", 100, 0, 5), mk("aligned", 64, 0, 5)};
    w[0].align = 4;
    w[1].align = 128;
    place(w, 2);
    ck_assert_int_eq(w[0].offset, 0);   /* larger first */
    ck_assert_int_eq(w[1].offset, 128); /* 100 rounded up to 128 */
}
END_TEST

START_TEST(check_detects_interference)
{
    GpSmemBuf v[2] = {mk("x", 256, 0, 4), mk("y", 256, 4, 8)};
    v[0].offset = 0;
    v[1].offset = 128;
    GpSmemBuf *p[2] = {&v[0], &v[1]};
    StrBuf why;
    sb_init(&why);
    ck_assert(!gp_sram_check(p, 2, &why));
    ck_assert_ptr_nonnull(strstr(why.data, "interfere"));
    sb_free(&why);
    v[1].offset = 256;
    ck_assert(gp_sram_check(p, 2, NULL));
    v[1].start = 5; /* not live together: may share */
    v[1].offset = 0;
    ck_assert(gp_sram_check(p, 2, NULL));
}
END_TEST

static unsigned rng_state = 12345u;
static unsigned rnd(void)
{
    rng_state = rng_state * 1103515245u + 12345u;
    return (rng_state >> 8) & 0xffffff;
}

START_TEST(random_sets)
{
    for (int trial = 0; trial < 500; trial++) {
        int n = 1 + (int)(rnd() % 40);
        GpSmemBuf v[64];
        for (int i = 0; i < n; i++) {
            int s = (int)(rnd() % 60), len = (int)(rnd() % 12);
            if (rnd() % 5 == 0) len = 30; /* a few long (loop) buffers */
            v[i] = mk("r", 16 * (1 + (int)(rnd() % 64)), s, s + len);
            v[i].align = 16 << (rnd() % 4);
        }
        int total = place(v, n);
        /* Lower bound: bytes live at the busiest position. Upper bound: all. */
        int lb = 0, sum = 0;
        for (int p = 0; p < 100; p++) {
            int live = 0;
            for (int i = 0; i < n; i++)
                if (v[i].start <= p && p <= v[i].end) live += v[i].bytes;
            if (live > lb) lb = live;
        }
        for (int i = 0; i < n; i++) {
            sum += v[i].bytes + v[i].align;
            ck_assert_int_le(v[i].offset + v[i].bytes, total);
            ck_assert_int_ge(v[i].offset, 0);
        }
        ck_assert_int_ge(total, lb);
        ck_assert_int_le(total, sum + 16);
    }
}
END_TEST

/* Sizes are 64-bit: two 2 GiB buffers live together place at 0 and 2^31
 * (in 32 bits the second offset and the total wrapped negative, under the
 * SRAM limit check). */
START_TEST(sizes_past_32_bits)
{
    GpSmemBuf v[2] = {mk("A", 0, 0, 5), mk("B", 0, 2, 8)};
    v[0].bytes = v[1].bytes = (int64_t)1 << 31;
    GpSmemBuf *p[2] = {&v[0], &v[1]};
    int64_t total = gp_sram_place(p, 2);
    ck_assert(gp_sram_check(p, 2, NULL));
    ck_assert_int_eq(v[0].offset, 0);
    ck_assert_int_eq(v[1].offset, (int64_t)1 << 31);
    ck_assert_int_eq(total, (int64_t)1 << 32);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("sram_alloc");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, doc_example);
    tcase_add_test(tc, disjoint_share_offset_zero);
    tcase_add_test(tc, sizes_past_32_bits);
    tcase_add_test(tc, first_fit_uses_gap);
    tcase_add_test(tc, lower_gap_is_taken);
    tcase_add_test(tc, alignment);
    tcase_add_test(tc, check_detects_interference);
    tcase_add_test(tc, random_sets);
    suite_add_tcase(s, tc);
    return s;
}

TU_MAIN(suite)
