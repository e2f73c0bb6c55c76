/* server.c — the libmicrohttpd side of opdispatchd: the route table, the
 * request lifecycle (state, body, limits), answers, access log.
 *
 * Invariants (see od_server.h):
 *  - Every request gets an od_req on MHD's first call; the completion
 *    callback frees it (it runs on success, abort and timeout alike).
 *  - The route, method, Content-Length (against the route's cap), content
 *    type and Inference-Header-Content-Length are all checked on the first
 *    call, before a body byte is stored; an answer queued then makes MHD
 *    close the connection instead of reading an unwanted body.
 *  - A body without Content-Length (chunked) grows up to the cap; past it
 *    the rest is discarded and the answer is 413.
 *  - Statistics for a request are recorded before its answer is queued, so
 *    a client that reads /v1/stats after its answer sees its call.
 *  - Routes that run operator calls (BODY_CALL) run on an I/O thread only
 *    when their cost is bounded by a tiny body (od_srv_call_is_cheap). Otherwise
 *    the connection is suspended, a call worker runs the handler, which
 *    stashes its answer in the request (r->async), and resumes it; the I/O
 *    thread then queues the stashed answer. So health checks and metrics
 *    are answered while kernels run.
 *  - Every connection is tracked from accept to close (NOTIFY_CONNECTION)
 *    with the phase it is in: waiting for a request line, receiving a
 *    request (request line to last body byte), or working on it. The reaper
 *    thread answers 408 and shuts down a connection whose request is not all
 *    in within --request-timeout, and shuts down one that sends no complete
 *    request line within the larger of that and --idle-timeout: a trickle of
 *    header bytes cannot hold a slot. The tracking list's lock is also held
 *    by the CLOSED callback, which MHD runs before it closes the socket, so
 *    the reaper never writes to a descriptor that was reused. At SIGTERM the
 *    same list closes every connection not working on a request at once, so
 *    the drain waits only for handlers that run.
 *  - The bytes reserved for request bodies, all connections together, stay
 *    within --max-inflight-body-bytes: a request that would pass it gets 503
 *    before anything is allocated for it.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <pthread.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "od_parallel.h"
#include "od_server.h"
#include "od_stats.h"

od_config od_cfg;
atomic_bool od_draining;
static atomic_long g_inflight;
static atomic_size_t g_body_bytes; /* reserved for bodies of requests in flight */

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

static void log_line(const char *line, size_t n)
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

static int timestamp(char *buf, size_t cap)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    size_t n = strftime(buf, cap, "%Y-%m-%dT%H:%M:%S", &tm);
    return (int)n + snprintf(buf + n, cap - n, ".%03ldZ", ts.tv_nsec / 1000000);
}

void od_log(od_log_level lvl, const char *fmt, ...)
{
    if (lvl > od_cfg.log_level)
        return;
    char line[2048];
    int n = timestamp(line, sizeof line);
    n += snprintf(line + n, sizeof line - (size_t)n, " %s ", level_names[lvl]);
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    n = m < 0 ? n : (n + m < (int)sizeof line - 1 ? n + m : (int)sizeof line - 2);
    line[n++] = '\n';
    log_line(line, (size_t)n);
}

/* ---- routes ---------------------------------------------------------------- */

#define BODY_NONE ((size_t)4096)   /* GETs may carry a small body; it is ignored */
#define BODY_SMALL ((size_t)65536)
#define BODY_CALL SIZE_MAX         /* the configured max_body_bytes; runs calls on the workers */

typedef struct route {
    const char *method;
    const char *pattern; /* segments; "{x}" captures one segment */
    od_handler handler;
    size_t body_cap;
    const char *name;    /* for statistics: "POST /v1/ops/{op}" */
    const char *help;    /* one line for GET / */
} route;

