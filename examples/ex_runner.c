/* ex_runner.c — runs an ExProgram on the GPU (kiln_host_launch) or on the CPU
 * interpreter (kiln_run_cpu), with one argument list (positional, or a table of named
 * values put in the kernel's order); device buffers for the attention entry points.
 * Public API only. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "examples/run_examples.h"

void ex_runner_init(ExRunner *r)
{
    snprintf(r->device_name, sizeof r->device_name, "the CPU interpreter");
    if (r->force_cpu) return;
    KilnDevice *dev = NULL;
    if (kiln_init(&dev, 0) != KILN_OK) {
        snprintf(r->device_name, sizeof r->device_name, "the CPU interpreter (%s)", kiln_last_error());
        return;
    }
    KilnDeviceInfo info;
    if (kiln_device_info(dev, &info) == KILN_OK)
        snprintf(r->device_name, sizeof r->device_name, "GPU %s (%s)", info.name, info.arch);
    r->dev = dev;
}

void ex_runner_free(ExRunner *r)
{
    if (r->dev) kiln_shutdown(r->dev);
    r->dev = NULL;
}

/* The whole file, NUL-terminated (malloc'd), or NULL. */
static char *read_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = NULL;
    long n = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    if (n >= 0 && fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)n + 1)) != NULL) {
        if (fread(buf, 1, (size_t)n, f) == (size_t)n) buf[n] = 0;
        else {
            free(buf);
            buf = NULL;
        }
    }
    fclose(f);
    return buf;
}

/* The shipped program `rel` ("examples/vec_add.tile"), found by
 * kiln_data_path: an installed prefix's share/kiln, $KILN_DATA_DIR (--root),
 * or the source tree. Its path goes to `path` for diagnostics. */
static char *load_source(const char *rel, char *path, size_t n)
{
    if (kiln_data_path(rel, path, n) != KILN_OK) {
        fprintf(stderr, "kiln-examples: %s\n", kiln_last_error());
        return NULL;
    }
    char *src = read_text(path);
    if (!src) fprintf(stderr, "kiln-examples: cannot read %s\n", path);
    return src;
}

static void fill_options(const ExProgram *p, KilnCompileOptions *o, KilnDefine *defs)
{
    memset(o, 0, sizeof *o);
    for (int i = 0; i < p->ndefines; i++) {
        defs[i].name = p->defines[i].name;
        defs[i].value = p->defines[i].value;
    }
    o->kernel = p->kernel;
    o->defines = defs;
    o->ndefines = p->ndefines;
}

/* Inputs go in; outputs go both ways: they arrive poisoned from the host, so
 * unwritten elements stay NaN. */
static KilnHostArg to_host_arg(const ExArg *a)
{
    switch (a->kind) {
    case EX_BUF: return kiln_host_buf(a->p, a->bytes, a->is_output ? KILN_HOST_INOUT : KILN_HOST_IN);
    case EX_I64: return kiln_host_scalar(kiln_arg_i64(a->i));
    case EX_F32: return kiln_host_scalar(kiln_arg_f32((float)a->f));
    default: return kiln_host_scalar(kiln_arg_i32((int32_t)a->i));
    }
}

/* The same argument list as on the GPU, run by the interpreter (kiln_run_cpu). */
static int run_cpu(const ExProgram *p, const char *path, const char *src)
{
    KilnCompileOptions o;
    KilnDefine defs[16];
    fill_options(p, &o, defs);
    KilnHostArg *args = calloc((size_t)p->nargs + 1, sizeof *args);
    int rc = 1;
    if (!args) {
        fprintf(stderr, "kiln-examples: out of memory\n");
        return 1;
    }
    for (int i = 0; i < p->nargs; i++) args[i] = to_host_arg(&p->args[i]);
    if (kiln_run_cpu(path, src, &o, p->grid, args, p->nargs) == KILN_OK) rc = 0;
    else fprintf(stderr, "%s\n", kiln_last_error());
    free(args);
    return rc;
}

