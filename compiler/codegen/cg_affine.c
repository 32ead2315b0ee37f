/* cg_affine.c — affine pointer tiles: the copies of one thread, one base pointer.
 *
 * What it does. A pointer tile P is *affine* when, for index vectors i and j,
 * P[j] - P[i] = sum_d (j_d - i_d) * coef_d (in elements), with coef_d the same
 * for the whole tile (a runtime value). The analysis walks P's definition:
 *
 *   arange                 coef 1 (a static i32 in [start, end))
 *   const, splat           coef 0
 *   expand_dims, broadcast the operand's coefs; a new or stretched dim gets 0
 *   add, sub, neg          coefs add, subtract, negate
 *   mul                    one operand uniform (all coefs 0): coefs times its value
 *   cast (int -> int)      exact for a static operand (below); coefs unchanged for 64-bit
 *   addptr                 pointer coefs + offset coefs
 *   convert_layout         unchanged
 *
 * Invariants. 64-bit integer and pointer arithmetic is modulo 2^64 on both sides
 * of the identity, so runtime coefficients are exact there even when values wrap.
 * A narrower integer (i32, u32) needs compile-time coefficients and a
 * compile-time range of its non-uniform part that fits the type, plus at most a
 * uniform runtime addend (offs_m = program_id(0) * BLOCK_M + arange(BLOCK_M)):
 * the one assumption is that such an index does not wrap *within one tile*,
 * which would put one tile's elements 2^32 elements apart: an address no
 * program means. Products with a runtime value stay out of 32 bits (an i32
 * row * stride really can wrap). Anything else (loads, loop-carried pointers,
 * non-uniform products, transposes) is "not affine": the copies then keep a
 * pointer each.
 *
 * Why. A thread copies a K or V tile as 8 chunks of 16 bytes; with one 64-bit
 * pointer per chunk, LLVM's LICM hoists all 8 (16 registers a tile) out of the
 * key loop: 32 registers at head dim 128, enough to make the FlashAttention-2
 * tile (128 x 64 on 4 warps) spill. For an affine tile the copies walk from
 * the first chunk's pointer by loop-invariant steps (usually one:
 * rows_per_pass * row_stride * element bytes), so a tile costs two pointers.
 *
 * Example: kt_ptrs = k_base + offs_n.to(i64)[None, :] * stride_kn + offs_d[:, None]
 * (a [D, N] tile) has coefs (1, stride_kn): a thread whose chunks are 8 keys
 * apart steps by 8 * stride_kn * 2 bytes.
 */
#include "cg_internal.h"

#include <string.h>

typedef struct Aff {
    LLVMValueRef coef[GP_MAX_RANK];   /* i64 elements per index step; NULL = 0 */
    bool is_static;                   /* compile-time coefs, range below (+ a uniform addend) */
    bool addend;                      /* is_static with a uniform runtime addend */
    int64_t kcoef[GP_MAX_RANK];
    int64_t lo, hi;                   /* the range without the addend (static only) */
} Aff;

static bool narrow_range(IrElem e, int64_t lo, int64_t hi)
{
    switch (e) {
    case IR_I32: return lo >= INT32_MIN && hi <= INT32_MAX;
    case IR_U32: return lo >= 0 && hi <= (int64_t)UINT32_MAX;
    default: return false;
    }
}

static bool is_wide(IrElem e) { return e == IR_I64 || e == IR_U64 || e == IR_PTR; }

/* A static value with constant coefs k, range [lo, hi], at rank `rank`. */
static void make_static(CgCtx *c, Aff *a, int rank, const int64_t *k, int64_t lo, int64_t hi)
{
    memset(a, 0, sizeof *a);
    a->is_static = true;
    a->lo = lo;
    a->hi = hi;
    for (int d = 0; d < rank; d++) {
        a->kcoef[d] = k ? k[d] : 0;
        a->coef[d] = a->kcoef[d] ? LLVMConstInt(c->t_i64, (unsigned long long)a->kcoef[d], 1) : NULL;
    }
}

static LLVMValueRef coef_add(CgCtx *c, LLVMValueRef a, LLVMValueRef b, bool sub)
{
    if (!b) return a;
    if (!a) return sub ? LLVMBuildNeg(c->b, b, "") : b;
    return sub ? LLVMBuildSub(c->b, a, b, "") : LLVMBuildAdd(c->b, a, b, "");
}

