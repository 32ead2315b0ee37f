/* test_roundtrip.c — the IR text format: every tests/ir/cases/NAME.ir parses,
 * verifies and prints to a fixed point (print(parse(print)) == print), with and
 * without locations; IR built in C prints to an exact expected text; float
 * constants survive print/parse bit for bit. */
#include "compiler/ir/ir.h"
#include "compiler/support/diag.h"
#include "testutil.h"

#include <dirent.h>
#include <math.h>
#include <string.h>

static char *print_mod(const IrModule *m, bool locs)
{
    StrBuf sb;
    sb_init(&sb);
    ir_print_module_ex(&sb, m, locs);
    return sb_steal(&sb);
}

/* Parse `src` (failing the test with the diagnostics if it does not parse). */
static IrModule *parse_ok(Arena *a, const char *path, const char *src)
{
    Diag d;
    diag_init(&d, path, src);
    IrModule *m = ir_parse(a, &d, path, src);
    ck_assert_msg(m != NULL, "%s does not parse:\n%s", path, d.out.data ? d.out.data : "");
    ck_assert_int_eq(d.nerrors, 0);
    diag_free(&d);
    return m;
}

static void verify_ok(const IrModule *m, const char *path)
{
    for (int i = 0; i < m->nfuncs; i++) {
        StrBuf e;
        sb_init(&e);
        bool ok = ir_verify(m->funcs[i], &e);
        ck_assert_msg(ok, "%s: @%s fails the verifier:\n%s", path, m->funcs[i]->name, e.data ? e.data : "");
        sb_free(&e);
    }
}

static int count_ops_block(const IrBlock *b)
{
    int n = 0;
    for (const IrOp *op = b->first; op; op = op->next) {
        n++;
        for (int r = 0; r < op->nregions; r++) n += count_ops_block(op->regions[r]);
    }
    return n;
}

static int count_ops(const IrModule *m)
{
    int n = 0;
    for (int i = 0; i < m->nfuncs; i++) n += count_ops_block(m->funcs[i]->body);
    return n;
}

static void roundtrip_file(const char *path)
{
    char *src = sup_read_file_text(path, NULL);
    ck_assert_msg(src != NULL, "cannot read %s", path);
    for (int locs = 0; locs < 2; locs++) {
        Arena a;
        arena_init(&a);
        IrModule *m = parse_ok(&a, path, src);
        ck_assert_msg(m->nfuncs >= 1, "%s has no kernel", path);
        verify_ok(m, path);
        char *p1 = print_mod(m, locs);
        IrModule *m2 = parse_ok(&a, "<print1>", p1);
        verify_ok(m2, "<print1>");
        ck_assert_int_eq(m2->nfuncs, m->nfuncs);
        ck_assert_int_eq(count_ops(m2), count_ops(m));
        char *p2 = print_mod(m2, locs);
        ck_assert_msg(strcmp(p1, p2) == 0, "%s: print is not a fixed point (locs=%d):\n--- first\n%s--- second\n%s",
                      path, locs, p1, p2);
        free(p1);
        free(p2);
        arena_free(&a);
    }
    free(src);
}

START_TEST(cases_roundtrip)
{
    const char *dir = tu_src_path("tests/ir/cases");
    DIR *d = opendir(dir);
    ck_assert_msg(d != NULL, "cannot open %s", dir);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 4 || strcmp(e->d_name + len - 3, ".ir") != 0) continue;
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        roundtrip_file(path);
        n++;
    }
    closedir(d);
    ck_assert_int_ge(n, 8);
}
END_TEST

/* Locations written as loc(...) come back as the ops' SrcLocs. */
START_TEST(locs_parsed)
{
    Arena a;
    arena_init(&a);
    const char *path = tu_src_path("tests/ir/cases/locs.ir");
    char *src = sup_read_file_text(path, NULL);
    IrModule *m = parse_ok(&a, path, src);
    IrFunc *f = m->funcs[0];
    ck_assert_str_eq(f->loc.file, "examples/copy.tile");
    ck_assert_int_eq(f->loc.line, 3);
    IrOp *op = f->body->first;
    ck_assert_int_eq(op->op, IR_PROGRAM_ID);
    ck_assert_str_eq(op->loc.file, "examples/copy.tile");
    ck_assert_int_eq(op->loc.line, 5);
    ck_assert_int_eq(op->loc.col, 16);
    ck_assert_int_eq(f->body->last->op, IR_RETURN);
    ck_assert_int_eq(f->body->last->loc.line, 12);
    /* Without loc(...) an op's location is its place in the .ir file. */
    IrModule *m2 = parse_ok(&a, "x.ir", "kernel @k() {\n  return\n}\n");
    ck_assert_str_eq(m2->funcs[0]->body->first->loc.file, "x.ir");
    ck_assert_int_eq(m2->funcs[0]->body->first->loc.line, 2);
    ck_assert_int_eq(m2->funcs[0]->body->first->loc.col, 3);
    free(src);
    arena_free(&a);
}
END_TEST

