/* test_e2e_attn_bwd_ptx.c — every kernel kiln_attention_bwd launches compiles for
 * sm_80 and sm_90a at the schedules the runtime picks (rt_attn_bwd_plan: the
 * tuning table of jit/attention_bwd.c), with the hints launch-time
 * specialisation adds for aligned tensors and strides that are multiples of 16,
 * to a cubin ptxas accepts (to PTX with an .entry when there is no ptxas).
 *
 * Each head dim is planned for both dQ paths (deterministic: preprocess, dK/dV,
 * dQ pass; atomic: preprocess zeroing the accumulator, dK/dV with atomic dQ,
 * conversion); dtype and causal alternate over the head dims to keep CI short.
 * test_e2e_ptxas.c already compiles every kernel at its defaults. Also: the plan's
 * launch order and grids, and the argument kiln_attention_bwd binds to every
 * parameter of every kernel it launches.
 */
#include "tests/testutil.h"
#include "tests/ptx_util.h"
#include "kiln.h"
#include "jit_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const int k_dims[] = {32, 64, 96, 128, 256};

/* Hints for every pointer and integer parameter of the kernel (from its signature). */
static int spec_hints(const char *src, const RtAttnVariant *v, KilnParamHint *h, int max)
{
    KilnCompileOptions o = {.kernel = v->kernel, .defines = v->defines, .ndefines = v->ndefines,
                            .emit = KILN_EMIT_IR};
    KilnCompileResult r;
    ck_assert_msg(kiln_compile("lang/lib/attention_bwd.tile", src, &o, &r) == KILN_OK, "%s", r.diagnostics);
    int n = 0;
    static char names[64][64];
    for (int i = 0; i < r.kernels[0].nparams && n < max; i++) {
        const KilnParam *p = &r.kernels[0].params[i];
        if (p->kind == KILN_PARAM_F32) continue;
        snprintf(names[n], sizeof names[n], "%s", p->name);
        h[n] = (KilnParamHint){names[n], 16, 0};
        n++;
    }
    kiln_compile_result_free(&r);
    return n;
}

/* The value of the integer define `name` of `v` (0 when absent). */
static int define_of(const RtAttnVariant *v, const char *name)
{
    for (int i = 0; i < v->ndefines; i++)
        if (!strcmp(v->defines[i].name, name)) return atoi(v->defines[i].value);
    return 0;
}

/* The sm_90a PTX of `v` at its plan's schedule, with `nh` hints. */
static void plan_ptx_sm90(const char *src, const RtAttnVariant *v, const KilnParamHint *hints, int nh,
                          KilnCompileResult *r)
{
    KilnCompileOptions o = {.kernel = v->kernel, .defines = v->defines, .ndefines = v->ndefines,
                            .arch = "sm_90a", .num_warps = v->num_warps, .num_stages = v->num_stages,
                            .hints = hints, .nhints = nh, .emit = KILN_EMIT_PTX};
    ck_assert_msg(kiln_compile("lang/lib/attention_bwd.tile", src, &o, r) == KILN_OK, "%s", r->diagnostics);
}

/* plan_ptx_sm90 with the launch-time hints spec_hints gives `v`. */
static void plan_ptx_sm90_hinted(const char *src, const RtAttnVariant *v, KilnCompileResult *r)
{
    KilnParamHint hints[64];
    int nh = spec_hints(src, v, hints, 64);
    plan_ptx_sm90(src, v, hints, nh, r);
}

START_TEST(plans_compile)
{
    int d = k_dims[_i / 2];
    bool sm90 = _i % 2;
    bool ptxas = pu_have_ptxas();
    const char *src = kiln_lib_source("lang/lib/attention_bwd.tile");
    ck_assert_ptr_nonnull(src);
    for (int det = 0; det < 2; det++) {
        KilnAttentionBwdParams p = {.fwd = {.dtype = (_i / 2) % 2 ? KILN_BF16 : KILN_F16, .batch = 1, .heads_q = 4,
                                            .heads_kv = 2, .seqlen_q = 500, .seqlen_k = 700, .head_dim = d,
                                            .causal = (_i / 2) % 2 == 0},
                                    .deterministic = det};
        RtAttnBwdPlan plan;
        rt_attn_bwd_plan(sm90 ? 90 : 80, &p, &plan);
        ck_assert_int_eq(plan.n, 3);
        for (int k = 0; k < plan.n; k++) {
            const RtAttnVariant *v = &plan.k[k];
            KilnParamHint hints[64];
            int nh = spec_hints(src, v, hints, 64);
            KilnCompileOptions o = {.kernel = v->kernel, .defines = v->defines, .ndefines = v->ndefines,
                                    .arch = sm90 ? "sm_90a" : "sm_80", .num_warps = v->num_warps,
                                    .num_stages = v->num_stages, .schedule = v->schedule, .hints = hints,
                                    .nhints = nh, .emit = ptxas ? KILN_EMIT_CUBIN : KILN_EMIT_PTX};
            KilnCompileResult r;
            KilnStatus st = kiln_compile("lang/lib/attention_bwd.tile", src, &o, &r);
            ck_assert_msg(st == KILN_OK, "d%d %s %s det=%d: %s\n%s", d, o.arch, v->kernel, det, kiln_status_name(st),
                          r.diagnostics ? r.diagnostics : "");
            if (ptxas)
                ck_assert_msg(r.output_size > 4 && memcmp(r.output, "\177ELF", 4) == 0, "%s: not a cubin", v->kernel);
            else
                ck_assert_int_gt(pu_count_n(r.output, r.output_size, ".entry"), 0);
            ck_assert_int_eq(r.nkernels, 1);
            /* warp specialisation adds its producer warpgroup */
            if (v->num_warps)
                ck_assert_int_eq(r.kernels[0].num_warps, v->num_warps + (v->schedule.warp_specialize > 0 ? 4 : 0));
            kiln_compile_result_free(&r);
        }
    }
}
END_TEST

/* The dK/dV kernel reads Q and dO per iteration as two dots' A and B operands
 * (dot(q, k^T), dot(ds^T, q)); the dQ kernel K and V. At the runtime's tiles
 * with num_stages = 2 (a caller's tuning; the program's own is 1: no gain was
 * measured on an H200), each such load is one cp.async copy into a pipelined
 * slot (pass_pipeline.c): cp.async in the PTX, which ptxas assembles. Before
 * loads with two operand uses were pipelined, the dK/dV kernel had none (each
 * use staged through st.shared). On sm_90a at d = 64 the dK/dV kernel reads
 * the same slot by ldmatrix (mma.sync A) and by wgmma descriptor (B; f16,
 * not causal, atomic dQ). The same with a block mask (128 x 128: the _bm kernels, their
 * copies pipelined through the lists' indirection), but for the atomic-dQ dK/dV kernel. */
