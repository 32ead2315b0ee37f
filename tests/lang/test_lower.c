/* test_lower.c — sema + lowering: small programs parsed with ast_parse and
 * compiled with lang_compile; checks op counts, types, shapes, loop-carried
 * values, if merging, const specialisation, defaults and overrides, inlining.
 * Every compiled kernel must pass ir_verify, and every op must carry a SrcLoc.
 */
#include "testutil.h"

#include "compiler/lang/lang.h"

#include <string.h>

static Arena arena;
static Diag diag;

/* Compile `src` with "NAME=VALUE" defines (NULL-terminated); NULL on errors. */
static IrModule *compile_opts(const char *src, const char *const *defs, int warps, int stages, const char *kernel)
{
    arena_free(&arena);
    arena_init(&arena);
    diag_free(&diag);
    diag_init(&diag, "t.tile", src);
    LangDefine d[16];
    int nd = 0;
    for (; defs && defs[nd]; nd++) {
        const char *eq = strchr(defs[nd], '=');
        d[nd].name = arena_strndup(&arena, defs[nd], (size_t)(eq - defs[nd]));
        d[nd].value = eq + 1;
    }
    LangOptions o = {.kernel = kernel, .defines = d, .ndefines = nd, .num_warps = warps, .num_stages = stages};
    AstFile *f = ast_parse(&arena, &diag, "t.tile", src);
    ck_assert_msg(f && diag.nerrors == 0, "parse errors:\n%s", diag.out.data ? diag.out.data : "");
    IrModule *m = lang_compile(&arena, &diag, f, &o);
    if (m) {
        for (int i = 0; i < m->nfuncs; i++) {
            StrBuf err;
            sb_init(&err);
            bool ok = ir_verify(m->funcs[i], &err);
            ck_assert_msg(ok, "verifier: %s", err.data ? err.data : "");
            sb_free(&err);
        }
    }
    return m;
}

static IrFunc *compile1(const char *src, const char *const *defs)
{
    IrModule *m = compile_opts(src, defs, 0, 0, NULL);
    ck_assert_msg(m != NULL, "compile errors:\n%s", diag.out.data ? diag.out.data : "");
    ck_assert_int_eq(m->nfuncs, 1);
    return m->funcs[0];
}

/* ---- IR queries ---- */
typedef struct { IrOpcode op; int n; IrOp *last; IrOp *first; } Count;

static void count_op(IrOp *op, void *ctx)
{
    Count *c = ctx;
    if (op->op != c->op) return;
    if (!c->first) c->first = op;
    c->last = op;
    c->n++;
}

static int count(IrFunc *f, IrOpcode op)
{
    Count c = {op, 0, NULL, NULL};
    ir_walk(f, count_op, &c);
    return c.n;
}

static IrOp *first_op(IrFunc *f, IrOpcode op)
{
    Count c = {op, 0, NULL, NULL};
    ir_walk(f, count_op, &c);
    ck_assert_msg(c.first != NULL, "no '%s' op", ir_op_info[op].name);
    return c.first;
}

static IrOp *last_op(IrFunc *f, IrOpcode op)
{
    Count c = {op, 0, NULL, NULL};
    ir_walk(f, count_op, &c);
    ck_assert_msg(c.last != NULL, "no '%s' op", ir_op_info[op].name);
    return c.last;
}

static const char *tstr(IrType t)
{
    static char buf[8][64];
    static int k;
    char *b = buf[k++ & 7];
    return ir_type_str(t, b, 64);
}

#define ck_type(t, s) ck_assert_str_eq(tstr(t), s)

/* Elementwise ops: all tile operands and the result share one shape; every op has a loc. */
static void check_op_invariants(IrOp *op, void *ctx)
{
    (void)ctx;
    ck_assert_msg(op->loc.line > 0, "op '%s' has no source location", ir_op_info[op->op].name);
    if (!(ir_op_info[op->op].flags & IRF_ELEMWISE)) return;
    IrType r = op->res[0]->type;
    for (int i = 0; i < op->nargs; i++) {
        IrType a = op->args[i]->type;
        ck_assert_msg(a.rank == r.rank, "%s: operand %d rank %d vs result %d", ir_op_info[op->op].name, i,
                      a.rank, r.rank);
        for (int k = 0; k < r.rank; k++) ck_assert_int_eq(a.shape[k], r.shape[k]);
    }
}

