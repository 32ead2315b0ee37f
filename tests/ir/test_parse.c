/* test_parse.c — ir_parse error messages: the exact text, file:line:col and
 * the caret under the offending column (IR files are test inputs, so a typo
 * in one must be found at once). The first error stops the parse. */
#include "compiler/ir/ir.h"
#include "compiler/support/diag.h"
#include "testutil.h"

#include <string.h>

typedef struct ErrCase {
    const char *src;
    const char *want;   /* the whole diagnostic output */
} ErrCase;

static const ErrCase cases[] = {
    {"kernel @k(%n: i32) {\n  %0 = add %n, %m : i32\n  return\n}\n",
     "t.ir:2:16: error: use of undefined value '%m'\n"
     "  %0 = add %n, %m : i32\n"
     "               ^\n"},
    {"kernel @k(%n: i32) {\n  %0 = ad %n, %n : i32\n  return\n}\n",
     "t.ir:2:8: error: unknown op 'ad'; did you mean 'add'?\n"
     "  %0 = ad %n, %n : i32\n"
     "       ^\n"},
    {"kernel @k(%n: i32) {\n  %0 = add %n, %n : i31\n  return\n}\n",
     "t.ir:2:21: error: unknown type 'i31'\n"
     "  %0 = add %n, %n : i31\n"
     "                    ^\n"},
    {"kernel @k(%n: i32) {\n  %0 = add %n, %n : i32\n  %0 = add %n, %n : i32\n  return\n}\n",
     "t.ir:3:3: error: redefinition of '%0'\n"
     "  %0 = add %n, %n : i32\n"
     "  ^\n"},
    {"kernel @k(%n: i32) {\n  %0, %1 = add %n, %n : i32\n  return\n}\n",
     "t.ir:2:3: error: 'add' has 1 result, 2 named\n"
     "  %0, %1 = add %n, %n : i32\n"
     "  ^\n"},
    {"kernel @k(%n: i32) {\n  %0 = add %n, %n\n  return\n}\n",
     "t.ir:3:3: error: expected ':', found 'return'\n"
     "  return\n"
     "  ^\n"},
    {"kernel @k() {\n  %0 = arange 0, 64 : tensor<64x>\n  return\n}\n",
     "t.ir:2:33: error: expected a type, found '>'\n"
     "  %0 = arange 0, 64 : tensor<64x>\n"
     "                                ^\n"},
    {"kernel @k() {\n  %0 = const 1.5 : i32\n  return\n}\n",
     "t.ir:2:14: error: bad integer constant '1.5'\n"
     "  %0 = const 1.5 : i32\n"
     "             ^\n"},
    {"kernel @k(%n: i32) {\n  %0 = cmp lq %n, %n : i1\n  return\n}\n",
     "t.ir:2:12: error: unknown predicate 'lq' (eq ne lt le gt ge)\n"
     "  %0 = cmp lq %n, %n : i1\n"
     "           ^\n"},
    {"kernel @k(%c: i1) {\n  %0 = if %c : (i32) {\n    %a = const 1 : i32\n    yield %a\n"
     "  } else {\n    yield %a\n  }\n  return\n}\n",
     "t.ir:6:11: error: use of undefined value '%a'\n"
     "    yield %a\n"
     "          ^\n"},
    {"kernel @k(%c: i1) {\n  %a, %b = if %c : (f32) {\n",
     "t.ir:2:18: error: 1 result type for 2 results\n"
     "  %a, %b = if %c : (f32) {\n"
     "                 ^\n"},
    {"kernel @k(%n: i32) {\n  %r = for %i = %n to %n step %n : (i32) {\n",
     "t.ir:2:3: error: 'for' has 0 iter_args but 1 result\n"
     "  %r = for %i = %n to %n step %n : (i32) {\n"
     "  ^\n"},
    {"func @k() {\n}\n",
     "t.ir:1:1: error: expected 'kernel', found 'func'\n"
     "func @k() {\n"
     "^\n"},
    {"kernel @k() {\n  return\n",
     "t.ir:3:1: error: expected '}' to close the block opened at 1:13\n"},
    {"kernel @k(%c: i1) {\n  assert %c, \"oops\n  return\n}\n",
     "t.ir:2:19: error: unterminated string\n"
     "  assert %c, \"oops\n"
     "                  ^\n"},
    {"kernel @k(%p: ptr<ptr>) {\n}\n",
     "t.ir:1:19: error: bad pointee type 'ptr'\n"
     "kernel @k(%p: ptr<ptr>) {\n"
     "                  ^\n"},
    {"kernel @k() {\n  return\n}\nkernel @k() {\n  return\n}\n",
     "t.ir:4:8: error: redefinition of kernel '@k'\n"
     "kernel @k() {\n"
     "       ^\n"},
    {"kernel @k() num_warps = 4 num_warps = 8 {\n}\n",
     "t.ir:1:27: error: 'num_warps' given twice\n"
     "kernel @k() num_warps = 4 num_warps = 8 {\n"
     "                          ^\n"},
    {"kernel @k() {\n  %0 = const 99999999999999999999 : i64\n  return\n}\n",
     "t.ir:2:14: error: integer constant '99999999999999999999' out of range\n"
     "  %0 = const 99999999999999999999 : i64\n"
     "             ^\n"},
    {"kernel @k(%n: i32) {\n  store %n, %n : i32\n}\n",
     "t.ir:2:16: error: an op without results takes no result type\n"
     "  store %n, %n : i32\n"
     "               ^\n"},
    {"kernel @k(%x: tensor<8x8x8x8x8xf32>) {\n}\n",
     "t.ir:1:30: error: tensor rank above 4\n"
     "kernel @k(%x: tensor<8x8x8x8x8xf32>) {\n"
     "                             ^\n"},
    /* GPU IR: layouts and attributes */
    {"#L0 = #blocked<spt=[1], tpw=[32], wpc=[4], order=[0]>\nkernel @k() {\n  %0 = arange 0, 64 : tensor<64xi32, #L1>\n}\n",
     "t.ir:3:38: error: undefined layout '#L1'\n"
     "  %0 = arange 0, 64 : tensor<64xi32, #L1>\n"
     "                                     ^\n"},
    {"#L1 = #mma<C, wm=2, wn=2>\n",
     "t.ir:1:1: error: layout '#L1' out of order (expected #L0)\n"
     "#L1 = #mma<C, wm=2, wn=2>\n"
     "^\n"},
    {"#L0 = #mma<A, wm=4, wn=2, rn=4>\n",   /* A is replicated over warp_n: no column split */
     "t.ir:1:12: error: rn applies to the C and B fragments, and is positive\n"
     "#L0 = #mma<A, wm=4, wn=2, rn=4>\n"
     "           ^\n"},
    {"#L0 = #blocked<spt=[1], tpw=[32,1], wpc=[4], order=[0]>\n",
     "t.ir:1:25: error: 'tpw' has 2 entries, the layout rank is 1\n"
     "#L0 = #blocked<spt=[1], tpw=[32,1], wpc=[4], order=[0]>\n"
     "                        ^\n"},
    {"#L0 = #blocked<spt=[1], tpw=[32], order=[0]>\n",
     "t.ir:1:44: error: #blocked needs 'wpc'\n"
     "#L0 = #blocked<spt=[1], tpw=[32], order=[0]>\n"
     "                                           ^\n"},
    {"kernel @k(%n: i32) {\n  %0 = add %n, %n {a = 1, a = 2} : i32\n}\n",
     "t.ir:2:27: error: attribute 'a' given twice\n"
     "  %0 = add %n, %n {a = 1, a = 2} : i32\n"
     "                          ^\n"},
    {"kernel @k(%x: ptr<f32>) consts(T: tensor<4xf32, #L0> = 1) {\n}\n",
     "t.ir:1:47: error: a layout is not allowed here\n"
     "kernel @k(%x: ptr<f32>) consts(T: tensor<4xf32, #L0> = 1) {\n"
     "                                              ^\n"},
};

