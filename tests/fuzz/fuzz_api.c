/* fuzz_api.c — libFuzzer target: the public C API's structs filled from fuzz bytes,
 * through every _check, _cpu and size entry point (no device).
 *
 * Each input is read as a stream of choices (Bytes below: past its end every read is
 * 0). It fills KilnCompileOptions (counts and arrays that may disagree, NULL names and
 * values), a KilnAttentionParams with a variant (nargs / args / defines that may
 * disagree, pointer args with their bytes), a block mask, a KilnAttentionBwdParams and
 * a KilnAttentionDecodeParams, with strides, sizes and counts from small tables and
 * from raw bytes. Host buffers are allocated at exactly the sizes the struct claims, so
 * any read past them (the _cpu calls) is an ASan report. Then: kiln_compile (IR),
 * kiln_cache_key, kiln_run_cpu, kiln_attention_check, kiln_attention_fwd_cpu (only
 * shapes small enough to interpret quickly), kiln_attention_block_mask_size / _create_cpu,
 * kiln_attention_bwd_check and both scratch sizes, kiln_attention_bwd_cpu,
 * kiln_attention_decode_check / _splits / _workspace, kiln_attention_decode_cpu (the _cpu
 * calls with host buffers of exactly the sizes claimed, for shapes interpreted quickly).
 *
 * Findings: crashes, sanitizer reports, and (abort) a KILN_ERR_INTERNAL from any call,
 * a split count above KILN_DECODE_MAX_SPLITS, a plan's scratch above the any-device size.
 *
 * Example: bytes 01 02 ... -> ndefines 2 with defines NULL -> kiln_compile must say
 * "bad defines" (it crashed before issue 29).
 */
#include "kiln_attention.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct Bytes {
    const uint8_t *p;
    size_t n, at;
} Bytes;

static uint8_t u8(Bytes *b) { return b->at < b->n ? b->p[b->at++] : 0; }
static uint32_t u32(Bytes *b) { return (uint32_t)u8(b) | (uint32_t)u8(b) << 8 | (uint32_t)u8(b) << 16 | (uint32_t)u8(b) << 24; }
static int pick(Bytes *b, const int *t, int n) { return t[u8(b) % n]; }

/* A count: mostly small, sometimes negative or huge. */
static int count(Bytes *b)
{
    static const int t[] = {0, 1, 2, 3, -1, -7, 100000, INT32_MAX, 1, 0};
    return pick(b, t, 10);
}

/* A dimension: mostly small and valid, sometimes extreme. */
static int dim(Bytes *b)
{
    static const int t[] = {1, 2, 3, 17, 20, 0, -1, 65536, INT32_MAX, 1, 2, 40};
    return pick(b, t, 12);
}

static void fail(const char *what)
{
    fprintf(stderr, "fuzz_api: %s\n", what);
    abort();
}

static void check_status(KilnStatus st, const char *call)
{
    if (getenv("KILN_FUZZ_VERBOSE"))   /* which calls a seed reaches, and their answers */
        fprintf(stderr, "%s: %s%s%s\n", call, kiln_status_name(st), st ? ": " : "", st ? kiln_last_error() : "");
    if (st == KILN_ERR_INTERNAL) {
        fprintf(stderr, "fuzz_api: %s: internal error: %s\n", call, kiln_last_error());
        abort();
    }
}

/* ---- compile options ---- */

static const char *const k_src =
    "param w: f32;\n"
    "kernel add(X: *f32, Z: *f32, n: i32, const BLOCK: i32 = 16) {\n"
    "    let o = program_id(0) * BLOCK + arange(BLOCK);\n    let m = o < n;\n"
    "    store(Z + o, load(X + o, mask = m) * w, mask = m);\n}\n";

