/* gpuir.h — the GPU IR layer (compiler/gpuir): the GPU passes (one table, one
 * signature), layouts (layout.h), tensor cores, SRAM allocation, async-copy
 * pipelining and TMA plans, and the readers of those plans that the LLVM
 * lowering (compiler/codegen) uses. The layer's one internal header (with
 * layout.h, which it includes). See docs/tensor_cores.md for the design; each
 * file's header comment has the details of its part. LLVM-free by rule
 * (tests/layers/check_layers.py), so passes run and are tested without LLVM.
 *
 * The passes write their decisions on the IR (layouts in IrValue.layout,
 * pipeline and SRAM attributes: ir.h's IR_ATTR_*); the lowering reads them
 * back through GpTcState, a cache built from the IR (gp_tc_from_ir).
 *
 * Prefix: gp_ (types Gp..., macros GP_...), this layer's own; the LLVM lowering's is cg_.
 */
#ifndef KILN_GPUIR_H
#define KILN_GPUIR_H

#include "layout.h"
#include "../support/schedule.h"

/* ---- pass_sram_alloc.c: placement of shared-memory buffers ----
 * A buffer lives over the inclusive interval [start, end] of op positions
 * (a linear numbering of the function's ops, see gp_number_ops). Two buffers
 * interfere when their intervals and their byte ranges both overlap. */
typedef struct GpSmemBuf {
    const char *what;      /* "convert_layout", "reduce", "mma operand A", ... */
    IrOp *op;              /* the op whose attributes hold it (smem.*) */
    int value_id;          /* the IR value it serves (-1: none) */
    int64_t bytes;         /* 64-bit: stages x slot bytes of a large tile pass 2^31 before the limit check */
    int align;             /* power of two */
    int start, end;        /* live interval, op positions, inclusive */
    int64_t offset;        /* placement (bytes from the start of dynamic SRAM) */
} GpSmemBuf;

/* Largest first, first fit: every buffer goes at the lowest aligned offset
 * where it overlaps no already placed buffer that is live at the same time.
 * Returns the total size (end of the highest buffer, 16-byte rounded). */
int64_t gp_sram_place(GpSmemBuf **bufs, int n);
/* True when no two buffers interfere; else names the first pair in `why`. */
bool gp_sram_check(GpSmemBuf *const *bufs, int n, StrBuf *why);

/* ---- the pipeline plan (pass_pipeline.c decides, pipeline_plan.c reads it back, codegen/cg_pipeline.c lowers) ---- */
#define GP_PIPE_MAX_CONVERTS 4
/* ---- tma_plan.c: which pipelined loads a tiled tensor map serves exactly ---- */
#define GP_TMA_TERMS 24
#define GP_TMA_ATOMS 4
#define GP_TMA_MAX_MAPS 8
/* k * at[0] * ... * at[nat-1] * (index along tile dim `dim`, or 1 when dim < 0) */
typedef struct GpTmaTerm {
    int64_t k;
    int nat;
    const IrValue *at[GP_TMA_ATOMS];   /* uniform scalars, sorted by id */
    int dim;
} GpTmaTerm;
typedef struct GpTmaPoly {
    int n;
    GpTmaTerm t[GP_TMA_TERMS];
} GpTmaPoly;
/* A launch-time value: (param >= 0 ? the kernel's runtime parameter `param` : 1) * k. */
typedef struct GpTmaVal {
    int param;
    int64_t k;
} GpTmaVal;
#define GP_TMA_MAX_RANK 5
typedef struct GpTmaPlan {
    int base_param;        /* the pointer parameter the map's global address is */
    IrElem elem;
    int elem_bytes;
    int rank;              /* 2, plus one per uniform offset (batch, head: box 1) */
    GpTmaVal dims[GP_TMA_MAX_RANK];         /* elements; [0] the contiguous dim, [1] the tile's rows */
    GpTmaVal strides[GP_TMA_MAX_RANK - 1];  /* bytes, of dims 1 .. rank-1 */
    int box[GP_TMA_MAX_RANK];               /* {64, rows, 1, ...}: 128 bytes x rows, SWIZZLE_128B */
    int nboxes;            /* contiguous extent / 64: the slot's column blocks */
    int box_bytes;
    GpTmaPoly coord[GP_TMA_MAX_RANK];       /* the tile's origin in the map, uniform (i32) */
    uint64_t nonneg_params;   /* parameters (bit i: param i) the coordinates are >= 0 only if they are */
    const IrValue *guard;     /* a uniform i1 the mask ANDs in (splat), or NULL: false reads zeros */
} GpTmaPlan;
/* Whether a 2-D tiled tensor map reads exactly what load `ld` does into its
 * pipelined slot (fast_dim: the slot's contiguous dim); the recipe in *out. */
