/* test_proto_json.c — the request parser, the tensor codec, binary framing
 * and argument binding (proto/json.c, codec.c, bind.c).
 *
 * References: jansson's own parser for generic JSON (documents without a
 * "data" key must parse to equal trees, and both parsers must agree on what
 * is invalid), numpy-free element-by-element checks for tensors (random
 * values, encoded, parsed back bit for bit), and hand-built bodies for the
 * binary framing. Random inputs; the seed comes from OD_TEST_SEED or
 * /dev/urandom and is printed in every failure.
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "od_ops.h"
#include "od_proto.h"
#include "proto_int.h" /* od_tensor_fields_of */

/* Failure messages quote inputs; cutting a long one short is intended. */
#pragma GCC diagnostic ignored "-Wformat-truncation"

#include "test_seed.h"

static const od_proto_limits LIM = {.max_depth = 32, .max_rank = OD_MAX_DIMS, .max_elements = 1 << 20};

/* ---- random generic JSON ---------------------------------------------------- */

static void gen_string(od_buf *b)
{
    static const char *const pieces[] = {"a", "Z", "0", " ", "\\n", "\\\"", "\\\\", "\\/",
                                         "\\u00e9", "\\ud83d\\ude00", "\xc3\xa9", "\xe2\x82\xac",
                                         "\xf0\x9f\x98\x80", "\\t", "key", "\\u0041"};
    od_buf_putc(b, '"');
    int n = (int)(rnd() % 8);
    for (int i = 0; i < n; i++)
        od_buf_puts(b, pieces[rnd() % (sizeof pieces / sizeof pieces[0])]);
    od_buf_putc(b, '"');
}

static void gen_value(od_buf *b, int depth)
{
    int k = (int)(rnd() % (depth > 5 ? 5 : 7));
    switch (k) {
    case 0: od_buf_puts(b, rnd() & 1 ? "true" : "false"); break;
    case 1: od_buf_puts(b, "null"); break;
    case 2: od_buf_printf(b, "%" PRId64, (int64_t)(rnd() >> (rnd() % 64)) * (rnd() & 1 ? 1 : -1)); break;
    case 3: {
        double d = ((double)(int64_t)rnd()) / (double)(1ull << (rnd() % 60));
        od_buf_printf(b, "%.*g", 1 + (int)(rnd() % 17), d);
        break;
    }
    case 4: gen_string(b); break;
    case 5: {
        od_buf_putc(b, '[');
        int n = (int)(rnd() % 5);
        for (int i = 0; i < n; i++) {
            if (i)
                od_buf_puts(b, rnd() % 3 ? "," : " ,\n ");
            gen_value(b, depth + 1);
        }
        od_buf_putc(b, ']');
        break;
    }
    default: {
        od_buf_putc(b, '{');
        int n = (int)(rnd() % 5);
        for (int i = 0; i < n; i++) {
            if (i)
                od_buf_putc(b, ',');
            od_buf_printf(b, "\"k%d\" : ", i);
            gen_value(b, depth + 1);
        }
        od_buf_putc(b, '}');
        break;
    }
    }
}

Test(json, agrees_with_jansson_on_random_documents)
{
    seed_once();
    for (int it = 0; it < 3000; it++) {
        od_buf b;
        od_buf_init(&b);
        gen_value(&b, 0);
        json_error_t je;
        json_t *ref = json_loadb(b.data, b.len, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &je);
        CHECK(ref, "jansson rejects generated text %s: %s", b.data, je.text);
        od_json_doc *doc = NULL;
        od_error err;
        od_status st = od_json_parse(b.data, b.len, &LIM, &doc, &err);
        CHECK(st == OD_OK, "rejects %s: %s", b.data, err.message);
        CHECK(json_equal(ref, od_json_root(doc)), "different tree for %s", b.data);
        json_decref(ref);
        od_json_doc_free(doc);
        od_buf_free(&b);
    }
}

Test(json, agrees_with_jansson_on_broken_documents)
{
    seed_once();
    static const char junk[] = "{}[],:\"\\ \x01\xff\xc3tfn0-.eE+9";
    for (int it = 0; it < 5000; it++) {
        od_buf b;
        od_buf_init(&b);
        gen_value(&b, 0);
        size_t len = b.len;
        if (rnd() & 1) {
            len = len ? (size_t)(rnd() % len) : 0; /* truncated */
        } else if (len) {
            b.data[rnd() % len] = junk[rnd() % (sizeof junk - 1)]; /* one byte changed */
        }
        json_error_t je;
        json_t *ref = json_loadb(b.data, len, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &je);
        od_json_doc *doc = NULL;
        od_error err;
        /* an exactly sized copy: under ASan any read past len is caught */
        char *exact = malloc(len ? len : 1);
        memcpy(exact, b.data, len);
        od_status st = od_json_parse(exact, len, &LIM, &doc, &err);
        free(exact);
        /* jansson refuses integers beyond int64 where we make them reals */
        bool bigint = !ref && strstr(je.text, "too big");
        if (!bigint) {
            CHECK((ref != NULL) == (st == OD_OK), "disagree on '%.*s': jansson %s, ours %s", (int)len,
                  b.data, ref ? "ok" : je.text, st == OD_OK ? "ok" : err.message);
            if (ref)
                CHECK(json_equal(ref, od_json_root(doc)), "different tree for '%.*s'", (int)len, b.data);
            else
                CHECK(err.status == OD_EINVAL && strstr(err.message, "JSON"), "message: %s",
                      err.message);
        }
        json_decref(ref);
        od_json_doc_free(doc);
        od_buf_free(&b);
    }
}

