/* kiln_bench_host.c — the host side of warm attention calls: microseconds of CPU
 * time per kiln_attention_fwd / kiln_attention_bwd / kiln_attention_decode once
 * its kernels are compiled (validation, the in-process cache lookup, argument
 * binding, variant selection, the launches' checks and cuLaunchKernel). One
 * JSON line per call:
 *
 *   kiln-bench-host [--calls N] [--rounds R]
 *
 * Problems are small (batch 1, 4 heads, 128 tokens, head dim 64, f16) so the GPU
 * keeps up and the calls measure the host: `host_us` is the wall time of N
 * back-to-back calls, before the synchronisation, divided by N (the minimum over
 * R rounds); `sync_us` includes the synchronisation (GPU time and queueing). The
 * calls: fwd, bwd (atomic dQ: preprocess, dK/dV, dQ conversion) and bwd_det
 * (deterministic: preprocess, dK/dV, dQ), decode_split4 (4 splits, the combine
 * kernel: two launches) and decode_fused (4 splits, combined in the split
 * kernel: one launch). Exit status 1 without a GPU or on an error (a JSON
 * "error" line), 2 on bad usage.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kiln.h"

enum { B = 1, H = 4, S = 128, D = 64 };

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec * 1e-3;
}

typedef struct Bufs { KilnDevPtr q, k, v, o, lse, dout, dq, dk, dv, scratch, lens; } Bufs;

typedef struct Call {
    const char *name;
    KilnDevice *dev;
    KilnAttentionBwdParams bwd;   /* .fwd: the forward's */
    KilnAttentionDecodeParams dec;
    int kind;                     /* 0 fwd, 1 bwd, 2 decode */
} Call;

static KilnStatus call_once(const Call *c)
{
    if (c->kind == 0) return kiln_attention_fwd(c->dev, &c->bwd.fwd, NULL);
    if (c->kind == 1) return kiln_attention_bwd(c->dev, &c->bwd, NULL);
    return kiln_attention_decode(c->dev, &c->dec, NULL);
}

/* Random f16 in [-1, 1) into each tensor buffer (never zeros), the rest poisoned. */
static KilnStatus alloc_all(KilnDevice *dev, Bufs *b)
{
    size_t n = (size_t)B * H * S * D, bytes = n * 2;
    uint16_t *h = malloc(bytes);
    if (!h) return kiln_set_error(KILN_ERR_INTERNAL, "out of host memory");
    uint64_t s = 88172645463325252ull;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        h[i] = kiln_f32_to_f16((float)((s >> 40) & 0xffffff) / 8388608.0f - 1.0f);
    }
    KilnDevPtr *in[] = {&b->q, &b->k, &b->v, &b->dout}, *out[] = {&b->o, &b->dq, &b->dk, &b->dv};
    KilnStatus st = KILN_OK;
    for (size_t i = 0; i < 4 && st == KILN_OK; i++) {
        if ((st = kiln_malloc(dev, bytes, in[i])) == KILN_OK) st = kiln_memcpy_htod(dev, *in[i], h, bytes);
        if (st == KILN_OK && (st = kiln_malloc(dev, bytes, out[i])) == KILN_OK) st = kiln_memset(dev, *out[i], 0xFF, bytes);
    }
    int32_t lens[B];
    for (int i = 0; i < B; i++) lens[i] = S;
    if (st == KILN_OK) st = kiln_malloc(dev, (size_t)B * H * S * 4, &b->lse);
    if (st == KILN_OK) st = kiln_malloc(dev, sizeof lens, &b->lens);
    if (st == KILN_OK) st = kiln_memcpy_htod(dev, b->lens, lens, sizeof lens);
    free(h);
    return st;
}

