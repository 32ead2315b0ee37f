/* test_golden.c — golden tests of the passes.
 *
 * tests/golden/<pass>/<case>.ir is an input module; <case>.expected is the
 * exact ir_print_module output after running only that pass (the folder named
 * "pipeline" runs the whole pipeline). Every folder of tests/golden named after
 * a pass (pass_find) or "pipeline" is visited, and "persistent" (the schedule's
 * pass_persistent: mode 2, longest-first, for cases named longest_first*, else 1);
 * other folders belong to other layers. Each case checks: the input parses and verifies, the output verifies,
 * the output equals the expected text, and the expected text itself reads back
 * and prints unchanged (so it is valid IR, not just a string).
 *
 * KILN_UPDATE_GOLDEN=1 rewrites the expected files from the current output
 * (review every change by eye before committing it).
 */
#include "testutil.h"
#include "compiler/passes/passes.h"
#include "compiler/support/diag.h"

#include "golden.h"

#include <dirent.h>
#include <string.h>

static const char *const folders[] = {"fold", "cse", "dce", "licm", "pipeline", "persistent"};
#define NFOLDERS 6
#define MIN_CASES 5

static IrModule *parse_text(Arena *a, const char *path, const char *src, StrBuf *msg)
{
    Diag d;
    diag_init(&d, path, src);
    IrModule *m = ir_parse(a, &d, path, src);
    if (!m) sb_printf(msg, "%s: does not parse:\n%s", path, d.out.data ? d.out.data : "");
    diag_free(&d);
    return m;
}

static bool verify_module(IrModule *m, const char *path, const char *when, StrBuf *msg)
{
    for (int i = 0; i < m->nfuncs; i++) {
        StrBuf why;
        sb_init(&why);
        bool ok = ir_verify(m->funcs[i], &why);
        if (!ok) sb_printf(msg, "%s: %s does not verify:\n%s", path, when, why.data ? why.data : "");
        sb_free(&why);
        if (!ok) return false;
    }
    return true;
}

static bool run_passes(IrModule *m, const char *folder, const char *path, StrBuf *msg)
{
    const PassInfo *p = pass_find(folder);
    bool persistent = !strcmp(folder, "persistent");
    const char *name = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    for (int i = 0; i < m->nfuncs; i++) {
        if (persistent) {
            pass_persistent(m->funcs[i], strncmp(name, "longest_first", 13) ? 1 : 2);
            continue;
        }
        if (p) {
            p->run(m->funcs[i]);
            continue;
        }
        StrBuf err;
        sb_init(&err);
        bool ok = pass_pipeline(m->funcs[i], NULL, NULL, &err);
        if (!ok) sb_printf(msg, "%s: pipeline failed:\n%s", path, err.data ? err.data : "");
        sb_free(&err);
        if (!ok) return false;
    }
    if (ice_message()) {
        sb_printf(msg, "%s: %s\n", path, ice_message());
        ice_clear();
        return false;
    }
    return true;
}

/* The expected text reads back and prints as itself. */
static bool expected_round_trips(const char *path, const char *want, StrBuf *msg)
{
    Arena a;
    arena_init(&a);
    StrBuf again;
    sb_init(&again);
    IrModule *m = parse_text(&a, path, want, msg);
    bool ok = m != NULL;
    if (ok) {
        ir_print_module(&again, m);
        ok = strcmp(again.data ? again.data : "", want) == 0;
        if (!ok) sb_printf(msg, "%s: does not print back as itself\n", path);
    }
    sb_free(&again);
    arena_free(&a);
    return ok;
}

/* Runs one case; appends what went wrong to msg and returns false on failure. */
static bool run_case(const char *folder, const char *dir, const char *name, StrBuf *msg)
{
    char in_path[1200], exp_path[1200];
    snprintf(in_path, sizeof in_path, "%s/%s.ir", dir, name);
    snprintf(exp_path, sizeof exp_path, "%s/%s.expected", dir, name);
    char *src = sup_read_file_text(in_path, NULL);
    if (!src) {
        sb_printf(msg, "%s: cannot read\n", in_path);
        return false;
    }
    Arena a;
    arena_init(&a);
    StrBuf got;
    sb_init(&got);
    bool ok = false;
    IrModule *m = parse_text(&a, in_path, src, msg);
    if (m && verify_module(m, in_path, "input", msg) && run_passes(m, folder, in_path, msg) &&
        verify_module(m, in_path, "output", msg)) {
        ir_print_module(&got, m);
        const char *g = got.data ? got.data : "";
        char what[1300];
        snprintf(what, sizeof what, "%s: output", in_path);
        ok = golden_compare(exp_path, g, what, msg) && (golden_updating() || expected_round_trips(exp_path, g, msg));
    }
    sb_free(&got);
    arena_free(&a);
    free(src);
    return ok;
}

