/* test_tmap.c — the recipes of TMA tensor maps (KilnKernelInfo.tmaps) evaluated
 * from a launch's arguments (rt_tmap_eval, runtime/tmap.c), without a GPU:
 * dims and strides from parameters and constants, and the launches TMA
 * cannot serve (unaligned base, a stride not a multiple of 16 bytes, a negative
 * argument the coordinates depend on) refused with a message that names the
 * kernel and the argument; an empty extent marked (it reads zeros only). */
#include "testutil.h"

#include <string.h>

#include "kiln.h"
#include "rt_internal.h"

static KilnParam params[4];
static KilnKernelInfo mm;

/* matmul(A, B, M, lda): A's map is {dims {1024, M}, row stride lda * 2 bytes, box {64, 128}}. */
static void setup(void)
{
    memset(params, 0, sizeof params);
    const char *names[] = {"A", "B", "M", "lda"};
    for (int i = 0; i < 4; i++) {
        strcpy(params[i].name, names[i]);
        params[i].kind = i < 2 ? KILN_PARAM_PTR : KILN_PARAM_I32;
    }
    memset(&mm, 0, sizeof mm);
    strcpy(mm.name, "mm");
    mm.params = params;
    mm.nparams = 4;
    mm.ntmaps = 1;
    KilnTensorMapInfo *t = &mm.tmaps[0];
    t->rank = 2;
    t->base_param = 0;
    t->elem_bytes = 2;
    t->swizzle_bytes = 128;
    t->dims[0] = (KilnTmapValue){-1, 1024};
    t->dims[1] = (KilnTmapValue){2, 1};
    t->strides[0] = (KilnTmapValue){3, 2};
    t->box[0] = 64;
    t->box[1] = 128;
}

START_TEST(recipe_evaluates_from_arguments)
{
    KilnArg a[4] = {kiln_arg_ptr(0x7000000000ull), kiln_arg_ptr(0x7100000000ull), kiln_arg_i32(1000), kiln_arg_i32(1032)};
    RtTmapArgs t;
    ck_assert_int_eq(rt_tmap_eval(&mm, 0, a, 4, &t), KILN_OK);
    ck_assert_int_eq(t.rank, 2);
    ck_assert_uint_eq(t.addr, 0x7000000000ull);
    ck_assert_uint_eq(t.dims[0], 1024);
    ck_assert_uint_eq(t.dims[1], 1000);      /* M: TMA zero-fills rows past it, as the mask does */
    ck_assert_uint_eq(t.strides[0], 2064);   /* lda halves */
    ck_assert_uint_eq(t.box[0], 64);
    ck_assert_uint_eq(t.box[1], 128);
    ck_assert_int_eq(t.is_bf16, 0);
}
END_TEST

