/* fp16.h — IEEE binary16 (f16), bfloat16 (bf16) and FP8 E4M3 encode/decode, round to
 * nearest even with subnormals, infinities and NaNs (fp16.c). The IR's scalar
 * evaluator (compiler/ir/eval.c) rounds through these, and with it the front
 * end's constant evaluation, the constant folder and the interpreter
 * (interp_f32_to_f16 & co. are these too), so all round exactly alike. */
#ifndef KILN_FP16_H
#define KILN_FP16_H

#include <stdint.h>

uint16_t fp16_from_f32(float x);
float    fp16_to_f32(uint16_t h);
uint16_t bf16_from_f32(float x);
float    bf16_to_f32(uint16_t h);
/* double -> f16 / bf16 with a single rounding (no double rounding through f32). */
uint16_t fp16_from_f64(double d);
uint16_t bf16_from_f64(double d);
/* OCP FP8 E4M3 (e4m3fn): one rounding to nearest even, saturating to +-448
 * (PTX cvt.rn.satfinite.e4m3x2), NaN -> 0x7f; decoding is exact. */
uint8_t  f8e4m3_from_f64(double d);
uint8_t  f8e4m3_from_f32(float x);
float    f8e4m3_to_f32(uint8_t c);

#endif
