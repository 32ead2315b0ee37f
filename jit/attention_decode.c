/* attention_decode.c — kiln_attention_decode: flash-decoding in one call.
 *
 * What it does, in order:
 *   1. validate the parameters (check_shape, check_tensors) WITHOUT touching a
 *      device, messages naming the field, like kiln_attention_fwd;
 *   2. pick the schedule: BLOCK_N by head dim (attention_tune.c), BLOCK_M the power of
 *      two >= 16 that holds the packed rows (the group's query heads x the new
 *      tokens) up to 64 (more rows take more programs on grid axis 2), and the
 *      split count (kiln_attention_decode_splits: from the shape and the SM count);
 *   3. get the split kernel (attn_decode_bm_<dt> with a block mask: it walks the
 *      mask's lists, check_block_mask) and, for more than one split with the two-kernel
 *      combine, the combine kernel from attention.c's variant cache
 *      (rt_attn_get_kernel: one cache for every attention entry point); one split
 *      compiles the split kernel with DIRECT, which writes O and LSE itself; the
 *      fused combine (the default with the runtime's scratch) compiles it with
 *      FUSED: the last split program of each row block combines;
 *   4. bind arguments by parameter name and launch the split kernel on
 *      (batch * heads_kv, splits, row blocks), then (two-kernel combine) the
 *      combine on cdiv(batch * heads_q * seqlen_q, 4) programs; the partial O (f32)
 *      and LSE live in the caller's workspace or the runtime's per-device scratch,
 *      and so do FUSED's tickets (an i32 per row block, zero between calls: the
 *      runtime zeroes its own once when it allocates them, the last program of a
 *      row block stores 0 back).
 *
 * Invariants: validation never reads *dev; the lengths and page indices are
 * device data and never read here (the caller's contract, documented in
 * kiln_attention.h). The scratch of a device only grows; growing it synchronises
 * the device first, since work queued earlier may still use the old buffer.
 *
 * Example: heads_q 32, heads_kv 8, one token, batch 4, max_seqlen_k 32768, d 128
 * on 132 SMs: 32 (batch, KV head) programs with 4 packed rows in a 16-row tile;
 * splits = min(2 * 132 / 32, 512 blocks / 4) = 8 (64 blocks each): 256 CTAs,
 * then the combine kernel, one program per query row (128 rows), over the 8 partials.
 */
#include "cuda_loader.h"
#include "jit_internal.h"

#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define DEC_PROGRAM "lang/lib/attention_decode.tile"
#define WHO "kiln_attention_decode"
#define DEC_MAX_TOKENS 16
#define DEC_MAX_BLOCK_M 64
/* BLOCK_R of the combine kernel: rows per program. One: at B = 1 (32 rows) the combine's
 * latency-bound partial reads then spread over 32 CTAs instead of 8 (ncu, H200, N 64k: the
 * 8-CTA combine took 19 us of a 86 us call; docs/performance.md, decode). */
#define DEC_COMBINE_ROWS 1
/* The split count's rule (kiln_attention_decode_splits). Decode streams K and V once, so
 * what matters is bytes in flight and fixed cost per CTA:
 *   - in flight: HBM at ~4.4 TB/s and ~1 us loaded latency needs ~4.4 MB in flight, ~33 KB
 *     per SM of 132; a CTA keeps about one K+V block (32 KB at d 128, BLOCK_N 64) in flight
 *     ahead of its math (num_stages 2), so DEC_CTAS_PER_SM = 2 CTAs per SM hold ~64 KB;
 *   - one wave: the FUSED split kernel needs 177 registers a thread at d 128 (ptxas, sm_90a;
 *     118 without the combine), so only 2 of its CTAs fit an SM: the count is rounded DOWN
 *     to at most 2 CTAs per SM (B = 8, GQA 32/8: 4 splits, 256 CTAs, not 5 and 320, whose
 *     last 56 would run in a second, mostly idle wave);
 *   - fixed cost: a CTA's first block (Q and K/V latency before streaming starts), its
 *     partial's store, ticket and its share of the combine cost ~2-3 us; at ~17 GB/s per
 *     CTA (4.4 TB/s over 264 CTAs) a split of DEC_MIN_SPLIT_BYTES = 128 KB of K+V streams
 *     for ~8 us, so fewer bytes per split would spend more time starting than streaming;
 *   - evenly: every split gets cdiv(blocks, splits) blocks, so the count is rounded to
 *     the one that leaves no split empty (33 splits of 256 blocks -> 32 of 8).
 * bench_decode.py --sweep-splits prints this choice against every fixed count. */
