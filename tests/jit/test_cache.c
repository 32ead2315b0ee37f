/* test_cache.c — the on-disk kernel cache: keys, entry format, corruption,
 * KILN_CACHE_DISABLE, concurrent writers (processes and threads) of one key,
 * and the compiler's build identity in the key.
 * Payloads are fake PTX-like text: the cache never looks inside them. */
#include "testutil.h"

#include <dirent.h>
#include <fcntl.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kiln.h"
#include "jit_internal.h"

static char g_dir[256];

static void make_tmp_dir(void)
{
    snprintf(g_dir, sizeof g_dir, "/tmp/kiln-cache-test-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(g_dir));
    char sub[300];
    snprintf(sub, sizeof sub, "%s/a/b", g_dir); /* not there yet: store must mkdir -p */
    setenv("KILN_CACHE_DIR", sub, 1);
    unsetenv("KILN_CACHE_DISABLE");
}

static void rm_rf(const char *path)
{
    DIR *d = opendir(path);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            char p[1024];
            snprintf(p, sizeof p, "%s/%s", path, e->d_name);
            rm_rf(p);
        }
        closedir(d);
        rmdir(path);
    } else {
        unlink(path);
    }
}

static void remove_tmp_dir(void) { rm_rf(g_dir); }

static KilnParam g_params[2] = {{"X", KILN_PARAM_PTR, 16}, {"n", KILN_PARAM_I32, 0}};

/* A fake entry whose payload is `size` bytes derived from `seed`. */
static KilnCacheEntry fake_entry(int seed, size_t size)
{
    KilnCacheEntry e;
    memset(&e, 0, sizeof e);
    e.emit = seed % 2 ? KILN_EMIT_CUBIN : KILN_EMIT_PTX;
    e.payload = malloc(size + 1);
    for (size_t i = 0; i < size; i++) e.payload[i] = (char)('A' + (seed * 7 + (int)i * 13) % 26);
    e.payload[size] = 0;
    e.payload_size = size;
    snprintf(e.info.name, sizeof e.info.name, "kernel_%d", seed);
    e.info.params = g_params;
    e.info.nparams = 2;
    e.info.num_warps = 1 + seed % 8;
    e.info.num_stages = 3;
    e.info.smem_bytes = 1000 * seed + 17;
    return e;
}

static void assert_same(const KilnCacheEntry *a, const KilnCacheEntry *b)
{
    ck_assert_int_eq(a->emit, b->emit);
    ck_assert_uint_eq(a->payload_size, b->payload_size);
    ck_assert(memcmp(a->payload, b->payload, a->payload_size) == 0);
    ck_assert_str_eq(a->info.name, b->info.name);
    ck_assert_int_eq(a->info.nparams, b->info.nparams);
    ck_assert_int_eq(a->info.num_warps, b->info.num_warps);
    ck_assert_int_eq(a->info.num_stages, b->info.num_stages);
    ck_assert_int_eq(a->info.smem_bytes, b->info.smem_bytes);
    for (int i = 0; i < a->info.nparams; i++) {
        ck_assert_str_eq(a->info.params[i].name, b->info.params[i].name);
        ck_assert_int_eq(a->info.params[i].kind, b->info.params[i].kind);
        ck_assert_int_eq(a->info.params[i].pointee_bits, b->info.params[i].pointee_bits);
    }
}

static char *entry_path(const char *key)
{
    char dir[512];
    ck_assert_int_eq(kiln_cache_dir(dir, sizeof dir), KILN_OK);
    return rt_cache_path(dir, key);
}

