/* pass_accelerate_dot.c — put dots on tensor cores: choose the warps of each
 * eligible dot and give its result the MMA accumulator layout, before layout
 * assignment (which then treats that layout as the dot's anchor, converts the
 * operands to the matching A/B-operand layouts and propagates the accumulator
 * layout forward through elementwise ops, reductions and loop-carried values).
 *
 * Eligible (mma.sync.m16n8k16 with f32 accumulation, sm_80 and later):
 * a and b both f16 or both bf16, the accumulator/result f32, M >= 16, N >= 8,
 * K >= 16 (tile dims are powers of two, so M % 16 == N % 8 == K % 16 == 0).
 * Everything else (f32 or integer dots, tiny shapes, older GPUs) stays on
 * the FMA path of cg_dot_fma.c.
 *
 * An f8e4m3 dot on sm_90a (wgmma not disabled) whose tile FP8 wgmma takes
 * (f8_native_ok: whole warpgroups along M with every warp there, N <= 256,
 * K a multiple of 128, so that every K-major operand row is whole 128-byte
 * swizzle blocks) stays e4m3 and is marked wgmma.e4m3 = 1: it lowers to
 * wgmma.mma_async.m64nNk32.f32.e4m3.e4m3 (cg_dot_wgmma.c). FP8 wgmma has no
 * transpose bit, so both SRAM operands are stored K-major (V of P @ V
 * transposed on its way into SRAM), and K is permuted within each 16 so that
 * an accumulator's registers (P) are, byte for byte, the k32 A fragment
 * (cg_dot_mma.c, gp_f8_kpos). Every other f8e4m3 dot (sm_89, a tile
 * wgmma cannot take, or --no-fp8-wgmma) is widened: each operand gets a cast to f16, which is
 * exact (every e4m3 value is an f16 value), so the dot becomes an f16 one
 * with the same products and f32 accumulation and takes the f16 tensor-core
 * path below: FP8 storage with f16 arithmetic (the native m16n8k32 e4m3
 * mma.sync of sm_89 is not done). On sm_80 codegen refuses the dot at its
 * location (cvt ... e4m3x2 is sm_89's).
 *
 * Warps wm x wn. In a kernel with a *chained* dot — one whose result reaches
 * (through elementwise ops) a reduction along its rows or the A operand of
 * another dot, as in attention — every dot takes wm = min(num_warps, M / 16)
 * first: whole warps along M keep every row of the accumulator inside one
 * warp, so row reductions (softmax) need only in-thread work and two xor
 * shuffles (lanes 1 and 2), the accumulator of one dot is already the A
 * operand of the next (P @ V) with no data movement, and row statistics
 * broadcast onto the other accumulator without conversion; then
 * wn = min(num_warps / wm, N / 8). Otherwise (matmul) the split uses as many
 * warps as the tile has m16 x n8 blocks and, among those, loads the fewest
 * fragment rows per warp and k step (M / wm of A plus N / wn of B: 128 x 128
 * on 4 warps is 2 x 2, not 4 x 1). When wm * wn < num_warps (small tiles) the
 * remaining warps hold copies of the accumulator (only one copy stores).
 *
 * On sm_90a (GpPassCtx.wgmma) it also marks the kernel `wgmma = 1`: dots may
 * then lower to wgmma (cg_dot_wgmma.c decides per dot, from where its
 * operands sit), and sram-alloc aligns operand tiles and stages to 1024.
 * There a plain dot (matmul) whose tile wgmma can take gets wgmma's warp
 * grid instead of the mma.sync split: every warp along M (wm = num_warps, a
 * multiple of 4, M a multiple of 16 * wm: each warpgroup owns m64 blocks),
 * wn = 1, N <= 256 (gp_wgmma_grid_ok). 128 x 128 on 4 warps is then 4 x 1
 * (two m64n128 wgmmas per k16 step), 128 x 256 on 8 warps 8 x 1. A dot
 * whose M is half of what the warps cover along M (64 rows on 8 warps, chained
 * or plain: gp_wgmma_nsplit_ok; not where a dot's rows are reduced) gets two
 * warpgroup columns instead,
 * #mma<C, wm=4, wn=2, rn=N/16>: warps 0-3 compute the columns [0, N/2), warps
 * 4-7 [N/2, N), one m64n(N/2) wgmma each, A replicated to both (FlashAttention-3's
 * hdim 256 backward: dK, dV of 64 keys x 256 take 64 + 64 registers a thread).
 *
 * Example (attention, 4 warps, BLOCK_M = 128, BLOCK_N = 64, D = 64):
 *     %s = dot %q, %kt, %zero : tensor<128x64xf32>        before
 *     %s = dot %q, %kt, %zero : tensor<128x64xf32, #L0>   after
 *     #L0 = #mma<C, wm=4, wn=1>
 */
