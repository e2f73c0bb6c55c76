/* error.c — the od_error record. Messages are truncated, never overflowed. */
#include <stdio.h>
#include <string.h>

#include "od_error.h"

od_status od_error_vset(od_error *err, od_status st, const char *fmt, va_list ap)
{
    if (err) {
        err->status = st;
        vsnprintf(err->message, sizeof err->message, fmt, ap);
    }
    return st;
}

od_status od_error_set(od_error *err, od_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    od_error_vset(err, st, fmt, ap);
    va_end(ap);
    return st;
}

void od_error_prefix(od_error *err, const char *fmt, ...)
{
    if (!err)
        return;
    char prefix[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(prefix, sizeof prefix - 2, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    size_t pl = strlen(prefix);
    memcpy(prefix + pl, ": ", 3);
    pl += 2;
    /* Shift the old message right (truncating its tail), then put the prefix in front. */
    size_t ml = strnlen(err->message, sizeof err->message - 1);
    if (pl + ml > sizeof err->message - 1)
        ml = sizeof err->message - 1 - pl;
    memmove(err->message + pl, err->message, ml);
    memcpy(err->message, prefix, pl);
    err->message[pl + ml] = '\0';
}

void od_error_clear(od_error *err)
{
    if (err) {
        err->status = OD_OK;
        err->message[0] = '\0';
    }
}

#define OD_STATUS_ROW_(e, code, http, meaning) [e] = {code, http, meaning},
static const struct {
    const char *code;
    int http;
    const char *meaning;
} g_status[OD_NUM_STATUS] = {OD_STATUS_TABLE(OD_STATUS_ROW_)};
#undef OD_STATUS_ROW_

const char *od_status_code(od_status st)
{
    return (unsigned)st < OD_NUM_STATUS ? g_status[st].code : "internal";
}

int od_status_http(od_status st) { return (unsigned)st < OD_NUM_STATUS ? g_status[st].http : 500; }

const char *od_status_meaning(od_status st)
{
    return (unsigned)st < OD_NUM_STATUS ? g_status[st].meaning : g_status[OD_EINTERNAL].meaning;
}
