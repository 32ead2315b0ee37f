/* test_e2e_hints.c — divisibility hints through the whole pipeline
 * (kiln_compile, KilnCompileOptions.hints = `kiln --assume`):
 *   - examples/vec_add.tile with n, X, Y, Z hinted to 16 uses 16-byte
 *     accesses (ld.global.v4 / st.global.v4); without hints, or with only
 *     the mask or only the pointers known, it uses none (a masked vector
 *     needs n % 4 == 0 and an aligned base);
 *   - an aligned base plus an odd offset (X + 1) is never vectorised;
 *   - the hinted kernel is accepted by ptxas (skipped without ptxas);
 *   - equals-one hints (`--assume stride_ak==1`): examples/matmul.tile with
 *     its unit strides known (and the other sizes, strides and pointers
 *     16-divisible, as the runtime's launch key gives for row-major
 *     operands) pipelines its dot operands with cp.async on sm_80 and
 *     sm_90a, and ptxas accepts it; without the ==1 hints, or with only
 *     the divisibility ones, there is no cp.async;
 *   - the specialised matmul (the ==1 hints, with and without the others)
 *     and the generic one give bit-identical C on the interpreter for the
 *     same random row-major inputs with ragged sizes, both close to a
 *     float64 reference.
 */
#include "tests/testutil.h"
#include "tests/ptx_util.h"
#include "kiln.h"
#include "compiler/driver/driver.h"
#include "compiler/interp/interp.h"
#include "compiler/support/support.h"

#include <math.h>
#include <string.h>
#include <unistd.h>

static char *vec_add_src, *matmul_src;

static void load_src(void)
{
    if (!vec_add_src) vec_add_src = sup_read_file_text(tu_src_path("examples/vec_add.tile"), NULL);
    ck_assert_ptr_nonnull(vec_add_src);
    if (!matmul_src) matmul_src = sup_read_file_text(tu_src_path("examples/matmul.tile"), NULL);
    ck_assert_ptr_nonnull(matmul_src);
}

#define MAX_HINTS 16

/* Hints "NAME=DIV" or "NAME==1" (NULL-terminated) into h[] (names in names[]). */
static int parse_hints(const char *const *hints, KilnParamHint h[MAX_HINTS], char names[MAX_HINTS][32])
{
    int nh = 0;
    for (; hints && hints[nh]; nh++) {
        ck_assert_int_lt(nh, MAX_HINTS);
        const char *eq = strchr(hints[nh], '=');
        snprintf(names[nh], sizeof names[nh], "%.*s", (int)(eq - hints[nh]), hints[nh]);
        h[nh].name = names[nh];
        h[nh].equals_one = eq[1] == '=';
        h[nh].divisibility = h[nh].equals_one ? 1 : atoi(eq + 1);
    }
    return nh;
}

/* Compile `src` to `emit` with hints (see parse_hints); the caller frees the
 * result. */
static void compile(const char *src, const char *const *hints, KilnEmit emit, const char *arch,
                    KilnCompileResult *r)
{
    KilnParamHint h[MAX_HINTS];
    char names[MAX_HINTS][32];
    int nh = parse_hints(hints, h, names);
    KilnCompileOptions o;
    memset(&o, 0, sizeof o);
    o.arch = arch;
    o.emit = emit;
    o.hints = h;
    o.nhints = nh;
    KilnStatus st = kiln_compile("t.tile", src, &o, r);
    ck_assert_msg(st == KILN_OK, "%s\n%s", kiln_status_name(st), r->diagnostics ? r->diagnostics : "");
}

START_TEST(vec_add_v4_with_hints)
{
    load_src();
    const char *h[] = {"n=16", "X=16", "Y=16", "Z=16", NULL};
    KilnCompileResult r;
    compile(vec_add_src, h, KILN_EMIT_PTX, "sm_80", &r);
    /* BLOCK = 1024 with 4 warps: 8 elements per thread, two 16-byte loads per operand. */
    ck_assert_msg(pu_count(r.output, "ld.global.v4.b32") == 4, "expected 4 ld.global.v4.b32:\n%s", r.output);
    ck_assert_msg(pu_count(r.output, "st.global.v4.b32") == 2, "expected 2 st.global.v4.b32:\n%s", r.output);
    kiln_compile_result_free(&r);
}
END_TEST

