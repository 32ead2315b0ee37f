/* test_cg_basic.c — the GPU backend on kernels built with the IR builder:
 * layout math on the CPU (every element owned exactly once), layout
 * assignment, vectorisation, and PTX accepted by ptxas for sm_80 and sm_90a. */
#include "tests/testutil.h"
#include "tests/ptx_util.h"
#include "tests/codegen/cg_build.h"
#include "compiler/codegen/codegen.h"
#include "compiler/gpuir/layout.h"

#include <unistd.h>

/* Compile to `stage`; on failure the test fails with the error text. */
static char *compile(IrFunc *f, const char *arch, CgStage stage, CgResult *res)
{
    CgOptions o = {.target = tgt_parse(arch), .stage = stage};
    ck_assert_msg(o.target != NULL, "unknown arch %s", arch);
    Diag d;
    diag_init(&d, f->name, NULL);
    memset(res, 0, sizeof *res);
    sb_init(&res->out);
    sb_init(&res->dumps);
    sb_init(&res->stats);
    bool ok = cg_compile(f, &o, res, &d);
    ck_assert_msg(ok, "cg_compile(%s, %s) failed:\n%s", f->name, arch, d.out.data ? d.out.data : "");
    diag_free(&d);
    sb_putc(&res->out, 0);
    res->out.len--;
    return res->out.data;
}

static void free_res(CgResult *r)
{
    sb_free(&r->out);
    sb_free(&r->dumps);
    sb_free(&r->stats);
}

/* ---- layout math ---- */

/* Every element of the tile has exactly one owner; every (thread, register)
 * maps inside the tile; replicas hold the same element as their owner by
 * construction (index is a function of the thread and register). */
static void check_geom(const IrFunc *f, int layout, IrType t)
{
    GpGeom g;
    ck_assert_msg(gp_geom(f, layout, t, &g), "no geometry for layout %d", layout);
    int64_t n = ir_type_numel(t);
    int *owners = calloc((size_t)n, sizeof(int));
    int *holders = calloc((size_t)n, sizeof(int));
    int nthreads = 32 * f->sched.num_warps;
    for (int tid = 0; tid < nthreads; tid++)
        for (int r = 0; r < g.nregs; r++) {
            int idx[GP_MAX_RANK];
            gp_geom_index(&g, tid, r, idx);
            int64_t flat = 0;
            for (int i = 0; i < t.rank; i++) {
                int x = idx[g.vdims[i]];
                ck_assert_msg(x >= 0 && x < t.shape[i], "index %d out of dim %d", x, t.shape[i]);
                flat = flat * t.shape[i] + x;
            }
            for (int d = 0; d < g.rank; d++) {
                bool is_vdim = false;
                for (int i = 0; i < t.rank; i++) is_vdim |= g.vdims[i] == d;
                if (!is_vdim) ck_assert_int_eq(idx[d], 0);
            }
            holders[flat]++;
            if (gp_geom_owner(&g, tid, r)) owners[flat]++;
        }
    StrBuf ls;
    sb_init(&ls);
    ir_layout_print(&ls, f, layout);
    for (int64_t i = 0; i < n; i++) {
        ck_assert_msg(owners[i] == 1, "element %lld of %s has %d owners", (long long)i, ls.data, owners[i]);
        ck_assert_msg(holders[i] >= 1, "element %lld not held", (long long)i);
        if (!gp_geom_replicated(&g)) ck_assert_int_eq(holders[i], 1);
    }
    /* All elements are held equally often: replication is uniform. */
    for (int64_t i = 1; i < n; i++) ck_assert_int_eq(holders[i], holders[0]);
    sb_free(&ls);
    free(owners);
    free(holders);
}

