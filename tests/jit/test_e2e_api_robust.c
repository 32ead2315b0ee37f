/* test_e2e_api_robust.c — the public C API refuses what a hostile or careless caller
 * passes (issue 29), naming the field, instead of crashing, reading past a buffer or
 * silently ignoring it. No GPU: the _check and _cpu entry points and the size functions.
 *
 * Covered: every count/array pair of KilnCompileOptions (kiln_compile and kiln_run_cpu);
 * a variant's arrays through every _check and _cpu call (they used to read args[0]
 * before validating); the _cpu forward's host buffer sizes; outputs whose rows overlap;
 * a variant argument named like the program's own parameter; the decode split count and
 * workspace, the backward scratch for refused shapes; the variant digest (the in-process
 * cache key) covering modules imported from disk.
 *
 * Example: kiln_compile(..., {.defines = NULL, .ndefines = 2}) -> KILN_ERR_USAGE with
 * "bad defines: ndefines 2 but no array" (it was SIGSEGV in compile.c).
 */
#include "testutil.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kiln.h"
#include "jit_internal.h"   /* rt_attn_var_open: the digest the in-process cache keys on */

#define VEC_ADD \
    "kernel add(X: *f32, Y: *f32, Z: *f32, n: i32, const BLOCK: i32 = 16) {\n" \
    "    let o = program_id(0) * BLOCK + arange(BLOCK);\n    let m = o < n;\n" \
    "    store(Z + o, load(X + o, mask = m) + load(Y + o, mask = m), mask = m);\n}\n"

/* text NULL: kiln_last_error(), read here, after the call (argument order is unspecified) */
static void expect(KilnStatus st, KilnStatus want, const char *text, const char *needle)
{
    if (!text) text = kiln_last_error();
    ck_assert_msg(st == want, "status %s, expected %s: %s", kiln_status_name(st), kiln_status_name(want),
                  text ? text : "(no text)");
    ck_assert_msg(text && strstr(text, needle), "no '%s' in: %s", needle, text ? text : "(null)");
}

static void compile_expect(const KilnCompileOptions *o, const char *needle)
{
    KilnCompileResult r;
    KilnStatus st = kiln_compile("v.tile", VEC_ADD, o, &r);
    expect(st, KILN_ERR_USAGE, r.diagnostics, needle);
    kiln_compile_result_free(&r);
    /* the interpreter's compile takes the same options */
    float x[4] = {1, 2, 3, 4}, z[4];
    KilnHostArg a[] = {kiln_host_buf(x, sizeof x, KILN_HOST_IN), kiln_host_buf(x, sizeof x, KILN_HOST_IN),
                       kiln_host_buf(z, sizeof z, KILN_HOST_OUT), kiln_host_scalar(kiln_arg_i32(4))};
    st = kiln_run_cpu("v.tile", VEC_ADD, o, NULL, a, 4);
    ck_assert_int_ne(st, KILN_OK);
    ck_assert_msg(strstr(kiln_last_error(), needle), "kiln_run_cpu: no '%s' in: %s", needle, kiln_last_error());
}

