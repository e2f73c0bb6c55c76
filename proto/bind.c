/* bind.c — JSON arguments to a boxed stack, checked against the schema.
 *
 * Invariants:
 *  - Binding follows PyTorch's argument parser: positional arguments up to
 *    the keyword-only marker, then keywords by name; no argument twice; every
 *    argument without a default must be given; each value is checked against
 *    its schema type and a failure names the operator, the argument, its
 *    position and what was expected ("aten::add.Tensor: argument 'other'
 *    (position 2) must be Tensor, not string").
 *  - od_bound owns every value it decoded (owned[i]); schema defaults are
 *    borrowed from the schema, which lives as long as the process.
 *  - Nothing is decoded twice: od_proto_args_match only looks at JSON kinds.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto_int.h"

void od_bound_init(od_bound *b) { memset(b, 0, sizeof *b); }

void od_bound_release(od_bound *b)
{
    for (int i = 0; i < b->nargs; i++) {
        if (b->owned[i])
            od_value_release(&b->args[i]);
        b->owned[i] = false;
        b->args[i] = od_none();
    }
    b->nargs = 0;
}

typedef struct bctx {
    const od_op *op;
    od_json_doc *doc;
    const od_bind_opts *opts;
    od_bound *out;
    od_error *err;
    bool missing_optional_is_none; /* OIP cannot send None: absent means None */
} bctx;

/* A tensor argument: {"ref": id} (on /v2: an input whose "parameters" hold
 * "ref") through the caller's resolver, else decoded from the document.
 * *out new; *bytes_in counts decoded bytes only (a stored tensor is not sent). */
static od_status decode_tensor(od_json_doc *doc, json_t *v, const od_bind_opts *o, od_decode_mode mode,
                               const char *what, od_tensor **out, int64_t *bytes_in, od_error *err)
{
    od_tensor_fields f;
    od_tensor_fields_of(v, &f);
    json_t *ref = f.ref;
    if (!ref && json_is_object(f.params))
        ref = json_object_get(f.params, "ref");
    if (!ref) {
        od_status st = od_tensor_from_fields(doc, v, &f, o->lim, mode, what, out, err);
        if (st == OD_OK)
            *bytes_in += (int64_t)od_tensor_nbytes(*out);
        return st;
    }
    if (!o->ref)
        return od_error_set(err, OD_EINVAL, "%s: a stored tensor ({\"ref\": ...}) cannot be used here", what);
    if (!json_is_string(ref))
        return od_error_set(err, OD_EINVAL, "%s: \"ref\" must be a tensor id (a string), got %s", what,
                            od_json_kind(ref));
    od_tensor *t = NULL;
    od_status st = o->ref(o->ref_ctx, json_string_value(ref), &t, err);
    if (st != OD_OK || mode != OD_DECODE_META) {
        *out = t;
        return st;
    }
    /* Shapes only (explain): a Meta tensor like it, so no kernel touches data. */
    st = od_tensor_empty(t->sizes, t->ndim, t->dtype, (od_device){OD_DEV_META, 0}, out, err);
    od_tensor_release(t);
    return st;
}

/* Appends s to buf (cap > len bytes, NUL-terminated, len used), cutting it
 * short like snprintf; returns the new length. Labels are built for every
 * argument of every call, before anything can fail, so they skip printf. */
static size_t cat(char *buf, size_t cap, size_t len, const char *s)
{
    size_t n = strlen(s);
    if (n > cap - 1 - len)
        n = cap - 1 - len;
    memcpy(buf + len, s, n);
    len += n;
    buf[len] = '\0';
    return len;
}

static size_t cat_int(char *buf, size_t cap, size_t len, int64_t v)
{
    char t[24];
    od_fmt_i64(v, t);
    return cat(buf, cap, len, t);
}

/* "argument 'other' (position 2)" */
static void arg_label(const od_schema *s, int i, bool positional, char *buf, size_t cap)
{
    size_t n = cat(buf, cap, 0, "argument '");
    n = cat(buf, cap, n, s->args[i].name);
    if (positional && !s->args[i].kwarg_only) {
        n = cat(buf, cap, n, "' (position ");
        n = cat_int(buf, cap, n, i + 1);
        cat(buf, cap, n, ")");
    } else {
        cat(buf, cap, n, "'");
    }
}

/* "what: label" */
static void what_label(char *buf, size_t cap, const char *what, const char *label)
{
    size_t n = cat(buf, cap, 0, what);
    n = cat(buf, cap, n, ": ");
    cat(buf, cap, n, label);
}

static od_status type_err(bctx *c, const char *label, const od_type *t, const json_t *v)
{
    char ty[128];
    od_type_print(t, ty, sizeof ty);
    const char *kind = od_json_kind(v);
    if (json_is_real(v))
        kind = "float";
    else if (json_is_integer(v))
        kind = "int";
    return od_error_set(c->err, OD_EMISMATCH, "%s: %s must be %s, not %s", od_op_name(c->op), label,
                        ty, kind);
}

