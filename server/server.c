/* server.c — the route table and the request lifecycle (state, body,
 * limits, hand-off to the call workers, access log). Answers are in
 * respond.c, the daemon and connection tracking in daemon.c.
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
 *  - Routes that run operator calls (BODY_CALL) run on an I/O thread only
 *    when their cost is bounded by a tiny body (od_srv_call_is_cheap). Otherwise
 *    the connection is suspended, a call worker runs the handler, which
 *    stashes its answer in the request (r->async), and resumes it; the I/O
 *    thread then queues the stashed answer. So health checks and metrics
 *    are answered while kernels run.
 *  - The bytes reserved for request bodies, all connections together, stay
 *    within --max-inflight-body-bytes: a request that would pass it gets 503
 *    before anything is allocated for it.
 *  - Large bodies are read and worked on within --max-active-body-bytes; a
 *    request past it waits its turn (at most --max-body-wait-ms) with its
 *    connection suspended and no body buffer (the admission queue below).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "od_stats.h"
#include "server_int.h"

static atomic_long g_inflight;
static atomic_size_t g_body_bytes; /* reserved for bodies of requests in flight */

/* ---- routes ---------------------------------------------------------------- */

#define BODY_NONE ((size_t)4096)   /* GETs may carry a small body; it is ignored */
#define BODY_SMALL ((size_t)65536)
#define BODY_CALL SIZE_MAX         /* the configured max_body_bytes; runs calls on the workers */

/* The scope a route needs when a token file is loaded (without one every
 * route is open). OPEN: health probes and the dashboard's own files, which
 * load balancers, kubelets and browsers fetch without credentials.
 * OWN_SESSION: call for the session the request itself names (X-OD-Session
 * equal to {id}), admin for any other. */
#define OPEN 0u
#define READ ((unsigned)OD_SCOPE_READ)
#define CALL ((unsigned)OD_SCOPE_CALL)
#define ADMIN ((unsigned)OD_SCOPE_ADMIN)
#define OWN_SESSION 0x100u

typedef struct route {
    const char *method;
    const char *pattern; /* segments; "{x}" captures one segment */
    od_handler handler;
    size_t body_cap;
    unsigned scope;      /* OPEN, READ, CALL, ADMIN or OWN_SESSION */
    const char *name;    /* for statistics: "POST /v1/ops/{op}" */
    const char *help;    /* one line for GET / */
} route;

