/* batched.c — the Batched key: batching rules for the operators that have
 * one, and the boxed fallback that loops over the batch for every other.
 *
 * Invariants:
 *  - A rule unwraps the highest level present among its tensor arguments
 *    (moving each batch dim to the front), calls the operator on the
 *    physical tensors through the full dispatcher (lower levels, Autograd
 *    and the backends still apply), and wraps every tensor result at that
 *    level with batch dim 0. A call without a batched argument goes below
 *    the Batched key unchanged.
 *  - Rules: per-element operators pad each batched argument's logical rank
 *    to the output's so broadcasting aligns; dim-taking operators shift
 *    their dims by one; sizes gain the batch size in front; mm, bmm, dot
 *    and addmm become matmul over physical tensors; composite-implicit
 *    operators run their decomposition on the batched tensors.
 *  - The fallback selects slice b of every batched argument, calls the
 *    operator per slice and stacks the results: results equal a loop over
 *    samples, at the cost of B calls, counted per operator.
 *  - Temporaries are released on every path.
 */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "od_shape.h"
#include "od_vmap.h"

static _Atomic uint64_t g_fallback_calls[OD_NUM_BUILTIN_OPS + 1]; /* the last: every other operator */

uint64_t od_vmap_fallback_calls(const od_op *op)
{
    int id = od_op_id(op);
    return id < OD_NUM_BUILTIN_OPS ? atomic_load(&g_fallback_calls[id]) : 0;
}

/* ---- wrapping ------------------------------------------------------------------ */

od_status od_make_batched(od_tensor *value, int64_t bdim, int level, od_tensor **out, od_error *err)
{
    int nd = value->ndim;
    if (bdim < 0)
        bdim += nd;
    if (bdim < 0 || bdim >= nd)
        return od_error_set(err, OD_EINVAL,
                            "vmap: the batch dim %lld is out of range for a tensor of %d dimensions",
                            (long long)bdim, nd);
    int64_t sizes[OD_MAX_DIMS], strides[OD_MAX_DIMS];
    for (int i = 0, j = 0; i < nd; i++)
        if (i != bdim) {
            sizes[j] = value->sizes[i];
            strides[j++] = value->strides[i];
        }
    od_status st = od_tensor_as_strided(value, sizes, strides, nd - 1, value->offset, out, err);
    if (st)
        return st;
    od_tensor_retain(value);
    (*out)->batched_value = value;
    (*out)->bdim = (int)bdim;
    (*out)->level = level;
    od_tensor_refresh_keys(*out);
    return OD_OK;
}

static od_status call1(od_opid id, od_tensor **out, od_error *err, int nargs, ...)
{
    od_value a[OD_MAX_ARGS];
    va_list ap;
    va_start(ap, nargs);
    for (int i = 0; i < nargs; i++)
        a[i] = va_arg(ap, od_value);
    va_end(ap);
    return od_call_builtin1(id, a, nargs, out, err);
}

#define T(x) od_tensor_v(x)
#define IL(p, n) od_list_v(OD_T_INT_LIST, (void *)(p), (size_t)(n))

/* dim `from` of t moved to `to` (a permute through the dispatcher). */
static od_status movedim(od_tensor *t, int from, int to, od_tensor **out, od_error *err)
{
    if (from == to) {
        od_tensor_retain(t);
        *out = t;
        return OD_OK;
    }
    int64_t perm[OD_MAX_DIMS];
    int n = 0;
    for (int i = 0; i < t->ndim; i++)
        if (i != from)
            perm[n++] = i;
    memmove(perm + to + 1, perm + to, (size_t)(n - to) * sizeof perm[0]);
    perm[to] = from;
    return call1(OD_OPID_permute, out, err, 2, T(t), IL(perm, t->ndim));
}

