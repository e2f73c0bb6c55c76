/* engine.c — the Autograd kernels (record a node, redispatch below), the
 * fallback for operators without a formula, and the backward engine.
 *
 * Invariants:
 *  - The Autograd kernel runs the operator below the Autograd keys with
 *    those keys excluded for nested calls (PyTorch's
 *    AutoDispatchBelowADInplaceOrView), then records one node when any
 *    tensor input requires grad. A failed call records nothing.
 *  - The engine discovers the graph from the root, counts each node's
 *    dependencies, and runs a node once every node that feeds it has run
 *    (the ready node created last goes first, as PyTorch orders by sequence
 *    number). Gradients for one input are summed before its node runs.
 *  - Backward passes run one at a time (g_engine_lock). Leaf accumulation
 *    is serialised by one mutex and writes into the
 *    existing .grad tensor in place, so a stored gradient keeps its identity
 *    across backward passes.
 *  - Everything a backward pass allocates is released on every path.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "autograd.h"

static atomic_long g_live_nodes;
static atomic_ullong g_seq;
static pthread_mutex_t g_leaf_lock = PTHREAD_MUTEX_INITIALIZER;
/* One backward pass at a time: two passes through a shared graph would
 * otherwise free a node's saved tensors while the other reads them. */
static pthread_mutex_t g_engine_lock = PTHREAD_MUTEX_INITIALIZER;

long od_autograd_live_nodes(void) { return atomic_load(&g_live_nodes); }

/* ---- per-tensor metadata --------------------------------------------------------- */

static void meta_free(void *p)
{
    ag_meta *m = p;
    ag_node_release(m->grad_fn);
    od_tensor_release(m->grad);
    free(m);
}

ag_meta *ag_meta_of(od_tensor *t, bool create)
{
    if (t->autograd || !create)
        return t->autograd;
    ag_meta *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    t->autograd = m;
    t->autograd_free = meta_free;
    return m;
}

bool od_is_leaf(const od_tensor *t)
{
    const ag_meta *m = t->autograd;
    return !m || !m->grad_fn;
}

const char *od_grad_fn_name(const od_tensor *t)
{
    const ag_meta *m = t->autograd;
    return m && m->grad_fn ? m->grad_fn->name : NULL;
}

od_tensor *od_grad(const od_tensor *t)
{
    const ag_meta *m = t->autograd;
    return m ? m->grad : NULL;
}

void od_clear_grad(od_tensor *t)
{
    pthread_mutex_lock(&g_leaf_lock);
    ag_meta *m = t->autograd;
    od_tensor *g = m ? m->grad : NULL;
    if (m)
        m->grad = NULL;
    pthread_mutex_unlock(&g_leaf_lock);
    od_tensor_release(g);
}

od_status od_set_requires_grad(od_tensor *t, bool on, od_error *err)
{
    if (on && !od_dtype_is_floating(t->dtype))
        return od_error_set(err, OD_EMISMATCH,
                            "only Tensors of floating point dtype can require gradients, got %s",
                            od_dtype_name(t->dtype));
    if (!od_is_leaf(t))
        return od_error_set(err, OD_EMISMATCH,
                            "you can only change requires_grad flags of leaf variables.%s",
                            on ? "" : " If you want to use a computed variable in a subgraph that "
                                      "doesn't require differentiation use var_no_grad = var.detach().");
    t->requires_grad = on;
    if (!on)
        od_clear_grad(t);
    od_tensor_refresh_keys(t);
    return OD_OK;
}

/* ---- nodes ---------------------------------------------------------------------- */

void ag_node_retain(od_node *n)
{
    if (n)
        atomic_fetch_add_explicit(&n->refcount, 1, memory_order_relaxed);
}

/* Frees the saved tensors; the other arguments (dims, scalars) stay until
 * the node dies, as PyTorch keeps a node's non-tensor attributes. */
void ag_node_free_saved(od_node *n)
{
    for (int i = 0; i < n->nargs; i++)
        if (n->args[i].tag == OD_T_TENSOR || n->args[i].tag == OD_T_TENSOR_LIST)
            od_value_release(&n->args[i]);
    for (int i = 0; i < n->nouts; i++) {
        od_tensor_release(n->outs[i]);
        n->outs[i] = NULL;
    }
    n->freed = true;
}

