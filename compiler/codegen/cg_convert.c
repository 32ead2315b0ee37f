/* cg_convert.c — convert_layout and reshape, through shared memory.
 *
 * Both are "write every register to scratch at its element's row-major index,
 * barrier, read the registers of the new layout (or new shape: reshape keeps
 * row-major order) back". The scratch buffer is the one pass_sram_alloc.c
 * placed for this op; a barrier before the writes is placed by cg_smem_begin
 * only when an earlier access since the last barrier overlaps it.
 * Conversions between equivalent layouts (same thread -> element map) copy
 * registers and cost nothing. Conversions to mma.sync operand layouts of
 * f16/bf16 go through a swizzled tile and ldmatrix instead (cg_dot_mma.c),
 * and those of pipelined loads read the loop's stage buffer.
 *
 * A conversion's scratch rows (last dim) of 64 bytes or more are padded by 16
 * bytes: in the row-major tile every row then starts 4 banks after the one
 * above, so an MMA accumulator's 8 rows per store instruction (attention's O
 * epilogue) hit 32 different banks instead of one (8-way conflicts; ncu on
 * the H200 counted 3.7 M of them per attention kernel vs FA2's 0.1 M).
 * Reshape keeps unpadded row-major order (its two sides have other shapes).
 * On sm_90 a 16-bit accumulator (MMA C layout) is written with stmatrix
 * instead (below).
 *
 * Example: tensor<64xf32> from #slice<dim=1, parent=#L0> to #blocked<spt=[1]...>:
 * 256 bytes of scratch, two barriers, one st.shared and one ld.shared per
 * register (replicas write the same value to the same address).
 */
#include "cg_internal.h"

#include <stdio.h>

static LLVMValueRef store_form(CgCtx *c, LLVMValueRef v, IrElem e)
{
    return e == IR_I1 ? LLVMBuildZExt(c->b, v, c->t_i8, "") : v;
}

/* Byte offset of element `idx` in a row-major tile whose rows (last dim)
 * are followed by row_pad bytes. */
static LLVMValueRef tile_offset(CgCtx *c, IrType type, LLVMValueRef *idx, int eb, int row_pad)
{
    LLVMValueRef flat = cg_flat_index(c, type, idx);
    LLVMValueRef off = LLVMBuildMul(c->b, flat, cg_i32(c, eb), "");
    if (!row_pad || type.rank < 1) return off;
    LLVMValueRef row = LLVMBuildUDiv(c->b, flat, cg_i32(c, type.shape[type.rank - 1]), "");
    return LLVMBuildAdd(c->b, off, LLVMBuildMul(c->b, row, cg_i32(c, row_pad), ""), "");
}

/* How many registers from `reg` on go to SRAM as one vector: registers
 * reg.. reg + n - 1 hold consecutive elements of one row (the value's last
 * dim), starting at a multiple of n, so the row-major tile has them side by
 * side at an n * eb aligned offset (rows of a multiple of n elements, plus
 * a 16-byte pad, in a 16-byte aligned buffer). 1 when they do not. One
 * vector access instead of n scalar ones, each with its own copy of the
 * index arithmetic: that the SLP vectorizer merged some of, at a cost, and
 * not all (the forward's O epilogue stayed 16-bit stores). */
static int smem_run(const GpGeom *g, IrType type, IrElem e, int reg)
{
    if (type.rank < 1 || e == IR_I1 || e == IR_PTR) return 1;
    int fd = g->vdims[type.rank - 1], eb = gp_elem_bytes(e);
    int n = g->eff_spt[fd];
    if (n > 16 / eb) n = 16 / eb;
    if (g->order[0] != fd || n < 2 || g->spt[fd] % n || type.shape[type.rank - 1] % n || reg % n || reg + n > g->nregs)
        return 1;
    int rd[GP_MAX_RANK], delta[GP_MAX_RANK];
    gp_geom_reg_dims(g, reg, rd);
    if (gp_geom_const_part(g, fd, rd[fd]) % n) return 1;
    for (int k = 1; k < n; k++) {
        gp_geom_reg_delta(g, reg, reg + k, delta);
        for (int i = 0; i < type.rank; i++)
            if (delta[i] != (i == type.rank - 1 ? k : 0)) return 1;
    }
    return n;
}

