/* advindex.c — advanced indexing: index.Tensor (x[i, :, j]) and index_put
 * (x[i, :, j] = v, with accumulate), composed of take, index_copy and
 * index_add over a linear index.
 *
 * Invariants:
 *  - CompositeImplicitAutograd: one kernel serves every backend, and
 *    autograd differentiates through take / index_copy / index_add (the
 *    grad_fn is theirs, not torch's IndexBackward0 / IndexPutBackward0).
 *  - Arguments are checked in ATen 1.13's order and with its messages:
 *    index dtypes and bool/byte mask shapes (masks become their nonzero
 *    coordinates), then the count against self's rank, then broadcasting,
 *    then bounds (the first offender in each index's row-major order, read
 *    on the host), then index_put's value shape and dtype.
 *  - The linear index L has the result's shape: for each result element the
 *    row-major position in self it reads (index) or writes (index_put).
 *    When the indexed dims are adjacent the broadcast index dims replace
 *    them in place, else they go first (NumPy's and ATen's rule).
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "composite.h"
#include "od_shape.h"

#define T(t) od_tensor_v(t)

/* The plan of one indexing: per dim of self its int64 index (NULL: a full
 * slice; owned by the scope), the broadcast index shape, and the result. */
typedef struct ix_plan {
    od_tensor *ix[OD_MAX_DIMS];
    int64_t bshape[OD_MAX_DIMS], rshape[OD_MAX_DIMS];
    int bnd, rnd;
} ix_plan;

/* The first value of idx (int64, any device) outside [-size, size), in its
 * row-major order: *found and *bad. */
static od_status first_out_of_range(od_cx_scope *sc, od_tensor *idx, int64_t size, bool *found, int64_t *bad)
{
    *found = false;
    int64_t n = od_tensor_numel(idx);
    if (n == 0)
        return sc->st;
    od_tensor *h = od_cx_call(sc, OD_OPID__to_copy, 7, T(idx), od_dtype_v(OD_INT64), od_none(),
                              od_device_v((od_device){OD_DEV_CPU, 0}), od_none(), od_bool(false),
                              od_none());
    od_tensor *c = h ? od_cx_call(sc, OD_OPID_contiguous, 2, T(h), od_int(0)) : NULL;
    if (!c)
        return sc->st;
    const int64_t *v = od_tensor_data(c);
    for (int64_t k = 0; k < n; k++)
        if (v[k] < -size || v[k] >= size) {
            *found = true;
            *bad = v[k];
            break;
        }
    return OD_OK;
}

static od_status plan_indexing(od_cx_scope *sc, const od_op *op, const od_stack *s, od_tensor *self, ix_plan *p,
                               od_error *err);

/* plan_indexing, ending the scope when it fails. */
static od_status plan(od_cx_scope *sc, const od_op *op, const od_stack *s, od_tensor *self, ix_plan *p, od_error *err)
{
    od_status st = plan_indexing(sc, op, s, self, p, err);
    if (st)
        od_cx_scope_end(sc);
    return st;
}

