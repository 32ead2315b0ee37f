/* cg_pipeline.c — lowering of software-pipelined loops (the plan is made by
 * pass_pipeline.c and lives on the IR as attributes; docs/tensor_cores.md).
 *
 * What it does: reads the plan back from the IR into CgPipeLoop (which loads
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
 * Invariants: the plan read here is exactly the pass's (cg_pipeline_slice is
 * the one definition of the slice, shared with the pass); nothing here
 * decides anything the IR does not say.
 */
#include "cg_internal.h"
#include "cg_tc.h"

#include <stdio.h>
#include <string.h>

/* ---- the plan, read from the IR ---- */

bool cg_pipeline_slice(IrBlock *body, IrValue *v, bool *in_slice, int nids)
{
    if (v->block == body) return v->index == 0; /* block args: only the iv */
    IrOp *d = v->def;
    if (!d || d->parent != body) return true;   /* defined outside the loop */
    if (d->res[0]->id < nids && in_slice[d->res[0]->id]) return true;
    /* Loads may be re-evaluated for a later iteration too (a paged cache's
     * block-table read feeding the K/V addresses); the plan only keeps such a
     * slice in a loop that writes no memory (pass_pipeline.c). */
    if ((!(ir_op_info[d->op].flags & IRF_PURE) && d->op != IR_LOAD) || d->nregions) return false;
    if (d->res[0]->id < nids) in_slice[d->res[0]->id] = true;
    for (int i = 0; i < d->nargs; i++)
        if (!cg_pipeline_slice(body, d->args[i], in_slice, nids)) return false;
    return true;
}

IrOp *cg_single_user_in(IrBlock *body, const IrValue *v, const int *uses)
{
    if (uses[v->id] != 1) return NULL;
    for (IrOp *o = body->first; o; o = o->next)
        for (int i = 0; i < o->nargs; i++)
            if (o->args[i] == v) return o;
    return NULL;
}

int cg_fast_value_dim(const IrFunc *f, const IrValue *v)
{
    CgGeom g;
    if (!cg_geom(f, v->layout, v->type, &g)) return -1;
    for (int i = 0; i < v->type.rank; i++)
        if (g.vdims[i] == g.order[0]) return i;
    return -1;
}

bool cg_half_cast(const IrOp *op)
{
    if (!op || op->op != IR_CAST) return false;
    IrElem a = (IrElem)op->args[0]->type.elem, b = (IrElem)op->res[0]->type.elem;
    return (a == IR_F16 || a == IR_BF16) && (b == IR_F16 || b == IR_BF16);
}

static bool operand_convert(const IrFunc *f, const IrOp *u)
{
    CgMmaFrag frag;
    int wm, wn;
    return u && u->op == IR_CONVERT_LAYOUT && cg_layout_is_mma(f, u->res[0]->layout, &frag, &wm, &wn) &&
           frag != CG_MMA_C;
}

/* A use `o` of a pipelined load: an operand convert, or a 2-D trans whose
 * only user in `body` is one (a view: the convert reads the slot with the
 * other dim contiguous). Records it in l; false for anything else. */
static bool add_convert(const IrFunc *f, IrBlock *body, IrOp *o, const int *uses, CgPipeLoad *l)
{
    IrOp *t = NULL;
    if (o && o->op == IR_TRANS && o->res[0]->type.rank == 2) {
        t = o;
        o = cg_single_user_in(body, o->res[0], uses);
    }
    if (!operand_convert(f, o) || l->nconverts == CG_PIPE_MAX_CONVERTS) return false;
    l->trans[l->nconverts] = t;
    l->converts[l->nconverts++] = o;
    return true;
}

