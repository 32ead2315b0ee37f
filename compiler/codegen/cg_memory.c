/* cg_memory.c — load, store and atomic_add on global memory.
 *
 * Registers are visited in groups of `vec` (gp_mem_vec: what the layout's
 * contiguous run, the pointers' contiguity and alignment, the mask's
 * constancy and 16 bytes allow); a group is consecutive elements along the
 * layout's fastest dim, so one access of vec * elem bytes covers it. Slices
 * count too: the per-column vector of an MMA accumulator (the attention
 * backward's LSE and delta, [None, :] against S^T) holds pairs of adjacent
 * columns, one ld.global.v2 each. A load loads each element once per thread:
 * registers that repeat an element already loaded (the slice of an MMA
 * accumulator holds each column once per row repeat) copy it.
 *   - unmasked: plain LLVM loads/stores of <vec x T> with the proven alignment
 *     (NVPTX turns them into ld.global.v4.b32 and friends);
 *   - masked: predicated inline PTX, as Triton does, since that is what keeps
 *     the code branch-free:
 *         { .reg .pred p; setp.ne.b32 p, $4, 0;
 *           mov.b32 $0, $6; ... @p ld.global.v4.b32 {$0,$1,$2,$3}, [ $5 + 0 ]; }
 *     where the movs preload `other`, so masked-off lanes never touch memory.
 * Stores and atomics of replicated layouts (a tile smaller than the CTA) are
 * predicated on ownership so each element is written once; atomics are one
 * element at a time (atom.global.gpu.add, or red when the result is unused),
 * and their results are shared with the replicas through SRAM. On sm_90 an
 * f32 red whose result is unused (attention's dQ accumulation) takes the
 * vector forms like a store, `red.global.gpu.add.v4.f32 [p], {a, b, c, d}`
 * (and .v2), which need PTX ISA 8.1: the module is then emitted as 8.1
 * (CgCtx.ptx81), every other module keeps the target's 8.0.
 * Scalar memory ops: every thread loads; thread 0 alone stores / does atomics.
 * fence(): fence.acq_rel.gpu in every thread, then a CTA barrier.
 */
#include "cg_internal.h"

#include <stdio.h>
#include <string.h>

/* Registers per thread past which a store is inline PTX even when unmasked
 * (lower_store); no shipped kernel stores more than 128 a thread. */
#define CG_ASM_STORE_REGS 256

/* Integer/float type a register is kept as in memory (i1 -> i8, ptr -> i64). */
static LLVMTypeRef word_elem_type(CgCtx *c, IrElem e)
{
    if (e == IR_PTR) return c->t_i64;
    return cg_mem_type(c, e);
}

static LLVMValueRef to_mem(CgCtx *c, LLVMValueRef v, IrElem e)
{
    if (e == IR_I1) return LLVMBuildZExt(c->b, v, c->t_i8, "");
    if (e == IR_PTR) return LLVMBuildPtrToInt(c->b, v, c->t_i64, "");
    return v;
}

static LLVMValueRef from_mem(CgCtx *c, LLVMValueRef v, IrElem e)
{
    if (e == IR_I1) return LLVMBuildICmp(c->b, LLVMIntNE, v, LLVMConstInt(c->t_i8, 0, 0), "");
    if (e == IR_PTR) return LLVMBuildIntToPtr(c->b, v, c->t_gptr, "");
    return v;
}

typedef struct Words {
    int n;              /* number of words */
    int bits;           /* 32, 16 or 8 (8 is carried in a 16-bit register) */
    LLVMTypeRef t;      /* i32 or i16 */
    const char *cons;   /* "r" or "h" */
} Words;

static Words words_for(CgCtx *c, int bytes)
{
    Words w;
    if (bytes >= 4) { w.n = bytes / 4; w.bits = 32; w.t = c->t_i32; w.cons = "r"; }
    else { w.n = 1; w.bits = bytes * 8; w.t = c->t_i16; w.cons = "h"; }
    return w;
}

