/* codec.c — tensors to and from the wire: JSON tensor objects (flat or
 * nested data, fast-path buffers), binary tensor data, and the encoders.
 *
 * Invariants:
 *  - Every declared shape is checked (rank, non-negative sizes, int64
 *    overflow, the element cap) before anything is allocated for it.
 *  - A fast-path buffer already in the declared dtype becomes the tensor's
 *    storage (no copy); binary data becomes a view of the request body when
 *    it is aligned for its dtype (no copy), else it is copied once.
 *  - BOOL data from the wire is normalised to 0/1 before any kernel sees it
 *    (a C bool holding 2 is undefined behaviour).
 *  - Encoders read any strides; they never fail except by running out of
 *    memory, which the od_buf records.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "od_half.h"
#include "proto_int.h"

static const od_device cpu_dev = {OD_DEV_CPU, 0};

od_dtype od_proto_dtype(const char *name)
{
    /* the names nearly every request carries, without the table walk */
    if (name[0] == 'f' && !strcmp(name, "float32"))
        return OD_FLOAT32;
    if (name[0] == 'F' && !strcmp(name, "FP32"))
        return OD_FLOAT32;
    return od_dtype_from_name(name);
}

const char *od_proto_dtype_config_name(od_dtype dt)
{
    static const char *const names[OD_NUM_DTYPES] = {
#define OD_X_(e, n, o, s, c) [OD_##e] = "TYPE_" o,
        OD_DTYPES(OD_X_)
#undef OD_X_
    };
    return (unsigned)dt < OD_NUM_DTYPES ? names[dt] : "TYPE_INVALID";
}

static void free_deleter(void *ctx, void *data)
{
    (void)ctx;
    free(data);
}

static void blob_deleter(void *ctx, void *data)
{
    (void)data;
    od_blob_release(ctx);
}

static const char *shape_str(char *buf, size_t cap, const int64_t *sizes, int ndim)
{
    od_shape_print(sizes, ndim, buf, cap);
    return buf;
}

static const char *dtype_list(void)
{
    return "bool, uint8, int8, int16, int32, int64, float16, bfloat16, float32, float64 "
           "(or BOOL, UINT8, INT8, INT16, INT32, INT64, FP16, BF16, FP32, FP64)";
}

/* Converts an untyped fast-path buffer (int64 or double) into t's dtype. */
static od_status convert_auto(const od_numarr *na, od_tensor *t, const char *what, od_error *err)
{
    void *dst = od_tensor_data(t);
    bool src_float = na->kind == OD_NA_FLOAT;
    const int64_t *si = na->data;
    const double *sd = na->data;
    od_dtype dt = t->dtype;
    for (int64_t i = 0; i < na->n; i++) {
        double d = src_float ? sd[i] : (double)si[i];
        switch (dt) {
        case OD_FLOAT32: ((float *)dst)[i] = (float)d; continue;
        case OD_FLOAT64: ((double *)dst)[i] = d; continue;
        case OD_FLOAT16: ((uint16_t *)dst)[i] = od_float_to_half((float)d); continue;
        case OD_BFLOAT16: ((uint16_t *)dst)[i] = od_float_to_bf16((float)d); continue;
        case OD_BOOL: ((uint8_t *)dst)[i] = d != 0; continue;
        default: break;
        }
        int64_t v;
        if (!src_float) {
            v = si[i];
        } else if (isfinite(d) && d == trunc(d) && d >= -9223372036854775808.0 &&
                   d < 9223372036854775808.0) {
            v = (int64_t)d;
        } else {
            char txt[40];
            od_fmt_f64(d, txt);
            return od_error_set(err, OD_EMISMATCH,
                                "%s: element %lld is %s, not an integer as dtype %s needs", what,
                                (long long)i, txt, od_dtype_name(dt));
        }
        int64_t lo, hi;
        switch (dt) {
        case OD_UINT8: lo = 0; hi = UINT8_MAX; break;
        case OD_INT8: lo = INT8_MIN; hi = INT8_MAX; break;
        case OD_INT16: lo = INT16_MIN; hi = INT16_MAX; break;
        case OD_INT32: lo = INT32_MIN; hi = INT32_MAX; break;
        default: lo = INT64_MIN; hi = INT64_MAX; break;
        }
        if (v < lo || v > hi)
            return od_error_set(err, OD_EMISMATCH, "%s: element %lld is %lld, out of range for %s",
                                what, (long long)i, (long long)v, od_dtype_name(dt));
        switch (dt) {
        case OD_UINT8: ((uint8_t *)dst)[i] = (uint8_t)v; break;
        case OD_INT8: ((int8_t *)dst)[i] = (int8_t)v; break;
        case OD_INT16: ((int16_t *)dst)[i] = (int16_t)v; break;
        case OD_INT32: ((int32_t *)dst)[i] = (int32_t)v; break;
        default: ((int64_t *)dst)[i] = v; break;
        }
    }
    return OD_OK;
}

