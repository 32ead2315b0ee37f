/* cg_mbarrier.c — the mbarrier hand-off of a software-pipelined loop's stages
 * (pipeline.mbarrier, the schedule option `mbarrier`: pass_pipeline.c marks
 * the loop, pass_sram_alloc.c gives it 16 x S bytes on the loop op itself,
 * cg_pipeline.c calls these at the places below). Replaces the per-iteration
 * `cp.async.wait_group; bar.sync` with two mbarriers per stage s:
 *   full[s]  (count = threads): each thread issues its copies into slot s and
 *            then `cp.async.mbarrier.arrive.noinc` on it: the arrival happens
 *            when that thread's copies have landed, and .noinc makes it one of
 *            the `count` arrivals the phase expects (not an extra one), so the
 *            phase completes when every thread's copies are in SRAM;
 *   empty[s] (count = threads): each thread arrives after its last read of
 *            slot s in an iteration (the op pl->release_after; with a
 *            wgmma.pending dot, the previous iteration's slot after the dot's
 *            wait_group 1 retired the group reading it).
 * Iteration i reads slot i % S after waiting for phase (i / S) & 1 of
 * full[i % S]; a thread refills slot j % S with iteration j's copies after
 * waiting for phase (j / S - 1) & 1 of empty[j % S] (iteration j - S read);
 * for j < S that is the phase "before phase 0", which try_wait.parity reports
 * complete at once (parity 1 on a fresh barrier), so the first S issues need
 * no branch. Parity waits are exact here because no barrier runs two phases
 * ahead of a waiter: phase k + 1 of full[s] needs every thread's copies of
 * iteration s + (k + 1) S, issued only after every thread read iteration
 * s + k S, which the waiter has not done yet (and symmetrically for empty).
 *
 * Lifetime: thread 0 initialises the 2 S barriers before the prologue's
 * copies, then fence.mbarrier_init (sm_90) and bar.sync publish them. After
 * the loop every thread waits for the full phases of the iterations issued
 * past the end (their copies read nothing but still arrive), a bar.sync
 * makes sure nobody still waits, and thread 0 invalidates the barriers
 * (mbarrier.inval): their bytes may then be reused (the loop's SRAM is
 * marked pending, so the next user over them places a barrier first).
 *
 * Invariants: emitted only for loops with pipeline.mbarrier (other kernels'
 * PTX is unchanged); every thread runs every arrive (the copies' own
 * predicates do not guard the arrival), so the counts are exact.
 *
 * Example (S = 2, one warpgroup, iteration i of attention's key loop):
 *     mbarrier.try_wait.parity [empty + 8*((i+1)%2)], ((i+1)/2 + 1) & 1   (spin)
 *     cp.async.cg.shared.global ... ; cp.async.mbarrier.arrive.noinc [full + 8*((i+1)%2)]
 *     mbarrier.try_wait.parity [full + 8*(i%2)], (i/2) & 1                 (spin)
 *     QK^T, softmax, PV; mbarrier.arrive [empty + 8*(i%2)]
 */
#include "cg_internal.h"
#include "../gpuir/gpuir.h"

#include <stdio.h>

static int threads(const CgCtx *c) { return c->f->sched.num_warps * 32; }

/* The i32 shared address of full[slot] (empty: empty[slot]). */
static LLVMValueRef mbar_addr(CgCtx *c, const GpPipeLoop *pl, bool empty, LLVMValueRef slot)
{
    int base = (int)pl->mbar->offset + (empty ? 8 * pl->stages : 0);
    LLVMValueRef off = LLVMBuildAdd(c->b, cg_i32(c, base), LLVMBuildMul(c->b, slot, cg_i32(c, 8), ""), "");
    return LLVMBuildPtrToInt(c->b, cg_smem_ptr_abs(c, off), c->t_i32, "");
}

/* Spin until the phase of parity `parity` of the mbarrier at `addr` has
 * completed (try_wait suspends for a while in hardware on sm_90; sm_80 has
 * only test_wait). The labels are local to the braces. */
static void wait_parity(CgCtx *c, LLVMValueRef addr, LLVMValueRef parity)
{
    char text[256];
    snprintf(text, sizeof text,
             "{\n\t.reg .pred p;\n\tMBAR_WAIT:\n\t"
             "mbarrier.%s.parity.shared::cta.b64 p, [$0], $1;\n\t"
             "@!p bra MBAR_WAIT;\n\t}",
             c->sm >= 90 ? "try_wait" : "test_wait");
    LLVMValueRef args[2] = {addr, parity};
    cg_asm(c, c->t_void, text, "r,r,~{memory}", 2, args, true);
}

static LLVMValueRef phase_parity(CgCtx *c, const GpPipeLoop *pl, LLVMValueRef iter, int flip)
{
    LLVMValueRef k = LLVMBuildUDiv(c->b, iter, cg_i32(c, pl->stages), "");
    return LLVMBuildAnd(c->b, LLVMBuildAdd(c->b, k, cg_i32(c, flip), ""), cg_i32(c, 1), "");
}

