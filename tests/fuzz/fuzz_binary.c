/* fuzz_binary.c — the binary tensor data extension's framing (proto/json.c
 * od_json_attach_binary, proto/codec.c), as the server runs it for /v1 and
 * /v2 bodies: the first two bytes are the Inference-Header-Content-Length
 * (little endian; cut to the body), the rest is the body: a JSON header and
 * the tensors' bytes. binary_data_size values that do not add up to the
 * bytes after the header, or that are not non-negative integers, must fail
 * cleanly; every tensor that decodes must lie inside the body (ASan sees
 * every byte read) and hold exactly its dtype's bytes for its shape. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "proto_int.h"

#define FAIL(...) (fprintf(stderr, __VA_ARGS__), abort())

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fz_init_library();
    return 0;
}

static volatile unsigned g_sink; /* keeps the reads of every byte */

static void decode_all(od_json_doc *doc, const od_proto_limits *lim, size_t body_len)
{
    for (int i = 0; i < doc->nbin; i++) {
        od_tensor *t = NULL;
        od_error err;
        od_error_clear(&err);
        od_status st = od_tensor_from_json(doc, doc->binobjs[i], lim, OD_DECODE_DATA, "input", &t, &err);
        if (st != OD_OK) {
            if (!err.message[0] || st == OD_EINTERNAL)
                FAIL("binary tensor %d: %s without a clean message: %s\n", i, od_status_code(st), err.message);
            continue;
        }
        size_t nb = od_tensor_nbytes(t);
        if (nb != doc->binsize[i])
            FAIL("binary tensor %d: %zu bytes for its shape, %zu bytes claimed\n", i, nb, doc->binsize[i]);
        if (doc->binoff[i] + doc->binsize[i] > body_len)
            FAIL("binary tensor %d lies outside the body\n", i);
        /* every element read through the tensor: out of bounds shows in ASan */
        unsigned char *copy = malloc(nb ? nb : 1);
        od_tensor_copy_out(t, copy);
        for (size_t k = 0; k < nb; k++)
            g_sink += copy[k];
        free(copy);
        od_tensor_release(t);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    size_t hdr = (size_t)data[0] | (size_t)data[1] << 8;
    data += 2;
    size -= 2;
    if (hdr > size)
        hdr = size;
    /* the body as the server holds it: a blob whose binary part is aligned */
    od_blob *blob = od_blob_new(size, hdr);
    if (!blob)
        FAIL("od_blob_new failed\n");
    memcpy(blob->data, data, size);
    blob->len = size;
    blob->data[size] = '\0';
    od_proto_limits lim = fz_limits();
    od_json_doc *doc = NULL;
    od_error err;
    od_error_clear(&err);
    if (od_json_parse(blob->data, hdr, &lim, &doc, &err) == OD_OK) {
        od_status st = od_json_attach_binary(doc, blob, hdr, size - hdr, &err);
        if (st == OD_OK) {
            size_t total = 0;
            for (int i = 0; i < doc->nbin; i++) {
                if (doc->binoff[i] != hdr + total)
                    FAIL("binary tensor %d at offset %zu, expected %zu\n", i, doc->binoff[i], hdr + total);
                total += doc->binsize[i];
            }
            if (total != size - hdr)
                FAIL("binary_data_size sums to %zu, the body has %zu bytes after the header\n", total,
                     size - hdr);
            decode_all(doc, &lim, size);
        } else if (st != OD_EINVAL && st != OD_ETOOLARGE) {
            FAIL("od_json_attach_binary: %s: %s\n", od_status_code(st), err.message);
        }
        od_json_doc_free(doc);
    }
    od_blob_release(blob);
    return 0;
}
