/* cg_elementwise.c — elementwise math and the ops that only move registers.
 *
 * Elementwise ops are a loop over the result's registers; all tile operands
 * already have the result's layout (the layout pass made sure), so register i
 * of every operand is the same element; scalar operands are used for every i.
 * f16/bf16 arithmetic is done in f32 and rounded once per op (cvt.rn), as the
 * interpreter does (LLVM then narrows it to native f16 ops where exact).
 * f32/f64 add, sub and mul carry the `contract` fast-math flag, so the NVPTX
 * backend fuses a * b + c into fma.rn.f32 (one rounding instead of two; what
 * Triton's default enable_fp_fusion does): results may differ from the
 * interpreter, which rounds every op, in the last bit. f16/bf16 ops do not
 * (fusing would skip the rounding to f16 between the mul and the add).
 * Casts f32 -> f16/bf16 on sm_80+ round two registers at a time, i and i + 1,
 * with cvt.rn.f16x2.f32 / cvt.rn.bf16x2.f32 (llvm.nvvm.ff2f16x2.rn; LLVM 19's
 * NVPTX has no pattern for a build_vector of two fptruncs): that is the pair
 * an MMA operand or a vector store packs into one 32-bit register, so the
 * extracted halves fold back into the cvt's result (attention's P = p.to(f16)).
 * Transcendentals use the PTX approximations without libdevice:
 * exp2 -> ex2.approx.ftz.f32, exp(x) -> ex2(x * log2 e),
 * log2 -> lg2.approx.f32, log(x) -> lg2(x) * ln 2, sqrt/rsqrt/sin/cos ->
 * *.approx.f32, tanh -> tanh.approx.f32 (inline PTX, sm_75+); f64 inputs go
 * through the f32 approximations (sqrt stays exact).
 *
 * Shape ops: splat copies a scalar to every register; broadcast reads the
 * register with index 0 along stretched dims; expand_dims and trans keep the
 * registers as they are (their result layouts are built for that:
 * slice(P, axis) -> P, blocked -> blocked with a unit dim, permuted blocked).
 */
#include "cg_internal.h"
#include "compiler/support/fp16.h"

#include <math.h>
#include <stdio.h>

static LLVMValueRef operand(CgCtx *c, const IrValue *v, int i)
{
    CgTile *t = cg_get(c, v);
    return v->type.rank == 0 ? t->r[0] : t->r[i < t->n ? i : 0];
}

static LLVMValueRef fconst(CgCtx *c, double v) { return LLVMConstReal(c->t_f32, v); }

static LLVMValueRef call_f32(CgCtx *c, const char *name, LLVMValueRef x)
{
    LLVMTypeRef t = c->t_f32;
    return cg_call(c, name, t, 1, &t, &x);
}

/* With `fuse`, allows the backend to fuse this fmul/fadd/fsub with its
 * operand or user into an fma (the builder may have folded it to a constant:
 * no flags then). Not for f16/bf16 arithmetic: LLVM narrows it to native half
 * ops, and fusing those would skip the rounding to f16 between mul and add. */
static LLVMValueRef contract(LLVMValueRef v, bool fuse)
{
    if (fuse && LLVMIsAInstruction(v) && LLVMCanValueUseFastMathFlags(v))
        LLVMSetFastMathFlags(v, LLVMFastMathAllowContract);
    return v;
}

static LLVMValueRef unary_float(CgCtx *c, IrOpcode op, LLVMValueRef x, bool f64, bool fuse)
{
    LLVMTypeRef t = LLVMTypeOf(x);
    if (op == IR_NEG) return LLVMBuildFNeg(c->b, x, "");
    if (op == IR_ABS) return cg_call(c, f64 ? "llvm.fabs.f64" : "llvm.fabs.f32", t, 1, &t, &x);
    if (op == IR_FLOOR) return cg_call(c, f64 ? "llvm.floor.f64" : "llvm.floor.f32", t, 1, &t, &x);
    if (op == IR_CEIL) return cg_call(c, f64 ? "llvm.ceil.f64" : "llvm.ceil.f32", t, 1, &t, &x);
    if (op == IR_SQRT && f64) return cg_call(c, "llvm.sqrt.f64", t, 1, &t, &x);
    if (f64) x = LLVMBuildFPTrunc(c->b, x, c->t_f32, "");
    LLVMValueRef r = NULL;
    switch (op) {
    case IR_EXP2: r = call_f32(c, "llvm.nvvm.ex2.approx.ftz.f", x); break;
    case IR_EXP:
        r = call_f32(c, "llvm.nvvm.ex2.approx.ftz.f", LLVMBuildFMul(c->b, x, fconst(c, M_LOG2E), ""));
        break;
    case IR_LOG2: r = call_f32(c, "llvm.nvvm.lg2.approx.f", x); break;
    case IR_LOG:
        r = contract(LLVMBuildFMul(c->b, call_f32(c, "llvm.nvvm.lg2.approx.f", x), fconst(c, M_LN2), ""), fuse);
        break;
    case IR_SQRT: r = call_f32(c, "llvm.nvvm.sqrt.approx.f", x); break;
    case IR_RSQRT: r = call_f32(c, "llvm.nvvm.rsqrt.approx.f", x); break;
    case IR_SIN: r = call_f32(c, "llvm.nvvm.sin.approx.f", x); break;
    case IR_COS: r = call_f32(c, "llvm.nvvm.cos.approx.f", x); break;
    case IR_TANH: r = cg_asm(c, c->t_f32, "tanh.approx.f32 $0, $1;", "=f,f", 1, &x, false); break;
    default: r = x; break;
    }
    return f64 ? LLVMBuildFPExt(c->b, r, c->t_f64, "") : r;
}

