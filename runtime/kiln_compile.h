/* kiln_compile.h — Kiln's compile API: compile .tile programs to any stage
 * (AST, IR, GPU IR, LLVM, PTX, cubin), run them on the CPU interpreter, or
 * compile them straight onto a device (with launch-time specialisation and
 * an on-disk cache), and the FlashAttention entry points built on that.
 *
 * Self-contained: it includes kiln_runtime.h for what both halves share
 * (KilnStatus and kiln_last_error(), kernel signatures, device handles).
 * kiln.h includes both. Every call returns a KilnStatus; nothing here prints
 * or exits. The code behind it is the compile pipeline (compiler/) and the
 * jit layer (runtime/jit/).
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

typedef enum KilnEmit {
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
    int no_wgmma;              /* sm_90a: nonzero keeps every dot on mma.sync (else dots that
                                  qualify use wgmma, docs/tensor_cores.md) */
    int pingpong;              /* sm_90a, num_warps >= 8: nonzero lets the warpgroups take turns on
                                  the tensor cores, one's softmax overlapping another's wgmmas
                                  (docs/tensor_cores.md, section 4b); kernels that do not qualify
                                  are unchanged */
    int mbarrier;              /* nonzero: software-pipelined loops hand their stages over through
                                  mbarriers (full/empty per stage) instead of cp.async.wait_group
                                  + a CTA barrier each iteration, so warps may drift apart
                                  (docs/tensor_cores.md, section 0b); other kernels are unchanged */
    int overlap;               /* sm_90a: nonzero computes a loop's first dot one iteration early
                                  and leaves it in flight until the next dot of the body
                                  (FlashAttention-3's intra-warpgroup overlap: the next key block's
                                  Q K^T during this block's softmax; docs/tensor_cores.md, section
                                  4c); kernels without such a loop are unchanged */
    int tma;                   /* sm_90a: nonzero copies the pipelined loads that a 2-D tiled
                                  tensor map reads exactly through TMA (cp.async.bulk.tensor, one
                                  thread, expect-tx mbarriers); implies mbarrier; the maps are
                                  extra kernel parameters the runtime encodes at launch
                                  (docs/tensor_cores.md 5c, docs/runtime.md) */
    int warp_specialize;       /* sm_90a: nonzero adds a producer warpgroup (4 warps on top of
                                  num_warps) that issues every pipelined loop's copies while the
                                  num_warps consumer warps compute, with setmaxnreg moving
                                  registers to the consumers (docs/tensor_cores.md, section 5b);
                                  implies mbarrier. A kernel that does not qualify (not wgmma,
                                  num_warps not a multiple of 4, a pipelined loop nested in
                                  another) compiles as with mbarrier alone; --stats says why.
                                  The launch then needs the kernel's KilnKernelInfo.num_warps */
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
 * opts->emit: KILN_EMIT_PTX or KILN_EMIT_CUBIN are honoured; anything else
 * means "auto": a cubin when ptxas is available, else PTX. opts->arch NULL
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
 * by name), arch, num_warps, num_stages, emit, hints (sorted by name),
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
 * (emit and arch as they will be used: resolve "auto" first). */
KILN_API KilnStatus kiln_cache_key(const char *src, const KilnCompileOptions *opts, char key_hex[65]);
/* The directory in use (not created). KILN_ERR_IO when neither variable is set. */
KILN_API KilnStatus kiln_cache_dir(char *buf, size_t size);
KILN_API int kiln_cache_enabled(void);
/* KILN_OK and a filled entry on a hit; KILN_ERR_NOT_FOUND on a miss, a
 * corrupt entry or a disabled cache. */
KILN_API KilnStatus kiln_cache_lookup(const char *key_hex, KilnCacheEntry *out);
KILN_API KilnStatus kiln_cache_store(const char *key_hex, const KilnCacheEntry *e);
KILN_API void kiln_cache_entry_free(KilnCacheEntry *e);

