/* cse.c — common subexpression elimination of pure ops (pass "cse").
 *
 * What it does: walks the function in program order with a scoped hash table
 * of the pure ops seen so far. An op (IRF_PURE in the op table, not a region
 * op) whose opcode, attributes, constant payload, operand values and result
 * types (and GPU layouts) equal those of an op already in scope is dropped and
 * its result replaced by the earlier one. For integer element types the two
 * operands of a commutative op are compared as an unordered pair (a+b == b+a);
 * floats keep their order (min/max of -0/+0 and NaN payloads depend on it).
 *
 * Scoping: entering a region (for body, then/else) opens a scope; leaving it
 * removes what the region added. So an op of an outer block may replace an
 * identical op of a nested region (it dominates it), never the reverse, and
 * the then and else regions never share entries. Region ops (for/if) are never
 * merged. Cost: O(ops) expected — chained buckets, and scope exit pops the
 * bucket heads it pushed (last in, first out).
 *
 * Invariants: only pure ops are removed; the surviving op dominates every use
 * it takes over; no op is moved.
 *
 * Example:
 *     %2 = mul %a, %b : i32                %2 = mul %a, %b : i32
 *     for ... {                            for ... {
 *       %5 = mul %b, %a : i32     ==>        %6 = add %2, %iv : i32
 *       %6 = add %5, %iv : i32               ...
 */
#include "passes.h"

#include <string.h>

typedef struct CseEntry {
    IrOp *op;
    unsigned hash;
    struct CseEntry *next;
} CseEntry;

typedef struct Cse {
    IrFunc *f;
    IrValue **fwd;        /* by value id: replacement, or NULL */
    int nfwd;
    CseEntry **buckets;
    unsigned mask;
    unsigned *undo;       /* bucket indices pushed, in order */
    int nundo, capundo;
} Cse;

static bool commutes(const IrOp *op)
{
    return op->nargs == 2 && (ir_op_info[op->op].flags & IRF_COMMUT) &&
           ir_elem_is_int((IrElem)op->args[0]->type.elem) &&
           ir_elem_is_int((IrElem)op->args[1]->type.elem);
}

/* Operand i as compared: commutative integer ops see the lower id first. */
static const IrValue *key_arg(const IrOp *op, int i)
{
    if (commutes(op) && op->args[0]->id > op->args[1]->id) return op->args[1 - i];
    return op->args[i];
}

static unsigned mix(unsigned h, uint64_t v)
{
    h ^= (unsigned)(v ^ (v >> 32));
    return h * 0x9E3779B1u + 0x7F4A7C15u;
}

static uint64_t fbits(double d)
{
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    return u;
}

static unsigned type_hash(unsigned h, IrType t)
{
    h = mix(h, (uint64_t)t.elem | (uint64_t)t.pointee << 8 | (uint64_t)t.rank << 16);
    for (int i = 0; i < t.rank; i++) h = mix(h, (uint64_t)(uint32_t)t.shape[i]);
    return h;
}

static unsigned op_hash(const IrOp *op)
{
    unsigned h = mix(0x12345u, (uint64_t)op->op);
    for (int i = 0; i < IR_MAX_RANK; i++) h = mix(h, (uint64_t)(uint32_t)op->attr[i]);
    if (op->op == IR_CONST) h = mix(mix(h, (uint64_t)op->ival), fbits(op->fval));
    h = mix(h, (uint64_t)op->nargs);
    for (int i = 0; i < op->nargs; i++) h = mix(h, (uint64_t)key_arg(op, i)->id);
    for (int i = 0; i < op->nres; i++) h = type_hash(h, op->res[i]->type);
    return h;
}

static bool op_equal(const IrOp *a, const IrOp *b)
{
    if (a->op != b->op || a->nargs != b->nargs || a->nres != b->nres) return false;
    if (memcmp(a->attr, b->attr, sizeof a->attr) != 0) return false;
    if (a->op == IR_CONST && (a->ival != b->ival || fbits(a->fval) != fbits(b->fval))) return false;
    if ((a->sattr || b->sattr) && (!a->sattr || !b->sattr || strcmp(a->sattr, b->sattr) != 0)) return false;
    for (int i = 0; i < a->nargs; i++)
        if (key_arg(a, i) != key_arg(b, i)) return false;
    for (int i = 0; i < a->nres; i++) {
        if (!ir_type_eq(a->res[i]->type, b->res[i]->type)) return false;
        if (a->res[i]->layout != b->res[i]->layout) return false;
    }
    return true;
}

static void push_undo(Cse *c, unsigned idx)
{
    if (c->nundo == c->capundo) {
        int nc = c->capundo ? c->capundo * 2 : 64;
        unsigned *n = ARENA_ARRAY(c->f->arena, unsigned, nc);
        if (c->nundo) memcpy(n, c->undo, sizeof(unsigned) * (size_t)c->nundo);
        c->undo = n;
        c->capundo = nc;
    }
    c->undo[c->nundo++] = idx;
}

static void pop_scope(Cse *c, int mark)
{
    while (c->nundo > mark) {
        unsigned idx = c->undo[--c->nundo];
        c->buckets[idx] = c->buckets[idx]->next; /* LIFO: our entry is the head */
    }
}

static bool mergeable(const IrOp *op)
{
    unsigned fl = ir_op_info[op->op].flags;
    return (fl & IRF_PURE) && !(fl & (IRF_REGIONS | IRF_TERM)) && op->nres >= 1;
}

static IrValue *resolve(Cse *c, IrValue *v)
{
    while (v && v->id < c->nfwd && c->fwd[v->id]) v = c->fwd[v->id];
    return v;
}

static void cse_block(Cse *c, IrBlock *b)
{
    for (IrOp *op = b->first, *next; op; op = next) {
        next = op->next;
        for (int i = 0; i < op->nargs; i++) op->args[i] = resolve(c, op->args[i]);
        if (op->nregions) {
            for (int r = 0; r < op->nregions; r++) {
                int mark = c->nundo;
                cse_block(c, op->regions[r]);
                pop_scope(c, mark);
            }
            continue;
        }
        if (!mergeable(op)) continue;
        unsigned h = op_hash(op), idx = h & c->mask;
        CseEntry *e = c->buckets[idx];
        while (e && !(e->hash == h && op_equal(e->op, op))) e = e->next;
        if (e) {
            for (int i = 0; i < op->nres; i++)
                if (op->res[i]->id < c->nfwd) c->fwd[op->res[i]->id] = e->op->res[i];
            ir_op_unlink(op);
            continue;
        }
        CseEntry *n = ARENA_NEW(c->f->arena, CseEntry);
        n->op = op;
        n->hash = h;
        n->next = c->buckets[idx];
        c->buckets[idx] = n;
        push_undo(c, idx);
    }
}

static void count_op(IrOp *op, void *ctx)
{
    (void)op;
    (*(int *)ctx)++;
}

void pass_cse(IrFunc *f)
{
    int nops = 0;
    ir_walk(f, count_op, &nops);
    unsigned size = 16;
    while (size < (unsigned)nops * 2u) size <<= 1;
    Cse c = {.f = f, .nfwd = f->next_id, .mask = size - 1};
    c.fwd = ARENA_ARRAY(f->arena, IrValue *, f->next_id + 1);
    c.buckets = ARENA_ARRAY(f->arena, CseEntry *, size);
    cse_block(&c, f->body);
}
