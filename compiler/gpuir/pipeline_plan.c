/* pipeline_plan.c — the software-pipelining plan read back from the IR.
 *
 * What it does: pass_pipeline.c decides which loads of a loop are copied
 * ahead and writes the decision on the IR (pipeline.stages on the loop,
 * pipeline.slot_bytes / smem.offset on each load; docs/tensor_cores.md
 * section 0). This file reads that plan back into GpPipeLoop / GpPipeLoad:
 * which loads, their convert_layout and cast, the slice of body ops their
 * addresses need, where the prologue goes. The pass, SRAM allocation, TMA
 * and the lowering (codegen/cg_pipeline.c) all read the plan through it.
 *
 * Invariants: gp_pipeline_slice is the one definition of a load's address
 * slice, shared by the pass and the lowering; nothing here decides anything
 * the IR does not say.
 *
 * Example: for %i ... {pipeline.stages = 3} { %k = load ... {pipeline.slot_bytes = 8192} ... }
 * gives one GpPipeLoop with one GpPipeLoad (%k) and its operand converts.
 */
#include "gpuir.h"

#include <string.h>

/* ---- the plan, read from the IR ---- */

bool gp_pipeline_slice(IrBlock *body, IrValue *v, bool *in_slice, int nids)
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
        if (!gp_pipeline_slice(body, d->args[i], in_slice, nids)) return false;
    return true;
}

IrOp *gp_single_user_in(IrBlock *body, const IrValue *v, const int *uses)
{
    if (uses[v->id] != 1) return NULL;
    for (IrOp *o = body->first; o; o = o->next)
        for (int i = 0; i < o->nargs; i++)
            if (o->args[i] == v) return o;
    return NULL;
}

int gp_fast_value_dim(const IrFunc *f, const IrValue *v)
{
    GpGeom g;
    if (!gp_geom(f, v->layout, v->type, &g)) return -1;
    for (int i = 0; i < v->type.rank; i++)
        if (g.vdims[i] == g.order[0]) return i;
    return -1;
}

bool gp_half_cast(const IrOp *op)
{
    if (!op || op->op != IR_CAST) return false;
    IrElem a = (IrElem)op->args[0]->type.elem, b = (IrElem)op->res[0]->type.elem;
    return (a == IR_F16 || a == IR_BF16) && (b == IR_F16 || b == IR_BF16);
}

static bool operand_convert(const IrFunc *f, const IrOp *u)
{
    GpMmaFrag frag;
    int wm, wn;
    return u && u->op == IR_CONVERT_LAYOUT && gp_layout_is_mma(f, u->res[0]->layout, &frag, &wm, &wn) &&
           frag != GP_MMA_C;
}

/* A use `o` of a pipelined load: an operand convert, or a 2-D trans whose
 * only user in `body` is one (a view: the convert reads the slot with the
 * other dim contiguous). Records it in l; false for anything else. */
static bool add_convert(const IrFunc *f, IrBlock *body, IrOp *o, const int *uses, GpPipeLoad *l)
{
    IrOp *t = NULL;
    if (o && o->op == IR_TRANS && o->res[0]->type.rank == 2) {
        t = o;
        o = gp_single_user_in(body, o->res[0], uses);
    }
    if (!operand_convert(f, o) || l->nconverts == GP_PIPE_MAX_CONVERTS) return false;
    l->trans[l->nconverts] = t;
    l->converts[l->nconverts++] = o;
    return true;
}

