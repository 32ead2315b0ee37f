/* pass_layout_assign.c — Tile IR -> GPU IR: give every tile value a layout
 * and insert convert_layout where a user needs another one.
 *
 * Three steps:
 *   1. anchors: every load/store/atomic on a pointer tile gets a *coalesced*
 *      blocked layout from axis info: dims ordered by contiguity, and as many
 *      contiguous elements per thread along the fastest dim as alignment,
 *      contiguity, mask constancy and 16 bytes allow (capped by elements per
 *      thread) — but on sm_90 an atomic_add of a tensor-core dot's result
 *      keeps the accumulator layout (vector red from registers, no SRAM), and
 *      a load that is an FP8 wgmma dot's B with N contiguous (V of the FP8
 *      forward) takes 16 K a thread for its transposing store (f8_kfast_layout).
 *      dot gets an FMA-friendly blocked layout for its result.
 *   2. demand (backward): a value's users say which layout they would like:
 *      memory ops their anchor, elementwise ops their result's demand,
 *      broadcast the same layout, expand_dims(axis) the slice of it along
 *      axis. Sources (arange, splat, constants) are free to produce any layout,
 *      so demand mostly decides theirs and the index arithmetic ends up in the
 *      layout of the load that uses it.
 *   3. forward: results get layouts by rule (elementwise: the demanded layout
 *      when an operand has it, else the first tile operand's; broadcast:
 *      operand's; expand_dims of slice(P, axis): P; reduce: slice(operand,
 *      axis); trans: permuted; for: the inits'); each operand whose layout
 *      differs from the required one (and is not equivalent: same thread ->
 *      element map) gets a convert_layout, or a fresh copy when it is a
 *      constant/splat/arange. Run once without changes to see which loop-carried
 *      values come back in another layout, then again for real with those loop
 *      arguments started in the layout the body yields (m_i of softmax becomes a
 *      slice of the score tile's layout instead of converting every iteration).
 *
 * Invariant after the pass: every tile value has layout >= 0 and every op's
 * operands have exactly the layouts its lowering expects; no tile needs more
 * than GP_MAX_THREAD_REGS registers per thread and no reduce more than
 * GP_MAX_REDUCE_WORK partials (else a user error at the op, gp_check_thread_regs). Example:
 *     %1 = arange 0, 128 : tensor<128xi32, #L0>        (#L0 = spt 4 if X is 16B aligned)
 *     %3 = load %2 : tensor<128xf32, #L0>
 *     %4 = reduce sum 0 %3 : f32
 */
#include "gpuir.h"

#include <string.h>

typedef struct LaCtx {
    IrFunc *f;
    GpAxisMap *axis;
    int *demand;          /* by value id, -1 none */
    int *hint;            /* loop-carried block args: start in this layout */
    int *anchor;          /* by op sequence number: load/store/dot layouts */
    int nids;
    bool materialize;
    int W;
    int sm;               /* the target's SM version */
    bool *kfast;          /* by value id: the load is a wgmma.e4m3 dot's B (f8_kfast_layout); NULL: none */
} LaCtx;

static bool is_tile(const IrValue *v) { return v && v->type.rank > 0; }

static int get_demand(LaCtx *c, const IrValue *v) { return v->id < c->nids ? c->demand[v->id] : -1; }

static void push_demand(LaCtx *c, const IrValue *v, int layout)
{
    if (!is_tile(v) || layout < 0 || v->id >= c->nids) return;
    if (ir_layout_get(c->f, layout)->rank != v->type.rank) return;
    if (c->demand[v->id] < 0) c->demand[v->id] = layout;
}

/* A tensor-core accumulator or a slice of one (a row statistic of it). */
static bool mma_derived(const IrFunc *f, int layout)
{
    const IrLayout *l = ir_layout_get(f, layout);
    while (l && l->kind == IR_LAYOUT_SLICE) l = ir_layout_get(f, l->parent);
    return l && l->mma == (int)GP_MMA_C + 1;
}

/* The accumulator of a tensor-core dot must be in its MMA layout; that
 * demand wins over any other (a store after the loop converts once, instead
 * of the loop converting the accumulator every iteration). */
static void force_demand(LaCtx *c, const IrValue *v, int layout)
{
    if (!is_tile(v) || layout < 0 || v->id >= c->nids) return;
    c->demand[v->id] = layout;
}

