/* cg_emit.c — from the lowered LLVM module to text/PTX/cubin.
 *
 * Order: unused GEPs, casts and extracts erased (erase_dead), LLVMVerifyModule
 * (a failure is an internal error carrying the
 * verifier's message), the target machine (nvptx64-nvidia-cuda, CPU =
 * the target's name, features = its PTX ISA, "+ptx80": sm_90a needs 8.0;
 * "+ptx81" when the module has a vector red, cg_memory.c, or an e4m3 cvt on sm_89, cg_context.c),
 * Kiln's LLVM IR pipeline (cg_llvm_pipeline below, not default<O3>), then by
 * stage: the module text, PTX through LLVMTargetMachineEmitToMemoryBuffer,
 * or a cubin from ptxas (ptxas_run, compiler/support/ptxas.c, which also
 * finds it). Each step's wall and CPU time go to the stats ("time llvm-opt:
 * W ms, cpu C ms"; ptxas's wall time only).
 * LLVM is initialised once per process (pthread_once) with the options of
 * cg_llvm_options (-nvptx-short-ptr makes shared-memory pointers 32-bit).
 */
#include "cg_internal.h"
#include "../support/ptxas.h"

#include <llvm-c/Analysis.h>
#include <llvm-c/Support.h>
#include <llvm-c/Target.h>
#include <llvm-c/Transforms/PassBuilder.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define CG_TRIPLE "nvptx64-nvidia-cuda"

/* ---- the LLVM pipeline (docs/gpu.md, "LLVM pipeline") ----
 *
 * default<O3> spent ~300 ms of CPU on the d = 128 forward. Kiln's IR gives
 * many of its passes nothing to do: the Tile IR passes already folded, CSE'd,
 * hoisted and removed dead code; tiles are unrolled per thread; the kernel is
 * one function with no allocas, no calls but intrinsics and inline asm, no
 * memcpys, no coroutines, no switches. The list below is default<O3>'s
 * function pipeline, in its order and with its parameters, less every pass
 * that changed no IR on any shipped kernel (opt -print-changed over the
 * pinned kernels and those of kiln-bench-compile): the inliner and the CGSCC
 * wrapper (one function), SROA and mem2reg (no allocas), DSE, MemCpyOpt,
 * jump threading, loop unswitching, idiom recognition, deletion, full unroll,
 * loop vectorisation and distribution, ADCE, MergedLoadStoreMotion, the
 * attribute inference passes, the coroutine and OpenMP passes. What stays
 * cleans up the per-thread lowering (layout arithmetic, extract/insertelement
 * around inline asm, selects of masks), hoists out of the K/V loop, and
 * combines scalar f16/bf16 shared-memory loads into vectors (SLP). The PTX is
 * the one default<O3> gave (tests/codegen/ptx_hashes.txt); the golden
 * tests/codegen/llvm_pipeline.txt pins the list and its options.
 * Then, by the PTX rather than the IR: the passes whose removal leaves the PTX
 * of every kernel of kiln-bench-compile (78) and of the hash test (43)
 * byte-identical, removed together (opt + llc over the kernels' IR, one
 * pass at a time, then the set): four of the eight InstCombine runs (after
 * BDCE, after the late loop-rotate, after SLP, after loop-unroll), SCCP,
 * BDCE, the second correlated-propagation and infer-alignment, the first
 * vector-combine, instsimplify and both tailcallelims. What they changed in
 * the IR, NVPTX's own IR passes and instruction selection redo (straight-line
 * strength reduction, EarlyCSE, the DAG combiner). Kept although single
 * removals were neutral: loop-unroll and the last LICM (cheap, and a user
 * program with a constant-trip loop may need them). Not removable without
 * moving PTX: the other InstCombines, early-cse<memssa>, the first
 * correlated-propagation, reassociate, indvars, div-rem-pairs, the second
 * vector-combine together with the late InstCombines. */
