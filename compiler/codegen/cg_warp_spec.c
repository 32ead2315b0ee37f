/* cg_warp_spec.c — lowering of warp specialisation (the kernel attribute
 * `warp_spec = 1`; pass_warp_specialize.c decides it and states the protocol
 * and why it cannot deadlock).
 *
 * What it does: at the kernel's entry the CTA splits by warp. Warps
 * num_warps .. num_warps + 3 (the producer warpgroup, launched on top of the
 * kernel's own warps: codegen.c sets .maxntid and CgResult.num_warps) give
 * registers back (setmaxnreg.dec) and run a program of their own, emitted
 * here in full: the kernel-body ops the copies need, then per pipelined loop
 *     bar.sync 0                            (the consumers' mbarrier init)
 *     for j in 0 .. trips-1: wait empty[j % S] (phase (j/S + 1) & 1);
 *         issue(j) as every consumer warpgroup would; arrive.noinc full[j % S]
 *     bar.sync 0                            (the consumers' drain)
 * and exit. The consumer warps take the registers (setmaxnreg.inc) and lower
 * the body as with --mbarrier, minus the copies (cg_pipeline.c skips them
 * when ws_warps is set); their CTA barriers are named (cg_ws_barrier).
 *
 * The copies keep their layouts, which are for num_warps warps: producer
 * thread t stands in for consumer threads t, t + 128, ... in turn (its
 * tid/warp/lane are set to theirs and the ops are lowered once per stand-in,
 * each with its own value table), so the copy addresses, swizzles and
 * ownership are exactly what the consumers computed under --mbarrier, and
 * the producer's 128 threads issue all the copies. Each producer thread
 * arrives once per iteration: full counts 128 (cg_ws_full_count). With TMA
 * (--tma --warp-specialize) producer thread 0 alone waits for the empty slot
 * and issues the whole iteration's bulk copies with one expect_tx arrival
 * (cg_tma.c; full counts 1), FlashAttention-3's producer.
 *
 * Registers: the CTA holds R x 32 (num_warps + GP_WS_PRODUCER_WARPS) registers at launch, R the
 * most the thread count allows (65536 / threads, in 8s, at most 248), pinned
 * by .maxnreg R (codegen.c: with .maxntid alone ptxas may give the kernel
 * fewer, 129 at d = 64, and a setmaxnreg.inc past the CTA's pool never
 * returns); the consumers take what leaves the producer at least
 * CG_WS_PRODUCER_REGS, in multiples of 8, at most 256, the producer keeps the
 * rest up to 96: 56 / 224 at 8 consumer warps, 96 / 256 at 4. (At 40 the
 * producer of matmul_tc_f16's 128 x 256 x 64 tiles spilled 36 bytes.) A
 * producer of TMA copies alone (warp_spec.producer_regs, --lean-producer)
 * holds only scalars and keeps 24: 24 / 240 at 8 consumer warps (FA3's).
 *
 * Invariants: nothing here runs for a kernel without the attribute (the PTX
 * of every other kernel is unchanged); the role branch and the setmaxnreg
 * instructions are warpgroup-uniform (num_warps is a multiple of 4).
 */
#include "cg_internal.h"
#include "../gpuir/gpuir.h"

#include <stdio.h>

#define WS_PRODUCER_THREADS (32 * GP_WS_PRODUCER_WARPS)

int cg_ws_entry_regs(int num_warps)
{
    int r = 65536 / (32 * (num_warps + GP_WS_PRODUCER_WARPS));
    if (r > 255) r = 255;
    return r / 8 * 8;
}

/* The least the producer keeps: CG_WS_PRODUCER_REGS, or the kernel's
 * warp_spec.producer_regs (--lean-producer, a TMA-only producer: 24). */
int cg_ws_producer_min(const IrFunc *f)
{
    return (int)ir_attr_int(&f->attrs, IR_ATTR_WS_REGS, CG_WS_PRODUCER_REGS);
}

/* The consumers take what the CTA's pool holds once the producer has at least
 * `pmin` (cg_ws_producer_min), at most setmaxnreg's 256 (a thread addresses 255). */
