/* test_e2e_schedules.c — the shipped FlashAttention forward program
 * (lang/lib/attention_fwd.tile, attn_fwd_f16, HEAD_DIM 64) compiles to PTX
 * for sm_90a under every schedule a user can pick through -D / --num-warps /
 * --num-stages (or kiln_attention_fwd's block_m / num_warps):
 * BLOCK_M {64, 128} x BLOCK_N {32, 64, 128} x warps {4, 8} x stages {1, 2, 3}
 * x causal {no, yes}, each without and with the launch-time hints the runtime
 * adds (pointers, strides and sizes 16-divisible: vector loads and cp.async
 * pipelining). Each compile must succeed (no internal error, no crash: Check
 * forks, so a signal fails the test) and give PTX with tensor-core code.
 *
 * Regression: BLOCK_M 128 on 4 warps (MMA warp grid 4 x 1, two m16 row tiles
 * per warp) broadcast the [1, BLOCK_N] key mask of the causal / ragged path
 * from a tile with 2 row registers into one with 4 and read past the source's
 * registers: "select on a pointer" (invalid LLVM IR) or SIGSEGV in
 * LLVMBuildSelect. A few of those schedules also go through ptxas (cubin; a
 * ptxas-tagged case, test_e2e_schedules/ptxas, skipped when ptxas is absent).
 */
#include "tests/testutil.h"
#include "tests/ptx_util.h"
#include "kiln.h"
#include "compiler/support/support.h"

#include <stdbool.h>
#include <string.h>
#include <unistd.h>

static char *attn_src;

typedef struct Sched {
    int bm, bn, warps, stages;
    bool causal, hints;
} Sched;

static void compile_sched(const Sched *s, KilnEmit emit)
{
    if (!attn_src) attn_src = sup_read_file_text(tu_src_path("lang/lib/attention_fwd.tile"), NULL);
    ck_assert_ptr_nonnull(attn_src);
    char bm[16], bn[16];
    snprintf(bm, sizeof bm, "%d", s->bm);
    snprintf(bn, sizeof bn, "%d", s->bn);
    KilnDefine defs[] = {{"HEAD_DIM", "64"}, {"BLOCK_M", bm}, {"BLOCK_N", bn},
                         {"CAUSAL", s->causal ? "true" : "false"}};
    KilnParamHint h[PU_ATTN_NHINTS];
    KilnCompileOptions o;
    pu_attention_options(&o, defs, 4, "sm_90a", s->warps, s->stages, emit, s->hints ? h : NULL);
    KilnCompileResult r;
    KilnStatus st = kiln_compile("lang/lib/attention_fwd.tile", attn_src, &o, &r);
    ck_assert_msg(st == KILN_OK, "BLOCK_M %d BLOCK_N %d warps %d stages %d causal %d hints %d: %s\n%s", s->bm,
                  s->bn, s->warps, s->stages, s->causal, s->hints, kiln_status_name(st),
                  r.diagnostics ? r.diagnostics : "");
    ck_assert_int_eq(r.nkernels, 1);
    ck_assert_int_eq(r.kernels[0].num_warps, s->warps);
    if (emit == KILN_EMIT_PTX) {
        ck_assert_ptr_nonnull(r.output);
        ck_assert_msg(strstr(r.output, ".entry attn_fwd_f16") &&
                          (strstr(r.output, "mma.sync.aligned.m16n8k16") || strstr(r.output, "wgmma.mma_async")),
                      "BLOCK_M %d BLOCK_N %d warps %d: PTX without the kernel or its mma", s->bm, s->bn,
                      s->warps);
        /* cp.async exactly where the hints make the K/V rows provably
         * 16-byte aligned and there are stages to fill. */
        bool pipelined = s->hints && s->stages > 1;
        ck_assert_msg(pipelined == (strstr(r.output, "cp.async.cg") != NULL),
                      "BLOCK_M %d BLOCK_N %d warps %d stages %d hints %d: cp.async expected %d", s->bm, s->bn,
                      s->warps, s->stages, s->hints, pipelined);
    } else {
        ck_assert_int_gt((int)r.output_size, 4);
        ck_assert_msg(memcmp(r.output, "\177ELF", 4) == 0, "cubin is not ELF");
    }
    kiln_compile_result_free(&r);
}

/* The whole grid for one hint setting. */
static void compile_grid(bool hints)
{
    static const int bms[] = {64, 128}, bns[] = {32, 64, 128}, warps[] = {4, 8}, stages[] = {1, 2, 3};
    int n = 0;
    for (int a = 0; a < 2; a++)
        for (int b = 0; b < 3; b++)
            for (int w = 0; w < 2; w++)
                for (int st = 0; st < 3; st++)
                    for (int causal = 0; causal < 2; causal++) {
                        Sched s = {bms[a], bns[b], warps[w], stages[st], causal, hints};
                        compile_sched(&s, KILN_EMIT_PTX);
                        n++;
                    }
    ck_assert_int_eq(n, 72);
}

START_TEST(schedules_without_hints) { compile_grid(false); }
END_TEST

START_TEST(schedules_with_launch_hints) { compile_grid(true); }
END_TEST

/* The schedules that used to fail, and the shipped default, through ptxas. */
START_TEST(block_m128_four_warps_accepted_by_ptxas)
{
    static const Sched cases[] = {
        {128, 64, 4, 2, true, false},   /* select on a pointer */
        {128, 32, 4, 3, false, true},   /* SIGSEGV, pipelined */
        {128, 128, 4, 1, true, false},  /* SIGSEGV */
        {128, 64, 4, 3, true, true},    /* causal, pipelined */
        {128, 64, 8, 2, false, true},   /* the default schedule */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) compile_sched(&cases[i], KILN_EMIT_CUBIN);
}
END_TEST

static Suite *schedules_suite(void)
{
    Suite *s = suite_create("codegen_e2e_schedules");
    TCase *tc = tcase_create("attention");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, schedules_without_hints);
    tcase_add_test(tc, schedules_with_launch_hints);
    suite_add_tcase(s, tc);
    TCase *pt = pu_ptxas_tcase(s, 600);
    tcase_add_test(pt, block_m128_four_warps_accepted_by_ptxas);
    return s;
}

PU_MAIN(schedules_suite)
