/* cg_reduce.c — reduce along one axis: in-thread, then warp shuffles, then
 * shared memory across warps.
 *
 * With the source in layout L (base dim k for the axis), the result is in
 * slice(L, axis), i.e. L on the shape with dim k set to 1, so result register
 * j collects the source registers that differ from it only along k:
 *   1. in-thread: combine the nregs_dim[k] registers along k;
 *   2. lanes: a butterfly (llvm.nvvm.shfl.sync.bfly) over the lane bits of dim
 *      k that hold distinct elements (spt << bit < size); afterwards every lane
 *      of the group has the group's result;
 *   3. warps: when nw = min(wpc[k], size / (spt * tpw * rpw)) > 1, each warp writes
 *      its partial to scratch[flat(result element) * nw + warp_k], a barrier,
 *      and every thread combines the nw partials in warp order.
 * Replicated elements (tile smaller than the CTA along k) are never combined
 * twice: steps 2 and 3 only use the bits that address distinct elements.
 * f16/bf16 reduce in f32, small ints in i32. argmax/argmin carry (value,
 * index) pairs and prefer the smallest index on ties and NaNs only when all
 * are NaN, like the interpreter (max/min use maxnum/minnum: NaN ignored).
 * Full reductions of 1-D tiles give a scalar that every thread holds.
 */
#include "cg_internal.h"

typedef struct Red {
    IrReduce kind;
    IrElem we;           /* work element type */
    bool arg;
} Red;

typedef struct Pair { LLVMValueRef v, i; } Pair;

static LLVMValueRef better(CgCtx *c, const Red *r, LLVMValueRef a, LLVMValueRef b, bool max)
{
    if (ir_elem_is_float(r->we)) return LLVMBuildFCmp(c->b, max ? LLVMRealOGT : LLVMRealOLT, b, a, "");
    bool s = ir_elem_is_signed(r->we);
    return LLVMBuildICmp(c->b, max ? (s ? LLVMIntSGT : LLVMIntUGT) : (s ? LLVMIntSLT : LLVMIntULT), b, a, "");
}

static LLVMValueRef equal(CgCtx *c, const Red *r, LLVMValueRef a, LLVMValueRef b)
{
    if (ir_elem_is_float(r->we)) return LLVMBuildFCmp(c->b, LLVMRealOEQ, a, b, "");
    return LLVMBuildICmp(c->b, LLVMIntEQ, a, b, "");
}

static Pair combine(CgCtx *c, const Red *r, Pair a, Pair b)
{
    Pair o = {NULL, NULL};
    bool f = ir_elem_is_float(r->we);
    LLVMTypeRef t = LLVMTypeOf(a.v);
    LLVMTypeRef pt[2] = {t, t};
    LLVMValueRef args[2] = {a.v, b.v};
    switch (r->kind) {
    case IR_RED_SUM:
        o.v = f ? LLVMBuildFAdd(c->b, a.v, b.v, "") : LLVMBuildAdd(c->b, a.v, b.v, "");
        return o;
    case IR_RED_MAX: case IR_RED_MIN:
        if (f) {
            const char *n = r->kind == IR_RED_MAX ? (r->we == IR_F64 ? "llvm.maxnum.f64" : "llvm.maxnum.f32")
                                                  : (r->we == IR_F64 ? "llvm.minnum.f64" : "llvm.minnum.f32");
            o.v = cg_call(c, n, t, 2, pt, args);
        } else {
            o.v = LLVMBuildSelect(c->b, better(c, r, a.v, b.v, r->kind == IR_RED_MAX), b.v, a.v, "");
        }
        return o;
    case IR_RED_ARGMAX: case IR_RED_ARGMIN: {
        LLVMValueRef take = better(c, r, a.v, b.v, r->kind == IR_RED_ARGMAX);
        LLVMValueRef same = equal(c, r, a.v, b.v);
        if (f) { /* NaNs lose to numbers; among NaNs the first index wins (interpreter) */
            LLVMValueRef an = LLVMBuildFCmp(c->b, LLVMRealUNO, a.v, a.v, "");
            LLVMValueRef bn = LLVMBuildFCmp(c->b, LLVMRealUNO, b.v, b.v, "");
            take = LLVMBuildOr(c->b, take, LLVMBuildAnd(c->b, an, LLVMBuildNot(c->b, bn, ""), ""), "");
            same = LLVMBuildOr(c->b, same, LLVMBuildAnd(c->b, an, bn, ""), "");
        }
        LLVMValueRef tie = LLVMBuildAnd(c->b, same, LLVMBuildICmp(c->b, LLVMIntSLT, b.i, a.i, ""), "");
        take = LLVMBuildOr(c->b, take, tie, "");
        o.v = LLVMBuildSelect(c->b, take, b.v, a.v, "");
        o.i = LLVMBuildSelect(c->b, take, b.i, a.i, "");
        return o;
    }
    }
    return o;
}

