/* attention_base.c — what the three attention calls (forward: attention.c,
 * backward: attention_bwd.c, decoding: attention_decode.c) share: errors,
 * the validation of shapes, tiles and tensors (never touching a device), the
 * variants and their in-process cache of compiled kernels, arguments bound by
 * the kernel's parameter names, the launches, and runs on the CPU interpreter.
 *
 * Invariants: a cache entry owns its module; entries of a device go away with
 * kiln_attention_cache_clear(dev) (and at the device's shutdown: teardown).
 * Modules are deferred (rt_module_compile_deferred): the entry holds the
 * signature, and the code is compiled by the first launch, per specialisation
 * key, under the module's compile lock. Building an entry runs outside g_lock;
 * two threads racing on one variant both build and the loser frees its module.
 * Validation never reads *dev.
 *
 * Example: the forward fills an RtAttnVariant (program, kernel, -D values,
 * warps, stages, schedule) and asks rt_attn_get_kernel for its kernel on a
 * device: the first call compiles lang/lib/attention_fwd.tile's kernel with
 * those values, later calls find it by the variant's text
 * ("lang/lib/attention_fwd.tile|attn_fwd_f16 HEAD_DIM=128 ... num_warps=4 num_stages=2").
 */
#include "cuda_loader.h"
#include "jit_internal.h"
#include "compiler/driver/driver.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ATTN_PTR_ALIGN 16        /* codegen assumes 16-byte aligned pointer parameters */
#define ATTN_MAX_GRID_Y RT_ATTN_MAX_GRID_Y    /* grid axis 1 carries batch * heads_q */
#define ATTN_BUCKETS 64
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static const int k_head_dims[] = {32, 64, 96, 128, 256};

/* ---------------- errors ---------------- */

KilnStatus rt_attn_error(const char *api, KilnStatus s, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return kiln_set_error(s, "%s: %s", api, msg);
}

/* ---------------- validation (never touches a device) ---------------- */

static bool pow2_in(int x, int lo, int hi) { return x >= lo && x <= hi && (x & (x - 1)) == 0; }

static bool head_dim_ok(int d)
{
    for (size_t i = 0; i < COUNT(k_head_dims); i++)
        if (k_head_dims[i] == d) return true;
    return false;
}

KilnStatus rt_attn_check_tuning(const char *api, int block_m, int block_n, int num_warps, int num_stages)
{
    if (block_m && !pow2_in(block_m, 16, 256))
        return rt_attn_error(api, KILN_ERR_USAGE, "block_m %d must be 0 (default) or a power of two in [16, 256]",
                             block_m);
    if (block_n && !pow2_in(block_n, 16, 256))
        return rt_attn_error(api, KILN_ERR_USAGE, "block_n %d must be 0 (default) or a power of two in [16, 256]",
                             block_n);
    if (num_warps && !pow2_in(num_warps, 1, 32))
        return rt_attn_error(api, KILN_ERR_USAGE, "num_warps %d must be 0 (default) or a power of two in [1, 32]",
                             num_warps);
    if (num_stages < 0 || num_stages > 8)
        return rt_attn_error(api, KILN_ERR_USAGE, "num_stages %d must be 0 (default) or in [1, 8]", num_stages);
    return KILN_OK;
}

/* The varlen fields: both prefix sums or neither, token counts in range, and (packed
 * sequences cannot be split across launches by a batch stride) batch * heads_q in one grid. */
