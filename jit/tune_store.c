/* tune_store.c — tuned winners on disk, and the attention calls' look-up of them.
 *
 * What: a winner is an entry of the on-disk cache (cache.c: same directory, same
 * atomic writes, same verification: a corrupt entry is a miss) whose key is the
 * SHA-256 of ("kiln-tune-1", the source text, the kernel, kiln_version(), the build
 * identity, the device, the key's values) and whose payload is the config as text,
 * "BLOCK_M=128 BLOCK_N=64 num_warps=4". kiln_tune stores it twice: under the device
 * ("NVIDIA H200 sm_90a") and under its arch alone ("sm_90a"), which is what a call
 * that knows only the arch (the attention calls) looks up. A rebuilt compiler has
 * another build identity and so misses every older winner.
 *
 * rt_tune_attn_row turns an attention call's stored winner into a table row: the
 * forward's (kernel attn_fwd_f16 or _bf16 of lang/lib/attention_fwd.tile, key
 * "HEAD_DIM=D CAUSAL=true|false seqlen_q=B", B the next power of two), taken by
 * resolve_key (attention.c) before the table, and the backward's two kernels'
 * (attn_bwd_dkdv_* with "... COMPUTE_DQ=false ..." in its key, attn_bwd_dq_*, of
 * lang/lib/attention_bwd.tile), taken by rt_attn_bwd_plan (attention_bwd.c) over its
 * table rows (a winner names tiles, warps and stages; dq_pass stays the table's).
 * Looked-up answers, hits and misses, are remembered per process (a call must not
 * hash the program and read a file every time).
 *
 * Example: after `kiln tune lib/attention_fwd.tile -k attn_fwd_f16 -D HEAD_DIM=128 -D
 * CAUSAL=false ... seqlen_q=4096 --store`, kiln_attention_fwd at d 128, N 3000..4096,
 * non-causal, f16 on an sm_90a device uses the winner's tiles, warps, stages, options.
 */
#include "jit_internal.h"

#include "compiler/support/schedule.h"
#include "compiler/support/support.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void put(RtSha256 *s, const char *v)
{
    char head[32];
    size_t n = v ? strlen(v) : 0;
    int h = snprintf(head, sizeof head, "%zu:", n); /* length-prefixed: ("ab","c") != ("a","bc") */
    rt_sha256_update(s, head, (size_t)h);
    if (n) rt_sha256_update(s, v, n);
}

static void tune_key(const char *src, const char *kernel, const char *device, const char *key, char hex[65])
{
    RtSha256 s;
    rt_sha256_init(&s);
    put(&s, "kiln-tune-1");
    put(&s, src);
    put(&s, kernel);
    put(&s, kiln_version());
    put(&s, rt_build_id());
    put(&s, device);
    put(&s, key);
    uint8_t d[32];
    rt_sha256_final(&s, d);
    for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", d[i]);
}

static KilnStatus store_one(const char *src, const KilnTuneReport *r, const char *device, const char *config)
{
    char hex[65];
    tune_key(src, r->kernel, device, r->key, hex);
    KilnCacheEntry e;
    memset(&e, 0, sizeof e);
    e.emit = KILN_EMIT_PTX; /* a text payload */
    e.payload = (char *)config;
    e.payload_size = strlen(config);
    snprintf(e.info.name, sizeof e.info.name, "%s", r->kernel);
    return kiln_cache_store(hex, &e);
}

KilnStatus rt_tune_store(const char *config, const char *src, const KilnTuneReport *r, char **path)
{
    *path = NULL;
    if (!kiln_cache_enabled()) return KILN_OK;
    KilnStatus st = store_one(src, r, r->device, config);
    if (st == KILN_OK && strcmp(r->device, r->arch)) st = store_one(src, r, r->arch, config);
    char dir[4096];
    if (st == KILN_OK && kiln_cache_dir(dir, sizeof dir) == KILN_OK) {
        char hex[65];
        tune_key(src, r->kernel, r->device, r->key, hex);
        *path = rt_cache_path(dir, hex);
    }
    return st;
}

KilnStatus kiln_tune_lookup(const char *src, const char *kernel, const char *device, const char *key, char **config)
{
    if (!config) return kiln_set_error(KILN_ERR_USAGE, "kiln_tune_lookup: config is NULL");
    *config = NULL;
    if (!src || !kernel || !device || !key) return kiln_set_error(KILN_ERR_USAGE, "kiln_tune_lookup: a NULL argument");
    char hex[65];
    tune_key(src, kernel, device, key, hex);
    KilnCacheEntry e;
    KilnStatus st = kiln_cache_lookup(hex, &e);
    if (st != KILN_OK) return st;
    if (e.emit != KILN_EMIT_PTX || strcmp(e.info.name, kernel)) {
        kiln_cache_entry_free(&e);
        return kiln_set_error(KILN_ERR_NOT_FOUND, "tune entry %s is not a tuned config", hex);
    }
    *config = e.payload; /* NUL-terminated by the decoder */
    e.payload = NULL;
    kiln_cache_entry_free(&e);
    return KILN_OK;
}

