/* cg_tc.h — tensor cores, SRAM allocation and async-copy pipelining: the
 * declarations shared by pass_sram_alloc.c, layout_mma.c,
 * pass_accelerate_dot.c, cg_dot_mma.c and pass_pipeline.c (and their tests).
 * See docs/tensor_cores.md for the design; each file's header comment has the
 * details of its part. LLVM-free, so the CPU unit tests can include it.
 */
#ifndef KILN_CG_TC_H
#define KILN_CG_TC_H

#include "codegen.h"

/* ---- pass_sram_alloc.c: placement of shared-memory buffers ----
 * A buffer lives over the inclusive interval [start, end] of op positions
 * (a linear numbering of the function's ops, see cg_sram_number). Two buffers
 * interfere when their intervals and their byte ranges both overlap. */
typedef struct CgSmemBuf {
    const char *what;      /* "convert_layout", "reduce", "mma operand A", ... */
    int value_id;          /* the IR value it serves (-1: none) */
    int bytes;
    int align;             /* power of two */
    int start, end;        /* live interval, op positions, inclusive */
    int offset;            /* placement (bytes from the start of dynamic SRAM) */
} CgSmemBuf;

/* Largest first, first fit: every buffer goes at the lowest aligned offset
 * where it overlaps no already placed buffer that is live at the same time.
 * Returns the total size (end of the highest buffer, 16-byte rounded). */
int  cg_sram_place(CgSmemBuf **bufs, int n);
/* True when no two buffers interfere; else names the first pair in `why`. */
bool cg_sram_check(CgSmemBuf *const *bufs, int n, StrBuf *why);
/* Dynamic shared memory a CTA may use on this architecture (bytes). */
int  cg_sram_limit(int sm);

/* ---- layout_mma.c: mma.sync m16n8k16 fragments, swizzled SRAM, ldmatrix ---- */
typedef enum CgMmaFrag { CG_MMA_A, CG_MMA_B, CG_MMA_C } CgMmaFrag;

/* The PTX ISA's table for mma.m16n8k16 with f16/bf16 inputs and f32
 * accumulators: element i of `frag` held by `lane` is at (row, col) of the
 * 16x16 A, 16x8 B (row = k) or 16x8 C tile. A: i in 0..7, B: 0..3, C: 0..3. */
void cg_mma_isa_coord(CgMmaFrag frag, int lane, int i, int *row, int *col);

/* Swizzled row-major SRAM tile with `cols` elements per row: 16-byte chunks
 * (vec elements) of row r are permuted by XOR with (r / per_phase) % max_phase:
 *     col' = ((c / vec) ^ ((r / per_phase) % max_phase)) * vec + c % vec
 * so the 8 rows an ldmatrix 8x8 matrix (or a 16-byte store phase) touches
 * fall in 8 different 16-byte bank groups. */
typedef struct CgSwizzle {
    int cols, vec, per_phase, max_phase, elem_bytes;
} CgSwizzle;
CgSwizzle cg_swizzle_for(int cols, int elem_bytes);
int       cg_swizzle_offset(const CgSwizzle *s, int r, int c); /* element offset in the tile */

/* ldmatrix.x4 addressing. The operand tile sits in SRAM with either K
 * contiguous (k_contig) or the other dim (M of A, N of B) contiguous; "memrow"
 * and "memcol" are the tile as stored (memcol is the contiguous dim). Lane i
 * supplies the address of one 8-element memrow of matrix i / 8; this returns
 * that memrow/memcol relative to the fragment's corner.
 *   A: m16 x k16, registers {a0a1, a2a3, a4a5, a6a7};
 *   B: k32 x n8 (two k16 steps of one n8 tile), registers {b0b1, b2b3} of the
 *      first step then of the second (x2 with lanes 0..15 for one step).
 * Loads are .trans when the tile's contiguous dim is not K (A: M
 * contiguous, B: N contiguous — the usual row-major B). */
void cg_ldmatrix_lane_row(CgMmaFrag frag, bool k_contig, int lane, int *mrow, int *mcol);
static inline bool cg_ldmatrix_trans(bool k_contig) { return !k_contig; }

#endif