bool gp_tma_plan(const IrFunc *f, const IrOp *ld, int fast_dim, GpTmaPlan *out);
int  gp_tma_nmaps(const IrFunc *f);   /* kernel attribute tma.maps (0: none) */

typedef struct GpPipeLoad {
    IrOp *load;
    /* Its convert_layouts to A/B-operand layouts: one (possibly through the
     * cast), or, with no cast, every use of the load (up to
     * GP_PIPE_MAX_CONVERTS, A and B mixed: attention's backward reads Q and
     * dO both as dot(q, k^T)'s A and as dot(ds^T, q)'s B). Each reads the
     * same swizzled slot with ldmatrix (.trans where its K is not contiguous)
     * or a wgmma descriptor. */
    IrOp *converts[GP_PIPE_MAX_CONVERTS];
    IrOp *trans[GP_PIPE_MAX_CONVERTS];   /* the trans between the load and converts[i], or NULL:
                                            the dK/dV step reads Q as Q^T's K-major B and Q's
                                            MN-major B; the convert reads the slot transposed */
    int nconverts;
    IrOp *cast;            /* NULL, or an f16 <-> bf16 cast between load and its one convert
                              (applied after ldmatrix) */
    int fast_dim;          /* value dim contiguous in SRAM (the load layout's fastest) */
    int slot_bytes;        /* one stage */
    GpSmemBuf *buf;        /* num_stages slots (pass_sram_alloc.c) */
    int tma_map;           /* tma.map: the kernel's tensor map that copies it (tma_plan.c), -1 none */
    GpTmaPlan tma;
} GpPipeLoad;

typedef struct GpPipeLoop {
    IrOp *loop;
    int stages;
    GpPipeLoad *loads;
    int nloads;
    IrOp **slice;          /* body ops the loads' operands depend on, in body order */
    int nslice;
    bool slice_loads;      /* the slice reads memory (e.g. a block table) */
    /* Per slice op (loops whose slice loads only): its result is used in the body only by
     * the pipelined loads and by slice ops dead in place themselves, so only the copies
     * for later iterations need it and the body skips it (gp_pipeline_dead_in_place). */
    bool *dead_in_place;
    /* Where the prologue (the copies of iterations 0 .. S-2) is issued: before
     * this op of the loop's block, the earliest point where everything the
     * copies need is defined and no write to memory or region op intervenes
     * (attention issues its first K/V copies before it loads Q); the loop
     * itself when nothing earlier qualifies. issue_pos: its position in the
     * SRAM allocator's numbering (the stage buffers are live from there). */
    IrOp *issue_at;
    int issue_pos;
    bool issued;           /* lowering: the prologue is out */
    /* The body's dot marked wgmma.pending (its wgmma group stays in flight
     * into the next iteration), or NULL. `ahead`: how many iterations ahead
     * the copies run: S - 1, or S - 2 with such a dot (the slot of iteration
     * i - 1 is still being read while iteration i refills one). */
    IrOp *pending_dot;
    int ahead;
    /* pipeline.mbarrier: the stages are handed over through mbarriers
     * (cg_mbarrier.c): full[s] at mbar->offset + 8 s, empty[s] after them;
     * `mbar` is the loop's own buffer (pass_sram_alloc.c, smem.* on the
     * loop). release_after: the body op after which this iteration's slots
     * are read (the last one that reads a slot or a value read from one). */
    bool mbarrier;
    GpSmemBuf *mbar;
    IrOp *release_after;
    bool tma;              /* every load has tma.map: one elected thread issues TMA copies and
                              arrives on full with expect_tx (full counts 1 arrival) */
} GpPipeLoop;

/* Op positions of a region op (for, if): [start, end]. */
typedef struct GpSpan {
    IrOp *op;
    int start, end;
} GpSpan;

/* What the GPU passes decided, as the lowering reads it: a cache built from
 * the IR's attributes by gp_tc_from_ir (the IR is the source of truth). */
