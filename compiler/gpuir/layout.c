/* layout.c — what layouts mean: the thread -> element geometry of the
 * layout descriptors (IrLayout, compiler/ir/layout.c holds and prints them),
 * and the constructors the layout passes use.
 *
 * A blocked layout maps (thread, register) to an element index, per base
 * dimension d (see cg_internal.h; all sizes are powers of two):
 *     lane coordinate ld = (lane / lane_stride[d]) % tpw[d]
 *     warp coordinate wd = (warp / warp_stride[d]) % wpc[d]
 *     thread base     b  = wd * spt * tpw * rpw + ld * spt
 *     register part   c  = (rd / (eff_spt * rpw)) * cta
 *                          + ((rd / eff_spt) % rpw) * spt * tpw + rd % eff_spt
 *     index           i  = (c + b) mod shape
 * where rd is the register's index along d (registers are numbered with
 * order[0] fastest) and eff_spt = min(spt, shape). When shape >= cta every
 * element is held once; when shape < cta the mod wraps and several threads
 * hold copies (replication); exactly one copy has c + b < shape, the "owner",
 * which is the one that stores and does atomics.
 *
 * The MMA generalisation (docs/tensor_cores.md): rpw[d] "register repeats per
 * warp tile" sit between lanes and warps, so the index along d is
 *     ((((outer * wpc + warp) * rpw + inner) * tpw + lane) * spt + s)
 * (blocked layouts have rpw = 1: the formula above with rpw = 1 is cg's
 * original one), and explicit warp strides wst[d] let a layout use fewer warps
 * than the CTA has: warps whose coordinates repeat hold copies, and only the
 * warp w == sum(wd * wst[d]) owns. mma.sync m16n8k16 in these terms (see
 * layout_mma.c for the ISA table they are checked against):
 *     C [M,N]: spt=[1,2] tpw=[8,4] rpw=[2,1] wpc=[wm,wn] order=[1,0] wst=[1,wm]
 *     A [M,K]: spt=[1,2] tpw=[8,4] rpw=[2,2] wpc=[wm,1]  order=[1,0] wst=[1,1]
 *     B [K,N]: spt=[2,1] tpw=[4,8] rpw=[2,1] wpc=[1,wn]  order=[0,1] wst=[1,wm]
 *
 * Example: tensor<128x64xf32> with #blocked<spt=[1,4], tpw=[2,16], wpc=[4,1],
 * order=[1,0]>: cta = [8, 64], so the pattern repeats 16 times down the rows;
 * thread 17 (lane 17, warp 0) has ld = (1, 1) -> b = (1, 4); its 64 registers
 * hold rows 1, 9, ..., 121 times columns 4..7 (columns fastest).
 *
 * The same arithmetic is emitted as LLVM IR by cg_context.c; the unit tests
 * check it here on the CPU for every layout the examples use.
 */
#include "gpuir.h"

#include <stdlib.h>
#include <stdio.h>
#include <string.h>

int gp_elem_bytes(IrElem e)
{
    int bits = ir_elem_bits(e);
    return bits < 8 ? 1 : bits / 8;
}

void gp_default_order(int rank, int *order)
{
    for (int j = 0; j < rank; j++) order[j] = rank - 1 - j;
}

static int imin(int a, int b) { return a < b ? a : b; }
static int imax(int a, int b) { return a > b ? a : b; }

