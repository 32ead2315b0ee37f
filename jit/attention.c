/* attention.c — kiln_attention_fwd: FlashAttention forward in one call.
 *
 * What it does, in order:
 *   1. validate the parameters (check_shape, check_tensors) WITHOUT touching a
 *      device: a bad call returns KILN_ERR_USAGE / KILN_ERR_UNSUPPORTED with a
 *      message naming the field, and nothing is compiled or launched;
 *   2. resolve the variant: dtype, head dim, causal, the tile sizes and the
 *      schedule options (the caller's, else the defaults of attention_tune.c for
 *      the head dim and the device's compute capability) form an AttnKey;
 *   3. find the key's kernel in the in-process cache (a small chained hash map
 *      under one mutex), else compile lang/lib/attention_fwd.tile (embedded in
 *      the library by CMake: kiln_lib_files) with -D HEAD_DIM/BLOCK_M/BLOCK_N/
 *      CAUSAL through rt_module_compile_deferred (on-disk cache; code at first launch) and
 *      insert it;
 *   4. bind the arguments by the kernel's parameter NAMES (so the program may
 *      reorder or retype its parameters) and launch on the grid
 *      (cdiv(seqlen_q, BLOCK_M), batch * heads_q); above 65535 (batch * heads_q)
 *      as several launches of whole batches (launch_batches).
 *
 * Invariants: a cache entry owns its module; entries of a device go away with
 * kiln_attention_cache_clear(dev). Modules are deferred (rt_module_compile_
 * deferred): the entry holds the signature, and the code is compiled by the
 * first launch, per specialisation key, under the module's compile lock.
 * Building an entry runs outside g_lock; two threads racing on one variant
 * both build and the loser frees its module. Validation never reads *dev.
 *
 * Example: KilnAttentionParams p = {.dtype = KILN_BF16, .batch = 2, .heads_q = 8,
 * .heads_kv = 2, .seqlen_q = 1000, .seqlen_k = 1000, .head_dim = 128, .q = q, ...,
 * .causal = 1}; kiln_attention_fwd(dev, &p, NULL) on an sm_90 device compiles
 * attn_fwd_bf16 with HEAD_DIM=128 CAUSAL=true BLOCK_M=64 BLOCK_N=64 PLAIN_SCORES=true
 * (4 warps, 2 stages) once, then launches 16 x 16 programs (sm_80: BLOCK_M=128, 8 x 16).
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

#define ATTN_PROGRAM "lang/lib/attention_fwd.tile"
#define ATTN_PTR_ALIGN 16        /* codegen assumes 16-byte aligned pointer parameters */
#define ATTN_MAX_GRID_Y RT_ATTN_MAX_GRID_Y    /* grid axis 1 carries batch * heads_q */
#define ATTN_BUCKETS 64
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static const int k_head_dims[] = {32, 64, 96, 128, 256};

/* ---------------- errors ---------------- */

#define FWD "kiln_attention_fwd"

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

static KilnStatus check_tensors(const KilnAttentionParams *p)
{
    bool keys = rt_attn_varlen(p) ? p->total_k > 0 : p->seqlen_k > 0;
    KilnStatus st = rt_attn_check_seq_tensor(FWD, p, "q", p->q, p->q_stride, false, false);
    if (st == KILN_OK && keys) st = rt_attn_check_seq_tensor(FWD, p, "k", p->k, p->k_stride, true, false);
    if (st == KILN_OK && keys) st = rt_attn_check_seq_tensor(FWD, p, "v", p->v, p->v_stride, true, false);
    if (st == KILN_OK) st = rt_attn_check_seq_tensor(FWD, p, "o", p->o, p->o_stride, false, true);
    if (st == KILN_OK) st = rt_attn_check_tensor(FWD, "lse", p->lse, NULL, 0, 0, 0, 0, 4, true);
    if (st == KILN_OK && rt_attn_varlen(p))
        st = rt_attn_check_tensor(FWD, "cu_seqlens_q", p->cu_seqlens_q, NULL, 0, 0, 0, 0, 4, false);
    if (st == KILN_OK && rt_attn_varlen(p))
        st = rt_attn_check_tensor(FWD, "cu_seqlens_k", p->cu_seqlens_k, NULL, 0, 0, 0, 0, 4, false);
    return st;
}

KilnStatus kiln_attention_check(const KilnAttentionParams *p)
{
    KilnStatus st = rt_attn_check_shape(FWD, p);
    if (st == KILN_OK && p->block_mask) st = rt_attn_bm_check(FWD, p, p->block_m, p->block_n);
    if (st != KILN_OK || rt_attn_no_rows(p)) return st;   /* no rows: empty tensors may be null */
    return check_tensors(p);
}

