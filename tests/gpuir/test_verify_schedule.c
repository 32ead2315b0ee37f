/* test_verify_schedule.c — the GPU IR layer's verifier (compiler/gpuir/verify.c)
 * rejects broken schedule attributes with a precise message: pipeline plans,
 * SRAM placement, mbarrier hand-off, TMA maps, ping-pong, warp
 * specialisation (kernels written as text), and wgmma.pending /
 * wgmma.overlap (edits of the pass goldens, each breaking one rule). Each
 * case names the op, its LINE:COL and the problem. */
#include "compiler/gpuir/gpuir.h"
#include "compiler/support/diag.h"
#include "compiler/support/support.h"
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

typedef struct Case {
    const char *body;   /* a whole kernel */
    const char *want;   /* fragment of the verifier's message */
} Case;

#define L0 "#L0 = #blocked<spt=[1], tpw=[32], wpc=[4], order=[0]>\n"
#define GHEAD "kernel @g(%p: ptr<f16>, %n: i32) num_warps = 4 num_stages = 2"
#define GHEAD8 "kernel @g(%p: ptr<f16>, %n: i32) num_warps = 8 num_stages = 2"
/* a dot (its attributes ATTRS) on line 5 */
#define DOT8(ATTRS)                                                                                     \
    "  %0 = const 0 : tensor<128x64xf16>\n  %1 = const 0 : tensor<64x64xf16>\n"                          \
    "  %2 = const 0 : tensor<128x64xf32>\n  %4 = dot %0, %1, %2 " ATTRS " : tensor<128x64xf32>\n"

/* an e4m3 dot 128x128xK in wgmma's grid on 8 warps (its attributes ATTRS, the kernel's KATTRS), on line 8 */
#define F8DOT(ATTRS, KATTRS, K)                                                                           \
    "#L0 = #mma<C, wm=8, wn=1>\n#L1 = #mma<A, wm=8, wn=1>\n#L2 = #mma<B, wm=8, wn=1>\n"                       \
    "kernel @g(%p: ptr<f16>, %n: i32) num_warps = 8 num_stages = 2" KATTRS " {\n"                          \
    "  %0 = const 0 : tensor<128x" K "xf8e4m3, #L1>\n  %1 = const 0 : tensor<" K "x128xf8e4m3, #L2>\n"      \
    "  %2 = const 0 : tensor<128x128xf32, #L0>\n  %4 = dot %0, %1, %2 " ATTRS " : tensor<128x128xf32, #L0>\n" \
    "  return\n}\n"

