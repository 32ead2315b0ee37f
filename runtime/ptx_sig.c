/* ptx_sig.c — kernel signatures read back from PTX text, and KilnKernelInfo copies.
 *
 * Used when PTX is loaded without a signature (kiln_module_load_ptx with
 * kernels == NULL). PTX says only each parameter's size and int/float class,
 * so the signatures are "loose" (see rt_check_args): a .u64 parameter takes a
 * pointer or a 64-bit integer. Threads per block come from .reqntid/.maxntid.
 *
 * Example:
 *   .visible .entry vec_add(.param .u64 vec_add_param_0, .param .u32 vec_add_param_1)
 *   .maxntid 128, 1, 1
 * gives vec_add(param_0: u64, param_1: i32), num_warps 4.
 * Invariant: never reads past the NUL; unknown text is skipped, not trusted.
 */
#include "rt_internal.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>

typedef struct Lex {
    const char *p;
    char tok[160];
} Lex;

static int is_word(int c) { return isalnum(c) || c == '_' || c == '.' || c == '$' || c == '%'; }

/* Next token into lx->tok: a word (identifier, directive, number) or one
 * punctuation character. Comments and string literals are skipped. Returns 0 at the end. */
static int next(Lex *lx)
{
    for (;;) {
        while (*lx->p && isspace((unsigned char)*lx->p)) lx->p++;
        if (lx->p[0] == '/' && lx->p[1] == '/') {
            while (*lx->p && *lx->p != '\n') lx->p++;
        } else if (lx->p[0] == '/' && lx->p[1] == '*') {
            const char *e = strstr(lx->p + 2, "*/");
            lx->p = e ? e + 2 : lx->p + strlen(lx->p);
        } else if (*lx->p == '"') {
            lx->p++;
            while (*lx->p && *lx->p != '"') lx->p += (*lx->p == '\\' && lx->p[1]) ? 2 : 1;
            if (*lx->p) lx->p++;
        } else {
            break;
        }
    }
    if (!*lx->p) return 0;
    size_t n = 0;
    if (is_word((unsigned char)*lx->p)) {
        while (is_word((unsigned char)*lx->p)) {
            if (n + 1 < sizeof lx->tok) lx->tok[n++] = *lx->p;
            lx->p++;
        }
    } else {
        lx->tok[n++] = *lx->p++;
    }
    lx->tok[n] = 0;
    return 1;
}

static int param_kind_of(const char *t, KilnParamKind *k)
{
    static const struct { const char *name; KilnParamKind kind; } tab[] = {
        {".u64", KILN_PARAM_U64}, {".s64", KILN_PARAM_U64}, {".b64", KILN_PARAM_U64},
        {".f64", KILN_PARAM_F64}, {".u32", KILN_PARAM_I32}, {".s32", KILN_PARAM_I32},
        {".b32", KILN_PARAM_I32}, {".f32", KILN_PARAM_F32}, {".u16", KILN_PARAM_U16},
        {".s16", KILN_PARAM_U16}, {".b16", KILN_PARAM_U16}, {".f16", KILN_PARAM_F16},
        {".bf16", KILN_PARAM_BF16}, {".u8", KILN_PARAM_U8}, {".s8", KILN_PARAM_U8},
        {".b8", KILN_PARAM_U8}, {".pred", KILN_PARAM_I1},
    };
    for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++)
        if (!strcmp(t, tab[i].name)) {
            *k = tab[i].kind;
            return 1;
        }
    return 0;
}

/* One ".param <type...> name" up to ',' or ')'. */
static KilnStatus parse_param(Lex *lx, KilnKernelInfo *ki, KilnParam *out, int *end)
{
    int have_kind = 0, is_ptr = 0;
    char name[160] = "";
    memset(out, 0, sizeof *out);
    while (next(lx)) {
        if (!strcmp(lx->tok, ",") || !strcmp(lx->tok, ")")) {
            *end = lx->tok[0] == ')';
            if (!have_kind || !name[0])
                return kiln_set_error(KILN_ERR_USAGE, "PTX entry %s: cannot read parameter %d", ki->name, ki->nparams + 1);
            if (is_ptr) out->kind = KILN_PARAM_PTR;
            size_t pre = strlen(ki->name);
            const char *shown = !strncmp(name, ki->name, pre) && name[pre] == '_' ? name + pre + 1 : name;
            snprintf(out->name, sizeof out->name, "%.63s", shown);
            return KILN_OK;
        }
        if (!strcmp(lx->tok, "[")) {
            /* a byte array: CUDA passes __half/__nv_bfloat16 (and small structs) so */
            long bytes = next(lx) ? strtol(lx->tok, NULL, 10) : 0;
            static const KilnParamKind by_size[9] = {[1] = KILN_PARAM_U8, [2] = KILN_PARAM_U16,
                                                     [4] = KILN_PARAM_I32, [8] = KILN_PARAM_U64};
            if (bytes < 1 || bytes > 8 || (bytes & (bytes - 1)) || !next(lx) || strcmp(lx->tok, "]"))
                return kiln_set_error(KILN_ERR_UNSUPPORTED,
                                      "PTX entry %s: parameter %s is an aggregate of %ld bytes; pass a signature",
                                      ki->name, name, bytes);
            out->kind = by_size[bytes];
            have_kind = 1;
            continue;
        }
        if (!strcmp(lx->tok, ".ptr")) is_ptr = 1;
        else if (!have_kind && param_kind_of(lx->tok, &out->kind)) have_kind = 1;
        else if (lx->tok[0] != '.' && !isdigit((unsigned char)lx->tok[0])) snprintf(name, sizeof name, "%s", lx->tok);
    }
    return kiln_set_error(KILN_ERR_USAGE, "PTX entry %s: unterminated parameter list", ki->name);
}

