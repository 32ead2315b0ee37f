/* test_e2e_attn_varlen_interp.c — packed variable-length batches (FlashAttention's varlen
 * interface) on the CPU interpreter: attn_fwd_varlen_* of lang/lib/attention_fwd.tile and the
 * backward's varlen kernels run through the runtime's own plan (rt_attn_bwd_plan with
 * cu_seqlens set), against the float64 reference per sequence (tools/attn_ref.c) with
 * FlashAttention's rules, and against the fixed-length kernels run on each sequence alone.
 *
 * Every case packs ragged sequences (a 0-length and a 1-length one included, lengths not
 * multiples of the blocks, seqlen_q != seqlen_k both ways) into [total, heads, d] ("thd")
 * or [heads, total, d] ("htd") buffers pre-filled with NaN, random inputs (never zeros),
 * poisoned outputs; two packs also run a sliding window through the hooks (mask_mod on the
 * sequence's own token indices, kv_start skipping blocks per sequence). Checks:
 *   - forward: max |O - ref| <= 2 * max |O_plain - ref| + 1e-5 over the sequences, LSE
 *     ([heads, total_q]) within 1e-4 relative, rows that see no key O = 0 and LSE = -inf;
 *   - backward: the same rule for dQ, dK and dV, dQ = 0 on rows that see no key;
 *   - one by one: running the fixed-length kernels on each sequence alone (batch 1, the
 *     pointers advanced to its first token) gives bit-identical O, LSE, dQ, dK and dV: the
 *     varlen kernels are the same computation per sequence, and touch nothing else (the
 *     NaN padding between rows compares equal byte for byte).
 */
#include "attn_bwd_harness.h"

#define MAXSEQ 6
#define FWD_PROGRAM "lang/lib/attention_fwd.tile"

typedef struct VCase {
    const char *what;
    AttnDtype dtype;
    int nseq, hq, hkv, d, causal;
    int head_major;        /* [heads, total, d] instead of [total, heads, d] */
    int pad;               /* extra elements per row pitch */
    int block_m, block_n;
    int deterministic;     /* the backward's dQ path */
    int lens_q[MAXSEQ], lens_k[MAXSEQ];
    int window;            /* the sliding-window hooks below (mask_mod, kv_start) in every kernel */
} VCase;

/* Keys i - 9 .. i + 2 of the sequence's own token indices, kv_start skipping whole blocks. */
static const char k_window_hooks[] =
    "fn win_mask(b, h, q_idx, kv_idx) { return kv_idx >= q_idx - 9 && kv_idx <= q_idx + 2; }\n"
    "fn win_start(start_m, block_m, seqlen_q, seqlen_k) { return start_m - 9; }\n";
static int ref_window(int b, int h, int i, int j, const void *ctx) { return j >= i - 9 && j <= i + 2; }

static const VCase vcases[] = {
    {"f16 d64 thd ragged", ATTN_F16, 4, 2, 2, 64, 0, 0, 0, 16, 16, 0, {37, 0, 1, 20}, {37, 5, 1, 33}, 0},
    {"bf16 d32 causal GQA 4/2", ATTN_BF16, 4, 4, 2, 32, 1, 0, 0, 16, 16, 1, {17, 1, 0, 40}, {30, 1, 3, 25}, 0},
    {"f16 d96 causal htd MQA sk=0", ATTN_F16, 3, 2, 1, 96, 1, 1, 0, 32, 16, 0, {33, 18, 1}, {20, 45, 0}, 0},
    {"bf16 d128 wide strides", ATTN_BF16, 3, 2, 2, 128, 0, 0, 8, 16, 32, 1, {5, 64, 0}, {70, 16, 9}, 0},
    {"f16 d64 causal sq>sk 32x32", ATTN_F16, 5, 2, 1, 64, 1, 1, 4, 32, 32, 1, {50, 3, 0, 1, 29}, {7, 3, 4, 0, 60}, 0},
    /* the GPU's forward tiles, several blocks per sequence */
    {"f16 d128 causal GQA 128x64", ATTN_F16, 4, 2, 1, 128, 1, 0, 0, 128, 64, 0, {200, 1, 0, 130}, {257, 64, 5, 130}, 0},
    /* hooks see token indices local to the sequence; kv_start skips blocks per sequence */
    {"bf16 d64 causal window hooks", ATTN_BF16, 4, 2, 1, 64, 1, 0, 0, 16, 16, 1, {40, 0, 1, 70}, {50, 3, 1, 70}, 1},
    {"f16 d32 window hooks atomic", ATTN_F16, 3, 2, 2, 32, 0, 1, 0, 16, 16, 0, {33, 17, 2}, {33, 40, 0}, 1},
};

