/* layout_mma.c — the thread -> element maps of mma.sync m16n8k16, swizzled
 * SRAM tiles and ldmatrix addressing: the arithmetic the tensor-core path
 * relies on, kept LLVM-free so that the unit tests check it on the CPU
 * (tests/codegen/test_mma_layout.c) against the PTX ISA's fragment tables.
 *
 * Fragments (PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point
 * type"; g = lane / 4, t = lane % 4):
 *   A 16x16: a0,a1 (g, 2t+{0,1})  a2,a3 (g+8, 2t+{0,1})
 *            a4,a5 (g, 2t+8+{0,1}) a6,a7 (g+8, 2t+8+{0,1})
 *   B 16x8 (row = k): b0,b1 (2t+{0,1}, g)  b2,b3 (2t+8+{0,1}, g)
 *   C 16x8: c0,c1 (g, 2t+{0,1})  c2,c3 (g+8, 2t+{0,1})
 * In the generalised blocked layouts of layout.c (a register-repeat level
 * rpw between lanes and warps) these are:
 *   C [M,N]: spt=[1,2] tpw=[8,4] rpw=[2,1] order=[1,0]
 *   A [M,K]: spt=[1,2] tpw=[8,4] rpw=[2,2] order=[1,0]
 *   B [K,N]: spt=[2,1] tpw=[4,8] rpw=[2,1] order=[0,1]
 * and the C fragments of two adjacent n8 tiles are exactly the A fragment of
 * one k16 step (FlashAttention's P = softmax(S) stays in registers).
 *
 * ldmatrix: lane i gives the address of row i % 8 of 8x8 matrix i / 8; after
 * the load, thread T holds in register j the two elements (T/4, 2(T%4)+{0,1})
 * of matrix j, or with .trans (2(T%4)+{0,1}, T/4). With the addresses below
 * the registers come out as the mma fragments above (checked by simulating
 * ldmatrix in the test).
 *
 * FP8 wgmma (m64nNk32, e4m3, cg_dot_wgmma.c): its k32 register A fragment is
 * four 32-bit registers of four bytes, (g, 4t + {0..3}), (g + 8, 4t + ...),
 * (g, 16 + 4t + ...), (g + 8, 16 + 4t + ...), while an accumulator (P of
 * attention) holds (g, 8j + 2t + {0, 1}) per n8 tile j. Packing tile 0's and
 * tile 1's pairs into register 0 (and so on) is the A fragment of a K whose
 * positions are permuted within each 16: logical k = 8a + 2t + b (a, b in
 * {0, 1}, t < 4) sits at position 4t + 2a + b (gp_f8_kpos). The SRAM tiles
 * of an e4m3 dot store K in that order too (A's and B's alike, so a dot whose
 * operands both come from SRAM sums the same products), and no shuffle moves
 * P between the dots (FlashAttention-3 permutes P's bytes in registers
 * instead).
 *
 * stmatrix (sm_90) is ldmatrix's mirror with the same per-lane address rule;
 * an accumulator's c0c1 / c2c3 pairs are its matrix rows (gp_stmatrix_plan).
 *
 * Swizzle: a tile row of `cols` elements holds cols*eb/16 chunks of 16 bytes;
 * per_phase rows share one 128-byte line (128 / row bytes, at least 1) and
 * the chunk index is XORed with (r / per_phase) % max_phase, max_phase =
 * min(8, chunks per row). The 8 rows of an ldmatrix matrix then touch 8
 * different 16-byte bank groups (conflict free), as do 8 consecutive threads
 * storing 16 bytes each from a coalesced blocked layout. Rows of 256 bytes or
 * more are cut into 128-byte column blocks stored one after another, so that
 * every 8 rows x 128 bytes form one 128-byte swizzle atom of wgmma (1024-byte
 * aligned by pass_sram_alloc.c); the bank arithmetic is the same.
 */
#include "gpuir.h"

#include <string.h>

void gp_mma_isa_coord(GpMmaFrag frag, int lane, int i, int *row, int *col)
{
    int g = lane >> 2, t = lane & 3;
    switch (frag) {
    case GP_MMA_A:
        *row = g + ((i & 2) ? 8 : 0);
        *col = 2 * t + (i & 1) + (i >= 4 ? 8 : 0);
        return;
    case GP_MMA_B:
        *row = 2 * t + (i & 1) + (i >= 2 ? 8 : 0);
        *col = g;
        return;
    case GP_MMA_C:
        *row = g + (i >= 2 ? 8 : 0);
        *col = 2 * t + (i & 1);
        return;
    }
}

GpSwizzle gp_swizzle_for(int rows, int cols, int elem_bytes)
{
    GpSwizzle s;
    s.elem_bytes = elem_bytes;
    s.rows = rows;
    s.cols = cols;
    s.blk = cols * elem_bytes > 128 && cols * elem_bytes % 128 == 0 ? 128 / elem_bytes : cols;
    s.vec = 16 / elem_bytes;
    int row_bytes = cols * elem_bytes;
    s.per_phase = row_bytes >= 128 ? 1 : 128 / row_bytes;
    int chunks = row_bytes / 16;
    s.max_phase = chunks >= 8 ? 8 : chunks < 1 ? 1 : chunks;
    return s;
}

int gp_swizzle_offset(const GpSwizzle *s, int r, int c)
{
    int in = c % s->blk;
    int chunk = (in / s->vec) ^ ((r / s->per_phase) % s->max_phase);
    return c / s->blk * s->rows * s->blk + r * s->blk + chunk * s->vec + in % s->vec;
}

