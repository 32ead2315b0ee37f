/* cache.c — the on-disk cache of compiled kernels.
 *
 * An entry is one file, <dir>/<sha256 key>.kc:
 *   "KILNCE03" | key (64 hex) | u32 emit | u32 num_warps | u32 num_stages |
 *   u32 smem_bytes | u32 nparams | name[128] | nparams x (name[64], u32 kind,
 *   u32 pointee_bits) | u32 ntmaps | ntmaps x (5 u32: rank, base_param,
 *   elem_bytes, is_bf16, swizzle_bytes; 5 dims and 4 strides as (i32 param,
 *   i64 k); 5 u32 box; u64 nonneg_params) | u32 persistent | u64 payload_size | payload |
 *   u64 FNV-1a of all before
 * (integers little-endian); emit KILN_EMIT_IR: a kernel's signature alone, no
 * payload (rt_module_compile_deferred). Writers fill a uniquely named temporary file in
 * the same directory and rename() it over the entry, which is atomic on POSIX
 * file systems: a reader sees the old entry, the new one, or none — never a
 * mix, even with several compilers writing the same key at once. Readers
 * verify everything (magic, key, bounds, checksum) and treat a bad entry as a
 * miss, so the next compile rewrites it. Nothing in the directory can hang a
 * compile: readers open entries without following links or waiting on FIFOs
 * and read regular files only; writers only create new files. A writer killed
 * between create and rename leaves its temporary file: the first store of a
 * process removes those of dead writers (sweep_stale_tmp).
 *
 * The key covers the request (source, kernel, defines, arch, schedule, emit,
 * hints) and the compiler that serves it: kiln_version() and the build
 * identity (rt_build_id), which changes whenever the compiler's sources,
 * lang/lib programs, flags or LLVM change. A rebuilt compiler therefore
 * misses every entry an older build stored (they stay on disk, unused).
 */
#include "jit_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAGIC "KILNCE03"
#define MAX_PARAMS 4096

/* ---------------- keys ---------------- */

static const char *build_id_override;

const char *rt_build_id(void) { return build_id_override ? build_id_override : rt_build_id_generated; }
void rt_set_build_id(const char *id) { build_id_override = id; }

static void put_field(RtSha256 *s, const char *tag, const char *val)
{
    /* length-prefixed, so ("ab","c") and ("a","bc") differ */
    char head[64];
    size_t n = val ? strlen(val) : 0;
    int h = snprintf(head, sizeof head, "%s:%zu:", tag, n);
    rt_sha256_update(s, head, (size_t)h);
    if (n) rt_sha256_update(s, val, n);
}

static int cmp_define(const void *a, const void *b)
{
    const KilnDefine *x = *(const KilnDefine *const *)a, *y = *(const KilnDefine *const *)b;
    int c = strcmp(x->name ? x->name : "", y->name ? y->name : "");
    return c ? c : strcmp(x->value ? x->value : "", y->value ? y->value : "");
}

static int cmp_hint(const void *a, const void *b)
{
    const KilnParamHint *x = *(const KilnParamHint *const *)a, *y = *(const KilnParamHint *const *)b;
    int c = strcmp(x->name ? x->name : "", y->name ? y->name : "");
    if (c) return c;
    c = (x->divisibility > y->divisibility) - (x->divisibility < y->divisibility);
    return c ? c : (x->equals_one != 0) - (y->equals_one != 0);
}

/* Hints, sorted by name then value (their order does not change the code).
 * An equals-one hint hashes as its own field (n==1 and n=1 differ). */
static KilnStatus put_hints(RtSha256 *s, const KilnCompileOptions *o)
{
    if (o->nhints < 0 || (o->nhints > 0 && !o->hints))
        return kiln_set_error(KILN_ERR_USAGE, "kiln_cache_key: bad hints");
    if (o->nhints == 0) return KILN_OK;
    const KilnParamHint **h = malloc((size_t)o->nhints * sizeof *h);
    if (!h) return kiln_set_error(KILN_ERR_INTERNAL, "out of host memory");
    for (int i = 0; i < o->nhints; i++) h[i] = &o->hints[i];
    qsort(h, (size_t)o->nhints, sizeof *h, cmp_hint);
    char num[32];
    for (int i = 0; i < o->nhints; i++) {
        put_field(s, "hname", h[i]->name);
        snprintf(num, sizeof num, "%d", h[i]->divisibility);
        put_field(s, "hdiv", num);
        if (h[i]->equals_one) put_field(s, "hone", "1");
    }
    free(h);
    return KILN_OK;
}

