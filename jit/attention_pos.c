/* attention_pos.c — the position offsets of the attention calls (KilnAttentionParams'
 * q_pos_offset, kv_pos_offset): context parallelism, where a call handles a shard of the
 * queries against a shard of the keys and masks, windows and hooks must see positions in
 * the whole sequence.
 *
 * What: the programs of lang/lib/ know only local indices. A call with positions runs them
 * with a derived variant: the caller's variant text (or none) with each hook it binds renamed
 * to kiln_pos_user_<hook>, then generated hooks of the programs' names that call those with
 * the indices shifted by two runtime `param`s (kiln_pos_q, kiln_pos_kv). Causal compares
 * positions (key j visible to row i iff kv_pos_offset + j <= q_pos_offset + i): where that
 * diagonal is the kernel's own (q_pos_offset - kv_pos_offset = seqlen_k - seqlen_q) the
 * kernel's CAUSAL runs it, where every key is visible causal is dropped, else it becomes a
 * mask_mod term (j <= i + kiln_pos_diag) with the kernel's CAUSAL off.
 *
 * With a block mask: the mask's lists are the caller's (kiln.distributed slices one made for
 * the whole sequence); its FULL blocks run without mask_mod, its PARTIAL ones with the derived
 * mask_mod, so the whole-sequence hooks and causal term apply there. The mask's causal flag is
 * the call's as the caller made it (checked before the derivation turns CAUSAL into a term).
 *
 * Invariants: without positions, or with positions that change nothing (no causal
 * term and no hooks to shift), the call is untouched: the shipped kernels compile exactly as before (their
 * PTX does not change). The generated names start with kiln_pos_ (reserved); their
 * arguments are exempt from the "every argument is read" check (a hook that ignores
 * kv_idx never reads kiln_pos_kv).
 *
 * Example: {causal = 1, seqlen_q = seqlen_k = 100, positions = 1, q_pos_offset = 300, kv_pos_offset = 250,
 * variant = sliding_window (window_left = 150)}: the kernel runs with CAUSAL = false on
 * sliding_window.tile's text with its mask_mod and kv_start renamed kiln_pos_user_mask_mod and
 * kiln_pos_user_kv_start, followed by (kv_start's likewise)
 *     fn mask_mod(b, h, q_idx, kv_idx) {
 *         return kiln_pos_user_mask_mod(b, h, q_idx + kiln_pos_q, kv_idx + kiln_pos_kv) && kv_idx <= q_idx + kiln_pos_diag; }
 * with kiln_pos_q = 300, kiln_pos_kv = 250, kiln_pos_diag = 50.
 */
#include "jit_internal.h"
#include "compiler/driver/driver.h"
#include "compiler/support/support.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define POS_PREFIX "kiln_pos_"

/* The hooks a variant may bind, with the parameter lists their wrappers forward (the
 * positions shifted) and the program to ask whether the variant binds them. */
enum { HOOK_SCORE, HOOK_SCORE_GRAD, HOOK_MASK, HOOK_KV_START, HOOK_Q_END, NHOOKS };
static const char *const g_hooks[NHOOKS] = {"score_mod", "score_mod_grad", "mask_mod", "kv_start", "q_end"};

KilnStatus rt_attn_pos_check(const char *api, const KilnAttentionParams *p)
{
    if (!p->positions) {
        if (p->q_pos_offset || p->kv_pos_offset)
            return rt_attn_error(api, KILN_ERR_USAGE, "q_pos_offset (%d) and kv_pos_offset (%d) are set but "
                                 "positions is 0 (set positions = 1 for whole-sequence positions)",
                                 p->q_pos_offset, p->kv_pos_offset);
        return KILN_OK;
    }
    if (p->q_pos_offset < 0 || p->kv_pos_offset < 0)
        return rt_attn_error(api, KILN_ERR_USAGE, "q_pos_offset (%d) and kv_pos_offset (%d) must be >= 0",
                             p->q_pos_offset, p->kv_pos_offset);
    int64_t lim = INT32_MAX - 2 * 256;   /* as the lengths: position + block must not wrap */
    if ((int64_t)p->q_pos_offset + p->seqlen_q > lim || (int64_t)p->kv_pos_offset + p->seqlen_k > lim)
        return rt_attn_error(api, KILN_ERR_USAGE, "q_pos_offset + seqlen_q and kv_pos_offset + seqlen_k must stay "
                             "below %lld (the kernel's 32-bit positions)", (long long)lim);
    if (rt_attn_varlen(p) && p->causal && p->q_pos_offset != p->kv_pos_offset)
        return rt_attn_error(api, KILN_ERR_UNSUPPORTED, "causal packed batches with unequal q_pos_offset (%d) and "
                             "kv_pos_offset (%d) (each sequence has its own diagonal)", p->q_pos_offset,
                             p->kv_pos_offset);
    return KILN_OK;
}

