/* kiln_compile.h — Kiln's compile API: compile .tile programs to any stage
 * (AST, IR, GPU IR, LLVM, PTX, cubin), run them on the CPU interpreter, or
 * compile them straight onto a device (with launch-time specialisation and
 * an on-disk cache). The FlashAttention entry points built on it are in
 * kiln_attention.h.
 *
 * Self-contained: it includes kiln_runtime.h for what both halves share
 * (KilnStatus and kiln_last_error(), kernel signatures, device handles).
 * kiln.h includes both. Every call returns a KilnStatus; nothing here prints
 * or exits. The code behind it is the compile pipeline (compiler/) and the
 * jit layer (jit/).
 */
#ifndef KILN_COMPILE_H
#define KILN_COMPILE_H

#include <stddef.h>
#include <stdint.h>

#include "kiln_runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------- compiling ---------------- */

/* What to compile to. 0, what a zero-initialised KilnCompileOptions holds, is
 * KILN_EMIT_AUTO and means the same in kiln_compile and kiln_module_compile:
 * the code a device loads, a cubin when ptxas is found (KILN_PTXAS,
 * /usr/local/cuda/bin, PATH) and PTX otherwise; a cubin is an ELF image (it starts
 * with "\x7fELF"), PTX is text. The `kiln compile` command defaults to
 * --emit ir. */
typedef enum KilnEmit {
    KILN_EMIT_AUTO = 0,  /* a cubin when ptxas is found, else PTX (see above) */
    KILN_EMIT_AST,       /* the parsed AST, as text */
    KILN_EMIT_IR,        /* Tile IR after the target-independent passes */
    KILN_EMIT_GPU_IR,    /* GPU IR: tile values with layouts */
    KILN_EMIT_LLVM,      /* LLVM IR text */
    KILN_EMIT_PTX,       /* PTX text */
    KILN_EMIT_CUBIN,     /* cubin bytes (runs ptxas) */
} KilnEmit;

typedef struct KilnDefine {
    const char *name;
    const char *value;   /* as written: "128", "true", "0.125", "bf16", a fn name */
} KilnDefine;

/* A fact about a runtime parameter's value that the compiler may rely on:
 * an integer parameter is a multiple of `divisibility`; a pointer parameter's
 * address is a multiple of `divisibility` bytes. A power of two (1 = nothing
 * known). A launch whose argument breaks a hint is refused (KILN_ERR_ARGS).
 * `kiln compile --assume n=16`. kiln_module_compile adds such hints by itself
 * at launch time (see kiln_module_set_specialize).
 *
 * equals_one != 0: the integer parameter's value IS 1 (`--assume n==1`; then
 * divisibility must be 0 or 1). The kernel keeps the parameter (same launch
 * ABI) but every use of it compiles as the constant 1, so a unit stride lets
 * the backend prove contiguity (vector loads, cp.async pipelining). Integer
 * parameters only (not bool). Zero-initialised hints ({"n", 16}) leave it off. */
typedef struct KilnParamHint {
    const char *name;          /* a runtime (non-const) integer or pointer parameter */
    int divisibility;
    int equals_one;            /* 0: no claim; else the value is exactly 1 */
} KilnParamHint;

/* Schedule options: how a kernel runs on the GPU, never what it computes (the PTX
 * changes, the results do not). Each field: > 0 on, < 0 off, 0 the default (off for
 * kiln_compile; the tuning table's choice for the attention calls). The rules between
 * them: tma and warp_specialize imply mbarrier; tma and warp_specialize cannot be
 * combined (refused with KILN_ERR_USAGE naming both, never dropped). One table in the
 * compiler (compiler/support/schedule.h) gives each its `kiln compile` flag, its
 * cache-key field and the GPU pass that implements it; docs/passes.md says how to add one.
 * A kernel that does not qualify for an option compiles as without it (--stats says why
 * where it can). Sections below: docs/tensor_cores.md. */
