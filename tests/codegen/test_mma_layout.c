/* test_mma_layout.c — the tensor-core arithmetic on the CPU:
 *   - the PTX ISA fragment table for mma.m16n8k16 (layout_mma.c) covers each
 *     element of A, B and C exactly once per warp;
 *   - ldmatrix, simulated on a swizzled SRAM tile with the lane addresses of
 *     gp_ldmatrix_lane_row, delivers exactly the mma fragments (A and B, K
 *     contiguous or not, several tile widths and fragment corners);
 *   - bank-conflict freedom: the 8 row addresses of every ldmatrix matrix and
 *     every phase of 8 threads storing 16 bytes fall in 8 distinct 16-byte
 *     bank groups;
 *   - stmatrix, simulated the same way, stores an accumulator's registers
 *     where its layout says they belong.
 * The MMA layouts in the generalised geometry (layout.c) are checked against
 * the same table in the "geometry" case: every (warp, lane, register) of C,
 * A and B for several warp grids maps to the ISA's element, C is owned
 * exactly once, A/B are held by exactly the warps that need them, and the
 * accumulator of one dot is register-for-register the A operand of the next
 * when wn = 1; with warpgroups along N (rn) the accumulator is wgmma's D
 * fragment per column block; gp_geom_first_copy finds the registers of one thread that repeat
 * an element (slices of the accumulator, wrapped tiles). */
#include "tests/testutil.h"
#include "compiler/gpuir/gpuir.h"

#include <string.h>

/* ck_assert marks a checkpoint through a pipe on every call: too slow for
 * the inner loops, which check with this instead. */
#define CHECK(cond, ...) do { if (!(cond)) ck_abort_msg(__VA_ARGS__); } while (0)

START_TEST(isa_table_covers_each_element_once)
{
    struct { GpMmaFrag f; int rows, cols, n; } fr[3] = {
        {GP_MMA_A, 16, 16, 8}, {GP_MMA_B, 16, 8, 4}, {GP_MMA_C, 16, 8, 4}};
    for (int k = 0; k < 3; k++) {
        int seen[16][16];
        memset(seen, 0, sizeof seen);
        for (int lane = 0; lane < 32; lane++)
            for (int i = 0; i < fr[k].n; i++) {
                int r, c;
                gp_mma_isa_coord(fr[k].f, lane, i, &r, &c);
                CHECK(r >= 0 && r < fr[k].rows && c >= 0 && c < fr[k].cols, "out of the tile");
                seen[r][c]++;
            }
        for (int r = 0; r < fr[k].rows; r++)
            for (int c = 0; c < fr[k].cols; c++) ck_assert_int_eq(seen[r][c], 1);
    }
    /* Spot values straight from the ISA text. */
    int r, c;
    gp_mma_isa_coord(GP_MMA_A, 5, 6, &r, &c); /* g=1, t=1: a6 -> (g+8, 2t+8) */
    ck_assert_int_eq(r, 9);
    ck_assert_int_eq(c, 10);
    gp_mma_isa_coord(GP_MMA_B, 30, 3, &r, &c); /* g=7, t=2: b3 -> (2t+9, g) */
    ck_assert_int_eq(r, 13);
    ck_assert_int_eq(c, 7);
    gp_mma_isa_coord(GP_MMA_C, 31, 2, &r, &c); /* g=7, t=3: c2 -> (g+8, 2t) */
    ck_assert_int_eq(r, 15);
    ck_assert_int_eq(c, 6);
}
END_TEST

/* The logical operand value at (row, col): distinct for every element. */
static int val(int row, int col) { return row * 1000 + col; }

/* Simulate ldmatrix.x4 on a swizzled tile and compare with the ISA fragments.
 * Logical operand: A[M][K] or B[K][N]; stored with memrow/memcol as in
 * gp_ldmatrix_lane_row (k_contig: K is memcol). */