static void make_calls(KilnDevice *dev, const Bufs *b, Call c[5])
{
    int64_t st[3] = {(int64_t)H * S * D, (int64_t)S * D, D};   /* [batch, heads, seqlen, d] */
    KilnAttentionParams f = {.dtype = KILN_F16, .batch = B, .heads_q = H, .heads_kv = H, .seqlen_q = S,
                             .seqlen_k = S, .head_dim = D, .q = b->q, .k = b->k, .v = b->v, .o = b->o,
                             .lse = b->lse, .causal = 1};
    int64_t *fs[] = {f.q_stride, f.k_stride, f.v_stride, f.o_stride};
    for (int i = 0; i < 4; i++) memcpy(fs[i], st, sizeof st);
    KilnAttentionBwdParams bw = {.fwd = f, .dout = b->dout, .dq = b->dq, .dk = b->dk, .dv = b->dv,
                                 .scratch = b->scratch};
    int64_t *bs[] = {bw.dout_stride, bw.dq_stride, bw.dk_stride, bw.dv_stride};
    for (int i = 0; i < 4; i++) memcpy(bs[i], st, sizeof st);
    /* decode: one new token per sequence, the cache is K/V as [batch, seqlen, heads, d] */
    int64_t qs[3] = {(int64_t)H * D, D, (int64_t)H * D}, ks[3] = {(int64_t)S * H * D, D, (int64_t)H * D};
    KilnAttentionDecodeParams d = {.dtype = KILN_F16, .batch = B, .heads_q = H, .heads_kv = H, .seqlen_q = 1,
                                   .head_dim = D, .q = b->q, .o = b->o, .lse = b->lse, .k = b->k, .v = b->v,
                                   .cache_seqlens = b->lens, .max_seqlen_k = S, .causal = 1, .num_splits = 4,
                                   .combine = KILN_DECODE_COMBINE_KERNEL};
    memcpy(d.q_stride, qs, sizeof qs), memcpy(d.o_stride, qs, sizeof qs);
    memcpy(d.k_stride, ks, sizeof ks), memcpy(d.v_stride, ks, sizeof ks);
    for (int i = 0; i < 5; i++) c[i] = (Call){.dev = dev, .bwd = bw, .dec = d};
    c[0].name = "fwd", c[0].kind = 0;
    c[1].name = "bwd", c[1].kind = 1;
    c[2].name = "bwd_det", c[2].kind = 1, c[2].bwd.deterministic = 1;
    c[3].name = "decode_split4", c[3].kind = 2;
    c[4].name = "decode_fused", c[4].kind = 2, c[4].dec.combine = KILN_DECODE_COMBINE_FUSED;
}

static KilnStatus measure(const Call *c, int calls, int rounds, double *host_us, double *sync_us)
{
    KilnStatus st = call_once(c);   /* compiles (cold) */
    if (st == KILN_OK) st = call_once(c);
    if (st == KILN_OK) st = kiln_synchronize(c->dev);
    *host_us = *sync_us = 1e30;
    for (int r = 0; r < rounds && st == KILN_OK; r++) {
        double t0 = now_us();
        for (int i = 0; i < calls && st == KILN_OK; i++) st = call_once(c);
        double t1 = now_us();
        if (st == KILN_OK) st = kiln_synchronize(c->dev);
        double t2 = now_us();
        if ((t1 - t0) / calls < *host_us) *host_us = (t1 - t0) / calls;
        if ((t2 - t0) / calls < *sync_us) *sync_us = (t2 - t0) / calls;
    }
    return st;
}

int main(int argc, char **argv)
{
    int calls = 200, rounds = 7;
    for (int i = 1; i < argc; i++) {
        if (i + 1 < argc && !strcmp(argv[i], "--calls")) calls = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--rounds")) rounds = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: kiln-bench-host [--calls N] [--rounds R]\n");
            return 2;
        }
    }
    if (calls < 1 || rounds < 1) return 2;
    KilnDevice *dev = NULL;
    KilnStatus st = kiln_init(&dev, 0);
    Bufs b = {0};
    if (st == KILN_OK) st = alloc_all(dev, &b);
    Call c[5];
    if (st == KILN_OK) {
        make_calls(dev, &b, c);
        size_t sb = kiln_attention_bwd_scratch_size(&c[1].bwd);
        if ((st = kiln_malloc(dev, sb, &b.scratch)) == KILN_OK)
            for (int i = 0; i < 5; i++) c[i].bwd.scratch = b.scratch, c[i].bwd.scratch_size = sb;
    }
    for (int i = 0; st == KILN_OK && i < 5; i++) {
        double host, sync;
        st = measure(&c[i], calls, rounds, &host, &sync);
        if (st == KILN_OK)
            printf("{\"call\": \"%s\", \"calls\": %d, \"rounds\": %d, \"host_us\": %.2f, \"sync_us\": %.2f}\n",
                   c[i].name, calls, rounds, host, sync);
        else
            printf("{\"call\": \"%s\", \"error\": \"%s\"}\n", c[i].name, kiln_status_name(st));
        fflush(stdout);
    }
    if (st != KILN_OK) fprintf(stderr, "kiln-bench-host: %s\n", kiln_last_error());
    if (dev) {
        KilnDevPtr all[] = {b.q, b.k, b.v, b.o, b.lse, b.dout, b.dq, b.dk, b.dv, b.scratch, b.lens};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) kiln_free(dev, all[i]);
        kiln_attention_cache_clear(dev);
        kiln_shutdown(dev);
    }
    return st == KILN_OK ? 0 : 1;
}
