/* interp.c — the CPU interpreter's driver: programs, values, control flow.
 *
 * What: interp_run executes a Tile IR kernel once per program of the grid (x
 * fastest, then y, then z), one program after another, on host memory. It is
 * the reference semantics of the IR: passes must not change what it computes
 * (tests run each example before and after every pass and compare bits).
 * Invariants: every operand was defined earlier in this program (checked with
 * a per-program generation); a `for` runs lo, lo+step, ... while iv < hi with
 * step > 0 (else "range step must be positive"); loop-carried values travel
 * init -> region args -> yield -> (next iteration's args | the for's results);
 * an `if` runs one region and its yield defines the results.
 * Example:
 *     %0 = program_id 0 : i32
 *     %s = for %i = %lo to %hi step %c1 iter(%acc = %init) { ... yield %acc2 }
 * runs the body with %i = lo, lo+1, ... and leaves the last %acc2 in %s.
 *
 * Op families live in interp_ops.c (elementwise, cast), interp_tile.c (shape
 * ops, dot, reduce) and interp_mem.c (load, store, atomic_add, bounds checks).
 */
#include "interp_impl.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- errors ---- */
static void error_prefix(Interp *it, const IrOp *op)
{
    SrcLoc loc = op ? op->loc : it->f->loc;
    sb_printf(it->err, "kernel %s, program (%d, %d, %d): ", it->f->name ? it->f->name : "?",
              it->pid[0], it->pid[1], it->pid[2]);
    if (loc.line > 0)
        sb_printf(it->err, "%s:%d:%d: ", loc.file ? loc.file : "<unknown>", loc.line, loc.col);
    if (op) sb_printf(it->err, "op '%s': ", ir_op_info[op->op].name);
}

/* One error line (tag: "" or "internal error: "); returns 1, the failure code. */
static int report(Interp *it, const IrOp *op, const char *tag, const char *fmt, va_list ap)
{
    error_prefix(it, op);
    sb_puts(it->err, tag);
    sb_vprintf(it->err, fmt, ap);
    sb_putc(it->err, '\n');
    return 1;
}

int it_error(Interp *it, const IrOp *op, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = report(it, op, "", fmt, ap);
    va_end(ap);
    return rc;
}

int it_internal(Interp *it, const IrOp *op, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = report(it, op, "internal error: ", fmt, ap);
    va_end(ap);
    return rc;
}

/* ---- element helpers ---- */
int it_elem_bytes(IrElem e)
{
    if (e == IR_I1) return 1;
    return ir_elem_bits(e) / 8;
}

void it_fmt_index(char *buf, size_t n, IrType t, int64_t lane)
{
    if (t.rank == 0) {
        snprintf(buf, n, "scalar");
        return;
    }
    int64_t idx[IR_MAX_RANK];
    for (int d = t.rank - 1; d >= 0; d--) {
        int64_t s = t.shape[d] > 0 ? t.shape[d] : 1;
        idx[d] = lane % s;
        lane /= s;
    }
    size_t k = (size_t)snprintf(buf, n, "[");
    for (int d = 0; d < t.rank && k < n; d++)
        k += (size_t)snprintf(buf + k, n - k, d ? ", %lld" : "%lld", (long long)idx[d]);
    if (k < n) snprintf(buf + k, n - k, "]");
}

/* ---- value storage ---- */
IVal *it_def(Interp *it, const IrValue *v)
{
    if (!v || v->id < 0 || v->id >= it->nslots) return NULL;
    Slot *s = &it->slots[v->id];
    int64_t n = ir_type_numel(v->type);
    if (n < 1) n = 1;
    if (s->cap < n) {
        s->d = ARENA_ARRAY(&it->arena, IVal, n);
        s->cap = s->d ? n : 0;
    }
    s->gen = it->gen;
    return s->d;
}

