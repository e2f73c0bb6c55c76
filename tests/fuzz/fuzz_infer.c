/* fuzz_infer.c — the Open Inference Protocol infer path (/v2/models/{m}/infer,
 * server/handlers_v2.c, proto/bind.c's OIP form) through the real HTTP
 * layer (fuzz.h). The input is "<model>\n<header length or ->\n<body>": the
 * harness writes a well-formed request around it (Content-Length always
 * right; Inference-Header-Content-Length and application/octet-stream when a
 * header length is given), so the mutations go into the model name, the JSON
 * header and the binary tensor data rather than into HTTP syntax, which
 * fuzz_http covers. The answer must not be a 500, and an error must be
 * the protocol's {"error": "<message>"} (fz_check_answer). */
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *s = (const char *)data, *end = s + size;
    const char *nl1 = memchr(s, '\n', size);
    if (!nl1 || nl1 - s > 200)
        return 0;
    const char *nl2 = memchr(nl1 + 1, '\n', (size_t)(end - nl1 - 1));
    if (!nl2 || nl2 - nl1 > 12)
        return 0;
    char model[256], hl[16];
    memcpy(model, s, (size_t)(nl1 - s));
    model[nl1 - s] = '\0';
    memcpy(hl, nl1 + 1, (size_t)(nl2 - nl1 - 1));
    hl[nl2 - nl1 - 1] = '\0';
    for (char *c = model; *c; c++) /* one path segment of printable bytes */
        if ((unsigned char)*c <= ' ' || *c == '/' || *c == '?' || *c == '#' || *c == '%' || *c == 0x7f)
            *c = '_';
    const char *body = nl2 + 1;
    size_t blen = (size_t)(end - body);
    char head[512];
    int hn;
    if (hl[0] >= '0' && hl[0] <= '9')
        hn = snprintf(head, sizeof head,
                      "POST /v2/models/%s/infer HTTP/1.1\r\nHost: fuzz\r\nContent-Type: "
                      "application/octet-stream\r\nInference-Header-Content-Length: %s\r\n"
                      "Content-Length: %zu\r\nConnection: close\r\n\r\n",
                      model, hl, blen);
    else
        hn = snprintf(head, sizeof head,
                      "POST /v2/models/%s/infer HTTP/1.1\r\nHost: fuzz\r\nContent-Type: "
                      "application/json\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
                      model, blen);
    if (hn <= 0 || (size_t)hn >= sizeof head)
        return 0;
    uint8_t *req = malloc((size_t)hn + blen);
    memcpy(req, head, (size_t)hn);
    memcpy(req + hn, body, blen);
    static char resp[1 << 16];
    size_t n = fz_http_exchange(req, (size_t)hn + blen, resp, sizeof resp);
    fz_check_answer(req, (size_t)hn + blen, resp, n < sizeof resp ? n : sizeof resp);
    free(req);
    fz_http_forget();
    return 0;
}
