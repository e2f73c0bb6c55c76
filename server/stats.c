/* stats.c — lock-free per-thread counters and log-bucketed histograms.
 *
 * Invariants (see od_stats.h): a shard is written only by its owner thread;
 * every field is an atomic accessed with relaxed order, written by plain
 * load+store (one writer, so no read-modify-write is needed). Histograms
 * are allocated lazily per (operator, key), published with a release store.
 * Buckets: exact below 8 ns, then 8 per power of two (12.5% wide), so
 * percentiles are within about 6% and Prometheus buckets at powers of two
 * nanoseconds are exact sums of ours.
 */
#include <pthread.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "od_stats.h"

#define NB 328        /* 8 + 40 octaves * 8 */
#define NKEYS OD_NUM_RUNTIME_KEYS

typedef _Atomic uint64_t ctr;

typedef struct hist {
    ctr count, sum, min, max;
    ctr b[NB];
} hist;

typedef struct row {
    ctr req, req_err, bytes_in, bytes_out, dec_ns, inf_ns, enc_ns, ok_ns, err_ns, last_ms;
    ctr kcalls, kerrs;
    _Atomic(hist *) e2e, kern;
} row;

static const int statuses[] = {200, 204, 400, 404, 405, 408, 409, 413, 415, 422, 500, 501, 503, 507};
#define NSTATUS ((int)(sizeof statuses / sizeof statuses[0]) + 1) /* + "other" */

typedef struct route_row {
    ctr count[NSTATUS];
    ctr sum_ns;
} route_row;

typedef struct shard {
    _Atomic unsigned gen;
    row *rows;          /* nops * NKEYS */
    route_row *routes;  /* nroutes + 1 (the last: no route) */
    struct shard *next;
} shard;

static int g_nops, g_nroutes;
static const char *const *g_route_names;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static shard *g_shards;
static _Atomic unsigned g_gen = 1;
static struct timespec g_start, g_reset;
static _Thread_local shard *t_shard;

static inline uint64_t ld(ctr *c) { return atomic_load_explicit(c, memory_order_relaxed); }
static inline void st(ctr *c, uint64_t v) { atomic_store_explicit(c, v, memory_order_relaxed); }
static inline void add(ctr *c, uint64_t v) { st(c, ld(c) + v); }

static double secs_since(const struct timespec *t)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - t->tv_sec) + (double)(now.tv_nsec - t->tv_nsec) / 1e9;
}

void od_stats_init(int nops, const char *const *route_names, int nroutes)
{
    g_nops = nops;
    g_route_names = route_names;
    g_nroutes = nroutes;
    clock_gettime(CLOCK_MONOTONIC, &g_start);
    g_reset = g_start;
}

void od_stats_shutdown(void)
{
    pthread_mutex_lock(&g_lock);
    shard *s = g_shards;
    g_shards = NULL;
    pthread_mutex_unlock(&g_lock);
    while (s) {
        shard *n = s->next;
        for (int i = 0; i < g_nops * NKEYS; i++) {
            free(atomic_load(&s->rows[i].e2e));
            free(atomic_load(&s->rows[i].kern));
        }
        free(s->rows);
        free(s->routes);
        free(s);
        s = n;
    }
}

static void hist_zero(hist *h)
{
    st(&h->count, 0);
    st(&h->sum, 0);
    st(&h->min, UINT64_MAX);
    st(&h->max, 0);
    for (int i = 0; i < NB; i++)
        st(&h->b[i], 0);
}

static void shard_zero(shard *s)
{
    for (int i = 0; i < g_nops * NKEYS; i++) {
        row *r = &s->rows[i];
        ctr *fields[] = {&r->req, &r->req_err, &r->bytes_in, &r->bytes_out, &r->dec_ns, &r->inf_ns,
                         &r->enc_ns, &r->ok_ns, &r->err_ns, &r->last_ms, &r->kcalls, &r->kerrs};
        for (size_t f = 0; f < sizeof fields / sizeof fields[0]; f++)
            st(fields[f], 0);
        hist *h = atomic_load_explicit(&r->e2e, memory_order_relaxed);
        if (h)
            hist_zero(h);
        h = atomic_load_explicit(&r->kern, memory_order_relaxed);
        if (h)
            hist_zero(h);
    }
    for (int i = 0; i <= g_nroutes; i++) {
        for (int k = 0; k < NSTATUS; k++)
            st(&s->routes[i].count[k], 0);
        st(&s->routes[i].sum_ns, 0);
    }
}