static bool nonfinite_name(const char *s, double *out)
{
    if (!strcmp(s, "NaN") || !strcmp(s, "nan"))
        *out = NAN;
    else if (!strcmp(s, "Infinity") || !strcmp(s, "inf"))
        *out = INFINITY;
    else if (!strcmp(s, "-Infinity") || !strcmp(s, "-inf"))
        *out = -INFINITY;
    else
        return false;
    return true;
}

static const struct {
    const char *name;
    int64_t v;
} memory_formats[] = {
    {"contiguous_format", 0}, {"preserve_format", 1}, {"channels_last", 2}, {"channels_last_3d", 3},
};

/* A JSON list for a list-typed argument. */
static od_status bind_list(bctx *c, const od_type *t, json_t *v, const char *label, od_value *out,
                           bool *owned)
{
    const od_type *elem = t->elem;
    const od_type *ebase = od_type_unwrap_optional(elem);
    if (!json_is_array(v)) {
        /* PyTorch accepts a single int for int[N] (expanded to N copies),
         * and refuses it for int[], SymInt[] and SymInt[N]. */
        if (json_is_integer(v) && elem->kind == OD_TY_INT && t->fixed_len > 0) {
            size_t n = (size_t)t->fixed_len;
            int64_t *items = malloc(n * sizeof *items);
            if (!items)
                return od_error_set(c->err, OD_ENOMEM, "out of memory");
            for (size_t i = 0; i < n; i++)
                items[i] = json_integer_value(v);
            *out = od_list_v(OD_T_INT_LIST, items, n);
            *owned = true;
            return OD_OK;
        }
        return type_err(c, label, t, v);
    }
    size_t n = json_array_size(v);
    char ty[64];
    od_type_print(elem, ty, sizeof ty);
    switch (ebase->kind) {
    case OD_TY_INT:
    case OD_TY_SYMINT:
    case OD_TY_FLOAT:
    case OD_TY_BOOL: {
        if (elem->kind == OD_TY_OPTIONAL)
            break; /* int?[] has no boxed form */
        od_tag tag = ebase->kind == OD_TY_FLOAT ? OD_T_DOUBLE_LIST
                     : ebase->kind == OD_TY_BOOL ? OD_T_BOOL_LIST : OD_T_INT_LIST;
        size_t es = tag == OD_T_DOUBLE_LIST ? sizeof(double) : tag == OD_T_BOOL_LIST ? sizeof(bool) : sizeof(int64_t);
        void *items = malloc(n ? n * es : 1);
        if (!items)
            return od_error_set(c->err, OD_ENOMEM, "out of memory");
        for (size_t i = 0; i < n; i++) {
            json_t *e = json_array_get(v, i);
            bool ok = true;
            if (tag == OD_T_INT_LIST) {
                ok = json_is_integer(e);
                if (ok)
                    ((int64_t *)items)[i] = json_integer_value(e);
            } else if (tag == OD_T_DOUBLE_LIST) {
                ok = json_is_number(e);
                if (ok)
                    ((double *)items)[i] = json_number_value(e);
            } else {
                ok = json_is_boolean(e);
                if (ok)
                    ((bool *)items)[i] = json_is_true(e);
            }
            if (!ok) {
                free(items);
                char tyl[128];
                od_type_print(t, tyl, sizeof tyl);
                return od_error_set(c->err, OD_EMISMATCH,
                                    "%s: %s must be %s, but element %zu is %s (expected %s)",
                                    od_op_name(c->op), label, tyl, i,
                                    json_is_real(e) ? "float" : od_json_kind(e), ty);
            }
        }
        *out = od_list_v(tag, items, n);
        *owned = true;
        return OD_OK;
    }
    case OD_TY_TENSOR: {
        bool opt = elem->kind == OD_TY_OPTIONAL;
        od_tensor **items = calloc(n ? n : 1, sizeof *items);
        if (!items)
            return od_error_set(c->err, OD_ENOMEM, "out of memory");
        for (size_t i = 0; i < n; i++) {
            json_t *e = json_array_get(v, i);
            if (json_is_null(e) && opt)
                continue;
            char what[160];
            snprintf(what, sizeof what, "%s: %s, element %zu", od_op_name(c->op), label, i);
            od_status st = decode_tensor(c->doc, e, c->opts, c->opts->mode, what, &items[i],
                                         &c->out->bytes_in, c->err);
            if (st != OD_OK) {
                for (size_t k = 0; k < i; k++)
                    od_tensor_release(items[k]);
                free(items);
                return st;
            }
        }
        *out = od_list_v(OD_T_TENSOR_LIST, items, n);
        *owned = true;
        return OD_OK;
    }
    default: break;
    }
    char tyl[128];
    od_type_print(t, tyl, sizeof tyl);
    return od_error_set(c->err, OD_EUNSUPPORTED, "%s: %s has type %s, which cannot be passed over HTTP",
                        od_op_name(c->op), label, tyl);
}

