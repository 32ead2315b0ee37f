/* status.c — status names, the version string and the thread-local last error.
 *
 * Each thread has its own fixed-size message buffer, so a failing call on one
 * thread never garbles another's message and nothing needs freeing at thread
 * exit. Long messages (compiler diagnostics, JIT logs) are cut at the buffer
 * size with a "[...]" marker.
 */
#include "kiln_runtime.h"
#include "rt_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define RT_ERR_CAP 8192

static _Thread_local char tls_err[RT_ERR_CAP];

const char *kiln_status_name(KilnStatus s)
{
    switch (s) {
    case KILN_OK: return "KILN_OK";
    case KILN_ERR_COMPILE: return "KILN_ERR_COMPILE";
    case KILN_ERR_USAGE: return "KILN_ERR_USAGE";
    case KILN_ERR_NO_DRIVER: return "KILN_ERR_NO_DRIVER";
    case KILN_ERR_NO_DEVICE: return "KILN_ERR_NO_DEVICE";
    case KILN_ERR_DRIVER: return "KILN_ERR_DRIVER";
    case KILN_ERR_ARGS: return "KILN_ERR_ARGS";
    case KILN_ERR_IO: return "KILN_ERR_IO";
    case KILN_ERR_NOT_FOUND: return "KILN_ERR_NOT_FOUND";
    case KILN_ERR_UNSUPPORTED: return "KILN_ERR_UNSUPPORTED";
    case KILN_ERR_INTERNAL: return "KILN_ERR_INTERNAL";
    case KILN_ERR_KERNEL: return "KILN_ERR_KERNEL";
    }
    return "KILN_ERR_UNKNOWN";
}

const char *kiln_version(void)
{
#ifdef KILN_VERSION
    return KILN_VERSION;
#else
    return "0.0.0";
#endif
}

const char *kiln_last_error(void) { return tls_err; }

void kiln_clear_error(void) { tls_err[0] = 0; }

static void mark_truncated(void)
{
    static const char mark[] = " [...]";
    memcpy(tls_err + RT_ERR_CAP - sizeof mark, mark, sizeof mark);
}

KilnStatus kiln_set_error(KilnStatus s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tls_err, RT_ERR_CAP, fmt, ap);
    va_end(ap);
    if (n >= RT_ERR_CAP) mark_truncated();
    return s;
}

void rt_append_error(const char *text)
{
    if (!text) return;
    size_t len = strlen(tls_err);
    size_t add = strlen(text);
    if (len + add + 1 > RT_ERR_CAP) {
        memcpy(tls_err + len, text, RT_ERR_CAP - 1 - len);
        tls_err[RT_ERR_CAP - 1] = 0;
        mark_truncated();
        return;
    }
    memcpy(tls_err + len, text, add + 1);
}
