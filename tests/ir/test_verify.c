/* test_verify.c — ir_verify rejects broken IR with a precise message: broken
 * kernels written as text (the parser leaves type and structure rules to the
 * verifier) and, for what the parser itself refuses (use before definition,
 * values from a sibling region, duplicate ids, mismatched region arguments),
 * built in C. Each case names the op, its LINE:COL and the problem. */
#include "compiler/ir/ir.h"
#include "compiler/support/diag.h"
#include "compiler/support/support.h"
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

#define HEADER "kernel @k(%p: ptr<f32>, %q: ptr<i32>, %n: i32, %x: f32, %c: i1) num_warps = 4 num_stages = 2 {\n"

typedef struct Case {
    const char *body;   /* after HEADER (line 1); ends before the closing brace */
    const char *want;   /* fragment of the verifier's message */
} Case;

static const Case cases[] = {
    {"  %0 = arange 0, 64 : tensor<64xi32>\n  %1 = arange 0, 32 : tensor<32xi32>\n"
     "  %2 = add %0, %1 : tensor<64xi32>\n  return\n",
     "add at 4:3: operand 1 has type tensor<32xi32>, result tensor<64xi32>: elementwise shapes must match"},
    {"  %0 = add %n, %x : i32\n  return\n", "add at 2:3: operand 1 has type f32, expected i32"},
    {"  %0 = add %n : i32\n  return\n", "add at 2:3: expects 2 operands, got 1"},
    {"  %0 = cmp lt %n, %n : i32\n  return\n", "cmp at 2:3: result has type i32, expected elements of i1"},
    {"  %0 = cmp lt %n, %x : i1\n  return\n", "cmp at 2:3: compares i32 with f32"},
    {"  %0 = select %n, %x, %x : f32\n  return\n", "select at 2:3: condition has type i32, expected i1 elements"},
    {"  %0 = addptr %p, %x : ptr<f32>\n  return\n", "addptr at 2:3: offset has type f32, expected integers"},
    {"  %0 = exp %n : i32\n  return\n", "exp at 2:3: needs floats, got i32"},
    {"  %0 = load %p : i32\n  return\n",
     "load at 2:3: result has type i32, expected f32 (the pointee type in the pointer's shape)"},
    {"  %0 = load %p, %c, %x, %x : f32\n  return\n", "load at 2:3: expects 1 to 3 operands (ptr, mask, other), got 4"},
    {"  store %q, %x\n  return\n", "store at 2:3: value has type f32, expected i32"},
    {"  %0 = arange 0, 64 : tensor<64xi32>\n  %1 = splat %p : tensor<64xptr<f32>>\n"
     "  %2 = addptr %1, %0 : tensor<64xptr<f32>>\n  %m = splat %c : tensor<32xi1>\n"
     "  %3 = load %2, %m : tensor<64xf32>\n  return\n",
     "load at 6:3: mask has type tensor<32xi1>, expected tensor<64xi1>"},
    {"  %a = const 1 : tensor<16x32xf16>\n  %b = const 1 : tensor<16x16xf16>\n  %z = const 0 : tensor<16x16xf32>\n"
     "  %d = dot %a, %b, %z : tensor<16x16xf32>\n  return\n",
     "dot at 5:3: inner dimensions differ: tensor<16x32xf16> x tensor<16x16xf16>"},
    {"  %a = const 1 : tensor<16x16xf16>\n  %z = const 0 : tensor<16x16xf32>\n"
     "  %d = dot %a, %a, %z : tensor<16x16xf16>\n  return\n",
     "dot at 4:3: result has type tensor<16x16xf16>, accumulator tensor<16x16xf32>"},
    {"  %0 = const 1 : tensor<64xf32>\n  %1 = reduce sum 0 %0 : tensor<64xf32>\n  return\n",
     "reduce at 3:3: result has type tensor<64xf32>, expected f32"},
    {"  %0 = const 1 : tensor<8x64xf32>\n  %1 = reduce argmax 1 %0 : tensor<8xf32>\n  return\n",
     "reduce at 3:3: result has type tensor<8xf32>, expected tensor<8xi32>"},
    {"  %0 = const 1 : tensor<8x64xf32>\n  %1 = reduce max 2 %0 : tensor<8xf32>\n  return\n",
     "reduce at 3:3: axis 2 out of range for tensor<8x64xf32>"},
    {"  %0 = arange 0, 64 : tensor<64xi32>\n  %1 = expand_dims 1 %0 : tensor<1x64xi32>\n  return\n",
     "expand_dims at 3:3: result has type tensor<1x64xi32>, expected tensor<64x1xi32>"},
    {"  %0 = const 0 : tensor<16x64xi32>\n  %1 = broadcast %0 : tensor<32x64xi32>\n  return\n",
     "broadcast at 3:3: dimension 0 of tensor<16x64xi32> is neither 1 nor 32"},
    {"  %0 = arange 0, 64 : tensor<64xi32>\n  %1 = reshape %0 : tensor<8x4xi32>\n  return\n",
     "reshape at 3:3: element counts differ: tensor<64xi32> to tensor<8x4xi32>"},
    {"  %0 = const 0 : tensor<16x64xi32>\n  %1 = trans [0, 0] %0 : tensor<16x64xi32>\n  return\n",
     "trans at 3:3: attributes are not a permutation of 0..1"},
    {"  %0 = const 0 : tensor<16x64xi32>\n  %1 = trans [1, 0] %0 : tensor<16x64xi32>\n  return\n",
     "trans at 3:3: result has type tensor<16x64xi32>, expected tensor<64x16xi32>"},
    {"  %0 = arange 0, 64 : tensor<64xi32>\n  %1 = splat %0 : tensor<64xi32>\n  return\n",
     "splat at 3:3: expects a scalar and a tile result, got tensor<64xi32> to tensor<64xi32>"},
    {"  %0 = splat %n : tensor<64xi64>\n  return\n", "splat at 2:3: changes the element type: i32 to tensor<64xi64>"},
    {"  %0 = program_id 0 : i64\n  return\n", "program_id at 2:3: result has type i64, expected i32"},
    {"  %0 = arange 0, 64 : tensor<32xi32>\n  return\n", "arange at 2:3: result has type tensor<32xi32>, expected tensor<64xi32>"},
    {"  for %i = %x to %x step %x {\n    yield\n  }\n  return\n",
     "for at 2:3: bounds and step must be integer scalars of one type, operand 0 is f32"},
    {"  %0 = for %i = %n to %n step %n iter_args(%a = %x) : (f32) {\n    yield %i\n  }\n  return\n",
     "yield at 3:5: value 0 has type i32, the enclosing for's result 0 has f32"},
    {"  for %i = %n to %n step %n {\n    return\n  }\n  return\n", "return at 3:5: return inside a region"},
    {"  if %n {\n    yield\n  }\n  return\n", "if at 2:3: condition has type i32, expected i1"},
    {"  %0 = if %c : (f32) {\n    yield %x\n  } else {\n    yield\n  }\n  return\n",
     "yield at 5:5: yields 0 values, the enclosing if has 1 result"},
    {"  %0 = if %c : (f32) {\n    yield %x\n  }\n  return\n", "if at 2:3: expects then and else regions, got 1 region"},
    {"  return\n  %0 = const 1 : i32\n  return\n", "return at 2:3: terminator in the middle of a block (followed by const)"},
    {"  %0 = const 1 : i32\n", "const at 2:3: block does not end with a terminator ('return')"},
    {"  if %c {\n  }\n  return\n", "if at 2:3: block does not end with a terminator ('yield')"},
    {"  yield\n", "yield at 2:3: yield outside a for/if region"},
    {"  assert %n, \"x\"\n  return\n", "assert at 2:3: condition has type i32, expected i1"},
    {"  %0 = const 2 : i1\n  return\n", "const at 2:3: i1 constant 2"},
};