/* Releasing a long chain recursively could exhaust a worker's stack: the
 * nodes whose count drops to zero go on a local list instead. */
void ag_node_release(od_node *n)
{
    od_node *pending[64];
    int np = 0;
    od_node **big = NULL;
    size_t nbig = 0, capbig = 0;
    while (n) {
        if (atomic_fetch_sub_explicit(&n->refcount, 1, memory_order_acq_rel) == 1) {
            ag_node_free_saved(n);
            for (int i = 0; i < n->nargs; i++)
                od_value_release(&n->args[i]);
            for (int k = 0; k < n->nin; k++) {
                od_tensor_release(n->edges[k].leaf);
                od_node *f = n->edges[k].fn;
                if (!f)
                    continue;
                if (np < 64) {
                    pending[np++] = f;
                } else {
                    if (nbig == capbig) {
                        size_t nc = capbig ? capbig * 2 : 64;
                        od_node **nb = realloc(big, nc * sizeof *nb);
                        if (!nb) { /* fall back to recursion for this one */
                            ag_node_release(f);
                            continue;
                        }
                        big = nb;
                        capbig = nc;
                    }
                    big[nbig++] = f;
                }
            }
            free(n->in_meta);
            free(n);
            atomic_fetch_sub_explicit(&g_live_nodes, 1, memory_order_relaxed);
        }
        n = np ? pending[--np] : nbig ? big[--nbig] : NULL;
    }
    free(big);
}

static void tmeta_of(const od_tensor *t, ag_tmeta *m)
{
    m->dtype = t->dtype;
    m->device = t->device;
    m->ndim = t->ndim;
    memcpy(m->sizes, t->sizes, (size_t)t->ndim * sizeof t->sizes[0]);
}

/* A plain alias of t: same storage and view, no autograd metadata. */
static od_status alias_of(od_tensor *t, od_tensor **out, od_error *err)
{
    return od_tensor_as_strided(t, t->sizes, t->strides, t->ndim, t->offset, out, err);
}

static od_status save_value(const od_value *v, od_value *dst, unsigned *version, od_error *err)
{
    if (v->tag == OD_T_TENSOR && v->u.t) {
        od_tensor *a = NULL;
        od_status st = alias_of(v->u.t, &a, err);
        if (st)
            return st;
        *dst = od_tensor_v(a);
        *version = od_tensor_version(v->u.t);
        return OD_OK;
    }
    if (v->tag == OD_T_TENSOR_LIST) {
        size_t n = v->u.list.n;
        od_tensor **src = v->u.list.items, **ts = calloc(n ? n : 1, sizeof *ts);
        if (!ts)
            return od_error_set(err, OD_ENOMEM, "out of memory recording a graph node");
        *dst = od_list_v(OD_T_TENSOR_LIST, ts, n);
        for (size_t i = 0; i < n; i++)
            if (src[i]) {
                od_status st = alias_of(src[i], &ts[i], err);
                if (st)
                    return st; /* the caller releases *dst */
            }
        return OD_OK;
    }
    return od_value_clone(v, dst, err);
}

static int count_inputs(const od_stack *s)
{
    int n = 0;
    for (int i = 0; i < s->nargs; i++)
        n += s->args[i].tag == OD_T_TENSOR         ? 1
             : s->args[i].tag == OD_T_TENSOR_LIST ? (int)s->args[i].u.list.n
                                                  : 0;
    return n;
}

static void set_input(od_node *n, int k, int arg, od_tensor *t)
{
    n->in_arg[k] = arg;
    if (!t)
        return;
    tmeta_of(t, &n->in_meta[k]);
    ag_meta *m = t->autograd;
    if (m && m->grad_fn) {
        ag_node_retain(m->grad_fn);
        n->edges[k].fn = m->grad_fn;
        n->edges[k].input_nr = m->output_nr;
    } else if (t->requires_grad) {
        od_tensor_retain(t);
        n->edges[k].leaf = t;
    }
}

static bool is_input(const od_stack *s, const od_tensor *t)
{
    for (int i = 0; i < s->nargs; i++)
        if (s->args[i].tag == OD_T_TENSOR && s->args[i].u.t == t)
            return true;
    return false;
}

