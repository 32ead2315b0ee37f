/* codegen.c — cg_compile: Tile IR -> GPU IR -> LLVM IR -> PTX -> cubin.
 *
 * Steps: axis info, the GPU passes (pass_table.c: accelerate-dot, layout-assign,
 * remove-convert, pipeline, dot-overlap, sram-alloc, tma, pingpong, warp-specialize: docs/tensor_cores.md; their result is the GPU IR, layouts
 * and decisions included, printed by --emit gpu-ir), the lowering's cache of those decisions
 * (gp_tc_from_ir), then one pass over the ops in program order (cg_lower.c) that emits per-thread LLVM IR
 * (each tile value becomes an array of registers in its layout's order, each
 * op a loop over them), then cg_emit (verify, O3, PTX, ptxas).
 * The kernel is `void @name(params...)` marked as a kernel through
 * !nvvm.annotations with maxntidx = 32 * num_warps (+ 128 for warp_spec's producer
 * warpgroup, cg_warp_spec.c); tile ops never see the
 * thread index except through the layout arithmetic in cg_context.c.
 */
#include "cg_internal.h"

#include <stdio.h>
#include <string.h>

static void init_types(CgCtx *c)
{
    c->t_void = LLVMVoidTypeInContext(c->ctx);
    c->t_i1 = LLVMInt1TypeInContext(c->ctx);
    c->t_i8 = LLVMInt8TypeInContext(c->ctx);
    c->t_i16 = LLVMInt16TypeInContext(c->ctx);
    c->t_i32 = LLVMInt32TypeInContext(c->ctx);
    c->t_i64 = LLVMInt64TypeInContext(c->ctx);
    c->t_f16 = LLVMHalfTypeInContext(c->ctx);
    c->t_bf16 = LLVMBFloatTypeInContext(c->ctx);
    c->t_f32 = LLVMFloatTypeInContext(c->ctx);
    c->t_f64 = LLVMDoubleTypeInContext(c->ctx);
    c->t_gptr = LLVMPointerTypeInContext(c->ctx, 1);
    c->t_sptr = LLVMPointerTypeInContext(c->ctx, 3);
}

static void annotate_kernel(CgCtx *c)
{
    LLVMMetadataRef fn = LLVMValueAsMetadata(c->fn);
    /* warp_spec: + the producer warpgroup, and the registers a thread holds at launch pinned
     * (.maxnreg), which setmaxnreg then moves between the roles (else ptxas may launch with
     * fewer than the consumers' setmaxnreg.inc asks for: cg_warp_spec.c) */
    const char *keys[3] = {"kernel", "maxntidx", "maxnreg"};
    int vals[3] = {1, 32 * (c->f->sched.num_warps + (c->ws_warps ? GP_WS_PRODUCER_WARPS : 0)), cg_ws_entry_regs(c->ws_warps)};
    for (int i = 0; i < (c->ws_warps ? 3 : 2); i++) {
        LLVMMetadataRef ops[3] = {fn, LLVMMDStringInContext2(c->ctx, keys[i], strlen(keys[i])),
                                  LLVMValueAsMetadata(cg_i32(c, vals[i]))};
        LLVMMetadataRef node = LLVMMDNodeInContext2(c->ctx, ops, 3);
        LLVMAddNamedMetadataOperand(c->mod, "nvvm.annotations", LLVMMetadataAsValue(c->ctx, node));
    }
}

