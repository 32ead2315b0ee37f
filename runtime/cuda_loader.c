/* cuda_loader.c — find libcuda.so.1 at run time and fill the driver table.
 *
 * Why dlopen: a program built with Kiln must start (and compile, and run the
 * interpreter) on machines without an NVIDIA driver, and report
 * KILN_ERR_NO_DRIVER there instead of failing to load.
 *
 * Invariants: the table is filled completely or not at all; once loaded and
 * initialised (cuInit succeeded) it stays for the life of the process (the
 * driver is never dlclosed: it keeps threads of its own). A failure is not
 * cached, so a later call (say with another KILN_CUDA_LIBRARY) tries again.
 *
 * Example: KILN_CUDA_LIBRARY=/nonexistent -> KILN_ERR_NO_DRIVER, message
 * "no CUDA driver (libcuda.so.1 not found): /nonexistent: cannot open shared
 * object file: No such file or directory".
 */
#include "cuda_loader.h"
#include "rt_internal.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Dropped from cuda.h in CUDA 13, still returned by older drivers. */
#define RT_CUDA_ERROR_INSUFFICIENT_DRIVER ((CUresult)35)

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static RtDriver g_drv;
static int g_ready;

/* Names and texts of common CUresults, for when the driver cannot tell us
 * (no driver loaded, the stub library, or a failing cuGetErrorName). The
 * texts are the driver's own. */