void cg_tile_to_smem(CgCtx *c, IrType type, const CgTile *t, int layout, bool owners_only, int row_pad)
{
    IrElem e = (IrElem)type.elem;
    int eb = gp_elem_bytes(e);
    GpGeom g;
    if (!gp_geom(c->f, layout, type, &g)) {
        INTERNAL_ERROR("codegen: tile without a layout in a conversion");
        return;
    }
    LLVMValueRef base[GP_MAX_RANK], idx[GP_MAX_RANK];
    cg_thread_base(c, &g, base);
    bool redirect = owners_only && gp_geom_replicated(&g);
    int rows = type.rank ? (int)(ir_type_numel(type) / type.shape[type.rank - 1]) : 1;
    LLVMValueRef trash = cg_i32(c, (int)ir_type_numel(type) * eb + rows * row_pad);
    for (int i = 0, n; i < g.nregs && i < t->n; i += n) {
        n = redirect || t->n < g.nregs ? 1 : smem_run(&g, type, e, i);
        cg_reg_index(c, &g, base, i, idx);
        LLVMValueRef off = tile_offset(c, type, idx, eb, row_pad);
        /* Replicas that must not write go to a slot just past the tile. */
        if (redirect) off = LLVMBuildSelect(c->b, cg_reg_owner(c, &g, base, i), off, trash, "");
        LLVMValueRef v = store_form(c, t->r[i], e);
        if (n > 1) {
            v = LLVMGetUndef(LLVMVectorType(cg_type(c, e), (unsigned)n));
            for (int k = 0; k < n; k++) v = LLVMBuildInsertElement(c->b, v, t->r[i + k], cg_i32(c, k), "");
        }
        LLVMValueRef st = LLVMBuildStore(c->b, v, cg_smem_ptr(c, off));
        LLVMSetAlignment(st, (unsigned)(n * eb));
    }
}

void cg_tile_from_smem(CgCtx *c, IrType type, int layout, CgTile *out, int row_pad)
{
    IrElem e = (IrElem)type.elem;
    int eb = gp_elem_bytes(e);
    GpGeom g;
    if (!gp_geom(c->f, layout, type, &g)) {
        INTERNAL_ERROR("codegen: tile without a layout in a conversion");
        return;
    }
    LLVMValueRef base[GP_MAX_RANK], idx[GP_MAX_RANK];
    cg_thread_base(c, &g, base);
    for (int i = 0, n; i < g.nregs && i < out->n; i += n) {
        n = out->n < g.nregs ? 1 : smem_run(&g, type, e, i);
        cg_reg_index(c, &g, base, i, idx);
        LLVMValueRef off = tile_offset(c, type, idx, eb, row_pad);
        LLVMTypeRef vt = n > 1 ? LLVMVectorType(cg_type(c, e), (unsigned)n) : cg_mem_type(c, e);
        LLVMValueRef v = LLVMBuildLoad2(c->b, vt, cg_smem_ptr(c, off), "");
        LLVMSetAlignment(v, (unsigned)(n * eb));
        if (n > 1)
            for (int k = 0; k < n; k++) out->r[i + k] = LLVMBuildExtractElement(c->b, v, cg_i32(c, k), "");
        else
            out->r[i] = e == IR_I1 ? LLVMBuildICmp(c->b, LLVMIntNE, v, LLVMConstInt(c->t_i8, 0, 0), "") : v;
    }
}

/* ---- stmatrix (sm_90): an accumulator's registers into the tile ----
 * A 16-bit value in an MMA C layout (the epilogue's acc.to(f16)) is stored
 * with stmatrix.x4: one instruction per warp m16 x two n8 tiles, four 32-bit
 * registers per thread, instead of one 4-byte st.shared per register pair
 * (its c0c1 / c2c3 pairs are not adjacent in a row, so smem_run cannot merge
 * them). The tile stays the padded row-major one cg_tile_from_smem reads:
 * with rows of 64 bytes or more every matrix's 8 rows start 4 banks apart
 * (16 bytes of pad), so each matrix is conflict free, and the read-back is
 * unchanged. Not .trans: the tile's contiguous dim is N, as the fragment's.
 * Lane address: the warp's corner + gp_stmatrix_lane_row (registers), plus
 * the instruction's corner, an immediate in the asm text. */
static bool stmatrix_fits(CgCtx *c, const IrValue *src, const CgTile *in, int pad, GpGeom *g, GpStmatrix *p)
{
    GpMmaFrag frag;
    int wm, wn;
    IrElem e = (IrElem)src->type.elem;
    if (c->sm < 90 || (e != IR_F16 && e != IR_BF16) || src->type.rank != 2) return false;
    if (!gp_layout_is_mma(c->f, src->layout, &frag, &wm, &wn) || frag != GP_MMA_C) return false;
    if (!gp_geom(c->f, src->layout, src->type, g) || in->n != g->nregs) return false;
    return (src->type.shape[1] * 2 + pad) % 16 == 0 && gp_stmatrix_plan(g, p); /* rows 16-byte aligned */
}

