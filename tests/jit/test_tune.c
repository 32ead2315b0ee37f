/* test_tune.c — kiln_tune without a GPU: the agreement check on the CPU interpreter (a
 * config that computes something else is caught), pruning (compile errors such as shared
 * memory over the limit, spills from ptxas -v, occupancy 0), parallel compiles giving
 * the serial bytes, the stored winners (hit, a rebuilt compiler misses, a corrupt entry
 * is a miss), the attention forward taking a stored winner before its table, and the
 * report's three forms. */
#include "testutil.h"

#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kiln.h"
#include "jit_internal.h"
#include "compiler/driver/driver.h"
#include "compiler/lang/lang.h"
#include "compiler/support/ptxas.h"
#include "compiler/support/schedule.h"

static char g_dir[256];

static void tmp_cache(void)
{
    snprintf(g_dir, sizeof g_dir, "/tmp/kiln-tune-test-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(g_dir));
    setenv("KILN_CACHE_DIR", g_dir, 1);
    unsetenv("KILN_CACHE_DISABLE");
    rt_tune_memo_clear();
}

static void rm_dir(void)
{
    DIR *d = opendir(g_dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        char p[600];
        snprintf(p, sizeof p, "%s/%s", g_dir, e->d_name);
        if (e->d_name[0] != '.' || strlen(e->d_name) > 2) unlink(p);
    }
    if (d) closedir(d);
    rmdir(g_dir);
    unsetenv("KILN_CACHE_DIR");
}

/* An elementwise kernel; BAD_AT: the BLOCK whose configs add 0.5 (a schedule that
 * changes the result), 0: none. n = 1000 is no multiple of any BLOCK. */
static char *axpy_src(int bad_at)
{
    char *s = malloc(2048);
    snprintf(s, 2048,
             "kernel axpy(X: *f32, Y: *f32, Z: *f32, n: i32, const BLOCK: i32 = 128) with (num_warps = 4)\n"
             "{\n"
             "    let offs = program_id(0) * BLOCK + arange(BLOCK);\n"
             "    let m = offs < n;\n"
             "    let x = load(X + offs, mask = m, other = 0);\n"
             "    let y = load(Y + offs, mask = m, other = 0);\n"
             "    store(Z + offs, x * 3.0 + y + (BLOCK == %d ? 0.5 : 0.0), mask = m);\n"
             "}\n"
             "tune axpy {\n"
             "    BLOCK in [64, 128, 256];\n"
             "    num_warps in [1, 2, 4];\n"
             "    require BLOCK >= 32 * num_warps;\n"
             "    key n;\n"
             "}\n",
             bad_at);
    return s;
}

static const char *axpy_args[] = {"X=rand:1000", "Y=rand:1000", "Z=out:1000", "n=1000"};

static KilnTuneOptions axpy_opts(void)
{
    KilnTuneOptions o = {.kernel = "axpy", .args = axpy_args, .nargs = 4, .grid = {"1000/BLOCK"}, .cpu_check = 1,
                         .max_spill_bytes = -1, .jobs = 2};
    return o;
}

START_TEST(cpu_agreement_holds)
{
    char *src = axpy_src(0);
    KilnTuneOptions o = axpy_opts();
    KilnTuneReport *r = NULL;
    ck_assert_msg(kiln_tune("axpy.tile", src, &o, &r) == KILN_OK, "%s", kiln_last_error());
    /* 9 combinations, BLOCK >= 32 * warps removes (64, 4): 8 */
    ck_assert_int_eq(r->ntotal, 9);
    ck_assert_int_eq(r->nrows, 8);
    ck_assert_int_eq(r->ndims, 2);
    ck_assert_str_eq(r->key, "n=1024");
    for (int i = 0; i < r->nrows; i++) {
        ck_assert_msg(!r->rows[i].pruned, "row %d: %s", i, r->rows[i].pruned);
        ck_assert(r->rows[i].max_err == 0); /* elementwise: every schedule bit-identical */
        ck_assert(r->rows[i].compile_ms > 0);
        ck_assert(r->rows[i].time_ms < 0);  /* no device: nothing timed */
    }
    ck_assert_int_eq(r->winner, -1);
    /* the key a launcher computes for its own arguments is the one stored */
    char *key = NULL;
    const char *launch[] = {"n=700"};
    KilnTuneOptions lo = {.kernel = "axpy", .args = launch, .nargs = 1};
    ck_assert_int_eq(kiln_tune_key("axpy.tile", src, &lo, &key), KILN_OK);
    ck_assert_str_eq(key, r->key);
    free(key);
    lo.kernel = "nope";
    ck_assert_int_eq(kiln_tune_key("axpy.tile", src, &lo, &key), KILN_ERR_COMPILE);
    ck_assert_str_eq(r->rows[2].values[0], "128");
    ck_assert_str_eq(r->rows[2].values[1], "1");
    kiln_tune_report_free(r);
    free(src);
}
END_TEST

START_TEST(cpu_agreement_catches_a_wrong_config)
{
    char *src = axpy_src(128);
    KilnTuneOptions o = axpy_opts();
    KilnTuneReport *r = NULL;
    ck_assert_int_eq(kiln_tune("axpy.tile", src, &o, &r), KILN_ERR_KERNEL);
    ck_assert_ptr_nonnull(r);
    for (int i = 0; i < r->nrows; i++) {
        bool bad = !strcmp(r->rows[i].values[0], "128");
        ck_assert_msg(bad == (r->rows[i].pruned != NULL), "row %d (BLOCK %s): %s", i, r->rows[i].values[0],
                      r->rows[i].pruned ? r->rows[i].pruned : "kept");
        if (bad) {
            ck_assert_ptr_nonnull(strstr(r->rows[i].pruned, "wrong result: differs from config 0 by 0.5"));
            ck_assert(fabs(r->rows[i].max_err - 0.5) < 1e-6);
        }
    }
    kiln_tune_report_free(r);
    free(src);
}
END_TEST

/* A dot whose A and B tiles, with 6 pipeline stages, overflow sm_90's shared memory. */
static const char *mm_src =
    "kernel mm(A: *f16, B: *f16, C: *f32, const BM: i32 = 64, const BK: i32 = 64) with (num_stages = 2)\n"
    "{\n"
    "    let rm = arange(BM);\n"
    "    let rk = arange(BK);\n"
    "    var acc = zeros([BM, BM], f32);\n"
    "    for k in range(0, 8) {\n"
    "        let a = load(A + rm[:, None] * (8 * BK) + k * BK + rk[None, :]);\n"
    "        let b = load(B + (k * BK + rk[:, None]) * BM + rm[None, :]);\n"
    "        acc = dot(a, b, acc);\n"
    "    }\n"
    "    store(C + rm[:, None] * BM + rm[None, :], acc);\n"
    "}\n"
    "tune mm { BM in [64, 256]; BK in [64, 256]; num_stages in [2, 6]; }\n";

START_TEST(prune_compile_errors)
{
    KilnTuneOptions o = {.kernel = "mm", .arch = "sm_90a", .max_spill_bytes = -1, .jobs = 2};
    KilnTuneReport *r = NULL;
    ck_assert_msg(kiln_tune("mm.tile", mm_src, &o, &r) == KILN_OK, "%s", kiln_last_error());
    ck_assert_int_eq(r->nrows, 8);
    int sram = 0;
    for (int i = 0; i < r->nrows; i++) {
        const KilnTuneRow *w = &r->rows[i];
        bool big = !strcmp(w->values[0], "256") && !strcmp(w->values[1], "256") && !strcmp(w->values[2], "6");
        if (big) {
            ck_assert_msg(w->pruned && strstr(w->pruned, "compile: ") && strstr(w->pruned, "shared memory"), "%s",
                          w->pruned ? w->pruned : "kept");
            sram++;
        }
    }
    ck_assert_int_eq(sram, 1);
    ck_assert_msg(!r->rows[0].pruned, "%s", r->rows[0].pruned);
    ck_assert(r->rows[0].smem_bytes > 0);
    kiln_tune_report_free(r);
}
END_TEST

START_TEST(prune_spills_with_ptxas)
{
    char *ptxas = ptxas_find(NULL);
    if (!ptxas) return; /* registers and spills come from ptxas -v */
    free(ptxas);
    /* 1 warp holding 4096-element f32 tiles: 128 values of each of x, y per thread spill */
    const char *src = "kernel big(X: *f32, Z: *f32, const BLOCK: i32 = 1024)\n"
                      "{\n"
                      "    let offs = arange(BLOCK);\n"
                      "    let x = load(X + offs);\n"
                      "    let y = load(X + BLOCK + offs);\n"
                      "    let z = load(X + 2 * BLOCK + offs);\n"
                      "    let s = sum(x * y, axis = 0);\n"
                      "    store(Z + offs, x * s + y * z + exp(x - max(z, axis = 0)));\n"
                      "}\n"
                      "tune big { BLOCK in [128, 8192]; num_warps in [1, 4]; }\n";
    KilnTuneOptions o = {.kernel = "big", .arch = "sm_90a", .max_spill_bytes = 0, .jobs = 2};
    KilnTuneReport *r = NULL;
    ck_assert_msg(kiln_tune("big.tile", src, &o, &r) == KILN_OK, "%s", kiln_last_error());
    ck_assert_int_eq(r->nrows, 4);
    ck_assert_msg(!r->rows[0].pruned, "%s", r->rows[0].pruned);
    ck_assert(r->rows[0].registers > 0 && r->rows[0].spill_bytes == 0);
    const KilnTuneRow *w = &r->rows[2]; /* BLOCK 8192, 1 warp */
    ck_assert_msg(w->spill_bytes > 0 && w->pruned && strstr(w->pruned, "spills"), "spills %d: %s", w->spill_bytes,
                  w->pruned ? w->pruned : "kept");
    kiln_tune_report_free(r);
}
END_TEST

START_TEST(occupancy_rules)
{
    ck_assert_int_eq(rt_tune_occupancy(32, 0, 4, 232448, 233472), 16);      /* threads: 2048 / 128 */
    ck_assert_int_eq(rt_tune_occupancy(128, 0, 4, 232448, 233472), 4);      /* registers: 65536 / (128 * 128) */
    ck_assert_int_eq(rt_tune_occupancy(32, 100000, 4, 232448, 233472), 2);  /* SRAM: 233472 / 101024 */
    ck_assert_int_eq(rt_tune_occupancy(32, 240000, 4, 232448, 233472), 0);  /* over the per-CTA limit */
    ck_assert_int_eq(rt_tune_occupancy(72, 0, 32, 232448, 233472), 0);      /* 1024 threads x 72 > 65536 */
    ck_assert_int_eq(rt_tune_occupancy(8, 0, 1, 232448, 233472), 32);       /* the CTA limit */
}
END_TEST

/* Compiles of different configs on two threads give the bytes a serial compile gives. */
typedef struct Job {
    const char *src;
    KilnCompileOptions o;
    KilnCompileResult r;
    KilnStatus st;
} Job;

static void *compile_job(void *arg)
{
    Job *j = arg;
    j->st = kiln_compile("lib/attention_fwd.tile", j->src, &j->o, &j->r);
    return NULL;
}

START_TEST(parallel_compiles_match_serial)
{
    const char *src = kiln_lib_source("lang/lib/attention_fwd.tile");
    ck_assert_ptr_nonnull(src);
    static const char *bm[] = {"64", "128", "64", "128"}, *bn[] = {"64", "64", "32", "128"};
    KilnDefine defs[4][2];
    Job par[4], ser[4];
    for (int i = 0; i < 4; i++) {
        defs[i][0] = (KilnDefine){"BLOCK_M", bm[i]};
        defs[i][1] = (KilnDefine){"BLOCK_N", bn[i]};
        KilnCompileOptions o = {.kernel = "attn_fwd_f16", .arch = "sm_90a", .emit = KILN_EMIT_PTX,
                                .defines = defs[i], .ndefines = 2, .num_warps = i & 1 ? 8 : 4};
        par[i] = ser[i] = (Job){.src = src, .o = o};
    }
    pthread_t th[4];
    for (int i = 0; i < 4; i++) ck_assert_int_eq(pthread_create(&th[i], NULL, compile_job, &par[i]), 0);
    for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < 4; i++) {
        compile_job(&ser[i]);
        ck_assert_msg(par[i].st == KILN_OK && ser[i].st == KILN_OK, "%s", ser[i].r.diagnostics);
        ck_assert_uint_eq(par[i].r.output_size, ser[i].r.output_size);
        ck_assert(!memcmp(par[i].r.output, ser[i].r.output, ser[i].r.output_size));
        kiln_compile_result_free(&par[i].r);
        kiln_compile_result_free(&ser[i].r);
    }
}
END_TEST