START_TEST(parse_errors)
{
    const ErrCase *c = &cases[_i];
    Arena a;
    arena_init(&a);
    Diag d;
    diag_init(&d, "t.ir", c->src);
    IrModule *m = ir_parse(&a, &d, "t.ir", c->src);
    ck_assert_ptr_null(m);
    ck_assert_int_eq(d.nerrors, 1);
    ck_assert_str_eq(d.out.data, c->want);
    diag_free(&d);
    arena_free(&a);
}
END_TEST

/* Comments, blank lines and either order of num_warps/num_stages are fine;
 * an empty file is an empty module; a `tensor<...>` and unparenthesised
 * multi-result types are accepted. */
START_TEST(parse_accepts)
{
    Arena a;
    arena_init(&a);
    Diag d;
    const char *src =
        "// leading comment\n\n"
        "kernel @k(%c: i1, %n: i32) num_stages = 3 num_warps = 8 { // trailing\n"
        "  %a, %b = if %c : i32, f32 {\n"
        "    %0 = const 0x10 : i32\n    %1 = const -2.5e-3 : f32\n    yield %0, %1\n"
        "  } else {\n    %0 = const -7 : i32\n    %1 = const 1 : f32\n    yield %0, %1\n  }\n"
        "  return\n}\n";
    diag_init(&d, "ok.ir", src);
    IrModule *m = ir_parse(&a, &d, "ok.ir", src);
    ck_assert_msg(m != NULL, "%s", d.out.data);
    IrFunc *f = m->funcs[0];
    ck_assert_int_eq(f->sched.num_warps, 8);
    ck_assert_int_eq(f->sched.num_stages, 3);
    IrOp *ifop = f->body->first;
    ck_assert_int_eq(ifop->nres, 2);
    ck_assert_int_eq(ifop->regions[0]->first->ival, 16);
    ck_assert(ifop->regions[0]->first->next->fval == -2.5e-3);
    ck_assert_int_eq(ifop->regions[1]->first->ival, -7);
    ck_assert_str_eq(ifop->res[0]->name, "a");
    StrBuf e;
    sb_init(&e);
    ck_assert_msg(ir_verify(f, &e), "%s", e.data);
    diag_free(&d);
    diag_init(&d, "empty.ir", "");
    m = ir_parse(&a, &d, "empty.ir", "  // nothing\n");
    ck_assert_ptr_nonnull(m);
    ck_assert_int_eq(m->nfuncs, 0);
    diag_free(&d);
    arena_free(&a);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("ir_parse");
    TCase *tc = tcase_create("core");
    tcase_add_loop_test(tc, parse_errors, 0, (int)(sizeof cases / sizeof cases[0]));
    tcase_add_test(tc, parse_accepts);
    suite_add_tcase(s, tc);
    return s;
}

TU_MAIN(suite)
