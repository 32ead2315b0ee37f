/* test_e2e_tma_ptx.c — the schedule option `tma` (pass_tma.c marks the loads,
 * cg_tma.c lowers them, the compile result carries each tensor map's recipe):
 *   - tools/bench/matmul_tc.tile (f16, bf16): every pipelined copy is a
 *     cp.async.bulk.tensor.2d (one per 128-byte-wide box: A one, B's 256
 *     columns four), one expect_tx arrival per issue with the bytes of all
 *     boxes, no cp.async chunks, the full barriers counting one arrival, two
 *     `.param .align 64 .b8 [128]` map parameters after the program's, and
 *     a prefetch.tensormap each;
 *   - the recipes in KilnKernelInfo.tmaps: base pointer, dims (M from the
 *     runtime parameter, K and N constants), row strides in bytes, boxes;
 *   - examples/matmul.tile with runtime strides (stride_ak = stride_bn = 1
 *     assumed): the row strides come from parameters;
 *   - attention's K and V: 4-D maps (head dim, key, head, batch), the key
 *     bound seqlen_k only in the masked loop; varlen (offsets read from
 *     memory) stays cp.async;
 *   - off by default and where it cannot apply (sm_80): the PTX has no bulk
 *     copy and no map parameter;
 *   - ptxas assembles it without spills.
 * Results are checked on the GPU (tests/gpu/test_e2e_gpu_matmul.c with KILN_TEST_TMA=1). */
#include "compiler/support/support.h"
#include "tests/testutil.h"
#include "tests/ptx_util.h"

#include <stdlib.h>
#include <string.h>

static int count(const KilnCompileResult *r, const char *what) { return pu_count_n(r->output, r->output_size, what); }

static KilnCompileResult matmul_tc(const char *kernel, const char *arch, int tma, KilnEmit emit)
{
    char *src = sup_read_file_text(tu_src_path("tools/bench/matmul_tc.tile"), NULL);
    ck_assert_ptr_nonnull(src);
    KilnParamHint h[3] = {{"A", 16, 0}, {"B", 16, 0}, {"C", 16, 0}};
    KilnCompileOptions o;
    memset(&o, 0, sizeof o);
    o.kernel = kernel;
    o.arch = arch;
    o.emit = emit;
    o.hints = h;
    o.nhints = 3;
    o.schedule.tma = tma;
    o.num_stages = strcmp(arch, "sm_80") ? 0 : 3;   /* 4 stages of 128x256x64 pass sm_80's SRAM */
    KilnCompileResult r;
    KilnStatus st = kiln_compile("tools/bench/matmul_tc.tile", src, &o, &r);
    ck_assert_msg(st == KILN_OK, "%s %s: %s", kernel, arch, r.diagnostics ? r.diagnostics : "");
    free(src);
    return r;
}

#define BULK "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"