static const route routes[] = {
    {"GET", "/", od_h_index, BODY_NONE, "GET /",
     "this list"},
    {"GET", "/v1/ops", od_h_ops_list, BODY_NONE, "GET /v1/ops",
     "every operator: schema, overloads, keys with kernels"},
    {"GET", "/v1/ops/{op}", od_h_op_detail, BODY_NONE, "GET /v1/ops/{op}",
     "schema, dispatch table, registrations (?format=text: dumps)"},
    {"POST", "/v1/ops/{op}", od_h_op_call, BODY_CALL, "POST /v1/ops/{op}",
     "call an operator: {\"args\", \"kwargs\", \"device\"}"},
    {"POST", "/v1/ops/{op}/explain", od_h_op_explain, BODY_CALL, "POST /v1/ops/{op}/explain",
     "which key and kernel a call reaches, output shapes"},
    {"GET", "/v1/keys", od_h_keys, BODY_NONE, "GET /v1/keys",
     "dispatch keys, priorities, alias keys"},
    {"GET", "/v1/devices", od_h_devices, BODY_NONE, "GET /v1/devices",
     "CPU, BLAS and CUDA devices"},
    {"GET", "/v1/stats", od_h_stats, BODY_NONE, "GET /v1/stats",
     "per-operator and per-key statistics"},
    {"POST", "/v1/stats/reset", od_h_stats_reset, BODY_SMALL, "POST /v1/stats/reset",
     "reset the statistics"},
    {"GET", "/metrics", od_h_metrics, BODY_NONE, "GET /metrics",
     "Prometheus metrics"},
    {"GET", "/v2", od_h_v2_server, BODY_NONE, "GET /v2",
     "Open Inference Protocol server metadata"},
    {"GET", "/v2/health/live", od_h_v2_live, BODY_NONE, "GET /v2/health/live",
     "liveness"},
    {"GET", "/v2/health/ready", od_h_v2_ready, BODY_NONE, "GET /v2/health/ready",
     "readiness"},
    {"GET", "/v2/models/stats", od_h_v2_models_stats, BODY_NONE, "GET /v2/models/stats",
     "statistics of every model (Triton)"},
    {"POST", "/v2/repository/index", od_h_v2_repo_index, BODY_SMALL, "POST /v2/repository/index",
     "the model repository index"},
    {"GET", "/v2/models/{op}", od_h_v2_model, BODY_NONE, "GET /v2/models/{op}",
     "model metadata (each operator overload is a model)"},
    {"GET", "/v2/models/{op}/versions/{v}", od_h_v2_model, BODY_NONE, "GET /v2/models/{op}",
     "model metadata of a version (only 1)"},
    {"GET", "/v2/models/{op}/config", od_h_v2_model_config, BODY_NONE, "GET /v2/models/{op}/config",
     "model configuration (Triton)"},
    {"GET", "/v2/models/{op}/versions/{v}/config", od_h_v2_model_config, BODY_NONE, "GET /v2/models/{op}/config",
     "model configuration of a version"},
    {"GET", "/v2/models/{op}/ready", od_h_v2_model_ready, BODY_NONE, "GET /v2/models/{op}/ready",
     "model readiness"},
    {"GET", "/v2/models/{op}/versions/{v}/ready", od_h_v2_model_ready, BODY_NONE, "GET /v2/models/{op}/ready",
     "model readiness of a version"},
    {"GET", "/v2/models/{op}/stats", od_h_v2_model_stats, BODY_NONE, "GET /v2/models/{op}/stats",
     "model statistics (Triton)"},
    {"GET", "/v2/models/{op}/versions/{v}/stats", od_h_v2_model_stats, BODY_NONE, "GET /v2/models/{op}/stats",
     "model statistics of a version"},
    {"POST", "/v2/models/{op}/infer", od_h_v2_infer, BODY_CALL, "POST /v2/models/{op}/infer",
     "inference, JSON or binary tensor data"},
    {"POST", "/v2/models/{op}/versions/{v}/infer", od_h_v2_infer, BODY_CALL, "POST /v2/models/{op}/infer",
     "inference on a version"},
};
#define NROUTES ((int)(sizeof routes / sizeof routes[0]))

static const char *route_names[NROUTES];

void od_server_endpoints_json(od_buf *b)
{
    od_buf_puts(b, "[");
    for (int i = 0; i < NROUTES; i++) {
        if (i)
            od_buf_putc(b, ',');
        od_buf_puts(b, "{\"method\":");
        od_buf_json_str(b, routes[i].method);
        od_buf_puts(b, ",\"path\":");
        od_buf_json_str(b, routes[i].pattern);
        od_buf_puts(b, ",\"description\":");
        od_buf_json_str(b, routes[i].help);
        od_buf_putc(b, '}');
    }
    od_buf_putc(b, ']');
}

/* Matches path against pattern; fills captures. */
static bool match(const char *pattern, const char *path, char caps[OD_MAX_PARAMS][256])
{
    int nc = 0;
    const char *p = pattern, *u = path;
    for (int i = 0; i < OD_MAX_PARAMS; i++)
        caps[i][0] = '\0';
    while (*p && *u) {
        if (*p == '{') {
            const char *pe = strchr(p, '}');
            if (!pe)
                return false;
            const char *ue = strchr(u, '/');
            size_t n = ue ? (size_t)(ue - u) : strlen(u);
            if (n == 0 || n >= 256 || nc >= OD_MAX_PARAMS)
                return false;
            memcpy(caps[nc], u, n);
            caps[nc++][n] = '\0';
            p = pe + 1;
            u += n;
            continue;
        }
        if (*p != *u)
            return false;
        p++;
        u++;
    }
    /* a trailing slash is tolerated ("/v1/ops/") */
    if (*u == '/' && u[1] == '\0' && u != path)
        u++;
    return *p == '\0' && *u == '\0';
}

/* ---- answers ----------------------------------------------------------------- */

static void record_route(od_req *r)
{
    od_stats_route(r->route, r->status, od_now_ns() - r->t0);
}