static KilnStatus check_varlen_shape(const char *api, const KilnAttentionParams *p, int64_t lim)
{
    if (!rt_attn_varlen(p)) {
        if (p->total_q || p->total_k)
            return rt_attn_error(api, KILN_ERR_USAGE,
                                 "total_q (%d) and total_k (%d) are for packed batches: set cu_seqlens_q and "
                                 "cu_seqlens_k too, or leave them 0",
                                 p->total_q, p->total_k);
        return KILN_OK;
    }
    if (!p->cu_seqlens_q || !p->cu_seqlens_k)
        return rt_attn_error(api, KILN_ERR_USAGE, "%s is 0 but %s is set: packed batches need both prefix sums",
                             p->cu_seqlens_q ? "cu_seqlens_k" : "cu_seqlens_q",
                             p->cu_seqlens_q ? "cu_seqlens_q" : "cu_seqlens_k");
    if (p->total_q < 0 || p->total_q > lim)
        return rt_attn_error(api, KILN_ERR_USAGE, "total_q must be in [0, %lld], got %d", (long long)lim, p->total_q);
    if (p->total_k < 0 || p->total_k > lim)
        return rt_attn_error(api, KILN_ERR_USAGE, "total_k must be in [0, %lld], got %d", (long long)lim, p->total_k);
    if ((int64_t)p->batch * p->heads_q > ATTN_MAX_GRID_Y)
        return rt_attn_error(api, KILN_ERR_UNSUPPORTED,
                             "batch * heads_q = %lld exceeds %d (the grid's second axis; packed batches run as "
                             "one launch)",
                             (long long)p->batch * p->heads_q, ATTN_MAX_GRID_Y);
    return KILN_OK;
}

/* Sizes, dtype and options: everything but the tensors. */
KilnStatus rt_attn_check_shape(const char *api, const KilnAttentionParams *p)
{
    if (!p) return rt_attn_error(api, KILN_ERR_USAGE, "params is NULL");
    if (p->dtype != KILN_F16 && p->dtype != KILN_BF16)
        return rt_attn_error(api, KILN_ERR_USAGE, "dtype %d is neither KILN_F16 nor KILN_BF16", (int)p->dtype);
    if (p->batch <= 0) return rt_attn_error(api, KILN_ERR_USAGE, "batch must be positive, got %d", p->batch);
    if (p->heads_q <= 0) return rt_attn_error(api, KILN_ERR_USAGE, "heads_q must be positive, got %d", p->heads_q);
    if (p->heads_kv <= 0) return rt_attn_error(api, KILN_ERR_USAGE, "heads_kv must be positive, got %d", p->heads_kv);
    if (p->heads_q % p->heads_kv)
        return rt_attn_error(api, KILN_ERR_USAGE,
                   "heads_q (%d) must be a multiple of heads_kv (%d): each K/V head serves a whole group "
                   "of query heads",
                   p->heads_q, p->heads_kv);
    if (p->seqlen_q < 0 || p->seqlen_k < 0)
        return rt_attn_error(api, KILN_ERR_USAGE, "sequence lengths must be >= 0, got seqlen_q %d, seqlen_k %d", p->seqlen_q,
                   p->seqlen_k);
    if (!head_dim_ok(p->head_dim))
        return rt_attn_error(api, KILN_ERR_UNSUPPORTED, "head_dim %d is not supported (supported: 32, 64, 96, 128, 256)",
                   p->head_dim);
    KilnStatus st = rt_attn_check_tuning(api, p->block_m, p->block_n, p->num_warps, p->num_stages);
    if (st != KILN_OK) return st;
    char why[256];   /* the caller's schedule options, by the schedule table's rules */
    if (!sched_resolve(&p->schedule, NULL, NULL, why, sizeof why))
        return rt_attn_error(api, KILN_ERR_USAGE, "schedule: %s", why);
    /* The kernel indexes rows in i32: row + block and seqlen_k + block must not wrap. */
    int64_t lim = INT32_MAX - 2 * 256;
    if (p->seqlen_q > lim || p->seqlen_k > lim)
        return rt_attn_error(api, KILN_ERR_USAGE, "sequence lengths above %lld do not fit the kernel's 32-bit row index",
                   (long long)lim);
    if (!isfinite(p->softmax_scale))
        return rt_attn_error(api, KILN_ERR_USAGE, "softmax_scale must be finite (0 means 1/sqrt(head_dim))");
    if (p->heads_q > ATTN_MAX_GRID_Y)
        return rt_attn_error(api, KILN_ERR_UNSUPPORTED,
                             "heads_q = %d exceeds %d (one batch's heads must fit the grid's second axis)",
                             p->heads_q, ATTN_MAX_GRID_Y);
    if ((st = check_varlen_shape(api, p, lim)) != KILN_OK) return st;
    if ((st = rt_attn_pos_check(api, p)) != KILN_OK) return st;
    return rt_attn_var_check(api, p->variant);
}