/* ---- anchors ---- */
static int mem_layout(LaCtx *c, const IrOp *op)
{
    const IrValue *p = op->args[0];
    IrType t = p->type;
    const GpAxis *ax = gp_axis_get(c->axis, p);
    int order[GP_MAX_RANK], spt[GP_MAX_RANK];
    gp_default_order(t.rank, order);
    /* Stable sort by contiguity, most contiguous first. */
    for (int i = 1; i < t.rank; i++)
        for (int j = i; j > 0 && ax->contig[order[j]] > ax->contig[order[j - 1]]; j--) {
            int tmp = order[j];
            order[j] = order[j - 1];
            order[j - 1] = tmp;
        }
    for (int d = 0; d < t.rank; d++) spt[d] = 1;
    int eb = gp_elem_bytes((IrElem)t.pointee);
    int fd = order[0];
    int64_t vec = 16 / eb;
    if (ax->contig[fd] < vec) vec = ax->contig[fd];
    if (ax->div[fd] / eb < vec) vec = ax->div[fd] / eb;
    int mask_idx = op->op == IR_LOAD ? 1 : 2;
    if (op->nargs > mask_idx && is_tile(op->args[mask_idx])) {
        const GpAxis *mx = gp_axis_get(c->axis, op->args[mask_idx]);
        if (mx->constancy[fd] < vec) vec = mx->constancy[fd];
    }
    int64_t per_thread = ir_type_numel(t) / (32 * c->W);
    if (per_thread < vec) vec = per_thread;
    if (vec < 1) vec = 1;
    spt[fd] = (int)vec;
    return gp_layout_blocked(c->f, t.rank, t.shape, spt, order, c->W);
}

/* The FMA dot's result layout: a small square-ish block per thread so that
 * each A/B element fetched feeds several FMAs. */
static int dot_layout(LaCtx *c, IrType t)
{
    int M = t.shape[0], N = t.shape[1];
    int64_t target = ir_type_numel(t) / (32 * c->W);
    int s1 = 1, s0 = 1;
    while (s1 < 4 && s1 < N && s0 * s1 < target) s1 *= 2;
    while (s0 < 4 && s0 < M && s0 * s1 < target) s0 *= 2;
    int spt[2] = {s0, s1}, order[2] = {1, 0};
    return gp_layout_blocked(c->f, 2, t.shape, spt, order, c->W);
}

int gp_dot_operand_layout(IrFunc *f, int c_layout, int opnd, int k)
{
    GpMmaFrag frag;
    int wm, wn;
    if (gp_layout_is_mma(f, c_layout, &frag, &wm, &wn)) /* B: C's columns per warp (rn), A: replicated */
        return gp_layout_mma_rn(f, opnd ? GP_MMA_B : GP_MMA_A, wm, wn, gp_mma_rn(f, c_layout));
    const IrLayout *cl = ir_layout_get(f, c_layout);
    IrLayout l = *cl;
    /* A[M,K]: rows as in C, the whole K in each thread; B[K,N] likewise. The
     * lanes/warps along C's other dim then hold copies (replication). */
    if (opnd == 0) l.spt[1] = k;
    else l.spt[0] = k;
    return ir_layout_intern(f, &l);
}

/* sm_90: an atomic_add of a tensor-core dot's result (attention's dQ += dS K)
 * stays in the accumulator layout: each thread's two adjacent columns per n8
 * tile are one red.global.add.v2.f32 (cg_memory.c), so the tile goes to
 * global memory without the SRAM round trip and the two barriers that a
 * conversion to the coalesced layout costs (FlashAttention-2 adds from the
 * accumulator too). Before sm_90 there is no vector red and the coalesced
 * layout stays. */
static int atomic_mma_layout(const LaCtx *c, const IrOp *op)
{
    const IrValue *v = op->nargs > 1 ? op->args[1] : NULL;
    if (c->sm < 90 || !v || !v->def || v->def->op != IR_DOT || v->layout < 0) return -1;
    const IrLayout *l = ir_layout_get(c->f, v->layout);
    return l && l->mma ? v->layout : -1;
}

/* FP8 wgmma reads its B tile K-major only (cg_dot_wgmma.c): a B operand loaded
 * with N contiguous (V of P @ V, [keys, d]) is stored transposed into SRAM. In
 * the coalesced layout each thread holds a run of 16 d of one key, which goes
 * as single bytes to 16 SRAM rows, 8 lanes on one bank (8-way conflicts, 64
 * st.shared.u8 a thread per 128 x 128 tile on 8 warps). Instead: lanes along N
 * with 4 bytes each (one 32-bit load, 128 bytes of a row per instruction),
 * warps along K, 16 keys a thread -- one 16-byte chunk of K -- so that the
 * transposing store is one st.shared.v4 per 16 keys of one column (byte
 * permutes in registers; cg_dot_mma.c's store_f8_chunks): 4 a thread, the 8
 * lanes of a store phase on 2 bank groups (4-way). Set on the load feeding a
 * wgmma.e4m3 dot's B, where its contiguous dim is N, 16 x num_warps keys
 * divide K and 32 lanes N. */
