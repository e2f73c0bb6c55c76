/* fuzz_bind.c — argument binding (proto/bind.c) against the real operator
 * table. The input's first line names an operator as a URL would ("add",
 * "add.Tensor", "aten::softmax.int"); the rest is a call body: /v1's
 * {"args": [...], "kwargs": {...}} and/or /v2's {"inputs": [...],
 * "parameters": {...}}. The name resolves the way the server resolves it
 * (a bare name picks the overload whose schema the arguments fit), then
 * binding must succeed with one value per schema argument, or fail with a
 * message and a client's status (never internal), in both decode modes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "od_server.h"

#define FAIL(...) (fprintf(stderr, __VA_ARGS__), abort())

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fz_init_library();
    return 0;
}

static void check(od_status st, const od_error *err, const od_bound *b, const od_op *op, const char *what)
{
    if (st == OD_OK) {
        if (b->op != op || b->nargs != od_op_schema(op)->nargs)
            FAIL("%s: bound %d arguments of %s's %d\n", what, b->nargs, od_op_name(op),
                 od_op_schema(op)->nargs);
        return;
    }
    if (!err->message[0] || st == OD_EINTERNAL || od_status_http(st) >= 500)
        FAIL("%s on %s: %s: '%s'\n", what, od_op_name(op), od_status_code(st), err->message);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nl = memchr(data, '\n', size < 128 ? size : 128);
    if (!nl)
        return 0;
    char name[128];
    size_t nn = (size_t)(nl - data);
    memcpy(name, data, nn);
    name[nn] = '\0';
    if (strlen(name) != nn)
        return 0; /* a NUL in the name: a URL cannot carry one */
    size_t blen = size - nn - 1;
    char *body = malloc(blen ? blen : 1);
    memcpy(body, nl + 1, blen);
    od_proto_limits lim = fz_limits();
    od_json_doc *doc = NULL;
    od_error err;
    od_error_clear(&err);
    if (od_json_parse(body, blen, &lim, &doc, &err) != OD_OK) {
        free(body);
        return 0;
    }
    json_t *root = od_json_root(doc);
    json_t *args = json_object_get(root, "args"), *kwargs = json_object_get(root, "kwargs");
    json_t *inputs = json_object_get(root, "inputs"), *params = json_object_get(root, "parameters");
    const od_op *op = od_resolve_op_for_args(name, args, kwargs, &err);
    if (op) {
        for (int mode = 0; mode < 2; mode++) {
            od_bind_opts bo = {.lim = &lim, .mode = mode ? OD_DECODE_META : OD_DECODE_DATA,
                               .has_device = true, .device = {OD_DEV_CPU, 0}};
            od_bound b;
            od_bound_init(&b);
            od_error_clear(&err);
            /* The shallow kind check picks overloads; it refuses more than
             * binding does on purpose (a number for a Tensor binds as a
             * wrapped number only when no overload's kinds fit), so its
             * answer is not compared with binding's. */
            od_error why;
            (void)od_proto_args_match(op, args, kwargs, &why);
            od_status st = od_proto_bind(op, doc, args, kwargs, &bo, &b, &err);
            check(st, &err, &b, op, "od_proto_bind");
            od_bound_release(&b);
            if (inputs) {
                od_bound_init(&b);
                od_error_clear(&err);
                st = od_proto_bind_oip(op, doc, inputs, params, &bo, &b, &err);
                check(st, &err, &b, op, "od_proto_bind_oip");
                od_bound_release(&b);
            }
        }
    } else if (!err.message[0] || od_status_http(err.status) >= 500) {
        FAIL("od_resolve_op_for_args('%s'): %s without a clean message\n", name, od_status_code(err.status));
    }
    od_json_doc_free(doc);
    free(body);
    return 0;
}