/* ---------------- attention ---------------- */
/* FlashAttention forward (lang/lib/attention_fwd.tile, embedded in the library)
 * in one call on device pointers: O = softmax(scale * Q K^T) V per (batch, head),
 * with its log-sum-exp. The call validates everything before it touches the
 * device, picks the compiled variant (dtype, head dim, causal, tile sizes) and
 * keeps it loaded per device. See docs/attention_api.md. */

typedef enum KilnDtype { KILN_F16, KILN_BF16 } KilnDtype;

/* ---- attention variants (docs/attention_api.md, "Variants") ----
 * A variant is a .tile file of hooks (score_mod, mask_mod, kv_start, score_mod_grad,
 * named like the programs' hook parameters) and the runtime `param`s they read;
 * lang/lib/variants/ ships causal, sliding_window, softcap, alibi, document, prefix_lm,
 * relative_bias and gemma2. The attention calls take one through the `variant` field of
 * their params: they compile the program they run with it (the variant's text plus an
 * import of the program) once per variant and shape class, through the caches, and pass
 * its runtime arguments, by name, to the kernel's parameters of the same names. */
typedef struct KilnVariantArg {
    const char *name;      /* a `param` of the variant */
    KilnArg value;         /* pointer params: kiln_arg_ptr(device address; host address in the
                              _cpu calls); scalars: a value of the param's kind (any integer kind
                              for an integer param, in range; f32 or f64 for a float one) */
    size_t bytes;          /* pointer params: the buffer's size (required by the _cpu calls,
                              which bound every access by it; ignored on the device) */
} KilnVariantArg;

typedef struct KilnAttentionVariant {
    /* The variant's text. NULL: the text of `path`: a file of the embedded library
     * ("lang/lib/variants/alibi.tile", kiln_lib_source) or else one on disk, read at
     * every call (pass the text for calls in a loop). */
    const char *source;
    /* Its file name: in diagnostics, and where its own imports look first (the
     * directory of path). NULL with a source: "<variant>". */
    const char *path;
    const KilnDefine *defines;     /* -D values for its (and the program's) consts */
    int ndefines;
    const KilnVariantArg *args;    /* one per `param` the running kernels read; every one must
                                      name a param of some kernel of the call (KILN_ERR_USAGE) */
    int nargs;
    const char *const *include_dirs;  /* more places its imports look (KilnCompileOptions) */
    int ninclude_dirs;
} KilnAttentionVariant;

/* ---- block masks (FlexAttention's BlockMask; docs/attention_api.md, "Block masks") ----
 * The (query block, key block) pairs of an attention call, per (batch, head), classified
 * by lang/lib/block_mask.tile: FULL (the block lies inside both sequences and the variant's
 * mask_mod, with the causal mask when the call is causal, holds for every pair), PARTIAL
 * (some pair visible, not all; or the block crosses a sequence's end) or EMPTY (no pair
 * visible: never loaded). kiln_attention_block_mask_create evaluates the mask on every
 * element once; the forward of the same shape then reads its lists, as many times as wanted.
 *
 * One i32 buffer holds the arrays below, each at offset[array] bytes (16-byte aligned);
 * G = batch * heads of the MASK (1 x 1 when it depends on neither), NQ = num_q_blocks,
 * NK = num_kv_blocks, row g = b * heads + h:
 *   KILN_BM_KV_NUM       [G, NQ]       partial key blocks of query block qb
 *   KILN_BM_KV_IDX       [G, NQ, NK]   their indices, ascending (entries past the count unspecified)
 *   KILN_BM_FULL_KV_NUM  [G, NQ]       full key blocks
 *   KILN_BM_FULL_KV_IDX  [G, NQ, NK]
 *   KILN_BM_Q_NUM        [G, NK]       transposed, for a backward: partial query blocks of key block kb
 *   KILN_BM_Q_IDX        [G, NK, NQ]
 *   KILN_BM_FULL_Q_NUM   [G, NK]
 *   KILN_BM_FULL_Q_IDX   [G, NK, NQ]
 *   KILN_BM_CLASS        [G, NQ, NK]   0 empty, 1 partial, 2 full */
