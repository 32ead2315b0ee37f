/* pass_tma.c — TMA copies for pipelined loads (the schedule option `tma`,
 * GpPassCtx.tma; sm_90a wgmma kernels). Runs after sram-alloc, when a loop's
 * mbarrier hand-off is final (sram-alloc drops pipeline.mbarrier from loops
 * whose bodies need CTA barriers anyway) and the stage slots are placed.
 *
 * What it decides. In a loop with pipeline.mbarrier, when EVERY pipelined
 * load is one a tiled tensor map reads exactly (gp_tma_plan, cg_tma.c:
 * pointer = kernel pointer parameter + I_inner + stride * I_outer (+ uniform
 * offsets coordinate x stride parameter: more dims, attention's batch/head), mask an AND
 * of I_d < bound_d with bounds that are parameters or constants, indices
 * provably non-negative, a 128-byte-swizzled slot of f16/bf16 whose
 * contiguous extent is a multiple of 64 and rows a multiple of 8 up to 256),
 * each load gets `tma.map = k` (its tensor map, numbered over the kernel) and
 * the kernel `tma.maps = N`. One load that does not fit keeps the whole loop
 * on cp.async: the full barriers then count every thread's arrival (a loop
 * of both would need two arrival kinds on one barrier).
 *
 * Invariants (ir_verify_gpu): tma.map only on a pipelined load of an
 * mbarrier loop, k < tma.maps, each k once, the kernel wgmma; every load of
 * such a loop has one. Lowering: cg_tma.c (the copies, the map parameters),
 * the runtime encodes each map at launch from the recipe the compile result
 * carries (docs/runtime.md, "Tensor-map parameters").
 *
 * Example (tools/bench/matmul_tc.tile, 128x256x64, 4 stages):
 *     %a = load %65, %79, %55 {pipeline.slot_bytes = 16384, ..., tma.map = 0} : tensor<128x64xf16, #L1>
 *     %b = load %83, %87, %61 {pipeline.slot_bytes = 32768, ..., tma.map = 1} : tensor<64x256xf16, #L2>
 * and the kernel {wgmma = 1, smem = ..., tma.maps = 2}: A through boxes of
 * 64 x 128 (one per stage), B through 4 boxes of 64 x 64.
 */
#include "gpuir.h"

#include <string.h>

typedef struct TmaCtx {
    IrFunc *f;
    int nmaps;
} TmaCtx;

static void mark_loop(IrOp *op, void *vctx)
{
    TmaCtx *t = vctx;
    if (op->op != IR_FOR || ir_attr_int(&op->attrs, IR_ATTR_MBARRIER, 0) != 1) return;
    IrBlock *body = op->regions[0];
    int n = 0, fit = 0;
    for (IrOp *x = body->first; x; x = x->next) {
        if (!ir_attr_get(&x->attrs, IR_ATTR_SLOT_BYTES)) continue;
        n++;
        GpTmaPlan p;
        fit += gp_tma_plan(t->f, x, gp_fast_value_dim(t->f, x->res[0]), &p);
    }
    if (!n || fit != n || t->nmaps + n > GP_TMA_MAX_MAPS) return;
    for (IrOp *x = body->first; x; x = x->next)
        if (ir_attr_get(&x->attrs, IR_ATTR_SLOT_BYTES)) ir_attr_set_int(t->f->arena, &x->attrs, IR_ATTR_TMA_MAP, t->nmaps++);
}

bool gp_pass_tma(IrFunc *f, const GpPassCtx *ctx, Diag *d)
{
    (void)d;
    if (!ctx->sched.tma || ir_attr_int(&f->attrs, IR_ATTR_WGMMA, 0) != 1) return true;
    TmaCtx t = {f, 0};
    ir_walk(f, mark_loop, &t);
    if (t.nmaps) ir_attr_set_int(f->arena, &f->attrs, IR_ATTR_TMA_MAPS, t.nmaps);
    return true;
}