START_TEST(launches_tma_cannot_serve_are_errors)
{
    RtTmapArgs t;
    KilnArg a[4] = {kiln_arg_ptr(0x7000000008ull), kiln_arg_ptr(0x7100000000ull), kiln_arg_i32(1000), kiln_arg_i32(1024)};
    ck_assert_int_eq(rt_tmap_eval(&mm, 0, a, 4, &t), KILN_ERR_ARGS);
    ck_assert_ptr_nonnull(strstr(kiln_last_error(), "argument 1 (A) = 0x7000000008 is not 16-byte aligned"));
    a[0] = kiln_arg_ptr(0x7000000000ull);
    a[3] = kiln_arg_i32(1001);   /* 2002 bytes */
    ck_assert_int_eq(rt_tmap_eval(&mm, 0, a, 4, &t), KILN_ERR_ARGS);
    ck_assert_ptr_nonnull(strstr(kiln_last_error(), "row stride of 2002 bytes"));
    a[3] = kiln_arg_i32(1024);
    a[2] = kiln_arg_i32(0);      /* M = 0: every row masked off, the map reads zeros only */
    ck_assert_int_eq(rt_tmap_eval(&mm, 0, a, 4, &t), KILN_OK);
    ck_assert_int_eq(t.empty, 1);
    a[2] = kiln_arg_i32(-5);
    ck_assert_int_eq(rt_tmap_eval(&mm, 0, a, 4, &t), KILN_OK);
    ck_assert_int_eq(t.empty, 1);
    a[2] = kiln_arg_i32(1000);
    ck_assert_int_eq(rt_tmap_eval(&mm, 0, a, 4, &t), KILN_OK);
    ck_assert_int_eq(t.empty, 0);
    a[2] = kiln_arg_i32(7);
    a[3] = kiln_arg_i32(-1024);  /* a negative stride */
    ck_assert_int_eq(rt_tmap_eval(&mm, 0, a, 4, &t), KILN_ERR_ARGS);
    a[3] = kiln_arg_i32(1024);
    ck_assert_int_eq(rt_tmap_eval(&mm, 0, a, 4, &t), KILN_OK);
    mm.tmaps[0].nonneg_params = 1u << 3;   /* the coordinates are >= 0 only if lda is */
    ck_assert_int_eq(rt_tmap_eval(&mm, 0, a, 4, &t), KILN_OK);
    a[3] = kiln_arg_i32(-16);
    ck_assert_int_eq(rt_tmap_eval(&mm, 0, a, 4, &t), KILN_ERR_ARGS);
    ck_assert_ptr_nonnull(strstr(kiln_last_error(), "argument 4 (lda) = -16 is negative"));
}
END_TEST

START_TEST(bad_recipes_are_internal_errors)
{
    RtTmapArgs t;
    KilnArg a[4] = {kiln_arg_ptr(0x7000000000ull), kiln_arg_ptr(0x7100000000ull), kiln_arg_i32(1000), kiln_arg_i32(1024)};
    mm.tmaps[0].base_param = 2;   /* an integer argument as the address */
    ck_assert_int_eq(rt_tmap_eval(&mm, 0, a, 4, &t), KILN_ERR_INTERNAL);
    mm.tmaps[0].base_param = 0;
    mm.tmaps[0].dims[1].param = 1;   /* a pointer as an extent */
    ck_assert_int_eq(rt_tmap_eval(&mm, 0, a, 4, &t), KILN_ERR_INTERNAL);
}
END_TEST

/* attention's K: (d, key, head, batch) with no bound on head and batch (2^31: no i32
 * coordinate reaches it; 2^32 - 1 and 2^32 faulted on the H200), strides from the three
 * i64 stride arguments */
START_TEST(rank_4_recipe)
{
    KilnParam p[5] = {{"K", KILN_PARAM_PTR, 16}, {"stride_kb", KILN_PARAM_I64, 0}, {"stride_kh", KILN_PARAM_I64, 0},
                      {"stride_kn", KILN_PARAM_I64, 0}, {"seqlen_k", KILN_PARAM_I32, 0}};
    KilnKernelInfo k;
    memset(&k, 0, sizeof k);
    strcpy(k.name, "attn");
    k.params = p;
    k.nparams = 5;
    k.ntmaps = 1;
    KilnTensorMapInfo *t = &k.tmaps[0];
    *t = (KilnTensorMapInfo){.rank = 4, .base_param = 0, .elem_bytes = 2, .swizzle_bytes = 128,
                             .dims = {{-1, 128}, {4, 1}, {-1, 1ll << 31}, {-1, 1ll << 31}},
                             .strides = {{3, 2}, {2, 2}, {1, 2}}, .box = {64, 64, 1, 1}};
    KilnArg a[5] = {kiln_arg_ptr(0x7000000000ull), kiln_arg_i64(8 * 1000 * 128), kiln_arg_i64(1000 * 128),
                    kiln_arg_i64(128), kiln_arg_i32(1000)};
    RtTmapArgs r;
    ck_assert_int_eq(rt_tmap_eval(&k, 0, a, 5, &r), KILN_OK);
    ck_assert_int_eq(r.rank, 4);
    ck_assert_uint_eq(r.dims[1], 1000);
    ck_assert_uint_eq(r.dims[2], 1ull << 31);
    ck_assert_uint_eq(r.strides[0], 256);
    ck_assert_uint_eq(r.strides[1], 256000);
    ck_assert_uint_eq(r.strides[2], 2048000);
    ck_assert_uint_eq(r.box[2], 1);
    /* no keys: K is [b, h, 0, d] and its strides may be 0; the map reads zeros only, so they are not checked */
    a[4] = kiln_arg_i32(0);
    a[1] = kiln_arg_i64(0), a[2] = kiln_arg_i64(0);
    ck_assert_int_eq(rt_tmap_eval(&k, 0, a, 5, &r), KILN_OK);
    ck_assert_int_eq(r.empty, 1);
    a[4] = kiln_arg_i32(1000);   /* keys again: a zero stride is refused */
    ck_assert_int_eq(rt_tmap_eval(&k, 0, a, 5, &r), KILN_ERR_ARGS);
    ck_assert_ptr_nonnull(strstr(kiln_last_error(), "row stride of 0 bytes"));
    /* an extent past 2^31 (a recipe of an older compiler, 2^32) is refused, not encoded */
    a[1] = kiln_arg_i64(8 * 1000 * 128), a[2] = kiln_arg_i64(1000 * 128);
    t->dims[3] = (KilnTmapValue){-1, 1ll << 32};
    ck_assert_int_eq(rt_tmap_eval(&k, 0, a, 5, &r), KILN_ERR_ARGS);
    ck_assert_ptr_nonnull(strstr(kiln_last_error(), "at most 2^31"));
}
END_TEST

