/* faults.c — allocation-failure injection, SQLite style: every call below
 * runs through the real HTTP layer (tests/fuzz/fuzz.c: a libmicrohttpd
 * daemon fed through a socketpair, in this process) with the n-th
 * allocation the library makes failing, for n = 1, 2, 3, ... until the call
 * makes fewer than n allocations and succeeds. Each failed attempt must
 * answer a clean 507 (out_of_memory, in the error shape of its protocol)
 * or recover (a fallback that needs no memory) and answer the same outputs
 * as without faults; never another status, a closed connection or a crash;
 * and after each call's loop LeakSanitizer must find nothing lost.
 *
 * Invariants:
 *  - The library's objects are linked with -Wl,--wrap for malloc, calloc,
 *    realloc, posix_memalign, aligned_alloc, strdup and strndup (mk/faults.mk),
 *    and jansson allocates through json_set_alloc_funcs, so every
 *    allocation the library and its JSON values make passes through
 *    maybe_fail(). libmicrohttpd's own allocations are not counted: they
 *    are the HTTP library's, not ours.
 *  - Counting is armed only while a request is in flight (start-up, the
 *    checks and the leak scans allocate freely).
 *  - Mode "once" fails only the n-th allocation; "persistent" fails the
 *    n-th and every later one (the error paths must not need memory).
 *
 * Usage: faults [once|persistent|both] [name-substring]
 * FAULTS_TRACE=1 prints where each injected failure was (a stack trace).
 */
#include <errno.h>
#include <jansson.h>
#include <sanitizer/common_interface_defs.h>
#include <sanitizer/lsan_interface.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fuzz.h"

/* ---- the allocator hooks ------------------------------------------------------ */

static atomic_bool g_armed;
static atomic_long g_count;   /* allocations while armed */
static long g_fail_at;        /* 1-based; 0: count only */
static bool g_persistent;
static atomic_long g_injected; /* failures injected while armed */
static bool g_trace;           /* FAULTS_TRACE=1: where each injected failure was */

static bool maybe_fail(void)
{
    if (!atomic_load_explicit(&g_armed, memory_order_relaxed))
        return false;
    long n = atomic_fetch_add(&g_count, 1) + 1;
    if (g_fail_at && (n == g_fail_at || (g_persistent && n > g_fail_at))) {
        if (atomic_fetch_add(&g_injected, 1) == 0 && g_trace)
            __sanitizer_print_stack_trace();
        return true;
    }
    return false;
}

void *__real_malloc(size_t n);
void *__real_calloc(size_t k, size_t n);
void *__real_realloc(void *p, size_t n);
int __real_posix_memalign(void **p, size_t a, size_t n);
void *__real_aligned_alloc(size_t a, size_t n);
char *__real_strdup(const char *s);
char *__real_strndup(const char *s, size_t n);

void *__wrap_malloc(size_t n) { return maybe_fail() ? NULL : __real_malloc(n); }
void *__wrap_calloc(size_t k, size_t n) { return maybe_fail() ? NULL : __real_calloc(k, n); }
void *__wrap_realloc(void *p, size_t n) { return maybe_fail() ? NULL : __real_realloc(p, n); }
int __wrap_posix_memalign(void **p, size_t a, size_t n)
{
    return maybe_fail() ? ENOMEM : __real_posix_memalign(p, a, n);
}
void *__wrap_aligned_alloc(size_t a, size_t n) { return maybe_fail() ? NULL : __real_aligned_alloc(a, n); }
char *__wrap_strdup(const char *s) { return maybe_fail() ? NULL : __real_strdup(s); }
char *__wrap_strndup(const char *s, size_t n) { return maybe_fail() ? NULL : __real_strndup(s, n); }

static void *json_malloc(size_t n) { return maybe_fail() ? NULL : __real_malloc(n); }

/* ---- requests ------------------------------------------------------------------- */

typedef struct call {
    const char *name;   /* what it covers */
    char *req;          /* the request's bytes (owned) */
    size_t len;
    /* Calls on a stored tensor: setup (owned, may be NULL) is sent first,
     * without faults, before every attempt, and the "id" it answers
     * replaces @ID@ in req. */
    char *setup;
    size_t setup_len;
} call;

