/* gpu_util.h — what the GPU tests share: opening the device (or skipping
 * without one), a fresh kernel cache, running a suite without fork, random
 * non-zero inputs, NaN poison, error maxima that let NaN through, and the
 * interpreter's copy of a kernel for comparison. Header-only, static inline.
 * A test that must not depend on the compiler (test_runtime_gpu.c) defines
 * GPU_UTIL_RUNTIME_ONLY first and gets only the runtime helpers.
 */
#ifndef KILN_TESTS_GPU_UTIL_H
#define KILN_TESTS_GPU_UTIL_H

#include "tests/testutil.h"
#include "kiln.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

/* Uniform in [-scale, scale), never 0 (xorshift64 on *state: each test keeps
 * its own seed, so its inputs do not depend on the other tests). */
static inline float gu_rnd(uint64_t *state, float scale)
{
    uint64_t s = *state;
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    *state = s;
    float f = ((float)((s >> 40) & 0xffffff) / 8388608.0f - 1.0f) * scale;
    return f == 0.0f ? scale * 0.25f : f;
}

/* A monotonic clock in milliseconds, for compile and call times. */
static inline double gu_now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* Output buffers are filled with 0xFF bytes before a run: a float NaN that no
 * kernel computes, so an element still holding it was never written. */
enum { GU_POISON_BYTE = 0xFF };

static inline bool gu_is_poison(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    return u == 0xFFFFFFFFu;
}

/* A device buffer of `bytes` (at least 16): a copy of `host`, or with host NULL filled with
 * GU_POISON_BYTE; 0 when the allocation fails. */
static inline KilnDevPtr gu_upload(KilnDevice *dev, const void *host, size_t bytes)
{
    KilnDevPtr d = 0;
    if (kiln_malloc(dev, bytes ? bytes : 16, &d) != KILN_OK) return 0;
    if (host) kiln_memcpy_htod(dev, d, host, bytes);
    else kiln_memset(dev, d, GU_POISON_BYTE, bytes ? bytes : 16);
    return d;
}

/* A malloc'ed host copy of `bytes` of device buffer d, after the device's work is done. */
static inline void *gu_download(KilnDevice *dev, KilnDevPtr d, size_t bytes)
{
    void *h = malloc(bytes ? bytes : 16);
    kiln_synchronize(dev);
    if (h) kiln_memcpy_dtoh(dev, h, d, bytes);
    return h;
}

/* max(worst, |a - b|) where a NaN difference wins (an unwritten element, still
 * NaN poison, must fail the tolerance rather than vanish from a max). */
static inline double gu_worse(double worst, double a, double b)
{
    double d = fabs(a - b);
    return d <= worst ? worst : d;
}

/* kiln_init: 1 with the device line printed; 0 when there is no GPU ("SKIP:
 * no GPU (...)" printed: the caller exits with TU_SKIP, which ctest reports
 * as skipped); -1 on any other failure. */
static inline int gu_init(KilnDevice **dev, KilnDeviceInfo *info)
{
    KilnStatus st = kiln_init(dev, 0);
    if (st == KILN_ERR_NO_DRIVER || st == KILN_ERR_NO_DEVICE) {
        char why[600];
        snprintf(why, sizeof why, "no GPU (%s)", kiln_last_error());
        tu_skip(why);
        return 0;
    }
    if (st != KILN_OK) {
        printf("FAIL: kiln_init: %s: %s\n", kiln_status_name(st), kiln_last_error());
        return -1;
    }
    kiln_device_info(*dev, info);
    printf("device: %s (%s, %d SMs, %.1f GiB, driver %d)\n", info->name, info->arch, info->sm_count,
           (double)info->total_mem / (1 << 30), info->driver_version);
    return 1;
}

/* KILN_CACHE_DIR := a new directory made from `tmpl` ("/tmp/...-XXXXXX"), so
 * the first compile of each kernel really compiles. */
static inline void gu_fresh_cache(const char *tmpl)
{
    char dir[256];
    snprintf(dir, sizeof dir, "%s", tmpl);
    if (mkdtemp(dir)) setenv("KILN_CACHE_DIR", dir, 1);
}

/* Runs the suite in this process (CUDA does not survive fork); failures. */
static inline int gu_run_suite(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int nf = srunner_ntests_failed(sr);
    srunner_free(sr);
    return nf;
}

/* gu_init's answer as main's exit status when there is nothing to run. */
static inline int gu_exit_without_device(int up) { return up == 0 ? TU_SKIP : EXIT_FAILURE; }

