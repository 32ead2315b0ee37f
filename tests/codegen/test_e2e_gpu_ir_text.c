/* test_e2e_gpu_ir_text.c — the GPU IR text is the whole truth: for the
 * shipped attention kernel (f16, d 64 and 128, sm_80 and sm_90a with wgmma,
 * at the runtime's launch-time hints, so its loads are pipelined) and matmul,
 * `--emit gpu-ir` text
 *   - parses back and prints the same (layouts, pipeline and SRAM attributes
 *     included),
 *   - and compiled from that text alone (cg_compile_gpu_ir, no pass run)
 *     gives byte for byte the PTX of the compile from source.
 * So nothing the lowering reads lives outside the IR. */
#include "compiler/codegen/codegen.h"
#include "compiler/support/diag.h"
#include "tests/testutil.h"
#include "tests/ptx_util.h"

#include <string.h>

static char *compile_text(const char *file, const char *src, const KilnCompileOptions *base, KilnEmit emit)
{
    KilnCompileOptions o = *base;
    o.emit = emit;
    KilnCompileResult r;
    KilnStatus st = kiln_compile(file, src, &o, &r);
    ck_assert_msg(st == KILN_OK, "%s: %s\n%s", file, kiln_status_name(st), r.diagnostics ? r.diagnostics : "");
    char *out = malloc(r.output_size + 1);
    memcpy(out, r.output, r.output_size);
    out[r.output_size] = 0;
    kiln_compile_result_free(&r);
    return out;
}

static void check(const char *file, const char *src, const KilnCompileOptions *o)
{
    char *gpu_ir = compile_text(file, src, o, KILN_EMIT_GPU_IR);
    char *ptx = compile_text(file, src, o, KILN_EMIT_PTX);
    ck_assert_msg(strstr(gpu_ir, "smem.offset") && strstr(gpu_ir, "#L0 = ") && strstr(gpu_ir, "pipeline.stages"),
                  "%s --arch %s: decisions missing from the GPU IR", file, o->arch);
    bool sm90a = strcmp(o->arch, "sm_90a") == 0;
    ck_assert_msg(sm90a == (strstr(gpu_ir, "wgmma = 1") != NULL), "%s --arch %s: wgmma attribute", file, o->arch);
    Arena a;
    arena_init(&a);
    Diag d;
    diag_init(&d, "<gpu-ir>", gpu_ir);
    IrModule *m = ir_parse(&a, &d, "<gpu-ir>", gpu_ir);
    ck_assert_msg(m && m->nfuncs == 1, "%s --arch %s: the GPU IR does not parse:\n%s", file, o->arch,
                  d.out.data ? d.out.data : "");
    StrBuf again;
    sb_init(&again);
    ir_print_func(&again, m->funcs[0]);
    ck_assert_msg(strcmp(again.data, gpu_ir) == 0, "%s --arch %s: the GPU IR does not print the same", file, o->arch);
    CgOptions co = {.target = tgt_parse(o->arch), .stage = CG_STAGE_PTX};
    CgResult r;
    memset(&r, 0, sizeof r);
    bool ok = cg_compile_gpu_ir(m->funcs[0], NULL, &co, &r, &d);
    ck_assert_msg(ok, "%s --arch %s: PTX from the GPU IR: %s", file, o->arch, d.out.data ? d.out.data : "");
    ck_assert_msg(r.out.len == strlen(ptx) && memcmp(r.out.data, ptx, r.out.len) == 0,
                  "%s --arch %s: the PTX from the GPU IR text differs from the PTX from source", file, o->arch);
    sb_free(&r.out);
    sb_free(&r.dumps);
    sb_free(&r.stats);
    diag_free(&d);
    sb_free(&again);
    arena_free(&a);
    free(gpu_ir);
    free(ptx);
}

START_TEST(attention_text_is_the_truth)
{
    static const char *const archs[] = {"sm_80", "sm_90a"};
    const char *file = "lang/lib/attention_fwd.tile";
    char *src = sup_read_file_text(tu_src_path(file), NULL);
    ck_assert_ptr_nonnull(src);
    for (int ai = 0; ai < 2; ai++)
        for (int d = 64; d <= 128; d *= 2) {
            char hd[8];
            snprintf(hd, sizeof hd, "%d", d);
            KilnDefine defs[4] = {{"HEAD_DIM", hd}, {"BLOCK_M", ai ? "64" : "128"}, {"BLOCK_N", "64"},
                                  {"PLAIN_SCORES", "true"}};
            KilnParamHint h[PU_ATTN_NHINTS];
            KilnCompileOptions o;
            pu_attention_options(&o, defs, 4, archs[ai], ai ? 4 : 8, 2, KILN_EMIT_PTX, h);
            check(file, src, &o);
        }
    free(src);
}
END_TEST

START_TEST(matmul_text_is_the_truth)
{
    const char *file = "docs/snippets/matmul.tile";
    char *src = sup_read_file_text(tu_src_path(file), NULL);
    ck_assert_ptr_nonnull(src);
    KilnParamHint h[4] = {{"A", 16, 0}, {"B", 16, 0}, {"K", 16, 0}, {"N", 16, 0}};
    KilnCompileOptions o;
    memset(&o, 0, sizeof o);
    o.kernel = "matmul";
    o.arch = "sm_80";
    o.hints = h;
    o.nhints = 4;
    check(file, src, &o);
    o.arch = "sm_90a";
    check(file, src, &o);
    free(src);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("gpu_ir_text");
    TCase *tc = tcase_create("roundtrip");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, attention_text_is_the_truth);
    tcase_add_test(tc, matmul_text_is_the_truth);
    suite_add_tcase(s, tc);
    return s;
}

TU_MAIN(suite)
