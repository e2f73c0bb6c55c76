/* bench.c — POST /v1/bench: an operator run many times on server-side
 * inputs, timed per call, with its cost model against the device's measured
 * ceilings (only with --enable-bench).
 *
 * Invariants:
 *  - Bounded: at most OD_BENCH_MAX_ITERS runs and max_seconds (never more
 *    than --max-call-seconds); inputs obey the same limits as a call's.
 *  - Inputs are bound like a call's ({"ref"} to stored tensors included),
 *    plus {"generate": "rand"|"randn"|"ones"|"zeros", "shape", "dtype"}
 *    made on the device itself, so a large input is never sent.
 *  - Every CUDA operator is synchronous (kernels/cuda/cuda_internal.h), so
 *    the host clock around a call is its device time.
 *  - The ceilings (memory bandwidth: clone of 64 MiB of float32; compute:
 *    mm of 1024x1024 float32, both through the dispatcher on the device)
 *    are measured once per device type, on first use, under a mutex.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "od_cost.h"
#include "od_parallel.h"
#include "od_server.h"

#define OD_BENCH_MAX_ITERS 100000
#define MAX_GEN 16

typedef struct bench {
    od_req *r;
    od_tensor *gen[MAX_GEN];
    int ngen;
} bench;

static od_status bench_ref(void *ctx, const char *id, od_tensor **out, od_error *err)
{
    bench *b = ctx;
    if (!strncmp(id, "gen:", 4)) {
        int i = atoi(id + 4);
        if (i < 0 || i >= b->ngen)
            return od_error_set(err, OD_EINTERNAL, "bad generated input %s", id);
        od_tensor_retain(b->gen[i]);
        *out = b->gen[i];
        return OD_OK;
    }
    return od_store_ref(b->r, id, out, err);
}

/* Makes each {"generate": ...} of v on dev and replaces it by a reference. */
static od_status generate(bench *b, json_t *v, od_device dev, od_error *err)
{
    if (json_is_array(v)) {
        size_t i;
        json_t *e;
        json_array_foreach(v, i, e) {
            od_status st = generate(b, e, dev, err);
            if (st)
                return st;
        }
        return OD_OK;
    }
    if (!json_is_object(v))
        return OD_OK;
    json_t *g = json_object_get(v, "generate");
    if (!g) {
        const char *k;
        json_t *e;
        json_object_foreach(v, k, e) {
            od_status st = generate(b, e, dev, err);
            if (st)
                return st;
        }
        return OD_OK;
    }
    static const struct {
        const char *name;
        od_opid id;
    } kinds[] = {{"rand", OD_OPID_rand}, {"randn", OD_OPID_randn}, {"ones", OD_OPID_ones}, {"zeros", OD_OPID_zeros}};
    int k = -1;
    for (int i = 0; i < 4; i++)
        if (json_is_string(g) && !strcmp(json_string_value(g), kinds[i].name))
            k = i;
    json_t *shape = json_object_get(v, "shape"), *jdt = json_object_get(v, "dtype");
    if (k < 0 || !json_is_array(shape) || json_array_size(shape) > OD_MAX_DIMS || (jdt && !json_is_string(jdt)))
        return od_error_set(err, OD_EINVAL,
                            "{\"generate\": \"rand\"|\"randn\"|\"ones\"|\"zeros\", \"shape\": [...], \"dtype\": ...}");
    if (b->ngen == MAX_GEN)
        return od_error_set(err, OD_ETOOLARGE, "at most %d generated inputs", MAX_GEN);
    int64_t sizes[OD_MAX_DIMS], numel = 1;
    size_t i;
    json_t *e;
    json_array_foreach(shape, i, e) {
        if (!json_is_integer(e) || json_integer_value(e) < 0)
            return od_error_set(err, OD_EINVAL, "generate: sizes must be non-negative integers");
        sizes[i] = json_integer_value(e);
        if (__builtin_mul_overflow(numel, sizes[i], &numel) || numel > od_cfg.max_elements)
            return od_error_set(err, OD_ETOOLARGE, "generate: more than --max-elements (%lld) elements",
                                (long long)od_cfg.max_elements);
    }
    od_dtype dt = jdt ? od_dtype_from_name(json_string_value(jdt)) : OD_FLOAT32;
    if (dt == OD_NUM_DTYPES)
        return od_error_set(err, OD_EINVAL, "generate: unknown dtype '%.40s'", json_string_value(jdt));
    od_value a[5] = {od_list_v(OD_T_INT_LIST, sizes, json_array_size(shape)), od_dtype_v(dt), od_none(),
                     od_device_v(dev), od_none()};
    od_status st = od_call_builtin1(kinds[k].id, a, 5, &b->gen[b->ngen], err);
    if (st)
        return st;
    char ref[32];
    snprintf(ref, sizeof ref, "gen:%d", b->ngen++);
    json_object_clear(v);
    json_object_set_new(v, "ref", json_string(ref));
    return OD_OK;
}

