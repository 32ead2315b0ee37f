/* pass_sram_alloc.c — SRAM allocation: one offset in dynamic shared memory for
 * every shared buffer of the kernel.
 *
 * Buffers. Every user of shared memory is a buffer with a live interval over
 * a linear numbering of the function's ops (pre-order; a `for`/`if` op takes
 * one position before its regions and one after them):
 *   - scratch of one op (layout conversions, dot operand staging through
 *     swizzled SRAM, cross-warp reductions, reshapes, shared atomic
 *     results): live at that op only, [p, p];
 *   - pipeline stage buffers (the plan of pass_pipeline.c, read back with
 *     gp_pipeline_loops): written by the prologue (at the loop, or earlier
 *     at its issue point, pipeline.issue) and read/written by every
 *     iteration, so live from the prologue over the whole loop:
 *     [issue_pos or for_start, for_end];
 *   - deferred operand tiles (mma.deferred: a convert to an MMA operand whose
 *     users are all tensor-core dots): written at the convert, read by
 *     ldmatrix at each dot, so live from the convert to its last dot. A tile
 *     written outside a loop and read inside it (attention's Q, hoisted out
 *     of the key loop) stays live to the end of that loop: every iteration
 *     reads it again, so Q's fragments need no registers across the loop.
 *   - a pipelined loop's mbarriers (pipeline.mbarrier: full[s] and empty[s],
 *     8 bytes each): live as its stage buffers, on the loop op itself. A loop
 *     whose body has buffers of its own loses pipeline.mbarrier here unless
 *     the kernel is to be warp-specialised: its body needs a CTA barrier every
 *     iteration anyway, so it keeps the old scheme. Under --warp-specialize
 *     the ring stays (the producer warpgroup has no other hand-off): the
 *     body's buffers, live inside the loop only, never share bytes with the
 *     stages or the mbarriers (both live over the whole loop), and the
 *     lowering guards their reuse across the back edge with a barrier of the
 *     consumers alone (cg_smem_pending_span at the body's top; cg_barrier is
 *     a named barrier of the consumer warps under warp_spec, as ping-pong's);
 *   - views (smem.view): a deferred convert whose tile an earlier deferred
 *     convert already staged — of the same value, or of its transpose (trans
 *     is a view: same registers, permuted layout, so the staged rows and
 *     columns, hence the bytes, are the same). It gets no buffer and writes
 *     nothing; its dots read the earlier tile and extend its live range. The
 *     backward's dK/dV program stages Q once per step for both
 *     S^T = K Q^T (Q^T, a K-major B) and dK += dS^T Q (Q, an MN-major B).
 *
 * Placement (the idea of Triton's Allocation.cpp, written anew): buffers
 * sorted by size, largest first; each goes at the lowest offset (aligned)
 * where it overlaps in bytes no already placed buffer whose interval overlaps
 * its own. Because each placement is checked against every placed buffer
 * live at the same time, the result has no interference by construction;
 * gp_sram_check verifies that (the tests on random intervals, and the pass
 * itself as an internal-error guard). Buffers never live together share
 * bytes: a conversion before a loop and the loop's stages reuse one region.
 *
 * Example (positions, bytes):  A [0,9] 32K   B [2,2] 8K   C [11,11] 16K
 *   A -> 0;  C -> 0 (not live with A);  B -> 32K (live with A).  Total 40K.
 *
 * Output on the IR: each buffer's op gets smem.offset, smem.bytes and
 * smem.live = [first, last position] (a pipelined load's buffer is its
 * stages), deferred converts mma.deferred = 1, views smem.view = the offset
 * of the tile they read, the kernel smem = the total:
 *     %y = convert_layout %x {smem.offset = 0, smem.bytes = 17408, smem.live = [52, 52]} : ...
 * ir_verify checks what it can without the numbering: alignment, inside the
 * total, no two buffers live together sharing a byte.
 *
 * Limits: a kernel whose total exceeds the target's dynamic SRAM per CTA
 * (Target.sram_limit, compiler/support/target.c) is a compile error naming
 * the buffers; one buffer past it alone (a huge reduce, 1024 stages of a
 * tile) is an error at its op. Sizes are 64-bit and stages x slot bytes is
 * checked, so no size wraps past the check (issue 12).
 */
#include "gpuir.h"

#include <stdlib.h>
#include <string.h>

static int64_t align_up(int64_t x, int64_t a) { return (x + a - 1) & ~(a - 1); }

static bool live_together(const GpSmemBuf *a, const GpSmemBuf *b)
{
    return a->start <= b->end && b->start <= a->end;
}

