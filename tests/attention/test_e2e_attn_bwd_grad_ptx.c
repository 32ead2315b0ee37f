/* test_e2e_attn_bwd_grad_ptx.c — the backward of a score_mod variant written only as
 * its forward hook compiles, for sm_80 and sm_90a, to exactly the PTX of the same
 * backward given the derivative by hand (-D score_mod_grad=...): the compiler's
 * grad(score_mod) (lang/grad.c) costs nothing over a hand-written derivative.
 *
 * Soft-capping c * tanh(s / c) (the tutorial's tanh_softcap) against a hand-written
 * 1 - tanh(s / c)^2, and examples/attention/alibi.tile's ALiBi against a hand-written
 * 1.0, for the deterministic dQ kernel and the dK/dV kernel (which also computes dQ
 * with atomics), both dtypes. The derived soft-capping kernel must also hold as many
 * tanh as the kernel whose derivative needs none (CSE shares the hook's tanh), and
 * must differ from the kernel given a wrong derivative (the derivative is applied).
 */
#include "tests/testutil.h"
#include "kiln.h"
#include "compiler/support/support.h"

#include <string.h>

static const char k_hooks[] =
    "fn tanh_softcap(s, b, h, q_idx, kv_idx) { return 20.0 * tanh(s / 20.0); }\n"
    "fn softcap_by_hand(s, b, h, q_idx, kv_idx) { let t = tanh(s / 20.0); return 1.0 - t * t; }\n"
    "fn one_by_hand(s, b, h, q_idx, kv_idx) { return 1.0; }\n";

/* PTX of `kernel` for `arch` from the hooks, examples/attention/alibi.tile and the program. */
static char *ptx(const char *kernel, const char *arch, const char *score_mod, const char *grad)
{
    char *alibi = sup_read_file_text(tu_src_path("examples/attention/alibi.tile"), NULL);
    const char *prog = kiln_lib_source("lang/lib/attention_bwd.tile");
    ck_assert(alibi && prog);
    size_t n = strlen(k_hooks) + strlen(alibi) + strlen(prog) + 1;
    char *src = malloc(n);
    snprintf(src, n, "%s%s%s", k_hooks, alibi, prog);
    KilnDefine defs[3] = {{"HEAD_DIM", "64"}, {"score_mod", score_mod}, {"score_mod_grad", grad}};
    KilnCompileOptions o = {.kernel = kernel, .defines = defs, .ndefines = grad ? 3 : 2, .arch = arch,
                            .emit = KILN_EMIT_PTX};
    KilnCompileResult r;
    ck_assert_msg(kiln_compile("variant.tile", src, &o, &r) == KILN_OK, "%s %s: %s", kernel, arch,
                  r.diagnostics ? r.diagnostics : "");
    char *out = strdup(r.output);
    kiln_compile_result_free(&r);
    free(src);
    free(alibi);
    ck_assert_msg(strstr(out, ".entry"), "%s %s: no .entry", kernel, arch);
    return out;
}

static int count(const char *s, const char *what)
{
    int n = 0;
    for (const char *p = strstr(s, what); p; p = strstr(p + 1, what)) n++;
    return n;
}

static const char *const k_kernels[] = {"attn_bwd_dq_f16", "attn_bwd_dkdv_bf16"};
static const char *const k_archs[] = {"sm_80", "sm_90a"};

START_TEST(derived_equals_hand_written)
{
    const char *kernel = k_kernels[_i / 2], *arch = k_archs[_i % 2];
    char *derived = ptx(kernel, arch, "tanh_softcap", NULL);
    char *by_hand = ptx(kernel, arch, "tanh_softcap", "softcap_by_hand");
    char *wrong = ptx(kernel, arch, "tanh_softcap", "one_by_hand");
    ck_assert_msg(strcmp(derived, by_hand) == 0, "%s %s: soft-capping's derived backward differs from the "
                  "hand-written one", kernel, arch);
    ck_assert_int_gt(count(derived, "tanh.approx"), 0);
    ck_assert_int_eq(count(derived, "tanh.approx"), count(wrong, "tanh.approx"));
    ck_assert_msg(strcmp(derived, wrong) != 0, "%s %s: the derivative is not applied", kernel, arch);
    free(derived);
    free(by_hand);
    free(wrong);
    derived = ptx(kernel, arch, "alibi_score", NULL);
    by_hand = ptx(kernel, arch, "alibi_score", "one_by_hand");
    ck_assert_msg(strcmp(derived, by_hand) == 0, "%s %s: ALiBi's derived backward differs from the "
                  "hand-written one", kernel, arch);
    free(derived);
    free(by_hand);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("attention_bwd_grad_ptx");
    TCase *tc = tcase_create("ptx");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, derived_equals_hand_written, 0, 4);
    suite_add_tcase(s, tc);
    return s;
}

TU_MAIN(suite)