static void pack_words(CgCtx *c, LLVMValueRef *elems, int vec, IrElem e, Words w, LLVMValueRef *out)
{
    LLVMTypeRef et = word_elem_type(c, e);
    LLVMValueRef v = LLVMGetUndef(LLVMVectorType(et, (unsigned)vec));
    for (int i = 0; i < vec; i++) v = LLVMBuildInsertElement(c->b, v, to_mem(c, elems[i], e), cg_i32(c, i), "");
    if (w.bits == 8) {
        out[0] = LLVMBuildZExt(c->b, LLVMBuildBitCast(c->b, v, c->t_i8, ""), c->t_i16, "");
        return;
    }
    LLVMValueRef wv = LLVMBuildBitCast(c->b, v, LLVMVectorType(w.t, (unsigned)w.n), "");
    for (int i = 0; i < w.n; i++) out[i] = LLVMBuildExtractElement(c->b, wv, cg_i32(c, i), "");
}

static void unpack_words(CgCtx *c, LLVMValueRef *words, int vec, IrElem e, Words w, LLVMValueRef *out)
{
    LLVMTypeRef et = word_elem_type(c, e);
    LLVMValueRef v;
    if (w.bits == 8) {
        v = LLVMBuildBitCast(c->b, LLVMBuildTrunc(c->b, words[0], c->t_i8, ""), LLVMVectorType(et, 1), "");
    } else {
        LLVMValueRef wv = LLVMGetUndef(LLVMVectorType(w.t, (unsigned)w.n));
        for (int i = 0; i < w.n; i++) wv = LLVMBuildInsertElement(c->b, wv, words[i], cg_i32(c, i), "");
        v = LLVMBuildBitCast(c->b, wv, LLVMVectorType(et, (unsigned)vec), "");
    }
    for (int i = 0; i < vec; i++) out[i] = from_mem(c, LLVMBuildExtractElement(c->b, v, cg_i32(c, i), ""), e);
}

static const char *vec_suffix(int n) { return n == 4 ? ".v4" : n == 2 ? ".v2" : ""; }

/* "{$a, $b}" or "$a" for operands first..first+n-1. */
static void operand_list(StrBuf *sb, int first, int n)
{
    if (n > 1) sb_puts(sb, "{");
    for (int i = 0; i < n; i++) sb_printf(sb, "%s$%d", i ? ", " : "", first + i);
    if (n > 1) sb_puts(sb, "}");
}

static LLVMValueRef pred_i32(CgCtx *c, LLVMValueRef p) { return LLVMBuildZExt(c->b, p, c->t_i32, ""); }

static void masked_load(CgCtx *c, LLVMValueRef ptr, LLVMValueRef pred, LLVMValueRef *other, int vec, IrElem e,
                        LLVMValueRef *out)
{
    Words w = words_for(c, vec * gp_elem_bytes(e));
    LLVMValueRef ow[4], args[6];
    pack_words(c, other, vec, e, w, ow);
    StrBuf text, cons;
    sb_init(&text);
    sb_init(&cons);
    const char *wt = w.bits == 32 ? "b32" : "b16";
    sb_printf(&text, "{\n .reg .pred p;\n setp.ne.b32 p, $%d, 0;\n", w.n);
    for (int i = 0; i < w.n; i++) sb_printf(&text, " mov.%s $%d, $%d;\n", wt, i, w.n + 2 + i);
    sb_printf(&text, " @p ld.global%s.b%d ", vec_suffix(w.n), w.bits);
    operand_list(&text, 0, w.n);
    sb_printf(&text, ", [ $%d + 0 ];\n}", w.n + 1);
    for (int i = 0; i < w.n; i++) sb_printf(&cons, "=%s,", w.cons);
    sb_puts(&cons, "r,l");
    for (int i = 0; i < w.n; i++) sb_printf(&cons, ",%s", w.cons);
    args[0] = pred_i32(c, pred);
    args[1] = ptr;
    for (int i = 0; i < w.n; i++) args[2 + i] = ow[i];
    LLVMTypeRef rt = w.t;
    if (w.n > 1) {
        LLVMTypeRef f[4] = {w.t, w.t, w.t, w.t};
        rt = LLVMStructTypeInContext(c->ctx, f, (unsigned)w.n, 0);
    }
    LLVMValueRef r = cg_asm(c, rt, text.data, cons.data, 2 + w.n, args, true);
    LLVMValueRef words[4];
    for (int i = 0; i < w.n; i++) words[i] = w.n > 1 ? LLVMBuildExtractValue(c->b, r, (unsigned)i, "") : r;
    unpack_words(c, words, vec, e, w, out);
    sb_free(&text);
    sb_free(&cons);
}