#include "gpuir.h"

#include <string.h>

bool gp_mma_choose_warps(int M, int N, int K, int W, bool rows_in_warp, int *wm, int *wn)
{
    if (M < 16 || N < 8 || K < 16 || M % 16 || N % 8 || K % 16) return false;
    int best_m = 1, best_n = 1, best_used = 0, best_cost = 0;
    for (int m = 1; m <= W && m <= M / 16; m *= 2) {
        int n = W / m < N / 8 ? W / m : N / 8;
        if (n < 1) n = 1;
        /* rows_in_warp: as many warps along M as there are (the last m
         * tried wins); else use as many warps as possible, then the split
         * that loads the fewest fragment rows per warp (M/m of A, N/n of B
         * per k step), ties to more warps along M. */
        int used = m * n, cost = M / m + N / n;
        if (rows_in_warp || used > best_used || (used == best_used && cost <= best_cost)) {
            best_m = m, best_n = n, best_used = used, best_cost = cost;
        }
    }
    *wm = best_m;
    *wn = best_n;
    return true;
}

bool gp_dot_mma_eligible(const IrOp *op, int sm)
{
    if (op->op != IR_DOT || sm < 80) return false;
    IrElem ea = (IrElem)op->args[0]->type.elem, eb = (IrElem)op->args[1]->type.elem;
    IrElem er = (IrElem)op->res[0]->type.elem;
    if (ea == IR_F8E4M3 && ir_attr_int(&op->attrs, IR_ATTR_WGMMA_E4M3, 0)) return eb == ea && er == IR_F32;
    return ea == eb && (ea == IR_F16 || ea == IR_BF16) && er == IR_F32;
}

bool gp_wgmma_e4m3_ok(int M, int N, int K, int W)
{
    return W % 4 == 0 && M % (16 * W) == 0 && N % 8 == 0 && N <= 256 && K % 128 == 0;
}

/* Whether the dot's result (through elementwise ops and casts) reaches a
 * reduction along its rows or the A operand of another dot: attention's
 * chain, which wants each row of the accumulator inside one warp. Values are
 * visited once (`seen`) and each through its own uses (Users, built in one
 * walk), so the search is linear in the function: walking the whole function
 * per value made it quadratic (a 500-line score_mod hook: 70% of the GPU
 * passes' time, issue 29). */
typedef struct Users {
    int *start;        /* by value id: its uses are use[start[id] .. start[id + 1]) */
    IrOp **op;
    int *arg;
    int *fill;         /* while building: uses placed so far per id */
    int n;
} Users;

static void count_use(IrOp *op, void *vctx)
{
    Users *u = vctx;
    for (int i = 0; i < op->nargs; i++)
        if (op->args[i] && op->args[i]->id < u->n) u->start[op->args[i]->id + 1]++;
}

static void place_use(IrOp *op, void *vctx)
{
    Users *u = vctx;
    for (int i = 0; i < op->nargs; i++) {
        if (!op->args[i] || op->args[i]->id >= u->n) continue;
        int id = op->args[i]->id, k = u->start[id] + u->fill[id]++;
        u->op[k] = op;
        u->arg[k] = i;
    }
}

static Users users_of(IrFunc *f)
{
    Users u = {.n = f->next_id};
    u.start = ARENA_ARRAY(f->arena, int, u.n + 1);
    u.fill = ARENA_ARRAY(f->arena, int, u.n + 1);
    memset(u.start, 0, sizeof(int) * (size_t)(u.n + 1));
    memset(u.fill, 0, sizeof(int) * (size_t)(u.n + 1));
    ir_walk(f, count_use, &u);
    for (int i = 0; i < u.n; i++) u.start[i + 1] += u.start[i];
    int total = u.start[u.n];
    u.op = ARENA_ARRAY(f->arena, IrOp *, total ? total : 1);
    u.arg = ARENA_ARRAY(f->arena, int, total ? total : 1);
    ir_walk(f, place_use, &u);
    return u;
}

