/* interp_tile.c — shape ops, dot and reduce for the CPU interpreter.
 *
 * What: splat, broadcast, expand_dims, reshape, trans (data movement only,
 * values are copied bit for bit), dot and reduce.
 * Invariants (the numeric contract of the IR):
 *   - dot(a[M,K], b[K,N], acc[M,N]): every output starts from acc and adds the
 *     products for k = 0 .. K-1 in that order; f16/bf16/f32 operands are
 *     multiplied and accumulated in float (a product of two f16 or bf16 values
 *     is exact in float), f64 in double, integers in the result's width with
 *     wrapping; the sum is rounded once to the result type at the end. Leading
 *     batch axes ([B, M, K]) are allowed when a, b and acc share them.
 *   - reduce walks its axis from index 0 upwards: sum accumulates in float for
 *     f16/bf16/f32 (double for f64, wrapping for ints) and rounds once at the
 *     end; max/min ignore NaNs like fmaxf unless every element is NaN;
 *     argmax/argmin give the first index of the extreme value.
 * Example: reduce sum axis 1 of tensor<4x8xf32> gives tensor<4xf32>, each row
 * summed left to right; reduce of a 1-D tile gives a scalar.
 */
#include "interp_impl.h"

#include <math.h>
#include <string.h>

static int oom(Interp *it, const IrOp *op)
{
    return it_error(it, op, "out of host memory for the interpreter's values");
}

/* Row-major strides of type t, in elements. */
static void strides_of(IrType t, int64_t *st)
{
    int64_t s = 1;
    for (int d = t.rank - 1; d >= 0; d--) {
        st[d] = s;
        s *= t.shape[d];
    }
}

/* Advances a multi-index over `shape` (rank r) by one, row-major. */
static void next_index(int64_t *idx, const int32_t *shape, int r)
{
    for (int d = r - 1; d >= 0; d--) {
        if (++idx[d] < shape[d]) return;
        idx[d] = 0;
    }
}

/* r (of type rt, row-major) [i] = a[sum over axes of index * st]: a
 * broadcast or a transpose, depending on the strides st into a. */
static void gather(IVal *r, const IVal *a, IrType rt, const int64_t *st)
{
    int64_t n = ir_type_numel(rt), idx[IR_MAX_RANK] = {0};
    for (int64_t i = 0; i < n; i++) {
        int64_t src = 0;
        for (int d = 0; d < rt.rank; d++) src += idx[d] * st[d];
        r[i] = a[src];
        next_index(idx, rt.shape, rt.rank);
    }
}

static int exec_broadcast(Interp *it, const IrOp *op, const IVal *a, IVal *r)
{
    IrType at = op->args[0]->type, rt = op->res[0]->type;
    if (at.rank > rt.rank) return it_internal(it, op, "broadcast lowers the rank");
    /* Align the axes on the right (numpy); size-1 input axes get stride 0. */
    int64_t ast[IR_MAX_RANK], st[IR_MAX_RANK] = {0};
    strides_of(at, ast);
    int off = rt.rank - at.rank;
    for (int d = 0; d < at.rank; d++) {
        int32_t in = at.shape[d], out = rt.shape[off + d];
        if (in != out && in != 1) return it_internal(it, op, "cannot broadcast axis %d: %d to %d", d, in, out);
        st[off + d] = in == 1 ? 0 : ast[d];
    }
    gather(r, a, rt, st);
    return 0;
}

static int exec_trans(Interp *it, const IrOp *op, const IVal *a, IVal *r)
{
    IrType at = op->args[0]->type, rt = op->res[0]->type;
    if (at.rank != rt.rank) return it_internal(it, op, "trans changes the rank");
    int64_t ast[IR_MAX_RANK], st[IR_MAX_RANK];
    strides_of(at, ast);
    unsigned seen = 0;
    for (int d = 0; d < rt.rank; d++) {
        int p = op->attr[d];
        if (p < 0 || p >= at.rank || (seen & (1u << p)) || at.shape[p] != rt.shape[d])
            return it_internal(it, op, "bad permutation for trans");
        seen |= 1u << p;
        st[d] = ast[p]; /* result axis d walks input axis perm[d] */
    }
    gather(r, a, rt, st);
    return 0;
}

