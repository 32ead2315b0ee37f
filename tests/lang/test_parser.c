/* test_parser.c — lexer + parser + ast_print: AST shapes, precedence,
 * literals, locations, the docs and DESIGN programs, error recovery and
 * robustness on hostile inputs. */
#include "testutil.h"

#include "compiler/lang/ast.h"
#include "compiler/support/diag.h"

#include <string.h>

typedef struct Parsed {
    Arena arena;
    Diag diag;
    AstFile *file;
    StrBuf printed;
} Parsed;

static Parsed *parse(const char *src)
{
    Parsed *p = calloc(1, sizeof *p);
    arena_init(&p->arena);
    diag_init(&p->diag, "t.tile", src);
    p->file = ast_parse(&p->arena, &p->diag, "t.tile", src);
    sb_init(&p->printed);
    if (p->file) ast_print(&p->printed, p->file);
    return p;
}

static void done(Parsed *p)
{
    sb_free(&p->printed);
    diag_free(&p->diag);
    arena_free(&p->arena);
    free(p);
}

static const char *errs(Parsed *p) { return p->diag.out.data ? p->diag.out.data : ""; }

static Parsed *parse_ok(const char *src)
{
    Parsed *p = parse(src);
    ck_assert_msg(p->file != NULL, "no AST for:\n%s", src);
    ck_assert_msg(p->diag.nerrors == 0, "unexpected errors:\n%s", errs(p));
    return p;
}

/* Parse `const X = <expr>;` and return the printed expression. */
static void check_expr(const char *expr, const char *want)
{
    char src[512];
    snprintf(src, sizeof src, "const X = %s;", expr);
    Parsed *p = parse_ok(src);
    char buf[512];
    snprintf(buf, sizeof buf, "(const X %s)\n", want);
    ck_assert_str_eq(p->printed.data, buf);
    done(p);
}

static const AstStmt *body_stmt(const AstDecl *d, int i)
{
    ck_assert_int_eq(d->body->kind, AST_BLOCK);
    ck_assert_int_lt(i, d->body->nstmts);
    return d->body->stmts[i];
}

static const char *VEC_ADD =
    "// One program adds BLOCK elements.\n"
    "kernel vec_add(X: *f32, Y: *f32, Z: *f32, n: i32, const BLOCK: i32 = 1024)\n"
    "    with (num_warps = 4)\n"
    "{\n"
    "    let offs = program_id(0) * BLOCK + arange(BLOCK);\n"
    "    let mask = offs < n;\n"
    "    let x = load(X + offs, mask = mask, other = 0);\n"
    "    let y = load(Y + offs, mask = mask, other = 0);\n"
    "    store(Z + offs, x + y, mask = mask);\n"
    "}\n";

START_TEST(test_vec_add_shape)
{
    Parsed *p = parse_ok(VEC_ADD);
    ck_assert_int_eq(p->file->ndecls, 1);
    const AstDecl *k = p->file->decls[0];
    ck_assert_int_eq(k->kind, AST_KERNEL);
    ck_assert_str_eq(k->name, "vec_add");
    ck_assert_int_eq(k->loc.line, 2);
    ck_assert_int_eq(k->loc.col, 1);
    ck_assert_int_eq(k->name_loc.col, 8);
    ck_assert_int_eq(k->nparams, 5);
    ck_assert_str_eq(k->params[0].name, "X");
    ck_assert(k->params[0].type.is_ptr);
    ck_assert_str_eq(k->params[0].type.name, "f32");
    ck_assert(!k->params[3].type.is_ptr);
    ck_assert_str_eq(k->params[3].type.name, "i32");
    ck_assert(k->params[4].is_const);
    ck_assert_int_eq(k->params[4].default_value->kind, AST_INT);
    ck_assert_int_eq(k->params[4].default_value->ival, 1024);
    ck_assert_int_eq(k->params[4].loc.col, 51); /* the 'const' keyword */
    ck_assert_int_eq(k->nsettings, 1);
    ck_assert_str_eq(k->settings[0].name, "num_warps");
    ck_assert_int_eq(k->settings[0].value->ival, 4);
    ck_assert_int_eq(k->body->nstmts, 5);

    const AstStmt *s0 = body_stmt(k, 0);
    ck_assert_int_eq(s0->kind, AST_LET);
    ck_assert_str_eq(s0->name, "offs");
    ck_assert_int_eq(s0->loc.line, 5);
    ck_assert_int_eq(s0->loc.col, 5);
    ck_assert_int_eq(s0->name_loc.col, 9);
    /* program_id(0) * BLOCK + arange(BLOCK): '+' at the top, at its own token */
    const AstExpr *e = s0->value;
    ck_assert_int_eq(e->kind, AST_BINARY);
    ck_assert_int_eq(e->op, OP_ADD);
    ck_assert_int_eq(e->loc.col, 38);
    ck_assert_int_eq(e->lhs->op, OP_MUL);
    ck_assert_int_eq(e->lhs->lhs->kind, AST_CALL);
    ck_assert_str_eq(e->lhs->lhs->sval, "program_id");
    ck_assert_int_eq(e->lhs->lhs->loc.col, 16);
    ck_assert_int_eq(e->rhs->kind, AST_CALL);

    const AstExpr *ld = body_stmt(k, 2)->value;
    ck_assert_int_eq(ld->kind, AST_CALL);
    ck_assert_int_eq(ld->nargs, 3);
    ck_assert_ptr_null(ld->args[0].name);
    ck_assert_str_eq(ld->args[1].name, "mask");
    ck_assert_str_eq(ld->args[1].value->sval, "mask");
    ck_assert_str_eq(ld->args[2].name, "other");

    const AstStmt *st = body_stmt(k, 4);
    ck_assert_int_eq(st->kind, AST_EXPR);
    ck_assert_int_eq(st->loc.col, 5);
    ck_assert_str_eq(st->value->sval, "store");
    done(p);
}
END_TEST

