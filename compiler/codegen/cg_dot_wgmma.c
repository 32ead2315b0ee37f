/* cg_dot_wgmma.c — dot on Hopper's warpgroup tensor cores (wgmma.mma_async,
 * sm_90a), its operands read from SRAM through matrix descriptors.
 *
 * When (else the dot goes to mma.sync, cg_dot_mma.c): the target is sm_90a
 * (GpTcState.wgmma); the dot is f16/bf16 -> f32 in the MMA C layout with every
 * warp along M (wm = num_warps, a multiple of 4; wn = 1) and M a multiple of
 * 16 * wm; B is a deferred operand tile (cg_mma_defer: a staged convert or a
 * pipelined load) stored as it is used (no cast on the way), whose rows are
 * whole 128-byte blocks; A is such a tile too, or in registers (P of
 * attention). N <= 256.
 *
 * FP8 (a dot marked wgmma.e4m3 by pass_accelerate_dot.c): e4m3 x e4m3 -> f32 as
 * wgmma ...m64nNk32.f32.e4m3.e4m3, k32 steps (32 bytes of K, as a k16 step of
 * f16: the same descriptors and offsets in bytes), both SRAM tiles K-major
 * (FP8 has no transpose operands; cg_dot_mma.c stores them so), a register A
 * packed from the accumulator layout four bytes a register (f8_a_frag) in the
 * K order gp_f8_kpos gives the tiles (docs/tensor_cores.md 4e).
 *
 * Why the existing layouts fit: wgmma.m64nNk16 gives each warp of a
 * warpgroup 16 accumulator rows, laid out per 8 columns as mma.m16n8k16's C
 * fragment, and its register A is mma's A fragment per warp. With wm =
 * num_warps, warp w owns the m16 tiles om * wm + w, so warpgroup g = w / 4
 * owns the 64 rows starting at 16 * (om * wm + 4g): one wgmma per (om, k16
 * step) per warpgroup, on the registers the mma.sync lowering uses. The
 * softmax and everything else around the dot are unchanged.
 *
 * SRAM: layout_mma.c's swizzled tiles (16-byte chunk ^ row % 8 within 128-byte
 * column blocks), 1024-byte aligned (pass_sram_alloc.c): every 8 rows x 128
 * bytes is one atom of wgmma's 128-byte swizzle. Descriptors (PTX ISA, matrix
 * descriptor format): K-major (K contiguous): start = the k step's block +
 * 128 B * first row + 32 B * (k step % 4), SBO = 1024 (8 rows), LBO unused;
 * MN-major (transposed): start = 16 rows * 128 B * k step, LBO = the column
 * block stride (rows * 128 B), SBO = 1024.
 *
 * Order: wgmma.fence; the wgmmas of every k16 step (each accumulator sums its
 * steps in order); commit; wait 0: synchronous per dot (the other CTA on the
 * SM fills the gaps) — or wait 1 for a dot marked wgmma.pending (a matmul's
 * k-loop, pass_pipeline.c: its group stays in flight into the next
 * iteration, whose wgmmas chain onto the same registers; the loop's exit
 * waits for the last one, cg_wgmma_wait_all). The registers a wgmma reads or writes pass through the
 * fence and the wait as tied asm operands, so LLVM can neither sink their
 * producers below the fence nor hoist their users above the wait. Tiles
 * written by st.shared or cp.async are made visible to wgmma's async proxy by
 * fence.proxy.async before the barrier that precedes the dot.
 *
 * Ping-pong (a dot with the `pingpong` attribute, pass_pingpong.c): bar.sync
 * on this warpgroup's barrier before the fence, bar.arrive on the next
 * warpgroup's between the commit and the wait (cg_pingpong.c).
 *
 * Example: attention, d = 128, 128 x 64 tile, 4 warps (one warpgroup):
 *   S = Q K^T:  2 (om) x 8 (k16) wgmma.m64n64k16, A and B from SRAM, K-major
 *   O += P V:   2 x 4 wgmma.m64n128k16, P from registers, V N-major (trans-b)
 */
#include "cg_internal.h"
#include "../gpuir/gpuir.h"

#include <stdio.h>
#include <string.h>

