/* test_e2e_tutorial.c — keeps docs/tutorial.md true.
 *
 * The tutorial's programs live in docs/snippets/ and the page quotes them
 * verbatim; this test checks that it still does, and that what the page says
 * about them holds:
 *   - every snippet compiles through kiln_compile (Tile IR; PTX for sm_80 where it
 *     has a kernel), and the IR the page shows for vec_add is what the compiler prints;
 *   - the matmul's f16 dot becomes mma.sync + ldmatrix, and cp.async once the
 *     operands are known 16-byte aligned (--assume), as section 3 says;
 *   - vec_add and softmax run on the interpreter against C references on random
 *     inputs, ragged sizes and NaN-poisoned outputs (whose padding must stay NaN);
 *   - the prefix-LM attention variant (a hooks file importing the programs) run
 *     through kiln_attention_fwd_cpu, as the page's C lines call it, matches a
 *     float64 reference with the same mask and soft cap;
 *   - the diagnostics of docs/snippets/wrong.tile are exactly wrong.expected,
 *     which the page quotes;
 *   - docs/snippets/host.c (section 5) passes `-fsyntax-only` with the build's C
 *     compiler (KILN_CC, from ctest).
 * Every `$ kiln ...` command on the page still printing what the page shows is
 * the ctest entry docs/tutorial_commands (tests/docs/check_tutorial.py with the
 * kiln of this build; skipped, exit 77, where there is no python3).
 */
#include "attention/attn_harness.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

/* ---- files ---- */

static char *text(const char *rel)
{
    char *s = sup_read_file_text(tu_src_path(rel), NULL);
    ck_assert_msg(s != NULL, "cannot read %s", rel);
    return s;
}

/* The tutorial must quote `rel` verbatim (its whole text). */
static void assert_quoted(const char *rel)
{
    char *page = text("docs/tutorial.md"), *snip = text(rel);
    ck_assert_msg(strstr(page, snip) != NULL, "docs/tutorial.md does not quote %s verbatim", rel);
    free(page);
    free(snip);
}

/* ---- compiling through the public API ---- */

static char *compile_out(const char *rel, const char *src, const char *kernel, KilnEmit emit,
                         const KilnDefine *defs, int ndefs, const KilnParamHint *hints, int nhints)
{
    KilnCompileOptions o = {.kernel = kernel, .defines = defs, .ndefines = ndefs, .emit = emit,
                            .arch = "sm_80", .hints = hints, .nhints = nhints};
    KilnCompileResult r;
    memset(&r, 0, sizeof r);
    KilnStatus st = kiln_compile(rel, src, &o, &r);
    ck_assert_msg(st == KILN_OK, "%s (%s): %s\n%s", rel, kernel ? kernel : "-", kiln_status_name(st),
                  r.diagnostics ? r.diagnostics : kiln_last_error());
    char *out = malloc(r.output_size + 1);
    memcpy(out, r.output, r.output_size);
    out[r.output_size] = 0;
    kiln_compile_result_free(&r);
    return out;
}

static int count(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle)) n++;
    return n;
}

START_TEST(snippets_compile_to_ir_and_ptx)
{
    static const struct { const char *file, *kernel; } k[] = {
        {"docs/snippets/vec_add.tile", "vec_add"},
        {"docs/snippets/softmax.tile", "softmax"},
        {"docs/snippets/matmul.tile", "matmul"},
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        char *src = text(k[i].file);
        char *ir = compile_out(k[i].file, src, NULL, KILN_EMIT_IR, NULL, 0, NULL, 0);
        char want[64];
        snprintf(want, sizeof want, "kernel @%s(", k[i].kernel);
        ck_assert_msg(strstr(ir, want), "%s: IR lacks '%s'", k[i].file, want);
        char *ptx = compile_out(k[i].file, src, NULL, KILN_EMIT_PTX, NULL, 0, NULL, 0);
        snprintf(want, sizeof want, ".entry %s(", k[i].kernel);
        ck_assert_msg(strstr(ptx, want), "%s: PTX lacks '%s'", k[i].file, want);
        ck_assert_msg(strstr(ptx, ".target sm_80"), "%s: PTX not for sm_80", k[i].file);
        free(ir);
        free(ptx);
        free(src);
        assert_quoted(k[i].file);
    }
}
END_TEST

/* Section 1 shows `kiln compile docs/snippets/vec_add.tile --emit ir`: the page must
 * hold exactly what the compiler prints. */
START_TEST(vec_add_ir_on_the_page)
{
    char *src = text("docs/snippets/vec_add.tile");
    char *ir = compile_out("docs/snippets/vec_add.tile", src, NULL, KILN_EMIT_IR, NULL, 0, NULL, 0);
    char *page = text("docs/tutorial.md");
    ck_assert_msg(strstr(page, ir) != NULL, "the vec_add IR on the page is stale; the compiler prints:\n%s", ir);
    free(page);
    free(ir);
    free(src);
}
END_TEST

