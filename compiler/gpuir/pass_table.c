/* pass_table.c — the GPU passes: one table, one signature, one runner.
 *
 * What it does: cg_gpu_passes lists the passes in the order they run
 * (docs/tensor_cores.md); cg_run_gpu_passes runs a range of them (all of them
 * for a compile, one alone for its golden tests), checks the IR with
 * ir_verify after each (the GPU invariants included: layouts, SRAM ranges,
 * pipeline plans) and dumps the IR after the named ones (--dump-after).
 *
 * Invariants: a pass reads only the IR and CgPassCtx (so it can run alone
 * from IR text); its decisions are on the IR when it returns; a pass that
 * fails reports the reason to the Diag with its kind (DIAG_USER for a limit
 * the program exceeds, DIAG_INTERNAL for bugs).
 *
 * Example: cg_run_gpu_passes(f, &ctx, "pipeline", "pipeline", NULL, NULL, diag)
 * runs the pipeline pass alone on GPU IR parsed after remove-convert.
 */
#include "gpuir.h"

#include <string.h>

const CgPass cg_gpu_passes[] = {
    {"accelerate-dot", cg_pass_accelerate_dot}, /* tensor-core dots: MMA accumulator layouts */
    {"layout-assign", cg_pass_layout_assign},   /* every tile a layout, convert_layout where needed */
    {"remove-convert", cg_pass_remove_convert}, /* rematerialise, hoist, fold conversions */
    {"dot-rotate", cg_pass_dot_rotate},         /* sm_90a, --overlap: a loop's first dot one iteration early */
    {"pipeline", cg_pass_pipeline},             /* cp.async plan: pipeline.* attributes */
    {"dot-overlap", cg_pass_dot_overlap},       /* sm_90a dot in flight across ops (schedule option): wgmma.overlap */
    {"sram-alloc", cg_pass_sram_alloc},         /* shared memory: smem.* attributes */
    {"tma", cg_pass_tma},                       /* sm_90a TMA copies (schedule option): tma.map, tma.maps */
    {"pingpong", cg_pass_pingpong},             /* sm_90a warpgroup turns (schedule option): pingpong */
    {"warp-specialize", cg_pass_warp_specialize}, /* sm_90a producer warpgroup (schedule option): warp_spec */
};
const int cg_ngpu_passes = (int)(sizeof cg_gpu_passes / sizeof cg_gpu_passes[0]);

const CgPass *cg_gpu_pass(const char *name)
{
    for (int i = 0; name && i < cg_ngpu_passes; i++)
        if (strcmp(cg_gpu_passes[i].name, name) == 0) return &cg_gpu_passes[i];
    return NULL;
}

const char *cg_gpu_pass_name(int i) { return i >= 0 && i < cg_ngpu_passes ? cg_gpu_passes[i].name : NULL; }

static bool wants_dump(const char *dump, const char *pass)
{
    return dump && (strcmp(dump, "all") == 0 || strcmp(dump, pass) == 0);
}

/* `pass`: the pass just run (NULL: the IR as given, after every pass). From
 * layout-assign on, every tile value must have a layout. */
static bool verify(IrFunc *f, const char *pass, Diag *d)
{
    StrBuf why;
    sb_init(&why);
    bool all_layouts = !pass || strcmp(pass, cg_gpu_passes[0].name) != 0;
    bool ok = (all_layouts ? ir_verify_gpu(f, &why) : ir_verify(f, &why)) && cg_verify_schedule(f, &why);
    if (!ok) diag_report(d, DIAG_INTERNAL, f->loc, "the GPU IR of '%s' %s%s fails the verifier:\n%s", f->name,
                         pass ? "after " : "as given", pass ? pass : "", why.data ? why.data : "");
    sb_free(&why);
    return ok;
}

bool cg_verify_gpu_ir(IrFunc *f, Diag *d) { return verify(f, NULL, d); }

bool cg_run_gpu_passes(IrFunc *f, const CgPassCtx *ctx, const char *first, const char *last, const char *dump,
                       StrBuf *dumps, Diag *d)
{
    const CgPass *p0 = first ? cg_gpu_pass(first) : &cg_gpu_passes[0];
    const CgPass *p1 = last ? cg_gpu_pass(last) : &cg_gpu_passes[cg_ngpu_passes - 1];
    if (!p0 || !p1 || p1 < p0) {
        diag_report(d, DIAG_INTERNAL, f->loc, "%s: no GPU pass range '%s'..'%s'", __func__, first ? first : "",
                    last ? last : "");
        return false;
    }
    for (const CgPass *p = p0; p <= p1; p++) {
        bool ran = p->run(f, ctx, d);
        if (diag_flush_ice(d) || !ran) return false;
        if (!verify(f, p->name, d)) return false;
        if (dumps && wants_dump(dump, p->name)) {
            sb_printf(dumps, "// ----- GPU IR after %s (%s) -----\n", p->name, f->name);
            ir_print_func(dumps, f);
        }
    }
    return true;
}