/* ---- which hooks the variant binds, memoised by its digest (a parse per call is
 * milliseconds, and a ring runs several calls per step) ---- */
#define BINDS_MEMO 16
static pthread_mutex_t g_binds_lock = PTHREAD_MUTEX_INITIALIZER;
static struct { char digest[65]; unsigned mask; } g_binds[BINDS_MEMO];
static int g_binds_next;

static unsigned bound_hooks(const RtAttnVarSrc *vs)
{
    pthread_mutex_lock(&g_binds_lock);
    for (int i = 0; i < BINDS_MEMO; i++)
        if (!strcmp(g_binds[i].digest, vs->digest)) {
            unsigned m = g_binds[i].mask;
            pthread_mutex_unlock(&g_binds_lock);
            return m;
        }
    pthread_mutex_unlock(&g_binds_lock);
    unsigned m = 0;
    for (int h = 0; h < NHOOKS; h++)
        if (rt_attn_var_binds(vs, "lang/lib/attention.tile", g_hooks[h])) m |= 1u << h;
    pthread_mutex_lock(&g_binds_lock);
    memcpy(g_binds[g_binds_next].digest, vs->digest, sizeof vs->digest);
    g_binds[g_binds_next].mask = m;
    g_binds_next = (g_binds_next + 1) % BINDS_MEMO;
    pthread_mutex_unlock(&g_binds_lock);
    return m;
}

/* The name the caller's hook `h` is called by in the wrappers: its -D target, else its own
 * helper renamed to kiln_pos_user_<hook>. */
static void hook_target(const KilnAttentionVariant *var, int h, char *buf, size_t n)
{
    for (int i = 0; var && i < var->ndefines; i++)
        if (!strcmp(var->defines[i].name, g_hooks[h])) {
            snprintf(buf, n, "%s", var->defines[i].value);
            return;
        }
    snprintf(buf, n, POS_PREFIX "user_%s", g_hooks[h]);
}

static bool ident_char(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'; }

/* The caller's text with every identifier `name` renamed to kiln_pos_user_<name>; false
 * when the text defines no `fn name` (the hook comes from an import). */
static bool rename_hook(StrBuf *out, const char *text, const char *name)
{
    size_t n = strlen(name);
    bool defined = false;
    for (const char *t = text; *t; ) {
        const char *hit = strstr(t, name);
        if (!hit) { sb_puts(out, t); break; }
        bool word = (hit == text || !ident_char(hit[-1])) && !ident_char(hit[n]);
        sb_printf(out, "%.*s%s%s", (int)(hit - t), t, word ? POS_PREFIX "user_" : "", name);
        if (word) {
            const char *b = hit;
            while (b > text && (b[-1] == ' ' || b[-1] == '\t')) b--;
            defined |= b - text >= 2 && !strncmp(b - 2, "fn", 2) && (b - 2 == text || !ident_char(b[-3]));
        }
        t = hit + n;
    }
    return defined;
}

/* Whether text defines `fn name` (a word of its own after the keyword). */
static bool defines_fn(const char *text, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = strstr(text, "fn"); p; p = strstr(p + 2, "fn")) {
        if (p > text && ident_char(p[-1])) continue;
        const char *q = p + 2;
        if (*q != ' ' && *q != '\t') continue;
        while (*q == ' ' || *q == '\t') q++;
        if (!strncmp(q, name, n) && !ident_char(q[n])) return true;
    }
    return false;
}

/* text with the line `import "M";` whose module (next to `path`: in the embedded library, else
 * on disk) defines `fn hook` replaced by that module's text, so the hook can be renamed (gemma2
 * imports softcap's score_mod and sliding_window's mask_mod); NULL when no import does. */
