/* module_compile.c — kiln_module_compile: .tile source -> loaded module, via the cache.
 *
 * Kept apart from module.c because it is the runtime's only call into the
 * compiler (kiln_compile, in libkiln): programs and tests that only load PTX
 * link libkiln_runtime alone and never pull this file in.
 *
 * Steps: resolve "auto" (arch from the device; cubin when ptxas can be found,
 * else PTX), key the request (kiln_cache_key), load the cached image when the
 * entry verifies, else compile, store and load. A cubin request that
 * kiln_compile answers with KILN_ERR_UNSUPPORTED (no ptxas after all) falls
 * back to PTX. Cache write failures never fail the compile. The module keeps
 * the source and resolved options (RtSpec) so that kiln_launch can compile
 * variants specialised on its arguments (specialize.c) the same way.
 *
 * rt_module_compile_deferred (the attention entry points) compiles no code up
 * front: it takes the signature from the front end and lets the first launch
 * compile the one kernel its arguments select. kiln_module_compile + a first
 * launch with aligned arguments compiles two (the generic kernel, then the
 * specialised one), each through LLVM and ptxas: seconds of a cold first call.
 */
#include "cuda_loader.h"
#include "jit_internal.h"
#include "compiler/support/ptxas.h"
#include "compiler/driver/driver.h"

#include <stdlib.h>
#include <string.h>

/* Whether a cubin can be made here: the same locator the backend runs. */
static int have_ptxas(void)
{
    char *p = ptxas_find(NULL);
    int found = p != NULL;
    free(p);
    return found;
}

static KilnStatus load_entry(KilnDevice *dev, const KilnCacheEntry *e, KilnModule **out)
{
    if (e->emit == KILN_EMIT_CUBIN)
        return kiln_module_load_cubin(dev, e->payload, e->payload_size, &e->info, 1, out);
    return kiln_module_load_ptx(dev, e->payload, &e->info, 1, out);
}

/* Compile with kiln_compile into a cache entry (owned by the caller). */
static KilnStatus compile_entry(const char *path, const char *src, const KilnCompileOptions *o, KilnCacheEntry *e)
{
    KilnCompileResult r;
    KilnStatus st = kiln_compile(path, src, o, &r);
    if (st == KILN_OK && (r.nkernels != 1 || !r.kernels || !r.output))
        st = kiln_set_error(KILN_ERR_INTERNAL, "kiln_compile returned %d kernels for %s", r.nkernels,
                            path ? path : "<input>");
    else if (st != KILN_OK) {
        kiln_set_error(st, "cannot compile %s (%s)%s", path ? path : "<input>", kiln_status_name(st),
                       r.diagnostics ? ":\n" : "");
        rt_append_error(r.diagnostics);
    }
    if (st == KILN_OK) {
        KilnKernelInfo *copy = NULL;
        st = rt_copy_infos(r.kernels, 1, &copy);
        if (st == KILN_OK) {
            e->info = copy[0];
            free(copy);
            e->emit = o->emit;
            e->payload = r.output;
            e->payload_size = r.output_size;
            r.output = NULL;
        }
    }
    kiln_compile_result_free(&r);
    return st;
}

static KilnStatus compile_load_keyed(KilnDevice *dev, const char *path, const char *src, const char *keysrc,
                                     KilnCompileOptions *o, int may_fall_back, KilnModule **out);

/* What the cache key covers: the source, plus the texts of the modules it
 * imports from disk (the embedded library's are covered by the build
 * identity). NULL: none (or out of memory): key on src alone. */
static char *keyed_source(const char *path, const char *src, const KilnCompileOptions *o)
{
    char *imports = kiln_import_digest(path, src, o);
    char *keyed = NULL;
    if (imports && (keyed = malloc(strlen(src) + strlen(imports) + 1)))
        strcat(strcpy(keyed, src), imports);
    free(imports);
    return keyed;
}

/* Key, look up, else compile and store; load. `o` is resolved (arch, emit);
 * a fallback to PTX is written back to it. */
static KilnStatus compile_load(KilnDevice *dev, const char *path, const char *src, KilnCompileOptions *o,
                               int may_fall_back, KilnModule **out)
{
    char *keyed = keyed_source(path, src, o);
    KilnStatus st = compile_load_keyed(dev, path, src, keyed ? keyed : src, o, may_fall_back, out);
    free(keyed);
    return st;
}

/* The kernel's signature without compiling its code: the front end alone
 * (emit IR: parse, sema, Tile IR passes; no LLVM, no ptxas), kept in the
 * on-disk cache as an entry without payload so a warm process skips even
 * that. A source that does not compile fails here, with its diagnostics. */
static KilnStatus signature_of(const char *path, const char *src, const KilnCompileOptions *o, KilnKernelInfo *info)
{
    KilnCompileOptions io = *o;
    io.emit = KILN_EMIT_IR;
    char *keyed = keyed_source(path, src, &io);
    char key[65];
    KilnStatus st = kiln_cache_key(keyed ? keyed : src, &io, key);
    free(keyed);
    if (st != KILN_OK) return st;
    KilnCacheEntry e;
    if (kiln_cache_lookup(key, &e) == KILN_OK) {
        KilnKernelInfo *copy = NULL;
        st = e.emit == KILN_EMIT_IR ? rt_copy_infos(&e.info, 1, &copy) : KILN_ERR_NOT_FOUND;
        kiln_cache_entry_free(&e);
        if (st == KILN_OK) {
            *info = copy[0];
            free(copy);
            return KILN_OK;
        }
    }
    st = compile_entry(path, src, &io, &e);   /* payload: the IR text, not kept */
    if (st != KILN_OK) return st;
    free(e.payload);
    e.payload = NULL;
    e.payload_size = 0;
    kiln_cache_store(key, &e);   /* best effort, as for code */
    *info = e.info;
    return KILN_OK;
}

