/* tma_plan.c — TMA (the Tensor Memory Accelerator, sm_90a) for pipelined loads:
 * which loads a 2- to 5-D tiled tensor map serves exactly (gp_tma_plan, asked by
 * pass_tma.c and read back by the lowering, codegen/cg_tma.c, which emits the
 * map parameters and the copies).
 *
 * The match. A load's pointer and mask are turned into polynomials over
 * "atoms" (uniform scalar values: the loop's induction variable, program ids,
 * parameters...) and one index variable per tile dim (arange along it):
 *     pointer = P + O,   P a kernel pointer parameter (splat, scalar addptr)
 *     mask    = AND of (I_d < B_d), I_d = u_d + idx_d, u_d uniform, B_d a
 *               kernel integer parameter or a constant; a dim without a
 *               compare has I_d = idx_d (u_d = 0) and B_d = the tile's extent;
 *               and at most one splat(g) of a scalar i1 (the guard: dot-rotate's
 *               iv + step < hi on the next block's load), the whole tile in or
 *               out: when g is false the lowering starts the boxes at the
 *               contiguous dim's extent, wholly outside the map, so TMA writes
 *               zeros (= other 0) and still counts every byte of the box
 *     O      == I_inner + s * I_outer + sum_j c_j * t_j,  s = a parameter or
 *               constant (times a constant), t_j integer stride parameters
 *               known to make multiples of 16 bytes (offset_dims: one more
 *               map dim each, box 1, extent 2^32; attention's batch and head)
 * checked as a polynomial identity (add, sub, mul, int casts, splat,
 * broadcast, expand_dims, addptr, arange, constants; anything else uniform is
 * an atom, anything else a tile: no match). Then the tensor map with base P,
 * dims {B_inner, B_outer}, row stride s * elem bytes, and the box at
 * coordinates {u_inner, u_outer} reads exactly the masked tile: element
 * (i, j) is in the map iff I_d < B_d for both dims (TMA zero-fills the rest,
 * = other 0), provided the coordinates are not negative (TMA treats negative
 * coordinates as outside too, where the program would read before P): every
 * atom of u_d must be provably non-negative (nonneg below). Index arithmetic
 * in i32 is taken not to wrap (TMA computes the exact address where an i32
 * product would have wrapped: an address no program means; cg_affine.c makes
 * the same assumption within a tile).
 * The slot: the pipelined load's swizzled stage slot (gp_swizzle_for) is
 * wgmma's 128-byte swizzle in column blocks of 64 halves, [cols / 64][rows][64],
 * 1024-byte aligned on wgmma kernels: exactly what TMA's SWIZZLE_128B writes
 * for boxes of {64, rows} at 1024-aligned addresses. So: f16/bf16, the
 * contiguous extent a multiple of 64, rows a multiple of 8 and at most 256.
 *
 * Invariants: a load gets tma.map only when gp_tma_plan matches (pass and
 * lowering call the same function); a loop's loads are all TMA or none, so
 * its full barriers count one arrival (the elected thread's expect_tx).
 *
 * Example (tools/bench/matmul_tc.tile, A 128x64 f16, K = 1024 const):
 *     pointer A + (128 pid_m + i) * 1024 + (k0 + j), mask (128 pid_m + i < M) & (k0 + j < 1024)
 *     map {dims {1024, M}, stride 2048 B, box {64, 128}}, coordinates {k0, 128 pid_m}
 */
#include "gpuir.h"

#include <stdlib.h>
#include <string.h>

/* ---- polynomials over uniform atoms and tile index variables ---- */

static int atom_cmp(const void *a, const void *b)
{
    int x = (*(const IrValue *const *)a)->id, y = (*(const IrValue *const *)b)->id;
    return (x > y) - (x < y);
}

static bool same_monomial(const GpTmaTerm *a, const GpTmaTerm *b)
{
    if (a->dim != b->dim || a->nat != b->nat) return false;
    for (int i = 0; i < a->nat; i++)
        if (a->at[i] != b->at[i]) return false;
    return true;
}

