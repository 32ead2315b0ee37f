/* kiln_attention.h — FlashAttention from C: the forward, the backward and
 * flash-decoding (paged KV caches), on packed variable-length batches too,
 * with attention variants (hooks in a .tile file, runtime params) and block
 * masks. Each call validates everything before it touches the device; each
 * has a `_check` form that touches no device, and a `_cpu` form on the
 * interpreter. See docs/attention_api.md.
 *
 * Self-contained: it includes kiln_compile.h (and through it kiln_runtime.h).
 * The code behind it is jit/attention*.c over the programs in lang/lib/.
 */
#ifndef KILN_ATTENTION_H
#define KILN_ATTENTION_H

#include <stddef.h>
#include <stdint.h>

#include "kiln_compile.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------- the forward ---------------- */
/* FlashAttention forward (lang/lib/attention_fwd.tile, embedded in the library)
 * in one call on device pointers: O = softmax(scale * Q K^T) V per (batch, head),
 * with its log-sum-exp. The call validates everything before it touches the
 * device, picks the compiled variant (dtype, head dim, causal, tile sizes) and
 * keeps it loaded per device. See docs/attention_api.md. */

/* KILN_E4M3: FP8 E4M3 (e4m3fn, torch.float8_e4m3fn) Q, K, V with descale factors; the
 * forward only (kiln_attention_fwd / _cpu; KilnAttentionParams' FP8 fields). */