/* `dots`: the A operand of another dot counts too (else only row reductions). */
static bool reaches_rowwise(const Users *u, bool *seen, const IrValue *v, bool dots)
{
    if (v->id >= u->n || seen[v->id]) return false;
    seen[v->id] = true;
    for (int k = u->start[v->id]; k < u->start[v->id + 1]; k++) {
        IrOp *op = u->op[k];
        int i = u->arg[k];
        if (op->op == IR_REDUCE && op->attr[0] == op->args[0]->type.rank - 1) return true;
        if (dots && op->op == IR_DOT && i == 0) return true;
        if (op->nres == 1 && (ir_op_info[op->op].flags & IRF_ELEMWISE) && reaches_rowwise(u, seen, op->res[0], dots))
            return true;
    }
    return false;
}

typedef struct Chain {
    IrFunc *f;
    Users users;
    bool chained, reduced;   /* reduced: some dot's result reaches a row reduction (softmax) */
} Chain;

static void find_chained(IrOp *op, void *vctx)
{
    Chain *ch = vctx;
    if (op->op != IR_DOT || ch->reduced) return;
    if (!ch->users.start) ch->users = users_of(ch->f);   /* once, at the first dot */
    bool *seen = ARENA_ARRAY(ch->f->arena, bool, ch->f->next_id);
    for (int dots = 0; dots < 2; dots++) {
        if (dots && ch->chained) continue;
        memset(seen, 0, sizeof(bool) * (size_t)ch->f->next_id);
        bool r = reaches_rowwise(&ch->users, seen, op->res[0], dots);
        ch->chained |= r;
        if (!dots) ch->reduced |= r;
    }
}

/* An f16 <-> bf16 cast: a pipelined load's copies would hold the other type
 * (the cast is applied after ldmatrix), which wgmma cannot read. */
static bool is_half_cast(const IrValue *v)
{
    const IrOp *d = v->def;
    if (!d || d->op != IR_CAST) return false;
    IrElem from = (IrElem)d->args[0]->type.elem;
    return from == IR_F16 || from == IR_BF16;
}

bool gp_wgmma_grid_ok(int M, int N, int K, int W)
{
    /* whole warpgroups along M, each owning m64 blocks; N and K multiples of
     * 64 so that A and B rows are 128-byte swizzle blocks whichever dim is
     * contiguous (gp_wgmma_tile_ok: K-major needs K % 64, MN-major M or N % 64) */
    return W % 4 == 0 && M % (16 * W) == 0 && N % 64 == 0 && N <= 256 && K % 64 == 0;
}

bool gp_wgmma_nsplit_ok(int M, int N, int K, int W, bool plain)
{
    /* M is half the warps' rows: whole warpgroups along M (wm = W / 2, a
     * multiple of 4) and two warpgroup columns of N / 2 each, one m64n(N/2)
     * wgmma (n <= 256, a multiple of 8). A plain dot's operands may be
     * stored either way round: K-major rows need K % 64, the MN-major B's
     * column halves whole 128-byte blocks (N / 2 % 64). */
    if (W % 8 || M != 8 * W || N % 16 || N / 2 > 256 || K % 16) return false;
    return !plain || (K % 64 == 0 && (N / 2) % 64 == 0);
}

typedef struct AdCtx {
    IrFunc *f;
    int sm, n;
    bool rows_in_warp, reduced, wgmma;
} AdCtx;

