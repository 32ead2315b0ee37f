/* run_gpu.c — the GPU path of `kiln run` (placeholder until the runtime lands:
 * reports that no GPU path is available so the interpreter runs instead). */
#include "run_args.h"

int kiln_cli_run_gpu(KilnCliArgs *a, const IrFunc *f, const char *src, RunArgs *ra, const char **where)
{
    (void)a; (void)f; (void)src; (void)ra;
    *where = "no GPU runtime in this build";
    return -1;
}
