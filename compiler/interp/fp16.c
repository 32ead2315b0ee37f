/* fp16.c — the interpreter's 16-bit float conversions (interp.h) are the
 * support layer's (compiler/support/fp16.c), which the constant folder uses
 * too: a folded constant and a run round the same way. */
#include "interp_impl.h"
#include "compiler/support/fp16.h"

uint16_t interp_f32_to_f16(float x) { return fp16_from_f32(x); }
float interp_f16_to_f32(uint16_t h) { return fp16_to_f32(h); }
uint16_t interp_f32_to_bf16(float x) { return bf16_from_f32(x); }
float interp_bf16_to_f32(uint16_t h) { return bf16_to_f32(h); }
uint16_t interp_f64_to_f16(double d) { return fp16_from_f64(d); }
uint16_t interp_f64_to_bf16(double d) { return bf16_from_f64(d); }
