/* test_target.c — tgt_parse, the one reader of the --arch string
 * (compiler/support/target.c): every accepted name with its properties, the
 * default, and names that must be refused. */
#include "testutil.h"

#include "compiler/support/target.h"

#include <string.h>

START_TEST(known_targets)
{
    static const struct {
        const char *name;
        int sm;
        bool wgmma;
        int sram;
    } want[] = {
        {"sm_80", 80, false, 163 * 1024}, {"sm_86", 86, false, 99 * 1024}, {"sm_89", 89, false, 99 * 1024},
        {"sm_90", 90, false, 227 * 1024}, {"sm_90a", 90, true, 227 * 1024},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const Target *t = tgt_parse(want[i].name);
        ck_assert_msg(t != NULL, "%s refused", want[i].name);
        ck_assert_str_eq(t->name, want[i].name);
        ck_assert_int_eq(t->sm, want[i].sm);
        ck_assert_int_eq(t->wgmma, want[i].wgmma);
        ck_assert_int_eq(t->arch_specific, want[i].wgmma);
        ck_assert_int_eq(t->sram_limit, want[i].sram);
        ck_assert_int_eq(t->ptx_isa, 80);
        ck_assert_str_eq(t->ptx_features, "+ptx80");
    }
}
END_TEST

START_TEST(default_is_sm_90a)
{
    const Target *t = tgt_parse(NULL);
    ck_assert_ptr_nonnull(t);
    ck_assert_str_eq(t->name, "sm_90a");
    ck_assert_ptr_eq(t, tgt_parse("sm_90a"));
}
END_TEST

START_TEST(bad_names)
{
    static const char *bad[] = {"", "sm_", "sm_12", "sm_70", "sm_90b", "sm_80a", "SM_90A", "sm_90a ", " sm_80",
                                "gfx90a", "sm90a", "sm_086", "compute_90a", "sm_100"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_msg(tgt_parse(bad[i]) == NULL, "'%s' accepted", bad[i]);
}
END_TEST

START_TEST(name_list)
{
    StrBuf sb;
    sb_init(&sb);
    tgt_list_names(&sb);
    ck_assert_str_eq(sb.data, "sm_80, sm_86, sm_89, sm_90 or sm_90a");
    sb_free(&sb);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("support_target");
    TCase *t = tcase_create("target");
    tcase_add_test(t, known_targets);
    tcase_add_test(t, default_is_sm_90a);
    tcase_add_test(t, bad_names);
    tcase_add_test(t, name_list);
    suite_add_tcase(s, t);
    return s;
}

TU_MAIN(suite)
