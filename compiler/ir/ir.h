/* ir.h — Tile IR: SSA values that are scalars or tiles, ops from one table.
 *
 * Structure (QBE-dense, MLIR-shaped):
 *   IrModule  — kernels (IrFunc) of one compilation, all in one Arena.
 *   IrFunc    — a kernel: parameters, a body block, schedule settings.
 *   IrBlock   — a straight list of ops with block arguments; a region is one
 *               block (control flow is structured: `for` and `if` own blocks).
 *   IrOp      — opcode from IR_OPS below, operands, results, attributes,
 *               up to two regions, and its source location.
 *   IrValue   — an op result or a block argument / kernel parameter.
 *
 * Invariants the verifier (ir_verify) checks between passes:
 *   - every operand is defined before use and dominates it (defined earlier in
 *     the same block or in an enclosing block, or a visible block argument);
 *   - operand/result counts and types agree with the op's rules below;
 *   - every region block ends with exactly one terminator (yield/return).
 *
 * Optional operands are trailing: load(ptr [, mask [, other]]),
 * store(ptr, value [, mask]), atomic_add(ptr, value [, mask]).
 */
#ifndef KILN_IR_H
#define KILN_IR_H

#include "../support/support.h"

/* ---- element types ---- */
typedef enum IrElem {
    IR_VOID, IR_I1, IR_I8, IR_I16, IR_I32, IR_I64,
    IR_U8, IR_U16, IR_U32, IR_U64,
    IR_F16, IR_BF16, IR_F32, IR_F64,
    IR_PTR,            /* pointer in global memory; pointee in IrType.pointee */
    IR_F8E4M3,         /* OCP FP8 E4M3 (e4m3fn): a storage and dot-operand type; casts
                          round to nearest even and saturate to +-448 (fp16.h). Last,
                          so that no older element's number moves. */
    IR_ELEM_COUNT
} IrElem;

#define IR_MAX_RANK 4
/* The most elements one tile may have (2^20, Triton's limit too): every size
 * computed from a tile (registers per thread, bytes, SRAM scratch) then fits
 * in 32 bits. The front end reports a larger tile where it is made; the
 * verifier rejects one in IR text. */
#define IR_MAX_TILE_NUMEL (1 << 20)
/* The most stages of a pipelined loop (pipeline.stages); the language allows
 * num_stages up to 1024, the pipeline pass reports more than this at the loop. */
#define IR_MAX_PIPE_STAGES 64

typedef struct IrType {
    uint8_t elem;      /* IrElem */
    uint8_t pointee;   /* IrElem, when elem == IR_PTR */
    uint8_t rank;      /* 0 = scalar */
    int32_t shape[IR_MAX_RANK];
} IrType;

const char *ir_elem_name(IrElem e);            /* "f16", "bf16", "i32", "ptr", ... */
IrElem      ir_elem_from_name(const char *s);  /* IR_VOID when unknown; "bool" -> IR_I1 */
int         ir_elem_bits(IrElem e);            /* i1 -> 1, ptr -> 64 */
bool        ir_elem_is_float(IrElem e);
bool        ir_elem_is_int(IrElem e);          /* includes i1 and unsigned */
bool        ir_elem_is_signed(IrElem e);

IrType  ir_type_scalar(IrElem e);
IrType  ir_type_ptr(IrElem pointee);
IrType  ir_type_tile(IrType scalar, int rank, const int32_t *shape);
IrType  ir_type_scalar_of(IrType t);           /* drop the shape */
IrType  ir_type_with_elem(IrType t, IrElem e); /* same shape, other element */
bool    ir_type_eq(IrType a, IrType b);
bool    ir_type_is_tile(IrType t);
int64_t ir_type_numel(IrType t);               /* 1 for scalars; INT64_MAX past 64 bits */
/* "i32", "ptr<f16>", "tensor<128x64xbf16>", "tensor<64xptr<f32>>" */
char   *ir_type_str(IrType t, char *buf, size_t n);

