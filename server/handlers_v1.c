/* handlers_v1.c — the /v1 API: operator calls and explain, introspection
 * (operators, keys, devices), statistics, and the index.
 *
 * Invariants: every handler answers exactly once; every allocation it makes
 * is released on every path (the od_srv_call, the parsed document, the buffers);
 * errors go through od_respond_od_error so the status and body come from the
 * one mapping in proto/.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "od_autograd.h"
#include "od_mode.h"
#include "od_vmap.h"
#include "od_parallel.h"
#include "od_server.h"
#include "od_stats.h"
#include "od_devices.h"

/* ---- the call body -------------------------------------------------------------- */

typedef struct call_req {
    od_json_doc *doc;
    json_t *args, *kwargs, *params, *outputs;
    const char *device;
    bool keep; /* outputs stay on the server (the session's store) */
    od_detail detail; /* how much dispatch record the answer carries */
    od_exec exec;
} call_req;

/* Parses the body as {"args", "kwargs", "device", "parameters", "outputs"}. */
static od_status parse_call_body(od_req *r, call_req *q, od_error *err)
{
    memset(q, 0, sizeof *q);
    size_t jlen;
    const char *json = od_req_json(r, &jlen);
    static const char *const fields[] = {"args", "kwargs", "device", "parameters", "outputs", "keep", "id",
                                         "dispatch", "grad_mode", "autocast", "modes", "vmap", NULL};
    od_exec_init(&q->exec);
    od_proto_limits lim = od_limits();
    lim.top_keys = fields; /* refused before an unknown field's value is built */
    od_status st = od_json_parse(json, jlen, &lim, &q->doc, err);
    if (st != OD_OK)
        return st;
    if (r->binary &&
        (st = od_json_attach_binary(q->doc, r->body, r->hdr_len, r->body->len - r->hdr_len, err)) != OD_OK)
        return st;
    json_t *root = od_json_root(q->doc);
    if (!json_is_object(root))
        return od_error_set(err, OD_EINVAL,
                            "the body must be a JSON object {\"args\": [...], \"kwargs\": {...}}, got %s",
                            od_json_kind(root));
    const char *k;
    json_t *v;
    json_object_foreach(root, k, v) {
        if (!strcmp(k, "args"))
            q->args = v;
        else if (!strcmp(k, "kwargs"))
            q->kwargs = v;
        else if (!strcmp(k, "parameters"))
            q->params = v;
        else if (!strcmp(k, "outputs"))
            q->outputs = v;
        else if (!strcmp(k, "device")) {
            if (!json_is_string(v))
                return od_error_set(err, OD_EINVAL, "\"device\" must be a string, got %s",
                                    od_json_kind(v));
            q->device = json_string_value(v);
        } else if (!strcmp(k, "keep")) {
            if (!json_is_boolean(v))
                return od_error_set(err, OD_EINVAL, "\"keep\" must be true or false, got %s",
                                    od_json_kind(v));
            q->keep = json_is_true(v);
        } else if (!strcmp(k, "dispatch")) {
            if ((st = od_detail_parse(v, "\"dispatch\"", &q->detail, err)))
                return st;
        } else if (strcmp(k, "id") != 0) {
            int x = od_exec_field(&q->exec, k, v, err);
            if (x < 0)
                return err->status;
            if (x == 0)
                return od_error_set(err, OD_EINVAL,
                                    "unknown field '%.64s' (expected args, kwargs, device, parameters, "
                                    "outputs, keep, dispatch, grad_mode, autocast, modes, vmap)",
                                    k);
        }
    }
    if (q->args && !json_is_array(q->args))
        return od_error_set(err, OD_EINVAL, "\"args\" must be a list, got %s", od_json_kind(q->args));
    if (q->kwargs && !json_is_object(q->kwargs))
        return od_error_set(err, OD_EINVAL, "\"kwargs\" must be an object, got %s",
                            od_json_kind(q->kwargs));
    if (q->params && !json_is_object(q->params))
        return od_error_set(err, OD_EINVAL, "\"parameters\" must be an object, got %s",
                            od_json_kind(q->params));
    return OD_OK;
}


static od_status v1_parse(od_req *r, void *qv, od_json_doc **doc, const char **device, od_error *err)
{
    call_req *q = qv;
    od_status st = parse_call_body(r, q, err);
    *doc = q->doc;
    *device = q->device;
    return st;
}

static const od_op *v1_resolve(od_req *r, void *qv, od_error *err)
{
    call_req *q = qv;
    return od_resolve_op_for_args(r->params[0], q->args, q->kwargs, err);
}

static od_status v1_bind(const od_op *op, od_json_doc *doc, void *qv, const od_bind_opts *bo,
                         od_bound *out, od_error *err)
{
    call_req *q = qv;
    return od_proto_bind(op, doc, q->args, q->kwargs, bo, out, err);
}

static json_t *v1_outputs(void *qv) { return ((call_req *)qv)->outputs; }
static json_t *v1_params(void *qv) { return ((call_req *)qv)->params; }
static bool v1_keep(void *qv) { return ((call_req *)qv)->keep; }
static const od_exec *v1_exec(void *qv) { return &((call_req *)qv)->exec; }

