/* opdispatch — the command-line client of opdispatchd (on od_client.h) and
 * its load generator (od_load.h).
 *
 *   opdispatch [--url URL] [--json] [--session S] COMMAND ...
 *     ops                          every operator
 *     table OP [--text]            OP's dispatch table (--text: PyTorch's dumps)
 *     call OP [--arg [NAME=]VALUE]... [--device D] [--modes M,...] [--grad-mode G]
 *     explain OP [--arg ...]       the key, kernel and path a call would take
 *     stats | devices | keys
 *     load OP [--arg ...] [--connections N] [--duration S | --count N]
 *          [--rate R] [--warmup S] [--json-body] [--sweep connections=1,2,4 | rate=.. | n=..]
 *          [--format table|json|csv] [--plot out.png|out.svg]
 *     bench OP [--arg ...] [--iterations N] [--sizes 1e3..1e8 | --sweep n=..]
 *          [--format json] [--plot roofline.png]   (POST /v1/bench; inputs
 *          rand/randn/ones/zeros are made on the server)
 *
 * VALUE: rand:SHAPE:DTYPE, randn:SHAPE:DTYPE, ones:SHAPE:DTYPE, zeros:...,
 * full:V:SHAPE:DTYPE (SHAPE like 1024x1024, empty for 0-dim), ref:ID (a
 * stored tensor), or a JSON value (1.5, true, [0, 1], "tanh"). In a load
 * sweep over n, "{n}" in a VALUE is replaced by each size.
 *
 * Exit codes: 0 success; 1 the server answered 4xx; 2 usage; 3 no answer
 * (connection, timeout); 4 the server answered 5xx.
 * Invariants: every allocation is freed on every path of a command; the
 * URL comes from --url, else OD_URL, else http://127.0.0.1:8000; a bearer
 * token (a server's --token-file) from OD_TOKEN, never from the command
 * line, where other users' ps would see it.
 */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "od_client.h"
#include "od_load.h"

enum { EXIT_OK = 0, EXIT_4XX = 1, EXIT_USAGE = 2, EXIT_TRANSPORT = 3, EXIT_5XX = 4 };

#define MAX_ARGS 32

typedef struct opts {
    const char *url, *session, *device, *modes, *grad_mode;
    const char *token; /* OD_TOKEN, or NULL */
    bool json, text, json_body;
    const char *argv_args[MAX_ARGS];
    int nargs;
    int connections;
    double duration, rate, warmup;
    uint64_t count;
    const char *sweep, *format, *plot, *sizes;
} opts;

static int usage(const char *msg)
{
    if (msg)
        fprintf(stderr, "opdispatch: %s\n", msg);
    fprintf(stderr,
            "usage: opdispatch [--url URL] [--json] [--session S] COMMAND ...\n"
            "  ops | stats | devices | keys\n"
            "  table OP [--text]\n"
            "  call OP [--arg [NAME=]VALUE]... [--device D] [--modes M,..] [--grad-mode G]\n"
            "  explain OP [--arg ...]\n"
            "  load OP [--arg ...] [--connections N] [--duration S | --count N] [--rate R]\n"
            "       [--warmup S] [--json-body] [--sweep connections=1,2,4|rate=..|n=..]\n"
            "       [--format table|json|csv] [--plot out.png|out.svg]\n"
            "  bench OP [--arg ...] [--iterations N] [--sizes 1e3..1e8] [--plot roofline.png]\n"
            "VALUE: rand:SHAPE:DTYPE randn:.. ones:.. zeros:.. full:V:SHAPE:DTYPE ref:ID or JSON\n");
    return EXIT_USAGE;
}

/* ---- tensors from a VALUE ---- */

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static double urand(void)
{
    g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
    return (double)(g_rng >> 11) / 9007199254740992.0;
}

static const struct {
    const char *n;
    size_t s;
} g_dtypes[] = {{"bool", 1}, {"uint8", 1}, {"int8", 1}, {"int16", 2}, {"int32", 4}, {"int64", 8},
                {"float16", 2}, {"bfloat16", 2}, {"float32", 4}, {"float64", 8}};

/* The static name of dtype dt (NULL when unknown) and its size. */
static const char *dtype_lookup(const char *dt, size_t *size)
{
    for (size_t i = 0; i < sizeof g_dtypes / sizeof g_dtypes[0]; i++)
        if (!strcmp(dt, g_dtypes[i].n)) {
            *size = g_dtypes[i].s;
            return g_dtypes[i].n;
        }
    *size = 0;
    return NULL;
}

static size_t dtype_size(const char *dt)
{
    size_t s;
    dtype_lookup(dt, &s);
    return s;
}

static void store_elem(void *p, const char *dt, double v)
{
    if (!strcmp(dt, "float32")) {
        float f = (float)v;
        memcpy(p, &f, 4);
    } else if (!strcmp(dt, "float64")) {
        memcpy(p, &v, 8);
    } else if (!strcmp(dt, "float16")) {
        _Float16 h = (_Float16)v;
        memcpy(p, &h, 2);
    } else if (!strcmp(dt, "bfloat16")) {
        float f = (float)v;
        uint32_t u;
        memcpy(&u, &f, 4);
        uint16_t b = (uint16_t)((u + 0x7FFF + ((u >> 16) & 1)) >> 16); /* round to nearest even */
        memcpy(p, &b, 2);
    } else if (!strcmp(dt, "int64")) {
        int64_t x = (int64_t)v;
        memcpy(p, &x, 8);
    } else if (!strcmp(dt, "int32")) {
        int32_t x = (int32_t)v;
        memcpy(p, &x, 4);
    } else if (!strcmp(dt, "int16")) {
        int16_t x = (int16_t)v;
        memcpy(p, &x, 2);
    } else if (!strcmp(dt, "int8")) {
        *(int8_t *)p = (int8_t)v;
    } else if (!strcmp(dt, "uint8")) {
        *(uint8_t *)p = (uint8_t)v;
    } else {
        *(uint8_t *)p = v != 0;
    }
}

