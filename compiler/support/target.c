/* target.c — the table of GPU targets; see target.h.
 *
 * Shared memory per CTA is the opt-in maximum of the CUDA occupancy tables
 * (163 KB on sm_80, 99 KB on sm_86/89, 227 KB on sm_90). Every target asks
 * LLVM for PTX ISA 8.0: sm_90a needs it, and one ISA for all keeps the PTX
 * of older targets what it has been.
 */
#include "target.h"

#include <string.h>

static const Target targets[] = {
    {"sm_80", 80, false, false, 163 * 1024, 80, "+ptx80"},
    {"sm_86", 86, false, false, 99 * 1024, 80, "+ptx80"},
    {"sm_89", 89, false, false, 99 * 1024, 80, "+ptx80"},
    {"sm_90", 90, false, false, 227 * 1024, 80, "+ptx80"},
    {"sm_90a", 90, true, true, 227 * 1024, 80, "+ptx80"},
};

const Target *tgt_parse(const char *arch)
{
    if (!arch) arch = TGT_DEFAULT_ARCH;
    for (size_t i = 0; i < sizeof targets / sizeof targets[0]; i++)
        if (!strcmp(arch, targets[i].name)) return &targets[i];
    return NULL;
}

void tgt_list_names(StrBuf *out)
{
    size_t n = sizeof targets / sizeof targets[0];
    for (size_t i = 0; i < n; i++)
        sb_printf(out, "%s%s", i == 0 ? "" : i + 1 == n ? " or " : ", ", targets[i].name);
}
