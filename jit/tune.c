/* tune.c — kiln_tune: compile a declared tune space in parallel, prune, time, check.
 *
 * What: the space comes from the program (sema_tune_space, compiler/lang/tune_space.c):
 * each config is a set of -D values, num_warps/num_stages and schedule options.
 * Phase 1 compiles every config to a cubin (PTX without ptxas) on `jobs` threads: a
 * compile owns its arena, Diag and LLVM context (codegen.c), its ptxas runs in a
 * temporary directory of its own (ptxas.c), and the compiler's mutable state is
 * thread-local (support.c), so compiles are independent (tests/jit/test_tune.c checks
 * parallel output against serial output byte for byte). Phase 2 prunes: a compile error
 * (shared memory over the limit, a tile too large...), spills over max_spill_bytes,
 * occupancy 0 — the reason goes in the row. Phase 3 runs the kept configs: on the CPU
 * interpreter (cpu_check) and/or the device (poison outputs, one launch for the check,
 * warm-up, then `repeats` launches each after an L2 flush, timed between events; the
 * median). Every config's outputs are compared with config 0's (the first config that
 * ran): beyond rtol/atol is a failure. The fastest timed config wins; with `store` it goes
 * to the tune cache (tune_store.c).
 *
 * Invariants: rows are in space order and row i is config i; nothing prints; a failing
 * config never stops the others.
 *
 * Example: kiln_tune("k.tile", src, &(KilnTuneOptions){.kernel = "k", .args = (const
 * char *[]){"X=rand:1000", "Y=out:1000", "n=1000"}, .nargs = 3, .grid = {"1000/BLOCK"},
 * .cpu_check = 1}, &r) compiles each BLOCK of k's space and runs it on the interpreter.
 */
#include "jit_internal.h"

#include "compiler/driver/driver.h"
#include "compiler/lang/lang.h"
#include "compiler/support/ptxas.h"
#include "compiler/support/schedule.h"
#include "compiler/support/target.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TUNE_MAX_ARGS 64
#define L2_FLUSH_BYTES (256u << 20)

/* One argument of the launch, built from its spec. */
typedef struct TArg {
    const char *name;
    IrElem elem;               /* the pointee for buffers */
    bool is_buf, is_out;
    size_t count, bytes;
    void *host;                /* inputs: the data; outputs: config 0's result after the first run */
    double scalar;
    int64_t iscalar;
    KilnDevPtr dptr;
} TArg;

typedef struct Tuner {
    const char *path, *src;
    const KilnTuneOptions *o;
    Arena arena;
    TuneSpace *sp;
    KilnCompileOptions *copts; /* per config */
    KilnCompileResult *res;    /* per config */
    KilnStatus *st;
    KilnTuneReport *r;
    _Atomic int next;
    int *order;                /* the configs in the order the threads take them */
    TArg args[TUNE_MAX_ARGS];
    int nargs;
    int ref;                   /* the row whose outputs are the reference, -1 before one ran */
    double rtol, atol;
    bool disagree;
} Tuner;

/* ---------------- configs ---------------- */

static const char *dim_value(const Tuner *t, int cfg, int d)
{
    return t->sp->dims[d].vals[t->sp->configs[(int64_t)cfg * t->sp->ndims + d]].text;
}

/* Config c as compile options: the caller's defines, then the config's. */
static void config_options(Tuner *t, int c, KilnCompileOptions *co, const char *arch, KilnEmit emit)
{
    const KilnTuneOptions *o = t->o;
    memset(co, 0, sizeof *co);
    co->kernel = o->kernel;
    co->arch = arch;
    co->emit = emit;
    co->include_dirs = o->include_dirs;
    co->ninclude_dirs = o->ninclude_dirs;
    co->hints = o->hints;
    co->nhints = o->nhints;
    KilnDefine *defs = ARENA_ARRAY(&t->arena, KilnDefine, o->ndefines + t->sp->ndims + 1);
    int n = 0;
    for (int i = 0; i < o->ndefines; i++) defs[n++] = o->defines[i];
    for (int d = 0; d < t->sp->ndims; d++) {
        const TuneDim *dim = &t->sp->dims[d];
        int64_t v = dim->vals[t->sp->configs[(int64_t)c * t->sp->ndims + d]].num;
        if (dim->kind == TUNE_CONST) defs[n++] = (KilnDefine){dim->name, dim_value(t, c, d)};
        else if (dim->kind == TUNE_WARPS) co->num_warps = (int)v;
        else if (dim->kind == TUNE_STAGES) co->num_stages = (int)v;
        else sched_set(&co->schedule, dim->sched, v ? 1 : -1);
    }
    co->defines = defs;
    co->ndefines = n;
}