static void check_ldmatrix(GpMmaFrag frag, bool kc, int mrows, int mcols, int r0, int c0)
{
    GpSwizzle sw = gp_swizzle_for(mrows, mcols, 2);
    int n = mrows * mcols;
    int *mem = malloc(sizeof(int) * (size_t)n);
    for (int i = 0; i < n; i++) mem[i] = -1;
    /* Store the operand: memrow/memcol -> logical (row, col). */
    for (int mr = 0; mr < mrows; mr++)
        for (int mc = 0; mc < mcols; mc++) {
            int row, col; /* logical A[m][k] / B[k][n] */
            if (frag == GP_MMA_A) { row = kc ? mr : mc; col = kc ? mc : mr; }
            else { row = kc ? mc : mr; col = kc ? mr : mc; }
            int off = gp_swizzle_offset(&sw, mr, mc);
            CHECK(mem[off] == -1, "the swizzle is not a permutation");
            mem[off] = val(row, col);
        }
    /* Lane addresses: the fragment's corner in stored coordinates. */
    int addr[32];
    for (int lane = 0; lane < 32; lane++) {
        int dr, dc;
        gp_ldmatrix_lane_row(frag, kc, lane, &dr, &dc);
        CHECK((c0 + dc) % 8 == 0, "unaligned column");
        addr[lane] = gp_swizzle_offset(&sw, r0 + dr, c0 + dc);
        CHECK(addr[lane] % 8 == 0, "row start not 16-byte aligned");
    }
    /* Bank groups of each matrix's 8 rows: all different. */
    for (int m = 0; m < 4; m++) {
        int used = 0;
        for (int r = 0; r < 8; r++) {
            int grp = (addr[8 * m + r] * 2 / 16) % 8;
            CHECK(!(used & (1 << grp)), "ldmatrix bank conflict: frag %d kc %d cols %d at (%d,%d)",
                          frag, kc, mcols, r0, c0);
            used |= 1 << grp;
        }
    }
    bool trans = gp_ldmatrix_trans(kc);
    /* Corner of the fragment in logical coordinates. */
    int lr0, lc0;
    if (frag == GP_MMA_A) { lr0 = kc ? r0 : c0; lc0 = kc ? c0 : r0; }
    else { lr0 = kc ? c0 : r0; lc0 = kc ? r0 : c0; }
    for (int T = 0; T < 32; T++)
        for (int j = 0; j < 4; j++)
            for (int h = 0; h < 2; h++) {
                int mr = trans ? 2 * (T % 4) + h : T / 4, mc = trans ? T / 4 : 2 * (T % 4) + h;
                int got = mem[addr[8 * j + mr] + mc];
                int row, col;
                if (frag == GP_MMA_A) {
                    gp_mma_isa_coord(GP_MMA_A, T, 2 * j + h, &row, &col);
                } else {
                    gp_mma_isa_coord(GP_MMA_B, T, (j & 1) * 2 + h, &row, &col);
                    row += 16 * (j >> 1);
                }
                CHECK(got == val(lr0 + row, lc0 + col),
                              "frag %d kc %d: thread %d reg %d.%d got (%d,%d) want (%d,%d)", frag, kc, T, j, h,
                              got / 1000, got % 1000, lr0 + row, lc0 + col);
            }
    free(mem);
}

START_TEST(ldmatrix_gives_mma_fragments)
{
    int widths[] = {16, 32, 64, 128, 256};
    for (int w = 0; w < 5; w++) {
        int cols = widths[w];
        /* A, K contiguous: tile [64 m][cols k]; fragment corners (m, k). */
        for (int m0 = 0; m0 < 64; m0 += 16)
            for (int k0 = 0; k0 + 16 <= cols; k0 += 16) check_ldmatrix(GP_MMA_A, true, 64, cols, m0, k0);
        /* A, M contiguous: tile [64 k][cols m]. */
        for (int k0 = 0; k0 < 64; k0 += 16)
            for (int m0 = 0; m0 + 16 <= cols; m0 += 16) check_ldmatrix(GP_MMA_A, false, 64, cols, k0, m0);
        /* B, N contiguous: tile [64 k][cols n], fragments k32 x n8. */
        for (int k0 = 0; k0 < 64; k0 += 32)
            for (int n0 = 0; n0 + 8 <= cols; n0 += 8) check_ldmatrix(GP_MMA_B, false, 64, cols, k0, n0);
        /* B, K contiguous: tile [64 n][cols k]. */
        if (cols >= 32)
            for (int n0 = 0; n0 < 64; n0 += 8)
                for (int k0 = 0; k0 + 32 <= cols; k0 += 32) check_ldmatrix(GP_MMA_B, true, 64, cols, n0, k0);
    }
}
END_TEST

/* A coalesced blocked layout stores 16 bytes per thread, threads along the
 * row first: 8 consecutive threads (one shared-memory wavefront) must hit 8
 * distinct bank groups after the swizzle. */
START_TEST(swizzled_stores_conflict_free)
{
    for (int cols = 8; cols <= 256; cols *= 2) {
        GpSwizzle sw = gp_swizzle_for(32, cols, 2);
        int chunks = cols / 8;
        for (int first = 0; first < 256; first += 8) {
            int used = 0;
            for (int t = first; t < first + 8; t++) {
                int r = t / chunks, c = (t % chunks) * 8;
                int grp = (gp_swizzle_offset(&sw, r, c) * 2 / 16) % 8;
                CHECK(!(used & (1 << grp)), "store conflict cols %d threads %d..", cols, first);
                used |= 1 << grp;
            }
        }
    }
}
END_TEST

