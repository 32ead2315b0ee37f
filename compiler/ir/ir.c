/* ir.c — types, the op table, construction and traversal of Tile IR; see ir.h. */
#include "ir.h"

#include <stdio.h>
#include <string.h>

const IrOpInfo ir_op_info[IR_OP_COUNT] = {
#define IR_X_INFO(e, t, na, nr, fl) [IR_##e] = {t, na, nr, fl},
    IR_OPS(IR_X_INFO)
#undef IR_X_INFO
};

IrOpcode ir_opcode_from_name(const char *s)
{
    for (int i = 0; i < IR_OP_COUNT; i++)
        if (strcmp(ir_op_info[i].name, s) == 0) return (IrOpcode)i;
    return IR_OP_COUNT;
}

static const char *const cmp_names[] = {"eq", "ne", "lt", "le", "gt", "ge"};
static const char *const red_names[] = {"sum", "max", "min", "argmax", "argmin"};
const char *ir_cmp_name(IrCmp c) { return (unsigned)c < 6 ? cmp_names[c] : "?"; }
const char *ir_reduce_name(IrReduce r) { return (unsigned)r < 5 ? red_names[r] : "?"; }

/* ---- element types ---- */
static const struct { const char *name; int bits; } elem_tab[IR_ELEM_COUNT] = {
    [IR_VOID] = {"void", 0}, [IR_I1] = {"i1", 1},    [IR_I8] = {"i8", 8},
    [IR_I16] = {"i16", 16},  [IR_I32] = {"i32", 32}, [IR_I64] = {"i64", 64},
    [IR_U8] = {"u8", 8},     [IR_U16] = {"u16", 16}, [IR_U32] = {"u32", 32},
    [IR_U64] = {"u64", 64},  [IR_F16] = {"f16", 16}, [IR_BF16] = {"bf16", 16},
    [IR_F32] = {"f32", 32},  [IR_F64] = {"f64", 64}, [IR_PTR] = {"ptr", 64},
    [IR_F8E4M3] = {"f8e4m3", 8},
};

const char *ir_elem_name(IrElem e) { return (unsigned)e < IR_ELEM_COUNT ? elem_tab[e].name : "?"; }
int ir_elem_bits(IrElem e) { return (unsigned)e < IR_ELEM_COUNT ? elem_tab[e].bits : 0; }

bool ir_f8_op_ok(IrOpcode op)
{
    switch (op) {
    case IR_CONST: case IR_SPLAT: case IR_BROADCAST: case IR_EXPAND_DIMS: case IR_RESHAPE: case IR_TRANS:
    case IR_SELECT: case IR_CAST: case IR_LOAD: case IR_STORE: case IR_DOT: case IR_FOR: case IR_IF:
    case IR_YIELD: case IR_CONVERT_LAYOUT: case IR_ADDPTR:
        return true;
    default:
        return false;
    }
}

IrElem ir_elem_from_name(const char *s)
{
    if (strcmp(s, "bool") == 0) return IR_I1;
    for (int i = 1; i < IR_ELEM_COUNT; i++)
        if (strcmp(elem_tab[i].name, s) == 0) return (IrElem)i;
    return IR_VOID;
}

bool ir_elem_is_float(IrElem e) { return e == IR_F8E4M3 || e == IR_F16 || e == IR_BF16 || e == IR_F32 || e == IR_F64; }
bool ir_elem_is_int(IrElem e) { return e >= IR_I1 && e <= IR_U64; }
bool ir_elem_is_signed(IrElem e) { return e >= IR_I8 && e <= IR_I64; }

IrType ir_type_scalar(IrElem e)
{
    IrType t;
    memset(&t, 0, sizeof t);
    t.elem = (uint8_t)e;
    return t;
}

IrType ir_type_ptr(IrElem pointee)
{
    IrType t = ir_type_scalar(IR_PTR);
    t.pointee = (uint8_t)pointee;
    return t;
}

IrType ir_type_tile(IrType s, int rank, const int32_t *shape)
{
    IrType t = ir_type_scalar_of(s);
    t.rank = (uint8_t)rank;
    for (int i = 0; i < rank && i < IR_MAX_RANK; i++) t.shape[i] = shape[i];
    return t;
}