/* The one rule of what a map can address (rt_tmap_base_ok, rt_tmap_stride_ok), which the
 * attention plans (jit/attention.c, rt_attn_tma_encodable) also use to keep tma off: its
 * edges, and rt_tmap_eval refusing exactly the strides it refuses (random row lengths). */
START_TEST(one_rule_for_every_map)
{
    ck_assert(rt_tmap_base_ok(0x7000000000ull) && rt_tmap_base_ok(0x7000000010ull));
    ck_assert(!rt_tmap_base_ok(0x7000000008ull) && !rt_tmap_base_ok(0x7000000001ull));
    ck_assert(rt_tmap_stride_ok(8, 2) && rt_tmap_stride_ok(16, 1) && rt_tmap_stride_ok(4, 4));
    ck_assert(!rt_tmap_stride_ok(1001, 2) && !rt_tmap_stride_ok(12, 1) && !rt_tmap_stride_ok(6, 2));
    ck_assert(!rt_tmap_stride_ok(0, 2) && !rt_tmap_stride_ok(-8, 2));
    ck_assert(rt_tmap_stride_ok((1ll << 39) - 8, 2));    /* 2^40 - 16 bytes */
    ck_assert(!rt_tmap_stride_ok(1ll << 39, 2));         /* 2^40 bytes */
    ck_assert(!rt_tmap_stride_ok(1ll << 62, 4));         /* the product would overflow */
    ck_assert(!rt_tmap_stride_ok(16, 0));
    unsigned long long x = 0x9e3779b97f4a7c15ull;
    RtTmapArgs t;
    for (int i = 0; i < 2000; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        int lda = (int)(x >> 33 & 0xfff) - 64;   /* -64 .. 4031 halves */
        KilnArg a[4] = {kiln_arg_ptr(0x7000000000ull), kiln_arg_ptr(0x7100000000ull), kiln_arg_i32(1000),
                        kiln_arg_i32(lda)};
        ck_assert_int_eq(rt_tmap_eval(&mm, 0, a, 4, &t), rt_tmap_stride_ok(lda, 2) ? KILN_OK : KILN_ERR_ARGS);
    }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("runtime_tmap");
    TCase *tc = tcase_create("tmap");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_add_test(tc, recipe_evaluates_from_arguments);
    tcase_add_test(tc, launches_tma_cannot_serve_are_errors);
    tcase_add_test(tc, bad_recipes_are_internal_errors);
    tcase_add_test(tc, rank_4_recipe);
    tcase_add_test(tc, one_rule_for_every_map);
    suite_add_tcase(s, tc);
    return s;
}

TU_MAIN(suite)