START_TEST(swizzle_parameters)
{
    GpSwizzle s = gp_swizzle_for(16, 64, 2); /* 128-byte rows */
    ck_assert_int_eq(s.vec, 8);
    ck_assert_int_eq(s.per_phase, 1);
    ck_assert_int_eq(s.max_phase, 8);
    s = gp_swizzle_for(16, 32, 2);
    ck_assert_int_eq(s.per_phase, 2);
    ck_assert_int_eq(s.max_phase, 4);
    s = gp_swizzle_for(16, 16, 2);
    ck_assert_int_eq(s.per_phase, 4);
    ck_assert_int_eq(s.max_phase, 2);
    /* row 3 of a 128-byte-row tile: chunk c goes to c ^ 3 */
    s = gp_swizzle_for(16, 64, 2);
    ck_assert_int_eq(gp_swizzle_offset(&s, 3, 0), 3 * 64 + 3 * 8);
    ck_assert_int_eq(gp_swizzle_offset(&s, 3, 17), 3 * 64 + (2 ^ 3) * 8 + 1);
    /* 256-byte rows: two 128-byte column blocks of 64 rows each */
    s = gp_swizzle_for(64, 128, 2);
    ck_assert_int_eq(s.blk, 64);
    ck_assert_int_eq(gp_swizzle_offset(&s, 3, 17), 3 * 64 + (2 ^ 3) * 8 + 1);
    ck_assert_int_eq(gp_swizzle_offset(&s, 3, 70), 64 * 64 + 3 * 64 + (0 ^ 3) * 8 + 6);
    int e;
    ck_assert(gp_swizzle_shift(&s, 8, 64, &e));
    ck_assert_int_eq(e, gp_swizzle_offset(&s, 11, 64 + 17) - gp_swizzle_offset(&s, 3, 17));
    ck_assert(!gp_swizzle_shift(&s, 4, 0, &e));
    ck_assert(!gp_swizzle_shift(&s, 0, 32, &e));
    /* 192-byte rows are not blocked (not a multiple of 128 bytes) */
    ck_assert_int_eq(gp_swizzle_for(16, 96, 2).blk, 96);
}
END_TEST

/* wgmma reads a tile through a descriptor as the PTX ISA's canonical layouts
 * with the 128-byte swizzle: K-major ((8,m),(T,2k)):((8T,SBO),(1,T)),
 * MN-major ((T,8,m),(8,k)):((1,T,LBO),(8T,SBO)) (T = 8 16-bit elements), then
 * byte address bits [4:6] ^= bits [7:9]. Every element an instruction reads
 * must be where gp_swizzle_offset stored it. */
static int hw_addr(int start, int lin)
{
    int a = start + lin;
    return a ^ (((a >> 7) & 7) << 4);
}

/* eb: bytes per element (2: f16/bf16, k16 steps; 1: e4m3, K-major only, k32
 * steps: the same 32 bytes of K per instruction, T = 16 elements). */
static void check_wgmma_view_eb(int rows, int cols, bool k_major, int n_inst, int eb)
{
    GpSwizzle sw = gp_swizzle_for(rows, cols, eb);
    ck_assert(gp_wgmma_tile_ok(&sw));
    int lbo, sbo, ks = 32 / eb;
    gp_wgmma_strides(&sw, k_major, &lbo, &sbo);
    int kdim = k_major ? cols : rows, mndim = k_major ? rows : cols;
    for (int mn0 = 0; mn0 < mndim; mn0 += n_inst)
        for (int kk = 0; kk < kdim / ks; kk++) {
            int start = gp_wgmma_offset(&sw, k_major, mn0, kk);
            for (int mn = 0; mn < n_inst; mn++)
                for (int k = 0; k < ks; k++) {
                    int lin = k_major ? (mn % 8) * 128 + (mn / 8) * sbo + k * eb
                                      : (mn % 64) * 2 + (mn / 64) * lbo + (k % 8) * 128 + (k / 8) * sbo;
                    int want = k_major ? gp_swizzle_offset(&sw, mn0 + mn, ks * kk + k)
                                       : gp_swizzle_offset(&sw, ks * kk + k, mn0 + mn);
                    CHECK(hw_addr(start, lin) == want * eb, "%dx%d %s eb %d mn %d k %d: wgmma reads byte %d, stored at %d",
                          rows, cols, k_major ? "K-major" : "MN-major", eb, mn0 + mn, ks * kk + k, hw_addr(start, lin),
                          want * eb);
                }
        }
}

static void check_wgmma_view(int rows, int cols, bool k_major, int n_inst)
{
    check_wgmma_view_eb(rows, cols, k_major, n_inst, 2);
}

