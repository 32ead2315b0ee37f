/* tc_state.c — the lowering's view of the GPU passes' decisions: GpTcState
 * built from the IR (gp_tc_from_ir), the op numbering the SRAM live ranges
 * are written in, and the scratch each op's lowering asks for.
 *
 * What it does: the passes write their decisions on the IR (ir.h IR_ATTR_*:
 * pipeline.*, smem.*, mma.deferred, the kernel's smem and wgmma); the
 * lowering wants them by value id and by loop, so this file reads them into
 * a cache once, after the last pass. The IR stays the source of truth: the
 * same text parsed back gives the same cache, and nothing here decides.
 *
 * Invariants: buffers are listed in the order pass_sram_alloc.c made them
 * (scratch in op order, a loop's stage buffers after its body), so --stats
 * and barrier bookkeeping read the same list as before the decisions moved
 * onto the IR. Op positions: pre-order, a region op takes one position
 * before its regions and one after them.
 *
 * Example: `%y = convert_layout %x {smem.offset = 0, smem.bytes = 17408,
 * smem.live = [52, 52]}` becomes bufs[i] = {"convert_layout", 17408 bytes at
 * 0, live 52..52} and buf_of[id of %y] = i; a later `%z = convert_layout %t
 * {mma.deferred = 1, smem.view = 0}` (%t = trans %x) gets view[id of %z] and
 * buf_of = the buffer at offset 0 live at its position (%y's).
 */
#include "gpuir.h"

#include <string.h>

static void number_block(IrBlock *b, GpNumbering *n)
{
    for (IrOp *op = b->first; op; op = op->next) {
        int p = n->pos++;
        if (n->at) n->at(n->ctx, op, p);
        for (int r = 0; r < op->nregions; r++) number_block(op->regions[r], n);
        if (!op->nregions) continue;
        int end = n->pos++;
        if (n->after) n->after(n->ctx, op, p, end);
    }
}

void gp_number_ops(IrBlock *b, GpNumbering *n) { number_block(b, n); }

int gp_op_scratch(const IrFunc *f, const GpTcState *tc, const IrOp *op, const int *uses, const char **what)
{
    switch (op->op) {
    case IR_CONVERT_LAYOUT:
        if (gp_pipeline_load(tc, op, NULL)) return 0; /* reads its loop's stage buffer */
        /* fall through */
    case IR_RESHAPE:
        return gp_convert_scratch_bytes(f, op, what);
    case IR_REDUCE:
        *what = "reduce";
        return gp_reduce_scratch_bytes(f, op);
    case IR_ATOMIC_ADD:
        *what = "atomic_add result";
        return gp_atomic_scratch_bytes(f, op, uses);
    default:
        return 0;
    }
}

typedef struct TsCtx {
    IrFunc *f;
    GpTcState *tc;
    const int *uses;
} TsCtx;

static GpSmemBuf *buf_from_attrs(TsCtx *s, IrOp *op, const char *what)
{
    const IrAttr *live = ir_attr_get(&op->attrs, IR_ATTR_SMEM_LIVE);
    GpSmemBuf *b = ARENA_NEW(s->f->arena, GpSmemBuf);
    b->what = what;
    b->op = op;
    b->value_id = op->nres ? op->res[0]->id : -1;
    b->offset = ir_attr_int(&op->attrs, IR_ATTR_SMEM_OFFSET, 0);
    b->bytes = ir_attr_int(&op->attrs, IR_ATTR_SMEM_BYTES, 0);
    b->start = live && live->n == 2 ? (int)live->v[0] : 0;
    b->end = live && live->n == 2 ? (int)live->v[1] : 0;
    vec_push(s->f->arena, &s->tc->bufs, b);
    return b;
}