/* An operand tile in SRAM, as the descriptors see it. */
typedef struct WgTile {
    LLVMValueRef desc;  /* i64 descriptor of the tile's first byte (this warpgroup's rows for A) */
    GpSwizzle sw;
    bool k_major;
} WgTile;

/* ((x & 0x3FFFF) >> 4): the descriptor's 14-bit fields */
static uint64_t enc(int bytes) { return (uint64_t)((bytes & 0x3FFFF) >> 4); }

/* The deferred tile of dot operand `i` (A: i = 0), or false. `mn_rt`: runtime
 * MN offset (rows of A for this warpgroup), a multiple of 64. */
static bool wg_tile(CgCtx *c, const IrValue *v, bool is_a, LLVMValueRef mn_rt, int mn_step, WgTile *t)
{
    const CgLazyOperand *lz = c->lazy && c->lazy[v->id].base ? &c->lazy[v->id] : NULL;
    if (!lz || lz->stored != (IrElem)v->type.elem || v->type.rank != 2) return false;
    int fd = lz->fast_dim;
    t->sw = gp_swizzle_for(v->type.shape[1 - fd], v->type.shape[fd], gp_elem_bytes(lz->stored));
    if (!gp_wgmma_tile_ok(&t->sw)) return false;
    t->k_major = fd == (is_a ? 1 : 0);
    if (lz->stored == IR_F8E4M3 && !t->k_major) return false;   /* FP8 wgmma: K-major only */
    if (!t->k_major && v->type.shape[fd] > 64 && v->type.shape[fd] % 64) return false;
    /* mn_rt in steps of mn_step rows (B's column half of a warpgroup column:
     * K-major, 8-row atoms; MN-major, whole 128-byte column blocks) */
    if (mn_rt && mn_step % (t->k_major ? 8 : 64)) return false;
    LLVMValueRef addr = LLVMBuildPtrToInt(c->b, cg_smem_ptr_abs(c, lz->base), c->t_i32, "");
    if (mn_rt) { /* a multiple of mn_step rows: linear in the offset */
        int per = gp_wgmma_offset(&t->sw, t->k_major, 64, 0) / 64;
        addr = LLVMBuildAdd(c->b, addr, LLVMBuildMul(c->b, mn_rt, cg_i32(c, per), ""), "");
    }
    LLVMValueRef lo = LLVMBuildLShr(c->b, LLVMBuildAnd(c->b, addr, cg_i32(c, 0x3FFFF), ""), cg_i32(c, 4), "");
    int lbo, sbo;
    gp_wgmma_strides(&t->sw, t->k_major, &lbo, &sbo);
    uint64_t fixed = enc(lbo) << 16 | enc(sbo) << 32 | (uint64_t)1 << 62; /* 1: 128-byte swizzle */
    t->desc = LLVMBuildOr(c->b, LLVMBuildZExt(c->b, lo, c->t_i64, ""), LLVMConstInt(c->t_i64, fixed, 0), "desc");
    /* The reads happen at the dot: a later writer of these bytes must wait. */
    cg_smem_pending_add(c, lz->bytes.lo, lz->bytes.hi);
    return true;
}

static LLVMValueRef desc_at(CgCtx *c, const WgTile *t, int mn0, int kk)
{
    int off = gp_wgmma_offset(&t->sw, t->k_major, mn0, kk);
    if (!off) return t->desc;
    return LLVMBuildAdd(c->b, t->desc, LLVMConstInt(c->t_i64, (unsigned long long)(off >> 4), 0), "");
}

static char cons_of(CgCtx *c, LLVMValueRef v)
{
    LLVMTypeRef t = LLVMTypeOf(v);
    return t == c->t_f32 ? 'f' : t == c->t_i64 ? 'l' : 'r';
}

/* An asm statement through which the `nt` values `tied` pass ($0.. out, tied
 * to the inputs that follow), followed by `nx` plain inputs; the tied values
 * are replaced by the statement's outputs. */
