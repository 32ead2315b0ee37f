/* cg_pipeline.c — lowering of software-pipelined loops (the plan is made by
 * pass_pipeline.c and lives on the IR as attributes; docs/tensor_cores.md).
 *
 * What it does: reads the plan back from the IR into GpPipeLoop (which loads
 * of a loop are copied ahead, their convert_layout and cast, the slice of
 * body ops their addresses need, where the prologue goes), then emits the
 * prologue (copies of iterations 0 .. D-1, D = S - 1 iterations ahead, or
 * S - 2 when the body's wgmma dot stays in flight: wgmma.pending), the loop
 * (wait, barrier, issue of iteration i + D, body with ldmatrix or wgmma
 * descriptors on the current slot) and the final waits. The schedule and its group accounting are described in
 * pass_pipeline.c's header; the IR attributes in docs/tensor_cores.md section 0:
 *     for ... {pipeline.stages = S, pipeline.issue = K}   K ops before the loop
 *     %a = load ... {pipeline.slot_bytes = B, smem.offset = O, ...}
 * With pipeline.mbarrier the waits, barriers and commits give way to the
 * mbarrier hand-off (cg_mbarrier.c; plan_mbarrier: how far ahead, where the
 * body releases its slots).
 *
 * Invariants: the plan read here is exactly the pass's (gp_pipeline_slice is
 * the one definition of the slice, shared with the pass); nothing here
 * decides anything the IR does not say.
 */
#include "cg_internal.h"
#include "../gpuir/gpuir.h"

#include <stdio.h>
#include <string.h>

/* ---- lowering ---- */

static LLVMValueRef icmp_lt(CgCtx *c, IrElem e, LLVMValueRef a, LLVMValueRef b)
{
    return LLVMBuildICmp(c->b, ir_elem_is_signed(e) ? LLVMIntSLT : LLVMIntULT, a, b, "");
}

static void commit(CgCtx *c) { cg_asm(c, c->t_void, "cp.async.commit_group;", "~{memory}", 0, NULL, true); }

static void wait_group(CgCtx *c, int n)
{
    char text[48];
    snprintf(text, sizeof text, "cp.async.wait_group %d;", n);
    cg_asm(c, c->t_void, text, "~{memory}", 0, NULL, true);
}

/* Bytes from chunk `from`'s SRAM slot to chunk `to`'s when the swizzle moves
 * them by a constant (gp_swizzle_shift). Then `to` is addressed as [from's
 * register + immediate]. */
static bool swizzle_shift(const GpGeom *g, const GpSwizzle *sw, int mr_dim, int mc_dim, int from, int to, int *bytes)
{
    int dv[GP_MAX_RANK];
    gp_geom_reg_delta(g, from, to, dv);
    if (!gp_swizzle_shift(sw, dv[mr_dim], dv[mc_dim], bytes)) return false;
    *bytes *= sw->elem_bytes;
    return true;
}

/* The copies of one load for the iteration whose slice values are lowered.
 * Both addresses of a chunk are derived from a few registers where the tile
 * allows: the global one walks an affine pointer tile from its first chunk by
 * invariant steps (cg_affine.c says why; the add is opaque to LLVM, or its LICM
 * would re-associate the walk and hoist one 64-bit pointer per chunk again), the
 * SRAM one is an immediate from an earlier chunk's (swizzle_shift). */
