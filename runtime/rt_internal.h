/* rt_internal.h — the runtime core's internal pieces that need no CUDA header:
 * argument checking, PTX signature parsing, errors, and the two points where
 * a higher layer (jit/) attaches to the core without the core knowing
 * it: module hooks and device-teardown callbacks. They are separate from the
 * driver calls so CPU tests can exercise them. Not part of the public API
 * (tests/runtime include it directly). The jit layer's own internals are in
 * jit/jit_internal.h.
 */
#ifndef KILN_RT_INTERNAL_H
#define KILN_RT_INTERNAL_H

#include "kiln_runtime.h"

#include <pthread.h>
#include <stdbool.h>

/* ---- argument checking (launch.c) ---- */

/* What the driver says an address is. */
typedef enum RtPtrClass {
    RT_PTR_DEVICE,        /* device (or managed) memory */
    RT_PTR_HOST_MAPPED,   /* page-locked host memory the device can reach */
    RT_PTR_UNKNOWN,       /* not known to the driver: ordinary host memory or garbage */
} RtPtrClass;

typedef RtPtrClass (*RtPtrClassifier)(KilnDevPtr p, void *ctx);

/* Check `args` against `info` before a launch. `loose` marks a signature read
 * from PTX, where only sizes are known (64-bit params take any 64-bit
 * argument, 32-bit integer params any 32-bit integer). `classify` may be NULL
 * (no pointer check). Returns KILN_OK or KILN_ERR_ARGS with the message set. */
KilnStatus rt_check_args(const KilnKernelInfo *info, bool loose, const KilnArg *args, int nargs,
                         RtPtrClassifier classify, void *ctx);
const char *rt_param_kind_name(KilnParamKind k);   /* "i32", "f16", "ptr" */
int rt_param_kind_bytes(KilnParamKind k);          /* bytes the kernel parameter takes */

/* ---- TMA tensor maps (tmap.c) ---- */

/* One map's inputs to cuTensorMapEncodeTiled, evaluated from a launch's arguments. */
typedef struct RtTmapArgs {
    int rank, elem_bytes, is_bf16;
    unsigned long long addr;
    unsigned long long dims[5];     /* elements, dim 0 contiguous */
    unsigned long long strides[4];  /* bytes, of dims 1 .. rank-1 */
    unsigned box[5];
    int empty;                      /* an extent <= 0: every element masked off (reads zeros) */
} RtTmapArgs;
/* What a tensor map can address, the one rule: a 16-byte-aligned base, and strides (a row of
 * n elements of elem_bytes bytes) positive multiples of 16 bytes below 2^40. rt_tmap_eval refuses
 * a launch that breaks it; the attention plans (jit) keep tma off for tensors that do. */
bool rt_tmap_base_ok(unsigned long long addr);
bool rt_tmap_stride_ok(long long n, int elem_bytes);
/* Evaluate map `m` of `info` (KilnKernelInfo.tmaps) for `args` and check what
 * TMA needs (rt_tmap_base_ok, dims up to 2^31, rt_tmap_stride_ok; an extent <= 0 sets
 * `empty`): KILN_ERR_ARGS with a message naming the kernel and argument. */
KilnStatus rt_tmap_eval(const KilnKernelInfo *info, int m, const KilnArg *args, int nargs, RtTmapArgs *out);
/* ptrs[nargs + m] = kernel k's map m, encoded for `args` (launch.c). */
KilnStatus rt_tmap_params(KilnKernel *k, const KilnArg *args, int nargs, void **ptrs);
void rt_tmap_free(KilnKernel *k);

/* ---- PTX signatures (ptx_sig.c) ---- */

/* Read every .entry of `ptx`: name, parameters (loose kinds by size) and
 * num_warps from .reqntid/.maxntid. *out is a calloc'd array (free with
 * rt_free_infos). KILN_ERR_USAGE with a message when the PTX cannot be read. */
KilnStatus rt_ptx_signatures(const char *ptx, KilnKernelInfo **out, int *n);
/* Deep copies; rt_free_infos frees what either returned. */
KilnStatus rt_copy_infos(const KilnKernelInfo *src, int n, KilnKernelInfo **out);
void rt_free_infos(KilnKernelInfo *infos, int n);

/* ---- errors (status.c) ---- */

/* rt_driver_error for a CUresult given as an int (tests; no cuda.h needed):
 * "cuLaunchKernel failed: CUDA_ERROR_INVALID_VALUE: invalid argument". */
KilnStatus rt_driver_error_code(const char *call, int code);

/* Append to the current last-error message (e.g. a JIT log or diagnostics). */
void rt_append_error(const char *text);

/* ---- hooks for the layers above (module.c, launch.c, device.c) ---- */

/* The core never calls the compiler. A module built by a higher layer (jit:
 * kiln_module_compile) carries an owner and its hooks instead: at each launch
 * `select` may run another kernel with the same signature (a variant
 * specialised on the arguments; *run = generic keeps it); kiln_module_free
 * calls `release` on the owner. Modules loaded from PTX / cubin have none. */
typedef struct RtModuleHooks {
    KilnStatus (*select)(void *owner, KilnKernel *generic, const KilnKernelInfo *info, const KilnArg *args,
                         int nargs, KilnKernel **run);
    void (*release)(void *owner);
} RtModuleHooks;
void rt_module_attach(KilnModule *m, const RtModuleHooks *hooks, void *owner);
/* A module of signatures without an image (copies of `kernels`): attach an
 * owner whose select hook compiles and returns the code for every launch
 * (jit/module_compile.c's deferred compile). Its kernels have no CUfunction;
 * kiln_launch refuses to run one itself. Needs no driver call. */
KilnStatus rt_module_new_deferred(KilnDevice *dev, const KilnKernelInfo *kernels, int nkernels, KilnModule **out);
/* m's owner when it was attached with `hooks`, else NULL (another layer's, or none). */
void *rt_module_owner(const KilnModule *m, const RtModuleHooks *hooks);

/* kiln_shutdown(dev) first calls every registered function with dev, while
 * the device's context is still alive (jit: unload the attention variants
 * cached for it). Registering a function again is a no-op; at most
 * RT_MAX_TEARDOWN functions (KILN_ERR_INTERNAL beyond). Thread-safe. */
typedef void (*RtDeviceTeardownFn)(KilnDevice *dev);
#define RT_MAX_TEARDOWN 8
KilnStatus rt_on_device_shutdown(RtDeviceTeardownFn fn);

#endif