static void tied_asm(CgCtx *c, const char *text, LLVMValueRef *tied, int nt, LLVMValueRef *extra, int nx)
{
    StrBuf cons;
    sb_init(&cons);
    LLVMTypeRef *ot = ARENA_ARRAY(c->arena, LLVMTypeRef, nt + 1);
    LLVMValueRef *args = ARENA_ARRAY(c->arena, LLVMValueRef, nt + nx + 1);
    for (int i = 0; i < nt; i++) {
        sb_printf(&cons, "%s=%c", i ? "," : "", cons_of(c, tied[i]));
        ot[i] = LLVMTypeOf(tied[i]);
        args[i] = tied[i];
    }
    for (int i = 0; i < nt; i++) sb_printf(&cons, ",%d", i);
    for (int i = 0; i < nx; i++) {
        sb_printf(&cons, ",%c", cons_of(c, extra[i]));
        args[nt + i] = extra[i];
    }
    sb_puts(&cons, ",~{memory}");
    LLVMTypeRef rt = LLVMStructTypeInContext(c->ctx, ot, (unsigned)nt, 0);
    LLVMValueRef r = cg_asm(c, rt, text, cons.data, nt + nx, args, true);
    for (int i = 0; i < nt; i++) tied[i] = LLVMBuildExtractValue(c->b, r, (unsigned)i, "");
    sb_free(&cons);
}

void cg_wgmma_wait_all(CgCtx *c, const IrValue *v)
{
    CgTile *t = cg_get(c, v);
    tied_asm(c, "wgmma.wait_group.sync.aligned 0;", t->r, t->n, NULL, 0);
}

void cg_fence_proxy_async(CgCtx *c)
{
    if (c->tc && c->tc->wgmma) cg_asm(c, c->t_void, "fence.proxy.async.shared::cta;", "~{memory}", 0, NULL, true);
}

/* Is `v` a constant zero tile (the accumulator of a plain dot)? */
static bool is_zero(const IrValue *v)
{
    const IrOp *d = v->def;
    return d && d->op == IR_CONST && d->fval == 0.0;
}

typedef struct WgDot {
    int N, reps, kt;        /* n (of one warpgroup column), m16 tiles per warp (= m64 blocks per warpgroup), k steps */
    bool bf, f8, a_regs, zero;   /* f8: e4m3 x e4m3, k32 steps (else f16/bf16, k16) */
    const char *ty;
    WgTile a, b;
    GpGeom ga, gc;
    LLVMValueRef *ar;       /* A in registers: the operand's registers */
    LLVMValueRef **d;       /* [rep][N / 2]: accumulator registers of each m64 block */
    LLVMValueRef *afrag;    /* [rep][kt][4]: packed A fragments (a_regs) */
} WgDot;

static void emit_one(CgCtx *c, WgDot *w, int r, int kk, int wm)
{
    int R = w->N / 2;
    StrBuf t;
    sb_init(&t);
    sb_printf(&t, "wgmma.mma_async.sync.aligned.m64n%dk%d.f32.%s.%s {", w->N, w->f8 ? 32 : 16, w->ty, w->ty);
    for (int i = 0; i < R; i++) sb_printf(&t, "%s$%d", i ? ", " : "", i);
    LLVMValueRef x[5];
    int nx = 0;
    if (w->a_regs) {
        sb_printf(&t, "}, {$%d, $%d, $%d, $%d}, ", 2 * R, 2 * R + 1, 2 * R + 2, 2 * R + 3);
        for (int j = 0; j < 4; j++) x[nx++] = w->afrag[(r * w->kt + kk) * 4 + j];
    } else {
        sb_printf(&t, "}, $%d, ", 2 * R);
        x[nx++] = desc_at(c, &w->a, 16 * r * wm, kk);
    }
    sb_printf(&t, "$%d, %d, 1, 1", 2 * R + nx, w->zero && kk == 0 ? 0 : 1);
    if (!w->f8 && !w->a_regs) sb_printf(&t, ", %d", w->a.k_major ? 0 : 1);
    if (!w->f8) sb_printf(&t, ", %d", w->b.k_major ? 0 : 1);   /* FP8 has no transpose operands */
    sb_puts(&t, ";");
    x[nx++] = desc_at(c, &w->b, 0, kk);
    tied_asm(c, t.data, w->d[r], R, x, nx);
    sb_free(&t);
}

