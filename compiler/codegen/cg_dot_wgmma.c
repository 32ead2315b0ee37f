/* cg_dot_wgmma.c — dot on Hopper's warpgroup tensor cores (wgmma.mma_async,
 * sm_90a), its operands read from SRAM through matrix descriptors.
 *
 * When (else the dot goes to mma.sync, cg_dot_mma.c): the target is sm_90a
 * (CgTcState.wgmma); the dot is f16/bf16 -> f32 in the MMA C layout with every
 * warp along M (wm = num_warps, a multiple of 4; wn = 1) and M a multiple of
 * 16 * wm; B is a deferred operand tile (cg_mma_defer: a staged convert or a
 * pipelined load) stored as it is used (no cast on the way), whose rows are
 * whole 128-byte blocks; A is such a tile too, or in registers (P of
 * attention). N <= 256.
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
 * Order, in one asm statement per dot (emit_dot): wgmma.fence; the wgmmas of
 * every k16 step (each accumulator sums its steps in order); commit; wait 0:
 * synchronous per dot (the other CTA on the
 * SM fills the gaps) — or wait 1 for a dot marked wgmma.pending (a matmul's
 * k-loop, pass_pipeline.c: its group stays in flight into the next
 * iteration, whose wgmmas chain onto the same registers; the loop's exit
 * waits for the last one, cg_wgmma_wait_all). The registers a wgmma reads or
 * writes are the statement's operands (accumulators tied in and out), so LLVM
 * can neither sink their producers below the fence nor hoist their users
 * above the wait. Tiles
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
#include "cg_tc.h"

#include <stdio.h>
#include <string.h>

/* An operand tile in SRAM, as the descriptors see it. */
typedef struct WgTile {
    LLVMValueRef desc;  /* i64 descriptor of the tile's first byte (this warpgroup's rows for A) */
    CgSwizzle sw;
    bool k_major;
} WgTile;

/* ((x & 0x3FFFF) >> 4): the descriptor's 14-bit fields */
static uint64_t enc(int bytes) { return (uint64_t)((bytes & 0x3FFFF) >> 4); }

/* The deferred tile of dot operand `i` (A: i = 0), or false. `mn_rt`: runtime
 * MN offset (rows of A for this warpgroup), a multiple of 64. */
static bool wg_tile(CgCtx *c, const IrValue *v, bool is_a, LLVMValueRef mn_rt, WgTile *t)
{
    const CgLazyOperand *lz = c->lazy && c->lazy[v->id].base ? &c->lazy[v->id] : NULL;
    if (!lz || lz->stored != (IrElem)v->type.elem || v->type.rank != 2) return false;
    int fd = lz->fast_dim;
    t->sw = cg_swizzle_for(v->type.shape[1 - fd], v->type.shape[fd], 2);
    if (!cg_wgmma_tile_ok(&t->sw)) return false;
    t->k_major = fd == (is_a ? 1 : 0);
    if (!t->k_major && v->type.shape[fd] > 64 && v->type.shape[fd] % 64) return false;
    LLVMValueRef addr = LLVMBuildPtrToInt(c->b, cg_smem_ptr_abs(c, lz->base), c->t_i32, "");
    if (mn_rt) { /* a multiple of 64 rows: linear in the offset */
        int per = cg_wgmma_offset(&t->sw, t->k_major, 64, 0) / 64;
        addr = LLVMBuildAdd(c->b, addr, LLVMBuildMul(c->b, mn_rt, cg_i32(c, per), ""), "");
    }
    LLVMValueRef lo = LLVMBuildLShr(c->b, LLVMBuildAnd(c->b, addr, cg_i32(c, 0x3FFFF), ""), cg_i32(c, 4), "");
    int lbo, sbo;
    cg_wgmma_strides(&t->sw, t->k_major, &lbo, &sbo);
    uint64_t fixed = enc(lbo) << 16 | enc(sbo) << 32 | (uint64_t)1 << 62; /* 1: 128-byte swizzle */
    t->desc = LLVMBuildOr(c->b, LLVMBuildZExt(c->b, lo, c->t_i64, ""), LLVMConstInt(c->t_i64, fixed, 0), "desc");
    /* The reads happen at the dot: a later writer of these bytes must wait. */
    cg_smem_pending_add(c, lz->bytes.lo, lz->bytes.hi);
    return true;
}

