/* device.c — devices (primary contexts), memory, streams and events.
 *
 * A KilnDevice retains the device's primary context (the one the CUDA runtime
 * and PyTorch share, so Kiln's allocations interoperate with theirs) and
 * releases it in kiln_shutdown. Every call that touches the device first makes
 * that context current on the calling thread (rt_bind): callers may use one
 * device from several threads without any context bookkeeping.
 *
 * Example: kiln_init(&dev, 0); kiln_malloc(dev, 4096, &p); ...; kiln_free(dev, p);
 * kiln_shutdown(dev).
 */
#include "cuda_loader.h"
#include "rt_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct KilnStream {
    KilnDevice *dev;
    CUstream s;
    bool borrowed;   /* kiln_stream_wrap: the caller's stream, never destroyed here */
};

struct KilnEvent {
    KilnDevice *dev;
    CUevent e;
};

KilnStatus rt_bind(const KilnDevice *dev)
{
    CUcontext cur = NULL;
    if (dev->drv->CtxGetCurrent(&cur) == CUDA_SUCCESS && cur == dev->ctx) return KILN_OK;
    RT_CALL(dev->drv, CtxSetCurrent, "cuCtxSetCurrent", dev->ctx);
    return KILN_OK;
}

#define BIND(dev)                                    \
    do {                                             \
        KilnStatus b_st_ = rt_bind(dev);             \
        if (b_st_ != KILN_OK) return b_st_;          \
    } while (0)

#define NEED(cond, what)                                                      \
    do {                                                                      \
        if (!(cond)) return kiln_set_error(KILN_ERR_USAGE, "%s: %s", __func__, what); \
    } while (0)

KilnStatus kiln_device_count(int *count)
{
    NEED(count, "count is NULL");
    *count = 0;
    KilnStatus st;
    const RtDriver *d = rt_driver(&st);
    if (!d) return st;
    RT_CALL(d, DeviceGetCount, "cuDeviceGetCount", count);
    return KILN_OK;
}

/* The target kiln_compile should build for: Hopper gets its 'a' features;
 * anything newer runs sm_90 PTX through the driver's JIT. */
static void pick_arch(KilnDeviceInfo *in)
{
    const char *a = "sm_80";
    if (in->sm_version == 90) a = "sm_90a";
    else if (in->sm_version > 90) a = "sm_90";
    else if (in->sm_version == 86 || in->sm_version == 89) a = in->sm_version == 86 ? "sm_86" : "sm_89";
    strcpy(in->arch, a);
}

static KilnStatus query_info(KilnDevice *dv)
{
    const RtDriver *d = dv->drv;
    KilnDeviceInfo *in = &dv->info;
    RT_CALL(d, DeviceGetName, "cuDeviceGetName", in->name, (int)sizeof in->name, dv->cudev);
    struct { int *dst; CUdevice_attribute a; } q[] = {
        {&in->sm_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR},
        {&in->sm_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR},
        {&in->sm_count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT},
        {&in->max_threads_per_block, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK},
        {&in->max_smem_per_block, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK},
        {&in->max_smem_per_block_optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN},
    };
    for (size_t i = 0; i < sizeof q / sizeof q[0]; i++)
        RT_CALL(d, DeviceGetAttribute, "cuDeviceGetAttribute", q[i].dst, q[i].a, dv->cudev);
    RT_CALL(d, DeviceTotalMem, "cuDeviceTotalMem_v2", &in->total_mem, dv->cudev);
    RT_CALL(d, DriverGetVersion, "cuDriverGetVersion", &in->driver_version);
    in->sm_version = in->sm_major * 10 + in->sm_minor;
    pick_arch(in);
    return KILN_OK;
}