static const route routes[] = {
    {"GET", "/", od_h_index, BODY_NONE, OPEN, "GET /",
     "this list (a browser gets the dashboard)"},
    {"GET", "/web/{file}", od_h_web_file, BODY_NONE, OPEN, "GET /web/{file}",
     "the dashboard's files"},
    {"GET", "/web/vendor/{file}", od_h_web_vendor, BODY_NONE, OPEN, "GET /web/vendor/{file}",
     "Chart.js, from Debian's libjs-chart.js"},
    {"GET", "/v1/ops", od_h_ops_list, BODY_NONE, READ, "GET /v1/ops",
     "every operator: schema, overloads, keys with kernels"},
    {"GET", "/v1/ops/{op}", od_h_op_detail, BODY_NONE, READ, "GET /v1/ops/{op}",
     "schema, dispatch table, registrations (?format=text: dumps)"},
    {"POST", "/v1/ops/{op}", od_h_op_call, BODY_CALL, CALL, "POST /v1/ops/{op}",
     "call an operator: {\"args\", \"kwargs\", \"device\"}"},
    {"POST", "/v1/ops/{op}/explain", od_h_op_explain, BODY_CALL, CALL, "POST /v1/ops/{op}/explain",
     "which key and kernel a call reaches, output shapes"},
    {"GET", "/v1/keys", od_h_keys, BODY_NONE, READ, "GET /v1/keys",
     "dispatch keys, priorities, alias keys"},
    {"GET", "/v1/devices", od_h_devices, BODY_NONE, READ, "GET /v1/devices",
     "CPU, BLAS and CUDA devices"},
    {"POST", "/v1/bench", od_h_bench, BODY_CALL, ADMIN, "POST /v1/bench",
     "run an operator N times on server-side inputs: kernel time, GFLOP/s, GB/s against the "
     "device's measured ceilings (--enable-bench)"},
    {"POST", "/v1/load", od_h_load_start, BODY_CALL, ADMIN, "POST /v1/load",
     "start a bounded load run by the server (--enable-bench; one at a time)"},
    {"GET", "/v1/load", od_h_load_get, BODY_NONE, READ, "GET /v1/load",
     "the load's state, throughput, latency percentiles and per-second series"},
    {"DELETE", "/v1/load", od_h_load_stop, BODY_NONE, ADMIN, "DELETE /v1/load",
     "stop the load"},
    {"POST", "/v1/run", od_h_run, BODY_CALL, CALL, "POST /v1/run",
     "a program: {\"steps\": [{\"op\", \"args\"}...], \"outputs\": [\"$k\"]} in one round trip"},
    {"POST", "/v1/tensors", od_h_tensor_put, BODY_CALL, CALL, "POST /v1/tensors",
     "store a tensor in the session: {\"tensor\", \"device\"} -> its id"},
    {"GET", "/v1/tensors", od_h_tensor_list, BODY_NONE, CALL, "GET /v1/tensors",
     "the session's stored tensors"},
    {"GET", "/v1/tensors/{id}", od_h_tensor_get, BODY_NONE, CALL, "GET /v1/tensors/{id}",
     "a stored tensor (?meta=1: metadata; binary by Accept or ?binary=1)"},
    {"POST", "/v1/tensors/{id}/backward", od_h_tensor_backward, BODY_CALL, CALL, "POST /v1/tensors/{id}/backward",
     "run a stored tensor's graph backward: {\"gradient\", \"retain_graph\"} -> the leaves' .grad ids"},
    {"DELETE", "/v1/tensors/{id}", od_h_tensor_delete, BODY_NONE, CALL, "DELETE /v1/tensors/{id}",
     "free a stored tensor"},
    {"POST", "/v1/sessions", od_h_session_new, BODY_SMALL, CALL, "POST /v1/sessions",
     "a new session with a random id (send it as X-OD-Session)"},
    {"GET", "/v1/sessions/{id}", od_h_session_get, BODY_NONE, OWN_SESSION, "GET /v1/sessions/{id}",
     "a session's tensors, bytes per device and budget"},
    {"DELETE", "/v1/sessions/{id}", od_h_session_delete, BODY_NONE, OWN_SESSION, "DELETE /v1/sessions/{id}",
     "free a session and everything in it"},
    {"GET", "/v1/stats", od_h_stats, BODY_NONE, READ, "GET /v1/stats",
     "per-operator and per-key statistics"},
    {"POST", "/v1/stats/reset", od_h_stats_reset, BODY_SMALL, ADMIN, "POST /v1/stats/reset",
     "reset the statistics"},
    {"GET", "/metrics", od_h_metrics, BODY_NONE, READ, "GET /metrics",
     "Prometheus metrics"},
    {"GET", "/v2", od_h_v2_server, BODY_NONE, READ, "GET /v2",
     "Open Inference Protocol server metadata"},
    {"GET", "/v2/health/live", od_h_v2_live, BODY_NONE, OPEN, "GET /v2/health/live",
     "liveness"},
    {"GET", "/v2/health/ready", od_h_v2_ready, BODY_NONE, OPEN, "GET /v2/health/ready",
     "readiness"},
    {"GET", "/v2/models/stats", od_h_v2_models_stats, BODY_NONE, READ, "GET /v2/models/stats",
     "statistics of every model (Triton)"},
    {"POST", "/v2/repository/index", od_h_v2_repo_index, BODY_SMALL, READ, "POST /v2/repository/index",
     "the model repository index"},
    {"GET", "/v2/models/{op}", od_h_v2_model, BODY_NONE, READ, "GET /v2/models/{op}",
     "model metadata (each operator overload is a model)"},
    {"GET", "/v2/models/{op}/versions/{v}", od_h_v2_model, BODY_NONE, READ, "GET /v2/models/{op}",
     "model metadata of a version (only 1)"},
    {"GET", "/v2/models/{op}/config", od_h_v2_model_config, BODY_NONE, READ, "GET /v2/models/{op}/config",
     "model configuration (Triton)"},
    {"GET", "/v2/models/{op}/versions/{v}/config", od_h_v2_model_config, BODY_NONE, READ, "GET /v2/models/{op}/config",
     "model configuration of a version"},
    {"GET", "/v2/models/{op}/ready", od_h_v2_model_ready, BODY_NONE, READ, "GET /v2/models/{op}/ready",
     "model readiness"},
    {"GET", "/v2/models/{op}/versions/{v}/ready", od_h_v2_model_ready, BODY_NONE, READ, "GET /v2/models/{op}/ready",
     "model readiness of a version"},
    {"GET", "/v2/models/{op}/stats", od_h_v2_model_stats, BODY_NONE, READ, "GET /v2/models/{op}/stats",
     "model statistics (Triton)"},
    {"GET", "/v2/models/{op}/versions/{v}/stats", od_h_v2_model_stats, BODY_NONE, READ, "GET /v2/models/{op}/stats",
     "model statistics of a version"},
    {"POST", "/v2/models/{op}/infer", od_h_v2_infer, BODY_CALL, CALL, "POST /v2/models/{op}/infer",
     "inference, JSON or binary tensor data"},
    {"POST", "/v2/models/{op}/versions/{v}/infer", od_h_v2_infer, BODY_CALL, CALL, "POST /v2/models/{op}/infer",
     "inference on a version"},
};
#define NROUTES ((int)(sizeof routes / sizeof routes[0]))

