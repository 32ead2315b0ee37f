/* test_specialize.c — launch-time specialisation without a GPU: the key of a
 * launch (which pointer / integer arguments are multiples of 16, which integer
 * arguments equal 1) against a reference over random arguments, the hints a
 * variant is compiled with (NAME=16, NAME==1), the check that launches keep a
 * module's own hints (a NAME==1 module refuses any other value), the variant
 * table (one
 * compile per key, reuse, off switch, failures, signature mismatch, threads)
 * driven through fake compile / release callbacks, and the cache key's
 * sensitivity to hints.
 */
#include "testutil.h"

#include <pthread.h>
#include <string.h>
#include <time.h>

#include "kiln.h"
#include "jit_internal.h"
#include "cuda_loader.h"

/* k(X: *f32, Y: *f16, n: i32, m: u64, s: i64, scale: f32, flag: bool, b: u8) */
static KilnParam params[8];
static KilnKernelInfo info;

static void setup(void)
{
    static const struct { const char *name; KilnParamKind kind; int bits; } p[8] = {
        {"X", KILN_PARAM_PTR, 32}, {"Y", KILN_PARAM_PTR, 16}, {"n", KILN_PARAM_I32, 0},
        {"m", KILN_PARAM_U64, 0},  {"s", KILN_PARAM_I64, 0},  {"scale", KILN_PARAM_F32, 0},
        {"flag", KILN_PARAM_I1, 0}, {"b", KILN_PARAM_U8, 0},
    };
    memset(params, 0, sizeof params);
    for (int i = 0; i < 8; i++) {
        strcpy(params[i].name, p[i].name);
        params[i].kind = p[i].kind;
        params[i].pointee_bits = p[i].bits;
    }
    memset(&info, 0, sizeof info);
    strcpy(info.name, "k");
    info.params = params;
    info.nparams = 8;
    info.num_warps = 4;
    info.num_stages = 2;
}

static uint64_t rng = 88172645463325252ull;
static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* Random arguments: each value a multiple of 16 about half the time, and 1
 * about one time in eight. */
static void random_args(KilnArg a[8])
{
    uint64_t v[8];
    for (int i = 0; i < 8; i++) {
        v[i] = rnd() >> (rnd() % 40);
        if (rnd() & 1) v[i] &= ~(uint64_t)15;
        else if (rnd() % 4 == 0) v[i] = 1;
    }
    a[0] = kiln_arg_ptr(0x7000000000ull + (v[0] & 0xffffff));
    a[1] = kiln_arg_ptr(0x7100000000ull + (v[1] & 0xffffff));
    a[2] = kiln_arg_i32((int32_t)(v[2] & 0xffff) * ((v[2] != 1 && (rnd() & 1)) ? -1 : 1));
    a[3] = kiln_arg_u64(v[3]);
    a[4] = kiln_arg_i64(v[4] == 1 ? 1 : -(int64_t)(v[4] >> 2));
    a[5] = kiln_arg_f32(16.0f * (float)(v[5] & 7));   /* floats never count, even "multiples of 16" */
    a[6] = kiln_arg_bool(0);                          /* nor bools (0 is a multiple of 16) */
    a[7] = kiln_arg_u8((uint8_t)v[7]);
}

static bool key_has(const RtSpecKey *k, int i) { return (k->bits[i / 64] >> (i % 64)) & 1; }
static bool key_one(const RtSpecKey *k, int i) { return (k->ones[i / 64] >> (i % 64)) & 1; }

START_TEST(key_matches_reference)
{
    int nones = 0;
    for (int t = 0; t < 2000; t++) {
        KilnArg a[8];
        random_args(a);
        RtSpecKey key;
        rt_spec_key(&info, NULL, 0, a, 8, &key);
        for (int i = 0; i < 8; i++) nones += key_one(&key, i);
        bool any = false;
        for (int i = 0; i < 8; i++) {
            bool want, one = false;
            if (i == 0 || i == 1) want = a[i].v.ptr % 16 == 0;
            else if (i == 2 || i == 4) want = a[i].v.i % 16 == 0, one = a[i].v.i == 1; /* negative values too */
            else if (i == 3 || i == 7) want = a[i].v.u % 16 == 0, one = a[i].v.u == 1;
            else want = false;                                        /* scale, flag: never */
            ck_assert_msg(key_has(&key, i) == want, "trial %d param %s: key bit %d", t, params[i].name,
                          key_has(&key, i));
            ck_assert_msg(key_one(&key, i) == one, "trial %d param %s: ones bit %d", t, params[i].name,
                          key_one(&key, i));
            any |= want || one;
        }
        ck_assert_int_eq(rt_spec_key_empty(&key), !any);
        for (int i = 8; i < RT_SPEC_MAX_PARAMS; i++) ck_assert(!key_has(&key, i) && !key_one(&key, i));
    }
    ck_assert_int_gt(nones, 100); /* the == 1 case was exercised */
}
END_TEST

START_TEST(key_ones_exact_values)
{
    KilnArg a[8];
    random_args(a);
    a[2] = kiln_arg_i32(1);
    a[3] = kiln_arg_u64(1);
    a[4] = kiln_arg_i64(-1);                        /* -1 is not 1 */
    a[5] = kiln_arg_f32(1.0f);                      /* floats never count */
    a[6] = kiln_arg_bool(1);                        /* nor bools */
    a[7] = kiln_arg_u8(1);
    RtSpecKey key;
    rt_spec_key(&info, NULL, 0, a, 8, &key);
    ck_assert(key_one(&key, 2) && key_one(&key, 3) && key_one(&key, 7));
    ck_assert(!key_one(&key, 4) && !key_one(&key, 5) && !key_one(&key, 6));
    ck_assert(!key_has(&key, 2) && !key_has(&key, 3) && !key_has(&key, 7));
    /* a module compiled with n==1 needs no ones bit for n; m=16 says nothing about m == 1 */
    KilnParamHint h[] = {{"n", 1, 1}, {"m", 16, 0}};
    a[3] = kiln_arg_u64(1);
    rt_spec_key(&info, h, 2, a, 8, &key);
    ck_assert(!key_one(&key, 2));
    ck_assert(key_one(&key, 3) && key_one(&key, 7));
    /* only 1 gives the bit: 2, 0, 17 and the u64 2^32 + 1 do not */
    a[2] = kiln_arg_i32(2);
    a[3] = kiln_arg_u64(((uint64_t)1 << 32) + 1);
    a[7] = kiln_arg_u8(0);
    rt_spec_key(&info, NULL, 0, a, 8, &key);
    ck_assert(!key_one(&key, 2) && !key_one(&key, 3) && !key_one(&key, 7));
    ck_assert(key_has(&key, 7)); /* 0 is a multiple of 16 */
}
END_TEST

