/* cg_context.c — the lowering context: cached LLVM types, value map, thread
 * ids, the runtime form of the layout index arithmetic, scratch SRAM and
 * scalar conversions shared by every op family.
 *
 * Invariant: the runtime index of a register (cg_reg_index) is the exact LLVM
 * image of gp_geom_index in layout.c, which the unit tests check on the CPU.
 */
#include "cg_internal.h"

#include <stdio.h>
#include <string.h>

LLVMTypeRef cg_type(CgCtx *c, IrElem e)
{
    switch (e) {
    case IR_I1: return c->t_i1;
    case IR_I8: case IR_U8: case IR_F8E4M3: return c->t_i8; /* e4m3: its bits, converted by cvt (below) */
    case IR_I16: case IR_U16: return c->t_i16;
    case IR_I32: case IR_U32: return c->t_i32;
    case IR_I64: case IR_U64: return c->t_i64;
    case IR_F16: return c->t_f16;
    case IR_BF16: return c->t_bf16;
    case IR_F32: return c->t_f32;
    case IR_F64: return c->t_f64;
    case IR_PTR: return c->t_gptr;
    default: return c->t_i32;
    }
}

LLVMTypeRef cg_mem_type(CgCtx *c, IrElem e) { return e == IR_I1 ? c->t_i8 : cg_type(c, e); }

LLVMValueRef cg_i32(CgCtx *c, int64_t v) { return LLVMConstInt(c->t_i32, (unsigned long long)v, 1); }
LLVMValueRef cg_i64(CgCtx *c, int64_t v) { return LLVMConstInt(c->t_i64, (unsigned long long)v, 1); }

LLVMValueRef cg_call(CgCtx *c, const char *name, LLVMTypeRef ret, int n, LLVMTypeRef *ptys,
                     LLVMValueRef *args)
{
    LLVMTypeRef ft = LLVMFunctionType(ret, ptys, (unsigned)n, 0);
    LLVMValueRef fn = LLVMGetNamedFunction(c->mod, name);
    if (!fn) fn = LLVMAddFunction(c->mod, name, ft);
    return LLVMBuildCall2(c->b, ft, fn, args, (unsigned)n, "");
}

LLVMValueRef cg_asm(CgCtx *c, LLVMTypeRef ret, const char *text, const char *cons, int n,
                    LLVMValueRef *args, bool side_effects)
{
    LLVMTypeRef small[16], *ptys = n <= 16 ? small : ARENA_ARRAY(c->arena, LLVMTypeRef, n);
    for (int i = 0; i < n; i++) ptys[i] = LLVMTypeOf(args[i]);
    LLVMTypeRef ft = LLVMFunctionType(ret, ptys, (unsigned)n, 0);
    LLVMValueRef a = LLVMGetInlineAsm(ft, text, strlen(text), cons, strlen(cons), side_effects, 0,
                                      LLVMInlineAsmDialectATT, 0);
    LLVMValueRef call = LLVMBuildCall2(c->b, ft, a, args, (unsigned)n, "");
    /* LLVM 19's instruction selection asks the DAG for the node of each asm call's !srcloc
     * (none: null) and, per perf, never finds the one it made for the previous call: those
     * nodes pile up in one bucket of the DAG's CSE map, walked by every lookup that lands
     * there (SDNode::Profile under getMDNode in visitInlineAsm, and DAGCombine's lookups),
     * so a block's selection grows with the square of its asm calls. A score_mod of 2,000
     * tanh lines (128,000 tanh.approx calls in the dK/dV kernel's key loop, one block) took
     * 206 s to PTX. A distinct !srcloc per call spreads the nodes over the buckets. It only
     * locates inline-asm diagnostics: the PTX is the same (every kernel of
     * test_e2e_ptx_hashes with it on all calls), but to leave small kernels' IR exactly as
     * it was it starts past CG_ASM_SRCLOC_FROM calls of a function; the quadratic part
     * below that is milliseconds. */
    if (++c->asm_calls > CG_ASM_SRCLOC_FROM) {
        LLVMMetadataRef id = LLVMValueAsMetadata(cg_i64(c, c->asm_calls));
        LLVMValueRef loc = LLVMMetadataAsValue(c->ctx, LLVMMDNodeInContext2(c->ctx, &id, 1));
        LLVMSetMetadata(call, LLVMGetMDKindIDInContext(c->ctx, "srcloc", 6), loc);
    }
    return call;
}