static LLVMValueRef shfl32(CgCtx *c, LLVMValueRef v, int mask)
{
    LLVMTypeRef pt[4] = {c->t_i32, c->t_i32, c->t_i32, c->t_i32};
    LLVMValueRef args[4] = {cg_i32(c, -1), v, cg_i32(c, mask), cg_i32(c, 0x1f)};
    return cg_call(c, "llvm.nvvm.shfl.sync.bfly.i32", c->t_i32, 4, pt, args);
}

static LLVMValueRef shfl(CgCtx *c, LLVMValueRef v, int mask)
{
    LLVMTypeRef t = LLVMTypeOf(v);
    int bits = LLVMGetTypeKind(t) == LLVMDoubleTypeKind ? 64 : LLVMGetTypeKind(t) == LLVMFloatTypeKind
                                                                  ? 32
                                                                  : (int)LLVMGetIntTypeWidth(t);
    if (bits == 32) {
        LLVMValueRef x = LLVMBuildBitCast(c->b, v, c->t_i32, "");
        return LLVMBuildBitCast(c->b, shfl32(c, x, mask), t, "");
    }
    LLVMValueRef x = LLVMBuildBitCast(c->b, v, c->t_i64, "");
    LLVMValueRef lo = shfl32(c, LLVMBuildTrunc(c->b, x, c->t_i32, ""), mask);
    LLVMValueRef hi = shfl32(c, LLVMBuildTrunc(c->b, LLVMBuildLShr(c->b, x, cg_i64(c, 32), ""), c->t_i32, ""), mask);
    LLVMValueRef r = LLVMBuildOr(c->b, LLVMBuildZExt(c->b, lo, c->t_i64, ""),
                                 LLVMBuildShl(c->b, LLVMBuildZExt(c->b, hi, c->t_i64, ""), cg_i64(c, 32), ""), "");
    return LLVMBuildBitCast(c->b, r, t, "");
}

/* Step 3: partials of the nw distinct warps along k through scratch. */
static void across_warps(CgCtx *c, const Red *r, const GpGeom *gr, IrType rt, int k, int nw, Pair *acc,
                         const IrValue *res)
{
    int wb = gp_elem_bytes(r->we);
    int64_t n = ir_type_numel(rt);
    int idx_base = (int)(n * nw * wb);
    cg_smem_begin(c, "reduce", res, idx_base + (r->arg ? (int)(n * nw * 4) : 0));
    LLVMValueRef wk = LLVMBuildLShr(c->b, c->warp, cg_i32(c, sup_ilog2(gr->warp_stride[k])), "");
    wk = LLVMBuildAnd(c->b, wk, cg_i32(c, nw - 1), ""); /* duplicate warps write identical values */
    LLVMValueRef base[GP_MAX_RANK], idx[GP_MAX_RANK];
    cg_thread_base(c, gr, base);
    LLVMTypeRef wt = cg_type(c, r->we);
    LLVMValueRef *slot0 = ARENA_ARRAY(c->arena, LLVMValueRef, gr->nregs);
    for (int j = 0; j < gr->nregs; j++) {
        cg_reg_index(c, gr, base, j, idx);
        slot0[j] = LLVMBuildMul(c->b, cg_flat_index(c, rt, idx), cg_i32(c, nw), "");
        LLVMValueRef slot = LLVMBuildAdd(c->b, slot0[j], wk, "");
        LLVMBuildStore(c->b, acc[j].v, cg_smem_ptr(c, LLVMBuildMul(c->b, slot, cg_i32(c, wb), "")));
        if (r->arg) {
            LLVMValueRef off = LLVMBuildAdd(c->b, cg_i32(c, idx_base), LLVMBuildMul(c->b, slot, cg_i32(c, 4), ""), "");
            LLVMBuildStore(c->b, acc[j].i, cg_smem_ptr(c, off));
        }
    }
    cg_barrier(c);
    for (int j = 0; j < gr->nregs; j++) {
        for (int w = 0; w < nw; w++) {
            LLVMValueRef slot = LLVMBuildAdd(c->b, slot0[j], cg_i32(c, w), "");
            Pair p = {LLVMBuildLoad2(c->b, wt, cg_smem_ptr(c, LLVMBuildMul(c->b, slot, cg_i32(c, wb), "")), ""), NULL};
            if (r->arg) {
                LLVMValueRef off = LLVMBuildAdd(c->b, cg_i32(c, idx_base), LLVMBuildMul(c->b, slot, cg_i32(c, 4), ""), "");
                p.i = LLVMBuildLoad2(c->b, c->t_i32, cg_smem_ptr(c, off), "");
            }
            acc[j] = w == 0 ? p : combine(c, r, acc[j], p);
        }
    }
}

