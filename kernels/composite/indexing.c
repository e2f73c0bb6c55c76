/* indexing.c — masked_select, index_add, index_copy and index_fill,
 * composed of operators every backend has (expand, ne, reshape, nonzero,
 * index_select, the scatters).
 *
 * Invariants: CompositeExplicitAutograd (MaskedSelectBackward0 in
 * formulas.c; the calls inside run below Autograd), so one kernel serves
 * CPU and CUDA; Meta is refused, as torch's Meta refuses masked_select
 * (its size depends on the data).
 * Arguments are checked first with PyTorch 1.13's messages and order: the
 * mask's dtype, then broadcasting (mask is tensor a, self b), then a byte
 * mask's values (ATen's CPU kernel reads 0 and 1 only).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "composite.h"
#include "od_shape.h"

static od_status call1(od_opid id, od_value *a, int n, od_tensor **out, od_error *err)
{
    return od_call_builtin1(id, a, n, out, err);
}

/* *t (owned) becomes r (new). */
static void replace(od_tensor **t, od_tensor *r)
{
    od_tensor_release(*t);
    *t = r;
}

/* A byte mask's largest value (on the host), for ATen's 0-or-1 check. */
static od_status byte_mask_max(od_tensor *mask, int64_t *out, od_error *err)
{
    od_tensor *m = NULL, *h = NULL;
    od_value a[4] = {od_tensor_v(mask), od_list_v(OD_T_INT_LIST, NULL, 0), od_bool(false)};
    od_status st = call1(OD_OPID_amax, a, 3, &m, err);
    if (!st) {
        od_value b[7] = {od_tensor_v(m), od_dtype_v(OD_INT64), od_none(), od_device_v((od_device){OD_DEV_CPU, 0}), od_none(),
                         od_bool(false), od_none()};
        st = call1(OD_OPID__to_copy, b, 7, &h, err);
    }
    if (!st)
        *out = *(const int64_t *)od_tensor_data(h);
    od_tensor_release(m);
    od_tensor_release(h);
    return st;
}

OD_CX_KERNEL(od_cea_masked_select)
{
    (void)ctx;
    (void)ks;
    od_tensor *self, *mask;
    od_status st;
    if ((st = od_cx_arg_tensor(op, s, 0, &self, err)) || (st = od_cx_arg_tensor(op, s, 1, &mask, err)))
        return st;
    if (self->device.type == OD_DEV_META || mask->device.type == OD_DEV_META)
        return od_error_set(err, OD_ENOKERNEL,
                            "Could not run 'aten::masked_select' with arguments from the 'Meta' backend: its "
                            "result's size depends on the data");
    if (mask->dtype != OD_BOOL && mask->dtype != OD_UINT8)
        return od_error_set(err, OD_EMISMATCH, "masked_select: expected BoolTensor or ByteTensor for mask");
    int64_t shape[OD_MAX_DIMS], numel = 1;
    int nd = 0;
    if ((st = od_broadcast_shapes(mask->sizes, mask->ndim, self->sizes, self->ndim, shape, &nd, err)))
        return st;
    for (int k = 0; k < nd; k++)
        numel *= shape[k];
    if (mask->dtype == OD_UINT8 && numel > 0 && mask->device.type != OD_DEV_META) {
        int64_t mx = 0;
        if ((st = byte_mask_max(mask, &mx, err)))
            return st;
        if (mx > 1)
            return od_error_set(err, OD_EINVAL, "Mask tensor can take 0 and 1 values only");
    }
    od_tensor *m = NULL, *x = NULL, *r = NULL, *t = NULL;
    int64_t flat = -1;
    st = od_cx_expand(mask, shape, nd, &m, err);
    if (!st)
        st = od_cx_expand(self, shape, nd, &x, err);
    if (!st && mask->dtype != OD_BOOL) {
        od_value a[2] = {od_tensor_v(m), od_int(0)};
        if (!(st = call1(OD_OPID_ne_Scalar, a, 2, &t, err)))
            replace(&m, t);
    }
    if (!st && !(st = od_cx_reshape(m, &flat, 1, &t, err)))
        replace(&m, t);
    if (!st) {
        od_value a[1] = {od_tensor_v(m)};
        if (!(st = call1(OD_OPID_nonzero, a, 1, &t, err))) /* [k, 1] */
            replace(&m, t);
    }
    if (!st && !(st = od_cx_reshape(m, &flat, 1, &t, err)))
        replace(&m, t);
    if (!st && !(st = od_cx_reshape(x, &flat, 1, &t, err)))
        replace(&x, t);
    if (!st) {
        od_value a[3] = {od_tensor_v(x), od_int(0), od_tensor_v(m)};
        st = call1(OD_OPID_index_select, a, 3, &r, err);
    }
    od_tensor_release(m);
    od_tensor_release(x);
    if (st) {
        od_tensor_release(r);
        return st;
    }
    return od_cx_return1(s, r);
}

