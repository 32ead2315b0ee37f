/* fuzz_compile.c — libFuzzer target: arbitrary bytes through the whole compile
 * pipeline of the driver, front end to PTX (no ptxas).
 *
 * Each input becomes a NUL-terminated source and is parsed once; then every
 * kernel in it (at most MAX_KERNELS) goes through kiln_compile, the
 * driver's pipeline: sema and lowering, the target-independent passes, the
 * GPU passes, lowering to LLVM IR (LLVMVerifyModule), O3 and PTX emission.
 * The target alternates, by a hash of the input (deterministic, so a finding
 * reproduces), between sm_90a and sm_80 and between the kernel's schedule and
 * 1, 2 or 8 warps, so both dot paths (wgmma and mma.sync) are reached; on sm_90a
 * half the inputs also take a combination of the schedule options (KilnSchedule:
 * no_wgmma, pingpong, mbarrier, overlap, tma, warp_specialize, lean_producer, seven more bits of the
 * hash; a combination the options refuse is a usage error, never an internal one).
 * KILN_FUZZ_PTXAS=1: the inputs that go to PTX go on through ptxas (KILN_EMIT_CUBIN),
 * whose rejection of Kiln's PTX is an internal error (issue 29: every combination
 * either compiles to PTX ptxas accepts or is refused naming the options).
 *
 * Findings: crashes, ASan/UBSan reports, timeouts (-timeout), out-of-memory
 * (-rss_limit_mb) and, always, an internal compiler error: the pipeline turns
 * every compiler bug into a DIAG_INTERNAL ("internal error") diagnostic, which
 * is never the right answer to a user's input. Half the inputs go to PTX,
 * half stop after the GPU passes (see stage(); KILN_FUZZ_STAGE=gpu-ir, llvm
 * or ptx fixes it).
 */
#include "kiln_compile.h"
#include "fuzz_input.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Inputs are sources: up to 1 MiB (past 64 KiB too, for the size limits). */
#define MAX_INPUT (1 << 20)
#define MAX_KERNELS 4

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* KILN_FUZZ_STAGE: "gpu-ir", "llvm", "ptx"; unset, half the inputs (by hash)
 * go to PTX and half stop after the GPU passes: LLVM's O3 and instruction
 * selection are most of the time per input (seconds for an attention kernel
 * under ASan) and are LLVM's code, not Kiln's. */
static KilnEmit stage(uint32_t h)
{
    static int emit = -1;
    if (emit < 0) {
        const char *s = getenv("KILN_FUZZ_STAGE");
        emit = !s ? 0 : !strcmp(s, "gpu-ir") ? KILN_EMIT_GPU_IR : !strcmp(s, "llvm") ? KILN_EMIT_LLVM : KILN_EMIT_PTX;
    }
    KilnEmit e = emit ? (KilnEmit)emit : (h >> 3) & 1 ? KILN_EMIT_GPU_IR : KILN_EMIT_PTX;
    return e == KILN_EMIT_PTX && getenv("KILN_FUZZ_PTXAS") ? KILN_EMIT_CUBIN : e;
}

/* sm_90a, half the inputs: the schedule options from seven bits of the hash. */
static void schedule(uint32_t h, KilnSchedule *s)
{
    if ((h & 1) || !((h >> 4) & 1)) return;
    uint32_t b = h >> 5;
    s->no_wgmma = b & 1, s->pingpong = (b >> 1) & 1, s->mbarrier = (b >> 2) & 1;
    s->overlap = (b >> 3) & 1, s->tma = (b >> 4) & 1, s->warp_specialize = (b >> 5) & 1;
    s->lean_producer = (b >> 6) & 1;
}

static uint32_t hash(const uint8_t *p, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 16777619u;
    return h;
}

/* One kernel through the driver; abort on an internal error. */
static void compile_kernel(const char *src, const char *kernel, uint32_t h)
{
    static const int warps[4] = {0, 1, 2, 8};
    KilnCompileOptions o;
    memset(&o, 0, sizeof o);
    o.kernel = kernel;
    o.arch = (h & 1) ? "sm_80" : "sm_90a";
    o.num_warps = warps[(h >> 1) & 3];
    o.emit = stage(h);
    schedule(h, &o.schedule);
    KilnCompileResult r;
    KilnStatus st = kiln_compile("fuzz.tile", src, &o, &r);
    if (st == KILN_ERR_INTERNAL || (r.diagnostics && strstr(r.diagnostics, "internal error"))) {
        const KilnSchedule *s = &o.schedule;
        fprintf(stderr, "internal error compiling kernel '%s' (%s, num_warps %d, schedule no_wgmma %d pingpong %d "
                "mbarrier %d overlap %d tma %d warp_specialize %d):\n%s", kernel, o.arch, o.num_warps, s->no_wgmma,
                s->pingpong, s->mbarrier, s->overlap, s->tma, s->warp_specialize, r.diagnostics ? r.diagnostics : "");
        abort();
    }
    kiln_compile_result_free(&r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > MAX_INPUT) return -1; /* rejected: not added to the corpus */
    /* The kernels' names, from a parse of their own (the driver parses again). */
    FuzzInput in;
    if (!fuzz_input_open(&in, data, size)) return 0;
    uint32_t h = hash(data, size);
    int n = 0;
    for (int i = 0; in.file && in.diag.nerrors == 0 && i < in.file->ndecls && n < MAX_KERNELS; i++) {
        const AstDecl *k = in.file->decls[i];
        if (k->kind != AST_KERNEL) continue;
        compile_kernel(in.src, k->name, h + (uint32_t)n);
        n++;
    }
    fuzz_input_close(&in);
    return 0;
}