static char *inline_import(const char *text, const char *path, const char *hook)
{
    const char *slash = path ? strrchr(path, '/') : NULL;
    int dir = slash ? (int)(slash - path + 1) : 0;
    for (const char *line = text; *line; ) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        const char *t = line;
        while (*t == ' ' || *t == '\t') t++;
        char name[256];
        if (!strncmp(t, "import", 6) && sscanf(t + 6, " \"%255[^\"]\"", name) == 1) {
            size_t nl = strlen(name);
            char mod[600];
            snprintf(mod, sizeof mod, "%.*s%s%s", dir, path ? path : "", name,
                     nl > 5 && !strcmp(name + nl - 5, ".tile") ? "" : ".tile");
            const KilnLibFile *f = kiln_lib_file(mod);
            char *owned = f ? NULL : sup_read_file_text(mod, NULL);
            const char *mt = f ? f->text : owned;
            if (mt && defines_fn(mt, hook)) {
                StrBuf sb;
                sb_init(&sb);
                sb_printf(&sb, "%.*s%s\n%s", (int)(line - text), text, mt, end ? end + 1 : "");
                free(owned);
                char *out = sb_steal(&sb);
                sb_free(&sb);
                return out;
            }
            free(owned);
        }
        line += len + (end ? 1 : 0);
    }
    return NULL;
}

/* The generated lines: the params, then a wrapper named like each hook in `wrap`, calling the
 * caller's hook (where `bound`) with the positions shifted; mask_mod adds the causal term. */
static void wrappers(StrBuf *sb, const KilnAttentionVariant *var, unsigned wrap, unsigned bound, bool causal_mask)
{
    sb_puts(sb, "\n// whole-sequence positions (jit/attention_pos.c): the hooks see them\n"
                "param kiln_pos_q: i32;\nparam kiln_pos_kv: i32;\n");
    if (causal_mask) sb_puts(sb, "param kiln_pos_diag: i32;\n");
    char t[128];
    for (int h = HOOK_SCORE; h <= HOOK_SCORE_GRAD; h++)
        if (wrap & (1u << h)) {
            hook_target(var, h, t, sizeof t);
            sb_printf(sb, "fn %s(s, b, h, q_idx, kv_idx) { return %s(s, b, h, q_idx + kiln_pos_q, kv_idx + "
                          "kiln_pos_kv); }\n", g_hooks[h], t);
        }
    if (wrap & (1u << HOOK_MASK)) {
        sb_puts(sb, "fn mask_mod(b, h, q_idx, kv_idx) { return ");
        hook_target(var, HOOK_MASK, t, sizeof t);
        if (bound & (1u << HOOK_MASK))
            sb_printf(sb, "%s(b, h, q_idx + kiln_pos_q, kv_idx + kiln_pos_kv)%s", t, causal_mask ? " && " : "");
        sb_puts(sb, causal_mask ? "kv_idx <= q_idx + kiln_pos_diag; }\n" : "; }\n");
    }
    if (wrap & (1u << HOOK_KV_START)) {
        hook_target(var, HOOK_KV_START, t, sizeof t);
        sb_printf(sb, "fn kv_start(start_m, block_m, seqlen_q, seqlen_k) { return %s(start_m + kiln_pos_q, "
                      "block_m, seqlen_q, seqlen_k) - kiln_pos_kv; }\n", t);
    }
    if (wrap & (1u << HOOK_Q_END)) {   /* kv_start's mirror: key blocks in, query rows out */
        hook_target(var, HOOK_Q_END, t, sizeof t);
        sb_printf(sb, "fn q_end(start_n, block_n, seqlen_q, seqlen_k) { return %s(start_n + kiln_pos_kv, "
                      "block_n, seqlen_q, seqlen_k) - kiln_pos_q; }\n", t);
    }
}

void rt_attn_pos_free(RtAttnPos *pos)
{
    free(pos->source);
    free(pos->defines);
    free(pos->args);
    memset(pos, 0, sizeof *pos);
}

/* The derived variant's text: the caller's with its hooks renamed, then the wrappers. */
static KilnStatus derived_text(const char *api, const RtAttnVarSrc *vs, unsigned wrap, unsigned bound, bool causal,
                               char **out)
{
    const KilnAttentionVariant *var = vs->var;
    char *text = strdup(vs->var ? vs->text : "");
    for (int h = 0; text && h < NHOOKS; h++) {
        bool by_define = false;
        for (int i = 0; var && i < var->ndefines; i++) by_define |= !strcmp(var->defines[i].name, g_hooks[h]);
        if (!(wrap & bound & (1u << h)) || by_define) continue;
        if (!defines_fn(text, g_hooks[h])) {   /* from an import: its module's text, inlined */
            char *in = inline_import(text, vs->path, g_hooks[h]);
            if (in) free(text), text = in;
        }
        StrBuf sb;
        sb_init(&sb);
        bool defined = rename_hook(&sb, text, g_hooks[h]);
        free(text);
        text = sb_steal(&sb);
        sb_free(&sb);
        if (!defined) {
            free(text);
            return rt_attn_error(api, KILN_ERR_UNSUPPORTED, "positions: the variant's %s comes from a module "
                                 "it does not import directly; define it in the variant's own text (or bind it "
                                 "with -D %s=NAME)", g_hooks[h], g_hooks[h]);
        }
    }
    StrBuf sb;
    sb_init(&sb);
    if (text) sb_puts(&sb, text);
    free(text);
    wrappers(&sb, var, wrap, bound, causal);
    *out = sb_steal(&sb);
    sb_free(&sb);
    return *out ? KILN_OK : rt_attn_error(api, KILN_ERR_INTERNAL, "out of host memory");
}