/* Section 3: the f16 dot runs on tensor cores; cp.async needs known alignment. */
START_TEST(matmul_tensor_cores)
{
    const char *f = "docs/snippets/matmul.tile";
    char *src = text(f);
    char *plain = compile_out(f, src, NULL, KILN_EMIT_PTX, NULL, 0, NULL, 0);
    ck_assert_int_gt(count(plain, "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"), 0);
    ck_assert_int_gt(count(plain, "ldmatrix.sync.aligned"), 0);
    ck_assert_int_eq(count(plain, "cp.async"), 0);     /* X + 1 is legal: no 16-byte copies */
    KilnParamHint h[] = {{"A", 16, 0}, {"B", 16, 0}, {"K", 16, 0}, {"N", 16, 0}};
    char *aligned = compile_out(f, src, NULL, KILN_EMIT_PTX, NULL, 0, h, 4);
    ck_assert_int_gt(count(aligned, "mma.sync.aligned.m16n8k16"), 0);
    ck_assert_int_gt(count(aligned, "ldmatrix.sync.aligned"), 0);
    ck_assert_int_gt(count(aligned, "cp.async.cg.shared.global"), 0);
    ck_assert_msg(strstr(aligned, "cp.async.wait_group 1;"), "3 stages wait for all but 1 group");
    /* --num-stages 1 turns pipelining off. */
    KilnCompileOptions o = {.emit = KILN_EMIT_PTX, .arch = "sm_80", .hints = h, .nhints = 4, .num_stages = 1};
    KilnCompileResult r;
    memset(&r, 0, sizeof r);
    ck_assert_int_eq(kiln_compile(f, src, &o, &r), KILN_OK);
    ck_assert_int_eq(count(r.output, "cp.async"), 0);
    ck_assert_ptr_nonnull(r.stats);
    ck_assert_msg(strstr(r.stats, "stages: 1"), "stats: %s", r.stats);
    kiln_compile_result_free(&r);
    free(plain);
    free(aligned);
    free(src);
}
END_TEST