START_TEST(loops_pipelined)
{
    int d = _i / 2 ? 128 : 64;
    bool sm90 = _i % 2;
    bool ptxas = pu_have_ptxas();
    const char *src = kiln_lib_source("lang/lib/attention_bwd.tile");
    ck_assert_ptr_nonnull(src);
    KilnBlockMask m = {.block_q = 128, .block_kv = 128, .batch = 1, .heads = 1};
    for (int det = 0; det < 4; det++) {
        bool bm = det >= 2;   /* with a block mask: the _bm kernels */
        KilnAttentionBwdParams p = {.fwd = {.dtype = det % 2 ? KILN_BF16 : KILN_F16, .batch = 1, .heads_q = 4,
                                            .heads_kv = 2, .seqlen_q = 500, .seqlen_k = 700, .head_dim = d,
                                            .causal = det % 2, .block_mask = bm ? &m : NULL},
                                    .deterministic = det % 2};
        RtAttnBwdPlan plan;
        rt_attn_bwd_plan(sm90 ? 90 : 80, &p, &plan);
        for (int k = 0; k < plan.n; k++) {
            const RtAttnVariant *v = &plan.k[k];
            if (strstr(v->kernel, "_pre_") || strstr(v->kernel, "_cvt_")) continue;
            /* not the block-mask dK/dV kernel with the atomic dQ (COMPUTE_DQ): its loops write
             * memory (atomic_add), so pass_pipeline.c does not replay the lists' index loads
             * ahead (sm_80's plan runs it at the program's 1 stage anyway) */
            bool unpiped = bm && !sm90 && det % 2 == 0 && strstr(v->kernel, "dkdv");
            KilnParamHint hints[64];
            int nh = spec_hints(src, v, hints, 64);
            for (int cubin = 0; cubin <= ptxas; cubin++) {
                KilnCompileOptions o = {.kernel = v->kernel, .defines = v->defines, .ndefines = v->ndefines,
                                        .arch = sm90 ? "sm_90a" : "sm_80", .num_warps = v->num_warps,
                                        .num_stages = 2, .hints = hints, .nhints = nh, .emit = cubin ? KILN_EMIT_CUBIN : KILN_EMIT_PTX};
                KilnCompileResult r;
                KilnStatus st = kiln_compile("lang/lib/attention_bwd.tile", src, &o, &r);
                ck_assert_msg(st == KILN_OK, "d%d %s %s: %s\n%s", d, o.arch, v->kernel, kiln_status_name(st),
                              r.diagnostics ? r.diagnostics : "");
                if (cubin) {
                    ck_assert_msg(r.output_size > 4 && memcmp(r.output, "\177ELF", 4) == 0, "%s: not a cubin", v->kernel);
                } else {
                    int copies = pu_count_n(r.output, r.output_size, "cp.async.cg.shared.global");
                    ck_assert_msg(unpiped || copies > 0, "d%d %s %s: no cp.async", d, o.arch, v->kernel);
                    ck_assert_int_gt(unpiped + pu_count_n(r.output, r.output_size, "cp.async.wait_group"), 0);
                    if (sm90 && d == 64 && det % 2 == 0 && strstr(v->kernel, "dkdv"))
                        ck_assert_int_gt(pu_count_n(r.output, r.output_size, "wgmma.mma_async"), 0);
                }
                kiln_compile_result_free(&r);
            }
        }
    }
}
END_TEST

/* The sm_90 plan of a 500 x 700 problem (4 query heads on 2 K/V heads) at head dim d. */
static void plan_sm90(int d, bool bf, bool causal, bool det, RtAttnBwdPlan *plan)
{
    KilnAttentionBwdParams p = {.fwd = {.dtype = bf ? KILN_BF16 : KILN_F16, .batch = 1, .heads_q = 4, .heads_kv = 2,
                                        .seqlen_q = 500, .seqlen_k = 700, .head_dim = d, .causal = causal},
                                .deterministic = det};
    rt_attn_bwd_plan(90, &p, plan);
}

/* Whether `v` is the dK/dV kernel or the dQ pass (*dkdv says which), not pre or cvt. */
static bool is_dot_kernel(const RtAttnVariant *v, bool *dkdv)
{
    *dkdv = strstr(v->kernel, "dkdv") != NULL;
    return *dkdv || strstr(v->kernel, "_dq_f16") || strstr(v->kernel, "_dq_bf16");
}

/* wgmma instructions of `ptx` whose A operand is in registers ("}, {" after the
 * accumulator list: wgmma.mma_async ... {d..}, {a0, a1, a2, a3}, desc_b, ...). */
static int wgmma_reg_a(const char *ptx, size_t n)
{
    int count = 0;
    const char *end = ptx + n;
    for (const char *p = ptx; p < end && (p = strstr(p, "wgmma.mma_async")); p++) {
        const char *eol = strchr(p, '\n'), *a = strstr(p, "}, {");
        count += a && (!eol || a < eol);
    }
    return count;
}

/* On sm_90a, at the runtime's plan (2 stages), every dot of the dK/dV and dQ kernels is a
 * wgmma (FlashAttention-2/3's transposed step: the keys are the dK/dV kernel's M), P^T and
 * dS^T are register A operands (never through SRAM: no ldmatrix, no mma.sync, and exactly
 * dV's and dK's wgmmas take A from registers) and Q, dO (K, V in the dQ pass) are cp.async
 * copies read by descriptors, transposed or not, from one slot. Per loop (masked and whole
 * blocks: two loops), with D the padded head dim and warps = BLOCK_N / 16 (one m64 block per
 * warpgroup): S^T = K Q^T and dP^T = V dO^T D / 16 k-steps each, dV += P^T dO and
 * dK += dS^T Q BLOCK_M / 16 each; the dQ pass S = Q K^T, dP = dO V^T D / 16, dQ += dS K
 * BLOCK_N / 16. (The atomic dQ's dS K is a wgmma too when BLOCK_M = 16 x warps:
 * atomic_dq_wgmma_sm90 below; with fewer rows it stays on mma.sync.) */