/* ---------------- phase 1: compile in parallel ---------------- */

static void *compile_worker(void *arg)
{
    Tuner *t = arg;
    for (;;) {
        int i = atomic_fetch_add(&t->next, 1);
        if (i >= t->r->nrows) break;
        int c = t->order[i];
        double t0 = sup_now_ms();
        t->st[c] = kiln_compile(t->path, t->src, &t->copts[c], &t->res[c]);
        t->r->rows[c].compile_ms = sup_now_ms() - t0;
    }
    return NULL;
}

/* A config's expected compile cost: the product of its numeric const values (tile sizes:
 * the IR, LLVM's and ptxas's work grow with them) times its warps. Only an order. */
static double config_weight(const Tuner *t, int c)
{
    double w = 1;
    for (int d = 0; d < t->sp->ndims; d++) {
        const TuneDim *dim = &t->sp->dims[d];
        int64_t v = dim->vals[t->sp->configs[(int64_t)c * t->sp->ndims + d]].num;
        if ((dim->kind == TUNE_CONST && !dim->is_dtype && v > 1) || (dim->kind == TUNE_WARPS && v > 1)) w *= (double)v;
    }
    return w;
}

typedef struct Weighted {
    double w;
    int c;
} Weighted;

static int by_weight(const void *a, const void *b)
{
    const Weighted *x = a, *y = b;
    return x->w > y->w ? -1 : x->w < y->w ? 1 : x->c - y->c;
}

/* Compile every config on `jobs` threads, the costliest first (largest tiles: the wall
 * time is not then set by one big config started last); rows stay in space order. */
static void compile_all(Tuner *t, int jobs)
{
    int n = t->r->nrows;
    Weighted *wc = ARENA_ARRAY(&t->arena, Weighted, n ? n : 1);
    for (int i = 0; i < n; i++) wc[i] = (Weighted){config_weight(t, i), i};
    qsort(wc, (size_t)n, sizeof *wc, by_weight);
    t->order = ARENA_ARRAY(&t->arena, int, n ? n : 1);
    for (int i = 0; i < n; i++) t->order[i] = wc[i].c;
    if (jobs > t->r->nrows) jobs = t->r->nrows;
    if (jobs < 1) jobs = 1;
    pthread_t th[256];
    if (jobs > 256) jobs = 256;
    atomic_store(&t->next, 0);
    int started = 0;
    for (int i = 1; i < jobs; i++)
        if (pthread_create(&th[started], NULL, compile_worker, t) == 0) started++;
    compile_worker(t);
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
    t->r->jobs = started + 1;
}

/* ---------------- phase 2: prune ---------------- */

static int stat_int(const char *stats, const char *tag)
{
    const char *s = stats ? strstr(stats, tag) : NULL;
    int v;
    return s && sscanf(s + strlen(tag), "%d", &v) == 1 ? v : -1;
}

/* Resident CTAs per SM from registers, shared memory and threads (the occupancy
 * calculator's rules, allocation granularity 8 registers per thread and 1 KB of SRAM
 * reserved per CTA); 0: the kernel cannot run. */
int rt_tune_occupancy(int regs, int smem, int warps, int sram_block, int sram_sm)
{
    int threads = 32 * warps;
    if (threads > 1024 || smem > sram_block) return 0;
    int by_thr = 2048 / threads;
    int r8 = regs > 0 ? (regs + 7) / 8 * 8 : 0;
    int by_reg = r8 ? 65536 / (r8 * threads) : 32;
    int by_smem = sram_sm / (smem + 1024);
    int n = by_thr < by_reg ? by_thr : by_reg;
    n = n < by_smem ? n : by_smem;
    return n < 32 ? n : 32;
}

static const char *first_error(Arena *a, const char *diag)
{
    if (!diag || !*diag) return "compile failed";
    const char *e = strstr(diag, "error: ");
    const char *s = e ? e + 7 : diag;
    const char *nl = strchr(s, '\n');
    return arena_strndup(a, s, nl ? (size_t)(nl - s) : strlen(s));
}