/* ---- ceilings ---- */

typedef struct ceiling {
    bool done;
    double gbps, gflops;
} ceiling;

static pthread_mutex_t g_ceil_lock = PTHREAD_MUTEX_INITIALIZER;
static ceiling g_ceil[OD_NUM_DEVICE_TYPES];

static double best_of(int n, od_status (*fn)(od_tensor *a, od_tensor *b, od_error *err), od_tensor *a, od_tensor *b,
                      od_error *err, od_status *st)
{
    double best = INFINITY;
    for (int i = 0; i < n && *st == OD_OK; i++) {
        uint64_t t0 = od_now_ns();
        *st = fn(a, b, err);
        double dt = (double)(od_now_ns() - t0) / 1e9;
        best = dt < best ? dt : best;
    }
    return best;
}

static od_status run_clone(od_tensor *a, od_tensor *b, od_error *err)
{
    (void)b;
    od_value v[2] = {od_tensor_v(a), od_none()};
    od_tensor *out = NULL;
    od_status st = od_call_builtin1(OD_OPID_clone, v, 2, &out, err);
    od_tensor_release(out);
    return st;
}

static od_status run_mm(od_tensor *a, od_tensor *b, od_error *err)
{
    od_tensor *out = NULL;
    od_status st = od_mm(a, b, &out, err);
    od_tensor_release(out);
    return st;
}

static od_status measure_ceiling(od_device dev, ceiling *out, od_error *err)
{
    pthread_mutex_lock(&g_ceil_lock);
    ceiling *c = &g_ceil[dev.type];
    od_status st = OD_OK;
    if (!c->done) {
        int64_t big = (int64_t)16 << 20, sq[2] = {1024, 1024};
        od_tensor *x = NULL, *m = NULL;
        od_value a[5] = {od_list_v(OD_T_INT_LIST, &big, 1), od_dtype_v(OD_FLOAT32), od_none(), od_device_v(dev), od_none()};
        od_value b[5] = {od_list_v(OD_T_INT_LIST, sq, 2), od_dtype_v(OD_FLOAT32), od_none(), od_device_v(dev), od_none()};
        st = od_call_builtin1(OD_OPID_rand, a, 5, &x, err);
        if (st == OD_OK)
            st = od_call_builtin1(OD_OPID_rand, b, 5, &m, err);
        double tc = st == OD_OK ? best_of(5, run_clone, x, NULL, err, &st) : 0;
        double tm = st == OD_OK ? best_of(3, run_mm, m, m, err, &st) : 0;
        if (st == OD_OK) {
            c->gbps = 2.0 * (double)od_tensor_nbytes(x) / tc / 1e9; /* read + write */
            c->gflops = 2.0 * 1024.0 * 1024.0 * 1024.0 / tm / 1e9;
            c->done = true;
        }
        od_tensor_release(x);
        od_tensor_release(m);
    }
    *out = *c;
    pthread_mutex_unlock(&g_ceil_lock);
    return st;
}

/* ---- the endpoint ---- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Both endpoints run operators on the server's own inputs: only when the
 * server was started to allow it. */