static IrFunc *parse_one(Arena *a, const char *src)
{
    Diag d;
    diag_init(&d, "v.ir", src);
    IrModule *m = ir_parse(a, &d, "v.ir", src);
    ck_assert_msg(m && m->nfuncs == 1, "does not parse:\n%s\n%s", src, d.out.data ? d.out.data : "");
    diag_free(&d);
    return m->funcs[0];
}

static void expect_fail(const IrFunc *f, const char *want, const char *what)
{
    StrBuf e;
    sb_init(&e);
    bool ok = ir_verify(f, &e);
    ck_assert_msg(!ok, "verifier accepted %s", what);
    ck_assert_msg(e.data && strncmp(e.data, "internal error: verifier: ", 26) == 0, "bad prefix: %s", e.data);
    ck_assert_msg(strstr(e.data, want) != NULL, "%s\nwanted: %s\ngot:    %s", what, want, e.data);
    sb_free(&e);
}

START_TEST(text_cases)
{
    ck_assert_int_ge((int)(sizeof cases / sizeof cases[0]), 15);
    const Case *c = &cases[_i];
    Arena a;
    arena_init(&a);
    char *src = arena_printf(&a, "%s%s}\n", HEADER, c->body);
    expect_fail(parse_one(&a, src), c->want, src);
    arena_free(&a);
}
END_TEST