/* First element of a non-numeric data array, as a path like "[1][0]". */
static bool find_bad(const json_t *v, char *path, size_t cap, size_t len, const char **kind)
{
    if (json_is_array(v)) {
        size_t i;
        const json_t *e;
        json_array_foreach(v, i, e) {
            int n = snprintf(path + len, cap > len ? cap - len : 0, "[%zu]", i);
            if (n > 0 && find_bad(e, path, cap, len + (size_t)n < cap ? len + (size_t)n : cap - 1,
                                  kind))
                return true;
        }
        if (len < cap)
            path[len] = '\0';
        return false;
    }
    if (json_is_number(v) || json_is_boolean(v))
        return false;
    *kind = od_json_kind(v);
    return true;
}

/* A scalar "data" (5, true, "NaN") as a one-element untyped buffer. */
static bool scalar_data(const json_t *v, od_numarr *na, int64_t *ibuf, double *dbuf)
{
    memset(na, 0, sizeof *na);
    na->n = 1;
    if (json_is_boolean(v)) {
        *ibuf = json_is_true(v);
        na->data = ibuf;
        na->kind = OD_NA_BOOL;
        return true;
    }
    if (json_is_integer(v)) {
        *ibuf = json_integer_value(v);
        na->data = ibuf;
        na->kind = OD_NA_INT;
        return true;
    }
    if (json_is_real(v)) {
        *dbuf = json_real_value(v);
    } else if (json_is_string(v)) {
        const char *s = json_string_value(v);
        if (!strcmp(s, "NaN") || !strcmp(s, "nan"))
            *dbuf = NAN;
        else if (!strcmp(s, "Infinity") || !strcmp(s, "inf"))
            *dbuf = INFINITY;
        else if (!strcmp(s, "-Infinity") || !strcmp(s, "-inf"))
            *dbuf = -INFINITY;
        else
            return false;
    } else {
        return false;
    }
    na->data = dbuf;
    na->kind = OD_NA_FLOAT;
    return true;
}

static od_dtype kind_dtype(int kind)
{
    return kind == OD_NA_BOOL ? OD_BOOL : kind == OD_NA_INT ? OD_INT64 : OD_DEFAULT_FLOAT;
}

void od_tensor_fields_of(json_t *obj, od_tensor_fields *f)
{
    memset(f, 0, sizeof *f);
    if (!json_is_object(obj))
        return;
    const char *k;
    size_t n;
    json_t *v;
    /* the key's length and bytes: exactly the member json_object_get(obj, name) finds */
    json_object_keylen_foreach(obj, k, n, v) {
        json_t **slot = n == 3 && !memcmp(k, "ref", 3)              ? &f->ref
                        : n == 4 && !memcmp(k, "data", 4)           ? &f->data
                        : n == 5 && !memcmp(k, "dtype", 5)          ? &f->dtype
                        : n == 5 && !memcmp(k, "shape", 5)          ? &f->shape
                        : n == 8 && !memcmp(k, "datatype", 8)       ? &f->datatype
                        : n == 10 && !memcmp(k, "parameters", 10)   ? &f->params
                        : n == 13 && !memcmp(k, "requires_grad", 13) ? &f->requires_grad
                                                                     : NULL;
        if (slot)
            *slot = v;
    }
}