static void check_invariants(IrFunc *f) { ir_walk(f, check_op_invariants, NULL); }

/* ---- programs ---- */
static const char *vec_add =
    "kernel vec_add(X: *f32, Y: *f32, Z: *f32, n: i32, const BLOCK: i32 = 1024)\n"
    "    with (num_warps = 4)\n"
    "{\n"
    "    let offs = program_id(0) * BLOCK + arange(BLOCK);\n"
    "    let mask = offs < n;\n"
    "    let x = load(X + offs, mask = mask, other = 0);\n"
    "    let y = load(Y + offs, mask = mask);\n"
    "    store(Z + offs, x + y, mask = mask);\n"
    "}\n";

START_TEST(test_vec_add)
{
    IrFunc *f = compile1(vec_add, NULL);
    check_invariants(f);
    ck_assert_str_eq(f->name, "vec_add");
    ck_assert_int_eq(f->nparams, 4);
    ck_type(f->params[0]->type, "ptr<f32>");
    ck_type(f->params[3]->type, "i32");
    ck_assert_int_eq(f->nconsts, 1);
    ck_assert_str_eq(f->consts[0].name, "BLOCK");
    ck_assert_int_eq(f->consts[0].ival, 1024);
    ck_assert_int_eq(count(f, IR_PROGRAM_ID), 1);
    ck_assert_int_eq(count(f, IR_ARANGE), 1);
    ck_assert_int_eq(count(f, IR_ADDPTR), 3);
    ck_assert_int_eq(count(f, IR_LOAD), 2);
    ck_assert_int_eq(count(f, IR_STORE), 1);
    IrOp *ld = first_op(f, IR_LOAD);
    ck_assert_int_eq(ld->nargs, 3);                 /* ptr, mask, other */
    ck_type(ld->args[2]->type, "tensor<1024xf32>"); /* other cast to the pointee type */
    ck_type(ld->res[0]->type, "tensor<1024xf32>");
    ck_assert_int_eq(last_op(f, IR_LOAD)->nargs, 2); /* mask without other: no other operand */
    IrOp *ar = first_op(f, IR_ARANGE);
    ck_assert_int_eq(ar->attr[0], 0);
    ck_assert_int_eq(ar->attr[1], 1024);
    ck_assert_int_eq(ar->loc.line, 4);
    ck_assert_int_eq(f->body->last->op, IR_RETURN);
    ck_assert_int_eq(f->sched.num_warps, 4);
    ck_assert_int_eq(f->sched.num_stages, 2);
}
END_TEST

START_TEST(test_define_overrides_default)
{
    const char *defs[] = {"BLOCK=256", NULL};
    IrFunc *f = compile1(vec_add, defs);
    ck_assert_int_eq(f->consts[0].ival, 256);
    ck_type(first_op(f, IR_ARANGE)->res[0]->type, "tensor<256xi32>");
    ck_type(first_op(f, IR_LOAD)->res[0]->type, "tensor<256xf32>");
}
END_TEST

START_TEST(test_schedule)
{
    const char *src = "kernel k(X: *f32, const B: i32 = 64) with (num_warps = B / 16, num_stages = B / 32 + 1)\n"
                      "{ store(X + arange(B), 1.0); }\n";
    IrFunc *f = compile1(src, NULL);
    ck_assert_int_eq(f->sched.num_warps, 4);
    ck_assert_int_eq(f->sched.num_stages, 3);
    const char *defs[] = {"B=128", NULL};
    f = compile1(src, defs);
    ck_assert_int_eq(f->sched.num_warps, 8);
    ck_assert_int_eq(f->sched.num_stages, 5);
    IrModule *m = compile_opts(src, defs, 2, 1, NULL); /* command-line overrides win */
    ck_assert_ptr_nonnull(m);
    ck_assert_int_eq(m->funcs[0]->sched.num_warps, 2);
    ck_assert_int_eq(m->funcs[0]->sched.num_stages, 1);
    m = compile_opts(src, defs, 3, 0, NULL);
    ck_assert_ptr_null(m);
    ck_assert_ptr_nonnull(strstr(diag.out.data, "num_warps must be a power of two between 1 and 32, got 3"));
}
END_TEST

