/* kiln_runtime.h — Kiln's runtime API: devices, memory, modules, launches,
 * the on-disk kernel cache and timing, on the CUDA Driver API.
 *
 * Included by kiln.h (inside its extern "C"); do not include it on its own.
 * The CUDA driver (libcuda.so.1) is loaded with dlopen at the first kiln_init:
 * a program built against Kiln runs (and reports KILN_ERR_NO_DRIVER) on a
 * machine without one. No CUDA header is needed to use this API.
 *
 * Conventions: every call returns a KilnStatus; on failure kiln_last_error()
 * says what went wrong (driver errors name the driver call, the CUresult name
 * and the driver's text). Handles are opaque; each has a free/destroy, except
 * kernels, which belong to their module and go away with kiln_module_free.
 * Calls on a device may come from any thread: each call makes the device's
 * (primary) context current on the calling thread.
 * See docs/runtime.md for a complete host program.
 */
#ifndef KILN_RUNTIME_H
#define KILN_RUNTIME_H

/* ---------------- errors ---------------- */

/* Record `s` with a printf-formatted message as this thread's last error and
 * return `s` (for `return kiln_set_error(...)`). Used by the runtime and by
 * kiln_compile; exposed so host-side helpers can report the same way. */
KilnStatus kiln_set_error(KilnStatus s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void kiln_clear_error(void);

/* ---------------- devices ---------------- */

typedef struct KilnDevice KilnDevice;
typedef struct KilnStream KilnStream;
typedef struct KilnEvent KilnEvent;
typedef struct KilnModule KilnModule;
typedef struct KilnKernel KilnKernel;

/* A device address (CUdeviceptr). 0 is never a valid allocation. */
typedef uint64_t KilnDevPtr;

typedef struct KilnDeviceInfo {
    char name[256];            /* "NVIDIA H100 80GB HBM3" */
    int ordinal;
    int sm_major, sm_minor;    /* compute capability 9.0 -> 9, 0 */
    int sm_version;            /* 10 * major + minor: 90 */
    char arch[16];             /* the compile target Kiln picks for it: "sm_90a", "sm_80" */
    int sm_count;              /* streaming multiprocessors */
    size_t total_mem;          /* bytes of device memory */
    int max_threads_per_block;
    int max_smem_per_block;        /* bytes without opt-in (48 KB) */
    int max_smem_per_block_optin;  /* bytes with opt-in (227 KB on H100) */
    int driver_version;        /* cuDriverGetVersion: 13000 for CUDA 13.0 */
} KilnDeviceInfo;

/* How many CUDA devices there are. KILN_ERR_NO_DRIVER / KILN_ERR_NO_DEVICE as kiln_init. */
KilnStatus kiln_device_count(int *count);
/* Load the driver (once), initialise it and open device `ordinal` (its primary
 * context). Fails with KILN_ERR_NO_DRIVER ("no CUDA driver (libcuda.so.1 not
 * found): ...") or KILN_ERR_NO_DEVICE ("no GPU ..."). The environment variable
 * KILN_CUDA_LIBRARY names another driver library to load (tests use it). */
KilnStatus kiln_init(KilnDevice **dev, int ordinal);
KilnStatus kiln_device_info(const KilnDevice *dev, KilnDeviceInfo *info);
/* Wait for all work on the device. */
KilnStatus kiln_synchronize(KilnDevice *dev);
/* Release the device. Free its modules, streams, events and allocations first
 * (allocations still live are released with the context when no other
 * KilnDevice holds it). NULL is allowed. */
KilnStatus kiln_shutdown(KilnDevice *dev);

/* ---------------- memory (synchronous copies) ---------------- */

KilnStatus kiln_malloc(KilnDevice *dev, size_t bytes, KilnDevPtr *out);
KilnStatus kiln_free(KilnDevice *dev, KilnDevPtr ptr);   /* 0 is allowed */
KilnStatus kiln_memcpy_htod(KilnDevice *dev, KilnDevPtr dst, const void *src, size_t bytes);
KilnStatus kiln_memcpy_dtoh(KilnDevice *dev, void *dst, KilnDevPtr src, size_t bytes);
KilnStatus kiln_memcpy_dtod(KilnDevice *dev, KilnDevPtr dst, KilnDevPtr src, size_t bytes);
/* Set `bytes` bytes at `dst` to `value` (a byte: 0xFF fills with NaN patterns for f32/f16). */
KilnStatus kiln_memset(KilnDevice *dev, KilnDevPtr dst, uint8_t value, size_t bytes);

/* ---------------- streams and events ---------------- */

/* A NULL KilnStream * anywhere means the device's default (legacy) stream. */
KilnStatus kiln_stream_create(KilnDevice *dev, KilnStream **out);
KilnStatus kiln_stream_synchronize(KilnStream *s);
KilnStatus kiln_stream_destroy(KilnStream *s);             /* NULL is allowed */

KilnStatus kiln_event_create(KilnDevice *dev, KilnEvent **out);
KilnStatus kiln_event_record(KilnEvent *e, KilnStream *s);
KilnStatus kiln_event_synchronize(KilnEvent *e);
/* Milliseconds between two recorded events (after `end` completed). */
KilnStatus kiln_event_elapsed_ms(KilnEvent *start, KilnEvent *end, float *ms);
KilnStatus kiln_event_destroy(KilnEvent *e);                /* NULL is allowed */

/* ---------------- modules and kernels ---------------- */

/* Load PTX text (NUL-terminated). `kernels`/`nkernels` give the signatures of
 * its kernels (copied); with kernels == NULL the runtime reads them from the
 * PTX: each .entry's parameter list (by size: .u64/.b64 params accept any
 * 64-bit argument, pointer or integer; .u32/.s32/.b32 any 32-bit integer;
 * .f32/.f64 floats), num_warps from .reqntid/.maxntid (else 4), no dynamic
 * shared memory. Driver (JIT) errors come back with the JIT log. */
KilnStatus kiln_module_load_ptx(KilnDevice *dev, const char *ptx, const KilnKernelInfo *kernels,
                                int nkernels, KilnModule **out);
/* Load a cubin (or fatbin). A cubin has no readable signature: pass them. */
KilnStatus kiln_module_load_cubin(KilnDevice *dev, const void *image, size_t size,
                                  const KilnKernelInfo *kernels, int nkernels, KilnModule **out);
/* Compile a .tile source (text `src`, named `path` in diagnostics) with
 * kiln_compile and load it, going through the on-disk cache (below).
 * opts->emit: KILN_EMIT_PTX or KILN_EMIT_CUBIN are honoured; anything else
 * means "auto": a cubin when ptxas is available, else PTX. opts->arch NULL
 * means the device's arch (KilnDeviceInfo.arch). On KILN_ERR_COMPILE the
 * diagnostics are in kiln_last_error() (truncated to a few KB). */
KilnStatus kiln_module_compile(KilnDevice *dev, const char *path, const char *src,
                               const KilnCompileOptions *opts, KilnModule **out);
KilnStatus kiln_module_free(KilnModule *m);                 /* NULL is allowed */
/* Launch-time specialisation of kiln_module_compile modules (default on; the
 * environment variable KILN_SPECIALIZE=0 makes it default off). At each
 * launch, the pointer arguments that are 16-byte aligned and the integer
 * arguments that are multiples of 16 form a key; the first launch with a
 * key compiles the module's source again with those facts as hints (through
 * the on-disk cache) and loads that variant, which later launches with the
 * key reuse. The kernel handle and its info stay the same. Off: every launch
 * uses the generic kernel. Modules from kiln_module_load_ptx / _cubin never
 * specialise (the call is a no-op for them). Launch arguments must always
 * satisfy the module's own KilnCompileOptions.hints (else KILN_ERR_ARGS). */
KilnStatus kiln_module_set_specialize(KilnModule *m, int on);

/* A kernel of the module by name (NULL: the module's only kernel). The handle
 * belongs to the module: valid until kiln_module_free, never freed alone. */
KilnStatus kiln_kernel_get(KilnModule *m, const char *name, KilnKernel **out);
const KilnKernelInfo *kiln_kernel_info(const KilnKernel *k);

/* ---------------- launching ---------------- */

/* One kernel argument: a value tagged with its kind. Build them with the
 * kiln_arg_* helpers; the runtime checks them against the kernel's signature. */
typedef struct KilnArg {
    KilnParamKind kind;
    union {
        KilnDevPtr ptr;
        int64_t i;     /* signed integer kinds (and i1) */
        uint64_t u;    /* unsigned integer kinds; f16/bf16 as raw bits */
        float f32;
        double f64;
    } v;
} KilnArg;

static inline KilnArg kiln_arg_ptr(KilnDevPtr p) { KilnArg a = {KILN_PARAM_PTR, {.ptr = p}}; return a; }
static inline KilnArg kiln_arg_i32(int32_t x) { KilnArg a = {KILN_PARAM_I32, {.i = x}}; return a; }
static inline KilnArg kiln_arg_i64(int64_t x) { KilnArg a = {KILN_PARAM_I64, {.i = x}}; return a; }
static inline KilnArg kiln_arg_u32(uint32_t x) { KilnArg a = {KILN_PARAM_U32, {.u = x}}; return a; }
static inline KilnArg kiln_arg_u64(uint64_t x) { KilnArg a = {KILN_PARAM_U64, {.u = x}}; return a; }
static inline KilnArg kiln_arg_i8(int8_t x) { KilnArg a = {KILN_PARAM_I8, {.i = x}}; return a; }
static inline KilnArg kiln_arg_i16(int16_t x) { KilnArg a = {KILN_PARAM_I16, {.i = x}}; return a; }
static inline KilnArg kiln_arg_u8(uint8_t x) { KilnArg a = {KILN_PARAM_U8, {.u = x}}; return a; }
static inline KilnArg kiln_arg_u16(uint16_t x) { KilnArg a = {KILN_PARAM_U16, {.u = x}}; return a; }
static inline KilnArg kiln_arg_bool(int x) { KilnArg a = {KILN_PARAM_I1, {.i = x != 0}}; return a; }
static inline KilnArg kiln_arg_f32(float x) { KilnArg a = {KILN_PARAM_F32, {.f32 = x}}; return a; }
static inline KilnArg kiln_arg_f64(double x) { KilnArg a = {KILN_PARAM_F64, {.f64 = x}}; return a; }
/* f16 / bf16 scalars are passed as their 16-bit patterns. */
static inline KilnArg kiln_arg_f16_bits(uint16_t bits) { KilnArg a = {KILN_PARAM_F16, {.u = bits}}; return a; }
static inline KilnArg kiln_arg_bf16_bits(uint16_t bits) { KilnArg a = {KILN_PARAM_BF16, {.u = bits}}; return a; }

/* Launch `k` on grid[0] x grid[1] x grid[2] programs (0 counts as 1) with
 * 32 * num_warps threads each and info.smem_bytes of dynamic shared memory
 * (above 48 KB the kernel's limit is raised first; above the device's limit
 * the launch is refused with a message). Arguments are checked BEFORE the
 * launch: count ("kernel vec_add takes 4 arguments, got 3"), kind per
 * parameter, and every pointer argument must be device memory the driver
 * knows (a host pointer is refused, naming the parameter). Asynchronous:
 * synchronise the stream to see the results (and errors raised by the kernel). */
KilnStatus kiln_launch(KilnKernel *k, const int grid[3], KilnStream *s, const KilnArg *args, int nargs);

/* Launch once to warm up, then `reps` times, each between two events; the
 * median time in milliseconds goes to *median_ms. Synchronises `s`. */
KilnStatus kiln_time_launch(KilnKernel *k, const int grid[3], KilnStream *s, const KilnArg *args,
                            int nargs, int reps, float *median_ms);

/* ---------------- launching on host buffers (host_launch.c) ---------------- */
/* For host programs whose data lives in host memory: one call allocates a
 * device buffer per buffer argument, copies in, launches (kiln_launch: same
 * checks, same launch-time specialisation), synchronises the device, copies
 * out and frees everything, on every path. */

typedef enum KilnHostDir {
    KILN_HOST_IN = 1,      /* copied to the device before the launch */
    KILN_HOST_OUT = 2,     /* copied back after it; starts on the device as 0xFF bytes (NaN
                              for floats), so what the kernel does not write comes back as that */
    KILN_HOST_INOUT = 3,   /* copied in and back */
} KilnHostDir;

/* One argument: a host buffer (value.kind == KILN_PARAM_PTR; the kernel gets
 * a device copy of `bytes` bytes at `host`) or a scalar (value; host NULL).
 * Build them with kiln_host_buf / kiln_host_scalar. */
typedef struct KilnHostArg {
    KilnArg value;
    void *host;
    size_t bytes;
    KilnHostDir dir;
} KilnHostArg;

static inline KilnHostArg kiln_host_buf(void *host, size_t bytes, KilnHostDir dir)
{
    KilnHostArg a = {kiln_arg_ptr(0), host, bytes, dir};
    return a;
}
static inline KilnHostArg kiln_host_scalar(KilnArg value)
{
    KilnHostArg a = {value, NULL, 0, KILN_HOST_IN};
    return a;
}

/* Where kiln_host_launch stopped (callers that word their own messages use it). */
typedef enum KilnHostStep {
    KILN_HOST_STEP_NONE,      /* success */
    KILN_HOST_STEP_CHECK,     /* the kernel or the argument list (nothing touched on the device) */
    KILN_HOST_STEP_COPY_IN,   /* allocating or filling a device buffer */
    KILN_HOST_STEP_RUN,       /* kiln_launch (its checks included) or the synchronisation */
    KILN_HOST_STEP_COPY_OUT,  /* copying a result back (host buffers copied before it hold results) */
    KILN_HOST_STEP_FREE,      /* freeing a device buffer (every result is in place) */
} KilnHostStep;

/* The checks kiln_host_launch makes on the list before touching any device:
 * KILN_OK or KILN_ERR_USAGE naming the argument (a buffer without host memory
 * or of 0 bytes, a bad direction or kind, a scalar with a host buffer). */
KilnStatus kiln_host_args_check(const KilnHostArg *args, int nargs);
/* Run `k` on grid (as kiln_launch) with `args` in parameter order, on the
 * default stream of the kernel's device; returns after the results are back
 * in the host buffers. The status and kiln_last_error() are the first failing
 * call's (kiln_malloc, kiln_launch, a driver error...); *step (may be NULL)
 * says which phase that was. */
KilnStatus kiln_host_launch(KilnKernel *k, const int grid[3], const KilnHostArg *args, int nargs,
                            KilnHostStep *step);

/* ---------------- on-disk cache of compiled kernels ---------------- */
/* Entries live in $KILN_CACHE_DIR, else $HOME/.cache/kiln (created on first
 * store). KILN_CACHE_DISABLE=1 bypasses it (lookups miss, stores do nothing).
 * A key is the SHA-256 (hex) of the source text, kernel name, defines (sorted
 * by name), arch, num_warps, num_stages, emit, hints (sorted by name),
 * kiln_version() and the compiler's build identity (a hash of its sources,
 * flags and LLVM version made at build time: a rebuilt compiler never reuses
 * an older build's entries). Entries are
 * written to a temporary file in the same directory and rename()d into place,
 * so concurrent compilers never see half an entry; an entry that does not
 * verify (bad magic, wrong key, truncated, checksum) is ignored and rebuilt. */

typedef struct KilnCacheEntry {
    KilnEmit emit;           /* KILN_EMIT_PTX or KILN_EMIT_CUBIN */
    char *payload;           /* PTX text (NUL-terminated) or cubin bytes */
    size_t payload_size;
    KilnKernelInfo info;     /* info.params owned by the entry */
} KilnCacheEntry;

/* key_hex receives 64 hex digits and a NUL. `opts` as given to kiln_compile
 * (emit and arch as they will be used: resolve "auto" first). */
KilnStatus kiln_cache_key(const char *src, const KilnCompileOptions *opts, char key_hex[65]);
/* The directory in use (not created). KILN_ERR_IO when neither variable is set. */
KilnStatus kiln_cache_dir(char *buf, size_t size);
int kiln_cache_enabled(void);
/* KILN_OK and a filled entry on a hit; KILN_ERR_NOT_FOUND on a miss, a
 * corrupt entry or a disabled cache. */
KilnStatus kiln_cache_lookup(const char *key_hex, KilnCacheEntry *out);
KilnStatus kiln_cache_store(const char *key_hex, const KilnCacheEntry *e);
void kiln_cache_entry_free(KilnCacheEntry *e);

/* ---------------- attention ---------------- */
/* FlashAttention forward (lang/lib/attention_fwd.tile, embedded in the library)
 * in one call on device pointers: O = softmax(scale * Q K^T) V per (batch, head),
 * with its log-sum-exp. The call validates everything before it touches the
 * device, picks the compiled variant (dtype, head dim, causal, tile sizes) and
 * keeps it loaded per device. See docs/attention_api.md. */

typedef enum KilnDtype { KILN_F16, KILN_BF16 } KilnDtype;

typedef struct KilnAttentionParams {
    KilnDtype dtype;                   /* of Q, K, V and O */
    int batch, heads_q, heads_kv;      /* heads_q % heads_kv == 0 (GQA; heads_kv = 1 is MQA) */
    int seqlen_q, seqlen_k;            /* >= 0; seqlen_q = 0: nothing to do (KILN_OK, no launch) */
    int head_dim;                      /* 32, 64, 96, 128 or 256 */
    /* Q, O: [batch, heads_q, seqlen_q, head_dim]; K, V: [batch, heads_kv, seqlen_k, head_dim],
     * each element at b * stride[0] + h * stride[1] + s * stride[2] + d (in elements, >= 0;
     * the head dim is contiguous). [b, s, h, d] and [b, h, s, d] are both just strides.
     * Pointers 16-byte aligned; K and V may be 0 when seqlen_k == 0. */
    KilnDevPtr q, k, v, o;
    KilnDevPtr lse;                    /* required: f32, dense [batch, heads_q, seqlen_q], natural log */
    int64_t q_stride[3], k_stride[3], v_stride[3], o_stride[3];
    float softmax_scale;               /* 0: 1 / sqrt(head_dim) */
    int causal;                        /* nonzero: bottom-right aligned (query i sees keys j <= i + seqlen_k - seqlen_q) */
    /* Tuning, 0 = the default for the head dim and the device (a table in runtime/attention.c).
     * block_m/block_n: powers of two in [16, 256]; num_warps: power of two in [1, 32];
     * num_stages: [1, 8]. Setting block_m or block_n alone leaves num_warps/num_stages
     * to the program's own rule for those tiles. */
    int block_m, block_n, num_warps, num_stages;
    int no_wgmma;                      /* nonzero: mma.sync even where sm_90a's wgmma applies */
} KilnAttentionParams;

/* Validate `p` without touching any device: KILN_OK, or KILN_ERR_USAGE /
 * KILN_ERR_UNSUPPORTED with a message naming the field (exactly the checks
 * kiln_attention_fwd makes first). */
KilnStatus kiln_attention_check(const KilnAttentionParams *p);
/* Run the forward pass on `stream` (NULL: the default stream); asynchronous like
 * kiln_launch. The first call for a variant compiles it (through the on-disk
 * cache: seconds cold, milliseconds warm) and loads it; later calls on the same
 * device find it loaded. KILN_ERR_USAGE: bad arguments; KILN_ERR_UNSUPPORTED: a
 * head dim the program lacks, or more than 65535 (batch * heads_q) programs. */
KilnStatus kiln_attention_fwd(KilnDevice *dev, const KilnAttentionParams *p, KilnStream *stream);
/* Unload the variants loaded for `dev` (NULL: for every device). Call it before
 * kiln_shutdown(dev), and not while another thread runs kiln_attention_fwd on dev. */
KilnStatus kiln_attention_cache_clear(KilnDevice *dev);
/* How many variants are loaded for `dev` (NULL: for all devices). */
int kiln_attention_cache_size(const KilnDevice *dev);
/* The text of an embedded library program ("lang/lib/attention_fwd.tile"), e.g.
 * to compile a variant with hooks through kiln_module_compile; NULL if none. */
const char *kiln_lib_source(const char *path);

#endif
