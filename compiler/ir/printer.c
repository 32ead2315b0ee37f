/* printer.c — Tile IR to text (the format ir_parse reads back; docs/ir.md).
 *
 * What it does: prints kernels one op per line, regions indented by two
 * spaces. Values are printed as `%name` when their IrValue.name hint is a valid
 * identifier not already taken in the kernel, otherwise as `%N`, numbered
 * densely (0, 1, 2, ...) in print order. Names are assigned in one pass before
 * printing, so even broken IR (a use before its definition) prints the
 * definition's name; a value defined nowhere in the kernel prints as `%?ID`.
 *
 * Invariants: the output depends only on the IR (never on pointer values or
 * value ids), so print(parse(print(f))) == print(f). Floats are printed with
 * the fewest digits that read back to the same double (inf, -inf, nan, -nan
 * spelled out). The printer never fails and never crashes on malformed IR: it
 * is what a pass dumps when the verifier has just complained.
 *
 * GPU IR adds the kernel's layout table before it (`#L0 = #blocked<...>`,
 * ir_layout_print), layouts in tile types (`tensor<64xf32, #L0>`) and named
 * attributes (`{smem.offset = 0}` before an op's `:`, `attributes {...}` on
 * the kernel); Tile IR without them prints exactly as before.
 *
 * Example:
 *   kernel @k(%X: ptr<f32> {div = 16}, %n: i32) num_warps = 4 num_stages = 2 {
 *     %0 = program_id 0 : i32
 *     %offs = arange 0, 128 : tensor<128xi32>
 *     return
 *   }
 */
#include "ir.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct Printer {
    StrBuf *out;
    const IrFunc *f;
    bool with_locs;
    Arena *arena;         /* scratch: the name tables below (print_scratch) */
    int nids;
    const char **names;   /* by value id: chosen name, or NULL */
    int *nums;            /* by value id: number, or -1 */
    int next_num;
    const char **set;     /* open-addressing hash set of names in use */
    int setcap;
} Printer;

/* ---- naming ---- */
static bool valid_name(const char *s)
{
    if (!s || !*s) return false;
    if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || *s == '_')) return false;
    for (const char *q = s; *q; q++)
        if (!((*q >= 'A' && *q <= 'Z') || (*q >= 'a' && *q <= 'z') || (*q >= '0' && *q <= '9') ||
              *q == '_' || *q == '.'))
            return false;
    return true;
}