typedef struct GpTcState {
    PtrVec loops;          /* GpPipeLoop*: loops with pipeline.stages */
    PtrVec bufs;           /* GpSmemBuf*: every shared buffer (smem.* attributes) */
    PtrVec spans;          /* GpSpan* */
    int *buf_of;           /* by value id: index in bufs of that op's scratch, -1 none */
    bool *deferred;        /* by value id: mma.deferred — a convert to an MMA operand layout
                              whose every user is a tensor-core dot: its SRAM tile stays
                              live up to the dots, which ldmatrix one k32 step at a time
                              (cg_dot_mma.c), instead of all fragments at the convert */
    bool *view;            /* by value id: smem.view — a deferred convert whose tile an
                              earlier convert of the same value (or of its transpose)
                              already staged: it writes nothing, buf_of names that tile */
    int nids;
    int total;             /* bytes of dynamic SRAM (kernel attribute smem) */
    bool wgmma;            /* kernel attribute wgmma — sm_90a: dots may lower to wgmma
                              (cg_dot_wgmma.c); operand tiles and stages are then
                              1024-byte aligned */
} GpTcState;

/* ---- tc_state.c: the cache, op positions, scratch sizes ---- */
GpTcState *gp_tc_from_ir(IrFunc *f);
/* Op positions: pre-order over the function; a region op takes one position
 * before its regions and one after them. `at` sees each op, `after` each
 * region op once its regions are numbered. */
typedef struct GpNumbering {
    void (*at)(void *ctx, IrOp *op, int pos);
    void (*after)(void *ctx, IrOp *op, int pos, int end);
    void *ctx;
    int pos;
} GpNumbering;
void gp_number_ops(IrBlock *b, GpNumbering *n);
/* --stats and the SRAM-limit error: one line per buffer, then all of them. */
void gp_sram_describe(const GpSmemBuf *b, StrBuf *out);
void gp_sram_stats(const GpTcState *tc, StrBuf *out);
/* The scratch bytes `op`'s lowering asks for (0: none) and what it is. */
int  gp_op_scratch(const IrFunc *f, const GpTcState *tc, const IrOp *op, const int *uses, const char **what);

/* ---- pipeline_plan.c: the plan read from the IR ---- */
void        gp_pipeline_loops(IrFunc *f, PtrVec *loops);     /* GpPipeLoop* of every planned loop */
GpPipeLoop *gp_pipeline_of_loop(const GpTcState *tc, const IrOp *loop);
/* The pipelined load that `op` is (or whose cast or one of whose convert_layouts `op` is). */
GpPipeLoad *gp_pipeline_load(const GpTcState *tc, const IrOp *op, GpPipeLoop **loop);
bool gp_pipeline_dead_in_place(const GpTcState *tc, const IrOp *op);
/* Mark the body ops `v` depends on (the slice a future iteration's copies
 * re-evaluate); false when it reaches a loop-carried value or an impure /
 * region op of the body. */
bool  gp_pipeline_slice(IrBlock *body, IrValue *v, bool *in_slice, int nids);
IrOp *gp_single_user_in(IrBlock *body, const IrValue *v, const int *uses);
int   gp_fast_value_dim(const IrFunc *f, const IrValue *v);   /* value dim fastest in the layout */
bool  gp_half_cast(const IrOp *op);                           /* an f16 <-> bf16 cast */
/* The convert_layouts to MMA A/B-operand layouts a pipelined load feeds
 * (GpPipeLoad.converts, .cast, .trans): its one user, possibly through an
 * f16 <-> bf16 cast of the same layout, or else every use of the load, when
 * all are such converts in `body`, each possibly through a 2-D trans that
 * only it uses; false otherwise. The plan and its read-back both use it, so
 * they agree. */
bool  gp_pipeline_converts(const IrFunc *f, IrBlock *body, IrOp *ld, const int *uses, GpPipeLoad *l);

/* ---- the GPU passes (codegen.c: the table and the pipeline) ----
 * Each pass rewrites the GPU IR and writes its decisions on it; the IR after
 * each one passes ir_verify. They run alone from IR text as well (the golden
 * tests): everything a pass reads is in the IR or in the context. */