/* ---------------- variants and the in-process cache ---------------- */

/* The forward's choice for a call: the tuning table's row (or the caller's tiles). */
typedef struct AttnKey {
    int dtype, head_dim, causal;
    int block_m, block_n, num_warps, num_stages;   /* warps/stages 0: the program's own rule */
    KilnSchedule schedule;                         /* resolved: p->schedule over the table's row */
    int mask_block_m, mask_block_n;                /* a block mask's blocks (attn_fwd_bm_*), else 0 */
} AttnKey;

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

/* With a block mask: its blocks, and tiles that divide them. The mask's blocks are powers of
 * two, so the tuned tiles divide them unless larger: then they shrink to the mask's blocks
 * (the caller's own tiles were checked to divide them), and the table's warps/stages, which
 * belong to its tiles, give way to the program's rule. */
static AttnKey with_block_mask(const KilnAttentionParams *p, AttnKey k)
{
    const KilnBlockMask *m = p->block_mask;
    if (!m) return k;
    k.mask_block_m = m->block_q;
    k.mask_block_n = m->block_kv;
    if (k.block_m > m->block_q || k.block_n > m->block_kv) {
        k.block_m = k.block_m > m->block_q ? m->block_q : k.block_m;
        k.block_n = k.block_n > m->block_kv ? m->block_kv : k.block_n;
        k.num_warps = p->num_warps;
        k.num_stages = p->num_stages;
        /* the table's options belonged to its tiles too: only the caller's (resolved
         * before, so they combine) */
        sched_resolve(&p->schedule, NULL, &k.schedule, NULL, 0);
    }
    k.schedule.overlap = 0;   /* the block-mask loops read an index list: dot-rotate leaves them alone anyway */
    return k;
}

static AttnKey resolve_key(int sm_version, const KilnAttentionParams *p)
{
    const RtTuneRow *t = rt_attn_tune(RT_TUNE_FWD, sm_version, p->head_dim, p->causal, p->seqlen_q);
    /* check_shape accepted the head dim, and every head dim has a min_sm 0 row */
    if (!t) t = rt_attn_tune(RT_TUNE_FWD, 0, 32, 0, 0);
    bool own_tiles = p->block_m || p->block_n;
    AttnKey k = {.dtype = p->dtype, .head_dim = p->head_dim, .causal = p->causal != 0};
    k.block_m = p->block_m ? p->block_m : t->block_m;
    k.block_n = p->block_n ? p->block_n : t->block_n;
    /* the table's warps/stages belong to its tiles: with the caller's tiles, the program decides */
    k.num_warps = p->num_warps ? p->num_warps : own_tiles ? 0 : t->num_warps;
    k.num_stages = p->num_stages ? p->num_stages : own_tiles ? 0 : t->num_stages;
    /* > 0 on, < 0 off, 0 the table's row (with the caller's tiles: off); the caller's
     * refused combinations were refused by kiln_attention_check */
    sched_resolve(&p->schedule, own_tiles ? NULL : &t->schedule, &k.schedule, NULL, 0);
    return with_block_mask(p, k);
}

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
        snprintf(t, n, "%s|%s|variant %s%s", v->program, desc, v->vs->digest, v->plain_scores ? " plain" : "");
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

static const char *kernel_name(int dtype, bool varlen, bool block_mask)
{
    if (varlen) return dtype == KILN_BF16 ? "attn_fwd_varlen_bf16" : "attn_fwd_varlen_f16";
    if (block_mask) return dtype == KILN_BF16 ? "attn_fwd_bm_bf16" : "attn_fwd_bm_f16";
    return dtype == KILN_BF16 ? "attn_fwd_bf16" : "attn_fwd_f16";
}

/* The forward's compile request for key k (with the call's opened variant, or none). */
static void fwd_variant(const AttnKey *k, bool varlen, const RtAttnVarSrc *vs, RtAttnVariant *v)
{
    rt_attn_variant_init(v, ATTN_PROGRAM, kernel_name(k->dtype, varlen, k->mask_block_m > 0), k->num_warps,
                         k->num_stages, &k->schedule);
    rt_attn_variant_define(v, "HEAD_DIM", k->head_dim, false);
    rt_attn_variant_define(v, "BLOCK_M", k->block_m, false);
    rt_attn_variant_define(v, "BLOCK_N", k->block_n, false);
    rt_attn_variant_define(v, "CAUSAL", k->causal, true);
    if (k->mask_block_m) {
        rt_attn_variant_define(v, "MASK_BLOCK_M", k->mask_block_m, false);
        rt_attn_variant_define(v, "MASK_BLOCK_N", k->mask_block_n, false);
    }
    if (!vs || !vs->var) {
        /* PLAIN_SCORES: no score_mod, so the scores take FlashAttention-2's one-FFMA form */
        rt_attn_variant_define(v, "PLAIN_SCORES", 1, true);
        return;
    }
    v->vs = vs;
    v->plain_scores = true;   /* unless the variant has a score_mod */
}

