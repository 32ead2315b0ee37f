/* cg_emit.c — from the lowered LLVM module to text/PTX/cubin.
 *
 * Order: LLVMVerifyModule (a failure is an internal error carrying the
 * verifier's message), the target machine (nvptx64-nvidia-cuda, CPU =
 * the target's name, features = its PTX ISA, "+ptx80": sm_90a needs 8.0),
 * LLVM's "default<O3>" pipeline, then by stage: the module text, PTX through
 * LLVMTargetMachineEmitToMemoryBuffer, or a cubin from ptxas (ptxas_run,
 * compiler/support/ptxas.c, which also finds it).
 * LLVM is initialised once per process (pthread_once); -nvptx-short-ptr makes
 * shared-memory pointers 32-bit.
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

static pthread_once_t init_once = PTHREAD_ONCE_INIT;

static void llvm_init_once(void)
{
    LLVMInitializeNVPTXTargetInfo();
    LLVMInitializeNVPTXTarget();
    LLVMInitializeNVPTXTargetMC();
    LLVMInitializeNVPTXAsmPrinter();
    const char *argv[] = {"kiln", "-nvptx-short-ptr"};
    LLVMParseCommandLineOptions(2, argv, NULL);
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
    return LLVMCreateTargetMachine(t, CG_TRIPLE, c->opts->target->name, c->opts->target->ptx_features, LLVMCodeGenLevelAggressive,
                                   LLVMRelocDefault, LLVMCodeModelDefault);
}

/* ---- ptxas (compiler/support/ptxas.c) ---- */

/* ptxas -v reports what is only known after register allocation; add it to
 * the --stats lines ("Used 40 registers", "8 bytes spill stores, 8 bytes
 * spill loads"). A log in another shape adds nothing rather than guessing. */
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

bool cg_emit(CgCtx *c, CgResult *res)
{
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
        sb_printf(&res->dumps, "; ----- LLVM IR after lower (%s), before O3 -----\n%s", c->f->name, s);
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
    LLVMErrorRef e = LLVMRunPasses(c->mod, "default<O3>", tm, po);
    LLVMDisposePassBuilderOptions(po);
    bool ok = true;
    if (e) {
        char *em = LLVMGetErrorMessage(e);
        diag_report(c->diag, DIAG_INTERNAL, c->f->loc, "codegen: LLVM O3 pipeline failed: %s", em);
        LLVMDisposeErrorMessage(em);
        ok = false;
    }
    if (ok && c->opts->stage == CG_STAGE_LLVM) {
        char *s = LLVMPrintModuleToString(c->mod);
        sb_puts(&res->out, s);
        LLVMDisposeMessage(s);
    } else if (ok && c->opts->stage == CG_STAGE_PTX) {
        ok = emit_ptx(c, tm, &res->out);
    } else if (ok && c->opts->stage == CG_STAGE_CUBIN) {
        StrBuf ptx;
        sb_init(&ptx);
        ok = emit_ptx(c, tm, &ptx) && run_ptxas(c, ptx.data, ptx.len, &res->out, &res->stats);
        sb_free(&ptx);
    }
    LLVMDisposeTargetMachine(tm);
    return ok;
}