/* An output's elements must be distinct: the dims (batch, head, sequence and the
 * contiguous head dim) taken from the smallest stride up, each stride must step past
 * everything the dims inside it span (o_stride[2] = 1 would make rows share elements,
 * the programs' stores then race). Dims of one entry are free. Strides were checked
 * for 64-bit overflow by the caller. */
static KilnStatus check_no_overlap(const char *api, const char *name, const int64_t st[3], const int ext[3], int d)
{
    static const char *dim[3] = {"batch", "head", "sequence"};
    int idx[3], n = 0;
    for (int i = 0; i < 3; i++)
        if (ext[i] > 1) idx[n++] = i;
    for (int i = 1; i < n; i++)   /* insertion sort by stride */
        for (int j = i; j > 0 && st[idx[j]] < st[idx[j - 1]]; j--) {
            int t = idx[j];
            idx[j] = idx[j - 1], idx[j - 1] = t;
        }
    int64_t span = d;   /* elements the dims inside cover: the head dim first */
    for (int i = 0; i < n; i++) {
        int k = idx[i];
        if (st[k] < span)
            return rt_attn_error(api, KILN_ERR_USAGE, "%s_stride[%d] (%s) is %lld, below the %lld elements the dims "
                                 "inside it span: the output's entries would overlap", name, k, dim[k],
                                 (long long)st[k], (long long)span);
        span += st[k] * (int64_t)(ext[k] - 1);
    }
    return KILN_OK;
}

/* One tensor: non-null, aligned, strides >= 0 and its last element's byte
 * offset representable in the kernel's i64 address arithmetic. */
KilnStatus rt_attn_check_tensor(const char *api, const char *name, KilnDevPtr ptr, const int64_t st[3], int nb,
                                int nh, int ns, int d, int elem, bool is_output)
{
    if (!ptr) return rt_attn_error(api, KILN_ERR_USAGE, "%s is a null pointer", name);
    if (ptr % ATTN_PTR_ALIGN)
        return rt_attn_error(api, KILN_ERR_USAGE, "%s (0x%llx) is not %d-byte aligned (Kiln kernels assume aligned pointers)",
                   name, (unsigned long long)ptr, ATTN_PTR_ALIGN);
    if (!st) return KILN_OK;   /* LSE: dense, checked by its size */
    const int ext[3] = {nb, nh, ns};
    static const char *dim[3] = {"batch", "head", "sequence"};
    int64_t last = d - 1;
    for (int i = 0; i < 3; i++) {
        if (st[i] < 0) return rt_attn_error(api, KILN_ERR_USAGE, "%s_stride[%d] (%s) is negative: %lld", name, i, dim[i],
                                  (long long)st[i]);
        if (is_output && st[i] == 0 && ext[i] > 1)
            return rt_attn_error(api, KILN_ERR_USAGE, "%s_stride[%d] (%s) is 0 with %d %s entries: the output would overlap itself",
                       name, i, dim[i], ext[i], dim[i]);
        int64_t off;
        if (__builtin_mul_overflow(st[i], (int64_t)(ext[i] > 0 ? ext[i] - 1 : 0), &off) ||
            __builtin_add_overflow(last, off, &last))
            return rt_attn_error(api, KILN_ERR_USAGE, "%s strides overflow 64-bit offsets", name);
    }
    if (last > INT64_MAX / elem)
        return rt_attn_error(api, KILN_ERR_USAGE, "%s strides reach element %lld: beyond 64-bit byte offsets", name, (long long)last);
    return is_output ? check_no_overlap(api, name, st, ext, d) : KILN_OK;
}

bool rt_attn_varlen(const KilnAttentionParams *p) { return p->cu_seqlens_q || p->cu_seqlens_k; }

bool rt_attn_no_rows(const KilnAttentionParams *p)
{
    return p->seqlen_q == 0 || (rt_attn_varlen(p) && p->total_q == 0);
}