static double load_elem(const void *p, const char *dt)
{
    if (!strcmp(dt, "float32")) {
        float f;
        memcpy(&f, p, 4);
        return f;
    }
    if (!strcmp(dt, "float64")) {
        double d;
        memcpy(&d, p, 8);
        return d;
    }
    if (!strcmp(dt, "float16")) {
        _Float16 h;
        memcpy(&h, p, 2);
        return (double)h;
    }
    if (!strcmp(dt, "bfloat16")) {
        uint16_t b;
        memcpy(&b, p, 2);
        uint32_t u = (uint32_t)b << 16;
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    if (!strcmp(dt, "int64")) {
        int64_t x;
        memcpy(&x, p, 8);
        return (double)x;
    }
    if (!strcmp(dt, "int32")) {
        int32_t x;
        memcpy(&x, p, 4);
        return x;
    }
    if (!strcmp(dt, "int16")) {
        int16_t x;
        memcpy(&x, p, 2);
        return x;
    }
    if (!strcmp(dt, "int8"))
        return *(const int8_t *)p;
    return *(const uint8_t *)p;
}

/* Parses "[NAME=]VALUE" into a; *data: the tensor bytes to free (or NULL). */
static int parse_arg(const char *text, od_client_arg *a, char **data, char **json, char *err, size_t cap)
{
    memset(a, 0, sizeof *a);
    *data = NULL;
    *json = NULL;
    const char *eq = strchr(text, '=');
    const char *colon = strchr(text, ':');
    static char names[MAX_ARGS][64];
    static int nnames;
    const char *value = text;
    if (eq && (!colon || eq < colon) && eq != text && text[0] != '"' && text[0] != '[' && text[0] != '{') {
        size_t n = (size_t)(eq - text);
        if (n >= 64 || nnames == MAX_ARGS) {
            snprintf(err, cap, "argument name too long: %.100s", text);
            return -1;
        }
        memcpy(names[nnames], text, n);
        names[nnames][n] = '\0';
        a->name = names[nnames++];
        value = eq + 1;
    }
    static const char *const gens[] = {"rand:", "randn:", "ones:", "zeros:", "full:", NULL};
    int g = -1;
    for (int i = 0; gens[i]; i++)
        if (!strncmp(value, gens[i], strlen(gens[i])))
            g = i;
    if (!strncmp(value, "ref:", 4)) {
        size_t n = strlen(value + 4) + 16;
        if (!(*json = malloc(n)))
            return -1;
        snprintf(*json, n, "{\"ref\":\"%s\"}", value + 4);
        a->json = *json;
        return 0;
    }
    if (g < 0) { /* a JSON value, or a bare word as a string */
        json_error_t je;
        json_t *v = json_loads(value, JSON_DECODE_ANY, &je);
        if (v) {
            json_decref(v);
            if (!(*json = strdup(value)))
                return -1;
        } else {
            size_t n = strlen(value) + 3;
            if (!(*json = malloc(n)))
                return -1;
            snprintf(*json, n, "\"%s\"", value);
        }
        a->json = *json;
        return 0;
    }
    const char *p = value + strlen(gens[g]);
    double fillv = g == 2 ? 1 : 0;
    if (g == 4) {
        char *end;
        fillv = strtod(p, &end);
        if (*end != ':') {
            snprintf(err, cap, "full:V:SHAPE:DTYPE expected, got %.100s", value);
            return -1;
        }
        p = end + 1;
    }
    const char *c2 = strchr(p, ':');
    char shape[256];
    size_t sl = c2 ? (size_t)(c2 - p) : strlen(p);
    if (sl >= sizeof shape) {
        snprintf(err, cap, "shape too long: %.100s", value);
        return -1;
    }
    memcpy(shape, p, sl);
    shape[sl] = '\0';
    size_t es;
    a->dtype = dtype_lookup(c2 ? c2 + 1 : "float32", &es); /* static: text is the caller's buffer */
    if (!a->dtype) {
        snprintf(err, cap, "unknown dtype '%.40s' (bool, uint8, int8, int16, int32, int64, float16, bfloat16, float32, float64)",
                 c2 + 1);
        return -1;
    }
    int64_t numel = 1;
    for (char *tok = shape[0] ? strtok(shape, "x,") : NULL; tok; tok = strtok(NULL, "x,")) {
        char *end;
        double d = strtod(tok, &end); /* 1e6 is accepted */
        if (*end || d < 0 || d > 1e12 || a->ndim == 16 || d != floor(d)) {
            snprintf(err, cap, "bad size '%.40s' in %.100s", tok, value);
            return -1;
        }
        a->shape[a->ndim++] = (int64_t)d;
        numel *= (int64_t)d;
    }
    a->nbytes = (size_t)numel * es;
    if (!(*data = malloc(a->nbytes ? a->nbytes : 1))) {
        snprintf(err, cap, "out of memory for %zu bytes", a->nbytes);
        return -1;
    }
    for (int64_t i = 0; i < numel; i++) {
        double v = fillv;
        if (g == 0)
            v = urand();
        else if (g == 1) /* Box-Muller */
            v = sqrt(-2 * log(urand() + 1e-300)) * cos(2 * M_PI * urand());
        store_elem(*data + (size_t)i * es, a->dtype, v);
    }
    a->data = *data;
    return 0;
}

typedef struct argset {
    od_client_arg a[MAX_ARGS];
    char *data[MAX_ARGS], *json[MAX_ARGS];
    int n;
} argset;

static void argset_free(argset *s)
{
    for (int i = 0; i < s->n; i++) {
        free(s->data[i]);
        free(s->json[i]);
    }
    s->n = 0;
}

/* texts with "{n}" replaced by n when n >= 0 */
static int build_args(const opts *o, long long n, argset *s)
{
    char err[256];
    s->n = 0;
    for (int i = 0; i < o->nargs; i++) {
        char text[1024];
        const char *src = o->argv_args[i], *ph = n >= 0 ? strstr(src, "{n}") : NULL;
        if (ph)
            snprintf(text, sizeof text, "%.*s%lld%s", (int)(ph - src), src, n, ph + 3);
        else
            snprintf(text, sizeof text, "%s", src);
        if (parse_arg(text, &s->a[i], &s->data[i], &s->json[i], err, sizeof err) < 0) {
            s->n = i;
            argset_free(s);
            fprintf(stderr, "opdispatch: --arg %s: %s\n", src, err);
            return -1;
        }
        s->n = i + 1;
    }
    return 0;
}

/* ---- answers ---- */

static int exit_for(long status) { return status < 400 ? EXIT_OK : status < 500 ? EXIT_4XX : EXIT_5XX; }

/* Prints the server's error and returns the exit code. */
static int report_status(const od_client_response *r)
{
    if (r->status < 400)
        return EXIT_OK;
    json_t *j = json_loadb(r->body, r->json_len, 0, NULL);
    json_t *e = json_object_get(j, "error");
    const char *code = json_string_value(json_object_get(e, "code"));
    const char *msg = json_string_value(json_object_get(e, "message"));
    if (!msg)
        msg = json_string_value(e);
    fprintf(stderr, "opdispatch: HTTP %ld %s: %s\n", r->status, code ? code : "", msg ? msg : r->body);
    json_decref(j);
    return exit_for(r->status);
}

static void print_pretty(const char *body, size_t len)
{
    json_t *j = json_loadb(body, len, 0, NULL);
    if (j) {
        json_dumpf(j, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        putchar('\n');
        json_decref(j);
    } else {
        fwrite(body, 1, len, stdout);
    }
}

static void summarize_output(json_t *o, const char *bin, size_t *off, size_t total)
{
    const char *dt = json_string_value(json_object_get(o, "dtype"));
    const char *name = json_string_value(json_object_get(o, "name"));
    json_t *shape = json_object_get(o, "shape"), *data = json_object_get(o, "data");
    json_t *bds = json_object_get(json_object_get(o, "parameters"), "binary_data_size");
    printf("  %-6s %-8s [", name ? name : "out", dt ? dt : "?");
    size_t i;
    json_t *d;
    int64_t numel = 1;
    json_array_foreach(shape, i, d) {
        printf("%s%lld", i ? ", " : "", (long long)json_integer_value(d));
        numel *= json_integer_value(d);
    }
    printf("]");
    if (!dt) {
        printf("\n");
        return;
    }
    double mn = INFINITY, mx = -INFINITY, sum = 0;
    int64_t shown = 0;
    size_t es = dtype_size(dt);
    printf("  ");
    for (int64_t k = 0; k < numel; k++) {
        double v;
        if (bds) {
            if (*off + (size_t)(k + 1) * es > total)
                break;
            v = load_elem(bin + *off + (size_t)k * es, dt);
        } else {
            json_t *x = json_array_get(data, (size_t)k);
            v = json_is_number(x) ? json_number_value(x) : json_is_true(x) ? 1 : json_is_string(x) ? NAN : 0;
        }
        if (shown < 6)
            printf("%s%g", shown ? " " : "", v), shown++;
        mn = v < mn ? v : mn;
        mx = v > mx ? v : mx;
        sum += v;
    }
    if (numel > 6)
        printf(" ...");
    if (numel)
        printf("   min %g max %g mean %g", mn, mx, sum / (double)numel);
    printf("\n");
    if (bds)
        *off += (size_t)json_integer_value(bds);
}

static void print_call(const od_client_response *r)
{
    json_t *j = json_loadb(r->body, r->json_len, 0, NULL);
    if (!j) {
        fwrite(r->body, 1, r->len, stdout);
        return;
    }
    printf("%s\n", json_string_value(json_object_get(j, "op")));
    size_t i, off = r->json_len;
    json_t *o;
    json_array_foreach(json_object_get(j, "outputs"), i, o) summarize_output(o, r->body, &off, r->len);
    json_t *dsp = json_object_get(j, "dispatch");
    printf("  path: %s\n", json_string_value(json_object_get(dsp, "path")));
    json_t *t = json_object_get(dsp, "timing_us");
    printf("  server us: decode %.1f  dispatch %.1f  encode %.1f\n", json_number_value(json_object_get(t, "decode")),
           json_number_value(json_object_get(t, "dispatch")), json_number_value(json_object_get(t, "encode")));
    json_decref(j);
}

/* ---- commands ---- */

static int get_and_print(od_client *c, const char *path, bool json, bool raw_text, void (*human)(json_t *))
{
    char err[256];
    od_client_response r;
    if (od_client_request(c, "GET", path, NULL, 0, 0, &r, err, sizeof err) < 0) {
        fprintf(stderr, "opdispatch: %s: %s\n", od_client_url(c), err);
        return EXIT_TRANSPORT;
    }
    int rc = report_status(&r);
    if (rc == EXIT_OK) {
        if (raw_text)
            fwrite(r.body, 1, r.len, stdout);
        else if (json || !human)
            print_pretty(r.body, r.len);
        else {
            json_t *j = json_loadb(r.body, r.len, 0, NULL);
            human(j);
            json_decref(j);
        }
    }
    od_client_response_free(&r);
    return rc;
}

static void human_ops(json_t *j)
{
    size_t i, k;
    json_t *o, *ov;
    json_array_foreach(json_object_get(j, "operators"), i, o)
        json_array_foreach(json_object_get(o, "overloads"), k, ov)
            printf("%s\n", json_string_value(json_object_get(ov, "schema")));
}

static void human_table(json_t *j)
{
    printf("%s\n%s\n", json_string_value(json_object_get(j, "name")), json_string_value(json_object_get(j, "schema")));
    size_t i;
    json_t *s;
    json_array_foreach(json_object_get(j, "table"), i, s) {
        const char *prov = json_string_value(json_object_get(s, "provenance"));
        if (prov && strcmp(prov, "missing"))
            printf("  %-14s %-26s %-28s %s\n", json_string_value(json_object_get(s, "key")), prov,
                   json_string_value(json_object_get(s, "kernel")) ? json_string_value(json_object_get(s, "kernel")) : "",
                   json_string_value(json_object_get(s, "registered_at")) ? json_string_value(json_object_get(s, "registered_at")) : "");
    }
}

static char *extra_fields(const opts *o)
{
    static char buf[1024];
    buf[0] = '\0';
    size_t len = 0;
    if (o->grad_mode)
        len += (size_t)snprintf(buf + len, sizeof buf - len, "\"grad_mode\":\"%s\"", o->grad_mode);
    if (o->modes) {
        len += (size_t)snprintf(buf + len, sizeof buf - len, "%s\"modes\":[", len ? "," : "");
        char tmp[512];
        snprintf(tmp, sizeof tmp, "%s", o->modes);
        bool first = true;
        for (char *t = strtok(tmp, ","); t; t = strtok(NULL, ",")) {
            len += (size_t)snprintf(buf + len, sizeof buf - len, "%s\"%s\"", first ? "" : ",", t);
            first = false;
        }
        len += (size_t)snprintf(buf + len, sizeof buf - len, "]");
    }
    return buf;
}

static int cmd_call(od_client *c, const char *op, const opts *o, bool explain)
{
    argset s;
    if (build_args(o, -1, &s) < 0)
        return EXIT_USAGE;
    char err[256], path[512];
    od_client_response r;
    int rc;
    if (explain) {
        size_t len, jl;
        char *body = od_client_call_body(s.a, s.n, o->device, true, extra_fields(o), &len, &jl);
        snprintf(path, sizeof path, "/v1/ops/%s/explain", op);
        rc = body ? od_client_request(c, "POST", path, body, len, jl, &r, err, sizeof err) : -1;
        free(body);
    } else {
        rc = od_client_call(c, op, s.a, s.n, o->device, o->json, extra_fields(o), &r, err, sizeof err);
    }
    argset_free(&s);
    if (rc < 0) {
        fprintf(stderr, "opdispatch: %s: %s\n", od_client_url(c), err);
        return EXIT_TRANSPORT;
    }
    rc = report_status(&r);
    if (rc == EXIT_OK) {
        if (o->json || explain)
            print_pretty(r.body, r.json_len);
        else
            print_call(&r);
    }
    od_client_response_free(&r);
    return rc;
}

/* ---- load ---- */

typedef struct server_split {
    double requests, decode_us, dispatch_us, encode_us, e2e_us;
} server_split;

/* The op's summed server time from /v1/stats. */
static void read_split(od_client *c, const char *op, server_split *out)
{
    memset(out, 0, sizeof *out);
    char err[128];
    od_client_response r;
    if (od_client_request(c, "GET", "/v1/stats", NULL, 0, 0, &r, err, sizeof err) < 0)
        return;
    json_t *j = json_loadb(r.body, r.len, 0, NULL);
    size_t i;
    json_t *o;
    char want[256], want2[256];
    snprintf(want, sizeof want, "aten::%s", op);
    snprintf(want2, sizeof want2, "%s", op);
    json_array_foreach(json_object_get(j, "ops"), i, o) {
        const char *name = json_string_value(json_object_get(o, "op"));
        if (!name || (strcmp(name, want) && strcmp(name, want2) && strncmp(name, want, strlen(want))))
            continue;
        json_t *su = json_object_get(o, "server_us");
        out->requests += (double)json_integer_value(json_object_get(o, "requests"));
        out->decode_us += json_number_value(json_object_get(su, "decode"));
        out->dispatch_us += json_number_value(json_object_get(su, "dispatch"));
        out->encode_us += json_number_value(json_object_get(su, "encode"));
        out->e2e_us += json_number_value(json_object_get(json_object_get(o, "e2e_us"), "sum"));
    }
    json_decref(j);
    od_client_response_free(&r);
}

typedef struct point {
    char label[64];
    double x;
    od_load_result res;
    server_split split;
} point;

/* Whether any argument is a tensor sent as binary data: without one the
 * request is JSON, and so is the answer (as a JSON client would have it). */
static bool any_tensor(const argset *s)
{
    for (int i = 0; i < s->n; i++)
        if (!s->a[i].json)
            return true;
    return false;
}

static char *build_request(od_client *c, const char *op, const argset *s, const opts *o, size_t *len)
{
    size_t blen, jl;
    char *body = od_client_call_body(s->a, s->n, o->device, o->json_body || !any_tensor(s), extra_fields(o), &blen, &jl);
    if (!body)
        return NULL;
    const char *url = od_client_url(c), *hostport = strstr(url, "://");
    hostport = hostport ? hostport + 3 : url;
    char head[1024];
    int hl = snprintf(head, sizeof head,
                      "POST /v1/ops/%s HTTP/1.1\r\nHost: %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n", op,
                      hostport, jl ? "application/octet-stream" : "application/json", blen);
    if (jl)
        hl += snprintf(head + hl, sizeof head - (size_t)hl, "Inference-Header-Content-Length: %zu\r\n", jl);
    if (o->session)
        hl += snprintf(head + hl, sizeof head - (size_t)hl, "X-OD-Session: %s\r\n", o->session);
    if (o->token && strlen(o->token) < 200)
        hl += snprintf(head + hl, sizeof head - (size_t)hl, "Authorization: Bearer %s\r\n", o->token);
    hl += snprintf(head + hl, sizeof head - (size_t)hl, "\r\n");
    char *req = malloc((size_t)hl + blen);
    if (req) {
        memcpy(req, head, (size_t)hl);
        memcpy(req + hl, body, blen);
        *len = (size_t)hl + blen;
    }
    free(body);
    return req;
}

static void print_points(const point *pts, int n, const char *format, const char *op)
{
    if (!strcmp(format, "json")) {
        printf("[");
        for (int i = 0; i < n; i++) {
            const od_load_result *r = &pts[i].res;
            double rq = pts[i].split.requests > 0 ? pts[i].split.requests : 1;
            printf("%s{\"point\":\"%s\",\"op\":\"%s\",\"requests\":%llu,\"ok\":%llu,\"transport_errors\":%llu,"
                   "\"seconds\":%.3f,\"rps\":%.1f,\"bytes_per_s\":%.0f,\"latency_ms\":{\"mean\":%.4f,\"p50\":%.4f,"
                   "\"p90\":%.4f,\"p99\":%.4f,\"p999\":%.4f,\"max\":%.4f},\"server_us_per_request\":{\"decode\":%.2f,"
                   "\"dispatch\":%.2f,\"encode\":%.2f,\"e2e\":%.2f},\"statuses\":{",
                   i ? "," : "", pts[i].label, op, (unsigned long long)r->requests, (unsigned long long)r->ok,
                   (unsigned long long)r->transport_errors, r->elapsed_s, (double)r->requests / r->elapsed_s,
                   (double)(r->bytes_sent + r->bytes_received) / r->elapsed_s,
                   r->lat.count ? r->lat.sum / (double)r->lat.count / 1e6 : 0,
                   (double)od_hist_quantile(&r->lat, 0.5) / 1e6, (double)od_hist_quantile(&r->lat, 0.9) / 1e6,
                   (double)od_hist_quantile(&r->lat, 0.99) / 1e6, (double)od_hist_quantile(&r->lat, 0.999) / 1e6,
                   (double)r->lat.max / 1e6, pts[i].split.decode_us / rq, pts[i].split.dispatch_us / rq,
                   pts[i].split.encode_us / rq, pts[i].split.e2e_us / rq);
            bool first = true;
            for (int s = 0; s < OD_LOAD_STATUSES; s++)
                if (r->status[s]) {
                    printf("%s\"%d\":%llu", first ? "" : ",", s, (unsigned long long)r->status[s]);
                    first = false;
                }
            printf("}}");
        }
        printf("]\n");
        return;
    }
    bool csv = !strcmp(format, "csv");
    printf(csv ? "point,requests,errors,rps,MBps,mean_ms,p50_ms,p90_ms,p99_ms,p999_ms,max_ms,srv_decode_us,srv_dispatch_us,"
                 "srv_encode_us,unaccounted_us\n"
               : "%-16s %10s %7s %10s %8s %9s %9s %9s %9s %9s %9s | server us/req: %8s %8s %8s %11s\n",
           "point", "requests", "errors", "req/s", "MB/s", "mean ms", "p50 ms", "p90 ms", "p99 ms", "p999 ms", "max ms",
           "decode", "dispatch", "encode", "unaccounted");
    for (int i = 0; i < n; i++) {
        const od_load_result *r = &pts[i].res;
        double rq = pts[i].split.requests > 0 ? pts[i].split.requests : 1;
        double mean_us = r->lat.count ? r->lat.sum / (double)r->lat.count / 1e3 : 0;
        double srv = (pts[i].split.decode_us + pts[i].split.dispatch_us + pts[i].split.encode_us) / rq;
        printf(csv ? "%s,%llu,%llu,%.1f,%.2f,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%.2f,%.2f,%.2f,%.2f\n"
                   : "%-16s %10llu %7llu %10.1f %8.2f %9.4f %9.4f %9.4f %9.4f %9.4f %9.4f |                %8.2f %8.2f %8.2f %11.2f\n",
               pts[i].label, (unsigned long long)r->requests,
               (unsigned long long)(r->requests - r->ok + r->transport_errors), (double)r->requests / r->elapsed_s,
               (double)(r->bytes_sent + r->bytes_received) / r->elapsed_s / 1e6, mean_us / 1e3,
               (double)od_hist_quantile(&r->lat, 0.5) / 1e6, (double)od_hist_quantile(&r->lat, 0.9) / 1e6,
               (double)od_hist_quantile(&r->lat, 0.99) / 1e6, (double)od_hist_quantile(&r->lat, 0.999) / 1e6,
               (double)r->lat.max / 1e6, pts[i].split.decode_us / rq, pts[i].split.dispatch_us / rq,
               pts[i].split.encode_us / rq, mean_us - srv);
    }
    for (int i = 0; i < n && !csv; i++)
        for (int s = 0; s < OD_LOAD_STATUSES; s++)
            if (pts[i].res.status[s] && (s < 200 || s >= 300))
                printf("  %s: HTTP %d x %llu\n", pts[i].label, s, (unsigned long long)pts[i].res.status[s]);
}

/* gnuplot: the percentile curve of each point, and latency against
 * throughput when there are several points. */
static int plot(const point *pts, int n, const char *out)
{
    char dir[] = "/tmp/opdispatch-plot-XXXXXX";
    if (!mkdtemp(dir))
        return -1;
    char path[256];
    for (int i = 0; i < n; i++) {
        snprintf(path, sizeof path, "%s/p%d.dat", dir, i);
        FILE *f = fopen(path, "w");
        if (!f)
            return -1;
        static const double qs[] = {0.5, 0.75, 0.9, 0.95, 0.99, 0.995, 0.999, 0.9999};
        for (size_t k = 0; k < sizeof qs / sizeof qs[0]; k++)
            fprintf(f, "%g %g\n", 1.0 / (1.0 - qs[k]), (double)od_hist_quantile(&pts[i].res.lat, qs[k]) / 1e6);
        fclose(f);
    }
    snprintf(path, sizeof path, "%s/tput.dat", dir);
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    for (int i = 0; i < n; i++)
        fprintf(f, "%g %g %g\n", (double)pts[i].res.requests / pts[i].res.elapsed_s,
                (double)od_hist_quantile(&pts[i].res.lat, 0.5) / 1e6, (double)od_hist_quantile(&pts[i].res.lat, 0.99) / 1e6);
    fclose(f);
    snprintf(path, sizeof path, "%s/plot.gp", dir);
    f = fopen(path, "w");
    if (!f)
        return -1;
    bool svg = strlen(out) > 4 && !strcmp(out + strlen(out) - 4, ".svg");
    fprintf(f, "set terminal %s size %d,480\nset output '%s'\nset multiplot layout 1,%d\n",
            svg ? "svg" : "pngcairo", n > 1 ? 1200 : 640, out, n > 1 ? 2 : 1);
    fprintf(f, "set title 'latency by percentile'\nset logscale x\nset xlabel 'percentile'\nset ylabel 'ms'\n"
               "set xtics ('p50' 2, 'p90' 10, 'p99' 100, 'p99.9' 1000, 'p99.99' 10000)\nplot ");
    for (int i = 0; i < n; i++)
        fprintf(f, "%s'%s/p%d.dat' using 1:2 with linespoints title '%s'", i ? ", " : "", dir, i, pts[i].label);
    fprintf(f, "\n");
    if (n > 1)
        fprintf(f, "unset logscale x\nset xtics auto\nset title 'latency against throughput'\nset xlabel 'requests/s'\n"
                   "plot '%s/tput.dat' using 1:2 with linespoints title 'p50', '' using 1:3 with linespoints title 'p99'\n",
                dir);
    fprintf(f, "unset multiplot\n");
    fclose(f);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "gnuplot '%s' 2>&1", path);
    int rc = system(cmd);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) {
    }
    return rc == 0 ? 0 : -1;
}

