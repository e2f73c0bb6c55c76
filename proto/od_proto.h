/* od_proto.h — the wire format: JSON documents with fast tensor data, the
 * binary tensor data extension, tensor and value codecs, argument binding
 * against an operator schema, and the error model.
 *
 * Invariants:
 *  - Everything here is transport-free: the server hands bytes in and gets
 *    bytes (or tensors to send) out. Nothing here knows HTTP; an od_status's
 *    HTTP status comes from OD_STATUS_TABLE (od_status_http).
 *  - A parsed document (od_json_doc) owns its jansson tree and every numeric
 *    "data" array it decoded without building jansson values (the fast path);
 *    tensors decoded from it either take those buffers over or copy them.
 *  - Binary tensor data lives in an od_blob (the request body, read once);
 *    tensors decoded from it share the blob (no copy) when the data is
 *    aligned for its dtype, so the blob is reference counted.
 *  - Every error names what was wrong and where ("argument 'other': expected
 *    a tensor ..."), like PyTorch's argument parser.
 */
#ifndef OD_PROTO_H
#define OD_PROTO_H

#include <jansson.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "od_dispatch.h"

/* ==== growable output buffer ============================================== */

/* A byte buffer for building responses. An allocation failure sets oom and
 * turns later appends into no-ops, so callers check once at the end.
 * limit (0: none) bounds len: growing past it sets over (and oom), so an
 * encoder never builds more than the response cap allows. */
typedef struct od_buf {
    char *data; /* owned; NUL-terminated when len < cap */
    size_t len, cap;
    size_t limit;
    bool oom;
    bool over; /* oom because limit was reached, not because malloc failed */
} od_buf;