START_TEST(test_print_golden)
{
    Parsed *p = parse_ok(VEC_ADD);
    const char *want =
        "(kernel vec_add (param X *f32) (param Y *f32) (param Z *f32) (param n i32)"
        " (param const BLOCK i32 = 1024)\n"
        "  (with (num_warps 4))\n"
        "  (block\n"
        "    (let offs (+ (* (call program_id 0) BLOCK) (call arange BLOCK)))\n"
        "    (let mask (< offs n))\n"
        "    (let x (call load (+ X offs) mask=mask other=0))\n"
        "    (let y (call load (+ Y offs) mask=mask other=0))\n"
        "    (expr (call store (+ Z offs) (+ x y) mask=mask))))\n";
    ck_assert_str_eq(p->printed.data, want);
    done(p);

    p = parse_ok("const N = 4;\n"
                 "fn helper(a, const f: fn, b: *bf16) {\n"
                 "  var acc = zeros([N, 2], f32);\n"
                 "  for i in range(4) { acc += a; }\n"
                 "  for j in range(1, N, 2) { acc <<= 1; }\n"
                 "  if a { return; } else if !a { acc = -acc; } else { { } }\n"
                 "  static_assert(N % 2 == 0, \"N \\\"even\\\"\\n\");\n"
                 "  return acc.to(bf16)[:, None];\n"
                 "}\n");
    want = "(const N 4)\n"
           "(fn helper (param a) (param const f fn) (param b *bf16)\n"
           "  (block\n"
           "    (var acc (call zeros (list N 2) f32))\n"
           "    (for i (range 0 4)\n"
           "      (block\n"
           "        (+= acc a)))\n"
           "    (for j (range 1 N 2)\n"
           "      (block\n"
           "        (<<= acc 1)))\n"
           "    (if a\n"
           "      (block\n"
           "        (return))\n"
           "      (else\n"
           "        (if (! a)\n"
           "          (block\n"
           "            (= acc (- acc)))\n"
           "          (else\n"
           "            (block\n"
           "              (block))))))\n"
           "    (expr (call static_assert (== (% N 2) 0) \"N \\\"even\\\"\\n\"))\n"
           "    (return (index (method to acc bf16) : None))))\n";
    ck_assert_str_eq(p->printed.data, want);
    done(p);
}
END_TEST