/* ---- index_add, index_copy, index_fill -------------------------------------------
 * Each is the scatter of the same reduction (scatter_add, scatter.src,
 * scatter.value) along dim with the 1-D index expanded across the other
 * dims; ATen's checks and messages (which differ by operator) come first,
 * and the index values are read on the host to check them in order. A
 * 0-dim self is handled as a 1-element vector. */

/* index (0-dim or 1-D, any integer dtype, borrowed) as n host int64 values
 * at *vals, which *h (new: release it) holds: index itself when it already
 * is a contiguous CPU int64 tensor (no copy of a million indices to check
 * them), else its contiguous CPU int64 copy. */
static od_status host_index(od_tensor *index, od_tensor **h, const int64_t **vals, int64_t *n, od_error *err)
{
    *h = NULL;
    if (index->device.type == OD_DEV_CPU && index->dtype == OD_INT64 && od_tensor_is_contiguous(index)) {
        od_tensor_retain(index);
        *h = index;
    } else {
        od_value b[7] = {od_tensor_v(index), od_dtype_v(OD_INT64), od_none(), od_device_v((od_device){OD_DEV_CPU, 0}),
                         od_none(), od_bool(false), od_none()};
        od_status st = call1(OD_OPID__to_copy, b, 7, h, err);
        if (st)
            return st;
    }
    *n = od_tensor_numel(*h);
    *vals = od_tensor_data(*h);
    return OD_OK;
}

/* index (n values) viewed as [1, .., n at d, .., 1] and expanded to T
 * (nd dims, T[d] == n). *out new. */
static od_status index_expanded(od_tensor *index, int64_t n, int nd, int d, const int64_t *T, od_tensor **out,
                                od_error *err)
{
    int64_t v[OD_MAX_DIMS];
    for (int k = 0; k < nd; k++)
        v[k] = k == d ? n : 1;
    od_tensor *r = NULL, *i64 = NULL;
    od_status st = OD_OK;
    if (index->dtype != OD_INT64) /* index_add takes int32; the scatters int64 */
        st = od_cx_to_dtype_copy(index, OD_INT64, &i64, err);
    if (!st)
        st = od_cx_reshape(i64 ? i64 : index, v, nd, &r, err);
    if (!st)
        st = od_cx_expand(r, T, nd, out, err);
    od_tensor_release(r);
    od_tensor_release(i64);
    return st;
}

/* source laid over T (nd dims, T[d] = n): element [.., k at d, ..] is
 * source.select(d, k) broadcast to the slice of T without d; a 0-dim source
 * is broadcast whole. The broadcast was checked by the caller. *out new. */
static od_status source_expanded(od_tensor *source, int nd, int d, const int64_t *T, od_tensor **out,
                                 od_error *err)
{
    if (source->ndim == 0)
        return od_cx_expand(source, T, nd, out, err);
    int64_t perm[OD_MAX_DIMS], v[OD_MAX_DIMS], e[OD_MAX_DIMS], back[OD_MAX_DIMS];
    int sn = source->ndim, k = 0;
    perm[k++] = d;
    for (int i = 0; i < sn; i++)
        if (i != d)
            perm[k++] = i;
    /* [n, 1 (padding), source's slice dims] expanded to [n, T's slice dims] */
    int pad = (nd - 1) - (sn - 1);
    v[0] = source->sizes[d];
    for (int i = 0; i < pad; i++)
        v[1 + i] = 1;
    for (int i = 1; i < sn; i++)
        v[pad + i] = source->sizes[perm[i]];
    e[0] = T[d];
    for (int i = 0, j = 1; i < nd; i++)
        if (i != d)
            e[j++] = T[i];
    for (int i = 0; i < nd; i++)
        back[i] = i < d ? i + 1 : i == d ? 0 : i;
    od_tensor *p = NULL, *r = NULL, *x = NULL;
    od_value a[2] = {od_tensor_v(source), od_list_v(OD_T_INT_LIST, perm, (size_t)sn)};
    od_status st = call1(OD_OPID_permute, a, 2, &p, err);
    if (!st)
        st = od_cx_reshape(p, v, nd, &r, err);
    if (!st)
        st = od_cx_expand(r, e, nd, &x, err);
    if (!st) {
        od_value b[2] = {od_tensor_v(x), od_list_v(OD_T_INT_LIST, back, (size_t)nd)};
        st = call1(OD_OPID_permute, b, 2, out, err);
    }
    od_tensor_release(p);
    od_tensor_release(r);
    od_tensor_release(x);
    return st;
}

