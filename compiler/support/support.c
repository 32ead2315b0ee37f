/* support.c — arenas, vectors, string buffers; see support.h. */
#include "support.h"

#include <errno.h>
#include <setjmp.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

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

/* The innermost SUP_OOM_TRY of this thread (compiles may run in threads). */
static _Thread_local SupOomCatch *oom_top;

void sup_oom_push(SupOomCatch *c)
{
    c->prev = oom_top;
    oom_top = c;
}

void sup_oom_pop(SupOomCatch *c)
{
    if (oom_top == c) oom_top = c->prev;
}

void sup_oom_rethrow(void)
{
    SupOomCatch *c = oom_top;
    if (c) {
        oom_top = c->prev;
        longjmp(c->jb, 1);
    }
}

/* The one place arena memory runs out: recorded as an internal error (see the
 * failure policy in support.h), never an exit; inside a compile, unwinds to
 * its catch (popped first, so a failure while reporting cannot loop). */
static void *arena_oom(size_t n)
{
    INTERNAL_ERROR("out of host memory (an arena allocation of %zu bytes failed)", n);
    sup_oom_rethrow();
    return NULL;
}

static _Thread_local int64_t fail_countdown; /* sup_arena_fail_after; 0: off */

void sup_arena_fail_after(int64_t n) { fail_countdown = n > 0 ? n : 0; }

