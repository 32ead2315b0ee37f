/* lang_case.h — what the grad and rescale tests (tests/lang/test_e2e_grad.c,
 * test_e2e_rescale.c) share: one kernel compiled from a source string (it must compile
 * with no diagnostics and verify), and a seeded uniform generator. Header-only.
 */
#ifndef KILN_TESTS_LANG_CASE_H
#define KILN_TESTS_LANG_CASE_H

#include "tests/testutil.h"
#include "compiler/lang/lang.h"

#include <stdlib.h>
#include <string.h>

typedef struct Compiled {
    Arena arena;
    Diag diag;
    char *src;
    IrFunc *f;
} Compiled;

/* Compile `src` (one kernel, named `name` in diagnostics) with default options; the kernel must verify. */
static inline IrFunc *compile_named(Compiled *c, const char *name, const char *src)
{
    c->src = strdup(src);
    arena_init(&c->arena);
    diag_init(&c->diag, name, c->src);
    AstFile *af = ast_parse(&c->arena, &c->diag, name, c->src);
    LangOptions lo;
    memset(&lo, 0, sizeof lo);
    IrModule *m = af && c->diag.nerrors == 0 ? lang_compile(&c->arena, &c->diag, af, &lo) : NULL;
    ck_assert_msg(m && c->diag.nerrors == 0 && m->nfuncs == 1, "compile errors:\n%s\n%s",
                  c->diag.out.data ? c->diag.out.data : "", src);
    c->f = m->funcs[0];
    StrBuf err;
    sb_init(&err);
    ck_assert_msg(ir_verify(c->f, &err), "%s\n%s", err.data ? err.data : "", src);
    sb_free(&err);
    return c->f;
}

static inline void compiled_free(Compiled *c)
{
    diag_free(&c->diag);
    arena_free(&c->arena);
    free(c->src);
}

static uint64_t rng_state;
static inline double rnd(double lo, double hi)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return lo + (hi - lo) * (double)(rng_state >> 11) / 9007199254740992.0;
}

#endif
