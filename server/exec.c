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
    if (x->stack)
        od_modes_enter(x->stack);
    return prev;
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