static void prune(Tuner *t, const Target *tg, int sram_sm)
{
    for (int c = 0; c < t->r->nrows; c++) {
        KilnTuneRow *row = &t->r->rows[c];
        KilnCompileResult *res = &t->res[c];
        row->registers = row->spill_bytes = -1;
        row->time_ms = row->max_err = -1;
        if (t->st[c] != KILN_OK || !res->nkernels) {
            row->pruned = arena_printf(&t->arena, "compile: %s", first_error(&t->arena, res->diagnostics));
            continue;
        }
        row->registers = stat_int(res->stats, "registers: ");
        const char *sp = res->stats ? strstr(res->stats, "spills: ") : NULL;
        int st, ld;
        if (sp && sscanf(sp, "spills: %d bytes stored, %d bytes loaded", &st, &ld) == 2) row->spill_bytes = st + ld;
        else if (row->registers >= 0) row->spill_bytes = 0;
        row->smem_bytes = res->kernels[0].smem_bytes;
        row->num_warps = res->kernels[0].num_warps;
        row->occupancy = rt_tune_occupancy(row->registers, row->smem_bytes, row->num_warps, tg->sram_limit, sram_sm);
        if (t->o->max_spill_bytes >= 0 && row->spill_bytes > t->o->max_spill_bytes)
            row->pruned = arena_printf(&t->arena, "spills %d bytes (more than %d)", row->spill_bytes,
                                       t->o->max_spill_bytes);
        else if (!row->occupancy)
            row->pruned = arena_printf(&t->arena, "occupancy 0 (%d threads, %d bytes of shared memory, %d registers)",
                                       32 * row->num_warps, row->smem_bytes, row->registers);
    }
}

/* ---------------- arguments ---------------- */

static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ULL;
}

static double elem_get(const void *p, IrElem e, size_t i)
{
    switch (e) {
    case IR_F16: return kiln_f16_to_f32(((const uint16_t *)p)[i]);
    case IR_BF16: return kiln_bf16_to_f32(((const uint16_t *)p)[i]);
    case IR_F32: return ((const float *)p)[i];
    case IR_F64: return ((const double *)p)[i];
    case IR_I8: return ((const int8_t *)p)[i];
    case IR_I1: case IR_U8: return ((const uint8_t *)p)[i];
    case IR_I16: return ((const int16_t *)p)[i];
    case IR_U16: return ((const uint16_t *)p)[i];
    case IR_I32: return ((const int32_t *)p)[i];
    case IR_U32: return ((const uint32_t *)p)[i];
    case IR_I64: return (double)((const int64_t *)p)[i];
    default: return (double)((const uint64_t *)p)[i];
    }
}

/* Random values in [-1, 1) for floats, [1, 64] for integers: never zeros. */
static void fill_random(void *p, IrElem e, size_t n, uint64_t *rng)
{
    for (size_t i = 0; i < n; i++) {
        double u = (double)(rng_next(rng) >> 11) * (1.0 / 9007199254740992.0);
        double f = 2 * u - 1;
        int64_t k = 1 + (int64_t)(u * 64);
        switch (e) {
        case IR_F16: ((uint16_t *)p)[i] = kiln_f32_to_f16((float)f); break;
        case IR_BF16: ((uint16_t *)p)[i] = kiln_f32_to_bf16((float)f); break;
        case IR_F32: ((float *)p)[i] = (float)f; break;
        case IR_F64: ((double *)p)[i] = f; break;
        case IR_I1: case IR_U8: case IR_I8: ((uint8_t *)p)[i] = (uint8_t)(e == IR_I1 ? k & 1 : k); break;
        case IR_I16: case IR_U16: ((uint16_t *)p)[i] = (uint16_t)k; break;
        case IR_I32: case IR_U32: ((uint32_t *)p)[i] = (uint32_t)k; break;
        default: ((uint64_t *)p)[i] = (uint64_t)k; break;
        }
    }
}

static const char *find_arg(const KilnTuneOptions *o, const char *name)
{
    size_t n = strlen(name);
    for (int i = 0; i < o->nargs; i++)
        if (o->args[i] && !strncmp(o->args[i], name, n) && o->args[i][n] == '=') return o->args[i] + n + 1;
    return NULL;
}