KilnStatus rt_attn_fwd_request(int sm_version, const KilnAttentionParams *p, RtAttnVariant *v, RtAttnRequest *r)
{
    AttnKey key = resolve_key(sm_version, p);
    fwd_variant(&key, rt_attn_varlen(p), NULL, v);
    return rt_attn_compile_request(FWD, v, r);
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

/* stride_<t><d> of the forward's tensors q k v o. */
static bool stride_of(const KilnAttentionParams *p, const char *name, int64_t *v)
{
    static const char *const ts[] = {"q", "k", "v", "o"};
    const int64_t *const st[] = {p->q_stride, p->k_stride, p->v_stride, p->o_stride};
    return rt_attn_stride_of(name, ts, st, 4, v);
}

static KilnStatus make_arg(const void *ctx, const KilnParam *prm, KilnArg *a)
{
    const KilnAttentionParams *p = ctx;
    const char *n = prm->name;
    /* With seqlen_k == 0, K and V are never read: an empty tensor's null pointer is fine. */
    KilnDevPtr kv_stand_in = p->q;
    struct { const char *name; KilnDevPtr v; } ptrs[] = {
        {"Q", p->q}, {"K", p->k ? p->k : kv_stand_in}, {"V", p->v ? p->v : kv_stand_in},
        {"O", p->o}, {"LSE", p->lse}, {"cu_seqlens_q", p->cu_seqlens_q}, {"cu_seqlens_k", p->cu_seqlens_k}};
    for (size_t i = 0; i < COUNT(ptrs); i++)
        if (!strcmp(n, ptrs[i].name)) {
            *a = kiln_arg_ptr(ptrs[i].v);
            return KILN_OK;
        }
    int64_t s;
    if (stride_of(p, n, &s)) return rt_attn_int_arg(FWD, prm, s, a);
    KilnStatus st;
    if (rt_attn_bm_arg(p, prm, a, &st)) return st;   /* the block mask's arrays and strides */
    return rt_attn_scalar_arg(FWD, p, prm, a);
}

/* ---------------- the call ---------------- */

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

/* Grid axis 1 carries batch * heads_q (the program reads (b, h) from program_id(1)), and
 * holds at most 65535. Above that the call runs as several launches of whole batches:
 * Q, K, V, O and LSE advance by the first batch's offset, and each launch sees `batch`
 * sequences of its own. The pointers must stay 16-byte aligned (codegen assumes it), so
 * a launch's batch count is the largest that keeps every advance aligned (any count that
 * is a multiple of 8 does). */
static bool advance_aligned(const KilnAttentionParams *p, int64_t nb)
{
    int64_t adv[5] = {nb * p->q_stride[0] * 2, nb * p->k_stride[0] * 2, nb * p->v_stride[0] * 2,
                      nb * p->o_stride[0] * 2, nb * p->heads_q * p->seqlen_q * 4};
    for (int i = 0; i < 5; i++)
        if (adv[i] % ATTN_PTR_ALIGN) return false;
    return true;
}

static KilnStatus launch_batches(KilnKernel *k, const KilnAttentionParams *p, int row_blocks, KilnStream *stream)
{
    int grid[3] = {row_blocks, p->batch * p->heads_q, 1};
    /* packed batches always fit (check_varlen_shape) */
    if ((int64_t)p->batch * p->heads_q <= ATTN_MAX_GRID_Y) return rt_attn_launch(FWD, k, grid, stream, make_arg, p);
    int nb = ATTN_MAX_GRID_Y / p->heads_q;
    while (nb > 0 && !advance_aligned(p, nb)) nb--;
    if (nb == 0)
        return rt_attn_error(FWD, KILN_ERR_UNSUPPORTED,
                             "batch * heads_q = %lld exceeds %d (the grid's second axis) and the batch strides do "
                             "not allow splitting it into aligned launches",
                             (long long)p->batch * p->heads_q, ATTN_MAX_GRID_Y);
    for (int b0 = 0; b0 < p->batch; b0 += nb) {
        KilnAttentionParams c = *p;
        c.batch = p->batch - b0 < nb ? p->batch - b0 : nb;
        c.q += (KilnDevPtr)(b0 * p->q_stride[0] * 2);
        if (c.k) c.k += (KilnDevPtr)(b0 * p->k_stride[0] * 2);   /* 0: seqlen_k == 0, never read */
        if (c.v) c.v += (KilnDevPtr)(b0 * p->v_stride[0] * 2);
        c.o += (KilnDevPtr)(b0 * p->o_stride[0] * 2);
        c.lse += (KilnDevPtr)((int64_t)b0 * p->heads_q * p->seqlen_q * 4);
        grid[1] = c.batch * c.heads_q;
        KilnStatus st = rt_attn_launch(FWD, k, grid, stream, make_arg, &c);
        if (st != KILN_OK) return st;
    }
    return KILN_OK;
}

KilnStatus kiln_attention_fwd(KilnDevice *dev, const KilnAttentionParams *p, KilnStream *stream)
{
    KilnStatus st = kiln_attention_check(p);
    if (st != KILN_OK) return st;
    if ((st = rt_attn_check_call(FWD, dev, stream)) != KILN_OK) return st;
    if (rt_attn_no_rows(p)) return KILN_OK;   /* no rows, nothing to write */
    /* Above 65535 the call runs as launches of whole batches, each seeing b from 0: a
     * hook indexing its tensors by b would read another batch's rows. */
    if ((p->variant || p->block_mask) && (int64_t)p->batch * p->heads_q > ATTN_MAX_GRID_Y)
        return rt_attn_error(FWD, KILN_ERR_UNSUPPORTED, "batch * heads_q = %lld exceeds %d with a %s (it sees the "
                             "batch index; split the call by batch)", (long long)p->batch * p->heads_q,
                             ATTN_MAX_GRID_Y, p->variant ? "variant" : "block mask");
    AttnKey key = resolve_key(dev->info.sm_version, p);
    KilnKernel *k = NULL;
    RtAttnVarSrc vs;
    if ((st = rt_attn_var_open(FWD, p->variant, &vs)) != KILN_OK) return st;
    RtAttnVariant v;
    fwd_variant(&key, rt_attn_varlen(p), &vs, &v);
    st = rt_attn_get_kernel(dev, FWD, &v, &k);
    const KilnKernelInfo *info = k ? kiln_kernel_info(k) : NULL;
    if (st == KILN_OK) st = rt_attn_var_check_used(FWD, p->variant, &info, 1);
    if (st == KILN_OK) st = launch_batches(k, p, (p->seqlen_q + key.block_m - 1) / key.block_m, stream);
    rt_attn_var_close(&vs);
    return st;
}

/* ---------------- the same call on the CPU interpreter ---------------- */

/* Bytes a tensor of nb x nh x ns x d elements spans under its strides (0 when empty). */
size_t rt_attn_span_bytes(const int64_t st[3], int nb, int nh, int ns, int d, int elem)
{
    if (nb <= 0 || nh <= 0 || ns <= 0) return 0;
    return (size_t)(st[0] * (nb - 1) + st[1] * (nh - 1) + st[2] * (ns - 1) + d) * (size_t)elem;
}

/* The forward's host buffers: the parameter's name, the caller's pointer and size, the
 * field naming the size, and what the shape and strides span (0 when empty). */
typedef struct CpuTensor { const char *name; KilnDevPtr ptr; size_t bytes; const char *field; size_t span; KilnHostDir dir; } CpuTensor;

static int cpu_tensors(const KilnAttentionParams *p, CpuTensor t[7])
{
    /* packed (varlen): one "batch" of total_q / total_k tokens, plus the prefix sums */
    bool vl = rt_attn_varlen(p);
    int nb = vl ? 1 : p->batch, sq = vl ? p->total_q : p->seqlen_q, sk = vl ? p->total_k : p->seqlen_k;
    size_t cu = vl ? (size_t)(p->batch + 1) * 4 : 0;
    t[0] = (CpuTensor){"Q", p->q, p->q_bytes, "q_bytes", rt_attn_span_bytes(p->q_stride, nb, p->heads_q, sq, p->head_dim, 2), KILN_HOST_IN};
    t[1] = (CpuTensor){"K", p->k, p->k_bytes, "k_bytes", rt_attn_span_bytes(p->k_stride, nb, p->heads_kv, sk, p->head_dim, 2), KILN_HOST_IN};
    t[2] = (CpuTensor){"V", p->v, p->v_bytes, "v_bytes", rt_attn_span_bytes(p->v_stride, nb, p->heads_kv, sk, p->head_dim, 2), KILN_HOST_IN};
    t[3] = (CpuTensor){"O", p->o, p->o_bytes, "o_bytes", rt_attn_span_bytes(p->o_stride, nb, p->heads_q, sq, p->head_dim, 2), KILN_HOST_OUT};
    t[4] = (CpuTensor){"LSE", p->lse, p->lse_bytes, "lse_bytes", (size_t)nb * p->heads_q * sq * 4, KILN_HOST_OUT};
    t[5] = (CpuTensor){"cu_seqlens_q", p->cu_seqlens_q, p->cu_seqlens_q_bytes, "cu_seqlens_q_bytes", cu, KILN_HOST_IN};
    t[6] = (CpuTensor){"cu_seqlens_k", p->cu_seqlens_k, p->cu_seqlens_k_bytes, "cu_seqlens_k_bytes", cu, KILN_HOST_IN};
    return 7;
}

/* Every host buffer the shape reads or writes is at least what it spans: the
 * interpreter then bounds the accesses by the spans, all inside the caller's buffers. */
static KilnStatus check_cpu_sizes(const char *api, const KilnAttentionParams *p)
{
    CpuTensor t[7];
    int n = cpu_tensors(p, t);
    for (int i = 0; i < n; i++)
        if (t[i].span && t[i].bytes < t[i].span)
            return rt_attn_error(api, KILN_ERR_USAGE, "%s is %zu, below the %zu bytes the shape and strides span "
                                 "(the _cpu calls need each host buffer's size)", t[i].field, t[i].bytes, t[i].span);
    return KILN_OK;
}

/* The host buffer behind a pointer argument of the forward (by the parameter's name). */
static KilnHostArg cpu_buffer(const void *ctx, const char *name, KilnDevPtr ptr)
{
    const KilnAttentionParams *p = ctx;
    CpuTensor t[7];
    int n = cpu_tensors(p, t);
    for (int i = 0; i < n; i++)
        /* the span (check_cpu_sizes: within the caller's bytes; an OUT buffer is copied back
         * whole, so not past it); an empty tensor (never read): a stand-in of 16 bytes */
        if (!strcmp(name, t[i].name))
            return kiln_host_buf((void *)(uintptr_t)t[i].ptr, t[i].span ? t[i].span : 16, t[i].dir);
    size_t bm = p->block_mask ? rt_attn_bm_array_bytes(p->block_mask, name) : 0;
    if (bm) return kiln_host_buf((void *)(uintptr_t)ptr, bm, KILN_HOST_IN);
    return rt_attn_var_buffer(p->variant, name, ptr);
}

KilnStatus rt_attn_run_cpu(const char *api, const RtAttnVariant *v, const int grid[3],
                           KilnStatus (*bind)(const void *ctx, const KilnParam *prm, KilnArg *a),
                           KilnHostArg (*buffer)(const void *ctx, const char *name, KilnDevPtr ptr), const void *ctx,
                           const KilnAttentionVariant *check_used)
{
    RtAttnRequest req;
    KilnStatus st = rt_attn_compile_request(api, v, &req);
    RtCpuKernel *ck = NULL;   /* the front end once: the binding and the run both use it */
    if (st == KILN_OK) st = rt_cpu_compile(api, req.path, req.src, &req.opts, &ck);
    const KilnKernelInfo *info = st == KILN_OK ? rt_cpu_kernel_info(ck) : NULL;
    if (st == KILN_OK) st = rt_attn_var_check_used(api, check_used, &info, 1);
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

KilnStatus kiln_attention_fwd_cpu(const KilnAttentionParams *p)
{
    KilnStatus st = kiln_attention_check(p);
    if (st != KILN_OK || rt_attn_no_rows(p)) return st;
    if ((st = rt_attn_var_check_bytes(FWD "_cpu", p->variant)) != KILN_OK) return st;
    if ((st = check_cpu_sizes(FWD "_cpu", p)) != KILN_OK) return st;
    AttnKey key = {.dtype = p->dtype, .head_dim = p->head_dim, .causal = p->causal != 0,
                   .block_m = p->block_m ? p->block_m : 64, .block_n = p->block_n ? p->block_n : 64};
    key = with_block_mask(p, key);
    RtAttnVarSrc vs;
    if ((st = rt_attn_var_open(FWD, p->variant, &vs)) != KILN_OK) return st;
    RtAttnVariant v;
    fwd_variant(&key, rt_attn_varlen(p), &vs, &v);
    int grid[3] = {(p->seqlen_q + key.block_m - 1) / key.block_m, p->batch * p->heads_q, 1};
    st = rt_attn_run_cpu(FWD, &v, grid, make_arg, cpu_buffer, p, p->variant);
    rt_attn_var_close(&vs);
    return st;
}
