/* test_e2e_schedule_combos.c — every combination of the schedule options
 * (compiler/support/schedule.h: 2^SCHED_COUNT of them) on shipped kernels either
 * compiles to PTX that ptxas accepts or is refused with a usage error naming the
 * options, never anything else (issue 29: --pingpong --overlap at 8 warps on the
 * attention forward gave PTX ptxas rejected, "setp.eq.u32 p, %f4403, 0": the
 * ping-pong hand-over's warpgroup operand was numbered as if the dot retired no
 * overlapped group, so it named an f32 register).
 *
 * Kernels (sm_90a, with the hints the runtime's launch-time specialisation adds):
 * examples/matmul.tile at 128 x 128 x 32 on 8 warps, 3 stages; the attention forward
 * (lang/lib/attention_fwd.tile, attn_fwd_f16) at d 64 128 x 64 on 8 warps, d 128
 * causal 128 x 64 on 8 warps, d 128 128 x 64 on 4 warps (the runtime's former sm_90 row) and
 * d 128 128 x 128 on 8 warps (its row now, under warp specialisation and TMA; FA3's tile,
 * where --warp-specialize --tma --overlap --pingpong is FA3's schedule), there only the
 * combinations with --warp-specialize (the rest is the other kernels' ground; the ptxas case
 * took 842 s of its 1200 with every combination on a machine at load 14).
 * Combinations that resolve to the same options compile once (tma implies mbarrier).
 * The refusals run without ptxas; the compiles are the ptxas-tagged case.
 */
#include "tests/testutil.h"
#include "tests/ptx_util.h"
#include "kiln.h"
#include "compiler/support/schedule.h"
#include "compiler/support/support.h"

#include <stdlib.h>
#include <string.h>

typedef struct Kernel {
    const char *file, *kernel;
    KilnDefine defs[6];
    int ndefs, warps, stages;
    const char *const *hints;
    unsigned need;   /* options every combination of this kernel has on (resolved), 0: none */
    unsigned skip;   /* options its combinations leave off (walked on the other kernels) */
} Kernel;

static const char *const k_mm_hints[] = {"A", "B", "C", "M", "N", "K", NULL};
static const char *const k_attn_hints[] = {
    "Q", "K", "V", "O", "LSE", "stride_qb", "stride_qh", "stride_qm", "stride_kb", "stride_kh", "stride_kn",
    "stride_vb", "stride_vh", "stride_vn", "stride_ob", "stride_oh", "stride_om", "seqlen_q", "seqlen_k", "heads",
    "heads_kv", NULL};

#define ATTN_BN(d, bn, causal) {"HEAD_DIM", d}, {"BLOCK_M", "128"}, {"BLOCK_N", bn}, {"CAUSAL", causal}, \
                               {"PLAIN_SCORES", "true"}
#define ATTN(d, causal) ATTN_BN(d, "64", causal)
/* Persistent programs (--persistent) double a kernel's walk: on the matmul and the causal
 * d 128 forward only; --longest-first differs from it by the tile's ids alone
 * (tests/codegen/test_e2e_persistent_ptx.c assembles both). */
#define PERSIST (SCHED_BIT(persistent) | SCHED_BIT(longest_first))
static const Kernel k_kernels[] = {
    {"examples/matmul.tile", "matmul", {{"BLOCK_M", "128"}, {"BLOCK_N", "128"}, {"BLOCK_K", "32"}}, 3, 8, 3,
     k_mm_hints, 0, SCHED_BIT(longest_first)},
    {"lang/lib/attention_fwd.tile", "attn_fwd_f16", {ATTN("64", "false")}, 5, 8, 2, k_attn_hints, 0, PERSIST},
    {"lang/lib/attention_fwd.tile", "attn_fwd_f16", {ATTN("128", "true")}, 5, 8, 2, k_attn_hints, 0,
     SCHED_BIT(longest_first)},
    {"lang/lib/attention_fwd.tile", "attn_fwd_f16", {ATTN("128", "false")}, 5, 4, 2, k_attn_hints, 0, PERSIST},
    {"lang/lib/attention_fwd.tile", "attn_fwd_f16", {ATTN_BN("128", "128", "false")}, 5, 8, 2, k_attn_hints,
     SCHED_BIT(warp_specialize), PERSIST},   /* the row's: half the walk, the ptxas case's time */
};