Test(json, rejects_what_it_must)
{
    seed_once();
    const char *bad[] = {"", "   ", "{", "[1,]", "{\"a\":1,}", "01", "1.", "tru", "\"\\x\"",
                         "\"a\x01\"", "\"\\ud800\"", "\"\\udc00x\"", "\"\\u0000\"", "\"\xff\"",
                         "\"\xc0\xaf\"", "\"\xed\xa0\x80\"", "\"\xf4\x90\x80\x80\"", "[1] 2", "NaN",
                         "{\"a\" 1}", "{1:2}", "[\"a\":1]"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        od_json_doc *doc = NULL;
        od_error err;
        od_status st = od_json_parse(bad[i], strlen(bad[i]), &LIM, &doc, &err);
        CHECK(st == OD_EINVAL && doc == NULL, "accepted '%s'", bad[i]);
    }
    /* nesting: 32 is fine, 33 is not, 10000 is not */
    char deep[20001];
    for (int depth = 31; depth <= 33; depth++) {
        memset(deep, '[', (size_t)depth);
        memset(deep + depth, ']', (size_t)depth);
        od_json_doc *doc = NULL;
        od_error err;
        od_status st = od_json_parse(deep, (size_t)depth * 2, &LIM, &doc, &err);
        CHECK((st == OD_OK) == (depth <= 32), "depth %d: %s", depth, st == OD_OK ? "ok" : err.message);
        od_json_doc_free(doc);
    }
    memset(deep, '[', 10000);
    memset(deep + 10000, ']', 10000);
    od_json_doc *doc = NULL;
    od_error err;
    CHECK(od_json_parse(deep, 20000, &LIM, &doc, &err) == OD_EINVAL && strstr(err.message, "nesting"),
          "10000-deep nesting: %s", err.message);
}

/* Objects whose keys come from a small pool (tensor members among them, so
 * "data" arrays take the scanner's path and "parameters" the binary check):
 * a document repeats a key exactly when jansson (rejecting duplicates)
 * refuses it, and ours refuses it too, naming the key, at any depth. */
static void gen_pooled(od_buf *b, int depth, bool *dup)
{
    static const char *const keys[] = {"data", "dtype", "shape", "parameters", "args", "a"};
    if (depth > 3 || rnd() % 3 == 0) {
        static const char *const leaves[] = {"[1, 2.5]", "[[1], [2]]", "\"float32\"", "[2]", "7",
                                             "{\"binary_data_size\": 4}", "null", "[]"};
        od_buf_puts(b, leaves[rnd() % (sizeof leaves / sizeof leaves[0])]);
        return;
    }
    bool obj = rnd() % 4 != 0;
    od_buf_putc(b, obj ? '{' : '[');
    int n = (int)(rnd() % 4);
    unsigned seen = 0;
    for (int i = 0; i < n; i++) {
        if (i)
            od_buf_putc(b, ',');
        if (obj) {
            unsigned k = (unsigned)(rnd() % (sizeof keys / sizeof keys[0]));
            *dup |= (seen >> k & 1) != 0;
            seen |= 1u << k;
            od_buf_printf(b, "\"%s\": ", keys[k]);
        }
        gen_pooled(b, depth + 1, dup);
    }
    od_buf_putc(b, obj ? '}' : ']');
}

Test(json, duplicate_keys_refused_at_any_depth)
{
    seed_once();
    int dups = 0;
    for (int it = 0; it < 4000; it++) {
        od_buf b;
        od_buf_init(&b);
        bool dup = false;
        gen_pooled(&b, 0, &dup);
        json_error_t je;
        json_t *ref = json_loadb(b.data, b.len, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &je);
        od_json_doc *doc = NULL;
        od_error err;
        od_status st = od_json_parse(b.data, b.len, &LIM, &doc, &err);
        CHECK((ref == NULL) == dup, "jansson and the generator disagree on %s: %s", b.data,
              ref ? "ok" : je.text);
        CHECK((st != OD_OK) == dup, "%s %s: %s", dup ? "accepted the duplicate in" : "refused", b.data,
              st == OD_OK ? "ok" : err.message);
        if (dup)
            CHECK(doc == NULL && st == OD_EINVAL && strstr(err.message, "duplicate key '"),
                  "message for %s: %s", b.data, err.message);
        dups += dup;
        json_decref(ref);
        od_json_doc_free(doc);
        od_buf_free(&b);
    }
    CHECK(dups > 400, "only %d of 4000 documents repeated a key", dups);
}

/* ---- tensors through the codec ------------------------------------------------ */

static const od_device CPU = {OD_DEV_CPU, 0};

static od_tensor *random_tensor(od_dtype dt, int ndim, const int64_t *sizes)
{
    od_tensor *t = NULL;
    od_error err;
    cr_assert(od_tensor_empty(sizes, ndim, dt, CPU, &t, &err) == OD_OK, "%s", err.message);
    size_t nb = od_tensor_nbytes(t);
    uint8_t *p = od_tensor_data(t);
    for (size_t i = 0; i < nb; i++)
        p[i] = (uint8_t)rnd();
    int64_t n = od_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) {
        if (dt == OD_BOOL)
            p[i] &= 1;
        if (dt == OD_FLOAT32 && !isfinite(((float *)p)[i]))
            ((float *)p)[i] = (rnd() & 1) ? NAN : -INFINITY; /* encoded as strings */
        if (dt == OD_FLOAT64 && !isfinite(((double *)p)[i]))
            ((double *)p)[i] = 1.25;
        if ((dt == OD_FLOAT16 || dt == OD_BFLOAT16) && (rnd() & 1))
            ((uint16_t *)p)[i] = 0x3c00; /* keep some plain values */
    }
    return t;
}

