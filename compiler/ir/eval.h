/* eval.h — the scalar semantics of Tile IR, defined once (eval.c).
 *
 * Every place that computes an IR value on the host goes through these: the
 * front end's constant evaluation (lang/consteval.c), the constant folder
 * (compiler/passes/fold.c) and the interpreter (compiler/interp). So a value
 * folded at compile time is bit for bit the value a run computes
 * (tests/ir/test_eval.c, tests/ir/test_e2e_eval_agree.c).
 *
 * Representation (IrScalar): an integer of element type e is held in `i`
 * normalised to its width (signed types sign-extended, unsigned types and i1
 * zero-extended, i1 is 0 or 1; pointers are 64-bit integers); a float is held
 * in `f` as a double that is exactly representable in e.
 *
 * The semantics (the op table comments of ir.h, made complete):
 *   - integers wrap at their width; div truncates toward zero (C), rem has the
 *     sign of the dividend (C %); x / 0 and x % 0 are IR_EVAL_DIV_ZERO (the
 *     interpreter reports them, fold leaves them, the front end rejects them);
 *     MIN / -1 wraps to MIN, MIN % -1 is 0;
 *   - shl/shr: shr is arithmetic for signed types, logical for unsigned; an
 *     amount >= the width (an unsigned reading of the operand, so a negative
 *     amount too) gives 0, or the sign fill for an arithmetic shr (PTX clamps);
 *   - f16, bf16 and f32 ops compute in float (C's float ops, expf & co) and
 *     round once to the result type (round to nearest even); f64 in double;
 *     rem is fmod; min/max are fmin/fmax (a NaN operand is ignored); float
 *     division is IEEE (x / 0 = inf, 0 / 0 = NaN);
 *   - cmp: signed or unsigned by the type; floats compare IEEE (a NaN makes
 *     every predicate false except ne);
 *   - cast: to a float rounds once to nearest even (ints correctly, even from
 *     64 bits to f16); float -> int truncates toward zero and saturates to the
 *     type's range, NaN -> 0; anything -> i1 is `!= 0` (NaN -> 1); int -> int
 *     wraps, sign- or zero-extending by the source type.
 */
#ifndef KILN_IR_EVAL_H
#define KILN_IR_EVAL_H

#include "ir.h"

typedef union IrScalar {
    int64_t i;
    uint64_t u;
    double f;
} IrScalar;

typedef enum IrEvalStatus {
    IR_EVAL_OK,
    IR_EVAL_DIV_ZERO,     /* integer division or remainder by zero */
    IR_EVAL_UNDEFINED,    /* the op is not defined on the element type */
} IrEvalStatus;

/* Normalising: an integer wrapped to e's width, a double rounded to e. */
int64_t  ir_eval_wrap(IrElem e, uint64_t v);
double   ir_eval_round(IrElem e, double x);
IrScalar ir_eval_int(IrElem e, int64_t v);     /* {.i = ir_eval_wrap(e, v)} */
IrScalar ir_eval_float(IrElem e, double x);    /* {.f = ir_eval_round(e, x)} */

/* add sub mul div rem min max and or xor shl shr, on two values of type e. */
IrEvalStatus ir_eval_binary(IrOpcode op, IrElem e, IrScalar a, IrScalar b, IrScalar *out);
/* neg not abs exp exp2 log log2 sqrt rsqrt tanh sin cos floor ceil. */
IrEvalStatus ir_eval_unary(IrOpcode op, IrElem e, IrScalar a, IrScalar *out);
bool         ir_eval_cmp(IrCmp c, IrElem e, IrScalar a, IrScalar b);
IrScalar     ir_eval_cast(IrElem from, IrElem to, IrScalar a);

/* The value's bits as stored in memory (f16 -> its 16-bit pattern, i8 -> the
 * low byte, ...), zero-extended to 64; and back (normalised). */
uint64_t ir_eval_to_bits(IrElem e, IrScalar x);
IrScalar ir_eval_from_bits(IrElem e, uint64_t bits);

#endif