static void queue_now(od_req *r, int status, struct MHD_Response *resp)
{
    if (MHD_queue_response(r->conn, (unsigned)status, resp) != MHD_YES)
        od_log(OD_LOG_WARN, "%s %s: could not queue the response", r->method, r->path);
    MHD_destroy_response(resp);
}

/* Test hook, like SQLite's fault injection: with OD_FAULT_RESPONSES=N in
 * the environment every Nth answer "cannot be created", as under memory
 * pressure, so the tests reach the path below on purpose. */
static unsigned g_fault_every;
static atomic_uint g_fault_count;

static void queue(od_req *r, int status, struct MHD_Response *resp, size_t bytes)
{
    r->responded = true;
    r->status = status;
    if (resp && g_fault_every && atomic_fetch_add(&g_fault_count, 1) % g_fault_every == 0) {
        MHD_destroy_response(resp);
        resp = NULL;
    }
    if (!resp) {
        /* no answer can be made: the connection is closed instead (the
         * request is over either way, so nothing reads its state again) */
        od_log(OD_LOG_ERROR, "cannot create a response (out of memory)");
        r->failed = true;
        record_route(r);
        return;
    }
    r->resp_bytes = bytes;
    record_route(r);
    if (atomic_load_explicit(&od_draining, memory_order_relaxed))
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close"); /* let keep-alive clients go */
    if (r->async) { /* on a call worker: the I/O thread queues it after the resume */
        r->stash = resp;
        r->stash_status = status;
        return;
    }
    queue_now(r, status, resp);
}

void od_respond_buf(od_req *r, int status, const char *ctype, od_buf *b)
{
    if (r->responded) {
        od_buf_free(b);
        return;
    }
    if (b->oom) {
        bool over = b->over;
        size_t limit = b->limit;
        od_buf_free(b);
        if (over)
            od_respond_error(r, OD_ETOOLARGE, "the response grew past its limit of %zu bytes",
                             limit);
        else
            od_respond_error(r, OD_ENOMEM, "out of memory building the response");
        return;
    }
    size_t len = 0;
    char *data = od_buf_steal(b, &len);
    if (!data) {
        od_respond_error(r, OD_ENOMEM, "out of memory building the response");
        return;
    }
    struct MHD_Response *resp = MHD_create_response_from_buffer_with_free_callback(len, data, free);
    if (!resp) {
        free(data);
        queue(r, status, NULL, 0); /* marks the request failed: its connection closes */
        return;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    queue(r, status, resp, len);
}

void od_respond_empty(od_req *r, int status)
{
    if (r->responded)
        return;
    struct MHD_Response *resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    queue(r, status, resp, 0);
}

static void respond_error_msg(od_req *r, od_status st, const char *msg)
{
    if (r->responded)
        return;
    int status = od_status_http(st);
    size_t len = 0;
    /* /v2 speaks the Open Inference Protocol: {"error": "<message>"} */
    char *body = r->oip ? od_oip_error_body(msg, &len) : od_error_body(od_status_code(st), msg, &len);
    if (!body) {
        static const char oom[] = "{\"error\":{\"code\":\"out_of_memory\",\"message\":\"out of memory\"}}";
        static const char oom_oip[] = "{\"error\":\"out of memory\"}";
        const char *b = r->oip ? oom_oip : oom;
        size_t bl = r->oip ? sizeof oom_oip - 1 : sizeof oom - 1;
        struct MHD_Response *resp = MHD_create_response_from_buffer(bl, (void *)b, MHD_RESPMEM_PERSISTENT);
        if (resp)
            MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
        queue(r, od_status_http(OD_ENOMEM), resp, bl);
        return;
    }
    struct MHD_Response *resp = MHD_create_response_from_buffer_with_free_callback(len, body, free);
    if (!resp) {
        free(body);
        queue(r, status, NULL, 0); /* marks the request failed: its connection closes */
        return;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    if (st == OD_EMETHOD) {
        char allow[64] = "";
        for (int i = 0; i < NROUTES; i++) {
            char caps[OD_MAX_PARAMS][256];
            if (match(routes[i].pattern, r->path, caps) && !strstr(allow, routes[i].method)) {
                if (allow[0])
                    strcat(allow, ", ");
                strcat(allow, routes[i].method);
                if (!strcmp(routes[i].method, "GET"))
                    strcat(allow, ", HEAD");
            }
        }
        MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, allow);
    }
    if (st == OD_EBUSY && r->busy)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, "1");
    if (st == OD_ETOOLARGE || st == OD_EREQTIMEOUT || (r->body_cap && r->too_large))
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
    queue(r, status, resp, len);
}