/* A JSON number or bool where a Tensor is declared: PyTorch's wrapped
 * number, a 0-dim CPU tensor (int64, float64 or bool) flagged to promote as
 * a Scalar. Its device is the call's by the 0-dim rule of elementwise ops. */
static od_status wrapped_number(bctx *c, json_t *v, od_value *out, bool *owned)
{
    double d = 0;
    od_dtype dt = json_is_boolean(v) ? OD_BOOL : json_is_integer(v) ? OD_INT64 : OD_FLOAT64;
    if (json_is_string(v))
        nonfinite_name(json_string_value(v), &d);
    else if (dt == OD_FLOAT64)
        d = json_number_value(v);
    od_device cpu = {OD_DEV_CPU, 0};
    od_tensor *t = NULL;
    od_status st = od_tensor_empty(NULL, 0, dt, cpu, &t, c->err);
    if (st)
        return st;
    if (dt == OD_BOOL)
        *(bool *)od_tensor_data(t) = json_is_true(v);
    else if (dt == OD_INT64)
        *(int64_t *)od_tensor_data(t) = (int64_t)json_integer_value(v);
    else
        *(double *)od_tensor_data(t) = d;
    t->wrapped_number = true;
    *out = od_tensor_v(t);
    *owned = true;
    return OD_OK;
}

/* One JSON value for an argument of type t. */
static od_status bind_value(bctx *c, const od_type *t, json_t *v, const char *label, od_value *out,
                            bool *owned)
{
    *owned = false;
    if (t->kind == OD_TY_OPTIONAL) {
        if (json_is_null(v)) {
            *out = od_none();
            return OD_OK;
        }
        return bind_value(c, t->elem, v, label, out, owned);
    }
    switch (t->kind) {
    case OD_TY_TENSOR: {
        char what[160];
        double nf;
        what_label(what, sizeof what, od_op_name(c->op), label);
        if (json_is_number(v) || json_is_boolean(v) ||
            (json_is_string(v) && nonfinite_name(json_string_value(v), &nf)))
            return wrapped_number(c, v, out, owned);
        if (!json_is_object(v))
            return type_err(c, label, t, v);
        od_tensor *tn = NULL;
        od_status st = decode_tensor(c->doc, v, c->opts, c->opts->mode, what, &tn, &c->out->bytes_in, c->err);
        if (st != OD_OK)
            return st;
        *out = od_tensor_v(tn);
        *owned = true;
        return OD_OK;
    }
    case OD_TY_INT:
    case OD_TY_SYMINT:
        if (!json_is_integer(v))
            return type_err(c, label, t, v);
        *out = od_int(json_integer_value(v));
        return OD_OK;
    case OD_TY_FLOAT: {
        double d;
        if (json_is_number(v))
            *out = od_double(json_number_value(v));
        else if (json_is_string(v) && nonfinite_name(json_string_value(v), &d))
            *out = od_double(d);
        else
            return type_err(c, label, t, v);
        return OD_OK;
    }
    case OD_TY_BOOL:
        if (!json_is_boolean(v))
            return type_err(c, label, t, v);
        *out = od_bool(json_is_true(v));
        return OD_OK;
    case OD_TY_SCALAR: {
        double d;
        if (json_is_integer(v))
            *out = od_int(json_integer_value(v));
        else if (json_is_real(v))
            *out = od_double(json_real_value(v));
        else if (json_is_boolean(v))
            *out = od_bool(json_is_true(v));
        else if (json_is_string(v) && nonfinite_name(json_string_value(v), &d))
            *out = od_double(d);
        else
            return type_err(c, label, t, v);
        return OD_OK;
    }
    case OD_TY_STR: {
        if (!json_is_string(v))
            return type_err(c, label, t, v);
        char *s = strdup(json_string_value(v));
        if (!s)
            return od_error_set(c->err, OD_ENOMEM, "out of memory");
        *out = od_str(s);
        *owned = true;
        return OD_OK;
    }
    case OD_TY_SCALARTYPE: {
        if (!json_is_string(v))
            return type_err(c, label, t, v);
        od_dtype dt = od_proto_dtype(json_string_value(v));
        if (dt == OD_NUM_DTYPES)
            return od_error_set(c->err, OD_EINVAL,
                                "%s: %s: unknown dtype '%.64s' (expected float32, int64, bool, ... "
                                "or FP32, INT64, BOOL, ...)",
                                od_op_name(c->op), label, json_string_value(v));
        *out = od_dtype_v(dt);
        return OD_OK;
    }
    case OD_TY_DEVICE: {
        if (!json_is_string(v))
            return type_err(c, label, t, v);
        od_device d;
        od_error e;
        od_error_clear(&e);
        if (od_device_parse(json_string_value(v), &d, &e) != OD_OK)
            return od_error_set(c->err, OD_EINVAL, "%s: %s: %s", od_op_name(c->op), label, e.message);
        *out = od_device_v(d);
        return OD_OK;
    }
    case OD_TY_LAYOUT:
        if (json_is_string(v) && (!strcmp(json_string_value(v), "strided") ||
                                  !strcmp(json_string_value(v), "torch.strided"))) {
            *out = od_int(0); /* torch.strided */
            return OD_OK;
        }
        if (json_is_string(v))
            return od_error_set(c->err, OD_EUNSUPPORTED,
                                "%s: %s: only the strided layout is supported, got '%.64s'",
                                od_op_name(c->op), label, json_string_value(v));
        return type_err(c, label, t, v);
    case OD_TY_MEMORYFORMAT:
        if (json_is_integer(v)) {
            *out = od_int(json_integer_value(v));
            return OD_OK;
        }
        if (json_is_string(v)) {
            const char *s = json_string_value(v);
            if (!strncmp(s, "torch.", 6))
                s += 6;
            for (size_t i = 0; i < sizeof memory_formats / sizeof memory_formats[0]; i++)
                if (!strcmp(s, memory_formats[i].name)) {
                    *out = od_int(memory_formats[i].v);
                    return OD_OK;
                }
            return od_error_set(c->err, OD_EINVAL,
                                "%s: %s: unknown memory format '%.64s' (expected contiguous_format, "
                                "preserve_format, channels_last or channels_last_3d)",
                                od_op_name(c->op), label, json_string_value(v));
        }
        return type_err(c, label, t, v);
    case OD_TY_LIST: return bind_list(c, t, v, label, out, owned);
    default: {
        char ty[128];
        od_type_print(t, ty, sizeof ty);
        return od_error_set(c->err, OD_EUNSUPPORTED,
                            "%s: %s has type %s, which cannot be passed over HTTP (only None)",
                            od_op_name(c->op), label, ty);
    }
    }
}