typedef struct VRun {
    AttnProblem p;         /* strides: [1] head, [2] token; seqlen_q/k the max lengths */
    int cu_q[MAXSEQ + 1], cu_k[MAXSEQ + 1];
    int total_q, total_k;
    void *q, *k, *v, *o, *dout, *dq, *dk, *dv;
    float *lse, *scratch;
    size_t nq, nkv, nscratch;
} VRun;

static void vsetup(VRun *r, const VCase *c, uint64_t seed)
{
    memset(r, 0, sizeof *r);
    int pitch = c->d + c->pad;
    AttnProblem *p = &r->p;
    *p = (AttnProblem){.heads_q = c->hq, .heads_kv = c->hkv, .head_dim = c->d, .causal = c->causal,
                       .scale = 1.0 / sqrt((double)c->d), .dtype = c->dtype};
    attn_varlen_pack(p, c->nseq, c->lens_q, c->lens_k, c->head_major, pitch, r->cu_q, r->cu_k);
    if (c->window) p->mask_mod = ref_window;
    r->total_q = r->cu_q[c->nseq];
    r->total_k = r->cu_k[c->nseq];
    r->nq = (size_t)r->total_q * c->hq * pitch + 1;
    r->nkv = (size_t)r->total_k * c->hkv * pitch + 1;
    size_t es = attn_dtype_size(c->dtype);
    r->q = poisoned(r->nq * es), r->o = poisoned(r->nq * es), r->dout = poisoned(r->nq * es);
    r->dq = poisoned(r->nq * es);
    r->k = poisoned(r->nkv * es), r->v = poisoned(r->nkv * es);
    r->dk = poisoned(r->nkv * es), r->dv = poisoned(r->nkv * es);
    r->lse = poisoned(sizeof(float) * ((size_t)c->hq * r->total_q + 1));
    attn_fill_strided(c->dtype, r->q, p->q_stride, 1, c->hq, r->total_q, c->d, seed);
    attn_fill_strided(c->dtype, r->k, p->k_stride, 1, c->hkv, r->total_k, c->d, seed + 1);
    attn_fill_strided(c->dtype, r->v, p->v_stride, 1, c->hkv, r->total_k, c->d, seed + 2);
    attn_fill_strided(c->dtype, r->dout, p->o_stride, 1, c->hq, r->total_q, c->d, seed + 3);
}

static void vteardown(VRun *r)
{
    free(r->q); free(r->k); free(r->v); free(r->o); free(r->dout);
    free(r->dq); free(r->dk); free(r->dv); free(r->lse); free(r->scratch);
}

/* The launch arguments of one run: tensors (maybe advanced to a sequence), strides, sizes. */
typedef struct VArgs {
    void *q, *k, *v, *o, *dout, *dq, *dk, *dv;
    float *lse, *delta, *dq_acc;
    int *cu_q, *cu_k;
    int batch, seqlen_q, seqlen_k, total_q;
} VArgs;

/* Run kernel f on (g0, g1) with every parameter bound by name from a and r's strides; the
 * whole of r's buffers (and a's own LSE/scratch) are the memory the interpreter allows. */