void *arena_alloc(Arena *a, size_t n)
{
    if (fail_countdown > 0 && --fail_countdown == 0) return arena_oom(n);
    /* Rounding up must not wrap: a huge n would become a tiny chunk. */
    if (n > SIZE_MAX - sizeof(ArenaChunk) - 65536) return arena_oom(n);
    n = (n + 15) & ~(size_t)15;
    if (n == 0) n = 16;
    ArenaChunk *c = a->head;
    if (!c || c->used + n > c->size) {
        size_t sz = n > 65536 ? n : 65536;
        c = malloc(sizeof(ArenaChunk) + sz);
        if (!c) return arena_oom(n);
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

void *arena_array(Arena *a, size_t elem_size, int64_t n)
{
    size_t bytes;
    if (n < 0 || __builtin_mul_overflow(elem_size, (uint64_t)n, &bytes)) return arena_oom(SIZE_MAX);
    return arena_alloc(a, bytes);
}

char *arena_strndup(Arena *a, const char *s, size_t n)
{
    char *p = n < SIZE_MAX ? arena_alloc(a, n + 1) : arena_oom(n);
    if (!p) return NULL;
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
    char *p = n >= 0 ? arena_alloc(a, (size_t)n + 1) : NULL;
    if (p) vsnprintf(p, (size_t)n + 1, fmt, ap2);
    va_end(ap2);
    return p;
}

void vec_push(Arena *a, PtrVec *v, void *p)
{
    if (v->len == v->cap) {
        int nc = v->cap ? v->cap * 2 : 8;
        void **nd = v->cap < (1 << 29) ? ARENA_ARRAY(a, void *, nc) : arena_oom(SIZE_MAX);
        if (!nd) return; /* recorded; the vector keeps what it had */
        if (v->len) memcpy(nd, v->data, sizeof(void *) * (size_t)v->len);
        v->data = nd;
        v->cap = nc;
    }
    v->data[v->len++] = p;
}

void sb_init(StrBuf *sb) { sb->data = NULL; sb->len = sb->cap = 0; sb->failed = false; }
void sb_free(StrBuf *sb) { free(sb->data); sb_init(sb); }

/* Room for `extra` more bytes and the NUL; false (and sb->failed) when the
 * size would overflow or memory runs out. */
static bool sb_reserve(StrBuf *sb, size_t extra)
{
    if (sb->failed) return false;
    if (extra < sb->cap && sb->len + extra + 1 <= sb->cap) return true;
    char *nd = NULL;
    size_t nc = sb->cap ? sb->cap : 256;
    if (extra <= SIZE_MAX / 4 - sb->len) { /* then doubling cannot wrap */
        while (nc < sb->len + extra + 1) nc *= 2;
        nd = realloc(sb->data, nc);
    }
    if (!nd) {
        sb->failed = true;
        return false;
    }
    sb->data = nd;
    sb->cap = nc;
    return true;
}

void sb_putn(StrBuf *sb, const char *s, size_t n)
{
    if (!sb_reserve(sb, n)) return;
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
    if (n < 0) sb->failed = true;
    else if (n > 0 && sb_reserve(sb, (size_t)n)) {
        vsnprintf(sb->data + sb->len, (size_t)n + 1, fmt, ap2);
        sb->len += (size_t)n;
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

bool sup_is_pow2(int64_t x) { return x > 0 && (x & (x - 1)) == 0; }

double sup_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

double sup_cpu_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

SupClock sup_clock(void) { return (SupClock){sup_now_ms(), sup_cpu_ms()}; }

SupClock sup_since(SupClock start)
{
    SupClock now = sup_clock();
    return (SupClock){now.wall_ms - start.wall_ms, now.cpu_ms - start.cpu_ms};
}

void sup_time_line(StrBuf *sb, const char *phase, SupClock d)
{
    sb_printf(sb, "time %s: %.3f ms, cpu %.3f ms\n", phase, d.wall_ms, d.cpu_ms);
}

int sup_ilog2(int64_t x)
{
    int r = -1;
    while (x > 0) { x >>= 1; r++; }
    return r;
}

int sup_edit_distance(const char *a, const char *b)
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

/* Opens path for reading a source: regular files and pipes only. O_NONBLOCK
 * so that opening a FIFO nobody writes to does not wait forever; reads block
 * again afterwards (a pipe's writer is waited for, as cat would). */
static int open_source(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return -1;
    struct stat st;
    int err = 0;
    if (fstat(fd, &st) != 0) err = errno;
    else if (S_ISDIR(st.st_mode)) err = EISDIR;
    else if (!S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode)) err = ENODEV;
    else if (S_ISREG(st.st_mode) && (uint64_t)st.st_size > KILN_MAX_SOURCE_BYTES) err = EFBIG;
    else {
        int fl = fcntl(fd, F_GETFL);
        if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) err = errno;
    }
    if (err) {
        close(fd);
        errno = err;
        return -1;
    }
    return fd;
}

char *sup_read_file_text(const char *path, size_t *len_out)
{
    int fd = open_source(path);
    if (fd < 0) return NULL;
    size_t len = 0, cap = 0;
    char *buf = NULL;
    int err = 0;
    for (;;) {
        if (len == cap) { /* never past the limit: one byte over it is enough to refuse */
            size_t nc = cap ? cap * 2 : 65536;
            if (nc > KILN_MAX_SOURCE_BYTES + 2) nc = KILN_MAX_SOURCE_BYTES + 2;
            if (nc == cap) { err = EFBIG; break; }
            char *nb = realloc(buf, nc);
            if (!nb) { err = ENOMEM; break; }
            buf = nb;
            cap = nc;
        }
        ssize_t r = read(fd, buf + len, cap - len);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) { err = errno ? errno : EIO; break; }
        if (r == 0) break;
        len += (size_t)r;
        if (len > KILN_MAX_SOURCE_BYTES) { err = EFBIG; break; }
    }
    close(fd);
    if (err) {
        free(buf);
        errno = err;
        return NULL;
    }
    if (len == cap) { /* room for the NUL */
        char *nb = realloc(buf, len + 1);
        if (!nb) { free(buf); errno = ENOMEM; return NULL; }
        buf = nb;
    }
    if (!buf && !(buf = malloc(1))) { errno = ENOMEM; return NULL; }
    buf[len] = 0;
    if (len_out) *len_out = len;
    return buf;
}

/* One pending internal error per thread; the pipeline turns it into a diagnostic. */
static _Thread_local char ice_buf[512];
static _Thread_local bool ice_set;

void sup_internal_error_at(const char *file, int line, const char *fmt, ...)
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