START_TEST(compile_option_arrays)
{
    KilnDefine null_name[] = {{NULL, "16"}}, null_value[] = {{"BLOCK", NULL}};
    KilnParamHint null_hint[] = {{NULL, 16, 0}};
    KilnCompileOptions o = {.emit = KILN_EMIT_IR, .ndefines = 2};
    compile_expect(&o, "bad defines: ndefines 2 but no array");
    o = (KilnCompileOptions){.emit = KILN_EMIT_IR, .ndefines = -1};
    compile_expect(&o, "bad defines: ndefines -1 but no array");
    o = (KilnCompileOptions){.emit = KILN_EMIT_IR, .defines = null_name, .ndefines = 1};
    compile_expect(&o, "bad defines: defines[0] has a NULL name");
    o = (KilnCompileOptions){.emit = KILN_EMIT_IR, .defines = null_value, .ndefines = 1};
    compile_expect(&o, "bad defines: defines[0] has a NULL value");
    o = (KilnCompileOptions){.emit = KILN_EMIT_IR, .hints = null_hint, .nhints = 1};
    compile_expect(&o, "bad hints: hints[0] has a NULL name");
    o = (KilnCompileOptions){.emit = KILN_EMIT_IR, .nhints = 3};
    compile_expect(&o, "bad hints: 3 hints but no array");
    o = (KilnCompileOptions){.emit = KILN_EMIT_IR, .ninclude_dirs = 1};
    compile_expect(&o, "bad include dirs: 1 dirs but no array");
    /* the AST stage too (it used to parse before any check) */
    o = (KilnCompileOptions){.emit = KILN_EMIT_AST, .ndefines = 1};
    KilnCompileResult r;
    KilnStatus st = kiln_compile("v.tile", VEC_ADD, &o, &r);
    expect(st, KILN_ERR_USAGE, r.diagnostics, "bad defines");
    kiln_compile_result_free(&r);
}
END_TEST

/* ---- attention ---- */

#define B 1
#define H 2
#define S 20
#define D 32

static uint16_t g_q[B * H * S * D], g_k[B * H * S * D], g_v[B * H * S * D], g_o[B * H * S * D];
static float g_lse[B * H * S];

static KilnAttentionParams fwd_params(const KilnAttentionVariant *var)
{
    uint64_t s = 0x9E3779B97F4A7C15ull;
    uint16_t *in[] = {g_q, g_k, g_v};
    for (int t = 0; t < 3; t++)
        for (size_t i = 0; i < sizeof g_q / 2; i++) {
            s ^= s << 13, s ^= s >> 7, s ^= s << 17;
            in[t][i] = kiln_f32_to_f16((float)((s >> 40) & 0xffffff) / 8388608.0f - 1.0f);
        }
    KilnAttentionParams p = {.dtype = KILN_F16, .batch = B, .heads_q = H, .heads_kv = H, .seqlen_q = S,
                             .seqlen_k = S, .head_dim = D, .q = (uintptr_t)g_q, .k = (uintptr_t)g_k,
                             .v = (uintptr_t)g_v, .o = (uintptr_t)g_o, .lse = (uintptr_t)g_lse,
                             .block_m = 16, .block_n = 16, .variant = var,
                             .q_stride = {H * S * D, S * D, D}, .k_stride = {H * S * D, S * D, D},
                             .v_stride = {H * S * D, S * D, D}, .o_stride = {H * S * D, S * D, D},
                             .q_bytes = sizeof g_q, .k_bytes = sizeof g_k, .v_bytes = sizeof g_v,
                             .o_bytes = sizeof g_o, .lse_bytes = sizeof g_lse};
    return p;
}

static KilnAttentionBwdParams bwd_params(const KilnAttentionVariant *var)
{
    KilnAttentionBwdParams b = {.fwd = fwd_params(var), .dout = 0x7f0050000000ull, .dq = 0x7f0060000000ull,
                                .dk = 0x7f0070000000ull, .dv = 0x7f0080000000ull, .scratch = 0x7f0090000000ull};
    memcpy(b.dout_stride, b.fwd.o_stride, sizeof b.dout_stride);
    memcpy(b.dq_stride, b.fwd.q_stride, sizeof b.dq_stride);
    memcpy(b.dk_stride, b.fwd.k_stride, sizeof b.dk_stride);
    memcpy(b.dv_stride, b.fwd.v_stride, sizeof b.dv_stride);
    b.scratch_size = kiln_attention_bwd_scratch_size(&b);
    return b;
}