START_TEST(wgmma_at_sm90_plan)
{
    int d = (int[]){64, 96, 128}[_i / 2];
    int det = _i % 2, dpad = d == 96 ? 128 : d;
    const char *src = kiln_lib_source("lang/lib/attention_bwd.tile");
    RtAttnBwdPlan plan;
    plan_sm90(d, det, det, det, &plan);
    int checked = 0;
    for (int k = 0; k < plan.n; k++) {
        const RtAttnVariant *v = &plan.k[k];
        bool dkdv;
        if (!is_dot_kernel(v, &dkdv)) continue;
        int bm = define_of(v, "BLOCK_M"), bn = define_of(v, "BLOCK_N");
        ck_assert_int_eq(dkdv ? bn : bm, 16 * v->num_warps);   /* one m64 block per warpgroup */
        ck_assert_int_eq(v->num_stages, 2);
        KilnCompileResult r;
        plan_ptx_sm90_hinted(src, v, &r);
        const char *t = r.output;
        size_t n = r.output_size;
        int wg = pu_count_n(t, n, "wgmma.mma_async"), sync = pu_count_n(t, n, "mma.sync.aligned");
        int want = dkdv ? 2 * (2 * dpad / 16 + 2 * bm / 16) : 2 * (2 * dpad / 16 + bn / 16);
        ck_assert_msg(wg == want, "d%d %s: %d wgmma, want %d", d, v->kernel, wg, want);
        ck_assert_int_eq(wgmma_reg_a(t, n), dkdv ? 2 * 2 * bm / 16 : 2 * bn / 16);
        ck_assert_int_gt(pu_count_n(t, n, "cp.async.cg.shared.global"), 0);
        /* the sm_90 rows take the dQ pass for non-deterministic calls too (dq_pass) */
        ck_assert_msg(sync == 0, "d%d %s: %d mma.sync", d, v->kernel, sync);
        ck_assert_int_eq(pu_count_n(t, n, "ldmatrix"), 0);
        kiln_compile_result_free(&r);
        checked++;
    }
    ck_assert_int_eq(checked, 2);
}
END_TEST

/* The spill bytes stored of a cubin compile's report (-1 without one). */
static int spill_stores(const KilnCompileResult *r)
{
    const char *sp = r->stats ? strstr(r->stats, "spills: ") : NULL;
    return sp ? atoi(sp + strlen("spills: ")) : -1;
}

/* `v` as the runtime compiles it for sm_90a (its warps, stages, schedule, the launch's hints). */
static void compile_variant_sm90(const char *src, const RtAttnVariant *v, KilnEmit emit, KilnCompileResult *r)
{
    KilnParamHint hints[64];
    int nh = spec_hints(src, v, hints, 64);
    KilnCompileOptions o = {.kernel = v->kernel, .defines = v->defines, .ndefines = v->ndefines, .arch = "sm_90a",
                            .num_warps = v->num_warps, .num_stages = v->num_stages, .schedule = v->schedule,
                            .hints = hints, .nhints = nh, .emit = emit};
    ck_assert_msg(kiln_compile("lang/lib/attention_bwd.tile", src, &o, r) == KILN_OK, "%s", r->diagnostics);
}

/* The PTX of a warp-specialised kernel whose producer copies by TMA alone: 12 warps
 * (.maxntid 384), one setmaxnreg each way, `boxes` bulk tensor copies, no cp.async. */
static void assert_ws_tma_ptx(const char *t, size_t n, int boxes)
{
    ck_assert_int_eq(pu_count_n(t, n, ".maxntid 384, 1, 1"), 1);
    ck_assert_int_eq(pu_count_n(t, n, "setmaxnreg.dec"), 1);
    ck_assert_int_eq(pu_count_n(t, n, "setmaxnreg.inc"), 1);
    ck_assert_int_eq(pu_count_n(t, n, "cp.async.bulk.tensor"), boxes);
    ck_assert_int_eq(pu_count_n(t, n, "cp.async.cg.shared.global"), 0);
}

/* FlashAttention-3's dK/dV structure (the caller's 64 x 128 tiles on 8 warps, 2 stages, with
 * schedule warp_specialize + tma, as tools/bench/bench_attention_bwd.py's 64x128/8/2/ws/tma
 * asks): the plan's dK/dV kernel takes FLAT_GROUP, so both of its loops are the kernel body's
 * own and warp specialisation applies: 12 warps (.maxntid 384), one setmaxnreg each way (24 /
 * 240 where dK and dV take 128 registers a thread, d 96 and 128; 56 / 224 at d 64), the
 * producer's thread 0 copies Q and dO by TMA (2 loops x 2 tensors x D / 64 boxes, one
 * expect_tx arrival per loop), no cp.async left; every dot on wgmma as in
 * wgmma_at_sm90_plan. ptxas assembles it: no spill at d 64; at d 96 / 128 the masked loop's
 * index and LSE/delta registers spill a few words (36 bytes causal, 28 not; the bound
 * guards against more). The dQ pass at 128 x 64 / 8 (the dq_ fields) takes the same options
 * unchanged: 12 warps, TMA maps of K and V in both loops, no spill. */
