/* cg_dot_mma.c — dot on tensor cores (mma.sync.m16n8k16, f16/bf16 -> f32) and
 * the conversion that feeds it: registers -> swizzled SRAM -> ldmatrix.
 *
 * Layouts (layout_mma.c, pass_accelerate_dot.c): the result and accumulator
 * are in the MMA C layout with warps wm x wn (warp_m = warp % wm, warp_n =
 * warp / wm); A in the A-operand layout (rows as C, warps replicated over
 * warp_n), B in the B-operand layout (columns as C, replicated over warp_m).
 * Each warp then owns m16 tiles om*wm + warp_m (om < M / (16 wm)), n8 tiles
 * on*wn + warp_n (on < N / (8 wn); with #mma<C, .., rn> warp_n's rn tiles
 * side by side instead, warp_n * rn + on: ntile_col) and all k16 steps; the
 * dot is, per warp,
 *     for om, on, kk:  C[om,on] = mma(A[om,kk], B[kk,on], C[om,on])
 * with register indices taken from the layouts' geometry (gp_geom_reg_of),
 * so the fragment order of the PTX ISA table is the layout's order.
 *
 * Operand staging (convert_layout from any layout to an A/B-operand layout):
 * every thread stores its registers into a swizzled SRAM tile (16-byte chunks
 * XOR-permuted, layout_mma.c) whose contiguous dim ("memcol") is the source
 * layout's fastest dim, so the stores stay vectorised; a barrier; then each
 * warp loads its fragments with ldmatrix.x4 (x2 for the last odd k16 step of
 * B), .trans when the tile's contiguous dim is not K. The pipelined loads of
 * cg_pipeline.c fill the same kind of tile with cp.async and reuse the
 * ldmatrix half (cg_mma_ldmatrix_tile).
 *
 * Example: dot(a: 64x32 f16, b: 32x64 f16, acc: 64x64 f32), 4 warps, wm = 4:
 * each warp computes rows 16*warp.. (one m16 tile), all 8 n8 tiles, 2 k16
 * steps: 16 mma.sync; A is loaded with 2 ldmatrix.x4, B with 8 (x4 covers
 * k32 x n8).
 */
#include "cg_internal.h"
#include "../gpuir/gpuir.h"

#include <stdio.h>
#include <string.h>

/* ---- helpers ---- */
static LLVMValueRef lshr(CgCtx *c, LLVMValueRef v, int s) { return LLVMBuildLShr(c->b, v, cg_i32(c, s), ""); }
static LLVMValueRef and_(CgCtx *c, LLVMValueRef v, int m) { return LLVMBuildAnd(c->b, v, cg_i32(c, m), ""); }
static LLVMValueRef add(CgCtx *c, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildAdd(c->b, a, b, ""); }
static LLVMValueRef mul(CgCtx *c, LLVMValueRef v, int m) { return LLVMBuildMul(c->b, v, cg_i32(c, m), ""); }

/* Runtime element offset of (r, col) in a swizzled tile; col % vec == 0 for
 * the chunk starts this is used with, else the in-chunk part is added. */
LLVMValueRef cg_swizzle_offset_ir(CgCtx *c, const GpSwizzle *s, LLVMValueRef r, LLVMValueRef col)
{
    LLVMValueRef blk = cg_i32(c, s->blk);
    LLVMValueRef cin = s->blk == s->cols ? col : LLVMBuildURem(c->b, col, blk, "");
    LLVMValueRef chunk = LLVMBuildUDiv(c->b, cin, cg_i32(c, s->vec), "");
    LLVMValueRef phase = and_(c, LLVMBuildUDiv(c->b, r, cg_i32(c, s->per_phase), ""), s->max_phase - 1);
    chunk = LLVMBuildXor(c->b, chunk, phase, "");
    LLVMValueRef in = LLVMBuildURem(c->b, cin, cg_i32(c, s->vec), "");
    LLVMValueRef off = add(c, add(c, mul(c, r, s->blk), mul(c, chunk, s->vec)), in);
    if (s->blk == s->cols) return off;
    return add(c, off, mul(c, LLVMBuildUDiv(c->b, col, blk, ""), s->rows * s->blk));
}

/* The tile's stored shape: memrow/memcol dims of the [R, C] operand value. */
typedef struct TileShape {
    int mc_dim;        /* value dim that is contiguous in SRAM (memcol) */
    int mr_dim;
    int rows, cols;    /* memrows, memcols */
    bool k_contig;
    bool kperm;        /* e4m3 (FP8 wgmma): K stored in gp_f8_kpos order */
    GpSwizzle sw;
} TileShape;

