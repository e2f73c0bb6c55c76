/* respond.c — answers: the od_respond_* calls handlers use, error bodies in
 * each protocol's shape, binary responses (up to 4 KiB copied into one
 * buffer, larger ones sent from the tensors' memory).
 *
 * Invariants (see od_server.h):
 *  - The first answer wins; later ones are ignored (r->responded).
 *  - Statistics for a request are recorded before its answer is queued, so
 *    a client that reads /v1/stats after its answer sees its call.
 *  - On a call worker (r->async) the answer is stashed in the request and
 *    queued by the I/O thread after the resume (od_respond_stashed); MHD's
 *    queue call is only ever made on an I/O thread.
 *  - An answer that cannot be created marks the request failed: the I/O
 *    thread closes its connection instead of going on with the request.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "od_stats.h"
#include "server_int.h"

/* ---- answers ----------------------------------------------------------------- */

void od_record_route(od_req *r)
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

void od_respond_init(void)
{
    const char *fault = getenv("OD_FAULT_RESPONSES");
    g_fault_every = fault ? (unsigned)strtoul(fault, NULL, 10) : 0;
    if (g_fault_every)
        od_log(OD_LOG_WARN, "OD_FAULT_RESPONSES=%u: every %u-th answer will fail (a test hook)",
               g_fault_every, g_fault_every);
}

void od_respond_stashed(od_req *r)
{
    struct MHD_Response *resp = r->stash;
    r->stash = NULL;
    queue_now(r, r->stash_status, resp);
}

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
        od_record_route(r);
        return;
    }
    r->resp_bytes = bytes;
    od_record_route(r);
    if (atomic_load_explicit(&od_draining, memory_order_relaxed))
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close"); /* let keep-alive clients go */
    if (r->async) { /* on a call worker: the I/O thread queues it after the resume */
        r->stash = resp;
        r->stash_status = status;
        return;
    }
    queue_now(r, status, resp);
}

/* A response that frees data (malloc'd; taken) when sent. NULL when it
 * cannot be made: data is freed and the request marked failed (queue). */
static struct MHD_Response *owned_response(od_req *r, int status, char *data, size_t len,
                                           const char *ctype)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer_with_free_callback(len, data, free);
    if (!resp) {
        free(data);
        queue(r, status, NULL, 0); /* marks the request failed: its connection closes */
        return NULL;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    return resp;
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
    struct MHD_Response *resp = owned_response(r, status, data, len, ctype);
    if (resp)
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
    struct MHD_Response *resp = owned_response(r, status, body, len, "application/json");
    if (!resp)
        return;
    if (st == OD_EMETHOD) {
        char allow[64];
        od_route_allow(r->path, allow, sizeof allow);
        MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, allow);
    }
    if (r->www_auth && (st == OD_EUNAUTHORIZED || st == OD_EFORBIDDEN))
        MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE, r->www_auth);
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

/* Binary answers up to this size are copied into one buffer; larger ones
 * are sent from the tensors' own memory. */
#define BINARY_COPY_MAX ((size_t)4096)

/* The OIP header length, then the answer is queued. */
static void binary_headers(od_req *r, int status, struct MHD_Response *resp, size_t hlen, size_t total)
{
    char hl[24];
    hl[od_fmt_i64((int64_t)hlen, hl)] = '\0';
    MHD_add_response_header(resp, "Inference-Header-Content-Length", hl);
    queue(r, status, resp, total);
}

typedef struct bin_parts {
    char *head;
    int n;
    od_tensor *t[]; /* up to OD_MAX_BINARY_OUTPUTS */
} bin_parts;

static void bin_parts_free(void *cls)
{
    bin_parts *p = cls;
    free(p->head);
    for (int i = 0; i < p->n; i++)
        od_tensor_release(p->t[i]);
    free(p);
}

/* A binary answer that cannot be built: the tensors (taken) are released
 * and the request answered out_of_memory, unless it was answered already. */
static void binary_oom(od_req *r, od_tensor **tensors, int n)
{
    for (int i = 0; i < n; i++)
        od_tensor_release(tensors[i]);
    if (!r->responded)
        od_respond_error(r, OD_ENOMEM, "out of memory building the response");
}

void od_respond_binary(od_req *r, int status, od_buf *head, od_tensor **tensors, int n)
{
    if (r->responded || head->oom || n < 0 || n > OD_MAX_BINARY_OUTPUTS) {
        od_buf_free(head);
        binary_oom(r, tensors, n);
        return;
    }
    size_t hlen = 0;
    char *hd = od_buf_steal(head, &hlen);
    size_t total = hlen;
    for (int i = 0; i < n; i++)
        total += od_tensor_nbytes(tensors[i]);
    if (hd && total <= BINARY_COPY_MAX) {
        /* small: one buffer, so MHD sends headers and body in one write
         * (an iovec answer goes out as two, which cost the tiny binary call
         * up to half its rate at 16 connections) */
        char *one = realloc(hd, total ? total : 1);
        if (!one) {
            free(hd);
            binary_oom(r, tensors, n);
            return;
        }
        size_t off = hlen;
        for (int i = 0; i < n; i++) {
            size_t nb = od_tensor_nbytes(tensors[i]);
            if (nb)
                memcpy(one + off, od_tensor_data(tensors[i]), nb);
            off += nb;
            od_tensor_release(tensors[i]);
        }
        struct MHD_Response *resp = owned_response(r, status, one, total, "application/octet-stream");
        if (resp)
            binary_headers(r, status, resp, hlen, total);
        return;
    }
    bin_parts *p = hd ? calloc(1, sizeof *p + (size_t)n * sizeof p->t[0]) : NULL;
    struct MHD_IoVec *iov = p ? calloc((size_t)n + 1, sizeof *iov) : NULL;
    if (!iov) {
        free(p);
        free(hd);
        binary_oom(r, tensors, n);
        return;
    }
    p->head = hd;
    int niov = 0;
    iov[niov].iov_base = p->head;
    iov[niov++].iov_len = hlen;
    for (int i = 0; i < n; i++) {
        p->t[p->n++] = tensors[i];
        size_t nb = od_tensor_nbytes(tensors[i]);
        if (nb == 0)
            continue;
        iov[niov].iov_base = od_tensor_data(tensors[i]);
        iov[niov++].iov_len = nb;
    }
    struct MHD_Response *resp = MHD_create_response_from_iovec(iov, (unsigned)niov, bin_parts_free, p);
    free(iov); /* MHD copies the vector */
    if (!resp) {
        bin_parts_free(p); /* releases the tensors */
        binary_oom(r, tensors, 0);
        return;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/octet-stream");
    binary_headers(r, status, resp, hlen, total);
}

const char *od_req_query(od_req *r, const char *key)
{
    return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, key);
}

const char *od_req_header(od_req *r, const char *name)
{
    return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}