typedef enum KilnBlockMaskArray {
    KILN_BM_KV_NUM, KILN_BM_KV_IDX, KILN_BM_FULL_KV_NUM, KILN_BM_FULL_KV_IDX,
    KILN_BM_Q_NUM, KILN_BM_Q_IDX, KILN_BM_FULL_Q_NUM, KILN_BM_FULL_Q_IDX, KILN_BM_CLASS,
    KILN_BM_NARRAYS
} KilnBlockMaskArray;

typedef struct KilnBlockMask {
    /* set by the caller */
    int block_q, block_kv;     /* the mask's blocks: powers of two in [16, 1024]; 0: 128 (FlexAttention's) */
    int batch, heads;          /* 1: the mask depends on no batch / head, stored once (mask_mod sees
                                  b = 0 / h = 0; FlexAttention's B / H = None); else the call's
                                  batch / heads_q */
    KilnDevPtr data;           /* kiln_attention_block_mask_size bytes, 16-byte aligned (a host
                                  address for the _cpu calls) */
    size_t bytes;              /* data's size */
    /* filled by kiln_attention_block_mask_create: what the mask was made for (the forward
     * checks them against its call) */
    int seqlen_q, seqlen_k, causal;
    int num_q_blocks, num_kv_blocks;   /* cdiv(seqlen_q, block_q), cdiv(seqlen_k, block_kv) */
    size_t offset[9];          /* byte offset of each KilnBlockMaskArray in data */
} KilnBlockMask;