static const Case cases[] = {
    {L0 GHEAD " {\n  %0 = arange 0, 64 : tensor<64xi32, #L0>\n  %1 = load %p {pipeline.slot_bytes = 128} : f16\n"
     "  return\n}\n",
     "load at 4:3: pipeline.slot_bytes on an op that is not a load in the body of a pipelined loop"},
    {L0 GHEAD " attributes {smem = 1024} {\n"
     "  %0 = arange 0, 64 : tensor<64xi32, #L0>\n"
     "  %1 = reduce sum 0 %0 {smem.offset = 0, smem.bytes = 512, smem.live = [1, 3]} : i32\n"
     "  %2 = reduce max 0 %0 {smem.offset = 256, smem.bytes = 512, smem.live = [3, 3]} : i32\n"
     "  return\n}\n",
     "reduce at 4:3: SRAM [0, 512) live 1..3 overlaps that of reduce at 5:3 ([256, 768) live 3..3)"},
    {L0 GHEAD " attributes {smem = 256} {\n"
     "  %0 = arange 0, 64 : tensor<64xi32, #L0>\n"
     "  %1 = reduce sum 0 %0 {smem.offset = 0, smem.bytes = 512, smem.live = [1, 1]} : i32\n"
     "  return\n}\n",
     "reduce at 4:3: SRAM [0, 512) ends past the kernel's smem = 256"},
    {L0 GHEAD " attributes {smem = 1024} {\n"
     "  %0 = arange 0, 64 : tensor<64xi32, #L0>\n"
     "  %1 = reduce sum 0 %0 {smem.offset = 8, smem.bytes = 512, smem.live = [1, 1]} : i32\n"
     "  return\n}\n",
     "reduce at 4:3: smem.offset is not 16-byte aligned"},
    {L0 GHEAD " {\n  %0 = const 0 : i32\n  %1 = const 1 : i32\n"
     "  for %i = %0 to %n step %1 {pipeline.stages = 2, pipeline.issue = 5} {\n    yield\n  }\n  return\n}\n",
     "for at 5:3: attribute pipeline.issue must be one integer in [0, 2]"},
    /* mbarrier stage hand-off (pass_pipeline.c, pass_sram_alloc.c) */
    {L0 GHEAD " {\n  %0 = const 0 {pipeline.mbarrier = 1} : i32\n  return\n}\n",
     "const at 3:3: pipeline.mbarrier on an op that is not a pipelined loop"},
    {L0 GHEAD " {\n  %0 = const 0 : i32\n  %1 = const 1 : i32\n"
     "  for %i = %0 to %n step %1 {pipeline.mbarrier = 1} {\n    yield\n  }\n  return\n}\n",
     "for at 5:3: pipeline.mbarrier on an op that is not a pipelined loop"},
    {L0 GHEAD " {\n  %0 = const 0 : i32\n  %1 = const 1 : i32\n"
     "  for %i = %0 to %n step %1 {pipeline.stages = 2, pipeline.mbarrier = 2} {\n    yield\n  }\n  return\n}\n",
     "for at 5:3: attribute pipeline.mbarrier must be one integer in [1, 1]"},
    {L0 GHEAD " attributes {smem = 64} {\n  %0 = const 0 : i32\n  %1 = const 1 : i32\n"
     "  for %i = %0 to %n step %1 {pipeline.stages = 2, smem.offset = 0, smem.bytes = 32, smem.live = [2, 4]} {\n"
     "    yield\n  }\n  return\n}\n",
     "for at 5:3: smem.* on a loop without pipeline.mbarrier"},
    {L0 GHEAD " attributes {smem = 64} {\n  %0 = const 0 : i32\n  %1 = const 1 : i32\n"
     "  for %i = %0 to %n step %1 {pipeline.stages = 3, pipeline.mbarrier = 1, smem.offset = 0, smem.bytes = 32, "
     "smem.live = [2, 4]} {\n    yield\n  }\n  return\n}\n",
     "for at 5:3: its mbarriers (smem.bytes) need 16 x pipeline.stages = 48 bytes"},
    /* TMA copies (pass_tma.c) */
    {L0 GHEAD " attributes {wgmma = 1} {\n  %0 = const 0 {tma.map = 0} : i32\n  return\n}\n",
     "const at 3:3: tma.map in a kernel without tma.maps"},
    {L0 GHEAD " attributes {wgmma = 1, tma.maps = 1} {\n  %0 = const 0 {tma.map = 0} : i32\n  return\n}\n",
     "const at 3:3: tma.map on an op that is not a pipelined load of a pipeline.mbarrier loop"},
    {L0 GHEAD " attributes {wgmma = 1, tma.maps = 1} {\n  %0 = const 0 {tma.map = 1} : i32\n  return\n}\n",
     "const at 3:3: attribute tma.map must be one integer in [0, 0]"},
    {L0 GHEAD " attributes {wgmma = 1, tma.maps = 2} {\n  %0 = const 0 : i32\n  %1 = const 1 : i32\n"
     "  %2 = splat %p : tensor<64xptr<f16>, #L0>\n"
     "  for %i = %0 to %n step %1 {pipeline.stages = 2, pipeline.mbarrier = 1} {\n"
     "    %3 = load %2 {pipeline.slot_bytes = 128, tma.map = 0} : tensor<64xf16, #L0>\n"
     "    %4 = load %2 {pipeline.slot_bytes = 128} : tensor<64xf16, #L0>\n"
     "    yield\n  }\n  return\n}\n",
     "load at 8:5: a pipelined load without tma.map in a loop with TMA loads"},
    {L0 GHEAD " attributes {tma.maps = 1} {\n  %0 = const 0 : i32\n  %1 = const 1 : i32\n"
     "  %2 = splat %p : tensor<64xptr<f16>, #L0>\n"
     "  for %i = %0 to %n step %1 {pipeline.stages = 2, pipeline.mbarrier = 1} {\n"
     "    %3 = load %2 {pipeline.slot_bytes = 128, tma.map = 0} : tensor<64xf16, #L0>\n"
     "    yield\n  }\n  return\n}\n",
     "load at 7:5: tma.map in a kernel without wgmma = 1"},
    /* warpgroup ping-pong (pass_pingpong.c) */
    {GHEAD8 " attributes {wgmma = 1, pingpong = 2} {\n" DOT8("{pingpong = 1}") "  %3 = const 0 {pingpong = 1} : i32\n  return\n}\n",
     "const at 6:3: pingpong on a non-dot"},
    {GHEAD8 " attributes {wgmma = 1} {\n" DOT8("{pingpong = 1}") "  return\n}\n",
     "dot at 5:3: pingpong on a dot of a kernel without pingpong"},
    {GHEAD8 " attributes {wgmma = 1, pingpong = 2} {\n" DOT8("{pingpong = 2}") "  return\n}\n",
     "dot at 5:3: attribute pingpong must be one integer in [1, 1]"},
    {GHEAD " attributes {wgmma = 1, pingpong = 2} {\n" DOT8("{pingpong = 1}") "  return\n}\n",
     "kernel @g at 1:1: attribute pingpong must be num_warps / 4 >= 2 (num_warps = 4)"},
    {GHEAD8 " attributes {wgmma = 1, pingpong = 4} {\n" DOT8("{pingpong = 1}") "  return\n}\n",
     "attribute pingpong must be num_warps / 4 >= 2 (num_warps = 8)"},
    {GHEAD8 " attributes {pingpong = 2} {\n" DOT8("{pingpong = 1}") "  return\n}\n",
     "attribute pingpong needs wgmma = 1"},
    {GHEAD8 " attributes {wgmma = 1, pingpong = 2} {\n" DOT8("") "  return\n}\n",
     "attribute pingpong but no dot with pingpong = 1"},
    /* warp specialisation (pass_warp_specialize.c) */
    {GHEAD8 " attributes {wgmma = 1, warp_spec = 1} {\n  return\n}\n", "attribute warp_spec but no pipelined loop"},
    {L0 GHEAD8 " attributes {smem = 64, warp_spec = 1} {\n  %0 = const 0 : i32\n  %1 = const 1 : i32\n"
     "  for %i = %0 to %n step %1 {pipeline.stages = 2, pipeline.mbarrier = 1, smem.offset = 0, smem.bytes = 32, "
     "smem.live = [2, 4]} {\n    yield\n  }\n  return\n}\n",
     "attribute warp_spec needs wgmma = 1"},
    {L0 GHEAD8 " attributes {wgmma = 1, warp_spec = 1} {\n  %0 = const 0 : i32\n  %1 = const 1 : i32\n"
     "  for %i = %0 to %n step %1 {pipeline.stages = 2} {\n    yield\n  }\n  return\n}\n",
     "for at 5:3: warp_spec with a pipelined loop without pipeline.mbarrier"},
    {L0 GHEAD8 " attributes {wgmma = 1, smem = 64, warp_spec = 1} {\n  %0 = const 0 : i32\n  %1 = const 1 : i32\n"
     "  for %j = %0 to %n step %1 {\n"
     "    for %i = %0 to %n step %1 {pipeline.stages = 2, pipeline.mbarrier = 1, smem.offset = 0, smem.bytes = 32, "
     "smem.live = [3, 5]} {\n      yield\n    }\n    yield\n  }\n  return\n}\n",
     "for at 6:5: warp_spec with a pipelined loop that is not an op of the kernel's body"},
    {"kernel @g(%p: ptr<f16>, %n: i32) num_warps = 2 num_stages = 2 attributes {wgmma = 1, smem = 64, warp_spec = 1} {\n"
     "  %0 = const 0 : i32\n  %1 = const 1 : i32\n"
     "  for %i = %0 to %n step %1 {pipeline.stages = 2, pipeline.mbarrier = 1, smem.offset = 0, smem.bytes = 32, "
     "smem.live = [2, 4]} {\n    yield\n  }\n  return\n}\n",
     "attribute warp_spec needs num_warps a multiple of 4 up to 28 (num_warps = 2)"},
    {L0 GHEAD8 " attributes {wgmma = 1, smem = 64, warp_spec = 2} {\n  %0 = const 0 : i32\n  %1 = const 1 : i32\n"
     "  for %i = %0 to %n step %1 {pipeline.stages = 2, pipeline.mbarrier = 1, smem.offset = 0, smem.bytes = 32, "
     "smem.live = [2, 4]} {\n    yield\n  }\n  return\n}\n",
     "attribute warp_spec must be 1"},
    /* --lean-producer (pass_warp_specialize.c): warp_spec.producer_regs */
    {L0 GHEAD8 " attributes {wgmma = 1, smem = 64, warp_spec.producer_regs = 24} {\n  %0 = const 0 : i32\n"
     "  %1 = const 1 : i32\n  return\n}\n",
     "attribute warp_spec.producer_regs needs warp_spec"},
    {L0 GHEAD8 " attributes {wgmma = 1, smem = 64, warp_spec = 1, warp_spec.producer_regs = 32} {\n"
     "  %0 = const 0 : i32\n  %1 = const 1 : i32\n"
     "  for %i = %0 to %n step %1 {pipeline.stages = 2, pipeline.mbarrier = 1, smem.offset = 0, smem.bytes = 32, "
     "smem.live = [2, 4]} {\n    yield\n  }\n  return\n}\n",
     "attribute warp_spec.producer_regs must be 24"},
    {L0 GHEAD8 " attributes {wgmma = 1, warp_spec = 1, warp_spec.producer_regs = 24} {\n  %0 = const 0 : i32\n"
     "  %1 = const 1 : i32\n  %2 = splat %p : tensor<64xptr<f16>, #L0>\n"
     "  for %i = %0 to %n step %1 {pipeline.stages = 2, pipeline.mbarrier = 1} {\n"
     "    %3 = load %2 {pipeline.slot_bytes = 128} : tensor<64xf16, #L0>\n"
     "    yield\n  }\n  return\n}\n",
     "load at 7:5: warp_spec.producer_regs with a pipelined load that is not a TMA copy"},
    /* FP8 wgmma (wgmma.e4m3, pass_accelerate_dot.c) */
    {L0 GHEAD " attributes {wgmma = 1} {\n  %0 = const 0 {wgmma.e4m3 = 1} : i32\n  return\n}\n",
     "const at 3:3: wgmma.e4m3 on a non-dot"},
    {GHEAD8 " attributes {wgmma = 1} {\n" DOT8("{wgmma.e4m3 = 1}") "  return\n}\n",
     "dot at 5:3: wgmma.e4m3 on a dot that is not f8e4m3 x f8e4m3 -> f32"},
    {F8DOT("", " attributes {wgmma = 1}", "128"),
     "dot at 8:3: an f8e4m3 dot on tensor cores without wgmma.e4m3 (FP8 wgmma is the only e4m3 lowering)"},
    {F8DOT("{wgmma.e4m3 = 1}", "", "128"), "dot at 8:3: wgmma.e4m3 on a dot of a kernel without wgmma"},
    {F8DOT("{wgmma.e4m3 = 1}", " attributes {wgmma = 1}", "64"),
     "dot at 8:3: wgmma.e4m3 on a 128x128x64 dot on 8 warps: FP8 wgmma needs M % (16 x warps) = 0, N <= 256, K % 128 = 0"},
};


