/* attention_block_mask.c — FlexAttention-style block masks: kiln_attention_block_mask_size,
 * _create, _create_cpu, and what the forward needs to read one.
 *
 * What: a KilnBlockMask is one i32 buffer of nine arrays (kiln_attention.h lists them) that
 * lang/lib/block_mask.tile fills: attn_block_mask evaluates the call's variant mask_mod
 * (with kv_start, the causal diagonal and the bounds) on every element of every
 * (query block, key block) pair of each mask row (b, h) and writes the dense class and the
 * per-query-block lists; attn_block_mask_t transposes the class into per-key-block lists.
 * The forward (attention.c) then runs attn_fwd_bm_<dt>, which walks the lists.
 *
 * Invariants: validation names the field and never touches a device; each array starts at
 * a 16-byte aligned offset (the kernels assume aligned pointer parameters), so the layout
 * is a function of (block sizes, mask batch and heads, lengths) alone, which the forward
 * recomputes to check a descriptor; the classification kernel compiles with the variant's
 * text (hooks bound by name), the transpose without it (it reads no hook).
 *
 * Example: a document mask over B = 2 sequences of 8192 tokens, H = 16 heads:
 * m = {.block_q = 128, .block_kv = 128, .batch = 2, .heads = 1} (ids differ per sequence,
 * not per head): G = 2 rows, NQ = NK = 64 blocks, four count arrays of 128 i32 and five
 * index/class arrays of 8192: 166 KB; create launches 64 x 2 programs, then 64 x 2.
 */
#include "jit_internal.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define BM_PROGRAM "lang/lib/block_mask.tile"
#define BM_CREATE "kiln_attention_block_mask_create"
#define BM_DEFAULT_BLOCK 128
#define BM_MAX_GRID_Y 65535
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* Element counts of the arrays, in KilnBlockMaskArray order, for G rows of NQ x NK blocks. */
static bool array_elems(int64_t g, int64_t nq, int64_t nk, int64_t out[KILN_BM_NARRAYS])
{
    int64_t gq, gk, gqk;
    if (__builtin_mul_overflow(g, nq, &gq) || __builtin_mul_overflow(g, nk, &gk) ||
        __builtin_mul_overflow(gq, nk, &gqk))
        return false;
    const int64_t e[KILN_BM_NARRAYS] = {gq, gqk, gq, gqk, gk, gqk, gk, gqk, gqk};
    memcpy(out, e, sizeof e);
    return true;
}

static int block_or_default(int b) { return b ? b : BM_DEFAULT_BLOCK; }

/* The layout of mask m for lengths (sq, sk): block counts, offsets and total bytes.
 * False on overflow (bytes past INT64_MAX, or indices the kernels' i64 cannot hold). */
static bool layout(const KilnBlockMask *m, int sq, int sk, int *nq, int *nk, size_t off[KILN_BM_NARRAYS],
                   size_t *total)
{
    int bq = block_or_default(m->block_q), bk = block_or_default(m->block_kv);
    *nq = (int)(((int64_t)sq + bq - 1) / bq);
    *nk = (int)(((int64_t)sk + bk - 1) / bk);
    int64_t e[KILN_BM_NARRAYS];
    if (!array_elems((int64_t)m->batch * m->heads, *nq, *nk, e)) return false;
    int64_t at = 0;
    for (int i = 0; i < KILN_BM_NARRAYS; i++) {
        off[i] = (size_t)at * 4;
        int64_t n = (e[i] + 3) / 4 * 4;   /* the next array starts 16-byte aligned */
        if (__builtin_add_overflow(at, n, &at) || at > INT64_MAX / 4) return false;
    }
    *total = (size_t)at * 4;
    return true;
}

static bool block_ok(int b) { return b == 0 || (b >= 16 && b <= 1024 && (b & (b - 1)) == 0); }