static void issue_load(CgCtx *c, const GpPipeLoad *l, LLVMValueRef slot_base, LLVMValueRef valid)
{
    IrOp *ld = l->load;
    GpGeom g;
    if (!cg_geom_of(c, ld->res[0], &g)) return;
    CgTile *pt = cg_get(c, ld->args[0]);
    CgTile *mk = ld->nargs > 1 && ld->args[1]->type.rank ? cg_get(c, ld->args[1]) : NULL;
    LLVMValueRef smask = ld->nargs > 1 && !ld->args[1]->type.rank ? cg_get(c, ld->args[1])->r[0] : NULL;
    int mr_dim = 1 - l->fast_dim, anchor = -1;
    GpSwizzle sw = gp_swizzle_for(ld->res[0]->type.shape[mr_dim], ld->res[0]->type.shape[l->fast_dim], 2);
    bool exact = !gp_geom_replicated(&g);        /* register index = thread base + constant */
    LLVMValueRef tb[GP_MAX_RANK], idx[GP_MAX_RANK], coef[GP_MAX_RANK];
    bool walk = exact && cg_affine_coefs(c, ld->args[0], coef);
    LLVMValueRef src = pt->r[0], dst = NULL;
    cg_thread_base(c, &g, tb);
    for (int i = 0; i < g.nregs; i += 8) {
        if (walk && i) {
            LLVMValueRef sa[2] = {src, cg_affine_step(c, &g, coef, i - 8, i, 2)};
            src = cg_asm(c, LLVMTypeOf(src), "add.s64 $0, $1, $2;", "=l,l,l", 2, sa, false);
        } else if (!walk) {
            src = pt->r[i];
        }
        int imm = 0;
        if (!exact || anchor < 0 || !swizzle_shift(&g, &sw, mr_dim, l->fast_dim, anchor, i, &imm)) {
            cg_reg_index(c, &g, tb, i, idx);
            LLVMValueRef off = cg_swizzle_offset_ir(c, &sw, idx[mr_dim], idx[l->fast_dim]);
            off = LLVMBuildAdd(c->b, slot_base, LLVMBuildMul(c->b, off, cg_i32(c, 2), ""), "");
            dst = LLVMBuildPtrToInt(c->b, cg_smem_ptr_abs(c, off), c->t_i32, "");
            anchor = i;
            imm = 0;
        }
        LLVMValueRef pred = LLVMBuildAnd(c->b, valid, cg_reg_owner(c, &g, tb, i), "");
        if (mk) pred = LLVMBuildAnd(c->b, pred, mk->r[i], "");
        if (smask) pred = LLVMBuildAnd(c->b, pred, smask, "");
        /* Inline PTX: LLVM 19 cannot select the cp.async intrinsics with
         * 32-bit shared pointers (-nvptx-short-ptr). src-size 0 reads nothing
         * and zero-fills the 16 bytes. */
        char text[80];
        snprintf(text, sizeof text, "cp.async.cg.shared.global [$0+%d], [$1], 16, $2;", imm);
        LLVMValueRef args[3] = {dst, src, LLVMBuildSelect(c->b, pred, cg_i32(c, 16), cg_i32(c, 0), "")};
        cg_asm(c, c->t_void, text, "r,l,r,~{memory}", 3, args, true);
    }
}

/* Wait until iteration i's copies have landed (`ahead` - 1 groups may stay
 * in flight) and every thread is past iteration i - 1 (ahead = S - 1: whose
 * slot is reused) or past its wgmma.wait_group 1, so iteration i - 2's
 * wgmma group is complete in every warpgroup (ahead = S - 2: that slot is
 * reused, while i - 1's group may still read its own). */
static void sync_slots(CgCtx *c, int ahead)
{
    wait_group(c, ahead - 1);
    cg_fence_proxy_async(c);
    cg_barrier(c);
}

/* Evaluate the slice with the induction variable = ivv and issue every
 * pipelined load of the loop into `slot`; the body's own values are restored
 * afterwards. Loads in the slice are guarded by `valid` (iteration ivv
 * exists), so a block table is never read past what the loop itself reads.
 * With `sync_ahead` (the loop body's issue when the slice loads), the slice,
 * its loads included, is evaluated before sync_slots: the load's latency then
 * overlaps the wait for the previous copies instead of stalling the copies. */
static bool issue_all(CgCtx *c, const GpPipeLoop *pl, LLVMValueRef ivv, LLVMValueRef valid, LLVMValueRef slot,
                      int sync_ahead, LLVMValueRef iter)
{
    IrBlock *body = pl->loop->regions[0];
    IrValue *iv = body->args[0];
    CgTile saved_iv = c->vals[iv->id];
    CgTile *saved = ARENA_ARRAY(c->arena, CgTile, pl->nslice + 1);
    for (int i = 0; i < pl->nslice; i++) saved[i] = c->vals[pl->slice[i]->res[0]->id];
    c->vals[iv->id].r = ARENA_ARRAY(c->arena, LLVMValueRef, 1);
    c->vals[iv->id].r[0] = ivv;
    c->vals[iv->id].n = 1;
    c->load_guard = pl->slice_loads ? valid : NULL;
    c->slice_eval = true;   /* cg_lower_op: lower the ops dead in place here */
    for (int i = 0; i < pl->nslice; i++)
        if (!cg_lower_op(c, pl->slice[i])) return false;
    c->slice_eval = false;
    c->load_guard = NULL;
    if (sync_ahead) sync_slots(c, sync_ahead);
    if (pl->mbarrier && iter && !c->ws_producer) cg_mbar_wait_empty(c, pl, slot, iter);   /* (the prologue's slots are fresh) */
    for (int j = 0; j < pl->nloads && !pl->tma; j++) {
        const GpPipeLoad *l = &pl->loads[j];
        LLVMValueRef base = LLVMBuildAdd(c->b, cg_i32(c, l->buf ? l->buf->offset : 0), LLVMBuildMul(c->b, slot, cg_i32(c, l->slot_bytes), ""), "");
        issue_load(c, l, base, valid);
    }
    if (pl->tma) cg_tma_issue(c, pl, slot, valid, cg_mbar_full_addr(c, pl, slot));   /* TMA: one thread, all loads */
    else if (pl->mbarrier && !c->ws_producer) cg_mbar_arrive_copies(c, pl, slot);   /* (the producer: once per iteration) */
    else if (!pl->mbarrier) commit(c);
    c->vals[iv->id] = saved_iv;
    for (int i = 0; i < pl->nslice; i++) c->vals[pl->slice[i]->res[0]->id] = saved[i];
    return true;
}