static void fuzz_compile_options(Bytes *b)
{
    static const char *const names[] = {"BLOCK", NULL, "n", "w", "X", "", "nope"};
    static const char *const values[] = {"16", NULL, "true", "0.5", "f16", "", "1e400"};
    KilnDefine defs[3];
    KilnParamHint hints[3];
    const char *dirs[3];
    for (int i = 0; i < 3; i++) {
        defs[i] = (KilnDefine){names[u8(b) % 7], values[u8(b) % 7]};
        hints[i] = (KilnParamHint){names[u8(b) % 7], (int)(u32(b) % 64), u8(b) & 1};
        dirs[i] = u8(b) & 1 ? NULL : "/nonexistent";
    }
    KilnCompileOptions o = {.emit = KILN_EMIT_IR};
    o.ndefines = count(b), o.nhints = count(b), o.ninclude_dirs = count(b);
    if (o.ndefines > 3) o.ndefines = 3;   /* a count past its array is the caller's overrun, not ours */
    if (o.nhints > 3) o.nhints = 3;
    if (o.ninclude_dirs > 3) o.ninclude_dirs = 3;
    o.defines = u8(b) & 1 ? defs : NULL;
    o.hints = u8(b) & 1 ? hints : NULL;
    o.include_dirs = u8(b) & 1 ? dirs : NULL;
    o.kernel = u8(b) & 1 ? "add" : NULL;
    KilnCompileResult r;
    check_status(kiln_compile("fuzz.tile", k_src, &o, &r), "kiln_compile");
    kiln_compile_result_free(&r);
    char key[65];
    check_status(kiln_cache_key(k_src, &o, key), "kiln_cache_key");
    float x[16] = {0}, z[16];
    KilnHostArg args[] = {kiln_host_buf(x, sizeof x, KILN_HOST_IN), kiln_host_buf(z, sizeof z, KILN_HOST_OUT),
                          kiln_host_scalar(kiln_arg_i32((int32_t)(u32(b) % 20))), kiln_host_scalar(kiln_arg_f32(2))};
    int grid[3] = {1 + u8(b) % 2, 1, 1};
    check_status(kiln_run_cpu("fuzz.tile", k_src, &o, grid, args, u8(b) % 5), "kiln_run_cpu");
}

/* ---- attention ---- */

typedef struct Host {
    void *buf[16];
    int n;
} Host;

/* A host buffer of exactly `bytes` (capped: larger claims get a NULL-free small buffer
 * and a size that says the truth). */
static KilnDevPtr host(Host *h, size_t *bytes)
{
    if (*bytes > (1 << 20)) *bytes = 1 << 20;
    void *p = malloc(*bytes ? *bytes : 1);
    if (!p) fail("out of memory");
    memset(p, 0x3c, *bytes);   /* f16 1.0, a finite f32 */
    h->buf[h->n++] = p;
    return (KilnDevPtr)(uintptr_t)p;
}

static void strides(Bytes *b, int64_t st[3], int heads, int seq, int d)
{
    switch (u8(b) % 4) {
    case 0: st[0] = (int64_t)heads * seq * d, st[1] = (int64_t)seq * d, st[2] = d; break;   /* bhsd */
    case 1: st[0] = (int64_t)seq * heads * d, st[1] = d, st[2] = (int64_t)heads * d; break;   /* bshd */
    case 2: st[0] = (int64_t)(int32_t)u32(b), st[1] = (int64_t)(int32_t)u32(b), st[2] = (int64_t)(int32_t)u32(b); break;
    default: st[0] = st[1] = st[2] = u8(b); break;
    }
}

static const char *const k_variant_src =
    "param bias: f32;\nparam slopes: *f32;\n"
    "fn score_mod(s, b, h, i, j) { return s + bias + load(slopes + h); }\n"
    "fn mask_mod(b, h, i, j) { return j <= i + 3; }\n";

static void fill_variant(Bytes *b, KilnAttentionVariant *var, KilnVariantArg args[3], KilnDefine defs[2], Host *h)
{
    static const char *const arg_names[] = {"bias", "slopes", "sm_scale", NULL, "Q", "bais"};
    size_t sb = u8(b) % 4 * 4;
    KilnDevPtr slopes = host(h, &sb);
    for (int i = 0; i < 3; i++) {
        args[i].name = arg_names[u8(b) % 6];
        args[i].value = u8(b) & 1 ? kiln_arg_f32(0.25f) : kiln_arg_ptr(u8(b) & 1 ? slopes : 0);
        args[i].bytes = u8(b) & 1 ? sb : u32(b);
    }
    defs[0] = (KilnDefine){u8(b) & 1 ? "X" : NULL, u8(b) & 1 ? "1" : NULL};
    defs[1] = (KilnDefine){"CAUSAL", "true"};
    *var = (KilnAttentionVariant){.source = u8(b) & 1 ? k_variant_src : NULL,
                                  .path = u8(b) & 1 ? "v.tile" : (u8(b) & 1 ? "lang/lib/variants/alibi.tile" : NULL),
                                  .args = u8(b) & 1 ? args : NULL, .nargs = count(b),
                                  .defines = u8(b) & 1 ? defs : NULL, .ndefines = count(b)};
    if (var->nargs > 3) var->nargs = 3;
    if (var->ndefines > 2) var->ndefines = 2;
}