/* Builds the node of a call that just ran and hangs it on the outputs. */
static od_status record(const char *name, ag_formula formula, const od_op *op, od_stack *s,
                        bool inplace, od_error *err)
{
    int nin = count_inputs(s);
    od_node *n = calloc(1, sizeof *n);
    void *block = n ? calloc((size_t)(nin ? nin : 1),
                             sizeof(int) + sizeof(ag_edge) + sizeof(ag_tmeta))
                    : NULL;
    if (!n || !block) {
        free(n);
        free(block);
        return od_error_set(err, OD_ENOMEM, "out of memory recording the graph node of %s",
                            od_op_name(op));
    }
    atomic_init(&n->refcount, 1);
    atomic_fetch_add_explicit(&g_live_nodes, 1, memory_order_relaxed);
    n->name = name;
    n->op = op;
    n->formula = formula;
    n->seq = atomic_fetch_add_explicit(&g_seq, 1, memory_order_relaxed);
    n->nin = nin;
    /* one block, most aligned first: the input shapes (what
     * ag_node_release frees), the edges, the argument positions */
    size_t cnt = (size_t)(nin ? nin : 1);
    n->in_meta = block;
    n->edges = (ag_edge *)(n->in_meta + cnt);
    n->in_arg = (int *)(n->edges + cnt);

    od_status st = OD_OK;
    int k = 0;
    n->nargs = s->nargs;
    for (int i = 0; i < s->nargs; i++) {
        const od_value *v = &s->args[i];
        if (v->tag == OD_T_TENSOR)
            set_input(n, k++, i, v->u.t);
        else if (v->tag == OD_T_TENSOR_LIST)
            for (size_t j = 0; j < v->u.list.n; j++)
                set_input(n, k++, i, ((od_tensor **)v->u.list.items)[j]);
        if (st == OD_OK)
            st = save_value(v, &n->args[i], &n->arg_version[i], err);
    }
    n->nouts = s->nrets;
    for (int i = 0; i < s->nrets && st == OD_OK; i++) {
        od_value *r = &s->rets[i];
        if (r->tag != OD_T_TENSOR || !r->u.t)
            continue;
        /* an output that is one of the inputs (not in place) gets its own
         * tensor, so the input's history is not rewritten */
        if (!inplace && is_input(s, r->u.t)) {
            od_tensor *a = NULL;
            if ((st = alias_of(r->u.t, &a, err)) != OD_OK)
                break;
            od_tensor_release(r->u.t);
            r->u.t = a;
        }
        tmeta_of(r->u.t, &n->out_meta[i]);
        n->out_version[i] = od_tensor_version(r->u.t);
        st = alias_of(r->u.t, &n->outs[i], err);
    }
    for (int i = 0; i < s->nrets && st == OD_OK; i++) {
        od_tensor *t = s->rets[i].tag == OD_T_TENSOR ? s->rets[i].u.t : NULL;
        if (!t || !od_dtype_is_floating(t->dtype))
            continue; /* integer outputs (indices) are not differentiable */
        ag_meta *m = ag_meta_of(t, true);
        if (!m) {
            st = od_error_set(err, OD_ENOMEM, "out of memory recording a graph node");
            break;
        }
        ag_node_retain(n);
        ag_node_release(m->grad_fn);
        m->grad_fn = n;
        m->output_nr = i;
        t->requires_grad = true;
        od_tensor_refresh_keys(t);
    }
    ag_node_release(n);
    return st;
}

/* ---- the kernels ------------------------------------------------------------- */

typedef struct ag_entry {
    const char *name; /* grad_fn name, "NONDIFF" or "0" */
    ag_formula formula;
    int line;
} ag_entry;

static bool any_requires_grad(const od_stack *s)
{
    for (int i = 0; i < s->nargs; i++) {
        const od_value *v = &s->args[i];
        if (v->tag == OD_T_TENSOR && v->u.t && v->u.t->requires_grad)
            return true;
        if (v->tag == OD_T_TENSOR_LIST)
            for (size_t j = 0; j < v->u.list.n; j++) {
                od_tensor *t = ((od_tensor **)v->u.list.items)[j];
                if (t && t->requires_grad)
                    return true;
            }
    }
    return false;
}

