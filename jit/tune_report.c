/* tune_report.c — a tuning run's report as CSV, a terminal table and an SVG plot.
 *
 * What: every row of a KilnTuneReport (kept, pruned or failed) in three forms:
 *   CSV    one header line (the dimensions, then time_ms, tflops, gbps, registers,
 *          spill_bytes, smem_bytes, warps, occupancy, compile_ms, max_err, status),
 *          one line per config; status is "ok", "winner" or the prune reason (quoted);
 *   table  the same columns aligned for a terminal, the winner marked '*', a summary;
 *   SVG    plain SVG text written here: one panel per dimension (time against the
 *          dimension's values, each timed config a dot) and two Pareto panels (time
 *          against registers and against shared memory; the configs no other beats on
 *          both axes joined by a line). Without timings the panels plot compile time,
 *          which is what a compile-only run measured.
 *
 * Invariants: pure functions of the report; unknown numbers print empty in the CSV and
 * '-' in the table; the SVG is well-formed XML (text is escaped).
 *
 * Example: kiln_tune_report_csv(r, &csv) → "BLOCK_M,BLOCK_N,time_ms,...\n64,32,0.412,...".
 */
#include "jit_internal.h"

#include "compiler/support/support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *status_of(const KilnTuneReport *r, int i)
{
    return r->rows[i].pruned ? r->rows[i].pruned : i == r->winner ? "winner" : "ok";
}

static void num(StrBuf *sb, double v, const char *fmt, bool known)
{
    if (known) sb_printf(sb, fmt, v);
}

static KilnStatus finish(StrBuf *sb, char **out)
{
    if (sb_failed(sb)) {
        sb_free(sb);
        return kiln_set_error(KILN_ERR_IO, "out of host memory for the report");
    }
    *out = sb_steal(sb);
    if (!*out) *out = calloc(1, 1);
    return *out ? KILN_OK : kiln_set_error(KILN_ERR_IO, "out of host memory for the report");
}

KilnStatus kiln_tune_report_csv(const KilnTuneReport *r, char **out)
{
    if (!r || !out) return kiln_set_error(KILN_ERR_USAGE, "kiln_tune_report_csv: a NULL argument");
    StrBuf sb;
    sb_init(&sb);
    for (int d = 0; d < r->ndims; d++) sb_printf(&sb, "%s,", r->dims[d]);
    sb_puts(&sb, "time_ms,tflops,gbps,registers,spill_bytes,smem_bytes,warps,occupancy,compile_ms,max_err,status\n");
    for (int i = 0; i < r->nrows; i++) {
        const KilnTuneRow *w = &r->rows[i];
        for (int d = 0; d < r->ndims; d++) sb_printf(&sb, "%s,", w->values[d]);
        num(&sb, w->time_ms, "%.5f", w->time_ms >= 0);
        sb_putc(&sb, ',');
        num(&sb, w->tflops, "%.2f", w->tflops > 0);
        sb_putc(&sb, ',');
        num(&sb, w->gbps, "%.1f", w->gbps > 0);
        sb_putc(&sb, ',');
        num(&sb, w->registers, "%.0f", w->registers >= 0);
        sb_putc(&sb, ',');
        num(&sb, w->spill_bytes, "%.0f", w->spill_bytes >= 0);
        sb_printf(&sb, ",%d,%d,%d,%.1f,", w->smem_bytes, w->num_warps, w->occupancy, w->compile_ms);
        num(&sb, w->max_err, "%.3g", w->max_err >= 0);
        sb_puts(&sb, ",\"");
        for (const char *c = status_of(r, i); *c; c++) {
            if (*c == '"') sb_putc(&sb, '"');
            sb_putc(&sb, *c == '\n' ? ' ' : *c);
        }
        sb_puts(&sb, "\"\n");
    }
    return finish(&sb, out);
}