/* ---- shallow kind checks for overload choice ------------------------------- */

static bool kind_fits(const od_type *t, const json_t *v)
{
    if (t->kind == OD_TY_OPTIONAL)
        return json_is_null(v) || kind_fits(t->elem, v);
    switch (t->kind) {
    case OD_TY_TENSOR: return json_is_object(v);
    case OD_TY_INT:
    case OD_TY_SYMINT: return json_is_integer(v);
    case OD_TY_FLOAT: return json_is_number(v) || json_is_string(v);
    case OD_TY_BOOL: return json_is_boolean(v);
    case OD_TY_SCALAR:
        return json_is_number(v) || json_is_boolean(v) || json_is_string(v);
    case OD_TY_STR:
    case OD_TY_SCALARTYPE:
    case OD_TY_DEVICE:
    case OD_TY_LAYOUT: return json_is_string(v);
    case OD_TY_MEMORYFORMAT: return json_is_string(v) || json_is_integer(v);
    case OD_TY_LIST:
        if (!json_is_array(v))
            return json_is_integer(v) &&
                   (t->elem->kind == OD_TY_INT || t->elem->kind == OD_TY_SYMINT);
        return json_array_size(v) == 0 || kind_fits(t->elem, json_array_get(v, 0));
    default: return false;
    }
}

static int arg_index(const od_schema *s, const char *name)
{
    for (int i = 0; i < s->nargs; i++)
        if (s->args[i].name && !strcmp(s->args[i].name, name))
            return i;
    return -1;
}

static bool is_device_type(const od_type *t)
{
    return od_type_unwrap_optional(t)->kind == OD_TY_DEVICE;
}

static int positional_count(const od_schema *s)
{
    int n = 0;
    while (n < s->nargs && !s->args[n].kwarg_only)
        n++;
    return n;
}

