/* modes.c — the built-in modes: trace, profile, validate and override.
 *
 * Invariants: each mode's state belongs to one request on one thread (no
 * locks); a handler always either continues the call (od_mode_continue) or
 * answers it itself, and records what it saw in its own state only.
 * Reports are JSON values built here, with no JSON library.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "od_half.h"
#include "od_mode.h"
#include "od_ops.h"
#include "od_sbuf.h"

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- trace: every operator reached, in order, nested calls included ----
 * Recording copies shapes into one growing arena of int64 (no formatting,
 * no allocation per event once warm); the report formats them. */

typedef struct trace_ev {
    const od_op *op;
    int depth;
    od_keyset ks;
    uint64_t ns;
    od_status st;
    size_t in_off, out_off; /* into the arena; SIZE_MAX: none */
    int nin, nout;
} trace_ev;

typedef struct trace_state {
    trace_ev *ev;
    int n, cap, max, dropped, depth;
    int64_t *arena;
    size_t alen, acap;
    bool oom;
} trace_state;

static od_status trace_create(const od_mode_param *p, int np, void **state, od_error *err)
{
    trace_state *t = calloc(1, sizeof *t);
    if (!t)
        return od_error_set(err, OD_ENOMEM, "out of memory");
    t->max = 10000;
    for (int i = 0; i < np; i++) {
        if (!strcmp(p[i].key, "max_events")) {
            t->max = atoi(p[i].value);
            if (t->max < 1 || t->max > 1000000) {
                free(t);
                return od_error_set(err, OD_EINVAL, "max_events must be 1 to 1000000");
            }
        } else {
            free(t);
            return od_error_set(err, OD_EINVAL, "unknown setting '%.64s' (trace takes max_events)", p[i].key);
        }
    }
    *state = t;
    return OD_OK;
}

static bool arena_room(trace_state *t, size_t need)
{
    if (t->alen + need <= t->acap)
        return true;
    size_t nc = (t->acap ? t->acap * 2 : 1024) + need;
    int64_t *na = realloc(t->arena, nc * sizeof *na);
    if (!na) {
        t->oom = true;
        return false;
    }
    t->arena = na;
    t->acap = nc;
    return true;
}

/* Appends [arg, dtype, device type, device index, requires_grad, ndim,
 * sizes...] per tensor of vals; returns how many tensors. */
static int record_tensors(trace_state *t, const od_value *vals, int n, size_t *off)
{
    *off = t->alen;
    int count = 0;
    for (int i = 0; i < n; i++) {
        const od_value *v = &vals[i];
        od_tensor *const *ts = v->tag == OD_T_TENSOR ? &v->u.t : v->tag == OD_T_TENSOR_LIST ? v->u.list.items : NULL;
        size_t nt = v->tag == OD_T_TENSOR ? 1 : v->tag == OD_T_TENSOR_LIST ? v->u.list.n : 0;
        for (size_t j = 0; j < nt; j++) {
            const od_tensor *x = ts[j];
            if (!x || !arena_room(t, 6 + (size_t)x->ndim))
                continue;
            int64_t *a = t->arena + t->alen;
            a[0] = i;
            a[1] = x->dtype;
            a[2] = x->device.type;
            a[3] = x->device.index;
            a[4] = x->requires_grad;
            a[5] = x->ndim;
            memcpy(a + 6, x->sizes, (size_t)x->ndim * sizeof a[0]);
            t->alen += 6 + (size_t)x->ndim;
            count++;
        }
    }
    return count;
}