static int f8_kfast_layout(LaCtx *c, const IrOp *op, int coalesced)
{
    const IrValue *v = op->res[0];
    if (v->type.elem != IR_F8E4M3 || v->type.rank != 2 || !c->kfast || !c->kfast[v->id]) return coalesced;
    const IrLayout *cl = ir_layout_get(c->f, coalesced);
    if (!cl || cl->order[0] != 1 || v->type.shape[0] % (16 * c->W) || v->type.shape[1] % 32) return coalesced;
    IrLayout l;
    memset(&l, 0, sizeof l);
    l.kind = IR_LAYOUT_BLOCKED;
    l.rank = 2;
    l.spt[0] = 16, l.spt[1] = v->type.shape[1] / 32 < 4 ? v->type.shape[1] / 32 : 4;
    l.tpw[0] = 1, l.tpw[1] = 32;
    l.wpc[0] = c->W, l.wpc[1] = 1;
    l.order[0] = 1, l.order[1] = 0;   /* registers along N first: the loads take spt[1] bytes at once */
    return ir_layout_intern(c->f, &l);
}

/* Loads whose result is the B operand of a wgmma.e4m3 dot (c->kfast by id). */
static void find_f8_b(IrOp *op, void *vctx)
{
    LaCtx *c = vctx;
    if (op->op != IR_DOT || !ir_attr_int(&op->attrs, IR_ATTR_WGMMA_E4M3, 0)) return;
    const IrValue *b = op->args[1];
    if (!b->def || b->def->op != IR_LOAD || b->id >= c->nids) return;
    if (!c->kfast) {
        c->kfast = ARENA_ARRAY(c->f->arena, bool, c->nids);
        memset(c->kfast, 0, sizeof(bool) * (size_t)c->nids);
    }
    c->kfast[b->id] = true;
}

static void find_anchor(IrOp *op, void *vctx)
{
    LaCtx *c = vctx;
    int layout = -1;
    if ((op->op == IR_LOAD || op->op == IR_STORE || op->op == IR_ATOMIC_ADD) && is_tile(op->args[0])) {
        layout = op->op == IR_ATOMIC_ADD ? atomic_mma_layout(c, op) : -1;
        if (layout < 0) layout = mem_layout(c, op);
        if (op->op == IR_LOAD) layout = f8_kfast_layout(c, op, layout);
    } else if (op->op == IR_DOT) { /* tensor-core dots come with their layout (pass_accelerate_dot.c) */
        layout = op->res[0]->layout >= 0 ? op->res[0]->layout : dot_layout(c, op->res[0]->type);
    }
    if (layout >= 0) c->anchor[op->nres ? op->res[0]->id : op->args[0]->id] = layout;
}

/* Anchors are stored by a value id of the op: the result (load, atomic, dot)
 * or, for stores, the pointer operand. */
static int anchor_of(LaCtx *c, const IrOp *op)
{
    const IrValue *key = op->nres ? op->res[0] : op->args[0];
    return key->id < c->nids ? c->anchor[key->id] : -1;
}

/* An FMA dot takes the layout its users want when it is blocked (no
 * conversion of the result); a tensor-core dot keeps its MMA layout. */
static int dot_result_layout(LaCtx *c, const IrOp *op, int demanded)
{
    int a = anchor_of(c, op);
    const IrLayout *al = ir_layout_get(c->f, a);
    if (al && al->mma) return a;
    const IrLayout *dl = demanded >= 0 ? ir_layout_get(c->f, demanded) : NULL;
    return dl && dl->kind == IR_LAYOUT_BLOCKED && !dl->mma ? demanded : a;
}

/* ---- demand ---- */
static void demand_block(LaCtx *c, IrBlock *b);

