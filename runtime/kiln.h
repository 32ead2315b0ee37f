/* kiln.h — Kiln's public API: compile .tile programs and run them on the GPU.
 *
 * This is the only header a host program (or the runtime itself) needs; no
 * compiler-internal header leaks through it. Every call returns a KilnStatus;
 * on failure a human-readable message is available from kiln_last_error()
 * (thread-local), including the CUDA driver's own message for driver errors.
 * Nothing here prints or exits.
 */
#ifndef KILN_H
#define KILN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum KilnStatus {
    KILN_OK = 0,
    KILN_ERR_COMPILE,      /* the program has errors: diagnostics in the result */
    KILN_ERR_USAGE,        /* bad options or arguments to an API call */
    KILN_ERR_NO_DRIVER,    /* libcuda.so.1 could not be loaded */
    KILN_ERR_NO_DEVICE,    /* driver present, no usable GPU */
    KILN_ERR_DRIVER,       /* a CUDA driver call failed: message says which and why */
    KILN_ERR_ARGS,         /* kernel arguments do not match the signature */
    KILN_ERR_IO,           /* a file could not be read or written */
    KILN_ERR_NOT_FOUND,    /* no such kernel */
    KILN_ERR_UNSUPPORTED,  /* valid request that this build cannot do (e.g. no ptxas) */
    KILN_ERR_INTERNAL,     /* a bug in Kiln */
} KilnStatus;

const char *kiln_status_name(KilnStatus s);
const char *kiln_last_error(void);
const char *kiln_version(void);

/* ---------------- compiling ---------------- */

typedef enum KilnEmit {
    KILN_EMIT_AST,       /* the parsed AST, as text */
    KILN_EMIT_IR,        /* Tile IR after the target-independent passes */
    KILN_EMIT_GPU_IR,    /* GPU IR: tile values with layouts */
    KILN_EMIT_LLVM,      /* LLVM IR text */
    KILN_EMIT_PTX,       /* PTX text */
    KILN_EMIT_CUBIN,     /* cubin bytes (runs ptxas) */
} KilnEmit;

typedef struct KilnDefine {
    const char *name;
    const char *value;   /* as written: "128", "true", "0.125", "bf16", a fn name */
} KilnDefine;

/* A fact about a runtime parameter's value that the compiler may rely on:
 * an integer parameter is a multiple of `divisibility`; a pointer parameter's
 * address is a multiple of `divisibility` bytes. A power of two (1 = nothing
 * known). A launch whose argument breaks a hint is refused (KILN_ERR_ARGS).
 * `kiln compile --assume n=16`. kiln_module_compile adds such hints by itself
 * at launch time (see kiln_module_set_specialize).
 *
 * equals_one != 0: the integer parameter's value IS 1 (`--assume n==1`; then
 * divisibility must be 0 or 1). The kernel keeps the parameter (same launch
 * ABI) but every use of it compiles as the constant 1, so a unit stride lets
 * the backend prove contiguity (vector loads, cp.async pipelining). Integer
 * parameters only (not bool). Zero-initialised hints ({"n", 16}) leave it off. */
typedef struct KilnParamHint {
    const char *name;          /* a runtime (non-const) integer or pointer parameter */
    int divisibility;
    int equals_one;            /* 0: no claim; else the value is exactly 1 */
} KilnParamHint;

typedef struct KilnCompileOptions {
    const char *kernel;        /* NULL: the only kernel of the file (error if several for GPU stages) */
    const KilnDefine *defines;
    int ndefines;
    const char *arch;          /* "sm_80", "sm_90", "sm_90a" (default) */
    int num_warps;             /* > 0 overrides the kernel's setting */
    int num_stages;            /* > 0 overrides the kernel's setting */
    KilnEmit emit;
    const char *dump_after;    /* NULL, "all" or a pass name: IR dumps go to result.dumps */
    int no_opt;                /* skip the target-independent passes */
    const KilnParamHint *hints;  /* divisibility / alignment facts (see KilnParamHint) */
    int nhints;
    int no_wgmma;              /* sm_90a: nonzero keeps every dot on mma.sync (else dots that
                                  qualify use wgmma, docs/tensor_cores.md) */
} KilnCompileOptions;

typedef enum KilnParamKind {
    KILN_PARAM_PTR, KILN_PARAM_I32, KILN_PARAM_I64, KILN_PARAM_F32, KILN_PARAM_F64,
    KILN_PARAM_I1, KILN_PARAM_I8, KILN_PARAM_I16, KILN_PARAM_U8, KILN_PARAM_U16,
    KILN_PARAM_U32, KILN_PARAM_U64, KILN_PARAM_F16, KILN_PARAM_BF16,
} KilnParamKind;

typedef struct KilnParam {
    char name[64];
    KilnParamKind kind;
    int pointee_bits;          /* for pointers: bits of the element (16 for f16) */
} KilnParam;

typedef struct KilnKernelInfo {
    char name[128];
    KilnParam *params;         /* runtime (non-const) parameters, in order */
    int nparams;
    int num_warps;
    int num_stages;
    int smem_bytes;            /* dynamic shared memory the kernel needs */
} KilnKernelInfo;

typedef struct KilnCompileResult {
    char *output;              /* the emitted stage (text, or cubin bytes) */
    size_t output_size;
    char *diagnostics;         /* errors/warnings, formatted with source lines and carets */
    char *dumps;               /* --dump-after output */
    char *stats;               /* human-readable statistics (SRAM buffers, warps...) */
    KilnKernelInfo *kernels;   /* kernels compiled (GPU stages: exactly one) */
    int nkernels;
} KilnCompileResult;

/* Compile `src` (the text of `path`). On KILN_ERR_COMPILE the diagnostics are
 * in result->diagnostics. Always call kiln_compile_result_free. */
KilnStatus kiln_compile(const char *path, const char *src, const KilnCompileOptions *opts,
                        KilnCompileResult *result);
void kiln_compile_result_free(KilnCompileResult *result);

/* Runtime API (device, memory, modules, launch, cache, timing) follows below;
 * see runtime/kiln_runtime.h sections. */
#include "kiln_runtime.h"

#ifdef __cplusplus
}
#endif
#endif
