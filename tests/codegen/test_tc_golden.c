/* test_tc_golden.c — golden tests of the GPU passes, each run ALONE
 * (docs/tensor_cores.md, compiler/gpuir/pass_table.c).
 *
 * tests/codegen/golden/<pass>/<case>.ir is the pass's input as IR text:
 * Tile IR for accelerate-dot (after the target-independent passes;
 * parameters may carry {div = N}), for every later pass the GPU IR the pass
 * before it produces (layouts, attributes). <case>.expected is the exact IR
 * text after running that one pass on it (gp_run_gpu_passes from <pass> to
 * <pass>, ir_verify included), or for --expect-error cases the error it reports.
 * The first line of every input says how it runs, as lit's RUN lines do:
 *   // RUN: <pass> --arch sm_80|sm_90a [schedule flags of `kiln compile`] [--expect-error]
 * (<pass> must be the folder's; sm_90a runs with wgmma; the schedule flags are resolved
 * as a compile resolves them: schedule.h). A case without it fails. Every folder
 * named after a GPU pass is visited and must hold at least one case.
 * Besides the text, each output parses back and prints the same (the GPU IR
 * round trip), each input compiles on to PTX from that pass on
 * (cg_compile_gpu_ir), so the inputs stay real inputs of the backend, and a
 * case whose name the next pass's folder also has must be that case's input
 * (pass by pass from text == the whole pipeline).
 *
 * KILN_UPDATE_GOLDEN=1 rewrites the expected files (review every change).
 */
#include "tests/testutil.h"
#include "compiler/codegen/codegen.h"
#include "compiler/gpuir/gpuir.h"
#include "compiler/support/diag.h"
#include "compiler/support/schedule.h"

#include "tests/golden.h"

#include <string.h>

/* The one kernel of `src`, or NULL with the diagnostics in err. */
static IrFunc *parse_one(Arena *a, const char *path, const char *src, StrBuf *err)
{
    Diag d;
    diag_init(&d, path, src);
    IrModule *m = ir_parse(a, &d, path, src);
    IrFunc *f = m && m->nfuncs == 1 ? m->funcs[0] : NULL;
    if (!f) sb_printf(err, "%s: does not parse to one kernel:\n%s", path, d.out.data ? d.out.data : "");
    diag_free(&d);
    return f;
}

/* A case's RUN line: the pass, the target, the schedule options (resolved), whether
 * the case expects an error. */
typedef struct RunLine {
    char pass[64];
    const Target *target;
    KilnSchedule sched;
    bool expect_error;
} RunLine;

/* Parse the first line of `src`; false with the reason in err. */
static bool parse_run_line(const char *path, const char *src, RunLine *run, StrBuf *err)
{
    memset(run, 0, sizeof *run);
    if (strncmp(src, "// RUN: ", 8) != 0) {
        sb_printf(err, "%s: the first line is not '// RUN: <pass> --arch ARCH [options]'\n", path);
        return false;
    }
    char line[512];
    snprintf(line, sizeof line, "%.*s", (int)strcspn(src + 8, "\n"), src + 8);
    char *save = NULL;
    for (char *t = strtok_r(line, " ", &save); t; t = strtok_r(NULL, " ", &save)) {
        if (!run->pass[0]) snprintf(run->pass, sizeof run->pass, "%s", t);
        else if (!strcmp(t, "--arch")) run->target = tgt_parse(strtok_r(NULL, " ", &save));
        else if (!strcmp(t, "--expect-error")) run->expect_error = true;
        else if (sched_find_flag(t) >= 0) sched_set(&run->sched, sched_find_flag(t), 1);
        else {
            sb_printf(err, "%s: RUN line: unknown option '%s'\n", path, t);
            return false;
        }
    }
    char why[256];
    if (!run->target || !sched_resolve(&run->sched, NULL, &run->sched, why, sizeof why)) {
        sb_printf(err, "%s: RUN line: %s\n", path, run->target ? why : "no known --arch");
        return false;
    }
    return true;
}

/* Run `pass` alone on the kernel of `src`; the IR after it (or the error) in out. */
static bool run_pass(const char *path, const char *src, const RunLine *run, StrBuf *out, StrBuf *err)
{
    Arena a;
    arena_init(&a);
    IrFunc *f = parse_one(&a, path, src, err);
    bool ok = f != NULL;
    if (ok) {
        GpPassCtx ctx = {.target = run->target, .wgmma = run->target->wgmma && !run->sched.no_wgmma,
                         .axis = gp_axis_info(f), .sched = run->sched};
        const char *pass = run->pass;
        Diag d;
        diag_init(&d, path, src);
        ok = gp_run_gpu_passes(f, &ctx, pass, pass, NULL, NULL, &d);
        if (ok) ir_print_func(out, f);
        else sb_puts(err, d.out.data ? d.out.data : "");
        diag_free(&d);
    }
    arena_free(&a);
    return ok;
}