static void demand_op(LaCtx *c, IrOp *op)
{
    int rd = op->nres == 1 ? get_demand(c, op->res[0]) : -1;
    switch (op->op) {
    case IR_LOAD: case IR_STORE: case IR_ATOMIC_ADD: {
        int a = anchor_of(c, op);
        for (int i = 0; i < op->nargs; i++) push_demand(c, op->args[i], a);
        return;
    }
    case IR_DOT: {
        int l = dot_result_layout(c, op, rd);
        if (mma_derived(c->f, l)) force_demand(c, op->args[2], l);
        else push_demand(c, op->args[2], l);
        return;
    }
    case IR_BROADCAST: push_demand(c, op->args[0], rd); return;
    case IR_EXPAND_DIMS:
        if (rd >= 0 && is_tile(op->args[0])) push_demand(c, op->args[0], gp_layout_slice(c->f, rd, op->attr[0]));
        return;
    case IR_TRANS:
        if (rd >= 0 && ir_layout_get(c->f, rd)->kind == IR_LAYOUT_BLOCKED) {
            int inv[GP_MAX_RANK], r = op->res[0]->type.rank;
            for (int i = 0; i < r; i++) inv[op->attr[i]] = i;
            push_demand(c, op->args[0], gp_layout_permute(c->f, rd, inv));
        }
        return;
    case IR_FOR: {
        IrBlock *body = op->regions[0];
        IrOp *y = body->last;
        for (int i = 0; i < op->nres; i++) {
            int d = get_demand(c, op->res[i]);
            if (y && y->op == IR_YIELD && i < y->nargs) push_demand(c, y->args[i], d);
            push_demand(c, body->args[i + 1], d);
        }
        demand_block(c, body);
        for (int i = 0; i < op->nres && 3 + i < op->nargs; i++)
            push_demand(c, op->args[3 + i], get_demand(c, body->args[i + 1]));
        return;
    }
    case IR_IF:
        for (int r = 0; r < op->nregions; r++) {
            IrOp *y = op->regions[r]->last;
            for (int i = 0; i < op->nres && y && y->op == IR_YIELD && i < y->nargs; i++)
                push_demand(c, y->args[i], get_demand(c, op->res[i]));
            demand_block(c, op->regions[r]);
        }
        return;
    default:
        break;
    }
    if ((ir_op_info[op->op].flags & IRF_ELEMWISE) && rd >= 0)
        for (int i = 0; i < op->nargs; i++) push_demand(c, op->args[i], rd);
}

static void demand_block(LaCtx *c, IrBlock *b)
{
    for (IrOp *op = b->last; op; op = op->prev) demand_op(c, op);
}

/* ---- forward assignment ---- */
static bool is_source(const IrValue *v)
{
    return v->def && (v->def->op == IR_CONST || v->def->op == IR_SPLAT || v->def->op == IR_ARANGE);
}

static int default_layout(LaCtx *c, const IrValue *v)
{
    return gp_layout_default(c->f, v->type.rank, v->type.shape, c->W);
}

/* Make operand i of op have `layout`. */
static void require(LaCtx *c, IrOp *op, int i, int layout)
{
    IrValue *v = op->args[i];
    if (!is_tile(v) || layout < 0 || v->layout == layout) return;
    if (gp_layouts_equivalent(c->f, v->layout, layout, v->type) || !c->materialize) return;
    IrOp *nop;
    if (is_source(v)) {
        /* A fresh copy in the right layout costs nothing; a conversion would. */
        IrOp *d = v->def;
        nop = ir_op_new(c->f, d->op, op->loc, d->nargs, d->args, 1, &v->type);
        nop->ival = d->ival;
        nop->fval = d->fval;
        memcpy(nop->attr, d->attr, sizeof d->attr);
    } else {
        nop = ir_op_new(c->f, IR_CONVERT_LAYOUT, op->loc, 1, &v, 1, &v->type);
    }
    nop->res[0]->layout = layout;
    nop->res[0]->name = v->name;
    ir_insert_before(op, nop);
    gp_axis_alias(c->axis, nop->res[0], v);
    op->args[i] = nop->res[0];
}

static void assign_block(LaCtx *c, IrBlock *b);

static int elementwise_layout(LaCtx *c, IrOp *op)
{
    int want = get_demand(c, op->res[0]);
    int first = -1, first_real = -1;
    /* Results of tensor-core dots (and their row statistics) pull the
     * elementwise ops that use them into their layout: softmax on the
     * accumulator stays in registers, and loop-carried values follow (the
     * dry run turns what the body yields into the loop arguments' layout). */
    for (int i = 0; i < op->nargs; i++)
        if (is_tile(op->args[i]) && !is_source(op->args[i]) && mma_derived(c->f, op->args[i]->layout))
            return op->args[i]->layout;
    for (int i = 0; i < op->nargs; i++) {
        IrValue *a = op->args[i];
        if (!is_tile(a)) continue;
        if (want >= 0 && gp_layouts_equivalent(c->f, a->layout, want, a->type)) return want;
        if (first < 0) first = a->layout;
        if (first_real < 0 && !is_source(a)) first_real = a->layout;
    }
    if (first_real >= 0) return first_real;
    if (first >= 0) return first;
    return want >= 0 ? want : default_layout(c, op->res[0]);
}