static int cmd_load(od_client *c, const char *op, const opts *o)
{
    const char *url = od_client_url(c), *hp = strstr(url, "://");
    hp = hp ? hp + 3 : url;
    char host[64] = "127.0.0.1";
    int port = 80;
    const char *colon = strrchr(hp, ':');
    if (colon) {
        snprintf(host, sizeof host, "%.*s", (int)(colon - hp), hp);
        port = atoi(colon + 1);
    }
    if (!strcmp(host, "localhost"))
        snprintf(host, sizeof host, "127.0.0.1");
    /* the points: one, or a sweep */
    char key[32] = "", vals[512] = "";
    if (o->sweep && sscanf(o->sweep, "%31[^=]=%511s", key, vals) != 2)
        return usage("--sweep takes connections=1,2,4 | rate=100,200 | n=1e3,1e6");
    if (o->sweep && strcmp(key, "connections") && strcmp(key, "rate") && strcmp(key, "n"))
        return usage("--sweep: connections, rate or n");
    point pts[32];
    int npts = 0;
    char *save = NULL;
    for (char *t = o->sweep ? strtok_r(vals, ",", &save) : (char *)"-"; t && npts < 32;
         t = o->sweep ? strtok_r(NULL, ",", &save) : NULL) {
        opts po = *o;
        long long n = -1;
        if (!strcmp(key, "connections"))
            po.connections = atoi(t);
        else if (!strcmp(key, "rate"))
            po.rate = atof(t);
        else if (!strcmp(key, "n"))
            n = (long long)atof(t);
        point *p = &pts[npts];
        memset(p, 0, sizeof *p);
        snprintf(p->label, sizeof p->label, "%s%s%s", o->sweep ? key : "run", o->sweep ? "=" : "", o->sweep ? t : "");
        argset s;
        if (build_args(&po, n, &s) < 0)
            return EXIT_USAGE;
        size_t rlen = 0;
        char *req = build_request(c, op, &s, &po, &rlen);
        argset_free(&s);
        if (!req) {
            fprintf(stderr, "opdispatch: out of memory\n");
            return EXIT_USAGE;
        }
        /* one request first: a bad call fails here with the server's message */
        char err[256];
        server_split before, after;
        read_split(c, op, &before);
        od_load_spec spec = {host, port, req, rlen, po.connections > 0 ? po.connections : 1,
                             po.count ? 0 : (po.duration > 0 ? po.duration : 5), po.count, po.rate, po.warmup,
                             isatty(2) && strcmp(o->format, "json")};
        if (od_load_run(&spec, &p->res, err, sizeof err) < 0) {
            free(req);
            fprintf(stderr, "opdispatch: %s\n", err);
            return EXIT_TRANSPORT;
        }
        free(req);
        read_split(c, op, &after);
        p->split.requests = after.requests - before.requests;
        p->split.decode_us = after.decode_us - before.decode_us;
        p->split.dispatch_us = after.dispatch_us - before.dispatch_us;
        p->split.encode_us = after.encode_us - before.encode_us;
        p->split.e2e_us = after.e2e_us - before.e2e_us;
        npts++;
        if (!o->sweep)
            break;
    }
    print_points(pts, npts, o->format, op);
    if (o->plot && plot(pts, npts, o->plot) < 0) {
        fprintf(stderr, "opdispatch: --plot: gnuplot failed (is gnuplot installed?)\n");
        return EXIT_USAGE;
    }
    uint64_t bad = 0;
    for (int i = 0; i < npts; i++)
        bad += pts[i].res.requests - pts[i].res.ok + pts[i].res.transport_errors;
    return bad ? EXIT_4XX : EXIT_OK;
}

