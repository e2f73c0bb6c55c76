/* program.c — POST /v1/run: a list of operator calls run in order on the
 * server in one round trip.
 *
 * Invariants:
 *  - Step k's arguments may name an earlier step's results: {"ref": "$j"}
 *    (its first output), {"ref": "$j.i"} (output i) or {"ref": "$j.i.e"}
 *    (element e of output i, a Tensor[]), j < k; any other
 *    ref is a stored tensor of the request's session. Results stay on their
 *    device between steps (no copies); each step is an od_srv_call with its
 *    own dispatch record and statistics entry. A result is released after
 *    the last step that names it, unless outputs or keep ask for it.
 *  - An error in step k answers with k and the operator in the message, and
 *    frees everything the program made (nothing is kept).
 *  - Only the outputs asked for come back (default: every output of the
 *    last step); "keep" stores results in the session and returns their ids.
 *  - At most OD_PROGRAM_MAX_STEPS steps, and --max-call-seconds bounds the
 *    whole program, not each step; every allocation is released on every
 *    path.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "od_autograd.h"
#include "od_parallel.h"
#include "od_mode.h"
#include "od_vmap.h"
#include "od_server.h"

#define OD_PROGRAM_MAX_STEPS 256

typedef struct program {
    od_req *r;
    od_srv_call *calls;
    int nsteps; /* parsed */
    int ran;    /* steps whose calls succeeded */
    uint64_t deadline; /* --max-call-seconds covers the whole program */
    int *last_use;     /* per step: the last step that names its results; INT_MAX when
                        * outputs or keep name them, -1 when nothing does */
    od_exec exec;      /* grad mode, autocast, modes, vmap: every step's */
    od_vmap_run vm;    /* vmap: its levels (vm.n == 0: none) */
} program;

/* "$j", "$j.i" or "$j.i.e" into j, i and e (-1 when absent: e names an
 * element of a Tensor[] output); false when s is not of that form. */
static bool parse_step_ref3(const char *s, int *j, int *i, int *e)
{
    if (s[0] != '$')
        return false;
    char *end;
    long a = strtol(s + 1, &end, 10);
    if (end == s + 1 || a < 0 || a > 1000000)
        return false;
    long b = 0, c = -1;
    if (*end == '.') {
        const char *p = end + 1;
        b = strtol(p, &end, 10);
        if (end == p || b < 0 || b > 1000)
            return false;
        if (*end == '.') {
            p = end + 1;
            c = strtol(p, &end, 10);
            if (end == p || c < 0 || c > 100000000)
                return false;
        }
    }
    if (*end)
        return false;
    *j = (int)a;
    *i = (int)b;
    *e = (int)c;
    return true;
}

static bool parse_step_ref(const char *s, int *j, int *i)
{
    int e;
    return parse_step_ref3(s, j, i, &e);
}

/* The tensor "$j.i[.e]" names among step j's returns s (borrowed), or an
 * error: a Tensor[] output is named one element at a time. */
static od_status step_tensor(const od_stack *s, const char *id, int j, const od_op *op, int i, int e,
                             od_tensor **t, od_error *err)
{
    if (!op) /* a backward step: no operator, and nothing to name in a message */
        return od_error_set(err, OD_EINVAL, "\"%s\": step %d is a backward step, which has no results", id, j);
    const od_value *v = i < s->nrets ? &s->rets[i] : NULL;
    if (v && v->tag == OD_T_TENSOR_LIST) {
        if (e < 0)
            return od_error_set(err, OD_EINVAL,
                                "\"%s\": output %d of step %d (%s) is a list of %zu tensors; name one as "
                                "\"$%d.%d.<index>\"",
                                id, i, j, od_op_name(op), v->u.list.n, j, i);
        if ((size_t)e >= v->u.list.n || !((od_tensor **)v->u.list.items)[e])
            return od_error_set(err, OD_EINVAL, "\"%s\": output %d of step %d (%s) has %zu tensors", id, i, j,
                                od_op_name(op), v->u.list.n);
        *t = ((od_tensor **)v->u.list.items)[e];
        return OD_OK;
    }
    if (!v || e >= 0 || v->tag != OD_T_TENSOR || !v->u.t)
        return od_error_set(err, OD_EINVAL, "\"%s\": step %d (%s) has no tensor output %d%s", id, j,
                            od_op_name(op), i, e >= 0 ? " that is a list" : "");
    *t = v->u.t;
    return OD_OK;
}

