/* pass_warp_specialize.c — producer/consumer warp specialisation on sm_90a: a
 * producer warpgroup, added to the kernel's num_warps, issues every pipelined
 * loop's copies while the num_warps consumer warps only wait for the stages,
 * compute and release them; `setmaxnreg` moves the producer's registers to
 * the consumers (FlashAttention-3's and CUTLASS's warp-specialised kernels).
 * A schedule option (GpPassCtx.warp_specialize: kiln compile
 * --warp-specialize, KilnCompileOptions.warp_specialize), never the
 * program's choice; it implies --mbarrier (codegen.c), whose full/empty
 * mbarriers are the hand-off between the two roles.
 *
 * What it decides (the lowering, cg_warp_spec.c, does the rest): the kernel
 * gets `warp_spec = 1` when the option is on and ws_refusal finds nothing:
 *   - sm_90a with wgmma (`wgmma = 1`): setmaxnreg is sm_90a's;
 *   - num_warps a multiple of 4 (consumers are whole warpgroups), and
 *     num_warps + 4 <= 32;
 *   - at least one pipelined loop, and every pipelined loop (pipeline.stages)
 *     is an op of the kernel's own body (not nested in a loop or branch) and
 *     hands its stages over through mbarriers (pipeline.mbarrier: sram-alloc
 *     drops it for bodies with SRAM buffers of their own);
 *   - the producer can compute what the copies need: each loop's bounds and
 *     the values from outside the loop its copy slice reads come from the
 *     kernel's parameters through ops of the kernel body that are pure,
 *     hold no SRAM (no smem.* scratch: no conversion or reduction through
 *     SRAM) and are not dots or reductions, or loads when nothing before the
 *     last pipelined loop writes memory (varlen's cu_seqlens reads); the
 *     slice inside the loop likewise (no SRAM, no dot).
 * Anything else leaves the kernel unchanged (no attribute); --stats then says
 * why (gp_ws_refusal, "warp-specialize: not applied: ...").
 *
 * The protocol the attribute stands for (W = num_warps, G = W / 4; threads
 * 0 .. 32 W - 1 are the consumers, the last 128 the producer):
 *     entry:     warp >= W: setmaxnreg.dec P, the producer below, exit
 *                else:      setmaxnreg.inc C (C * 32 W + P * 128 fits the
 *                           registers the CTA has at launch: 224 / 56 at
 *                           W = 8, 256 / 96 at W = 4; cg_warp_spec.c)
 *     producer:  the needed ops of the body (each for the G consumer
 *                warpgroups whose layouts it stands in for: a producer thread
 *                t plays consumer threads t, t + 128, ...), and per pipelined
 *                loop in program order:
 *                   bar.sync 0                  -- the consumers' mbarrier init
 *                   for j < trips: wait empty[j % S]; issue(j) for every
 *                       stand-in; cp.async.mbarrier.arrive.noinc full[j % S]
 *                   bar.sync 0                  -- the consumers' drain
 *     consumers: the kernel as with --mbarrier, without any copy: wait full,
 *                compute, release empty; full counts the producer's 128
 *                arrivals, empty the consumers' 32 W; every other CTA barrier
 *                is `bar.sync B, 32 W` on a named barrier B (1, or G' + 1
 *                after ping-pong's barriers 1..G'), which the producer (gone
 *                or elsewhere) never reaches.
 * Why it cannot deadlock: both roles run the pipelined loops in the same
 * order, each exactly once (top-level ops; control flow is CTA-uniform), so
 * the two `bar.sync 0` per loop match; within a loop the producer waits only
 * for releases of iterations the consumers compute without waiting for
 * anything but full phases the producer has already armed (S stages ahead).
 *
 * With --lean-producer (GpPassCtx.sched.lean_producer) and every pipelined
 * load a TMA copy (tma.map: the producer's thread 0 issues bulk copies from
 * scalar coordinates, no address tile lives in the producer), the kernel also
 * gets `warp_spec.producer_regs = 24`: the producer keeps setmaxnreg's least
 * and the consumers take the rest (240 at 8 consumer warps, FlashAttention-3's
 * split, against 56 / 224 without it).
 *
 * Invariants (ir_verify): `warp_spec = 1` needs `wgmma = 1`, num_warps a
 * multiple of 4 with num_warps + 4 <= 32, and at least one pipelined loop,
 * every one of them top-level and with pipeline.mbarrier;
 * `warp_spec.producer_regs` = 24 needs warp_spec and every pipelined load a
 * tma.map.
 *
 * Example (attention, BLOCK_M = 128, 8 warps, sm_90a, --warp-specialize):
 *     kernel @attn_fwd_f16(...) num_warps = 8 ... attributes {wgmma = 1, smem = ..., warp_spec = 1}
 *       %k = for ... {pipeline.stages = 2, pipeline.issue = 3, pipeline.mbarrier = 1, smem.offset = ...}
 * launches 12 warps (.maxntid 384, .maxnreg 168): 8 consumers at 224 registers, 4 producers at 56.
 */