static od_status decode(od_json_doc *doc, json_t *obj, const od_tensor_fields *f, const od_proto_limits *lim,
                        od_decode_mode mode, const char *what, od_tensor **out, od_error *err)
{
    *out = NULL;
    od_proto_limits dl = od_proto_default_limits();
    if (!lim)
        lim = &dl;
    char sb[256], sb2[256];
    if (!json_is_object(obj))
        return od_error_set(err, OD_EMISMATCH,
                            "%s: expected a tensor {\"dtype\": ..., \"shape\": [...], \"data\": "
                            "[...]}, got %s",
                            what, od_json_kind(obj));

    /* dtype */
    od_dtype dt = OD_NUM_DTYPES;
    json_t *jdt = f->dtype;
    json_t *jdt2 = f->datatype;
    if (jdt && jdt2 && !json_equal(jdt, jdt2))
        return od_error_set(err, OD_EINVAL, "%s: \"dtype\" and \"datatype\" disagree", what);
    if (!jdt)
        jdt = jdt2;
    if (jdt && !json_is_null(jdt)) {
        if (!json_is_string(jdt))
            return od_error_set(err, OD_EINVAL, "%s: dtype must be a string such as \"float32\", got %s",
                                what, od_json_kind(jdt));
        dt = od_proto_dtype(json_string_value(jdt));
        if (dt == OD_NUM_DTYPES)
            return od_error_set(err, OD_EINVAL, "%s: unknown dtype '%.64s'; expected one of %s",
                                what, json_string_value(jdt), dtype_list());
    }

    /* shape */
    int ndim = -1;
    int64_t sizes[OD_MAX_DIMS];
    int64_t numel = 1;
    json_t *js = f->shape;
    if (js && !json_is_null(js)) {
        if (!json_is_array(js))
            return od_error_set(err, OD_EMISMATCH, "%s: shape must be a list of sizes, got %s",
                                what, od_json_kind(js));
        size_t r = json_array_size(js);
        int maxr = lim->max_rank < OD_MAX_DIMS ? lim->max_rank : OD_MAX_DIMS;
        if (r > (size_t)maxr)
            return od_error_set(err, OD_ETOOLARGE, "%s: shape has rank %zu, above the limit of %d",
                                what, r, maxr);
        bool overflow = false;
        for (size_t i = 0; i < r; i++) {
            json_t *d = json_array_get(js, i);
            if (!json_is_integer(d) || json_integer_value(d) < 0)
                return od_error_set(err, OD_EMISMATCH,
                                    "%s: shape[%zu] must be a non-negative integer, got %s", what, i,
                                    json_is_integer(d) ? "a negative number" : od_json_kind(d));
            sizes[i] = json_integer_value(d);
            if (sizes[i] > 0 && numel > INT64_MAX / sizes[i])
                overflow = true;
            else
                numel *= sizes[i];
        }
        ndim = (int)r;
        /* Meta tensors hold no data: explain may describe any shape int64 counts */
        if (overflow || (numel > lim->max_elements && mode != OD_DECODE_META)) {
            if (overflow)
                return od_error_set(err, OD_ETOOLARGE,
                                    "%s: shape %s has more elements than int64 can count", what,
                                    shape_str(sb, sizeof sb, sizes, ndim));
            return od_error_set(err, OD_ETOOLARGE,
                                "%s: shape %s has %lld elements, above the limit of %lld per tensor",
                                what, shape_str(sb, sizeof sb, sizes, ndim), (long long)numel,
                                (long long)lim->max_elements);
        }
    }

    /* where the data is */
    json_t *jdata = f->data;
    int bi = od_doc_binary_index(doc, obj);
    json_t *params = f->params;
    if (bi < 0 && json_object_get(params, "binary_data_size"))
        return od_error_set(err, OD_EINVAL,
                            "%s: parameters.binary_data_size is set but the request carries no "
                            "binary data (send the Inference-Header-Content-Length header with "
                            "the binary body)",
                            what);
    if (bi >= 0 && jdata)
        return od_error_set(err, OD_EINVAL, "%s: both \"data\" and binary_data_size are given",
                            what);
    od_numarr *na = jdata ? od_doc_numarr(doc, jdata) : NULL;
    od_numarr scalar;
    int64_t sint;
    double sdbl;
    if (jdata && !na && !json_is_array(jdata) && !json_is_object(jdata) && !json_is_null(jdata)) {
        if (!scalar_data(jdata, &scalar, &sint, &sdbl))
            return od_error_set(err, OD_EMISMATCH,
                                "%s: data must be a list of numbers or a number, got %s", what,
                                od_json_kind(jdata));
        na = &scalar;
    } else if (jdata && !na) {
        if (json_is_array(jdata)) {
            char path[128] = "";
            const char *kind = "value";
            if (find_bad(jdata, path, sizeof path, 0, &kind))
                return od_error_set(err, OD_EMISMATCH,
                                    "%s: data%s is %s; expected numbers, bools, \"NaN\", "
                                    "\"Infinity\" or \"-Infinity\"",
                                    what, path, kind);
            return od_error_set(err, OD_EMISMATCH,
                                "%s: data is ragged: nested lists must all have the same length "
                                "and depth (at most %d levels)",
                                what, lim->max_rank);
        }
        return od_error_set(err, OD_EMISMATCH,
                            "%s: data must be a list of numbers or a number, got %s", what,
                            od_json_kind(jdata));
    }
    if (na && na->error)
        return od_error_set(err, OD_EMISMATCH, "%s: %s", what, na->error);

    if (!na && bi < 0 && mode != OD_DECODE_META)
        return od_error_set(err, OD_EMISMATCH,
                            "%s: the tensor has no \"data\" (nor parameters.binary_data_size)",
                            what);

    /* settle shape and dtype */
    if (ndim < 0) {
        if (na == &scalar) {
            ndim = 0;
        } else if (na) {
            ndim = na->ndim;
            memcpy(sizes, na->shape, sizeof(int64_t) * (size_t)ndim);
            numel = na->n;
        } else {
            return od_error_set(err, OD_EINVAL, "%s: \"shape\" is required %s", what,
                                bi >= 0 ? "for binary data" : "when there is no \"data\"");
        }
    }
    if (dt == OD_NUM_DTYPES) {
        if (na && !na->typed)
            dt = kind_dtype(na->kind);
        else if (mode == OD_DECODE_META && !na && bi < 0)
            dt = OD_DEFAULT_FLOAT;
        else
            return od_error_set(err, OD_EINVAL, "%s: \"dtype\" is required for binary data; "
                                "expected one of %s", what, dtype_list());
    }
    if (na) {
        if (na->n != numel)
            return od_error_set(err, OD_EMISMATCH,
                                "%s: data has %lld elements but shape %s needs %lld", what,
                                (long long)na->n, shape_str(sb, sizeof sb, sizes, ndim),
                                (long long)numel);
        if (na != &scalar && na->ndim > 1 &&
            (na->ndim != ndim || memcmp(na->shape, sizes, sizeof(int64_t) * (size_t)ndim) != 0))
            return od_error_set(err, OD_EMISMATCH, "%s: nested data has shape %s but shape is %s",
                                what, shape_str(sb, sizeof sb, na->shape, na->ndim),
                                shape_str(sb2, sizeof sb2, sizes, ndim));
    }

    if (mode == OD_DECODE_META)
        return od_tensor_empty(sizes, ndim, dt, (od_device){OD_DEV_META, 0}, out, err);

    size_t esz = od_dtype_size(dt);
    size_t nbytes = (size_t)numel * esz;
    od_status st;

    if (bi >= 0) {
        if (doc->binsize[bi] != nbytes)
            return od_error_set(err, OD_EMISMATCH,
                                "%s: binary_data_size is %zu bytes but shape %s of %s needs %zu "
                                "bytes",
                                what, doc->binsize[bi], shape_str(sb, sizeof sb, sizes, ndim),
                                od_dtype_name(dt), nbytes);
        char *ptr = doc->blob->data + doc->binoff[bi];
        if (dt == OD_BOOL)
            for (size_t i = 0; i < nbytes; i++)
                ptr[i] = ptr[i] != 0;
        if (nbytes == 0 || (uintptr_t)ptr % esz != 0) {
            if ((st = od_tensor_empty(sizes, ndim, dt, cpu_dev, out, err)) != OD_OK)
                return st;
            if (nbytes)
                memcpy(od_tensor_data(*out), ptr, nbytes);
            return OD_OK;
        }
        od_storage *s = NULL;
        od_blob_retain(doc->blob);
        if ((st = od_storage_wrap(cpu_dev, ptr, nbytes, blob_deleter, doc->blob, &s, err)) != OD_OK) {
            od_blob_release(doc->blob);
            return st;
        }
        st = od_tensor_from_storage(s, sizes, ndim, dt, out, err);
        od_storage_release(s);
        return st;
    }

    if (!na)
        return od_error_set(err, OD_EMISMATCH,
                            "%s: the tensor has no \"data\" (nor parameters.binary_data_size)",
                            what);

    if (na->typed && !na->data && numel > 0)
        return od_error_set(err, OD_EINVAL, "%s: this tensor's data was already used", what);
    if (na->typed && na->dtype == dt && numel > 0) {
        od_storage *s = NULL;
        if ((st = od_storage_wrap(cpu_dev, na->data, nbytes, free_deleter, NULL, &s, err)) != OD_OK)
            return st;
        na->data = NULL; /* the storage owns it now */
        st = od_tensor_from_storage(s, sizes, ndim, dt, out, err);
        od_storage_release(s);
        return st;
    }
    if ((st = od_tensor_empty(sizes, ndim, dt, cpu_dev, out, err)) != OD_OK)
        return st;
    if (numel == 0)
        return OD_OK;
    if (na->typed) { /* typed for another dtype: cannot happen (dtype wins) */
        od_tensor_release(*out);
        *out = NULL;
        return od_error_set(err, OD_EINTERNAL, "%s: data was decoded for another dtype", what);
    }
    if ((st = convert_auto(na, *out, what, err)) != OD_OK) {
        od_tensor_release(*out);
        *out = NULL;
    }
    return st;
}