static void vlaunch(const IrFunc *f, const VRun *r, const VCase *c, const VArgs *a, size_t nlse, size_t nscratch,
                    int g0, int g1)
{
    const AttnProblem *p = &r->p;
    InterpArg args[64];
    bool set[64] = {0};
    ck_assert_int_le(f->nparams, 64);
    const struct { const char *name; void *ptr; } ptrs[] = {
        {"Q", a->q}, {"K", a->k}, {"V", a->v}, {"O", a->o}, {"DO", a->dout}, {"DQ", a->dq}, {"DK", a->dk},
        {"DV", a->dv}, {"LSE", a->lse}, {"DELTA", a->delta}, {"DQ_ACC", a->dq_acc},
        {"cu_seqlens_q", a->cu_q}, {"cu_seqlens_k", a->cu_k}};
    static const char *tn[8] = {"q", "k", "v", "o", "do", "dq", "dk", "dv"};
    const int64_t *st[8] = {p->q_stride, p->k_stride, p->v_stride, p->o_stride,
                            p->o_stride, p->q_stride, p->k_stride, p->v_stride};
    for (int i = 0; i < f->nparams; i++) {
        const char *n = f->params[i]->name;
        for (size_t j = 0; j < sizeof ptrs / sizeof ptrs[0]; j++)
            if (!strcmp(n, ptrs[j].name)) args[i] = a_ptr(ptrs[j].ptr), set[i] = true;
        for (int t = 0; t < 8 && !set[i]; t++) {
            size_t l = strlen(tn[t]);
            if (!strncmp(n, "stride_", 7) && !strncmp(n + 7, tn[t], l) && strlen(n) == 8 + l) {
                char dim = n[7 + l];
                args[i] = a_int(dim == 'b' ? 0 : st[t][dim == 'h' ? 1 : 2]);
                set[i] = true;
            }
        }
        const struct { const char *name; int64_t v; } ints[] = {
            {"heads", c->hq}, {"heads_kv", c->hkv}, {"seqlen_q", a->seqlen_q}, {"seqlen_k", a->seqlen_k},
            {"total_q", a->total_q}};
        for (size_t j = 0; j < sizeof ints / sizeof ints[0] && !set[i]; j++)
            if (!strcmp(n, ints[j].name)) args[i] = a_int(ints[j].v), set[i] = true;
        if (!strcmp(n, "sm_scale")) args[i] = (InterpArg){.f = p->scale}, set[i] = true;
        ck_assert_msg(set[i], "%s: parameter %s left unbound", f->name, n);
    }
    size_t es = attn_dtype_size(c->dtype);
    InterpBuffer bufs[] = {
        {r->q, r->nq * es, "Q"},       {r->k, r->nkv * es, "K"},     {r->v, r->nkv * es, "V"},
        {r->o, r->nq * es, "O"},       {r->dout, r->nq * es, "DO"},  {r->dq, r->nq * es, "DQ"},
        {r->dk, r->nkv * es, "DK"},    {r->dv, r->nkv * es, "DV"},   {a->lse, nlse * sizeof(float), "LSE"},
        {a->delta, nscratch * sizeof(float), "scratch"},
        {(void *)r->cu_q, sizeof r->cu_q, "cu_seqlens_q"}, {(void *)r->cu_k, sizeof r->cu_k, "cu_seqlens_k"}};
    /* the forward has no scratch */
    InterpOptions io = {.grid = {g0, g1, 1}, .buffers = bufs, .nbuffers = (int)(sizeof bufs / sizeof bufs[0])};
    if (!a->delta || !nscratch) bufs[9] = bufs[--io.nbuffers];
    StrBuf err;
    sb_init(&err);
    int rc = interp_run(f, args, f->nparams, &io, &err);
    ck_assert_msg(rc == 0, "%s: %s: interpreter failed: %s", c->what, f->name, err.data ? err.data : "");
    sb_free(&err);
}

/* A library program, with the case's hooks in front when it has them (kept in `arena`). */
static const char *vsource(Arena *arena, const VCase *c, const char *path)
{
    const char *prog = ah_text(path);
    if (!c->window) return prog;
    char *src = arena_alloc(arena, sizeof k_window_hooks + strlen(prog) + 1);
    sprintf(src, "%s%s", k_window_hooks, prog);
    return src;
}

/* The forward (varlen kernel when a->cu_q, else the fixed-length one), as kiln_attention_fwd
 * picks it: PLAIN_SCORES, the case's tiles (and hooks). */
