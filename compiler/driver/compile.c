/* compile.c — kiln_compile: the whole pipeline, spelled out in one function.
 *
 *   source --ast_parse--> AST --lang_compile--> Tile IR (one IrFunc per kernel)
 *          --pass_pipeline (verifier after each pass)--> optimised Tile IR
 *          --cg_compile--> GPU IR -> LLVM IR -> PTX (-> cubin)
 *
 * Each arrow can be the last one (KilnCompileOptions.emit). The library never
 * prints: diagnostics, dumps and statistics come back as strings in the result.
 * One Arena per call holds every AST node and IR op; it is freed before return.
 */
#include "kiln.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen.h"
#include "ir/ir.h"
#include "passes/passes.h"
#include "support/ptxas.h"
#include "support/schedule.h"
#include "support/target.h"
#include "../lang/lang.h"
#include "driver.h"

static char *dup_or_null(const StrBuf *sb)
{
    if (!sb->data || sb->len == 0) return NULL;
    char *p = malloc(sb->len + 1);
    if (p) memcpy(p, sb->data, sb->len + 1);
    return p;
}

static KilnParamKind param_kind(IrType t)
{
    switch ((IrElem)t.elem) {
    case IR_PTR: return KILN_PARAM_PTR;
    case IR_I1: return KILN_PARAM_I1;
    case IR_I8: return KILN_PARAM_I8;
    case IR_I16: return KILN_PARAM_I16;
    case IR_I64: return KILN_PARAM_I64;
    case IR_U8: return KILN_PARAM_U8;
    case IR_U16: return KILN_PARAM_U16;
    case IR_U32: return KILN_PARAM_U32;
    case IR_U64: return KILN_PARAM_U64;
    case IR_F16: return KILN_PARAM_F16;
    case IR_BF16: return KILN_PARAM_BF16;
    case IR_F32: return KILN_PARAM_F32;
    case IR_F64: return KILN_PARAM_F64;
    default: return KILN_PARAM_I32;
    }
}

/* The kernel's TMA tensor maps: the recipes the runtime encodes them from at
 * launch (plain data in KilnKernelInfo: the runtime includes no compiler header). */
static void describe_tmaps(const CgResult *cr, KilnKernelInfo *k)
{
    k->ntmaps = cr->ntmaps < KILN_MAX_TMAPS ? cr->ntmaps : KILN_MAX_TMAPS;
    for (int i = 0; i < k->ntmaps; i++) {
        const struct CgTmaRecipe *c = &cr->tmaps[i];
        KilnTensorMapInfo *m = &k->tmaps[i];
        m->rank = c->rank;
        m->base_param = c->base_param;
        m->elem_bytes = c->elem_bytes;
        m->is_bf16 = c->is_bf16;
        m->swizzle_bytes = 128;
        for (int d = 0; d < c->rank && d < 5; d++) {
            m->dims[d] = (KilnTmapValue){c->dim_param[d], c->dim_k[d]};
            m->box[d] = c->box[d];
            if (d) m->strides[d - 1] = (KilnTmapValue){c->stride_param[d - 1], c->stride_k[d - 1]};
        }
        m->nonneg_params = c->nonneg_params;
    }
}

/* The signature the runtime checks launch arguments against (params malloc'd). */
void kiln_describe_kernel(const IrFunc *f, int smem, KilnKernelInfo *k)
{
    memset(k, 0, sizeof *k);
    snprintf(k->name, sizeof k->name, "%s", f->name);
    k->num_warps = f->sched.num_warps;
    k->num_stages = f->sched.num_stages;
    k->smem_bytes = smem;
    k->nparams = f->nparams;
    k->params = f->nparams ? calloc((size_t)f->nparams, sizeof(KilnParam)) : NULL;
    for (int i = 0; i < f->nparams && k->params; i++) {
        const IrValue *p = f->params[i];
        KilnParam *kp = &k->params[i];
        snprintf(kp->name, sizeof kp->name, "%s", p->name ? p->name : "?");
        kp->kind = param_kind(p->type);
        if (p->type.elem == IR_PTR) kp->pointee_bits = ir_elem_bits((IrElem)p->type.pointee);
    }
}

/* Keep only the kernel the caller asked for; GPU stages need exactly one. */
static KilnStatus select_kernels(IrModule *m, const KilnCompileOptions *o, Diag *d)
{
    bool gpu = o->emit >= KILN_EMIT_GPU_IR;
    if (m->nfuncs == 0) {
        diag_error(d, (SrcLoc){0}, o->kernel ? "no kernel named '%s' in this file" : "this file has no kernel",
                   o->kernel);
        return KILN_ERR_COMPILE;
    }
    if (gpu && m->nfuncs > 1) {
        StrBuf names;
        sb_init(&names);
        for (int i = 0; i < m->nfuncs; i++) sb_printf(&names, "%s%s", i ? ", " : "", m->funcs[i]->name);
        diag_error(d, (SrcLoc){0}, "this file has several kernels (%s); choose one with -k NAME", names.data);
        sb_free(&names);
        return KILN_ERR_COMPILE;
    }
    return KILN_OK;
}