static void v1_head(od_buf *b, const od_srv_call *c, void *qv)
{
    (void)qv;
    od_buf_puts(b, "{\"op\":");
    od_buf_json_str(b, od_op_name(c->op));
    od_buf_putc(b, ',');
}

static void v1_tail(od_buf *b, const od_srv_call *c, void *qv)
{
    od_detail d = ((call_req *)qv)->detail;
    if (d != OD_DETAIL_NONE) {
        od_buf_puts(b, ",\"dispatch\":");
        od_srv_call_dispatch_json(b, c, d);
    }
    od_exec_modes_json(b, c->exec.stack);
    od_buf_putc(b, '}');
}

static const od_call_proto v1_proto = {false, v1_parse, v1_resolve, v1_bind, v1_outputs,
                                       v1_params, v1_keep, v1_exec, v1_head, v1_tail};

void od_h_op_call(od_req *r)
{
    call_req q;
    memset(&q, 0, sizeof q);
    od_serve_call(r, &v1_proto, &q);
}

/* ---- explain -------------------------------------------------------------------- */

void od_h_op_explain(od_req *r)
{
    od_error err;
    od_error_clear(&err);
    call_req q;
    od_device dev = {OD_DEV_CPU, 0};
    od_bound meta;
    od_bound_init(&meta);
    od_stack s;
    od_stack_init(&s, NULL, 0);
    od_buf b;
    od_buf_init(&b);
    const od_op *op = NULL;
    od_status st = parse_call_body(r, &q, &err);
    if (st == OD_OK) {
        /* the device is reported, not used: explain works without CUDA */
        const char *dn = q.device ? q.device : od_cfg.default_device;
        if (!strcmp(dn, "auto")) {
            st = od_resolve_device(dn, &dev, &err);
        } else if (od_device_parse(dn, &dev, &err) != OD_OK) {
            st = od_error_set(&err, OD_EINVAL, "\"device\": %s", err.message);
        }
    }
    if (st == OD_OK) {
        op = od_resolve_op_for_args(r->params[0], q.args, q.kwargs, &err);
        st = op ? OD_OK : err.status;
        r->op = op;
    }
    if (st == OD_OK) {
        od_proto_limits lim = od_limits();
        od_bind_opts bo = {.lim = &lim, .mode = OD_DECODE_META, .has_device = true,
                           .device = (od_device){OD_DEV_META, 0}, .ref = od_store_ref, .ref_ctx = r};
        st = od_proto_bind(op, q.doc, q.args, q.kwargs, &bo, &meta, &err);
    }
    if (st != OD_OK) {
        od_respond_od_error(r, &err);
        goto out;
    }
    od_stack_init(&s, meta.args, meta.nargs);
    /* the request's settings (grad mode, autocast, modes) apply as in a call */
    od_mode_stack modes = {0};
    if (q.exec.modes && (st = od_exec_build_modes(&q.exec, &modes, &err)) != OD_OK) {
        od_respond_od_error(r, &err);
        goto out;
    }
    q.exec.stack = &modes;
    q.exec.autocast_key = dev.type == OD_DEV_CUDA ? OD_KEY_AutocastCUDA : OD_KEY_AutocastCPU;
    od_tls saved = od_exec_enter(&q.exec);
    /* the key set the real call would have: Meta stands in for the device */
    od_keyset ks = od_call_keyset(op, &s);
    od_key devkey = od_device_key(dev);
    if (od_ks_has(ks, OD_KEY_Meta))
        ks = od_ks_add(od_ks_remove(ks, OD_KEY_Meta), devkey);
    if (od_ks_has(ks, OD_KEY_AutogradOther) && devkey != OD_KEY_Meta)
        ks = od_ks_add(od_ks_remove(ks, OD_KEY_AutogradOther), od_key_autograd_of(devkey));
    ks &= ~od_op_fallthrough_keys(op);
    od_key key = od_ks_highest(ks);
    od_provenance prov;
    const od_kernel *kern = od_op_slot(op, key, &prov);

    /* shapes: run the call on Meta (no data is touched or allocated) */
    od_trace trace;
    od_error merr;
    od_error_clear(&merr);
    od_status mst = od_call_traced(op, &s, &trace, &merr);
    od_tls_restore(&saved);
    od_mode_stack_clear(&modes);
    if (mst != OD_OK && mst != OD_ENOKERNEL && mst != OD_EUNSUPPORTED) {
        /* the arguments themselves are wrong: the real call would fail too */
        od_respond_od_error(r, &merr);
        goto out;
    }
    char ksbuf[256], dn[32];
    od_ks_print(ks, ksbuf, sizeof ksbuf);
    od_device_print(dev, dn, sizeof dn);
    od_buf_puts(&b, "{\"op\":");
    od_buf_json_str(&b, od_op_name(op));
    od_buf_puts(&b, ",\"device\":");
    od_buf_json_str(&b, dn);
    od_buf_puts(&b, ",\"keyset\":");
    od_buf_keyset(&b, ks);
    od_buf_puts(&b, ",\"keyset_text\":");
    od_buf_json_str(&b, ksbuf);
    od_buf_puts(&b, ",\"key\":");
    od_buf_json_str(&b, od_key_name(key));
    od_buf_puts(&b, ",\"kernel\":");
    if (kern)
        od_buf_json_str(&b, kern->name);
    else
        od_buf_puts(&b, "null");
    od_buf_puts(&b, ",\"provenance\":");
    od_buf_json_str(&b, od_provenance_name(prov));
    if (kern && kern->file)
        od_buf_printf(&b, ",\"registered_at\":\"%s:%d\"", kern->file, kern->line);
    /* the keys the call visits, from the Meta run's own redispatches, with
     * the device's keys and slots in place of Meta's */
    od_buf_puts(&b, ",\"path\":\"");
    bool first_step = true;
    for (int i = 0; i < trace.nsteps; i++) {
        const od_trace_step *t = &trace.steps[i];
        if (t->op != op || t->depth != i) /* the operator's own chain, not what it calls */
            continue;
        od_key k = t->key == OD_KEY_Meta ? devkey
                   : t->key == OD_KEY_AutogradOther && devkey != OD_KEY_Meta ? od_key_autograd_of(devkey)
                                                                             : t->key;
        od_provenance p;
        od_op_slot(op, k, &p);
        od_buf_printf(&b, "%s%s [%s]", first_step ? "" : " \xe2\x86\x92 ", od_key_name(k), od_provenance_name(p));
        first_step = false;
    }
    od_buf_putc(&b, '"');
    if (!kern) {
        od_error nk;
        od_error_no_kernel(op, key, &nk);
        od_buf_puts(&b, ",\"error\":");
        od_buf_json_str(&b, nk.message);
    }
    if (mst == OD_OK) {
        size_t total = 0;
        bool over = false;
        od_buf_puts(&b, ",\"outputs\":[");
        for (int i = 0; i < s.nrets; i++) {
            if (i)
                od_buf_putc(&b, ',');
            od_value *v = &s.rets[i];
            if (v->tag != OD_T_TENSOR || !v->u.t) {
                od_value_to_json(&b, v);
                continue;
            }
            char nm[128];
            od_proto_return_name(od_op_schema(op), i, nm, sizeof nm);
            size_t nb = od_tensor_nbytes(v->u.t);
            total += nb;
            over |= nb > od_cfg.max_output_bytes;
            od_buf_puts(&b, "{\"name\":");
            od_buf_json_str(&b, nm);
            od_buf_puts(&b, ",\"dtype\":");
            od_buf_json_str(&b, od_dtype_name(v->u.t->dtype));
            od_buf_puts(&b, ",\"shape\":[");
            for (int d = 0; d < v->u.t->ndim; d++) {
                if (d)
                    od_buf_putc(&b, ',');
                od_buf_i64(&b, v->u.t->sizes[d]);
            }
            od_buf_printf(&b, "],\"bytes\":%zu}", nb);
        }
        od_buf_printf(&b, "],\"output_bytes\":%zu,\"max_output_bytes\":%zu,\"within_limits\":%s", total,
                      od_cfg.max_output_bytes, over ? "false" : "true");
    } else {
        od_buf_puts(&b, ",\"outputs\":null,\"shape_error\":");
        od_buf_json_str(&b, merr.message);
    }
    od_buf_puts(&b, ",\"meta_steps\":[");
    for (int i = 0; i < trace.nsteps; i++) {
        const od_trace_step *t = &trace.steps[i];
        if (i)
            od_buf_putc(&b, ',');
        od_buf_puts(&b, "{\"op\":");
        od_buf_json_str(&b, od_op_name(t->op));
        od_buf_puts(&b, ",\"key\":");
        od_buf_json_str(&b, od_key_name(t->key));
        od_buf_puts(&b, ",\"kernel\":");
        od_buf_json_str(&b, t->kernel ? t->kernel->name : "?");
        od_buf_puts(&b, ",\"provenance\":");
        od_buf_json_str(&b, od_provenance_name(t->prov));
        od_buf_printf(&b, ",\"depth\":%d}", t->depth);
    }
    od_buf_puts(&b, "]}");
    od_respond_buf(r, 200, "application/json", &b);
out:
    od_stack_release_rets(&s);
    od_bound_release(&meta);
    od_buf_free(&b);
    od_json_doc_free(q.doc);
}

