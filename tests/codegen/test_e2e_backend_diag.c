/* test_e2e_backend_diag.c — backend errors through kiln_compile: reported once,
 * through the same Diag as the front end, at the op or kernel they are about
 * (with its source line and caret), and mapped to the right KilnStatus by
 * their kind rather than by their text:
 *   - an op the target lacks (atomic_add on bf16 for sm_80): KILN_ERR_COMPILE
 *     at the op (this printed "at.tile:1:8: error: at.tile:4:5: error: ..."
 *     with the caret under the kernel name before backend errors were
 *     structured);
 *   - the SRAM limit: KILN_ERR_COMPILE at the op of a buffer too large alone,
 *     else at the kernel, listing the buffers;
 *   - no ptxas for --emit cubin: KILN_ERR_UNSUPPORTED (the JIT's cue to fall
 *     back to PTX);
 *   - ptxas rejecting the backend's PTX: KILN_ERR_INTERNAL, "internal error".
 */
#include "tests/testutil.h"
#include "tests/ptx_util.h"
#include "kiln.h"
#include "compiler/support/support.h"

#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *AT = "kernel k(X: *bf16, Y: *bf16) {\n"
                        "    let offs = arange(128);\n"
                        "    let v = load(Y + offs);\n"
                        "    atomic_add(X + offs, v);\n"
                        "}\n";

static KilnStatus compile(const char *path, const char *src, const char *arch, KilnEmit emit, const KilnDefine *defs,
                          int ndefs, KilnCompileResult *r)
{
    KilnCompileOptions o = {.arch = arch, .emit = emit, .defines = defs, .ndefines = ndefs};
    return kiln_compile(path, src, &o, r);
}

static int count(const char *text, const char *what)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, what)); p++) n++;
    return n;
}

START_TEST(unsupported_op_reported_once_at_the_op)
{
    KilnCompileResult r;
    ck_assert_int_eq(compile("at.tile", AT, "sm_80", KILN_EMIT_PTX, NULL, 0, &r), KILN_ERR_COMPILE);
    ck_assert_str_eq(r.diagnostics, "at.tile:4:5: error: atomic_add on bf16 is not supported on sm_80\n"
                                    "    atomic_add(X + offs, v);\n"
                                    "    ^\n");
    kiln_compile_result_free(&r);
}
END_TEST

/* One buffer alone past the target's SRAM (the [256, 256] epilogue
 * conversion of a matmul): the error is at its op. */
START_TEST(sram_limit_at_the_buffer)
{
    char *src = sup_read_file_text(tu_src_path("examples/matmul.tile"), NULL);
    ck_assert_ptr_nonnull(src);
    KilnDefine defs[] = {{"BLOCK_M", "256"}, {"BLOCK_N", "256"}, {"BLOCK_K", "128"}};
    KilnCompileResult r;
    ck_assert_int_eq(compile("matmul.tile", src, "sm_80", KILN_EMIT_PTX, defs, 3, &r), KILN_ERR_COMPILE);
    ck_assert_ptr_nonnull(r.diagnostics);
    ck_assert_str_eq(r.diagnostics, "matmul.tile:49:5: error: this convert_layout needs 266240 bytes of shared memory; "
                                    "sm_80 allows 166912 per block: use smaller blocks (BLOCK_* constants)\n"
                                    "    store(C + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn, acc,\n"
                                    "    ^\n");
    kiln_compile_result_free(&r);
    free(src);
}
END_TEST

/* Buffers each within the limit, too many live together (the attention
 * forward's 6 stages of K and V and its Q operand on sm_80): one error at the
 * kernel listing them. */