static od_status plan_indexing(od_cx_scope *sc, const od_op *op, const od_stack *s, od_tensor *self, ix_plan *p,
                               od_error *err)
{
    const od_value *v = &s->args[1];
    if (v->tag != OD_T_TENSOR_LIST)
        return od_error_set(err, OD_EINVAL, "%s(): argument 'indices' (position 2) must be a list of optional Tensors",
                            od_op_schema(op)->name);
    od_tensor **items = v->u.list.items;
    int n = (int)v->u.list.n, d = 0, any = 0;
    memset(p, 0, sizeof *p);
    /* per dim of self its int64 index (NULL: a full slice); bool and byte
     * masks become their nonzero coordinates. Dtypes and mask shapes first. */
    od_tensor *expanded[OD_MAX_DIMS] = {0};
    for (int i = 0; i < n; i++) {
        od_tensor *t = items[i];
        if (t && t->dtype != OD_BOOL && t->dtype != OD_UINT8 && t->dtype != OD_INT64)
            return od_error_set(err, OD_EINVAL, "tensors used as indices must be long, byte or bool tensors");
        bool mask = t && (t->dtype == OD_BOOL || t->dtype == OD_UINT8);
        if (mask && t->ndim == 0 && self->ndim > 0)
            return od_error_set(err, OD_EINVAL, "%s(): a 0-dim bool mask is not supported here (torch 1.13 fails an "
                                                "internal assert on it)", od_op_schema(op)->name);
        int used = mask ? (t->ndim ? t->ndim : 1) : 1;
        if (mask && d + used <= self->ndim) {
            for (int j = 0; j < t->ndim; j++)
                if (t->sizes[j] != self->sizes[d + j]) {
                    char ms[256], ss[256];
                    od_shape_print(t->sizes, t->ndim, ms, sizeof ms);
                    od_shape_print(self->sizes, self->ndim, ss, sizeof ss);
                    return od_error_set(err, OD_EINVAL,
                                        "The shape of the mask %s at index %d does not match the shape of the "
                                        "indexed tensor %s at index %d",
                                        ms, j, ss, d + j);
                }
            od_tensor *nz = od_cx_call(sc, OD_OPID_nonzero, 1, T(t));
            for (int j = 0; j < t->ndim; j++)
                expanded[d + j] = nz ? od_cx_call(sc, OD_OPID_select_int, 3, T(nz), od_int(1), od_int(j)) : NULL;
        } else if (t && !mask && d < self->ndim) {
            expanded[d] = t;
        }
        any |= t != NULL;
        d += used;
        if (sc->st)
            return sc->st;
    }
    if (d > self->ndim)
        return od_error_set(err, OD_EINVAL, "too many indices for tensor of dimension %d (got %d)", self->ndim, d);
    if (!any)
        return od_error_set(err, OD_EINVAL,
                            "%s(): indices must hold at least one Tensor (torch 1.13 fails an internal assert here)",
                            od_op_schema(op)->name);
    /* broadcast the index tensors */
    int first = -1, last = -1, adjacent = 1;
    for (int k = 0; k < d; k++) {
        od_tensor *t = expanded[k];
        if (!t)
            continue;
        if (first < 0) {
            memcpy(p->bshape, t->sizes, (size_t)t->ndim * sizeof(int64_t));
            p->bnd = t->ndim;
        } else {
            int64_t out[OD_MAX_DIMS];
            int on = 0;
            if (last != k - 1)
                adjacent = 0;
            od_error e2;
            od_error_clear(&e2);
            if (od_broadcast_shapes(p->bshape, p->bnd, t->sizes, t->ndim, out, &on, &e2)) {
                char buf[1024];
                size_t o = 0;
                for (int q = 0; q < d && o < sizeof buf; q++)
                    if (expanded[q]) {
                        char one[256];
                        od_shape_print(expanded[q]->sizes, expanded[q]->ndim, one, sizeof one);
                        o += (size_t)snprintf(buf + o, sizeof buf - o, "%s%s", o ? ", " : "", one);
                    }
                return od_error_set(err, OD_EINVAL,
                                    "shape mismatch: indexing tensors could not be broadcast together with shapes %s",
                                    buf);
            }
            memcpy(p->bshape, out, (size_t)on * sizeof(int64_t));
            p->bnd = on;
        }
        if (first < 0)
            first = k;
        last = k;
    }
    /* bounds, then wrap negatives. ATen numbers the dimension among the
     * indexed ones only (x[:, [-3]] on 2 columns: "dimension 0"). Its kernel
     * checks each index as it reads it, so when the result is empty (an
     * all-false mask beside x[-2], an empty dim beside it) nothing is checked. */
    bool empty = false; /* the result has no element: an empty broadcast or an empty unindexed dim */
    for (int k = 0; k < p->bnd; k++)
        empty |= p->bshape[k] == 0;
    /* ATen's AdvancedIndex: an empty indexed dim with a non-empty index
     * broadcast has no valid index at all, whatever the other dims hold */
    for (int k = 0; k < d; k++)
        if (expanded[k] && self->sizes[k] == 0 && !empty)
            return od_error_set(err, OD_EINVAL, "index is out of bounds for dimension with size 0");
    for (int k = 0; k < self->ndim; k++)
        empty |= (k >= d || !expanded[k]) && self->sizes[k] == 0;
    for (int k = 0, ordinal = -1; k < d; k++) {
        if (!expanded[k])
            continue;
        ordinal++;
        bool found;
        int64_t bad = 0;
        if (empty)
            found = false;
        else if (first_out_of_range(sc, expanded[k], self->sizes[k], &found, &bad))
            return sc->st;
        if (found && self->sizes[k] == 0) /* ATen's own wording for an empty dim */
            return od_error_set(err, OD_EINVAL, "index is out of bounds for dimension with size 0");
        if (found)
            return od_error_set(err, OD_EINVAL, "index %" PRId64 " is out of bounds for dimension %d with size %" PRId64,
                                bad, ordinal, self->sizes[k]);
        od_tensor *e = od_cx_call(sc, OD_OPID_expand, 3, T(expanded[k]),
                                  od_list_v(OD_T_INT_LIST, p->bshape, (size_t)p->bnd), od_bool(false));
        /* an empty dim is only indexed by an empty index here (above): any divisor does */
        p->ix[k] = e ? od_cx_call(sc, OD_OPID_remainder_Scalar, 2, T(e), od_int(self->sizes[k] ? self->sizes[k] : 1))
                     : NULL;
    }
    /* the result's shape */
    int r = 0;
    if (adjacent) {
        for (int k = 0; k < first; k++)
            p->rshape[r++] = self->sizes[k];
        for (int k = 0; k < p->bnd; k++)
            p->rshape[r++] = p->bshape[k];
        for (int k = last + 1; k < self->ndim; k++)
            p->rshape[r++] = self->sizes[k];
    } else {
        for (int k = 0; k < p->bnd; k++)
            p->rshape[r++] = p->bshape[k];
        for (int k = 0; k < self->ndim; k++)
            if (k >= d || !p->ix[k])
                p->rshape[r++] = self->sizes[k];
    }
    p->rnd = r;
    if (r > OD_MAX_DIMS)
        return od_error_set(err, OD_EINVAL, "indexing result of rank %d: at most %d dims", r, OD_MAX_DIMS);
    (void)first;
    return sc->st;
}