/* Every register the dot's wgmmas use, in one list (fence and wait). */
static LLVMValueRef *all_regs(CgCtx *c, WgDot *w, bool with_a, int *n)
{
    int R = w->N / 2, na = with_a && w->a_regs ? w->reps * w->kt * 4 : 0;
    LLVMValueRef *v = ARENA_ARRAY(c->arena, LLVMValueRef, w->reps * R + na + 1);
    *n = 0;
    for (int r = 0; r < w->reps; r++)
        for (int i = 0; i < R; i++) v[(*n)++] = w->d[r][i];
    for (int i = 0; i < na; i++) v[(*n)++] = w->afrag[i];
    return v;
}

static void scatter_regs(WgDot *w, LLVMValueRef *v, bool with_a)
{
    int R = w->N / 2, n = 0;
    for (int r = 0; r < w->reps; r++)
        for (int i = 0; i < R; i++) w->d[r][i] = v[n++];
    for (int i = 0; with_a && w->a_regs && i < w->reps * w->kt * 4; i++) w->afrag[i] = v[n++];
}

/* A tile's descriptor through an opaque mov (an asm with side effects) at the
 * dot: each k step's descriptor is then derived from it there. Without it
 * LLVM hoists every k step's descriptor of a tile that a loop reads but does
 * not change (K and V of the dK/dV kernel) out of the loop, 16 k steps x 2
 * tiles of 64-bit values held across it: at head dim 256 on the split grid
 * ptxas spilled 388 bytes, 76 with the mov. Only the split grid takes it, so
 * every other kernel's PTX stays as it was. */
static void pin_desc(CgCtx *c, WgTile *t)
{
    LLVMValueRef a[1] = {t->desc};
    t->desc = cg_asm(c, c->t_i64, "mov.b64 $0, $1;", "=l,l", 1, a, true);
}

/* Shape and operand checks; fills w (no code for a dot that does not qualify
 * except the descriptors' arithmetic, which is dead then).
 *
 * Warpgroups along N too (wn > 1, #mma<C, wm, wn, rn>, pass_accelerate_dot.c):
 * the warps are (w % wm, w / wm); warpgroup column j = w / wm owns the columns
 * [j N / wn, (j + 1) N / wn) — its rn n8 tiles side by side, so N / wn = 8 rn
 * — and computes them with one m64n(N / wn) wgmma per m64 block and k16 step,
 * B's descriptor moved to its first column (rows for K-major B, column blocks
 * for MN-major). A is read whole by every column: its rows are those of
 * warpgroup (w % wm) / 4, from SRAM or from registers (A's layout is
 * replicated over warp_n). */
static bool qualify(CgCtx *c, IrOp *op, int wm, int wn, WgDot *w)
{
    IrValue *res = op->res[0], *A = op->args[0], *B = op->args[1];
    int W = c->f->sched.num_warps, N = res->type.shape[1];
    if (wm * wn != W || wm % 4 || res->type.elem != IR_F32 || A->type.elem != B->type.elem) return false;
    w->f8 = A->type.elem == IR_F8E4M3 && ir_attr_int(&op->attrs, IR_ATTR_WGMMA_E4M3, 0);
    if (A->type.elem != IR_F16 && A->type.elem != IR_BF16 && !w->f8) return false;
    if (N % wn || (wn > 1 && gp_mma_rn(c->f, res->layout) * 8 * wn != N)) return false;
    w->N = N / wn;
    w->reps = res->type.shape[0] / (16 * wm);
    w->kt = A->type.shape[1] / (w->f8 ? 32 : 16);
    if (w->N % 8 || w->N > 256 || w->reps < 1 || res->type.shape[0] % (16 * wm) || w->kt < 1) return false;
    w->bf = A->type.elem == IR_BF16;
    w->ty = w->f8 ? "e4m3" : w->bf ? "bf16" : "f16";
    w->zero = is_zero(op->args[2]);
    LLVMValueRef m_rt = NULL, n_rt = NULL; /* this warpgroup's first row of A, column of B */
    if (wn == 1) {
        m_rt = LLVMBuildMul(c->b, LLVMBuildUDiv(c->b, c->warp, cg_i32(c, 4), ""), cg_i32(c, 64), "");
    } else {
        n_rt = LLVMBuildMul(c->b, LLVMBuildUDiv(c->b, c->warp, cg_i32(c, wm), ""), cg_i32(c, w->N), "");
        if (wm > 4) /* else one warpgroup along M: every column reads A's first 64 rows */
            m_rt = LLVMBuildMul(c->b, LLVMBuildUDiv(c->b, LLVMBuildURem(c->b, c->warp, cg_i32(c, wm), ""), cg_i32(c, 4), ""),
                                cg_i32(c, 64), "");
    }
    if (!wg_tile(c, B, false, n_rt, w->N, &w->b)) return false;
    w->a_regs = !(c->lazy && c->lazy[A->id].base);
    if (!w->a_regs) {
        if (!wg_tile(c, A, true, m_rt, 64, &w->a)) return false;
        if (wn > 1) pin_desc(c, &w->a), pin_desc(c, &w->b);
        return true;
    }
    if (wn > 1) pin_desc(c, &w->b);
    if (!cg_mma_operand_geom(c, op, 0, GP_MMA_A, wm, wn, &w->ga)) return false;
    w->ar = cg_get(c, A)->r;
    return true;
}