/* ---- the op table ----
 * X(ENUM, "text", nargs, nres, flags): nargs/nres -1 means variable.
 * Attribute use per op is documented on the right; see IrOp. */
#define IR_OPS(X) \
    X(CONST,        "const",        0, 1, IRF_PURE)               /* ival (ints, i1) or fval (floats); result may be a tile (splat) */ \
    X(PROGRAM_ID,   "program_id",   0, 1, IRF_PURE)               /* attr[0] = axis; i32 */ \
    X(NUM_PROGRAMS, "num_programs", 0, 1, IRF_PURE)               /* attr[0] = axis; i32 */ \
    X(ARANGE,       "arange",       0, 1, IRF_PURE)               /* attr[0] = start, attr[1] = end; tensor<(end-start)xi32> */ \
    X(SPLAT,        "splat",        1, 1, IRF_PURE)               /* scalar -> tile */ \
    X(BROADCAST,    "broadcast",    1, 1, IRF_PURE)               /* tile -> tile, dims of size 1 stretched */ \
    X(EXPAND_DIMS,  "expand_dims",  1, 1, IRF_PURE)               /* attr[0] = axis of the new size-1 dim */ \
    X(RESHAPE,      "reshape",      1, 1, IRF_PURE)               /* same numel, row-major order */ \
    X(TRANS,        "trans",        1, 1, IRF_PURE)               /* attr[0..rank-1] = permutation */ \
    X(ADD,          "add",          2, 1, IRF_PURE | IRF_ELEMWISE | IRF_COMMUT) \
    X(SUB,          "sub",          2, 1, IRF_PURE | IRF_ELEMWISE) \
    X(MUL,          "mul",          2, 1, IRF_PURE | IRF_ELEMWISE | IRF_COMMUT) \
    X(DIV,          "div",          2, 1, IRF_PURE | IRF_ELEMWISE) /* ints: C truncation */ \
    X(REM,          "rem",          2, 1, IRF_PURE | IRF_ELEMWISE) /* ints: C %, floats: fmod */ \
    X(MIN,          "min",          2, 1, IRF_PURE | IRF_ELEMWISE | IRF_COMMUT) /* floats: fminf (NaN ignored) */ \
    X(MAX,          "max",          2, 1, IRF_PURE | IRF_ELEMWISE | IRF_COMMUT) \
    X(AND,          "and",          2, 1, IRF_PURE | IRF_ELEMWISE | IRF_COMMUT) /* ints and i1 */ \
    X(OR,           "or",           2, 1, IRF_PURE | IRF_ELEMWISE | IRF_COMMUT) \
    X(XOR,          "xor",          2, 1, IRF_PURE | IRF_ELEMWISE | IRF_COMMUT) \
    X(SHL,          "shl",          2, 1, IRF_PURE | IRF_ELEMWISE) \
    X(SHR,          "shr",          2, 1, IRF_PURE | IRF_ELEMWISE) /* arithmetic if signed, logical if unsigned */ \
    X(CMP,          "cmp",          2, 1, IRF_PURE | IRF_ELEMWISE) /* attr[0] = IrCmp; result i1 */ \
    X(NEG,          "neg",          1, 1, IRF_PURE | IRF_ELEMWISE) \
    X(NOT,          "not",          1, 1, IRF_PURE | IRF_ELEMWISE) /* bitwise; logical on i1 */ \
    X(EXP,          "exp",          1, 1, IRF_PURE | IRF_ELEMWISE) \
    X(EXP2,         "exp2",         1, 1, IRF_PURE | IRF_ELEMWISE) \
    X(LOG,          "log",          1, 1, IRF_PURE | IRF_ELEMWISE) \
    X(LOG2,         "log2",         1, 1, IRF_PURE | IRF_ELEMWISE) \
    X(SQRT,         "sqrt",         1, 1, IRF_PURE | IRF_ELEMWISE) \
    X(RSQRT,        "rsqrt",        1, 1, IRF_PURE | IRF_ELEMWISE) \
    X(ABS,          "abs",          1, 1, IRF_PURE | IRF_ELEMWISE) \
    X(TANH,         "tanh",         1, 1, IRF_PURE | IRF_ELEMWISE) \
    X(SIN,          "sin",          1, 1, IRF_PURE | IRF_ELEMWISE) \
    X(COS,          "cos",          1, 1, IRF_PURE | IRF_ELEMWISE) \
    X(FLOOR,        "floor",        1, 1, IRF_PURE | IRF_ELEMWISE) \
    X(CEIL,         "ceil",         1, 1, IRF_PURE | IRF_ELEMWISE) \
    X(SELECT,       "select",       3, 1, IRF_PURE | IRF_ELEMWISE) /* cond (i1), a, b */ \
    X(CAST,         "cast",         1, 1, IRF_PURE | IRF_ELEMWISE) /* to the result type; floats round to nearest even */ \
    X(ADDPTR,       "addptr",       2, 1, IRF_PURE | IRF_ELEMWISE) /* ptr, integer offset in elements */ \
    X(LOAD,         "load",        -1, 1, IRF_MEM_READ)           /* ptr [, mask [, other]] */ \
    X(STORE,        "store",       -1, 0, IRF_MEM_WRITE)          /* ptr, value [, mask] */ \
    X(ATOMIC_ADD,   "atomic_add",  -1, 1, IRF_MEM_READ | IRF_MEM_WRITE) /* ptr, value [, mask]; returns old */ \
    X(DOT,          "dot",          3, 1, IRF_PURE)               /* a[M,K], b[K,N], acc[M,N] -> acc + a@b */ \
    X(REDUCE,       "reduce",       1, 1, IRF_PURE)               /* attr[0] = axis, attr[1] = IrReduce */ \
    X(FOR,          "for",         -1,-1, IRF_REGIONS)            /* lo, hi, step, inits... ; region 0 args (iv, carried...) */ \
    X(IF,           "if",           1,-1, IRF_REGIONS)            /* cond (scalar i1); regions 0 = then, 1 = else */ \
    X(YIELD,        "yield",       -1, 0, IRF_TERM)               /* ends for/if regions */ \
    X(RETURN,       "return",       0, 0, IRF_TERM)               /* ends the kernel body */ \
    X(ASSERT,       "assert",       1, 0, IRF_MEM_WRITE)          /* device_assert(cond), sattr = message */ \
    X(FENCE,        "fence",        0, 0, IRF_MEM_READ | IRF_MEM_WRITE) /* fence(): GPU-scope acq_rel + CTA barrier */ \
    /* ---- GPU IR only ---- */ \
    X(CONVERT_LAYOUT, "convert_layout", 1, 1, IRF_PURE | IRF_GPU)  /* same type, other layout */

