/* cg_convert.c — convert_layout and reshape, through shared memory.
 *
 * Both are "write every register to scratch at its element's row-major index,
 * barrier, read the registers of the new layout (or new shape: reshape keeps
 * row-major order) back". A barrier before the writes protects the previous
 * user of the scratch buffer (all scratch lives at offset 0 for now; the
 * buffer is as large as the largest single need). Conversions between
 * equivalent layouts (same thread -> element map) copy registers and cost
 * nothing.
 *
 * Example: tensor<64xf32> from #slice<dim=1, parent=#L0> to #blocked<spt=[1]...>:
 * 256 bytes of scratch, two barriers, one st.shared and one ld.shared per
 * register (replicas write the same value to the same address).
 */
#include "cg_internal.h"

static LLVMValueRef store_form(CgCtx *c, LLVMValueRef v, IrElem e)
{
    return e == IR_I1 ? LLVMBuildZExt(c->b, v, c->t_i8, "") : v;
}

void cg_tile_to_smem(CgCtx *c, IrType type, const CgTile *t, int layout, bool owners_only)
{
    IrElem e = (IrElem)type.elem;
    int eb = cg_elem_bytes(e);
    CgGeom g;
    if (!cg_geom(c->f, layout, type, &g)) {
        INTERNAL_ERROR("codegen: tile without a layout in a conversion");
        return;
    }
    LLVMValueRef base[CG_MAX_RANK], idx[CG_MAX_RANK];
    cg_thread_base(c, &g, base);
    bool redirect = owners_only && cg_geom_replicated(&g);
    LLVMValueRef trash = cg_i32(c, (int)ir_type_numel(type) * eb);
    for (int i = 0; i < g.nregs && i < t->n; i++) {
        cg_reg_index(c, &g, base, i, idx);
        LLVMValueRef off = LLVMBuildMul(c->b, cg_flat_index(c, type, idx), cg_i32(c, eb), "");
        /* Replicas that must not write go to a slot just past the tile. */
        if (redirect) off = LLVMBuildSelect(c->b, cg_reg_owner(c, &g, base, i), off, trash, "");
        LLVMValueRef st = LLVMBuildStore(c->b, store_form(c, t->r[i], e), cg_smem_ptr(c, off));
        LLVMSetAlignment(st, (unsigned)eb);
    }
}

void cg_tile_from_smem(CgCtx *c, IrType type, int layout, CgTile *out)
{
    IrElem e = (IrElem)type.elem;
    int eb = cg_elem_bytes(e);
    CgGeom g;
    if (!cg_geom(c->f, layout, type, &g)) {
        INTERNAL_ERROR("codegen: tile without a layout in a conversion");
        return;
    }
    LLVMValueRef base[CG_MAX_RANK], idx[CG_MAX_RANK];
    cg_thread_base(c, &g, base);
    for (int i = 0; i < g.nregs && i < out->n; i++) {
        cg_reg_index(c, &g, base, i, idx);
        LLVMValueRef off = LLVMBuildMul(c->b, cg_flat_index(c, type, idx), cg_i32(c, eb), "");
        LLVMValueRef v = LLVMBuildLoad2(c->b, cg_mem_type(c, e), cg_smem_ptr(c, off), "");
        LLVMSetAlignment(v, (unsigned)eb);
        out->r[i] = e == IR_I1 ? LLVMBuildICmp(c->b, LLVMIntNE, v, LLVMConstInt(c->t_i8, 0, 0), "") : v;
    }
}

bool cg_lower_convert(CgCtx *c, IrOp *op)
{
    IrValue *src = op->args[0], *res = op->res[0];
    CgGeom g;
    cg_geom_of(c, res, &g);
    CgTile *in = cg_get(c, src);
    CgTile *t = cg_set(c, res, g.nregs);
    if (op->op == IR_CONVERT_LAYOUT && cg_layouts_equivalent(c->f, src->layout, res->layout, res->type)) {
        for (int i = 0; i < g.nregs; i++) t->r[i] = in->r[i];
        return true;
    }
    if (src->type.rank == 0) { /* reshape of a scalar */
        for (int i = 0; i < g.nregs; i++) t->r[i] = in->r[0];
        return true;
    }
    int bytes = (int)ir_type_numel(res->type) * cg_elem_bytes((IrElem)res->type.elem);
    cg_use_scratch(c, op->op == IR_RESHAPE ? "reshape" : "convert_layout", res, bytes);
    cg_barrier(c);
    cg_tile_to_smem(c, src->type, in, src->layout, false);
    cg_barrier(c);
    if (res->type.rank == 0) {
        LLVMValueRef v = LLVMBuildLoad2(c->b, cg_mem_type(c, (IrElem)res->type.elem), cg_smem_ptr(c, cg_i32(c, 0)), "");
        t->r[0] = res->type.elem == IR_I1 ? LLVMBuildTrunc(c->b, v, c->t_i1, "") : v;
        return true;
    }
    cg_tile_from_smem(c, res->type, res->layout, t);
    return true;
}
