/* host_launch.c — kiln_host_launch: run a kernel on host buffers in one call.
 *
 * Host programs that do not keep data on the device (`kiln run`, the
 * kiln-examples harness) all do the same dance around kiln_launch: allocate a
 * device buffer per pointer argument, copy the inputs in, launch, synchronise,
 * copy the outputs back and free everything. This file is that dance, once.
 *
 * Invariants: the argument list is checked (kiln_host_args_check) before the
 * device is touched; every allocation made is freed on every path, errors
 * included; the status and kiln_last_error() are those of the first call that
 * failed (a later failing free never overwrites them), and *step says which
 * phase it was in. The launch itself is kiln_launch, so its signature and
 * hint checks and launch-time specialisation apply unchanged.
 *
 * Example: vec_add(X: *f32, Y: *f32, Z: *f32, n: i32):
 *   KilnHostArg a[4] = {kiln_host_buf(x, 4 * n, KILN_HOST_IN), kiln_host_buf(y, 4 * n, KILN_HOST_IN),
 *                       kiln_host_buf(z, 4 * n, KILN_HOST_OUT), kiln_host_scalar(kiln_arg_i32(n))};
 *   kiln_host_launch(k, grid, a, 4, &step);   // z now holds x + y
 */
#include "cuda_loader.h"
#include "rt_internal.h"

#include <stdlib.h>
#include <string.h>

/* What an OUT buffer holds on the device before the kernel runs: NaN patterns
 * for floats, so an element the kernel never writes is visible in the result
 * instead of whatever the allocator handed out. */
#define HOST_OUT_FILL 0xFF

static KilnStatus check_one(const KilnHostArg *a, int i)
{
    if ((unsigned)a->value.kind > KILN_PARAM_BF16)
        return kiln_set_error(KILN_ERR_USAGE, "kiln_host_launch: argument %d has no valid kind (%d)", i + 1,
                              (int)a->value.kind);
    if (a->value.kind != KILN_PARAM_PTR) {
        if (a->host)
            return kiln_set_error(KILN_ERR_USAGE,
                                  "kiln_host_launch: argument %d is a scalar (%s) but has a host buffer "
                                  "(build buffers with kiln_host_buf)",
                                  i + 1, rt_param_kind_name(a->value.kind));
        return KILN_OK;
    }
    if (!a->host)
        return kiln_set_error(KILN_ERR_USAGE, "kiln_host_launch: argument %d is a buffer without host memory",
                              i + 1);
    if (a->bytes == 0)
        return kiln_set_error(KILN_ERR_USAGE, "kiln_host_launch: argument %d is a buffer of 0 bytes", i + 1);
    if (a->dir != KILN_HOST_IN && a->dir != KILN_HOST_OUT && a->dir != KILN_HOST_INOUT)
        return kiln_set_error(KILN_ERR_USAGE,
                              "kiln_host_launch: argument %d has no valid direction (%d; KILN_HOST_IN, "
                              "KILN_HOST_OUT or KILN_HOST_INOUT)",
                              i + 1, (int)a->dir);
    return KILN_OK;
}

KilnStatus kiln_host_args_check(const KilnHostArg *args, int nargs)
{
    if (nargs < 0) return kiln_set_error(KILN_ERR_USAGE, "kiln_host_launch: nargs is %d (must be >= 0)", nargs);
    if (nargs > 0 && !args)
        return kiln_set_error(KILN_ERR_USAGE, "kiln_host_launch: %d arguments but no argument array", nargs);
    for (int i = 0; i < nargs; i++) {
        KilnStatus st = check_one(&args[i], i);
        if (st != KILN_OK) return st;
    }
    return KILN_OK;
}

/* Allocate every buffer and give it its initial contents, in argument order;
 * dargs[i] becomes the argument kiln_launch gets. Stops at the first failure
 * (what was allocated so far is in dp, for the caller to free). */
