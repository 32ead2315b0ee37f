/* specialize.c — launch-time specialisation of compiled modules (Triton's
 * "specialization key").
 *
 * A module made by kiln_module_compile keeps its source and options (RtSpec).
 * At each launch, rt_spec_select computes a key from the arguments: one bit per
 * pointer argument whose address is a multiple of 16 and per integer argument
 * whose value is a multiple of 16, and a "ones" bit per integer argument equal
 * to 1 (bits the module's own hints already imply are left out). An empty key
 * launches the generic kernel. Otherwise the key's variant — the same source
 * compiled with NAME=16 hints for the first kind of parameter, so masked
 * loads and stores can use 16-byte vectors, and NAME==1 for the second, so a
 * unit stride is a constant and the GPU backend can prove contiguity (vector
 * loads, cp.async pipelining of dot operands) — is looked
 * up in the module's table, or compiled (through the on-disk cache: the hints
 * are part of the cache key), checked to have the generic kernel's signature,
 * and added. Later launches with the same key find it with one mutex-guarded
 * scan (microseconds).
 *
 * Invariants: a variant is only ever used for arguments that satisfy all of
 * its hints (the key is recomputed for every launch); each key compiles at
 * most once per module (compiles are serialised by compile_lock and the table
 * is re-checked under it); variants are released with the module.
 * A deferred module (rt_module_compile_deferred: signatures, no code) keeps
 * its generic kernel in the table too, under the empty key, compiled only when
 * a launch needs it: the first launch compiles exactly one kernel.
 * rt_spec_ready is the warm path of the attention calls (rt_attn_prepare):
 * the kernel their bound arguments select, when compiled, launched directly.
 * The compile and release steps are function pointers so that the table logic
 * is testable on the CPU and this file never pulls the compiler into programs
 * that link only the runtime.
 *
 * Example: vec_add(X, Y, Z, n) launched with kiln_malloc'd buffers and
 * n = 1 << 20 has key {X, Y, Z, n}: the first launch compiles the variant
 * with hints X=16 Y=16 Z=16 n=16, the next ones reuse it; n = 1000001 gives
 * key {X, Y, Z}, a second variant. examples/matmul.tile launched on row-major
 * A and B (stride_ak = stride_bn = 1) gets ones {stride_ak, stride_bn, and
 * stride_cn} besides the 16-bits, and its variant pipelines with cp.async.
 */
#include "cuda_loader.h"
#include "jit_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool is_int_kind(KilnParamKind k)
{
    switch (k) {
    case KILN_PARAM_I8: case KILN_PARAM_I16: case KILN_PARAM_I32: case KILN_PARAM_I64:
    case KILN_PARAM_U8: case KILN_PARAM_U16: case KILN_PARAM_U32: case KILN_PARAM_U64:
        return true;
    default:
        return false;
    }
}

/* The low bits of a pointer or integer argument (two's complement: a signed
 * value's divisibility by a power of two reads the same). */
static uint64_t arg_bits(const KilnArg *a) { return a->kind == KILN_PARAM_PTR ? a->v.ptr : a->v.u; }

/* The integer argument `a` of kind `k`, as the kernel sees it (truncated to
 * the parameter's width), is 1. */
static bool arg_is_one(KilnParamKind k, const KilnArg *a)
{
    int bits = k == KILN_PARAM_I8 || k == KILN_PARAM_U8 ? 8 : k == KILN_PARAM_I16 || k == KILN_PARAM_U16 ? 16
             : k == KILN_PARAM_I32 || k == KILN_PARAM_U32 ? 32 : 64;
    uint64_t mask = bits == 64 ? ~(uint64_t)0 : ((uint64_t)1 << bits) - 1;
    return (a->v.u & mask) == 1;
}

/* The module was compiled with a NAME==1 hint for `name`. */
static bool hint_one(const KilnParamHint *hints, int nhints, const char *name)
{
    for (int i = 0; i < nhints; i++)
        if (hints[i].equals_one && hints[i].name && !strcmp(hints[i].name, name)) return true;
    return false;
}

/* The largest hint the module was compiled with for `name` (1: none). */
static int64_t hint_for(const KilnParamHint *hints, int nhints, const char *name)
{
    int64_t d = 1;
    for (int i = 0; i < nhints; i++)
        if (hints[i].name && !strcmp(hints[i].name, name) && hints[i].divisibility > d) d = hints[i].divisibility;
    return d;
}

