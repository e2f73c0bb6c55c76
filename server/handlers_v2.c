/* handlers_v2.c — the Open Inference Protocol (KServe v2) surface, shaped
 * the way Triton serves it so that its clients and perf_analyzer work
 * unchanged: each operator overload is a model named without its namespace
 * ("add.Tensor", "relu"), version "1".
 *
 * Invariants: inputs are named after the schema's arguments and outputs
 * after its returns (od_proto_return_name); non-tensor arguments may come
 * as one-element inputs or in the request's "parameters"; the statistics
 * are Triton's shape (cumulative {count, ns}).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "od_server.h"
#include "od_stats.h"

static bool version_ok(od_req *r, const char *model)
{
    const char *v = r->params[1];
    if (v[0] && strcmp(v, "1") != 0) {
        od_respond_error(r, OD_ENOTFOUND, "model '%s' has no version '%s' (only version 1)",
                         model, v);
        return false;
    }
    return true;
}

/* The model of the URL, or NULL after answering 404. */
static const od_op *model_of(od_req *r)
{
    od_error err;
    od_error_clear(&err);
    const od_op *op = od_resolve_op(r->params[0], NULL, NULL, &err);
    if (!op) {
        od_respond_od_error(r, &err);
        return NULL;
    }
    return version_ok(r, r->params[0]) ? op : NULL;
}

void od_h_v2_server(od_req *r)
{
    od_buf b;
    od_buf_init(&b);
    od_buf_puts(&b, "{\"name\":\"opdispatch\",\"version\":\"" OD_VERSION "\",\"extensions\":["
                    "\"binary_tensor_data\",\"statistics\",\"model_configuration\","
                    "\"model_repository\"]}");
    od_respond_buf(r, 200, "application/json", &b);
}

void od_h_v2_live(od_req *r) { od_respond_empty(r, 200); }

void od_h_v2_ready(od_req *r)
{
    if (atomic_load(&od_draining))
        od_respond_error(r, OD_EBUSY, "shutting down: not accepting new requests");
    else
        od_respond_empty(r, 200);
}

void od_h_v2_model_ready(od_req *r)
{
    if (model_of(r))
        od_respond_empty(r, 200);
}

static void put_tensor_meta(od_buf *b, const char *name, const char *dt, int rank, bool config,
                            bool optional)
{
    od_buf_puts(b, "{\"name\":");
    od_buf_json_str(b, name);
    if (config)
        od_buf_printf(b, ",\"data_type\":\"TYPE_%s\",\"dims\":[-1]", dt);
    else
        od_buf_printf(b, ",\"datatype\":\"%s\",\"shape\":[%d]", dt, rank < 0 ? -1 : 1);
    if (config)
        od_buf_printf(b, ",\"optional\":%s", optional ? "true" : "false");
    od_buf_putc(b, '}');
}

static void put_io(od_buf *b, const od_op *op, bool config)
{
    const od_schema *s = od_op_schema(op);
    od_buf_puts(b, config ? "\"input\":[" : "\"inputs\":[");
    bool first = true;
    for (int i = 0; i < s->nargs; i++) {
        const char *dt;
        int rank;
        if (!od_proto_arg_oip(s->args[i].type, &dt, &rank))
            continue;
        if (!first)
            od_buf_putc(b, ',');
        first = false;
        if (config && rank >= 0)
            rank = -1;
        put_tensor_meta(b, s->args[i].name, dt, rank, config,
                        s->args[i].has_default || od_type_is_optional(s->args[i].type));
    }
    od_buf_puts(b, config ? "],\"output\":[" : "],\"outputs\":[");
    for (int i = 0; i < s->nrets; i++) {
        char nm[128];
        od_proto_return_name(s, i, nm, sizeof nm);
        const char *dt = "FP32";
        int rank = -1;
        od_proto_arg_oip(s->rets[i].type, &dt, &rank);
        if (i)
            od_buf_putc(b, ',');
        od_buf_puts(b, "{\"name\":");
        od_buf_json_str(b, nm);
        if (config)
            od_buf_printf(b, ",\"data_type\":\"TYPE_%s\",\"dims\":[-1]}", dt);
        else
            od_buf_printf(b, ",\"datatype\":\"%s\",\"shape\":[-1]}", dt);
    }
    od_buf_putc(b, ']');
}

void od_h_v2_model(od_req *r)
{
    const od_op *op = model_of(r);
    if (!op)
        return;
    char model[256];
    od_model_name(op, model, sizeof model);
    od_buf b;
    od_buf_init(&b);
    od_buf_puts(&b, "{\"name\":");
    od_buf_json_str(&b, model);
    od_buf_puts(&b, ",\"versions\":[\"1\"],\"platform\":\"opdispatch\",");
    put_io(&b, op, false);
    od_buf_putc(&b, '}');
    od_respond_buf(r, 200, "application/json", &b);
}