/* sizes without dim d, printed as ATen prints a std::vector: "2 4" */
static void print_slice(const int64_t *sizes, int nd, int d, char *buf, size_t cap)
{
    size_t len = 0;
    buf[0] = 0;
    for (int i = 0; i < nd && len < cap; i++)
        if (i != d)
            len += (size_t)snprintf(buf + len, cap - len, "%s%lld", len ? " " : "", (long long)sizes[i]);
}

typedef enum { IX_ADD, IX_COPY, IX_FILL } ix_kind;

/* Nothing to scatter: the result is a copy of self. */
static od_status clone_ret(od_tensor *self, od_stack *s, od_error *err)
{
    od_tensor *r = NULL;
    od_status st = od_cx_clone(self, OD_MF_PRESERVE, &r, err);
    return st ? st : od_cx_return1(s, r);
}

/* self (0-dim as [1]) scattered along d with the expanded index and source
 * (or value), reshaped back to self's shape. *out new. */
static od_status ix_scatter(ix_kind kind, od_tensor *self, int d, od_tensor *index, int64_t n, od_tensor *source,
                            const od_value *value, od_tensor **out, od_error *err)
{
    od_tensor *s1 = NULL, *src1 = NULL, *ie = NULL, *se = NULL, *r = NULL;
    int64_t one = 1, T[OD_MAX_DIMS];
    int nd = self->ndim > 0 ? self->ndim : 1;
    od_status st;
    if (self->ndim == 0) {
        st = od_cx_reshape(self, &one, 1, &s1, err);
        if (!st && source && source->ndim > 0)
            st = od_cx_reshape(source, &n, 1, &src1, err);
    } else {
        od_tensor_retain(self);
        s1 = self;
        st = OD_OK;
    }
    if (!st && source && !src1) {
        od_tensor_retain(source);
        src1 = source;
    }
    for (int k = 0; k < nd; k++)
        T[k] = k == d ? n : s1 ? s1->sizes[k] : 1;
    if (!st)
        st = index_expanded(index, n, nd, d, T, &ie, err);
    if (!st && src1)
        st = source_expanded(src1, nd, d, T, &se, err);
    if (!st) {
        od_value a[4] = {od_tensor_v(s1), od_int(d), od_tensor_v(ie), se ? od_tensor_v(se) : *value};
        st = call1(kind == IX_ADD ? OD_OPID_scatter_add : kind == IX_COPY ? OD_OPID_scatter_src : OD_OPID_scatter_value,
                   a, 4, &r, err);
    }
    if (!st && self->ndim == 0) {
        od_tensor *v = NULL;
        if (!(st = od_cx_reshape(r, NULL, 0, &v, err)))
            replace(&r, v);
    }
    od_tensor_release(s1);
    od_tensor_release(src1);
    od_tensor_release(ie);
    od_tensor_release(se);
    if (st) {
        od_tensor_release(r);
        return st;
    }
    *out = r;
    return OD_OK;
}

/* slices of self and source (without d) broadcast as ATen's TensorIterator
 * of index_add requires: self's slice is tensor a and the output */
static od_status slices_broadcast(const od_tensor *self, const od_tensor *source, int d, od_error *err)
{
    int64_t a[OD_MAX_DIMS], b[OD_MAX_DIMS], r[OD_MAX_DIMS];
    int na = 0, nb = 0, nr = 0;
    for (int i = 0; i < self->ndim; i++)
        if (i != d)
            a[na++] = self->sizes[i];
    for (int i = 0; i < source->ndim; i++)
        if (i != d)
            b[nb++] = source->sizes[i];
    od_status st = od_broadcast_shapes(a, na, b, nb, r, &nr, err);
    if (st)
        return st;
    if (nr != na || memcmp(r, a, sizeof(int64_t) * (size_t)na)) {
        char x[256], y[256];
        od_shape_print(a, na, x, sizeof x);
        od_shape_print(r, nr, y, sizeof y);
        return od_error_set(err, OD_EMISMATCH, "output with shape %s doesn't match the broadcast shape %s", x, y);
    }
    return OD_OK;
}

