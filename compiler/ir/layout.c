/* layout.c — GPU IR layout descriptors: the table of a kernel
 * (IrFunc.layouts), interning, the mma.sync fragment layouts, and their text.
 *
 * What it does: holds the *description* of layouts (ir.h, IrLayout); what a
 * layout means (which thread holds which element) is the codegen layer's
 * geometry (compiler/gpuir/layout.c). Layouts are interned: one index per
 * distinct description, so two values have the same layout exactly when
 * their indices are equal.
 *
 * Invariants: rpw[d] >= 1 after interning (0 reads as 1), slices name an
 * earlier index as parent, the text printed here is what parser.c reads.
 *
 * Example: ir_layout_mma(f, IR_MMA_C, 2, 2) prints as `#mma<C, wm=2, wn=2>`
 * and stands for spt=[1,2] tpw=[8,4] rpw=[2,1] wpc=[2,2] order=[1,0] wst=[1,2];
 * ir_layout_mma_rn(f, IR_MMA_C, 4, 2, 16) prints `#mma<C, wm=4, wn=2, rn=16>`,
 * the same with rpw=[2,16] (warps 4-7 own columns 128..255 of a 64 x 256 tile).
 */
#include "ir.h"

#include <string.h>

const IrLayout *ir_layout_get(const IrFunc *f, int idx)
{
    if (!f || idx < 0 || idx >= f->layouts.len) return NULL;
    return (const IrLayout *)f->layouts.data[idx];
}

static bool same_layout(const IrLayout *o, const IrLayout *l)
{
    if (o->kind != l->kind || o->rank != l->rank) return false;
    if (l->kind == IR_LAYOUT_SLICE) return o->parent == l->parent && o->dim == l->dim;
    for (int d = 0; d < l->rank; d++)
        if (o->spt[d] != l->spt[d] || o->tpw[d] != l->tpw[d] || o->wpc[d] != l->wpc[d] ||
            o->order[d] != l->order[d] || o->rpw[d] != l->rpw[d] || o->wst[d] != l->wst[d])
            return false;
    return o->mma == l->mma && o->mma_wm == l->mma_wm && o->mma_wn == l->mma_wn && o->mma_rn == l->mma_rn;
}

int ir_layout_intern(IrFunc *f, const IrLayout *l)
{
    IrLayout norm = *l;
    for (int d = 0; d < l->rank; d++)
        if (norm.rpw[d] < 1) norm.rpw[d] = 1;
    for (int i = 0; i < f->layouts.len; i++)
        if (same_layout(f->layouts.data[i], &norm)) return i;
    IrLayout *n = ARENA_NEW(f->arena, IrLayout);
    *n = norm;
    vec_push(f->arena, &f->layouts, n);
    return f->layouts.len - 1;
}

bool ir_layout_mma_fill(int mma, int wm, int wn, int rn, IrLayout *out)
{
    if (rn < 0 || (rn && mma == IR_MMA_A)) return false; /* A is replicated over warp_n: no column split */
    IrLayout l;
    memset(&l, 0, sizeof l);
    l.kind = IR_LAYOUT_BLOCKED;
    l.rank = 2;
    l.mma = mma;
    l.mma_wm = wm;
    l.mma_wn = wn;
    l.mma_rn = rn;
    switch (mma) {
    case IR_MMA_C:
        l.spt[0] = 1, l.spt[1] = 2, l.tpw[0] = 8, l.tpw[1] = 4, l.rpw[0] = 2, l.rpw[1] = 1;
        l.wpc[0] = wm, l.wpc[1] = wn, l.order[0] = 1, l.order[1] = 0, l.wst[0] = 1, l.wst[1] = wm;
        break;
    case IR_MMA_A:
        l.spt[0] = 1, l.spt[1] = 2, l.tpw[0] = 8, l.tpw[1] = 4, l.rpw[0] = 2, l.rpw[1] = 2;
        l.wpc[0] = wm, l.wpc[1] = 1, l.order[0] = 1, l.order[1] = 0, l.wst[0] = 1, l.wst[1] = 1;
        break;
    case IR_MMA_B:
        l.spt[0] = 2, l.spt[1] = 1, l.tpw[0] = 4, l.tpw[1] = 8, l.rpw[0] = 2, l.rpw[1] = 1;
        l.wpc[0] = 1, l.wpc[1] = wn, l.order[0] = 0, l.order[1] = 1, l.wst[0] = 1, l.wst[1] = wm;
        break;
    default:
        return false;
    }
    if (rn) l.rpw[1] = rn; /* C and B: warp_n's rn n8 tiles side by side (the warp tile is 8 rn wide) */
    *out = l;
    return true;
}

int ir_layout_mma_rn(IrFunc *f, int mma, int wm, int wn, int rn)
{
    IrLayout l;
    return ir_layout_mma_fill(mma, wm, wn, rn, &l) ? ir_layout_intern(f, &l) : -1;
}

int ir_layout_mma(IrFunc *f, int mma, int wm, int wn) { return ir_layout_mma_rn(f, mma, wm, wn, 0); }

static void put_list(StrBuf *out, const char *name, const int *v, int n)
{
    sb_printf(out, "%s=[", name);
    for (int i = 0; i < n; i++) sb_printf(out, "%s%d", i ? "," : "", v[i]);
    sb_puts(out, "]");
}

void ir_layout_print(StrBuf *out, const IrFunc *f, int idx)
{
    const IrLayout *l = ir_layout_get(f, idx);
    if (!l) { sb_puts(out, "#none"); return; }
    if (l->kind == IR_LAYOUT_SLICE) {
        sb_printf(out, "#slice<dim=%d, parent=#L%d>", l->dim, l->parent);
        return;
    }
    if (l->mma >= IR_MMA_A && l->mma <= IR_MMA_C) {
        sb_printf(out, "#mma<%c, wm=%d, wn=%d", "ABC"[l->mma - 1], l->mma_wm, l->mma_wn);
        if (l->mma_rn) sb_printf(out, ", rn=%d", l->mma_rn);
        sb_puts(out, ">");
        return;
    }
    sb_puts(out, "#blocked<");
    put_list(out, "spt", l->spt, l->rank);
    sb_puts(out, ", ");
    put_list(out, "tpw", l->tpw, l->rank);
    bool rpw = false, wst = false;
    for (int d = 0; d < l->rank; d++) rpw |= l->rpw[d] > 1, wst |= l->wst[d] > 0;
    if (rpw) {
        sb_puts(out, ", ");
        put_list(out, "rpw", l->rpw, l->rank);
    }
    sb_puts(out, ", ");
    put_list(out, "wpc", l->wpc, l->rank);
    sb_puts(out, ", ");
    put_list(out, "order", l->order, l->rank);
    if (wst) {
        sb_puts(out, ", ");
        put_list(out, "wst", l->wst, l->rank);
    }
    sb_puts(out, ">");
}