static bool bytes_overlap(const GpSmemBuf *a, const GpSmemBuf *b)
{
    return a->offset < b->offset + b->bytes && b->offset < a->offset + a->bytes;
}

/* Larger first; ties by earlier start. Insertion sort: stable (equal
 * buffers keep the caller's order, so placements are reproducible) and the
 * lists are short (a few buffers per kernel). */
static bool goes_before(const GpSmemBuf *a, const GpSmemBuf *b)
{
    if (a->bytes != b->bytes) return a->bytes > b->bytes;
    return a->start < b->start;
}

static void sort_bufs(GpSmemBuf **v, int n, bool by_size)
{
    for (int i = 1; i < n; i++) {
        GpSmemBuf *x = v[i];
        int j = i;
        while (j > 0 && (by_size ? goes_before(x, v[j - 1]) : x->offset < v[j - 1]->offset)) {
            v[j] = v[j - 1];
            j--;
        }
        v[j] = x;
    }
}

int64_t gp_sram_place(GpSmemBuf **bufs, int n)
{
    if (n <= 0) return 0;
    GpSmemBuf **order = malloc(sizeof *order * (size_t)n);
    GpSmemBuf **near = malloc(sizeof *near * (size_t)n);
    if (!order || !near) {
        free(order);
        free(near);
        INTERNAL_ERROR("codegen: out of memory placing %d SRAM buffers", n);
        return 0;
    }
    memcpy(order, bufs, sizeof *order * (size_t)n);
    sort_bufs(order, n, true);
    int64_t total = 0;
    for (int i = 0; i < n; i++) {
        GpSmemBuf *b = order[i];
        int align = b->align > 0 ? b->align : 16;
        int nn = 0;
        for (int j = 0; j < i; j++)
            if (live_together(order[j], b)) near[nn++] = order[j];
        sort_bufs(near, nn, false);
        /* First fit: walk the placed neighbours by address; the candidate only
         * moves up, past each neighbour it would overlap. */
        int64_t cand = 0;
        for (int j = 0; j < nn; j++) {
            const GpSmemBuf *p = near[j];
            if (cand + b->bytes <= p->offset) break;
            if (p->offset + p->bytes > cand) cand = align_up(p->offset + p->bytes, align);
        }
        b->offset = cand;
        if (cand + b->bytes > total) total = cand + b->bytes;
    }
    free(order);
    free(near);
    return align_up(total, 16);
}

bool gp_sram_check(GpSmemBuf *const *bufs, int n, StrBuf *why)
{
    for (int i = 0; i < n; i++) {
        const GpSmemBuf *a = bufs[i];
        if (a->align > 0 && a->offset % a->align) {
            if (why) sb_printf(why, "buffer %d (%s) at %lld is not %d-byte aligned", i, a->what, (long long)a->offset,
                               a->align);
            return false;
        }
        for (int j = i + 1; j < n; j++) {
            const GpSmemBuf *b = bufs[j];
            if (live_together(a, b) && bytes_overlap(a, b)) {
                if (why)
                    sb_printf(why, "buffers %d (%s, [%d,%d], bytes %lld..%lld) and %d (%s, [%d,%d], bytes %lld..%lld) "
                              "interfere", i, a->what, a->start, a->end, (long long)a->offset,
                              (long long)(a->offset + a->bytes), j, b->what, b->start, b->end, (long long)b->offset,
                              (long long)(b->offset + b->bytes));
                return false;
            }
        }
    }
    return true;
}

/* ---- the pass over the GPU IR ---- */

typedef struct SaCtx {
    IrFunc *f;
    GpTcState *tc;        /* pass-local: the loops' plans, the buffers made */
    const int *uses;
    int *owner;           /* by value id: the convert whose tile a view reads (-1: none) */
    int64_t limit;        /* the target's SRAM per CTA */
    bool keep_ring;       /* --warp-specialize: body buffers keep pipeline.mbarrier */
    GpSmemBuf *too_big;   /* the first buffer larger than that alone */
} SaCtx;

static GpSmemBuf *add_buf(SaCtx *s, const char *what, IrOp *op, int64_t bytes, int align, int start, int end)
{
    GpSmemBuf *b = ARENA_NEW(s->f->arena, GpSmemBuf);
    b->what = what;
    b->op = op;
    b->value_id = op->nres ? op->res[0]->id : -1;
    b->bytes = align_up(bytes, 16);
    b->align = align;
    b->start = start;
    b->end = end;
    b->offset = -1;
    if (b->bytes > s->limit && !s->too_big) s->too_big = b;
    vec_push(s->f->arena, &s->tc->bufs, b);
    return b;
}

