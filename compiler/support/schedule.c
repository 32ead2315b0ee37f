/* schedule.c — the schedule-option table (schedule.h) as data, and its rules.
 *
 * What: sched_options expands SCHED_OPTIONS once; sched_resolve turns asked options
 * and defaults into the schedule a compile uses (implications on, conflicts refused
 * with a message naming both options, defaults giving way to what was asked).
 *
 * Invariants: every KilnSchedule field has a row, in order (checked below at compile
 * time); sched_resolve never drops an option that was asked for: it is on in the
 * result, or the call fails.
 *
 * Example: asked {.warp_specialize = 1, .mbarrier = -1} is refused ("warp_specialize
 * (--warp-specialize) needs mbarrier (--mbarrier), which is asked off"); asked
 * {.tma = 1} over the defaults {.warp_specialize = 1} gives tma and mbarrier on and
 * warp_specialize off (the default gives way).
 */
#include "schedule.h"

#include <stdio.h>
#include <string.h>

const SchedOption sched_options[SCHED_COUNT] = {
#define SCHED_ROW(field, flag, key, pass, implies, conflicts, why, help) \
    {#field, flag, key, pass, implies, conflicts, why, help, offsetof(KilnSchedule, field)},
    SCHED_OPTIONS(SCHED_ROW)
#undef SCHED_ROW
};

/* Every field of KilnSchedule is an int with a row, in declaration order. */
_Static_assert(sizeof(KilnSchedule) == SCHED_COUNT * sizeof(int), "KilnSchedule and SCHED_OPTIONS differ");
#define SCHED_ORDER(field, ...) \
    _Static_assert(offsetof(KilnSchedule, field) == SCHED_##field * sizeof(int), #field " is out of order");
SCHED_OPTIONS(SCHED_ORDER)
#undef SCHED_ORDER

int sched_find_flag(const char *flag)
{
    for (int i = 0; flag && i < SCHED_COUNT; i++)
        if (!strcmp(sched_options[i].flag, flag)) return i;
    return -1;
}

/* The options `set` turns on, its implications followed to the end. */
static unsigned closure(unsigned set)
{
    for (;;) {
        unsigned more = set;
        for (int i = 0; i < SCHED_COUNT; i++)
            if (set & (1u << i)) more |= sched_options[i].implies;
        if (more == set) return set;
        set = more;
    }
}

/* The first option of `asked` whose closure holds option j (j itself first). */
static int origin(unsigned asked, int j)
{
    if (asked & (1u << j)) return j;
    for (int i = 0; i < SCHED_COUNT; i++)
        if ((asked & (1u << i)) && (closure(1u << i) & (1u << j))) return i;
    return j;
}

/* A pair (i, j) of `on` that conflict, i < j; false when none. */
static bool conflict_in(unsigned on, int *i, int *j)
{
    for (*i = 0; *i < SCHED_COUNT; (*i)++)
        for (*j = *i + 1; *j < SCHED_COUNT; (*j)++)
            if ((on & (1u << *i)) && (on & (1u << *j)) && (sched_options[*i].conflicts & (1u << *j))) return true;
    return false;
}

static void name_of(int i, char *buf, size_t n) { snprintf(buf, n, "%s (%s)", sched_options[i].name, sched_options[i].flag); }

bool sched_resolve(const KilnSchedule *asked, const KilnSchedule *dflt, KilnSchedule *out, char *why, size_t n)
{
    unsigned on_asked = 0, off_asked = 0, defaults = 0;
    for (int i = 0; i < SCHED_COUNT; i++) {
        int a = asked ? sched_get(asked, i) : 0;
        if (a > 0) on_asked |= 1u << i;
        else if (a < 0) off_asked |= 1u << i;
        else if (dflt && sched_get(dflt, i) > 0) defaults |= 1u << i;
    }
    char a[64], b[64];
    unsigned on = closure(on_asked);
    int i, j;
    if (on & off_asked) {
        for (j = 0; !(on & off_asked & (1u << j)); j++) {}
        name_of(origin(on_asked, j), a, sizeof a);
        name_of(j, b, sizeof b);
        if (why) snprintf(why, n, "the schedule option %s needs %s, which is asked off", a, b);
        return false;
    }
    if (conflict_in(on, &i, &j)) {
        name_of(origin(on_asked, i), a, sizeof a);
        name_of(origin(on_asked, j), b, sizeof b);
        if (why) snprintf(why, n, "the schedule options %s and %s cannot be combined: %s", a, b,
                          sched_options[i].conflict_why ? sched_options[i].conflict_why : "refused");
        return false;
    }
    /* the defaults, in table order, each with what it implies, unless that meets a refusal */
    for (i = 0; i < SCHED_COUNT; i++) {
        if (!(defaults & (1u << i))) continue;
        unsigned with = on | closure(1u << i);
        int x, y;
        if (!(with & off_asked) && !conflict_in(with, &x, &y)) on = with;
    }
    for (i = 0; out && i < SCHED_COUNT; i++) sched_set(out, i, (on >> i) & 1u);
    return true;
}

void sched_names(const KilnSchedule *s, const char *sep, char *buf, size_t n)
{
    size_t used = 0;
    if (n) buf[0] = 0;
    for (int i = 0; i < SCHED_COUNT && used < n; i++)
        if (sched_get(s, i) > 0) {
            int w = snprintf(buf + used, n - used, "%s%s", used ? sep : "", sched_options[i].name);
            if (w < 0) break;
            used += (size_t)w;
        }
}