int gp_layout_blocked(IrFunc *f, int rank, const int32_t *shape, const int *spt, const int *order,
                      int num_warps)
{
    IrLayout l;
    memset(&l, 0, sizeof l);
    l.kind = IR_LAYOUT_BLOCKED;
    l.rank = rank;
    for (int d = 0; d < rank; d++) {
        l.spt[d] = imax(1, imin(spt[d], shape[d]));
        l.order[d] = order[d];
    }
    /* Lanes go to the fastest dimension first, then warps; what is left over
     * (tiny tiles) replicates along the fastest dimension. */
    int lanes = 32, warps = num_warps;
    for (int j = 0; j < rank; j++) {
        int d = order[j];
        int t = imin(lanes, imax(1, shape[d] / l.spt[d]));
        l.tpw[d] = t;
        lanes /= t;
    }
    l.tpw[order[0]] *= lanes;
    for (int j = 0; j < rank; j++) {
        int d = order[j];
        int w = imin(warps, imax(1, shape[d] / (l.spt[d] * l.tpw[d])));
        l.wpc[d] = w;
        warps /= w;
    }
    l.wpc[order[0]] *= warps;
    return ir_layout_intern(f, &l);
}

int gp_layout_default(IrFunc *f, int rank, const int32_t *shape, int num_warps)
{
    int spt[GP_MAX_RANK], order[GP_MAX_RANK];
    for (int d = 0; d < rank; d++) spt[d] = 1;
    gp_default_order(rank, order);
    return gp_layout_blocked(f, rank, shape, spt, order, num_warps);
}

int gp_layout_slice(IrFunc *f, int parent, int dim)
{
    IrLayout l;
    memset(&l, 0, sizeof l);
    l.kind = IR_LAYOUT_SLICE;
    l.rank = ir_layout_get(f, parent)->rank - 1;
    l.parent = parent;
    l.dim = dim;
    return ir_layout_intern(f, &l);
}

int gp_layout_insert_dim(IrFunc *f, int blocked, int axis)
{
    const IrLayout *p = ir_layout_get(f, blocked);
    IrLayout l;
    memset(&l, 0, sizeof l);
    l.kind = IR_LAYOUT_BLOCKED;
    l.rank = p->rank + 1;
    bool explicit_warps = false;
    for (int d = 0; d < p->rank; d++) explicit_warps |= p->wst[d] > 0;
    for (int d = 0, s = 0; d < l.rank; d++) {
        if (d == axis) {
            l.spt[d] = l.tpw[d] = l.wpc[d] = l.rpw[d] = 1;
            l.wst[d] = explicit_warps ? 1 : 0;
            continue;
        }
        l.spt[d] = p->spt[s];
        l.tpw[d] = p->tpw[s];
        l.wpc[d] = p->wpc[s];
        l.rpw[d] = p->rpw[s];
        l.wst[d] = p->wst[s];
        s++;
    }
    /* The new dim is the slowest: it has one lane, one warp and one register,
     * so the distribution of the other dims is unchanged. */
    for (int j = 0; j < p->rank; j++) l.order[j] = p->order[j] >= axis ? p->order[j] + 1 : p->order[j];
    l.order[p->rank] = axis;
    return ir_layout_intern(f, &l);
}

int gp_layout_permute(IrFunc *f, int blocked, const int *perm)
{
    const IrLayout *p = ir_layout_get(f, blocked);
    IrLayout l;
    memset(&l, 0, sizeof l);
    l.kind = IR_LAYOUT_BLOCKED;
    l.rank = p->rank;
    int inv[GP_MAX_RANK];
    for (int i = 0; i < p->rank; i++) {
        l.spt[i] = p->spt[perm[i]];
        l.tpw[i] = p->tpw[perm[i]];
        l.wpc[i] = p->wpc[perm[i]];
        l.rpw[i] = p->rpw[perm[i]];
        l.wst[i] = p->wst[perm[i]];
        inv[perm[i]] = i;
    }
    /* Same dims in the same speed order: registers keep their numbering. */
    for (int j = 0; j < p->rank; j++) l.order[j] = inv[p->order[j]];
    return ir_layout_intern(f, &l);
}

