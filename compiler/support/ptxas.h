/* ptxas.h — finding and running NVIDIA's ptxas (PTX -> cubin).
 *
 * One locator for the whole project: the backend runs ptxas for --emit cubin
 * (cg_emit.c) and the JIT asks whether a cubin is possible before it picks
 * cubin or PTX (module_compile.c). Search order: $KILN_PTXAS (when set, that
 * file and nothing else), /usr/local/cuda/bin/ptxas, then `ptxas` on PATH.
 */
#ifndef KILN_PTXAS_H
#define KILN_PTXAS_H

#include "support.h"

typedef enum PtxasStatus {
    PTXAS_OK,
    PTXAS_NOT_FOUND,   /* no ptxas: the request is unsupported on this machine */
    PTXAS_REJECTED,    /* ptxas ran and refused the PTX: its log is in the message */
    PTXAS_FAILED,      /* ptxas could not be run or gave no cubin (I/O, exec) */
} PtxasStatus;

/* The ptxas to run (malloc'd), or NULL with the reason, "ptxas not found: ...",
 * appended to `why` (which may be NULL). */
char *ptxas_find(StrBuf *why);

/* Runs `ptxas -v -arch=ARCH -o OUT IN` on `ptx` (n bytes) in a temporary
 * directory. On PTXAS_OK the cubin is appended to `cubin` and what ptxas
 * printed (register and spill report) to `log`; otherwise one message (no
 * "error: " prefix) is appended to `err`. */
PtxasStatus ptxas_run(const char *ptx, size_t n, const char *arch, StrBuf *cubin, StrBuf *log, StrBuf *err);

#endif