/* ---- introspection ------------------------------------------------------------ */

static void put_kernel_site(od_buf *b, const od_kernel *k)
{
    if (k && k->file)
        od_buf_printf(b, ",\"registered_at\":\"%s:%d\"", k->file, k->line);
}

static void put_type(od_buf *b, const od_type *t)
{
    char ty[256];
    od_type_print(t, ty, sizeof ty);
    od_buf_json_str(b, ty);
}

static void put_schema_text(od_buf *b, const od_schema *s)
{
    int n = od_schema_print(s, NULL, 0);
    char *txt = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (!txt) {
        b->oom = true; /* a schema printed as null would be a wrong answer: 507 instead */
        return;
    }
    od_schema_print(s, txt, (size_t)n + 1);
    od_buf_json_str(b, txt);
    free(txt);
}

/* Everything about one operator (GET /v1/ops/{op}). */
static void op_detail_json(od_buf *b, const od_op *op)
{
    const od_schema *s = od_op_schema(op);
    char model[256];
    od_model_name(op, model, sizeof model);
    od_buf_puts(b, "{\"name\":");
    od_buf_json_str(b, od_op_name(op));
    od_buf_puts(b, ",\"model\":");
    od_buf_json_str(b, model);
    od_buf_puts(b, ",\"overload\":");
    od_buf_json_str(b, s->overload ? s->overload : "");
    od_buf_puts(b, ",\"schema\":");
    put_schema_text(b, s);
    od_buf_puts(b, ",\"arguments\":[");
    for (int i = 0; i < s->nargs; i++) {
        const od_arg *a = &s->args[i];
        if (i)
            od_buf_putc(b, ',');
        od_buf_puts(b, "{\"name\":");
        od_buf_json_str(b, a->name ? a->name : "");
        od_buf_puts(b, ",\"type\":");
        put_type(b, a->type);
        od_buf_printf(b, ",\"kwarg_only\":%s,\"has_default\":%s", a->kwarg_only ? "true" : "false",
                      a->has_default ? "true" : "false");
        if (a->has_default) {
            od_buf_puts(b, ",\"default\":");
            od_value_to_json(b, &a->default_value);
            od_buf_puts(b, ",\"default_text\":");
            od_buf_json_str(b, a->default_text ? a->default_text : "");
        }
        if (a->alias)
            od_buf_printf(b, ",\"mutable\":%s", a->alias->is_write ? "true" : "false");
        od_buf_putc(b, '}');
    }
    od_buf_puts(b, "],\"returns\":[");
    for (int i = 0; i < s->nrets; i++) {
        if (i)
            od_buf_putc(b, ',');
        od_buf_puts(b, "{\"name\":");
        if (s->rets[i].name)
            od_buf_json_str(b, s->rets[i].name);
        else
            od_buf_puts(b, "null");
        od_buf_puts(b, ",\"type\":");
        put_type(b, s->rets[i].type);
        od_buf_putc(b, '}');
    }
    od_buf_puts(b, "],\"table\":[");
    od_slot_info slots[OD_NUM_RUNTIME_KEYS];
    od_op_table(op, slots);
    bool first = true;
    for (int k = OD_NUM_RUNTIME_KEYS - 1; k >= 0; k--) {
        const od_slot_info *si = &slots[k];
        if (!first)
            od_buf_putc(b, ',');
        first = false;
        od_buf_puts(b, "{\"key\":");
        od_buf_json_str(b, od_key_name(si->key));
        od_buf_puts(b, ",\"provenance\":");
        od_buf_json_str(b, od_provenance_name(si->prov));
        od_buf_puts(b, ",\"kernel\":");
        if (si->kernel)
            od_buf_json_str(b, si->kernel->name);
        else
            od_buf_puts(b, "null");
        if (si->kernel)
            od_buf_printf(b, ",\"fallthrough\":%s", si->kernel->fallthrough ? "true" : "false");
        put_kernel_site(b, si->kernel);
        od_buf_putc(b, '}');
    }
    od_buf_puts(b, "],\"registrations\":[");
    od_registration_info regs[64];
    int nr = od_op_registrations(op, regs, 64);
    for (int i = 0; i < nr && i < 64; i++) {
        if (i)
            od_buf_putc(b, ',');
        od_buf_puts(b, "{\"key\":");
        od_buf_json_str(b, od_key_name(regs[i].key));
        od_buf_puts(b, ",\"kernel\":");
        od_buf_json_str(b, regs[i].kernel && regs[i].kernel->name ? regs[i].kernel->name : "?");
        if (regs[i].kernel)
            od_buf_printf(b, ",\"fallthrough\":%s", regs[i].kernel->fallthrough ? "true" : "false");
        put_kernel_site(b, regs[i].kernel);
        od_buf_putc(b, '}');
    }
    od_buf_puts(b, "],\"fallthrough_keys\":");
    od_buf_keyset(b, od_op_fallthrough_keys(op));
    od_buf_puts(b, "}");
}