void od_h_v2_model_config(od_req *r)
{
    const od_op *op = model_of(r);
    if (!op)
        return;
    char model[256];
    od_model_name(op, model, sizeof model);
    bool gpu = !*od_cuda_why();
    od_buf b;
    od_buf_init(&b);
    od_buf_puts(&b, "{\"name\":");
    od_buf_json_str(&b, model);
    od_buf_puts(&b, ",\"platform\":\"opdispatch\",\"backend\":\"opdispatch\",\"max_batch_size\":0,");
    put_io(&b, op, true);
    od_buf_printf(&b,
                  ",\"instance_group\":[{\"name\":\"%s\",\"kind\":\"%s\",\"count\":%d}],"
                  "\"version_policy\":{\"latest\":{\"num_versions\":1}},\"parameters\":{\"schema\":{"
                  "\"string_value\":",
                  gpu ? "gpu" : "cpu", gpu ? "KIND_GPU" : "KIND_CPU", od_cfg.threads);
    int n = od_schema_print(od_op_schema(op), NULL, 0);
    char *txt = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (txt) {
        od_schema_print(od_op_schema(op), txt, (size_t)n + 1);
        od_buf_json_str(&b, txt);
        free(txt);
    } else {
        od_buf_puts(&b, "\"\"");
    }
    od_buf_puts(&b, "}}}");
    od_respond_buf(r, 200, "application/json", &b);
}

void od_h_v2_model_stats(od_req *r)
{
    const od_op *op = model_of(r);
    if (!op)
        return;
    od_buf b;
    od_buf_init(&b);
    od_stats_triton(&b, op);
    od_respond_buf(r, 200, "application/json", &b);
}

void od_h_v2_models_stats(od_req *r)
{
    od_buf b;
    od_buf_init(&b);
    od_stats_triton(&b, NULL);
    od_respond_buf(r, 200, "application/json", &b);
}

void od_h_v2_repo_index(od_req *r)
{
    od_buf b;
    od_buf_init(&b);
    od_buf_putc(&b, '[');
    for (int i = 0; i < od_op_count(); i++) {
        char model[256];
        od_model_name(od_op_at(i), model, sizeof model);
        if (i)
            od_buf_putc(&b, ',');
        od_buf_puts(&b, "{\"name\":");
        od_buf_json_str(&b, model);
        od_buf_puts(&b, ",\"version\":\"1\",\"state\":\"READY\"}");
    }
    od_buf_putc(&b, ']');
    od_respond_buf(r, 200, "application/json", &b);
}

/* For a name with several overloads ("add"): an overload fits when its
 * arguments cover the inputs' names and its required arguments are all
 * given (as inputs or parameters). */
typedef struct infer_args {
    json_t *inputs, *params;
} infer_args;

static bool inputs_fit(const od_op *op, void *ctx, od_error *why)
{
    const infer_args *a = ctx;
    const od_schema *s = od_op_schema(op);
    size_t k;
    json_t *in;
    json_array_foreach(a->inputs, k, in) {
        const char *nm = json_string_value(json_object_get(in, "name"));
        bool found = false;
        for (int i = 0; nm && i < s->nargs; i++)
            if (!strcmp(s->args[i].name, nm)) {
                /* a tensor for a Scalar argument means the Tensor overload */
                const od_type *t = od_type_unwrap_optional(s->args[i].type);
                json_t *shape = json_object_get(in, "shape");
                bool scalar_like = json_is_array(shape) && json_array_size(shape) <= 1 &&
                                   (json_array_size(shape) == 0 ||
                                    json_integer_value(json_array_get(shape, 0)) == 1);
                found = t->kind == OD_TY_TENSOR || scalar_like;
            }
        if (!found)
            return od_error_set(why, OD_EMISMATCH, "input '%s' is not one of its tensor arguments",
                                nm ? nm : "?"),
                   false;
    }
    for (int i = 0; i < s->nargs; i++) {
        if (s->args[i].has_default || od_type_is_optional(s->args[i].type))
            continue;
        bool given = json_object_get(a->params, s->args[i].name) != NULL;
        json_array_foreach(a->inputs, k, in) {
            const char *nm = json_string_value(json_object_get(in, "name"));
            if (nm && !strcmp(nm, s->args[i].name))
                given = true;
        }
        if (!given)
            return od_error_set(why, OD_EMISMATCH, "argument '%s' is not given", s->args[i].name),
                   false;
    }
    return true;
}