od_status od_unwrap_batched(od_tensor *t, int level, int64_t size, int64_t out_dim, od_tensor **out,
                            od_error *err)
{
    bool batched = t->batched_value && t->level == level;
    int nd = t->ndim + 1;
    if (out_dim < 0)
        out_dim += nd;
    if (out_dim < 0 || out_dim >= nd)
        return od_error_set(err, OD_EINVAL, "vmap: out_dims %lld is out of range for a result of %d dimensions",
                            (long long)out_dim, nd);
    if (batched)
        return movedim(t->batched_value, t->bdim, (int)out_dim, out, err);
    /* the result did not depend on the batch: the same for every sample */
    od_tensor *u = NULL;
    od_status st = call1(OD_OPID_unsqueeze, &u, err, 2, T(t), od_int(out_dim));
    if (st)
        return st;
    int64_t sizes[OD_MAX_DIMS];
    memcpy(sizes, u->sizes, (size_t)u->ndim * sizeof sizes[0]);
    sizes[out_dim] = size;
    st = call1(OD_OPID_expand, out, err, 3, T(u), IL(sizes, u->ndim), od_bool(false));
    od_tensor_release(u);
    return st;
}

od_tls od_vmap_enter(od_vmap_level *lv)
{
    od_tls prev = od_tls_include(OD_KS(OD_KEY_Batched));
    od_tls_get()->vmap = lv;
    return prev;
}

/* ---- shared pieces of the rules ---------------------------------------------- */

static void for_tensors(const od_value *v, void (*fn)(od_tensor *t, void *ctx), void *ctx)
{
    if (v->tag == OD_T_TENSOR && v->u.t)
        fn(v->u.t, ctx);
    else if (v->tag == OD_T_TENSOR_LIST)
        for (size_t j = 0; j < v->u.list.n; j++)
            if (((od_tensor **)v->u.list.items)[j])
                fn(((od_tensor **)v->u.list.items)[j], ctx);
}

static void max_level_fn(od_tensor *t, void *ctx)
{
    int *l = ctx;
    if (t->batched_value && t->level > *l)
        *l = t->level;
}

/* The highest vmap level among s's tensor arguments; 0 when none is batched. */
static int level_of(const od_stack *s)
{
    int l = 0;
    for (int i = 0; i < s->nargs; i++)
        for_tensors(&s->args[i], max_level_fn, &l);
    return l;
}

static bool batched_at(const od_tensor *t, int level) { return t && t->batched_value && t->level == level; }

static od_status below(const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    return od_call_with_keys(op, ks & od_ks_below(OD_KEY_Batched), s, err);
}

/* The physical tensor of t at level with the batch dim first (new); t
 * itself (retained) when it is not batched at level. */
static od_status front(od_tensor *t, int level, od_tensor **out, od_error *err)
{
    if (!batched_at(t, level)) {
        od_tensor_retain(t);
        *out = t;
        return OD_OK;
    }
    return movedim(t->batched_value, t->bdim, 0, out, err);
}

/* p ([B, logical...]) viewed with rank-r logical dims: ones after B. */
static od_status pad_rank(od_tensor **p, int r, od_error *err)
{
    int lr = (*p)->ndim - 1;
    if (lr >= r)
        return OD_OK;
    int64_t sizes[OD_MAX_DIMS];
    sizes[0] = (*p)->sizes[0];
    for (int i = 0; i < r - lr; i++)
        sizes[1 + i] = 1;
    memcpy(sizes + 1 + r - lr, (*p)->sizes + 1, (size_t)lr * sizeof sizes[0]);
    od_tensor *v = NULL;
    od_status st = call1(OD_OPID_reshape, &v, err, 2, T(*p), IL(sizes, r + 1));
    od_tensor_release(*p);
    *p = v;
    return st;
}

/* Runs op on args (borrowed) and wraps every tensor result at level. */
static od_status run_and_wrap(const od_op *op, od_value *args, int nargs, int level, od_stack *s,
                              od_error *err)
{
    od_stack s2;
    od_stack_init(&s2, args, nargs);
    od_status st = od_call(op, &s2, err);
    if (st)
        return st;
    for (int i = 0; i < s2.nrets; i++) {
        od_value *r = &s2.rets[i];
        if (r->tag == OD_T_TENSOR && r->u.t && st == OD_OK) {
            od_tensor *w = NULL;
            st = od_make_batched(r->u.t, 0, level, &w, err);
            od_tensor_release(r->u.t);
            r->u.t = w;
        }
    }
    if (st) {
        od_stack_release_rets(&s2);
        return st;
    }
    memcpy(s->rets, s2.rets, sizeof s2.rets);
    s->nrets = s2.nrets;
    return OD_OK;
}

/* ---- the fallback: a loop over the batch --------------------------------------- */