void od_h_op_detail(od_req *r)
{
    const char *name = r->params[0];
    const od_op *ovl[64];
    const od_op *op = od_op_find(name);
    int n = 0;
    if (op) {
        ovl[0] = op;
        n = 1;
    } else {
        n = od_op_overloads(name, ovl, 64);
        if (n > 64)
            n = 64;
    }
    if (n == 0) {
        od_respond_error(r, OD_ENOTFOUND, "unknown operator '%s' (GET /v1/ops lists them)", name);
        return;
    }
    od_buf b;
    od_buf_init(&b);
    const char *fmt = od_req_query(r, "format");
    if (fmt && !strcmp(fmt, "text")) {
        for (int i = 0; i < n; i++) {
            char *t = od_dump_table(ovl[i]);
            char *d = od_dump_state(ovl[i]);
            if (i)
                od_buf_puts(&b, "\n");
            od_buf_puts(&b, "# computed dispatch table (torch._C._dispatch_dump_table)\n");
            od_buf_puts(&b, t ? t : "");
            od_buf_puts(&b, "\n# registrations (torch._C._dispatch_dump)\n");
            od_buf_puts(&b, d ? d : "");
            free(t);
            free(d);
        }
        od_respond_buf(r, 200, "text/plain; charset=utf-8", &b);
        return;
    }
    if (fmt && strcmp(fmt, "json") != 0) {
        od_buf_free(&b);
        od_respond_error(r, OD_EINVAL, "format must be json or text, got '%.32s'", fmt);
        return;
    }
    if (n == 1) {
        op_detail_json(&b, ovl[0]);
    } else {
        const od_schema *s = od_op_schema(ovl[0]);
        od_buf_printf(&b, "{\"name\":\"%s::%s\",\"overloads\":[", s->ns ? s->ns : "aten", s->name);
        for (int i = 0; i < n; i++) {
            if (i)
                od_buf_putc(&b, ',');
            op_detail_json(&b, ovl[i]);
        }
        od_buf_puts(&b, "]}");
    }
    od_respond_buf(r, 200, "application/json", &b);
}