START_TEST(layout_sweep)
{
    Arena a;
    arena_init(&a);
    SrcLoc loc = {"t", 1, 1};
    int warps_tab[] = {1, 2, 4, 8};
    for (int wi = 0; wi < 4; wi++) {
        IrFunc *f = ir_func_new(&a, "k", loc);
        f->sched.num_warps = warps_tab[wi];
        for (int m = 1; m <= 64; m *= 4)
            for (int n = 1; n <= 128; n *= 8)
                for (int s = 1; s <= 8; s *= 2)
                    for (int ord = 0; ord < 2; ord++) {
                        int32_t shape[2] = {m, n};
                        int spt[2] = {ord ? s : 1, ord ? 1 : s}, order[2] = {ord ? 0 : 1, ord ? 1 : 0};
                        int l = gp_layout_blocked(f, 2, shape, spt, order, f->sched.num_warps);
                        const IrLayout *L = ir_layout_get(f, l);
                        ck_assert_int_eq(L->tpw[0] * L->tpw[1], 32);
                        ck_assert_int_eq(L->wpc[0] * L->wpc[1], f->sched.num_warps);
                        IrType t = t2(IR_F32, m, n);
                        check_geom(f, l, t);
                        /* Any shape works in any layout of its rank, and so do the slices. */
                        check_geom(f, l, t2(IR_F32, m * 2, n > 1 ? n / 2 : 1));
                        check_geom(f, gp_layout_slice(f, l, 0), t1(IR_F32, n));
                        check_geom(f, gp_layout_slice(f, l, 1), t1(IR_F32, m));
                        /* Expand-dims and transposed forms keep the registers. */
                        int e = gp_layout_insert_dim(f, l, 1);
                        int32_t s3[3] = {m, 1, n};
                        check_geom(f, e, ir_type_tile(ir_type_scalar(IR_F32), 3, s3));
                        int perm[2] = {1, 0};
                        check_geom(f, gp_layout_permute(f, l, perm), t2(IR_F32, n, m));
                    }
    }
    arena_free(&a);
}
END_TEST

START_TEST(layout_reference_mapping)
{
    /* The example in layout.c: tensor<128x64xf32>, spt [1,4], tpw [2,16], wpc [4,1]. */
    Arena a;
    arena_init(&a);
    SrcLoc loc = {"t", 1, 1};
    IrFunc *f = ir_func_new(&a, "k", loc);
    int32_t shape[2] = {128, 64};
    int spt[2] = {1, 4}, order[2] = {1, 0};
    int l = gp_layout_blocked(f, 2, shape, spt, order, 4);
    const IrLayout *L = ir_layout_get(f, l);
    ck_assert_int_eq(L->tpw[0], 2);
    ck_assert_int_eq(L->tpw[1], 16);
    ck_assert_int_eq(L->wpc[0], 4);
    ck_assert_int_eq(L->wpc[1], 1);
    GpGeom g;
    ck_assert(gp_geom(f, l, t2(IR_F32, 128, 64), &g));
    ck_assert_int_eq(g.nregs, 64);
    int idx[2];
    gp_geom_index(&g, 17, 0, idx);
    ck_assert_int_eq(idx[0], 1);
    ck_assert_int_eq(idx[1], 4);
    gp_geom_index(&g, 17, 3, idx); /* columns are the fastest registers */
    ck_assert_int_eq(idx[0], 1);
    ck_assert_int_eq(idx[1], 7);
    gp_geom_index(&g, 17, 4, idx);
    ck_assert_int_eq(idx[0], 9);
    gp_geom_index(&g, 32 * 3 + 17, 63, idx); /* warp 3: rows 7 + 8k shifted by 6 */
    ck_assert_int_eq(idx[0], 6 + 1 + 15 * 8);
    ck_assert_int_eq(idx[1], 7);
    /* Equivalence: a slice's padded form is its parent on a unit dim. */
    int s = gp_layout_slice(f, l, 1);
    int e = gp_layout_insert_dim(f, gp_layout_default(f, 1, shape, 4), 1);
    ck_assert(gp_layouts_equivalent(f, l, l, t2(IR_F32, 128, 64)));
    ck_assert(!gp_layouts_equivalent(f, s, gp_layout_default(f, 1, shape, 4), t1(IR_F32, 128)));
    (void)e;
    arena_free(&a);
}
END_TEST

static void check_all_values(IrBlock *b)
{
    for (IrOp *op = b->first; op; op = op->next) {
        for (int i = 0; i < op->nres; i++) {
            IrValue *v = op->res[i];
            if (v->type.rank == 0) continue;
            ck_assert_msg(v->layout >= 0, "%%%d (%s) has no layout", v->id, ir_op_info[op->op].name);
            check_geom(b->func, v->layout, v->type);
        }
        for (int r = 0; r < op->nregions; r++) check_all_values(op->regions[r]);
    }
}