/* A report with one timed winner, as a GPU run leaves it. */
static KilnTuneReport fake_report(const char *kernel, const char *device, const char *arch, const char *key,
                                  KilnTuneRow rows[3])
{
    KilnTuneReport r = {.kernel = kernel, .dims = {"BLOCK_M", "BLOCK_N", "num_warps"}, .ndims = 3, .rows = rows,
                        .nrows = 3, .nspace = 3, .ntotal = 4, .winner = 1, .compile_wall_ms = 12, .jobs = 2, .arch = arch,
                        .device = device, .key = key};
    static const char *v[3][3] = {{"128", "64", "4"}, {"64", "64", "8"}, {"128", "128", "8"}};
    for (int i = 0; i < 3; i++) {
        rows[i] = (KilnTuneRow){.compile_ms = 5, .time_ms = i == 2 ? -1 : 1.0 - 0.5 * i, .registers = 100 + i,
                                .spill_bytes = 0, .smem_bytes = 1024 * (i + 1), .num_warps = 4, .occupancy = 1,
                                .max_err = 0, .pruned = i == 2 ? "spills 96 bytes (more than 0)" : NULL};
        for (int d = 0; d < 3; d++) rows[i].values[d] = v[i][d];
    }
    return r;
}

START_TEST(store_hit_rebuild_corrupt)
{
    tmp_cache();
    KilnTuneRow rows[3];
    KilnTuneReport r = fake_report("k", "NVIDIA H200 sm_90a", "sm_90a", "n=4096", rows);
    const char *src = "kernel k() {}\n";
    char *path = NULL, *cfg = NULL;
    ck_assert_int_eq(rt_tune_store("BLOCK_M=64 BLOCK_N=64 num_warps=8", src, &r, &path), KILN_OK);
    ck_assert_ptr_nonnull(path);
    /* hit, under the device and under the arch alone */
    ck_assert_int_eq(kiln_tune_lookup(src, "k", "NVIDIA H200 sm_90a", "n=4096", &cfg), KILN_OK);
    ck_assert_str_eq(cfg, "BLOCK_M=64 BLOCK_N=64 num_warps=8");
    free(cfg);
    ck_assert_int_eq(kiln_tune_lookup(src, "k", "sm_90a", "n=4096", &cfg), KILN_OK);
    free(cfg);
    /* another key, source, kernel or device: a miss */
    ck_assert_int_eq(kiln_tune_lookup(src, "k", "sm_90a", "n=8192", &cfg), KILN_ERR_NOT_FOUND);
    ck_assert_int_eq(kiln_tune_lookup("kernel k() { }\n", "k", "sm_90a", "n=4096", &cfg), KILN_ERR_NOT_FOUND);
    ck_assert_int_eq(kiln_tune_lookup(src, "k", "NVIDIA H100 sm_90a", "n=4096", &cfg), KILN_ERR_NOT_FOUND);
    /* a rebuilt compiler (another build identity) misses */
    rt_set_build_id("a rebuilt compiler");
    ck_assert_int_eq(kiln_tune_lookup(src, "k", "sm_90a", "n=4096", &cfg), KILN_ERR_NOT_FOUND);
    rt_set_build_id(NULL);
    ck_assert_int_eq(kiln_tune_lookup(src, "k", "NVIDIA H200 sm_90a", "n=4096", &cfg), KILN_OK);
    free(cfg);
    /* a corrupt entry (one byte changed) is a miss, never a wrong config */
    FILE *f = fopen(path, "r+b");
    ck_assert_ptr_nonnull(f);
    fseek(f, -12, SEEK_END);
    fputc('X', f);
    fclose(f);
    ck_assert_int_eq(kiln_tune_lookup(src, "k", "NVIDIA H200 sm_90a", "n=4096", &cfg), KILN_ERR_NOT_FOUND);
    ck_assert_ptr_null(cfg);
    /* truncated */
    ck_assert_int_eq(truncate(path, 20), 0);
    ck_assert_int_eq(kiln_tune_lookup(src, "k", "NVIDIA H200 sm_90a", "n=4096", &cfg), KILN_ERR_NOT_FOUND);
    /* a disabled cache stores nothing and finds nothing */
    setenv("KILN_CACHE_DISABLE", "1", 1);
    ck_assert_int_eq(kiln_tune_lookup(src, "k", "sm_90a", "n=4096", &cfg), KILN_ERR_NOT_FOUND);
    unsetenv("KILN_CACHE_DISABLE");
    free(path);
    rm_dir();
}
END_TEST