KilnStatus kiln_cache_key(const char *src, const KilnCompileOptions *o, char key_hex[65])
{
    if (!src || !o || !key_hex) return kiln_set_error(KILN_ERR_USAGE, "kiln_cache_key: NULL argument");
    if (o->ndefines < 0 || (o->ndefines > 0 && !o->defines))
        return kiln_set_error(KILN_ERR_USAGE, "kiln_cache_key: bad defines");
    const KilnDefine **defs = o->ndefines ? malloc((size_t)o->ndefines * sizeof *defs) : NULL;
    if (o->ndefines && !defs) return kiln_set_error(KILN_ERR_INTERNAL, "out of host memory");
    for (int i = 0; i < o->ndefines; i++) defs[i] = &o->defines[i];
    if (defs) qsort(defs, (size_t)o->ndefines, sizeof *defs, cmp_define);
    RtSha256 s;
    rt_sha256_init(&s);
    char num[96];
    /* format 2: hints are part of the key, and unhinted pointers are no
     * longer assumed 16-byte aligned (format-1 entries must not be reused);
     * format 3: equals-one hints are part of the key (a format-2 key ignored
     * them, so a NAME==1 compile could have been stored under the generic
     * key: such entries must not be reused); format 4: the compiler's build
     * identity is part of the key; format 5: the schedule options resolved, each
     * under its key of the schedule table (no_wgmma left the "sched" field) */
    put_field(&s, "format", "kiln-cache-5");
    put_field(&s, "version", kiln_version());
    put_field(&s, "build", rt_build_id());
    put_field(&s, "src", src);
    put_field(&s, "kernel", o->kernel);
    for (int i = 0; i < o->ndefines; i++) {
        put_field(&s, "dname", defs[i]->name);
        put_field(&s, "dvalue", defs[i]->value);
    }
    put_field(&s, "arch", o->arch ? o->arch : "");
    snprintf(num, sizeof num, "%d/%d/%d/%d", o->num_warps, o->num_stages, (int)o->emit, o->no_opt);
    put_field(&s, "sched", num);
    /* the schedule options as the compile resolves them (tma: with mbarrier), each
     * under its table's key when on */
    KilnSchedule sched;
    char why[256];
    if (!sched_resolve(&o->schedule, NULL, &sched, why, sizeof why)) {
        free(defs);
        return kiln_set_error(KILN_ERR_USAGE, "kiln_cache_key: %s", why);
    }
    for (int i = 0; i < SCHED_COUNT; i++)
        if (sched_get(&sched, i)) put_field(&s, sched_options[i].key, "1");
    KilnStatus st = put_hints(&s, o);
    if (st != KILN_OK) {
        free(defs);
        return st;
    }
    uint8_t d[32];
    rt_sha256_final(&s, d);
    for (int i = 0; i < 32; i++) snprintf(key_hex + 2 * i, 3, "%02x", d[i]);
    free(defs);
    return KILN_OK;
}

int kiln_cache_enabled(void)
{
    const char *e = getenv("KILN_CACHE_DISABLE");
    return !(e && *e && strcmp(e, "0"));
}

KilnStatus kiln_cache_dir(char *buf, size_t size)
{
    const char *d = getenv("KILN_CACHE_DIR");
    int n;
    if (d && *d) n = snprintf(buf, size, "%s", d);
    else if ((d = getenv("HOME")) && *d) n = snprintf(buf, size, "%s/.cache/kiln", d);
    else return kiln_set_error(KILN_ERR_IO, "no cache directory: set KILN_CACHE_DIR or HOME");
    if (n < 0 || (size_t)n >= size) return kiln_set_error(KILN_ERR_IO, "cache directory path too long");
    return KILN_OK;
}

