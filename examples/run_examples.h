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
    ExArg *args;                /* in the kernel's parameter order */
    int nargs;
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

int ex_attention(ExRunner *r);  /* ex_attention.c: FlashAttention forward */

#endif