#define DEC_CTAS_PER_SM 2
#define DEC_MIN_SPLIT_BYTES (128 * 1024)
#define DEC_SCRATCH_PARTIALS 0   /* the device scratch's two buffers */
#define DEC_SCRATCH_TICKETS 1
#define DEC_MAX_DEVICES 64
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))
#define bad(...) rt_attn_error(WHO, __VA_ARGS__)

/* ---------------- defaults: the tuning table's rows (attention_tune.c) ---------------- */

/* The split kernel's row for the head dim (NULL: a head dim the program lacks). */
static const RtTuneRow *tune_of(int head_dim) { return rt_attn_tune(RT_TUNE_DECODE, 0, head_dim, 0, 0); }

/* With a block mask the default tile shrinks to the mask's key block when that is smaller
 * (a mask block is a whole number of tiles). */
static int block_n_of(const KilnAttentionDecodeParams *p)
{
    const RtTuneRow *t = tune_of(p->head_dim);
    int bn = p->block_n ? p->block_n : t ? t->block_n : 64;
    const KilnBlockMask *m = p->block_mask;
    return !p->block_n && m && m->block_kv > 0 && m->block_kv < bn ? m->block_kv : bn;
}

static int packed_rows(const KilnAttentionDecodeParams *p) { return p->heads_q / p->heads_kv * p->seqlen_q; }

static int block_m_of(const KilnAttentionDecodeParams *p)
{
    int m = 16;
    while (m < packed_rows(p) && m < DEC_MAX_BLOCK_M) m *= 2;
    return m;
}

/* Programs on grid axis 2: blocks of packed rows per (batch, KV head). */
int rt_attn_decode_row_blocks(const KilnAttentionDecodeParams *p)
{
    return (packed_rows(p) + block_m_of(p) - 1) / block_m_of(p);
}

/* Whether more than one split combines in the split kernel (FUSED) rather than in a
 * second kernel: asked for, or by default when the tickets are the runtime's own. */
/* Automatic = the two-kernel combine: measured on the H200 (device_compare.sh, B 1 and 8,
 * N 4k-128k) it was as fast as the fused one or faster on 7 of 8 shapes, because the fused
 * combine raises the split kernel from 72 to 171 registers (2 CTAs per SM). */
static bool fused_combine(const KilnAttentionDecodeParams *p)
{
    return p->combine == KILN_DECODE_COMBINE_FUSED;
}

/* FUSED's tickets: an i32 per (batch, KV head, row block), rounded up to 16 bytes (in a
 * caller's workspace they come first, so the partials after them stay aligned and a
 * different split count does not move them). */
static size_t ticket_bytes(const KilnAttentionDecodeParams *p)
{
    return ((size_t)p->batch * p->heads_kv * rt_attn_decode_row_blocks(p) * 4 + 15) & ~(size_t)15;
}

/* ---------------- validation (never touches a device) ---------------- */

static bool pow2_in(int x, int lo, int hi) { return x >= lo && x <= hi && (x & (x - 1)) == 0; }

