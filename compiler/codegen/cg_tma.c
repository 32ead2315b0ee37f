/* cg_tma.c — lowering of TMA copies (sm_90a): the kernel's tensor-map
 * parameters (byval, grid_constant), prefetch.tensormap, the copies
 * (cg_tma_issue: one elected thread, `mbarrier.arrive.expect_tx` and one
 * `cp.async.bulk.tensor` per 128-byte-wide box) and the recipes the runtime
 * encodes the maps from. Which loads a map serves, and how, is decided by
 * gpuir/tma_plan.c (gp_tma_plan, pass_tma.c): this file only reads the plan.
 *
 * Invariants: a loop's loads are all TMA or none, so its full barriers count
 * one arrival (the elected thread's expect_tx).
 *
 * Example: for the A operand of tools/bench/matmul_tc.tile (map {1024, M},
 * box {64, 128}), thread 0 of the producer issues
 *     cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [slot], [map, {k0, 128 pid_m}], [full]
 */
#include "cg_internal.h"
#include "../gpuir/gpuir.h"

#include <stdio.h>
#include <string.h>

/* ---- the kernel's map parameters ---- */


void cg_tma_params(CgCtx *c, LLVMTypeRef *pt, int first)
{
    for (int k = 0; k < gp_tma_nmaps(c->f); k++) pt[first + k] = LLVMPointerTypeInContext(c->ctx, 0);
}

/* byval [128 x i8] align 64 + nvvm "grid_constant": PTX `.param .align 64 .b8 x[128]`, and the
 * instruction takes the parameter's generic address (cvta.param), as CUDA's __grid_constant__. */
void cg_tma_annotate(CgCtx *c, int first)
{
    int n = gp_tma_nmaps(c->f);
    if (!n) return;
    LLVMTypeRef map = LLVMArrayType2(c->t_i8, 128);
    unsigned kind = LLVMGetEnumAttributeKindForName("byval", 5);
    LLVMMetadataRef idx[GP_TMA_MAX_MAPS];
    for (int k = 0; k < n; k++) {
        LLVMAddAttributeAtIndex(c->fn, (unsigned)(first + k + 1), LLVMCreateTypeAttribute(c->ctx, kind, map));
        LLVMValueRef p = LLVMGetParam(c->fn, (unsigned)(first + k));
        LLVMSetParamAlignment(p, 64);
        char name[32];
        snprintf(name, sizeof name, "tma_map%d", k);
        LLVMSetValueName2(p, name, strlen(name));
        idx[k] = LLVMValueAsMetadata(cg_i32(c, first + k + 1));
    }
    LLVMMetadataRef ops[3] = {LLVMValueAsMetadata(c->fn), LLVMMDStringInContext2(c->ctx, "grid_constant", 13),
                              LLVMMDNodeInContext2(c->ctx, idx, (size_t)n)};
    LLVMAddNamedMetadataOperand(c->mod, "nvvm.annotations",
                                LLVMMetadataAsValue(c->ctx, LLVMMDNodeInContext2(c->ctx, ops, 3)));
}

static LLVMValueRef map_addr(CgCtx *c, int k)
{
    return LLVMBuildPtrToInt(c->b, LLVMGetParam(c->fn, (unsigned)(c->f->nparams + k)), c->t_i64, "");
}

/* Thread 0 pulls each map's 128 bytes into the descriptor cache once. */
void cg_tma_prefetch(CgCtx *c)
{
    for (int k = 0; k < gp_tma_nmaps(c->f); k++) {
        LLVMValueRef args[2] = {map_addr(c, k), c->tid};
        cg_asm(c, c->t_void, "{\n\t.reg .pred p;\n\tsetp.eq.u32 p, $1, 0;\n\t@p prefetch.tensormap [$0];\n\t}",
               "l,r,~{memory}", 2, args, true);
    }
}

/* ---- the copies ---- */

static LLVMValueRef as_i32(CgCtx *c, LLVMValueRef v)
{
    unsigned w = LLVMGetIntTypeWidth(LLVMTypeOf(v));
    return w == 32 ? v : w > 32 ? LLVMBuildTrunc(c->b, v, c->t_i32, "") : LLVMBuildSExt(c->b, v, c->t_i32, "");
}

/* The value of a uniform polynomial (i32): its atoms are lowered scalars (the
 * slice's, for the iteration being issued). */
static LLVMValueRef poly_eval(CgCtx *c, const GpTmaPoly *p)
{
    LLVMValueRef sum = cg_i32(c, 0);
    for (int i = 0; i < p->n; i++) {
        LLVMValueRef t = cg_i32(c, p->t[i].k);
        for (int k = 0; k < p->t[i].nat; k++) t = LLVMBuildMul(c->b, t, as_i32(c, cg_get(c, p->t[i].at[k])->r[0]), "");
        sum = LLVMBuildAdd(c->b, sum, t, "");
    }
    return sum;
}

/* A launch-time value inside the kernel: its parameter's (i32) times k, or k. */
static LLVMValueRef val_eval(CgCtx *c, const GpTmaVal *v)
{
    LLVMValueRef k = cg_i32(c, v->k);
    return v->param < 0 ? k : LLVMBuildMul(c->b, k, as_i32(c, cg_get(c, c->f->params[v->param])->r[0]), "");
}

/* A guarded load (dot-rotate's next block, masked by iv + step < hi): when the guard is
 * false its boxes start at the contiguous dim's extent, wholly outside the map, so TMA
 * fills the slot with zeros (other = 0) and still counts every byte (expect_tx is fixed). */