int cg_ws_consumer_regs(int num_warps, int pmin)
{
    int pool = cg_ws_entry_regs(num_warps) * 32 * (num_warps + GP_WS_PRODUCER_WARPS) - pmin * WS_PRODUCER_THREADS;
    int r = pool / (32 * num_warps) / 8 * 8;
    return r > 256 ? 256 : r;
}

/* The producer keeps what the consumers leave (one consumer warpgroup at 256 leaves more than
 * it needs: at most 96). */
int cg_ws_producer_regs(int num_warps, int pmin)
{
    int pool = cg_ws_entry_regs(num_warps) * 32 * (num_warps + GP_WS_PRODUCER_WARPS) - cg_ws_consumer_regs(num_warps, pmin) * 32 * num_warps;
    int r = pool / WS_PRODUCER_THREADS / 8 * 8;
    return r > 96 ? 96 : r;
}

int cg_ws_full_count(const CgCtx *c) { return c->ws_warps ? WS_PRODUCER_THREADS : 32 * c->f->sched.num_warps; }

/* After ping-pong's barriers 1..G (cg_pingpong.c), if any. */
static int barrier_id(const CgCtx *c) { return 1 + (int)ir_attr_int(&c->f->attrs, IR_ATTR_PINGPONG, 0); }

void cg_ws_barrier(CgCtx *c)
{
    char text[48];
    snprintf(text, sizeof text, "bar.sync %d, %d;", barrier_id(c), 32 * c->ws_warps);
    cg_asm(c, c->t_void, text, "~{memory}", 0, NULL, true);
}

static void setmaxnreg(CgCtx *c, bool inc, int regs)
{
    char text[64];
    snprintf(text, sizeof text, "setmaxnreg.%s.sync.aligned.u32 %d;", inc ? "inc" : "dec", regs);
    cg_asm(c, c->t_void, text, "~{memory}", 0, NULL, true);
}

/* The producer thread stands in for consumer thread ptid + 128 g, with its value table. */
static void stand_in(CgCtx *c, CgTile **vals, int g, LLVMValueRef ptid)
{
    c->vals = vals[g];
    c->tid = LLVMBuildAdd(c->b, ptid, cg_i32(c, WS_PRODUCER_THREADS * g), "");
    c->lane = LLVMBuildAnd(c->b, c->tid, cg_i32(c, 31), "");
    c->warp = LLVMBuildLShr(c->b, c->tid, cg_i32(c, 5), "");
}

/* One pipelined loop's copies, every iteration, each after its slot's release. */
static bool producer_loop(CgCtx *c, IrOp *op, CgTile **vals, int G, LLVMValueRef ptid)
{
    GpPipeLoop *pl = gp_pipeline_of_loop(c->tc, op);
    if (!pl || !pl->mbarrier) {
        INTERNAL_ERROR("codegen: %s:%d: a warp_spec loop without its mbarrier plan", c->f->name, op->loc.line);
        c->failed = true;
        return false;
    }
    IrElem ie = (IrElem)op->args[0]->type.elem;
    LLVMTypeRef it = cg_type(c, ie);
    stand_in(c, vals, 0, ptid);
    LLVMValueRef lo = cg_get(c, op->args[0])->r[0], hi = cg_get(c, op->args[1])->r[0];
    LLVMValueRef step = cg_get(c, op->args[2])->r[0];
    cg_barrier_cta(c);   /* the consumers' mbarrier init (cg_mbar_init) */
    LLVMBasicBlockRef pre = LLVMGetInsertBlock(c->b);
    LLVMBasicBlockRef header = cg_block(c, "ws_header"), bb = cg_block(c, "ws_body"), exit = cg_block(c, "ws_exit");
    LLVMBuildBr(c->b, header);
    LLVMPositionBuilderAtEnd(c->b, header);
    LLVMValueRef iv = LLVMBuildPhi(c->b, it, "ws.iv"), j = LLVMBuildPhi(c->b, c->t_i32, "ws.j");
    LLVMBuildCondBr(c->b, LLVMBuildICmp(c->b, ir_elem_is_signed(ie) ? LLVMIntSLT : LLVMIntULT, iv, hi, ""), bb, exit);
    LLVMPositionBuilderAtEnd(c->b, bb);
    LLVMValueRef slot = LLVMBuildURem(c->b, j, cg_i32(c, pl->stages), "");
    cg_mbar_wait_empty(c, pl, slot, j);   /* iteration j - S has released the slot (TMA: producer thread 0) */
    /* TMA: producer thread 0, standing in for consumer thread 0, copies every tile with
     * one expect_tx arrival (cg_tma_issue); cp.async: every stand-in its share, then each
     * producer thread's one arrival */
    for (int g = 0; g < (pl->tma ? 1 : G); g++) {
        stand_in(c, vals, g, ptid);
        if (!cg_pipeline_issue(c, pl, iv, LLVMConstInt(c->t_i1, 1, 0), slot)) return false;
    }
    if (!pl->tma) cg_mbar_arrive_copies(c, pl, slot);
    LLVMValueRef next = LLVMBuildAdd(c->b, iv, step, ""), jn = LLVMBuildAdd(c->b, j, cg_i32(c, 1), "");
    LLVMBasicBlockRef latch = LLVMGetInsertBlock(c->b);
    LLVMBuildBr(c->b, header);
    LLVMValueRef zero = cg_i32(c, 0);
    LLVMAddIncoming(iv, &lo, &pre, 1);
    LLVMAddIncoming(iv, &next, &latch, 1);
    LLVMAddIncoming(j, &zero, &pre, 1);
    LLVMAddIncoming(j, &jn, &latch, 1);
    LLVMPositionBuilderAtEnd(c->b, exit);
    cg_barrier_cta(c);   /* the consumers' drain (cg_mbar_drain): then they invalidate */
    return true;
}

