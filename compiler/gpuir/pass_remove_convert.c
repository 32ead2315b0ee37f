/* pass_remove_convert.c — remove layout conversions that layout assignment
 * left where a cheaper form exists. Every convert_layout that survives this
 * pass is a shared-memory round trip (or, to an MMA operand layout, a
 * swizzled store + ldmatrix), so each one removed saves SRAM, two barriers
 * and the traffic.
 *
 *   1. rematerialisation: a conversion of a value computed only from
 *      constants, splats, aranges, broadcasts, expand_dims and pure
 *      elementwise ops of those (index arithmetic, masks built from it) is
 *      replaced by recomputing that tree in the wanted layout (at most
 *      REMAT_MAX ops per conversion; scalars and values of other trees are
 *      shared). The originals become dead and are deleted.
 *      Small 1-D loads count as such ops when nothing between the load and
 *      the conversion writes memory (the same block, so the same iteration):
 *      reading a few words again in the wanted layout — a paged KV cache's
 *      block-table entries, an index table — costs an L1 hit, where the
 *      conversion costs an SRAM round trip and two barriers per iteration,
 *      and would stand between the pipelined copies and their addresses.
 *      The load read again stays where the program issued it (the rest of
 *      the tree goes to the conversion): a program that reads a value early
 *      to hide the latency keeps that.
 *   2. hoisting: a conversion inside a loop whose source is defined outside
 *      the loop moves before the loop (the loop-invariant Q tile of
 *      attention is staged for the tensor cores once, not every iteration).
 *   3. chains: convert(convert(x)) reads x directly, and conversions between
 *      equivalent layouts (same thread -> element map) are dropped.
 *   4. duplicates: a conversion equal to an earlier one of the same block
 *      (same source, same layout) reads that one. Merged before 1 too:
 *      layout assignment converts a value once per use, and the attention
 *      backward's per-query LSE (`lse == -inf`, `lse * LOG2E`) was read
 *      from global memory twice, once per rematerialised conversion.
 *      Merged after 2 as well: hoisting puts one copy of
 *      attention's Q conversion before each of the two key loops; merged,
 *      Q's registers die at the first, instead of living through the first
 *      loop to feed the second (64 registers per thread at d = 128 on
 *      32-row warps).
 * The MMA accumulator layout itself is propagated by layout assignment
 * (pass_layout_assign.c: the dot's accumulator demand wins, and elementwise
 * ops follow an MMA-derived operand), so softmax on the scores of attention
 * runs in the accumulator's registers with no conversion at all.
 *
 * Example (matmul's k loop, 4 warps):
 *     %53 = convert_layout %34 : tensor<32xi32, #L9>         before
 *     %35 = expand_dims 0 %53 : tensor<1x32xi32, #L8>
 *     ...
 *     %60 = arange 0, 32 : tensor<32xi32, #L9>               after: the index
 *     %61 = splat %31 : tensor<32xi32, #L9>                  tile recomputed
 *     %62 = add %61, %60 : tensor<32xi32, #L9>               in #L9
 */
#include "gpuir.h"

#include <string.h>

#define REMAT_MAX 48

/* The most elements a load may have to be read again in another layout. */
#define REMAT_LOAD_MAX 256

typedef struct RcCtx {
    IrFunc *f;
    GpAxisMap *axis;
    const IrOp *at;     /* the conversion being removed */
    int budget;
    int removed, hoisted;
} RcCtx;

static bool is_tile(const IrValue *v) { return v && v->type.rank > 0; }

static bool cheap_op(const IrOp *d)
{
    if (!d || d->nregions) return false;
    switch (d->op) {
    case IR_CONST: case IR_SPLAT: case IR_ARANGE: case IR_BROADCAST: case IR_EXPAND_DIMS: case IR_CONVERT_LAYOUT:
        return true;
    default:
        return (ir_op_info[d->op].flags & IRF_ELEMWISE) && (ir_op_info[d->op].flags & IRF_PURE);
    }
}

/* A small 1-D load in the conversion's block, a loop body, with no write
 * to memory between it and the conversion: reading it again there gives its
 * value. (Outside loops a conversion runs once; a load read twice there
 * would also lose the vector width its first layout was chosen for.) */
static bool reloadable(const RcCtx *c, const IrOp *d)
{
    const IrBlock *b = c->at->parent;
    if (!d || d->op != IR_LOAD || d->nregions || d->parent != b || !b->parent_op || b->parent_op->op != IR_FOR ||
        d->res[0]->type.rank != 1 || ir_type_numel(d->res[0]->type) > REMAT_LOAD_MAX)
        return false;
    for (const IrOp *x = d->next; x && x != c->at; x = x->next)
        if ((ir_op_info[x->op].flags & IRF_MEM_WRITE) || x->nregions) return false;
    return true;
}

/* Whether `v` can be recomputed in any layout within the budget (dry). */
static bool can_remat(RcCtx *c, const IrValue *v, int depth)
{
    if (!is_tile(v)) return true;
    const IrOp *d = v->def;
    if (!(cheap_op(d) || reloadable(c, d)) || depth > REMAT_MAX || --c->budget < 0) return false;
    for (int i = 0; i < d->nargs; i++)
        if (!can_remat(c, d->args[i], depth + 1)) return false;
    return true;
}