static od_status slice_value(const od_value *v, int level, int64_t b, od_value *out, od_tensor **made,
                             int *nmade, od_tensor ***lists, int *nlists, od_error *err)
{
    *out = *v;
    if (v->tag == OD_T_TENSOR && batched_at(v->u.t, level)) {
        od_tensor *t = v->u.t;
        od_status st = call1(OD_OPID_select_int, &made[*nmade], err, 3, T(t->batched_value), od_int(t->bdim),
                             od_int(b));
        if (st)
            return st;
        out->u.t = made[(*nmade)++];
    } else if (v->tag == OD_T_TENSOR_LIST) {
        size_t n = v->u.list.n;
        od_tensor **src = v->u.list.items, **dst = calloc(n ? n : 1, sizeof *dst);
        if (!dst)
            return od_error_set(err, OD_ENOMEM, "out of memory");
        lists[(*nlists)++] = dst;
        for (size_t j = 0; j < n; j++) {
            dst[j] = src[j];
            if (batched_at(src[j], level)) {
                od_status st = call1(OD_OPID_select_int, &dst[j], err, 3, T(src[j]->batched_value),
                                     od_int(src[j]->bdim), od_int(b));
                if (st) {
                    dst[j] = NULL;
                    return st;
                }
                made[(*nmade)++] = dst[j];
            }
        }
        out->u.list.items = dst;
    }
    return OD_OK;
}

static void size_fn(od_tensor *t, void *ctx)
{
    int64_t *c = ctx; /* c[0]: level, c[1]: size found */
    if (batched_at(t, (int)c[0]) && c[1] < 0)
        c[1] = t->batched_value->sizes[t->bdim];
}

#define FALLBACK_MAX_MADE 256