START_TEST(wgmma_descriptors_match_the_tiles)
{
    /* Q / K tiles (K-major, rows = M or N): d 64, 128, 256; 64-row instructions of A, all rows of B */
    check_wgmma_view(128, 64, true, 64);
    check_wgmma_view(128, 128, true, 64);
    check_wgmma_view(64, 256, true, 64);
    check_wgmma_view(64, 128, true, 64);
    /* V tiles (MN-major: rows = K keys, columns = N = d): one instruction over all of N */
    check_wgmma_view(64, 64, false, 64);
    check_wgmma_view(64, 128, false, 128);
    check_wgmma_view(32, 256, false, 256);
    /* matmul on wgmma (BLOCK_K 64): A K-major 256 x 64 per m64 block; B MN-major
     * 64 x 256 in one m64n256 instruction; transposed operands: A M-major
     * (64 x 128, m64 blocks at column 0 and 64), B K-major (N = 128 rows) */
    check_wgmma_view(256, 64, true, 64);
    check_wgmma_view(64, 256, false, 256);
    check_wgmma_view(64, 128, false, 64);
    check_wgmma_view(128, 64, true, 128);
    /* cg_dot_wgmma.c offsets A by warpgroup at run time as linear in the
     * first row (64 per warpgroup): the offset of m64 block g is g times
     * that of block 1, plus the k step's */
    static const int tiles[][3] = {{256, 64, 1}, {128, 128, 1}, {64, 256, 0}, {64, 128, 0}};
    for (int t = 0; t < 4; t++) {
        bool km = tiles[t][2];
        GpSwizzle w = gp_swizzle_for(tiles[t][0], tiles[t][1], 2);
        int mndim = km ? w.rows : w.cols, per = gp_wgmma_offset(&w, km, 64, 0);
        for (int g = 0; g * 64 < mndim; g++)
            for (int kk = 0; kk < (km ? w.cols : w.rows) / 16; kk++)
                ck_assert_int_eq(gp_wgmma_offset(&w, km, 64 * g, kk), g * per + gp_wgmma_offset(&w, km, 0, kk));
    }
    /* rows of 64 bytes are not 128-byte swizzle atoms */
    GpSwizzle s = gp_swizzle_for(64, 32, 2);
    ck_assert(!gp_wgmma_tile_ok(&s));
    /* e4m3 (FP8 wgmma, K-major only): Q / K at d 128 and 256, V^T (d rows x
     * 128 keys); 64 keys are 64-byte rows, which accelerate-dot widens */
    check_wgmma_view_eb(128, 128, true, 64, 1);
    check_wgmma_view_eb(64, 256, true, 64, 1);
    check_wgmma_view_eb(128, 128, true, 128, 1);
    check_wgmma_view_eb(256, 128, true, 256, 1);
    s = gp_swizzle_for(128, 64, 1);
    ck_assert(!gp_wgmma_tile_ok(&s));
}
END_TEST


/* ---- the MMA layouts in the generalised geometry (layout.c) ---- */

typedef struct Fn {
    Arena a;
    IrFunc *f;
} Fn;

static void fn_init(Fn *k, int warps)
{
    arena_init(&k->a);
    k->f = ir_func_new(&k->a, "k", (SrcLoc){"t.tile", 1, 1});
    k->f->sched.num_warps = warps;
}

static IrType tile2(IrElem e, int m, int n)
{
    int32_t s[2] = {m, n};
    return ir_type_tile(ir_type_scalar(e), 2, s);
}

/* Expected element of register (rd0, rd1) of `lane` in warp (wmi, wni). */
static void expect(GpMmaFrag frag, int wm, int wn, int wmi, int wni, int lane, const int *rd, int *e)
{
    int r, c;
    if (frag == GP_MMA_C) {
        gp_mma_isa_coord(GP_MMA_C, lane, (rd[0] % 2) * 2 + rd[1] % 2, &r, &c);
        e[0] = ((rd[0] / 2) * wm + wmi) * 16 + r;
        e[1] = ((rd[1] / 2) * wn + wni) * 8 + c;
    } else if (frag == GP_MMA_A) {
        int kk = rd[1] / 4, i = (rd[1] / 2 % 2) * 4 + (rd[0] % 2) * 2 + rd[1] % 2;
        gp_mma_isa_coord(GP_MMA_A, lane, i, &r, &c);
        e[0] = ((rd[0] / 2) * wm + wmi) * 16 + r;
        e[1] = kk * 16 + c;
    } else {
        int kk = rd[0] / 4, i = (rd[0] / 2 % 2) * 2 + rd[0] % 2;
        gp_mma_isa_coord(GP_MMA_B, lane, i, &r, &c);
        e[0] = kk * 16 + r;
        e[1] = (rd[1] * wn + wni) * 8 + c;
    }
}

static void check_mma_layout(GpMmaFrag frag, int W, int wm, int wn, int R, int C)
{
    Fn k;
    fn_init(&k, W);
    int l = gp_layout_mma(k.f, frag, wm, wn);
    IrType t = tile2(frag == GP_MMA_C ? IR_F32 : IR_F16, R, C);
    GpGeom g;
    ck_assert(gp_geom(k.f, l, t, &g));
    int *owners = calloc((size_t)R * C, sizeof(int)), *holders = calloc((size_t)R * C, sizeof(int));
    for (int tid = 0; tid < 32 * W; tid++) {
        int w = tid / 32, lane = tid % 32;
        for (int reg = 0; reg < g.nregs; reg++) {
            int idx[2], rd[2], e[2];
            gp_geom_index(&g, tid, reg, idx);
            gp_geom_reg_dims(&g, reg, rd);
            expect(frag, wm, wn, w % wm, (w / wm) % wn, lane, rd, e);
            CHECK(idx[0] == e[0] && idx[1] == e[1], "frag %d W%d %dx%d: tid %d reg %d at (%d,%d), ISA says (%d,%d)",
                  frag, W, wm, wn, tid, reg, idx[0], idx[1], e[0], e[1]);
            holders[idx[0] * C + idx[1]]++;
            if (gp_geom_owner(&g, tid, reg)) owners[idx[0] * C + idx[1]]++;
        }
    }
    /* C: every element once; A: held by the wn warps of its row block, B: by the wm warps. */
    int copies = frag == GP_MMA_C ? W / (wm * wn) : frag == GP_MMA_A ? W / wm : W / wn;
    for (int i = 0; i < R * C; i++) {
        CHECK(owners[i] == 1, "frag %d: element %d has %d owners", frag, i, owners[i]);
        CHECK(holders[i] == copies, "frag %d: element %d held %d times, want %d", frag, i, holders[i], copies);
    }
    free(owners), free(holders);
    arena_free(&k.a);
}

