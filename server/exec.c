/* exec.c — a request's execution settings: grad mode, autocast, the mode
 * stack and vmap, read from the body of a call, a program or a session.
 *
 * Invariants: reading never allocates (the settings borrow the request's
 * JSON); applying them only changes this thread's dispatcher state through
 * the TLS guard API, and the caller restores what od_exec_enter returns, so
 * nothing leaks into the worker's next request.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "od_autograd.h"
#include "od_mode.h"
#include "od_vmap.h"
#include "od_server.h"

const char *const od_exec_fields[] = {"grad_mode", "autocast", "modes", "vmap", NULL};

void od_exec_init(od_exec *x)
{
    memset(x, 0, sizeof *x);
    x->autocast = OD_NUM_DTYPES;
}

static const char *const grad_mode_names[] = {"enabled", "no_grad", "inference_mode"};

int od_exec_field(od_exec *x, const char *key, json_t *v, od_error *err)
{
    if (!strcmp(key, "grad_mode")) {
        for (int i = 0; i < 3; i++)
            if (json_is_string(v) && !strcmp(json_string_value(v), grad_mode_names[i])) {
                x->grad_mode = (od_grad_mode)i;
                return 1;
            }
        od_error_set(err, OD_EINVAL, "\"grad_mode\" must be \"enabled\", \"no_grad\" or \"inference_mode\"");
        return -1;
    }
    if (!strcmp(key, "autocast")) {
        if (json_is_null(v) || json_is_false(v)) {
            x->autocast = OD_NUM_DTYPES;
            return 1;
        }
        od_dtype dt = json_is_string(v) ? od_dtype_from_name(json_string_value(v)) : OD_NUM_DTYPES;
        if (dt != OD_FLOAT16 && dt != OD_BFLOAT16) {
            od_error_set(err, OD_EINVAL, "\"autocast\" must be \"float16\" or \"bfloat16\" (or null: off)");
            return -1;
        }
        x->autocast = dt;
        return 1;
    }
    if (!strcmp(key, "modes")) {
        if (!json_is_array(v)) {
            od_error_set(err, OD_EINVAL, "\"modes\" must be a list of mode names or {name: settings} objects");
            return -1;
        }
        x->modes = json_array_size(v) ? v : NULL;
        return 1;
    }
    if (!strcmp(key, "vmap")) {
        if (!json_is_object(v) && !json_is_array(v)) {
            od_error_set(err, OD_EINVAL, "\"vmap\" must be {\"in_dims\": [...], \"out_dims\": ...} or a list of them");
            return -1;
        }
        x->vmap = v;
        return 1;
    }
    return 0;
}

void od_exec_json(od_buf *b, const od_exec *x)
{
    if (x->grad_mode != OD_GRAD_ENABLED) {
        od_buf_puts(b, ",\"grad_mode\":");
        od_buf_json_str(b, grad_mode_names[x->grad_mode]);
    }
    if (x->autocast != OD_NUM_DTYPES) {
        od_buf_puts(b, ",\"autocast\":");
        od_buf_json_str(b, od_dtype_name(x->autocast));
    }
}

od_tls od_exec_enter(const od_exec *x)
{
    od_tls prev = od_tls_save();
    if (x->grad_mode != OD_GRAD_ENABLED)
        od_tls_exclude(OD_KS_AUTOGRAD);
    if (x->autocast != OD_NUM_DTYPES) { /* on for the call's device type */
        od_tls_set_excluded(od_tls_excluded() & ~OD_KS_AUTOCAST);
        od_tls_include(x->autocast_key == OD_KEY_AutocastCUDA ? OD_KS(OD_KEY_AutocastCUDA)
                                                              : OD_KS(OD_KEY_AutocastCPU));
        od_tls_get()->autocast_dtype = (int)x->autocast;
    }
    if (x->stack)
        od_modes_enter(x->stack);
    return prev;
}

/* ---- vmap ---- */

static od_status dims_entry(json_t *dims, size_t i, bool *present, int64_t *d, const char *what, od_error *err)
{
    json_t *v = json_is_array(dims) ? json_array_get(dims, i) : dims;
    *present = v && !json_is_null(v);
    if (*present && !json_is_integer(v))
        return od_error_set(err, OD_EINVAL, "vmap: %s must be integers or null", what);
    if (*present)
        *d = json_integer_value(v);
    return OD_OK;
}