START_TEST(sha256_vectors)
{
    char hex[65];
    rt_sha256_hex("abc", 3, hex);
    ck_assert_str_eq(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    rt_sha256_hex("", 0, hex);
    ck_assert_str_eq(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    rt_sha256_hex(two, strlen(two), hex);
    ck_assert_str_eq(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    /* a million 'a's, fed in odd-sized pieces */
    RtSha256 s;
    rt_sha256_init(&s);
    char a[997];
    memset(a, 'a', sizeof a);
    size_t left = 1000000;
    while (left) {
        size_t n = left < sizeof a ? left : sizeof a;
        rt_sha256_update(&s, a, n);
        left -= n;
    }
    uint8_t d[32];
    rt_sha256_final(&s, d);
    for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", d[i]);
    ck_assert_str_eq(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}
END_TEST

static const char *SRC = "kernel k(X: *f32, n: i32, const B: i32) { }\n";

START_TEST(key_is_stable_and_sensitive)
{
    KilnDefine d1[2] = {{"B", "128"}, {"C", "true"}};
    KilnDefine d2[2] = {{"C", "true"}, {"B", "128"}};
    KilnCompileOptions o = {.kernel = "k", .defines = d1, .ndefines = 2, .arch = "sm_90a", .num_warps = 4,
                            .num_stages = 3, .emit = KILN_EMIT_PTX};
    char k0[65], k1[65];
    ck_assert_int_eq(kiln_cache_key(SRC, &o, k0), KILN_OK);
    ck_assert_int_eq(strlen(k0), 64);
    ck_assert_int_eq(kiln_cache_key(SRC, &o, k1), KILN_OK);
    ck_assert_str_eq(k0, k1);
    /* define order does not matter */
    o.defines = d2;
    ck_assert_int_eq(kiln_cache_key(SRC, &o, k1), KILN_OK);
    ck_assert_str_eq(k0, k1);
    /* a child process computes the same key (no addresses or time in it) */
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    pid_t pid = fork();
    if (pid == 0) {
        char kc[65];
        kiln_cache_key(SRC, &o, kc);
        ssize_t w = write(fds[1], kc, 64);
        _exit(w == 64 ? 0 : 1);
    }
    char kc[65] = {0};
    ck_assert_int_eq(read(fds[0], kc, 64), 64);
    waitpid(pid, NULL, 0);
    ck_assert_str_eq(k0, kc);
    /* every part of the request changes the key */
    KilnCompileOptions v[8 + SCHED_COUNT];
    for (int i = 0; i < 8 + SCHED_COUNT; i++) v[i] = o;
    v[0].kernel = "k2";
    v[1].arch = "sm_80";
    v[2].num_warps = 8;
    v[3].num_stages = 2;
    v[4].emit = KILN_EMIT_CUBIN;
    KilnDefine d3[2] = {{"B", "64"}, {"C", "true"}};
    v[5].defines = d3;
    v[6].ndefines = 1;
    v[7].no_opt = 1;
    for (int i = 0; i < SCHED_COUNT; i++) sched_set(&v[8 + i].schedule, i, 1);   /* each schedule option */
    for (int i = 0; i < 8 + SCHED_COUNT; i++) {
        ck_assert_int_eq(kiln_cache_key(SRC, &v[i], k1), KILN_OK);
        ck_assert_msg(strcmp(k0, k1) != 0, "variant %d gives the same key", i);
    }
    /* the schedule options as resolved: tma implies mbarrier, so both give one key (one PTX),
     * asked off is the default; a refused combination has no key, its message names both */
    KilnCompileOptions t1 = o, t2 = o, t3 = o, t4 = o;
    t1.schedule.tma = 1;
    t2.schedule.tma = t2.schedule.mbarrier = 1;
    t3.schedule.pingpong = -1;
    char k2[65];
    ck_assert_int_eq(kiln_cache_key(SRC, &t1, k1), KILN_OK);
    ck_assert_int_eq(kiln_cache_key(SRC, &t2, k2), KILN_OK);
    ck_assert_str_eq(k1, k2);
    ck_assert_int_eq(kiln_cache_key(SRC, &t3, k1), KILN_OK);
    ck_assert_str_eq(k0, k1);
    t4.schedule.tma = 1;
    t4.schedule.mbarrier = -1;   /* tma needs mbarrier: a refused combination has no key */
    ck_assert_int_eq(kiln_cache_key(SRC, &t4, k1), KILN_ERR_USAGE);
    ck_assert_ptr_nonnull(strstr(kiln_last_error(), "--tma"));
    ck_assert_ptr_nonnull(strstr(kiln_last_error(), "--mbarrier"));
    ck_assert_int_eq(kiln_cache_key("kernel k(X: *f32, n: i32, const B: i32) { } ", &o, k1), KILN_OK);
    ck_assert_str_ne(k0, k1);
    /* field boundaries are unambiguous: ("B", "128") vs ("B1", "28") */
    KilnDefine d4[2] = {{"B1", "28"}, {"C", "true"}};
    o.defines = d4;
    ck_assert_int_eq(kiln_cache_key(SRC, &o, k1), KILN_OK);
    ck_assert_str_ne(k0, k1);
    ck_assert_int_eq(kiln_cache_key(NULL, &o, k1), KILN_ERR_USAGE);
}
END_TEST

/* A rebuilt compiler (another build identity) misses every entry an older
 * build stored, whatever the request; the old identity still finds them. */
START_TEST(rebuilt_compiler_misses_old_entries)
{
    /* the generated identity: a SHA-256 in hex, used unless a test overrides it */
    ck_assert_int_eq(strlen(rt_build_id_generated), 64);
    ck_assert_str_eq(rt_build_id(), rt_build_id_generated);
    enum { N = 4 };
    KilnCompileOptions req[N];
    KilnDefine d[1] = {{"B", "128"}};
    KilnParamHint h[1] = {{"n", 16, 0}};
    for (int i = 0; i < N; i++)
        req[i] = (KilnCompileOptions){.kernel = "k", .defines = d, .ndefines = 1, .arch = "sm_90a",
                                      .emit = KILN_EMIT_PTX};
    req[1].arch = "sm_80";
    req[2].emit = KILN_EMIT_CUBIN, req[2].num_warps = 8;
    req[3].hints = h, req[3].nhints = 1;
    char old_keys[N][65], key[65];
    KilnCacheEntry got;
    rt_set_build_id("0.1.0 build A");
    for (int i = 0; i < N; i++) {
        ck_assert_int_eq(kiln_cache_key(SRC, &req[i], old_keys[i]), KILN_OK);
        KilnCacheEntry e = fake_entry(i, 100);
        ck_assert_int_eq(kiln_cache_store(old_keys[i], &e), KILN_OK);
        free(e.payload);
    }
    rt_set_build_id("0.1.0 build B");
    for (int i = 0; i < N; i++) {
        ck_assert_int_eq(kiln_cache_key(SRC, &req[i], key), KILN_OK);
        for (int j = 0; j < N; j++) ck_assert_str_ne(key, old_keys[j]);
        ck_assert_int_eq(kiln_cache_lookup(key, &got), KILN_ERR_NOT_FOUND);
    }
    rt_set_build_id("0.1.0 build A");
    for (int i = 0; i < N; i++) {
        ck_assert_int_eq(kiln_cache_key(SRC, &req[i], key), KILN_OK);
        ck_assert_str_eq(key, old_keys[i]);
        ck_assert_int_eq(kiln_cache_lookup(key, &got), KILN_OK);
        kiln_cache_entry_free(&got);
    }
    rt_set_build_id(NULL);
    ck_assert_str_eq(rt_build_id(), rt_build_id_generated);
}
END_TEST

START_TEST(store_then_lookup)
{
    const char *key = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
    KilnCacheEntry got;
    ck_assert_int_eq(kiln_cache_lookup(key, &got), KILN_ERR_NOT_FOUND);
    KilnCacheEntry e = fake_entry(3, 5000);
    ck_assert_int_eq(kiln_cache_store(key, &e), KILN_OK);
    ck_assert_int_eq(kiln_cache_lookup(key, &got), KILN_OK);
    assert_same(&e, &got);
    ck_assert_int_eq(got.payload[got.payload_size], 0);
    kiln_cache_entry_free(&got);
    /* an overwrite replaces the entry */
    KilnCacheEntry e2 = fake_entry(4, 10);
    ck_assert_int_eq(kiln_cache_store(key, &e2), KILN_OK);
    ck_assert_int_eq(kiln_cache_lookup(key, &got), KILN_OK);
    assert_same(&e2, &got);
    kiln_cache_entry_free(&got);
    free(e.payload);
    free(e2.payload);
    ck_assert_int_eq(kiln_cache_lookup("not-a-key", &got), KILN_ERR_USAGE);
}
END_TEST

/* A signature-only entry (emit IR, no payload: rt_module_compile_deferred)
 * round-trips; an IR entry claiming a payload does not verify. */
START_TEST(signature_only_entry)
{
    const char *key = "ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100";
    KilnCacheEntry e = fake_entry(5, 0), got;
    free(e.payload);
    e.payload = NULL;
    e.payload_size = 0;
    e.emit = KILN_EMIT_IR;
    ck_assert_int_eq(kiln_cache_store(key, &e), KILN_OK);
    ck_assert_int_eq(kiln_cache_lookup(key, &got), KILN_OK);
    ck_assert_int_eq(got.emit, KILN_EMIT_IR);
    ck_assert_uint_eq(got.payload_size, 0);
    ck_assert_int_eq(got.info.nparams, e.info.nparams);
    ck_assert_str_eq(got.info.params[0].name, "X");
    ck_assert_int_eq(got.info.num_warps, e.info.num_warps);
    kiln_cache_entry_free(&got);
    /* other emits stay refused */
    e.emit = KILN_EMIT_LLVM;
    uint8_t *buf;
    size_t n;
    ck_assert_int_eq(rt_cache_encode(key, &e, &buf, &n), KILN_OK);
    ck_assert_int_eq(rt_cache_decode(key, buf, n, &got), KILN_ERR_NOT_FOUND);
    free(buf);
}
END_TEST

/* A kernel compiled with tma carries its tensor-map recipes: they round-trip. */
START_TEST(tensor_map_recipes_round_trip)
{
    const char *key = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    KilnCacheEntry e = fake_entry(2, 64), got;
    e.info.ntmaps = 2;
    e.info.tmaps[0] = (KilnTensorMapInfo){.rank = 2, .base_param = 0, .elem_bytes = 2, .swizzle_bytes = 128,
                                          .dims = {{-1, 1024}, {1, 1}}, .strides = {{-1, 2048}}, .box = {64, 128}};
    e.info.tmaps[1] = (KilnTensorMapInfo){.rank = 4, .base_param = 1, .elem_bytes = 2, .is_bf16 = 1, .swizzle_bytes = 128,
                                          .dims = {{-1, 128}, {1, 1}, {-1, 1ll << 32}, {-1, 1ll << 32}},
                                          .strides = {{1, 2}, {0, 2}, {1, 4}}, .box = {64, 64, 1, 1},
                                          .nonneg_params = 3};
    ck_assert_int_eq(kiln_cache_store(key, &e), KILN_OK);
    ck_assert_int_eq(kiln_cache_lookup(key, &got), KILN_OK);
    ck_assert_int_eq(got.info.ntmaps, 2);
    for (int m = 0; m < 2; m++) {   /* field by field: the structs have padding */
        const KilnTensorMapInfo *a = &e.info.tmaps[m], *b = &got.info.tmaps[m];
        ck_assert_int_eq(a->rank, b->rank);
        ck_assert_int_eq(a->base_param, b->base_param);
        ck_assert_int_eq(a->elem_bytes, b->elem_bytes);
        ck_assert_int_eq(a->is_bf16, b->is_bf16);
        ck_assert_int_eq(a->swizzle_bytes, b->swizzle_bytes);
        ck_assert_uint_eq(a->nonneg_params, b->nonneg_params);
        for (int d = 0; d < 5; d++) {
            ck_assert_int_eq(a->dims[d].param, b->dims[d].param);
            ck_assert_int_eq(a->dims[d].k, b->dims[d].k);
            ck_assert_int_eq(a->box[d], b->box[d]);
            if (d < 4) ck_assert_int_eq(a->strides[d].param, b->strides[d].param);
            if (d < 4) ck_assert_int_eq(a->strides[d].k, b->strides[d].k);
        }
    }
    kiln_cache_entry_free(&got);
    free(e.payload);
}
END_TEST

static void write_file(const char *path, const uint8_t *d, size_t n)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, d, n), (ssize_t)n);
    close(fd);
}

START_TEST(corrupt_entries_are_ignored_and_rebuilt)
{
    char key[65];
    rt_sha256_hex("corrupt", 7, key);
    KilnCacheEntry e = fake_entry(5, 3000), got;
    ck_assert_int_eq(kiln_cache_store(key, &e), KILN_OK);
    char *path = entry_path(key);
    uint8_t *good = NULL;
    size_t n = 0;
    ck_assert_int_eq(rt_cache_encode(key, &e, &good, &n), KILN_OK);
    uint8_t *bad = malloc(n);
    /* every single-byte flip, sampled across the file, must be caught */
    for (size_t pos = 0; pos < n; pos += 1 + n / 97) {
        memcpy(bad, good, n);
        bad[pos] ^= 0x5a;
        write_file(path, bad, n);
        ck_assert_msg(kiln_cache_lookup(key, &got) == KILN_ERR_NOT_FOUND, "flip at %zu accepted", pos);
    }
    /* truncations, an empty file, garbage, another key's entry */
    size_t cuts[] = {0, 1, 8, 72, n / 2, n - 9, n - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        write_file(path, good, cuts[i]);
        ck_assert_int_eq(kiln_cache_lookup(key, &got), KILN_ERR_NOT_FOUND);
    }
    write_file(path, (const uint8_t *)"garbage garbage garbage", 23);
    ck_assert_int_eq(kiln_cache_lookup(key, &got), KILN_ERR_NOT_FOUND);
    char other[65];
    rt_sha256_hex("other", 5, other);
    uint8_t *ob = NULL;
    size_t on = 0;
    ck_assert_int_eq(rt_cache_encode(other, &e, &ob, &on), KILN_OK);
    write_file(path, ob, on);
    ck_assert_int_eq(kiln_cache_lookup(key, &got), KILN_ERR_NOT_FOUND);
    ck_assert_msg(strstr(kiln_last_error(), "key mismatch"), "%s", kiln_last_error());
    /* the next store rebuilds it */
    ck_assert_int_eq(kiln_cache_store(key, &e), KILN_OK);
    ck_assert_int_eq(kiln_cache_lookup(key, &got), KILN_OK);
    assert_same(&e, &got);
    kiln_cache_entry_free(&got);
    free(ob);
    free(bad);
    free(good);
    free(path);
    free(e.payload);
}
END_TEST

/* An entry path that is a FIFO, a symlink or a directory is a miss at once
 * (a FIFO opened for reading would wait for a writer for ever), and a store
 * replaces it without opening it. alarm(): a hang fails the test. */
START_TEST(special_entries_are_misses_and_never_block)
{
    alarm(20);
    KilnCacheEntry e = fake_entry(2, 100), got;
    const char *targets[] = {"fifo", "link", "dir"};
    for (int i = 0; i < 3; i++) {
        char key[65];
        rt_sha256_hex(targets[i], strlen(targets[i]), key);
        ck_assert_int_eq(kiln_cache_store(key, &e), KILN_OK); /* creates the directory */
        char *path = entry_path(key);
        ck_assert_int_eq(unlink(path), 0);
        if (i == 0) ck_assert_int_eq(mkfifo(path, 0600), 0);
        if (i == 1) ck_assert_int_eq(symlink("/dev/zero", path), 0);
        if (i == 2) ck_assert_int_eq(mkdir(path, 0700), 0);
        ck_assert_int_eq(kiln_cache_lookup(key, &got), KILN_ERR_NOT_FOUND);
        if (i < 2) { /* a directory cannot be renamed over: the store fails, cleanly */
            ck_assert_int_eq(kiln_cache_store(key, &e), KILN_OK);
            ck_assert_int_eq(kiln_cache_lookup(key, &got), KILN_OK);
            assert_same(&e, &got);
            kiln_cache_entry_free(&got);
        } else {
            ck_assert_int_eq(kiln_cache_store(key, &e), KILN_ERR_IO);
        }
        free(path);
    }
    free(e.payload);
    alarm(0);
}
END_TEST

/* Makes a writer's temporary file named for `pid`, `age` seconds old. */
static char *make_tmp(const char *dir, long pid, time_t age)
{
    char key[65], *p = malloc(512);
    rt_sha256_hex("tmp", 3, key);
    snprintf(p, 512, "%s/.%s.%ld.7f00.%ld.tmp", dir, key, pid, (long)age);
    write_file(p, (const uint8_t *)"half an entry", 13);
    struct timespec t[2] = {{time(NULL) - age, 0}, {time(NULL) - age, 0}};
    ck_assert_int_eq(utimensat(AT_FDCWD, p, t, 0), 0);
    return p;
}

/* A writer killed between create and rename leaves a .tmp file: a later
 * store removes it once it is old and its writer is gone, and leaves alone
 * the files of live writers and fresh ones (a writer on another host). */
START_TEST(stale_tmp_files_are_swept)
{
    char dir[4096];
    ck_assert_int_eq(kiln_cache_dir(dir, sizeof dir), KILN_OK);
    KilnCacheEntry e = fake_entry(1, 10);
    char key[65];
    rt_sha256_hex("first", 5, key);
    pid_t dead = fork(); /* a pid that is surely gone */
    if (dead == 0) _exit(0);
    ck_assert_int_eq(waitpid(dead, NULL, 0), dead);
    pid_t live = fork();
    if (live == 0) {
        pause();
        _exit(0);
    }
    /* the cache directory does not exist yet: create it through a first store
     * in a child (the sweep runs once per process) */
    pid_t c = fork();
    if (c == 0) _exit(kiln_cache_store(key, &e) == KILN_OK ? 0 : 1);
    int st = 0;
    ck_assert_int_eq(waitpid(c, &st, 0), c);
    ck_assert_int_eq(WEXITSTATUS(st), 0);
    char *stale = make_tmp(dir, dead, 3600), *fresh = make_tmp(dir, dead, 10),
         *alive = make_tmp(dir, live, 3600);
    rt_sha256_hex("second", 6, key);
    ck_assert_int_eq(kiln_cache_store(key, &e), KILN_OK);
    ck_assert_msg(access(stale, F_OK) != 0, "a dead writer's old .tmp stayed");
    ck_assert_msg(access(fresh, F_OK) == 0, "a fresh .tmp was removed");
    ck_assert_msg(access(alive, F_OK) == 0, "a live writer's .tmp was removed");
    kill(live, SIGKILL);
    waitpid(live, NULL, 0);
    free(stale), free(fresh), free(alive);
    free(e.payload);
}
END_TEST

START_TEST(disable_bypasses)
{
    char key[65];
    rt_sha256_hex("disabled", 8, key);
    KilnCacheEntry e = fake_entry(6, 100), got;
    setenv("KILN_CACHE_DISABLE", "1", 1);
    ck_assert(!kiln_cache_enabled());
    ck_assert_int_eq(kiln_cache_store(key, &e), KILN_OK);
    char *path = entry_path(key);
    ck_assert_int_ne(access(path, F_OK), 0); /* nothing written */
    unsetenv("KILN_CACHE_DISABLE");
    ck_assert_int_eq(kiln_cache_store(key, &e), KILN_OK);
    ck_assert_int_eq(access(path, F_OK), 0);
    setenv("KILN_CACHE_DISABLE", "1", 1);
    ck_assert_int_eq(kiln_cache_lookup(key, &got), KILN_ERR_NOT_FOUND);
    setenv("KILN_CACHE_DISABLE", "0", 1);
    ck_assert(kiln_cache_enabled());
    ck_assert_int_eq(kiln_cache_lookup(key, &got), KILN_OK);
    kiln_cache_entry_free(&got);
    free(path);
    free(e.payload);
}
END_TEST

START_TEST(default_dir_under_home)
{
    unsetenv("KILN_CACHE_DIR");
    setenv("HOME", g_dir, 1);
    char dir[512], want[512];
    ck_assert_int_eq(kiln_cache_dir(dir, sizeof dir), KILN_OK);
    snprintf(want, sizeof want, "%s/.cache/kiln", g_dir);
    ck_assert_str_eq(dir, want);
    char key[65];
    rt_sha256_hex("home", 4, key);
    KilnCacheEntry e = fake_entry(7, 64);
    ck_assert_int_eq(kiln_cache_store(key, &e), KILN_OK);
    struct stat st;
    ck_assert_int_eq(stat(want, &st), 0);
    ck_assert(S_ISDIR(st.st_mode));
    free(e.payload);
    unsetenv("HOME");
    ck_assert_int_eq(kiln_cache_dir(dir, sizeof dir), KILN_ERR_IO);
}
END_TEST

/* ---- concurrency: many writers of one key, readers in between ---- */

#define WRITERS 4
#define THREADS 3
#define ROUNDS 40

static char g_key[65];

static void *writer_thread(void *arg)
{
    int seed = (int)(intptr_t)arg;
    for (int r = 0; r < ROUNDS; r++) {
        /* different sizes per writer, so a torn file could not pass for a whole one */
        KilnCacheEntry e = fake_entry(seed, 2000 + 3000 * (size_t)(seed % 5));
        if (kiln_cache_store(g_key, &e) != KILN_OK) {
            free(e.payload);
            return (void *)1;
        }
        free(e.payload);
        KilnCacheEntry got;
        KilnStatus st = kiln_cache_lookup(g_key, &got);
        if (st != KILN_OK) return (void *)2; /* someone's complete entry is always there now */
        int ok = 0;
        for (int s = 0; s < WRITERS * THREADS; s++) {
            KilnCacheEntry w = fake_entry(s, 2000 + 3000 * (size_t)(s % 5));
            ok |= got.payload_size == w.payload_size && !memcmp(got.payload, w.payload, w.payload_size) &&
                  !strcmp(got.info.name, w.info.name);
            free(w.payload);
        }
        kiln_cache_entry_free(&got);
        if (!ok) return (void *)3;
    }
    return NULL;
}

static int run_writer_process(int proc)
{
    pthread_t t[THREADS];
    int bad = 0;
    for (int i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, writer_thread, (void *)(intptr_t)(proc * THREADS + i));
    for (int i = 0; i < THREADS; i++) {
        void *ret;
        pthread_join(t[i], &ret);
        bad |= ret != NULL;
    }
    return bad;
}

START_TEST(concurrent_writers_same_key)
{
    rt_sha256_hex("concurrent", 10, g_key);
    pid_t pids[WRITERS];
    for (int p = 0; p < WRITERS; p++) {
        pids[p] = fork();
        ck_assert_int_ge(pids[p], 0);
        if (pids[p] == 0) _exit(run_writer_process(p));
    }
    for (int p = 0; p < WRITERS; p++) {
        int status = 0;
        waitpid(pids[p], &status, 0);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "writer process %d failed", p);
    }
    /* no temporary files left behind; exactly the one entry */
    char dir[512];
    ck_assert_int_eq(kiln_cache_dir(dir, sizeof dir), KILN_OK);
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    int files = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.' && (!e->d_name[1] || !strcmp(e->d_name, ".."))) continue;
        ck_assert_msg(!strstr(e->d_name, ".tmp"), "left behind: %s", e->d_name);
        files++;
    }
    closedir(d);
    ck_assert_int_eq(files, 1);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("runtime_cache");
    TCase *tc = tcase_create("cache");
    tcase_add_checked_fixture(tc, make_tmp_dir, remove_tmp_dir);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, sha256_vectors);
    tcase_add_test(tc, key_is_stable_and_sensitive);
    tcase_add_test(tc, rebuilt_compiler_misses_old_entries);
    tcase_add_test(tc, store_then_lookup);
    tcase_add_test(tc, signature_only_entry);
    tcase_add_test(tc, tensor_map_recipes_round_trip);
    tcase_add_test(tc, corrupt_entries_are_ignored_and_rebuilt);
    tcase_add_test(tc, disable_bypasses);
    tcase_add_test(tc, default_dir_under_home);
    tcase_add_test(tc, concurrent_writers_same_key);
    tcase_add_test(tc, special_entries_are_misses_and_never_block);
    tcase_add_test(tc, stale_tmp_files_are_swept);
    suite_add_tcase(s, tc);
    return s;
}

TU_MAIN(suite)