#define T23 "{\"dtype\":\"float32\",\"shape\":[2,3],\"data\":[1,-2,3,-4,5,-6]}"
#define T32 "{\"dtype\":\"float32\",\"shape\":[3,2],\"data\":[1,2,3,4,5,6]}"
#define T3 "{\"dtype\":\"float32\",\"shape\":[3],\"data\":[0.5,1,2]}"
#define IMG "{\"dtype\":\"float32\",\"shape\":[1,1,4,4],\"data\":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16]}"
#define K33 "{\"dtype\":\"float32\",\"shape\":[1,1,3,3],\"data\":[1,0,-1,2,0,-2,1,0,-1]}"
#define IDX "{\"dtype\":\"int64\",\"shape\":[2],\"data\":[1,0]}"

static call make(const char *name, const char *method, const char *path, const char *headers,
                 const void *body, size_t blen)
{
    char head[1024];
    int hn = snprintf(head, sizeof head,
                      "%s %s HTTP/1.1\r\nHost: faults\r\nConnection: close\r\n%sContent-Length: %zu\r\n\r\n",
                      method, path, headers, blen);
    call c = {.name = name, .req = malloc((size_t)hn + blen), .len = (size_t)hn + blen};
    memcpy(c.req, head, (size_t)hn);
    memcpy(c.req + hn, body, blen);
    return c;
}

static call json_call(const char *name, const char *path, const char *body)
{
    return make(name, "POST", path, "Content-Type: application/json\r\n", body, strlen(body));
}

/* A binary-data body: JSON header then the raw little-endian bytes. */
static call binary_call(const char *name, const char *path, const char *json, const void *bin, size_t blen)
{
    size_t hl = strlen(json);
    char *body = malloc(hl + blen), headers[256];
    memcpy(body, json, hl);
    memcpy(body + hl, bin, blen);
    snprintf(headers, sizeof headers,
             "Content-Type: application/octet-stream\r\nInference-Header-Content-Length: %zu\r\n", hl);
    call c = make(name, "POST", path, headers, body, hl + blen);
    free(body);
    return c;
}

/* A float32 tensor of the given shape with small varied values (malloc'd). */
static char *tensor_json(int ndim, const int *shape)
{
    long n = 1;
    for (int i = 0; i < ndim; i++)
        n *= shape[i];
    size_t cap = 64 + (size_t)n * 8;
    char *s = malloc(cap);
    size_t k = (size_t)snprintf(s, cap, "{\"dtype\":\"float32\",\"shape\":[");
    for (int i = 0; i < ndim; i++)
        k += (size_t)snprintf(s + k, cap - k, "%s%d", i ? "," : "", shape[i]);
    k += (size_t)snprintf(s + k, cap - k, "],\"data\":[");
    for (long i = 0; i < n; i++)
        k += (size_t)snprintf(s + k, cap - k, "%s%ld", i ? "," : "", i % 7 - 3);
    snprintf(s + k, cap - k, "]}");
    return s;
}

/* A call with two generated tensors: {"args": [a, b, extra...]}. */
static call call2(const char *name, const char *path, int na, const int *sa, int nb, const int *sb,
                  const char *extra)
{
    char *a = tensor_json(na, sa), *b = tensor_json(nb, sb);
    size_t cap = strlen(a) + strlen(b) + strlen(extra) + 32;
    char *body = malloc(cap);
    snprintf(body, cap, "{\"args\":[%s,%s%s]}", a, b, extra);
    call c = json_call(name, path, body);
    free(a);
    free(b);
    free(body);
    return c;
}

