/* run.c — `kiln run`: run one kernel on generated inputs and print the buffers.
 *
 * Arguments are given as NAME=SPEC, one per runtime parameter. Scalars take a
 * number; pointers take a generated buffer (rand:N, randn:N, zeros:N, ones:N,
 * iota:N) of N elements of the pointee type. The kernel runs on the GPU when
 * one is present (unless --cpu), else on the CPU interpreter; afterwards every
 * buffer is summarised (first elements, sum, NaN count) so a person can see
 * what the kernel computed.
 */
#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "compiler/interp/interp.h"
#include "cli.h"
#include "run_args.h"

/* xorshift64*: deterministic across machines, good enough for test data. */
static double rng_uniform(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return (double)((*s * 2685821657736338717ULL) >> 11) * (1.0 / 9007199254740992.0);
}

double kiln_run_elem_get(const void *p, IrElem e, size_t i)
{
    switch (e) {
    case IR_F16: return interp_f16_to_f32(((const uint16_t *)p)[i]);
    case IR_BF16: return interp_bf16_to_f32(((const uint16_t *)p)[i]);
    case IR_F32: return ((const float *)p)[i];
    case IR_F64: return ((const double *)p)[i];
    case IR_I1: case IR_U8: return ((const uint8_t *)p)[i];
    case IR_I8: return ((const int8_t *)p)[i];
    case IR_I16: return ((const int16_t *)p)[i];
    case IR_U16: return ((const uint16_t *)p)[i];
    case IR_I32: return ((const int32_t *)p)[i];
    case IR_U32: return ((const uint32_t *)p)[i];
    case IR_I64: return (double)((const int64_t *)p)[i];
    case IR_U64: return (double)((const uint64_t *)p)[i];
    default: return 0;
    }
}

void kiln_run_elem_set(void *p, IrElem e, size_t i, double v)
{
    switch (e) {
    case IR_F16: ((uint16_t *)p)[i] = interp_f32_to_f16((float)v); break;
    case IR_BF16: ((uint16_t *)p)[i] = interp_f32_to_bf16((float)v); break;
    case IR_F32: ((float *)p)[i] = (float)v; break;
    case IR_F64: ((double *)p)[i] = v; break;
    case IR_I1: case IR_U8: ((uint8_t *)p)[i] = (uint8_t)v; break;
    case IR_I8: ((int8_t *)p)[i] = (int8_t)v; break;
    case IR_I16: ((int16_t *)p)[i] = (int16_t)v; break;
    case IR_U16: ((uint16_t *)p)[i] = (uint16_t)v; break;
    case IR_I32: ((int32_t *)p)[i] = (int32_t)v; break;
    case IR_U32: ((uint32_t *)p)[i] = (uint32_t)v; break;
    case IR_I64: ((int64_t *)p)[i] = (int64_t)v; break;
    case IR_U64: ((uint64_t *)p)[i] = (uint64_t)v; break;
    default: break;
    }
}

static const char *find_spec(const KilnCliArgs *a, const char *name)
{
    size_t n = strlen(name);
    for (int i = 0; i < a->nrunargs; i++)
        if (!strncmp(a->runargs[i], name, n) && a->runargs[i][n] == '=') return a->runargs[i] + n + 1;
    return NULL;
}

static void print_signature(const IrFunc *f)
{
    fprintf(stderr, "kernel %s takes:", f->name);
    for (int i = 0; i < f->nparams; i++) {
        char t[64];
        fprintf(stderr, " %s=%s", f->params[i]->name, f->params[i]->type.elem == IR_PTR ? "rand:N" : "NUMBER");
        fprintf(stderr, "(%s)", ir_type_str(f->params[i]->type, t, sizeof t));
    }
    fprintf(stderr, "\n");
}

/* Fill one buffer from a spec like rand:1024; NULL, or what is wrong. */
static const char *make_buffer(RunBuf *b, const char *spec, IrElem e, uint64_t *rng)
{
    static const char expected[] = "expected rand:N, randn:N, zeros:N, ones:N or iota:N with 1 <= N <= 2^31";
    const char *colon = strchr(spec, ':');
    if (!colon || !isdigit((unsigned char)colon[1])) return expected;
    char *end;
    errno = 0;
    long long n = strtoll(colon + 1, &end, 10);
    if (*end || errno || n < 1 || n > (1LL << 31)) return expected;
    size_t kind_len = (size_t)(colon - spec);
    static const char *const kinds[] = {"rand", "randn", "zeros", "ones", "iota"};
    int kind = -1;
    for (int k = 0; k < 5; k++)
        if (strlen(kinds[k]) == kind_len && !strncmp(spec, kinds[k], kind_len)) kind = k;
    if (kind < 0) return expected;
    int bits = ir_elem_bits(e);
    b->elem = e;
    b->count = (size_t)n;
    b->bytes = (size_t)n * (size_t)(bits < 8 ? 1 : bits / 8);
    b->data = calloc(1, b->bytes);
    if (!b->data) return "out of host memory for the buffer";
    for (size_t i = 0; i < b->count; i++) {
        double v = 0;
        if (kind == 0) v = ir_elem_is_float(e) ? rng_uniform(rng) * 2 - 1 : floor(rng_uniform(rng) * 100);
        else if (kind == 1) { /* Box-Muller */
            double u1 = rng_uniform(rng) + 1e-12, u2 = rng_uniform(rng);
            v = sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2);
        } else if (kind == 3) v = 1;
        else if (kind == 4) v = (double)i;
        kiln_run_elem_set(b->data, e, i, v);
    }
    return NULL;
}