/* A store as inline PTX, predicated on `pred` (NULL: always). */
static void asm_store(CgCtx *c, LLVMValueRef ptr, LLVMValueRef pred, LLVMValueRef *vals, int vec, IrElem e)
{
    Words w = words_for(c, vec * gp_elem_bytes(e));
    LLVMValueRef vw[4], args[6];
    pack_words(c, vals, vec, e, w, vw);
    StrBuf text, cons;
    sb_init(&text);
    sb_init(&cons);
    int n = 0;
    if (pred) {
        sb_printf(&text, "{\n .reg .pred p;\n setp.ne.b32 p, $0, 0;\n @p st.global%s.b%d [ $1 + 0 ], ",
                  vec_suffix(w.n), w.bits);
        sb_puts(&cons, "r,");
        args[n++] = pred_i32(c, pred);
    } else {
        sb_printf(&text, "st.global%s.b%d [ $0 + 0 ], ", vec_suffix(w.n), w.bits);
    }
    sb_puts(&cons, "l");
    args[n++] = ptr;
    operand_list(&text, n, w.n);
    sb_puts(&text, pred ? ";\n}" : ";");
    for (int i = 0; i < w.n; i++) sb_printf(&cons, ",%s", w.cons);
    for (int i = 0; i < w.n; i++) args[n++] = vw[i];
    cg_asm(c, c->t_void, text.data, cons.data, n, args, true);
    sb_free(&text);
    sb_free(&cons);
}

static void plain_load(CgCtx *c, LLVMValueRef ptr, int vec, IrElem e, LLVMValueRef *out)
{
    LLVMTypeRef et = word_elem_type(c, e);
    LLVMTypeRef t = vec > 1 ? LLVMVectorType(et, (unsigned)vec) : et;
    LLVMValueRef v = LLVMBuildLoad2(c->b, t, ptr, "");
    LLVMSetAlignment(v, (unsigned)(vec * gp_elem_bytes(e)));
    for (int i = 0; i < vec; i++)
        out[i] = from_mem(c, vec > 1 ? LLVMBuildExtractElement(c->b, v, cg_i32(c, i), "") : v, e);
}

static void plain_store(CgCtx *c, LLVMValueRef ptr, LLVMValueRef *vals, int vec, IrElem e)
{
    LLVMTypeRef et = word_elem_type(c, e);
    LLVMValueRef v;
    if (vec > 1) {
        v = LLVMGetUndef(LLVMVectorType(et, (unsigned)vec));
        for (int i = 0; i < vec; i++) v = LLVMBuildInsertElement(c->b, v, to_mem(c, vals[i], e), cg_i32(c, i), "");
    } else {
        v = to_mem(c, vals[0], e);
    }
    LLVMValueRef st = LLVMBuildStore(c->b, v, ptr);
    LLVMSetAlignment(st, (unsigned)(vec * gp_elem_bytes(e)));
}

static LLVMValueRef reg_of(CgCtx *c, const IrValue *v, int i)
{
    CgTile *t = cg_get(c, v);
    return v->type.rank == 0 ? t->r[0] : t->r[i];
}