/* ---- bench: POST /v1/bench, inputs made on the server ---- */

/* "[NAME=]rand:SHAPE:DTYPE" as {"generate": ...} JSON; other values as
 * they are. Returns the JSON text (new) and the name (borrowed from the
 * static table), NULL on error. */
static char *bench_arg(const char *text, const char **name)
{
    static char names[MAX_ARGS][64];
    static int nnames;
    *name = NULL;
    const char *eq = strchr(text, '='), *colon = strchr(text, ':');
    if (eq && (!colon || eq < colon) && eq != text && (size_t)(eq - text) < 64 && nnames < MAX_ARGS) {
        memcpy(names[nnames], text, (size_t)(eq - text));
        names[nnames][eq - text] = '\0';
        *name = names[nnames++];
        text = eq + 1;
    }
    static const char *const kinds[] = {"rand", "randn", "ones", "zeros", NULL};
    for (int k = 0; kinds[k]; k++) {
        size_t kl = strlen(kinds[k]);
        if (strncmp(text, kinds[k], kl) || text[kl] != ':')
            continue;
        const char *p = text + kl + 1, *c2 = strchr(p, ':');
        char shape[512] = "", tmp[256];
        snprintf(tmp, sizeof tmp, "%.*s", (int)(c2 ? c2 - p : (long)strlen(p)), p);
        size_t sl = 0;
        for (char *tok = tmp[0] ? strtok(tmp, "x,") : NULL; tok; tok = strtok(NULL, "x,"))
            sl += (size_t)snprintf(shape + sl, sizeof shape - sl, "%s%lld", sl ? "," : "", (long long)atof(tok));
        char *out = malloc(700);
        if (out)
            snprintf(out, 700, "{\"generate\":\"%s\",\"shape\":[%s],\"dtype\":\"%s\"}", kinds[k], shape,
                     c2 ? c2 + 1 : "float32");
        return out;
    }
    return strdup(text);
}

