/* attention_variant.c — the KilnAttentionVariant of the attention calls.
 *
 * What: the forward, backward and decode entry points take a variant (a .tile file
 * of hooks and runtime `param`s, its defines and runtime arguments). Here: opening
 * one (validate, find its text, digest it for the in-process cache key), the root
 * text a program is compiled from (the variant's text, then `import "<program>";`,
 * so the variant's own line numbers are kept and its imports of the same program
 * load it once), whether it binds a hook, and its arguments bound by name to the
 * kernel parameters the programs themselves do not know.
 *
 * Invariants: nothing here touches a device; argument checks name the param and
 * the kinds; every argument must be used by some kernel of the call.
 *
 * Example: var = {.path = "lang/lib/variants/alibi.tile", .args = {{"alibi_slopes",
 * kiln_arg_ptr(slopes)}}}: the forward compiles "<alibi.tile's text>\nimport
 * \"attention_fwd\";\n" with -D HEAD_DIM=... and binds the kernel's last parameter,
 * alibi_slopes, to `slopes`.
 */
#include "jit_internal.h"
#include "compiler/driver/driver.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define VAR_DEFAULT_PATH "<variant>"

static void digest_field(RtSha256 *s, const char *tag, const char *v)
{
    rt_sha256_update(s, tag, strlen(tag) + 1);
    if (v) rt_sha256_update(s, v, strlen(v));
    rt_sha256_update(s, "", 1);
}

KilnStatus rt_attn_var_check(const char *api, const KilnAttentionVariant *var)
{
    if (!var) return KILN_OK;
    if (!var->source && !var->path)
        return rt_attn_error(api, KILN_ERR_USAGE, "variant: neither source nor path is set");
    if (var->ndefines < 0 || (var->ndefines && !var->defines))
        return rt_attn_error(api, KILN_ERR_USAGE, "variant: ndefines %d without defines", var->ndefines);
    if (var->nargs < 0 || (var->nargs && !var->args))
        return rt_attn_error(api, KILN_ERR_USAGE, "variant: nargs %d without args", var->nargs);
    if (var->ninclude_dirs < 0 || (var->ninclude_dirs && !var->include_dirs))
        return rt_attn_error(api, KILN_ERR_USAGE, "variant: ninclude_dirs %d without include_dirs",
                             var->ninclude_dirs);
    for (int i = 0; i < var->ndefines; i++)
        if (!var->defines[i].name || !var->defines[i].value)
            return rt_attn_error(api, KILN_ERR_USAGE, "variant: defines[%d] has a NULL name or value", i);
    for (int i = 0; i < var->nargs; i++) {
        if (!var->args[i].name) return rt_attn_error(api, KILN_ERR_USAGE, "variant: args[%d] has no name", i);
        for (int j = 0; j < i; j++)
            if (!strcmp(var->args[i].name, var->args[j].name))
                return rt_attn_error(api, KILN_ERR_USAGE, "variant: args[%d] and args[%d] both give '%s'", j, i,
                                     var->args[i].name);
    }
    return KILN_OK;
}

/* ---- the imports' part of the key, memoised ----
 * kiln_import_digest parses the variant and every module it imports (milliseconds for a
 * variant that imports the attention programs), and every attention call opens its
 * variant: parsing per call made a training step with a variant 6x slower on the H200.
 * An entry maps the variant's own key (text, path, include dirs) to the imports' digest
 * text and is used while every module it names as read from disk has the size and
 * modification time it had (an edited module makes the entry stale; the embedded
 * library's modules are part of the build). */
#define IMPORT_MEMO 32

typedef struct ImportMemo {
    char key[65];
    char *imports;          /* kiln_import_digest's text (NULL: none from disk) */
    int nfiles;
    char **files;           /* the modules it read from disk */
    struct stat *st;        /* their size and mtime then */
} ImportMemo;

static pthread_mutex_t g_memo_lock = PTHREAD_MUTEX_INITIALIZER;
static ImportMemo g_memo[IMPORT_MEMO];
static int g_memo_next;

static bool same_file(const char *path, const struct stat *then)
{
    struct stat now;
    return stat(path, &now) == 0 && now.st_size == then->st_size && now.st_mtim.tv_sec == then->st_mtim.tv_sec &&
           now.st_mtim.tv_nsec == then->st_mtim.tv_nsec && now.st_ino == then->st_ino;
}

