/* od_server.h — opdispatchd internals shared by the server's files.
 *
 * Invariants:
 *  - One od_req per HTTP request, created on MHD's first call for it and
 *    freed in the completion callback (which MHD runs on success, abort and
 *    timeout alike), so nothing a request allocates outlives it except what
 *    a response holds (and the response frees that).
 *  - The body is read once, into an od_blob sized from Content-Length
 *    (rejected with 413 before reading when above the route's cap, 503
 *    when the bodies in flight would pass their budget); its memory is
 *    touched only as bytes arrive. A body of 1 MiB or more may first wait
 *    its turn, unread and without a buffer (server.c's admission queue).
 *  - Handlers of operator-call routes run on a call worker (workers.c)
 *    unless od_srv_call_is_cheap says their tiny body bounds their cost;
 *    od_respond_* works the same on both.
 *  - A handler answers exactly once through one of the od_respond_* calls;
 *    the first answer wins and later ones are ignored.
 *  - Routes are a declarative table (method, pattern, handler, body cap).
 */
#ifndef OD_SERVER_H
#define OD_SERVER_H

#include <microhttpd.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "od_ops.h"
#include "od_proto.h"

#define OD_VERSION "0.1.0"

typedef enum od_log_level { OD_LOG_ERROR, OD_LOG_WARN, OD_LOG_INFO, OD_LOG_DEBUG } od_log_level;

#define OD_MAX_PLUGINS 16

typedef struct od_config {
    char host[256];
    int port;                       /* 0: any free port (printed at start) */
    int threads;                    /* MHD worker threads */
    size_t max_body_bytes;
    int max_rank;
    int64_t max_elements;
    size_t max_output_bytes;        /* per output allocation (checked before allocating) */
    int max_json_depth;
    int64_t max_json_values;        /* JSON values outside tensor data, per request */
    size_t max_inflight_body_bytes; /* bodies held at once, all requests (0: no cap) */
    size_t max_active_body_bytes;   /* large bodies read and worked on at once; more wait (0: none) */
    unsigned max_body_wait_ms;      /* then one is read anyway */
    size_t cpu_cache_bytes;         /* od_cpu_cache_set_limit at start-up */
    int call_workers;               /* threads that run operator calls */
    unsigned max_call_seconds;      /* a call's time budget (0: none) */
    unsigned max_connections;
    unsigned max_connections_per_ip; /* 0: no per-IP cap */
    unsigned idle_timeout_s;
    unsigned request_timeout_s;
    unsigned drain_timeout_s;
    od_log_level log_level;
    bool access_log;
    bool enable_bench;              /* POST /v1/bench allowed */
    char default_device[32];        /* "auto", "cpu", "cuda", "cuda:N" */
    size_t max_session_bytes;       /* stored tensor bytes per session and device type (0: no cap) */
    unsigned session_idle_s;        /* a session idle this long is freed (0: never) */
    size_t store_high_water_bytes;  /* stored bytes per device type before LRU eviction (0: never) */
    const char *plugins[OD_MAX_PLUGINS]; /* --plugin paths, loaded in order (owned) */
    int nplugins;
    char token_file[4096];          /* --token-file ("": none; every route open) */
    bool allow_anonymous;           /* listen beyond loopback without tokens; with tokens:
                                     * requests without one get read and call */
    char tls_cert[4096];            /* --tls-cert, --tls-key: PEM files ("": plain HTTP) */
    char tls_key[4096];
} od_config;

extern od_config od_cfg;
extern atomic_bool od_draining;

