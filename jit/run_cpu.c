/* run_cpu.c — kiln_run_cpu: compile a .tile kernel to Tile IR and run it on
 * the CPU interpreter (compiler/interp), through the public API.
 *
 * It takes the very argument list kiln_host_launch takes (KilnHostArg, in
 * parameter order), with the same meaning, so a host program runs one list on
 * the GPU or, without one, on the CPU: IN buffers are read from a copy (a
 * kernel that writes one leaves the caller's data alone, as on the device),
 * OUT buffers start as 0xFF bytes (NaN for floats) and are copied back,
 * INOUT buffers are used in place. It lives in the jit layer because it needs
 * both the compile driver and the runtime's argument checks.
 *
 * rt_cpu_compile / rt_cpu_run split the two steps for the attention calls'
 * CPU runs (rt_attn_run_cpu), which bind their arguments by the compiled
 * kernel's parameter names: the front end runs once per call.
 *
 * Invariants: the list is checked (kiln_host_args_check, then count and kind
 * against the kernel's parameters) before anything runs; every scratch copy is
 * freed on every path; a failure of the program itself (an access outside
 * every buffer, a failed device_assert) is KILN_ERR_KERNEL with the
 * interpreter's message (program, op, source location).
 *
 * Example: vec_add(X: *f32, Y: *f32, Z: *f32, n: i32):
 *   KilnHostArg a[4] = {kiln_host_buf(x, 4 * n, KILN_HOST_IN), kiln_host_buf(y, 4 * n, KILN_HOST_IN),
 *                       kiln_host_buf(z, 4 * n, KILN_HOST_OUT), kiln_host_scalar(kiln_arg_i32(n))};
 *   kiln_run_cpu("vec_add.tile", src, &opts, grid, a, 4);   // z now holds x + y
 */
#include "jit_internal.h"

#include "compiler/driver/driver.h"
#include "compiler/interp/interp.h"

#include <stdlib.h>
#include <string.h>

static bool is_int_kind(KilnParamKind k) { return k != KILN_PARAM_PTR && k != KILN_PARAM_F32 && k != KILN_PARAM_F64
                                                  && k != KILN_PARAM_F16 && k != KILN_PARAM_BF16; }

/* The interpreter's value of scalar `a` for parameter `p` (checked: kinds fit). */
static KilnStatus scalar_arg(const IrFunc *f, int i, const KilnArg *a, InterpArg *out)
{
    const IrValue *p = f->params[i];
    IrElem e = (IrElem)p->type.elem;
    const char *pname = p->name ? p->name : "?";
    if (e == IR_PTR)
        return kiln_set_error(KILN_ERR_ARGS, "kernel %s: parameter %s is a pointer: pass a buffer (kiln_host_buf)",
                              f->name, pname);
    if (ir_elem_is_int(e)) {
        if (!is_int_kind(a->kind))
            return kiln_set_error(KILN_ERR_ARGS, "kernel %s: parameter %s (%s) takes an integer, got %s", f->name,
                                  pname, ir_elem_name(e), rt_param_kind_name(a->kind));
        bool u = a->kind == KILN_PARAM_U8 || a->kind == KILN_PARAM_U16 || a->kind == KILN_PARAM_U32 ||
                 a->kind == KILN_PARAM_U64;
        out->i = u ? (int64_t)a->v.u : a->v.i;
        out->f = (double)out->i;
        return KILN_OK;
    }
    switch (a->kind) {
    case KILN_PARAM_F32: out->f = a->v.f32; break;
    case KILN_PARAM_F64: out->f = a->v.f64; break;
    case KILN_PARAM_F16: out->f = kiln_f16_to_f32((uint16_t)a->v.u); break;
    case KILN_PARAM_BF16: out->f = kiln_bf16_to_f32((uint16_t)a->v.u); break;
    default:
        return kiln_set_error(KILN_ERR_ARGS, "kernel %s: parameter %s (%s) takes a float, got %s", f->name, pname,
                              ir_elem_name(e), rt_param_kind_name(a->kind));
    }
    return KILN_OK;
}

/* Bind args to f's parameters: buffers get their working memory (scratch[i]
 * when the direction needs a copy), scalars their values. */
