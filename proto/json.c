/* json.c — the request parser: strict JSON into jansson, except numeric
 * "data" arrays, which are scanned straight into tensor buffers.
 *
 * Invariants:
 *  - Input is never trusted: every read is bounds-checked against end,
 *    nesting is capped (max_depth), strings are validated UTF-8 with no
 *    \u0000 and no lone surrogates, and numbers follow RFC 8259 exactly.
 *  - The fast path builds no jansson value per element: a "data" array of
 *    numbers/bools (nested or flat) is scanned into one buffer, typed with
 *    the object's "dtype"/"datatype" when that came first (the codec's and
 *    the clients' order), and sized from "shape" when that came first. If
 *    the array holds anything else the scan is undone and the array is
 *    parsed as ordinary JSON (the tensor decoder then reports the element).
 *  - Elements bound for a float32/float64 buffer go straight from text to
 *    the element (od_scan_f32/od_scan_f64: correctly rounded, no od_num,
 *    no double on the way to a float); a run of such numbers is scanned in
 *    a tight loop, and anything else in the array (NaN, true, a nested
 *    list, a bad token) leaves the loop at that element for the general
 *    element path, so both paths accept and reject exactly the same text.
 *  - Conversion problems found by the fast path (1.5 for an int32 tensor,
 *    300 for uint8) are recorded, not raised: the tensor decoder raises them
 *    with the argument's name.
 *  - On any error everything built so far is freed.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "od_half.h"
#include "proto_int.h"

typedef struct parser {
    const char *start, *p, *end;
    int depth;
    int64_t values; /* jansson values built so far (bounded by lim->max_values) */
    const od_proto_limits *lim;
    od_json_doc *doc;
    od_error *err;
    char *scratch;
    size_t scap;
} parser;

static od_status perr(parser *P, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static od_status perr(parser *P, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return od_error_set(P->err, OD_EINVAL, "invalid JSON at byte %zu: %s", (size_t)(P->p - P->start),
                        msg);
}

static inline void skip_ws(parser *P)
{
    const char *p = P->p, *e = P->end;
    while (p < e && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t'))
        p++;
    P->p = p;
}

const char *od_json_kind(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "object";
    case JSON_ARRAY: return "array";
    case JSON_STRING: return "string";
    case JSON_INTEGER: return "integer";
    case JSON_REAL: return "number";
    case JSON_TRUE:
    case JSON_FALSE: return "bool";
    case JSON_NULL: return "null";
    }
    return "value";
}

/* ---- strings ----------------------------------------------------------- */

static bool scratch_room(parser *P, size_t need)
{
    if (need <= P->scap)
        return true;
    size_t cap = P->scap ? P->scap : 64;
    while (cap < need)
        cap *= 2;
    char *s = realloc(P->scratch, cap);
    if (!s)
        return false;
    P->scratch = s;
    P->scap = cap;
    return true;
}

static int hex4(const char *p)
{
    int v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= c - '0';
        else if (c >= 'a' && c <= 'f')
            v |= c - 'a' + 10;
        else if (c >= 'A' && c <= 'F')
            v |= c - 'A' + 10;
        else
            return -1;
    }
    return v;
}

