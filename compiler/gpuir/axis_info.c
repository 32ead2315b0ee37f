/* axis_info.c — an analysis, not a pass (it changes nothing): divisibility,
 * contiguity and constancy of integer and pointer values (Triton's AxisInfo, simplified).
 *
 * For a value and each dimension d (scalars use d = 0):
 *   contig[d]    the values come in runs of this many +1 steps along d;
 *   constancy[d] the values come in runs of this many equal elements along d;
 *   div[d]       the first element of every run is divisible by this (bytes
 *                for pointers, elements for integers).
 * All three are powers of two (gcd = min). Facts only ever under-approximate:
 * an unknown value reads as all ones. The layout pass and the memory lowering
 * use them to pick vector widths: a 16-byte access needs 16/elem contiguous
 * pointers whose run starts are 16-byte aligned, and a mask constant across
 * the vector.
 *
 * Sources of facts: kernel pointer parameters are aligned to their element
 * size unless the front end says more (IrValue.divisibility > 1 wins: hints,
 * or the runtime's launch-time specialisation, see docs/gpu.md);
 * integer parameters carry IrValue.divisibility (1 = unknown); arange(s, e)
 * is contiguous with div = largest power of two dividing s; constants divide
 * by their largest power of two; min, max and select divide by what divides
 * both their value operands. Example:
 *     %o = add (mul (program_id 0) 128) (arange 0 128)   contig 128, div 128
 *     %p = addptr (splat %X : ptr<f32>) %o                contig 128, div 16 bytes if X
 *                                                         has divisibility 16, else 4
 *     %m = cmp lt %o (splat %n)                            constancy min(128, div(n))
 */
#include "gpuir.h"

#include <string.h>

#define BIG ((int64_t)1 << 30)

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

static int64_t hp2(int64_t v)
{
    if (v == 0) return BIG;
    if (v < 0) v = -v;
    int64_t p = 1;
    while ((v & p) == 0 && p < BIG) p <<= 1;
    return p;
}

static const GpAxis unknown_axis = {{1, 1, 1, 1}, {1, 1, 1, 1}, {1, 1, 1, 1}};

const GpAxis *gp_axis_get(const GpAxisMap *m, const IrValue *v)
{
    if (!m || !v || v->id >= m->n || !m->v[v->id]) return &unknown_axis;
    return m->v[v->id];
}

void gp_axis_alias(GpAxisMap *m, const IrValue *nv, const IrValue *old)
{
    if (nv->id >= m->n) {
        int nn = nv->id * 2 + 16;
        GpAxis **v = ARENA_ARRAY(m->arena, GpAxis *, nn);
        memcpy(v, m->v, sizeof(GpAxis *) * (size_t)m->n);
        m->v = v;
        m->n = nn;
    }
    m->v[nv->id] = (GpAxis *)gp_axis_get(m, old);
}

void gp_axis_uniform(GpAxisMap *m, const IrValue *nv)
{
    GpAxis *a = ARENA_NEW(m->arena, GpAxis);
    for (int d = 0; d < GP_MAX_RANK; d++) {
        a->div[d] = a->contig[d] = 1;
        a->constancy[d] = d < nv->type.rank ? nv->type.shape[d] : 1;
    }
    gp_axis_alias(m, nv, nv);   /* grows the map */
    m->v[nv->id] = a;
}

typedef struct AxCtx {
    GpAxisMap *m;
    Arena *a;
} AxCtx;

static GpAxis *ax_new(AxCtx *c, const IrValue *v)
{
    GpAxis *x = ARENA_NEW(c->a, GpAxis);
    *x = unknown_axis;
    if (v->id < c->m->n) c->m->v[v->id] = x;
    return x;
}

/* Facts of operand `v` seen with the result's shape (scalars broadcast). */
static GpAxis view(AxCtx *c, const IrValue *v, IrType rt)
{
    const GpAxis *x = gp_axis_get(c->m, v);
    GpAxis r = *x;
    if (v->type.rank == 0 && rt.rank > 0)
        for (int d = 0; d < rt.rank; d++) {
            r.div[d] = x->div[0];
            r.contig[d] = 1;
            r.constancy[d] = rt.shape[d];
        }
    return r;
}

/* Divisibility of every element (not only of run starts). */
static int64_t elem_div(const GpAxis *x, int d) { return x->contig[d] > 1 ? 1 : x->div[d]; }

static bool const_value(const IrValue *v, int64_t *out)
{
    if (!v->def || v->def->op != IR_CONST || ir_elem_is_float((IrElem)v->type.elem)) return false;
    *out = v->def->ival;
    return true;
}