/* ---- geometry ---- */
static void geom_blocked(const IrLayout *l, const int32_t *shape, int num_warps, GpGeom *g)
{
    memset(g, 0, sizeof *g);
    g->rank = l->rank;
    g->num_warps = num_warps;
    bool explicit_warps = false;
    for (int d = 0; d < l->rank; d++) {
        g->shape[d] = shape[d];
        g->spt[d] = l->spt[d];
        g->tpw[d] = l->tpw[d];
        g->wpc[d] = l->wpc[d];
        g->rpw[d] = imax(1, l->rpw[d]);
        g->order[d] = l->order[d];
        g->eff_spt[d] = imin(l->spt[d], shape[d]);
        g->cta[d] = l->spt[d] * l->tpw[d] * g->rpw[d] * l->wpc[d];
        int reps = shape[d] >= g->cta[d] ? shape[d] / g->cta[d] : 1;
        g->nregs_dim[d] = g->eff_spt[d] * g->rpw[d] * reps;
        explicit_warps |= l->wst[d] > 0;
    }
    int rs = 1, ls = 1, ws = 1, covered = 1;
    for (int j = 0; j < l->rank; j++) {
        int d = l->order[j];
        g->reg_stride[d] = rs;
        g->lane_stride[d] = ls;
        g->warp_stride[d] = explicit_warps ? imax(1, l->wst[d]) : ws;
        rs *= g->nregs_dim[d];
        ls *= g->tpw[d];
        ws *= g->wpc[d];
        covered *= g->wpc[d];
    }
    g->warp_copies = explicit_warps && covered < num_warps;
    g->nregs = rs;
    g->vrank = l->rank;
    for (int d = 0; d < l->rank; d++) g->vdims[d] = d;
}

bool gp_geom(const IrFunc *f, int layout, IrType t, GpGeom *g)
{
    const IrLayout *l = ir_layout_get(f, layout);
    if (!l || l->rank != t.rank) return false;
    if (l->kind == IR_LAYOUT_BLOCKED) {
        geom_blocked(l, t.shape, f->sched.num_warps, g);
        return true;
    }
    IrType pt = t;
    pt.rank = (uint8_t)(t.rank + 1);
    for (int d = 0, s = 0; d < pt.rank; d++) pt.shape[d] = d == l->dim ? 1 : t.shape[s++];
    GpGeom pg;
    if (!gp_geom(f, l->parent, pt, &pg)) return false;
    *g = pg;
    g->vrank = t.rank;
    for (int i = 0; i < t.rank; i++) g->vdims[i] = pg.vdims[i < l->dim ? i : i + 1];
    return true;
}

void gp_geom_reg_dims(const GpGeom *g, int reg, int *rd)
{
    for (int d = 0; d < g->rank; d++) rd[d] = (reg / g->reg_stride[d]) % g->nregs_dim[d];
}

int gp_geom_reg_of(const GpGeom *g, const int *rd)
{
    int r = 0;
    for (int d = 0; d < g->rank; d++) r += rd[d] * g->reg_stride[d];
    return r;
}

int gp_geom_const_part(const GpGeom *g, int d, int rd)
{
    int es = g->eff_spt[d], r = g->rpw[d];
    return (rd / (es * r)) * g->cta[d] + ((rd / es) % r) * g->spt[d] * g->tpw[d] + rd % es;
}

void gp_geom_reg_delta(const GpGeom *g, int from, int to, int *delta)
{
    int rf[GP_MAX_RANK], rt[GP_MAX_RANK];
    gp_geom_reg_dims(g, from, rf);
    gp_geom_reg_dims(g, to, rt);
    for (int i = 0; i < g->vrank; i++) {
        int d = g->vdims[i];
        delta[i] = gp_geom_const_part(g, d, rt[d]) - gp_geom_const_part(g, d, rf[d]);
    }
}

/* Two registers of one thread hold the same element in every thread when
 * their register parts agree modulo the shape in every base dim (the thread
 * part is added to both, and shapes are powers of two). Per dim the smallest
 * such register index is found independently; together they are the first. */
