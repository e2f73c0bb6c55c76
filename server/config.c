/* config.c — the configuration every part of opdispatchd reads, the clock,
 * and the log.
 *
 * Invariants: od_cfg is written only by main() before the server starts and
 * read-only after; a log line is written with one write(2), so lines from
 * different threads never interleave.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "server_int.h"

od_config od_cfg;
atomic_bool od_draining;

uint64_t od_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void od_config_defaults(od_config *c)
{
    memset(c, 0, sizeof *c);
    snprintf(c->host, sizeof c->host, "127.0.0.1");
    c->port = 8000;
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    c->threads = n > 0 ? (int)n : 1;
    c->max_body_bytes = (size_t)512 << 20;
    c->max_rank = OD_MAX_DIMS;
    c->max_elements = (int64_t)1 << 28;
    c->max_output_bytes = (size_t)1 << 30;
    c->max_json_depth = 64;
    c->max_json_values = 65536;
    c->max_inflight_body_bytes = (size_t)2 << 30;
    c->max_active_body_bytes = (size_t)256 << 20;
    c->max_body_wait_ms = 1000;
    c->cpu_cache_bytes = OD_CPU_CACHE_DEFAULT_LIMIT;
    c->max_session_bytes = (size_t)4 << 30;
    c->session_idle_s = 3600;
    c->store_high_water_bytes = (size_t)16 << 30;
    c->call_workers = c->threads;
    c->max_call_seconds = 60;
    c->max_connections = 1024;
    c->max_connections_per_ip = 256;
    c->idle_timeout_s = 60;
    c->request_timeout_s = 60;
    c->drain_timeout_s = 30;
    c->log_level = OD_LOG_INFO;
    c->access_log = true;
    snprintf(c->default_device, sizeof c->default_device, "auto");
}

static const char *level_names[] = {"error", "warn", "info", "debug"};

void od_log_write(const char *line, size_t n)
{
    /* one write per line: lines from different threads never interleave */
    while (n > 0) {
        ssize_t w = write(2, line, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        line += w;
        n -= (size_t)w;
    }
}

int od_log_timestamp(char *buf, size_t cap)
{
    /* The access log stamps every request: the seconds' text is formatted
     * once a second per thread, the milliseconds by hand. */
    static _Thread_local time_t last = -1;
    static _Thread_local char sec[32];
    static _Thread_local size_t sec_len;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (ts.tv_sec != last) {
        struct tm tm;
        gmtime_r(&ts.tv_sec, &tm);
        sec_len = strftime(sec, sizeof sec, "%Y-%m-%dT%H:%M:%S", &tm);
        last = ts.tv_sec;
    }
    if (cap < sec_len + 6) {
        if (cap)
            buf[0] = '\0';
        return 0;
    }
    unsigned ms = (unsigned)(ts.tv_nsec / 1000000);
    memcpy(buf, sec, sec_len);
    char *o = buf + sec_len;
    o[0] = '.';
    o[1] = (char)('0' + ms / 100);
    o[2] = (char)('0' + ms / 10 % 10);
    o[3] = (char)('0' + ms % 10);
    o[4] = 'Z';
    o[5] = '\0';
    return (int)(sec_len + 5);
}

void od_log(od_log_level lvl, const char *fmt, ...)
{
    if (lvl > od_cfg.log_level)
        return;
    char line[2048];
    int n = od_log_timestamp(line, sizeof line);
    n += snprintf(line + n, sizeof line - (size_t)n, " %s ", level_names[lvl]);
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    n = m < 0 ? n : (n + m < (int)sizeof line - 1 ? n + m : (int)sizeof line - 2);
    line[n++] = '\n';
    od_log_write(line, (size_t)n);
}