static KilnStatus open_device(const RtDriver *d, int ordinal, KilnDevice *dv)
{
    int n = 0;
    RT_CALL(d, DeviceGetCount, "cuDeviceGetCount", &n);
    if (n == 0) return kiln_set_error(KILN_ERR_NO_DEVICE, "no GPU (the CUDA driver sees no device)");
    if (ordinal < 0 || ordinal >= n)
        return kiln_set_error(KILN_ERR_NO_DEVICE, "no GPU with ordinal %d (%d device%s present)", ordinal, n,
                              n == 1 ? "" : "s");
    dv->drv = d;
    dv->info.ordinal = ordinal;
    RT_CALL(d, DeviceGet, "cuDeviceGet", &dv->cudev, ordinal);
    KilnStatus st = query_info(dv);
    if (st != KILN_OK) return st;
    RT_CALL(d, DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", &dv->ctx, dv->cudev);
    CUresult r = d->CtxSetCurrent(dv->ctx);
    if (r != CUDA_SUCCESS) {
        d->DevicePrimaryCtxRelease(dv->cudev);
        return rt_driver_error("cuCtxSetCurrent", r);
    }
    return KILN_OK;
}

KilnStatus kiln_init(KilnDevice **out, int ordinal)
{
    NEED(out, "out is NULL");
    *out = NULL;
    KilnStatus st;
    const RtDriver *d = rt_driver(&st);
    if (!d) return st;
    KilnDevice *dv = calloc(1, sizeof *dv);
    if (!dv) return kiln_set_error(KILN_ERR_INTERNAL, "out of host memory");
    st = open_device(d, ordinal, dv);
    if (st != KILN_OK) {
        free(dv);
        return st;
    }
    *out = dv;
    return KILN_OK;
}

KilnStatus kiln_device_info(const KilnDevice *dev, KilnDeviceInfo *info)
{
    NEED(dev && info, "NULL argument");
    *info = dev->info;
    return KILN_OK;
}

KilnStatus kiln_synchronize(KilnDevice *dev)
{
    NEED(dev, "dev is NULL");
    BIND(dev);
    RT_CALL(dev->drv, CtxSynchronize, "cuCtxSynchronize");
    return KILN_OK;
}

/* Layers above keep per-device state (jit: loaded attention variants) and
 * register a teardown for it here, so the core calls no code above it. */
static pthread_mutex_t g_teardown_lock = PTHREAD_MUTEX_INITIALIZER;
static RtDeviceTeardownFn g_teardown[RT_MAX_TEARDOWN];
static int g_nteardown;

KilnStatus rt_on_device_shutdown(RtDeviceTeardownFn fn)
{
    KilnStatus st = KILN_OK;
    pthread_mutex_lock(&g_teardown_lock);
    int i = 0;
    while (i < g_nteardown && g_teardown[i] != fn) i++;
    if (i == g_nteardown) {
        if (g_nteardown < RT_MAX_TEARDOWN) g_teardown[g_nteardown++] = fn;
        else st = kiln_set_error(KILN_ERR_INTERNAL, "internal error: rt_on_device_shutdown: more than %d teardowns",
                                 RT_MAX_TEARDOWN);
    }
    pthread_mutex_unlock(&g_teardown_lock);
    return st;
}

static void run_teardowns(KilnDevice *dev)
{
    pthread_mutex_lock(&g_teardown_lock);
    int n = g_nteardown;
    RtDeviceTeardownFn fns[RT_MAX_TEARDOWN];
    memcpy(fns, g_teardown, sizeof fns);
    pthread_mutex_unlock(&g_teardown_lock);
    for (int i = 0; i < n; i++) fns[i](dev);
}

KilnStatus kiln_shutdown(KilnDevice *dev)
{
    if (!dev) return KILN_OK;
    /* Free what layers above cached for this device (attention modules) while
     * its context is alive, so none leaks and none is found again by a later
     * device at this address. */
    run_teardowns(dev);
    CUcontext cur = NULL;
    /* Leave no dangling current context behind on this thread. */
    if (dev->drv->CtxGetCurrent(&cur) == CUDA_SUCCESS && cur == dev->ctx) dev->drv->CtxSetCurrent(NULL);
    CUresult r = dev->drv->DevicePrimaryCtxRelease(dev->cudev);
    free(dev);
    return r == CUDA_SUCCESS ? KILN_OK : rt_driver_error("cuDevicePrimaryCtxRelease", r);
}

/* ---------------- memory ---------------- */

KilnStatus kiln_malloc(KilnDevice *dev, size_t bytes, KilnDevPtr *out)
{
    NEED(dev && out, "NULL argument");
    NEED(bytes > 0, "cannot allocate 0 bytes");
    *out = 0;
    BIND(dev);
    CUdeviceptr p = 0;
    CUresult r = dev->drv->MemAlloc(&p, bytes);
    if (r != CUDA_SUCCESS) {
        KilnStatus st = rt_driver_error("cuMemAlloc_v2", r);
        char what[128];
        snprintf(what, sizeof what, " (asking for %zu bytes)", bytes);
        rt_append_error(what);
        return st;
    }
    *out = (KilnDevPtr)p;
    return KILN_OK;
}

KilnStatus kiln_free(KilnDevice *dev, KilnDevPtr ptr)
{
    NEED(dev, "dev is NULL");
    if (!ptr) return KILN_OK;
    BIND(dev);
    RT_CALL(dev->drv, MemFree, "cuMemFree_v2", (CUdeviceptr)ptr);
    return KILN_OK;
}

KilnStatus kiln_memcpy_htod(KilnDevice *dev, KilnDevPtr dst, const void *src, size_t bytes)
{
    NEED(dev && (src || !bytes), "NULL argument");
    if (!bytes) return KILN_OK;
    BIND(dev);
    RT_CALL(dev->drv, MemcpyHtoD, "cuMemcpyHtoD_v2", (CUdeviceptr)dst, src, bytes);
    return KILN_OK;
}

KilnStatus kiln_memcpy_dtoh(KilnDevice *dev, void *dst, KilnDevPtr src, size_t bytes)
{
    NEED(dev && (dst || !bytes), "NULL argument");
    if (!bytes) return KILN_OK;
    BIND(dev);
    RT_CALL(dev->drv, MemcpyDtoH, "cuMemcpyDtoH_v2", dst, (CUdeviceptr)src, bytes);
    return KILN_OK;
}

KilnStatus kiln_memcpy_dtod(KilnDevice *dev, KilnDevPtr dst, KilnDevPtr src, size_t bytes)
{
    NEED(dev, "dev is NULL");
    if (!bytes) return KILN_OK;
    BIND(dev);
    RT_CALL(dev->drv, MemcpyDtoD, "cuMemcpyDtoD_v2", (CUdeviceptr)dst, (CUdeviceptr)src, bytes);
    return KILN_OK;
}

KilnStatus kiln_memset(KilnDevice *dev, KilnDevPtr dst, uint8_t value, size_t bytes)
{
    NEED(dev, "dev is NULL");
    if (!bytes) return KILN_OK;
    BIND(dev);
    RT_CALL(dev->drv, MemsetD8, "cuMemsetD8_v2", (CUdeviceptr)dst, value, bytes);
    return KILN_OK;
}

/* ---------------- streams ---------------- */

KilnStatus kiln_stream_create(KilnDevice *dev, KilnStream **out)
{
    NEED(dev && out, "NULL argument");
    *out = NULL;
    BIND(dev);
    KilnStream *s = calloc(1, sizeof *s);
    if (!s) return kiln_set_error(KILN_ERR_INTERNAL, "out of host memory");
    CUresult r = dev->drv->StreamCreate(&s->s, CU_STREAM_DEFAULT);
    if (r != CUDA_SUCCESS) {
        free(s);
        return rt_driver_error("cuStreamCreate", r);
    }
    s->dev = dev;
    *out = s;
    return KILN_OK;
}

KilnStatus kiln_stream_wrap(KilnDevice *dev, void *cu_stream, KilnStream **out)
{
    NEED(dev && out, "NULL argument");
    *out = NULL;
    KilnStream *s = calloc(1, sizeof *s);
    if (!s) return kiln_set_error(KILN_ERR_INTERNAL, "out of host memory");
    *s = (KilnStream){.dev = dev, .s = (CUstream)cu_stream, .borrowed = true};
    *out = s;
    return KILN_OK;
}

KilnStatus kiln_stream_synchronize(KilnStream *s)
{
    NEED(s, "s is NULL (use kiln_synchronize for the default stream)");
    BIND(s->dev);
    RT_CALL(s->dev->drv, StreamSynchronize, "cuStreamSynchronize", s->s);
    return KILN_OK;
}

KilnStatus kiln_stream_destroy(KilnStream *s)
{
    if (!s) return KILN_OK;
    if (s->borrowed) {   /* the caller's stream: only the handle is ours */
        free(s);
        return KILN_OK;
    }
    KilnStatus st = rt_bind(s->dev);
    CUresult r = st == KILN_OK ? s->dev->drv->StreamDestroy(s->s) : CUDA_SUCCESS;
    free(s);
    if (st != KILN_OK) return st;
    return r == CUDA_SUCCESS ? KILN_OK : rt_driver_error("cuStreamDestroy_v2", r);
}

/* The raw stream of a KilnStream (NULL: the default stream), for launch.c. */
CUstream rt_stream_handle(const KilnStream *s) { return s ? s->s : NULL; }
KilnDevice *rt_stream_device(const KilnStream *s) { return s ? s->dev : NULL; }

/* ---------------- events ---------------- */

KilnStatus kiln_event_create(KilnDevice *dev, KilnEvent **out)
{
    NEED(dev && out, "NULL argument");
    *out = NULL;
    BIND(dev);
    KilnEvent *e = calloc(1, sizeof *e);
    if (!e) return kiln_set_error(KILN_ERR_INTERNAL, "out of host memory");
    CUresult r = dev->drv->EventCreate(&e->e, CU_EVENT_DEFAULT);
    if (r != CUDA_SUCCESS) {
        free(e);
        return rt_driver_error("cuEventCreate", r);
    }
    e->dev = dev;
    *out = e;
    return KILN_OK;
}

KilnStatus kiln_event_record(KilnEvent *e, KilnStream *s)
{
    NEED(e, "e is NULL");
    NEED(!s || s->dev == e->dev, "the stream belongs to another KilnDevice");
    BIND(e->dev);
    RT_CALL(e->dev->drv, EventRecord, "cuEventRecord", e->e, rt_stream_handle(s));
    return KILN_OK;
}

KilnStatus kiln_event_synchronize(KilnEvent *e)
{
    NEED(e, "e is NULL");
    BIND(e->dev);
    RT_CALL(e->dev->drv, EventSynchronize, "cuEventSynchronize", e->e);
    return KILN_OK;
}

KilnStatus kiln_event_elapsed_ms(KilnEvent *start, KilnEvent *end, float *ms)
{
    NEED(start && end && ms, "NULL argument");
    BIND(start->dev);
    RT_CALL(start->dev->drv, EventElapsedTime, "cuEventElapsedTime", ms, start->e, end->e);
    return KILN_OK;
}

KilnStatus kiln_event_destroy(KilnEvent *e)
{
    if (!e) return KILN_OK;
    KilnStatus st = rt_bind(e->dev);
    CUresult r = st == KILN_OK ? e->dev->drv->EventDestroy(e->e) : CUDA_SUCCESS;
    free(e);
    if (st != KILN_OK) return st;
    return r == CUDA_SUCCESS ? KILN_OK : rt_driver_error("cuEventDestroy_v2", r);
}