static KilnStatus check_options(const KilnAttentionDecodeParams *p)
{
    if (p->block_n && !pow2_in(p->block_n, 16, 256))
        return bad(KILN_ERR_USAGE, "block_n %d must be 0 (default) or a power of two in [16, 256]", p->block_n);
    if (p->num_warps && !pow2_in(p->num_warps, 1, 32))
        return bad(KILN_ERR_USAGE, "num_warps %d must be 0 (default) or a power of two in [1, 32]", p->num_warps);
    if (p->num_stages < 0 || p->num_stages > 8)
        return bad(KILN_ERR_USAGE, "num_stages %d must be 0 (default) or in [1, 8]", p->num_stages);
    if (p->num_splits < 0 || p->num_splits > KILN_DECODE_MAX_SPLITS)
        return bad(KILN_ERR_USAGE, "num_splits %d must be 0 (automatic) or in [1, %d]", p->num_splits,
                   KILN_DECODE_MAX_SPLITS);
    if (p->combine != 0 && p->combine != KILN_DECODE_COMBINE_FUSED && p->combine != KILN_DECODE_COMBINE_KERNEL)
        return bad(KILN_ERR_USAGE, "combine %d must be 0 (automatic), KILN_DECODE_COMBINE_FUSED (%d) or "
                   "KILN_DECODE_COMBINE_KERNEL (%d)", p->combine, KILN_DECODE_COMBINE_FUSED, KILN_DECODE_COMBINE_KERNEL);
    if (!isfinite(p->softmax_scale))
        return bad(KILN_ERR_USAGE, "softmax_scale must be finite (0 means 1/sqrt(head_dim))");
    return KILN_OK;
}

static KilnStatus check_paging(const KilnAttentionDecodeParams *p)
{
    if (!p->block_table) return KILN_OK;
    if (!pow2_in(p->page_size, 16, 256))
        return bad(KILN_ERR_UNSUPPORTED, "page_size %d is not supported (16, 32, 64, 128 or 256)", p->page_size);
    if (p->num_pages <= 0) return bad(KILN_ERR_USAGE, "num_pages must be positive, got %d", p->num_pages);
    int64_t need = ((int64_t)p->max_seqlen_k + p->page_size - 1) / p->page_size;
    if (p->block_table_stride < need)
        return bad(KILN_ERR_USAGE, "block_table_stride %lld is below the %lld pages a sequence of max_seqlen_k = %d "
                   "needs", (long long)p->block_table_stride, (long long)need, p->max_seqlen_k);
    if (p->block_table_stride > INT64_MAX / 4 / (p->batch > 0 ? p->batch : 1))
        return bad(KILN_ERR_USAGE, "block_table_stride %lld overflows 64-bit offsets", (long long)p->block_table_stride);
    return KILN_OK;
}

/* The call as the full problem its block mask was made for: seqlen_q = seqlen_k = the
 * mask's length (the attention_block_mask.c checks and arguments take a forward's params). */
static KilnAttentionParams bm_problem(const KilnAttentionDecodeParams *p)
{
    const KilnBlockMask *m = p->block_mask;
    return (KilnAttentionParams){.dtype = p->dtype, .batch = p->batch, .heads_q = p->heads_q,
                                 .heads_kv = p->heads_kv, .seqlen_q = m->seqlen_k, .seqlen_k = m->seqlen_k,
                                 .head_dim = p->head_dim, .causal = p->causal, .block_mask = m};
}

/* A block mask: made (kiln_attention_block_mask_create) for the full problem of this cache,
 * seqlen_q = seqlen_k >= max_seqlen_k, the call's causal flag, batch and heads_q (or 1), its
 * key blocks whole tiles of the call's. */
static KilnStatus check_block_mask(const KilnAttentionDecodeParams *p)
{
    const KilnBlockMask *m = p->block_mask;
    if (!m) return KILN_OK;
    if (m->seqlen_q != m->seqlen_k)
        return bad(KILN_ERR_USAGE, "block_mask was made for seqlen_q %d, seqlen_k %d: decoding reads the mask of "
                   "the full problem, made with seqlen_q = seqlen_k >= max_seqlen_k", m->seqlen_q, m->seqlen_k);
    if (m->seqlen_k < p->max_seqlen_k)
        return bad(KILN_ERR_USAGE, "block_mask was made for %d tokens, below max_seqlen_k %d (make it for the "
                   "cache's capacity)", m->seqlen_k, p->max_seqlen_k);
    if (p->block_n && m->block_kv > 0 && m->block_kv % p->block_n)
        return bad(KILN_ERR_USAGE, "block_n %d must divide the block mask's key blocks (block_kv %d)", p->block_n,
                   m->block_kv);
    KilnAttentionParams fp = bm_problem(p);
    return rt_attn_bm_check(WHO, &fp, 0, 0);
}