static LLVMValueRef binary_float(CgCtx *c, IrOpcode op, LLVMValueRef a, LLVMValueRef b, bool f64, bool fuse)
{
    LLVMTypeRef t = LLVMTypeOf(a);
    LLVMTypeRef pt[2] = {t, t};
    LLVMValueRef args[2] = {a, b};
    switch (op) {
    case IR_ADD: return contract(LLVMBuildFAdd(c->b, a, b, ""), fuse);
    case IR_SUB: return contract(LLVMBuildFSub(c->b, a, b, ""), fuse);
    case IR_MUL: return contract(LLVMBuildFMul(c->b, a, b, ""), fuse);
    case IR_DIV: return LLVMBuildFDiv(c->b, a, b, "");
    case IR_REM: return LLVMBuildFRem(c->b, a, b, "");
    /* minnum/maxnum: like fminf/fmaxf, a NaN operand is ignored (min.f32). */
    case IR_MIN: return cg_call(c, f64 ? "llvm.minnum.f64" : "llvm.minnum.f32", t, 2, pt, args);
    case IR_MAX: return cg_call(c, f64 ? "llvm.maxnum.f64" : "llvm.maxnum.f32", t, 2, pt, args);
    default: return NULL;
    }
}

static LLVMValueRef binary_int(CgCtx *c, IrOpcode op, LLVMValueRef a, LLVMValueRef b, bool sgn)
{
    switch (op) {
    case IR_ADD: return LLVMBuildAdd(c->b, a, b, "");
    case IR_SUB: return LLVMBuildSub(c->b, a, b, "");
    case IR_MUL: return LLVMBuildMul(c->b, a, b, "");
    case IR_DIV: return sgn ? LLVMBuildSDiv(c->b, a, b, "") : LLVMBuildUDiv(c->b, a, b, "");
    case IR_REM: return sgn ? LLVMBuildSRem(c->b, a, b, "") : LLVMBuildURem(c->b, a, b, "");
    case IR_AND: return LLVMBuildAnd(c->b, a, b, "");
    case IR_OR: return LLVMBuildOr(c->b, a, b, "");
    case IR_XOR: return LLVMBuildXor(c->b, a, b, "");
    case IR_SHL: return LLVMBuildShl(c->b, a, b, "");
    case IR_SHR: return sgn ? LLVMBuildAShr(c->b, a, b, "") : LLVMBuildLShr(c->b, a, b, "");
    case IR_MIN: case IR_MAX: {
        LLVMIntPredicate p = op == IR_MIN ? (sgn ? LLVMIntSLT : LLVMIntULT) : (sgn ? LLVMIntSGT : LLVMIntUGT);
        return LLVMBuildSelect(c->b, LLVMBuildICmp(c->b, p, a, b, ""), a, b, "");
    }
    default: return NULL;
    }
}

static LLVMValueRef compare(CgCtx *c, IrCmp cmp, LLVMValueRef a, LLVMValueRef b, IrElem e)
{
    if (ir_elem_is_float(e)) {
        /* C semantics: every comparison with NaN is false except != */
        static const LLVMRealPredicate fp[] = {LLVMRealOEQ, LLVMRealUNE, LLVMRealOLT,
                                               LLVMRealOLE, LLVMRealOGT, LLVMRealOGE};
        return LLVMBuildFCmp(c->b, fp[cmp], a, b, "");
    }
    bool s = ir_elem_is_signed(e);
    static const LLVMIntPredicate sp[] = {LLVMIntEQ, LLVMIntNE, LLVMIntSLT, LLVMIntSLE, LLVMIntSGT, LLVMIntSGE};
    static const LLVMIntPredicate up[] = {LLVMIntEQ, LLVMIntNE, LLVMIntULT, LLVMIntULE, LLVMIntUGT, LLVMIntUGE};
    return LLVMBuildICmp(c->b, s ? sp[cmp] : up[cmp], a, b, "");
}