static od_status trace_handle(void *state, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    trace_state *t = state;
    int idx = -1;
    if (t->n < t->max && (t->n < t->cap || !t->oom)) {
        if (t->n == t->cap) {
            int nc = t->cap ? t->cap * 2 : 64;
            trace_ev *ne = realloc(t->ev, (size_t)nc * sizeof *ne);
            if (!ne)
                return od_error_set(err, OD_ENOMEM, "out of memory tracing");
            t->ev = ne;
            t->cap = nc;
        }
        idx = t->n++;
        trace_ev *e = &t->ev[idx];
        *e = (trace_ev){op, t->depth, ks & od_ks_below(OD_KEY_Mode), 0, OD_OK, 0, SIZE_MAX, 0, 0};
        e->nin = record_tensors(t, s->args, s->nargs, &e->in_off);
    } else {
        t->dropped++;
    }
    t->depth++;
    uint64_t t0 = now_ns();
    od_status st = od_mode_continue(op, ks, s, err);
    uint64_t dt = now_ns() - t0;
    t->depth--;
    if (idx >= 0) { /* t->ev may have moved */
        trace_ev *e = &t->ev[idx];
        e->ns = dt;
        e->st = st;
        if (st == OD_OK)
            e->nout = record_tensors(t, s->rets, s->nrets, &e->out_off);
    }
    return st;
}

static void put_recorded(od_sbuf *b, const trace_state *t, size_t off, int n)
{
    od_sbuf_printf(b, "[");
    const int64_t *a = t->arena + off;
    for (int k = 0; k < n; k++) {
        char shape[256], dev[32];
        int nd = (int)a[5];
        od_shape_print(a + 6, nd, shape, sizeof shape);
        od_device_print((od_device){(od_device_type)a[2], (int)a[3]}, dev, sizeof dev);
        od_sbuf_printf(b, "%s{\"arg\":%d,\"shape\":%s,\"dtype\":\"%s\",\"device\":\"%s\"%s}", k ? "," : "", (int)a[0],
             shape, od_dtype_name((od_dtype)a[1]), dev, a[4] ? ",\"requires_grad\":true" : "");
        a += 6 + nd;
    }
    od_sbuf_printf(b, "]");
}

static char *trace_report(void *state)
{
    trace_state *t = state;
    od_sbuf b = {0};
    od_sbuf_printf(&b, "{\"events\":[");
    for (int i = 0; i < t->n; i++) {
        trace_ev *e = &t->ev[i];
        char keys[256];
        od_ks_print(e->ks, keys, sizeof keys);
        od_sbuf_printf(&b, "%s{\"op\":\"%s\",\"depth\":%d,\"key\":\"%s\",\"keyset\":\"%s\",\"inputs\":", i ? "," : "",
             od_op_name(e->op), e->depth, od_key_name(od_ks_highest(e->ks)), keys);
        put_recorded(&b, t, e->in_off, e->nin);
        od_sbuf_printf(&b, ",\"outputs\":");
        if (e->out_off == SIZE_MAX)
            od_sbuf_printf(&b, "null");
        else
            put_recorded(&b, t, e->out_off, e->nout);
        od_sbuf_printf(&b, ",\"us\":%.3f,\"status\":\"%s\"}", (double)e->ns / 1000.0, od_status_code(e->st));
    }
    od_sbuf_printf(&b, "],\"dropped\":%d}", t->dropped);
    return od_sbuf_finish(&b);
}

static void trace_destroy(void *state)
{
    trace_state *t = state;
    free(t->ev);
    free(t->arena);
    free(t);
}

/* ---- profile: count and time per operator (inclusive of nested calls) ---- */

typedef struct prof_row {
    const od_op *op;
    uint64_t count, ns, errors;
} prof_row;

typedef struct prof_state {
    prof_row *rows;
    int n, cap;
} prof_state;

static od_status prof_create(const od_mode_param *p, int np, void **state, od_error *err)
{
    (void)p;
    if (np)
        return od_error_set(err, OD_EINVAL, "profile takes no settings");
    *state = calloc(1, sizeof(prof_state));
    return *state ? OD_OK : od_error_set(err, OD_ENOMEM, "out of memory");
}

static od_status prof_handle(void *state, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    prof_state *p = state;
    uint64_t t0 = now_ns();
    od_status st = od_mode_continue(op, ks, s, err);
    uint64_t dt = now_ns() - t0;
    int i = 0;
    while (i < p->n && p->rows[i].op != op)
        i++;
    if (i == p->n) {
        if (p->n == p->cap) {
            int nc = p->cap ? p->cap * 2 : 16;
            prof_row *nr = realloc(p->rows, (size_t)nc * sizeof *nr);
            if (!nr)
                return st;
            p->rows = nr;
            p->cap = nc;
        }
        p->rows[p->n++] = (prof_row){op, 0, 0, 0};
    }
    p->rows[i].count++;
    p->rows[i].ns += dt;
    p->rows[i].errors += st != OD_OK;
    return st;
}

