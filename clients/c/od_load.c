/* od_load.c — the load engine (see od_load.h for the invariants). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "od_load.h"

/* ---- histogram ---- */

static int bucket_of(uint64_t v)
{
    if (v < 64)
        return (int)v;
    int e = 63 - __builtin_clzll(v); /* >= 6 */
    int idx = 64 + (e - 6) * 64 + (int)((v >> (e - 6)) - 64);
    return idx < OD_HIST_BUCKETS ? idx : OD_HIST_BUCKETS - 1;
}

static uint64_t value_of(int idx)
{
    if (idx < 64)
        return (uint64_t)idx;
    int k = (idx - 64) / 64, sub = (idx - 64) % 64;
    uint64_t lo = (uint64_t)(64 + sub) << k, width = (uint64_t)1 << k;
    return lo + width / 2; /* the bucket's middle */
}

void od_hist_add(od_hist *h, uint64_t ns)
{
    if (!h->count || ns < h->min)
        h->min = ns;
    if (ns > h->max)
        h->max = ns;
    h->count++;
    h->sum += (double)ns;
    h->b[bucket_of(ns)]++;
}

uint64_t od_hist_quantile(const od_hist *h, double q)
{
    if (!h->count)
        return 0;
    uint64_t rank = (uint64_t)(q * (double)h->count + 0.5);
    if (rank < 1)
        rank = 1;
    uint64_t seen = 0;
    for (int i = 0; i < OD_HIST_BUCKETS; i++) {
        seen += h->b[i];
        if (seen >= rank) {
            uint64_t v = value_of(i);
            return v < h->min ? h->min : v > h->max ? h->max : v;
        }
    }
    return h->max;
}

/* ---- connections ---- */

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

typedef struct conn {
    int fd;
    bool want_out;      /* EPOLLOUT is registered */
    uint64_t retry_at;  /* after a failure: not before this time */
    bool busy;          /* a request is out */
    size_t sent;        /* bytes of the request written */
    uint64_t t_start;   /* when the latency runs from */
    char hdr[8192];     /* the answer's head as it arrives */
    size_t hlen;
    int status;
    long long body_left; /* -1: head not complete yet */
} conn;

typedef struct run {
    const od_load_spec *sp;
    od_load_result *res;
    int ep;
    conn *c;
    struct sockaddr_in addr;
    uint64_t t0, t_record, t_end, issued, next_due_i;
    int nbusy; /* connections with a request out */
    bool recording;
} run;

static int open_conn(run *r, conn *c)
{
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->fd < 0)
        return -1;
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(c->fd, (struct sockaddr *)&r->addr, sizeof r->addr) < 0 && errno != EINPROGRESS) {
        close(c->fd);
        c->fd = -1;
        return -1;
    }
    /* level-triggered; EPOLLOUT only while the connect or a write is pending */
    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT, .data.ptr = c};
    epoll_ctl(r->ep, EPOLL_CTL_ADD, c->fd, &ev);
    c->want_out = true;
    c->busy = false;
    return 0;
}

static void want_out(run *r, conn *c, bool on)
{
    if (c->want_out == on || c->fd < 0)
        return;
    struct epoll_event ev = {.events = EPOLLIN | (on ? EPOLLOUT : 0), .data.ptr = c};
    epoll_ctl(r->ep, EPOLL_CTL_MOD, c->fd, &ev);
    c->want_out = on;
}

/* A failed connection is closed and reopened 10 ms later, so a server
 * that refuses is not hammered in a loop. */
static void reset_conn(run *r, conn *c)
{
    if (c->fd >= 0) {
        epoll_ctl(r->ep, EPOLL_CTL_DEL, c->fd, NULL);
        close(c->fd);
    }
    c->fd = -1;
    if (r->recording)
        r->res->transport_errors++;
    if (c->busy)
        r->nbusy--;
    c->busy = false;
    c->retry_at = now_ns() + 10000000u;
}

static bool more_to_issue(const run *r, uint64_t now)
{
    if (r->sp->count)
        return r->issued < r->sp->count;
    return now < r->t_end;
}

/* The due time of the next open-loop request. */
static uint64_t next_due(const run *r)
{
    return r->t0 + (uint64_t)((double)r->next_due_i * 1e9 / r->sp->rate);
}