START_TEST(assigned_layouts_cover_tiles)
{
    Kb k[3];
    build_vec_add(&k[0], 16, 1024);
    build_softmax(&k[1], 4, 256, 4);
    build_matmul(&k[2], IR_F16, 32, 64, 16, 4);
    for (int i = 0; i < 3; i++) {
        CgResult r;
        char *txt = compile(k[i].f, "sm_80", CG_STAGE_GPU_IR, &r);
        ck_assert_ptr_nonnull(strstr(txt, "#blocked<"));
        StrBuf err;
        sb_init(&err);
        ck_assert_msg(ir_verify(k[i].f, &err), "GPU IR does not verify: %s", err.data);
        sb_free(&err);
        check_all_values(k[i].f->body);
        free_res(&r);
        arena_free(&k[i].a);
    }
}
END_TEST

/* ---- vectorisation and the kernel shape in PTX ---- */
START_TEST(vec_add_vectorised_when_aligned)
{
    Kb k;
    build_vec_add(&k, 16, 1024);
    CgResult r;
    char *ptx = compile(k.f, "sm_80", CG_STAGE_PTX, &r);
    ck_assert_msg(strstr(ptx, "ld.global.v4.b32"), "no 16-byte loads:\n%s", ptx);
    ck_assert_msg(strstr(ptx, "st.global.v4.b32"), "no 16-byte stores");
    ck_assert_ptr_nonnull(strstr(ptx, ".maxntid 128"));
    ck_assert_ptr_nonnull(strstr(ptx, ".entry vec_add"));
    ck_assert_ptr_nonnull(strstr(ptx, ".version 8."));
    free_res(&r);
    arena_free(&k.a);
}
END_TEST

START_TEST(vec_add_scalar_when_mask_unaligned)
{
    /* n of unknown divisibility: the mask may change inside any 4 elements. */
    Kb k;
    build_vec_add(&k, 1, 1024);
    CgResult r;
    char *gpu = compile(k.f, "sm_80", CG_STAGE_GPU_IR, &r);
    ck_assert_msg(strstr(gpu, "spt=[1]"), "expected one element per thread run:\n%s", gpu);
    free_res(&r);
    arena_free(&k.a);
    build_vec_add(&k, 1, 1024);
    char *ptx = compile(k.f, "sm_80", CG_STAGE_PTX, &r);
    ck_assert_ptr_null(strstr(ptx, "ld.global.v4"));
    ck_assert_ptr_nonnull(strstr(ptx, "ld.global.b32"));
    free_res(&r);
    arena_free(&k.a);
}
END_TEST

START_TEST(matmul_unmasked_loads_vectorised)
{
    Kb k;
    build_matmul(&k, IR_F32, 64, 64, 32, 4); /* f32: the FMA path */
    CgResult r;
    char *ptx = compile(k.f, "sm_80", CG_STAGE_PTX, &r);
    ck_assert_msg(strstr(ptx, "ld.global.v4") || strstr(ptx, "ld.global.nc.v4"), "f32 loads not vectorised");
    ck_assert_ptr_nonnull(strstr(ptx, "fma.rn.f32"));
    ck_assert_int_gt(r.smem_bytes, 0); /* operands go through SRAM to the dot layouts */
    ck_assert_ptr_nonnull(strstr(r.stats.data, "warps: 4\n"));
    free_res(&r);
    arena_free(&k.a);
}
END_TEST

START_TEST(softmax_reduction_lowering)
{
    Kb k;
    build_softmax(&k, 4, 256, 4);
    CgResult r;
    char *gpu = compile(k.f, "sm_80", CG_STAGE_GPU_IR, &r);
    ck_assert_msg(strstr(gpu, "#slice<dim=1"), "reductions must give slice layouts:\n%s", gpu);
    free_res(&r);
    arena_free(&k.a);
    build_softmax(&k, 4, 256, 4);
    char *ptx = compile(k.f, "sm_80", CG_STAGE_PTX, &r);
    ck_assert_ptr_nonnull(strstr(ptx, "shfl.sync.bfly.b32"));
    ck_assert_ptr_nonnull(strstr(ptx, "ex2.approx.ftz.f32"));
    ck_assert_ptr_nonnull(strstr(ptx, "max.f32"));
    free_res(&r);
    arena_free(&k.a);
}
END_TEST