enum {
    IRF_PURE      = 1 << 0,   /* no side effects: CSE, DCE and LICM may touch it */
    IRF_ELEMWISE  = 1 << 1,   /* all tile operands and the result share one shape */
    IRF_COMMUT    = 1 << 2,
    IRF_TERM      = 1 << 3,
    IRF_REGIONS   = 1 << 4,
    IRF_MEM_READ  = 1 << 5,
    IRF_MEM_WRITE = 1 << 6,
    IRF_GPU       = 1 << 7,
};

typedef enum IrOpcode {
#define IR_X_ENUM(e, t, na, nr, fl) IR_##e,
    IR_OPS(IR_X_ENUM)
#undef IR_X_ENUM
    IR_OP_COUNT
} IrOpcode;

typedef struct IrOpInfo {
    const char *name;
    int nargs, nres;
    unsigned flags;
} IrOpInfo;
extern const IrOpInfo ir_op_info[IR_OP_COUNT];
IrOpcode ir_opcode_from_name(const char *s);   /* IR_OP_COUNT when unknown */

typedef enum IrCmp { IR_CMP_EQ, IR_CMP_NE, IR_CMP_LT, IR_CMP_LE, IR_CMP_GT, IR_CMP_GE } IrCmp;
typedef enum IrReduce { IR_RED_SUM, IR_RED_MAX, IR_RED_MIN, IR_RED_ARGMAX, IR_RED_ARGMIN } IrReduce;
/* Whether `op` is defined on f8e4m3 values (operands or result): data
 * movement, casts, select and dot; not arithmetic, comparisons, reductions or
 * atomics (the language reports those, the verifier rejects them). */