char *rt_cache_path(const char *dir, const char *key_hex)
{
    size_t n = strlen(dir) + strlen(key_hex) + 8;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s.kc", dir, key_hex);
    return p;
}

static bool valid_key(const char *k)
{
    if (!k || strlen(k) != 64) return false;
    for (int i = 0; i < 64; i++)
        if (!((k[i] >= '0' && k[i] <= '9') || (k[i] >= 'a' && k[i] <= 'f'))) return false;
    return true;
}

/* ---------------- encoding ---------------- */

static uint64_t fnv1a(const uint8_t *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

static uint8_t *put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) *p++ = (uint8_t)(v >> (8 * i));
    return p;
}
/* A name in a zeroed field of `width` bytes: at most width - 1 of its bytes, so the field
 * always ends in a NUL (the reader relies on it). */
static uint8_t *put_name(uint8_t *p, const char *name, size_t width)
{
    memcpy(p, name, strnlen(name, width - 1));
    return p + width;
}
static uint8_t *put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) *p++ = (uint8_t)(v >> (8 * i));
    return p;
}
static uint32_t get_u32(const uint8_t *p)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) v |= (uint32_t)p[i] << (8 * i);
    return v;
}
static uint64_t get_u64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

#define HEAD_BYTES (8 + 64 + 5 * 4 + 128)
#define PARAM_BYTES (64 + 4 + 4)
#define TMAP_BYTES (5 * 4 + 9 * 12 + 5 * 4 + 8)

static uint8_t *put_tmap(uint8_t *p, const KilnTensorMapInfo *t)
{
    p = put_u32(p, (uint32_t)t->rank), p = put_u32(p, (uint32_t)t->base_param);
    p = put_u32(p, (uint32_t)t->elem_bytes), p = put_u32(p, (uint32_t)t->is_bf16);
    p = put_u32(p, (uint32_t)t->swizzle_bytes);
    for (int i = 0; i < 9; i++) {
        const KilnTmapValue *v = i < 5 ? &t->dims[i] : &t->strides[i - 5];
        p = put_u32(p, (uint32_t)v->param), p = put_u64(p, (uint64_t)v->k);
    }
    for (int i = 0; i < 5; i++) p = put_u32(p, (uint32_t)t->box[i]);
    return put_u64(p, (uint64_t)t->nonneg_params);
}

static const uint8_t *get_tmap(const uint8_t *p, KilnTensorMapInfo *t)
{
    t->rank = (int)get_u32(p), t->base_param = (int)get_u32(p + 4), t->elem_bytes = (int)get_u32(p + 8);
    t->is_bf16 = (int)get_u32(p + 12), t->swizzle_bytes = (int)get_u32(p + 16);
    p += 20;
    for (int i = 0; i < 9; i++, p += 12) {
        KilnTmapValue *v = i < 5 ? &t->dims[i] : &t->strides[i - 5];
        v->param = (int)get_u32(p), v->k = (long long)get_u64(p + 4);
    }
    for (int i = 0; i < 5; i++, p += 4) t->box[i] = (int)get_u32(p);
    t->nonneg_params = get_u64(p);
    return p + 8;
}