/* The kernel's runtime parameters (from config 0's IR) bound to the specs. */
static KilnStatus bind_args(Tuner *t)
{
    Arena a;
    arena_init(&a);
    Diag d;
    diag_init(&d, t->path, t->src);
    IrModule *m = NULL;
    KilnCompileOptions co = t->copts[0];
    co.emit = KILN_EMIT_IR;
    KilnStatus st = kiln_compile_ir(&a, &d, t->src, &co, &m, NULL, NULL);
    if (st != KILN_OK || !m || !m->nfuncs) {
        st = kiln_set_error(KILN_ERR_COMPILE, "%s", d.out.data ? d.out.data : "cannot compile config 0");
        goto done;
    }
    const IrFunc *f = m->funcs[0];
    uint64_t rng = 0x9E3779B97F4A7C15ull;
    for (int i = 0; i < f->nparams && st == KILN_OK; i++) {
        const IrValue *p = f->params[i];
        TArg *x = &t->args[t->nargs++];
        x->name = arena_strdup(&t->arena, p->name);
        const char *spec = find_arg(t->o, p->name);
        if (!spec) {
            st = kiln_set_error(KILN_ERR_USAGE, "no argument for parameter '%s' (give %s=SPEC)", p->name, p->name);
            break;
        }
        x->is_buf = p->type.elem == IR_PTR;
        x->elem = x->is_buf ? (IrElem)p->type.pointee : (IrElem)p->type.elem;
        if (x->is_buf) {
            x->is_out = !strncmp(spec, "out:", 4);
            if (strncmp(spec, "rand:", 5) && !x->is_out) {
                st = kiln_set_error(KILN_ERR_USAGE, "argument '%s': a buffer is rand:N or out:N, got '%s'", p->name, spec);
                break;
            }
            long long cnt = atoll(strchr(spec, ':') + 1);
            if (cnt < 1 || cnt > (1ll << 31)) {
                st = kiln_set_error(KILN_ERR_USAGE, "argument '%s': bad element count in '%s'", p->name, spec);
                break;
            }
            x->count = (size_t)cnt;
            x->bytes = x->count * (size_t)((ir_elem_bits(x->elem) + 7) / 8);
            x->host = calloc(1, x->bytes);
            if (!x->host) {
                st = kiln_set_error(KILN_ERR_IO, "out of host memory for argument '%s'", p->name);
                break;
            }
            if (!x->is_out) fill_random(x->host, x->elem, x->count, &rng);
        } else {
            char *end;
            x->scalar = strtod(spec, &end);
            x->iscalar = strtoll(spec, NULL, 0);
            if (end == spec) st = kiln_set_error(KILN_ERR_USAGE, "argument '%s': '%s' is not a number", p->name, spec);
        }
    }
done:
    diag_free(&d);
    arena_free(&a);
    return st;
}

static KilnArg scalar_arg(const TArg *x)
{
    switch (x->elem) {
    case IR_F32: return kiln_arg_f32((float)x->scalar);
    case IR_F64: return kiln_arg_f64(x->scalar);
    case IR_F16: return kiln_arg_f16_bits(kiln_f32_to_f16((float)x->scalar));
    case IR_BF16: return kiln_arg_bf16_bits(kiln_f32_to_bf16((float)x->scalar));
    case IR_I64: return kiln_arg_i64(x->iscalar);
    case IR_U64: return kiln_arg_u64((uint64_t)x->iscalar);
    case IR_U32: return kiln_arg_u32((uint32_t)x->iscalar);
    case IR_I1: return kiln_arg_bool((int)x->iscalar);
    case IR_I8: return kiln_arg_i8((int8_t)x->iscalar);
    case IR_I16: return kiln_arg_i16((int16_t)x->iscalar);
    case IR_U8: return kiln_arg_u8((uint8_t)x->iscalar);
    case IR_U16: return kiln_arg_u16((uint16_t)x->iscalar);
    default: return kiln_arg_i32((int32_t)x->iscalar);
    }
}

/* Grid axis spec "N" or "N/NAME" for config c. */
static bool grid_of(Tuner *t, int c, int grid[3])
{
    for (int i = 0; i < 3; i++) {
        const char *g = t->o->grid[i];
        grid[i] = 1;
        if (!g) continue;
        char *end;
        long long n = strtoll(g, &end, 0);
        if (*end == '/') {
            int d = 0;
            while (d < t->sp->ndims && strcmp(t->sp->dims[d].name, end + 1)) d++;
            long long by = d < t->sp->ndims ? t->sp->dims[d].vals[t->sp->configs[(int64_t)c * t->sp->ndims + d]].num : 0;
            if (by <= 0) return false;
            n = (n + by - 1) / by;
        } else if (*end) {
            return false;
        }
        if (n < 1 || n > 0x7fffffff) return false;
        grid[i] = (int)n;
    }
    return true;
}