static TileShape tile_shape(IrType t, GpMmaFrag frag, int fast_dim)
{
    TileShape ts;
    ts.mc_dim = fast_dim;
    ts.mr_dim = 1 - fast_dim;
    ts.rows = t.shape[ts.mr_dim];
    ts.cols = t.shape[ts.mc_dim];
    int kdim = frag == GP_MMA_A ? 1 : 0;
    ts.k_contig = fast_dim == kdim;
    ts.kperm = t.elem == IR_F8E4M3;
    ts.sw = gp_swizzle_for(ts.rows, ts.cols, gp_elem_bytes((IrElem)t.elem));
    return ts;
}

/* gp_f8_kpos at run time: (k & ~15) | ((k >> 1) & 3) << 2 | ((k >> 3) & 1) << 1 | (k & 1) */
static LLVMValueRef f8_kpos_ir(CgCtx *c, LLVMValueRef k)
{
    LLVMValueRef hi = and_(c, k, ~15), t = LLVMBuildShl(c->b, and_(c, lshr(c, k, 1), 3), cg_i32(c, 2), "");
    LLVMValueRef a = LLVMBuildShl(c->b, and_(c, lshr(c, k, 3), 1), cg_i32(c, 1), "");
    return LLVMBuildOr(c->b, LLVMBuildOr(c->b, hi, t, ""), LLVMBuildOr(c->b, a, and_(c, k, 1), ""), "");
}

/* ---- the operand tile -> registers half (shared with pipelining) ---- */

/* Lane part of an ldmatrix row address (gp_ldmatrix_lane_row, at run time). */
static void lane_row(CgCtx *c, GpMmaFrag frag, bool kc, LLVMValueRef *dr, LLVMValueRef *dc)
{
    LLVMValueRef r = and_(c, c->lane, 7), m = lshr(c, c->lane, 3);
    if (frag == GP_MMA_A) {
        LLVMValueRef dm = mul(c, and_(c, m, 1), 8), dk = mul(c, lshr(c, m, 1), 8);
        *dr = add(c, r, kc ? dm : dk);
        *dc = kc ? dk : dm;
    } else if (kc) {
        *dr = r;
        *dc = mul(c, m, 8);
    } else {
        *dr = add(c, r, mul(c, m, 8));
        *dc = cg_i32(c, 0);
    }
}

static LLVMValueRef ldmatrix(CgCtx *c, LLVMValueRef ptr, int n, bool trans)
{
    char name[64];
    snprintf(name, sizeof name, "llvm.nvvm.ldmatrix.sync.aligned.m8n8.x%d%s.b16.p3", n, trans ? ".trans" : "");
    LLVMTypeRef el[4] = {c->t_i32, c->t_i32, c->t_i32, c->t_i32};
    LLVMTypeRef rt = LLVMStructTypeInContext(c->ctx, el, (unsigned)n, 0);
    return cg_call(c, name, rt, 1, &c->t_sptr, &ptr);
}

static void unpack2(CgCtx *c, LLVMValueRef w, LLVMTypeRef et, LLVMValueRef *lo, LLVMValueRef *hi)
{
    LLVMValueRef v = LLVMBuildBitCast(c->b, w, LLVMVectorType(et, 2), "");
    *lo = LLVMBuildExtractElement(c->b, v, cg_i32(c, 0), "");
    *hi = LLVMBuildExtractElement(c->b, v, cg_i32(c, 1), "");
}

/* Element offset (memrow, memcol) -> swizzled byte pointer at tile_base. */
static LLVMValueRef tile_ptr(CgCtx *c, const TileShape *ts, LLVMValueRef tile_base, LLVMValueRef mr, LLVMValueRef mc)
{
    LLVMValueRef off = cg_swizzle_offset_ir(c, &ts->sw, mr, mc);
    off = add(c, tile_base, mul(c, off, ts->sw.elem_bytes));
    return cg_smem_ptr_abs(c, off);
}

/* The ldmatrix addresses of one tile, split into few registers and many
 * immediates. The swizzle repeats every 8 memrows (per_phase * max_phase == 8
 * for every tile gp_swizzle_for makes) and every max_phase chunks, so for a
 * corner (rc + xr, cc + xc) with rc % 8 == 0 and cc = cq + cr, cq a multiple
 * of max_phase chunks:
 *     swz(rc + xr, cc + xc) = rc * cols + cq + swz(xr, cr + xc)
 * The last term (lane and warp dependent, loop-invariant) takes at most
 * max_phase values per tile; the rest is an immediate. Computing every
 * address whole made LLVM hoist one invariant register per ldmatrix out of
 * the key loop (~70 registers at d = 128). */
typedef struct LdsmAddr {
    const TileShape *ts;
    LLVMValueRef base, xr, xc;
    LLVMValueRef part[8]; /* by cr / vec */
} LdsmAddr;

