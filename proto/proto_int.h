/* proto_int.h — private to proto/: the parsed document's side tables.
 *
 * Invariants: a numeric array's placeholder is an empty jansson object that
 * only this record points to, so a user-written "data": {} is never taken
 * for one. Records live as long as the document; a tensor that takes a
 * record's buffer sets data to NULL.
 */
#ifndef OD_PROTO_INT_H
#define OD_PROTO_INT_H

#include "od_proto.h"

/* Element kinds of an untyped ("auto") numeric array. */
enum { OD_NA_BOOL = 0, OD_NA_INT = 1, OD_NA_FLOAT = 2 };

typedef struct od_numarr {
    json_t *ph;        /* placeholder in the tree (a reference of its own) */
    void *data;        /* malloc'd elements; NULL once a tensor took it */
    bool typed;        /* elements are already of dtype */
    od_dtype dtype;    /* typed: the declared dtype */
    int kind;          /* untyped: OD_NA_*; stored as int64_t (bool, int) or double */
    int64_t n;
    int ndim;          /* nesting of the data (1 for a flat list) */
    int64_t shape[OD_MAX_DIMS];
    char *error;       /* first element that could not be converted (malloc'd) */
} od_numarr;

struct od_json_doc {
    json_t *root;
    od_numarr *arrs;
    int narrs, carrs;
    json_t **binobjs; /* objects with parameters.binary_data_size, document order; owned refs */
    int nbin, cbin;
    size_t *binoff, *binsize; /* after od_json_attach_binary */
    od_blob *blob;            /* borrowed (retained by tensors that use it) */
    bool attached;
};

od_numarr *od_doc_numarr(const od_json_doc *doc, const json_t *ph);

/* The members a tensor object may carry (borrowed from it; NULL where
 * absent, all NULL for a non-object), found in one walk over its keys:
 * jansson hashes the key on every lookup, and the eight lookups a tensor
 * argument took cost more than the walk. */
typedef struct od_tensor_fields {
    json_t *dtype, *datatype, *shape, *data, *params, *requires_grad, *ref;
} od_tensor_fields;
void od_tensor_fields_of(json_t *obj, od_tensor_fields *f);
/* od_tensor_from_json for obj whose members f holds (od_tensor_fields_of(obj)). */
od_status od_tensor_from_fields(od_json_doc *doc, json_t *obj, const od_tensor_fields *f,
                                const od_proto_limits *lim, od_decode_mode mode, const char *what,
                                od_tensor **out, od_error *err);
/* Index of obj among the binary tensors, or -1. */
int od_doc_binary_index(const od_json_doc *doc, const json_t *obj);

/* Length of the valid UTF-8 sequence at s (n > 0 bytes left), or 0. */
size_t od_utf8_len(const unsigned char *s, size_t n);


#endif
