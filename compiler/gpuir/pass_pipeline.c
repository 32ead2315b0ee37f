/* pass_pipeline.c — software pipelining of the loads that feed tensor-core
 * dots: cp.async copies into num_stages SRAM buffers, S - 1 iterations ahead.
 * This file makes the plan and writes it on the IR; cg_pipeline.c reads it
 * back and lowers the loop.
 *
 * The plan as IR attributes (GPU IR after this pass):
 *     %acc = for %k = ... {pipeline.stages = 3, pipeline.issue = 2} : (...) {
 *       %a = load %p, %m, %z {pipeline.slot_bytes = 4096} : tensor<64x32xf16, #L1>
 *       %x = convert_layout %a : tensor<64x32xf16, #L10>
 * pipeline.issue: how many ops before the loop its prologue is issued (0: at
 * the loop). Invariants: a load with pipeline.slot_bytes sits directly in
 * the body of a loop with pipeline.stages >= 2, and reaches a convert_layout
 * to an MMA A/B layout through its only use (or a cast's), or every one of
 * its uses is such a convert in that body.
 *
 * Which loads (the plan, gp_pass_pipeline): in a `for` whose step is a
 * positive constant, a load of f16/bf16 directly in the body
 *   - whose only use is a convert_layout to an MMA A/B-operand layout in the
 *     same body (the dot's operand staging, cg_dot_mma.c), possibly through
 *     an f16 <-> bf16 cast (then applied to the registers after ldmatrix);
 *     or whose uses (up to 4, no cast) are all such converts in the body,
 *     A and B mixed — the backward's Q and dO, read as dot(q, k^T)'s A and
 *     dot(ds^T, q)'s B: one copy, one slot, each convert reads it (an
 *     operand tile's swizzle depends on its rows and contiguous columns,
 *     not on which operand it is; ldmatrix .trans or the wgmma descriptor's
 *     major-ness covers the rest); a use may also be a 2-D trans whose only
 *     user is such a convert (the transposed backward's dot(k, trans(q))
 *     and dot(ds^T, q): the convert reads the slot with the other dim
 *     contiguous);
 *   - that moves 16 bytes per access (8 contiguous, 16-byte aligned halves
 *     per the axis info: gp_mem_vec == 8) — cp.async copies 16 bytes;
 *   - with no `other` or other = 0 (masked-off lanes are zero-filled);
 *   - whose pointer and mask depend only on the induction variable and on
 *     values defined outside the loop (the "slice": pure ops of the body,
 *     and loads when the loop writes no memory — a paged KV cache's
 *     block-table read), so they can be computed for any future iteration.
 *     A slice load of an iteration past the end reads nothing (it is
 *     predicated on the iteration existing, like the copies).
 * Anything else stays a plain load (narrow or unaligned rows, loads that
 * feed no dot, pointers advanced through loop-carried values).
 * num_stages = S: S buffers per load — S - 1 copies in flight while the
 * S-th is read (Triton's choice). S = 1 disables the pass.
 *
 * Code for a loop with trip count T (i = 0..T-1, slot(i) = i % S):
 *     prologue:  for j in 0..S-2: issue(j) into slot j; commit      (j < T guard)
 *     loop i:    cp.async.wait_group(S-2)   -- the group of iteration i is done
 *                barrier                    -- ... for every thread; and nobody
 *                                              still reads slot (i-1) % S
 *                issue(i + S - 1) into slot (i + S - 1) % S; commit
 *                                           -- that slot is (i - 1) % S: free
 *                compute(i)                 -- ldmatrix from slot i % S
 *     after:     cp.async.wait_group(0)
 * Group accounting: before iteration i, S - 1 + i groups were committed
 * (one per issue, empty ones included), so at most S - 2 may be pending
 * when group i must be complete: wait_group(S - 2) is exact. issue(j) for
 * j >= T (short loops, the last S - 1 iterations) still commits a group but
 * copies with src-size 0: no global access, zeros in SRAM, nobody reads them.
 * Masked lanes (mask false: rows past M, k's past K) copy with src-size 0 as
 * well: their SRAM chunk is zero-filled, exactly `other = 0`.
 * issue(j) evaluates the slice with iv = lo + j * step (re-lowering its pure
 * ops with the induction variable replaced; the body's own copies are dead
 * code unless used elsewhere).
 *
 * wgmma.pending = 1 on a dot (sm_90a, pending_dot): its wgmma group stays in
 * flight into the next iteration (wgmma.wait_group 1 after its commit, the
 * last wait after the loop: cg_dot_wgmma.c, cg_pipeline.c), CUTLASS's
 * mainloop. Iteration i's copies then must not refill the slot of i - 1,
 * still being read, so the loop runs them S - 2 ahead (slot (i - 2) % S,
 * whose group every warpgroup waited for in iteration i - 1, before the
 * barrier): prologue 0..S-3, wait_group(S - 3). Only with S >= 3, for the
 * body's only dot, in wgmma's grid, both operands this loop's slots (no
 * cast), its accumulator loop-carried and used only by its yield (nothing
 * reads the registers a group in flight writes); ir_verify holds the same.
 *     %88 = dot %86, %87, %53 {wgmma.pending = 1} : tensor<128x128xf32, #L0>
 *
 * pipeline.mbarrier = 1 on the loop (the schedule option `mbarrier`,
 * GpPassCtx.mbarrier): the stages are handed over through mbarriers instead
 * of wait_group + bar.sync (cg_mbarrier.c has the protocol; sram-alloc gives
 * the loop its barriers, or drops the attribute when the body has SRAM
 * buffers of its own and needs a CTA barrier anyway).
 *
 * Example (matmul 64x64x32 on 4 warps as 2 x 2, S = 3): loads a [64x32] and
 * b [32x64] of f16 become 2 x 3 buffers of 4 KB; prologue: 2 groups; loop:
 * wait_group(1); bar.sync; 2 + 2 cp.async per thread; commit; 8 ldmatrix.x4
 * + 16 mma.sync per warp.
 */