START_TEST(vec_add_scalar_without_hints)
{
    load_src();
    static const char *const none[] = {NULL};
    static const char *const only_n[] = {"n=16", NULL};
    static const char *const only_ptrs[] = {"X=16", "Y=16", "Z=16", NULL};
    static const char *const n_and_x[] = {"n=16", "X=16", NULL};   /* Y, Z element-aligned */
    const char *const *cases[] = {none, only_n, only_ptrs};
    for (int i = 0; i < 3; i++) {
        KilnCompileResult r;
        compile(vec_add_src, cases[i], KILN_EMIT_PTX, "sm_80", &r);
        ck_assert_msg(!strstr(r.output, ".v4") && !strstr(r.output, ".v2"), "case %d: vector access:\n%s", i,
                      r.output);
        ck_assert_int_gt(pu_count(r.output, "ld.global.b32"), 0);
        kiln_compile_result_free(&r);
    }
    /* X's loads may be vectorised; Y's and Z's may not. */
    KilnCompileResult r;
    compile(vec_add_src, n_and_x, KILN_EMIT_PTX, "sm_80", &r);
    ck_assert_msg(pu_count(r.output, "ld.global.v4.b32") == 2, "expected X's 2 vector loads only:\n%s", r.output);
    ck_assert_int_eq(pu_count(r.output, "st.global.v4"), 0);
    kiln_compile_result_free(&r);
}
END_TEST

START_TEST(offset_base_not_vectorised)
{
    /* X is 16-byte aligned, but X + 1 is not: no 16-byte access may be used. */
    static const char *const src =
        "kernel shifted(X: *f32, Z: *f32) {\n"
        "    let offs = program_id(0) * 512 + arange(512);\n"
        "    store(Z + offs, load(X + 1 + offs));\n"
        "}\n";
    static const char *const h[] = {"X=16", "Z=16", NULL};
    KilnCompileResult r;
    compile(src, h, KILN_EMIT_PTX, "sm_80", &r);
    ck_assert_msg(pu_count(r.output, "st.global.v4") > 0, "Z's stores should be vectorised:\n%s", r.output);
    ck_assert_msg(!strstr(r.output, "ld.global.v4") && !strstr(r.output, "ld.global.nc.v4") &&
                      !strstr(r.output, "ld.global.v2") && !strstr(r.output, "ld.global.nc.v2"),
                  "loads from X + 1 must stay scalar:\n%s", r.output);
    kiln_compile_result_free(&r);
    /* Without hints even the unmasked accesses stay scalar (X may be X' + 1). */
    compile(src, NULL, KILN_EMIT_PTX, "sm_80", &r);
    ck_assert_msg(!strstr(r.output, ".v4") && !strstr(r.output, ".v2"), "vector access:\n%s", r.output);
    kiln_compile_result_free(&r);
}
END_TEST

START_TEST(hinted_kernel_passes_ptxas)
{
    load_src();
    const char *h[] = {"n=16", "X=16", "Y=16", "Z=16", NULL};
    const char *arch[] = {"sm_80", "sm_90a"};
    for (int i = 0; i < 2; i++) {
        KilnCompileResult r;
        compile(vec_add_src, h, KILN_EMIT_CUBIN, arch[i], &r);
        ck_assert_int_gt((int)r.output_size, 4);
        ck_assert(memcmp(r.output, "\177ELF", 4) == 0);
        kiln_compile_result_free(&r);
    }
}
END_TEST

/* ---- equals-one hints: examples/matmul.tile ---- */

/* What the runtime's launch key says for row-major A [M, K], B [K, N], C [M, N]
 * from kiln_malloc with M, N, K multiples of 16: the unit strides are 1, every
 * other integer and pointer a multiple of 16. */
