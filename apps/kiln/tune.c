/* tune.c — `kiln tune FILE -k KERNEL [options] [ARG=SPEC]...`: the autotuner from the shell.
 *
 * What: takes the tune options out of the command line (below), hands the rest to the
 * shared parser (-k, -D, -I, --assume, --arch, --cpu, ARG=SPEC), runs kiln_tune (include/kiln/
 * kiln_tune.h) and prints the report's table; --csv and --svg write the other forms.
 * With a GPU (and no --cpu, --no-run) the kept configs are timed there; --cpu runs them
 * on the interpreter (the agreement check only); --no-run compiles and prunes only.
 *
 * Exit codes: 0 a report (configs may have been pruned); 1 a bad space, a failing run, or
 * configs that disagree with config 0 (the report is printed first); 2 a bad command line.
 *
 * Example: kiln tune examples/vec_add.tile -k vec_add --grid 4096/BLOCK X=rand:4096
 *          Y=rand:4096 Z=out:4096 n=4096 --csv vec_add.csv --svg vec_add.svg
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static int tune_usage(const char *fmt, const char *arg)
{
    fprintf(stderr, "kiln: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nTry 'kiln --help'.\n");
    return 2;
}

static bool number(const char *v, double lo, double hi, double *out)
{
    char *end;
    double x = v ? strtod(v, &end) : 0;
    if (!v || end == v || *end || !(x >= lo && x <= hi)) return false;
    *out = x;
    return true;
}

/* The options only `kiln tune` has; the others stay in argv/argc for parse_args. */
static int take_tune_options(int *argc, char **argv, KilnTuneOptions *o, KilnCliTune *t)
{
    int n = 2;
    for (int i = 2; i < *argc; i++) {
        const char *s = argv[i], *v = i + 1 < *argc ? argv[i + 1] : NULL;
        double x;
        static const char *const numeric[] = {"--jobs", "--max-spill", "--max-configs", "--warmup", "--repeats",
                                              "--flops", "--bytes", "--rtol", "--atol"};
        int k = 0;
        while (k < 9 && strcmp(s, numeric[k])) k++;
        if (k < 9) {
            if (!number(v, k == 1 ? -1 : 0, 1e30, &x)) return tune_usage("option '%s' needs a number", s);
            i++;
            if (k == 0) o->jobs = (int)x;
            else if (k == 1) o->max_spill_bytes = (int)x;
            else if (k == 2) o->max_configs = (int)x;
            else if (k == 3) o->warmup = (int)x;
            else if (k == 4) o->repeats = (int)x;
            else if (k == 5) o->flops = x;
            else if (k == 6) o->bytes = x;
            else if (k == 7) o->rtol = x;
            else o->atol = x;
        } else if (!strcmp(s, "--grid") || !strcmp(s, "--csv") || !strcmp(s, "--svg") || !strcmp(s, "--key")) {
            if (!v) return tune_usage("option '%s' needs a value", s);
            i++;
            if (s[2] == 'c') t->csv = v;
            else if (s[2] == 's') t->svg = v;
            else if (s[2] == 'k') o->key = v;
            else t->grid = v;
        } else if (!strcmp(s, "--store")) o->store = 1;
        else if (!strcmp(s, "--no-run")) t->no_run = true;
        else argv[n++] = argv[i];
    }
    *argc = n;
    return 0;
}

/* "4096/BLOCK_M,16" into three axis specs. */
static int split_grid(const char *g, KilnTuneOptions *o, char **copy)
{
    if (!g) return 0;
    *copy = strdup(g);
    char *p = *copy;
    for (int k = 0; k < 3 && p && *p; k++) {
        o->grid[k] = p;
        p = strchr(p, ',');
        if (p) *p++ = 0;
        else break;
        if (k == 2) return tune_usage("bad --grid '%s' (expected X[,Y[,Z]], each N or N/NAME)", g);
    }
    return 0;
}

static int write_text(const char *path, KilnStatus (*fn)(const KilnTuneReport *, char **), const KilnTuneReport *r)
{
    char *text = NULL;
    if (fn(r, &text) != KILN_OK) {
        fprintf(stderr, "kiln: %s\n", kiln_last_error());
        return 1;
    }
    FILE *f = fopen(path, "w");
    bool ok = f && fputs(text, f) >= 0;
    if (f && fclose(f) != 0) ok = false;
    free(text);
    if (!ok) fprintf(stderr, "kiln: cannot write '%s'\n", path);
    return ok ? 0 : 1;
}

int kiln_cli_tune(int argc, char **argv, int (*parse)(int, char **, KilnCliArgs *))
{
    KilnTuneOptions o;
    memset(&o, 0, sizeof o);
    o.max_spill_bytes = 0;
    KilnCliTune t = {0};
    int rc = take_tune_options(&argc, argv, &o, &t);
    KilnCliArgs a;
    if (rc || (rc = parse(argc, argv, &a))) return rc;
    if (!a.opts.kernel) return tune_usage("%s", "kiln tune needs the kernel to tune: -k NAME");
    char *grid = NULL;
    if ((rc = split_grid(t.grid, &o, &grid))) return rc;
    o.kernel = a.opts.kernel;
    o.defines = a.defines;
    o.ndefines = a.ndefines;
    o.arch = a.opts.arch;
    o.include_dirs = a.include_dirs;
    o.ninclude_dirs = a.ninclude_dirs;
    o.hints = a.hints;
    o.nhints = a.nhints;
    o.args = a.runargs;
    o.nargs = a.nrunargs;
    KilnDevice *dev = NULL;
    int ndev = 0;
    bool run = !t.no_run && a.nrunargs > 0;
    if (run && !a.cpu && kiln_device_count(&ndev) == KILN_OK && ndev > 0 && kiln_init(&dev, 0) != KILN_OK) dev = NULL;
    o.device = run && !a.cpu ? dev : NULL;
    o.cpu_check = run && !o.device;
    char *src = kiln_cli_read_source(a.file);
    if (!src) return 1;
    KilnTuneReport *r = NULL;
    KilnStatus st = kiln_tune(a.file, src, &o, &r);
    if (r) {
        char *table = NULL;
        if (kiln_tune_report_table(r, &table) == KILN_OK) fputs(table, stdout);
        free(table);
        if (t.csv && write_text(t.csv, kiln_tune_report_csv, r)) rc = 1;
        if (t.svg && write_text(t.svg, kiln_tune_report_svg, r)) rc = 1;
    }
    if (st != KILN_OK) {
        fprintf(stderr, "%s%s\n", r ? "kiln: " : "", kiln_last_error());
        rc = st == KILN_ERR_USAGE ? 2 : 1;
    }
    kiln_tune_report_free(r);
    if (dev) kiln_shutdown(dev);
    free(src);
    free(grid);
    for (int i = 0; i < a.ndefines; i++) free((char *)a.defines[i].name);
    for (int i = 0; i < a.nhints; i++) free((char *)a.hints[i].name);
    return rc;
}