/* The caller's fields of m against the call p (no lengths, no buffer). */
static KilnStatus check_request(const char *api, const KilnAttentionParams *p, const KilnBlockMask *m)
{
    if (!m) return rt_attn_error(api, KILN_ERR_USAGE, "block_mask is NULL");
    if (!block_ok(m->block_q))
        return rt_attn_error(api, KILN_ERR_USAGE, "block_mask.block_q %d must be 0 (128) or a power of two in "
                             "[16, 1024]", m->block_q);
    if (!block_ok(m->block_kv))
        return rt_attn_error(api, KILN_ERR_USAGE, "block_mask.block_kv %d must be 0 (128) or a power of two in "
                             "[16, 1024]", m->block_kv);
    if (m->batch != 1 && m->batch != p->batch)
        return rt_attn_error(api, KILN_ERR_USAGE, "block_mask.batch %d must be 1 (the same mask for every "
                             "sequence) or the call's batch %d", m->batch, p->batch);
    if (m->heads != 1 && m->heads != p->heads_q)
        return rt_attn_error(api, KILN_ERR_USAGE, "block_mask.heads %d must be 1 (the same mask for every head) "
                             "or the call's heads_q %d", m->heads, p->heads_q);
    if ((int64_t)m->batch * m->heads > BM_MAX_GRID_Y)
        return rt_attn_error(api, KILN_ERR_UNSUPPORTED, "block_mask.batch * block_mask.heads = %lld exceeds %d (the "
                             "grid's second axis)", (long long)m->batch * m->heads, BM_MAX_GRID_Y);
    if (rt_attn_varlen(p))
        return rt_attn_error(api, KILN_ERR_UNSUPPORTED, "block masks are not supported with packed (varlen) "
                             "batches: leave cu_seqlens_q / cu_seqlens_k 0");
    return KILN_OK;
}

static KilnStatus check_buffer(const char *api, const KilnBlockMask *m, size_t need)
{
    if (!m->data) return rt_attn_error(api, KILN_ERR_USAGE, "block_mask.data is a null pointer");
    if (m->data % 16)
        return rt_attn_error(api, KILN_ERR_USAGE, "block_mask.data (0x%llx) is not 16-byte aligned",
                             (unsigned long long)m->data);
    if (m->bytes < need)
        return rt_attn_error(api, KILN_ERR_USAGE, "block_mask.bytes is %zu, the mask needs %zu "
                             "(kiln_attention_block_mask_size)", m->bytes, need);
    return KILN_OK;
}

/* The shape checks of the call the mask is for; an FP8 call's (dtype KILN_E4M3) as one of
 * its out_dtype: the mask depends on no dtype. */
static KilnStatus check_shape(const char *api, const KilnAttentionParams *p)
{
    if (!p || p->dtype != KILN_E4M3) return rt_attn_check_shape(api, p);
    KilnAttentionParams q = *p;
    q.dtype = p->out_dtype;
    return rt_attn_check_shape(api, &q);
}

size_t kiln_attention_block_mask_size(const KilnAttentionParams *p, const KilnBlockMask *m)
{
    if (!p || !m || check_shape("", p) != KILN_OK || check_request("", p, m) != KILN_OK) return 0;
    int nq, nk;
    size_t off[KILN_BM_NARRAYS], total;
    return layout(m, p->seqlen_q, p->seqlen_k, &nq, &nk, off, &total) ? total : 0;
}

/* Validate a create call and fill m's outputs (into *out, m itself untouched on error). */
static KilnStatus prepare(const char *api, const KilnAttentionParams *p, const KilnBlockMask *m, KilnBlockMask *out)
{
    KilnStatus st = check_shape(api, p);
    if (st == KILN_OK) st = check_request(api, p, m);
    if (st != KILN_OK) return st;
    if (p->positions)   /* the classifier runs on local indices */
        return rt_attn_error(api, KILN_ERR_UNSUPPORTED, "a block mask for a call with positions (set positions, "
                             "q_pos_offset and kv_pos_offset to 0)");
    *out = *m;
    size_t total;
    if (!layout(m, p->seqlen_q, p->seqlen_k, &out->num_q_blocks, &out->num_kv_blocks, out->offset, &total))
        return rt_attn_error(api, KILN_ERR_USAGE, "the block mask of %d x %d blocks per row overflows 64-bit sizes",
                             p->seqlen_q, p->seqlen_k);
    if ((st = check_buffer(api, m, total)) != KILN_OK) return st;
    out->block_q = block_or_default(m->block_q);
    out->block_kv = block_or_default(m->block_kv);
    out->seqlen_q = p->seqlen_q;
    out->seqlen_k = p->seqlen_k;
    out->causal = p->causal != 0;
    return KILN_OK;
}

