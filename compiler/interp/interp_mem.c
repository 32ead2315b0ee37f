/* interp_mem.c — load, store and atomic_add for the CPU interpreter.
 *
 * What: memory ops on host addresses, lane by lane in row-major order.
 * Invariants:
 *   - a lane whose mask is false (or a lane of an op without a mask: never)
 *     touches no memory; a masked-off load lane reads `other` (0 when absent),
 *     a masked-off atomic_add lane returns 0;
 *   - every access that does happen lies entirely inside one registered
 *     buffer (InterpOptions.buffers), else the op fails with a message naming
 *     the program, the op's source location, the lane (flat and as an index)
 *     and the address as an offset from the nearest buffer — nothing is read
 *     or written out of bounds, so a bad kernel never crashes the host;
 *   - pointer arithmetic is exact (interp_ops.c): an offset that overflows
 *     gives IT_WILD_PTR, reported here, never a wrapped address that lands
 *     back inside a buffer;
 *   - memory holds the element type's own encoding: f16/bf16 as uint16 bit
 *     patterns, f32/f64 as IEEE values, integers at their width, i1 as one
 *     byte (0 or 1; any non-zero byte loads as 1);
 *   - atomic_add lanes apply in lane order, each seeing the previous ones
 *     (the interpreter runs one program at a time, so atomics are exact).
 * Example: load(%p, %mask, %other) with %p = X + [0..255] and mask
 * = offs < 1000 in program 3 reads X[768..999] and gives `other` for the rest.
 */
#include "interp_impl.h"

#include <stdio.h>
#include <string.h>

/* Memory holds the element's own encoding, little-endian (the host's). */
static IVal mem_read(IrElem e, const void *p)
{
    uint64_t bits = 0;
    memcpy(&bits, p, (size_t)it_elem_bytes(e));
    return ir_eval_from_bits(e, bits);
}

static void mem_write(IrElem e, void *p, IVal v)
{
    uint64_t bits = ir_eval_to_bits(e, v);
    memcpy(p, &bits, (size_t)it_elem_bytes(e));
}

/* Overflow-safe: [addr, addr + size) inside the buffer, compared as offsets
 * from its start (never addr + size, which could wrap). */
static bool in_buffer(const InterpBuffer *b, uint64_t addr, uint64_t size)
{
    uint64_t lo = (uint64_t)(uintptr_t)b->data;
    return addr >= lo && addr - lo <= b->bytes && b->bytes - (addr - lo) >= size;
}

/* Reports an out-of-bounds access: the offset is given from the nearest buffer. */
static int oob(Interp *it, const IrOp *op, const char *what, int64_t lane, IrType t, uint64_t addr, int size)
{
    char idx[96];
    it_fmt_index(idx, sizeof idx, t, lane);
    const InterpOptions *o = it->opts;
    int best = -1;
    uint64_t best_dist = 0;
    for (int k = 0; o && k < o->nbuffers; k++) {
        uint64_t lo = (uint64_t)(uintptr_t)o->buffers[k].data, hi = lo + o->buffers[k].bytes;
        uint64_t dist = addr < lo ? lo - addr : addr >= hi ? addr - hi + 1 : 0;
        if (best < 0 || dist < best_dist) best = k, best_dist = dist;
    }
    if (best < 0)
        return it_error(it, op, "%s of %d bytes out of bounds at lane %lld (index %s): address 0x%llx "
                        "(no buffers are registered)", what, size, (long long)lane, idx,
                        (unsigned long long)addr);
    const InterpBuffer *b = &o->buffers[best];
    int64_t off = (int64_t)(addr - (uint64_t)(uintptr_t)b->data);
    const char *name = b->name ? b->name : "?";
    return it_error(it, op, "%s of %d bytes out of bounds at lane %lld (index %s): address is buffer '%s' "
                    "%s %lld bytes (buffer '%s' has %zu bytes)", what, size, (long long)lane, idx, name,
                    off < 0 ? "-" : "+", (long long)(off < 0 ? -off : off), name, b->bytes);
}