/* `v` in `layout`, recomputed before `pos`. */
static IrValue *remat(RcCtx *c, IrValue *v, int layout, IrOp *pos)
{
    if (!is_tile(v)) return v;
    if (v->layout == layout || gp_layouts_equivalent(c->f, v->layout, layout, v->type)) return v;
    IrOp *d = v->def;
    if (d->op == IR_CONVERT_LAYOUT) return remat(c, d->args[0], layout, pos);
    /* A load read again is issued where the program issued it (its
     * addresses are computed from values defined before it), not at the
     * conversion: the program placed it to overlap what follows (the
     * attention backward reads delta before dP^T's dot, whose result it
     * meets). */
    if (d->op == IR_LOAD) pos = d;
    IrValue *args[4];
    for (int i = 0; i < d->nargs && i < 4; i++) {
        int al = layout;
        if (d->op == IR_EXPAND_DIMS) al = gp_layout_slice(c->f, layout, d->attr[0]);
        args[i] = remat(c, d->args[i], al, pos);
    }
    IrOp *n = ir_op_new(c->f, d->op, d->loc, d->nargs, args, 1, &v->type);
    n->ival = d->ival;
    n->fval = d->fval;
    memcpy(n->attr, d->attr, sizeof d->attr);
    n->res[0]->layout = layout;
    n->res[0]->name = v->name;
    ir_insert_before(pos, n);
    gp_axis_alias(c->axis, n->res[0], v);
    return n->res[0];
}

/* Rematerialisation is only for layouts the shape ops can be built in:
 * blocked (MMA included) targets, whose slices expand_dims can use. */
static bool remat_target(const IrFunc *f, int layout)
{
    const IrLayout *l = ir_layout_get(f, layout);
    return l && (l->kind == IR_LAYOUT_BLOCKED || l->kind == IR_LAYOUT_SLICE);
}

static void visit_block(RcCtx *c, IrBlock *b);

static void visit_convert(RcCtx *c, IrOp *op)
{
    IrValue *src = op->args[0], *res = op->res[0];
    /* chains and no-ops */
    while (src->def && src->def->op == IR_CONVERT_LAYOUT) src = src->def->args[0];
    if (src != op->args[0]) ir_op_set_args(c->f, op, 1, &src);
    if (gp_layouts_equivalent(c->f, src->layout, res->layout, res->type)) {
        ir_replace_uses(c->f, res, src);
        c->removed++;
        return;
    }
    c->budget = REMAT_MAX;
    c->at = op;
    if (remat_target(c->f, res->layout) && src->def && src->def->op != IR_CONVERT_LAYOUT &&
        can_remat(c, src, 0)) {
        IrValue *nv = remat(c, src, res->layout, op);
        ir_replace_uses(c->f, res, nv);
        c->removed++;
    }
}

static void hoist_invariant(RcCtx *c, IrOp *loop)
{
    IrBlock *body = loop->regions[0];
    for (IrOp *op = body->first, *next; op; op = next) {
        next = op->next;
        if (op->op != IR_CONVERT_LAYOUT || !ir_value_defined_outside(op->args[0], loop)) continue;
        ir_op_unlink(op);
        ir_insert_before(loop, op);
        c->hoisted++;
    }
}

static void visit_block(RcCtx *c, IrBlock *b)
{
    for (IrOp *op = b->first, *next; op; op = next) {
        next = op->next;
        for (int r = 0; r < op->nregions; r++) visit_block(c, op->regions[r]);
        if (op->op == IR_FOR) hoist_invariant(c, op);
        if (op->op == IR_CONVERT_LAYOUT) visit_convert(c, op);
    }
}

static void merge_duplicates(RcCtx *c, IrBlock *b)
{
    for (IrOp *op = b->first; op; op = op->next) {
        for (int r = 0; r < op->nregions; r++) merge_duplicates(c, op->regions[r]);
        if (op->op != IR_CONVERT_LAYOUT) continue;
        for (IrOp *e = b->first; e != op; e = e->next)
            if (e->op == IR_CONVERT_LAYOUT && e->args[0] == op->args[0] &&
                e->res[0]->layout == op->res[0]->layout && ir_type_eq(e->res[0]->type, op->res[0]->type)) {
                ir_replace_uses(c->f, op->res[0], e->res[0]);
                c->removed++;
                break;
            }
    }
}

typedef struct DeadCtx {
    IrFunc *f;
    const int *uses;
    PtrVec *dead;
} DeadCtx;

static void collect_dead(IrOp *op, void *vctx)
{
    DeadCtx *d = vctx;
    bool pure = (ir_op_info[op->op].flags & IRF_PURE) || op->op == IR_LOAD;
    if (op->nres == 1 && !op->nregions && pure && d->uses[op->res[0]->id] == 0)
        vec_push(d->f->arena, d->dead, op);
}

/* Delete pure ops and loads without uses (the converts replaced above and
 * the trees that only fed them, loads read again elsewhere), until nothing
 * changes. */
static int remove_dead(IrFunc *f)
{
    int total = 0;
    for (bool again = true; again;) {
        int *uses = ir_use_counts(f);
        PtrVec dead = {0};
        ir_walk(f, collect_dead, &(DeadCtx){f, uses, &dead});
        for (int i = 0; i < dead.len; i++) ir_op_unlink(dead.data[i]);
        total += dead.len;
        again = dead.len > 0;
    }
    return total;
}

bool gp_pass_remove_convert(IrFunc *f, const GpPassCtx *ctx, Diag *d)
{
    (void)d;
    RcCtx c = {f, ctx->axis, NULL, 0, 0, 0};
    /* Duplicates first as well: layout assignment converts a value once per
     * use, and two converts rematerialised apart would read a load twice. */
    merge_duplicates(&c, f->body);
    visit_block(&c, f->body);
    merge_duplicates(&c, f->body);
    remove_dead(f);
    return true;
}