static void vrun_fwd(Arena *arena, const VRun *r, const VCase *c, const VArgs *a, size_t nlse)
{
    char d[16], bm[16], bn[16];
    snprintf(d, sizeof d, "%d", c->d);
    snprintf(bm, sizeof bm, "%d", c->block_m);
    snprintf(bn, sizeof bn, "%d", c->block_n);
    KilnDefine defs[] = {{"HEAD_DIM", d}, {"BLOCK_M", bm}, {"BLOCK_N", bn}, {"CAUSAL", c->causal ? "true" : "false"},
                         {"PLAIN_SCORES", "true"}, {"mask_mod", "win_mask"}, {"kv_start", "win_start"}};
    char kernel[32];
    snprintf(kernel, sizeof kernel, "attn_fwd%s_%s", a->cu_q ? "_varlen" : "", c->dtype == ATTN_BF16 ? "bf16" : "f16");
    IrFunc *f = ah_compile(arena, c->what, FWD_PROGRAM, vsource(arena, c, FWD_PROGRAM), kernel, defs,
                           c->window ? 7 : 5);
    vlaunch(f, r, c, a, nlse, 0, (a->seqlen_q + c->block_m - 1) / c->block_m, a->batch * c->hq);
}

/* The backward as kiln_attention_bwd runs it (rt_attn_bwd_plan), varlen when a->cu_q. */
static void vrun_bwd(Arena *arena, const VRun *r, const VCase *c, const VArgs *a, size_t nlse, size_t nscratch)
{
    KilnAttentionBwdParams bp = {
        .fwd = {.dtype = c->dtype == ATTN_BF16 ? KILN_BF16 : KILN_F16, .batch = a->batch, .heads_q = c->hq,
                .heads_kv = c->hkv, .seqlen_q = a->seqlen_q, .seqlen_k = a->seqlen_k, .head_dim = c->d,
                .causal = c->causal, .cu_seqlens_q = a->cu_q ? 0x100 : 0, .cu_seqlens_k = a->cu_q ? 0x100 : 0,
                .total_q = a->cu_q ? r->total_q : 0, .total_k = a->cu_q ? r->total_k : 0},
        .deterministic = c->deterministic, .block_m = c->block_m, .block_n = c->block_n};
    RtAttnBwdPlan plan;
    rt_attn_bwd_plan(80, &bp, &plan);
    for (int i = 0; i < plan.n; i++) {
        RtAttnVariant *v = &plan.k[i];
        if (a->cu_q) ck_assert_msg(strstr(v->kernel, "_varlen_") != NULL, "%s", v->kernel);
        /* the hooks go to the kernels that take them: mask_mod to dK/dV and dQ, kv_start to dQ */
        bool dkdv = strstr(v->kernel, "dkdv") != NULL, dq = strstr(v->kernel, "_dq_") && !strstr(v->kernel, "cvt");
        if (c->window && (dkdv || dq)) v->defines[v->ndefines++] = (KilnDefine){"mask_mod", "win_mask"};
        if (c->window && dq) v->defines[v->ndefines++] = (KilnDefine){"kv_start", "win_start"};
        IrFunc *f = ah_compile(arena, c->what, BWD_PROGRAM, vsource(arena, c, BWD_PROGRAM), v->kernel, v->defines,
                               v->ndefines);
        vlaunch(f, r, c, a, nlse, nscratch, plan.grid[i][0], plan.grid[i][1]);
    }
}

/* The whole packed problem's arguments. */
static VArgs vargs_packed(VRun *r, const VCase *c)
{
    r->nscratch = (size_t)c->hq * r->total_q * (c->d + 1) + 64;
    if (!r->scratch) r->scratch = poisoned(r->nscratch * sizeof(float));
    /* the runtime's scratch layout: delta, then the accumulator on a 256-byte boundary */
    size_t delta = ((size_t)c->hq * r->total_q * 4 + 255) / 256 * 256 / 4;
    return (VArgs){.q = r->q, .k = r->k, .v = r->v, .o = r->o, .dout = r->dout, .dq = r->dq, .dk = r->dk,
                   .dv = r->dv, .lse = r->lse, .delta = r->scratch, .dq_acc = r->scratch + delta,
                   .cu_q = r->cu_q, .cu_k = r->cu_k, .batch = c->nseq, .seqlen_q = r->p.seqlen_q,
                   .seqlen_k = r->p.seqlen_k, .total_q = r->total_q};
}