static char *prof_report(void *state)
{
    prof_state *p = state;
    od_sbuf b = {0};
    od_sbuf_printf(&b, "{\"ops\":[");
    for (int i = 0; i < p->n; i++)
        od_sbuf_printf(&b, "%s{\"op\":\"%s\",\"count\":%llu,\"errors\":%llu,\"total_us\":%.3f,\"mean_us\":%.3f}", i ? "," : "",
             od_op_name(p->rows[i].op), (unsigned long long)p->rows[i].count,
             (unsigned long long)p->rows[i].errors, (double)p->rows[i].ns / 1000.0,
             (double)p->rows[i].ns / 1000.0 / (double)p->rows[i].count);
    od_sbuf_printf(&b, "]}");
    return od_sbuf_finish(&b);
}

static void prof_destroy(void *state)
{
    prof_state *p = state;
    free(p->rows);
    free(p);
}

/* ---- validate: 422 at the first NaN or Inf going in or coming out ---- */

static double elem(const void *base, od_dtype dt, int64_t off)
{
    switch (dt) {
    case OD_FLOAT32: return ((const float *)base)[off];
    case OD_FLOAT64: return ((const double *)base)[off];
    case OD_FLOAT16: return od_half_to_float(((const uint16_t *)base)[off]);
    case OD_BFLOAT16: return od_bf16_to_float(((const uint16_t *)base)[off]);
    default: return 0;
    }
}

/* The flat index of t's first non-finite element, or -1. */
static int64_t first_nonfinite(od_tensor *t, od_error *err, od_status *st)
{
    *st = OD_OK;
    if (!od_dtype_is_floating(t->dtype) || t->device.type == OD_DEV_META || od_tensor_numel(t) == 0)
        return -1;
    od_tensor *h = t;
    if (t->device.type != OD_DEV_CPU) {
        od_device cpu = {OD_DEV_CPU, 0};
        if ((*st = od_to_device(t, cpu, &h, err)) != OD_OK)
            return -1;
    }
    const char *base = od_tensor_data(h);
    int64_t n = od_tensor_numel(h), idx[OD_MAX_DIMS] = {0}, found = -1;
    for (int64_t k = 0; k < n; k++) {
        int64_t off = 0;
        for (int d = 0; d < h->ndim; d++)
            off += idx[d] * h->strides[d];
        if (!isfinite(elem(base, h->dtype, off))) {
            found = k;
            break;
        }
        for (int d = h->ndim - 1; d >= 0; d--) {
            if (++idx[d] < h->sizes[d])
                break;
            idx[d] = 0;
        }
    }
    if (h != t)
        od_tensor_release(h);
    return found;
}

static od_status check_values(const od_op *op, const od_value *vals, int n, const char *what, od_error *err)
{
    for (int i = 0; i < n; i++) {
        const od_value *v = &vals[i];
        od_tensor *const *ts = v->tag == OD_T_TENSOR ? &v->u.t : v->tag == OD_T_TENSOR_LIST ? v->u.list.items : NULL;
        size_t nt = v->tag == OD_T_TENSOR ? 1 : v->tag == OD_T_TENSOR_LIST ? v->u.list.n : 0;
        for (size_t j = 0; j < nt; j++) {
            if (!ts[j])
                continue;
            od_status st;
            int64_t at = first_nonfinite(ts[j], err, &st);
            if (st)
                return st;
            if (at >= 0)
                return od_error_set(err, OD_EMISMATCH,
                                    "validate: %s %s %d holds a non-finite value (NaN or Inf) at flat index %lld",
                                    od_op_name(op), what, i, (long long)at);
        }
    }
    return OD_OK;
}