static const char *define_of(const RtAttnRequest *q, const char *name)
{
    for (int i = 0; i < q->ndefines; i++)
        if (!strcmp(q->defines[i].name, name)) return q->defines[i].value;
    return NULL;
}

START_TEST(attention_takes_the_stored_winner)
{
    tmp_cache();
    KilnAttentionParams p = {.dtype = KILN_F16, .batch = 1, .heads_q = 2, .heads_kv = 2, .seqlen_q = 3000,
                             .seqlen_k = 3000, .head_dim = 128, .q = 0x7f0000000000ull,
                             .k = 0x7f0010000000ull, .v = 0x7f0020000000ull, .o = 0x7f0030000000ull,
                             .lse = 0x7f0040000000ull};
    int64_t st[3] = {2LL * 3000 * 128, 3000LL * 128, 128};
    memcpy(p.q_stride, st, sizeof st);
    memcpy(p.k_stride, st, sizeof st);
    memcpy(p.v_stride, st, sizeof st);
    memcpy(p.o_stride, st, sizeof st);
    ck_assert_msg(kiln_attention_check(&p) == KILN_OK, "%s", kiln_last_error());
    RtAttnVariant v;
    RtAttnRequest q;
    /* the table's sm_90 d 128 row: 128 x 128, 8 warps, warp specialisation with TMA */
    ck_assert_int_eq(rt_attn_fwd_request(90, &p, &v, &q), KILN_OK);
    ck_assert_str_eq(define_of(&q, "BLOCK_M"), "128");
    ck_assert_int_eq(q.opts.num_warps, 8);
    ck_assert_int_eq(q.opts.schedule.warp_specialize, 1);
    free(q.owned);
    KilnTuneRow rows[3];
    KilnTuneReport r = fake_report("attn_fwd_f16", "NVIDIA H200 sm_90a", "sm_90a",
                                   "HEAD_DIM=128 CAUSAL=false seqlen_q=4096", rows);
    char *path = NULL;
    const char *src = kiln_lib_source("lang/lib/attention_fwd.tile");
    ck_assert_int_eq(rt_tune_store("BLOCK_M=64 BLOCK_N=128 num_warps=8 num_stages=3 pingpong=true", src, &r, &path),
                     KILN_OK);
    free(path);
    rt_tune_memo_clear();
    ck_assert_int_eq(rt_attn_fwd_request(90, &p, &v, &q), KILN_OK);
    ck_assert_str_eq(define_of(&q, "BLOCK_M"), "64");
    ck_assert_str_eq(define_of(&q, "BLOCK_N"), "128");
    ck_assert_int_eq(q.opts.num_warps, 8);
    ck_assert_int_eq(q.opts.num_stages, 3);
    ck_assert_int_eq(q.opts.schedule.pingpong, 1);
    ck_assert_int_eq(q.opts.schedule.warp_specialize, 0);   /* the winner's options, not the row's */
    free(q.owned);
    /* causal, another sequence bucket, or bf16: the table again */
    p.causal = 1;
    ck_assert_int_eq(rt_attn_fwd_request(90, &p, &v, &q), KILN_OK);
    ck_assert_int_eq(q.opts.num_stages, 2);
    free(q.owned);
    p.causal = 0;
    p.seqlen_q = p.seqlen_k = 5000;
    ck_assert_int_eq(rt_attn_fwd_request(90, &p, &v, &q), KILN_OK);
    ck_assert_int_eq(q.opts.num_stages, 2);
    free(q.owned);
    rt_tune_memo_clear();
    rm_dir();
}
END_TEST

