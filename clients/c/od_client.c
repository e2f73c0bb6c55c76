/* od_client.c — the C client: libcurl for the transport, the request bodies
 * of the /v1 wire format (proto/PROTOCOL.md) built by hand.
 *
 * Invariants: see od_client.h. Bodies with tensors use the binary tensor
 * extension (a JSON header, then each tensor's bytes in order), so a large
 * tensor is never formatted as text.
 */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "od_client.h"

struct od_client {
    CURL *curl;
    char *url;
    char *session_hdr;
    char *auth_hdr;  /* "Authorization: Bearer ..." or NULL */
};

static void set_err(char *err, size_t cap, const char *fmt, const char *a)
{
    if (err && cap)
        snprintf(err, cap, fmt, a);
}

od_client *od_client_new(const char *url, char *err, size_t errcap)
{
    static int inited;
    if (!inited) {
        curl_global_init(CURL_GLOBAL_DEFAULT);
        inited = 1;
    }
    od_client *c = calloc(1, sizeof *c);
    if (!c || !(c->curl = curl_easy_init()) || !(c->url = strdup(url))) {
        if (c && c->curl)
            curl_easy_cleanup(c->curl);
        free(c);
        set_err(err, errcap, "%s", "out of memory creating a client");
        return NULL;
    }
    size_t n = strlen(c->url);
    while (n && c->url[n - 1] == '/')
        c->url[--n] = '\0';
    return c;
}

void od_client_free(od_client *c)
{
    if (!c)
        return;
    curl_easy_cleanup(c->curl);
    free(c->url);
    free(c->session_hdr);
    free(c->auth_hdr);
    free(c);
}

const char *od_client_url(const od_client *c) { return c->url; }

int od_client_set_session(od_client *c, const char *session)
{
    free(c->session_hdr);
    c->session_hdr = NULL;
    if (!session)
        return 0;
    size_t n = strlen(session) + 16;
    if (!(c->session_hdr = malloc(n)))
        return -1;
    snprintf(c->session_hdr, n, "X-OD-Session: %s", session);
    return 0;
}

int od_client_set_token(od_client *c, const char *token)
{
    free(c->auth_hdr);
    c->auth_hdr = NULL;
    if (!token || !*token)
        return 0;
    size_t n = strlen(token) + 32;
    if (!(c->auth_hdr = malloc(n)))
        return -1;
    snprintf(c->auth_hdr, n, "Authorization: Bearer %s", token);
    return 0;
}

typedef struct sink {
    char *p;
    size_t len, cap;
    bool oom;
} sink;

static size_t on_body(char *data, size_t size, size_t n, void *ud)
{
    sink *s = ud;
    size_t add = size * n;
    if (s->len + add + 1 > s->cap) {
        size_t nc = (s->cap ? s->cap * 2 : 4096) + add;
        char *np = realloc(s->p, nc);
        if (!np) {
            s->oom = true;
            return 0;
        }
        s->p = np;
        s->cap = nc;
    }
    memcpy(s->p + s->len, data, add);
    s->len += add;
    s->p[s->len] = '\0';
    return add;
}

static size_t on_header(char *data, size_t size, size_t n, void *ud)
{
    size_t *json_len = ud, len = size * n;
    static const char key[] = "inference-header-content-length:";
    if (len > sizeof key - 1 && !strncasecmp(data, key, sizeof key - 1))
        *json_len = (size_t)strtoull(data + sizeof key - 1, NULL, 10);
    return len;
}

int od_client_request(od_client *c, const char *method, const char *path, const void *body, size_t len,
                      size_t json_header_len, od_client_response *out, char *err, size_t errcap)
{
    memset(out, 0, sizeof *out);
    size_t ulen = strlen(c->url) + strlen(path) + 1;
    char *url = malloc(ulen);
    if (!url) {
        set_err(err, errcap, "%s", "out of memory");
        return -1;
    }
    snprintf(url, ulen, "%s%s", c->url, path);
    struct curl_slist *hdrs = NULL;
    char ihcl[96];
    if (body) {
        hdrs = curl_slist_append(hdrs, json_header_len ? "Content-Type: application/octet-stream"
                                                       : "Content-Type: application/json");
        if (json_header_len) {
            snprintf(ihcl, sizeof ihcl, "Inference-Header-Content-Length: %zu", json_header_len);
            hdrs = curl_slist_append(hdrs, ihcl);
        }
    }
    hdrs = curl_slist_append(hdrs, "Expect:"); /* no 100-continue round trip */
    if (c->session_hdr)
        hdrs = curl_slist_append(hdrs, c->session_hdr);
    if (c->auth_hdr)
        hdrs = curl_slist_append(hdrs, c->auth_hdr);
    sink s = {0};
    size_t hlen = 0;
    CURL *h = c->curl;
    curl_easy_reset(h);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &s);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, &hlen);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    if (body) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    } else if (!strcmp(method, "POST")) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, "");
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)0);
    }
    CURLcode rc = curl_easy_perform(h);
    curl_slist_free_all(hdrs);
    free(url);
    if (rc != CURLE_OK || s.oom) {
        free(s.p);
        set_err(err, errcap, "%s", s.oom ? "out of memory reading the answer" : curl_easy_strerror(rc));
        return -1;
    }
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &out->status);
    if (!s.p && !(s.p = calloc(1, 1))) {
        set_err(err, errcap, "%s", "out of memory");
        return -1;
    }
    out->body = s.p;
    out->len = s.len;
    out->json_len = hlen && hlen <= s.len ? hlen : s.len;
    return 0;
}