bool cg_pipeline_converts(const IrFunc *f, IrBlock *body, IrOp *ld, const int *uses, CgPipeLoad *l)
{
    IrValue *r = ld->res[0];
    l->nconverts = 0;
    l->cast = NULL;
    IrOp *u = cg_single_user_in(body, r, uses);
    if (u && u->op == IR_TRANS) return add_convert(f, body, u, uses, l);
    if (u) {
        if (cg_half_cast(u) && u->res[0]->layout == r->layout) {
            l->cast = u;
            u = cg_single_user_in(body, u->res[0], uses);
        }
        if (!operand_convert(f, u)) return false;
        l->trans[0] = NULL;
        l->converts[l->nconverts++] = u;
        return true;
    }
    /* Several uses: every one a convert to an operand layout in this body.
     * They all read the one slot (the same swizzled tile whichever operand
     * it becomes: layout_mma.c's swizzle depends on the tile's rows and
     * contiguous columns only). */
    if (uses[r->id] < 2 || uses[r->id] > CG_PIPE_MAX_CONVERTS) return false;
    for (IrOp *o = body->first; o; o = o->next)
        for (int i = 0; i < o->nargs; i++)
            if (o->args[i] == r && !add_convert(f, body, o, uses, l)) return false;
    return l->nconverts == uses[r->id];
}

/* Whether `v` is used in `b` (nested regions included) by an op other than pl's
 * pipelined loads and the slice ops already found dead in place. */
static bool live_use_in(const CgPipeLoop *pl, const IrBlock *b, const IrValue *v)
{
    for (const IrOp *u = b->first; u; u = u->next) {
        for (int r = 0; r < u->nregions; r++)
            if (live_use_in(pl, u->regions[r], v)) return true;
        bool uses = false;
        for (int i = 0; i < u->nargs && !uses; i++) uses = u->args[i] == v;
        if (!uses) continue;
        bool ok = false;
        for (int j = 0; j < pl->nloads && !ok; j++) ok = pl->loads[j].load == u;
        for (int j = 0; j < pl->nslice && !ok; j++) ok = pl->slice[j] == u && pl->dead_in_place[j];
        if (!ok) return true;
    }
    return false;
}

/* A paged cache's block-table read and the K/V addresses built from it form the slice:
 * issue_all evaluates it for the iterations whose copies it issues, and the body lowers
 * it again in place, where nothing but the pipelined loads (which have no registers)
 * reads most of it. Pure ops LLVM drops when unused, but a masked load is inline PTX
 * that it must keep: one dead block-table read per iteration. So the ops whose only
 * users are the pipelined loads and such ops are marked, last to first (a use comes
 * after its definition), and the body does not lower them. Loops whose slice reads no
 * memory are left as they are. */
static void mark_dead_in_place(IrFunc *f, CgPipeLoop *pl)
{
    pl->dead_in_place = ARENA_ARRAY(f->arena, bool, pl->nslice + 1);
    if (!pl->slice_loads) return;
    for (int i = pl->nslice - 1; i >= 0; i--) {
        const IrOp *x = pl->slice[i];
        bool dead = x->nres == 1;
        for (int r = 0; r < x->nres && dead; r++) dead = !live_use_in(pl, pl->loop->regions[0], x->res[r]);
        pl->dead_in_place[i] = dead;
    }
}

bool cg_pipeline_dead_in_place(const CgTcState *tc, const IrOp *op)
{
    for (int i = 0; tc && i < tc->loops.len; i++) {
        const CgPipeLoop *pl = tc->loops.data[i];
        for (int j = 0; j < pl->nslice; j++)
            if (pl->slice[j] == op) return pl->dead_in_place[j];
    }
    return false;
}

/* Whether `op` (or an op nested in it) reads a stage slot of pl: a convert
 * of one of its loads (ldmatrix there), or a user of such a convert's result
 * (a dot reading a deferred tile in the slot through ldmatrix or wgmma). */