bool od_proto_args_match(const od_op *op, json_t *args, json_t *kwargs, od_error *err)
{
    const od_schema *s = od_op_schema(op);
    size_t na = args ? json_array_size(args) : 0;
    int npos = positional_count(s);
    bool given[OD_MAX_ARGS] = {false};
    if (s->nargs > OD_MAX_ARGS) {
        od_error_set(err, OD_EUNSUPPORTED, "%s has too many arguments", od_op_name(op));
        return false;
    }
    if (na > (size_t)npos) {
        od_error_set(err, OD_EMISMATCH, "%s takes %d positional arguments but %zu were given",
                     od_op_name(op), npos, na);
        return false;
    }
    for (size_t i = 0; i < na; i++) {
        if (!kind_fits(s->args[i].type, json_array_get(args, i))) {
            char ty[96];
            od_type_print(s->args[i].type, ty, sizeof ty);
            od_error_set(err, OD_EMISMATCH, "%s: argument '%s' (position %zu) must be %s, not %s",
                         od_op_name(op), s->args[i].name, i + 1, ty,
                         od_json_kind(json_array_get(args, i)));
            return false;
        }
        given[i] = true;
    }
    if (kwargs) {
        const char *k;
        json_t *v;
        json_object_foreach(kwargs, k, v) {
            int i = arg_index(s, k);
            if (i < 0) {
                od_error_set(err, OD_EMISMATCH, "%s got an unexpected keyword argument '%s'",
                             od_op_name(op), k);
                return false;
            }
            if (given[i] || !kind_fits(s->args[i].type, v)) {
                od_error_set(err, OD_EMISMATCH, "%s: argument '%s' does not fit", od_op_name(op), k);
                return false;
            }
            given[i] = true;
        }
    }
    for (int i = 0; i < s->nargs; i++)
        if (!given[i] && !s->args[i].has_default &&
            !(od_type_is_optional(s->args[i].type) && is_device_type(s->args[i].type))) {
            od_error_set(err, OD_EMISMATCH, "%s() missing required argument '%s'", od_op_name(op),
                         s->args[i].name);
            return false;
        }
    return true;
}

/* ---- binding ---------------------------------------------------------------- */

/* Defaults and the request's device for everything not given. */
static od_status fill_missing(bctx *c)
{
    const od_schema *s = od_op_schema(c->op);
    od_bound *b = c->out;
    for (int i = 0; i < s->nargs; i++) {
        if (b->given[i])
            continue;
        const od_arg *a = &s->args[i];
        /* A factory's optional device is the call's; a required one
         * (to.device) must be given, as in torch. */
        if (c->opts->has_device && is_device_type(a->type) &&
            (a->has_default || od_type_is_optional(a->type))) {
            b->args[i] = od_device_v(c->opts->device);
            continue;
        }
        if (a->has_default) {
            b->args[i] = a->default_value; /* borrowed from the schema */
            continue;
        }
        if (c->missing_optional_is_none && od_type_is_optional(a->type)) {
            b->args[i] = od_none();
            continue;
        }
        char label[128];
        arg_label(s, i, true, label, sizeof label);
        return od_error_set(c->err, OD_EMISMATCH, "%s() missing required %s", od_op_name(c->op),
                            label);
    }
    return OD_OK;
}

static od_status begin(bctx *c, const od_schema *s)
{
    od_bound_release(c->out);
    c->out->op = c->op;
    c->out->bytes_in = 0;
    if (s->nargs > OD_MAX_ARGS || s->is_vararg)
        return od_error_set(c->err, OD_EUNSUPPORTED, "%s cannot be called over HTTP (%s)",
                            od_op_name(c->op), s->is_vararg ? "varargs" : "too many arguments");
    c->out->nargs = s->nargs;
    for (int i = 0; i < s->nargs; i++) {
        c->out->args[i] = od_none();
        c->out->owned[i] = c->out->given[i] = false;
    }
    return OD_OK;
}

od_status od_proto_bind(const od_op *op, od_json_doc *doc, json_t *args, json_t *kwargs,
                        const od_bind_opts *opts, od_bound *out, od_error *err)
{
    bctx c = {op, doc, opts, out, err, false};
    const od_schema *s = od_op_schema(op);
    od_status st = begin(&c, s);
    if (st != OD_OK)
        return st;
    if (args && !json_is_array(args))
        return od_error_set(err, OD_EINVAL, "\"args\" must be a list, got %s", od_json_kind(args));
    if (kwargs && !json_is_object(kwargs))
        return od_error_set(err, OD_EINVAL, "\"kwargs\" must be an object, got %s",
                            od_json_kind(kwargs));
    size_t na = args ? json_array_size(args) : 0;
    int npos = positional_count(s);
    if (na > (size_t)npos) {
        st = od_error_set(err, OD_EMISMATCH,
                          "%s() takes %d positional argument%s but %zu were given%s",
                          od_op_name(op), npos, npos == 1 ? "" : "s", na,
                          npos < s->nargs ? " (the rest are keyword-only)" : "");
        goto fail;
    }
    char label[128];
    for (size_t i = 0; i < na; i++) {
        arg_label(s, (int)i, true, label, sizeof label);
        st = bind_value(&c, s->args[i].type, json_array_get(args, i), label, &out->args[i],
                        &out->owned[i]);
        if (st != OD_OK)
            goto fail;
        out->given[i] = true;
    }
    if (kwargs) {
        const char *k;
        json_t *v;
        json_object_foreach(kwargs, k, v) {
            int i = arg_index(s, k);
            if (i < 0) {
                st = od_error_set(err, OD_EMISMATCH, "%s() got an unexpected keyword argument '%s'",
                                  od_op_name(op), k);
                goto fail;
            }
            if (out->given[i]) {
                st = od_error_set(err, OD_EMISMATCH, "%s() got multiple values for argument '%s'",
                                  od_op_name(op), k);
                goto fail;
            }
            arg_label(s, i, false, label, sizeof label);
            st = bind_value(&c, s->args[i].type, v, label, &out->args[i], &out->owned[i]);
            if (st != OD_OK)
                goto fail;
            out->given[i] = true;
        }
    }
    if ((st = fill_missing(&c)) != OD_OK)
        goto fail;
    return OD_OK;
fail:
    od_bound_release(out);
    return st;
}