bool ir_f8_op_ok(IrOpcode op);
const char *ir_cmp_name(IrCmp c);          /* "eq", "lt", ... */
const char *ir_reduce_name(IrReduce r);    /* "sum", "max", ... */

/* ---- values, ops, blocks ---- */
typedef struct IrValue IrValue;
typedef struct IrOp IrOp;
typedef struct IrBlock IrBlock;
typedef struct IrFunc IrFunc;

struct IrValue {
    int id;               /* unique within the function */
    IrType type;
    IrOp *def;            /* defining op; NULL for block arguments and parameters */
    IrBlock *block;       /* owning block for block arguments; NULL for params/results */
    int index;            /* result index in def, or argument/parameter index */
    const char *name;     /* source name hint, for printing (may be NULL) */
    int32_t divisibility; /* parameters: known divisibility (ints) / alignment in bytes (ptrs); 1 = unknown */
    int layout;           /* GPU IR: index into IrFunc.layouts, -1 = none */
};

/* Named attributes: the GPU passes' decisions (pipeline stages, SRAM
 * placement, ...) on ops and kernels. Each is one integer or a list of them;
 * printed as `{name = 3, other = [1, 2]}` and read back by ir_parse. Names
 * are identifiers with dots (`smem.offset`); docs/ir.md lists the ones the
 * GPU passes write. */
typedef struct IrAttr {
    const char *name;
    int64_t *v;
    int n;
    bool list;            /* printed as [..] even with one element */
} IrAttr;

typedef struct IrAttrList {
    IrAttr *v;
    int n, cap;
} IrAttrList;

struct IrOp {
    IrOpcode op;
    SrcLoc loc;
    IrValue **args;
    int nargs;
    IrValue **res;
    int nres;
    IrBlock *regions[2];
    int nregions;
    int64_t ival;         /* CONST (ints) */
    double fval;          /* CONST (floats) */
    int attr[IR_MAX_RANK];/* see the table */
    const char *sattr;    /* ASSERT message */
    IrAttrList attrs;     /* named attributes (GPU IR) */
    IrOp *prev, *next;
    IrBlock *parent;
};

struct IrBlock {
    IrOp *first, *last;
    IrValue **args;
    int nargs, cap_args;
    IrOp *parent_op;      /* the for/if owning this block; NULL for a function body */
    IrFunc *func;
};

/* Schedule settings a kernel declares (`with (num_warps = 4, ...)`) or a compile overrides. */
typedef struct IrSchedule {
    int num_warps;        /* default 4 */
    int num_stages;       /* default 2; 1 disables software pipelining */
} IrSchedule;

/* A const parameter after specialisation: recorded for printing and cache keys. */
typedef struct IrConstParam {
    const char *name;
    IrType type;
    int64_t ival;
    double fval;
    const char *sval;     /* `const f: fn` (type void): the helper's name; `const T: dtype`
                           * (type = that scalar type): its name; NULL for numbers */
} IrConstParam;

struct IrFunc {
    const char *name;
    SrcLoc loc;
    Arena *arena;
    IrValue **params;
    int nparams, cap_params;
    IrConstParam *consts;
    int nconsts;
    IrBlock *body;
    IrSchedule sched;
    int next_id;
    PtrVec layouts;       /* GPU IR: IrLayout*, indexed by IrValue.layout */
    IrAttrList attrs;     /* GPU IR: kernel attributes (smem, wgmma) */
};

typedef struct IrModule {
    Arena *arena;
    IrFunc **funcs;
    int nfuncs, cap_funcs;
} IrModule;