/* Parses the string at P->p ('"') into P->scratch (NUL-terminated). */
static od_status parse_string(parser *P, size_t *outlen)
{
    const char *p = P->p + 1, *e = P->end;
    size_t n = 0;
    for (;;) {
        const char *run = p;
        while (p < e && (unsigned char)*p >= 0x20 && (unsigned char)*p < 0x80 && *p != '"' &&
               *p != '\\')
            p++;
        if (p > run) {
            if (!scratch_room(P, n + (size_t)(p - run) + 1))
                return od_error_set(P->err, OD_ENOMEM, "out of memory parsing a string");
            memcpy(P->scratch + n, run, (size_t)(p - run));
            n += (size_t)(p - run);
        }
        if (p >= e) {
            P->p = p;
            return perr(P, "unterminated string");
        }
        unsigned char c = (unsigned char)*p;
        if (c == '"') {
            p++;
            break;
        }
        if (!scratch_room(P, n + 5))
            return od_error_set(P->err, OD_ENOMEM, "out of memory parsing a string");
        if (c < 0x20) {
            P->p = p;
            return perr(P, "control character 0x%02x in a string (escape it)", c);
        }
        if (c >= 0x80) {
            size_t l = od_utf8_len((const unsigned char *)p, (size_t)(e - p));
            if (!l) {
                P->p = p;
                return perr(P, "invalid UTF-8 in a string");
            }
            memcpy(P->scratch + n, p, l);
            n += l;
            p += l;
            continue;
        }
        /* backslash escape */
        if (p + 1 >= e) {
            P->p = p;
            return perr(P, "unterminated escape");
        }
        char x = p[1];
        p += 2;
        switch (x) {
        case '"': P->scratch[n++] = '"'; break;
        case '\\': P->scratch[n++] = '\\'; break;
        case '/': P->scratch[n++] = '/'; break;
        case 'b': P->scratch[n++] = '\b'; break;
        case 'f': P->scratch[n++] = '\f'; break;
        case 'n': P->scratch[n++] = '\n'; break;
        case 'r': P->scratch[n++] = '\r'; break;
        case 't': P->scratch[n++] = '\t'; break;
        case 'u': {
            int cp = e - p >= 4 ? hex4(p) : -1;
            if (cp < 0) {
                P->p = p;
                return perr(P, "\\u needs four hex digits");
            }
            p += 4;
            if (cp >= 0xdc00 && cp <= 0xdfff) {
                P->p = p;
                return perr(P, "lone low surrogate \\u%04x", cp);
            }
            if (cp >= 0xd800 && cp <= 0xdbff) {
                int lo = (e - p >= 6 && p[0] == '\\' && p[1] == 'u') ? hex4(p + 2) : -1;
                if (lo < 0xdc00 || lo > 0xdfff) {
                    P->p = p;
                    return perr(P, "high surrogate \\u%04x without a low surrogate", cp);
                }
                p += 6;
                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
            }
            if (cp == 0) {
                P->p = p;
                return perr(P, "\\u0000 is not allowed in strings");
            }
            unsigned char *o = (unsigned char *)P->scratch + n;
            if (cp < 0x80) {
                o[0] = (unsigned char)cp;
                n += 1;
            } else if (cp < 0x800) {
                o[0] = (unsigned char)(0xc0 | (cp >> 6));
                o[1] = (unsigned char)(0x80 | (cp & 0x3f));
                n += 2;
            } else if (cp < 0x10000) {
                o[0] = (unsigned char)(0xe0 | (cp >> 12));
                o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
                o[2] = (unsigned char)(0x80 | (cp & 0x3f));
                n += 3;
            } else {
                o[0] = (unsigned char)(0xf0 | (cp >> 18));
                o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3f));
                o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
                o[3] = (unsigned char)(0x80 | (cp & 0x3f));
                n += 4;
            }
            break;
        }
        default:
            P->p = p - 1;
            return perr(P, "invalid escape \\%c", x);
        }
    }
    if (!scratch_room(P, n + 1))
        return od_error_set(P->err, OD_ENOMEM, "out of memory parsing a string");
    P->scratch[n] = '\0';
    P->p = p;
    *outlen = n;
    return OD_OK;
}

/* ---- the numeric fast path --------------------------------------------- */

static void set_deferred(char **slot, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_deferred(char **slot, const char *fmt, ...)
{
    if (*slot)
        return; /* the first problem is the one worth reporting */
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    *slot = strdup(msg);
}

typedef enum { EL_NUM, EL_BOOL, EL_NONFINITE } el_kind;

typedef struct element {
    el_kind kind;
    od_num num;     /* EL_NUM */
    bool b;         /* EL_BOOL */
    double nf;      /* EL_NONFINITE: NaN or +-inf */
} element;

/* Reads one leaf of a data array. Returns false to bail out to the generic
 * parser (not an error by itself). */
static bool read_element(parser *P, element *el)
{
    const char *p = P->p, *e = P->end;
    char c = *p;
    if (c == '-' || (c >= '0' && c <= '9')) {
        if (c == '-' && p + 1 < e && p[1] == 'I') {
            if (e - p >= 9 && memcmp(p, "-Infinity", 9) == 0) {
                el->kind = EL_NONFINITE;
                el->nf = -INFINITY;
                P->p = p + 9;
                return true;
            }
            return false;
        }
        const char *q = od_scan_number(p, e, &el->num);
        if (!q)
            return false; /* the generic parser reports the bad number */
        el->kind = EL_NUM;
        P->p = q;
        return true;
    }
    if (c == 't' && e - p >= 4 && memcmp(p, "true", 4) == 0) {
        el->kind = EL_BOOL;
        el->b = true;
        P->p = p + 4;
        return true;
    }
    if (c == 'f' && e - p >= 5 && memcmp(p, "false", 5) == 0) {
        el->kind = EL_BOOL;
        el->b = false;
        P->p = p + 5;
        return true;
    }
    if (c == 'N' && e - p >= 3 && memcmp(p, "NaN", 3) == 0) {
        el->kind = EL_NONFINITE;
        el->nf = NAN;
        P->p = p + 3;
        return true;
    }
    if (c == 'I' && e - p >= 8 && memcmp(p, "Infinity", 8) == 0) {
        el->kind = EL_NONFINITE;
        el->nf = INFINITY;
        P->p = p + 8;
        return true;
    }
    if (c == '"') { /* the strings our encoder writes for non-finite values */
        static const struct { const char *s; double v; } names[] = {
            {"\"NaN\"", NAN},        {"\"nan\"", NAN},        {"\"Infinity\"", INFINITY},
            {"\"-Infinity\"", -INFINITY}, {"\"inf\"", INFINITY}, {"\"-inf\"", -INFINITY},
        };
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
            size_t l = strlen(names[i].s);
            if ((size_t)(e - p) >= l && memcmp(p, names[i].s, l) == 0) {
                el->kind = EL_NONFINITE;
                el->nf = names[i].v;
                P->p = p + l;
                return true;
            }
        }
    }
    return false;
}

