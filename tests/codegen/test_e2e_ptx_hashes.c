/* test_e2e_ptx_hashes.c — the PTX of every shipped kernel, pinned byte for byte.
 *
 * A refactor must not change generated code. This test compiles the shipped
 * programs the way their users do — the attention forward as the runtime
 * builds it (k_tune's schedules for long sequences plus its short-causal
 * rows, the launch-time hints, PLAIN_SCORES) for f16/bf16 x head dim
 * 64/128/256 x causal x sm_80/sm_90a, the attention variants of
 * examples/attention, the backward's kernels as its plan requests them
 * (rt_attn_bwd_plan: f16, head dim 64/128/256 x causal x deterministic x
 * sm_80/sm_90a; without launch hints, whose spec the plan's test builds), and
 * the examples — hashes each PTX text (FNV-1a 64 and the size) and compares
 * with tests/codegen/ptx_hashes.txt.
 *
 * A change that is meant to alter code regenerates the file and says so in
 * its commit (what changed in the PTX and what it did to the benchmark):
 *     KILN_UPDATE_PTX_HASHES=1 build/tests/codegen_test_e2e_ptx_hashes
 * writes the file in the source tree instead of comparing.
 */
#include "compiler/support/support.h"
#include "tests/testutil.h"
#include "tests/ptx_util.h"
#include "jit_internal.h"   /* rt_attn_bwd_plan: the backward's kernels as the runtime asks for them */

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HASH_FILE "tests/codegen/ptx_hashes.txt"

typedef struct Case {
    const char *name;        /* key in the hash file */
    const char *file;        /* source, relative to the source dir */
    const char *prefix_file; /* hooks prepended (attention variants), or NULL */
    const char *kernel;
    KilnDefine defs[8];
    int ndefs;
    const char *arch;
    int warps, stages;
    bool attn_hints;         /* the runtime's launch-time hints */
    bool no_wgmma;
    const RtAttnVariant *bwd; /* a backward plan's kernel: its program, defines, warps, stages, schedule */
} Case;

static uint64_t fnv1a(const char *p, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)p[i]) * 1099511628211ull;
    return h;
}

static char *source_of(const Case *c)
{
    char *main_src = sup_read_file_text(tu_src_path(c->file), NULL);
    ck_assert_msg(main_src != NULL, "cannot read %s", c->file);
    if (!c->prefix_file) return main_src;
    char *hooks = sup_read_file_text(tu_src_path(c->prefix_file), NULL);
    ck_assert_msg(hooks != NULL, "cannot read %s", c->prefix_file);
    size_t a = strlen(hooks), b = strlen(main_src);
    char *all = malloc(a + b + 2);
    memcpy(all, hooks, a);
    all[a] = '\n';
    memcpy(all + a + 1, main_src, b + 1);
    free(hooks);
    free(main_src);
    return all;
}

/* "name hash size\n" for one case. */
static void hash_case(const Case *c, StrBuf *out)
{
    char *src = source_of(c);
    KilnParamHint h[PU_ATTN_NHINTS];
    KilnCompileOptions o;
    pu_attention_options(&o, c->defs, c->ndefs, c->arch, c->warps, c->stages, KILN_EMIT_PTX,
                         c->attn_hints ? h : NULL);
    o.kernel = c->kernel;
    o.schedule.no_wgmma = c->no_wgmma;
    if (c->bwd) {
        const RtAttnVariant *v = c->bwd;
        o = (KilnCompileOptions){.kernel = v->kernel, .defines = v->defines, .ndefines = v->ndefines,
                                 .arch = c->arch, .num_warps = v->num_warps, .num_stages = v->num_stages,
                                 .schedule = v->schedule, .emit = KILN_EMIT_PTX};
    }
    KilnCompileResult r;
    KilnStatus st = kiln_compile(c->file, src, &o, &r);
    ck_assert_msg(st == KILN_OK, "%s: %s\n%s", c->name, kiln_status_name(st), r.diagnostics ? r.diagnostics : "");
    sb_printf(out, "%s %016" PRIx64 " %zu\n", c->name, fnv1a(r.output, r.output_size), r.output_size);
    kiln_compile_result_free(&r);
    free(src);
}

/* ---- the cases ---- */

static Case g_cases[256];
static int g_ncases;
static char g_names[256][96];
static char g_vals[256][4][16];
static RtAttnBwdPlan g_bwd_plans[24];

/* The runtime's schedule (runtime k_tune) for head dim d on `arch`; short: the
 * sm_90 rows for short causal sequences. */
static void attn_schedule(int d, bool causal, bool sm90, bool short_seq, int *bm, int *bn, int *w)
{
    if (!sm90) {
        *bm = d == 256 ? 64 : 128, *bn = d == 256 ? 32 : 64, *w = d == 256 ? 4 : 8;
        return;
    }
    *w = 4;
    if (d == 64) *bm = 64, *bn = causal && short_seq ? 64 : 128;
    else if (d == 128) *bm = causal && short_seq ? 64 : 128, *bn = 64;
    else *bm = 64, *bn = 64;
}