START_TEST(fa3_dkdv_ws_tma_sm90)
{
    int d = (int[]){64, 96, 128}[_i / 2];
    bool causal = _i % 2, ptxas = pu_have_ptxas();
    int dpad = d == 96 ? 128 : d;
    const char *src = kiln_lib_source("lang/lib/attention_bwd.tile");
    KilnAttentionBwdParams p = {.fwd = {.dtype = causal ? KILN_BF16 : KILN_F16, .batch = 1, .heads_q = 4,
                                        .heads_kv = 2, .seqlen_q = 500, .seqlen_k = 700, .head_dim = d,
                                        .causal = causal},
                                .deterministic = 1, .block_m = 64, .block_n = 128, .num_warps = 8, .num_stages = 2,
                                /* FA3's 24 / 240 split where dK, dV fill the consumers (--lean-producer) */
                                .schedule = {.warp_specialize = 1, .tma = 1, .lean_producer = d > 64},
                                .dq_block_m = 128, .dq_block_n = 64};   /* dq_num_warps 0: num_warps */
    RtAttnBwdPlan plan;
    rt_attn_bwd_plan(90, &p, &plan);
    const RtAttnVariant *v = &plan.k[1];
    ck_assert_str_eq(v->kernel, causal ? "attn_bwd_dkdv_bf16" : "attn_bwd_dkdv_f16");
    ck_assert_int_eq(define_of(v, "BLOCK_N"), 128);
    ck_assert_int_eq(v->schedule.warp_specialize + v->schedule.tma + v->schedule.mbarrier, 3);
    ck_assert_int_eq(v->schedule.lean_producer, d > 64);
    bool flat = false;
    for (int i = 0; i < v->ndefines; i++) flat |= !strcmp(v->defines[i].name, "FLAT_GROUP") && !strcmp(v->defines[i].value, "true");
    ck_assert(flat);
    for (int cubin = 0; cubin <= ptxas; cubin++) {
        KilnCompileResult r;
        compile_variant_sm90(src, v, cubin ? KILN_EMIT_CUBIN : KILN_EMIT_PTX, &r);
        ck_assert_int_eq(r.kernels[0].num_warps, 12);
        const char *want = d == 64 ? "(setmaxnreg 56), 8 consumer warps (setmaxnreg 224)"
                                   : "(setmaxnreg 24), 8 consumer warps (setmaxnreg 240)";
        ck_assert_msg(r.stats && strstr(r.stats, want), "d%d: %s", d, r.stats);
        if (cubin) {
            int sp = spill_stores(&r);
            ck_assert_msg(sp >= 0 && sp <= (d == 64 ? 0 : 40), "d%d causal %d: %d bytes of spill stores", d, causal, sp);
        } else {
            const char *t = r.output;
            size_t n = r.output_size;
            assert_ws_tma_ptx(t, n, 2 * 2 * dpad / 64);
            ck_assert_int_eq(pu_count_n(t, n, "mbarrier.arrive.expect_tx"), 2);
            ck_assert_int_eq(pu_count_n(t, n, "wgmma.mma_async"), 2 * (2 * dpad / 16 + 2 * 64 / 16));
            ck_assert_int_eq(pu_count_n(t, n, "mma.sync.aligned"), 0);
        }
        kiln_compile_result_free(&r);
    }
    /* the dQ pass (the dq_ fields: 128 x 64, the caller's 8 warps and 2 stages): Q, dO resident,
     * K and V streamed by the producer's TMA; the row-wise kernels take its 128-row blocks */
    const RtAttnVariant *q = &plan.k[2];
    ck_assert_str_eq(q->kernel, causal ? "attn_bwd_dq_bf16" : "attn_bwd_dq_f16");
    ck_assert_int_eq(define_of(q, "BLOCK_M") * 100 + define_of(q, "BLOCK_N"), 12864);
    ck_assert_int_eq(define_of(&plan.k[0], "BLOCK_M"), 128);
    ck_assert_int_eq(q->num_warps * 10 + q->num_stages, 82);
    ck_assert_int_eq(q->schedule.warp_specialize + q->schedule.tma, 2);
    ck_assert_int_eq(plan.grid[2][0], (500 + 127) / 128);
    KilnCompileResult r;
    compile_variant_sm90(src, q, ptxas ? KILN_EMIT_CUBIN : KILN_EMIT_PTX, &r);
    ck_assert_int_eq(r.kernels[0].num_warps, 12);
    ck_assert_int_eq(r.kernels[0].ntmaps, 4);
    if (ptxas) ck_assert_int_eq(spill_stores(&r), 0);
    kiln_compile_result_free(&r);
}
END_TEST

/* Head dim 256 on sm_90a (the table's 64 x 64 on 8 warps, 2 stages, both kernels): every
 * dot on wgmma with two warpgroup columns (#mma<C, wm=4, wn=2, rn>, FlashAttention-3's
 * hdim 256 backward): each warpgroup issues one m64n(N/2)k16 per k step, so per loop (two
 * loops) S^T and dP^T (dQ pass: S and dP) are m64n32k16 x 256 / 16 each and dV, dK (dQ)
 * m64n128k16 x 64 / 16 each. P^T, dS^T (dS) reach the next dots through SRAM as both
 * warpgroups' A operand: no register A, no ldmatrix, no mma.sync; Q, dO (K, V) are
 * cp.async copies read by descriptors. ptxas (sm_90a): the dQ pass spills nothing; the
 * dK/dV kernel, dK and dV holding 128 of its 255 registers, stores at most 192 bytes of
 * spills (132 measured, f16 and bf16; 80 causal; 396 before the descriptors were pinned at
 * their dots, cg_dot_wgmma.c pin_desc). Each kernel's ptxas line is printed. */
START_TEST(wgmma_d256_sm90)
{
    bool bf = _i % 2, causal = _i / 2;
    const char *src = kiln_lib_source("lang/lib/attention_bwd.tile");
    RtAttnBwdPlan plan;
    plan_sm90(256, bf, causal, _i == 1, &plan);
    int checked = 0;
    for (int k = 0; k < plan.n; k++) {
        const RtAttnVariant *v = &plan.k[k];
        bool dkdv;
        if (!is_dot_kernel(v, &dkdv)) continue;
        ck_assert_int_eq(define_of(v, "BLOCK_M"), 64);
        ck_assert_int_eq(define_of(v, "BLOCK_N"), 64);
        ck_assert_int_eq(v->num_warps, 8);
        KilnCompileResult r;
        plan_ptx_sm90_hinted(src, v, &r);
        const char *t = r.output;
        size_t n = r.output_size;
        const char *ty = bf ? "bf16.bf16" : "f16.f16";
        char n32[96], n128[96];
        snprintf(n32, sizeof n32, "wgmma.mma_async.sync.aligned.m64n32k16.f32.%s", ty);
        snprintf(n128, sizeof n128, "wgmma.mma_async.sync.aligned.m64n128k16.f32.%s", ty);
        ck_assert_int_eq(pu_count_n(t, n, n32), 2 * 2 * 256 / 16);
        ck_assert_int_eq(pu_count_n(t, n, n128), 2 * (dkdv ? 2 : 1) * 64 / 16);
        ck_assert_int_eq(pu_count_n(t, n, "wgmma.mma_async"), pu_count_n(t, n, n32) + pu_count_n(t, n, n128));
        ck_assert_int_eq(wgmma_reg_a(t, n), 0);
        ck_assert_int_eq(pu_count_n(t, n, "mma.sync.aligned"), 0);
        ck_assert_int_eq(pu_count_n(t, n, "ldmatrix"), 0);
        ck_assert_int_gt(pu_count_n(t, n, "cp.async.cg.shared.global"), 0);
        kiln_compile_result_free(&r);
        checked++;
        if (!pu_have_ptxas()) continue;
        KilnParamHint hints[64];
        int nh = spec_hints(src, v, hints, 64);
        KilnCompileOptions o = {.kernel = v->kernel, .defines = v->defines, .ndefines = v->ndefines,
                                .arch = "sm_90a", .num_warps = v->num_warps, .num_stages = v->num_stages,
                                .hints = hints, .nhints = nh, .emit = KILN_EMIT_CUBIN};
        ck_assert_msg(kiln_compile("lang/lib/attention_bwd.tile", src, &o, &r) == KILN_OK, "%s", r.diagnostics);
        const char *sp = r.stats ? strstr(r.stats, "spills: ") : NULL;
        ck_assert_msg(sp, "%s: no ptxas report", v->kernel);
        printf("d256 %s%s: %s", v->kernel, causal ? " causal" : "", strstr(r.stats, "registers:"));
        if (dkdv) ck_assert_msg(atoi(sp + 8) <= 192, "%s: %s", v->kernel, r.stats);
        else pu_assert_no_spills(&r, v->kernel);
        kiln_compile_result_free(&r);
    }
    ck_assert_int_eq(checked, 2);
}
END_TEST