static const char *vdefine(const RtAttnVariant *v, const char *name)
{
    for (int i = 0; i < v->ndefines; i++)
        if (!strcmp(v->defines[i].name, name)) return v->defines[i].value;
    return NULL;
}

/* kiln_attention_bwd's plan takes the two kernels' stored winners over its table rows: the
 * dQ pass's (its BLOCK_M also the pre kernel's), the dK/dV kernel's under COMPUTE_DQ=false
 * (the sm_90 rows' separate dQ pass); another key (causal), dtype or the caller's tiles:
 * the table. */
START_TEST(attention_bwd_takes_the_stored_winners)
{
    tmp_cache();
    KilnAttentionBwdParams p = {.fwd = {.dtype = KILN_F16, .batch = 1, .heads_q = 2, .heads_kv = 2, .seqlen_q = 3000,
                                        .seqlen_k = 3000, .head_dim = 128}};
    RtAttnBwdPlan pl;
    rt_attn_bwd_plan(90, &p, &pl);
    ck_assert_int_eq(pl.n, 3);
    ck_assert_str_eq(pl.k[1].kernel, "attn_bwd_dkdv_f16");
    ck_assert_str_eq(vdefine(&pl.k[1], "BLOCK_N"), "64");   /* the table's sm_90 d 128 rows: 64 x 64, 4 warps */
    ck_assert_int_eq(pl.k[1].num_warps, 4);
    ck_assert_str_eq(pl.k[2].kernel, "attn_bwd_dq_f16");
    ck_assert_int_eq(pl.k[2].num_warps, 4);
    const char *src = kiln_lib_source("lang/lib/attention_bwd.tile");
    KilnTuneRow rows[3];
    char *path = NULL;
    KilnTuneReport r = fake_report("attn_bwd_dkdv_f16", "NVIDIA H200 sm_90a", "sm_90a",
                                   "HEAD_DIM=128 CAUSAL=false COMPUTE_DQ=false seqlen_q=4096", rows);
    ck_assert_int_eq(rt_tune_store("BLOCK_M=32 BLOCK_N=128 num_warps=8 num_stages=3", src, &r, &path), KILN_OK);
    free(path);
    r = fake_report("attn_bwd_dq_f16", "NVIDIA H200 sm_90a", "sm_90a", "HEAD_DIM=128 CAUSAL=false seqlen_q=4096", rows);
    ck_assert_int_eq(rt_tune_store("BLOCK_M=128 BLOCK_N=32 num_warps=8 num_stages=1", src, &r, &path), KILN_OK);
    free(path);
    rt_tune_memo_clear();
    rt_attn_bwd_plan(90, &p, &pl);
    ck_assert_int_eq(pl.n, 3);
    ck_assert_str_eq(vdefine(&pl.k[0], "BLOCK_M"), "128");   /* pre: the dQ pass's row blocks */
    ck_assert_str_eq(vdefine(&pl.k[1], "BLOCK_M"), "32");
    ck_assert_str_eq(vdefine(&pl.k[1], "BLOCK_N"), "128");
    ck_assert_str_eq(vdefine(&pl.k[1], "COMPUTE_DQ"), "false");
    ck_assert_int_eq(pl.k[1].num_warps, 8);
    ck_assert_int_eq(pl.k[1].num_stages, 3);
    ck_assert_str_eq(pl.k[2].kernel, "attn_bwd_dq_f16");   /* the row's dq_pass stays */
    ck_assert_str_eq(vdefine(&pl.k[2], "BLOCK_M"), "128");
    ck_assert_str_eq(vdefine(&pl.k[2], "BLOCK_N"), "32");
    ck_assert_int_eq(pl.k[2].num_warps, 8);
    ck_assert_int_eq(pl.k[2].num_stages, 1);
    ck_assert_int_eq(pl.grid[2][0], (3000 + 127) / 128);
    /* causal, bf16, or the caller's tiles: the table (causal d 128: FA3's 64 x 128 rows) */
    p.fwd.causal = 1;
    rt_attn_bwd_plan(90, &p, &pl);
    ck_assert_str_eq(vdefine(&pl.k[1], "BLOCK_M"), "64");
    ck_assert_int_eq(pl.k[1].num_stages, 2);
    ck_assert_int_eq(pl.k[1].schedule.warp_specialize, 1);
    p.fwd.causal = 0;
    p.fwd.dtype = KILN_BF16;
    rt_attn_bwd_plan(90, &p, &pl);
    ck_assert_str_eq(vdefine(&pl.k[1], "BLOCK_N"), "64");
    p.fwd.dtype = KILN_F16;
    p.block_m = p.block_n = 64;
    rt_attn_bwd_plan(90, &p, &pl);
    ck_assert_int_eq(pl.k[1].num_warps, 0);
    ck_assert_str_eq(vdefine(&pl.k[1], "BLOCK_M"), "64");
    rt_tune_memo_clear();
    rm_dir();
}
END_TEST

