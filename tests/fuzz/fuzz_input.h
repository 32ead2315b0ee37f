/* fuzz_input.h — what both libFuzzer targets (fuzz_frontend.c, fuzz_compile.c)
 * do with an input first: copy it into a NUL-terminated source (an embedded NUL
 * simply ends it, as it would for a file read by the driver) and parse it once
 * as "fuzz.tile" into a fresh Arena and Diag; and free all of it after. Every
 * input gets its own, so LeakSanitizer findings are real leaks.
 */
#ifndef KILN_FUZZ_INPUT_H
#define KILN_FUZZ_INPUT_H

#include "compiler/lang/ast.h"
#include "compiler/support/diag.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct FuzzInput {
    char *src;        /* the input, NUL-terminated */
    Arena arena;
    Diag diag;        /* the parse's diagnostics (and whatever the target adds) */
    AstFile *file;    /* ast_parse of src; NULL when it could not be parsed at all */
} FuzzInput;

/* false: no memory for the copy (nothing to free). */
static inline bool fuzz_input_open(FuzzInput *in, const uint8_t *data, size_t size)
{
    in->src = malloc(size + 1);
    if (!in->src) return false;
    memcpy(in->src, data, size);
    in->src[size] = 0;
    arena_init(&in->arena);
    diag_init(&in->diag, "fuzz.tile", in->src);
    in->file = ast_parse(&in->arena, &in->diag, "fuzz.tile", in->src);
    return true;
}

static inline void fuzz_input_close(FuzzInput *in)
{
    diag_free(&in->diag);
    arena_free(&in->arena);
    free(in->src);
}

#endif