KilnStatus kiln_tune_report_table(const KilnTuneReport *r, char **out)
{
    if (!r || !out) return kiln_set_error(KILN_ERR_USAGE, "kiln_tune_report_table: a NULL argument");
    StrBuf sb;
    sb_init(&sb);
    int kept = 0, timed = 0;
    for (int i = 0; i < r->nrows; i++) kept += !r->rows[i].pruned, timed += r->rows[i].time_ms >= 0;
    sb_printf(&sb, "tune %s on %s, key %s: %d configs (%d of %d kept by the constraints), %d kept, %d timed; "
              "compiled in %.0f ms wall on %d threads\n",
              r->kernel, r->device, r->key && *r->key ? r->key : "-", r->nrows, r->nspace, r->ntotal, kept, timed,
              r->compile_wall_ms, r->jobs);
    sb_puts(&sb, "  ");
    for (int d = 0; d < r->ndims; d++) sb_printf(&sb, " %10.10s", r->dims[d]);
    sb_puts(&sb, "    time_ms  TFLOP/s   GB/s  regs spill   smem occ compile_ms  status\n");
    for (int i = 0; i < r->nrows; i++) {
        const KilnTuneRow *w = &r->rows[i];
        sb_puts(&sb, i == r->winner ? " *" : "  ");
        for (int d = 0; d < r->ndims; d++) sb_printf(&sb, " %10.10s", w->values[d]);
        if (w->time_ms >= 0) sb_printf(&sb, " %10.4f", w->time_ms);
        else sb_puts(&sb, "          -");
        if (w->tflops > 0) sb_printf(&sb, " %8.1f", w->tflops);
        else sb_puts(&sb, "        -");
        if (w->gbps > 0) sb_printf(&sb, " %6.0f", w->gbps);
        else sb_puts(&sb, "      -");
        if (w->registers >= 0) sb_printf(&sb, " %5d %5d", w->registers, w->spill_bytes);
        else sb_puts(&sb, "     -     -");
        sb_printf(&sb, " %6d %3d %10.1f  %s\n", w->smem_bytes, w->occupancy, w->compile_ms, status_of(r, i));
    }
    if (r->winner >= 0) {
        sb_printf(&sb, "winner:");
        for (int d = 0; d < r->ndims; d++) sb_printf(&sb, " %s=%s", r->dims[d], r->rows[r->winner].values[d]);
        sb_printf(&sb, " (%.4f ms)%s%s\n", r->rows[r->winner].time_ms, r->cache_file ? ", stored in " : "",
                  r->cache_file ? r->cache_file : "");
    }
    return finish(&sb, out);
}

/* ---------------- SVG ---------------- */

#define PW 300 /* panel width and height, pixels */
#define PH 220
#define PAD 48

static void esc(StrBuf *sb, const char *s)
{
    for (; s && *s; s++) {
        if (*s == '<') sb_puts(sb, "&lt;");
        else if (*s == '>') sb_puts(sb, "&gt;");
        else if (*s == '&') sb_puts(sb, "&amp;");
        else if (*s == '"') sb_puts(sb, "&quot;");
        else sb_putc(sb, *s);
    }
}

/* The plotted y of row i: its time when timed, else its compile time; < 0: none. */
static double y_of(const KilnTuneReport *r, int i, bool timed)
{
    const KilnTuneRow *w = &r->rows[i];
    if (w->pruned) return -1;
    return timed ? w->time_ms : w->compile_ms;
}

typedef struct Panel {
    int x0, y0;
    double xmin, xmax, ymin, ymax;
} Panel;

static double px(const Panel *p, double x)
{
    return p->x0 + PAD + (p->xmax > p->xmin ? (x - p->xmin) / (p->xmax - p->xmin) : 0.5) * (PW - PAD - 10);
}
static double py(const Panel *p, double y)
{
    return p->y0 + PH - PAD + 10 - (p->ymax > p->ymin ? (y - p->ymin) / (p->ymax - p->ymin) : 0.5) * (PH - PAD - 10);
}