static IVal *value_data(Interp *it, const IrOp *op, const IrValue *v)
{
    if (!v || v->id < 0 || v->id >= it->nslots) {
        it_internal(it, op, "operand has no valid value id");
        return NULL;
    }
    Slot *s = &it->slots[v->id];
    if (!s->d || s->gen != it->gen) {
        it_internal(it, op, "value %%%d used before it is defined", v->id);
        return NULL;
    }
    return s->d;
}

IVal *it_in(Interp *it, const IrOp *op, int k)
{
    if (k >= op->nargs) {
        it_internal(it, op, "missing operand %d", k);
        return NULL;
    }
    return value_data(it, op, op->args[k]);
}

int it_operand_stride(Interp *it, const IrOp *op, int k, int64_t n)
{
    int64_t m = ir_type_numel(op->args[k]->type);
    if (m == n) return n == 1 ? 0 : 1;
    if (m == 1) return 0;
    char b1[64], b2[64];
    it_internal(it, op, "operand %d has type %s, which does not match the result %s", k,
                ir_type_str(op->args[k]->type, b1, sizeof b1),
                ir_type_str(op->res[0]->type, b2, sizeof b2));
    return -1;
}

static int alloc_failed(Interp *it, const IrOp *op)
{
    return it_error(it, op, "out of host memory for the interpreter's values");
}

/* Copies value `src` into the storage of `dst` (same element count). */
static int copy_value(Interp *it, const IrOp *op, const IrValue *dst, const IrValue *src)
{
    int64_t n = ir_type_numel(dst->type);
    if (ir_type_numel(src->type) != n)
        return it_internal(it, op, "value %%%d does not match %%%d in shape", src->id, dst->id);
    IVal *s = value_data(it, op, src);
    if (!s) return 1;
    IVal *d = it_def(it, dst);
    if (!d) return alloc_failed(it, op);
    if (d != s) memmove(d, s, sizeof(IVal) * (size_t)n);
    return 0;
}

/* ---- simple producers ---- */
static int exec_const(Interp *it, const IrOp *op)
{
    IrType t = op->res[0]->type;
    IVal *r = it_out(it, op, 0);
    if (!r) return alloc_failed(it, op);
    IVal v;
    if (ir_elem_is_float((IrElem)t.elem)) v.f = ir_eval_round((IrElem)t.elem, op->fval);
    else v.i = ir_eval_wrap((IrElem)t.elem, (uint64_t)op->ival);
    int64_t n = ir_type_numel(t);
    for (int64_t i = 0; i < n; i++) r[i] = v;
    return 0;
}

static int exec_program_id(Interp *it, const IrOp *op)
{
    int axis = op->attr[0];
    if (axis < 0 || axis > 2) return it_internal(it, op, "axis %d is not 0, 1 or 2", axis);
    IVal *r = it_out(it, op, 0);
    if (!r) return alloc_failed(it, op);
    r[0].i = op->op == IR_PROGRAM_ID ? it->pid[axis] : it->grid[axis];
    return 0;
}

static int exec_arange(Interp *it, const IrOp *op)
{
    int64_t n = ir_type_numel(op->res[0]->type);
    if (op->attr[1] - op->attr[0] != n)
        return it_internal(it, op, "arange %d..%d does not have %lld elements", op->attr[0],
                           op->attr[1], (long long)n);
    IVal *r = it_out(it, op, 0);
    if (!r) return alloc_failed(it, op);
    for (int64_t i = 0; i < n; i++)
        r[i].i = ir_eval_wrap((IrElem)op->res[0]->type.elem, (uint64_t)(op->attr[0] + i));
    return 0;
}

static int exec_assert(Interp *it, const IrOp *op)
{
    IVal *c = it_in(it, op, 0);
    if (!c) return 1;
    IrType t = op->args[0]->type;
    int64_t n = ir_type_numel(t);
    for (int64_t i = 0; i < n; i++) {
        if (c[i].i) continue;
        char idx[96];
        it_fmt_index(idx, sizeof idx, t, i);
        return it_error(it, op, "device_assert failed at lane %lld (index %s): %s", (long long)i, idx,
                        op->sattr ? op->sattr : "(no message)");
    }
    return 0;
}