void od_h_ops_list(od_req *r)
{
    od_buf b;
    od_buf_init(&b);
    int n = od_op_count();
    od_buf_printf(&b, "{\"count\":%d,\"operators\":[", n);
    bool *done = calloc((size_t)n + 1, 1);
    if (!done) {
        od_buf_free(&b);
        od_respond_error(r, OD_ENOMEM, "out of memory");
        return;
    }
    bool first_group = true;
    for (int i = 0; i < n; i++) {
        if (done[i])
            continue;
        const od_op *op = od_op_at(i);
        const od_schema *s = od_op_schema(op);
        if (!first_group)
            od_buf_putc(&b, ',');
        first_group = false;
        od_buf_printf(&b, "{\"name\":\"%s::%s\",\"overloads\":[", s->ns ? s->ns : "aten", s->name);
        bool first = true;
        for (int j = i; j < n; j++) {
            const od_op *o = od_op_at(j);
            const od_schema *sj = od_op_schema(o);
            if (done[j] || strcmp(sj->name, s->name) != 0 ||
                strcmp(sj->ns ? sj->ns : "", s->ns ? s->ns : "") != 0)
                continue;
            done[j] = true;
            if (!first)
                od_buf_putc(&b, ',');
            first = false;
            char model[256];
            od_model_name(o, model, sizeof model);
            od_buf_puts(&b, "{\"name\":");
            od_buf_json_str(&b, od_op_name(o));
            od_buf_puts(&b, ",\"model\":");
            od_buf_json_str(&b, model);
            od_buf_puts(&b, ",\"overload\":");
            od_buf_json_str(&b, sj->overload ? sj->overload : "");
            od_buf_puts(&b, ",\"schema\":");
            put_schema_text(&b, sj);
            od_buf_puts(&b, ",\"kernels\":[");
            od_registration_info regs[64];
            int nr = od_op_registrations(o, regs, 64);
            for (int k = 0; k < nr && k < 64; k++) {
                if (k)
                    od_buf_putc(&b, ',');
                od_buf_json_str(&b, od_key_name(regs[k].key));
            }
            od_buf_puts(&b, "],\"table\":{");
            od_slot_info slots[OD_NUM_RUNTIME_KEYS];
            od_op_table(o, slots);
            bool fk = true;
            for (int k = OD_NUM_RUNTIME_KEYS - 1; k >= 0; k--) {
                if (slots[k].prov == OD_PROV_MISSING ||
                    (slots[k].kernel && slots[k].kernel->fallthrough))
                    continue;
                if (!fk)
                    od_buf_putc(&b, ',');
                fk = false;
                od_buf_json_str(&b, od_key_name(slots[k].key));
                od_buf_putc(&b, ':');
                od_buf_json_str(&b, od_provenance_name(slots[k].prov));
            }
            od_buf_puts(&b, "}}");
        }
        od_buf_puts(&b, "]}");
    }
    free(done);
    od_buf_puts(&b, "]}");
    od_respond_buf(r, 200, "application/json", &b);
}