static od_status validate_create(const od_mode_param *p, int np, void **state, od_error *err)
{
    (void)p;
    *state = NULL;
    return np ? od_error_set(err, OD_EINVAL, "validate takes no settings") : OD_OK;
}

static od_status validate_handle(void *state, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)state;
    od_status st = check_values(op, s->args, s->nargs, "input", err);
    if (st == OD_OK)
        st = od_mode_continue(op, ks, s, err);
    if (st == OD_OK && (st = check_values(op, s->rets, s->nrets, "output", err)) != OD_OK)
        od_stack_release_rets(s);
    return st;
}

/* ---- override: one operator's calls served by another operator ---- */

#define OVERRIDE_MAX 16
typedef struct override_state {
    const od_op *from[OVERRIDE_MAX], *to[OVERRIDE_MAX];
    int n;
    uint64_t hits;
} override_state;

static const od_op *find_op(const char *name)
{
    const od_op *op = od_op_find(name);
    if (!op && !strstr(name, "::")) {
        char q[256];
        snprintf(q, sizeof q, "od::%s", name);
        op = od_op_find(q);
    }
    return op;
}

static od_status override_create(const od_mode_param *p, int np, void **state, od_error *err)
{
    if (np < 1 || np > OVERRIDE_MAX)
        return od_error_set(err, OD_EINVAL, "override takes 1 to %d {\"op\": \"replacement\"} pairs", OVERRIDE_MAX);
    override_state *o = calloc(1, sizeof *o);
    if (!o)
        return od_error_set(err, OD_ENOMEM, "out of memory");
    for (int i = 0; i < np; i++) {
        const od_op *a = find_op(p[i].key), *b = find_op(p[i].value);
        od_status st = OD_OK;
        if (!a || !b)
            st = od_error_set(err, OD_EINVAL, "override: no operator named '%.128s'", !a ? p[i].key : p[i].value);
        else if (od_op_schema(a)->nargs != od_op_schema(b)->nargs ||
                 od_op_schema(a)->nrets != od_op_schema(b)->nrets)
            st = od_error_set(err, OD_EINVAL, "override: %s and %s do not take the same arguments", od_op_name(a),
                              od_op_name(b));
        if (st) {
            free(o);
            return st;
        }
        o->from[o->n] = a;
        o->to[o->n++] = b;
    }
    *state = o;
    return OD_OK;
}

static od_status override_handle(void *state, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    override_state *o = state;
    for (int i = 0; i < o->n; i++)
        if (o->from[i] == op) {
            o->hits++;
            return od_call(o->to[i], s, err); /* the next mode down sees the replacement */
        }
    return od_mode_continue(op, ks, s, err);
}

static char *override_report(void *state)
{
    override_state *o = state;
    od_sbuf b = {0};
    od_sbuf_printf(&b, "{\"replaced_calls\":%llu,\"map\":{", (unsigned long long)o->hits);
    for (int i = 0; i < o->n; i++)
        od_sbuf_printf(&b, "%s\"%s\":\"%s\"", i ? "," : "", od_op_name(o->from[i]), od_op_name(o->to[i]));
    od_sbuf_printf(&b, "}}");
    return od_sbuf_finish(&b);
}

static const od_mode_class g_builtin_modes[] = {
    {"trace", "every operator reached, in order, nested calls included: shapes, dtypes, devices, keys, time",
     trace_create, trace_handle, trace_report, trace_destroy},
    {"profile", "count and inclusive time per operator", prof_create, prof_handle, prof_report, prof_destroy},
    {"validate", "422 naming the first operator whose input or output holds NaN or Inf", validate_create,
     validate_handle, NULL, NULL},
    {"override", "{\"mm\": \"mm_reference\"}: an operator's calls served by another registered operator",
     override_create, override_handle, override_report, free},
};

od_status od_register_builtin_modes(od_error *err)
{
    od_status st = od_register_mode_fallback(err);
    for (size_t i = 0; !st && i < sizeof g_builtin_modes / sizeof g_builtin_modes[0]; i++)
        st = od_mode_register(&g_builtin_modes[i], err);
    return st;
}
