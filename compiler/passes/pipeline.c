/* pipeline.c — the target-independent pass pipeline over Tile IR.
 *
 * What it does: runs pass_pipeline_tab in order — fold, cse, licm, cse, dce —
 * verifying the IR after each pass, and prints the IR after a pass on request
 * (--dump-after=NAME|all). Why this order: fold first turns constant chains
 * into single constants (so cse sees equal constants and equal uses of them);
 * cse merges duplicates before licm so one copy is hoisted, not several; licm
 * can bring hoisted ops next to identical outer ones, hence the second cse;
 * dce last sweeps the constants fold left behind, the ops cse and licm made
 * redundant and the dead loop-carried values.
 *
 * Invariants: the IR verifies after every pass, else the pipeline stops and
 * returns false with the verifier's message (prefixed by the pass name); a
 * pass that records an internal error (INTERNAL_ERROR) stops it the same way.
 *
 * Example: pass_pipeline(f, "licm", &dump, &err) leaves in `dump`
 *     // -----// IR after licm //----- //
 *     <the function, as ir_print_func prints it>
 */
#include "passes.h"

#include <string.h>

const PassInfo pass_pipeline_tab[] = {
    {"fold", pass_fold},
    {"cse", pass_cse},
    {"licm", pass_licm},
    {"cse", pass_cse},
    {"dce", pass_dce},
    {NULL, NULL},
};

const PassInfo *pass_find(const char *name)
{
    if (!name) return NULL;
    for (const PassInfo *p = pass_pipeline_tab; p->name; p++)
        if (strcmp(p->name, name) == 0) return p;
    return NULL;
}

void pass_list_names(StrBuf *out)
{
    for (const PassInfo *p = pass_pipeline_tab; p->name; p++)
        if (pass_find(p->name) == p) /* the first entry of a name: cse runs twice */
            sb_printf(out, "%s%s", p == pass_pipeline_tab ? "" : ", ", p->name);
}

bool pass_pipeline(IrFunc *f, const char *dump_after, StrBuf *dump, StrBuf *err)
{
    for (const PassInfo *p = pass_pipeline_tab; p->name; p++) {
        p->run(f);
        const char *ice = ice_message();
        if (ice) {
            if (err) sb_printf(err, "after pass '%s': %s\n", p->name, ice);
            return false;
        }
        /* Dump before verifying: broken IR is what one wants to see. */
        if (dump && dump_after && (strcmp(dump_after, "all") == 0 || strcmp(dump_after, p->name) == 0)) {
            sb_printf(dump, "// -----// IR after %s //----- //\n", p->name);
            ir_print_func(dump, f);
        }
        StrBuf why;
        sb_init(&why);
        bool ok = ir_verify(f, &why);
        if (!ok && err) sb_printf(err, "after pass '%s':\n%s", p->name, why.data ? why.data : "");
        sb_free(&why);
        if (!ok) return false;
    }
    return true;
}