/* The k32 A fragment of FP8 wgmma (m64 block r, k step kk) from an e4m3
 * operand in registers (the MMA A layout, whose element map is the C
 * layout's: P of attention). Register j holds row g + 8 (j & 1) and the
 * pairs (2t, 2t + 1) of n8 tiles 4 kk + 2 (j >> 1) and 4 kk + 2 (j >> 1) + 1,
 * bytes in that order (gp_f8_afrag_reg): the k positions 16 (j >> 1) + 4t +
 * {0..3} of wgmma's fragment hold the keys gp_f8_kpos maps there
 * (layout_mma.c), which is the order the B tile was stored in. */
static void f8_a_frag(CgCtx *c, const GpGeom *g, LLVMValueRef *r, int om, int kk, LLVMValueRef out[4])
{
    for (int j = 0; j < 4; j++) {
        LLVMValueRef v = LLVMGetUndef(LLVMVectorType(c->t_i8, 4));
        for (int b = 0; b < 4; b++) {
            int rd[2];
            gp_f8_afrag_reg(om, kk, j, b, rd);
            v = LLVMBuildInsertElement(c->b, v, r[gp_geom_reg_of(g, rd)], cg_i32(c, b), "");
        }
        out[j] = LLVMBuildBitCast(c->b, v, c->t_i32, "");
    }
}

