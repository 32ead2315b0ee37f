/* schedule.h — the schedule options, one table for every layer.
 *
 * What: SCHED_OPTIONS is the one list of schedule options (KilnSchedule's fields,
 * kiln_compile.h). Each row gives the option's field, its `kiln compile` flag, its
 * field in the on-disk cache key, the GPU pass that implements it (a name of
 * compiler/gpuir/pass_table.c, several separated by ", "), the options it implies,
 * the options it cannot be combined with (and why), and one line of help. The CLI
 * parser and help (apps/kiln), the cache keys (jit/cache.c, the attention variants'
 * texts), --stats and the GPU pass context all loop over it; sched_resolve applies its
 * rules. Adding an option: a row here, its field in KilnSchedule, its pass reading
 * ctx->sched.FIELD, its tests (docs/passes.md, "Schedule options").
 *
 * Invariants: the rows are KilnSchedule's fields in declaration order, all of them
 * (schedule.c checks the size and each offset at compile time); implications and
 * conflicts are symmetric where they must be (a conflict is listed on both rows:
 * tests/driver/test_schedule.c checks it); a resolved schedule (sched_resolve's
 * output) has every field 0 or 1, its implications on and no conflict.
 *
 * Example: KilnSchedule asked = {.tma = 1}, out; sched_resolve(&asked, NULL, &out, why,
 * sizeof why) gives out.tma = out.mbarrier = 1; {.tma = 1, .warp_specialize = 1} is
 * refused: "the schedule options tma (--tma) and warp_specialize (--warp-specialize)
 * cannot be combined: ...".
 */
#ifndef KILN_SCHEDULE_H
#define KILN_SCHEDULE_H

#include <stdbool.h>
#include <stddef.h>

#include "kiln_compile.h"

/* Why persistent programs refuse warp specialisation: its producer and consumers would
 * have to carry their mbarrier phases from one tile to the next (pass_warp_specialize.c
 * takes only pipelined loops of the kernel's own body, and the tile loop nests them). */
#define WS_PERSISTENT_WHY                                                                                       \
    "warp specialisation would have to carry its mbarrier phases across tiles, which it does not do yet"

/* X(field, flag, cache-key field, owning pass(es), implies, conflicts, why it conflicts, help)
 * implies / conflicts: SCHED_BIT(field) | ..., or 0. */
#define SCHED_OPTIONS(X)                                                                                         \
    X(no_wgmma, "--no-wgmma", "no_wgmma", "accelerate-dot", 0, 0, NULL,                                          \
      "sm_90a: keep every dot on mma.sync (no warpgroup MMA)")                                                   \
    X(pingpong, "--pingpong", "pingpong", "pingpong", 0, 0, NULL,                                                \
      "sm_90a: warpgroups take turns on the tensor cores (num_warps >= 8)")                                      \
    X(mbarrier, "--mbarrier", "mbarrier", "pipeline", 0, 0, NULL,                                                \
      "pipelined loops hand stages over through mbarriers, not a CTA barrier")                                   \
    X(overlap, "--overlap", "overlap", "dot-rotate, dot-overlap", 0, 0, NULL,                                    \
      "sm_90a: a loop's first dot one iteration early, in flight until the next dot (FA3's overlap)")           \
    X(tma, "--tma", "tma", "tma", SCHED_BIT(mbarrier), 0, NULL,                                                  \
      "sm_90a: pipelined loads a tensor map reads exactly go through TMA (implies --mbarrier)")                  \
    X(warp_specialize, "--warp-specialize", "warp_specialize", "warp-specialize", SCHED_BIT(mbarrier),           \
      SCHED_BIT(persistent), WS_PERSISTENT_WHY,                                                                  \
      "sm_90a: a producer warpgroup (4 more warps) issues the copies (implies --mbarrier)")                      \
    X(lean_producer, "--lean-producer", "lean_producer", "warp-specialize",                                       \
      SCHED_BIT(warp_specialize) | SCHED_BIT(tma), 0, NULL,                                                      \
      "sm_90a: a TMA-only producer keeps 24 registers, the consumers the rest (FA3; implies --warp-specialize --tma)") \
    X(persistent, "--persistent", "persistent", "persistent", 0, SCHED_BIT(warp_specialize), WS_PERSISTENT_WHY, \
      "a grid of resident programs, each looping over the logical tiles (static tile scheduler)")               \
    X(longest_first, "--longest-first", "longest_first", "persistent", SCHED_BIT(persistent), 0, NULL,          \
      "with --persistent: tiles in decreasing program_id(0) (causal attention's heavy query blocks first)")        \
    X(no_fp8_wgmma, "--no-fp8-wgmma", "no_fp8_wgmma", "accelerate-dot", 0, 0, NULL,                              \
      "sm_90a: f8e4m3 dots widened to f16 tensor cores instead of FP8 wgmma")

typedef enum SchedId {
#define SCHED_ENUM(field, ...) SCHED_##field,
    SCHED_OPTIONS(SCHED_ENUM)
#undef SCHED_ENUM
    SCHED_COUNT
} SchedId;

#define SCHED_BIT(field) (1u << SCHED_##field)

typedef struct SchedOption {
    const char *name;          /* the field: "warp_specialize" */
    const char *flag;          /* "--warp-specialize" */
    const char *key;           /* its field in the cache key */
    const char *pass;          /* the GPU pass(es) that implement it */
    unsigned implies, conflicts;
    const char *conflict_why;  /* NULL without conflicts */
    const char *help;
    size_t offset;             /* offsetof(KilnSchedule, field) */
} SchedOption;

extern const SchedOption sched_options[SCHED_COUNT];

/* Option i of s (a KilnSchedule field by the table's index). */
static inline int sched_get(const KilnSchedule *s, int i)
{
    return *(const int *)((const char *)s + sched_options[i].offset);
}
static inline void sched_set(KilnSchedule *s, int i, int v) { *(int *)((char *)s + sched_options[i].offset) = v; }

/* The option whose flag is `flag` ("--tma"), or -1. */
int sched_find_flag(const char *flag);

/* Resolve the options `asked` (> 0 on, < 0 off, 0 the default) over `dflt` (the
 * defaults, > 0 on; NULL: every default off) into `out`: each field 1 or 0, the
 * implications of every option on turned on. A default gives way to what was asked:
 * it is left off when it, or an option it implies, conflicts with an option on or is
 * asked off. Two options asked (or implied by options asked) that conflict, or an
 * option asked on that implies one asked off, are refused: false, and `why` (n bytes)
 * names both, with their flags. `out` may be `asked`, or NULL (a check only). */
bool sched_resolve(const KilnSchedule *asked, const KilnSchedule *dflt, KilnSchedule *out, char *why, size_t n);

/* The fields of s that are on, separated by `sep` ("" when none): "mbarrier tma". */
void sched_names(const KilnSchedule *s, const char *sep, char *buf, size_t n);

#endif