/* The atomic dQ (COMPUTE_DQ) at the sm_90 rows' tiles (a caller's 64 x 64 / 4 warps / 2 stages:
 * the non-deterministic call then takes it): dQ += dS K is a wgmma like the four dots of the
 * dK/dV step (A = dS^T staged once through SRAM and read transposed by its descriptor, B = the
 * K tile already in SRAM: BLOCK_N / 16 k-steps per loop), nothing is on mma.sync, and the
 * partial dQ goes from the accumulator straight to DQ_ACC as red.global.add.v2.f32 (each
 * thread's two adjacent columns per n8 tile; PTX ISA 8.1): no scalar red, no SRAM round trip.
 * On sm_80 (no vector red) the red stays scalar and the module stays PTX 8.0. */
START_TEST(atomic_dq_wgmma_sm90)
{
    int d = _i / 2 ? 128 : 64;
    bool sm90 = _i % 2;
    const char *src = kiln_lib_source("lang/lib/attention_bwd.tile");
    KilnAttentionBwdParams p = {.fwd = {.dtype = d == 64 ? KILN_F16 : KILN_BF16, .batch = 1, .heads_q = 4,
                                        .heads_kv = 2, .seqlen_q = 500, .seqlen_k = 700, .head_dim = d,
                                        .causal = d == 128},
                                .block_m = 64, .block_n = 64, .num_warps = 4, .num_stages = 2};
    RtAttnBwdPlan plan;
    rt_attn_bwd_plan(sm90 ? 90 : 80, &p, &plan);
    const RtAttnVariant *v = &plan.k[1];
    ck_assert_ptr_nonnull(strstr(v->kernel, "dkdv"));
    bool compute_dq = false;
    for (int i = 0; i < v->ndefines; i++)
        compute_dq |= !strcmp(v->defines[i].name, "COMPUTE_DQ") && !strcmp(v->defines[i].value, "true");
    ck_assert(compute_dq);
    ck_assert_str_eq(plan.k[2].kernel, d == 64 ? "attn_bwd_dq_cvt_f16" : "attn_bwd_dq_cvt_bf16");
    KilnParamHint hints[64];
    int nh = spec_hints(src, v, hints, 64);
    KilnCompileOptions o = {.kernel = v->kernel, .defines = v->defines, .ndefines = v->ndefines,
                            .arch = sm90 ? "sm_90a" : "sm_80", .num_warps = v->num_warps,
                            .num_stages = v->num_stages, .hints = hints, .nhints = nh, .emit = KILN_EMIT_PTX};
    KilnCompileResult r;
    ck_assert_msg(kiln_compile("lang/lib/attention_bwd.tile", src, &o, &r) == KILN_OK, "%s", r.diagnostics);
    const char *t = r.output;
    size_t n = r.output_size;
    /* per loop (masked and whole blocks): 64 x d of f32 over 128 threads, two per red */
    int reds_v2 = pu_count_n(t, n, "red.global.gpu.add.v2.f32");
    int reds = pu_count_n(t, n, "red.global.gpu.add.");
    if (sm90) {
        int wg = pu_count_n(t, n, "wgmma.mma_async");
        int want = 2 * (2 * d / 16 + 2 * 64 / 16 + 64 / 16);
        ck_assert_msg(wg == want, "d%d: %d wgmma, want %d", d, wg, want);
        ck_assert_int_eq(pu_count_n(t, n, "mma.sync.aligned"), 0);
        ck_assert_int_eq(pu_count_n(t, n, "ldmatrix"), 0);
        ck_assert_int_eq(wgmma_reg_a(t, n), 2 * 2 * 64 / 16);   /* dV's and dK's: dS K reads A from SRAM */
        ck_assert_int_eq(reds_v2, 2 * 64 * d / 128 / 2);
        ck_assert_int_eq(reds, reds_v2);
        ck_assert_int_eq(pu_count_n(t, n, ".version 8.1"), 1);
    } else {
        ck_assert_int_eq(reds_v2, 0);
        ck_assert_int_gt(reds, 0);
        ck_assert_int_eq(pu_count_n(t, n, ".version 8.0"), 1);
    }
    kiln_compile_result_free(&r);
    if (!pu_have_ptxas()) return;
    o.emit = KILN_EMIT_CUBIN;   /* ptxas takes the 8.1 module and its vector reds */
    ck_assert_msg(kiln_compile("lang/lib/attention_bwd.tile", src, &o, &r) == KILN_OK, "%s", r.diagnostics);
    ck_assert_msg(r.output_size > 4 && memcmp(r.output, "\177ELF", 4) == 0, "d%d: not a cubin", d);
    kiln_compile_result_free(&r);
}
END_TEST

/* From each pipelined loop's mbarrier.init (the consumers': the producer initialises none) to
 * its mbarrier.inval: the CTA barriers (bar.sync 0, which the producer warpgroup also reaches)
 * and the consumers' named barriers (bar.sync 1, 256) on the way. Returns the loops seen. */
static int ring_barriers(const char *ptx, int *cta, int *named, int max)
{
    int n = 0;
    for (const char *p = strstr(ptx, "mbarrier.init"); p && n < max; n++) {
        const char *inval = strstr(p, "mbarrier.inval");
        ck_assert_ptr_nonnull(inval);
        cta[n] = named[n] = 0;
        for (const char *b = strstr(p, "bar.sync \t0;"); b && b < inval; b = strstr(b + 1, "bar.sync \t0;")) cta[n]++;
        for (const char *b = strstr(p, "bar.sync 1, 256;"); b && b < inval; b = strstr(b + 1, "bar.sync 1, 256;"))
            named[n]++;
        p = strstr(strstr(inval, "}"), "mbarrier.init");
    }
    return n;
}