int gp_geom_first_copy(const GpGeom *g, int reg)
{
    int rd[GP_MAX_RANK];
    gp_geom_reg_dims(g, reg, rd);
    for (int d = 0; d < g->rank; d++) {
        int want = gp_geom_const_part(g, d, rd[d]) & (g->shape[d] - 1);
        for (int r = 0; r < rd[d]; r++)
            if ((gp_geom_const_part(g, d, r) & (g->shape[d] - 1)) == want) {
                rd[d] = r;
                break;
            }
    }
    return gp_geom_reg_of(g, rd);
}

int gp_geom_warp_owner(const GpGeom *g, int warp)
{
    int w = 0;
    for (int d = 0; d < g->rank; d++) w += ((warp / g->warp_stride[d]) % g->wpc[d]) * g->warp_stride[d];
    return w;
}

void gp_geom_thread_base(const GpGeom *g, int tid, int *base)
{
    int lane = tid % 32, warp = tid / 32;
    for (int d = 0; d < g->rank; d++) {
        int ld = (lane / g->lane_stride[d]) % g->tpw[d];
        int wd = (warp / g->warp_stride[d]) % g->wpc[d];
        base[d] = wd * g->spt[d] * g->tpw[d] * g->rpw[d] + ld * g->spt[d];
    }
}

void gp_geom_index(const GpGeom *g, int tid, int reg, int *idx)
{
    int rd[GP_MAX_RANK], base[GP_MAX_RANK];
    gp_geom_reg_dims(g, reg, rd);
    gp_geom_thread_base(g, tid, base);
    for (int d = 0; d < g->rank; d++)
        idx[d] = (gp_geom_const_part(g, d, rd[d]) + base[d]) & (g->shape[d] - 1);
}

bool gp_geom_owner(const GpGeom *g, int tid, int reg)
{
    int rd[GP_MAX_RANK], base[GP_MAX_RANK];
    gp_geom_reg_dims(g, reg, rd);
    gp_geom_thread_base(g, tid, base);
    for (int d = 0; d < g->rank; d++)
        if (gp_geom_const_part(g, d, rd[d]) + base[d] >= g->shape[d]) return false;
    return !g->warp_copies || gp_geom_warp_owner(g, tid / 32) == tid / 32;
}

bool gp_geom_replicated(const GpGeom *g)
{
    if (g->warp_copies) return true;
    for (int d = 0; d < g->rank; d++)
        if (g->shape[d] < g->cta[d]) return true;
    return false;
}

/* Each value dim's register part of every register of g (n x rank, row-major): the part of
 * an element's index that does not depend on the thread (gp_geom_index's const part). */
static void reg_parts(const GpGeom *g, int rank, int *out)
{
    for (int r = 0; r < g->nregs; r++) {
        int rd[GP_MAX_RANK];
        gp_geom_reg_dims(g, r, rd);
        for (int i = 0; i < rank; i++) out[r * rank + i] = gp_geom_const_part(g, g->vdims[i], rd[g->vdims[i]]);
    }
}

/* Whether every thread's every register holds the same element under both layouts. An
 * element's index per base dim is (register part + thread part) & (shape - 1), so the
 * register parts are computed once per register and the thread parts once per thread
 * rather than both for each (thread, register) pair: this walk over every thread and
 * register was the GPU passes' largest cost on the attention kernels. Same answers. */
