/* kiln_bench_decode.c — times kiln_attention_decode (flash-decoding) on the GPU
 * through the public API and prints one JSON object per cache length.
 *
 *   kiln-bench-decode --dtype bf16 --head-dim 128 --batch 4 --heads 32 --heads-kv 8 \
 *       --tokens 1 --seqlens 1024,8192,65536 [--page 64] [--splits S] [--min-ms MS]
 *       [--combine fused|kernel] [--block-n N] [--warps W] [--stages S]
 *       [--mask window:W|document:D [--mask-mode mask|nomask] [--mask-block B]]
 *
 * Every sequence holds the whole cache length (cache_seqlens[b] = N); with
 * --page the cache is paged (pages in order). Decode is bound by memory
 * bandwidth, so its measure is GB/s of K and V read: 2 * batch * N * heads_kv *
 * head_dim * element size per call (Q, O and the split scratch are not
 * counted). --combine picks how splits are combined (default: the runtime's,
 * fused with its own scratch); --splits, --block-n, --warps and --stages
 * override the schedule (0: the runtime's), so a sweep can compare the
 * chosen split count with every fixed one. The time is the mean of `reps` back-to-back calls
 * between two events, after a warm-up call (which compiles the variants).
 * --mask runs a variant (lang/lib/variants/): window:W the causal sliding window of W keys
 * (window_left W), document:D D equal documents per sequence (document ids); with
 * --mask-mode mask (the default) also its block mask (KilnAttentionDecodeParams.block_mask:
 * the full problem's, --mask-block square blocks, default 128, made once per length on the
 * device: "mask_ms" its cold create time), nomask the variant alone. GB/s still counts the
 * whole cache; "visible_bytes" the K+V that the last token can see.
 * The same problem can be timed with PyTorch SDPA or FlashAttention's
 * flash_attn_with_kvcache for comparison.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kiln.h"

typedef struct Opts {
    const char *dtype, *seqlens, *mask, *mask_mode;
    int mask_block;
    int batch, heads, heads_kv, tokens, head_dim, page, splits, combine, block_n, warps, stages;
    double min_ms;
} Opts;

static int usage(void)
{
    fprintf(stderr, "usage: kiln_bench_decode --head-dim D --heads H --heads-kv HK --batch B --seqlens N[,N...]\n"
                    "       [--dtype f16|bf16] [--tokens T (1..16)] [--page P (paged cache)] [--splits S]\n"
                    "       [--min-ms MS] [--combine fused|kernel] [--block-n N] [--warps W] [--stages S]\n"
                    "       [--mask window:W|document:D [--mask-mode mask|nomask] [--mask-block B]]\n");
    return 2;
}

static int parse_opts(int argc, char **argv, Opts *o)
{
    *o = (Opts){.dtype = "bf16", .batch = 1, .heads = 32, .heads_kv = 8, .tokens = 1, .head_dim = 128,
                .min_ms = 200, .mask_mode = "mask", .mask_block = 128};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) return usage();
        struct { const char *name; int *dst; } ints[] = {
            {"--batch", &o->batch}, {"--heads", &o->heads}, {"--heads-kv", &o->heads_kv}, {"--tokens", &o->tokens},
            {"--head-dim", &o->head_dim}, {"--page", &o->page}, {"--splits", &o->splits},
            {"--block-n", &o->block_n}, {"--warps", &o->warps}, {"--stages", &o->stages},
            {"--mask-block", &o->mask_block}};
        int hit = 0;
        for (size_t j = 0; j < sizeof ints / sizeof ints[0]; j++)
            if (!strcmp(a, ints[j].name)) *ints[j].dst = atoi(v), hit = 1;
        if (!strcmp(a, "--dtype")) o->dtype = v, hit = 1;
        if (!strcmp(a, "--seqlens")) o->seqlens = v, hit = 1;
        if (!strcmp(a, "--mask")) o->mask = v, hit = 1;
        if (!strcmp(a, "--mask-mode")) o->mask_mode = v, hit = 1;
        if (!strcmp(a, "--min-ms")) o->min_ms = atof(v), hit = 1;
        if (!strcmp(a, "--combine")) {
            if (strcmp(v, "fused") && strcmp(v, "kernel")) return usage();
            o->combine = strcmp(v, "fused") ? KILN_DECODE_COMBINE_KERNEL : KILN_DECODE_COMBINE_FUSED, hit = 1;
        }
        if (!hit) return usage();
        i++;
    }
    if (o->mask && strncmp(o->mask, "window:", 7) && strncmp(o->mask, "document:", 9)) return usage();
    if (strcmp(o->mask_mode, "mask") && strcmp(o->mask_mode, "nomask")) return usage();
    return o->seqlens ? 0 : usage();
}

static void json_error(int n, KilnStatus st)
{
    char msg[1024];
    snprintf(msg, sizeof msg, "%s: %s", kiln_status_name(st), kiln_last_error());
    for (char *c = msg; *c; c++)
        if (*c == '"' || *c == '\\' || *c == '\n' || *c == '\t') *c = ' ';
    printf("{\"provider\": \"kiln\", \"kernel\": \"decode\", \"seqlen_k\": %d, \"error\": \"%s\"}\n", n, msg);
}

typedef struct Bufs { KilnDevPtr q, k, v, o, lse, lens, bt, doc, mask; } Bufs;

/* The --mask variant: its arguments (document ids uploaded into b->doc), and with
 * --mask-mode mask its block mask of the full problem (n x n), made on the device. */
