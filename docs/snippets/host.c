/* host.c — run docs/snippets/softmax.tile and the shipped FlashAttention from C.
 * Build: cc -std=c17 host.c -I<kiln>/include/kiln -L<build> -lkiln ... (see docs/runtime.md, "Linking").
 * Run from the repository root. */
#include "kiln.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(const char *what)
{
    fprintf(stderr, "%s: %s\n", what, kiln_last_error());
    return 1;
}

static char *read_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *s = calloc(1, 1 << 16);
    if (s) s[fread(s, 1, (1 << 16) - 1, f)] = 0;
    fclose(f);
    return s;
}

static uint16_t f16_bits(float x) /* test data only: normal values, rounds toward zero */
{
    uint32_t u;
    memcpy(&u, &x, 4);
    int e = (int)((u >> 23) & 0xff) - 127 + 15;
    return (uint16_t)(((u >> 16) & 0x8000) | (e <= 0 ? 0 : (e << 10) | ((u >> 13) & 0x3ff)));
}

int main(void)
{
    KilnDevice *dev = NULL;
    KilnStatus st = kiln_init(&dev, 0);
    if (st == KILN_ERR_NO_DRIVER || st == KILN_ERR_NO_DEVICE) {
        printf("%s: %s\n", kiln_status_name(st), kiln_last_error());
        return 0;                           /* no GPU: nothing to run on */
    }
    if (st != KILN_OK) return fail("kiln_init");

    /* 1. Your own kernel: compile (cached on disk), load, launch. */
    char *src = read_text("docs/snippets/softmax.tile");
    KilnDefine defs[] = {{"ROWS", "4"}, {"BLOCK", "1024"}};
    KilnCompileOptions co = {.kernel = "softmax", .defines = defs, .ndefines = 2};
    KilnModule *mod = NULL;
    KilnKernel *k = NULL;
    if (!src || kiln_module_compile(dev, "softmax.tile", src, &co, &mod) != KILN_OK ||
        kiln_kernel_get(mod, "softmax", &k) != KILN_OK)
        return fail("compile");             /* compile errors arrive with their carets */
    int rows = 333, cols = 781;
    size_t bytes = (size_t)rows * cols * sizeof(float);
    float *x = malloc(bytes);
    for (int i = 0; i < rows * cols; i++) x[i] = (float)rand() / RAND_MAX;
    KilnDevPtr dx, dy;
    kiln_malloc(dev, bytes, &dx);
    kiln_malloc(dev, bytes, &dy);
    kiln_memcpy_htod(dev, dx, x, bytes);
    KilnArg args[] = {kiln_arg_ptr(dx), kiln_arg_ptr(dy), kiln_arg_i32(rows),
                      kiln_arg_i32(cols), kiln_arg_i32(cols)};
    int grid[3] = {(rows + 3) / 4, 1, 1};   /* one program per ROWS rows */
    if (kiln_launch(k, grid, NULL, args, 5) != KILN_OK || kiln_synchronize(dev) != KILN_OK)
        return fail("softmax");
    kiln_memcpy_dtoh(dev, x, dy, bytes);
    double row0 = 0;
    for (int j = 0; j < cols; j++) row0 += x[j];
    printf("softmax: row 0 sums to %.6f\n", row0);

    /* 2. The shipped FlashAttention: one call, [B, H, N, D] f16 tensors. */
    enum { B = 2, H = 8, N = 1000, D = 128 };
    size_t n = (size_t)B * H * N * D;
    uint16_t *h = malloc(n * 2);
    double self_dot = 0;                    /* q[0,0,0,:] . k[0,0,0,:] (Q = K here) */
    for (size_t i = 0; i < n; i++) {
        float r = (float)rand() / RAND_MAX - 0.5f;
        h[i] = f16_bits(r);
        if (i < D) self_dot += (double)r * r;
    }
    KilnDevPtr q, kk, v, o, lse;
    kiln_malloc(dev, n * 2, &q), kiln_malloc(dev, n * 2, &kk), kiln_malloc(dev, n * 2, &v);
    kiln_malloc(dev, n * 2, &o), kiln_malloc(dev, (size_t)B * H * N * 4, &lse);
    kiln_memcpy_htod(dev, q, h, n * 2), kiln_memcpy_htod(dev, kk, h, n * 2);
    kiln_memcpy_htod(dev, v, h, n * 2);
    KilnAttentionParams p = {
        .dtype = KILN_F16, .batch = B, .heads_q = H, .heads_kv = H,
        .seqlen_q = N, .seqlen_k = N, .head_dim = D, .causal = 1,
        .q = q, .k = kk, .v = v, .o = o, .lse = lse,
        .q_stride = {H * N * D, N * D, D}, .k_stride = {H * N * D, N * D, D},
        .v_stride = {H * N * D, N * D, D}, .o_stride = {H * N * D, N * D, D},
    };
    if (kiln_attention_fwd(dev, &p, NULL) != KILN_OK || kiln_synchronize(dev) != KILN_OK)
        return fail("attention");           /* first call compiles the variant */
    float l0;
    kiln_memcpy_dtoh(dev, &l0, lse, 4);
    /* Causal row 0 sees key 0 alone, so its log-sum-exp is that one scaled score. */
    printf("attention: LSE[0,0,0] = %.3f, expected %.3f\n", l0, self_dot / sqrt(D));

    kiln_free(dev, dx), kiln_free(dev, dy), kiln_free(dev, q), kiln_free(dev, kk);
    kiln_free(dev, v), kiln_free(dev, o), kiln_free(dev, lse);
    kiln_module_free(mod);
    kiln_shutdown(dev);                     /* also unloads the attention variants */
    free(src), free(x), free(h);
    return 0;
}
