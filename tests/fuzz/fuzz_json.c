/* fuzz_json.c — the JSON document parser and tensor decoder (proto/json.c,
 * proto/codec.c): any bytes parse or fail with invalid_argument/too_large
 * and a message; every object that looks like a tensor decodes or fails
 * cleanly; a decoded tensor encodes to JSON that decodes back to the same
 * encoding (the codec is its own inverse on everything it produces). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"

#define FAIL(...) (fprintf(stderr, __VA_ARGS__), abort())

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fz_init_library();
    return 0;
}

static void check_error(od_status st, const od_error *err, const char *what)
{
    if (st == OD_OK)
        return;
    if (!err->message[0])
        FAIL("%s: status %s with no message\n", what, od_status_code(st));
    if (st == OD_EINTERNAL)
        FAIL("%s: internal error: %s\n", what, err->message);
}

/* Encodes t, decodes the text again and encodes that: the two texts agree. */
static void round_trip(const od_tensor *t, bool oip)
{
    od_buf a, b;
    od_buf_init(&a);
    od_buf_init(&b);
    od_tensor_to_json(&a, t, NULL, oip);
    if (a.oom)
        FAIL("od_tensor_to_json: out of memory on a small tensor\n");
    od_proto_limits lim = fz_limits();
    od_json_doc *doc = NULL;
    od_error err;
    od_error_clear(&err);
    if (od_json_parse(a.data, a.len, &lim, &doc, &err) != OD_OK)
        FAIL("the encoder's output does not parse: %s\n%.*s\n", err.message, (int)a.len, a.data);
    od_tensor *u = NULL;
    if (od_tensor_from_json(doc, od_json_root(doc), &lim, OD_DECODE_DATA, "round trip", &u, &err) != OD_OK)
        FAIL("the encoder's output does not decode: %s\n%.*s\n", err.message, (int)a.len, a.data);
    od_tensor_to_json(&b, u, NULL, oip);
    if (a.len != b.len || memcmp(a.data, b.data, a.len) != 0)
        FAIL("round trip changed the tensor:\n%.*s\n%.*s\n", (int)a.len, a.data, (int)b.len, b.data);
    od_tensor_release(u);
    od_json_doc_free(doc);
    od_buf_free(&a);
    od_buf_free(&b);
}

static int ntensors;

static void walk(od_json_doc *doc, json_t *v, const od_proto_limits *lim, int depth)
{
    if (depth > 80 || ntensors > 16)
        return;
    if (json_is_object(v)) {
        if (json_object_get(v, "data") || json_object_get(v, "dtype") || json_object_get(v, "datatype") ||
            json_object_get(v, "shape") || json_object_get(v, "parameters")) {
            ntensors++;
            for (int mode = 0; mode < 2; mode++) {
                od_tensor *t = NULL;
                od_error err;
                od_error_clear(&err);
                od_status st = od_tensor_from_json(doc, v, lim, mode ? OD_DECODE_META : OD_DECODE_DATA,
                                                   "argument 'x'", &t, &err);
                check_error(st, &err, "od_tensor_from_json");
                if (st == OD_OK && !t)
                    FAIL("od_tensor_from_json: OK without a tensor\n");
                if (st == OD_OK && mode == 0) {
                    round_trip(t, false);
                    round_trip(t, true);
                }
                od_tensor_release(t);
            }
        }
        const char *k;
        json_t *e;
        json_object_foreach(v, k, e) walk(doc, e, lim, depth + 1);
    } else if (json_is_array(v)) {
        size_t i;
        json_t *e;
        json_array_foreach(v, i, e) walk(doc, e, lim, depth + 1);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* a private copy without a terminator: the parser must respect len */
    char *text = malloc(size ? size : 1);
    memcpy(text, data, size);
    od_proto_limits lim = fz_limits();
    od_json_doc *doc = NULL;
    od_error err;
    od_error_clear(&err);
    od_status st = od_json_parse(text, size, &lim, &doc, &err);
    if (st != OD_OK) {
        if (st != OD_EINVAL && st != OD_ETOOLARGE)
            FAIL("od_json_parse: unexpected status %s: %s\n", od_status_code(st), err.message);
        check_error(st, &err, "od_json_parse");
        if (doc)
            FAIL("od_json_parse: a document on failure\n");
    } else {
        ntensors = 0;
        walk(doc, od_json_root(doc), &lim, 0);
        od_json_doc_free(doc);
    }
    free(text);
    return 0;
}
