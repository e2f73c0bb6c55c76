/* calls.c — one operator call for the HTTP handlers: device choice, the
 * operator a name means, the per-request limits and time budget, output
 * encoding, statistics, and the request lifecycle both protocols share
 * (od_serve_call).
 *
 * Invariants:
 *  - The output-bytes cap and the call's deadline are set (thread-local,
 *    through the dispatcher's own calls) only around the dispatcher call, so
 *    every allocation the call makes — outputs included — is checked before
 *    it happens, and input decoding is governed by the element cap instead.
 *  - The same cap covers the response as sent: od_srv_encode_outputs bounds
 *    it from the shapes before encoding and the buffer's limit while it
 *    writes.
 *  - What a call did (key set, steps, times) comes from the dispatcher's
 *    od_call_traced; nothing here writes the dispatcher's thread state.
 *  - Outputs handed to the encoders are CPU tensors; CUDA outputs are
 *    copied back first (that copy counts as encode time).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "od_parallel.h"
#include "od_mode.h"
#include "od_vmap.h"
#include "od_server.h"
#include "od_stats.h"
#include "od_devices.h"

od_proto_limits od_limits(void)
{
    od_proto_limits l = {.max_depth = od_cfg.max_json_depth,
                         .max_rank = od_cfg.max_rank,
                         .max_elements = od_cfg.max_elements,
                         .max_values = od_cfg.max_json_values};
    return l;
}

const char *od_cuda_why(void) { return od_backend_named("cuda")->why_unavailable(); }

static int cuda_count(void) { return od_backend_named("cuda")->device_count(); }

od_status od_resolve_device(const char *name, od_device *out, od_error *err)
{
    if (!name)
        name = od_cfg.default_device;
    if (!strcmp(name, "auto")) {
        *out = (od_device){cuda_count() > 0 ? OD_DEV_CUDA : OD_DEV_CPU, 0};
        return OD_OK;
    }
    od_error e;
    od_error_clear(&e);
    if (od_device_parse(name, out, &e) != OD_OK)
        return od_error_set(err, OD_EINVAL, "\"device\": %s (expected \"cpu\", \"cuda\", \"cuda:N\" or \"auto\")",
                            e.message);
    if (out->type == OD_DEV_META)
        return od_error_set(err, OD_EINVAL,
                            "\"device\": \"meta\" computes shapes only; use POST /v1/ops/{op}/explain");
    if (out->type == OD_DEV_CUDA) {
        const char *why = od_cuda_why();
        if (*why)
            return od_error_set(err, OD_EUNAVAIL, "device '%s' requested but %s", name, why);
        int n = cuda_count();
        if (out->index < 0 || out->index >= n)
            return od_error_set(err, OD_EUNAVAIL, "device '%s' requested but this host has %d CUDA "
                                "device%s (cuda:0..cuda:%d)", name, n, n == 1 ? "" : "s", n - 1);
    }
    return OD_OK;
}

/* ---- names -------------------------------------------------------------------
 * The one way the service turns a name into an operator (the dispatcher's
 * name index makes od_op_find and od_op_overloads a hash lookup each). */

const od_op *od_resolve_op(const char *name, od_op_fits fits, void *ctx, od_error *err)
{
    const char *colons = strstr(name, "::");
    const char *tail = colons ? colons + 2 : name;
    size_t nlen = strlen(name);
    if (nlen > 8 && !strcmp(name + nlen - 8, ".default")) {
        /* torch.ops.aten.var.default: exactly the overload with no name */
        char base[256];
        snprintf(base, sizeof base, "%.*s", (int)(nlen - 8), name);
        const od_op *op = od_op_find(base);
        if (op && !*od_op_schema(op)->overload)
            return op;
        od_error_set(err, OD_ENOTFOUND, "unknown operator '%s' (GET /v1/ops lists them)", name);
        return NULL;
    }
    const od_op *dflt = od_op_find(name); /* the default overload, or the only one */
    if (strchr(tail, '.')) {              /* an overload named: that one or nothing */
        if (!dflt)
            od_error_set(err, OD_ENOTFOUND, "unknown operator '%s' (GET /v1/ops lists them)", name);
        return dflt;
    }
    const od_op *ovl[64];
    int n = od_op_overloads(name, ovl, 64);
    if (n > 64)
        n = 64;
    if (n == 0) {
        od_error_set(err, OD_ENOTFOUND, "unknown operator '%s' (GET /v1/ops lists them)", name);
        return NULL;
    }
    if (!fits) {
        if (dflt)
            return dflt;
        char list[700] = "";
        size_t len = 0;
        for (int i = 0; i < n && len < sizeof list; i++) {
            char m[256];
            od_model_name(ovl[i], m, sizeof m);
            len += (size_t)snprintf(list + len, sizeof list - len, "%s%s", i ? ", " : "", m);
        }
        od_error_set(err, OD_ENOTFOUND, "'%s' has %d overloads and no default one; name one of: %s",
                     name, n, list);
        return NULL;
    }
    if (dflt && fits(dflt, ctx, NULL))
        return dflt;
    char why[1024] = "";
    size_t len = 0;
    for (int i = 0; i < n; i++) {
        if (ovl[i] == dflt)
            continue;
        od_error e;
        od_error_clear(&e);
        if (fits(ovl[i], ctx, &e))
            return ovl[i];
        if (len < sizeof why)
            len += (size_t)snprintf(why + len, sizeof why - len, "\n  %s: %s", od_op_name(ovl[i]),
                                    e.message);
    }
    if (dflt) /* binding it reports the precise problem */
        return dflt;
    od_error_set(err, OD_EMISMATCH, "no overload of '%s' matches these arguments:%s", name, why);
    return NULL;
}