IrType ir_type_scalar_of(IrType t)
{
    IrType s = ir_type_scalar((IrElem)t.elem);
    s.pointee = t.pointee;
    return s;
}

IrType ir_type_with_elem(IrType t, IrElem e)
{
    t.elem = (uint8_t)e;
    if (e != IR_PTR) t.pointee = 0;
    return t;
}

bool ir_type_eq(IrType a, IrType b)
{
    if (a.elem != b.elem || a.rank != b.rank) return false;
    if (a.elem == IR_PTR && a.pointee != b.pointee) return false;
    for (int i = 0; i < a.rank; i++)
        if (a.shape[i] != b.shape[i]) return false;
    return true;
}

bool ir_type_is_tile(IrType t) { return t.rank > 0; }

int64_t ir_type_numel(IrType t)
{
    int64_t n = 1;
    for (int i = 0; i < t.rank; i++)
        if (!sup_mul_i64(n, t.shape[i], &n)) return INT64_MAX; /* saturates: 4 axes of 2^20 are 2^80 */
    return n;
}

static void scalar_str(IrType t, char *buf, size_t n)
{
    if (t.elem == IR_PTR)
        snprintf(buf, n, "ptr<%s>", ir_elem_name((IrElem)t.pointee));
    else
        snprintf(buf, n, "%s", ir_elem_name((IrElem)t.elem));
}

char *ir_type_str(IrType t, char *buf, size_t n)
{
    if (t.rank == 0) {
        scalar_str(t, buf, n);
        return buf;
    }
    size_t k = (size_t)snprintf(buf, n, "tensor<");
    for (int i = 0; i < t.rank && k < n; i++) k += (size_t)snprintf(buf + k, n - k, "%dx", t.shape[i]);
    if (k < n) scalar_str(t, buf + k, n - k);
    k = strlen(buf);
    if (k + 1 < n) { buf[k] = '>'; buf[k + 1] = 0; }
    return buf;
}

/* ---- construction ---- */
IrModule *ir_module_new(Arena *a)
{
    IrModule *m = ARENA_NEW(a, IrModule);
    m->arena = a;
    return m;
}

void ir_module_add(IrModule *m, IrFunc *f)
{
    if (m->nfuncs == m->cap_funcs) {
        int nc = m->cap_funcs ? m->cap_funcs * 2 : 4;
        IrFunc **nf = ARENA_ARRAY(m->arena, IrFunc *, nc);
        if (m->nfuncs) memcpy(nf, m->funcs, sizeof(IrFunc *) * (size_t)m->nfuncs);
        m->funcs = nf;
        m->cap_funcs = nc;
    }
    m->funcs[m->nfuncs++] = f;
}

IrFunc *ir_func_new(Arena *a, const char *name, SrcLoc loc)
{
    IrFunc *f = ARENA_NEW(a, IrFunc);
    f->arena = a;
    f->name = arena_strdup(a, name);
    f->loc = loc;
    f->sched.num_warps = 4;
    f->sched.num_stages = 2;
    f->body = ir_block_new(f);
    return f;
}

IrValue *ir_value_new(IrFunc *f, IrType t)
{
    IrValue *v = ARENA_NEW(f->arena, IrValue);
    v->id = f->next_id++;
    v->type = t;
    v->divisibility = 1;
    v->layout = -1;
    return v;
}

/* Grow an arena array of pointers by doubling. */
static void push_value(Arena *a, IrValue ***arr, int *len, int *cap, IrValue *v)
{
    if (*len == *cap) {
        int nc = *cap ? *cap * 2 : 4;
        IrValue **n = ARENA_ARRAY(a, IrValue *, nc);
        if (*len) memcpy(n, *arr, sizeof(IrValue *) * (size_t)*len);
        *arr = n;
        *cap = nc;
    }
    (*arr)[(*len)++] = v;
}

IrValue *ir_func_add_param(IrFunc *f, IrType t, const char *name)
{
    IrValue *v = ir_value_new(f, t);
    v->index = f->nparams;
    v->name = name ? arena_strdup(f->arena, name) : NULL;
    push_value(f->arena, &f->params, &f->nparams, &f->cap_params, v);
    return v;
}