static KilnStatus copy_in(KilnDevice *dev, const KilnHostArg *args, int nargs, KilnDevPtr *dp, KilnArg *dargs)
{
    for (int i = 0; i < nargs; i++) {
        const KilnHostArg *a = &args[i];
        if (a->value.kind != KILN_PARAM_PTR) {
            dargs[i] = a->value;
            continue;
        }
        KilnStatus st = kiln_malloc(dev, a->bytes, &dp[i]);
        if (st == KILN_OK)
            st = a->dir == KILN_HOST_OUT ? kiln_memset(dev, dp[i], HOST_OUT_FILL, a->bytes)
                                         : kiln_memcpy_htod(dev, dp[i], a->host, a->bytes);
        if (st != KILN_OK) return st;
        dargs[i] = kiln_arg_ptr(dp[i]);
    }
    return KILN_OK;
}

static KilnStatus copy_out(KilnDevice *dev, const KilnHostArg *args, int nargs, const KilnDevPtr *dp)
{
    for (int i = 0; i < nargs; i++) {
        const KilnHostArg *a = &args[i];
        if (a->value.kind != KILN_PARAM_PTR || a->dir == KILN_HOST_IN) continue;
        KilnStatus st = kiln_memcpy_dtoh(dev, a->host, dp[i], a->bytes);
        if (st != KILN_OK) return st;
    }
    return KILN_OK;
}

/* Free every allocation (0 entries are skipped by kiln_free). With `st` a
 * failure, that failure stays the reported one; else the first failing free
 * becomes it. The message is saved because a failing free overwrites it. */
static KilnStatus release(KilnDevice *dev, const KilnDevPtr *dp, int n, KilnStatus st, KilnHostStep *step)
{
    char *msg = st != KILN_OK ? strdup(kiln_last_error()) : NULL;
    int clobbered = 0;
    for (int i = 0; i < n; i++) {
        KilnStatus fs = kiln_free(dev, dp[i]);
        if (fs == KILN_OK) continue;
        if (st == KILN_OK) {
            st = fs;
            *step = KILN_HOST_STEP_FREE;
            msg = strdup(kiln_last_error());
        } else {
            clobbered = 1;
        }
    }
    if (clobbered && msg) kiln_set_error(st, "%s", msg);
    free(msg);
    return st;
}

KilnStatus kiln_host_launch(KilnKernel *k, const int grid[3], const KilnHostArg *args, int nargs,
                            KilnHostStep *step)
{
    KilnHostStep local;
    if (!step) step = &local;
    *step = KILN_HOST_STEP_CHECK;
    if (!k) return kiln_set_error(KILN_ERR_USAGE, "kiln_host_launch: kernel is NULL");
    KilnStatus st = kiln_host_args_check(args, nargs);
    if (st != KILN_OK) return st;
    KilnDevice *dev = k->module->dev;
    /* calloc(0) may give NULL: always ask for at least one slot. */
    KilnDevPtr *dp = calloc((size_t)nargs + 1, sizeof *dp);
    KilnArg *dargs = calloc((size_t)nargs + 1, sizeof *dargs);
    if (!dp || !dargs) {
        free(dp);
        free(dargs);
        return kiln_set_error(KILN_ERR_INTERNAL, "out of host memory");
    }
    *step = KILN_HOST_STEP_COPY_IN;
    st = copy_in(dev, args, nargs, dp, dargs);
    if (st == KILN_OK) {
        *step = KILN_HOST_STEP_RUN;
        st = kiln_launch(k, grid, NULL, dargs, nargs);
        if (st == KILN_OK) st = kiln_synchronize(dev);
    }
    if (st == KILN_OK) {
        *step = KILN_HOST_STEP_COPY_OUT;
        st = copy_out(dev, args, nargs, dp);
    }
    if (st == KILN_OK) *step = KILN_HOST_STEP_NONE;
    st = release(dev, dp, nargs, st, step);
    free(dp);
    free(dargs);
    return st;
}