OD_CX_KERNEL(od_cea_index_add)
{
    (void)ctx;
    (void)ks;
    od_tensor *self, *index, *source, *src2 = NULL, *r = NULL;
    int64_t dim, n = 0;
    const int64_t *iv = NULL;
    od_tensor *ih = NULL; /* holds iv */
    int d;
    char buf[256];
    od_status st;
    if ((st = od_cx_arg_tensor(op, s, 0, &self, err)) || (st = od_cx_arg_int(op, s, 1, &dim, err)) ||
        (st = od_cx_arg_tensor(op, s, 2, &index, err)) || (st = od_cx_arg_tensor(op, s, 3, &source, err)))
        return st;
    od_value alpha = s->nargs > 4 && od_value_is_number(&s->args[4]) ? s->args[4] : od_int(1);
    if ((st = od_wrap_dim(dim, self->ndim, &d, err)))
        return st;
    int64_t numel = od_tensor_numel(index);
    if (index->ndim > 1) {
        od_shape_print(index->sizes, index->ndim, buf, sizeof buf);
        return od_error_set(err, OD_EINVAL,
                            "index_add_(): Index is supposed to be a vector, but got dim: %d with type: %s and "
                            "size: %s",
                            index->ndim, od_dtype_scalar_name(index->dtype), buf);
    }
    if (index->dtype != OD_INT64 && index->dtype != OD_INT32)
        return od_error_set(err, OD_EMISMATCH, "index_add_(): Expected dtype int32/int64 for index but got: %s",
                            od_dtype_scalar_name(index->dtype));
    if (self->dtype != source->dtype)
        return od_error_set(err, OD_EMISMATCH, "index_add_(): self (%s) and source (%s) must have the same scalar type",
                            od_dtype_scalar_name(self->dtype), od_dtype_scalar_name(source->dtype));
    if (!(d == 0 || d < source->ndim))
        return od_error_set(err, OD_EINVAL,
                            "index_add_(): Indexing dim %d is out of bounds of the source tensor with dim %d", d,
                            source->ndim);
    int64_t ssize = source->ndim == 0 ? 1 : source->sizes[d];
    if (numel != ssize && source->ndim == 0) /* ATen's message asks source.size(dim), which refuses first */
        return od_tensor_size_at(source, d, &ssize, err);
    if (numel != ssize)
        return od_error_set(err, OD_EINVAL,
                            "index_add_(): Number of indices (%lld) should be equal to source.size(dim): (%lld), "
                            "for dim: %d",
                            (long long)numel, (long long)ssize, d);
    if (self->ndim > 1) {
        if (numel == 0)
            return clone_ret(self, s, err);
        /* ATen adds source.select(dim, i) into each slice: a 0-dim source has none */
        if (source->ndim == 0)
            return od_error_set(err, OD_EINVAL, "select() cannot be applied to a 0-dim tensor.");
        if ((st = slices_broadcast(self, source, d, err)))
            return st;
    } else if (source->ndim > 1) {
        return od_error_set(err, OD_EINVAL, "source.dim() (%d) must one or zero for given self.dim() (%d)",
                            source->ndim, self->ndim);
    }
    /* ATen converts alpha to self's dtype before it reads an index */
    if ((self->ndim <= 1 || numel > 0) && (st = od_scalar_check_fits(&alpha, self->dtype, err)))
        return st;
    n = od_tensor_numel(index);
    if (n == 0)
        return clone_ret(self, s, err);
    /* alpha as self's dtype takes it (an int self truncates 2.5 to 2) */
    bool is_one = od_value_as_double(&alpha) == 1.0;
    if (!is_one) {
        od_value av = alpha;
        if (self->dtype == OD_BOOL)
            av = od_bool(od_value_as_double(&alpha) != 0);
        else if (od_dtype_is_integral(self->dtype, false) && alpha.tag == OD_T_DOUBLE)
            av = od_int((int64_t)alpha.u.d);
        od_value a[2] = {od_tensor_v(source), av};
        if ((st = call1(OD_OPID_mul_Scalar, a, 2, &src2, err)))
            return st;
    }
    st = ix_scatter(IX_ADD, self, d, index, n, src2 ? src2 : source, NULL, &r, err);
    od_tensor_release(src2);
    if (st) {
        /* scatter_add checks every index as it adds it, into a fresh result, so the index is read once on
         * the way that succeeds (a pass of its own was 14 % of a 1e6 index_add); a failure is looked at
         * again here for index_add's own message */
        int64_t size = self->ndim > 0 ? self->sizes[d] : 1;
        od_error e2;
        bool bad = false;
        if (host_index(index, &ih, &iv, &n, &e2) == OD_OK)
            for (int64_t i = 0; i < n && !bad; i++)
                bad = iv[i] < 0 || iv[i] >= size;
        od_tensor_release(ih);
        return bad ? od_error_set(err, OD_EINVAL, "index out of range in self") : st;
    }
    return od_cx_return1(s, r);
}