/* ---- calls cheap enough for an I/O thread ---------------------------------------
 * Handing a call to a worker costs two thread wake-ups (~40% of a tiny call's
 * throughput at 16 connections on 2 cores, bench/RESULTS.md). A call is run
 * in place when its cost is bounded by a tiny body: at most two tensor
 * arguments (their broadcast is then at most the product of two sizes read
 * from the body), no list arguments (sizes, repeats, tensor lists), no
 * factory (a Tensor argument is required), and no CUDA on the host (its
 * first use can take seconds). */
#define CHEAP_BODY_BYTES 4096

static bool bounded_schema(const od_schema *s)
{
    int tensors = 0, plain = 0;
    for (int i = 0; i < s->nargs; i++) {
        const od_type *t = s->args[i].type;
        if (t->kind == OD_TY_OPTIONAL)
            t = t->elem;
        switch (t->kind) {
        case OD_TY_TENSOR:
            tensors++;
            plain += s->args[i].type->kind == OD_TY_TENSOR;
            break;
        case OD_TY_INT: /* dims and indices among our operators, never sizes */
        case OD_TY_FLOAT:
        case OD_TY_BOOL:
        case OD_TY_SCALAR:
        case OD_TY_SCALARTYPE:
        case OD_TY_LAYOUT:
        case OD_TY_MEMORYFORMAT:
        case OD_TY_DEVICE:
            break;
        default:
            return false;
        }
    }
    return plain >= 1 && tensors <= 2;
}

/* A bare name picks, like PyTorch's argument parser, the first overload
 * whose schema fits the arguments' JSON kinds (od_resolve_op). */
typedef struct call_args {
    json_t *args, *kwargs;
} call_args;

static bool args_fit(const od_op *op, void *ctx, od_error *why)
{
    const call_args *a = ctx;
    return od_proto_args_match(op, a->args, a->kwargs, why);
}

const od_op *od_resolve_op_for_args(const char *name, json_t *args, json_t *kwargs, od_error *err)
{
    call_args a = {args, kwargs};
    return od_resolve_op(name, args_fit, &a, err);
}

bool od_srv_call_is_cheap(const char *name, const char *body, size_t body_len)
{
    if (body_len > CHEAP_BODY_BYTES || !*od_cuda_why())
        return false;
    /* A stored tensor ({"ref": id}) may be of any size: its cost is not the body's. */
    if (memmem(body, body_len, "\"ref\"", 5))
        return false;
    const od_op *dflt = od_op_find(name), *ovl[16];
    int n = od_op_overloads(name, ovl, 16);
    if (n > 16 || (n == 0 && !dflt))
        return false;
    if (dflt && !bounded_schema(od_op_schema(dflt)))
        return false;
    for (int i = 0; i < n; i++) /* a bare name may resolve to any overload */
        if (!bounded_schema(od_op_schema(ovl[i])))
            return false;
    return true;
}

od_status od_host_contiguous(od_tensor *t, od_tensor **out, od_error *err)
{
    od_device cpu = {OD_DEV_CPU, 0};
    od_tensor *h = NULL;
    if (od_device_eq(t->device, cpu)) {
        od_tensor_retain(t);
        h = t;
    } else {
        od_status st = od_to_device(t, cpu, &h, err);
        if (st != OD_OK)
            return st;
    }
    if (od_tensor_is_contiguous(h)) {
        *out = h;
        return OD_OK;
    }
    od_status st = od_tensor_empty(h->sizes, h->ndim, h->dtype, cpu, out, err);
    if (st == OD_OK)
        od_tensor_copy_out(h, od_tensor_data(*out));
    od_tensor_release(h);
    return st;
}

void od_srv_call_init(od_srv_call *c, const od_op *op)
{
    memset(c, 0, sizeof *c);
    c->op = op;
    od_bound_init(&c->bound);
    c->device = (od_device){OD_DEV_CPU, 0};
    c->key = OD_KEY_CPU;
    od_exec_init(&c->exec);
    od_error_clear(&c->err);
}

void od_srv_call_release(od_srv_call *c)
{
    od_stack_release_rets(&c->stack);
    od_bound_release(&c->bound);
}