START_TEST(test_loop_carried)
{
    const char *src =
        "kernel k(X: *f16, Y: *f32, n: i32)\n"
        "{\n"
        "    var acc = zeros([64], f32);\n"
        "    var m = full([64], -inf, f32);\n"
        "    var unused = 0;\n"
        "    for i in range(0, n, 64) {\n"
        "        var tmp = load(X + i + arange(64)).to(f32);\n"   /* declared inside: not carried */
        "        tmp = tmp * 2.0;\n"
        "        acc += tmp;\n"
        "        m = maximum(m, tmp);\n"
        "    }\n"
        "    store(Y + arange(64), acc + m);\n"
        "}\n";
    IrFunc *f = compile1(src, NULL);
    check_invariants(f);
    ck_assert_int_eq(count(f, IR_FOR), 1);
    IrOp *loop = first_op(f, IR_FOR);
    ck_assert_int_eq(loop->nargs, 3 + 2);
    ck_assert_int_eq(loop->nres, 2);
    IrBlock *body = loop->regions[0];
    ck_assert_int_eq(body->nargs, 3);  /* iv, acc, m */
    ck_type(body->args[0]->type, "i32");
    ck_type(body->args[1]->type, "tensor<64xf32>");
    ck_assert_int_eq(body->last->op, IR_YIELD);
    ck_assert_int_eq(body->last->nargs, 2);
    /* the add after the loop uses both loop results */
    IrOp *add = last_op(f, IR_ADD);
    ck_assert_ptr_eq(add->args[0], loop->res[0]);
    ck_assert_ptr_eq(add->args[1], loop->res[1]);
    /* inits are the values before the loop */
    ck_assert_int_eq(loop->args[3]->def->op, IR_CONST);
    ck_assert(loop->args[4]->def->fval < 0 && loop->args[4]->def->fval * 0 != 0); /* -inf */
}
END_TEST

START_TEST(test_nested_loops)
{
    const char *src =
        "kernel k(X: *f32, n: i32)\n"
        "{\n"
        "    var s = 0.0;\n"
        "    var c = 0;\n"
        "    for i in range(n) {\n"
        "        for j in range(i, n, 2) { s = s + load(X + j); }\n"
        "        c += 1;\n"
        "    }\n"
        "    store(X, s + c.to(f32));\n"
        "}\n";
    IrFunc *f = compile1(src, NULL);
    ck_assert_int_eq(count(f, IR_FOR), 2);
    IrOp *outer = first_op(f, IR_FOR);
    ck_assert_int_eq(outer->nres, 2);
    IrOp *inner = NULL;
    for (IrOp *o = outer->regions[0]->first; o; o = o->next)
        if (o->op == IR_FOR) inner = o;
    ck_assert_ptr_nonnull(inner);
    ck_assert_int_eq(inner->nres, 1);            /* only s in the inner loop */
    ck_assert_ptr_eq(inner->args[0], outer->regions[0]->args[0]); /* lo = i */
    ck_type(inner->res[0]->type, "f32");
}
END_TEST

START_TEST(test_runtime_if_merges)
{
    const char *src =
        "kernel k(X: *f32, n: i32)\n"
        "{\n"
        "    var x = load(X + arange(32));\n"
        "    var y = 1.0;\n"
        "    let keep = 5;\n"
        "    if n > 0 { x = x * 2.0; } else if n < -4 { y = 3.0; }\n"
        "    store(X + arange(32), x + y);\n"
        "}\n";
    IrFunc *f = compile1(src, NULL);
    check_invariants(f);
    ck_assert_int_eq(count(f, IR_IF), 2);
    IrOp *top = first_op(f, IR_IF);
    ck_assert_int_eq(top->nregions, 2);
    ck_assert_int_eq(top->nres, 2);
    ck_type(top->args[0]->type, "i1");
    for (int r = 0; r < 2; r++) {
        ck_assert_int_eq(top->regions[r]->last->op, IR_YIELD);
        ck_assert_int_eq(top->regions[r]->last->nargs, 2);
    }
    IrOp *add = last_op(f, IR_ADD);
    /* x + y uses the if's results (y splat first) */
    ck_assert(add->args[0] == top->res[0] || add->args[0] == top->res[1]);
}
END_TEST