/* This thread's shard, current generation; NULL if it cannot be made. */
static shard *my_shard(void)
{
    shard *s = t_shard;
    unsigned gen = atomic_load_explicit(&g_gen, memory_order_acquire);
    if (__builtin_expect(s != NULL, 1)) {
        if (atomic_load_explicit(&s->gen, memory_order_relaxed) != gen) {
            shard_zero(s);
            atomic_store_explicit(&s->gen, gen, memory_order_release);
        }
        return s;
    }
    if (g_nops == 0)
        return NULL;
    s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->rows = calloc((size_t)g_nops * NKEYS, sizeof *s->rows);
    s->routes = calloc((size_t)g_nroutes + 1, sizeof *s->routes);
    if (!s->rows || !s->routes) {
        free(s->rows);
        free(s->routes);
        free(s);
        return NULL;
    }
    atomic_init(&s->gen, gen);
    pthread_mutex_lock(&g_lock);
    s->next = g_shards;
    g_shards = s;
    pthread_mutex_unlock(&g_lock);
    t_shard = s;
    return s;
}

static inline int bucket_of(uint64_t v)
{
    if (v < 8)
        return (int)v;
    int e = 63 - __builtin_clzll(v);
    int idx = 8 + (e - 3) * 8 + (int)((v >> (e - 3)) & 7);
    return idx < NB ? idx : NB - 1;
}

static inline uint64_t bucket_lo(int idx)
{
    if (idx < 8)
        return (uint64_t)idx;
    int e = (idx - 8) / 8 + 3, sub = (idx - 8) % 8;
    return (uint64_t)(8 + sub) << (e - 3);
}

static inline uint64_t bucket_width(int idx) { return idx < 8 ? 1 : (uint64_t)1 << ((idx - 8) / 8); }

static hist *get_hist(_Atomic(hist *) *slot)
{
    hist *h = atomic_load_explicit(slot, memory_order_relaxed);
    if (__builtin_expect(h != NULL, 1))
        return h;
    h = calloc(1, sizeof *h);
    if (!h)
        return NULL;
    atomic_init(&h->min, UINT64_MAX);
    atomic_store_explicit(slot, h, memory_order_release);
    return h;
}

static inline void hist_add(hist *h, uint64_t v)
{
    add(&h->count, 1);
    add(&h->sum, v);
    if (v < ld(&h->min))
        st(&h->min, v);
    if (v > ld(&h->max))
        st(&h->max, v);
    add(&h->b[bucket_of(v)], 1);
}

static inline row *row_of(shard *s, int opid, od_key key)
{
    if (opid < 0 || opid >= g_nops || (unsigned)key >= NKEYS)
        return NULL;
    return &s->rows[(size_t)opid * NKEYS + (size_t)key];
}

void od_stats_kernel(const od_op *op, od_key key, od_status stt, uint64_t ns)
{
    shard *s = my_shard();
    row *r = s ? row_of(s, od_op_id(op), key) : NULL;
    if (!r)
        return;
    add(&r->kcalls, 1);
    if (stt != OD_OK)
        add(&r->kerrs, 1);
    hist *h = get_hist(&r->kern);
    if (h)
        hist_add(h, ns);
}

void od_stats_request(const od_req_sample *q)
{
    shard *s = my_shard();
    row *r = s && q->op ? row_of(s, od_op_id(q->op), q->key) : NULL;
    if (!r)
        return;
    add(&r->req, 1);
    if (!q->ok)
        add(&r->req_err, 1);
    add(&r->bytes_in, q->bytes_in);
    add(&r->bytes_out, q->bytes_out);
    add(&r->dec_ns, q->decode_ns);
    add(&r->inf_ns, q->infer_ns);
    add(&r->enc_ns, q->encode_ns);
    add(q->ok ? &r->ok_ns : &r->err_ns, q->e2e_ns);
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    st(&r->last_ms, (uint64_t)now.tv_sec * 1000u + (uint64_t)now.tv_nsec / 1000000u);
    hist *h = get_hist(&r->e2e);
    if (h)
        hist_add(h, q->e2e_ns);
}