static const char *const matmul_full[] = {
    "stride_ak==1", "stride_bn==1", "stride_cn==1", "M=16", "N=16", "K=16", "stride_am=16", "stride_bk=16",
    "stride_cm=16", "A=16", "B=16", "C=16", NULL};
static const char *const matmul_div_only[] = {
    "M=16", "N=16", "K=16", "stride_am=16", "stride_bk=16", "stride_cm=16", "A=16", "B=16", "C=16", NULL};
static const char *const matmul_ones_only[] = {"stride_ak==1", "stride_bn==1", "stride_cn==1", NULL};

START_TEST(matmul_unit_strides_pipeline_with_cp_async)
{
    load_src();
    const char *arch[] = {"sm_80", "sm_90a"};
    for (int i = 0; i < 2; i++) {
        KilnCompileResult r;
        compile(matmul_src, matmul_full, KILN_EMIT_PTX, arch[i], &r);
        int n = pu_count(r.output, "cp.async");
        ck_assert_msg(n > 0, "%s: no cp.async with stride_ak==1, stride_bn==1:\n%s", arch[i], r.output);
        ck_assert_msg(pu_count(r.output, "mma.sync") > 0 && pu_count(r.output, "ldmatrix") > 0, "%s: no mma/ldmatrix",
                      arch[i]);
        kiln_compile_result_free(&r);
        /* the generic kernel, and the one with only divisibility facts, cannot pipeline:
         * a runtime inner stride gives no contiguity */
        const char *const *without[] = {NULL, matmul_div_only};
        for (int w = 0; w < 2; w++) {
            compile(matmul_src, without[w], KILN_EMIT_PTX, arch[i], &r);
            ck_assert_msg(pu_count(r.output, "cp.async") == 0, "%s case %d: unexpected cp.async", arch[i], w);
            ck_assert_int_gt(pu_count(r.output, "mma.sync"), 0);
            kiln_compile_result_free(&r);
        }
    }
}
END_TEST

START_TEST(matmul_unit_strides_pass_ptxas)
{
    load_src();
    const char *arch[] = {"sm_80", "sm_90a"};
    for (int i = 0; i < 2; i++) {
        KilnCompileResult r;
        compile(matmul_src, matmul_full, KILN_EMIT_CUBIN, arch[i], &r);
        ck_assert_int_gt((int)r.output_size, 4);
        ck_assert(memcmp(r.output, "\177ELF", 4) == 0);
        kiln_compile_result_free(&r);
    }
}
END_TEST

/* Run matmul (compiled with `hints` through kiln_compile_ir: sema and the
 * target-independent passes) on the interpreter: row-major A [M, K] and
 * B [K, N] (f16 bits), C [M, N] f32, poisoned first. */
