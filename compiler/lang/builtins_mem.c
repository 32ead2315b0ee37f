/* builtins_mem.c — load, store, atomic_add, dot and the reductions.
 *
 * What: checks and lowers the builtins that touch memory or change shapes by
 * contraction. Pointer, mask, value and `other` are broadcast together to one
 * shape (the IR never broadcasts implicitly); the value and `other` are cast
 * to the pointee type; a mask must be bool.
 * Invariants: load(ptr [, mask [, other]]) — `other` only with a mask (without
 * one every lane is read, so `other` is meaningless and dropped); dot always
 * gets an accumulator (a zero f32 tile when the call gives none).
 * Example: `load(X + offs, mask = offs < n)` with offs: i32[128] ->
 * addptr, cmp, load(%p, %m) : tensor<128xf32>.
 */
#include "sema.h"

#include <string.h>

static bool want_ptr(Sema *s, const Builtin *bi, const Val *p)
{
    if (!sema_want_value(s, p)) return false;
    if (sema_val_type(p).elem == IR_PTR) return true;
    diag_error(s->diag, p->loc, "'%s' needs a pointer or a tile of pointers, got %s", bi->name,
               sema_val_desc(s, p));
    return false;
}

static bool want_mask(Sema *s, const Builtin *bi, const Val *m)
{
    if (!sema_want_value(s, m)) return false;
    if (sema_val_type(m).elem == IR_I1) return true;
    diag_error(s->diag, m->loc, "the mask of '%s' must be bool, got %s", bi->name, sema_val_desc(s, m));
    return false;
}

static bool want_number(Sema *s, const Builtin *bi, const Val *v, const char *what)
{
    if (!sema_want_value(s, v)) return false;
    if (sema_val_type(v).elem != IR_PTR) return true;
    diag_error(s->diag, v->loc, "the %s of '%s' must be a number, got %s", what, bi->name, sema_val_desc(s, v));
    return false;
}

/* Broadcast the present operands of a memory op to one shape. */
static bool mem_shape(Sema *s, BArgs *a, int n, IrType *shape, SrcLoc loc)
{
    *shape = sema_val_type(&a->v[0]);
    for (int i = 1; i < n; i++)
        if (a->have[i] && !sema_broadcast_or_error(s, *shape, sema_val_type(&a->v[i]), shape, loc)) return false;
    return true;
}

Val bi_load(Sema *s, const Builtin *bi, BArgs *a, const AstExpr *call)
{
    bool ok = want_ptr(s, bi, &a->v[0]);
    if (a->have[1]) ok &= want_mask(s, bi, &a->v[1]);
    if (a->have[2]) ok &= want_number(s, bi, &a->v[2], "other value");
    IrType shape;
    if (!ok) return val_err();
    if (!a->have[1]) a->have[2] = false;
    if (!mem_shape(s, a, 3, &shape, call->loc)) return val_err();
    IrType pt = shape;
    IrType rt = ir_type_with_elem(shape, (IrElem)shape.pointee);
    IrValue *args[3];
    int n = 0;
    args[n++] = sema_convert(s, &a->v[0], pt, call->loc);
    if (a->have[1]) args[n++] = sema_convert(s, &a->v[1], ir_type_with_elem(shape, IR_I1), call->loc);
    if (a->have[2]) args[n++] = sema_convert(s, &a->v[2], rt, call->loc);
    return val_rt(sema_emit(s, call->loc, IR_LOAD, rt, n, args), call->loc);
}

/* store and atomic_add: (ptr, value [, mask]); atomic_add returns the old values. */
Val bi_store(Sema *s, const Builtin *bi, BArgs *a, const AstExpr *call)
{
    bool ok = want_ptr(s, bi, &a->v[0]) & want_number(s, bi, &a->v[1], "value");
    if (a->have[2]) ok &= want_mask(s, bi, &a->v[2]);
    IrType shape;
    if (!ok || !mem_shape(s, a, 3, &shape, call->loc)) return val_err();
    IrType vt = ir_type_with_elem(shape, (IrElem)shape.pointee);
    IrValue *args[3];
    int n = 0;
    args[n++] = sema_convert(s, &a->v[0], shape, call->loc);
    args[n++] = sema_convert(s, &a->v[1], vt, call->loc);
    if (a->have[2]) args[n++] = sema_convert(s, &a->v[2], ir_type_with_elem(shape, IR_I1), call->loc);
    if (bi->code == IR_STORE) {
        sema_emit(s, call->loc, IR_STORE, ir_type_scalar(IR_VOID), n, args);
        Val v;
        memset(&v, 0, sizeof v);
        v.kind = V_VOID;
        v.loc = call->loc;
        return v;
    }
    return val_rt(sema_emit(s, call->loc, IR_ATOMIC_ADD, vt, n, args), call->loc);
}