/* The call below the Autograd keys, with them excluded for nested calls. */
static od_status below_autograd(const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    od_tls prev = od_no_grad_enter();
    od_status st = od_call_with_keys(op, ks & od_ks_below(OD_KEY_AutogradOther), s, err);
    od_tls_restore(&prev);
    return st;
}

static bool writes_self(const od_op *op)
{
    const od_schema *sc = od_op_schema(op);
    return sc->nargs > 0 && sc->args[0].alias && sc->args[0].alias->is_write;
}

static od_status ag_kernel(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    const ag_entry *e = ctx;
    bool need = any_requires_grad(s);
    bool inplace = writes_self(op);
    if (need && inplace && s->args[0].tag == OD_T_TENSOR) {
        od_tensor *self = s->args[0].u.t;
        if (self->requires_grad && od_is_leaf(self))
            return od_error_set(err, OD_EMISMATCH,
                                "%s: a leaf Variable that requires grad is being used in an "
                                "in-place operation.",
                                od_op_name(op));
    }
    od_status st = below_autograd(op, ks, s, err);
    if (st != OD_OK || !need)
        return st;
    if ((st = record(e->name, e->formula, op, s, inplace, err)) != OD_OK)
        od_stack_release_rets(s);
    return st;
}

/* Comparisons, argmax, bitwise and logical operators: never differentiable,
 * their outputs do not require grad (PyTorch's autograd kernel for them
 * records nothing either). */
static od_status ag_nondiff(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)ctx;
    return below_autograd(op, ks, s, err);
}

/* Every operator without a formula: an error naming it when a tensor
 * argument requires grad, never a silent detach. */
static od_status ag_missing(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)ctx;
    if (any_requires_grad(s))
        return od_error_set(err, OD_ENOKERNEL,
                            "the derivative for '%s' is not implemented: it cannot run on tensors "
                            "that require grad (send them without requires_grad, or call it with "
                            "\"grad_mode\": \"no_grad\")",
                            od_op_name(op));
    return below_autograd(op, ks, s, err);
}

static ag_entry g_entries[OD_NUM_BUILTIN_OPS] = {
#define OD_OP(id, schema, shape, cpu, cuda, cea, cia, bs, ag) [OD_OPID_##id] = {#ag, NULL, __LINE__},
#include "ops.def"
#undef OD_OP
};

od_status od_register_autograd_kernels(od_error *err)
{
    od_status st = od_fallback(OD_KEY_AutogradOther, ag_missing, NULL, "autograd_not_implemented",
                               __FILE__, __LINE__, err);
    if (!st)
        st = od_fallback(OD_KEY_AutogradCPU, ag_missing, NULL, "autograd_not_implemented", __FILE__,
                         __LINE__, err);
    if (!st)
        st = od_fallback(OD_KEY_AutogradCUDA, ag_missing, NULL, "autograd_not_implemented", __FILE__,
                         __LINE__, err);
    for (int i = 0; i < OD_NUM_BUILTIN_OPS && !st; i++) {
        ag_entry *e = &g_entries[i];
        od_op *op = (od_op *)od_builtin((od_opid)i); /* registration is the one writer */
        if (!strcmp(e->name, "0"))
            continue;
        if (!strcmp(e->name, "NONDIFF")) {
            st = od_impl(op, OD_KEY_Autograd, ag_nondiff, NULL, "not_differentiable",
                         "kernels/ops.def", e->line, err);
            continue;
        }
        e->formula = ag_formula_of((od_opid)i);
        if (!e->formula)
            return od_error_set(err, OD_EINTERNAL, "ops.def names %s for %s but formulas.c has none",
                                e->name, od_op_name(op));
        st = od_impl(op, OD_KEY_Autograd, ag_kernel, e, e->name, "kernels/ops.def", e->line, err);
    }
    return st;
}

/* ---- the engine --------------------------------------------------------------- */

typedef struct task {
    od_node *n;
    int deps;
    bool done;
    od_tensor *grads[OD_MAX_RETURNS]; /* summed gradient per output of n */
} task;

typedef struct graph {
    task *tasks;
    int ntasks, cap;
    int *index; /* open addressing: task index + 1, 0 empty */
    int nindex;
} graph;

