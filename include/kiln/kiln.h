/* kiln.h — Kiln's public API: compile .tile programs and run them.
 *
 * Includes the three parts, each readable (and includable) on its own:
 * kiln_runtime.h (devices, memory, modules, launches, f16/bf16 helpers),
 * kiln_compile.h (compiling, the CPU interpreter, compile-and-load, the
 * kernel cache) and kiln_attention.h (FlashAttention forward, backward and
 * decoding, variants, block masks). No compiler-internal header leaks through
 * either. See docs/runtime.md.
 */
#ifndef KILN_H
#define KILN_H

#include "kiln_runtime.h"
#include "kiln_compile.h"
#include "kiln_attention.h"
#include "kiln_tune.h"

#endif