static bool bench_allowed(od_req *r, const char *what)
{
    if (od_cfg.enable_bench)
        return true;
    od_respond_error(r, OD_EFORBIDDEN,
                     "%s runs operators on the server's own inputs: start opdispatchd with --enable-bench (or "
                     "OD_ENABLE_BENCH=1) to allow it",
                     what);
    return false;
}

/* Frees what prepare made. */
static void unprepare(od_json_doc *doc, bench *bn, od_srv_call *c)
{
    od_srv_call_release(c);
    for (int i = 0; i < bn->ngen; i++)
        od_tensor_release(bn->gen[i]);
    bn->ngen = 0;
    od_json_doc_free(doc);
}

/* The part a benchmark and a load share: the body parsed (*doc new; its
 * root in *root), the operator resolved, generated inputs made, arguments
 * bound and one call run through the call path (which moves the inputs to
 * the device). fields: the body's allowed top-level keys. */
static od_status prepare(od_req *r, const char *const *fields, od_json_doc **doc, json_t **root, bench *bn,
                         od_srv_call *c, od_error *err)
{
    od_proto_limits lim = od_limits();
    lim.top_keys = fields;
    size_t jlen;
    const char *json = od_req_json(r, &jlen);
    od_status st = od_json_parse(json, jlen, &lim, doc, err);
    if (st == OD_OK && r->binary)
        st = od_json_attach_binary(*doc, r->body, r->hdr_len, r->body->len - r->hdr_len, err);
    *root = st == OD_OK ? od_json_root(*doc) : NULL;
    json_t *jop = json_object_get(*root, "op"), *args = json_object_get(*root, "args"),
           *kwargs = json_object_get(*root, "kwargs"), *jdev = json_object_get(*root, "device");
    if (st == OD_OK && !json_is_string(jop))
        st = od_error_set(err, OD_EINVAL, "the body must be {\"op\": name, \"args\": [...], ...}");
    if (st == OD_OK && ((args && !json_is_array(args)) || (kwargs && !json_is_object(kwargs)) ||
                        (jdev && !json_is_string(jdev))))
        st = od_error_set(err, OD_EINVAL, "\"args\" must be a list, \"kwargs\" an object and \"device\" a string");
    if (st == OD_OK && od_resolve_device(jdev ? json_string_value(jdev) : NULL, &c->device, err) != OD_OK)
        st = err->status;
    if (st == OD_OK && !(c->op = od_resolve_op_for_args(json_string_value(jop), args, kwargs, err)))
        st = err->status;
    r->op = c->op;
    if (st == OD_OK && (st = generate(bn, args, c->device, err)) == OD_OK)
        st = generate(bn, kwargs, c->device, err);
    if (st == OD_OK) {
        od_bind_opts bo = {.lim = &lim, .mode = OD_DECODE_DATA, .has_device = true, .device = c->device,
                           .ref = bench_ref, .ref_ctx = bn};
        st = od_proto_bind(c->op, *doc, args, kwargs, &bo, &c->bound, err);
    }
    c->keep = true;
    if (st == OD_OK && (st = od_srv_call_run(c)) != OD_OK)
        *err = c->err;
    return st;
}