static int cmd_bench(od_client *c, const char *op, const opts *o)
{
    /* --sweep n=1e3,1e6 (or --sizes A..B, powers of ten) fills "{n}" */
    double sizes[32];
    int nsizes = 0;
    if (o->sweep && !strncmp(o->sweep, "n=", 2)) {
        char tmp[512];
        snprintf(tmp, sizeof tmp, "%s", o->sweep + 2);
        for (char *t = strtok(tmp, ","); t && nsizes < 32; t = strtok(NULL, ","))
            sizes[nsizes++] = atof(t);
    } else if (o->sizes) {
        double a, b;
        if (sscanf(o->sizes, "%lf..%lf", &a, &b) != 2 || a <= 0 || b < a)
            return usage("--sizes A..B (powers of ten from A to B)");
        for (double v = a; v <= b * 1.0001 && nsizes < 32; v *= 10)
            sizes[nsizes++] = v;
    } else {
        sizes[nsizes++] = -1;
    }
    if (strcmp(o->format, "json"))
        printf("%-20s %12s %10s %10s %10s %10s %9s %8s %9s %8s\n", "op", "n", "median us", "p99 us", "GFLOP/s",
               "GB/s", "flop/byte", "%bw", "%compute", "bound");
    FILE *dat = NULL;
    char datpath[64] = "";
    if (o->plot) {
        snprintf(datpath, sizeof datpath, "/tmp/opdispatch-roofline-XXXXXX");
        int fd = mkstemp(datpath);
        dat = fd >= 0 ? fdopen(fd, "w") : NULL;
    }
    double ceil_bw = 0, ceil_fl = 0;
    int rc = EXIT_OK;
    for (int z = 0; z < nsizes && rc == EXIT_OK; z++) {
        char body[16384];
        size_t bl = (size_t)snprintf(body, sizeof body, "{\"op\":\"%s\",\"iterations\":%llu", op,
                                     (unsigned long long)(o->count ? o->count : 20));
        if (o->device)
            bl += (size_t)snprintf(body + bl, sizeof body - bl, ",\"device\":\"%s\"", o->device);
        bl += (size_t)snprintf(body + bl, sizeof body - bl, ",\"args\":[");
        bool first = true;
        for (int pass = 0; pass < 2; pass++) {
            if (pass == 1)
                bl += (size_t)snprintf(body + bl, sizeof body - bl, "],\"kwargs\":{"), first = true;
            for (int i = 0; i < o->nargs; i++) {
                char text[1024];
                const char *src = o->argv_args[i], *ph = sizes[z] >= 0 ? strstr(src, "{n}") : NULL;
                if (ph)
                    snprintf(text, sizeof text, "%.*s%lld%s", (int)(ph - src), src, (long long)sizes[z], ph + 3);
                else
                    snprintf(text, sizeof text, "%s", src);
                const char *name;
                char *j = bench_arg(text, &name);
                if (j && (name != NULL) == (pass == 1)) {
                    if (name)
                        bl += (size_t)snprintf(body + bl, sizeof body - bl, "%s\"%s\":%s", first ? "" : ",", name, j);
                    else
                        bl += (size_t)snprintf(body + bl, sizeof body - bl, "%s%s", first ? "" : ",", j);
                    first = false;
                }
                free(j);
            }
        }
        bl += (size_t)snprintf(body + bl, sizeof body - bl, "}}");
        if (bl >= sizeof body) {
            fprintf(stderr, "opdispatch: bench: arguments too long\n");
            rc = EXIT_USAGE;
            break;
        }
        char err[256];
        od_client_response r;
        if (od_client_request(c, "POST", "/v1/bench", body, bl, 0, &r, err, sizeof err) < 0) {
            fprintf(stderr, "opdispatch: %s: %s\n", od_client_url(c), err);
            rc = EXIT_TRANSPORT;
            break;
        }
        if ((rc = report_status(&r)) == EXIT_OK) {
            if (!strcmp(o->format, "json")) {
                fwrite(r.body, 1, r.len, stdout);
                putchar('\n');
            } else {
                json_t *j = json_loadb(r.body, r.len, 0, NULL);
                json_t *k = json_object_get(j, "kernel_us"), *cost = json_object_get(j, "cost"),
                       *ach = json_object_get(j, "achieved"), *fr = json_object_get(j, "fraction"),
                       *ce = json_object_get(j, "ceiling");
                json_t *fl = json_object_get(ach, "gflops"), *ai = json_object_get(cost, "arithmetic_intensity");
                char nbuf[32] = "-";
                if (sizes[z] >= 0)
                    snprintf(nbuf, sizeof nbuf, "%.0f", sizes[z]);
                printf("%-20s %12s %10.2f %10.2f %10s %10.2f %9s %7.0f%% %8s %8s\n",
                       json_string_value(json_object_get(j, "op")), nbuf,
                       json_number_value(json_object_get(k, "median")), json_number_value(json_object_get(k, "p99")),
                       json_is_number(fl) ? (snprintf(err, 32, "%.2f", json_number_value(fl)), err) : "-",
                       json_number_value(json_object_get(ach, "gbps")),
                       json_is_number(ai) ? (snprintf(err + 64, 32, "%.3g", json_number_value(ai)), err + 64) : "-",
                       100 * json_number_value(json_object_get(fr, "bandwidth")),
                       json_is_number(json_object_get(fr, "compute"))
                           ? (snprintf(err + 128, 32, "%.1f%%", 100 * json_number_value(json_object_get(fr, "compute"))), err + 128)
                           : "-",
                       json_string_value(json_object_get(j, "bound")));
                ceil_bw = json_number_value(json_object_get(ce, "gbps"));
                ceil_fl = json_number_value(json_object_get(ce, "gflops"));
                if (dat && json_is_number(fl) && json_is_number(ai))
                    fprintf(dat, "%g %g %g\n", json_number_value(ai), json_number_value(fl), sizes[z]);
                json_decref(j);
            }
        }
        od_client_response_free(&r);
    }
    if (dat) { /* the roofline: the two ceilings and the measured points */
        fclose(dat);
        char gp[64] = "/tmp/opdispatch-roofline-gp-XXXXXX";
        int fd = mkstemp(gp);
        FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
        if (f) {
            bool svg = strlen(o->plot) > 4 && !strcmp(o->plot + strlen(o->plot) - 4, ".svg");
            fprintf(f, "set terminal %s size 720,480\nset output '%s'\nset logscale xy\nset title '%s: roofline'\n"
                       "set xlabel 'flop per byte'\nset ylabel 'GFLOP/s'\nset xrange [0.01:1000]\n"
                       "plot (x * %g < %g ? x * %g : %g) title 'ceilings (%.0f GB/s, %.0f GFLOP/s)' with lines, "
                       "'%s' using 1:2 with points pt 7 title '%s'\n",
                    svg ? "svg" : "pngcairo", o->plot, op, ceil_bw, ceil_fl, ceil_bw, ceil_fl, ceil_bw, ceil_fl, datpath, op);
            fclose(f);
            char cmd[256];
            snprintf(cmd, sizeof cmd, "gnuplot '%s'", gp);
            if (system(cmd) != 0) {
                fprintf(stderr, "opdispatch: --plot: gnuplot failed (is gnuplot installed?)\n");
                rc = rc ? rc : EXIT_USAGE;
            }
            unlink(gp);
        }
        unlink(datpath);
    }
    return rc;
}