typedef enum KilnDtype { KILN_F16, KILN_BF16, KILN_E4M3 } KilnDtype;

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
    /* Tuning, 0 = the default for the head dim and the device (a table in jit/attention.c).
     * block_m/block_n: powers of two in [16, 256]; num_warps: power of two in [1, 32];
     * num_stages: [1, 8]. Setting block_m or block_n alone leaves num_warps/num_stages
     * to the program's own rule for those tiles. */
    int block_m, block_n, num_warps, num_stages;
    /* Schedule options (KilnSchedule, kiln_compile.h): each > 0 on, < 0 off, 0 the default
     * table's choice for the head dim (jit/attention_tune.c; off with the caller's block_m /
     * block_n). A default gives way to an option set here that it conflicts with; two
     * options set here that conflict (tma and warp_specialize) are KILN_ERR_USAGE naming
     * both. pingpong: only kernels of 8 or more warps take turns. overlap: the forward's key
     * loops run rotated, each block's Q K^T in flight during the previous block's softmax;
     * not with a block mask (ignored there). tma: the 4-D maps K/V need are refused for now
     * (they faulted on the H200), so it gives the mbarrier hand-off (docs/tensor_cores.md 5c).
     * warp_specialize: a producer warpgroup issues the K/V copies. The backward takes
     * schedule.no_wgmma from its fwd; the other options are the forward's. */
    KilnSchedule schedule;
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
    /* The _cpu calls only (ignored on the device): the bytes of the host buffers behind q, k,
     * v, o, lse and, packed, cu_seqlens_q / cu_seqlens_k. Required there: a buffer smaller
     * than its shape and strides span is refused (KILN_ERR_USAGE naming the field, e.g.
     * "q_bytes"), and the interpreter bounds every access by these sizes. */
    size_t q_bytes, k_bytes, v_bytes, o_bytes, lse_bytes, cu_seqlens_q_bytes, cu_seqlens_k_bytes;
    /* Whole-sequence positions (context parallelism: a call on a shard of the queries against
     * a shard of the keys; docs/attention_api.md, "Positions"). positions = 0: local indices,
     * as always (causal bottom-right aligned; the offsets must be 0). Nonzero: query row i is
     * at position q_pos_offset + i and key j at kv_pos_offset + j; the variant's hooks see these
     * positions (score_mod / mask_mod's q_idx, kv_idx; kv_start gets the block's first query
     * position and returns a key position), and causal compares them: key j is visible to row
     * i iff kv_pos_offset + j <= q_pos_offset + i (a chunk of queries that ends where the keys
     * end, FlashAttention's bottom-right case, is q_pos_offset = kv_pos_offset + seqlen_k -
     * seqlen_q). Offsets >= 0, each plus its length within the kernels' 32-bit index. Where the
     * causal diagonal is the kernel's own (q_pos_offset - kv_pos_offset = seqlen_k - seqlen_q)
     * or every key is visible the call runs the plain kernels; otherwise the causal test is a
     * mask on every block (no key block above the diagonal is skipped). Packed batches: the
     * same offsets for every sequence; with causal they must be equal, and each sequence's
     * diagonal is then its own bottom-right one (exact when its query and key lengths agree).
     * With a block mask: the mask's blocks are the call's (local) blocks, classified under the
     * whole-sequence masks (e.g. a slice of a mask made for the whole sequence, as
     * kiln.distributed does): FULL blocks run without mask_mod, PARTIAL ones with the hooks at
     * positions; the mask's causal flag is the call's. kiln_attention_block_mask_create does not
     * take positions (its classifier runs on local indices). */
    int positions;
    int q_pos_offset, kv_pos_offset;
    /* FP8 (dtype KILN_E4M3; the forward only, not packed batches): Q, K and V hold e4m3 codes
     * (1 byte each, strides still in elements) whose values are code * descale. out_dtype is
     * O's dtype (KILN_F16 or KILN_BF16; the default 0 is KILN_F16). The descales are f32, on
     * the device (host memory for the _cpu call), 16-byte aligned and required:
     * descale_per_head = 0 gives one f32 per tensor; 1 gives q_descale [batch, heads_q] and
     * k_descale, v_descale [batch, heads_kv] (dense, b * heads + h; FlashAttention-3's
     * per-(batch, head) descales). The scores are (Q K^T) * softmax_scale * q_descale *
     * k_descale (the variant's hooks see them so), P is quantised to e4m3 as p * 256, and
     * O = (P V) / l * v_descale / 256 (docs/attention_api.md, "FP8"). The _descale_bytes:
     * the _cpu call's sizes of the three host buffers (each at least what it spans). */
    KilnDtype out_dtype;
    int descale_per_head;
    KilnDevPtr q_descale, k_descale, v_descale;
    size_t q_descale_bytes, k_descale_bytes, v_descale_bytes;
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
 * in p's pointer fields (q, k, v read; o and lse written; their sizes in p's q_bytes ...
 * cu_seqlens_k_bytes; variant pointer args read, KilnVariantArg.bytes each). Tiles: p's block_m/block_n, else 64 x 64. Slow (an
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
     * strides, softmax_scale, causal, schedule.no_wgmma. Its block_m/block_n/num_warps/num_stages
     * and its other schedule options are the forward's: validated, not used (the backward's
     * are `schedule` below). */
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
    /* Tuning, 0 = the default for the head dim and the device (jit/attention_bwd.c):
     * block_n keys per dK/dV program with block_m query rows per step, block_m query rows
     * per dQ program with block_n keys per step; same ranges as the forward's. */
    int block_m, block_n, num_warps, num_stages;
    /* scratch's size in bytes (required with scratch): at least what the call's plan writes,
     * kiln_attention_bwd_scratch_size_sm(p, the device's sm_version); a shorter one is refused
     * naming this field (kiln_attention_bwd_check refuses one below delta's part, which
     * every plan writes; kiln_attention_bwd one below its plan's). */
    size_t scratch_size;
    /* The _cpu call only (ignored on the device): the bytes of the host buffers behind dout,
     * dq, dk and dv (those behind q ... lse and the prefix sums are fwd's q_bytes ...
     * cu_seqlens_k_bytes; scratch's is scratch_size, there at least
     * kiln_attention_bwd_scratch_size(p)). Required there: a buffer smaller than its shape
     * and strides span is refused (KILN_ERR_USAGE naming the field, e.g. "dq_bytes"). */
    size_t dout_bytes, dq_bytes, dk_bytes, dv_bytes;
    /* Learnable params (docs/attention_api.md, "Learnable params"): the gradients of the
     * variant's differentiable params (`param X: *f32 differentiable;`), one entry per such
     * param, every one of them (nparam_grads = 0: none computed, the kernels unchanged). Each
     * grad is overwritten with dL/dX, bit-identical from run to run whatever `deterministic`
     * says (per-program partial sums reduced in a fixed order). They take scratch: see
     * kiln_attention_bwd_scratch_size. */
    const struct KilnParamGrad *param_grads;
    int nparam_grads;
    /* Nonzero: the dK/dV programs add the params' gradients straight into the grad buffers
     * with f32 atomics (FlexAttention's way: no scratch rows, no reduction launch; the last
     * bits depend on the order the programs run in). Zero: deterministic (above). */
    int param_grads_atomic;
    /* Schedule options (kiln_compile.h) of the dK/dV and dQ kernels: > 0 on, < 0 off, 0 the
     * table's row (jit/attention_tune.c; off with the caller's block_m / block_n); the
     * forward's fwd.schedule.no_wgmma applies too. Refused combinations are refused by
     * kiln_attention_bwd_check. The table's tma gives way where the streamed tensors (Q and
     * dO for dK/dV, K and V for dQ) cannot be mapped; the caller's does not. */
    KilnSchedule schedule;
    /* The dQ pass's own tuning (0: block_m, block_n, num_warps, num_stages above), so that a
     * caller (a benchmark sweep) can give the two kernels different tiles as the table's rows
     * do; same ranges. block_m also sets the row-wise kernels' blocks (delta, dQ conversion). */
    int dq_block_m, dq_block_n, dq_num_warps, dq_num_stages;
} KilnAttentionBwdParams;