START_TEST(key_leaves_out_what_hints_say)
{
    KilnArg a[8];
    random_args(a);
    a[0] = kiln_arg_ptr(0x7000000100ull);
    a[2] = kiln_arg_i32(4096);
    a[3] = kiln_arg_u64(64);
    KilnParamHint h[] = {{"X", 16, 0}, {"n", 8, 0}, {"m", 32, 0}};
    RtSpecKey key;
    rt_spec_key(&info, h, 3, a, 8, &key);
    ck_assert(!key_has(&key, 0));  /* X=16 already compiled in */
    ck_assert(key_has(&key, 2));   /* n=8 is weaker than 16 */
    ck_assert(!key_has(&key, 3));  /* m=32 is stronger */
}
END_TEST

START_TEST(variant_hints)
{
    RtSpecKey key;
    memset(&key, 0, sizeof key);
    key.bits[0] = (1u << 0) | (1u << 2) | (1u << 7);
    KilnParamHint base[] = {{"m", 32, 0}};
    KilnParamHint *h = NULL;
    int n = 0;
    ck_assert_int_eq(rt_spec_hints(&info, &key, base, 1, &h, &n), KILN_OK);
    ck_assert_int_eq(n, 4);
    ck_assert_str_eq(h[0].name, "m");
    ck_assert_int_eq(h[0].divisibility, 32);
    const char *want[] = {"X", "n", "b"};
    for (int i = 0; i < 3; i++) {
        ck_assert_str_eq(h[1 + i].name, want[i]);
        ck_assert_int_eq(h[1 + i].divisibility, RT_SPEC_DIV);
    }
    free(h);
    /* ones bits become NAME==1 hints, after the divisibility ones of the same index */
    memset(&key, 0, sizeof key);
    key.bits[0] = 1u << 0;
    key.ones[0] = (1u << 2) | (1u << 4);
    ck_assert_int_eq(rt_spec_hints(&info, &key, NULL, 0, &h, &n), KILN_OK);
    ck_assert_int_eq(n, 3);
    ck_assert_str_eq(h[0].name, "X");
    ck_assert_int_eq(h[0].equals_one, 0);
    ck_assert_int_eq(h[0].divisibility, RT_SPEC_DIV);
    ck_assert_str_eq(h[1].name, "n");
    ck_assert_str_eq(h[2].name, "s");
    for (int i = 1; i < 3; i++) {
        ck_assert_int_ne(h[i].equals_one, 0);
        ck_assert_int_eq(h[i].divisibility, 1);
    }
    free(h);
}
END_TEST

START_TEST(launch_must_pass_one_where_hinted)
{
    KilnArg a[8];
    random_args(a);
    a[2] = kiln_arg_i32(1);
    a[3] = kiln_arg_u64(1);
    KilnParamHint h[] = {{"n", 1, 1}, {"m", 0, 1}};
    ck_assert_int_eq(rt_check_hints(&info, h, 2, a, 8), KILN_OK);
    a[2] = kiln_arg_i32(16);
    ck_assert_int_eq(rt_check_hints(&info, h, 2, a, 8), KILN_ERR_ARGS);
    ck_assert_str_eq(kiln_last_error(), "kernel k: argument 3 (n) = 16 is not 1, as the module was compiled to "
                                        "assume (hint n==1)");
    a[2] = kiln_arg_i32(1);
    a[3] = kiln_arg_u64(0);
    ck_assert_int_eq(rt_check_hints(&info, h, 2, a, 8), KILN_ERR_ARGS);
    ck_assert_str_eq(kiln_last_error(), "kernel k: argument 4 (m) = 0 is not 1, as the module was compiled to "
                                        "assume (hint m==1)");
    a[3] = kiln_arg_u64(((uint64_t)1 << 32) + 1); /* a u64: the high bits count */
    ck_assert_int_eq(rt_check_hints(&info, h, 2, a, 8), KILN_ERR_ARGS);
}
END_TEST

START_TEST(launch_must_keep_module_hints)
{
    KilnArg a[8];
    random_args(a);
    a[0] = kiln_arg_ptr(0x7000000040ull);
    a[2] = kiln_arg_i32(96);
    a[3] = kiln_arg_u64(18446744073709551584ull); /* 2^64 - 32 */
    KilnParamHint h[] = {{"X", 64, 0}, {"n", 32, 0}, {"m", 32, 0}};
    ck_assert_int_eq(rt_check_hints(&info, h, 3, a, 8), KILN_OK);
    a[2] = kiln_arg_i32(100);
    ck_assert_int_eq(rt_check_hints(&info, h, 3, a, 8), KILN_ERR_ARGS);
    ck_assert_str_eq(kiln_last_error(), "kernel k: argument 3 (n) = 100 is not a multiple of 32, as the module was "
                                        "compiled to assume (hint n=32)");
    a[2] = kiln_arg_i32(-64);
    ck_assert_int_eq(rt_check_hints(&info, h, 3, a, 8), KILN_OK);
    a[0] = kiln_arg_ptr(0x7000000044ull); /* X + 1 element */
    ck_assert_int_eq(rt_check_hints(&info, h, 3, a, 8), KILN_ERR_ARGS);
    ck_assert_str_eq(kiln_last_error(), "kernel k: argument 1 (X) = 0x7000000044 is not 64-byte aligned, as the "
                                        "module was compiled to assume (hint X=64)");
    a[0] = kiln_arg_ptr(0x7000000080ull);
    a[3] = kiln_arg_u64(18446744073709551600ull); /* 2^64 - 16 */
    ck_assert_int_eq(rt_check_hints(&info, h, 3, a, 8), KILN_ERR_ARGS);
    ck_assert_ptr_nonnull(strstr(kiln_last_error(), "(m) = 18446744073709551600 is not a multiple of 32"));
}
END_TEST

START_TEST(infos_match)
{
    KilnParam p2[8];
    memcpy(p2, params, sizeof p2);
    KilnKernelInfo b = info;
    b.params = p2;
    b.smem_bytes = info.smem_bytes + 4096; /* variants may use other SRAM amounts */
    ck_assert(rt_infos_match(&info, &b));
    p2[1].pointee_bits = 32;
    ck_assert(!rt_infos_match(&info, &b));
    p2[1].pointee_bits = 16;
    b.num_warps = 8;   /* a variant may add warp specialisation's producer warpgroup */
    ck_assert(rt_infos_match(&info, &b));
    b.num_stages = info.num_stages + 1;
    ck_assert(!rt_infos_match(&info, &b));
    b.num_stages = info.num_stages;
    b.nparams = 7;
    ck_assert(!rt_infos_match(&info, &b));
}
END_TEST

/* ---- the variant table, with fake compiles ---- */

typedef struct FakeVariant {
    KilnParamHint hints[16];
    char names[16][64];
    int nhints;
    KilnKernelInfo info;
    bool released;
} FakeVariant;

static FakeVariant fakes[64];
static int nfakes, nreleased;
static KilnStatus fail_next;
static bool wrong_signature;
static pthread_mutex_t fake_lock = PTHREAD_MUTEX_INITIALIZER;