/* Builds: offs = pid * 64 + arange(64); a loop carrying a sum; store. */
static IrFunc *build_kernel(Arena *a, int junk_values)
{
    SrcLoc L = {"k.tile", 1, 1};
    IrFunc *f = ir_func_new(a, "built", L);
    for (int i = 0; i < junk_values; i++) ir_value_new(f, ir_type_scalar(IR_I32)); /* ids must not show */
    f->sched.num_warps = 8;
    IrValue *X = ir_func_add_param(f, ir_type_ptr(IR_F32), "X");
    X->divisibility = 16;
    IrValue *n = ir_func_add_param(f, ir_type_scalar(IR_I32), "n");
    f->consts = ARENA_ARRAY(a, IrConstParam, 3);
    f->consts[0] = (IrConstParam){.name = "BLOCK", .type = ir_type_scalar(IR_I32), .ival = 64, .fval = 64.0};
    f->consts[1] = (IrConstParam){.name = "score_mod", .type = ir_type_scalar(IR_VOID), .sval = "alibi"};
    f->consts[2] = (IrConstParam){.name = "T", .type = ir_type_scalar(IR_BF16), .sval = "bf16"};
    f->nconsts = 3;
    IrBuilder b = {f, f->body, NULL, {"k.tile", 2, 5}};
    IrType i32 = ir_type_scalar(IR_I32), f32 = ir_type_scalar(IR_F32);
    int32_t s64[1] = {64};
    IrType ti = ir_type_tile(i32, 1, s64), tf = ir_type_tile(f32, 1, s64);
    IrType tp = ir_type_tile(ir_type_ptr(IR_F32), 1, s64);
    IrValue *pid = irb_op(&b, IR_PROGRAM_ID, i32, 0, NULL);
    pid->name = "pid";
    IrValue *c64 = irb_const_int(&b, i32, 64);
    IrValue *base = irb_op2(&b, IR_MUL, i32, pid, c64);
    IrValue *ar = irb_op(&b, IR_ARANGE, ti, 0, NULL);
    ar->def->attr[1] = 64;
    IrValue *offs = irb_op2(&b, IR_ADD, ti, irb_op1(&b, IR_SPLAT, ti, base), ar);
    offs->name = "offs";
    IrValue *ptrs = irb_op2(&b, IR_ADDPTR, tp, irb_op1(&b, IR_SPLAT, tp, X), offs);
    IrValue *tenth = irb_const_float(&b, tf, 0.1f);
    tenth->name = "offs"; /* a clashing name hint prints as a number */
    IrValue *c0 = irb_const_int(&b, i32, 0), *c1 = irb_const_int(&b, i32, 1);
    IrValue *args[4] = {c0, n, c1, tenth};
    IrOp *loop = ir_op_new(f, IR_FOR, b.loc, 4, args, 1, &tf);
    irb_insert(&b, loop);
    IrBlock *body = ir_op_add_region(f, loop);
    IrValue *iv = ir_block_add_arg(body, i32, "i");
    IrValue *acc = ir_block_add_arg(body, tf, "acc");
    IrBuilder ib = {f, body, NULL, {"k.tile", 3, 9}};
    IrValue *ivf = irb_op1(&ib, IR_CAST, f32, iv);
    IrValue *sum = irb_op2(&ib, IR_ADD, tf, acc, irb_op1(&ib, IR_SPLAT, tf, ivf));
    irb_insert(&ib, ir_op_new(f, IR_YIELD, ib.loc, 1, &sum, 0, NULL));
    IrValue *sargs[2] = {ptrs, loop->res[0]};
    irb_insert(&b, ir_op_new(f, IR_STORE, b.loc, 2, sargs, 0, NULL));
    irb_insert(&b, ir_op_new(f, IR_RETURN, b.loc, 0, NULL, 0, NULL));
    return f;
}

static const char *const built_text =
    "kernel @built(%X: ptr<f32> {div = 16}, %n: i32) consts(BLOCK: i32 = 64, score_mod: fn = @alibi, T: dtype = bf16) num_warps = 8 num_stages = 2 {\n"
    "  %pid = program_id 0 : i32\n"
    "  %0 = const 64 : i32\n"
    "  %1 = mul %pid, %0 : i32\n"
    "  %2 = arange 0, 64 : tensor<64xi32>\n"
    "  %3 = splat %1 : tensor<64xi32>\n"
    "  %offs = add %3, %2 : tensor<64xi32>\n"
    "  %4 = splat %X : tensor<64xptr<f32>>\n"
    "  %5 = addptr %4, %offs : tensor<64xptr<f32>>\n"
    "  %6 = const 0.10000000149011612 : tensor<64xf32>\n"
    "  %7 = const 0 : i32\n"
    "  %8 = const 1 : i32\n"
    "  %9 = for %i = %7 to %n step %8 iter_args(%acc = %6) : (tensor<64xf32>) {\n"
    "    %10 = cast %i : f32\n"
    "    %11 = splat %10 : tensor<64xf32>\n"
    "    %12 = add %acc, %11 : tensor<64xf32>\n"
    "    yield %12\n"
    "  }\n"
    "  store %5, %9\n"
    "  return\n"
    "}\n";