static bool poly_add_term(GpTmaPoly *p, GpTmaTerm t)
{
    if (!t.k) return true;
    qsort(t.at, (size_t)t.nat, sizeof t.at[0], atom_cmp);
    for (int i = 0; i < p->n; i++)
        if (same_monomial(&p->t[i], &t)) {
            p->t[i].k += t.k;
            if (!p->t[i].k) p->t[i] = p->t[--p->n];
            return true;
        }
    if (p->n == GP_TMA_TERMS) return false;
    p->t[p->n++] = t;
    return true;
}

static bool poly_add(GpTmaPoly *p, const GpTmaPoly *q, int64_t scale)
{
    for (int i = 0; i < q->n; i++) {
        GpTmaTerm t = q->t[i];
        t.k *= scale;
        if (!poly_add_term(p, t)) return false;
    }
    return true;
}

static bool poly_mul(const GpTmaPoly *a, const GpTmaPoly *b, GpTmaPoly *out)
{
    memset(out, 0, sizeof *out);
    for (int i = 0; i < a->n; i++)
        for (int j = 0; j < b->n; j++) {
            const GpTmaTerm *x = &a->t[i], *y = &b->t[j];
            if ((x->dim >= 0 && y->dim >= 0) || x->nat + y->nat > GP_TMA_ATOMS) return false;
            GpTmaTerm t = *x;
            t.k = x->k * y->k;
            t.dim = x->dim >= 0 ? x->dim : y->dim;
            for (int k = 0; k < y->nat; k++) t.at[t.nat++] = y->at[k];
            if (!poly_add_term(out, t)) return false;
        }
    return true;
}

static bool poly_uniform(const GpTmaPoly *p)
{
    for (int i = 0; i < p->n; i++)
        if (p->t[i].dim >= 0) return false;
    return true;
}

/* Index variable `from` of an operand becomes `to` of the result (-1: gone, the dim had size 1). */
static void poly_remap(GpTmaPoly *p, const int *map)
{
    for (int i = 0; i < p->n; i++)
        if (p->t[i].dim >= 0 && map[p->t[i].dim] < 0) p->t[i--] = p->t[--p->n];
        else if (p->t[i].dim >= 0) p->t[i].dim = map[p->t[i].dim];
}

static bool is_int(IrElem e) { return e == IR_I32 || e == IR_I64 || e == IR_U32 || e == IR_U64; }

/* The polynomial of an integer value (or a pointer's offset from its base
 * parameter, *base); false when it is none of the forms above. */
static bool poly_of(const IrFunc *f, const IrValue *v, GpTmaPoly *p, const IrValue **base, int depth)
{
    memset(p, 0, sizeof *p);
    const IrOp *d = v->def;
    bool ptr = v->type.elem == IR_PTR;
    if (depth > 64) return false;
    if (ptr && !d && !v->block) {   /* a kernel parameter */
        *base = v;
        return true;
    }
    if (!ptr && !is_int((IrElem)v->type.elem) && v->type.elem != IR_I1) return false;
    if (!d) {
        if (v->type.rank) return false;
        GpTmaTerm t = {.k = 1, .nat = 1, .dim = -1, .at = {v}};
        return poly_add_term(p, t);
    }
    GpTmaPoly a, b;
    switch (d->op) {
    case IR_CONST: {
        GpTmaTerm t = {.k = d->ival, .dim = -1};
        return !ptr && poly_add_term(p, t);
    }
    case IR_ARANGE: {
        GpTmaTerm s = {.k = d->attr[0], .dim = -1}, t = {.k = 1, .dim = 0};
        return poly_add_term(p, s) && poly_add_term(p, t);
    }
    case IR_SPLAT:
    case IR_CONVERT_LAYOUT:
        return poly_of(f, d->args[0], p, base, depth + 1);
    case IR_CAST: {
        IrElem from = (IrElem)d->args[0]->type.elem, to = (IrElem)v->type.elem;
        int fb = from == IR_I64 || from == IR_U64 ? 64 : 32, tb = to == IR_I64 || to == IR_U64 ? 64 : 32;
        if (!is_int(from) || !is_int(to) || tb < fb) return false;   /* widening only: same value */
        return poly_of(f, d->args[0], p, base, depth + 1);
    }
    case IR_BROADCAST:
    case IR_EXPAND_DIMS: {
        if (!poly_of(f, d->args[0], p, base, depth + 1)) return false;
        const IrType *in = &d->args[0]->type;
        int map[IR_MAX_RANK];
        for (int i = 0; i < in->rank; i++) {
            int to = d->op == IR_EXPAND_DIMS && i >= d->attr[0] ? i + 1 : i;
            map[i] = in->shape[i] == 1 ? -1 : to;   /* a size-1 dim's index is always 0 */
        }
        poly_remap(p, map);
        return true;
    }
    case IR_ADD:
    case IR_SUB:
    case IR_ADDPTR:
        if (!poly_of(f, d->args[0], &a, base, depth + 1) || !poly_of(f, d->args[1], &b, base, depth + 1))
            return false;
        *p = a;
        return poly_add(p, &b, d->op == IR_SUB ? -1 : 1);
    case IR_MUL:
        return !ptr && poly_of(f, d->args[0], &a, base, depth + 1) && poly_of(f, d->args[1], &b, base, depth + 1) &&
               poly_mul(&a, &b, p);
    default:
        if (v->type.rank || ptr) return false;
        GpTmaTerm t = {.k = 1, .nat = 1, .dim = -1, .at = {v}};
        return poly_add_term(p, t);
    }
}