START_TEST(mma_layouts_match_isa)
{
    int cfg[][3] = {{4, 4, 1}, {4, 2, 2}, {4, 1, 4}, {8, 4, 2}, {8, 8, 1}, {1, 1, 1}, {2, 1, 2}, {4, 1, 1}};
    for (int i = 0; i < 8; i++) {
        int W = cfg[i][0], wm = cfg[i][1], wn = cfg[i][2];
        for (int M = 16 * wm; M <= 128 && M >= 16 * wm; M *= 2)
            for (int N = 8 * wn; N <= 128; N *= 4) {
                check_mma_layout(GP_MMA_C, W, wm, wn, M, N);
                for (int K = 16; K <= 64; K *= 2) {
                    check_mma_layout(GP_MMA_A, W, wm, wn, M, K);
                    check_mma_layout(GP_MMA_B, W, wm, wn, K, N);
                }
            }
    }
}
END_TEST

/* Warpgroups along N (#mma<C, wm, wn=2, rn>, pass_accelerate_dot.c): the
 * registers cg_dot_wgmma.c hands to warpgroup column j's m64n(N/2)k16 wgmma of
 * m64 block r — accumulator d[4 on + i], i < 4 — hold the elements the PTX ISA
 * gives that instruction's D fragment ("Matrix fragment for accumulator D",
 * wgmma .m64nNk16: warp w % 4 of the warpgroup owns rows 16 (w % 4) + lane / 4
 * + 8 (i / 2), columns 8 on + 2 (lane % 4) + i % 2), shifted to the warpgroup's
 * rows (m64 block (w % wm) / 4 + r wm / 4) and to the column block j N / 2,
 * j = w / wm. C is owned once; B (mma.sync's fallback, rpw[1] = rn: n8 tile on
 * of warp_n at 8 (rn warp_n + on)) is held by the wm warps of its column. */
START_TEST(wgmma_nsplit_layout_matches_isa)
{
    for (int wm = 4; wm <= 8; wm *= 2)
        for (int M = 16 * wm; M <= 32 * wm; M *= 2)
            for (int N = 16; N <= 512; N *= 2) {
                int W = 2 * wm, rn = N / 16;
                Fn k;
                fn_init(&k, W);
                GpGeom g, gb;
                ck_assert(gp_geom(k.f, gp_layout_mma_rn(k.f, GP_MMA_C, wm, 2, rn), tile2(IR_F32, M, N), &g));
                ck_assert(gp_geom(k.f, gp_layout_mma_rn(k.f, GP_MMA_B, wm, 2, rn), tile2(IR_F16, 32, N), &gb));
                ck_assert_int_eq(g.nregs, M / (16 * wm) * N / 2 / 2);  /* reps x the instruction's N / 2 */
                int *owners = calloc((size_t)M * N, sizeof(int)), *held = calloc((size_t)32 * N, sizeof(int));
                for (int tid = 0; tid < 32 * W; tid++) {
                    int w = tid / 32, lane = tid % 32, col = w / wm;
                    for (int r = 0; r < M / (16 * wm); r++)
                        for (int on = 0; on < N / 2 / 8; on++)
                            for (int i = 0; i < 4; i++) {
                                int rd[2] = {r * 2 + (i >> 1), on * 2 + (i & 1)}, idx[2];
                                int reg = gp_geom_reg_of(&g, rd);
                                gp_geom_index(&g, tid, reg, idx);
                                int row = 16 * r * wm + 64 * ((w % wm) / 4) + 16 * (w % 4) + lane / 4 + 8 * (i >> 1);
                                int cl = col * N / 2 + 8 * on + 2 * (lane % 4) + (i & 1);
                                CHECK(idx[0] == row && idx[1] == cl, "wm %d %dx%d: tid %d d[%d] of block %d at (%d,%d), "
                                      "ISA says (%d,%d)", wm, M, N, tid, on * 4 + i, r, idx[0], idx[1], row, cl);
                                CHECK(gp_geom_owner(&g, tid, reg), "tid %d reg %d not the owner", tid, reg);
                                owners[row * N + cl]++;
                            }
                    for (int reg = 0; reg < gb.nregs; reg++) {
                        int idx[2], rd[2], r, c;
                        gp_geom_index(&gb, tid, reg, idx);
                        gp_geom_reg_dims(&gb, reg, rd);
                        gp_mma_isa_coord(GP_MMA_B, lane, (rd[0] / 2 % 2) * 2 + rd[0] % 2, &r, &c);
                        CHECK(idx[0] == rd[0] / 4 * 16 + r && idx[1] == 8 * (rn * col + rd[1]) + c,
                              "B wm %d N %d: tid %d reg %d at (%d,%d)", wm, N, tid, reg, idx[0], idx[1]);
                        held[idx[0] * N + idx[1]]++;
                    }
                }
                for (int e = 0; e < M * N; e++) CHECK(owners[e] == 1, "element %d has %d owners", e, owners[e]);
                for (int e = 0; e < 32 * N; e++) CHECK(held[e] == wm, "B element %d held %d times", e, held[e]);
                free(owners), free(held);
                arena_free(&k.a);
            }
}
END_TEST