static IrFunc *parse_one(Arena *a, const char *src)
{
    Diag d;
    diag_init(&d, "v.ir", src);
    IrModule *m = ir_parse(a, &d, "v.ir", src);
    ck_assert_msg(m && m->nfuncs == 1, "does not parse:\n%s\n%s", src, d.out.data ? d.out.data : "");
    diag_free(&d);
    return m->funcs[0];
}

/* The IR itself is valid (ir_verify), its schedule attributes are not. */
static void expect_fail(const IrFunc *f, const char *want, const char *what)
{
    StrBuf e;
    sb_init(&e);
    ck_assert_msg(ir_verify(f, &e), "%s: the IR verifier refused it:\n%s", what, e.data);
    bool ok = gp_verify_schedule(f, &e);
    ck_assert_msg(!ok, "verifier accepted %s", what);
    ck_assert_msg(e.data && strncmp(e.data, "internal error: verifier: ", 26) == 0, "bad prefix: %s", e.data);
    ck_assert_msg(strstr(e.data, want) != NULL, "%s\nwanted: %s\ngot:    %s", what, want, e.data);
    sb_free(&e);
}

START_TEST(text_cases)
{
    const Case *c = &cases[_i];
    Arena a;
    arena_init(&a);
    expect_fail(parse_one(&a, c->body), c->want, c->body);
    arena_free(&a);
}
END_TEST