static void num_text(const od_num *n, char *buf, size_t cap)
{
    size_t l = (size_t)(n->end - n->start);
    if (l >= cap)
        l = cap - 1;
    memcpy(buf, n->start, l);
    buf[l] = '\0';
}

/* Stores el as element idx of a typed buffer. */
static void store_typed(od_numarr *A, int64_t idx, const element *el)
{
    void *d = A->data;
    od_dtype dt = A->dtype;
    char txt[40];
    if (dt == OD_FLOAT32 || dt == OD_FLOAT64 || dt == OD_FLOAT16 || dt == OD_BFLOAT16) {
        double v = el->kind == EL_NUM ? el->num.d : el->kind == EL_BOOL ? (double)el->b : el->nf;
        switch (dt) {
        case OD_FLOAT32:
            ((float *)d)[idx] = el->kind == EL_NUM ? od_num_to_f32(&el->num) : (float)v;
            break;
        case OD_FLOAT64: ((double *)d)[idx] = v; break;
        case OD_FLOAT16:
            ((uint16_t *)d)[idx] = od_float_to_half(el->kind == EL_NUM ? od_num_to_f32(&el->num)
                                                                       : (float)v);
            break;
        default:
            ((uint16_t *)d)[idx] = od_float_to_bf16(el->kind == EL_NUM ? od_num_to_f32(&el->num)
                                                                       : (float)v);
            break;
        }
        return;
    }
    if (dt == OD_BOOL) {
        bool b = el->kind == EL_BOOL ? el->b : el->kind == EL_NUM ? el->num.d != 0 : true;
        ((uint8_t *)d)[idx] = b;
        return;
    }
    /* integers */
    int64_t v = 0;
    if (el->kind == EL_BOOL) {
        v = el->b;
    } else if (el->kind == EL_NONFINITE) {
        set_deferred(&A->error, "element %lld is %s, which has no %s value", (long long)idx,
                     isnan(el->nf) ? "NaN" : "infinite", od_dtype_name(dt));
    } else if (el->num.is_int) {
        v = el->num.i;
    } else if (el->num.integral && el->num.d >= -9223372036854775808.0 &&
               el->num.d < 9223372036854775808.0) {
        v = (int64_t)el->num.d;
    } else {
        num_text(&el->num, txt, sizeof txt);
        set_deferred(&A->error, "element %lld is %s, not an integer as %s needs", (long long)idx,
                     txt, od_dtype_name(dt));
    }
    int64_t lo, hi;
    switch (dt) {
    case OD_UINT8: lo = 0; hi = UINT8_MAX; break;
    case OD_INT8: lo = INT8_MIN; hi = INT8_MAX; break;
    case OD_INT16: lo = INT16_MIN; hi = INT16_MAX; break;
    case OD_INT32: lo = INT32_MIN; hi = INT32_MAX; break;
    default: lo = INT64_MIN; hi = INT64_MAX; break;
    }
    if (v < lo || v > hi) {
        set_deferred(&A->error, "element %lld is %lld, out of range for %s", (long long)idx,
                     (long long)v, od_dtype_name(dt));
        v = 0;
    }
    switch (dt) {
    case OD_UINT8: ((uint8_t *)d)[idx] = (uint8_t)v; break;
    case OD_INT8: ((int8_t *)d)[idx] = (int8_t)v; break;
    case OD_INT16: ((int16_t *)d)[idx] = (int16_t)v; break;
    case OD_INT32: ((int32_t *)d)[idx] = (int32_t)v; break;
    default: ((int64_t *)d)[idx] = v; break;
    }
}

/* Stores el into an untyped buffer (int64 while every element is a bool or
 * an integer, then double). */