static KilnAttentionDecodeParams decode_params(const KilnAttentionVariant *var)
{
    KilnAttentionDecodeParams p = {.dtype = KILN_F16, .batch = 4, .heads_q = 8, .heads_kv = 2, .seqlen_q = 3,
                                   .head_dim = 128, .q = 0x7f0000000000ull, .o = 0x7f0010000000ull,
                                   .lse = 0x7f0020000000ull, .k = 0x7f0030000000ull, .v = 0x7f0040000000ull,
                                   .cache_seqlens = 0x7f0050000000ull, .max_seqlen_k = 4000, .variant = var,
                                   .q_stride = {3 * 8 * 128, 128, 8 * 128}, .o_stride = {3 * 8 * 128, 128, 8 * 128},
                                   .k_stride = {4000 * 2 * 128, 128, 2 * 128}, .v_stride = {4000 * 2 * 128, 128, 2 * 128}};
    return p;
}

/* A variant with nargs but no args (or a define without its name) is refused by every
 * entry point before anything reads the array: the _cpu calls used to check the args'
 * bytes first (SIGSEGV), the _check calls never looked at the variant. */
START_TEST(variant_arrays_checked_everywhere)
{
    KilnDefine bad_def[] = {{NULL, "1"}};
    const KilnAttentionVariant vars[] = {
        {.path = "lang/lib/variants/alibi.tile", .nargs = 1},
        {.path = "lang/lib/variants/alibi.tile", .nargs = -1},
        {.path = "lang/lib/variants/alibi.tile", .defines = bad_def, .ndefines = 1},
        {.nargs = 0},
    };
    const char *needles[] = {"nargs 1 without args", "nargs -1 without args", "defines[0] has a NULL name",
                             "neither source nor path"};
    for (int i = 0; i < 4; i++) {
        KilnAttentionParams p = fwd_params(&vars[i]);
        expect(kiln_attention_fwd_cpu(&p), KILN_ERR_USAGE, NULL, needles[i]);
        expect(kiln_attention_check(&p), KILN_ERR_USAGE, NULL, needles[i]);
        KilnBlockMask m = {.block_q = 16, .block_kv = 16, .batch = 1, .heads = 1};
        uint32_t data[1024];
        m.data = (uintptr_t)data, m.bytes = sizeof data;
        expect(kiln_attention_block_mask_create_cpu(&p, &m), KILN_ERR_USAGE, NULL, needles[i]);
        KilnAttentionBwdParams b = bwd_params(&vars[i]);
        expect(kiln_attention_bwd_check(&b), KILN_ERR_USAGE, NULL, needles[i]);
        KilnAttentionDecodeParams d = decode_params(&vars[i]);
        expect(kiln_attention_decode_check(&d), KILN_ERR_USAGE, NULL, needles[i]);
    }
}
END_TEST

/* The _cpu forward takes each host buffer's size: one smaller than the shape spans is
 * refused naming its field (it used to be read past and return OK); the right sizes run. */
START_TEST(fwd_cpu_host_sizes)
{
    KilnAttentionParams p = fwd_params(NULL);
    ck_assert_msg(kiln_attention_fwd_cpu(&p) == KILN_OK, "%s", kiln_last_error());
    struct { size_t *f; const char *name; } t[] = {{&p.q_bytes, "q_bytes"}, {&p.k_bytes, "k_bytes"},
                                                   {&p.v_bytes, "v_bytes"}, {&p.o_bytes, "o_bytes"},
                                                   {&p.lse_bytes, "lse_bytes"}};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        size_t keep = *t[i].f;
        *t[i].f = keep - 2;
        char want[64];
        snprintf(want, sizeof want, "%s is %zu, below the %zu bytes", t[i].name, keep - 2, keep);
        expect(kiln_attention_fwd_cpu(&p), KILN_ERR_USAGE, NULL, want);
        *t[i].f = 0;
        expect(kiln_attention_fwd_cpu(&p), KILN_ERR_USAGE, NULL, t[i].name);
        *t[i].f = keep;
    }
}
END_TEST