/* ---- control flow ---- */
static int exec_block(Interp *it, const IrBlock *b, const IrOp **term);

/* Runs a region whose terminator must be a yield with `nres` operands, and
 * copies them to the results of `owner`. */
static int run_region_into(Interp *it, const IrOp *owner, const IrBlock *b)
{
    const IrOp *term = NULL;
    if (exec_block(it, b, &term)) return 1;
    if (it->returned) return it_internal(it, owner, "return inside a region");
    if (!term || term->op != IR_YIELD) return it_internal(it, owner, "region does not end with yield");
    if (term->nargs != owner->nres)
        return it_internal(it, owner, "yield has %d values for %d results", term->nargs, owner->nres);
    for (int k = 0; k < owner->nres; k++)
        if (copy_value(it, term, owner->res[k], term->args[k])) return 1;
    return 0;
}

static int exec_if(Interp *it, const IrOp *op)
{
    IVal *c = it_in(it, op, 0);
    if (!c) return 1;
    if (ir_type_numel(op->args[0]->type) != 1) return it_internal(it, op, "condition is not a scalar");
    int r = c[0].i ? 0 : 1;
    if (r >= op->nregions) {
        if (op->nres) return it_internal(it, op, "if with results has no else region");
        return 0;
    }
    return run_region_into(it, op, op->regions[r]);
}

static bool iv_less(IrElem e, int64_t a, int64_t b)
{
    return ir_elem_is_signed(e) ? a < b : (uint64_t)a < (uint64_t)b;
}

static int exec_for(Interp *it, const IrOp *op)
{
    if (op->nargs < 3 || op->nregions != 1) return it_internal(it, op, "malformed for");
    const IrBlock *body = op->regions[0];
    int nc = op->nargs - 3;
    if (body->nargs != nc + 1 || op->nres != nc)
        return it_internal(it, op, "for has %d carried values, %d region args and %d results", nc,
                           body->nargs, op->nres);
    IVal *lo = it_in(it, op, 0), *hi = it_in(it, op, 1), *st = it_in(it, op, 2);
    if (!lo || !hi || !st) return 1;
    IrElem ie = (IrElem)body->args[0]->type.elem;
    int64_t step = st[0].i;
    if (ir_elem_is_signed(ie) ? step <= 0 : step == 0)
        return it_error(it, op, "range step must be positive (it is %lld)", (long long)step);
    for (int k = 0; k < nc; k++) /* the results hold the current carried values */
        if (copy_value(it, op, op->res[k], op->args[3 + k])) return 1;
    for (int64_t iv = lo[0].i; iv_less(ie, iv, hi[0].i);) {
        IVal *a = it_def(it, body->args[0]);
        if (!a) return alloc_failed(it, op);
        a[0].i = iv;
        for (int k = 0; k < nc; k++)
            if (copy_value(it, op, body->args[1 + k], op->res[k])) return 1;
        if (run_region_into(it, op, body)) return 1;
        /* Stop instead of wrapping past the largest value of the iv's type. */
        uint64_t next = (uint64_t)iv + (uint64_t)step;
        int64_t nv = ir_eval_wrap(ie, next);
        if (ir_elem_is_signed(ie) ? nv < iv : (uint64_t)nv < (uint64_t)iv) break;
        iv = nv;
    }
    return 0;
}

