/* ptx_util.h — what the PTX-level tests share: whether ptxas is there (tests
 * that assemble skip without it), counting instructions in emitted text, and
 * a kiln_compile wrapper for the common case (file, kernel, defines, arch,
 * emit). Header-only, static inline: a test that does not call a helper does
 * not link what it needs (test_cg_basic.c links only kiln_codegen).
 */
#ifndef KILN_TESTS_PTX_UTIL_H
#define KILN_TESTS_PTX_UTIL_H

#include "tests/testutil.h"
#include "kiln.h"
#include "compiler/support/ptxas.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Whether ptxas can be run: the locator the backend uses (ptxas_find), so a
 * test that skips here would have failed in cg_compile for want of ptxas. */
static inline bool pu_have_ptxas(void)
{
    char *p = ptxas_find(NULL);
    bool found = p != NULL;
    free(p);
    return found;
}

/* Cases that need ptxas go into the test case pu_ptxas_tcase makes (tagged
 * "ptxas") and the file ends with PU_MAIN instead of TU_MAIN. ctest then runs
 * the executable twice (tests/CMakeLists.txt): <layer>/<name> without the
 * ptxas cases (CK_EXCLUDE_TAGS=ptxas) and <layer>/<name>/ptxas with only them
 * (CK_INCLUDE_TAGS=ptxas), which is reported SKIPPED (exit 77) when there is
 * no ptxas; so a missing ptxas never shows as a pass. A file whose every case
 * needs ptxas ends with PU_MAIN_PTXAS_ONLY: one ctest entry, skipped as a whole. */
#define PU_PTXAS_TAG "ptxas"

static inline TCase *pu_ptxas_tcase(Suite *s, int timeout)
{
    TCase *tc = tcase_create("ptxas");
    tcase_set_tags(tc, PU_PTXAS_TAG);
    if (timeout > 0) tcase_set_timeout(tc, timeout);
    suite_add_tcase(s, tc);
    return tc;
}

/* Run directly (no tags chosen) on a machine without ptxas, the ptxas cases
 * are left out with a SKIP line rather than failed. */
static inline int pu_main(Suite *(*suite_fn)(void), bool ptxas_only)
{
    const char *inc = getenv("CK_INCLUDE_TAGS"), *exc = getenv("CK_EXCLUDE_TAGS");
    bool want_ptxas = ptxas_only || (inc && strstr(inc, PU_PTXAS_TAG));
    if (!pu_have_ptxas()) {
        if (want_ptxas) return tu_skip("ptxas not found (install CUDA, put ptxas on PATH or set KILN_PTXAS)");
        if (!exc) {
            printf("SKIP: the cases tagged ptxas (ptxas not found)\n");
            setenv("CK_EXCLUDE_TAGS", PU_PTXAS_TAG, 1);
        }
    }
    return tu_run_suite(suite_fn());
}
#define PU_MAIN(suite_fn) \
    int main(void) { return pu_main(suite_fn, false); }
#define PU_MAIN_PTXAS_ONLY(suite_fn) \
    int main(void) { return pu_main(suite_fn, true); }

/* Occurrences of `needle` in the first `n` bytes of `s` (overlapping ones
 * too): for a KilnCompileResult's output with its output_size, which need not
 * be NUL-terminated where it ends. */
static inline int pu_count_n(const char *s, size_t n, const char *needle)
{
    int c = 0;
    size_t k = strlen(needle);
    for (size_t i = 0; i + k <= n; i++) c += memcmp(s + i, needle, k) == 0;
    return c;
}

/* Occurrences of `what` in the NUL-terminated `text` (overlapping ones too):
 * for stats text and outputs known to end in a NUL. */
static inline int pu_count(const char *text, const char *what) { return pu_count_n(text, strlen(text), what); }

/* A cubin compile's ptxas report says no spills; `what` names the kernel in the failure. */
static inline void pu_assert_no_spills(const KilnCompileResult *r, const char *what)
{
    ck_assert_msg(r->output_size > 0, "%s: no cubin", what);
    ck_assert_msg(r->stats && strstr(r->stats, "spills: 0 bytes stored, 0 bytes loaded"), "%s: %s", what,
                  r->stats ? r->stats : "(no stats)");
}

