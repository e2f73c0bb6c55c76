/* daemon.c — the libmicrohttpd daemon: start, drain, stop; connection
 * tracking and the reaper.
 *
 * Invariants:
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
 *    The 408 is in the shape of the request's protocol (/v2: the Open
 *    Inference Protocol's). Over TLS (--tls-cert) the reaper cannot write
 *    into MHD's TLS session, so a late request is closed without an answer.
 *  - Stopping cancels running calls, joins the call workers and lets in
 *    every request waiting for its turn (answered 503) before the daemon
 *    stops (MHD must not stop with suspended connections). The reaper also
 *    lets in requests that waited their longest wait (server.c).
 *  - The TLS certificate and key are read once at start and kept (the key
 *    wiped before it is freed) until the daemon has stopped.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "od_parallel.h"
#include "od_stats.h"
#include "server_int.h"

/* ---- connection tracking and the reaper ----------------------------------------- */

typedef struct conn_track {
    struct conn_track *prev, *next;
    int fd;
    int phase;
    uint64_t since; /* when the phase began */
    bool killed;
    bool oip;       /* the request line names a /v2 path: errors in the protocol's shape */
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

void od_conn_phase(struct MHD_Connection *c, int phase)
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
        t->phase = OD_PH_WAIT;
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
    conn_track *t = track_of(c);
    if (t) {
        pthread_mutex_lock(&T.m);
        t->oip = !strncmp(uri, "/v2", 3) && (uri[3] == '\0' || uri[3] == '/' || uri[3] == '?');
        pthread_mutex_unlock(&T.m);
    }
    od_conn_phase(c, OD_PH_RECV);
    return NULL;
}

/* An error answer written straight to a connection MHD is reading from
 * (msg: plain text, no quotes), then the connection is shut down; MHD sees
 * the end of the stream and closes it. Caller holds T.m. Over TLS nothing
 * can be written beside MHD's own TLS session (plain bytes would corrupt
 * its record stream): the connection is only shut down. */
static void answer_and_shut(conn_track *t, od_status st, const char *msg)
{
    if (t->phase == OD_PH_RECV && !*od_cfg.tls_cert) {
        char body[256], out[512];
        int bl = t->oip ? snprintf(body, sizeof body, "{\"error\":\"%s\"}", msg)
                        : snprintf(body, sizeof body, "{\"error\":{\"code\":\"%s\",\"message\":\"%s\"}}",
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
            if (t->killed || t->phase == OD_PH_WORK)
                continue;
            uint64_t limit = t->phase == OD_PH_RECV ? recv_ns : wait_ns;
            if (!limit || now - t->since <= limit)
                continue;
            od_log(OD_LOG_WARN, "closing a connection that %s within %u s", t->phase == OD_PH_RECV
                   ? "did not send its whole request" : "sent no complete request line",
                   t->phase == OD_PH_RECV ? od_cfg.request_timeout_s : wait_s);
            answer_and_shut(t, OD_EREQTIMEOUT, "the request was not received within --request-timeout");
        }
        od_store_expire(now, (uint64_t)od_cfg.session_idle_s * 1000000000u);
        pthread_mutex_unlock(&T.m); /* MHD's callbacks take T.m: resume outside it */
        od_admit_overdue(now);
        pthread_mutex_lock(&T.m);
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
static char *g_tls_cert, *g_tls_key; /* PEM text MHD was given; freed after it stops */

/* A PEM file into a new NUL-terminated string (at most 1 MiB), or NULL
 * after logging why (what: "--tls-cert"). */
static char *read_pem(const char *path, const char *what)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        od_log(OD_LOG_ERROR, "%s %s: %s", what, path, strerror(errno));
        return NULL;
    }
    size_t cap = (size_t)1 << 20, n = 0;
    char *text = malloc(cap + 1);
    if (text)
        n = fread(text, 1, cap + 1, f);
    bool bad = !text || ferror(f) || n > cap || n == 0;
    fclose(f);
    if (bad) {
        od_log(OD_LOG_ERROR, "%s %s: %s", what, path,
               !text ? "out of memory" : n > cap ? "larger than 1 MiB" : n == 0 ? "empty" : "read error");
        free(text);
        return NULL;
    }
    text[n] = '\0';
    if (!strstr(text, "-----BEGIN ")) {
        od_log(OD_LOG_ERROR, "%s %s: not a PEM file (no -----BEGIN line)", what, path);
        explicit_bzero(text, n);
        free(text);
        return NULL;
    }
    return text;
}

static void free_pem(char **p)
{
    if (*p) {
        explicit_bzero(*p, strlen(*p)); /* the key should not linger in freed memory */
        free(*p);
    }
    *p = NULL;
}

int od_server_start(int *bound_port)
{
    od_routes_init();
    od_respond_init();

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
    /* HTTPS: MHD's GnuTLS support, from PEM text read here; MHD refuses a
     * certificate and key that do not parse or do not match */
    struct MHD_OptionItem tls[3] = {{MHD_OPTION_END, 0, NULL}, {MHD_OPTION_END, 0, NULL},
                                    {MHD_OPTION_END, 0, NULL}};
    if (*od_cfg.tls_cert) {
        if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
            od_log(OD_LOG_ERROR, "--tls-cert: this libmicrohttpd was built without TLS support");
            return -1;
        }
        g_tls_cert = read_pem(od_cfg.tls_cert, "--tls-cert");
        g_tls_key = g_tls_cert ? read_pem(od_cfg.tls_key, "--tls-key") : NULL;
        if (!g_tls_key) {
            free_pem(&g_tls_cert);
            return -1;
        }
        tls[0] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_CERT, 0, g_tls_cert};
        tls[1] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_KEY, 0, g_tls_key};
        flags |= MHD_USE_TLS;
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
        flags, (uint16_t)od_cfg.port, NULL, NULL, od_on_request, NULL,
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
        MHD_OPTION_NOTIFY_COMPLETED, od_on_completed, NULL,
        MHD_OPTION_NOTIFY_CONNECTION, on_connection, NULL,
        MHD_OPTION_URI_LOG_CALLBACK, on_uri, NULL,
        MHD_OPTION_ARRAY, tls,
        MHD_OPTION_END);
    if (!g_daemon) {
        od_log(OD_LOG_ERROR, "cannot listen on %s:%d (address in use, or not allowed%s)", od_cfg.host,
               od_cfg.port, *od_cfg.tls_cert ? "; or the TLS certificate and key do not load" : "");
        free_pem(&g_tls_cert);
        free_pem(&g_tls_key);
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
        if (!t->killed && t->phase != OD_PH_WORK) {
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
    od_admit_all_busy(); /* none may stay suspended; with the reaper gone, none is let in late */
    if (g_daemon)
        MHD_stop_daemon(g_daemon);
    g_daemon = NULL;
    free_pem(&g_tls_cert);
    free_pem(&g_tls_key);
    od_stats_shutdown();
}