void od_respond_error(od_req *r, od_status st, const char *fmt, ...)
{
    char msg[OD_ERROR_MSG_MAX + 256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    respond_error_msg(r, st == OD_OK ? OD_EINTERNAL : st, msg);
}

void od_respond_od_error(od_req *r, const od_error *err)
{
    od_status st = err->status == OD_OK ? OD_EINTERNAL : err->status;
    respond_error_msg(r, st, err->message[0] ? err->message : "unknown error");
}

typedef struct bin_parts {
    char *head;
    int n;
    od_tensor *t[OD_MAX_RETURNS];
} bin_parts;

static void bin_parts_free(void *cls)
{
    bin_parts *p = cls;
    free(p->head);
    for (int i = 0; i < p->n; i++)
        od_tensor_release(p->t[i]);
    free(p);
}

void od_respond_binary(od_req *r, int status, od_buf *head, od_tensor **tensors, int n)
{
    bin_parts *p = calloc(1, sizeof *p);
    if (r->responded || !p || head->oom || n > OD_MAX_RETURNS) {
        free(p);
        od_buf_free(head);
        for (int i = 0; i < n; i++)
            od_tensor_release(tensors[i]);
        if (!r->responded)
            od_respond_error(r, OD_ENOMEM, "out of memory building the response");
        return;
    }
    size_t hlen = 0;
    p->head = od_buf_steal(head, &hlen);
    struct MHD_IoVec iov[OD_MAX_RETURNS + 1];
    int niov = 0;
    iov[niov].iov_base = p->head;
    iov[niov++].iov_len = hlen;
    size_t total = hlen;
    for (int i = 0; i < n; i++) {
        p->t[p->n++] = tensors[i];
        size_t nb = od_tensor_nbytes(tensors[i]);
        if (nb == 0)
            continue;
        iov[niov].iov_base = od_tensor_data(tensors[i]);
        iov[niov++].iov_len = nb;
        total += nb;
    }
    struct MHD_Response *resp = p->head ? MHD_create_response_from_iovec(iov, (unsigned)niov, bin_parts_free, p) : NULL;
    if (!resp) {
        bin_parts_free(p);
        od_respond_error(r, OD_ENOMEM, "out of memory building the response");
        return;
    }
    char hl[32];
    snprintf(hl, sizeof hl, "%zu", hlen);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/octet-stream");
    MHD_add_response_header(resp, "Inference-Header-Content-Length", hl);
    queue(r, status, resp, total);
}

const char *od_req_query(od_req *r, const char *key)
{
    return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, key);
}

const char *od_req_header(od_req *r, const char *name)
{
    return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}

/* ---- connection tracking and the reaper ----------------------------------------- */

enum { PH_WAIT, PH_RECV, PH_WORK };

typedef struct conn_track {
    struct conn_track *prev, *next;
    int fd;
    int phase;
    uint64_t since; /* when the phase began */
    bool killed;
} conn_track;

static struct {
    pthread_mutex_t m;
    pthread_cond_t cv;
    conn_track *head;
    bool stop;
    pthread_t thread;
    bool running;
} T = {.m = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static conn_track *track_of(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

static void set_phase(struct MHD_Connection *c, int phase)
{
    conn_track *t = track_of(c);
    if (!t)
        return;
    pthread_mutex_lock(&T.m);
    t->phase = phase;
    t->since = od_now_ns();
    pthread_mutex_unlock(&T.m);
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    (void)cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        conn_track *t = calloc(1, sizeof *t);
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (!t || !ci) { /* untracked: MHD's idle timeout still applies */
            free(t);
            return;
        }
        t->fd = ci->connect_fd;
        t->phase = PH_WAIT;
        t->since = od_now_ns();
        pthread_mutex_lock(&T.m);
        t->next = T.head;
        if (T.head)
            T.head->prev = t;
        T.head = t;
        pthread_mutex_unlock(&T.m);
        *socket_context = t;
    } else if (code == MHD_CONNECTION_NOTIFY_CLOSED && *socket_context) {
        conn_track *t = *socket_context;
        pthread_mutex_lock(&T.m);
        if (t->prev)
            t->prev->next = t->next;
        else
            T.head = t->next;
        if (t->next)
            t->next->prev = t->prev;
        pthread_mutex_unlock(&T.m);
        free(t);
        *socket_context = NULL;
    }
}

/* The request line is in: the request's clock starts. */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *c)
{
    (void)cls;
    (void)uri;
    set_phase(c, PH_RECV);
    return NULL;
}

/* An error answer written straight to a connection MHD is reading from
 * (msg: plain text, no quotes), then the connection is shut down; MHD sees
 * the end of the stream and closes it. Caller holds T.m. */
static void answer_and_shut(conn_track *t, od_status st, const char *msg)
{
    if (t->phase == PH_RECV) {
        char body[256], out[512];
        int bl = snprintf(body, sizeof body, "{\"error\":{\"code\":\"%s\",\"message\":\"%s\"}}",
                          od_status_code(st), msg);
        int n = snprintf(out, sizeof out,
                         "HTTP/1.1 %d %s\r\nConnection: close\r\nContent-Type: application/json\r\n"
                         "Content-Length: %d\r\n\r\n%s",
                         od_status_http(st), st == OD_EREQTIMEOUT ? "Request Timeout" : "Service Unavailable",
                         bl, body);
        if (bl > 0 && bl < (int)sizeof body && n > 0 && n < (int)sizeof out)
            (void)send(t->fd, out, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL); /* best effort */
    }
    shutdown(t->fd, SHUT_RDWR);
    t->killed = true;
}