static LLVMValueRef zero_of(CgCtx *c, IrElem e)
{
    LLVMTypeRef t = cg_type(c, e);
    return ir_elem_is_float(e) ? LLVMConstReal(t, 0) : e == IR_PTR ? LLVMConstNull(t) : LLVMConstInt(t, 0, 0);
}

static bool lower_load(CgCtx *c, IrOp *op)
{
    IrValue *res = op->res[0];
    IrElem e = (IrElem)res->type.elem;
    GpGeom g;
    cg_geom_of(c, res, &g);
    int vec = res->type.rank ? gp_mem_vec(c->f, c->axis, op) : 1;
    CgTile *t = cg_set(c, res, g.nregs);
    bool masked = op->nargs > 1 || c->load_guard;
    for (int i = 0; i < g.nregs; i += vec) {
        /* A group whose elements this thread already loaded (copies in one
         * thread: a slice of an MMA layout) takes those registers: its mask
         * and `other` are the same elements' too. Masked loads are asm that
         * LLVM would not merge. */
        int first = gp_geom_first_copy(&g, i);
        if (first != i && first % vec == 0) {
            for (int k = 0; k < vec; k++) t->r[i + k] = t->r[first + k];
            continue;
        }
        LLVMValueRef ptr = reg_of(c, op->args[0], i);
        if (!masked) {
            plain_load(c, ptr, vec, e, &t->r[i]);
            continue;
        }
        LLVMValueRef other[16];
        for (int k = 0; k < vec; k++) other[k] = op->nargs > 2 ? reg_of(c, op->args[2], i + k) : zero_of(c, e);
        LLVMValueRef m = op->nargs > 1 ? reg_of(c, op->args[1], i) : NULL;
        if (c->load_guard) m = m ? LLVMBuildAnd(c->b, m, c->load_guard, "") : c->load_guard;
        masked_load(c, ptr, m, other, vec, e, &t->r[i]);
    }
    return true;
}

/* i1 "this thread writes register i": mask, ownership, thread 0 for scalars. */
static LLVMValueRef write_pred(CgCtx *c, IrOp *op, int mask_idx, const GpGeom *g, LLVMValueRef *base, int i)
{
    LLVMValueRef p = op->nargs > mask_idx ? reg_of(c, op->args[mask_idx], i) : NULL;
    LLVMValueRef own = NULL;
    if (op->args[0]->type.rank == 0) own = LLVMBuildICmp(c->b, LLVMIntEQ, c->tid, cg_i32(c, 0), "");
    else if (gp_geom_replicated(g)) own = cg_reg_owner(c, g, base, i);
    if (p && own) return LLVMBuildAnd(c->b, p, own, "");
    return p ? p : own;
}

static bool lower_store(CgCtx *c, IrOp *op)
{
    IrValue *ptrs = op->args[0], *val = op->args[1];
    IrElem e = (IrElem)ptrs->type.pointee;
    GpGeom g;
    cg_geom_of(c, ptrs, &g);
    LLVMValueRef base[GP_MAX_RANK];
    if (ptrs->type.rank) cg_thread_base(c, &g, base);
    int vec = ptrs->type.rank ? gp_mem_vec(c->f, c->axis, op) : 1;
    /* Many stores per thread are inline PTX even unmasked: LLVM's instruction
     * selection is quadratic in the plain stores of one block ([256, 256] f32
     * on 4 warps, 512 stores a thread: 70+ s), while an asm store is one
     * opaque node. Below the threshold (every shipped kernel) plain stores
     * let LLVM fold addresses and merge. */
    bool asm_always = g.nregs > CG_ASM_STORE_REGS;
    for (int i = 0; i < g.nregs; i += vec) {
        LLVMValueRef vals[16];
        for (int k = 0; k < vec; k++) vals[k] = reg_of(c, val, i + k);
        LLVMValueRef p = write_pred(c, op, 2, &g, base, i);
        if (p || asm_always) asm_store(c, reg_of(c, ptrs, i), p, vals, vec, e);
        else plain_store(c, reg_of(c, ptrs, i), vals, vec, e);
    }
    return true;
}