od_status od_tensor_from_json(od_json_doc *doc, json_t *obj, const od_proto_limits *lim,
                              od_decode_mode mode, const char *what, od_tensor **out,
                              od_error *err)
{
    od_tensor_fields f;
    od_tensor_fields_of(obj, &f);
    return od_tensor_from_fields(doc, obj, &f, lim, mode, what, out, err);
}

od_status od_tensor_from_fields(od_json_doc *doc, json_t *obj, const od_tensor_fields *f,
                                const od_proto_limits *lim, od_decode_mode mode, const char *what,
                                od_tensor **out, od_error *err)
{
    json_t *rg = f->requires_grad;
    if (rg && !json_is_boolean(rg))
        return od_error_set(err, OD_EINVAL, "%s: requires_grad must be true or false, got %s", what,
                            od_json_kind(rg));
    od_status st = decode(doc, obj, f, lim, mode, what, out, err);
    if (st != OD_OK || !json_is_true(rg))
        return st;
    if (!od_dtype_is_floating((*out)->dtype)) {
        od_error_set(err, OD_EMISMATCH,
                     "%s: only Tensors of floating point dtype can require gradients, got %s", what,
                     od_dtype_name((*out)->dtype));
        od_tensor_release(*out);
        *out = NULL;
        return OD_EMISMATCH;
    }
    (*out)->requires_grad = true;
    od_tensor_refresh_keys(*out);
    return OD_OK;
}