KilnStatus rt_attn_check_seq_tensor(const char *api, const KilnAttentionParams *p, const char *name, KilnDevPtr ptr,
                                    const int64_t st[3], bool is_kv, bool is_output)
{
    int nh = is_kv ? p->heads_kv : p->heads_q;
    if (!rt_attn_varlen(p))
        return rt_attn_check_tensor(api, name, ptr, st, p->batch, nh, is_kv ? p->seqlen_k : p->seqlen_q,
                                    p->head_dim, 2, is_output);
    /* packed: one "batch" of total tokens; stride[0] is not used */
    const int64_t packed[3] = {0, st[1], st[2]};
    return rt_attn_check_tensor(api, name, ptr, packed, 1, nh, is_kv ? p->total_k : p->total_q, p->head_dim, 2,
                                is_output);
}

/* ---------------- variants and the in-process cache ---------------- */

/* A cache entry: one compiled kernel of one device, found by its variant's text
 * ("program|kernel NAME=VALUE ... num_warps=W num_stages=S OPTION ...", describe). */
typedef struct AttnEntry {
    const KilnDevice *dev;
    char *text;
    KilnModule *mod;
    KilnKernel *kern;
    struct AttnEntry *next;
} AttnEntry;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static AttnEntry *g_buckets[ATTN_BUCKETS];

/* "attn_fwd_f16 HEAD_DIM=64 CAUSAL=false num_warps=8 num_stages=2": the variant for messages. */
static void describe(const RtAttnVariant *v, char *buf, size_t n)
{
    size_t used = (size_t)snprintf(buf, n, "%s", v->kernel);
    for (int i = 0; i < v->ndefines && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, " %s=%s", v->defines[i].name, v->defines[i].value);
    char sched[256];
    sched_names(&v->schedule, " ", sched, sizeof sched);   /* the options on, by the schedule table's names */
    if (used < n)
        snprintf(buf + used, n - used, " num_warps=%d num_stages=%d%s%s", v->num_warps, v->num_stages,
                 sched[0] ? " " : "", sched);
}

/* The cache key's text (malloc'd; NULL when out of memory). */
static char *variant_text(const RtAttnVariant *v)
{
    char desc[512];
    describe(v, desc, sizeof desc);
    size_t n = strlen(v->program) + strlen(desc) + 96;
    char *t = malloc(n);
    /* a variant: its digest (text, path, defines, include dirs); the flags decide defines */
    if (t && v->vs && v->vs->var)
        snprintf(t, n, "%s|%s|variant %s%s%s", v->program, desc, v->vs->digest, v->plain_scores ? " plain" : "",
                 v->q_end ? " q_end" : "");
    else if (t)
        snprintf(t, n, "%s|%s", v->program, desc);
    return t;
}

static unsigned text_hash(const KilnDevice *dev, const char *t)
{
    uint64_t h = 1469598103934665603ull ^ (uint64_t)(uintptr_t)dev;
    for (; *t; t++) h = (h ^ (uint8_t)*t) * 1099511628211ull;
    return (unsigned)(h ^ (h >> 32)) % ATTN_BUCKETS;
}

/* The cached kernel of (dev, text), or NULL. Caller holds g_lock. */
static KilnKernel *find_locked(const KilnDevice *dev, const char *text)
{
    for (AttnEntry *e = g_buckets[text_hash(dev, text)]; e; e = e->next)
        if (e->dev == dev && !strcmp(e->text, text)) return e->kern;
    return NULL;
}

const char *kiln_lib_source(const char *path)
{
    if (!path) return NULL;
    const KilnLibFile *f = kiln_lib_file(path);
    return f ? f->text : NULL;
}

