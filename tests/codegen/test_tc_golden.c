/* test_tc_golden.c — golden tests of the GPU passes (docs/tensor_cores.md).
 *
 * tests/codegen/golden/<pass>/<case>.ir is a Tile IR kernel (after the
 * target-independent passes; parameters may carry {div = N}); <case>.expected
 * is the exact GPU IR text cg_compile dumps after that pass
 * (CgOptions.dump_after = <pass>, stage GPU IR, sm_80 unless the case name
 * ends in _sm90). Every folder named after a GPU pass is visited and must
 * hold at least one case. Besides the text, each case is compiled to PTX and
 * accepted (or, for *_toolarge cases, rejected with the SRAM-limit error).
 *
 * KILN_UPDATE_GOLDEN=1 rewrites the expected files (review every change).
 */
#include "tests/testutil.h"
#include "compiler/codegen/codegen.h"
#include "compiler/support/diag.h"

#include "tests/golden.h"

#include <string.h>

static const char *const passes[] = {"accelerate-dot", "layout-assign", "remove-convert", "pipeline", "sram-alloc"};
#define NPASSES 5

static bool ends_with(const char *s, const char *t)
{
    size_t a = strlen(s), b = strlen(t);
    return a >= b && strcmp(s + a - b, t) == 0;
}

/* cg_compile of the one kernel in `path`; false with the reason in err. */
static bool run(const char *path, const char *src, const char *pass, const char *arch, CgStage stage, CgResult *res,
                StrBuf *err)
{
    Arena a;
    arena_init(&a);
    Diag d;
    diag_init(&d, path, src);
    IrModule *m = ir_parse(&a, &d, path, src);
    bool ok = m && m->nfuncs == 1;
    if (!ok) sb_printf(err, "%s: does not parse:\n%s", path, d.out.data ? d.out.data : "");
    memset(res, 0, sizeof *res);
    if (ok) {
        CgOptions o = {.target = tgt_parse(arch), .stage = stage, .dump_after = pass};
        ok = cg_compile(m->funcs[0], &o, res, &d);
        if (!ok) sb_puts(err, d.out.data ? d.out.data : "");
    }
    diag_free(&d);
    arena_free(&a);
    return ok;
}

static void free_res(CgResult *r)
{
    sb_free(&r->out);
    sb_free(&r->dumps);
    sb_free(&r->stats);
}

static void check_case(const char *pass, const char *name, StrBuf *fails, int *nfail)
{
    char path[1024], exp_path[1024];
    snprintf(path, sizeof path, "%s", tu_src_path("tests/codegen/golden"));
    snprintf(path + strlen(path), sizeof path - strlen(path), "/%s/%s.ir", pass, name);
    snprintf(exp_path, sizeof exp_path, "%.*s.expected", (int)(strlen(path) - 3), path);
    size_t len;
    char *src = read_file_text(path, &len);
    if (!src) {
        sb_printf(fails, "%s: cannot read\n", path);
        (*nfail)++;
        return;
    }
    const char *arch = ends_with(name, "_sm90") ? "sm_90a" : "sm_80";
    bool too_large = ends_with(name, "_toolarge");
    CgResult r;
    StrBuf err;
    sb_init(&err);
    /* Diagnostics name the file relative to the source root, as the golden shows it. */
    char rel[512];
    snprintf(rel, sizeof rel, "tests/codegen/golden/%s/%s.ir", pass, name);
    bool ok = run(rel, src, pass, arch, CG_STAGE_GPU_IR, &r, &err);
    if (too_large) {
        /* The dump is the error text: the limit, each buffer, the advice. */
        if (ok || !strstr(err.data ? err.data : "", "shared memory")) {
            sb_printf(fails, "%s: expected the SRAM limit error, got %s\n", path, ok ? "success" : err.data);
            (*nfail)++;
        }
        sb_free(&r.dumps);
        sb_init(&r.dumps);
        sb_puts(&r.dumps, err.data ? err.data : "");
    } else if (!ok) {
        sb_printf(fails, "%s: %s\n", path, err.data ? err.data : "failed");
        (*nfail)++;
        free_res(&r);
        sb_free(&err);
        free(src);
        return;
    }
    const char *got = r.dumps.data ? r.dumps.data : "";
    char what[1100];
    snprintf(what, sizeof what, "%s: GPU IR after %s", path, pass);
    if (!golden_compare(exp_path, got, what, fails)) (*nfail)++;
    free_res(&r);
    sb_free(&err);
    sb_init(&err);
    if (!too_large && !run(rel, src, NULL, arch, CG_STAGE_PTX, &r, &err)) {
        sb_printf(fails, "%s: PTX: %s\n", path, err.data ? err.data : "failed");
        (*nfail)++;
    }
    if (!too_large) free_res(&r);
    sb_free(&err);
    free(src);
}

START_TEST(golden_cases)
{
    StrBuf fails;
    sb_init(&fails);
    int nfail = 0, total = 0;
    for (int p = 0; p < NPASSES; p++) {
        char dir[1024];
        snprintf(dir, sizeof dir, "%s/%s", tu_src_path("tests/codegen/golden"), passes[p]);
        char **names;
        int n = golden_list_cases(dir, ".ir", &names);
        if (n == 0) {
            sb_printf(&fails, "%s: no cases\n", dir);
            nfail++;
        }
        for (int i = 0; i < n; i++) check_case(passes[p], names[i], &fails, &nfail);
        golden_free_cases(names, n);
        total += n;
    }
    ck_assert_msg(nfail == 0, "%d of %d golden cases failed:\n%s", nfail, total, fails.data ? fails.data : "");
    sb_free(&fails);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("tc_golden");
    TCase *tc = tcase_create("golden");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, golden_cases);
    suite_add_tcase(s, tc);
    return s;
}

TU_MAIN(suite)