/* Replaces a tensor value (or list) with its copy on dev. leaf: the
 * request's own tensors, which become leaves there (od_to_device_leaf). */
static size_t tensors_of(const od_value *v, od_tensor *const **ts);

static od_status move_value(od_value *v, bool owned, od_device dev, bool leaf, od_error *err)
{
    /* a wrapped number stays a CPU scalar, as in PyTorch */
    if (v->tag == OD_T_TENSOR && v->u.t && !v->u.t->wrapped_number && !od_device_eq(v->u.t->device, dev)) {
        od_tensor *nt = NULL;
        od_status st = leaf ? od_to_device_leaf(v->u.t, dev, &nt, err) : od_to_device(v->u.t, dev, &nt, err);
        if (st != OD_OK)
            return st;
        if (owned)
            od_tensor_release(v->u.t);
        v->u.t = nt;
        return OD_OK;
    }
    if (v->tag == OD_T_TENSOR_LIST) {
        od_tensor **ts = v->u.list.items;
        for (size_t i = 0; i < v->u.list.n; i++) {
            if (!ts[i] || od_device_eq(ts[i]->device, dev))
                continue;
            od_tensor *nt = NULL;
            od_status st = leaf ? od_to_device_leaf(ts[i], dev, &nt, err) : od_to_device(ts[i], dev, &nt, err);
            if (st != OD_OK)
                return st;
            od_tensor_release(ts[i]);
            ts[i] = nt;
        }
    }
    return OD_OK;
}

od_status od_srv_call_run(od_srv_call *c)
{
    od_status st = OD_OK;
    if (c->device.type == OD_DEV_CUDA) {
        for (int i = 0; i < c->bound.nargs; i++) {
            od_value *v = &c->bound.args[i];
            if ((v->tag == OD_T_TENSOR || v->tag == OD_T_TENSOR_LIST) && !c->bound.owned[i])
                continue; /* defaults hold no tensors */
            bool was_owned = c->bound.owned[i];
            if ((st = move_value(v, was_owned, c->device, true, &c->err)) != OD_OK)
                return st;
            if (v->tag == OD_T_TENSOR)
                c->bound.owned[i] = true;
        }
    }
    c->t_decoded = od_now_ns();
    od_stack_init(&c->stack, c->bound.args, c->bound.nargs);
    c->ks = od_call_keyset(c->op, &c->stack);
    c->key = od_ks_highest(c->ks);

    size_t prev_limit = od_get_alloc_limit();
    od_set_alloc_limit(od_cfg.max_output_bytes);
    od_set_deadline(c->deadline ? c->deadline
                    : od_cfg.max_call_seconds
                        ? od_now_ns() + (uint64_t)od_cfg.max_call_seconds * 1000000000u
                        : UINT64_MAX); /* no budget, but shutdown may still cancel it */
    od_vmap_level levels[OD_VMAP_MAX_LEVELS];
    od_vmap_run vm = {.lv = levels};
    c->exec.autocast_key = c->device.type == OD_DEV_CUDA ? OD_KEY_AutocastCUDA : OD_KEY_AutocastCPU;
    if (c->exec.autocast == OD_FLOAT16 && c->device.type != OD_DEV_CUDA) {
        od_set_deadline(0);
        od_set_alloc_limit(prev_limit);
        return od_error_set(&c->err, OD_EUNSUPPORTED,
                            "autocast float16 is for CUDA: CPU autocast supports bfloat16 only (as in "
                            "PyTorch 1.13)");
    }
    if (c->exec.vmap && (st = od_exec_vmap_wrap(&c->exec, &c->bound, &vm, &c->err)) != OD_OK) {
        od_set_deadline(0);
        od_set_alloc_limit(prev_limit);
        return st;
    }
    od_tls saved = od_exec_enter(&c->exec);
    if (vm.n)
        od_vmap_enter(&levels[vm.n - 1]);
    else if (c->exec.in_vmap)
        od_vmap_enter(c->exec.in_vmap);
    st = od_call_traced(c->op, &c->stack, &c->trace, &c->err);
    c->ks = c->trace.first_keyset; /* with the modes', vmap's and autocast's keys */
    c->key = od_ks_highest(c->ks);
    od_tls_restore(&saved);
    if (st == OD_OK && vm.n && (st = od_exec_vmap_unwrap(&vm, &c->stack, &c->err)) != OD_OK)
        od_stack_release_rets(&c->stack);
    if (od_cancelled()) { /* outputs are incomplete: drop them */
        od_stack_release_rets(&c->stack);
        st = od_error_set(&c->err, OD_ETIMEOUT,
                          "%s ran past its time budget of %u s (--max-call-seconds) and was "
                          "cancelled",
                          od_op_name(c->op), od_cfg.max_call_seconds);
        if (atomic_load(&od_draining))
            od_error_set(&c->err, OD_EUNAVAIL, "%s was cancelled: the server is shutting down",
                         od_op_name(c->op));
    }
    od_set_deadline(0);
    od_set_alloc_limit(prev_limit);
    c->t_called = od_now_ns();
    if (st != OD_OK)
        return st;
    if (c->trace.nsteps > 0)
        c->key = c->trace.steps[0].key;
    /* A Device argument may still name meta (zeros(2, device="meta")): such
     * an output has no bytes to send or store. */
    for (int i = 0; i < c->stack.nrets; i++) {
        od_tensor *const *ts;
        size_t nt = tensors_of(&c->stack.rets[i], &ts);
        for (size_t e = 0; e < nt; e++)
            if (ts[e] && ts[e]->device.type == OD_DEV_META) {
                od_stack_release_rets(&c->stack);
                return od_error_set(&c->err, OD_EINVAL,
                                    "%s returned a tensor on device 'meta', which holds no data: \"meta\" "
                                    "computes shapes only; use POST /v1/ops/{op}/explain",
                                    od_op_name(c->op));
            }
    }
    if (c->keep) /* they stay on the device, in the store */
        return OD_OK;
    /* outputs back to the host for encoding */
    od_device cpu = {OD_DEV_CPU, 0};
    for (int i = 0; i < c->stack.nrets; i++) {
        od_value *v = &c->stack.rets[i];
        if ((v->tag == OD_T_TENSOR && v->u.t && v->u.t->device.type == OD_DEV_CUDA) ||
            v->tag == OD_T_TENSOR_LIST)
            if ((st = move_value(v, true, cpu, false, &c->err)) != OD_OK)
                return st;
    }
    return OD_OK;
}