START_TEST(test_const_if_pruned)
{
    const char *src =
        "kernel k(A: *f32, B: *f32, const FLAG: bool = false)\n"
        "{\n"
        "    if FLAG { store(A, 1.0); } else { store(B, 2.0); }\n"
        "    if !FLAG && true { store(B, 3.0); }\n"
        "}\n";
    IrFunc *f = compile1(src, NULL);
    ck_assert_int_eq(count(f, IR_IF), 0);
    ck_assert_int_eq(count(f, IR_STORE), 2);
    ck_assert_ptr_eq(first_op(f, IR_STORE)->args[0], f->params[1]);
    const char *defs[] = {"FLAG=true", NULL};
    f = compile1(src, defs);
    ck_assert_int_eq(count(f, IR_STORE), 1);
    ck_assert_ptr_eq(first_op(f, IR_STORE)->args[0], f->params[0]);
    ck_assert_int_eq(f->consts[0].ival, 1);
}
END_TEST

START_TEST(test_broadcasting_explicit)
{
    const char *src =
        "kernel k(X: *f32)\n"
        "{\n"
        "    let r = arange(32)[:, None] * 16 + arange(16)[None, :];\n"
        "    store(X + r, 1.0);\n"
        "}\n";
    IrFunc *f = compile1(src, NULL);
    check_invariants(f);
    ck_assert_int_eq(count(f, IR_EXPAND_DIMS), 2);
    IrOp *e = first_op(f, IR_EXPAND_DIMS);
    ck_assert_int_eq(e->attr[0], 1);
    ck_type(e->res[0]->type, "tensor<32x1xi32>");
    ck_assert_int_eq(last_op(f, IR_EXPAND_DIMS)->attr[0], 0);
    ck_assert_int_eq(count(f, IR_BROADCAST), 2);
    ck_type(first_op(f, IR_ADD)->res[0]->type, "tensor<32x16xi32>");
    /* the literal 16 became a constant of the tile's type, not a splat of a scalar */
    ck_type(first_op(f, IR_MUL)->args[1]->type, "tensor<32x1xi32>");
    ck_type(first_op(f, IR_STORE)->args[1]->type, "tensor<32x16xf32>");
}
END_TEST

START_TEST(test_promotion)
{
    const char *src =
        "kernel k(H: *f16, B: *bf16, I: *i32, L: *i64, F: *f32)\n"
        "{\n"
        "    let o = arange(16);\n"
        "    let h = load(H + o);\n"
        "    let b = load(B + o);\n"
        "    store(H + o, h * 2.0 + 1);\n"       /* literals adopt f16: no cast */
        "    store(F + o, h + b);\n"             /* f16 with bf16 gives f32 */
        "    store(L + o, load(I + o) + load(L + o));\n" /* i32 with i64 gives i64 */
        "    store(F + o, o * 0.5);\n"           /* int with a float literal gives f32 */
        "}\n";
    IrFunc *f = compile1(src, NULL);
    check_invariants(f);
    IrOp *st = first_op(f, IR_STORE);
    ck_type(st->args[1]->type, "tensor<16xf16>");
    ck_assert_int_eq(st->args[1]->def->op, IR_ADD);
    ck_assert_int_eq(st->args[1]->def->args[0]->def->op, IR_MUL);
    ck_assert_int_eq(count(f, IR_CAST), 4);   /* f16->f32, bf16->f32, i32->i64, i32->f32 */
    IrOp *st2 = first_op(f, IR_STORE)->next;
    while (st2->op != IR_STORE) st2 = st2->next;
    ck_type(st2->args[1]->type, "tensor<16xf32>");
    ck_type(st2->args[1]->def->args[0]->type, "tensor<16xf32>");
}
END_TEST

