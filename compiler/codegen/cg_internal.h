/* cg_internal.h — shared declarations of the GPU backend (compiler/codegen/).
 *
 * The backend works in three steps:
 *   1. axis info (axis_info.c): divisibility / contiguity / constancy of
 *      integer and pointer tiles, used to vectorise memory accesses;
 *   2. the GPU passes (docs/tensor_cores.md):
 *      accelerate-dot (tensor-core layouts for eligible dots), layout
 *      assignment (pass_layout_assign.c: every tile value gets a layout —
 *      IrValue.layout indexes IrFunc.layouts, which holds IrLayout pointers —
 *      and convert_layout ops go where an operand's layout differs from the
 *      one its user needs), remove-convert, pipeline (cp.async plan) and
 *      sram-alloc (pass_table.c runs them). The result is "GPU IR": IR text
 *      with layouts and the decisions as attributes (ir_print_func);
 *   3. lowering to per-thread LLVM IR (cg_*.c) and emission (cg_emit.c).
 *
 * Layouts and axis info are declared in layout.h (no LLVM there).
 */
#ifndef KILN_CG_INTERNAL_H
#define KILN_CG_INTERNAL_H

#include "codegen.h"
#include "../gpuir/gpuir.h"

#include <llvm-c/Core.h>
#include <llvm-c/TargetMachine.h>

/* ---- cg_context.c ---- */
typedef struct CgTile {
    LLVMValueRef *r;    /* registers, layout order (one for scalars) */
    int n;
} CgTile;

typedef struct CgRange { int lo, hi; } CgRange;  /* SRAM bytes [lo, hi) */

/* An MMA operand left in its swizzled SRAM tile (cg_dot_mma.c). */
typedef struct CgLazyOperand {
    LLVMValueRef base;  /* i32 byte offset of the tile; NULL: not deferred */
    int fast_dim;       /* value dim contiguous in SRAM */
    IrElem stored;      /* element as stored (f16/bf16), converted after ldmatrix */
    CgRange bytes;      /* the SRAM it is read from (pending reads at the dots) */
} CgLazyOperand;
#define CG_MAX_PENDING 64
#define CG_ASM_SRCLOC_FROM 1024   /* cg_asm: past this many asm calls in a function, each gets its own !srcloc */

typedef struct CgCtx {
    IrFunc *f;
    const CgOptions *opts;
    Arena *arena;
    Diag *diag;                  /* where errors go (cg_fail, cg_emit) */
    int sm;                      /* 80, 90 */
    bool failed;
    LLVMContextRef ctx;
    LLVMModuleRef mod;
    LLVMBuilderRef b;
    LLVMValueRef fn;
    LLVMValueRef smem;           /* @smem, addrspace(3) */
    /* cached types */
    LLVMTypeRef t_void, t_i1, t_i8, t_i16, t_i32, t_i64, t_f16, t_bf16, t_f32, t_f64;
    LLVMTypeRef t_gptr, t_sptr;  /* ptr addrspace(1), ptr addrspace(3) */
    /* per-thread ids, computed once in the entry block */
    LLVMValueRef tid, lane, warp;
    CgTile *vals;                /* indexed by IrValue.id */
    const GpAxisMap *axis;
    int *uses;
    int name_counter;
    int asm_calls;               /* inline asm calls emitted so far (cg_asm's srcloc threshold) */
    /* SRAM (placed by pass_sram_alloc.c, read back from the IR into tc by
     * gp_tc_from_ir) and barriers: the ranges read or written since the last
     * barrier, and the current op's scratch (survives its barriers). */
    GpTcState *tc;
    int smem_base;               /* byte offset of the current op's scratch */
    CgRange pending[CG_MAX_PENDING];
    int npending;
    CgRange cur;                 /* lo < 0: the current op has no scratch */
    /* cg_dot_mma.c: deferred operand tiles (tc->deferred), by value id: the
     * SRAM tile the dots ldmatrix from, instead of registers */
    struct CgLazyOperand *lazy;
    /* cg_pipeline.c: the pipelined loop being lowered and its current slot */
    GpPipeLoop *pipe;
    LLVMValueRef pipe_slot;
    LLVMValueRef pipe_iter;      /* its iteration number (i32, from 0) */
    /* cg_pipeline.c: while a later iteration's slice is evaluated, the i1
     * "that iteration exists": loads predicate on it (NULL otherwise) */
    LLVMValueRef load_guard;
    bool slice_eval;             /* issue_all is evaluating a pipelined loop's slice */
    bool ptx81;                  /* cg_memory.c emitted a vector red: the module needs PTX ISA 8.1 */
    /* cg_dot_wgmma.c: the result of a dot whose wgmma group is in flight
     * (wgmma.overlap) until the next dot's wait retires it, or NULL */
    const IrValue *wg_inflight;
    /* cg_warp_spec.c (kernel attribute warp_spec): the consumer warps (num_warps; 0: not
     * specialised), whose CTA barriers become a named barrier of 32 ws_warps threads; and
     * whether the producer warpgroup's code is being lowered (it issues copies, no waits) */
    int ws_warps;
    bool ws_producer;
} CgCtx;

