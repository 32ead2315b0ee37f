/* test_hints.c — LangOptions.hints: divisibility / alignment facts about
 * runtime parameters land in IrValue.divisibility of the right parameters of
 * every selected kernel, and bad hints (unknown names, const parameters,
 * float or bool parameters, values that are not powers of two) are errors
 * with a useful message. Equals-one hints (NAME==1): the parameter stays in
 * the signature but no op reads it any more; its uses read a constant 1 of
 * its type; on pointer, float, bool and const parameters, with a
 * divisibility, or next to a NAME=DIV hint they are errors.
 */
#include "testutil.h"

#include "compiler/lang/lang.h"

#include <string.h>

static Arena arena;
static Diag diag;

static const char *const src =
    "kernel vec_add(X: *f32, Y: *f16, n: i32, m: u64, scale: f32, flag: bool, const BLOCK: i32 = 64) {\n"
    "    let offs = program_id(0) * BLOCK + arange(BLOCK);\n"
    "    let mask = offs < n;\n"
    "    store(X + offs, load(Y + offs, mask = mask, other = 0) * scale, mask = mask);\n"
    "}\n"
    "kernel other(P: *i32, count: i64) {\n"
    "    store(P, count);\n"
    "}\n"
    "kernel strided(X: *f32, Z: *f32, s: i32, t: u8, n: i32) {\n"
    "    let offs = arange(64);\n"
    "    let v = load(X + offs * s, mask = offs < n, other = 0);\n"
    "    for i in range(0, n, s) { store(Z + i * t, v * 2.0, mask = offs < n); }\n"
    "}\n";

/* Compile `src` with hints "NAME=DIV" or "NAME==1" (the latter with
 * divisibility 1, or "NAME==1/DIV" for another one)... (NULL-terminated);
 * NULL on errors. */
static IrModule *compile(const char *kernel, const char *const *hints)
{
    arena_free(&arena);
    arena_init(&arena);
    diag_free(&diag);
    diag_init(&diag, "t.tile", src);
    LangHint h[16];
    int nh = 0;
    for (; hints && hints[nh]; nh++) {
        const char *eq = strchr(hints[nh], '=');
        h[nh].name = arena_strndup(&arena, hints[nh], (size_t)(eq - hints[nh]));
        h[nh].equals_one = eq[1] == '=';
        const char *slash = strchr(eq, '/');
        h[nh].divisibility = h[nh].equals_one ? (slash ? atoi(slash + 1) : 1) : atoi(eq + 1);
    }
    LangOptions o = {.kernel = kernel, .hints = h, .nhints = nh};
    AstFile *f = ast_parse(&arena, &diag, "t.tile", src);
    ck_assert_msg(f && diag.nerrors == 0, "parse errors:\n%s", diag.out.data ? diag.out.data : "");
    return lang_compile(&arena, &diag, f, &o);
}

static const IrValue *param(const IrModule *m, const char *fn, const char *name)
{
    for (int i = 0; i < m->nfuncs; i++) {
        if (strcmp(m->funcs[i]->name, fn)) continue;
        for (int j = 0; j < m->funcs[i]->nparams; j++)
            if (!strcmp(m->funcs[i]->params[j]->name, name)) return m->funcs[i]->params[j];
    }
    ck_abort_msg("no parameter %s.%s", fn, name);
    return NULL;
}

static const IrFunc *func(const IrModule *m, const char *fn)
{
    for (int i = 0; i < m->nfuncs; i++)
        if (!strcmp(m->funcs[i]->name, fn)) return m->funcs[i];
    ck_abort_msg("no kernel %s", fn);
    return NULL;
}

/* Ops of `b` (and nested regions) reading `v`; ops that are a const 1 of
 * element type `e` go to *ones. */
static int uses_in(const IrBlock *b, const IrValue *v, IrElem e, int *ones)
{
    int n = 0;
    for (const IrOp *op = b->first; op; op = op->next) {
        for (int i = 0; i < op->nargs; i++) n += op->args[i] == v;
        if (op->op == IR_CONST && op->nres == 1 && op->res[0]->type.rank == 0 && op->res[0]->type.elem == e &&
            op->ival == 1)
            ++*ones;
        for (int r = 0; r < op->nregions; r++) n += uses_in(op->regions[r], v, e, ones);
    }
    return n;
}

