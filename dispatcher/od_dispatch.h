/* od_dispatch.h — operator registry, dispatch tables, boxed calls, TLS.
 *
 * Invariants:
 *  - One process-wide registry. Operators are defined from schema strings;
 *    each owns a table with one slot per runtime key, recomputed on every
 *    registration change (and for every operator when a fallback is added).
 *  - After od_registry_freeze() the registry refuses changes, so lookups read
 *    the tables with no lock: all registration happens at start-up, on one
 *    thread, before any call.
 *  - A call's key set = (OR of the tensor arguments' key sets | TLS included)
 *    - TLS excluded - the operator's fallthrough keys. A kernel receives the
 *    key set it was called with; od_redispatch masks out the current key and
 *    everything above it and looks up again (no argument scan, no TLS read).
 *  - Every kernel and fallback is boxed (see od_value.h for the stack rules).
 */
#ifndef OD_DISPATCH_H
#define OD_DISPATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "od_error.h"
#include "od_keys.h"
#include "od_schema.h"
#include "od_value.h"

typedef struct od_op od_op; /* an operator handle; lives as long as the process */

/* A boxed kernel. ctx is the pointer given at registration (borrowed). */
typedef od_status (*od_boxed_fn)(void *ctx, const od_op *op, od_keyset ks, od_stack *s,
                                 od_error *err);

/* Where a table slot's kernel came from, as the PyTorch dumps print it. */
typedef enum od_provenance {
    OD_PROV_MISSING = 0,
    OD_PROV_KERNEL,          /* [kernel] */
    OD_PROV_DEFAULT_BACKEND, /* [default backend kernel] */
    OD_PROV_MATH,            /* [math kernel] */
    OD_PROV_AUTOGRAD,        /* [autograd kernel] */
    OD_PROV_FALLBACK,        /* [backend fallback] */
} od_provenance;
const char *od_provenance_name(od_provenance p); /* "kernel", ...; static */

typedef struct od_kernel {
    od_boxed_fn fn;     /* NULL for a fallthrough */
    void *ctx;
    const char *name;   /* the kernel's C name, for dumps and traces; static */
    const char *file;   /* registration site; static */
    int line;
    bool fallthrough;
} od_kernel;

/* ---- registration (start-up only) ---- */

/* Defines an operator. schema: "aten::add.Tensor(Tensor self, ...) -> Tensor"
 * (namespace required). *out (may be NULL) is borrowed, valid forever.
 * A second definition of the same name is OD_EDUPLICATE naming both sites. */
od_status od_def(const char *schema, const char *file, int line, od_op **out, od_error *err);

/* Registers fn for op on a runtime or alias key. A second kernel for the same
 * (op, key) is OD_EDUPLICATE naming both registration sites. name: static. */
od_status od_impl(od_op *op, od_key key, od_boxed_fn fn, void *ctx, const char *name,
                  const char *file, int line, od_error *err);
/* Marks key as a fallthrough for op (the key is masked out of its calls). */
od_status od_impl_fallthrough(od_op *op, od_key key, const char *file, int line, od_error *err);
/* A fallback for every operator on a runtime key (fn NULL = fallthrough). */
od_status od_fallback(od_key key, od_boxed_fn fn, void *ctx, const char *name, const char *file,
                      int line, od_error *err);

