/* jit_internal.h — the jit layer's internal pieces (jit/): hashing,
 * the cache file format, launch-time specialisation and the embedded library
 * programs. The jit layer sits on the compile driver and the runtime core; it
 * reaches the core's internals through rt_internal.h. Not part of the public
 * API (tests/jit include it directly).
 */
#ifndef KILN_JIT_INTERNAL_H
#define KILN_JIT_INTERNAL_H

#include "kiln_attention.h"
#include "kiln_tune.h"
#include "rt_internal.h"
#include "compiler/support/schedule.h"

#include <pthread.h>
#include <stdbool.h>

/* ---- hashing (sha256.c) ---- */

typedef struct RtSha256 {
    uint32_t h[8];
    uint64_t len;
    uint8_t buf[64];
    size_t nbuf;
} RtSha256;
void rt_sha256_init(RtSha256 *s);
void rt_sha256_update(RtSha256 *s, const void *data, size_t n);
void rt_sha256_final(RtSha256 *s, uint8_t out[32]);
void rt_sha256_hex(const void *data, size_t n, char hex[65]);

/* ---- cache entry encoding (cache.c) ---- */

/* Serialise an entry for key `key_hex` (malloc'd bytes); parse one back,
 * verifying magic, key, sizes and checksum. Parsing never trusts the bytes. */
KilnStatus rt_cache_encode(const char *key_hex, const KilnCacheEntry *e, uint8_t **out, size_t *size);
KilnStatus rt_cache_decode(const char *key_hex, const uint8_t *data, size_t size, KilnCacheEntry *out);
/* The file name of an entry in `dir` (malloc'd). */
char *rt_cache_path(const char *dir, const char *key_hex);
/* The compiler's build identity, part of every cache key: a SHA-256 (hex) over
 * its sources, lang/lib programs, flags and LLVM version, generated at build
 * time (cmake/kiln_build_id.cmake -> kiln_build_id.c). */
extern const char rt_build_id_generated[];
const char *rt_build_id(void);
/* Tests only: pretend to be a build with identity `id` (NULL: the real one). */
void rt_set_build_id(const char *id);

/* ---- launch-time specialisation (specialize.c) ---- */

/* Like Triton, a module from kiln_module_compile is recompiled per launch
 * "key": which pointer arguments are 16-byte aligned, which integer
 * arguments are multiples of 16 and which integer arguments equal 1. Each
 * key's variant is compiled once (through the on-disk cache, with those facts
 * as KilnParamHints) and kept. */
#define RT_SPEC_DIV 16
#define RT_SPEC_MAX_PARAMS 256

/* Bit i set: parameter i is a pointer / integer whose argument is a multiple
 * of RT_SPEC_DIV and the module's own hints do not already say so.
 * ones bit i set: parameter i is an integer whose argument is 1 and the
 * module's hints do not already say so (never both bits for one i). */
typedef struct RtSpecKey {
    uint64_t bits[RT_SPEC_MAX_PARAMS / 64];
    uint64_t ones[RT_SPEC_MAX_PARAMS / 64];
} RtSpecKey;

typedef struct RtSpec RtSpec;
/* Compile and load the module's source with `hints`; *out is the variant's
 * only kernel (its module owned by the caller until released), *info its
 * signature (kernels stay opaque here, so CPU tests can pass fakes). */
typedef KilnStatus (*RtSpecCompileFn)(RtSpec *spec, const KilnParamHint *hints, int nhints, KilnKernel **out,
                                      const KilnKernelInfo **info);
typedef void (*RtSpecReleaseFn)(KilnKernel *k);

typedef struct RtVariant {
    RtSpecKey key;
    KilnKernel *kernel;             /* in its own module */
} RtVariant;