typedef struct KilnSchedule {
    int no_wgmma;          /* sm_90a: every dot on mma.sync (else dots that qualify use wgmma,
                              docs/tensor_cores.md) */
    int pingpong;          /* sm_90a, num_warps >= 8: the warpgroups take turns on the tensor
                              cores, one's softmax overlapping another's wgmmas (section 4b) */
    int mbarrier;          /* software-pipelined loops hand their stages over through mbarriers
                              (full/empty per stage) instead of cp.async.wait_group + a CTA
                              barrier each iteration, so warps may drift apart (section 0b) */
    int overlap;           /* sm_90a: a loop's first dot is computed one iteration early and
                              left in flight until the next dot of the body (FlashAttention-3's
                              intra-warpgroup overlap: the next key block's Q K^T during this
                              block's softmax; section 4c) */
    int tma;               /* sm_90a: the pipelined loads that a 2-D tiled tensor map reads
                              exactly go through TMA (cp.async.bulk.tensor, one thread,
                              expect-tx mbarriers); implies mbarrier; the maps are extra kernel
                              parameters the runtime encodes at launch (section 5c) */
    int warp_specialize;   /* sm_90a: a producer warpgroup (4 warps on top of num_warps) issues
                              every pipelined loop's copies while the num_warps consumer warps
                              compute, with setmaxnreg moving registers to the consumers
                              (section 5b); implies mbarrier. A kernel that does not qualify
                              (not wgmma, num_warps not a multiple of 4, a pipelined loop nested
                              in another) compiles as with mbarrier alone; --stats says why.
                              The launch then needs the kernel's KilnKernelInfo.num_warps */
    int lean_producer;     /* sm_90a: with warp_specialize, when every pipelined load goes through
                              TMA (the producer holds no address tiles, one thread issues),
                              setmaxnreg leaves the producer 24 registers and gives the consumers
                              the rest (240 at 8 consumer warps, FlashAttention-3's split; 224
                              with 56 otherwise); implies warp_specialize and tma (section 5b) */
    int persistent;        /* persistent programs (any target): the grid is as many programs as
                              the device keeps resident, each looping over the logical tiles
                              t = program + k * programs (a static tile scheduler); the logical
                              grid becomes three i32 parameters after the program's own, which
                              kiln_launch passes (KilnKernelInfo.persistent). Not with
                              warp_specialize (docs/passes.md, "Persistent programs") */
    int longest_first;     /* with persistent: tiles in decreasing program_id(0), axis 0 slowest,
                              so causal attention's heavy (last) query blocks run first;
                              implies persistent */
    int no_fp8_wgmma;      /* sm_90a: f8e4m3 dots widen their operands to f16 (exact) and run on
                              the f16 tensor cores instead of FP8 wgmma (m64nNk32 e4m3, section
                              4e): the FP8 forward's A/B comparison and fallback */
} KilnSchedule;

typedef struct KilnCompileOptions {
    const char *kernel;        /* NULL: the only kernel of the file (error if several for GPU stages) */
    const KilnDefine *defines;
    int ndefines;
    const char *arch;          /* "sm_80", "sm_90", "sm_90a" (default) */
    int num_warps;             /* > 0 overrides the kernel's setting */
    int num_stages;            /* > 0 overrides the kernel's setting */
    KilnEmit emit;
    const char *dump_after;    /* NULL, "all" or a pass name: IR dumps go to result.dumps */
    int no_opt;                /* skip the target-independent passes */
    const KilnParamHint *hints;  /* divisibility / alignment facts (see KilnParamHint) */
    int nhints;
    /* Schedule options (KilnSchedule above): > 0 on; 0 and < 0 off here. A combination
     * the options refuse (tma with warp_specialize) is KILN_ERR_USAGE naming both. */
    KilnSchedule schedule;
    /* Where `import NAME;` looks after the importing file's own directory and before
     * the library embedded in libkiln (`kiln -I DIR`); see docs/language.md, "Modules". */
    const char *const *include_dirs;
    int ninclude_dirs;
} KilnCompileOptions;

typedef struct KilnCompileResult {
    char *output;              /* the emitted stage (text, or cubin bytes) */
    size_t output_size;
    char *diagnostics;         /* errors/warnings, formatted with source lines and carets */
    char *dumps;               /* --dump-after output */
    char *stats;               /* human-readable statistics (SRAM buffers, warps...) */
    KilnKernelInfo *kernels;   /* kernels compiled (GPU stages: exactly one) */
    int nkernels;
} KilnCompileResult;

/* Compile `src` (the text of `path`). On KILN_ERR_COMPILE the diagnostics are
 * in result->diagnostics. Always call kiln_compile_result_free. */
KILN_API KilnStatus kiln_compile(const char *path, const char *src, const KilnCompileOptions *opts,
                        KilnCompileResult *result);
KILN_API void kiln_compile_result_free(KilnCompileResult *result);

/* ---------------- running on the CPU interpreter ---------------- */

/* Compile `src` (the text of `path`, the name diagnostics use) up to Tile IR
 * with `opts` (kernel, defines, no_opt and hints count; emit, arch, warps and
 * stages do not) and run the kernel on the CPU interpreter, the reference
 * semantics of the IR: grid[0] x grid[1] x grid[2] programs (NULL or 0 counts
 * as 1), one after another. No GPU is needed.
 *
 * `args` is the list kiln_host_launch takes, with the same meaning, so one
 * list runs on either: the kernel's runtime parameters in order, buffers
 * (kiln_host_buf) for pointer parameters and scalars (kiln_host_scalar) for
 * the others. IN buffers are read from a copy; OUT buffers start as 0xFF
 * bytes (NaN for floats) and are copied back when the run succeeds; INOUT
 * buffers are used in place. Scalars: any integer kind for an integer
 * parameter, f32 / f64 (or f16 / bf16 bits) for a float one. Every access
 * must fall inside a buffer.
 *
 * Returns KILN_OK with the results in the host buffers; KILN_ERR_COMPILE
 * (the diagnostics, with source lines and carets, in kiln_last_error());
 * KILN_ERR_USAGE (a bad list, as kiln_host_args_check; several kernels and
 * none named); KILN_ERR_ARGS (count or kind of an argument, naming the
 * parameter); KILN_ERR_KERNEL (the program failed: which program, op and
 * source line, e.g. an out-of-bounds load). Slow (an interpreter): for
 * checking results, tests, and machines without a GPU. */