static bool dot_operand(Sema *s, const Val *v, const char *which)
{
    if (!sema_want_value(s, v)) return false;
    IrType t = sema_val_type(v);
    if (t.rank != 2) {
        diag_error(s->diag, v->loc, "operand %s of 'dot' must be a 2-D tile, got %s", which, sema_type_str(s, t));
        return false;
    }
    IrElem e = (IrElem)t.elem;
    if (e != IR_F16 && e != IR_BF16 && e != IR_F32 && e != IR_I8 && e != IR_F8E4M3) {
        diag_error(s->diag, v->loc, "'dot' operands must be f16, bf16, f32, f8e4m3 or i8, got %s",
                   sema_type_str(s, t));
        return false;
    }
    return true;
}

Val bi_dot(Sema *s, const Builtin *bi, BArgs *a, const AstExpr *call)
{
    (void)bi;
    if (!dot_operand(s, &a->v[0], "a") || !dot_operand(s, &a->v[1], "b")) return val_err();
    IrType ta = sema_val_type(&a->v[0]), tb = sema_val_type(&a->v[1]);
    if (ta.elem != tb.elem) {
        diag_error(s->diag, call->loc, "'dot' operands must have the same element type, got %s and %s",
                   sema_type_str(s, ta), sema_type_str(s, tb));
        return val_err();
    }
    if (ta.shape[1] != tb.shape[0]) {
        diag_error(s->diag, call->loc, "cannot multiply %s by %s in 'dot': the inner dimensions %d and %d differ",
                   sema_shape_str(s, ta), sema_shape_str(s, tb), ta.shape[1], tb.shape[0]);
        return val_err();
    }
    int32_t mn[2] = {ta.shape[0], tb.shape[1]};
    IrElem acc_e = ta.elem == IR_I8 ? IR_I32 : IR_F32;
    IrType rt = ir_type_tile(ir_type_scalar(acc_e), 2, mn);
    IrValue *args[3] = {a->v[0].v, a->v[1].v, NULL};
    if (a->have[2]) {
        Val *acc = &a->v[2];
        if (!sema_want_value(s, acc)) return val_err();
        IrType tc = sema_val_type(acc);
        if (acc->kind == V_RT && !ir_type_eq(tc, rt)) {
            diag_error(s->diag, acc->loc, "the accumulator of 'dot' must be %s, got %s", sema_type_str(s, rt),
                       sema_type_str(s, tc));
            return val_err();
        }
        args[2] = sema_convert(s, acc, rt, call->loc);
    } else {
        Val zero = cv_int(0, IR_I32, call->loc);
        args[2] = sema_convert(s, &zero, rt, call->loc);
    }
    return val_rt(sema_emit(s, call->loc, IR_DOT, rt, 3, args), call->loc);
}


Val bi_reduce(Sema *s, const Builtin *bi, BArgs *a, const AstExpr *call)
{
    Val *x = &a->v[0];
    if (!sema_want_value(s, x)) return val_err();
    IrType t = sema_val_type(x);
    if (t.rank == 0 || t.elem == IR_PTR) {
        diag_error(s->diag, x->loc, "'%s' reduces a tile of numbers, got %s", bi->name, sema_val_desc(s, x));
        return val_err();
    }
    IrValue *v = x->v;
    int64_t axis = 0;
    if (a->have[1]) {
        if (!bi_const_int(s, bi, a, 1, &axis)) return val_err();
        if (axis < -t.rank || axis >= t.rank) {
            diag_error(s->diag, a->v[1].loc, "axis %lld is out of range for %s", (long long)axis,
                       sema_type_str(s, t));
            return val_err();
        }
        if (axis < 0) axis += t.rank;
    } else if (t.rank > 1) {
        /* no axis: reduce every element, as one flat axis */
        int32_t n = (int32_t)ir_type_numel(t);
        v = sema_emit(s, call->loc, IR_RESHAPE, ir_type_tile(ir_type_scalar_of(t), 1, &n), 1, &v);
        t = v->type;
    }
    IrReduce kind = (IrReduce)bi->code;
    IrElem e = (IrElem)t.elem;
    /* Sums of narrow integers accumulate in i32 (as Triton does): i1 counts. */
    if (kind == IR_RED_SUM && ir_elem_is_int(e) && ir_elem_bits(e) < 32) {
        e = IR_I32;
        v = sema_cast(s, v, e, call->loc);
    }
    IrType rt = ir_type_scalar(kind == IR_RED_ARGMAX || kind == IR_RED_ARGMIN ? IR_I32 : e);
    int32_t dims[IR_MAX_RANK];
    int r = 0;
    for (int i = 0; i < t.rank; i++)
        if (i != axis) dims[r++] = t.shape[i];
    if (r > 0) rt = ir_type_tile(rt, r, dims);
    IrValue *res = sema_emit(s, call->loc, IR_REDUCE, rt, 1, &v);
    res->def->attr[0] = (int)axis;
    res->def->attr[1] = (int)kind;
    return val_rt(res, call->loc);
}