static void *reaper_main(void *unused)
{
    (void)unused;
    pthread_mutex_lock(&T.m);
    while (!T.stop) {
        uint64_t now = od_now_ns();
        uint64_t recv_ns = (uint64_t)od_cfg.request_timeout_s * 1000000000u;
        unsigned wait_s = od_cfg.request_timeout_s > od_cfg.idle_timeout_s ? od_cfg.request_timeout_s
                                                                           : od_cfg.idle_timeout_s;
        uint64_t wait_ns = (uint64_t)wait_s * 1000000000u;
        for (conn_track *t = T.head; t; t = t->next) {
            if (t->killed || t->phase == PH_WORK)
                continue;
            uint64_t limit = t->phase == PH_RECV ? recv_ns : wait_ns;
            if (!limit || now - t->since <= limit)
                continue;
            od_log(OD_LOG_WARN, "closing a connection that %s within %u s", t->phase == PH_RECV
                   ? "did not send its whole request" : "sent no complete request line",
                   t->phase == PH_RECV ? od_cfg.request_timeout_s : wait_s);
            answer_and_shut(t, OD_EREQTIMEOUT, "the request was not received within --request-timeout");
        }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 250 * 1000 * 1000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&T.cv, &T.m, &ts);
    }
    pthread_mutex_unlock(&T.m);
    return NULL;
}

/* ---- lifecycle ----------------------------------------------------------------- */

static bool parse_size(const char *s, size_t *out)
{
    if (!s || !*s)
        return false;
    size_t v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return false;
        if (v > (SIZE_MAX - 9) / 10)
            return false;
        v = v * 10 + (size_t)(*s - '0');
    }
    *out = v;
    return true;
}

/* application/json, application/octet-stream, or none (curl's -d sends
 * x-www-form-urlencoded: that is refused, so a wrong type never parses). */
static bool content_type_ok(const char *ct, bool binary)
{
    if (!ct || !*ct)
        return true;
    size_t n = strcspn(ct, ";");
    while (n > 0 && (ct[n - 1] == ' ' || ct[n - 1] == '\t'))
        n--;
    if (n == 16 && !strncasecmp(ct, "application/json", 16))
        return true;
    if (n == 24 && !strncasecmp(ct, "application/octet-stream", 24))
        return true;
    (void)binary;
    return false;
}

/* The client's address, formatted on first use (only the access log and
 * warnings need it, so a request that logs nothing never pays for it). */
static void client_ip(struct MHD_Connection *c, char *buf, size_t cap);
static const char *req_ip(od_req *r)
{
    if (!r->ip_done) {
        client_ip(r->conn, r->ip, sizeof r->ip);
        r->ip_done = true;
    }
    return r->ip;
}

static void client_ip(struct MHD_Connection *c, char *buf, size_t cap)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    buf[0] = '\0';
    if (!ci || !ci->client_addr)
        return;
    const struct sockaddr *sa = ci->client_addr;
    if (sa->sa_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, buf, (socklen_t)cap);
    else if (sa->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, buf, (socklen_t)cap);
}

/* Raises the request's share of the in-flight body budget to total bytes;
 * false (and nothing reserved) when that would pass the cap. */
static bool body_reserve(od_req *r, size_t total)
{
    if (total <= r->body_reserved)
        return true;
    size_t add = total - r->body_reserved, cap = od_cfg.max_inflight_body_bytes;
    size_t cur = atomic_fetch_add(&g_body_bytes, add);
    if (cap && (cur + add > cap || cur + add < cur)) {
        atomic_fetch_sub(&g_body_bytes, add);
        return false;
    }
    r->body_reserved = total;
    return true;
}