static od_status vmap_fallback(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)ctx;
    int level = level_of(s);
    if (!level)
        return below(op, ks, s, err);
    const od_schema *sc = od_op_schema(op);
    for (int i = 0; i < s->nargs; i++)
        if (sc->args[i].alias && sc->args[i].alias->is_write)
            return od_error_set(err, OD_EUNSUPPORTED,
                                "vmap: %s writes its argument in place, which vmap does not support here",
                                od_op_name(op));
    int id = od_op_id(op);
    atomic_fetch_add(&g_fallback_calls[id < OD_NUM_BUILTIN_OPS ? id : OD_NUM_BUILTIN_OPS], 1);
    int64_t c[2] = {level, -1};
    for (int i = 0; i < s->nargs; i++)
        for_tensors(&s->args[i], size_fn, c);
    int64_t B = c[1];
    if (B <= 0)
        return od_error_set(err, OD_EUNSUPPORTED,
                            "vmap: %s has no batching rule, and its per-sample fallback cannot run a batch of "
                            "size 0",
                            od_op_name(op));
    int nrets = sc->nrets;
    /* each sample's returns, moved out of its stack: a Tensor, or a Tensor[]
     * (unbind, split) whose elements are stacked one by one */
    od_value *outs = calloc((size_t)(B * (nrets ? nrets : 1)), sizeof *outs);
    if (!outs)
        return od_error_set(err, OD_ENOMEM, "out of memory");
    od_status st = OD_OK;
    for (int64_t b = 0; b < B && st == OD_OK; b++) {
        od_value args[OD_MAX_ARGS];
        od_tensor *made[FALLBACK_MAX_MADE];
        od_tensor **lists[OD_MAX_ARGS];
        int nmade = 0, nlists = 0;
        for (int i = 0; i < s->nargs && st == OD_OK; i++) {
            if (nmade + (s->args[i].tag == OD_T_TENSOR_LIST ? (int)s->args[i].u.list.n : 1) > FALLBACK_MAX_MADE)
                st = od_error_set(err, OD_EUNSUPPORTED, "vmap: too many batched tensors in one call of %s",
                                  od_op_name(op));
            else
                st = slice_value(&s->args[i], level, b, &args[i], made, &nmade, lists, &nlists, err);
        }
        if (st == OD_OK) {
            od_stack s2;
            od_stack_init(&s2, args, s->nargs);
            st = od_call(op, &s2, err);
            for (int r = 0; st == OD_OK && r < s2.nrets; r++) {
                const od_value *v = &s2.rets[r];
                bool ok = (v->tag == OD_T_TENSOR && v->u.t) || v->tag == OD_T_TENSOR_LIST;
                for (size_t e = 0; ok && v->tag == OD_T_TENSOR_LIST && e < v->u.list.n; e++)
                    ok = ((od_tensor **)v->u.list.items)[e] != NULL;
                if (ok && b > 0 && (v->tag != outs[r * B].tag ||
                                    (v->tag == OD_T_TENSOR_LIST && v->u.list.n != outs[r * B].u.list.n))) {
                    od_stack_release_rets(&s2);
                    st = od_error_set(err, OD_EUNSUPPORTED,
                                      "vmap: %s returned lists of different lengths for different samples",
                                      od_op_name(op));
                    break;
                }
                if (!ok) {
                    od_stack_release_rets(&s2);
                    st = od_error_set(err, OD_EUNSUPPORTED,
                                      "vmap: the per-sample fallback batches operators that return tensors; "
                                      "%s does not",
                                      od_op_name(op));
                    break;
                }
            }
            for (int r = 0; st == OD_OK && r < s2.nrets; r++) {
                outs[r * B + b] = s2.rets[r];
                s2.rets[r] = od_none();
            }
        }
        for (int k = 0; k < nmade; k++)
            od_tensor_release(made[k]);
        for (int k = 0; k < nlists; k++)
            free(lists[k]);
    }
    od_tensor **col = st == OD_OK ? calloc((size_t)B, sizeof *col) : NULL;
    if (st == OD_OK && !col)
        st = od_error_set(err, OD_ENOMEM, "out of memory");
    for (int r = 0; st == OD_OK && r < nrets; r++) {
        bool list = outs[r * B].tag == OD_T_TENSOR_LIST;
        size_t ne = list ? outs[r * B].u.list.n : 1;
        od_tensor **items = list ? calloc(ne ? ne : 1, sizeof *items) : NULL;
        if (list && !items) {
            st = od_error_set(err, OD_ENOMEM, "out of memory");
            break;
        }
        for (size_t e = 0; st == OD_OK && e < ne; e++) {
            for (int64_t b = 0; b < B; b++)
                col[b] = list ? ((od_tensor **)outs[r * B + b].u.list.items)[e] : outs[r * B + b].u.t;
            od_tensor *stacked = NULL, *w = NULL;
            st = call1(OD_OPID_stack, &stacked, err, 2, od_list_v(OD_T_TENSOR_LIST, col, (size_t)B), od_int(0));
            if (st == OD_OK) {
                st = od_make_batched(stacked, 0, level, &w, err);
                od_tensor_release(stacked);
            }
            if (st == OD_OK && list)
                items[e] = w;
            else if (st == OD_OK)
                s->rets[r] = T(w);
        }
        if (list && st == OD_OK)
            s->rets[r] = od_list_v(OD_T_TENSOR_LIST, items, ne);
        else if (list) {
            for (size_t e = 0; e < ne; e++)
                od_tensor_release(items[e]);
            free(items);
        }
        if (st == OD_OK)
            s->nrets = r + 1;
    }
    free(col);
    if (st)
        od_stack_release_rets(s);
    for (int64_t k = 0; k < B * nrets; k++)
        od_value_release(&outs[k]);
    free(outs);
    return st;
}

/* ---- the rules ------------------------------------------------------------------- */

#define RULE(name) \
    static od_status name(void *ctx __attribute__((unused)), const od_op *op, od_keyset ks, od_stack *s, od_error *err)

/* Per-element operators: batch dims first, ranks padded so broadcasting
 * lines up the logical dims. */
RULE(rule_elementwise)
{

    int level = level_of(s);
    if (!level)
        return below(op, ks, s, err);
    int r = 0;
    for (int i = 0; i < s->nargs; i++)
        if (s->args[i].tag == OD_T_TENSOR && s->args[i].u.t && s->args[i].u.t->ndim > r)
            r = s->args[i].u.t->ndim;
    od_value args[OD_MAX_ARGS];
    od_tensor *tmp[OD_MAX_ARGS] = {0};
    od_status st = OD_OK;
    memcpy(args, s->args, (size_t)s->nargs * sizeof args[0]);
    for (int i = 0; i < s->nargs && st == OD_OK; i++) {
        od_tensor *t = s->args[i].tag == OD_T_TENSOR ? s->args[i].u.t : NULL;
        if (!batched_at(t, level))
            continue;
        if ((st = front(t, level, &tmp[i], err)) == OD_OK && (st = pad_rank(&tmp[i], r, err)) == OD_OK)
            args[i].u.t = tmp[i];
    }
    if (st == OD_OK)
        st = run_and_wrap(op, args, s->nargs, level, s, err);
    for (int i = 0; i < s->nargs; i++)
        od_tensor_release(tmp[i]);
    return st;
}