static int make_calls(call *cs)
{
    static const float f4[4] = {1, -2, 3, -4};
    int n = 0;
    cs[n++] = json_call("unary neg", "/v1/ops/neg", "{\"args\":[" T23 "]}");
    cs[n++] = json_call("binary add (broadcast, alpha)", "/v1/ops/add",
                        "{\"args\":[" T23 "," T3 "],\"kwargs\":{\"alpha\":2}}");
    cs[n++] = json_call("reduction sum.dim_IntList", "/v1/ops/sum", "{\"args\":[" T23 ",[1]]}");
    cs[n++] = json_call("softmax", "/v1/ops/softmax", "{\"args\":[" T23 ",1]}");
    cs[n++] = json_call("mm", "/v1/ops/mm", "{\"args\":[" T23 "," T32 "]}");
    cs[n++] = json_call("cat (Tensor[])", "/v1/ops/cat", "{\"args\":[[" T23 "," T23 "],0]}");
    cs[n++] = json_call("index.Tensor (Tensor?[])", "/v1/ops/index", "{\"args\":[" T23 ",[" IDX "]]}");
    cs[n++] = json_call("index_select", "/v1/ops/index_select", "{\"args\":[" T23 ",1," IDX "]}");
    cs[n++] = json_call("conv2d", "/v1/ops/conv2d", "{\"args\":[" IMG "," K33 "]}");
    cs[n++] = json_call("max_pool2d", "/v1/ops/max_pool2d", "{\"args\":[" IMG ",[2,2]]}");
    cs[n++] = json_call("layer_norm", "/v1/ops/layer_norm", "{\"args\":[" T23 ",[3]]}");
    cs[n++] = json_call("loss nll_loss", "/v1/ops/nll_loss",
                        "{\"args\":[" T23 ",{\"dtype\":\"int64\",\"shape\":[2],\"data\":[2,0]}]}");
    cs[n++] = json_call("loss mse_loss", "/v1/ops/mse_loss", "{\"args\":[" T23 "," T23 "]}");
    cs[n++] = json_call("autograd program (/v1/run with backward)", "/v1/run",
                        "{\"steps\":[{\"op\":\"mm\",\"args\":[{\"dtype\":\"float32\",\"shape\":[2,3],"
                        "\"data\":[1,-2,3,-4,5,-6],\"requires_grad\":true}," T32 "]},"
                        "{\"op\":\"relu\",\"args\":[{\"ref\":\"$0\"}]},"
                        "{\"op\":\"sum\",\"args\":[{\"ref\":\"$1\"}]},{\"backward\":\"$2\"}],"
                        "\"outputs\":[\"$1\",\"$2\"]}");
    cs[n++] = binary_call("binary body relu (/v1, binary out)", "/v1/ops/relu",
                          "{\"args\":[{\"dtype\":\"float32\",\"shape\":[4],\"parameters\":"
                          "{\"binary_data_size\":16}}],\"parameters\":{\"binary_data_output\":true}}",
                          f4, sizeof f4);
    cs[n++] = json_call("/v2 infer add.Tensor (JSON)", "/v2/models/add.Tensor/infer",
                        "{\"id\":\"r1\",\"inputs\":[{\"name\":\"self\",\"shape\":[2,2],\"datatype\":\"FP32\","
                        "\"data\":[1,2,3,4]},{\"name\":\"other\",\"shape\":[2,2],\"datatype\":\"FP32\","
                        "\"data\":[10,20,30,40]}],\"outputs\":[{\"name\":\"out\"}]}");
    cs[n++] = binary_call("/v2 infer relu (binary in and out)", "/v2/models/relu/infer",
                          "{\"inputs\":[{\"name\":\"self\",\"shape\":[4],\"datatype\":\"FP32\","
                          "\"parameters\":{\"binary_data_size\":16}}],\"outputs\":[{\"name\":\"out\","
                          "\"parameters\":{\"binary_data\":true}}]}",
                          f4, sizeof f4);
    cs[n++] = make("stored tensor (POST /v1/tensors)", "POST", "/v1/tensors",
                   "Content-Type: application/json\r\nX-OD-Session: faults\r\n",
                   "{\"tensor\":" T23 "}", strlen("{\"tensor\":" T23 "}"));
    cs[n++] = json_call("program keeping its results in a session (/v1/run keep)", "/v1/run",
                        "{\"steps\":[{\"op\":\"mul\",\"args\":[" T23 "," T23 "]},"
                        "{\"op\":\"split\",\"args\":[{\"ref\":\"$0\"},1,1]}],\"keep\":[\"$0\",\"$1.0.1\"]}");
    /* sizes that take the kernels' larger paths (BLAS, im2col, cached blocks) */
    static const int m64[2] = {64, 64}, img[4] = {2, 3, 16, 16}, w8[4] = {8, 3, 3, 3};
    cs[n++] = call2("mm 64x64 (BLAS)", "/v1/ops/mm", 2, m64, 2, m64, "");
    cs[n++] = call2("conv2d 2x3x16x16, 8 filters", "/v1/ops/conv2d", 4, img, 4, w8, ",null,[1,1],[1,1]");
    cs[n++] = json_call("explain (Meta tensors)", "/v1/ops/mm/explain",
                        "{\"args\":[{\"dtype\":\"float32\",\"shape\":[2,3]},"
                        "{\"dtype\":\"float32\",\"shape\":[3,4]}]}");
    cs[n++] = make("introspection GET /v1/ops/add", "GET", "/v1/ops/add", "", "", 0);
    cs[n++] = make("/v2 model metadata", "GET", "/v2/models/add.Tensor", "", "", 0);
    cs[n++] = make("stored tensors listed (GET /v1/tensors)", "GET", "/v1/tensors", "X-OD-Session: faults\r\n",
                   "", 0);
    cs[n++] = make("statistics GET /v1/stats", "GET", "/v1/stats", "", "", 0);
    /* more families: search, scan, embedding, scatter, pad, resample, attention,
     * LAPACK, batch norm; and the functionality keys: modes, vmap, autocast */
    cs[n++] = json_call("sort", "/v1/ops/sort", "{\"args\":[" T23 ",1]}");
    cs[n++] = json_call("topk", "/v1/ops/topk", "{\"args\":[" T23 ",2]}");
    cs[n++] = json_call("cumsum", "/v1/ops/cumsum", "{\"args\":[" T23 ",1]}");
    cs[n++] = json_call("embedding", "/v1/ops/embedding", "{\"args\":[" T32 "," IDX "]}");
    cs[n++] = json_call("scatter_add", "/v1/ops/scatter_add",
                        "{\"args\":[" T23 ",1,{\"dtype\":\"int64\",\"shape\":[2,3],\"data\":[0,1,2,2,1,0]}," T23 "]}");
    cs[n++] = json_call("constant_pad_nd", "/v1/ops/constant_pad_nd", "{\"args\":[" T23 ",[1,1]]}");
    cs[n++] = json_call("upsample_bilinear2d", "/v1/ops/upsample_bilinear2d", "{\"args\":[" IMG ",[8,8],false]}");
    cs[n++] = json_call("_scaled_dot_product_attention", "/v1/ops/_scaled_dot_product_attention",
                        "{\"args\":[" T23 "," T23 "," T23 "]}");
    cs[n++] = json_call("linalg_inv (LAPACK)", "/v1/ops/linalg_inv",
                        "{\"args\":[{\"dtype\":\"float64\",\"shape\":[2,2],\"data\":[4,7,2,6]}]}");
    cs[n++] = json_call("batch_norm (training)", "/v1/ops/batch_norm",
                        "{\"args\":[" IMG ",null,null,null,null,true,0.1,1e-5,false]}");
    cs[n++] = json_call("modes: trace", "/v1/ops/matmul", "{\"args\":[" T23 "," T32 "],\"modes\":[\"trace\"]}");
    cs[n++] = json_call("vmap (batching rule)", "/v1/ops/softmax",
                        "{\"args\":[" T23 ",0],\"vmap\":{\"in_dims\":[0,null],\"out_dims\":0}}");
    cs[n++] = json_call("vmap (per-sample fallback)", "/v1/ops/sort",
                        "{\"args\":[" T23 ",0],\"vmap\":{\"in_dims\":[0,null],\"out_dims\":0}}");
    /* on a stored tensor (the setup stores X, requiring grad, in session "faults") */
    call store = make("", "POST", "/v1/tensors", "Content-Type: application/json\r\nX-OD-Session: faults\r\n",
                      "{\"tensor\":{\"dtype\":\"float32\",\"shape\":[2,3],\"data\":[1,-2,3,-4,5,-6],"
                      "\"requires_grad\":true}}", strlen("{\"tensor\":{\"dtype\":\"float32\",\"shape\":[2,3],"
                      "\"data\":[1,-2,3,-4,5,-6],\"requires_grad\":true}}"));
    static const char *const sess = "Content-Type: application/json\r\nX-OD-Session: faults\r\n";
    static const char prog[] = "{\"steps\":[{\"op\":\"mul\",\"args\":[{\"ref\":\"@ID@\"}," T23 "]},"
                               "{\"op\":\"sum\",\"args\":[{\"ref\":\"$0\"}]},{\"backward\":\"$1\"}],"
                               "\"outputs\":[\"$1\"]}";
    call stored[] = {
        make("stored tensor read (GET /v1/tensors/{id})", "GET", "/v1/tensors/@ID@", sess, "", 0),
        make("stored tensor read, binary", "GET", "/v1/tensors/@ID@?binary=1", sess, "", 0),
        make("stored tensor metadata", "GET", "/v1/tensors/@ID@?meta=1", sess, "", 0),
        make("stored tensor as an argument", "POST", "/v1/ops/relu", sess,
             "{\"args\":[{\"ref\":\"@ID@\"}]}", strlen("{\"args\":[{\"ref\":\"@ID@\"}]}")),
        make("backward into a stored leaf's .grad (/v1/run)", "POST", "/v1/run", sess, prog, strlen(prog)),
        make("stored tensor deleted", "DELETE", "/v1/tensors/@ID@", sess, "", 0),
    };
    for (size_t i = 0; i < sizeof stored / sizeof stored[0]; i++) {
        cs[n] = stored[i];
        cs[n].setup = malloc(store.len);
        memcpy(cs[n].setup, store.req, store.len);
        cs[n++].setup_len = store.len;
    }
    free(store.req);
    cs[n++] = json_call("autocast bfloat16", "/v1/ops/mm", "{\"args\":[" T23 "," T32 "],\"autocast\":\"bfloat16\"}");
    return n;
}

