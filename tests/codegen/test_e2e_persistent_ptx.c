/* test_e2e_persistent_ptx.c — the shipped attention forward as persistent programs
 * (--persistent, --longest-first: compiler/passes/persistent.c) in PTX, at the runtime's
 * launch-time hints, without warp specialisation (which the options refuse).
 * Checked against the plain compile of the same schedule:
 *   - the entry takes three more .u32 parameters (the logical grid; the kernel info
 *     still lists the program's own, and says persistent);
 *   - the grid is 1-D: %ctaid.y is never read, %nctaid.x is (the tile loop's step);
 *   - the body is the same: as many wgmma / mma instructions, TMA copies and mbarrier
 *     inits (the pipelined key loop inits and invalidates its barriers per tile, so the
 *     phases restart at 0 in each);
 *   - longest-first reverses axis 0: the only change from --persistent is the tile's ids;
 *   - ptxas assembles each, and adds no spill where the plain compile has registers to spare.
 * Whether it runs right is the interpreter's (tests/jit/test_attention_persistent.c) and
 * the GPU's: tools/device_persistent.sh. */
#include "tests/testutil.h"
#include "tests/ptx_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct Case {
    const char *d, *bm, *bn, *causal;
    int warps, tma, overlap, pingpong;
} Case;

static KilnCompileResult compile(const Case *c, int persistent, KilnEmit emit)
{
    static char *src;
    if (!src) src = sup_read_file_text(tu_src_path("lang/lib/attention_fwd.tile"), NULL);
    ck_assert_ptr_nonnull(src);
    KilnDefine defs[] = {{"HEAD_DIM", c->d}, {"BLOCK_M", c->bm}, {"BLOCK_N", c->bn}, {"CAUSAL", c->causal},
                         {"PLAIN_SCORES", "true"}};
    KilnParamHint h[PU_ATTN_NHINTS];
    KilnCompileOptions o;
    pu_attention_options(&o, defs, 5, "sm_90a", c->warps, 2, emit, h);
    o.schedule.tma = c->tma;
    o.schedule.overlap = c->overlap;
    o.schedule.pingpong = c->pingpong;
    o.schedule.persistent = persistent >= 1;
    o.schedule.longest_first = persistent == 2;
    KilnCompileResult r;
    KilnStatus st = kiln_compile("lang/lib/attention_fwd.tile", src, &o, &r);
    ck_assert_msg(st == KILN_OK, "d %s %sx%s/%d causal %s persistent %d: %s", c->d, c->bm, c->bn, c->warps, c->causal,
                  persistent, r.diagnostics ? r.diagnostics : "");
    return r;
}

static int count(const KilnCompileResult *r, const char *what) { return pu_count_n(r->output, r->output_size, what); }

static const Case k_cases[] = {
    {"128", "128", "128", "true", 8, 1, 1, 0},    /* FA3's tiles with tma + overlap, causal */
    {"128", "128", "128", "false", 8, 1, 1, 0},
    {"64", "64", "128", "false", 4, 0, 0, 0},     /* the sm_90 d 64 row: cp.async */
    {"128", "64", "64", "true", 4, 0, 0, 0},      /* the causal short-sequence row */
    {"256", "128", "64", "true", 8, 0, 0, 1},     /* d 256 with ping-pong */
};
#define NCASES (int)(sizeof k_cases / sizeof k_cases[0])