/* ---- the interpreter ---- */

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static float frand(void) /* uniform in [-1, 1) */
{
    g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
    return (float)((double)(g_rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static IrFunc *compile_ir(Arena *a, const char *rel, const char *src, const KilnDefine *defs, int ndefs)
{
    KilnCompileOptions o = {.defines = defs, .ndefines = ndefs, .emit = KILN_EMIT_IR};
    Diag d;
    diag_init(&d, rel, src);
    StrBuf out, dumps;
    sb_init(&out);
    sb_init(&dumps);
    IrModule *m = NULL;
    KilnStatus st = kiln_compile_ir(a, &d, src, &o, &m, &out, &dumps);
    ck_assert_msg(st == KILN_OK && m && m->nfuncs == 1, "%s: %s", rel, d.out.data ? d.out.data : "");
    sb_free(&out);
    sb_free(&dumps);
    diag_free(&d);
    return m->funcs[0];
}

static void run(const IrFunc *f, const InterpArg *args, int nargs, int grid, const InterpBuffer *bufs, int nb)
{
    InterpOptions io = {.grid = {grid, 1, 1}, .buffers = bufs, .nbuffers = nb};
    StrBuf err;
    sb_init(&err);
    int rc = interp_run(f, args, nargs, &io, &err);
    ck_assert_msg(rc == 0, "%s: %s", f->name, err.data ? err.data : "");
    sb_free(&err);
}

START_TEST(vec_add_on_the_interpreter)
{
    static const int ns[] = {1000, 1, 255, 257, 777};
    Arena a;
    arena_init(&a);
    char *src = text("docs/snippets/vec_add.tile");
    IrFunc *f = compile_ir(&a, "vec_add.tile", src, NULL, 0);   /* BLOCK = 256 */
    for (size_t t = 0; t < sizeof ns / sizeof ns[0]; t++) {
        int n = ns[t], grid = (n + 255) / 256, cap = grid * 256 + 8;
        float *x = malloc(cap * sizeof *x), *y = malloc(cap * sizeof *y), *z = malloc(cap * sizeof *z);
        for (int i = 0; i < cap; i++) x[i] = frand(), y[i] = frand(), z[i] = NAN;
        InterpArg args[4] = {{.ptr = x}, {.ptr = y}, {.ptr = z}, {.i = n}};
        InterpBuffer bufs[3] = {{x, cap * sizeof *x, "X"}, {y, cap * sizeof *y, "Y"}, {z, cap * sizeof *z, "Z"}};
        run(f, args, 4, grid, bufs, 3);
        for (int i = 0; i < n; i++) ck_assert_msg(z[i] == x[i] + y[i], "n %d: Z[%d] = %g, want %g", n, i, z[i], x[i] + y[i]);
        for (int i = n; i < cap; i++) ck_assert_msg(isnan(z[i]), "n %d: Z[%d] past n was written", n, i);
        free(x), free(y), free(z);
    }
    free(src);
    arena_free(&a);
}
END_TEST

/* Y = softmax of each row, in double; rows of n_cols at pitch `stride`. */
static void softmax_ref(const float *x, double *y, int rows, int cols, int stride)
{
    for (int r = 0; r < rows; r++) {
        double m = -INFINITY, s = 0;
        for (int c = 0; c < cols; c++) m = fmax(m, x[r * stride + c]);
        for (int c = 0; c < cols; c++) s += exp(x[r * stride + c] - m);
        for (int c = 0; c < cols; c++) y[r * stride + c] = exp(x[r * stride + c] - m) / s;
    }
}

START_TEST(softmax_on_the_interpreter)
{
    static const struct { const char *rows_d, *block_d; int rows, cols, stride; } cs[] = {
        {"4", "1024", 7, 781, 800},   /* defaults; last program has a masked row */
        {"2", "128", 5, 100, 103},
        {"1", "64", 3, 1, 1},
        {"8", "256", 9, 256, 256},    /* full-width rows */
    };
    char *src = text("docs/snippets/softmax.tile");
    for (size_t t = 0; t < sizeof cs / sizeof cs[0]; t++) {
        Arena a;
        arena_init(&a);
        KilnDefine defs[] = {{"ROWS", cs[t].rows_d}, {"BLOCK", cs[t].block_d}};
        IrFunc *f = compile_ir(&a, "softmax.tile", src, defs, 2);
        int rows = cs[t].rows, cols = cs[t].cols, stride = cs[t].stride, per = atoi(cs[t].rows_d);
        int grid = (rows + per - 1) / per;
        size_t n = (size_t)rows * stride;
        float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
        double *ref = malloc(n * sizeof *ref);
        for (size_t i = 0; i < n; i++) x[i] = 4 * frand(), y[i] = NAN;
        softmax_ref(x, ref, rows, cols, stride);
        InterpArg args[5] = {{.ptr = x}, {.ptr = y}, {.i = rows}, {.i = cols}, {.i = stride}};
        InterpBuffer bufs[2] = {{x, n * sizeof *x, "X"}, {y, n * sizeof *y, "Y"}};
        run(f, args, 5, grid, bufs, 2);
        for (int r = 0; r < rows; r++)
            for (int c = 0; c < stride; c++) {
                float v = y[r * stride + c];
                if (c >= cols) {
                    ck_assert_msg(isnan(v), "case %zu: padding Y[%d, %d] was written", t, r, c);
                    continue;
                }
                double w = ref[r * stride + c];
                ck_assert_msg(fabs(v - w) <= 1e-6 + 1e-5 * w, "case %zu: Y[%d, %d] = %.8g, want %.8g", t, r, c, v, w);
            }
        free(x), free(y), free(ref);
        arena_free(&a);
    }
    free(src);
}
END_TEST

/* ---- section 4: the prefix-LM variant with a soft cap ---- */

static double ref_softcap20(double s, int b, int h, int i, int j, const void *ctx)
{
    (void)b, (void)h, (void)i, (void)j, (void)ctx;
    return 20.0 * tanh(s / 20.0);
}
static int ref_prefix16(int b, int h, int i, int j, const void *ctx)
{
    (void)b, (void)h, (void)ctx;
    return j < 16 || j <= i;
}
static void hook_prefix_lm(AttnProblem *p)
{
    p->score_mod = ref_softcap20;
    p->mask_mod = ref_prefix16;
}

/* The tutorial's call: kiln_attention_fwd_cpu with the variant file and prefix = 16. */
static void run_variant(const Case *c, Run *r, uint64_t seed)
{
    KilnVariantArg args[] = {{"prefix", kiln_arg_i32(16), 0}};
    KilnAttentionVariant var = {.path = "docs/snippets/prefix_lm.tile", .args = args, .nargs = 1};
    char *src = text(var.path);   /* the file as the page shows it, named as on the page */
    var.source = src;
    setup(r, c, seed);
    KilnAttentionParams p = {.dtype = c->dtype == ATTN_F16 ? KILN_F16 : KILN_BF16, .batch = c->batch,
                             .heads_q = c->hq, .heads_kv = c->hkv, .seqlen_q = c->sq, .seqlen_k = c->sk,
                             .head_dim = c->d, .q = (uintptr_t)r->q, .k = (uintptr_t)r->k, .v = (uintptr_t)r->v,
                             .o = (uintptr_t)r->o, .lse = (uintptr_t)r->lse, .softmax_scale = (float)r->p.scale,
                             .block_m = c->block_m, .block_n = c->block_n, .variant = &var};
    memcpy(p.q_stride, r->p.q_stride, sizeof p.q_stride);
    memcpy(p.k_stride, r->p.k_stride, sizeof p.k_stride);
    memcpy(p.v_stride, r->p.v_stride, sizeof p.v_stride);
    memcpy(p.o_stride, r->p.o_stride, sizeof p.o_stride);
    run_host_sizes(r, &p);
    KilnStatus st = kiln_attention_fwd_cpu(&p);
    ck_assert_msg(st == KILN_OK, "%s: %s", c->what, kiln_last_error());
    free(src);
}

START_TEST(attention_variant_on_the_interpreter)
{
    /* Scaled up so the cap bites: scores reach |s| ~ 10 with scale 1. */
    Case cs[] = {
        {"prefix-LM f16 d32 70x70", ATTN_F16, 1, 2, 2, 70, 70, 32, 0, ATTN_BHSD, 1.0, 16, 16, 0},
        {"prefix-LM bf16 d64 40x40 bshd", ATTN_BF16, 2, 2, 1, 40, 40, 64, 0, ATTN_BSHD, 0, 32, 16, 0},
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        Run r;
        run_variant(&cs[i], &r, 100 + i);
        hook_prefix_lm(&r.p);
        Verdict v = judge(&r);
        ck_assert_msg(v.e.nonfinite == 0 && v.e.o_max_abs <= v.bound && v.e.lse_max_rel <= 1e-4 && v.empty_bad == 0,
                      "%s: err %.3g bound %.3g lse %.3g", cs[i].what, v.e.o_max_abs, v.bound, v.e.lse_max_rel);
        teardown(&r);
    }
    /* The hooks matter: without the mask, row 0 would see every key. */
    Run r;
    run_variant(&cs[0], &r, 7);
    Verdict plain = judge(&r);       /* r.p has no hooks: the unmodified reference */
    ck_assert_msg(plain.e.o_max_abs > 1e-2, "the variant computes plain attention (err %.3g)", plain.e.o_max_abs);
    teardown(&r);
    /* It compiles for the GPU too (tensor cores on sm_80): the page's command. */
    char *src = text("docs/snippets/prefix_lm.tile");
    KilnDefine d[] = {{"HEAD_DIM", "128"}};
    char *ptx = compile_out("docs/snippets/prefix_lm.tile", src, "attn_fwd_f16", KILN_EMIT_PTX, d, 1, NULL, 0);
    ck_assert_int_gt(count(ptx, "mma.sync.aligned"), 0);
    ck_assert_int_gt(count(ptx, "tanh.approx.f32"), 0);
    free(ptx);
    free(src);
    assert_quoted("docs/snippets/prefix_lm.tile");
}
END_TEST

/* ---- section 6: diagnostics ---- */

START_TEST(diagnostics_match_the_page)
{
    const char *rel = "docs/snippets/wrong.tile";
    char *src = text(rel), *want = text("docs/snippets/wrong.expected");
    KilnCompileOptions o = {.emit = KILN_EMIT_IR};
    KilnCompileResult r;
    memset(&r, 0, sizeof r);
    ck_assert_int_eq(kiln_compile(rel, src, &o, &r), KILN_ERR_COMPILE);
    ck_assert_ptr_nonnull(r.diagnostics);
    ck_assert_msg(strcmp(r.diagnostics, want) == 0, "diagnostics changed; the compiler now prints:\n%s", r.diagnostics);
    kiln_compile_result_free(&r);
    assert_quoted("docs/snippets/wrong.expected");
    assert_quoted(rel);
    free(src), free(want);
}
END_TEST

/* ---- section 5: the host program ---- */

/* With the C compiler of the build (KILN_CC, set by ctest), else `cc`. */
START_TEST(host_program_compiles)
{
    assert_quoted("docs/snippets/host.c");
    const char *cc = getenv("KILN_CC");
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' -std=c17 -Wall -Wextra -Werror -fsyntax-only -I'%s' '%s'", cc && *cc ? cc : "cc",
             tu_src_path("include/kiln"), tu_src_path("docs/snippets/host.c"));
    ck_assert_msg(system(cmd) == 0, "docs/snippets/host.c does not compile: %s", cmd);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("tutorial");
    TCase *tc = tcase_create("tutorial");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, snippets_compile_to_ir_and_ptx);
    tcase_add_test(tc, vec_add_ir_on_the_page);
    tcase_add_test(tc, matmul_tensor_cores);
    tcase_add_test(tc, vec_add_on_the_interpreter);
    tcase_add_test(tc, softmax_on_the_interpreter);
    tcase_add_test(tc, attention_variant_on_the_interpreter);
    tcase_add_test(tc, diagnostics_match_the_page);
    tcase_add_test(tc, host_program_compiles);
    suite_add_tcase(s, tc);
    return s;
}

TU_MAIN(suite)
