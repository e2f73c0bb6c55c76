/* exec.c — a request's execution settings: grad mode, autocast, the mode
 * stack and vmap, read from the body of a call, a program or a session.
 *
 * Invariants: reading never allocates (the settings borrow the request's
 * JSON); applying them only changes this thread's dispatcher state through
 * the TLS guard API, and the caller restores what od_exec_enter returns, so
 * nothing leaks into the worker's next request.
 */
#include <string.h>

#include "od_autograd.h"
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
    return prev;
}