/* ---- one attempt ------------------------------------------------------------------- */

static char g_resp[1 << 20];

/* The HTTP status of the first answer (0: none) and its body. */
static int parse_answer(size_t n, const char **body, size_t *blen)
{
    if (n < 12 || memcmp(g_resp, "HTTP/1.1 ", 9) != 0)
        return 0;
    int code = atoi(g_resp + 9);
    const char *e = memmem(g_resp, n, "\r\n\r\n", 4);
    *body = e ? e + 4 : g_resp + n;
    *blen = (size_t)(g_resp + n - *body);
    return code;
}

/* A 507's body in the protocol's shape: /v1 {"error": {"code":
 * "out_of_memory", "message": ...}}, /v2 {"error": "<message>"}. */
static bool clean_507(bool oip, const char *body, size_t blen)
{
    json_t *j = json_loadb(body, blen, 0, NULL);
    json_t *e = json_object_get(j, "error");
    bool ok = oip ? json_is_string(e)
                  : json_is_object(e) && json_is_string(json_object_get(e, "message")) &&
                        json_is_string(json_object_get(e, "code")) &&
                        !strcmp(json_string_value(json_object_get(e, "code")), "out_of_memory");
    json_decref(j);
    return ok;
}

/* Whether a call that recovered from a failed allocation answered the same
 * outputs as without faults (bodies of JSON answers with "outputs"; other
 * answers carry timings and counters that differ run to run). */