START_TEST(matmul_tc_copies_through_tma)
{
    const char *kernels[2] = {"matmul_tc_f16", "matmul_tc_bf16"};
    for (int i = 0; i < 2; i++) {
        KilnCompileResult r = matmul_tc(kernels[i], "sm_90a", 1, KILN_EMIT_PTX);
        /* 128x256x64 on 8 warps, 4 stages, in-flight wgmma: copies 2 iterations ahead, so
         * 3 issue sites (prologue 2, loop 1), each A's box + B's 4 boxes of 64 columns */
        ck_assert_int_eq(count(&r, BULK), 3 * 5);
        ck_assert_int_eq(count(&r, "mbarrier.arrive.expect_tx.shared::cta.b64 st, ["), 3);
        ck_assert_int_eq(count(&r, "], 49152;"), 3);   /* 128x64 + 64x256 halves */
        ck_assert_int_eq(count(&r, "cp.async.cg.shared.global"), 0);
        ck_assert_int_eq(count(&r, "cp.async.mbarrier.arrive"), 0);
        ck_assert_int_eq(count(&r, ".param .align 64 .b8"), 2);
        ck_assert_int_eq(count(&r, "prefetch.tensormap"), 2);
        ck_assert_int_eq(count(&r, "cvta.param.u64"), 2);
        ck_assert_int_eq(count(&r, "], 1;\n"), 4);     /* full[s]: one arrival (the expect_tx) */
        ck_assert_int_eq(count(&r, "], 256;\n"), 4);   /* empty[s]: every thread */
        /* the boxes of B: its slot's column blocks, 8 KB apart */
        ck_assert_int_eq(count(&r, "+8192], ["), 3);
        ck_assert_int_eq(count(&r, "+24576], ["), 3);
        const KilnKernelInfo *k = &r.kernels[0];
        ck_assert_int_eq(k->ntmaps, 2);
        const KilnTensorMapInfo *a = &k->tmaps[0], *b = &k->tmaps[1];
        ck_assert_int_eq(a->rank, 2);
        ck_assert_int_eq(a->base_param, 0);                 /* A */
        ck_assert_int_eq(a->is_bf16, i);
        ck_assert_int_eq(a->elem_bytes, 2);
        ck_assert_int_eq(a->swizzle_bytes, 128);
        ck_assert_int_eq(a->dims[0].param, -1);             /* K = 1024, a constant */
        ck_assert_int_eq(a->dims[0].k, 1024);
        ck_assert_int_eq(a->dims[1].param, 3);              /* M, the runtime parameter */
        ck_assert_int_eq(a->dims[1].k, 1);
        ck_assert_int_eq(a->strides[0].param, -1);
        ck_assert_int_eq(a->strides[0].k, 2048);            /* K halves */
        ck_assert_int_eq(a->box[0], 64);
        ck_assert_int_eq(a->box[1], 128);
        ck_assert_int_eq(b->base_param, 1);                 /* B: [K, N], N contiguous */
        ck_assert_int_eq(b->dims[0].k, 1024);
        ck_assert_int_eq(b->dims[1].param, -1);
        ck_assert_int_eq(b->dims[1].k, 1024);
        ck_assert_int_eq(b->box[0], 64);
        ck_assert_int_eq(b->box[1], 64);
        ck_assert_uint_eq(a->nonneg_params | b->nonneg_params, 0);   /* N, K constants; M only in the group size */
        kiln_compile_result_free(&r);
    }
}
END_TEST

START_TEST(runtime_strides_come_from_parameters)
{
    char *src = sup_read_file_text(tu_src_path("examples/matmul.tile"), NULL);
    ck_assert_ptr_nonnull(src);
    KilnParamHint h[] = {{"A", 16, 0}, {"B", 16, 0}, {"C", 16, 0}, {"K", 16, 0}, {"N", 16, 0},
                         {"stride_am", 16, 0}, {"stride_bk", 16, 0}, {"stride_ak", 1, 1}, {"stride_bn", 1, 1}};
    KilnDefine d[3] = {{"BLOCK_M", "128"}, {"BLOCK_N", "128"}, {"BLOCK_K", "64"}};
    KilnCompileOptions o;
    memset(&o, 0, sizeof o);
    o.arch = "sm_90a";
    o.emit = KILN_EMIT_PTX;
    o.defines = d;
    o.ndefines = 3;
    o.hints = h;
    o.nhints = (int)(sizeof h / sizeof h[0]);
    o.schedule.tma = 1;
    KilnCompileResult r;
    KilnStatus st = kiln_compile("examples/matmul.tile", src, &o, &r);
    ck_assert_msg(st == KILN_OK, "%s", r.diagnostics ? r.diagnostics : "");
    const KilnKernelInfo *k = &r.kernels[0];
    ck_assert_int_eq(k->ntmaps, 2);
    /* matmul(A, B, C, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, ...) */
    ck_assert_int_eq(k->tmaps[0].dims[0].param, 5);   /* K */
    ck_assert_int_eq(k->tmaps[0].dims[1].param, 3);   /* M */
    ck_assert_int_eq(k->tmaps[0].strides[0].param, 6);
    ck_assert_int_eq(k->tmaps[0].strides[0].k, 2);    /* stride_am elements of 2 bytes */
    ck_assert_int_eq(k->tmaps[1].dims[0].param, 4);   /* N */
    ck_assert_int_eq(k->tmaps[1].dims[1].param, 5);   /* K */
    ck_assert_int_eq(k->tmaps[1].strides[0].param, 8);
    /* GROUP_M's tile order divides by 8 * cdiv(N, 128): the coordinates are >= 0 when N is,
     * which the runtime checks at launch */
    ck_assert_uint_eq(k->tmaps[0].nonneg_params, 1u << 4);
    ck_assert_int_gt(count(&r, BULK), 0);
    ck_assert_int_eq(count(&r, "cp.async.cg.shared.global"), 0);
    kiln_compile_result_free(&r);
    free(src);
}
END_TEST