KilnStatus rt_attn_compile_request(const char *api, const RtAttnVariant *v, RtAttnRequest *r)
{
    memset(r, 0, sizeof *r);
    r->path = v->program;
    r->src = kiln_lib_source(v->program);
    if (!r->src)
        return rt_attn_error(api, KILN_ERR_INTERNAL, "%s is not embedded in this build (CMake's lang/lib step)",
                             v->program);
    for (int i = 0; i < v->ndefines; i++) r->defines[r->ndefines++] = v->defines[i];
    const RtAttnVarSrc *vs = v->vs && v->vs->var ? v->vs : NULL;
    if (vs) {
        const KilnAttentionVariant *var = vs->var;
        if (v->plain_scores && !rt_attn_var_binds(vs, v->program, "score_mod"))
            r->defines[r->ndefines++] = (KilnDefine){"PLAIN_SCORES", "true"};
        if (v->q_end && rt_attn_var_binds(vs, v->program, "q_end"))
            r->defines[r->ndefines++] = (KilnDefine){"Q_END", "true"};
        if (r->ndefines + var->ndefines > (int)(sizeof r->defines / sizeof r->defines[0]))
            return rt_attn_error(api, KILN_ERR_USAGE, "variant: %d defines is too many", var->ndefines);
        for (int i = 0; i < var->ndefines; i++) r->defines[r->ndefines++] = var->defines[i];
        if (!(r->owned = rt_attn_var_root(vs, v->program)))
            return rt_attn_error(api, KILN_ERR_INTERNAL, "out of host memory");
        r->src = r->owned;
        r->path = vs->path;
    }
    r->opts = (KilnCompileOptions){.kernel = v->kernel, .defines = r->defines, .ndefines = r->ndefines,
                                   .num_warps = v->num_warps, .num_stages = v->num_stages, .schedule = v->schedule,
                                   .include_dirs = vs ? vs->var->include_dirs : NULL,
                                   .ninclude_dirs = vs ? vs->var->ninclude_dirs : 0};
    return KILN_OK;
}

/* Make the variant's module (no lock held). Deferred: only its signature
 * now (the front end, milliseconds); its first launch compiles the code its
 * arguments select (the aligned specialisation, as before), the one LLVM +
 * ptxas compile of a cold first call instead of two (module_compile.c). */
static KilnStatus build_variant(KilnDevice *dev, const char *api, const RtAttnVariant *v, KilnModule **mod,
                                KilnKernel **kern)
{
    RtAttnRequest req;
    KilnStatus st = rt_attn_compile_request(api, v, &req);
    if (st != KILN_OK) return st;
    KilnCompileOptions o = req.opts;
    st = rt_module_compile_deferred(dev, req.path, req.src, &o, mod);
    free(req.owned);
    if (st == KILN_OK) {
        st = kiln_kernel_get(*mod, o.kernel, kern);
        if (st != KILN_OK) {
            kiln_module_free(*mod);
            *mod = NULL;
        }
    }
    if (st != KILN_OK) {
        /* say which variant, then what the compiler or driver said */
        char what[512];
        describe(v, what, sizeof what);
        char *why = strdup(kiln_last_error());
        kiln_set_error(st, "%s: cannot build %s: ", api, what);
        rt_append_error(why ? why : "(out of memory)");
        free(why);
    }
    return st;
}

/* kiln_shutdown(dev) unloads dev's variants first (registered with the
 * runtime core, which calls nothing of this layer by name). */
static void teardown(KilnDevice *dev) { kiln_attention_cache_clear(dev); }

void rt_attn_variant_init(RtAttnVariant *v, const char *program, const char *kernel, int num_warps,
                          int num_stages, const KilnSchedule *schedule)
{
    memset(v, 0, sizeof *v);
    v->program = program;
    v->kernel = kernel;
    v->num_warps = num_warps;
    v->num_stages = num_stages;
    if (schedule) v->schedule = *schedule;
}

void rt_attn_variant_define(RtAttnVariant *v, const char *name, int value, bool is_bool)
{
    if (v->ndefines >= RT_ATTN_MAX_DEFINES) return;   /* callers define a fixed handful */
    char *val = v->vals[v->ndefines];
    if (is_bool) snprintf(val, sizeof v->vals[0], "%s", value ? "true" : "false");
    else snprintf(val, sizeof v->vals[0], "%d", value);
    v->defines[v->ndefines++] = (KilnDefine){name, val};
}