/* min(x, C) with a constant C > 0: the size of a group of tiles (GROUP_M's
 * `minimum(num_m - first_m, GROUP_M)`), negative only for a program past the
 * last tile (first_m >= num_m), whose rows are all masked off. The one
 * assumption of the non-negativity proof (docs/tensor_cores.md 5c). */
static bool tile_count(const IrValue *v)
{
    const IrOp *d = v->def;
    if (!d || d->op != IR_MIN) return false;
    for (int i = 0; i < 2; i++)
        if (d->args[i]->def && d->args[i]->def->op == IR_CONST && d->args[i]->def->ival > 0) return true;
    return false;
}

/* Whether scalar `v` is provably >= 0: program ids, constants, sums and
 * products of such, quotients, remainders of such dividends, min/max, selects
 * between such, (y + C) - c with C >= c, and a loop's induction variable from such a start by such a step. With `need`
 * (not NULL), an integer kernel parameter counts too and is added to *need:
 * the runtime refuses a launch where one of those is negative (tmap.c), so
 * the copies are exact for every launch that runs (N in examples/matmul.tile's
 * GROUP_M arithmetic). */
static bool nonneg(const IrFunc *f, const IrValue *v, uint64_t *need, int depth)
{
    const IrOp *d = v->def;
    if (depth > 32) return false;
    if (v->type.elem == IR_U32 || v->type.elem == IR_U64) return true;
    if (!d) {
        const IrOp *loop = v->block ? v->block->parent_op : NULL;
        if (!v->block && need && is_int((IrElem)v->type.elem) && v->index < 64 && v->index < f->nparams &&
            f->params[v->index] == v) {
            *need |= 1ull << v->index;
            return true;
        }
        return loop && loop->op == IR_FOR && v->index == 0 && v->block == loop->regions[0] &&
               nonneg(f, loop->args[0], need, depth + 1) && nonneg(f, loop->args[2], need, depth + 1);
    }
    switch (d->op) {
    case IR_CONST: return d->ival >= 0;
    case IR_PROGRAM_ID:
    case IR_NUM_PROGRAMS: return true;
    case IR_CAST: return is_int((IrElem)d->args[0]->type.elem) && nonneg(f, d->args[0], need, depth + 1);
    case IR_DIV:
        return nonneg(f, d->args[0], need, depth + 1) &&
               (tile_count(d->args[1]) || nonneg(f, d->args[1], need, depth + 1));
    case IR_ADD:
    case IR_MUL:
    case IR_MIN: return nonneg(f, d->args[0], need, depth + 1) && nonneg(f, d->args[1], need, depth + 1);
    case IR_MAX:
        return nonneg(f, d->args[0], NULL, depth + 1) || nonneg(f, d->args[1], NULL, depth + 1) ||
               nonneg(f, d->args[0], need, depth + 1);
    case IR_REM: return nonneg(f, d->args[0], need, depth + 1);
    case IR_SELECT: return nonneg(f, d->args[1], need, depth + 1) && nonneg(f, d->args[2], need, depth + 1);
    case IR_SUB: {   /* (y + c2) - c with c2 >= c >= 0: cdiv's (n + B - 1) */
        const IrOp *a = d->args[0]->def, *c = d->args[1]->def;
        if (!a || a->op != IR_ADD || !c || c->op != IR_CONST || c->ival < 0) return false;
        for (int i = 0; i < 2; i++) {
            const IrOp *k = a->args[i]->def;
            if (k && k->op == IR_CONST && k->ival >= c->ival) return nonneg(f, a->args[1 - i], need, depth + 1);
        }
        return false;
    }
    default: return false;
    }
}