START_TEST(off_by_default_and_where_it_cannot_apply)
{
    KilnCompileResult off = matmul_tc("matmul_tc_f16", "sm_90a", 0, KILN_EMIT_PTX);
    ck_assert_int_eq(count(&off, "cp.async.bulk"), 0);
    ck_assert_int_eq(count(&off, ".b8 matmul"), 0);
    ck_assert_int_eq(off.kernels[0].ntmaps, 0);
    kiln_compile_result_free(&off);
    KilnCompileResult sm80 = matmul_tc("matmul_tc_f16", "sm_80", 1, KILN_EMIT_PTX);   /* no wgmma kernel */
    ck_assert_int_eq(count(&sm80, "cp.async.bulk"), 0);
    ck_assert_int_eq(sm80.kernels[0].ntmaps, 0);
    kiln_compile_result_free(&sm80);
}
END_TEST

/* attention_fwd.tile (d 128, 128x64 on 4 warps, 2 stages) with the flags of `o`. */
static KilnCompileResult attention_ws(const char *kernel, const char *causal, int tma, int ws, KilnEmit emit);
static KilnCompileResult attention(const char *kernel, const char *causal, int tma, KilnEmit emit)
{
    return attention_ws(kernel, causal, tma, 0, emit);
}

/* ... and with warp specialisation when ws (8 consumer warps: d 256's table schedule) */
static KilnCompileResult attention_ws(const char *kernel, const char *causal, int tma, int ws, KilnEmit emit)
{
    char *src = sup_read_file_text(tu_src_path("lang/lib/attention_fwd.tile"), NULL);
    ck_assert_ptr_nonnull(src);
    KilnDefine defs[] = {{"HEAD_DIM", "128"}, {"BLOCK_M", "128"}, {"BLOCK_N", "64"}, {"CAUSAL", causal},
                         {"PLAIN_SCORES", "true"}};
    KilnParamHint h[PU_ATTN_NHINTS];
    KilnCompileOptions o;
    pu_attention_options(&o, defs, 5, "sm_90a", ws ? 8 : 4, 2, emit, h);
    o.kernel = kernel;
    o.schedule.tma = tma;
    o.schedule.warp_specialize = ws;
    static const KilnParamHint vh[] = {{"Q", 16, 0}, {"K", 16, 0}, {"V", 16, 0}, {"O", 16, 0}, {"stride_qh", 16, 0},
                                       {"stride_qm", 16, 0}, {"stride_kh", 16, 0}, {"stride_kn", 16, 0},
                                       {"stride_vh", 16, 0}, {"stride_vn", 16, 0}};
    if (strstr(kernel, "varlen")) o.hints = vh, o.nhints = (int)(sizeof vh / sizeof vh[0]);   /* its own parameters */
    KilnCompileResult r;
    KilnStatus st = kiln_compile("lang/lib/attention_fwd.tile", src, &o, &r);
    ck_assert_msg(st == KILN_OK, "%s: %s", kernel, r.diagnostics ? r.diagnostics : "");
    free(src);
    return r;
}

/* K + b * stride_kb + h_kv * stride_kh + n * stride_kn + d is a 4-D map (d, key, and head
 * and batch with the extent 2^31 where the program has no bound: 2^32 faulted on the H200,
 * tma_plan.c): both key loops copy K and V through maps (4: the unmasked loop's have no key
 * bound, the masked loop's the bound seqlen_k), one bulk copy per 64-column box, with the
 * bytes of both tiles expected on one mbarrier. */