int it_exec_shape(Interp *it, const IrOp *op)
{
    if (op->nargs != 1 || op->nres != 1) return it_internal(it, op, "wrong operand count");
    IVal *a = it_in(it, op, 0);
    if (!a) return 1;
    IVal *r = it_out(it, op, 0);
    if (!r) return oom(it, op);
    int64_t n = ir_type_numel(op->res[0]->type), m = ir_type_numel(op->args[0]->type);
    switch (op->op) {
    case IR_SPLAT:
        if (m != 1) return it_internal(it, op, "splat of a tile");
        for (int64_t i = 0; i < n; i++) r[i] = a[0];
        return 0;
    case IR_EXPAND_DIMS:
    case IR_RESHAPE:
        if (m != n) return it_internal(it, op, "element count changes (%lld -> %lld)", (long long)m, (long long)n);
        memcpy(r, a, sizeof(IVal) * (size_t)n);
        return 0;
    case IR_BROADCAST: return exec_broadcast(it, op, a, r);
    case IR_TRANS: return exec_trans(it, op, a, r);
    default: return it_internal(it, op, "not a shape op");
    }
}

/* ---- dot ---- */
typedef struct DotDims {
    int64_t batch, m, n, k;
} DotDims;

static int dot_dims(Interp *it, const IrOp *op, DotDims *dd)
{
    IrType a = op->args[0]->type, b = op->args[1]->type, c = op->args[2]->type, r = op->res[0]->type;
    int rk = a.rank;
    bool ok = rk >= 2 && b.rank == rk && c.rank == rk && r.rank == rk;
    dd->batch = 1;
    for (int d = 0; ok && d < rk - 2; d++) {
        ok = b.shape[d] == a.shape[d] && c.shape[d] == a.shape[d] && r.shape[d] == a.shape[d];
        dd->batch *= a.shape[d];
    }
    if (ok) {
        dd->m = a.shape[rk - 2];
        dd->k = a.shape[rk - 1];
        dd->n = b.shape[rk - 1];
        ok = b.shape[rk - 2] == dd->k && c.shape[rk - 2] == dd->m && c.shape[rk - 1] == dd->n &&
             r.shape[rk - 2] == dd->m && r.shape[rk - 1] == dd->n;
    }
    if (!ok) {
        char b1[64], b2[64], b3[64];
        return it_internal(it, op, "dot shapes do not agree: %s, %s, %s", ir_type_str(a, b1, sizeof b1),
                           ir_type_str(b, b2, sizeof b2), ir_type_str(c, b3, sizeof b3));
    }
    return 0;
}

/* One [M,K]x[K,N] product into r (which already holds acc), float path.
 * The loop order m, k, n keeps each output's additions in k order. */
static void dot_float(const IVal *a, const IVal *b, IVal *r, const DotDims *d, float *row)
{
    for (int64_t m = 0; m < d->m; m++) {
        for (int64_t n = 0; n < d->n; n++) row[n] = (float)r[m * d->n + n].f;
        for (int64_t k = 0; k < d->k; k++) {
            float x = (float)a[m * d->k + k].f;
            const IVal *brow = b + k * d->n;
            for (int64_t n = 0; n < d->n; n++) {
                float p = x * (float)brow[n].f; /* a separate statement: never contracted to an fma */
                row[n] += p;
            }
        }
        for (int64_t n = 0; n < d->n; n++) r[m * d->n + n].f = row[n];
    }
}

static void dot_double(const IVal *a, const IVal *b, IVal *r, const DotDims *d)
{
    for (int64_t m = 0; m < d->m; m++)
        for (int64_t k = 0; k < d->k; k++) {
            double x = a[m * d->k + k].f;
            for (int64_t n = 0; n < d->n; n++) {
                double p = x * b[k * d->n + n].f;
                r[m * d->n + n].f += p;
            }
        }
}

static void dot_int(const IVal *a, const IVal *b, IVal *r, const DotDims *d, IrElem re)
{
    for (int64_t m = 0; m < d->m; m++)
        for (int64_t k = 0; k < d->k; k++) {
            uint64_t x = a[m * d->k + k].u;
            for (int64_t n = 0; n < d->n; n++) {
                IVal *o = &r[m * d->n + n];
                o->i = ir_eval_wrap(re, o->u + x * b[k * d->n + n].u);
            }
        }
}