void rt_spec_key(const KilnKernelInfo *info, const KilnParamHint *hints, int nhints, const KilnArg *args,
                 int nargs, RtSpecKey *key)
{
    memset(key, 0, sizeof *key);
    int n = nargs < info->nparams ? nargs : info->nparams;
    for (int i = 0; i < n && i < RT_SPEC_MAX_PARAMS; i++) {
        const KilnParam *p = &info->params[i];
        if (p->kind != KILN_PARAM_PTR && !is_int_kind(p->kind)) continue;
        if (is_int_kind(p->kind) && arg_is_one(p->kind, &args[i])) {
            if (!hint_one(hints, nhints, p->name)) key->ones[i / 64] |= (uint64_t)1 << (i % 64);
            continue;
        }
        if (arg_bits(&args[i]) % RT_SPEC_DIV != 0) continue;
        if (hint_for(hints, nhints, p->name) >= RT_SPEC_DIV) continue;
        key->bits[i / 64] |= (uint64_t)1 << (i % 64);
    }
}

bool rt_spec_key_empty(const RtSpecKey *key)
{
    for (size_t i = 0; i < sizeof key->bits / sizeof key->bits[0]; i++)
        if (key->bits[i] || key->ones[i]) return false;
    return true;
}

static bool key_has(const RtSpecKey *key, int i) { return (key->bits[i / 64] >> (i % 64)) & 1; }
static bool key_one(const RtSpecKey *key, int i) { return (key->ones[i / 64] >> (i % 64)) & 1; }

KilnStatus rt_spec_hints(const KilnKernelInfo *info, const RtSpecKey *key, const KilnParamHint *base, int nbase,
                         KilnParamHint **out, int *n)
{
    int extra = 0;
    for (int i = 0; i < info->nparams && i < RT_SPEC_MAX_PARAMS; i++) extra += key_has(key, i) + key_one(key, i);
    *n = 0;
    *out = malloc((size_t)(nbase + extra + 1) * sizeof **out);
    if (!*out) return kiln_set_error(KILN_ERR_INTERNAL, "out of host memory");
    for (int i = 0; i < nbase; i++) (*out)[(*n)++] = base[i];
    for (int i = 0; i < info->nparams && i < RT_SPEC_MAX_PARAMS; i++) {
        if (key_has(key, i)) (*out)[(*n)++] = (KilnParamHint){info->params[i].name, RT_SPEC_DIV, 0};
        if (key_one(key, i)) (*out)[(*n)++] = (KilnParamHint){info->params[i].name, 1, 1};
    }
    return KILN_OK;
}

KilnStatus rt_check_hints(const KilnKernelInfo *info, const KilnParamHint *hints, int nhints, const KilnArg *args,
                          int nargs)
{
    for (int i = 0; i < info->nparams && i < nargs; i++) {
        const KilnParam *p = &info->params[i];
        if (p->kind != KILN_PARAM_PTR && !is_int_kind(p->kind)) continue;
        int64_t d = hint_for(hints, nhints, p->name);
        uint64_t v = arg_bits(&args[i]);
        bool one = is_int_kind(p->kind) && hint_one(hints, nhints, p->name);
        if ((d <= 1 || v % (uint64_t)d == 0) && (!one || arg_is_one(p->kind, &args[i]))) continue;
        if (p->kind == KILN_PARAM_PTR)
            return kiln_set_error(KILN_ERR_ARGS,
                                  "kernel %s: argument %d (%s) = 0x%llx is not %lld-byte aligned, as the module "
                                  "was compiled to assume (hint %s=%lld)",
                                  info->name, i + 1, p->name, (unsigned long long)v, (long long)d, p->name,
                                  (long long)d);
        char val[32];
        bool is_unsigned = p->kind == KILN_PARAM_U8 || p->kind == KILN_PARAM_U16 || p->kind == KILN_PARAM_U32 ||
                           p->kind == KILN_PARAM_U64;
        if (is_unsigned) snprintf(val, sizeof val, "%llu", (unsigned long long)args[i].v.u);
        else snprintf(val, sizeof val, "%lld", (long long)args[i].v.i);
        if (one && !arg_is_one(p->kind, &args[i]))
            return kiln_set_error(KILN_ERR_ARGS,
                                  "kernel %s: argument %d (%s) = %s is not 1, as the module was compiled to "
                                  "assume (hint %s==1)",
                                  info->name, i + 1, p->name, val, p->name);
        return kiln_set_error(KILN_ERR_ARGS,
                              "kernel %s: argument %d (%s) = %s is not a multiple of %lld, as the module was "
                              "compiled to assume (hint %s=%lld)",
                              info->name, i + 1, p->name, val, (long long)d, p->name, (long long)d);
    }
    return KILN_OK;
}