static size_t ptr_hash(const void *p) { return (size_t)(((uintptr_t)p >> 4) * 0x9E3779B97F4A7C15ull); }

static int find_task(const graph *g, const od_node *n)
{
    for (size_t i = ptr_hash(n) & (size_t)(g->nindex - 1);; i = (i + 1) & (size_t)(g->nindex - 1)) {
        int v = g->index[i];
        if (!v)
            return -1;
        if (g->tasks[v - 1].n == n)
            return v - 1;
    }
}

static bool rehash(graph *g, int nindex)
{
    int *ix = calloc((size_t)nindex, sizeof *ix);
    if (!ix)
        return false;
    free(g->index);
    g->index = ix;
    g->nindex = nindex;
    for (int t = 0; t < g->ntasks; t++)
        for (size_t i = ptr_hash(g->tasks[t].n) & (size_t)(nindex - 1);; i = (i + 1) & (size_t)(nindex - 1))
            if (!ix[i]) {
                ix[i] = t + 1;
                break;
            }
    return true;
}

/* Index of n's task, added when new; -1 on allocation failure. */
static int add_task(graph *g, od_node *n, bool *added)
{
    *added = false;
    int t = g->nindex ? find_task(g, n) : -1;
    if (t >= 0)
        return t;
    if (g->ntasks == g->cap) {
        int nc = g->cap ? g->cap * 2 : 16;
        task *nt = realloc(g->tasks, (size_t)nc * sizeof *nt);
        if (!nt)
            return -1;
        g->tasks = nt;
        g->cap = nc;
    }
    if ((g->ntasks + 1) * 2 > g->nindex && !rehash(g, g->nindex ? g->nindex * 2 : 32))
        return -1;
    t = g->ntasks++;
    memset(&g->tasks[t], 0, sizeof g->tasks[t]);
    g->tasks[t].n = n;
    for (size_t i = ptr_hash(n) & (size_t)(g->nindex - 1);; i = (i + 1) & (size_t)(g->nindex - 1))
        if (!g->index[i]) {
            g->index[i] = t + 1;
            break;
        }
    *added = true;
    return t;
}

static void graph_free(graph *g)
{
    for (int t = 0; t < g->ntasks; t++)
        for (int i = 0; i < OD_MAX_RETURNS; i++)
            od_tensor_release(g->tasks[t].grads[i]);
    free(g->tasks);
    free(g->index);
}

/* Every node reachable from root, with the count of edges into each. */
static od_status discover(graph *g, od_node *root, od_error *err)
{
    bool added;
    if (add_task(g, root, &added) < 0)
        return od_error_set(err, OD_ENOMEM, "out of memory running backward");
    for (int t = 0; t < g->ntasks; t++) { /* the task list doubles as the BFS queue */
        od_node *n = g->tasks[t].n;
        for (int k = 0; k < n->nin; k++) {
            od_node *f = n->edges[k].fn;
            if (!f)
                continue;
            int u = add_task(g, f, &added);
            if (u < 0)
                return od_error_set(err, OD_ENOMEM, "out of memory running backward");
            g->tasks[u].deps++;
        }
    }
    return OD_OK;
}

static od_status sum_into(od_tensor **acc, od_tensor *g, od_error *err)
{
    if (!*acc) {
        od_tensor_retain(g);
        *acc = g;
        return OD_OK;
    }
    od_tensor *s = NULL;
    od_status st = od_add(*acc, g, 1.0, &s, err);
    if (st)
        return st;
    od_tensor_release(*acc);
    *acc = s;
    return OD_OK;
}

/* Reduces a broadcast gradient to the input's shape (sum_to_size) and gives
 * it the input's dtype and device. *out new. */