#include "gpuir.h"

#include <stdio.h>

typedef struct WsCheck {
    IrFunc *f;
    bool *need;            /* by value id: the producer computes it */
    const char *why;       /* the first reason to refuse, or NULL */
    char buf[160];
    bool writes_before;    /* a memory write precedes the last pipelined loop */
} WsCheck;

static void refuse(WsCheck *w, const IrOp *op, const char *why)
{
    if (w->why) return;
    if (op) snprintf(w->buf, sizeof w->buf, "%s (line %d)", why, op->loc.line);
    else snprintf(w->buf, sizeof w->buf, "%s", why);
    w->why = w->buf;
}

static bool pipelined(const IrOp *op) { return op->op == IR_FOR && ir_attr_get(&op->attrs, IR_ATTR_STAGES); }

/* An op the producer may run: register-only, no side effects; a load only where nothing
 * before the last pipelined loop writes memory (so the producer, which runs none of the
 * consumers' writes, reads what they would). */
static bool producer_op(const WsCheck *w, const IrOp *op)
{
    if (op->nregions || op->op == IR_DOT || op->op == IR_REDUCE) return false;
    if (ir_attr_get(&op->attrs, IR_ATTR_SMEM_OFFSET) || ir_attr_get(&op->attrs, IR_ATTR_SLOT_BYTES)) return false;
    if (op->op == IR_LOAD) return !w->writes_before;
    return (ir_op_info[op->op].flags & IRF_PURE) != 0;
}

/* Mark `v` and, through the kernel body's ops, what it is computed from. */
static void need_value(WsCheck *w, IrValue *v)
{
    if (w->why || w->need[v->id]) return;
    w->need[v->id] = true;
    IrOp *d = v->def;
    if (!d) {
        if (v->block) refuse(w, NULL, "a copy reads a block argument of another region");
        return;   /* a parameter */
    }
    if (d->parent != w->f->body) refuse(w, d, "a copy reads a value defined inside another region");
    else if (d->op == IR_LOAD && w->writes_before)
        refuse(w, d, "a copy needs a load that follows a write to memory (the producer runs no writes)");
    else if (!producer_op(w, d)) refuse(w, d, "a copy needs a value the producer cannot compute (SRAM, a dot or a write)");
    for (int i = 0; i < d->nargs && !w->why; i++) need_value(w, d->args[i]);
}

/* A value a copy's address or mask reads: through the loop body's slice ops (the pipeline
 * plan checked they reach only the iv and outside values; its slice loads, a block table,
 * exist only in loops that write no memory) to the outside values the producer computes. */
static void need_slice_value(WsCheck *w, IrBlock *body, IrValue *v)
{
    if (w->why || v->block == body || w->need[v->id]) return;   /* the iv, or seen */
    IrOp *d = v->def;
    if (!d || d->parent != body) {
        need_value(w, v);
        return;
    }
    w->need[v->id] = true;
    if (d->op != IR_LOAD && !producer_op(w, d)) refuse(w, d, "a copy's address needs an op the producer cannot run");
    for (int i = 0; i < d->nargs; i++) need_slice_value(w, body, d->args[i]);
}

