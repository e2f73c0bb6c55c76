/* autograd.h — private to kernels/autograd/: graph nodes, the per-tensor
 * autograd metadata, and the helpers the backward formulas are written in.
 *
 * Invariants:
 *  - A node is reference counted: each output tensor's metadata and each
 *    edge of a later node hold one reference. Edges to leaves hold a
 *    reference on the leaf tensor (PyTorch's AccumulateGrad).
 *  - node->args is an owned copy of the call's arguments with every tensor
 *    replaced by a plain alias; node->outs likewise for the outputs. Both
 *    are released when the graph is freed (backward without retain_graph)
 *    and reading them afterwards is PyTorch's "backward through the graph
 *    a second time" error. Input and output shapes survive that (in_meta,
 *    out_meta), as PyTorch keeps sizes outside its saved variables.
 *  - Formulas run with grad mode off. They see the gradient of each output
 *    (NULL: none reached it) and write a new reference, or NULL for "no
 *    gradient", per tensor input; the engine then reduces a broadcast
 *    gradient to the input's shape and converts dtype and device.
 */
#ifndef OD_AUTOGRAD_PRIV_H
#define OD_AUTOGRAD_PRIV_H

#include "od_autograd.h"

typedef struct od_node od_node;

typedef struct ag_tmeta {
    od_dtype dtype;
    od_device device;
    int ndim;
    int64_t sizes[OD_MAX_DIMS];
} ag_tmeta;

typedef struct ag_edge {
    od_node *fn;     /* owned; NULL for a leaf edge or no edge */
    int input_nr;    /* which output of fn this input was */
    od_tensor *leaf; /* owned; a leaf that requires grad */
} ag_edge;

/* What a formula may allocate and what went wrong: every helper returns
 * NULL once st is set, so a formula reads like its math and checks once. */
#define AG_SCOPE_MAX 64
typedef struct ag_scope {
    od_tensor *tmp[AG_SCOPE_MAX];
    int n;
    od_status st;
    od_error *err;
} ag_scope;

typedef void (*ag_formula)(od_node *n, od_tensor *const *gout, od_tensor **gin, const bool *need,
                           ag_scope *sc);

struct od_node {
    atomic_long refcount;
    const char *name; /* grad_fn name, static */
    const od_op *op;
    ag_formula formula;
    uint64_t seq; /* creation order: later nodes run first among the ready */
    int nargs;
    od_value args[OD_MAX_ARGS];
    unsigned arg_version[OD_MAX_ARGS];
    int nouts;
    od_tensor *outs[OD_MAX_RETURNS];
    unsigned out_version[OD_MAX_RETURNS];
    ag_tmeta out_meta[OD_MAX_RETURNS];
    bool freed;
    int nin;          /* tensor inputs, lists flattened, in argument order */
    int *in_arg;      /* the argument each input came from */
    ag_edge *edges;
    ag_tmeta *in_meta;
};

typedef struct ag_meta {
    od_node *grad_fn; /* owned; NULL for a leaf */
    int output_nr;
    od_tensor *grad;  /* owned; accumulated gradient of a leaf */
} ag_meta;

/* The metadata of t, created when create (NULL on allocation failure or
 * when t has none and !create). */
ag_meta *ag_meta_of(od_tensor *t, bool create);
void ag_node_retain(od_node *n);
void ag_node_release(od_node *n);
/* Releases the saved values of n (the graph is "freed"). */
void ag_node_free_saved(od_node *n);

/* ---- formula helpers (all take the scope; NULL once it has failed) ---- */

/* Saved input tensor of argument i / output i, checked against the graph
 * being freed and the version counter. Borrowed from the node. */
od_tensor *ag_saved(ag_scope *sc, od_node *n, int i);
od_tensor *ag_saved_out(ag_scope *sc, od_node *n, int i);
/* The saved (non-tensor) argument i, borrowed. */
const od_value *ag_arg(od_node *n, int i);
/* The flattened input index of argument i (its first element for a list),
 * or -1 when argument i holds no tensor. */
int ag_in(od_node *n, int i);
/* Takes a new reference into the scope (released when the formula ends). */
od_tensor *ag_tmp(ag_scope *sc, od_tensor *t);
/* A new reference for gin[]. */
od_tensor *ag_give(ag_scope *sc, od_tensor *t);

/* Calls built-in id on nargs values; its one tensor return lives in the scope. */
od_tensor *ag_call(ag_scope *sc, od_opid id, int nargs, ...);

/* Shorthands over ag_call (tensors borrowed). */
od_tensor *ag_add(ag_scope *sc, od_tensor *a, od_tensor *b);
od_tensor *ag_sub(ag_scope *sc, od_tensor *a, od_tensor *b);
od_tensor *ag_mul(ag_scope *sc, od_tensor *a, od_tensor *b);
od_tensor *ag_div(ag_scope *sc, od_tensor *a, od_tensor *b);
od_tensor *ag_muls(ag_scope *sc, od_tensor *a, double s);
od_tensor *ag_adds(ag_scope *sc, od_tensor *a, double s);
od_tensor *ag_neg(ag_scope *sc, od_tensor *a);
od_tensor *ag_unary(ag_scope *sc, od_opid id, od_tensor *a);
od_tensor *ag_cmp(ag_scope *sc, od_opid id, od_tensor *a, od_tensor *b); /* a Tensor-overload compare */
od_tensor *ag_cmps(ag_scope *sc, od_opid id, od_tensor *a, double s);   /* a Scalar-overload compare */
/* where(cond, a, 0) and where(cond, 0, a). */
od_tensor *ag_where0(ag_scope *sc, od_tensor *cond, od_tensor *a, bool a_when_true);
od_tensor *ag_sum_dims(ag_scope *sc, od_tensor *a, const int64_t *dims, int n, bool keepdim);
od_tensor *ag_reshape(ag_scope *sc, od_tensor *a, const int64_t *sizes, int n);
od_tensor *ag_expand(ag_scope *sc, od_tensor *a, const int64_t *sizes, int n);
od_tensor *ag_transpose(ag_scope *sc, od_tensor *a, int64_t d0, int64_t d1);
od_tensor *ag_mm(ag_scope *sc, od_tensor *a, od_tensor *b);
od_tensor *ag_zeros(ag_scope *sc, const ag_tmeta *m);
od_tensor *ag_to(ag_scope *sc, od_tensor *a, od_dtype dt, od_device dev);

/* The formula of each built-in operator (NULL when none), by opid. */
ag_formula ag_formula_of(od_opid id);

#endif