static void print_buffer(const RunBuf *b, int show)
{
    double sum = 0;
    size_t nan = 0;
    for (size_t i = 0; i < b->count; i++) {
        double v = kiln_run_elem_get(b->data, b->elem, i);
        if (isnan(v)) nan++;
        else sum += v;
    }
    printf("  %s: %s[%zu] = [", b->name, ir_elem_name(b->elem), b->count);
    for (size_t i = 0; i < b->count && i < (size_t)show; i++)
        printf("%s%.6g", i ? ", " : "", kiln_run_elem_get(b->data, b->elem, i));
    printf("%s]  sum = %.9g", b->count > (size_t)show ? ", ..." : "", sum);
    if (nan) printf("  NaN: %zu", nan);
    printf("\n");
}

/* An integer argument: decimal or 0x hex, optionally signed, exactly in the
 * range of the parameter's type (no rounding of 3.7, no wrapping of 5000000000
 * into i32). bool takes 0 or 1. Returns NULL or what is wrong. */
static const char *parse_int(const char *spec, IrElem e, int64_t *out)
{
    const char *p = spec;
    bool neg = *p == '-';
    if (*p == '-' || *p == '+') p++;
    int base = p[0] == '0' && (p[1] == 'x' || p[1] == 'X') ? 16 : 10;
    if (base == 16) p += 2;
    if (!(base == 16 ? isxdigit((unsigned char)*p) : isdigit((unsigned char)*p)))
        return "an integer (decimal or 0x hex)";
    char *end;
    errno = 0;
    unsigned long long m = strtoull(p, &end, base);
    if (*end) return "an integer (decimal or 0x hex)";
    int bits = ir_elem_bits(e);
    bool is_signed = e != IR_I1 && ir_elem_is_signed(e);
    unsigned long long max = bits >= 64 ? ~0ULL : (1ULL << bits) - 1;
    if (is_signed) max >>= 1;
    unsigned long long neg_max = is_signed ? max + 1 : 0; /* magnitude of the minimum */
    if (errno == ERANGE || (neg ? m > neg_max : m > max)) {
        static char range[96]; /* the command is single-threaded */
        if (e == IR_I1) return "0 or 1";
        snprintf(range, sizeof range, "an integer from %s%llu to %llu", is_signed ? "-" : "", neg_max, max);
        return range;
    }
    *out = neg ? (int64_t)(0 - m) : (int64_t)m; /* u64 keeps its bit pattern */
    return NULL;
}

/* A float argument: what strtod reads, in the finite range of the parameter's
 * type; nan and inf only when written as such (x=nan, x=-inf), never as the
 * result of an overflow (1e30 for an f16, 1e400 for anything). */
static const char *parse_float(const char *spec, IrElem e, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(spec, &end);
    if (end == spec || *end) return "a number";
    if (!isfinite(v)) {
        bool written = false;
        for (const char *q = spec; *q && !written; q++)
            written = !strncasecmp(q, "nan", 3) || !strncasecmp(q, "inf", 3);
        if (!written) return "a finite number in the range of its type (or nan, inf, -inf written out)";
        *out = v;
        return NULL;
    }
    float as_f32 = fabs(v) <= FLT_MAX ? (float)v : INFINITY;
    bool inf = e == IR_F32 ? isinf(as_f32)
               : e == IR_F16 ? isinf(interp_f16_to_f32(interp_f32_to_f16(as_f32)))
               : e == IR_BF16 ? isinf(interp_bf16_to_f32(interp_f32_to_bf16(as_f32))) : false;
    if (inf) return "a finite number in the range of its type (or nan, inf, -inf written out)";
    *out = v;
    return NULL;
}

/* The scalar for parameter p from its spec; false after reporting. */
static bool bind_scalar(const IrValue *p, const char *spec, InterpArg *arg, RunBuf *b)
{
    IrElem e = (IrElem)p->type.elem;
    const char *want;
    if (ir_elem_is_float(e)) {
        want = parse_float(spec, e, &b->scalar);
        arg->f = b->scalar;
    } else {
        want = parse_int(spec, e, &b->iscalar);
        arg->i = b->iscalar;
        b->scalar = e == IR_U64 ? (double)(uint64_t)b->iscalar : (double)b->iscalar;
    }
    if (!want) return true;
    char t[64];
    fprintf(stderr, "kiln: argument '%s' (%s) needs %s, got '%s'\n", p->name, ir_type_str(p->type, t, sizeof t),
            want, spec);
    return false;
}

