/* run_examples.h — a tiny harness that runs one compiled program on host
 * buffers: on the GPU through the public runtime API when there is one, else
 * on the CPU interpreter. Used by kiln-examples (the README's main job). */
#ifndef KILN_RUN_EXAMPLES_H
#define KILN_RUN_EXAMPLES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kiln.h"

typedef enum ExKind { EX_BUF, EX_I32, EX_I64, EX_F32 } ExKind;

typedef struct ExArg {
    const char *name;
    ExKind kind;
    void *p;            /* EX_BUF: host data (inputs read, outputs written back) */
    size_t bytes;
    bool is_output;
    int64_t i;
    double f;
} ExArg;

typedef struct ExDefine { const char *name, *value; } ExDefine;

typedef struct ExProgram {
    const char *path;           /* a shipped program, as kiln_data_path names it */
    const char *kernel;
    const ExDefine *defines;
    int ndefines;
    int grid[3];
    ExArg *args;                /* in the kernel's parameter order, or any order with by_name */
    int nargs;
    /* true: `args` is a table of named values, a superset of what the kernel takes; each
     * runtime parameter gets the entry of its name (the kernel's signature from
     * kiln_compile), so one table serves every kernel of a multi-kernel program. */
    bool by_name;
} ExProgram;

typedef struct ExRunner {
    bool force_cpu;
    KilnDevice *dev;            /* NULL: the CPU interpreter */
    char device_name[300];
} ExRunner;

void ex_runner_init(ExRunner *r);
void ex_runner_free(ExRunner *r);
/* Compile and run; `where` gets "GPU <name>" or "CPU interpreter". 0 on success;
 * on failure prints the reason to stderr and returns 1. */
int ex_run(ExRunner *r, const ExProgram *p, char *where, size_t where_size);

/* Device buffers for the attention entry points (r->dev set): ex_dev_put allocates `bytes`
 * and copies `host` in (NULL: fills it with 0xFF bytes, NaN in f16/bf16/f32); ex_dev_get
 * copies back. 0 on success; on failure prints the reason to stderr and returns 1. */
int ex_dev_put(ExRunner *r, const void *host, size_t bytes, KilnDevPtr *out);
int ex_dev_get(ExRunner *r, void *host, KilnDevPtr src, size_t bytes);
/* The status of a public API call: 0 for KILN_OK, else 1 with kiln_last_error() on stderr. */
int ex_check(KilnStatus st, const char *what);

int ex_attention(ExRunner *r);         /* ex_attention.c: FlashAttention forward */
int ex_attention_bwd(ExRunner *r);     /* ex_attention_bwd.c: forward, then the backward */
int ex_attention_decode(ExRunner *r);  /* ex_attention_decode.c: a paged decode step */

#endif