START_TEST(fwd_matches_reference)
{
    const VCase *c = &vcases[_i];
    Arena arena;
    arena_init(&arena);
    VRun r;
    vsetup(&r, c, (uint64_t)_i * 131 + 7);
    VArgs a = vargs_packed(&r, c);
    vrun_fwd(&arena, &r, c, &a, (size_t)c->hq * r.total_q + 1);
    AttnDecodeErr v = attn_varlen_judge(&r.p, r.cu_q, r.cu_k, r.q, r.k, r.v, r.o, r.lse);
    double bound = 2 * v.plain_err + 1e-5;
    if (getenv("ATTN_VERBOSE"))
        fprintf(stderr, "%-36s fwd err %.3g plain %.3g lse %.3g\n", c->what, v.e.o_max_abs, v.plain_err,
                v.e.lse_max_rel);
    ck_assert_msg(v.e.nonfinite == 0, "%s: %lld non-finite outputs", c->what, (long long)v.e.nonfinite);
    ck_assert_msg(v.e.o_max_abs <= bound, "%s: max |O - ref| = %.3g > %.3g at sequence %d h%d i%d", c->what,
                  v.e.o_max_abs, bound, v.e.worst_b, v.e.worst_h, v.e.worst_i);
    ck_assert_msg(v.e.lse_max_rel <= 1e-4, "%s: LSE relative error %.3g", c->what, v.e.lse_max_rel);
    ck_assert_msg(v.empty_bad == 0, "%s: %lld elements of rows that see no key", c->what, (long long)v.empty_bad);
    vteardown(&r);
    arena_free(&arena);
}
END_TEST

/* O and LSE from the float64 forward per sequence, stored as the forward kernel would
 * (the backward is judged on its own, as in attn_bwd_harness.h). */
static void vset_forward(VRun *r, const VCase *c)
{
    size_t es = attn_dtype_size(c->dtype);
    size_t n = (size_t)c->hq * (r->total_q + 1) * c->d;
    double *o = malloc(sizeof(double) * n + 8), *lse = malloc(sizeof(double) * n / c->d + 8);
    for (int b = 0; b < c->nseq; b++) {
        AttnVarlenSeq s = attn_varlen_seq(&r->p, r->cu_q, r->cu_k, b);
        attn_ref_fwd(&s.p, (char *)r->q + s.q_off * es, (char *)r->k + s.k_off * es, (char *)r->v + s.v_off * es,
                     o, lse);
        for (int h = 0; h < c->hq; h++)
            for (int i = 0; i < s.p.seqlen_q; i++) {
                size_t row = (size_t)h * s.p.seqlen_q + i;
                for (int d = 0; d < c->d; d++)
                    attn_put(c->dtype, r->o, s.o_off + (size_t)(h * r->p.o_stride[1] + i * r->p.o_stride[2] + d),
                             o[row * c->d + d]);
                r->lse[(size_t)h * r->total_q + r->cu_q[b] + i] = (float)lse[row];
            }
    }
    free(o);
    free(lse);
}

/* dQ, dK, dV against the float64 backward per sequence (FlashAttention's rule over all). */
static void vjudge_bwd(const VRun *r, const VCase *c)
{
    AttnVarlenBwdErr v = attn_varlen_bwd_judge(&r->p, r->cu_q, r->cu_k, r->q, r->k, r->v, r->dout, r->dq, r->dk,
                                               r->dv);
    static const char *nm[3] = {"dQ", "dK", "dV"};
    if (getenv("ATTN_VERBOSE"))
        fprintf(stderr, "%-36s bwd dQ %.3g (%.3g) dK %.3g (%.3g) dV %.3g (%.3g)\n", c->what, v.err[0], v.plain[0],
                v.err[1], v.plain[1], v.err[2], v.plain[2]);
    ck_assert_msg(v.nonfinite == 0, "%s: %lld non-finite gradient elements", c->what, (long long)v.nonfinite);
    for (int t = 0; t < 3; t++)
        ck_assert_msg(v.err[t] <= 2 * v.plain[t] + 1e-5, "%s: max |%s - ref| = %.3g > bound %.3g", c->what, nm[t],
                      v.err[t], 2 * v.plain[t] + 1e-5);
    ck_assert_msg(v.empty_bad == 0, "%s: %lld dQ elements of rows that see no key are not 0", c->what,
                  (long long)v.empty_bad);
}