/* With wn = 1 the accumulator of one dot is the A operand of the next (P @ V):
 * the same thread -> element map, register for register. */
START_TEST(accumulator_is_next_a_operand)
{
    Fn k;
    fn_init(&k, 4);
    IrType t = tile2(IR_F16, 128, 64);
    ck_assert(gp_layouts_equivalent(k.f, gp_layout_mma(k.f, GP_MMA_C, 4, 1), gp_layout_mma(k.f, GP_MMA_A, 4, 1), t));
    ck_assert(!gp_layouts_equivalent(k.f, gp_layout_mma(k.f, GP_MMA_C, 2, 2), gp_layout_mma(k.f, GP_MMA_A, 2, 2), t));
    /* Row reductions of the accumulator: N within one warp, lanes 1 and 2 only. */
    GpGeom g;
    ck_assert(gp_geom(k.f, gp_layout_mma(k.f, GP_MMA_C, 4, 1), t, &g));
    ck_assert_int_eq(g.lane_stride[1], 1);
    ck_assert_int_eq(g.tpw[1], 4);
    ck_assert_int_eq(g.wpc[1], 1);
    /* The slice along N keeps every row's copy in the 4 lanes of its group. */
    int sl = gp_layout_slice(k.f, gp_layout_mma(k.f, GP_MMA_C, 4, 1), 1);
    int32_t s1[1] = {128};
    ck_assert(gp_geom(k.f, sl, ir_type_tile(ir_type_scalar(IR_F32), 1, s1), &g));
    ck_assert_int_eq(g.nregs, 128 / (16 * 4) * 2);
    arena_free(&k.a);
}
END_TEST

/* FP8 wgmma's register A (PTX ISA, wgmma .m64nNk32 A fragment for .e4m3: per
 * warp, register j of lane (g = lane / 4, t = lane % 4) holds bytes
 * b = 0..3 of row g + 8 (j & 1), k = 16 (j >> 1) + 4t + b) from an e4m3 value
 * in the MMA A layout (the accumulator's map, P of attention): gp_f8_afrag_reg
 * names the register of each byte, and the element it holds must be the one
 * whose K index gp_f8_kpos sends to that k position; gp_f8_kpos is a
 * permutation of each 16. */
START_TEST(f8_a_fragment_is_the_permuted_accumulator)
{
    for (int j = 0; j < 16; j++) {
        int seen = 0;
        for (int k = 0; k < 16; k++) {
            seen |= 1 << gp_f8_kpos(16 * j + k) % 16;
            ck_assert_int_eq(gp_f8_kpos(16 * j + k) / 16, j);
        }
        ck_assert_int_eq(seen, 0xFFFF);
    }
    int cfg[][3] = {{4, 64, 128}, {8, 128, 128}, {8, 256, 64}, {4, 128, 256}};
    for (int c = 0; c < 4; c++) {
        int W = cfg[c][0], M = cfg[c][1], K = cfg[c][2];
        Fn k;
        fn_init(&k, W);
        GpGeom g;
        ck_assert(gp_geom(k.f, gp_layout_mma(k.f, GP_MMA_A, W, 1), tile2(IR_F8E4M3, M, K), &g));
        for (int tid = 0; tid < 32 * W; tid++) {
            int w = tid / 32, lane = tid % 32;
            for (int om = 0; om < M / (16 * W); om++)
                for (int kk = 0; kk < K / 32; kk++)
                    for (int j = 0; j < 4; j++)
                        for (int b = 0; b < 4; b++) {
                            int rd[2], idx[2];
                            gp_f8_afrag_reg(om, kk, j, b, rd);
                            gp_geom_index(&g, tid, gp_geom_reg_of(&g, rd), idx);
                            int row = (om * W + w) * 16 + lane / 4 + 8 * (j & 1);
                            int kpos = 32 * kk + 16 * (j >> 1) + 4 * (lane % 4) + b;
                            CHECK(idx[0] == row && gp_f8_kpos(idx[1]) == kpos,
                                  "W%d %dx%d tid %d om %d kk %d reg %d byte %d: holds (%d, %d), wgmma reads row %d "
                                  "k position %d (logical k at that position: kpos(%d) = %d)",
                                  W, M, K, tid, om, kk, j, b, idx[0], idx[1], row, kpos, idx[1], gp_f8_kpos(idx[1]));
                        }
        }
        arena_free(&k.a);
    }
}
END_TEST