static bool poly_nonneg(const IrFunc *f, const GpTmaPoly *p, uint64_t *need)
{
    for (int i = 0; i < p->n; i++) {
        if (p->t[i].k < 0) return false;
        for (int k = 0; k < p->t[i].nat; k++)
            if (!nonneg(f, p->t[i].at[k], need, 0)) return false;
    }
    return true;
}

/* A polynomial that is a constant or one kernel integer parameter times a constant. */
static bool param_value(const IrFunc *f, const GpTmaPoly *p, GpTmaVal *out)
{
    out->param = -1;
    out->k = 0;
    if (p->n == 0) return true;
    if (p->n != 1 || p->t[0].dim >= 0 || p->t[0].nat > 1) return false;
    out->k = p->t[0].k;
    if (!p->t[0].nat) return true;
    const IrValue *a = p->t[0].at[0];
    for (int i = 0; i < f->nparams; i++)
        if (f->params[i] == a) out->param = i;
    return out->param >= 0;
}

typedef struct MaskFacts {
    const IrValue *guard;       /* splat(g): a uniform i1 over the whole tile, or NULL */
    bool has[IR_MAX_RANK];
    GpTmaPoly u[IR_MAX_RANK];   /* I_d - idx_d */
    GpTmaPoly bound[IR_MAX_RANK];
} MaskFacts;

/* The compares of an AND tree of `idx_d + u < bound` (through broadcast and
 * expand_dims), with dims of `v`. */
static bool mask_facts(const IrFunc *f, const IrValue *v, MaskFacts *m, int depth)
{
    const IrOp *d = v->def;
    memset(m, 0, sizeof *m);
    if (!d || !v->type.rank || depth > 32) return false;
    if (d->op == IR_AND) {
        MaskFacts a, b;
        if (!mask_facts(f, d->args[0], &a, depth + 1) || !mask_facts(f, d->args[1], &b, depth + 1)) return false;
        if (a.guard && b.guard) return false;   /* one guard per load (dot-rotate adds one) */
        *m = a;
        if (b.guard) m->guard = b.guard;
        for (int i = 0; i < IR_MAX_RANK; i++) {
            if (!b.has[i]) continue;
            if (m->has[i]) return false;   /* two bounds on one dim: not one map's extent */
            m->has[i] = true;
            m->u[i] = b.u[i];
            m->bound[i] = b.bound[i];
        }
        return true;
    }
    if (d->op == IR_BROADCAST || d->op == IR_EXPAND_DIMS || d->op == IR_CONVERT_LAYOUT) {
        MaskFacts a;
        if (!mask_facts(f, d->args[0], &a, depth + 1)) return false;
        m->guard = a.guard;
        const IrType *in = &d->args[0]->type;
        for (int i = 0; i < in->rank; i++) {
            if (!a.has[i]) continue;
            int to = d->op == IR_EXPAND_DIMS && i >= d->attr[0] ? i + 1 : i;
            m->has[to] = true;
            m->u[to] = a.u[i];
            m->bound[to] = a.bound[i];
        }
        return true;
    }
    if (d->op == IR_SPLAT && !d->args[0]->type.rank && d->args[0]->type.elem == IR_I1) {
        m->guard = d->args[0];   /* scalars are uniform: the whole tile in or out */
        return true;
    }
    if (d->op != IR_CMP || (d->attr[0] != IR_CMP_LT && d->attr[0] != IR_CMP_GT)) return false;
    const IrValue *lhs = d->args[d->attr[0] == IR_CMP_LT ? 0 : 1], *rhs = d->args[d->attr[0] == IR_CMP_LT ? 1 : 0];
    IrElem e = (IrElem)lhs->type.elem;
    if (e != IR_I32 && e != IR_I64) return false;   /* signed compares: a negative index is excluded by nonneg */
    const IrValue *base = NULL;
    GpTmaPoly l, r;
    if (!poly_of(f, lhs, &l, &base, 0) || !poly_of(f, rhs, &r, &base, 0) || base || !poly_uniform(&r)) return false;
    int dim = -1;
    for (int i = 0; i < l.n; i++) {
        if (l.t[i].dim < 0) continue;
        if (dim >= 0 || l.t[i].k != 1 || l.t[i].nat) return false;
        dim = l.t[i].dim;
    }
    if (dim < 0) return false;
    GpTmaTerm idx = {.k = -1, .dim = dim};
    if (!poly_add_term(&l, idx)) return false;
    m->has[dim] = true;
    m->u[dim] = l;
    m->bound[dim] = r;
    return true;
}