KilnStatus rt_attn_bm_check(const char *api, const KilnAttentionParams *p, int block_m, int block_n)
{
    const KilnBlockMask *m = p->block_mask;
    KilnStatus st = check_request(api, p, m);
    if (st != KILN_OK) return st;
    KilnBlockMask want = *m;
    size_t total;
    if (m->block_q != block_or_default(m->block_q) || m->block_kv != block_or_default(m->block_kv) ||
        !layout(m, m->seqlen_q, m->seqlen_k, &want.num_q_blocks, &want.num_kv_blocks, want.offset, &total) ||
        want.num_q_blocks != m->num_q_blocks || want.num_kv_blocks != m->num_kv_blocks ||
        memcmp(want.offset, m->offset, sizeof want.offset))
        return rt_attn_error(api, KILN_ERR_USAGE, "block_mask: its block_q, num_q_blocks, num_kv_blocks or offset "
                             "do not agree (make it with kiln_attention_block_mask_create)");
    if (m->seqlen_q != p->seqlen_q || m->seqlen_k != p->seqlen_k)
        return rt_attn_error(api, KILN_ERR_USAGE, "block_mask was made for seqlen_q %d, seqlen_k %d; the call has "
                             "%d, %d", m->seqlen_q, m->seqlen_k, p->seqlen_q, p->seqlen_k);
    if (m->causal != (p->causal != 0))
        return rt_attn_error(api, KILN_ERR_USAGE, "block_mask was made %s the causal mask, the call is %scausal",
                             m->causal ? "with" : "without", p->causal ? "" : "not ");
    if ((block_m && m->block_q % block_m) || (block_n && m->block_kv % block_n))
        return rt_attn_error(api, KILN_ERR_USAGE, "block_m x block_n (%d x %d) must divide the block mask's blocks "
                             "(%d x %d)", block_m, block_n, m->block_q, m->block_kv);
    return check_buffer(api, m, total);
}

/* ---------------- the kernels' arguments ---------------- */

typedef struct BmCall {
    const KilnAttentionParams *p;
    const KilnBlockMask *m;
} BmCall;

static const struct { const char *name; int array; } k_arrays[] = {
    {"KV_NUM", KILN_BM_KV_NUM}, {"KV_IDX", KILN_BM_KV_IDX}, {"FULL_KV_NUM", KILN_BM_FULL_KV_NUM},
    {"FULL_KV_IDX", KILN_BM_FULL_KV_IDX}, {"Q_NUM", KILN_BM_Q_NUM}, {"Q_IDX", KILN_BM_Q_IDX},
    {"FULL_Q_NUM", KILN_BM_FULL_Q_NUM}, {"FULL_Q_IDX", KILN_BM_FULL_Q_IDX}, {"CLASS", KILN_BM_CLASS}};

/* The array a pointer parameter names, or -1. */
static int array_of(const char *name)
{
    for (size_t i = 0; i < COUNT(k_arrays); i++)
        if (!strcmp(name, k_arrays[i].name)) return k_arrays[i].array;
    return -1;
}

bool rt_attn_bm_arg(const KilnAttentionParams *p, const KilnParam *prm, KilnArg *a, KilnStatus *st)
{
    const KilnBlockMask *m = p->block_mask;
    int arr = m ? array_of(prm->name) : -1;
    if (arr >= 0) {
        *a = kiln_arg_ptr(m->data + m->offset[arr]);
        *st = KILN_OK;
        return true;
    }
    /* mask row (b, h, qb) at b * stride_b + h * stride_h + qb: 0 on a broadcast axis; the
     * transposed lists' rows (b, h, kb) likewise with bm_tstride_b, bm_tstride_h (the backward) */
    int64_t sh = m && m->heads > 1 ? m->num_q_blocks : 0;
    int64_t sb = m && m->batch > 1 ? (int64_t)m->heads * m->num_q_blocks : 0;
    int64_t tsh = m && m->heads > 1 ? m->num_kv_blocks : 0;
    int64_t tsb = m && m->batch > 1 ? (int64_t)m->heads * m->num_kv_blocks : 0;
    struct { const char *name; int64_t v; } ints[] = {
        {"bm_stride_b", sb}, {"bm_stride_h", sh}, {"bm_num_kv_blocks", m ? m->num_kv_blocks : 0},
        {"bm_tstride_b", tsb}, {"bm_tstride_h", tsh}, {"bm_num_q_blocks", m ? m->num_q_blocks : 0}};
    for (size_t i = 0; m && i < COUNT(ints); i++)
        if (!strcmp(prm->name, ints[i].name)) {
            *st = rt_attn_int_arg("kiln_attention_fwd", prm, ints[i].v, a);
            return true;
        }
    return false;
}

size_t rt_attn_bm_array_bytes(const KilnBlockMask *m, const char *name)
{
    int arr = array_of(name);
    int64_t e[KILN_BM_NARRAYS];
    if (arr < 0 || !array_elems((int64_t)m->batch * m->heads, m->num_q_blocks, m->num_kv_blocks, e)) return 0;
    return (size_t)e[arr] * 4;
}

