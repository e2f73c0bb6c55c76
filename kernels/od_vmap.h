/* od_vmap.h — vmap: batched tensors and the Batched key, as functorch's
 * vmap runs per-sample code on a whole batch.
 *
 * Invariants:
 *  - A batched tensor wraps a physical value (itself batched at a lower
 *    level when vmaps nest) with its batch dimension bdim and its level;
 *    the wrapper shows the logical shape (the value's without bdim). Its
 *    keys hold Batched, so every operator on it reaches the Batched key,
 *    whose kernel (a batching rule, or the boxed per-slice fallback)
 *    unwraps the highest level, runs the operator on physical tensors, and
 *    wraps the results with their batch dimension first.
 *  - While a vmap is entered, Batched is in the thread's included set (so
 *    random operators see the vmap's randomness) and the innermost level is
 *    the thread's current one.
 *  - Every use of the per-slice fallback counts against its operator
 *    (od_vmap_fallback_calls), the slow path the stats show.
 */
#ifndef OD_VMAP_H
#define OD_VMAP_H

#include "od_ops.h"

typedef enum od_randomness { OD_RANDOMNESS_ERROR, OD_RANDOMNESS_DIFFERENT, OD_RANDOMNESS_SAME } od_randomness;

typedef struct od_vmap_level {
    int level;        /* 1 for the outermost vmap */
    int64_t size;     /* the batch size */
    od_randomness randomness;
    struct od_vmap_level *outer; /* NULL for the outermost */
} od_vmap_level;

/* Registers the batching rules and the fallback (od_init does). */
od_status od_register_batched_kernels(od_error *err);

/* A batched view of value (borrowed) at level with its batch dim bdim:
 * *out new. */
od_status od_make_batched(od_tensor *value, int64_t bdim, int level, od_tensor **out, od_error *err);
/* t's value at level with the batch dim moved to out_dim (negative counts
 * from the end); a t not batched at level (an output that did not depend
 * on the batch) is expanded to size there. *out new. */
od_status od_unwrap_batched(od_tensor *t, int level, int64_t size, int64_t out_dim, od_tensor **out,
                            od_error *err);
/* Enters level lv (borrowed until restored, lv->outer set by the caller);
 * returns the TLS to give back to od_tls_restore. */
od_tls od_vmap_enter(od_vmap_level *lv);

/* How often op ran through the per-slice fallback (all threads). */
uint64_t od_vmap_fallback_calls(const od_op *op);

#endif
