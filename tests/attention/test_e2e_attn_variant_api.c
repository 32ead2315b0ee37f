/* test_e2e_attn_variant_api.c — the shipped variants of lang/lib/variants/ through the
 * runtime's variant call, on the CPU (kiln_attention_fwd_cpu: the same validation,
 * compile request, hook binding and argument binding by name as kiln_attention_fwd).
 *
 * Each case: random inputs in NaN-filled buffers, NaN-poisoned O and LSE, the variant
 * as embedded in libkiln (path only) with its runtime arguments (tensors and scalars),
 * judged by FlashAttention's rule against the float64 reference with the same
 * modification (tools/attn_ref.c's score_mod / mask_mod callbacks, natural units, raw
 * indices): |O - ref| <= 2 |O_plain - ref| + 1e-5, LSE 1e-4 relative, rows that see no
 * key O = 0 / LSE = -inf. A variant must not be a no-op (its output breaks the rule
 * against the plain reference). The call's errors: a missing, misspelt or mistyped
 * argument, a variant that does not compile (located diagnostics in kiln_last_error),
 * and a backward score_mod with no hand-written derivative (grad(score_mod) is derived).
 * The backward of every variant runs on the interpreter the way kiln_attention_bwd
 * compiles it (the variant's root text, hooks bound by name, arguments by name) against
 * the float64 analytic gradient (attn_bwd_harness.h); no shipped variant writes a
 * score_mod_grad, the compiler derives it.
 */
#include "attn_bwd_harness.h"

#include "kiln.h"
#include "jit_internal.h"
#include "variant_refs.h"

typedef struct VCase {
    Case c;
    const char *variant;      /* lang/lib/variants/NAME.tile */
    double (*score)(double, int, int, int, int, const void *);
    int (*mask)(int, int, int, int, const void *);
    Ref ref;
} VCase;

static void make_inputs(const VCase *v, Inputs *in)
{
    VarSpec vs = {v->variant, v->score, v->mask, v->ref};
    make_inputs_for(&vs, v->c.batch, v->c.hq, v->c.sq, in);
}

#define V(name) "lang/lib/variants/" name ".tile"
#define COMPOSED(name) "tests/attention/variants/" name ".tile"
static const VCase k_cases[] = {
    {{"causal f16 d64 sq<sk", ATTN_F16, 1, 2, 2, 40, 53, 64, 0, ATTN_BSHD, 0, 16, 16, 0}, V("causal"), NULL, m_causal, {0}},
    {{"window 9/3 bf16 d32", ATTN_BF16, 1, 2, 1, 70, 70, 32, 0, ATTN_BHSD, 0, 16, 16, 0}, V("sliding_window"), NULL,
     m_window, {.left = 9, .right = 3}},
    {{"window 20/0 causal f16 d64", ATTN_F16, 1, 1, 1, 90, 90, 64, 1, ATTN_BSHD, 0, 16, 16, 0}, V("sliding_window"),
     NULL, m_window, {.left = 20, .right = 0}},
    {{"window -1/4 f16 d32 sq>sk", ATTN_F16, 1, 1, 1, 50, 30, 32, 0, ATTN_BSHD, 0, 16, 16, 0}, V("sliding_window"),
     NULL, m_window, {.left = -1, .right = 4}},
    {{"softcap 1.5 f16 d64 scale 0.5", ATTN_F16, 1, 2, 2, 41, 41, 64, 0, ATTN_BSHD, 0.5, 16, 16, 0}, V("softcap"),
     s_softcap, NULL, {.softcap = 1.5}},
    {{"alibi bf16 d64 causal GQA", ATTN_BF16, 1, 4, 2, 45, 45, 64, 1, ATTN_BHSD, 0, 16, 16, 0}, V("alibi"), s_alibi,
     NULL, {0}},
    {{"document f16 d64 batch 2", ATTN_F16, 2, 2, 2, 61, 61, 64, 0, ATTN_BSHD, 0, 16, 16, 0}, V("document"), NULL,
     m_document, {0}},
    {{"document causal bf16 d32", ATTN_BF16, 1, 1, 1, 77, 77, 32, 1, ATTN_BSHD, 0, 16, 16, 0}, V("document"), NULL,
     m_document, {0}},
    {{"prefix_lm 23 f16 d64", ATTN_F16, 1, 2, 2, 60, 60, 64, 0, ATTN_BHSD, 0, 16, 16, 0}, V("prefix_lm"), NULL,
     m_prefix, {.prefix = 23}},
    {{"relative_bias f16 d64 long", ATTN_F16, 1, 2, 2, 150, 150, 64, 0, ATTN_BSHD, 0, 32, 32, 0}, V("relative_bias"),
     s_relbias, NULL, {0}},
    {{"gemma2 bf16 d64 causal", ATTN_BF16, 1, 2, 2, 80, 80, 64, 1, ATTN_BSHD, 0, 16, 16, 0}, V("gemma2"), s_softcap,
     m_window, {.softcap = 2.0, .left = 17, .right = 0}},
    /* composition: shipped variants imported under aliases, combined in the language */
    {{"compose cap>alibi, window|prefix f16", ATTN_F16, 1, 4, 2, 70, 70, 64, 0, ATTN_BSHD, 0, 16, 16, 0},
     COMPOSED("compose_softcap_alibi_sliding_window_or_prefix_lm"), s_cap_alibi, m_window_or_prefix,
     {.softcap = 1.5, .left = 9, .right = 2, .prefix = 11}},
    {{"compose alibi>cap, window&doc bf16 causal", ATTN_BF16, 2, 2, 2, 83, 83, 32, 1, ATTN_BSHD, 0, 16, 16, 0},
     COMPOSED("compose_alibi_softcap_sliding_window_and_document"), s_alibi_cap, m_window_and_document,
     {.softcap = 1.2, .left = 30, .right = 0}},
};