static od_status fit_grad(const od_node *n, int k, od_tensor *g, od_tensor **out, od_error *err)
{
    const ag_tmeta *m = &n->in_meta[k];
    ag_scope sc = {.err = err};
    od_tensor *r = g;
    bool same = r->ndim == m->ndim && !memcmp(r->sizes, m->sizes, (size_t)m->ndim * sizeof m->sizes[0]);
    if (!same) {
        int lead = r->ndim - m->ndim;
        int64_t dims[OD_MAX_DIMS];
        int nd = 0;
        bool ok = lead >= 0;
        for (int i = 0; ok && i < r->ndim; i++) {
            if (i < lead)
                dims[nd++] = i;
            else if (m->sizes[i - lead] == 1 && r->sizes[i] != 1)
                dims[nd++] = i;
            else if (m->sizes[i - lead] != r->sizes[i])
                ok = false;
        }
        if (!ok) {
            char a[256], b[256];
            od_shape_print(r->sizes, r->ndim, a, sizeof a);
            od_shape_print(m->sizes, m->ndim, b, sizeof b);
            return od_error_set(err, OD_EINTERNAL,
                                "Function %s returned an invalid gradient at index %d - got %s but "
                                "expected shape compatible with %s",
                                n->name, k, a, b);
        }
        if (nd)
            r = ag_sum_dims(&sc, r, dims, nd, true);
        if (r)
            r = ag_reshape(&sc, r, m->sizes, m->ndim);
    }
    if (r && (r->dtype != m->dtype || !od_device_eq(r->device, m->device)))
        r = ag_to(&sc, r, m->dtype, m->device);
    if (r)
        od_tensor_retain(r);
    for (int i = 0; i < sc.n; i++)
        od_tensor_release(sc.tmp[i]);
    *out = r;
    return r ? OD_OK : sc.st;
}

static od_status accumulate_leaf(od_tensor *leaf, od_tensor *g, od_error *err)
{
    od_status st = OD_OK;
    pthread_mutex_lock(&g_leaf_lock);
    ag_meta *m = ag_meta_of(leaf, true);
    if (!m) {
        st = od_error_set(err, OD_ENOMEM, "out of memory accumulating a gradient");
    } else if (!m->grad) {
        /* a gradient nobody else can see becomes .grad as it is; anything
         * shared (the seed, a view) is copied first */
        bool own = atomic_load(&g->refcount) == 1 && atomic_load(&g->storage->refcount) == 1 &&
                   od_tensor_is_contiguous(g) && g->offset == 0;
        if (own) {
            od_tensor_retain(g);
            m->grad = g;
        } else {
            od_value a[2] = {od_tensor_v(g), od_int(0 /* contiguous */)};
            st = od_call_builtin1(OD_OPID_clone, a, 2, &m->grad, err);
        }
    } else {
        od_tensor *sum = NULL;
        if ((st = od_add(m->grad, g, 1.0, &sum, err)) == OD_OK) {
            od_value a[3] = {od_tensor_v(m->grad), od_tensor_v(sum), od_bool(false)};
            od_stack s;
            if ((st = od_call_builtin(OD_OPID_copy_, a, 3, &s, err)) == OD_OK)
                od_stack_release_rets(&s);
        }
        od_tensor_release(sum);
    }
    pthread_mutex_unlock(&g_leaf_lock);
    return st;
}

static od_status run_task(graph *g, task *tk, bool retain, od_error *err)
{
    od_node *n = tk->n;
    od_status st = OD_OK;
    bool any = false;
    for (int i = 0; i < n->nouts; i++)
        any |= tk->grads[i] != NULL;
    od_tensor **gin = calloc((size_t)(n->nin ? n->nin : 1), sizeof *gin);
    bool *need = calloc((size_t)(n->nin ? n->nin : 1), sizeof *need);
    if (!gin || !need) {
        free(gin);
        free(need);
        return od_error_set(err, OD_ENOMEM, "out of memory running backward");
    }
    for (int k = 0; k < n->nin; k++)
        need[k] = n->edges[k].fn || n->edges[k].leaf;
    if (any) {
        ag_scope sc = {.err = err};
        n->formula(n, tk->grads, gin, need, &sc);
        for (int i = 0; i < sc.n; i++)
            od_tensor_release(sc.tmp[i]);
        st = sc.st;
    }
    for (int k = 0; k < n->nin && st == OD_OK; k++) {
        if (!gin[k] || !need[k])
            continue;
        od_tensor *fit = NULL;
        if ((st = fit_grad(n, k, gin[k], &fit, err)) != OD_OK)
            break;
        const ag_edge *e = &n->edges[k];
        if (e->leaf) {
            st = accumulate_leaf(e->leaf, fit, err);
        } else {
            int u = find_task(g, e->fn);
            st = sum_into(&g->tasks[u].grads[e->input_nr], fit, err);
        }
        od_tensor_release(fit);
    }
    for (int k = 0; k < n->nin; k++)
        od_tensor_release(gin[k]);
    free(gin);
    free(need);
    for (int i = 0; i < OD_MAX_RETURNS; i++) {
        od_tensor_release(tk->grads[i]);
        tk->grads[i] = NULL;
    }
    if (!retain)
        ag_node_free_saved(n);
    return st;
}