KILN_API KilnStatus kiln_run_cpu(const char *path, const char *src, const KilnCompileOptions *opts,
                                 const int grid[3], const KilnHostArg *args, int nargs);

/* ---------------- compiling onto a device ---------------- */

/* Compile a .tile source (text `src`, named `path` in diagnostics) with
 * kiln_compile and load it, going through the on-disk cache (below).
 * opts->emit: KILN_EMIT_PTX or KILN_EMIT_CUBIN are honoured; KILN_EMIT_AUTO
 * (0) and the stages before PTX mean a cubin when ptxas is available, else PTX. opts->arch NULL
 * means the device's arch (KilnDeviceInfo.arch). On KILN_ERR_COMPILE the
 * diagnostics are in kiln_last_error() (truncated to a few KB). */
KILN_API KilnStatus kiln_module_compile(KilnDevice *dev, const char *path, const char *src,
                               const KilnCompileOptions *opts, KilnModule **out);
/* Launch-time specialisation of kiln_module_compile modules (default on; the
 * environment variable KILN_SPECIALIZE=0 makes it default off). At each
 * launch, the pointer arguments that are 16-byte aligned and the integer
 * arguments that are multiples of 16 form a key; the first launch with a
 * key compiles the module's source again with those facts as hints (through
 * the on-disk cache) and loads that variant, which later launches with the
 * key reuse. The kernel handle and its info stay the same. Off: every launch
 * uses the generic kernel. Modules from kiln_module_load_ptx / _cubin never
 * specialise (the call is a no-op for them). Launch arguments must always
 * satisfy the module's own KilnCompileOptions.hints (else KILN_ERR_ARGS). */
KILN_API KilnStatus kiln_module_set_specialize(KilnModule *m, int on);

/* ---------------- on-disk cache of compiled kernels ---------------- */
/* Entries live in $KILN_CACHE_DIR, else $HOME/.cache/kiln (created on first
 * store). KILN_CACHE_DISABLE=1 bypasses it (lookups miss, stores do nothing).
 * A key is the SHA-256 (hex) of the source text, kernel name, defines (sorted
 * by name), arch, num_warps, num_stages, emit, the schedule options as the
 * compile resolves them, hints (sorted by name),
 * kiln_version() and the compiler's build identity (a hash of its sources,
 * flags and LLVM version made at build time: a rebuilt compiler never reuses
 * an older build's entries). Entries are
 * written to a temporary file in the same directory and rename()d into place,
 * so concurrent compilers never see half an entry; an entry that does not
 * verify (bad magic, wrong key, truncated, checksum) is ignored and rebuilt. */

typedef struct KilnCacheEntry {
    KilnEmit emit;           /* KILN_EMIT_PTX or KILN_EMIT_CUBIN (KILN_EMIT_IR: signature only, no payload) */
    char *payload;           /* PTX text (NUL-terminated) or cubin bytes */
    size_t payload_size;
    KilnKernelInfo info;     /* info.params owned by the entry */
} KilnCacheEntry;

/* key_hex receives 64 hex digits and a NUL. `opts` as given to kiln_compile
 * (emit and arch as they will be used: resolve "auto" first). KILN_ERR_USAGE for
 * schedule options that cannot be combined (kiln_compile refuses them too). */
KILN_API KilnStatus kiln_cache_key(const char *src, const KilnCompileOptions *opts, char key_hex[65]);
/* The directory in use (not created). KILN_ERR_IO when neither variable is set. */
KILN_API KilnStatus kiln_cache_dir(char *buf, size_t size);
KILN_API int kiln_cache_enabled(void);
/* KILN_OK and a filled entry on a hit; KILN_ERR_NOT_FOUND on a miss, a
 * corrupt entry or a disabled cache. */
KILN_API KilnStatus kiln_cache_lookup(const char *key_hex, KilnCacheEntry *out);
KILN_API KilnStatus kiln_cache_store(const char *key_hex, const KilnCacheEntry *e);
KILN_API void kiln_cache_entry_free(KilnCacheEntry *e);

/* The text of an embedded library program ("lang/lib/attention_fwd.tile"), e.g.
 * to compile a variant with hooks through kiln_module_compile; NULL if none. */
KILN_API const char *kiln_lib_source(const char *path);

/* The full path of a shipped file: a program ("examples/vec_add.tile") or a
 * library program ("lib/attention_fwd.tile"; "lang/lib/..." is accepted too)
 * into buf. Searched, first hit wins: $KILN_DATA_DIR; share/kiln of the
 * prefix the running library or program is installed in (<dir>/../share/kiln);
 * $KILN_SOURCE_DIR; the source tree the library was built from.
 * KILN_ERR_NOT_FOUND (saying where it looked) when none has it (a path
 * longer than `size` counts as none). */
KILN_API KilnStatus kiln_data_path(const char *rel, char *buf, size_t size);

#ifdef __cplusplus
}
#endif
#endif