void od_h_bench(od_req *r)
{
    if (!bench_allowed(r, "POST /v1/bench"))
        return;
    od_error err;
    od_error_clear(&err);
    static const char *const fields[] = {"op", "args", "kwargs", "device", "iterations", "warmup", "max_seconds", NULL};
    od_json_doc *doc = NULL;
    json_t *root = NULL;
    bench bn = {.r = r};
    od_srv_call c;
    od_srv_call_init(&c, NULL);
    double *times = NULL;
    od_status st = prepare(r, fields, &doc, &root, &bn, &c, &err);
    json_t *jit = json_object_get(root, "iterations"), *jwu = json_object_get(root, "warmup"),
           *jmax = json_object_get(root, "max_seconds");
    int64_t iters = json_is_integer(jit) ? json_integer_value(jit) : 20, warm = json_is_integer(jwu) ? json_integer_value(jwu) : 3;
    double max_s = jmax && json_is_number(jmax) ? json_number_value(jmax) : 10;
    if (st == OD_OK && ((jit && !json_is_integer(jit)) || iters < 1 || iters > OD_BENCH_MAX_ITERS ||
                        (jwu && !json_is_integer(jwu)) || warm < 0 || warm > 1000 || max_s <= 0))
        st = od_error_set(&err, OD_EINVAL, "iterations must be 1..%d, warmup 0..1000 and max_seconds > 0",
                          OD_BENCH_MAX_ITERS);
    if (od_cfg.max_call_seconds && max_s > od_cfg.max_call_seconds)
        max_s = od_cfg.max_call_seconds;
    od_cost cost = {0};
    if (st == OD_OK) {
        od_op_cost(c.op, &c.stack, &cost);
        od_stack_release_rets(&c.stack);
    }
    if (st == OD_OK && !(times = malloc((size_t)iters * sizeof *times)))
        st = od_error_set(&err, OD_ENOMEM, "out of memory");
    int64_t done = 0;
    uint64_t t_start = od_now_ns(), budget = (uint64_t)(max_s * 1e9);
    for (int64_t i = 0; st == OD_OK && i < warm + iters && od_now_ns() - t_start < budget; i++) {
        od_stack s;
        od_stack_init(&s, c.bound.args, c.bound.nargs);
        uint64_t t0 = od_now_ns();
        st = od_call(c.op, &s, &err);
        uint64_t dt = od_now_ns() - t0;
        od_stack_release_rets(&s);
        if (st == OD_OK && i >= warm)
            times[done++] = (double)dt / 1e3;
    }
    ceiling ceil = {0};
    if (st == OD_OK && done == 0)
        st = od_error_set(&err, OD_ETIMEOUT, "no timed run fit in max_seconds (%.3g s)", max_s);
    if (st == OD_OK)
        st = measure_ceiling(c.device, &ceil, &err);
    od_buf b;
    od_buf_init(&b);
    if (st == OD_OK) {
        qsort(times, (size_t)done, sizeof *times, cmp_double);
        double sum = 0;
        for (int64_t i = 0; i < done; i++)
            sum += times[i];
        double med = times[done / 2], p99 = times[(int64_t)((double)(done - 1) * 0.99)];
        double gbps = cost.bytes / (med * 1e-6) / 1e9, gflops = cost.has_flops ? cost.flops / (med * 1e-6) / 1e9 : 0;
        char dev[32];
        od_device_print(c.device, dev, sizeof dev);
        od_buf_puts(&b, "{\"op\":");
        od_buf_json_str(&b, od_op_name(c.op));
        od_buf_puts(&b, ",\"device\":");
        od_buf_json_str(&b, dev);
        od_buf_printf(&b,
                      ",\"iterations\":%lld,\"warmup\":%lld,\"kernel_us\":{\"min\":%.3f,\"median\":%.3f,\"mean\":%.3f,"
                      "\"p99\":%.3f,\"max\":%.3f},\"cost\":{\"bytes\":%.0f,\"flops\":",
                      (long long)done, (long long)warm, times[0], med, sum / (double)done, p99, times[done - 1],
                      cost.bytes);
        if (cost.has_flops)
            od_buf_printf(&b, "%.0f,\"arithmetic_intensity\":%.4g}", cost.flops, cost.bytes > 0 ? cost.flops / cost.bytes : 0.0);
        else
            od_buf_puts(&b, "null,\"arithmetic_intensity\":null}");
        od_buf_printf(&b, ",\"achieved\":{\"gbps\":%.4g,\"gflops\":", gbps);
        if (cost.has_flops)
            od_buf_printf(&b, "%.4g}", gflops);
        else
            od_buf_puts(&b, "null}");
        od_buf_printf(&b,
                      ",\"ceiling\":{\"gbps\":%.4g,\"gflops\":%.4g,\"measured_with\":\"clone of 64 MiB float32; "
                      "mm of 1024x1024 float32\"},\"fraction\":{\"bandwidth\":%.4g,\"compute\":",
                      ceil.gbps, ceil.gflops, gbps / ceil.gbps);
        if (cost.has_flops)
            od_buf_printf(&b, "%.4g}", gflops / ceil.gflops);
        else
            od_buf_puts(&b, "null}");
        /* the roofline's verdict: the nearer ceiling */
        bool compute = cost.has_flops && gflops / ceil.gflops > gbps / ceil.gbps;
        od_buf_printf(&b, ",\"bound\":\"%s\"}", compute ? "compute" : "memory");
        od_respond_buf(r, 200, "application/json", &b);
    } else {
        od_buf_free(&b);
        od_respond_od_error(r, &err);
    }
    free(times);
    unprepare(doc, &bn, &c);
}