static bool is_dim_arg(const od_arg *a)
{
    return a->name && (!strcmp(a->name, "dim") || !strcmp(a->name, "dim0") || !strcmp(a->name, "dim1") ||
                       !strcmp(a->name, "dims"));
}

/* Operators whose dims name the logical tensor: shifted past the batch dim.
 * A None or [] dim list that means "every dim" becomes [1..rank]. */
RULE(rule_dims)
{
    int level = level_of(s);
    if (!level)
        return below(op, ks, s, err);
    od_tensor *self = s->args[0].tag == OD_T_TENSOR ? s->args[0].u.t : NULL;
    const od_schema *sc = od_op_schema(op);
    bool other_batched = false;
    for (int i = 1; i < s->nargs; i++)
        if (s->args[i].tag == OD_T_TENSOR && batched_at(s->args[i].u.t, level))
            other_batched = true;
    int lr = self ? self->ndim : 0;
    if (!batched_at(self, level) || other_batched || lr == 0)
        return vmap_fallback(ctx, op, ks, s, err);
    bool unsq = od_op_id(op) == OD_OPID_unsqueeze;
    bool perm = od_op_id(op) == OD_OPID_permute;
    od_value args[OD_MAX_ARGS];
    int64_t lists[OD_MAX_ARGS][OD_MAX_DIMS + 1];
    memcpy(args, s->args, (size_t)s->nargs * sizeof args[0]);
    for (int i = 1; i < s->nargs; i++) {
        if (!is_dim_arg(&sc->args[i]))
            continue;
        od_value *v = &args[i];
        int rank = unsq ? lr + 1 : lr;
        if (v->tag == OD_T_INT) {
            int64_t d = v->u.i < 0 ? v->u.i + rank : v->u.i;
            if (d < 0 || d >= rank) /* out of range: the operator's own error */
                return vmap_fallback(ctx, op, ks, s, err);
            v->u.i = d + 1;
        } else if (v->tag == OD_T_INT_LIST || v->tag == OD_T_NONE) {
            size_t n = v->tag == OD_T_INT_LIST ? v->u.list.n : 0;
            const int64_t *src = n ? v->u.list.items : NULL;
            int m = 0;
            if (perm)
                lists[i][m++] = 0;
            if (n == 0 && !perm) { /* every dim */
                if (sc->args[i].type->kind == OD_TY_INT && v->tag == OD_T_NONE)
                    return vmap_fallback(ctx, op, ks, s, err); /* argmax(dim=None): a flat index */
                for (int d = 0; d < lr; d++)
                    lists[i][m++] = d + 1;
            }
            for (size_t j = 0; j < n && n <= OD_MAX_DIMS; j++) {
                int64_t d = src[j] < 0 ? src[j] + rank : src[j];
                if (d < 0 || d >= rank)
                    return vmap_fallback(ctx, op, ks, s, err);
                lists[i][m++] = d + 1;
            }
            *v = IL(lists[i], m);
        }
    }
    od_tensor *p = NULL;
    od_status st = front(self, level, &p, err);
    if (st == OD_OK) {
        args[0] = T(p);
        st = run_and_wrap(op, args, s->nargs, level, s, err);
    }
    od_tensor_release(p);
    return st;
}

/* sum(self) and mean(self): the dim overload over every logical dim. */
RULE(rule_full_reduce)
{
    int level = level_of(s);
    if (!level)
        return below(op, ks, s, err);
    od_tensor *self = s->args[0].u.t;
    if (!batched_at(self, level) || self->ndim == 0)
        return vmap_fallback(ctx, op, ks, s, err);
    int64_t dims[OD_MAX_DIMS];
    for (int d = 0; d < self->ndim; d++)
        dims[d] = d + 1;
    od_tensor *p = NULL;
    od_status st = front(self, level, &p, err);
    if (st)
        return st;
    od_value args[4] = {T(p), IL(dims, self->ndim), od_bool(false), s->args[1]};
    const od_op *dim_op = od_builtin(od_op_id(op) == OD_OPID_sum ? OD_OPID_sum_dim_IntList : OD_OPID_mean_dim);
    st = run_and_wrap(dim_op, args, 4, level, s, err);
    od_tensor_release(p);
    return st;
}

