/* test_e2e_attn_decode_ptx.c — the flash-decoding program (lang/lib/attention_decode.tile)
 * at the schedules kiln_attention_decode picks (jit/attention_decode.c's
 * the decode rows of jit/attention_tune.c: BLOCK_N by head dim, BLOCK_M 16/32/64 by packed rows, contiguous
 * and paged caches of every page size, DIRECT, the combine), compiled for sm_80
 * and sm_90a with the hints the runtime's launch specialisation derives for
 * aligned tensors (every pointer and stride a multiple of 16):
 *   - the split kernel's dots run on tensor cores (mma.sync or wgmma), even for
 *     one token (GQA packing pads M to 16);
 *   - the K/V loads are pipelined (cp.async), the paged cache's too: its
 *     block-table reads are part of the pipelined slice (pass_pipeline.c);
 *   - the paged cache reads its block table only where the copies of a later
 *     iteration are issued (prologue and loop body of each of the two key loops,
 *     K and V): the body does not read it again in place for the copies it does
 *     not issue (cg_pipeline.c, mark_dead_in_place): the non-FUSED split
 *     kernel's 32-bit loads (its only ones are the block-table reads) are
 *     exactly `bt` a thread (2 loops x 2 issue points x K and V, times the
 *     indices a thread holds in each layout); 1.5x that when the body read the
 *     table again in place;
 *   - FUSED (the last split program combines) publishes its partial with
 *     fence.acq_rel.gpu before its one ticket atom and fences again before it
 *     reads the others'; no other variant has a GPU-scope fence;
 *   - where ptxas exists, every variant assembles to a cubin (ELF);
 *   - the block-mask split kernel (attn_decode_bm_*, 128 x 128 mask blocks, its
 *     arrays aligned) likewise: tensor cores, cp.async through the lists'
 *     indirection, the fences of FUSED only (its 32-bit loads also read the lists:
 *     not counted).
 */
#include "tests/ptx_util.h"
#include "tests/testutil.h"
#include "compiler/support/support.h"

#define DEC_PROGRAM "lang/lib/attention_decode.tile"

typedef struct Variant {
    const char *kernel;      /* attn_decode_f16 ... */
    int d, block_m, block_n, paged, page, direct, fused;
    int bt;                  /* paged, not FUSED: its ld.global.b32 a thread */
} Variant;

static const Variant variants[] = {
    {"attn_decode_f16", 64, 16, 64, 0, 16, 0, 0, 0},
    {"attn_decode_bf16", 64, 32, 64, 1, 16, 0, 0, 32},
    {"attn_decode_f16", 128, 16, 64, 1, 256, 0, 0, 64},
    {"attn_decode_bf16", 128, 64, 64, 0, 16, 0, 0, 0},
    {"attn_decode_f16", 128, 16, 64, 1, 32, 1, 0, 64},
    {"attn_decode_bf16", 128, 16, 64, 1, 128, 0, 0, 64},
    {"attn_decode_f16", 256, 16, 32, 1, 64, 0, 0, 64},
    {"attn_decode_bf16", 256, 16, 32, 0, 16, 1, 0, 0},
    {"attn_decode_f16", 128, 16, 64, 0, 16, 0, 1, 0},
    {"attn_decode_bf16", 64, 32, 64, 1, 16, 0, 1, 0},
    {"attn_decode_f16", 256, 16, 32, 1, 64, 0, 1, 0},
    {"attn_decode_bm_f16", 128, 16, 64, 1, 64, 0, 0, 0},
    {"attn_decode_bm_bf16", 64, 32, 64, 0, 16, 0, 1, 0},
    {"attn_decode_combine_f16", 64, 0, 0, 0, 0, 0, 0, 0},
    {"attn_decode_combine_bf16", 128, 0, 0, 0, 0, 0, 0, 0},
    {"attn_decode_combine_f16", 256, 0, 0, 0, 0, 0, 0, 0},
};

static const char *const hinted[] = {
    "Q", "K", "V", "O", "LSE", "O_part", "LSE_part", "counters", "cache_seqlens", "block_table",
    "stride_qb", "stride_qh", "stride_qm", "stride_kb", "stride_kh", "stride_kn", "stride_vb", "stride_vh",
    "stride_vn", "stride_ob", "stride_oh", "stride_om", "stride_bt",
    "KV_NUM", "KV_IDX", "FULL_KV_NUM", "FULL_KV_IDX"};   /* the block mask's (16-byte aligned) */