void od_client_response_free(od_client_response *r)
{
    free(r->body);
    memset(r, 0, sizeof *r);
}

/* ---- call bodies ---- */

typedef struct buf {
    char *p;
    size_t len, cap;
    bool oom;
} buf;

static void put(buf *b, const void *d, size_t n)
{
    if (b->oom)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t nc = (b->cap ? b->cap * 2 : 1024) + n;
        char *np = realloc(b->p, nc);
        if (!np) {
            b->oom = true;
            return;
        }
        b->p = np;
        b->cap = nc;
    }
    memcpy(b->p + b->len, d, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void puts_(buf *b, const char *s) { put(b, s, strlen(s)); }

/* JSON string (names, dtypes: plain ASCII from the caller) */
static void put_str(buf *b, const char *s)
{
    puts_(b, "\"");
    for (; *s; s++) {
        char e[8];
        if (*s == '"' || *s == '\\') {
            e[0] = '\\';
            e[1] = *s;
            put(b, e, 2);
        } else if ((unsigned char)*s < 0x20) {
            snprintf(e, sizeof e, "\\u%04x", (unsigned char)*s);
            puts_(b, e);
        } else {
            put(b, s, 1);
        }
    }
    puts_(b, "\"");
}

static void put_arg(buf *b, const od_client_arg *a)
{
    if (a->json) {
        puts_(b, a->json);
        return;
    }
    char tmp[64];
    puts_(b, "{\"dtype\":");
    put_str(b, a->dtype);
    puts_(b, ",\"shape\":[");
    for (int d = 0; d < a->ndim; d++) {
        snprintf(tmp, sizeof tmp, "%s%lld", d ? "," : "", (long long)a->shape[d]);
        puts_(b, tmp);
    }
    snprintf(tmp, sizeof tmp, "],\"parameters\":{\"binary_data_size\":%zu}}", a->nbytes);
    puts_(b, tmp);
}

char *od_client_call_body(const od_client_arg *args, int nargs, const char *device, bool json_outputs,
                          const char *extra, size_t *len, size_t *json_len)
{
    buf b = {0};
    bool any_tensor = false;
    puts_(&b, "{\"args\":[");
    bool first = true;
    for (int i = 0; i < nargs; i++)
        if (!args[i].name) {
            if (!first)
                puts_(&b, ",");
            first = false;
            put_arg(&b, &args[i]);
        }
    puts_(&b, "],\"kwargs\":{");
    first = true;
    for (int i = 0; i < nargs; i++)
        if (args[i].name) {
            if (!first)
                puts_(&b, ",");
            first = false;
            put_str(&b, args[i].name);
            puts_(&b, ":");
            put_arg(&b, &args[i]);
        }
    puts_(&b, "}");
    for (int i = 0; i < nargs; i++)
        any_tensor |= !args[i].json;
    if (device) {
        puts_(&b, ",\"device\":");
        put_str(&b, device);
    }
    puts_(&b, json_outputs ? ",\"parameters\":{\"binary_data_output\":false}"
                           : ",\"parameters\":{\"binary_data_output\":true}");
    if (extra && *extra) {
        puts_(&b, ",");
        puts_(&b, extra);
    }
    puts_(&b, "}");
    *json_len = any_tensor ? b.len : 0;
    /* the tensors' bytes, in the order the header names them: positional
     * first, then keyword */
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < nargs; i++)
            if (!args[i].json && (pass == 0) == (args[i].name == NULL))
                put(&b, args[i].data, args[i].nbytes);
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    *len = b.len;
    return b.p;
}

int od_client_call(od_client *c, const char *op, const od_client_arg *args, int nargs, const char *device,
                   bool json_outputs, const char *extra, od_client_response *out, char *err, size_t errcap)
{
    size_t len = 0, jl = 0;
    char *body = od_client_call_body(args, nargs, device, json_outputs, extra, &len, &jl);
    if (!body) {
        set_err(err, errcap, "%s", "out of memory building the request");
        memset(out, 0, sizeof *out);
        return -1;
    }
    char path[512];
    snprintf(path, sizeof path, "/v1/ops/%s", op);
    int rc = od_client_request(c, "POST", path, body, len, jl, out, err, errcap);
    free(body);
    return rc;
}