/* ---- GPU IR: layouts (layout.c) ----
 * A layout says which thread holds which element of a tile (docs/gpu.md).
 * A *blocked* layout distributes a tile over the threads of a CTA like
 * Triton's #blocked: per dimension d, each thread holds spt[d] consecutive
 * elements, tpw[d] lanes and wpc[d] warps tile the dimension, and the pattern
 * repeats (or wraps: replication) when the tile is larger (smaller) than
 * spt*tpw*wpc. `order` lists dimensions fastest first. The MMA generalisation:
 * rpw[d] register repeats per warp tile between lanes and warps, wst[d]
 * explicit warp strides (0: none), and mma = 1 + fragment (A, B, C) for the
 * mma.sync layouts of a warp grid mma_wm x mma_wn, whose fields are fixed by
 * the fragment (ir_layout_mma); mma_rn > 0 (C and B only) puts each warp's
 * n8 tiles side by side, rpw[1] = mma_rn of them, so warp_n owns the columns
 * [warp_n * 8 rn, (warp_n + 1) * 8 rn): the split of wgmma with warpgroups
 * along N (each warpgroup one m64n(8 rn) instruction; 0: warp_n's tiles are
 * interleaved, on * wn + warp_n, as mma.sync wants). A *slice* layout is its parent (an index in
 * IrFunc.layouts) with dimension `dim` removed.
 * The codegen layer owns the meaning (geometry, layout.h); the IR holds,
 * prints, parses and verifies the description.
 * Text: `#L3 = #blocked<spt=[1,4], tpw=[2,16], wpc=[4,1], order=[1,0]>`,
 * `#mma<C, wm=2, wn=2>`, `#mma<C, wm=4, wn=2, rn=16>`, `#slice<dim=1, parent=#L2>` before the kernel,
 * and `tensor<64x64xf32, #L3>` in value types. */
typedef enum IrLayoutKind { IR_LAYOUT_BLOCKED, IR_LAYOUT_SLICE } IrLayoutKind;
enum { IR_MMA_A = 1, IR_MMA_B = 2, IR_MMA_C = 3 };  /* IrLayout.mma */

typedef struct IrLayout {
    IrLayoutKind kind;
    int rank;                       /* rank of the values it applies to */
    int spt[IR_MAX_RANK], tpw[IR_MAX_RANK], wpc[IR_MAX_RANK], order[IR_MAX_RANK];
    int rpw[IR_MAX_RANK], wst[IR_MAX_RANK];
    int mma, mma_wm, mma_wn, mma_rn;
    int parent, dim;                /* slice */
} IrLayout;

const IrLayout *ir_layout_get(const IrFunc *f, int idx);   /* NULL when out of range */
int  ir_layout_intern(IrFunc *f, const IrLayout *l);        /* find or add; returns the index */
/* The mma.sync m16n8k16 layout of fragment `mma` (IR_MMA_A/B/C) for a warp
 * grid wm x wn: C [M,N], A [M,K] replicated over warp_n, B [K,N] over warp_m. */
int  ir_layout_mma(IrFunc *f, int mma, int wm, int wn);
/* The same with rn n8 tiles side by side per warp (IrLayout.mma_rn; 0: interleaved; A ignores it). */
int  ir_layout_mma_rn(IrFunc *f, int mma, int wm, int wn, int rn);
bool ir_layout_mma_fill(int mma, int wm, int wn, int rn, IrLayout *out);  /* the same, not interned */
void ir_layout_print(StrBuf *out, const IrFunc *f, int idx); /* `#blocked<...>` etc. */