typedef struct KilnAttentionParams {
    KilnDtype dtype;                   /* of Q, K, V and O */
    int batch, heads_q, heads_kv;      /* heads_q % heads_kv == 0 (GQA; heads_kv = 1 is MQA) */
    int seqlen_q, seqlen_k;            /* >= 0; seqlen_q = 0: nothing to do (KILN_OK, no launch) */
    int head_dim;                      /* 32, 64, 96, 128 or 256 */
    /* Q, O: [batch, heads_q, seqlen_q, head_dim]; K, V: [batch, heads_kv, seqlen_k, head_dim],
     * each element at b * stride[0] + h * stride[1] + s * stride[2] + d (in elements, >= 0;
     * the head dim is contiguous). [b, s, h, d] and [b, h, s, d] are both just strides.
     * Pointers 16-byte aligned; K and V may be 0 when seqlen_k == 0. */
    KilnDevPtr q, k, v, o;
    KilnDevPtr lse;                    /* required: f32, dense [batch, heads_q, seqlen_q], natural log
                                        * (varlen: [heads_q, total_q]) */
    int64_t q_stride[3], k_stride[3], v_stride[3], o_stride[3];
    float softmax_scale;               /* 0: 1 / sqrt(head_dim) */
    int causal;                        /* nonzero: bottom-right aligned (query i sees keys j <= i + seqlen_k - seqlen_q) */
    /* Tuning, 0 = the default for the head dim and the device (a table in runtime/jit/attention.c).
     * block_m/block_n: powers of two in [16, 256]; num_warps: power of two in [1, 32];
     * num_stages: [1, 8]. Setting block_m or block_n alone leaves num_warps/num_stages
     * to the program's own rule for those tiles. */
    int block_m, block_n, num_warps, num_stages;
    int no_wgmma;                      /* nonzero: mma.sync even where sm_90a's wgmma applies */
    /* Warpgroup ping-pong on sm_90a (KilnCompileOptions.pingpong): > 0 on, < 0 off, 0 the
     * default table's choice for the head dim (off with the caller's block_m/block_n). Only
     * kernels of 8 or more warps take turns; others compile as without it. */
    int pingpong;
    /* mbarrier stage hand-off in the key loop (KilnCompileOptions.mbarrier): > 0 on, < 0 off,
     * 0 the default table's choice (off with the caller's block_m/block_n). */
    int mbarrier;
    /* FlashAttention-3's intra-warpgroup overlap on sm_90a (KilnCompileOptions.overlap): > 0
     * on, < 0 off, 0 the default table's choice (off with the caller's block_m/block_n). The
     * forward's key loops run rotated, each block's Q K^T in flight during the previous
     * block's softmax. Not with a block mask (ignored there). */
    int overlap;
    /* TMA copies of K and V on sm_90a (KilnCompileOptions.tma, implies mbarrier): > 0 on,
     * otherwise off (no table column). The 4-D maps K/V need are refused for now (they
     * faulted on the H200): the option gives the mbarrier hand-off; docs/tensor_cores.md 5c. */
    int tma;
    /* Warp specialisation on sm_90a (KilnCompileOptions.warp_specialize): > 0 on, < 0 off, 0
     * the default table's choice (off with the caller's block_m/block_n). A producer
     * warpgroup issues the K/V copies; implies mbarrier. */
    int warp_specialize;
    /* Packed variable-length batches (FlashAttention's flash_attn_varlen_func); both 0: the
     * fixed-length layout above. Sequence b owns query tokens [cu_seqlens_q[b],
     * cu_seqlens_q[b + 1]) and key tokens [cu_seqlens_k[b], cu_seqlens_k[b + 1]): int32 prefix
     * sums of batch + 1 entries on the device, 16-byte aligned. Then seqlen_q and seqlen_k are
     * the MAX lengths (they size the grid), Q, O are [total_q, heads_q, head_dim] and K, V
     * [total_k, heads_kv, head_dim] (element at h * stride[1] + token * stride[2] + d;
     * stride[0] is not used), LSE is dense [heads_q, total_q], and causal masking is
     * bottom-right aligned per sequence. The prefix sums are device data the call cannot read
     * without a synchronisation: non-decreasing, cu[0] >= 0, cu_seqlens_q[batch] <= total_q,
     * cu_seqlens_k[batch] <= total_k and each length <= its max is the CALLER's contract. */
    KilnDevPtr cu_seqlens_q, cu_seqlens_k;
    int total_q, total_k;              /* tokens in Q/O and in K/V (varlen only) */
    /* A variant (NULL: plain attention): hooks and their runtime arguments, see above.
     * A variant that does not compile fails the call with KILN_ERR_COMPILE and the
     * located diagnostics in kiln_last_error(). The backward takes fwd.variant (the
     * forward's); its score_mod's derivative is derived by the compiler (grad) unless the
     * variant gives a score_mod_grad hook. */
    const KilnAttentionVariant *variant;
    /* A block mask (NULL: none): the forward visits only the key blocks it lists, full ones
     * with no mask evaluated, partial ones with the variant's mask_mod, the causal mask and
     * the bounds (KilnBlockMask above). Not with packed (varlen) batches. */
    const KilnBlockMask *block_mask;
} KilnAttentionParams;


/* Validate `p` without touching any device: KILN_OK, or KILN_ERR_USAGE /
 * KILN_ERR_UNSUPPORTED with a message naming the field (exactly the checks
 * kiln_attention_fwd makes first). */
KILN_API KilnStatus kiln_attention_check(const KilnAttentionParams *p);
/* Run the forward pass on `stream` (NULL: the default stream); asynchronous like
 * kiln_launch. The first call for a variant compiles it (through the on-disk
 * cache: seconds cold, milliseconds warm) and loads it; later calls on the same
 * device find it loaded. KILN_ERR_USAGE: bad arguments; KILN_ERR_UNSUPPORTED: a
 * head dim the program lacks, or heads_q above 65535 (batch * heads_q above 65535 runs
 * as several launches of whole batches). */
KILN_API KilnStatus kiln_attention_fwd(KilnDevice *dev, const KilnAttentionParams *p, KilnStream *stream);
/* The forward on the CPU interpreter (no device): the same call, validation,
 * program, variant and argument binding as kiln_attention_fwd, with HOST addresses
 * in p's pointer fields (q, k, v read; o and lse written; variant pointer args read,
 * KilnVariantArg.bytes each). Tiles: p's block_m/block_n, else 64 x 64. Slow (an
 * interpreter): for tests and checking a variant where no GPU is. KILN_ERR_KERNEL: an
 * access outside the buffers (e.g. a variant reading past its tensor). */