/* An output whose rows overlap (o_stride[2] = 1 < head_dim) is refused like a zero stride
 * was: the programs' stores would race. Forward, backward outputs, decode. */
START_TEST(overlapping_outputs)
{
    KilnAttentionParams p = fwd_params(NULL);
    ck_assert_int_eq(kiln_attention_check(&p), KILN_OK);
    p.o_stride[2] = 1;
    expect(kiln_attention_check(&p), KILN_ERR_USAGE, NULL,
           "o_stride[2] (sequence) is 1, below the 32 elements the dims inside it span");
    p = fwd_params(NULL);
    p.o_stride[1] = S * D - 1;   /* heads one element short of the rows they hold */
    expect(kiln_attention_check(&p), KILN_ERR_USAGE, NULL, "o_stride[1] (head) is 639");
    p = fwd_params(NULL);
    /* [b, s, h, d] is no overlap (the head inside the row) */
    p.o_stride[0] = S * H * D, p.o_stride[1] = D, p.o_stride[2] = H * D;
    ck_assert_msg(kiln_attention_check(&p) == KILN_OK, "%s", kiln_last_error());
    KilnAttentionBwdParams b = bwd_params(NULL);
    ck_assert_msg(kiln_attention_bwd_check(&b) == KILN_OK, "%s", kiln_last_error());
    b.dk_stride[2] = 16;
    expect(kiln_attention_bwd_check(&b), KILN_ERR_USAGE, NULL, "dk_stride[2] (sequence) is 16");
    KilnAttentionDecodeParams d = decode_params(NULL);
    ck_assert_msg(kiln_attention_decode_check(&d) == KILN_OK, "%s", kiln_last_error());
    d.o_stride[1] = 64;
    expect(kiln_attention_decode_check(&d), KILN_ERR_USAGE, NULL, "o_stride[1] (head) is 64");
}
END_TEST

/* An argument named like the program's own parameter (sm_scale) used to be dropped
 * silently (the call sets sm_scale itself): now an error naming it. */
START_TEST(variant_arg_named_like_a_kernel_parameter)
{
    static const char src[] = "param bias: f32;\nfn score_mod(s, b, h, i, j) { return s + bias; }\n";
    KilnVariantArg args[] = {{"bias", kiln_arg_f32(0.5f), 0}, {"sm_scale", kiln_arg_f32(2.0f), 0}};
    KilnAttentionVariant var = {.source = src, .path = "bias.tile", .args = args, .nargs = 1};
    KilnAttentionParams p = fwd_params(&var);
    ck_assert_msg(kiln_attention_fwd_cpu(&p) == KILN_OK, "%s", kiln_last_error());
    var.nargs = 2;
    expect(kiln_attention_fwd_cpu(&p), KILN_ERR_USAGE, NULL,
           "the variant's argument 'sm_scale' names a parameter of the program itself");
    /* a u8 param binds like any integer (it was an internal error), in range only */
    static const char src8[] = "param k: u8;\nfn score_mod(s, b, h, i, j) { return s * k.to(f32); }\n";
    KilnVariantArg a8[] = {{"k", kiln_arg_i32(3), 0}};
    KilnAttentionVariant v8 = {.source = src8, .path = "u8.tile", .args = a8, .nargs = 1};
    p = fwd_params(&v8);
    ck_assert_msg(kiln_attention_fwd_cpu(&p) == KILN_OK, "%s", kiln_last_error());
    a8[0].value = kiln_arg_i32(300);
    expect(kiln_attention_fwd_cpu(&p), KILN_ERR_USAGE, NULL, "k = 300 does not fit the program's u8 parameter");
}
END_TEST

/* The split count never exceeds KILN_DECODE_MAX_SPLITS, and the size functions return 0
 * (never a wrapped product) for shapes the calls refuse. */
