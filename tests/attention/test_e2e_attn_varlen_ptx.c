/* test_e2e_attn_varlen_ptx.c — the packed variable-length kernels (attn_fwd_varlen_*,
 * attn_bwd_*_varlen_*) compile for sm_80 and sm_90a at the schedules the runtime picks, with
 * the hints launch-time specialisation adds for aligned tensors and strides that are
 * multiples of 16, to a cubin ptxas accepts (PTX with an .entry when there is no ptxas).
 *
 * Forward: the tuning table's rows of jit/attention_tune.c (sm_80 and sm_90 defaults for
 * head dims 64, 128, 256, causal and not, PLAIN_SCORES as the API compiles it); the varlen
 * kernel must keep the fixed-length kernel's fast path: as many tensor-core instructions
 * (mma.sync / wgmma) and cp.async copies as it. Backward: rt_attn_bwd_plan for a packed
 * call, both dQ paths, every kernel it launches.
 */
#include "tests/ptx_util.h"
#include "tests/testutil.h"
#include "kiln.h"
#include "jit_internal.h"

#include <string.h>

/* Pointers and strides of every attention program's kernels, and the prefix sums. */
static const char *const k_hinted[] = {
    "Q", "K", "V", "O", "LSE", "DO", "DQ", "DK", "DV", "DELTA", "DQ_ACC", "cu_seqlens_q", "cu_seqlens_k",
    "stride_qb", "stride_qh", "stride_qm", "stride_kb", "stride_kh", "stride_kn", "stride_vb", "stride_vh",
    "stride_vn", "stride_ob", "stride_oh", "stride_om", "stride_doh", "stride_dom", "stride_dqh", "stride_dqm",
    "stride_dkh", "stride_dkn", "stride_dvh", "stride_dvn", "heads", "heads_kv", "seqlen_q", "seqlen_k"};

/* The hints for kernel `kernel` of `src`: those of k_hinted it has. */
static int hints_for(const char *file, const char *src, const RtAttnVariant *v, KilnParamHint *h)
{
    KilnCompileOptions o = {.kernel = v->kernel, .defines = v->defines, .ndefines = v->ndefines,
                            .emit = KILN_EMIT_IR};
    KilnCompileResult r;
    ck_assert_msg(kiln_compile(file, src, &o, &r) == KILN_OK, "%s", r.diagnostics);
    int n = 0;
    for (size_t i = 0; i < sizeof k_hinted / sizeof k_hinted[0]; i++)
        for (int j = 0; j < r.kernels[0].nparams; j++)
            if (!strcmp(r.kernels[0].params[j].name, k_hinted[i])) h[n++] = (KilnParamHint){k_hinted[i], 16, 0};
    kiln_compile_result_free(&r);
    return n;
}

static KilnCompileResult compile_variant(const char *file, const RtAttnVariant *v, const char *arch, KilnEmit emit)
{
    const char *src = kiln_lib_source(file);
    ck_assert_ptr_nonnull(src);
    KilnParamHint h[64];
    int nh = hints_for(file, src, v, h);
    KilnCompileOptions o = {.kernel = v->kernel, .defines = v->defines, .ndefines = v->ndefines, .arch = arch,
                            .num_warps = v->num_warps, .num_stages = v->num_stages, .schedule = v->schedule,
                            .hints = h, .nhints = nh, .emit = emit};
    KilnCompileResult r;
    KilnStatus st = kiln_compile(file, src, &o, &r);
    ck_assert_msg(st == KILN_OK, "%s %s: %s\n%s", v->kernel, arch, kiln_status_name(st),
                  r.diagnostics ? r.diagnostics : "");
    /* warp specialisation (the table's sm_90 rows for d 64 and causal d 128) adds its producer */
    if (v->num_warps)
        ck_assert_int_eq(r.kernels[0].num_warps, v->num_warps + (v->schedule.warp_specialize > 0 ? 4 : 0));
    return r;
}

static void assemble(const char *file, const RtAttnVariant *v, const char *arch)
{
    bool ptxas = pu_have_ptxas();
    KilnCompileResult r = compile_variant(file, v, arch, ptxas ? KILN_EMIT_CUBIN : KILN_EMIT_PTX);
    if (ptxas)
        ck_assert_msg(r.output_size > 4 && memcmp(r.output, "\177ELF", 4) == 0, "%s %s: not a cubin", v->kernel, arch);
    else
        ck_assert_int_gt(pu_count_n(r.output, r.output_size, ".entry"), 0);
    kiln_compile_result_free(&r);
}