/* The header with a correct body passes: the cases fail for their own reason. */
START_TEST(header_alone_ok)
{
    Arena a;
    arena_init(&a);
    StrBuf e;
    sb_init(&e);
    ck_assert(ir_verify(parse_one(&a, HEADER "  %0 = add %n, %n : i32\n  return\n}\n"), &e));
    ck_assert_ptr_null(e.data);
    arena_free(&a);
}
END_TEST

/* ---- GPU IR: layouts (the schedule attributes: tests/gpuir/test_verify_schedule.c) ---- */
#define L0 "#L0 = #blocked<spt=[1], tpw=[32], wpc=[4], order=[0]>\n"
#define GHEAD "kernel @g(%p: ptr<f16>, %n: i32) num_warps = 4 num_stages = 2"
static const Case gpu_cases[] = {
    {"#L0 = #blocked<spt=[1], tpw=[16], wpc=[4], order=[0]>\n" GHEAD " {\n  return\n}\n",
     "layout #L0: tpw covers 16 lanes, not 32"},
    {"#L0 = #blocked<spt=[1], tpw=[32], wpc=[8], order=[0]>\n" GHEAD " {\n  return\n}\n",
     "layout #L0: wpc covers 8 warps, the kernel has 4"},
    {"#L0 = #blocked<spt=[1,1], tpw=[1,32], wpc=[1,4], order=[1,1]>\n" GHEAD " {\n  return\n}\n",
     "layout #L0: order is not a permutation"},
    {L0 GHEAD " {\n  %0 = const 0 : tensor<8x8xi32, #L0>\n  return\n}\n",
     "const at 3:3: result 0: layout #L0 has rank 1, the value tensor<8x8xi32>"},
};

START_TEST(gpu_text_cases)
{
    const Case *c = &gpu_cases[_i];
    Arena a;
    arena_init(&a);
    expect_fail(parse_one(&a, c->body), c->want, c->body);
    arena_free(&a);
}
END_TEST

/* ir_verify_gpu (after layout assignment) wants a layout on every tile; ir_verify does not. */
START_TEST(gpu_tile_without_layout)
{
    Arena a;
    arena_init(&a);
    IrFunc *f = parse_one(&a, L0 GHEAD " {\n  %0 = arange 0, 64 : tensor<64xi32>\n  return\n}\n");
    StrBuf e;
    sb_init(&e);
    ck_assert(ir_verify(f, &e));
    ck_assert(!ir_verify_gpu(f, &e));
    ck_assert_msg(strstr(e.data, "arange at 3:3: result 0 is a tile without a layout"), "%s", e.data);
    sb_free(&e);
    arena_free(&a);
}
END_TEST

