/* run_args.h — buffers and arguments of `kiln run`, shared by the CPU and GPU paths. */
#ifndef KILN_RUN_ARGS_H
#define KILN_RUN_ARGS_H

#include "compiler/interp/interp.h"
#include "cli.h"

#define RUN_MAX_PARAMS 64

typedef struct RunBuf {
    const char *name;
    IrElem elem;          /* pointee type for buffers */
    size_t count, bytes;
    void *data;           /* host data; NULL for scalars */
    double scalar;        /* float scalars (and integers, for printing) */
    int64_t iscalar;      /* integer scalars, exact (u64 as its bit pattern) */
} RunBuf;

typedef struct RunArgs {
    int n;
    RunBuf bufs[RUN_MAX_PARAMS];
    InterpArg args[RUN_MAX_PARAMS];
    InterpBuffer ibufs[RUN_MAX_PARAMS];
    int nbufs;
} RunArgs;

double kiln_run_elem_get(const void *p, IrElem e, size_t i);
void   kiln_run_elem_set(void *p, IrElem e, size_t i, double v);

/* Run on the GPU through the runtime. Returns -1 when there is no GPU (then
 * *where says why, and the caller falls back to the interpreter), 0 on success
 * (*where names the device; buffers hold the results), 1 on failure. */
int kiln_cli_run_gpu(KilnCliArgs *a, const IrFunc *f, const char *src, RunArgs *ra, const char **where);

#endif