static KilnSchedule combo(unsigned bits)
{
    KilnSchedule s;
    memset(&s, 0, sizeof s);
    for (int i = 0; i < SCHED_COUNT; i++)
        if (bits & (1u << i)) sched_set(&s, i, 1);
    return s;
}

static KilnStatus compile(const Kernel *k, const KilnSchedule *s, KilnEmit emit, KilnCompileResult *r)
{
    char *src = sup_read_file_text(tu_src_path(k->file), NULL);
    ck_assert_ptr_nonnull(src);
    KilnParamHint h[32];
    int nh = 0;
    for (; k->hints[nh]; nh++) h[nh] = (KilnParamHint){k->hints[nh], 16, 0};
    KilnCompileOptions o = {.kernel = k->kernel, .defines = k->defs, .ndefines = k->ndefs, .arch = "sm_90a",
                            .num_warps = k->warps, .num_stages = k->stages, .emit = emit, .hints = h,
                            .nhints = nh, .schedule = *s};
    KilnStatus st = kiln_compile(k->file, src, &o, r);
    free(src);
    return st;
}

/* The combinations the table refuses: refused before any work, naming both flags. */
START_TEST(refused_combinations_name_the_options)
{
    int refused = 0;
    for (unsigned bits = 0; bits < 1u << SCHED_COUNT; bits++) {
        KilnSchedule s = combo(bits);
        char why[256];
        if (sched_resolve(&s, NULL, NULL, why, sizeof why)) continue;
        refused++;
        KilnCompileResult r;
        ck_assert_int_eq(compile(&k_kernels[0], &s, KILN_EMIT_PTX, &r), KILN_ERR_USAGE);
        int named = 0;
        for (int i = 0; i < SCHED_COUNT; i++)
            if ((bits & (1u << i)) && strstr(r.diagnostics, sched_options[i].flag)) named++;
        ck_assert_msg(named == 2, "%s", r.diagnostics);
        ck_assert_ptr_null(r.output);
        kiln_compile_result_free(&r);
    }
    /* since tma combines with warp_specialize (2026-11-28), only persistent programs
     * (or longest-first) with warp specialisation (or lean_producer) */
    int want = 0;
    for (unsigned bits = 0; bits < 1u << SCHED_COUNT; bits++)
        want += (bits & PERSIST) && (bits & (SCHED_BIT(warp_specialize) | SCHED_BIT(lean_producer)));
    ck_assert_int_eq(refused, want);
    ck_assert_int_gt(want, 0);
}
END_TEST

/* Every other combination: PTX that ptxas assembles (a cubin). */
START_TEST(allowed_combinations_assemble)
{
    int compiled = 0;
    for (size_t k = 0; k < sizeof k_kernels / sizeof k_kernels[0]; k++) {
        unsigned char done[1u << SCHED_COUNT] = {0};
        for (unsigned bits = 0; bits < 1u << SCHED_COUNT; bits++) {
            KilnSchedule s = combo(bits), res;
            if (!sched_resolve(&s, NULL, &res, NULL, 0)) continue;
            unsigned rb = 0;
            for (int i = 0; i < SCHED_COUNT; i++) rb |= (unsigned)sched_get(&res, i) << i;
            if (done[rb]++ || (rb & k_kernels[k].need) != k_kernels[k].need || (rb & k_kernels[k].skip)) continue;
            KilnCompileResult r;
            KilnStatus st = compile(&k_kernels[k], &res, KILN_EMIT_CUBIN, &r);
            char names[128];
            sched_names(&res, " ", names, sizeof names);
            ck_assert_msg(st == KILN_OK && r.output_size > 0, "%s %s %s=%s %d warps [%s]: %s\n%s",
                          k_kernels[k].file, k_kernels[k].kernel, k_kernels[k].defs[0].name,
                          k_kernels[k].defs[0].value, k_kernels[k].warps, names, kiln_status_name(st),
                          r.diagnostics ? r.diagnostics : "");
            kiln_compile_result_free(&r);
            compiled++;
        }
    }
    ck_assert_int_gt(compiled, 4 * 16 + 8);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("codegen_e2e_schedule_combos");
    TCase *tc = tcase_create("refused");
    tcase_add_test(tc, refused_combinations_name_the_options);
    suite_add_tcase(s, tc);
    TCase *pt = pu_ptxas_tcase(s, 1200);
    tcase_add_test(pt, allowed_combinations_assemble);
    return s;
}

PU_MAIN(suite)