/* ATen's index_copy and index_fill kernels restride an empty self to the
 * index's length along dim d (stride 0) over self's storage, then check
 * each index inside the loop. With another dim empty that loop never runs
 * (*none set: nothing to check or do); else the storage must hold the
 * restrided view (setStorage's refusal), and then the caller's bounds check
 * refuses every index of the empty dim. */
static od_status restride_empty(const od_tensor *t, int d, int64_t nidx, bool *none, od_error *err)
{
    *none = false;
    if (od_tensor_numel(t) != 0 || nidx == 0)
        return OD_OK;
    for (int k = 0; k < t->ndim; k++)
        if (k != d && t->sizes[k] == 0) {
            *none = true;
            return OD_OK;
        }
    int64_t need = t->offset + 1, sz[OD_MAX_DIMS], sd[OD_MAX_DIMS];
    int nd = t->ndim > 0 ? t->ndim : 1;
    for (int k = 0; k < nd; k++) {
        sz[k] = k == d ? nidx : t->sizes[k];
        sd[k] = k == d || t->ndim == 0 ? 0 : t->strides[k];
        need += (sz[k] - 1) * sd[k];
    }
    size_t es = od_dtype_size(t->dtype), have = t->storage ? t->storage->nbytes : 0;
    if ((size_t)need * es <= have)
        return OD_OK;
    char a[256], b[256];
    od_shape_print(sz, nd, a, sizeof a);
    od_shape_print(sd, nd, b, sizeof b);
    return od_error_set(err, OD_EINVAL,
                        "setStorage: sizes %s, strides %s, storage offset %lld, and itemsize %zu requiring "
                        "a storage size of %lld are out of bounds for storage of size %zu",
                        a, b, (long long)t->offset, es, (long long)need * (long long)es, have);
}