typedef struct GpPassCtx {
    const Target *target;  /* the --arch the driver parsed (SM version, SRAM limit) */
    bool wgmma;            /* sm_90a and not disabled: accelerate-dot marks the kernel */
    GpAxisMap *axis;       /* facts of the values (axis_info.c); passes alias new values */
    KilnSchedule sched;    /* the schedule options, resolved (each 0 or 1; schedule.h): a pass reads its own */
} GpPassCtx;
/* Errors go to `d` with their kind (a limit of the program: DIAG_USER; a bug: DIAG_INTERNAL). */
typedef bool (*GpPassFn)(IrFunc *f, const GpPassCtx *ctx, Diag *d);
typedef struct GpPass {
    const char *name;      /* --dump-after name */
    GpPassFn run;
} GpPass;
extern const GpPass gp_gpu_passes[];
extern const int gp_ngpu_passes;
const GpPass *gp_gpu_pass(const char *name);                 /* NULL when unknown */
/* The passes from `first` to `last` (names; NULL: from the first, to the last),
 * ir_verify after each one;
 * `dump` (NULL, "all" or a name) appends the IR after the named passes. */
bool gp_run_gpu_passes(IrFunc *f, const GpPassCtx *ctx, const char *first, const char *last, const char *dump,
                       StrBuf *dumps, Diag *d);
bool gp_verify_gpu_ir(IrFunc *f, Diag *d);                   /* ir_verify, message as the runner's */
/* The schedule attributes the GPU passes write (verify.c): each on an op it
 * fits, the SRAM buffers placed without overlap, the kernel-level pingpong,
 * warp_spec and tma rules. Run after ir_verify(_gpu), which it relies on. */
bool gp_verify_schedule(const IrFunc *f, StrBuf *err);
bool gp_pass_accelerate_dot(IrFunc *f, const GpPassCtx *ctx, Diag *d);
bool gp_pass_layout_assign(IrFunc *f, const GpPassCtx *ctx, Diag *d);
bool gp_pass_remove_convert(IrFunc *f, const GpPassCtx *ctx, Diag *d);
bool gp_pass_dot_rotate(IrFunc *f, const GpPassCtx *ctx, Diag *d);
bool gp_pass_pipeline(IrFunc *f, const GpPassCtx *ctx, Diag *d);
bool gp_pass_dot_overlap(IrFunc *f, const GpPassCtx *ctx, Diag *d);
bool gp_pass_sram_alloc(IrFunc *f, const GpPassCtx *ctx, Diag *d);
bool gp_pass_pingpong(IrFunc *f, const GpPassCtx *ctx, Diag *d);
bool gp_pass_tma(IrFunc *f, const GpPassCtx *ctx, Diag *d);
/* Warp specialisation's producer: one warpgroup launched after the num_warps consumers. */
#define GP_WS_PRODUCER_WARPS 4
/* --lean-producer: the registers a producer that only issues TMA copies keeps (setmaxnreg's
 * least; kernel attribute warp_spec.producer_regs). */
#define GP_WS_LEAN_PRODUCER_REGS 24
bool gp_pass_warp_specialize(IrFunc *f, const GpPassCtx *ctx, Diag *d);
/* Why warp specialisation does not apply to `f` (the text in buf), or NULL
 * when it does (pass_warp_specialize.c; --stats reports it). */
const char *gp_ws_refusal(IrFunc *f, char *buf, int n);
/* The kernel-body values the producer warpgroup computes (need[id], the
 * copy slices' body values too); false where the kernel does not qualify. */
bool gp_ws_needed(IrFunc *f, bool *need);

/* ---- layout_mma.c: mma.sync m16n8k16 fragments, swizzled SRAM, ldmatrix ---- */
typedef enum GpMmaFrag { GP_MMA_A, GP_MMA_B, GP_MMA_C } GpMmaFrag;

/* The PTX ISA's table for mma.m16n8k16 with f16/bf16 inputs and f32
 * accumulators: element i of `frag` held by `lane` is at (row, col) of the
 * 16x16 A, 16x8 B (row = k) or 16x8 C tile. A: i in 0..7, B: 0..3, C: 0..3. */
void gp_mma_isa_coord(GpMmaFrag frag, int lane, int i, int *row, int *col);

/* Swizzled SRAM tile of `rows` x `cols` elements: 16-byte chunks (vec
 * elements) of row r are permuted by XOR with (r / per_phase) % max_phase:
 *     col' = ((c / vec) ^ ((r / per_phase) % max_phase)) * vec + c % vec
 * so the 8 rows an ldmatrix 8x8 matrix (or a 16-byte store phase) touches
 * fall in 8 different 16-byte bank groups. Rows wider than 128 bytes (a
 * multiple of it) are stored as column blocks of 128 bytes (`blk` elements),
 * one block after another ([cols / blk][rows][blk]): each 8 rows x 128 bytes
 * is then one atom of wgmma's 128-byte swizzle (cg_dot_wgmma.c reads these
 * tiles through descriptors; ldmatrix and cp.async do not care). */