static KilnStatus bm_bind(const void *ctx, const KilnParam *prm, KilnArg *a)
{
    const BmCall *c = ctx;
    const KilnBlockMask *m = c->m;
    int arr = array_of(prm->name);
    if (arr >= 0) {
        *a = kiln_arg_ptr(m->data + m->offset[arr]);
        return KILN_OK;
    }
    struct { const char *name; int64_t v; } ints[] = {
        {"mask_heads", m->heads}, {"seqlen_q", m->seqlen_q}, {"seqlen_k", m->seqlen_k},
        {"num_q_blocks", m->num_q_blocks}, {"num_kv_blocks", m->num_kv_blocks}};
    for (size_t i = 0; i < COUNT(ints); i++)
        if (!strcmp(prm->name, ints[i].name)) return rt_attn_int_arg(BM_CREATE, prm, ints[i].v, a);
    return rt_attn_var_arg(BM_CREATE, c->p->variant, prm, a);   /* a hook's param */
}

/* The two kernels' compile requests (the classification with the variant, if any). */
static void bm_variants(const KilnBlockMask *m, const RtAttnVarSrc *vs, RtAttnVariant v[2])
{
    rt_attn_variant_init(&v[0], BM_PROGRAM, "attn_block_mask", 0, 0, NULL);
    rt_attn_variant_define(&v[0], "BLOCK_Q", m->block_q, false);
    rt_attn_variant_define(&v[0], "BLOCK_KV", m->block_kv, false);
    rt_attn_variant_define(&v[0], "CAUSAL", m->causal, true);
    v[0].vs = vs && vs->var ? vs : NULL;
    rt_attn_variant_init(&v[1], BM_PROGRAM, "attn_block_mask_t", 0, 0, NULL);
}

static KilnHostArg bm_buffer(const void *ctx, const char *name, KilnDevPtr ptr)
{
    const BmCall *c = ctx;
    int arr = array_of(name);
    if (arr >= 0) {
        /* the classification writes its arrays and reads CLASS back in the transpose */
        size_t bytes = rt_attn_bm_array_bytes(c->m, name);
        return kiln_host_buf((void *)(uintptr_t)ptr, bytes ? bytes : 16, KILN_HOST_INOUT);
    }
    return rt_attn_var_buffer(c->p->variant, name, ptr);
}

/* Both create calls: validate, then the classification and its transpose on the device
 * (cpu false) or on the interpreter; m is filled only on success. */
static KilnStatus create(const char *api, bool cpu, KilnDevice *dev, const KilnAttentionParams *p, KilnBlockMask *m,
                         KilnStream *stream)
{
    KilnBlockMask out;
    KilnStatus st = prepare(api, p, m, &out);
    if (st == KILN_OK) st = cpu ? rt_attn_var_check_bytes(api, p->variant) : rt_attn_check_call(api, dev, stream);
    if (st != KILN_OK) return st;
    RtAttnVarSrc vs;
    if ((st = rt_attn_var_open(api, p->variant, &vs)) != KILN_OK) return st;
    RtAttnVariant v[2];
    bm_variants(&out, &vs, v);
    int g = out.batch * out.heads;
    const int grid[2][3] = {{out.num_q_blocks, g, 1}, {out.num_kv_blocks, g, 1}};
    BmCall call = {p, &out};
    for (int i = 0; i < 2 && st == KILN_OK; i++) {
        if (grid[i][0] == 0) continue;   /* no query (key) blocks: nothing to write */
        KilnKernel *k = NULL;
        if (cpu) st = rt_attn_run_cpu(api, &v[i], grid[i], bm_bind, bm_buffer, &call, NULL, NULL);
        else if ((st = rt_attn_get_kernel(dev, api, &v[i], &k)) == KILN_OK)
            st = rt_attn_launch(api, k, grid[i], stream, bm_bind, &call);
    }
    rt_attn_var_close(&vs);
    if (st == KILN_OK) *m = out;
    return st;
}

KilnStatus kiln_attention_block_mask_create(KilnDevice *dev, const KilnAttentionParams *p, KilnBlockMask *m,
                                            KilnStream *stream)
{
    return create(BM_CREATE, false, dev, p, m, stream);
}

KilnStatus kiln_attention_block_mask_create_cpu(const KilnAttentionParams *p, KilnBlockMask *m)
{
    return create(BM_CREATE "_cpu", true, NULL, p, m, NULL);
}