START_TEST(test_precedence)
{
    check_expr("a + b * c", "(+ a (* b c))");
    check_expr("a * b + c", "(+ (* a b) c)");
    check_expr("a - b - c", "(- (- a b) c)");
    check_expr("a / b % c", "(% (/ a b) c)");
    check_expr("a << b + c", "(<< a (+ b c))");
    check_expr("a < b << c", "(< a (<< b c))");
    check_expr("a == b < c", "(== a (< b c))");
    check_expr("a & b == c", "(& a (== b c))");
    check_expr("a | b ^ c & d", "(| a (^ b (& c d)))");
    check_expr("a || b && c | d", "(|| a (&& b (| c d)))");
    check_expr("a && b || c", "(|| (&& a b) c)");
    check_expr("a ? b : c ? d : e", "(? a b (? c d e))");
    check_expr("a || b ? c + 1 : d", "(? (|| a b) (+ c 1) d)");
    check_expr("a ? b ? c : d : e", "(? a (? b c d) e)");
    check_expr("-a * b", "(* (- a) b)");
    check_expr("- -a", "(- (- a))");
    check_expr("!a && ~b", "(&& (! a) (~ b))");
    check_expr("+a - -b", "(- (+ a) (- b))");
    check_expr("-x[:, None]", "(- (index x : None))");
    check_expr("-x.to(f16)", "(- (method to x f16))");
    check_expr("(a + b) * c", "(* (+ a b) c)");
    check_expr("x.to(bf16)[None, :] * 2", "(* (index (method to x bf16) None :) 2)");
    check_expr("a >= b != c <= d", "(!= (>= a b) (<= c d))");
    check_expr("a >> 1 > 2", "(> (>> a 1) 2)");
}
END_TEST

START_TEST(test_literals)
{
    check_expr("1_000", "1000");
    check_expr("0x2A", "42");
    check_expr("0X2a_2A", "10794");
    check_expr("0b101", "5");
    check_expr("0b1_0000_0000", "256");
    check_expr("9223372036854775807", "9223372036854775807");
    check_expr("0x7fff_ffff_ffff_ffff", "9223372036854775807");
    check_expr("2147483648", "2147483648");
    check_expr("1.0", "1.0");
    check_expr(".5", "0.5");
    check_expr("1e-3", "0.001");
    check_expr("2.5e+4", "25000.0");
    check_expr("1_0.2_5", "10.25");
    check_expr("1e20", "1e+20");
    check_expr("0.00001", "1e-05");
    check_expr("inf", "inf");
    check_expr("-inf", "(- inf)");
    check_expr("true && false", "(&& true false)");
    check_expr("[]", "(list)");
    check_expr("[128, 64,]", "(list 128 64)");
    check_expr("f(1, 2,)", "(call f 1 2)");

    Parsed *p = parse_ok("const X = 0.1;");
    const AstExpr *e = p->file->decls[0]->value;
    ck_assert_int_eq(e->kind, AST_FLOAT);
    ck_assert(e->fval == 0.1);
    done(p);
    p = parse_ok("const X = 1.5e3;");
    ck_assert(p->file->decls[0]->value->fval == 1500.0);
    done(p);
    p = parse_ok("const S = \"a\\\\b\\\"c\\n\";");
    ck_assert_int_eq(p->file->decls[0]->value->kind, AST_STRING);
    ck_assert_str_eq(p->file->decls[0]->value->sval, "a\\b\"c\n");
    done(p);
}
END_TEST

START_TEST(test_statements)
{
    Parsed *p = parse_ok("fn f(x) {\n"
                         "  x = 1; x += 1; x -= 1; x *= 1; x /= 1; x %= 1;\n"
                         "  x &= 1; x |= 1; x ^= 1; x <<= 1; x >>= 1;\n"
                         "  if a { } else if b { } else { }\n"
                         "  for i in range(lo, hi, st) { let y = i; }\n"
                         "  return x;\n"
                         "}");
    const AstDecl *f = p->file->decls[0];
    ck_assert_int_eq(f->kind, AST_FN);
    ck_assert_ptr_null(f->params[0].type.name);
    int ops[] = {-1, OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_MOD,
                 OP_BITAND, OP_BITOR, OP_BITXOR, OP_SHL, OP_SHR};
    for (int i = 0; i < 11; i++) {
        const AstStmt *s = body_stmt(f, i);
        ck_assert_int_eq(s->kind, AST_ASSIGN);
        ck_assert_str_eq(s->name, "x");
        ck_assert_int_eq(s->op, ops[i]);
    }
    const AstStmt *s = body_stmt(f, 11);
    ck_assert_int_eq(s->kind, AST_IF);
    ck_assert_str_eq(s->value->sval, "a");
    ck_assert_int_eq(s->body->kind, AST_BLOCK);
    ck_assert_int_eq(s->else_body->kind, AST_IF);
    ck_assert_str_eq(s->else_body->value->sval, "b");
    ck_assert_int_eq(s->else_body->else_body->kind, AST_BLOCK);
    ck_assert_ptr_null(s->else_body->else_body->else_body);
    s = body_stmt(f, 12);
    ck_assert_int_eq(s->kind, AST_FOR);
    ck_assert_str_eq(s->name, "i");
    ck_assert_str_eq(s->lo->sval, "lo");
    ck_assert_str_eq(s->hi->sval, "hi");
    ck_assert_str_eq(s->step->sval, "st");
    ck_assert_int_eq(s->body->nstmts, 1);
    s = body_stmt(f, 13);
    ck_assert_int_eq(s->kind, AST_RETURN);
    ck_assert_str_eq(s->value->sval, "x");
    done(p);

    /* range(hi) gets lo = 0 and no step */
    p = parse_ok("fn g() { for i in range(n) { } }");
    s = body_stmt(p->file->decls[0], 0);
    ck_assert_int_eq(s->lo->kind, AST_INT);
    ck_assert_int_eq(s->lo->ival, 0);
    ck_assert_ptr_null(s->step);
    done(p);
}
END_TEST