struct RtSpec {
    pthread_mutex_t lock;           /* guards the variant table */
    pthread_mutex_t compile_lock;   /* one variant compile at a time: each key compiles once */
    int on;                         /* kiln_module_set_specialize */
    int deferred;                   /* the module has no code of its own (rt_module_compile_deferred):
                                     * the empty key is a variant too, the generic kernel */
    char *path, *src;               /* copies */
    KilnCompileOptions opts;        /* deep copy; arch and emit resolved */
    RtSpecCompileFn compile;
    RtSpecReleaseFn release;
    KilnDevice *dev;                /* the module's device (for compile) */
    RtVariant *variants;
    int nvariants, cap;
    int ncompiles;                  /* variants compiled (tests, stats) */
};

/* The key of a launch of `info` with `args` (already checked against info). */
void rt_spec_key(const KilnKernelInfo *info, const KilnParamHint *hints, int nhints, const KilnArg *args,
                 int nargs, RtSpecKey *key);
bool rt_spec_key_empty(const RtSpecKey *key);
/* The module's hints plus NAME=RT_SPEC_DIV for every key bit and NAME==1
 * for every ones bit (malloc'd; names point into info). */
KilnStatus rt_spec_hints(const KilnKernelInfo *info, const RtSpecKey *key, const KilnParamHint *base, int nbase,
                         KilnParamHint **out, int *n);
/* A launch must keep the promises the module was compiled with: every hinted
 * argument must be a multiple of its hint, and equal 1 where a hint says
 * NAME==1. KILN_ERR_ARGS naming it if not. */
KilnStatus rt_check_hints(const KilnKernelInfo *info, const KilnParamHint *hints, int nhints, const KilnArg *args,
                          int nargs);
/* Same name, parameters and stages (smem and num_warps may differ per variant: a variant
 * with warp specialisation launches a producer warpgroup on top; kiln_launch launches each
 * variant with its own info's num_warps). */
bool rt_infos_match(const KilnKernelInfo *a, const KilnKernelInfo *b);
/* A new spec owning copies of path, src and opts (NULL on out of memory). */
/* kiln_module_compile without the up-front code: a module of the kernel's
 * signature (front end only; cached on disk) whose every launch runs the
 * variant its arguments select, compiled on first use (the empty key: the
 * generic kernel). One LLVM + ptxas compile per first launch instead of two.
 * Compile errors of the front end come back here, those of the backend at
 * the launch. KILN_SPECIALIZE=0 or KILN_DEFER=0 (A/B timings): exactly
 * kiln_module_compile. */
KilnStatus rt_module_compile_deferred(KilnDevice *dev, const char *path, const char *src,
                                      const KilnCompileOptions *opts, KilnModule **out);
RtSpec *rt_spec_new(const char *path, const char *src, const KilnCompileOptions *opts, RtSpecCompileFn compile,
                    RtSpecReleaseFn release);
void rt_spec_free(RtSpec *spec);    /* releases every variant */
/* The kernel to launch for `generic` (whose info it was compiled for) and
 * `args`: `generic` itself when specialisation is off or the key is empty,
 * else the key's variant, compiled on first use. A deferred spec never
 * returns `generic` (it has no code): off or empty, the empty key's variant
 * (the generic kernel, compiled on first use). Thread-safe. */
KilnStatus rt_spec_select(RtSpec *spec, KilnKernel *generic, const KilnKernelInfo *info, const KilnArg *args,
                          int nargs, KilnKernel **run);
/* Whether a launch with `args` would compile first (its variant, or a
 * deferred module's generic kernel, not compiled yet); false when the hints
 * refuse the arguments (the launch reports it). Thread-safe, microseconds. */
bool rt_spec_pending(RtSpec *spec, const KilnKernelInfo *info, const KilnArg *args, int nargs);
/* The fast path of a launch whose code is compiled: the kernel rt_spec_select would run
 * for `args` when that needs no compile (`generic` itself without a spec, or when the spec
 * runs it), so the caller launches it directly, without the module's select; NULL when a
 * compile is due or the module's hints refuse the arguments (launch `generic`: its select
 * compiles or reports). Thread-safe, one key and one table scan. */