/* ---- Open Inference Protocol inputs ---------------------------------------- */

static double elem_double(const od_tensor *t, int64_t i)
{
    const void *d = od_tensor_data(t);
    switch (t->dtype) {
    case OD_BOOL: return ((const uint8_t *)d)[i];
    case OD_UINT8: return ((const uint8_t *)d)[i];
    case OD_INT8: return ((const int8_t *)d)[i];
    case OD_INT16: return ((const int16_t *)d)[i];
    case OD_INT32: return ((const int32_t *)d)[i];
    case OD_INT64: return (double)((const int64_t *)d)[i];
    case OD_FLOAT32: return ((const float *)d)[i];
    case OD_FLOAT64: return ((const double *)d)[i];
    default: return NAN; /* half types: converted below */
    }
}

static int64_t elem_int(const od_tensor *t, int64_t i)
{
    if (t->dtype == OD_INT64)
        return ((const int64_t *)od_tensor_data(t))[i];
    return (int64_t)elem_double(t, i);
}

/* A non-tensor argument from a decoded (contiguous CPU) input tensor. */
static od_status value_from_tensor(bctx *c, const od_type *t, od_tensor *tn, const char *label,
                                   od_value *out, bool *owned)
{
    *owned = false;
    const od_type *base = od_type_unwrap_optional(t);
    int64_t n = od_tensor_numel(tn);
    bool integral = od_dtype_is_integral(tn->dtype, true);
    if (tn->dtype == OD_FLOAT16 || tn->dtype == OD_BFLOAT16)
        return od_error_set(c->err, OD_EUNSUPPORTED,
                            "%s: %s: send non-tensor arguments as FP32/FP64/INT64/BOOL, not %s",
                            od_op_name(c->op), label, od_dtype_oip_name(tn->dtype));
    char ty[96];
    od_type_print(t, ty, sizeof ty);
    switch (base->kind) {
    case OD_TY_INT:
    case OD_TY_SYMINT:
    case OD_TY_FLOAT:
    case OD_TY_BOOL:
    case OD_TY_SCALAR:
        if (n != 1)
            return od_error_set(c->err, OD_EMISMATCH,
                                "%s: %s is %s, so its input needs exactly one element, got %lld",
                                od_op_name(c->op), label, ty, (long long)n);
        if (base->kind == OD_TY_INT || base->kind == OD_TY_SYMINT) {
            if (!integral || tn->dtype == OD_BOOL)
                return od_error_set(c->err, OD_EMISMATCH, "%s: %s must be int, not %s",
                                    od_op_name(c->op), label, od_dtype_oip_name(tn->dtype));
            *out = od_int(elem_int(tn, 0));
        } else if (base->kind == OD_TY_BOOL) {
            if (tn->dtype != OD_BOOL)
                return od_error_set(c->err, OD_EMISMATCH, "%s: %s must be bool (BOOL), not %s",
                                    od_op_name(c->op), label, od_dtype_oip_name(tn->dtype));
            *out = od_bool(elem_double(tn, 0) != 0);
        } else if (base->kind == OD_TY_FLOAT) {
            *out = od_double(elem_double(tn, 0));
        } else { /* Scalar keeps the input's category */
            if (tn->dtype == OD_BOOL)
                *out = od_bool(elem_double(tn, 0) != 0);
            else if (integral)
                *out = od_int(elem_int(tn, 0));
            else
                *out = od_double(elem_double(tn, 0));
        }
        return OD_OK;
    case OD_TY_LIST: {
        const od_type *e = base->elem;
        if (tn->ndim > 1)
            return od_error_set(c->err, OD_EMISMATCH, "%s: %s is %s, so its input must be 1-D",
                                od_op_name(c->op), label, ty);
        if (e->kind == OD_TY_INT || e->kind == OD_TY_SYMINT) {
            if (!integral || tn->dtype == OD_BOOL)
                return od_error_set(c->err, OD_EMISMATCH, "%s: %s must be int[] (INT64/INT32), not %s",
                                    od_op_name(c->op), label, od_dtype_oip_name(tn->dtype));
            int64_t *items = malloc(n ? (size_t)n * sizeof *items : 1);
            if (!items)
                return od_error_set(c->err, OD_ENOMEM, "out of memory");
            for (int64_t i = 0; i < n; i++)
                items[i] = elem_int(tn, i);
            *out = od_list_v(OD_T_INT_LIST, items, (size_t)n);
        } else if (e->kind == OD_TY_FLOAT) {
            double *items = malloc(n ? (size_t)n * sizeof *items : 1);
            if (!items)
                return od_error_set(c->err, OD_ENOMEM, "out of memory");
            for (int64_t i = 0; i < n; i++)
                items[i] = elem_double(tn, i);
            *out = od_list_v(OD_T_DOUBLE_LIST, items, (size_t)n);
        } else if (e->kind == OD_TY_BOOL) {
            bool *items = malloc(n ? (size_t)n * sizeof *items : 1);
            if (!items)
                return od_error_set(c->err, OD_ENOMEM, "out of memory");
            for (int64_t i = 0; i < n; i++)
                items[i] = elem_double(tn, i) != 0;
            *out = od_list_v(OD_T_BOOL_LIST, items, (size_t)n);
        } else {
            break;
        }
        *owned = true;
        return OD_OK;
    }
    default: break;
    }
    return od_error_set(c->err, OD_EUNSUPPORTED,
                        "%s: %s has type %s, which has no tensor form; pass it in the request's "
                        "\"parameters\" instead",
                        od_op_name(c->op), label, ty);
}