static LLVMValueRef guarded_inner(CgCtx *c, const GpTmaPlan *p, LLVMValueRef crd0)
{
    if (!p->guard) return crd0;
    LLVMValueRef g = cg_get(c, p->guard)->r[0];
    g = LLVMBuildICmp(c->b, LLVMIntNE, g, LLVMConstNull(LLVMTypeOf(g)), "");
    return LLVMBuildSelect(c->b, g, crd0, val_eval(c, &p->dims[0]), "tma.guard");
}

void cg_tma_issue(CgCtx *c, const GpPipeLoop *pl, LLVMValueRef slot, LLVMValueRef valid, LLVMValueRef full)
{
    int total = 0;
    for (int j = 0; j < pl->nloads; j++) total += pl->loads[j].tma.box_bytes * pl->loads[j].tma.nboxes;
    LLVMValueRef one = LLVMBuildICmp(c->b, LLVMIntEQ, c->tid, cg_i32(c, 0), "");
    LLVMValueRef go = LLVMBuildAnd(c->b, one, valid, "");
    LLVMValueRef past = LLVMBuildAnd(c->b, one, LLVMBuildNot(c->b, valid, ""), "");
    /* The elected thread's arrival: with the bytes the phase must still see land,
     * or (an iteration past the end: no copies) a plain one. */
    char text[256];
    snprintf(text, sizeof text,
             "{\n\t.reg .pred p, q;\n\t.reg .b64 st;\n\tsetp.ne.u32 p, $1, 0;\n\tsetp.ne.u32 q, $2, 0;\n\t"
             "@p mbarrier.arrive.expect_tx.shared::cta.b64 st, [$0], %d;\n\t"
             "@q mbarrier.arrive.shared::cta.b64 st, [$0];\n\t}", total);
    LLVMValueRef a[3] = {full, LLVMBuildZExt(c->b, go, c->t_i32, ""), LLVMBuildZExt(c->b, past, c->t_i32, "")};
    cg_asm(c, c->t_void, text, "r,r,r,~{memory}", 3, a, true);
    for (int j = 0; j < pl->nloads; j++) {
        const GpPipeLoad *l = &pl->loads[j];
        LLVMValueRef base = LLVMBuildAdd(c->b, cg_i32(c, l->buf ? l->buf->offset : 0),
                                         LLVMBuildMul(c->b, slot, cg_i32(c, l->slot_bytes), ""), "");
        LLVMValueRef dst = LLVMBuildPtrToInt(c->b, cg_smem_ptr_abs(c, base), c->t_i32, "");
        int r = l->tma.rank;
        LLVMValueRef crd[GP_TMA_MAX_RANK];
        for (int d = 0; d < r; d++) crd[d] = poly_eval(c, &l->tma.coord[d]);
        crd[0] = guarded_inner(c, &l->tma, crd[0]);
        LLVMValueRef m = map_addr(c, l->tma_map);
        for (int b = 0; b < l->tma.nboxes; b++) {
            /* box b: columns c0 + 64 b, the slot's column block b */
            StrBuf t;
            sb_init(&t);
            sb_printf(&t, "{\n\t.reg .pred p;\n\tsetp.ne.u32 p, $%d, 0;\n\t"
                      "@p cp.async.bulk.tensor.%dd.shared::cluster.global.mbarrier::complete_tx::bytes "
                      "[$0+%d], [$1, {", 3 + r, r, b * l->tma.box_bytes);
            for (int d = 0; d < r; d++) sb_printf(&t, "%s$%d", d ? ", " : "", 3 + d);
            sb_puts(&t, "}], [$2];\n\t}");
            LLVMValueRef args[4 + GP_TMA_MAX_RANK] = {dst, m, full};
            args[3] = LLVMBuildAdd(c->b, crd[0], cg_i32(c, 64 * b), "");
            for (int d = 1; d < r; d++) args[3 + d] = crd[d];
            args[3 + r] = LLVMBuildZExt(c->b, go, c->t_i32, "");
            char cons[64] = "r,l,r";
            for (int d = 0; d <= r; d++) strcat(cons, ",r");
            strcat(cons, ",~{memory}");
            cg_asm(c, c->t_void, t.data, cons, 4 + r, args, true);
            sb_free(&t);
        }
    }
}

/* ---- the recipes the runtime encodes the maps from ---- */

void cg_tma_recipes(const GpTcState *tc, CgResult *res)
{
    res->ntmaps = 0;
    for (int i = 0; tc && i < tc->loops.len; i++) {
        const GpPipeLoop *pl = tc->loops.data[i];
        for (int j = 0; pl->tma && j < pl->nloads; j++) {
            const GpPipeLoad *l = &pl->loads[j];
            const GpTmaPlan *p = &l->tma;
            if (l->tma_map < 0 || l->tma_map >= GP_TMA_MAX_MAPS) continue;
            struct CgTmaRecipe *r = &res->tmaps[l->tma_map];
            r->base_param = p->base_param;
            r->elem_bytes = p->elem_bytes;
            r->is_bf16 = p->elem == IR_BF16;
            r->rank = p->rank;
            for (int k = 0; k < p->rank; k++) {
                r->dim_param[k] = p->dims[k].param;
                r->dim_k[k] = p->dims[k].k;
                r->box[k] = p->box[k];
                if (k) r->stride_param[k - 1] = p->strides[k - 1].param, r->stride_k[k - 1] = p->strides[k - 1].k;
            }
            r->nonneg_params = p->nonneg_params;
            if (l->tma_map + 1 > res->ntmaps) res->ntmaps = l->tma_map + 1;
        }
    }
}
