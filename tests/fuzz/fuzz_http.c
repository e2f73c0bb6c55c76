/* fuzz_http.c — the HTTP layer end to end: the input is the bytes a client
 * sends on one connection (request line, headers, body; several requests
 * when keep-alive), read by a real libmicrohttpd daemon into the server's
 * own request lifecycle, route table, limits, handlers and answers
 * (server/server.c, respond.c, handlers_*.c), without a network socket
 * (fuzz.c). The first answer must not be a 500 (a bug by the status
 * table's own definition), and an error must come in its protocol's shape
 * (fz_check_answer). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"


int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fz_init_server();
    return 0;
}

/* The listings of everything (GET /v1/ops: every operator's schema and
 * table, 0.4 s under ASan; /metrics, /v1/stats, /v2/models/stats, GET /:
 * 15-75 ms) read no input but their path, and at their cost would take most
 * of the fuzzer's time: inputs that name one are skipped (the integration
 * tests check those answers). */
static bool names_a_listing(const uint8_t *data, size_t size)
{
    static const char *const paths[] = {"/v1/ops", "/metrics", "/v1/stats", "/v2/models/stats", "/"};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        char pat[32];
        int n = snprintf(pat, sizeof pat, " %s", paths[i]);
        bool root = !strcmp(paths[i], "/");
        for (const uint8_t *p = data; (p = memmem(p, size - (size_t)(p - data), pat, (size_t)n)); p++) {
            const uint8_t *q = p + n, *end = data + size;
            if (!root && q < end && *q == '/') /* the tolerated trailing slash */
                q++;
            if (q >= end || *q == ' ' || *q == '?')
                return true;
        }
    }
    return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char resp[1 << 16];
    if (names_a_listing(data, size))
        return 0;
    size_t n = fz_http_exchange(data, size, resp, sizeof resp);
    fz_check_answer(data, size, resp, n < sizeof resp ? n : sizeof resp);
    fz_http_forget();
    return 0;
}