/* t_front: the front end's time (parse, sema, Tile IR passes), the first of
 * the "time <phase>" lines in the stats; the backend adds its own. The caller
 * owns *cr (zeroed) and frees its buffers, also when an allocation failing in
 * the backend unwinds past this function (support.h): its stats, the GPU
 * passes' --dump-after dumps and the output would leak if they lived here. */
static KilnStatus run_backend(IrFunc *f, const Target *t, const KilnCompileOptions *o, KilnCompileResult *r,
                              Diag *d, double t_front, CgResult *cr)
{
    static const CgStage stages[] = {
        [KILN_EMIT_GPU_IR] = CG_STAGE_GPU_IR, [KILN_EMIT_LLVM] = CG_STAGE_LLVM,
        [KILN_EMIT_PTX] = CG_STAGE_PTX, [KILN_EMIT_CUBIN] = CG_STAGE_CUBIN,
    };
    CgOptions co = {.target = t, .stage = stages[o->emit], .dump_after = o->dump_after, .sched = o->schedule};
    sb_printf(&cr->stats, "time front-end: %.3f ms\n", t_front);
    /* The backend reports into the same Diag as the front end, at the op or
     * kernel it is about; the kinds of its errors give the status. */
    int internal = d->ninternal, unsupported = d->nunsupported;
    bool ok = cg_compile(f, &co, cr, d);
    if (ok && (sb_failed(&cr->out) || sb_failed(&cr->dumps))) /* never hand on a cut-short PTX */
        INTERNAL_ERROR("out of host memory: the output was cut short");
    KilnStatus st = KILN_OK;
    if (!ok) {
        st = d->ninternal > internal ? KILN_ERR_INTERNAL
             : d->nunsupported > unsupported ? KILN_ERR_UNSUPPORTED : KILN_ERR_COMPILE;
    } else {
        r->output_size = cr->out.len;
        r->output = malloc(cr->out.len + 1);
        if (r->output) {
            if (cr->out.len) memcpy(r->output, cr->out.data, cr->out.len);
            r->output[cr->out.len] = 0;
        }
        r->stats = dup_or_null(&cr->stats);
        if (cr->dumps.len) {
            char *old = r->dumps;
            StrBuf all;
            sb_init(&all);
            if (old) sb_puts(&all, old);
            sb_putn(&all, cr->dumps.data, cr->dumps.len);
            free(old);
            r->dumps = sb_steal(&all);
        }
        kiln_describe_kernel(f, cr->smem_bytes, &r->kernels[0]);
        describe_tmaps(cr, &r->kernels[0]);
        if (cr->num_warps > 0) r->kernels[0].num_warps = cr->num_warps;   /* warp_spec: + the producer */
    }
    return st;
}

static KilnStatus finish(KilnStatus st, Diag *d, KilnCompileResult *r)
{
    if (diag_flush_ice(d) && st == KILN_OK) st = KILN_ERR_INTERNAL;
    if (st == KILN_OK && d->ninternal) st = KILN_ERR_INTERNAL;
    if (st == KILN_OK && d->nerrors) st = KILN_ERR_COMPILE;
    r->diagnostics = dup_or_null(&d->out);
    return st;
}

/* --dump-after takes "all" or a pass name: a target-independent pass
 * (compiler/passes), a GPU pass (codegen's pass table) or "lower" (the LLVM
 * module the lowering built, before LLVM's passes: cg_emit.c); anything else
 * would dump nothing and say nothing, so it is a usage error listing the names. */
static bool dump_after_known(const char *name, Diag *d)
{
    if (!name || !strcmp(name, "all") || !strcmp(name, "lower") || pass_find(name)) return true;
    for (int i = 0; gp_gpu_pass_name(i); i++)
        if (!strcmp(name, gp_gpu_pass_name(i))) return true;
    StrBuf names;
    sb_init(&names);
    pass_list_names(&names);
    for (int i = 0; gp_gpu_pass_name(i); i++) sb_printf(&names, ", %s", gp_gpu_pass_name(i));
    sb_puts(&names, ", lower");
    diag_error(d, (SrcLoc){0}, "unknown pass '%s' for --dump-after (expected all, %s)", name,
               names.data ? names.data : "");
    sb_free(&names);
    return false;
}

/* Every count/array pair of KilnCompileOptions, before anything reads them: a
 * negative count, a count without its array, or an entry without its strings
 * is a usage error naming the field (the caller's bug, never a crash). */