static void stmatrix_to_smem(CgCtx *c, const IrValue *src, const CgTile *in, const GpGeom *g, const GpStmatrix *p,
                             int pad)
{
    int stride = src->type.shape[1] * 2 + pad;
    LLVMValueRef rc[2];
    LLVMValueRef m = LLVMBuildLShr(c->b, c->lane, cg_i32(c, 3), "");
    rc[0] = LLVMBuildAdd(c->b, LLVMBuildAnd(c->b, c->lane, cg_i32(c, 7), ""),
                         LLVMBuildMul(c->b, LLVMBuildAnd(c->b, m, cg_i32(c, 1), ""), cg_i32(c, p->drow), ""), "");
    rc[1] = LLVMBuildMul(c->b, LLVMBuildLShr(c->b, m, cg_i32(c, 1), ""), cg_i32(c, p->dcol), "");
    for (int d = 0; d < 2; d++) { /* the warp's corner (cg_thread_base without the lane part) */
        LLVMValueRef wd = LLVMBuildLShr(c->b, c->warp, cg_i32(c, sup_ilog2(g->warp_stride[d])), "");
        wd = LLVMBuildAnd(c->b, wd, cg_i32(c, g->wpc[d] - 1), "");
        rc[d] = LLVMBuildAdd(c->b, rc[d], LLVMBuildMul(c->b, wd, cg_i32(c, g->spt[d] * g->tpw[d] * g->rpw[d]), ""), "");
    }
    LLVMValueRef off = LLVMBuildAdd(c->b, LLVMBuildMul(c->b, rc[0], cg_i32(c, stride), ""),
                                    LLVMBuildMul(c->b, rc[1], cg_i32(c, 2), ""), "");
    LLVMValueRef addr = LLVMBuildPtrToInt(c->b, cg_smem_ptr(c, off), c->t_i32, "");
    LLVMTypeRef pair = LLVMVectorType(cg_type(c, (IrElem)src->type.elem), 2);
    for (int q = 0; q < p->nm * p->nn; q++) {
        int row0, col0, regs[4];
        gp_stmatrix_instr(g, p, q, &row0, &col0, regs);
        LLVMValueRef args[5] = {addr};
        for (int j = 0; j < 4; j++) {
            LLVMValueRef v = LLVMGetUndef(pair);
            v = LLVMBuildInsertElement(c->b, v, in->r[regs[j]], cg_i32(c, 0), "");
            v = LLVMBuildInsertElement(c->b, v, in->r[regs[j] + g->reg_stride[1]], cg_i32(c, 1), "");
            args[1 + j] = LLVMBuildBitCast(c->b, v, c->t_i32, "");
        }
        char text[96];
        snprintf(text, sizeof text, "stmatrix.sync.aligned.m8n8.x4.shared.b16 [$0+%d], {$1, $2, $3, $4};",
                 row0 * stride + col0 * 2);
        cg_asm(c, c->t_void, text, "r,r,r,r,r,~{memory}", 5, args, true);
    }
}

bool cg_lower_convert(CgCtx *c, IrOp *op)
{
    IrValue *src = op->args[0], *res = op->res[0];
    const GpPipeLoad *pl = op->op == IR_CONVERT_LAYOUT ? gp_pipeline_load(c->tc, op, NULL) : NULL;
    if (pl && c->pipe) return cg_lower_pipelined_convert(c, op, pl); /* the source lives in SRAM only */
    GpGeom g;
    cg_geom_of(c, res, &g);
    CgTile *in = cg_get(c, src);
    CgTile *t = cg_set(c, res, g.nregs);
    if (op->op == IR_CONVERT_LAYOUT && gp_layouts_equivalent(c->f, src->layout, res->layout, res->type)) {
        for (int i = 0; i < g.nregs; i++) t->r[i] = in->r[i];
        return true;
    }
    if (src->type.rank == 0) { /* reshape of a scalar */
        for (int i = 0; i < g.nregs; i++) t->r[i] = in->r[0];
        return true;
    }
    const char *what = "convert_layout";
    int bytes = gp_convert_scratch_bytes(c->f, op, &what);
    if (what[0] == 'm') return cg_lower_convert_mma_operand(c, op);
    cg_smem_begin(c, what, res, bytes);
    int pad = gp_convert_row_pad(op, res->type);
    GpGeom sg;
    GpStmatrix sp;
    if (op->op == IR_CONVERT_LAYOUT && stmatrix_fits(c, src, in, pad, &sg, &sp))
        stmatrix_to_smem(c, src, in, &sg, &sp, pad);
    else
        cg_tile_to_smem(c, src->type, in, src->layout, false, pad);
    cg_barrier(c);
    if (res->type.rank == 0) {
        LLVMValueRef v = LLVMBuildLoad2(c->b, cg_mem_type(c, (IrElem)res->type.elem), cg_smem_ptr(c, cg_i32(c, 0)), "");
        t->r[0] = res->type.elem == IR_I1 ? LLVMBuildTrunc(c->b, v, c->t_i1, "") : v;
        return true;
    }
    cg_tile_from_smem(c, res->type, res->layout, t, pad);
    return true;
}