void od_stats_route(int route, int http_status, uint64_t ns)
{
    shard *s = my_shard();
    if (!s)
        return;
    if (route < 0 || route >= g_nroutes)
        route = g_nroutes;
    int k = NSTATUS - 1;
    for (int i = 0; i < NSTATUS - 1; i++)
        if (statuses[i] == http_status)
            k = i;
    add(&s->routes[route].count[k], 1);
    add(&s->routes[route].sum_ns, ns);
}

void od_stats_reset(void)
{
    atomic_fetch_add_explicit(&g_gen, 1, memory_order_acq_rel);
    clock_gettime(CLOCK_MONOTONIC, &g_reset);
}

/* ---- merging ------------------------------------------------------------- */

typedef struct mhist {
    uint64_t count, sum, min, max;
    uint64_t b[NB];
} mhist;

typedef struct mrow {
    uint64_t req, req_err, bytes_in, bytes_out, dec_ns, inf_ns, enc_ns, ok_ns, err_ns, last_ms;
    uint64_t kcalls, kerrs;
    mhist *e2e, *kern; /* NULL when no shard has one */
} mrow;

typedef struct merged {
    mrow *rows;
    uint64_t (*routes)[NSTATUS];
    uint64_t *route_ns;
} merged;

/* Adds h (may be NULL) into *dst, allocating it on first use; false when
 * that allocation fails (the merge is then incomplete and must not be shown). */
static bool mhist_add(mhist **dst, hist *h)
{
    if (!h)
        return true;
    if (!*dst) {
        *dst = calloc(1, sizeof **dst);
        if (!*dst)
            return false;
        (*dst)->min = UINT64_MAX;
    }
    mhist *m = *dst;
    m->count += ld(&h->count);
    m->sum += ld(&h->sum);
    uint64_t mn = ld(&h->min), mx = ld(&h->max);
    if (mn < m->min)
        m->min = mn;
    if (mx > m->max)
        m->max = mx;
    for (int i = 0; i < NB; i++)
        m->b[i] += ld(&h->b[i]);
    return true;
}

static bool merge(merged *m)
{
    size_t nrows = (size_t)g_nops * NKEYS;
    m->rows = calloc(nrows ? nrows : 1, sizeof *m->rows);
    m->routes = calloc((size_t)g_nroutes + 1, sizeof *m->routes);
    m->route_ns = calloc((size_t)g_nroutes + 1, sizeof *m->route_ns);
    if (!m->rows || !m->routes || !m->route_ns)
        return false;
    unsigned gen = atomic_load_explicit(&g_gen, memory_order_acquire);
    bool ok = true;
    pthread_mutex_lock(&g_lock);
    for (shard *s = g_shards; s; s = s->next) {
        if (atomic_load_explicit(&s->gen, memory_order_acquire) != gen)
            continue; /* not yet zeroed since the reset: counts as zero */
        for (size_t i = 0; i < nrows; i++) {
            row *r = &s->rows[i];
            mrow *o = &m->rows[i];
            o->req += ld(&r->req);
            o->req_err += ld(&r->req_err);
            o->bytes_in += ld(&r->bytes_in);
            o->bytes_out += ld(&r->bytes_out);
            o->dec_ns += ld(&r->dec_ns);
            o->inf_ns += ld(&r->inf_ns);
            o->enc_ns += ld(&r->enc_ns);
            o->ok_ns += ld(&r->ok_ns);
            o->err_ns += ld(&r->err_ns);
            uint64_t lm = ld(&r->last_ms);
            if (lm > o->last_ms)
                o->last_ms = lm;
            o->kcalls += ld(&r->kcalls);
            o->kerrs += ld(&r->kerrs);
            ok &= mhist_add(&o->e2e, atomic_load_explicit(&r->e2e, memory_order_acquire));
            ok &= mhist_add(&o->kern, atomic_load_explicit(&r->kern, memory_order_acquire));
        }
        for (int i = 0; i <= g_nroutes; i++) {
            for (int k = 0; k < NSTATUS; k++)
                m->routes[i][k] += ld(&s->routes[i].count[k]);
            m->route_ns[i] += ld(&s->routes[i].sum_ns);
        }
    }
    pthread_mutex_unlock(&g_lock);
    return ok;
}