bool cg_pipeline_issue(CgCtx *c, const GpPipeLoop *pl, LLVMValueRef ivv, LLVMValueRef valid, LLVMValueRef slot)
{
    return issue_all(c, pl, ivv, valid, slot, 0, NULL);
}

bool cg_pipeline_prologue(CgCtx *c, GpPipeLoop *pl)
{
    if (pl->issued) return true;
    pl->issued = true;
    IrOp *op = pl->loop;
    IrElem ie = (IrElem)op->args[0]->type.elem;
    LLVMTypeRef it = cg_type(c, ie);
    LLVMValueRef lo = cg_get(c, op->args[0])->r[0], hi = cg_get(c, op->args[1])->r[0];
    LLVMValueRef step = cg_get(c, op->args[2])->r[0];
    /* The copies overwrite the stage buffers: earlier users of those bytes
     * must be done with them first. */
    for (int i = 0; i < pl->nloads; i++) {
        const GpSmemBuf *b = pl->loads[i].buf;
        for (int j = 0; b && j < c->npending; j++)
            if (c->pending[j].lo < b->offset + b->bytes && b->offset < c->pending[j].hi) {
                cg_barrier(c);
                break;
            }
    }
    if (pl->mbarrier) cg_mbar_init(c, pl);
    /* iterations 0 .. ahead - 1 (S - 2, or S - 3 with a wgmma.pending dot) */
    for (int j = 0; j < pl->ahead && !c->ws_warps; j++) {   /* warp_spec: the producer's copies */
        LLVMValueRef ivj = LLVMBuildAdd(c->b, lo, LLVMBuildMul(c->b, step, LLVMConstInt(it, (unsigned long long)j, 0), ""), "");
        if (!issue_all(c, pl, ivj, icmp_lt(c, ie, ivj, hi), cg_i32(c, j), 0, NULL)) return false;
    }
    return true;
}