static od_status seed_of(od_tensor *root, od_tensor *gradient, od_tensor **out, od_error *err)
{
    char a[256], b[256];
    if (!gradient) {
        if (od_tensor_numel(root) != 1)
            return od_error_set(err, OD_EMISMATCH,
                                "grad can be implicitly created only for scalar outputs");
        od_value v[6] = {od_list_v(OD_T_INT_LIST, root->sizes, (size_t)root->ndim),
                         od_double(1.0), od_dtype_v(root->dtype), od_none(),
                         od_device_v(root->device), od_none()};
        return od_call_builtin1(OD_OPID_full, v, 6, out, err);
    }
    if (gradient->ndim != root->ndim ||
        memcmp(gradient->sizes, root->sizes, (size_t)root->ndim * sizeof root->sizes[0])) {
        od_shape_print(gradient->sizes, gradient->ndim, a, sizeof a);
        od_shape_print(root->sizes, root->ndim, b, sizeof b);
        return od_error_set(err, OD_EMISMATCH,
                            "Mismatch in shape: grad_output[0] has a shape of torch.Size(%s) and "
                            "output[0] has a shape of torch.Size(%s).",
                            a, b);
    }
    if (!od_dtype_is_floating(gradient->dtype))
        return od_error_set(err, OD_EMISMATCH,
                            "invalid gradient at index 0 - expected a floating point dtype, got %s",
                            od_dtype_name(gradient->dtype));
    if (gradient->dtype == root->dtype && od_device_eq(gradient->device, root->device)) {
        od_tensor_retain(gradient);
        *out = gradient;
        return OD_OK;
    }
    od_value v[7] = {od_tensor_v(gradient), od_dtype_v(root->dtype), od_none(),
                     od_device_v(root->device), od_none(), od_bool(false), od_none()};
    return od_call_builtin1(OD_OPID__to_copy, v, 7, out, err);
}

od_status od_backward(od_tensor *root, od_tensor *gradient, bool retain, od_error *err)
{
    if (!root->requires_grad)
        return od_error_set(err, OD_EMISMATCH,
                            "element 0 of tensors does not require grad and does not have a grad_fn");
    pthread_mutex_lock(&g_engine_lock);
    od_tls prev = od_no_grad_enter();
    od_tensor *seed = NULL;
    od_status st = seed_of(root, gradient, &seed, err);
    ag_meta *m = root->autograd;
    if (st == OD_OK && (!m || !m->grad_fn)) { /* a leaf: its own gradient */
        st = accumulate_leaf(root, seed, err);
        od_tensor_release(seed);
        od_tls_restore(&prev);
        pthread_mutex_unlock(&g_engine_lock);
        return st;
    }
    graph g = {0};
    if (st == OD_OK)
        st = discover(&g, m->grad_fn, err);
    if (st == OD_OK) {
        g.tasks[0].grads[m->output_nr] = seed;
        seed = NULL;
    }
    while (st == OD_OK) {
        /* the ready task created last; a linear scan is cheap next to the
         * kernels each task runs */
        int best = -1;
        for (int t = 0; t < g.ntasks; t++)
            if (!g.tasks[t].done && g.tasks[t].deps == 0 &&
                (best < 0 || g.tasks[t].n->seq > g.tasks[best].n->seq))
                best = t;
        if (best < 0)
            break;
        task *tk = &g.tasks[best];
        tk->done = true;
        st = run_task(&g, tk, retain, err);
        for (int k = 0; k < tk->n->nin; k++)
            if (tk->n->edges[k].fn)
                g.tasks[find_task(&g, tk->n->edges[k].fn)].deps--;
    }
    od_tensor_release(seed);
    graph_free(&g);
    od_tls_restore(&prev);
    pthread_mutex_unlock(&g_engine_lock);
    return st;
}