static LLVMValueRef ldsm_ptr(CgCtx *c, LdsmAddr *a, int rc, int cc)
{
    const GpSwizzle *sw = &a->ts->sw;
    int period = sw->vec * sw->max_phase, cr = cc % period;
    if (rc % 8 || sw->per_phase * sw->max_phase != 8 || cr / sw->vec >= 8)
        return tile_ptr(c, a->ts, a->base, add(c, cg_i32(c, rc), a->xr), add(c, cg_i32(c, cc), a->xc));
    LLVMValueRef *p = &a->part[cr / sw->vec];
    if (!*p) *p = mul(c, cg_swizzle_offset_ir(c, sw, a->xr, add(c, cg_i32(c, cr), a->xc)), sw->elem_bytes);
    int imm = gp_swizzle_offset(sw, rc, cc - cr) * sw->elem_bytes; /* no XOR at (8k, q * period) */
    return cg_smem_ptr_abs(c, add(c, add(c, a->base, *p), cg_i32(c, imm)));
}

/* Fragment halves as loaded (`stored`) -> the operand's element. */
typedef struct FragSink {
    LLVMValueRef *regs;
    IrElem stored, want;
} FragSink;

static void sink(CgCtx *c, const FragSink *s, int reg, LLVMValueRef v)
{
    s->regs[reg] = s->stored == s->want ? v : cg_convert_scalar(c, v, s->stored, s->want);
}

/* ldmatrix the A fragments of k16 steps [k_lo, k_hi) of every m16 tile. */
static void load_a(CgCtx *c, const TileShape *ts, LLVMValueRef base, const GpGeom *g, int wm, const FragSink *out,
                   int k_lo, int k_hi)
{
    int M = g->shape[0];
    LLVMTypeRef et = cg_type(c, out->stored);
    LLVMValueRef dr, dc, wmi = LLVMBuildURem(c->b, c->warp, cg_i32(c, wm), "");
    lane_row(c, GP_MMA_A, ts->k_contig, &dr, &dc);
    LLVMValueRef w16 = mul(c, wmi, 16);
    LdsmAddr ad = {ts, base, ts->k_contig ? add(c, w16, dr) : dr, ts->k_contig ? dc : add(c, w16, dc), {0}};
    for (int om = 0; om < M / (16 * wm); om++)
        for (int kk = k_lo; kk < k_hi; kk++) {
            int m0 = om * wm * 16, k0 = kk * 16;
            LLVMValueRef q = ldmatrix(c, ldsm_ptr(c, &ad, ts->k_contig ? m0 : k0, ts->k_contig ? k0 : m0), 4,
                                      !ts->k_contig);
            for (int j = 0; j < 4; j++) {
                LLVMValueRef lo, hi;
                unpack2(c, LLVMBuildExtractValue(c->b, q, (unsigned)j, ""), et, &lo, &hi);
                for (int h = 0; h < 2; h++) {
                    int i = 2 * j + h;
                    int rd[2] = {om * 2 + ((i >> 1) & 1), (kk * 2 + (i >> 2)) * 2 + (i & 1)};
                    sink(c, out, gp_geom_reg_of(g, rd), h ? hi : lo);
                }
            }
        }
}

/* The n matrices of one B ldmatrix into the operand's registers: matrix j
 * is k half j % 2 of k16 step kk + j / 2 (pairs: of step kk, n8 tile on + j / 2). */
static void sink_b(CgCtx *c, LLVMValueRef q, int n, const FragSink *out, const GpGeom *g, int kk, int on, bool pairs)
{
    LLVMTypeRef et = cg_type(c, out->stored);
    for (int j = 0; j < n; j++) {
        LLVMValueRef lo, hi;
        unpack2(c, LLVMBuildExtractValue(c->b, q, (unsigned)j, ""), et, &lo, &hi);
        for (int h = 0; h < 2; h++) {
            int i = (j & 1) * 2 + h, ks = pairs ? kk : kk + (j >> 1);
            int rd[2] = {(ks * 2 + (i >> 1)) * 2 + (i & 1), pairs ? on + (j >> 1) : on};
            sink(c, out, gp_geom_reg_of(g, rd), h ? hi : lo);
        }
    }
}

/* warp_n = (warp / wm) % wn */
static LLVMValueRef warp_n(CgCtx *c, int wm, int wn)
{
    return LLVMBuildURem(c->b, LLVMBuildUDiv(c->b, c->warp, cg_i32(c, wm), ""), cg_i32(c, wn), "");
}

/* The first column of this warp's n8 tile `on` of B (or C), less the warp's
 * own offset (warp_n * 8 * rpw): warp_n's tiles are interleaved (on * wn +
 * warp_n) when rpw[1] = 1, else rpw[1] side by side (#mma<.., rn>). */