#define CG_IC "instcombine<max-iterations=1;no-use-loop-info;no-verify-fixpoint>"
#define CG_SCFG(opts) "simplifycfg<bonus-inst-threshold=1;" opts ";speculate-blocks;simplify-cond-branch;"
#define CG_SCFG_EARLY CG_SCFG("no-forward-switch-cond;no-switch-range-to-icmp;no-switch-to-lookup;keep-loops;" \
                              "no-hoist-common-insts;no-sink-common-insts") "no-speculate-unpredictables>"
#define CG_SCFG_MID CG_SCFG("no-forward-switch-cond;switch-range-to-icmp;no-switch-to-lookup;keep-loops;" \
                            "no-hoist-common-insts;no-sink-common-insts") "no-speculate-unpredictables>"
#define CG_SCFG_HOIST CG_SCFG("no-forward-switch-cond;switch-range-to-icmp;no-switch-to-lookup;keep-loops;" \
                              "hoist-common-insts;sink-common-insts") "no-speculate-unpredictables>"
#define CG_SCFG_LATE CG_SCFG("forward-switch-cond;switch-range-to-icmp;switch-to-lookup;no-keep-loops;" \
                             "hoist-common-insts;sink-common-insts") "no-speculate-unpredictables>"
#define CG_SCFG_LAST CG_SCFG("no-forward-switch-cond;switch-range-to-icmp;no-switch-to-lookup;keep-loops;" \
                             "no-hoist-common-insts;no-sink-common-insts") "speculate-unpredictables>"
#define CG_ROTATE "loop-rotate<header-duplication;no-prepare-for-lto>"
static const char cg_pipeline[] =
    /* O3's module simplification: ranges of tid/ctaid, attributes of the
     * intrinsics, constants through the function */
    "function(nvvm-intr-range),inferattrs,"
    "function<eager-inv>(" CG_SCFG_EARLY ",early-cse<>),"
    "ipsccp,globalopt,"
    "function<eager-inv>(" CG_IC "," CG_SCFG_MID "),"
    "require<globals-aa>,function(invalidate<aa>),"
    /* O3's function simplification (what its CGSCC pipeline runs on each function) */
    "function<eager-inv>(early-cse<memssa>,correlated-propagation," CG_SCFG_MID "," CG_IC ","
    CG_SCFG_MID ",reassociate,"
    "loop-mssa(licm<no-allowspeculation>," CG_ROTATE ",licm<allowspeculation>)," CG_SCFG_MID "," CG_IC ","
    "loop(indvars),gvn<>,"
    "loop-mssa(licm<allowspeculation>)," CG_SCFG_HOIST "," CG_IC "),"
    "recompute-globalsaa,"
    /* O3's function optimisation: SLP, the last cleanups */
    "function<eager-inv>(loop(" CG_ROTATE "),infer-alignment," CG_SCFG_LATE ",slp-vectorizer,"
    "vector-combine,loop-unroll<O3>,loop-mssa(licm<allowspeculation>),"
    "div-rem-pairs," CG_SCFG_LAST ")";

/* LLVM's command-line options, set once per process:
 * -nvptx-short-ptr: 32-bit shared-memory pointers;
 * -slp-vectorize-hor=false: SLP's search for horizontal reductions cost ~50 ms
 *   on the d = 128 forward and changed no PTX of any shipped kernel (a row's
 *   sum is a chain over a thread's few columns, then shuffles across lanes);
 * -cgpp-huge-func=0: CodeGenPrepare (in the codegen pipeline) restarts its walk
 *   from the function's first block after every change that touches the
 *   dominator tree, and re-parses every inline asm's constraint string on each
 *   walk (6 walks x 240 asm calls with up to 144 operands on the d = 256
 *   forward: 88 M instructions, 8% of the compile). Its "huge function" mode,
 *   here for every function, makes the same rewrites but restarts only the
 *   block that changed and afterwards revisits only the blocks it touched:
 *   CodeGenPrepare 88 M -> 17 M instructions, the PTX of every shipped kernel
 *   byte-identical (the hash test; the 78 of kiln-bench-compile). */