static bool reads_slot(const CgPipeLoop *pl, const IrOp *op)
{
    for (int j = 0; j < pl->nloads; j++)
        for (int k = 0; k < pl->loads[j].nconverts; k++) {
            const IrOp *cv = pl->loads[j].converts[k];
            if (op == cv) return true;
            for (int i = 0; i < op->nargs; i++)
                if (op->args[i] == cv->res[0]) return true;
        }
    for (int r = 0; r < op->nregions; r++)
        for (const IrOp *x = op->regions[r]->first; x; x = x->next)
            if (reads_slot(pl, x)) return true;
    return false;
}

/* pipeline.mbarrier: where the body releases its slots (the last op reading
 * one; the wgmma.pending dot, whose wait retires the previous iteration's
 * group) and how far ahead the copies run. Without a pending dot, S - 2 when
 * S >= 3: a thread then refills the slot read two iterations back, so warps
 * may drift an iteration apart before one waits for another. */
static void plan_mbarrier(CgPipeLoop *pl)
{
    IrBlock *body = pl->loop->regions[0];
    pl->mbarrier = ir_attr_int(&pl->loop->attrs, IR_ATTR_MBARRIER, 0) == 1;
    if (!pl->mbarrier) return;
    pl->release_after = pl->pending_dot;
    for (IrOp *x = body->first; x && !pl->pending_dot; x = x->next)
        if (reads_slot(pl, x)) pl->release_after = x;
    if (!pl->release_after) pl->release_after = body->last;
    if (!pl->pending_dot && pl->stages >= 3) pl->ahead = pl->stages - 2;
}

/* tma.map on the loads (pass_tma.c): all of them or none, each one's recipe
 * re-derived by the function the pass asked (cg_tma_plan). */
static bool plan_tma(IrFunc *f, CgPipeLoop *pl)
{
    int n = 0;
    for (int j = 0; j < pl->nloads; j++) {
        CgPipeLoad *l = &pl->loads[j];
        l->tma_map = (int)ir_attr_int(&l->load->attrs, IR_ATTR_TMA_MAP, -1);
        if (l->tma_map < 0) continue;
        n++;
        if (!pl->mbarrier || !cg_tma_plan(f, l->load, l->fast_dim, &l->tma)) {
            INTERNAL_ERROR("codegen: %s:%d: tma.map on a load no tensor map serves", f->name, l->load->loc.line);
            return false;
        }
    }
    pl->tma = n > 0 && n == pl->nloads;
    if (n && !pl->tma) INTERNAL_ERROR("codegen: %s: a loop mixes TMA and cp.async loads", f->name);
    return n == 0 || pl->tma;
}

/* The loop's plan from its attributes; NULL (with an internal error) when
 * the IR does not hold a consistent plan. */
static CgPipeLoop *loop_from_ir(IrFunc *f, IrOp *op, const int *uses)
{
    IrBlock *body = op->regions[0];
    CgPipeLoop *pl = ARENA_NEW(f->arena, CgPipeLoop);
    pl->loop = op;
    pl->stages = (int)ir_attr_int(&op->attrs, IR_ATTR_STAGES, 0);
    int n = 0;
    for (IrOp *x = body->first; x; x = x->next) n += ir_attr_get(&x->attrs, IR_ATTR_SLOT_BYTES) != NULL;
    pl->loads = ARENA_ARRAY(f->arena, CgPipeLoad, n + 1);
    bool *in_slice = ARENA_ARRAY(f->arena, bool, f->next_id);
    for (IrOp *x = body->first; x; x = x->next) {
        if (!ir_attr_get(&x->attrs, IR_ATTR_SLOT_BYTES)) continue;
        CgPipeLoad *l = &pl->loads[pl->nloads++];
        l->load = x;
        l->slot_bytes = (int)ir_attr_int(&x->attrs, IR_ATTR_SLOT_BYTES, 0);
        l->fast_dim = cg_fast_value_dim(f, x->res[0]);
        bool ok = x->op == IR_LOAD && x->nres && cg_pipeline_converts(f, body, x, uses, l) && l->fast_dim >= 0;
        for (int i = 0; ok && i < x->nargs; i++) ok = cg_pipeline_slice(body, x->args[i], in_slice, f->next_id);
        if (!ok) {
            INTERNAL_ERROR("codegen: %s:%d: the pipelined load's plan does not fit the IR", f->name, x->loc.line);
            return NULL;
        }
    }
    for (IrOp *x = body->first; x; x = x->next)
        if (ir_attr_get(&x->attrs, IR_ATTR_MMA_PENDING)) pl->pending_dot = x;
    pl->ahead = pl->pending_dot ? pl->stages - 2 : pl->stages - 1;
    plan_mbarrier(pl);
    if (!plan_tma(f, pl)) return NULL;
    int back = (int)ir_attr_int(&op->attrs, IR_ATTR_ISSUE, 0);
    pl->issue_at = op;
    for (int i = 0; i < back && pl->issue_at->prev; i++) pl->issue_at = pl->issue_at->prev;
    int ns = 0;
    for (IrOp *x = body->first; x; x = x->next)
        if (x->nres && x->res[0]->id < f->next_id && in_slice[x->res[0]->id]) ns++;
    pl->slice = ARENA_ARRAY(f->arena, IrOp *, ns + 1);
    for (IrOp *x = body->first; x; x = x->next)
        if (x->nres && x->res[0]->id < f->next_id && in_slice[x->res[0]->id]) {
            pl->slice[pl->nslice++] = x;
            pl->slice_loads |= x->op == IR_LOAD;
        }
    mark_dead_in_place(f, pl);
    return pl;
}