LLVMBasicBlockRef cg_block(CgCtx *c, const char *what)
{
    char name[64];
    snprintf(name, sizeof name, "%s%d", what, c->name_counter++);
    return LLVMAppendBasicBlockInContext(c->ctx, c->fn, name);
}

CgTile *cg_get(CgCtx *c, const IrValue *v)
{
    CgTile *t = &c->vals[v->id];
    if (!t->r) {
        if (!c->failed) INTERNAL_ERROR("codegen: value %%%d used before it was lowered", v->id);
        c->failed = true;
        /* Hand back something well-formed so callers need no NULL checks. */
        int n = 1;
        GpGeom g;
        if (v->type.rank && cg_geom_of(c, v, &g)) n = g.nregs;
        t->r = ARENA_ARRAY(c->arena, LLVMValueRef, n);
        for (int i = 0; i < n; i++) t->r[i] = LLVMGetUndef(cg_type(c, (IrElem)v->type.elem));
        t->n = n;
    }
    return t;
}

CgTile *cg_set(CgCtx *c, const IrValue *v, int n)
{
    CgTile *t = &c->vals[v->id];
    t->r = ARENA_ARRAY(c->arena, LLVMValueRef, n);
    t->n = n;
    return t;
}

bool cg_geom_of(CgCtx *c, const IrValue *v, GpGeom *g)
{
    if (v->type.rank == 0) {
        memset(g, 0, sizeof *g);
        g->nregs = 1;
        return true;
    }
    if (!gp_geom(c->f, v->layout, v->type, g)) {
        if (!c->failed) INTERNAL_ERROR("codegen: value %%%d has no usable layout", v->id);
        c->failed = true;
        memset(g, 0, sizeof *g);
        g->nregs = 1;
        return false;
    }
    return true;
}

void cg_thread_base(CgCtx *c, const GpGeom *g, LLVMValueRef *base)
{
    for (int d = 0; d < g->rank; d++) {
        LLVMValueRef ld = LLVMBuildLShr(c->b, c->lane, cg_i32(c, sup_ilog2(g->lane_stride[d])), "");
        ld = LLVMBuildAnd(c->b, ld, cg_i32(c, g->tpw[d] - 1), "");
        LLVMValueRef wd = LLVMBuildLShr(c->b, c->warp, cg_i32(c, sup_ilog2(g->warp_stride[d])), "");
        wd = LLVMBuildAnd(c->b, wd, cg_i32(c, g->wpc[d] - 1), "");
        LLVMValueRef b = LLVMBuildMul(c->b, wd, cg_i32(c, g->spt[d] * g->tpw[d] * g->rpw[d]), "");
        base[d] = LLVMBuildAdd(c->b, b, LLVMBuildMul(c->b, ld, cg_i32(c, g->spt[d]), ""), "");
    }
}

void cg_reg_index(CgCtx *c, const GpGeom *g, LLVMValueRef *base, int reg, LLVMValueRef *idx)
{
    int rd[GP_MAX_RANK];
    gp_geom_reg_dims(g, reg, rd);
    for (int i = 0; i < g->vrank; i++) {
        int d = g->vdims[i];
        LLVMValueRef x = LLVMBuildAdd(c->b, base[d], cg_i32(c, gp_geom_const_part(g, d, rd[d])), "");
        idx[i] = LLVMBuildAnd(c->b, x, cg_i32(c, g->shape[d] - 1), "");
    }
}

LLVMValueRef cg_reg_owner(CgCtx *c, const GpGeom *g, LLVMValueRef *base, int reg)
{
    int rd[GP_MAX_RANK];
    gp_geom_reg_dims(g, reg, rd);
    LLVMValueRef ok = LLVMConstInt(c->t_i1, 1, 0);
    if (g->warp_copies) { /* warps whose coordinates repeat another warp's hold copies */
        LLVMValueRef w = cg_i32(c, 0);
        for (int d = 0; d < g->rank; d++) {
            LLVMValueRef wd = LLVMBuildLShr(c->b, c->warp, cg_i32(c, sup_ilog2(g->warp_stride[d])), "");
            wd = LLVMBuildAnd(c->b, wd, cg_i32(c, g->wpc[d] - 1), "");
            w = LLVMBuildAdd(c->b, w, LLVMBuildMul(c->b, wd, cg_i32(c, g->warp_stride[d]), ""), "");
        }
        ok = LLVMBuildICmp(c->b, LLVMIntEQ, w, c->warp, "");
    }
    for (int d = 0; d < g->rank; d++) {
        if (g->shape[d] >= g->cta[d]) continue;
        LLVMValueRef x = LLVMBuildAdd(c->b, base[d], cg_i32(c, gp_geom_const_part(g, d, rd[d])), "");
        LLVMValueRef in = LLVMBuildICmp(c->b, LLVMIntULT, x, cg_i32(c, g->shape[d]), "");
        ok = LLVMBuildAnd(c->b, ok, in, "");
    }
    return ok;
}