/* view / reshape / expand: the batch size joins the sizes in front. */
RULE(rule_sizes)
{
    int level = level_of(s);
    if (!level)
        return below(op, ks, s, err);
    od_tensor *self = s->args[0].u.t;
    if (!batched_at(self, level) || s->args[1].tag != OD_T_INT_LIST || s->args[1].u.list.n >= OD_MAX_DIMS)
        return vmap_fallback(ctx, op, ks, s, err);
    od_tensor *p = NULL;
    od_status st = front(self, level, &p, err);
    size_t n = s->args[1].u.list.n;
    if (st == OD_OK && od_op_id(op) == OD_OPID_expand)
        st = pad_rank(&p, (int)n, err);
    if (st) {
        od_tensor_release(p);
        return st;
    }
    int64_t sizes[OD_MAX_DIMS + 1];
    sizes[0] = p->sizes[0];
    memcpy(sizes + 1, s->args[1].u.list.items, n * sizeof sizes[0]);
    od_value args[OD_MAX_ARGS];
    memcpy(args, s->args, (size_t)s->nargs * sizeof args[0]);
    args[0] = T(p);
    args[1] = IL(sizes, n + 1);
    /* view's physical tensor may not be viewable once its batch dim moved:
     * reshape gives the same values */
    const od_op *run = od_op_id(op) == OD_OPID_view ? od_builtin(OD_OPID_reshape) : op;
    st = run_and_wrap(run, args, run == op ? s->nargs : 2, level, s, err);
    od_tensor_release(p);
    return st;
}

/* t: a transpose of the two logical dims; the identity below two dims. */
RULE(rule_t)
{
    int level = level_of(s);
    if (!level)
        return below(op, ks, s, err);
    od_tensor *self = s->args[0].u.t, *p = NULL;
    if (!batched_at(self, level))
        return vmap_fallback(ctx, op, ks, s, err);
    od_status st = front(self, level, &p, err);
    if (st)
        return st;
    od_value args[3] = {T(p), od_int(1), od_int(2)};
    if (self->ndim < 2) {
        od_tensor *w = NULL;
        if ((st = od_make_batched(p, 0, level, &w, err)) == OD_OK) {
            s->rets[0] = T(w);
            s->nrets = 1;
        }
    } else {
        st = run_and_wrap(od_builtin(OD_OPID_transpose_int), args, 3, level, s, err);
    }
    od_tensor_release(p);
    return st;
}

/* squeeze(): every logical dim of size one, never the batch dim. */
RULE(rule_squeeze)
{
    int level = level_of(s);
    if (!level)
        return below(op, ks, s, err);
    od_tensor *self = s->args[0].u.t;
    if (!batched_at(self, level))
        return vmap_fallback(ctx, op, ks, s, err);
    int64_t sizes[OD_MAX_DIMS + 1];
    int n = 0;
    od_tensor *p = NULL;
    od_status st = front(self, level, &p, err);
    if (st)
        return st;
    sizes[n++] = p->sizes[0];
    for (int d = 0; d < self->ndim; d++)
        if (self->sizes[d] != 1)
            sizes[n++] = self->sizes[d];
    od_value args[2] = {T(p), IL(sizes, n)};
    st = run_and_wrap(od_builtin(OD_OPID_reshape), args, 2, level, s, err);
    od_tensor_release(p);
    return st;
}

/* mm, bmm, dot and addmm as matmul of physical tensors (matmul broadcasts
 * a batched operand against an unbatched one). */