START_TEST(test_kernel_settings)
{
    Parsed *p = parse_ok("const W = 8;\n"
                         "kernel k(const S: i32 = 3,) with (num_warps = W / 2, num_stages = S) { }\n");
    ck_assert_int_eq(p->file->ndecls, 2);
    ck_assert_int_eq(p->file->decls[0]->kind, AST_CONST);
    ck_assert_str_eq(p->file->decls[0]->name, "W");
    const AstDecl *k = p->file->decls[1];
    ck_assert_int_eq(k->nparams, 1);
    ck_assert_int_eq(k->nsettings, 2);
    ck_assert_str_eq(k->settings[1].name, "num_stages");
    ck_assert_int_eq(k->settings[0].value->op, OP_DIV);
    ck_assert_int_eq(k->body->nstmts, 0);
    done(p);
}
END_TEST

static const char *ATTN =
    "kernel attn_fwd(Q: *bf16, K: *bf16, V: *bf16, O: *bf16, LSE: *f32,\n"
    "                stride_qm: i64, stride_kn: i64, stride_vn: i64, stride_om: i64,\n"
    "                seqlen_q: i32, seqlen_k: i32, sm_scale: f32,\n"
    "                const CAUSAL: bool, const D: i32,\n"
    "                const BLOCK_M: i32 = 128, const BLOCK_N: i32 = 64)\n"
    "{\n"
    "    let offs_m = program_id(0) * BLOCK_M + arange(BLOCK_M);\n"
    "    let offs_d = arange(D);\n"
    "    let q = load(Q + offs_m[:, None] * stride_qm + offs_d[None, :],\n"
    "                 mask = offs_m[:, None] < seqlen_q, other = 0);\n"
    "    var m_i = full([BLOCK_M], -inf, f32);\n"
    "    var l_i = zeros([BLOCK_M], f32);\n"
    "    var acc = zeros([BLOCK_M, D], f32);\n"
    "    for start_n in range(0, seqlen_k, BLOCK_N) {\n"
    "        let offs_n = start_n + arange(BLOCK_N);\n"
    "        let k = load(K + offs_n[None, :] * stride_kn + offs_d[:, None],\n"
    "                     mask = offs_n[None, :] < seqlen_k, other = 0);\n"
    "        var s = dot(q, k) * (sm_scale * LOG2E);\n"
    "        s = where(offs_n[None, :] < seqlen_k, s, -inf);\n"
    "        if CAUSAL { s = where(offs_m[:, None] >= offs_n[None, :], s, -inf); }\n"
    "        let m_new = max(m_i, max(s, axis = 1));\n"
    "        let p = exp2(s - m_new[:, None]);\n"
    "        let alpha = exp2(m_i - m_new);\n"
    "        l_i = l_i * alpha + sum(p, axis = 1);\n"
    "        let v = load(V + offs_n[:, None] * stride_vn + offs_d[None, :],\n"
    "                     mask = offs_n[:, None] < seqlen_k, other = 0);\n"
    "        acc = acc * alpha[:, None] + dot(p.to(bf16), v);\n"
    "        m_i = m_new;\n"
    "    }\n"
    "    store(O + offs_m[:, None] * stride_om + offs_d[None, :], (acc / l_i[:, None]).to(bf16),\n"
    "          mask = offs_m[:, None] < seqlen_q);\n"
    "    store(LSE + offs_m, m_i + log2(l_i), mask = offs_m < seqlen_q);\n"
    "}\n";