/* The bind resolver: "$j[.i]" from earlier steps, anything else from the store. */
static od_status program_ref(void *ctx, const char *id, od_tensor **out, od_error *err)
{
    program *p = ctx;
    int j, i;
    if (!parse_step_ref(id, &j, &i)) {
        od_status st = od_store_ref(p->r, id, out, err);
        if (st == OD_OK && p->vm.n && (st = od_exec_vmap_wrap_stored(&p->vm, id, out, err)) != OD_OK) {
            od_tensor_release(*out);
            *out = NULL;
        }
        return st;
    }
    if (j >= p->ran)
        return od_error_set(err, OD_EINVAL, "\"%s\" names step %d, which has not run before this one", id, j);
    int e;
    parse_step_ref3(id, &j, &i, &e);
    od_tensor *t;
    od_status st = step_tensor(&p->calls[j].stack, id, j, p->calls[j].op, i, e, &t, err);
    if (st)
        return st;
    od_tensor_retain(t);
    *out = t;
    return OD_OK;
}

/* Step k's tensor output named by a "$j[.i]" string value v. */
static od_status selected(program *p, json_t *v, od_tensor **t, const char **name, od_error *err)
{
    int j, i;
    if (!json_is_string(v) || !parse_step_ref(json_string_value(v), &j, &i))
        return od_error_set(err, OD_EINVAL, "outputs and keep name results as \"$step\" or \"$step.output\"");
    *name = json_string_value(v);
    if (j >= p->nsteps)
        return od_error_set(err, OD_EINVAL, "\"%s\": the program has %d steps", *name, p->nsteps);
    int e;
    parse_step_ref3(*name, &j, &i, &e);
    return step_tensor(&p->calls[j].stack, *name, j, p->calls[j].op, i, e, t, err);
}

/* The non-tensor return (equal's bool, a number) that "$j[.i]" string v
 * names, or NULL (then selected() judges it). Borrowed from the step. */
static const od_value *selected_value(program *p, json_t *v)
{
    int j, i;
    if (!json_is_string(v) || !parse_step_ref(json_string_value(v), &j, &i) || j >= p->nsteps)
        return NULL;
    const od_stack *s = &p->calls[j].stack;
    if (i >= s->nrets || s->rets[i].tag == OD_T_TENSOR || s->rets[i].tag == OD_T_NONE ||
        s->rets[i].tag == OD_T_TENSOR_LIST)
        return NULL;
    return &s->rets[i];
}

/* Marks in p->last_use every "$j" that v (any JSON value of step k) names. */
static void note_refs(program *p, json_t *v, int k)
{
    if (json_is_array(v)) {
        size_t i;
        json_t *e;
        json_array_foreach(v, i, e) note_refs(p, e, k);
    } else if (json_is_object(v)) {
        json_t *ref = json_object_get(v, "ref");
        if (!ref)
            ref = json_object_get(v, "backward"); /* a backward step names its root */
        int j, i;
        if (json_is_string(ref) && parse_step_ref(json_string_value(ref), &j, &i)) {
            if (j < p->nsteps && p->last_use[j] < k)
                p->last_use[j] = k;
            return;
        }
        const char *key;
        json_t *e;
        json_object_foreach(v, key, e) note_refs(p, e, k);
    }
}

/* The results of every step that no step after k names, unless outputs or
 * keep want them: released now, so their blocks serve the next steps'
 * outputs (warm memory) and a long program holds only what it still needs. */