#include "gpuir.h"

#include <string.h>

/* ---- the plan ---- */

static bool is_zero_const(const IrValue *v)
{
    const IrOp *d = v->def;
    if (!d) return false;
    if (d->op == IR_SPLAT) return is_zero_const(d->args[0]);
    return d->op == IR_CONST && (ir_elem_is_float((IrElem)v->type.elem) ? d->fval == 0.0 : d->ival == 0);
}

static bool candidate(IrFunc *f, const GpAxisMap *axis, IrBlock *body, IrOp *ld, const int *uses, GpPipeLoad *l)
{
    if (ld->op != IR_LOAD) return false;
    IrValue *r = ld->res[0];
    if (r->type.rank != 2 || (r->type.elem != IR_F16 && r->type.elem != IR_BF16)) return false;
    if (!gp_pipeline_converts(f, body, ld, uses, l)) return false;
    if (gp_mem_vec(f, axis, ld) != 8) return false;
    if (ld->nargs > 2 && !is_zero_const(ld->args[2])) return false;
    if (gp_fast_value_dim(f, r) < 0 || r->type.shape[gp_fast_value_dim(f, r)] < 8) return false;
    return true;
}

/* Whether anything in `b` (nested regions included) writes memory. */
static bool block_writes(const IrBlock *b)
{
    for (const IrOp *x = b->first; x; x = x->next) {
        if (ir_op_info[x->op].flags & IRF_MEM_WRITE) return true;
        for (int r = 0; r < x->nregions; r++)
            if (block_writes(x->regions[r])) return true;
    }
    return false;
}

/* Whether the slice `in_slice` holds a load of the body. */
static bool slice_has_load(const IrBlock *body, const bool *in_slice, int nids)
{
    for (const IrOp *x = body->first; x; x = x->next)
        if (x->op == IR_LOAD && x->nres && x->res[0]->id < nids && in_slice[x->res[0]->id]) return true;
    return false;
}