static void ts_at(void *vctx, IrOp *op, int p)
{
    TsCtx *s = vctx;
    GpTcState *tc = s->tc;
    for (int i = 0; i < tc->loops.len; i++) {
        GpPipeLoop *pl = tc->loops.data[i];
        if (pl->issue_at == op) pl->issue_pos = p;
    }
    if (!op->nres || op->op == IR_FOR) return;   /* a loop's own buffer (its mbarriers): ts_after */
    int id = op->res[0]->id;
    if (ir_attr_int(&op->attrs, IR_ATTR_DEFERRED, 0)) tc->deferred[id] = true;
    if (ir_attr_get(&op->attrs, IR_ATTR_SMEM_VIEW)) {
        /* the operand tile at that offset live here: made by an earlier op, so listed already */
        int64_t off = ir_attr_int(&op->attrs, IR_ATTR_SMEM_VIEW, 0);
        int i = tc->bufs.len - 1;
        for (; i >= 0; i--) {
            const GpSmemBuf *b = tc->bufs.data[i];
            if (b->offset == off && b->start < p && p <= b->end && b->op->op == IR_CONVERT_LAYOUT) break;
        }
        if (i < 0) INTERNAL_ERROR("codegen: smem.view = %lld of %%%d reads no operand tile live there", (long long)off, id);
        tc->buf_of[id] = i;
        tc->view[id] = i >= 0;
        return;
    }
    /* A pipelined load's buffer is its stages: listed after its loop's body. */
    if (!ir_attr_get(&op->attrs, IR_ATTR_SMEM_OFFSET) || ir_attr_get(&op->attrs, IR_ATTR_SLOT_BYTES)) return;
    const char *what = "scratch";
    gp_op_scratch(s->f, tc, op, s->uses, &what);
    buf_from_attrs(s, op, what);
    tc->buf_of[id] = tc->bufs.len - 1;
}

static void ts_after(void *vctx, IrOp *op, int p, int end)
{
    TsCtx *s = vctx;
    GpSpan *sp = ARENA_NEW(s->f->arena, GpSpan);
    sp->op = op;
    sp->start = p;
    sp->end = end;
    vec_push(s->f->arena, &s->tc->spans, sp);
    GpPipeLoop *pl = op->op == IR_FOR ? gp_pipeline_of_loop(s->tc, op) : NULL;
    for (int i = 0; pl && i < pl->nloads; i++)
        if (ir_attr_get(&pl->loads[i].load->attrs, IR_ATTR_SMEM_OFFSET))
            pl->loads[i].buf = buf_from_attrs(s, pl->loads[i].load, "pipeline stages");
    if (pl && pl->mbarrier && ir_attr_get(&op->attrs, IR_ATTR_SMEM_OFFSET))
        pl->mbar = buf_from_attrs(s, op, "pipeline mbarriers");
}

GpTcState *gp_tc_from_ir(IrFunc *f)
{
    GpTcState *tc = ARENA_NEW(f->arena, GpTcState);
    tc->wgmma = ir_attr_int(&f->attrs, IR_ATTR_WGMMA, 0) != 0;
    tc->total = (int)ir_attr_int(&f->attrs, IR_ATTR_SMEM, 0);
    tc->nids = f->next_id;
    tc->buf_of = ARENA_ARRAY(f->arena, int, f->next_id + 1);
    tc->deferred = ARENA_ARRAY(f->arena, bool, f->next_id + 1);
    tc->view = ARENA_ARRAY(f->arena, bool, f->next_id + 1);
    for (int i = 0; i <= f->next_id; i++) tc->buf_of[i] = -1, tc->deferred[i] = tc->view[i] = false;
    gp_pipeline_loops(f, &tc->loops);
    TsCtx s = {f, tc, ir_use_counts(f)};
    GpNumbering n = {ts_at, ts_after, &s, 0};
    gp_number_ops(f->body, &n);
    return tc;
}

void gp_sram_describe(const GpSmemBuf *b, StrBuf *out)
{
    sb_printf(out, "  %-18s", b->what);
    if (b->value_id >= 0) sb_printf(out, " %%%-5d", b->value_id);
    else sb_puts(out, "       ");
    sb_printf(out, " %7lld bytes at %6lld, live %d..%d\n", (long long)b->bytes, (long long)b->offset, b->start,
              b->end);
}

void gp_sram_stats(const GpTcState *tc, StrBuf *out)
{
    sb_printf(out, "smem: %d bytes in %d buffers\n", tc->total, tc->bufs.len);
    for (int i = 0; i < tc->bufs.len; i++) gp_sram_describe(tc->bufs.data[i], out);
}