static void build_kernel(CgCtx *c)
{
    IrFunc *f = c->f;
    int nmaps = gp_tma_nmaps(f);   /* TMA tensor maps: parameters after the program's (cg_tma.c) */
    LLVMTypeRef *pt = ARENA_ARRAY(c->arena, LLVMTypeRef, f->nparams + nmaps + 1);
    for (int i = 0; i < f->nparams; i++) pt[i] = cg_type(c, (IrElem)f->params[i]->type.elem);
    cg_tma_params(c, pt, f->nparams);
    LLVMTypeRef ft = LLVMFunctionType(c->t_void, pt, (unsigned)(f->nparams + nmaps), 0);
    c->fn = LLVMAddFunction(c->mod, f->name, ft);
    for (int i = 0; i < f->nparams; i++) {
        LLVMValueRef p = LLVMGetParam(c->fn, (unsigned)i);
        if (f->params[i]->name) LLVMSetValueName2(p, f->params[i]->name, strlen(f->params[i]->name));
        cg_set(c, f->params[i], 1)->r[0] = p;
    }
    c->ws_warps = ir_attr_int(&f->attrs, IR_ATTR_WARP_SPEC, 0) ? f->sched.num_warps : 0;
    annotate_kernel(c);
    cg_tma_annotate(c, f->nparams);
    c->smem = LLVMAddGlobalInAddressSpace(c->mod, LLVMArrayType2(c->t_i8, 0), "smem", 3);
    LLVMSetLinkage(c->smem, LLVMExternalLinkage);
    LLVMSetAlignment(c->smem, c->tc && c->tc->wgmma ? 1024 : 16); /* wgmma: swizzle atoms at 1024 */
    LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(c->ctx, c->fn, "entry");
    LLVMPositionBuilderAtEnd(c->b, entry);
    c->tid = cg_call(c, "llvm.nvvm.read.ptx.sreg.tid.x", c->t_i32, 0, NULL, NULL);
    c->lane = LLVMBuildAnd(c->b, c->tid, cg_i32(c, 31), "lane");
    c->warp = LLVMBuildLShr(c->b, c->tid, cg_i32(c, 5), "warp");
    cg_ws_entry(c);   /* warp_spec: the producer warpgroup's program, then the consumers go on */
    cg_pingpong_entry(c);
    cg_tma_prefetch(c);
}

static void write_stats(CgCtx *c, CgResult *res)
{
    res->smem_bytes = c->tc->total;
    sb_printf(&res->stats, "warps: %d\nstages: %d\n", c->f->sched.num_warps, c->f->sched.num_stages);
    char on[256];
    sched_names(&c->opts->sched, " ", on, sizeof on);
    if (on[0]) sb_printf(&res->stats, "schedule: %s\n", on);   /* the options on, resolved */
    if (c->ws_warps)
        sb_printf(&res->stats, "warp-specialize: 4 producer warps (setmaxnreg %d), %d consumer warps (setmaxnreg %d)\n",
                  cg_ws_producer_regs(c->ws_warps, cg_ws_producer_min(c->f)), c->ws_warps,
                  cg_ws_consumer_regs(c->ws_warps, cg_ws_producer_min(c->f)));
    else if (c->opts->sched.warp_specialize) {
        char why[160];
        sb_printf(&res->stats, "warp-specialize: not applied: %s\n",
                  gp_ws_refusal(c->f, why, (int)sizeof why) ? why : "the kernel as given has no warp_spec");
    }
    gp_sram_stats(c->tc, &res->stats);
}

/* t_gpu: the GPU passes' time, reported with the other phases after the
 * kernel's own stats. */
static void dispose_llvm(CgCtx *c)
{
    LLVMDisposeBuilder(c->b);
    LLVMDisposeModule(c->mod);
    LLVMContextDispose(c->ctx);
}

static bool lower_and_emit(CgCtx *c, CgResult *res, double t_gpu)
{
    c->ctx = LLVMContextCreate();
    c->mod = LLVMModuleCreateWithNameInContext(c->f->name, c->ctx);
    c->b = LLVMCreateBuilderInContext(c->ctx);
    /* An arena allocation failing in the lowering unwinds to the compile's catch
     * (support.h), past the disposal below: the LLVM objects are not in the arena
     * (they live in *c, outside this frame, so they are still known here). */
    SupOomCatch oom;
    if (!SUP_OOM_TRY(&oom)) {
        dispose_llvm(c);
        sup_oom_rethrow();
        return false;
    }
    init_types(c);
    double t0 = sup_now_ms();
    build_kernel(c);
    bool ok = cg_lower_block(c, c->f->body);
    double t_lower = sup_now_ms() - t0;
    if (ok && !c->failed && !ice_message()) {
        /* Bodies end with `return`; make sure the last block is terminated anyway. */
        if (!LLVMGetBasicBlockTerminator(LLVMGetInsertBlock(c->b))) LLVMBuildRetVoid(c->b);
        write_stats(c, res); /* first: emission appends what ptxas reports (registers, spills) */
        sb_printf(&res->stats, "time gpu-passes: %.3f ms\ntime lower: %.3f ms\n", t_gpu, t_lower);
        ok = cg_emit(c, res);
    } else {
        ok = false;
    }
    sup_oom_pop(&oom);
    dispose_llvm(c);
    return ok;
}