bool cg_lower_reduce(CgCtx *c, IrOp *op)
{
    IrValue *src = op->args[0], *res = op->res[0];
    int axis = op->attr[0];
    IrElem e = (IrElem)src->type.elem;
    Red r = {(IrReduce)op->attr[1], gp_reduce_work_elem(e), op->attr[1] == IR_RED_ARGMAX || op->attr[1] == IR_RED_ARGMIN};
    GpGeom gs, gr;
    if (!cg_geom_of(c, src, &gs)) return false;
    IrType kept = src->type; /* the source shape with the axis kept as size 1 */
    kept.shape[axis] = 1;
    gp_geom(c->f, src->layout, kept, &gr);
    int k = gs.vdims[axis];
    LLVMValueRef base[GP_MAX_RANK];
    cg_thread_base(c, &gs, base);
    CgTile *in = cg_get(c, src);
    Pair *acc = ARENA_ARRAY(c->arena, Pair, gr.nregs);
    for (int j = 0; j < gr.nregs; j++) {
        int rd[GP_MAX_RANK];
        gp_geom_reg_dims(&gr, j, rd);
        for (int rk = 0; rk < gs.nregs_dim[k]; rk++) {
            rd[k] = rk;
            Pair p = {cg_convert_scalar(c, in->r[gp_geom_reg_of(&gs, rd)], e, r.we), NULL};
            if (r.arg) {
                LLVMValueRef x = LLVMBuildAdd(c->b, base[k], cg_i32(c, gp_geom_const_part(&gs, k, rk)), "");
                p.i = LLVMBuildAnd(c->b, x, cg_i32(c, gs.shape[k] - 1), "");
            }
            acc[j] = rk == 0 ? p : combine(c, &r, acc[j], p);
        }
    }
    for (int bit = 0; (1 << bit) < gs.tpw[k]; bit++) {
        if ((gs.spt[k] << bit) >= gs.shape[k]) break;
        int mask = gs.lane_stride[k] << bit;
        for (int j = 0; j < gr.nregs; j++) {
            Pair o = {shfl(c, acc[j].v, mask), r.arg ? shfl(c, acc[j].i, mask) : NULL};
            acc[j] = combine(c, &r, acc[j], o);
        }
    }
    int nw = gp_reduce_warps_along(&gs, k);
    if (nw > 1) across_warps(c, &r, &gr, kept, k, nw, acc, res);
    CgTile *t = cg_set(c, res, gr.nregs);
    IrElem re = (IrElem)res->type.elem;
    for (int j = 0; j < gr.nregs; j++)
        t->r[j] = r.arg ? cg_convert_scalar(c, acc[j].i, IR_I32, re) : cg_convert_scalar(c, acc[j].v, r.we, re);
    return true;
}