static bool option_arrays_ok(const KilnCompileOptions *o, Diag *d)
{
    if (o->ndefines < 0 || (o->ndefines > 0 && !o->defines)) {
        diag_error(d, (SrcLoc){0}, "bad defines: ndefines %d but no array", o->ndefines);
        return false;
    }
    for (int i = 0; i < o->ndefines; i++)
        if (!o->defines[i].name || !o->defines[i].value) {
            diag_error(d, (SrcLoc){0}, "bad defines: defines[%d] has a NULL %s", i,
                       o->defines[i].name ? "value" : "name");
            return false;
        }
    if (o->nhints < 0 || (o->nhints > 0 && !o->hints)) {
        diag_error(d, (SrcLoc){0}, "bad hints: %d hints but no array", o->nhints);
        return false;
    }
    for (int i = 0; i < o->nhints; i++)
        if (!o->hints[i].name) {
            diag_error(d, (SrcLoc){0}, "bad hints: hints[%d] has a NULL name", i);
            return false;
        }
    if (o->ninclude_dirs < 0 || (o->ninclude_dirs > 0 && !o->include_dirs)) {
        diag_error(d, (SrcLoc){0}, "bad include dirs: %d dirs but no array", o->ninclude_dirs);
        return false;
    }
    return true;
}

static KilnStatus compile_ir(Arena *arena, Diag *d, const char *src, const KilnCompileOptions *opts,
                             IrModule **mod_out, StrBuf *out, StrBuf *dumps)
{
    *mod_out = NULL;
    StrBuf err;
    sb_init(&err);
    KilnStatus st = KILN_OK;
    if (!dump_after_known(opts->dump_after, d)) {
        st = KILN_ERR_USAGE;
        goto done;
    }

    /* 1. parse (--emit ast: the file as written; else with its imported modules) */
    if (!option_arrays_ok(opts, d)) {
        st = KILN_ERR_USAGE;
        goto done;
    }
    AstFile *ast = opts->emit == KILN_EMIT_AST ? ast_parse(arena, d, d->file, src)
                                               : kiln_modules_load(arena, d, src, opts, NULL);
    if (!ast || d->nerrors) { st = KILN_ERR_COMPILE; goto done; }
    if (opts->emit == KILN_EMIT_AST) {
        ast_print(out, ast);
        goto done;
    }

    /* 2. sema + lowering to Tile IR, specialised on the defines and hints */
    LangOptions lo = {.kernel = opts->kernel, .ndefines = opts->ndefines,
                      .num_warps = opts->num_warps, .num_stages = opts->num_stages};
    LangDefine *defs = opts->ndefines ? ARENA_ARRAY(arena, LangDefine, opts->ndefines) : NULL;
    for (int i = 0; i < opts->ndefines; i++) {
        defs[i].name = opts->defines[i].name;
        defs[i].value = opts->defines[i].value;
    }
    lo.defines = defs;
    LangHint *hints = opts->nhints ? ARENA_ARRAY(arena, LangHint, opts->nhints) : NULL;
    for (int i = 0; i < opts->nhints; i++) {
        hints[i].name = opts->hints[i].name;
        hints[i].divisibility = opts->hints[i].divisibility;
        hints[i].equals_one = opts->hints[i].equals_one != 0;
    }
    lo.hints = hints;
    lo.nhints = opts->nhints;
    IrModule *m = lang_compile(arena, d, ast, &lo);
    if (!m || d->nerrors) { st = KILN_ERR_COMPILE; goto done; }
    if ((st = select_kernels(m, opts, d)) != KILN_OK) goto done;

    /* 3. target-independent passes, verifier between each */
    for (int i = 0; i < m->nfuncs; i++) {
        if (!ir_verify(m->funcs[i], &err)) {
            diag_report(d, DIAG_INTERNAL, m->funcs[i]->loc, "IR from the front end is invalid:\n%s", err.data);
            st = KILN_ERR_INTERNAL;
            goto done;
        }
        if (!opts->no_opt && !pass_pipeline(m->funcs[i], opts->dump_after, dumps, &err)) {
            diag_error(d, m->funcs[i]->loc, "%s", err.data ? err.data : "internal error in a pass");
            st = KILN_ERR_INTERNAL;
            goto done;
        }
    }
    *mod_out = m;
done:
    sb_free(&err);
    return st;
}

static _Thread_local int64_t front_end_runs; /* kiln_front_end_runs */

int64_t kiln_front_end_runs(void) { return front_end_runs; }

/* Steps 1-3 under their own out-of-memory catch: the CPU runs (kiln run,
 * kiln_run_cpu) call this without kiln_compile around it. */