int it_exec_dot(Interp *it, const IrOp *op)
{
    if (op->nargs != 3 || op->nres != 1) return it_internal(it, op, "dot takes a, b and acc");
    DotDims d = {0}; /* zeroed: GCC cannot see dot_dims sets it on success */
    if (dot_dims(it, op, &d)) return 1;
    IVal *a = it_in(it, op, 0), *b = it_in(it, op, 1), *c = it_in(it, op, 2);
    if (!a || !b || !c) return 1;
    IVal *r = it_out(it, op, 0);
    if (!r) return oom(it, op);
    int64_t total = d.batch * d.m * d.n;
    memcpy(r, c, sizeof(IVal) * (size_t)total);
    IrElem ae = (IrElem)op->args[0]->type.elem, re = (IrElem)op->res[0]->type.elem;
    bool fl = ir_elem_is_float(ae);
    if (fl != ir_elem_is_float(re)) return it_internal(it, op, "dot mixes float and integer types");
    float *row = NULL;
    if (fl && ae != IR_F64) {
        int64_t need = d.n > 0 ? d.n : 1;
        if (it->scratch_cap < need) {
            it->scratch = ARENA_ARRAY(&it->arena, float, need);
            it->scratch_cap = it->scratch ? need : 0;
        }
        if (!(row = it->scratch)) return oom(it, op);
    }
    for (int64_t bi = 0; bi < d.batch; bi++) {
        const IVal *ab = a + bi * d.m * d.k, *bb = b + bi * d.k * d.n;
        IVal *rb = r + bi * d.m * d.n;
        if (!fl) dot_int(ab, bb, rb, &d, re);
        else if (ae == IR_F64) dot_double(ab, bb, rb, &d);
        else dot_float(ab, bb, rb, &d, row);
    }
    if (fl && re != IR_F32)
        for (int64_t i = 0; i < total; i++) r[i].f = ir_eval_round(re, r[i].f);
    return 0;
}

/* ---- reduce ---- */
typedef struct RedGeom {
    int64_t outer, len, inner;
} RedGeom;

/* Reduces len elements x[0], x[inner], x[2*inner], ... */
static IVal reduce_line(IrReduce kind, IrElem e, IrElem re, const IVal *x, int64_t len, int64_t inner)
{
    IVal out = {0};
    bool fl = ir_elem_is_float(e), sg = ir_elem_is_signed(e);
    if (kind == IR_RED_SUM) {
        if (e == IR_F64) {
            double s = 0;
            for (int64_t j = 0; j < len; j++) s += x[j * inner].f;
            out.f = s;
        } else if (fl) {
            float s = 0;
            for (int64_t j = 0; j < len; j++) s += (float)x[j * inner].f;
            out.f = ir_eval_round(re, s);
        } else {
            uint64_t s = 0;
            for (int64_t j = 0; j < len; j++) s += x[j * inner].u;
            out.i = ir_eval_wrap(re, s);
        }
        return out;
    }
    bool want_max = kind == IR_RED_MAX || kind == IR_RED_ARGMAX;
    int64_t best = 0;
    for (int64_t j = 1; j < len; j++) {
        IVal v = x[j * inner], b = x[best * inner];
        bool better;
        if (fl) better = isnan(b.f) ? !isnan(v.f) : (want_max ? v.f > b.f : v.f < b.f);
        else if (sg) better = want_max ? v.i > b.i : v.i < b.i;
        else better = want_max ? v.u > b.u : v.u < b.u;
        if (better) best = j;
    }
    if (kind == IR_RED_ARGMAX || kind == IR_RED_ARGMIN) out.i = ir_eval_wrap(re, (uint64_t)best);
    else out = x[best * inner];
    return out;
}

int it_exec_reduce(Interp *it, const IrOp *op)
{
    if (op->nargs != 1 || op->nres != 1) return it_internal(it, op, "reduce takes one operand");
    IrType t = op->args[0]->type, rt = op->res[0]->type;
    int axis = op->attr[0];
    IrReduce kind = (IrReduce)op->attr[1];
    if (axis < 0 || axis >= t.rank || (unsigned)kind > IR_RED_ARGMIN || ir_type_numel(rt) * t.shape[axis] != ir_type_numel(t))
        return it_internal(it, op, "bad reduce (axis %d, kind %d)", axis, op->attr[1]);
    if (t.shape[axis] < 1) return it_internal(it, op, "reduce over an empty axis");
    RedGeom g = {1, t.shape[axis], 1};
    for (int d = 0; d < axis; d++) g.outer *= t.shape[d];
    for (int d = axis + 1; d < t.rank; d++) g.inner *= t.shape[d];
    IVal *a = it_in(it, op, 0);
    if (!a) return 1;
    IVal *r = it_out(it, op, 0);
    if (!r) return oom(it, op);
    IrElem e = (IrElem)t.elem, re = (IrElem)rt.elem;
    for (int64_t o = 0; o < g.outer; o++)
        for (int64_t i = 0; i < g.inner; i++)
            r[o * g.inner + i] = reduce_line(kind, e, re, a + o * g.len * g.inner + i, g.len, g.inner);
    return 0;
}