typedef struct LoopsCtx {
    IrFunc *f;
    PtrVec *loops;
    const int *uses;
} LoopsCtx;

static void collect_loop(IrOp *op, void *vctx)
{
    LoopsCtx *c = vctx;
    if (op->op != IR_FOR || !ir_attr_get(&op->attrs, IR_ATTR_STAGES)) return;
    CgPipeLoop *pl = loop_from_ir(c->f, op, c->uses);
    if (pl) vec_push(c->f->arena, c->loops, pl);
}

void cg_pipeline_loops(IrFunc *f, PtrVec *loops)
{
    LoopsCtx c = {f, loops, ir_use_counts(f)};
    ir_walk(f, collect_loop, &c);
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
        for (int j = 0; j < pl->nloads; j++) {
            CgPipeLoad *l = &pl->loads[j];
            bool hit = l->load == op || (op && l->cast == op);
            for (int k = 0; k < l->nconverts && !hit; k++) hit = l->converts[k] == op || (op && l->trans[k] == op);
            if (hit) {
                if (loop) *loop = pl;
                return l;
            }
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
static bool issue_all(CgCtx *c, const CgPipeLoop *pl, LLVMValueRef ivv, LLVMValueRef valid, LLVMValueRef slot,
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
        const CgPipeLoad *l = &pl->loads[j];
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

bool cg_pipeline_issue(CgCtx *c, const CgPipeLoop *pl, LLVMValueRef ivv, LLVMValueRef valid, LLVMValueRef slot)
{
    return issue_all(c, pl, ivv, valid, slot, 0, NULL);
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
    if (pl->mbarrier) cg_mbar_init(c, pl);
    /* iterations 0 .. ahead - 1 (S - 2, or S - 3 with a wgmma.pending dot) */
    for (int j = 0; j < pl->ahead && !c->ws_warps; j++) {   /* warp_spec: the producer's copies */
        LLVMValueRef ivj = LLVMBuildAdd(c->b, lo, LLVMBuildMul(c->b, step, LLVMConstInt(it, (unsigned long long)j, 0), ""), "");
        if (!issue_all(c, pl, ivj, icmp_lt(c, ie, ivj, hi), cg_i32(c, j), 0, NULL)) return false;
    }
    return true;
}

bool cg_lower_for_pipelined(CgCtx *c, IrOp *op, CgPipeLoop *pl)
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
bool cg_lower_pipelined_convert(CgCtx *c, IrOp *op, const CgPipeLoad *l)
{
    CgGeom g;
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