/* The main of a GPU suite: open the device (or skip: exit TU_SKIP), a fresh
 * cache when cache_tmpl is given, run, print the report (may be NULL), shut down. */
static inline int gu_main(KilnDevice **dev, KilnDeviceInfo *info, Suite *(*suite)(void), const char *cache_tmpl,
                          void (*report)(void))
{
    int up = gu_init(dev, info);
    if (up <= 0) return gu_exit_without_device(up);
    if (cache_tmpl) gu_fresh_cache(cache_tmpl);
    int nf = gu_run_suite(suite());
    if (report) report();
    kiln_shutdown(*dev);
    return nf == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

/* The start of a GPU program's main (the ones without Check): stdout line-buffered (rows
 * reach a log even if the run is cut off), the device opened (*dev, *info), a fresh kernel
 * cache made from cache_tmpl (first calls really compile). -1: go on; else main's exit
 * status (TU_SKIP without a GPU). */
static inline int gu_begin(KilnDevice **dev, KilnDeviceInfo *info, const char *cache_tmpl)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    int up = gu_init(dev, info);
    if (up <= 0) return gu_exit_without_device(up);
    gu_fresh_cache(cache_tmpl);
    return -1;
}

/* Its end after counting failures: "PASS: 0 failures" / "FAIL: n failures", the attention
 * variants' cache cleared, the device shut down; main's exit status. */
static inline int gu_end(KilnDevice *dev, int failures)
{
    printf("%s: %d failures\n", failures ? "FAIL" : "PASS", failures);
    kiln_attention_cache_clear(dev);
    kiln_shutdown(dev);
    return failures ? EXIT_FAILURE : EXIT_SUCCESS;
}

/* Mean ms of `reps` back-to-back kiln_attention_fwd calls of `a` on dev between two events,
 * after a warm call (compiled and loaded); NaN, with a FAIL line and *fails incremented, when
 * a call fails. */
static inline double gu_attention_fwd_ms(KilnDevice *dev, const KilnAttentionParams *a, int reps, int *fails)
{
    KilnEvent *e0 = NULL, *e1 = NULL;
    kiln_event_create(dev, &e0);
    kiln_event_create(dev, &e1);
    KilnStatus st = kiln_attention_fwd(dev, a, NULL);
    kiln_event_record(e0, NULL);
    for (int i = 0; i < reps && st == KILN_OK; i++) st = kiln_attention_fwd(dev, a, NULL);
    kiln_event_record(e1, NULL);
    kiln_event_synchronize(e1);
    float ms = 0;
    kiln_event_elapsed_ms(e0, e1, &ms);
    kiln_event_destroy(e0);
    kiln_event_destroy(e1);
    if (st != KILN_OK) {
        printf("FAIL timing: %s: %s\n", kiln_status_name(st), kiln_last_error());
        (*fails)++;
        return NAN;
    }
    return ms / reps;
}

#ifndef GPU_UTIL_RUNTIME_ONLY
#include "compiler/interp/interp.h"
#include "compiler/passes/passes.h"
#include "compiler/lang/lang.h"

/* The kernel as the interpreter runs it: parsed, lowered with the defines,
 * through the pass pipeline (the GPU's input). Diag *d is initialised here;
 * the caller frees it and the arena after the run. */
static inline IrFunc *gu_interp_kernel(Arena *a, Diag *d, const char *file, const char *src, const char *kernel,
                                       const KilnDefine *kd, int nd)
{
    diag_init(d, file, src);
    AstFile *af = ast_parse(a, d, file, src);
    ck_assert_msg(af && !d->nerrors, "%s", d->out.data ? d->out.data : "");
    LangDefine defs[16];
    ck_assert_int_le(nd, 16);
    for (int i = 0; i < nd; i++) defs[i] = (LangDefine){kd[i].name, kd[i].value};
    LangOptions lo = {.kernel = kernel, .defines = defs, .ndefines = nd};
    IrModule *m = lang_compile(a, d, af, &lo);
    ck_assert_msg(m && !d->nerrors && m->nfuncs == 1, "%s", d->out.data ? d->out.data : "");
    IrFunc *f = m->funcs[0];
    StrBuf err;
    sb_init(&err);
    ck_assert_msg(pass_pipeline(f, NULL, NULL, &err), "%s", err.data ? err.data : "");
    sb_free(&err);
    return f;
}
#endif /* GPU_UTIL_RUNTIME_ONLY */

#endif