/* ---- POST/GET/DELETE /v1/load: a bounded load run by the server itself ----
 * One at a time. Worker threads (concurrency, at most OD_LOAD_MAX_THREADS)
 * call the operator in a loop on the prepared inputs until the duration or
 * the count is reached or DELETE stops them; each call's time goes into a
 * log-bucketed histogram of the whole run and one of the current second,
 * which closes into the series every second. */

#define OD_LOAD_MAX_THREADS 8
#define OD_LOAD_MAX_SECONDS 120
#define OD_LOAD_MAX_COUNT 10000000
#define OD_LOAD_SERIES 600
#define HB 512 /* buckets: 16 per power of two of nanoseconds */

typedef struct lhist {
    uint64_t n, b[HB];
    uint64_t max;
} lhist;

static int hbucket(uint64_t ns)
{
    if (ns < 16)
        return (int)ns;
    int e = 63 - __builtin_clzll(ns);
    int i = 16 + (e - 4) * 16 + (int)((ns >> (e - 4)) & 15);
    return i < HB ? i : HB - 1;
}

static double hvalue(int i)
{
    if (i < 16)
        return i;
    int k = (i - 16) / 16, sub = (i - 16) % 16;
    return (double)((uint64_t)(16 + sub) << k) * (1.0 + 1.0 / 32); /* the bucket's middle */
}

static double hquant(const lhist *h, double q)
{
    if (!h->n)
        return 0;
    uint64_t rank = (uint64_t)(q * (double)h->n + 0.5), seen = 0;
    for (int i = 0; i < HB; i++)
        if ((seen += h->b[i]) >= (rank ? rank : 1))
            return hvalue(i) > (double)h->max ? (double)h->max : hvalue(i);
    return (double)h->max;
}

static void hadd(lhist *h, uint64_t ns)
{
    h->n++;
    h->b[hbucket(ns)]++;
    if (ns > h->max)
        h->max = ns;
}

typedef enum { L_IDLE, L_RUNNING, L_DONE, L_STOPPED, L_FAILED } lstate;
static const char *const lstate_name[] = {"idle", "running", "done", "stopped", "failed"};

typedef struct lpoint {
    double t, rps, p50_us, p99_us;
} lpoint;

static struct {
    pthread_mutex_t lock;
    lstate state;
    bool stop;
    int nthreads, running, concurrency;
    pthread_t threads[OD_LOAD_MAX_THREADS];
    od_json_doc *doc;
    bench bn;
    od_srv_call c;
    uint64_t t0, deadline, count, issued, done, errors;
    lhist all, second;
    uint64_t second_start, second_done;
    lpoint series[OD_LOAD_SERIES];
    int nseries;
    char message[256];
} L = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* Closes the current second into the series (lock held). */
static void close_second(uint64_t now)
{
    if (L.nseries < OD_LOAD_SERIES && now > L.second_start) {
        double dt = (double)(now - L.second_start) / 1e9;
        L.series[L.nseries++] = (lpoint){(double)(now - L.t0) / 1e9, (double)L.second_done / dt,
                                         hquant(&L.second, 0.5) / 1e3, hquant(&L.second, 0.99) / 1e3};
    }
    memset(&L.second, 0, sizeof L.second);
    L.second_done = 0;
    L.second_start = now;
}