static bool same_outputs(const char *base, size_t blen, const char *body, size_t len)
{
    json_t *a = json_loadb(base, blen, 0, NULL), *b = json_loadb(body, len, 0, NULL);
    json_t *oa = json_object_get(a, "outputs"), *ob = json_object_get(b, "outputs");
    bool same = !oa || json_equal(oa, ob);
    json_decref(a);
    json_decref(b);
    return same;
}

/* c's request with every @ID@ replaced by the id its setup request answers
 * and Content-Length made right again (new, *len bytes). NULL when the
 * setup failed. */
static char *with_id(const call *c, size_t *len)
{
    size_t n = fz_http_exchange((const uint8_t *)c->setup, c->setup_len, g_resp, sizeof g_resp - 1);
    g_resp[n < sizeof g_resp - 1 ? n : sizeof g_resp - 1] = '\0';
    const char *p = strstr(g_resp, "\"id\":\"");
    if (!p)
        return NULL;
    p += 6;
    char id[128];
    snprintf(id, sizeof id, "%.*s", (int)strcspn(p, "\""), p);
    /* the request as text without its Content-Length line, then rebuilt */
    char *text = malloc(c->len * 2 + 256), *o = text;
    for (size_t k = 0; k < c->len;) {
        if (k + 4 <= c->len && !memcmp(c->req + k, "@ID@", 4)) {
            o += sprintf(o, "%s", id);
            k += 4;
        } else {
            *o++ = c->req[k++];
        }
    }
    size_t tn = (size_t)(o - text);
    const char *he = memmem(text, tn, "\r\n\r\n", 4), *cl = memmem(text, tn, "Content-Length: ", 16);
    size_t body = tn - (size_t)(he + 4 - text), cle = (size_t)((const char *)memchr(cl, '\r', tn) - text);
    char *out = malloc(tn + 32);
    int k = sprintf(out, "%.*sContent-Length: %zu", (int)(cl - text), text, body);
    memcpy(out + k, text + cle, tn - cle);
    *len = (size_t)k + tn - cle;
    free(text);
    return out;
}