/* FlashAttention-3's structure where the loop body has SRAM buffers of its own (sram-alloc keeps
 * the mbarrier ring under warp_specialize): the atomic dQ (COMPUTE_DQ: dS^T staged through SRAM
 * as the dS K dot's A operand, dQ added to DQ_ACC by red.global.add.v2.f32 from the accumulator)
 * at the caller's 64 x 128 / 8 warps / 2 stages, and head dim 256 (P^T, dS^T as both
 * warpgroups' A operand; the dK/dV kernel and the dQ pass, and the atomic dQ) at 64 x 64 / 8 / 2, each with
 * warp_specialize + tma + lean_producer (tools/device_bench_bwd.sh's candidates
 * 64x128/8/2/ws/tma/lp and 64x64/8/2/ws/tma/lp). Each kernel: 12 warps, one setmaxnreg each way
 * (24 / 240), the producer's TMA copies of Q and dO (K and V in the dQ pass: 2 loops x 2 tensors
 * x D / 64 boxes), no cp.async; per loop the ring (2 S mbarriers initialised and invalidated),
 * the init's and the drain's CTA barriers only (none per iteration: the producer reaches no
 * other), and the consumers' named barriers around the body's buffers;
 * the wgmma counts of the step (the atomic dQ's dS K at d 64 stays on mma.sync: N = 32 a
 * warpgroup) and the reds. ptxas assembles each and its registers / spills are printed, the
 * spills bounded (measured: atomic dQ d 64 none, d 128 148 bytes, 240 causal, d 256 108 causal;
 * d 256 dK/dV 4, causal too, since its FLAT_GROUP loops read delta after dP^T (DELTA_LATE; 12
 * and 44 bytes with delta read before); the d 256 dQ pass none). */
START_TEST(fa3_ws_body_buffers_sm90)
{
    static const struct { int d; bool causal, atomic; int bn, spill_max; } k_cases[] = {
        {64, false, true, 128, 0}, {128, true, true, 128, 256}, {128, false, true, 128, 160},
        {256, false, false, 64, 8}, {256, true, false, 64, 8}, {256, true, true, 64, 128},
    };
    int d = k_cases[_i].d, bn = k_cases[_i].bn;
    bool causal = k_cases[_i].causal, atomic = k_cases[_i].atomic, ptxas = pu_have_ptxas();
    const char *src = kiln_lib_source("lang/lib/attention_bwd.tile");
    KilnAttentionBwdParams p = {.fwd = {.dtype = causal ? KILN_BF16 : KILN_F16, .batch = 1, .heads_q = 4,
                                        .heads_kv = 2, .seqlen_q = 500, .seqlen_k = 700, .head_dim = d,
                                        .causal = causal},
                                .deterministic = !atomic, .block_m = 64, .block_n = bn, .num_warps = 8,
                                .num_stages = 2, .schedule = {.warp_specialize = 1, .tma = 1, .lean_producer = 1}};
    RtAttnBwdPlan plan;
    rt_attn_bwd_plan(90, &p, &plan);
    ck_assert_int_eq(plan.dq_acc, atomic);
    int checked = 0;
    for (int k = 0; k < plan.n; k++) {
        const RtAttnVariant *v = &plan.k[k];
        bool dkdv;
        if (!is_dot_kernel(v, &dkdv)) continue;
        for (int i = 0; dkdv && i < v->ndefines; i++)
            if (!strcmp(v->defines[i].name, "COMPUTE_DQ")) ck_assert_str_eq(v->defines[i].value, atomic ? "true" : "false");
        for (int cubin = 0; cubin <= ptxas; cubin++) {
            KilnCompileResult r;
            compile_variant_sm90(src, v, cubin ? KILN_EMIT_CUBIN : KILN_EMIT_PTX, &r);
            ck_assert_int_eq(r.kernels[0].num_warps, 12);
            ck_assert_msg(r.stats && strstr(r.stats, "(setmaxnreg 24), 8 consumer warps (setmaxnreg 240)"),
                          "%s d%d: %s", v->kernel, d, r.stats);
            if (cubin) {
                const char *regs = strstr(r.stats, "registers:");
                printf("ws %s d%d%s%s: %s", v->kernel, d, causal ? " causal" : "", atomic ? " atomic dQ" : "",
                       regs ? regs : r.stats);
                int sp = spill_stores(&r);
                ck_assert_msg(sp >= 0 && sp <= (dkdv ? k_cases[_i].spill_max : 0), "%s d%d causal %d: %d bytes of "
                              "spill stores", v->kernel, d, causal, sp);
                kiln_compile_result_free(&r);
                continue;
            }
            const char *t = r.output;
            size_t n = r.output_size;
            assert_ws_tma_ptx(t, n, 2 * 2 * d / 64);
            ck_assert_int_eq(pu_count_n(t, n, "setmaxnreg.dec.sync.aligned.u32 24;"), 1);
            ck_assert_int_eq(pu_count_n(t, n, "setmaxnreg.inc.sync.aligned.u32 240;"), 1);
            ck_assert_int_eq(pu_count_n(t, n, "cp.async.wait_group"), 0);
            ck_assert_int_eq(pu_count_n(t, n, "mbarrier.init.shared"), 2 * 2 * 2);
            ck_assert_int_eq(pu_count_n(t, n, "mbarrier.inval.shared"), 2 * 2 * 2);
            int cta[4], named[4];
            ck_assert_int_eq(ring_barriers(t, cta, named, 4), 2);
            for (int l = 0; l < 2; l++) {
                /* the init's (publishing the barriers) and the drain's: none per iteration */
                ck_assert_msg(cta[l] == 2, "%s loop %d: %d CTA barriers in the ring", v->kernel, l, cta[l]);
                ck_assert_msg(named[l] >= 2, "%s loop %d: %d named barriers", v->kernel, l, named[l]);
            }
            int wg = pu_count_n(t, n, "wgmma.mma_async");
            int want = d == 256 ? 2 * 2 * 256 / 16 + 2 * (dkdv ? 2 : 1) * 64 / 16    /* as wgmma_d256_sm90 */
                                : 2 * (2 * d / 16 + 2 * 64 / 16);
            want += atomic && d > 64 ? 2 * bn / 16 : 0;   /* dQ = dS K: BN / 16 k-steps a loop */
            ck_assert_msg(wg == want, "%s d%d: %d wgmma, want %d", v->kernel, d, wg, want);
            ck_assert_int_eq(pu_count_n(t, n, "mma.sync.aligned") > 0, atomic && d == 64);
            int reds_v2 = pu_count_n(t, n, "red.global.gpu.add.v2.f32");
            ck_assert_int_eq(reds_v2, atomic ? 2 * 64 * d / 256 / 2 : 0);   /* per loop: 64 x d f32, 256 threads */
            ck_assert_int_eq(pu_count_n(t, n, "red.global"), reds_v2);
            kiln_compile_result_free(&r);
        }
        checked++;
    }
    ck_assert_int_eq(checked, atomic ? 1 : 2);
}
END_TEST