/* After ')': performance directives up to '{' (a definition) or ';' (a declaration). */
static int parse_directives(Lex *lx, KilnKernelInfo *ki)
{
    ki->num_warps = 4;
    while (next(lx)) {
        if (!strcmp(lx->tok, "{")) return 1;
        if (!strcmp(lx->tok, ";")) return 0;
        if (!strcmp(lx->tok, ".maxntid") || !strcmp(lx->tok, ".reqntid")) {
            long threads = 1;
            for (int i = 0; i < 3; i++) {
                const char *save = lx->p;
                if (!next(lx) || !isdigit((unsigned char)lx->tok[0])) {
                    lx->p = save;
                    break;
                }
                threads *= strtol(lx->tok, NULL, 10);
                save = lx->p;
                if (!next(lx) || strcmp(lx->tok, ",")) {
                    lx->p = save;
                    break;
                }
            }
            ki->num_warps = threads >= 32 ? (int)(threads / 32) : 1;
        }
    }
    return 0;
}

static KilnStatus parse_entry(Lex *lx, KilnKernelInfo *ki, int *is_def)
{
    memset(ki, 0, sizeof *ki);
    if (!next(lx)) return kiln_set_error(KILN_ERR_USAGE, "PTX: .entry without a name");
    snprintf(ki->name, sizeof ki->name, "%.127s", lx->tok);
    if (!next(lx) || strcmp(lx->tok, "("))
        return kiln_set_error(KILN_ERR_USAGE, "PTX entry %s: expected '(' after the name", ki->name);
    const char *save = lx->p;
    if (next(lx) && !strcmp(lx->tok, ")")) {
        *is_def = parse_directives(lx, ki);
        return KILN_OK;
    }
    lx->p = save;
    int end = 0, cap = 0;
    while (!end) {
        if (!next(lx) || strcmp(lx->tok, ".param"))
            return kiln_set_error(KILN_ERR_USAGE, "PTX entry %s: expected .param", ki->name);
        if (ki->nparams == cap) {
            cap = cap ? 2 * cap : 8;
            KilnParam *np = realloc(ki->params, (size_t)cap * sizeof *np);
            if (!np) return kiln_set_error(KILN_ERR_INTERNAL, "out of host memory");
            ki->params = np;
        }
        KilnStatus st = parse_param(lx, ki, &ki->params[ki->nparams], &end);
        if (st != KILN_OK) return st;
        ki->nparams++;
    }
    *is_def = parse_directives(lx, ki);
    return KILN_OK;
}

KilnStatus rt_ptx_signatures(const char *ptx, KilnKernelInfo **out, int *n)
{
    *out = NULL;
    *n = 0;
    if (!ptx) return kiln_set_error(KILN_ERR_USAGE, "no PTX text");
    Lex lx = {.p = ptx};
    KilnKernelInfo *v = NULL;
    int len = 0, cap = 0;
    while (next(&lx)) {
        if (strcmp(lx.tok, ".entry")) continue;
        if (len == cap) {
            cap = cap ? 2 * cap : 4;
            KilnKernelInfo *nv = realloc(v, (size_t)cap * sizeof *nv);
            if (!nv) {
                rt_free_infos(v, len);
                return kiln_set_error(KILN_ERR_INTERNAL, "out of host memory");
            }
            v = nv;
        }
        int is_def = 0;
        KilnStatus st = parse_entry(&lx, &v[len], &is_def);
        len++;
        if (st != KILN_OK) {
            rt_free_infos(v, len);
            return st;
        }
        if (!is_def) free(v[--len].params); /* a declaration of an external entry */
    }
    *out = v;
    *n = len;
    return KILN_OK;
}

KilnStatus rt_copy_infos(const KilnKernelInfo *src, int n, KilnKernelInfo **out)
{
    *out = NULL;
    if (n <= 0) return KILN_OK;
    KilnKernelInfo *v = calloc((size_t)n, sizeof *v);
    if (!v) return kiln_set_error(KILN_ERR_INTERNAL, "out of host memory");
    for (int i = 0; i < n; i++) {
        v[i] = src[i];
        v[i].name[sizeof v[i].name - 1] = 0;
        v[i].params = NULL;
        if (src[i].nparams < 0 || (src[i].nparams > 0 && !src[i].params)) {
            rt_free_infos(v, i);
            return kiln_set_error(KILN_ERR_USAGE, "kernel signature %s: %d parameters but no parameter array",
                                  src[i].name, src[i].nparams);
        }
        if (src[i].nparams > 0) {
            v[i].params = malloc((size_t)src[i].nparams * sizeof(KilnParam));
            if (!v[i].params) {
                rt_free_infos(v, i);
                return kiln_set_error(KILN_ERR_INTERNAL, "out of host memory");
            }
            memcpy(v[i].params, src[i].params, (size_t)src[i].nparams * sizeof(KilnParam));
        }
    }
    *out = v;
    return KILN_OK;
}

void rt_free_infos(KilnKernelInfo *infos, int n)
{
    if (!infos) return;
    for (int i = 0; i < n; i++) free(infos[i].params);
    free(infos);
}