static void add_attention(const char *dtype, int d, bool causal, const char *arch, bool short_seq, bool no_wgmma,
                          const char *prefix, const char *hook_defs[][2], int nhooks, const char *tag)
{
    Case *c = &g_cases[g_ncases];
    int i = g_ncases++;
    int bm, bn, w;
    attn_schedule(d, causal, !strcmp(arch, "sm_90a"), short_seq, &bm, &bn, &w);
    snprintf(g_names[i], sizeof g_names[i], "attn_%s_d%d_%s_%s%s%s%s", dtype, d, causal ? "causal" : "full", arch,
             short_seq ? "_short" : "", no_wgmma ? "_nowgmma" : "", tag ? tag : "");
    snprintf(g_vals[i][0], 16, "%d", d);
    snprintf(g_vals[i][1], 16, "%d", bm);
    snprintf(g_vals[i][2], 16, "%d", bn);
    snprintf(g_vals[i][3], 16, "attn_fwd_%s", dtype);
    *c = (Case){.name = g_names[i], .file = "lang/lib/attention_fwd.tile", .prefix_file = prefix,
                .kernel = g_vals[i][3], .arch = arch, .warps = w, .stages = 2, .attn_hints = true,
                .no_wgmma = no_wgmma};
    c->defs[c->ndefs++] = (KilnDefine){"HEAD_DIM", g_vals[i][0]};
    c->defs[c->ndefs++] = (KilnDefine){"BLOCK_M", g_vals[i][1]};
    c->defs[c->ndefs++] = (KilnDefine){"BLOCK_N", g_vals[i][2]};
    c->defs[c->ndefs++] = (KilnDefine){"CAUSAL", causal ? "true" : "false"};
    if (!nhooks) c->defs[c->ndefs++] = (KilnDefine){"PLAIN_SCORES", "true"};
    for (int k = 0; k < nhooks; k++) c->defs[c->ndefs++] = (KilnDefine){hook_defs[k][0], hook_defs[k][1]};
}

static void add_example(const char *file, const char *kernel, const char *arch, const KilnDefine *defs, int ndefs)
{
    Case *c = &g_cases[g_ncases];
    int i = g_ncases++;
    snprintf(g_names[i], sizeof g_names[i], "%s_%s", kernel, arch);
    *c = (Case){.name = g_names[i], .file = file, .kernel = kernel, .arch = arch};
    for (int k = 0; k < ndefs; k++) c->defs[c->ndefs++] = defs[k];
}

static void build_cases(void)
{
    if (g_ncases) return;
    static const char *const archs[] = {"sm_80", "sm_90a"};
    static const int dims[] = {64, 128, 256};
    for (int a = 0; a < 2; a++)
        for (int t = 0; t < 2; t++)
            for (int d = 0; d < 3; d++)
                for (int causal = 0; causal < 2; causal++)
                    add_attention(t ? "bf16" : "f16", dims[d], causal, archs[a], false, false, NULL, NULL, 0, NULL);
    /* sm_90's short causal rows, and the mma.sync path on sm_90a */
    add_attention("f16", 64, true, "sm_90a", true, false, NULL, NULL, 0, NULL);
    add_attention("f16", 128, true, "sm_90a", true, false, NULL, NULL, 0, NULL);
    add_attention("f16", 128, false, "sm_90a", false, true, NULL, NULL, 0, NULL);
    /* the shipped variants (hooks + the forward program) */
    const char *alibi[][2] = {{"score_mod", "alibi_score"}, {"ALIBI_HEADS", "16"}};
    const char *softcap[][2] = {{"score_mod", "softcap_score"}};
    const char *window[][2] = {{"mask_mod", "window_mask"}, {"kv_start", "window_start"}};
    for (int a = 0; a < 2; a++) {
        add_attention("f16", 128, false, archs[a], false, false, "examples/attention/alibi.tile", alibi, 2, "_alibi");
        add_attention("bf16", 128, false, archs[a], false, false, "examples/attention/softcap.tile", softcap, 1,
                      "_softcap");
        add_attention("f16", 128, true, archs[a], false, false, "examples/attention/sliding_window.tile", window, 2,
                      "_window");
    }
    /* the backward's kernels, each plan's under its call's name */
    for (int a = 0, np = 0; a < 2; a++)
        for (int d = 0; d < 3; d++)
            for (int causal = 0; causal < 2; causal++)
                for (int det = 0; det < 2; det++) {
                    KilnAttentionBwdParams p = {.fwd = {.dtype = KILN_F16, .batch = 2, .heads_q = 16, .heads_kv = 16,
                                                        .seqlen_q = 8192, .seqlen_k = 8192, .head_dim = dims[d],
                                                        .causal = causal},
                                                .deterministic = det};
                    RtAttnBwdPlan *plan = &g_bwd_plans[np++];
                    rt_attn_bwd_plan(a ? 90 : 80, &p, plan);
                    for (int k = 0; k < plan->n; k++) {
                        const RtAttnVariant *v = &plan->k[k];
                        int i = g_ncases;
                        snprintf(g_names[i], sizeof g_names[i], "bwd_%s_d%d_%s%s_%s", v->kernel, dims[d],
                                 causal ? "causal" : "full", det ? "_det" : "", archs[a]);
                        g_cases[g_ncases++] = (Case){.name = g_names[i], .file = v->program,
                                                     .kernel = v->kernel, .arch = archs[a], .bwd = v};
                    }
                }
    /* the examples, as kiln-examples compiles them */
    static const KilnDefine softmax_defs[] = {{"BLOCK", "1024"}};
    static const KilnDefine matmul_defs[] = {{"BLOCK_M", "64"}, {"BLOCK_N", "64"}, {"BLOCK_K", "32"}};
    for (int a = 0; a < 2; a++) {
        add_example("examples/vec_add.tile", "vec_add", archs[a], NULL, 0);
        add_example("examples/softmax.tile", "softmax", archs[a], softmax_defs, 1);
        add_example("examples/layer_norm.tile", "layer_norm", archs[a], NULL, 0);
        add_example("examples/matmul.tile", "matmul", archs[a], matmul_defs, 3);
        add_example("examples/matmul.tile", "matmul", archs[a], NULL, 0);
    }
    /* the two matmul cases differ in their defines: keep their names apart */
    for (int i = 0; i < g_ncases; i++)
        if (!strncmp(g_cases[i].name, "matmul_", 7) && g_cases[i].ndefs == 0)
            strncat(g_names[i], "_defaults", sizeof g_names[i] - strlen(g_names[i]) - 1);
}