OD_CX_KERNEL(od_cea_index_copy)
{
    (void)ctx;
    (void)ks;
    od_tensor *self, *index, *source, *r = NULL;
    int64_t dim, n = 0;
    const int64_t *iv = NULL;
    od_tensor *ih = NULL; /* holds iv */
    int d;
    od_status st;
    if ((st = od_cx_arg_tensor(op, s, 0, &self, err)) || (st = od_cx_arg_int(op, s, 1, &dim, err)) ||
        (st = od_cx_arg_tensor(op, s, 2, &index, err)) || (st = od_cx_arg_tensor(op, s, 3, &source, err)))
        return st;
    if ((st = od_wrap_dim(dim, self->ndim, &d, err)))
        return st;
    if (index->ndim >= 2)
        return od_error_set(err, OD_EINVAL, "index_copy_(): Index should have dimension 1 or 0 (got %d)", index->ndim);
    int64_t numel = od_tensor_numel(index);
    if (source->ndim == 0 && numel != 1)
        return od_error_set(err, OD_EINVAL,
                            "index_copy_(): When source is scalar, index should have one element (got %lld)",
                            (long long)numel);
    if (source->ndim != self->ndim && source->ndim != 0 && self->ndim != 0)
        return od_error_set(err, OD_EINVAL,
                            "index_copy_(): When source and destination are not scalars, their dimensionality "
                            "must match. Source dimensionality (%d), destination dimensionality (%d)",
                            source->ndim, self->ndim);
    if (index->dtype != OD_INT64)
        return od_error_set(err, OD_EMISMATCH, "index_copy_(): Expected a long tensor for index, but got %s",
                            od_dtype_scalar_name(index->dtype));
    if (self->dtype != source->dtype)
        return od_error_set(err, OD_EMISMATCH,
                            "index_copy_(): self and source expected to have the same dtype, but got (self) %s "
                            "and (source) %s",
                            od_dtype_scalar_name(self->dtype), od_dtype_scalar_name(source->dtype));
    /* slices: a dim is erased from each non-empty size list */
    int sd = source->ndim > 0 ? d : -1, dd = self->ndim > 0 ? d : -1;
    int ns = source->ndim - (sd >= 0), nsf = self->ndim - (dd >= 0);
    bool same = ns == nsf;
    for (int i = 0, j = 0; same && i < self->ndim; i++) {
        if (i == dd)
            continue;
        if (j == sd)
            j++;
        same = source->sizes[j] == self->sizes[i];
        j++;
    }
    if (!same) {
        char a[256], b[256];
        print_slice(self->sizes, self->ndim, dd, a, sizeof a);
        print_slice(source->sizes, source->ndim, sd, b, sizeof b);
        return od_error_set(err, OD_EMISMATCH,
                            "index_copy_(): Source/destination tensor must have same slice shapes. Destination "
                            "slice shape: %s at dimension %d and source slice shape: %s at dimension 0.",
                            a, d, b);
    }
    if (source->ndim != 0 && numel != source->sizes[d])
        return od_error_set(err, OD_EINVAL,
                            "index_copy_(): Number of indices (%lld) should be equal to source.size(dim) (%lld)",
                            (long long)numel, (long long)source->sizes[d]);
    if ((st = host_index(index, &ih, &iv, &n, err)))
        return st;
    int64_t size = self->ndim > 0 ? self->sizes[d] : 1;
    bool none = false;
    st = restride_empty(self, d, n, &none, err);
    for (int64_t i = 0; i < n && !none && !st; i++)
        if (iv[i] < 0 || iv[i] >= size)
            st = od_error_set(err, OD_EINVAL, "index_copy_(): index %lld is out of bounds for dimension %d with size %lld",
                              (long long)iv[i], d, (long long)size);
    od_tensor_release(ih);
    if (st)
        return st;
    if (n == 0 || none)
        return clone_ret(self, s, err);
    st = ix_scatter(IX_COPY, self, d, index, n, source, NULL, &r, err);
    return st ? st : od_cx_return1(s, r);
}

/* index_fill's checks in ATen's order; *wrapped (new) is index with
 * negative values counted from the end, NULL when nothing is filled */
/* index_fill.int_Tensor's value: a 0-dim tensor read on the host (ATen's
 * value.item()) as a number value in *v. */
static od_status value_item(od_tensor *t, od_value *v, od_error *err)
{
    if (t->ndim != 0)
        return od_error_set(err, OD_EINVAL,
                            "index_fill_ only supports a 0-dimensional value tensor, but got tensor with %d "
                            "dimension(s).",
                            t->ndim);
    od_dtype dt = t->dtype == OD_BOOL ? OD_BOOL : od_dtype_is_floating(t->dtype) ? OD_FLOAT64 : OD_INT64;
    od_tensor *h = NULL;
    od_value b[7] = {od_tensor_v(t), od_dtype_v(dt), od_none(), od_device_v((od_device){OD_DEV_CPU, 0}), od_none(),
                     od_bool(false), od_none()};
    od_status st = call1(OD_OPID__to_copy, b, 7, &h, err);
    if (st)
        return st;
    const void *p = od_tensor_data(h);
    *v = dt == OD_BOOL ? od_bool(*(const bool *)p) : dt == OD_FLOAT64 ? od_double(*(const double *)p)
                                                                        : od_int(*(const int64_t *)p);
    od_tensor_release(h);
    return OD_OK;
}

