/* od_load.h — the load engine of `opdispatch load`: pre-encoded HTTP/1.1
 * requests over N kept-alive connections from one epoll loop, closed loop
 * or open loop, latencies into a log-linear histogram.
 *
 * Invariants:
 *  - The request bytes are built once; a run only writes them and parses
 *    status line, Content-Length and body length of each answer, so the
 *    generator's own cost per request is a few microseconds (wrk's design).
 *  - Open loop: request i is due at start + i / rate, whatever happened
 *    before; its latency runs from that due time, so a stall of the server
 *    shows in every request it delayed (the coordinated-omission
 *    correction of wrk2 and perf_analyzer). Closed loop: each connection
 *    sends its next request when the previous answer is complete.
 *  - Runs stop by themselves: after the duration or the count, and a
 *    connection that fails is counted and reopened, never retried forever.
 */
#ifndef OD_LOAD_H
#define OD_LOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Log-linear histogram of nanoseconds: 64 sub-buckets per power of two
 * (relative error under 1.6 %), from 1 ns to about 18 minutes. */
#define OD_HIST_BUCKETS (64 + 40 * 64)
typedef struct od_hist {
    uint64_t count, min, max;
    double sum;
    uint64_t b[OD_HIST_BUCKETS];
} od_hist;

void od_hist_add(od_hist *h, uint64_t ns);
/* The value at quantile q (0..1), ns; 0 for an empty histogram. */
uint64_t od_hist_quantile(const od_hist *h, double q);

typedef struct od_load_spec {
    const char *host;  /* numeric IPv4, e.g. "127.0.0.1" */
    int port;
    const char *request; /* the whole request, headers and body (borrowed) */
    size_t request_len;
    int connections;
    double duration_s;  /* 0: use count */
    uint64_t count;     /* 0: use duration */
    double rate;        /* requests/s for the open loop; 0: closed loop */
    double warmup_s;    /* not recorded */
    bool progress;      /* a live line on stderr, once a second */
} od_load_spec;

#define OD_LOAD_STATUSES 600
typedef struct od_load_result {
    od_hist lat;                       /* completed requests, any status */
    uint64_t requests, ok;             /* completed, of which 2xx */
    uint64_t status[OD_LOAD_STATUSES]; /* by HTTP status */
    uint64_t transport_errors;         /* connect/reset/parse failures */
    uint64_t bytes_sent, bytes_received;
    double elapsed_s;
} od_load_result;

/* Runs spec; *out filled (caller's). Returns 0, or -1 with err filled when
 * the run could not start (no connection at all). */
int od_load_run(const od_load_spec *spec, od_load_result *out, char *err, size_t errcap);

#endif