/* gp_geom_first_copy on `layout` applied to `t`: the register it names holds the same
 * element in every thread, no lower register does, and its result is the lowest for
 * itself. Returns the number of registers that are their own first copy. */
static int check_first_copy(const IrFunc *f, int layout, IrType t)
{
    GpGeom g;
    ck_assert(gp_geom(f, layout, t, &g));
    int distinct = 0;
    for (int reg = 0; reg < g.nregs; reg++) {
        int first = gp_geom_first_copy(&g, reg);
        CHECK(first <= reg && gp_geom_first_copy(&g, first) == first, "reg %d: first copy %d", reg, first);
        distinct += first == reg;
        for (int r = 0; r <= first; r++) {
            bool same = true;
            for (int tid = 0; tid < 32 * f->sched.num_warps && same; tid++) {
                int a[GP_MAX_RANK], b[GP_MAX_RANK];
                gp_geom_index(&g, tid, r, a);
                gp_geom_index(&g, tid, reg, b);
                for (int d = 0; d < g.rank; d++) same &= a[d] == b[d];
            }
            CHECK(same == (r == first), "reg %d: reg %d %s its element in every thread (first copy %d)", reg, r,
                  same ? "holds" : "does not hold", first);
        }
    }
    return distinct;
}

/* A slice of the accumulator (the per-column LSE of the attention backward against
 * S^T, [None, :]) holds each of its columns once per row repeat: the memory lowering
 * loads the first copy only (cg_memory.c). Blocked layouts without replication have
 * no copies; a tile smaller than its blocked layout wraps into copies in one thread. */
START_TEST(slice_copies_found)
{
    Fn k;
    fn_init(&k, 4);
    int c = gp_layout_mma(k.f, GP_MMA_C, 4, 1);
    int32_t n64[1] = {64}, n16[1] = {16};
    IrType v64 = ir_type_tile(ir_type_scalar(IR_F32), 1, n64), v16 = ir_type_tile(ir_type_scalar(IR_F32), 1, n16);
    /* columns: 2 row repeats x (64 / 8 column blocks x 2) registers, 16 distinct */
    ck_assert_int_eq(check_first_copy(k.f, gp_layout_slice(k.f, c, 0), v64), 16);
    /* rows: the 64 rows over 4 warps x 8 lane groups x 2 repeats, 2 distinct per thread */
    ck_assert_int_eq(check_first_copy(k.f, gp_layout_slice(k.f, c, 1), v64), 2);
    ck_assert_int_eq(check_first_copy(k.f, c, tile2(IR_F32, 64, 64)), 32);
    int32_t sh[2] = {64, 64};
    int spt[2] = {1, 4}, order[2] = {1, 0};
    int b = gp_layout_blocked(k.f, 2, sh, spt, order, 4);
    ck_assert_int_eq(check_first_copy(k.f, b, tile2(IR_F32, 64, 64)), 32);
    /* [8, 16] in #blocked<spt=[1,4], tpw=[2,16], wpc=[4,1]> (made for 64 x 64): wraps */
    check_first_copy(k.f, b, tile2(IR_F32, 8, 16));
    check_first_copy(k.f, gp_layout_slice(k.f, c, 0), v16);
    arena_free(&k.a);
}
END_TEST

/* Simulate stmatrix.x4 of a 16-bit accumulator [M, N] in the C layout of
 * warp grid wm x wn on W warps into cg_convert.c's padded row-major tile
 * (row stride 2N + pad bytes): every lane's address is the element the
 * layout puts in the first register of its matrix row, each thread's
 * registers land at the elements gp_geom_index gives them, every element is
 * written (by each warp holding it, copies included) and each matrix's 8
 * rows fall in 8 bank groups when the rows are padded. */