START_TEST(llvm_stage_marks_kernel)
{
    Kb k;
    build_vec_add(&k, 16, 256);
    k.f->sched.num_warps = 2;
    CgResult r;
    char *ll = compile(k.f, "sm_90a", CG_STAGE_LLVM, &r);
    ck_assert_ptr_nonnull(strstr(ll, "!nvvm.annotations"));
    ck_assert_ptr_nonnull(strstr(ll, "!\"maxntidx\", i32 64"));
    ck_assert_ptr_nonnull(strstr(ll, "ptr addrspace(1)"));
    ck_assert_ptr_nonnull(strstr(ll, "nvptx64-nvidia-cuda"));
    ck_assert_int_eq(r.num_warps, 2);
    free_res(&r);
    arena_free(&k.a);
}
END_TEST

/* The arch string is parsed by the driver (tgt_parse, tests/support/test_target.c);
 * a backend called without a target reports a bug, not a crash. */
START_TEST(no_target_is_an_internal_error)
{
    Kb k;
    build_vec_add(&k, 16, 256);
    CgOptions o = {.target = NULL, .stage = CG_STAGE_PTX};
    CgResult r;
    memset(&r, 0, sizeof r);
    Diag d;
    diag_init(&d, "k", NULL);
    ck_assert(!cg_compile(k.f, &o, &r, &d));
    ck_assert_ptr_nonnull(strstr(d.out.data, "error: internal error: cg_compile: no target"));
    ck_assert_int_eq(d.ninternal, 1);
    diag_free(&d);
    free_res(&r);
    arena_free(&k.a);
}
END_TEST

/* ---- ptxas ---- */
static void ptxas_accepts(IrFunc *f, const char *arch)
{
    CgResult r;
    compile(f, arch, CG_STAGE_CUBIN, &r);
    ck_assert_int_gt((int)r.out.len, 4);
    ck_assert_msg(memcmp(r.out.data, "\177ELF", 4) == 0, "cubin is not an ELF file");
    free_res(&r);
}

typedef void (*BuildFn)(Kb *k, int variant);

static void b_vec_add(Kb *k, int v) { build_vec_add(k, v ? 16 : 1, v ? 1024 : 64); }
static void b_softmax(Kb *k, int v) { build_softmax(k, v ? 4 : 1, v ? 256 : 32, v ? 4 : 8); }
static void b_matmul(Kb *k, int v)
{
    if (v) build_matmul(k, IR_BF16, 32, 32, 16, 4);
    else build_matmul(k, IR_F32, 16, 16, 8, 2);
}

START_TEST(ptxas_accepts_kernels)
{
    BuildFn fns[] = {b_vec_add, b_softmax, b_matmul};
    const char *archs[] = {"sm_80", "sm_90a"};
    for (int i = 0; i < 3; i++)
        for (int v = 0; v < 2; v++)
            for (int a = 0; a < 2; a++) {
                Kb k;
                fns[i](&k, v);
                ptxas_accepts(k.f, archs[a]);
                arena_free(&k.a);
            }
}
END_TEST


/* Every remaining op family in one kernel: argmax/argmin/min reductions,
 * full reduction to a scalar, atomics (tile, scalar, result used and not),
 * if with results, trans, reshape, casts through f16/bf16/i8/i1, the
 * transcendental functions, select, masked i8/f16 loads and stores. */
static IrValue *un(Kb *k, IrOpcode op, IrValue *x) { return irb_op1(&k->b, op, x->type, x); }