static void release_dead(program *p, int k)
{
    for (int j = 0; j <= k; j++)
        if (p->last_use[j] <= k && p->calls[j].stack.nrets > 0)
            od_stack_release_rets(&p->calls[j].stack);
}

/* Step k is {"backward": "$j" or a stored id, "gradient": tensor,
 * "retain_graph": bool}: root.backward(gradient); it has no results. */
static od_status run_backward(program *p, int k, od_json_doc *doc, json_t *st, od_error *err)
{
    const char *key;
    json_t *v, *jb = json_object_get(st, "backward"), *jg = json_object_get(st, "gradient"),
               *jr = json_object_get(st, "retain_graph");
    json_object_foreach(st, key, v) if (strcmp(key, "backward") && strcmp(key, "gradient") && strcmp(key, "retain_graph"))
        return od_error_set(err, OD_EINVAL, "step %d: unknown field '%.64s' (expected backward, gradient, retain_graph)",
                            k, key);
    if (!json_is_string(jb))
        return od_error_set(err, OD_EINVAL, "step %d: \"backward\" must name a result (\"$j\") or a stored tensor", k);
    if (p->vm.n)
        return od_error_set(err, OD_EUNSUPPORTED, "step %d: backward inside a vmap is not supported", k);
    if (jr && !json_is_boolean(jr))
        return od_error_set(err, OD_EINVAL, "step %d: \"retain_graph\" must be true or false", k);
    od_tensor *root = NULL, *grad = NULL;
    od_status s = program_ref(p, json_string_value(jb), &root, err);
    json_t *ref = json_is_object(jg) ? json_object_get(jg, "ref") : NULL;
    if (s == OD_OK && json_is_string(ref))
        s = program_ref(p, json_string_value(ref), &grad, err);
    else if (s == OD_OK && jg && !json_is_null(jg)) {
        od_proto_limits lim = od_limits();
        s = od_tensor_from_json(doc, jg, &lim, OD_DECODE_DATA, "gradient", &grad, err);
    }
    if (s == OD_OK) {
        od_exec x = p->exec; /* the formulas run in the forward's types: no autocast */
        x.autocast = OD_NUM_DTYPES;
        od_tls saved = od_exec_enter(&x);
        od_set_deadline(p->deadline);
        s = od_backward(root, grad, jr && json_is_true(jr), err);
        od_set_deadline(0);
        od_tls_restore(&saved);
    }
    od_tensor_release(grad);
    od_tensor_release(root);
    if (s != OD_OK)
        od_error_prefix(err, "step %d (backward)", k);
    return s;
}

/* Runs step k described by object st. */
static od_status run_step(program *p, int k, od_json_doc *doc, json_t *st, od_device dev, od_error *err)
{
    od_srv_call *c = &p->calls[k];
    od_srv_call_init(c, NULL);
    if (json_object_get(st, "backward"))
        return run_backward(p, k, doc, st, err);
    c->exec = p->exec;
    c->deadline = p->deadline;
    c->t_start = c->t_body = od_now_ns();
    c->device = dev;
    c->key = od_device_key(dev);
    c->keep = true; /* results stay on their device for later steps */
    json_t *jop = json_object_get(st, "op"), *args = json_object_get(st, "args"),
           *kwargs = json_object_get(st, "kwargs");
    od_status s = OD_OK;
    const char *key;
    json_t *v;
    json_object_foreach(st, key, v) if (strcmp(key, "op") && strcmp(key, "args") && strcmp(key, "kwargs"))
        return od_error_set(err, OD_EINVAL, "step %d: unknown field '%.64s' (expected op, args, kwargs)", k, key);
    if (!json_is_string(jop))
        return od_error_set(err, OD_EINVAL, "step %d: \"op\" must be an operator name", k);
    if ((args && !json_is_array(args)) || (kwargs && !json_is_object(kwargs)))
        return od_error_set(err, OD_EINVAL, "step %d: \"args\" must be a list and \"kwargs\" an object", k);
    c->op = od_resolve_op_for_args(json_string_value(jop), args, kwargs, &c->err);
    if (c->op) {
        od_proto_limits lim = od_limits();
        od_bind_opts bo = {.lim = &lim, .mode = OD_DECODE_DATA, .has_device = true, .device = dev,
                           .ref = program_ref, .ref_ctx = p};
        s = od_proto_bind(c->op, doc, args, kwargs, &bo, &c->bound, &c->err);
        if (s == OD_OK)
            s = od_srv_call_run(c);
        c->t_encoded = od_now_ns();
        od_srv_call_stats(c, s == OD_OK);
        /* its inputs (references to earlier results) are not needed again */
        od_bound_release(&c->bound);
        od_bound_init(&c->bound);
    } else {
        s = c->err.status;
    }
    if (s != OD_OK)
        return od_error_set(err, s, "step %d (%s): %s", k, json_string_value(jop), c->err.message);
    return OD_OK;
}