od_status od_proto_bind_oip(const od_op *op, od_json_doc *doc, json_t *inputs, json_t *params,
                            const od_bind_opts *opts, od_bound *out, od_error *err)
{
    bctx c = {op, doc, opts, out, err, true};
    const od_schema *s = od_op_schema(op);
    od_status st = begin(&c, s);
    if (st != OD_OK)
        return st;
    char model[160];
    size_t ml = cat(model, sizeof model, 0, "model '");
    cat(model, sizeof model, cat(model, sizeof model, ml, od_op_name(op)), "'");
    if (!json_is_array(inputs)) {
        st = od_error_set(err, OD_EINVAL, "\"inputs\" must be a list of tensors, got %s",
                          inputs ? od_json_kind(inputs) : "nothing");
        goto fail;
    }
    size_t i;
    json_t *in;
    char label[160];
    json_array_foreach(inputs, i, in) {
        json_t *jn = json_object_get(in, "name");
        if (!json_is_string(jn)) {
            st = od_error_set(err, OD_EINVAL, "inputs[%zu]: \"name\" must be a string", i);
            goto fail;
        }
        const char *name = json_string_value(jn);
        int k = arg_index(s, name);
        if (k < 0) {
            char names[512] = "";
            size_t len = 0;
            for (int a = 0; a < s->nargs && len < sizeof names; a++)
                len += (size_t)snprintf(names + len, sizeof names - len, "%s%s", a ? ", " : "",
                                        s->args[a].name);
            st = od_error_set(err, OD_EMISMATCH, "%s has no input '%.64s' (its inputs: %s)", model,
                              name, names);
            goto fail;
        }
        if (out->given[k]) {
            st = od_error_set(err, OD_EMISMATCH, "%s: input '%s' given twice", model, name);
            goto fail;
        }
        cat(label, sizeof label, cat(label, sizeof label, cat(label, sizeof label, 0, "input '"),
                                     name), "'");
        const od_type *t = s->args[k].type;
        const od_type *base = od_type_unwrap_optional(t);
        char what[200];
        what_label(what, sizeof what, od_op_name(op), label);
        if (base->kind == OD_TY_TENSOR) {
            od_tensor *tn = NULL;
            if ((st = decode_tensor(doc, in, opts, opts->mode, what, &tn, &out->bytes_in, err)) != OD_OK)
                goto fail;
            out->args[k] = od_tensor_v(tn);
            out->owned[k] = true;
        } else if (base->kind == OD_TY_LIST && od_type_unwrap_optional(base->elem)->kind == OD_TY_TENSOR) {
            st = od_error_set(err, OD_EUNSUPPORTED,
                              "%s: %s is a list of tensors, which the Open Inference Protocol "
                              "cannot carry as one input; call POST /v1/ops/%s instead",
                              model, label, od_op_name(op));
            goto fail;
        } else {
            od_tensor *tn = NULL;
            if ((st = od_tensor_from_json(doc, in, opts->lim, OD_DECODE_DATA, what, &tn, err)) != OD_OK)
                goto fail;
            st = value_from_tensor(&c, t, tn, label, &out->args[k], &out->owned[k]);
            od_tensor_release(tn);
            if (st != OD_OK)
                goto fail;
        }
        out->given[k] = true;
    }
    if (params && json_is_object(params)) {
        const char *key;
        json_t *v;
        json_object_foreach(params, key, v) {
            int k = arg_index(s, key);
            if (k < 0)
                continue; /* other parameters (binary_data_output, ...) are not arguments */
            if (out->given[k]) {
                st = od_error_set(err, OD_EMISMATCH, "%s: argument '%s' given both as an input "
                                  "and as a parameter", model, key);
                goto fail;
            }
            snprintf(label, sizeof label, "parameter '%s'", key);
            if ((st = bind_value(&c, s->args[k].type, v, label, &out->args[k], &out->owned[k])) != OD_OK)
                goto fail;
            out->given[k] = true;
        }
    }
    if ((st = fill_missing(&c)) != OD_OK)
        goto fail;
    return OD_OK;
fail:
    od_bound_release(out);
    return st;
}