/* First call: route, method, limits. Returns false when it answered. */
static bool begin_request(od_req *r, const char *url, const char *method)
{
    /* bounded copies, cut short like snprintf would (no printf per request) */
    size_t ml = strnlen(method, sizeof r->method - 1), ul = strnlen(url, sizeof r->path - 1);
    memcpy(r->method, method, ml);
    r->method[ml] = '\0';
    memcpy(r->path, url, ul);
    r->path[ul] = '\0';
    for (char *c = r->path; *c; c++) /* the access log gets one line per request, always */
        if ((unsigned char)*c < 0x20 || *c == 0x7f || *c == ' ')
            *c = '?';
    for (char *c = r->method; *c; c++)
        if ((unsigned char)*c <= 0x20 || *c == 0x7f)
            *c = '?';
    r->route = -1;
    r->oip = !strncmp(url, "/v2", 3) && (url[3] == '\0' || url[3] == '/');
    bool is_head = !strcmp(method, "HEAD");
    bool path_known = false;
    for (int i = 0; i < NROUTES; i++) {
        char caps[OD_MAX_PARAMS][256];
        if (!match(routes[i].pattern, url, caps))
            continue;
        path_known = true;
        if (strcmp(routes[i].method, method) != 0 && !(is_head && !strcmp(routes[i].method, "GET")))
            continue;
        r->route = i;
        memcpy(r->params, caps, sizeof caps);
        break;
    }
    if (strlen(url) >= sizeof r->path) {
        od_respond_error(r, OD_ENOTFOUND, "path too long (%zu bytes)", strlen(url));
        return false;
    }
    if (r->route < 0) {
        if (path_known)
            od_respond_error(r, OD_EMETHOD, "method %s is not allowed on %s", method, url);
        else
            od_respond_error(r, OD_ENOTFOUND, "no route for %s %s (see GET / for the endpoints)",
                             method, url);
        return false;
    }
    const route *rt = &routes[r->route];
    r->body_cap = rt->body_cap == BODY_CALL ? od_cfg.max_body_bytes : rt->body_cap;
    const char *cl = od_req_header(r, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl) {
        if (!parse_size(cl, &r->content_length)) {
            od_respond_error(r, OD_EINVAL, "invalid Content-Length '%.32s'", cl);
            return false;
        }
        r->has_cl = true;
        if (r->content_length > r->body_cap) {
            r->too_large = true;
            od_respond_error(r, OD_ETOOLARGE,
                             "request body of %zu bytes exceeds the limit of %zu bytes for %s",
                             r->content_length, r->body_cap, rt->name);
            return false;
        }
    }
    bool has_body = !r->has_cl || r->content_length > 0;
    bool takes_body = rt->body_cap > BODY_NONE;
    if (takes_body && has_body) {
        const char *ihcl = od_req_header(r, "Inference-Header-Content-Length");
        if (ihcl) {
            if (!parse_size(ihcl, &r->hdr_len)) {
                od_respond_error(r, OD_EINVAL,
                                 "invalid Inference-Header-Content-Length '%.32s'", ihcl);
                return false;
            }
            if (r->has_cl && r->hdr_len > r->content_length) {
                od_respond_error(r, OD_EINVAL,
                                 "Inference-Header-Content-Length %zu is larger than the body "
                                 "(Content-Length %zu)",
                                 r->hdr_len, r->content_length);
                return false;
            }
            r->binary = true;
        }
        const char *ct = od_req_header(r, MHD_HTTP_HEADER_CONTENT_TYPE);
        if (!content_type_ok(ct, r->binary)) {
            od_respond_error(r, OD_EMEDIATYPE,
                             "Content-Type '%.64s' is not supported: send application/json, or "
                             "application/octet-stream with Inference-Header-Content-Length for "
                             "binary tensor data",
                             ct);
            return false;
        }
    }
    size_t cap = r->has_cl ? r->content_length : 16384;
    if (cap > r->body_cap)
        cap = r->body_cap;
    if (!body_reserve(r, cap)) {
        r->busy = true;
        od_log(OD_LOG_WARN, "%s %s from %s: %zu-byte body refused, %zu bytes of bodies in flight "
               "(--max-inflight-body-bytes %zu)", r->method, r->path, req_ip(r), cap,
               atomic_load(&g_body_bytes), od_cfg.max_inflight_body_bytes);
        od_respond_error(r, OD_EBUSY,
                         "the server holds its limit of request bodies in flight; retry shortly");
        return false;
    }
    /* Not touched until bytes arrive (a fresh block is untouched memory), so
     * a client that claims a large body and sends nothing costs no RSS. */
    r->body = od_blob_new(cap, r->binary ? r->hdr_len : 0);
    if (!r->body) {
        od_respond_error(r, OD_ENOMEM, "cannot allocate %zu bytes for the body", cap);
        return false;
    }
    return true;
}

static void run_handler(od_req *r)
{
    routes[r->route].handler(r);
    if (!r->responded)
        od_respond_error(r, OD_EINTERNAL, "the handler gave no answer");
}

