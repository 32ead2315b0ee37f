/* fp16_api.c — the public f16/bf16/e4m3 conversions (kiln_runtime.h): the very
 * functions of fp16.c, so host data a program prepares rounds exactly as the
 * constant folder, the interpreter and the GPU do. */
#include "fp16.h"
#include "kiln_runtime.h"

uint16_t kiln_f32_to_f16(float x) { return fp16_from_f32(x); }
float kiln_f16_to_f32(uint16_t h) { return fp16_to_f32(h); }
uint16_t kiln_f32_to_bf16(float x) { return bf16_from_f32(x); }
float kiln_bf16_to_f32(uint16_t h) { return bf16_to_f32(h); }
uint8_t kiln_f32_to_e4m3(float x) { return f8e4m3_from_f32(x); }
float kiln_e4m3_to_f32(uint8_t c) { return f8e4m3_to_f32(c); }