KILN_API KilnStatus kiln_attention_fwd_cpu(const KilnAttentionParams *p);
/* Bytes of the buffer a block mask `m` (block_q, block_kv, batch, heads set) needs for the
 * call p (its seqlen_q, seqlen_k); 0 when p or m is invalid (kiln_attention_block_mask_create
 * says why) or on overflow. */
KILN_API size_t kiln_attention_block_mask_size(const KilnAttentionParams *p, const KilnBlockMask *m);
/* Classify the blocks of the call p (its batch, heads_q, seqlen_q, seqlen_k, causal and
 * variant: the mask_mod and kv_start hooks and their runtime arguments; the tensors and
 * p->block_mask are not read) into m->data on `stream` (NULL: default), asynchronously: two
 * launches. Fills m's seqlen_q, seqlen_k, causal, num_q_blocks, num_kv_blocks and offset (and
 * block_q / block_kv when 0). The mask is then valid for forwards of the same lengths and
 * causal flag, with any variant whose mask it was made from (the caller's contract, as in
 * FlexAttention). KILN_ERR_USAGE naming the field, before any device call. */
KILN_API KilnStatus kiln_attention_block_mask_create(KilnDevice *dev, const KilnAttentionParams *p, KilnBlockMask *m,
                                                     KilnStream *stream);
/* The same on the CPU interpreter: m->data and the variant's pointer arguments are host
 * addresses (KilnVariantArg.bytes each). */
KILN_API KilnStatus kiln_attention_block_mask_create_cpu(const KilnAttentionParams *p, KilnBlockMask *m);
/* Unload the variants loaded for `dev` (NULL: for every device). Call it before
 * kiln_shutdown(dev), and not while another thread runs kiln_attention_fwd on dev. */
KILN_API KilnStatus kiln_attention_cache_clear(KilnDevice *dev);
/* How many variants are loaded for `dev` (NULL: for all devices). */
KILN_API int kiln_attention_cache_size(const KilnDevice *dev);
/* FlashAttention backward (lang/lib/attention_bwd.tile, embedded): given the forward's
 * inputs, its O and LSE, and dO, writes dQ, dK and dV (FlashAttention-2's algorithm:
 * P is recomputed from Q, K and LSE, never stored). Under GQA/MQA dK and dV are summed
 * over each K/V head's query heads. Rows that saw no key (LSE = -inf) get dQ = 0 and
 * add nothing to dK, dV. See docs/attention_api.md. */
typedef struct KilnAttentionBwdParams {
    /* The forward call as made: shapes, dtype, q, k, v, o, lse (all inputs here), their
     * strides, softmax_scale, causal, no_wgmma. Its block_m/block_n/num_warps/num_stages
     * are the forward's: validated, not used. */
    KilnAttentionParams fwd;
    KilnDevPtr dout;                   /* dO, like O: [batch, heads_q, seqlen_q, head_dim] (varlen: [total_q, ...]) */
    KilnDevPtr dq, dk, dv;             /* outputs, shaped like q, k, v (strides of their own) */
    int64_t dout_stride[3], dq_stride[3], dk_stride[3], dv_stride[3];
    /* Nonzero: dQ from a separate pass over query blocks, so every output is bit-identical
     * from run to run. Zero: dQ is accumulated with f32 atomic_add (faster; dQ's last bits
     * depend on the order the GPU runs the programs in). dK and dV are deterministic in both. */
    int deterministic;
    /* Device scratch the call may overwrite, kiln_attention_bwd_scratch_size(p) bytes,
     * 16-byte aligned (required when seqlen_q > 0): the per-row delta = rowsum(dO * O)
     * and, unless deterministic, the f32 dQ accumulator (varlen: rows are heads_q * total_q). The caller owns it, so calls on
     * different streams never share one behind the caller's back. */
    KilnDevPtr scratch;
    /* Tuning, 0 = the default for the head dim and the device (runtime/jit/attention_bwd.c):
     * block_n keys per dK/dV program with block_m query rows per step, block_m query rows
     * per dQ program with block_n keys per step; same ranges as the forward's. */
    int block_m, block_n, num_warps, num_stages;
} KilnAttentionBwdParams;

