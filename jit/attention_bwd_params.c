/* attention_bwd_params.c — the backward's learnable params (KilnAttentionBwdParams.param_grads).
 *
 * What: a variant's `param X: *f32 differentiable;` gets dL/dX from the backward. The dK/dV
 * kernel, compiled with PARAM_GRADS = true, adds its share into its own f32 row of X's
 * scratch (param_grads in compiler/lang/grad.c, attn_param_grad_acc in attention_bwd.tile);
 * around it the call launches attn_param_grad_zero (clears every row) before and
 * attn_param_grad_reduce (X's gradient = the rows summed in row order) after, both of
 * lang/lib/attention_param_grad.tile. Here: validation, the scratch layout, the binding of the
 * kernels' X__grad / X__numel parameters, and those launches on the device and the interpreter.
 *
 * Invariants: the param rows lie at the START of the caller's scratch (delta and the dQ
 * accumulator follow), so a call without param_grads binds exactly what it did before; the
 * layout depends on the call alone, never on the device: rows for cdiv(seqlen_k, block_n or
 * 16) * batch * heads_kv programs (the smallest tile any plan takes), param i's rows after
 * param i-1's, each share rounded up to 256 bytes. Every bit of a gradient is the same on every
 * run: each row is written by one program in its own order, the rows summed in row order.
 * With param_grads_atomic there are no rows: the gradients are cleared and the kernel adds into
 * them with f32 atomics (not deterministic), and nothing is reduced.
 *
 * Example: T5 bias with param_grads = {{"rel_bias", grad, 16 * 32}}, batch 2, heads_kv 16,
 * seqlen_k 4096, block_n 0: 256 * 32 = 8192 rows of 512 floats (16 MiB) before delta; the
 * dK/dV kernel gets rel_bias__grad = scratch, rel_bias__numel = 512; attn_param_grad_reduce
 * on grid (2,) sums the 64 * 32 rows the plan's 64-key programs wrote.
 */
#include "jit_internal.h"
#include "compiler/lang/lang.h"

#include <stdint.h>
#include <string.h>

#define PG_PROGRAM "lang/lib/attention_param_grad.tile"
#define PG_ALIGN 256
#define PG_ZERO_BLOCK 1024     /* attn_param_grad_zero's BLOCK */
#define PG_REDUCE_BLOCK 256    /* attn_param_grad_reduce's BLOCK */
#define PG_MIN_TILE 16         /* the smallest block_n of any plan */

KilnStatus rt_attn_pg_check(const char *api, const KilnAttentionBwdParams *p)
{
    if (p->nparam_grads == 0) return KILN_OK;
    if (p->nparam_grads < 0 || !p->param_grads)
        return rt_attn_error(api, KILN_ERR_USAGE, "nparam_grads %d without param_grads", p->nparam_grads);
    if (!p->fwd.variant)
        return rt_attn_error(api, KILN_ERR_USAGE, "param_grads without a variant (fwd.variant declares the "
                             "differentiable params)");
    for (int i = 0; i < p->nparam_grads; i++) {
        const KilnParamGrad *g = &p->param_grads[i];
        if (!g->name || !*g->name) return rt_attn_error(api, KILN_ERR_USAGE, "param_grads[%d] has no name", i);
        for (int j = 0; j < i; j++)
            if (!strcmp(p->param_grads[j].name, g->name))
                return rt_attn_error(api, KILN_ERR_USAGE, "param_grads[%d] and param_grads[%d] both name '%s'", j, i,
                                     g->name);
        if (g->numel == 0 || g->numel > INT32_MAX)
            return rt_attn_error(api, KILN_ERR_USAGE, "param_grads[%d] ('%s'): numel %zu is outside [1, 2^31 - 1]",
                                 i, g->name, g->numel);
        if (!g->grad || g->grad % 4)
            return rt_attn_error(api, KILN_ERR_USAGE, "param_grads[%d] ('%s'): grad must be a 4-byte aligned f32 "
                                 "buffer", i, g->name);
    }
    return KILN_OK;
}

/* Rows: one per dK/dV program of the plan with the smallest tile (the caller's block_n if set). */
static uint64_t bound_rows(const KilnAttentionBwdParams *p)
{
    const KilnAttentionParams *f = &p->fwd;
    int bn = p->block_n ? p->block_n : PG_MIN_TILE;
    if (f->seqlen_k <= 0) return 0;
    return (uint64_t)((f->seqlen_k + bn - 1) / bn) * (uint64_t)f->batch * (uint64_t)f->heads_kv;
}

/* Bytes of param i's rows (rounded up), 0 past 2^62 (refused by the size check). */
static uint64_t share_bytes(const KilnAttentionBwdParams *p, int i)
{
    uint64_t b;
    if (__builtin_mul_overflow(bound_rows(p), (uint64_t)p->param_grads[i].numel * 4, &b) || b > (1ull << 62))
        return 0;
    return (b + PG_ALIGN - 1) / PG_ALIGN * PG_ALIGN;
}

