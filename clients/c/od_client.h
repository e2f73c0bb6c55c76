/* od_client.h — the C client of opdispatchd, on libcurl.
 *
 * Invariants:
 *  - One od_client holds one libcurl handle, so requests on it reuse the
 *    connection (keep-alive); a client is used by one thread at a time.
 *  - Every function that fills an od_client_response leaves it owning its
 *    body (free it with od_client_response_free), also on HTTP errors; on a
 *    transport failure it returns -1 with err filled and the response empty.
 *  - Strings passed in are borrowed for the call only.
 */
#ifndef OD_CLIENT_H
#define OD_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct od_client od_client;

typedef struct od_client_response {
    long status;      /* HTTP status */
    char *body;       /* the whole body, NUL-terminated (new) */
    size_t len;       /* body bytes */
    size_t json_len;  /* the JSON part: Inference-Header-Content-Length, or len */
} od_client_response;

/* A client of the server at url ("http://127.0.0.1:8000"); NULL with err
 * filled on failure. New: free with od_client_free. */
od_client *od_client_new(const char *url, char *err, size_t errcap);
void od_client_free(od_client *c);
/* Sends X-OD-Session: session on every request (NULL: none). Copied. */
int od_client_set_session(od_client *c, const char *session);
/* Sends Authorization: Bearer token on every request (NULL or "": none).
 * Copied. 0, or -1 out of memory. */
int od_client_set_token(od_client *c, const char *token);
const char *od_client_url(const od_client *c); /* borrowed */

/* One request. body may be NULL (len 0); json_header_len > 0 marks a
 * binary-extension body (the first json_header_len bytes are JSON).
 * Returns 0 when the server answered (any status), -1 otherwise. */
int od_client_request(od_client *c, const char *method, const char *path, const void *body, size_t len,
                      size_t json_header_len, od_client_response *out, char *err, size_t errcap);
void od_client_response_free(od_client_response *r);

/* One argument of a call: a tensor (sent as binary data) or a JSON value. */
typedef struct od_client_arg {
    const char *name;  /* NULL: positional */
    const char *json;  /* a JSON value, or NULL for a tensor */
    const char *dtype; /* "float32", ... (tensor) */
    int ndim;
    int64_t shape[16];
    const void *data;  /* nbytes of row-major little-endian elements (borrowed) */
    size_t nbytes;
} od_client_arg;

/* POST /v1/ops/{op}: args as given, device (NULL: the server's default),
 * binary outputs unless json_outputs; extra (NULL or a JSON object's
 * members without braces, e.g. "\"modes\":[\"trace\"]") joins the body. */
int od_client_call(od_client *c, const char *op, const od_client_arg *args, int nargs, const char *device,
                   bool json_outputs, const char *extra, od_client_response *out, char *err, size_t errcap);

/* Builds the request body od_client_call sends (new, *len bytes; the JSON
 * header's length in *json_len, 0 when nothing is binary). NULL on ENOMEM. */
char *od_client_call_body(const od_client_arg *args, int nargs, const char *device, bool json_outputs,
                          const char *extra, size_t *len, size_t *json_len);

#endif