/* Writes the selected outputs; binary ones go to bin (new references). */
static od_status encode_sel(program *p, od_buf *b, json_t *outs, bool binary, od_tensor ***bin, int *nbin,
                            od_error *err);

/* The default outputs (every output of the last step; a Tensor[] output's
 * elements each, "$k.i.e") as an outputs list, or the request's own. */
static od_status encode(program *p, od_buf *b, json_t *outs, bool binary, od_tensor ***bin, int *nbin,
                        od_error *err)
{
    const od_stack *last = &p->calls[p->nsteps - 1].stack;
    bool lists = false;
    for (int i = 0; i < last->nrets; i++)
        lists |= last->rets[i].tag == OD_T_TENSOR_LIST;
    if (outs || !lists)
        return encode_sel(p, b, outs, binary, bin, nbin, err);
    json_t *names = json_array();
    for (int i = 0; names && i < last->nrets; i++) {
        const od_value *v = &last->rets[i];
        size_t n = v->tag == OD_T_TENSOR_LIST ? v->u.list.n : 1;
        for (size_t e = 0; e < n; e++) {
            char nm[64];
            if (v->tag == OD_T_TENSOR_LIST)
                snprintf(nm, sizeof nm, "$%d.%d.%zu", p->nsteps - 1, i, e);
            else
                snprintf(nm, sizeof nm, "$%d.%d", p->nsteps - 1, i);
            if (json_array_append_new(names, json_string(nm))) {
                json_decref(names);
                names = NULL;
            }
        }
    }
    if (!names)
        return od_error_set(err, OD_ENOMEM, "out of memory");
    od_status st = encode_sel(p, b, names, binary, bin, nbin, err);
    json_decref(names);
    return st;
}