static void store_auto(od_numarr *A, int64_t idx, const element *el, bool *all_bool)
{
    bool is_intlike = el->kind == EL_BOOL || (el->kind == EL_NUM && el->num.is_int);
    if (el->kind != EL_BOOL)
        *all_bool = false;
    if (A->kind != OD_NA_FLOAT && !is_intlike) {
        int64_t *iv = A->data;
        double *dv = A->data;
        for (int64_t i = 0; i < idx; i++)
            dv[i] = (double)iv[i]; /* same 8 bytes, converted in place */
        A->kind = OD_NA_FLOAT;
    }
    if (A->kind == OD_NA_FLOAT) {
        ((double *)A->data)[idx] = el->kind == EL_BOOL ? (double)el->b
                                  : el->kind == EL_NUM ? el->num.d : el->nf;
    } else {
        ((int64_t *)A->data)[idx] = el->kind == EL_BOOL ? el->b : el->num.i;
        if (el->kind != EL_BOOL)
            A->kind = OD_NA_INT;
    }
}

/* Scans a data array at P->p ('['). Returns 1 with *ph set, 0 to bail out
 * (P->p restored), -1 on error. */
static int scan_data(parser *P, od_dtype hint, int64_t prealloc, json_t **ph)
{
    const char *start = P->p;
    const od_proto_limits *lim = P->lim;
    bool typed = hint != OD_NUM_DTYPES;
    size_t esz = typed ? od_dtype_size(hint) : 8;
    /* element size of the float fast path, 0 when there is none */
    int fast = hint == OD_FLOAT32 ? 4 : hint == OD_FLOAT64 ? 8 : 0;
    int64_t cap = prealloc > 0 ? prealloc : 16;
    od_numarr A;
    memset(&A, 0, sizeof A);
    A.typed = typed;
    A.dtype = hint;
    A.kind = OD_NA_BOOL;
    A.data = malloc((size_t)cap * esz);
    if (!A.data) {
        od_error_set(P->err, OD_ENOMEM, "out of memory for %lld tensor elements", (long long)cap);
        return -1;
    }
    bool all_bool = true;
    int64_t cnt[OD_MAX_DIMS], shape[OD_MAX_DIMS];
    for (int i = 0; i < OD_MAX_DIMS; i++)
        shape[i] = -1;
    int d = 0, leaf = -1, maxd = 0;
    int64_t n = 0;
    element el;

    for (;;) {
        skip_ws(P);
        if (P->p >= P->end)
            goto syntax;
        if (*P->p == '[') {
            if (leaf >= 0 && d >= leaf)
                goto ragged;
            if (d >= lim->max_rank) {
                od_error_set(P->err, OD_ETOOLARGE,
                             "tensor data nested deeper than %d dimensions (the rank limit)",
                             lim->max_rank);
                goto fail;
            }
            if (d > 0)
                cnt[d - 1]++;
            cnt[d++] = 0;
            if (d > maxd)
                maxd = d;
            P->p++;
            skip_ws(P);
            if (P->p < P->end && *P->p == ']')
                goto close;
            continue;
        }
        if (leaf < 0) {
            if (maxd > d)
                goto ragged;
            leaf = d;
        } else if (d != leaf) {
            goto ragged;
        }
        if (fast != 0 && n < cap && n < lim->max_elements) {
            /* The common case, a run of plain numbers for a float tensor:
             * each is converted straight into the buffer (no od_num, no
             * double for a float). Anything else (NaN, true, a nested
             * list, a bad token) leaves the run for the general path below,
             * which then sees exactly what it would have seen. */
            int64_t max = (cap < lim->max_elements ? cap : lim->max_elements) - n;
            int64_t got = fast == 4 ? od_scan_f32_run(&P->p, P->end, (float *)A.data + n, max)
                                    : od_scan_f64_run(&P->p, P->end, (double *)A.data + n, max);
            if (got > 0) {
                n += got;
                cnt[d - 1] += got;
                goto after;
            }
        }
        if (!read_element(P, &el))
            goto bail;
        if (n == lim->max_elements) {
            od_error_set(P->err, OD_ETOOLARGE,
                         "tensor data has more than %lld elements (the limit per tensor)",
                         (long long)lim->max_elements);
            goto fail;
        }
        if (n == cap) {
            int64_t ncap = cap * 2 < lim->max_elements ? cap * 2 : lim->max_elements;
            void *nd = realloc(A.data, (size_t)ncap * esz);
            if (!nd) {
                od_error_set(P->err, OD_ENOMEM, "out of memory for %lld tensor elements",
                             (long long)ncap);
                goto fail;
            }
            A.data = nd;
            cap = ncap;
        }
        if (typed)
            store_typed(&A, n, &el);
        else
            store_auto(&A, n, &el, &all_bool);
        n++;
        cnt[d - 1]++;
    after:
        skip_ws(P);
        if (P->p >= P->end)
            goto syntax;
        if (*P->p == ',') {
            P->p++;
            continue;
        }
        if (*P->p != ']')
            goto syntax;
        goto close;
    close:
        P->p++;
        if (shape[d - 1] < 0)
            shape[d - 1] = cnt[d - 1];
        else if (shape[d - 1] != cnt[d - 1])
            goto ragged;
        if (--d == 0)
            break;
        goto after;
    }
    A.n = n;
    A.ndim = leaf >= 0 ? leaf : maxd;
    memcpy(A.shape, shape, sizeof(int64_t) * (size_t)A.ndim);
    if (!typed && all_bool && n > 0)
        A.kind = OD_NA_BOOL;
    else if (!typed && A.kind == OD_NA_BOOL)
        A.kind = n == 0 ? OD_NA_FLOAT : OD_NA_INT; /* [] is float32, like torch.tensor([]) */
    od_json_doc *doc = P->doc;
    if (doc->narrs == doc->carrs) {
        int nc = doc->carrs ? doc->carrs * 2 : 2; /* 2: a binary op; 8 (1.4 KiB) would be a large-bin malloc */
        od_numarr *na = realloc(doc->arrs, sizeof *na * (size_t)nc);
        if (!na) {
            od_error_set(P->err, OD_ENOMEM, "out of memory");
            goto fail;
        }
        doc->arrs = na;
        doc->carrs = nc;
    }
    A.ph = json_object();
    if (!A.ph) {
        od_error_set(P->err, OD_ENOMEM, "out of memory");
        goto fail;
    }
    doc->arrs[doc->narrs++] = A;
    *ph = json_incref(A.ph); /* one reference for the tree, one for the doc */
    return 1;

ragged:
    /* valid JSON all the same: the generic parser builds it, and the tensor
     * decoder reports the raggedness with the argument's name */
syntax:
    /* let the generic parser produce the precise message */
bail:
    free(A.data);
    free(A.error);
    P->p = start;
    return 0;
fail:
    free(A.data);
    free(A.error);
    return -1;
}