/* wgmma.pending (pass_pipeline.c): the pipeline golden of a matmul whose
 * wgmma group stays in flight verifies; each edit below breaks one rule. */
static char *replaced(const char *src, const char *from, const char *to)
{
    const char *at = strstr(src, from);
    ck_assert_msg(at != NULL, "'%s' not in the golden", from);
    size_t n = strlen(src) - strlen(from) + strlen(to) + 1, pre = (size_t)(at - src);
    char *out = malloc(n);
    memcpy(out, src, pre);
    strcpy(out + pre, to);
    strcat(out, at + strlen(from));
    return out;
}

/* The GPU IR golden `path` verifies; each edit {from, to, error} of it fails with that error. */
static void check_edits(const char *path, const char *const (*edits)[3], size_t n)
{
    char *src = sup_read_file_text(tu_src_path(path), NULL);
    ck_assert_ptr_nonnull(src);
    Arena a;
    arena_init(&a);
    StrBuf e;
    sb_init(&e);
    IrFunc *ok = parse_one(&a, src);
    ck_assert_msg(ir_verify_gpu(ok, &e) && gp_verify_schedule(ok, &e), "%s", e.data);
    sb_free(&e);
    for (size_t i = 0; i < n; i++) {
        char *bad = replaced(src, edits[i][0], edits[i][1]);
        expect_fail(parse_one(&a, bad), edits[i][2], edits[i][0]);
        free(bad);
    }
    arena_free(&a);
    free(src);
}

