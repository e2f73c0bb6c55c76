/* fuzz.c — start-up and the in-process HTTP exchange of the harnesses
 * (fuzz.h). Single-threaded: libFuzzer runs one input at a time. */
#include "fuzz.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "od_stats.h"
#include "server_int.h"

static struct MHD_Daemon *g_daemon;

void fz_init_library(void)
{
    static int done;
    if (done)
        return;
    done = 1;
    od_config_defaults(&od_cfg);
    od_cfg.log_level = OD_LOG_ERROR;
    od_cfg.access_log = false;
    od_cfg.call_workers = 0;              /* handlers run inside MHD_run, on this thread */
    od_cfg.max_elements = 1 << 16;        /* bounds one input's kernel time */
    od_cfg.max_output_bytes = (size_t)4 << 20;
    od_cfg.max_body_bytes = (size_t)1 << 20;
    od_cfg.max_session_bytes = (size_t)16 << 20;
    od_cfg.store_high_water_bytes = (size_t)32 << 20;
    snprintf(od_cfg.default_device, sizeof od_cfg.default_device, "cpu");
    od_error err;
    od_error_clear(&err);
    if (od_init(&err) != OD_OK) {
        fprintf(stderr, "fuzz: od_init failed: %s\n", err.message);
        abort();
    }
    od_registry_freeze();
}

od_proto_limits fz_limits(void) { return od_limits(); }

void fz_init_server(void)
{
    if (g_daemon)
        return;
    fz_init_library();
    signal(SIGPIPE, SIG_IGN);
    od_set_stats_hook(od_stats_kernel);
    od_routes_init();
    od_respond_init();
    g_daemon = MHD_start_daemon(MHD_USE_NO_LISTEN_SOCKET | MHD_ALLOW_SUSPEND_RESUME, 0, NULL, NULL,
                                od_on_request, NULL,
                                MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)32 * 1024,
                                MHD_OPTION_NOTIFY_COMPLETED, od_on_completed, NULL,
                                MHD_OPTION_END);
    if (!g_daemon) {
        fprintf(stderr, "fuzz: MHD_start_daemon failed\n");
        abort();
    }
}

void fz_http_forget(void) { od_store_clear(); }

static unsigned connections(void)
{
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(g_daemon, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);
    return di ? di->num_connections : 0;
}

size_t fz_http_exchange(const uint8_t *req, size_t n, char *resp, size_t cap)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0)
        abort();
    struct sockaddr_in peer = {.sin_family = AF_INET, .sin_port = htons(40000)};
    peer.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (MHD_add_connection(g_daemon, sv[1], (const struct sockaddr *)&peer, sizeof peer) != MHD_YES) {
        close(sv[0]);
        close(sv[1]);
        return 0;
    }
    size_t sent = 0, got = 0;
    /* Every handler runs inside MHD_run, so a round in which nothing moved
     * either way means MHD waits for bytes this input does not have. */
    for (int idle = 0, rounds = 0; idle < 3 && rounds < 100000; rounds++) {
        bool moved = false;
        if (sent < n) {
            ssize_t w = send(sv[0], req + sent, n - sent, MSG_NOSIGNAL);
            if (w > 0) {
                sent += (size_t)w;
                moved = true;
            }
        }
        MHD_run(g_daemon);
        char buf[16384];
        ssize_t r;
        while ((r = recv(sv[0], buf, sizeof buf, 0)) > 0) {
            if (resp && got < cap)
                memcpy(resp + got, buf, (size_t)r < cap - got ? (size_t)r : cap - got);
            got += (size_t)r;
            moved = true;
        }
        if (r == 0) /* MHD closed it */
            break;
        idle = moved ? 0 : idle + 1;
    }
    close(sv[0]);
    for (int i = 0; i < 1000 && connections() > 0; i++)
        MHD_run(g_daemon);
    if (connections() > 0) {
        fprintf(stderr, "fuzz: libmicrohttpd kept a connection after its peer closed\n");
        abort();
    }
    return got;
}

static bool error_shape(const char *body, size_t len)
{
    json_t *j = json_loadb(body, len, 0, NULL);
    json_t *e = json_object_get(j, "error");
    bool ok = json_is_string(e) || (json_is_object(e) && json_is_string(json_object_get(e, "code")) &&
                                    json_is_string(json_object_get(e, "message")));
    json_decref(j);
    return ok;
}

void fz_check_answer(const uint8_t *req, size_t req_len, const char *resp, size_t n)
{
    if (n < 12 || memcmp(resp, "HTTP/1.1 ", 9) != 0)
        return;
    int code = atoi(resp + 9);
    const char *he = memmem(resp, n, "\r\n\r\n", 4);
    bool bad = code == 500;
    bool head = req_len >= 5 && !memcmp(req, "HEAD ", 5);
    if (!bad && code >= 400 && !head && he && memmem(resp, (size_t)(he - resp), "Content-Type: application/json", 30)) {
        const char *cl = memmem(resp, (size_t)(he - resp), "Content-Length: ", 16);
        size_t len = cl ? strtoul(cl + 16, NULL, 10) : 0;
        const char *body = he + 4;
        if (cl && len <= n - (size_t)(body - resp))
            bad = !error_shape(body, len);
    }
    if (bad) {
        fprintf(stderr, "fuzz: a bad answer:\n%.*s\n", (int)(n < 2000 ? n : 2000), resp);
        abort();
    }
}