/* ---- named attributes (ir.c) ----
 * The GPU passes' vocabulary (docs/gpu.md has the table; ir_verify checks
 * the SRAM and pipeline invariants):
 *   kernel: smem (bytes of dynamic SRAM), wgmma (1: dots may use wgmma)
 *   for:    pipeline.stages, pipeline.issue (ops before the loop where its
 *           prologue goes), pipeline.mbarrier = 1 (stages handed over through
 *           mbarriers: full[s]/empty[s], 8 bytes each, in the loop's own smem.*
 *           buffer of 16 x stages bytes)
 *   load:   pipeline.slot_bytes (one stage of a pipelined load)
 *   op:     smem.offset, smem.bytes, smem.live = [first, last op position]
 *           (its scratch, or a pipelined load's stages), mma.deferred = 1 (an
 *           operand convert read by ldmatrix at its dots), smem.view = offset
 *           (a deferred convert that writes nothing: it reads the tile an
 *           earlier convert of the same value, or of its transpose, staged
 *           at that offset)
 *   kernel: pingpong = G (G warpgroups take turns on the tensor cores);
 *   dot:    pingpong = 1 (this dot's wgmmas are issued in its warpgroup's turn),
 *           wgmma.pending = 1 (its wgmma group stays in flight into the next
 *           iteration of its pipelined loop: wait_group 1, the last wait after
 *           the loop),
 *           wgmma.overlap = 1 (its wgmma group stays in flight until the next
 *           dot of its loop body, whose wait retires it: the ops between them
 *           overlap it; pass_dot_overlap.c),
 *           wgmma.e4m3 = 1 (an f8e4m3 dot on FP8 wgmma, m64nNk32: its SRAM
 *           operand tiles are K-major with K permuted to the register
 *           fragment's order; pass_accelerate_dot.c, cg_dot_wgmma.c)
 *   kernel: tma.maps = N (N tensor-map parameters after the program's own);
 *   load:   tma.map = k (a pipelined load of an mbarrier loop copied by TMA
 *           through tensor map k; pass_tma.c)
 *   kernel: warp_spec = 1 (a producer warpgroup beyond num_warps issues the
 *           pipelined loops' copies, the num_warps consumers compute;
 *           pass_warp_specialize.c) */
#define IR_ATTR_SMEM          "smem"
#define IR_ATTR_WGMMA         "wgmma"
#define IR_ATTR_STAGES        "pipeline.stages"
#define IR_ATTR_ISSUE         "pipeline.issue"
#define IR_ATTR_MBARRIER      "pipeline.mbarrier"
#define IR_ATTR_SLOT_BYTES    "pipeline.slot_bytes"
#define IR_ATTR_SMEM_OFFSET   "smem.offset"
#define IR_ATTR_SMEM_BYTES    "smem.bytes"
#define IR_ATTR_SMEM_LIVE     "smem.live"
#define IR_ATTR_DEFERRED      "mma.deferred"
#define IR_ATTR_PINGPONG      "pingpong"
#define IR_ATTR_MMA_PENDING   "wgmma.pending"
#define IR_ATTR_MMA_OVERLAP   "wgmma.overlap"
#define IR_ATTR_SMEM_VIEW     "smem.view"
#define IR_ATTR_WGMMA_E4M3    "wgmma.e4m3"
#define IR_ATTR_TMA_MAP       "tma.map"
#define IR_ATTR_TMA_MAPS      "tma.maps"
#define IR_ATTR_WARP_SPEC     "warp_spec"
#define IR_ATTR_WS_REGS       "warp_spec.producer_regs"
/* kernel: persistent = 1 (static tile order) or 2 (longest-first): the body is one tile
 * loop over the logical grid, the last three parameters (compiler/passes/persistent.c) */
#define IR_ATTR_PERSISTENT    "persistent"

void          ir_attr_set(Arena *a, IrAttrList *l, const char *name, int n, const int64_t *v, bool list);
void          ir_attr_set_int(Arena *a, IrAttrList *l, const char *name, int64_t v);
const IrAttr *ir_attr_get(const IrAttrList *l, const char *name);
int64_t       ir_attr_int(const IrAttrList *l, const char *name, int64_t dflt); /* first element */
void          ir_attr_remove(IrAttrList *l, const char *name);

