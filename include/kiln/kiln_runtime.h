/* kiln_runtime.h — Kiln's runtime API: status and errors, devices, memory,
 * streams and events, loading PTX / cubin modules, launches (on device or
 * host buffers), and f16/bf16 conversions for host data.
 *
 * Self-contained: a program that only loads and launches kernels compiled
 * elsewhere needs this header alone, and the code behind it (runtime/, the
 * library kiln_runtime) contains no compiler. Compiling .tile programs —
 * offline, on the CPU interpreter or straight onto a device — is in
 * kiln_compile.h, attention in kiln_attention.h; kiln.h includes all three.
 *
 * The CUDA driver (libcuda.so.1) is loaded with dlopen at the first kiln_init:
 * a program built against Kiln runs (and reports KILN_ERR_NO_DRIVER) on a
 * machine without one. No CUDA header is needed to use this API.
 *
 * Conventions: every call returns a KilnStatus; on failure kiln_last_error()
 * (thread-local) says what went wrong (driver errors name the driver call,
 * the CUresult name and the driver's text). Nothing here prints or exits.
 * Handles are opaque; each has a free/destroy, except kernels, which belong
 * to their module and go away with kiln_module_free. Calls on a device may
 * come from any thread: each call makes the device's (primary) context
 * current on the calling thread. See docs/runtime.md for a complete program.
 */
#ifndef KILN_RUNTIME_H
#define KILN_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

/* Marks the functions the shared library exports (it is built with
 * -fvisibility=hidden: everything else in it stays internal). */
#ifndef KILN_API
#if defined(__GNUC__) || defined(__clang__)
#define KILN_API __attribute__((visibility("default")))
#else
#define KILN_API
#endif
#endif

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
    KILN_ERR_KERNEL,       /* the kernel failed while running on the CPU interpreter (an access
                              outside every buffer, a failed device_assert): message says where */
} KilnStatus;

KILN_API const char *kiln_status_name(KilnStatus s);
KILN_API const char *kiln_last_error(void);
KILN_API const char *kiln_version(void);

/* ---------------- errors ---------------- */

/* Record `s` with a printf-formatted message as this thread's last error and
 * return `s` (for `return kiln_set_error(...)`). Used by the library itself;
 * exposed so host-side helpers can report the same way. */