/* Sizes, dtype and options: everything but the tensors. */
static KilnStatus check_shape(const KilnAttentionDecodeParams *p)
{
    if (!p) return bad(KILN_ERR_USAGE, "params is NULL");
    if (p->dtype != KILN_F16 && p->dtype != KILN_BF16)
        return bad(KILN_ERR_USAGE, "dtype %d is neither KILN_F16 nor KILN_BF16", (int)p->dtype);
    if (p->batch <= 0) return bad(KILN_ERR_USAGE, "batch must be positive, got %d", p->batch);
    if (p->heads_q <= 0) return bad(KILN_ERR_USAGE, "heads_q must be positive, got %d", p->heads_q);
    if (p->heads_kv <= 0) return bad(KILN_ERR_USAGE, "heads_kv must be positive, got %d", p->heads_kv);
    if (p->heads_q % p->heads_kv)
        return bad(KILN_ERR_USAGE, "heads_q (%d) must be a multiple of heads_kv (%d)", p->heads_q, p->heads_kv);
    if (p->seqlen_q < 0 || p->seqlen_q > DEC_MAX_TOKENS)
        return bad(KILN_ERR_UNSUPPORTED, "seqlen_q %d is outside [0, %d] (new tokens per sequence; use "
                   "kiln_attention_fwd for longer queries)", p->seqlen_q, DEC_MAX_TOKENS);
    if (!tune_of(p->head_dim))
        return bad(KILN_ERR_UNSUPPORTED, "head_dim %d is not supported (supported: 32, 64, 96, 128, 256)",
                   p->head_dim);
    if (p->max_seqlen_k < 0 || p->max_seqlen_k > INT32_MAX - 2 * 256)
        return bad(KILN_ERR_USAGE, "max_seqlen_k %d is outside [0, %d] (the kernel's 32-bit key index)",
                   p->max_seqlen_k, INT32_MAX - 2 * 256);
    /* grid axis 0 carries batch * heads_kv, the combine's cdiv(rows, 16): both i32 */
    /* batch * heads_q < 2^62; times seqlen_q (<= 16) only once it is known to be small
     * (fuzz_api found the three-way product overflowing int64) */
    int64_t bh = (int64_t)p->batch * p->heads_q;
    if (bh > INT32_MAX || bh * (p->seqlen_q > 0 ? p->seqlen_q : 1) > INT32_MAX)
        return bad(KILN_ERR_UNSUPPORTED, "batch * heads_q * seqlen_q = %d * %d * %d exceeds %d", p->batch,
                   p->heads_q, p->seqlen_q, INT32_MAX);
    KilnStatus st = check_options(p);
    if (st == KILN_OK) st = check_paging(p);
    if (st == KILN_OK) st = rt_attn_var_check(WHO, p->variant);
    return st != KILN_OK ? st : check_block_mask(p);
}

static KilnStatus check_tensors(const KilnAttentionDecodeParams *p)
{
    const int es = 2; /* f16 and bf16 */
    KilnStatus st = rt_attn_check_tensor(WHO, "q", p->q, p->q_stride, p->batch, p->heads_q, p->seqlen_q,
                                         p->head_dim, es, false);
    bool paged = p->block_table != 0;
    int nb = paged ? p->num_pages : p->batch, ns = paged ? p->page_size : p->max_seqlen_k;
    if (st == KILN_OK && p->max_seqlen_k > 0)
        st = rt_attn_check_tensor(WHO, "k", p->k, p->k_stride, nb, p->heads_kv, ns, p->head_dim, es, false);
    if (st == KILN_OK && p->max_seqlen_k > 0)
        st = rt_attn_check_tensor(WHO, "v", p->v, p->v_stride, nb, p->heads_kv, ns, p->head_dim, es, false);
    if (st == KILN_OK)
        st = rt_attn_check_tensor(WHO, "o", p->o, p->o_stride, p->batch, p->heads_q, p->seqlen_q, p->head_dim, es,
                                  true);
    if (st == KILN_OK) st = rt_attn_check_tensor(WHO, "lse", p->lse, NULL, 0, 0, 0, 0, 4, true);
    if (st == KILN_OK)
        st = rt_attn_check_tensor(WHO, "cache_seqlens", p->cache_seqlens, NULL, 0, 0, 0, 0, 4, false);
    if (st == KILN_OK && paged)
        st = rt_attn_check_tensor(WHO, "block_table", p->block_table, NULL, 0, 0, 0, 0, 4, false);
    if (st == KILN_OK && p->workspace)
        st = rt_attn_check_tensor(WHO, "workspace", p->workspace, NULL, 0, 0, 0, 0, 4, true);
    return st;
}

