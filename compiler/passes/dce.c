/* dce.c — dead code elimination (pass "dce").
 *
 * What it does: a mark-and-sweep liveness over the whole function, which
 * reaches the fixed point of "remove what nothing needs" in one go (chains of
 * dead ops, nested regions and loop-carried cycles included):
 *   - roots: ops with effects — anything neither pure, nor a region op, nor a
 *     terminator (load, store, atomic_add, assert); their operands are live;
 *   - a pure op is live when one of its results is;
 *   - `for` carried value k is live when its result k is live or its block
 *     argument k+1 is used by a live op; a live carried value makes its init,
 *     its yield operand, its block argument and the loop bounds live. So a value
 *     carried only around its own yield chain (acc = acc + x, result unused)
 *     stays dead;
 *   - `if` result k live makes the condition and yield operand k of each region
 *     live; a for/if holding a root is live and needs its bounds / condition.
 * Sweep: dead pure ops are removed; a for/if with no effects inside and no live
 * result or carried value is removed whole; a kept `for` loses its dead carried
 * values (init, result, block argument, yield operand) and a kept `if` its dead
 * results (and their yield operands).
 *
 * Invariants: ops with effects and terminators are never removed; every kept
 * op's operands are live, so nothing kept refers to a removed value; loads are
 * not removed (they are not pure: an out-of-bounds load is an error the
 * interpreter reports). A `for` loop is assumed to terminate.
 *
 * Example (the loop keeps its store, loses the dead accumulator):
 *     %r = for %i = %lo to %hi step %s              for %i = %lo to %hi step %s {
 *            iter(%acc = %z) -> (f32) {               store %p, %v
 *       %n = add %acc, %x : f32           ==>         yield
 *       store %p, %v                                }
 *       yield %n
 *     }    (%r unused)
 */
#include "passes.h"

#include <string.h>

typedef struct Dce {
    IrFunc *f;
    uint8_t *live;       /* by value id */
    IrValue **work;
    int nwork, capwork;
} Dce;

static bool is_root(const IrOp *op)
{
    return !(ir_op_info[op->op].flags & (IRF_PURE | IRF_REGIONS | IRF_TERM));
}

static void mark(Dce *d, IrValue *v)
{
    if (!v || v->id >= d->f->next_id || d->live[v->id]) return;
    d->live[v->id] = 1;
    if (d->nwork == d->capwork) {
        int nc = d->capwork ? d->capwork * 2 : 64;
        IrValue **n = ARENA_ARRAY(d->f->arena, IrValue *, nc);
        if (d->nwork) memcpy(n, d->work, sizeof(IrValue *) * (size_t)d->nwork);
        d->work = n;
        d->capwork = nc;
    }
    d->work[d->nwork++] = v;
}

static bool is_live(const Dce *d, const IrValue *v) { return v->id < d->f->next_id && d->live[v->id]; }

static IrOp *yield_of(IrBlock *b)
{
    return b && b->last && b->last->op == IR_YIELD ? b->last : NULL;
}

/* for: lo, hi, step; if: cond. */
static void mark_control(Dce *d, IrOp *op)
{
    int n = op->op == IR_FOR ? 3 : 1;
    for (int i = 0; i < n && i < op->nargs; i++) mark(d, op->args[i]);
}

static void mark_carried(Dce *d, IrOp *loop, int k)
{
    mark_control(d, loop);
    if (k < loop->nres) mark(d, loop->res[k]);
    if (3 + k < loop->nargs) mark(d, loop->args[3 + k]);
    IrBlock *body = loop->nregions ? loop->regions[0] : NULL;
    if (body && k + 1 < body->nargs) mark(d, body->args[k + 1]);
    IrOp *y = yield_of(body);
    if (y && k < y->nargs) mark(d, y->args[k]);
}

/* A live value makes what it depends on live. */
static void propagate(Dce *d, IrValue *v)
{
    IrOp *def = v->def;
    if (!def) {
        IrOp *owner = v->block ? v->block->parent_op : NULL;
        if (owner && owner->op == IR_FOR) {
            if (v->index == 0) mark_control(d, owner);
            else mark_carried(d, owner, v->index - 1);
        }
        return;
    }
    if (def->op == IR_FOR) {
        mark_carried(d, def, v->index);
    } else if (def->op == IR_IF) {
        mark_control(d, def);
        for (int r = 0; r < def->nregions; r++) {
            IrOp *y = yield_of(def->regions[r]);
            if (y && v->index < y->nargs) mark(d, y->args[v->index]);
        }
    } else {
        for (int i = 0; i < def->nargs; i++) mark(d, def->args[i]);
    }
}