/* Whether the table row r is a config of `kernel`'s space in `file` (at its head dim, its
 * causal or non-causal when it takes both, the fixed consts `defs` more): its tiles, warps,
 * stages (0: the program's own, 1) and, for dimensions that are schedule options, its options. */
static bool row_in_space(const char *file, const char *kernel, const RtTuneRow *r, const char *extra)
{
    Arena a;
    arena_init(&a);
    const char *src = kiln_lib_source(file);
    Diag d;
    diag_init(&d, file, src);
    KilnCompileOptions co = {.kernel = kernel};
    AstFile *f = kiln_modules_load(&a, &d, src, &co, NULL);
    char hd[16];
    snprintf(hd, sizeof hd, "%d", r->head_dim);
    LangDefine defs[3] = {{"HEAD_DIM", hd}, {"CAUSAL", r->causal == 1 ? "true" : "false"}, {extra, "false"}};
    const TuneSpace *sp = f ? sema_tune_space(&a, &d, f, kernel, defs, extra ? 3 : 2) : NULL;
    ck_assert_msg(sp, "%s: %s", kernel, d.out.data ? d.out.data : "no space");
    bool found = false;
    for (int c = 0; c < sp->nconfigs && !found; c++) {
        bool ok = true;
        for (int i = 0; i < sp->ndims; i++) {
            const TuneDim *dim = &sp->dims[i];
            int64_t v = dim->vals[sp->configs[(int64_t)c * sp->ndims + i]].num, want = -1;
            if (dim->kind == TUNE_WARPS) want = r->num_warps;
            else if (dim->kind == TUNE_STAGES) want = r->num_stages ? r->num_stages : 1;
            else if (dim->kind == TUNE_SCHED) want = sched_get(&r->schedule, dim->sched) > 0;
            else if (!strcmp(dim->name, "BLOCK_M")) want = r->block_m;
            else if (!strcmp(dim->name, "BLOCK_N")) want = r->block_n;
            ok = ok && v == want;
        }
        found = ok;
    }
    diag_free(&d);
    arena_free(&a);
    return found;
}