static bool needed(const IrOp *op, const bool *need)
{
    for (int i = 0; i < op->nres; i++)
        if (need[op->res[i]->id]) return true;
    return false;
}

/* The producer warpgroup's whole program, ending in its exit. */
static bool producer(CgCtx *c)
{
    IrFunc *f = c->f;
    int G = c->ws_warps / 4;
    bool *need = ARENA_ARRAY(c->arena, bool, f->next_id + 1);
    if (!gp_ws_needed(f, need)) {
        INTERNAL_ERROR("codegen: %s: warp_spec on a kernel the pass refuses", f->name);
        return false;
    }
    CgTile *own = c->vals, **vals = ARENA_ARRAY(c->arena, CgTile *, G);
    LLVMValueRef tid = c->tid, lane = c->lane, warp = c->warp;
    LLVMValueRef ptid = LLVMBuildSub(c->b, tid, cg_i32(c, 32 * c->ws_warps), "ptid");
    for (int g = 0; g < G; g++) {
        vals[g] = ARENA_ARRAY(c->arena, CgTile, f->next_id + 1);
        for (int i = 0; i < f->nparams; i++) vals[g][f->params[i]->id] = own[f->params[i]->id];
    }
    c->ws_producer = true;
    bool ok = true;
    for (IrOp *op = f->body->first; op && ok && !c->failed; op = op->next) {
        if (op->op == IR_FOR && gp_pipeline_of_loop(c->tc, op)) {
            ok = producer_loop(c, op, vals, G, ptid);
            continue;
        }
        for (int g = 0; g < G && ok && needed(op, need); g++) {
            stand_in(c, vals, g, ptid);
            ok = cg_lower_op(c, op);
        }
    }
    c->ws_producer = false;
    c->vals = own;
    c->tid = tid, c->lane = lane, c->warp = warp;
    c->npending = 0;   /* the producer's barriers are not the consumers' bookkeeping */
    LLVMBuildRetVoid(c->b);
    return ok && !c->failed;
}

void cg_ws_entry(CgCtx *c)
{
    int W = c->ws_warps;   /* build_kernel read the kernel's warp_spec */
    if (!W) return;
    LLVMBasicBlockRef prod = cg_block(c, "ws_producer"), cons = cg_block(c, "ws_consumer");
    LLVMBuildCondBr(c->b, LLVMBuildICmp(c->b, LLVMIntUGE, c->warp, cg_i32(c, W), ""), prod, cons);
    LLVMPositionBuilderAtEnd(c->b, prod);
    int pmin = cg_ws_producer_min(c->f);
    setmaxnreg(c, false, cg_ws_producer_regs(W, pmin));
    if (!producer(c)) c->failed = true;
    LLVMPositionBuilderAtEnd(c->b, cons);
    setmaxnreg(c, true, cg_ws_consumer_regs(W, pmin));
}