static void frame(StrBuf *sb, const Panel *p, const char *title, const char *xlabel, const char *ylabel)
{
    sb_printf(sb, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#888\"/>\n", p->x0 + PAD,
              p->y0 + 10, PW - PAD - 10, PH - PAD);
    sb_printf(sb, "<text x=\"%d\" y=\"%d\" font-size=\"12\">", p->x0 + PAD, p->y0 + 6);
    esc(sb, title);
    sb_printf(sb, "</text>\n<text x=\"%d\" y=\"%d\" font-size=\"10\">", p->x0 + PAD, p->y0 + PH - 8);
    esc(sb, xlabel);
    sb_printf(sb, "</text>\n<text x=\"%d\" y=\"%d\" font-size=\"10\" transform=\"rotate(-90 %d %d)\">", p->x0 + 12,
              p->y0 + PH - PAD, p->x0 + 12, p->y0 + PH - PAD);
    esc(sb, ylabel);
    sb_puts(sb, "</text>\n");
    sb_printf(sb, "<text x=\"%d\" y=\"%d\" font-size=\"9\">%.4g</text>\n", p->x0 + 2, p->y0 + 18, p->ymax);
    sb_printf(sb, "<text x=\"%d\" y=\"%d\" font-size=\"9\">%.4g</text>\n", p->x0 + 2, p->y0 + PH - PAD + 10, p->ymin);
}

/* The index of row i's value in dimension d among the dimension's distinct values (in
 * first-seen order), and how many there are. */
static int value_slot(const KilnTuneReport *r, int d, int i, int *n)
{
    int slot = -1, k = 0;
    for (int j = 0; j < r->nrows; j++) {
        bool first = true;
        for (int q = 0; q < j && first; q++) first = strcmp(r->rows[q].values[d], r->rows[j].values[d]) != 0;
        if (!first) continue;
        if (!strcmp(r->rows[j].values[d], r->rows[i].values[d])) slot = k;
        k++;
    }
    *n = k;
    return slot;
}

static void dim_panel(StrBuf *sb, const KilnTuneReport *r, int d, Panel p, bool timed)
{
    int nv = 1;
    value_slot(r, d, 0, &nv);
    p.xmin = -0.5, p.xmax = nv - 0.5;
    frame(sb, &p, r->dims[d], r->dims[d], timed ? "time (ms)" : "compile (ms)");
    for (int j = 0, k = 0; j < r->nrows; j++) { /* the value labels, once each */
        int n, s = value_slot(r, d, j, &n);
        if (s != k) continue;
        k++;
        sb_printf(sb, "<text x=\"%.1f\" y=\"%d\" font-size=\"9\" text-anchor=\"middle\">", px(&p, s), p.y0 + PH - PAD + 22);
        esc(sb, r->rows[j].values[d]);
        sb_puts(sb, "</text>\n");
    }
    for (int i = 0; i < r->nrows; i++) {
        double y = y_of(r, i, timed);
        if (y < 0) continue;
        int n, s = value_slot(r, d, i, &n);
        double jitter = ((i * 37) % 11 - 5) * 0.03; /* configs sharing a value spread a little */
        sb_printf(sb, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\" fill-opacity=\"0.6\"/>\n",
                  px(&p, s + jitter), py(&p, y), i == r->winner ? "#d62728" : "#1f77b4");
    }
}

static double metric(const KilnTuneRow *w, int which) { return which ? w->smem_bytes : w->registers; }

