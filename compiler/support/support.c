/* support.c — arenas, vectors, string buffers; see support.h. */
#include "support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ArenaChunk {
    ArenaChunk *next;
    size_t size, used;
    _Alignas(16) unsigned char mem[];
};

void arena_init(Arena *a) { a->head = NULL; a->used_total = 0; }

void arena_free(Arena *a)
{
    ArenaChunk *c = a->head;
    while (c) {
        ArenaChunk *n = c->next;
        free(c);
        c = n;
    }
    a->head = NULL;
    a->used_total = 0;
}

void *arena_alloc(Arena *a, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    if (n == 0) n = 16;
    ArenaChunk *c = a->head;
    if (!c || c->used + n > c->size) {
        size_t sz = n > 65536 ? n : 65536;
        c = malloc(sizeof(ArenaChunk) + sz);
        if (!c) return NULL; /* callers on small data: treated as fatal upstream */
        c->size = sz;
        c->used = 0;
        c->next = a->head;
        a->head = c;
    }
    void *p = c->mem + c->used;
    c->used += n;
    a->used_total += n;
    memset(p, 0, n);
    return p;
}

char *arena_strndup(Arena *a, const char *s, size_t n)
{
    char *p = arena_alloc(a, n + 1);
    memcpy(p, s, n);
    p[n] = 0;
    return p;
}

char *arena_strdup(Arena *a, const char *s) { return arena_strndup(a, s, strlen(s)); }

char *arena_printf(Arena *a, const char *fmt, ...)
{
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *p = arena_alloc(a, (size_t)n + 1);
    vsnprintf(p, (size_t)n + 1, fmt, ap2);
    va_end(ap2);
    return p;
}

void vec_push(Arena *a, PtrVec *v, void *p)
{
    if (v->len == v->cap) {
        int nc = v->cap ? v->cap * 2 : 8;
        void **nd = ARENA_ARRAY(a, void *, nc);
        if (v->len) memcpy(nd, v->data, sizeof(void *) * (size_t)v->len);
        v->data = nd;
        v->cap = nc;
    }
    v->data[v->len++] = p;
}

void sb_init(StrBuf *sb) { sb->data = NULL; sb->len = sb->cap = 0; }
void sb_free(StrBuf *sb) { free(sb->data); sb_init(sb); }

static void sb_reserve(StrBuf *sb, size_t extra)
{
    if (sb->len + extra + 1 <= sb->cap) return;
    size_t nc = sb->cap ? sb->cap : 256;
    while (nc < sb->len + extra + 1) nc *= 2;
    char *nd = realloc(sb->data, nc);
    if (!nd) return;
    sb->data = nd;
    sb->cap = nc;
}

void sb_putn(StrBuf *sb, const char *s, size_t n)
{
    sb_reserve(sb, n);
    if (sb->len + n + 1 > sb->cap) return;
    memcpy(sb->data + sb->len, s, n);
    sb->len += n;
    sb->data[sb->len] = 0;
}
void sb_putc(StrBuf *sb, char c) { sb_putn(sb, &c, 1); }
void sb_puts(StrBuf *sb, const char *s) { sb_putn(sb, s, strlen(s)); }

void sb_vprintf(StrBuf *sb, const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    if (n > 0) {
        sb_reserve(sb, (size_t)n);
        if (sb->len + (size_t)n + 1 <= sb->cap) {
            vsnprintf(sb->data + sb->len, (size_t)n + 1, fmt, ap2);
            sb->len += (size_t)n;
        }
    }
    va_end(ap2);
}

void sb_printf(StrBuf *sb, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sb_vprintf(sb, fmt, ap);
    va_end(ap);
}

char *sb_steal(StrBuf *sb)
{
    char *d = sb->data;
    if (!d) {
        d = malloc(1);
        if (d) d[0] = 0;
    }
    sb_init(sb);
    return d;
}

bool is_pow2(int64_t x) { return x > 0 && (x & (x - 1)) == 0; }

int ilog2(int64_t x)
{
    int r = -1;
    while (x > 0) { x >>= 1; r++; }
    return r;
}

int edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 64 || lb > 64) return 1000;
    int d[65][65];
    for (size_t i = 0; i <= la; i++) d[i][0] = (int)i;
    for (size_t j = 0; j <= lb; j++) d[0][j] = (int)j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            int c = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < c) c = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < c) c = d[i][j - 1] + 1;
            d[i][j] = c;
        }
    return d[la][lb];
}

char *read_file_text(const char *path, size_t *len_out)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    StrBuf sb;
    sb_init(&sb);
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) sb_putn(&sb, buf, n);
    int err = ferror(f);
    fclose(f);
    if (err) { sb_free(&sb); return NULL; }
    if (len_out) *len_out = sb.len;
    return sb_steal(&sb);
}

/* One pending internal error per thread; the pipeline turns it into a diagnostic. */
static _Thread_local char ice_buf[512];
static _Thread_local bool ice_set;

void internal_error_at(const char *file, int line, const char *fmt, ...)
{
    if (ice_set) return; /* keep the first: later ones are usually consequences */
    int n = snprintf(ice_buf, sizeof ice_buf, "internal error at %s:%d: ", file, line);
    va_list ap;
    va_start(ap, fmt);
    if (n > 0 && (size_t)n < sizeof ice_buf) vsnprintf(ice_buf + n, sizeof ice_buf - (size_t)n, fmt, ap);
    va_end(ap);
    ice_set = true;
}

const char *ice_message(void) { return ice_set ? ice_buf : NULL; }
void ice_clear(void) { ice_set = false; ice_buf[0] = 0; }