START_TEST(test_attention_sketch)
{
    Parsed *p = parse_ok(ATTN);
    const AstDecl *k = p->file->decls[0];
    ck_assert_int_eq(k->nparams, 16);
    ck_assert(k->params[12].is_const);
    ck_assert_str_eq(k->params[12].type.name, "bool");
    ck_assert_int_eq(k->params[15].default_value->ival, 64);
    ck_assert_int_eq(k->body->nstmts, 9);

    /* q = load(Q + offs_m[:, None] * stride_qm + offs_d[None, :], ...) */
    const AstExpr *ld = body_stmt(k, 2)->value;
    const AstExpr *ptr = ld->args[0].value;
    ck_assert_int_eq(ptr->op, OP_ADD);
    ck_assert_int_eq(ptr->lhs->op, OP_ADD);
    const AstExpr *idx = ptr->lhs->rhs->lhs;
    ck_assert_int_eq(idx->kind, AST_INDEX);
    ck_assert_int_eq(idx->nargs, 2);
    ck_assert_int_eq(idx->args[0].value->kind, AST_SLICE);
    ck_assert_int_eq(idx->args[1].value->kind, AST_NONE);
    ck_assert_int_eq(idx->loc.line, 9);
    ck_assert_int_eq(idx->loc.col, 28); /* the '[' */
    ck_assert_int_eq(ptr->rhs->args[0].value->kind, AST_NONE);

    const AstStmt *loop = body_stmt(k, 6);
    ck_assert_int_eq(loop->kind, AST_FOR);
    ck_assert_str_eq(loop->name, "start_n");
    ck_assert_int_eq(loop->lo->ival, 0);
    ck_assert_str_eq(loop->step->sval, "BLOCK_N");
    ck_assert_int_eq(loop->body->nstmts, 12);
    const AstStmt *cz = loop->body->stmts[4];
    ck_assert_int_eq(cz->kind, AST_IF);
    ck_assert_str_eq(cz->value->sval, "CAUSAL");
    ck_assert_ptr_null(cz->else_body);
    /* acc = acc * alpha[:, None] + dot(p.to(bf16), v); */
    const AstStmt *up = loop->body->stmts[10];
    ck_assert_int_eq(up->kind, AST_ASSIGN);
    const AstExpr *dot = up->value->rhs;
    ck_assert_str_eq(dot->sval, "dot");
    ck_assert_int_eq(dot->args[0].value->kind, AST_METHOD);
    ck_assert_str_eq(dot->args[0].value->sval, "to");
    ck_assert_str_eq(dot->args[0].value->lhs->sval, "p");
    ck_assert_str_eq(dot->args[0].value->args[0].value->sval, "bf16");
    /* m_new = max(m_i, max(s, axis = 1)) */
    const AstExpr *mx = loop->body->stmts[5]->value;
    ck_assert_str_eq(mx->args[1].value->args[1].name, "axis");
    done(p);
}
END_TEST

START_TEST(test_empty_and_comments)
{
    Parsed *p = parse_ok("");
    ck_assert_int_eq(p->file->ndecls, 0);
    ck_assert_str_eq(p->printed.data ? p->printed.data : "", "");
    done(p);
    p = parse_ok("  // only a comment\n/* and a\n block */\n\t\n");
    ck_assert_int_eq(p->file->ndecls, 0);
    done(p);
    p = parse_ok("const A = 1 /* inline */ + /**/ 2; // tail");
    ck_assert_int_eq(p->file->decls[0]->value->op, OP_ADD);
    done(p);
}
END_TEST

START_TEST(test_recovery_several_errors)
{
    Parsed *p = parse("kernel k(X: *f32) {\n"
                      "    let a = 1 +;\n"
                      "    let b = 2;\n"
                      "    let c = (3;\n"
                      "    store(X, b)\n"
                      "}\n"
                      "kernel ok(Y: *f32) { store(Y, 1.0); }\n");
    ck_assert_int_eq(p->diag.nerrors, 3);
    ck_assert_ptr_nonnull(strstr(errs(p), "t.tile:2:16: error: expected expression before ';'"));
    ck_assert_ptr_nonnull(strstr(errs(p), "t.tile:4:15: error: expected ')' before ';'"));
    ck_assert_ptr_nonnull(strstr(errs(p), "t.tile:5:16: error: expected ';' after expression"));
    /* both kernels survive, the first with its good statements */
    ck_assert_int_eq(p->file->ndecls, 2);
    ck_assert_str_eq(p->file->decls[1]->name, "ok");
    ck_assert_int_eq(p->file->decls[0]->body->nstmts, 1);
    done(p);
}
END_TEST