static void want_out(run *r, conn *c, bool on);

static void pump_write(run *r, conn *c)
{
    while (c->busy && c->sent < r->sp->request_len) {
        ssize_t n = write(c->fd, r->sp->request + c->sent, r->sp->request_len - c->sent);
        if (n > 0) {
            c->sent += (size_t)n;
            if (r->recording)
                r->res->bytes_sent += (uint64_t)n;
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            want_out(r, c, true);
            return;
        } else {
            reset_conn(r, c);
            return;
        }
    }
    want_out(r, c, false);
}

static void start_request(run *r, conn *c, uint64_t t_start)
{
    if (c->fd < 0)
        return;
    c->busy = true;
    r->nbusy++;
    c->sent = 0;
    c->hlen = 0;
    c->status = 0;
    c->body_left = -1;
    c->t_start = t_start;
    r->issued++;
    pump_write(r, c);
}

static void complete(run *r, conn *c, uint64_t now)
{
    c->busy = false;
    r->nbusy--;
    if (r->recording && c->t_start >= r->t_record) {
        od_hist_add(&r->res->lat, now - c->t_start);
        r->res->requests++;
        if (c->status >= 200 && c->status < 300)
            r->res->ok++;
        if (c->status > 0 && c->status < OD_LOAD_STATUSES)
            r->res->status[c->status]++;
    }
}

/* Parses the head in c->hdr once it holds "\r\n\r\n"; returns the bytes
 * of body already read past it, or -1 while incomplete, -2 on garbage. */
static long long parse_head(conn *c)
{
    char *end = memmem(c->hdr, c->hlen, "\r\n\r\n", 4);
    if (!end)
        return c->hlen == sizeof c->hdr ? -2 : -1;
    if (c->hlen < 12 || strncmp(c->hdr, "HTTP/1.", 7))
        return -2;
    c->status = atoi(c->hdr + 9);
    long long clen = 0;
    for (char *p = c->hdr; p < end; p++)
        if ((*p == '\n') && !strncasecmp(p + 1, "content-length:", 15))
            clen = atoll(p + 16);
    size_t head = (size_t)(end + 4 - c->hdr);
    c->body_left = clen - (long long)(c->hlen - head);
    return c->body_left;
}

static void start_request(run *r, conn *c, uint64_t t_start);

static void pump_read(run *r, conn *c)
{
    static char tmp[65536];
    for (int once = 0; once < 1; once++) { /* level-triggered: one read per event */
        ssize_t n = read(c->fd, tmp, sizeof tmp);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
            reset_conn(r, c);
            return;
        }
        if (n < 0)
            return;
        if (r->recording)
            r->res->bytes_received += (uint64_t)n;
        if (!c->busy)
            continue; /* nothing expected: drop */
        size_t off = 0;
        if (c->body_left < 0) { /* still in the head */
            size_t room = sizeof c->hdr - c->hlen, take = (size_t)n < room ? (size_t)n : room;
            memcpy(c->hdr + c->hlen, tmp, take);
            c->hlen += take;
            off = take;
            long long left = parse_head(c);
            if (left == -2) {
                reset_conn(r, c);
                return;
            }
            if (left == -1)
                continue;
        }
        c->body_left -= (long long)((size_t)n - off);
        if (c->body_left <= 0) {
            uint64_t now = now_ns();
            complete(r, c, now);
            if (r->sp->rate <= 0 && r->recording && more_to_issue(r, now))
                start_request(r, c, now); /* closed loop: straight on */
        }
    }
}

static void fill(run *r, uint64_t now)
{
    for (int i = 0; i < r->sp->connections; i++) {
        conn *c = &r->c[i];
        if (c->fd < 0 && now >= c->retry_at)
            open_conn(r, c);
        if (c->busy || c->fd < 0 || !more_to_issue(r, now))
            continue;
        if (r->sp->rate > 0) {
            uint64_t due = next_due(r);
            if (due > now)
                return; /* not yet */
            r->next_due_i++;
            start_request(r, c, due); /* latency from when it was due */
        } else {
            start_request(r, c, now);
        }
    }
}