/* An #mma layout with other fields would print as something it is not. */
START_TEST(gpu_mma_fields_fixed)
{
    Arena a;
    arena_init(&a);
    IrFunc *f = parse_one(&a, GHEAD " {\n  return\n}\n");
    int l = ir_layout_mma(f, IR_MMA_C, 2, 2);
    StrBuf e;
    sb_init(&e);
    ck_assert(ir_verify(f, &e));
    ((IrLayout *)f->layouts.data[l])->spt[1] = 4;
    ck_assert(!ir_verify(f, &e));
    ck_assert_msg(strstr(e.data, "layout #L0: an mma layout whose fields are not those of #mma<C, wm=2, wn=2>"), "%s",
                  e.data);
    sb_free(&e);
    arena_free(&a);
}
END_TEST

/* ---- built in C: what the parser would refuse ---- */
static IrFunc *new_func(Arena *a, IrBuilder *b)
{
    IrFunc *f = ir_func_new(a, "c", (SrcLoc){"c.tile", 1, 1});
    *b = (IrBuilder){f, f->body, NULL, {"c.tile", 7, 3}};
    return f;
}

static void add_return(IrBuilder *b) { irb_insert(b, ir_op_new(b->f, IR_RETURN, b->loc, 0, NULL, 0, NULL)); }

START_TEST(use_before_def)
{
    Arena a;
    arena_init(&a);
    IrBuilder b;
    IrFunc *f = new_func(&a, &b);
    IrType i32 = ir_type_scalar(IR_I32);
    IrValue *c = irb_const_int(&b, i32, 3);
    IrValue *s = irb_op2(&b, IR_ADD, i32, c, c);
    b.loc.line = 8;
    IrValue *t = irb_op2(&b, IR_MUL, i32, s, s);
    add_return(&b);
    ir_op_unlink(t->def);           /* move the mul before the add it uses */
    ir_insert_before(s->def, t->def);
    expect_fail(f, "mul at 8:3: operand 0 (value #1) is used before its definition", "use before def");
    arena_free(&a);
}
END_TEST

START_TEST(sibling_region_use)
{
    Arena a;
    arena_init(&a);
    IrBuilder b;
    IrFunc *f = new_func(&a, &b);
    IrValue *cond = irb_const_int(&b, ir_type_scalar(IR_I1), 1);
    IrType f32 = ir_type_scalar(IR_F32);
    IrOp *ifop = ir_op_new(f, IR_IF, b.loc, 1, &cond, 1, &f32);
    irb_insert(&b, ifop);
    IrBuilder tb = {f, ir_op_add_region(f, ifop), NULL, {"c.tile", 9, 5}};
    IrValue *one = irb_const_float(&tb, f32, 1.0);
    irb_insert(&tb, ir_op_new(f, IR_YIELD, tb.loc, 1, &one, 0, NULL));
    IrBuilder eb = {f, ir_op_add_region(f, ifop), NULL, {"c.tile", 11, 5}};
    irb_insert(&eb, ir_op_new(f, IR_YIELD, eb.loc, 1, &one, 0, NULL)); /* `one` lives in the then region */
    add_return(&b);
    expect_fail(f, "yield at 11:5: operand 0 (value #2) is defined in a region that does not enclose this use",
                "sibling region use");
    /* ... and after the if, the then value is out of scope too. */
    arena_free(&a);
}
END_TEST

START_TEST(duplicate_ids)
{
    Arena a;
    arena_init(&a);
    IrBuilder b;
    IrFunc *f = new_func(&a, &b);
    IrType i32 = ir_type_scalar(IR_I32);
    irb_const_int(&b, i32, 1);
    IrValue *y = irb_const_int(&b, i32, 2);
    y->id = 0;
    add_return(&b);
    expect_fail(f, "const at 7:3: result 0 reuses value id 0 (ids must be unique)", "duplicate ids");
    arena_free(&a);
}
END_TEST

START_TEST(foreign_value)
{
    Arena a;
    arena_init(&a);
    IrBuilder b, b2;
    IrFunc *f = new_func(&a, &b);
    new_func(&a, &b2);
    IrType i32 = ir_type_scalar(IR_I32);
    irb_const_int(&b, i32, 1);
    IrValue *other = irb_const_int(&b2, i32, 2); /* id 0 in the other kernel */
    irb_op2(&b, IR_ADD, i32, other, other);
    add_return(&b);
    expect_fail(f, "add at 7:3: operand 0 (value #0) is not a value of this kernel", "foreign value");
    arena_free(&a);
}
END_TEST

