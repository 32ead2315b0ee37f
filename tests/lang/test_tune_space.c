/* test_tune_space.c — `tune` declarations: the parser's AST, the enumeration of a space
 * (order, values as -D text, constraints with the caller's defines and the kernel's
 * defaults, keys) and the checker's located errors that the diag corpus does not reach
 * (tests/diag/sema_tune_*.tile hold the rest). */
#include "testutil.h"

#include "compiler/lang/ast.h"
#include "compiler/lang/lang.h"
#include "compiler/support/diag.h"

#include <string.h>

static const char *kernel_src =
    "kernel k(X: *f32, n: i32, const BLOCK: i32 = 128, const BN: i32 = 64, const D: i32 = 64,\n"
    "         const PAD: i32 = D <= 64 ? 64 : 128, const T: dtype = f32) with (num_warps = 4)\n"
    "{\n"
    "    let offs = program_id(0) * BLOCK + arange(BLOCK);\n"
    "    store(X + offs, load(X + offs, mask = offs < n), mask = offs < n);\n"
    "}\n"
    "kernel k_f16 = k(T = f16);\n";

typedef struct Ctx {
    Arena arena;
    Diag diag;
    AstFile *file;
    char *src;
} Ctx;

static Ctx *open_src(const char *tune)
{
    Ctx *c = calloc(1, sizeof *c);
    size_t n = strlen(kernel_src) + strlen(tune) + 1;
    c->src = malloc(n);
    snprintf(c->src, n, "%s%s", kernel_src, tune);
    arena_init(&c->arena);
    diag_init(&c->diag, "t.tile", c->src);
    c->file = ast_parse(&c->arena, &c->diag, "t.tile", c->src);
    ck_assert_msg(c->file && !c->diag.nerrors, "parse errors:\n%s", c->diag.out.data);
    return c;
}

static void close_ctx(Ctx *c)
{
    diag_free(&c->diag);
    arena_free(&c->arena);
    free(c->src);
    free(c);
}

static const char *cfg_text(const TuneSpace *sp, int c, int d)
{
    return sp->dims[d].vals[sp->configs[c * sp->ndims + d]].text;
}

START_TEST(test_ast_print)
{
    Ctx *c = open_src("tune k { BLOCK in [64, 128,]; num_warps in [4]; require BLOCK >= 64; key n, D; }\n");
    StrBuf sb;
    sb_init(&sb);
    ast_print(&sb, c->file);
    ck_assert_ptr_nonnull(strstr(sb.data, "(tune k\n  (in BLOCK 64 128)\n  (in num_warps 4)\n"
                                          "  (require (>= BLOCK 64))\n  (key n D))\n"));
    sb_free(&sb);
    close_ctx(c);
}
END_TEST

START_TEST(test_enumerate_order_and_constraints)
{
    Ctx *c = open_src("tune k {\n"
                      "  BLOCK in [32, 64, 128];\n"
                      "  BN in [16, 32, 64];\n"
                      "  pingpong in [false, true];\n"
                      "  require BN <= BLOCK && BLOCK * PAD <= 8192;\n"
                      "  key D, n;\n"
                      "}\n");
    LangDefine defs[] = {{"D", "128"}};
    TuneSpace *sp = sema_tune_space(&c->arena, &c->diag, c->file, "k", defs, 1);
    ck_assert_msg(sp != NULL, "%s", c->diag.out.data);
    ck_assert_int_eq(sp->ndims, 3);
    ck_assert_int_eq(sp->ntotal, 18);
    /* D = 128 makes PAD 128: BLOCK * 128 <= 8192 keeps BLOCK 32 and 64; BN <= BLOCK keeps
     * (32: 16, 32), (64: 16, 32, 64); x 2 pingpong = 10 */
    ck_assert_int_eq(sp->nconfigs, 10);
    /* first dimension slowest, last fastest */
    ck_assert_str_eq(cfg_text(sp, 0, 0), "32");
    ck_assert_str_eq(cfg_text(sp, 0, 1), "16");
    ck_assert_str_eq(cfg_text(sp, 0, 2), "false");
    ck_assert_str_eq(cfg_text(sp, 1, 2), "true");
    ck_assert_str_eq(cfg_text(sp, 9, 0), "64");
    ck_assert_str_eq(cfg_text(sp, 9, 1), "64");
    ck_assert_int_eq(sp->dims[2].kind, TUNE_SCHED);
    ck_assert_int_eq(sp->nkey, 2);
    ck_assert(!sp->key_runtime[0] && sp->key_runtime[1]);
    /* without the define, the default D = 64 (PAD 64) keeps BLOCK 128 too */
    Diag d2;
    diag_init(&d2, "t.tile", c->src);
    TuneSpace *sp2 = sema_tune_space(&c->arena, &d2, c->file, "k", NULL, 0);
    ck_assert_ptr_nonnull(sp2);
    ck_assert_int_eq(sp2->nconfigs, 16);
    diag_free(&d2);
    close_ctx(c);
}
END_TEST