static unsigned hash_str(const char *s)
{
    unsigned h = 2166136261u;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

/* Insert `s` into the name set; false if it was already there. */
static bool set_insert(Printer *p, const char *s)
{
    unsigned i = hash_str(s) & (unsigned)(p->setcap - 1);
    while (p->set[i]) {
        if (strcmp(p->set[i], s) == 0) return false;
        i = (i + 1) & (unsigned)(p->setcap - 1);
    }
    p->set[i] = s;
    return true;
}

static void assign(Printer *p, const IrValue *v)
{
    if (!v || v->id < 0 || v->id >= p->nids) return;
    if (p->names[v->id] || p->nums[v->id] >= 0) return; /* duplicate id: first wins */
    if (valid_name(v->name) && set_insert(p, v->name)) p->names[v->id] = v->name;
    else p->nums[v->id] = p->next_num++;
}

static void assign_block(Printer *p, const IrBlock *b)
{
    if (!b) return;
    for (int i = 0; i < b->nargs; i++) assign(p, b->args[i]);
    for (const IrOp *op = b->first; op; op = op->next) {
        for (int i = 0; i < op->nres; i++) assign(p, op->res[i]);
        for (int r = 0; r < op->nregions; r++) assign_block(p, op->regions[r]);
    }
}

static void assign_names(Printer *p)
{
    const IrFunc *f = p->f;
    p->nids = f->next_id > 0 ? f->next_id : 1;
    p->names = ARENA_ARRAY(p->arena, const char *, p->nids);
    p->nums = ARENA_ARRAY(p->arena, int, p->nids);
    for (int i = 0; i < p->nids; i++) p->nums[i] = -1;
    p->setcap = 16;
    while (p->setcap < 2 * p->nids) p->setcap *= 2;
    p->set = ARENA_ARRAY(p->arena, const char *, p->setcap);
    for (int i = 0; i < f->nparams; i++) assign(p, f->params[i]);
    assign_block(p, f->body);
}

static void put_ref(Printer *p, const IrValue *v)
{
    if (!v) { sb_puts(p->out, "%?null"); return; }
    if (v->id >= 0 && v->id < p->nids) {
        if (p->names[v->id]) { sb_printf(p->out, "%%%s", p->names[v->id]); return; }
        if (p->nums[v->id] >= 0) { sb_printf(p->out, "%%%d", p->nums[v->id]); return; }
    }
    sb_printf(p->out, "%%?%d", v->id);
}

/* ---- small pieces ---- */
static void put_type(StrBuf *out, IrType t)
{
    char buf[128];
    sb_puts(out, ir_type_str(t, buf, sizeof buf));
}

/* A value's type; in GPU IR a tile's layout goes inside: tensor<64xf32, #L2>. */
static void put_value_type(StrBuf *out, const IrValue *v)
{
    char buf[128];
    ir_type_str(v->type, buf, sizeof buf);
    size_t n = strlen(buf);
    if (v->layout < 0) { sb_puts(out, buf); return; }
    if (v->type.rank > 0 && n > 0 && buf[n - 1] == '>') {
        sb_printf(out, "%.*s, #L%d>", (int)(n - 1), buf, v->layout);
        return;
    }
    sb_printf(out, "%s #L%d", buf, v->layout); /* a layout on a scalar: ir_verify rejects it */
}

/* ` {name = 1, other = [2, 3]}` (nothing when empty). */
static void put_attr_dict(StrBuf *out, const IrAttrList *l)
{
    if (!l || l->n == 0) return;
    sb_puts(out, " {");
    for (int i = 0; i < l->n; i++) {
        const IrAttr *a = &l->v[i];
        sb_printf(out, "%s%s = ", i ? ", " : "", a->name);
        if (a->list) sb_putc(out, '[');
        for (int j = 0; j < a->n; j++) sb_printf(out, "%s%lld", j ? ", " : "", (long long)a->v[j]);
        if (a->list) sb_putc(out, ']');
    }
    sb_putc(out, '}');
}

/* The shortest %.Ng that strtod reads back to the same bits. */
static void put_float(StrBuf *out, double v)
{
    if (isnan(v)) { sb_puts(out, signbit(v) ? "-nan" : "nan"); return; }
    if (isinf(v)) { sb_puts(out, v < 0 ? "-inf" : "inf"); return; }
    char buf[40];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, v);
        double back = strtod(buf, NULL);
        if (memcmp(&back, &v, sizeof v) == 0) break;
    }
    sb_puts(out, buf);
}

static void put_string(StrBuf *out, const char *s)
{
    sb_putc(out, '"');
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') { sb_putc(out, '\\'); sb_putc(out, (char)c); }
        else if (c == '\n') sb_puts(out, "\\n");
        else if (c == '\t') sb_puts(out, "\\t");
        else if (c < 0x20 || c == 0x7f) sb_printf(out, "\\x%02x", c);
        else sb_putc(out, (char)c);
    }
    sb_putc(out, '"');
}

static void put_literal(StrBuf *out, IrType t, int64_t ival, double fval)
{
    if (ir_elem_is_float((IrElem)t.elem)) put_float(out, fval);
    else sb_printf(out, "%lld", (long long)ival);
}

static void indent(Printer *p, int depth)
{
    for (int i = 0; i < depth; i++) sb_puts(p->out, "  ");
}

static void put_loc(Printer *p, SrcLoc loc)
{
    if (p->with_locs) sb_printf(p->out, " loc(%d:%d)", loc.line, loc.col);
}

static void put_args(Printer *p, const IrOp *op, int from)
{
    for (int i = from; i < op->nargs; i++) {
        sb_puts(p->out, i > from ? ", " : " ");
        put_ref(p, op->args[i]);
    }
}

static void put_result_types(Printer *p, const IrOp *op, bool parens)
{
    if (op->nres == 0) return;
    sb_puts(p->out, parens ? " : (" : " : ");
    for (int i = 0; i < op->nres; i++) {
        if (i) sb_puts(p->out, ", ");
        if (op->res[i]) put_value_type(p->out, op->res[i]);
        else sb_puts(p->out, "void");
    }
    if (parens) sb_putc(p->out, ')');
}

