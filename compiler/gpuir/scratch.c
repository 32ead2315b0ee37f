/* scratch.c — what a GPU op needs beyond its registers, read off its layouts:
 * the SRAM scratch of a layout conversion, a cross-warp reduction or a
 * replicated atomic (pass_sram_alloc.c places them; the lowering,
 * codegen/cg_convert.c, cg_reduce.c and cg_memory.c, uses them at the offset
 * placed), the registers a reduction works on, and the vector width of a
 * global load/store.
 *
 * Invariants: the sizes here are the ones the lowering uses (it calls the same
 * functions), so a buffer placed by sram-alloc is never smaller than what
 * the lowering writes; LLVM-free.
 *
 * Example: a convert_layout of a [64, 64] f32 tile between two blocked layouts
 * needs 64 * 64 * 4 + 64 * 16 bytes (rows of >= 64 bytes get a 16-byte pad
 * against bank conflicts); to an mma operand layout of f16, 64 * 64 * 2.
 */
#include "gpuir.h"

/* ---- layout conversions (and reshape) ---- */

int gp_convert_row_pad(const IrOp *op, IrType t)
{
    if (op->op != IR_CONVERT_LAYOUT || t.rank < 2) return 0;
    return t.shape[t.rank - 1] * gp_elem_bytes((IrElem)t.elem) >= 64 ? 16 : 0;
}

int gp_convert_scratch_bytes(const IrFunc *f, const IrOp *op, const char **what)
{
    const IrValue *src = op->args[0], *res = op->res[0];
    if (op->op == IR_CONVERT_LAYOUT) {
        if (src->type.rank == 0 || gp_layouts_equivalent(f, src->layout, res->layout, res->type)) return 0;
        GpMmaFrag frag;
        int wm, wn;
        IrElem e = (IrElem)res->type.elem;
        if (gp_mma_operand_elem(e) && gp_layout_is_mma(f, res->layout, &frag, &wm, &wn) && frag != GP_MMA_C) {
            *what = frag == GP_MMA_A ? "mma operand A" : "mma operand B";
            return (int)ir_type_numel(res->type) * gp_elem_bytes(e);
        }
        *what = "convert_layout";
    } else {
        if (src->type.rank == 0) return 0;
        *what = "reshape";
    }
    int eb = gp_elem_bytes((IrElem)res->type.elem);
    int64_t n = res->type.rank ? ir_type_numel(res->type) : 1;
    int pad = gp_convert_row_pad(op, res->type);
    return (int)(n * eb + (pad ? n / res->type.shape[res->type.rank - 1] * pad : 0));
}

/* ---- reductions ---- */

IrElem gp_reduce_work_elem(IrElem e)
{
    if (e == IR_F16 || e == IR_BF16) return IR_F32;
    if (e == IR_I1 || e == IR_U8 || e == IR_U16) return IR_U32;
    if (e == IR_I8 || e == IR_I16) return IR_I32;
    return e;
}

int gp_reduce_warps_along(const GpGeom *gs, int k)
{
    int distinct = gs->shape[k] / (gs->spt[k] * gs->tpw[k] * gs->rpw[k]);
    return distinct < 1 ? 1 : distinct > gs->wpc[k] ? gs->wpc[k] : distinct;
}

int gp_reduce_scratch_bytes(const IrFunc *f, const IrOp *op)
{
    const IrValue *src = op->args[0];
    GpGeom gs;
    if (!gp_geom(f, src->layout, src->type, &gs)) return 0;
    int nw = gp_reduce_warps_along(&gs, gs.vdims[op->attr[0]]);
    if (nw <= 1) return 0;
    IrType kept = src->type;
    kept.shape[op->attr[0]] = 1;
    int64_t n = ir_type_numel(kept);
    bool arg = op->attr[1] == IR_RED_ARGMAX || op->attr[1] == IR_RED_ARGMIN;
    return (int)(n * nw * gp_elem_bytes(gp_reduce_work_elem((IrElem)src->type.elem)) + (arg ? n * nw * 4 : 0));
}

int64_t gp_reduce_work(const IrFunc *f, const IrOp *op)
{
    const IrValue *src = op->args[0];
    GpGeom gs, gr;
    if (op->op != IR_REDUCE || !gp_geom(f, src->layout, src->type, &gs)) return 0;
    IrType kept = src->type;
    kept.shape[op->attr[0]] = 1;
    if (!gp_geom(f, src->layout, kept, &gr)) return 0;
    return (int64_t)gr.nregs * gp_reduce_warps_along(&gs, gs.vdims[op->attr[0]]);
}

/* ---- global memory ---- */

/* The vector width of a load/store/atomic: what the pointer layout's
 * registers per thread, 16 bytes, the pointers' contiguity and alignment and
 * the mask's constancy allow (the layout pass and the pipeline plan ask too). */
int gp_mem_vec_width(const IrFunc *f, const GpAxisMap *axis, const IrOp *op)
{
    const IrValue *p = op->args[0];
    if (p->type.rank == 0) return 1;
    IrElem pe = (IrElem)p->type.pointee;
    GpGeom g;
    if (pe == IR_I1 || !gp_geom(f, p->layout, p->type, &g)) return 1;
    /* The fastest base dim as a value dim (the axis facts are per value dim).
     * A slice (the per-column vector of an MMA accumulator: pairs of adjacent
     * columns per thread) vectorises like its parent; a slice that removed
     * the fastest dim has copies, not neighbours, in consecutive registers. */
    int fd = g.order[0], vd = -1;
    for (int i = 0; i < g.vrank; i++)
        if (g.vdims[i] == fd) vd = i;
    if (vd < 0) return 1;
    int eb = gp_elem_bytes(pe);
    const GpAxis *ax = gp_axis_get(axis, p);
    int64_t vec = g.eff_spt[fd];
    if (16 / eb < vec) vec = 16 / eb;
    if (ax->contig[vd] < vec) vec = ax->contig[vd];
    if (ax->div[vd] / eb < vec) vec = ax->div[vd] / eb;
    int mask_idx = op->op == IR_LOAD ? 1 : 2;
    if (op->nargs > mask_idx && op->args[mask_idx]->type.rank > 0) {
        const GpAxis *mx = gp_axis_get(axis, op->args[mask_idx]);
        if (mx->constancy[vd] < vec) vec = mx->constancy[vd];
    }
    return vec < 1 ? 1 : (int)vec;
}

/* Atomics are one element at a time here (the vector red of lower_atomic
 * depends on the target and on the result being unused). */
int gp_mem_vec(const IrFunc *f, const GpAxisMap *axis, const IrOp *op)
{
    return op->op == IR_ATOMIC_ADD ? 1 : gp_mem_vec_width(f, axis, op);
}

int gp_atomic_scratch_bytes(const IrFunc *f, const IrOp *op, const int *uses)
{
    const IrValue *ptrs = op->args[0], *res = op->res[0];
    if (op->op != IR_ATOMIC_ADD || uses[res->id] == 0) return 0;
    GpGeom g;
    bool shared = ptrs->type.rank == 0 || (gp_geom(f, res->layout, res->type, &g) && gp_geom_replicated(&g));
    if (!shared) return 0;
    int eb = gp_elem_bytes((IrElem)res->type.elem);
    return (int)(ptrs->type.rank ? ir_type_numel(res->type) : 1) * eb + eb; /* + the replicas' slot */
}
