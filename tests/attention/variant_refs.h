/* variant_refs.h — what the tests of the shipped variants (lang/lib/variants/) share:
 * the float64 reference's hooks for each variant (tools/attn_ref.c callbacks: natural
 * units, raw indices, reading the same runtime arguments the kernels get) and the
 * runtime arguments of a case (host tensors with their sizes; the GPU test uploads
 * them). Header-only; include after tools/attn_ref.c (or a harness that includes it).
 */
#ifndef KILN_VARIANT_REFS_H
#define KILN_VARIANT_REFS_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln.h"

/* ---- what the references read (one case at a time) ---- */
typedef struct Ref {
    int left, right;          /* sliding window, < 0 unlimited */
    double softcap;
    const float *slopes;      /* ALiBi, [heads] */
    const int32_t *doc;       /* document ids [batch, doc_stride] */
    int doc_stride, doc_len;
    int prefix;
    const float *table;       /* relative bias [heads, 32] */
} Ref;
static Ref g;

static inline int m_causal(int b, int h, int i, int j, const void *c) { return j <= i; }
static inline int m_window(int b, int h, int i, int j, const void *c)
{
    return (g.left < 0 || j >= i - g.left) && (g.right < 0 || j <= i + g.right);
}
static inline double s_softcap(double s, int b, int h, int i, int j, const void *c) { return g.softcap * tanh(s / g.softcap); }
static inline double s_alibi(double s, int b, int h, int i, int j, const void *c)
{
    return s - (double)g.slopes[h] * fabs((double)(i - j));
}
static inline int doc_of(int b, int t) { return t < g.doc_len ? g.doc[b * g.doc_stride + t] : -2; }
static inline int m_document(int b, int h, int i, int j, const void *c) { return doc_of(b, i) == doc_of(b, j); }
static inline int m_prefix(int b, int h, int i, int j, const void *c) { return j <= i || j < g.prefix; }
static inline int t5_bucket(int i, int j)
{
    int half = 16, exact = 8, rel = j - i, n = rel < 0 ? -rel : rel;
    int big = exact + (int)(log2((n > 1 ? n : 1) / (double)exact) * (8.0 / log2(128.0 / exact)));
    return (rel > 0 ? half : 0) + (n < exact ? n : big < half - 1 ? big : half - 1);
}
static inline double s_relbias(double s, int b, int h, int i, int j, const void *c)
{
    return s + (double)g.table[h * 32 + t5_bucket(i, j)];
}

/* A variant's reference hooks and the values of its arguments. */
typedef struct VarSpec {
    const char *variant;      /* lang/lib/variants/NAME.tile */
    double (*score)(double, int, int, int, int, const void *);
    int (*mask)(int, int, int, int, const void *);
    Ref ref;
} VarSpec;

static inline double g_softcap_grad(double s, int b, int h, int i, int j, const void *c)
{
    double t = tanh(s / g.softcap);
    return 1 - t * t;
}

/* Composed variants (tests/attention/variants/compose_*.tile): scores applied in order,
 * masks combined with or / and, and each score's derivative with respect to s. */
static inline double s_cap_alibi(double s, int b, int h, int i, int j, const void *c)
{
    return s_alibi(s_softcap(s, b, h, i, j, c), b, h, i, j, c);
}
static inline double s_alibi_cap(double s, int b, int h, int i, int j, const void *c)
{
    return s_softcap(s_alibi(s, b, h, i, j, c), b, h, i, j, c);
}
static inline double g_alibi_cap(double s, int b, int h, int i, int j, const void *c)
{
    double t = tanh(s_alibi(s, b, h, i, j, c) / g.softcap);
    return 1 - t * t;
}
static inline int m_window_or_prefix(int b, int h, int i, int j, const void *c)
{
    return m_window(b, h, i, j, c) || m_prefix(b, h, i, j, c);
}
static inline int m_window_and_document(int b, int h, int i, int j, const void *c)
{
    return m_window(b, h, i, j, c) && m_document(b, h, i, j, c);
}

/* The score's derivative with respect to s for the backward's reference (NULL: 1). */
static inline double (*var_ref_grad(const VarSpec *v))(double, int, int, int, int, const void *)
{
    return v->score == s_softcap || v->score == s_cap_alibi ? g_softcap_grad : v->score == s_alibi_cap ? g_alibi_cap : NULL;
}

