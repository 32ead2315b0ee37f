/* cuda_loader.h — the CUDA driver, loaded at run time (internal to runtime/).
 *
 * libcuda.so.1 is never linked: rt_driver() dlopens it once and resolves the
 * functions below by their versioned names (cuMemAlloc_v2, ...), falling back
 * to the unversioned name where the versioned one is absent. Only the runtime sources
 * include this header; cuda.h gives the types and enum values.
 */
#ifndef KILN_CUDA_LOADER_H
#define KILN_CUDA_LOADER_H

#include <cuda.h>

#include "kiln_runtime.h"
#include "rt_internal.h"

typedef struct RtDriver {
    CUresult (*Init)(unsigned int);
    CUresult (*DriverGetVersion)(int *);
    CUresult (*GetErrorName)(CUresult, const char **);
    CUresult (*GetErrorString)(CUresult, const char **);
    CUresult (*DeviceGet)(CUdevice *, int);
    CUresult (*DeviceGetCount)(int *);
    CUresult (*DeviceGetName)(char *, int, CUdevice);
    CUresult (*DeviceGetAttribute)(int *, CUdevice_attribute, CUdevice);
    CUresult (*DeviceTotalMem)(size_t *, CUdevice);
    CUresult (*DevicePrimaryCtxRetain)(CUcontext *, CUdevice);
    CUresult (*DevicePrimaryCtxRelease)(CUdevice);
    CUresult (*CtxSetCurrent)(CUcontext);
    CUresult (*CtxGetCurrent)(CUcontext *);
    CUresult (*CtxSynchronize)(void);
    CUresult (*ModuleLoadDataEx)(CUmodule *, const void *, unsigned int, CUjit_option *, void **);
    CUresult (*ModuleGetFunction)(CUfunction *, CUmodule, const char *);
    CUresult (*ModuleUnload)(CUmodule);
    CUresult (*FuncSetAttribute)(CUfunction, CUfunction_attribute, int);
    CUresult (*FuncGetAttribute)(int *, CUfunction_attribute, CUfunction);
    CUresult (*LaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, CUstream, void **, void **);
    CUresult (*MemAlloc)(CUdeviceptr *, size_t);
    CUresult (*MemFree)(CUdeviceptr);
    CUresult (*MemcpyHtoD)(CUdeviceptr, const void *, size_t);
    CUresult (*MemcpyDtoH)(void *, CUdeviceptr, size_t);
    CUresult (*MemcpyDtoD)(CUdeviceptr, CUdeviceptr, size_t);
    CUresult (*MemsetD8)(CUdeviceptr, unsigned char, size_t);
    CUresult (*PointerGetAttribute)(void *, CUpointer_attribute, CUdeviceptr);
    CUresult (*StreamCreate)(CUstream *, unsigned int);
    CUresult (*StreamDestroy)(CUstream);
    CUresult (*StreamSynchronize)(CUstream);
    CUresult (*EventCreate)(CUevent *, unsigned int);
    CUresult (*EventRecord)(CUevent, CUstream);
    CUresult (*EventSynchronize)(CUevent);
    CUresult (*EventElapsedTime)(float *, CUevent, CUevent);
    CUresult (*EventDestroy)(CUevent);
    /* optional (CUDA 12+; NULL before): TMA tensor maps (tmap.c) */
    CUresult (*TensorMapEncodeTiled)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *, const cuuint64_t *,
                                     const cuuint64_t *, const cuuint32_t *, const cuuint32_t *,
                                     CUtensorMapInterleave, CUtensorMapSwizzle, CUtensorMapL2promotion,
                                     CUtensorMapFloatOOBfill);
    /* optional: how many CTAs of a kernel an SM keeps resident (persistent launches, launch.c) */
    CUresult (*OccupancyMaxActiveBlocksPerMultiprocessor)(int *, CUfunction, int, size_t);
} RtDriver;

/* The last encoding of one tensor map of a kernel and what it was encoded from. */
typedef struct RtTmapCache {
    CUtensorMap map;              /* 64-byte aligned (the allocation is) */
    RtTmapArgs in;
    int valid;
} RtTmapCache;

/* The loaded and initialised driver (cuInit done), or NULL with the status in
 * *st and the message set: KILN_ERR_NO_DRIVER or KILN_ERR_NO_DEVICE. A failed
 * load is retried by the next call (the environment may have changed). */
const RtDriver *rt_driver(KilnStatus *st);

/* Set the last error for a failed driver call and return KILN_ERR_DRIVER:
 * "cuLaunchKernel failed: CUDA_ERROR_INVALID_VALUE: invalid argument". */
KilnStatus rt_driver_error(const char *call, CUresult r);
/* The "NAME: text" of a CUresult into buf (works without a driver too). */
void rt_describe_cuda_error(CUresult r, char *buf, size_t n);

struct KilnDevice {
    const RtDriver *drv;
    CUdevice cudev;
    CUcontext ctx;
    KilnDeviceInfo info;
};

/* Make dev's context current on this thread. */
KilnStatus rt_bind(const KilnDevice *dev);

/* The raw stream of a KilnStream (NULL: the default stream) and its device. */
CUstream rt_stream_handle(const KilnStream *s);
KilnDevice *rt_stream_device(const KilnStream *s);

struct KilnKernel {
    KilnModule *module;
    CUfunction fn;
    const KilnKernelInfo *info;   /* in module->infos */
    int smem_ready;               /* dynamic SRAM limit raised (when above 48 KB) */
    int static_smem;              /* CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES */
    int resident;                 /* persistent kernels: programs the device keeps resident (0: not asked yet) */
    RtTmapCache *tmap_cache;      /* info->ntmaps entries, allocated at the first launch (tmap.c) */
    unsigned long long tmap_zero, tmap_zero_bytes;   /* zeroed device buffer for empty maps (tmap.c) */
};

struct KilnModule {
    KilnDevice *dev;
    CUmodule mod;
    KilnKernelInfo *infos;        /* deep copies, owned */
    int ninfos;
    int loose;                    /* signatures read from PTX: sizes only */
    KilnKernel *kernels;          /* one per info, fn resolved on first kiln_kernel_get */
    const RtModuleHooks *hooks;   /* set by the layer that built the module (rt_module_attach): */
    void *owner;                  /* jit's specialisation state; NULL for loaded PTX / cubin */
};

#define RT_CALL(d, call, name, ...)                                  \
    do {                                                             \
        CUresult rt_r_ = (d)->call(__VA_ARGS__);                     \
        if (rt_r_ != CUDA_SUCCESS) return rt_driver_error(name, rt_r_); \
    } while (0)

#endif