static void check_stmatrix(int W, int wm, int wn, int M, int N)
{
    Fn k;
    fn_init(&k, W);
    GpGeom g;
    ck_assert(gp_geom(k.f, gp_layout_mma(k.f, GP_MMA_C, wm, wn), tile2(IR_F16, M, N), &g));
    GpStmatrix p;
    ck_assert_msg(gp_stmatrix_plan(&g, &p), "no stmatrix plan for %dx%d on %dx%d", M, N, wm, wn);
    ck_assert_int_eq(p.nm * p.nn * 8, g.nregs); /* 4 registers of 2 elements per instruction */
    int pad = N * 2 >= 64 ? 16 : 0, stride = N + pad / 2; /* elements */
    int *mem = calloc((size_t)(M * stride), sizeof(int));
    for (int warp = 0; warp < W; warp++) {
        int base[2];
        gp_geom_thread_base(&g, warp * 32, base); /* lane 0: the warp's corner */
        for (int q = 0; q < p.nm * p.nn; q++) {
            int row0, col0, regs[4], addr[32];
            gp_stmatrix_instr(&g, &p, q, &row0, &col0, regs);
            for (int lane = 0; lane < 32; lane++) {
                int r, c, e[2];
                gp_stmatrix_lane_row(&p, lane, &r, &c);
                r += base[0] + row0, c += base[1] + col0;
                gp_geom_index(&g, warp * 32 + 4 * (lane & 7), regs[lane >> 3], e);
                CHECK(e[0] == r && e[1] == c, "lane %d of warp %d: address (%d,%d), its row starts at (%d,%d)", lane,
                      warp, r, c, e[0], e[1]);
                addr[lane] = r * stride + c;
                CHECK(addr[lane] % 8 == 0, "row start not 16-byte aligned");
            }
            for (int m = 0; m < 4 && pad; m++) {
                int used = 0;
                for (int r = 0; r < 8; r++) {
                    int grp = (addr[8 * m + r] * 2 / 16) % 8;
                    CHECK(!(used & (1 << grp)), "stmatrix bank conflict %dx%d on %dx%d", M, N, wm, wn);
                    used |= 1 << grp;
                }
            }
            /* stmatrix: thread T's register j -> matrix j, row T / 4, columns 2 (T % 4) + h */
            for (int T = 0; T < 32; T++)
                for (int j = 0; j < 4; j++)
                    for (int h = 0; h < 2; h++) {
                        int e[2], at = addr[8 * j + T / 4] + 2 * (T % 4) + h;
                        gp_geom_index(&g, warp * 32 + T, regs[j] + h * g.reg_stride[1], e);
                        CHECK(at == e[0] * stride + e[1], "thread %d reg %d.%d of warp %d stored at %d, is (%d,%d)", T,
                              j, h, warp, at, e[0], e[1]);
                        mem[at]++;
                    }
        }
    }
    int copies = W / (wm * wn);
    for (int r = 0; r < M; r++)
        for (int c = 0; c < N; c++) CHECK(mem[r * stride + c] == copies, "(%d,%d) written %d times", r, c, mem[r * stride + c]);
    free(mem);
    arena_free(&k.a);
}

START_TEST(stmatrix_stores_the_accumulator)
{
    int cfg[][3] = {{4, 4, 1}, {4, 2, 2}, {4, 1, 4}, {8, 4, 2}, {8, 8, 1}, {1, 1, 1}, {2, 1, 2}, {8, 4, 1}};
    for (int i = 0; i < 8; i++) {
        int W = cfg[i][0], wm = cfg[i][1], wn = cfg[i][2];
        for (int M = 16 * wm; M <= 256; M *= 2)
            for (int N = 16 * wn; N <= 256; N *= 2) check_stmatrix(W, wm, wn, M, N);
    }
    /* An odd number of n8 tiles per warp, or a tile the layout wraps: no plan. */
    Fn k;
    fn_init(&k, 4);
    GpGeom g;
    GpStmatrix p;
    ck_assert(gp_geom(k.f, gp_layout_mma(k.f, GP_MMA_C, 4, 1), tile2(IR_F16, 64, 8), &g));
    ck_assert(!gp_stmatrix_plan(&g, &p));
    ck_assert(gp_geom(k.f, gp_layout_mma(k.f, GP_MMA_C, 4, 1), tile2(IR_F16, 32, 64), &g));
    ck_assert(!gp_stmatrix_plan(&g, &p));
    ck_assert(gp_geom(k.f, gp_layout_mma(k.f, GP_MMA_A, 4, 1), tile2(IR_F16, 64, 64), &g));
    ck_assert(!gp_stmatrix_plan(&g, &p));
    arena_free(&k.a);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("mma_layout");
    TCase *tc = tcase_create("math");
    tcase_add_test(tc, isa_table_covers_each_element_once);
    tcase_add_test(tc, ldmatrix_gives_mma_fragments);
    tcase_add_test(tc, swizzled_stores_conflict_free);
    tcase_add_test(tc, swizzle_parameters);
    tcase_add_test(tc, wgmma_descriptors_match_the_tiles);
    suite_add_tcase(s, tc);
    TCase *tg = tcase_create("geometry");
    tcase_add_test(tg, mma_layouts_match_isa);
    tcase_add_test(tg, wgmma_nsplit_layout_matches_isa);
    tcase_add_test(tg, accumulator_is_next_a_operand);
    tcase_add_test(tg, f8_a_fragment_is_the_permuted_accumulator);
    tcase_add_test(tg, slice_copies_found);
    tcase_add_test(tg, stmatrix_stores_the_accumulator);
    suite_add_tcase(s, tg);
    return s;
}

TU_MAIN(suite)