/* add/sub/addptr: `unit` scales the integer operand b (element size for addptr). */
static void ax_add(GpAxis *r, const GpAxis *a, const GpAxis *b, int rank, int64_t unit, bool sub)
{
    for (int d = 0; d < rank; d++) {
        int64_t ca = min64(a->contig[d], b->constancy[d]);
        int64_t cb = sub ? 1 : min64(a->constancy[d], b->contig[d]);
        r->contig[d] = max64(ca, cb);
        r->constancy[d] = min64(a->constancy[d], b->constancy[d]);
        int64_t dv = min64(a->div[d], min64(b->div[d] * unit, BIG));
        /* Runs that got shorter start inside the old runs, at multiples of
         * their new length. */
        if (a->contig[d] > r->contig[d]) dv = min64(dv, r->contig[d] * unit);
        if (b->contig[d] > r->contig[d]) dv = min64(dv, r->contig[d] * unit);
        r->div[d] = max64(dv, 1);
    }
}

static void ax_mul(GpAxis *r, const GpAxis *a, const GpAxis *b, int rank)
{
    for (int d = 0; d < rank; d++) {
        r->contig[d] = 1;
        r->constancy[d] = min64(a->constancy[d], b->constancy[d]);
        r->div[d] = min64(elem_div(a, d) * elem_div(b, d), BIG);
    }
}

/* x < n and x >= n change value only where x crosses n: when the runs of x
 * start at multiples of g and n is a multiple of g, the result is constant
 * over aligned groups of g. */
static void ax_cmp(GpAxis *r, const GpAxis *a, const GpAxis *b, int rank, IrCmp cmp)
{
    bool a_runs = cmp == IR_CMP_LT || cmp == IR_CMP_GE;
    bool b_runs = cmp == IR_CMP_GT || cmp == IR_CMP_LE;
    for (int d = 0; d < rank; d++) {
        int64_t k = min64(a->constancy[d], b->constancy[d]);
        if (a_runs && a->contig[d] > 1 && b->constancy[d] >= a->contig[d])
            k = max64(k, min64(a->contig[d], min64(a->div[d], elem_div(b, d))));
        if (b_runs && b->contig[d] > 1 && a->constancy[d] >= b->contig[d])
            k = max64(k, min64(b->contig[d], min64(b->div[d], elem_div(a, d))));
        r->constancy[d] = k;
    }
}

static void ax_param(AxCtx *c, const IrValue *p)
{
    GpAxis *x = ax_new(c, p);
    int64_t d = p->divisibility > 1 ? p->divisibility : 1;
    /* Without a hint a pointer is only known to be aligned to its element
     * (the caller may pass X + 1); 16-byte alignment must be stated by a
     * hint or proven by the runtime's launch-time specialisation. */
    if (p->type.elem == IR_PTR && d <= 1) d = gp_elem_bytes((IrElem)p->type.pointee);
    x->div[0] = d;
}

static void ax_shape_op(AxCtx *c, IrOp *op, GpAxis *r, IrType rt)
{
    const GpAxis *a = gp_axis_get(c->m, op->args[0]);
    IrType at = op->args[0]->type;
    switch (op->op) {
    case IR_SPLAT:
        *r = view(c, op->args[0], rt);
        break;
    case IR_BROADCAST:
        for (int d = 0; d < rt.rank; d++) {
            r->div[d] = a->div[d];
            bool stretched = at.shape[d] == 1 && rt.shape[d] > 1;
            r->contig[d] = stretched ? 1 : a->contig[d];
            r->constancy[d] = stretched ? rt.shape[d] : a->constancy[d];
        }
        break;
    case IR_EXPAND_DIMS: {
        int axis = op->attr[0];
        int64_t all = BIG;
        for (int d = 0; d < at.rank; d++) all = min64(all, elem_div(a, d));
        if (at.rank == 0) all = a->div[0];
        for (int d = 0, s = 0; d < rt.rank; d++) {
            if (d == axis) { r->div[d] = all; r->contig[d] = r->constancy[d] = 1; continue; }
            r->div[d] = a->div[s];
            r->contig[d] = a->contig[s];
            r->constancy[d] = a->constancy[s];
            s++;
        }
        break;
    }
    case IR_TRANS:
        for (int d = 0; d < rt.rank; d++) {
            int s = op->attr[d];
            r->div[d] = a->div[s];
            r->contig[d] = a->contig[s];
            r->constancy[d] = a->constancy[s];
        }
        break;
    default: break;
    }
}