static const char *route_names[NROUTES];

void od_routes_init(void)
{
    for (int i = 0; i < NROUTES; i++)
        route_names[i] = routes[i].name;
    od_stats_init(od_op_count(), route_names, NROUTES);
}

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
        od_buf_puts(b, ",\"scope\":");
        od_buf_json_str(b, routes[i].scope == OWN_SESSION ? "call (own session) or admin"
                           : od_scope_name(routes[i].scope));
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

void od_route_allow(const char *path, char *allow, size_t cap)
{
    size_t n = 0;
    allow[0] = '\0';
    for (int i = 0; i < NROUTES; i++) {
        char caps[OD_MAX_PARAMS][256];
        if (!match(routes[i].pattern, path, caps) || strstr(allow, routes[i].method))
            continue;
        bool get = !strcmp(routes[i].method, "GET");
        n += (size_t)snprintf(allow + n, n < cap ? cap - n : 0, "%s%s%s", n ? ", " : "",
                              routes[i].method, get ? ", HEAD" : "");
        if (n >= cap)
            break;
    }
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
    if (sa->sa_family == AF_INET && cap >= 16) { /* by hand: inet_ntop goes through sprintf */
        const unsigned char *b = (const unsigned char *)&((const struct sockaddr_in *)(const void *)sa)->sin_addr;
        char *o = buf;
        for (int i = 0; i < 4; i++) {
            if (i)
                *o++ = '.';
            o += od_fmt_i64(b[i], o);
        }
    } else if (sa->sa_family == AF_INET)
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

/* ---- the admission queue of large bodies ----------------------------------------
 * Bodies of ADMIT_MIN bytes or more (by Content-Length) are read and worked
 * on at most --max-active-body-bytes at once (always one, however large).
 * A request past that waits, oldest first, with its connection suspended
 * and its body unread: 64 bodies of 16 MiB filled at once pushed every
 * byte through DRAM instead of the cache (a 4M-float relu: 88-93 req/s at
 * 2-4 connections, 49 at 64). A request waits at most --max-body-wait-ms,
 * then is read anyway, so a client that claims a body and sends it slowly
 * holds up the others by no more than that. Smaller bodies never wait.
 *
 * wait_state is the suspend/resume handshake: the waiting request is
 * queued under A.m but suspended after A.m is released (MHD's own lock is
 * never taken under ours), so whoever admits it may find it not yet
 * suspended. WS_QUEUED -> WS_SUSPENDED (the request, after suspending) or
 * WS_LET_IN (the admitter, before): whoever comes second resumes it. */
#define ADMIT_MIN ((size_t)1 << 20)
enum { WS_NONE, WS_QUEUED, WS_SUSPENDED, WS_LET_IN };

static struct {
    pthread_mutex_t m;
    size_t active;       /* claims of admitted requests */
    od_req *head, *tail; /* waiting, oldest first */
    long waiting;
} A = {.m = PTHREAD_MUTEX_INITIALIZER};

/* Unlinks the head of the queue and counts its claim as active. A.m held. */
static od_req *admit_head(void)
{
    od_req *r = A.head;
    A.head = r->wait_next;
    if (!A.head)
        A.tail = NULL;
    r->wait_next = NULL;
    A.waiting--;
    A.active += r->admitted;
    return r;
}

/* Resumes the requests of a list admit_head built (A.m not held). */
static void resume_admitted(od_req *list)
{
    while (list) {
        od_req *r = list;
        list = r->wait_next;
        r->wait_next = NULL;
        int expect = WS_QUEUED;
        if (!atomic_compare_exchange_strong(&r->wait_state, &expect, WS_LET_IN))
            MHD_resume_connection(r->conn); /* it was suspended: ours to resume */
    }
}

/* Whether r may read its body of claim bytes now. If not, r is queued and
 * its connection suspended; it is resumed once admitted. */
static bool admit_or_wait(od_req *r, size_t claim)
{
    size_t lim = od_cfg.max_active_body_bytes;
    if (!lim || claim < ADMIT_MIN)
        return true;
    r->admitted = claim;
    pthread_mutex_lock(&A.m);
    if (!A.head && (A.active == 0 || (A.active + claim <= lim && A.active + claim > A.active))) {
        A.active += claim;
        pthread_mutex_unlock(&A.m);
        return true;
    }
    r->wait_since = od_now_ns();
    atomic_store(&r->wait_state, WS_QUEUED);
    if (A.tail)
        A.tail->wait_next = r;
    else
        A.head = r;
    A.tail = r;
    A.waiting++;
    pthread_mutex_unlock(&A.m);
    MHD_suspend_connection(r->conn);
    int expect = WS_QUEUED;
    if (!atomic_compare_exchange_strong(&r->wait_state, &expect, WS_SUSPENDED))
        MHD_resume_connection(r->conn); /* let in before it was suspended */
    return false;
}

/* r's claim is given back (it completed); the requests that now fit are let in. */
static void admit_release(od_req *r)
{
    if (!r->admitted)
        return;
    od_req *list = NULL, **tail = &list;
    pthread_mutex_lock(&A.m);
    A.active -= r->admitted;
    size_t lim = od_cfg.max_active_body_bytes;
    while (A.head && (A.active == 0 || A.active + A.head->admitted <= lim)) {
        *tail = admit_head();
        tail = &(*tail)->wait_next;
    }
    pthread_mutex_unlock(&A.m);
    resume_admitted(list);
}

void od_admit_overdue(uint64_t now)
{
    od_req *list = NULL, **tail = &list;
    pthread_mutex_lock(&A.m);
    uint64_t wait_ns = (uint64_t)od_cfg.max_body_wait_ms * 1000000u;
    while (A.head && now - A.head->wait_since >= wait_ns) {
        *tail = admit_head();
        tail = &(*tail)->wait_next;
    }
    pthread_mutex_unlock(&A.m);
    resume_admitted(list);
}

void od_admit_all_busy(void)
{
    od_req *list = NULL, **tail = &list;
    pthread_mutex_lock(&A.m);
    while (A.head) {
        od_req *r = admit_head();
        r->busy = true; /* suspended: nothing else touches it */
        *tail = r;
        tail = &r->wait_next;
    }
    pthread_mutex_unlock(&A.m);
    resume_admitted(list);
}

void od_server_admission(size_t *active_bytes, long *waiting)
{
    pthread_mutex_lock(&A.m);
    *active_bytes = A.active;
    *waiting = A.waiting;
    pthread_mutex_unlock(&A.m);
}

/* The body's buffer: not touched until bytes arrive (a fresh block is
 * untouched memory), so a client that claims a large body and sends
 * nothing costs no RSS. False after answering 507. */
static bool body_open(od_req *r)
{
    r->body = od_blob_new(r->body_reserved, r->binary ? r->hdr_len : 0);
    if (!r->body) {
        od_respond_error(r, OD_ENOMEM, "cannot allocate %zu bytes for the body", r->body_reserved);
        return false;
    }
    return true;
}

/* Whether the request may use rt; false after answering 401 or 403. Runs
 * before anything of the body is read or reserved. */
static bool authorized(od_req *r, const route *rt)
{
    if (!od_auth_enabled())
        return true;
    const char *name, *hdr = od_req_header(r, MHD_HTTP_HEADER_AUTHORIZATION);
    int have = od_auth_scopes(hdr, &name);
    r->user = name;
    if (rt->scope == OPEN)
        return true;
    if (have < 0) {
        r->www_auth = "Bearer realm=\"opdispatch\", error=\"invalid_token\"";
        od_respond_error(r, OD_EUNAUTHORIZED,
                         "the Authorization header is not `Bearer <token>` with a token of --token-file");
        return false;
    }
    unsigned need = rt->scope;
    if (need == OWN_SESSION) {
        const char *own = od_req_session_name(r);
        need = own && !strcmp(own, r->params[0]) ? CALL : ADMIN;
    }
    if ((unsigned)have & need)
        return true;
    if (!hdr) { /* no credentials at all: 401 asks for them (RFC 7235), 403 is for a token */
        r->www_auth = "Bearer realm=\"opdispatch\"";
        od_respond_error(r, OD_EUNAUTHORIZED, "%s needs a token: send Authorization: Bearer <token>",
                         rt->name);
        return false;
    }
    r->www_auth = need == ADMIN ? "Bearer realm=\"opdispatch\", error=\"insufficient_scope\", scope=\"admin\""
                  : need == CALL ? "Bearer realm=\"opdispatch\", error=\"insufficient_scope\", scope=\"call\""
                                 : "Bearer realm=\"opdispatch\", error=\"insufficient_scope\", scope=\"read\"";
    od_respond_error(r, OD_EFORBIDDEN, "%s needs the %s scope, which %s does not have", rt->name,
                     od_scope_name(need), name);
    return false;
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
    /* The method first: a path is matched only against its method's routes
     * (a POST call is tried against a handful of patterns, not ~40); the
     * other methods' patterns only when none fits, to tell 405 from 404. */
    for (int i = 0; i < NROUTES && r->route < 0; i++)
        if ((!strcmp(routes[i].method, method) || (is_head && !strcmp(routes[i].method, "GET"))) &&
            match(routes[i].pattern, url, r->params))
            r->route = i;
    bool path_known = r->route >= 0;
    for (int i = 0; i < NROUTES && !path_known; i++) {
        char caps[OD_MAX_PARAMS][256];
        path_known = match(routes[i].pattern, url, caps);
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
    if (!authorized(r, rt))
        return false;
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
    /* A waiting request opens its body when it is let in (od_on_request). */
    return !admit_or_wait(r, cap) || body_open(r);
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

/* No od_req could be allocated: a 507 from static memory, queued on the
 * first call (MHD then closes the connection instead of reading a body), so
 * a client under memory pressure gets an answer, not a dropped connection.
 * The completion callback sees no od_req and has nothing to free. */
static enum MHD_Result answer_no_memory(struct MHD_Connection *conn, const char *url)
{
    static const char v1[] = "{\"error\":{\"code\":\"out_of_memory\",\"message\":\"out of memory\"}}";
    static const char v2[] = "{\"error\":\"out of memory\"}";
    bool oip = !strncmp(url, "/v2", 3) && (url[3] == '\0' || url[3] == '/');
    struct MHD_Response *resp = MHD_create_response_from_buffer(oip ? sizeof v2 - 1 : sizeof v1 - 1,
                                                                (void *)(oip ? v2 : v1),
                                                                MHD_RESPMEM_PERSISTENT);
    if (!resp)
        return MHD_NO;
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
    enum MHD_Result ok = MHD_queue_response(conn, (unsigned)od_status_http(OD_ENOMEM), resp);
    MHD_destroy_response(resp);
    return ok;
}

/* One freed od_req kept per thread for the next request. At 1248 bytes it
 * is past glibc's tcache and in the large-bin range, so a fresh calloc runs
 * malloc_consolidate over the fastbins a request's small frees fill: a few
 * thousand instructions per tiny call. Under ASan every request gets its
 * own allocation, so a use after free is still caught. */
#if defined(__SANITIZE_ADDRESS__)
#define OD_REQ_CACHE 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define OD_REQ_CACHE 0
#endif
#endif
#ifndef OD_REQ_CACHE
#define OD_REQ_CACHE 1
#endif
static _Thread_local od_req *t_spare_req;

static od_req *req_new(void)
{
    od_req *r = OD_REQ_CACHE ? t_spare_req : NULL;
    if (!r)
        return calloc(1, sizeof *r);
    t_spare_req = NULL;
    memset(r, 0, sizeof *r);
    return r;
}

static void req_free(od_req *r)
{
    if (OD_REQ_CACHE && !t_spare_req)
        t_spare_req = r;
    else
        free(r);
}

enum MHD_Result od_on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size, void **con_cls)
{
    (void)cls;
    (void)version;
    od_req *r = *con_cls;
    if (!r) {
        r = req_new();
        if (!r)
            return answer_no_memory(conn, url);
        atomic_fetch_add(&g_inflight, 1);
        r->conn = conn;
        r->t0 = od_now_ns();
        *con_cls = r;
        begin_request(r, url, method);
        return r->failed ? MHD_NO : MHD_YES;
    }
    if (r->stash) { /* back from a call worker with its answer */
        od_respond_stashed(r);
        return MHD_YES;
    }
    if (r->failed)
        return MHD_NO;
    if (!r->body && !r->busy && !r->responded && !body_open(r)) /* let in after waiting */
        return MHD_YES;
    if (*upload_data_size) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        r->received += n;
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
    /* A resumed connection (let in after waiting) is called once with
     * nothing before its body arrives: not the last call. */
    if (r->has_cl && r->received < r->content_length)
        return MHD_YES;
    od_conn_phase(conn, OD_PH_WORK); /* all in: the reaper leaves it to the call's own budget */
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
        !od_srv_call_is_cheap(r->params[0], r->body->data, r->body->len)) {
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

/* An access-log line being assembled: len never passes cap (one byte is
 * kept for the newline); what does not fit is cut. */
typedef struct access_line {
    char *buf;
    size_t len, cap;
} access_line;

static void al_str(access_line *L, const char *s)
{
    size_t n = strlen(s), room = L->cap - L->len;
    n = n < room ? n : room;
    memcpy(L->buf + L->len, s, n);
    L->len += n;
}

static void al_int(access_line *L, int64_t v)
{
    char t[24];
    t[od_fmt_i64(v, t)] = '\0';
    al_str(L, t);
}

void od_on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
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
        od_record_route(r); /* aborted or timed out before an answer */
    if (od_cfg.access_log && od_cfg.log_level >= OD_LOG_INFO) {
        static const char *why[] = {"ok", "error", "timeout", "shutdown", "read-error", "client-abort"};
        /* Assembled by hand, not by snprintf: one line per request, and
         * the format parser was most of the log's cost on a tiny call. */
        char line[1024];
        access_line L = {line, 0, sizeof line - 1};
        L.len = (size_t)od_log_timestamp(line, sizeof line);
        al_str(&L, " access ip=");
        al_str(&L, req_ip(r)[0] ? r->ip : "-");
        if (r->user) { /* the token's name from the file: a token itself is never logged */
            al_str(&L, " user=");
            al_str(&L, r->user);
        }
        al_str(&L, " method=");
        al_str(&L, r->method);
        al_str(&L, " path=");
        al_str(&L, r->path);
        al_str(&L, " status=");
        al_int(&L, r->status);
        al_str(&L, " bytes=");
        al_int(&L, (int64_t)r->resp_bytes);
        al_str(&L, " us=");
        al_int(&L, (int64_t)us);
        if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK) {
            al_str(&L, " end=");
            al_str(&L, (unsigned)toe < sizeof why / sizeof why[0] ? why[toe] : "?");
        }
        line[L.len++] = '\n';
        od_log_write(line, L.len);
    }
    if (r->stash) /* closed before the stashed answer could go out */
        MHD_destroy_response(r->stash);
    od_blob_release(r->body);
    if (r->body_reserved)
        atomic_fetch_sub(&g_body_bytes, r->body_reserved);
    admit_release(r);
    req_free(r);
    od_conn_phase(conn, OD_PH_WAIT); /* keep-alive: the next request's clock */
    atomic_fetch_sub(&g_inflight, 1);
}

long od_server_inflight(void) { return atomic_load(&g_inflight); }

size_t od_server_body_bytes(void) { return atomic_load(&g_body_bytes); }
