/* test_schedule.c — the schedule-option table (compiler/support/schedule.h) and its
 * rules: the table names real flags and GPU passes, conflicts are listed on both rows,
 * sched_resolve applies implications, refuses conflicts naming both options, lets
 * defaults give way; kiln_compile refuses a refused combination as a usage error naming
 * both flags (tma with warp_specialize was silently dropped before) and --stats lists
 * the options as resolved. */
#include "testutil.h"

#include <string.h>

#include "kiln.h"
#include "compiler/codegen/codegen.h"
#include "compiler/support/schedule.h"

static const char SRC[] = "kernel k(X: *f32) {\n  let o = arange(16);\n  store(X + o, load(X + o) + 1.0);\n}\n";

START_TEST(table_names_flags_keys_and_passes)
{
    for (int i = 0; i < SCHED_COUNT; i++) {
        const SchedOption *o = &sched_options[i];
        ck_assert_msg(!strncmp(o->flag, "--", 2) && o->help[0] && o->key[0], "%s", o->name);
        ck_assert_int_eq(sched_find_flag(o->flag), i);
        /* every pass it names is a GPU pass */
        char passes[128];
        snprintf(passes, sizeof passes, "%s", o->pass);
        for (char *save = NULL, *p = strtok_r(passes, ", ", &save); p; p = strtok_r(NULL, ", ", &save)) {
            bool found = false;
            for (int k = 0; gp_gpu_pass_name(k); k++) found |= !strcmp(gp_gpu_pass_name(k), p);
            ck_assert_msg(found, "%s: no GPU pass '%s'", o->name, p);
        }
        for (int j = 0; j < SCHED_COUNT; j++) {
            if (i != j) ck_assert_str_ne(o->key, sched_options[j].key);
            bool c = o->conflicts & (1u << j);
            ck_assert_msg(c == !!(sched_options[j].conflicts & (1u << i)), "%s/%s: conflict on one row only", o->name,
                          sched_options[j].name);
            ck_assert_msg(!(c && (o->implies & (1u << j))), "%s implies what it conflicts with", o->name);
        }
        ck_assert_msg(!o->conflicts || o->conflict_why, "%s: a conflict without a reason", o->name);
        /* each field reaches its row */
        KilnSchedule s = {0};
        sched_set(&s, i, 7);
        ck_assert_int_eq(sched_get(&s, i), 7);
    }
    ck_assert_int_eq(sched_find_flag("--no-such"), -1);
    ck_assert_int_eq(sched_find_flag(NULL), -1);
}
END_TEST

START_TEST(resolve_applies_the_rules)
{
    char why[256];
    KilnSchedule out;
    /* implications */
    ck_assert(sched_resolve(&(KilnSchedule){.tma = 1}, NULL, &out, why, sizeof why));
    ck_assert_int_eq(out.tma, 1);
    ck_assert_int_eq(out.mbarrier, 1);
    ck_assert_int_eq(out.warp_specialize + out.pingpong + out.overlap + out.no_wgmma, 0);
    ck_assert(sched_resolve(&(KilnSchedule){.warp_specialize = 5, .pingpong = -1}, NULL, &out, why, sizeof why));
    ck_assert_int_eq(out.warp_specialize, 1);
    ck_assert_int_eq(out.mbarrier, 1);
    ck_assert_int_eq(out.pingpong, 0);
    /* tma with warp_specialize: the producer issues the TMA copies (refused until 2026-11-28) */
    ck_assert(sched_resolve(&(KilnSchedule){.tma = 1, .warp_specialize = 1}, NULL, &out, why, sizeof why));
    ck_assert_int_eq(out.tma + out.warp_specialize + out.mbarrier, 3);
    /* an option asked on that needs one asked off */
    ck_assert(!sched_resolve(&(KilnSchedule){.warp_specialize = 1, .mbarrier = -1}, NULL, &out, why, sizeof why));
    ck_assert_msg(strstr(why, "warp_specialize (--warp-specialize) needs mbarrier (--mbarrier)"), "%s", why);
    /* defaults: taken with their implications, unless they meet what was asked */
    KilnSchedule dflt = {.warp_specialize = 1, .overlap = 1};
    ck_assert(sched_resolve(&(KilnSchedule){0}, &dflt, &out, why, sizeof why));
    ck_assert_int_eq(out.warp_specialize + out.mbarrier + out.overlap, 3);
    ck_assert(sched_resolve(&(KilnSchedule){.tma = 1}, &dflt, &out, why, sizeof why));
    ck_assert_int_eq(out.tma + out.mbarrier + out.overlap + out.warp_specialize, 4);   /* the default combines */
    ck_assert(sched_resolve(&(KilnSchedule){.tma = 1, .mbarrier = -1}, &dflt, &out, why, sizeof why) == false);
    ck_assert(sched_resolve(&(KilnSchedule){.mbarrier = -1, .overlap = -1}, &dflt, &out, why, sizeof why));
    ck_assert_int_eq(out.warp_specialize + out.mbarrier + out.overlap, 0);
    /* in place, and as a check only */
    KilnSchedule s = {.tma = 1};
    ck_assert(sched_resolve(&s, NULL, &s, why, sizeof why));
    ck_assert_int_eq(s.mbarrier, 1);
    ck_assert(sched_resolve(&(KilnSchedule){.tma = 1, .warp_specialize = 1}, NULL, NULL, NULL, 0));
    char names[64];
    sched_names(&s, "+", names, sizeof names);
    ck_assert_str_eq(names, "mbarrier+tma");
}
END_TEST

