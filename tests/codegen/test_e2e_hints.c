/* test_e2e_hints.c — divisibility hints through the whole pipeline
 * (kiln_compile, KilnCompileOptions.hints = `kiln --assume`):
 *   - examples/vec_add.tile with n, X, Y, Z hinted to 16 uses 16-byte
 *     accesses (ld.global.v4 / st.global.v4); without hints, or with only
 *     the mask or only the pointers known, it uses none (a masked vector
 *     needs n % 4 == 0 and an aligned base);
 *   - an aligned base plus an odd offset (X + 1) is never vectorised;
 *   - the hinted kernel is accepted by ptxas (skipped without ptxas).
 */
#include "tests/testutil.h"
#include "kiln.h"
#include "compiler/support/support.h"

#include <string.h>
#include <unistd.h>

static char *vec_add_src;

static void load_src(void)
{
    if (!vec_add_src) vec_add_src = read_file_text(tu_src_path("examples/vec_add.tile"), NULL);
    ck_assert_ptr_nonnull(vec_add_src);
}

/* Compile `src` to `emit` with hints "NAME=DIV"... (NULL-terminated); the
 * caller frees the result. */
static void compile(const char *src, const char *const *hints, KilnEmit emit, const char *arch,
                    KilnCompileResult *r)
{
    KilnParamHint h[8];
    char names[8][32];
    int nh = 0;
    for (; hints && hints[nh]; nh++) {
        const char *eq = strchr(hints[nh], '=');
        snprintf(names[nh], sizeof names[nh], "%.*s", (int)(eq - hints[nh]), hints[nh]);
        h[nh].name = names[nh];
        h[nh].divisibility = atoi(eq + 1);
    }
    KilnCompileOptions o;
    memset(&o, 0, sizeof o);
    o.arch = arch;
    o.emit = emit;
    o.hints = h;
    o.nhints = nh;
    KilnStatus st = kiln_compile("t.tile", src, &o, r);
    ck_assert_msg(st == KILN_OK, "%s\n%s", kiln_status_name(st), r->diagnostics ? r->diagnostics : "");
}

static int count(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle)) n++;
    return n;
}

START_TEST(vec_add_v4_with_hints)
{
    load_src();
    const char *h[] = {"n=16", "X=16", "Y=16", "Z=16", NULL};
    KilnCompileResult r;
    compile(vec_add_src, h, KILN_EMIT_PTX, "sm_80", &r);
    /* BLOCK = 1024 with 4 warps: 8 elements per thread, two 16-byte loads per operand. */
    ck_assert_msg(count(r.output, "ld.global.v4.b32") == 4, "expected 4 ld.global.v4.b32:\n%s", r.output);
    ck_assert_msg(count(r.output, "st.global.v4.b32") == 2, "expected 2 st.global.v4.b32:\n%s", r.output);
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
        ck_assert_int_gt(count(r.output, "ld.global.b32"), 0);
        kiln_compile_result_free(&r);
    }
    /* X's loads may be vectorised; Y's and Z's may not. */
    KilnCompileResult r;
    compile(vec_add_src, n_and_x, KILN_EMIT_PTX, "sm_80", &r);
    ck_assert_msg(count(r.output, "ld.global.v4.b32") == 2, "expected X's 2 vector loads only:\n%s", r.output);
    ck_assert_int_eq(count(r.output, "st.global.v4"), 0);
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
    ck_assert_msg(count(r.output, "st.global.v4") > 0, "Z's stores should be vectorised:\n%s", r.output);
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

static bool have_ptxas(void)
{
    const char *env = getenv("KILN_PTXAS");
    if (env && *env) return access(env, X_OK) == 0;
    if (access("/usr/local/cuda/bin/ptxas", X_OK) == 0) return true;
    return system("command -v ptxas >/dev/null 2>&1") == 0;
}

START_TEST(hinted_kernel_passes_ptxas)
{
    if (!have_ptxas()) {
        fprintf(stderr, "test_e2e_hints: ptxas not found, cubin check skipped\n");
        return;
    }
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

static Suite *hints_suite(void)
{
    Suite *s = suite_create("codegen_hints");
    TCase *tc = tcase_create("all");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, vec_add_v4_with_hints);
    tcase_add_test(tc, vec_add_scalar_without_hints);
    tcase_add_test(tc, offset_base_not_vectorised);
    tcase_add_test(tc, hinted_kernel_passes_ptxas);
    suite_add_tcase(s, tc);
    return s;
}

TU_MAIN(hints_suite)