KilnStatus rt_cache_encode(const char *key_hex, const KilnCacheEntry *e, uint8_t **out, size_t *size)
{
    *out = NULL;
    *size = 0;
    const KilnKernelInfo *ki = &e->info;
    if (!valid_key(key_hex) || ki->nparams < 0 || ki->nparams > MAX_PARAMS || (ki->nparams && !ki->params) ||
        (!e->payload && e->payload_size))
        return kiln_set_error(KILN_ERR_USAGE, "kiln_cache_store: bad key or entry");
    if (ki->ntmaps < 0 || ki->ntmaps > KILN_MAX_TMAPS) return kiln_set_error(KILN_ERR_USAGE, "kiln_cache_store: bad entry");
    size_t n = HEAD_BYTES + (size_t)ki->nparams * PARAM_BYTES + 4 + (size_t)ki->ntmaps * TMAP_BYTES + 4 + 8 +
               e->payload_size + 8;
    uint8_t *buf = calloc(1, n), *p = buf;
    if (!buf) return kiln_set_error(KILN_ERR_INTERNAL, "out of host memory");
    memcpy(p, MAGIC, 8), p += 8;
    memcpy(p, key_hex, 64), p += 64;
    p = put_u32(p, (uint32_t)e->emit);
    p = put_u32(p, (uint32_t)ki->num_warps);
    p = put_u32(p, (uint32_t)ki->num_stages);
    p = put_u32(p, (uint32_t)ki->smem_bytes);
    p = put_u32(p, (uint32_t)ki->nparams);
    p = put_name(p, ki->name, 128);
    for (int i = 0; i < ki->nparams; i++) {
        p = put_name(p, ki->params[i].name, 64);
        p = put_u32(p, (uint32_t)ki->params[i].kind);
        p = put_u32(p, (uint32_t)ki->params[i].pointee_bits);
    }
    p = put_u32(p, (uint32_t)ki->ntmaps);
    for (int i = 0; i < ki->ntmaps; i++) p = put_tmap(p, &ki->tmaps[i]);
    p = put_u32(p, (uint32_t)ki->persistent);
    p = put_u64(p, e->payload_size);
    if (e->payload_size) memcpy(p, e->payload, e->payload_size), p += e->payload_size;
    p = put_u64(p, fnv1a(buf, (size_t)(p - buf)));
    *out = buf;
    *size = n;
    return KILN_OK;
}

static KilnStatus corrupt(const char *why) { return kiln_set_error(KILN_ERR_NOT_FOUND, "cache entry ignored: %s", why); }

KilnStatus rt_cache_decode(const char *key_hex, const uint8_t *d, size_t size, KilnCacheEntry *out)
{
    memset(out, 0, sizeof *out);
    if (size < HEAD_BYTES + 16 || memcmp(d, MAGIC, 8)) return corrupt("bad magic or too short");
    if (!valid_key(key_hex) || memcmp(d + 8, key_hex, 64)) return corrupt("key mismatch");
    if (get_u64(d + size - 8) != fnv1a(d, size - 8)) return corrupt("checksum mismatch");
    const uint8_t *p = d + 72;
    uint32_t emit = get_u32(p), warps = get_u32(p + 4), stages = get_u32(p + 8), smem = get_u32(p + 12);
    uint32_t np = get_u32(p + 16);
    p += 20;
    /* KILN_EMIT_IR: a signature-only entry (rt_module_compile_deferred), no payload */
    bool emit_ok = emit == KILN_EMIT_PTX || emit == KILN_EMIT_CUBIN || emit == KILN_EMIT_IR;
    if (!emit_ok || np > MAX_PARAMS || warps > 64 || smem > (1u << 30))
        return corrupt("bad header fields");
    size_t at_maps = HEAD_BYTES + (size_t)np * PARAM_BYTES;
    if (at_maps + 4 + 16 > size) return corrupt("truncated");
    uint32_t nmaps = get_u32(d + at_maps);
    if (nmaps > KILN_MAX_TMAPS) return corrupt("bad tensor-map count");
    size_t need = at_maps + 4 + (size_t)nmaps * TMAP_BYTES + 4 + 8;
    if (need + 8 > size) return corrupt("truncated");
    uint64_t psize = get_u64(d + need - 8);
    if (psize != size - need - 8) return corrupt("payload size mismatch");
    KilnKernelInfo *ki = &out->info;
    memcpy(ki->name, p, 128), p += 128;
    ki->name[127] = 0;
    ki->num_warps = (int)warps, ki->num_stages = (int)stages, ki->smem_bytes = (int)smem, ki->nparams = (int)np;
    ki->params = np ? calloc(np, sizeof(KilnParam)) : NULL;
    out->payload = malloc(psize + 1);
    if ((np && !ki->params) || !out->payload) {
        kiln_cache_entry_free(out);
        return kiln_set_error(KILN_ERR_INTERNAL, "out of host memory");
    }
    for (uint32_t i = 0; i < np; i++, p += PARAM_BYTES) {
        memcpy(ki->params[i].name, p, 64);
        ki->params[i].name[63] = 0;
        ki->params[i].kind = (KilnParamKind)get_u32(p + 64);
        ki->params[i].pointee_bits = (int)get_u32(p + 68);
        if ((unsigned)ki->params[i].kind > KILN_PARAM_BF16) {
            kiln_cache_entry_free(out);
            return corrupt("bad parameter kind");
        }
    }
    ki->ntmaps = (int)nmaps;
    for (uint32_t i = 0; i < nmaps; i++) get_tmap(d + at_maps + 4 + i * TMAP_BYTES, &ki->tmaps[i]);
    uint32_t persistent = get_u32(d + need - 12);
    if (persistent > 2) {
        kiln_cache_entry_free(out);
        return corrupt("bad persistent mode");
    }
    ki->persistent = (int)persistent;
    memcpy(out->payload, d + need, psize);
    out->payload[psize] = 0; /* PTX is used as a C string */
    out->payload_size = psize;
    out->emit = (KilnEmit)emit;
    return KILN_OK;
}