int main(int argc, char **argv)
{
    opts o = {.url = getenv("OD_URL"), .token = getenv("OD_TOKEN"), .connections = 1, .format = "table"};
    if (!o.url)
        o.url = "http://127.0.0.1:8000";
    const char *pos[4];
    int npos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        static const char *const with_value[] = {"--url", "--session", "--device", "--modes", "--grad-mode", "--arg",
                                                 "--connections", "--duration", "--count", "--rate", "--warmup",
                                                 "--sweep", "--format", "--plot", "--sizes", "--iterations", NULL};
        for (int k = 0; with_value[k]; k++)
            if (!strcmp(a, with_value[k]) && !v) {
                fprintf(stderr, "opdispatch: %s needs a value\n", a);
                return EXIT_USAGE;
            }
#define TAKES(flag) (!strcmp(a, flag) && (i++, 1))
        if (!strcmp(a, "--json"))
            o.json = true;
        else if (!strcmp(a, "--text"))
            o.text = true;
        else if (!strcmp(a, "--json-body"))
            o.json_body = true;
        else if (!strcmp(a, "-h") || !strcmp(a, "--help"))
            return usage(NULL), EXIT_OK;
        else if (TAKES("--url"))
            o.url = v;
        else if (TAKES("--session"))
            o.session = v;
        else if (TAKES("--device"))
            o.device = v;
        else if (TAKES("--modes"))
            o.modes = v;
        else if (TAKES("--grad-mode"))
            o.grad_mode = v;
        else if (TAKES("--arg")) {
            if (o.nargs == MAX_ARGS)
                return usage("too many --arg");
            o.argv_args[o.nargs++] = v;
        } else if (TAKES("--connections"))
            o.connections = atoi(v);
        else if (TAKES("--duration"))
            o.duration = atof(v);
        else if (TAKES("--count"))
            o.count = (uint64_t)atof(v);
        else if (TAKES("--rate"))
            o.rate = atof(v);
        else if (TAKES("--warmup"))
            o.warmup = atof(v);
        else if (TAKES("--sweep"))
            o.sweep = v;
        else if (TAKES("--format"))
            o.format = v;
        else if (TAKES("--plot"))
            o.plot = v;
        else if (TAKES("--sizes"))
            o.sizes = v;
        else if (TAKES("--iterations"))
            o.count = (uint64_t)atof(v);
        else if (a[0] == '-' && a[1] == '-')
            return usage("unknown option");
        else if (npos < 4)
            pos[npos++] = a;
        else
            return usage("too many arguments");
    }
    if (!npos)
        return usage("no command");
    if (strcmp(o.format, "table") && strcmp(o.format, "json") && strcmp(o.format, "csv"))
        return usage("--format: table, json or csv");
    char err[256];
    od_client *c = od_client_new(o.url, err, sizeof err);
    if (!c) {
        fprintf(stderr, "opdispatch: %s\n", err);
        return EXIT_TRANSPORT;
    }
    if (o.session)
        od_client_set_session(c, o.session);
    if (o.token && od_client_set_token(c, o.token) != 0) {
        od_client_free(c);
        fprintf(stderr, "opdispatch: out of memory\n");
        return EXIT_TRANSPORT;
    }
    const char *cmd = pos[0];
    int rc;
    char path[512];
    if (!strcmp(cmd, "ops"))
        rc = get_and_print(c, "/v1/ops", o.json, false, human_ops);
    else if (!strcmp(cmd, "stats"))
        rc = get_and_print(c, "/v1/stats", true, false, NULL);
    else if (!strcmp(cmd, "devices"))
        rc = get_and_print(c, "/v1/devices", true, false, NULL);
    else if (!strcmp(cmd, "keys"))
        rc = get_and_print(c, "/v1/keys", true, false, NULL);
    else if (!strcmp(cmd, "table") && npos == 2) {
        snprintf(path, sizeof path, "/v1/ops/%s%s", pos[1], o.text ? "?format=text" : "");
        rc = get_and_print(c, path, o.json, o.text, human_table);
    } else if (!strcmp(cmd, "call") && npos == 2)
        rc = cmd_call(c, pos[1], &o, false);
    else if (!strcmp(cmd, "explain") && npos == 2)
        rc = cmd_call(c, pos[1], &o, true);
    else if (!strcmp(cmd, "load") && npos == 2)
        rc = cmd_load(c, pos[1], &o);
    else if (!strcmp(cmd, "bench") && npos == 2)
        rc = cmd_bench(c, pos[1], &o);
    else
        rc = usage("unknown command or missing operator name");
    od_client_free(c);
    return rc;
}
