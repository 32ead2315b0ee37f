/* pass_pipeline.c — software pipelining of the loads that feed tensor-core
 * dots: cp.async copies into num_stages SRAM buffers, S - 1 iterations ahead.
 *
 * Which loads (the plan, cg_pipeline_plan): in a `for` whose step is a
 * positive constant, a load of f16/bf16 directly in the body
 *   - whose only use is a convert_layout to an MMA A/B-operand layout in the
 *     same body (the dot's operand staging, cg_dot_mma.c), possibly through
 *     an f16 <-> bf16 cast (then applied to the registers after ldmatrix);
 *   - that moves 16 bytes per access (8 contiguous, 16-byte aligned halves
 *     per the axis info: cg_mem_vec == 8) — cp.async copies 16 bytes;
 *   - with no `other` or other = 0 (masked-off lanes are zero-filled);
 *   - whose pointer and mask depend only on the induction variable and on
 *     values defined outside the loop (the "slice": pure ops of the body),
 *     so they can be computed for any future iteration.
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
 * Example (matmul 64x64x32 on 4 warps as 2 x 2, S = 3): loads a [64x32] and
 * b [32x64] of f16 become 2 x 3 buffers of 4 KB; prologue: 2 groups; loop:
 * wait_group(1); bar.sync; 2 + 2 cp.async per thread; commit; 8 ldmatrix.x4
 * + 16 mma.sync per warp.
 */
#include "cg_internal.h"
#include "cg_tc.h"

#include <stdio.h>
#include <string.h>

/* ---- the plan ---- */

static bool is_zero_const(const IrValue *v)
{
    const IrOp *d = v->def;
    if (!d) return false;
    if (d->op == IR_SPLAT) return is_zero_const(d->args[0]);
    return d->op == IR_CONST && (ir_elem_is_float((IrElem)v->type.elem) ? d->fval == 0.0 : d->ival == 0);
}

/* Mark the body ops `v` depends on; false when it reaches a loop-carried value
 * or an impure / region op of the body. */
static bool mark_slice(IrBlock *body, IrValue *v, bool *in_slice, int nids)
{
    if (v->block == body) return v->index == 0; /* block args: only the iv */
    IrOp *d = v->def;
    if (!d || d->parent != body) return true;   /* defined outside the loop */
    if (d->res[0]->id < nids && in_slice[d->res[0]->id]) return true;
    if (!(ir_op_info[d->op].flags & IRF_PURE) || d->nregions) return false;
    if (d->res[0]->id < nids) in_slice[d->res[0]->id] = true;
    for (int i = 0; i < d->nargs; i++)
        if (!mark_slice(body, d->args[i], in_slice, nids)) return false;
    return true;
}

static IrOp *single_user_in(IrBlock *body, const IrValue *v, const int *uses)
{
    if (uses[v->id] != 1) return NULL;
    for (IrOp *o = body->first; o; o = o->next)
        for (int i = 0; i < o->nargs; i++)
            if (o->args[i] == v) return o;
    return NULL;
}

static int fast_value_dim(const IrFunc *f, const IrValue *v)
{
    CgGeom g;
    if (!cg_geom(f, v->layout, v->type, &g)) return -1;
    for (int i = 0; i < v->type.rank; i++)
        if (g.vdims[i] == g.order[0]) return i;
    return -1;
}

static bool half_cast(const IrOp *op)
{
    if (!op || op->op != IR_CAST) return false;
    IrElem a = (IrElem)op->args[0]->type.elem, b = (IrElem)op->res[0]->type.elem;
    return (a == IR_F16 || a == IR_BF16) && (b == IR_F16 || b == IR_BF16);
}

static bool candidate(IrFunc *f, const CgAxisMap *axis, IrBlock *body, IrOp *ld, const int *uses, IrOp **conv,
                      IrOp **cast)
{
    if (ld->op != IR_LOAD) return false;
    IrValue *r = ld->res[0];
    if (r->type.rank != 2 || (r->type.elem != IR_F16 && r->type.elem != IR_BF16)) return false;
    IrOp *u = single_user_in(body, r, uses);
    *cast = NULL;
    if (half_cast(u) && u->res[0]->layout == r->layout) {
        *cast = u;
        u = single_user_in(body, u->res[0], uses);
    }
    CgMmaFrag frag;
    int wm, wn;
    if (!u || u->op != IR_CONVERT_LAYOUT || !cg_layout_is_mma(f, u->res[0]->layout, &frag, &wm, &wn) ||
        frag == CG_MMA_C)
        return false;
    if (cg_mem_vec(f, axis, ld) != 8) return false;
    if (ld->nargs > 2 && !is_zero_const(ld->args[2])) return false;
    if (fast_value_dim(f, r) < 0 || r->type.shape[fast_value_dim(f, r)] < 8) return false;
    *conv = u;
    return true;
}

typedef struct PlanCtx {
    IrFunc *f;
    const CgAxisMap *axis;
    CgTcState *tc;
    const int *uses;
} PlanCtx;

/* Whether `v` is needed by the prologue: a loop bound, or an operand from
 * outside the loop of a slice op or a pipelined load. */