/* ---- encoding ------------------------------------------------------------ */

void od_tensor_copy_out(const od_tensor *t, void *dst)
{
    size_t es = od_dtype_size(t->dtype);
    int64_t n = od_tensor_numel(t);
    const char *src = od_tensor_data(t);
    if (n == 0 || !src)
        return;
    if (od_tensor_is_contiguous(t)) {
        memcpy(dst, src, (size_t)n * es);
        return;
    }
    int nd = t->ndim;
    int64_t idx[OD_MAX_DIMS] = {0};
    int64_t inner = t->sizes[nd - 1], istride = t->strides[nd - 1];
    char *o = dst;
    for (;;) {
        int64_t off = 0;
        for (int k = 0; k < nd - 1; k++)
            off += idx[k] * t->strides[k];
        const char *row = src + off * (int64_t)es;
        if (istride == 1) {
            memcpy(o, row, (size_t)inner * es);
            o += (size_t)inner * es;
        } else {
            for (int64_t j = 0; j < inner; j++, o += es)
                memcpy(o, row + j * istride * (int64_t)es, es);
        }
        int k = nd - 2;
        while (k >= 0 && ++idx[k] == t->sizes[k])
            idx[k--] = 0;
        if (k < 0)
            break;
    }
}

static void put_shape(od_buf *b, const od_tensor *t)
{
    od_buf_puts(b, "\"shape\":");
    od_buf_i64s(b, t->sizes, t->ndim);
}

