/* passtest.h — helpers for the pass unit tests: build Tile IR with the builder
 * (irb_*), count ops, find constants. Header-only, static. */
#ifndef KILN_PASSTEST_H
#define KILN_PASSTEST_H

#include "testutil.h"
#include "compiler/passes/passes.h"

#include <math.h>
#include <string.h>

typedef struct PT {
    Arena arena;
    IrFunc *f;
    IrBuilder b;
} PT;

static inline void pt_init(PT *t)
{
    arena_init(&t->arena);
    ice_clear();
    t->f = ir_func_new(&t->arena, "k", (SrcLoc){"t.tile", 1, 1});
    t->b = (IrBuilder){.f = t->f, .block = t->f->body, .loc = {"t.tile", 2, 3}};
}

static inline void pt_done(PT *t)
{
    IrBuilder b = t->b;
    b.block = t->f->body;
    b.before = NULL;
    irb_insert(&b, ir_op_new(t->f, IR_RETURN, b.loc, 0, NULL, 0, NULL));
}

static inline void pt_free(PT *t) { arena_free(&t->arena); }

static inline IrType T(IrElem e) { return ir_type_scalar(e); }
static inline IrType TT(IrElem e, int n)
{
    int32_t s[1] = {n};
    return ir_type_tile(ir_type_scalar(e), 1, s);
}
static inline IrValue *ci(PT *t, IrElem e, int64_t v) { return irb_const_int(&t->b, T(e), v); }
static inline IrValue *cf(PT *t, IrElem e, double v) { return irb_const_float(&t->b, T(e), v); }
static inline IrValue *param(PT *t, IrType ty, const char *n) { return ir_func_add_param(t->f, ty, n); }

/* An op without results (store, yield): irb_op insists on one result. */
static inline IrOp *pt_op0(PT *t, IrOpcode opc, int nargs, IrValue *const *args)
{
    IrOp *op = ir_op_new(t->f, opc, t->b.loc, nargs, args, 0, NULL);
    return irb_insert(&t->b, op);
}

static inline IrOp *pt_store(PT *t, IrValue *p, IrValue *v)
{
    IrValue *a[2] = {p, v};
    return pt_op0(t, IR_STORE, 2, a);
}

/* Stores v through a fresh pointer parameter of the matching type (keeps v used). */
static inline IrOp *pt_sink(PT *t, IrValue *v)
{
    IrType pt = ir_type_ptr((IrElem)v->type.elem);
    if (v->type.rank) pt = ir_type_tile(pt, v->type.rank, v->type.shape);
    return pt_store(t, param(t, pt, "sink"), v);
}

static inline IrOp *pt_yield(PT *t, int n, IrValue *const *v) { return pt_op0(t, IR_YIELD, n, v); }

/* for %iv = lo to hi step st iter(inits) : the builder moves into the body;
 * pt_end(t, op) moves it back after the op. */
static inline IrOp *pt_for(PT *t, IrValue *lo, IrValue *hi, IrValue *st, int n, IrValue *const *inits)
{
    IrValue *args[16] = {lo, hi, st};
    IrType rt[13];
    for (int i = 0; i < n; i++) {
        args[3 + i] = inits[i];
        rt[i] = inits[i]->type;
    }
    IrOp *op = ir_op_new(t->f, IR_FOR, t->b.loc, 3 + n, args, n, rt);
    irb_insert(&t->b, op);
    IrBlock *body = ir_op_add_region(t->f, op);
    ir_block_add_arg(body, lo->type, "i");
    for (int i = 0; i < n; i++) ir_block_add_arg(body, rt[i], "c");
    t->b.block = body;
    t->b.before = NULL;
    return op;
}

/* if cond -> (types): regions then/else; builder moves into `then`. */
static inline IrOp *pt_if(PT *t, IrValue *cond, int n, const IrType *rt, bool with_else)
{
    IrOp *op = ir_op_new(t->f, IR_IF, t->b.loc, 1, &cond, n, rt);
    irb_insert(&t->b, op);
    IrBlock *then = ir_op_add_region(t->f, op);
    if (with_else) ir_op_add_region(t->f, op);
    t->b.block = then;
    t->b.before = NULL;
    return op;
}

static inline void pt_in(PT *t, IrBlock *b)
{
    t->b.block = b;
    t->b.before = NULL;
}

static inline void pt_end(PT *t, IrOp *op)
{
    t->b.block = op->parent;
    t->b.before = op->next;
}

typedef struct { IrOpcode op; int n; } PtCount;
static inline void pt_count_cb(IrOp *op, void *ctx)
{
    PtCount *c = ctx;
    if (c->op == IR_OP_COUNT || op->op == c->op) c->n++;
}
/* Ops of one opcode in the function (IR_OP_COUNT: all ops), nested included. */
static inline int pt_count(PT *t, IrOpcode op)
{
    PtCount c = {op, 0};
    ir_walk(t->f, pt_count_cb, &c);
    return c.n;
}

/* After a pass: no internal error was recorded and the IR verifies. */
static inline void pt_check(PT *t)
{
    ck_assert_msg(ice_message() == NULL, "%s", ice_message());
    StrBuf err;
    sb_init(&err);
    bool ok = ir_verify(t->f, &err);
    ck_assert_msg(ok, "%s", err.data ? err.data : "");
    sb_free(&err);
}

/* The fixture of a pass's unit tests (opt-in, since test_random keeps its PTs
 * local): PT_FIXTURE declares the PT `t` that setup (the test's own, which
 * calls pt_init) and teardown give each test; bin() builds a binary op at the
 * builder. PT_LOOP_FIXTURE is PT_FIXTURE with a whole setup for loop tests:
 * parameters out (f32*) and n (i32), constants z = 0 and one = 1. */
#define PT_FIXTURE                                                                           \
    static PT t;                                                                             \
    static void teardown(void) { pt_free(&t); }                                              \
    static inline IrValue *bin(IrOpcode opc, IrType rt, IrValue *a, IrValue *b)              \
    {                                                                                        \
        return irb_op2(&t.b, opc, rt, a, b);                                                 \
    }

#define PT_LOOP_FIXTURE                                                                      \
    PT_FIXTURE                                                                               \
    static IrValue *out, *n, *z, *one;                                                       \
    static void setup(void)                                                                  \
    {                                                                                        \
        pt_init(&t);                                                                         \
        out = param(&t, ir_type_ptr(IR_F32), "out");                                         \
        n = param(&t, T(IR_I32), "n");                                                       \
        z = ci(&t, IR_I32, 0);                                                               \
        one = ci(&t, IR_I32, 1);                                                             \
    }

#endif