bool gp_swizzle_shift(const GpSwizzle *s, int dr, int dc, int *elems)
{
    if (dr % (s->per_phase * s->max_phase) || dc % (s->max_phase * s->vec)) return false;
    /* dc is a whole number of blocks when the tile is blocked (blk is
     * max_phase chunks then), else it stays inside the row */
    *elems = dc / s->blk * s->rows * s->blk + dr * s->blk + dc % s->blk;
    return true;
}

bool gp_wgmma_tile_ok(const GpSwizzle *s) { return s->blk * s->elem_bytes == 128; }

void gp_wgmma_strides(const GpSwizzle *s, bool k_major, int *lbo, int *sbo)
{
    int row = s->blk * s->elem_bytes;      /* 128 */
    *sbo = 8 * row;                        /* the next 8 rows (K-major: of M/N; MN-major: of K) */
    *lbo = k_major ? 16 : s->rows * row;   /* K-major: unused (encodes as 1); MN-major: next column block */
}

int gp_f8_kpos(int k)
{
    return (k & ~15) | 4 * ((k >> 1) & 3) | 2 * ((k >> 3) & 1) | (k & 1);
}

void gp_f8_afrag_reg(int om, int kk, int j, int b, int rd[2])
{
    int tile = 4 * kk + 2 * (j >> 1) + (b >> 1);   /* n8 tile of the accumulator (k8 of the operand) */
    rd[0] = 2 * om + (j & 1);
    rd[1] = 2 * tile + (b & 1);
}

int gp_wgmma_offset(const GpSwizzle *s, bool k_major, int mn0, int kk)
{
    int k0 = 32 / s->elem_bytes * kk;   /* a k step is 32 bytes of K: k16 of f16, k32 of e4m3 */
    if (k_major) return gp_swizzle_offset(s, mn0, k0) * s->elem_bytes; /* mn0 % 8 == 0: no XOR */
    return gp_swizzle_offset(s, k0, mn0) * s->elem_bytes;
}

void gp_ldmatrix_lane_row(GpMmaFrag frag, bool k_contig, int lane, int *mrow, int *mcol)
{
    int r = lane & 7, m = lane >> 3; /* row within the matrix, matrix index */
    if (frag == GP_MMA_A) {
        /* matrix m: rows +8 when m is odd (a2a3, a6a7), k +8 when m >= 2 */
        int dm = (m & 1) * 8, dk = (m >> 1) * 8;
        if (k_contig) { *mrow = r + dm; *mcol = dk; }
        else { *mrow = r + dk; *mcol = dm; }   /* memrow = k, memcol = m */
        return;
    }
    /* B, k32 x n8: matrix m covers k = 8m .. 8m+7 */
    if (k_contig) { *mrow = r; *mcol = 8 * m; } /* memrow = n, memcol = k */
    else { *mrow = r + 8 * m; *mcol = 0; }      /* memrow = k, memcol = n */
}

bool gp_stmatrix_plan(const GpGeom *g, GpStmatrix *p)
{
    /* The C geometry: spt [1, 2], tpw [8, 4], rpw [2, 1], N fastest. */
    if (g->rank != 2 || g->vrank != 2 || g->vdims[0] != 0 || g->vdims[1] != 1) return false;
    if (g->spt[0] != 1 || g->spt[1] != 2 || g->tpw[0] != 8 || g->tpw[1] != 4 || g->rpw[0] != 2 || g->rpw[1] != 1)
        return false;
    if (g->eff_spt[1] != 2 || g->shape[0] % g->cta[0] || g->shape[1] % g->cta[1] || g->nregs_dim[1] % 4) return false;
    p->nm = g->nregs_dim[0] / 2;
    p->nn = g->nregs_dim[1] / 4;
    p->drow = gp_geom_const_part(g, 0, 1) - gp_geom_const_part(g, 0, 0);
    p->dcol = gp_geom_const_part(g, 1, 2) - gp_geom_const_part(g, 1, 0);
    return true;
}

void gp_stmatrix_instr(const GpGeom *g, const GpStmatrix *p, int q, int *row0, int *col0, int regs[4])
{
    int om = q / p->nn, on = q % p->nn;
    for (int j = 0; j < 4; j++) {
        int rd[2] = {2 * om + (j & 1), 4 * on + 2 * (j >> 1)};
        regs[j] = gp_geom_reg_of(g, rd);
    }
    *row0 = gp_geom_const_part(g, 0, 2 * om);
    *col0 = gp_geom_const_part(g, 1, 4 * on);
}

void gp_stmatrix_lane_row(const GpStmatrix *p, int lane, int *row, int *col)
{
    int m = lane >> 3;
    *row = (lane & 7) + (m & 1) * p->drow;
    *col = (m >> 1) * p->dcol;
}

int gp_layout_mma(IrFunc *f, GpMmaFrag frag, int wm, int wn)
{
    return ir_layout_mma(f, (int)frag + 1, wm, wn); /* IR_MMA_A/B/C = 1 + frag */
}

int gp_layout_mma_rn(IrFunc *f, GpMmaFrag frag, int wm, int wn, int rn)
{
    return ir_layout_mma_rn(f, (int)frag + 1, wm, wn, frag == GP_MMA_A ? 0 : rn);
}

int gp_mma_rn(const IrFunc *f, int layout)
{
    const IrLayout *l = ir_layout_get(f, layout);
    return l && l->kind == IR_LAYOUT_BLOCKED && l->mma ? l->mma_rn : 0;
}

bool gp_layout_is_mma(const IrFunc *f, int layout, GpMmaFrag *frag, int *wm, int *wn)
{
    const IrLayout *l = ir_layout_get(f, layout);
    if (!l || l->kind != IR_LAYOUT_BLOCKED || !l->mma) return false;
    *frag = (GpMmaFrag)(l->mma - 1);
    *wm = l->mma_wm;
    *wn = l->mma_wn;
    return true;
}