/* The modules named in a digest text ("\n// module ID LEN\nTEXT" each), stat'ed now. */
static void memo_files(ImportMemo *m)
{
    const char *tag = "\n// module ";
    for (const char *p = m->imports; p && (p = strstr(p, tag)); ) {
        p += strlen(tag);
        const char *nl = strchr(p, '\n'), *sp = nl ? nl : p;
        while (sp > p && sp[-1] != ' ') sp--;
        if (!nl || sp <= p) break;
        size_t len = strtoull(sp, NULL, 10);
        char **f = realloc(m->files, sizeof *f * (size_t)(m->nfiles + 1));
        struct stat *st = realloc(m->st, sizeof *st * (size_t)(m->nfiles + 1));
        if (f) m->files = f;
        if (st) m->st = st;
        if (!f || !st || !(m->files[m->nfiles] = strndup(p, (size_t)(sp - 1 - p)))) break;
        if (stat(m->files[m->nfiles], &m->st[m->nfiles]) != 0) memset(&m->st[m->nfiles], 0, sizeof *m->st);
        m->nfiles++;
        p = nl + 1 + len;
        if (p > m->imports + strlen(m->imports)) break;
    }
}

static void memo_clear(ImportMemo *m)
{
    free(m->imports);
    for (int i = 0; i < m->nfiles; i++) free(m->files[i]);
    free(m->files);
    free(m->st);
    memset(m, 0, sizeof *m);
}

/* The imports' digest text of the variant (malloc'd, NULL for none), from the memo when fresh. */
static char *imports_digest(const RtAttnVarSrc *vs, const KilnAttentionVariant *var)
{
    RtSha256 s;
    rt_sha256_init(&s);
    digest_field(&s, "text", vs->text);
    digest_field(&s, "path", vs->path);
    for (int i = 0; i < var->ninclude_dirs; i++) digest_field(&s, "inc", var->include_dirs[i]);
    uint8_t d[32];
    rt_sha256_final(&s, d);
    char key[65];
    for (int i = 0; i < 32; i++) snprintf(key + 2 * i, 3, "%02x", d[i]);
    pthread_mutex_lock(&g_memo_lock);
    for (int i = 0; i < IMPORT_MEMO; i++) {
        ImportMemo *m = &g_memo[i];
        if (strcmp(m->key, key)) continue;
        bool fresh = true;
        for (int j = 0; j < m->nfiles && fresh; j++) fresh = same_file(m->files[j], &m->st[j]);
        char *out = fresh && m->imports ? strdup(m->imports) : NULL;
        pthread_mutex_unlock(&g_memo_lock);
        if (fresh) return out;
        pthread_mutex_lock(&g_memo_lock);
        memo_clear(m);
        break;
    }
    pthread_mutex_unlock(&g_memo_lock);
    KilnCompileOptions io = {.include_dirs = var->include_dirs, .ninclude_dirs = var->ninclude_dirs};
    char *imports = kiln_import_digest(vs->path, vs->text, &io);
    pthread_mutex_lock(&g_memo_lock);
    ImportMemo *m = &g_memo[g_memo_next];
    g_memo_next = (g_memo_next + 1) % IMPORT_MEMO;
    memo_clear(m);
    memcpy(m->key, key, sizeof key);
    m->imports = imports ? strdup(imports) : NULL;
    memo_files(m);
    pthread_mutex_unlock(&g_memo_lock);
    return imports;
}

KilnStatus rt_attn_var_open(const char *api, const KilnAttentionVariant *var, RtAttnVarSrc *vs)
{
    memset(vs, 0, sizeof *vs);
    if (!var) return KILN_OK;
    KilnStatus st = rt_attn_var_check(api, var);
    if (st != KILN_OK) return st;
    vs->var = var;
    vs->path = var->path ? var->path : VAR_DEFAULT_PATH;
    vs->text = var->source;
    if (!vs->text) {
        const KilnLibFile *f = kiln_lib_file(var->path);
        if (f) vs->text = f->text;
        else if (!(vs->text = vs->owned = sup_read_file_text(var->path, NULL)))
            return rt_attn_error(api, KILN_ERR_IO, "variant: cannot read '%s' (not a file of the embedded library "
                                 "either)", var->path);
    }
    RtSha256 s;
    rt_sha256_init(&s);
    digest_field(&s, "text", vs->text);
    digest_field(&s, "path", vs->path);
    for (int i = 0; i < var->ndefines; i++) {
        digest_field(&s, "dname", var->defines[i].name);
        digest_field(&s, "dvalue", var->defines[i].value);
    }
    for (int i = 0; i < var->ninclude_dirs; i++) digest_field(&s, "inc", var->include_dirs[i]);
    /* The modules it imports from disk, their paths and texts: the in-process cache keys
     * on this digest, so an edited imported module must change it (the embedded library's
     * modules are part of the build). */
    char *imports = imports_digest(vs, var);
    digest_field(&s, "imports", imports);
    free(imports);
    uint8_t d[32];
    rt_sha256_final(&s, d);
    for (int i = 0; i < 32; i++) snprintf(vs->digest + 2 * i, 3, "%02x", d[i]);
    return KILN_OK;
}