void od_srv_call_stats(od_srv_call *c, bool ok)
{
    if (!c->op)
        return;
    uint64_t now = od_now_ns();
    uint64_t td = c->t_decoded ? c->t_decoded : now;
    uint64_t tc = c->t_called ? c->t_called : td;
    uint64_t te = c->t_encoded ? c->t_encoded : now;
    od_req_sample s = {
        .op = c->op,
        .key = c->key,
        .ok = ok,
        .e2e_ns = now - c->t_start,
        .decode_ns = td - (c->t_body ? c->t_body : c->t_start),
        .infer_ns = tc - td,
        .encode_ns = te > tc ? te - tc : 0,
        .bytes_in = (uint64_t)c->bound.bytes_in,
        .bytes_out = (uint64_t)c->bytes_out,
    };
    od_stats_request(&s);
}

/* ns as microseconds with three decimals: the same text as "%.3f" of
 * ns / 1000.0 (exact: the value has at most three decimals), no printf. */
static void put_us(od_buf *b, uint64_t ns)
{
    char tmp[32];
    int n = od_fmt_i64((int64_t)(ns / 1000), tmp);
    unsigned frac = (unsigned)(ns % 1000);
    tmp[n++] = '.';
    tmp[n++] = (char)('0' + frac / 100);
    tmp[n++] = (char)('0' + frac / 10 % 10);
    tmp[n++] = (char)('0' + frac % 10);
    od_buf_append(b, tmp, (size_t)n);
}

static void put_step_label(od_buf *b, const od_srv_call *c, const od_trace_step *s)
{
    if (s->op != c->op) {
        od_buf_puts(b, od_op_name(s->op));
        od_buf_putc(b, ' ');
    }
    od_buf_puts(b, od_key_name(s->key));
    od_buf_puts(b, " [");
    od_buf_puts(b, od_provenance_name(s->prov));
    od_buf_putc(b, ']');
}

od_status od_detail_parse(const json_t *v, const char *field, od_detail *out, od_error *err)
{
    static const char *const names[] = {[OD_DETAIL_FULL] = "full", [OD_DETAIL_SUMMARY] = "summary",
                                        [OD_DETAIL_NONE] = "none"};
    *out = OD_DETAIL_DEFAULT;
    if (!v)
        return OD_OK;
    for (int d = OD_DETAIL_FULL; json_is_string(v) && d <= OD_DETAIL_NONE; d++)
        if (!strcmp(json_string_value(v), names[d])) {
            *out = (od_detail)d;
            return OD_OK;
        }
    return od_error_set(err, OD_EINVAL, "%s must be \"full\", \"summary\" or \"none\"", field);
}

static void put_path(od_buf *b, const od_srv_call *c)
{
    /* the readable chain: "AutogradCPU [autograd kernel] → CPU [kernel]" */
    od_buf_puts(b, ",\"path\":\"");
    for (int i = 0; i < c->trace.nsteps; i++) {
        if (i)
            od_buf_puts(b, " \xe2\x86\x92 ");
        put_step_label(b, c, &c->trace.steps[i]);
    }
    od_buf_putc(b, '"');
}