START_TEST(persistent_ptx_is_the_plain_body_in_a_tile_loop)
{
    const Case *c = &k_cases[_i];
    KilnCompileResult plain = compile(c, 0, KILN_EMIT_PTX), pers = compile(c, 1, KILN_EMIT_PTX),
                      lf = compile(c, 2, KILN_EMIT_PTX);
    ck_assert_int_eq(pers.kernels[0].persistent, 1);
    ck_assert_int_eq(lf.kernels[0].persistent, 2);
    ck_assert_int_eq(plain.kernels[0].persistent, 0);
    ck_assert_int_eq(pers.kernels[0].nparams, plain.kernels[0].nparams);
    ck_assert_int_eq(pers.kernels[0].ntmaps, plain.kernels[0].ntmaps);
    /* three more .u32 parameters in the entry */
    ck_assert_int_eq(count(&pers, ".param .u32"), count(&plain, ".param .u32") + 3);
    /* a 1-D grid: the tile loop reads %nctaid.x, nothing reads %ctaid.y */
    ck_assert_int_gt(count(&plain, "%ctaid.y"), 0);
    ck_assert_int_eq(count(&pers, "%ctaid.y") + count(&lf, "%ctaid.y"), 0);
    ck_assert_int_gt(count(&pers, "%nctaid.x"), 0);
    ck_assert_int_eq(count(&plain, "%nctaid.x"), 0);
    /* the body: the same tensor-core instructions, copies and barriers */
    static const char *const same[] = {"wgmma.mma_async", "mma.sync", "cp.async.bulk.tensor", "cp.async.cg",
                                       "mbarrier.init", "mbarrier.inval", "ex2.approx"};
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++) {
        ck_assert_msg(count(&pers, same[i]) == count(&plain, same[i]), "case %d: %s: %d persistent, %d plain", _i,
                      same[i], count(&pers, same[i]), count(&plain, same[i]));
        ck_assert_int_eq(count(&lf, same[i]), count(&pers, same[i]));
    }
    ck_assert_int_gt(count(&plain, "wgmma.mma_async"), 0);
    /* the tile loop's back edge keeps the body's invariants inside (cg_control.c) */
    KilnCompileResult ll = compile(c, 1, KILN_EMIT_LLVM);
    ck_assert_int_eq(count(&ll, "!\"llvm.licm.disable\"}"), 1);
    kiln_compile_result_free(&ll);
    kiln_compile_result_free(&plain);
    kiln_compile_result_free(&pers);
    kiln_compile_result_free(&lf);
}
END_TEST

/* The "registers: N" and "spills: N bytes stored" of a cubin compile's stats. */
static void ptxas_numbers(const KilnCompileResult *r, const char *what, int *regs, int *spill)
{
    ck_assert_msg(r->output_size > 0, "%s: no cubin", what);
    const char *g = r->stats ? strstr(r->stats, "registers: ") : NULL, *s = r->stats ? strstr(r->stats, "spills: ") : NULL;
    ck_assert_msg(g && s, "%s: %s", what, r->stats ? r->stats : "(no stats)");
    *regs = atoi(g + 11);
    *spill = atoi(s + 8);
}

/* ptxas assembles each (the registers and spills of each are printed for the record:
 * docs/passes.md, "Persistent programs"). */
START_TEST(ptxas_accepts_without_new_spills)
{
    for (int i = 0; i < NCASES; i++) {
        const Case *c = &k_cases[i];
        int regs[3], spill[3];
        for (int m = 0; m <= 2; m++) {
            KilnCompileResult r = compile(c, m, KILN_EMIT_CUBIN);
            char what[96];
            snprintf(what, sizeof what, "d %s %sx%s/%d causal %s tma%d ov%d pp%d persistent %d", c->d, c->bm, c->bn,
                     c->warps, c->causal, c->tma, c->overlap, c->pingpong, m);
            ptxas_numbers(&r, what, &regs[m], &spill[m]);
            printf("%s: %d registers, %d bytes spilled\n", what, regs[m], spill[m]);
            kiln_compile_result_free(&r);
        }
        /* Where the plain compile has registers to spare, the tile loop adds no spill (its
         * back edge disables LICM: cg_control.c). At the 255-register cap (128 x 128 on 8
         * warps without warp specialisation, d 256 with ping-pong) a few bytes can tip
         * over: printed above, and docs/passes.md records them. */
        if (spill[0] == 0 && regs[0] < 255)
            ck_assert_msg(spill[1] == 0 && spill[2] == 0, "case %d: spills %d / %d where the plain compile has none",
                          i, spill[1], spill[2]);
    }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("codegen_e2e_persistent_ptx");
    TCase *tc = tcase_create("ptx");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, persistent_ptx_is_the_plain_body_in_a_tile_loop, 0, NCASES);
    suite_add_tcase(s, tc);
    TCase *pt = pu_ptxas_tcase(s, 1200);
    tcase_add_test(pt, ptxas_accepts_without_new_spills);
    return s;
}

PU_MAIN(suite)