bool gp_layouts_equivalent(const IrFunc *f, int la, int lb, IrType t)
{
    if (la == lb) return true;
    GpGeom ga, gb;
    if (!gp_geom(f, la, t, &ga) || !gp_geom(f, lb, t, &gb)) return false;
    if (ga.nregs != gb.nregs) return false;
    int n = ga.nregs, rank = t.rank, nthreads = 32 * f->sched.num_warps;
    int *pa = malloc(sizeof(int) * (size_t)(2 * n * (rank ? rank : 1)));
    if (!pa) return false;   /* out of memory: "not known equivalent" is always safe (a conversion stays) */
    int *pb = pa + n * rank;
    reg_parts(&ga, rank, pa);
    reg_parts(&gb, rank, pb);
    int ma[GP_MAX_RANK], mb[GP_MAX_RANK];
    for (int i = 0; i < rank; i++) ma[i] = ga.shape[ga.vdims[i]] - 1, mb[i] = gb.shape[gb.vdims[i]] - 1;
    bool same = true;
    for (int tid = 0; tid < nthreads && same; tid++) {
        int basea[GP_MAX_RANK], baseb[GP_MAX_RANK], ta[GP_MAX_RANK], tb[GP_MAX_RANK];
        gp_geom_thread_base(&ga, tid, basea);
        gp_geom_thread_base(&gb, tid, baseb);
        for (int i = 0; i < rank; i++) ta[i] = basea[ga.vdims[i]], tb[i] = baseb[gb.vdims[i]];
        for (int r = 0; r < n && same; r++)
            for (int i = 0; i < rank; i++)
                if (((pa[r * rank + i] + ta[i]) & ma[i]) != ((pb[r * rank + i] + tb[i]) & mb[i])) {
                    same = false;
                    break;
                }
    }
    free(pa);
    return same;
}

typedef struct RegCheck {
    IrFunc *f;
    Diag *d;
    bool ok;
    bool *dot_operand;    /* by value id: an A or B operand of a dot */
} RegCheck;

static void mark_dot_operands(IrOp *op, void *vctx)
{
    RegCheck *rc = vctx;
    for (int i = 0; op->op == IR_DOT && i < 2 && i < op->nargs; i++)
        if (op->args[i]->id >= 0 && op->args[i]->id <= rc->f->next_id) rc->dot_operand[op->args[i]->id] = true;
}

static void check_op_regs(IrOp *op, void *vctx)
{
    RegCheck *rc = vctx;
    for (int i = 0; rc->ok && i < op->nres; i++) {
        const IrValue *v = op->res[i];
        GpGeom g;
        if (v->type.rank == 0 || v->layout < 0 || !gp_geom(rc->f, v->layout, v->type, &g)) continue;
        bool operand = v->id >= 0 && v->id <= rc->f->next_id && rc->dot_operand[v->id];
        if (g.nregs <= (operand ? GP_MAX_DOT_OPERAND_REGS : GP_MAX_THREAD_REGS)) continue;
        char ts[96];
        int k = snprintf(ts, sizeof ts, "%s[", ir_elem_name((IrElem)v->type.elem));
        for (int j = 0; j < v->type.rank; j++)
            k += snprintf(ts + k, sizeof ts - (size_t)k, "%s%d", j ? ", " : "", v->type.shape[j]);
        snprintf(ts + k, sizeof ts - (size_t)k, "]");
        diag_report(rc->d, DIAG_USER, op->loc,
                    "this %s tile needs %d registers per thread with num_warps = %d; a thread may hold at most %d "
                    "of one tile: use smaller blocks (BLOCK_* constants) or more warps",
                    ts, g.nregs, rc->f->sched.num_warps, operand ? GP_MAX_DOT_OPERAND_REGS : GP_MAX_THREAD_REGS);
        rc->ok = false;
    }
    int64_t work = rc->ok && op->op == IR_REDUCE ? gp_reduce_work(rc->f, op) : 0;
    if (work > GP_MAX_REDUCE_WORK) {
        diag_report(rc->d, DIAG_USER, op->loc,
                    "this reduce combines %lld partial results per thread across warps (num_warps = %d); at most "
                    "%d: use smaller blocks (BLOCK_* constants) or fewer warps", (long long)work,
                    rc->f->sched.num_warps, GP_MAX_REDUCE_WORK);
        rc->ok = false;
    }
}

bool gp_check_thread_regs(IrFunc *f, Diag *d)
{
    RegCheck rc = {f, d, true, ARENA_ARRAY(f->arena, bool, f->next_id + 1)};
    if (!rc.dot_operand) return false;
    for (int i = 0; i <= f->next_id; i++) rc.dot_operand[i] = false;
    ir_walk(f, mark_dot_operands, &rc);
    ir_walk(f, check_op_regs, &rc);
    return rc.ok;
}