START_TEST(test_recovery_missing_brace)
{
    /* a body left open before the next kernel: one error, both kernels kept */
    Parsed *p = parse("kernel a(X: *f32) {\n    if 1 < 2 {\n        store(X, 1.0);\n\n"
                      "kernel b(Y: *f32) { store(Y, 2.0); }\n");
    ck_assert_int_eq(p->diag.nerrors, 1);
    ck_assert_ptr_nonnull(strstr(errs(p), "t.tile:5:1: error: expected '}' before 'kernel'"));
    ck_assert_ptr_nonnull(strstr(errs(p), "t.tile:2:14: note: to match this '{'"));
    ck_assert_int_eq(p->file->ndecls, 2);
    ck_assert_int_eq(p->file->decls[0]->body->stmts[0]->kind, AST_IF);
    ck_assert_str_eq(p->file->decls[1]->name, "b");
    ck_assert_int_eq(p->file->decls[1]->body->nstmts, 1);
    done(p);

    /* two lines without ';' give two errors; a cascade on one line gives one */
    p = parse("fn f() {\n let x = 1\n let y = 2\n let z = 3;\n}\n"
              "fn g() {\n for (i in range(n)) { }\n}\n");
    ck_assert_int_eq(p->diag.nerrors, 3);
    done(p);
}
END_TEST

/* Inputs that must give an error (not a crash, hang or stack overflow). */
START_TEST(test_hostile_inputs)
{
    size_t n = 200000;
    char *s = malloc(n + 64);
    const char *fills[] = {"(", "-", "a+", "a?b:", "{", "[", "if a {} else ", "!"};
    for (size_t f = 0; f < sizeof fills / sizeof fills[0]; f++) {
        size_t len = strlen(fills[f]);
        strcpy(s, "kernel k() { let x = ");
        size_t at = strlen(s);
        while (at + len < n) {
            memcpy(s + at, fills[f], len);
            at += len;
        }
        strcpy(s + at, "1; }");
        Parsed *p = parse(s);
        /* a flat chain `a+a+...+1` is one level of nesting: fine at any length */
        if (strcmp(fills[f], "a+") == 0)
            ck_assert_msg(p->diag.nerrors == 0, "error for a flat chain:\n%s", errs(p));
        else
            ck_assert_msg(p->diag.nerrors >= 1, "no error for fill '%s'", fills[f]);
        done(p);
    }
    /* every byte value (except NUL) alone and in a kernel body */
    for (int c = 1; c < 256; c++) {
        snprintf(s, n, "kernel k() { let x = %c; } %c", c, c);
        Parsed *p = parse(s);
        done(p);
    }
    /* pseudo-random token soup from a fixed seed */
    const char *toks[] = {"kernel", "fn", "const", "let", "var", "for", "in", "range", "if",
                          "else", "return", "with", "x", "1", "2.5", "(", ")", "[", "]", "{",
                          "}", ",", ";", ":", ".", "?", "*", "+", "-", "=", "+=", "<<", "None",
                          "\"s\"", "/*", "*/", "\n", "@", "0x", "->"};
    unsigned rng = 12345;
    for (int iter = 0; iter < 300; iter++) {
        size_t at = 0;
        for (int t = 0; t < 60; t++) {
            rng = rng * 1103515245u + 12345u;
            const char *tk = toks[(rng >> 16) % (sizeof toks / sizeof toks[0])];
            at += (size_t)snprintf(s + at, n - at, "%s ", tk);
        }
        Parsed *p = parse(s);
        ck_assert_ptr_nonnull(p->file);
        done(p);
    }
    free(s);
}
END_TEST