static int ntile_col(const GpGeom *g, int wn, int on)
{
    int rp = g->rpw[1];
    return ((on / rp) * wn * rp + on % rp) * 8;
}

/* ldmatrix the B fragments of k16 steps [k_lo, k_hi) (k_lo even: one x4
 * covers two steps) of every n8 tile. */
static void load_b(CgCtx *c, const TileShape *ts, LLVMValueRef base, const GpGeom *g, int wm, int wn,
                   const FragSink *out, int k_lo, int k_hi)
{
    int N = g->shape[1];
    LLVMValueRef dr, dc;
    LLVMValueRef wni = warp_n(c, wm, wn);
    lane_row(c, GP_MMA_B, ts->k_contig, &dr, &dc);
    LLVMValueRef w8 = mul(c, wni, 8 * g->rpw[1]);
    LdsmAddr ad = {ts, base, ts->k_contig ? add(c, w8, dr) : dr, ts->k_contig ? dc : add(c, w8, dc), {0}};
    for (int on = 0; on < N / (8 * wn); on++)
        for (int kk = k_lo; kk < k_hi; kk += 2) {
            int n = kk + 1 < k_hi ? 4 : 2;
            int n0 = ntile_col(g, wn, on), k0 = kk * 16;
            LLVMValueRef q = ldmatrix(c, ldsm_ptr(c, &ad, ts->k_contig ? n0 : k0, ts->k_contig ? k0 : n0), n,
                                      !ts->k_contig);
            sink_b(c, q, n, out, g, kk, on, false);
        }
}

/* ldmatrix the B fragments of the one k16 step kk, two n8 tiles (on, on + 1)
 * per x4: matrix j holds n8 tile on + j / 2, k half j % 2 (CUTLASS's k16 x
 * n16 B load). Per step a warp holds 2 registers per n8 tile instead of
 * load_b's 4 (two steps): what lets d = 128 on 32-row warps fit in 255. */
static void load_b_pairs(CgCtx *c, const TileShape *ts, LLVMValueRef base, const GpGeom *g, int wm, int wn,
                         const FragSink *out, int kk)
{
    int N = g->shape[1];
    LLVMValueRef r = and_(c, c->lane, 7), m = lshr(c, c->lane, 3);
    /* tile on + 1 is 8 wn columns on (interleaved), or 8 (side by side: rpw[1] is even here) */
    LLVMValueRef dn = mul(c, lshr(c, m, 1), ntile_col(g, wn, 1)), dk = mul(c, and_(c, m, 1), 8);
    LLVMValueRef wni = warp_n(c, wm, wn);
    LLVMValueRef w8 = mul(c, wni, 8 * g->rpw[1]);
    LdsmAddr ad = {ts, base, ts->k_contig ? add(c, add(c, w8, r), dn) : add(c, r, dk),
                   ts->k_contig ? dk : add(c, w8, dn), {0}};
    for (int on = 0; on + 1 < N / (8 * wn); on += 2) {
        int n0 = ntile_col(g, wn, on), k0 = kk * 16;
        LLVMValueRef q = ldmatrix(c, ldsm_ptr(c, &ad, ts->k_contig ? n0 : k0, ts->k_contig ? k0 : n0), 4,
                                  !ts->k_contig);
        sink_b(c, q, 4, out, g, kk, on, true);
    }
}

/* Registers of `res` (an A/B-operand layout) from a swizzled tile at byte
 * offset `base` whose contiguous dim is `fast_dim` of the value; the tile
 * holds `stored` elements (16-bit), converted to res's element if they differ. */
void cg_mma_ldmatrix_tile(CgCtx *c, const IrValue *res, int fast_dim, LLVMValueRef base, IrElem stored, CgTile *out)
{
    GpMmaFrag frag;
    int wm, wn;
    GpGeom g;
    if (!gp_layout_is_mma(c->f, res->layout, &frag, &wm, &wn) || !cg_geom_of(c, res, &g)) {
        INTERNAL_ERROR("codegen: ldmatrix into a value without an MMA operand layout");
        return;
    }
    TileShape ts = tile_shape(res->type, frag, fast_dim);
    FragSink fs = {out->r, stored, (IrElem)res->type.elem};
    for (int i = 0; i < out->n; i++) out->r[i] = LLVMGetUndef(cg_type(c, fs.want));
    int ksteps = res->type.shape[frag == GP_MMA_A ? 1 : 0] / 16;
    if (frag == GP_MMA_A) load_a(c, &ts, base, &g, wm, &fs, 0, ksteps);
    else load_b(c, &ts, base, &g, wm, wn, &fs, 0, ksteps);
}