/* A differentiable param's gradient (KilnAttentionBwdParams.param_grads). */
typedef struct KilnParamGrad {
    const char *name;          /* the variant's `param NAME: *f32 differentiable;` */
    KilnDevPtr grad;           /* f32 [numel], written (a host address in the _cpu call, numel * 4 bytes) */
    size_t numel;              /* the param's elements: 1 to 2^31 - 1; offsets outside [0, numel) add nothing */
} KilnParamGrad;

/* Bytes of scratch the call needs on any device: delta and, unless deterministic, the f32
 * dQ accumulator (0 when seqlen_q == 0, for a shape kiln_attention_bwd_check refuses, or
 * past size_t); with param_grads, before those, one f32 row of each param's numel per dK/dV
 * program (cdiv(seqlen_k, block_n or 16) * batch * heads_kv rows, each param's share rounded
 * up to 256 bytes). */
KILN_API size_t kiln_attention_bwd_scratch_size(const KilnAttentionBwdParams *p);
/* Bytes the plan kiln_attention_bwd picks on a device of `sm_version` (KilnDeviceInfo's,
 * e.g. 90) writes: without the dQ accumulator where that plan computes dQ in its own pass
 * (deterministic calls, and sm_90's default tiles for non-deterministic ones too), so
 * never more than kiln_attention_bwd_scratch_size; 0 as it. */
KILN_API size_t kiln_attention_bwd_scratch_size_sm(const KilnAttentionBwdParams *p, int sm_version);
/* Validate `p` without touching any device: KILN_OK, or KILN_ERR_USAGE /
 * KILN_ERR_UNSUPPORTED with a message "kiln_attention_bwd: ..." naming the field
 * (fields of the forward's call as fwd.q, fwd.lse, ...). */
KILN_API KilnStatus kiln_attention_bwd_check(const KilnAttentionBwdParams *p);
/* Run the backward on `stream` (NULL: the default stream), asynchronously: up to three
 * launches in stream order (each repeated per launch of whole batches when batch * heads_q
 * exceeds 65535, as the forward; not with a variant or a block mask, whose hooks see b). Variants are compiled on first use and kept per device like
 * the forward's (kiln_attention_cache_clear / _size cover both). */
KILN_API KilnStatus kiln_attention_bwd(KilnDevice *dev, const KilnAttentionBwdParams *p, KilnStream *stream);
/* The backward on the CPU interpreter (no device): the same validation, programs, variant,
 * block mask and argument binding as kiln_attention_bwd, with HOST addresses in p's pointer
 * fields (fwd.q, fwd.k, fwd.v, fwd.o, fwd.lse, dout read; dq, dk, dv written in place, the
 * bytes between strided rows untouched; scratch, kiln_attention_bwd_scratch_size(p) bytes,
 * overwritten) and their sizes (fwd.q_bytes ..., dout_bytes ... dv_bytes, scratch_size). Tiles: p's block_m/block_n, else 64 x 64 (a block mask's blocks when
 * smaller). Slow (an interpreter): for tests and autograd where no GPU is. KILN_ERR_KERNEL:
 * an access outside the buffers. */
KILN_API KilnStatus kiln_attention_bwd_cpu(const KilnAttentionBwdParams *p);
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
    int block_n, num_warps, num_stages;   /* tuning, 0: the defaults (jit/attention_decode.c) */
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
    /* The _cpu call only (ignored on the device): the bytes of the host buffers behind q, o,
     * lse, k, v, cache_seqlens and (paged) block_table. Required there: a buffer smaller than
     * its shape and strides span is refused (KILN_ERR_USAGE naming the field, e.g. "k_bytes"). */
    size_t q_bytes, o_bytes, lse_bytes, k_bytes, v_bytes, cache_seqlens_bytes, block_table_bytes;
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
/* The decode on the CPU interpreter (no device): the same validation, program, variant and
 * block mask as kiln_attention_decode, with HOST addresses in p's pointer fields (q, k, v,
 * cache_seqlens, block_table read; o and lse written in place) and their sizes (q_bytes ...
 * block_table_bytes; variant pointer args: KilnVariantArg.bytes). KILN_ERR_KERNEL: an access
 * outside the buffers. It runs one split (the
 * program's DIRECT form) whatever num_splits says, so workspace and combine are not used.
 * Slow (an interpreter). */
KILN_API KilnStatus kiln_attention_decode_cpu(const KilnAttentionDecodeParams *p);

#ifdef __cplusplus
}
#endif
#endif