/* Not num_warps: a variant may launch more warps than the generic kernel (warp
 * specialisation's producer warpgroup comes with the pipelined loops, which need the
 * alignment a specialisation proves), and each launch takes its own variant's count. */
bool rt_infos_match(const KilnKernelInfo *a, const KilnKernelInfo *b)
{
    if (strcmp(a->name, b->name) || a->nparams != b->nparams || a->num_stages != b->num_stages)
        return false;
    for (int i = 0; i < a->nparams; i++)
        if (strcmp(a->params[i].name, b->params[i].name) || a->params[i].kind != b->params[i].kind ||
            a->params[i].pointee_bits != b->params[i].pointee_bits)
            return false;
    return true;
}

/* ---------------- the spec: copies of the compile request ---------------- */

static char *dup_or_null(const char *s, bool *ok)
{
    if (!s) return NULL;
    char *d = strdup(s);
    if (!d) *ok = false;
    return d;
}

static bool copy_opts(KilnCompileOptions *d, const KilnCompileOptions *s)
{
    bool ok = true;
    *d = *s;
    d->dump_after = NULL;
    d->include_dirs = NULL;
    d->ninclude_dirs = 0;
    d->kernel = dup_or_null(s->kernel, &ok);
    d->arch = dup_or_null(s->arch, &ok);
    KilnDefine *defs = s->ndefines > 0 ? calloc((size_t)s->ndefines, sizeof *defs) : NULL;
    KilnParamHint *hints = s->nhints > 0 ? calloc((size_t)s->nhints, sizeof *hints) : NULL;
    d->defines = defs;
    d->hints = hints;
    d->ndefines = defs ? s->ndefines : 0;
    d->nhints = hints ? s->nhints : 0;
    if ((s->ndefines > 0 && !defs) || (s->nhints > 0 && !hints)) return false;
    for (int i = 0; i < d->ndefines; i++) {
        defs[i].name = dup_or_null(s->defines[i].name, &ok);
        defs[i].value = dup_or_null(s->defines[i].value, &ok);
    }
    for (int i = 0; i < d->nhints; i++) {
        hints[i].name = dup_or_null(s->hints[i].name, &ok);
        hints[i].divisibility = s->hints[i].divisibility;
        hints[i].equals_one = s->hints[i].equals_one;
    }
    /* include dirs: a variant recompiled at a later launch imports from the same places */
    const char **inc = s->ninclude_dirs > 0 ? calloc((size_t)s->ninclude_dirs, sizeof *inc) : NULL;
    d->include_dirs = inc;
    d->ninclude_dirs = inc ? s->ninclude_dirs : 0;
    if (s->ninclude_dirs > 0 && !inc) return false;
    for (int i = 0; i < d->ninclude_dirs; i++) inc[i] = dup_or_null(s->include_dirs[i], &ok);
    return ok;
}

static void free_opts(KilnCompileOptions *o)
{
    for (int i = 0; i < o->ndefines; i++) {
        free((char *)o->defines[i].name);
        free((char *)o->defines[i].value);
    }
    for (int i = 0; i < o->nhints; i++) free((char *)o->hints[i].name);
    free((KilnDefine *)o->defines);
    free((KilnParamHint *)o->hints);
    free((char *)o->kernel);
    free((char *)o->arch);
    for (int i = 0; i < o->ninclude_dirs; i++) free((char *)o->include_dirs[i]);
    free((char **)o->include_dirs);
}