/* Bytes of scratch the call needs (0 when seqlen_q == 0 or on overflow). */
KILN_API size_t kiln_attention_bwd_scratch_size(const KilnAttentionBwdParams *p);
/* Validate `p` without touching any device: KILN_OK, or KILN_ERR_USAGE /
 * KILN_ERR_UNSUPPORTED with a message "kiln_attention_bwd: ..." naming the field
 * (fields of the forward's call as fwd.q, fwd.lse, ...). */
KILN_API KilnStatus kiln_attention_bwd_check(const KilnAttentionBwdParams *p);
/* Run the backward on `stream` (NULL: the default stream), asynchronously: up to three
 * launches in stream order. Variants are compiled on first use and kept per device like
 * the forward's (kiln_attention_cache_clear / _size cover both). */
KILN_API KilnStatus kiln_attention_bwd(KilnDevice *dev, const KilnAttentionBwdParams *p, KilnStream *stream);
/* The text of an embedded library program ("lang/lib/attention_fwd.tile"), e.g.
 * to compile a variant with hooks through kiln_module_compile; NULL if none. */
KILN_API const char *kiln_lib_source(const char *path);
/* ---------------- attention: decoding ---------------- */
/* Flash-decoding (lang/lib/attention_decode.tile): a few new query tokens per
 * sequence against a long KV cache, the keys split across CTAs and the partial
 * results combined by their log-sum-exps. Same conventions as the forward
 * (strides in elements, 16-byte aligned pointers, LSE in natural log). See
 * docs/attention_api.md, "Decoding". */