#define OD_DEF(schema, out, err) od_def((schema), __FILE__, __LINE__, (out), (err))
#define OD_IMPL(op, key, fn, ctx, err) \
    od_impl((op), (key), (fn), (ctx), #fn, __FILE__, __LINE__, (err))
#define OD_FALLBACK(key, fn, ctx, err) \
    od_fallback((key), (fn), (ctx), #fn, __FILE__, __LINE__, (err))

void od_registry_freeze(void);
bool od_registry_frozen(void);

/* ---- lookup ---- */

/* "aten::add.Tensor", "add.Tensor", "aten::add" or "add" (the default
 * overload, i.e. overload name ""; if there is none, the single overload;
 * NULL when ambiguous). Returns a borrowed handle or NULL. */
const od_op *od_op_find(const char *name);
/* All overloads sharing ns::name, in definition order. Returns how many exist;
 * writes at most cap borrowed handles. */
int od_op_overloads(const char *name, const od_op **out, int cap);
/* Iterates every operator in definition order; i from 0; NULL at the end. */
const od_op *od_op_at(int i);
int od_op_count(void);

const od_schema *od_op_schema(const od_op *op);   /* borrowed */
const char *od_op_name(const od_op *op);          /* "aten::add.Tensor"; borrowed */
int od_op_id(const od_op *op);                    /* dense index, for per-op tables */
/* The kernel that serves key k (after fallthrough masking is NOT applied:
 * this reads the slot). NULL when the slot is missing. */
const od_kernel *od_op_slot(const od_op *op, od_key k, od_provenance *prov);
od_keyset od_op_fallthrough_keys(const od_op *op);

/* ---- thread-local state ---- */

typedef struct od_tls {
    od_keyset included; /* stored XOR OD_KS_DEFAULT_INCLUDED: zero is the default */
    od_keyset excluded; /* stored XOR OD_KS_DEFAULT_EXCLUDED */
    struct od_mode_stack *modes;   /* the entered mode stack (borrowed), or NULL */
    struct od_trace *trace;        /* NULL: not tracing (borrowed) */
    struct od_vmap_level *vmap;    /* the innermost entered vmap level (borrowed), or NULL */
    int autocast_dtype;            /* the lower-precision dtype (od_dtype) while autocast is on */
} od_tls;

od_keyset od_tls_included(void);
od_keyset od_tls_excluded(void);
void od_tls_set_included(od_keyset ks);
void od_tls_set_excluded(od_keyset ks);
/* Guard pattern: returns the previous state to pass to od_tls_restore. */
od_tls od_tls_save(void);
void od_tls_restore(const od_tls *saved);
/* Adds keys to the included / excluded set; returns the previous TLS. */
od_tls od_tls_include(od_keyset ks);
od_tls od_tls_exclude(od_keyset ks);
/* Direct access for the tracer (borrowed pointer, per thread). */
od_tls *od_tls_get(void);

/* ---- calls ---- */

/* Computes the key set of a call from the stack's tensor arguments. */
od_keyset od_compute_keyset(const od_op *op, const od_stack *s);
/* Full call: compute key set, look up, run. */
od_status od_call(const od_op *op, od_stack *s, od_error *err);
/* Runs the kernel for exactly ks (minus fallthrough keys). */
od_status od_call_with_keys(const od_op *op, od_keyset ks, od_stack *s, od_error *err);
/* From a kernel that received ks: mask out its key and everything above. */
od_status od_redispatch(const od_op *op, od_keyset ks, od_stack *s, od_error *err);

/* ---- tracing (per thread; what the service reports per request) ---- */

#define OD_TRACE_MAX 32
typedef struct od_trace_step {
    const od_op *op;
    od_key key;
    od_provenance prov;
    const od_kernel *kernel;
    int depth;            /* nesting: 0 for the outer call */
    uint64_t ns;          /* time spent in this step, inner steps included */
    od_status status;
} od_trace_step;

typedef struct od_trace {
    od_keyset first_keyset; /* the key set of the outermost call */
    int nsteps;
    int depth;
    int dropped;            /* steps beyond OD_TRACE_MAX */
    od_trace_step steps[OD_TRACE_MAX];
} od_trace;

/* The key set a call of op with these arguments dispatches on: its
 * tensors' keys plus the thread's included set, minus the excluded set and
 * op's fallthrough keys. Its highest key is the one od_call runs first. */
od_keyset od_call_keyset(const od_op *op, const od_stack *s);
/* od_call, recording what happens in *tr (caller's, overwritten): the key
 * set and every kernel step (key, kernel, provenance, depth, time,
 * status), redispatches and nested operators included. The thread's
 * previous recording, if any, is restored after. This is how a caller
 * observes a call; nothing outside the dispatcher touches od_tls.trace. */
od_status od_call_traced(const od_op *op, od_stack *s, od_trace *tr, od_error *err);

/* Per-call statistics hook: called after every kernel run (outer and
 * redispatched) when set. Must be thread-safe. NULL to remove. */
typedef void (*od_stats_hook)(const od_op *op, od_key key, od_status st, uint64_t ns);
void od_set_stats_hook(od_stats_hook hook);

/* ---- missing-kernel errors (also used by fallbacks) ---- */
od_status od_error_no_kernel(const od_op *op, od_key key, od_error *err);

/* ---- introspection ---- */

/* torch._C._dispatch_dump_table format. Returns a malloc'd string (new). */
char *od_dump_table(const od_op *op);
/* torch._C._dispatch_dump format. Returns a malloc'd string (new). */
char *od_dump_state(const od_op *op);

/* The same data as structures, for the server's JSON. */
typedef struct od_slot_info {
    od_key key;
    od_provenance prov;
    const od_kernel *kernel; /* borrowed; NULL when missing */
} od_slot_info;
/* Fills slots[0..OD_NUM_RUNTIME_KEYS) for op; returns the count of valid slots. */
int od_op_table(const od_op *op, od_slot_info slots[OD_NUM_RUNTIME_KEYS]);

typedef struct od_registration_info {
    od_key key;              /* runtime or alias key */
    const od_kernel *kernel; /* borrowed */
} od_registration_info;
/* Registrations of op in key order (runtime keys, then aliases). */
int od_op_registrations(const od_op *op, od_registration_info *out, int cap);
/* Backend fallback for key, or NULL. */
const od_kernel *od_backend_fallback(od_key key);

#endif