RtSpec *rt_spec_new(const char *path, const char *src, const KilnCompileOptions *opts, RtSpecCompileFn compile,
                    RtSpecReleaseFn release)
{
    RtSpec *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    bool ok = true;
    s->on = 1;
    s->path = dup_or_null(path, &ok);
    s->src = dup_or_null(src, &ok);
    ok = copy_opts(&s->opts, opts) && ok;
    s->compile = compile;
    s->release = release;
    pthread_mutex_init(&s->lock, NULL);
    pthread_mutex_init(&s->compile_lock, NULL);
    if (!ok) {
        rt_spec_free(s);
        return NULL;
    }
    return s;
}

void rt_spec_free(RtSpec *s)
{
    if (!s) return;
    for (int i = 0; i < s->nvariants; i++)
        if (s->release) s->release(s->variants[i].kernel);
    free(s->variants);
    free_opts(&s->opts);
    free(s->path);
    free(s->src);
    pthread_mutex_destroy(&s->lock);
    pthread_mutex_destroy(&s->compile_lock);
    free(s);
}

/* ---------------- selection ---------------- */

static KilnKernel *find_locked(RtSpec *s, const RtSpecKey *key, bool *on)
{
    KilnKernel *k = NULL;
    pthread_mutex_lock(&s->lock);
    *on = s->on;
    for (int i = 0; i < s->nvariants && !k; i++)
        if (!memcmp(&s->variants[i].key, key, sizeof *key)) k = s->variants[i].kernel;
    pthread_mutex_unlock(&s->lock);
    return k;
}

static KilnStatus add_locked(RtSpec *s, const RtSpecKey *key, KilnKernel *k)
{
    KilnStatus st = KILN_OK;
    pthread_mutex_lock(&s->lock);
    if (s->nvariants == s->cap) {
        int cap = s->cap ? 2 * s->cap : 4;
        RtVariant *v = realloc(s->variants, (size_t)cap * sizeof *v);
        if (v) {
            s->variants = v;
            s->cap = cap;
        } else {
            st = kiln_set_error(KILN_ERR_INTERNAL, "out of host memory");
        }
    }
    if (st == KILN_OK) s->variants[s->nvariants++] = (RtVariant){*key, k};
    pthread_mutex_unlock(&s->lock);
    return st;
}

/* Compile the variant for `key` (compile_lock held). */
static KilnStatus compile_variant(RtSpec *s, const KilnKernelInfo *info, const RtSpecKey *key, KilnKernel **out)
{
    KilnParamHint *hints = NULL;
    int nh = 0;
    KilnStatus st = rt_spec_hints(info, key, s->opts.hints, s->opts.nhints, &hints, &nh);
    KilnKernel *vk = NULL;
    const KilnKernelInfo *vinfo = NULL;
    if (st == KILN_OK) st = s->compile(s, hints, nh, &vk, &vinfo);
    free(hints);
    if (st != KILN_OK) {
        rt_append_error(rt_spec_key_empty(key) ? " (while compiling the kernel at its first launch)"
                        : " (while specialising the kernel for its launch arguments; "
                          "kiln_module_set_specialize(m, 0) turns this off)");
        return st;
    }
    s->ncompiles++;
    if (!vk || !vinfo || !rt_infos_match(info, vinfo)) {
        if (vk && s->release) s->release(vk);
        return kiln_set_error(KILN_ERR_INTERNAL, "kernel %s: the specialised variant has another signature",
                              info->name);
    }
    st = add_locked(s, key, vk);
    if (st != KILN_OK && s->release) s->release(vk);
    *out = st == KILN_OK ? vk : NULL;
    return st;
}

/* The key a launch with `args` runs under (written to *key) and its variant
 * if compiled (*k; NULL: to compile). false: the generic kernel itself runs
 * (not deferred, and specialisation off or an empty key). */
static bool choose(RtSpec *s, const KilnKernelInfo *info, const KilnArg *args, int nargs, RtSpecKey *key,
                   KilnKernel **k)
{
    *k = NULL;
    rt_spec_key(info, s->opts.hints, s->opts.nhints, args, nargs, key);
    if (rt_spec_key_empty(key) && !s->deferred) return false;
    bool on;
    *k = find_locked(s, key, &on);
    if (on) return true;
    if (!s->deferred) return false;
    if (!rt_spec_key_empty(key)) {   /* deferred and off: the generic kernel */
        memset(key, 0, sizeof *key);
        *k = find_locked(s, key, &on);
    }
    return true;
}