typedef struct GpSwizzle {
    int rows, cols, blk, vec, per_phase, max_phase, elem_bytes;
} GpSwizzle;
GpSwizzle gp_swizzle_for(int rows, int cols, int elem_bytes);
int       gp_swizzle_offset(const GpSwizzle *s, int r, int c); /* element offset in the tile */
/* Element offset between (r, c) and (r + dr, c + dc) when the swizzle moves
 * them by a constant: dr a multiple of per_phase * max_phase, dc of
 * max_phase * vec (false otherwise). */
bool      gp_swizzle_shift(const GpSwizzle *s, int dr, int dc, int *elems);

/* wgmma's view of such a tile (cg_dot_wgmma.c; PTX ISA "matrix descriptor"):
 * usable when its rows are 128-byte blocks (blk * elem_bytes == 128, the
 * 128-byte swizzle mode). K-major: the contiguous dim is K (rows are M or N);
 * else MN-major (rows are K). lbo/sbo: the descriptor's leading / stride
 * byte offsets; gp_wgmma_offset: bytes from the tile's start to the first
 * element of the instruction that covers MN index mn0 (a multiple of 64 for
 * MN-major, of 8 for K-major) and k step kk (32 bytes of K: k16 of f16/bf16,
 * k32 of e4m3). */
bool gp_wgmma_tile_ok(const GpSwizzle *s);
void gp_wgmma_strides(const GpSwizzle *s, bool k_major, int *lbo, int *sbo);
int  gp_wgmma_offset(const GpSwizzle *s, bool k_major, int mn0, int kk);

/* ldmatrix.x4 addressing. The operand tile sits in SRAM with either K
 * contiguous (k_contig) or the other dim (M of A, N of B) contiguous; "memrow"
 * and "memcol" are the tile as stored (memcol is the contiguous dim). Lane i
 * supplies the address of one 8-element memrow of matrix i / 8; this returns
 * that memrow/memcol relative to the fragment's corner.
 *   A: m16 x k16, registers {a0a1, a2a3, a4a5, a6a7};
 *   B: k32 x n8 (two k16 steps of one n8 tile), registers {b0b1, b2b3} of the
 *      first step then of the second (x2 with lanes 0..15 for one step).
 * Loads are .trans when the tile's contiguous dim is not K (A: M
 * contiguous, B: N contiguous — the usual row-major B). */
void gp_ldmatrix_lane_row(GpMmaFrag frag, bool k_contig, int lane, int *mrow, int *mcol);
static inline bool gp_ldmatrix_trans(bool k_contig) { return !k_contig; }

/* stmatrix.x4 (sm_90) of an MMA accumulator tile [M, N] of 16-bit elements
 * (mma.sync's C layout, and wgmma's, which is the same map) into a
 * row-major SRAM tile: stmatrix is ldmatrix's mirror — thread T's register j
 * holds the two elements (T / 4, 2 (T % 4) + {0, 1}) of 8x8 matrix j, and
 * lane i supplies the address of row i % 8 of matrix i / 8. The C fragment
 * pairs (c0c1, c2c3) of one thread are exactly such rows, so one instruction
 * stores a warp's m16 x (two n8 tiles): matrix j = rows + (j & 1) * drow,
 * columns + (j >> 1) * dcol of the instruction's corner (drow = 8, dcol =
 * 8 wn: a warp's n8 tiles are wn tiles apart). Usable when the layout is the
 * C geometry, covers the tile without wrapping, and each thread holds an
 * even number of n8 tiles per m16 tile. tests/codegen/test_mma_layout.c
 * simulates it against gp_geom_index. */
typedef struct GpStmatrix {
    int nm, nn;       /* instructions per thread: nm m16 tiles x nn pairs of n8 tiles */
    int drow, dcol;   /* matrix j's corner = matrix 0's + ((j & 1) drow, (j >> 1) dcol) */
} GpStmatrix;
bool gp_stmatrix_plan(const GpGeom *g, GpStmatrix *p);
/* Instruction q (< nm * nn): its corner's register part (row0, col0; add the
 * warp's base and gp_stmatrix_lane_row) and the register holding the first
 * element of each matrix (the second is regs[j] + reg_stride[1]). */