static bool same_bits(const od_tensor *a, const od_tensor *b)
{
    if (a->dtype != b->dtype || a->ndim != b->ndim)
        return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->sizes[i] != b->sizes[i])
            return false;
    size_t n = od_tensor_nbytes(a);
    const uint8_t *x = od_tensor_data(a), *y = od_tensor_data(b);
    if (a->dtype == OD_FLOAT32) { /* NaN payloads are not kept: compare NaN-ness */
        for (int64_t i = 0; i < od_tensor_numel(a); i++) {
            float u = ((const float *)x)[i], v = ((const float *)y)[i];
            if (isnan(u) ? !isnan(v) : memcmp(&u, &v, 4) != 0)
                return false;
        }
        return true;
    }
    if (a->dtype == OD_FLOAT16 || a->dtype == OD_BFLOAT16) {
        for (int64_t i = 0; i < od_tensor_numel(a); i++) {
            uint16_t u = ((const uint16_t *)x)[i], v = ((const uint16_t *)y)[i];
            bool un = a->dtype == OD_FLOAT16 ? (u & 0x7c00) == 0x7c00 && (u & 0x3ff)
                                             : (u & 0x7f80) == 0x7f80 && (u & 0x7f);
            if (!un && u != v)
                return false;
        }
        return true;
    }
    return n == 0 || memcmp(x, y, n) == 0;
}

Test(codec, encode_then_decode_is_exact_for_every_dtype)
{
    seed_once();
    for (int it = 0; it < 400; it++) {
        od_dtype dt = (od_dtype)(rnd() % OD_NUM_DTYPES);
        int ndim = (int)(rnd() % 4);
        int64_t sizes[4];
        for (int i = 0; i < ndim; i++)
            sizes[i] = (int64_t)(rnd() % 5);
        od_tensor *t = random_tensor(dt, ndim, sizes);
        od_buf b;
        od_buf_init(&b);
        od_buf_puts(&b, "{\"x\":");
        od_tensor_to_json(&b, t, NULL, rnd() & 1);
        od_buf_putc(&b, '}');
        cr_assert(!b.oom);
        od_json_doc *doc = NULL;
        od_error err;
        CHECK(od_json_parse(b.data, b.len, &LIM, &doc, &err) == OD_OK, "%s: %s", b.data, err.message);
        od_tensor *back = NULL;
        CHECK(od_tensor_from_json(doc, json_object_get(od_json_root(doc), "x"), &LIM, OD_DECODE_DATA,
                                  "x", &back, &err) == OD_OK,
              "%s: %s", b.data, err.message);
        CHECK(same_bits(t, back), "round trip of %s differs: %.300s", od_dtype_name(dt), b.data);
        /* every prefix of the text in an exactly sized buffer: refused, never read past */
        for (int k = 0; k < 8 && b.len > 1; k++) {
            size_t cut = (size_t)(rnd() % (b.len - 1)) + 1;
            char *exact = malloc(cut);
            memcpy(exact, b.data, cut);
            od_json_doc *d2 = NULL;
            CHECK(od_json_parse(exact, cut, &LIM, &d2, &err) != OD_OK, "prefix of %zu accepted", cut);
            free(exact);
        }
        od_tensor_release(back);
        od_tensor_release(t);
        od_json_doc_free(doc);
        od_buf_free(&b);
    }
}

/* Decodes text's "x" and returns the status (tensor in *out when ok). */
static od_status decode_x(const char *text, od_tensor **out, od_error *err)
{
    od_json_doc *doc = NULL;
    *out = NULL;
    od_status st = od_json_parse(text, strlen(text), &LIM, &doc, err);
    if (st == OD_OK)
        st = od_tensor_from_json(doc, json_object_get(od_json_root(doc), "x"), &LIM, OD_DECODE_DATA,
                                 "argument 'x'", out, err);
    od_json_doc_free(doc);
    return st;
}

/* od_tensor_fields_of finds, in one walk, exactly the members
 * json_object_get finds by name: random objects whose keys are the names,
 * near misses of them and others. */
Test(codec, tensor_fields_are_the_members_lookups_find)
{
    seed_once();
    static const char *const pool[] = {"ref", "data", "dtype", "shape", "datatype", "parameters",
                                       "requires_grad", "dat", "datas", "Data", "dtyp", "shapes",
                                       "parameter", "requires_gradx", "re", "", "x", "datatypes"};
    enum { NP = sizeof pool / sizeof pool[0] };
    for (int it = 0; it < 2000; it++) {
        json_t *obj = json_object();
        for (int i = 0, n = (int)(rnd() % 10); i < n; i++)
            json_object_set_new(obj, pool[rnd() % NP], json_integer(i));
        od_tensor_fields f;
        od_tensor_fields_of(obj, &f);
        const struct {
            const char *name;
            json_t *got;
        } want[] = {{"ref", f.ref},       {"data", f.data},       {"dtype", f.dtype},
                    {"shape", f.shape},   {"datatype", f.datatype}, {"parameters", f.params},
                    {"requires_grad", f.requires_grad}};
        for (size_t k = 0; k < sizeof want / sizeof want[0]; k++)
            CHECK(want[k].got == json_object_get(obj, want[k].name), "member \"%s\" of %d keys",
                  want[k].name, (int)json_object_size(obj));
        json_decref(obj);
    }
    json_t *notobj[] = {json_array(), json_string("data"), json_null()};
    for (int i = 0; i < 3; i++) {
        od_tensor_fields f;
        memset(&f, 0xab, sizeof f);
        od_tensor_fields_of(notobj[i], &f);
        CHECK(!f.ref && !f.data && !f.dtype && !f.shape && !f.datatype && !f.params && !f.requires_grad,
              "a non-object has members (%d)", i);
        json_decref(notobj[i]);
    }
}