/* ---- generic values ---------------------------------------------------- */

static od_status parse_value(parser *P, json_t **out);

static od_status add_binobj(parser *P, json_t *obj)
{
    od_json_doc *doc = P->doc;
    if (doc->nbin == doc->cbin) {
        int nc = doc->cbin ? doc->cbin * 2 : 8;
        json_t **nb = realloc(doc->binobjs, sizeof *nb * (size_t)nc);
        if (!nb)
            return od_error_set(P->err, OD_ENOMEM, "out of memory");
        doc->binobjs = nb;
        doc->cbin = nc;
    }
    doc->binobjs[doc->nbin++] = json_incref(obj); /* owned: the tree may drop it */
    return OD_OK;
}

static bool top_key_ok(const char *const *keys, const char *key, size_t klen)
{
    for (; *keys; keys++)
        if (strlen(*keys) == klen && !memcmp(*keys, key, klen))
            return true;
    return false;
}

/* An unknown top-level field, named before its value costs anything. */
static od_status unknown_field(parser *P, const char *key)
{
    char list[256] = "";
    size_t n = 0;
    for (const char *const *k = P->lim->top_keys; *k && n < sizeof list; k++)
        n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", n ? ", " : "", *k);
    return od_error_set(P->err, OD_EINVAL, "unknown field '%.64s' (expected %s)", key, list);
}

