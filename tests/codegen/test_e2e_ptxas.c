/* test_e2e_ptxas.c — every kernel of examples/ and lang/lib/ (.tile files),
 * compiled through the whole pipeline for sm_80 (sm_89 for the FP8 kernels,
 * which sm_80 refuses) and sm_90a, must give PTX that
 * ptxas accepts (a cubin that is an ELF file), and GPU IR in which every tile
 * value has a layout. Without ptxas the whole test is skipped (exit 77). */
#include "tests/testutil.h"
#include "tests/ptx_util.h"
#include "kiln.h"
#include "compiler/support/support.h"

#include <dirent.h>
#include <string.h>
#include <unistd.h>

static int ncompiled;

static void compile_kernel(const char *path, const char *src, const char *kernel, const char *arch, KilnEmit emit)
{
    KilnCompileOptions o;
    memset(&o, 0, sizeof o);
    o.kernel = kernel;
    o.arch = arch;
    o.emit = emit;
    KilnCompileResult r;
    KilnStatus st = kiln_compile(path, src, &o, &r);
    ck_assert_msg(st == KILN_OK, "%s -k %s --arch %s: %s\n%s", path, kernel, arch, kiln_status_name(st),
                  r.diagnostics ? r.diagnostics : "");
    if (emit == KILN_EMIT_CUBIN) {
        ck_assert_int_gt((int)r.output_size, 4);
        ck_assert_msg(memcmp(r.output, "\177ELF", 4) == 0, "%s -k %s: cubin is not ELF", path, kernel);
        ncompiled++;
    } else {
        /* Every tile type printed in GPU IR carries its layout: tensor<...xT, #Ln>. */
        for (const char *p = strstr(r.output, "tensor<"); p; p = strstr(p + 1, "tensor<")) {
            const char *nl = strchr(p, '\n');
            const char *lay = strstr(p, ", #L");
            ck_assert_msg(lay && (!nl || lay < nl) && !memchr(p, ' ', (size_t)(lay - p)),
                          "%s -k %s: tile without a layout near '%.60s'", path, kernel, p);
        }
    }
    kiln_compile_result_free(&r);
}

/* sm_80, or sm_89 for a kernel sm_80 refuses for its FP8 (f8e4m3) conversions
 * (attn_fwd_fp8_*: cvt ... e4m3x2 is sm_89's), which must then assemble there. */
static void compile_sm80(const char *path, const char *src, const char *kernel)
{
    KilnCompileOptions o;
    memset(&o, 0, sizeof o);
    o.kernel = kernel;
    o.arch = "sm_80";
    o.emit = KILN_EMIT_PTX;
    KilnCompileResult r;
    KilnStatus st = kiln_compile(path, src, &o, &r);
    bool fp8 = st == KILN_ERR_COMPILE && r.diagnostics && strstr(r.diagnostics, "f8e4m3") &&
               strstr(r.diagnostics, "needs sm_89 or newer");
    kiln_compile_result_free(&r);
    compile_kernel(path, src, kernel, fp8 ? "sm_89" : "sm_80", KILN_EMIT_CUBIN);
}

static void compile_file(const char *path)
{
    size_t n;
    char *src = sup_read_file_text(path, &n);
    ck_assert_msg(src != NULL, "cannot read %s", path);
    KilnCompileOptions o;
    memset(&o, 0, sizeof o);
    o.emit = KILN_EMIT_IR;
    KilnCompileResult r;
    KilnStatus st = kiln_compile(path, src, &o, &r);
    bool no_kernel = (st == KILN_OK && r.nkernels == 0) ||
                     (st == KILN_ERR_COMPILE && r.diagnostics && strstr(r.diagnostics, "has no kernel"));
    if (no_kernel) { /* a library of helpers (attention variants' hooks) */
        kiln_compile_result_free(&r);
        free(src);
        return;
    }
    ck_assert_msg(st == KILN_OK, "%s: %s\n%s", path, kiln_status_name(st), r.diagnostics ? r.diagnostics : "");
    for (int i = 0; i < r.nkernels; i++) {
        const char *k = r.kernels[i].name;
        compile_kernel(path, src, k, "sm_90a", KILN_EMIT_GPU_IR);
        compile_sm80(path, src, k);
        compile_kernel(path, src, k, "sm_90a", KILN_EMIT_CUBIN);
    }
    kiln_compile_result_free(&r);
    free(src);
}

static int compile_dir(const char *rel)
{
    const char *dir = tu_src_path(rel);
    DIR *d = opendir(dir);
    ck_assert_msg(d != NULL, "cannot open %s", dir);
    int files = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l < 6 || strcmp(e->d_name + l - 5, ".tile") != 0) continue;
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        compile_file(path);
        files++;
    }
    closedir(d);
    return files;
}

START_TEST(examples_accepted_by_ptxas)
{
    ncompiled = 0;
    int files = compile_dir("examples");
    ck_assert_int_ge(files, 4); /* vec_add, softmax, layer_norm, matmul at least */
    ck_assert_int_ge(ncompiled, 8);
}
END_TEST

START_TEST(shipped_programs_accepted_by_ptxas)
{
    ncompiled = 0;
    compile_dir("lang/lib");
    compile_dir("examples/attention");
    ck_assert_int_ge(ncompiled, 2);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("codegen_e2e_ptxas");
    TCase *tc = tcase_create("all");
    tcase_set_timeout(tc, 900);
    tcase_add_test(tc, examples_accepted_by_ptxas);
    tcase_add_test(tc, shipped_programs_accepted_by_ptxas);
    suite_add_tcase(s, tc);
    return s;
}

PU_MAIN_PTXAS_ONLY(suite)