START_TEST(test_error_messages)
{
    struct { const char *src, *want; } cases[] = {
        {"const A = 1", "t.tile:1:12: error: expected ';' after expression"},
        {"}", "t.tile:1:1: error: unexpected '}'"},
        {"kernel k() { let x = 1; ", "t.tile:1:24: error: expected '}' at end of file"},
        {"kernel k() { let x = $; }", "t.tile:1:22: error: invalid character '$'"},
        {"kernel k() { /* x", "t.tile:1:14: error: unterminated comment"},
        {"kernel k() { static_assert(1, \"ab); }", "t.tile:1:31: error: unterminated string"},
        {"const A = 1__0;", "t.tile:1:11: error: invalid number '1__0'"},
        {"const A = 18446744073709551616;", "t.tile:1:11: error: integer literal too large"},
        {"kernel k(n) { }", "t.tile:1:10: error: kernel parameter 'n' needs a type"},
        {"let x = 1;", "t.tile:1:1: error: expected 'kernel', 'fn' or 'const' before 'let'"},
        {"fn f() { x[1] = 2; }", "an index can only hold ':' and None"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        Parsed *p = parse(cases[i].src);
        ck_assert_msg(strstr(errs(p), cases[i].want) != NULL, "for `%s` want `%s`, got:\n%s",
                      cases[i].src, cases[i].want, errs(p));
        done(p);
    }
}
END_TEST

/* `kernel NAME = GENERIC(T = f16);` is an AST_INSTANCE; its arguments bind by name,
 * each once; `Q: *T` parses as a pointer to the type named T (sema resolves it);
 * a helper's runtime parameter may have a default, a kernel's may not. */
START_TEST(test_generic_kernels_and_defaults)
{
    Parsed *p = parse_ok("kernel g(X: *T, const T: dtype) { store(X, 1.0); }\n"
                         "kernel g_f16 = g(T = f16);\n"
                         "fn h(x, n = 0, const B: bool = false) { return x; }\n");
    ck_assert_int_eq(p->file->ndecls, 3);
    const AstDecl *g = p->file->decls[0], *i = p->file->decls[1], *h = p->file->decls[2];
    ck_assert(g->params[0].type.is_ptr);
    ck_assert_str_eq(g->params[0].type.name, "T");
    ck_assert_int_eq(i->kind, AST_INSTANCE);
    ck_assert_str_eq(i->name, "g_f16");
    ck_assert_str_eq(i->of, "g");
    ck_assert_int_eq(i->of_loc.col, 16);
    ck_assert_int_eq(i->nbindings, 1);
    ck_assert_str_eq(i->bindings[0].name, "T");
    ck_assert_int_eq(i->bindings[0].loc.col, 18);
    ck_assert(strstr(p->printed.data, "(kernel g_f16 = g (T f16))\n") != NULL);
    ck_assert(h->params[1].default_value && !h->params[1].is_const);
    ck_assert_int_eq(h->params[1].default_loc.col, 11);
    done(p);

    static const char *const bad[][2] = {
        {"kernel g_f16 = g(f16);\n", "t.tile:1:18: error: an instantiation binds const parameters by name"},
        {"kernel g_f16 = g(T = f16, T = bf16);\n", "t.tile:1:27: error: 'T' is bound twice"},
        {"kernel g_f16 = g(T = f16)\nfn h() { }\n", "expected ';'"},
        {"kernel k(X: *f32, n: i32 = 4) { }\n", "t.tile:1:26: error: only const parameters can have a default value"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        p = parse(bad[i][0]);
        ck_assert_msg(strstr(errs(p), bad[i][1]) != NULL, "case %zu: expected '%s' in:\n%s", i, bad[i][1], errs(p));
        done(p);
    }
}
END_TEST

static Suite *parser_suite(void)
{
    Suite *s = suite_create("parser");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_vec_add_shape);
    tcase_add_test(tc, test_print_golden);
    tcase_add_test(tc, test_precedence);
    tcase_add_test(tc, test_literals);
    tcase_add_test(tc, test_statements);
    tcase_add_test(tc, test_kernel_settings);
    tcase_add_test(tc, test_attention_sketch);
    tcase_add_test(tc, test_empty_and_comments);
    tcase_add_test(tc, test_recovery_several_errors);
    tcase_add_test(tc, test_recovery_missing_brace);
    tcase_add_test(tc, test_hostile_inputs);
    tcase_add_test(tc, test_error_messages);
    tcase_add_test(tc, test_generic_kernels_and_defaults);
    suite_add_tcase(s, tc);
    return s;
}

TU_MAIN(parser_suite)
