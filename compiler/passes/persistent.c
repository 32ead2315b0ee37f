/* persistent.c — persistent programs with a static tile scheduler (pass "persistent",
 * the schedule options --persistent and --longest-first: compiler/support/schedule.h).
 *
 * What it does: the kernel's whole body becomes the body of one tile loop, run by a
 * 1-D grid of as many programs as the device keeps resident (SMs x CTAs per SM; the
 * runtime picks it: runtime/launch.c): program p runs the logical tiles t = p,
 * p + P, p + 2P, ... (P = num_programs(0), FlashAttention-3's static scheduler). The
 * logical grid (g0, g1, g2) the program was written for becomes three i32 kernel
 * parameters appended after the program's own (the runtime passes the grid the caller
 * launched with); every program_id(a) the body reads becomes tile t's id on axis a and
 * every num_programs(a) the parameter g_a. Tile order:
 *   static (mode 1):        axis 0 fastest: id0 = t % g0, id1 = t / g0 % g1, id2 = t / (g0 g1)
 *   longest-first (mode 2): axis 0 slowest and reversed: id0 = g0 - 1 - t / (g1 g2),
 *                           id1 = t % (g1 g2) % g1, id2 = t % (g1 g2) / g1
 * so that, with causal attention (program_id(0) is the query block, whose work grows
 * with it), the first round of tiles is the heaviest and the short ones fill the tail
 * (FA3's longest-processing-time-first order).
 *
 * Why a target-independent pass: the Tile IR program is unchanged (no language
 * construct), the CPU interpreter runs the persistent form too (tests compare it with
 * the plain one bit for bit: each tile's ops are the same ops on the same ids), and
 * the GPU passes see an ordinary loop nest (a pipelined key loop inside the tile
 * loop initialises and invalidates its mbarriers per tile, so phases restart at 0;
 * the SRAM hazards of the tile loop's back edge are the lowering's loop rule).
 *
 * Invariants (ir_verify checks them on a kernel with the attribute `persistent`):
 * the attribute is 1 or 2; the last three parameters are i32 (the logical grid); the
 * body is prologue ops (program_id(0), num_programs(0), the tile count), the tile
 * loop, return; nothing inside the tile loop reads program_id or num_programs. Run
 * once: a kernel that already has the attribute is left alone.
 *
 * Example (mode 1):
 *     kernel k(%X: ptr<f32>) {               kernel k(%X: ptr<f32>, %tiles_x: i32, %tiles_y: i32, %tiles_z: i32)
 *       %p = program_id 0                      {persistent = 1} {
 *       ... uses %p ...                ==>      %p0 = program_id 0; %np = num_programs 0
 *       return                                  %n = mul (mul %tiles_x, %tiles_y), %tiles_z
 *     }                                         for %t = %p0 to %n step %np {
 *                                                 %p = rem %t, %tiles_x ... uses %p ...; yield }
 *                                               return }
 */
#include "passes.h"

#include <string.h>

bool pass_is_schedule_pass(const char *name) { return name && !strcmp(name, "persistent"); }

static bool reads_ids(const IrOp *op) { return op->op == IR_PROGRAM_ID || op->op == IR_NUM_PROGRAMS; }

/* The program_id / num_programs ops of `b` (nested regions included), in order. */
static void collect_ids(IrBlock *b, PtrVec *out, Arena *a)
{
    for (IrOp *x = b->first; x; x = x->next) {
        if (reads_ids(x)) vec_push(a, out, x);
        for (int r = 0; r < x->nregions; r++) collect_ids(x->regions[r], out, a);
    }
}