typedef struct PlanCtx {
    IrFunc *f;
    const GpAxisMap *axis;
    const int *uses;
    int nloops;
    Diag *d;
    bool failed;          /* num_stages past IR_MAX_PIPE_STAGES on a loop that would be pipelined */
    bool mbarrier;        /* schedule option: hand the stages over through mbarriers */
} PlanCtx;

/* Whether `v` is needed by the prologue: a loop bound, or an operand from
 * outside the loop of a slice op or a pipelined load. */
static bool needed_by_prologue(const IrOp *loop, const IrBlock *body, const bool *in_slice, int nids,
                               const GpPipeLoop *pl, const IrValue *v)
{
    for (int i = 0; i < 3; i++)
        if (loop->args[i] == v) return true;
    for (const IrOp *x = body->first; x; x = x->next) {
        bool load = false;
        for (int j = 0; j < pl->nloads; j++) load |= pl->loads[j].load == x;
        if (!load && !(x->nres && x->res[0]->id < nids && in_slice[x->res[0]->id])) continue;
        for (int i = 0; i < x->nargs; i++)
            if (x->args[i] == v) return true;
    }
    return false;
}

/* The earliest op of the loop's block before which the prologue can go:
 * walking back from the loop, stop at a region op (another loop's copies and
 * waits, branches), a write to memory (the copies read global memory, which
 * must not move above a store) and the definition of anything the prologue
 * needs. Loads and pure ops may be crossed: the Q load of attention then
 * overlaps the first K/V copies instead of preceding them. */
static IrOp *issue_point(IrOp *loop, const IrBlock *body, const bool *in_slice, int nids, const GpPipeLoop *pl)
{
    IrOp *at = loop;
    for (IrOp *x = loop->prev; x; x = x->prev) {
        if (x->nregions || (ir_op_info[x->op].flags & IRF_MEM_WRITE)) break;
        bool needed = false;
        for (int r = 0; r < x->nres && !needed; r++)
            needed = needed_by_prologue(loop, body, in_slice, nids, pl, x->res[r]);
        if (needed) break;
        at = x;
    }
    return at;
}

/* The load of `pl` that `v` converts (directly, no cast), or NULL. */
static const GpPipeLoad *slot_operand(const GpPipeLoop *pl, const IrValue *v)
{
    const IrOp *cv = v->def;
    for (int i = 0; cv && cv->op == IR_CONVERT_LAYOUT && i < pl->nloads; i++)
        if (pl->loads[i].load == cv->args[0]->def && !pl->loads[i].cast) return &pl->loads[i];
    return NULL;
}

/* The dot of the loop whose wgmma group may stay in flight across the back
 * edge (wgmma.pending), or NULL: a wgmma kernel, S >= 3 stages, the body's
 * only dot, in wgmma's warp grid (every warp along M), both operands this
 * loop's stage slots, the accumulator loop-carried and read by nothing but
 * the yield that carries it. */
static IrOp *pending_dot(const IrFunc *f, const GpPipeLoop *pl, const int *uses)
{
    IrBlock *body = pl->loop->regions[0];
    if (ir_attr_int(&f->attrs, IR_ATTR_WGMMA, 0) != 1 || pl->stages < 3) return NULL;
    IrOp *dot = NULL;
    for (IrOp *x = body->first; x; x = x->next) {
        if (x->op != IR_DOT) continue;
        if (dot) return NULL;
        dot = x;
    }
    GpMmaFrag frag;
    int wm, wn;
    if (!dot || !gp_layout_is_mma(f, dot->res[0]->layout, &frag, &wm, &wn) || frag != GP_MMA_C || wn != 1 ||
        wm != f->sched.num_warps || wm % 4)
        return NULL;
    if (!slot_operand(pl, dot->args[0]) || !slot_operand(pl, dot->args[1])) return NULL;
    const IrValue *acc = dot->args[2];
    const IrOp *y = body->last;
    int k = acc->block == body ? acc->index - 1 : -1;
    if (k < 0 || !y || y->op != IR_YIELD || k >= y->nargs || y->args[k] != dot->res[0] || uses[dot->res[0]->id] != 1)
        return NULL;
    return dot;
}