static bool needed_by_prologue(const IrOp *loop, const IrBlock *body, const bool *in_slice, int nids,
                               const CgPipeLoop *pl, const IrValue *v)
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
static IrOp *issue_point(IrOp *loop, const IrBlock *body, const bool *in_slice, int nids, const CgPipeLoop *pl)
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
    CgPipeLoop *pl = ARENA_NEW(f->arena, CgPipeLoop);
    pl->loop = op;
    pl->stages = S;
    pl->loads = ARENA_ARRAY(f->arena, CgPipeLoad, 8);
    for (IrOp *x = body->first; x && pl->nloads < 8; x = x->next) {
        IrOp *conv, *cast;
        if (!candidate(f, p->axis, body, x, p->uses, &conv, &cast)) continue;
        bool ok = true;
        bool *trial = ARENA_ARRAY(f->arena, bool, f->next_id);
        memcpy(trial, in_slice, sizeof(bool) * (size_t)f->next_id);
        for (int i = 0; i < x->nargs && ok; i++) ok = mark_slice(body, x->args[i], trial, f->next_id);
        if (!ok) continue;
        memcpy(in_slice, trial, sizeof(bool) * (size_t)f->next_id);
        CgPipeLoad *l = &pl->loads[pl->nloads++];
        l->load = x;
        l->convert = conv;
        l->cast = cast;
        l->fast_dim = fast_value_dim(f, x->res[0]);
        l->slot_bytes = (int)ir_type_numel(x->res[0]->type) * 2;
    }
    if (!pl->nloads) return;
    pl->issue_at = issue_point(op, body, in_slice, f->next_id, pl);
    int n = 0;
    for (IrOp *x = body->first; x; x = x->next)
        if (x->nres && x->res[0]->id < f->next_id && in_slice[x->res[0]->id]) n++;
    pl->slice = ARENA_ARRAY(f->arena, IrOp *, n + 1);
    for (IrOp *x = body->first; x; x = x->next)
        if (x->nres && x->res[0]->id < f->next_id && in_slice[x->res[0]->id]) pl->slice[pl->nslice++] = x;
    vec_push(f->arena, &p->tc->loops, pl);
}

int cg_pipeline_plan(IrFunc *f, const CgAxisMap *axis, CgTcState *tc)
{
    PlanCtx p = {f, axis, tc, ir_use_counts(f)};
    ir_walk(f, plan_loop, &p);
    return tc->loops.len;
}

CgPipeLoop *cg_pipeline_of_loop(const CgTcState *tc, const IrOp *op)
{
    for (int i = 0; tc && i < tc->loops.len; i++)
        if (((CgPipeLoop *)tc->loops.data[i])->loop == op) return tc->loops.data[i];
    return NULL;
}

CgPipeLoad *cg_pipeline_load(const CgTcState *tc, const IrOp *op, CgPipeLoop **loop)
{
    for (int i = 0; tc && i < tc->loops.len; i++) {
        CgPipeLoop *pl = tc->loops.data[i];
        for (int j = 0; j < pl->nloads; j++)
            if (pl->loads[j].load == op || pl->loads[j].convert == op || (op && pl->loads[j].cast == op)) {
                if (loop) *loop = pl;
                return &pl->loads[j];
            }
    }
    return NULL;
}

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
 * them by a constant (cg_swizzle_shift). Then `to` is addressed as [from's
 * register + immediate]. */
static bool swizzle_shift(const CgGeom *g, const CgSwizzle *sw, int mr_dim, int mc_dim, int from, int to, int *bytes)
{
    int dv[CG_MAX_RANK];
    cg_geom_reg_delta(g, from, to, dv);
    if (!cg_swizzle_shift(sw, dv[mr_dim], dv[mc_dim], bytes)) return false;
    *bytes *= sw->elem_bytes;
    return true;
}

/* The copies of one load for the iteration whose slice values are lowered.
 * Both addresses of a chunk are derived from a few registers where the tile
 * allows: the global one walks an affine pointer tile from its first chunk by
 * invariant steps (cg_affine.c says why; the add is opaque to LLVM, or its LICM
 * would re-associate the walk and hoist one 64-bit pointer per chunk again), the
 * SRAM one is an immediate from an earlier chunk's (swizzle_shift). */
