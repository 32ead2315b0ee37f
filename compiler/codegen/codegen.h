/* codegen.h — Tile IR -> GPU IR (layouts) -> LLVM IR -> PTX (-> cubin via ptxas).
 * Prefix cg_. One op family per file; one context struct with cached LLVM types.
 */
#ifndef KILN_CODEGEN_H
#define KILN_CODEGEN_H

#include "../ir/ir.h"
#include "../support/diag.h"
#include "../support/schedule.h"
#include "../support/target.h"

typedef enum CgStage { CG_STAGE_GPU_IR, CG_STAGE_LLVM, CG_STAGE_PTX, CG_STAGE_CUBIN } CgStage;

typedef struct CgOptions {
    const Target *target;      /* tgt_parse("sm_90a"), ...: never NULL */
    CgStage stage;
    const char *dump_after;    /* GPU passes to dump after (NULL, "all" or a name) */
    KilnSchedule sched;        /* the schedule options, resolved (sched_resolve: each 0 or 1); cg_compile
                                  resolves again, refusing a combination with a user error */
} CgOptions;

typedef struct CgResult {
    StrBuf out;                /* text of the stage (or cubin bytes) */
    StrBuf dumps;
    StrBuf stats;              /* also "time <phase>: N ms" lines, one per backend phase */
    int smem_bytes;            /* dynamic shared memory needed at launch */
    int num_warps;             /* warps to launch: the kernel's, + 4 with warp_spec (the producer) */
    /* The kernel's TMA tensor maps (tma.maps), in parameter order after the
     * program's: how the runtime encodes each at launch (cg_tma.c). */
    int ntmaps;
    struct CgTmaRecipe {
        int base_param;        /* runtime parameter holding the global address */
        int elem_bytes, is_bf16, rank;
        int dim_param[5];      /* elements: (param >= 0 ? its value : 1) * dim_k */
        long long dim_k[5];
        int stride_param[4];   /* bytes of dims 1..: (param >= 0 ? its value : 1) * stride_k */
        long long stride_k[4];
        int box[5];
        unsigned long long nonneg_params;   /* bit i: parameter i must be >= 0 at launch */
    } tmaps[8];
} CgResult;

/* Lower one kernel (already through the target-independent passes). Returns
 * false with the reasons reported to `d` at the kernel's or the op's source
 * location, each with its kind: DIAG_USER for limits the program exceeds
 * (num_warps, shared memory, an op the target lacks), DIAG_UNSUPPORTED when
 * ptxas is missing, DIAG_INTERNAL for bugs. */
bool cg_compile(IrFunc *f, const CgOptions *opts, CgResult *res, Diag *d);
/* The same from GPU IR (ir_parse of --emit gpu-ir text or a --dump-after
 * dump): the passes from `first_pass` on (a --dump-after name: the input is
 * the IR after the pass before it; NULL: none, the input is the final GPU IR,
 * decisions included), then lowering and emission. */
bool cg_compile_gpu_ir(IrFunc *f, const char *first_pass, const CgOptions *opts, CgResult *res, Diag *d);
/* The name of GPU pass `i` in the order they run (pass_table.c), NULL past
 * the last: the driver checks --dump-after names against it. */
const char *gp_gpu_pass_name(int i);
/* LLVM's pass pipeline, options and codegen level as cg_compile uses them,
 * one pass per line (cg_emit.c): tests/codegen/llvm_pipeline.txt pins it. */
void cg_llvm_describe(StrBuf *out);

#endif
