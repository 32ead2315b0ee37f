/* sema_types.c — types in messages, promotion, broadcasting and the explicit
 * conversions lowering inserts.
 *
 * What: the type rules of docs/language.md ("Types and promotion") and the
 * ops that realise them. The IR never converts implicitly: every elementwise
 * op gets operands of identical shape, so a mixed `x[:, None] + y[None, :]`
 * becomes expand_dims, broadcast and (when element types differ) cast first.
 * Invariants: sema_convert returns a value of exactly the requested type, and
 * only emits ops that change something (no cast to the same type).
 * Example: i32[64] + f32[32, 1] -> cast i32[64] to f32[64], expand_dims to
 * f32[1, 64], broadcast both to f32[32, 64], add.
 */
#include "sema.h"

#include <stdio.h>
#include <string.h>

Val val_err(void)
{
    Val v;
    memset(&v, 0, sizeof v);
    v.kind = V_ERR;
    return v;
}

Val val_rt(IrValue *x, SrcLoc loc)
{
    Val v;
    memset(&v, 0, sizeof v);
    v.kind = V_RT;
    v.v = x;
    v.type = x->type;
    v.loc = loc;
    return v;
}

IrType sema_val_type(const Val *v) { return v->kind == V_RT ? v->v->type : v->type; }

const char *sema_shape_str(Sema *s, IrType t)
{
    char buf[96];
    size_t k = 0;
    buf[k++] = '[';
    for (int i = 0; i < t.rank; i++)
        k += (size_t)snprintf(buf + k, sizeof buf - k, i ? ", %d" : "%d", t.shape[i]);
    buf[k++] = ']';
    buf[k] = 0;
    return arena_strdup(s->arena, buf);
}

const char *sema_type_str(Sema *s, IrType t)
{
    const char *el = t.elem == IR_PTR
                         ? arena_printf(s->arena, "*%s", ir_elem_name((IrElem)t.pointee))
                         : ir_elem_name((IrElem)t.elem);
    if (t.rank == 0) return el;
    return arena_printf(s->arena, "%s%s", el, sema_shape_str(s, t));
}

const char *sema_val_desc(Sema *s, const Val *v)
{
    switch (v->kind) {
    case V_CONST: case V_RT: return sema_type_str(s, sema_val_type(v));
    case V_TYPE: return "a type";
    case V_FN: return "a function";
    case V_LIST: return "a list";
    case V_STR: return "a string";
    case V_NONE: return "None";
    case V_SLICE: return "':'";
    case V_VOID: return "no value";
    default: return "an erroneous value";
    }
}

bool sema_want_value(Sema *s, const Val *v)
{
    switch (v->kind) {
    case V_CONST: case V_RT: return true;
    case V_ERR: return false;
    case V_TYPE:
        diag_error(s->diag, v->loc, "'%s' is a type, not a value", v->s ? v->s : "?");
        return false;
    case V_FN:
        diag_error(s->diag, v->loc, "'%s' is a function, not a value; call it", v->s ? v->s : "?");
        return false;
    case V_LIST:
        diag_error(s->diag, v->loc, "a list is only allowed as a shape");
        return false;
    case V_STR:
        diag_error(s->diag, v->loc, "a string is only allowed as a static_assert message");
        return false;
    case V_NONE:
        diag_error(s->diag, v->loc,
                   "'None' is not a value; it only inserts an axis in an index (x[:, None]) or leaves out an "
                   "optional argument (axis = None)");
        return false;
    case V_SLICE:
        diag_error(s->diag, v->loc, "':' is only allowed inside an index");
        return false;
    case V_VOID:
        diag_error(s->diag, v->loc, "expression has no value");
        return false;
    }
    return false;
}

/* Rank of an element type inside its family, for "the wider wins". */
static int width_rank(IrElem e) { return ir_elem_bits(e) * 2 + (ir_elem_is_signed(e) ? 0 : 1); }

/* The rules of docs/language.md: a literal adopts the other side's type; float
 * beats int; among floats the wider wins and f16 with bf16 gives f32; among
 * ints the wider wins (unsigned wins a tie, as in C). */
IrElem sema_promote(IrElem a, bool ua, IrElem b, bool ub, bool *untyped)
{
    *untyped = false;
    bool af = ir_elem_is_float(a), bf = ir_elem_is_float(b);
    if (ua != ub) {
        IrElem t = ua ? b : a, l = ua ? a : b;
        if (ir_elem_is_float(l) && !ir_elem_is_float(t)) return IR_F32;
        return t;
    }
    *untyped = ua && ub;
    if (af != bf) return af ? a : b;
    if (af) {
        if (a == b) return a;
        if (ir_elem_bits(a) == ir_elem_bits(b)) return IR_F32; /* f16 with bf16 */
        return ir_elem_bits(a) > ir_elem_bits(b) ? a : b;
    }
    return width_rank(a) >= width_rank(b) ? a : b;
}

bool sema_broadcast_shape(IrType a, IrType b, IrType *out)
{
    int r = a.rank > b.rank ? a.rank : b.rank;
    IrType t = a;
    t.rank = (uint8_t)r;
    for (int i = 0; i < r; i++) {
        int ia = i - (r - a.rank), ib = i - (r - b.rank);
        int da = ia >= 0 ? a.shape[ia] : 1, db = ib >= 0 ? b.shape[ib] : 1;
        if (da != db && da != 1 && db != 1) return false;
        t.shape[i] = da == 1 ? db : da;
    }
    for (int i = r; i < IR_MAX_RANK; i++) t.shape[i] = 0;
    *out = t;
    return true;
}