IrBlock *ir_block_new(IrFunc *f)
{
    IrBlock *b = ARENA_NEW(f->arena, IrBlock);
    b->func = f;
    return b;
}

IrValue *ir_block_add_arg(IrBlock *b, IrType t, const char *name)
{
    IrValue *v = ir_value_new(b->func, t);
    v->block = b;
    v->index = b->nargs;
    v->name = name ? arena_strdup(b->func->arena, name) : NULL;
    push_value(b->func->arena, &b->args, &b->nargs, &b->cap_args, v);
    return v;
}

void ir_op_set_args(IrFunc *f, IrOp *op, int nargs, IrValue *const *args)
{
    op->args = nargs ? ARENA_ARRAY(f->arena, IrValue *, nargs) : NULL;
    for (int i = 0; i < nargs; i++) op->args[i] = args[i];
    op->nargs = nargs;
}

IrOp *ir_op_new(IrFunc *f, IrOpcode opc, SrcLoc loc, int nargs, IrValue *const *args,
                int nres, const IrType *res_types)
{
    IrOp *op = ARENA_NEW(f->arena, IrOp);
    op->op = opc;
    op->loc = loc;
    ir_op_set_args(f, op, nargs, args);
    op->nres = nres;
    op->res = nres ? ARENA_ARRAY(f->arena, IrValue *, nres) : NULL;
    for (int i = 0; i < nres; i++) {
        IrValue *v = ir_value_new(f, res_types[i]);
        v->def = op;
        v->index = i;
        op->res[i] = v;
    }
    return op;
}

IrBlock *ir_op_add_region(IrFunc *f, IrOp *op)
{
    if (op->nregions >= 2) {
        INTERNAL_ERROR("op '%s' already has two regions", ir_op_info[op->op].name);
        return op->regions[1];
    }
    IrBlock *b = ir_block_new(f);
    b->parent_op = op;
    op->regions[op->nregions++] = b;
    return b;
}

void ir_block_append(IrBlock *b, IrOp *op)
{
    op->parent = b;
    op->next = NULL;
    op->prev = b->last;
    if (b->last) b->last->next = op;
    else b->first = op;
    b->last = op;
}

void ir_insert_before(IrOp *pos, IrOp *op)
{
    IrBlock *b = pos->parent;
    op->parent = b;
    op->next = pos;
    op->prev = pos->prev;
    if (pos->prev) pos->prev->next = op;
    else b->first = op;
    pos->prev = op;
}

void ir_insert_after(IrOp *pos, IrOp *op)
{
    if (pos->next) ir_insert_before(pos->next, op);
    else ir_block_append(pos->parent, op);
}

void ir_op_unlink(IrOp *op)
{
    IrBlock *b = op->parent;
    if (!b) return;
    if (op->prev) op->prev->next = op->next;
    else b->first = op->next;
    if (op->next) op->next->prev = op->prev;
    else b->last = op->prev;
    op->prev = op->next = NULL;
    op->parent = NULL;
}

/* ---- traversal ---- */
void ir_walk_block(IrBlock *b, IrWalkFn fn, void *ctx)
{
    for (IrOp *op = b->first, *next; op; op = next) {
        next = op->next;
        IrBlock *parent = op->parent;
        fn(op, ctx);
        if (op->parent != parent) continue; /* unlinked by the callback */
        for (int r = 0; r < op->nregions; r++) ir_walk_block(op->regions[r], fn, ctx);
    }
}

void ir_walk(IrFunc *f, IrWalkFn fn, void *ctx) { ir_walk_block(f->body, fn, ctx); }

typedef struct { IrValue *from, *to; } ReplaceCtx;

static void replace_in_op(IrOp *op, void *vctx)
{
    ReplaceCtx *c = vctx;
    for (int i = 0; i < op->nargs; i++)
        if (op->args[i] == c->from) op->args[i] = c->to;
}

void ir_replace_uses(IrFunc *f, IrValue *from, IrValue *to)
{
    ReplaceCtx c = {from, to};
    ir_walk(f, replace_in_op, &c);
}

