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

#endif