START_TEST(golden_folder)
{
    const char *folder = folders[_i];
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", tu_src_path("tests/golden"));
    size_t len = strlen(dir);
    snprintf(dir + len, sizeof dir - len, "/%s", folder);
    char **names;
    int n = golden_list_cases(dir, ".ir", &names);
    StrBuf msg;
    sb_init(&msg);
    int failed = 0;
    for (int i = 0; i < n; i++)
        if (!run_case(folder, dir, names[i], &msg)) failed++;
    golden_free_cases(names, n);
    ck_assert_msg(n >= MIN_CASES, "%s: %d cases, want at least %d", dir, n, MIN_CASES);
    ck_assert_msg(failed == 0, "%d of %d cases failed in %s:\n%s", failed, n, dir, msg.data);
    sb_free(&msg);
}
END_TEST

/* Every folder named after a pass is one of ours (a new pass needs its folder listed). */
START_TEST(no_unvisited_pass_folder)
{
    DIR *d = opendir(tu_src_path("tests/golden"));
    ck_assert_ptr_nonnull(d);
    for (struct dirent *e; (e = readdir(d));) {
        if (!pass_find(e->d_name)) continue;
        bool known = false;
        for (int i = 0; i < NFOLDERS; i++) known |= strcmp(folders[i], e->d_name) == 0;
        ck_assert_msg(known, "tests/golden/%s is named after a pass but not run", e->d_name);
    }
    closedir(d);
    for (int i = 0; i < NFOLDERS; i++)
        ck_assert_msg(strcmp(folders[i], "pipeline") == 0 || pass_find(folders[i]) ||
                      pass_is_schedule_pass(folders[i]), "%s", folders[i]);
}
END_TEST

/* The verifier's rules of a persistent kernel (compiler/ir/verify.c, check_persistent):
 * each broken copy of basic's output is refused, naming the rule. */
START_TEST(persistent_verifier_rules)
{
    char *good = sup_read_file_text(tu_src_path("tests/golden/persistent/basic.expected"), NULL);
    ck_assert_ptr_nonnull(good);
    static const struct { const char *from, *to, *why; } k_bad[] = {
        {"{persistent = 1}", "{persistent = 3}", "persistent must be 1 or 2"},
        {"%tiles_z: i32)", "%tiles_z: i64)", "last three parameters"},
        {"%c16 = const 16 : i32", "%c16 = program_id 1 : i32", "program_id inside the tile loop"},
        {"for %tile = %0 to %3 step %1", "for %tile = %1 to %3 step %1", "from program_id 0 step num_programs 0"},
    };
    for (size_t i = 0; i < sizeof k_bad / sizeof k_bad[0]; i++) {
        const char *at = strstr(good, k_bad[i].from);
        ck_assert_ptr_nonnull(at);
        StrBuf src, msg, why;
        sb_init(&src), sb_init(&msg), sb_init(&why);
        sb_putn(&src, good, (size_t)(at - good));
        sb_puts(&src, k_bad[i].to);
        sb_puts(&src, at + strlen(k_bad[i].from));
        Arena a;
        arena_init(&a);
        IrModule *m = parse_text(&a, "<bad>", src.data, &msg);
        ck_assert_msg(m && m->nfuncs == 1, "%s", msg.data ? msg.data : "");
        ck_assert(!ir_verify(m->funcs[0], &why));
        ck_assert_msg(strstr(why.data, k_bad[i].why), "case %zu: %s", i, why.data);
        arena_free(&a);
        sb_free(&src), sb_free(&msg), sb_free(&why);
    }
    free(good);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("golden-passes");
    TCase *tc = tcase_create("golden");
    tcase_add_loop_test(tc, golden_folder, 0, NFOLDERS);
    tcase_add_test(tc, no_unvisited_pass_folder);
    tcase_add_test(tc, persistent_verifier_rules);
    suite_add_tcase(s, tc);
    return s;
}

TU_MAIN(suite)