static void visit(IrOp *op, void *vctx)
{
    AdCtx *c = vctx;
    if (!gp_dot_mma_eligible(op, c->sm)) return;
    const IrType *ta = &op->args[0]->type, *tc = &op->res[0]->type;
    int wm, wn, W = c->f->sched.num_warps, M = tc->shape[0], N = tc->shape[1], K = ta->shape[1];
    if (!gp_mma_choose_warps(M, N, K, W, c->rows_in_warp, &wm, &wn)) return;
    bool casts = is_half_cast(op->args[0]) || is_half_cast(op->args[1]);
    /* sm_90a, a plain dot: wgmma's grid when the tile and operands fit it
     * (a chained dot has all warps along M already) */
    if (c->wgmma && !c->rows_in_warp && gp_wgmma_grid_ok(M, N, K, W) && !casts) {
        wm = W, wn = 1;
    } else if (c->wgmma && !c->reduced && gp_wgmma_nsplit_ok(M, N, K, W, !c->rows_in_warp) && !casts) {
        /* sm_90a, M = 64 rows on 8 warps (FlashAttention-3's d 256 backward):
         * warpgroup g computes the columns [g N / 2, (g + 1) N / 2), so each
         * thread holds half the accumulator (mma.sync's 4 x 2 interleaves
         * the warps' n8 tiles, which no wgmma can write). Not in a kernel
         * that reduces a dot's rows (the forward's softmax): its row
         * statistics would cross the warpgroups through SRAM every block
         * (ptxas: the forward at 64 x 64 on 8 warps, d 128, spilled 796
         * bytes so); the backward has none (LSE and delta come precomputed). */
        op->res[0]->layout = gp_layout_mma_rn(c->f, GP_MMA_C, W / 2, 2, N / 16);
        c->n++;
        return;
    }
    op->res[0]->layout = gp_layout_mma(c->f, GP_MMA_C, wm, wn);
    c->n++;
}

/* An f8e4m3 dot that FP8 wgmma takes as it is (see the head): the warp grid
 * visit() gives it is wgmma's (wm = num_warps, wn = 1) — a chained dot has
 * every warp along M when M / 16 >= num_warps, a plain one needs the plain
 * wgmma grid. */
static bool f8_native_ok(const IrOp *op, const GpPassCtx *ctx, bool chained)
{
    const IrType *ta = &op->args[0]->type, *tc = &op->res[0]->type;
    if (!ctx->wgmma || ctx->sched.no_fp8_wgmma || op->args[1]->type.elem != IR_F8E4M3 || tc->elem != IR_F32 ||
        tc->rank != 2)
        return false;
    int W = op->parent->func->sched.num_warps, M = tc->shape[0], N = tc->shape[1], K = ta->shape[1];
    return gp_wgmma_e4m3_ok(M, N, K, W) && (chained || gp_wgmma_grid_ok(M, N, K, W));
}

/* f8e4m3 dots: marked wgmma.e4m3 where FP8 wgmma takes them, else their
 * operands -> f16 casts (see the head), each right after the operand's
 * definition (before the dot for a block argument): a loop-invariant operand
 * (attention's Q) is then widened once, outside the key loop. */
typedef struct F8Ctx {
    const GpPassCtx *ctx;
    bool chained;
} F8Ctx;

static void widen_f8(IrOp *op, void *vctx)
{
    const F8Ctx *fc = vctx;
    const GpPassCtx *ctx = fc->ctx;
    if (op->op != IR_DOT || op->args[0]->type.elem != IR_F8E4M3 || ctx->target->sm < 89) return;
    if (f8_native_ok(op, ctx, fc->chained)) {
        ir_attr_set_int(op->parent->func->arena, &op->attrs, IR_ATTR_WGMMA_E4M3, 1);
        return;
    }
    IrValue *args[3] = {op->args[0], op->args[1], op->args[2]};
    for (int i = 0; i < 2; i++) {
        IrType t = ir_type_with_elem(args[i]->type, IR_F16);
        IrOp *c = ir_op_new(op->parent->func, IR_CAST, op->loc, 1, &args[i], 1, &t);
        if (args[i]->def) ir_insert_after(args[i]->def, c);
        else ir_insert_before(op, c);
        if (ctx->axis) gp_axis_alias(ctx->axis, c->res[0], args[i]);
        args[i] = c->res[0];
    }
    ir_op_set_args(op->parent->func, op, 3, args);
}

bool gp_pass_accelerate_dot(IrFunc *f, const GpPassCtx *ctx, Diag *d)
{
    (void)d;
    /* the chain first: the casts widen_f8 adds are elementwise (the chain
     * is the same through them) but have ids past the users' table */
    Chain ch = {.f = f};
    ir_walk(f, find_chained, &ch);
    F8Ctx fc = {ctx, ch.chained};
    ir_walk(f, widen_f8, &fc);
    AdCtx c = {f, ctx->target->sm, 0, ch.chained, ch.reduced, ctx->wgmma};
    ir_walk(f, visit, &c);
    /* sm_90a: the kernel may use wgmma; operand tiles are then placed for it. */
    if (ctx->wgmma) ir_attr_set_int(f->arena, &f->attrs, IR_ATTR_WGMMA, 1);
    return true;
}