static KilnStatus fake_compile(RtSpec *s, const KilnParamHint *hints, int nhints, KilnKernel **out,
                               const KilnKernelInfo **vinfo)
{
    ck_assert_str_eq(s->src, "source text");
    if (fail_next != KILN_OK) {
        KilnStatus st = fail_next;
        fail_next = KILN_OK;
        return kiln_set_error(st, "fake compile failed");
    }
    pthread_mutex_lock(&fake_lock);
    FakeVariant *f = &fakes[nfakes++];
    pthread_mutex_unlock(&fake_lock);
    memset(f, 0, sizeof *f);
    for (int i = 0; i < nhints && i < 16; i++) {
        snprintf(f->names[i], sizeof f->names[i], "%s", hints[i].name);
        f->hints[i] = (KilnParamHint){f->names[i], hints[i].divisibility, hints[i].equals_one};
    }
    f->nhints = nhints;
    f->info = info;
    if (wrong_signature) f->info.num_stages = 3;
    *out = (KilnKernel *)f; /* opaque to the table */
    *vinfo = &f->info;
    return KILN_OK;
}

static void fake_release(KilnKernel *k)
{
    FakeVariant *f = (FakeVariant *)k;
    ck_assert(!f->released);
    f->released = true;
    __atomic_add_fetch(&nreleased, 1, __ATOMIC_SEQ_CST);
}

static RtSpec *new_spec(const KilnParamHint *hints, int nhints)
{
    nfakes = nreleased = 0;
    fail_next = KILN_OK;
    wrong_signature = false;
    KilnCompileOptions o = {.kernel = "k", .arch = "sm_90a", .emit = KILN_EMIT_CUBIN, .hints = hints,
                            .nhints = nhints};
    RtSpec *s = rt_spec_new("k.tile", "source text", &o, fake_compile, fake_release);
    ck_assert_ptr_nonnull(s);
    return s;
}

static KilnKernel *const GENERIC = (KilnKernel *)&info;

/* The fake kernel `k` was compiled with exactly the hints the key of `a`
 * implies: NAME=16 for multiples of 16, NAME==1 for integers equal to 1. */
static void check_variant_fits(KilnKernel *k, const KilnArg *a)
{
    FakeVariant *f = (FakeVariant *)k;
    for (int i = 0; i < 8; i++) {
        bool hinted = false, one = false;
        for (int j = 0; j < f->nhints; j++)
            if (!strcmp(f->hints[j].name, params[i].name)) {
                hinted = true;
                one |= f->hints[j].equals_one != 0;
            }
        bool is_ptr_or_int = i != 5 && i != 6;
        bool want_one = is_ptr_or_int && i > 1 && a[i].v.u == 1;
        ck_assert_int_eq(hinted, is_ptr_or_int && (a[i].v.u % 16 == 0 || want_one));
        ck_assert_int_eq(one, want_one);
    }
}

START_TEST(select_compiles_once_per_key)
{
    RtSpec *s = new_spec(NULL, 0);
    KilnArg a[8], b[8];
    random_args(a);
    a[0] = kiln_arg_ptr(0x7000000000ull); /* key not empty */
    KilnKernel *k1, *k2;
    ck_assert_int_eq(rt_spec_select(s, GENERIC, &info, a, 8, &k1), KILN_OK);
    ck_assert_ptr_ne(k1, GENERIC);
    check_variant_fits(k1, a);
    ck_assert_int_eq(s->ncompiles, 1);
    /* other values, same key: reused */
    memcpy(b, a, sizeof b);
    b[0] = kiln_arg_ptr(a[0].v.ptr + 4096);
    b[3] = kiln_arg_u64(a[3].v.u % 16 == 0 ? a[3].v.u + 32 : a[3].v.u + 16);
    ck_assert_int_eq(rt_spec_select(s, GENERIC, &info, b, 8, &k2), KILN_OK);
    ck_assert_ptr_eq(k1, k2);
    ck_assert_int_eq(s->ncompiles, 1);
    /* X + 1 element: another key, another variant (or the generic kernel) */
    b[0] = kiln_arg_ptr(a[0].v.ptr + 4);
    ck_assert_int_eq(rt_spec_select(s, GENERIC, &info, b, 8, &k2), KILN_OK);
    ck_assert_ptr_ne(k1, k2);
    if (k2 != GENERIC) check_variant_fits(k2, b);
    rt_spec_free(s);
    ck_assert_int_eq(nreleased, nfakes); /* every variant released with the module */
}
END_TEST

START_TEST(select_generic_cases)
{
    RtSpec *s = new_spec(NULL, 0);
    KilnArg a[8];
    random_args(a);
    /* nothing divisible by 16: the generic kernel, no compile */
    a[0] = kiln_arg_ptr(0x7000000004ull);
    a[1] = kiln_arg_ptr(0x7100000002ull);
    a[2] = kiln_arg_i32(17);
    a[3] = kiln_arg_u64(3);
    a[4] = kiln_arg_i64(-9);
    a[7] = kiln_arg_u8(255);
    KilnKernel *k;
    ck_assert_int_eq(rt_spec_select(s, GENERIC, &info, a, 8, &k), KILN_OK);
    ck_assert_ptr_eq(k, GENERIC);
    ck_assert_int_eq(s->ncompiles, 0);
    /* switched off: generic even for aligned arguments */
    a[0] = kiln_arg_ptr(0x7000000000ull);
    s->on = 0;
    ck_assert_int_eq(rt_spec_select(s, GENERIC, &info, a, 8, &k), KILN_OK);
    ck_assert_ptr_eq(k, GENERIC);
    ck_assert_int_eq(s->ncompiles, 0);
    s->on = 1;
    ck_assert_int_eq(rt_spec_select(s, GENERIC, &info, a, 8, &k), KILN_OK);
    ck_assert_ptr_ne(k, GENERIC);
    /* no spec (loaded PTX / cubin): always the kernel itself */
    ck_assert_int_eq(rt_spec_select(NULL, GENERIC, &info, a, 8, &k), KILN_OK);
    ck_assert_ptr_eq(k, GENERIC);
    rt_spec_free(s);
}
END_TEST