static void ax_op(IrOp *op, void *vctx)
{
    AxCtx *c = vctx;
    if (op->op == IR_FOR) {
        /* iv = lo + k * step: divisible by gcd(lo, step). */
        IrValue *iv = op->regions[0]->args[0];
        GpAxis *x = ax_new(c, iv);
        x->div[0] = min64(gp_axis_get(c->m, op->args[0])->div[0], gp_axis_get(c->m, op->args[2])->div[0]);
        return;
    }
    if (op->nres != 1) return;
    IrValue *res = op->res[0];
    IrType rt = res->type;
    IrElem e = (IrElem)rt.elem;
    if (!ir_elem_is_int(e) && e != IR_PTR) return;
    int rank = rt.rank ? rt.rank : 1;
    GpAxis *r = ax_new(c, res);
    int64_t k;
    switch (op->op) {
    case IR_CONST:
        for (int d = 0; d < rank; d++) {
            r->div[d] = hp2(op->ival);
            r->constancy[d] = rt.rank ? rt.shape[d] : 1;
        }
        break;
    case IR_ARANGE:
        r->contig[0] = rt.shape[0];
        r->div[0] = hp2(op->attr[0]);
        break;
    case IR_CONVERT_LAYOUT: /* GPU IR (a pass run alone on it): the same values */
        *r = *gp_axis_get(c->m, op->args[0]);
        break;
    case IR_SPLAT: case IR_BROADCAST: case IR_EXPAND_DIMS: case IR_TRANS:
        ax_shape_op(c, op, r, rt);
        break;
    case IR_ADD: case IR_SUB: {
        GpAxis a = view(c, op->args[0], rt), b = view(c, op->args[1], rt);
        ax_add(r, &a, &b, rank, 1, op->op == IR_SUB);
        break;
    }
    case IR_ADDPTR: {
        GpAxis a = view(c, op->args[0], rt), b = view(c, op->args[1], rt);
        ax_add(r, &a, &b, rank, gp_elem_bytes((IrElem)rt.pointee), false);
        break;
    }
    case IR_MUL: case IR_SHL: {
        GpAxis a = view(c, op->args[0], rt), b = view(c, op->args[1], rt);
        if (op->op == IR_SHL) {
            if (!const_value(op->args[1], &k) || k < 0 || k > 30) break;
            for (int d = 0; d < rank; d++) b.div[d] = (int64_t)1 << k, b.contig[d] = 1;
        }
        ax_mul(r, &a, &b, rank);
        break;
    }
    case IR_REM:
        if (const_value(op->args[1], &k) && k > 0 && sup_is_pow2(k)) {
            GpAxis a = view(c, op->args[0], rt);
            for (int d = 0; d < rank; d++) {
                r->contig[d] = min64(a.contig[d], min64(a.div[d], k));
                r->constancy[d] = a.constancy[d];
                r->div[d] = a.div[d] >= k ? BIG : a.div[d];
            }
        }
        break;
    case IR_CMP: {
        GpAxis a = view(c, op->args[0], rt), b = view(c, op->args[1], rt);
        ax_cmp(r, &a, &b, rank, (IrCmp)op->attr[0]);
        break;
    }
    case IR_AND: case IR_OR: case IR_XOR: case IR_NOT: case IR_SELECT: case IR_MIN: case IR_MAX: {
        for (int d = 0; d < rank; d++) r->constancy[d] = rt.rank ? rt.shape[d] : 1;
        for (int i = 0; i < op->nargs; i++) {
            GpAxis a = view(c, op->args[i], rt);
            for (int d = 0; d < rank; d++) r->constancy[d] = min64(r->constancy[d], a.constancy[d]);
        }
        /* min, max and select pick one of their value operands, element by
         * element: what divides every element of both divides the result
         * (a loop bound m_b = select(c, max(m_a, n / 64 * 64), m_a)) */
        if (op->op == IR_MIN || op->op == IR_MAX || op->op == IR_SELECT) {
            GpAxis a = view(c, op->args[op->nargs - 2], rt), b = view(c, op->args[op->nargs - 1], rt);
            for (int d = 0; d < rank; d++) r->div[d] = min64(elem_div(&a, d), elem_div(&b, d));
        }
        break;
    }
    case IR_CAST: {
        IrElem from = (IrElem)op->args[0]->type.elem;
        if (ir_elem_is_int(from) && from != IR_I1 && ir_elem_bits(e) >= ir_elem_bits(from))
            *r = view(c, op->args[0], rt);
        break;
    }
    default:
        break;
    }
    /* Facts never exceed the shape. */
    for (int d = 0; d < rt.rank; d++) {
        r->contig[d] = min64(r->contig[d], rt.shape[d]);
        r->constancy[d] = min64(r->constancy[d], rt.shape[d]);
    }
}

GpAxisMap *gp_axis_info(IrFunc *f)
{
    GpAxisMap *m = ARENA_NEW(f->arena, GpAxisMap);
    m->n = f->next_id;
    m->arena = f->arena;
    m->v = ARENA_ARRAY(f->arena, GpAxis *, m->n + 1);
    AxCtx c = {m, f->arena};
    for (int i = 0; i < f->nparams; i++) ax_param(&c, f->params[i]);
    ir_walk(f, ax_op, &c);
    return m;
}