/* The descriptor of the instruction at (mn0, kk): the tile's plus a constant
 * (16-byte units). Built as LLVM values, not inside the dot's asm statement:
 * LLVM then hoists the loop-invariant ones out of the key loop, and the
 * d = 256 forward ran 5% slower with per-step add.s64s inside the statement
 * (H200, N 1k/4k non-causal), although it spilled less. */
static LLVMValueRef desc_at(CgCtx *c, const WgTile *t, int mn0, int kk)
{
    int off = cg_wgmma_offset(&t->sw, t->k_major, mn0, kk);
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
    int N, reps, kt;        /* n, m16 tiles per warp (= m64 blocks per warpgroup), k16 steps */
    bool bf, a_regs, zero;
    const char *ty;
    WgTile a, b;
    CgGeom ga, gc;
    LLVMValueRef *ar;       /* A in registers: the operand's registers */
    LLVMValueRef **d;       /* [rep][N / 2]: accumulator registers of each m64 block */
    LLVMValueRef *afrag;    /* [rep][kt][4]: packed A fragments (a_regs) */
} WgDot;

/* The PTX of every wgmma of the dot, kk outer (each accumulator sums its
 * steps in order). Operand numbers: `acc` of the first accumulator of m64
 * block 0; `xa[r * kt + kk]` of A's descriptor at (r, kk), or of the first
 * of its four fragment registers (a_regs); `xb[kk]` of B's descriptor. One
 * asm statement for the whole dot instead of one per step, each of which
 * returned every accumulator (LLVM spent a quarter of the forward's IR on
 * their extractvalues). */
static void emit_steps(const WgDot *w, int acc, const int *xa, const int *xb, StrBuf *t)
{
    int R = w->N / 2;
    for (int kk = 0; kk < w->kt; kk++)
        for (int r = 0; r < w->reps; r++) {
            int ia = xa[r * w->kt + kk];
            sb_printf(t, "wgmma.mma_async.sync.aligned.m64n%dk16.f32.%s.%s {", w->N, w->ty, w->ty);
            for (int i = 0; i < R; i++) sb_printf(t, "%s$%d", i ? ", " : "", acc + r * R + i);
            if (w->a_regs)
                sb_printf(t, "}, {$%d, $%d, $%d, $%d}, ", ia, ia + 1, ia + 2, ia + 3);
            else
                sb_printf(t, "}, $%d, ", ia);
            sb_printf(t, "$%d, %d, 1, 1, ", xb[kk], w->zero && kk == 0 ? 0 : 1);
            if (!w->a_regs) sb_printf(t, "%d, ", w->a.k_major ? 0 : 1);
            sb_printf(t, "%d;\n\t", w->b.k_major ? 0 : 1);
        }
}

/* Operand number of `v` among the statement's extra inputs x[0..*nx) (the
 * first extra is operand `base`), appending it if new. */
static int extra_of(LLVMValueRef *x, int *nx, int base, LLVMValueRef v)
{
    for (int i = 0; i < *nx; i++)
        if (x[i] == v) return base + i;
    x[(*nx)++] = v;
    return base + *nx - 1;
}

/* The accumulators of every m64 block in one list, then `more` (the
 * registers of the group this dot retires). */
static LLVMValueRef *acc_regs(CgCtx *c, WgDot *w, const CgTile *more, int *n)
{
    int R = w->N / 2, nm = more ? more->n : 0;
    LLVMValueRef *v = ARENA_ARRAY(c->arena, LLVMValueRef, w->reps * R + nm + 1);
    *n = 0;
    for (int r = 0; r < w->reps; r++)
        for (int i = 0; i < R; i++) v[(*n)++] = w->d[r][i];
    for (int i = 0; i < nm; i++) v[(*n)++] = more->r[i];
    return v;
}