bool cg_mma_defer(CgCtx *c, const IrValue *res, int fast_dim, LLVMValueRef base, IrElem stored, CgRange bytes)
{
    if (!c->tc || !c->lazy || res->id >= c->tc->nids || !c->tc->deferred[res->id]) return false;
    GpGeom g;
    if (!cg_geom_of(c, res, &g)) return false;
    CgTile *t = cg_set(c, res, g.nregs);
    for (int i = 0; i < t->n; i++) t->r[i] = NULL; /* only dots read it, from SRAM */
    c->lazy[res->id] = (CgLazyOperand){base, fast_dim, stored, bytes};
    return true;
}

/* ---- registers -> swizzled tile ---- */

/* An e4m3 tile (K-major, K in gp_f8_kpos order) from a layout that holds K in
 * runs of whole 16-byte chunks per thread (eff_spt along K a multiple of 16,
 * registers along K in any order: V of P @ V loaded with d fastest, see
 * pass_layout_assign.c's f8_kfast_layout): each run is one st.shared.v4.b32,
 * its bytes permuted (the chunk's first k is a multiple of 16: gp_f8_kpos
 * keeps it). */
static void store_f8_chunks(CgCtx *c, const GpGeom *g, CgTile *t, const TileShape *ts, LLVMValueRef base,
                            LLVMValueRef *tb)
{
    int fd = g->vdims[ts->mc_dim];
    LLVMValueRef idx[GP_MAX_RANK];
    for (int i = 0; i < g->nregs; i++) {
        int rd[GP_MAX_RANK];
        gp_geom_reg_dims(g, i, rd);
        if (rd[fd] % 16) continue;
        cg_reg_index(c, g, tb, i, idx);
        LLVMValueRef p = tile_ptr(c, ts, base, idx[ts->mr_dim], idx[ts->mc_dim]);
        LLVMValueRef vec = LLVMGetUndef(LLVMVectorType(c->t_i8, 16));
        for (int k = 0; k < 16; k++) {
            int rk[GP_MAX_RANK];
            memcpy(rk, rd, sizeof rk);
            rk[fd] += k;
            vec = LLVMBuildInsertElement(c->b, vec, t->r[gp_geom_reg_of(g, rk)], cg_i32(c, gp_f8_kpos(k)), "");
        }
        /* one st.shared.v4.b32: NVPTX splits a <16 x i8> store into 4 st.shared.u32 */
        LLVMValueRef w = LLVMBuildBitCast(c->b, vec, LLVMVectorType(c->t_i32, 4), ""), a[5];
        a[0] = LLVMBuildPtrToInt(c->b, p, c->t_i32, "");
        for (int k = 0; k < 4; k++) a[1 + k] = LLVMBuildExtractElement(c->b, w, cg_i32(c, k), "");
        cg_asm(c, c->t_void, "st.shared.v4.b32 [$0], {$1, $2, $3, $4};", "r,r,r,r,r,~{memory}", 5, a, true);
    }
}

/* Store every register of `v` into the tile; runs of consecutive registers
 * along the fast dim that stay inside one 16-byte chunk go as one vector. */
static void store_tile(CgCtx *c, const IrValue *v, const TileShape *ts, LLVMValueRef base)
{
    GpGeom g;
    if (!cg_geom_of(c, v, &g)) return;
    CgTile *t = cg_get(c, v);
    IrElem e = (IrElem)v->type.elem;
    int eb = gp_elem_bytes(e);
    LLVMValueRef tb[GP_MAX_RANK], idx[GP_MAX_RANK];
    cg_thread_base(c, &g, tb);
    int fd = g.vdims[ts->mc_dim];
    if (ts->kperm && g.eff_spt[fd] % ts->sw.vec == 0) {
        store_f8_chunks(c, &g, t, ts, base, tb);
        return;
    }
    int run = g.eff_spt[fd] < ts->sw.vec ? g.eff_spt[fd] : ts->sw.vec;
    if (g.order[0] != fd) run = 1;
    if (ts->kperm) run = 1;   /* e4m3 without whole chunks of K per thread: byte by byte */
    int kd = ts->k_contig ? ts->mc_dim : ts->mr_dim;   /* the value's K dim */
    for (int i = 0; i < g.nregs; i += run) {
        cg_reg_index(c, &g, tb, i, idx);
        if (ts->kperm) idx[kd] = f8_kpos_ir(c, idx[kd]);
        LLVMValueRef p = tile_ptr(c, ts, base, idx[ts->mr_dim], idx[ts->mc_dim]);
        if (run == 1) {
            LLVMSetAlignment(LLVMBuildStore(c->b, t->r[i], p), (unsigned)eb);
            continue;
        }
        LLVMValueRef vec = LLVMGetUndef(LLVMVectorType(cg_type(c, e), (unsigned)run));
        for (int k = 0; k < run; k++) vec = LLVMBuildInsertElement(c->b, vec, t->r[i + k], cg_i32(c, k), "");
        LLVMSetAlignment(LLVMBuildStore(c->b, vec, p), (unsigned)(run * eb));
    }
}