static bool is_half(IrElem e) { return e == IR_F16 || e == IR_BF16; }

/* A cast f32 -> f16/bf16, whose registers are rounded in pairs. Not the
 * f16/bf16 arithmetic: LLVM narrows its fpext/op/fptrunc to native f16
 * instructions (mul.rn.f16), which a paired cvt would prevent. Casts from f64
 * stay one direct rounding (through f32 would round twice). */
static bool cast_f32_to_half(const IrOp *op)
{
    return op->op == IR_CAST && op->args[0]->type.elem == IR_F32 && is_half((IrElem)op->res[0]->type.elem);
}

/* One element of a (non-shape) elementwise op; with `keep_f32`, a cast for
 * which cast_f32_to_half holds returns its f32 operand, not yet rounded. */
static LLVMValueRef elem(CgCtx *c, IrOp *op, LLVMValueRef *v, bool keep_f32)
{
    IrElem e = (IrElem)op->args[0]->type.elem;
    IrElem re = (IrElem)op->res[0]->type.elem;
    switch (op->op) {
    case IR_CAST: return keep_f32 ? v[0] : cg_convert_scalar(c, v[0], e, re);
    case IR_SELECT: return LLVMBuildSelect(c->b, v[0], v[1], v[2], "");
    case IR_ADDPTR: {
        IrElem oe = (IrElem)op->args[1]->type.elem;
        LLVMValueRef off = cg_convert_scalar(c, v[1], oe, ir_elem_is_signed(oe) ? IR_I64 : IR_U64);
        return LLVMBuildGEP2(c->b, cg_mem_type(c, (IrElem)op->res[0]->type.pointee), v[0], &off, 1, "");
    }
    default: break;
    }
    if (e == IR_F8E4M3 || re == IR_F8E4M3) { /* the verifier rejects these first */
        cg_fail(c, op, "'%s' is not defined on f8e4m3", ir_op_info[op->op].name);
        return NULL;
    }
    int n = op->nargs;
    LLVMValueRef x[2] = {v[0], n > 1 ? v[1] : NULL};
    if (is_half(e))
        for (int i = 0; i < n; i++) x[i] = LLVMBuildFPExt(c->b, x[i], c->t_f32, "");
    LLVMValueRef r = NULL;
    if (op->op == IR_CMP) return compare(c, (IrCmp)op->attr[0], x[0], x[1], is_half(e) ? IR_F32 : e);
    if (ir_elem_is_float(e)) {
        bool f64 = e == IR_F64, fuse = !is_half(e);
        r = n == 1 ? unary_float(c, op->op, x[0], f64, fuse) : binary_float(c, op->op, x[0], x[1], f64, fuse);
        if (r && is_half(e)) r = LLVMBuildFPTrunc(c->b, r, cg_type(c, e), "");
    } else if (n == 1) {
        LLVMValueRef zero = LLVMConstInt(LLVMTypeOf(x[0]), 0, 0);
        if (op->op == IR_NEG) r = LLVMBuildSub(c->b, zero, x[0], "");
        else if (op->op == IR_NOT) r = LLVMBuildNot(c->b, x[0], "");
        else if (op->op == IR_ABS)
            r = ir_elem_is_signed(e) ? LLVMBuildSelect(c->b, LLVMBuildICmp(c->b, LLVMIntSLT, x[0], zero, ""),
                                                       LLVMBuildSub(c->b, zero, x[0], ""), x[0], "")
                                     : x[0];
    } else {
        r = binary_int(c, op->op, x[0], x[1], ir_elem_is_signed(e));
    }
    if (!r) cg_fail(c, op, "'%s' is not defined on %s", ir_op_info[op->op].name, ir_elem_name(e));
    return r;
}

/* Rounds the f32 registers r[0..n) to `e` (f16/bf16) in place: pairs
 * (r[i], r[i + 1]) with one cvt.rn.{f16,bf16}x2.f32 each (sm_80+), whose
 * halves are then extracted (the extract folds away where the pair is packed
 * again, as for an MMA operand); a last odd register alone. */