static KilnAttentionParams params_of(const Run *r, const Case *c, const KilnAttentionVariant *var)
{
    KilnAttentionParams p = {.dtype = c->dtype == ATTN_F16 ? KILN_F16 : KILN_BF16, .batch = c->batch,
                             .heads_q = c->hq, .heads_kv = c->hkv, .seqlen_q = c->sq, .seqlen_k = c->sk,
                             .head_dim = c->d, .q = (uintptr_t)r->q, .k = (uintptr_t)r->k, .v = (uintptr_t)r->v,
                             .o = (uintptr_t)r->o, .lse = (uintptr_t)r->lse, .softmax_scale = (float)r->p.scale,
                             .causal = c->causal, .block_m = c->block_m, .block_n = c->block_n, .variant = var};
    memcpy(p.q_stride, r->p.q_stride, sizeof p.q_stride);
    memcpy(p.k_stride, r->p.k_stride, sizeof p.k_stride);
    memcpy(p.v_stride, r->p.v_stride, sizeof p.v_stride);
    memcpy(p.o_stride, r->p.o_stride, sizeof p.o_stride);
    run_host_sizes(r, &p);
    return p;
}

/* Run case v through kiln_attention_fwd_cpu; hooks: whether the reference applies them. */
static Verdict run_case(const VCase *v, uint64_t seed, bool hooks)
{
    Inputs in;
    make_inputs(v, &in);
    KilnAttentionVariant var = {.path = var_path(v->variant), .args = in.args, .nargs = in.nargs};
    Run r;
    setup(&r, &v->c, seed);
    r.p.scale = v->c.scale > 0 ? v->c.scale : 1.0 / sqrt((double)v->c.d);
    KilnAttentionParams p = params_of(&r, &v->c, &var);
    KilnStatus st = kiln_attention_fwd_cpu(&p);
    ck_assert_msg(st == KILN_OK, "%s: %s", v->c.what, kiln_last_error());
    if (hooks) {
        r.p.score_mod = var_ref_score(&(VarSpec){v->variant, v->score, v->mask, v->ref});
        r.p.mask_mod = v->mask;
    }
    Verdict vd = judge(&r);
    teardown(&r);
    return vd;
}

START_TEST(variant_matches_reference)
{
    const VCase *v = &k_cases[_i];
    Verdict vd = run_case(v, 1000 + (uint64_t)_i * 7, true);
    if (getenv("ATTN_VERBOSE"))
        fprintf(stderr, "%-32s err %.3g bound %.3g lse %.3g\n", v->c.what, vd.e.o_max_abs, vd.bound, vd.e.lse_max_rel);
    ck_assert_msg(vd.e.nonfinite == 0, "%s: %lld non-finite outputs", v->c.what, (long long)vd.e.nonfinite);
    ck_assert_msg(vd.e.o_max_abs <= vd.bound, "%s: max |O - ref| = %.3g > %.3g at b%d h%d i%d d%d", v->c.what,
                  vd.e.o_max_abs, vd.bound, vd.e.worst_b, vd.e.worst_h, vd.e.worst_i, vd.e.worst_d);
    ck_assert_msg(vd.e.lse_max_rel <= 1e-4, "%s: LSE relative error %.3g", v->c.what, vd.e.lse_max_rel);
    ck_assert_msg(vd.empty_bad == 0, "%s: %lld elements of empty rows are not O = 0 / LSE = -inf", v->c.what,
                  (long long)vd.empty_bad);
    /* and it is not a no-op: against the plain reference (no hooks) the rule breaks */
    Verdict plain = run_case(v, 1000 + (uint64_t)_i * 7, false);
    ck_assert_msg(plain.e.o_max_abs > plain.bound || plain.empty_bad > 0, "%s made no difference", v->c.what);
}
END_TEST