typedef struct infer_req {
    json_t *inputs, *outputs, *params, *id;
    od_detail detail; /* parameters.dispatch */
} infer_req;

static od_status v2_parse(od_req *r, void *qv, od_json_doc **doc, const char **device, od_error *err)
{
    infer_req *q = qv;
    size_t jlen;
    const char *json = od_req_json(r, &jlen);
    od_proto_limits lim = od_limits();
    od_status st = od_json_parse(json, jlen, &lim, doc, err);
    if (st == OD_OK && r->binary)
        st = od_json_attach_binary(*doc, r->body, r->hdr_len, r->body->len - r->hdr_len, err);
    if (st != OD_OK)
        return st;
    json_t *root = od_json_root(*doc);
    if (!json_is_object(root))
        return od_error_set(err, OD_EINVAL, "the body must be a JSON object {\"inputs\": [...]}, got %s",
                            od_json_kind(root));
    q->inputs = json_object_get(root, "inputs");
    q->outputs = json_object_get(root, "outputs");
    q->params = json_object_get(root, "parameters");
    q->id = json_object_get(root, "id");
    if (!json_is_array(q->inputs))
        return od_error_set(err, OD_EINVAL, "\"inputs\" must be a list of tensors, got %s",
                            q->inputs ? od_json_kind(q->inputs) : "nothing");
    if (q->params && !json_is_object(q->params))
        return od_error_set(err, OD_EINVAL, "\"parameters\" must be an object");
    if (q->id && !json_is_string(q->id))
        return od_error_set(err, OD_EINVAL, "\"id\" must be a string");
    if ((st = od_detail_parse(json_object_get(q->params, "dispatch"), "parameters.dispatch", &q->detail, err)))
        return st;
    json_t *dv = json_object_get(q->params, "device");
    if (dv && !json_is_string(dv))
        return od_error_set(err, OD_EINVAL, "parameters.device must be a string");
    *device = dv ? json_string_value(dv) : NULL;
    return OD_OK;
}

static const od_op *v2_resolve(od_req *r, void *qv, od_error *err)
{
    infer_req *q = qv;
    infer_args ia = {q->inputs, q->params};
    return od_resolve_op(r->params[0], inputs_fit, &ia, err);
}

static od_status v2_bind(const od_op *op, od_json_doc *doc, void *qv, const od_bind_opts *bo,
                         od_bound *out, od_error *err)
{
    infer_req *q = qv;
    return od_proto_bind_oip(op, doc, q->inputs, q->params, bo, out, err);
}

static json_t *v2_outputs(void *qv) { return ((infer_req *)qv)->outputs; }
static json_t *v2_params(void *qv) { return ((infer_req *)qv)->params; }

static void v2_head(od_buf *b, const od_srv_call *c, void *qv)
{
    infer_req *q = qv;
    char model[256];
    od_model_name(c->op, model, sizeof model);
    od_buf_puts(b, "{\"model_name\":");
    od_buf_json_str(b, model);
    od_buf_puts(b, ",\"model_version\":\"1\",");
    if (q->id) {
        od_buf_puts(b, "\"id\":");
        od_buf_json_str(b, json_string_value(q->id));
        od_buf_putc(b, ',');
    }
}

static void v2_tail(od_buf *b, const od_srv_call *c, void *qv)
{
    od_detail d = ((infer_req *)qv)->detail;
    if (d != OD_DETAIL_NONE) {
        od_buf_puts(b, ",\"parameters\":{\"dispatch_key\":");
        od_buf_json_str(b, od_key_name(c->key));
        od_buf_puts(b, ",\"kernel\":");
        od_buf_json_str(b, c->trace.nsteps && c->trace.steps[0].kernel ? c->trace.steps[0].kernel->name : "");
        if (d == OD_DETAIL_FULL) {
            od_buf_puts(b, ",\"dispatch\":");
            od_srv_call_dispatch_json(b, c, d);
        }
        od_buf_putc(b, '}');
    }
    od_buf_putc(b, '}');
}

/* parameters.keep: outputs stay on the server (their ids come back). */
static bool v2_keep(void *qv)
{
    return json_is_true(json_object_get(v2_params(qv), "keep"));
}

static const od_call_proto v2_proto = {true, v2_parse, v2_resolve, v2_bind, v2_outputs,
                                       v2_params, v2_keep, NULL, v2_head, v2_tail};

void od_h_v2_infer(od_req *r)
{
    if (!version_ok(r, r->params[0]))
        return;
    infer_req q;
    memset(&q, 0, sizeof q);
    od_serve_call(r, &v2_proto, &q);
}