static bool is_mma_dot(const IrFunc *f, const IrOp *op)
{
    GpMmaFrag frag;
    int wm, wn;
    return op->op == IR_DOT && op->nres && gp_layout_is_mma(f, op->res[0]->layout, &frag, &wm, &wn) &&
           frag == GP_MMA_C;
}

/* A dot at position p reads its deferred operand tiles there. */
static void extend_to_dot(SaCtx *s, const IrOp *op, int p)
{
    for (int i = 0; i < 2 && i < op->nargs; i++) {
        const IrValue *v = op->args[i];
        int bi = v->id < s->tc->nids && s->tc->deferred[v->id] ? s->tc->buf_of[v->id] : -1;
        if (bi < 0) continue;
        GpSmemBuf *b = s->tc->bufs.data[bi];
        if (b->end < p) b->end = p;
    }
}

/* After a region op [p, end]: a buffer that starts before it and is read
 * inside it is read again by every iteration: live to its end. */
static void extend_over_region(SaCtx *s, int p, int end)
{
    for (int i = 0; i < s->tc->bufs.len; i++) {
        GpSmemBuf *b = s->tc->bufs.data[i];
        if (b->start < p && b->end > p && b->end < end) b->end = end;
    }
}

static int operand_align(const SaCtx *s) { return s->tc->wgmma ? 1024 : 128; }

static void at_op(void *vctx, IrOp *op, int p)
{
    SaCtx *s = vctx;
    for (int i = 0; i < s->tc->loops.len; i++) {
        GpPipeLoop *pl = s->tc->loops.data[i];
        if (pl->issue_at == op) pl->issue_pos = p;
    }
    const char *what = NULL;
    if (op->nres && s->owner[op->res[0]->id] >= 0) { /* a view: the owner's tile, numbered before it */
        s->tc->buf_of[op->res[0]->id] = s->tc->buf_of[s->owner[op->res[0]->id]];
        return;
    }
    int bytes = op->nres ? gp_op_scratch(s->f, s->tc, op, s->uses, &what) : 0;
    if (bytes > 0) {
        /* Operand tiles are read by ldmatrix: 128-byte alignment keeps the
         * swizzle's bank arithmetic valid for absolute addresses; wgmma's
         * 128-byte swizzle atoms start at 1024-byte boundaries. */
        add_buf(s, what, op, bytes, what[0] == 'm' ? operand_align(s) : 16, p, p);
        s->tc->buf_of[op->res[0]->id] = s->tc->bufs.len - 1;
    }
    if (is_mma_dot(s->f, op)) extend_to_dot(s, op, p);
}

/* Whether a buffer lives entirely inside the region op [p, end] (its body's own scratch). */
static bool body_has_buffers(const SaCtx *s, int p, int end)
{
    for (int i = 0; i < s->tc->bufs.len; i++) {
        const GpSmemBuf *b = s->tc->bufs.data[i];
        if (b->start > p && b->end < end) return true;
    }
    return false;
}

static void after_region(void *vctx, IrOp *op, int p, int end)
{
    SaCtx *s = vctx;
    extend_over_region(s, p, end);
    GpPipeLoop *pl = op->op == IR_FOR ? gp_pipeline_of_loop(s->tc, op) : NULL;
    for (int i = 0; pl && i < pl->nloads; i++) {
        int64_t bytes; /* stages come from the program (up to SEMA_MAX_STAGES, any number in GPU IR text) */
        if (!sup_mul_i64(pl->loads[i].slot_bytes, pl->stages, &bytes)) bytes = INT64_MAX / 2;
        pl->loads[i].buf = add_buf(s, "pipeline stages", pl->loads[i].load, bytes, operand_align(s), pl->issue_pos, end);
    }
    /* mbarrier hand-off: full[s] and empty[s], 8 bytes each, live as long as the stages. A
     * body with SRAM buffers of its own needs a CTA barrier every iteration anyway (before
     * its first one reuses them): such a loop keeps wait_group + bar.sync (the attribute goes),
     * unless a producer warpgroup is to feed it (keep_ring): then the consumers' named barrier
     * guards the body's buffers and the ring stays (the atomic dQ's dS^T, d 256's P^T / dS^T). */
    if (pl && pl->mbarrier && !s->keep_ring && body_has_buffers(s, p, end)) {
        ir_attr_remove(&op->attrs, IR_ATTR_MBARRIER);
        pl->mbarrier = false;
    }
    if (pl && pl->mbarrier) pl->mbar = add_buf(s, "pipeline mbarriers", op, 16 * (int64_t)pl->stages, 16, pl->issue_pos, end);
}

