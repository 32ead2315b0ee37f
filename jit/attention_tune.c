/* attention_tune.c — the attention calls' default schedules: one table, one row format,
 * one matching rule.
 *
 * What: every default tile, warp count, stage count and schedule option of
 * kiln_attention_fwd, kiln_attention_bwd (its dK/dV and dQ kernels) and
 * kiln_attention_decode is a row of k_tune below; rt_attn_tune finds a call's row. The
 * calls apply their own rules on top (the caller's tiles replace the table's, and then
 * the table's warps, stages and options give way: attention.c, attention_bwd.c,
 * attention_decode.c).
 *
 * Invariants: the matching rule is the same for every call: the LAST row of the call
 * whose head dim equals the call's, whose min_sm <= the device's sm_version, whose causal
 * is -1 or the call's, and whose max_n is 0 or >= the call's seqlen_q wins (later rows
 * refine earlier ones); none: NULL. Every head dim a call accepts has a min_sm 0 row (the
 * tests check it), and every row's schedule resolves (sched_resolve).
 *
 * Example: rt_attn_tune(RT_TUNE_FWD, 90, 128, 1, 512) is the "90, 128, 1, 1024" row
 * (64 x 64 tiles, 4 warps, 2 stages); at seqlen_q 4096 the "90, 128, -1, 0" row.
 */