static KilnStatus bind(const IrFunc *f, const KilnHostArg *args, int nargs, InterpArg *iargs, InterpBuffer *bufs,
                       int *nbufs, void **scratch)
{
    int own = f->nparams - (ir_attr_get(&f->attrs, IR_ATTR_PERSISTENT) ? 3 : 0);   /* persistent: + the grid */
    if (nargs != own) return kiln_set_error(KILN_ERR_ARGS, "kernel %s takes %d arguments, got %d", f->name, own, nargs);
    for (int i = 0; i < nargs; i++) {
        const KilnHostArg *a = &args[i];
        const IrValue *p = f->params[i];
        memset(&iargs[i], 0, sizeof iargs[i]);
        if (a->value.kind != KILN_PARAM_PTR) {
            KilnStatus st = scalar_arg(f, i, &a->value, &iargs[i]);
            if (st != KILN_OK) return st;
            continue;
        }
        if (p->type.elem != IR_PTR)
            return kiln_set_error(KILN_ERR_ARGS, "kernel %s: parameter %s (%s) is a scalar, got a buffer", f->name,
                                  p->name ? p->name : "?", ir_elem_name((IrElem)p->type.elem));
        void *mem = a->host;
        if (a->dir != KILN_HOST_INOUT) {
            if (!(scratch[i] = malloc(a->bytes))) return kiln_set_error(KILN_ERR_INTERNAL, "out of host memory");
            if (a->dir == KILN_HOST_IN) memcpy(scratch[i], a->host, a->bytes);
            else memset(scratch[i], 0xFF, a->bytes);
            mem = scratch[i];
        }
        iargs[i].ptr = mem;
        bufs[(*nbufs)++] = (InterpBuffer){mem, a->bytes, p->name ? p->name : "buffer"};
    }
    return KILN_OK;
}

/* A persistent kernel (pass "persistent") on the interpreter: the logical grid goes to
 * its three last parameters (iargs[nargs..]) and RT_CPU_PERSISTENT_PROGRAMS programs (at
 * most the logical grid's) share the tiles, so each runs several of them, the last round
 * short, as on a GPU whose resident programs do not divide the tiles. */
#define RT_CPU_PERSISTENT_PROGRAMS 3

static void persistent_grid(const int grid[3], InterpArg *tail, int out[3])
{
    int64_t total = 1;
    for (int i = 0; i < 3; i++) {
        int g = grid && grid[i] > 0 ? grid[i] : 1;
        tail[i] = (InterpArg){.i = g, .f = g};
        total *= g;
    }
    out[0] = (int)(total < RT_CPU_PERSISTENT_PROGRAMS ? total : RT_CPU_PERSISTENT_PROGRAMS);
    out[1] = out[2] = 1;
}

static KilnStatus run(const char *path, const IrFunc *f, const int grid[3], const KilnHostArg *args, int nargs)
{
    InterpArg *iargs = calloc((size_t)nargs + 4, sizeof *iargs);
    InterpBuffer *bufs = calloc((size_t)nargs + 1, sizeof *bufs);
    void **scratch = calloc((size_t)nargs + 1, sizeof *scratch);
    int nbufs = 0;
    KilnStatus st = iargs && bufs && scratch ? bind(f, args, nargs, iargs, bufs, &nbufs, scratch)
                                             : kiln_set_error(KILN_ERR_INTERNAL, "out of host memory");
    if (st == KILN_OK) {
        InterpOptions io = {.grid = {grid ? grid[0] : 1, grid ? grid[1] : 1, grid ? grid[2] : 1},
                            .buffers = bufs, .nbuffers = nbufs};
        int all = nargs;
        if (ir_attr_get(&f->attrs, IR_ATTR_PERSISTENT)) {
            persistent_grid(grid, iargs + nargs, io.grid);
            all += 3;
        }
        StrBuf err;
        sb_init(&err);
        if (interp_run(f, iargs, all, &io, &err))
            st = kiln_set_error(KILN_ERR_KERNEL, "%s: %s", path, err.data ? err.data : "the interpreter failed");
        sb_free(&err);
    }
    for (int i = 0; st == KILN_OK && i < nargs; i++)
        if (args[i].value.kind == KILN_PARAM_PTR && args[i].dir == KILN_HOST_OUT)
            memcpy(args[i].host, scratch[i], args[i].bytes);
    for (int i = 0; scratch && i < nargs; i++) free(scratch[i]);
    free(scratch);
    free(bufs);
    free(iargs);
    return st;
}