static void merged_free(merged *m)
{
    if (m->rows)
        for (size_t i = 0; i < (size_t)g_nops * NKEYS; i++) {
            free(m->rows[i].e2e);
            free(m->rows[i].kern);
        }
    free(m->rows);
    free(m->routes);
    free(m->route_ns);
}

/* Value at quantile q: the middle of the bucket holding the rank, clamped
 * to the observed min and max. */
static double quantile_ns(const mhist *h, double q)
{
    if (!h || h->count == 0)
        return 0;
    uint64_t rank = (uint64_t)(q * (double)h->count + 0.999999);
    if (rank < 1)
        rank = 1;
    uint64_t cum = 0;
    for (int i = 0; i < NB; i++) {
        cum += h->b[i];
        if (cum >= rank) {
            double v = (double)bucket_lo(i) + (double)(bucket_width(i) - 1) / 2.0;
            if (v < (double)h->min)
                v = (double)h->min;
            if (v > (double)h->max)
                v = (double)h->max;
            return v;
        }
    }
    return (double)h->max;
}

static void put_us(od_buf *b, const char *key, double ns, bool comma)
{
    od_buf_printf(b, "%s\"%s\":%.3f", comma ? "," : "", key, ns / 1000.0);
}

static void hist_json(od_buf *b, const mhist *h)
{
    od_buf_putc(b, '{');
    uint64_t n = h ? h->count : 0;
    od_buf_printf(b, "\"count\":%llu", (unsigned long long)n);
    put_us(b, "sum", n ? (double)h->sum : 0, true);
    put_us(b, "min", n ? (double)h->min : 0, true);
    put_us(b, "max", n ? (double)h->max : 0, true);
    put_us(b, "mean", n ? (double)h->sum / (double)n : 0, true);
    put_us(b, "p50", quantile_ns(h, 0.50), true);
    put_us(b, "p90", quantile_ns(h, 0.90), true);
    put_us(b, "p99", quantile_ns(h, 0.99), true);
    put_us(b, "p999", quantile_ns(h, 0.999), true);
    od_buf_putc(b, '}');
}

static bool row_used(const mrow *r) { return r->req || r->kcalls; }

