/* consumer.c — a user's program, built by tests/install/run.sh against an
 * installed prefix through pkg-config (public headers and libkiln only).
 *
 * It finds the shipped attention program through kiln_data_path (which must
 * point into the installed share/kiln, argv[1]), and a variant in its
 * subfolder (lib/variants/alibi.tile: the install keeps lang/lib/'s folders,
 * and a file found in the source tree instead is refused), compiles it to PTX through
 * the public API, checks the PTX against the embedded copy's, runs
 * examples/vec_add.tile on the CPU interpreter, and reports "no GPU" cleanly
 * through kiln_init (or, on a GPU machine, that one is there). Exit 0 when all
 * of it holds; 1 with a message otherwise.
 */
#include <kiln.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *read_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = NULL;
    long n = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    if (n >= 0 && fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)n + 1)) != NULL) {
        if (fread(buf, 1, (size_t)n, f) == (size_t)n) buf[n] = 0;
        else {
            free(buf);
            buf = NULL;
        }
    }
    fclose(f);
    return buf;
}

static int fail(const char *what)
{
    fprintf(stderr, "consumer: %s: %s\n", what, kiln_last_error());
    return 1;
}

/* The shipped file `rel`, which must come from `share` (the installed share/kiln). */
static char *shipped(const char *share, const char *rel, char *path, size_t n)
{
    if (kiln_data_path(rel, path, n) != KILN_OK) return NULL;
    if (strncmp(path, share, strlen(share))) {
        fprintf(stderr, "consumer: %s found at %s, not under %s\n", rel, path, share);
        return NULL;
    }
    return read_text(path);
}

static int compile_attention(const char *share)
{
    char path[4096];
    char *src = shipped(share, "lib/attention_fwd.tile", path, sizeof path);
    if (!src) return fail("lib/attention_fwd.tile");
    const char *embedded = kiln_lib_source("lang/lib/attention_fwd.tile");
    if (!embedded || strcmp(embedded, src)) return fail("the installed attention program is not the embedded one");
    KilnDefine defs[] = {{"HEAD_DIM", "64"}, {"BLOCK_M", "64"}, {"BLOCK_N", "64"}, {"CAUSAL", "true"},
                         {"PLAIN_SCORES", "true"}};
    KilnCompileOptions o = {.kernel = "attn_fwd_f16", .defines = defs, .ndefines = 5, .arch = "sm_80",
                            .emit = KILN_EMIT_PTX};
    KilnCompileResult r;
    KilnStatus st = kiln_compile(path, src, &o, &r);
    int rc = 0;
    if (st != KILN_OK || !r.output || !strstr(r.output, ".entry attn_fwd_f16")) {
        fprintf(stderr, "consumer: compile %s: %s\n%s", path, kiln_status_name(st), r.diagnostics ? r.diagnostics : "");
        rc = 1;
    } else {
        printf("compiled %s to PTX (%zu bytes, kernel %s)\n", path, r.output_size, r.kernels[0].name);
    }
    kiln_compile_result_free(&r);
    free(src);
    return rc;
}

static int run_vec_add(const char *share)
{
    char path[4096];
    char *src = shipped(share, "examples/vec_add.tile", path, sizeof path);
    if (!src) return fail("examples/vec_add.tile");
    enum { N = 3000 };
    static float x[N], y[N], z[N];
    for (int i = 0; i < N; i++) x[i] = kiln_f16_to_f32(kiln_f32_to_f16((float)i / 7.0f)), y[i] = 2.0f;
    KilnHostArg a[4] = {kiln_host_buf(x, sizeof x, KILN_HOST_IN), kiln_host_buf(y, sizeof y, KILN_HOST_IN),
                        kiln_host_buf(z, sizeof z, KILN_HOST_OUT), kiln_host_scalar(kiln_arg_i32(N))};
    KilnCompileOptions o = {.kernel = "vec_add"};
    int grid[3] = {(N + 1023) / 1024, 1, 1};
    KilnStatus st = kiln_run_cpu(path, src, &o, grid, a, 4);
    free(src);
    if (st != KILN_OK) return fail("kiln_run_cpu");
    for (int i = 0; i < N; i++)
        if (z[i] != x[i] + 2.0f) {
            fprintf(stderr, "consumer: z[%d] = %g, want %g\n", i, z[i], x[i] + 2.0f);
            return 1;
        }
    printf("ran vec_add on the CPU interpreter: %d sums right\n", N);
    return 0;
}

/* A variant in lib/variants/, found in the prefix, is the embedded copy. */
static int find_variant(const char *share)
{
    char path[4096];
    char *src = shipped(share, "lib/variants/alibi.tile", path, sizeof path);
    if (!src) return fail("lib/variants/alibi.tile");
    const char *embedded = kiln_lib_source("lang/lib/variants/alibi.tile");
    int rc = !embedded || strcmp(embedded, src);
    if (rc) fprintf(stderr, "consumer: the installed %s is not the embedded lang/lib/variants/alibi.tile\n", path);
    else printf("found the variant %s\n", path);
    free(src);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: consumer PREFIX/share/kiln\n");
        return 2;
    }
    printf("Kiln %s\n", kiln_version());
    if (compile_attention(argv[1]) || find_variant(argv[1]) || run_vec_add(argv[1])) return 1;
    KilnDevice *dev = NULL;
    KilnStatus st = kiln_init(&dev, 0);
    if (st == KILN_OK) {
        KilnDeviceInfo info;
        if (kiln_device_info(dev, &info) == KILN_OK) printf("GPU: %s (%s)\n", info.name, info.arch);
        kiln_shutdown(dev);
    } else if (st == KILN_ERR_NO_DRIVER || st == KILN_ERR_NO_DEVICE) {
        printf("no GPU: %s: %s\n", kiln_status_name(st), kiln_last_error());
    } else {
        return fail("kiln_init");
    }
    return 0;
}