Test(codec, nested_flat_inferred_and_typed_orders_agree)
{
    seed_once();
    int64_t a = (int64_t)(rnd() % 1000) - 500, bb = (int64_t)(rnd() % 1000), c = -(int64_t)(rnd() % 7);
    char texts[6][512];
    snprintf(texts[0], 512, "{\"x\":{\"dtype\":\"int64\",\"shape\":[2,3],\"data\":[%" PRId64 ",%" PRId64 ",%" PRId64 ",1,2,3]}}", a, bb, c);
    snprintf(texts[1], 512, "{\"x\":{\"dtype\":\"int64\",\"shape\":[2,3],\"data\":[[%" PRId64 ",%" PRId64 ",%" PRId64 "],[1,2,3]]}}", a, bb, c);
    snprintf(texts[2], 512, "{\"x\":{\"data\":[[%" PRId64 ",%" PRId64 ",%" PRId64 "],[1,2,3]]}}", a, bb, c);
    snprintf(texts[3], 512, "{\"x\":{\"data\":[[%" PRId64 ",%" PRId64 ",%" PRId64 "],[1,2,3]],\"shape\":[2,3],\"dtype\":\"INT64\"}}", a, bb, c);
    snprintf(texts[4], 512, "{\"x\":{\"datatype\":\"INT64\",\"data\":[%" PRId64 ",%" PRId64 ",%" PRId64 ",1,2,3],\"shape\":[2,3]}}", a, bb, c);
    snprintf(texts[5], 512, "{\"x\":{\"shape\":[2,3],\"data\":[ %" PRId64 " , %" PRId64 " ,%" PRId64 ",1 ,2, 3 ] }}", a, bb, c);
    for (int i = 0; i < 6; i++) {
        od_tensor *t;
        od_error err;
        CHECK(decode_x(texts[i], &t, &err) == OD_OK, "%s: %s", texts[i], err.message);
        CHECK(t->dtype == OD_INT64 && t->ndim == 2 && t->sizes[0] == 2 && t->sizes[1] == 3, "%s", texts[i]);
        const int64_t *d = od_tensor_data(t);
        int64_t want[6] = {a, bb, c, 1, 2, 3};
        for (int k = 0; k < 6; k++)
            CHECK(d[k] == want[k], "%s: element %d is %" PRId64, texts[i], k, d[k]);
        od_tensor_release(t);
    }
    /* inferred dtypes */
    const struct { const char *text; od_dtype dt; } inf[] = {
        {"{\"x\":{\"data\":[true,false]}}", OD_BOOL},  {"{\"x\":{\"data\":[1,2]}}", OD_INT64},
        {"{\"x\":{\"data\":[1,2.5]}}", OD_FLOAT32},    {"{\"x\":{\"data\":[]}}", OD_FLOAT32},
        {"{\"x\":{\"data\":[true,2]}}", OD_INT64},     {"{\"x\":{\"data\":5}}", OD_INT64},
        {"{\"x\":{\"data\":[\"NaN\",1]}}", OD_FLOAT32},
    };
    for (size_t i = 0; i < sizeof inf / sizeof inf[0]; i++) {
        od_tensor *t;
        od_error err;
        CHECK(decode_x(inf[i].text, &t, &err) == OD_OK, "%s: %s", inf[i].text, err.message);
        CHECK(t->dtype == inf[i].dt, "%s: dtype %s", inf[i].text, od_dtype_name(t->dtype));
        od_tensor_release(t);
    }
}