LLVMValueRef cg_flat_index(CgCtx *c, IrType t, LLVMValueRef *idx)
{
    LLVMValueRef flat = cg_i32(c, 0);
    int stride = 1;
    for (int i = t.rank - 1; i >= 0; i--) {
        flat = LLVMBuildAdd(c->b, flat, LLVMBuildMul(c->b, idx[i], cg_i32(c, stride), ""), "");
        stride *= t.shape[i];
    }
    return flat;
}

LLVMValueRef cg_smem_ptr_abs(CgCtx *c, LLVMValueRef byte_off)
{
    return LLVMBuildGEP2(c->b, c->t_i8, c->smem, &byte_off, 1, "");
}

LLVMValueRef cg_smem_ptr(CgCtx *c, LLVMValueRef byte_off)
{
    if (c->smem_base) byte_off = LLVMBuildAdd(c->b, byte_off, cg_i32(c, c->smem_base), "");
    return cg_smem_ptr_abs(c, byte_off);
}

/* ---- barriers where SRAM hazards are (Triton's Membar idea) ----
 * Lowering runs in program order, so the ranges touched since the last
 * barrier are known when an op starts using its buffer: a barrier is needed
 * only if one of them overlaps (another thread may still read what this op
 * is about to overwrite, or write what it reads). Loops and branches merge
 * conservatively (cg_smem_pending_span). Each op's own write -> barrier ->
 * read sequence keeps its inner barrier. */
static bool overlaps_pending(const CgCtx *c, CgRange r)
{
    for (int i = 0; i < c->npending; i++)
        if (c->pending[i].lo < r.hi && r.lo < c->pending[i].hi) return true;
    return false;
}

void cg_smem_pending_add(CgCtx *c, int lo, int hi)
{
    if (lo >= hi) return;
    for (int i = 0; i < c->npending; i++)
        if (c->pending[i].lo <= lo && hi <= c->pending[i].hi) return;
    if (c->npending == CG_MAX_PENDING) { /* too many: merge everything into one range */
        int l = lo, h = hi;
        for (int i = 0; i < c->npending; i++) {
            if (c->pending[i].lo < l) l = c->pending[i].lo;
            if (c->pending[i].hi > h) h = c->pending[i].hi;
        }
        c->npending = 0;
        lo = l, hi = h;
    }
    c->pending[c->npending++] = (CgRange){lo, hi};
}

/* After a barrier only the current op's own buffer is still being accessed. */
static void barrier_passed(CgCtx *c)
{
    c->npending = 0;
    if (c->cur.lo >= 0) cg_smem_pending_add(c, c->cur.lo, c->cur.hi);
}

void cg_barrier_cta(CgCtx *c)
{
    cg_call(c, "llvm.nvvm.barrier0", c->t_void, 0, NULL, NULL);
    barrier_passed(c);
}

void cg_barrier(CgCtx *c)
{
    if (c->ws_warps) cg_ws_barrier(c);   /* warp_spec: the consumers only (cg_warp_spec.c) */
    else cg_call(c, "llvm.nvvm.barrier0", c->t_void, 0, NULL, NULL);
    barrier_passed(c);
}