static void *load_thread(void *unused)
{
    (void)unused;
    od_set_deadline(L.deadline);
    for (;;) {
        pthread_mutex_lock(&L.lock);
        bool go = !L.stop && (!L.count || L.issued < L.count) && od_now_ns() < L.deadline;
        if (go)
            L.issued++;
        pthread_mutex_unlock(&L.lock);
        if (!go)
            break;
        od_value args[OD_MAX_ARGS];
        memcpy(args, L.c.bound.args, (size_t)L.c.bound.nargs * sizeof args[0]);
        od_stack s;
        od_stack_init(&s, args, L.c.bound.nargs);
        od_error err;
        uint64_t t0 = od_now_ns();
        od_status st = od_call(L.c.op, &s, &err);
        uint64_t now = od_now_ns();
        od_stack_release_rets(&s);
        pthread_mutex_lock(&L.lock);
        L.done++;
        L.errors += st != OD_OK;
        if (st != OD_OK && !L.message[0] && !od_cancelled())
            snprintf(L.message, sizeof L.message, "%.200s", err.message);
        hadd(&L.all, now - t0);
        hadd(&L.second, now - t0);
        L.second_done++;
        if (now - L.second_start >= 1000000000u)
            close_second(now);
        pthread_mutex_unlock(&L.lock);
    }
    od_set_deadline(0);
    pthread_mutex_lock(&L.lock);
    bool last = --L.running == 0;
    if (last) {
        close_second(od_now_ns());
        L.state = L.stop ? L_STOPPED : L.errors && L.errors == L.done ? L_FAILED : L_DONE;
    }
    pthread_mutex_unlock(&L.lock);
    return NULL;
}

/* Joins finished threads and frees the run's inputs (lock not held). */
static void reap(void)
{
    pthread_mutex_lock(&L.lock);
    int n = L.nthreads;
    bool finished = (L.state != L_RUNNING || L.stop) && n > 0;
    pthread_mutex_unlock(&L.lock);
    if (!finished)
        return;
    for (int i = 0; i < n; i++)
        pthread_join(L.threads[i], NULL);
    pthread_mutex_lock(&L.lock);
    L.nthreads = 0;
    unprepare(L.doc, &L.bn, &L.c);
    L.doc = NULL;
    pthread_mutex_unlock(&L.lock);
}

static void load_json(od_buf *b)
{
    pthread_mutex_lock(&L.lock);
    double el = L.t0 ? (double)((L.state == L_RUNNING ? od_now_ns() : L.second_start) - L.t0) / 1e9 : 0;
    od_buf_printf(b, "{\"state\":\"%s\"", lstate_name[L.state]);
    if (L.state != L_IDLE) {
        od_buf_puts(b, ",\"op\":");
        od_buf_json_str(b, L.c.op ? od_op_name(L.c.op) : "?");
        od_buf_printf(b,
                      ",\"concurrency\":%d,\"elapsed_s\":%.3f,\"requests\":%llu,\"errors\":%llu,\"rps\":%.1f,"
                      "\"latency_us\":{\"p50\":%.3f,\"p90\":%.3f,\"p99\":%.3f,\"max\":%.3f},\"series\":[",
                      L.concurrency, el, (unsigned long long)L.done, (unsigned long long)L.errors,
                      el > 0 ? (double)L.done / el : 0.0, hquant(&L.all, 0.5) / 1e3, hquant(&L.all, 0.9) / 1e3,
                      hquant(&L.all, 0.99) / 1e3, (double)L.all.max / 1e3);
        for (int i = 0; i < L.nseries; i++)
            od_buf_printf(b, "%s{\"t\":%.3f,\"rps\":%.1f,\"p50_us\":%.3f,\"p99_us\":%.3f}", i ? "," : "",
                          L.series[i].t, L.series[i].rps, L.series[i].p50_us, L.series[i].p99_us);
        od_buf_putc(b, ']');
        if (L.message[0]) {
            od_buf_puts(b, ",\"message\":");
            od_buf_json_str(b, L.message);
        }
    }
    od_buf_putc(b, '}');
    pthread_mutex_unlock(&L.lock);
}