START_TEST(sram_limit_at_the_kernel)
{
    char *src = sup_read_file_text(tu_src_path("lang/lib/attention_fwd.tile"), NULL);
    ck_assert_ptr_nonnull(src);
    KilnDefine defs[] = {{"HEAD_DIM", "128"}, {"HEAD_DIM_PAD", "128"}};
    KilnParamHint h[PU_ATTN_NHINTS];
    KilnCompileOptions o;
    pu_attention_options(&o, defs, 2, "sm_80", 4, 6, KILN_EMIT_PTX, h);
    KilnCompileResult r;
    ck_assert_int_eq(kiln_compile("attention_fwd.tile", src, &o, &r), KILN_ERR_COMPILE);
    ck_assert_ptr_nonnull(r.diagnostics);
    /* the error points at the kernel's name: its line, wherever the program puts it (the
     * instance of the generic attn_fwd that names it) */
    int line = 1;
    for (const char *c = src; c < strstr(src, "kernel attn_fwd_f16 = "); c++) line += *c == '\n';
    char head[160];
    snprintf(head, sizeof head, "attention_fwd.tile:%d:8: error: kernel 'attn_fwd_f16' needs 229376 bytes of shared "
             "memory; sm_80 allows 166912 per block:\n  ", line);
    ck_assert_msg(!strncmp(r.diagnostics, head, strlen(head)), "%s", r.diagnostics);
    ck_assert_int_eq(count(r.diagnostics, ": error: "), 1);
    ck_assert_ptr_nonnull(strstr(r.diagnostics, "pipeline stages"));
    ck_assert_ptr_nonnull(strstr(r.diagnostics, "num_stages = 6 now)\nkernel attn_fwd_f16 = attn_fwd(T = f16);"));
    ck_assert_ptr_nonnull(strstr(r.diagnostics, "\n       ^\n"));
    kiln_compile_result_free(&r);
    free(src);
}
END_TEST

static const char *VEC = "kernel v(X: *f32) {\n    store(X + arange(128), zeros([128], f32));\n}\n";

START_TEST(no_ptxas_is_unsupported)
{
    setenv("KILN_PTXAS", "/nonexistent/ptxas", 1);
    KilnCompileResult r;
    ck_assert_int_eq(compile("v.tile", VEC, "sm_80", KILN_EMIT_CUBIN, NULL, 0, &r), KILN_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(r.diagnostics);
    ck_assert_str_eq(r.diagnostics, "v.tile:1:8: error: ptxas not found: KILN_PTXAS=/nonexistent/ptxas is not an "
                                    "executable file\nkernel v(X: *f32) {\n       ^\n");
    ck_assert_int_eq(count(r.diagnostics, ": error: "), 1);
    kiln_compile_result_free(&r);
    unsetenv("KILN_PTXAS");
}
END_TEST

START_TEST(ptxas_rejection_is_internal)
{
    char dir[] = "/tmp/kiln-test-bdiag-XXXXXX", path[64];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/ptxas", dir);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs("#!/bin/sh\necho 'ptxas fatal : bad PTX' >&2\nexit 1\n", f);
    fclose(f);
    chmod(path, 0755);
    setenv("KILN_PTXAS", path, 1);
    KilnCompileResult r;
    ck_assert_int_eq(compile("v.tile", VEC, "sm_80", KILN_EMIT_CUBIN, NULL, 0, &r), KILN_ERR_INTERNAL);
    ck_assert_ptr_nonnull(r.diagnostics);
    ck_assert_ptr_nonnull(strstr(r.diagnostics, "v.tile:1:8: error: internal error: ptxas ("));
    ck_assert_ptr_nonnull(strstr(r.diagnostics, "ptxas fatal : bad PTX"));
    ck_assert_int_eq(count(r.diagnostics, ": error: "), 1);
    kiln_compile_result_free(&r);
    unsetenv("KILN_PTXAS");
    unlink(path);
    rmdir(dir);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("codegen_backend_diag");
    TCase *t = tcase_create("backend_diag");
    tcase_add_test(t, unsupported_op_reported_once_at_the_op);
    tcase_add_test(t, sram_limit_at_the_buffer);
    tcase_add_test(t, sram_limit_at_the_kernel);
    tcase_add_test(t, no_ptxas_is_unsupported);
    tcase_add_test(t, ptxas_rejection_is_internal);
    suite_add_tcase(s, t);
    return s;
}

TU_MAIN(suite)