static void count_uses(IrOp *op, void *ctx)
{
    int *counts = ctx;
    for (int i = 0; i < op->nargs; i++)
        if (op->args[i]) counts[op->args[i]->id]++;
}

int *ir_use_counts(IrFunc *f)
{
    int *counts = ARENA_ARRAY(f->arena, int, f->next_id + 1);
    ir_walk(f, count_uses, counts);
    return counts;
}

bool ir_value_defined_outside(const IrValue *v, const IrOp *op)
{
    /* Find the block that defines v, then see whether op encloses it. */
    const IrBlock *b = v->def ? v->def->parent : v->block;
    while (b) {
        const IrOp *owner = b->parent_op;
        if (owner == op) return false;
        if (!owner) break;
        b = owner->parent;
    }
    return true;
}

/* ---- builder ---- */
IrOp *irb_insert(IrBuilder *b, IrOp *op)
{
    if (b->before) ir_insert_before(b->before, op);
    else ir_block_append(b->block, op);
    return op;
}

IrValue *irb_op(IrBuilder *b, IrOpcode opc, IrType rt, int nargs, IrValue *const *args)
{
    IrOp *op = ir_op_new(b->f, opc, b->loc, nargs, args, 1, &rt);
    irb_insert(b, op);
    return op->res[0];
}

IrValue *irb_op1(IrBuilder *b, IrOpcode opc, IrType rt, IrValue *x) { return irb_op(b, opc, rt, 1, &x); }

IrValue *irb_op2(IrBuilder *b, IrOpcode opc, IrType rt, IrValue *x, IrValue *y)
{
    IrValue *args[2] = {x, y};
    return irb_op(b, opc, rt, 2, args);
}

IrValue *irb_const_int(IrBuilder *b, IrType t, int64_t v)
{
    IrValue *r = irb_op(b, IR_CONST, t, 0, NULL);
    r->def->ival = v;
    r->def->fval = (double)v;
    return r;
}

IrValue *irb_const_float(IrBuilder *b, IrType t, double v)
{
    IrValue *r = irb_op(b, IR_CONST, t, 0, NULL);
    r->def->fval = v; /* ival stays 0: floats read fval only (inf/nan have no int) */
    return r;
}

/* ---- named attributes ---- */
static IrAttr *attr_find(const IrAttrList *l, const char *name)
{
    for (int i = 0; i < l->n; i++)
        if (strcmp(l->v[i].name, name) == 0) return &l->v[i];
    return NULL;
}

void ir_attr_set(Arena *a, IrAttrList *l, const char *name, int n, const int64_t *v, bool list)
{
    IrAttr *at = attr_find(l, name);
    if (!at) {
        if (l->n == l->cap) {
            int nc = l->cap ? l->cap * 2 : 4;
            IrAttr *nv = ARENA_ARRAY(a, IrAttr, nc);
            if (l->n) memcpy(nv, l->v, sizeof(IrAttr) * (size_t)l->n);
            l->v = nv;
            l->cap = nc;
        }
        at = &l->v[l->n++];
        at->name = arena_strdup(a, name);
    }
    at->v = ARENA_ARRAY(a, int64_t, n > 0 ? n : 1);
    if (n > 0) memcpy(at->v, v, sizeof(int64_t) * (size_t)n);
    at->n = n;
    at->list = list || n != 1;
}

void ir_attr_set_int(Arena *a, IrAttrList *l, const char *name, int64_t v) { ir_attr_set(a, l, name, 1, &v, false); }

const IrAttr *ir_attr_get(const IrAttrList *l, const char *name) { return attr_find(l, name); }

int64_t ir_attr_int(const IrAttrList *l, const char *name, int64_t dflt)
{
    const IrAttr *at = attr_find(l, name);
    return at && at->n > 0 ? at->v[0] : dflt;
}

void ir_attr_remove(IrAttrList *l, const char *name)
{
    IrAttr *at = attr_find(l, name);
    if (!at) return;
    int i = (int)(at - l->v);
    memmove(&l->v[i], &l->v[i + 1], sizeof(IrAttr) * (size_t)(l->n - i - 1));
    l->n--;
}