int od_load_run(const od_load_spec *sp, od_load_result *res, char *err, size_t errcap)
{
    memset(res, 0, sizeof *res);
    run r = {.sp = sp, .res = res};
    r.addr.sin_family = AF_INET;
    r.addr.sin_port = htons((uint16_t)sp->port);
    if (inet_pton(AF_INET, sp->host, &r.addr.sin_addr) != 1) {
        snprintf(err, errcap, "load: the host must be a numeric IPv4 address, got '%s'", sp->host);
        return -1;
    }
    r.ep = epoll_create1(EPOLL_CLOEXEC);
    r.c = calloc((size_t)sp->connections, sizeof *r.c);
    if (r.ep < 0 || !r.c) {
        snprintf(err, errcap, "load: out of resources");
        free(r.c);
        return -1;
    }
    int probe = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int ok = probe >= 0 && connect(probe, (struct sockaddr *)&r.addr, sizeof r.addr) == 0;
    if (probe >= 0)
        close(probe);
    int opened = 0;
    for (int i = 0; ok && i < sp->connections; i++)
        opened += open_conn(&r, &r.c[i]) == 0;
    if (!opened) {
        snprintf(err, errcap, "load: cannot connect to %s:%d: %s", sp->host, sp->port, strerror(errno));
        free(r.c);
        close(r.ep);
        return -1;
    }
    /* warm-up first (not recorded), then the measured run */
    uint64_t start = now_ns();
    r.recording = sp->warmup_s <= 0;
    r.t0 = start;
    r.t_record = start + (uint64_t)(sp->warmup_s * 1e9);
    r.t_end = r.t_record + (uint64_t)(sp->duration_s * 1e9);
    uint64_t last_progress = start, hard_stop = r.t_end + (uint64_t)(sp->count ? 3600e9 : 10e9);
    struct epoll_event evs[256];
    for (;;) {
        uint64_t now = now_ns();
        if (!r.recording && now >= r.t_record) {
            r.recording = true;
            r.issued = 0;
            r.t0 = now; /* the open loop's schedule starts with the record */
            r.next_due_i = 0;
            r.t_end = now + (uint64_t)(sp->duration_s * 1e9);
            r.t_record = now;
        }
        if (r.nbusy < sp->connections)
            fill(&r, now);
        if ((r.recording && !more_to_issue(&r, now) && r.nbusy == 0) || now > hard_stop)
            break;
        int timeout_ms = 10; /* also the reconnect pace */
        if (sp->rate > 0 && more_to_issue(&r, now)) {
            uint64_t due = next_due(&r);
            timeout_ms = due > now ? (int)((due - now) / 1000000) : 0;
            if (timeout_ms > 10)
                timeout_ms = 10;
        }
        int n = epoll_wait(r.ep, evs, 256, timeout_ms);
        for (int i = 0; i < n; i++) {
            conn *c = evs[i].data.ptr;
            if (evs[i].events & (EPOLLERR | EPOLLHUP)) {
                reset_conn(&r, c);
                continue;
            }
            if (evs[i].events & EPOLLOUT)
                pump_write(&r, c);
            if (evs[i].events & EPOLLIN)
                pump_read(&r, c);
        }
        if (sp->progress && now - last_progress >= 1000000000u) {
            last_progress = now;
            double el = r.recording ? (double)(now - r.t_record) / 1e9 : 0;
            fprintf(stderr, "\r  %6.1fs  %10llu requests  %9.0f req/s  p50 %8.3f ms  p99 %8.3f ms  errors %llu   ",
                    el, (unsigned long long)res->requests, el > 0 ? (double)res->requests / el : 0.0,
                    (double)od_hist_quantile(&res->lat, 0.5) / 1e6, (double)od_hist_quantile(&res->lat, 0.99) / 1e6,
                    (unsigned long long)(res->requests - res->ok + res->transport_errors));
        }
    }
    res->elapsed_s = (double)(now_ns() - r.t_record) / 1e9;
    if (sp->progress)
        fprintf(stderr, "\n");
    for (int i = 0; i < sp->connections; i++)
        if (r.c[i].fd >= 0)
            close(r.c[i].fd);
    free(r.c);
    close(r.ep);
    return 0;
}