void cg_smem_pending_span(CgCtx *c, const IrOp *region_op, bool with_stages)
{
    const GpTcState *tc = c->tc;
    const GpSpan *sp = NULL;
    for (int i = 0; tc && i < tc->spans.len; i++)
        if (((const GpSpan *)tc->spans.data[i])->op == region_op) sp = tc->spans.data[i];
    if (!sp) return;
    for (int i = 0; i < tc->bufs.len; i++) {
        const GpSmemBuf *b = tc->bufs.data[i];
        if (b->start > sp->start && b->end < sp->end) cg_smem_pending_add(c, b->offset, b->offset + b->bytes);
    }
    const GpPipeLoop *pl = with_stages ? gp_pipeline_of_loop(tc, region_op) : NULL;
    for (int i = 0; pl && i < pl->nloads; i++)
        if (pl->loads[i].buf) cg_smem_pending_add(c, pl->loads[i].buf->offset, pl->loads[i].buf->offset + pl->loads[i].buf->bytes);
    if (pl && pl->mbar) cg_smem_pending_add(c, (int)pl->mbar->offset, (int)(pl->mbar->offset + pl->mbar->bytes));
}

LLVMValueRef cg_smem_begin(CgCtx *c, const char *what, const IrValue *v, int bytes)
{
    const GpTcState *tc = c->tc;
    int idx = tc && v && v->id < tc->nids ? tc->buf_of[v->id] : -1;
    const GpSmemBuf *b = idx >= 0 ? tc->bufs.data[idx] : NULL;
    if (!b || b->bytes < bytes) {
        INTERNAL_ERROR("codegen: no SRAM buffer of %d bytes planned for %s of %%%d", bytes, what, v ? v->id : -1);
        c->failed = true;
        return cg_i32(c, 0);
    }
    c->smem_base = b->offset;
    c->cur = (CgRange){b->offset, b->offset + b->bytes};
    if (overlaps_pending(c, c->cur)) cg_barrier(c);
    cg_smem_pending_add(c, c->cur.lo, c->cur.hi);
    return cg_i32(c, b->offset);
}

void cg_fail(CgCtx *c, const IrOp *op, const char *fmt, ...)
{
    if (c->failed) return;
    c->failed = true;
    va_list ap;
    va_start(ap, fmt);
    diag_vreport(c->diag, DIAG_USER, op && op->loc.line ? op->loc : c->f->loc, fmt, ap);
    va_end(ap);
}

/* f32 -> e4m3 (i8): cvt.rn.satfinite.e4m3x2.f32 (sm_89+, PTX 7.8) puts its
 * first source in the upper byte; the lower one is ours. The rounding and
 * saturation are fp16.c's f8e4m3_from_f64 (the interpreter's). */
static LLVMValueRef f32_to_e4m3(CgCtx *c, LLVMValueRef v)
{
    if (c->sm < 90) c->ptx81 = true;   /* the e4m3x2 cvts on sm_89 need PTX ISA 8.1 (sm_90: 7.8) */
    LLVMValueRef args[2] = {LLVMConstReal(c->t_f32, 0.0), v};
    LLVMValueRef p = cg_asm(c, c->t_i16, "cvt.rn.satfinite.e4m3x2.f32 $0, $1, $2;", "=h,f,f", 2, args, false);
    return LLVMBuildTrunc(c->b, p, c->t_i8, "");
}

/* e4m3 (i8) -> f32, exact: cvt.rn.f16x2.e4m3x2 (sm_89+) to f16, then f16 -> f32. */
static LLVMValueRef e4m3_to_f32(CgCtx *c, LLVMValueRef v)
{
    if (c->sm < 90) c->ptx81 = true;
    LLVMValueRef w = LLVMBuildZExt(c->b, v, c->t_i16, "");
    LLVMValueRef h2 = cg_asm(c, c->t_i32, "cvt.rn.f16x2.e4m3x2 $0, $1;", "=r,h", 1, &w, false);
    LLVMValueRef h = LLVMBuildBitCast(c->b, LLVMBuildTrunc(c->b, h2, c->t_i16, ""), c->t_f16, "");
    return LLVMBuildFPExt(c->b, h, c->t_f32, "");
}

/* f64 -> f32 with round-to-odd (truncate, then set the lowest bit when
 * inexact), so that the f32 -> e4m3 rounding after it is the one rounding of
 * the double (as fp16.c does for f16/bf16). */