START_TEST(select_with_module_hints)
{
    KilnParamHint h[] = {{"X", 16, 0}, {"n", 16, 0}};
    RtSpec *s = new_spec(h, 2);
    KilnArg a[8];
    random_args(a);
    a[0] = kiln_arg_ptr(0x7000000000ull);
    a[1] = kiln_arg_ptr(0x7100000008ull);
    a[2] = kiln_arg_i32(64);
    a[3] = kiln_arg_u64(5);
    a[4] = kiln_arg_i64(7);
    a[7] = kiln_arg_u8(3);
    /* everything the key would say is already compiled in: generic */
    KilnKernel *k;
    ck_assert_int_eq(rt_spec_select(s, GENERIC, &info, a, 8, &k), KILN_OK);
    ck_assert_ptr_eq(k, GENERIC);
    /* a broken promise is refused, whatever the switch says */
    a[2] = kiln_arg_i32(65);
    ck_assert_int_eq(rt_spec_select(s, GENERIC, &info, a, 8, &k), KILN_ERR_ARGS);
    s->on = 0;
    ck_assert_int_eq(rt_spec_select(s, GENERIC, &info, a, 8, &k), KILN_ERR_ARGS);
    s->on = 1;
    /* Y aligned too: a variant with the module's hints plus Y=16 */
    a[2] = kiln_arg_i32(64);
    a[1] = kiln_arg_ptr(0x7100000010ull);
    ck_assert_int_eq(rt_spec_select(s, GENERIC, &info, a, 8, &k), KILN_OK);
    ck_assert_ptr_ne(k, GENERIC);
    FakeVariant *f = (FakeVariant *)k;
    ck_assert_int_eq(f->nhints, 3);
    ck_assert_str_eq(f->hints[2].name, "Y");
    rt_spec_free(s);
}
END_TEST

START_TEST(select_failures)
{
    RtSpec *s = new_spec(NULL, 0);
    KilnArg a[8];
    random_args(a);
    a[0] = kiln_arg_ptr(0x7000000000ull);
    KilnKernel *k;
    fail_next = KILN_ERR_COMPILE;
    ck_assert_int_eq(rt_spec_select(s, GENERIC, &info, a, 8, &k), KILN_ERR_COMPILE);
    ck_assert_ptr_nonnull(strstr(kiln_last_error(), "fake compile failed (while specialising"));
    ck_assert_int_eq(s->nvariants, 0);
    /* the next launch tries again and succeeds */
    ck_assert_int_eq(rt_spec_select(s, GENERIC, &info, a, 8, &k), KILN_OK);
    ck_assert_ptr_ne(k, GENERIC);
    ck_assert_int_eq(s->nvariants, 1);
    /* a variant whose signature differs is released, never used */
    wrong_signature = true;
    a[1] = kiln_arg_ptr(a[1].v.ptr % 16 ? a[1].v.ptr & ~15ull : a[1].v.ptr + 2);
    ck_assert_int_eq(rt_spec_select(s, GENERIC, &info, a, 8, &k), KILN_ERR_INTERNAL);
    ck_assert_int_eq(s->nvariants, 1);
    ck_assert_int_eq(nreleased, 1);
    rt_spec_free(s);
    ck_assert_int_eq(nreleased, 2);
}
END_TEST

/* A unit-stride launch (examples/matmul.tile on row-major A and B) gets a
 * variant compiled with NAME==1 for the arguments equal to 1; the same
 * launch with the stride 2 is another key. A module compiled with n==1
 * refuses n = 2 whatever the switch. */
START_TEST(select_equals_one)
{
    RtSpec *s = new_spec(NULL, 0);
    KilnArg a[8];
    random_args(a);
    a[0] = kiln_arg_ptr(0x7000000004ull);
    a[1] = kiln_arg_ptr(0x7100000002ull);
    a[2] = kiln_arg_i32(1);
    a[3] = kiln_arg_u64(3);
    a[4] = kiln_arg_i64(-9);
    a[7] = kiln_arg_u8(255);
    KilnKernel *k1, *k2;
    ck_assert_int_eq(rt_spec_select(s, GENERIC, &info, a, 8, &k1), KILN_OK);
    ck_assert_ptr_ne(k1, GENERIC);
    check_variant_fits(k1, a);
    FakeVariant *f = (FakeVariant *)k1;
    ck_assert_int_eq(f->nhints, 1);
    ck_assert_str_eq(f->hints[0].name, "n");
    ck_assert_int_ne(f->hints[0].equals_one, 0);
    a[2] = kiln_arg_i32(2); /* no bit at all: generic */
    ck_assert_int_eq(rt_spec_select(s, GENERIC, &info, a, 8, &k2), KILN_OK);
    ck_assert_ptr_eq(k2, GENERIC);
    a[2] = kiln_arg_i32(1);
    a[4] = kiln_arg_i64(1); /* n and s: another key */
    ck_assert_int_eq(rt_spec_select(s, GENERIC, &info, a, 8, &k2), KILN_OK);
    ck_assert_ptr_ne(k2, k1);
    check_variant_fits(k2, a);
    ck_assert_int_eq(s->ncompiles, 2);
    a[4] = kiln_arg_i64(-9); /* back to the first key: reused */
    ck_assert_int_eq(rt_spec_select(s, GENERIC, &info, a, 8, &k2), KILN_OK);
    ck_assert_ptr_eq(k2, k1);
    ck_assert_int_eq(s->ncompiles, 2);
    rt_spec_free(s);
    KilnParamHint h[] = {{"n", 1, 1}};
    s = new_spec(h, 1);
    ck_assert_int_eq(rt_spec_select(s, GENERIC, &info, a, 8, &k1), KILN_OK);
    ck_assert_ptr_eq(k1, GENERIC); /* n==1 already compiled in */
    a[2] = kiln_arg_i32(2);
    s->on = 0;
    ck_assert_int_eq(rt_spec_select(s, GENERIC, &info, a, 8, &k1), KILN_ERR_ARGS);
    ck_assert_ptr_nonnull(strstr(kiln_last_error(), "argument 3 (n) = 2 is not 1"));
    rt_spec_free(s);
}
END_TEST

/* Threads launching with a few keys at once: one compile per key, and each
 * launch gets the variant of its own key. */
typedef struct ThreadArg {
    RtSpec *s;
    int seed;
    int errors;
} ThreadArg;

static void key_args(int which, KilnArg a[8])
{
    for (int i = 0; i < 8; i++) a[i] = kiln_arg_u64(1);
    a[0] = kiln_arg_ptr(0x7000000000ull + ((which & 1) ? 0 : 4));
    a[1] = kiln_arg_ptr(0x7100000000ull + ((which & 2) ? 0 : 2));
    a[2] = kiln_arg_i32((which & 4) ? 1024 : 1000);
    a[3] = kiln_arg_u64(7);
    a[4] = kiln_arg_i64(-3);
    a[5] = kiln_arg_f32(1.5f);
    a[6] = kiln_arg_bool(1);
    a[7] = kiln_arg_u8(3);
}

static void *launcher(void *p)
{
    ThreadArg *t = p;
    for (int r = 0; r < 400; r++) {
        int which = 1 + (r * 7 + t->seed) % 7; /* keys 1..7: never empty */
        KilnArg a[8];
        key_args(which, a);
        KilnKernel *k;
        if (rt_spec_select(t->s, GENERIC, &info, a, 8, &k) != KILN_OK || k == GENERIC) {
            t->errors++;
            continue;
        }
        FakeVariant *f = (FakeVariant *)k;
        int got = 0;
        for (int j = 0; j < f->nhints; j++)
            got |= !strcmp(f->hints[j].name, "X") ? 1 : !strcmp(f->hints[j].name, "Y") ? 2 : 4;
        if (got != which) t->errors++;
    }
    return NULL;
}