KilnStatus kiln_attention_decode_check(const KilnAttentionDecodeParams *p)
{
    KilnStatus st = check_shape(p);
    if (st != KILN_OK || p->seqlen_q == 0) return st;   /* no rows: empty tensors may be null */
    return check_tensors(p);
}

/* ---------------- splits and scratch ---------------- */

int kiln_attention_decode_splits(const KilnAttentionDecodeParams *p, int sm_count)
{
    /* a refused shape (num_splits above KILN_DECODE_MAX_SPLITS included) runs nothing: 1 */
    if (!p || p->seqlen_q <= 0 || check_shape(p) != KILN_OK) return 1;
    if (p->num_splits > 0) return p->num_splits;
    int64_t ctas = (int64_t)p->batch * p->heads_kv * rt_attn_decode_row_blocks(p);
    int64_t bn = block_n_of(p), blocks = ((int64_t)p->max_seqlen_k + bn - 1) / bn;
    int64_t block_bytes = 2 * bn * p->head_dim * 2;                    /* a K and a V block */
    int64_t min_blocks = (DEC_MIN_SPLIT_BYTES + block_bytes - 1) / block_bytes;
    int64_t most = blocks / min_blocks;
    if (sm_count <= 0 || ctas * 5 >= (int64_t)sm_count * 4 || most < 2) return 1;   /* the GPU is (80%) full */
    int64_t s = DEC_CTAS_PER_SM * (int64_t)sm_count / ctas;   /* >= 2: ctas < 80% of the SMs */
    if (s > most) s = most;
    if (s > KILN_DECODE_MAX_SPLITS) s = KILN_DECODE_MAX_SPLITS;
    int64_t per = (blocks + s - 1) / s;
    s = (blocks + per - 1) / per;                                      /* no split left empty */
    return s < 1 ? 1 : (int)s;
}

/* Bytes of the partial O and LSE of `splits` splits. */
static size_t partial_bytes(const KilnAttentionDecodeParams *p, int splits)
{
    size_t rows = (size_t)p->batch * p->heads_q * p->seqlen_q * (size_t)splits;
    return rows * (size_t)p->head_dim * 4 + rows * 4;   /* O_part, then LSE_part (16-byte aligned: d >= 32) */
}

size_t kiln_attention_decode_workspace(const KilnAttentionDecodeParams *p, int splits)
{
    /* a refused shape or split count: 0, never a wrapped product (check_shape bounds
     * batch * heads_q * seqlen_q by INT32_MAX, so with splits <= 128 and head_dim <= 256
     * the bytes stay below 2^49) */
    if (!p || splits <= 1 || splits > KILN_DECODE_MAX_SPLITS || p->seqlen_q <= 0 || check_shape(p) != KILN_OK)
        return 0;
    return partial_bytes(p, splits) + (p->combine == KILN_DECODE_COMBINE_FUSED ? ticket_bytes(p) : 0);
}

/* Per device, two buffers that only grow: the partials and FUSED's tickets (zeroed
 * when allocated; every fused call leaves them zero). */