void cg_mbar_init(CgCtx *c, const GpPipeLoop *pl)
{
    int lo = (int)pl->mbar->offset, hi = lo + (int)pl->mbar->bytes;
    for (int j = 0; j < c->npending; j++)
        if (c->pending[j].lo < hi && lo < c->pending[j].hi) {
            cg_barrier(c);   /* an earlier user of these bytes must be done first */
            break;
        }
    StrBuf t;
    sb_init(&t);
    sb_puts(&t, "{\n\t.reg .pred p;\n\tsetp.eq.u32 p, $1, 0;\n\t");
    for (int s = 0; s < 2 * pl->stages; s++)
        /* full[s]: a TMA loop's one arrival (the elected thread's expect_tx, cg_tma.c), else
         * every issuing thread's (the producer warpgroup's with warp_spec, cg_warp_spec.c) */
        sb_printf(&t, "@p mbarrier.init.shared::cta.b64 [$0+%d], %d;\n\t", 8 * s,
                  s < pl->stages ? (pl->tma ? 1 : cg_ws_full_count(c)) : threads(c));
    if (c->sm >= 90) sb_puts(&t, "fence.mbarrier_init.release.cluster;\n\t");
    sb_puts(&t, "}");
    LLVMValueRef args[2] = {mbar_addr(c, pl, false, cg_i32(c, 0)), c->tid};
    cg_asm(c, c->t_void, t.data, "r,r,~{memory}", 2, args, true);
    sb_free(&t);
    cg_barrier_cta(c);   /* warp_spec: the producer warpgroup's too (cg_warp_spec.c) */
    cg_smem_pending_add(c, lo, hi);
}

void cg_mbar_wait_empty(CgCtx *c, const GpPipeLoop *pl, LLVMValueRef slot, LLVMValueRef iter)
{
    LLVMValueRef addr = mbar_addr(c, pl, true, slot), parity = phase_parity(c, pl, iter, 1);
    if (!pl->tma) {
        wait_parity(c, addr, parity);
        return;
    }
    /* TMA (cg_tma.c): thread 0 alone refills the slot, so it alone waits for it */
    LLVMBasicBlockRef w = cg_block(c, "tma_empty_wait"), done = cg_block(c, "tma_empty_done");
    LLVMBuildCondBr(c->b, LLVMBuildICmp(c->b, LLVMIntEQ, c->tid, cg_i32(c, 0), ""), w, done);
    LLVMPositionBuilderAtEnd(c->b, w);
    wait_parity(c, addr, parity);
    LLVMBuildBr(c->b, done);
    LLVMPositionBuilderAtEnd(c->b, done);
}

void cg_mbar_wait_full(CgCtx *c, const GpPipeLoop *pl, LLVMValueRef slot, LLVMValueRef iter)
{
    wait_parity(c, mbar_addr(c, pl, false, slot), phase_parity(c, pl, iter, 0));
    cg_fence_proxy_async(c);   /* wgmma reads the slot through the async proxy */
}

void cg_mbar_arrive_copies(CgCtx *c, const GpPipeLoop *pl, LLVMValueRef slot)
{
    LLVMValueRef a = mbar_addr(c, pl, false, slot);
    cg_asm(c, c->t_void, "cp.async.mbarrier.arrive.noinc.shared::cta.b64 [$0];", "r,~{memory}", 1, &a, true);
}

LLVMValueRef cg_mbar_full_addr(CgCtx *c, const GpPipeLoop *pl, LLVMValueRef slot)
{
    return mbar_addr(c, pl, false, slot);
}

void cg_mbar_release(CgCtx *c, const GpPipeLoop *pl)
{
    if (!pl->pending_dot) {   /* every iteration releases its own slot */
        LLVMValueRef a = mbar_addr(c, pl, true, c->pipe_slot);
        cg_asm(c, c->t_void, "{\n\t.reg .b64 st;\n\tmbarrier.arrive.shared::cta.b64 st, [$0];\n\t}",
               "r,~{memory}", 1, &a, true);
        return;
    }
    /* the group just retired read the previous iteration's slot (none before iteration 0) */
    LLVMValueRef prev = LLVMBuildURem(c->b, LLVMBuildAdd(c->b, c->pipe_slot, cg_i32(c, pl->stages - 1), ""),
                                      cg_i32(c, pl->stages), "");
    LLVMValueRef args[2] = {mbar_addr(c, pl, true, prev), c->pipe_iter};
    cg_asm(c, c->t_void,
           "{\n\t.reg .pred p;\n\t.reg .b64 st;\n\tsetp.ne.u32 p, $1, 0;\n\t"
           "@p mbarrier.arrive.shared::cta.b64 st, [$0];\n\t}",
           "r,r,~{memory}", 2, args, true);
}

void cg_mbar_drain(CgCtx *c, const GpPipeLoop *pl, LLVMValueRef trips)
{
    for (int k = 0; k < (c->ws_warps ? 0 : pl->ahead); k++) {   /* warp_spec: none past the end */
        LLVMValueRef j = LLVMBuildAdd(c->b, trips, cg_i32(c, k), "");
        LLVMValueRef slot = LLVMBuildURem(c->b, j, cg_i32(c, pl->stages), "");
        wait_parity(c, mbar_addr(c, pl, false, slot), phase_parity(c, pl, j, 0));
    }
    cg_barrier_cta(c);   /* nobody waits on them any more (warp_spec: the producer is done with them) */
    StrBuf t;
    sb_init(&t);
    sb_puts(&t, "{\n\t.reg .pred p;\n\tsetp.eq.u32 p, $1, 0;\n\t");
    for (int s = 0; s < 2 * pl->stages; s++) sb_printf(&t, "@p mbarrier.inval.shared::cta.b64 [$0+%d];\n\t", 8 * s);
    sb_puts(&t, "}");
    LLVMValueRef args[2] = {mbar_addr(c, pl, false, cg_i32(c, 0)), c->tid};
    cg_asm(c, c->t_void, t.data, "r,r,~{memory}", 2, args, true);
    sb_free(&t);
    cg_smem_pending_add(c, (int)pl->mbar->offset, (int)(pl->mbar->offset + pl->mbar->bytes));
}
