/* layout.h — layouts, axis info and layout assignment of the GPU IR layer
 * (compiler/gpuir; gpuir.h includes it): LLVM-free, usable by unit tests.
 *
 * Layout model. A *blocked* layout distributes a tile over the threads of a CTA
 * like Triton's #blocked: per dimension d, each thread holds sizePerThread[d]
 * consecutive elements, threadsPerWarp[d] lanes and warpsPerCTA[d] warps tile
 * the dimension, and the pattern repeats when the tile is larger than
 * spt*tpw*wpc (more registers per thread) or wraps (replication: several
 * threads hold the same element) when it is smaller. `order` lists dimensions
 * fastest first: it orders lanes, warps and a thread's registers.
 * A *slice* layout (reduction results) is its parent with one dimension
 * removed: the slice of shape S is exactly the parent applied to S with a
 * size-1 dimension inserted. So every layout resolves to a blocked *base*
 * layout on a *base shape* (GpGeom), and all lowering works on the base.
 */
#ifndef KILN_GPUIR_LAYOUT_H
#define KILN_GPUIR_LAYOUT_H

#include "../ir/ir.h"
#include "../support/diag.h"
#include "../support/target.h"

#define GP_MAX_RANK IR_MAX_RANK

/* The layout description itself (IrLayout: blocked fields, the MMA
 * generalisation rpw/wst/mma, slices) is IR data: ir.h. */

/* A layout applied to a value type: the blocked base and everything the
 * lowering needs about it, in base dimensions. */
typedef struct GpGeom {
    int rank;                                  /* base rank */
    int shape[GP_MAX_RANK];                    /* base shape (sliced dims are 1) */
    int spt[GP_MAX_RANK], tpw[GP_MAX_RANK], wpc[GP_MAX_RANK], order[GP_MAX_RANK];
    int rpw[GP_MAX_RANK];                      /* register repeats per warp tile (>= 1) */
    int eff_spt[GP_MAX_RANK];                  /* min(spt, shape) */
    int cta[GP_MAX_RANK];                      /* spt * tpw * rpw * wpc */
    int nregs_dim[GP_MAX_RANK];                /* registers per thread along d */
    int reg_stride[GP_MAX_RANK];               /* register index stride of d */
    int lane_stride[GP_MAX_RANK], warp_stride[GP_MAX_RANK];
    int nregs;                                 /* registers per thread */
    int vrank;                                 /* rank of the value */
    int vdims[GP_MAX_RANK];                    /* value dim -> base dim */
    int num_warps;
    bool warp_copies;                          /* some warps hold copies (wst given) */
} GpGeom;

int  gp_elem_bytes(IrElem e);                        /* memory bytes of an element (i1 -> 1) */

/* ---- layout.c ---- */
int  gp_layout_blocked(IrFunc *f, int rank, const int32_t *shape, const int *spt,
                       const int *order, int num_warps);
int  gp_layout_default(IrFunc *f, int rank, const int32_t *shape, int num_warps);
int  gp_layout_slice(IrFunc *f, int parent, int dim);
int  gp_layout_insert_dim(IrFunc *f, int blocked, int axis); /* blocked with a size-1 dim added */
int  gp_layout_permute(IrFunc *f, int blocked, const int *perm); /* result dim i = input dim perm[i] */
void gp_default_order(int rank, int *order);
bool gp_geom(const IrFunc *f, int layout, IrType t, GpGeom *g);
void gp_geom_reg_dims(const GpGeom *g, int reg, int *rd);  /* per base-dim register indices */
int  gp_geom_reg_of(const GpGeom *g, const int *rd);
int  gp_geom_const_part(const GpGeom *g, int d, int rd);   /* index part from the register */
/* Per value dim: element index of register `to` minus that of `from` (one
 * thread; exact when the tile is not replicated, see gp_geom_replicated). */
void gp_geom_reg_delta(const GpGeom *g, int from, int to, int *delta);
void gp_geom_thread_base(const GpGeom *g, int tid, int *base); /* index part from the thread */
void gp_geom_index(const GpGeom *g, int tid, int reg, int *idx); /* base-dim element index */
bool gp_geom_owner(const GpGeom *g, int tid, int reg);     /* the one copy that writes */
int  gp_geom_warp_owner(const GpGeom *g, int warp);        /* the warp holding the owned copy of warp's data */
/* The lowest register of the same thread holding the same element as `reg` in
 * every thread (reg itself when none does): a slice of an MMA layout holds
 * each element once per register repeat of the sliced dim. */