/* Every ARG=SPEC names a parameter of the kernel, once. */
static bool check_arg_names(const KilnCliArgs *a, const IrFunc *f)
{
    for (int i = 0; i < a->nrunargs; i++) {
        const char *arg = a->runargs[i];
        size_t len = (size_t)(strchr(arg, '=') - arg);
        for (int j = 0; j < i; j++)
            if (!strncmp(a->runargs[j], arg, len + 1)) {
                fprintf(stderr, "kiln: argument '%.*s' given twice ('%s' and '%s')\n", (int)len, arg,
                        a->runargs[j], arg);
                return false;
            }
        bool known = false;
        for (int k = 0; k < f->nparams; k++)
            if (strlen(f->params[k]->name) == len && !strncmp(arg, f->params[k]->name, len)) known = true;
        if (!known) {
            fprintf(stderr, "kiln: kernel %s has no parameter '%.*s'\n", f->name, (int)len, arg);
            print_signature(f);
            return false;
        }
    }
    return true;
}

/* Bind every runtime parameter to a value or a generated buffer. */
static int bind_args(const KilnCliArgs *a, const IrFunc *f, RunArgs *ra)
{
    uint64_t rng = 0x9E3779B97F4A7C15ULL ^ a->seed;
    ra->n = f->nparams;
    if (!check_arg_names(a, f)) return 2;
    for (int i = 0; i < f->nparams; i++) {
        const IrValue *p = f->params[i];
        const char *spec = find_spec(a, p->name);
        RunBuf *b = &ra->bufs[i];
        b->name = p->name;
        if (!spec) {
            fprintf(stderr, "kiln: missing argument '%s'\n", p->name);
            print_signature(f);
            return 2;
        }
        if (p->type.elem == IR_PTR) {
            const char *why = make_buffer(b, spec, (IrElem)p->type.pointee, &rng);
            if (why) {
                fprintf(stderr, "kiln: bad buffer spec '%s=%s': %s\n", p->name, spec, why);
                return 2;
            }
            ra->args[i].ptr = b->data;
            ra->ibufs[ra->nbufs++] = (InterpBuffer){b->data, b->bytes, b->name};
        } else if (!bind_scalar(p, spec, &ra->args[i], b)) {
            return 2;
        }
    }
    return 0;
}

static int run_module(KilnCliArgs *a, IrFunc *f, const char *src)
{
    RunArgs ra;
    memset(&ra, 0, sizeof ra);
    if (f->nparams > RUN_MAX_PARAMS) {
        fprintf(stderr, "kiln: kernel %s has too many parameters to run from the command line\n", f->name);
        return 1;
    }
    int rc = bind_args(a, f, &ra);
    if (rc == 0) {
        const char *where = NULL;
        rc = a->cpu ? -1 : kiln_cli_run_gpu(a, f, src, &ra, &where);
        if (rc < 0) { /* no GPU (or --cpu): the interpreter */
            StrBuf err;
            sb_init(&err);
            InterpOptions io = {.grid = {a->grid[0], a->grid[1], a->grid[2]}, .buffers = ra.ibufs,
                                .nbuffers = ra.nbufs};
            rc = interp_run(f, ra.args, f->nparams, &io, &err) ? 1 : 0;
            if (rc) fprintf(stderr, "%s: error: %s\n", a->file, err.data ? err.data : "interpreter failed");
            sb_free(&err);
            if (!rc) printf("ran %s on the CPU interpreter%s%s%s, grid %d x %d x %d\n", f->name,
                            where ? " (" : "", where ? where : "", where ? ")" : "", a->grid[0], a->grid[1],
                            a->grid[2]);
        } else if (rc == 0) {
            printf("ran %s on %s, grid %d x %d x %d\n", f->name, where, a->grid[0], a->grid[1], a->grid[2]);
        }
        if (rc == 0)
            for (int i = 0; i < ra.n; i++)
                if (ra.bufs[i].data) print_buffer(&ra.bufs[i], a->show);
    }
    for (int i = 0; i < ra.n; i++) free(ra.bufs[i].data);
    return rc;
}

int kiln_cli_run(KilnCliArgs *a)
{
    char *src = kiln_cli_read_source(a->file);
    if (!src) return 1;
    Arena arena;
    arena_init(&arena);
    Diag d;
    diag_init(&d, a->file, src);
    StrBuf out, dumps;
    sb_init(&out);
    sb_init(&dumps);
    IrModule *m = NULL;
    a->opts.emit = KILN_EMIT_IR;
    KilnStatus st = kiln_compile_ir(&arena, &d, src, &a->opts, &m, &out, &dumps);
    diag_flush_ice(&d);
    if (d.out.data) fputs(d.out.data, stderr);
    if (dumps.data) fputs(dumps.data, stderr);
    int rc = 1;
    if (st == KILN_OK && m && !d.nerrors) {
        if (m->nfuncs != 1) {
            fprintf(stderr, "kiln: %s has %d kernels; choose one with -k NAME\n", a->file, m->nfuncs);
            rc = 2;
        } else {
            rc = run_module(a, m->funcs[0], src);
        }
    } else if (st == KILN_ERR_USAGE) {
        rc = 2;
    }
    sb_free(&out);
    sb_free(&dumps);
    diag_free(&d);
    arena_free(&arena);
    free(src);
    return rc;
}