long long rt_tune_bucket(long long n)
{
    long long b = 1;
    while (b < n && b < (1ll << 40)) b <<= 1;
    return b;
}

/* "BLOCK_M=128 num_warps=4 pingpong=true" into a row (fields it does not name keep the
 * row's values); false when a name is none of the forward's. */
static bool parse_config(const char *cfg, RtTuneRow *row)
{
    char name[64], val[64];
    for (const char *p = cfg; *p;) {
        int used = 0;
        if (sscanf(p, " %63[^= ]=%63s%n", name, val, &used) != 2) return false;
        p += used;
        while (*p == ' ') p++;
        int v = !strcmp(val, "true") ? 1 : !strcmp(val, "false") ? 0 : atoi(val);
        if (!strcmp(name, "BLOCK_M")) row->block_m = v;
        else if (!strcmp(name, "BLOCK_N")) row->block_n = v;
        else if (!strcmp(name, "num_warps")) row->num_warps = v;
        else if (!strcmp(name, "num_stages")) row->num_stages = v;
        else {
            int i = 0;
            while (i < SCHED_COUNT && strcmp(sched_options[i].name, name)) i++;
            if (i == SCHED_COUNT) return false;
            sched_set(&row->schedule, i, v ? 1 : 0);
        }
    }
    return row->block_m > 0 && row->block_n > 0;
}

#define MEMO_MAX 256   /* (kernel, arch, key) triples; past it a look-up reads the cache each time */

/* A look-up remembered: the stored config's text (a hit) or none (a miss). The row is
 * made per call, over the call's table row. */
typedef struct Memo {
    char what[192];
    bool hit;
    char config[192];
} Memo;

static pthread_mutex_t memo_lock = PTHREAD_MUTEX_INITIALIZER;
static Memo memo[MEMO_MAX];
static int nmemo;

void rt_tune_memo_clear(void)
{
    pthread_mutex_lock(&memo_lock);
    nmemo = 0;
    pthread_mutex_unlock(&memo_lock);
}

/* The stored config for `what` (remembered) into cfg; false on a miss. */
static bool lookup_memo(const char *what, const char *src, const char *kernel, const char *arch, const char *key,
                        char cfg[192])
{
    pthread_mutex_lock(&memo_lock);
    for (int i = 0; i < nmemo; i++)
        if (!strcmp(memo[i].what, what)) {
            bool hit = memo[i].hit;
            snprintf(cfg, 192, "%s", memo[i].config);
            pthread_mutex_unlock(&memo_lock);
            return hit;
        }
    pthread_mutex_unlock(&memo_lock);
    char *c = NULL;
    bool hit = src && kiln_tune_lookup(src, kernel, arch, key, &c) == KILN_OK && strlen(c) < 192;
    snprintf(cfg, 192, "%s", hit ? c : "");
    free(c);
    kiln_clear_error();
    pthread_mutex_lock(&memo_lock);
    if (nmemo < MEMO_MAX) {
        snprintf(memo[nmemo].what, sizeof memo[nmemo].what, "%s", what);
        memo[nmemo].hit = hit;
        snprintf(memo[nmemo++].config, 192, "%s", cfg);
    }
    pthread_mutex_unlock(&memo_lock);
    return hit;
}

bool rt_tune_attn_row(RtTuneCall call, const char *kernel, int sm_version, int head_dim, int causal, int compute_dq,
                      int seqlen_q, const RtTuneRow *base, RtTuneRow *out)
{
    if (!kiln_cache_enabled() || call == RT_TUNE_DECODE) return false;
    const char *arch = sm_version >= 90 ? "sm_90a" : sm_version >= 89 ? "sm_89" : sm_version >= 86 ? "sm_86" : "sm_80";
    /* the key as the program's tune decl declares it (attention_fwd.tile, attention_bwd.tile) */
    char key[128], what[192], cfg[192];
    snprintf(key, sizeof key, "HEAD_DIM=%d CAUSAL=%s%s seqlen_q=%lld", head_dim, causal ? "true" : "false",
             call == RT_TUNE_BWD_DKDV ? (compute_dq ? " COMPUTE_DQ=true" : " COMPUTE_DQ=false") : "",
             rt_tune_bucket(seqlen_q));
    snprintf(what, sizeof what, "%s %s %s", kernel, arch, key);
    const char *src = kiln_lib_source(call == RT_TUNE_FWD ? "lang/lib/attention_fwd.tile" : "lang/lib/attention_bwd.tile");
    if (!lookup_memo(what, src, kernel, arch, key, cfg)) return false;
    RtTuneRow row = {.call = call, .num_stages = 2, .num_warps = 4};
    if (base) row = *base;
    row.min_sm = sm_version, row.head_dim = head_dim, row.causal = causal != 0, row.max_n = 0;
    if (!parse_config(cfg, &row) || !sched_resolve(&row.schedule, NULL, NULL, NULL, 0)) return false;
    *out = row;
    return true;
}