/* ---- the test ---- */

START_TEST(ptx_is_byte_identical)
{
    build_cases();
    StrBuf got;
    sb_init(&got);
    for (int i = 0; i < g_ncases; i++) hash_case(&g_cases[i], &got);
    const char *upd = getenv("KILN_UPDATE_PTX_HASHES");
    if (upd && *upd == '1') {
        FILE *f = fopen(tu_src_path(HASH_FILE), "w");
        ck_assert_ptr_nonnull(f);
        fputs(got.data, f);
        ck_assert_int_eq(fclose(f), 0);
        printf("wrote %s (%d kernels)\n", HASH_FILE, g_ncases);
        sb_free(&got);
        return;
    }
    char *want = sup_read_file_text(tu_src_path(HASH_FILE), NULL);
    ck_assert_msg(want != NULL, "cannot read %s: run with KILN_UPDATE_PTX_HASHES=1 to create it", HASH_FILE);
    /* report every kernel that moved, not only the first */
    StrBuf diff;
    sb_init(&diff);
    const char *g = got.data;
    while (*g) {
        const char *eol = strchr(g, '\n');
        size_t n = (size_t)(eol - g);
        const char *sp = memchr(g, ' ', n);
        size_t klen = (size_t)(sp - g) + 1;   /* "name " */
        const char *hit = NULL;
        for (const char *w = want; w && *w; w = strchr(w, '\n'), w = w ? w + 1 : NULL)
            if (!strncmp(w, g, klen)) { hit = w; break; }
        if (!hit) sb_printf(&diff, "  new kernel, not in the file: %.*s\n", (int)n, g);
        else if (strncmp(hit, g, n + 1)) {
            const char *hend = strchr(hit, '\n');
            sb_printf(&diff, "  %.*s  (was: %.*s)\n", (int)n, g, hend ? (int)(hend - hit) : (int)strlen(hit), hit);
        }
        g = eol + 1;
    }
    ck_assert_msg(diff.len == 0,
                  "the PTX of shipped kernels changed:\n%s"
                  "a change meant to alter code: KILN_UPDATE_PTX_HASHES=1 %s, and say what it did in the commit",
                  diff.data, "build/tests/codegen_test_e2e_ptx_hashes");
    /* and nothing in the file that is no longer compiled */
    int nwant = 0;
    for (const char *p = want; *p; p++) nwant += *p == '\n';
    ck_assert_int_eq(nwant, g_ncases);
    free(want);
    sb_free(&diff);
    sb_free(&got);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("ptx_hashes");
    TCase *tc = tcase_create("shipped kernels");
    tcase_set_timeout(tc, 1200);
    tcase_add_test(tc, ptx_is_byte_identical);
    suite_add_tcase(s, tc);
    return s;
}

TU_MAIN(suite)