bool gp_pipeline_converts(const IrFunc *f, IrBlock *body, IrOp *ld, const int *uses, GpPipeLoad *l)
{
    IrValue *r = ld->res[0];
    l->nconverts = 0;
    l->cast = NULL;
    IrOp *u = gp_single_user_in(body, r, uses);
    if (u && u->op == IR_TRANS) return add_convert(f, body, u, uses, l);
    if (u) {
        if (gp_half_cast(u) && u->res[0]->layout == r->layout) {
            l->cast = u;
            u = gp_single_user_in(body, u->res[0], uses);
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
    if (uses[r->id] < 2 || uses[r->id] > GP_PIPE_MAX_CONVERTS) return false;
    for (IrOp *o = body->first; o; o = o->next)
        for (int i = 0; i < o->nargs; i++)
            if (o->args[i] == r && !add_convert(f, body, o, uses, l)) return false;
    return l->nconverts == uses[r->id];
}

/* Whether `v` is used in `b` (nested regions included) by an op other than pl's
 * pipelined loads and the slice ops already found dead in place. */
static bool live_use_in(const GpPipeLoop *pl, const IrBlock *b, const IrValue *v)
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
static void mark_dead_in_place(IrFunc *f, GpPipeLoop *pl)
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

bool gp_pipeline_dead_in_place(const GpTcState *tc, const IrOp *op)
{
    for (int i = 0; tc && i < tc->loops.len; i++) {
        const GpPipeLoop *pl = tc->loops.data[i];
        for (int j = 0; j < pl->nslice; j++)
            if (pl->slice[j] == op) return pl->dead_in_place[j];
    }
    return false;
}

/* Whether `op` (or an op nested in it) reads a stage slot of pl: a convert
 * of one of its loads (ldmatrix there), or a user of such a convert's result
 * (a dot reading a deferred tile in the slot through ldmatrix or wgmma). */
static bool reads_slot(const GpPipeLoop *pl, const IrOp *op)
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
static void plan_mbarrier(GpPipeLoop *pl)
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
 * re-derived by the function the pass asked (gp_tma_plan). */
static bool plan_tma(IrFunc *f, GpPipeLoop *pl)
{
    int n = 0;
    for (int j = 0; j < pl->nloads; j++) {
        GpPipeLoad *l = &pl->loads[j];
        l->tma_map = (int)ir_attr_int(&l->load->attrs, IR_ATTR_TMA_MAP, -1);
        if (l->tma_map < 0) continue;
        n++;
        if (!pl->mbarrier || !gp_tma_plan(f, l->load, l->fast_dim, &l->tma)) {
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
static GpPipeLoop *loop_from_ir(IrFunc *f, IrOp *op, const int *uses)
{
    IrBlock *body = op->regions[0];
    GpPipeLoop *pl = ARENA_NEW(f->arena, GpPipeLoop);
    pl->loop = op;
    pl->stages = (int)ir_attr_int(&op->attrs, IR_ATTR_STAGES, 0);
    int n = 0;
    for (IrOp *x = body->first; x; x = x->next) n += ir_attr_get(&x->attrs, IR_ATTR_SLOT_BYTES) != NULL;
    pl->loads = ARENA_ARRAY(f->arena, GpPipeLoad, n + 1);
    bool *in_slice = ARENA_ARRAY(f->arena, bool, f->next_id);
    for (IrOp *x = body->first; x; x = x->next) {
        if (!ir_attr_get(&x->attrs, IR_ATTR_SLOT_BYTES)) continue;
        GpPipeLoad *l = &pl->loads[pl->nloads++];
        l->load = x;
        l->slot_bytes = (int)ir_attr_int(&x->attrs, IR_ATTR_SLOT_BYTES, 0);
        l->fast_dim = gp_fast_value_dim(f, x->res[0]);
        bool ok = x->op == IR_LOAD && x->nres && gp_pipeline_converts(f, body, x, uses, l) && l->fast_dim >= 0;
        for (int i = 0; ok && i < x->nargs; i++) ok = gp_pipeline_slice(body, x->args[i], in_slice, f->next_id);
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
    GpPipeLoop *pl = loop_from_ir(c->f, op, c->uses);
    if (pl) vec_push(c->f->arena, c->loops, pl);
}

void gp_pipeline_loops(IrFunc *f, PtrVec *loops)
{
    LoopsCtx c = {f, loops, ir_use_counts(f)};
    ir_walk(f, collect_loop, &c);
}

GpPipeLoop *gp_pipeline_of_loop(const GpTcState *tc, const IrOp *op)
{
    for (int i = 0; tc && i < tc->loops.len; i++)
        if (((GpPipeLoop *)tc->loops.data[i])->loop == op) return tc->loops.data[i];
    return NULL;
}

GpPipeLoad *gp_pipeline_load(const GpTcState *tc, const IrOp *op, GpPipeLoop **loop)
{
    for (int i = 0; tc && i < tc->loops.len; i++) {
        GpPipeLoop *pl = tc->loops.data[i];
        for (int j = 0; j < pl->nloads; j++) {
            GpPipeLoad *l = &pl->loads[j];
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