/* Tile t's logical ids (ids[3]) at the top of the tile loop's body. */
static void tile_ids(IrBuilder *b, int mode, IrValue *t, IrValue *const g[3], IrValue *ids[3])
{
    IrType i32 = ir_type_scalar(IR_I32);
    if (mode == 2) {
        IrValue *g12 = irb_op2(b, IR_MUL, i32, g[1], g[2]);
        IrValue *r = irb_op2(b, IR_DIV, i32, t, g12);
        IrValue *last = irb_op2(b, IR_SUB, i32, g[0], irb_const_int(b, i32, 1));
        ids[0] = irb_op2(b, IR_SUB, i32, last, r);
        IrValue *rest = irb_op2(b, IR_REM, i32, t, g12);
        ids[1] = irb_op2(b, IR_REM, i32, rest, g[1]);
        ids[2] = irb_op2(b, IR_DIV, i32, rest, g[1]);
        return;
    }
    ids[0] = irb_op2(b, IR_REM, i32, t, g[0]);
    IrValue *q = irb_op2(b, IR_DIV, i32, t, g[0]);
    ids[1] = irb_op2(b, IR_REM, i32, q, g[1]);
    ids[2] = irb_op2(b, IR_DIV, i32, q, g[1]);
}

void pass_persistent(IrFunc *f, int mode)
{
    if (mode != 1 && mode != 2) return;
    if (ir_attr_get(&f->attrs, IR_ATTR_PERSISTENT)) return;   /* already persistent */
    IrBlock *body = f->body;
    IrOp *ret = body->last;
    if (!ret || ret->op != IR_RETURN) {
        INTERNAL_ERROR("persistent: kernel %s's body does not end with return", f->name);
        return;
    }
    PtrVec ids_ops = {0};
    collect_ids(body, &ids_ops, f->arena);
    IrType i32 = ir_type_scalar(IR_I32);
    static const char *names[3] = {"tiles_x", "tiles_y", "tiles_z"};
    IrValue *g[3];
    for (int a = 0; a < 3; a++) g[a] = ir_func_add_param(f, i32, names[a]);
    ir_attr_set_int(f->arena, &f->attrs, IR_ATTR_PERSISTENT, mode);

    /* The tile loop, before the return: for %t = program_id(0) to g0 g1 g2 step num_programs(0). */
    IrBuilder b = {.f = f, .block = body, .before = body->first, .loc = f->loc};
    IrValue *pid = irb_op(&b, IR_PROGRAM_ID, i32, 0, NULL);
    pid->def->attr[0] = 0;
    IrValue *np = irb_op(&b, IR_NUM_PROGRAMS, i32, 0, NULL);
    np->def->attr[0] = 0;
    IrValue *total = irb_op2(&b, IR_MUL, i32, irb_op2(&b, IR_MUL, i32, g[0], g[1]), g[2]);
    IrValue *bounds[3] = {pid, total, np};
    IrOp *loop = ir_op_new(f, IR_FOR, f->loc, 3, bounds, 0, NULL);
    ir_insert_before(ret, loop);
    IrBlock *tb = ir_op_add_region(f, loop);
    IrValue *t = ir_block_add_arg(tb, i32, "tile");

    /* Move the old body (everything between the new prologue and the loop) into it. */
    IrOp *first_old = total->def->next;
    for (IrOp *x = first_old, *next; x != loop; x = next) {
        next = x->next;
        ir_op_unlink(x);
        ir_block_append(tb, x);
    }
    IrBuilder ib = {.f = f, .block = tb, .before = tb->first, .loc = f->loc};
    IrValue *ids[3];
    tile_ids(&ib, mode, t, g, ids);
    IrOp *y = ir_op_new(f, IR_YIELD, f->loc, 0, NULL, 0, NULL);
    ir_block_append(tb, y);

    /* The old reads of the grid: tile t's ids and the logical grid. */
    for (int i = 0; i < ids_ops.len; i++) {
        IrOp *x = ids_ops.data[i];
        int axis = x->attr[0] >= 0 && x->attr[0] < 3 ? x->attr[0] : 0;
        ir_replace_uses(f, x->res[0], x->op == IR_PROGRAM_ID ? ids[axis] : g[axis]);
        ir_op_unlink(x);
    }
}