od_status od_exec_vmap_levels(const od_exec *x, od_vmap_run *run, bool by_id, od_error *err)
{
    json_t *v = x->vmap;
    size_t n = json_is_array(v) ? json_array_size(v) : 1;
    if (n == 0 || n > OD_VMAP_MAX_LEVELS)
        return od_error_set(err, OD_EINVAL, "vmap: 1 to %d levels", OD_VMAP_MAX_LEVELS);
    run->n = 0;
    for (size_t L = 0; L < n; L++) {
        json_t *spec = json_is_array(v) ? json_array_get(v, L) : v;
        static const char *const keys[] = {"in_dims", "out_dims", "randomness", NULL};
        const char *k;
        json_t *e;
        if (!json_is_object(spec))
            return od_error_set(err, OD_EINVAL, "vmap: each level is {\"in_dims\", \"out_dims\", \"randomness\"}");
        json_object_foreach(spec, k, e) {
            bool known = false;
            for (int j = 0; keys[j]; j++)
                known |= !strcmp(k, keys[j]);
            if (!known)
                return od_error_set(err, OD_EINVAL, "vmap: unknown field '%.64s' (expected in_dims, out_dims, randomness)", k);
        }
        json_t *in = json_object_get(spec, "in_dims"), *rnd = json_object_get(spec, "randomness");
        if (by_id && !json_is_object(in))
            return od_error_set(err, OD_EINVAL,
                                "vmap: a program's in_dims is {\"<stored tensor id>\": dim, ...}");
        if (!by_id && in && !json_is_array(in) && !json_is_integer(in))
            return od_error_set(err, OD_EINVAL, "vmap: in_dims must be a list (one entry per positional argument) or an integer");
        od_vmap_level *lv = &run->lv[L];
        lv->level = (int)L + 1;
        lv->size = -1;
        lv->outer = L ? &run->lv[L - 1] : NULL;
        lv->randomness = OD_RANDOMNESS_ERROR;
        if (rnd) {
            const char *r = json_is_string(rnd) ? json_string_value(rnd) : "";
            if (!strcmp(r, "different"))
                lv->randomness = OD_RANDOMNESS_DIFFERENT;
            else if (!strcmp(r, "same"))
                lv->randomness = OD_RANDOMNESS_SAME;
            else if (strcmp(r, "error"))
                return od_error_set(err, OD_EINVAL, "vmap: randomness must be \"error\", \"different\" or \"same\"");
        }
        run->spec[L] = spec;
        run->n = (int)L + 1;
    }
    return OD_OK;
}

/* *t (owned when *owned) as a batched tensor of level lv, batch dim d. */
static od_status wrap_one(od_vmap_level *lv, od_tensor **t, bool *owned, int64_t d, const char *what, od_error *err)
{
    int64_t w = d < 0 ? d + (*t)->ndim : d;
    if (w < 0 || w >= (*t)->ndim)
        return od_error_set(err, OD_EINVAL, "vmap: in_dims%s is %lld but the argument has %d dimension(s) at this level",
                            what, (long long)d, (*t)->ndim);
    if (lv->size >= 0 && (*t)->sizes[w] != lv->size)
        return od_error_set(err, OD_EMISMATCH,
                            "vmap: Expected all tensors to have the same size in the mapped dimension, got sizes "
                            "%lld and %lld for the mapped dimension",
                            (long long)lv->size, (long long)(*t)->sizes[w]);
    lv->size = (*t)->sizes[w];
    od_tensor *wrapped = NULL;
    od_status st = od_make_batched(*t, w, lv->level, &wrapped, err);
    if (st)
        return st;
    if (*owned)
        od_tensor_release(*t);
    *t = wrapped;
    *owned = true;
    return OD_OK;
}

od_status od_exec_vmap_wrap(const od_exec *x, od_bound *b, od_vmap_run *run, od_error *err)
{
    od_status st = od_exec_vmap_levels(x, run, false, err);
    for (int L = 0; st == OD_OK && L < run->n; L++) {
        json_t *in = json_object_get(run->spec[L], "in_dims");
        size_t nin = json_is_array(in) ? json_array_size(in) : (size_t)b->nargs;
        if (json_is_array(in) && nin > (size_t)b->nargs)
            return od_error_set(err, OD_EINVAL, "vmap: in_dims has %zu entries for %d arguments", nin, b->nargs);
        bool any = false;
        for (size_t i = 0; i < nin && st == OD_OK; i++) {
            bool present = true;
            int64_t d = 0; /* no in_dims: 0 for every tensor argument */
            if (in && (st = dims_entry(in, i, &present, &d, "in_dims", err)) != OD_OK)
                return st;
            od_value *a = &b->args[i];
            if (!present || (!json_is_array(in) && a->tag != OD_T_TENSOR))
                continue; /* an integer in_dims maps every tensor argument */
            char what[32];
            snprintf(what, sizeof what, "[%zu]", i);
            if (a->tag != OD_T_TENSOR || !a->u.t)
                return od_error_set(err, OD_EINVAL, "vmap: in_dims%s is %lld but argument %zu is not a Tensor", what,
                                    (long long)d, i);
            st = wrap_one(&run->lv[L], &a->u.t, &b->owned[i], d, what, err);
            any = true;
        }
        if (st == OD_OK && !any)
            return od_error_set(err, OD_EINVAL, "vmap: level %d maps no tensor argument (in_dims all null)", L + 1);
    }
    return st;
}