/* The forward's table rows (jit/attention_tune.c, k_tune): sm, d, causal, tiles, warps. */
typedef struct FwdRow { int sm, d, causal, bm, bn, warps; } FwdRow;
static const FwdRow k_fwd[] = {
    {80, 64, 0, 128, 64, 8},  {80, 128, 1, 128, 64, 8}, {80, 256, 0, 64, 32, 4},
    {90, 64, 0, 64, 128, 4},  {90, 64, 1, 64, 64, 4},   {90, 128, 1, 128, 64, 4}, {90, 128, 0, 64, 64, 4},
    {90, 256, 1, 64, 64, 4},
};

static void fwd_variant(RtAttnVariant *v, const FwdRow *row, bool varlen, bool bf16)
{
    char kernel[32];
    snprintf(kernel, sizeof kernel, "attn_fwd%s_%s", varlen ? "_varlen" : "", bf16 ? "bf16" : "f16");
    static char name[2][32];
    snprintf(name[varlen], sizeof name[0], "%s", kernel);
    rt_attn_variant_init(v, "lang/lib/attention_fwd.tile", name[varlen], row->warps, 2, 0);
    rt_attn_variant_define(v, "HEAD_DIM", row->d, false);
    rt_attn_variant_define(v, "BLOCK_M", row->bm, false);
    rt_attn_variant_define(v, "BLOCK_N", row->bn, false);
    rt_attn_variant_define(v, "CAUSAL", row->causal, true);
    rt_attn_variant_define(v, "PLAIN_SCORES", 1, true);
}

static int count_mma(const KilnCompileResult *r)
{
    return pu_count_n(r->output, r->output_size, "mma.sync") + pu_count_n(r->output, r->output_size, "wgmma.mma_async");
}

START_TEST(fwd_varlen_compiles)
{
    const FwdRow *row = &k_fwd[_i];
    const char *arch = row->sm == 90 ? "sm_90a" : "sm_80";
    RtAttnVariant fixed, varlen;
    fwd_variant(&fixed, row, false, _i % 2);
    fwd_variant(&varlen, row, true, _i % 2);
    KilnCompileResult a = compile_variant("lang/lib/attention_fwd.tile", &fixed, arch, KILN_EMIT_PTX);
    KilnCompileResult b = compile_variant("lang/lib/attention_fwd.tile", &varlen, arch, KILN_EMIT_PTX);
    int mma_a = count_mma(&a), mma_b = count_mma(&b);
    int cp_a = pu_count_n(a.output, a.output_size, "cp.async"), cp_b = pu_count_n(b.output, b.output_size, "cp.async");
    ck_assert_msg(mma_b > 0 && mma_b == mma_a, "%s d%d %s: %d tensor-core instructions, the fixed-length kernel %d",
                  varlen.kernel, row->d, arch, mma_b, mma_a);
    ck_assert_msg(cp_b == cp_a, "%s d%d %s: %d cp.async, the fixed-length kernel %d", varlen.kernel, row->d, arch,
                  cp_b, cp_a);
    kiln_compile_result_free(&a);
    kiln_compile_result_free(&b);
    assemble("lang/lib/attention_fwd.tile", &varlen, arch);
}
END_TEST

/* The backward's plan for a packed call: head dims 64, 128, 256 on each arch, both dQ paths. */
START_TEST(bwd_varlen_plan_compiles)
{
    static const int dims[] = {64, 128, 256};
    int d = dims[_i / 2];
    bool sm90 = _i % 2;
    for (int det = 0; det < 2; det++) {
        KilnAttentionBwdParams p = {.fwd = {.dtype = (_i / 2) % 2 ? KILN_BF16 : KILN_F16, .batch = 3, .heads_q = 4,
                                            .heads_kv = 2, .seqlen_q = 500, .seqlen_k = 700, .head_dim = d,
                                            .causal = det == 0, .cu_seqlens_q = 0x1000, .cu_seqlens_k = 0x2000,
                                            .total_q = 1000, .total_k = 1500},
                                    .deterministic = det};
        RtAttnBwdPlan plan;
        rt_attn_bwd_plan(sm90 ? 90 : 80, &p, &plan);
        ck_assert_int_eq(plan.n, 3);
        for (int k = 0; k < plan.n; k++) {
            ck_assert_ptr_nonnull(strstr(plan.k[k].kernel, "_varlen_"));
            assemble("lang/lib/attention_bwd.tile", &plan.k[k], sm90 ? "sm_90a" : "sm_80");
        }
    }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("attention_varlen_ptx");
    TCase *tc = tcase_create("ptx");
    tcase_set_timeout(tc, 900);
    tcase_add_loop_test(tc, fwd_varlen_compiles, 0, (int)(sizeof k_fwd / sizeof k_fwd[0]));
    tcase_add_loop_test(tc, bwd_varlen_plan_compiles, 0, 6);
    suite_add_tcase(s, tc);
    return s;
}

TU_MAIN(suite)