/* Which value dim of `v` to make contiguous in SRAM: the source layout's
 * fastest dim (its stores vectorise). */
static int fast_dim_of(CgCtx *c, const IrValue *v)
{
    GpGeom g;
    if (!cg_geom_of(c, v, &g)) return 1;
    for (int i = 0; i < v->type.rank; i++)
        if (g.vdims[i] == g.order[0]) return i;
    return 1;
}

/* A view (smem.view, pass_sram_alloc.c): an earlier convert of the same value,
 * or of its transpose, staged these bytes and fenced them; record that tile
 * (the transpose's fast dim is the other value dim, hence `fd` of src). */
static bool lower_view(CgCtx *c, IrValue *res, int fd)
{
    const GpSmemBuf *b = c->tc->bufs.data[c->tc->buf_of[res->id]];
    CgRange r = {b->offset, b->offset + b->bytes};
    if (cg_mma_defer(c, res, fd, cg_i32(c, (int)b->offset), (IrElem)res->type.elem, r)) return true;
    INTERNAL_ERROR("codegen: the view %%%d is not a deferred operand", res->id);
    c->failed = true;
    return false;
}

bool cg_lower_convert_mma_operand(CgCtx *c, IrOp *op)
{
    IrValue *src = op->args[0], *res = op->res[0];
    GpGeom g;
    cg_geom_of(c, res, &g);
    CgTile *out = cg_set(c, res, g.nregs);
    int fd = fast_dim_of(c, src);
    if (c->tc && res->id < c->tc->nids && c->tc->view[res->id]) return lower_view(c, res, fd);
    GpMmaFrag frag;
    int wm, wn;
    gp_layout_is_mma(c->f, res->layout, &frag, &wm, &wn);
    bool f8 = res->type.elem == IR_F8E4M3;
    /* e4m3: the operand of FP8 wgmma, which reads both tiles K-major only
     * (no transpose bit): V of P @ V is transposed on its way in */
    if (f8) fd = frag == GP_MMA_A ? 1 : 0;
    TileShape ts = tile_shape(res->type, frag, fd);
    int bytes = (int)ir_type_numel(res->type) * gp_elem_bytes((IrElem)res->type.elem);
    LLVMValueRef base = cg_smem_begin(c, frag == GP_MMA_A ? "mma operand A" : "mma operand B", res, bytes);
    store_tile(c, src, &ts, base);
    cg_fence_proxy_async(c);
    cg_barrier(c);
    if (cg_mma_defer(c, res, fd, base, (IrElem)res->type.elem, c->cur)) return true;
    if (f8) { /* only wgmma reads an e4m3 tile (ldmatrix's fragments are 16-bit) */
        cg_fail(c, op, "internal: an f8e4m3 MMA operand that is not left in SRAM for its wgmma");
        return false;
    }
    cg_mma_ldmatrix_tile(c, res, fd, base, (IrElem)res->type.elem, out);
    return true;
}

/* ---- the dot ---- */

/* The vector `lo` and `hi` were extracted from, when they are its elements
 * 0 and 1 (an ldmatrix word, unpacked by unpack2), else NULL. */
static LLVMValueRef pair_source(LLVMValueRef lo, LLVMValueRef hi)
{
    if (!LLVMIsAExtractElementInst(lo) || !LLVMIsAExtractElementInst(hi)) return NULL;
    LLVMValueRef v = LLVMGetOperand(lo, 0), il = LLVMGetOperand(lo, 1), ih = LLVMGetOperand(hi, 1);
    if (LLVMGetOperand(hi, 0) != v || !LLVMIsAConstantInt(il) || !LLVMIsAConstantInt(ih)) return NULL;
    if (LLVMConstIntGetZExtValue(il) != 0 || LLVMConstIntGetZExtValue(ih) != 1) return NULL;
    return LLVMGetVectorSize(LLVMTypeOf(v)) == 2 ? v : NULL;
}

/* {lo, hi} as an MMA operand register (<2 x half>, or i32 for bf16). A pair
 * that is still one ldmatrix word is passed as that word: rebuilding it
 * element by element only gave InstCombine two inserts and a bitcast to
 * fold back, per operand register of every mma. */
static LLVMValueRef pack2(CgCtx *c, LLVMValueRef lo, LLVMValueRef hi, bool bf)
{
    LLVMValueRef src = pair_source(lo, hi);
    if (src) return bf ? LLVMBuildBitCast(c->b, src, c->t_i32, "") : src;
    LLVMTypeRef et = LLVMTypeOf(lo);
    LLVMValueRef v = LLVMGetUndef(LLVMVectorType(et, 2));
    v = LLVMBuildInsertElement(c->b, v, lo, cg_i32(c, 0), "");
    v = LLVMBuildInsertElement(c->b, v, hi, cg_i32(c, 1), "");
    return bf ? LLVMBuildBitCast(c->b, v, c->t_i32, "") : v;
}

