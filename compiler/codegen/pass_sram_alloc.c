/* pass_sram_alloc.c — SRAM allocation: one offset in dynamic shared memory for
 * every shared buffer of the kernel.
 *
 * Buffers. Every user of shared memory is a buffer with a live interval over
 * a linear numbering of the function's ops (pre-order; a `for`/`if` op takes
 * one position before its regions and one after them):
 *   - scratch of one op (layout conversions, dot operand staging through
 *     swizzled SRAM, cross-warp reductions, reshapes, shared atomic
 *     results): live at that op only, [p, p];
 *   - pipeline stage buffers (pass_pipeline.c): written by the prologue just
 *     before the loop and read/written by every iteration, so live over the
 *     whole loop: [for_start - 1, for_end]. A value defined outside a loop
 *     and used inside it likewise extends to the end of the loop.
 *
 * Placement (the idea of Triton's Allocation.cpp, written anew): buffers
 * sorted by size, largest first; each goes at the lowest offset (aligned)
 * where it overlaps in bytes no already placed buffer whose interval overlaps
 * its own. Because each placement is checked against every placed buffer
 * live at the same time, the result has no interference by construction;
 * cg_sram_check verifies that (the tests on random intervals, and the pass
 * itself as an internal-error guard). Buffers never live together share
 * bytes: a conversion before a loop and the loop's stages reuse one region.
 *
 * Example (positions, bytes):  A [0,9] 32K   B [2,2] 8K   C [11,11] 16K
 *   A -> 0;  C -> 0 (not live with A);  B -> 32K (live with A).  Total 40K.
 *
 * Limits: a kernel whose total exceeds the architecture's dynamic SRAM per CTA
 * (cg_sram_limit: 163 KB on sm_80, 99 KB on sm_86/89, 227 KB on sm_90) is a
 * compile error naming the buffers.
 */
#include "cg_tc.h"

#include <stdlib.h>
#include <string.h>

static int align_up(int x, int a) { return (x + a - 1) & ~(a - 1); }

static bool live_together(const CgSmemBuf *a, const CgSmemBuf *b)
{
    return a->start <= b->end && b->start <= a->end;
}

static bool bytes_overlap(const CgSmemBuf *a, const CgSmemBuf *b)
{
    return a->offset < b->offset + b->bytes && b->offset < a->offset + a->bytes;
}

/* Larger first; ties by earlier start. Insertion sort: stable (equal
 * buffers keep the caller's order, so placements are reproducible) and the
 * lists are short (a few buffers per kernel). */
static bool goes_before(const CgSmemBuf *a, const CgSmemBuf *b)
{
    if (a->bytes != b->bytes) return a->bytes > b->bytes;
    return a->start < b->start;
}

static void sort_bufs(CgSmemBuf **v, int n, bool by_size)
{
    for (int i = 1; i < n; i++) {
        CgSmemBuf *x = v[i];
        int j = i;
        while (j > 0 && (by_size ? goes_before(x, v[j - 1]) : x->offset < v[j - 1]->offset)) {
            v[j] = v[j - 1];
            j--;
        }
        v[j] = x;
    }
}

int cg_sram_place(CgSmemBuf **bufs, int n)
{
    if (n <= 0) return 0;
    CgSmemBuf **order = malloc(sizeof *order * (size_t)n);
    CgSmemBuf **near = malloc(sizeof *near * (size_t)n);
    if (!order || !near) {
        free(order);
        free(near);
        INTERNAL_ERROR("codegen: out of memory placing %d SRAM buffers", n);
        return 0;
    }
    memcpy(order, bufs, sizeof *order * (size_t)n);
    sort_bufs(order, n, true);
    int total = 0;
    for (int i = 0; i < n; i++) {
        CgSmemBuf *b = order[i];
        int align = b->align > 0 ? b->align : 16;
        int nn = 0;
        for (int j = 0; j < i; j++)
            if (live_together(order[j], b)) near[nn++] = order[j];
        sort_bufs(near, nn, false);
        /* First fit: walk the placed neighbours by address; the candidate only
         * moves up, past each neighbour it would overlap. */
        int cand = 0;
        for (int j = 0; j < nn; j++) {
            const CgSmemBuf *p = near[j];
            if (cand + b->bytes <= p->offset) break;
            if (p->offset + p->bytes > cand) cand = align_up(p->offset + p->bytes, align);
        }
        b->offset = cand;
        if (cand + b->bytes > total) total = cand + b->bytes;
    }
    free(order);
    free(near);
    return align_up(total, 16);
}

bool cg_sram_check(CgSmemBuf *const *bufs, int n, StrBuf *why)
{
    for (int i = 0; i < n; i++) {
        const CgSmemBuf *a = bufs[i];
        if (a->align > 0 && a->offset % a->align) {
            if (why) sb_printf(why, "buffer %d (%s) at %d is not %d-byte aligned", i, a->what, a->offset, a->align);
            return false;
        }
        for (int j = i + 1; j < n; j++) {
            const CgSmemBuf *b = bufs[j];
            if (live_together(a, b) && bytes_overlap(a, b)) {
                if (why)
                    sb_printf(why, "buffers %d (%s, [%d,%d], bytes %d..%d) and %d (%s, [%d,%d], bytes %d..%d) interfere",
                              i, a->what, a->start, a->end, a->offset, a->offset + a->bytes, j, b->what,
                              b->start, b->end, b->offset, b->offset + b->bytes);
                return false;
            }
        }
    }
    return true;
}

int cg_sram_limit(int sm)
{
    if (sm >= 90) return 227 * 1024;
    if (sm == 86 || sm == 89) return 99 * 1024;
    if (sm >= 80) return 163 * 1024;
    return 96 * 1024;
}