void kiln_cache_entry_free(KilnCacheEntry *e)
{
    if (!e) return;
    free(e->payload);
    free(e->info.params);
    memset(e, 0, sizeof *e);
}

/* ---------------- files ---------------- */

/* An entry's bytes, or NULL (a miss). Only a regular file is read: the open
 * neither follows a symlink nor waits on a FIFO (O_NONBLOCK), and anything
 * that is not a regular file of a sane size is a miss, so a planted FIFO or
 * device can never hang or flood a compile. */
static uint8_t *read_all(const char *path, size_t *size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW | O_NOCTTY);
    if (fd < 0) return NULL;
    struct stat st;
    uint8_t *buf = NULL;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 && st.st_size < (1LL << 31)) {
        size_t n = (size_t)st.st_size, got = 0;
        buf = malloc(n);
        while (buf && got < n) {
            ssize_t r = read(fd, buf + got, n - got);
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) break;
            got += (size_t)r;
        }
        if (buf && got != n) {
            free(buf);
            buf = NULL;
        }
        *size = n;
    }
    close(fd);
    return buf;
}

KilnStatus kiln_cache_lookup(const char *key_hex, KilnCacheEntry *out)
{
    if (!out) return kiln_set_error(KILN_ERR_USAGE, "kiln_cache_lookup: out is NULL");
    memset(out, 0, sizeof *out);
    if (!kiln_cache_enabled()) return kiln_set_error(KILN_ERR_NOT_FOUND, "cache disabled (KILN_CACHE_DISABLE)");
    if (!valid_key(key_hex)) return kiln_set_error(KILN_ERR_USAGE, "kiln_cache_lookup: bad key");
    char dir[4096];
    KilnStatus st = kiln_cache_dir(dir, sizeof dir);
    if (st != KILN_OK) return kiln_set_error(KILN_ERR_NOT_FOUND, "%s", kiln_last_error());
    char *path = rt_cache_path(dir, key_hex);
    size_t size = 0;
    uint8_t *data = path ? read_all(path, &size) : NULL;
    if (!data) st = kiln_set_error(KILN_ERR_NOT_FOUND, "no cache entry %s", path ? path : key_hex);
    else st = rt_cache_decode(key_hex, data, size, out);
    free(data);
    free(path);
    return st;
}

/* mkdir -p */
static KilnStatus make_dirs(const char *dir)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s", dir);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(tmp, 0777) != 0 && errno != EEXIST)
            return kiln_set_error(KILN_ERR_IO, "cannot create cache directory %s: %s", tmp, strerror(errno));
        *p = '/';
    }
    if (mkdir(tmp, 0777) != 0 && errno != EEXIST)
        return kiln_set_error(KILN_ERR_IO, "cannot create cache directory %s: %s", tmp, strerror(errno));
    return KILN_OK;
}

static KilnStatus write_all(int fd, const uint8_t *p, size_t n, const char *path)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return kiln_set_error(KILN_ERR_IO, "cannot write %s: %s", path, strerror(errno));
        p += w;
        n -= (size_t)w;
    }
    return KILN_OK;
}