static void round_pairs(CgCtx *c, LLVMValueRef *r, int n, IrElem e)
{
    LLVMTypeRef ht = cg_type(c, e);
    int i = 0;
    if (c->sm >= 80) {
        LLVMTypeRef pt[2] = {c->t_f32, c->t_f32};
        const char *name = e == IR_BF16 ? "llvm.nvvm.ff2bf16x2.rn" : "llvm.nvvm.ff2f16x2.rn";
        for (; i + 1 < n; i += 2) {
            /* cvt.rn.f16x2.f32 d, a, b puts a in the upper half: (hi, lo) */
            LLVMValueRef args[2] = {r[i + 1], r[i]};
            LLVMValueRef v = cg_call(c, name, LLVMVectorType(ht, 2), 2, pt, args);
            r[i] = LLVMBuildExtractElement(c->b, v, cg_i32(c, 0), "");
            r[i + 1] = LLVMBuildExtractElement(c->b, v, cg_i32(c, 1), "");
        }
    }
    for (; i < n; i++) r[i] = LLVMBuildFPTrunc(c->b, r[i], ht, "");
}

/* A cast f32 -> e4m3 or e4m3 -> f16/f32 of a thread's registers in pairs: one
 * cvt.rn.satfinite.e4m3x2.f32 (or cvt.rn.f16x2.e4m3x2) converts two elements,
 * the first source going to the upper half; the rounding is the single cvt's
 * (cg_context.c) either way. A last odd register alone. False: not such a cast. */
static bool e4m3_pairs(CgCtx *c, IrOp *op, CgTile *t, int n)
{
    if (op->op != IR_CAST || n < 2) return false;
    IrElem from = (IrElem)op->args[0]->type.elem, to = (IrElem)op->res[0]->type.elem;
    bool down = from == IR_F32 && to == IR_F8E4M3, up = from == IR_F8E4M3 && (to == IR_F16 || to == IR_F32);
    if (!down && !up) return false;
    if (c->sm < 90) c->ptx81 = true;   /* sm_89: PTX ISA 8.1 (cg_context.c) */
    int i = 0;
    for (; i + 1 < n; i += 2) {
        LLVMValueRef lo = operand(c, op->args[0], i), hi = operand(c, op->args[0], i + 1);
        if (down) {
            LLVMValueRef a[2] = {hi, lo};
            LLVMValueRef p = cg_asm(c, c->t_i16, "cvt.rn.satfinite.e4m3x2.f32 $0, $1, $2;", "=h,f,f", 2, a, false);
            t->r[i] = LLVMBuildTrunc(c->b, p, c->t_i8, "");
            t->r[i + 1] = LLVMBuildTrunc(c->b, LLVMBuildLShr(c->b, p, LLVMConstInt(c->t_i16, 8, 0), ""), c->t_i8, "");
        } else {
            LLVMValueRef w = LLVMBuildOr(c->b, LLVMBuildZExt(c->b, lo, c->t_i16, ""),
                                         LLVMBuildShl(c->b, LLVMBuildZExt(c->b, hi, c->t_i16, ""),
                                                      LLVMConstInt(c->t_i16, 8, 0), ""), "");
            LLVMValueRef h2 = cg_asm(c, c->t_i32, "cvt.rn.f16x2.e4m3x2 $0, $1;", "=r,h", 1, &w, false);
            LLVMValueRef v = LLVMBuildBitCast(c->b, h2, LLVMVectorType(c->t_f16, 2), "");
            for (int k = 0; k < 2; k++) {
                LLVMValueRef h = LLVMBuildExtractElement(c->b, v, cg_i32(c, k), "");
                t->r[i + k] = to == IR_F32 ? LLVMBuildFPExt(c->b, h, c->t_f32, "") : h;   /* exact */
            }
        }
    }
    if (i < n) t->r[i] = cg_convert_scalar(c, operand(c, op->args[0], i), from, to);
    return true;
}

bool cg_lower_elementwise(CgCtx *c, IrOp *op)
{
    IrValue *res = op->res[0];
    GpGeom g;
    cg_geom_of(c, res, &g);
    CgTile *t = cg_set(c, res, g.nregs);
    if (e4m3_pairs(c, op, t, g.nregs)) return true;
    bool pairs = cast_f32_to_half(op) && g.nregs > 1;
    for (int i = 0; i < g.nregs; i++) {
        LLVMValueRef v[3];
        for (int a = 0; a < op->nargs && a < 3; a++) v[a] = operand(c, op->args[a], i);
        t->r[i] = elem(c, op, v, pairs);
        if (!t->r[i]) return false;
    }
    if (pairs) round_pairs(c, t->r, g.nregs, (IrElem)res->type.elem);
    return true;
}