/* *value: the fill value (args[3], or int_Tensor's item) */
static od_status index_fill_prepare(const od_op *op, const od_stack *s, od_tensor **self, int *d,
                                    od_tensor **wrapped, od_value *value, od_error *err)
{
    od_tensor *index;
    int64_t dim, n = 0;
    const int64_t *iv = NULL;
    od_tensor *ih = NULL; /* holds iv */
    od_status st;
    *wrapped = NULL;
    if ((st = od_cx_arg_tensor(op, s, 0, self, err)) || (st = od_cx_arg_int(op, s, 1, &dim, err)) ||
        (st = od_cx_arg_tensor(op, s, 2, &index, err)))
        return st;
    if (s->nargs >= 4 && s->args[3].tag == OD_T_TENSOR && s->args[3].u.t) {
        if ((st = value_item(s->args[3].u.t, value, err)))
            return st;
    } else if (s->nargs < 4 || !od_value_is_number(&s->args[3])) {
        return od_error_set(err, OD_EINVAL, "index_fill(): argument 'value' must be a Number");
    } else {
        *value = s->args[3];
    }
    if (index->dtype != OD_INT64)
        return od_error_set(err, OD_EINVAL, "index_fill_(): Expected dtype int64 for index.");
    if ((st = od_wrap_dim(dim, (*self)->ndim > 0 ? (*self)->ndim : 1, d, err)))
        return st;
    if (index->ndim > 1)
        return od_error_set(err, OD_EINVAL, "Index has to be a vector/scalar");
    if ((st = od_scalar_check_fits(value, (*self)->dtype, err)))
        return st;
    if (od_tensor_numel(index) == 0)
        return OD_OK; /* ATen iterates over nothing: no index is read */
    bool none = false;
    if ((st = restride_empty(*self, *d, od_tensor_numel(index), &none, err)) || none)
        return st;
    if ((st = host_index(index, &ih, &iv, &n, err)))
        return st;
    int64_t size = (*self)->ndim > 0 ? (*self)->sizes[*d] : 1;
    for (int64_t i = 0; i < n && !st; i++)
        if (iv[i] < -size || iv[i] >= size)
            st = od_error_set(err, OD_EINVAL, "index %lld is out of bounds for dimension %d with size %lld",
                              (long long)iv[i], *d, (long long)size);
    od_tensor_release(ih);
    if (st)
        return st;
    od_value a[2] = {od_tensor_v(index), od_int(size)};
    return call1(OD_OPID_remainder_Scalar, a, 2, wrapped, err);
}

OD_CX_KERNEL(od_cea_index_fill)
{
    (void)ctx;
    (void)ks;
    od_tensor *self = NULL, *wrapped = NULL, *r = NULL;
    od_value value;
    int d = 0;
    od_status st = index_fill_prepare(op, s, &self, &d, &wrapped, &value, err);
    if (st)
        return st;
    if (!wrapped)
        return clone_ret(self, s, err);
    st = ix_scatter(IX_FILL, self, d, wrapped, od_tensor_numel(wrapped), NULL, &value, &r, err);
    od_tensor_release(wrapped);
    return st ? st : od_cx_return1(s, r);
}

/* index_fill_: masked_fill_ of self with the dim's mask of filled indices,
 * so an expanded self is written as ATen writes it (copy_ refuses one) */
OD_CX_KERNEL(od_cia_index_fill_)
{
    (void)ctx;
    (void)ks;
    od_tensor *self = NULL, *wrapped = NULL, *z = NULL, *m = NULL, *mv = NULL, *r = NULL;
    od_value value;
    int d = 0;
    od_status st = index_fill_prepare(op, s, &self, &d, &wrapped, &value, err);
    if (st)
        return st;
    if (!wrapped) {
        od_tensor_retain(self);
        return od_cx_return1(s, self);
    }
    int64_t size = self->ndim > 0 ? self->sizes[d] : 1, v[OD_MAX_DIMS];
    for (int k = 0; k < self->ndim; k++)
        v[k] = k == d ? size : 1;
    od_value za[5] = {od_list_v(OD_T_INT_LIST, &size, 1), od_dtype_v(OD_BOOL), od_none(), od_device_v(self->device),
                      od_none()};
    st = call1(OD_OPID_zeros, za, 5, &z, err);
    if (!st) {
        od_value a[4] = {od_tensor_v(z), od_int(0), od_tensor_v(wrapped), od_bool(true)};
        st = call1(OD_OPID_scatter_value, a, 4, &m, err);
    }
    if (!st)
        st = od_cx_reshape(m, v, self->ndim, &mv, err);
    if (!st) {
        od_value a[3] = {od_tensor_v(self), od_tensor_v(mv), value};
        st = call1(OD_OPID_masked_fill__Scalar, a, 3, &r, err);
    }
    od_tensor_release(wrapped);
    od_tensor_release(z);
    od_tensor_release(m);
    od_tensor_release(mv);
    return st ? st : od_cx_return1(s, r);
}