static bool uniform(const Aff *a, int rank)
{
    for (int d = 0; d < rank; d++)
        if (a->coef[d]) return false;
    return true;
}

static bool affine(CgCtx *c, const IrValue *v, Aff *a, int depth);

/* add / sub of two affine operands. */
static bool aff_sum(CgCtx *c, const IrValue *v, const Aff *x, const Aff *y, bool sub, Aff *a)
{
    int rank = v->type.rank;
    memset(a, 0, sizeof *a);
    if (x->is_static && y->is_static) {
        int64_t k[GP_MAX_RANK];
        for (int d = 0; d < rank; d++) k[d] = sub ? x->kcoef[d] - y->kcoef[d] : x->kcoef[d] + y->kcoef[d];
        int64_t lo = sub ? x->lo - y->hi : x->lo + y->lo, hi = sub ? x->hi - y->lo : x->hi + y->hi;
        make_static(c, a, rank, k, lo, hi);
        a->addend = x->addend || y->addend;
        return is_wide((IrElem)v->type.elem) || narrow_range((IrElem)v->type.elem, lo, hi);
    }
    if (!is_wide((IrElem)v->type.elem)) return false;
    for (int d = 0; d < rank; d++) a->coef[d] = coef_add(c, x->coef[d], y->coef[d], sub);
    return true;
}

/* mul with one uniform operand: the other's coefs times its value. */
static bool aff_mul(CgCtx *c, const IrValue *v, const Aff *x, const Aff *y, Aff *a)
{
    int rank = v->type.rank;
    IrElem e = (IrElem)v->type.elem;
    if (x->is_static && y->is_static && (uniform(x, rank) || uniform(y, rank))) {
        const Aff *u = uniform(x, rank) ? x : y, *o = u == x ? y : x;
        if (u->lo != u->hi || u->addend) return false;    /* not a compile-time constant */
        int64_t k[GP_MAX_RANK], m = u->lo, p1 = o->lo * m, p2 = o->hi * m;
        if (m > (1 << 20) || m < -(1 << 20) || o->lo < INT32_MIN || o->hi > INT32_MAX) return false;
        for (int d = 0; d < rank; d++) k[d] = o->kcoef[d] * m;
        make_static(c, a, rank, k, p1 < p2 ? p1 : p2, p1 < p2 ? p2 : p1);
        a->addend = o->addend;
        return is_wide(e) || narrow_range(e, a->lo, a->hi);
    }
    if (!is_wide(e)) return false;
    const IrValue *uv = uniform(x, rank) ? v->def->args[0] : uniform(y, rank) ? v->def->args[1] : NULL;
    if (!uv) return false;
    const Aff *o = uv == v->def->args[0] ? y : x;
    LLVMValueRef s = c->vals[uv->id].r ? c->vals[uv->id].r[0] : NULL;   /* every element is this value */
    if (!s || LLVMTypeOf(s) != c->t_i64) return false;
    memset(a, 0, sizeof *a);
    for (int d = 0; d < rank; d++) a->coef[d] = o->coef[d] ? LLVMBuildMul(c->b, o->coef[d], s, "") : NULL;
    return true;
}

/* expand_dims / broadcast: coefs move with their dims; new and stretched dims get 0. */
static bool aff_shape(CgCtx *c, const IrOp *op, const Aff *x, Aff *a)
{
    const IrValue *in = op->args[0], *out = op->res[0];
    *a = *x;
    if (op->op == IR_EXPAND_DIMS) {
        int ax = op->attr[0];
        for (int d = out->type.rank - 1; d > ax; d--) {
            a->coef[d] = x->coef[d - 1];
            a->kcoef[d] = x->kcoef[d - 1];
        }
        a->coef[ax] = NULL;
        a->kcoef[ax] = 0;
        return true;
    }
    if (in->type.rank != out->type.rank) return false;       /* splat-like broadcast: a scalar */
    for (int d = 0; d < out->type.rank; d++)
        if (in->type.shape[d] == 1 && out->type.shape[d] != 1) {
            a->coef[d] = NULL;
            a->kcoef[d] = 0;
        }
    (void)c;
    return true;
}