/* A writer's temporary file is ".<key>.<pid>.<thread>.<n>.tmp" (write_entry).
 * Returns the writer's pid, or 0 when `name` is not one. */
static long tmp_writer_pid(const char *name)
{
    size_t len = strlen(name);
    if (name[0] != '.' || len < 66 + 4 || strcmp(name + len - 4, ".tmp") || name[65] != '.') return 0;
    char key[65];
    memcpy(key, name + 1, 64);
    key[64] = 0;
    if (!valid_key(key)) return 0;
    char *end;
    long pid = strtol(name + 66, &end, 10);
    return *end == '.' && pid > 0 ? pid : 0;
}

/* How old a dead writer's temporary file must be before it is removed: a
 * writer on another host sharing the directory (whose pid means nothing here)
 * finishes its few-kilobyte write long before this. */
#define STALE_TMP_SECONDS (10 * 60)

/* Removes the temporary files of writers killed mid-store (they would stay
 * for ever): only files whose writer process is gone AND that are older than
 * STALE_TMP_SECONDS, so a live writer's file is never touched. Best effort:
 * errors are ignored (the store itself does not depend on it). Once per
 * process: a directory scan per compile would cost more than the litter. */
static void sweep_stale_tmp(const char *dir)
{
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    static bool swept;
    pthread_mutex_lock(&lock);
    bool first = !swept;
    swept = true;
    pthread_mutex_unlock(&lock);
    if (!first) return;
    DIR *d = opendir(dir);
    if (!d) return;
    time_t now = time(NULL);
    struct dirent *e;
    while ((e = readdir(d))) {
        long pid = tmp_writer_pid(e->d_name);
        struct stat st;
        if (!pid || pid == (long)getpid()) continue;
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) continue;
        if (now - st.st_mtime < STALE_TMP_SECONDS) continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue; /* alive, or not ours to know */
        unlinkat(dirfd(d), e->d_name, 0);
    }
    closedir(d);
}

static KilnStatus write_entry(const char *dir, const char *key_hex, const uint8_t *buf, size_t n)
{
    static unsigned counter;
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&lock);
    unsigned c = ++counter;
    pthread_mutex_unlock(&lock);
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s/.%s.%ld.%lx.%u.tmp", dir, key_hex, (long)getpid(),
             (unsigned long)pthread_self(), c);
    /* O_EXCL|O_NOFOLLOW: never opens (or blocks on) an existing FIFO or link;
     * rename() then replaces whatever the entry path holds without opening it. */
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0666);
    if (fd < 0) return kiln_set_error(KILN_ERR_IO, "cannot create %s: %s", tmp, strerror(errno));
    KilnStatus st = write_all(fd, buf, n, tmp);
    if (close(fd) != 0 && st == KILN_OK) st = kiln_set_error(KILN_ERR_IO, "cannot write %s: %s", tmp, strerror(errno));
    char *path = st == KILN_OK ? rt_cache_path(dir, key_hex) : NULL;
    if (st == KILN_OK && (!path || rename(tmp, path) != 0))
        st = kiln_set_error(KILN_ERR_IO, "cannot rename %s into place: %s", tmp, strerror(errno));
    if (st != KILN_OK) unlink(tmp);
    free(path);
    return st;
}

KilnStatus kiln_cache_store(const char *key_hex, const KilnCacheEntry *e)
{
    if (!e) return kiln_set_error(KILN_ERR_USAGE, "kiln_cache_store: entry is NULL");
    if (!kiln_cache_enabled()) return KILN_OK;
    uint8_t *buf = NULL;
    size_t n = 0;
    KilnStatus st = rt_cache_encode(key_hex, e, &buf, &n);
    char dir[4096];
    if (st == KILN_OK) st = kiln_cache_dir(dir, sizeof dir);
    if (st == KILN_OK) st = make_dirs(dir);
    if (st == KILN_OK) sweep_stale_tmp(dir);
    if (st == KILN_OK) st = write_entry(dir, key_hex, buf, n);
    free(buf);
    return st;
}