void od_stats_json(od_buf *b)
{
    merged m = {0};
    if (!merge(&m)) {
        merged_free(&m);
        b->oom = true;
        return;
    }
    od_buf_printf(b, "{\"uptime_s\":%.3f,\"since_reset_s\":%.3f,\"ops\":[", secs_since(&g_start),
                  secs_since(&g_reset));
    bool first_op = true;
    for (int op = 0; op < g_nops; op++) {
        mrow tot = {0};
        mhist *e2e_all = NULL;
        bool used = false;
        for (int k = 0; k < NKEYS; k++) {
            mrow *r = &m.rows[(size_t)op * NKEYS + (size_t)k];
            if (!row_used(r))
                continue;
            used = true;
            tot.req += r->req;
            tot.req_err += r->req_err;
            tot.bytes_in += r->bytes_in;
            tot.bytes_out += r->bytes_out;
            tot.kcalls += r->kcalls;
            tot.kerrs += r->kerrs;
            tot.dec_ns += r->dec_ns;
            tot.inf_ns += r->inf_ns;
            tot.enc_ns += r->enc_ns;
            if (r->e2e) {
                if (!e2e_all && (e2e_all = calloc(1, sizeof *e2e_all)))
                    e2e_all->min = UINT64_MAX;
                else if (!e2e_all)
                    b->oom = true; /* a histogram left out would read as "no calls": 507 instead */
                if (e2e_all) {
                    e2e_all->count += r->e2e->count;
                    e2e_all->sum += r->e2e->sum;
                    if (r->e2e->min < e2e_all->min)
                        e2e_all->min = r->e2e->min;
                    if (r->e2e->max > e2e_all->max)
                        e2e_all->max = r->e2e->max;
                    for (int i = 0; i < NB; i++)
                        e2e_all->b[i] += r->e2e->b[i];
                }
            }
        }
        if (!used)
            continue;
        const od_op *o = od_op_at(op);
        od_buf_puts(b, first_op ? "{\"op\":" : ",{\"op\":");
        first_op = false;
        od_buf_json_str(b, o ? od_op_name(o) : "?");
        od_buf_printf(b,
                      ",\"requests\":%llu,\"errors\":%llu,\"bytes_in\":%llu,\"bytes_out\":%llu,"
                      "\"kernel_calls\":%llu,\"kernel_errors\":%llu,\"e2e_us\":",
                      (unsigned long long)tot.req, (unsigned long long)tot.req_err,
                      (unsigned long long)tot.bytes_in, (unsigned long long)tot.bytes_out,
                      (unsigned long long)tot.kcalls, (unsigned long long)tot.kerrs);
        hist_json(b, e2e_all);
        free(e2e_all);
        /* where the server's time went, summed: what a load generator diffs */
        od_buf_printf(b, ",\"server_us\":{\"decode\":%.3f,\"dispatch\":%.3f,\"encode\":%.3f}",
                      (double)tot.dec_ns / 1000.0, (double)tot.inf_ns / 1000.0, (double)tot.enc_ns / 1000.0);
        od_buf_puts(b, ",\"keys\":[");
        bool first_key = true;
        for (int k = NKEYS - 1; k >= 0; k--) {
            mrow *r = &m.rows[(size_t)op * NKEYS + (size_t)k];
            if (!row_used(r))
                continue;
            od_buf_puts(b, first_key ? "{\"key\":" : ",{\"key\":");
            first_key = false;
            od_buf_json_str(b, od_key_name((od_key)k));
            od_buf_printf(b,
                          ",\"requests\":%llu,\"errors\":%llu,\"bytes_in\":%llu,\"bytes_out\":%llu,"
                          "\"kernel_calls\":%llu,\"kernel_errors\":%llu,\"e2e_us\":",
                          (unsigned long long)r->req, (unsigned long long)r->req_err,
                          (unsigned long long)r->bytes_in, (unsigned long long)r->bytes_out,
                          (unsigned long long)r->kcalls, (unsigned long long)r->kerrs);
            hist_json(b, r->e2e);
            od_buf_puts(b, ",\"kernel_us\":");
            hist_json(b, r->kern);
            od_buf_putc(b, '}');
        }
        od_buf_puts(b, "]}");
    }
    od_buf_puts(b, "],\"routes\":[");
    bool first = true;
    for (int i = 0; i <= g_nroutes; i++) {
        uint64_t tot = 0;
        for (int k = 0; k < NSTATUS; k++)
            tot += m.routes[i][k];
        if (!tot)
            continue;
        od_buf_puts(b, first ? "{\"route\":" : ",{\"route\":");
        first = false;
        od_buf_json_str(b, i < g_nroutes ? g_route_names[i] : "(no route)");
        od_buf_printf(b, ",\"requests\":%llu,\"mean_us\":%.3f,\"statuses\":{", (unsigned long long)tot,
                      (double)m.route_ns[i] / 1000.0 / (double)tot);
        bool fs = true;
        for (int k = 0; k < NSTATUS; k++) {
            if (!m.routes[i][k])
                continue;
            if (k < NSTATUS - 1)
                od_buf_printf(b, "%s\"%d\":%llu", fs ? "" : ",", statuses[k],
                              (unsigned long long)m.routes[i][k]);
            else
                od_buf_printf(b, "%s\"other\":%llu", fs ? "" : ",", (unsigned long long)m.routes[i][k]);
            fs = false;
        }
        od_buf_puts(b, "}}");
    }
    od_buf_puts(b, "]}");
    merged_free(&m);
}

/* ---- Prometheus text format ------------------------------------------------ */

static void prom_labels(od_buf *b, const od_op *op, int key)
{
    od_buf_puts(b, "{op=\"");
    od_buf_puts(b, op ? od_op_name(op) : "?"); /* names are [A-Za-z0-9_:.]: no escaping */
    od_buf_puts(b, "\",key=\"");
    od_buf_puts(b, od_key_name((od_key)key));
    od_buf_putc(b, '"');
}