static void put_timing(od_buf *b, const od_srv_call *c)
{
    uint64_t tb = c->t_body ? c->t_body : c->t_start;
    uint64_t td = c->t_decoded ? c->t_decoded : tb;
    uint64_t tc = c->t_called ? c->t_called : td;
    uint64_t te = c->t_encoded ? c->t_encoded : tc;
    od_buf_puts(b, ",\"timing_us\":{\"receive\":");
    put_us(b, tb - c->t_start);
    od_buf_puts(b, ",\"decode\":");
    put_us(b, td - tb);
    od_buf_puts(b, ",\"dispatch\":");
    put_us(b, tc - td);
    od_buf_puts(b, ",\"encode\":");
    put_us(b, te - tc);
    od_buf_putc(b, '}');
}

static void put_kernel(od_buf *b, const od_trace_step *s0)
{
    od_buf_puts(b, ",\"kernel\":");
    if (s0 && s0->kernel)
        od_buf_json_str(b, s0->kernel->name);
    else
        od_buf_puts(b, "null");
}

void od_srv_call_dispatch_json(od_buf *b, const od_srv_call *c, od_detail d)
{
    const od_trace_step *s0 = c->trace.nsteps ? &c->trace.steps[0] : NULL;
    if (d == OD_DETAIL_SUMMARY) { /* what a dashboard row or a load test reads, nothing it must skip */
        od_buf_puts(b, "{\"key\":");
        od_buf_json_str(b, od_key_name(c->key));
        put_kernel(b, s0);
        put_path(b, c);
        put_timing(b, c);
        od_buf_putc(b, '}');
        return;
    }
    char dev[32], ksbuf[256];
    od_device_print(c->device, dev, sizeof dev);
    /* the same few key sets come back call after call: remember the last
     * text per thread instead of printing it every time */
    static _Thread_local od_keyset last_ks;
    static _Thread_local char last_text[256];
    static _Thread_local bool have_last;
    if (!have_last || last_ks != c->ks) {
        od_ks_print(c->ks, last_text, sizeof last_text);
        last_ks = c->ks;
        have_last = true;
    }
    memcpy(ksbuf, last_text, sizeof ksbuf);
    od_buf_puts(b, "{\"keyset\":");
    od_buf_keyset(b, c->ks);
    od_buf_puts(b, ",\"keyset_text\":");
    od_buf_json_str(b, ksbuf);
    od_buf_puts(b, ",\"key\":");
    od_buf_json_str(b, od_key_name(c->key));
    put_kernel(b, s0);
    od_buf_puts(b, ",\"provenance\":");
    if (s0)
        od_buf_json_str(b, od_provenance_name(s0->prov));
    else
        od_buf_puts(b, "null");
    put_path(b, c);
    od_buf_puts(b, ",\"steps\":[");
    for (int i = 0; i < c->trace.nsteps; i++) {
        const od_trace_step *s = &c->trace.steps[i];
        if (i)
            od_buf_putc(b, ',');
        od_buf_puts(b, "{\"op\":");
        od_buf_json_str(b, od_op_name(s->op));
        od_buf_puts(b, ",\"key\":");
        od_buf_json_str(b, od_key_name(s->key));
        od_buf_puts(b, ",\"kernel\":");
        od_buf_json_str(b, s->kernel ? s->kernel->name : "?");
        od_buf_puts(b, ",\"provenance\":");
        od_buf_json_str(b, od_provenance_name(s->prov));
        if (s->kernel && s->kernel->file) {
            od_buf_puts(b, ",\"registered_at\":\"");
            od_buf_puts(b, s->kernel->file);
            od_buf_putc(b, ':');
            od_buf_i64(b, s->kernel->line);
            od_buf_putc(b, '"');
        }
        od_buf_puts(b, ",\"depth\":");
        od_buf_i64(b, s->depth);
        od_buf_puts(b, ",\"us\":");
        put_us(b, (uint64_t)s->ns);
        od_buf_puts(b, ",\"status\":");
        od_buf_json_str(b, od_status_code(s->status));
        od_buf_putc(b, '}');
    }
    od_buf_puts(b, "],\"dropped_steps\":");
    od_buf_i64(b, c->trace.dropped);
    od_buf_puts(b, ",\"device\":");
    od_buf_json_str(b, dev);
    od_exec_json(b, &c->exec);
    put_timing(b, c);
    od_buf_putc(b, '}');
}

/* ---- outputs ------------------------------------------------------------------ */

/* The requested output named name: NULL when sel lists no such output. */
static json_t *find_sel(json_t *sel, const char *name)
{
    size_t i;
    json_t *o;
    json_array_foreach(sel, i, o) {
        json_t *n = json_object_get(o, "name");
        if (json_is_string(n) && !strcmp(json_string_value(n), name))
            return o;
    }
    return NULL;
}

/* The name of element i of return k when it is a Tensor[] ("out.1"). */
static void element_name(const od_schema *s, int k, size_t i, char *buf, size_t cap)
{
    char nm[96];
    od_proto_return_name(s, k, nm, sizeof nm);
    snprintf(buf, cap, "%s.%zu", nm, i);
}

