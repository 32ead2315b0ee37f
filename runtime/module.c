/* module.c — load PTX / cubin images, find kernels in them, unload.
 *
 * A KilnModule owns the CUmodule, deep copies of its kernels' signatures and
 * one KilnKernel per signature (its CUfunction resolved on first
 * kiln_kernel_get). PTX goes through the driver's JIT with an error-log
 * buffer, so a rejected PTX comes back with ptxas's own complaint.
 *
 * Example: kiln_module_load_ptx(dev, ptx, NULL, 0, &m) reads the signatures
 * from the PTX; kiln_kernel_get(m, "vec_add", &k) then launches with checks.
 */
#include "cuda_loader.h"
#include "rt_internal.h"

#include <stdlib.h>
#include <string.h>

#define RT_JIT_LOG 8192

static KilnStatus load_image(KilnDevice *dev, const void *image, int is_ptx, CUmodule *mod)
{
    KilnStatus st = rt_bind(dev);
    if (st != KILN_OK) return st;
    static _Thread_local char log[RT_JIT_LOG];
    log[0] = 0;
    CUjit_option opt[2] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void *val[2] = {log, (void *)(uintptr_t)sizeof log};
    CUresult r = dev->drv->ModuleLoadDataEx(mod, image, 2, opt, val);
    if (r == CUDA_SUCCESS) return KILN_OK;
    st = rt_driver_error("cuModuleLoadDataEx", r);
    rt_append_error(is_ptx ? " (loading PTX)" : " (loading a cubin)");
    log[sizeof log - 1] = 0;
    if (log[0]) {
        rt_append_error("\n");
        rt_append_error(log);
    }
    return st;
}

static KilnStatus make_module(KilnDevice *dev, CUmodule mod, KilnKernelInfo *infos, int n, int loose,
                              KilnModule **out)
{
    KilnModule *m = calloc(1, sizeof *m);
    KilnKernel *ks = n ? calloc((size_t)n, sizeof *ks) : NULL;
    if (!m || (n && !ks)) {
        free(m);
        free(ks);
        rt_free_infos(infos, n);
        if (mod) dev->drv->ModuleUnload(mod);
        return kiln_set_error(KILN_ERR_INTERNAL, "out of host memory");
    }
    m->dev = dev;
    m->mod = mod;
    m->infos = infos;
    m->ninfos = n;
    m->loose = loose;
    m->kernels = ks;
    for (int i = 0; i < n; i++) {
        ks[i].module = m;
        ks[i].info = &infos[i];
    }
    *out = m;
    return KILN_OK;
}

static KilnStatus load_module(KilnDevice *dev, const void *image, int is_ptx, const KilnKernelInfo *kernels,
                              int nkernels, KilnModule **out)
{
    if (!out) return kiln_set_error(KILN_ERR_USAGE, "kiln_module_load: out is NULL");
    *out = NULL;
    if (!dev || !image) return kiln_set_error(KILN_ERR_USAGE, "kiln_module_load: NULL device or image");
    KilnKernelInfo *infos = NULL;
    int n = 0, loose = 0;
    KilnStatus st;
    if (kernels && nkernels > 0) {
        st = rt_copy_infos(kernels, nkernels, &infos);
        n = nkernels;
    } else if (is_ptx) {
        st = rt_ptx_signatures(image, &infos, &n);
        loose = 1;
    } else {
        st = kiln_set_error(KILN_ERR_USAGE, "kiln_module_load_cubin: a cubin needs its kernels' signatures");
    }
    if (st != KILN_OK) return st;
    CUmodule mod = NULL;
    st = load_image(dev, image, is_ptx, &mod);
    if (st != KILN_OK) {
        rt_free_infos(infos, n);
        return st;
    }
    return make_module(dev, mod, infos, n, loose, out);
}

KilnStatus kiln_module_load_ptx(KilnDevice *dev, const char *ptx, const KilnKernelInfo *kernels, int nkernels,
                                KilnModule **out)
{
    return load_module(dev, ptx, 1, kernels, nkernels, out);
}