START_TEST(test_instance_uses_generic_space)
{
    Ctx *c = open_src("tune k { BLOCK in [64, 128]; T in [f16, bf16]; num_stages in [1, 3]; }\n");
    /* the instance binds T: its space is the generic's, and T is no parameter of it */
    TuneSpace *sp = sema_tune_space(&c->arena, &c->diag, c->file, "k_f16", NULL, 0);
    ck_assert_ptr_null(sp);
    ck_assert_ptr_nonnull(strstr(c->diag.out.data, "'T' is no const parameter of kernel 'k'"));
    close_ctx(c);
    c = open_src("tune k { BLOCK in [64, 128]; T in [f16, bf16]; num_stages in [1, 3]; }\n");
    sp = sema_tune_space(&c->arena, &c->diag, c->file, "k", NULL, 0);
    ck_assert_ptr_nonnull(sp);
    ck_assert_int_eq(sp->nconfigs, 8);
    ck_assert_str_eq(cfg_text(sp, 2, 1), "bf16");
    ck_assert_int_eq(sp->dims[2].kind, TUNE_STAGES);
    close_ctx(c);
}
END_TEST

START_TEST(test_no_space_and_errors)
{
    Ctx *c = open_src("\n");
    ck_assert_ptr_null(sema_tune_space(&c->arena, &c->diag, c->file, "k", NULL, 0));
    ck_assert_ptr_nonnull(strstr(c->diag.out.data, "declares no tune space"));
    close_ctx(c);
    c = open_src("tune k { BLOCK in [64, 128]; require BLOCK / (BN - 64) > 0; }\n");
    ck_assert_ptr_null(sema_tune_space(&c->arena, &c->diag, c->file, "k", NULL, 0));
    ck_assert_msg(strstr(c->diag.out.data, "t.tile:8:44: error: division by zero"), "%s", c->diag.out.data);
    close_ctx(c);
    c = open_src("tune k { BLOCK in [64, 128]; require BLOCK <= PAD; }\n");
    LangDefine defs[] = {{"D", "f16"}};
    /* a define that is no number, read by a constraint through PAD's default */
    ck_assert_ptr_null(sema_tune_space(&c->arena, &c->diag, c->file, "k", defs, 1));
    ck_assert_ptr_nonnull(strstr(c->diag.out.data, "'D' is not a number here"));
    close_ctx(c);
}
END_TEST

START_TEST(test_compile_ignores_tune)
{
    /* sema skips the decl: the kernel compiles as without it, and a bad space is an error */
    Ctx *c = open_src("tune k { BLOCK in [64, 128]; }\n");
    LangOptions lo = {.kernel = "k"};
    IrModule *m = lang_compile(&c->arena, &c->diag, c->file, &lo);
    ck_assert_msg(m && m->nfuncs == 1, "%s", c->diag.out.data);
    close_ctx(c);
    c = open_src("tune k { BLOCK in [64, 128]; require BLOCK > 4096; }\n");
    ck_assert_ptr_null(lang_compile(&c->arena, &c->diag, c->file, &lo));
    ck_assert_ptr_nonnull(strstr(c->diag.out.data, "removes every configuration (2 remained before it)"));
    close_ctx(c);
}
END_TEST

static Suite *tune_suite(void)
{
    Suite *s = suite_create("tune_space");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_ast_print);
    tcase_add_test(tc, test_enumerate_order_and_constraints);
    tcase_add_test(tc, test_instance_uses_generic_space);
    tcase_add_test(tc, test_no_space_and_errors);
    tcase_add_test(tc, test_compile_ignores_tune);
    suite_add_tcase(s, tc);
    return s;
}

TU_MAIN(tune_suite)