/* 8 threads running `fn` on one spec: no errors, `nkeys` compiles and variants. */
static void run_launchers(bool deferred, void *(*fn)(void *), int nkeys)
{
    RtSpec *s = new_spec(NULL, 0);
    s->deferred = deferred;
    pthread_t th[8];
    ThreadArg ta[8];
    for (int i = 0; i < 8; i++) {
        ta[i] = (ThreadArg){s, i * 3, 0};
        ck_assert_int_eq(pthread_create(&th[i], NULL, fn, &ta[i]), 0);
    }
    for (int i = 0; i < 8; i++) {
        pthread_join(th[i], NULL);
        ck_assert_int_eq(ta[i].errors, 0);
    }
    ck_assert_int_eq(s->ncompiles, nkeys);
    ck_assert_int_eq(s->nvariants, nkeys);
    rt_spec_free(s);
    ck_assert_int_eq(nreleased, nkeys);
}

START_TEST(select_is_thread_safe) { run_launchers(false, launcher, 7); }
END_TEST

/* A deferred spec (rt_module_compile_deferred: the module has no code): the
 * generic kernel is a variant too, under the empty key, compiled on the first
 * launch that needs it; the first launch compiles exactly one kernel; off
 * means the generic kernel, compiled once; GENERIC is never handed back. */
START_TEST(select_deferred)
{
    RtSpec *s = new_spec(NULL, 0);
    s->deferred = 1;
    KilnArg a[8];
    random_args(a);
    a[0] = kiln_arg_ptr(0x7000000000ull); /* aligned: a non-empty key */
    KilnKernel *k1, *k2, *g1, *g2;
    ck_assert_int_eq(rt_spec_select(s, GENERIC, &info, a, 8, &k1), KILN_OK);
    ck_assert_ptr_ne(k1, GENERIC);
    check_variant_fits(k1, a);
    ck_assert_int_eq(s->ncompiles, 1);   /* one compile for the first launch, not generic + variant */
    ck_assert_int_eq(rt_spec_select(s, GENERIC, &info, a, 8, &k2), KILN_OK);
    ck_assert_ptr_eq(k1, k2);
    ck_assert_int_eq(s->ncompiles, 1);
    /* nothing divisible by 16: the generic kernel, compiled now, once, without hints */
    KilnArg u[8];
    memcpy(u, a, sizeof u);
    u[0] = kiln_arg_ptr(0x7000000004ull), u[1] = kiln_arg_ptr(0x7100000002ull), u[2] = kiln_arg_i32(17);
    u[3] = kiln_arg_u64(3), u[4] = kiln_arg_i64(-9), u[7] = kiln_arg_u8(255);
    ck_assert_int_eq(rt_spec_select(s, GENERIC, &info, u, 8, &g1), KILN_OK);
    ck_assert_ptr_ne(g1, GENERIC);
    ck_assert_ptr_ne(g1, k1);
    ck_assert_int_eq(((FakeVariant *)g1)->nhints, 0);
    ck_assert_int_eq(s->ncompiles, 2);
    /* switched off: the same generic kernel for aligned arguments, no compile */
    s->on = 0;
    ck_assert_int_eq(rt_spec_select(s, GENERIC, &info, a, 8, &g2), KILN_OK);
    ck_assert_ptr_eq(g1, g2);
    ck_assert_int_eq(s->ncompiles, 2);
    rt_spec_free(s);
    ck_assert_int_eq(nreleased, nfakes);
}
END_TEST

/* Off from the start: the first launch compiles the generic kernel (one
 * compile), and a failing compile says it was the first launch's. */
START_TEST(select_deferred_off_and_failure)
{
    RtSpec *s = new_spec(NULL, 0);
    s->deferred = 1;
    s->on = 0;
    KilnArg a[8];
    key_args(1, a);   /* X aligned: specialisation would compile a variant, were it on */
    KilnKernel *k;
    fail_next = KILN_ERR_COMPILE;
    ck_assert_int_eq(rt_spec_select(s, GENERIC, &info, a, 8, &k), KILN_ERR_COMPILE);
    ck_assert_ptr_nonnull(strstr(kiln_last_error(), "first launch"));
    ck_assert_int_eq(rt_spec_select(s, GENERIC, &info, a, 8, &k), KILN_OK);
    ck_assert_ptr_ne(k, GENERIC);
    ck_assert_int_eq(((FakeVariant *)k)->nhints, 0);
    ck_assert_int_eq(s->ncompiles, 1);
    rt_spec_free(s);
}
END_TEST

/* Threads racing on a deferred spec's keys, the empty one included: each key
 * compiles once, nobody gets GENERIC. */
static void *deferred_launcher(void *p)
{
    ThreadArg *t = p;
    for (int r = 0; r < 400; r++) {
        int which = (r * 7 + t->seed) % 8; /* keys 0..7: 0 is the empty key */
        KilnArg a[8];
        key_args(which, a);
        KilnKernel *k;
        if (rt_spec_select(t->s, GENERIC, &info, a, 8, &k) != KILN_OK || k == GENERIC) t->errors++;
    }
    return NULL;
}

START_TEST(select_deferred_is_thread_safe) { run_launchers(true, deferred_launcher, 8); }
END_TEST

/* rt_module_compile_deferred takes a kernel's signature from the front end
 * (emit IR) and the first launch checks the compiled code's against it
 * (rt_infos_match): they must agree for the shipped programs, schedules
 * chosen by the program's own rule (num_warps 0) included. */
static void check_ir_signature(const char *file, const char *kernel, const KilnDefine *defs, int ndefs, int warps)
{
    const char *src = kiln_lib_source(file);
    ck_assert_ptr_nonnull(src);
    KilnCompileOptions o = {.kernel = kernel, .defines = defs, .ndefines = ndefs, .arch = "sm_90a",
                            .num_warps = warps, .emit = KILN_EMIT_IR};
    KilnCompileResult ir, ptx;
    ck_assert_int_eq(kiln_compile(file, src, &o, &ir), KILN_OK);
    o.emit = KILN_EMIT_PTX;
    ck_assert_int_eq(kiln_compile(file, src, &o, &ptx), KILN_OK);
    ck_assert_int_eq(ir.nkernels, 1);
    ck_assert_int_eq(ptx.nkernels, 1);
    ck_assert_msg(rt_infos_match(&ir.kernels[0], &ptx.kernels[0]), "%s: IR signature %d warps %d stages, code %d/%d",
                  kernel, ir.kernels[0].num_warps, ir.kernels[0].num_stages, ptx.kernels[0].num_warps,
                  ptx.kernels[0].num_stages);
    ck_assert_int_gt(ptx.kernels[0].nparams, 10);
    kiln_compile_result_free(&ir);
    kiln_compile_result_free(&ptx);
}