/* Passes from `first` (NULL: none, the IR is already through the last pass),
 * then lowering and emission. */
static bool compile(IrFunc *f, const char *first, const CgOptions *opts, CgResult *res, Diag *d)
{
    CgCtx c;
    memset(&c, 0, sizeof c);
    c.f = f;
    c.opts = opts;
    c.arena = f->arena;
    c.diag = d;
    if (!opts->target) {
        diag_report(d, DIAG_INTERNAL, f->loc, "cg_compile: no target");
        return false;
    }
    c.sm = opts->target->sm;
    int W = f->sched.num_warps;
    if (W < 1 || W > 32 || !sup_is_pow2(W)) {
        diag_report(d, DIAG_USER, f->loc, "num_warps must be a power of two between 1 and 32 (got %d)", W);
        return false;
    }
    res->num_warps = W;
    double t0 = sup_now_ms();
    GpAxisMap *axis = gp_axis_info(f);
    GpPassCtx pc = {.target = opts->target, .axis = axis};
    char why[256];
    /* the driver resolved them already; here for callers that build CgOptions themselves */
    if (!sched_resolve(&opts->sched, NULL, &pc.sched, why, sizeof why)) {
        diag_report(d, DIAG_USER, f->loc, "%s", why);
        return false;
    }
    pc.wgmma = opts->target->wgmma && !pc.sched.no_wgmma;
    CgOptions resolved = *opts;   /* the lowering and --stats see the resolved options too */
    resolved.sched = pc.sched;
    c.opts = &resolved;
    if (first && !gp_run_gpu_passes(f, &pc, first, NULL, opts->dump_after, &res->dumps, d)) return false;
    if (!first && !gp_verify_gpu_ir(f, d)) return false;
    GpTcState *tc = gp_tc_from_ir(f); /* the lowering's cache of the decisions on the IR */
    if (diag_flush_ice(d)) return false;
    double t_gpu = sup_now_ms() - t0;
    res->smem_bytes = tc->total;
    cg_tma_recipes(tc, res);
    if (ir_attr_int(&f->attrs, IR_ATTR_WARP_SPEC, 0)) res->num_warps = W + GP_WS_PRODUCER_WARPS;   /* the producer warpgroup */
    if (opts->stage == CG_STAGE_GPU_IR) {
        ir_print_func(&res->out, f);
        return true;
    }
    if (!cg_llvm_init(d, f->loc)) return false;
    c.tc = tc;
    c.axis = axis;
    c.vals = ARENA_ARRAY(f->arena, CgTile, f->next_id + 1);
    c.lazy = ARENA_ARRAY(f->arena, CgLazyOperand, f->next_id + 1);
    c.uses = ir_use_counts(f);
    int before = d->nerrors;
    bool ok = lower_and_emit(&c, res, t_gpu);
    if (!ok && !diag_flush_ice(d) && d->nerrors == before)
        diag_report(d, DIAG_INTERNAL, f->loc, "codegen failed without a message");
    return ok;
}

bool cg_compile(IrFunc *f, const CgOptions *opts, CgResult *res, Diag *d)
{
    return compile(f, gp_gpu_passes[0].name, opts, res, d);
}

bool cg_compile_gpu_ir(IrFunc *f, const char *first_pass, const CgOptions *opts, CgResult *res, Diag *d)
{
    if (first_pass && !gp_gpu_pass(first_pass)) {
        diag_report(d, DIAG_USER, f->loc, "unknown GPU pass '%s'", first_pass);
        return false;
    }
    return compile(f, first_pass, opts, res, d);
}