/* The hints kiln_module_compile derives at launch for lang/lib/attention_fwd.tile's
 * parameters when the tensors are contiguous, 16-byte aligned and their sizes multiples of
 * 16 (the benchmark's case): fills h (PU_ATTN_NHINTS entries). */
enum { PU_ATTN_NHINTS = 21 };
static inline void pu_attention_hints(KilnParamHint *h)
{
    static const char *const names[PU_ATTN_NHINTS] = {
        "Q", "K", "V", "O", "LSE",
        "stride_qb", "stride_qh", "stride_qm", "stride_kb", "stride_kh", "stride_kn",
        "stride_vb", "stride_vh", "stride_vn", "stride_ob", "stride_oh", "stride_om",
        "seqlen_q", "seqlen_k", "heads", "heads_kv",
    };
    for (int i = 0; i < PU_ATTN_NHINTS; i++) h[i] = (KilnParamHint){names[i], 16, 0};
}

/* Options compiling attn_fwd_f16 of lang/lib/attention_fwd.tile; with `h` (room for
 * PU_ATTN_NHINTS) the launch-time hints above, without it none. */
static inline void pu_attention_options(KilnCompileOptions *o, const KilnDefine *defs, int ndefs, const char *arch,
                                        int warps, int stages, KilnEmit emit, KilnParamHint *h)
{
    memset(o, 0, sizeof *o);
    o->kernel = "attn_fwd_f16";
    o->defines = defs;
    o->ndefines = ndefs;
    o->arch = arch;
    o->num_warps = warps;
    o->num_stages = stages;
    o->emit = emit;
    if (h) {
        pu_attention_hints(h);
        o->hints = h;
        o->nhints = PU_ATTN_NHINTS;
    }
}

/* The shipped forward `kernel` (attn_fwd_f16 or _bf16, non-causal, PLAIN_SCORES as the runtime
 * compiles it) at head dim d, BM x BN tiles on `warps`, 2 stages, the launch-time hints, with the
 * schedule options pingpong / overlap / no_wgmma; the test fails when it does not compile. */
static inline KilnCompileResult pu_attention_fwd_kernel(const char *kernel, const char *d, const char *bm,
                                                        const char *bn, int warps, const char *arch, int pingpong,
                                                        int overlap, int no_wgmma, KilnEmit emit)
{
    static char *src;
    if (!src) src = sup_read_file_text(tu_src_path("lang/lib/attention_fwd.tile"), NULL);
    ck_assert_ptr_nonnull(src);
    KilnDefine defs[] = {{"HEAD_DIM", d}, {"BLOCK_M", bm}, {"BLOCK_N", bn}, {"CAUSAL", "false"},
                         {"PLAIN_SCORES", "true"}};
    KilnParamHint h[PU_ATTN_NHINTS];
    KilnCompileOptions o;
    pu_attention_options(&o, defs, 5, arch, warps, 2, emit, h);
    o.kernel = kernel;
    o.schedule.pingpong = pingpong;
    o.schedule.overlap = overlap;
    o.schedule.no_wgmma = no_wgmma;
    KilnCompileResult r;
    KilnStatus st = kiln_compile("lang/lib/attention_fwd.tile", src, &o, &r);
    ck_assert_msg(st == KILN_OK, "%s d %s %sx%s/%d %s: %s", kernel, d, bm, bn, warps, arch,
                  r.diagnostics ? r.diagnostics : "");
    return r;
}

/* The same for attn_fwd_f16. */
static inline KilnCompileResult pu_attention_fwd(const char *d, const char *bm, const char *bn, int warps,
                                                 const char *arch, int pingpong, int overlap, int no_wgmma,
                                                 KilnEmit emit)
{
    return pu_attention_fwd_kernel("attn_fwd_f16", d, bm, bn, warps, arch, pingpong, overlap, no_wgmma, emit);
}

/* kiln_compile of `src` (named `file` in diagnostics) with only these options
 * set; the status is the caller's to judge (tests that expect a refusal). */