od_status od_exec_vmap_wrap_stored(od_vmap_run *run, const char *id, od_tensor **t, od_error *err)
{
    bool owned = true;
    for (int L = 0; L < run->n; L++) {
        json_t *d = json_object_get(json_object_get(run->spec[L], "in_dims"), id);
        if (!d || json_is_null(d))
            continue;
        if (!json_is_integer(d))
            return od_error_set(err, OD_EINVAL, "vmap: in_dims[\"%.40s\"] must be an integer or null", id);
        char what[64];
        snprintf(what, sizeof what, "[\"%.40s\"]", id);
        od_status st = wrap_one(&run->lv[L], t, &owned, json_integer_value(d), what, err);
        if (st)
            return st;
    }
    return OD_OK;
}

od_status od_exec_vmap_unwrap_one(const od_vmap_run *run, int i, od_tensor **t, od_error *err)
{
    for (int L = run->n - 1; L >= 0; L--) {
        json_t *out = json_object_get(run->spec[L], "out_dims");
        bool present = true;
        int64_t d = 0;
        od_status st = out ? dims_entry(out, (size_t)i, &present, &d, "out_dims", err) : OD_OK;
        if (st)
            return st;
        if (!present)
            return od_error_set(err, OD_EINVAL, "vmap: out_dims[%d] is null: every output has a batch dim", i);
        od_tensor *u = NULL;
        if ((st = od_unwrap_batched(*t, run->lv[L].level, run->lv[L].size, d, &u, err)) != OD_OK)
            return st;
        od_tensor_release(*t);
        *t = u;
    }
    return OD_OK;
}

od_status od_exec_vmap_unwrap(const od_vmap_run *run, od_stack *s, od_error *err)
{
    for (int i = 0; i < s->nrets; i++) {
        od_value *r = &s->rets[i];
        if (r->tag == OD_T_TENSOR_LIST) { /* each element, with its return's out_dims */
            od_tensor **ts = r->u.list.items;
            for (size_t e = 0; e < r->u.list.n; e++) {
                od_status st = ts[e] ? od_exec_vmap_unwrap_one(run, i, &ts[e], err) : OD_OK;
                if (st)
                    return st;
            }
            continue;
        }
        if (r->tag != OD_T_TENSOR || !r->u.t)
            continue;
        od_status st = od_exec_vmap_unwrap_one(run, i, &r->u.t, err);
        if (st)
            return st;
    }
    return OD_OK;
}

#define MODE_PARAMS_MAX 32

od_status od_exec_build_modes(const od_exec *x, od_mode_stack *st, od_error *err)
{
    size_t i;
    json_t *m;
    json_array_foreach(x->modes, i, m) {
        const char *name = NULL;
        json_t *settings = NULL;
        if (json_is_string(m)) {
            name = json_string_value(m);
        } else if (json_is_object(m) && json_object_size(m) == 1) {
            void *it = json_object_iter(m);
            name = json_object_iter_key(it);
            settings = json_object_iter_value(it);
        }
        if (!name || (settings && !json_is_object(settings) && !json_is_null(settings))) {
            od_mode_stack_clear(st);
            return od_error_set(err, OD_EINVAL,
                                "modes[%zu] must be a mode name or {name: {settings}}", i);
        }
        od_mode_param params[MODE_PARAMS_MAX];
        char numbers[MODE_PARAMS_MAX][32];
        int np = 0;
        const char *k;
        json_t *v;
        json_object_foreach(settings, k, v) {
            if (np == MODE_PARAMS_MAX || !(json_is_string(v) || json_is_integer(v))) {
                od_mode_stack_clear(st);
                return od_error_set(err, OD_EINVAL,
                                    "modes[%zu] (%s): settings are at most %d strings or integers", i, name,
                                    MODE_PARAMS_MAX);
            }
            if (json_is_integer(v))
                snprintf(numbers[np], sizeof numbers[np], "%lld", (long long)json_integer_value(v));
            params[np] = (od_mode_param){k, json_is_string(v) ? json_string_value(v) : numbers[np]};
            np++;
        }
        od_status s = od_mode_stack_push(st, name, params, np, err);
        if (s) {
            od_mode_stack_clear(st);
            return s;
        }
    }
    return OD_OK;
}

void od_exec_modes_json(od_buf *b, od_mode_stack *st)
{
    if (!st || st->n == 0)
        return;
    od_buf_puts(b, ",\"modes\":{");
    bool first = true;
    for (int i = 0; i < st->n; i++) {
        char *rep = st->cls[i]->report ? st->cls[i]->report(st->state[i]) : NULL;
        if (st->cls[i]->report && !rep)
            b->oom = true; /* a report lost to memory is not "null": 507 */
        if (!first)
            od_buf_putc(b, ',');
        first = false;
        od_buf_json_str(b, st->cls[i]->name);
        od_buf_putc(b, ':');
        od_buf_puts(b, rep ? rep : "null");
        free(rep);
    }
    od_buf_putc(b, '}');
}
