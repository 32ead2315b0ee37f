/* pass_table.c — the GPU passes: one table, one signature, one runner.
 *
 * What it does: gp_gpu_passes lists the passes in the order they run
 * (docs/tensor_cores.md); gp_run_gpu_passes runs a range of them (all of them
 * for a compile, one alone for its golden tests), checks the IR with
 * ir_verify after each (the GPU invariants included: layouts, SRAM ranges,
 * pipeline plans) and dumps the IR after the named ones (--dump-after).
 *
 * Invariants: a pass reads only the IR and GpPassCtx (so it can run alone
 * from IR text); its decisions are on the IR when it returns; a pass that
 * fails reports the reason to the Diag with its kind (DIAG_USER for a limit
 * the program exceeds, DIAG_INTERNAL for bugs).
 *
 * Example: gp_run_gpu_passes(f, &ctx, "pipeline", "pipeline", NULL, NULL, diag)
 * runs the pipeline pass alone on GPU IR parsed after remove-convert.
 */
#include "gpuir.h"

#include <string.h>

const GpPass gp_gpu_passes[] = {
    {"accelerate-dot", gp_pass_accelerate_dot}, /* tensor-core dots: MMA accumulator layouts */
    {"layout-assign", gp_pass_layout_assign},   /* every tile a layout, convert_layout where needed */
    {"remove-convert", gp_pass_remove_convert}, /* rematerialise, hoist, fold conversions */
    {"dot-rotate", gp_pass_dot_rotate},         /* sm_90a, --overlap: a loop's first dot one iteration early */
    {"pipeline", gp_pass_pipeline},             /* cp.async plan: pipeline.* attributes */
    {"dot-overlap", gp_pass_dot_overlap},       /* sm_90a dot in flight across ops (schedule option): wgmma.overlap */
    {"sram-alloc", gp_pass_sram_alloc},         /* shared memory: smem.* attributes */
    {"tma", gp_pass_tma},                       /* sm_90a TMA copies (schedule option): tma.map, tma.maps */
    {"pingpong", gp_pass_pingpong},             /* sm_90a warpgroup turns (schedule option): pingpong */
    {"warp-specialize", gp_pass_warp_specialize}, /* sm_90a producer warpgroup (schedule option): warp_spec */
};
const int gp_ngpu_passes = (int)(sizeof gp_gpu_passes / sizeof gp_gpu_passes[0]);

const GpPass *gp_gpu_pass(const char *name)
{
    for (int i = 0; name && i < gp_ngpu_passes; i++)
        if (strcmp(gp_gpu_passes[i].name, name) == 0) return &gp_gpu_passes[i];
    return NULL;
}

const char *gp_gpu_pass_name(int i) { return i >= 0 && i < gp_ngpu_passes ? gp_gpu_passes[i].name : NULL; }

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
    bool all_layouts = !pass || strcmp(pass, gp_gpu_passes[0].name) != 0;
    bool ok = (all_layouts ? ir_verify_gpu(f, &why) : ir_verify(f, &why)) && gp_verify_schedule(f, &why);
    if (!ok) diag_report(d, DIAG_INTERNAL, f->loc, "the GPU IR of '%s' %s%s fails the verifier:\n%s", f->name,
                         pass ? "after " : "as given", pass ? pass : "", why.data ? why.data : "");
    sb_free(&why);
    return ok;
}

bool gp_verify_gpu_ir(IrFunc *f, Diag *d) { return verify(f, NULL, d); }

bool gp_run_gpu_passes(IrFunc *f, const GpPassCtx *ctx, const char *first, const char *last, const char *dump,
                       StrBuf *dumps, Diag *d)
{
    const GpPass *p0 = first ? gp_gpu_pass(first) : &gp_gpu_passes[0];
    const GpPass *p1 = last ? gp_gpu_pass(last) : &gp_gpu_passes[gp_ngpu_passes - 1];
    if (!p0 || !p1 || p1 < p0) {
        diag_report(d, DIAG_INTERNAL, f->loc, "%s: no GPU pass range '%s'..'%s'", __func__, first ? first : "",
                    last ? last : "");
        return false;
    }
    for (const GpPass *p = p0; p <= p1; p++) {
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
