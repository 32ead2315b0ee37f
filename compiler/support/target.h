/* target.h — the GPU a compile is for, parsed once from its name.
 *
 * The driver turns KilnCompileOptions.arch ("sm_90a" when NULL) into a Target
 * with tgt_parse and hands the Target down; nothing else reads the arch
 * string. Every property of the architecture that the compiler uses lives
 * here: the SM version the backend compares against (atomics, cp.async,
 * tensor cores), whether the architecture-specific sm_90a features (wgmma)
 * exist, the dynamic shared memory one CTA may use, and the PTX ISA the
 * LLVM target machine is asked for.
 */
#ifndef KILN_TARGET_H
#define KILN_TARGET_H

#include "support.h"

#define TGT_DEFAULT_ARCH "sm_90a"

typedef struct Target {
    const char *name;          /* canonical: "sm_90a"; the LLVM CPU and ptxas -arch */
    int sm;                    /* 80, 86, 89, 90 */
    bool arch_specific;        /* the "a" suffix: features only this exact SM has */
    bool wgmma;                /* warpgroup MMA (sm_90a) */
    int sram_limit;            /* bytes of dynamic shared memory per CTA */
    int ptx_isa;               /* PTX ISA version asked for, times ten: 80 = 8.0 */
    const char *ptx_features;  /* the LLVM feature string that selects it: "+ptx80" */
} Target;

/* The target named `arch` (NULL: TGT_DEFAULT_ARCH), or NULL for an unknown
 * name. The result is static and never freed. */
const Target *tgt_parse(const char *arch);
/* Appends the accepted names for a message: "sm_80, sm_86, sm_89, sm_90 or sm_90a". */
void tgt_list_names(StrBuf *out);

#endif