/* L: for each element of the result, its row-major position in self. */
static od_tensor *linear_index(od_cx_scope *sc, od_tensor *self, const ix_plan *p)
{
    int64_t cstride[OD_MAX_DIMS];
    for (int k = self->ndim - 1, acc = 1; k >= 0; k--) {
        cstride[k] = acc;
        acc *= self->sizes[k];
    }
    int first = -1, last = -1, adjacent = 1;
    for (int k = 0; k < self->ndim; k++)
        if (p->ix[k]) {
            if (first >= 0 && last != k - 1)
                adjacent = 0;
            if (first < 0)
                first = k;
            last = k;
        }
    int bpos = adjacent ? first : 0; /* where the broadcast dims sit in the result */
    od_tensor *L = NULL;
    int64_t shape[OD_MAX_DIMS];
    int pos = adjacent ? 0 : p->bnd; /* result position of the next sliced dim */
    for (int k = 0; k < self->ndim; k++) {
        od_tensor *term;
        for (int q = 0; q < p->rnd; q++)
            shape[q] = 1;
        if (p->ix[k]) {
            for (int q = 0; q < p->bnd; q++)
                shape[bpos + q] = p->bshape[q];
            term = od_cx_call(sc, OD_OPID_reshape, 2, T(p->ix[k]), od_list_v(OD_T_INT_LIST, shape, (size_t)p->rnd));
        } else {
            int at = adjacent ? (k < first ? k : k - (last - first + 1) + p->bnd) : pos++;
            shape[at] = self->sizes[k];
            od_tensor *ar = od_cx_call(sc, OD_OPID_arange, 5, od_int(self->sizes[k]), od_dtype_v(OD_INT64),
                                       od_none(), od_device_v(self->device), od_none());
            term = ar ? od_cx_call(sc, OD_OPID_reshape, 2, T(ar), od_list_v(OD_T_INT_LIST, shape, (size_t)p->rnd))
                      : NULL;
        }
        if (term && cstride[k] != 1)
            term = od_cx_call(sc, OD_OPID_mul_Scalar, 2, T(term), od_int(cstride[k]));
        L = !L ? term : term ? od_cx_call(sc, OD_OPID_add_Tensor, 3, T(L), T(term), od_int(1)) : NULL;
    }
    return L ? od_cx_call(sc, OD_OPID_expand, 3, T(L), od_list_v(OD_T_INT_LIST, (int64_t *)p->rshape, (size_t)p->rnd),
                          od_bool(false))
             : NULL;
}