KilnStatus kiln_compile_ir(Arena *arena, Diag *d, const char *src, const KilnCompileOptions *opts,
                           IrModule **mod_out, StrBuf *out, StrBuf *dumps)
{
    front_end_runs++;
    volatile KilnStatus st = KILN_ERR_INTERNAL; /* read after a longjmp */
    SupOomCatch oom;
    if (SUP_OOM_TRY(&oom)) st = compile_ir(arena, d, src, opts, mod_out, out, dumps);
    else *mod_out = NULL; /* "out of host memory" is recorded: diag_flush_ice reports it */
    sup_oom_pop(&oom);
    if (st == KILN_ERR_INTERNAL) diag_flush_ice(d);
    return st;
}

KilnStatus kiln_compile(const char *path, const char *src, const KilnCompileOptions *opts,
                        KilnCompileResult *r)
{
    if (!r) return KILN_ERR_USAGE;
    memset(r, 0, sizeof *r);
    if (!src || !opts) return KILN_ERR_USAGE;
    if (opts->emit < KILN_EMIT_AUTO || opts->emit > KILN_EMIT_CUBIN) return KILN_ERR_USAGE;
    /* 0 (a zeroed KilnCompileOptions) means what kiln_module_compile makes of it:
     * the code a device loads, a cubin when ptxas is found, else PTX. */
    KilnCompileOptions resolved;
    if (opts->emit == KILN_EMIT_AUTO) {
        char *ptxas = ptxas_find(NULL);
        resolved = *opts;
        resolved.emit = ptxas ? KILN_EMIT_CUBIN : KILN_EMIT_PTX;
        free(ptxas);
        opts = &resolved;
    }
    Diag d;
    diag_init(&d, path ? path : "<input>", src);
    KilnStatus st = KILN_OK;
    /* The one place the arch string is read: everything below gets the Target. */
    const Target *target = tgt_parse(opts->arch);
    if (!target) {
        StrBuf names;
        sb_init(&names);
        tgt_list_names(&names);
        diag_error(&d, (SrcLoc){0}, "unknown architecture '%s' (expected %s)", opts->arch, names.data);
        sb_free(&names);
        st = finish(KILN_ERR_USAGE, &d, r);
        diag_free(&d);
        return st;
    }
    /* The schedule options' rules (schedule.h): a refused combination names both options. */
    char why[256];
    if (!sched_resolve(&opts->schedule, NULL, NULL, why, sizeof why)) {
        diag_error(&d, (SrcLoc){0}, "%s", why);
        st = finish(KILN_ERR_USAGE, &d, r);
        diag_free(&d);
        return st;
    }
    ice_clear();
    Arena arena;
    arena_init(&arena);
    StrBuf out, dumps;
    sb_init(&out);
    sb_init(&dumps);
    IrModule *m = NULL;
    CgResult cr; /* the backend's buffers: here, so that an unwind out of it frees them too */
    memset(&cr, 0, sizeof cr);
    SupOomCatch oom; /* an arena allocation failing anywhere below lands in the else (support.h) */
    if (SUP_OOM_TRY(&oom)) {
        double t0 = sup_now_ms();
        st = kiln_compile_ir(&arena, &d, src, opts, &m, &out, &dumps);
        double t_front = sup_now_ms() - t0;
        if (st == KILN_OK && m) {
            r->nkernels = m->nfuncs;
            r->kernels = calloc((size_t)m->nfuncs, sizeof(KilnKernelInfo));
            if (opts->emit == KILN_EMIT_IR) {
                ir_print_module(&out, m);
                for (int i = 0; i < m->nfuncs && r->kernels; i++) kiln_describe_kernel(m->funcs[i], 0, &r->kernels[i]);
            } else if (r->kernels) {
                r->dumps = dup_or_null(&dumps);
                st = run_backend(m->funcs[0], target, opts, r, &d, t_front, &cr); /* 4. the GPU backend */
            }
        }
    } else {
        st = KILN_ERR_INTERNAL; /* the recorded "out of host memory" is reported by finish() */
    }
    sup_oom_pop(&oom);
    if (sb_failed(&out) || sb_failed(&dumps)) INTERNAL_ERROR("out of host memory: the output was cut short");
    if (st == KILN_OK && !r->output) {
        r->output_size = out.len;
        r->output = sb_steal(&out);
    }
    if (!r->dumps) r->dumps = dup_or_null(&dumps);
    sb_free(&out);
    sb_free(&dumps);
    sb_free(&cr.out);
    sb_free(&cr.dumps);
    sb_free(&cr.stats);
    arena_free(&arena);
    st = finish(st, &d, r);
    diag_free(&d);
    return st;
}

void kiln_compile_result_free(KilnCompileResult *r)
{
    if (!r) return;
    free(r->output);
    free(r->diagnostics);
    free(r->dumps);
    free(r->stats);
    for (int i = 0; i < r->nkernels && r->kernels; i++) free(r->kernels[i].params);
    free(r->kernels);
    memset(r, 0, sizeof *r);
}