/* Registers of an operand read through the geometry of its MMA operand
 * layout; the value may sit in an equivalent layout (P = the C layout of a
 * previous dot, when wn = 1): same registers, same elements. */
bool cg_mma_operand_geom(CgCtx *c, IrOp *op, int i, GpMmaFrag want, int wm, int wn, GpGeom *g)
{
    IrValue *v = op->args[i];
    int l = gp_layout_mma_rn(c->f, want, wm, wn, gp_mma_rn(c->f, op->res[0]->layout));
    if (v->layout != l && !gp_layouts_equivalent(c->f, v->layout, l, v->type)) {
        INTERNAL_ERROR("codegen: mma operand %d is not in (a layout equivalent to) the operand layout", i);
        return false;
    }
    return gp_geom(c->f, l, v->type, g);
}

/* The registers of dot operand `i`: its own, or, when deferred, an array the
 * dot fills one k32 step at a time (load_k_step). */
typedef struct DotOperand {
    GpGeom g;
    LLVMValueRef *r;
    const CgLazyOperand *lazy;
    TileShape ts;
    FragSink sink;
} DotOperand;

static bool dot_operand(CgCtx *c, IrOp *op, int i, int wm, int wn, DotOperand *d)
{
    GpMmaFrag want = i == 0 ? GP_MMA_A : GP_MMA_B;
    if (!cg_mma_operand_geom(c, op, i, want, wm, wn, &d->g)) return false;
    const IrValue *v = op->args[i];
    d->lazy = c->lazy && c->lazy[v->id].base ? &c->lazy[v->id] : NULL;
    d->r = cg_get(c, v)->r;
    if (!d->lazy) return true;
    d->r = ARENA_ARRAY(c->arena, LLVMValueRef, d->g.nregs);
    d->ts = tile_shape(v->type, want, d->lazy->fast_dim);
    d->sink = (FragSink){d->r, d->lazy->stored, (IrElem)v->type.elem};
    /* The ldmatrix reads happen here: a later writer of these bytes must wait. */
    cg_smem_pending_add(c, d->lazy->bytes.lo, d->lazy->bytes.hi);
    return true;
}

void cg_mma_a_frag(CgCtx *c, const GpGeom *g, LLVMValueRef *r, int om, int kk, bool bf, LLVMValueRef out[4])
{
    for (int j = 0; j < 4; j++) { /* a{2j}, a{2j+1} */
        LLVMValueRef h[2];
        for (int s = 0; s < 2; s++) {
            int i = 2 * j + s;
            int rd[2] = {om * 2 + ((i >> 1) & 1), (kk * 2 + (i >> 2)) * 2 + (i & 1)};
            h[s] = r[gp_geom_reg_of(g, rd)];
        }
        out[j] = pack2(c, h[0], h[1], bf);
    }
}

/* The f16 mma.sync as a pure (no side effects) asm statement on 32-bit
 * registers instead of the intrinsic, whose A/B operands are <2 x half>:
 * each operand register that is an ldmatrix word (i32) then needed a bitcast,
 * which NVPTX selects as a ProxyReg, and the pass erasing those rescans the
 * whole function per ProxyReg (18 ms of the sm_80 d = 256 forward's ~120
 * ms compile: 640 of them). The words go in as they are; the same
 * instruction comes out (ptxas 13.0 makes byte-identical cubins). bf16's
 * intrinsic takes i32 already. */
static LLVMValueRef mma_f16(CgCtx *c, LLVMTypeRef rt, LLVMValueRef args[10])
{
    for (int i = 0; i < 6; i++) {
        LLVMValueRef w = LLVMIsABitCastInst(args[i]) ? LLVMGetOperand(args[i], 0) : NULL;
        args[i] = w && LLVMTypeOf(w) == c->t_i32 ? w : LLVMBuildBitCast(c->b, args[i], c->t_i32, "");
    }
    return cg_asm(c, rt,
                  "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {$0, $1, $2, $3}, {$4, $5, $6, $7}, "
                  "{$8, $9}, {$10, $11, $12, $13};",
                  "=f,=f,=f,=f,r,r,r,r,r,r,f,f,f,f", 10, args, false);
}