KilnStatus rt_attn_get_kernel(KilnDevice *dev, const char *api, const RtAttnVariant *v, KilnKernel **out)
{
    KilnStatus reg = rt_on_device_shutdown(teardown);
    if (reg != KILN_OK) return reg;
    char *text = variant_text(v);
    if (!text) return rt_attn_error(api, KILN_ERR_INTERNAL, "out of host memory");
    pthread_mutex_lock(&g_lock);
    *out = find_locked(dev, text);
    pthread_mutex_unlock(&g_lock);
    if (*out) {
        free(text);
        return KILN_OK;
    }
    KilnModule *mod = NULL;
    KilnKernel *kern = NULL;
    KilnStatus st = build_variant(dev, api, v, &mod, &kern);
    AttnEntry *e = st == KILN_OK ? calloc(1, sizeof *e) : NULL;
    if (st != KILN_OK || !e) {
        free(text);
        kiln_module_free(mod);
        return st != KILN_OK ? st : rt_attn_error(api, KILN_ERR_INTERNAL, "out of host memory");
    }
    pthread_mutex_lock(&g_lock);
    *out = find_locked(dev, text);
    if (!*out) {   /* no other thread got there first */
        unsigned h = text_hash(dev, text);
        *e = (AttnEntry){.dev = dev, .text = text, .mod = mod, .kern = kern, .next = g_buckets[h]};
        g_buckets[h] = e;
        *out = kern;
        e = NULL;
        mod = NULL;
        text = NULL;
    }
    pthread_mutex_unlock(&g_lock);
    free(e);
    free(text);
    kiln_module_free(mod);
    return KILN_OK;
}

KilnStatus kiln_attention_cache_clear(KilnDevice *dev)
{
    AttnEntry *dead = NULL;
    pthread_mutex_lock(&g_lock);
    for (int b = 0; b < ATTN_BUCKETS; b++)
        for (AttnEntry **pe = &g_buckets[b]; *pe;) {
            AttnEntry *e = *pe;
            if (dev && e->dev != dev) {
                pe = &e->next;
                continue;
            }
            *pe = e->next;
            e->next = dead;
            dead = e;
        }
    pthread_mutex_unlock(&g_lock);
    /* unload outside the lock: the driver may take a while */
    KilnStatus first = KILN_OK;
    while (dead) {
        AttnEntry *e = dead;
        dead = e->next;
        KilnStatus st = kiln_module_free(e->mod);
        if (first == KILN_OK) first = st;
        free(e->text);
        free(e);
    }
    return first;
}

int kiln_attention_cache_size(const KilnDevice *dev)
{
    int n = 0;
    pthread_mutex_lock(&g_lock);
    for (int b = 0; b < ATTN_BUCKETS; b++)
        for (AttnEntry *e = g_buckets[b]; e; e = e->next) n += !dev || e->dev == dev;
    pthread_mutex_unlock(&g_lock);
    return n;
}

/* ---------------- arguments by parameter name ---------------- */

KilnStatus rt_attn_int_arg(const char *api, const KilnParam *prm, int64_t v, KilnArg *a)
{
    /* every integer kind but i1 (a variant's `param x: u8;` is a runtime integer too) */
    static const struct { KilnParamKind kind; int64_t lo, hi; bool is_unsigned; } k_ints[] = {
        {KILN_PARAM_I64, INT64_MIN, INT64_MAX, false}, {KILN_PARAM_U64, INT64_MIN, INT64_MAX, true},
        {KILN_PARAM_I32, INT32_MIN, INT32_MAX, false}, {KILN_PARAM_U32, 0, UINT32_MAX, true},
        {KILN_PARAM_I16, INT16_MIN, INT16_MAX, false}, {KILN_PARAM_U16, 0, UINT16_MAX, true},
        {KILN_PARAM_I8, INT8_MIN, INT8_MAX, false},    {KILN_PARAM_U8, 0, UINT8_MAX, true}};
    for (size_t i = 0; i < COUNT(k_ints); i++) {
        if (k_ints[i].kind != prm->kind) continue;
        if (v < k_ints[i].lo || v > k_ints[i].hi)
            return rt_attn_error(api, KILN_ERR_USAGE, "%s = %lld does not fit the program's %s parameter", prm->name,
                                 (long long)v, rt_param_kind_name(prm->kind));
        *a = (KilnArg){.kind = prm->kind};
        if (k_ints[i].is_unsigned) a->v.u = (uint64_t)v;   /* u64 from i64 as before: the bits */
        else a->v.i = v;
        return KILN_OK;
    }
    return rt_attn_error(api, KILN_ERR_INTERNAL, "the program's parameter %s is %s, expected an integer", prm->name,
                         rt_param_kind_name(prm->kind));
}