/* The dK/dV step reads the per-query LSE and delta of its BLOCK_M queries against S^T
 * (keys down: [None, :]), in the slice of the wgmma accumulator layout along its rows: each
 * thread holds the columns 2t + {0, 1} + 8j, once per row repeat (rows g and g + 8). Each
 * array is read once per step (not once per use: pass_remove_convert.c merges the two
 * conversions of LSE before rematerialising its load), each column once per thread
 * (cg_memory.c: copies take the first copy's registers), and, when seqlen_q is a multiple
 * of 16 (the launch-time hint: the mask `rows < seqlen_q` is then constant over pairs, and
 * the rows' start 8-byte aligned) as ld.global.v2, one per pair: BLOCK_M / 8 per array and
 * loop (two loops), where before there were 3 x BLOCK_M / 2 scalar loads per loop. Whole
 * query blocks read them unmasked (plain loads, ld.global.v2.f32 off one address), the
 * masked loop predicated (ld.global.v2.b32). Without the hint: BLOCK_M / 4 scalar loads per
 * array and loop. Each is issued where the program reads it, LSE before S^T's wgmmas and
 * delta before dP^T's (pass_remove_convert.c keeps a reloaded load at its place), so their
 * latency overlaps the tensor cores. The K and V loads before the loops are the only others. */
START_TEST(lse_delta_loads)
{
    int d = _i / 2 ? 128 : 64;
    bool hinted = _i % 2;
    const char *src = kiln_lib_source("lang/lib/attention_bwd.tile");
    KilnAttentionBwdParams p = {.fwd = {.dtype = KILN_F16, .batch = 1, .heads_q = 4, .heads_kv = 2,
                                        .seqlen_q = 512, .seqlen_k = 700, .head_dim = d, .causal = d == 128}};
    RtAttnBwdPlan plan;
    rt_attn_bwd_plan(90, &p, &plan);
    const RtAttnVariant *v = &plan.k[1];
    ck_assert_ptr_nonnull(strstr(v->kernel, "dkdv"));
    int bm = define_of(v, "BLOCK_M");
    KilnParamHint hints[64];
    int nh = spec_hints(src, v, hints, 64);
    for (int i = 0; !hinted && i < nh; i++)
        if (!strcmp(hints[i].name, "seqlen_q")) hints[i--] = hints[--nh];
    KilnCompileResult r;
    plan_ptx_sm90(src, v, hints, nh, &r);
    const char *t = r.output;
    size_t n = r.output_size;
    int v2_masked = pu_count_n(t, n, "ld.global.v2.b32"), v2_plain = pu_count_n(t, n, "ld.global.v2.f32");
    int scalar = pu_count_n(t, n, "ld.global.b32") + pu_count_n(t, n, "ld.global.f32");
    int kv = pu_count_n(t, n, "ld.global.v4.b32"), all = pu_count_n(t, n, "ld.global");
    ck_assert_msg(v2_masked == (hinted ? 2 * bm / 8 : 0) && v2_plain == v2_masked, "d%d: %d + %d ld.global.v2", d,
                  v2_masked, v2_plain);
    ck_assert_msg(scalar == (hinted ? 0 : 2 * 2 * bm / 4), "d%d: %d scalar ld.global", d, scalar);
    ck_assert_int_eq(all, v2_masked + v2_plain + scalar + kv);
    ck_assert_int_eq(kv, 2 * 64 * d / 128 / 8);   /* K and V: 16 bytes each, before the loops */
    /* in each loop: LSE's loads before the first wgmma, delta's between the second dot's wait
     * and the third dot (dP^T) */
    const char *loop = strstr(t, "ld.global.v2.b32");
    if (hinted) {
        ck_assert_ptr_nonnull(loop);
        const char *wg = strstr(loop, "wgmma.mma_async"), *w1 = strstr(wg, "wgmma.wait_group");
        const char *w2 = strstr(w1 + 1, "wgmma.wait_group"), *delta = strstr(w2, "ld.global.v2.b32");
        ck_assert_ptr_nonnull(delta);
        ck_assert_msg(delta < strstr(w2, "wgmma.mma_async"), "d%d: delta read after dP^T's wgmma", d);
    }
    kiln_compile_result_free(&r);
}
END_TEST

/* The plan's launches: order, grids and the flags that pick the dQ path. */
START_TEST(plan_shapes)
{
    KilnAttentionBwdParams p = {.fwd = {.dtype = KILN_BF16, .batch = 3, .heads_q = 8, .heads_kv = 2,
                                        .seqlen_q = 100, .seqlen_k = 300, .head_dim = 128, .causal = 1}};
    RtAttnBwdPlan pl;
    rt_attn_bwd_plan(80, &p, &pl);
    ck_assert_int_eq(pl.n, 3);
    ck_assert_str_eq(pl.k[0].kernel, "attn_bwd_pre_bf16");
    ck_assert_str_eq(pl.k[1].kernel, "attn_bwd_dkdv_bf16");
    ck_assert_str_eq(pl.k[2].kernel, "attn_bwd_dq_cvt_bf16");   /* sm_80: the atomic dQ */
    rt_attn_bwd_plan(90, &p, &pl);   /* sm_90's row: the dQ pass, non-deterministic call or not */
    ck_assert_str_eq(pl.k[2].kernel, "attn_bwd_dq_bf16");
    p.block_m = 64, p.block_n = 64;   /* the caller's tiles: what it asked for, the atomic dQ */
    rt_attn_bwd_plan(90, &p, &pl);
    ck_assert_str_eq(pl.k[2].kernel, "attn_bwd_dq_cvt_bf16");
    p.block_m = 0, p.block_n = 0;
    rt_attn_bwd_plan(90, &p, &pl);
    ck_assert_int_eq(pl.grid[1][1], 3 * 2);   /* one program per K/V head */
    ck_assert_int_eq(pl.grid[0][1], 3 * 8);
    p.deterministic = 1;
    p.block_m = 32, p.block_n = 16;
    rt_attn_bwd_plan(90, &p, &pl);
    ck_assert_str_eq(pl.k[2].kernel, "attn_bwd_dq_bf16");
    ck_assert_int_eq(pl.grid[1][0], (300 + 15) / 16);
    ck_assert_int_eq(pl.grid[2][0], (100 + 31) / 32);
    bool compute_dq_false = false;
    for (int i = 0; i < pl.k[1].ndefines; i++)
        compute_dq_false |= !strcmp(pl.k[1].defines[i].name, "COMPUTE_DQ") && !strcmp(pl.k[1].defines[i].value, "false");
    ck_assert(compute_dq_false);
    p.fwd.seqlen_q = 0;   /* no rows: only dK/dV (zeros) */
    rt_attn_bwd_plan(80, &p, &pl);
    ck_assert_int_eq(pl.n, 1);
    ck_assert_str_eq(pl.k[0].kernel, "attn_bwd_dkdv_bf16");
    p.fwd.seqlen_q = 10, p.fwd.seqlen_k = 0;   /* no keys: no dK/dV program */
    rt_attn_bwd_plan(80, &p, &pl);
    ck_assert_int_eq(pl.n, 2);
    ck_assert_str_eq(pl.k[1].kernel, "attn_bwd_dq_bf16");
}
END_TEST