bool cg_lower_for_pipelined(CgCtx *c, IrOp *op, GpPipeLoop *pl)
{
    IrBlock *body = op->regions[0];
    IrElem ie = (IrElem)op->args[0]->type.elem;
    LLVMTypeRef it = cg_type(c, ie);
    int S = pl->stages, D = pl->ahead;
    LLVMValueRef lo = cg_get(c, op->args[0])->r[0], hi = cg_get(c, op->args[1])->r[0];
    LLVMValueRef step = cg_get(c, op->args[2])->r[0];
    if (!cg_pipeline_prologue(c, pl)) return false;   /* unless issued earlier (issue_at) */
    LLVMBasicBlockRef pre = LLVMGetInsertBlock(c->b);
    LLVMBasicBlockRef header = cg_block(c, "pipe_header"), bb = cg_block(c, "pipe_body"),
                      exit = cg_block(c, "pipe_exit");
    LLVMBuildBr(c->b, header);
    LLVMPositionBuilderAtEnd(c->b, header);
    LLVMValueRef iv = LLVMBuildPhi(c->b, it, "iv");
    LLVMValueRef cnt = LLVMBuildPhi(c->b, c->t_i32, "iter");
    cg_set(c, body->args[0], 1)->r[0] = iv;
    cg_loop_carry_phis(c, op, pre);
    LLVMBuildCondBr(c->b, icmp_lt(c, ie, iv, hi), bb, exit);
    LLVMPositionBuilderAtEnd(c->b, bb);
    if (pl->mbarrier) cg_smem_pending_span(c, op, false);   /* the body's own buffers, over the back edge */
    else if (!pl->slice_loads) sync_slots(c, D);
    /* Issue iteration i + D before computing iteration i. D = S - 1: its
     * slot, (i - 1) % S, was last read by iteration i - 1, which every thread
     * has left at the barrier (sync_slots). So the copies overlap this whole
     * iteration (with S = 2 too), instead of only the S - 2 iterations after
     * it. D = S - 2 (wgmma.pending): the slot is (i - 2) % S, whose wgmma
     * group every warpgroup has waited for in iteration i - 1. */
    LLVMValueRef ivn = LLVMBuildAdd(c->b, iv, LLVMBuildMul(c->b, step, LLVMConstInt(it, (unsigned long long)D, 0), ""), "");
    LLVMValueRef cntn = LLVMBuildAdd(c->b, cnt, cg_i32(c, D), "");
    LLVMValueRef slotn = LLVMBuildURem(c->b, cntn, cg_i32(c, S), "");
    if (!c->ws_warps && !issue_all(c, pl, ivn, icmp_lt(c, ie, ivn, hi), slotn, pl->slice_loads && !pl->mbarrier ? D : 0, cntn))
        return false;   /* (warp_spec: the producer warpgroup issues them) */
    c->pipe_slot = LLVMBuildURem(c->b, cnt, cg_i32(c, S), "slot");
    c->pipe_iter = cnt;
    if (pl->mbarrier) cg_mbar_wait_full(c, pl, c->pipe_slot, cnt);
    c->pipe = pl;
    if (!cg_lower_block(c, body)) return false;
    c->pipe = NULL;
    LLVMValueRef next = LLVMBuildAdd(c->b, iv, step, "iv.next");
    LLVMValueRef cnext = LLVMBuildAdd(c->b, cnt, cg_i32(c, 1), "");
    LLVMBasicBlockRef latch = LLVMGetInsertBlock(c->b);
    LLVMBuildBr(c->b, header);
    LLVMAddIncoming(iv, &lo, &pre, 1);
    LLVMAddIncoming(iv, &next, &latch, 1);
    LLVMValueRef zero = cg_i32(c, 0);
    LLVMAddIncoming(cnt, &zero, &pre, 1);
    LLVMAddIncoming(cnt, &cnext, &latch, 1);
    if (!cg_loop_carry_close(c, op, latch)) return false;
    LLVMPositionBuilderAtEnd(c->b, exit);
    if (pl->mbarrier) cg_mbar_drain(c, pl, cnt);   /* cnt: the trip count here */
    else wait_group(c, 0);
    /* The last iteration's wgmma group is still in flight: its accumulator
     * is the loop's result at the yield position that carries the dot. */
    IrOp *y = pl->pending_dot ? body->last : NULL;
    for (int k = 0; y && y->op == IR_YIELD && k < y->nargs; k++)
        if (y->args[k] == pl->pending_dot->res[0]) cg_wgmma_wait_all(c, op->res[k]);
    return true;
}

/* A convert_layout of a pipelined load (any of them): ldmatrix from the
 * current slot, or a deferred tile there (read by the dots). */
bool cg_lower_pipelined_convert(CgCtx *c, IrOp *op, const GpPipeLoad *l)
{
    GpGeom g;
    cg_geom_of(c, op->res[0], &g);
    LLVMValueRef base = LLVMBuildAdd(c->b, cg_i32(c, l->buf ? l->buf->offset : 0),
                                     LLVMBuildMul(c->b, c->pipe_slot, cg_i32(c, l->slot_bytes), ""), "");
    CgRange stages = {l->buf ? l->buf->offset : 0, l->buf ? l->buf->offset + l->buf->bytes : 0};
    IrElem stored = (IrElem)l->load->res[0]->type.elem;
    const IrOp *t = op->args[0]->def;   /* through a trans: the slot's contiguous dim is the other one */
    int fd = t && t->op == IR_TRANS ? 1 - l->fast_dim : l->fast_dim;
    if (cg_mma_defer(c, op->res[0], fd, base, stored, stages)) return true;
    CgTile *out = cg_set(c, op->res[0], g.nregs);
    cg_mma_ldmatrix_tile(c, op->res[0], fd, base, stored, out);
    return true;
}