/* print(parse(text)) == text */
static bool round_trips(const char *path, const char *text, StrBuf *fails)
{
    Arena a;
    arena_init(&a);
    StrBuf err, again;
    sb_init(&err);
    sb_init(&again);
    IrFunc *f = parse_one(&a, path, text, &err);
    if (f) ir_print_func(&again, f);
    bool ok = f && again.data && strcmp(again.data, text) == 0;
    if (!ok) sb_printf(fails, "%s: the output does not print the same after parsing back %s\n", path,
                       err.data ? err.data : "");
    sb_free(&err);
    sb_free(&again);
    arena_free(&a);
    return ok;
}

static bool compiles_on(const char *path, const char *src, const RunLine *run, StrBuf *fails)
{
    Arena a;
    arena_init(&a);
    StrBuf err;
    sb_init(&err);
    IrFunc *f = parse_one(&a, path, src, &err);
    CgResult r;
    memset(&r, 0, sizeof r);
    CgOptions o = {.target = run->target, .stage = CG_STAGE_PTX, .sched = run->sched};
    const char *pass = run->pass;
    Diag d;
    diag_init(&d, path, src);
    bool ok = f && cg_compile_gpu_ir(f, pass, &o, &r, &d);
    if (!ok) sb_puts(&err, d.out.data ? d.out.data : "");
    diag_free(&d);
    if (!ok) sb_printf(fails, "%s: PTX from %s on: %s\n", path, pass, err.data ? err.data : "failed");
    sb_free(&r.out);
    sb_free(&r.dumps);
    sb_free(&r.stats);
    sb_free(&err);
    arena_free(&a);
    return ok;
}

/* `text` without its `//` comment lines (the dump headers of the inputs). */
static char *strip_comments(const char *text)
{
    StrBuf sb;
    sb_init(&sb);
    for (const char *l = text; *l;) {
        const char *nl = strchr(l, '\n');
        size_t n = nl ? (size_t)(nl - l + 1) : strlen(l);
        if (strncmp(l, "//", 2) != 0) sb_printf(&sb, "%.*s", (int)n, l);
        l += n;
    }
    return sb_steal(&sb);
}

/* A case of the same name in the next pass's folder starts where this one
 * ends: running the passes one at a time from text gives what the whole
 * pipeline gives (the attention_wgmma_sm90 chain runs through all five). */
static bool chains(int pass_index, const char *name, const char *out, StrBuf *fails)
{
    if (pass_index + 1 >= gp_ngpu_passes) return true;
    char next[1024];
    snprintf(next, sizeof next, "%s/%s/%s.ir", tu_src_path("tests/codegen/golden"),
             gp_gpu_passes[pass_index + 1].name, name);
    char *src = sup_read_file_text(next, NULL);
    if (!src) return true;
    char *body = strip_comments(src);
    bool ok = strcmp(body, out) == 0;
    if (!ok) sb_printf(fails, "%s: differs from the output of %s alone on the case before it\n", next,
                       gp_gpu_passes[pass_index].name);
    free(body);
    free(src);
    return ok;
}

static void check_case(int pass_index, const char *name, StrBuf *fails, int *nfail)
{
    const char *pass = gp_gpu_passes[pass_index].name;
    char path[1024], exp_path[1024];
    snprintf(path, sizeof path, "%s/%s/%s.ir", tu_src_path("tests/codegen/golden"), pass, name);
    snprintf(exp_path, sizeof exp_path, "%.*s.expected", (int)(strlen(path) - 3), path);
    char *src = sup_read_file_text(path, NULL);
    if (!src) {
        sb_printf(fails, "%s: cannot read\n", path);
        (*nfail)++;
        return;
    }
    StrBuf out, err;
    sb_init(&out);
    sb_init(&err);
    /* Diagnostics name the file relative to the source root, as the golden shows it. */
    char rel[512];
    snprintf(rel, sizeof rel, "tests/codegen/golden/%s/%s.ir", pass, name);
    RunLine run;
    bool parsed = parse_run_line(rel, src, &run, &err);
    if (!parsed || strcmp(run.pass, pass)) {
        if (parsed) sb_printf(&err, "%s: the RUN line names pass '%s' in folder %s\n", rel, run.pass, pass);
        sb_puts(fails, err.data);
        (*nfail)++;
        sb_free(&out);
        sb_free(&err);
        free(src);
        return;
    }
    bool too_large = run.expect_error;
    bool ok = run_pass(rel, src, &run, &out, &err);
    if (too_large) {
        /* The output is the error text: the limit, each buffer, the advice. */
        if (ok || !strstr(err.data ? err.data : "", "shared memory")) {
            sb_printf(fails, "%s: expected the SRAM limit error, got %s\n", path, ok ? "success" : err.data);
            (*nfail)++;
        }
        sb_free(&out);
        sb_init(&out);
        sb_puts(&out, err.data ? err.data : "");
    } else if (!ok) {
        sb_printf(fails, "%s: %s\n", path, err.data ? err.data : "failed");
        (*nfail)++;
    }
    char what[1100];
    snprintf(what, sizeof what, "%s: IR after %s alone", path, pass);
    if ((ok || too_large) && !golden_compare(exp_path, out.data ? out.data : "", what, fails)) (*nfail)++;
    if (ok && !too_large && !round_trips(path, out.data ? out.data : "", fails)) (*nfail)++;
    if (ok && !too_large && !compiles_on(path, src, &run, fails)) (*nfail)++;
    if (ok && !too_large && !chains(pass_index, name, out.data ? out.data : "", fails)) (*nfail)++;
    sb_free(&out);
    sb_free(&err);
    free(src);
}

