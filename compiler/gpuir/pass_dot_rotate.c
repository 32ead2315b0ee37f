/* pass_dot_rotate.c — loop rotation across dots on sm_90a: the first dot of a
 * loop body is computed one iteration early and carried, so that the
 * dot-overlap pass (pass_dot_overlap.c) can leave it in flight during the
 * rest of the iteration (FlashAttention-3's intra-warpgroup overlap: the next
 * key block's Q K^T during this block's softmax). The schedule option
 * `overlap` (GpPassCtx.overlap), like dot-overlap; off, the IR is unchanged.
 * Runs before pipeline, so the rotated operand load is pipelined as any other.
 *
 * What it rotates: in a `for` (constant positive step) whose body holds a dot
 * D1 = dot(A, convert_layout(load(P(iv), M(iv), O)), Z) and a later dot D2,
 * both in wgmma's warp grid, with
 *   - A and Z defined outside the loop (Q and a zero tile),
 *   - the load's slice (the ops P and M are computed by) pure, depending only
 *     on the induction variable and values from outside the loop (no other
 *     load: an index read for iv + step could run past a list's end),
 *   - D1's result used in the body by something other than the yield (the
 *     loop is not rotated already),
 * it makes
 *     D1' = dot(A, convert(load(P(lo), M(lo) && lo < hi, 0)), Z)   before the loop
 *     for iv ... iter_args(..., s = D1') {
 *       s_next = dot(A, convert(load(P(iv + step), M(iv + step) && iv + step < hi, 0)), Z)
 *       ... every former use of D1 reads s ...
 *       yield ..., s_next
 *     }
 * and drops D1 and the slice ops nothing else uses. The load past the last
 * iteration reads nothing (masked: zero-filled), and its dot is discarded.
 * New values alias the axis facts of the ones they copy (computed from lo or
 * iv + step instead of iv, they are at least as divisible: iv's facts come
 * from lo and the step); the new mask term is uniform.
 *
 * Example (attention phase 1, PLAIN_SCORES): before
 *     for %it = %lo to %n_full step %64 iter_args(%l = ..., %acc = ..., %m = ...) {
 *       %kt = load %ptrs(%it) ; %b = convert_layout %kt ; %s = dot %q, %b, %z
 *       ... softmax of %s ... ; %acc2 = dot %p, %v, %acc1 ; yield %l2, %acc2, %m2 }
 * after: the same loop with a fourth carried value (the scores of block %it),
 * its load of block %it + 64 masked by %it + 64 < %n_full.
 */
#include "gpuir.h"

#include <string.h>

static bool grid_dot(const IrFunc *f, const IrOp *op)
{
    GpMmaFrag frag;
    int wm, wn;
    return op->op == IR_DOT && op->nres == 1 && gp_layout_is_mma(f, op->res[0]->layout, &frag, &wm, &wn) &&
           frag == GP_MMA_C && wn == 1 && wm == f->sched.num_warps && wm % 4 == 0;
}

typedef struct Rot {
    IrFunc *f;
    GpAxisMap *axis;
    IrOp *loop, *d1, *load;
    IrBlock *body;
    bool *slice;          /* by value id (< nids): results of body ops D1's B operand depends on */
    int nids;
} Rot;

/* Marks what `v` depends on in the body; false when that is not a pure slice
 * of the induction variable and outside values (one load: the operand's). */
static bool mark(Rot *r, IrValue *v)
{
    if (v->block == r->body) return v->index == 0;   /* the induction variable, not a carried value */
    if (!v->def || v->def->parent != r->body) return true;
    if (r->slice[v->id]) return true;
    IrOp *d = v->def;
    if (d->nregions || (!(ir_op_info[d->op].flags & IRF_PURE) && d != r->load)) return false;
    r->slice[v->id] = true;
    for (int i = 0; i < d->nargs; i++)
        if (!mark(r, d->args[i])) return false;
    return true;
}

static bool outside(const IrValue *v, const IrBlock *body)
{
    return v->block != body && (!v->def || v->def->parent != body);
}

