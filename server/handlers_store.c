/* handlers_store.c — /v1/tensors and /v1/sessions: tensors kept on the
 * server between requests (the store is store.c).
 *
 * Invariants: every handler answers exactly once and names its session the
 * same way (od_req_session); every tensor it takes from the store or decodes
 * is released on every path. A stored tensor is sent back as it is (device,
 * strides): GET converts a copy to a contiguous CPU tensor for the wire.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "od_autograd.h"
#include "od_parallel.h"
#include "od_server.h"

const char *od_req_session_name(od_req *r)
{
    const char *s = od_req_header(r, "X-OD-Session");
    if (!s)
        return OD_DEFAULT_SESSION;
    return od_session_name_ok(s) ? s : NULL;
}

const char *od_req_session(od_req *r)
{
    const char *s = od_req_session_name(r);
    if (!s) {
        od_respond_error(r, OD_EINVAL,
                         "X-OD-Session must be 1 to %d characters of A-Z, a-z, 0-9, '.', '-' and '_'",
                         OD_SESSION_MAX);
        return NULL;
    }
    return s;
}

od_status od_store_ref(void *ctx, const char *id, od_tensor **out, od_error *err)
{
    const char *s = od_req_session_name(ctx);
    if (!s)
        return od_error_set(err, OD_EINVAL, "X-OD-Session is not a valid session name");
    return od_store_get(s, id, out, err);
}

/* POST /v1/tensors: {"tensor": {...}, "device": "cuda"} (binary data by the
 * binary tensor extension, as for calls). 201 with the id and metadata. */
void od_h_tensor_put(od_req *r)
{
    const char *session = od_req_session(r);
    if (!session)
        return;
    static const char *const fields[] = {"tensor", "device", NULL};
    od_proto_limits lim = od_limits();
    lim.top_keys = fields;
    od_error err;
    od_error_clear(&err);
    od_json_doc *doc = NULL;
    od_tensor *t = NULL;
    od_device dev;
    const char *device = NULL;
    size_t jlen;
    const char *json = od_req_json(r, &jlen);
    od_status st = od_json_parse(json, jlen, &lim, &doc, &err);
    if (st == OD_OK && r->binary)
        st = od_json_attach_binary(doc, r->body, r->hdr_len, r->body->len - r->hdr_len, &err);
    json_t *root = st == OD_OK ? od_json_root(doc) : NULL;
    json_t *jt = json_is_object(root) ? json_object_get(root, "tensor") : NULL;
    if (st == OD_OK && !jt)
        st = od_error_set(&err, OD_EINVAL, "the body must be {\"tensor\": {\"dtype\", \"shape\", \"data\"}, "
                                           "\"device\": ...}");
    json_t *jd = st == OD_OK ? json_object_get(root, "device") : NULL;
    if (st == OD_OK && jd && !json_is_string(jd))
        st = od_error_set(&err, OD_EINVAL, "\"device\" must be a string, got %s", od_json_kind(jd));
    if (st == OD_OK && jd)
        device = json_string_value(jd);
    if (st == OD_OK)
        st = od_resolve_device(device, &dev, &err);
    if (st == OD_OK)
        st = od_tensor_from_json(doc, jt, &lim, OD_DECODE_DATA, "tensor", &t, &err);
    if (st == OD_OK && !od_device_eq(t->device, dev)) {
        od_tensor *moved = NULL;
        st = od_to_device_leaf(t, dev, &moved, &err);
        od_tensor_release(t);
        t = moved;
    }
    char id[OD_ID_LEN];
    if (st == OD_OK)
        st = od_store_put(session, t, id, &err);
    if (st == OD_OK) {
        od_buf b;
        od_buf_init(&b);
        od_store_tensor_meta_json(&b, NULL, id, t);
        od_respond_buf(r, 201, "application/json", &b);
    } else {
        od_respond_od_error(r, &err);
    }
    od_tensor_release(t);
    od_json_doc_free(doc);
}

void od_h_tensor_list(od_req *r)
{
    const char *session = od_req_session(r);
    if (!session)
        return;
    od_buf b;
    od_buf_init(&b);
    od_store_list_json(session, &b);
    od_respond_buf(r, 200, "application/json", &b);
}