START_TEST(ir_signature_matches_code)
{
    KilnDefine fwd[] = {{"HEAD_DIM", "64"}, {"BLOCK_M", "128"}, {"BLOCK_N", "64"}, {"CAUSAL", "true"},
                        {"PLAIN_SCORES", "true"}};
    check_ir_signature("lang/lib/attention_fwd.tile", "attn_fwd_f16", fwd, 5, 0);
    KilnDefine dec[] = {{"HEAD_DIM", "64"}, {"BLOCK_M", "16"}, {"BLOCK_N", "64"}, {"CAUSAL", "false"},
                        {"PAGED", "false"}, {"DIRECT", "false"}};
    check_ir_signature("lang/lib/attention_decode.tile", "attn_decode_f16", dec, 6, 4);
}
END_TEST

/* With warp specialisation a variant may launch more warps than the generic kernel: the
 * alignment a launch proves pipelines the key loops, and that brings the producer warpgroup
 * (num_warps + 4). rt_infos_match accepts it (each launch takes its variant's own count); it
 * refused it once ("the specialised variant has another signature" on the GPU). */
START_TEST(variant_may_add_the_producer_warpgroup)
{
    const char *src = kiln_lib_source("lang/lib/attention_fwd.tile");
    ck_assert_ptr_nonnull(src);
    KilnDefine fwd[] = {{"HEAD_DIM", "128"}, {"BLOCK_M", "128"}, {"BLOCK_N", "64"}, {"CAUSAL", "false"},
                        {"PLAIN_SCORES", "true"}};
    static const char *const aligned[] = {"Q", "K", "V", "stride_qb", "stride_qh", "stride_qm", "stride_kb",
                                          "stride_kh", "stride_kn", "stride_vb", "stride_vh", "stride_vn"};
    KilnParamHint h[12];
    for (int i = 0; i < 12; i++) h[i] = (KilnParamHint){aligned[i], 16, 0};
    KilnCompileOptions o = {.kernel = "attn_fwd_f16", .defines = fwd, .ndefines = 5, .arch = "sm_90a",
                            .num_warps = 8, .emit = KILN_EMIT_IR, .schedule.warp_specialize = 1};
    KilnCompileResult ir, generic, variant;
    ck_assert_int_eq(kiln_compile("lang/lib/attention_fwd.tile", src, &o, &ir), KILN_OK);
    o.emit = KILN_EMIT_PTX;
    ck_assert_int_eq(kiln_compile("lang/lib/attention_fwd.tile", src, &o, &generic), KILN_OK);
    o.hints = h;
    o.nhints = 12;
    ck_assert_int_eq(kiln_compile("lang/lib/attention_fwd.tile", src, &o, &variant), KILN_OK);
    ck_assert_int_eq(ir.kernels[0].num_warps, 8);
    ck_assert_int_eq(generic.kernels[0].num_warps, 8);   /* nothing pipelined: no producer */
    ck_assert_int_eq(variant.kernels[0].num_warps, 12);
    ck_assert(rt_infos_match(&generic.kernels[0], &variant.kernels[0]));
    ck_assert(rt_infos_match(&ir.kernels[0], &variant.kernels[0]));   /* a deferred module's first launch */
    kiln_compile_result_free(&ir);
    kiln_compile_result_free(&generic);
    kiln_compile_result_free(&variant);
}
END_TEST

/* rt_spec_pending says whether a launch would compile first, without compiling. */
START_TEST(pending_says_what_a_launch_compiles)
{
    RtSpec *s = new_spec(NULL, 0);
    KilnArg a[8], u[8];
    key_args(1, a);   /* X aligned: a non-empty key */
    key_args(0, u);   /* nothing aligned: the empty key */
    ck_assert(rt_spec_pending(s, &info, a, 8));
    ck_assert(!rt_spec_pending(s, &info, u, 8));   /* the generic kernel runs: nothing to compile */
    ck_assert_int_eq(s->ncompiles, 0);
    KilnKernel *k;
    ck_assert_int_eq(rt_spec_select(s, GENERIC, &info, a, 8, &k), KILN_OK);
    ck_assert(!rt_spec_pending(s, &info, a, 8));
    s->on = 0;
    key_args(2, a);
    ck_assert(!rt_spec_pending(s, &info, a, 8));
    s->deferred = 1;   /* off and deferred: the generic kernel, not compiled yet */
    ck_assert(rt_spec_pending(s, &info, a, 8));
    ck_assert(rt_spec_pending(s, &info, u, 8));
    s->on = 1;
    ck_assert_int_eq(rt_spec_select(s, GENERIC, &info, u, 8, &k), KILN_OK);
    ck_assert(!rt_spec_pending(s, &info, u, 8));
    ck_assert(!rt_spec_pending(NULL, &info, u, 8));
    rt_spec_free(s);
}
END_TEST

/* rt_spec_ready, the warm path: the compiled kernel a launch would run, or NULL
 * when it must compile first (or the hints refuse the arguments), never compiling. */
START_TEST(ready_is_the_compiled_kernel)
{
    KilnParamHint h[] = {{"n", 1, 1}};
    RtSpec *s = new_spec(h, 1);
    KilnArg a[8], u[8];
    key_args(1, a);   /* X aligned: a non-empty key */
    key_args(0, u);   /* nothing aligned: the empty key */
    a[2] = u[2] = kiln_arg_i32(1);   /* n == 1, as the module's hint wants */
    ck_assert_ptr_null(rt_spec_ready(s, GENERIC, &info, a, 8));   /* its variant is not compiled */
    ck_assert_ptr_eq(rt_spec_ready(s, GENERIC, &info, u, 8), GENERIC);   /* the generic kernel runs */
    ck_assert_int_eq(s->ncompiles, 0);
    KilnKernel *k;
    ck_assert_int_eq(rt_spec_select(s, GENERIC, &info, a, 8, &k), KILN_OK);
    ck_assert_ptr_eq(rt_spec_ready(s, GENERIC, &info, a, 8), k);
    KilnArg bad[8];
    memcpy(bad, a, sizeof bad);
    bad[2] = kiln_arg_i32(2);   /* refused by the hint n==1: the launch of GENERIC reports it */
    ck_assert_ptr_null(rt_spec_ready(s, GENERIC, &info, bad, 8));
    s->on = 0;
    ck_assert_ptr_eq(rt_spec_ready(s, GENERIC, &info, a, 8), GENERIC);
    s->deferred = 1;   /* off and deferred: the generic kernel's code, not compiled yet */
    ck_assert_ptr_null(rt_spec_ready(s, GENERIC, &info, a, 8));
    s->on = 1;
    ck_assert_ptr_eq(rt_spec_ready(s, GENERIC, &info, a, 8), k);
    ck_assert_ptr_null(rt_spec_ready(s, GENERIC, &info, u, 8));
    ck_assert_int_eq(rt_spec_select(s, GENERIC, &info, u, 8, &k), KILN_OK);
    ck_assert_ptr_eq(rt_spec_ready(s, GENERIC, &info, u, 8), k);
    ck_assert_ptr_ne(k, GENERIC);
    ck_assert_ptr_eq(rt_spec_ready(NULL, GENERIC, &info, u, 8), GENERIC);
    ck_assert_int_eq(s->ncompiles, 2);
    rt_spec_free(s);
}
END_TEST