static void fuzz_attention(Bytes *b)
{
    static const int head_dims[] = {32, 64, 96, 128, 256, 80, 0, -32};
    static const int tiles[] = {0, 16, 32, 64, 48, 512, -16};
    Host h = {.n = 0};
    KilnAttentionParams p = {.dtype = (KilnDtype)(u8(b) % 3), .batch = dim(b), .heads_q = dim(b), .seqlen_q = dim(b),
                             .seqlen_k = dim(b), .head_dim = pick(b, head_dims, 8), .causal = u8(b) & 1,
                             .block_m = pick(b, tiles, 7), .block_n = pick(b, tiles, 7)};
    p.heads_kv = u8(b) & 1 ? p.heads_q : 1;
    int hq = p.heads_q > 0 && p.heads_q < 64 ? p.heads_q : 1, hk = p.heads_kv > 0 && p.heads_kv < 64 ? p.heads_kv : 1;
    int sq = p.seqlen_q > 0 && p.seqlen_q < 64 ? p.seqlen_q : 1, sk = p.seqlen_k > 0 && p.seqlen_k < 64 ? p.seqlen_k : 1;
    int d = p.head_dim > 0 ? p.head_dim : 32;
    strides(b, p.q_stride, hq, sq, d);
    strides(b, p.k_stride, hk, sk, d);
    memcpy(p.v_stride, p.k_stride, sizeof p.k_stride);
    strides(b, p.o_stride, hq, sq, d);
    /* the sizes the caller claims: the dense size, a little less, or anything */
    size_t dense_q = (size_t)(p.batch > 0 && p.batch < 64 ? p.batch : 1) * hq * sq * d * 2;
    size_t dense_k = (size_t)(p.batch > 0 && p.batch < 64 ? p.batch : 1) * hk * sk * d * 2;
    size_t *sz[] = {&p.q_bytes, &p.k_bytes, &p.v_bytes, &p.o_bytes, &p.lse_bytes};
    size_t dense[] = {dense_q, dense_k, dense_k, dense_q, dense_q / (size_t)d * 2};
    for (int i = 0; i < 5; i++) {
        uint8_t c = u8(b) % 4;
        *sz[i] = c == 0 ? dense[i] : c == 1 ? dense[i] - dense[i] / 4 : c == 2 ? u32(b) % 4096 : dense[i] + 16;
    }
    p.q = host(&h, &p.q_bytes), p.k = host(&h, &p.k_bytes), p.v = host(&h, &p.v_bytes);
    p.o = host(&h, &p.o_bytes), p.lse = host(&h, &p.lse_bytes);
    KilnAttentionVariant var;
    KilnVariantArg args[3];
    KilnDefine defs[2];
    fill_variant(b, &var, args, defs, &h);
    if (u8(b) & 1) p.variant = &var;
    /* a block mask on the host */
    KilnBlockMask m = {.block_q = pick(b, tiles, 7), .block_kv = pick(b, tiles, 7), .batch = 1, .heads = 1};
    size_t mb = kiln_attention_block_mask_size(&p, &m);
    if (mb > (1 << 20) || u8(b) % 4 == 0) mb = u32(b) % 4096;
    m.bytes = mb;
    m.data = host(&h, &m.bytes);
    check_status(kiln_attention_check(&p), "kiln_attention_check");
    /* the interpreter: only shapes it runs in milliseconds */
    bool small = p.batch > 0 && p.batch <= 2 && p.heads_q > 0 && p.heads_q <= 2 && p.seqlen_q <= 40 &&
                 p.seqlen_k <= 40 && p.head_dim == 32;
    if (small && (u8(b) & 1)) check_status(kiln_attention_block_mask_create_cpu(&p, &m), "block_mask_create_cpu");
    if (small && (u8(b) & 1)) {
        if (m.num_q_blocks && (u8(b) & 1)) p.block_mask = &m;
        check_status(kiln_attention_fwd_cpu(&p), "kiln_attention_fwd_cpu");
        p.block_mask = NULL;
    }
    /* the backward's checks and sizes */
    KilnAttentionBwdParams bp = {.fwd = p, .deterministic = u8(b) & 1, .block_m = pick(b, tiles, 7),
                                 .block_n = pick(b, tiles, 7), .scratch = 0x7f0090000000ull,
                                 .dout = 0x7f0050000000ull, .dq = 0x7f0060000000ull, .dk = 0x7f0070000000ull,
                                 .dv = 0x7f0080000000ull};
    bp.fwd.q = 0x7f0000000000ull, bp.fwd.k = 0x7f0010000000ull, bp.fwd.v = 0x7f0020000000ull;
    bp.fwd.o = 0x7f0030000000ull, bp.fwd.lse = 0x7f0040000000ull;
    strides(b, bp.dout_stride, hq, sq, d);
    memcpy(bp.dq_stride, bp.fwd.q_stride, sizeof bp.dq_stride);
    memcpy(bp.dk_stride, bp.fwd.k_stride, sizeof bp.dk_stride);
    memcpy(bp.dv_stride, bp.fwd.v_stride, sizeof bp.dv_stride);
    size_t any = kiln_attention_bwd_scratch_size(&bp);
    bp.scratch_size = u8(b) & 1 ? any : u32(b);
    check_status(kiln_attention_bwd_check(&bp), "kiln_attention_bwd_check");
    static const int sms[] = {80, 86, 89, 90, 0, 100};
    size_t plan = kiln_attention_bwd_scratch_size_sm(&bp, pick(b, sms, 6));
    if (plan > any) fail("a plan's scratch exceeds kiln_attention_bwd_scratch_size");
    /* the backward on the interpreter: the forward's host buffers, dO and the gradients of
     * the sizes claimed (dense, a little less, anything), the scratch of scratch_size */
    if (small && (u8(b) & 1)) {
        bp.fwd = p;
        size_t *gz[] = {&bp.dout_bytes, &bp.dq_bytes, &bp.dk_bytes, &bp.dv_bytes};
        size_t gdense[] = {dense_q, dense_q, dense_k, dense_k};
        for (int i = 0; i < 4; i++) {
            uint8_t c = u8(b) % 4;
            *gz[i] = c == 0 ? gdense[i] : c == 1 ? gdense[i] - gdense[i] / 4 : c == 2 ? u32(b) % 4096 : gdense[i] + 16;
        }
        bp.dout = host(&h, &bp.dout_bytes), bp.dq = host(&h, &bp.dq_bytes);
        bp.dk = host(&h, &bp.dk_bytes), bp.dv = host(&h, &bp.dv_bytes);
        bp.scratch = host(&h, &bp.scratch_size);
        bp.block_m = bp.block_n = 0;
        if (m.num_q_blocks && (u8(b) & 1)) bp.fwd.block_mask = &m;
        check_status(kiln_attention_bwd_cpu(&bp), "kiln_attention_bwd_cpu");
    }
    for (int i = 0; i < h.n; i++) free(h.buf[i]);
}

