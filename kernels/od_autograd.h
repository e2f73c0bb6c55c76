/* od_autograd.h — reverse-mode automatic differentiation, as PyTorch's
 * autograd does it: the Autograd kernels record a graph node per operator
 * call on tensors that require grad, and the engine runs the graph backward.
 *
 * Invariants:
 *  - A tensor requires grad only if it is floating point. A leaf (no
 *    grad_fn) that requires grad accumulates its gradient in od_grad(t);
 *    a non-leaf has a grad_fn node, shared by every output of its call.
 *  - Nodes save what their formula may need as plain aliases (no autograd
 *    metadata), so the graph has no reference cycles; a saved tensor
 *    remembers its storage's version and reading it after an in-place
 *    change is PyTorch's version-counter error.
 *  - Grad mode is the Autograd keys of the thread's excluded set: no_grad
 *    and inference_mode exclude them, so no Autograd kernel runs at all.
 *  - The engine runs formulas with grad mode off (no higher-order graphs)
 *    and frees each node's saved values after backward unless retain_graph.
 */
#ifndef OD_AUTOGRAD_H
#define OD_AUTOGRAD_H

#include "od_ops.h"

/* Registers the Autograd kernels of ops.def's ag column and the Autograd
 * fallback that refuses an operator without a formula (from od_init). */
od_status od_register_autograd_kernels(od_error *err);

/* Sets requires_grad on t (borrowed): only a floating-point tensor, only a
 * leaf (PyTorch's messages otherwise). Clearing it on a leaf drops .grad. */
od_status od_set_requires_grad(od_tensor *t, bool on, od_error *err);
/* True when t has no grad_fn (every tensor that does not require grad). */
bool od_is_leaf(const od_tensor *t);
/* "MmBackward0" (static), or NULL for a leaf. */
const char *od_grad_fn_name(const od_tensor *t);
/* t's accumulated gradient (borrowed; NULL when none yet). */
od_tensor *od_grad(const od_tensor *t);
/* Drops t's accumulated gradient (t.grad = None). */
void od_clear_grad(od_tensor *t);

/* Runs the graph of root (borrowed) backward, as root.backward(gradient):
 * gradient (borrowed, may be NULL for a one-element root) seeds it; every
 * leaf reached accumulates into its .grad; the saved values of the nodes
 * run are freed unless retain_graph. Thread-safe for disjoint graphs. */
od_status od_backward(od_tensor *root, od_tensor *gradient, bool retain_graph, od_error *err);

/* Number of graph nodes alive in the process (for leak tests and metrics). */
long od_autograd_live_nodes(void);

/* Grad-mode guards: the previous TLS, to give back to od_tls_restore. */
static inline od_tls od_no_grad_enter(void) { return od_tls_exclude(OD_KS_AUTOGRAD); }
static inline bool od_grad_enabled(void) { return (od_tls_excluded() & OD_KS_AUTOGRAD) == 0; }

#endif