struct RtCpuKernel {
    Arena arena;            /* the module */
    const IrFunc *f;
    KilnKernelInfo info;
    char *path;
};

void rt_cpu_free(RtCpuKernel *k)
{
    if (!k) return;
    arena_free(&k->arena);
    free(k->info.params);
    free(k->path);
    free(k);
}

KilnStatus rt_cpu_compile(const char *api, const char *path, const char *src, const KilnCompileOptions *opts,
                          RtCpuKernel **out)
{
    *out = NULL;
    KilnCompileOptions o = *opts;
    o.emit = KILN_EMIT_IR;
    o.dump_after = NULL;
    RtCpuKernel *k = calloc(1, sizeof *k);
    if (!k || !(k->path = strdup(path))) {
        free(k);
        return kiln_set_error(KILN_ERR_INTERNAL, "out of host memory");
    }
    arena_init(&k->arena);
    Diag d;
    diag_init(&d, path, src);
    StrBuf text, dumps;
    sb_init(&text);
    sb_init(&dumps);
    IrModule *m = NULL;
    KilnStatus st = kiln_compile_ir(&k->arena, &d, src, &o, &m, &text, &dumps);
    if (st != KILN_OK && api) {
        kiln_set_error(st, "%s: cannot build %s:\n", api, path);
        rt_append_error(d.out.data ? d.out.data : "");
    } else if (st != KILN_OK) {
        kiln_set_error(st, "%s", d.out.data && d.out.data[0] ? d.out.data : "kiln_run_cpu: the compile failed");
    } else if (!m || m->nfuncs != 1) {
        st = kiln_set_error(KILN_ERR_USAGE, "kiln_run_cpu: %s has %d kernels: name one in opts->kernel", path,
                            m ? m->nfuncs : 0);
    } else {
        k->f = m->funcs[0];
        kiln_describe_kernel(k->f, 0, &k->info);
        if (k->f->nparams && !k->info.params) st = kiln_set_error(KILN_ERR_INTERNAL, "out of host memory");
    }
    sb_free(&text);
    sb_free(&dumps);
    diag_free(&d);
    if (st != KILN_OK) rt_cpu_free(k);
    else *out = k;
    return st;
}

const KilnKernelInfo *rt_cpu_kernel_info(const RtCpuKernel *k) { return &k->info; }

/* The list as kiln_host_launch checks it, and a grid of no negative size. */
static KilnStatus check_launch(const int grid[3], const KilnHostArg *args, int nargs)
{
    KilnStatus st = kiln_host_args_check(args, nargs);
    if (st != KILN_OK) return st;
    for (int i = 0; grid && i < 3; i++)
        if (grid[i] < 0) return kiln_set_error(KILN_ERR_USAGE, "kiln_run_cpu: grid[%d] is %d", i, grid[i]);
    return KILN_OK;
}

KilnStatus rt_cpu_run(const RtCpuKernel *k, const int grid[3], const KilnHostArg *args, int nargs)
{
    KilnStatus st = check_launch(grid, args, nargs);
    return st == KILN_OK ? run(k->path, k->f, grid, args, nargs) : st;
}

KilnStatus kiln_run_cpu(const char *path, const char *src, const KilnCompileOptions *opts, const int grid[3],
                        const KilnHostArg *args, int nargs)
{
    if (!src || !opts) return kiln_set_error(KILN_ERR_USAGE, "kiln_run_cpu: NULL source or options");
    if (!path) path = "<input>";
    KilnStatus st = check_launch(grid, args, nargs);   /* a bad list is refused before compiling */
    if (st != KILN_OK) return st;
    RtCpuKernel *k;
    if ((st = rt_cpu_compile(NULL, path, src, opts, &k)) != KILN_OK) return st;
    st = run(k->path, k->f, grid, args, nargs);
    rt_cpu_free(k);
    return st;
}