START_TEST(attention_k_v_through_4d_maps)
{
    const char *causal[2] = {"false", "true"};
    for (int c = 0; c < 2; c++) {
        KilnCompileResult r = attention("attn_fwd_f16", causal[c], 1, KILN_EMIT_PTX);
        ck_assert_int_eq(r.kernels[0].ntmaps, 4);
        for (int m = 0; m < 4; m++) {
            const KilnTensorMapInfo *t = &r.kernels[0].tmaps[m];
            ck_assert_int_eq(t->rank, 4);
            ck_assert_int_eq(t->box[0], 64);
            ck_assert_int_eq(t->box[1], 64);   /* BLOCK_N keys */
            ck_assert_int_eq(t->box[2], 1);
            ck_assert_int_eq(t->box[3], 1);
            ck_assert(t->dims[2].param < 0 && t->dims[2].k == 1ll << 31);
            ck_assert(t->dims[3].param < 0 && t->dims[3].k == 1ll << 31);
        }
        ck_assert_int_gt(count(&r, "cp.async.bulk.tensor.4d"), 0);
        ck_assert_int_eq(count(&r, "cp.async.bulk.tensor.4d") % 4, 0);   /* d 128: 2 boxes each of K and V */
        ck_assert_int_gt(count(&r, "expect_tx.shared::cta.b64 st, [%r"), 0);
        ck_assert_int_eq(count(&r, "cp.async.cg.shared.global"), 0);   /* Q is loaded once, without cp.async */
        kiln_compile_result_free(&r);
    }
    /* varlen: the key offset is read from cu_seqlens_k (a load): no proof it is >= 0, cp.async */
    KilnCompileResult v = attention("attn_fwd_varlen_f16", "false", 1, KILN_EMIT_PTX);
    ck_assert_int_eq(count(&v, "cp.async.bulk"), 0);
    ck_assert_int_gt(count(&v, "cp.async.mbarrier.arrive.noinc"), 0);   /* tma implies mbarrier */
    ck_assert_int_eq(v.kernels[0].ntmaps, 0);
    kiln_compile_result_free(&v);
}
END_TEST

/* tma with warp specialisation: the producer warpgroup's thread 0 issues the bulk copies with
 * one expect_tx arrival per stage (full barriers count 1), the consumers issue no copy at all */
START_TEST(attention_tma_from_the_producer_warpgroup)
{
    KilnCompileResult r = attention_ws("attn_fwd_f16", "true", 1, 1, KILN_EMIT_PTX);
    ck_assert_int_eq(r.kernels[0].ntmaps, 4);
    ck_assert_int_eq(count(&r, "setmaxnreg.dec"), 1);
    ck_assert_int_eq(count(&r, "cp.async.bulk.tensor.4d"), 8);   /* 2 loops x (K, V) x 2 boxes, in the producer only */
    ck_assert_int_eq(count(&r, "cp.async.cg.shared.global"), 0);
    ck_assert_int_eq(count(&r, "cp.async.mbarrier.arrive"), 0);   /* TMA completes the phase by bytes */
    ck_assert_int_eq(count(&r, "mbarrier.arrive.expect_tx"), 2);   /* one per loop */
    /* per loop and stage: full counts 1 (the expect_tx), empty the 256 consumer threads */
    ck_assert_int_eq(count(&r, "mbarrier.init.shared::cta.b64"), 8);
    ck_assert_int_eq(count(&r, "], 256;"), 4);
    kiln_compile_result_free(&r);
}
END_TEST

START_TEST(ptxas_assembles_without_spills)
{
    KilnCompileResult r = matmul_tc("matmul_tc_f16", "sm_90a", 1, KILN_EMIT_CUBIN);
    pu_assert_no_spills(&r, "matmul_tc_f16 with tma");
    kiln_compile_result_free(&r);
    const char *causal[2] = {"false", "true"};
    for (int c = 0; c < 2; c++) {
        r = attention_ws("attn_fwd_f16", causal[c], 1, 1, KILN_EMIT_CUBIN);
        pu_assert_no_spills(&r, "attn_fwd_f16 d 128 with tma and warp specialisation");
        kiln_compile_result_free(&r);
    }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("codegen_e2e_tma_ptx");
    TCase *tc = tcase_create("tma");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, matmul_tc_copies_through_tma);
    tcase_add_test(tc, runtime_strides_come_from_parameters);
    tcase_add_test(tc, off_by_default_and_where_it_cannot_apply);
    tcase_add_test(tc, attention_k_v_through_4d_maps);
    tcase_add_test(tc, attention_tma_from_the_producer_warpgroup);
    suite_add_tcase(s, tc);
    TCase *px = pu_ptxas_tcase(s, 600);
    tcase_add_test(px, ptxas_assembles_without_spills);
    return s;
}

PU_MAIN(suite)