void od_h_keys(od_req *r)
{
    od_buf b;
    od_buf_init(&b);
    od_buf_puts(&b, "{\"runtime_keys\":[");
    for (int k = OD_NUM_RUNTIME_KEYS - 1; k >= 0; k--) {
        if (k != OD_NUM_RUNTIME_KEYS - 1)
            od_buf_putc(&b, ',');
        od_buf_puts(&b, "{\"name\":");
        od_buf_json_str(&b, od_key_name((od_key)k));
        od_buf_printf(&b, ",\"priority\":%d,\"kind\":\"%s\",\"description\":", k,
                      od_key_is_backend((od_key)k)    ? "backend"
                      : od_key_is_autograd((od_key)k) ? "autograd"
                      : k == OD_KEY_Undefined         ? "none"
                                                      : "functionality");
        od_buf_json_str(&b, od_key_description((od_key)k));
        const od_kernel *fb = od_backend_fallback((od_key)k);
        od_buf_puts(&b, ",\"backend_fallback\":");
        if (fb) {
            od_buf_puts(&b, "{\"kernel\":");
            od_buf_json_str(&b, fb->name ? fb->name : "?");
            od_buf_printf(&b, ",\"fallthrough\":%s", fb->fallthrough ? "true" : "false");
            put_kernel_site(&b, fb);
            od_buf_putc(&b, '}');
        } else {
            od_buf_puts(&b, "null");
        }
        od_buf_putc(&b, '}');
    }
    od_buf_puts(&b, "],\"alias_keys\":[");
    for (int k = OD_FIRST_ALIAS_KEY; k < OD_NUM_KEYS; k++) {
        if (k != OD_FIRST_ALIAS_KEY)
            od_buf_putc(&b, ',');
        od_buf_puts(&b, "{\"name\":");
        od_buf_json_str(&b, od_key_name((od_key)k));
        od_buf_puts(&b, ",\"description\":");
        od_buf_json_str(&b, od_key_description((od_key)k));
        od_buf_puts(&b, ",\"expands_to\":");
        od_buf_keyset(&b, od_key_runtime_set((od_key)k));
        od_buf_putc(&b, '}');
    }
    od_buf_puts(&b, "],\"default_included\":");
    od_buf_keyset(&b, OD_KS_DEFAULT_INCLUDED);
    od_buf_puts(&b, ",\"default_excluded\":");
    od_buf_keyset(&b, OD_KS_DEFAULT_EXCLUDED);
    /* The thread-local sets a request runs with, per setting: each one is
     * entered on this thread exactly as a call enters it, read, and undone. */
    od_buf_puts(&b, ",\"request_tls\":{");
    static const struct {
        const char *name;
        od_grad_mode grad;
        od_dtype autocast;
        bool modes, vmap;
    } settings[] = {{"default", OD_GRAD_ENABLED, OD_NUM_DTYPES, false, false},
                    {"grad_mode=no_grad", OD_GRAD_NO_GRAD, OD_NUM_DTYPES, false, false},
                    {"autocast=bfloat16", OD_GRAD_ENABLED, OD_BFLOAT16, false, false},
                    {"modes=[trace]", OD_GRAD_ENABLED, OD_NUM_DTYPES, true, false},
                    {"vmap", OD_GRAD_ENABLED, OD_NUM_DTYPES, false, true}};
    for (size_t i = 0; i < sizeof settings / sizeof settings[0]; i++) {
        od_exec x;
        od_exec_init(&x);
        x.grad_mode = settings[i].grad;
        x.autocast = settings[i].autocast;
        x.autocast_key = OD_KEY_AutocastCPU;
        od_mode_stack ms = {0};
        od_error ignore;
        if (settings[i].modes && od_mode_stack_push(&ms, "trace", NULL, 0, &ignore) == OD_OK)
            x.stack = &ms;
        od_vmap_level lv = {1, 1, OD_RANDOMNESS_ERROR, NULL};
        od_tls saved = od_exec_enter(&x);
        if (settings[i].vmap)
            od_vmap_enter(&lv);
        od_keyset inc = od_tls_included(), exc = od_tls_excluded();
        od_tls_restore(&saved);
        od_mode_stack_clear(&ms);
        od_buf_printf(&b, "%s\"%s\":{\"included\":", i ? "," : "", settings[i].name);
        od_buf_keyset(&b, inc);
        od_buf_puts(&b, ",\"excluded\":");
        od_buf_keyset(&b, exc);
        od_buf_putc(&b, '}');
    }
    od_buf_puts(&b, "}}");
    od_respond_buf(r, 200, "application/json", &b);
}

/* Facts as JSON members (no braces); "a.b" keys nest in an object "a"
 * (od_devices.h keeps a group's keys together). */
static void put_props(od_buf *b, const od_props *ps, bool first)
{
    const char *group = NULL;
    size_t glen = 0;
    for (int i = 0; i < ps->n; i++) {
        const od_prop *p = &ps->p[i];
        const char *dot = strchr(p->key, '.');
        size_t gl = dot ? (size_t)(dot - p->key) : 0;
        if (group && (gl != glen || strncmp(group, p->key, glen) != 0)) {
            od_buf_putc(b, '}');
            group = NULL;
        }
        if (!first)
            od_buf_putc(b, ',');
        first = false;
        if (dot && !group) {
            group = p->key;
            glen = gl;
            od_buf_json_strn(b, p->key, gl);
            od_buf_puts(b, ":{");
            first = true;
        }
        od_buf_json_str(b, dot ? dot + 1 : p->key);
        od_buf_putc(b, ':');
        if (p->kind == OD_PROP_TEXT)
            od_buf_json_str(b, p->text);
        else if (p->kind == OD_PROP_BOOL)
            od_buf_puts(b, p->i ? "true" : "false");
        else
            od_buf_i64(b, p->i);
        first = false;
    }
    if (group)
        od_buf_putc(b, '}');
}