/* Whether `d` can be D1 (see the header); fills r->load and r->slice. */
static bool candidate(Rot *r, IrOp *d)
{
    if (!grid_dot(r->f, d) || !outside(d->args[0], r->body) || !outside(d->args[2], r->body)) return false;
    const IrOp *cv = d->args[1]->def;
    if (!cv || cv->op != IR_CONVERT_LAYOUT || cv->parent != r->body) return false;
    r->load = cv->args[0]->def;
    if (!r->load || r->load->op != IR_LOAD || r->load->parent != r->body || r->load->nres != 1) return false;
    bool used_in_body = false;
    const IrOp *y = r->body->last;
    for (const IrOp *x = r->body->first; x; x = x->next)
        for (int i = 0; i < x->nargs; i++) used_in_body |= x->args[i] == d->res[0] && x != y;
    if (!used_in_body) return false;
    const IrOp *d2 = d->next;
    while (d2 && !grid_dot(r->f, d2)) d2 = d2->next;
    if (!d2) return false;
    memset(r->slice, 0, sizeof(bool) * (size_t)r->nids);
    return mark(r, d->args[1]);
}

static IrOp *insert(IrOp *before, IrOp *op)
{
    ir_insert_before(before, op);
    return op;
}

/* A new op of one result of type `t` (layout `layout`) before `at`. */
static IrValue *emit(Rot *r, IrOp *at, IrOpcode opc, IrType t, int layout, int nargs, IrValue *const *args)
{
    IrOp *op = insert(at, ir_op_new(r->f, opc, at->loc, nargs, args, 1, &t));
    op->res[0]->layout = layout;
    return op->res[0];
}

/* Copies the slice, D1's convert and D1 before `at` with the induction
 * variable replaced by `iv` and the load masked by iv < hi; returns D1's copy. */
static IrValue *clone_d1(Rot *r, IrOp *at, IrValue *iv)
{
    IrFunc *f = r->f;
    IrValue **map = ARENA_ARRAY(f->arena, IrValue *, f->next_id + 1);
    int nids = f->next_id;
    map[r->body->args[0]->id] = iv;
    IrOp *cv = r->d1->args[1]->def;
    for (IrOp *x = r->body->first; x; x = x->next) {
        /* r->slice covers the ids before this loop's rotation began (r->nids): the ops it adds
         * to the body since (the second call's iv + step) are never part of the slice */
        bool want = (x->nres && x->res[0]->id < r->nids && r->slice[x->res[0]->id]) || x == cv;
        if (!want) continue;
        IrValue *args[8];
        int n = x->nargs < 8 ? x->nargs : 8;
        for (int i = 0; i < n; i++) args[i] = x->args[i]->id < nids && map[x->args[i]->id] ? map[x->args[i]->id] : x->args[i];
        if (x == r->load) {
            /* mask: M && iv < hi (or iv < hi alone), other: 0 */
            IrValue *res = x->res[0];
            IrValue *hi = r->loop->args[1];
            IrValue *cmp_args[2] = {iv, hi};
            IrValue *c = emit(r, at, IR_CMP, ir_type_scalar(IR_I1), -1, 2, cmp_args);
            c->def->attr[0] = IR_CMP_LT;
            IrType mt = res->type;
            mt.elem = IR_I1;
            int ml = n > 1 ? args[1]->layout : res->layout;
            IrValue *m = emit(r, at, IR_SPLAT, mt, ml, 1, &c);
            gp_axis_uniform(r->axis, m);
            if (n > 1) {
                IrValue *and_args[2] = {args[1], m};
                IrValue *both = emit(r, at, IR_AND, args[1]->type, ml, 2, and_args);
                gp_axis_alias(r->axis, both, x->args[1]);
                m = both;
            }
            IrValue *other = n > 2 ? args[2] : emit(r, at, IR_CONST, res->type, res->layout, 0, NULL);
            if (n <= 2) other->def->fval = 0.0, other->def->ival = 0;
            IrValue *largs[3] = {args[0], m, other};
            args[0] = largs[0], args[1] = largs[1], args[2] = largs[2];
            n = 3;
        }
        IrType *rt = ARENA_ARRAY(f->arena, IrType, x->nres + 1);
        for (int i = 0; i < x->nres; i++) rt[i] = x->res[i]->type;
        IrOp *c = insert(at, ir_op_new(f, x->op, x->loc, n, args, x->nres, rt));
        c->ival = x->ival, c->fval = x->fval, c->sattr = x->sattr;
        memcpy(c->attr, x->attr, sizeof c->attr);
        for (int i = 0; i < x->nres; i++) {
            c->res[i]->layout = x->res[i]->layout;
            c->res[i]->name = x->res[i]->name;
            gp_axis_alias(r->axis, c->res[i], x->res[i]);
            map[x->res[i]->id] = c->res[i];
        }
    }
    IrValue *dargs[3] = {r->d1->args[0], map[cv->res[0]->id], r->d1->args[2]};
    IrValue *s = emit(r, at, IR_DOT, r->d1->res[0]->type, r->d1->res[0]->layout, 3, dargs);
    memcpy(s->def->attr, r->d1->attr, sizeof s->def->attr);
    if (ir_attr_int(&r->d1->attrs, IR_ATTR_WGMMA_E4M3, 0)) /* an FP8 wgmma dot stays one */
        ir_attr_set_int(r->f->arena, &s->def->attrs, IR_ATTR_WGMMA_E4M3, 1);
    s->name = r->d1->res[0]->name;
    return s;
}