size_t rt_attn_pg_bytes(const KilnAttentionBwdParams *p)
{
    if (p->param_grads_atomic) return 0;   /* straight into the gradients: no rows */
    uint64_t total = 0;
    for (int i = 0; i < p->nparam_grads; i++) {
        uint64_t b = share_bytes(p, i);
        if ((p->param_grads[i].numel && bound_rows(p) && !b) || __builtin_add_overflow(total, b, &total))
            return SIZE_MAX;
    }
    return total > SIZE_MAX / 2 ? SIZE_MAX : (size_t)total;
}

static size_t share_offset(const KilnAttentionBwdParams *p, int i)
{
    size_t off = 0;
    for (int j = 0; j < i; j++) off += share_bytes(p, j);
    return off;
}

/* The entry of a kernel parameter that param_grads generates, X__grad / X__numel (lang.h's
 * list; its kind in *which, X's length in *xlen); -1: not one. */
static int entry_of(const KilnAttentionBwdParams *p, const char *name, LangGenParam *which, size_t *xlen)
{
    if (!lang_gen_param_split(name, which, xlen)) return -1;
    for (int i = 0; i < p->nparam_grads; i++)
        if (strlen(p->param_grads[i].name) == *xlen && !strncmp(p->param_grads[i].name, name, *xlen)) return i;
    return -2;   /* a differentiable param without an entry */
}

bool rt_attn_pg_arg(const char *api, const KilnAttentionBwdParams *p, const KilnParam *prm, KilnArg *a, KilnStatus *st)
{
    LangGenParam which;
    size_t xlen = 0;
    int i = entry_of(p, prm->name, &which, &xlen);
    if (i == -1) return false;
    if (i == -2) {
        *st = rt_attn_error(api, KILN_ERR_USAGE, "the variant's param '%.*s' is differentiable, but param_grads "
                            "has no entry for it (give every differentiable param's gradient buffer)",
                            (int)xlen, prm->name);
        return true;
    }
    switch (which) {   /* no default: -Wswitch names a generated param added to lang.h's list but not here */
    case LANG_GEN_GRAD:
        *a = kiln_arg_ptr(p->scratch && !p->param_grads_atomic ? p->scratch + share_offset(p, i) : p->param_grads[i].grad);
        *st = KILN_OK;
        break;
    case LANG_GEN_NUMEL:
        *st = rt_attn_int_arg(api, prm, (int64_t)p->param_grads[i].numel, a);
        break;
    case LANG_GEN_COUNT:
        return false;
    }
    return true;
}

KilnStatus rt_attn_pg_check_kernel(const char *api, const KilnAttentionBwdParams *p, const KilnKernelInfo *info)
{
    for (int i = 0; i < p->nparam_grads; i++) {
        bool found = false;
        for (int k = 0; k < info->nparams && !found; k++) {
            const char *n = info->params[k].name;
            size_t len = strlen(p->param_grads[i].name);
            found = !strncmp(n, p->param_grads[i].name, len) && !strcmp(n + len, lang_gen_param_suffix[LANG_GEN_GRAD]);
        }
        if (!found)
            return rt_attn_error(api, KILN_ERR_USAGE, "param_grads[%d] names '%s', which is not a differentiable "
                                 "param that the variant's score_mod loads (`param %s: *f32 differentiable;`)", i,
                                 p->param_grads[i].name, p->param_grads[i].name);
    }
    return KILN_OK;
}

/* ---- the zero and reduce launches ---- */

typedef struct PgCall {
    const KilnAttentionBwdParams *p;
    int i;           /* the param (reduce) */
    int nrows;       /* rows the dK/dV kernel wrote */
    KilnDevPtr scr;  /* zero: the rows' start; reduce: param i's rows */
    int64_t n;       /* zero: floats */
} PgCall;

static KilnStatus pg_bind(const void *ctx, const KilnParam *prm, KilnArg *a)
{
    const PgCall *c = ctx;
    const char *n = prm->name;
    if (!strcmp(n, "SCR")) *a = kiln_arg_ptr(c->scr);
    else if (!strcmp(n, "OUT")) *a = kiln_arg_ptr(c->p->param_grads[c->i].grad);
    else if (!strcmp(n, "n")) *a = kiln_arg_i64(c->n);
    else if (!strcmp(n, "nrows")) *a = kiln_arg_i32(c->nrows);
    else if (!strcmp(n, "numel")) *a = kiln_arg_i32((int32_t)c->p->param_grads[c->i].numel);
    else return rt_attn_error("kiln_attention_bwd", KILN_ERR_INTERNAL, "attention_param_grad: parameter '%s'", n);
    return KILN_OK;
}

static KilnHostArg pg_buffer(const void *ctx, const char *name, KilnDevPtr ptr)
{
    const PgCall *c = ctx;
    if (!strcmp(name, "OUT"))
        return kiln_host_buf((void *)(uintptr_t)ptr, c->p->param_grads[c->i].numel * 4, KILN_HOST_OUT);
    size_t bytes = (size_t)c->nrows * c->p->param_grads[c->i].numel * 4;
    return bytes ? kiln_host_buf((void *)(uintptr_t)ptr, bytes, KILN_HOST_IN) : rt_attn_cpu_stand_in();
}