void rt_attn_var_close(RtAttnVarSrc *vs)
{
    free(vs->owned);
    memset(vs, 0, sizeof *vs);
}

char *rt_attn_var_root(const RtAttnVarSrc *vs, const char *program)
{
    const char *base = strrchr(program, '/');
    base = base ? base + 1 : program;
    size_t n = strlen(vs->text) + strlen(base) + 32;
    char *t = malloc(n);
    if (t) snprintf(t, n, "%s\nimport \"%s\";\n", vs->text, base);
    return t;
}

bool rt_attn_var_binds(const RtAttnVarSrc *vs, const char *program, const char *name)
{
    for (int i = 0; i < vs->var->ndefines; i++)
        if (!strcmp(vs->var->defines[i].name, name)) return true;
    char *root = rt_attn_var_root(vs, program);
    if (!root) return false;
    KilnCompileOptions o = {.include_dirs = vs->var->include_dirs, .ninclude_dirs = vs->var->ninclude_dirs};
    Arena arena;
    arena_init(&arena);
    Diag d;
    diag_init(&d, vs->path, root);
    AstFile *f = kiln_modules_load(&arena, &d, root, &o, NULL);
    bool found = false;
    for (int i = 0; f && i < f->ndecls && !found; i++)
        found = f->decls[i]->kind == AST_FN && !strcmp(f->decls[i]->name, name);
    diag_free(&d);
    arena_free(&arena);
    free(root);
    return found;
}

static bool is_int_kind(KilnParamKind k)
{
    return k != KILN_PARAM_PTR && k != KILN_PARAM_F16 && k != KILN_PARAM_BF16 && k != KILN_PARAM_F32 &&
           k != KILN_PARAM_F64 && k != KILN_PARAM_I1;
}

KilnStatus rt_attn_var_arg(const char *api, const KilnAttentionVariant *var, const KilnParam *prm, KilnArg *a)
{
    const KilnVariantArg *va = NULL;
    for (int i = 0; var && i < var->nargs && !va; i++)
        if (!strcmp(var->args[i].name, prm->name)) va = &var->args[i];
    if (!var)
        return rt_attn_error(api, KILN_ERR_INTERNAL, "the program's parameter %s (%s) is unknown to %s", prm->name,
                             rt_param_kind_name(prm->kind), api);
    if (!va)
        return rt_attn_error(api, KILN_ERR_USAGE, "the variant's param '%s' (%s) has no argument: add {\"%s\", ...} "
                             "to KilnAttentionVariant.args", prm->name, rt_param_kind_name(prm->kind), prm->name);
    KilnParamKind k = va->value.kind;
    bool ok = k == prm->kind;
    if (prm->kind == KILN_PARAM_PTR && k == KILN_PARAM_PTR && !va->value.v.ptr)
        return rt_attn_error(api, KILN_ERR_USAGE, "the variant's argument '%s' is a null pointer", prm->name);
    if (!ok && is_int_kind(prm->kind) && is_int_kind(k)) {
        bool u = k == KILN_PARAM_U8 || k == KILN_PARAM_U16 || k == KILN_PARAM_U32 || k == KILN_PARAM_U64;
        if (u && va->value.v.u > INT64_MAX)
            return rt_attn_error(api, KILN_ERR_USAGE, "the variant's argument '%s' does not fit its %s param",
                                 prm->name, rt_param_kind_name(prm->kind));
        return rt_attn_int_arg(api, prm, u ? (int64_t)va->value.v.u : va->value.v.i, a);
    }
    if (!ok && prm->kind == KILN_PARAM_F32 && k == KILN_PARAM_F64) {
        *a = kiln_arg_f32((float)va->value.v.f64);
        return KILN_OK;
    }
    if (!ok && prm->kind == KILN_PARAM_F64 && k == KILN_PARAM_F32) {
        *a = kiln_arg_f64(va->value.v.f32);
        return KILN_OK;
    }
    if (!ok)
        return rt_attn_error(api, KILN_ERR_USAGE, "the variant's param '%s' is %s, its argument is %s", prm->name,
                             rt_param_kind_name(prm->kind), rt_param_kind_name(k));
    *a = va->value;
    return KILN_OK;
}

/* The names the variant's text (and what it imports) declares with `param`, as one
 * "\n"-separated list (malloc'd; NULL when it cannot be parsed: the compile reports why). */
/* declared_params' answers by the variant's digest (its text, path, defines, include dirs
 * and imports: rt_attn_var_open), so a call does not parse the variant again. */
#define PARAMS_MEMO 32
static struct { char digest[65]; char *names; } g_params_memo[PARAMS_MEMO];
static int g_params_next;