/* ---- construction (ir.c) ---- */
IrModule *ir_module_new(Arena *a);
void      ir_module_add(IrModule *m, IrFunc *f);
IrFunc   *ir_func_new(Arena *a, const char *name, SrcLoc loc);
IrValue  *ir_func_add_param(IrFunc *f, IrType t, const char *name);
IrBlock  *ir_block_new(IrFunc *f);
IrValue  *ir_block_add_arg(IrBlock *b, IrType t, const char *name);
IrValue  *ir_value_new(IrFunc *f, IrType t);
/* A detached op with `nargs` operands (copied) and `nres` fresh results of the given types. */
IrOp     *ir_op_new(IrFunc *f, IrOpcode op, SrcLoc loc, int nargs, IrValue *const *args,
                    int nres, const IrType *res_types);
void      ir_op_set_args(IrFunc *f, IrOp *op, int nargs, IrValue *const *args);
IrBlock  *ir_op_add_region(IrFunc *f, IrOp *op);      /* returns the new (empty) block */

void ir_block_append(IrBlock *b, IrOp *op);
void ir_insert_before(IrOp *pos, IrOp *op);
void ir_insert_after(IrOp *pos, IrOp *op);
void ir_op_unlink(IrOp *op);                          /* detach from its block */

/* ---- traversal and rewriting ---- */
typedef void (*IrWalkFn)(IrOp *op, void *ctx);
/* Pre-order over every op of the function, nested regions included. The
 * callback may unlink the op it is given (the walk saves `next` first). */
void ir_walk(IrFunc *f, IrWalkFn fn, void *ctx);
void ir_walk_block(IrBlock *b, IrWalkFn fn, void *ctx);
/* Replace every use of `from` with `to` in the function. */
void ir_replace_uses(IrFunc *f, IrValue *from, IrValue *to);
/* Uses of every value, indexed by IrValue.id (array of f->next_id ints, arena). */
int *ir_use_counts(IrFunc *f);
/* True when `v` is defined outside `op`'s regions (so invariant with respect to them). */
bool ir_value_defined_outside(const IrValue *v, const IrOp *op);

/* ---- builder: a cursor plus a location, for front ends and passes ---- */
typedef struct IrBuilder {
    IrFunc *f;
    IrBlock *block;       /* append here ... */
    IrOp *before;         /* ... or insert before this op when non-NULL */
    SrcLoc loc;
} IrBuilder;

IrOp    *irb_insert(IrBuilder *b, IrOp *op);
IrValue *irb_op(IrBuilder *b, IrOpcode op, IrType rt, int nargs, IrValue *const *args);
IrValue *irb_op1(IrBuilder *b, IrOpcode op, IrType rt, IrValue *x);
IrValue *irb_op2(IrBuilder *b, IrOpcode op, IrType rt, IrValue *x, IrValue *y);
IrValue *irb_const_int(IrBuilder *b, IrType t, int64_t v);
IrValue *irb_const_float(IrBuilder *b, IrType t, double v);

/* ---- text, checking (printer.c, parser.c, verify.c) ---- */
struct Diag;
void      ir_print_func(StrBuf *out, const IrFunc *f);
void      ir_print_module(StrBuf *out, const IrModule *m);
/* As above; with_locs appends `loc(LINE:COL)` to every op (and the kernel's
 * `loc("FILE":LINE:COL)` to its header), which ir_parse reads back. */
void      ir_print_func_ex(StrBuf *out, const IrFunc *f, bool with_locs);
void      ir_print_module_ex(StrBuf *out, const IrModule *m, bool with_locs);
IrModule *ir_parse(Arena *a, struct Diag *d, const char *path, const char *src);
/* Checks the invariants above; appends "internal error: ..." lines naming the
 * op and its source location to `err` and returns false on the first problems. */
bool      ir_verify(const IrFunc *f, StrBuf *err);
/* GPU IR after layout assignment: ir_verify, and every tile value has a layout. */
bool      ir_verify_gpu(const IrFunc *f, StrBuf *err);

#endif