START_TEST(builder_prints_exactly)
{
    Arena a;
    arena_init(&a);
    IrFunc *f = build_kernel(&a, 0);
    StrBuf e;
    sb_init(&e);
    ck_assert_msg(ir_verify(f, &e), "%s", e.data);
    sb_free(&e);
    StrBuf sb;
    sb_init(&sb);
    ir_print_func(&sb, f);
    ck_assert_str_eq(sb.data, built_text);
    /* The same IR built with other value ids prints the same. */
    StrBuf sb2;
    sb_init(&sb2);
    ir_print_func(&sb2, build_kernel(&a, 37));
    ck_assert_str_eq(sb2.data, built_text);
    /* With locations. */
    StrBuf sb3;
    sb_init(&sb3);
    ir_print_func_ex(&sb3, f, true);
    ck_assert_ptr_nonnull(strstr(sb3.data, "num_stages = 2 loc(\"k.tile\":1:1) {\n  %pid = program_id 0 : i32 loc(2:5)\n"));
    ck_assert_ptr_nonnull(strstr(sb3.data, "    yield %12 loc(3:9)\n  } loc(2:5)\n"));
    sb_free(&sb);
    sb_free(&sb2);
    sb_free(&sb3);
    arena_free(&a);
}
END_TEST

/* Random doubles (all bit patterns: subnormals, huge, negative zero, inf, nan)
 * print and parse back to the same bits. */
START_TEST(floats_exact)
{
    uint64_t state = 0x9e3779b97f4a7c15ull;
    const double special[] = {0.0, -0.0, INFINITY, -INFINITY, NAN, 0.1, 1.0 / 3.0, 5e-324, 1.7976931348623157e308,
                              (double)0.1f, 65504.0, 1e-45};
    for (int k = 0; k < 2000; k++) {
        double v;
        if (k < (int)(sizeof special / sizeof special[0])) v = special[k];
        else {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            memcpy(&v, &state, sizeof v);
        }
        Arena a;
        arena_init(&a);
        IrFunc *f = ir_func_new(&a, "f", (SrcLoc){0});
        IrBuilder b = {f, f->body, NULL, {0}};
        irb_const_float(&b, ir_type_scalar(IR_F64), v);
        irb_insert(&b, ir_op_new(f, IR_RETURN, b.loc, 0, NULL, 0, NULL));
        StrBuf sb;
        sb_init(&sb);
        ir_print_func(&sb, f);
        IrModule *m = parse_ok(&a, "<float>", sb.data);
        double back = m->funcs[0]->body->first->fval;
        if (isnan(v)) ck_assert_msg(isnan(back) && !!signbit(back) == !!signbit(v), "%s", sb.data);
        else ck_assert_msg(memcmp(&back, &v, sizeof v) == 0, "%.17g came back as %.17g:\n%s", v, back, sb.data);
        sb_free(&sb);
        arena_free(&a);
    }
}
END_TEST

/* The full example in docs/ir.md parses, verifies and prints back to itself
 * (its comment lines aside), so the documentation cannot drift. */
START_TEST(doc_example)
{
    char *doc = sup_read_file_text(tu_src_path("docs/ir.md"), NULL);
    ck_assert_ptr_nonnull(doc);
    char *start = strstr(doc, "## A full example");
    ck_assert_ptr_nonnull(start);
    start = strstr(start, "```\n");
    ck_assert_ptr_nonnull(start);
    start += 4;
    char *end = strstr(start, "```\n");
    ck_assert_ptr_nonnull(end);
    *end = 0;
    StrBuf want;
    sb_init(&want);
    for (const char *l = start; *l;) {
        const char *nl = strchr(l, '\n');
        size_t n = nl ? (size_t)(nl - l + 1) : strlen(l);
        if (strncmp(l, "//", 2) != 0) sb_putn(&want, l, n);
        l += n;
    }
    Arena a;
    arena_init(&a);
    IrModule *m = parse_ok(&a, "docs/ir.md", start);
    ck_assert_int_eq(m->nfuncs, 1);
    verify_ok(m, "docs/ir.md");
    char *p = print_mod(m, false);
    ck_assert_str_eq(p, want.data);
    free(p);
    sb_free(&want);
    arena_free(&a);
    free(doc);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("ir_roundtrip");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, cases_roundtrip);
    tcase_add_test(tc, locs_parsed);
    tcase_add_test(tc, builder_prints_exactly);
    tcase_add_test(tc, floats_exact);
    tcase_add_test(tc, doc_example);
    suite_add_tcase(s, tc);
    return s;
}

TU_MAIN(suite)
