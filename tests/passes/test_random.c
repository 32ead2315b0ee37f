/* test_random.c — property tests of the passes on random Tile IR.
 *
 * A seeded generator builds kernels with nested `for` loops (carried values,
 * constant and run-time bounds, some zero-trip), `if`s with results, i32/f32
 * arithmetic on edge constants (0, -0.0, 1, -1, INT_MIN, INT_MAX), casts,
 * compares, selects, loads, stores and atomics. For every kernel and pass:
 *   - the output verifies;
 *   - the pass is idempotent (a second run prints the same IR);
 *   - cse, licm and dce keep every op with effects (fold may drop the ones in
 *     a region it proves never runs);
 * and the whole pipeline verifies.
 */
#include "passtest.h"

#include <stdint.h>

typedef struct Gen {
    PT *t;
    uint64_t s;
    IrValue *vals[512];
    int nvals;
    IrValue *pf, *pi, *n;
    int nops;
} Gen;

static uint32_t rnd(Gen *g)
{
    g->s = g->s * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(g->s >> 33);
}
static int pick(Gen *g, int n) { return (int)(rnd(g) % (uint32_t)n); }

static void push(Gen *g, IrValue *v)
{
    if (g->nvals < 512) g->vals[g->nvals++] = v;
}

/* A visible value of element type e (making a constant when there is none or by chance). */
static IrValue *any(Gen *g, IrElem e)
{
    static const int64_t ik[] = {0, 1, -1, 2, 7, 31, 32, INT32_MIN, INT32_MAX, 1000};
    static const double fk[] = {0.0, -0.0, 1.0, -1.0, 0.5, 3.25, 1e30, -7.0};
    int start = pick(g, g->nvals + 1);
    for (int k = 0; k < g->nvals && pick(g, 5) != 0; k++) {
        IrValue *v = g->vals[(start + k) % g->nvals];
        if (v->type.elem == e && v->type.rank == 0) return v;
    }
    IrValue *c = e == IR_F32 ? cf(g->t, e, fk[pick(g, 8)]) : e == IR_I1 ? ci(g->t, e, pick(g, 2))
                                                                         : ci(g->t, e, ik[pick(g, 10)]);
    push(g, c);
    return c;
}

static void gen_block(Gen *g, int depth, int nops);

static void gen_for(Gen *g, int depth)
{
    IrValue *lo = any(g, IR_I32), *hi = pick(g, 3) ? g->n : any(g, IR_I32);
    IrValue *step = ci(g->t, IR_I32, 1 + pick(g, 3));
    int nc = pick(g, 3);
    IrValue *inits[2];
    for (int i = 0; i < nc; i++) inits[i] = any(g, pick(g, 2) ? IR_F32 : IR_I32);
    IrOp *loop = pt_for(g->t, lo, hi, step, nc, inits);
    int mark = g->nvals;
    IrBlock *body = loop->regions[0];
    for (int i = 0; i < body->nargs; i++) push(g, body->args[i]);
    gen_block(g, depth + 1, 3 + pick(g, 6));
    IrValue *ys[2];
    for (int i = 0; i < nc; i++) ys[i] = any(g, (IrElem)inits[i]->type.elem);
    pt_yield(g->t, nc, ys);
    g->nvals = mark;
    pt_end(g->t, loop);
    for (int i = 0; i < nc; i++) push(g, loop->res[i]);
}

static void gen_if(Gen *g, int depth)
{
    IrValue *c = any(g, IR_I1);
    int nr = pick(g, 3);
    IrType rt[2];
    for (int i = 0; i < nr; i++) rt[i] = T(pick(g, 2) ? IR_F32 : IR_I32);
    bool with_else = nr > 0 || pick(g, 2);
    IrOp *iff = pt_if(g->t, c, nr, rt, with_else);
    for (int r = 0; r < (with_else ? 2 : 1); r++) {
        pt_in(g->t, iff->regions[r]);
        int mark = g->nvals;
        gen_block(g, depth + 1, 1 + pick(g, 4));
        IrValue *ys[2];
        for (int i = 0; i < nr; i++) ys[i] = any(g, (IrElem)rt[i].elem);
        pt_yield(g->t, nr, ys);
        g->nvals = mark;
    }
    pt_end(g->t, iff);
    for (int i = 0; i < nr; i++) push(g, iff->res[i]);
}