static void put_head(od_buf *b, const od_tensor *t, const char *name, bool oip)
{
    od_buf_putc(b, '{');
    if (name) {
        od_buf_puts(b, "\"name\":");
        od_buf_json_str(b, name);
        od_buf_putc(b, ',');
    }
    od_buf_puts(b, oip ? "\"datatype\":\"" : "\"dtype\":\"");
    od_buf_puts(b, oip ? od_dtype_oip_name(t->dtype) : od_dtype_name(t->dtype));
    od_buf_puts(b, "\",");
    put_shape(b, t);
    if (t->requires_grad)
        od_buf_puts(b, ",\"requires_grad\":true");
}

/* Room for one more number and a ',' (the longest is a float64 string or
 * int64; od_fmt_f32 needs OD_FMT_F32_ROOM of room). */
_Static_assert(OD_FMT_F32_ROOM + 1 <= 64, "room() below");
static inline bool room(od_buf *b) { return b->cap - b->len > 64 || od_buf_reserve(b, 64); }

/* n comma-separated JSON numbers (no brackets). */
static void put_items(od_buf *b, const void *data, int64_t n, od_dtype dt)
{
    /* room for the usual ~10 bytes per element at once, instead of a
     * doubling realloc chain; capped so a huge tensor never asks for more
     * than it is likely to use (the buffer still grows past it) */
    int64_t guess = n < ((int64_t)16 << 20) / 10 ? n * 10 : (int64_t)16 << 20;
    if (b->limit && (size_t)guess + 64 > b->limit - (b->len < b->limit ? b->len : b->limit))
        guess = 0; /* near the cap: grow as needed, so the cap trips on real bytes */
    od_buf_reserve(b, (size_t)guess + 64);
    int64_t i = 0;
    if (dt == OD_FLOAT32) { /* the common output: whole runs in one call */
        const float *f = data;
        while (i < n) {
            size_t chunk = n - i < 1024 ? (size_t)(n - i) : 1024, done;
            size_t need = chunk * (OD_FMT_F32_MAX + 1) + OD_FMT_F32_ROOM;
            if (b->limit && b->len + need > b->limit)
                break; /* near the cap: one at a time below, so it trips on real bytes */
            if (!od_buf_reserve(b, need))
                return;
            b->len += od_fmt_f32_items(f + i, chunk, i > 0, b->data + b->len, &done);
            i += (int64_t)done;
            if (done < chunk) { /* a NaN or infinity: quoted, below */
                if (!room(b))
                    return;
                if (i)
                    b->data[b->len++] = ',';
                od_buf_f32(b, f[i++]);
            }
        }
    }
    for (; i < n; i++) {
        if (!room(b))
            return;
        if (i)
            b->data[b->len++] = ',';
        switch (dt) {
        case OD_FLOAT32: {
            float f = ((const float *)data)[i];
            if (isfinite(f))
                b->len += (size_t)od_fmt_f32(f, b->data + b->len);
            else
                od_buf_f32(b, f);
            break;
        }
        case OD_FLOAT64: od_buf_f64(b, ((const double *)data)[i]); break;
        case OD_FLOAT16: od_buf_f32(b, od_half_to_float(((const uint16_t *)data)[i])); break;
        case OD_BFLOAT16: od_buf_f32(b, od_bf16_to_float(((const uint16_t *)data)[i])); break;
        case OD_BOOL:
            if (((const uint8_t *)data)[i]) {
                memcpy(b->data + b->len, "true", 4);
                b->len += 4;
            } else {
                memcpy(b->data + b->len, "false", 5);
                b->len += 5;
            }
            break;
        case OD_UINT8: b->len += (size_t)od_fmt_i64(((const uint8_t *)data)[i], b->data + b->len); break;
        case OD_INT8: b->len += (size_t)od_fmt_i64(((const int8_t *)data)[i], b->data + b->len); break;
        case OD_INT16: b->len += (size_t)od_fmt_i64(((const int16_t *)data)[i], b->data + b->len); break;
        case OD_INT32: b->len += (size_t)od_fmt_i64(((const int32_t *)data)[i], b->data + b->len); break;
        default: b->len += (size_t)od_fmt_i64(((const int64_t *)data)[i], b->data + b->len); break;
        }
    }
    if (room(b))
        b->data[b->len] = '\0';
}