typedef struct Scratch { KilnDevice *dev; KilnDevPtr ptr[2]; size_t size[2]; } Scratch;
static pthread_mutex_t g_scratch_lock = PTHREAD_MUTEX_INITIALIZER;
static Scratch g_scratch[DEC_MAX_DEVICES];

static void scratch_teardown(KilnDevice *dev)
{
    pthread_mutex_lock(&g_scratch_lock);
    for (int i = 0; i < DEC_MAX_DEVICES; i++)
        if (g_scratch[i].dev == dev) {
            kiln_free(dev, g_scratch[i].ptr[0]);
            kiln_free(dev, g_scratch[i].ptr[1]);
            g_scratch[i] = (Scratch){0};
        }
    pthread_mutex_unlock(&g_scratch_lock);
}

/* Buffer `which` of the device's scratch, at least `bytes` (grown: after a
 * synchronisation, since queued work may still use the old buffer; the tickets
 * zeroed). */
static KilnStatus device_scratch(KilnDevice *dev, int which, size_t bytes, KilnDevPtr *out)
{
    KilnStatus st = rt_on_device_shutdown(scratch_teardown);
    if (st != KILN_OK) return st;
    pthread_mutex_lock(&g_scratch_lock);
    Scratch *s = NULL;
    for (int i = 0; i < DEC_MAX_DEVICES && !s; i++)
        if (g_scratch[i].dev == dev) s = &g_scratch[i];
    for (int i = 0; i < DEC_MAX_DEVICES && !s; i++)
        if (!g_scratch[i].dev) s = &g_scratch[i];
    if (!s) st = bad(KILN_ERR_UNSUPPORTED, "more than %d devices hold decode scratch", DEC_MAX_DEVICES);
    else if (s->size[which] < bytes) {
        s->dev = dev;
        if (s->ptr[which]) st = kiln_synchronize(dev);
        if (st == KILN_OK && s->ptr[which]) st = kiln_free(dev, s->ptr[which]);
        s->ptr[which] = 0, s->size[which] = 0;
        if (st == KILN_OK) st = kiln_malloc(dev, bytes, &s->ptr[which]);
        if (st == KILN_OK && which == DEC_SCRATCH_TICKETS) st = kiln_memset(dev, s->ptr[which], 0, bytes);
        if (st == KILN_OK && which == DEC_SCRATCH_TICKETS) st = kiln_synchronize(dev);   /* before any stream's launch */
        if (st == KILN_OK) s->size[which] = bytes;
    }
    if (st == KILN_OK) *out = s->ptr[which];
    pthread_mutex_unlock(&g_scratch_lock);
    return st;
}

/* ---------------- arguments by parameter name ---------------- */

typedef struct DecCall {
    const KilnAttentionDecodeParams *p;
    int splits;
    bool fused;
    KilnDevPtr o_part, lse_part, tickets;
} DecCall;

/* stride_<t><d>: t in q k v o, d in b h m n (m and n both name the sequence stride); stride_bt. */
static bool stride_of(const KilnAttentionDecodeParams *p, const char *name, int64_t *v)
{
    if (!strcmp(name, "stride_bt")) {
        *v = p->block_table ? p->block_table_stride : 0;
        return true;
    }
    static const char *const ts[] = {"q", "k", "v", "o"};
    const int64_t *const st[] = {p->q_stride, p->k_stride, p->v_stride, p->o_stride};
    return rt_attn_stride_of(name, ts, st, 4, v);
}

