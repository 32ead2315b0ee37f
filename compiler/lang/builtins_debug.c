/* builtins_debug.c — the statement builtins: static_print, device_assert and fence.
 *
 * What: `static_print(args...)` is compile-time only: it reports one diagnostic
 * note at the call listing each argument, a compile-time value by its value and
 * a runtime value by its type and shape, labelled with the argument's source
 * text (or keyword name). It emits no op of its own (ops of runtime arguments
 * are dead: DCE drops them) and does not stop compilation; since
 * sema lowers each specialisation once and re-walks a helper at every inlining
 * site, the note appears once per specialisation / inlining site.
 * `device_assert(cond[, "msg"])` lowers to IR_ASSERT (an effect: DCE keeps it)
 * whose sattr is the message, by default the condition's source text.
 * Invariants: static_print never changes the IR; device_assert's operand is i1
 * (a scalar, or a tile of which every element must hold).
 * Example: `static_print(offs, BLOCK)` with offs: i32[128], BLOCK = 128 ->
 *   note: static_print: offs = i32[128], BLOCK = 128
 * `device_assert(offs < n)` -> assert %c : tensor<128xi1> "offs < n".
 * `fence()` lowers to IR_FENCE (no operands; an effect) -> fence
 */
#include "sema.h"

#include <string.h>

static Val void_val(SrcLoc loc)
{
    Val v;
    memset(&v, 0, sizeof v);
    v.kind = V_VOID;
    v.loc = loc;
    return v;
}

static void print_const(Sema *s, StrBuf *out, const Val *v)
{
    IrElem e = (IrElem)v->type.elem;
    if (e == IR_I1) sb_puts(out, v->i ? "true" : "false");
    else if (ir_elem_is_float(e)) sb_printf(out, e == IR_F64 ? "%.17g" : "%.9g", v->f);
    else sb_printf(out, "%lld", (long long)v->i);
    /* A typed constant of a type other than the literal defaults says it. */
    if (!v->untyped && e != IR_I1 && e != IR_I32 && e != IR_F32) sb_printf(out, " (%s)", sema_type_str(s, v->type));
}

/* The value part of one argument: a constant's value, a runtime value's type. */
static void print_val(Sema *s, StrBuf *out, const Val *v)
{
    switch (v->kind) {
    case V_CONST: print_const(s, out, v); break;
    case V_RT: sb_puts(out, sema_type_str(s, v->v->type)); break;
    case V_TYPE: sb_printf(out, "type %s", v->s ? v->s : sema_type_str(s, v->type)); break;
    case V_FN: sb_printf(out, "fn %s", v->s ? v->s : v->fn && v->fn->name ? v->fn->name : "?"); break;
    case V_LIST:
        sb_putc(out, '[');
        for (int i = 0; i < v->nitems; i++) {
            if (i) sb_puts(out, ", ");
            print_val(s, out, &v->items[i]);
        }
        sb_putc(out, ']');
        break;
    case V_STR: sb_printf(out, "\"%s\"", v->s); break;
    default: sb_puts(out, sema_val_desc(s, v)); break;
    }
}

Val bi_static_print(Sema *s, const AstExpr *call)
{
    Val *vals = ARENA_ARRAY(s->arena, Val, call->nargs ? call->nargs : 1);
    bool err = false;
    for (int i = 0; i < call->nargs; i++) {
        vals[i] = sema_expr(s, call->args[i].value);
        err |= vals[i].kind == V_ERR;
    }
    if (err) return val_err();
    StrBuf out;
    sb_init(&out);
    for (int i = 0; i < call->nargs; i++) {
        const AstArg *arg = &call->args[i];
        if (i) sb_puts(&out, ", ");
        if (vals[i].kind == V_STR && !arg->name) { /* a plain string is a label: "after scaling" */
            sb_puts(&out, vals[i].s);
            continue;
        }
        StrBuf val;
        sb_init(&val);
        print_val(s, &val, &vals[i]);
        const char *label = arg->name ? arg->name : bi_arg_text(s, arg->loc);
        if (label && strcmp(label, val.data ? val.data : "") != 0) sb_printf(&out, "%s = ", label);
        sb_puts(&out, val.data ? val.data : "");
        sb_free(&val);
    }
    diag_note(s->diag, call->loc, "static_print: %s", out.data ? out.data : "");
    sb_free(&out);
    return void_val(call->loc);
}

Val bi_device_assert(Sema *s, const Builtin *bi, BArgs *a, const AstExpr *call)
{
    (void)bi;
    Val *c = &a->v[0];
    if (a->have[1] && a->v[1].kind != V_STR) {
        diag_error(s->diag, a->v[1].loc, "the message of device_assert must be a string, got %s",
                   sema_val_desc(s, &a->v[1]));
        return val_err();
    }
    if (!sema_want_value(s, c)) return val_err();
    IrType t = sema_val_type(c);
    if (t.elem != IR_I1) {
        diag_error(s->diag, c->loc, "device_assert needs an i1 condition (a comparison), got %s; compare it, e.g. x != 0",
                   sema_type_str(s, t));
        return val_err();
    }
    IrValue *cond = sema_materialize(s, c, call->loc);
    const char *msg = NULL;
    if (a->have[1]) msg = a->v[1].s;
    else if (call->nargs > 0 && !call->args[0].name) msg = bi_arg_text(s, call->args[0].loc);
    if (!msg) msg = "assertion failed";
    IrOp *op = ir_op_new(s->b.f, IR_ASSERT, call->loc, 1, &cond, 0, NULL);
    irb_insert(&s->b, op);
    op->sattr = msg;
    return void_val(call->loc);
}

/* fence(): an effect (IR_FENCE, kept by DCE, and no pass moves a memory op across
 * it, as across a store). With atomic_add it publishes one program's writes to
 * another: writer `store(...); fence(); atomic_add(flag, 1)`, reader
 * `if atomic_add(flag, 1) == n - 1 { fence(); load(...) }`. */
Val bi_fence(Sema *s, const Builtin *bi, BArgs *a, const AstExpr *call)
{
    (void)bi;
    (void)a;
    irb_insert(&s->b, ir_op_new(s->b.f, IR_FENCE, call->loc, 0, NULL, 0, NULL));
    return void_val(call->loc);
}
