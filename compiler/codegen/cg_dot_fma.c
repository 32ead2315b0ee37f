/* cg_dot_fma.c — dot on CUDA cores: acc[M,N] + a[M,K] @ b[K,N] with FMAs.
 *
 * The layout pass gives the accumulator a blocked layout C and converts the
 * operands to "dot operand" blocked layouts built from C: A keeps C's
 * distribution of rows and holds all K columns in every thread (spt =
 * [spt_C[0], K]); B keeps C's columns and holds all K rows. So for the C
 * register with per-dim register indices (r0, r1), the A registers (r0, k) and
 * B registers (k, r1) are exactly row m and column n of that output element,
 * and each output is a chain of K fmas in k order, in f32 for f16/bf16/f32
 * operands (i32 for integer operands). Correct for any power-of-two M, N, K;
 * dots that pass_accelerate_dot.c put on tensor cores (an MMA accumulator
 * layout) go to cg_dot_mma.c instead.
 */
#include "cg_internal.h"

/* Multiply-adds per thread past which an integer dot's are inline PTX. */
#define CG_DOT_MAD_ASM_WORK 1024

bool cg_lower_dot(CgCtx *c, IrOp *op)
{
    IrValue *a = op->args[0], *b = op->args[1], *acc = op->args[2], *res = op->res[0];
    GpMmaFrag frag;
    int wm, wn;
    if (gp_layout_is_mma(c->f, res->layout, &frag, &wm, &wn) && cg_lower_dot_wgmma(c, op)) return true;
    if (ir_attr_int(&op->attrs, IR_ATTR_WGMMA_E4M3, 0)) { /* accelerate-dot checked its tile: nothing else takes it */
        cg_fail(c, op, "internal: an f8e4m3 dot marked wgmma.e4m3 did not lower to FP8 wgmma");
        return false;
    }
    cg_wgmma_retire(c);   /* a wgmma.overlap group: this dot has no wgmma wait to retire it */
    if (gp_layout_is_mma(c->f, res->layout, &frag, &wm, &wn)) {
        cg_pingpong_skip(c, op);   /* a turn it does not use, so every warpgroup takes as many */
        return cg_lower_dot_mma(c, op);
    }
    GpGeom ga, gb, gc;
    if (!cg_geom_of(c, a, &ga) || !cg_geom_of(c, b, &gb) || !cg_geom_of(c, res, &gc)) return false;
    int K = a->type.shape[1];
    if (ga.nregs_dim[1] != K || gb.nregs_dim[0] != K || ga.nregs_dim[0] != gc.nregs_dim[0] ||
        gb.nregs_dim[1] != gc.nregs_dim[1] || acc->layout != res->layout) {
        INTERNAL_ERROR("codegen: dot operands are not in dot-operand layouts of the result");
        return false;
    }
    IrElem ea = (IrElem)a->type.elem, eb = (IrElem)b->type.elem, er = (IrElem)res->type.elem;
    bool fl = ir_elem_is_float(er);
    IrElem we = fl ? (er == IR_F64 ? IR_F64 : IR_F32) : IR_I32;
    LLVMTypeRef wt = cg_type(c, we);
    LLVMTypeRef pt[3] = {wt, wt, wt};
    const char *fma = we == IR_F64 ? "llvm.fma.f64" : "llvm.fma.f32";
    CgTile *ta = cg_get(c, a), *tb = cg_get(c, b), *tc = cg_get(c, acc);
    /* Convert each operand register once, not once per use. */
    LLVMValueRef *av = ARENA_ARRAY(c->arena, LLVMValueRef, ta->n);
    LLVMValueRef *bv = ARENA_ARRAY(c->arena, LLVMValueRef, tb->n);
    for (int i = 0; i < ta->n; i++) av[i] = cg_convert_scalar(c, ta->r[i], ea, we);
    for (int i = 0; i < tb->n; i++) bv[i] = cg_convert_scalar(c, tb->r[i], eb, we);
    /* Long integer multiply-add chains are opaque mad.lo.s32 in large dots:
     * LLVM's NVPTX NaryReassociate is quadratic in them (an i8 64 x 64 x 64 dot
     * on 4 warps, 2048 chained adds a thread: 9 s). Floats use llvm.fma. */
    bool mad_asm = !fl && (int64_t)gc.nregs * K > CG_DOT_MAD_ASM_WORK;
    CgTile *t = cg_set(c, res, gc.nregs);
    for (int j = 0; j < gc.nregs; j++) {
        int rd[GP_MAX_RANK], ra[2], rb[2];
        gp_geom_reg_dims(&gc, j, rd);
        LLVMValueRef s = cg_convert_scalar(c, tc->r[j], (IrElem)acc->type.elem, we);
        for (int k = 0; k < K; k++) {
            ra[0] = rd[0], ra[1] = k;
            rb[0] = k, rb[1] = rd[1];
            LLVMValueRef x = av[gp_geom_reg_of(&ga, ra)], y = bv[gp_geom_reg_of(&gb, rb)];
            if (fl) {
                LLVMValueRef args[3] = {x, y, s};
                s = cg_call(c, fma, wt, 3, pt, args);
            } else if (mad_asm) {
                LLVMValueRef args[3] = {x, y, s};
                s = cg_asm(c, wt, "mad.lo.s32 $0, $1, $2, $3;", "=r,r,r,r", 3, args, false);
            } else {
                s = LLVMBuildAdd(c->b, s, LLVMBuildMul(c->b, x, y, ""), "");
            }
        }
        t->r[j] = cg_convert_scalar(c, s, we, er);
    }
    return true;
}