static KilnStatus compile_load_keyed(KilnDevice *dev, const char *path, const char *src, const char *keysrc,
                                     KilnCompileOptions *o, int may_fall_back, KilnModule **out)
{
    for (int attempt = 0; attempt < 2; attempt++) {
        char key[65];
        KilnStatus st = kiln_cache_key(keysrc, o, key);
        if (st != KILN_OK) return st;
        KilnCacheEntry e;
        if (kiln_cache_lookup(key, &e) == KILN_OK) {
            st = load_entry(dev, &e, out);
            kiln_cache_entry_free(&e);
            if (st == KILN_OK) return KILN_OK;
            /* a verified entry the driver rejects (driver upgrade?): rebuild it */
        }
        st = compile_entry(path, src, o, &e);
        if (st == KILN_ERR_UNSUPPORTED && o->emit == KILN_EMIT_CUBIN && may_fall_back) {
            o->emit = KILN_EMIT_PTX; /* no ptxas after all: the driver JIT-compiles PTX */
            continue;
        }
        if (st != KILN_OK) return st;
        kiln_cache_store(key, &e); /* best effort: a read-only cache dir must not fail the compile */
        st = load_entry(dev, &e, out);
        kiln_cache_entry_free(&e);
        return st;
    }
    return kiln_set_error(KILN_ERR_INTERNAL, "kiln_module_compile: no emit mode worked");
}

/* RtSpec callbacks: a variant is a module of its own with the extra hints. */
static KilnStatus compile_variant(RtSpec *s, const KilnParamHint *hints, int nhints, KilnKernel **out,
                                  const KilnKernelInfo **info)
{
    KilnCompileOptions o = s->opts;
    o.hints = hints;
    o.nhints = nhints;
    KilnModule *m = NULL;
    KilnStatus st = compile_load(s->dev, s->path, s->src, &o, 1, &m);
    if (st == KILN_OK) st = kiln_kernel_get(m, NULL, out);
    if (st == KILN_OK) *info = kiln_kernel_info(*out);
    else kiln_module_free(m);
    return st;
}

static void release_variant(KilnKernel *k)
{
    if (k) kiln_module_free(k->module);
}

static int specialize_by_default(void)
{
    const char *e = getenv("KILN_SPECIALIZE");
    return !(e && !strcmp(e, "0"));
}

/* The request as compiled: arch from the device, "auto" emit resolved. */
static KilnCompileOptions resolve_opts(const KilnDevice *dev, const KilnCompileOptions *opts)
{
    KilnCompileOptions o = *opts;
    o.dump_after = NULL;
    if (!o.arch) o.arch = dev->info.arch;
    if (o.emit != KILN_EMIT_PTX && o.emit != KILN_EMIT_CUBIN) o.emit = have_ptxas() ? KILN_EMIT_CUBIN : KILN_EMIT_PTX;
    return o;
}

/* Keep the request for launch-time specialisation (specialize.c); frees m on failure. */
static KilnStatus attach_spec(KilnDevice *dev, KilnModule *m, const char *path, const char *src,
                              const KilnCompileOptions *o, int deferred, KilnModule **out)
{
    RtSpec *spec = rt_spec_new(path, src, o, compile_variant, release_variant);
    if (!spec) {
        kiln_module_free(m);
        return kiln_set_error(KILN_ERR_INTERNAL, "out of host memory");
    }
    spec->dev = dev;
    spec->on = specialize_by_default();
    spec->deferred = deferred;
    rt_spec_attach(m, spec);
    *out = m;
    return KILN_OK;
}

KilnStatus kiln_module_compile(KilnDevice *dev, const char *path, const char *src, const KilnCompileOptions *opts,
                               KilnModule **out)
{
    if (!out) return kiln_set_error(KILN_ERR_USAGE, "kiln_module_compile: out is NULL");
    *out = NULL;
    if (!dev || !src || !opts) return kiln_set_error(KILN_ERR_USAGE, "kiln_module_compile: NULL argument");
    KilnCompileOptions o = resolve_opts(dev, opts);
    KilnModule *m = NULL;
    KilnStatus st = compile_load(dev, path, src, &o, opts->emit != KILN_EMIT_CUBIN, &m);
    if (st != KILN_OK) return st;
    return attach_spec(dev, m, path, src, &o, 0, out);
}

KilnStatus rt_module_compile_deferred(KilnDevice *dev, const char *path, const char *src,
                                      const KilnCompileOptions *opts, KilnModule **out)
{
    *out = NULL;
    const char *defer = getenv("KILN_DEFER");   /* 0: the eager path, for A/B timings */
    if (!specialize_by_default() || (defer && !strcmp(defer, "0")))
        return kiln_module_compile(dev, path, src, opts, out);
    KilnCompileOptions o = resolve_opts(dev, opts);
    KilnKernelInfo info;
    KilnStatus st = signature_of(path, src, &o, &info);
    if (st != KILN_OK) return st;
    KilnModule *m = NULL;
    st = rt_module_new_deferred(dev, &info, 1, &m);
    free(info.params);
    if (st != KILN_OK) return st;
    return attach_spec(dev, m, path, src, &o, 1, out);
}
