/* kiln_tune.h — Kiln's autotuner: compile a kernel's declared tune space in parallel,
 * prune what cannot run or cannot win, time the rest on a GPU, check that every config
 * computes what the first one does, keep the winner on disk, and report the landscape.
 *
 * The space is declared in the program next to the kernel (docs/language.md, "Tune
 * spaces"):
 *
 *     tune attn_fwd {
 *         BLOCK_M in [64, 128];  BLOCK_N in [32, 64, 128];  num_warps in [4, 8];
 *         require BLOCK_N <= BLOCK_M;
 *         key HEAD_DIM, CAUSAL, seqlen_q;
 *     }
 *
 * kiln_tune enumerates it (with the caller's defines: the key's consts), compiles every
 * config on `jobs` threads (each compile has its own arena and LLVM context; each runs its
 * own ptxas), prunes at compile time (a compile error such as shared memory over the
 * limit, spills over max_spill_bytes from ptxas -v, occupancy 0), then with a device times
 * the rest (warm-up launches, the L2 flushed before each timed launch, the median of the
 * repeats) on random inputs (never zeros) built from the argument specs, and with cpu_check
 * runs each kept config on the CPU interpreter; either way each config's outputs must
 * match config 0's within rtol/atol or the config is a failure. The winner (fastest timed
 * config) is stored on disk per (source text, kernel, compiler build identity,
 * device, key) and found again by kiln_tune_lookup (the attention calls look there before
 * their tables). Nothing here prints.
 */
#ifndef KILN_TUNE_H
#define KILN_TUNE_H

#include "kiln_compile.h"

#ifdef __cplusplus
extern "C" {
#endif

#define KILN_TUNE_MAX_DIMS 16

typedef struct KilnTuneOptions {
    const char *kernel;                 /* the kernel tuned (its tune decl or its generic's) */
    const KilnDefine *defines;          /* fixed const parameters (the key's: HEAD_DIM=128) */
    int ndefines;
    const char *arch;                   /* NULL: the device's, else "sm_90a" */
    const char *const *include_dirs;
    int ninclude_dirs;
    const KilnParamHint *hints;         /* as KilnCompileOptions.hints (`--assume`): what the
                                           launches the winner is for will satisfy */
    int nhints;
    int jobs;                           /* compile threads; 0: the online CPUs */
    int max_spill_bytes;                /* prune configs spilling more (ptxas -v); < 0: keep all */
    int max_configs;                    /* 0: every config; else the first N (in space order) */
    /* Running (a device, or the CPU interpreter): the kernel's runtime arguments as
     * "NAME=SPEC", SPEC as `kiln run` takes it: rand:N (a buffer of N random elements of
     * the parameter's type, in [-1, 1)), out:N (an output of N elements, poisoned before
     * each run), or a scalar ("1024", "0.125"). Outputs are what the agreement check
     * compares. Grid: per axis "N" or "N/NAME" (cdiv(N, the config's NAME)); NULL: 1. */
    const char *const *args;
    int nargs;
    const char *grid[3];
    KilnDevice *device;                 /* NULL: compile and prune only (and cpu_check) */
    int cpu_check;                      /* run each kept config on the CPU interpreter */
    int warmup, repeats;                /* 0: 5 and 20 */
    double flops, bytes;                /* per launch, for the report's TFLOP/s and GB/s */
    double rtol, atol;                  /* agreement with config 0; 0: 2e-2 and 2e-3 */
    int store;                          /* keep the winner in the tune cache */
    const char *key;                    /* the key's values as stored; NULL: made from the
                                           defines and args ("HEAD_DIM=128 seqlen_q=4096",
                                           runtime integers bucketed to a power of two) */
} KilnTuneOptions;

typedef struct KilnTuneRow {
    const char *values[KILN_TUNE_MAX_DIMS];  /* each dimension's value, as text */
    const char *pruned;        /* NULL: kept; else why it was pruned or failed */
    double compile_ms;         /* this config's compile (front end to cubin) */
    double time_ms;            /* median; < 0: not timed */
    double tflops, gbps;       /* from KilnTuneOptions.flops / bytes; 0 when unknown */
    double max_err;            /* largest difference to config 0's outputs (< 0: not checked) */
    int registers;             /* per thread (ptxas -v); -1: unknown (no ptxas) */
    int spill_bytes;           /* spill stores + loads (ptxas -v); -1: unknown */
    int smem_bytes;            /* dynamic shared memory */
    int num_warps;             /* threads / 32, the producer warpgroup included */
    int occupancy;             /* resident CTAs per SM (registers, SRAM, threads); 0: cannot run */
} KilnTuneRow;

typedef struct KilnTuneReport {
    const char *kernel;
    const char *dims[KILN_TUNE_MAX_DIMS];
    int ndims;
    KilnTuneRow *rows;         /* one per config kept by the constraints, in space order */
    int nrows;
    int nspace;                /* configs the constraints kept (nrows: at most max_configs of them) */
    int ntotal;                /* configs before the constraints */
    int winner;                /* the fastest timed row; -1 when none was timed */
    double compile_wall_ms;    /* the parallel compile, wall clock */
    int jobs;
    const char *arch, *device, *key;
    const char *cache_file;    /* where the winner was stored, or NULL */
} KilnTuneReport;

/* Tune kernel o->kernel of `src` (the text of `path`). KILN_OK with *out (free it with
 * kiln_tune_report_free) even when configs failed (their rows say why); KILN_ERR_COMPILE
 * for a bad space (located diagnostics in kiln_last_error()); KILN_ERR_USAGE for bad
 * options; KILN_ERR_KERNEL when a config's outputs disagree with config 0's (the report
 * is still returned). */
KILN_API KilnStatus kiln_tune(const char *path, const char *src, const KilnTuneOptions *o, KilnTuneReport **out);
KILN_API void kiln_tune_report_free(KilnTuneReport *r);

/* The report as text (malloc'd, NUL-terminated; free()): CSV with a header line; a
 * terminal table; an SVG plot (time against each dimension, and the Pareto front of
 * time against registers and against shared memory). */
KILN_API KilnStatus kiln_tune_report_csv(const KilnTuneReport *r, char **out);
KILN_API KilnStatus kiln_tune_report_table(const KilnTuneReport *r, char **out);
KILN_API KilnStatus kiln_tune_report_svg(const KilnTuneReport *r, char **out);

/* The key kiln_tune stores a winner under, for the kernel o->kernel of `src` with o's
 * defines (the key's consts) and args ("seqlen_q=3000": runtime integers, bucketed):
 * "HEAD_DIM=128 CAUSAL=false seqlen_q=4096" (malloc'd). A launcher that knows its
 * arguments looks its winner up with it: kiln_tune_key, then kiln_tune_lookup. */
KILN_API KilnStatus kiln_tune_key(const char *path, const char *src, const KilnTuneOptions *o, char **key);

/* The stored winner for (src, kernel, this build, device, key): its
 * config as "NAME=VALUE NAME=VALUE ..." (malloc'd) in *config. KILN_ERR_NOT_FOUND on a
 * miss, a corrupt entry (ignored) or a disabled cache (KILN_CACHE_DISABLE=1). The
 * device string is KilnTuneReport.device's ("NVIDIA H200 sm_90a"; without a device the
 * arch alone). Entries are entries of the on-disk cache (kiln_cache_dir), keyed apart. */
KILN_API KilnStatus kiln_tune_lookup(const char *src, const char *kernel, const char *device, const char *key,
                                     char **config);

#ifdef __cplusplus
}
#endif
#endif