static bool aff_leaf(CgCtx *c, const IrOp *op, const IrValue *v, Aff *a)
{
    int rank = v->type.rank;
    if (op->op == IR_ARANGE) {
        int64_t one = 1;
        make_static(c, a, rank, &one, op->attr[0], op->attr[1] - 1);
        return rank == 1;
    }
    if (op->op == IR_CONST) {
        if (!ir_elem_is_int((IrElem)v->type.elem)) return false;
        make_static(c, a, rank, NULL, op->ival, op->ival);
        return true;
    }
    /* splat of a runtime scalar: uniform (a narrow one is an addend) */
    memset(a, 0, sizeof *a);
    if (is_wide((IrElem)v->type.elem)) return true;
    if (!ir_elem_is_int((IrElem)v->type.elem)) return false;
    make_static(c, a, rank, NULL, 0, 0);
    a->addend = true;
    return true;
}

static bool affine(CgCtx *c, const IrValue *v, Aff *a, int depth)
{
    const IrOp *op = v->def;
    if (!op || depth > 32 || v->type.rank > GP_MAX_RANK) return false;
    Aff x, y;
    switch (op->op) {
    case IR_ARANGE: case IR_CONST: case IR_SPLAT: return aff_leaf(c, op, v, a);
    case IR_CONVERT_LAYOUT: return affine(c, op->args[0], a, depth + 1);
    case IR_EXPAND_DIMS: case IR_BROADCAST:
        return affine(c, op->args[0], &x, depth + 1) && aff_shape(c, op, &x, a);
    case IR_NEG:
        memset(&y, 0, sizeof y);
        if (!affine(c, op->args[0], &x, depth + 1)) return false;
        make_static(c, &y, v->type.rank, NULL, 0, 0);
        return aff_sum(c, v, &y, &x, true, a);
    case IR_ADD: case IR_SUB: case IR_MUL:
        if (!affine(c, op->args[0], &x, depth + 1) || !affine(c, op->args[1], &y, depth + 1)) return false;
        return op->op == IR_MUL ? aff_mul(c, v, &x, &y, a) : aff_sum(c, v, &x, &y, op->op == IR_SUB, a);
    case IR_CAST: {
        IrElem from = (IrElem)op->args[0]->type.elem, to = (IrElem)v->type.elem;
        if (!ir_elem_is_int(from) || !ir_elem_is_int(to) || !affine(c, op->args[0], &x, depth + 1)) return false;
        if (is_wide(from) && is_wide(to)) { *a = x; return true; }
        if (!x.is_static || !(is_wide(to) || narrow_range(to, x.lo, x.hi))) return false;
        if (!ir_elem_is_signed(from) && x.lo < 0) return false;
        *a = x;
        return true;
    }
    case IR_ADDPTR: {
        if (!affine(c, op->args[0], &x, depth + 1) || !affine(c, op->args[1], &y, depth + 1)) return false;
        IrElem oe = (IrElem)op->args[1]->type.elem;
        if (!is_wide(oe) && (!y.is_static || (!ir_elem_is_signed(oe) && y.lo < 0))) return false;
        memset(a, 0, sizeof *a);
        for (int d = 0; d < v->type.rank; d++) a->coef[d] = coef_add(c, x.coef[d], y.coef[d], false);
        return true;
    }
    default: return false;
    }
}

bool cg_affine_coefs(CgCtx *c, const IrValue *ptrs, LLVMValueRef *coef)
{
    Aff a;
    if (ptrs->type.elem != IR_PTR || !affine(c, ptrs, &a, 0)) return false;
    for (int d = 0; d < ptrs->type.rank; d++) coef[d] = a.coef[d];
    return true;
}

LLVMValueRef cg_affine_step(CgCtx *c, const GpGeom *g, const LLVMValueRef *coef, int from, int to, int elem_bytes)
{
    int dv[GP_MAX_RANK];
    gp_geom_reg_delta(g, from, to, dv);
    LLVMValueRef step = NULL;
    for (int i = 0; i < g->vrank; i++) {
        if (!dv[i] || !coef[i]) continue;
        LLVMValueRef k = LLVMConstInt(c->t_i64, (unsigned long long)((long long)dv[i] * elem_bytes), 1);
        LLVMValueRef t = LLVMBuildMul(c->b, coef[i], k, "");
        step = step ? LLVMBuildAdd(c->b, step, t, "") : t;
    }
    return step ? step : LLVMConstInt(c->t_i64, 0, 0);
}