void od_h_devices(od_req *r)
{
    od_buf b;
    od_buf_init(&b);
    od_buf_putc(&b, '{');
    int nb;
    const od_backend *bk = od_backends(&nb);
    for (int k = 0; k < nb; k++) {
        od_props ps;
        if (k)
            od_buf_putc(&b, ',');
        od_buf_json_str(&b, bk[k].name);
        od_buf_putc(&b, ':');
        if (!strcmp(bk[k].name, "cpu")) { /* the host: its facts, and the server's threads */
            bk[k].device_props(0, &ps);
            od_buf_putc(&b, '{');
            put_props(&b, &ps, true);
            od_buf_printf(&b, ",\"http_threads\":%d,\"call_workers\":%d}", od_cfg.threads,
                          od_cfg.call_workers);
            continue;
        }
        const char *why = bk[k].why_unavailable();
        od_buf_printf(&b, "{\"available\":%s,\"compiled\":%s", *why ? "false" : "true",
                      bk[k].compiled ? "true" : "false");
        if (*why) {
            od_buf_puts(&b, ",\"reason\":");
            od_buf_json_str(&b, why);
        }
        od_buf_puts(&b, ",\"devices\":[");
        int n = bk[k].device_count();
        for (int i = 0; i < n; i++) {
            if (bk[k].device_props(i, &ps) != OD_OK)
                continue;
            if (i)
                od_buf_putc(&b, ',');
            od_buf_putc(&b, '{');
            put_props(&b, &ps, true);
            od_buf_putc(&b, '}');
        }
        od_buf_puts(&b, "]}");
    }
    od_buf_putc(&b, '}');
    od_respond_buf(r, 200, "application/json", &b);
}

/* ---- statistics and index -------------------------------------------------------- */

void od_h_stats(od_req *r)
{
    od_buf b;
    od_buf_init(&b);
    od_stats_json(&b);
    /* The store's counters join the object od_stats_json closed. */
    if (b.len && b.data[b.len - 1] == '}')
        b.len--;
    od_store_totals st;
    od_store_stats(&st);
    od_buf_printf(&b, ",\"store\":{\"tensors\":%lld,\"sessions\":%lld,\"puts\":%lld,\"deletes\":%lld,"
                      "\"expired_sessions\":%lld,\"bytes\":{",
                  (long long)st.tensors, (long long)st.sessions, (long long)st.puts, (long long)st.deletes,
                  (long long)st.expired_sessions);
    for (int d = 0; d < OD_NUM_DEVICE_TYPES; d++)
        od_buf_printf(&b, "%s\"%s\":%lld", d ? "," : "", od_device_type_name((od_device_type)d),
                      (long long)st.bytes[d]);
    od_buf_puts(&b, "},\"evicted\":{");
    for (int d = 0; d < OD_NUM_DEVICE_TYPES; d++)
        od_buf_printf(&b, "%s\"%s\":%lld", d ? "," : "", od_device_type_name((od_device_type)d),
                      (long long)st.evicted[d]);
    od_buf_printf(&b, "}},\"autograd\":{\"live_nodes\":%ld},\"vmap_fallback\":{", od_autograd_live_nodes());
    bool first = true;
    for (int i = 0; i < od_op_count(); i++) {
        uint64_t n = od_vmap_fallback_calls(od_op_at(i));
        if (!n)
            continue;
        od_buf_printf(&b, "%s\"%s\":%llu", first ? "" : ",", od_op_name(od_op_at(i)), (unsigned long long)n);
        first = false;
    }
    od_buf_puts(&b, "}}");
    od_respond_buf(r, 200, "application/json", &b);
}

void od_h_stats_reset(od_req *r)
{
    od_stats_reset();
    od_buf b;
    od_buf_init(&b);
    od_buf_puts(&b, "{\"reset\":true}");
    od_respond_buf(r, 200, "application/json", &b);
}