static const struct { int code; const char *name, *text; } g_fallback[] = {
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {CUDA_ERROR_STUB_LIBRARY, "CUDA_ERROR_STUB_LIBRARY", "CUDA driver is a stub library"},
    {RT_CUDA_ERROR_INSUFFICIENT_DRIVER, "CUDA_ERROR_INSUFFICIENT_DRIVER",
     "CUDA driver version is insufficient for CUDA runtime version"},
    {CUDA_ERROR_SYSTEM_DRIVER_MISMATCH, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
     "system has unsupported display driver / cuda driver combination"},
    {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {CUDA_ERROR_INVALID_PTX, "CUDA_ERROR_INVALID_PTX", "a PTX JIT compilation failed"},
    {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {CUDA_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
    {CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
    {CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

/* Describe r with d's cuGetErrorName/String when d is given, else from the table. */
static void describe_with(const RtDriver *d, CUresult r, char *buf, size_t n)
{
    const char *name = NULL, *text = NULL;
    if (d && d->GetErrorName(r, &name) != CUDA_SUCCESS) name = NULL;
    if (d && d->GetErrorString(r, &text) != CUDA_SUCCESS) text = NULL;
    for (size_t i = 0; i < sizeof g_fallback / sizeof g_fallback[0] && !name; i++)
        if (g_fallback[i].code == (int)r) {
            name = g_fallback[i].name;
            text = g_fallback[i].text;
        }
    if (name && text) snprintf(buf, n, "%s: %s", name, text);
    else if (name) snprintf(buf, n, "%s", name);
    else snprintf(buf, n, "CUresult %d", (int)r);
}

void rt_describe_cuda_error(CUresult r, char *buf, size_t n)
{
    /* g_ready is set once, after the table is complete, and never cleared */
    pthread_mutex_lock(&g_lock);
    const RtDriver *d = g_ready ? &g_drv : NULL;
    pthread_mutex_unlock(&g_lock);
    describe_with(d, r, buf, n);
}

KilnStatus rt_driver_error_code(const char *call, int code) { return rt_driver_error(call, (CUresult)code); }

KilnStatus rt_driver_error(const char *call, CUresult r)
{
    char what[256];
    rt_describe_cuda_error(r, what, sizeof what);
    return kiln_set_error(KILN_ERR_DRIVER, "%s failed: %s", call, what);
}

/* Resolve `name` (the versioned one first) into *slot. */
static int resolve(void *lib, void **slot, const char *v2, const char *plain, const char **missing)
{
    void *p = v2 ? dlsym(lib, v2) : NULL;
    if (!p) p = dlsym(lib, plain);
    if (!p) {
        *missing = plain;
        return 0;
    }
    *slot = p;
    return 1;
}

#define SYM(field, plain) ok = ok && resolve(lib, (void **)&d->field, NULL, plain, missing)
#define SYMV(field, v2, plain) ok = ok && resolve(lib, (void **)&d->field, v2, plain, missing)

static int fill_table(void *lib, RtDriver *d, const char **missing)
{
    int ok = 1;
    SYM(Init, "cuInit");
    SYM(DriverGetVersion, "cuDriverGetVersion");
    SYM(GetErrorName, "cuGetErrorName");
    SYM(GetErrorString, "cuGetErrorString");
    SYM(DeviceGet, "cuDeviceGet");
    SYM(DeviceGetCount, "cuDeviceGetCount");
    SYM(DeviceGetName, "cuDeviceGetName");
    SYM(DeviceGetAttribute, "cuDeviceGetAttribute");
    SYMV(DeviceTotalMem, "cuDeviceTotalMem_v2", "cuDeviceTotalMem");
    SYM(DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
    SYMV(DevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease");
    SYM(CtxSetCurrent, "cuCtxSetCurrent");
    SYM(CtxGetCurrent, "cuCtxGetCurrent");
    SYM(CtxSynchronize, "cuCtxSynchronize");
    SYM(ModuleLoadDataEx, "cuModuleLoadDataEx");
    SYM(ModuleGetFunction, "cuModuleGetFunction");
    SYM(ModuleUnload, "cuModuleUnload");
    SYM(FuncSetAttribute, "cuFuncSetAttribute");
    SYM(FuncGetAttribute, "cuFuncGetAttribute");
    SYM(LaunchKernel, "cuLaunchKernel");
    SYMV(MemAlloc, "cuMemAlloc_v2", "cuMemAlloc");
    SYMV(MemFree, "cuMemFree_v2", "cuMemFree");
    SYMV(MemcpyHtoD, "cuMemcpyHtoD_v2", "cuMemcpyHtoD");
    SYMV(MemcpyDtoH, "cuMemcpyDtoH_v2", "cuMemcpyDtoH");
    SYMV(MemcpyDtoD, "cuMemcpyDtoD_v2", "cuMemcpyDtoD");
    SYMV(MemsetD8, "cuMemsetD8_v2", "cuMemsetD8");
    SYM(PointerGetAttribute, "cuPointerGetAttribute");
    SYM(StreamCreate, "cuStreamCreate");
    SYMV(StreamDestroy, "cuStreamDestroy_v2", "cuStreamDestroy");
    SYM(StreamSynchronize, "cuStreamSynchronize");
    SYM(EventCreate, "cuEventCreate");
    SYM(EventRecord, "cuEventRecord");
    SYM(EventSynchronize, "cuEventSynchronize");
    SYMV(EventElapsedTime, "cuEventElapsedTime_v2", "cuEventElapsedTime");
    SYMV(EventDestroy, "cuEventDestroy_v2", "cuEventDestroy");
    return ok;
}

/* What a failed cuInit means for the caller: no usable driver, or no GPU. */
static KilnStatus init_failure(const RtDriver *d, CUresult r, const char *libname)
{
    char what[256];
    describe_with(d, r, what, sizeof what);
    if (r == CUDA_ERROR_STUB_LIBRARY || r == RT_CUDA_ERROR_INSUFFICIENT_DRIVER || r == CUDA_ERROR_SYSTEM_DRIVER_MISMATCH)
        return kiln_set_error(KILN_ERR_NO_DRIVER, "no CUDA driver (%s is not a usable driver): cuInit: %s",
                              libname, what);
    return kiln_set_error(KILN_ERR_NO_DEVICE, "no GPU (cuInit: %s)", what);
}

static KilnStatus load_locked(void)
{
    const char *env = getenv("KILN_CUDA_LIBRARY");
    const char *libname = env && *env ? env : "libcuda.so.1";
    void *lib = dlopen(libname, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *why = dlerror();
        return kiln_set_error(KILN_ERR_NO_DRIVER, "no CUDA driver (libcuda.so.1 not found): %s",
                              why ? why : libname);
    }
    RtDriver d;
    memset(&d, 0, sizeof d);
    const char *missing = NULL;
    if (!fill_table(lib, &d, &missing)) {
        dlclose(lib);
        return kiln_set_error(KILN_ERR_NO_DRIVER, "no CUDA driver (%s lacks %s: too old?)", libname, missing);
    }
    /* optional: absent before CUDA 12 (kernels compiled with tma then fail to launch, saying so) */
    d.TensorMapEncodeTiled = (__typeof__(d.TensorMapEncodeTiled))dlsym(lib, "cuTensorMapEncodeTiled");
    d.OccupancyMaxActiveBlocksPerMultiprocessor = (__typeof__(d.OccupancyMaxActiveBlocksPerMultiprocessor))dlsym(
        lib, "cuOccupancyMaxActiveBlocksPerMultiprocessor");
    CUresult r = d.Init(0);
    if (r != CUDA_SUCCESS) {
        KilnStatus st = init_failure(&d, r, libname);
        dlclose(lib);
        return st;
    }
    g_drv = d;
    g_ready = 1;
    return KILN_OK;
}

const RtDriver *rt_driver(KilnStatus *st)
{
    pthread_mutex_lock(&g_lock);
    KilnStatus s = g_ready ? KILN_OK : load_locked();
    pthread_mutex_unlock(&g_lock);
    *st = s;
    return s == KILN_OK ? &g_drv : NULL;
}