/* The backward of case _i (both dQ paths across the cases), the forward's inputs. */
START_TEST(variant_backward_matches_reference)
{
    const VCase *v = &k_cases[_i];
    Inputs in;
    make_inputs(v, &in);
    KilnAttentionVariant var = {.path = var_path(v->variant), .args = in.args, .nargs = in.nargs};
    BwdCase bc = {.c = v->c, .deterministic = _i % 2, .ref_mask = v->mask, .variant = &var};
    bc.ref_score = var_ref_score(&(VarSpec){v->variant, v->score, v->mask, v->ref});
    bc.ref_score_grad = var_ref_grad(&(VarSpec){v->variant, v->score, v->mask, v->ref});
    bwd_check(&bc, 500 + (uint64_t)_i);
}
END_TEST

/* ---- the call's errors ---- */

static KilnStatus call_with(const char *path, const char *source, const KilnVariantArg *args, int nargs)
{
    static const Case c = {"errors", ATTN_F16, 1, 1, 1, 20, 20, 32, 0, ATTN_BSHD, 0, 16, 16, 0};
    KilnAttentionVariant var = {.source = source, .path = path, .args = args, .nargs = nargs};
    Run r;
    setup(&r, &c, 3);
    KilnAttentionParams p = params_of(&r, &c, &var);
    KilnStatus st = kiln_attention_fwd_cpu(&p);
    teardown(&r);
    return st;
}

static void expect(KilnStatus st, KilnStatus want, const char *needle)
{
    ck_assert_msg(st == want, "status %s, expected %s: %s", kiln_status_name(st), kiln_status_name(want),
                  kiln_last_error());
    ck_assert_msg(strstr(kiln_last_error(), needle), "no '%s' in: %s", needle, kiln_last_error());
}

START_TEST(argument_errors)
{
    int32_t ids[32] = {0};
    KilnVariantArg ok[3] = {{"doc_ids", kiln_arg_ptr((uintptr_t)ids), sizeof ids}, {"doc_stride", kiln_arg_i32(32), 0},
                            {"doc_len", kiln_arg_i32(20), 0}};
    expect(call_with(V("document"), NULL, ok, 3), KILN_OK, "");
    expect(call_with(V("document"), NULL, ok, 2), KILN_ERR_USAGE,
           "the variant's param 'doc_len' (i32) has no argument: add {\"doc_len\", ...}");
    KilnVariantArg typo[4] = {ok[0], ok[1], ok[2], {"doc_lenn", kiln_arg_i32(3), 0}};
    expect(call_with(V("document"), NULL, typo, 4), KILN_ERR_USAGE, "argument 'doc_lenn' names no param");
    KilnVariantArg kind[3] = {ok[0], ok[1], {"doc_len", kiln_arg_f32(20), 0}};
    expect(call_with(V("document"), NULL, kind, 3), KILN_ERR_USAGE, "the variant's param 'doc_len' is i32, its argument is f32");
    KilnVariantArg range[3] = {ok[0], ok[1], {"doc_len", kiln_arg_i64(1ll << 40), 0}};
    expect(call_with(V("document"), NULL, range, 3), KILN_ERR_USAGE, "does not fit");
    KilnVariantArg twice[4] = {ok[0], ok[1], ok[2], ok[2]};
    expect(call_with(V("document"), NULL, twice, 4), KILN_ERR_USAGE, "args[2] and args[3] both give 'doc_len'");
    KilnVariantArg nobytes[3] = {{"doc_ids", kiln_arg_ptr((uintptr_t)ids), 0}, ok[1], ok[2]};
    expect(call_with(V("document"), NULL, nobytes, 3), KILN_ERR_USAGE, "'doc_ids' is a pointer without its bytes");
    /* a tensor too small for what the hooks read is the interpreter's bounds error */
    KilnVariantArg small[3] = {{"doc_ids", kiln_arg_ptr((uintptr_t)ids), 8}, ok[1], ok[2]};
    expect(call_with(V("document"), NULL, small, 3), KILN_ERR_KERNEL, "doc_ids");
    expect(call_with("nowhere/none.tile", NULL, NULL, 0), KILN_ERR_IO, "cannot read 'nowhere/none.tile'");
    /* on a device, a variant call is never split into batch launches (hooks see b): refused
     * before the device is touched (a device pointer that faults if read) */
    KilnAttentionVariant var = {.path = V("causal")};
    KilnAttentionParams p = {.dtype = KILN_F16, .batch = 2, .heads_q = 40000, .heads_kv = 1, .seqlen_q = 16,
                             .seqlen_k = 16, .head_dim = 64, .q = 0x10000, .k = 0x20000, .v = 0x30000, .o = 0x40000,
                             .lse = 0x50000, .variant = &var};
    for (int i = 0; i < 3; i++) p.q_stride[i] = p.k_stride[i] = p.v_stride[i] = p.o_stride[i] = i == 2 ? 64 : 1 << 22;
    p.o_stride[0] = (int64_t)40000 << 22;   /* O's batches past its heads (outputs must not overlap) */
    expect(kiln_attention_fwd((KilnDevice *)(uintptr_t)0x18, &p, NULL), KILN_ERR_UNSUPPORTED,
           "batch * heads_q = 80000 exceeds 65535 with a variant");
}
END_TEST