/* rt_attn_prepare on fake deferred modules: the kernels' code compiles at once
 * on threads (the fake compile sleeps, so overlap is visible), each once; the
 * call then holds the compiled kernels and the arguments, each bound once; a
 * warm call binds each parameter once and compiles nothing. */
static int g_running, g_max_running, g_binds;

static KilnStatus slow_compile(RtSpec *s, const KilnParamHint *hints, int nhints, KilnKernel **out,
                               const KilnKernelInfo **vinfo)
{
    int now = __atomic_add_fetch(&g_running, 1, __ATOMIC_SEQ_CST);
    pthread_mutex_lock(&fake_lock);
    if (now > g_max_running) g_max_running = now;
    pthread_mutex_unlock(&fake_lock);
    struct timespec ts = {0, 150 * 1000 * 1000};
    nanosleep(&ts, NULL);
    KilnStatus st = fake_compile(s, hints, nhints, out, vinfo);
    __atomic_sub_fetch(&g_running, 1, __ATOMIC_SEQ_CST);
    return st;
}

static KilnStatus bind_by_name(const void *ctx, const KilnParam *prm, KilnArg *a)
{
    const KilnArg *args = ctx;
    g_binds++;
    for (int i = 0; i < 8; i++)
        if (!strcmp(params[i].name, prm->name)) {
            *a = args[i];
            return KILN_OK;
        }
    return kiln_set_error(KILN_ERR_INTERNAL, "no argument for %s", prm->name);
}

typedef struct FakeCall {
    KilnModule mods[3];
    KilnKernel ks[3];
    KilnKernel *kp[3];
    RtSpec *specs[3];
} FakeCall;

static void fake_call(FakeCall *c)
{
    nfakes = nreleased = 0;
    g_running = g_max_running = g_binds = 0;
    KilnCompileOptions o = {.kernel = "k", .arch = "sm_90a", .emit = KILN_EMIT_CUBIN};
    for (int i = 0; i < 3; i++) {
        memset(&c->mods[i], 0, sizeof c->mods[i]);
        memset(&c->ks[i], 0, sizeof c->ks[i]);
        c->specs[i] = rt_spec_new("k.tile", "source text", &o, slow_compile, fake_release);
        ck_assert_ptr_nonnull(c->specs[i]);
        c->specs[i]->deferred = 1;
        rt_spec_attach(&c->mods[i], c->specs[i]);
        c->ks[i].module = &c->mods[i];
        c->ks[i].info = &info;
        c->kp[i] = &c->ks[i];
    }
}

static void check_call(const RtAttnCall *call, const FakeCall *c, const KilnArg *a)
{
    ck_assert_int_eq(call->n, 3);
    for (int i = 0; i < 3; i++) {
        ck_assert_ptr_eq(call->k[i], c->kp[i]);
        ck_assert_int_eq(call->nargs[i], 8);
        ck_assert_mem_eq(call->args[i], a, 8 * sizeof *a);
    }
}

START_TEST(prepare_compiles_kernels_at_once)
{
    FakeCall c;
    fake_call(&c);
    KilnArg a[8];
    key_args(3, a);
    RtAttnCall call;
    ck_assert_int_eq(rt_attn_prepare("test", c.kp, 3, bind_by_name, a, &call), KILN_OK);
    ck_assert_int_eq(nfakes, 3);
    ck_assert_int_ge(g_max_running, 2);   /* they overlapped */
    ck_assert_int_eq(g_binds, 3 * 8);
    check_call(&call, &c, a);
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(c.specs[i]->ncompiles, 1);
        ck_assert(!rt_spec_pending(c.specs[i], &info, a, 8));
        ck_assert_ptr_null(call.run[i]);   /* compiled on threads: their launches select them */
    }
    /* warm: every parameter bound once, the compiled kernels found, nothing compiled */
    g_binds = 0;
    ck_assert_int_eq(rt_attn_prepare("test", c.kp, 3, bind_by_name, a, &call), KILN_OK);
    ck_assert_int_eq(g_binds, 3 * 8);
    ck_assert_int_eq(nfakes, 3);
    check_call(&call, &c, a);
    for (int i = 0; i < 3; i++) {
        KilnKernel *want;
        ck_assert_int_eq(rt_spec_select(c.specs[i], c.kp[i], &info, a, 8, &want), KILN_OK);
        ck_assert_ptr_nonnull(call.run[i]);
        ck_assert_ptr_eq(call.run[i], want);
    }
    /* one kernel left to compile: no thread, its launch does it */
    key_args(0, a);
    KilnKernel *k0, *k1;
    rt_spec_select(c.specs[0], c.kp[0], &info, a, 8, &k0);
    rt_spec_select(c.specs[1], c.kp[1], &info, a, 8, &k1);
    g_max_running = 0;
    ck_assert_int_eq(rt_attn_prepare("test", c.kp, 3, bind_by_name, a, &call), KILN_OK);
    ck_assert_int_eq(nfakes, 5);
    ck_assert(rt_spec_pending(c.specs[2], &info, a, 8));
    ck_assert_int_eq(g_max_running, 0);
    ck_assert_ptr_eq(call.run[0], k0);
    ck_assert_ptr_eq(call.run[1], k1);
    ck_assert_ptr_null(call.run[2]);
    for (int i = 0; i < 3; i++) rt_spec_free(c.specs[i]);
    ck_assert_int_eq(nreleased, nfakes);
}
END_TEST

/* A parameter the binder cannot bind fails the call before anything compiles
 * (so before any launch); too many kernels is an internal error. */
START_TEST(prepare_reports_a_failing_bind)
{
    FakeCall c;
    fake_call(&c);
    KilnArg a[8];
    key_args(3, a);
    KilnParam extra[9];
    memcpy(extra, params, sizeof params);
    strcpy(extra[8].name, "unknown");
    extra[8].kind = KILN_PARAM_I32;
    KilnKernelInfo wide = info;
    wide.params = extra;
    wide.nparams = 9;
    c.ks[1].info = &wide;
    RtAttnCall call;
    ck_assert_int_eq(rt_attn_prepare("test", c.kp, 3, bind_by_name, a, &call), KILN_ERR_INTERNAL);
    ck_assert_ptr_nonnull(strstr(kiln_last_error(), "no argument for unknown"));
    ck_assert_int_eq(nfakes, 0);
    KilnKernel *many[RT_ATTN_MAX_PREPARE + 1];
    for (int i = 0; i <= RT_ATTN_MAX_PREPARE; i++) many[i] = c.kp[0];
    ck_assert_int_eq(rt_attn_prepare("test", many, RT_ATTN_MAX_PREPARE + 1, bind_by_name, a, &call),
                     KILN_ERR_INTERNAL);
    for (int i = 0; i < 3; i++) rt_spec_free(c.specs[i]);
}
END_TEST

