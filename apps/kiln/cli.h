/* cli.h — shared state of the kiln command's subcommands (not a library header). */
#ifndef KILN_CLI_H
#define KILN_CLI_H

#include <stdbool.h>

#include "compiler/driver/driver.h"

#define KILN_CLI_MAX_DEFINES 64
#define KILN_CLI_MAX_ARGS 64       /* ARG=SPEC: a kernel run from the CLI has at most 64 parameters */
#define KILN_CLI_MAX_ARGS_STR "64"

typedef struct KilnCliArgs {
    const char *file;
    const char *out_path;
    KilnCompileOptions opts;
    KilnDefine defines[KILN_CLI_MAX_DEFINES];
    int ndefines;
    KilnParamHint hints[KILN_CLI_MAX_DEFINES];   /* --assume NAME=DIV */
    int nhints;
    const char *include_dirs[KILN_CLI_MAX_DEFINES];   /* -I DIR: where `import` looks */
    int ninclude_dirs;
    const char *runargs[KILN_CLI_MAX_ARGS];   /* ARG=SPEC */
    int nrunargs;
    int grid[3];
    unsigned seed;
    int show;
    bool stats, time, cpu;
} KilnCliArgs;

/* `kiln tune`'s own options (tune.c). */
typedef struct KilnCliTune {
    const char *csv, *svg, *grid;
    bool no_run;
} KilnCliTune;

char *kiln_cli_read_source(const char *path);
/* `kiln tune`: takes its options out of argv, the rest through `parse`; the exit code. */
int kiln_cli_tune(int argc, char **argv, int (*parse)(int, char **, KilnCliArgs *));
int kiln_cli_run(KilnCliArgs *a);   /* returns the exit code */

#endif