static bool query_true(od_req *r, const char *key)
{
    const char *v = od_req_query(r, key);
    return v && (!strcmp(v, "1") || !strcmp(v, "true"));
}

void od_h_tensor_get(od_req *r)
{
    const char *session = od_req_session(r);
    if (!session)
        return;
    const char *id = r->params[0];
    od_error err;
    od_error_clear(&err);
    od_tensor *t = NULL, *h = NULL;
    od_status st = od_store_get(session, id, &t, &err);
    od_buf b;
    od_buf_init(&b);
    if (st == OD_OK && query_true(r, "meta")) {
        od_store_tensor_detail_json(&b, session, id, t);
        od_respond_buf(r, 200, "application/json", &b);
        od_tensor_release(t);
        return;
    }
    /* The cap covers the answer as sent, as for calls (0: none), and is
     * checked from the shape before any copy: JSON needs at least "0," per
     * element, binary the bytes themselves. */
    size_t cap = od_cfg.max_output_bytes ? od_cfg.max_output_bytes : SIZE_MAX;
    bool binary = query_true(r, "binary") || od_want_binary(r, NULL);
    if (st == OD_OK) {
        size_t n = (size_t)od_tensor_numel(t), need;
        if (binary)
            need = od_tensor_nbytes(t);
        else if (__builtin_mul_overflow(n, (size_t)2, &need))
            need = SIZE_MAX;
        if (need > cap)
            st = od_error_set(&err, OD_ETOOLARGE,
                              "tensor '%s' would take at least %zu bytes as sent, above --max-output-bytes (%zu)",
                              id, need, cap);
    }
    if (st == OD_OK)
        st = od_host_contiguous(t, &h, &err);
    if (st == OD_OK) {
        b.limit = cap == SIZE_MAX ? 0 : cap;
        od_buf_puts(&b, "{\"id\":");
        od_buf_json_str(&b, id);
        od_buf_puts(&b, ",\"outputs\":[");
        if (binary)
            od_tensor_to_json_binary(&b, h, "out", false);
        else
            od_tensor_to_json(&b, h, "out", false);
        od_buf_puts(&b, "]}");
        if (b.oom)
            st = od_error_set(&err, b.over ? OD_ETOOLARGE : OD_ENOMEM,
                              b.over ? "tensor '%s' as JSON passes --max-output-bytes" : "out of memory writing '%s'",
                              id);
    }
    if (st != OD_OK) {
        od_buf_free(&b);
        od_respond_od_error(r, &err);
    } else if (binary) {
        od_tensor_retain(h);
        od_respond_binary(r, 200, &b, &h, 1);
    } else {
        od_respond_buf(r, 200, "application/json", &b);
    }
    od_tensor_release(h);
    od_tensor_release(t);
}

void od_h_tensor_delete(od_req *r)
{
    const char *session = od_req_session(r);
    if (!session)
        return;
    od_error err;
    od_error_clear(&err);
    if (od_store_delete(session, r->params[0], &err) != OD_OK) {
        od_respond_od_error(r, &err);
        return;
    }
    od_buf b;
    od_buf_init(&b);
    od_buf_puts(&b, "{\"deleted\":");
    od_buf_json_str(&b, r->params[0]);
    od_buf_puts(&b, "}");
    od_respond_buf(r, 200, "application/json", &b);
}

void od_h_session_new(od_req *r)
{
    char id[OD_ID_LEN];
    od_store_new_session(id);
    od_buf b;
    od_buf_init(&b);
    od_error err;
    od_error_clear(&err);
    if (od_store_session_json(id, &b, &err) != OD_OK) {
        od_buf_free(&b);
        od_respond_od_error(r, &err);
        return;
    }
    od_respond_buf(r, 201, "application/json", &b);
}

/* A session is addressed by its id in the path: knowing the id (128 random
 * bits from POST /v1/sessions) is what gives access to it. */
void od_h_session_get(od_req *r)
{
    const char *session = r->params[0];
    od_error err;
    od_error_clear(&err);
    od_buf b;
    od_buf_init(&b);
    if (od_store_session_json(session, &b, &err) != OD_OK) {
        od_buf_free(&b);
        od_respond_od_error(r, &err);
        return;
    }
    od_respond_buf(r, 200, "application/json", &b);
}