typedef struct Masked {
    KilnVariantArg args[3];
    KilnAttentionVariant var;
    KilnBlockMask m;
    double create_ms, visible;   /* the mask's cold create time; keys the last token sees */
} Masked;

static KilnStatus setup_mask(KilnDevice *dev, KilnAttentionDecodeParams *p, const Opts *o, int n, Bufs *b,
                             Masked *mk)
{
    memset(mk, 0, sizeof *mk);
    int w = o->mask[0] == 'w' ? atoi(o->mask + 7) : 0, docs = w ? 0 : atoi(o->mask + 9);
    KilnStatus st = KILN_OK;
    if (w) {
        mk->args[0] = (KilnVariantArg){"window_left", kiln_arg_i32(w), 0};
        mk->args[1] = (KilnVariantArg){"window_right", kiln_arg_i32(0), 0};
        mk->var = (KilnAttentionVariant){.path = "lang/lib/variants/sliding_window.tile", .args = mk->args, .nargs = 2};
        mk->visible = w + 1 < n ? w + 1 : n;
    } else {   /* D equal documents: token t of every sequence in document t / cdiv(n, D) */
        int per = (n + (docs > 0 ? docs : 1) - 1) / (docs > 0 ? docs : 1);
        int32_t *ids = malloc(sizeof(int32_t) * (size_t)o->batch * n);
        if (!ids) return kiln_set_error(KILN_ERR_INTERNAL, "out of host memory");
        for (size_t i = 0; i < (size_t)o->batch * n; i++) ids[i] = (int32_t)(i % n / per);
        st = kiln_malloc(dev, sizeof(int32_t) * (size_t)o->batch * n, &b->doc);
        if (!st) st = kiln_memcpy_htod(dev, b->doc, ids, sizeof(int32_t) * (size_t)o->batch * n);
        free(ids);
        mk->args[0] = (KilnVariantArg){"doc_ids", kiln_arg_ptr(b->doc), 0};
        mk->args[1] = (KilnVariantArg){"doc_stride", kiln_arg_i32(n), 0};
        mk->args[2] = (KilnVariantArg){"doc_len", kiln_arg_i32(n), 0};
        mk->var = (KilnAttentionVariant){.path = "lang/lib/variants/document.tile", .args = mk->args, .nargs = 3};
        mk->visible = n - (int64_t)(n - 1) / per * per;
    }
    p->variant = &mk->var;
    if (st || strcmp(o->mask_mode, "mask")) return st;
    KilnAttentionParams fp = {.dtype = p->dtype, .batch = p->batch, .heads_q = p->heads_q, .heads_kv = p->heads_kv,
                              .seqlen_q = n, .seqlen_k = n, .head_dim = p->head_dim, .causal = p->causal,
                              .variant = &mk->var};
    mk->m = (KilnBlockMask){.block_q = o->mask_block, .block_kv = o->mask_block, .batch = w ? 1 : o->batch,
                            .heads = 1};
    mk->m.bytes = kiln_attention_block_mask_size(&fp, &mk->m);
    if (!mk->m.bytes) return kiln_attention_block_mask_create(dev, &fp, &mk->m, NULL);   /* it says why */
    st = kiln_malloc(dev, mk->m.bytes, &b->mask);
    mk->m.data = b->mask;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (!st) st = kiln_attention_block_mask_create(dev, &fp, &mk->m, NULL);
    if (!st) st = kiln_synchronize(dev);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    mk->create_ms = (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6;
    p->block_mask = &mk->m;
    return st;
}

/* Device buffers of one problem: random Q, K, V in [-1, 1) (bf16/f16 bit patterns). */
static KilnStatus setup(KilnDevice *dev, KilnAttentionDecodeParams *p, const Opts *o, int n, Bufs *b)
{
    size_t es = 2, row = (size_t)o->heads_kv * o->head_dim;
    int pages_per = o->page ? (n + o->page - 1) / o->page : 0;
    size_t kv_rows = o->page ? (size_t)o->batch * pages_per * o->page : (size_t)o->batch * n;
    size_t nq = (size_t)o->batch * o->tokens * o->heads * o->head_dim, nkv = kv_rows * row;
    uint16_t *h = malloc((nkv > nq ? nkv : nq) * es);
    int32_t *ints = malloc(sizeof(int32_t) * ((size_t)o->batch * (pages_per + 1) + 1));
    uint64_t s = 88172645463325252ull;
    KilnStatus st = h && ints ? KILN_OK : kiln_set_error(KILN_ERR_INTERNAL, "out of host memory");
    for (size_t i = 0; st == KILN_OK && i < (nkv > nq ? nkv : nq); i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        float x = (float)((s >> 40) & 0xffffff) / 8388608.0f - 1.0f;
        h[i] = strcmp(o->dtype, "f16") ? kiln_f32_to_bf16(x) : kiln_f32_to_f16(x);
    }
    if (!st) st = kiln_malloc(dev, nq * es, &b->q);
    if (!st) st = kiln_malloc(dev, nq * es, &b->o);
    if (!st) st = kiln_malloc(dev, nkv * es, &b->k);
    if (!st) st = kiln_malloc(dev, nkv * es, &b->v);
    if (!st) st = kiln_malloc(dev, (size_t)o->batch * o->heads * o->tokens * 4, &b->lse);
    if (!st) st = kiln_memcpy_htod(dev, b->q, h, nq * es);
    if (!st) st = kiln_memcpy_htod(dev, b->k, h, nkv * es);
    if (!st) st = kiln_memcpy_htod(dev, b->v, h, nkv * es);
    for (int i = 0; st == KILN_OK && i < o->batch; i++) ints[i] = n;
    if (!st) st = kiln_malloc(dev, sizeof(int32_t) * o->batch, &b->lens);
    if (!st) st = kiln_memcpy_htod(dev, b->lens, ints, sizeof(int32_t) * o->batch);
    if (!st && o->page) {   /* pages in order: sequence b owns pages [b * pages_per, (b + 1) * pages_per) */
        for (int i = 0; i < o->batch * pages_per; i++) ints[i] = i;
        st = kiln_malloc(dev, sizeof(int32_t) * o->batch * pages_per, &b->bt);
        if (!st) st = kiln_memcpy_htod(dev, b->bt, ints, sizeof(int32_t) * o->batch * pages_per);
    }
    free(h);
    free(ints);
    int64_t qs[3] = {(int64_t)o->tokens * o->heads * o->head_dim, o->head_dim, (int64_t)o->heads * o->head_dim};
    int64_t ks[3] = {(int64_t)(o->page ? o->page : n) * (int64_t)row, o->head_dim, (int64_t)row};
    *p = (KilnAttentionDecodeParams){.dtype = strcmp(o->dtype, "f16") ? KILN_BF16 : KILN_F16, .batch = o->batch,
                                     .heads_q = o->heads, .heads_kv = o->heads_kv, .seqlen_q = o->tokens,
                                     .head_dim = o->head_dim, .q = b->q, .o = b->o, .lse = b->lse, .k = b->k,
                                     .v = b->v, .cache_seqlens = b->lens, .max_seqlen_k = n, .causal = 1,
                                     .num_splits = o->splits, .block_table = b->bt,
                                     .block_table_stride = pages_per, .page_size = o->page,
                                     .num_pages = o->batch * pages_per, .combine = o->combine,
                                     .block_n = o->block_n, .num_warps = o->warps, .num_stages = o->stages};
    memcpy(p->q_stride, qs, sizeof qs), memcpy(p->o_stride, qs, sizeof qs);
    memcpy(p->k_stride, ks, sizeof ks), memcpy(p->v_stride, ks, sizeof ks);
    return st;
}

static KilnStatus time_calls(KilnDevice *dev, const KilnAttentionDecodeParams *p, int reps, float *ms)
{
    KilnEvent *e0 = NULL, *e1 = NULL;
    KilnStatus st = kiln_event_create(dev, &e0);
    if (!st) st = kiln_event_create(dev, &e1);
    if (!st) st = kiln_event_record(e0, NULL);
    for (int i = 0; st == KILN_OK && i < reps; i++) st = kiln_attention_decode(dev, p, NULL);
    if (!st) st = kiln_event_record(e1, NULL);
    if (!st) st = kiln_event_synchronize(e1);
    if (!st) st = kiln_event_elapsed_ms(e0, e1, ms);
    if (!st) *ms /= (float)reps;
    kiln_event_destroy(e0);
    kiln_event_destroy(e1);
    return st;
}

static void bench_one(KilnDevice *dev, const KilnDeviceInfo *info, const Opts *o, int n)
{
    Bufs b = {0};
    KilnAttentionDecodeParams p;
    Masked mk = {0};
    float est = 0, ms = 0;
    KilnStatus st = setup(dev, &p, o, n, &b);
    if (!st && o->mask) st = setup_mask(dev, &p, o, n, &b, &mk);
    if (!st) st = kiln_attention_decode(dev, &p, NULL);   /* compiles the variants */
    if (!st) st = time_calls(dev, &p, 3, &est);
    int reps = est > 0 ? (int)(o->min_ms / est) : 100;
    reps = reps < 5 ? 5 : reps > 2000 ? 2000 : reps;
    if (!st) st = time_calls(dev, &p, reps, &ms);
    KilnDevPtr all[] = {b.q, b.k, b.v, b.o, b.lse, b.lens, b.bt, b.doc, b.mask};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) kiln_free(dev, all[i]);
    if (st) { json_error(n, st); return; }
    double bytes = 2.0 * o->batch * (double)n * o->heads_kv * o->head_dim * 2;
    double row = 2.0 * o->batch * o->heads_kv * o->head_dim * 2;
    printf("{\"mask\": \"%s\", \"mask_mode\": \"%s\", \"mask_block\": %d, \"mask_ms\": %.3f, "
           "\"visible_bytes\": %.0f, ", o->mask ? o->mask : "", o->mask ? o->mask_mode : "", o->mask_block,
           mk.create_ms, row * (o->mask ? mk.visible : n));
    printf("\"provider\": \"kiln\", \"kernel\": \"decode\", \"dtype\": \"%s\", \"batch\": %d, \"heads\": %d, "
           "\"heads_kv\": %d, \"tokens\": %d, \"seqlen_k\": %d, \"head_dim\": %d, \"page\": %d, \"splits\": %d, "
           "\"combine\": \"%s\", \"reps\": %d, \"ms\": %.5f, \"kv_bytes\": %.0f, \"gbps\": %.1f}\n",
           o->dtype, o->batch, o->heads, o->heads_kv, o->tokens, n, o->head_dim, o->page,
           kiln_attention_decode_splits(&p, info->sm_count), o->combine == KILN_DECODE_COMBINE_KERNEL ? "kernel" : "fused",
           reps, ms, bytes, bytes / (ms * 1e-3) / 1e9);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    Opts o;
    if (parse_opts(argc, argv, &o)) return 2;
    KilnDevice *dev = NULL;
    KilnStatus st = kiln_init(&dev, 0);
    if (st) { json_error(0, st); return 1; }
    KilnDeviceInfo info;
    kiln_device_info(dev, &info);
    char *list = strdup(o.seqlens);
    for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) bench_one(dev, &info, &o, atoi(tok));
    free(list);
    kiln_attention_cache_clear(dev);
    kiln_shutdown(dev);
    return 0;
}