KilnKernel *rt_spec_ready(RtSpec *spec, KilnKernel *generic, const KilnKernelInfo *info, const KilnArg *args,
                          int nargs);
/* The spec of k's module (kiln_module_compile / rt_module_compile_deferred), else NULL. */
RtSpec *rt_kernel_spec(const KilnKernel *k);
/* Variants a module holds (0 for loaded PTX / cubin); GPU tests use it. */
int rt_module_variants(KilnModule *m);
/* The compile request of variant `i` of `m` (in creation order): *opts is the
 * module's (arch and emit resolved) with hints = *hints (malloc'd, the
 * module's own plus the key's; free it), *path and *src the module's. GPU
 * tests recompile it to PTX to look at the chosen variant's code.
 * KILN_ERR_NOT_FOUND when there is no such variant. */
KilnStatus rt_module_variant_request(KilnModule *m, int i, KilnCompileOptions *opts, KilnParamHint **hints,
                                     const char **path, const char **src);

/* The module hooks of compiled modules (specialize.c): rt_spec_attach(m, s)
 * makes m own s (freed with it) and route its launches through rt_spec_select. */
void rt_spec_attach(KilnModule *m, RtSpec *s);

/* ---- attention entry points (attention.c; attention_bwd.c shares them) ---- */

/* kiln_set_error(s, "<api>: <message>"); returns s. */
KilnStatus rt_attn_error(const char *api, KilnStatus s, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The forward's checks of sizes, dtype, scale and tuning (no tensors), messages prefixed by api. */
KilnStatus rt_attn_check_shape(const char *api, const KilnAttentionParams *p);
/* Tuning fields: 0 (default) or block sizes powers of two in [16, 256], warps a power
 * of two in [1, 32], stages in [1, 8]. */
KilnStatus rt_attn_check_tuning(const char *api, int block_m, int block_n, int num_warps, int num_stages);
/* Whether two [batch, heads, seq, d] tensors' tensor maps can be encoded (attention.c). */
bool rt_attn_tma_encodable(KilnDevPtr a, const int64_t *sa, KilnDevPtr b, const int64_t *sb);
/* One tensor of nb x nh x ns x d elements of `elem` bytes: non-null, 16-byte aligned,
 * strides >= 0 (an output's > 0 where its extent is > 1), offsets within 64 bits.
 * st NULL: a dense buffer, only the pointer is checked. */
KilnStatus rt_attn_check_tensor(const char *api, const char *name, KilnDevPtr ptr, const int64_t st[3], int nb,
                                int nh, int ns, int d, int elem, bool is_output);
/* A parameter named stride_<t><d> (t one of the n tensor names, d in b h m n; m and n
 * both name the sequence stride): *v = strides[t][d] and true; false for any other name. */
bool rt_attn_stride_of(const char *name, const char *const *tensors, const int64_t *const *strides, int n,
                       int64_t *v);
/* Packed variable-length batches: cu_seqlens_q or cu_seqlens_k set. */
bool rt_attn_varlen(const KilnAttentionParams *p);
/* Nothing to compute: seqlen_q == 0, or packed with total_q == 0. */
bool rt_attn_no_rows(const KilnAttentionParams *p);
/* Q/O (is_kv false) or K/V (true) of the call p, checked by rt_attn_check_tensor over
 * [batch, heads, seqlen] or, packed, [total tokens, heads] (stride[0] not used). */
KilnStatus rt_attn_check_seq_tensor(const char *api, const KilnAttentionParams *p, const char *name, KilnDevPtr ptr,
                                    const int64_t st[3], bool is_kv, bool is_output);
/* An integer argument for the program's parameter prm (its kind), range-checked. */
KilnStatus rt_attn_int_arg(const char *api, const KilnParam *prm, int64_t v, KilnArg *a);
/* The argument of one of the programs' scalar parameters from the forward's params:
 * heads, heads_kv, seqlen_q, seqlen_k, total_q (range-checked), sm_scale (0: 1/sqrt(head_dim));
 * any other name is an internal error naming it. */
KilnStatus rt_attn_scalar_arg(const char *api, const KilnAttentionParams *p, const KilnParam *prm, KilnArg *a);

/* One compiled kernel of a library program: found in the per-device in-process cache
 * (kiln_attention_cache_clear/size count every entry, forward and backward), else
 * compiled through kiln_module_compile and kept. */
/* The checks every entry point makes after validation: a device, and a stream of it. */
KilnStatus rt_attn_check_call(const char *api, const KilnDevice *dev, const KilnStream *stream);
/* One call's launches (the backward's kernels, decode's split and combine), their
 * arguments bound once: rt_attn_prepare binds every kernel's arguments and finds the
 * compiled kernel they select (rt_spec_ready: on a warm call that is all it does); when
 * two or more kernels have code to compile, it compiles them at once, one thread each (a
 * cold call takes the slowest one's time instead of the sum). rt_attn_launch_call then
 * launches kernel i with those arguments, without binding or selecting again; a kernel
 * left to compile (the only one, or one whose compile failed on a thread) compiles or
 * reports its error at its launch. A failing bind is returned before anything launches.
 * At most RT_ATTN_MAX_PREPARE kernels of RT_ATTN_MAX_ARGS parameters. */
#define RT_ATTN_MAX_PREPARE 4
#define RT_ATTN_MAX_ARGS 64
typedef struct RtAttnCall {
    int n;
    KilnKernel *k[RT_ATTN_MAX_PREPARE];     /* as given: the modules' kernels */
    KilnKernel *run[RT_ATTN_MAX_PREPARE];   /* what the arguments select, compiled; NULL: not yet */
    KilnArg args[RT_ATTN_MAX_PREPARE][RT_ATTN_MAX_ARGS];
    int nargs[RT_ATTN_MAX_PREPARE];
} RtAttnCall;
KilnStatus rt_attn_prepare(const char *api, KilnKernel *const *ks, int n,
                           KilnStatus (*bind)(const void *ctx, const KilnParam *prm, KilnArg *a), const void *ctx,
                           RtAttnCall *call);
KilnStatus rt_attn_launch_call(const RtAttnCall *call, int i, const int grid[3], KilnStream *stream);
/* Launch k on grid with each runtime parameter's argument from bind(ctx, param) (by name). */
KilnStatus rt_attn_launch(const char *api, KilnKernel *k, const int grid[3], KilnStream *stream,
                          KilnStatus (*bind)(const void *ctx, const KilnParam *prm, KilnArg *a), const void *ctx);

/* A library program's kernel compiled with some defines and a schedule. The
 * defines' values live with the caller (the backward's plan) or in vals
 * (rt_attn_variant_define). */
#define RT_ATTN_MAX_DEFINES 12

/* A call's KilnAttentionVariant, opened (attention_variant.c): its text (the caller's,
 * the embedded file's, or read from disk: owned), its name, and a digest of everything
 * that makes it compile differently (text, path, defines, include dirs), which the
 * in-process cache key carries. */
typedef struct RtAttnVarSrc {
    const KilnAttentionVariant *var;
    const char *path, *text;
    char *owned;              /* text read from disk (freed by rt_attn_var_close) */
    char digest[65];
} RtAttnVarSrc;
/* Validate var (NULL: *vs stays empty, KILN_OK) and open it. KILN_ERR_USAGE naming the
 * field; KILN_ERR_NOT_FOUND / KILN_ERR_IO for a path that cannot be read. */
/* The variant's own fields (NULL: none): source or path, every count/array pair, NULL
 * names, duplicate args. Every _check function runs it (through rt_attn_check_shape). */
KilnStatus rt_attn_var_check(const char *api, const KilnAttentionVariant *var);
KilnStatus rt_attn_var_open(const char *api, const KilnAttentionVariant *var, RtAttnVarSrc *vs);
void rt_attn_var_close(RtAttnVarSrc *vs);
/* The argument of a kernel parameter that none of the program's own names bind: the
 * variant's argument of that name, converted to the parameter's kind (range-checked).
 * KILN_ERR_USAGE when the variant gives none or one of another kind; without a variant,
 * the internal error of an unknown parameter. */
KilnStatus rt_attn_var_arg(const char *api, const KilnAttentionVariant *var, const KilnParam *prm, KilnArg *a);
/* Every argument of var must name a parameter of one of the call's kernels: a misspelt
 * name would otherwise be ignored silently. */
KilnStatus rt_attn_var_check_used(const char *api, const KilnAttentionVariant *var, const KilnKernelInfo *const *infos,
                                  int n);
/* The text compiled for `program` ("lang/lib/attention_fwd.tile") with the variant:
 * the variant's text and `import "attention_fwd";` (malloc'd; NULL: out of memory). */
char *rt_attn_var_root(const RtAttnVarSrc *vs, const char *program);
/* Whether the variant compiled with program binds hook `name`: a define of that name,
 * or a helper of that name in its modules. */
bool rt_attn_var_binds(const RtAttnVarSrc *vs, const char *program, const char *name);

/* ---- position offsets (attention_pos.c) ---- */
/* q_pos_offset / kv_pos_offset of p: >= 0, in range, not with a block mask, equal with causal
 * packed batches (rt_attn_check_shape runs it). */
KilnStatus rt_attn_pos_check(const char *api, const KilnAttentionParams *p);
/* The derived variant a call with offsets runs: the caller's text, the generated wrappers,
 * the caller's defines and args and the offsets' args (owned here). */
typedef struct RtAttnPos {
    KilnAttentionVariant var;
    char *source;
    KilnDefine *defines;
    KilnVariantArg *args;
    int ndefines, nargs;
} RtAttnPos;
/* *out = *p with the offsets applied: offsets 0, and when they matter (causal with unequal
 * offsets, or a variant with hooks) the derived variant in *pos and causal as it runs. Free
 * *pos after the call (rt_attn_pos_free), on every path. */
KilnStatus rt_attn_pos_apply(const char *api, const KilnAttentionParams *p, KilnAttentionParams *out, RtAttnPos *pos);
void rt_attn_pos_free(RtAttnPos *pos);
/* Whether a variant argument is one of the generated ones (kiln_pos_*). */
bool rt_attn_pos_generated(const char *name);

/* ---- the attention calls' default schedules (attention_tune.c: one table) ---- */
typedef enum RtTuneCall { RT_TUNE_FWD, RT_TUNE_BWD_DKDV, RT_TUNE_BWD_DQ, RT_TUNE_DECODE } RtTuneCall;
typedef struct RtTuneRow {
    RtTuneCall call;
    int min_sm, head_dim, causal, max_n;   /* matches: see rt_attn_tune */
    int block_m, block_n, num_warps, num_stages;
    KilnSchedule schedule;                 /* the default options (> 0 on), resolved with the call's */
    int dq_pass;                           /* RT_TUNE_BWD_DQ: 1: the dQ pass even when not deterministic */
} RtTuneRow;
/* The last row of `call` with this head dim, min_sm <= sm_version, causal -1 or the
 * call's, max_n 0 or >= seqlen_q; NULL when none. */
const RtTuneRow *rt_attn_tune(RtTuneCall call, int sm_version, int head_dim, int causal, int seqlen_q);
/* Row i of the table, NULL past the last (tests walk it). */
const RtTuneRow *rt_attn_tune_row(int i);

/* ---- the autotuner's stored winners (tune_store.c) ---- */
/* Stores report r's winner `config` ("NAME=VALUE ...") under r->device and r->arch;
 * *path (malloc'd) names the entry. */
KilnStatus rt_tune_store(const char *config, const char *src, const KilnTuneReport *r, char **path);
/* Resident CTAs per SM of a kernel (tune.c); 0: it cannot run. */
int rt_tune_occupancy(int regs, int smem, int warps, int sram_block, int sram_sm);
/* A runtime key's bucket: the next power of two >= n. */
long long rt_tune_bucket(long long n);
/* The tuned row of an attention call's kernel (`kernel` of the call's program: the
 * forward's attn_fwd_f16 / _bf16, the backward's attn_bwd_dkdv_* under its compute_dq, and
 * attn_bwd_dq_*), remembered per process; false: none stored (the table decides). The
 * fields a winner does not name (dq_pass, and the options of the backward's kernels) are
 * `base`'s, the table's row (NULL: zero). */
bool rt_tune_attn_row(RtTuneCall call, const char *kernel, int sm_version, int head_dim, int causal, int compute_dq,
                      int seqlen_q, const RtTuneRow *base, RtTuneRow *out);
/* Tests: forget the remembered look-ups. */
void rt_tune_memo_clear(void);

typedef struct RtAttnVariant {
    const char *program;      /* "lang/lib/attention_bwd.tile" (embedded) */
    const char *kernel;
    KilnDefine defines[RT_ATTN_MAX_DEFINES];
    int ndefines;
    int num_warps, num_stages;             /* 0: the program's own setting */
    KilnSchedule schedule;                 /* resolved (each 0 or 1): KilnCompileOptions.schedule */
    char vals[RT_ATTN_MAX_DEFINES][24];    /* rt_attn_variant_define's values */
    /* With a variant (vs non-NULL and open): compiled from rt_attn_var_root with the
     * variant's defines after these. plain_scores: add PLAIN_SCORES=true unless the
     * variant binds score_mod (the forward's fast path). The backward's score_mod_grad
     * defaults to grad(score_mod), derived by the compiler; q_end: add Q_END=true when the
     * variant binds q_end (the dK/dV kernels: query blocks past it are skipped). */
    const RtAttnVarSrc *vs;
    bool plain_scores, q_end;
} RtAttnVariant;
void rt_attn_variant_init(RtAttnVariant *v, const char *program, const char *kernel, int num_warps,
                          int num_stages, const KilnSchedule *schedule);
/* Append -D name=value (an int, or true/false when is_bool). */
void rt_attn_variant_define(RtAttnVariant *v, const char *name, int value, bool is_bool);
KilnStatus rt_attn_get_kernel(KilnDevice *dev, const char *api, const RtAttnVariant *v, KilnKernel **out);
/* What v compiles: source, its name, options (defines point into the request). */
typedef struct RtAttnRequest {
    const char *path, *src;
    char *owned;                               /* the variant's root text (free it) */
    KilnDefine defines[2 * RT_ATTN_MAX_DEFINES];
    int ndefines;
    KilnCompileOptions opts;
} RtAttnRequest;
KilnStatus rt_attn_compile_request(const char *api, const RtAttnVariant *v, RtAttnRequest *r);
/* What kiln_attention_fwd compiles for `p` (no variant) on a device of `sm_version`: the
 * tuning table's choice (or p's tiles), the pingpong and no_wgmma options. v holds the
 * defines r points into. */
KilnStatus rt_attn_fwd_request(int sm_version, const KilnAttentionParams *p, RtAttnVariant *v, RtAttnRequest *r);

/* ---- a kernel on the CPU interpreter (run_cpu.c) ---- */
/* opts' kernel compiled to Tile IR (the front end, once) and its signature, for
 * binding arguments by name before running it (kiln_run_cpu's two steps). */
typedef struct RtCpuKernel RtCpuKernel;
/* A compile error: KILN_ERR_COMPILE etc. with the diagnostics, after "<api>: cannot build
 * <path>:" when api is given; KILN_ERR_USAGE unless the source has exactly one kernel
 * (or opts->kernel names one). */
KilnStatus rt_cpu_compile(const char *api, const char *path, const char *src, const KilnCompileOptions *opts,
                          RtCpuKernel **out);
const KilnKernelInfo *rt_cpu_kernel_info(const RtCpuKernel *k);
/* kiln_run_cpu's run: the same checks and buffer semantics. */
KilnStatus rt_cpu_run(const RtCpuKernel *k, const int grid[3], const KilnHostArg *args, int nargs);
void rt_cpu_free(RtCpuKernel *k);

/* ---- the CPU interpreter's runs of the attention calls (attention.c) ---- */
/* Every pointer argument of a variant with a pointer param needs its bytes (KILN_ERR_USAGE). */
KilnStatus rt_attn_var_check_bytes(const char *api, const KilnAttentionVariant *var);
/* The host buffer of the variant's pointer argument `name` (IN, its bytes); an empty one
 * for a name it does not give. */
KilnHostArg rt_attn_var_buffer(const KilnAttentionVariant *var, const char *name, KilnDevPtr ptr);
/* Compile v's kernel to IR and run it on the interpreter over grid: each runtime parameter's
 * argument from bind(ctx, param) (by name), pointers as the host buffers buffer(ctx, name,
 * address) gives. check_used: a variant whose arguments must all be used (NULL: none). */
KilnStatus rt_attn_run_cpu(const char *api, const RtAttnVariant *v, const int grid[3],
                           KilnStatus (*bind)(const void *ctx, const KilnParam *prm, KilnArg *a),
                           KilnHostArg (*buffer)(const void *ctx, const char *name, KilnDevPtr ptr), const void *ctx,
                           const KilnAttentionVariant *check_used,
                           KilnStatus (*check)(const void *ctx, const KilnKernelInfo *info));

/* ---- block masks (attention_block_mask.c) ---- */
/* p->block_mask against the forward call p (block_m / block_n: the caller's tiles, 0 = any):
 * made by kiln_attention_block_mask_create for these lengths and causal flag, its blocks
 * multiples of the tiles, its buffer large enough. KILN_ERR_USAGE naming the field. */
KilnStatus rt_attn_bm_check(const char *api, const KilnAttentionParams *p, int block_m, int block_n);
/* The argument for a parameter of attn_fwd_bm_* / attn_bwd_*_bm_*: the mask's arrays (KV_NUM,
 * KV_IDX, FULL_KV_NUM, FULL_KV_IDX, Q_NUM, ...) and bm_stride_b, bm_stride_h, bm_num_kv_blocks
 * (forward rows), bm_tstride_b, bm_tstride_h, bm_num_q_blocks (transposed rows). False (and *st
 * untouched) for any other name, or without a block mask. */
bool rt_attn_bm_arg(const KilnAttentionParams *p, const KilnParam *prm, KilnArg *a, KilnStatus *st);
/* Bytes of the mask's array whose parameter name is `name` (KV_NUM, ..., CLASS); 0 for others. */
size_t rt_attn_bm_array_bytes(const KilnBlockMask *m, const char *name);

/* The backward's launches for a device of compute capability sm_version (attention_bwd.c):
 * up to three kernels in stream order (preprocess, dK/dV, then dQ or the dQ conversion;
 * a kernel over an empty axis is left out), each with its grid. Filled in place (the
 * variants point into the plan's own storage). p must have passed kiln_attention_bwd_check. */
typedef struct RtAttnBwdPlan {
    int n;
    RtAttnVariant k[3];
    int grid[3][3];             /* one launch's: axis 1 is launch_batch * heads[i] */
    int heads[3];               /* heads_q or heads_kv: each program's second grid factor */
    int launch_batch;           /* batches per launch (rt_attn_bwd_launch_batch); 0: refused */
    bool dq_acc;                /* the plan uses the f32 dQ accumulator (scratch after delta) */
    char name[3][32];
    char value[3][RT_ATTN_MAX_DEFINES][16];
    int dkdv;                   /* k[dkdv] is the dK/dV kernel; -1: none (no keys) */
    int dkdv_rows;              /* its programs: the rows of each learnable param it writes */
} RtAttnBwdPlan;
void rt_attn_bwd_plan(int sm_version, const KilnAttentionBwdParams *p, RtAttnBwdPlan *plan);
/* grid axis 1 holds at most this many programs (batch * heads) */
#define RT_ATTN_MAX_GRID_Y 65535
/* Batches per launch of the backward: batch when batch * heads_q fits grid axis 1, else
 * the largest count keeping every per-launch pointer advance 16-byte aligned, 0 if none. */
int rt_attn_bwd_launch_batch(const KilnAttentionBwdParams *p);
/* The launch argument of a backward kernel's parameter `prm` (by its name) for the call
 * *(const KilnAttentionBwdParams *)ctx: what kiln_attention_bwd passes (tests check it). */
KilnStatus rt_attn_bwd_arg(const void *ctx, const KilnParam *prm, KilnArg *a);

/* Learnable params (attention_bwd_params.c): p->param_grads checked without a device; the
 * bytes their rows take at the start of the scratch (SIZE_MAX: too many); the dK/dV kernel's
 * X__grad / X__numel arguments (false: not one); its parameters against p's entries; the
 * rows cleared before it and reduced into the gradients after it (device, interpreter); the
 * interpreter's host buffer of X__grad. */
KilnStatus rt_attn_pg_check(const char *api, const KilnAttentionBwdParams *p);
size_t rt_attn_pg_bytes(const KilnAttentionBwdParams *p);
bool rt_attn_pg_arg(const char *api, const KilnAttentionBwdParams *p, const KilnParam *prm, KilnArg *a,
                    KilnStatus *st);
KilnStatus rt_attn_pg_check_kernel(const char *api, const KilnAttentionBwdParams *p, const KilnKernelInfo *info);
KilnStatus rt_attn_pg_zero(KilnDevice *dev, const char *api, const KilnAttentionBwdParams *p, KilnStream *stream);
KilnStatus rt_attn_pg_reduce(KilnDevice *dev, const char *api, const KilnAttentionBwdParams *p, int nrows,
                             KilnStream *stream);
void rt_attn_pg_zero_cpu(const KilnAttentionBwdParams *p);
KilnStatus rt_attn_pg_reduce_cpu(const char *api, const KilnAttentionBwdParams *p, int nrows);
bool rt_attn_pg_buffer(const KilnAttentionBwdParams *p, const char *name, KilnDevPtr ptr, KilnHostArg *out);

/* The decode's split kernel for `splits` splits (attention_decode.c): DIRECT for one, FUSED
 * when asked; `vs` (open) the variant's hooks. Filled in place (its defines point into it). */
void rt_attn_decode_split_variant(const KilnAttentionDecodeParams *p, int splits, bool fused, const RtAttnVarSrc *vs,
                                  RtAttnVariant *v);
/* The argument of the one-split (DIRECT) decode kernel's parameter `prm` for the call
 * *(const KilnAttentionDecodeParams *)ctx; the scratch pointers it never reads get stand-ins. */
KilnStatus rt_attn_decode_direct_arg(const void *ctx, const KilnParam *prm, KilnArg *a);
/* Programs of the decode's grid axis 2: the packed rows (query heads per KV head x tokens) in BLOCK_M tiles. */
int rt_attn_decode_row_blocks(const KilnAttentionDecodeParams *p);
/* Bytes a tensor of nb x nh x ns rows of d elements of `elem` bytes spans under its
 * (b, h, s) strides; 0 when empty (attention.c). */
size_t rt_attn_span_bytes(const int64_t st[3], int nb, int nh, int ns, int d, int elem);
/* The host buffer the _cpu calls bind for an empty tensor (never read): 16 bytes of their own,
 * per thread (attention_cpu.c). */
KilnHostArg rt_attn_cpu_stand_in(void);

#endif