static void compile_variant(const Variant *v, const char *arch, KilnEmit emit, KilnCompileResult *r)
{
    char d[16], bm[16], bn[16], ps[16];
    snprintf(d, sizeof d, "%d", v->d);
    snprintf(bm, sizeof bm, "%d", v->block_m);
    snprintf(bn, sizeof bn, "%d", v->block_n);
    snprintf(ps, sizeof ps, "%d", v->page);
    bool combine = strstr(v->kernel, "combine") != NULL, masked = strstr(v->kernel, "_bm") != NULL;
    KilnDefine defs[] = {{"HEAD_DIM", d}, {"BLOCK_M", bm}, {"BLOCK_N", bn}, {"PAGED", v->paged ? "true" : "false"},
                         {"PAGE_SIZE", ps}, {"DIRECT", v->direct ? "true" : "false"},
                         {"FUSED", v->fused ? "true" : "false"}, {"MASK_BLOCK_Q", "128"}, {"MASK_BLOCK_N", "128"}};
    KilnParamHint h[sizeof hinted / sizeof hinted[0]];
    int nh = 0;
    for (size_t i = 0; i < sizeof hinted / sizeof hinted[0]; i++) {
        const char *n = hinted[i];
        /* the combine has O, LSE and the partials only; the mask's arrays are the bm kernel's */
        bool stride = !strncmp(n, "stride_", 7);
        bool used = strstr(n, "KV_") ? masked : !combine || (stride ? n[7] == 'o' : strchr("OL", n[0]) != NULL);
        if (used) h[nh++] = (KilnParamHint){n, 16, 0};
    }
    KilnCompileOptions o = {.kernel = v->kernel, .defines = defs, .ndefines = combine ? 1 : masked ? 9 : 7, .arch = arch,
                            .emit = emit, .hints = h, .nhints = nh};
    const char *src = sup_read_file_text(tu_src_path(DEC_PROGRAM), NULL);
    ck_assert_ptr_nonnull(src);
    KilnStatus st = kiln_compile(DEC_PROGRAM, src, &o, r);
    ck_assert_msg(st == KILN_OK, "%s d%d BM%d BN%d paged %d/%d direct %d fused %d --arch %s: %s\n%s", v->kernel,
                  v->d, v->block_m, v->block_n, v->paged, v->page, v->direct, v->fused, arch, kiln_status_name(st),
                  r->diagnostics ? r->diagnostics : "");
    free((void *)src);
}

START_TEST(test_variant_ptx)
{
    const Variant *v = &variants[_i];
    bool combine = strstr(v->kernel, "combine") != NULL;
    const char *archs[] = {"sm_80", "sm_90a"};
    for (int a = 0; a < 2; a++) {
        KilnCompileResult r;
        compile_variant(v, archs[a], KILN_EMIT_PTX, &r);
        int mma = pu_count_n(r.output, r.output_size, "mma.sync") + pu_count_n(r.output, r.output_size, "wgmma.mma_async");
        if (!combine)
            ck_assert_msg(mma > 0, "%s d%d BM%d %s: no tensor-core instruction", v->kernel, v->d, v->block_m,
                          archs[a]);
        if (!combine)
            ck_assert_msg(pu_count_n(r.output, r.output_size, "cp.async") > 0,
                          "%s d%d BM%d paged %d %s: K/V loads are not pipelined", v->kernel, v->d, v->block_m,
                          v->paged, archs[a]);
        int b32 = pu_count_n(r.output, r.output_size, "ld.global.b32");
        if (v->paged && !v->fused && !strstr(v->kernel, "_bm"))
            ck_assert_msg(b32 == v->bt, "%s d%d BN%d page %d %s: %d 32-bit loads (block-table reads), want %d",
                          v->kernel, v->d, v->block_n, v->page, archs[a], b32, v->bt);
        int fences = pu_count_n(r.output, r.output_size, "fence.acq_rel.gpu;");
        int atoms = pu_count_n(r.output, r.output_size, "atom.global.gpu.add.u32");
        ck_assert_msg(fences == (v->fused ? 2 : 0) && atoms == (v->fused ? 1 : 0),
                      "%s d%d fused %d %s: %d GPU-scope fences and %d ticket atomics", v->kernel, v->d, v->fused,
                      archs[a], fences, atoms);
        kiln_compile_result_free(&r);
        if (!pu_have_ptxas()) continue;
        compile_variant(v, archs[a], KILN_EMIT_CUBIN, &r);
        ck_assert_msg(r.output_size > 4 && memcmp(r.output, "\177ELF", 4) == 0, "%s %s: cubin is not ELF",
                      v->kernel, archs[a]);
        kiln_compile_result_free(&r);
    }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("attention_decode_ptx");
    TCase *tc = tcase_create("ptx");
    tcase_set_timeout(tc, 900);
    tcase_add_loop_test(tc, test_variant_ptx, 0, (int)(sizeof variants / sizeof variants[0]));
    suite_add_tcase(s, tc);
    return s;
}

TU_MAIN(suite)