static od_status encode_sel(program *p, od_buf *b, json_t *outs, bool binary, od_tensor ***bin, int *nbin,
                            od_error *err)
{
    size_t n = outs ? json_array_size(outs) : (size_t)p->calls[p->nsteps - 1].stack.nrets;
    char last[48];
    *bin = calloc(n ? n : 1, sizeof **bin);
    if (!*bin)
        return od_error_set(err, OD_ENOMEM, "out of memory");
    size_t cap = od_cfg.max_output_bytes ? od_cfg.max_output_bytes : SIZE_MAX, bin_bytes = 0;
    b->limit = cap == SIZE_MAX ? 0 : cap;
    od_buf_puts(b, "\"outputs\":[");
    for (size_t x = 0; x < n; x++) {
        od_tensor *t = NULL;
        const char *name = last;
        od_status s;
        json_t *sv = outs ? json_incref(json_array_get(outs, x)) : NULL;
        if (!outs) {
            snprintf(last, sizeof last, "$%d.%zu", p->nsteps - 1, x);
            sv = json_string(last);
        }
        const od_value *val = selected_value(p, sv);
        const od_stack *ls = &p->calls[p->nsteps - 1].stack;
        if (!val && !outs && x < (size_t)ls->nrets && ls->rets[x].tag == OD_T_NONE)
            val = &ls->rets[x]; /* an undefined tensor return (convolution_backward's unasked gradients) */
        if (val) { /* a non-tensor return: a JSON value, as /v1/ops answers it */
            if (x)
                od_buf_putc(b, ',');
            od_buf_puts(b, "{\"name\":");
            od_buf_json_str(b, outs ? json_string_value(sv) : last);
            od_buf_puts(b, ",\"value\":");
            od_value_to_json(b, val);
            od_buf_putc(b, '}');
            json_decref(sv);
            continue;
        }
        json_decref(sv);
        if (outs) {
            s = selected(p, json_array_get(outs, x), &t, &name, err);
        } else {
            snprintf(last, sizeof last, "$%d.%zu", p->nsteps - 1, x);
            json_t *v = json_string(last);
            s = v ? selected(p, v, &t, &name, err) : od_error_set(err, OD_ENOMEM, "out of memory");
            json_decref(v);
            name = last; /* not the freed JSON string's */
        }
        if (s == OD_OK && binary && *nbin >= OD_MAX_BINARY_OUTPUTS)
            s = od_error_set(err, OD_ETOOLARGE, "at most %d outputs come back as binary data", OD_MAX_BINARY_OUTPUTS);
        od_tensor *h = NULL, *u = NULL;
        if (s == OD_OK) {
            od_tensor_retain(t);
            u = t;
            if (p->vm.n)
                s = od_exec_vmap_unwrap_one(&p->vm, (int)x, &u, err);
        }
        if (s == OD_OK)
            s = od_host_contiguous(u, &h, err);
        od_tensor_release(u);
        if (s != OD_OK)
            return s;
        if (x)
            od_buf_putc(b, ',');
        if (binary) {
            bin_bytes += od_tensor_nbytes(h);
            od_tensor_to_json_binary(b, h, name, false);
            (*bin)[(*nbin)++] = h;
        } else {
            od_tensor_to_json(b, h, name, false);
            od_tensor_release(h);
        }
        if (b->over || bin_bytes > cap)
            return od_error_set(err, OD_ETOOLARGE,
                                "the program's outputs pass the output limit of %zu bytes (--max-output-bytes)",
                                cap);
    }
    od_buf_putc(b, ']');
    return OD_OK;
}

/* Stores the results keep names in the session: "kept": {"$j.i": id}. */
static od_status keep_results(program *p, od_buf *b, json_t *keep, od_error *err)
{
    const char *session = od_req_session_name(p->r);
    if (!session)
        return od_error_set(err, OD_EINVAL, "X-OD-Session is not a valid session name");
    size_t n = json_array_size(keep);
    char (*ids)[OD_ID_LEN] = calloc(n ? n : 1, sizeof *ids);
    if (!ids)
        return od_error_set(err, OD_ENOMEM, "out of memory");
    od_status s = OD_OK;
    size_t done = 0;
    od_buf_puts(b, ",\"kept\":{");
    for (; done < n && s == OD_OK; done++) {
        od_tensor *t, *u = NULL;
        const char *name;
        if ((s = selected(p, json_array_get(keep, done), &t, &name, err)) != OD_OK)
            break;
        od_tensor_retain(t);
        u = t;
        if (p->vm.n && (s = od_exec_vmap_unwrap_one(&p->vm, (int)done, &u, err)) != OD_OK) {
            od_tensor_release(u);
            break;
        }
        s = od_store_put(session, u, ids[done], err);
        od_tensor_release(u);
        if (s != OD_OK)
            break;
        if (done)
            od_buf_putc(b, ',');
        od_buf_json_str(b, name);
        od_buf_putc(b, ':');
        od_buf_json_str(b, ids[done]);
    }
    od_buf_putc(b, '}');
    if (s != OD_OK) {
        od_error ignore;
        for (size_t k = 0; k < done; k++)
            od_store_delete(session, ids[k], &ignore);
    }
    free(ids);
    return s;
}