/* A call worker's job: the handler, then hand the connection back. */
static void run_on_worker(void *arg)
{
    od_req *r = arg;
    struct MHD_Connection *conn = r->conn;
    if (od_workers_stopping() && atomic_load(&od_draining))
        od_respond_error(r, OD_EBUSY, "shutting down: the call was not started");
    else
        run_handler(r);
    MHD_resume_connection(conn); /* r belongs to the I/O thread from here on */
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size, void **con_cls)
{
    (void)cls;
    (void)version;
    od_req *r = *con_cls;
    if (!r) {
        r = calloc(1, sizeof *r);
        if (!r)
            return MHD_NO;
        atomic_fetch_add(&g_inflight, 1);
        r->conn = conn;
        r->t0 = od_now_ns();
        *con_cls = r;
        begin_request(r, url, method);
        return r->failed ? MHD_NO : MHD_YES;
    }
    if (r->stash) { /* back from a call worker with its answer */
        struct MHD_Response *resp = r->stash;
        r->stash = NULL;
        queue_now(r, r->stash_status, resp);
        return MHD_YES;
    }
    if (r->failed)
        return MHD_NO;
    if (*upload_data_size) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        if (r->responded || r->too_large || r->busy)
            return MHD_YES; /* discarding */
        od_blob *b = r->body;
        if (n > r->body_cap - b->len) {
            r->too_large = true;
            return MHD_YES;
        }
        if (b->len + n > b->cap) {
            size_t want = b->cap ? b->cap : 4096;
            while (want < b->len + n && want <= SIZE_MAX / 2)
                want *= 2;
            if (!body_reserve(r, want)) {
                r->busy = true;
                return MHD_YES; /* discarding; 503 once it is all in */
            }
            if (!od_blob_grow(b, b->len + n)) {
                r->too_large = true;
                return MHD_YES;
            }
        }
        memcpy(b->data + b->len, upload_data, n);
        b->len += n;
        b->data[b->len] = '\0';
        return MHD_YES;
    }
    set_phase(conn, PH_WORK); /* all in: the reaper leaves it to the call's own budget */
    if (r->responded)
        return MHD_YES;
    if (r->too_large) {
        od_respond_error(r, OD_ETOOLARGE, "request body exceeds the limit of %zu bytes for %s",
                         r->body_cap, routes[r->route].name);
        return MHD_YES;
    }
    if (r->busy) {
        od_respond_error(r, OD_EBUSY,
                         "the server holds its limit of request bodies in flight; retry shortly");
        return MHD_YES;
    }
    if (r->binary && r->hdr_len > r->body->len) {
        od_respond_error(r, OD_EINVAL,
                         "Inference-Header-Content-Length %zu is larger than the body (%zu bytes)",
                         r->hdr_len, r->body->len);
        return MHD_YES;
    }
    if (routes[r->route].body_cap == BODY_CALL && od_cfg.call_workers > 0 &&
        !od_srv_call_is_cheap(r->params[0], r->body->len)) {
        /* Suspend before the job can possibly resume it. */
        r->async = true;
        MHD_suspend_connection(conn);
        if (!od_workers_submit(run_on_worker, r)) {
            od_respond_error(r, OD_EBUSY,
                             od_workers_stopping() ? "shutting down: not accepting new calls"
                                                   : "every call worker is busy and the queue is full");
            MHD_resume_connection(conn);
        }
        return MHD_YES;
    }
    run_handler(r);
    return MHD_YES;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)conn;
    od_req *r = *con_cls;
    if (!r)
        return;
    *con_cls = NULL;
    uint64_t us = (od_now_ns() - r->t0) / 1000;
    if (!r->responded)
        record_route(r); /* aborted or timed out before an answer */
    if (od_cfg.access_log && od_cfg.log_level >= OD_LOG_INFO) {
        static const char *why[] = {"ok", "error", "timeout", "shutdown", "read-error", "client-abort"};
        char line[1024], ts[64];
        timestamp(ts, sizeof ts);
        int n = snprintf(line, sizeof line, "%s access ip=%s method=%s path=%s status=%d bytes=%zu us=%llu%s%s\n",
                         ts, req_ip(r)[0] ? r->ip : "-", r->method, r->path, r->status, r->resp_bytes,
                         (unsigned long long)us, toe == MHD_REQUEST_TERMINATED_COMPLETED_OK ? "" : " end=",
                         toe == MHD_REQUEST_TERMINATED_COMPLETED_OK ? ""
                         : (unsigned)toe < sizeof why / sizeof why[0] ? why[toe] : "?");
        if (n > 0)
            log_line(line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
    }
    if (r->stash) /* closed before the stashed answer could go out */
        MHD_destroy_response(r->stash);
    od_blob_release(r->body);
    if (r->body_reserved)
        atomic_fetch_sub(&g_body_bytes, r->body_reserved);
    free(r);
    set_phase(conn, PH_WAIT); /* keep-alive: the next request's clock */
    atomic_fetch_sub(&g_inflight, 1);
}