/* Compare config c's outputs (in `outs`, one host copy per output argument) with the
 * reference's; the first config to run becomes the reference. */
static void agree(Tuner *t, int c, void **outs)
{
    KilnTuneRow *row = &t->r->rows[c];
    if (t->ref < 0) {
        t->ref = c;
        for (int i = 0; i < t->nargs; i++)
            if (t->args[i].is_out) memcpy(t->args[i].host, outs[i], t->args[i].bytes);
        row->max_err = 0;
        return;
    }
    double worst = 0;
    bool bad = false;
    for (int i = 0; i < t->nargs; i++) {
        const TArg *x = &t->args[i];
        if (!x->is_out) continue;
        for (size_t j = 0; j < x->count; j++) {
            double want = elem_get(x->host, x->elem, j), got = elem_get(outs[i], x->elem, j);
            double diff = fabs(got - want);
            if (isnan(want) != isnan(got) || (!isnan(diff) && diff > t->atol + t->rtol * fabs(want))) bad = true;
            if (diff > worst) worst = diff;
            if (isnan(want) != isnan(got)) worst = INFINITY;
        }
    }
    row->max_err = worst;
    if (bad) {
        row->pruned = arena_printf(&t->arena, "wrong result: differs from config %d by %g (beyond rtol %g, atol %g)",
                                   t->ref, worst, t->rtol, t->atol);
        t->disagree = true;
    }
}

/* ---------------- phase 3a: the CPU interpreter ---------------- */

static void run_cpu(Tuner *t, int c)
{
    int grid[3];
    if (!grid_of(t, c, grid)) {
        t->r->rows[c].pruned = "bad grid spec";
        return;
    }
    KilnHostArg ha[TUNE_MAX_ARGS];
    void *outs[TUNE_MAX_ARGS] = {0};
    for (int i = 0; i < t->nargs; i++) {
        TArg *x = &t->args[i];
        if (!x->is_buf) {
            ha[i] = kiln_host_scalar(scalar_arg(x));
            continue;
        }
        outs[i] = malloc(x->bytes);
        if (!x->is_out) memcpy(outs[i], x->host, x->bytes);
        ha[i] = kiln_host_buf(outs[i], x->bytes, x->is_out ? KILN_HOST_OUT : KILN_HOST_IN);
    }
    KilnCompileOptions co = t->copts[c];
    if (kiln_run_cpu(t->path, t->src, &co, grid, ha, t->nargs) == KILN_OK) agree(t, c, outs);
    else t->r->rows[c].pruned = arena_printf(&t->arena, "interpreter: %s", first_error(&t->arena, kiln_last_error()));
    for (int i = 0; i < t->nargs; i++) free(outs[i]);
}

/* ---------------- phase 3b: the device ---------------- */

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

static KilnStatus time_one(Tuner *t, int c, KilnKernel *k, KilnStream *s, KilnDevPtr flush, KilnEvent *e0,
                           KilnEvent *e1)
{
    KilnDevice *dev = t->o->device;
    KilnArg args[TUNE_MAX_ARGS];
    void *outs[TUNE_MAX_ARGS] = {0};
    int grid[3];
    if (!grid_of(t, c, grid)) return kiln_set_error(KILN_ERR_USAGE, "bad grid spec");
    KilnStatus st = KILN_OK;
    for (int i = 0; i < t->nargs && st == KILN_OK; i++) {
        TArg *x = &t->args[i];
        args[i] = x->is_buf ? kiln_arg_ptr(x->dptr) : scalar_arg(x);
        if (x->is_out) st = kiln_memset(dev, x->dptr, 0xFF, x->bytes); /* poisoned: NaN */
    }
    if (st == KILN_OK) st = kiln_launch(k, grid, s, args, t->nargs);
    if (st == KILN_OK) st = kiln_stream_synchronize(s);
    for (int i = 0; i < t->nargs && st == KILN_OK; i++)
        if (t->args[i].is_out) {
            outs[i] = malloc(t->args[i].bytes);
            st = outs[i] ? kiln_memcpy_dtoh(dev, outs[i], t->args[i].dptr, t->args[i].bytes) : KILN_ERR_IO;
        }
    if (st == KILN_OK) agree(t, c, outs);
    for (int i = 0; i < t->nargs; i++) free(outs[i]);
    int warm = t->o->warmup > 0 ? t->o->warmup : 5, reps = t->o->repeats > 0 ? t->o->repeats : 20;
    for (int i = 0; i < warm && st == KILN_OK; i++) st = kiln_launch(k, grid, s, args, t->nargs);
    float *ms = calloc((size_t)reps, sizeof *ms);
    for (int i = 0; i < reps && st == KILN_OK && ms; i++) {
        if (flush) st = kiln_memset(dev, flush, (uint8_t)i, L2_FLUSH_BYTES); /* evict the inputs from L2 */
        if (st == KILN_OK) st = kiln_stream_synchronize(s);
        if (st == KILN_OK) st = kiln_event_record(e0, s);
        if (st == KILN_OK) st = kiln_launch(k, grid, s, args, t->nargs);
        if (st == KILN_OK) st = kiln_event_record(e1, s);
        if (st == KILN_OK) st = kiln_event_synchronize(e1);
        if (st == KILN_OK) st = kiln_event_elapsed_ms(e0, e1, &ms[i]);
    }
    if (st == KILN_OK && ms) {
        qsort(ms, (size_t)reps, sizeof *ms, cmp_float);
        KilnTuneRow *row = &t->r->rows[c];
        row->time_ms = ms[reps / 2];
        if (t->o->flops > 0) row->tflops = t->o->flops / (row->time_ms * 1e-3) / 1e12;
        if (t->o->bytes > 0) row->gbps = t->o->bytes / (row->time_ms * 1e-3) / 1e9;
    }
    free(ms);
    return st;
}