static int exec_op(Interp *it, const IrOp *op)
{
    unsigned fl = ir_op_info[op->op].flags;
    if (fl & IRF_GPU)
        return it_error(it, op, "internal error: op %s not supported by the interpreter",
                        ir_op_info[op->op].name);
    switch (op->op) {
    case IR_CONST: return exec_const(it, op);
    case IR_PROGRAM_ID:
    case IR_NUM_PROGRAMS: return exec_program_id(it, op);
    case IR_ARANGE: return exec_arange(it, op);
    case IR_SPLAT:
    case IR_BROADCAST:
    case IR_EXPAND_DIMS:
    case IR_RESHAPE:
    case IR_TRANS: return it_exec_shape(it, op);
    case IR_LOAD:
    case IR_STORE:
    case IR_ATOMIC_ADD: return it_exec_mem(it, op);
    case IR_DOT: return it_exec_dot(it, op);
    case IR_REDUCE: return it_exec_reduce(it, op);
    case IR_FOR: return exec_for(it, op);
    case IR_IF: return exec_if(it, op);
    case IR_ASSERT: return exec_assert(it, op);
    case IR_FENCE: return 0;   /* programs run one after another: every earlier write is visible */
    default: break;
    }
    if (fl & IRF_ELEMWISE) return it_exec_elementwise(it, op);
    return it_error(it, op, "internal error: op %s not supported by the interpreter",
                    ir_op_info[op->op].name);
}

/* Runs the ops of b in order; the terminator (yield/return), if any, goes to *term. */
static int exec_block(Interp *it, const IrBlock *b, const IrOp **term)
{
    *term = NULL;
    for (const IrOp *op = b->first; op; op = op->next) {
        if (op->op == IR_YIELD) {
            *term = op;
            return 0;
        }
        if (op->op == IR_RETURN) {
            *term = op;
            it->returned = true;
            return 0;
        }
        if (exec_op(it, op)) return 1;
    }
    return 0;
}

/* ---- kernel parameters and the grid ---- */
static int bind_params(Interp *it, const InterpArg *args, int nargs)
{
    const IrFunc *f = it->f;
    if (nargs != f->nparams)
        return it_error(it, NULL, "kernel takes %d arguments, %d given", f->nparams, nargs);
    for (int k = 0; k < f->nparams; k++) {
        const IrValue *p = f->params[k];
        if (p->type.rank != 0) return it_internal(it, NULL, "parameter %d is a tile", k);
        IVal *d = it_def(it, p);
        if (!d) return alloc_failed(it, NULL);
        IrElem e = (IrElem)p->type.elem;
        if (e == IR_PTR) d->u = (uint64_t)(uintptr_t)args[k].ptr;
        else if (ir_elem_is_float(e)) d->f = ir_eval_round(e, args[k].f);
        else d->i = ir_eval_wrap(e, (uint64_t)args[k].i);
    }
    return 0;
}

static int run_program(Interp *it, const InterpArg *args, int nargs)
{
    it->gen++;
    it->returned = false;
    if (bind_params(it, args, nargs)) return 1;
    const IrOp *term = NULL;
    if (exec_block(it, it->f->body, &term)) return 1;
    if (term && term->op == IR_YIELD) return it_internal(it, term, "yield in the kernel body");
    return 0;
}

int interp_run(const IrFunc *f, const InterpArg *args, int nargs, const InterpOptions *opts, StrBuf *err)
{
    Interp it;
    memset(&it, 0, sizeof it);
    it.f = f;
    it.opts = opts;
    it.err = err;
    arena_init(&it.arena);
    it.nslots = f->next_id;
    it.slots = ARENA_ARRAY(&it.arena, Slot, it.nslots > 0 ? it.nslots : 1);
    for (int a = 0; a < 3; a++) it.grid[a] = opts && opts->grid[a] > 0 ? opts->grid[a] : 1;
    int rc = it.slots ? 0 : alloc_failed(&it, NULL);
    for (int z = 0; z < it.grid[2] && !rc; z++)
        for (int y = 0; y < it.grid[1] && !rc; y++)
            for (int x = 0; x < it.grid[0] && !rc; x++) {
                it.pid[0] = x;
                it.pid[1] = y;
                it.pid[2] = z;
                rc = run_program(&it, args, nargs);
            }
    arena_free(&it.arena);
    return rc;
}