void od_config_defaults(od_config *c);
void od_log(od_log_level lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
uint64_t od_now_ns(void);

/* ---- the daemon (server.c) ---------------------------------------------- */

/* Starts listening per od_cfg; the bound port (useful with --port 0) in
 * *bound_port. Returns 0, or -1 after logging why. */
int od_server_start(int *bound_port);
/* Stops accepting connections (/v2/health/ready turns 503). */
void od_server_quiesce(void);
/* The route table as GET / lists it: [{"method", "path", "description"}]. */
void od_server_endpoints_json(od_buf *b);
/* Requests received and not yet completed. */
long od_server_inflight(void);
/* Bytes reserved for the bodies of those requests. */
size_t od_server_body_bytes(void);
/* Large bodies being read or worked on (bytes claimed) and requests waiting
 * for their turn (for /metrics). */
void od_server_admission(size_t *active_bytes, long *waiting);
/* Cancels running calls, joins the call workers, closes every connection
 * and joins the I/O threads. */
void od_server_stop(void);

/* ---- who may do what (auth.c) ---------------------------------------------- */

/* Scopes: what a route needs (one of them, or none) and a token holds (bits). */
enum { OD_SCOPE_READ = 1, OD_SCOPE_CALL = 2, OD_SCOPE_ADMIN = 4 };
#define OD_NUM_SCOPES 3

/* Reads the token file (path: borrowed) before the server starts. 0, or -1
 * with the reason in why (cap bytes; it names the line, never a token). */
int od_auth_load(const char *path, char *why, size_t cap);
/* Whether a token file was loaded. */
bool od_auth_enabled(void);
/* The scopes of a request by its Authorization header (borrowed; NULL when
 * absent): a token's scopes, the anonymous scopes without a header, -1 for
 * a header that is not `Bearer <a token of the file>`. *name: the token's
 * name for the log, "-" for none (borrowed, static). */
int od_auth_scopes(const char *authorization, const char **name);
/* What a request without a token may do (every scope without a token file). */
unsigned od_auth_anonymous(void);
/* "read", "call", "admin" for one scope bit; "none" for 0 (static). */
const char *od_scope_name(unsigned scope);
/* 127.0.0.0/8, ::1, localhost (host: borrowed). */
bool od_host_is_loopback(const char *host);
/* Frees the table (at shutdown). */
void od_auth_free(void);

/* ---- call workers (workers.c) --------------------------------------------- */

/* Starts n threads and a queue of cap jobs. 0, or -1 when none started. */
int od_workers_start(int n, size_t cap);
/* Queues fn(arg) (arg: borrowed until fn runs); false when stopping or full. */
bool od_workers_submit(void (*fn)(void *arg), void *arg);
bool od_workers_stopping(void);
/* Jobs waiting and running now (for /metrics). */
void od_workers_load(long *queued, long *running);
/* Runs what is queued, joins the threads. */
void od_workers_stop(void);

/* ---- requests ----------------------------------------------------------- */

#define OD_MAX_PARAMS 2

typedef struct od_req {
    struct MHD_Connection *conn;
    char method[16];
    char path[512];
    char ip[64];                       /* filled on first use (req_ip in server.c) */
    bool ip_done;
    int route;                         /* index into the route table; -1 none */
    char params[OD_MAX_PARAMS][256];   /* path captures, in pattern order */
    uint64_t t0;                       /* ns, first call */
    /* body */
    od_blob *body;
    size_t body_cap;                   /* the route's cap */
    bool has_cl;
    size_t content_length;
    bool binary;                       /* Inference-Header-Content-Length given */
    size_t hdr_len;
    bool too_large;
    bool busy;                         /* past the in-flight body budget: 503 */
    size_t body_reserved;              /* this request's share of that budget */
    size_t received;                   /* body bytes MHD gave us, kept or discarded */
    size_t admitted;                   /* its claim on --max-active-body-bytes (0: none) */
    struct od_req *wait_next;          /* in the admission queue (server.c) */
    uint64_t wait_since;               /* ns, when it began to wait */
    _Atomic int wait_state;            /* the suspend/resume handshake (server.c) */
    /* answer */
    bool responded;
    bool oip;                          /* a /v2 path: errors in the protocol's shape */
    bool failed;                       /* no answer could be made: close */
    bool async;                        /* the handler runs on a call worker */
    struct MHD_Response *stash;        /* its answer, queued after the resume */
    int stash_status;
    int status;
    size_t resp_bytes;
    /* what the access log and statistics need */
    const od_op *op;
    const char *user;                  /* the token's name (static); NULL: no token file */
    const char *www_auth;              /* WWW-Authenticate of a 401/403 (static), or NULL */
} od_req;

typedef void (*od_handler)(od_req *r);

/* Query argument or request header (borrowed from MHD; NULL when absent). */
const char *od_req_query(od_req *r, const char *key);
const char *od_req_header(od_req *r, const char *name);

/* Answers. Each takes ownership of what it is given. */
void od_respond_buf(od_req *r, int status, const char *ctype, od_buf *b);
void od_respond_empty(od_req *r, int status);
/* An error answer: HTTP status and code from OD_STATUS_TABLE; the body is
 * {"error": {"code", "message"}}, or the Open Inference Protocol's
 * {"error": "<message>"} on /v2 routes. */
void od_respond_error(od_req *r, od_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void od_respond_od_error(od_req *r, const od_error *err);
/* Binary tensor data response: head (JSON) then each tensor's bytes, sent
 * from the tensors' own memory. tensors: new references, released when the
 * response is freed; each must be a contiguous CPU tensor. */
/* At most this many tensors in one binary response (a Tensor[] return
 * sends one per element). */
#define OD_MAX_BINARY_OUTPUTS 1024
void od_respond_binary(od_req *r, int status, od_buf *head, od_tensor **tensors, int n);

/* The request body: JSON part and binary part. */
static inline const char *od_req_json(const od_req *r, size_t *len)
{
    *len = r->binary ? r->hdr_len : (r->body ? r->body->len : 0);
    return r->body ? r->body->data : "";
}

/* ---- handlers (handlers_v1.c, handlers_v2.c) ------------------------------ */

void od_h_index(od_req *r);
void od_h_ops_list(od_req *r);
void od_h_op_detail(od_req *r);
void od_h_op_call(od_req *r);
void od_h_op_explain(od_req *r);
void od_h_keys(od_req *r);
void od_h_devices(od_req *r);
void od_h_stats(od_req *r);
void od_h_stats_reset(od_req *r);
void od_h_metrics(od_req *r);
void od_h_tensor_put(od_req *r);
void od_h_tensor_list(od_req *r);
void od_h_tensor_get(od_req *r);
void od_h_tensor_delete(od_req *r);
void od_h_tensor_backward(od_req *r);
void od_h_bench(od_req *r);
void od_h_load_start(od_req *r);
void od_h_load_get(od_req *r);
void od_h_load_stop(od_req *r);
/* Stops a running /v1/load and frees it (at shutdown). */
void od_load_stop(void);
/* The dashboard (web_files.c): a browser asking for / gets the page. */
bool od_web_wants_page(od_req *r);
void od_web_index(od_req *r);
void od_h_web_file(od_req *r);
void od_h_web_vendor(od_req *r);
void od_h_session_new(od_req *r);
void od_h_session_get(od_req *r);
void od_h_session_delete(od_req *r);
void od_h_run(od_req *r);

void od_h_v2_server(od_req *r);
void od_h_v2_live(od_req *r);
void od_h_v2_ready(od_req *r);
void od_h_v2_models_stats(od_req *r);
void od_h_v2_repo_index(od_req *r);
void od_h_v2_model(od_req *r);
void od_h_v2_model_config(od_req *r);
void od_h_v2_model_ready(od_req *r);
void od_h_v2_model_stats(od_req *r);
void od_h_v2_infer(od_req *r);

/* ---- shared by the handlers (calls.c) -------------------------------------- */

/* Resolves a device name ("auto", "cpu", "cuda", "cuda:N"; NULL = the
 * configured default). OD_EUNAVAIL (503) with the reason when CUDA cannot
 * serve it. */
od_status od_resolve_device(const char *name, od_device *out, od_error *err);
/* Why CUDA is unavailable ("" when it is available). */
const char *od_cuda_why(void);

/* Whether op suits a request (ctx: the caller's); why (may be NULL) says
 * why not. */
typedef bool (*od_op_fits)(const od_op *op, void *ctx, od_error *why);
/* The operator a name in a URL means: "add.Tensor" or "aten::add.Tensor" is
 * that overload; a bare "add" is its default (or only) overload if fits
 * accepts it, else the first overload fits accepts, else the default so
 * binding names the problem. Without fits, a bare name needs a default.
 * NULL with err set: 404 unknown or ambiguous, 422 when no overload fits.
 * name: borrowed; the result is borrowed from the registry. */
const od_op *od_resolve_op(const char *name, od_op_fits fits, void *ctx, od_error *err);

/* od_resolve_op for a /v1 call: a bare name takes the first overload whose
 * schema fits args and kwargs (JSON, borrowed; may be NULL) by their kinds. */
const od_op *od_resolve_op_for_args(const char *name, json_t *args, json_t *kwargs, od_error *err);

od_proto_limits od_limits(void);

/* t (borrowed, any device and strides) as a contiguous CPU tensor for the
 * wire: *out new (t itself, retained, when it already is one). */
od_status od_host_contiguous(od_tensor *t, od_tensor **out, od_error *err);

/* Whether a call of operator `name` with body[0..body_len) is cheap enough,
 * by construction, to run on the I/O thread instead of a worker: a tiny
 * body, bounded argument types, no stored tensors. Both borrowed. */
bool od_srv_call_is_cheap(const char *name, const char *body, size_t body_len);

/* ---- what happens between the call and the kernel (exec.c) ------------------ */

typedef enum od_grad_mode { OD_GRAD_ENABLED, OD_GRAD_NO_GRAD, OD_GRAD_INFERENCE } od_grad_mode;

/* The execution settings of a call, a program or a session: grad mode,
 * autocast, the mode stack and vmap. JSON pointers are borrowed from the
 * request's document. */
typedef struct od_exec {
    od_grad_mode grad_mode;
    od_dtype autocast;   /* OD_NUM_DTYPES: off */
    json_t *modes;       /* "modes": [...], or NULL */
    json_t *vmap;        /* "vmap": {...}, or NULL */
    struct od_mode_stack *stack; /* the modes built from "modes" (borrowed), or NULL */
    od_key autocast_key;  /* AutocastCPU or AutocastCUDA: the call's device type */
    struct od_vmap_level *in_vmap; /* a program's steps: the vmap level they run in (borrowed) */
} od_exec;

void od_exec_init(od_exec *x);
/* The exec fields a request body may carry, NULL-terminated (for
 * od_proto_limits.top_keys lists). */
extern const char *const od_exec_fields[];
/* When key is an exec field, reads v into x: 1 on success, -1 with err set
 * on a bad value; 0 when key is not an exec field. */
int od_exec_field(od_exec *x, const char *key, json_t *v, od_error *err);
/* "grad_mode" etc. as the JSON the dispatch record shows ("grad_mode":
 * "no_grad", ...); writes nothing for the defaults. */
void od_exec_json(od_buf *b, const od_exec *x);
/* Applies x to this thread's dispatcher state; returns what to restore. */
od_tls od_exec_enter(const od_exec *x);
/* Instantiates x->modes, outermost first, into st (caller's, zeroed; an
 * empty list leaves it empty); od_mode_stack_clear(st) frees them. */
od_status od_exec_build_modes(const od_exec *x, struct od_mode_stack *st, od_error *err);
/* ,"modes":{"<name>": report, ...} for the modes of st that report. */
void od_exec_modes_json(od_buf *b, struct od_mode_stack *st);

/* vmap of one call: the levels (outermost first) and their specs. */
#define OD_VMAP_MAX_LEVELS 4
typedef struct od_vmap_run {
    int n;
    struct od_vmap_level *lv; /* n levels, lv[i].outer = &lv[i-1] */
    json_t *spec[OD_VMAP_MAX_LEVELS];
} od_vmap_run;
/* Reads x->vmap's levels into *run (run->lv: caller's array of
 * OD_VMAP_MAX_LEVELS); by_id: in_dims maps stored tensor ids (a program). */
od_status od_exec_vmap_levels(const od_exec *x, od_vmap_run *run, bool by_id, od_error *err);
/* Reads the levels and wraps b's arguments as batched tensors per in_dims
 * (each level in turn). */
od_status od_exec_vmap_wrap(const od_exec *x, od_bound *b, od_vmap_run *run, od_error *err);
/* A program's stored tensor id (*t: owned, replaced) wrapped at each level
 * whose in_dims names it. */
od_status od_exec_vmap_wrap_stored(od_vmap_run *run, const char *id, od_tensor **t, od_error *err);
/* Output i (*t: owned, replaced) unwrapped, innermost level first, per out_dims. */
od_status od_exec_vmap_unwrap_one(const od_vmap_run *run, int i, od_tensor **t, od_error *err);
/* Every tensor result of s unwrapped. */
od_status od_exec_vmap_unwrap(const od_vmap_run *run, od_stack *s, od_error *err);

/* One operator call through the dispatcher with the request's limits:
 * device moves, output-bytes cap, trace, stats. */
typedef struct od_srv_call {
    const od_op *op;
    od_bound bound;
    od_device device;
    od_stack stack;
    od_trace trace;
    od_keyset ks;
    od_key key;                /* the key the call dispatched to first */
    uint64_t t_start;          /* the request's first byte (end-to-end time) */
    uint64_t t_body;           /* the whole body received (decode starts) */
    uint64_t t_decoded, t_called, t_encoded;
    int64_t bytes_out;
    bool keep;                 /* outputs stay where they are, for the store */
    od_exec exec;              /* grad mode, autocast, modes, vmap */
    uint64_t deadline;         /* od_now_ns() time to cancel at; 0: --max-call-seconds from now */
    od_error err;
} od_srv_call;

void od_srv_call_init(od_srv_call *c, const od_op *op);
/* Moves inputs to c->device, runs, brings outputs back to the CPU (unless
 * c->keep: they stay on the device, for the store). */
od_status od_srv_call_run(od_srv_call *c);
void od_srv_call_release(od_srv_call *c);
/* Records request statistics for c (ok per status). */
void od_srv_call_stats(od_srv_call *c, bool ok);
/* Writes "outputs": [...] for c's returns into b. sel (may be NULL: all):
 * the request's "outputs" list ({"name", "parameters": {"binary_data"}});
 * bin_default: outputs are binary unless they say otherwise; oip: OIP
 * names and datatypes. Binary outputs get a header entry here and their
 * tensors (new references, contiguous CPU) in bin[0..*nbin). */
od_status od_srv_encode_outputs(od_buf *b, od_srv_call *c, json_t *sel, bool bin_default, bool oip,
                            od_tensor **bin, int *nbin, od_error *err);
/* What differs between a /v1 call and a /v2 infer; od_serve_call runs the
 * rest (device, operator, binding, the call, outputs, statistics, answer).
 * q is the protocol's own request record (borrowed throughout). */
typedef struct od_call_proto {
    bool oip; /* Open Inference Protocol names and datatypes in the outputs */
    /* Parses the body: *doc (new, also on error: freed by the caller) and
     * the device asked for (NULL: the default; borrowed from *doc). */
    od_status (*parse)(od_req *r, void *q, od_json_doc **doc, const char **device, od_error *err);
    const od_op *(*resolve)(od_req *r, void *q, od_error *err);
    od_status (*bind)(const od_op *op, od_json_doc *doc, void *q, const od_bind_opts *bo,
                      od_bound *out, od_error *err);
    json_t *(*outputs)(void *q); /* the "outputs" selection, or NULL */
    json_t *(*params)(void *q);  /* "parameters" (binary_data_output), or NULL */
    bool (*keep)(void *q);       /* outputs stay in the session's store */
    const od_exec *(*exec)(void *q); /* grad mode, modes...; NULL: the defaults */
    void (*head)(od_buf *b, const od_srv_call *c, void *q); /* before "outputs" */
    void (*tail)(od_buf *b, const od_srv_call *c, void *q); /* after them; closes the object */
} od_call_proto;
void od_serve_call(od_req *r, const od_call_proto *p, void *q);
/* Outputs as binary data unless told otherwise: parameters.binary_data_output,
 * else an Accept of application/octet-stream (without application/json). */
bool od_want_binary(od_req *r, json_t *params);

/* How much of the dispatch record a call's answer carries, the client's
 * choice: "dispatch": "full" | "summary" | "none" on /v1, parameters.dispatch
 * on /v2. DEFAULT is each protocol's own (full on /v1, summary on /v2). */
typedef enum { OD_DETAIL_DEFAULT, OD_DETAIL_FULL, OD_DETAIL_SUMMARY, OD_DETAIL_NONE } od_detail;

/* Reads v (borrowed; NULL leaves *out DEFAULT); 400 naming field otherwise. */
od_status od_detail_parse(const json_t *v, const char *field, od_detail *out, od_error *err);

/* Appends the dispatch record object to b: FULL (or DEFAULT) the whole
 * record, SUMMARY {key, kernel, path, timing_us}. Not called for NONE. */
void od_srv_call_dispatch_json(od_buf *b, const od_srv_call *c, od_detail d);

/* ---- tensors kept on the server, by session (store.c) ------------------------ */

#define OD_ID_LEN 33      /* 32 hex digits (128 random bits) and the NUL */
#define OD_SESSION_MAX 64 /* longest session name */
#define OD_DEFAULT_SESSION "default"

/* The session a request names (X-OD-Session; OD_DEFAULT_SESSION without
 * it), or NULL after answering 400 for a malformed name. Borrowed from MHD. */
const char *od_req_session(od_req *r);
/* The same without answering: NULL for a malformed name. */
const char *od_req_session_name(od_req *r);
/* 1..OD_SESSION_MAX of [A-Za-z0-9._-]. */
bool od_session_name_ok(const char *name);

/* Creates an empty session with a random name, into id. */
void od_store_new_session(char id[OD_ID_LEN]);
/* Stores t (the store takes a new reference; the caller keeps its own) in
 * session (created on first use); its new id into id. 507 over_budget when
 * the session would pass --max-session-bytes on t's device type. */
od_status od_store_put(const char *session, od_tensor *t, char id[OD_ID_LEN], od_error *err);
/* *out: a new reference to tensor id of session; 404 when the session has
 * no such tensor (another session's ids included: same answer). */
od_status od_store_get(const char *session, const char *id, od_tensor **out, od_error *err);
od_status od_store_delete(const char *session, const char *id, od_error *err);
/* Frees every tensor of the session and the session; 404 when unknown. */
od_status od_store_drop_session(const char *session, od_error *err);
/* {"session", "count", "tensors": [meta...]}. */
void od_store_list_json(const char *session, od_buf *b);
/* {"id", "tensors", "bytes": {device type: n}, "budget_bytes", "idle_s",
 * "ids": [its tensors]}; 404 when unknown. */
od_status od_store_session_json(const char *session, od_buf *b, od_error *err);
/* {"name" (when not NULL), "id", "dtype", "shape", "strides", "device",
 * "bytes", ...} of t (borrowed). */
void od_store_tensor_meta_json(od_buf *b, const char *name, const char *id, const od_tensor *t);
/* The same plus "shares_storage_with": the ids of session's other stored
 * tensors that are views of t's storage (or its base). */
void od_store_tensor_detail_json(od_buf *b, const char *session, const char *id, const od_tensor *t);
typedef struct od_store_totals {
    int64_t tensors, sessions, puts, deletes, expired_sessions;
    int64_t evicted[OD_NUM_DEVICE_TYPES];
    int64_t bytes[OD_NUM_DEVICE_TYPES];
} od_store_totals;
void od_store_stats(od_store_totals *out);
/* Stores the .grad of every tensor of session that has one (once per
 * gradient tensor) and writes [{"id", "grad": metadata}] into b. */
od_status od_store_sync_grads(const char *session, od_buf *b, od_error *err);
/* Frees every session idle longer than idle_ns (0: none) at time now (ns,
 * od_now_ns); returns how many. */
int od_store_expire(uint64_t now, uint64_t idle_ns);
/* Frees everything (at shutdown). */
void od_store_clear(void);

/* The ref resolver for binding ({"ref": id} arguments): ctx is the od_req. */
od_status od_store_ref(void *ctx, const char *id, od_tensor **out, od_error *err);

#endif