/* ---- ops ---- */
static void print_block(Printer *p, const IrBlock *b, int depth);

static void print_region(Printer *p, const IrOp *op, int r, int depth)
{
    sb_puts(p->out, "{\n");
    if (r < op->nregions) print_block(p, op->regions[r], depth + 1);
    indent(p, depth);
    sb_putc(p->out, '}');
}

static void print_for(Printer *p, const IrOp *op, int depth)
{
    const IrBlock *body = op->nregions > 0 ? op->regions[0] : NULL;
    sb_puts(p->out, " ");
    put_ref(p, body && body->nargs > 0 ? body->args[0] : NULL);
    const char *kw[3] = {" = ", " to ", " step "};
    for (int i = 0; i < 3; i++) {
        sb_puts(p->out, kw[i]);
        put_ref(p, i < op->nargs ? op->args[i] : NULL);
    }
    if (op->nargs > 3) {
        sb_puts(p->out, " iter_args(");
        for (int i = 3; i < op->nargs; i++) {
            if (i > 3) sb_puts(p->out, ", ");
            put_ref(p, body && i - 2 < body->nargs ? body->args[i - 2] : NULL);
            sb_puts(p->out, " = ");
            put_ref(p, op->args[i]);
        }
        sb_putc(p->out, ')');
    }
    put_attr_dict(p->out, &op->attrs);
    put_result_types(p, op, true);
    sb_putc(p->out, ' ');
    print_region(p, op, 0, depth);
}

static void print_if(Printer *p, const IrOp *op, int depth)
{
    put_args(p, op, 0);
    put_attr_dict(p->out, &op->attrs);
    put_result_types(p, op, true);
    sb_putc(p->out, ' ');
    print_region(p, op, 0, depth);
    if (op->nregions > 1) {
        sb_puts(p->out, " else ");
        print_region(p, op, 1, depth);
    }
}

/* Attributes written between the op name and its operands. */
static void print_attrs(Printer *p, const IrOp *op)
{
    StrBuf *out = p->out;
    switch (op->op) {
    case IR_CONST:
        sb_putc(out, ' ');
        put_literal(out, op->nres > 0 && op->res[0] ? op->res[0]->type : ir_type_scalar(IR_I32),
                    op->ival, op->fval);
        break;
    case IR_PROGRAM_ID:
    case IR_NUM_PROGRAMS:
    case IR_EXPAND_DIMS:
        sb_printf(out, " %d", op->attr[0]);
        break;
    case IR_ARANGE: sb_printf(out, " %d, %d", op->attr[0], op->attr[1]); break;
    case IR_CMP: sb_printf(out, " %s", ir_cmp_name((IrCmp)op->attr[0])); break;
    case IR_REDUCE: sb_printf(out, " %s %d", ir_reduce_name((IrReduce)op->attr[1]), op->attr[0]); break;
    case IR_TRANS: {
        int rank = op->nargs > 0 && op->args[0] ? op->args[0]->type.rank
                 : op->nres > 0 && op->res[0]   ? op->res[0]->type.rank : 0;
        if (rank > IR_MAX_RANK) rank = IR_MAX_RANK;
        sb_puts(out, " [");
        for (int i = 0; i < rank; i++) sb_printf(out, i ? ", %d" : "%d", op->attr[i]);
        sb_putc(out, ']');
        break;
    }
    default: break;
    }
}

static void print_op(Printer *p, const IrOp *op, int depth)
{
    indent(p, depth);
    for (int i = 0; i < op->nres; i++) {
        if (i) sb_puts(p->out, ", ");
        put_ref(p, op->res[i]);
    }
    if (op->nres) sb_puts(p->out, " = ");
    sb_puts(p->out, (unsigned)op->op < IR_OP_COUNT ? ir_op_info[op->op].name : "?op");
    if (op->op == IR_FOR) print_for(p, op, depth);
    else if (op->op == IR_IF) print_if(p, op, depth);
    else {
        print_attrs(p, op);
        put_args(p, op, 0);
        if (op->op == IR_ASSERT) {
            sb_puts(p->out, ", ");
            put_string(p->out, op->sattr ? op->sattr : "");
        }
        put_attr_dict(p->out, &op->attrs);
        put_result_types(p, op, op->nres > 1);
        for (int r = 0; r < op->nregions; r++) { /* regions on an op that has none: show them */
            sb_putc(p->out, ' ');
            print_region(p, op, r, depth);
        }
    }
    put_loc(p, op->loc);
    sb_putc(p->out, '\n');
}

