/* cg_build.h — small Tile IR kernels built with the IR builder, shared by the
 * codegen tests (they do not depend on the front end). */
#ifndef KILN_TESTS_CG_BUILD_H
#define KILN_TESTS_CG_BUILD_H

#include "compiler/codegen/codegen.h"

#include <string.h>

typedef struct Kb {
    Arena a;
    IrFunc *f;
    IrBuilder b;
} Kb;

static inline void kb_init(Kb *k, const char *name)
{
    arena_init(&k->a);
    SrcLoc loc = {"test.tile", 1, 1};
    k->f = ir_func_new(&k->a, name, loc);
    memset(&k->b, 0, sizeof k->b);
    k->b.f = k->f;
    k->b.block = k->f->body;
    k->b.loc = loc;
}

static inline IrType t1(IrElem e, int n)
{
    int32_t s[1] = {n};
    return ir_type_tile(ir_type_scalar(e), 1, s);
}
static inline IrType t2(IrElem e, int m, int n)
{
    int32_t s[2] = {m, n};
    return ir_type_tile(ir_type_scalar(e), 2, s);
}
static inline IrType ptile(IrElem pointee, IrType shape_of)
{
    IrType t = ir_type_tile(ir_type_ptr(pointee), shape_of.rank, shape_of.shape);
    return t;
}
static inline IrType with_shape(IrType scalar, IrType shape_of)
{
    return ir_type_tile(scalar, shape_of.rank, shape_of.shape);
}

static inline IrValue *kb_arange(Kb *k, int n)
{
    IrValue *v = irb_op(&k->b, IR_ARANGE, t1(IR_I32, n), 0, NULL);
    v->def->attr[0] = 0;
    v->def->attr[1] = n;
    return v;
}
static inline IrValue *kb_splat(Kb *k, IrValue *s, IrType shape_of)
{
    IrType t = ir_type_tile(s->type, shape_of.rank, shape_of.shape);
    return irb_op1(&k->b, IR_SPLAT, t, s);
}
static inline IrValue *kb_expand(Kb *k, IrValue *v, int axis)
{
    IrType t = v->type;
    int32_t s[IR_MAX_RANK];
    for (int i = 0, j = 0; i <= t.rank; i++) s[i] = i == axis ? 1 : t.shape[j++];
    IrValue *r = irb_op1(&k->b, IR_EXPAND_DIMS, ir_type_tile(ir_type_scalar_of(t), t.rank + 1, s), v);
    r->def->attr[0] = axis;
    return r;
}
static inline IrValue *kb_bcast(Kb *k, IrValue *v, IrType shape_of)
{
    return irb_op1(&k->b, IR_BROADCAST, with_shape(ir_type_scalar_of(v->type), shape_of), v);
}
static inline IrValue *kb_bin(Kb *k, IrOpcode op, IrValue *x, IrValue *y) { return irb_op2(&k->b, op, x->type, x, y); }
static inline IrValue *kb_cmp(Kb *k, IrCmp c, IrValue *x, IrValue *y)
{
    IrValue *r = irb_op2(&k->b, IR_CMP, ir_type_with_elem(x->type, IR_I1), x, y);
    r->def->attr[0] = c;
    return r;
}
static inline IrValue *kb_addptr(Kb *k, IrValue *p, IrValue *off) { return irb_op2(&k->b, IR_ADDPTR, p->type, p, off); }
static inline IrValue *kb_load(Kb *k, IrValue *p, IrValue *mask, IrValue *other)
{
    IrValue *args[3] = {p, mask, other};
    int n = other ? 3 : mask ? 2 : 1;
    return irb_op(&k->b, IR_LOAD, ir_type_with_elem(p->type, (IrElem)p->type.pointee), n, args);
}
static inline void kb_store(Kb *k, IrValue *p, IrValue *v, IrValue *mask)
{
    IrValue *args[3] = {p, v, mask};
    IrOp *op = ir_op_new(k->f, IR_STORE, k->b.loc, mask ? 3 : 2, args, 0, NULL);
    irb_insert(&k->b, op);
}
static inline IrValue *kb_reduce(Kb *k, IrValue *x, int axis, IrReduce kind)
{
    IrType t = x->type;
    IrType r = t;
    r.rank = (uint8_t)(t.rank - 1);
    for (int i = axis; i < r.rank; i++) r.shape[i] = t.shape[i + 1];
    r.shape[r.rank] = 0;
    if (kind == IR_RED_ARGMAX || kind == IR_RED_ARGMIN) r = ir_type_with_elem(r, IR_I32);
    IrValue *v = irb_op1(&k->b, IR_REDUCE, r, x);
    v->def->attr[0] = axis;
    v->def->attr[1] = kind;
    return v;
}
static inline IrValue *kb_pid(Kb *k)
{
    IrValue *v = irb_op(&k->b, IR_PROGRAM_ID, ir_type_scalar(IR_I32), 0, NULL);
    v->def->attr[0] = 0;
    return v;
}
static inline void kb_return(Kb *k) { irb_insert(&k->b, ir_op_new(k->f, IR_RETURN, k->b.loc, 0, NULL, 0, NULL)); }