RULE(rule_matmul_family)
{
    int level = level_of(s);
    if (!level)
        return below(op, ks, s, err);
    od_opid id = (od_opid)od_op_id(op);
    int first = id == OD_OPID_addmm ? 1 : 0;
    od_tensor *a = s->args[first].u.t, *b = s->args[first + 1].u.t, *pa = NULL, *pb = NULL, *prod = NULL;
    bool ba = batched_at(a, level), bb = batched_at(b, level);
    od_status st = front(a, level, &pa, err);
    if (st == OD_OK)
        st = front(b, level, &pb, err);
    if (st == OD_OK && id == OD_OPID_dot && ba && bb) { /* [B,k]·[B,k]: sum of products */
        od_tensor *m = NULL;
        int64_t last = -1;
        if ((st = call1(OD_OPID_mul_Tensor, &m, err, 2, T(pa), T(pb))) == OD_OK) {
            od_value args[4] = {T(m), IL(&last, 1), od_bool(false), od_none()};
            st = run_and_wrap(od_builtin(OD_OPID_sum_dim_IntList), args, 4, level, s, err);
            od_tensor_release(m);
        }
        od_tensor_release(pa);
        od_tensor_release(pb);
        return st;
    }
    if (st == OD_OK) {
        /* dot with one batched operand: the batched one first ([B,k] @ [k]) */
        bool swap = id == OD_OPID_dot && !ba;
        st = call1(OD_OPID_matmul, &prod, err, 2, T(swap ? pb : pa), T(swap ? pa : pb));
    }
    od_tensor_release(pa);
    od_tensor_release(pb);
    if (st)
        return st;
    if (id != OD_OPID_addmm) {
        st = od_make_batched(prod, 0, level, &s->rets[0].u.t, err);
        od_tensor_release(prod);
        if (st == OD_OK) {
            s->rets[0].tag = OD_T_TENSOR;
            s->nrets = 1;
        }
        return st;
    }
    /* addmm: beta * self + alpha * (mat1 @ mat2) */
    od_tensor *self = s->args[0].u.t, *ps = NULL, *scaled = NULL;
    if (!batched_at(prod, level) && prod->ndim == 2) { /* neither matrix batched: self is */
        od_tensor *u = NULL;
        st = call1(OD_OPID_unsqueeze, &u, err, 2, T(prod), od_int(0));
        od_tensor_release(prod);
        prod = u;
    }
    if (st == OD_OK && (st = front(self, level, &ps, err)) == OD_OK && batched_at(self, level))
        st = pad_rank(&ps, 2, err);
    if (st == OD_OK)
        st = call1(OD_OPID_mul_Scalar, &scaled, err, 2, T(ps), s->args[3]);
    if (st == OD_OK) {
        od_value args[3] = {T(scaled), T(prod), s->args[4]};
        st = run_and_wrap(od_builtin(OD_OPID_add_Tensor), args, 3, level, s, err);
    }
    od_tensor_release(scaled);
    od_tensor_release(ps);
    od_tensor_release(prod);
    return st;
}

/* Trailing-dims operators (the batch dim in front changes nothing): clone,
 * _to_copy, native_layer_norm with only its input batched. */
RULE(rule_leading_batch)
{
    int level = level_of(s);
    if (!level)
        return below(op, ks, s, err);
    od_tensor *self = s->args[0].tag == OD_T_TENSOR ? s->args[0].u.t : NULL;
    for (int i = 1; i < s->nargs; i++)
        if (s->args[i].tag == OD_T_TENSOR && batched_at(s->args[i].u.t, level))
            return vmap_fallback(ctx, op, ks, s, err);
    if (!batched_at(self, level))
        return vmap_fallback(ctx, op, ks, s, err);
    od_tensor *p = NULL;
    od_status st = front(self, level, &p, err);
    if (st)
        return st;
    od_value args[OD_MAX_ARGS];
    memcpy(args, s->args, (size_t)s->nargs * sizeof args[0]);
    args[0] = T(p);
    st = run_and_wrap(op, args, s->nargs, level, s, err);
    od_tensor_release(p);
    return st;
}

/* Composite-implicit operators: their decomposition, on the batched
 * tensors (its operators then meet their own rules). */
RULE(rule_decompose)
{
    if (!level_of(s))
        return below(op, ks, s, err);
    const od_kernel *k = ctx;
    return k->fn(k->ctx, op, ks, s, err);
}