void gp_stmatrix_instr(const GpGeom *g, const GpStmatrix *p, int q, int *row0, int *col0, int regs[4]);
/* The (row, col) of the matrix row whose address lane `lane` supplies,
 * relative to the instruction's corner in the warp's part of the tile. */
void gp_stmatrix_lane_row(const GpStmatrix *p, int lane, int *row, int *col);

/* The mma.sync layouts (generalised blocked layouts, see layout.c) for a warp
 * grid wm x wn: C [M,N], A [M,K] replicated over warp_n, B [K,N] replicated
 * over warp_m (warp_m = warp % wm, warp_n = warp / wm). */
int  gp_layout_mma(IrFunc *f, GpMmaFrag frag, int wm, int wn);
bool gp_layout_is_mma(const IrFunc *f, int layout, GpMmaFrag *frag, int *wm, int *wn);
/* The C or B layout with warp_n's rn n8 tiles side by side (IrLayout.mma_rn):
 * warp_n owns the columns [8 rn warp_n, 8 rn (warp_n + 1)) — wgmma with
 * warpgroups along N. A (rn ignored) is gp_layout_mma's. */
int  gp_layout_mma_rn(IrFunc *f, GpMmaFrag frag, int wm, int wn, int rn);
int  gp_mma_rn(const IrFunc *f, int layout);          /* its mma_rn; 0: interleaved, or not mma */

/* ---- pass_accelerate_dot.c ---- */
/* Warps for a dot of C[M,N] += A[M,K] B[K,N] on num_warps warps (false: not
 * tensor-core shaped); rows_in_warp: the kernel chains dots (attention). */
bool gp_mma_choose_warps(int M, int N, int K, int num_warps, bool rows_in_warp, int *wm, int *wn);
bool gp_dot_mma_eligible(const IrOp *op, int sm);
/* sm_90a: whether a plain dot of C[M,N] += A[M,K] B[K,N] on num_warps warps
 * gets wgmma's warp grid (num_warps x 1) from accelerate-dot. */
bool gp_wgmma_grid_ok(int M, int N, int K, int num_warps);
/* sm_90a: whether a dot of C[M,N] += A[M,K] B[K,N] whose M is half the
 * warps' rows (M = 8 num_warps: 64 rows on 8 warps) gets the split of
 * wgmma with two warpgroup columns: wm = num_warps / 2, wn = 2, rn = N / 16
 * (each warpgroup column one m64n(N/2) instruction). `plain`: a dot that is
 * not chained, which also needs its operands' rows to be 128-byte blocks
 * whichever dim is contiguous (K % 64, N / 2 % 64). */
bool gp_wgmma_nsplit_ok(int M, int N, int K, int num_warps, bool plain);
/* sm_90a: whether an f8e4m3 dot of C[M,N] += A[M,K] B[K,N] on num_warps warps
 * fits FP8 wgmma (m64nNk32, wm = num_warps, wn = 1): whole warpgroups along M,
 * N <= 256, K a multiple of 128 (each K-major operand row whole 128-byte
 * swizzle blocks of e4m3). */
bool gp_wgmma_e4m3_ok(int M, int N, int K, int num_warps);
/* Elements an MMA operand tile (A/B layout) holds: f16, bf16, and e4m3 (only
 * the operands of wgmma.e4m3 dots: every other e4m3 dot is widened). */
static inline bool gp_mma_operand_elem(IrElem e) { return e == IR_F16 || e == IR_BF16 || e == IR_F8E4M3; }
/* FP8 wgmma's K order (cg_dot_wgmma.c): an accumulator's registers are the
 * k32 A fragment of wgmma ...e4m3 when K is permuted within each 16: the
 * element of logical k sits at k-position gp_f8_kpos(k) of the SRAM operand
 * tiles (a bijection on [16j, 16j + 16)). See layout_mma.c. */
int gp_f8_kpos(int k);
/* Byte b of register j of FP8 wgmma's k32 A fragment (m16 tile om of the
 * warp, k step kk) as register dims of the MMA A layout (gp_geom_reg_of):
 * row half j & 1, the pair (b & 1) of n8 tile 4 kk + 2 (j >> 1) + (b >> 1).
 * tests/codegen/test_mma_layout.c checks it against the ISA's fragment. */
void gp_f8_afrag_reg(int om, int kk, int j, int b, int rd[2]);


#endif
