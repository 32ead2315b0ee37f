/* test_cg_llvm_pipeline.c — the LLVM pipeline cg_compile runs is the one
 * docs/gpu.md describes: its pass list, LLVM options and codegen level match
 * tests/codegen/llvm_pipeline.txt (KILN_UPDATE_GOLDEN=1 rewrites it; a change
 * there goes with the PTX hash test and kiln-bench-compile's numbers in the
 * commit), it runs (a kernel compiles through it), and the stats carry one
 * "time <phase>: W ms, cpu C ms" line per backend phase, which kiln-bench-compile reads.
 */
#include "tests/testutil.h"
#include "tests/codegen/cg_build.h"
#include "tests/golden.h"

#include <stdlib.h>

#define PIPELINE_FILE "tests/codegen/llvm_pipeline.txt"

START_TEST(pipeline_is_the_pinned_one)
{
    StrBuf got, msg;
    sb_init(&got);
    sb_init(&msg);
    cg_llvm_describe(&got);
    sb_putc(&got, 0);
    bool ok = golden_compare(tu_src_path(PIPELINE_FILE), got.data, "the LLVM pipeline", &msg);
    ck_assert_msg(ok, "%s", msg.data ? msg.data : "");
    /* what the pipeline leaves to Kiln's own passes, and what it must keep */
    ck_assert_ptr_null(strstr(got.data, "\n  dse"));
    ck_assert_ptr_null(strstr(got.data, "inline"));
    ck_assert_ptr_null(strstr(got.data, "loop-vectorize"));
    ck_assert_ptr_nonnull(strstr(got.data, "slp-vectorizer"));
    ck_assert_ptr_nonnull(strstr(got.data, "gvn"));
    sb_free(&got);
    sb_free(&msg);
}
END_TEST

/* The vec_add kernel through every backend phase: each "time" line once. */
START_TEST(stats_time_every_phase)
{
    Kb k;
    build_vec_add(&k, 16, 1024);
    CgOptions o = {.target = tgt_parse("sm_80"), .stage = CG_STAGE_PTX};
    CgResult r;
    memset(&r, 0, sizeof r);
    Diag d;
    diag_init(&d, "vec_add", NULL);
    ck_assert_msg(cg_compile(k.f, &o, &r, &d), "%s", d.out.data ? d.out.data : "");
    sb_putc(&r.stats, 0);
    static const char *const phases[] = {"gpu-passes", "lower", "llvm-opt", "llvm-codegen"};
    for (int i = 0; i < 4; i++) {
        char key[64];
        snprintf(key, sizeof key, "time %s: ", phases[i]);
        const char *at = strstr(r.stats.data, key);
        ck_assert_msg(at != NULL, "no '%s' in the stats:\n%s", key, r.stats.data);
        ck_assert_ptr_null(strstr(at + 1, key));
        ck_assert(atof(at + strlen(key)) >= 0);
        /* "W ms, cpu C ms": the compiling thread's CPU time too, on the same line */
        const char *cpu = strstr(at, ", cpu "), *nl = strchr(at, '\n');
        ck_assert_msg(cpu && nl && cpu < nl, "no CPU time on the '%s' line:\n%s", key, r.stats.data);
        ck_assert(atof(cpu + 6) >= 0);
    }
    ck_assert_ptr_null(strstr(r.stats.data, "time ptxas")); /* PTX stage: no ptxas */
    ck_assert_ptr_nonnull(strstr(r.out.data, ".entry vec_add"));
    diag_free(&d);
    sb_free(&r.out);
    sb_free(&r.dumps);
    sb_free(&r.stats);
    arena_free(&k.a);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("cg_llvm_pipeline");
    TCase *tc = tcase_create("pipeline");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, pipeline_is_the_pinned_one);
    tcase_add_test(tc, stats_time_every_phase);
    suite_add_tcase(s, tc);
    return s;
}

TU_MAIN(suite)
