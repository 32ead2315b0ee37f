/* verify.c — checks the Tile IR invariants between passes (ir.h, docs/ir.md).
 *
 * What it does: one walk over the kernel in program order, keeping a
 * "visible" flag per value id: parameters first, then each block's arguments
 * and each op's results as they are defined; when a region ends, everything it
 * defined goes out of sight again. An operand that is not visible is a use
 * before its definition, a use of a value from a sibling or inner region, or a
 * value of another kernel. Per op it checks the counts (the op table, the
 * optional trailing operands of load/store/atomic_add), the type rules (the IR
 * never broadcasts implicitly: elementwise operands and results have one
 * shape), the region structure and the terminators.
 *
 * Invariants of its own: never crashes on malformed IR (null operands, ids out
 * of range, wrong region counts), never changes the IR, reports problems as
 *   internal error: verifier: <op> at LINE:COL: <what>
 * lines on `err` (at most MAX_ERRORS), and returns false if there were any.
 *
 * GPU IR (ir_verify_gpu demands a layout on every tile; ir_verify checks the
 * ones present): the layout table is well formed (powers of two, tpw over 32
 * lanes, wpc within num_warps, order a permutation, slices of an earlier
 * parent of one rank more), each layout's rank is its value's, a loop keeps
 * one layout per carried value. The GPU passes' schedule attributes
 * (pipeline.*, smem.*, wgmma.*, pingpong, warp_spec, tma.*) are the GPU IR
 * layer's to check: compiler/gpuir/verify.c, run after ir_verify_gpu.
 *
 * Example: `%2 = add %0, %1 : tensor<64xf32>` with %1 a tensor<32xf32> gives
 *   internal error: verifier: add at 3:5: operand 1 has type tensor<32xf32>,
 *   expected tensor<64xf32> (elementwise operands and result have one type)
 */
#include "ir.h"

#include <stdio.h>
#include <string.h>

#define MAX_ERRORS 20

typedef struct Verifier {
    const IrFunc *f;
    StrBuf *err;
    int nerr;
    Arena *arena;   /* scratch_arena: freed when verify returns or an allocation fails */
    int nids;
    uint8_t *visible;       /* by id: usable at the current point */
    uint8_t *defined;       /* by id: its definition has been seen */
    const IrValue **owner;  /* by id: the value defined with this id */
    bool all_layouts;       /* ir_verify_gpu: every tile value has a layout */
} Verifier;

/* ---- reporting ---- */
static bool vbad(Verifier *V, const IrOp *op, const char *fmt, va_list ap)
{
    if (V->nerr++ >= MAX_ERRORS) return false;
    if (op && (unsigned)op->op < IR_OP_COUNT)
        sb_printf(V->err, "internal error: verifier: %s at %d:%d: ", ir_op_info[op->op].name, op->loc.line,
                  op->loc.col);
    else if (op)
        sb_printf(V->err, "internal error: verifier: op #%d at %d:%d: ", (int)op->op, op->loc.line, op->loc.col);
    else
        sb_printf(V->err, "internal error: verifier: kernel @%s at %d:%d: ", V->f->name ? V->f->name : "?",
                  V->f->loc.line, V->f->loc.col);
    sb_vprintf(V->err, fmt, ap);
    sb_putc(V->err, '\n');
    return false;
}