static inline KilnStatus pu_compile_status(const char *file, const char *src, const char *kernel,
                                           const KilnDefine *defs, int ndefs, const char *arch, KilnEmit emit,
                                           KilnCompileResult *r)
{
    KilnCompileOptions o;
    memset(&o, 0, sizeof o);
    o.kernel = kernel;
    o.defines = defs;
    o.ndefines = ndefs;
    o.arch = arch;
    o.emit = emit;
    return kiln_compile(file, src, &o, r);
}

/* The same, failing the test unless it compiles and has output. */
static inline KilnCompileResult pu_compile(const char *file, const char *src, const char *kernel,
                                           const KilnDefine *defs, int ndefs, const char *arch, KilnEmit emit)
{
    KilnCompileResult r;
    KilnStatus st = pu_compile_status(file, src, kernel, defs, ndefs, arch, emit, &r);
    ck_assert_msg(st == KILN_OK, "%s: %s\n%s", kernel, kiln_status_name(st), r.diagnostics ? r.diagnostics : "");
    ck_assert_ptr_nonnull(r.output);
    return r;
}

/* A matmul schedule: BLOCK_M x BLOCK_N x BLOCK_K, num_warps, num_stages. */
typedef struct PuSched { int bm, bn, bk, warps, stages; } PuSched;

/* kiln_compile of tools/bench/matmul_tc.tile or examples/matmul.tile (`file`)
 * at schedule `s`, with the BLOCK_* defines, N and K defines unless N is 0,
 * and A, B, C hinted 16-byte aligned (what the runtime's launch-time
 * specialisation gives aligned buffers); fails the test unless it compiles. */
static inline void pu_compile_matmul_opt(const char *file, const char *kernel, const PuSched *s, int N, int K,
                                         const char *arch, int no_wgmma, int mbarrier, KilnEmit emit,
                                         KilnCompileResult *r);
static inline void pu_compile_matmul(const char *file, const char *kernel, const PuSched *s, int N, int K,
                                     const char *arch, int no_wgmma, KilnEmit emit, KilnCompileResult *r)
{
    pu_compile_matmul_opt(file, kernel, s, N, K, arch, no_wgmma, 0, emit, r);
}

/* The same with the mbarrier schedule option (KilnCompileOptions.mbarrier): mbarrier 1, or
 * 2 for warp specialisation too (KilnCompileOptions.warp_specialize, which implies it). */
static inline void pu_compile_matmul_opt(const char *file, const char *kernel, const PuSched *s, int N, int K,
                                         const char *arch, int no_wgmma, int mbarrier, KilnEmit emit,
                                         KilnCompileResult *r)
{
    char *src = sup_read_file_text(tu_src_path(file), NULL);
    ck_assert_ptr_nonnull(src);
    char b[5][16];
    snprintf(b[0], 16, "%d", s->bm), snprintf(b[1], 16, "%d", s->bn), snprintf(b[2], 16, "%d", s->bk);
    snprintf(b[3], 16, "%d", N), snprintf(b[4], 16, "%d", K);
    KilnDefine d[5] = {{"BLOCK_M", b[0]}, {"BLOCK_N", b[1]}, {"BLOCK_K", b[2]}, {"N", b[3]}, {"K", b[4]}};
    KilnParamHint h[3] = {{"A", 16, 0}, {"B", 16, 0}, {"C", 16, 0}};
    KilnCompileOptions o;
    memset(&o, 0, sizeof o);
    o.kernel = kernel;
    o.defines = d;
    o.ndefines = N ? 5 : 3;
    o.arch = arch;
    o.num_warps = s->warps;
    o.num_stages = s->stages;
    o.emit = emit;
    o.hints = h;
    o.nhints = 3;
    o.schedule.no_wgmma = no_wgmma;
    o.schedule.mbarrier = mbarrier != 0;
    o.schedule.warp_specialize = mbarrier == 2;
    KilnStatus st = kiln_compile(file, src, &o, r);
    ck_assert_msg(st == KILN_OK, "%s %dx%dx%d w%d s%d %s: %s", kernel, s->bm, s->bn, s->bk, s->warps, s->stages, arch,
                  r->diagnostics ? r->diagnostics : kiln_status_name(st));
    free(src);
}

#endif