void od_h_session_delete(od_req *r)
{
    const char *session = r->params[0];
    od_error err;
    od_error_clear(&err);
    if (od_store_drop_session(session, &err) != OD_OK) {
        od_respond_od_error(r, &err);
        return;
    }
    od_buf b;
    od_buf_init(&b);
    od_buf_puts(&b, "{\"deleted\":");
    od_buf_json_str(&b, session);
    od_buf_puts(&b, "}");
    od_respond_buf(r, 200, "application/json", &b);
}

/* POST /v1/tensors/{id}/backward: {"gradient": tensor or {"ref": id},
 * "retain_graph": false}, both optional. Runs the stored tensor's graph
 * backward; every stored tensor of the session that has a .grad then has
 * it stored too, and the answer lists them: {"id", "grads": [{"id", "grad":
 * metadata}]}. */
void od_h_tensor_backward(od_req *r)
{
    const char *session = od_req_session(r);
    if (!session)
        return;
    static const char *const fields[] = {"gradient", "retain_graph", NULL};
    od_proto_limits lim = od_limits();
    lim.top_keys = fields;
    od_error err;
    od_error_clear(&err);
    od_json_doc *doc = NULL;
    od_tensor *root = NULL, *grad = NULL;
    bool retain = false;
    size_t jlen;
    const char *json = od_req_json(r, &jlen);
    od_status st = od_store_get(session, r->params[0], &root, &err);
    if (st == OD_OK && jlen) {
        st = od_json_parse(json, jlen, &lim, &doc, &err);
        if (st == OD_OK && r->binary)
            st = od_json_attach_binary(doc, r->body, r->hdr_len, r->body->len - r->hdr_len, &err);
        json_t *body = st == OD_OK ? od_json_root(doc) : NULL;
        if (st == OD_OK && !json_is_object(body))
            st = od_error_set(&err, OD_EINVAL, "the body must be {\"gradient\": tensor, \"retain_graph\": bool} or empty");
        json_t *jg = st == OD_OK ? json_object_get(body, "gradient") : NULL;
        json_t *jr = st == OD_OK ? json_object_get(body, "retain_graph") : NULL;
        if (st == OD_OK && jr && !json_is_boolean(jr))
            st = od_error_set(&err, OD_EINVAL, "\"retain_graph\" must be true or false, got %s", od_json_kind(jr));
        retain = jr && json_is_true(jr);
        json_t *ref = json_is_object(jg) ? json_object_get(jg, "ref") : NULL;
        if (st == OD_OK && ref)
            st = json_is_string(ref) ? od_store_get(session, json_string_value(ref), &grad, &err)
                                     : od_error_set(&err, OD_EINVAL, "\"ref\" must be a tensor id");
        else if (st == OD_OK && jg && !json_is_null(jg))
            st = od_tensor_from_json(doc, jg, &lim, OD_DECODE_DATA, "gradient", &grad, &err);
    }
    uint64_t t0 = od_now_ns();
    if (st == OD_OK) {
        size_t prev_limit = od_get_alloc_limit();
        od_set_alloc_limit(od_cfg.max_output_bytes);
        od_set_deadline(od_cfg.max_call_seconds ? t0 + (uint64_t)od_cfg.max_call_seconds * 1000000000u
                                                : UINT64_MAX);
        st = od_backward(root, grad, retain, &err);
        if (st == OD_OK && od_cancelled())
            st = od_error_set(&err, OD_ETIMEOUT, "backward ran past its time budget of %u s (--max-call-seconds)",
                              od_cfg.max_call_seconds);
        od_set_deadline(0);
        od_set_alloc_limit(prev_limit);
    }
    uint64_t t1 = od_now_ns();
    od_buf b;
    od_buf_init(&b);
    if (st == OD_OK) {
        od_buf_puts(&b, "{\"id\":");
        od_buf_json_str(&b, r->params[0]);
        od_buf_puts(&b, ",\"grads\":");
        st = od_store_sync_grads(session, &b, &err);
        od_buf_printf(&b, ",\"timing_us\":{\"backward\":%.3f}}", (double)(t1 - t0) / 1000.0);
    }
    if (st == OD_OK) {
        od_respond_buf(r, 200, "application/json", &b);
    } else {
        od_buf_free(&b);
        od_respond_od_error(r, &err);
    }
    od_tensor_release(grad);
    od_tensor_release(root);
    od_json_doc_free(doc);
}