START_TEST(for_region_args)
{
    Arena a;
    arena_init(&a);
    IrBuilder b;
    IrFunc *f = new_func(&a, &b);
    IrType i32 = ir_type_scalar(IR_I32), f32 = ir_type_scalar(IR_F32);
    IrValue *c = irb_const_int(&b, i32, 0);
    IrValue *init = irb_const_float(&b, f32, 0.5);
    IrValue *args[4] = {c, c, c, init};
    IrOp *loop = ir_op_new(f, IR_FOR, b.loc, 4, args, 1, &f32);
    irb_insert(&b, loop);
    IrBlock *body = ir_op_add_region(f, loop);
    ir_block_add_arg(body, i32, "i");
    IrValue *carried = ir_block_add_arg(body, i32, "acc"); /* should be f32 */
    irb_insert(&(IrBuilder){f, body, NULL, b.loc}, ir_op_new(f, IR_YIELD, b.loc, 1, &carried, 0, NULL));
    add_return(&b);
    expect_fail(f, "for at 7:3: region argument 1 must have the carried type f32", "carried arg type");
    arena_free(&a);
}
END_TEST

START_TEST(for_result_count)
{
    Arena a;
    arena_init(&a);
    IrBuilder b;
    IrFunc *f = new_func(&a, &b);
    IrType i32 = ir_type_scalar(IR_I32), f32 = ir_type_scalar(IR_F32);
    IrValue *c = irb_const_int(&b, i32, 0);
    IrValue *args[3] = {c, c, c};
    IrOp *loop = ir_op_new(f, IR_FOR, b.loc, 3, args, 1, &f32); /* a result but no init */
    irb_insert(&b, loop);
    IrBlock *body = ir_op_add_region(f, loop);
    ir_block_add_arg(body, i32, "i");
    irb_insert(&(IrBuilder){f, body, NULL, b.loc}, ir_op_new(f, IR_YIELD, b.loc, 0, NULL, 0, NULL));
    add_return(&b);
    expect_fail(f, "for at 7:3: has 0 loop-carried inits but 1 results", "for result count");
    arena_free(&a);
}
END_TEST

START_TEST(null_operand_no_crash)
{
    Arena a;
    arena_init(&a);
    IrBuilder b;
    IrFunc *f = new_func(&a, &b);
    IrType i32 = ir_type_scalar(IR_I32);
    IrValue *c = irb_const_int(&b, i32, 0);
    IrValue *s = irb_op2(&b, IR_ADD, i32, c, c);
    s->def->args[1] = NULL;
    add_return(&b);
    expect_fail(f, "add at 7:3: operand 1 is null", "null operand");
    /* The printer copes with it too. */
    StrBuf sb;
    sb_init(&sb);
    ir_print_func(&sb, f);
    ck_assert_ptr_nonnull(strstr(sb.data, "%1 = add %0, %?null : i32"));
    sb_free(&sb);
    arena_free(&a);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("ir_verify");
    TCase *tc = tcase_create("core");
    tcase_add_loop_test(tc, text_cases, 0, (int)(sizeof cases / sizeof cases[0]));
    tcase_add_test(tc, header_alone_ok);
    tcase_add_loop_test(tc, gpu_text_cases, 0, (int)(sizeof gpu_cases / sizeof gpu_cases[0]));
    tcase_add_test(tc, gpu_tile_without_layout);
    tcase_add_test(tc, gpu_mma_fields_fixed);
    tcase_add_test(tc, use_before_def);
    tcase_add_test(tc, sibling_region_use);
    tcase_add_test(tc, duplicate_ids);
    tcase_add_test(tc, foreign_value);
    tcase_add_test(tc, for_region_args);
    tcase_add_test(tc, for_result_count);
    tcase_add_test(tc, null_operand_no_crash);
    suite_add_tcase(s, tc);
    return s;
}

TU_MAIN(suite)
