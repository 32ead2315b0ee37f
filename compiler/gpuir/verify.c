/* verify.c — checks the schedule attributes the GPU passes write on the IR
 * (docs/tensor_cores.md section 0): the plans of pipelining, SRAM placement,
 * wgmma in flight, ping-pong, warp specialisation and TMA.
 *
 * What it does: after ir_verify / ir_verify_gpu (structure, types, layouts:
 * compiler/ir/verify.c) has passed, one walk over the kernel in program order
 * (an op's regions before the op) checks each op's attributes against the op
 * and the loop around it, collects the smem.* buffers, then checks the kernel:
 * every buffer inside the kernel's smem, no two live at once sharing a byte,
 * and the kernel-level pingpong / warp_spec rules. The GPU pass runner
 * (pass_table.c) calls it after every pass, so each pass's decisions are
 * checked where they are made.
 *
 * Invariants of its own: never changes the IR; reports problems exactly as
 * the IR verifier does,
 *   internal error: verifier: <op> at LINE:COL: <what>
 * (at most MAX_ERRORS lines on `err`), and returns false if there were any.
 * It relies on the IR being structurally valid (ir_verify first).
 *
 * Example: `%1 = load %p {pipeline.slot_bytes = 128} : f16` outside any loop gives
 *   internal error: verifier: load at 4:3: pipeline.slot_bytes on an op that is
 *   not a load in the body of a pipelined loop
 */
#include "gpuir.h"

#include <stdarg.h>
#include <string.h>

#define MAX_ERRORS 20

typedef struct Verifier {
    const IrFunc *f;
    StrBuf *err;
    int nerr;
    Arena *arena;
    const IrOp **bufs;      /* ops with smem.* attributes, for the overlap check */
    int nbufs, capbufs;
    int npingpong;          /* dots with pingpong = 1 */
} Verifier;