KilnStatus rt_attn_pos_apply(const char *api, const KilnAttentionParams *p, KilnAttentionParams *out, RtAttnPos *pos)
{
    memset(pos, 0, sizeof *pos);
    *out = *p;
    out->positions = out->q_pos_offset = out->kv_pos_offset = 0;
    if (!p->positions) return KILN_OK;
    int qo = p->q_pos_offset, ko = p->kv_pos_offset;
    /* key j visible to row i iff ko + j <= qo + i, i.e. j <= i + diag */
    int64_t diag = (int64_t)qo - ko;
    bool causal = false;
    if (p->causal && !rt_attn_varlen(p) && diag != (int64_t)p->seqlen_k - p->seqlen_q) {
        out->causal = 0;
        if (diag < (int64_t)p->seqlen_k - 1) causal = true;           /* else every key is visible */
        if (diag < -(int64_t)p->seqlen_q) diag = -(int64_t)p->seqlen_q;   /* every key hidden: any such diag */
    }
    if (!causal && (!p->variant || (!qo && !ko))) return KILN_OK;   /* the hooks see what they would */
    const KilnAttentionVariant *var = p->variant;
    RtAttnVarSrc vs;
    KilnStatus st = rt_attn_var_open(api, var, &vs);
    if (st != KILN_OK) return st;
    unsigned bound = var ? bound_hooks(&vs) : 0;
    unsigned wrap = bound | (causal ? 1u << HOOK_MASK : 0);
    if (!wrap) {   /* a variant of runtime params only */
        rt_attn_var_close(&vs);
        return KILN_OK;
    }
    st = derived_text(api, &vs, wrap, bound, causal, &pos->source);
    const char *path = vs.var ? vs.path : NULL;   /* the embedded library's or the caller's: not vs's */
    rt_attn_var_close(&vs);
    if (st != KILN_OK) return st;
    int nd = var ? var->ndefines : 0, na = var ? var->nargs : 0;
    pos->defines = calloc((size_t)nd + 1, sizeof *pos->defines);
    pos->args = calloc((size_t)na + 3, sizeof *pos->args);
    if (!pos->defines || !pos->args) {
        rt_attn_pos_free(pos);
        return rt_attn_error(api, KILN_ERR_INTERNAL, "out of host memory");
    }
    /* the caller's defines, less the hooks the wrappers now are */
    for (int i = 0; i < nd; i++) {
        bool hook = false;
        for (int h = 0; h < NHOOKS; h++) hook |= (wrap & (1u << h)) && !strcmp(var->defines[i].name, g_hooks[h]);
        if (!hook) pos->defines[pos->ndefines++] = var->defines[i];
    }
    for (int i = 0; i < na; i++) pos->args[pos->nargs++] = var->args[i];
    pos->args[pos->nargs++] = (KilnVariantArg){POS_PREFIX "q", kiln_arg_i32(qo), 0};
    pos->args[pos->nargs++] = (KilnVariantArg){POS_PREFIX "kv", kiln_arg_i32(ko), 0};
    if (causal) pos->args[pos->nargs++] = (KilnVariantArg){POS_PREFIX "diag", kiln_arg_i32((int32_t)diag), 0};
    pos->var = (KilnAttentionVariant){.source = pos->source, .path = path, .defines = pos->defines,
                                      .ndefines = pos->ndefines, .args = pos->args, .nargs = pos->nargs,
                                      .include_dirs = var ? var->include_dirs : NULL,
                                      .ninclude_dirs = var ? var->ninclude_dirs : 0};
    out->variant = &pos->var;
    return KILN_OK;
}

bool rt_attn_pos_generated(const char *name) { return !strncmp(name, POS_PREFIX, strlen(POS_PREFIX)); }