void od_h_run(od_req *r)
{
    static const char *const fields[] = {"steps", "outputs", "keep", "device", "parameters", "id",
                                         "grad_mode", "autocast", "modes", "vmap", NULL};
    od_proto_limits lim = od_limits();
    lim.top_keys = fields;
    od_error err;
    od_error_clear(&err);
    od_json_doc *doc = NULL;
    bool backward = false; /* a backward step ran: the leaves' .grad go to the store */
    program p = {.r = r, .deadline =
                 od_cfg.max_call_seconds ? od_now_ns() + (uint64_t)od_cfg.max_call_seconds * 1000000000u
                                         : UINT64_MAX,
                 NULL};
    od_buf b;
    od_buf_init(&b);
    od_tensor **bin = NULL;
    int nbin = 0;
    size_t jlen;
    const char *json = od_req_json(r, &jlen);
    od_status s = od_json_parse(json, jlen, &lim, &doc, &err);
    if (s == OD_OK && r->binary)
        s = od_json_attach_binary(doc, r->body, r->hdr_len, r->body->len - r->hdr_len, &err);
    json_t *root = s == OD_OK ? od_json_root(doc) : NULL;
    json_t *steps = json_object_get(root, "steps"), *outs = json_object_get(root, "outputs"),
           *keep = json_object_get(root, "keep"), *jdev = json_object_get(root, "device"),
           *params = json_object_get(root, "parameters");
    if (s == OD_OK && (!json_is_array(steps) || json_array_size(steps) == 0))
        s = od_error_set(&err, OD_EINVAL, "the body must be {\"steps\": [{\"op\", \"args\", \"kwargs\"}, ...]}");
    if (s == OD_OK && json_array_size(steps) > OD_PROGRAM_MAX_STEPS)
        s = od_error_set(&err, OD_ETOOLARGE, "a program has at most %d steps, this one %zu", OD_PROGRAM_MAX_STEPS,
                         json_array_size(steps));
    if (s == OD_OK && ((outs && !json_is_array(outs)) || (keep && !json_is_array(keep))))
        s = od_error_set(&err, OD_EINVAL, "\"outputs\" and \"keep\" must be lists of \"$step[.output]\"");
    if (s == OD_OK && jdev && !json_is_string(jdev))
        s = od_error_set(&err, OD_EINVAL, "\"device\" must be a string, got %s", od_json_kind(jdev));
    od_exec_init(&p.exec);
    if (s == OD_OK) {
        const char *k;
        json_t *v;
        json_object_foreach(root, k, v) if (od_exec_field(&p.exec, k, v, &err) < 0) {
            s = err.status;
            break;
        }
    }
    od_vmap_level vlevels[OD_VMAP_MAX_LEVELS];
    p.vm.lv = vlevels;
    if (s == OD_OK && p.exec.vmap && (s = od_exec_vmap_levels(&p.exec, &p.vm, true, &err)) == OD_OK) {
        p.exec.vmap = NULL; /* the steps run in the levels; they wrap nothing themselves */
        p.exec.in_vmap = &vlevels[p.vm.n - 1];
    }
    od_mode_stack modes = {0};
    if (s == OD_OK && p.exec.modes && (s = od_exec_build_modes(&p.exec, &modes, &err)) == OD_OK)
        p.exec.stack = &modes;
    od_device dev = {OD_DEV_CPU, 0};
    if (s == OD_OK)
        s = od_resolve_device(jdev ? json_string_value(jdev) : NULL, &dev, &err);
    if (s == OD_OK) {
        p.nsteps = (int)json_array_size(steps);
        p.calls = calloc((size_t)p.nsteps, sizeof *p.calls);
        p.last_use = malloc((size_t)p.nsteps * sizeof *p.last_use);
        if (!p.calls || !p.last_use)
            s = od_error_set(&err, OD_ENOMEM, "out of memory");
    }
    if (s == OD_OK) {
        for (int k = 0; k < p.nsteps; k++)
            p.last_use[k] = -1;
        for (int k = 0; k < p.nsteps; k++)
            note_refs(&p, json_array_get(steps, (size_t)k), k);
        json_t *pins[2] = {outs, keep};
        for (int x = 0; x < 2; x++) {
            size_t i;
            json_t *v;
            int j, o;
            json_array_foreach(pins[x], i, v) if (json_is_string(v) && parse_step_ref(json_string_value(v), &j, &o) &&
                                                  j < p.nsteps) p.last_use[j] = INT_MAX;
        }
        if (!outs) /* the default output: the last step's */
            p.last_use[p.nsteps - 1] = INT_MAX;
    }
    for (int k = 0; s == OD_OK && k < p.nsteps; k++) {
        json_t *st = json_array_get(steps, (size_t)k);
        s = json_is_object(st) ? run_step(&p, k, doc, st, dev, &err)
                               : od_error_set(&err, OD_EINVAL, "step %d must be an object", k);
        if (s == OD_OK) {
            p.ran = k + 1;
            backward |= !p.calls[k].op;
            release_dead(&p, k);
        } else if (!json_is_object(st)) {
            od_srv_call_init(&p.calls[k], NULL); /* nothing to release */
        }
    }
    if (s == OD_OK) {
        od_buf_printf(&b, "{\"steps\":%d,", p.nsteps);
        s = encode(&p, &b, outs, od_want_binary(r, params), &bin, &nbin, &err);
    }
    if (s == OD_OK && keep)
        s = keep_results(&p, &b, keep, &err);
    if (s == OD_OK && backward) { /* stored leaves' gradients, as /v1/tensors/{id}/backward answers */
        const char *session = od_req_session_name(r);
        od_buf_puts(&b, ",\"grads\":");
        s = session ? od_store_sync_grads(session, &b, &err)
                    : od_error_set(&err, OD_EINVAL, "X-OD-Session is not a valid session name");
    }
    if (s == OD_OK) {
        od_buf_puts(&b, ",\"dispatch\":[");
        for (int k = 0; k < p.nsteps; k++) {
            if (k)
                od_buf_putc(&b, ',');
            if (!p.calls[k].op) { /* a backward step */
                od_buf_puts(&b, "{\"op\":null,\"backward\":true}");
                continue;
            }
            od_buf_puts(&b, "{\"op\":");
            od_buf_json_str(&b, od_op_name(p.calls[k].op));
            od_buf_puts(&b, ",\"record\":");
            od_srv_call_dispatch_json(&b, &p.calls[k], OD_DETAIL_FULL);
            od_buf_putc(&b, '}');
        }
        od_buf_puts(&b, "]");
        od_exec_modes_json(&b, p.exec.stack);
        od_buf_puts(&b, "}");
        if (b.oom)
            s = od_error_set(&err, b.over ? OD_ETOOLARGE : OD_ENOMEM, "the answer does not fit the output limit");
    }
    if (s == OD_OK && nbin) {
        od_respond_binary(r, 200, &b, bin, nbin);
        nbin = 0;
    } else if (s == OD_OK) {
        od_respond_buf(r, 200, "application/json", &b);
    } else {
        od_buf_free(&b);
        od_respond_od_error(r, &err);
    }
    for (int i = 0; i < nbin; i++)
        od_tensor_release(bin[i]);
    free(bin);
    for (int k = 0; k < p.nsteps && p.calls; k++)
        if (k <= p.ran)
            od_srv_call_release(&p.calls[k]);
    free(p.calls);
    free(p.last_use);
    od_mode_stack_clear(&modes);
    od_json_doc_free(doc);
}
