/* interp.h — the CPU interpreter: runs Tile IR on host memory.
 *
 * It is the reference semantics of the IR. A kernel runs for every program of
 * the grid, one after another. Pointer arguments are host addresses that must
 * lie inside a registered buffer; any access (unless its mask is false) outside
 * every registered buffer is an error, reported — never a crash.
 * f16/bf16 values round to nearest even on every cast and store; f32
 * arithmetic is done in float.
 */
#ifndef KILN_INTERP_H
#define KILN_INTERP_H

#include "../ir/ir.h"
#include "../support/fp16.h"

typedef struct InterpBuffer {
    void *data;
    size_t bytes;
    const char *name;    /* for error messages */
} InterpBuffer;

typedef struct InterpArg {
    /* Exactly one is used, by the parameter's type: pointers use `ptr`,
     * integers `i`, floats `f`. */
    void *ptr;
    int64_t i;
    double f;
} InterpArg;

typedef struct InterpOptions {
    int grid[3];                  /* programs per axis; 0 treated as 1 */
    const InterpBuffer *buffers;  /* every buffer a pointer may reach */
    int nbuffers;
} InterpOptions;

/* Returns 0 on success; else 1 with a message (which program, which op and
 * source location, what went wrong) in `err`. */
int interp_run(const IrFunc *f, const InterpArg *args, int nargs, const InterpOptions *opts, StrBuf *err);

/* fp16 / bf16 helpers, round to nearest even (exposed for tests and references):
 * the support layer's conversions (compiler/support/fp16.c), which the
 * interpreter's casts, loads and stores use through compiler/ir/eval.c. */
static inline uint16_t interp_f32_to_f16(float x) { return fp16_from_f32(x); }
static inline float    interp_f16_to_f32(uint16_t h) { return fp16_to_f32(h); }
static inline uint16_t interp_f32_to_bf16(float x) { return bf16_from_f32(x); }
static inline float    interp_bf16_to_f32(uint16_t h) { return bf16_to_f32(h); }
/* double -> f16 / bf16 with a single rounding (no double rounding through f32). */
static inline uint16_t interp_f64_to_f16(double d) { return fp16_from_f64(d); }
static inline uint16_t interp_f64_to_bf16(double d) { return bf16_from_f64(d); }

#endif