static bool is_mma_operand_convert(const IrFunc *f, const IrOp *op)
{
    GpMmaFrag frag;
    int wm, wn;
    if (op->op != IR_CONVERT_LAYOUT || !op->nres) return false;
    IrElem e = (IrElem)op->res[0]->type.elem;
    return gp_mma_operand_elem(e) && gp_layout_is_mma(f, op->res[0]->layout, &frag, &wm, &wn) &&
           frag != GP_MMA_C;
}

/* Count, per value, the operand slots (A or B) of tensor-core dots it fills. */
static void count_dot_uses(const IrFunc *f, const IrBlock *b, int *dot_uses)
{
    for (const IrOp *op = b->first; op; op = op->next) {
        if (is_mma_dot(f, op))
            for (int i = 0; i < 2 && i < op->nargs; i++) dot_uses[op->args[i]->id]++;
        for (int r = 0; r < op->nregions; r++) count_dot_uses(f, op->regions[r], dot_uses);
    }
}

static void mark_deferred(const IrFunc *f, const IrBlock *b, const int *uses, const int *dot_uses, bool *deferred)
{
    for (const IrOp *op = b->first; op; op = op->next) {
        if (is_mma_operand_convert(f, op)) {
            int id = op->res[0]->id;
            deferred[id] = uses[id] > 0 && uses[id] == dot_uses[id];
        }
        for (int r = 0; r < op->nregions; r++) mark_deferred(f, op->regions[r], uses, dot_uses, deferred);
    }
}

/* The tile a deferred, staged operand convert writes: the value it stages
 * with transposes looked through (`root`) and which of root's dims is
 * contiguous in the tile. False for anything else. */
typedef struct StagedTile {
    const IrValue *root;
    int fast_dim;
    int id;               /* the convert's result */
} StagedTile;

static bool staged_tile(const SaCtx *s, const IrOp *op, StagedTile *t)
{
    const char *what = "";
    if (!is_mma_operand_convert(s->f, op) || !s->tc->deferred[op->res[0]->id] || gp_pipeline_load(s->tc, op, NULL) ||
        gp_op_scratch(s->f, s->tc, op, s->uses, &what) <= 0)
        return false;
    const IrValue *v = op->args[0];
    /* an e4m3 tile is stored K-major with K permuted whatever its source
     * (cg_dot_wgmma.c): no view of it */
    if (v->type.elem == IR_F8E4M3) return false;
    int fd = gp_fast_value_dim(s->f, v);
    if (fd < 0 || v->type.rank != 2) return false;
    while (v->def && v->def->op == IR_TRANS && v->def->args[0]->type.rank == 2) {
        v = v->def->args[0];
        fd = 1 - fd;
    }
    *t = (StagedTile){v, fd, op->res[0]->id};
    return true;
}

/* Views: a staged tile equal to one staged before it by an op that dominates
 * it (earlier in the same block or in an enclosing one: `seen[0..n)`, the
 * tiles of the enclosing blocks first; a region's own tiles are dropped when
 * it ends, since it may not run). */
static void find_views(SaCtx *s, IrBlock *b, StagedTile *seen, int n)
{
    for (IrOp *op = b->first; op; op = op->next) {
        StagedTile t;
        if (staged_tile(s, op, &t)) {
            int j = n - 1;
            while (j >= 0 && (seen[j].root != t.root || seen[j].fast_dim != t.fast_dim)) j--;
            if (j >= 0) {
                s->owner[t.id] = seen[j].id;
                s->tc->view[t.id] = true;
            } else {
                seen[n++] = t;
            }
        }
        for (int r = 0; r < op->nregions; r++) find_views(s, op->regions[r], seen, n);
    }
}

static void mark_deferred_attr(IrOp *op, void *vctx)
{
    const GpTcState *tc = vctx;
    int id = op->nres ? op->res[0]->id : tc->nids;
    if (id >= tc->nids) return;
    if (tc->deferred[id]) ir_attr_set_int(op->parent->func->arena, &op->attrs, IR_ATTR_DEFERRED, 1);
    if (tc->view[id]) {
        const GpSmemBuf *b = tc->bufs.data[tc->buf_of[id]];
        ir_attr_set_int(op->parent->func->arena, &op->attrs, IR_ATTR_SMEM_VIEW, b->offset);
    }
}

/* The placement goes on the IR: each buffer's op gets smem.offset,
 * smem.bytes and smem.live, deferred operand converts mma.deferred, the
 * kernel smem (the total). */