START_TEST(bwd_matches_reference)
{
    const VCase *c = &vcases[_i];
    Arena arena;
    arena_init(&arena);
    VRun r;
    vsetup(&r, c, (uint64_t)_i * 131 + 7);
    vset_forward(&r, c);
    VArgs a = vargs_packed(&r, c);
    vrun_bwd(&arena, &r, c, &a, (size_t)c->hq * r.total_q + 1, r.nscratch);
    vjudge_bwd(&r, c);
    vteardown(&r);
    arena_free(&arena);
}
END_TEST

/* The packed run against each sequence run alone through the fixed-length kernels. */
START_TEST(matches_one_by_one)
{
    const VCase *c = &vcases[_i];
    Arena arena;
    arena_init(&arena);
    VRun packed, alone;
    vsetup(&packed, c, (uint64_t)_i * 131 + 7);
    vsetup(&alone, c, (uint64_t)_i * 131 + 7);
    VArgs a = vargs_packed(&packed, c);
    vrun_fwd(&arena, &packed, c, &a, (size_t)c->hq * packed.total_q + 1);
    vrun_bwd(&arena, &packed, c, &a, (size_t)c->hq * packed.total_q + 1, packed.nscratch);
    size_t es = attn_dtype_size(c->dtype);
    int maxq = packed.p.seqlen_q;
    size_t nlse = (size_t)c->hq * maxq + 1, nscr = (size_t)c->hq * maxq * (c->d + 1) + 64;
    float *lse = poisoned(nlse * sizeof(float)), *scr = poisoned(nscr * sizeof(float));
    for (int b = 0; b < c->nseq; b++) {
        AttnVarlenSeq s = attn_varlen_seq(&alone.p, alone.cu_q, alone.cu_k, b);
        int sq = s.p.seqlen_q, sk = s.p.seqlen_k;
        size_t delta = ((size_t)c->hq * sq * 4 + 255) / 256 * 256 / 4;
        VArgs one = {.q = (char *)alone.q + s.q_off * es, .k = (char *)alone.k + s.k_off * es,
                     .v = (char *)alone.v + s.v_off * es, .o = (char *)alone.o + s.o_off * es,
                     .dout = (char *)alone.dout + s.o_off * es, .dq = (char *)alone.dq + s.q_off * es,
                     .dk = (char *)alone.dk + s.k_off * es, .dv = (char *)alone.dv + s.v_off * es,
                     .lse = lse, .delta = scr, .dq_acc = scr + delta, .batch = 1, .seqlen_q = sq, .seqlen_k = sk};
        if (sq > 0) {
            /* the forward alone: its LSE [heads, sq] must be the packed run's rows */
            vrun_fwd(&arena, &alone, c, &one, nlse);
            for (int h = 0; h < c->hq; h++)
                for (int i = 0; i < sq; i++) {
                    float x = lse[(size_t)h * sq + i], y = packed.lse[(size_t)h * packed.total_q + packed.cu_q[b] + i];
                    ck_assert_msg(!memcmp(&x, &y, sizeof x), "%s: sequence %d LSE h%d i%d: alone %g, packed %g",
                                  c->what, b, h, i, x, y);
                }
        }
        if (sq > 0 || sk > 0) vrun_bwd(&arena, &alone, c, &one, nlse, nscr);
    }
    static const char *nm[] = {"O", "dQ", "dK", "dV"};
    void *x[] = {alone.o, alone.dq, alone.dk, alone.dv}, *y[] = {packed.o, packed.dq, packed.dk, packed.dv};
    size_t n[] = {alone.nq, alone.nq, alone.nkv, alone.nkv};
    for (int t = 0; t < 4; t++)
        ck_assert_msg(!memcmp(x[t], y[t], n[t] * es), "%s: %s of the packed run differs from the sequences alone",
                      c->what, nm[t]);
    free(lse);
    free(scr);
    vteardown(&packed);
    vteardown(&alone);
    arena_free(&arena);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("attention_varlen_interp");
    TCase *tc = tcase_create("varlen");
    tcase_set_timeout(tc, 900);
    int n = (int)(sizeof vcases / sizeof vcases[0]);
    tcase_add_loop_test(tc, fwd_matches_reference, 0, n);
    tcase_add_loop_test(tc, bwd_matches_reference, 0, n);
    tcase_add_loop_test(tc, matches_one_by_one, 0, n);
    suite_add_tcase(s, tc);
    return s;
}

TU_MAIN(suite)