static od_status parse_object(parser *P, json_t **out)
{
    if (++P->depth > P->lim->max_depth)
        return perr(P, "nesting deeper than %d levels", P->lim->max_depth);
    json_t *obj = json_object();
    if (!obj)
        return od_error_set(P->err, OD_ENOMEM, "out of memory");
    P->p++;
    od_dtype hint = OD_NUM_DTYPES;
    int64_t numel_hint = -1;
    json_t *params = NULL; /* the "parameters" member (borrowed) */
    od_status st;
    skip_ws(P);
    if (P->p < P->end && *P->p == '}') {
        P->p++;
        goto done;
    }
    for (;;) {
        skip_ws(P);
        if (P->p >= P->end || *P->p != '"') {
            st = perr(P, "expected a string key");
            goto fail;
        }
        size_t klen;
        if ((st = parse_string(P, &klen)) != OD_OK)
            goto fail;
        char kbuf[64];
        char *key = klen < sizeof kbuf ? kbuf : strdup(P->scratch);
        if (!key) {
            st = od_error_set(P->err, OD_ENOMEM, "out of memory");
            goto fail;
        }
        if (key == kbuf)
            memcpy(kbuf, P->scratch, klen + 1);
        skip_ws(P);
        if (P->p >= P->end || *P->p != ':') {
            if (key != kbuf)
                free(key);
            st = perr(P, "expected ':' after an object key");
            goto fail;
        }
        if (P->depth == 1 && P->lim->top_keys && !top_key_ok(P->lim->top_keys, key, klen)) {
            st = unknown_field(P, key);
            if (key != kbuf)
                free(key);
            goto fail;
        }
        P->p++;
        skip_ws(P);
        json_t *val = NULL;
        st = OD_OK;
        if (klen == 4 && memcmp(key, "data", 4) == 0 && P->p < P->end && *P->p == '[') {
            /* every element takes at least two bytes of text ("1,"): a
             * declared shape never makes us reserve more than the body holds */
            int64_t room = (int64_t)(P->end - P->p) / 2 + 1;
            int r = scan_data(P, hint, numel_hint < room ? numel_hint : room, &val);
            if (r < 0)
                st = P->err ? P->err->status : OD_EINVAL;
            else if (r == 0)
                st = parse_value(P, &val);
        } else {
            st = parse_value(P, &val);
        }
        if (st != OD_OK) {
            if (key != kbuf)
                free(key);
            goto fail;
        }
        if ((klen == 5 && memcmp(key, "dtype", 5) == 0) ||
            (klen == 8 && memcmp(key, "datatype", 8) == 0)) {
            if (json_is_string(val))
                hint = od_proto_dtype(json_string_value(val));
        } else if (klen == 5 && memcmp(key, "shape", 5) == 0 && json_is_array(val)) {
            /* a size hint only; the decoder validates the shape */
            int64_t numel = 1;
            size_t i;
            json_t *dim;
            json_array_foreach(val, i, dim) {
                json_int_t v = json_is_integer(dim) ? json_integer_value(dim) : -1;
                if (v < 0 || (v > 0 && numel > P->lim->max_elements / v)) {
                    numel = -1;
                    break;
                }
                numel *= v;
            }
            numel_hint = numel <= P->lim->max_elements ? numel : -1;
        }
        if (klen == 10 && memcmp(key, "parameters", 10) == 0)
            params = val;
        /* A repeated key is refused, as RFC 8259 allows and Python's
         * json.loads(object_pairs_hook) users expect: jansson replaces the
         * first value (the document's side tables hold references of their
         * own, so nothing they point to is freed), and the object does not
         * grow. Found from the size rather than by a lookup before each key. */
        size_t size = json_object_size(obj);
        int rc = json_object_setn_new_nocheck(obj, key, klen, val);
        if (rc == 0 && json_object_size(obj) == size)
            st = perr(P, "duplicate key '%.64s' in an object", key);
        if (key != kbuf)
            free(key);
        if (rc != 0) {
            st = od_error_set(P->err, OD_ENOMEM, "out of memory");
            goto fail;
        }
        if (st != OD_OK)
            goto fail;
        skip_ws(P);
        if (P->p < P->end && *P->p == ',') {
            P->p++;
            continue;
        }
        if (P->p < P->end && *P->p == '}') {
            P->p++;
            break;
        }
        st = perr(P, "expected ',' or '}' in an object");
        goto fail;
    }
done:
    if (json_is_object(params) && json_object_get(params, "binary_data_size")) {
        if ((st = add_binobj(P, obj)) != OD_OK)
            goto fail;
    }
    P->depth--;
    *out = obj;
    return OD_OK;
fail:
    json_decref(obj);
    return st;
}

static od_status parse_array(parser *P, json_t **out)
{
    if (++P->depth > P->lim->max_depth)
        return perr(P, "nesting deeper than %d levels", P->lim->max_depth);
    json_t *arr = json_array();
    if (!arr)
        return od_error_set(P->err, OD_ENOMEM, "out of memory");
    P->p++;
    od_status st;
    skip_ws(P);
    if (P->p < P->end && *P->p == ']') {
        P->p++;
        goto done;
    }
    for (;;) {
        json_t *val = NULL;
        if ((st = parse_value(P, &val)) != OD_OK)
            goto fail;
        if (json_array_append_new(arr, val) != 0) {
            st = od_error_set(P->err, OD_ENOMEM, "out of memory");
            goto fail;
        }
        skip_ws(P);
        if (P->p < P->end && *P->p == ',') {
            P->p++;
            continue;
        }
        if (P->p < P->end && *P->p == ']') {
            P->p++;
            break;
        }
        st = perr(P, "expected ',' or ']' in an array");
        goto fail;
    }
done:
    P->depth--;
    *out = arr;
    return OD_OK;
fail:
    json_decref(arr);
    return st;
}