START_TEST(test_dot_and_reductions)
{
    const char *src =
        "kernel k(A: *f16, O: *f32)\n"
        "{\n"
        "    let a = load(A + arange(64)[:, None] * 32 + arange(32)[None, :]);\n"
        "    let b = load(A + arange(32)[:, None] * 16 + arange(16)[None, :]);\n"
        "    let c = dot(a, b);\n"
        "    let d = dot(a, b, c);\n"
        "    let s1 = sum(d, axis = 1);\n"
        "    let s0 = max(d, axis = 0);\n"
        "    let all = sum(d);\n"
        "    let am = argmax(s1, axis = 0);\n"
        "    let mx = max(s1, s1 * 2.0);\n"
        "    let mn = min(all, 1.0);\n"
        "    store(O + arange(64), s1 + mx + mn + am.to(f32));\n"
        "    store(O + arange(16), s0);\n"
        "}\n";
    IrFunc *f = compile1(src, NULL);
    check_invariants(f);
    ck_assert_int_eq(count(f, IR_DOT), 2);
    IrOp *d1 = first_op(f, IR_DOT);
    ck_assert_int_eq(d1->nargs, 3);
    ck_assert_int_eq(d1->args[2]->def->op, IR_CONST);   /* created zero accumulator */
    ck_type(d1->args[2]->type, "tensor<64x16xf32>");
    ck_type(d1->res[0]->type, "tensor<64x16xf32>");
    ck_assert_ptr_eq(last_op(f, IR_DOT)->args[2], d1->res[0]);
    ck_assert_int_eq(count(f, IR_REDUCE), 4);
    IrOp *r = first_op(f, IR_REDUCE);
    ck_assert_int_eq(r->attr[0], 1);
    ck_assert_int_eq(r->attr[1], IR_RED_SUM);
    ck_type(r->res[0]->type, "tensor<64xf32>");
    IrOp *r2 = r->next;
    ck_assert_int_eq(r2->attr[0], 0);                   /* max(d, axis = 0) */
    ck_assert_int_eq(r2->attr[1], IR_RED_MAX);
    ck_type(r2->res[0]->type, "tensor<16xf32>");
    ck_assert_int_eq(count(f, IR_RESHAPE), 1);          /* sum(d) flattens, then reduces to a scalar */
    ck_type(first_op(f, IR_RESHAPE)->res[0]->type, "tensor<1024xf32>");
    ck_type(last_op(f, IR_REDUCE)->res[0]->type, "i32"); /* argmax */
    ck_assert_int_eq(count(f, IR_MAX), 1);              /* max(a, b) elementwise */
    ck_assert_int_eq(count(f, IR_MIN), 1);
    ck_type(first_op(f, IR_MIN)->res[0]->type, "f32");
}
END_TEST

START_TEST(test_helpers_inlined)
{
    const char *src =
        "fn identity(s, i) { return s; }\n"
        "fn softcap(s, i) { let c = 30.0; return tanh(s / c) * c; }\n"
        "fn sq(x) { return x * x; }\n"
        "fn poly(x, const N: i32) { var r = x; for q in range(0, N) { r = r * x; } return r; }\n"
        "kernel k(X: *f32, const mod: fn = identity)\n"
        "{\n"
        "    let x = load(X + arange(16));\n"
        "    store(X + arange(16), sq(mod(x, 0)) + sq(sq(x)) + poly(x, 3));\n"
        "    store(X, sq(3.0));\n"     /* compile-time argument: folds */
        "}\n";
    IrFunc *f = compile1(src, NULL);
    check_invariants(f);
    ck_assert_int_eq(count(f, IR_MUL), 4);  /* sq(x), sq(x), sq(sq): 3; poly: 1 */
    ck_assert_int_eq(count(f, IR_TANH), 0);
    ck_assert_int_eq(count(f, IR_FOR), 1);
    ck_assert_str_eq(f->consts[0].sval, "identity");
    IrOp *st = last_op(f, IR_STORE);
    ck_assert_int_eq(st->args[1]->def->op, IR_CONST);
    ck_assert(st->args[1]->def->fval == 9.0);
    const char *defs[] = {"mod=softcap", NULL};
    f = compile1(src, defs);
    ck_assert_int_eq(count(f, IR_TANH), 1);
    ck_assert_str_eq(f->consts[0].sval, "softcap");
    /* the helper's ops carry the helper's source lines */
    ck_assert_int_eq(first_op(f, IR_TANH)->loc.line, 2);
}
END_TEST