static int uses(const IrModule *m, const char *fn, const char *name, int *ones)
{
    const IrValue *p = param(m, fn, name);
    *ones = 0;
    return uses_in(func(m, fn)->body, p, (IrElem)p->type.elem, ones);
}

static void expect_error(const char *kernel, const char *const *hints, const char *msg)
{
    IrModule *m = compile(kernel, hints);
    ck_assert_msg(m == NULL, "expected an error containing '%s'", msg);
    ck_assert_msg(diag.out.data && strstr(diag.out.data, msg), "expected '%s' in:\n%s", msg,
                  diag.out.data ? diag.out.data : "");
}

START_TEST(hints_set_divisibility)
{
    const char *h[] = {"X=16", "n=32", "m=8", "count=4", NULL};
    IrModule *m = compile(NULL, h);
    ck_assert_msg(m, "unexpected errors:\n%s", diag.out.data ? diag.out.data : "");
    ck_assert_int_eq(param(m, "vec_add", "X")->divisibility, 16);
    ck_assert_int_eq(param(m, "vec_add", "Y")->divisibility, 1);   /* no hint: unknown */
    ck_assert_int_eq(param(m, "vec_add", "n")->divisibility, 32);
    ck_assert_int_eq(param(m, "vec_add", "m")->divisibility, 8);
    ck_assert_int_eq(param(m, "vec_add", "scale")->divisibility, 1);
    ck_assert_int_eq(param(m, "other", "count")->divisibility, 4);
    ck_assert_int_eq(param(m, "other", "P")->divisibility, 1);
}
END_TEST

START_TEST(no_hints_means_unknown)
{
    IrModule *m = compile(NULL, NULL);
    ck_assert_ptr_nonnull(m);
    for (int i = 0; i < m->nfuncs; i++)
        for (int j = 0; j < m->funcs[i]->nparams; j++) ck_assert_int_eq(m->funcs[i]->params[j]->divisibility, 1);
}
END_TEST

START_TEST(repeated_hint_keeps_the_stronger)
{
    const char *h[] = {"n=64", "n=4", "n=1", NULL};
    IrModule *m = compile("vec_add", h);
    ck_assert_ptr_nonnull(m);
    ck_assert_int_eq(param(m, "vec_add", "n")->divisibility, 64);
}
END_TEST

START_TEST(hint_for_another_kernel_with_one_selected)
{
    /* count is a parameter of 'other' only: with -k vec_add it names nothing. */
    const char *h[] = {"count=16", NULL};
    expect_error("vec_add", h, "t.tile: error: hint count=16: no runtime parameter is named 'count'");
    IrModule *m = compile("other", h);
    ck_assert_ptr_nonnull(m);
    ck_assert_int_eq(param(m, "other", "count")->divisibility, 16);
}
END_TEST

START_TEST(unknown_name_suggests)
{
    const char *h1[] = {"count_=16", NULL};
    expect_error(NULL, h1, "no runtime parameter is named 'count_'; did you mean 'count'?");
    const char *h2[] = {"N=16", NULL}; /* case only: the best guess even for a short name */
    expect_error(NULL, h2, "no runtime parameter is named 'N'; did you mean 'n'?");
    const char *h3[] = {"zzzz=16", NULL};
    IrModule *m = compile(NULL, h3);
    ck_assert_ptr_null(m);
    ck_assert_ptr_null(strstr(diag.out.data, "did you mean"));
}
END_TEST

START_TEST(bad_hints)
{
    const char *h1[] = {"n=12", NULL};
    expect_error(NULL, h1, "hint n=12: the divisibility must be a power of two");
    const char *h2[] = {"n=0", NULL};
    expect_error(NULL, h2, "hint n=0: the divisibility must be a power of two");
    const char *h3[] = {"n=-16", NULL};
    expect_error(NULL, h3, "hint n=-16: the divisibility must be a power of two");
    const char *h4[] = {"scale=16", NULL};
    expect_error(NULL, h4, "'scale' is a f32 parameter; divisibility hints apply to integer and pointer");
    const char *h5[] = {"flag=2", NULL};
    expect_error(NULL, h5, "'flag' is a i1 parameter");
    const char *h6[] = {"BLOCK=16", NULL};
    expect_error(NULL, h6, "hint BLOCK=16: 'BLOCK' is a const parameter");
}
END_TEST

START_TEST(hint_error_points_at_the_parameter)
{
    const char *h[] = {"scale=4", NULL};
    expect_error(NULL, h, "t.tile:1:");
    ck_assert_ptr_nonnull(strstr(diag.out.data, "scale: f32"));   /* the quoted source line */
}
END_TEST