static KilnStatus run_device(Tuner *t)
{
    KilnDevice *dev = t->o->device;
    KilnStatus st = KILN_OK;
    for (int i = 0; i < t->nargs && st == KILN_OK; i++) {
        TArg *x = &t->args[i];
        if (!x->is_buf) continue;
        st = kiln_malloc(dev, x->bytes, &x->dptr);
        if (st == KILN_OK && !x->is_out) st = kiln_memcpy_htod(dev, x->dptr, x->host, x->bytes);
    }
    KilnDevPtr flush = 0;
    KilnStream *s = NULL;
    KilnEvent *e0 = NULL, *e1 = NULL;
    if (st == KILN_OK && kiln_malloc(dev, L2_FLUSH_BYTES, &flush) != KILN_OK) flush = 0;
    if (st == KILN_OK) st = kiln_stream_create(dev, &s);
    if (st == KILN_OK) st = kiln_event_create(dev, &e0);
    if (st == KILN_OK) st = kiln_event_create(dev, &e1);
    for (int c = 0; c < t->r->nrows && st == KILN_OK; c++) {
        KilnTuneRow *row = &t->r->rows[c];
        if (row->pruned) continue;
        KilnCompileResult *res = &t->res[c];
        KilnModule *m = NULL;
        KilnKernel *k = NULL;
        KilnStatus ls = t->copts[c].emit == KILN_EMIT_CUBIN
                            ? kiln_module_load_cubin(dev, res->output, res->output_size, res->kernels, 1, &m)
                            : kiln_module_load_ptx(dev, res->output, res->kernels, 1, &m);
        if (ls == KILN_OK) ls = kiln_kernel_get(m, NULL, &k);
        if (ls == KILN_OK) ls = time_one(t, c, k, s, flush, e0, e1);
        if (ls != KILN_OK) row->pruned = arena_printf(&t->arena, "launch: %s", kiln_last_error());
        kiln_module_free(m);
        if (ls != KILN_OK && kiln_synchronize(dev) != KILN_OK) st = ls; /* a sticky device error ends the run */
    }
    kiln_event_destroy(e0);
    kiln_event_destroy(e1);
    kiln_stream_destroy(s);
    kiln_free(dev, flush);
    for (int i = 0; i < t->nargs; i++) kiln_free(dev, t->args[i].dptr);
    return st;
}

/* ---------------- the call ---------------- */

/* The key's values: const ones from the defines, runtime integers from the args,
 * bucketed to the next power of two. */
static const char *make_key(Tuner *t)
{
    if (t->o->key) return arena_strdup(&t->arena, t->o->key);
    StrBuf sb;
    sb_init(&sb);
    for (int i = 0; i < t->sp->nkey; i++) {
        const char *n = t->sp->key[i], *v = NULL;
        for (int j = 0; j < t->o->ndefines; j++)
            if (!strcmp(t->o->defines[j].name, n)) v = t->o->defines[j].value;
        if (t->sp->key_runtime[i] && (v = find_arg(t->o, n))) {
            sb_printf(&sb, "%s%s=%lld", i ? " " : "", n, rt_tune_bucket(atoll(v)));
            continue;
        }
        sb_printf(&sb, "%s%s=%s", i ? " " : "", n, v ? v : "default");
    }
    const char *k = arena_strdup(&t->arena, sb.data ? sb.data : "");
    sb_free(&sb);
    return k;
}