/* What kiln_attention_bwd passes for each parameter of each kernel it launches, checked
 * against the names' meaning written out independently here: every pointer, stride and
 * scalar, with distinct values so that a swapped binding shows. */
START_TEST(binds_every_parameter)
{
    const char *src = kiln_lib_source("lang/lib/attention_bwd.tile");
    KilnAttentionBwdParams p = {
        .fwd = {.dtype = KILN_BF16, .batch = 2, .heads_q = 6, .heads_kv = 3, .seqlen_q = 77, .seqlen_k = 91,
                .head_dim = 96, .q = 0x10000, .k = 0x20000, .v = 0x30000, .o = 0x40000, .lse = 0x50000,
                .q_stride = {101, 102, 103}, .k_stride = {201, 202, 203}, .v_stride = {301, 302, 303},
                .o_stride = {401, 402, 403}, .causal = 1},
        .dout = 0x60000, .dq = 0x70000, .dk = 0x80000, .dv = 0x90000, .scratch = 0xa0000,
        .dout_stride = {501, 502, 503}, .dq_stride = {601, 602, 603}, .dk_stride = {701, 702, 703},
        .dv_stride = {801, 802, 803}};
    struct { const char *name; uint64_t v; } want[] = {
        {"Q", 0x10000}, {"K", 0x20000}, {"V", 0x30000}, {"O", 0x40000}, {"LSE", 0x50000}, {"DO", 0x60000},
        {"DQ", 0x70000}, {"DK", 0x80000}, {"DV", 0x90000}, {"DELTA", 0xa0000},
        {"DQ_ACC", 0},   /* per dQ path, below */
        {"stride_qb", 101}, {"stride_qh", 102}, {"stride_qm", 103}, {"stride_kb", 201}, {"stride_kh", 202},
        {"stride_kn", 203}, {"stride_vb", 301}, {"stride_vh", 302}, {"stride_vn", 303}, {"stride_ob", 401},
        {"stride_oh", 402}, {"stride_om", 403}, {"stride_dob", 501}, {"stride_doh", 502}, {"stride_dom", 503},
        {"stride_dqb", 601}, {"stride_dqh", 602}, {"stride_dqm", 603}, {"stride_dkb", 701}, {"stride_dkh", 702},
        {"stride_dkn", 703}, {"stride_dvb", 801}, {"stride_dvh", 802}, {"stride_dvn", 803},
        {"heads", 6}, {"heads_kv", 3}, {"seqlen_q", 77}, {"seqlen_k", 91}};
    int bound = 0;
    for (int det = 0; det < 2; det++) {
        p.deterministic = det;
        /* atomic: the accumulator after DELTA; deterministic: none, the
         * scratch itself (only a valid address; the kernels leave it alone) */
        want[10].v = det ? 0xa0000 : 0xa0000 + (2 * 6 * 77 * 4 + 255) / 256 * 256;
        RtAttnBwdPlan plan;
        rt_attn_bwd_plan(90, &p, &plan);
        for (int k = 0; k < plan.n; k++) {
            KilnCompileOptions o = {.kernel = plan.k[k].kernel, .defines = plan.k[k].defines,
                                    .ndefines = plan.k[k].ndefines, .emit = KILN_EMIT_IR};
            KilnCompileResult r;
            ck_assert_msg(kiln_compile("lang/lib/attention_bwd.tile", src, &o, &r) == KILN_OK, "%s", r.diagnostics);
            for (int i = 0; i < r.kernels[0].nparams; i++) {
                const KilnParam *prm = &r.kernels[0].params[i];
                KilnArg a;
                ck_assert_msg(rt_attn_bwd_arg(&p, prm, &a) == KILN_OK, "%s: %s: %s", o.kernel, prm->name,
                              kiln_last_error());
                if (!strcmp(prm->name, "sm_scale")) {
                    ck_assert(a.kind == KILN_PARAM_F32 && a.v.f32 == (float)(1.0 / sqrt(96.0)));
                    bound++;
                    continue;
                }
                size_t j = 0;
                while (j < sizeof want / sizeof want[0] && strcmp(want[j].name, prm->name)) j++;
                ck_assert_msg(j < sizeof want / sizeof want[0], "%s: unexpected parameter %s", o.kernel, prm->name);
                uint64_t got = a.kind == KILN_PARAM_PTR ? a.v.ptr : (uint64_t)a.v.i;
                ck_assert_msg(got == want[j].v, "%s: %s = %llu, want %llu", o.kernel, prm->name,
                              (unsigned long long)got, (unsigned long long)want[j].v);
                bound++;
            }
            kiln_compile_result_free(&r);
        }
    }
    ck_assert_int_gt(bound, 100);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("attention_bwd_ptx");
    TCase *tc = tcase_create("ptx");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, plans_compile, 0, 2 * (int)(sizeof k_dims / sizeof k_dims[0]));
    tcase_add_loop_test(tc, loops_pipelined, 0, 4);
    tcase_add_loop_test(tc, wgmma_at_sm90_plan, 0, 6);
    tcase_add_loop_test(tc, wgmma_d256_sm90, 0, 4);
    tcase_add_loop_test(tc, fa3_dkdv_ws_tma_sm90, 0, 6);
    tcase_add_loop_test(tc, atomic_dq_wgmma_sm90, 0, 4);
    tcase_add_loop_test(tc, fa3_ws_body_buffers_sm90, 0, 6);
    tcase_add_loop_test(tc, lse_delta_loads, 0, 4);
    tcase_add_test(tc, plan_shapes);
    tcase_add_test(tc, binds_every_parameter);
    suite_add_tcase(s, tc);
    return s;
}

TU_MAIN(suite)
