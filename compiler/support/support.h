/* support.h — arenas, growable vectors, string buffers and source locations.
 *
 * Every compilation owns one Arena; AST nodes, IR ops, strings and tables are
 * allocated from it and freed together with arena_free(). Nothing in the
 * compiler frees individual nodes, so there is nothing to leak.
 *
 * Failure policy (the libraries never exit, abort or print):
 *   - arena_alloc / ARENA_ARRAY fail on a size that overflows or on malloc
 *     failure: they record the internal error "out of host memory"
 *     (INTERNAL_ERROR below) and, inside a compile (kiln_compile runs under
 *     SUP_OOM_TRY), unwind to it, which reports the error; outside one they
 *     return NULL (the pipeline checks ice_message() after every stage; code
 *     that can continue checks for NULL).
 *     arena_strdup/strndup/printf and vec_push are NULL-safe (they skip the
 *     copy and return NULL / leave the vector unchanged).
 *   - a StrBuf that cannot grow drops the text, sets `failed` and keeps it set
 *     (sb_failed): callers that hand a buffer on check it once at the end
 *     instead of at every append.
 *   - sup_read_file_text refuses what it cannot read whole: see below.
 */
#ifndef KILN_SUPPORT_H
#define KILN_SUPPORT_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

/* A place in a source file. line and col are 1-based; line 0 means unknown. */
typedef struct SrcLoc {
    const char *file;
    int line, col;
} SrcLoc;

/* ---- arena ---- */
typedef struct ArenaChunk ArenaChunk;
typedef struct Arena {
    ArenaChunk *head;
    size_t used_total;
} Arena;

void  arena_init(Arena *a);
void  arena_free(Arena *a);
void *arena_alloc(Arena *a, size_t n);          /* zeroed, 16-byte aligned */
char *arena_strdup(Arena *a, const char *s);
char *arena_strndup(Arena *a, const char *s, size_t n);
char *arena_printf(Arena *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define ARENA_NEW(a, T) ((T *)arena_alloc((a), sizeof(T)))
void *arena_array(Arena *a, size_t elem_size, int64_t n); /* n x elem_size bytes; NULL on overflow */
#define ARENA_ARRAY(a, T, n) ((T *)arena_array((a), sizeof(T), (int64_t)(n)))

/* ---- growable pointer vector (arena backed) ---- */
typedef struct PtrVec {
    void **data;
    int len, cap;
} PtrVec;
void vec_push(Arena *a, PtrVec *v, void *p);

/* ---- string buffer (malloc backed: used for output that outlives a compile) ---- */
typedef struct StrBuf {
    char *data;
    size_t len, cap;
    bool failed;   /* an append was dropped (out of memory); stays set */
} StrBuf;
static inline bool sb_failed(const StrBuf *sb) { return sb->failed; }
void sb_init(StrBuf *sb);
void sb_free(StrBuf *sb);
void sb_putc(StrBuf *sb, char c);
void sb_puts(StrBuf *sb, const char *s);
void sb_putn(StrBuf *sb, const char *s, size_t n);
void sb_printf(StrBuf *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sb_vprintf(StrBuf *sb, const char *fmt, va_list ap);
char *sb_steal(StrBuf *sb);                     /* returns malloc'd string, resets sb */

/* ---- checked arithmetic ----
 * The one place sizes, counts and offsets computed from a program's numbers
 * (tile shapes, register counts, stages x bytes) are overflow-checked: false
 * when the exact result does not fit in 64 bits (then *r is unspecified).
 * Callers turn that into a located error instead of wrapping silently. */
static inline bool sup_mul_i64(int64_t a, int64_t b, int64_t *r) { return !__builtin_mul_overflow(a, b, r); }
static inline bool sup_add_i64(int64_t a, int64_t b, int64_t *r) { return !__builtin_add_overflow(a, b, r); }

/* ---- misc ---- */
bool   sup_is_pow2(int64_t x);
/* Milliseconds on the monotonic clock (phase timings: only differences mean anything). */
double sup_now_ms(void);
/* CPU time of the calling thread, ms: a compile phase's own cost, which on a
 * loaded machine (or beside other compiles on threads) its wall time is not. */
double sup_cpu_ms(void);
/* A phase's clock: both times at once, then the duration since, then the
 * stats line "time <phase>: W ms, cpu C ms" (kiln --time, kiln-bench-compile). */
typedef struct SupClock { double wall_ms, cpu_ms; } SupClock;
SupClock sup_clock(void);
SupClock sup_since(SupClock start);
void     sup_time_line(StrBuf *sb, const char *phase, SupClock d);
int    sup_ilog2(int64_t x);                        /* floor(log2(x)), x > 0 */
int    sup_edit_distance(const char *a, const char *b);
/* The largest source sup_read_file_text accepts (the kiln command's input limit,
 * docs/language.md "Limits"): generous for a tile program, small enough that
 * reading can never exhaust memory or run forever. */
#define KILN_MAX_SOURCE_BYTES ((size_t)16 << 20)
/* Reads a whole file: malloc'd and NUL-terminated, its length in *len_out.
 * Regular files and pipes only; NULL with errno set on failure: ENOENT,
 * EACCES... from open; EISDIR for a directory, ENODEV for a device or socket
 * (/dev/zero would never end); EFBIG above KILN_MAX_SOURCE_BYTES; ENOMEM
 * when memory runs out; EIO or read's errno on a read error. */
char  *sup_read_file_text(const char *path, size_t *len_out);

/* ---- out of memory inside a compile ----
 * Code past an arena allocation cannot check every pointer, so a compile runs
 * under a catch: when an arena allocation fails (after recording the internal
 * error "out of host memory"), control unwinds to the innermost catch of this
 * thread instead of running on with NULL. Everything the compile made is in
 * its arena, freed by the caller as usual (memory held by LLVM or StrBufs at
 * that moment is lost: the process is out of memory anyway). Use:
 *     SupOomCatch c;
 *     if (SUP_OOM_TRY(&c)) { ...compile... } else { ...out of memory... }
 *     sup_oom_pop(&c);
 * Locals changed inside the TRY and read after a failure must be volatile. */
typedef struct SupOomCatch {
    jmp_buf jb;
    struct SupOomCatch *prev;
} SupOomCatch;
#define SUP_OOM_TRY(c) (sup_oom_push(c), setjmp((c)->jb) == 0)
void sup_oom_push(SupOomCatch *c);
void sup_oom_pop(SupOomCatch *c);
/* From a catch's failure branch that only cleaned up: unwind on to the next
 * catch out (returns when there is none). */
void sup_oom_rethrow(void);
/* Fault injection for tests: the n-th arena allocation of this thread from
 * now on fails as if malloc had (n >= 1; 0 turns it off). */
void sup_arena_fail_after(int64_t n);

/* An internal error: a compiler bug, never a user mistake. Records where it
 * happened; the pipeline checks ice_pending() and reports. Never aborts. */
#define INTERNAL_ERROR(...) sup_internal_error_at(__FILE__, __LINE__, __VA_ARGS__)
void sup_internal_error_at(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
const char *ice_message(void);                  /* NULL when none */
void ice_clear(void);

#endif