LLVMTypeRef  cg_type(CgCtx *c, IrElem e);       /* register type of an element */
LLVMTypeRef  cg_mem_type(CgCtx *c, IrElem e);   /* in-memory type (i1 -> i8) */
LLVMValueRef cg_i32(CgCtx *c, int64_t v);
LLVMValueRef cg_i64(CgCtx *c, int64_t v);
LLVMValueRef cg_call(CgCtx *c, const char *name, LLVMTypeRef ret, int n, LLVMTypeRef *ptys,
                     LLVMValueRef *args);
LLVMValueRef cg_asm(CgCtx *c, LLVMTypeRef ret, const char *text, const char *cons,
                    int n, LLVMValueRef *args, bool side_effects);
void         cg_barrier(CgCtx *c);      /* every thread that runs the kernel's body (warp_spec: the consumers) */
void         cg_barrier_cta(CgCtx *c);  /* bar.sync 0: every thread of the CTA (the producer warpgroup too) */
LLVMBasicBlockRef cg_block(CgCtx *c, const char *what);
CgTile      *cg_get(CgCtx *c, const IrValue *v);
CgTile      *cg_set(CgCtx *c, const IrValue *v, int n);
bool         cg_geom_of(CgCtx *c, const IrValue *v, GpGeom *g);
/* Runtime index part of this thread along each base dim (see gp_geom_thread_base). */
void         cg_thread_base(CgCtx *c, const GpGeom *g, LLVMValueRef *base);
/* Element index (value dims) of register `reg` as i32 values. */
void         cg_reg_index(CgCtx *c, const GpGeom *g, LLVMValueRef *base, int reg, LLVMValueRef *idx);
/* i1: this thread's copy of register `reg` is the owner (true when not replicated). */
LLVMValueRef cg_reg_owner(CgCtx *c, const GpGeom *g, LLVMValueRef *base, int reg);
/* Row-major flat index (i32) of value-dim indices in `t`. */
LLVMValueRef cg_flat_index(CgCtx *c, IrType t, LLVMValueRef *idx);
/* Pointer to byte `byte_off` of the current op's scratch (cg_smem_begin). */
LLVMValueRef cg_smem_ptr(CgCtx *c, LLVMValueRef byte_off);
/* Pointer to an absolute byte offset of dynamic SRAM. */
LLVMValueRef cg_smem_ptr_abs(CgCtx *c, LLVMValueRef byte_off);
/* Start using the scratch buffer the allocator gave the op producing `v`
 * (at least `bytes`): sets the base cg_smem_ptr uses, places a barrier first
 * only when an access since the last barrier overlaps it (write-after-read /
 * write-after-write), and returns the base as an i32. */