static void prom_hist(od_buf *b, const char *name, const od_op *op, int key, const mhist *h)
{
    uint64_t cum = 0;
    int bi = 0;
    /* le = 2^k ns for k = 10..36 (1.024 us .. 68.7 s): bucket i ends below
     * 2^k exactly when its octave is below k. */
    for (int k = 10; k <= 36; k++) {
        uint64_t bound = (uint64_t)1 << k;
        while (bi < NB && bucket_lo(bi) + bucket_width(bi) <= bound)
            cum += h->b[bi++];
        od_buf_printf(b, "%s_bucket", name);
        prom_labels(b, op, key);
        od_buf_printf(b, ",le=\"%.9g\"} %llu\n", (double)bound / 1e9, (unsigned long long)cum);
    }
    od_buf_printf(b, "%s_bucket", name);
    prom_labels(b, op, key);
    od_buf_printf(b, ",le=\"+Inf\"} %llu\n", (unsigned long long)h->count);
    od_buf_printf(b, "%s_sum", name);
    prom_labels(b, op, key);
    od_buf_printf(b, "} %.9f\n", (double)h->sum / 1e9);
    od_buf_printf(b, "%s_count", name);
    prom_labels(b, op, key);
    od_buf_printf(b, "} %llu\n", (unsigned long long)h->count);
}

void od_stats_prometheus(od_buf *b)
{
    merged m = {0};
    if (!merge(&m)) {
        merged_free(&m);
        b->oom = true;
        return;
    }
    od_buf_printf(b,
                  "# HELP od_uptime_seconds Seconds since opdispatchd started.\n"
                  "# TYPE od_uptime_seconds gauge\nod_uptime_seconds %.3f\n",
                  secs_since(&g_start));
    static const struct {
        const char *name, *help;
        size_t off;
    } counters[] = {
        {"od_op_requests_total", "HTTP requests per operator and the dispatch key they reached.",
         offsetof(mrow, req)},
        {"od_op_request_errors_total", "Failed HTTP requests per operator and dispatch key.",
         offsetof(mrow, req_err)},
        {"od_op_bytes_in_total", "Tensor bytes received per operator and dispatch key.",
         offsetof(mrow, bytes_in)},
        {"od_op_bytes_out_total", "Tensor bytes sent per operator and dispatch key.",
         offsetof(mrow, bytes_out)},
        {"od_kernel_calls_total", "Kernel runs per operator and key (redispatches included).",
         offsetof(mrow, kcalls)},
        {"od_kernel_errors_total", "Kernel runs that returned an error.", offsetof(mrow, kerrs)},
    };
    for (size_t c = 0; c < sizeof counters / sizeof counters[0]; c++) {
        od_buf_printf(b, "# HELP %s %s\n# TYPE %s counter\n", counters[c].name, counters[c].help,
                      counters[c].name);
        for (int op = 0; op < g_nops; op++)
            for (int k = 0; k < NKEYS; k++) {
                mrow *r = &m.rows[(size_t)op * NKEYS + (size_t)k];
                if (!row_used(r))
                    continue;
                od_buf_puts(b, counters[c].name);
                prom_labels(b, od_op_at(op), k);
                od_buf_printf(b, "} %llu\n",
                              (unsigned long long)*(const uint64_t *)((const char *)r + counters[c].off));
            }
    }
    static const struct {
        const char *name, *help;
        bool kern;
    } hists[] = {
        {"od_op_request_duration_seconds",
         "End-to-end server time of HTTP requests (decode, dispatch, kernel, encode).", false},
        {"od_kernel_duration_seconds", "Time inside the kernel at each dispatch key.", true},
    };
    for (size_t hI = 0; hI < 2; hI++) {
        od_buf_printf(b, "# HELP %s %s\n# TYPE %s histogram\n", hists[hI].name, hists[hI].help,
                      hists[hI].name);
        for (int op = 0; op < g_nops; op++)
            for (int k = 0; k < NKEYS; k++) {
                mrow *r = &m.rows[(size_t)op * NKEYS + (size_t)k];
                const mhist *h = hists[hI].kern ? r->kern : r->e2e;
                if (h && h->count)
                    prom_hist(b, hists[hI].name, od_op_at(op), k, h);
            }
    }
    od_buf_puts(b, "# HELP od_http_requests_total HTTP requests per route and status.\n"
                   "# TYPE od_http_requests_total counter\n");
    for (int i = 0; i <= g_nroutes; i++)
        for (int k = 0; k < NSTATUS; k++) {
            if (!m.routes[i][k])
                continue;
            od_buf_puts(b, "od_http_requests_total{route=\"");
            od_buf_puts(b, i < g_nroutes ? g_route_names[i] : "(no route)");
            if (k < NSTATUS - 1)
                od_buf_printf(b, "\",status=\"%d\"} %llu\n", statuses[k],
                              (unsigned long long)m.routes[i][k]);
            else
                od_buf_printf(b, "\",status=\"other\"} %llu\n", (unsigned long long)m.routes[i][k]);
        }
    merged_free(&m);
}