START_TEST(equals_one_replaces_the_parameter)
{
    int ones = 0;
    /* without the hint s and t are read (s twice: the stride and the step) */
    IrModule *m = compile("strided", NULL);
    ck_assert_ptr_nonnull(m);
    ck_assert_int_eq(uses(m, "strided", "s", &ones), 2);
    ck_assert_int_eq(uses(m, "strided", "t", &ones), 1);
    ck_assert_int_eq(ones, 0);   /* no u8 constant 1 anywhere */
    const char *h[] = {"s==1", "t==1", NULL};
    m = compile("strided", h);
    ck_assert_msg(m, "unexpected errors:\n%s", diag.out.data ? diag.out.data : "");
    const IrFunc *f = func(m, "strided");
    ck_assert_int_eq(f->nparams, 5);   /* the signature (launch ABI) is unchanged */
    ck_assert_str_eq(f->params[2]->name, "s");
    ck_assert_int_eq(f->params[2]->type.elem, IR_I32);
    ck_assert_str_eq(f->params[3]->name, "t");
    ck_assert_int_eq(f->params[3]->type.elem, IR_U8);
    ck_assert_int_eq(uses(m, "strided", "s", &ones), 0);
    ck_assert_int_ge(ones, 1);   /* an i32 constant 1 stands in for s */
    ck_assert_int_eq(uses(m, "strided", "t", &ones), 0);
    ck_assert_int_eq(ones, 1);   /* and a u8 one for t */
    ck_assert_int_eq(uses(m, "strided", "n", &ones), 3);   /* other parameters untouched: 2 masks, the bound */
    ck_assert_int_eq(f->params[2]->divisibility, 1);
    /* repeated and an explicit divisibility 0 are fine; a divisibility hint on another parameter too */
    const char *h2[] = {"s==1/0", "s==1", "n=16", "X=16", NULL};
    m = compile("strided", h2);
    ck_assert_msg(m, "unexpected errors:\n%s", diag.out.data ? diag.out.data : "");
    ck_assert_int_eq(uses(m, "strided", "s", &ones), 0);
    ck_assert_int_eq(param(m, "strided", "n")->divisibility, 16);
}
END_TEST

START_TEST(equals_one_errors)
{
    const char *h1[] = {"X==1", NULL};
    expect_error("strided", h1, "t.tile:9:16: error: hint X==1: 'X' is a *f32 parameter; ==1 hints apply to "
                                "integer parameters");
    const char *h2[] = {"scale==1", NULL};
    expect_error("vec_add", h2, "hint scale==1: 'scale' is a f32 parameter; ==1 hints apply to integer");
    const char *h3[] = {"flag==1", NULL};
    expect_error("vec_add", h3, "hint flag==1: 'flag' is a bool parameter");
    const char *h4[] = {"BLOCK==1", NULL};
    expect_error("vec_add", h4, "t.tile: error: hint BLOCK==1: 'BLOCK' is a const parameter");
    const char *h5[] = {"countt==1", NULL};
    expect_error("other", h5, "hint countt==1: no runtime parameter is named 'countt'; did you mean 'count'?");
    const char *h6[] = {"s==1", "s=16", NULL};
    expect_error("strided", h6, "hints s==1 and s=16 contradict each other (1 is not a multiple of 16)");
    const char *h7[] = {"s==1/16", NULL};
    expect_error("strided", h7, "hint s==1 with divisibility 16: an equals-one hint carries no divisibility");
}
END_TEST

static Suite *hints_suite(void)
{
    Suite *s = suite_create("lang_hints");
    TCase *tc = tcase_create("all");
    tcase_add_test(tc, hints_set_divisibility);
    tcase_add_test(tc, no_hints_means_unknown);
    tcase_add_test(tc, repeated_hint_keeps_the_stronger);
    tcase_add_test(tc, hint_for_another_kernel_with_one_selected);
    tcase_add_test(tc, unknown_name_suggests);
    tcase_add_test(tc, bad_hints);
    tcase_add_test(tc, hint_error_points_at_the_parameter);
    tcase_add_test(tc, equals_one_replaces_the_parameter);
    tcase_add_test(tc, equals_one_errors);
    suite_add_tcase(s, tc);
    return s;
}

TU_MAIN(hints_suite)