/* Whether return k (element i of a Tensor[] return, or i == SIZE_MAX for a
 * single value) is in the response, and as binary data or JSON. A Tensor[]
 * return is selected whole by its name or one element by "name.i". */
static bool output_selected(const od_schema *s, json_t *sel, int k, size_t i, bool bin_default, bool *binary)
{
    json_t *o = NULL;
    if (sel) {
        char nm[128];
        od_proto_return_name(s, k, nm, sizeof nm);
        if (!(o = find_sel(sel, nm)) && i != SIZE_MAX) {
            element_name(s, k, i, nm, sizeof nm);
            o = find_sel(sel, nm);
        }
        if (!o)
            return false;
    }
    json_t *bd = json_object_get(json_object_get(o, "parameters"), "binary_data");
    *binary = json_is_boolean(bd) ? json_is_true(bd) : bin_default;
    return true;
}

/* Whether name is return k's ("out") or one of its elements' ("out.2"). */
static bool names_return(const od_schema *s, const od_value *v, int k, const char *name)
{
    char nm[128];
    od_proto_return_name(s, k, nm, sizeof nm);
    if (!strcmp(nm, name))
        return true;
    size_t l = strlen(nm);
    if (v->tag != OD_T_TENSOR_LIST || strncmp(nm, name, l) || name[l] != '.' || !name[l + 1])
        return false;
    char *end;
    unsigned long long i = strtoull(name + l + 1, &end, 10);
    return !*end && name[l + 1] >= '0' && name[l + 1] <= '9' && i < v->u.list.n;
}

/* The tensors of return value v: itself, or a Tensor[]'s elements. */
static size_t tensors_of(const od_value *v, od_tensor *const **ts)
{
    if (v->tag == OD_T_TENSOR && v->u.t) {
        *ts = &v->u.t;
        return 1;
    }
    if (v->tag == OD_T_TENSOR_LIST) {
        *ts = (od_tensor *const *)v->u.list.items;
        return v->u.list.n;
    }
    *ts = NULL;
    return 0;
}

/* After an element's tensor object (which ends in '}'): its place in the
 * Tensor[] return, "return": k and "index": i. */
static void put_element_place(od_buf *b, int k, size_t i)
{
    if (b->oom || !b->len || b->data[b->len - 1] != '}')
        return;
    b->len--;
    od_buf_puts(b, ",\"return\":");
    od_buf_i64(b, k);
    od_buf_puts(b, ",\"index\":");
    od_buf_i64(b, (int64_t)i);
    od_buf_putc(b, '}');
}