/* Marks the operands of every root; returns whether the block holds a root. */
static bool mark_roots(Dce *d, IrBlock *b)
{
    bool effects = false;
    for (IrOp *op = b->first; op; op = op->next) {
        if (op->nregions) {
            bool inner = false;
            for (int r = 0; r < op->nregions; r++) inner |= mark_roots(d, op->regions[r]);
            if (inner) mark_control(d, op);
            effects |= inner;
        } else if (is_root(op)) {
            for (int i = 0; i < op->nargs; i++) mark(d, op->args[i]);
            effects = true;
        }
    }
    return effects;
}

/* Drops the dead carried values of a kept `for`. */
static void prune_for(Dce *d, IrOp *loop)
{
    IrBlock *body = loop->nregions ? loop->regions[0] : NULL;
    IrOp *y = yield_of(body);
    if (!body || !y || loop->nargs != 3 + loop->nres || body->nargs != 1 + loop->nres ||
        y->nargs != loop->nres)
        return; /* malformed: leave it to the verifier */
    int n = 0;
    for (int k = 0; k < loop->nres; k++) {
        if (!is_live(d, loop->res[k]) && !is_live(d, body->args[k + 1])) continue;
        loop->args[3 + n] = loop->args[3 + k];
        loop->res[n] = loop->res[k];
        loop->res[n]->index = n;
        body->args[n + 1] = body->args[k + 1];
        body->args[n + 1]->index = n + 1;
        y->args[n] = y->args[k];
        n++;
    }
    loop->nargs = 3 + n;
    loop->nres = n;
    body->nargs = 1 + n;
    y->nargs = n;
}

/* Drops the dead results of a kept `if`. */
static void prune_if(Dce *d, IrOp *op)
{
    for (int r = 0; r < op->nregions; r++) {
        IrOp *y = yield_of(op->regions[r]);
        if (!y || y->nargs != op->nres) return;
    }
    int n = 0;
    for (int k = 0; k < op->nres; k++) {
        if (!is_live(d, op->res[k])) continue;
        for (int r = 0; r < op->nregions; r++) {
            IrOp *y = yield_of(op->regions[r]);
            y->args[n] = y->args[k];
        }
        op->res[n] = op->res[k];
        op->res[n]->index = n;
        n++;
    }
    for (int r = 0; r < op->nregions; r++) yield_of(op->regions[r])->nargs = n;
    op->nres = n;
}

static bool any_result_live(const Dce *d, const IrOp *op)
{
    for (int i = 0; i < op->nres; i++)
        if (is_live(d, op->res[i])) return true;
    return false;
}

/* Removes dead ops; returns whether the block still holds an op with effects. */
static bool sweep(Dce *d, IrBlock *b)
{
    bool effects = false;
    for (IrOp *op = b->first, *next; op; op = next) {
        next = op->next;
        if (op->nregions) {
            bool inner = false;
            for (int r = 0; r < op->nregions; r++) inner |= sweep(d, op->regions[r]);
            bool carried_live = false;
            if (op->op == IR_FOR && op->nregions)
                for (int k = 1; k < op->regions[0]->nargs; k++) carried_live |= is_live(d, op->regions[0]->args[k]);
            if (!inner && !carried_live && !any_result_live(d, op)) {
                ir_op_unlink(op);
                continue;
            }
            if (op->op == IR_FOR) prune_for(d, op);
            else if (op->op == IR_IF) prune_if(d, op);
            effects |= inner;
        } else if (is_root(op)) {
            effects = true;
        } else if ((ir_op_info[op->op].flags & IRF_PURE) && !any_result_live(d, op)) {
            ir_op_unlink(op);
        }
    }
    return effects;
}

void pass_dce(IrFunc *f)
{
    Dce d = {.f = f};
    d.live = ARENA_ARRAY(f->arena, uint8_t, f->next_id + 1);
    mark_roots(&d, f->body);
    while (d.nwork > 0) propagate(&d, d.work[--d.nwork]);
    sweep(&d, f->body);
}