void od_h_metrics(od_req *r)
{
    od_buf b;
    od_buf_init(&b);
    od_stats_prometheus(&b);
    long queued = 0, running = 0, waiting = 0;
    size_t active = 0;
    od_workers_load(&queued, &running);
    od_server_admission(&active, &waiting);
    od_buf_printf(&b,
                  "# HELP od_requests_in_flight HTTP requests received and not yet completed.\n"
                  "# TYPE od_requests_in_flight gauge\nod_requests_in_flight %ld\n"
                  "# HELP od_request_body_bytes_in_flight Bytes reserved for request bodies "
                  "(--max-inflight-body-bytes caps it).\n"
                  "# TYPE od_request_body_bytes_in_flight gauge\nod_request_body_bytes_in_flight %zu\n"
                  "# HELP od_request_body_bytes_active Bytes claimed by large bodies being read or "
                  "worked on (--max-active-body-bytes caps it).\n"
                  "# TYPE od_request_body_bytes_active gauge\nod_request_body_bytes_active %zu\n"
                  "# HELP od_requests_waiting_for_body_budget Requests whose large body waits its "
                  "turn, unread.\n"
                  "# TYPE od_requests_waiting_for_body_budget gauge\nod_requests_waiting_for_body_budget %ld\n"
                  "# HELP od_calls_queued Operator calls waiting for a call worker.\n"
                  "# TYPE od_calls_queued gauge\nod_calls_queued %ld\n"
                  "# HELP od_calls_running Operator calls running on call workers.\n"
                  "# TYPE od_calls_running gauge\nod_calls_running %ld\n",
                  od_server_inflight(), od_server_body_bytes(), active, waiting, queued, running);
    /* what the CPU allocator holds: its cache keeps freed large blocks (up
     * to its limit), so RSS follows peak concurrency, not a leak */
    od_cpu_alloc_info ai;
    od_cpu_alloc_stats(&ai);
    od_buf_printf(&b,
                  "# HELP od_cpu_alloc_in_use_bytes Bytes of live CPU tensor and body allocations.\n"
                  "# TYPE od_cpu_alloc_in_use_bytes gauge\nod_cpu_alloc_in_use_bytes %zu\n"
                  "# HELP od_cpu_alloc_cached_bytes Freed large blocks the CPU allocator keeps for reuse.\n"
                  "# TYPE od_cpu_alloc_cached_bytes gauge\nod_cpu_alloc_cached_bytes %zu\n"
                  "# HELP od_cpu_alloc_cache_limit_bytes Cap on od_cpu_alloc_cached_bytes.\n"
                  "# TYPE od_cpu_alloc_cache_limit_bytes gauge\nod_cpu_alloc_cache_limit_bytes %zu\n",
                  ai.in_use_bytes, ai.cached_bytes, ai.cache_limit);
    od_store_totals st;
    od_store_stats(&st);
    od_buf_printf(&b,
                  "# HELP od_store_tensors Tensors kept on the server (all sessions).\n"
                  "# TYPE od_store_tensors gauge\nod_store_tensors %lld\n"
                  "# HELP od_store_sessions Sessions with state on the server.\n"
                  "# TYPE od_store_sessions gauge\nod_store_sessions %lld\n"
                  "# HELP od_store_puts_total Tensors stored (POST /v1/tensors and kept outputs).\n"
                  "# TYPE od_store_puts_total counter\nod_store_puts_total %lld\n"
                  "# HELP od_store_deletes_total Stored tensors freed.\n"
                  "# TYPE od_store_deletes_total counter\nod_store_deletes_total %lld\n"
                  "# HELP od_store_expired_sessions_total Sessions freed after --session-idle-seconds.\n"
                  "# TYPE od_store_expired_sessions_total counter\nod_store_expired_sessions_total %lld\n"
                  "# HELP od_store_bytes Bytes of stored tensors by device type.\n"
                  "# TYPE od_store_bytes gauge\n",
                  (long long)st.tensors, (long long)st.sessions, (long long)st.puts, (long long)st.deletes,
                  (long long)st.expired_sessions);
    for (int d = 0; d < OD_NUM_DEVICE_TYPES; d++)
        od_buf_printf(&b, "od_store_bytes{device=\"%s\"} %lld\n", od_device_type_name((od_device_type)d),
                      (long long)st.bytes[d]);
    od_buf_puts(&b, "# HELP od_store_evictions_total Stored tensors evicted under --store-high-water-bytes.\n"
                    "# TYPE od_store_evictions_total counter\n");
    for (int d = 0; d < OD_NUM_DEVICE_TYPES; d++)
        od_buf_printf(&b, "od_store_evictions_total{device=\"%s\"} %lld\n",
                      od_device_type_name((od_device_type)d), (long long)st.evicted[d]);
    od_buf_printf(&b, "# HELP od_autograd_live_nodes Autograd graph nodes alive (held by stored tensors).\n"
                      "# TYPE od_autograd_live_nodes gauge\nod_autograd_live_nodes %ld\n",
                  od_autograd_live_nodes());
    od_buf_puts(&b, "# HELP od_vmap_fallback_calls_total Calls batched by the per-sample vmap fallback (the slow path).\n"
                    "# TYPE od_vmap_fallback_calls_total counter\n");
    for (int i = 0; i < od_op_count(); i++) {
        uint64_t n = od_vmap_fallback_calls(od_op_at(i));
        if (n)
            od_buf_printf(&b, "od_vmap_fallback_calls_total{op=\"%s\"} %llu\n", od_op_name(od_op_at(i)),
                          (unsigned long long)n);
    }
    od_respond_buf(r, 200, "text/plain; version=0.0.4; charset=utf-8", &b);
}

void od_h_index(od_req *r)
{
    if (od_web_wants_page(r)) { /* a browser: the dashboard */
        od_web_index(r);
        return;
    }
    od_buf b;
    od_buf_init(&b);
    od_buf_puts(&b, "{\"name\":\"opdispatch\",\"version\":\"" OD_VERSION "\",\"endpoints\":");
    od_server_endpoints_json(&b); /* from the route table */
    od_buf_puts(&b, "}");
    od_respond_buf(r, 200, "application/json", &b);
}