static LLVMValueRef f64_to_f32_odd(CgCtx *c, LLVMValueRef d)
{
    LLVMValueRef f = cg_asm(c, c->t_f32, "cvt.rz.f32.f64 $0, $1;", "=f,d", 1, &d, false);
    LLVMValueRef inexact = LLVMBuildFCmp(c->b, LLVMRealONE, LLVMBuildFPExt(c->b, f, c->t_f64, ""), d, "");
    LLVMValueRef bits = LLVMBuildBitCast(c->b, f, c->t_i32, "");
    LLVMValueRef odd = LLVMBuildOr(c->b, bits, cg_i32(c, 1), "");
    return LLVMBuildBitCast(c->b, LLVMBuildSelect(c->b, inexact, odd, bits, ""), c->t_f32, "");
}

/* Casts from and to e4m3 go through f32, exactly: e4m3, f16, bf16 and every
 * integer up to 2^24 are f32 values, and anything past 448 saturates either
 * way; an f64 is rounded to odd first. */
static LLVMValueRef e4m3_convert(CgCtx *c, LLVMValueRef v, IrElem from, IrElem to)
{
    if (from == IR_F8E4M3) return cg_convert_scalar(c, e4m3_to_f32(c, v), IR_F32, to);
    if (from == IR_F64) v = f64_to_f32_odd(c, v);
    else if (ir_elem_is_int(from) && ir_elem_bits(from) > 24) {
        /* beyond 2^24 the value saturates anyway: clamp first, so the f32 is exact */
        LLVMTypeRef t = LLVMTypeOf(v);
        bool sgn = ir_elem_is_signed(from);
        LLVMValueRef hi = LLVMConstInt(t, 1024, 0), lo = LLVMConstInt(t, (unsigned long long)-1024, 1);
        v = LLVMBuildSelect(c->b, LLVMBuildICmp(c->b, sgn ? LLVMIntSGT : LLVMIntUGT, v, hi, ""), hi, v, "");
        if (sgn) v = LLVMBuildSelect(c->b, LLVMBuildICmp(c->b, LLVMIntSLT, v, lo, ""), lo, v, "");
        v = cg_convert_scalar(c, v, from, IR_F32);
    } else {
        v = cg_convert_scalar(c, v, from, IR_F32);
    }
    return f32_to_e4m3(c, v);
}

static LLVMValueRef float_to_float(CgCtx *c, LLVMValueRef v, IrElem from, IrElem to)
{
    if ((from == IR_F16 && to == IR_BF16) || (from == IR_BF16 && to == IR_F16)) {
        v = LLVMBuildFPExt(c->b, v, c->t_f32, "");
        from = IR_F32;
    }
    if (ir_elem_bits(to) > ir_elem_bits(from)) return LLVMBuildFPExt(c->b, v, cg_type(c, to), "");
    return LLVMBuildFPTrunc(c->b, v, cg_type(c, to), ""); /* cvt.rn: round to nearest even */
}

LLVMValueRef cg_convert_scalar(CgCtx *c, LLVMValueRef v, IrElem from, IrElem to)
{
    if (from == to) return v;
    if (from == IR_F8E4M3 || to == IR_F8E4M3) return e4m3_convert(c, v, from, to);
    LLVMTypeRef tt = cg_type(c, to);
    bool ff = ir_elem_is_float(from), tf = ir_elem_is_float(to);
    if (from == IR_PTR) return LLVMBuildPtrToInt(c->b, v, tt, "");
    if (to == IR_PTR) return LLVMBuildIntToPtr(c->b, v, tt, "");
    if (to == IR_I1) {
        if (ff) return LLVMBuildFCmp(c->b, LLVMRealUNE, v, LLVMConstReal(LLVMTypeOf(v), 0), "");
        return LLVMBuildICmp(c->b, LLVMIntNE, v, LLVMConstInt(LLVMTypeOf(v), 0, 0), "");
    }
    if (ff && tf) return float_to_float(c, v, from, to);
    if (ff) return ir_elem_is_signed(to) ? LLVMBuildFPToSI(c->b, v, tt, "") : LLVMBuildFPToUI(c->b, v, tt, "");
    bool sgn = ir_elem_is_signed(from);
    if (tf) return sgn ? LLVMBuildSIToFP(c->b, v, tt, "") : LLVMBuildUIToFP(c->b, v, tt, "");
    int fb = ir_elem_bits(from), tb = ir_elem_bits(to);
    if (tb > fb) return sgn ? LLVMBuildSExt(c->b, v, tt, "") : LLVMBuildZExt(c->b, v, tt, "");
    if (tb < fb) return LLVMBuildTrunc(c->b, v, tt, "");
    return v;
}