OD_CX_KERNEL(od_cia_index)
{
    (void)ctx;
    (void)ks;
    od_tensor *self;
    od_status st;
    if ((st = od_cx_arg_tensor(op, s, 0, &self, err)))
        return st;
    od_cx_scope sc = od_cx_scope_begin(err);
    ix_plan p;
    if ((st = plan(&sc, op, s, self, &p, err)))
        return st;
    od_tensor *L = linear_index(&sc, self, &p);
    od_tensor *r = L ? od_cx_call(&sc, OD_OPID_take, 2, T(self), T(L)) : NULL;
    return od_cx_scope_return1(&sc, s, r);
}

OD_CX_KERNEL(od_cia_index_put)
{
    (void)ctx;
    (void)ks;
    od_tensor *self, *values;
    bool accumulate = false;
    od_status st;
    if ((st = od_cx_arg_tensor(op, s, 0, &self, err)) || (st = od_cx_arg_tensor(op, s, 2, &values, err)) ||
        (st = od_cx_arg_bool(op, s, 3, &accumulate, err)))
        return st;
    od_cx_scope sc = od_cx_scope_begin(err);
    ix_plan p;
    if ((st = plan(&sc, op, s, self, &p, err)))
        return st;
    int64_t out[OD_MAX_DIMS];
    int on = 0;
    od_error e2;
    od_error_clear(&e2);
    if (od_broadcast_shapes(values->sizes, values->ndim, p.rshape, p.rnd, out, &on, &e2) || on != p.rnd ||
        memcmp(out, p.rshape, (size_t)on * sizeof(int64_t))) {
        char vs[256], rs[256];
        od_shape_print(values->sizes, values->ndim, vs, sizeof vs);
        od_shape_print(p.rshape, p.rnd, rs, sizeof rs);
        od_cx_scope_end(&sc);
        return od_error_set(err, OD_EINVAL, "shape mismatch: value tensor of shape %s cannot be broadcast to indexing "
                                            "result of shape %s",
                            vs, rs);
    }
    if (values->dtype != self->dtype) {
        od_cx_scope_end(&sc);
        return od_error_set(err, OD_EINVAL,
                            "Index put requires the source and destination dtypes match, got %s for the destination "
                            "and %s for the source.",
                            od_dtype_scalar_name(self->dtype), od_dtype_scalar_name(values->dtype));
    }
    int64_t flat = -1;
    od_tensor *L = linear_index(&sc, self, &p);
    od_tensor *Lf = L ? od_cx_call(&sc, OD_OPID_reshape, 2, T(L), od_list_v(OD_T_INT_LIST, &flat, 1)) : NULL;
    od_tensor *ve = od_cx_call(&sc, OD_OPID_expand, 3, T(values), od_list_v(OD_T_INT_LIST, p.rshape, (size_t)p.rnd),
                               od_bool(false));
    od_tensor *vf = ve ? od_cx_call(&sc, OD_OPID_reshape, 2, T(ve), od_list_v(OD_T_INT_LIST, &flat, 1)) : NULL;
    od_tensor *sf = od_cx_call(&sc, OD_OPID_reshape, 2, T(self), od_list_v(OD_T_INT_LIST, &flat, 1));
    od_tensor *r = accumulate ? od_cx_call(&sc, OD_OPID_index_add, 5, T(sf), od_int(0), T(Lf), T(vf), od_int(1))
                              : od_cx_call(&sc, OD_OPID_index_copy, 4, T(sf), od_int(0), T(Lf), T(vf));
    r = r ? od_cx_call(&sc, OD_OPID_reshape, 2, T(r),
                       od_list_v(OD_T_INT_LIST, self->sizes, (size_t)self->ndim))
          : NULL;
    return od_cx_scope_return1(&sc, s, r);
}
