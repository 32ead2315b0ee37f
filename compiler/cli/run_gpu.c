/* run_gpu.c — the GPU path of `kiln run`, through the public runtime API only.
 *
 * The kernel is compiled with kiln_module_compile (so the on-disk cache and
 * launch-time specialisation apply, as for any host program), the generated
 * buffers are copied to the device, outputs come back into the same host
 * buffers, and the caller prints them. No GPU (no driver, no device) is not an
 * error here: it returns -1 with the reason so the interpreter runs instead.
 */
#include <stdio.h>
#include <string.h>

#include "run_args.h"

static KilnArg scalar_arg(IrType t, const RunBuf *b)
{
    switch ((IrElem)t.elem) {
    case IR_I64: return kiln_arg_i64((int64_t)b->scalar);
    case IR_U32: return kiln_arg_u32((uint32_t)b->scalar);
    case IR_U64: return kiln_arg_u64((uint64_t)b->scalar);
    case IR_I1: return kiln_arg_bool(b->scalar != 0);
    case IR_I8: return kiln_arg_i8((int8_t)b->scalar);
    case IR_I16: return kiln_arg_i16((int16_t)b->scalar);
    case IR_U8: return kiln_arg_u8((uint8_t)b->scalar);
    case IR_U16: return kiln_arg_u16((uint16_t)b->scalar);
    case IR_F32: return kiln_arg_f32((float)b->scalar);
    case IR_F64: return kiln_arg_f64(b->scalar);
    case IR_F16: return kiln_arg_f16_bits(interp_f32_to_f16((float)b->scalar));
    case IR_BF16: return kiln_arg_bf16_bits(interp_f32_to_bf16((float)b->scalar));
    default: return kiln_arg_i32((int32_t)b->scalar);
    }
}

static int fail(const char *what)
{
    fprintf(stderr, "kiln: %s: %s\n", what, kiln_last_error());
    return 1;
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
    KilnDevPtr dp[RUN_MAX_PARAMS] = {0};
    KilnArg args[RUN_MAX_PARAMS];
    int rc = 1;
    if (kiln_module_compile(dev, a->file, src, &o, &mod) != KILN_OK) { rc = fail("compiling for the GPU"); goto out; }
    if (kiln_kernel_get(mod, f->name, &k) != KILN_OK) { rc = fail("finding the kernel"); goto out; }
    for (int i = 0; i < ra->n; i++) {
        RunBuf *b = &ra->bufs[i];
        if (!b->data) {
            args[i] = scalar_arg(f->params[i]->type, b);
            continue;
        }
        if (kiln_malloc(dev, b->bytes, &dp[i]) != KILN_OK || kiln_memcpy_htod(dev, dp[i], b->data, b->bytes) != KILN_OK) {
            rc = fail("copying the inputs");
            goto out;
        }
        args[i] = kiln_arg_ptr(dp[i]);
    }
    if (kiln_launch(k, a->grid, NULL, args, ra->n) != KILN_OK || kiln_synchronize(dev) != KILN_OK) {
        rc = fail("running the kernel");
        goto out;
    }
    for (int i = 0; i < ra->n; i++)
        if (ra->bufs[i].data && kiln_memcpy_dtoh(dev, ra->bufs[i].data, dp[i], ra->bufs[i].bytes) != KILN_OK) {
            rc = fail("copying the results back");
            goto out;
        }
    rc = 0;
out:
    for (int i = 0; i < ra->n; i++) kiln_free(dev, dp[i]);
    kiln_module_free(mod);
    kiln_shutdown(dev);
    return rc;
}