START_TEST(test_file_consts_and_folding)
{
    const char *src =
        "const BLOCK = 2 * 64;\n"
        "const HALF = BLOCK / 2 - (7 % 4) + 3;\n"
        "const BIG = 1 << 40;\n"
        "kernel k(X: *f32, const D: i32 = HALF * 2, const T: dtype = bf16)\n"
        "{\n"
        "    static_assert(HALF == 64 && D == 128 && BIG > 0, \"folding\");\n"
        "    static_assert(cdiv(100, 16) == 7);\n"
        "    let o = arange(HALF);\n"
        "    store(X + o, zeros([HALF], T).to(f32) + (BIG > 1 ? 1.0 : 2.0));\n"
        "}\n";
    IrFunc *f = compile1(src, NULL);
    ck_type(first_op(f, IR_ARANGE)->res[0]->type, "tensor<64xi32>");
    ck_assert_int_eq(f->nconsts, 2);
    ck_assert_int_eq(f->consts[0].ival, 128);
    ck_assert_str_eq(f->consts[1].sval, "bf16");
    ck_assert_int_eq(f->consts[1].type.elem, IR_BF16);
    ck_type(first_op(f, IR_CAST)->args[0]->type, "tensor<64xbf16>");
    /* a file-level const can be given with -D too */
    const char *defs[] = {"BLOCK=32", NULL};
    IrModule *m = compile_opts(src, defs, 0, 0, NULL);
    ck_assert_ptr_null(m);   /* HALF = 14 -> static_assert fails */
    ck_assert_ptr_nonnull(strstr(diag.out.data, "static assertion failed: folding"));
}
END_TEST

START_TEST(test_cdiv_where_ternary)
{
    const char *src =
        "kernel k(X: *f32, n: i32)\n"
        "{\n"
        "    let nb = cdiv(n, 64);\n"
        "    let o = arange(64);\n"
        "    let x = load(X + o);\n"
        "    let y = where(o < nb, x, 0.0);\n"
        "    let z = o < 3 ? y : -y;\n"
        "    store(X + o, n > 2 ? z : y);\n"
        "}\n";
    IrFunc *f = compile1(src, NULL);
    check_invariants(f);
    ck_assert_int_eq(count(f, IR_DIV), 1);
    ck_assert_int_eq(count(f, IR_SELECT), 3);
    IrOp *sel = last_op(f, IR_SELECT);
    ck_type(sel->args[0]->type, "tensor<64xi1>");   /* scalar condition splat */
    ck_assert_int_eq(sel->args[0]->def->op, IR_SPLAT);
}
END_TEST

START_TEST(test_misc_builtins)
{
    const char *src =
        "kernel k(X: *f32, C: *i32)\n"
        "{\n"
        "    let x = load(X + arange(8)[:, None] * 4 + arange(4)[None, :]);\n"
        "    let t = trans(x);\n"
        "    let r = reshape(t, [32]);\n"
        "    let b = broadcast_to(arange(4)[None, :], [2, 4]);\n"
        "    let old = atomic_add(C + arange(4), 1, mask = arange(4) < 2);\n"
        "    let e = exp(r) + exp2(r) + log(r) + log2(r) + sqrt(r) + rsqrt(r) + abs(r)\n"
        "          + tanh(r) + sin(r) + cos(r) + floor(r) + ceil(r);\n"
        "    store(X + arange(32), e + full([32], program_id(1).to(f32), f32));\n"
        "    store(C + arange(4), old + num_programs(2));\n"
        "    store(C + b, 7);\n"
        "}\n";
    IrFunc *f = compile1(src, NULL);
    check_invariants(f);
    IrOp *tr = first_op(f, IR_TRANS);
    ck_type(tr->res[0]->type, "tensor<4x8xf32>");
    ck_assert_int_eq(tr->attr[0], 1);
    ck_assert_int_eq(tr->attr[1], 0);
    ck_type(first_op(f, IR_RESHAPE)->res[0]->type, "tensor<32xf32>");
    IrOp *at = first_op(f, IR_ATOMIC_ADD);
    ck_assert_int_eq(at->nargs, 3);
    ck_type(at->res[0]->type, "tensor<4xi32>");
    static const IrOpcode math[] = {IR_EXP, IR_EXP2, IR_LOG, IR_LOG2, IR_SQRT, IR_RSQRT,
                                    IR_ABS, IR_TANH, IR_SIN, IR_COS, IR_FLOOR, IR_CEIL};
    for (size_t i = 0; i < sizeof math / sizeof math[0]; i++) ck_assert_int_eq(count(f, math[i]), 1);
    ck_assert_int_eq(first_op(f, IR_PROGRAM_ID)->attr[0], 1);
    ck_assert_int_eq(first_op(f, IR_NUM_PROGRAMS)->attr[0], 2);
    ck_type(last_op(f, IR_STORE)->args[0]->type, "tensor<2x4xptr<i32>>");
}
END_TEST