/* An extent no coordinate reaches: for a dim the program does not mask. 2^31, not the
 * documented limit of 2^32: coordinates are i32, so no non-negative one reaches 2^31,
 * and on the H200 (driver 580) every copy through a map with an extent of 2^32 - 1 or
 * 2^32 stopped with CUDA_ERROR_ILLEGAL_INSTRUCTION at its UTMALDG, though
 * cuTensorMapEncodeTiled accepted it (compute-sanitizer, 2026-11-28: the fault of the 4-D
 * K/V maps of 2026-11-24; extents 2^31 and 65536 passed every case). */
#define TMA_HUGE (1LL << 31)

/* The kernel parameter among a term's atoms that can be a dim's stride (an integer
 * known to make multiples of 16 bytes), other than `not`; -1 if none. */
static int stride_atom(const IrFunc *f, const GpTmaTerm *t, int eb, int not)
{
    for (int k = 0; k < t->nat; k++)
        for (int i = 0; i < f->nparams; i++)
            if (f->params[i] == t->at[k] && i != not && is_int((IrElem)t->at[k]->type.elem) &&
                (int64_t)t->at[k]->divisibility * eb % 16 == 0)
                return i;
    return -1;
}

/* `t` without atom `a` (one occurrence), as a uniform term. */
static GpTmaTerm drop_atom(const GpTmaTerm *t, const IrValue *a)
{
    GpTmaTerm u = {.k = t->k, .dim = -1};
    bool dropped = false;
    for (int k = 0; k < t->nat; k++)
        if (!dropped && t->at[k] == a) dropped = true;
        else u.at[u.nat++] = t->at[k];
    return u;
}

/* The pointer's uniform offset left after the tile's own indices (`rest`):
 * each term is a coordinate times a stride parameter. Terms with the row
 * stride's parameter are the row coordinate when the rows have no compare
 * (`free_rows`: attention's unmasked key blocks, K + ... + start_n * stride_kn);
 * the others group by their stride parameter into dims of their own (box 1,
 * no compare: an extent no coordinate reaches): K + b * stride_kb + h * stride_kh
 * becomes dims 2 and 3 at coordinates h and b. Every coordinate >= 0. */