void od_buf_init(od_buf *b);
void od_buf_free(od_buf *b);
bool od_buf_reserve(od_buf *b, size_t extra); /* room for extra more bytes */
void od_buf_append(od_buf *b, const void *p, size_t n);
/* inline so that a literal's length is known where it is written (s: borrowed) */
static inline void od_buf_puts(od_buf *b, const char *s) { od_buf_append(b, s, strlen(s)); }
void od_buf_putc(od_buf *b, char c);
void od_buf_printf(od_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A JSON string literal: quotes, escapes, and invalid UTF-8 replaced by U+FFFD. */
void od_buf_json_str(od_buf *b, const char *s);
void od_buf_json_strn(od_buf *b, const char *s, size_t n);
void od_buf_i64(od_buf *b, int64_t v);
/* [v0,v1,...] (v: borrowed, n >= 0). */
void od_buf_i64s(od_buf *b, const int64_t *v, int n);
/* JSON numbers; NaN and infinities become the strings "NaN", "Infinity",
 * "-Infinity" (JSON has no literal for them; the decoder accepts both). */
void od_buf_f32(od_buf *b, float f);
void od_buf_f64(od_buf *b, double d);
/* A key set as a JSON list of key names, highest priority first. */
void od_buf_keyset(od_buf *b, od_keyset ks);
/* Appends a jansson value in compact form. */
void od_buf_json(od_buf *b, const json_t *v);
/* Hands the data over (new, malloc'd; NULL on oom) and resets b. */
char *od_buf_steal(od_buf *b, size_t *len);

/* ==== numbers =============================================================== */

/* Shortest decimal that reads back as exactly f, and of those the closest
 * (Schubfach; the same digits as Ryu). out needs
 * OD_FMT_F32_ROOM bytes of room: the text is at most 24 bytes plus a NUL,
 * but it is assembled from whole 16-byte stores. Returns the length. The
 * text is JSON: "1.5", "100.0", "1e-07", "3.4028235e+38"; non-finite values
 * print as "NaN" / "Infinity" / "-Infinity" (callers quote them). */
#define OD_FMT_F32_ROOM 48
#define OD_FMT_F32_MAX 24 /* longest text, "-1234567800000000.0" and the like */
/* The finite values of v[0..n) in a row, as od_fmt_f32 prints them, each
 * after a ',' (the first only when comma). Stops before the first NaN or
 * infinity; *done = how many were printed. out needs n * (OD_FMT_F32_MAX + 1)
 * + OD_FMT_F32_ROOM bytes of room. Returns the bytes written (no NUL). */
size_t od_fmt_f32_items(const float *v, size_t n, bool comma, char *out, size_t *done);
int od_fmt_f32(float f, char *out);
/* Round-trip decimal for a double (shortest of %.15g/%.16g/%.17g that reads
 * back exactly); at most 32 bytes plus a NUL. Finite values only. */
int od_fmt_f64(double d, char *out);
int od_fmt_i64(int64_t v, char *out); /* at most 20 bytes plus a NUL */

/* One scanned JSON number token. */
typedef struct od_num {
    bool is_int;    /* no fraction or exponent, and fits int64 */
    bool integral;  /* the value is a whole number (1, 2.0, 1e3) */
    int64_t i;      /* when is_int */
    double d;       /* always: the correctly rounded double */
    const char *start, *end; /* the token */
    bool exact_fast; /* d came from exact operands (Clinger's fast path) */
    /* the decimal itself, for od_num_to_f32: |value| = mant * 10^exp10 */
    uint64_t mant;
    int32_t exp10;
    bool neg;
    bool truncated; /* non-zero digits beyond the 19 in mant */
    bool slow;      /* exponent beyond tracking: only strtod/strtof can say */
} od_num;

/* Scans a JSON number at p (< end; never reads at or past end). Returns the
 * pointer after it, or NULL when p does not start a valid JSON number. */
const char *od_scan_number(const char *p, const char *end, od_num *out);
/* The correctly rounded float of a scanned number. */
float od_num_to_f32(const od_num *n);
/* Scan a JSON number at p (< end) straight into a correctly rounded float or
 * double (what strtof/strtod give for the token); the pointer after it, or
 * NULL (nothing written) when p does not start a valid JSON number. The
 * fast path for tensor data: no od_num, no double for a float. */
const char *od_scan_f32(const char *p, const char *end, float *out);
const char *od_scan_f64(const char *p, const char *end, double *out);
/* A run of tensor data, "x, y, z": scans numbers separated by ',' (blanks
 * allowed on either side) into out[0..max) and returns how many. The text
 * need not be NUL-terminated: nothing at or past end is read. *pp
 * (borrowed, updated) ends just after the last number
 * read; it stays put when the first is not a number. The run stops at max, at
 * anything but a ',' after a number, or at a ',' not followed by a number:
 * the caller's general path then sees exactly that text. Correctly rounded,
 * as od_scan_f32 / od_scan_f64. */
int64_t od_scan_f32_run(const char **pp, const char *end, float *out, int64_t max);
int64_t od_scan_f64_run(const char **pp, const char *end, double *out, int64_t max);

/* ==== limits ================================================================ */

typedef struct od_proto_limits {
    int max_depth;        /* JSON nesting (objects and arrays) */
    int max_rank;         /* tensor rank, <= OD_MAX_DIMS */
    int64_t max_elements; /* elements of one tensor */
    int64_t max_values;   /* JSON values built outside tensor "data" (0: no limit) */
    /* The fields a top-level object may have (NULL-terminated; NULL: any):
     * an unknown one is refused before its value is built. */
    const char *const *top_keys;
} od_proto_limits;

/* 64, OD_MAX_DIMS, 1 << 28, 65536, any top-level key. */
od_proto_limits od_proto_default_limits(void);

/* ==== blobs: the request body =============================================== */

/* A reference-counted byte block. data is 64-byte aligned at data + pad,
 * where the caller chose pad so that a later offset is aligned. */
typedef struct od_blob {
    _Atomic long refs;
    void *base;   /* allocation (from the CPU allocator: large blocks are
                     cached there, so a body buffer reuses memory already
                     faulted in instead of page-faulting its way through) */
    char *data;   /* base + pad */
    size_t len;   /* bytes used */
    size_t cap;   /* bytes available at data */
    size_t alloc_bytes; /* size of base, as the allocator must be told */
} od_blob;

/* New blob with room for cap bytes (+1 for a NUL) whose byte at offset
 * align_at is 64-byte aligned. NULL on allocation failure. */
od_blob *od_blob_new(size_t cap, size_t align_at);
void od_blob_retain(od_blob *b);
void od_blob_release(od_blob *b); /* NULL-safe */
/* Grows cap to at least need (keeps contents); false on failure. */
bool od_blob_grow(od_blob *b, size_t need);

/* ==== JSON documents ========================================================= */

typedef struct od_json_doc od_json_doc;

/* Parses text[0..len) (borrowed; never read past len, never written).
 * Strict JSON (RFC 8259, UTF-8 validated, no \u0000, no key twice in an object),
 * nesting capped at lim->max_depth. Numeric arrays under a "data" key are
 * decoded straight into tensor buffers (in the sibling "dtype"/"datatype"
 * when it comes first), without jansson values; such an array may also hold
 * NaN, Infinity, -Infinity (bare or as strings).
 * Errors: OD_EINVAL "invalid JSON at byte N: ..." and OD_ETOOLARGE. *out new. */
od_status od_json_parse(const char *text, size_t len, const od_proto_limits *lim,
                        od_json_doc **out, od_error *err);
void od_json_doc_free(od_json_doc *doc);
json_t *od_json_root(const od_json_doc *doc); /* borrowed */
/* Short name of a JSON value's kind for messages ("string", "array"). Static. */
const char *od_json_kind(const json_t *v);

/* The binary tensor data extension: bin[0..len) follows the JSON header in
 * blob (borrowed; retained by tensors that use it). Every object in the
 * document with "parameters": {"binary_data_size": N}, in document order,
 * takes the next N bytes. The sizes must be non-negative integers that add
 * up to exactly len. */
od_status od_json_attach_binary(od_json_doc *doc, od_blob *blob, size_t offset, size_t len,
                                od_error *err);
/* Number of tensor objects that claimed binary data. */
int od_json_binary_count(const od_json_doc *doc);

/* ==== tensors ================================================================ */

typedef enum od_decode_mode {
    OD_DECODE_DATA,      /* data required: a CPU tensor */
    OD_DECODE_META,      /* shape and dtype only: a Meta tensor (data ignored) */
} od_decode_mode;

/* Decodes a tensor object {"dtype"|"datatype", "shape", "data" | binary
 * parameters} of doc into *out (new). data may be flat or nested (shape then
 * inferred when absent); dtype, when absent, is inferred like torch.tensor
 * (bool, int64, else float32). what names the argument in errors
 * ("argument 'self'"). */
od_status od_tensor_from_json(od_json_doc *doc, json_t *obj, const od_proto_limits *lim,
                              od_decode_mode mode, const char *what, od_tensor **out,
                              od_error *err);

/* Writes {"dtype": "float32", "shape": [...], "data": [...]} (flat, row-major)
 * for t (borrowed, a CPU tensor of any strides). With oip, writes "datatype"
 * (OIP name) instead of "dtype". name (may be NULL) adds "name" first. */
void od_tensor_to_json(od_buf *b, const od_tensor *t, const char *name, bool oip);
/* The header object for a binary output: like od_tensor_to_json without
 * "data" and with "parameters": {"binary_data_size": nbytes}. */
void od_tensor_to_json_binary(od_buf *b, const od_tensor *t, const char *name, bool oip);
/* Copies t's elements row-major into dst (od_tensor_nbytes(t) bytes). */
void od_tensor_copy_out(const od_tensor *t, void *dst);

/* dtype by torch name, alias or OIP name (od_dtype_from_name); OD_NUM_DTYPES
 * if unknown. */
od_dtype od_proto_dtype(const char *name);
/* Triton model-config name: "TYPE_FP32". Static. */
const char *od_proto_dtype_config_name(od_dtype dt);

/* ==== values and argument binding ============================================ */

/* The arguments of one call, bound to a schema: args[i] for schema
 * argument i, defaults filled. Owns what it decoded (tensors, lists,
 * strings); default values are borrowed from the schema. */
typedef struct od_bound {
    const od_op *op;
    int nargs;
    od_value args[OD_MAX_ARGS];
    bool owned[OD_MAX_ARGS];
    bool given[OD_MAX_ARGS]; /* supplied by the caller (not a default) */
    int64_t bytes_in;        /* tensor bytes decoded */
} od_bound;

void od_bound_init(od_bound *b);
void od_bound_release(od_bound *b);

/* Binding options. */
typedef struct od_bind_opts {
    const od_proto_limits *lim;
    od_decode_mode mode;
    /* When set: a Device? argument the caller did not give takes this
     * (the request-level "device"). */
    bool has_device;
    od_device device;
    /* When set: a tensor argument may be {"ref": "<id>"} (on /v2, "ref" in
     * the input's "parameters"): *out a new reference to that tensor, or an
     * error. NULL: such an argument is refused. ctx: ref_ctx. */
    od_status (*ref)(void *ctx, const char *id, od_tensor **out, od_error *err);
    void *ref_ctx;
} od_bind_opts;

/* Cheap check, no decoding: do args (JSON array or NULL) and kwargs (object
 * or NULL) fit op's schema by arity, names and JSON kinds? On false, err
 * says why. Used to pick an overload for "add" among add.Tensor, add.Scalar. */
bool od_proto_args_match(const od_op *op, json_t *args, json_t *kwargs, od_error *err);

/* Binds positional args and kwargs to op's schema like PyTorch: by position
 * up to the keyword-only marker, then by name; defaults applied; every value
 * checked against its schema type with an error naming the argument. */
od_status od_proto_bind(const od_op *op, od_json_doc *doc, json_t *args, json_t *kwargs,
                        const od_bind_opts *opts, od_bound *out, od_error *err);

/* Binds the Open Inference Protocol form: inputs (array of named tensors)
 * and parameters (object, may be NULL). An input named after a non-tensor
 * argument gives its value from a one-element tensor (scalars) or a 1-D
 * tensor (lists); parameters give non-tensor arguments as JSON values. */
od_status od_proto_bind_oip(const od_op *op, od_json_doc *doc, json_t *inputs, json_t *params,
                            const od_bind_opts *opts, od_bound *out, od_error *err);

/* JSON for a value that is not a tensor (a schema default, a scalar return). */
void od_value_to_json(od_buf *b, const od_value *v);
/* A jansson value for v (new); tensors become {"dtype", "shape"}. */
json_t *od_value_to_jansson(const od_value *v);

/* Output names per the schema's returns: the return's name when the schema
 * names it, else "out" for a single return and "out0", "out1", ... */
void od_proto_return_name(const od_schema *s, int i, char *buf, size_t cap);

/* OIP datatype and shape for a schema argument/return in model metadata:
 * tensors "FP32" [-1]; int "INT64" [1]; float/Scalar "FP32"/"FP64" [1];
 * bool "BOOL" [1]; int[] "INT64" [-1]. Returns false for types with no
 * tensor form (str, ScalarType, Device, ...), which go in parameters. */
bool od_proto_arg_oip(const od_type *t, const char **datatype, int *rank);

/* ==== errors ================================================================== */

/* {"error": {"code": code, "message": message}} as a new malloc'd string.
 * code: od_status_code of the status (OD_STATUS_TABLE gives its HTTP status). */
char *od_error_body(const char *code, const char *message, size_t *len);
/* The Open Inference Protocol's {"error": message}, new malloc'd string. */
char *od_oip_error_body(const char *message, size_t *len);

/* The one mapping from a failed call to a response: HTTP status in *http and
 * the JSON body (new) from err->status and err->message. */
char *od_proto_error(const od_error *err, int *http, size_t *len);

#endif