static void plan_loop(IrOp *op, void *vctx)
{
    PlanCtx *p = vctx;
    IrFunc *f = p->f;
    int S = f->sched.num_stages;
    if (op->op != IR_FOR || S < 2) return;
    const IrOp *st = op->args[2]->def;
    if (!st || st->op != IR_CONST || st->ival <= 0 || op->args[0]->type.rank) return;
    IrBlock *body = op->regions[0];
    bool *in_slice = ARENA_ARRAY(f->arena, bool, f->next_id);
    GpPipeLoop *pl = ARENA_NEW(f->arena, GpPipeLoop);
    pl->loop = op;
    pl->stages = S;
    pl->loads = ARENA_ARRAY(f->arena, GpPipeLoad, 8);
    for (IrOp *x = body->first; x && pl->nloads < 8; x = x->next) {
        GpPipeLoad cand = {0};
        if (!candidate(f, p->axis, body, x, p->uses, &cand)) continue;
        bool ok = true;
        bool *trial = ARENA_ARRAY(f->arena, bool, f->next_id);
        memcpy(trial, in_slice, sizeof(bool) * (size_t)f->next_id);
        for (int i = 0; i < x->nargs && ok; i++) ok = gp_pipeline_slice(body, x->args[i], trial, f->next_id);
        /* A load in the slice reads, S - 1 iterations early, what the loop
         * might write before then: only where the loop writes nothing. */
        if (ok && slice_has_load(body, trial, f->next_id) && block_writes(body)) ok = false;
        if (!ok) continue;
        memcpy(in_slice, trial, sizeof(bool) * (size_t)f->next_id);
        GpPipeLoad *l = &pl->loads[pl->nloads++];
        *l = cand;
        l->load = x;
        l->fast_dim = gp_fast_value_dim(f, x->res[0]);
        l->slot_bytes = (int)ir_type_numel(x->res[0]->type) * 2;
    }
    if (!pl->nloads) return;
    if (S > IR_MAX_PIPE_STAGES) {
        if (!p->failed)
            diag_report(p->d, DIAG_USER, op->loc, "this loop would be pipelined with num_stages = %d; a pipelined "
                        "loop has at most %d stages: use fewer pipeline stages (num_stages)", S, IR_MAX_PIPE_STAGES);
        p->failed = true;
        return;
    }
    /* The decisions go on the IR: the loop's stages and issue point (ops
     * before it), each pipelined load's slot size. */
    int back = 0;
    for (IrOp *x = issue_point(op, body, in_slice, f->next_id, pl); x != op; x = x->next) back++;
    ir_attr_set_int(f->arena, &op->attrs, IR_ATTR_STAGES, S);
    ir_attr_set_int(f->arena, &op->attrs, IR_ATTR_ISSUE, back);
    for (int i = 0; i < pl->nloads; i++)
        ir_attr_set_int(f->arena, &pl->loads[i].load->attrs, IR_ATTR_SLOT_BYTES, pl->loads[i].slot_bytes);
    IrOp *dot = pending_dot(f, pl, p->uses);
    if (dot) ir_attr_set_int(f->arena, &dot->attrs, IR_ATTR_MMA_PENDING, 1);
    if (p->mbarrier) ir_attr_set_int(f->arena, &op->attrs, IR_ATTR_MBARRIER, 1);
    p->nloops++;
}

bool gp_pass_pipeline(IrFunc *f, const GpPassCtx *ctx, Diag *d)
{
    PlanCtx p = {f, ctx->axis, ir_use_counts(f), 0, d, false, ctx->sched.mbarrier};
    ir_walk(f, plan_loop, &p);
    return !p.failed;
}