/* Appends a carried value: init before the loop, `next` at the yield; returns its block argument. */
static IrValue *add_carried(Rot *r, IrValue *init, IrValue *next)
{
    IrFunc *f = r->f;
    IrOp *loop = r->loop, *y = r->body->last;
    IrValue **args = ARENA_ARRAY(f->arena, IrValue *, loop->nargs + 1);
    memcpy(args, loop->args, sizeof(IrValue *) * (size_t)loop->nargs);
    args[loop->nargs] = init;
    ir_op_set_args(f, loop, loop->nargs + 1, args);
    IrValue **res = ARENA_ARRAY(f->arena, IrValue *, loop->nres + 1);
    memcpy(res, loop->res, sizeof(IrValue *) * (size_t)loop->nres);
    IrValue *out = ir_value_new(f, init->type);
    out->def = loop, out->index = loop->nres, out->layout = init->layout;
    res[loop->nres] = out;
    loop->res = res;
    loop->nres++;
    IrValue **yargs = ARENA_ARRAY(f->arena, IrValue *, y->nargs + 1);
    memcpy(yargs, y->args, sizeof(IrValue *) * (size_t)y->nargs);
    yargs[y->nargs] = next;
    ir_op_set_args(f, y, y->nargs + 1, yargs);
    IrValue *arg = ir_block_add_arg(r->body, init->type, NULL);
    arg->layout = init->layout;
    return arg;
}

/* Drops D1 and the slice ops (its convert included) that nothing uses any more. */
static void drop_dead(Rot *r)
{
    int *uses = ir_use_counts(r->f);
    IrOp *cv = r->d1->args[1]->def;
    bool changed = true;
    while (changed) {
        changed = false;
        for (IrOp *x = r->body->last, *prev; x; x = prev) {
            prev = x->prev;
            bool ours = x == r->d1 || x == cv || (x->nres && x->res[0]->id < r->nids && r->slice[x->res[0]->id]);
            if (!ours) continue;
            bool dead = true;
            for (int i = 0; i < x->nres; i++) dead &= uses[x->res[i]->id] == 0;
            if (!dead) continue;
            for (int i = 0; i < x->nargs; i++) uses[x->args[i]->id]--;
            ir_op_unlink(x);
            changed = true;
        }
    }
}

static void visit(IrOp *loop, void *vctx)
{
    Rot *r = vctx;
    const IrOp *st = loop->op == IR_FOR ? loop->args[2]->def : NULL;
    if (!st || st->op != IR_CONST || st->ival <= 0 || loop->args[0]->type.rank) return;
    r->loop = loop;
    r->body = loop->regions[0];
    r->nids = r->f->next_id;
    r->slice = ARENA_ARRAY(r->f->arena, bool, r->nids);
    IrOp *d1 = r->body->first;
    while (d1 && d1->op != IR_DOT) d1 = d1->next;   /* the body's first dot only */
    if (!d1 || !candidate(r, d1)) return;
    r->d1 = d1;
    IrValue *first = clone_d1(r, loop, loop->args[0]);
    IrValue *step_args[2] = {r->body->args[0], loop->args[2]};
    IrValue *nx = emit(r, d1, IR_ADD, r->body->args[0]->type, -1, 2, step_args);
    gp_axis_alias(r->axis, nx, r->body->args[0]);   /* iv + step: at least as divisible as iv */
    IrValue *next = clone_d1(r, d1, nx);
    IrValue *cur = add_carried(r, first, next);
    ir_replace_uses(r->f, d1->res[0], cur);
    drop_dead(r);
}

bool gp_pass_dot_rotate(IrFunc *f, const GpPassCtx *ctx, Diag *d)
{
    (void)d;
    if (!ctx->sched.overlap || !ir_attr_int(&f->attrs, IR_ATTR_WGMMA, 0)) return true;
    Rot r = {f, ctx->axis, NULL, NULL, NULL, NULL, NULL, 0};
    ir_walk(f, visit, &r);
    return true;
}