/* ---- reporting (the IR verifier's format) ---- */
static bool bad(Verifier *V, const IrOp *op, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static bool bad(Verifier *V, const IrOp *op, const char *fmt, ...)
{
    if (V->nerr++ >= MAX_ERRORS) return false;
    if (op)
        sb_printf(V->err, "internal error: verifier: %s at %d:%d: ", ir_op_info[op->op].name, op->loc.line,
                  op->loc.col);
    else
        sb_printf(V->err, "internal error: verifier: kernel @%s at %d:%d: ", V->f->name ? V->f->name : "?",
                  V->f->loc.line, V->f->loc.col);
    va_list ap;
    va_start(ap, fmt);
    sb_vprintf(V->err, fmt, ap);
    va_end(ap);
    sb_putc(V->err, '\n');
    return false;
}

/* ---- per op ---- */

static bool attr_int_in(Verifier *V, const IrOp *op, const char *name, int64_t lo, int64_t hi)
{
    const IrAttr *a = ir_attr_get(&op->attrs, name);
    if (!a) return true;
    if (a->n != 1 || a->list || a->v[0] < lo || a->v[0] > hi) {
        bad(V, op, "attribute %s must be one integer in [%lld, %lld]", name, (long long)lo, (long long)hi);
        return false;
    }
    return true;
}

/* Whether `v` is a convert_layout (in `body`) of a pipelined load of `body`. */
static bool from_stage_slot(const IrValue *v, const IrBlock *body)
{
    const IrOp *cv = v->def;
    if (!cv || cv->op != IR_CONVERT_LAYOUT || cv->parent != body || cv->nargs != 1) return false;
    const IrOp *ld = cv->args[0]->def;
    return ld && ld->op == IR_LOAD && ld->parent == body && ir_attr_get(&ld->attrs, IR_ATTR_SLOT_BYTES);
}

/* wgmma.pending on a dot: the invariants that make leaving its group in
 * flight across the back edge safe (pass_pipeline.c): a wgmma kernel; the
 * dot directly in a loop pipelined over >= 3 stages (the copies then run
 * S - 2 iterations ahead, so the slot the in-flight group reads is not the
 * one being refilled), the only such dot there; both operands read from that
 * loop's stage slots; its accumulator loop-carried and its result used only
 * by the yield that carries it (nothing reads the registers in flight). */
static void check_mma_pending(Verifier *V, const IrOp *op, const IrBlock *b)
{
    if (!attr_int_in(V, op, IR_ATTR_MMA_PENDING, 1, 1)) return;
    const IrOp *loop = b->parent_op;
    if (op->op != IR_DOT) { bad(V, op, "wgmma.pending on a non-dot"); return; }
    if (ir_attr_int(&V->f->attrs, IR_ATTR_WGMMA, 0) != 1) bad(V, op, "wgmma.pending in a kernel without wgmma = 1");
    if (!loop || loop->op != IR_FOR || ir_attr_int(&loop->attrs, IR_ATTR_STAGES, 0) < 3) {
        bad(V, op, "wgmma.pending on a dot not directly in a loop pipelined over 3 or more stages");
        return;
    }
    if (!from_stage_slot(op->args[0], b) || !from_stage_slot(op->args[1], b))
        bad(V, op, "wgmma.pending on a dot whose operands are not the loop's pipelined loads");
    const IrValue *acc = op->args[2];
    const IrOp *y = b->last;
    int k = acc->block == b ? acc->index - 1 : -1, uses = 0;
    for (const IrOp *x = b->first; x; x = x->next) {
        for (int i = 0; i < x->nargs; i++) uses += x->args[i] == op->res[0];
        if (x != op && ir_attr_get(&x->attrs, IR_ATTR_MMA_PENDING)) bad(V, op, "two wgmma.pending dots in one loop");
    }
    if (k < 0 || !y || y->op != IR_YIELD || k >= y->nargs || y->args[k] != op->res[0] || uses != 1)
        bad(V, op, "wgmma.pending on a dot whose accumulator is not loop-carried and used only by its yield");
}

/* pipeline.mbarrier (pass_pipeline.c): only on a pipelined loop; a loop's own
 * smem.* buffer holds its 2 x stages mbarriers (full[s], empty[s], 8 bytes
 * each), so it is at least 16 x stages bytes, and no other loop has one. */
static void check_mbarrier(Verifier *V, const IrOp *op)
{
    const IrAttrList *at = &op->attrs;
    bool mb = ir_attr_get(at, IR_ATTR_MBARRIER) != NULL;
    if (mb && (op->op != IR_FOR || !ir_attr_get(at, IR_ATTR_STAGES)))
        bad(V, op, "pipeline.mbarrier on an op that is not a pipelined loop");
    attr_int_in(V, op, IR_ATTR_MBARRIER, 1, 1);
    if (op->op != IR_FOR || !ir_attr_get(at, IR_ATTR_SMEM_BYTES)) return;
    if (!mb) bad(V, op, "smem.* on a loop without pipeline.mbarrier");
    else if (ir_attr_int(at, IR_ATTR_SMEM_BYTES, 0) < 16 * ir_attr_int(at, IR_ATTR_STAGES, 0))
        bad(V, op, "its mbarriers (smem.bytes) need 16 x pipeline.stages = %lld bytes",
            (long long)(16 * ir_attr_int(at, IR_ATTR_STAGES, 0)));
}

/* tma.map = k (pass_tma.c): a pipelined load of an mbarrier loop in a wgmma
 * kernel with tma.maps > k; the loop's pipelined loads all have one (a full
 * barrier counts one kind of arrival), each k once. */
static void check_tma(Verifier *V, const IrOp *op, const IrBlock *b)
{
    if (!ir_attr_get(&op->attrs, IR_ATTR_TMA_MAP)) return;
    int64_t maps = ir_attr_int(&V->f->attrs, IR_ATTR_TMA_MAPS, 0);
    if (maps < 1) {
        bad(V, op, "tma.map in a kernel without tma.maps");
        return;
    }
    if (!attr_int_in(V, op, IR_ATTR_TMA_MAP, 0, maps - 1)) return;
    const IrOp *loop = b->parent_op;
    if (op->op != IR_LOAD || !ir_attr_get(&op->attrs, IR_ATTR_SLOT_BYTES) || !loop ||
        ir_attr_int(&loop->attrs, IR_ATTR_MBARRIER, 0) != 1) {
        bad(V, op, "tma.map on an op that is not a pipelined load of a pipeline.mbarrier loop");
        return;
    }
    if (ir_attr_int(&V->f->attrs, IR_ATTR_WGMMA, 0) != 1) bad(V, op, "tma.map in a kernel without wgmma = 1");
    int64_t k = ir_attr_int(&op->attrs, IR_ATTR_TMA_MAP, -1);
    for (const IrOp *x = b->first; x; x = x->next) {
        if (!ir_attr_get(&x->attrs, IR_ATTR_SLOT_BYTES)) continue;
        if (!ir_attr_get(&x->attrs, IR_ATTR_TMA_MAP)) bad(V, x, "a pipelined load without tma.map in a loop with TMA loads");
        else if (x != op && ir_attr_int(&x->attrs, IR_ATTR_TMA_MAP, -1) == k) bad(V, x, "tma.map = %lld twice", (long long)k);
    }
}

/* Whether `v` is defined outside loop body `b` (not one of its arguments, not
 * by one of its ops: SSA scoping leaves only values from enclosing blocks). */
static bool outside_body(const IrValue *v, const IrBlock *b)
{
    return v->block != b && (!v->def || v->def->parent != b);
}

/* wgmma.overlap on a dot (pass_dot_overlap.c): its group stays in flight
 * until the next dot of its loop body, whose wait retires it (the registers
 * pass through that wait). Safe when: a wgmma kernel; the dot directly in a
 * pipelined loop; each operand either this loop's stage slot (refilled only
 * at the top of a later iteration, after the retiring wait) or defined
 * outside the loop (its SRAM tile is live across the whole loop, so no
 * scratch placed between the two dots can overwrite it); its accumulator
 * from outside the loop; its result used only by the yield (nothing reads
 * the registers in flight); a later dot in the body, not itself overlapped,
 * with no region op before it (every path reaches the retiring wait). */
static void check_mma_overlap(Verifier *V, const IrOp *op, const IrBlock *b)
{
    if (!attr_int_in(V, op, IR_ATTR_MMA_OVERLAP, 1, 1)) return;
    const IrOp *loop = b->parent_op;
    if (op->op != IR_DOT) { bad(V, op, "wgmma.overlap on a non-dot"); return; }
    if (ir_attr_int(&V->f->attrs, IR_ATTR_WGMMA, 0) != 1) bad(V, op, "wgmma.overlap in a kernel without wgmma = 1");
    if (!loop || loop->op != IR_FOR || !ir_attr_get(&loop->attrs, IR_ATTR_STAGES)) {
        bad(V, op, "wgmma.overlap on a dot not directly in a pipelined loop");
        return;
    }
    if (ir_attr_get(&op->attrs, IR_ATTR_MMA_PENDING)) bad(V, op, "wgmma.overlap and wgmma.pending on one dot");
    for (int i = 0; i < 2; i++)
        if (!from_stage_slot(op->args[i], b) && !outside_body(op->args[i], b))
            bad(V, op, "wgmma.overlap on a dot whose operand %d is neither the loop's pipelined load nor defined "
                "outside the loop", i);
    if (!outside_body(op->args[2], b)) bad(V, op, "wgmma.overlap on a dot whose accumulator is defined in the loop");
    const IrOp *y = b->last;
    int uses = 0, at_yield = 0;
    for (const IrOp *x = b->first; x; x = x->next)
        for (int i = 0; i < x->nargs; i++)
            if (x->args[i] == op->res[0]) uses++, at_yield += x == y && y->op == IR_YIELD;
    if (uses != 1 || at_yield != 1) bad(V, op, "wgmma.overlap on a dot whose result is used other than by the yield");
    const IrOp *next = op->next;
    while (next && next->op != IR_DOT && !next->nregions) next = next->next;
    if (!next || next->op != IR_DOT)
        bad(V, op, "wgmma.overlap on a dot with no later dot in its loop body before any region op to retire it");
    else if (ir_attr_get(&next->attrs, IR_ATTR_MMA_OVERLAP) || ir_attr_get(&next->attrs, IR_ATTR_MMA_PENDING))
        bad(V, next, "a dot that retires a wgmma.overlap group is itself in flight");
}

/* wgmma.e4m3 (pass_accelerate_dot.c): only on a dot of two f8e4m3 operands
 * into f32 of a wgmma kernel, in wgmma's warp grid (#mma<C, wm = num_warps,
 * wn = 1>) and a tile FP8 wgmma takes (gp_wgmma_e4m3_ok); and every f8e4m3
 * dot on tensor cores carries it (codegen has no other e4m3 tensor-core path:
 * a pass that copies such a dot must keep the attribute). */
static void check_wgmma_e4m3(Verifier *V, const IrOp *op)
{
    bool marked = ir_attr_get(&op->attrs, IR_ATTR_WGMMA_E4M3) != NULL;
    GpMmaFrag frag;
    int wm = 0, wn = 0;
    bool mma = op->op == IR_DOT && gp_layout_is_mma(V->f, op->res[0]->layout, &frag, &wm, &wn) && frag == GP_MMA_C;
    if (!marked) {
        if (mma && op->args[0]->type.elem == IR_F8E4M3)
            bad(V, op, "an f8e4m3 dot on tensor cores without wgmma.e4m3 (FP8 wgmma is the only e4m3 lowering)");
        return;
    }
    if (!attr_int_in(V, op, IR_ATTR_WGMMA_E4M3, 1, 1)) return;
    if (op->op != IR_DOT) { bad(V, op, "wgmma.e4m3 on a non-dot"); return; }
    const IrType *ta = &op->args[0]->type, *tb = &op->args[1]->type, *tc = &op->res[0]->type;
    if (ta->elem != IR_F8E4M3 || tb->elem != IR_F8E4M3 || tc->elem != IR_F32 || tc->rank != 2) {
        bad(V, op, "wgmma.e4m3 on a dot that is not f8e4m3 x f8e4m3 -> f32");
        return;
    }
    if (!ir_attr_int(&V->f->attrs, IR_ATTR_WGMMA, 0)) bad(V, op, "wgmma.e4m3 on a dot of a kernel without wgmma");
    int W = V->f->sched.num_warps;
    if (!mma || wm != W || wn != 1)
        bad(V, op, "wgmma.e4m3 on a dot whose result is not in wgmma's grid #mma<C, wm=%d, wn=1>", W);
    else if (!gp_wgmma_e4m3_ok(tc->shape[0], tc->shape[1], ta->shape[1], W))
        bad(V, op, "wgmma.e4m3 on a %dx%dx%d dot on %d warps: FP8 wgmma needs M %% (16 x warps) = 0, N <= 256, "
                   "K %% 128 = 0", tc->shape[0], tc->shape[1], ta->shape[1], W);
}

/* pipeline.*, smem.*, mma.deferred, wgmma.pending, wgmma.overlap on one op (ir.h lists them). */
static void check_gpu_attrs(Verifier *V, const IrOp *op, const IrBlock *b)
{
    const IrAttrList *at = &op->attrs;
    if (ir_attr_get(at, IR_ATTR_STAGES) || ir_attr_get(at, IR_ATTR_ISSUE)) {
        int before = 0;
        for (const IrOp *x = op->prev; x; x = x->prev) before++;
        if (op->op != IR_FOR || !ir_attr_get(at, IR_ATTR_STAGES)) bad(V, op, "pipeline.stages/issue on a non-loop or alone");
        attr_int_in(V, op, IR_ATTR_STAGES, 2, IR_MAX_PIPE_STAGES);
        attr_int_in(V, op, IR_ATTR_ISSUE, 0, before);
    }
    check_mbarrier(V, op);
    check_tma(V, op, b);
    if (ir_attr_get(at, IR_ATTR_SLOT_BYTES)) {
        const IrOp *loop = b->parent_op;
        if (op->op != IR_LOAD || !loop || loop->op != IR_FOR || !ir_attr_get(&loop->attrs, IR_ATTR_STAGES))
            bad(V, op, "pipeline.slot_bytes on an op that is not a load in the body of a pipelined loop");
        attr_int_in(V, op, IR_ATTR_SLOT_BYTES, 1, INT32_MAX);
        int64_t need;
        if (!sup_mul_i64(ir_attr_int(at, IR_ATTR_SLOT_BYTES, 0), ir_attr_int(loop ? &loop->attrs : at, IR_ATTR_STAGES, 0),
                         &need))
            need = INT64_MAX;
        if (ir_attr_get(at, IR_ATTR_SMEM_BYTES) && ir_attr_int(at, IR_ATTR_SMEM_BYTES, 0) < need)
            bad(V, op, "its stage buffer (smem.bytes) is smaller than stages x slot_bytes = %lld", (long long)need);
    }
    if (ir_attr_get(at, IR_ATTR_PINGPONG)) {
        if (op->op != IR_DOT) bad(V, op, "pingpong on a non-dot");
        else if (!ir_attr_get(&V->f->attrs, IR_ATTR_PINGPONG))
            bad(V, op, "pingpong on a dot of a kernel without pingpong");
        attr_int_in(V, op, IR_ATTR_PINGPONG, 1, 1);
        V->npingpong++;
    }
    if (ir_attr_get(at, IR_ATTR_DEFERRED) && op->op != IR_CONVERT_LAYOUT) bad(V, op, "mma.deferred on a non-convert");
    attr_int_in(V, op, IR_ATTR_DEFERRED, 0, 1);
    if (ir_attr_get(at, IR_ATTR_MMA_PENDING)) check_mma_pending(V, op, b);
    if (ir_attr_get(at, IR_ATTR_MMA_OVERLAP)) check_mma_overlap(V, op, b);
    if (op->op == IR_DOT || ir_attr_get(at, IR_ATTR_WGMMA_E4M3)) check_wgmma_e4m3(V, op);
    bool o = ir_attr_get(at, IR_ATTR_SMEM_OFFSET), n = ir_attr_get(at, IR_ATTR_SMEM_BYTES);
    const IrAttr *live = ir_attr_get(at, IR_ATTR_SMEM_LIVE);
    if (ir_attr_get(at, IR_ATTR_SMEM_VIEW)) {
        /* reads another convert's tile: no buffer of its own */
        if (op->op != IR_CONVERT_LAYOUT || !ir_attr_int(at, IR_ATTR_DEFERRED, 0) || o || n || live)
            bad(V, op, "smem.view on an op that is not a deferred convert_layout without smem.offset/bytes/live");
        else if (attr_int_in(V, op, IR_ATTR_SMEM_VIEW, 0, INT32_MAX) && ir_attr_int(at, IR_ATTR_SMEM_VIEW, 0) % 16)
            bad(V, op, "smem.view is not 16-byte aligned");
        return;
    }
    if (!o && !n && !live) return;
    if (!o || !n || !live) { bad(V, op, "smem.offset, smem.bytes and smem.live come together"); return; }
    bool ok = attr_int_in(V, op, IR_ATTR_SMEM_OFFSET, 0, INT32_MAX) && attr_int_in(V, op, IR_ATTR_SMEM_BYTES, 1, INT32_MAX);
    if (ok && ir_attr_int(at, IR_ATTR_SMEM_OFFSET, 0) % 16) { bad(V, op, "smem.offset is not 16-byte aligned"); ok = false; }
    if (live->n != 2 || live->v[0] < 0 || live->v[0] > live->v[1]) {
        bad(V, op, "smem.live must be [first, last] op positions");
        ok = false;
    }
    if (!ok) return;
    if (V->nbufs == V->capbufs) {
        int nc = V->capbufs ? 2 * V->capbufs : 16;
        const IrOp **nb = ARENA_ARRAY(V->arena, const IrOp *, nc);
        if (V->nbufs) memcpy(nb, V->bufs, sizeof *nb * (size_t)V->nbufs);
        V->bufs = nb;
        V->capbufs = nc;
    }
    V->bufs[V->nbufs++] = op;
}

/* Every buffer inside the kernel's smem; no two live at once share a byte. */
static void check_sram(Verifier *V)
{
    const IrAttrList *ka = &V->f->attrs;
    int64_t total = ir_attr_int(ka, IR_ATTR_SMEM, -1);
    if (V->nbufs && total < 0) bad(V, NULL, "buffers with smem.* but no kernel attribute smem");
    for (int i = 0; i < V->nbufs; i++) {
        const IrOp *a = V->bufs[i];
        int64_t ao = ir_attr_int(&a->attrs, IR_ATTR_SMEM_OFFSET, 0), an = ir_attr_int(&a->attrs, IR_ATTR_SMEM_BYTES, 0);
        const IrAttr *al = ir_attr_get(&a->attrs, IR_ATTR_SMEM_LIVE);
        if (total >= 0 && ao + an > total)
            bad(V, a, "SRAM [%lld, %lld) ends past the kernel's smem = %lld", (long long)ao, (long long)(ao + an),
                (long long)total);
        for (int j = i + 1; j < V->nbufs; j++) {
            const IrOp *b = V->bufs[j];
            int64_t bo = ir_attr_int(&b->attrs, IR_ATTR_SMEM_OFFSET, 0), bn = ir_attr_int(&b->attrs, IR_ATTR_SMEM_BYTES, 0);
            const IrAttr *bl = ir_attr_get(&b->attrs, IR_ATTR_SMEM_LIVE);
            if (al->v[0] <= bl->v[1] && bl->v[0] <= al->v[1] && ao < bo + bn && bo < ao + an)
                bad(V, a, "SRAM [%lld, %lld) live %lld..%lld overlaps that of %s at %d:%d ([%lld, %lld) live %lld..%lld)",
                    (long long)ao, (long long)(ao + an), (long long)al->v[0], (long long)al->v[1],
                    ir_op_info[b->op].name, b->loc.line, b->loc.col, (long long)bo, (long long)(bo + bn),
                    (long long)bl->v[0], (long long)bl->v[1]);
        }
    }
    const IrAttr *w = ir_attr_get(ka, IR_ATTR_WGMMA);
    if (w && (w->n != 1 || w->v[0] < 0 || w->v[0] > 1)) bad(V, NULL, "attribute wgmma must be 0 or 1");
    if (total < -1 || (ir_attr_get(ka, IR_ATTR_SMEM) && total < 0)) bad(V, NULL, "attribute smem must be >= 0");
}

/* Warpgroup ping-pong (pass_pingpong.c): G = num_warps / 4 >= 2 warpgroups
 * take turns, on wgmma kernels, and at least one dot takes turns. */
static void check_pingpong(Verifier *V)
{
    const IrAttr *p = ir_attr_get(&V->f->attrs, IR_ATTR_PINGPONG);
    if (!p) return;
    int W = V->f->sched.num_warps;
    if (p->n != 1 || p->list || W % 4 || W / 4 < 2 || p->v[0] != W / 4)
        bad(V, NULL, "attribute pingpong must be num_warps / 4 >= 2 (num_warps = %d)", W);
    if (ir_attr_int(&V->f->attrs, IR_ATTR_WGMMA, 0) != 1) bad(V, NULL, "attribute pingpong needs wgmma = 1");
    if (!V->npingpong) bad(V, NULL, "attribute pingpong but no dot with pingpong = 1");
}

/* Pipelined loops in regions below the kernel's body. */
static const IrOp *nested_pipelined(const IrBlock *b, bool top)
{
    for (const IrOp *x = b->first; x; x = x->next) {
        if (!top && x->op == IR_FOR && ir_attr_get(&x->attrs, IR_ATTR_STAGES)) return x;
        for (int r = 0; r < x->nregions; r++) {
            const IrOp *n = nested_pipelined(x->regions[r], false);
            if (n) return n;
        }
    }
    return NULL;
}

/* warp_spec.producer_regs (--lean-producer): 24, and only where the producer issues TMA
 * copies alone (every pipelined load has its tensor map). */
static void check_ws_regs(Verifier *V)
{
    const IrAttr *r = ir_attr_get(&V->f->attrs, IR_ATTR_WS_REGS);
    if (!r) return;
    if (r->n != 1 || r->list || r->v[0] != GP_WS_LEAN_PRODUCER_REGS)
        bad(V, NULL, "attribute warp_spec.producer_regs must be %d", GP_WS_LEAN_PRODUCER_REGS);
    for (const IrOp *x = V->f->body ? V->f->body->first : NULL; x; x = x->next) {
        if (x->op != IR_FOR || !ir_attr_get(&x->attrs, IR_ATTR_STAGES)) continue;
        for (const IrOp *o = x->regions[0]->first; o; o = o->next)
            if (ir_attr_get(&o->attrs, IR_ATTR_SLOT_BYTES) && !ir_attr_get(&o->attrs, IR_ATTR_TMA_MAP))
                bad(V, o, "warp_spec.producer_regs with a pipelined load that is not a TMA copy");
    }
}

/* Warp specialisation (pass_warp_specialize.c): on wgmma kernels of whole consumer
 * warpgroups plus the producer's (num_warps + 4 <= 32); every pipelined loop is an op of
 * the kernel's body, runs once per CTA in program order on both sides, and hands its
 * stages over through mbarriers (the producer's only way to the consumers), and there is
 * at least one. */
static void check_warp_spec(Verifier *V)
{
    const IrAttr *p = ir_attr_get(&V->f->attrs, IR_ATTR_WARP_SPEC);
    if (!p) {
        if (ir_attr_get(&V->f->attrs, IR_ATTR_WS_REGS)) bad(V, NULL, "attribute warp_spec.producer_regs needs warp_spec");
        return;
    }
    int W = V->f->sched.num_warps, loops = 0;
    if (p->n != 1 || p->list || p->v[0] != 1) bad(V, NULL, "attribute warp_spec must be 1");
    if (W % 4 || W + 4 > 32) bad(V, NULL, "attribute warp_spec needs num_warps a multiple of 4 up to 28 (num_warps = %d)", W);
    if (ir_attr_int(&V->f->attrs, IR_ATTR_WGMMA, 0) != 1) bad(V, NULL, "attribute warp_spec needs wgmma = 1");
    const IrOp *n = V->f->body ? nested_pipelined(V->f->body, true) : NULL;
    if (n) bad(V, n, "warp_spec with a pipelined loop that is not an op of the kernel's body");
    for (const IrOp *x = V->f->body ? V->f->body->first : NULL; x; x = x->next) {
        if (x->op != IR_FOR || !ir_attr_get(&x->attrs, IR_ATTR_STAGES)) continue;
        loops++;
        if (!ir_attr_get(&x->attrs, IR_ATTR_MBARRIER)) bad(V, x, "warp_spec with a pipelined loop without pipeline.mbarrier");
    }
    if (!loops) bad(V, NULL, "attribute warp_spec but no pipelined loop");
    check_ws_regs(V);
}

/* ---- the walk ---- */

static void walk(Verifier *V, const IrBlock *b)
{
    for (const IrOp *op = b->first; op && V->nerr < MAX_ERRORS; op = op->next) {
        for (int r = 0; r < op->nregions; r++) walk(V, op->regions[r]);
        check_gpu_attrs(V, op, b);
    }
}

/* The buffer list's arena: static per thread rather than a local, as the IR
 * verifier's (compiler/ir/verify.c): an allocation failing inside a compile
 * unwinds past this frame (support.h), and only an object outside it can
 * still be freed then. */
static _Thread_local Arena scratch_arena;

bool gp_verify_schedule(const IrFunc *f, StrBuf *err)
{
    Verifier V;
    memset(&V, 0, sizeof V);
    V.f = f;
    V.err = err;
    arena_init(&scratch_arena);
    V.arena = &scratch_arena;
    SupOomCatch oom;
    if (!SUP_OOM_TRY(&oom)) {
        arena_free(&scratch_arena);
        sup_oom_rethrow();
        return false;
    }
    if (f->body) walk(&V, f->body);
    check_sram(&V);
    check_pingpong(&V);
    check_warp_spec(&V);
    if (V.nerr > MAX_ERRORS) sb_printf(err, "internal error: verifier: %d more problems not shown\n", V.nerr - MAX_ERRORS);
    sup_oom_pop(&oom);
    arena_free(&scratch_arena);
    return V.nerr == 0;
}