typedef struct AtomKind { const char *ptx, *cons, *zero; int min_sm; } AtomKind;

static bool atom_kind(IrElem e, AtomKind *k)
{
    switch (e) {
    case IR_F32: *k = (AtomKind){"f32", "f", "0f00000000", 0}; return true;
    case IR_F64: *k = (AtomKind){"f64", "d", "0d0000000000000000", 0}; return true;
    case IR_I32: case IR_U32: *k = (AtomKind){"u32", "r", "0", 0}; return true;
    case IR_I64: case IR_U64: *k = (AtomKind){"u64", "l", "0", 0}; return true;
    case IR_F16: *k = (AtomKind){"noftz.f16", "h", "0", 70}; return true;
    case IR_BF16: *k = (AtomKind){"noftz.bf16", "h", "0", 90}; return true;
    default: return false;
    }
}

/* red of `vec` elements (their values in v[]) at ptr, predicated on pred:
 * scalar, or on sm_90 the .v2/.v4 f32 form (PTX ISA 8.1). */
static void red_vec(CgCtx *c, LLVMValueRef ptr, LLVMValueRef pred, LLVMValueRef *v, int vec, IrElem e,
                    const AtomKind *k)
{
    StrBuf text, cons;
    sb_init(&text);
    sb_init(&cons);
    LLVMValueRef args[6] = {pred_i32(c, pred), ptr};
    sb_printf(&text, "{\n .reg .pred p;\n setp.ne.b32 p, $0, 0;\n @p red.global.gpu.add%s.%s [ $1 + 0 ], ",
              vec_suffix(vec), k->ptx);
    operand_list(&text, 2, vec);
    sb_puts(&text, ";\n}");
    sb_puts(&cons, "r,l");
    bool half = e == IR_F16 || e == IR_BF16;
    for (int i = 0; i < vec; i++) {
        sb_printf(&cons, ",%s", k->cons);
        args[2 + i] = half ? LLVMBuildBitCast(c->b, v[i], c->t_i16, "") : v[i];
    }
    if (vec > 1) c->ptx81 = true;
    cg_asm(c, c->t_void, text.data, cons.data, 2 + vec, args, true);
    sb_free(&text);
    sb_free(&cons);
}

/* atom of one element: the old value */
static LLVMValueRef atomic_one(CgCtx *c, LLVMValueRef ptr, LLVMValueRef pred, LLVMValueRef v, IrElem e,
                               const AtomKind *k)
{
    bool half = e == IR_F16 || e == IR_BF16;
    if (half) v = LLVMBuildBitCast(c->b, v, c->t_i16, "");
    char text[256], cons[64];
    LLVMValueRef args[3] = {pred_i32(c, pred), ptr, v};
    snprintf(text, sizeof text,
             "{\n .reg .pred p;\n setp.ne.b32 p, $1, 0;\n mov.b%d $0, %s;\n @p atom.global.gpu.add.%s $0, [ $2 + 0 ], $3;\n}",
             ir_elem_bits(e), k->zero, k->ptx);
    snprintf(cons, sizeof cons, "=%s,r,l,%s", k->cons, k->cons);
    LLVMTypeRef rt = half ? c->t_i16 : cg_type(c, e);
    LLVMValueRef r = cg_asm(c, rt, text, cons, 3, args, true);
    return half ? LLVMBuildBitCast(c->b, r, cg_type(c, e), "") : r;
}