/* ptrs[i, j] = base + rows[i] * stride + cols[j] for a [M, N] tile. */
static inline IrValue *kb_ptr2d(Kb *k, IrValue *base, IrValue *rows, IrValue *stride, IrValue *cols)
{
    int M = rows->type.shape[0], N = cols->type.shape[0];
    IrType sh = t2(IR_I32, M, N);
    IrValue *r = kb_bcast(k, kb_expand(k, rows, 1), sh);
    IrValue *c = kb_bcast(k, kb_expand(k, cols, 0), sh);
    IrValue *off = kb_bin(k, IR_ADD, kb_bin(k, IR_MUL, r, kb_splat(k, stride, sh)), c);
    return kb_addptr(k, kb_splat(k, base, sh), off);
}

/* z[i] = x[i] + y[i] for i < n; n's divisibility decides the vector width. */
static inline void build_vec_add(Kb *k, int n_div, int block)
{
    kb_init(k, "vec_add");
    IrValue *X = ir_func_add_param(k->f, ir_type_ptr(IR_F32), "X");
    IrValue *Y = ir_func_add_param(k->f, ir_type_ptr(IR_F32), "Y");
    IrValue *Z = ir_func_add_param(k->f, ir_type_ptr(IR_F32), "Z");
    IrValue *n = ir_func_add_param(k->f, ir_type_scalar(IR_I32), "n");
    n->divisibility = n_div;
    /* 16-byte aligned pointers, as hints or launch-time specialisation say
     * (without them a pointer is only element-aligned). */
    X->divisibility = Y->divisibility = Z->divisibility = 16;
    IrType sh = t1(IR_I32, block);
    IrValue *start = kb_bin(k, IR_MUL, kb_pid(k), irb_const_int(&k->b, ir_type_scalar(IR_I32), block));
    IrValue *offs = kb_bin(k, IR_ADD, kb_splat(k, start, sh), kb_arange(k, block));
    IrValue *mask = kb_cmp(k, IR_CMP_LT, offs, kb_splat(k, n, sh));
    IrValue *zero = irb_const_float(&k->b, t1(IR_F32, block), 0);
    IrValue *x = kb_load(k, kb_addptr(k, kb_splat(k, X, sh), offs), mask, zero);
    IrValue *y = kb_load(k, kb_addptr(k, kb_splat(k, Y, sh), offs), mask, zero);
    kb_store(k, kb_addptr(k, kb_splat(k, Z, sh), offs), kb_bin(k, IR_ADD, x, y), mask);
    kb_return(k);
}