void od_h_load_start(od_req *r)
{
    if (!bench_allowed(r, "/v1/load"))
        return;
    reap();
    od_error err;
    od_error_clear(&err);
    pthread_mutex_lock(&L.lock);
    bool busy = L.state == L_RUNNING || L.nthreads > 0;
    pthread_mutex_unlock(&L.lock);
    if (busy) {
        od_respond_error(r, OD_EBUSY, "a load is already running (GET /v1/load watches it, DELETE /v1/load stops it)");
        return;
    }
    static const char *const fields[] = {"op", "args", "kwargs", "device", "duration_s", "count", "concurrency", NULL};
    od_json_doc *doc = NULL;
    json_t *root = NULL;
    bench bn = {.r = r};
    od_srv_call c;
    od_srv_call_init(&c, NULL);
    od_status st = prepare(r, fields, &doc, &root, &bn, &c, &err);
    bn.r = NULL; /* the run outlives the request: stored tensors were bound already */
    json_t *jd = json_object_get(root, "duration_s"), *jc = json_object_get(root, "count"),
           *jn = json_object_get(root, "concurrency");
    double dur = json_is_number(jd) ? json_number_value(jd) : jc ? OD_LOAD_MAX_SECONDS : 10;
    int64_t count = json_is_integer(jc) ? json_integer_value(jc) : 0;
    int64_t conc = json_is_integer(jn) ? json_integer_value(jn) : 1;
    if (st == OD_OK && ((jd && !json_is_number(jd)) || dur <= 0 || dur > OD_LOAD_MAX_SECONDS ||
                        (jc && !json_is_integer(jc)) || count < 0 || count > OD_LOAD_MAX_COUNT ||
                        (jn && !json_is_integer(jn)) || conc < 1 || conc > OD_LOAD_MAX_THREADS))
        st = od_error_set(&err, OD_EINVAL, "duration_s must be in (0, %d], count 0..%d and concurrency 1..%d",
                          OD_LOAD_MAX_SECONDS, OD_LOAD_MAX_COUNT, OD_LOAD_MAX_THREADS);
    if (st == OD_OK)
        od_stack_release_rets(&c.stack);
    if (st != OD_OK) {
        unprepare(doc, &bn, &c);
        od_respond_od_error(r, &err);
        return;
    }
    pthread_mutex_lock(&L.lock);
    L.doc = doc;
    L.bn = bn;
    L.c = c;
    L.state = L_RUNNING;
    L.stop = false;
    L.t0 = L.second_start = od_now_ns();
    L.deadline = L.t0 + (uint64_t)(dur * 1e9);
    L.count = (uint64_t)count;
    L.issued = L.done = L.errors = L.second_done = 0;
    memset(&L.all, 0, sizeof L.all);
    memset(&L.second, 0, sizeof L.second);
    L.nseries = 0;
    L.message[0] = '\0';
    L.nthreads = L.running = 0;
    L.concurrency = (int)conc;
    for (int i = 0; i < conc; i++)
        if (pthread_create(&L.threads[L.nthreads], NULL, load_thread, NULL) == 0) {
            L.nthreads++;
            L.running++;
        }
    if (!L.nthreads)
        L.state = L_FAILED;
    pthread_mutex_unlock(&L.lock);
    od_buf b;
    od_buf_init(&b);
    load_json(&b);
    od_respond_buf(r, 202, "application/json", &b);
}

void od_h_load_get(od_req *r)
{
    reap();
    od_buf b;
    od_buf_init(&b);
    load_json(&b);
    od_respond_buf(r, 200, "application/json", &b);
}

void od_load_stop(void)
{
    pthread_mutex_lock(&L.lock);
    L.stop = true;
    pthread_mutex_unlock(&L.lock);
    reap(); /* the threads check stop before every call; reap joins them */
}

void od_h_load_stop(od_req *r)
{
    if (!bench_allowed(r, "/v1/load"))
        return;
    od_load_stop();
    od_buf b;
    od_buf_init(&b);
    load_json(&b);
    od_respond_buf(r, 200, "application/json", &b);
}