static void build_misc(Kb *k, int warps)
{
    kb_init(k, "misc");
    k->f->sched.num_warps = warps;
    IrValue *X = ir_func_add_param(k->f, ir_type_ptr(IR_F32), "X");
    IrValue *H = ir_func_add_param(k->f, ir_type_ptr(IR_F16), "H");
    IrValue *B8 = ir_func_add_param(k->f, ir_type_ptr(IR_I8), "B8");
    IrValue *I = ir_func_add_param(k->f, ir_type_ptr(IR_I32), "I");
    IrValue *n = ir_func_add_param(k->f, ir_type_scalar(IR_I32), "n");
    IrType i32 = ir_type_scalar(IR_I32);
    IrValue *rows = kb_arange(k, 16), *cols = kb_arange(k, 32);
    IrValue *c32 = irb_const_int(&k->b, i32, 32);
    IrType sh = t2(IR_F32, 16, 32);
    IrValue *px = kb_ptr2d(k, X, rows, c32, cols);
    IrValue *x = kb_load(k, px, NULL, NULL);
    /* transcendental chain and casts */
    IrValue *y = un(k, IR_TANH, un(k, IR_SIN, un(k, IR_COS, un(k, IR_SQRT, un(k, IR_ABS, x)))));
    y = kb_bin(k, IR_ADD, y, un(k, IR_LOG, un(k, IR_EXP2, un(k, IR_RSQRT, un(k, IR_EXP, x)))));
    y = kb_bin(k, IR_MAX, un(k, IR_FLOOR, y), un(k, IR_CEIL, un(k, IR_LOG2, un(k, IR_NEG, y))));
    IrValue *yh = irb_op1(&k->b, IR_CAST, ir_type_with_elem(sh, IR_F16), y);
    IrValue *yb = irb_op1(&k->b, IR_CAST, ir_type_with_elem(sh, IR_BF16), yh);
    IrValue *yf = irb_op1(&k->b, IR_CAST, sh, yb);
    IrValue *yi = irb_op1(&k->b, IR_CAST, ir_type_with_elem(sh, IR_I8), yf);
    IrValue *pos = kb_cmp(k, IR_CMP_GT, yf, irb_const_float(&k->b, sh, 0));
    IrValue *sel = irb_op(&k->b, IR_SELECT, sh, 3, (IrValue *[]){pos, yf, x});
    /* masked f16 and i8 stores and loads */
    IrValue *mask = kb_cmp(k, IR_CMP_LT, kb_ptr2d(k, X, rows, c32, cols), px); /* all false: ptr compare */
    mask = kb_bin(k, IR_OR, mask, pos);
    kb_store(k, kb_ptr2d(k, H, rows, c32, cols), yh, mask);
    kb_store(k, kb_ptr2d(k, B8, rows, c32, cols), yi, mask);
    IrValue *l8 = kb_load(k, kb_ptr2d(k, B8, rows, c32, cols), mask, yi);
    IrValue *lh = kb_load(k, kb_ptr2d(k, H, rows, c32, cols), mask, yh);
    IrValue *mix = kb_bin(k, IR_ADD, irb_op1(&k->b, IR_CAST, sh, lh), irb_op1(&k->b, IR_CAST, sh, l8));
    mix = kb_bin(k, IR_MUL, mix, sel);
    /* reductions */
    IrValue *am = kb_reduce(k, mix, 1, IR_RED_ARGMAX);   /* [16] i32 */
    IrValue *an = kb_reduce(k, mix, 0, IR_RED_ARGMIN);   /* [32] i32 */
    IrValue *mn = kb_reduce(k, mix, 0, IR_RED_MIN);      /* [32] f32 */
    IrValue *tot = kb_reduce(k, mn, 0, IR_RED_SUM);      /* scalar f32 */
    IrValue *cnt = kb_reduce(k, an, 0, IR_RED_MAX);      /* scalar i32 */
    /* trans + reshape */
    IrValue *tr = irb_op1(&k->b, IR_TRANS, t2(IR_F32, 32, 16), mix);
    tr->def->attr[0] = 1;
    tr->def->attr[1] = 0;
    IrValue *rs = irb_op1(&k->b, IR_RESHAPE, t1(IR_F32, 512), tr);
    IrValue *flat = kb_arange(k, 512);
    kb_store(k, kb_addptr(k, kb_splat(k, X, t1(IR_I32, 512)), flat), rs, NULL);
    /* atomics: tile with result used, tile without, scalar */
    IrValue *pi = kb_addptr(k, kb_splat(k, I, t1(IR_I32, 16)), rows);
    IrValue *old = irb_op(&k->b, IR_ATOMIC_ADD, t1(IR_I32, 16), 2, (IrValue *[]){pi, am});
    IrValue *pi2 = kb_addptr(k, kb_splat(k, I, t1(IR_I32, 32)), cols);
    irb_op(&k->b, IR_ATOMIC_ADD, t1(IR_I32, 32), 2, (IrValue *[]){pi2, an});
    IrValue *sold = irb_op(&k->b, IR_ATOMIC_ADD, ir_type_scalar(IR_F32), 2, (IrValue *[]){X, tot});
    /* if with a tile and a scalar result */
    IrValue *cond = kb_cmp(k, IR_CMP_LT, cnt, n);
    IrType rts[2] = {t1(IR_I32, 16), ir_type_scalar(IR_F32)};
    IrOp *iff = ir_op_new(k->f, IR_IF, k->b.loc, 1, &cond, 2, rts);
    irb_insert(&k->b, iff);
    IrBuilder save = k->b;
    IrBlock *th = ir_op_add_region(k->f, iff), *el = ir_op_add_region(k->f, iff);
    k->b.block = th;
    k->b.before = NULL;
    IrValue *t_v = kb_bin(k, IR_ADD, old, am);
    irb_insert(&k->b, ir_op_new(k->f, IR_YIELD, k->b.loc, 2, (IrValue *[]){t_v, sold}, 0, NULL));
    k->b.block = el;
    IrValue *e_v = kb_bin(k, IR_SHL, am, kb_splat(k, irb_const_int(&k->b, i32, 1), t1(IR_I32, 16)));
    irb_insert(&k->b, ir_op_new(k->f, IR_YIELD, k->b.loc, 2, (IrValue *[]){e_v, tot}, 0, NULL));
    k->b = save;
    kb_store(k, pi, iff->res[0], NULL);
    kb_store(k, X, iff->res[1], NULL);
    kb_return(k);
}