KilnStatus kiln_module_load_cubin(KilnDevice *dev, const void *image, size_t size, const KilnKernelInfo *kernels,
                                  int nkernels, KilnModule **out)
{
    if (out) *out = NULL;
    if (size < 16) return kiln_set_error(KILN_ERR_USAGE, "kiln_module_load_cubin: %zu bytes is no cubin", size);
    return load_module(dev, image, 0, kernels, nkernels, out);
}

/* A module with signatures and no image: its owner (rt_module_attach) makes
 * the code per launch (jit's deferred compile: the select hook never hands
 * back a kernel of this module; kiln_launch refuses one without code). */
KilnStatus rt_module_new_deferred(KilnDevice *dev, const KilnKernelInfo *kernels, int nkernels, KilnModule **out)
{
    *out = NULL;
    if (!dev || !kernels || nkernels < 1) return kiln_set_error(KILN_ERR_USAGE, "rt_module_new_deferred: no kernels");
    KilnKernelInfo *infos = NULL;
    KilnStatus st = rt_copy_infos(kernels, nkernels, &infos);
    if (st != KILN_OK) return st;
    return make_module(dev, NULL, infos, nkernels, 0, out);
}

KilnStatus kiln_module_free(KilnModule *m)
{
    if (!m) return KILN_OK;
    KilnStatus st = m->mod ? rt_bind(m->dev) : KILN_OK;
    CUresult r = st == KILN_OK && m->mod ? m->dev->drv->ModuleUnload(m->mod) : CUDA_SUCCESS;
    if (m->hooks) m->hooks->release(m->owner); /* e.g. jit's variants: modules of their own */
    for (int i = 0; m->kernels && i < m->ninfos; i++) rt_tmap_free(&m->kernels[i]);
    rt_free_infos(m->infos, m->ninfos);
    free(m->kernels);
    free(m);
    if (st != KILN_OK) return st;
    return r == CUDA_SUCCESS ? KILN_OK : rt_driver_error("cuModuleUnload", r);
}

void rt_module_attach(KilnModule *m, const RtModuleHooks *hooks, void *owner)
{
    m->hooks = hooks;
    m->owner = owner;
}

void *rt_module_owner(const KilnModule *m, const RtModuleHooks *hooks)
{
    return m && m->hooks == hooks ? m->owner : NULL;
}

static KilnStatus not_found(const KilnModule *m, const char *name)
{
    kiln_set_error(KILN_ERR_NOT_FOUND, "no kernel '%s' in this module (kernels:", name);
    for (int i = 0; i < m->ninfos; i++) {
        rt_append_error(i ? ", " : " ");
        rt_append_error(m->infos[i].name);
    }
    rt_append_error(m->ninfos ? ")" : " none)");
    return KILN_ERR_NOT_FOUND;
}

KilnStatus kiln_kernel_get(KilnModule *m, const char *name, KilnKernel **out)
{
    if (!m || !out) return kiln_set_error(KILN_ERR_USAGE, "kiln_kernel_get: NULL module or out");
    *out = NULL;
    int idx = -1;
    if (!name) {
        if (m->ninfos != 1)
            return kiln_set_error(KILN_ERR_USAGE, "kiln_kernel_get: the module has %d kernels; name one", m->ninfos);
        idx = 0;
    }
    for (int i = 0; i < m->ninfos && idx < 0; i++)
        if (!strcmp(m->infos[i].name, name)) idx = i;
    if (idx < 0) return not_found(m, name);
    KilnKernel *k = &m->kernels[idx];
    if (!k->fn && m->mod) {   /* a deferred module (no image) has no functions */
        KilnStatus st = rt_bind(m->dev);
        if (st != KILN_OK) return st;
        CUresult r = m->dev->drv->ModuleGetFunction(&k->fn, m->mod, k->info->name);
        if (r == CUDA_ERROR_NOT_FOUND)
            return kiln_set_error(KILN_ERR_NOT_FOUND, "kernel '%s' has a signature but is not in the loaded image",
                                  k->info->name);
        if (r != CUDA_SUCCESS) return rt_driver_error("cuModuleGetFunction", r);
    }
    *out = k;
    return KILN_OK;
}

const KilnKernelInfo *kiln_kernel_info(const KilnKernel *k) { return k ? k->info : NULL; }