static od_status parse_value(parser *P, json_t **out)
{
    /* Each value costs a jansson node (~100 bytes for "{}"): bound them so
     * the heap a request makes stays proportional to a fixed budget. */
    if (P->lim->max_values && ++P->values > P->lim->max_values)
        return od_error_set(P->err, OD_ETOOLARGE,
                            "the request holds more than %lld JSON values outside tensor \"data\" "
                            "arrays (--max-json-values)",
                            (long long)P->lim->max_values);
    skip_ws(P);
    if (P->p >= P->end)
        return perr(P, "unexpected end of input");
    const char *p = P->p, *e = P->end;
    json_t *v = NULL;
    switch (*p) {
    case '{': return parse_object(P, out);
    case '[': return parse_array(P, out);
    case '"': {
        size_t n;
        od_status st = parse_string(P, &n);
        if (st != OD_OK)
            return st;
        v = json_stringn_nocheck(P->scratch, n);
        break;
    }
    case 't':
        if (e - p < 4 || memcmp(p, "true", 4) != 0)
            return perr(P, "invalid literal");
        P->p += 4;
        v = json_true();
        break;
    case 'f':
        if (e - p < 5 || memcmp(p, "false", 5) != 0)
            return perr(P, "invalid literal");
        P->p += 5;
        v = json_false();
        break;
    case 'n':
        if (e - p < 4 || memcmp(p, "null", 4) != 0)
            return perr(P, "invalid literal");
        P->p += 4;
        v = json_null();
        break;
    default: {
        od_num num;
        const char *q = od_scan_number(p, e, &num);
        if (!q)
            return perr(P, "unexpected character '%s%c'", (unsigned char)*p < 0x20 ? "\\x" : "",
                        (unsigned char)*p < 0x20 ? '?' : *p);
        if (!num.is_int && !isfinite(num.d))
            return perr(P, "number %.*s is out of range for a double", (int)(q - p < 40 ? q - p : 40), p);
        P->p = q;
        v = num.is_int ? json_integer(num.i) : json_real(num.d);
        break;
    }
    }
    if (!v)
        return od_error_set(P->err, OD_ENOMEM, "out of memory");
    *out = v;
    return OD_OK;
}

od_status od_json_parse(const char *text, size_t len, const od_proto_limits *lim,
                        od_json_doc **out, od_error *err)
{
    *out = NULL;
    od_proto_limits dl = od_proto_default_limits();
    if (!lim)
        lim = &dl;
    od_json_doc *doc = calloc(1, sizeof *doc);
    if (!doc)
        return od_error_set(err, OD_ENOMEM, "out of memory");
    parser P = {.start = text, .p = text, .end = text + len, .lim = lim, .doc = doc, .err = err};
    skip_ws(&P);
    od_status st;
    if (P.p >= P.end) {
        st = od_error_set(err, OD_EINVAL, "empty body: expected a JSON object");
        goto fail;
    }
    if ((st = parse_value(&P, &doc->root)) != OD_OK)
        goto fail;
    skip_ws(&P);
    if (P.p != P.end) {
        st = perr(&P, "trailing characters after the JSON value");
        goto fail;
    }
    free(P.scratch);
    *out = doc;
    return OD_OK;
fail:
    free(P.scratch);
    od_json_doc_free(doc);
    return st;
}

void od_json_doc_free(od_json_doc *doc)
{
    if (!doc)
        return;
    json_decref(doc->root);
    for (int i = 0; i < doc->narrs; i++) {
        json_decref(doc->arrs[i].ph);
        free(doc->arrs[i].data);
        free(doc->arrs[i].error);
    }
    free(doc->arrs);
    for (int i = 0; i < doc->nbin; i++)
        json_decref(doc->binobjs[i]);
    free(doc->binobjs);
    free(doc->binoff);
    free(doc->binsize);
    free(doc);
}

json_t *od_json_root(const od_json_doc *doc) { return doc->root; }

od_numarr *od_doc_numarr(const od_json_doc *doc, const json_t *ph)
{
    for (int i = 0; i < doc->narrs; i++)
        if (doc->arrs[i].ph == ph)
            return &doc->arrs[i];
    return NULL;
}

int od_doc_binary_index(const od_json_doc *doc, const json_t *obj)
{
    if (!doc->attached)
        return -1;
    for (int i = 0; i < doc->nbin; i++)
        if (doc->binobjs[i] == obj)
            return i;
    return -1;
}