static bool offset_dims(const IrFunc *f, const GpTmaPoly *rest, const GpTmaVal *stride, bool free_rows, int eb,
                        GpTmaPlan *out)
{
    int sp[GP_TMA_MAX_RANK];
    for (int i = 0; i < rest->n; i++) {
        const GpTmaTerm *t = &rest->t[i];
        if (t->dim >= 0) return false;
        int p = -1;
        for (int k = 0; free_rows && stride->param >= 0 && k < t->nat && p < 0; k++)
            if (t->at[k] == f->params[stride->param] && t->k % stride->k == 0) p = stride->param;
        if (p >= 0) {
            GpTmaTerm u = drop_atom(t, f->params[p]);
            u.k /= stride->k;
            if (!poly_add_term(&out->coord[1], u)) return false;
            continue;
        }
        if ((p = stride_atom(f, t, eb, stride->param)) < 0) return false;
        int d = 2;
        while (d < out->rank && sp[d] != p) d++;
        if (d == out->rank) {
            if (d == GP_TMA_MAX_RANK) return false;
            sp[d] = p;
            out->rank++;
            memset(&out->coord[d], 0, sizeof out->coord[d]);
            out->dims[d] = (GpTmaVal){-1, TMA_HUGE};
            out->strides[d - 1] = (GpTmaVal){p, eb};
            out->box[d] = 1;
        }
        if (!poly_add_term(&out->coord[d], drop_atom(t, f->params[p]))) return false;
    }
    if (free_rows && out->coord[1].n) out->dims[1] = (GpTmaVal){-1, TMA_HUGE};
    for (int d = 1; d < out->rank; d++)
        if (!poly_nonneg(f, &out->coord[d], &out->nonneg_params)) return false;
    return true;
}

bool gp_tma_plan(const IrFunc *f, const IrOp *ld, int fast_dim, GpTmaPlan *out)
{
    memset(out, 0, sizeof *out);
    const IrType *t = &ld->res[0]->type;
    if (ld->op != IR_LOAD || t->rank != 2 || (t->elem != IR_F16 && t->elem != IR_BF16) || fast_dim < 0 ||
        fast_dim > 1)
        return false;
    int inner = fast_dim, outer = 1 - fast_dim;
    int cols = t->shape[inner], rows = t->shape[outer];
    if (cols % 64 || rows % 8 || rows > 256 || rows < 8) return false;
    GpTmaPoly o;
    const IrValue *base = NULL;
    if (!poly_of(f, ld->args[0], &o, &base, 0) || !base) return false;
    MaskFacts m = {0};
    if (ld->nargs > 1 && !mask_facts(f, ld->args[1], &m, 0)) return false;
    /* I_d for each dim, and its extent */
    GpTmaPoly I[2];
    int dims[2] = {inner, outer};
    for (int k = 0; k < 2; k++) {
        int dd = dims[k];
        memset(&I[k], 0, sizeof I[k]);
        if (m.has[dd]) {
            if (!param_value(f, &m.bound[dd], &out->dims[k]) || !poly_nonneg(f, &m.u[dd], &out->nonneg_params)) return false;
            out->coord[k] = m.u[dd];
        } else {
            out->dims[k] = (GpTmaVal){-1, t->shape[dd]};
        }
        I[k] = out->coord[k];
        GpTmaTerm idx = {.k = 1, .dim = dd};
        if (!poly_add_term(&I[k], idx)) return false;
    }
    /* s: the coefficient of the outer index in O, uniform */
    GpTmaPoly s = {0};
    for (int i = 0; i < o.n; i++)
        if (o.t[i].dim == outer) {
            GpTmaTerm u = o.t[i];
            u.dim = -1;
            if (!poly_add_term(&s, u)) return false;
        }
    GpTmaVal stride;
    if (!param_value(f, &s, &stride) || (stride.param < 0 && stride.k <= 0)) return false;
    GpTmaPoly sI, rest = o;
    if (!poly_mul(&s, &I[1], &sI) || !poly_add(&rest, &sI, -1) || !poly_add(&rest, &I[0], -1)) return false;
    int eb = 2;
    out->rank = 2;
    if (!offset_dims(f, &rest, &stride, !m.has[outer], eb, out)) return false;
    out->base_param = base->index;
    out->elem = (IrElem)t->elem;
    out->elem_bytes = eb;
    out->strides[0] = (GpTmaVal){stride.param, stride.k * eb};
    out->box[0] = 64;
    out->box[1] = rows;
    out->nboxes = cols / 64;
    out->box_bytes = 64 * rows * eb;
    out->guard = m.guard;
    return base->index >= 0 && base->index < f->nparams && f->params[base->index] == base;
}

int gp_tma_nmaps(const IrFunc *f) { return (int)ir_attr_int(&f->attrs, IR_ATTR_TMA_MAPS, 0); }