/* The path a call passes for a variant: the library's by name (embedded), a test's
 * (tests/...) under the source tree ($KILN_SOURCE_DIR, else the build's). */
static inline const char *var_path(const char *variant)
{
    static char buf[4][1024];
    static int k;
    if (strncmp(variant, "tests/", 6)) return variant;
    const char *root = getenv("KILN_SOURCE_DIR");
    char *b = buf[k++ & 3];
    snprintf(b, sizeof buf[0], "%s/%s", root ? root : KILN_SOURCE_DIR, variant);
    return b;
}

/* softcap and window together: gemma2's reference */
static inline double gemma_score(double s, int b, int h, int i, int j, const void *c) { return s_softcap(s, b, h, i, j, c); }

#define VAR_MAX_TOKENS 2048   /* per sequence, for document ids */
#define VAR_MAX_HEADS 64

typedef struct Inputs {
    float slopes[VAR_MAX_HEADS];
    int32_t doc[2 * VAR_MAX_TOKENS];
    float table[VAR_MAX_HEADS * 32];
    KilnVariantArg args[8];
    int nargs;
} Inputs;

/* The runtime arguments of case v (and the reference's view of them). */
static inline void make_inputs_for(const VarSpec *v, int batch, int heads, int seqlen, Inputs *in)
{
    memset(in, 0, sizeof *in);
    g = v->ref;
    const char *name = strrchr(v->variant, '/') + 1;
    KilnVariantArg *a = in->args;
    /* a composed variant (tests/attention/variants/compose_A_B_....tile) takes each part's arguments */
    if (strstr(name, "sliding_window") || !strncmp(name, "gemma2", 6)) {
        a[in->nargs++] = (KilnVariantArg){"window_left", kiln_arg_i32(g.left), 0};
        a[in->nargs++] = (KilnVariantArg){"window_right", kiln_arg_i64(g.right), 0};   /* widened: any int kind */
    }
    if (strstr(name, "softcap") || !strncmp(name, "gemma2", 6))
        a[in->nargs++] = (KilnVariantArg){"softcap", kiln_arg_f64(g.softcap), 0};      /* f64 for an f32 param */
    if (strstr(name, "alibi")) {
        for (int h = 0; h < heads; h++) in->slopes[h] = exp2f(-8.0f * (float)(h + 1) / (float)heads);
        g.slopes = in->slopes;
        a[in->nargs++] = (KilnVariantArg){"alibi_slopes", kiln_arg_ptr((uintptr_t)in->slopes), sizeof(float) * heads};
    }
    if (strstr(name, "document")) {
        /* documents of ragged lengths 1..17 per sequence; ids beyond doc_len stay unset */
        g.doc_stride = VAR_MAX_TOKENS;
        g.doc_len = seqlen - 3;
        int span = seqlen > 200 ? seqlen / 8 : 17;   /* about 8 documents on long sequences */
        for (int b = 0; b < batch; b++)
            for (int t = 0, id = 7 * b, left = 0; t < VAR_MAX_TOKENS; t++, left--) {
                if (left <= 0) id++, left = 1 + (t * 5 + b * 3) % span;
                in->doc[b * VAR_MAX_TOKENS + t] = id;
            }
        g.doc = in->doc;
        a[in->nargs++] = (KilnVariantArg){"doc_ids", kiln_arg_ptr((uintptr_t)in->doc), sizeof in->doc};
        a[in->nargs++] = (KilnVariantArg){"doc_stride", kiln_arg_i32(VAR_MAX_TOKENS), 0};
        a[in->nargs++] = (KilnVariantArg){"doc_len", kiln_arg_i32(g.doc_len), 0};
    }
    if (strstr(name, "prefix_lm")) a[in->nargs++] = (KilnVariantArg){"prefix_len", kiln_arg_i32(g.prefix), 0};
    if (!strncmp(name, "relative_bias", 13)) {
        attn_fill_random(ATTN_F32, in->table, VAR_MAX_HEADS * 32, 99, -1.0, 1.0);
        g.table = in->table;
        a[in->nargs++] = (KilnVariantArg){"rel_bias", kiln_arg_ptr((uintptr_t)in->table), sizeof(float) * 32 * heads};
    }
}


/* The reference's score hook of a spec (gemma2: soft-capping inside its window). */
static inline double (*var_ref_score(const VarSpec *v))(double, int, int, int, int, const void *)
{
    return v->score == s_softcap && v->mask ? gemma_score : v->score;
}

#endif