#include "jit_internal.h"

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static const RtTuneRow k_tune[] = {
    /* ---- kiln_attention_fwd ----
     * The min_sm 0 rows are the program's own defaults (BLOCK_M 128, BLOCK_N 64, 8 warps, 2
     * stages), except head dim 256, whose 128-row tiles would not fit the shared memory of
     * pre-Hopper parts and spill registers everywhere; the sm_90 rows come from H200 sweeps
     * (bench_attention.py --sweep, docs/performance.md). Retune after GPU benchmarks
     * (tools/bench/).
     * call       min_sm d  causal max_n  BM   BN  warps stages  schedule  dq_pass */
    {RT_TUNE_FWD, 0,   32,  -1, 0,    128, 64, 8, 2, {0}, 0},
    {RT_TUNE_FWD, 0,   64,  -1, 0,    128, 64, 8, 2, {0}, 0},
    /* sm_90 rows: H200 sweep with wgmma (commit c29f6bd; bench_attention.py --sweep,
     * f16, TFLOP/s at N = 512 / 1024 / 4096 / 16384, docs/performance.md). One
     * warpgroup per CTA throughout: 4 warps, so two CTAs share an SM and one's
     * softmax overlaps the other's wgmma. d = 64: 64-row blocks (16 rows per warp,
     * small register files); 128 keys per block without the mask, 64 with it up
     * to N = 2048 (the diagonal blocks cost less). */
    {RT_TUNE_FWD, 90,  64,  -1, 0,    64, 128, 4, 2, {0}, 0},   /* 308/377/450/472; causal N = 16384: 453 (64x64: 431) */
    {RT_TUNE_FWD, 90,  64,   1, 2048, 64,  64, 4, 2, {0}, 0},   /* causal 209/286 (64x128: 181/260) */
    {RT_TUNE_FWD, 0,   96,  -1, 0,    128, 64, 8, 2, {0}, 0},
    {RT_TUNE_FWD, 0,  128,  -1, 0,    128, 64, 8, 2, {0}, 0},
    /* d = 128: two consumer warpgroups of 64 rows on 128 x 128 tiles, fed by a producer
     * warpgroup whose thread 0 issues TMA copies of K and V (warp specialisation with
     * tma, FlashAttention-3's forward structure; H200 sweep of 2026-11-28, f16, N = 1024 /
     * 2048 / 4096 / 16384: 435/517/571/614, causal 276/379/471/564, against 409/482/528/566
     * and 275/369/439/511 for the previous row, 128 x 64 on 4 warps; docs/performance.md).
     * The table's tma gives way where K/V cannot be mapped (attention.c). Causal short
     * sequences keep 64-row blocks (more CTAs, cheaper diagonals; 275 at N = 1024, a tie). */
    /* + overlap (FA3's intra-warpgroup overlap, which now keeps TMA: tma_plan.c): H200 sweep of
     * 2026-11-29 (tools/device_sweep_fa3.sh 128), N 4096 / 16384: 594/672, causal 486/616,
     * against 576/599 and 471/571 without it; ping-pong on top loses (526/578). */
    {RT_TUNE_FWD, 90, 128,  -1, 0,    128, 128, 8, 2, {.warp_specialize = 1, .tma = 1, .overlap = 1}, 0},
    {RT_TUNE_FWD, 90, 128,   1, 1024, 64,  64, 4, 2, {0}, 0},   /* causal 196/278 */
    {RT_TUNE_FWD, 0,  256,  -1, 0,    64,  32, 4, 2, {0}, 0},
    /* d = 256 (H200 sweep of 2026-11-24, f16 N 4096/8192, docs/performance.md): two
     * warpgroups of 64 rows each beat one CTA of 64 x 64 on 4 warps by 1.6x (574/604
     * against 359/376 TFLOP/s; causal 396/434 against 306/338), and ping-pong adds 6-7%
     * causal (418/462) while it costs 14% without the mask (494/519). Warp
     * specialisation (a producer warpgroup on top of the 8 warps, setmaxnreg; sweep of
     * 2026-11-24 late night, docs/performance.md) beats both: 626/656 against 562/590,
     * causal 497/552 against 402/440 (and ping-pong's 418/462); it loses at d 64 and 128
     * (1 consumer warpgroup, or 8 warps against 128x64/4), so only these rows take it. */
    {RT_TUNE_FWD, 90, 256,  -1, 0,    128, 64, 8, 2, {.warp_specialize = 1}, 0},
    {RT_TUNE_FWD, 90, 256,   1, 0,    128, 64, 8, 2, {.warp_specialize = 1}, 0},

    /* ---- kiln_attention_bwd: the dK/dV kernel and the dQ kernel, a row each ----
     * dK/dV programs keep dK, dV (f32) for BLOCK_N keys in registers and K, V in SRAM while
     * they walk the query rows BLOCK_M at a time (the keys are every dot's M: FlashAttention-2/3's
     * transposed step); the dQ programs keep dQ for BLOCK_M rows and Q, dO in SRAM while they
     * walk the keys BLOCK_N at a time (the dQ row's BLOCK_M also gives the row-wise kernels'
     * blocks: pre and cvt). 8 warps halve each thread's share of the accumulators.
     * sm_90 rows: every dot of both programs on wgmma (BLOCK_N keys = 16 x warps, BLOCK_M rows
     * of the dQ pass likewise; head dim 256: 8 warps on 64, below) and Q/dO (K/V in the dQ pass) copied by cp.async, 2 stages.
     * Chosen by ptxas -v (sm_90a, f16): no spill in the dQ pass and in the dK/dV kernel without
     * the atomic dQ; with it (COMPUTE_DQ) up to 148 bytes at d 96/128 (the extra dS^T K dot).
     * tests/attention/test_e2e_attn_bwd_ptx.c compiles every row and checks the wgmma counts.
     * stages 0: the program's own (1).
     * Timed on the H200 (bench_attention_bwd.py --quick --schedules, f16, N 1k-16k, docs/performance.md):
     * 64 x 64 on 4 warps with the separate dQ pass beat every other schedule at d 64 and 128
     * (d 128: 313-340 TFLOP/s against 241-304 at 32 x 128 / 8 warps, and 96-110 with the atomic
     * dQ at 64 x 64), so the sm_90 rows take it, and `dq_pass` = 1: the separate dQ pass also for
     * non-deterministic calls (the atomic dQ, an extra dS^T K dot plus f32 atomics per step, is
     * the slower algorithm there; the caller allowed nondeterminism, it did not ask for it). Still
     * so once dS K is a wgmma added from its accumulator by red.global.add.v2.f32 (the atomic dQ
     * at 64 x 64 / 4 / 2 went from 96-122 to 117-249 TFLOP/s: 0.55-0.88x of the dQ pass,
     * docs/performance.md "The atomic dQ from the accumulator"). d 96 takes d 128's row (checked by
     * the GPU backward test, not timed).
     * call            min_sm d  causal max_n  BM   BN  warps stages  schedule  dq_pass */
    {RT_TUNE_BWD_DKDV, 0,   32, -1, 0,    32, 128, 8, 0, {0}, 0},
    {RT_TUNE_BWD_DQ,   0,   32, -1, 0,    64,  32, 4, 0, {0}, 0},
    {RT_TUNE_BWD_DKDV, 0,   64, -1, 0,    32, 128, 8, 0, {0}, 0},
    {RT_TUNE_BWD_DQ,   0,   64, -1, 0,   128,  32, 8, 0, {0}, 0},
    {RT_TUNE_BWD_DKDV, 0,   96, -1, 0,    16,  64, 8, 0, {0}, 0},
    {RT_TUNE_BWD_DQ,   0,   96, -1, 0,    64,  32, 8, 0, {0}, 0},
    {RT_TUNE_BWD_DKDV, 0,  128, -1, 0,    16,  64, 8, 0, {0}, 0},
    {RT_TUNE_BWD_DQ,   0,  128, -1, 0,    64,  32, 8, 0, {0}, 0},
    {RT_TUNE_BWD_DKDV, 0,  256, -1, 0,    16,  32, 8, 0, {0}, 0},
    {RT_TUNE_BWD_DQ,   0,  256, -1, 0,    32,  16, 8, 0, {0}, 0},
    {RT_TUNE_BWD_DKDV, 90,  64, -1, 0,    64,  64, 4, 2, {0}, 0},
    {RT_TUNE_BWD_DQ,   90,  64, -1, 0,    64,  64, 4, 2, {0}, 1},
    {RT_TUNE_BWD_DKDV, 90,  96, -1, 0,    64,  64, 4, 2, {0}, 0},
    {RT_TUNE_BWD_DQ,   90,  96, -1, 0,    64,  64, 4, 2, {0}, 1},
    {RT_TUNE_BWD_DKDV, 90, 128, -1, 0,    64,  64, 4, 2, {0}, 0},
    {RT_TUNE_BWD_DQ,   90, 128, -1, 0,    64,  64, 4, 2, {0}, 1},
    /* d 256 (FlashAttention-3's hdim 256 backward: kBlockM = kBlockN = 64, two MMA
     * warpgroups): one warpgroup of 64 keys would hold dK and dV (f32, 64 x 256) in 256
     * registers a thread, so 8 warps split every dot's N instead (#mma<C, wm=4, wn=2, rn>,
     * pass_accelerate_dot.c): warpgroup g owns the head-dim columns [128 g, 128 g + 128) of
     * dK, dV (64 + 64 registers) and half the queries of S^T, dP^T; P^T and dS^T go through
     * SRAM as both warpgroups' A operand. Every dot on wgmma (the fallback was mma.sync at
     * 16 x 32 tiles). ptxas -v (sm_90a, f16/bf16, 2 stages): dK/dV 255 registers, 132 bytes of
     * spill stores (80 causal); the dQ pass 235 (254 causal), no spill. Not timed yet. */
    {RT_TUNE_BWD_DKDV, 90, 256, -1, 0,    64,  64, 8, 2, {0}, 0},
    {RT_TUNE_BWD_DQ,   90, 256, -1, 0,    64,  64, 8, 2, {0}, 1},
    /* FlashAttention-3's dK/dV structure (FLAT_GROUP, attention_bwd.c): 128 keys on two consumer
     * warpgroups, a producer warpgroup streaming Q and dO by TMA, FA3's 24 / 240 register split
     * (lean_producer), the dQ pass at 128 x 64 / 8 likewise. H200 (bench_attention_bwd.py --quick,
     * 2026-11-29, deterministic plan, f16, N 1k/4k/16k): d 64 246/296/305 against 180/216/230 for
     * the rows above; d 128 causal 226/311/346 against 224/282/305. It loses at d 64 causal
     * (163/245/286 against 216/297/315) and d 128 without the mask (231/283/290 against 253/304/313),
     * which keep the rows above. Not timed yet, so not rows: the same structure with the atomic dQ
 * (64 x 128 / 8 / 2, a non-deterministic caller's tiles) and at d 256 (64 x 64 / 8 / 2, both
 * kernels), which sram-alloc now keeps on the mbarrier ring although their loop bodies stage
 * dS^T (P^T) through SRAM: tools/device_bench_bwd.sh's candidates
 * d64.128:64x128/8/2/ws/tma/lp+128x64/8/2 and d256:64x64/8/2/ws/tma/lp; ptxas sm_90a at 240
 * registers (tests/attention/test_e2e_attn_bwd_ptx.c fa3_ws_body_buffers_sm90): the atomic dQ
 * spills 148 bytes at d 128 (240 causal), none at d 64, 108 at d 256 causal; d 256's dK/dV 4,
 * its dQ pass none. */
    {RT_TUNE_BWD_DKDV, 90,  64,  0, 0,    64, 128, 8, 2, {.warp_specialize = 1, .tma = 1, .lean_producer = 1}, 0},
    {RT_TUNE_BWD_DQ,   90,  64,  0, 0,   128,  64, 8, 2, {.warp_specialize = 1, .tma = 1, .lean_producer = 1}, 1},
    {RT_TUNE_BWD_DKDV, 90, 128,  1, 0,    64, 128, 8, 2, {.warp_specialize = 1, .tma = 1, .lean_producer = 1}, 0},
    {RT_TUNE_BWD_DQ,   90, 128,  1, 0,   128,  64, 8, 2, {.warp_specialize = 1, .tma = 1, .lean_producer = 1}, 1},

    /* ---- kiln_attention_decode: the split kernel ----
     * Keys per block by head dim: the tiles stay small (K and V blocks of 8 KB in f16) so
     * two stages fit beside each other; one warpgroup per CTA. BM 0: the call packs the
     * group's query heads x the new tokens into BLOCK_M itself (attention_decode.c).
     * call          min_sm d  causal max_n  BM  BN  warps stages  schedule  dq_pass */
    {RT_TUNE_DECODE, 0,  32, -1, 0,    0, 64, 4, 2, {0}, 0},
    {RT_TUNE_DECODE, 0,  64, -1, 0,    0, 64, 4, 2, {0}, 0},
    {RT_TUNE_DECODE, 0,  96, -1, 0,    0, 64, 4, 2, {0}, 0},
    {RT_TUNE_DECODE, 0, 128, -1, 0,    0, 64, 4, 2, {0}, 0},
    {RT_TUNE_DECODE, 0, 256, -1, 0,    0, 32, 4, 2, {0}, 0},
};

const RtTuneRow *rt_attn_tune(RtTuneCall call, int sm_version, int head_dim, int causal, int seqlen_q)
{
    const RtTuneRow *t = NULL;
    for (size_t i = 0; i < COUNT(k_tune); i++) {
        const RtTuneRow *r = &k_tune[i];
        if (r->call == call && r->head_dim == head_dim && r->min_sm <= sm_version &&
            (r->causal < 0 || r->causal == (causal != 0)) && (!r->max_n || seqlen_q <= r->max_n))
            t = r;
    }
    return t;
}

const RtTuneRow *rt_attn_tune_row(int i) { return i >= 0 && i < (int)COUNT(k_tune) ? &k_tune[i] : NULL; }
