/* fixed_server.c — the ceiling for HTTP benchmarks: a minimal libmicrohttpd
 * server, configured like opdispatchd (thread pool sized to the cores,
 * epoll, keep-alive), that reads and discards the request body and answers a
 * fixed JSON body. Whatever opdispatchd spends beyond this is our overhead.
 *
 * Usage: fixed_server PORT   (binds 127.0.0.1; SIGTERM/SIGINT stop it)
 */
#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char k_body[] = "{\"outputs\":[{\"name\":\"out\",\"datatype\":\"FP32\",\"shape\":[1],\"data\":[3.0]}]}";
static struct MHD_Response *g_resp;
static volatile sig_atomic_t g_stop;

static void on_signal(int sig) { (void)sig; g_stop = 1; }

static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url,
                               const char *method, const char *version, const char *upload,
                               size_t *upload_size, void **req_cls)
{
    (void)cls, (void)url, (void)method, (void)version, (void)upload;
    static int marker;
    if (*req_cls == NULL) { /* headers only: wait for the body */
        *req_cls = &marker;
        return MHD_YES;
    }
    if (*upload_size) { /* discard the body as it arrives */
        *upload_size = 0;
        return MHD_YES;
    }
    return MHD_queue_response(c, MHD_HTTP_OK, g_resp);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s PORT\n", argv[0]);
        return 2;
    }
    int port = atoi(argv[1]);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    g_resp = MHD_create_response_from_buffer(sizeof k_body - 1, (void *)k_body, MHD_RESPMEM_PERSISTENT);
    MHD_add_response_header(g_resp, "Content-Type", "application/json");
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)port);
    addr.sin_addr.s_addr = htonl(0x7f000001);
    struct MHD_Daemon *d = MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL, (uint16_t)port, NULL, NULL, handler, NULL,
        MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
        MHD_OPTION_THREAD_POOL_SIZE, (unsigned int)(cores > 0 ? cores : 1),
        MHD_OPTION_CONNECTION_LIMIT, (unsigned int)1024, MHD_OPTION_END);
    if (!d) {
        fprintf(stderr, "fixed_server: cannot listen on 127.0.0.1:%d\n", port);
        return 1;
    }
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    while (!g_stop)
        pause();
    MHD_stop_daemon(d);
    MHD_destroy_response(g_resp);
    return 0;
}