bool sema_broadcast_or_error(Sema *s, IrType a, IrType b, IrType *out, SrcLoc loc)
{
    if (sema_broadcast_shape(a, b, out)) return true;
    diag_error(s->diag, loc, "cannot broadcast %s with %s", sema_shape_str(s, a), sema_shape_str(s, b));
    return false;
}

/* Tile shapes: at most 4 axes, each a power of two <= 2^20. */
bool sema_check_shape(Sema *s, int rank, const int64_t *dims, SrcLoc loc)
{
    if (rank > IR_MAX_RANK || rank < 1) {
        diag_error(s->diag, loc, "a tile has 1 to %d dimensions, got %d", IR_MAX_RANK, rank);
        return false;
    }
    for (int i = 0; i < rank; i++) {
        if (!sup_is_pow2(dims[i]) || dims[i] > IR_MAX_TILE_NUMEL) {
            diag_error(s->diag, loc, "tile dimensions must be powers of two (at most %d), got %lld",
                       IR_MAX_TILE_NUMEL, (long long)dims[i]);
            return false;
        }
    }
    return true;
}

/* Every tile is made here, so this is where one past IR_MAX_TILE_NUMEL is
 * reported (a broadcast or a dot can make one from legal operands). Once per
 * kernel: the ops on that tile would repeat it. The op is still emitted (the
 * kernel has an error and is never compiled). */
static void check_tile_size(Sema *s, IrType t, SrcLoc loc)
{
    if (t.rank == 0 || s->tile_limit_reported) return;
    int64_t n = ir_type_numel(t);
    if (n <= IR_MAX_TILE_NUMEL) return;
    s->tile_limit_reported = true;
    char num[32];
    if (n == INT64_MAX) snprintf(num, sizeof num, "more than 2^63");
    else snprintf(num, sizeof num, "%lld", (long long)n);
    diag_error(s->diag, loc, "this %s tile has %s elements; a tile may have at most %d (2^20): use smaller "
               "blocks (BLOCK_* constants)", sema_type_str(s, t), num, IR_MAX_TILE_NUMEL);
}

/* f8e4m3 is a storage and dot-operand type (ir_f8_op_ok): arithmetic,
 * comparisons, reductions and atomics on it are reported where written, once
 * per kernel, with the fix. */
static void check_f8_op(Sema *s, IrOpcode op, IrType t, int n, IrValue *const *args, SrcLoc loc)
{
    bool f8 = ir_op_info[op].nres != 0 && t.elem == IR_F8E4M3;
    for (int i = 0; i < n && !f8; i++) f8 = args[i] && args[i]->type.elem == IR_F8E4M3;
    if (!f8 || ir_f8_op_ok(op) || s->f8_op_reported) return;
    s->f8_op_reported = true;
    diag_error(s->diag, loc, "'%s' is not defined on f8e4m3: it is a storage type (load, store, cast, dot); "
               "cast to f32 first", ir_op_info[op].name);
}

IrValue *sema_emit(Sema *s, SrcLoc loc, IrOpcode op, IrType t, int n, IrValue *const *args)
{
    s->kernel_ops++;
    check_f8_op(s, op, t, n, args, loc);
    if (ir_op_info[op].nres != 0) check_tile_size(s, t, loc);
    IrOp *o = ir_op_new(s->b.f, op, loc, n, args, ir_op_info[op].nres == 0 ? 0 : 1, &t);
    irb_insert(&s->b, o);
    return o->nres ? o->res[0] : NULL;
}

static IrValue *emit_const(Sema *s, const Val *v, IrType t, SrcLoc loc)
{
    Val c = cv_convert(v, (IrElem)t.elem);
    IrValue *r = sema_emit(s, loc, IR_CONST, t, 0, NULL);
    if (ir_elem_is_float((IrElem)t.elem)) {
        r->def->fval = c.f;
    } else {
        r->def->ival = c.i;
        r->def->fval = (double)c.i;
    }
    return r;
}

IrValue *sema_materialize(Sema *s, const Val *v, SrcLoc loc)
{
    if (v->kind == V_RT) return v->v;
    return emit_const(s, v, v->type, loc);
}

IrValue *sema_cast(Sema *s, IrValue *x, IrElem e, SrcLoc loc)
{
    if (x->type.elem == e) return x;
    return sema_emit(s, loc, IR_CAST, ir_type_with_elem(x->type, e), 1, &x);
}

/* splat a scalar, prepend size-1 axes (ranks align on the right), then stretch. */
IrValue *sema_reshape_to(Sema *s, IrValue *x, IrType target, SrcLoc loc)
{
    IrType want = ir_type_with_elem(target, (IrElem)x->type.elem);
    want.pointee = x->type.pointee;
    if (ir_type_eq(x->type, want)) return x;
    if (x->type.rank == 0) return sema_emit(s, loc, IR_SPLAT, want, 1, &x);
    while (x->type.rank < want.rank) {
        IrType t = x->type;
        for (int i = t.rank; i > 0; i--) t.shape[i] = t.shape[i - 1];
        t.shape[0] = 1;
        t.rank++;
        x = sema_emit(s, loc, IR_EXPAND_DIMS, t, 1, &x);
        x->def->attr[0] = 0;
    }
    if (!ir_type_eq(x->type, want)) x = sema_emit(s, loc, IR_BROADCAST, want, 1, &x);
    return x;
}

IrValue *sema_convert(Sema *s, const Val *v, IrType target, SrcLoc loc)
{
    if (v->kind == V_CONST) return emit_const(s, v, target, loc);
    IrValue *x = v->v;
    if (target.elem != IR_PTR) x = sema_cast(s, x, (IrElem)target.elem, loc);
    return sema_reshape_to(s, x, target, loc);
}