KilnStatus rt_spec_select(RtSpec *s, KilnKernel *generic, const KilnKernelInfo *info, const KilnArg *args,
                          int nargs, KilnKernel **run)
{
    *run = generic;
    if (!s) return KILN_OK;
    KilnStatus st = rt_check_hints(info, s->opts.hints, s->opts.nhints, args, nargs);
    if (st != KILN_OK || !s->compile) return st;
    RtSpecKey key;
    KilnKernel *k;
    if (!choose(s, info, args, nargs, &key, &k)) return KILN_OK;
    if (k) {
        *run = k;
        return KILN_OK;
    }
    bool on;
    pthread_mutex_lock(&s->compile_lock);
    k = find_locked(s, &key, &on); /* another thread may have compiled it meanwhile */
    if (!k) st = compile_variant(s, info, &key, &k);
    pthread_mutex_unlock(&s->compile_lock);
    if (st == KILN_OK) *run = k;
    return st;
}

bool rt_spec_pending(RtSpec *s, const KilnKernelInfo *info, const KilnArg *args, int nargs)
{
    if (!s || !s->compile || rt_check_hints(info, s->opts.hints, s->opts.nhints, args, nargs) != KILN_OK)
        return false;
    RtSpecKey key;
    KilnKernel *k;
    return choose(s, info, args, nargs, &key, &k) && !k;
}

KilnKernel *rt_spec_ready(RtSpec *s, KilnKernel *generic, const KilnKernelInfo *info, const KilnArg *args,
                          int nargs)
{
    if (!s) return generic;
    /* refused: the launch of `generic` reports it */
    if (rt_check_hints(info, s->opts.hints, s->opts.nhints, args, nargs) != KILN_OK) return NULL;
    if (!s->compile) return generic;
    RtSpecKey key;
    KilnKernel *k;
    return choose(s, info, args, nargs, &key, &k) ? k : generic;
}

/* The runtime core calls these through the module's hooks (rt_internal.h). */
static KilnStatus hook_select(void *owner, KilnKernel *generic, const KilnKernelInfo *info, const KilnArg *args,
                              int nargs, KilnKernel **run)
{
    return rt_spec_select(owner, generic, info, args, nargs, run);
}
static void hook_release(void *owner) { rt_spec_free(owner); }
static const RtModuleHooks spec_hooks = {hook_select, hook_release};

void rt_spec_attach(KilnModule *m, RtSpec *s) { rt_module_attach(m, &spec_hooks, s); }

RtSpec *rt_kernel_spec(const KilnKernel *k) { return k ? rt_module_owner(k->module, &spec_hooks) : NULL; }

KilnStatus kiln_module_set_specialize(KilnModule *m, int on)
{
    if (!m) return kiln_set_error(KILN_ERR_USAGE, "kiln_module_set_specialize: module is NULL");
    RtSpec *s = rt_module_owner(m, &spec_hooks);
    if (s) {
        pthread_mutex_lock(&s->lock);
        s->on = on != 0;
        pthread_mutex_unlock(&s->lock);
    }
    return KILN_OK;
}

int rt_module_variants(KilnModule *m)
{
    RtSpec *s = rt_module_owner(m, &spec_hooks);
    if (!s) return 0;
    pthread_mutex_lock(&s->lock);
    int n = s->nvariants;
    pthread_mutex_unlock(&s->lock);
    return n;
}

KilnStatus rt_module_variant_request(KilnModule *m, int i, KilnCompileOptions *opts, KilnParamHint **hints,
                                     const char **path, const char **src)
{
    *hints = NULL;
    RtSpec *s = rt_module_owner(m, &spec_hooks);
    if (!s || m->ninfos < 1) return kiln_set_error(KILN_ERR_NOT_FOUND, "the module has no specialised variants");
    pthread_mutex_lock(&s->lock);
    bool have = i >= 0 && i < s->nvariants;
    RtSpecKey key;
    if (have) key = s->variants[i].key;
    pthread_mutex_unlock(&s->lock);
    if (!have) return kiln_set_error(KILN_ERR_NOT_FOUND, "the module has no variant %d", i);
    *opts = s->opts;
    *path = s->path;
    *src = s->src;
    KilnStatus st = rt_spec_hints(&m->infos[0], &key, s->opts.hints, s->opts.nhints, hints, &opts->nhints);
    opts->hints = *hints;
    return st;
}