static void issue_load(CgCtx *c, const CgPipeLoad *l, LLVMValueRef slot_base, LLVMValueRef valid)
{
    IrOp *ld = l->load;
    CgGeom g;
    if (!cg_geom_of(c, ld->res[0], &g)) return;
    CgTile *pt = cg_get(c, ld->args[0]);
    CgTile *mk = ld->nargs > 1 && ld->args[1]->type.rank ? cg_get(c, ld->args[1]) : NULL;
    LLVMValueRef smask = ld->nargs > 1 && !ld->args[1]->type.rank ? cg_get(c, ld->args[1])->r[0] : NULL;
    int mr_dim = 1 - l->fast_dim, anchor = -1;
    CgSwizzle sw = cg_swizzle_for(ld->res[0]->type.shape[mr_dim], ld->res[0]->type.shape[l->fast_dim], 2);
    bool exact = !cg_geom_replicated(&g);        /* register index = thread base + constant */
    LLVMValueRef tb[CG_MAX_RANK], idx[CG_MAX_RANK], coef[CG_MAX_RANK];
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

/* Evaluate the slice with the induction variable = ivv and issue every
 * pipelined load of the loop into `slot`; the body's own values are restored
 * afterwards. */
static bool issue_all(CgCtx *c, const CgPipeLoop *pl, LLVMValueRef ivv, LLVMValueRef valid, LLVMValueRef slot)
{
    IrBlock *body = pl->loop->regions[0];
    IrValue *iv = body->args[0];
    CgTile saved_iv = c->vals[iv->id];
    CgTile *saved = ARENA_ARRAY(c->arena, CgTile, pl->nslice + 1);
    for (int i = 0; i < pl->nslice; i++) saved[i] = c->vals[pl->slice[i]->res[0]->id];
    c->vals[iv->id].r = ARENA_ARRAY(c->arena, LLVMValueRef, 1);
    c->vals[iv->id].r[0] = ivv;
    c->vals[iv->id].n = 1;
    for (int i = 0; i < pl->nslice; i++)
        if (!cg_lower_op(c, pl->slice[i])) return false;
    for (int j = 0; j < pl->nloads; j++) {
        const CgPipeLoad *l = &pl->loads[j];
        LLVMValueRef base = LLVMBuildAdd(c->b, cg_i32(c, l->buf ? l->buf->offset : 0), LLVMBuildMul(c->b, slot, cg_i32(c, l->slot_bytes), ""), "");
        issue_load(c, l, base, valid);
    }
    commit(c);
    c->vals[iv->id] = saved_iv;
    for (int i = 0; i < pl->nslice; i++) c->vals[pl->slice[i]->res[0]->id] = saved[i];
    return true;
}

bool cg_pipeline_prologue(CgCtx *c, CgPipeLoop *pl)
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
        const CgSmemBuf *b = pl->loads[i].buf;
        for (int j = 0; b && j < c->npending; j++)
            if (c->pending[j].lo < b->offset + b->bytes && b->offset < c->pending[j].hi) {
                cg_barrier(c);
                break;
            }
    }
    /* iterations 0 .. S-2 */
    for (int j = 0; j < pl->stages - 1; j++) {
        LLVMValueRef ivj = LLVMBuildAdd(c->b, lo, LLVMBuildMul(c->b, step, LLVMConstInt(it, (unsigned long long)j, 0), ""), "");
        if (!issue_all(c, pl, ivj, icmp_lt(c, ie, ivj, hi), cg_i32(c, j))) return false;
    }
    return true;
}

bool cg_lower_for_pipelined(CgCtx *c, IrOp *op, CgPipeLoop *pl)
{
    IrBlock *body = op->regions[0];
    IrElem ie = (IrElem)op->args[0]->type.elem;
    LLVMTypeRef it = cg_type(c, ie);
    int S = pl->stages;
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
    wait_group(c, S - 2);
    cg_fence_proxy_async(c);
    cg_barrier(c);
    /* Issue iteration i + S - 1 before computing iteration i: its slot,
     * (i - 1) % S, was last read by iteration i - 1, which every thread has
     * left at the barrier above. So the copies overlap this whole iteration
     * (with S = 2 too), instead of only the S - 2 iterations after it. */
    LLVMValueRef ivn = LLVMBuildAdd(c->b, iv, LLVMBuildMul(c->b, step, LLVMConstInt(it, (unsigned long long)(S - 1), 0), ""), "");
    LLVMValueRef slotn = LLVMBuildURem(c->b, LLVMBuildAdd(c->b, cnt, cg_i32(c, S - 1), ""), cg_i32(c, S), "");
    if (!issue_all(c, pl, ivn, icmp_lt(c, ie, ivn, hi), slotn)) return false;
    c->pipe_slot = LLVMBuildURem(c->b, cnt, cg_i32(c, S), "slot");
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
    wait_group(c, 0);
    return true;
}

/* The convert_layout of a pipelined load: ldmatrix from the current slot. */
bool cg_lower_pipelined_convert(CgCtx *c, IrOp *op, const CgPipeLoad *l)
{
    CgGeom g;
    cg_geom_of(c, op->res[0], &g);
    LLVMValueRef base = LLVMBuildAdd(c->b, cg_i32(c, l->buf ? l->buf->offset : 0),
                                     LLVMBuildMul(c->b, c->pipe_slot, cg_i32(c, l->slot_bytes), ""), "");
    CgRange stages = {l->buf ? l->buf->offset : 0, l->buf ? l->buf->offset + l->buf->bytes : 0};
    IrElem stored = (IrElem)l->load->res[0]->type.elem;
    if (cg_mma_defer(c, op->res[0], l->fast_dim, base, stored, stages)) return true;
    CgTile *out = cg_set(c, op->res[0], g.nregs);
    cg_mma_ldmatrix_tile(c, op->res[0], l->fast_dim, base, stored, out);
    return true;
}