static void run(const call *c, long fail_at, bool persistent, long *allocs, size_t *n)
{
    size_t len = c->len;
    char *req = c->setup ? with_id(c, &len) : c->req;
    if (!req) {
        fprintf(stderr, "faults: the setup of %s failed:\n%s\n", c->name, g_resp);
        exit(2);
    }
    g_fail_at = fail_at;
    g_persistent = persistent;
    atomic_store(&g_count, 0);
    atomic_store(&g_injected, 0);
    atomic_store(&g_armed, true);
    *n = fz_http_exchange((const uint8_t *)req, len, g_resp, sizeof g_resp);
    atomic_store(&g_armed, false);
    if (req != c->req)
        free(req);
    *allocs = atomic_load(&g_count);
    if (*n > sizeof g_resp)
        *n = sizeof g_resp;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "both";
    const char *only = argc > 2 ? argv[2] : NULL;
    g_trace = getenv("FAULTS_TRACE") && !strcmp(getenv("FAULTS_TRACE"), "1");
    json_set_alloc_funcs(json_malloc, free);
    fz_init_server();
    static call cs[64];
    int ncalls = make_calls(cs);
    int bad = 0;
    long attempts = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int pass = 0; pass < 2; pass++) {
        bool persistent = pass == 1;
        if ((persistent && !strcmp(mode, "once")) || (!persistent && !strcmp(mode, "persistent")))
            continue;
        for (int i = 0; i < ncalls; i++) {
            const call *c = &cs[i];
            if (only && !strstr(c->name, only))
                continue;
            bool oip = memmem(c->req, c->len, " /v2/", 5) != NULL;
            long allocs;
            size_t n;
            const char *body;
            size_t blen;
            run(c, 0, false, &allocs, &n);
            int base = parse_answer(n, &body, &blen);
            size_t base_len = blen;
            char *base_body = malloc(blen + 1);
            memcpy(base_body, body, blen);
            if (base != 200 && base != 201) {
                fprintf(stderr, "FAIL %s: answers %d without faults:\n%.*s\n", c->name, base, (int)n, g_resp);
                bad++;
                free(base_body);
                continue;
            }
            int n507 = 0, nok = 0, nbad = 0;
            long k;
            for (k = 1;; k++) {
                run(c, k, persistent, &allocs, &n);
                attempts++;
                int st = parse_answer(n, &body, &blen);
                if (allocs < k) { /* the k-th allocation never came: a clean run */
                    if (st != base) {
                        fprintf(stderr, "FAIL %s: %d instead of %d once faults stop\n", c->name, st, base);
                        nbad++;
                    }
                    break;
                }
                if (st == 507 && clean_507(oip, body, blen))
                    n507++;
                else if (st == base && !persistent && same_outputs(base_body, base_len, body, blen))
                    nok++; /* the failed allocation had a fallback */
                else {
                    if (nbad++ < 8)
                        fprintf(stderr, "FAIL %s: allocation %ld of %ld failing (%s): %s%.*s\n", c->name, k,
                                allocs, persistent ? "persistent" : "once",
                                st ? "answered " : "no answer (connection closed)",
                                st ? (int)(n < 600 ? n : 600) : 0, g_resp);
                }
                if (k > 200000)
                    break;
            }
            free(base_body);
            fz_http_forget();
            bool leaked = __lsan_do_recoverable_leak_check() != 0;
            if (leaked)
                fprintf(stderr, "FAIL %s: LeakSanitizer found memory lost (above)\n", c->name);
            bad += nbad + leaked;
            printf("%-10s %-58s n=1..%-5ld 507: %-5d recovered: %-4d bad: %d%s\n",
                   persistent ? "persistent" : "once", c->name, k, n507, nok, nbad, leaked ? " LEAK" : "");
            fflush(stdout);
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("faults: %ld attempts, %d problem(s), %.1f s\n", attempts, bad,
           (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
    for (int i = 0; i < ncalls; i++) {
        free(cs[i].req);
        free(cs[i].setup);
    }
    return bad ? 1 : 0;
}