static const char *const cg_options[] = {"-nvptx-short-ptr", "-slp-vectorize-hor=false", "-cgpp-huge-func=0"};
#define CG_NOPTIONS ((int)(sizeof cg_options / sizeof cg_options[0]))
/* Codegen at "Less": EarlyCSE where "Aggressive" runs GVN twice around
 * NVPTX's straight-line passes; same PTX on every shipped kernel. */
#define CG_CODEGEN_LEVEL LLVMCodeGenLevelLess

/* One pass per line (a group's passes indented under it), then the options and
 * the codegen level: the text tests/codegen/llvm_pipeline.txt pins. */
void cg_llvm_describe(StrBuf *out)
{
    sb_puts(out, "passes:\n");
    int depth = 0;
    for (const char *p = cg_pipeline; *p; p++) {
        if (*p == ',' && depth <= 1) {
            sb_printf(out, "\n%*s", 2 * depth, "");
            continue;
        }
        sb_putc(out, *p);
        if (*p == '(' && ++depth == 1) sb_puts(out, "\n  ");
        if (*p == ')') depth--;
    }
    sb_puts(out, "\noptions:");
    for (int i = 0; i < CG_NOPTIONS; i++) sb_printf(out, " %s", cg_options[i]);
    sb_printf(out, "\ncodegen level: %s\n", CG_CODEGEN_LEVEL == LLVMCodeGenLevelLess ? "less" : "other");
}

static pthread_once_t init_once = PTHREAD_ONCE_INIT;

static void llvm_init_once(void)
{
    LLVMInitializeNVPTXTargetInfo();
    LLVMInitializeNVPTXTarget();
    LLVMInitializeNVPTXTargetMC();
    LLVMInitializeNVPTXAsmPrinter();
    const char *argv[CG_NOPTIONS + 1] = {"kiln"};
    for (int i = 0; i < CG_NOPTIONS; i++) argv[i + 1] = cg_options[i];
    LLVMParseCommandLineOptions(CG_NOPTIONS + 1, argv, NULL);
}

bool cg_llvm_init(Diag *d, SrcLoc loc)
{
    pthread_once(&init_once, llvm_init_once);
    LLVMTargetRef t;
    char *msg = NULL;
    if (LLVMGetTargetFromTriple(CG_TRIPLE, &t, &msg)) {
        diag_report(d, DIAG_INTERNAL, loc, "codegen: no NVPTX target in this LLVM: %s", msg ? msg : "");
        LLVMDisposeMessage(msg);
        return false;
    }
    return true;
}

static LLVMTargetMachineRef make_tm(CgCtx *c)
{
    LLVMTargetRef t;
    char *msg = NULL;
    if (LLVMGetTargetFromTriple(CG_TRIPLE, &t, &msg)) {
        LLVMDisposeMessage(msg);
        return NULL;
    }
    /* a vector red (cg_memory.c, sm_90) needs PTX ISA 8.1; other modules keep the target's */
    const char *features = c->opts->target->ptx_features;
    if (c->ptx81 && !strcmp(features, "+ptx80")) features = "+ptx81";
    return LLVMCreateTargetMachine(t, CG_TRIPLE, c->opts->target->name, features, CG_CODEGEN_LEVEL,
                                   LLVMRelocDefault, LLVMCodeModelDefault);
}

/* ---- ptxas (compiler/support/ptxas.c) ---- */

/* ptxas -v reports what is only known after register allocation; add it to
 * the --stats lines ("Used 40 registers", "8 bytes spill stores, 8 bytes
 * spill loads", and "wgmma.mma_async instructions are serialized due to
 * ...": ptxas waited after each wgmma because something touched their
 * registers in flight). A log in another shape adds nothing rather than guessing. */