/* ---- Triton's statistics extension ------------------------------------------ */

void od_model_name(const od_op *op, char *buf, size_t cap)
{
    const char *n = od_op_name(op);
    const char *c = strstr(n, "::");
    snprintf(buf, cap, "%s", c ? c + 2 : n);
}

static void triton_entry(od_buf *b, const od_op *op, const merged *m)
{
    mrow tot = {0};
    int id = od_op_id(op);
    for (int k = 0; k < NKEYS && id >= 0 && id < g_nops; k++) {
        const mrow *r = &m->rows[(size_t)id * NKEYS + (size_t)k];
        tot.req += r->req;
        tot.req_err += r->req_err;
        tot.dec_ns += r->dec_ns;
        tot.inf_ns += r->inf_ns;
        tot.enc_ns += r->enc_ns;
        tot.ok_ns += r->ok_ns;
        tot.err_ns += r->err_ns;
        if (r->last_ms > tot.last_ms)
            tot.last_ms = r->last_ms;
    }
    uint64_t ok = tot.req - tot.req_err;
    char name[256];
    od_model_name(op, name, sizeof name);
    od_buf_puts(b, "{\"name\":");
    od_buf_json_str(b, name);
    od_buf_printf(b,
                  ",\"version\":\"1\",\"last_inference\":%llu,\"inference_count\":%llu,"
                  "\"execution_count\":%llu,\"inference_stats\":{"
                  "\"success\":{\"count\":%llu,\"ns\":%llu},"
                  "\"fail\":{\"count\":%llu,\"ns\":%llu},"
                  "\"queue\":{\"count\":%llu,\"ns\":0},"
                  "\"compute_input\":{\"count\":%llu,\"ns\":%llu},"
                  "\"compute_infer\":{\"count\":%llu,\"ns\":%llu},"
                  "\"compute_output\":{\"count\":%llu,\"ns\":%llu},"
                  "\"cache_hit\":{\"count\":0,\"ns\":0},\"cache_miss\":{\"count\":0,\"ns\":0}},"
                  "\"batch_stats\":[]}",
                  (unsigned long long)tot.last_ms, (unsigned long long)ok, (unsigned long long)ok,
                  (unsigned long long)ok, (unsigned long long)tot.ok_ns,
                  (unsigned long long)tot.req_err, (unsigned long long)tot.err_ns,
                  (unsigned long long)ok, (unsigned long long)ok, (unsigned long long)tot.dec_ns,
                  (unsigned long long)ok, (unsigned long long)tot.inf_ns, (unsigned long long)ok,
                  (unsigned long long)tot.enc_ns);
}

void od_stats_triton(od_buf *b, const od_op *op)
{
    merged m = {0};
    if (!merge(&m)) {
        merged_free(&m);
        b->oom = true;
        return;
    }
    od_buf_puts(b, "{\"model_stats\":[");
    if (op) {
        triton_entry(b, op, &m);
    } else {
        for (int i = 0; i < g_nops; i++) {
            if (i)
                od_buf_putc(b, ',');
            triton_entry(b, od_op_at(i), &m);
        }
    }
    od_buf_puts(b, "]}");
    merged_free(&m);
}