START_TEST(compile_errors_are_located)
{
    const char *bad = "// my variant\nfn mask_mod(b, h, q_idx, kv_idx) { return kv_idx <= q_idy; }\n";
    expect(call_with("my_variant.tile", bad, NULL, 0), KILN_ERR_COMPILE,
           "my_variant.tile:2:53: error: unknown name 'q_idy'; did you mean 'q_idx'?\n"
           "fn mask_mod(b, h, q_idx, kv_idx) { return kv_idx <= q_idy; }\n"
           "                                                    ^");
    const char *clash = "fn load_tile(a, b, c) { return a; }\n";
    expect(call_with("clash.tile", clash, NULL, 0), KILN_ERR_COMPILE, "clash.tile:1:4: error: 'load_tile' is already declared");
    /* with no path the text is "<variant>" */
    expect(call_with(NULL, "fn mask_mod(b, h, i, j) { return j <= zz; }\n", NULL, 0), KILN_ERR_COMPILE,
           "<variant>:1:");
}
END_TEST

/* The backward takes a score_mod without its derivative (score_mod_grad defaults to
 * grad(score_mod), derived by the compiler); the forward keeps its plain-scores fast path
 * only without a score_mod. Checked on the compile request and by compiling it. */
START_TEST(backward_derives_score_mod_grad)
{
    KilnAttentionVariant var = {.source = "fn score_mod(s, b, h, i, j) { return s * 0.5; }\n", .path = "half.tile"};
    RtAttnVarSrc vs;
    ck_assert_int_eq(rt_attn_var_open("t", &var, &vs), KILN_OK);
    RtAttnVariant v;
    rt_attn_variant_init(&v, "lang/lib/attention_bwd.tile", "attn_bwd_dq_f16", 0, 0, 0);
    v.vs = &vs;
    RtAttnRequest req;
    ck_assert_int_eq(rt_attn_compile_request("t", &v, &req), KILN_OK);
    KilnCompileOptions o = req.opts;
    o.emit = KILN_EMIT_IR;
    KilnCompileResult r;
    ck_assert_msg(kiln_compile(req.path, req.src, &o, &r) == KILN_OK, "%s", r.diagnostics ? r.diagnostics : "");
    ck_assert_msg(strstr(r.output, "@grad(score_mod)") != NULL, "the derivative is not grad(score_mod)");
    kiln_compile_result_free(&r);
    free(req.owned);
    rt_attn_variant_init(&v, "lang/lib/attention_fwd.tile", "attn_fwd_f16", 0, 0, 0);
    v.vs = &vs;
    v.plain_scores = true;
    ck_assert_int_eq(rt_attn_compile_request("t", &v, &req), KILN_OK);
    for (int i = 0; i < req.ndefines; i++) ck_assert_str_ne(req.defines[i].name, "PLAIN_SCORES");
    ck_assert_msg(strstr(req.src, "import \"attention_fwd.tile\";") != NULL, "%s", req.src);
    free(req.owned);
    rt_attn_var_close(&vs);
    /* a mask-only variant keeps the plain-scores fast path */
    KilnAttentionVariant m = {.path = V("causal")};
    ck_assert_int_eq(rt_attn_var_open("t", &m, &vs), KILN_OK);
    v.vs = &vs;
    ck_assert_int_eq(rt_attn_compile_request("t", &v, &req), KILN_OK);
    bool plain = false;
    for (int i = 0; i < req.ndefines; i++) plain |= !strcmp(req.defines[i].name, "PLAIN_SCORES");
    ck_assert(plain);
    free(req.owned);
    rt_attn_var_close(&vs);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("attention_variant_api");
    TCase *tc = tcase_create("variants");
    tcase_set_timeout(tc, 900);
    tcase_add_loop_test(tc, variant_matches_reference, 0, (int)(sizeof k_cases / sizeof k_cases[0]));
    tcase_add_loop_test(tc, variant_backward_matches_reference, 0, (int)(sizeof k_cases / sizeof k_cases[0]));
    tcase_add_test(tc, argument_errors);
    tcase_add_test(tc, compile_errors_are_located);
    tcase_add_test(tc, backward_derives_score_mod_grad);
    suite_add_tcase(s, tc);
    return s;
}

TU_MAIN(suite)