static void put_data(od_buf *b, const void *data, int64_t n, od_dtype dt)
{
    od_buf_puts(b, "\"data\":[");
    put_items(b, data, n, dt);
    od_buf_puts(b, "]}");
}

void od_tensor_to_json(od_buf *b, const od_tensor *t, const char *name, bool oip)
{
    put_head(b, t, name, oip);
    od_buf_putc(b, ',');
    int64_t n = od_tensor_numel(t);
    if (n == 0 || od_tensor_is_contiguous(t)) {
        put_data(b, n ? od_tensor_data(t) : NULL, n, t->dtype);
        return;
    }
    /* A view (an expand, a transpose) is gathered a bounded chunk at a time:
     * its logical size can dwarf its storage, and the buffer's limit should
     * be what stops a huge one, not a giant temporary. */
    enum { CHUNK = 8192 };
    size_t es = od_dtype_size(t->dtype);
    char *tmp = malloc(CHUNK * es);
    if (!tmp) {
        b->oom = true;
        return;
    }
    od_buf_puts(b, "\"data\":[");
    const char *src = od_tensor_data(t);
    int nd = t->ndim;
    int64_t idx[OD_MAX_DIMS] = {0}, off = 0;
    for (int64_t done = 0; done < n && !b->oom;) {
        int64_t m = n - done < CHUNK ? n - done : CHUNK;
        for (int64_t j = 0; j < m; j++) {
            memcpy(tmp + (size_t)j * es, src + off * (int64_t)es, es);
            for (int k = nd - 1; k >= 0; k--) { /* odometer step, offset kept in step */
                if (++idx[k] < t->sizes[k]) {
                    off += t->strides[k];
                    break;
                }
                off -= (idx[k] - 1) * t->strides[k];
                idx[k] = 0;
            }
        }
        if (done)
            od_buf_putc(b, ',');
        put_items(b, tmp, m, t->dtype);
        done += m;
    }
    free(tmp);
    od_buf_puts(b, "]}");
}

void od_tensor_to_json_binary(od_buf *b, const od_tensor *t, const char *name, bool oip)
{
    put_head(b, t, name, oip);
    od_buf_puts(b, ",\"parameters\":{\"binary_data_size\":");
    od_buf_i64(b, (int64_t)od_tensor_nbytes(t));
    od_buf_puts(b, "}}");
}