/* ---- shape ops ---- */
static LLVMValueRef const_value(CgCtx *c, IrOp *op)
{
    IrElem e = (IrElem)op->res[0]->type.elem;
    LLVMTypeRef t = cg_type(c, e);
    if (e == IR_F8E4M3) return LLVMConstInt(t, f8e4m3_from_f64(op->fval), 0);
    if (ir_elem_is_float(e)) return LLVMConstReal(t, op->fval);
    if (e == IR_I1) return LLVMConstInt(t, op->ival != 0, 0);
    if (e == IR_PTR) return LLVMConstNull(t);
    return LLVMConstInt(t, (unsigned long long)op->ival, 1);
}

static LLVMValueRef sreg(CgCtx *c, const char *what, int axis)
{
    char name[64];
    snprintf(name, sizeof name, "llvm.nvvm.read.ptx.sreg.%s.%c", what, "xyz"[axis < 0 || axis > 2 ? 0 : axis]);
    return cg_call(c, name, c->t_i32, 0, NULL, NULL);
}

static bool lower_broadcast(CgCtx *c, IrOp *op, CgTile *t, const GpGeom *go)
{
    IrValue *a = op->args[0];
    GpGeom gi;
    cg_geom_of(c, a, &gi);
    CgTile *src = cg_get(c, a);
    if (a->type.rank == 0) {
        for (int i = 0; i < go->nregs; i++) t->r[i] = src->r[0];
        return true;
    }
    if (gi.rank != go->rank) {
        INTERNAL_ERROR("codegen: broadcast changes the base rank (%d -> %d)", gi.rank, go->rank);
        return false;
    }
    for (int i = 0; i < go->nregs; i++) {
        int rd[GP_MAX_RANK];
        gp_geom_reg_dims(go, i, rd);
        /* A stretched (size-1) dim can still hold several registers: the
         * MMA layouts repeat rows per warp (rpw = 2), so a [1, N] tile has
         * 2 row registers, all copies of row 0, while the [M, N] result has
         * M / 8 / wm of them. Any register along a size-1 dim is element 0;
         * wrap the index (elsewhere rd is already in range). */
        for (int d = 0; d < go->rank; d++) rd[d] %= gi.nregs_dim[d];
        int r = gp_geom_reg_of(&gi, rd);
        if (r >= src->n) {
            INTERNAL_ERROR("codegen: broadcast reads register %d of %d", r, src->n);
            return false;
        }
        t->r[i] = src->r[r];
    }
    return true;
}

bool cg_lower_shape_op(CgCtx *c, IrOp *op)
{
    IrValue *res = op->res[0];
    GpGeom g;
    cg_geom_of(c, res, &g);
    CgTile *t = cg_set(c, res, g.nregs);
    switch (op->op) {
    case IR_CONST: {
        LLVMValueRef v = const_value(c, op);
        for (int i = 0; i < g.nregs; i++) t->r[i] = v;
        return true;
    }
    case IR_PROGRAM_ID: t->r[0] = sreg(c, "ctaid", op->attr[0]); return true;
    case IR_NUM_PROGRAMS: t->r[0] = sreg(c, "nctaid", op->attr[0]); return true;
    case IR_ARANGE: {
        LLVMValueRef base[GP_MAX_RANK], idx[GP_MAX_RANK];
        cg_thread_base(c, &g, base);
        for (int i = 0; i < g.nregs; i++) {
            cg_reg_index(c, &g, base, i, idx);
            t->r[i] = LLVMBuildAdd(c->b, idx[0], cg_i32(c, op->attr[0]), "");
        }
        return true;
    }
    case IR_BROADCAST:
        return lower_broadcast(c, op, t, &g);
    case IR_SPLAT: case IR_EXPAND_DIMS: case IR_TRANS: {
        CgTile *src = cg_get(c, op->args[0]);
        if (op->op != IR_SPLAT && op->args[0]->type.rank > 0 && src->n != g.nregs) {
            INTERNAL_ERROR("codegen: %s changes the register count (%d -> %d)", ir_op_info[op->op].name,
                           src->n, g.nregs);
            return false;
        }
        for (int i = 0; i < g.nregs; i++) t->r[i] = src->r[op->args[0]->type.rank == 0 ? 0 : i];
        return true;
    }
    default:
        INTERNAL_ERROR("codegen: '%s' is not a shape op", ir_op_info[op->op].name);
        return false;
    }
}