static void mhd_logger(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char msg[1024];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    while (n && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
        msg[--n] = '\0';
    od_log(OD_LOG_WARN, "libmicrohttpd: %s", msg);
}

/* ---- start, drain, stop ---------------------------------------------------------- */

static struct MHD_Daemon *g_daemon;

long od_server_inflight(void) { return atomic_load(&g_inflight); }

size_t od_server_body_bytes(void) { return atomic_load(&g_body_bytes); }

int od_server_start(int *bound_port)
{
    for (int i = 0; i < NROUTES; i++)
        route_names[i] = routes[i].name;
    const char *fault = getenv("OD_FAULT_RESPONSES");
    g_fault_every = fault ? (unsigned)strtoul(fault, NULL, 10) : 0;
    if (g_fault_every)
        od_log(OD_LOG_WARN, "OD_FAULT_RESPONSES=%u: every %u-th answer will fail (a test hook)",
               g_fault_every, g_fault_every);
    od_stats_init(od_op_count(), route_names, NROUTES);

    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    /* poll(), not epoll: MHD_quiesce_daemon on an epoll daemon with worker
     * threads races the workers' own removal of the listen socket and can
     * MHD_PANIC (abort) at SIGTERM (an open libmicrohttpd defect, seen here
     * as exit status -6 under ASan). Each worker polls only its own share
     * of the connections, so poll() costs nothing measurable at our limits. */
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ITC |
                     MHD_USE_ERROR_LOG | MHD_ALLOW_SUSPEND_RESUME;
    if (od_cfg.call_workers > 0 && od_workers_start(od_cfg.call_workers, od_cfg.max_connections + 16u) != 0) {
        od_log(OD_LOG_ERROR, "cannot start %d call worker threads", od_cfg.call_workers);
        return -1;
    }
    struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
    const char *host = od_cfg.host;
    if (!strcmp(host, "localhost"))
        host = "127.0.0.1";
    if (inet_pton(AF_INET, host, &s4->sin_addr) == 1) {
        s4->sin_family = AF_INET;
        s4->sin_port = htons((uint16_t)od_cfg.port);
    } else if (inet_pton(AF_INET6, host, &s6->sin6_addr) == 1) {
        s6->sin6_family = AF_INET6;
        s6->sin6_port = htons((uint16_t)od_cfg.port);
        flags |= MHD_USE_IPv6;
    } else {
        od_log(OD_LOG_ERROR, "--host '%s' is not an IPv4 or IPv6 address", od_cfg.host);
        return -1;
    }
    g_daemon = MHD_start_daemon(
        flags, (uint16_t)od_cfg.port, NULL, NULL, on_request, NULL,
        MHD_OPTION_EXTERNAL_LOGGER, mhd_logger, NULL,
        MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
        MHD_OPTION_THREAD_POOL_SIZE, (unsigned)(od_cfg.threads > 0 ? od_cfg.threads : 1),
        MHD_OPTION_CONNECTION_LIMIT, od_cfg.max_connections,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, od_cfg.max_connections_per_ip,
        MHD_OPTION_CONNECTION_TIMEOUT, od_cfg.idle_timeout_s,
        /* MHD zeroes a connection's whole pool after every request, so the
         * pool's size is a per-request cost: 32 KiB (MHD's default) keeps
         * that small; big bodies still stream through in pool-sized reads. */
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)32 * 1024,
        MHD_OPTION_LISTEN_BACKLOG_SIZE, 1024u,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL,
        MHD_OPTION_NOTIFY_CONNECTION, on_connection, NULL,
        MHD_OPTION_URI_LOG_CALLBACK, on_uri, NULL,
        MHD_OPTION_END);
    if (!g_daemon) {
        od_log(OD_LOG_ERROR, "cannot listen on %s:%d (address in use, or not allowed)", od_cfg.host,
               od_cfg.port);
        return -1;
    }
    if (pthread_create(&T.thread, NULL, reaper_main, NULL) == 0)
        T.running = true;
    else
        od_log(OD_LOG_WARN, "no reaper thread: slow requests are bounded by --idle-timeout only");
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(g_daemon, MHD_DAEMON_INFO_BIND_PORT);
    *bound_port = di ? di->port : od_cfg.port;
    return 0;
}

void od_server_quiesce(void)
{
    atomic_store(&od_draining, true);
    MHD_socket s = MHD_quiesce_daemon(g_daemon);
    if (s != MHD_INVALID_SOCKET)
        close(s);
    /* Only requests whose handler runs are worth waiting for: one still
     * arriving (a Content-Length never met, a half-closed client) or an
     * idle keep-alive connection would hold the drain for its whole timeout. */
    int n = 0;
    pthread_mutex_lock(&T.m);
    for (conn_track *t = T.head; t; t = t->next)
        if (!t->killed && t->phase != PH_WORK) {
            answer_and_shut(t, OD_EBUSY, "shutting down: the request was not complete");
            n++;
        }
    pthread_mutex_unlock(&T.m);
    if (n)
        od_log(OD_LOG_INFO, "drain: closed %d connection(s) still receiving or idle", n);
}

void od_server_stop(void)
{
    /* Calls still running are cancelled at their next chunk, queued ones
     * are answered 503, and every suspended connection is resumed before
     * the daemon stops (MHD must not stop with suspended connections). */
    od_cancel_all();
    od_workers_stop();
    if (T.running) {
        pthread_mutex_lock(&T.m);
        T.stop = true;
        pthread_cond_signal(&T.cv);
        pthread_mutex_unlock(&T.m);
        pthread_join(T.thread, NULL);
        T.running = false;
    }
    if (g_daemon)
        MHD_stop_daemon(g_daemon);
    g_daemon = NULL;
    od_stats_shutdown();
}