static void stats_from_ptxas_log(const char *log, StrBuf *stats)
{
    const char *u = log ? strstr(log, "Used ") : NULL;
    int regs = 0, st = 0, ld = 0;
    if (u && sscanf(u, "Used %d registers", &regs) == 1) sb_printf(stats, "registers: %d (ptxas)\n", regs);
    const char *sp = log ? strstr(log, "bytes spill stores") : NULL;
    if (sp) {
        const char *b = sp;
        while (b > log && b[-1] != ',') b--; /* back to the start of "N bytes spill stores" */
        if (sscanf(b, " %d bytes spill stores, %d bytes spill loads", &st, &ld) == 2)
            sb_printf(stats, "spills: %d bytes stored, %d bytes loaded\n", st, ld);
    }
    const char *ser = log ? strstr(log, "wgmma.mma_async instructions are serialized") : NULL;
    if (ser) {
        const char *e = strchr(ser, '\n');
        sb_printf(stats, "ptxas: %.*s\n", (int)(e ? e - ser : (ptrdiff_t)strlen(ser)), ser);
    }
}

/* Runs ptxas on `ptx`; the cubin bytes go to `out`, its register and spill
 * report to `stats`. */
static bool run_ptxas(CgCtx *c, const char *ptx, size_t n, StrBuf *out, StrBuf *stats)
{
    StrBuf log, why;
    sb_init(&log);
    sb_init(&why);
    PtxasStatus st = ptxas_run(ptx, n, c->opts->target->name, out, &log, &why);
    if (st == PTXAS_OK) {
        stats_from_ptxas_log(log.data, stats);
    } else {
        /* No ptxas: this machine cannot make cubins (the JIT then falls back to
         * PTX). ptxas refusing PTX the backend made is a bug of ours; failing
         * to start it or to write its files is the environment's problem. */
        DiagKind kind = st == PTXAS_NOT_FOUND ? DIAG_UNSUPPORTED : st == PTXAS_REJECTED ? DIAG_INTERNAL : DIAG_USER;
        while (why.len && why.data[why.len - 1] == '\n') why.data[--why.len] = 0;
        diag_report(c->diag, kind, c->f->loc, "%s", why.data ? why.data : "ptxas failed");
    }
    bool ok = st == PTXAS_OK;
    sb_free(&log);
    sb_free(&why);
    return ok;
}

static bool emit_ptx(CgCtx *c, LLVMTargetMachineRef tm, StrBuf *out)
{
    char *msg = NULL;
    LLVMMemoryBufferRef buf = NULL;
    if (LLVMTargetMachineEmitToMemoryBuffer(tm, c->mod, LLVMAssemblyFile, &msg, &buf)) {
        diag_report(c->diag, DIAG_INTERNAL, c->f->loc, "codegen: PTX emission failed: %s", msg ? msg : "");
        LLVMDisposeMessage(msg);
        return false;
    }
    sb_putn(out, LLVMGetBufferStart(buf), LLVMGetBufferSize(buf));
    LLVMDisposeMemoryBuffer(buf);
    return true;
}

/* ---- dead values, before LLVM sees them ----
 * The lowering builds whole tiles eagerly: every register of a pointer tile
 * (a GEP and a sext each), of a mask, of an index, also when the only user
 * reads one register of it (pipelined loads take the first pointer and step
 * by constants; a masked copy takes the mask's first register per vector).
 * On the forward d = 128 a fifth of the IR is dead on arrival (opt -adce:
 * 12 334 -> 9 631 instructions, 1 124 of them GEPs), and every pass before
 * the first cleanup walks it. A backward sweep per block, repeated until
 * nothing changes, erases the unused GEPs, casts and extracts; what LLVM
 * then gets is the same live code in the same order, and the PTX of every
 * kernel of kiln-bench-compile is byte-identical. Unused integer arithmetic
 * (and, add, ...) stays: erasing it too moved 70 kernels' PTX, some by an
 * instruction or two, since InstCombine's one-use folds count dead users. */
static bool pure_opcode(LLVMOpcode op)
{
    switch (op) {
    case LLVMGetElementPtr: case LLVMSExt: case LLVMZExt: case LLVMTrunc: case LLVMBitCast:
    case LLVMExtractElement: case LLVMExtractValue:
        return true;
    default:
        return false;
    }
}