START_TEST(sizes_of_refused_shapes)
{
    KilnAttentionDecodeParams d = decode_params(NULL);
    d.num_splits = 1000;
    ck_assert_int_le(kiln_attention_decode_splits(&d, 132), KILN_DECODE_MAX_SPLITS);
    d.num_splits = 0;
    ck_assert_int_gt(kiln_attention_decode_workspace(&d, 4), 0);
    ck_assert_uint_eq(kiln_attention_decode_workspace(&d, KILN_DECODE_MAX_SPLITS + 1), 0);
    d.batch = INT32_MAX, d.heads_q = 64, d.heads_kv = 1, d.seqlen_q = 16, d.head_dim = 256;
    ck_assert_uint_eq(kiln_attention_decode_workspace(&d, 100), 0);
    d = decode_params(NULL);
    d.head_dim = 80;
    ck_assert_uint_eq(kiln_attention_decode_workspace(&d, 4), 0);

    KilnAttentionBwdParams b = bwd_params(NULL);
    ck_assert_uint_gt(kiln_attention_bwd_scratch_size(&b), 0);
    b.fwd.head_dim = 80;
    ck_assert_uint_eq(kiln_attention_bwd_scratch_size(&b), 0);
    b = bwd_params(NULL);
    b.fwd.batch = INT32_MAX, b.fwd.heads_q = 65535, b.fwd.heads_kv = 1, b.fwd.seqlen_q = INT32_MAX - 1024;
    ck_assert_uint_eq(kiln_attention_bwd_scratch_size(&b), 0);
}
END_TEST

/* The variant's digest (the in-process cache's key) covers the text of a module it
 * imports from disk: an edited module is not served stale. */
START_TEST(digest_covers_imported_modules)
{
    char dir[] = "/tmp/kiln_robust_XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char mod[600], var_path[600];
    snprintf(mod, sizeof mod, "%s/helper.tile", dir);
    snprintf(var_path, sizeof var_path, "%s/v.tile", dir);
    static const char src[] = "import helper;\nfn score_mod(s, b, h, i, j) { return twice(s); }\n";
    KilnAttentionVariant var = {.source = src, .path = var_path};
    char digest[2][65];
    const char *bodies[] = {"fn twice(x) { return x * 2.0; }\n", "fn twice(x) { return x * 3.0; }\n"};
    for (int i = 0; i < 2; i++) {
        FILE *f = fopen(mod, "w");
        ck_assert_ptr_nonnull(f);
        fputs(bodies[i], f);
        fclose(f);
        RtAttnVarSrc vs;
        ck_assert_int_eq(rt_attn_var_open("t", &var, &vs), KILN_OK);
        memcpy(digest[i], vs.digest, 65);
        rt_attn_var_close(&vs);
    }
    ck_assert_str_ne(digest[0], digest[1]);
    unlink(mod);
    rmdir(dir);
}
END_TEST

/* Issue 24: the scratch has a size field (a short one refused, naming it), the size asks
 * only for what the device's plan writes, and the backward plans every batch * heads the
 * forward runs (above 65535: launches of whole batches, as the forward). */