START_TEST(gpu_wgmma_pending_rules)
{
    static const char *const edits[][3] = {
        {"attributes {wgmma = 1} ", "", "wgmma.pending in a kernel without wgmma = 1"},
        {"pipeline.stages = 4", "pipeline.stages = 2", "not directly in a loop pipelined over 3 or more stages"},
        {"%b = load %74, %85, %52 {pipeline.slot_bytes = 16384}", "%b = load %74, %85, %52",
         "operands are not the loop's pipelined loads"},
        {"yield %88", "yield %53", "accumulator is not loop-carried and used only by its yield"},
        {"{wgmma.pending = 1}", "{wgmma.pending = 2}", "attribute wgmma.pending must be one integer in [1, 1]"},
        {"%87 = convert_layout %b :", "%87 = convert_layout %b {wgmma.pending = 1} :", "wgmma.pending on a non-dot"},
    };
    check_edits("tests/codegen/golden/pipeline/matmul_wgmma_in_flight_sm90.expected", edits,
                sizeof edits / sizeof edits[0]);
}
END_TEST

/* wgmma.overlap (pass_dot_overlap.c): the golden of a rotated two-dot loop
 * whose first dot stays in flight until the second verifies; each edit below
 * breaks one rule. */
START_TEST(gpu_wgmma_overlap_rules)
{
    static const char *const edits[][3] = {
        {"attributes {wgmma = 1} ", "", "wgmma.overlap in a kernel without wgmma = 1"},
        {" {pipeline.stages = 2, pipeline.issue = 0}", "", "wgmma.overlap on a dot not directly in a pipelined loop"},
        {"%51 = load %48, %50, %37 {pipeline.slot_bytes = 8192}", "%51 = load %48, %50, %37",
         "operand 1 is neither the loop's pipelined load nor defined outside the loop"},
        {"%s_next = dot %40, %52, %39", "%s_next = dot %40, %52, %44", "accumulator is defined in the loop"},
        {"yield %63, %s_next", "yield %63, %45", "result is used other than by the yield"},
        {"%56 = sub %45, %55", "%56 = sub %s_next, %55", "result is used other than by the yield"},
        {"%63 = dot %57, %62, %44 :", "%63 = dot %57, %62, %44 {wgmma.pending = 1} :",
         "a dot that retires a wgmma.overlap group is itself in flight"},
        {"{wgmma.overlap = 1}", "{wgmma.overlap = 2}", "attribute wgmma.overlap must be one integer in [1, 1]"},
        {"%52 = convert_layout %51 :", "%52 = convert_layout %51 {wgmma.overlap = 1} :", "wgmma.overlap on a non-dot"},
    };
    check_edits("tests/codegen/golden/dot-overlap/rotated_overlap_sm90.expected", edits,
                sizeof edits / sizeof edits[0]);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("gpuir_verify");
    TCase *tc = tcase_create("core");
    tcase_add_loop_test(tc, text_cases, 0, (int)(sizeof cases / sizeof cases[0]));
    tcase_add_test(tc, gpu_wgmma_pending_rules);
    tcase_add_test(tc, gpu_wgmma_overlap_rules);
    suite_add_tcase(s, tc);
    return s;
}

TU_MAIN(suite)
