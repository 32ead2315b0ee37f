/* rt_internal.h — the runtime's internal pieces that need no CUDA header:
 * argument checking, PTX signature parsing, hashing and the cache file format.
 * They are separate from the driver calls so CPU tests can exercise them.
 * Not part of the public API (tests/runtime include it directly).
 */
#ifndef KILN_RT_INTERNAL_H
#define KILN_RT_INTERNAL_H

#include "kiln.h"

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

/* ---- PTX signatures (ptx_sig.c) ---- */

/* Read every .entry of `ptx`: name, parameters (loose kinds by size) and
 * num_warps from .reqntid/.maxntid. *out is a calloc'd array (free with
 * rt_free_infos). KILN_ERR_USAGE with a message when the PTX cannot be read. */
KilnStatus rt_ptx_signatures(const char *ptx, KilnKernelInfo **out, int *n);
/* Deep copies; rt_free_infos frees what either returned. */
KilnStatus rt_copy_infos(const KilnKernelInfo *src, int n, KilnKernelInfo **out);
void rt_free_infos(KilnKernelInfo *infos, int n);

/* ---- hashing (sha256.c) ---- */

typedef struct RtSha256 {
    uint32_t h[8];
    uint64_t len;
    uint8_t buf[64];
    size_t nbuf;
} RtSha256;
void rt_sha256_init(RtSha256 *s);
void rt_sha256_update(RtSha256 *s, const void *data, size_t n);
void rt_sha256_final(RtSha256 *s, uint8_t out[32]);
void rt_sha256_hex(const void *data, size_t n, char hex[65]);

/* ---- cache entry encoding (cache.c) ---- */

/* Serialise an entry for key `key_hex` (malloc'd bytes); parse one back,
 * verifying magic, key, sizes and checksum. Parsing never trusts the bytes. */
KilnStatus rt_cache_encode(const char *key_hex, const KilnCacheEntry *e, uint8_t **out, size_t *size);
KilnStatus rt_cache_decode(const char *key_hex, const uint8_t *data, size_t size, KilnCacheEntry *out);
/* The file name of an entry in `dir` (malloc'd). */
char *rt_cache_path(const char *dir, const char *key_hex);

/* ---- errors (status.c) ---- */

/* rt_driver_error for a CUresult given as an int (tests; no cuda.h needed):
 * "cuLaunchKernel failed: CUDA_ERROR_INVALID_VALUE: invalid argument". */
KilnStatus rt_driver_error_code(const char *call, int code);

/* Append to the current last-error message (e.g. a JIT log or diagnostics). */
void rt_append_error(const char *text);

#endif