typedef struct KilnAttentionDecodeParams {
    KilnDtype dtype;                   /* of Q, K, V and O */
    int batch, heads_q, heads_kv;      /* heads_q % heads_kv == 0 */
    int seqlen_q;                      /* new tokens per sequence: 1..16 (0: nothing to do) */
    int head_dim;                      /* 32, 64, 96, 128 or 256 */
    /* Q, O: [batch, seqlen_q, heads_q, head_dim] through (batch, head, token) strides. */
    KilnDevPtr q, o;
    KilnDevPtr lse;                    /* required: f32, dense [batch, heads_q, seqlen_q] */
    int64_t q_stride[3], o_stride[3];
    /* K, V: contiguous (block_table 0): sequence b's key j at b * stride[0] + h * stride[1]
     * + j * stride[2], j < max_seqlen_k. Paged: key j of sequence b on page
     * block_table[b * block_table_stride + j / page_size], row j % page_size of
     * [num_pages, page_size, heads_kv, head_dim]: page * stride[0] + h * stride[1] +
     * row * stride[2]. */
    KilnDevPtr k, v;
    int64_t k_stride[3], v_stride[3];
    /* int32 [batch]: keys of each sequence (the new tokens' included), each in
     * [0, max_seqlen_k]. Query token t sees keys j <= t + len - seqlen_q (causal,
     * bottom-right aligned); a token that sees no key gets O = 0, LSE = -inf. */
    KilnDevPtr cache_seqlens;
    int max_seqlen_k;                  /* >= every cache_seqlens[b]: the cache's capacity per sequence */
    /* Paged cache: int32 [batch, >= cdiv(max_seqlen_k, page_size)] page indices, each in
     * [0, num_pages). The lengths and page indices are device data the call cannot read
     * without a synchronisation: keeping them in range is the CALLER's contract (out of
     * range reads other memory or faults). 0: contiguous cache. */
    KilnDevPtr block_table;
    int64_t block_table_stride;        /* elements between rows of the table */
    int page_size;                     /* 16, 32, 64, 128 or 256 */
    int num_pages;                     /* pages in K and V (sizes the stride checks) */
    float softmax_scale;               /* 0: 1 / sqrt(head_dim) */
    int causal;                        /* nonzero: the new tokens are causal among themselves */
    /* Key splits: 0 = from the shape and the SM count (kiln_attention_decode_splits), else
     * 1..KILN_DECODE_MAX_SPLITS. With more than one split the partial O (f32) and LSE go to
     * a scratch buffer: `workspace` (workspace_size bytes, kiln_attention_decode_workspace),
     * or when 0 the runtime's per-device scratch (grown on demand, freed at kiln_shutdown;
     * calls using it must be ordered: one stream, or synchronised). */
    int num_splits;
    KilnDevPtr workspace;
    size_t workspace_size;
    /* How more than one split is combined: 0 = automatic (KILN_DECODE_COMBINE_KERNEL, the
     * faster on the H200: docs/performance.md, decode);
     * KILN_DECODE_COMBINE_FUSED: the last split program of each (batch, KV head) row combines
     * in the same launch, counting finished splits in i32 tickets that every call leaves zero
     * (with a caller's workspace they are its first 4 * batch * heads_kv * row blocks bytes,
     * rounded up to 16, which must be zero before its first fused call, e.g. kiln_memset, and
     * again before a call with more (batch, KV head, row block) programs than any before);
     * KILN_DECODE_COMBINE_KERNEL: a second kernel. */
    int combine;
    int block_n, num_warps, num_stages;   /* tuning, 0: the defaults (runtime/jit/attention_decode.c) */
    /* A variant (NULL: none), as KilnAttentionParams.variant: its hooks see q_idx = the token's
     * position in its sequence (t + len - seqlen_q) and h as a [BLOCK_M, 1] tile of heads. */
    const KilnAttentionVariant *variant;
    /* A block mask (NULL: none; docs/attention_api.md, "Decoding with a block mask"): the mask
     * of the FULL problem, made by kiln_attention_block_mask_create with seqlen_q = seqlen_k >=
     * max_seqlen_k, the same causal flag, batch and heads_q (or 1 for a broadcast axis) and
     * normally the same variant. A token at position q reads the row of query block
     * q / block_q (FlexAttention decoding's rule); the call visits only that row's listed key
     * blocks, full ones without mask_mod, partial ones with it, and divides the listed
     * blocks among the splits. block_n (if set) must divide block_kv. */
    const KilnBlockMask *block_mask;
} KilnAttentionDecodeParams;

#define KILN_DECODE_MAX_SPLITS 128
#define KILN_DECODE_COMBINE_FUSED 1
#define KILN_DECODE_COMBINE_KERNEL 2

/* Validate `p` without touching any device (KILN_ERR_USAGE / KILN_ERR_UNSUPPORTED,
 * naming the field). */
KILN_API KilnStatus kiln_attention_decode_check(const KilnAttentionDecodeParams *p);
/* The split count kiln_attention_decode uses for `p` on a device of `sm_count` SMs:
 * p->num_splits when set, else as many splits as give at most two CTAs per SM, each split
 * reading at least 128 KB of K and V, rounded so that no split is empty; 1 when the
 * (batch, KV head) programs already fill 80% of the SMs. */
KILN_API int kiln_attention_decode_splits(const KilnAttentionDecodeParams *p, int sm_count);
/* Bytes of scratch that `splits` splits of `p` need (0 for one split): the partial O and
 * LSE, and with p->combine == KILN_DECODE_COMBINE_FUSED the tickets before them. */
KILN_API size_t kiln_attention_decode_workspace(const KilnAttentionDecodeParams *p, int splits);
/* Run the decode on `stream` (NULL: default); asynchronous like kiln_launch: the split
 * kernel and, with more than one split and the two-kernel combine, the combine. */
KILN_API KilnStatus kiln_attention_decode(KilnDevice *dev, const KilnAttentionDecodeParams *p, KilnStream *stream);

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