/* Every sm_90 row of the hand table is a config of its kernel's declared space: the tuner
 * searches what the table chose among (tools/device_tune.sh compares the two). */
START_TEST(hand_rows_are_in_the_spaces)
{
    int checked = 0;
    for (int i = 0; rt_attn_tune_row(i); i++) {
        const RtTuneRow *r = rt_attn_tune_row(i);
        if (r->min_sm < 90 || r->call == RT_TUNE_DECODE) continue;
        bool in = r->call == RT_TUNE_FWD ? row_in_space("lang/lib/attention_fwd.tile", "attn_fwd_f16", r, NULL)
                  : r->call == RT_TUNE_BWD_DQ
                      ? row_in_space("lang/lib/attention_bwd.tile", "attn_bwd_dq_f16", r, NULL)
                      : row_in_space("lang/lib/attention_bwd.tile", "attn_bwd_dkdv_f16", r, "COMPUTE_DQ");
        ck_assert_msg(in, "table row %d (call %d, d %d, causal %d: %d x %d, %d warps, %d stages) is not in its space", i,
                      (int)r->call, r->head_dim, r->causal, r->block_m, r->block_n, r->num_warps, r->num_stages);
        checked++;
    }
    ck_assert_int_ge(checked, 12);
}
END_TEST

START_TEST(report_forms)
{
    KilnTuneRow rows[3];
    KilnTuneReport r = fake_report("k", "NVIDIA H200 sm_90a", "sm_90a", "n=4096", rows);
    rows[1].tflops = 512.25;
    char *csv = NULL, *table = NULL, *svg = NULL;
    ck_assert_int_eq(kiln_tune_report_csv(&r, &csv), KILN_OK);
    ck_assert_str_eq(csv, "BLOCK_M,BLOCK_N,num_warps,time_ms,tflops,gbps,registers,spill_bytes,smem_bytes,warps,"
                          "occupancy,compile_ms,max_err,status\n"
                          "128,64,4,1.00000,,,100,0,1024,4,1,5.0,0,\"ok\"\n"
                          "64,64,8,0.50000,512.25,,101,0,2048,4,1,5.0,0,\"winner\"\n"
                          "128,128,8,,,,102,0,3072,4,1,5.0,0,\"spills 96 bytes (more than 0)\"\n");
    ck_assert_int_eq(kiln_tune_report_table(&r, &table), KILN_OK);
    ck_assert_ptr_nonnull(strstr(table, "3 configs (3 of 4 kept by the constraints), 2 kept, 2 timed"));
    ck_assert_ptr_nonnull(strstr(table, "winner: BLOCK_M=64 BLOCK_N=64 num_warps=8 (0.5000 ms)"));
    ck_assert_ptr_nonnull(strstr(table, " *         64"));
    ck_assert_int_eq(kiln_tune_report_svg(&r, &svg), KILN_OK);
    ck_assert(!strncmp(svg, "<svg ", 5) && strstr(svg, "</svg>\n"));
    /* 3 dimension panels + 2 Pareto panels, 2 timed points each */
    int circles = 0;
    for (const char *s = svg; (s = strstr(s, "<circle")); s++) circles++;
    ck_assert_int_eq(circles, 10);
    ck_assert_ptr_nonnull(strstr(svg, "Pareto: time vs registers"));
    ck_assert_ptr_nonnull(strstr(svg, "<polyline")); /* 2 points: (100 regs, 1 ms), (101, 0.5) both on the front */
    free(csv);
    free(table);
    free(svg);
}
END_TEST