static bool bad(Verifier *V, const IrOp *op, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static bool bad(Verifier *V, const IrOp *op, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vbad(V, op, fmt, ap);
    va_end(ap);
    return false;
}

static const char *ts(Verifier *V, IrType t)
{
    char buf[128];
    return arena_strdup(V->arena, ir_type_str(t, buf, sizeof buf));
}

/* ---- type helpers ---- */
static bool same_shape(IrType a, IrType b)
{
    if (a.rank != b.rank) return false;
    for (int i = 0; i < a.rank; i++)
        if (a.shape[i] != b.shape[i]) return false;
    return true;
}

static bool is_num(IrElem e) { return ir_elem_is_int(e) || ir_elem_is_float(e); }
static IrElem el(const IrValue *v) { return (IrElem)v->type.elem; }

/* ---- definitions and uses ---- */
static bool id_ok(Verifier *V, const IrValue *v) { return v && v->id >= 0 && v->id < V->nids; }

/* IR_MAX_TILE_NUMEL bounds every size the backend derives from a tile. */
static bool tile_too_large(IrType t)
{
    for (int d = 0; d < t.rank && d < IR_MAX_RANK; d++)
        if (t.shape[d] < 1) return true;
    return ir_type_numel(t) > IR_MAX_TILE_NUMEL;
}

static void define(Verifier *V, const IrOp *op, const IrValue *v, const char *what, int i)
{
    if (!v) { bad(V, op, "%s %d is null", what, i); return; }
    if (!id_ok(V, v)) { bad(V, op, "%s %d has id %d outside 0..%d", what, i, v->id, V->nids - 1); return; }
    if (V->defined[v->id]) {
        bad(V, op, "%s %d reuses value id %d (ids must be unique)", what, i, v->id);
        return;
    }
    if (v->type.rank > IR_MAX_RANK || v->type.elem == IR_VOID || v->type.elem >= IR_ELEM_COUNT)
        bad(V, op, "%s %d has a malformed type", what, i);
    else if (tile_too_large(v->type))
        bad(V, op, "%s %d is a tile of %lld elements (each dimension 1 or more, at most %d in all)", what, i,
            (long long)ir_type_numel(v->type), IR_MAX_TILE_NUMEL);
    V->defined[v->id] = 1;
    V->visible[v->id] = 1;
    V->owner[v->id] = v;
}

static void hide(Verifier *V, const IrValue *v)
{
    if (id_ok(V, v) && V->owner[v->id] == v) V->visible[v->id] = 0;
}

static bool check_uses(Verifier *V, const IrOp *op)
{
    bool ok = true;
    for (int i = 0; i < op->nargs; i++) {
        const IrValue *v = op->args[i];
        if (!v) { ok = bad(V, op, "operand %d is null", i); continue; }
        if (!id_ok(V, v) || (V->defined[v->id] && V->owner[v->id] != v))
            ok = bad(V, op, "operand %d (value #%d) is not a value of this kernel", i, v->id);
        else if (!V->defined[v->id])
            ok = bad(V, op, "operand %d (value #%d) is used before its definition", i, v->id);
        else if (!V->visible[v->id])
            ok = bad(V, op, "operand %d (value #%d) is defined in a region that does not enclose this use", i,
                     v->id);
    }
    return ok;
}

/* ---- counts ---- */
static bool check_counts(Verifier *V, const IrOp *op)
{
    const IrOpInfo *in = &ir_op_info[op->op];
    if (in->nargs >= 0 && op->nargs != in->nargs)
        return bad(V, op, "expects %d operand%s, got %d", in->nargs, in->nargs == 1 ? "" : "s", op->nargs);
    if (in->nres >= 0 && op->nres != in->nres)
        return bad(V, op, "expects %d result%s, got %d", in->nres, in->nres == 1 ? "" : "s", op->nres);
    switch (op->op) {
    case IR_LOAD:
        if (op->nargs < 1 || op->nargs > 3) return bad(V, op, "expects 1 to 3 operands (ptr, mask, other), got %d", op->nargs);
        break;
    case IR_STORE:
    case IR_ATOMIC_ADD:
        if (op->nargs < 2 || op->nargs > 3) return bad(V, op, "expects 2 or 3 operands (ptr, value, mask), got %d", op->nargs);
        break;
    case IR_FOR:
        if (op->nargs < 3) return bad(V, op, "expects lower bound, upper bound and step, got %d operands", op->nargs);
        if (op->nres != op->nargs - 3)
            return bad(V, op, "has %d loop-carried inits but %d results", op->nargs - 3, op->nres);
        if (op->nregions != 1) return bad(V, op, "expects 1 region, got %d", op->nregions);
        break;
    case IR_IF:
        if (op->nregions != 2 && !(op->nregions == 1 && op->nres == 0))
            return bad(V, op, "expects then and else regions, got %d region%s", op->nregions,
                       op->nregions == 1 ? "" : "s");
        break;
    default:
        if (op->nregions != 0) return bad(V, op, "has %d region%s but takes none", op->nregions,
                                          op->nregions == 1 ? "" : "s");
    }
    for (int r = 0; r < op->nregions; r++)
        if (!op->regions[r]) return bad(V, op, "region %d is null", r);
    for (int i = 0; i < op->nres; i++)
        if (!op->res[i]) return bad(V, op, "result %d is null", i);
    return true;
}

/* ---- type rules ---- */
static bool check_elementwise(Verifier *V, const IrOp *op)
{
    IrType rt = op->res[0]->type;
    for (int i = 0; i < op->nargs; i++)
        if (!same_shape(op->args[i]->type, rt))
            return bad(V, op, "operand %d has type %s, result %s: elementwise shapes must match "
                       "(the IR never broadcasts implicitly)", i, ts(V, op->args[i]->type), ts(V, rt));
    IrElem e = (IrElem)rt.elem;
    switch (op->op) {
    case IR_CMP:
        if (e != IR_I1) return bad(V, op, "result has type %s, expected elements of i1", ts(V, rt));
        if (!ir_type_eq(op->args[0]->type, op->args[1]->type))
            return bad(V, op, "compares %s with %s", ts(V, op->args[0]->type), ts(V, op->args[1]->type));
        if (op->attr[0] < IR_CMP_EQ || op->attr[0] > IR_CMP_GE) return bad(V, op, "bad predicate %d", op->attr[0]);
        return true;
    case IR_SELECT:
        if (el(op->args[0]) != IR_I1) return bad(V, op, "condition has type %s, expected i1 elements", ts(V, op->args[0]->type));
        for (int i = 1; i < 3; i++)
            if (!ir_type_eq(op->args[i]->type, rt))
                return bad(V, op, "operand %d has type %s, result %s", i, ts(V, op->args[i]->type), ts(V, rt));
        return true;
    case IR_CAST:
        if (e == IR_VOID || el(op->args[0]) == IR_VOID) return bad(V, op, "cast of void");
        return true;
    case IR_ADDPTR:
        if (el(op->args[0]) != IR_PTR) return bad(V, op, "operand 0 has type %s, expected pointers", ts(V, op->args[0]->type));
        if (!ir_elem_is_int(el(op->args[1])) || el(op->args[1]) == IR_I1)
            return bad(V, op, "offset has type %s, expected integers", ts(V, op->args[1]->type));
        if (!ir_type_eq(op->args[0]->type, rt))
            return bad(V, op, "result has type %s, expected %s", ts(V, rt), ts(V, op->args[0]->type));
        return true;
    default: break;
    }
    for (int i = 0; i < op->nargs; i++)
        if (!ir_type_eq(op->args[i]->type, rt))
            return bad(V, op, "operand %d has type %s, expected %s (elementwise operands and result have one type)",
                       i, ts(V, op->args[i]->type), ts(V, rt));
    switch (op->op) {
    case IR_AND: case IR_OR: case IR_XOR: case IR_NOT: case IR_SHL: case IR_SHR:
        if (!ir_elem_is_int(e)) return bad(V, op, "needs integers, got %s", ts(V, rt));
        return true;
    case IR_EXP: case IR_EXP2: case IR_LOG: case IR_LOG2: case IR_SQRT: case IR_RSQRT: case IR_TANH:
    case IR_SIN: case IR_COS: case IR_FLOOR: case IR_CEIL:
        if (!ir_elem_is_float(e)) return bad(V, op, "needs floats, got %s", ts(V, rt));
        return true;
    default:
        if (!is_num(e)) return bad(V, op, "needs numbers, got %s", ts(V, rt));
        return true;
    }
}

/* load(ptr [, mask [, other]]), store(ptr, value [, mask]), atomic_add(ptr, value [, mask]) */
static bool check_memory(Verifier *V, const IrOp *op)
{
    IrType pt = op->args[0]->type;
    if (pt.elem != IR_PTR) return bad(V, op, "pointer operand has type %s", ts(V, pt));
    IrType vt = ir_type_with_elem(pt, (IrElem)pt.pointee);
    int mask_at = op->op == IR_LOAD ? 1 : 2;
    if (op->op != IR_LOAD && !ir_type_eq(op->args[1]->type, vt))
        return bad(V, op, "value has type %s, expected %s (the pointee type in the pointer's shape)",
                   ts(V, op->args[1]->type), ts(V, vt));
    if (op->nres == 1 && !ir_type_eq(op->res[0]->type, vt))
        return bad(V, op, "result has type %s, expected %s (the pointee type in the pointer's shape)",
                   ts(V, op->res[0]->type), ts(V, vt));
    if (op->nargs > mask_at) {
        IrType mt = op->args[mask_at]->type;
        if (mt.elem != IR_I1 || !same_shape(mt, pt))
            return bad(V, op, "mask has type %s, expected %s", ts(V, mt), ts(V, ir_type_with_elem(pt, IR_I1)));
    }
    if (op->op == IR_LOAD && op->nargs == 3 && !ir_type_eq(op->args[2]->type, vt))
        return bad(V, op, "other has type %s, expected %s", ts(V, op->args[2]->type), ts(V, vt));
    return true;
}

static bool check_dot(Verifier *V, const IrOp *op)
{
    IrType a = op->args[0]->type, b = op->args[1]->type, c = op->args[2]->type, r = op->res[0]->type;
    if (a.rank != 2 || b.rank != 2 || c.rank != 2)
        return bad(V, op, "operands must be 2-d tiles, got %s, %s, %s", ts(V, a), ts(V, b), ts(V, c));
    if (a.shape[1] != b.shape[0])
        return bad(V, op, "inner dimensions differ: %s x %s", ts(V, a), ts(V, b));
    if (c.shape[0] != a.shape[0] || c.shape[1] != b.shape[1])
        return bad(V, op, "accumulator %s, expected [%d, %d]", ts(V, c), a.shape[0], b.shape[1]);
    if (a.elem != b.elem || !is_num((IrElem)a.elem))
        return bad(V, op, "operand elements differ or are not numbers: %s, %s", ts(V, a), ts(V, b));
    if (!ir_type_eq(c, r)) return bad(V, op, "result has type %s, accumulator %s", ts(V, r), ts(V, c));
    return true;
}

static bool check_reduce(Verifier *V, const IrOp *op)
{
    IrType in = op->args[0]->type, r = op->res[0]->type;
    int axis = op->attr[0], kind = op->attr[1];
    if (in.rank == 0) return bad(V, op, "input is a scalar");
    if (axis < 0 || axis >= in.rank) return bad(V, op, "axis %d out of range for %s", axis, ts(V, in));
    if (kind < IR_RED_SUM || kind > IR_RED_ARGMIN) return bad(V, op, "bad reduction kind %d", kind);
    if (!is_num((IrElem)in.elem)) return bad(V, op, "reduces %s", ts(V, in));
    IrType want = in;
    want.rank = (uint8_t)(in.rank - 1);
    for (int i = axis; i < want.rank; i++) want.shape[i] = in.shape[i + 1];
    if (want.rank < IR_MAX_RANK) want.shape[want.rank] = 0;
    if (kind == IR_RED_ARGMAX || kind == IR_RED_ARGMIN) want = ir_type_with_elem(want, IR_I32);
    if (!ir_type_eq(r, want)) return bad(V, op, "result has type %s, expected %s", ts(V, r), ts(V, want));
    return true;
}

/* splat, broadcast, expand_dims, reshape, trans, convert_layout */
static bool check_shape_op(Verifier *V, const IrOp *op)
{
    IrType in = op->args[0]->type, r = op->res[0]->type;
    if (!ir_type_eq(ir_type_scalar_of(in), ir_type_scalar_of(r)))
        return bad(V, op, "changes the element type: %s to %s", ts(V, in), ts(V, r));
    IrType want = in;
    switch (op->op) {
    case IR_SPLAT:
        if (in.rank != 0 || r.rank == 0) return bad(V, op, "expects a scalar and a tile result, got %s to %s", ts(V, in), ts(V, r));
        return true;
    case IR_BROADCAST:
        if (in.rank == 0 || in.rank != r.rank) return bad(V, op, "ranks differ: %s to %s", ts(V, in), ts(V, r));
        for (int i = 0; i < in.rank; i++)
            if (in.shape[i] != r.shape[i] && in.shape[i] != 1)
                return bad(V, op, "dimension %d of %s is neither 1 nor %d", i, ts(V, in), r.shape[i]);
        return true;
    case IR_EXPAND_DIMS: {
        int ax = op->attr[0];
        if (in.rank == 0 || in.rank >= IR_MAX_RANK || ax < 0 || ax > in.rank)
            return bad(V, op, "axis %d invalid for %s", ax, ts(V, in));
        want.rank = (uint8_t)(in.rank + 1);
        for (int i = 0, j = 0; i < want.rank; i++) want.shape[i] = i == ax ? 1 : in.shape[j++];
        break;
    }
    case IR_RESHAPE:
        if (in.rank == 0 || r.rank == 0 || ir_type_numel(in) != ir_type_numel(r))
            return bad(V, op, "element counts differ: %s to %s", ts(V, in), ts(V, r));
        return true;
    case IR_TRANS: {
        unsigned seen = 0;
        if (in.rank == 0) return bad(V, op, "input is a scalar");
        for (int i = 0; i < in.rank; i++) {
            int p = op->attr[i];
            if (p < 0 || p >= in.rank || (seen & (1u << p))) return bad(V, op, "attributes are not a permutation of 0..%d", in.rank - 1);
            seen |= 1u << p;
            want.shape[i] = in.shape[p];
        }
        break;
    }
    default: break; /* convert_layout: same type */
    }
    if (!ir_type_eq(r, want)) return bad(V, op, "result has type %s, expected %s", ts(V, r), ts(V, want));
    return true;
}

static bool check_leaf(Verifier *V, const IrOp *op)
{
    IrType r = op->res[0]->type;
    switch (op->op) {
    case IR_CONST:
        if (!is_num((IrElem)r.elem)) return bad(V, op, "constant of type %s", ts(V, r));
        if (r.elem == IR_I1 && op->ival != 0 && op->ival != 1) return bad(V, op, "i1 constant %lld", (long long)op->ival);
        return true;
    case IR_PROGRAM_ID:
    case IR_NUM_PROGRAMS:
        if (!ir_type_eq(r, ir_type_scalar(IR_I32))) return bad(V, op, "result has type %s, expected i32", ts(V, r));
        if (op->attr[0] < 0 || op->attr[0] > 2) return bad(V, op, "axis %d, expected 0, 1 or 2", op->attr[0]);
        return true;
    default: { /* arange */
        int32_t n = op->attr[1] - op->attr[0];
        IrType want = ir_type_tile(ir_type_scalar(IR_I32), 1, &n);
        if (op->attr[0] < 0 || n <= 0) return bad(V, op, "empty or negative range %d..%d", op->attr[0], op->attr[1]);
        if (!ir_type_eq(r, want)) return bad(V, op, "result has type %s, expected %s", ts(V, r), ts(V, want));
        return true;
    }
    }
}

/* The yield ending region r of op, with types equal to the op's results. */
static bool check_yield_types(Verifier *V, const IrOp *op, int r)
{
    const IrOp *y = op->regions[r]->last;
    if (!y || y->op != IR_YIELD) return true; /* reported by check_block */
    if (y->nargs != op->nres)
        return bad(V, y, "yields %d value%s, the enclosing %s has %d result%s", y->nargs, y->nargs == 1 ? "" : "s",
                   ir_op_info[op->op].name, op->nres, op->nres == 1 ? "" : "s");
    for (int i = 0; i < y->nargs; i++)
        if (y->args[i] && !ir_type_eq(y->args[i]->type, op->res[i]->type))
            return bad(V, y, "value %d has type %s, the enclosing %s's result %d has %s", i, ts(V, y->args[i]->type),
                       ir_op_info[op->op].name, i, ts(V, op->res[i]->type));
    return true;
}

static bool check_for(Verifier *V, const IrOp *op)
{
    IrType lo = op->args[0]->type;
    for (int i = 0; i < 3; i++) {
        IrType t = op->args[i]->type;
        if (t.rank != 0 || !ir_elem_is_int((IrElem)t.elem) || t.elem == IR_I1 || !ir_type_eq(t, lo))
            return bad(V, op, "bounds and step must be integer scalars of one type, operand %d is %s", i, ts(V, t));
    }
    const IrBlock *b = op->regions[0];
    if (b->nargs != op->nres + 1)
        return bad(V, op, "region has %d arguments, expected %d (induction variable + carried values)", b->nargs,
                   op->nres + 1);
    if (!b->args[0] || !ir_type_eq(b->args[0]->type, lo))
        return bad(V, op, "induction variable must have the bounds' type %s", ts(V, lo));
    for (int i = 0; i < op->nres; i++) {
        IrType it = op->args[3 + i]->type, rt = op->res[i]->type;
        if (!ir_type_eq(it, rt)) return bad(V, op, "init %d has type %s, result %d %s", i, ts(V, it), i, ts(V, rt));
        if (!b->args[1 + i] || !ir_type_eq(b->args[1 + i]->type, rt))
            return bad(V, op, "region argument %d must have the carried type %s", 1 + i, ts(V, rt));
    }
    return check_yield_types(V, op, 0);
}

static bool check_if(Verifier *V, const IrOp *op)
{
    IrType c = op->args[0]->type;
    if (c.rank != 0 || c.elem != IR_I1) return bad(V, op, "condition has type %s, expected i1", ts(V, c));
    for (int r = 0; r < op->nregions; r++) {
        if (op->regions[r]->nargs != 0) return bad(V, op, "region %d has arguments", r);
        if (!check_yield_types(V, op, r)) return false;
    }
    return true;
}

/* f8e4m3 values only move, convert, select and feed dots (ir_f8_op_ok);
 * a dot on them accumulates in f32. */
static bool check_f8(Verifier *V, const IrOp *op)
{
    bool f8 = op->nres > 0 && el(op->res[0]) == IR_F8E4M3;
    for (int i = 0; i < op->nargs && !f8; i++) f8 = el(op->args[i]) == IR_F8E4M3;
    if (!f8) return true;
    if (!ir_f8_op_ok(op->op)) return bad(V, op, "'%s' is not defined on f8e4m3", ir_op_info[op->op].name);
    if (op->op == IR_DOT && el(op->res[0]) != IR_F32)
        return bad(V, op, "a dot of f8e4m3 accumulates in f32, got %s", ts(V, op->res[0]->type));
    return true;
}

static bool check_types(Verifier *V, const IrOp *op)
{
    unsigned fl = ir_op_info[op->op].flags;
    if (!check_f8(V, op)) return false;
    if (fl & IRF_ELEMWISE) return check_elementwise(V, op);
    switch (op->op) {
    case IR_CONST: case IR_PROGRAM_ID: case IR_NUM_PROGRAMS: case IR_ARANGE: return check_leaf(V, op);
    case IR_SPLAT: case IR_BROADCAST: case IR_EXPAND_DIMS: case IR_RESHAPE: case IR_TRANS:
    case IR_CONVERT_LAYOUT: return check_shape_op(V, op);
    case IR_LOAD: case IR_STORE: case IR_ATOMIC_ADD: return check_memory(V, op);
    case IR_DOT: return check_dot(V, op);
    case IR_REDUCE: return check_reduce(V, op);
    case IR_FOR: return check_for(V, op);
    case IR_IF: return check_if(V, op);
    case IR_ASSERT:
        if (el(op->args[0]) != IR_I1) return bad(V, op, "condition has type %s, expected i1", ts(V, op->args[0]->type));
        return true;
    default: return true; /* yield, return: checked by their block and parent */
    }
}


/* ---- GPU IR: layouts, pipeline plans, SRAM placement ---- */
static bool pow2(int x) { return x >= 1 && (x & (x - 1)) == 0; }

static void check_blocked(Verifier *V, int i, const IrLayout *l)
{
    int lanes = 1, warps = 1, seen = 0;
    for (int d = 0; d < l->rank; d++) {
        if (!pow2(l->spt[d]) || !pow2(l->tpw[d]) || !pow2(l->wpc[d]) || !pow2(l->rpw[d]) || l->wst[d] < 0 ||
            l->tpw[d] > 32 || l->wpc[d] > 32)
            bad(V, NULL, "layout #L%d: dim %d has spt %d tpw %d wpc %d rpw %d wst %d (powers of two expected, tpw "
                "and wpc at most 32)", i, d,
                l->spt[d], l->tpw[d], l->wpc[d], l->rpw[d], l->wst[d]);
        else if ((int64_t)l->spt[d] * l->rpw[d] > IR_MAX_TILE_NUMEL)
            bad(V, NULL, "layout #L%d: dim %d has spt %d x rpw %d registers, more than a tile's %d elements", i, d,
                l->spt[d], l->rpw[d], IR_MAX_TILE_NUMEL); /* bounds spt * tpw * rpw * wpc in 32 bits */
        lanes *= l->tpw[d];
        warps *= l->wpc[d];
        int o = l->order[d];
        if (o < 0 || o >= l->rank || (seen & (1 << o))) bad(V, NULL, "layout #L%d: order is not a permutation", i);
        else seen |= 1 << o;
    }
    if (lanes != 32) bad(V, NULL, "layout #L%d: tpw covers %d lanes, not 32", i, lanes);
    if (warps > V->f->sched.num_warps)
        bad(V, NULL, "layout #L%d: wpc covers %d warps, the kernel has %d", i, warps, V->f->sched.num_warps);
    if (l->mma < 0 || l->mma > IR_MMA_C) bad(V, NULL, "layout #L%d: unknown mma fragment %d", i, l->mma);
    /* An #mma layout prints as its fragment and warp grid only: its fields
     * must be that fragment's, or the text would not say what it is. */
    IrLayout m;
    if (l->mma > 0 && l->mma <= IR_MMA_C &&
        (!ir_layout_mma_fill(l->mma, l->mma_wm, l->mma_wn, l->mma_rn, &m) || m.rank != l->rank ||
         memcmp(m.spt, l->spt, sizeof m.spt) || memcmp(m.tpw, l->tpw, sizeof m.tpw) ||
         memcmp(m.wpc, l->wpc, sizeof m.wpc) || memcmp(m.order, l->order, sizeof m.order) ||
         memcmp(m.rpw, l->rpw, sizeof m.rpw) || memcmp(m.wst, l->wst, sizeof m.wst)))
        bad(V, NULL, "layout #L%d: an mma layout whose fields are not those of #mma<%c, wm=%d, wn=%d%s%.0d>", i,
            "ABC"[l->mma - 1], l->mma_wm, l->mma_wn, l->mma_rn ? ", rn=" : "", l->mma_rn);
}

static void check_layout_table(Verifier *V)
{
    for (int i = 0; i < V->f->layouts.len; i++) {
        const IrLayout *l = ir_layout_get(V->f, i);
        if (!l) { bad(V, NULL, "layout #L%d is missing", i); continue; }
        if (l->rank < 0 || l->rank > IR_MAX_RANK) { bad(V, NULL, "layout #L%d has rank %d", i, l->rank); continue; }
        if (l->kind == IR_LAYOUT_BLOCKED) { check_blocked(V, i, l); continue; }
        const IrLayout *p = l->parent >= 0 && l->parent < i ? ir_layout_get(V->f, l->parent) : NULL;
        if (l->kind != IR_LAYOUT_SLICE) bad(V, NULL, "layout #L%d has an unknown kind", i);
        else if (!p) bad(V, NULL, "layout #L%d: slice parent #L%d is not an earlier layout", i, l->parent);
        else if (p->rank != l->rank + 1 || l->dim < 0 || l->dim > l->rank)
            bad(V, NULL, "layout #L%d: slice of dim %d of a rank-%d parent has rank %d", i, l->dim, p->rank, l->rank);
    }
}

static void check_value_layout(Verifier *V, const IrOp *op, const IrValue *v, const char *what, int i)
{
    if (!v) return;
    if (v->layout < 0) {
        if (V->all_layouts && v->type.rank > 0) bad(V, op, "%s %d is a tile without a layout", what, i);
        return;
    }
    const IrLayout *l = ir_layout_get(V->f, v->layout);
    if (!l) bad(V, op, "%s %d has layout #L%d, which the kernel does not define", what, i, v->layout);
    else if (v->type.rank == 0) bad(V, op, "%s %d is a scalar with layout #L%d", what, i, v->layout);
    else if (l->rank != v->type.rank)
        bad(V, op, "%s %d: layout #L%d has rank %d, the value %s", what, i, v->layout, l->rank, ts(V, v->type));
}

/* ---- structure ---- */
static void check_block(Verifier *V, const IrBlock *b, const IrOp *owner);

static void check_op(Verifier *V, const IrOp *op, const IrBlock *b, const IrOp *prev)
{
    if ((unsigned)op->op >= IR_OP_COUNT) { bad(V, op, "unknown opcode"); return; }
    if (op->parent != b) bad(V, op, "its parent pointer does not name the block holding it");
    if (op->prev != prev) bad(V, op, "its prev pointer is inconsistent with the block's op list");
    bool ok = check_counts(V, op);
    ok = check_uses(V, op) && ok;
    if (ok)
        for (int r = 0; r < op->nregions; r++) {
            if (op->regions[r]->parent_op != op) bad(V, op, "region %d does not point back to its op", r);
            check_block(V, op->regions[r], op);
        }
    if (ok) check_types(V, op);
    if (op->op == IR_YIELD && (!b->parent_op || (b->parent_op->op != IR_FOR && b->parent_op->op != IR_IF)))
        bad(V, op, "yield outside a for/if region");
    if (op->op == IR_RETURN && b->parent_op) bad(V, op, "return inside a region");
    if ((ir_op_info[op->op].flags & IRF_TERM) && op->next)
        bad(V, op, "terminator in the middle of a block (followed by %s)",
            (unsigned)op->next->op < IR_OP_COUNT ? ir_op_info[op->next->op].name : "?");
    for (int i = 0; i < op->nres; i++) {
        define(V, op, op->res[i], "result", i);
        if (op->res[i] && (op->res[i]->def != op || op->res[i]->index != i))
            bad(V, op, "result %d does not point back to its op", i);
        check_value_layout(V, op, op->res[i], "result", i);
    }
    /* A loop-carried value keeps one layout: block argument i + 1 = result i. */
    for (int i = 0; op->op == IR_FOR && ok && i < op->nres && i + 1 < op->regions[0]->nargs; i++)
        if (op->res[i] && op->regions[0]->args[i + 1] && op->res[i]->layout != op->regions[0]->args[i + 1]->layout)
            bad(V, op, "result %d has layout #L%d, its loop argument #L%d", i, op->res[i]->layout,
                op->regions[0]->args[i + 1]->layout);
}

static void hide_block(Verifier *V, const IrBlock *b)
{
    for (int i = 0; i < b->nargs; i++) hide(V, b->args[i]);
    for (const IrOp *op = b->first; op; op = op->next)
        for (int i = 0; i < op->nres; i++) hide(V, op->res[i]);
}

static void check_block(Verifier *V, const IrBlock *b, const IrOp *owner)
{
    if (b->func != V->f) bad(V, owner, "block belongs to another kernel");
    for (int i = 0; i < b->nargs; i++) {
        define(V, owner, b->args[i], "block argument", i);
        check_value_layout(V, owner, b->args[i], "block argument", i);
        if (b->args[i] && (b->args[i]->block != b || b->args[i]->index != i))
            bad(V, owner, "block argument %d does not point back to its block", i);
    }
    const IrOp *prev = NULL;
    int guard = 0;
    for (const IrOp *op = b->first; op && V->nerr < MAX_ERRORS; prev = op, op = op->next) {
        if (++guard > 10000000) { bad(V, owner, "op list has a cycle"); break; }
        check_op(V, op, b, prev);
    }
    if (b->last != prev && V->nerr < MAX_ERRORS) bad(V, owner, "block's last pointer is not its last op");
    const char *want = owner ? "yield" : "return";
    if (!prev || !(ir_op_info[prev->op].flags & IRF_TERM))
        bad(V, prev ? prev : owner, "block does not end with a terminator ('%s')", want);
    if (owner) hide_block(V, b);
}

/* The verifier's scratch. Static (per thread, verify does not nest) rather than a
 * local: an arena allocation failing inside a compile unwinds past verify
 * (support.h), and only an object outside its frame can still be freed then. */
/* The first program_id / num_programs op in b (nested regions included), or NULL. */
static const IrOp *grid_read(const IrBlock *b)
{
    for (const IrOp *x = b->first; x; x = x->next) {
        if (x->op == IR_PROGRAM_ID || x->op == IR_NUM_PROGRAMS) return x;
        for (int r = 0; r < x->nregions; r++) {
            const IrOp *n = grid_read(x->regions[r]);
            if (n) return n;
        }
    }
    return NULL;
}

static bool reads_axis0(const IrValue *v, IrOpcode op)
{
    return v && v->def && v->def->op == op && v->def->attr[0] == 0;
}

/* A persistent kernel (attribute persistent, compiler/passes/persistent.c): mode 1 or 2;
 * the logical grid is its last three parameters, i32; its body holds one loop, the tile
 * loop from program_id(0) step num_programs(0), and reads the physical grid only for
 * it: the program's own reads of program_id / num_programs are the tile's. */
static void check_persistent(Verifier *V)
{
    const IrFunc *f = V->f;
    const IrAttr *a = ir_attr_get(&f->attrs, IR_ATTR_PERSISTENT);
    if (!a) return;
    if (a->n != 1 || a->list || (a->v[0] != 1 && a->v[0] != 2)) bad(V, NULL, "attribute persistent must be 1 or 2");
    bool grid_ok = f->nparams >= 3;
    for (int i = f->nparams - 3; grid_ok && i < f->nparams; i++)
        grid_ok = !ir_type_is_tile(f->params[i]->type) && f->params[i]->type.elem == IR_I32;
    if (!grid_ok) bad(V, NULL, "persistent kernel: its last three parameters must be the logical grid (i32)");
    const IrOp *loop = NULL;
    for (const IrOp *x = f->body ? f->body->first : NULL; x; x = x->next) {
        if (x->op == IR_PROGRAM_ID || x->op == IR_NUM_PROGRAMS) {
            if (x->attr[0] != 0) bad(V, x, "persistent kernel: %s of axis %d outside the tile loop (the grid is 1-D)",
                                     ir_op_info[x->op].name, x->attr[0]);
            continue;
        }
        if (x->op != IR_FOR) continue;
        if (loop) bad(V, x, "persistent kernel: a second loop beside the tile loop");
        loop = x;
    }
    if (!loop) {
        bad(V, NULL, "persistent kernel without its tile loop");
        return;
    }
    if (loop->nargs < 3 || !reads_axis0(loop->args[0], IR_PROGRAM_ID) || !reads_axis0(loop->args[2], IR_NUM_PROGRAMS))
        bad(V, loop, "persistent kernel: the tile loop must run from program_id 0 step num_programs 0");
    const IrOp *r = grid_read(loop->regions[0]);
    if (r) bad(V, r, "persistent kernel: %s inside the tile loop (the tile's ids replace it)", ir_op_info[r->op].name);
}

static _Thread_local Arena scratch_arena;

static bool verify(const IrFunc *f, bool all_layouts, StrBuf *err)
{
    Verifier V;
    memset(&V, 0, sizeof V);
    V.f = f;
    V.all_layouts = all_layouts;
    V.err = err;
    arena_init(&scratch_arena);
    V.arena = &scratch_arena;
    SupOomCatch oom;
    if (!SUP_OOM_TRY(&oom)) {
        arena_free(&scratch_arena);
        sup_oom_rethrow();
        return false;
    }
    V.nids = f->next_id > 0 ? f->next_id : 1;
    V.visible = ARENA_ARRAY(V.arena, uint8_t, V.nids);
    V.defined = ARENA_ARRAY(V.arena, uint8_t, V.nids);
    V.owner = ARENA_ARRAY(V.arena, const IrValue *, V.nids);
    for (int i = 0; i < f->nparams; i++) {
        define(&V, NULL, f->params[i], "parameter", i);
        check_value_layout(&V, NULL, f->params[i], "parameter", i);
        if (f->params[i] && f->params[i]->divisibility < 1)
            bad(&V, NULL, "parameter %d has divisibility %d", i, (int)f->params[i]->divisibility);
    }
    if (f->sched.num_warps < 1 || f->sched.num_stages < 1)
        bad(&V, NULL, "schedule num_warps = %d num_stages = %d", f->sched.num_warps, f->sched.num_stages);
    if (!f->body) bad(&V, NULL, "no body");
    else if (f->body->parent_op) bad(&V, NULL, "body block has a parent op");
    else check_block(&V, f->body, NULL);
    if (f->body && !f->body->parent_op) check_persistent(&V);
    check_layout_table(&V);
    if (V.nerr > MAX_ERRORS) sb_printf(err, "internal error: verifier: %d more problems not shown\n", V.nerr - MAX_ERRORS);
    sup_oom_pop(&oom);
    arena_free(&scratch_arena);
    return V.nerr == 0;
}

bool ir_verify(const IrFunc *f, StrBuf *err) { return verify(f, false, err); }

bool ir_verify_gpu(const IrFunc *f, StrBuf *err) { return verify(f, true, err); }