START_TEST(spec_copies_the_request)
{
    char kernel[] = "k", arch[] = "sm_80", dname[] = "B", dval[] = "128", hname[] = "n";
    KilnDefine d = {dname, dval};
    KilnParamHint h = {hname, 32, 7};
    KilnCompileOptions o = {.kernel = kernel, .defines = &d, .ndefines = 1, .arch = arch, .hints = &h, .nhints = 1,
                            .dump_after = "all"};
    char src[] = "source text";
    RtSpec *s = rt_spec_new("k.tile", src, &o, fake_compile, fake_release);
    ck_assert_ptr_nonnull(s);
    strcpy(kernel, "x");
    strcpy(arch, "zzzzz");
    strcpy(dval, "999");
    strcpy(hname, "q");
    strcpy(src, "garbage....");
    ck_assert_str_eq(s->opts.kernel, "k");
    ck_assert_str_eq(s->opts.arch, "sm_80");
    ck_assert_str_eq(s->opts.defines[0].value, "128");
    ck_assert_str_eq(s->opts.hints[0].name, "n");
    ck_assert_int_eq(s->opts.hints[0].divisibility, 32);
    ck_assert_int_eq(s->opts.hints[0].equals_one, 7);
    ck_assert_str_eq(s->src, "source text");
    ck_assert_ptr_null(s->opts.dump_after);
    ck_assert_int_eq(s->on, 1);
    rt_spec_free(s);
    ck_assert_int_eq(kiln_module_set_specialize(NULL, 0), KILN_ERR_USAGE);
}
END_TEST

/* ---- the cache key covers hints ---- */

START_TEST(cache_key_covers_hints)
{
    static const char *src = "kernel k(X: *f32, n: i32) { }\n";
    KilnCompileOptions o = {.kernel = "k", .arch = "sm_90a", .emit = KILN_EMIT_CUBIN};
    char none[65], k1[65], k2[65];
    ck_assert_int_eq(kiln_cache_key(src, &o, none), KILN_OK);
    KilnParamHint h1[] = {{"X", 16, 0}, {"n", 16, 0}};
    KilnParamHint h2[] = {{"n", 16, 0}, {"X", 16, 0}};
    o.hints = h1;
    o.nhints = 2;
    ck_assert_int_eq(kiln_cache_key(src, &o, k1), KILN_OK);
    ck_assert_str_ne(none, k1);
    o.hints = h2; /* order does not matter */
    ck_assert_int_eq(kiln_cache_key(src, &o, k2), KILN_OK);
    ck_assert_str_eq(k1, k2);
    /* every name and value matters */
    KilnParamHint v[4][2] = {{{"X", 16, 0}, {"n", 32, 0}}, {{"X", 8, 0}, {"n", 16, 0}}, {{"Y", 16, 0}, {"n", 16, 0}},
                             {{"X", 16, 0}, {"m", 16, 0}}};
    for (int i = 0; i < 4; i++) {
        o.hints = v[i];
        ck_assert_int_eq(kiln_cache_key(src, &o, k2), KILN_OK);
        ck_assert_msg(strcmp(k1, k2) && strcmp(none, k2), "variant %d collides", i);
    }
    o.nhints = 1;
    o.hints = h1;
    ck_assert_int_eq(kiln_cache_key(src, &o, k2), KILN_OK);
    ck_assert_str_ne(k1, k2);
    /* no hints: an empty array and NULL are the same request */
    o.nhints = 0;
    ck_assert_int_eq(kiln_cache_key(src, &o, k2), KILN_OK);
    ck_assert_str_eq(none, k2);
    o.hints = NULL;
    o.nhints = 3;
    ck_assert_int_eq(kiln_cache_key(src, &o, k2), KILN_ERR_USAGE);
    /* equals_one is its own fact: n==1, n=1 and nothing are three keys */
    KilnParamHint one[] = {{"n", 1, 1}}, div1[] = {{"n", 1, 0}}, one0[] = {{"n", 0, 1}};
    char kone[65], kdiv1[65];
    o.nhints = 1;
    o.hints = one;
    ck_assert_int_eq(kiln_cache_key(src, &o, kone), KILN_OK);
    o.hints = div1;
    ck_assert_int_eq(kiln_cache_key(src, &o, kdiv1), KILN_OK);
    ck_assert_str_ne(kone, kdiv1);
    ck_assert_str_ne(kone, none);
    o.hints = one0;
    ck_assert_int_eq(kiln_cache_key(src, &o, k2), KILN_OK);
    ck_assert_str_ne(kone, k2);
    /* and the order of n==1 and n=16 hints still does not matter */
    KilnParamHint mix1[] = {{"n", 1, 1}, {"X", 16, 0}}, mix2[] = {{"X", 16, 0}, {"n", 1, 1}};
    o.nhints = 2;
    o.hints = mix1;
    ck_assert_int_eq(kiln_cache_key(src, &o, k1), KILN_OK);
    o.hints = mix2;
    ck_assert_int_eq(kiln_cache_key(src, &o, k2), KILN_OK);
    ck_assert_str_eq(k1, k2);
}
END_TEST

static Suite *spec_suite(void)
{
    Suite *s = suite_create("runtime_specialize");
    TCase *tc = tcase_create("all");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_add_test(tc, key_matches_reference);
    tcase_add_test(tc, key_ones_exact_values);
    tcase_add_test(tc, key_leaves_out_what_hints_say);
    tcase_add_test(tc, variant_hints);
    tcase_add_test(tc, launch_must_pass_one_where_hinted);
    tcase_add_test(tc, launch_must_keep_module_hints);
    tcase_add_test(tc, infos_match);
    tcase_add_test(tc, select_compiles_once_per_key);
    tcase_add_test(tc, select_generic_cases);
    tcase_add_test(tc, select_with_module_hints);
    tcase_add_test(tc, select_failures);
    tcase_add_test(tc, select_equals_one);
    tcase_add_test(tc, select_is_thread_safe);
    tcase_add_test(tc, select_deferred);
    tcase_add_test(tc, select_deferred_off_and_failure);
    tcase_add_test(tc, select_deferred_is_thread_safe);
    tcase_add_test(tc, ir_signature_matches_code);
    tcase_add_test(tc, variant_may_add_the_producer_warpgroup);
    tcase_add_test(tc, pending_says_what_a_launch_compiles);
    tcase_add_test(tc, ready_is_the_compiled_kernel);
    tcase_add_test(tc, prepare_compiles_kernels_at_once);
    tcase_add_test(tc, prepare_reports_a_failing_bind);
    tcase_add_test(tc, spec_copies_the_request);
    tcase_add_test(tc, cache_key_covers_hints);
    suite_add_tcase(s, tc);
    return s;
}

TU_MAIN(spec_suite)