KILN_API KilnStatus kiln_set_error(KilnStatus s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
KILN_API void kiln_clear_error(void);

/* ---------------- f16 / bf16 on the host ---------------- */
/* IEEE binary16 and bfloat16 <-> float, round to nearest even, with
 * subnormals, infinities and NaNs: the same bits the compiler's constant
 * folder, the CPU interpreter and the GPU's cvt.rn produce. For filling
 * f16/bf16 buffers and reading them back. */
KILN_API uint16_t kiln_f32_to_f16(float x);
KILN_API float kiln_f16_to_f32(uint16_t h);
KILN_API uint16_t kiln_f32_to_bf16(float x);
KILN_API float kiln_bf16_to_f32(uint16_t h);
/* OCP FP8 E4M3 (e4m3fn, torch.float8_e4m3fn): round to nearest even,
 * saturating to +-448 (infinities too), NaN -> 0x7f: the bits of PTX's
 * cvt.rn.satfinite.e4m3x2.f32 and of the interpreter. Decoding is exact. */
KILN_API uint8_t kiln_f32_to_e4m3(float x);
KILN_API float kiln_e4m3_to_f32(uint8_t c);

/* ---------------- kernel signatures ---------------- */

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

/* A value known at launch: (param >= 0 ? the integer argument `param` : 1) * k. */
typedef struct KilnTmapValue {
    int param;
    long long k;
} KilnTmapValue;

/* How to encode one TMA tensor map (cuTensorMapEncodeTiled) from a launch's
 * arguments: the kernel takes it as an extra 128-byte parameter after its own
 * (kiln_launch appends it; docs/runtime.md "Tensor-map parameters"). Dim 0 is
 * the contiguous one; interleave none, out-of-bounds elements read as zero. */
#define KILN_MAX_TMAPS 8
typedef struct KilnTensorMapInfo {
    int rank;                  /* 2 */
    int base_param;            /* the pointer argument that is the global address */
    int elem_bytes;            /* 2: f16 (is_bf16 = 0) or bf16 */
    int is_bf16;
    int swizzle_bytes;         /* 128: CU_TENSOR_MAP_SWIZZLE_128B */
    KilnTmapValue dims[5];     /* elements */
    KilnTmapValue strides[4];  /* bytes, of dims 1 .. rank-1 */
    int box[5];                /* elements */
    unsigned long long nonneg_params;  /* bit i: argument i must be >= 0 (the map's coordinates
                                          are derived from it; a negative one is refused) */
} KilnTensorMapInfo;

typedef struct KilnKernelInfo {
    char name[128];
    KilnParam *params;         /* runtime (non-const) parameters, in order */
    int nparams;
    int num_warps;
    int num_stages;
    int smem_bytes;            /* dynamic shared memory the kernel needs */
    int ntmaps;                /* TMA tensor-map parameters after params (KilnCompileOptions.tma) */
    KilnTensorMapInfo tmaps[KILN_MAX_TMAPS];
    int persistent;            /* compiled --persistent (1) or --longest-first (2): the kernel
                                  takes three more i32 parameters after params (the logical
                                  grid) and kiln_launch launches as many programs as the
                                  device keeps resident, never more than the logical grid's
                                  programs (KilnSchedule.persistent, docs/passes.md) */
} KilnKernelInfo;

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
KILN_API KilnStatus kiln_device_count(int *count);
/* Load the driver (once), initialise it and open device `ordinal` (its primary
 * context). Fails with KILN_ERR_NO_DRIVER ("no CUDA driver (libcuda.so.1 not
 * found): ...") or KILN_ERR_NO_DEVICE ("no GPU ..."). The environment variable
 * KILN_CUDA_LIBRARY names another driver library to load (tests use it). */
KILN_API KilnStatus kiln_init(KilnDevice **dev, int ordinal);
KILN_API KilnStatus kiln_device_info(const KilnDevice *dev, KilnDeviceInfo *info);
/* Wait for all work on the device. */
KILN_API KilnStatus kiln_synchronize(KilnDevice *dev);
/* Release the device. Free its modules, streams, events and allocations first
 * (allocations still live are released with the context when no other
 * KilnDevice holds it). NULL is allowed. */
KILN_API KilnStatus kiln_shutdown(KilnDevice *dev);

/* ---------------- memory (synchronous copies) ---------------- */

KILN_API KilnStatus kiln_malloc(KilnDevice *dev, size_t bytes, KilnDevPtr *out);
KILN_API KilnStatus kiln_free(KilnDevice *dev, KilnDevPtr ptr);   /* 0 is allowed */
KILN_API KilnStatus kiln_memcpy_htod(KilnDevice *dev, KilnDevPtr dst, const void *src, size_t bytes);
KILN_API KilnStatus kiln_memcpy_dtoh(KilnDevice *dev, void *dst, KilnDevPtr src, size_t bytes);
KILN_API KilnStatus kiln_memcpy_dtod(KilnDevice *dev, KilnDevPtr dst, KilnDevPtr src, size_t bytes);
/* Set `bytes` bytes at `dst` to `value` (a byte: 0xFF fills with NaN patterns for f32/f16). */
KILN_API KilnStatus kiln_memset(KilnDevice *dev, KilnDevPtr dst, uint8_t value, size_t bytes);

/* ---------------- streams and events ---------------- */

/* A NULL KilnStream * anywhere means the device's default (legacy) stream. */
KILN_API KilnStatus kiln_stream_create(KilnDevice *dev, KilnStream **out);
/* A KilnStream for a CUDA stream made by someone else on dev's context (the primary
 * context, which the CUDA runtime and PyTorch use too): `cu_stream` is a CUstream
 * (torch.cuda.current_stream().cuda_stream; NULL: the legacy default stream). Launches on it
 * are ordered with the caller's work and are captured when the caller captures the stream
 * into a CUDA graph. kiln_stream_destroy frees the handle only, never the stream. */
KILN_API KilnStatus kiln_stream_wrap(KilnDevice *dev, void *cu_stream, KilnStream **out);
KILN_API KilnStatus kiln_stream_synchronize(KilnStream *s);
KILN_API KilnStatus kiln_stream_destroy(KilnStream *s);             /* NULL is allowed */

KILN_API KilnStatus kiln_event_create(KilnDevice *dev, KilnEvent **out);
KILN_API KilnStatus kiln_event_record(KilnEvent *e, KilnStream *s);
KILN_API KilnStatus kiln_event_synchronize(KilnEvent *e);
/* Milliseconds between two recorded events (after `end` completed). */
KILN_API KilnStatus kiln_event_elapsed_ms(KilnEvent *start, KilnEvent *end, float *ms);
KILN_API KilnStatus kiln_event_destroy(KilnEvent *e);                /* NULL is allowed */

/* ---------------- modules and kernels ---------------- */

/* Load PTX text (NUL-terminated). `kernels`/`nkernels` give the signatures of
 * its kernels (copied); with kernels == NULL the runtime reads them from the
 * PTX: each .entry's parameter list (by size: .u64/.b64 params accept any
 * 64-bit argument, pointer or integer; .u32/.s32/.b32 any 32-bit integer;
 * .f32/.f64 floats), num_warps from .reqntid/.maxntid (else 4), no dynamic
 * shared memory. Driver (JIT) errors come back with the JIT log. */
KILN_API KilnStatus kiln_module_load_ptx(KilnDevice *dev, const char *ptx, const KilnKernelInfo *kernels,
                                int nkernels, KilnModule **out);
/* Load a cubin (or fatbin). A cubin has no readable signature: pass them. */
KILN_API KilnStatus kiln_module_load_cubin(KilnDevice *dev, const void *image, size_t size,
                                  const KilnKernelInfo *kernels, int nkernels, KilnModule **out);
KILN_API KilnStatus kiln_module_free(KilnModule *m);                 /* NULL is allowed */
/* A kernel of the module by name (NULL: the module's only kernel). The handle
 * belongs to the module: valid until kiln_module_free, never freed alone. */
KILN_API KilnStatus kiln_kernel_get(KilnModule *m, const char *name, KilnKernel **out);
KILN_API const KilnKernelInfo *kiln_kernel_info(const KilnKernel *k);

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
 * 32 * num_warps threads each and info.smem_bytes of dynamic shared memory (both those
 * of the variant that runs: a compiled module's launch may pick one specialised on the
 * arguments, whose num_warps can exceed the generic kernel's by the 4 warps of warp
 * specialisation's producer, docs/tensor_cores.md 5b)
 * (above 48 KB the kernel's limit is raised first; above the device's limit
 * the launch is refused with a message). Arguments are checked BEFORE the
 * launch: count ("kernel vec_add takes 4 arguments, got 3"), kind per
 * parameter, and every pointer argument must be device memory the driver
 * knows (a host pointer is refused, naming the parameter). Asynchronous:
 * synchronise the stream to see the results (and errors raised by the kernel). */
KILN_API KilnStatus kiln_launch(KilnKernel *k, const int grid[3], KilnStream *s, const KilnArg *args, int nargs);

/* Launch once to warm up, then `reps` times, each between two events; the
 * median time in milliseconds goes to *median_ms. Synchronises `s`. */
KILN_API KilnStatus kiln_time_launch(KilnKernel *k, const int grid[3], KilnStream *s, const KilnArg *args,
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
KILN_API KilnStatus kiln_host_args_check(const KilnHostArg *args, int nargs);
/* Run `k` on grid (as kiln_launch) with `args` in parameter order, on the
 * default stream of the kernel's device; returns after the results are back
 * in the host buffers. The status and kiln_last_error() are the first failing
 * call's (kiln_malloc, kiln_launch, a driver error...); *step (may be NULL)
 * says which phase that was. */
KILN_API KilnStatus kiln_host_launch(KilnKernel *k, const int grid[3], const KilnHostArg *args, int nargs,
                            KilnHostStep *step);

#ifdef __cplusplus
}
#endif
#endif