/* Shape and operand checks; fills w (no code for a dot that does not qualify
 * except the descriptors' arithmetic, which is dead then). */
static bool qualify(CgCtx *c, IrOp *op, int wm, WgDot *w)
{
    IrValue *res = op->res[0], *A = op->args[0], *B = op->args[1];
    int W = c->f->sched.num_warps;
    if (wm != W || W % 4 || res->type.elem != IR_F32 || A->type.elem != B->type.elem) return false;
    if (A->type.elem != IR_F16 && A->type.elem != IR_BF16) return false;
    w->N = res->type.shape[1];
    w->reps = res->type.shape[0] / (16 * wm);
    w->kt = A->type.shape[1] / 16;
    if (w->N % 8 || w->N > 256 || w->reps < 1 || res->type.shape[0] % (16 * wm) || w->kt < 1) return false;
    w->bf = A->type.elem == IR_BF16;
    w->ty = w->bf ? "bf16" : "f16";
    w->zero = is_zero(op->args[2]);
    LLVMValueRef wg = LLVMBuildUDiv(c->b, c->warp, cg_i32(c, 4), "");
    LLVMValueRef mn_rt = LLVMBuildMul(c->b, wg, cg_i32(c, 64), "");
    if (!wg_tile(c, B, false, NULL, &w->b)) return false;
    w->a_regs = !(c->lazy && c->lazy[A->id].base);
    if (!w->a_regs) return wg_tile(c, A, true, mn_rt, &w->a);
    if (!cg_mma_operand_geom(c, op, 0, CG_MMA_A, wm, 1, &w->ga)) return false;
    w->ar = cg_get(c, A)->r;
    return true;
}

/* The dot as one asm statement: wgmma.fence, every wgmma (emit_steps),
 * commit, the ping-pong release, the wait. Its operands: the accumulators
 * ($0.., tied to the inputs that follow them; the registers a retired
 * group's wait hands back come last), then wg (ping-pong), A's fragments or
 * descriptor, B's descriptor. Every register a wgmma reads or writes is an
 * operand, so LLVM can neither sink their producers below the fence nor
 * hoist their users above the wait. On return w->d holds the results. */
static void emit_dot(CgCtx *c, IrOp *op, WgDot *w, int wm)
{
    /* wgmma.pending (pass_pipeline.c): this group stays in flight into the
     * next iteration, which chains its wgmmas onto the same registers
     * (ordered by the hardware for wgmmas of one shape); waiting for all but
     * one group completes the previous iteration's, whose stage slot the
     * next copies refill. The loop's exit waits for the last one. */
    bool pending = ir_attr_int(&op->attrs, IR_ATTR_MMA_PENDING, 0) == 1;
    /* wgmma.overlap (pass_dot_overlap.c): no wait at all; the next dot's
     * wait retires this group, the registers tied through it (below). */
    bool overlap = ir_attr_int(&op->attrs, IR_ATTR_MMA_OVERLAP, 0) == 1;
    CgTile *prev = c->wg_inflight && !overlap ? cg_get(c, c->wg_inflight) : NULL;
    int n, nown = w->reps * (w->N / 2);
    LLVMValueRef *v = acc_regs(c, w, prev, &n), wg;
    /* ping-pong: wait for this warpgroup's turn; `release` hands it on ($2n: wg) */
    const char *release = cg_pingpong_acquire(c, op, 2 * n, &wg);
    int steps = w->reps * w->kt, nx = 0;
    LLVMValueRef *x = ARENA_ARRAY(c->arena, LLVMValueRef, 4 * steps + w->kt + 2);
    int *xa = ARENA_ARRAY(c->arena, int, steps + w->kt), *xb = xa + steps;
    if (release) x[nx++] = wg;
    for (int kk = 0; kk < w->kt; kk++)
        for (int r = 0; r < w->reps; r++) {
            int i = r * w->kt + kk;
            if (!w->a_regs) {
                xa[i] = extra_of(x, &nx, 2 * n, desc_at(c, &w->a, 16 * r * wm, kk));
                continue;
            }
            xa[i] = 2 * n + nx;
            for (int j = 0; j < 4; j++) x[nx++] = w->afrag[i * 4 + j];
        }
    for (int kk = 0; kk < w->kt; kk++) xb[kk] = extra_of(x, &nx, 2 * n, desc_at(c, &w->b, 0, kk));
    StrBuf t;
    sb_init(&t);
    sb_puts(&t, "wgmma.fence.sync.aligned;\n\t");
    emit_steps(w, 0, xa, xb, &t);
    sb_puts(&t, "wgmma.commit_group.sync.aligned;");
    if (release) /* issued: the next warpgroup's turn, while this one waits */
        sb_printf(&t, "\n\t%s", release);
    if (!overlap) sb_printf(&t, "\n\twgmma.wait_group.sync.aligned %d;", pending ? 1 : 0);
    tied_asm(c, t.data, v, n, x, nx);
    sb_free(&t);
    if (prev) {
        memcpy(prev->r, v + nown, sizeof(LLVMValueRef) * (size_t)prev->n);
        c->wg_inflight = NULL;
    }
    int R = w->N / 2;
    for (int r = 0; r < w->reps; r++)
        for (int i = 0; i < R; i++) w->d[r][i] = v[r * R + i];
    if (overlap) c->wg_inflight = op->res[0];
}