static void run_matmul_interp(const char *const *hints, int M, int N, int K, const uint16_t *A, const uint16_t *B,
                              float *C)
{
    KilnParamHint h[MAX_HINTS];
    char names[MAX_HINTS][32];
    KilnCompileOptions o;
    memset(&o, 0, sizeof o);
    o.emit = KILN_EMIT_IR;
    o.hints = h;
    o.nhints = parse_hints(hints, h, names);
    Arena arena;
    arena_init(&arena);
    Diag d;
    diag_init(&d, "examples/matmul.tile", matmul_src);
    IrModule *m = NULL;
    StrBuf out, dumps, err;
    sb_init(&out);
    sb_init(&dumps);
    sb_init(&err);
    KilnStatus st = kiln_compile_ir(&arena, &d, matmul_src, &o, &m, &out, &dumps);
    ck_assert_msg(st == KILN_OK && m && m->nfuncs == 1, "%s", d.out.data ? d.out.data : "");
    const IrFunc *f = m->funcs[0];
    ck_assert_int_eq(f->nparams, 12);   /* the launch ABI is the generic kernel's */
    /* A, B, C, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn */
    InterpArg a[12];
    memset(a, 0, sizeof a);
    a[0].ptr = (void *)A;
    a[1].ptr = (void *)B;
    a[2].ptr = C;
    int64_t ints[9] = {M, N, K, K, 1, N, 1, N, 1};
    for (int i = 0; i < 9; i++) a[3 + i].i = ints[i];
    for (size_t i = 0; i < (size_t)M * N; i++) C[i] = NAN;
    InterpBuffer bufs[3] = {{(void *)A, (size_t)M * K * 2, "A"}, {(void *)B, (size_t)K * N * 2, "B"},
                            {C, (size_t)M * N * 4, "C"}};
    InterpOptions io = {{(M + 63) / 64, (N + 63) / 64, 1}, bufs, 3};
    int rc = interp_run(f, a, 12, &io, &err);
    ck_assert_msg(rc == 0, "interp: %s", err.data ? err.data : "");
    sb_free(&out);
    sb_free(&dumps);
    sb_free(&err);
    diag_free(&d);
    arena_free(&arena);
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static double rnd_unit(void) /* in [-1, 1), never a run of zeros */
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) / (double)(1ull << 53) * 2.0 - 1.0;
}

/* Ragged sizes (not multiples of the 64 x 64 x 32 blocks): the generic
 * kernel, the one with the ==1 hints only, and the one with every hint the
 * runtime would give (sizes multiples of 16 for that one) write the same C,
 * bit for bit, and C is the product (float64 reference). */
START_TEST(matmul_specialised_matches_generic_on_interp)
{
    load_src();
    static const int sizes[2][3] = {{37, 45, 50}, {80, 112, 48}};
    for (int t = 0; t < 2; t++) {
        int M = sizes[t][0], N = sizes[t][1], K = sizes[t][2];
        uint16_t *A = malloc((size_t)M * K * 2), *B = malloc((size_t)K * N * 2);
        float *C0 = malloc((size_t)M * N * 4), *C1 = malloc((size_t)M * N * 4);
        ck_assert(A && B && C0 && C1);
        for (int i = 0; i < M * K; i++) A[i] = interp_f64_to_f16(rnd_unit());
        for (int i = 0; i < K * N; i++) B[i] = interp_f64_to_f16(rnd_unit());
        run_matmul_interp(NULL, M, N, K, A, B, C0);
        const char *const *spec = t == 0 ? matmul_ones_only : matmul_full;  /* t 1: sizes % 16 == 0 */
        run_matmul_interp(spec, M, N, K, A, B, C1);
        ck_assert_msg(memcmp(C0, C1, (size_t)M * N * 4) == 0, "sizes %dx%dx%d: specialised C differs", M, N, K);
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                double ref = 0;
                for (int k = 0; k < K; k++)
                    ref += (double)interp_f16_to_f32(A[i * K + k]) * (double)interp_f16_to_f32(B[k * N + j]);
                ck_assert_msg(fabs(C0[i * N + j] - ref) <= 1e-4 * (1 + fabs(ref)), "C[%d][%d] = %g, want %g", i,
                              j, C0[i * N + j], ref);
            }
        free(A);
        free(B);
        free(C0);
        free(C1);
    }
}
END_TEST

static Suite *hints_suite(void)
{
    Suite *s = suite_create("codegen_hints");
    TCase *tc = tcase_create("all");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, vec_add_v4_with_hints);
    tcase_add_test(tc, vec_add_scalar_without_hints);
    tcase_add_test(tc, offset_base_not_vectorised);
    tcase_add_test(tc, matmul_unit_strides_pipeline_with_cp_async);
    tcase_add_test(tc, matmul_specialised_matches_generic_on_interp);
    suite_add_tcase(s, tc);
    TCase *pt = pu_ptxas_tcase(s, 120);
    tcase_add_test(pt, hinted_kernel_passes_ptxas);
    tcase_add_test(pt, matmul_unit_strides_pass_ptxas);
    return s;
}

PU_MAIN(hints_suite)
