/* passes.h — target-independent passes over Tile IR; each is `void pass_X(IrFunc *)`.
 *
 * The pipeline (pipeline.c) runs them in a fixed order with the verifier after
 * each, and can dump the IR after any pass (--dump-after=NAME|all).
 */
#ifndef KILN_PASSES_H
#define KILN_PASSES_H

#include "../ir/ir.h"

void pass_fold(IrFunc *f);   /* constant folding + canonicalisation */
void pass_cse(IrFunc *f);    /* common subexpression elimination of pure ops */
void pass_dce(IrFunc *f);    /* dead code elimination (pure ops, unused loop-carried values) */
void pass_licm(IrFunc *f);   /* hoist loop-invariant pure ops out of `for` */

/* The schedule option --persistent (mode 1, static tile order) / --longest-first (mode 2):
 * the body becomes a tile loop over the logical grid, three i32 parameters appended
 * (persistent.c). Run by the driver after the pipeline below, when the schedule asks. */
void pass_persistent(IrFunc *f, int mode);
/* Whether `name` is a schedule option's target-independent pass ("persistent"): the
 * driver runs it, --dump-after takes it, the schedule table may name it. */
bool pass_is_schedule_pass(const char *name);

typedef struct PassInfo {
    const char *name;
    void (*run)(IrFunc *f);
} PassInfo;

/* The target-independent pipeline, in order. NULL-terminated. */
extern const PassInfo pass_pipeline_tab[];
const PassInfo *pass_find(const char *name);
/* Appends the distinct pass names of the pipeline, in order, ", "-separated
 * ("fold, cse, licm, dce"): for messages that list what --dump-after takes. */
void pass_list_names(StrBuf *out);

/* Runs every pass of pass_pipeline_tab in order, verifying after each.
 * dump_after: NULL, "all" or a pass name; dumps go to `dump`.
 * Returns false (with the reason in `err`) when the verifier fails. */
bool pass_pipeline(IrFunc *f, const char *dump_after, StrBuf *dump, StrBuf *err);

#endif