static void fuzz_decode(Bytes *b)
{
    static const int head_dims[] = {32, 64, 128, 256, 80};
    static const int pages[] = {0, 16, 64, 256, 48};
    KilnAttentionDecodeParams p = {.dtype = (KilnDtype)(u8(b) % 2), .batch = dim(b), .heads_q = dim(b),
                                   .seqlen_q = u8(b) % 20, .head_dim = pick(b, head_dims, 5),
                                   .max_seqlen_k = (int)(u32(b) % 100000), .num_splits = (int)(u32(b) % 300) - 10,
                                   .combine = u8(b) % 4, .block_n = u8(b) & 1 ? 64 : 0, .causal = u8(b) & 1,
                                   .q = 0x7f0000000000ull, .o = 0x7f0010000000ull, .lse = 0x7f0020000000ull,
                                   .k = 0x7f0030000000ull, .v = 0x7f0040000000ull,
                                   .cache_seqlens = 0x7f0050000000ull};
    p.heads_kv = u8(b) & 1 ? p.heads_q : 1;
    int page = pick(b, pages, 5);
    if (page) {
        p.block_table = 0x7f0060000000ull, p.page_size = page, p.num_pages = dim(b);
        p.block_table_stride = (int64_t)(int32_t)u32(b);
    }
    int hq = p.heads_q > 0 && p.heads_q < 64 ? p.heads_q : 1, hk = p.heads_kv > 0 && p.heads_kv < 64 ? p.heads_kv : 1;
    strides(b, p.q_stride, hq, p.seqlen_q ? p.seqlen_q : 1, p.head_dim);
    strides(b, p.o_stride, hq, p.seqlen_q ? p.seqlen_q : 1, p.head_dim);
    strides(b, p.k_stride, hk, page ? page : (p.max_seqlen_k ? p.max_seqlen_k : 1), p.head_dim);
    memcpy(p.v_stride, p.k_stride, sizeof p.k_stride);
    check_status(kiln_attention_decode_check(&p), "kiln_attention_decode_check");
    int splits = kiln_attention_decode_splits(&p, (int)(u32(b) % 300) - 5);
    if (splits < 1 || splits > KILN_DECODE_MAX_SPLITS) fail("kiln_attention_decode_splits out of [1, MAX]");
    (void)kiln_attention_decode_workspace(&p, (int)(u32(b) % 300) - 5);
    /* the decode on the interpreter, for shapes it runs in milliseconds: host buffers of the
     * sizes claimed (what the shape spans, a little less, or anything); the lengths and page
     * indices raw bytes (out of range: KILN_ERR_KERNEL, never a read past a buffer) */
    bool small = p.batch > 0 && p.batch <= 2 && p.heads_q > 0 && p.heads_q <= 2 && p.seqlen_q <= 4 &&
                 p.head_dim == 32 && (!page || (page <= 64 && p.num_pages <= 8));
    if (!small || !(u8(b) & 1)) return;
    /* a cache the interpreter walks quickly: its capacity and K/V strides drawn again */
    p.max_seqlen_k = u8(b) % 65;
    strides(b, p.k_stride, hk, page ? page : (p.max_seqlen_k ? p.max_seqlen_k : 1), p.head_dim);
    memcpy(p.v_stride, p.k_stride, sizeof p.k_stride);
    Host h = {.n = 0};
    size_t *sz[] = {&p.q_bytes, &p.o_bytes, &p.lse_bytes, &p.k_bytes, &p.v_bytes, &p.cache_seqlens_bytes,
                    &p.block_table_bytes};
    for (int i = 0; i < 7; i++) *sz[i] = u8(b) & 1 ? u32(b) % 2048 : 1u << 14;
    p.q = host(&h, &p.q_bytes), p.o = host(&h, &p.o_bytes), p.lse = host(&h, &p.lse_bytes);
    p.k = host(&h, &p.k_bytes), p.v = host(&h, &p.v_bytes);
    p.cache_seqlens = host(&h, &p.cache_seqlens_bytes);
    for (size_t i = 0; i + 4 <= p.cache_seqlens_bytes; i += 4) {
        int32_t len = (int32_t)(u32(b) % 80) - 8;
        memcpy((char *)(uintptr_t)p.cache_seqlens + i, &len, 4);
    }
    if (page) {
        p.block_table = host(&h, &p.block_table_bytes);
        for (size_t i = 0; i + 4 <= p.block_table_bytes; i += 4) {
            int32_t pg = (int32_t)(u8(b) % 12) - 2;
            memcpy((char *)(uintptr_t)p.block_table + i, &pg, 4);
        }
    }
    check_status(kiln_attention_decode_cpu(&p), "kiln_attention_decode_cpu");
    for (int i = 0; i < h.n; i++) free(h.buf[i]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 4096) return -1;
    Bytes b = {data, size, 0};
    uint8_t what = u8(&b);
    if (what & 1) fuzz_compile_options(&b);
    if (what & 2) fuzz_attention(&b);
    if (what & 4) fuzz_decode(&b);
    return 0;
}