static void need_loop(WsCheck *w, IrOp *loop)
{
    IrBlock *body = loop->regions[0];
    for (int i = 0; i < 3; i++) need_value(w, loop->args[i]);
    for (IrOp *o = body->first; o && !w->why; o = o->next)
        if (ir_attr_get(&o->attrs, IR_ATTR_SLOT_BYTES))
            for (int i = 0; i < o->nargs; i++) need_slice_value(w, body, o->args[i]);
}

/* Whether `op` or an op of its regions writes memory. */
static bool writes(const IrOp *op)
{
    if (ir_op_info[op->op].flags & IRF_MEM_WRITE) return true;
    for (int r = 0; r < op->nregions; r++)
        for (const IrOp *x = op->regions[r]->first; x; x = x->next)
            if (writes(x)) return true;
    return false;
}

/* Pipelined loops below the kernel's own body. */
static const IrOp *nested_pipelined(const IrBlock *b, bool top)
{
    for (const IrOp *x = b->first; x; x = x->next) {
        if (!top && pipelined(x)) return x;
        for (int r = 0; r < x->nregions; r++) {
            const IrOp *n = nested_pipelined(x->regions[r], false);
            if (n) return n;
        }
    }
    return NULL;
}

static void ws_check(WsCheck *w)
{
    IrFunc *f = w->f;
    int W = f->sched.num_warps;
    const IrOp *nested = nested_pipelined(f->body, true), *last = NULL;
    for (const IrOp *x = f->body->first; x; x = x->next)
        if (pipelined(x)) last = x;
    if (ir_attr_int(&f->attrs, IR_ATTR_WGMMA, 0) != 1) refuse(w, NULL, "not an sm_90a wgmma kernel");
    if (W % 4 || W + GP_WS_PRODUCER_WARPS > 32) refuse(w, NULL, "num_warps is not a multiple of 4 up to 28");
    if (nested) refuse(w, nested, "a pipelined loop inside another loop or branch");
    if (!last) refuse(w, NULL, "no pipelined loop");
    if (w->why) return;
    for (const IrOp *x = f->body->first; x != last; x = x->next) w->writes_before |= writes(x);
    for (IrOp *x = f->body->first; x && !w->why; x = x->next) {
        if (!pipelined(x)) continue;
        if (ir_attr_int(&x->attrs, IR_ATTR_MBARRIER, 0) != 1)
            refuse(w, x, "a pipelined loop without the mbarrier hand-off (its body has SRAM buffers)");
        else need_loop(w, x);
    }
}

const char *gp_ws_refusal(IrFunc *f, char *buf, int n)
{
    WsCheck w = {.f = f, .need = ARENA_ARRAY(f->arena, bool, f->next_id + 1)};
    ws_check(&w);
    if (!w.why) return NULL;
    snprintf(buf, (size_t)n, "%s", w.why);
    return buf;
}

bool gp_ws_needed(IrFunc *f, bool *need)
{
    WsCheck w = {.f = f, .need = need};
    ws_check(&w);
    return !w.why;
}

/* Every pipelined loop's every copy has a tensor map (pass_tma.c ran before). */
static bool all_tma(const IrFunc *f)
{
    for (const IrOp *x = f->body->first; x; x = x->next) {
        if (!pipelined(x)) continue;
        for (const IrOp *o = x->regions[0]->first; o; o = o->next)
            if (ir_attr_get(&o->attrs, IR_ATTR_SLOT_BYTES) && !ir_attr_get(&o->attrs, IR_ATTR_TMA_MAP)) return false;
    }
    return true;
}

bool gp_pass_warp_specialize(IrFunc *f, const GpPassCtx *ctx, Diag *d)
{
    (void)d;
    char buf[160];
    if (!ctx->sched.warp_specialize || gp_ws_refusal(f, buf, (int)sizeof buf)) return true;
    ir_attr_set_int(f->arena, &f->attrs, IR_ATTR_WARP_SPEC, 1);
    /* --lean-producer: a producer of TMA copies alone holds scalars (the coordinates), so it
     * keeps setmaxnreg's least; with a cp.async loop it keeps the default (address tiles) */
    if (ctx->sched.lean_producer && all_tma(f))
        ir_attr_set_int(f->arena, &f->attrs, IR_ATTR_WS_REGS, GP_WS_LEAN_PRODUCER_REGS);
    return true;
}