/* The host pointer for an access of `size` bytes at addr, or NULL after reporting. */
static void *check_access(Interp *it, const IrOp *op, const char *what, int64_t lane, IrType t,
                          uint64_t addr, int size)
{
    const InterpOptions *o = it->opts;
    int nb = o ? o->nbuffers : 0;
    if (addr > INT64_MAX) { /* IT_WILD_PTR: the pointer's offset overflowed (exec_addptr) */
        char idx[96];
        it_fmt_index(idx, sizeof idx, t, lane);
        it_error(it, op, "%s of %d bytes out of bounds at lane %lld (index %s): the pointer's offset "
                 "overflowed the address space", what, size, (long long)lane, idx);
        return NULL;
    }
    if (it->last_buf < nb && in_buffer(&o->buffers[it->last_buf], addr, (uint64_t)size))
        return (void *)(uintptr_t)addr;
    for (int k = 0; k < nb; k++)
        if (in_buffer(&o->buffers[k], addr, (uint64_t)size)) {
            it->last_buf = k;
            return (void *)(uintptr_t)addr;
        }
    oob(it, op, what, lane, t, addr, size);
    return NULL;
}

typedef struct MemArgs {
    IVal *ptr, *val, *mask, *other;
    int sp, sv, sm, so;   /* strides: 1, or 0 for a scalar broadcast to every lane */
} MemArgs;

/* Fetches operand k (data and stride) when present. */
static int opt_operand(Interp *it, const IrOp *op, int k, int64_t n, IVal **data, int *stride)
{
    *data = NULL;
    *stride = 0;
    if (k >= op->nargs) return 0;
    if (!(*data = it_in(it, op, k))) return 1;
    return (*stride = it_operand_stride(it, op, k, n)) < 0;
}

static int exec_load(Interp *it, const IrOp *op, int64_t n)
{
    if (op->nargs < 1 || op->nargs > 3 || op->nres != 1) return it_internal(it, op, "load takes ptr [, mask [, other]]");
    MemArgs m;
    if (opt_operand(it, op, 0, n, &m.ptr, &m.sp) || opt_operand(it, op, 1, n, &m.mask, &m.sm) ||
        opt_operand(it, op, 2, n, &m.other, &m.so))
        return 1;
    IVal *r = it_out(it, op, 0);
    if (!r) return it_error(it, op, "out of host memory for the interpreter's values");
    IrType t = op->res[0]->type;
    IrElem e = (IrElem)t.elem;
    int size = it_elem_bytes(e);
    for (int64_t i = 0; i < n; i++) {
        if (m.mask && !m.mask[i * m.sm].i) {
            if (m.other) r[i] = m.other[i * m.so];
            else r[i].u = 0; /* 0 and 0.0 share the all-zero bit pattern */
            continue;
        }
        void *p = check_access(it, op, "load", i, t, m.ptr[i * m.sp].u, size);
        if (!p) return 1;
        r[i] = mem_read(e, p);
    }
    return 0;
}

/* store (no result) and atomic_add (old values as its result). */
static int exec_write(Interp *it, const IrOp *op)
{
    bool atomic = op->op == IR_ATOMIC_ADD;
    if (op->nargs < 2 || op->nargs > 3 || op->nres != (atomic ? 1 : 0))
        return it_internal(it, op, "%s takes ptr, value [, mask]", ir_op_info[op->op].name);
    IrType t = op->args[1]->type;
    int64_t n = ir_type_numel(op->args[0]->type);
    if (ir_type_numel(t) > n) n = ir_type_numel(t);
    MemArgs m;
    if (opt_operand(it, op, 0, n, &m.ptr, &m.sp) || opt_operand(it, op, 1, n, &m.val, &m.sv) ||
        opt_operand(it, op, 2, n, &m.mask, &m.sm))
        return 1;
    IrElem e = (IrElem)op->args[0]->type.pointee;
    if (e != t.elem) return it_internal(it, op, "value type %s does not match the pointee %s",
                                        ir_elem_name((IrElem)t.elem), ir_elem_name(e));
    IVal *r = NULL;
    if (atomic && !(r = it_out(it, op, 0))) return it_error(it, op, "out of host memory for the interpreter's values");
    int size = it_elem_bytes(e);
    IrType lt = ir_type_numel(op->args[0]->type) == n ? op->args[0]->type : t;
    for (int64_t i = 0; i < n; i++) {
        if (m.mask && !m.mask[i * m.sm].i) {
            if (r) r[i].u = 0;
            continue;
        }
        void *p = check_access(it, op, atomic ? "atomic_add" : "store", i, lt, m.ptr[i * m.sp].u, size);
        if (!p) return 1;
        IVal v = m.val[i * m.sv];
        if (atomic) {
            IVal old = mem_read(e, p);
            r[i] = old;
            ir_eval_binary(IR_ADD, e, old, v, &v); /* defined on every numeric type */
        }
        mem_write(e, p, v);
    }
    return 0;
}

int it_exec_mem(Interp *it, const IrOp *op)
{
    if (op->op == IR_LOAD) return exec_load(it, op, ir_type_numel(op->res[0]->type));
    return exec_write(it, op);
}