od_status od_srv_encode_outputs(od_buf *b, od_srv_call *c, json_t *sel, bool bin_default, bool oip,
                            od_tensor **bin, int *nbin, od_error *err)
{
    const od_schema *s = od_op_schema(c->op);
    *nbin = 0;
    if (sel && !json_is_array(sel))
        return od_error_set(err, OD_EINVAL, "\"outputs\" must be a list of {\"name\": ...}, got %s",
                            od_json_kind(sel));
    if (sel) { /* every requested name must exist */
        size_t i;
        json_t *o;
        json_array_foreach(sel, i, o) {
            json_t *n = json_object_get(o, "name");
            if (!json_is_string(n))
                return od_error_set(err, OD_EINVAL, "outputs[%zu]: \"name\" must be a string", i);
            bool found = false;
            char names[256] = "";
            size_t len = 0;
            for (int k = 0; k < c->stack.nrets; k++) {
                char nm[128];
                od_proto_return_name(s, k, nm, sizeof nm);
                if (names_return(s, &c->stack.rets[k], k, json_string_value(n)))
                    found = true;
                if (len < sizeof names)
                    len += (size_t)snprintf(names + len, sizeof names - len, "%s%s", k ? ", " : "", nm);
            }
            if (!found)
                return od_error_set(err, OD_EINVAL, "unknown output '%.64s' (this operator returns: %s)",
                                    json_string_value(n), names);
            json_t *p = json_object_get(o, "parameters");
            json_t *bd = json_object_get(p, "binary_data");
            if (bd && !json_is_boolean(bd))
                return od_error_set(err, OD_EINVAL,
                                    "outputs[%zu].parameters.binary_data must be true or false", i);
        }
    }
    /* The cap covers the response as sent: first a lower bound on its
     * size from the shapes alone (a view can name 2^62 elements), then the
     * buffer's own limit while the JSON is written. */
    size_t cap = od_cfg.max_output_bytes ? od_cfg.max_output_bytes : SIZE_MAX;
    size_t least = 0, bin_bytes = 0, nbinary = 0;
    for (int k = 0; k < c->stack.nrets; k++) {
        const od_value *v = &c->stack.rets[k];
        od_tensor *const *ts;
        size_t nt = tensors_of(v, &ts);
        bool list = v->tag == OD_T_TENSOR_LIST;
        for (size_t e = 0; e < nt; e++) {
            bool binary;
            if (!ts[e] || !output_selected(s, sel, k, list ? e : SIZE_MAX, bin_default, &binary))
                continue;
            size_t n = (size_t)od_tensor_numel(ts[e]), need;
            if (binary)
                need = od_tensor_nbytes(ts[e]); /* saturates at SIZE_MAX */
            else if (__builtin_mul_overflow(n, (size_t)2, &need)) /* "0," per element at least */
                need = SIZE_MAX;
            if (binary) {
                bin_bytes = need > SIZE_MAX - bin_bytes ? SIZE_MAX : bin_bytes + need;
                nbinary++;
            }
            least = need > SIZE_MAX - least ? SIZE_MAX : least + need;
        }
    }
    if (least > cap)
        return od_error_set(err, OD_ETOOLARGE,
                            "the response would hold at least %zu bytes of tensor data, more than "
                            "the output limit of %zu bytes (--max-output-bytes)",
                            least, cap);
    if (nbinary > OD_MAX_BINARY_OUTPUTS)
        return od_error_set(err, OD_ETOOLARGE,
                            "%zu outputs asked for as binary data; at most %d come back as binary (ask for "
                            "JSON, or fewer outputs)",
                            nbinary, OD_MAX_BINARY_OUTPUTS);
    if (cap != SIZE_MAX)
        b->limit = cap - bin_bytes;
    od_buf_puts(b, "\"outputs\":[");
    bool first = true;
    for (int k = 0; k < c->stack.nrets; k++) {
        char nm[128];
        od_proto_return_name(s, k, nm, sizeof nm);
        bool binary;
        od_value *v = &c->stack.rets[k];
        if (v->tag != OD_T_TENSOR_LIST && (v->tag != OD_T_TENSOR || !v->u.t)) {
            if (!output_selected(s, sel, k, SIZE_MAX, bin_default, &binary))
                continue;
            const char *name = (oip || (k < s->nrets && s->rets[k].name)) ? nm : NULL;
            if (!first)
                od_buf_putc(b, ',');
            first = false;
            /* a non-tensor return: a JSON value (OIP: a one-element tensor) */
            od_buf_putc(b, '{');
            if (name) {
                od_buf_puts(b, "\"name\":");
                od_buf_json_str(b, name);
                od_buf_putc(b, ',');
            }
            od_buf_puts(b, "\"value\":");
            od_value_to_json(b, v);
            od_buf_putc(b, '}');
            continue;
        }
        /* a Tensor: one entry; a Tensor[]: one entry per element, in order,
         * named "<return>.<i>" with "return" and "index" (docs: PROTOCOL.md) */
        bool list = v->tag == OD_T_TENSOR_LIST;
        od_tensor *const *ts;
        size_t nt = tensors_of(v, &ts);
        for (size_t e = 0; e < nt; e++) {
            if (!ts[e] || !output_selected(s, sel, k, list ? e : SIZE_MAX, bin_default, &binary))
                continue;
            char enm[128];
            const char *name = (oip || (k < s->nrets && s->rets[k].name)) ? nm : NULL;
            if (list) {
                element_name(s, k, e, enm, sizeof enm);
                name = enm;
            }
            if (!first)
                od_buf_putc(b, ',');
            first = false;
            od_tensor *t = ts[e];
            c->bytes_out += (int64_t)od_tensor_nbytes(t);
            if (!binary) {
                od_tensor_to_json(b, t, name, oip);
                if (list && !oip) /* /v2: the name alone, as the OIP has it */
                    put_element_place(b, k, e);
                if (b->over)
                    return od_error_set(err, OD_ETOOLARGE,
                                        "the JSON response grew past the output limit of %zu bytes "
                                        "(--max-output-bytes); ask for binary outputs or a smaller result",
                                        cap);
                continue;
            }
            od_tensor *bt = t;
            if (od_tensor_is_contiguous(t)) {
                od_tensor_retain(t);
            } else {
                od_status st = od_tensor_empty(t->sizes, t->ndim, t->dtype, t->device, &bt, err);
                if (st != OD_OK)
                    return st;
                od_tensor_copy_out(t, od_tensor_data(bt));
            }
            bin[(*nbin)++] = bt;
            od_tensor_to_json_binary(b, t, name, oip);
            if (list && !oip)
                put_element_place(b, k, e);
        }
    }
    od_buf_putc(b, ']');
    b->limit = 0; /* what follows (the dispatch record) is small and bounded */
    return OD_OK;
}

/* ---- one call's lifecycle, for both protocols ------------------------------------ */

bool od_want_binary(od_req *r, json_t *params)
{
    json_t *bdo = json_object_get(params, "binary_data_output");
    if (json_is_boolean(bdo))
        return json_is_true(bdo);
    const char *acc = od_req_header(r, MHD_HTTP_HEADER_ACCEPT);
    return acc && strstr(acc, "application/octet-stream") && !strstr(acc, "application/json");
}

