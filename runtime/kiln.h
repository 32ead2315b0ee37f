/* kiln.h — Kiln's public API: compile .tile programs and run them.
 *
 * Includes the two halves, each readable (and includable) on its own:
 * kiln_compile.h (compiling, the CPU interpreter, compile-and-load, the
 * kernel cache, attention) and kiln_runtime.h (devices, memory, modules,
 * launches, f16/bf16 helpers). No compiler-internal header leaks through
 * either. See docs/runtime.md.
 */
#ifndef KILN_H
#define KILN_H

#include "kiln_runtime.h"
#include "kiln_compile.h"

#endif