static void mma_one(CgCtx *c, bool bf, const DotOperand *a, const DotOperand *b, const GpGeom *gc, CgTile *t,
                    int om, int on, int kk)
{
    const char *name = bf ? "llvm.nvvm.mma.m16n8k16.row.col.bf16" : "llvm.nvvm.mma.m16n8k16.row.col.f32.f32";
    LLVMTypeRef ht = bf ? c->t_i32 : LLVMVectorType(c->t_f16, 2);
    LLVMTypeRef pt[10], ft[4] = {c->t_f32, c->t_f32, c->t_f32, c->t_f32};
    for (int i = 0; i < 6; i++) pt[i] = ht;
    for (int i = 6; i < 10; i++) pt[i] = c->t_f32;
    LLVMValueRef args[10];
    cg_mma_a_frag(c, &a->g, a->r, om, kk, bf, args);
    for (int j = 0; j < 2; j++) { /* b{2j}, b{2j+1} */
        LLVMValueRef h[2];
        for (int s = 0; s < 2; s++) {
            int i = 2 * j + s;
            int rd[2] = {(kk * 2 + (i >> 1)) * 2 + (i & 1), on};
            h[s] = b->r[gp_geom_reg_of(&b->g, rd)];
        }
        args[4 + j] = pack2(c, h[0], h[1], bf);
    }
    int creg[4];
    for (int i = 0; i < 4; i++) {
        int rd[2] = {om * 2 + (i >> 1), on * 2 + (i & 1)};
        creg[i] = gp_geom_reg_of(gc, rd);
        args[6 + i] = t->r[creg[i]];
    }
    LLVMTypeRef rt = LLVMStructTypeInContext(c->ctx, ft, 4, 0);
    LLVMValueRef d = bf ? cg_call(c, name, rt, 10, pt, args) : mma_f16(c, rt, args);
    for (int i = 0; i < 4; i++) t->r[creg[i]] = LLVMBuildExtractValue(c->b, d, (unsigned)i, "");
}

/* The deferred operands' fragments of k16 steps [k0, k1). */
static void load_step(CgCtx *c, DotOperand *a, DotOperand *b, int wm, int wn, bool pairs, int k0, int k1)
{
    if (a->lazy) load_a(c, &a->ts, a->lazy->base, &a->g, wm, &a->sink, k0, k1);
    if (pairs) load_b_pairs(c, &b->ts, b->lazy->base, &b->g, wm, wn, &b->sink, k0);
    else if (b->lazy) load_b(c, &b->ts, b->lazy->base, &b->g, wm, wn, &b->sink, k0, k1);
}

/* C = A B + C, k16 (or k32) step by step: the deferred operands' fragments
 * of one step are loaded just before its MMAs, so a warp holds 1/(K/32) of them at a
 * time (FlashAttention-2 / CUTLASS do the same); each accumulator still sums
 * its k16 steps in order, so the result does not depend on this. */
bool cg_lower_dot_mma(CgCtx *c, IrOp *op)
{
    IrValue *res = op->res[0];
    GpMmaFrag frag;
    int wm, wn;
    GpGeom gc;
    DotOperand a, b;
    if (!gp_layout_is_mma(c->f, res->layout, &frag, &wm, &wn) || frag != GP_MMA_C || !cg_geom_of(c, res, &gc))
        return false;
    if (!dot_operand(c, op, 0, wm, wn, &a) || !dot_operand(c, op, 1, wm, wn, &b)) return false;
    bool bf = op->args[0]->type.elem == IR_BF16;
    int M = gc.shape[0], N = gc.shape[1], K = op->args[0]->type.shape[1];
    CgTile *tc = cg_get(c, op->args[2]);
    CgTile *t = cg_set(c, res, gc.nregs);
    for (int i = 0; i < gc.nregs; i++) t->r[i] = tc->r[i];
    /* Deferred B with an even number of n8 tiles per warp: k16 steps with
     * paired-n loads; else k32 steps. */
    bool pairs = b.lazy && (N / (8 * wn)) % 2 == 0;
    int step = pairs ? 1 : 2, nk = K / 16;
    /* Software-pipelined: the fragments of step k + 1 are loaded before the
     * MMAs of step k, so ldmatrix latency hides behind tensor-core work
     * (ncu on the H200: without it "short scoreboard" stalls were 4x
     * FlashAttention-2's). */
    load_step(c, &a, &b, wm, wn, pairs, 0, step < nk ? step : nk);
    for (int k0 = 0; k0 < nk; k0 += step) {
        int k1 = k0 + step < nk ? k0 + step : nk;
        if (k1 < nk) load_step(c, &a, &b, wm, wn, pairs, k1, k1 + step < nk ? k1 + step : nk);
        for (int kk = k0; kk < k1; kk++)
            for (int om = 0; om < M / (16 * wm); om++)
                for (int on = 0; on < N / (8 * wn); on++) mma_one(c, bf, &a, &b, &gc, t, om, on, kk);
    }
    return true;
}