int od_json_binary_count(const od_json_doc *doc) { return doc->attached ? doc->nbin : 0; }

od_status od_json_attach_binary(od_json_doc *doc, od_blob *blob, size_t offset, size_t len,
                                od_error *err)
{
    free(doc->binoff);
    free(doc->binsize);
    doc->binoff = doc->binsize = NULL;
    doc->attached = false;
    if (doc->nbin > 0) {
        doc->binoff = malloc(sizeof(size_t) * (size_t)doc->nbin);
        doc->binsize = malloc(sizeof(size_t) * (size_t)doc->nbin);
        if (!doc->binoff || !doc->binsize)
            return od_error_set(err, OD_ENOMEM, "out of memory");
    }
    size_t off = 0;
    for (int i = 0; i < doc->nbin; i++) {
        json_t *params = json_object_get(doc->binobjs[i], "parameters");
        json_t *sz = json_object_get(params, "binary_data_size");
        json_t *name = json_object_get(doc->binobjs[i], "name");
        const char *nm = json_is_string(name) ? json_string_value(name) : "";
        if (!json_is_integer(sz) || json_integer_value(sz) < 0)
            return od_error_set(err, OD_EINVAL,
                                "binary tensor %d%s%s%s: parameters.binary_data_size must be a "
                                "non-negative integer, got %s",
                                i, *nm ? " ('" : "", nm, *nm ? "')" : "",
                                json_is_integer(sz) ? "a negative number" : od_json_kind(sz));
        size_t s = (size_t)json_integer_value(sz);
        if (s > len - off)
            return od_error_set(err, OD_EINVAL,
                                "binary tensor %d%s%s%s: binary_data_size %zu runs past the end "
                                "of the body (%zu bytes of binary data, %zu already used)",
                                i, *nm ? " ('" : "", nm, *nm ? "')" : "", s, len, off);
        doc->binoff[i] = offset + off;
        doc->binsize[i] = s;
        off += s;
    }
    if (off != len)
        return od_error_set(err, OD_EINVAL,
                            "the body has %zu bytes of binary tensor data after the JSON header, "
                            "but the binary_data_size values add up to %zu",
                            len, off);
    doc->blob = blob;
    doc->attached = true;
    return OD_OK;
}

od_proto_limits od_proto_default_limits(void)
{
    od_proto_limits l = {.max_depth = 64,
                         .max_rank = OD_MAX_DIMS,
                         .max_elements = (int64_t)1 << 28,
                         .max_values = 65536};
    return l;
}

/* ---- blobs --------------------------------------------------------------- */

/* The CPU allocator's blocks are 64-byte aligned; big ones are cached.
 * Not cleared: a body is written as it arrives and read only up to len. */
static void *blob_alloc(size_t bytes)
{
    od_error e;
    return od_cpu_alloc_uninit(bytes, &e);
}

static void blob_free(void *p, size_t bytes) { od_cpu_free(p, bytes); }

od_blob *od_blob_new(size_t cap, size_t align_at)
{
    od_blob *b = malloc(sizeof *b);
    if (!b)
        return NULL;
    size_t pad = (64 - align_at % 64) % 64;
    if (cap > SIZE_MAX - pad - 128) {
        free(b);
        return NULL;
    }
    /* +1 for a NUL after the data, rounded up to the alignment */
    size_t total = (pad + cap + 1 + 63) & ~(size_t)63;
    b->base = blob_alloc(total);
    if (!b->base) {
        free(b);
        return NULL;
    }
    atomic_init(&b->refs, 1);
    b->alloc_bytes = total;
    b->data = (char *)b->base + pad;
    b->len = 0;
    b->cap = cap;
    b->data[0] = '\0';
    return b;
}

void od_blob_retain(od_blob *b) { atomic_fetch_add_explicit(&b->refs, 1, memory_order_relaxed); }

void od_blob_release(od_blob *b)
{
    if (b && atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) == 1) {
        blob_free(b->base, b->alloc_bytes);
        free(b);
    }
}

bool od_blob_grow(od_blob *b, size_t need)
{
    if (need <= b->cap)
        return true;
    size_t pad = (size_t)(b->data - (char *)b->base);
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < need) {
        if (cap > SIZE_MAX / 4)
            return false;
        cap *= 2;
    }
    size_t total = (pad + cap + 1 + 63) & ~(size_t)63;
    void *nb = blob_alloc(total);
    if (!nb)
        return false;
    memcpy((char *)nb + pad, b->data, b->len);
    blob_free(b->base, b->alloc_bytes);
    b->base = nb;
    b->alloc_bytes = total;
    b->data = (char *)nb + pad;
    b->cap = cap;
    return true;
}