START_TEST(bad_space_and_usage)
{
    const char *src = "kernel k(X: *f32, const B: i32 = 64) { store(X + arange(B), 1.0); }\n"
                      "tune k { B in [64]; require B > 64; }\n";
    KilnTuneOptions o = {.kernel = "k"};
    KilnTuneReport *r = NULL;
    ck_assert_int_eq(kiln_tune("k.tile", src, &o, &r), KILN_ERR_COMPILE);
    ck_assert_ptr_null(r);
    ck_assert_ptr_nonnull(strstr(kiln_last_error(), "k.tile:2:31: error: this constraint removes every configuration"));
    o.cpu_check = 1; /* running needs the arguments */
    ck_assert_int_eq(kiln_tune("k.tile", src, &o, &r), KILN_ERR_USAGE);
    o = (KilnTuneOptions){0};
    ck_assert_int_eq(kiln_tune("k.tile", src, &o, &r), KILN_ERR_USAGE);
    o.kernel = "nope";
    ck_assert_int_eq(kiln_tune("k.tile", src, &o, &r), KILN_ERR_COMPILE);
    ck_assert_ptr_nonnull(strstr(kiln_last_error(), "kernel 'nope' declares no tune space"));
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("tune");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, cpu_agreement_holds);
    tcase_add_test(tc, cpu_agreement_catches_a_wrong_config);
    tcase_add_test(tc, prune_compile_errors);
    tcase_add_test(tc, prune_spills_with_ptxas);
    tcase_add_test(tc, occupancy_rules);
    tcase_add_test(tc, parallel_compiles_match_serial);
    tcase_add_test(tc, store_hit_rebuild_corrupt);
    tcase_add_test(tc, attention_takes_the_stored_winner);
    tcase_add_test(tc, attention_bwd_takes_the_stored_winners);
    tcase_add_test(tc, hand_rows_are_in_the_spaces);
    tcase_add_test(tc, report_forms);
    tcase_add_test(tc, bad_space_and_usage);
    suite_add_tcase(s, tc);
    return s;
}

TU_MAIN(suite)