KilnStatus rt_attn_scalar_arg(const char *api, const KilnAttentionParams *p, const KilnParam *prm, KilnArg *a)
{
    const char *n = prm->name;
    struct { const char *name; int64_t v; } ints[] = {
        {"heads", p->heads_q}, {"heads_kv", p->heads_kv}, {"seqlen_q", p->seqlen_q}, {"seqlen_k", p->seqlen_k},
        {"total_q", p->total_q}};
    for (size_t i = 0; i < COUNT(ints); i++)
        if (!strcmp(n, ints[i].name)) return rt_attn_int_arg(api, prm, ints[i].v, a);
    if (!strcmp(n, "sm_scale") && prm->kind == KILN_PARAM_F32) {
        *a = kiln_arg_f32(p->softmax_scale != 0 ? p->softmax_scale : (float)(1.0 / sqrt((double)p->head_dim)));
        return KILN_OK;
    }
    return rt_attn_var_arg(api, p->variant, prm, a);   /* a variant's param, or an internal error */
}

bool rt_attn_stride_of(const char *name, const char *const *tensors, const int64_t *const *strides, int n,
                       int64_t *v)
{
    if (strncmp(name, "stride_", 7)) return false;
    size_t len = strlen(name + 7);
    if (len < 2) return false;
    const char *ds = "bhmn", *d = strchr(ds, name[7 + len - 1]);
    if (!d) return false;
    for (int i = 0; i < n; i++)
        if (strlen(tensors[i]) == len - 1 && !strncmp(name + 7, tensors[i], len - 1)) {
            int di = (int)(d - ds);
            *v = strides[i][di > 2 ? 2 : di];
            return true;
        }
    return false;
}

/* ---------------- launches ---------------- */

KilnStatus rt_attn_check_call(const char *api, const KilnDevice *dev, const KilnStream *stream)
{
    if (!dev) return rt_attn_error(api, KILN_ERR_USAGE, "dev is NULL");
    if (stream && rt_stream_device(stream) != dev)
        return rt_attn_error(api, KILN_ERR_USAGE, "the stream belongs to another KilnDevice");
    return KILN_OK;
}

typedef struct PrepJob {
    RtSpec *spec;
    KilnKernel *k;
    const KilnArg *args;
    int nargs;
} PrepJob;

static void *prepare_one(void *p)
{
    PrepJob *j = p;
    KilnKernel *run;
    (void)rt_spec_select(j->spec, j->k, kiln_kernel_info(j->k), j->args, j->nargs, &run);
    return NULL;
}

/* Compile the n jobs at once, one thread each (this thread takes the first). */
static void compile_jobs(PrepJob *jobs, int n)
{
    pthread_t th[RT_ATTN_MAX_PREPARE];
    bool started[RT_ATTN_MAX_PREPARE] = {false};
    for (int i = 1; i < n; i++) started[i] = pthread_create(&th[i], NULL, prepare_one, &jobs[i]) == 0;
    prepare_one(&jobs[0]);
    for (int i = 1; i < n; i++) {
        if (started[i]) pthread_join(th[i], NULL);
        else prepare_one(&jobs[i]);   /* no thread to be had: here, after the others */
    }
}

KilnStatus rt_attn_prepare(const char *api, KilnKernel *const *ks, int n,
                           KilnStatus (*bind)(const void *ctx, const KilnParam *prm, KilnArg *a), const void *ctx,
                           RtAttnCall *call)
{
    if (n > RT_ATTN_MAX_PREPARE) return rt_attn_error(api, KILN_ERR_INTERNAL, "%d kernels in one call", n);
    call->n = n;
    PrepJob jobs[RT_ATTN_MAX_PREPARE];
    int nj = 0;
    for (int i = 0; i < n; i++) {
        const KilnKernelInfo *info = kiln_kernel_info(ks[i]);
        if (!info || info->nparams > RT_ATTN_MAX_ARGS)
            return rt_attn_error(api, KILN_ERR_INTERNAL, "%s has %d parameters", info ? info->name : "a kernel",
                                 info ? info->nparams : -1);
        call->k[i] = ks[i];
        call->nargs[i] = info->nparams;
        for (int a = 0; a < info->nparams; a++) {
            KilnStatus st = bind(ctx, &info->params[a], &call->args[i][a]);
            if (st != KILN_OK) return st;
        }
        /* The fast path: the kernel these arguments select is compiled (every warm call) */
        RtSpec *spec = rt_kernel_spec(ks[i]);
        call->run[i] = rt_spec_ready(spec, ks[i], info, call->args[i], info->nparams);
        if (!call->run[i] && rt_spec_pending(spec, info, call->args[i], info->nparams))
            jobs[nj++] = (PrepJob){spec, ks[i], call->args[i], info->nparams};
    }
    if (nj >= 2) compile_jobs(jobs, nj);
    return KILN_OK;
}