static KilnStatus load_space(Tuner *t)
{
    const KilnTuneOptions *o = t->o;
    Diag d;
    diag_init(&d, t->path, t->src);
    KilnCompileOptions co = {.kernel = o->kernel, .include_dirs = o->include_dirs, .ninclude_dirs = o->ninclude_dirs};
    AstFile *f = kiln_modules_load(&t->arena, &d, t->src, &co, NULL);
    LangDefine *defs = ARENA_ARRAY(&t->arena, LangDefine, o->ndefines + 1);
    for (int i = 0; i < o->ndefines; i++) defs[i] = (LangDefine){o->defines[i].name, o->defines[i].value};
    if (f && !d.nerrors) t->sp = sema_tune_space(&t->arena, &d, f, o->kernel, defs, o->ndefines);
    KilnStatus st = KILN_OK;
    if (!t->sp) st = kiln_set_error(KILN_ERR_COMPILE, "%s", d.out.data ? d.out.data : "bad tune space");
    else if (t->sp->ndims > KILN_TUNE_MAX_DIMS)
        st = kiln_set_error(KILN_ERR_COMPILE, "a tune space has at most %d dimensions", KILN_TUNE_MAX_DIMS);
    diag_free(&d);
    return st;
}

static KilnStatus check_options(const char *src, const KilnTuneOptions *o)
{
    if (!src || !o || !o->kernel) return kiln_set_error(KILN_ERR_USAGE, "kiln_tune needs a source and a kernel name");
    if (o->ndefines < 0 || (o->ndefines && !o->defines) || o->nargs < 0 || (o->nargs && !o->args) ||
        o->nargs > TUNE_MAX_ARGS || o->ninclude_dirs < 0 || (o->ninclude_dirs && !o->include_dirs) ||
        o->nhints < 0 || (o->nhints && !o->hints))
        return kiln_set_error(KILN_ERR_USAGE, "kiln_tune: a count without its array (defines, args, include_dirs, hints)");
    if ((o->device || o->cpu_check) && !o->nargs)
        return kiln_set_error(KILN_ERR_USAGE, "running configs needs the kernel's arguments (NAME=SPEC)");
    return KILN_OK;
}

static void make_report(Tuner *t, const char *arch, const char *device)
{
    KilnTuneReport *r = t->r;
    r->kernel = arena_strdup(&t->arena, t->o->kernel);
    r->ndims = t->sp->ndims;
    for (int d = 0; d < r->ndims; d++) r->dims[d] = t->sp->dims[d].name;
    r->nrows = t->sp->nconfigs;
    if (t->o->max_configs > 0 && r->nrows > t->o->max_configs) r->nrows = t->o->max_configs;
    r->nspace = t->sp->nconfigs;
    r->ntotal = t->sp->ntotal;
    r->rows = ARENA_ARRAY(&t->arena, KilnTuneRow, r->nrows + 1);
    for (int c = 0; c < r->nrows; c++)
        for (int d = 0; d < r->ndims; d++) r->rows[c].values[d] = dim_value(t, c, d);
    r->arch = arena_strdup(&t->arena, arch);
    r->device = arena_strdup(&t->arena, device);
    r->key = make_key(t);
    r->winner = -1;
}

static KilnStatus store_winner(Tuner *t)
{
    StrBuf sb;
    sb_init(&sb);
    for (int d = 0; d < t->r->ndims; d++)
        sb_printf(&sb, "%s%s=%s", d ? " " : "", t->r->dims[d], t->r->rows[t->r->winner].values[d]);
    char *path = NULL;
    KilnStatus st = rt_tune_store(sb.data ? sb.data : "", t->src, t->r, &path);
    t->r->cache_file = arena_strdup(&t->arena, path);
    free(path);
    sb_free(&sb);
    return st;
}

/* The report owns the tuner's arena: the report and its strings live in it. */
typedef struct ReportBox {
    KilnTuneReport r;
    Arena arena;
} ReportBox;