/* Time against registers (which 0) or shared memory (1); the Pareto front joined. */
static void pareto_panel(StrBuf *sb, const KilnTuneReport *r, int which, Panel p, bool timed)
{
    frame(sb, &p, which ? "Pareto: time vs shared memory" : "Pareto: time vs registers",
          which ? "shared memory (bytes)" : "registers per thread", timed ? "time (ms)" : "compile (ms)");
    int *front = calloc((size_t)r->nrows + 1, sizeof *front);
    int nf = 0;
    for (int i = 0; i < r->nrows; i++) {
        double y = y_of(r, i, timed), x = metric(&r->rows[i], which);
        if (y < 0 || x < 0) continue;
        bool dominated = false;
        for (int j = 0; j < r->nrows && !dominated; j++) {
            double yj = y_of(r, j, timed), xj = metric(&r->rows[j], which);
            if (j == i || yj < 0 || xj < 0) continue;
            dominated = yj <= y && xj <= x && (yj < y || xj < x);
        }
        sb_printf(sb, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\" fill-opacity=\"0.6\"/>\n", px(&p, x),
                  py(&p, y), dominated ? "#1f77b4" : "#d62728");
        if (!dominated && front) front[nf++] = i;
    }
    for (int a = 1; a < nf; a++) /* by x, for the line */
        for (int b = a; b > 0 && metric(&r->rows[front[b]], which) < metric(&r->rows[front[b - 1]], which); b--) {
            int tmp = front[b];
            front[b] = front[b - 1];
            front[b - 1] = tmp;
        }
    if (nf > 1) {
        sb_puts(sb, "<polyline fill=\"none\" stroke=\"#d62728\" points=\"");
        for (int k = 0; k < nf; k++)
            sb_printf(sb, "%.1f,%.1f ", px(&p, metric(&r->rows[front[k]], which)), py(&p, y_of(r, front[k], timed)));
        sb_puts(sb, "\"/>\n");
    }
    sb_printf(sb, "<text x=\"%d\" y=\"%d\" font-size=\"9\">%.0f</text>\n", p.x0 + PAD, p.y0 + PH - PAD + 22, p.xmin);
    sb_printf(sb, "<text x=\"%d\" y=\"%d\" font-size=\"9\" text-anchor=\"end\">%.0f</text>\n", p.x0 + PW - 10,
              p.y0 + PH - PAD + 22, p.xmax);
    free(front);
}

KilnStatus kiln_tune_report_svg(const KilnTuneReport *r, char **out)
{
    if (!r || !out) return kiln_set_error(KILN_ERR_USAGE, "kiln_tune_report_svg: a NULL argument");
    bool timed = r->winner >= 0;
    double ymin = 1e300, ymax = -1, xr[2][2] = {{1e300, -1}, {1e300, -1}};
    for (int i = 0; i < r->nrows; i++) {
        double y = y_of(r, i, timed);
        if (y < 0) continue;
        ymin = y < ymin ? y : ymin, ymax = y > ymax ? y : ymax;
        for (int w = 0; w < 2; w++) {
            double x = metric(&r->rows[i], w);
            if (x < 0) continue;
            xr[w][0] = x < xr[w][0] ? x : xr[w][0], xr[w][1] = x > xr[w][1] ? x : xr[w][1];
        }
    }
    if (ymax < 0) ymin = 0, ymax = 1;
    int npanels = r->ndims + 2, cols = 3, rows = (npanels + cols - 1) / cols;
    StrBuf sb;
    sb_init(&sb);
    sb_printf(&sb, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" font-family=\"sans-serif\">\n",
              cols * PW, rows * PH + 30);
    sb_printf(&sb, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n<text x=\"8\" y=\"18\" font-size=\"13\">");
    char title[512];
    snprintf(title, sizeof title, "kiln tune %s on %s, key %s: %s of %d configs (winner red)", r->kernel, r->device,
             r->key && *r->key ? r->key : "-", timed ? "median time" : "compile time", r->nrows);
    esc(&sb, title);
    sb_puts(&sb, "</text>\n");
    for (int k = 0; k < npanels; k++) {
        Panel p = {.x0 = (k % cols) * PW, .y0 = 30 + (k / cols) * PH, .ymin = ymin, .ymax = ymax};
        if (k < r->ndims) {
            dim_panel(&sb, r, k, p, timed);
        } else {
            int w = k - r->ndims;
            p.xmin = xr[w][1] >= 0 ? xr[w][0] : 0, p.xmax = xr[w][1] >= 0 ? xr[w][1] : 1;
            pareto_panel(&sb, r, w, p, timed);
        }
    }
    sb_puts(&sb, "</svg>\n");
    return finish(&sb, out);
}