KilnStatus rt_attn_launch_call(const RtAttnCall *call, int i, const int grid[3], KilnStream *stream)
{
    /* Not ready (one kernel to compile, a compile that failed on a thread, arguments the
     * module's hints refuse): the generic kernel, whose launch compiles or reports it. */
    KilnKernel *k = call->run[i] ? call->run[i] : call->k[i];
    return kiln_launch(k, grid, stream, call->args[i], call->nargs[i]);
}

KilnStatus rt_attn_launch(const char *api, KilnKernel *k, const int grid[3], KilnStream *stream,
                          KilnStatus (*bind)(const void *ctx, const KilnParam *prm, KilnArg *a), const void *ctx)
{
    const KilnKernelInfo *info = kiln_kernel_info(k);
    KilnArg args[64];
    if (info->nparams > (int)COUNT(args))
        return rt_attn_error(api, KILN_ERR_INTERNAL, "%s has %d parameters", info->name, info->nparams);
    for (int i = 0; i < info->nparams; i++) {
        KilnStatus st = bind(ctx, &info->params[i], &args[i]);
        if (st != KILN_OK) return st;
    }
    return kiln_launch(k, grid, stream, args, info->nparams);
}

/* Bytes a tensor of nb x nh x ns x d elements spans under its strides (0 when empty). */
/* ---------------- the CPU interpreter ---------------- */

size_t rt_attn_span_bytes(const int64_t st[3], int nb, int nh, int ns, int d, int elem)
{
    if (nb <= 0 || nh <= 0 || ns <= 0) return 0;
    return (size_t)(st[0] * (nb - 1) + st[1] * (nh - 1) + st[2] * (ns - 1) + d) * (size_t)elem;
}

KilnStatus rt_attn_run_cpu(const char *api, const RtAttnVariant *v, const int grid[3],
                           KilnStatus (*bind)(const void *ctx, const KilnParam *prm, KilnArg *a),
                           KilnHostArg (*buffer)(const void *ctx, const char *name, KilnDevPtr ptr), const void *ctx,
                           const KilnAttentionVariant *check_used,
                           KilnStatus (*check)(const void *ctx, const KilnKernelInfo *info))
{
    RtAttnRequest req;
    KilnStatus st = rt_attn_compile_request(api, v, &req);
    RtCpuKernel *ck = NULL;   /* the front end once: the binding and the run both use it */
    if (st == KILN_OK) st = rt_cpu_compile(api, req.path, req.src, &req.opts, &ck);
    const KilnKernelInfo *info = st == KILN_OK ? rt_cpu_kernel_info(ck) : NULL;
    if (st == KILN_OK) st = rt_attn_var_check_used(api, check_used, &info, 1);
    if (st == KILN_OK && check) st = check(ctx, info);
    KilnHostArg args[64];
    if (st == KILN_OK && info->nparams > (int)COUNT(args))
        st = rt_attn_error(api, KILN_ERR_INTERNAL, "%s has %d parameters", info->name, info->nparams);
    for (int i = 0; st == KILN_OK && i < info->nparams; i++) {
        KilnArg a;
        if ((st = bind(ctx, &info->params[i], &a)) != KILN_OK) break;
        args[i] = a.kind == KILN_PARAM_PTR ? buffer(ctx, info->params[i].name, a.v.ptr) : kiln_host_scalar(a);
    }
    if (st == KILN_OK) st = rt_cpu_run(ck, grid, args, info->nparams);
    rt_cpu_free(ck);
    free(req.owned);
    return st;
}