/* "outputs": each return stored in the request's session, as {"name",
 * "id", metadata}; a Tensor[] return's elements each stored, named
 * "<return>.<i>". A failure takes back what this call stored. */
static od_status encode_kept(od_buf *b, od_srv_call *c, od_req *r, od_error *err)
{
    const char *session = od_req_session_name(r);
    if (!session)
        return od_error_set(err, OD_EINVAL, "X-OD-Session is not a valid session name");
    size_t total = 0;
    for (int i = 0; i < c->stack.nrets; i++) {
        od_tensor *const *ts;
        total += tensors_of(&c->stack.rets[i], &ts);
    }
    char (*ids)[OD_ID_LEN] = calloc(total ? total : 1, sizeof *ids);
    if (!ids)
        return od_error_set(err, OD_ENOMEM, "out of memory");
    size_t n = 0;
    od_status st = OD_OK;
    bool first = true;
    od_buf_puts(b, "\"outputs\":[");
    for (int i = 0; i < c->stack.nrets && st == OD_OK; i++) {
        const od_value *v = &c->stack.rets[i];
        od_tensor *const *ts;
        size_t nt = tensors_of(v, &ts);
        if (v->tag != OD_T_TENSOR_LIST && nt == 0) {
            st = od_error_set(err, OD_EUNSUPPORTED, "%s: output %d is not a tensor and cannot be kept",
                              od_op_name(c->op), i);
            break;
        }
        for (size_t e = 0; e < nt && st == OD_OK; e++) {
            if (!ts[e])
                continue;
            if ((st = od_store_put(session, ts[e], ids[n], err)) != OD_OK)
                break;
            char name[128];
            if (v->tag == OD_T_TENSOR_LIST)
                element_name(od_op_schema(c->op), i, e, name, sizeof name);
            else
                od_proto_return_name(od_op_schema(c->op), i, name, sizeof name);
            if (!first)
                od_buf_putc(b, ',');
            first = false;
            od_store_tensor_meta_json(b, name, ids[n++], ts[e]);
            if (v->tag == OD_T_TENSOR_LIST)
                put_element_place(b, i, e);
        }
    }
    od_buf_putc(b, ']');
    if (st != OD_OK) {
        od_error ignore;
        for (size_t k = 0; k < n; k++)
            od_store_delete(session, ids[k], &ignore);
    }
    free(ids);
    return st;
}

void od_serve_call(od_req *r, const od_call_proto *p, void *q)
{
    od_srv_call c;
    od_srv_call_init(&c, NULL);
    c.t_start = r->t0;
    c.t_body = od_now_ns();
    od_json_doc *doc = NULL;
    const char *device = NULL;
    od_buf b;
    od_buf_init(&b);
    od_tensor *bin[OD_MAX_BINARY_OUTPUTS];
    int nbin = 0;
    od_status st = p->parse(r, q, &doc, &device, &c.err);
    if (st == OD_OK)
        st = od_resolve_device(device, &c.device, &c.err);
    if (st == OD_OK) {
        c.op = p->resolve(r, q, &c.err);
        st = c.op ? OD_OK : c.err.status;
        r->op = c.op;
        c.key = od_device_key(c.device);
    }
    if (st == OD_OK) {
        od_proto_limits lim = od_limits();
        od_bind_opts bo = {.lim = &lim, .mode = OD_DECODE_DATA, .has_device = true, .device = c.device,
                           .ref = od_store_ref, .ref_ctx = r};
        st = p->bind(c.op, doc, q, &bo, &c.bound, &c.err);
        c.keep = p->keep(q);
        if (p->exec && p->exec(q))
            c.exec = *p->exec(q);
    }
    od_mode_stack modes = {0};
    if (st == OD_OK && c.exec.modes && (st = od_exec_build_modes(&c.exec, &modes, &c.err)) == OD_OK)
        c.exec.stack = &modes;
    if (st == OD_OK)
        st = od_srv_call_run(&c);
    if (st == OD_OK) {
        p->head(&b, &c, q);
        st = c.keep ? encode_kept(&b, &c, r, &c.err)
                    : od_srv_encode_outputs(&b, &c, p->outputs(q), od_want_binary(r, p->params(q)), p->oip,
                                            bin, &nbin, &c.err);
    }
    if (st == OD_OK) {
        c.t_encoded = od_now_ns();
        p->tail(&b, &c, q);
        od_srv_call_stats(&c, true);
        if (nbin)
            od_respond_binary(r, 200, &b, bin, nbin);
        else
            od_respond_buf(r, 200, "application/json", &b);
        nbin = 0;
    } else {
        if (c.op)
            od_srv_call_stats(&c, false);
        od_respond_od_error(r, &c.err);
    }
    for (int i = 0; i < nbin; i++)
        od_tensor_release(bin[i]);
    od_buf_free(&b);
    od_mode_stack_clear(&modes);
    od_srv_call_release(&c);
    od_json_doc_free(doc);
}