static void assign_loop(LaCtx *c, IrOp *op)
{
    IrBlock *body = op->regions[0];
    for (int i = 0; i + 1 < body->nargs; i++) {
        IrValue *arg = body->args[i + 1];
        IrValue *init = op->args[3 + i];
        int l = is_tile(arg) ? (c->hint[arg->id] >= 0 ? c->hint[arg->id] : init->layout) : -1;
        arg->layout = l;
        require(c, op, 3 + i, l);
        op->res[i]->layout = l;
    }
    assign_block(c, body);
    IrOp *y = body->last;
    for (int i = 0; y && y->op == IR_YIELD && i < y->nargs && i + 1 < body->nargs; i++) {
        IrValue *arg = body->args[i + 1];
        if (!c->materialize && is_tile(arg) && c->hint[arg->id] < 0 &&
            !gp_layouts_equivalent(c->f, y->args[i]->layout, arg->layout, arg->type))
            c->hint[arg->id] = y->args[i]->layout;
        require(c, y, i, arg->layout);
    }
}

static void assign_if(LaCtx *c, IrOp *op)
{
    for (int r = 0; r < op->nregions; r++) assign_block(c, op->regions[r]);
    IrOp *ty = op->regions[0]->last;
    for (int i = 0; i < op->nres; i++) {
        int l = is_tile(op->res[i]) && ty && i < ty->nargs ? ty->args[i]->layout : -1;
        op->res[i]->layout = l;
        if (op->nregions > 1) {
            IrOp *ey = op->regions[1]->last;
            if (ey && ey->op == IR_YIELD && i < ey->nargs) require(c, ey, i, l);
        }
    }
}

static void assign_op(LaCtx *c, IrOp *op)
{
    IrValue *res = op->nres == 1 ? op->res[0] : NULL;
    int rl = -1;
    switch (op->op) {
    case IR_FOR: assign_loop(c, op); return;
    case IR_IF: assign_if(c, op); return;
    case IR_CONVERT_LAYOUT: return;
    case IR_CONST: case IR_ARANGE: case IR_SPLAT: case IR_RESHAPE:
        if (is_tile(res)) rl = get_demand(c, res) >= 0 ? get_demand(c, res) : default_layout(c, res);
        break;
    case IR_BROADCAST:
        rl = is_tile(op->args[0]) ? op->args[0]->layout : default_layout(c, res);
        break;
    case IR_EXPAND_DIMS: {
        IrValue *a = op->args[0];
        int axis = op->attr[0];
        if (!is_tile(a)) { rl = default_layout(c, res); break; }
        const IrLayout *l = ir_layout_get(c->f, a->layout);
        if (l->kind == IR_LAYOUT_SLICE && l->dim == axis) rl = l->parent;
        else if (l->kind == IR_LAYOUT_BLOCKED) rl = gp_layout_insert_dim(c->f, a->layout, axis);
        else {
            rl = default_layout(c, res);
            require(c, op, 0, gp_layout_slice(c->f, rl, axis));
        }
        break;
    }
    case IR_TRANS: {
        int src = op->args[0]->layout;
        if (ir_layout_get(c->f, src)->kind != IR_LAYOUT_BLOCKED) {
            src = default_layout(c, op->args[0]);
            require(c, op, 0, src);
        }
        rl = gp_layout_permute(c->f, src, op->attr);
        break;
    }
    case IR_REDUCE:
        if (is_tile(res)) rl = gp_layout_slice(c->f, op->args[0]->layout, op->attr[0]);
        break;
    case IR_DOT: {
        rl = dot_result_layout(c, op, get_demand(c, res));
        int k = op->args[0]->type.shape[1];
        require(c, op, 0, gp_dot_operand_layout(c->f, rl, 0, k));
        require(c, op, 1, gp_dot_operand_layout(c->f, rl, 1, k));
        require(c, op, 2, rl);
        break;
    }
    case IR_LOAD: case IR_STORE: case IR_ATOMIC_ADD:
        if (!is_tile(op->args[0])) break;
        rl = anchor_of(c, op);
        for (int i = 0; i < op->nargs; i++) require(c, op, i, rl);
        break;
    default:
        if ((ir_op_info[op->op].flags & IRF_ELEMWISE) && is_tile(res)) {
            rl = elementwise_layout(c, op);
            for (int i = 0; i < op->nargs; i++) require(c, op, i, rl);
        }
        break;
    }
    if (res) res->layout = is_tile(res) ? rl : -1;
}