START_TEST(bwd_scratch_and_grid_plan)
{
    KilnAttentionBwdParams b = bwd_params(NULL);
    size_t delta = (size_t)(B * H * S * 4 + 255) / 256 * 256, acc = (size_t)B * H * S * D * 4;
    ck_assert_uint_eq(kiln_attention_bwd_scratch_size(&b), delta + acc);
    /* d 32 and every sm_80 plan add dQ atomically (the accumulator); sm_90's table at
     * d 128 takes the separate dQ pass (delta only) */
    ck_assert_uint_eq(kiln_attention_bwd_scratch_size_sm(&b, 80), delta + acc);
    b.block_m = b.block_n = 0;
    b.fwd.block_m = b.fwd.block_n = 0;
    b.fwd.head_dim = 128;
    size_t delta128 = delta, acc128 = (size_t)B * H * S * 128 * 4;
    ck_assert_uint_eq(kiln_attention_bwd_scratch_size_sm(&b, 90), delta128);
    ck_assert_uint_eq(kiln_attention_bwd_scratch_size(&b), delta128 + acc128);
    RtAttnBwdPlan plan;
    rt_attn_bwd_plan(90, &b, &plan);
    ck_assert(!plan.dq_acc);
    rt_attn_bwd_plan(80, &b, &plan);
    ck_assert(plan.dq_acc);
    b.deterministic = 1;
    ck_assert_uint_eq(kiln_attention_bwd_scratch_size_sm(&b, 80), delta128);

    b = bwd_params(NULL);
    ck_assert_msg(kiln_attention_bwd_check(&b) == KILN_OK, "%s", kiln_last_error());
    b.scratch_size = delta - 16;
    char want[96];
    snprintf(want, sizeof want, "scratch_size %zu is below the %zu bytes", delta - 16, delta);
    expect(kiln_attention_bwd_check(&b), KILN_ERR_USAGE, NULL, want);

    /* 4096 x 32 = 131072 programs: two launches of 2047 batches and one of 2 */
    b = bwd_params(NULL);
    KilnAttentionParams *f = &b.fwd;
    f->batch = 4096, f->heads_q = 32, f->heads_kv = 8, f->seqlen_q = 117, f->seqlen_k = 301, f->head_dim = 96;
    int64_t q[3] = {32 * 117 * 96, 117 * 96, 96}, k[3] = {8 * 301 * 96, 301 * 96, 96};
    memcpy(f->q_stride, q, sizeof q), memcpy(f->o_stride, q, sizeof q), memcpy(b.dout_stride, q, sizeof q);
    memcpy(b.dq_stride, q, sizeof q);
    memcpy(f->k_stride, k, sizeof k), memcpy(f->v_stride, k, sizeof k), memcpy(b.dk_stride, k, sizeof k);
    memcpy(b.dv_stride, k, sizeof k);
    b.scratch_size = kiln_attention_bwd_scratch_size(&b);
    ck_assert_msg(kiln_attention_bwd_check(&b) == KILN_OK, "%s", kiln_last_error());
    rt_attn_bwd_plan(90, &b, &plan);
    ck_assert_int_eq(plan.launch_batch, 65535 / 32);
    ck_assert_int_eq(plan.n, 3);
    for (int i = 0; i < plan.n; i++) {
        ck_assert_int_le(plan.grid[i][1], 65535);
        ck_assert_int_eq(plan.grid[i][1], plan.launch_batch * plan.heads[i]);
    }
    ck_assert_int_eq(plan.heads[1], 8);   /* the dK/dV programs run per K/V head */
    /* a batch stride that keeps no launch's advance aligned is refused, naming why */
    f->heads_q = 9000, f->heads_kv = 9000, f->batch = 8;
    f->q_stride[0] = (int64_t)9000 * 117 * 96 + 1;
    ck_assert_int_eq(rt_attn_bwd_launch_batch(&b), 0);
    expect(kiln_attention_bwd_check(&b), KILN_ERR_UNSUPPORTED, NULL, "do not allow splitting it into aligned launches");
}
END_TEST

static Suite *robust_suite(void)
{
    Suite *s = suite_create("api_robust");
    TCase *tc = tcase_create("api");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, compile_option_arrays);
    tcase_add_test(tc, variant_arrays_checked_everywhere);
    tcase_add_test(tc, fwd_cpu_host_sizes);
    tcase_add_test(tc, overlapping_outputs);
    tcase_add_test(tc, variant_arg_named_like_a_kernel_parameter);
    tcase_add_test(tc, sizes_of_refused_shapes);
    tcase_add_test(tc, digest_covers_imported_modules);
    tcase_add_test(tc, bwd_scratch_and_grid_plan);
    suite_add_tcase(s, tc);
    return s;
}

TU_MAIN(robust_suite)