bool cg_lower_dot_wgmma(CgCtx *c, IrOp *op)
{
    GpMmaFrag frag;
    int wm, wn;
    WgDot w;
    memset(&w, 0, sizeof w);
    if (!c->tc || !c->tc->wgmma) return false;
    if (!gp_layout_is_mma(c->f, op->res[0]->layout, &frag, &wm, &wn) || frag != GP_MMA_C) return false;
    if (!qualify(c, op, wm, wn, &w) || !cg_geom_of(c, op->res[0], &w.gc)) return false;
    CgTile *tc = cg_get(c, op->args[2]);
    CgTile *t = cg_set(c, op->res[0], w.gc.nregs);
    int R = w.N / 2;
    w.d = ARENA_ARRAY(c->arena, LLVMValueRef *, w.reps);
    for (int r = 0; r < w.reps; r++) {
        w.d[r] = ARENA_ARRAY(c->arena, LLVMValueRef, R);
        for (int on = 0; on < w.N / 8; on++)
            for (int i = 0; i < 4; i++) {
                int rd[2] = {r * 2 + (i >> 1), on * 2 + (i & 1)};
                w.d[r][on * 4 + i] = w.zero ? LLVMGetUndef(c->t_f32) : tc->r[gp_geom_reg_of(&w.gc, rd)];
            }
    }
    if (w.a_regs) {
        w.afrag = ARENA_ARRAY(c->arena, LLVMValueRef, w.reps * w.kt * 4);
        for (int r = 0; r < w.reps; r++)
            for (int kk = 0; kk < w.kt; kk++) {
                LLVMValueRef *f = &w.afrag[(r * w.kt + kk) * 4];
                if (w.f8) {
                    f8_a_frag(c, &w.ga, w.ar, r, kk, f);
                    continue;
                }
                cg_mma_a_frag(c, &w.ga, w.ar, r, kk, w.bf, f);
                for (int j = 0; j < 4; j++) f[j] = LLVMBuildBitCast(c->b, f[j], c->t_i32, "");
            }
    }
    int n;
    LLVMValueRef *v = all_regs(c, &w, false, &n), wg;
    /* wgmma.overlap (pass_dot_overlap.c): no wait at all; the next dot's
     * wait retires this group, the registers tied through it (below). */
    bool overlap = ir_attr_int(&op->attrs, IR_ATTR_MMA_OVERLAP, 0) == 1;
    CgTile *prev = c->wg_inflight && !overlap ? cg_get(c, c->wg_inflight) : NULL;
    /* ping-pong: wait for this warpgroup's turn; `release` hands it on in the commit's asm,
     * whose operands are the tied registers (this dot's and the retired group's, outputs
     * then inputs) and then wg: $2(n + retired) */
    const char *release = cg_pingpong_acquire(c, op, 2 * (n + (prev ? prev->n : 0)), &wg);
    v = all_regs(c, &w, true, &n);
    tied_asm(c, "wgmma.fence.sync.aligned;", v, n, NULL, 0);
    scatter_regs(&w, v, true);
    for (int kk = 0; kk < w.kt; kk++)
        for (int r = 0; r < w.reps; r++) emit_one(c, &w, r, kk, wm);
    /* wgmma.pending (pass_pipeline.c): this group stays in flight into the
     * next iteration, which chains its wgmmas onto the same registers
     * (ordered by the hardware for wgmmas of one shape); waiting for all but
     * one group completes the previous iteration's, whose stage slot the
     * next copies refill. The loop's exit waits for the last one. */
    bool pending = ir_attr_int(&op->attrs, IR_ATTR_MMA_PENDING, 0) == 1;
    v = all_regs(c, &w, false, &n);
    int nown = n;
    if (prev) { /* one list: this dot's registers, then those of the group it retires */
        LLVMValueRef *both = ARENA_ARRAY(c->arena, LLVMValueRef, n + prev->n + 1);
        memcpy(both, v, sizeof(LLVMValueRef) * (size_t)n);
        memcpy(both + n, prev->r, sizeof(LLVMValueRef) * (size_t)prev->n);
        v = both;
        n += prev->n;
    }
    const char *wait = overlap ? "" : pending ? "\n\twgmma.wait_group.sync.aligned 1;" : "\n\twgmma.wait_group.sync.aligned 0;";
    StrBuf asm_text;
    sb_init(&asm_text);
    if (release) /* issued: the next warpgroup's turn, while this one waits */
        sb_printf(&asm_text, "wgmma.commit_group.sync.aligned;\n\t%s%s", release, wait);
    else
        sb_printf(&asm_text, "wgmma.commit_group.sync.aligned;%s", wait);
    tied_asm(c, asm_text.data, v, n, release ? &wg : NULL, release ? 1 : 0);
    sb_free(&asm_text);
    if (prev) {
        memcpy(prev->r, v + nown, sizeof(LLVMValueRef) * (size_t)prev->n);
        c->wg_inflight = NULL;
    }
    scatter_regs(&w, v, false);
    for (int r = 0; r < w.reps; r++)
        for (int on = 0; on < w.N / 8; on++)
            for (int i = 0; i < 4; i++) {
                int rd[2] = {r * 2 + (i >> 1), on * 2 + (i & 1)};
                t->r[gp_geom_reg_of(&w.gc, rd)] = w.d[r][on * 4 + i];
            }
    if (overlap) c->wg_inflight = op->res[0];
    return true;
}

void cg_wgmma_retire(CgCtx *c)
{
    if (!c->wg_inflight) return;
    cg_wgmma_wait_all(c, c->wg_inflight);
    c->wg_inflight = NULL;
}