static int run_gpu(ExRunner *r, const ExProgram *p, const char *path, const char *src)
{
    KilnCompileOptions o;
    KilnDefine defs[16];
    fill_options(p, &o, defs);
    KilnModule *mod = NULL;
    KilnKernel *k = NULL;
    KilnHostArg *args = calloc((size_t)p->nargs + 1, sizeof *args);
    int rc = 1;
    if (!args) fprintf(stderr, "kiln-examples: out of memory\n");
    else if (kiln_module_compile(r->dev, path, src, &o, &mod) != KILN_OK ||
             kiln_kernel_get(mod, p->kernel, &k) != KILN_OK)
        fprintf(stderr, "%s\n", kiln_last_error());
    else {
        for (int i = 0; i < p->nargs; i++) args[i] = to_host_arg(&p->args[i]);
        if (kiln_host_launch(k, p->grid, args, p->nargs, NULL) == KILN_OK) rc = 0;
        else fprintf(stderr, "%s\n", kiln_last_error());
    }
    free(args);
    kiln_module_free(mod);
    return rc;
}

/* The kernel's runtime parameters, in order, from its signature (compiled to IR with the
 * options the run uses), each given the entry of `p->args` of the same name. NULL (and
 * the reason on stderr) when the program does not compile or a parameter has no entry. */
static ExArg *order_by_name(const ExProgram *p, const char *path, const char *src, int *nargs)
{
    KilnCompileOptions o;
    KilnDefine defs[16];
    fill_options(p, &o, defs);
    o.emit = KILN_EMIT_IR;
    KilnCompileResult res;
    ExArg *out = NULL;
    const KilnKernelInfo *ki = NULL;
    if (kiln_compile(path, src, &o, &res) != KILN_OK) {
        fprintf(stderr, "%s\n", res.diagnostics ? res.diagnostics : kiln_last_error());
        kiln_compile_result_free(&res);
        return NULL;
    }
    for (int i = 0; i < res.nkernels && !ki; i++)
        if (!strcmp(res.kernels[i].name, p->kernel)) ki = &res.kernels[i];
    if (!ki) fprintf(stderr, "kiln-examples: %s has no kernel '%s'\n", path, p->kernel);
    if (ki && (out = calloc((size_t)ki->nparams + 1, sizeof *out)) != NULL) {
        for (int i = 0; i < ki->nparams && out; i++) {
            int j = 0;
            while (j < p->nargs && strcmp(p->args[j].name, ki->params[i].name)) j++;
            if (j < p->nargs) {
                out[i] = p->args[j];
                continue;
            }
            fprintf(stderr, "kiln-examples: %s: no value for parameter '%s'\n", p->kernel, ki->params[i].name);
            free(out);
            out = NULL;
        }
        *nargs = ki->nparams;
    }
    kiln_compile_result_free(&res);
    return out;
}

int ex_run(ExRunner *r, const ExProgram *p, char *where, size_t where_size)
{
    char path[1024];
    char *src = load_source(p->path, path, sizeof path);
    if (!src) return 1;
    ExProgram ordered = *p;
    ExArg *args = NULL;
    if (p->by_name && (args = order_by_name(p, path, src, &ordered.nargs)) == NULL) {
        free(src);
        return 1;
    }
    if (args) ordered.args = args;
    int rc;
    if (r->dev) {
        rc = run_gpu(r, &ordered, path, src);
        snprintf(where, where_size, "on the GPU");
    } else {
        rc = run_cpu(&ordered, path, src);
        snprintf(where, where_size, "on the CPU interpreter");
    }
    free(args);
    free(src);
    return rc;
}

int ex_check(KilnStatus st, const char *what)
{
    if (st == KILN_OK) return 0;
    fprintf(stderr, "kiln-examples: %s: %s: %s\n", what, kiln_status_name(st), kiln_last_error());
    return 1;
}

int ex_dev_put(ExRunner *r, const void *host, size_t bytes, KilnDevPtr *out)
{
    *out = 0;
    if (ex_check(kiln_malloc(r->dev, bytes, out), "kiln_malloc")) return 1;
    return host ? ex_check(kiln_memcpy_htod(r->dev, *out, host, bytes), "kiln_memcpy_htod")
                : ex_check(kiln_memset(r->dev, *out, 0xFF, bytes), "kiln_memset");
}

int ex_dev_get(ExRunner *r, void *host, KilnDevPtr src, size_t bytes)
{
    return ex_check(kiln_memcpy_dtoh(r->dev, host, src, bytes), "kiln_memcpy_dtoh");
}