/* ---- values out --------------------------------------------------------------- */

void od_value_to_json(od_buf *b, const od_value *v)
{
    char tmp[64];
    switch (v->tag) {
    case OD_T_NONE: od_buf_puts(b, "null"); return;
    case OD_T_BOOL: od_buf_puts(b, v->u.b ? "true" : "false"); return;
    case OD_T_INT: od_buf_i64(b, v->u.i); return;
    case OD_T_DOUBLE: od_buf_f64(b, v->u.d); return;
    case OD_T_STRING: od_buf_json_str(b, v->u.s); return;
    case OD_T_DTYPE: od_buf_json_str(b, od_dtype_name(v->u.dtype)); return;
    case OD_T_DEVICE:
        od_device_print(v->u.device, tmp, sizeof tmp);
        od_buf_json_str(b, tmp);
        return;
    case OD_T_TENSOR: {
        const od_tensor *t = v->u.t;
        od_buf_puts(b, "{\"dtype\":");
        od_buf_json_str(b, od_dtype_name(t->dtype));
        od_buf_puts(b, ",\"shape\":");
        od_buf_i64s(b, t->sizes, t->ndim);
        od_buf_putc(b, '}');
        return;
    }
    case OD_T_INT_LIST:
    case OD_T_DOUBLE_LIST:
    case OD_T_BOOL_LIST:
    case OD_T_TENSOR_LIST:
        od_buf_putc(b, '[');
        for (size_t i = 0; i < v->u.list.n; i++) {
            if (i)
                od_buf_putc(b, ',');
            if (v->tag == OD_T_INT_LIST)
                od_buf_i64(b, ((const int64_t *)v->u.list.items)[i]);
            else if (v->tag == OD_T_DOUBLE_LIST)
                od_buf_f64(b, ((const double *)v->u.list.items)[i]);
            else if (v->tag == OD_T_BOOL_LIST)
                od_buf_puts(b, ((const bool *)v->u.list.items)[i] ? "true" : "false");
            else {
                od_tensor *t = ((od_tensor *const *)v->u.list.items)[i];
                od_value tv = t ? od_tensor_v(t) : od_none();
                od_value_to_json(b, &tv);
            }
        }
        od_buf_putc(b, ']');
        return;
    default: od_buf_puts(b, "null"); return;
    }
}

json_t *od_value_to_jansson(const od_value *v)
{
    od_buf b;
    od_buf_init(&b);
    od_value_to_json(&b, v);
    json_t *j = NULL;
    if (!b.oom && b.data)
        j = json_loadb(b.data, b.len, JSON_DECODE_ANY, NULL);
    od_buf_free(&b);
    return j ? j : json_null();
}

void od_proto_return_name(const od_schema *s, int i, char *buf, size_t cap)
{
    if (!cap)
        return;
    if (i < s->nrets && s->rets[i].name)
        cat(buf, cap, 0, s->rets[i].name);
    else if (s->nrets == 1)
        cat(buf, cap, 0, "out");
    else
        cat_int(buf, cap, cat(buf, cap, 0, "out"), i);
}

bool od_proto_arg_oip(const od_type *t, const char **datatype, int *rank)
{
    const od_type *b = od_type_unwrap_optional(t);
    switch (b->kind) {
    case OD_TY_TENSOR: *datatype = "FP32"; *rank = -1; return true;
    case OD_TY_INT:
    case OD_TY_SYMINT: *datatype = "INT64"; *rank = 1; return true;
    case OD_TY_FLOAT: *datatype = "FP64"; *rank = 1; return true;
    case OD_TY_SCALAR: *datatype = "FP32"; *rank = 1; return true;
    case OD_TY_BOOL: *datatype = "BOOL"; *rank = 1; return true;
    case OD_TY_LIST: {
        const od_type *e = b->elem;
        if (e->kind == OD_TY_INT || e->kind == OD_TY_SYMINT)
            *datatype = "INT64";
        else if (e->kind == OD_TY_FLOAT)
            *datatype = "FP64";
        else if (e->kind == OD_TY_BOOL)
            *datatype = "BOOL";
        else
            return false;
        *rank = -1;
        return true;
    }
    default: return false;
    }
}
