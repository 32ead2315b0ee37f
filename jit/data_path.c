/* data_path.c — kiln_data_path: where the shipped .tile programs are.
 *
 * A program may run from the build tree, from an installed prefix (bin/kiln,
 * lib/libkiln.so, share/kiln/{lib,examples}) or from a copy of either, so no
 * single compiled-in path is right. The candidates, in order: $KILN_DATA_DIR
 * (an explicit choice wins); share/kiln next to the code that is running (the
 * shared library's directory, then the executable's: <dir>/../share/kiln);
 * $KILN_SOURCE_DIR; the source tree this library was built from. The first
 * directory holding the file wins.
 *
 * Names are those of the installed layout ("examples/vec_add.tile",
 * "lib/attention_fwd.tile"); in a source tree, lib/ is lang/lib/, and that
 * spelling is accepted too.
 *
 * Example: installed under /opt/kiln, kiln_data_path("examples/vec_add.tile")
 * gives /opt/kiln/share/kiln/examples/vec_add.tile from /opt/kiln/bin/kiln or
 * from a program linked with /opt/kiln/lib/libkiln.so, wherever it runs.
 */
#include "jit_internal.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* dir/../share/kiln of the file `file` (a library or an executable), when
 * that directory exists, into out (PATH_MAX bytes) as a canonical path. */
static bool share_next_to(const char *file, char *out)
{
    char real[PATH_MAX], share[PATH_MAX + 32];
    if (!file || !realpath(file, real)) return false;
    char *slash = strrchr(real, '/');
    if (!slash) return false;
    *slash = 0;
    snprintf(share, sizeof share, "%s/../share/kiln", real);
    return realpath(share, out) != NULL;
}

/* D/rel, else (rel "lib/...") D/lang/rel, or (rel "lang/lib/...") D/rel minus "lang/". */
static bool try_dir(const char *dir, const char *rel, char *buf, size_t size)
{
    if (!dir || !*dir) return false;
    const char *alt = !strncmp(rel, "lib/", 4) ? "lang/" : NULL;
    const char *rel2 = !strncmp(rel, "lang/lib/", 9) ? rel + 5 : NULL;
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/%s", dir, rel) < (int)sizeof path && access(path, R_OK) == 0) goto found;
    if (alt && snprintf(path, sizeof path, "%s/%s%s", dir, alt, rel) < (int)sizeof path && access(path, R_OK) == 0)
        goto found;
    if (rel2 && snprintf(path, sizeof path, "%s/%s", dir, rel2) < (int)sizeof path && access(path, R_OK) == 0)
        goto found;
    return false;
found:
    if (strlen(path) >= size) return false;
    memcpy(buf, path, strlen(path) + 1);
    return true;
}

KilnStatus kiln_data_path(const char *rel, char *buf, size_t size)
{
    if (!rel || !*rel || !buf || size == 0) return kiln_set_error(KILN_ERR_USAGE, "kiln_data_path: bad argument");
    buf[0] = 0;
    char lib_share[PATH_MAX] = "", exe_share[PATH_MAX] = "";
    Dl_info info;
    if (dladdr((void *)kiln_data_path, &info) && info.dli_fname) share_next_to(info.dli_fname, lib_share);
    share_next_to("/proc/self/exe", exe_share);
    const char *dirs[] = {
        getenv("KILN_DATA_DIR"), lib_share, exe_share, getenv("KILN_SOURCE_DIR"),
#ifdef KILN_SOURCE_DIR
        KILN_SOURCE_DIR,
#endif
    };
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++)
        if (try_dir(dirs[i], rel, buf, size)) return KILN_OK;
    return kiln_set_error(KILN_ERR_NOT_FOUND,
                          "no shipped file %s (looked in $KILN_DATA_DIR, share/kiln next to the library and "
                          "the program, $KILN_SOURCE_DIR and the source tree of the build; set KILN_DATA_DIR to "
                          "the share/kiln of an installed prefix)",
                          rel);
}