static void pg_kernel(RtAttnVariant *v, const char *kernel)
{
    rt_attn_variant_init(v, PG_PROGRAM, kernel, 4, 1, NULL);
}

static KilnStatus zero_launch(const char *api, KilnKernel *k, const KilnAttentionBwdParams *p, KilnDevPtr ptr,
                              int64_t n, KilnStream *stream)
{
    PgCall c = {.p = p, .scr = ptr, .n = n};
    int grid[3] = {(int)((n + PG_ZERO_BLOCK - 1) / PG_ZERO_BLOCK), 1, 1};
    return rt_attn_launch(api, k, grid, stream, pg_bind, &c);
}

/* The rows (deterministic) or, atomic, the gradients themselves. */
KilnStatus rt_attn_pg_zero(KilnDevice *dev, const char *api, const KilnAttentionBwdParams *p, KilnStream *stream)
{
    size_t bytes = rt_attn_pg_bytes(p);
    if (!p->nparam_grads || (!bytes && !p->param_grads_atomic)) return KILN_OK;
    RtAttnVariant v;
    pg_kernel(&v, "attn_param_grad_zero");
    KilnKernel *k;
    KilnStatus st = rt_attn_get_kernel(dev, api, &v, &k);
    if (st != KILN_OK) return st;
    if (!p->param_grads_atomic) return zero_launch(api, k, p, p->scratch, (int64_t)(bytes / 4), stream);
    for (int i = 0; st == KILN_OK && i < p->nparam_grads; i++)
        st = zero_launch(api, k, p, p->param_grads[i].grad, (int64_t)p->param_grads[i].numel, stream);
    return st;
}

KilnStatus rt_attn_pg_reduce(KilnDevice *dev, const char *api, const KilnAttentionBwdParams *p, int nrows,
                             KilnStream *stream)
{
    if (!p->nparam_grads || p->param_grads_atomic) return KILN_OK;   /* atomic: already there */
    RtAttnVariant v;
    pg_kernel(&v, "attn_param_grad_reduce");
    KilnKernel *k;
    KilnStatus st = rt_attn_get_kernel(dev, api, &v, &k);
    for (int i = 0; st == KILN_OK && i < p->nparam_grads; i++) {
        /* no rows (no keys, no queries): the gradient is 0, and SCR is never read */
        PgCall c = {.p = p, .i = i, .nrows = nrows,
                    .scr = nrows ? p->scratch + share_offset(p, i) : p->param_grads[i].grad};
        int grid[3] = {(int)((p->param_grads[i].numel + PG_REDUCE_BLOCK - 1) / PG_REDUCE_BLOCK), 1, 1};
        st = rt_attn_launch(api, k, grid, stream, pg_bind, &c);
    }
    return st;
}

/* The interpreter: the rows are host memory, cleared here; the reduce runs as on the device. */
void rt_attn_pg_zero_cpu(const KilnAttentionBwdParams *p)
{
    size_t bytes = rt_attn_pg_bytes(p);
    if (p->nparam_grads && bytes) memset((void *)(uintptr_t)p->scratch, 0, bytes);
    for (int i = 0; p->param_grads_atomic && i < p->nparam_grads; i++)
        memset((void *)(uintptr_t)p->param_grads[i].grad, 0, p->param_grads[i].numel * 4);
}

KilnStatus rt_attn_pg_reduce_cpu(const char *api, const KilnAttentionBwdParams *p, int nrows)
{
    KilnStatus st = KILN_OK;
    if (p->param_grads_atomic) return st;   /* the kernel added into the gradients */
    for (int i = 0; st == KILN_OK && i < p->nparam_grads; i++) {
        RtAttnVariant v;
        pg_kernel(&v, "attn_param_grad_reduce");
        PgCall c = {.p = p, .i = i, .nrows = nrows,
                    .scr = nrows ? p->scratch + share_offset(p, i) : p->param_grads[i].grad};
        int grid[3] = {(int)((p->param_grads[i].numel + PG_REDUCE_BLOCK - 1) / PG_REDUCE_BLOCK), 1, 1};
        st = rt_attn_run_cpu(api, &v, grid, pg_bind, pg_buffer, &c, NULL, NULL);
    }
    return st;
}

/* The host buffer of the dK/dV kernel's "X__grad": param X's rows in the caller's scratch. */
bool rt_attn_pg_buffer(const KilnAttentionBwdParams *p, const char *name, KilnDevPtr ptr, KilnHostArg *out)
{
    LangGenParam which;
    size_t xlen;
    int i = entry_of(p, name, &which, &xlen);
    if (i < 0 || which != LANG_GEN_GRAD) return false;
    size_t bytes = p->param_grads_atomic ? p->param_grads[i].numel * 4 : (size_t)share_bytes(p, i);
    *out = kiln_host_buf((void *)(uintptr_t)ptr, bytes, KILN_HOST_INOUT);
    return true;
}
