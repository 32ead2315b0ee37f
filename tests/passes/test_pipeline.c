/* test_pipeline.c — the pass table, pass_find, --dump-after and verifier failures. */
#include "passtest.h"

PT_FIXTURE

static void setup(void) { pt_init(&t); }

/* out[0] = (2 + 3) * x, with a dead op and an invariant in a loop. */
static void build_small(void)
{
    IrValue *out = param(&t, ir_type_ptr(IR_F32), "out");
    IrValue *x = param(&t, T(IR_F32), "x");
    IrValue *n = param(&t, T(IR_I32), "n");
    IrValue *k = irb_op2(&t.b, IR_ADD, T(IR_F32), cf(&t, IR_F32, 2.0), cf(&t, IR_F32, 3.0));
    irb_op1(&t.b, IR_EXP, T(IR_F32), x); /* dead */
    IrOp *loop = pt_for(&t, ci(&t, IR_I32, 0), n, ci(&t, IR_I32, 1), 0, NULL);
    IrValue *m = irb_op2(&t.b, IR_MUL, T(IR_F32), k, x);
    pt_store(&t, out, m);
    pt_yield(&t, 0, NULL);
    pt_end(&t, loop);
    pt_done(&t);
}

static int count_str(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = hay; p && (p = strstr(p, needle)); p += strlen(needle)) n++;
    return n;
}

START_TEST(table_and_find)
{
    const char *want[] = {"fold", "cse", "licm", "cse", "dce"};
    int n = 0;
    for (const PassInfo *p = pass_pipeline_tab; p->name; p++, n++) {
        ck_assert_int_lt(n, 5);
        ck_assert_str_eq(p->name, want[n]);
        ck_assert_ptr_nonnull(p->run);
    }
    ck_assert_int_eq(n, 5);
    ck_assert_ptr_eq(pass_find("fold")->run, pass_fold);
    ck_assert_ptr_eq(pass_find("cse")->run, pass_cse);
    ck_assert_ptr_eq(pass_find("dce")->run, pass_dce);
    ck_assert_ptr_eq(pass_find("licm")->run, pass_licm);
    ck_assert_ptr_null(pass_find("pipeline"));
    ck_assert_ptr_null(pass_find("Fold"));
    ck_assert_ptr_null(pass_find(""));
    ck_assert_ptr_null(pass_find(NULL));
}
END_TEST

START_TEST(runs_and_dumps_all)
{
    build_small();
    StrBuf dump, err;
    sb_init(&dump);
    sb_init(&err);
    ck_assert(pass_pipeline(t.f, "all", &dump, &err));
    ck_assert_int_eq((int)err.len, 0);
    ck_assert_int_eq(count_str(dump.data, "// -----// IR after "), 5);
    const char *order[] = {"after fold ", "after cse ", "after licm ", "after cse ", "after dce "};
    const char *p = dump.data;
    for (int i = 0; i < 5; i++) {
        p = strstr(p, order[i]);
        ck_assert_msg(p != NULL, "missing or out of order: %s", order[i]);
        p += strlen(order[i]);
    }
    ck_assert_int_eq(count_str(dump.data, "kernel @k("), 5);
    /* The result: 5.0 folded, mul hoisted, the dead exp gone. */
    ck_assert_int_eq(pt_count(&t, IR_EXP), 0);
    ck_assert_int_eq(pt_count(&t, IR_ADD), 0);
    IrOp *loop = NULL;
    for (IrOp *op = t.f->body->first; op; op = op->next)
        if (op->op == IR_FOR) loop = op;
    ck_assert_ptr_nonnull(loop);
    ck_assert_int_eq(loop->prev->op, IR_MUL);
    ck_assert(loop->prev->args[0]->def->op == IR_CONST && loop->prev->args[0]->def->fval == 5.0);
    sb_free(&dump);
    sb_free(&err);
}
END_TEST

START_TEST(dumps_one_pass_by_name)
{
    build_small();
    StrBuf dump, err;
    sb_init(&dump);
    sb_init(&err);
    ck_assert(pass_pipeline(t.f, "licm", &dump, &err));
    ck_assert_int_eq(count_str(dump.data, "// -----// IR after licm //----- //\n"), 1);
    ck_assert_int_eq(count_str(dump.data, "// -----// IR after "), 1);
    ck_assert_int_eq(strncmp(dump.data, "// -----// IR after licm //----- //\nkernel @k(", 46), 0);
    sb_free(&dump);
    /* "cse" runs twice, so it dumps twice; an unknown name and NULL dump nothing. */
    pt_free(&t);
    pt_init(&t);
    build_small();
    sb_init(&dump);
    ck_assert(pass_pipeline(t.f, "cse", &dump, &err));
    ck_assert_int_eq(count_str(dump.data, "// -----// IR after cse //----- //"), 2);
    sb_free(&dump);
    pt_free(&t);
    pt_init(&t);
    build_small();
    sb_init(&dump);
    ck_assert(pass_pipeline(t.f, "nonesuch", &dump, &err));
    ck_assert(pass_pipeline(t.f, NULL, &dump, &err));
    ck_assert_int_eq((int)dump.len, 0);
    ck_assert_int_eq((int)err.len, 0);
    sb_free(&dump);
    sb_free(&err);
}
END_TEST

/* A body without its `return` terminator: the verifier fails after the first pass. */
START_TEST(verifier_failure_stops)
{
    IrValue *out = param(&t, ir_type_ptr(IR_F32), "out");
    pt_store(&t, out, cf(&t, IR_F32, 1.0));
    StrBuf dump, err;
    sb_init(&dump);
    sb_init(&err);
    ck_assert(!pass_pipeline(t.f, "all", &dump, &err));
    ck_assert_ptr_nonnull(err.data);
    ck_assert_msg(strstr(err.data, "after pass 'fold'") != NULL, "%s", err.data);
    ck_assert_msg(strstr(err.data, "internal error") != NULL, "%s", err.data);
    /* The broken IR was dumped before the verifier stopped the run. */
    ck_assert_int_eq(count_str(dump.data, "// -----// IR after "), 1);
    sb_free(&dump);
    sb_free(&err);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("pipeline");
    TCase *tc = tcase_create("pipeline");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, table_and_find);
    tcase_add_test(tc, runs_and_dumps_all);
    tcase_add_test(tc, dumps_one_pass_by_name);
    tcase_add_test(tc, verifier_failure_stops);
    suite_add_tcase(s, tc);
    return s;
}

TU_MAIN(suite)