static void print_block(Printer *p, const IrBlock *b, int depth)
{
    if (!b) return;
    for (const IrOp *op = b->first; op; op = op->next) print_op(p, op, depth);
}

static void print_header(Printer *p)
{
    const IrFunc *f = p->f;
    StrBuf *out = p->out;
    for (int i = 0; i < f->layouts.len; i++) { /* GPU IR: the layout table */
        sb_printf(out, "#L%d = ", i);
        ir_layout_print(out, f, i);
        sb_putc(out, '\n');
    }
    sb_printf(out, "kernel @%s(", f->name ? f->name : "?");
    for (int i = 0; i < f->nparams; i++) {
        const IrValue *v = f->params[i];
        if (i) sb_puts(out, ", ");
        put_ref(p, v);
        if (!v) continue;
        sb_puts(out, ": ");
        put_value_type(out, v);
        if (v->divisibility != 1) sb_printf(out, " {div = %d}", (int)v->divisibility);
    }
    sb_putc(out, ')');
    if (f->nconsts > 0) {
        sb_puts(out, " consts(");
        for (int i = 0; i < f->nconsts; i++) {
            const IrConstParam *c = &f->consts[i];
            sb_printf(out, "%s%s: ", i ? ", " : "", c->name ? c->name : "?");
            if (c->sval && c->type.elem == IR_VOID) { /* const f: fn */
                sb_printf(out, "fn = @%s", c->sval);
                continue;
            }
            if (c->sval) { /* const T: dtype */
                sb_printf(out, "dtype = %s", c->sval);
                continue;
            }
            put_type(out, c->type);
            sb_puts(out, " = ");
            put_literal(out, c->type, c->ival, c->fval);
        }
        sb_putc(out, ')');
    }
    sb_printf(out, " num_warps = %d num_stages = %d", f->sched.num_warps, f->sched.num_stages);
    if (f->attrs.n) {
        sb_puts(out, " attributes");
        put_attr_dict(out, &f->attrs);
    }
    if (p->with_locs) {
        sb_puts(out, " loc(");
        if (f->loc.file) {
            put_string(out, f->loc.file);
            sb_putc(out, ':');
        }
        sb_printf(out, "%d:%d)", f->loc.line, f->loc.col);
    }
    sb_puts(out, " {\n");
}

/* The printer's scratch. Static (per thread; printing does not nest) rather than a
 * local: an arena allocation failing inside a compile (a --dump-after dump) unwinds
 * past the printer (support.h), and only an object outside its frame can still be
 * freed then, as verify.c does with its own. */
static _Thread_local Arena print_scratch;

void ir_print_func_ex(StrBuf *out, const IrFunc *f, bool with_locs)
{
    Printer p;
    memset(&p, 0, sizeof p);
    p.out = out;
    p.f = f;
    p.with_locs = with_locs;
    arena_init(&print_scratch);
    p.arena = &print_scratch;
    SupOomCatch oom;
    if (!SUP_OOM_TRY(&oom)) {
        arena_free(&print_scratch);
        sup_oom_rethrow();
        return;
    }
    assign_names(&p);
    print_header(&p);
    print_block(&p, f->body, 1);
    sb_puts(out, "}\n");
    sup_oom_pop(&oom);
    arena_free(&print_scratch);
}

void ir_print_func(StrBuf *out, const IrFunc *f) { ir_print_func_ex(out, f, false); }

void ir_print_module_ex(StrBuf *out, const IrModule *m, bool with_locs)
{
    for (int i = 0; i < m->nfuncs; i++) {
        if (i) sb_putc(out, '\n');
        ir_print_func_ex(out, m->funcs[i], with_locs);
    }
}

void ir_print_module(StrBuf *out, const IrModule *m) { ir_print_module_ex(out, m, false); }