/* rand / randn inside a vmap: the vmap's randomness decides. */
RULE(rule_random)
{
    (void)ctx;
    od_vmap_level *lv = od_tls_get()->vmap;
    if (!lv || lv->randomness == OD_RANDOMNESS_SAME)
        return below(op, ks, s, err);
    if (lv->randomness == OD_RANDOMNESS_ERROR)
        return od_error_set(err, OD_EUNSUPPORTED,
                            "vmap: called random operation while in randomness error mode. Please either use "
                            "the 'same' or 'different' randomness flags on vmap or perform the randomness "
                            "operation out of vmap");
    const od_value *sz = &s->args[0];
    if (sz->tag != OD_T_INT_LIST || sz->u.list.n >= OD_MAX_DIMS)
        return below(op, ks, s, err);
    int64_t sizes[OD_MAX_DIMS + 1];
    sizes[0] = lv->size;
    memcpy(sizes + 1, sz->u.list.items, sz->u.list.n * sizeof sizes[0]);
    od_value args[OD_MAX_ARGS];
    memcpy(args, s->args, (size_t)s->nargs * sizeof args[0]);
    args[0] = IL(sizes, sz->u.list.n + 1);
    od_stack s2;
    od_stack_init(&s2, args, s->nargs);
    od_status st = below(op, ks, &s2, err);
    if (st)
        return st;
    od_tensor *w = NULL;
    st = od_make_batched(s2.rets[0].u.t, 0, lv->level, &w, err);
    od_stack_release_rets(&s2);
    if (st == OD_OK) {
        s->rets[0] = T(w);
        s->nrets = 1;
    }
    return st;
}

/* ---- registration ----------------------------------------------------------------- */

static const od_kernel *cia_kernel(const od_op *op)
{
    od_registration_info regs[OD_NUM_KEYS];
    int n = od_op_registrations(op, regs, OD_NUM_KEYS);
    for (int i = 0; i < n && i < OD_NUM_KEYS; i++)
        if (regs[i].key == OD_KEY_CompositeImplicitAutograd)
            return regs[i].kernel;
    return NULL;
}

static od_boxed_fn rule_of(od_opid id, const char **name)
{
    switch (id) {
    case OD_OPID_mm: case OD_OPID_bmm: case OD_OPID_dot: case OD_OPID_addmm:
        *name = "batch_rule_matmul";
        return rule_matmul_family;
    case OD_OPID_sum: case OD_OPID_mean:
        *name = "batch_rule_full_reduce";
        return rule_full_reduce;
    case OD_OPID_sum_dim_IntList: case OD_OPID_mean_dim: case OD_OPID_amax: case OD_OPID_amin:
    case OD_OPID_argmax: case OD_OPID_var_dim: case OD_OPID_var_correction: case OD_OPID__softmax:
    case OD_OPID__log_softmax: case OD_OPID_transpose_int: case OD_OPID_select_int: case OD_OPID_slice_Tensor:
    case OD_OPID_squeeze_dim: case OD_OPID_unsqueeze: case OD_OPID_permute:
        *name = "batch_rule_shift_dims";
        return rule_dims;
    case OD_OPID_view: case OD_OPID_reshape: case OD_OPID_expand:
        *name = "batch_rule_sizes";
        return rule_sizes;
    case OD_OPID_t:
        *name = "batch_rule_t";
        return rule_t;
    case OD_OPID_squeeze:
        *name = "batch_rule_squeeze";
        return rule_squeeze;
    case OD_OPID_clone: case OD_OPID__to_copy: case OD_OPID_native_layer_norm:
        *name = "batch_rule_leading_batch";
        return rule_leading_batch;
    case OD_OPID_rand: case OD_OPID_randn:
        *name = "batch_rule_random";
        return rule_random;
    default:
        break;
    }
    od_shape_fn f = od_builtin_shape_fn(id);
    if (f == od_shape_ew || f == od_shape_binary || f == od_shape_unary || f == od_shape_compare ||
        f == od_shape_where || f == od_shape_clamp) {
        *name = "batch_rule_elementwise";
        return rule_elementwise;
    }
    return NULL;
}

od_status od_register_batched_kernels(od_error *err)
{
    od_status st = od_fallback(OD_KEY_Batched, vmap_fallback, NULL, "vmap_fallback_loop", __FILE__, __LINE__, err);
    for (int i = 0; i < OD_NUM_BUILTIN_OPS && !st; i++) {
        od_op *op = (od_op *)od_builtin((od_opid)i); /* registration is the one writer */
        const char *name = NULL;
        od_boxed_fn fn = rule_of((od_opid)i, &name);
        if (fn) {
            st = od_impl(op, OD_KEY_Batched, fn, NULL, name, __FILE__, __LINE__, err);
        } else {
            const od_kernel *k = cia_kernel(op);
            if (k)
                st = od_impl(op, OD_KEY_Batched, rule_decompose, (void *)k, "batch_rule_decompose", __FILE__,
                             __LINE__, err);
        }
    }
    return st;
}