static KilnStatus compile(KilnSchedule sched, KilnEmit emit, KilnCompileResult *r)
{
    KilnCompileOptions o;
    memset(&o, 0, sizeof o);
    o.emit = emit;
    o.schedule = sched;
    return kiln_compile("k.tile", SRC, &o, r);
}

START_TEST(compile_takes_tma_with_warp_specialize)
{
    KilnCompileResult r;
    ck_assert_int_eq(compile((KilnSchedule){.tma = 1, .warp_specialize = 1}, KILN_EMIT_GPU_IR, &r), KILN_OK);
    kiln_compile_result_free(&r);
    ck_assert_int_eq(compile((KilnSchedule){.tma = 1}, KILN_EMIT_GPU_IR, &r), KILN_OK);
    kiln_compile_result_free(&r);
    /* an option asked on that needs one asked off: a usage error naming both */
    ck_assert_int_eq(compile((KilnSchedule){.tma = 1, .mbarrier = -1}, KILN_EMIT_GPU_IR, &r), KILN_ERR_USAGE);
    ck_assert_msg(r.diagnostics && strstr(r.diagnostics, "--tma") && strstr(r.diagnostics, "--mbarrier"), "%s",
                  r.diagnostics ? r.diagnostics : "");
    ck_assert_ptr_null(r.output);
    kiln_compile_result_free(&r);
}
END_TEST

START_TEST(stats_list_the_resolved_options)
{
    for (int i = 0; i < SCHED_COUNT; i++) {
        KilnSchedule s = {0};
        sched_set(&s, i, 1);
        KilnSchedule res;
        ck_assert(sched_resolve(&s, NULL, &res, NULL, 0));
        char want[128], names[96];
        sched_names(&res, " ", names, sizeof names);
        snprintf(want, sizeof want, "schedule: %s\n", names);
        KilnCompileResult r;
        ck_assert_int_eq(compile(s, KILN_EMIT_LLVM, &r), KILN_OK);
        ck_assert_msg(r.stats && strstr(r.stats, want), "%s: %s", sched_options[i].name, r.stats ? r.stats : "");
        kiln_compile_result_free(&r);
    }
    KilnCompileResult r;
    ck_assert_int_eq(compile((KilnSchedule){0}, KILN_EMIT_LLVM, &r), KILN_OK);
    ck_assert_ptr_null(strstr(r.stats, "schedule:"));   /* none on: no line */
    kiln_compile_result_free(&r);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("schedule");
    TCase *tc = tcase_create("table");
    tcase_add_test(tc, table_names_flags_keys_and_passes);
    tcase_add_test(tc, resolve_applies_the_rules);
    tcase_add_test(tc, compile_takes_tma_with_warp_specialize);
    tcase_add_test(tc, stats_list_the_resolved_options);
    suite_add_tcase(s, tc);
    return s;
}

TU_MAIN(suite)