static void erase_dead(LLVMValueRef fn)
{
    for (bool changed = true; changed;) {
        changed = false;
        for (LLVMBasicBlockRef bb = LLVMGetLastBasicBlock(fn); bb; bb = LLVMGetPreviousBasicBlock(bb))
            for (LLVMValueRef i = LLVMGetLastInstruction(bb); i;) {
                LLVMValueRef prev = LLVMGetPreviousInstruction(i);
                if (!LLVMGetFirstUse(i) && pure_opcode(LLVMGetInstructionOpcode(i))) {
                    LLVMInstructionEraseFromParent(i);
                    changed = true;
                }
                i = prev;
            }
    }
}

bool cg_emit(CgCtx *c, CgResult *res)
{
    SupClock t0 = sup_clock();
    erase_dead(c->fn);
    char *msg = NULL;
    if (LLVMVerifyModule(c->mod, LLVMReturnStatusAction, &msg)) {
        diag_report(c->diag, DIAG_INTERNAL, c->f->loc, "codegen produced invalid LLVM IR: %s", msg ? msg : "");
        LLVMDisposeMessage(msg);
        return false;
    }
    LLVMDisposeMessage(msg);
    if (c->opts->dump_after && (strcmp(c->opts->dump_after, "all") == 0 ||
                                strcmp(c->opts->dump_after, "lower") == 0)) {
        char *s = LLVMPrintModuleToString(c->mod);
        sb_printf(&res->dumps, "; ----- LLVM IR after lower (%s), before LLVM's passes -----\n%s", c->f->name, s);
        LLVMDisposeMessage(s);
    }
    LLVMTargetMachineRef tm = make_tm(c);
    if (!tm) {
        diag_report(c->diag, DIAG_INTERNAL, c->f->loc, "codegen: cannot create the NVPTX target machine");
        return false;
    }
    LLVMTargetDataRef td = LLVMCreateTargetDataLayout(tm);
    LLVMSetModuleDataLayout(c->mod, td);
    LLVMDisposeTargetData(td);
    LLVMSetTarget(c->mod, CG_TRIPLE);
    LLVMPassBuilderOptionsRef po = LLVMCreatePassBuilderOptions();
    LLVMErrorRef e = LLVMRunPasses(c->mod, cg_pipeline, tm, po);
    LLVMDisposePassBuilderOptions(po);
    bool ok = true;
    if (e) {
        char *em = LLVMGetErrorMessage(e);
        diag_report(c->diag, DIAG_INTERNAL, c->f->loc, "codegen: LLVM pipeline failed: %s", em);
        LLVMDisposeErrorMessage(em);
        ok = false;
    }
    sup_time_line(&res->stats, "llvm-opt", sup_since(t0));
    SupClock t1 = sup_clock();
    if (ok && c->opts->stage == CG_STAGE_LLVM) {
        char *s = LLVMPrintModuleToString(c->mod);
        sb_puts(&res->out, s);
        LLVMDisposeMessage(s);
    } else if (ok && (c->opts->stage == CG_STAGE_PTX || c->opts->stage == CG_STAGE_CUBIN)) {
        StrBuf ptx;
        sb_init(&ptx);
        StrBuf *dst = c->opts->stage == CG_STAGE_PTX ? &res->out : &ptx;
        ok = emit_ptx(c, tm, dst);
        sup_time_line(&res->stats, "llvm-codegen", sup_since(t1));
        double t2 = sup_now_ms();
        if (ok && dst == &ptx) {
            ok = run_ptxas(c, ptx.data, ptx.len, &res->out, &res->stats);
            /* wall only: ptxas's CPU is its own process's */
            sb_printf(&res->stats, "time ptxas: %.3f ms\n", sup_now_ms() - t2);
        }
        sb_free(&ptx);
    }
    LLVMDisposeTargetMachine(tm);
    return ok;
}