/* Row softmax of an [R, C] block of rows: max, exp, sum, divide. */
static inline void build_softmax(Kb *k, int R, int C, int warps)
{
    kb_init(k, "softmax");
    k->f->sched.num_warps = warps;
    IrValue *X = ir_func_add_param(k->f, ir_type_ptr(IR_F32), "X");
    IrValue *Y = ir_func_add_param(k->f, ir_type_ptr(IR_F32), "Y");
    IrValue *stride = ir_func_add_param(k->f, ir_type_scalar(IR_I32), "stride");
    IrValue *nrows = ir_func_add_param(k->f, ir_type_scalar(IR_I32), "nrows");
    stride->divisibility = 16;
    X->divisibility = Y->divisibility = 16;
    IrValue *start = kb_bin(k, IR_MUL, kb_pid(k), irb_const_int(&k->b, ir_type_scalar(IR_I32), R));
    IrValue *rows = kb_bin(k, IR_ADD, kb_splat(k, start, t1(IR_I32, R)), kb_arange(k, R));
    IrValue *cols = kb_arange(k, C);
    IrType sh = t2(IR_F32, R, C);
    IrValue *rmask = kb_cmp(k, IR_CMP_LT, rows, kb_splat(k, nrows, t1(IR_I32, R)));
    IrValue *mask = kb_bcast(k, kb_expand(k, rmask, 1), sh);
    IrValue *ninf = irb_const_float(&k->b, sh, -1.0 / 0.0);
    IrValue *x = kb_load(k, kb_ptr2d(k, X, rows, stride, cols), mask, ninf);
    IrValue *m = kb_reduce(k, x, 1, IR_RED_MAX);
    IrValue *e = irb_op1(&k->b, IR_EXP, sh, kb_bin(k, IR_SUB, x, kb_bcast(k, kb_expand(k, m, 1), sh)));
    IrValue *s = kb_reduce(k, e, 1, IR_RED_SUM);
    IrValue *y = kb_bin(k, IR_DIV, e, kb_bcast(k, kb_expand(k, s, 1), sh));
    kb_store(k, kb_ptr2d(k, Y, rows, stride, cols), y, mask);
    kb_return(k);
}

/* C[M,N] = sum over k-blocks of A[M,BK] @ B[BK,N] (row-major, lda = K, ldb = N),
 * with elements `e` for A and B and an f32 accumulator carried by a loop. */
static inline void build_matmul(Kb *k, IrElem e, int M, int N, int BK, int warps)
{
    kb_init(k, "matmul");
    k->f->sched.num_warps = warps;
    IrValue *A = ir_func_add_param(k->f, ir_type_ptr(e), "A");
    IrValue *B = ir_func_add_param(k->f, ir_type_ptr(e), "B");
    IrValue *Cp = ir_func_add_param(k->f, ir_type_ptr(IR_F32), "C");
    IrValue *K = ir_func_add_param(k->f, ir_type_scalar(IR_I32), "K");
    K->divisibility = 16;
    A->divisibility = B->divisibility = Cp->divisibility = 16;
    IrType i32 = ir_type_scalar(IR_I32);
    IrValue *acc0 = irb_const_float(&k->b, t2(IR_F32, M, N), 0);
    IrValue *lo = irb_const_int(&k->b, i32, 0), *step = irb_const_int(&k->b, i32, BK);
    IrValue *nN = irb_const_int(&k->b, i32, N);
    IrValue *fargs[4] = {lo, K, step, acc0};
    IrType rt = acc0->type;
    IrOp *loop = ir_op_new(k->f, IR_FOR, k->b.loc, 4, fargs, 1, &rt);
    irb_insert(&k->b, loop);
    IrBlock *body = ir_op_add_region(k->f, loop);
    IrValue *iv = ir_block_add_arg(body, i32, "k0");
    IrValue *acc = ir_block_add_arg(body, rt, "acc");
    IrBuilder outer = k->b;
    k->b.block = body;
    IrValue *rm = kb_arange(k, M), *rn = kb_arange(k, N);
    IrValue *rk = kb_bin(k, IR_ADD, kb_splat(k, iv, t1(IR_I32, BK)), kb_arange(k, BK));
    IrValue *a = kb_load(k, kb_ptr2d(k, A, rm, K, rk), NULL, NULL);
    IrValue *b = kb_load(k, kb_ptr2d(k, B, rk, nN, rn), NULL, NULL);
    IrValue *dargs[3] = {a, b, acc};
    IrValue *d = irb_op(&k->b, IR_DOT, rt, 3, dargs);
    irb_insert(&k->b, ir_op_new(k->f, IR_YIELD, k->b.loc, 1, &d, 0, NULL));
    k->b = outer;
    IrValue *rm2 = kb_arange(k, M), *rn2 = kb_arange(k, N);
    kb_store(k, kb_ptr2d(k, Cp, rm2, nN, rn2), loop->res[0], NULL);
    kb_return(k);
}

#endif