static KilnStatus make_arg(const DecCall *c, const KilnParam *prm, KilnArg *a)
{
    const KilnAttentionDecodeParams *p = c->p;
    const char *n = prm->name;
    /* Pointers a variant never reads (K/V of an empty cache, the table of a contiguous
     * one, the scratch of DIRECT) get a valid stand-in: launches check device pointers. */
    KilnDevPtr in = p->q;
    struct { const char *name; KilnDevPtr v; } ptrs[] = {
        {"Q", p->q}, {"K", p->k ? p->k : in}, {"V", p->v ? p->v : in}, {"O", p->o}, {"LSE", p->lse},
        {"O_part", c->o_part ? c->o_part : p->lse}, {"LSE_part", c->lse_part ? c->lse_part : p->lse},
        {"counters", c->tickets ? c->tickets : p->lse},
        {"cache_seqlens", p->cache_seqlens}, {"block_table", p->block_table ? p->block_table : p->cache_seqlens}};
    for (size_t i = 0; i < COUNT(ptrs); i++)
        if (!strcmp(n, ptrs[i].name)) {
            *a = kiln_arg_ptr(ptrs[i].v);
            return KILN_OK;
        }
    struct { const char *name; int64_t v; } ints[] = {
        {"batch", p->batch}, {"heads", p->heads_q}, {"heads_kv", p->heads_kv}, {"seqlen_q", p->seqlen_q},
        {"num_splits", c->splits}};
    for (size_t i = 0; i < COUNT(ints); i++)
        if (!strcmp(n, ints[i].name)) return rt_attn_int_arg(WHO, prm, ints[i].v, a);
    int64_t s;
    if (stride_of(p, n, &s)) return rt_attn_int_arg(WHO, prm, s, a);
    if (p->block_mask) {   /* the mask's arrays and row strides */
        KilnAttentionParams fp = bm_problem(p);
        KilnStatus st;
        if (rt_attn_bm_arg(&fp, prm, a, &st)) return st;
    }
    if (!strcmp(n, "sm_scale") && prm->kind == KILN_PARAM_F32) {
        *a = kiln_arg_f32(p->softmax_scale != 0 ? p->softmax_scale : (float)(1.0 / sqrt((double)p->head_dim)));
        return KILN_OK;
    }
    return rt_attn_var_arg(WHO, p->variant, prm, a);   /* a variant's param, or an internal error */
}

static KilnStatus bind_arg(const void *ctx, const KilnParam *prm, KilnArg *a) { return make_arg(ctx, prm, a); }

/* ---------------- the call ---------------- */

KilnStatus rt_attn_decode_direct_arg(const void *ctx, const KilnParam *prm, KilnArg *a)
{
    DecCall c = {.p = ctx, .splits = 1};
    return make_arg(&c, prm, a);
}

void rt_attn_decode_split_variant(const KilnAttentionDecodeParams *p, int splits, bool fused, const RtAttnVarSrc *vs,
                                  RtAttnVariant *v)
{
    const RtTuneRow *t = tune_of(p->head_dim);
    bool bf = p->dtype == KILN_BF16, own = p->block_n != 0;
    const KilnBlockMask *m = p->block_mask;
    const char *name = m ? (bf ? "attn_decode_bm_bf16" : "attn_decode_bm_f16") : bf ? "attn_decode_bf16"
                                                                                   : "attn_decode_f16";
    rt_attn_variant_init(v, DEC_PROGRAM, name,
                         p->num_warps ? p->num_warps : own ? 0 : t->num_warps,
                         p->num_stages ? p->num_stages : own ? 0 : t->num_stages, NULL);
    rt_attn_variant_define(v, "HEAD_DIM", p->head_dim, false);
    rt_attn_variant_define(v, "BLOCK_M", block_m_of(p), false);
    rt_attn_variant_define(v, "BLOCK_N", block_n_of(p), false);
    rt_attn_variant_define(v, "CAUSAL", p->causal != 0, true);
    rt_attn_variant_define(v, "PAGED", p->block_table != 0, true);
    if (p->block_table) rt_attn_variant_define(v, "PAGE_SIZE", p->page_size, false);
    rt_attn_variant_define(v, "DIRECT", splits == 1, true);
    rt_attn_variant_define(v, "FUSED", splits > 1 && fused, true);
    if (m) rt_attn_variant_define(v, "MASK_BLOCK_Q", m->block_q, false);
    if (m) rt_attn_variant_define(v, "MASK_BLOCK_N", m->block_kv, false);
    if (vs->var) v->vs = vs;   /* the hooks run in the split kernel only */
}