Test(codec, errors_name_the_argument_and_the_problem)
{
    seed_once();
    const struct { const char *text; od_status st; const char *frag; } cases[] = {
        {"{\"x\":{\"dtype\":\"float32\",\"shape\":[2,2],\"data\":[1,2,3]}}", OD_EMISMATCH, "needs 4"},
        {"{\"x\":{\"data\":[[1,2],[3]]}}", OD_EMISMATCH, "ragged"},
        {"{\"x\":{\"data\":[[1,2],3]}}", OD_EMISMATCH, "ragged"},
        {"{\"x\":{\"data\":[1,[2]]}}", OD_EMISMATCH, "ragged"},
        {"{\"x\":{\"data\":[[[]],[1]]}}", OD_EMISMATCH, "ragged"},
        {"{\"x\":{\"dtype\":\"uint8\",\"shape\":[1],\"data\":[256]}}", OD_EMISMATCH, "out of range"},
        {"{\"x\":{\"dtype\":\"int8\",\"shape\":[1],\"data\":[-129]}}", OD_EMISMATCH, "out of range"},
        {"{\"x\":{\"dtype\":\"int32\",\"shape\":[1],\"data\":[0.5]}}", OD_EMISMATCH, "not an integer"},
        {"{\"x\":{\"dtype\":\"int32\",\"shape\":[1],\"data\":[NaN]}}", OD_EMISMATCH, "NaN"},
        {"{\"x\":{\"shape\":[1],\"data\":[1],\"dtype\":\"uint8\"}}", OD_OK, ""},
        {"{\"x\":{\"data\":[1,null]}}", OD_EMISMATCH, "data[1] is null"},
        {"{\"x\":{\"data\":[[1],[\"a\"]]}}", OD_EMISMATCH, "data[1][0] is string"},
        {"{\"x\":{\"dtype\":\"float33\",\"data\":[1]}}", OD_EINVAL, "unknown dtype 'float33'"},
        {"{\"x\":{\"shape\":[1048576,1048576],\"data\":[1]}}", OD_ETOOLARGE, "1099511627776 elements"},
        {"{\"x\":{\"shape\":[4611686018427387904,4],\"data\":[1]}}", OD_ETOOLARGE, "int64"},
        {"{\"x\":{\"shape\":[-1],\"data\":[1]}}", OD_EMISMATCH, "shape[0]"},
        {"{\"x\":{\"shape\":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1],\"data\":[1]}}", OD_ETOOLARGE, "rank 17"},
        {"{\"x\":{\"shape\":[2]}}", OD_EMISMATCH, "no \"data\""},
        {"{\"x\":{\"shape\":[1],\"data\":{}}}", OD_EMISMATCH, "got object"},
        {"{\"x\":[1,2]}", OD_EMISMATCH, "expected a tensor"},
        {"{\"x\":{\"shape\":[1],\"parameters\":{\"binary_data_size\":4},\"dtype\":\"float32\"}}", OD_EINVAL, "no binary data"},
        {"{\"x\":{\"dtype\":\"int64\",\"requires_grad\":true,\"data\":[1]}}", OD_EMISMATCH, "floating point"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        od_tensor *t;
        od_error err;
        od_error_clear(&err);
        od_status st = decode_x(cases[i].text, &t, &err);
        CHECK(st == cases[i].st, "%s: status %s, want %s (%s)", cases[i].text, od_status_code(st),
              od_status_code(cases[i].st), err.message);
        if (st != OD_OK) {
            CHECK(strstr(err.message, cases[i].frag), "%s: message '%s' lacks '%s'", cases[i].text,
                  err.message, cases[i].frag);
            CHECK(strstr(err.message, "argument 'x'") || err.status != OD_EMISMATCH,
                  "%s: message '%s' does not name the argument", cases[i].text, err.message);
        }
        od_tensor_release(t);
    }
}

Test(codec, element_cap_during_the_scan)
{
    seed_once();
    od_proto_limits lim = LIM;
    lim.max_elements = 100;
    od_buf b;
    od_buf_init(&b);
    od_buf_puts(&b, "{\"x\":{\"data\":[");
    for (int i = 0; i < 101; i++)
        od_buf_printf(&b, "%s%d", i ? "," : "", i);
    od_buf_puts(&b, "]}}");
    od_json_doc *doc = NULL;
    od_error err;
    CHECK(od_json_parse(b.data, b.len, &lim, &doc, &err) == OD_ETOOLARGE, "101 elements accepted");
    od_buf_free(&b);
}

/* ---- binary framing -------------------------------------------------------------- */

static od_blob *make_body(const char *header, const void *bin, size_t binlen, size_t *hlen)
{
    *hlen = strlen(header);
    od_blob *blob = od_blob_new(*hlen + binlen, *hlen);
    memcpy(blob->data, header, *hlen);
    memcpy(blob->data + *hlen, bin, binlen);
    blob->len = *hlen + binlen;
    return blob;
}

Test(binary, tensors_share_the_body_when_aligned)
{
    seed_once();
    float v[4];
    for (int i = 0; i < 4; i++)
        v[i] = (float)(int64_t)(rnd() % 1000) / 8.0f;
    const char *h = "{\"args\":[{\"dtype\":\"float32\",\"shape\":[2,2],\"parameters\":{\"binary_data_size\":16}}]}";
    size_t hlen;
    od_blob *blob = make_body(h, v, 16, &hlen);
    od_json_doc *doc = NULL;
    od_error err;
    cr_assert(od_json_parse(blob->data, hlen, &LIM, &doc, &err) == OD_OK);
    cr_assert(od_json_attach_binary(doc, blob, hlen, 16, &err) == OD_OK, "%s", err.message);
    cr_assert(od_json_binary_count(doc) == 1);
    od_tensor *t = NULL;
    json_t *obj = json_array_get(json_object_get(od_json_root(doc), "args"), 0);
    cr_assert(od_tensor_from_json(doc, obj, &LIM, OD_DECODE_DATA, "a", &t, &err) == OD_OK, "%s", err.message);
    CHECK(od_tensor_data(t) == blob->data + hlen, "aligned binary data was copied");
    CHECK(memcmp(od_tensor_data(t), v, 16) == 0, "values differ");
    od_json_doc_free(doc);
    od_blob_release(blob); /* the tensor keeps the body alive */
    CHECK(((float *)od_tensor_data(t))[3] == v[3], "body freed under the tensor");
    od_tensor_release(t);
}

Test(binary, framing_errors)
{
    seed_once();
    uint8_t bytes[64] = {0};
    const struct { const char *h; size_t binlen; od_status st; const char *frag; } cases[] = {
        {"{\"a\":{\"parameters\":{\"binary_data_size\":16}}}", 8, OD_EINVAL, "runs past the end"},
        {"{\"a\":{\"parameters\":{\"binary_data_size\":8}}}", 16, OD_EINVAL, "add up to 8"},
        {"{\"a\":{\"parameters\":{\"binary_data_size\":-1}}}", 0, OD_EINVAL, "non-negative"},
        {"{\"a\":{\"parameters\":{\"binary_data_size\":\"4\"}}}", 4, OD_EINVAL, "non-negative"},
        {"{\"a\":[{\"parameters\":{\"binary_data_size\":4}},{\"parameters\":{\"binary_data_size\":4}}]}", 8, OD_OK, ""},
        {"{\"a\":1}", 4, OD_EINVAL, "add up to 0"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t hlen;
        od_blob *blob = make_body(cases[i].h, bytes, cases[i].binlen, &hlen);
        od_json_doc *doc = NULL;
        od_error err;
        cr_assert(od_json_parse(blob->data, hlen, &LIM, &doc, &err) == OD_OK);
        od_status st = od_json_attach_binary(doc, blob, hlen, cases[i].binlen, &err);
        CHECK(st == cases[i].st, "%s: %s", cases[i].h, st == OD_OK ? "ok" : err.message);
        if (st != OD_OK)
            CHECK(strstr(err.message, cases[i].frag), "%s: '%s'", cases[i].h, err.message);
        od_json_doc_free(doc);
        od_blob_release(blob);
    }
    /* unaligned data is copied; a size that does not fit the shape is refused */
    int64_t x = (int64_t)rnd();
    uint8_t body[9];
    body[0] = 1;
    memcpy(body + 1, &x, 8);
    const char *h = "{\"a\":[{\"dtype\":\"bool\",\"shape\":[1],\"parameters\":{\"binary_data_size\":1}},"
                    "{\"dtype\":\"int64\",\"shape\":[1],\"parameters\":{\"binary_data_size\":8}},"
                    "{\"dtype\":\"int64\",\"shape\":[2],\"parameters\":{\"binary_data_size\":0}}]}";
    size_t hlen;
    od_blob *blob = make_body(h, body, 9, &hlen);
    od_json_doc *doc = NULL;
    od_error err;
    cr_assert(od_json_parse(blob->data, hlen, &LIM, &doc, &err) == OD_OK);
    cr_assert(od_json_attach_binary(doc, blob, hlen, 9, &err) == OD_OK);
    json_t *arr = json_object_get(od_json_root(doc), "a");
    od_tensor *t = NULL;
    cr_assert(od_tensor_from_json(doc, json_array_get(arr, 1), &LIM, OD_DECODE_DATA, "b", &t, &err) == OD_OK);
    CHECK(*(int64_t *)od_tensor_data(t) == x, "unaligned int64 read back wrong");
    CHECK(((uintptr_t)od_tensor_data(t) & 7) == 0, "unaligned tensor data");
    od_tensor_release(t);
    CHECK(od_tensor_from_json(doc, json_array_get(arr, 2), &LIM, OD_DECODE_DATA, "c", &t, &err) == OD_EMISMATCH &&
              strstr(err.message, "needs 16 bytes"),
          "size/shape mismatch: %s", err.message);
    od_json_doc_free(doc);
    od_blob_release(blob);
}

/* ---- binding against real schemas ---------------------------------------------------- */

static const od_op *op_named(const char *name)
{
    od_error err;
    cr_assert(od_init(&err) == OD_OK, "%s", err.message);
    const od_op *op = od_op_find(name);
    cr_assert(op, "no operator %s", name);
    return op;
}

static od_status bind_text(const od_op *op, const char *text, od_bound *b, od_error *err,
                           od_json_doc **docp)
{
    od_status st = od_json_parse(text, strlen(text), &LIM, docp, err);
    if (st != OD_OK)
        return st;
    json_t *root = od_json_root(*docp);
    od_bind_opts o = {.lim = &LIM, .mode = OD_DECODE_DATA};
    return od_proto_bind(op, *docp, json_object_get(root, "args"), json_object_get(root, "kwargs"), &o, b, err);
}

Test(bind, positional_keyword_defaults_and_errors)
{
    seed_once();
    const od_op *add = op_named("add.Tensor");
    int64_t alpha = (int64_t)(rnd() % 100);
    char text[256];
    snprintf(text, sizeof text, "{\"args\":[{\"data\":[1.5]},{\"data\":[2]}],\"kwargs\":{\"alpha\":%" PRId64 "}}", alpha);
    od_bound b;
    od_bound_init(&b);
    od_error err;
    od_json_doc *doc = NULL;
    CHECK(bind_text(add, text, &b, &err, &doc) == OD_OK, "%s", err.message);
    CHECK(b.nargs == 3 && b.args[0].tag == OD_T_TENSOR && b.args[1].tag == OD_T_TENSOR, "tags");
    CHECK(b.args[2].tag == OD_T_INT && b.args[2].u.i == alpha, "alpha");
    CHECK(b.bytes_in == 4 + 8, "bytes_in %" PRId64, b.bytes_in);
    od_bound_release(&b);
    od_json_doc_free(doc);
    /* default */
    doc = NULL;
    CHECK(bind_text(add, "{\"args\":[{\"data\":[1.5]},{\"data\":[2]}]}", &b, &err, &doc) == OD_OK, "%s", err.message);
    CHECK(b.args[2].tag == OD_T_INT && b.args[2].u.i == 1 && !b.given[2], "default alpha");
    od_bound_release(&b);
    od_json_doc_free(doc);
    const struct { const char *text; const char *frag; } bad[] = {
        {"{\"args\":[{\"data\":[1]}]}", "missing required argument 'other' (position 2)"},
        {"{\"args\":[{\"data\":[1]},\"s\"]}", "argument 'other' (position 2) must be Tensor, not string"},
        {"{\"args\":[{\"data\":[1]},{\"data\":[1]},1]}", "takes 2 positional arguments"},
        {"{\"args\":[{\"data\":[1]},{\"data\":[1]}],\"kwargs\":{\"beta\":1}}", "unexpected keyword argument 'beta'"},
        {"{\"args\":[{\"data\":[1]},{\"data\":[1]}],\"kwargs\":{\"self\":1}}", "multiple values for argument 'self'"},
        {"{\"args\":[{\"data\":[1]},{\"data\":[1]}],\"kwargs\":{\"alpha\":\"x\"}}", "argument 'alpha' must be Scalar, not string"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        doc = NULL;
        od_error_clear(&err);
        od_status st = bind_text(add, bad[i].text, &b, &err, &doc);
        CHECK(st == OD_EMISMATCH && strstr(err.message, bad[i].frag), "%s: %s", bad[i].text, err.message);
        CHECK(strstr(err.message, "aten::add.Tensor"), "message lacks the operator: %s", err.message);
        CHECK(b.nargs == 0, "a failed bind left arguments behind");
        od_json_doc_free(doc);
    }
    /* lists: an int for int[1], a list of tensors */
    const od_op *sum = op_named("sum.dim_IntList");
    doc = NULL;
    CHECK(bind_text(sum, "{\"args\":[{\"data\":[1,2]},1]}", &b, &err, &doc) == OD_OK, "%s", err.message);
    CHECK(b.args[1].tag == OD_T_INT_LIST && b.args[1].u.list.n == 1 && ((int64_t *)b.args[1].u.list.items)[0] == 1, "dim");
    od_bound_release(&b);
    od_json_doc_free(doc);
    const od_op *cat = op_named("cat");
    doc = NULL;
    CHECK(bind_text(cat, "{\"args\":[[{\"data\":[1]},{\"data\":[2,3]}]],\"kwargs\":{\"dim\":0}}", &b, &err, &doc) == OD_OK,
          "%s", err.message);
    CHECK(b.args[0].tag == OD_T_TENSOR_LIST && b.args[0].u.list.n == 2, "tensor list");
    od_bound_release(&b);
    od_json_doc_free(doc);
}

Test(errors, one_mapping_from_status_to_http)
{
    seed_once();
    const struct { od_status st; int http; } m[] = {
        {OD_EINVAL, 400}, {OD_ENOTFOUND, 404}, {OD_EMISMATCH, 422}, {OD_EUNSUPPORTED, 422},
        {OD_ENOKERNEL, 501}, {OD_EUNAVAIL, 503}, {OD_EDEVMEM, 507}, {OD_ENOMEM, 507},
        {OD_ETOOLARGE, 413}, {OD_EINTERNAL, 500},
    };
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++) {
        od_error e;
        od_error_set(&e, m[i].st, "msg \"%d\" \xff", (int)i);
        int http;
        size_t len;
        char *body = od_proto_error(&e, &http, &len);
        CHECK(http == m[i].http, "%s -> %d", od_status_code(m[i].st), http);
        json_error_t je;
        json_t *j = json_loadb(body, len, 0, &je);
        CHECK(j, "error body is not JSON: %s", body);
        json_t *eo = json_object_get(j, "error");
        CHECK(!strcmp(json_string_value(json_object_get(eo, "code")), od_status_code(m[i].st)), "code");
        CHECK(strstr(json_string_value(json_object_get(eo, "message")), "msg \""), "message");
        json_decref(j);
        free(body);
    }
}

/* ---- the float fast path of the data scanner ----------------------------------- */

/* One random element as text: mostly numbers printed every way a client
 * prints them, sometimes the other tokens a float array may hold. Its
 * expected float/double comes from strtof/strtod (or the literal). */
static void gen_float_token(char *buf, size_t cap, bool allow_special)
{
    uint64_t u = rnd();
    double d;
    memcpy(&d, &u, 8);
    if (!isfinite(d) || rnd() % 2)
        d = ldexp((double)(int64_t)(rnd() >> 1), -62 + (int)(rnd() % 8)); /* tensor magnitudes */
    if (!isfinite((float)d))
        d = ldexp(d, -1000); /* float-printing cases below need a finite float */
    switch (allow_special ? rnd() % 12 : rnd() % 8) {
    case 0: snprintf(buf, cap, "%.17g", d); break;
    case 1: snprintf(buf, cap, "%.9g", d); break;
    case 2: snprintf(buf, cap, "%g", d); break;
    case 3: snprintf(buf, cap, "%.*e", (int)(rnd() % 25), d); break;
    case 4: snprintf(buf, cap, "%" PRId64, (int64_t)rnd() >> (rnd() % 64)); break;
    case 5: snprintf(buf, cap, "%.17g", (double)(float)d); break;
    case 6: snprintf(buf, cap, "%.30g", d); break;
    case 7: od_fmt_f32((float)d, buf); break;
    case 8: snprintf(buf, cap, "NaN"); break;
    case 9: snprintf(buf, cap, rnd() & 1 ? "-Infinity" : "\"Infinity\""); break;
    case 10: snprintf(buf, cap, rnd() & 1 ? "true" : "false"); break;
    default: snprintf(buf, cap, "\"-inf\""); break;
    }
}

static double token_value(const char *tok, bool single)
{
    if (!strcmp(tok, "NaN"))
        return NAN;
    if (!strcmp(tok, "-Infinity") || !strcmp(tok, "\"-inf\""))
        return -INFINITY;
    if (!strcmp(tok, "\"Infinity\""))
        return INFINITY;
    if (!strcmp(tok, "true"))
        return 1;
    if (!strcmp(tok, "false"))
        return 0;
    return single ? (double)strtof(tok, NULL) : strtod(tok, NULL);
}

Test(codec, float_fast_path_is_bit_exact)
{
    seed_once();
    static const char *const blanks[] = {"", " ", "\n", "  \t", "\r\n "};
    for (int it = 0; it < 300; it++) {
        bool single = rnd() & 1;
        bool special = rnd() % 3 == 0;
        int rows = 1 + (int)(rnd() % 5), cols = (int)(rnd() % 60);
        bool nested = rnd() & 1, with_shape = rnd() & 1;
        int n = rows * cols;
        double *want = malloc(sizeof(double) * (size_t)(n ? n : 1));
        od_buf b;
        od_buf_init(&b);
        od_buf_printf(&b, "{\"x\":{\"dtype\":\"%s\",", single ? "float32" : "float64");
        if (with_shape) {
            /* a declared shape sizes the buffer; without one it grows */
            if (nested)
                od_buf_printf(&b, "\"shape\":[%d,%d],", rows, cols);
            else
                od_buf_printf(&b, "\"shape\":[%d],", n);
        }
        od_buf_puts(&b, "\"data\":[");
        for (int r = 0; r < rows; r++) {
            if (nested) {
                if (r)
                    od_buf_putc(&b, ',');
                od_buf_puts(&b, blanks[rnd() % 5]);
                od_buf_putc(&b, '[');
            }
            for (int c = 0; c < cols; c++) {
                char tok[128];
                gen_float_token(tok, sizeof tok, special);
                want[r * cols + c] = token_value(tok, single);
                if (c || (!nested && r))
                    od_buf_putc(&b, ',');
                od_buf_puts(&b, blanks[rnd() % 5]);
                od_buf_puts(&b, tok);
                od_buf_puts(&b, blanks[rnd() % 5]);
            }
            if (nested)
                od_buf_putc(&b, ']');
        }
        od_buf_puts(&b, "]}}");
        cr_assert(!b.oom);
        if (nested && cols == 0) { /* [[],[]] has shape [rows, 0]; flat [] is [0] */
            od_buf_free(&b);
            free(want);
            continue;
        }
        od_tensor *t = NULL;
        od_error err;
        CHECK(decode_x(b.data, &t, &err) == OD_OK, "%.300s: %s", b.data, err.message);
        CHECK(od_tensor_numel(t) == n, "%.300s: %lld elements", b.data, (long long)od_tensor_numel(t));
        for (int k = 0; k < n; k++) {
            double got = single ? (double)((const float *)od_tensor_data(t))[k]
                                : ((const double *)od_tensor_data(t))[k];
            CHECK((isnan(got) && isnan(want[k])) || memcmp(&got, &want[k], 8) == 0,
                  "element %d is %a, expected %a (single=%d) in %.400s", k, got, want[k], single,
                  b.data);
        }
        od_tensor_release(t);
        od_buf_free(&b);
        free(want);
    }
}

Test(codec, float_fast_path_keeps_the_errors)
{
    seed_once();
    /* bad tokens inside a typed float array are still reported exactly as
     * the generic parser reports them, and a cut-off array never reads past
     * the end of the text */
    const char *bad[] = {
        "{\"x\":{\"dtype\":\"float32\",\"data\":[1.5, 2., 3]}}",
        "{\"x\":{\"dtype\":\"float32\",\"data\":[1.5, -, 3]}}",
        "{\"x\":{\"dtype\":\"float64\",\"data\":[1.5, 2 3]}}",
        "{\"x\":{\"dtype\":\"float64\",\"data\":[1.5,, 3]}}",
        "{\"x\":{\"dtype\":\"float32\",\"data\":[1.5, 01]}}",
        "{\"x\":{\"dtype\":\"float32\",\"data\":[1.5, 1e]}}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        od_tensor *t = NULL;
        od_error err;
        CHECK(decode_x(bad[i], &t, &err) == OD_EINVAL, "%s accepted", bad[i]);
        CHECK(strstr(err.message, "invalid JSON at byte"), "%s: %s", bad[i], err.message);
        od_tensor_release(t);
    }
    /* a string in a float array: the decoder names the element */
    od_tensor *t = NULL;
    od_error err;
    CHECK(decode_x("{\"x\":{\"dtype\":\"float32\",\"data\":[1, 2, \"a\"]}}", &t, &err) ==
              OD_EMISMATCH && strstr(err.message, "data[2]") && strstr(err.message, "argument 'x'"),
          "%s", err.message);
    od_tensor_release(t);
    /* more elements than the shape says: the count is checked after the scan */
    CHECK(decode_x("{\"x\":{\"dtype\":\"float32\",\"shape\":[2],\"data\":[1, 2, 3]}}", &t, &err) ==
              OD_EMISMATCH, "%s", err.message);
    od_tensor_release(t);
    /* prefixes of a long float array, in exactly sized buffers */
    od_buf b;
    od_buf_init(&b);
    od_buf_puts(&b, "{\"x\":{\"dtype\":\"float32\",\"data\":[");
    for (int k = 0; k < 50; k++)
        od_buf_printf(&b, "%s%.17g", k ? ", " : "", (double)(rnd() >> 11) * 0x1p-53);
    od_buf_puts(&b, "]}}");
    for (int k = 0; k < 200; k++) {
        size_t cut = (size_t)(rnd() % (b.len - 1)) + 1;
        char *exact = malloc(cut);
        memcpy(exact, b.data, cut);
        od_json_doc *doc = NULL;
        CHECK(od_json_parse(exact, cut, &LIM, &doc, &err) != OD_OK, "prefix of %zu accepted", cut);
        free(exact);
    }
    od_buf_free(&b);
}

/* od_buf_json_strn finds runs of plain bytes 8 at a time: every byte that
 * needs escaping must still be escaped wherever it sits in a word. Strings
 * of valid UTF-8 with quotes, backslashes and control bytes at random
 * places read back through jansson as themselves; a stray byte from 0x80
 * becomes U+FFFD. */
Test(buf, json_string_escapes_every_byte_that_needs_it)
{
    seed_once();
    static const char *const pieces[] = {"a", "b", "~", " ", "\"", "\\", "\n", "\t", "\r", "\x01",
                                         "\x1f", "\x7f", "\xc3\xa9", "\xe2\x82\xac",
                                         "\xf0\x9f\x98\x80"};
    const int np = (int)(sizeof pieces / sizeof pieces[0]);
    for (int t = 0; t < 4000; t++) {
        char s[256];
        size_t n = 0;
        int len = (int)(rnd() % 40);
        for (int k = 0; k < len; k++) {
            /* mostly plain bytes, so long plain runs meet a special one anywhere */
            const char *p = rnd() % 4 ? pieces[rnd() % 3] : pieces[rnd() % (uint64_t)np];
            memcpy(s + n, p, strlen(p));
            n += strlen(p);
        }
        od_buf b;
        od_buf_init(&b);
        od_buf_json_strn(&b, s, n);
        json_error_t e;
        json_t *j = json_loadb(b.data, b.len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &e);
        CHECK(j && json_is_string(j), "not a JSON string: %s (%s)", b.data, e.text);
        CHECK(json_string_length(j) == n && !memcmp(json_string_value(j), s, n),
              "round trip of %zu bytes changed: %s", n, b.data);
        json_decref(j);
        od_buf_free(&b);
    }
    od_buf b;
    od_buf_init(&b);
    od_buf_json_strn(&b, "abcdefg\xff" "abcdefgh", 16);
    CHECK(!strcmp(b.data, "\"abcdefg\\ufffdabcdefgh\""), "stray byte: %s", b.data);
    od_buf_free(&b);
}