START_TEST(misc_ops_through_ptxas)
{
    int warps[] = {1, 4, 8};
    const char *archs[] = {"sm_80", "sm_90a"};
    for (int w = 0; w < 3; w++)
        for (int a = 0; a < 2; a++) {
            Kb k;
            build_misc(&k, warps[w]);
            StrBuf err;
            sb_init(&err);
            ck_assert_msg(ir_verify(k.f, &err), "test kernel does not verify: %s", err.data);
            sb_free(&err);
            ptxas_accepts(k.f, archs[a]);
            check_all_values(k.f->body);
            arena_free(&k.a);
        }
    Kb k;
    build_misc(&k, 4);
    CgResult r;
    char *ptx = compile(k.f, "sm_80", CG_STAGE_PTX, &r);
    ck_assert_ptr_nonnull(strstr(ptx, "tanh.approx.f32"));
    ck_assert_ptr_nonnull(strstr(ptx, "atom.global.gpu.add.u32"));
    ck_assert_ptr_nonnull(strstr(ptx, "red.global.gpu.add.u32"));
    ck_assert_ptr_nonnull(strstr(ptx, "atom.global.gpu.add.f32"));
    ck_assert_ptr_nonnull(strstr(ptx, "bar.sync"));
    ck_assert_ptr_nonnull(strstr(r.stats.data, "  reduce "));
    free_res(&r);
    arena_free(&k.a);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("codegen_basic");
    TCase *tc = tcase_create("all");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, layout_sweep);
    tcase_add_test(tc, layout_reference_mapping);
    tcase_add_test(tc, assigned_layouts_cover_tiles);
    tcase_add_test(tc, vec_add_vectorised_when_aligned);
    tcase_add_test(tc, vec_add_scalar_when_mask_unaligned);
    tcase_add_test(tc, matmul_unmasked_loads_vectorised);
    tcase_add_test(tc, softmax_reduction_lowering);
    tcase_add_test(tc, llvm_stage_marks_kernel);
    tcase_add_test(tc, no_target_is_an_internal_error);
    suite_add_tcase(s, tc);
    TCase *pt = pu_ptxas_tcase(s, 600);
    tcase_add_test(pt, ptxas_accepts_kernels);
    tcase_add_test(pt, misc_ops_through_ptxas);
    return s;
}

PU_MAIN(suite)