bool cg_lower_dot_wgmma(CgCtx *c, IrOp *op)
{
    CgMmaFrag frag;
    int wm, wn;
    WgDot w;
    memset(&w, 0, sizeof w);
    if (!c->tc || !c->tc->wgmma) return false;
    if (!cg_layout_is_mma(c->f, op->res[0]->layout, &frag, &wm, &wn) || frag != CG_MMA_C || wn != 1) return false;
    if (!qualify(c, op, wm, &w) || !cg_geom_of(c, op->res[0], &w.gc)) return false;
    CgTile *tc = cg_get(c, op->args[2]);
    CgTile *t = cg_set(c, op->res[0], w.gc.nregs);
    int R = w.N / 2;
    w.d = ARENA_ARRAY(c->arena, LLVMValueRef *, w.reps);
    for (int r = 0; r < w.reps; r++) {
        w.d[r] = ARENA_ARRAY(c->arena, LLVMValueRef, R);
        for (int on = 0; on < w.N / 8; on++)
            for (int i = 0; i < 4; i++) {
                int rd[2] = {r * 2 + (i >> 1), on * 2 + (i & 1)};
                w.d[r][on * 4 + i] = w.zero ? LLVMGetUndef(c->t_f32) : tc->r[cg_geom_reg_of(&w.gc, rd)];
            }
    }
    if (w.a_regs) {
        w.afrag = ARENA_ARRAY(c->arena, LLVMValueRef, w.reps * w.kt * 4);
        for (int r = 0; r < w.reps; r++)
            for (int kk = 0; kk < w.kt; kk++) {
                LLVMValueRef *f = &w.afrag[(r * w.kt + kk) * 4];
                cg_mma_a_frag(c, &w.ga, w.ar, r, kk, w.bf, f);
                for (int j = 0; j < 4; j++) f[j] = LLVMBuildBitCast(c->b, f[j], c->t_i32, "");
            }
    }
    emit_dot(c, op, &w, wm);
    for (int r = 0; r < w.reps; r++)
        for (int on = 0; on < w.N / 8; on++)
            for (int i = 0; i < 4; i++) {
                int rd[2] = {r * 2 + (i >> 1), on * 2 + (i & 1)};
                t->r[cg_geom_reg_of(&w.gc, rd)] = w.d[r][on * 4 + i];
            }
    return true;
}

void cg_wgmma_retire(CgCtx *c)
{
    if (!c->wg_inflight) return;
    cg_wgmma_wait_all(c, c->wg_inflight);
    c->wg_inflight = NULL;
}
