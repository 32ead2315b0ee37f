/* interp_impl.h — internals shared by the interpreter's files (not a public API).
 *
 * Value representation: every IR value (scalar or tile) is a dense row-major
 * array of IVal, one 8-byte union per element:
 *   - floats in `f`, always holding a value exactly representable in the
 *     element type (f16/bf16/f32 values are rounded on every producing op);
 *   - integers in `i`, normalised to their width: signed types sign-extended,
 *     unsigned types and i1 zero-extended (i1 is 0 or 1);
 *   - pointers in `u` as host addresses; IT_WILD_PTR (any address above
 *     INT64_MAX, which no host buffer has) for a pointer whose arithmetic
 *     left the address space (interp_ops.c exec_addptr).
 * Each value id owns one Slot whose storage is allocated once per interp_run
 * (sized by the static type) and reused by every program and every loop
 * iteration, so memory is bounded by the function's size, never by its trip
 * counts. A generation number per program catches reads of values that this
 * program has not defined (a malformed IR, reported as an internal error).
 */
#ifndef KILN_INTERP_IMPL_H
#define KILN_INTERP_IMPL_H

#include "interp.h"
#include "../ir/eval.h"

/* The evaluator's scalar (compiler/ir/eval.h): same normalisation rules. */
typedef IrScalar IVal;

/* A pointer whose offset overflowed: it stays wild through further addptrs and
 * any access through it is an error (interp_mem.c), instead of wrapping onto
 * real memory (X + 2^62 f32 elements is X again in 64-bit bytes). */
#define IT_WILD_PTR UINT64_MAX

typedef struct Slot {
    IVal *d;
    int64_t cap;          /* elements allocated */
    unsigned gen;         /* program generation that last defined it */
} Slot;

typedef struct Interp {
    const IrFunc *f;
    const InterpOptions *opts;
    StrBuf *err;
    Arena arena;          /* slot storage; freed at the end of interp_run */
    Slot *slots;          /* indexed by IrValue.id */
    int nslots;
    int pid[3], grid[3];
    unsigned gen;         /* current program's generation */
    int last_buf;         /* buffer index of the last successful access (a cache) */
    bool returned;        /* a `return` ended the current program */
    float *scratch;       /* dot's row accumulator, grown on demand (bounded by the widest dot) */
    int64_t scratch_cap;
} Interp;

/* Errors: append one line "kernel K, program (x, y, z): LOC: op 'name': MSG"
 * to it->err and return 1 (so callers can `return it_error(...)`). op may be NULL. */
int it_error(Interp *it, const IrOp *op, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* A malformed IR: the same, with "internal error: " before MSG. */
int it_internal(Interp *it, const IrOp *op, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Operand k of op (NULL after reporting when undefined), its element count and
 * whether it broadcasts (numel 1 used against a larger result). */
IVal *it_in(Interp *it, const IrOp *op, int k);
/* Storage for value v (allocated on first use), marked defined in this program. */
IVal *it_def(Interp *it, const IrValue *v);
/* Storage for result k of op. */
static inline IVal *it_out(Interp *it, const IrOp *op, int k) { return it_def(it, op->res[k]); }
/* Checks that operand k has `n` elements or exactly 1 (a scalar that broadcasts);
 * returns the stride to use (0 or 1), or -1 after reporting. */
int it_operand_stride(Interp *it, const IrOp *op, int k, int64_t n);

/* Element helpers. */
int     it_elem_bytes(IrElem e);               /* in memory: i1 -> 1 byte, ptr -> 8 */
/* "[3, 5]": the multi-index of flat element `lane` of a value of type t. */
void it_fmt_index(char *buf, size_t n, IrType t, int64_t lane);

/* Op families, in the files named. Each returns 0 or 1 (error reported). */
int it_exec_elementwise(Interp *it, const IrOp *op);   /* interp_ops.c */
int it_exec_shape(Interp *it, const IrOp *op);         /* interp_tile.c: splat .. trans */
int it_exec_dot(Interp *it, const IrOp *op);           /* interp_tile.c */
int it_exec_reduce(Interp *it, const IrOp *op);        /* interp_tile.c */
int it_exec_mem(Interp *it, const IrOp *op);           /* interp_mem.c: load, store, atomic_add */

#endif