static void write_attrs(IrFunc *f, GpTcState *tc)
{
    for (int i = 0; i < tc->bufs.len; i++) {
        const GpSmemBuf *b = tc->bufs.data[i];
        int64_t live[2] = {b->start, b->end};
        ir_attr_set_int(f->arena, &b->op->attrs, IR_ATTR_SMEM_OFFSET, b->offset);
        ir_attr_set_int(f->arena, &b->op->attrs, IR_ATTR_SMEM_BYTES, b->bytes);
        ir_attr_set(f->arena, &b->op->attrs, IR_ATTR_SMEM_LIVE, 2, live, true);
    }
    ir_walk(f, mark_deferred_attr, tc);
    ir_attr_set_int(f->arena, &f->attrs, IR_ATTR_SMEM, tc->total);
}

bool gp_pass_sram_alloc(IrFunc *f, const GpPassCtx *ctx, Diag *d)
{
    GpTcState *tc = ARENA_NEW(f->arena, GpTcState);
    tc->wgmma = ir_attr_int(&f->attrs, IR_ATTR_WGMMA, 0) != 0;
    gp_pipeline_loops(f, &tc->loops);
    if (ice_message()) return false;
    const Target *t = ctx->target;
    SaCtx s = {f, tc, ir_use_counts(f), ARENA_ARRAY(f->arena, int, f->next_id + 1), t->sram_limit,
               ctx->sched.warp_specialize > 0, NULL};
    tc->nids = f->next_id;
    tc->buf_of = ARENA_ARRAY(f->arena, int, f->next_id + 1);
    tc->deferred = ARENA_ARRAY(f->arena, bool, f->next_id + 1);
    tc->view = ARENA_ARRAY(f->arena, bool, f->next_id + 1);
    int *dot_uses = ARENA_ARRAY(f->arena, int, f->next_id + 1);
    for (int i = 0; i <= f->next_id; i++)
        tc->buf_of[i] = -1, tc->deferred[i] = tc->view[i] = false, dot_uses[i] = 0, s.owner[i] = -1;
    count_dot_uses(f, f->body, dot_uses);
    mark_deferred(f, f->body, s.uses, dot_uses, tc->deferred);
    find_views(&s, f->body, ARENA_ARRAY(f->arena, StagedTile, f->next_id + 1), 0);
    GpNumbering n = {at_op, after_region, &s, 0};
    gp_number_ops(f->body, &n);
    if (s.too_big) {
        /* One buffer alone is past the limit: say which op, no placement needed. */
        const GpSmemBuf *b = s.too_big;
        if (strcmp(b->what, "pipeline stages") == 0)
            diag_report(d, DIAG_USER, b->op->loc,
                        "the %d pipeline stages of this load need %lld bytes of shared memory; sm_%d allows %d per "
                        "block: use fewer pipeline stages (num_stages) or smaller blocks (BLOCK_* constants)",
                        f->sched.num_stages, (long long)b->bytes, t->sm, t->sram_limit);
        else
            diag_report(d, DIAG_USER, b->op->loc,
                        "this %s needs %lld bytes of shared memory; sm_%d allows %d per block: use smaller blocks "
                        "(BLOCK_* constants)", b->what, (long long)b->bytes, t->sm, t->sram_limit);
        return false;
    }
    int64_t total = gp_sram_place((GpSmemBuf **)tc->bufs.data, tc->bufs.len);
    StrBuf why;
    sb_init(&why);
    if (!gp_sram_check((GpSmemBuf *const *)tc->bufs.data, tc->bufs.len, &why)) {
        diag_report(d, DIAG_INTERNAL, f->loc, "SRAM allocation of %s: %s", f->name, why.data);
        sb_free(&why);
        return false;
    }
    if (total <= t->sram_limit) {
        tc->total = (int)total;
        write_attrs(f, tc);
        sb_free(&why);
        return true;
    }
    /* One error at the kernel: the limit, then each buffer, then the advice. */
    for (int i = 0; i < tc->bufs.len; i++) gp_sram_describe(tc->bufs.data[i], &why);
    diag_report(d, DIAG_USER, f->loc,
                "kernel '%s' needs %lld bytes of shared memory; sm_%d allows %d per block:\n%s"
                "  use smaller blocks (BLOCK_* constants) or fewer pipeline stages (num_stages = %d now)",
                f->name, (long long)total, t->sm, t->sram_limit, why.data ? why.data : "", f->sched.num_stages);
    sb_free(&why);
    return false;
}