static void gen_op(Gen *g, int depth)
{
    static const IrOpcode ib[] = {IR_ADD, IR_SUB, IR_MUL, IR_DIV, IR_REM, IR_MIN, IR_MAX,
                                  IR_AND, IR_OR, IR_XOR, IR_SHL, IR_SHR};
    static const IrOpcode fb[] = {IR_ADD, IR_SUB, IR_MUL, IR_DIV, IR_MIN, IR_MAX};
    static const IrOpcode fu[] = {IR_NEG, IR_ABS, IR_EXP, IR_SQRT, IR_FLOOR};
    PT *t = g->t;
    IrBuilder *b = &t->b;
    int k = pick(g, depth < 3 ? 16 : 13);
    IrValue *v = NULL;
    if (k < 4) v = irb_op2(b, ib[pick(g, 12)], T(IR_I32), any(g, IR_I32), any(g, IR_I32));
    else if (k < 6) v = irb_op2(b, fb[pick(g, 6)], T(IR_F32), any(g, IR_F32), any(g, IR_F32));
    else if (k == 6) v = irb_op1(b, fu[pick(g, 5)], T(IR_F32), any(g, IR_F32));
    else if (k == 7) v = irb_op1(b, pick(g, 2) ? IR_NEG : IR_NOT, T(IR_I32), any(g, IR_I32));
    else if (k == 8) {
        IrElem e = pick(g, 2) ? IR_F32 : IR_I32;
        v = irb_op2(b, IR_CMP, T(IR_I1), any(g, e), any(g, e));
        v->def->attr[0] = pick(g, 6);
    } else if (k == 9) {
        IrElem e = pick(g, 2) ? IR_F32 : IR_I32;
        IrValue *a[3] = {any(g, IR_I1), any(g, e), any(g, e)};
        v = irb_op(b, IR_SELECT, T(e), 3, a);
    } else if (k == 10) {
        bool to_f = pick(g, 2);
        v = irb_op1(b, IR_CAST, T(to_f ? IR_F32 : IR_I32), any(g, to_f ? IR_I32 : IR_F32));
    } else if (k == 11) {
        IrValue *p = irb_op2(b, IR_ADDPTR, g->pf->type, g->pf, any(g, IR_I32));
        if (pick(g, 2)) v = irb_op1(b, IR_LOAD, T(IR_F32), p);
        else pt_store(t, p, any(g, IR_F32));
    } else if (k == 12) {
        IrValue *a[2] = {g->pi, any(g, IR_I32)};
        if (pick(g, 2)) pt_op0(t, IR_STORE, 2, a);
        else v = irb_op(b, IR_ATOMIC_ADD, T(IR_I32), 2, a);
    } else if (k < 15) {
        gen_for(g, depth);
    } else {
        gen_if(g, depth);
    }
    if (v) push(g, v);
    g->nops++;
}

static void gen_block(Gen *g, int depth, int nops)
{
    for (int i = 0; i < nops; i++) gen_op(g, depth);
}

static void gen_kernel(Gen *g, PT *t, uint64_t seed)
{
    memset(g, 0, sizeof *g);
    g->t = t;
    g->s = seed * 0x9E3779B97F4A7C15ull + 1;
    g->pf = param(t, ir_type_ptr(IR_F32), "pf");
    g->pi = param(t, ir_type_ptr(IR_I32), "pi");
    g->n = param(t, T(IR_I32), "n");
    push(g, g->n);
    push(g, param(t, T(IR_F32), "x"));
    gen_block(g, 0, 6 + pick(g, 12));
    pt_done(t);
}

static char *print_f(PT *t)
{
    StrBuf sb;
    sb_init(&sb);
    ir_print_func(&sb, t->f);
    return sb_steal(&sb);
}

static int effects(PT *t) { return pt_count(t, IR_STORE) + pt_count(t, IR_LOAD) + pt_count(t, IR_ATOMIC_ADD); }

#define NSEEDS 400

START_TEST(each_pass_verifies_and_is_idempotent)
{
    const PassInfo *passes[4] = {pass_find("fold"), pass_find("cse"), pass_find("licm"), pass_find("dce")};
    for (int p = 0; p < 4; p++) {
        for (uint64_t seed = 1; seed <= NSEEDS; seed++) {
            PT t;
            Gen g;
            pt_init(&t);
            gen_kernel(&g, &t, seed);
            pt_check(&t); /* the generator itself makes valid IR */
            int eff = effects(&t);
            passes[p]->run(t.f);
            pt_check(&t);
            if (p > 0)
                ck_assert_msg(effects(&t) == eff, "%s dropped an op with effects (seed %llu)",
                              passes[p]->name, (unsigned long long)seed);
            char *once = print_f(&t);
            passes[p]->run(t.f);
            char *twice = print_f(&t);
            ck_assert_msg(strcmp(once, twice) == 0, "%s is not idempotent (seed %llu):\n%s\n--- second run ---\n%s",
                          passes[p]->name, (unsigned long long)seed, once, twice);
            free(once);
            free(twice);
            pt_free(&t);
        }
    }
}
END_TEST

START_TEST(pipeline_verifies)
{
    int shrunk = 0;
    for (uint64_t seed = 1; seed <= NSEEDS; seed++) {
        PT t;
        Gen g;
        pt_init(&t);
        gen_kernel(&g, &t, seed);
        int before = pt_count(&t, IR_OP_COUNT);
        StrBuf err;
        sb_init(&err);
        bool ok = pass_pipeline(t.f, NULL, NULL, &err);
        ck_assert_msg(ok, "seed %llu: %s", (unsigned long long)seed, err.data ? err.data : "");
        sb_free(&err);
        pt_check(&t);
        shrunk += pt_count(&t, IR_OP_COUNT) < before;
        pt_free(&t);
    }
    /* The generator leaves plenty to fold and remove: most kernels must shrink. */
    ck_assert_int_gt(shrunk, NSEEDS / 2);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("random");
    TCase *tc = tcase_create("random");
    tcase_add_test(tc, each_pass_verifies_and_is_idempotent);
    tcase_add_test(tc, pipeline_verifies);
    suite_add_tcase(s, tc);
    return s;
}

TU_MAIN(suite)