START_TEST(golden_cases)
{
    StrBuf fails;
    sb_init(&fails);
    int nfail = 0, total = 0;
    for (int p = 0; p < gp_ngpu_passes; p++) {
        const char *pass = gp_gpu_passes[p].name;
        char dir[1024];
        snprintf(dir, sizeof dir, "%s/%s", tu_src_path("tests/codegen/golden"), pass);
        char **names;
        int n = golden_list_cases(dir, ".ir", &names);
        if (n == 0) {
            sb_printf(&fails, "%s: no cases\n", dir);
            nfail++;
        }
        for (int i = 0; i < n; i++) check_case(p, names[i], &fails, &nfail);
        golden_free_cases(names, n);
        total += n;
    }
    ck_assert_msg(nfail == 0, "%d of %d golden cases failed:\n%s", nfail, total, fails.data ? fails.data : "");
    sb_free(&fails);
}
END_TEST

/* The runner checks each pass's output: a pass run on GPU IR that breaks an
 * invariant (here a tile without a layout, which remove-convert leaves as it
 * is) is stopped by ir_verify_gpu with an internal error naming the pass. */
START_TEST(runner_verifies)
{
    const char *src = "#L0 = #blocked<spt=[1], tpw=[32], wpc=[4], order=[0]>\n"
                      "kernel @k(%X: ptr<f32>) num_warps = 4 num_stages = 2 {\n"
                      "  %0 = arange 0, 64 : tensor<64xi32>\n"
                      "  %1 = splat %X : tensor<64xptr<f32>, #L0>\n"
                      "  %2 = addptr %1, %0 : tensor<64xptr<f32>, #L0>\n"
                      "  %3 = const 1 : tensor<64xf32, #L0>\n"
                      "  store %2, %3\n"
                      "  return\n}\n";
    StrBuf out, err;
    sb_init(&out);
    sb_init(&err);
    RunLine run = {.pass = "remove-convert", .target = tgt_parse("sm_80")};
    ck_assert(!run_pass("<t>", src, &run, &out, &err));
    ck_assert_msg(err.data && strstr(err.data, "internal error: the GPU IR of 'k' after remove-convert fails the verifier") &&
                      strstr(err.data, "is a tile without a layout"),
                  "%s", err.data ? err.data : "");
    sb_free(&out);
    sb_free(&err);
    /* a case says how it runs, or fails: no RUN line, an unknown flag */
    sb_init(&err);
    ck_assert(!parse_run_line("<t>", src, &run, &err));
    ck_assert(!parse_run_line("<t>", "// RUN: tma --arch sm_90a --no-such\n", &run, &err));
    ck_assert_msg(strstr(err.data, "RUN line: unknown option '--no-such'"), "%s", err.data);
    ck_assert(parse_run_line("<t>", "// RUN: tma --arch sm_90a --tma\n", &run, &err));
    ck_assert_int_eq(run.sched.tma + run.sched.mbarrier, 2);
    ck_assert(parse_run_line("<t>", "// RUN: tma --arch sm_90a --tma --warp-specialize\n", &run, &err));
    ck_assert_int_eq(run.sched.tma + run.sched.mbarrier + run.sched.warp_specialize, 3);
    sb_free(&err);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("tc_golden");
    TCase *tc = tcase_create("golden");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, golden_cases);
    tcase_add_test(tc, runner_verifies);
    suite_add_tcase(s, tc);
    return s;
}

TU_MAIN(suite)