static void assign_block(LaCtx *c, IrBlock *b)
{
    for (IrOp *op = b->first; op; op = op->next) assign_op(c, op);
}

static bool check_op(IrOp *op, Diag *d)
{
    for (int i = 0; i < op->nres; i++)
        if (is_tile(op->res[i]) && op->res[i]->layout < 0) {
            diag_report(d, DIAG_INTERNAL, op->loc, "layout-assign: no layout for the result of '%s'",
                        ir_op_info[op->op].name);
            return false;
        }
    for (int r = 0; r < op->nregions; r++)
        for (IrOp *o = op->regions[r]->first; o; o = o->next)
            if (!check_op(o, d)) return false;
    return true;
}

/* After a dry run: values that came out in a tensor-core layout (or a slice
 * of one) become demands, so that what feeds them (masks, index tiles,
 * broadcasts of row statistics) is computed in that layout rather than
 * converted through SRAM. */
typedef struct Seed {
    LaCtx *c;
    int n;
} Seed;

static void seed_value(Seed *s, const IrValue *v)
{
    if (is_tile(v) && v->id < s->c->nids && v->layout >= 0 && mma_derived(s->c->f, v->layout)) {
        s->c->demand[v->id] = v->layout;
        s->n++;
    }
}

static void seed_op(IrOp *op, void *vctx)
{
    Seed *s = vctx;
    for (int i = 0; i < op->nres; i++) seed_value(s, op->res[i]);
    for (int r = 0; r < op->nregions; r++)
        for (int i = 0; i < op->regions[r]->nargs; i++) seed_value(s, op->regions[r]->args[i]);
}

static void dry_run(LaCtx *c)
{
    for (int i = 0; i < c->f->nparams; i++) c->f->params[i]->layout = -1;
    assign_block(c, c->f->body);
}

bool gp_pass_layout_assign(IrFunc *f, const GpPassCtx *ctx, Diag *d)
{
    GpAxisMap *axis = ctx->axis;
    LaCtx c;
    memset(&c, 0, sizeof c);
    c.f = f;
    c.axis = axis;
    c.W = f->sched.num_warps;
    c.sm = ctx->target->sm;
    c.nids = f->next_id;
    c.demand = ARENA_ARRAY(f->arena, int, c.nids);
    c.hint = ARENA_ARRAY(f->arena, int, c.nids);
    c.anchor = ARENA_ARRAY(f->arena, int, c.nids);
    for (int i = 0; i < c.nids; i++) c.demand[i] = c.hint[i] = c.anchor[i] = -1;
    ir_walk(f, find_f8_b, &c);
    ir_walk(f, find_anchor, &c);
    demand_block(&c, f->body);
    /* Dry run: learn which loop arguments should start in their yield's layout. */
    dry_run(&c);
    for (int i = 0; i < c.nids; i++)
        if (c.hint[i] >= 0) c.demand[i] = c.hint[i];
    /* Tensor-core layouts spread backwards too (see seed_value): demands
     * again from the dry run's MMA-derived values, then a second dry run. */
    int *first = ARENA_ARRAY(f->arena, int, c.nids);
    memcpy(first, c.demand, sizeof(int) * (size_t)c.nids);
    for (int i = 0; i < c.nids; i++) c.demand[i] = c.hint[i];
    Seed s = {&c, 0};
    ir_walk(f, seed_op, &s);
    if (s.n) {
        demand_block(&c, f->body);
        for (int i = 0; i < c.nids; i++)
            if (c.demand[i] < 0) c.demand[i] = first[i];
        dry_run(&c);
        for (int i = 0; i < c.nids; i++)
            if (c.hint[i] >= 0) c.demand[i] = c.hint[i];
    } else {
        memcpy(c.demand, first, sizeof(int) * (size_t)c.nids);
    }
    c.materialize = true;
    assign_block(&c, f->body);
    for (IrOp *op = f->body->first; op; op = op->next)
        if (!check_op(op, d)) return false;
    return gp_check_thread_regs(f, d); /* every tile now has its layout: registers per thread are known */
}