static KilnStatus get_kernels(KilnDevice *dev, const KilnAttentionDecodeParams *p, const DecCall *c,
                              const RtAttnVarSrc *vs, KilnKernel **split, KilnKernel **combine)
{
    int splits = c->splits;
    bool bf = p->dtype == KILN_BF16;
    RtAttnVariant v;
    rt_attn_decode_split_variant(p, splits, c->fused, vs, &v);
    KilnStatus st = rt_attn_get_kernel(dev, WHO, &v, split);
    if (st == KILN_OK) {
        const KilnKernelInfo *info = kiln_kernel_info(*split);
        st = rt_attn_var_check_used(WHO, p->variant, &info, 1);
    }
    if (st != KILN_OK || splits == 1 || c->fused) return st;
    rt_attn_variant_init(&v, DEC_PROGRAM, bf ? "attn_decode_combine_bf16" : "attn_decode_combine_f16", 0, 0, NULL);
    rt_attn_variant_define(&v, "HEAD_DIM", p->head_dim, false);
    rt_attn_variant_define(&v, "BLOCK_R", DEC_COMBINE_ROWS, false);
    return rt_attn_get_kernel(dev, WHO, &v, combine);
}

KilnStatus kiln_attention_decode(KilnDevice *dev, const KilnAttentionDecodeParams *p, KilnStream *stream)
{
    KilnStatus st = kiln_attention_decode_check(p);
    if (st != KILN_OK) return st;
    if (!dev) return bad(KILN_ERR_USAGE, "dev is NULL");
    if (stream && rt_stream_device(stream) != dev) return bad(KILN_ERR_USAGE, "the stream belongs to another KilnDevice");
    if (p->seqlen_q == 0) return KILN_OK;   /* no rows, nothing to write */
    DecCall c = {.p = p, .splits = kiln_attention_decode_splits(p, dev->info.sm_count), .fused = fused_combine(p)};
    size_t need = kiln_attention_decode_workspace(p, c.splits);
    if (p->workspace && p->workspace_size < need)
        return bad(KILN_ERR_USAGE, "workspace_size %zu is below the %zu bytes %d splits need "
                   "(kiln_attention_decode_workspace)", p->workspace_size, need, c.splits);
    KilnKernel *split = NULL, *combine = NULL;
    RtAttnVarSrc vs;
    if ((st = rt_attn_var_open(WHO, p->variant, &vs)) != KILN_OK) return st;
    st = get_kernels(dev, p, &c, &vs, &split, &combine);
    rt_attn_var_close(&vs);   /* the modules keep their sources: the launches need only the arguments */
    if (st != KILN_OK) return st;
    if (need) {
        KilnDevPtr ws = p->workspace;
        if (ws && c.fused) c.tickets = ws, ws += (KilnDevPtr)ticket_bytes(p);   /* tickets first */
        if (!ws && (st = device_scratch(dev, DEC_SCRATCH_PARTIALS, partial_bytes(p, c.splits), &ws)) != KILN_OK)
            return st;
        if (c.fused && !c.tickets &&
            (st = device_scratch(dev, DEC_SCRATCH_TICKETS, ticket_bytes(p), &c.tickets)) != KILN_OK)
            return st;
        c.o_part = ws;
        c.lse_part = ws + (KilnDevPtr)((size_t)c.splits * p->batch * p->heads_q * p->seqlen_q * p->head_dim * 4);
    }
    /* arguments bound once; a cold call compiles the split and combine kernels at once */
    KilnKernel *ks[2] = {split, combine};
    RtAttnCall call;
    if ((st = rt_attn_prepare(WHO, ks, combine ? 2 : 1, bind_arg, &c, &call)) != KILN_OK) return st;
    int grid[3] = {p->batch * p->heads_kv, c.splits, rt_attn_decode_row_blocks(p)};
    if ((st = rt_attn_launch_call(&call, 0, grid, stream)) != KILN_OK || !combine) return st;
    int64_t rows = (int64_t)p->batch * p->heads_q * p->seqlen_q;
    int cgrid[3] = {(int)((rows + DEC_COMBINE_ROWS - 1) / DEC_COMBINE_ROWS), 1, 1};
    return rt_attn_launch_call(&call, 1, cgrid, stream);
}