int  gp_geom_first_copy(const GpGeom *g, int reg);
bool gp_geom_replicated(const GpGeom *g);                  /* some element held twice? */
bool gp_layouts_equivalent(const IrFunc *f, int la, int lb, IrType t);
/* The most elements of one tile a thread may hold in registers. A CTA's
 * register file is 64K words (255 per thread at most): past a few hundred the
 * tile spills, and past this the unrolled per-thread code takes LLVM seconds
 * per op. [256, 256] f32 is 512 per thread on 4 warps, 1024 on 2 warps. */
#define GP_MAX_THREAD_REGS 1024
/* An operand of a dot on CUDA cores holds all K elements of each of its rows
 * (or columns) in every thread (cg_dot_fma.c): an f32 [64, 64] @ [64, 64] on
 * 4 warps holds 2048 per thread, [64, 128] @ [128, 64] 4096 (2 s of LLVM). */
#define GP_MAX_DOT_OPERAND_REGS 4096
/* Every tile value with a layout within GP_MAX_THREAD_REGS and every reduce
 * within GP_MAX_REDUCE_WORK; else a located user error at the first op past
 * it that says what to shrink. */
bool gp_check_thread_regs(IrFunc *f, Diag *d);
/* A reduce across warps has every thread combine, for each of its result
 * registers, the partials of every warp along the axis: that many loads and
 * combines (gp_reduce_work, scratch.c). Bounded like the registers, and
 * checked with them: a [1024, 1024] row reduce on 32 warps would be 32768
 * (35 s of LLVM). */
#define GP_MAX_REDUCE_WORK 2048
int64_t gp_reduce_work(const IrFunc *f, const IrOp *op);

/* ---- axis_info.c ---- */
typedef struct GpAxis {
    int64_t div[GP_MAX_RANK];      /* first element of each contiguous run divisible by (bytes for ptrs) */
    int64_t contig[GP_MAX_RANK];   /* length of runs of +1 steps */
    int64_t constancy[GP_MAX_RANK];/* length of runs of equal values */
} GpAxis;
typedef struct GpAxisMap {
    GpAxis **v;          /* indexed by IrValue.id; NULL = nothing known */
    int n;
    Arena *arena;
} GpAxisMap;
GpAxisMap    *gp_axis_info(IrFunc *f);
/* Never NULL: values without facts (or created later) read as all ones. */
const GpAxis *gp_axis_get(const GpAxisMap *m, const IrValue *v);
/* A value made later (a layout conversion, a rematerialised constant) that
 * holds the same values as `old`. */
void          gp_axis_alias(GpAxisMap *m, const IrValue *nv, const IrValue *old);
/* A value made later that is one value throughout (a splat of a scalar). */
void          gp_axis_uniform(GpAxisMap *m, const IrValue *nv);

/* ---- pass_layout_assign.c ---- */
int  gp_dot_operand_layout(IrFunc *f, int c_layout, int opnd, int k); /* opnd 0 = A, 1 = B */

/* ---- scratch.c: what an op needs beyond its registers ---- */
/* The vector width of a load/store (atomics: 1): what the pointer layout's
 * registers per thread, 16 bytes, the pointers' contiguity and alignment and
 * the mask's constancy allow; gp_mem_vec_width without the atomics' rule. */
int  gp_mem_vec(const IrFunc *f, const GpAxisMap *axis, const IrOp *op);
int  gp_mem_vec_width(const IrFunc *f, const GpAxisMap *axis, const IrOp *op);
/* Scratch bytes each op family's lowering will ask for (0: none), for the
 * allocator; `what` names the buffer in --stats. */
int  gp_convert_scratch_bytes(const IrFunc *f, const IrOp *op, const char **what);
int  gp_reduce_scratch_bytes(const IrFunc *f, const IrOp *op);
int  gp_atomic_scratch_bytes(const IrFunc *f, const IrOp *op, const int *uses);
/* Bytes of padding after each row of a convert_layout's scratch tile (rows of
 * >= 64 bytes get 16: no bank conflicts on the column reads), 0 for others. */
int  gp_convert_row_pad(const IrOp *op, IrType t);
/* The element a reduction combines in (f16/bf16 in f32, small ints in 32
 * bits) and the distinct warps along the reduced base dim k (> 1: partials
 * go through SRAM). */
IrElem gp_reduce_work_elem(IrElem e);
int    gp_reduce_warps_along(const GpGeom *gs, int k);

#endif
