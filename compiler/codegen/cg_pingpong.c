/* cg_pingpong.c — lowering of warpgroup ping-pong (the decision is made by
 * pass_pingpong.c, which also states the protocol and why it cannot
 * deadlock): named barriers 1..G, barrier 1+g being warpgroup g's turn.
 *
 *   entry:   warpgroup G-1 arrives on barrier 1 (warpgroup 0 has the first turn)
 *   dot:     bar.sync 1+g, 256 before wgmma.fence (cg_pingpong_acquire); the
 *            arrival on the next warpgroup's barrier (the PTX it returns) goes
 *            between the commit and the wait (cg_dot_wgmma.c), so the next
 *            warpgroup issues while this one waits for its results and goes on
 *            to its softmax
 *   return:  warpgroup 0 syncs on barrier 1 once more (the entry's arrival
 *            plus the last turn's leave every barrier balanced)
 * A marked dot that does not lower to wgmma (cg_dot_wgmma.c declines it) still
 * takes its turn, an empty one before its mma.sync code (cg_pingpong_skip),
 * so every warpgroup passes every barrier the same number of times.
 *
 * Invariants: nothing is emitted for a kernel without the `pingpong`
 * attribute (the PTX of every other kernel is unchanged); the warpgroup
 * conditions are warp-uniform (warp / 4), as bar.sync/bar.arrive need.
 */
#include "cg_internal.h"
#include "../gpuir/gpuir.h"

#include <stdio.h>

#define PP_THREADS 256   /* the warpgroup waiting for its turn and the one handing it over */

static int groups(const CgCtx *c) { return (int)ir_attr_int(&c->f->attrs, IR_ATTR_PINGPONG, 0); }

static LLVMValueRef warpgroup(CgCtx *c) { return LLVMBuildLShr(c->b, c->warp, cg_i32(c, 2), "wg"); }

/* PTX for warpgroup g (operand $op) to `bar.sync` (sync) or `bar.arrive` on
 * barrier 1 + (g + shift) % G, for every g in `only` (-1: all of them). The ids
 * stay immediates (a register id makes ptxas reserve all 16 barriers); each
 * predicate is warp-uniform. */
static char *turn_ptx(CgCtx *c, bool sync, int G, int shift, int only, int op)
{
    StrBuf t;
    sb_init(&t);
    sb_puts(&t, "{\n\t.reg .pred p;\n\t");
    for (int g = 0; g < G; g++) {
        if (only >= 0 && g != only) continue;
        sb_printf(&t, "setp.eq.u32 p, $%d, %d;\n\t@p bar.%s %d, %d;\n\t", op, g, sync ? "sync" : "arrive",
                  1 + (g + shift) % G, PP_THREADS);
    }
    sb_puts(&t, "}");
    char *r = arena_strdup(c->arena, t.data);
    sb_free(&t);
    return r;
}

static void emit_turn(CgCtx *c, const char *text)
{
    LLVMValueRef wg = warpgroup(c);
    cg_asm(c, c->t_void, text, "r,~{memory}", 1, &wg, true);
}

void cg_pingpong_entry(CgCtx *c)
{
    int G = groups(c);
    if (G) emit_turn(c, turn_ptx(c, false, G, 1, G - 1, 0));   /* warpgroup G-1 on barrier 1 */
}

void cg_pingpong_return(CgCtx *c)
{
    int G = groups(c);
    if (G) emit_turn(c, turn_ptx(c, true, G, 0, 0, 0));      /* warpgroup 0 on barrier 1 */
}

const char *cg_pingpong_acquire(CgCtx *c, const IrOp *dot, int op, LLVMValueRef *wg)
{
    int G = groups(c);
    if (!G || !ir_attr_int(&dot->attrs, IR_ATTR_PINGPONG, 0)) return NULL;
    emit_turn(c, turn_ptx(c, true, G, 0, -1, 0));   /* this warpgroup's barrier: 1 + g */
    *wg = warpgroup(c);
    return turn_ptx(c, false, G, 1, -1, op);        /* the next one's: 1 + (g + 1) % G */
}

void cg_pingpong_skip(CgCtx *c, const IrOp *dot)
{
    LLVMValueRef wg;
    const char *release = cg_pingpong_acquire(c, dot, 0, &wg);
    if (release) cg_asm(c, c->t_void, release, "r,~{memory}", 1, &wg, true);
}