START_TEST(test_errors_reported_and_null)
{
    const char *src =
        "kernel k(X: *f32)\n"
        "{\n"
        "    let a = zeros([128, 64], f32) + zeros([32], f32);\n"
        "    let b = undefined_name;\n"
        "    let c = b + a;\n"       /* silent: both erroneous */
        "    store(X + arange(5), 1.0);\n"
        "}\n";
    IrModule *m = compile_opts(src, NULL, 0, 0, NULL);
    ck_assert_ptr_null(m);
    ck_assert_int_eq(diag.nerrors, 3);
    ck_assert_ptr_nonnull(strstr(diag.out.data, "t.tile:3:35: error: cannot broadcast [128, 64] with [32]"));
    ck_assert_ptr_nonnull(strstr(diag.out.data, "unknown name 'undefined_name'"));
    ck_assert_ptr_nonnull(strstr(diag.out.data, "power of two (at most 1048576), got 5"));
}
END_TEST

START_TEST(test_kernel_selection)
{
    const char *src = "kernel a(X: *f32) { store(X, 1.0); }\n"
                      "kernel b(X: *f32, const N: i32) { store(X + arange(N), 2.0); }\n";
    IrModule *m = compile_opts(src, NULL, 0, 0, "a");     /* b needs N, but only a is compiled */
    ck_assert_ptr_nonnull(m);
    ck_assert_int_eq(m->nfuncs, 1);
    ck_assert_str_eq(m->funcs[0]->name, "a");
    const char *defs[] = {"N=4", NULL};
    m = compile_opts(src, defs, 0, 0, NULL);
    ck_assert_ptr_nonnull(m);
    ck_assert_int_eq(m->nfuncs, 2);
    m = compile_opts(src, NULL, 0, 0, "c");
    ck_assert_ptr_null(m);
    ck_assert_ptr_nonnull(strstr(diag.out.data, "no kernel named 'c'"));
}
END_TEST

START_TEST(test_var_const_assign_keeps_type)
{
    const char *src =
        "kernel k(X: *f16, n: i32)\n"
        "{\n"
        "    var m = load(X + arange(16));\n"
        "    for i in range(0, n) { m = 0; }\n"      /* the literal takes m's type */
        "    store(X + arange(16), m);\n"
        "}\n";
    IrFunc *f = compile1(src, NULL);
    IrOp *loop = first_op(f, IR_FOR);
    ck_type(loop->res[0]->type, "tensor<16xf16>");
    ck_type(loop->regions[0]->last->args[0]->type, "tensor<16xf16>");
}
END_TEST

static Suite *lower_suite(void)
{
    Suite *s = suite_create("lower");
    TCase *tc = tcase_create("lower");
    arena_init(&arena);
    diag_init(&diag, "t.tile", "");
    tcase_add_test(tc, test_vec_add);
    tcase_add_test(tc, test_define_overrides_default);
    tcase_add_test(tc, test_schedule);
    tcase_add_test(tc, test_loop_carried);
    tcase_add_test(tc, test_nested_loops);
    tcase_add_test(tc, test_runtime_if_merges);
    tcase_add_test(tc, test_const_if_pruned);
    tcase_add_test(tc, test_broadcasting_explicit);
    tcase_add_test(tc, test_promotion);
    tcase_add_test(tc, test_dot_and_reductions);
    tcase_add_test(tc, test_helpers_inlined);
    tcase_add_test(tc, test_file_consts_and_folding);
    tcase_add_test(tc, test_cdiv_where_ternary);
    tcase_add_test(tc, test_misc_builtins);
    tcase_add_test(tc, test_errors_reported_and_null);
    tcase_add_test(tc, test_kernel_selection);
    tcase_add_test(tc, test_var_const_assign_keeps_type);
    suite_add_tcase(s, tc);
    return s;
}

TU_MAIN(lower_suite)