LLVMValueRef cg_smem_begin(CgCtx *c, const char *what, const IrValue *v, int bytes);
/* Barrier bookkeeping around control flow (cg_control.c, cg_pipeline.c). */
void         cg_smem_pending_add(CgCtx *c, int lo, int hi);
void         cg_smem_pending_span(CgCtx *c, const IrOp *region_op, bool with_stages);
void         cg_fail(CgCtx *c, const IrOp *op, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Convert between register types of IR elements (the CAST semantics). */
LLVMValueRef cg_convert_scalar(CgCtx *c, LLVMValueRef v, IrElem from, IrElem to);

/* ---- lowering, one family per file ---- */
bool cg_lower_block(CgCtx *c, IrBlock *blk);                 /* cg_lower.c */
bool cg_lower_op(CgCtx *c, IrOp *op);                        /* cg_lower.c: one op */
bool cg_lower_elementwise(CgCtx *c, IrOp *op);               /* cg_elementwise.c */
bool cg_lower_shape_op(CgCtx *c, IrOp *op);                  /* splat/broadcast/expand/trans/arange/const */
bool cg_lower_memory(CgCtx *c, IrOp *op);                    /* cg_memory.c */
bool cg_lower_reduce(CgCtx *c, IrOp *op);                    /* cg_reduce.c */
bool cg_lower_convert(CgCtx *c, IrOp *op);                   /* cg_convert.c (+ reshape) */
bool cg_lower_dot(CgCtx *c, IrOp *op);                       /* cg_dot_fma.c */
bool cg_lower_control(CgCtx *c, IrOp *op);                   /* cg_control.c */
/* Store / load a tile through the scratch buffer by row-major element index,
 * each row (last dim) followed by row_pad bytes (the caller places the
 * barriers). owners_only: replicas do not write. */
void cg_tile_to_smem(CgCtx *c, IrType type, const CgTile *t, int layout, bool owners_only, int row_pad);
void cg_tile_from_smem(CgCtx *c, IrType type, int layout, CgTile *out, int row_pad);

/* ---- tensor cores (cg_dot_mma.c) and pipelining (cg_pipeline.c) ---- */
LLVMValueRef cg_swizzle_offset_ir(CgCtx *c, const GpSwizzle *s, LLVMValueRef r, LLVMValueRef col);
bool cg_lower_dot_mma(CgCtx *c, IrOp *op);
/* The geometry of dot operand `i` read in MMA operand layout `want` (the
 * value may sit in an equivalent layout: P in the C layout of a dot). */
bool cg_mma_operand_geom(CgCtx *c, IrOp *op, int i, GpMmaFrag want, int wm, int wn, GpGeom *g);
/* The four 32-bit A registers {a0a1, a2a3, a4a5, a6a7} (<2 x half>, or i32
 * for bf16) of m16 tile om, k16 step kk of an A operand in registers `r`
 * with geometry `g`: mma.m16n8k16's A fragment, which is also each warp's
 * part of wgmma.m64nNk16's register A. */
void cg_mma_a_frag(CgCtx *c, const GpGeom *g, LLVMValueRef *r, int om, int kk, bool bf, LLVMValueRef out[4]);
/* wgmma (cg_dot_wgmma.c): false when the dot does not qualify (nothing
 * emitted; the caller lowers it with mma.sync). */
bool cg_lower_dot_wgmma(CgCtx *c, IrOp *op);
/* Warpgroup ping-pong (cg_pingpong.c; the kernel's `pingpong` attribute):
 * the entry's and the return's hand-overs; before a marked dot's wgmma.fence
 * the wait for this warpgroup's turn, returning the PTX that hands the turn
 * on once the dot is issued, for an asm whose operand $op is *wg (NULL: the
 * dot takes no turn); an empty turn for a marked dot lowered without wgmma. */
void cg_pingpong_entry(CgCtx *c);
void cg_pingpong_return(CgCtx *c);
const char *cg_pingpong_acquire(CgCtx *c, const IrOp *dot, int op, LLVMValueRef *wg);
void cg_pingpong_skip(CgCtx *c, const IrOp *dot);
/* After generic-proxy writes of operand tiles (st.shared, cp.async), before
 * the barrier: makes them visible to wgmma (no-op unless tc->wgmma). */
void cg_fence_proxy_async(CgCtx *c);
/* wgmma.wait_group 0 with every register of `v` tied through it (after a loop
 * whose dot left its group in flight: wgmma.pending). */
void cg_wgmma_wait_all(CgCtx *c, const IrValue *v);
/* Retire the group of a wgmma.overlap dot still in flight (wait_group 0, its
 * registers tied through): before a dot that does not lower to wgmma and
 * before a loop body's yield. No-op when none is in flight. */
void cg_wgmma_retire(CgCtx *c);
bool cg_lower_convert_mma_operand(CgCtx *c, IrOp *op);
/* Registers of `res` (A/B-operand layout) by ldmatrix from a swizzled tile at
 * byte offset `base` whose contiguous dim is value dim `fast_dim`, holding
 * `stored` (16-bit) elements, converted to res's element type. */
void cg_mma_ldmatrix_tile(CgCtx *c, const IrValue *res, int fast_dim, LLVMValueRef base, IrElem stored,
                          CgTile *out);
/* When `res` is deferred (tc->deferred): record its SRAM tile (base, the
 * bytes it covers) for the dots to ldmatrix from and return true. */
bool cg_mma_defer(CgCtx *c, const IrValue *res, int fast_dim, LLVMValueRef base, IrElem stored, CgRange bytes);
bool cg_lower_for_pipelined(CgCtx *c, IrOp *op, GpPipeLoop *pl);
/* The copies of iterations 0 .. S-2 of a pipelined loop, once (at its
 * issue_at op, or at the loop). */
bool cg_pipeline_prologue(CgCtx *c, GpPipeLoop *pl);
/* A for's loop-carried values (cg_control.c, also used by the pipelined loop):
 * header phis from `pre`, then closed from `latch` with the body's yield. */
void cg_loop_carry_phis(CgCtx *c, IrOp *op, LLVMBasicBlockRef pre);
bool cg_loop_carry_close(CgCtx *c, IrOp *op, LLVMBasicBlockRef latch);
bool cg_lower_pipelined_convert(CgCtx *c, IrOp *op, const GpPipeLoad *l);
/* The mbarrier hand-off of a pipeline.mbarrier loop (cg_mbarrier.c; slot and
 * iteration numbers are i32): init before the prologue; before refilling slot
 * `slot` with iteration `iter`, wait until iteration iter - S read it; after
 * a thread's copies into a slot, arrive on its full barrier when they land;
 * before reading iteration `iter`'s slot, wait until every thread's copies
 * landed; after the body's last read (pl->release_after), release the
 * current slot (or, with a wgmma.pending dot, the previous one); after the
 * loop (`trips` iterations), wait for the copies issued past its end and
 * invalidate the barriers. */
void cg_mbar_init(CgCtx *c, const GpPipeLoop *pl);
void cg_mbar_wait_empty(CgCtx *c, const GpPipeLoop *pl, LLVMValueRef slot, LLVMValueRef iter);
void cg_mbar_arrive_copies(CgCtx *c, const GpPipeLoop *pl, LLVMValueRef slot);
void cg_mbar_wait_full(CgCtx *c, const GpPipeLoop *pl, LLVMValueRef slot, LLVMValueRef iter);
void cg_mbar_release(CgCtx *c, const GpPipeLoop *pl);
void cg_mbar_drain(CgCtx *c, const GpPipeLoop *pl, LLVMValueRef trips);
LLVMValueRef cg_mbar_full_addr(CgCtx *c, const GpPipeLoop *pl, LLVMValueRef slot);   /* i32 shared */

/* ---- cg_tma.c: tensor-map parameters and TMA copies (pl->tma loops) ---- */
void cg_tma_params(CgCtx *c, LLVMTypeRef *pt, int first);   /* the map params' types, after the program's */
void cg_tma_annotate(CgCtx *c, int first);                  /* byval [128 x i8] align 64, grid_constant */
void cg_tma_prefetch(CgCtx *c);                             /* prefetch.tensormap, thread 0 */
/* Iteration's copies into `slot` (valid: it exists): thread 0 arrives on
 * `full` with expect_tx and issues one cp.async.bulk.tensor per box. */
void cg_tma_issue(CgCtx *c, const GpPipeLoop *pl, LLVMValueRef slot, LLVMValueRef valid, LLVMValueRef full);
void cg_tma_recipes(const GpTcState *tc, CgResult *res);     /* res->tmaps from the loops' plans */
/* The copies of iteration ivv into `slot` (the slice evaluated with the iv = ivv), no wait,
 * commit or arrival: the producer warpgroup's issue (cg_warp_spec.c). */
bool cg_pipeline_issue(CgCtx *c, const GpPipeLoop *pl, LLVMValueRef ivv, LLVMValueRef valid, LLVMValueRef slot);
/* Warp specialisation (cg_warp_spec.c; the kernel's `warp_spec` attribute, pass_warp_specialize.c):
 * the role split at the kernel's entry (the producer's whole program is emitted there), the
 * consumers' named CTA barrier, the threads the full mbarriers count. */
#define CG_WS_PRODUCER_REGS 56   /* setmaxnreg.dec: the producer needs few (addresses, copies) */
void cg_ws_entry(CgCtx *c);
void cg_ws_barrier(CgCtx *c);
int  cg_ws_full_count(const CgCtx *c);
int  cg_ws_producer_min(const IrFunc *f);   /* CG_WS_PRODUCER_REGS, or warp_spec.producer_regs */
int  cg_ws_consumer_regs(int num_warps, int pmin);
int  cg_ws_producer_regs(int num_warps, int pmin);
int  cg_ws_entry_regs(int num_warps);   /* .maxnreg: registers per thread at launch */

/* ---- cg_affine.c ---- */
/* When the pointer tile `ptrs` is affine in its indices, set coef[d] (i64
 * elements per index step along value dim d; NULL = 0) and return true. */
bool cg_affine_coefs(CgCtx *c, const IrValue *ptrs, LLVMValueRef *coef);
/* Bytes from register `from`'s element to register `to`'s (i64), for a tile
 * of geometry g (not replicated) with those coefs. */
LLVMValueRef cg_affine_step(CgCtx *c, const GpGeom *g, const LLVMValueRef *coef, int from, int to, int elem_bytes);

/* ---- cg_emit.c ---- */
bool cg_llvm_init(Diag *d, SrcLoc loc);
bool cg_emit(CgCtx *c, CgResult *res);

#endif
