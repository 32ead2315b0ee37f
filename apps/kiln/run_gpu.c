/* run_gpu.c — the GPU path of `kiln run`, through the public runtime API only.
 *
 * The kernel is compiled with kiln_module_compile (so the on-disk cache and
 * launch-time specialisation apply, as for any host program) and run with
 * kiln_host_launch: the generated buffers are copied to the device, come back
 * into the same host buffers, and the caller prints them. No GPU (no driver,
 * no device) is not an error here: it returns -1 with the reason so the
 * interpreter runs instead.
 */
#include <stdio.h>
#include <string.h>

#include "run_args.h"

static KilnArg scalar_arg(IrType t, const RunBuf *b)
{
    switch ((IrElem)t.elem) {
    /* integers were range-checked against their type (run.c parse_int) */
    case IR_I64: return kiln_arg_i64(b->iscalar);
    case IR_U32: return kiln_arg_u32((uint32_t)b->iscalar);
    case IR_U64: return kiln_arg_u64((uint64_t)b->iscalar);
    case IR_I1: return kiln_arg_bool(b->iscalar != 0);
    case IR_I8: return kiln_arg_i8((int8_t)b->iscalar);
    case IR_I16: return kiln_arg_i16((int16_t)b->iscalar);
    case IR_U8: return kiln_arg_u8((uint8_t)b->iscalar);
    case IR_U16: return kiln_arg_u16((uint16_t)b->iscalar);
    case IR_F32: return kiln_arg_f32((float)b->scalar);
    case IR_F64: return kiln_arg_f64(b->scalar);
    case IR_F16: return kiln_arg_f16_bits(interp_f32_to_f16((float)b->scalar));
    case IR_BF16: return kiln_arg_bf16_bits(interp_f32_to_bf16((float)b->scalar));
    default: return kiln_arg_i32((int32_t)b->iscalar);
    }
}

/* What `kiln run` says it was doing when kiln_host_launch stopped at `step`. */
static const char *step_text(KilnHostStep step)
{
    switch (step) {
    case KILN_HOST_STEP_CHECK: return "passing the arguments";
    case KILN_HOST_STEP_RUN: return "running the kernel";
    case KILN_HOST_STEP_COPY_OUT: return "copying the results back";
    case KILN_HOST_STEP_FREE: return "freeing device memory";
    default: return "copying the inputs";
    }
}

static int fail(const char *what)
{
    fprintf(stderr, "kiln: %s: %s\n", what, kiln_last_error());
    return 1;
}

/* The generated buffers and scalars through kiln_host_launch. Every buffer
 * goes both ways: the caller prints them all afterwards. */
static int launch(KilnKernel *k, const KilnCliArgs *a, const IrFunc *f, RunArgs *ra)
{
    KilnHostArg args[RUN_MAX_PARAMS];
    for (int i = 0; i < ra->n; i++) {
        RunBuf *b = &ra->bufs[i];
        args[i] = b->data ? kiln_host_buf(b->data, b->bytes, KILN_HOST_INOUT)
                          : kiln_host_scalar(scalar_arg(f->params[i]->type, b));
    }
    KilnHostStep step;
    return kiln_host_launch(k, a->grid, args, ra->n, &step) == KILN_OK ? 0 : fail(step_text(step));
}

int kiln_cli_run_gpu(KilnCliArgs *a, const IrFunc *f, const char *src, RunArgs *ra, const char **where)
{
    static char device_name[320];
    KilnDevice *dev = NULL;
    if (kiln_init(&dev, 0) != KILN_OK) {
        snprintf(device_name, sizeof device_name, "%s", kiln_last_error());
        *where = device_name;
        return -1;
    }
    KilnDeviceInfo info;
    if (kiln_device_info(dev, &info) == KILN_OK)
        snprintf(device_name, sizeof device_name, "the GPU (%s, %s)", info.name, info.arch);
    else
        snprintf(device_name, sizeof device_name, "the GPU");
    *where = device_name;

    KilnCompileOptions o = a->opts;
    o.kernel = f->name;
    o.emit = KILN_EMIT_PTX; /* the runtime picks cubin/PTX itself */
    KilnModule *mod = NULL;
    KilnKernel *k = NULL;
    int rc;
    if (kiln_module_compile(dev, a->file, src, &o, &mod) != KILN_OK) rc = fail("compiling for the GPU");
    else if (kiln_kernel_get(mod, f->name, &k) != KILN_OK) rc = fail("finding the kernel");
    else rc = launch(k, a, f, ra);
    kiln_module_free(mod);
    kiln_shutdown(dev);
    return rc;
}