static bool lower_atomic(CgCtx *c, IrOp *op)
{
    IrValue *ptrs = op->args[0], *res = op->res[0];
    IrElem e = (IrElem)ptrs->type.pointee;
    AtomKind k;
    if (!atom_kind(e, &k) || c->sm < k.min_sm) {
        cg_fail(c, op, "atomic_add on %s is not supported on sm_%d", ir_elem_name(e), c->sm);
        return false;
    }
    bool want = c->uses[res->id] > 0;
    GpGeom g;
    cg_geom_of(c, res, &g);
    LLVMValueRef base[GP_MAX_RANK];
    if (ptrs->type.rank) cg_thread_base(c, &g, base);
    CgTile *t = cg_set(c, res, g.nregs);
    /* sm_90: an f32 red takes as many elements as a store would (16 bytes at most) */
    int vec = !want && c->sm >= 90 && e == IR_F32 && ptrs->type.rank ? gp_mem_vec_width(c->f, c->axis, op) : 1;
    for (int i = 0; i < g.nregs; i += vec) {
        LLVMValueRef p = write_pred(c, op, 2, &g, base, i);
        if (!p) p = LLVMConstInt(c->t_i1, 1, 0);
        if (want) {
            t->r[i] = atomic_one(c, reg_of(c, ptrs, i), p, reg_of(c, op->args[1], i), e, &k);
            continue;
        }
        LLVMValueRef v[4];
        for (int j = 0; j < vec; j++) v[j] = reg_of(c, op->args[1], i + j);
        red_vec(c, reg_of(c, ptrs, i), p, v, vec, e, &k);
        for (int j = 0; j < vec; j++) t->r[i + j] = LLVMGetUndef(cg_type(c, e));
    }
    bool shared = ptrs->type.rank == 0 || gp_geom_replicated(&g);
    if (!want || !shared) return true;
    /* Replicas (and, for scalars, threads other than 0) did not run the atomic:
     * hand them the owner's old value through SRAM. */
    cg_smem_begin(c, "atomic_add result", res, gp_atomic_scratch_bytes(c->f, op, c->uses));
    if (ptrs->type.rank == 0) {
        LLVMBasicBlockRef wr = cg_block(c, "atom_bcast"), join = cg_block(c, "atom_join");
        LLVMBuildCondBr(c->b, LLVMBuildICmp(c->b, LLVMIntEQ, c->tid, cg_i32(c, 0), ""), wr, join);
        LLVMPositionBuilderAtEnd(c->b, wr);
        LLVMBuildStore(c->b, t->r[0], cg_smem_ptr(c, cg_i32(c, 0)));
        LLVMBuildBr(c->b, join);
        LLVMPositionBuilderAtEnd(c->b, join);
        cg_barrier(c);
        t->r[0] = LLVMBuildLoad2(c->b, cg_type(c, e), cg_smem_ptr(c, cg_i32(c, 0)), "");
    } else {
        cg_tile_to_smem(c, res->type, t, res->layout, true, 0);
        cg_barrier(c);
        cg_tile_from_smem(c, res->type, res->layout, t, 0);
    }
    return true;
}

/* fence(): every thread orders its own global accesses at GPU scope
 * (fence.acq_rel.gpu: its earlier writes are performed before its later
 * accesses; an acquire side also drops stale L1 lines), then the CTA barrier
 * makes that hold for the whole program, so thread 0's atomic after the fence
 * publishes every thread's writes, and every thread's loads after a fence that
 * follows the atomic see what the other programs published. */
static bool lower_fence(CgCtx *c)
{
    cg_asm(c, c->t_void, "fence.acq_rel.gpu;", "~{memory}", 0, NULL, true);
    cg_barrier(c);
    return true;
}

bool cg_lower_memory(CgCtx *c, IrOp *op)
{
    switch (op->op) {
    case IR_LOAD: return lower_load(c, op);
    case IR_STORE: return lower_store(c, op);
    case IR_ATOMIC_ADD: return lower_atomic(c, op);
    case IR_FENCE: return lower_fence(c);
    default: return false;
    }
}