KilnStatus kiln_tune(const char *path, const char *src, const KilnTuneOptions *o, KilnTuneReport **out)
{
    if (!out) return kiln_set_error(KILN_ERR_USAGE, "kiln_tune: out is NULL");
    *out = NULL;
    KilnStatus st = check_options(src, o);
    if (st != KILN_OK) return st;
    ReportBox *box = calloc(1, sizeof *box);
    if (!box) return kiln_set_error(KILN_ERR_IO, "out of host memory");
    Tuner t = {.path = path ? path : "<input>", .src = src, .o = o, .r = &box->r, .ref = -1};
    t.rtol = o->rtol > 0 ? o->rtol : 2e-2;
    t.atol = o->atol > 0 ? o->atol : 2e-3;
    arena_init(&t.arena);
    KilnDeviceInfo info;
    memset(&info, 0, sizeof info);
    if (o->device && (st = kiln_device_info(o->device, &info)) != KILN_OK) goto fail;
    const char *arch = o->arch ? o->arch : o->device ? info.arch : "sm_90a";
    const Target *tg = tgt_parse(arch);
    if (!tg) {
        st = kiln_set_error(KILN_ERR_USAGE, "unknown architecture '%s'", arch);
        goto fail;
    }
    if ((st = load_space(&t)) != KILN_OK) goto fail;
    const char *device = o->device ? arena_printf(&t.arena, "%s %s", info.name, arch) : arch;
    make_report(&t, arch, device);
    char *ptxas = ptxas_find(NULL);
    KilnEmit emit = ptxas ? KILN_EMIT_CUBIN : KILN_EMIT_PTX;
    free(ptxas);
    int n = t.r->nrows;
    t.copts = ARENA_ARRAY(&t.arena, KilnCompileOptions, n + 1);
    t.res = calloc((size_t)n + 1, sizeof *t.res);
    t.st = calloc((size_t)n + 1, sizeof *t.st);
    for (int c = 0; c < n; c++) config_options(&t, c, &t.copts[c], arch, emit);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    double t0 = sup_now_ms();
    compile_all(&t, o->jobs > 0 ? o->jobs : cpus > 0 ? (int)cpus : 1);
    t.r->compile_wall_ms = sup_now_ms() - t0;
    prune(&t, tg, o->device ? info.max_smem_per_block_optin + 1024 : tg->sram_limit + 1024);
    if ((o->device || o->cpu_check) && n && (st = bind_args(&t)) == KILN_OK) {
        for (int c = 0; o->cpu_check && c < n; c++)
            if (!t.r->rows[c].pruned) run_cpu(&t, c);
        if (o->device) {
            t.ref = -1; /* the device's outputs are compared among themselves */
            st = run_device(&t);
        }
    }
    for (int c = 0; c < n; c++) {
        const KilnTuneRow *row = &t.r->rows[c];
        if (!row->pruned && row->time_ms >= 0 && (t.r->winner < 0 || row->time_ms < t.r->rows[t.r->winner].time_ms))
            t.r->winner = c;
    }
    if (st == KILN_OK && o->store && t.r->winner >= 0) st = store_winner(&t);
    if (st == KILN_OK && t.disagree) st = kiln_set_error(KILN_ERR_KERNEL, "a config's outputs differ from config %d's",
                                                         t.ref);
    for (int c = 0; c < n; c++) kiln_compile_result_free(&t.res[c]);
    for (int i = 0; i < t.nargs; i++) free(t.args[i].host);
    free(t.res);
    free(t.st);
    box->arena = t.arena;
    *out = &box->r;
    return st;
fail:
    arena_free(&t.arena);
    free(box);
    return st;
}

KilnStatus kiln_tune_key(const char *path, const char *src, const KilnTuneOptions *o, char **key)
{
    if (!key) return kiln_set_error(KILN_ERR_USAGE, "kiln_tune_key: key is NULL");
    *key = NULL;
    KilnStatus st = check_options(src, o);
    if (st != KILN_OK) return st;
    Tuner t = {.path = path ? path : "<input>", .src = src, .o = o, .ref = -1};
    arena_init(&t.arena);
    if ((st = load_space(&t)) == KILN_OK && !(*key = strdup(make_key(&t))))
        st = kiln_set_error(KILN_ERR_IO, "out of host memory");
    arena_free(&t.arena);
    return st;
}

void kiln_tune_report_free(KilnTuneReport *r)
{
    if (!r) return;
    ReportBox *box = (ReportBox *)r;
    arena_free(&box->arena);
    free(box);
}