static char *declared_params(const KilnAttentionVariant *var)
{
    RtAttnVarSrc vs;
    if (rt_attn_var_open("", var, &vs) != KILN_OK) return NULL;
    pthread_mutex_lock(&g_memo_lock);
    for (int i = 0; i < PARAMS_MEMO; i++)
        if (g_params_memo[i].names && !strcmp(g_params_memo[i].digest, vs.digest)) {
            char *hit = strdup(g_params_memo[i].names);
            pthread_mutex_unlock(&g_memo_lock);
            rt_attn_var_close(&vs);
            return hit;
        }
    pthread_mutex_unlock(&g_memo_lock);
    KilnCompileOptions o = {.include_dirs = var->include_dirs, .ninclude_dirs = var->ninclude_dirs};
    Arena arena;
    arena_init(&arena);
    Diag d;
    diag_init(&d, vs.path, vs.text);
    AstFile *f = kiln_modules_load(&arena, &d, vs.text, &o, NULL);
    StrBuf names;
    sb_init(&names);
    sb_puts(&names, "\n");
    for (int i = 0; f && i < f->ndecls; i++)
        if (f->decls[i]->kind == AST_PARAM) sb_printf(&names, "%s\n", f->decls[i]->name);
    char *out = f ? sb_steal(&names) : NULL;
    sb_free(&names);
    diag_free(&d);
    arena_free(&arena);
    if (out) {
        pthread_mutex_lock(&g_memo_lock);
        free(g_params_memo[g_params_next].names);
        memcpy(g_params_memo[g_params_next].digest, vs.digest, sizeof vs.digest);
        g_params_memo[g_params_next].names = strdup(out);
        g_params_next = (g_params_next + 1) % PARAMS_MEMO;
        pthread_mutex_unlock(&g_memo_lock);
    }
    rt_attn_var_close(&vs);
    return out;
}

static bool listed(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = strstr(list, name); p; p = strstr(p + 1, name))
        if (p[-1] == '\n' && p[n] == '\n') return true;
    return false;
}

KilnStatus rt_attn_var_check_used(const char *api, const KilnAttentionVariant *var, const KilnKernelInfo *const *infos,
                                  int n)
{
    if (!var || var->nargs == 0) return KILN_OK;
    char *decl = declared_params(var);
    KilnStatus st = KILN_OK;
    for (int i = 0; i < var->nargs && st == KILN_OK; i++) {
        /* the offsets' arguments (attention_pos.c): a hook that ignores kv_idx never reads one */
        if (rt_attn_pos_generated(var->args[i].name)) continue;
        bool used = false;
        for (int k = 0; k < n && !used; k++)
            for (int j = 0; infos[k] && j < infos[k]->nparams && !used; j++)
                used = !strcmp(infos[k]->params[j].name, var->args[i].name);
        /* A kernel's own parameter (sm_scale, Q, stride_qm...) is the call's to set: sema
         * refuses a `param` named like one, so a match the variant does not declare is
         * an argument that would be silently dropped. */
        if (used && decl && !listed(decl, var->args[i].name))
            st = rt_attn_error(api, KILN_ERR_USAGE, "the variant's argument '%s' names a parameter of the program "
                               "itself, not a `param` of the variant (the call sets it from its own fields)",
                               var->args[i].name);
        else if (!used)
            st = rt_attn_error(api, KILN_ERR_USAGE, "the variant's argument '%s' names no param its hooks read in "
                               "this call's kernels (a misspelt name, or a param the hooks never use)",
                               var->args[i].name);
    }
    free(decl);
    return st;
}

KilnStatus rt_attn_var_check_bytes(const char *api, const KilnAttentionVariant *var)
{
    KilnStatus st = rt_attn_var_check(api, var);   /* the arrays first: nargs without args */
    if (st != KILN_OK) return st;
    for (int i = 0; var && i < var->nargs; i++)
        if (var->args[i].value.kind == KILN_PARAM_PTR && !var->args[i].bytes)
            return rt_attn_error(api, KILN_ERR_USAGE, "the variant's argument '%s' is a pointer without its bytes "
                                 "(KilnVariantArg.bytes)", var->args[i].name);
    return KILN_OK;
}

KilnHostArg rt_attn_var_buffer(const KilnAttentionVariant *var, const char *name, KilnDevPtr ptr)
{
    for (int i = 0; var && i < var->nargs; i++)
        if (!strcmp(name, var->args[i].name))
            return kiln_host_buf((void *)(uintptr_t)ptr, var->args[i].bytes, KILN_HOST_IN);
    return kiln_host_buf((void *)(uintptr_t)ptr, 0, KILN_HOST_IN);
}
