/* shapes.c — constant_pad_nd, repeat, flip, roll, tril and triu, composed of operators
 * every backend has (full, copy_, slice views, cat, index_select, expand,
 * reshape).
 *
 * Invariants: each is CompositeExplicitAutograd (its own formula in
 * formulas.c; the calls inside run below Autograd), so one kernel serves CPU
 * and CUDA, and the result is always fresh memory, never a view of self, as
 * in PyTorch. Arguments are checked first, with PyTorch's messages, so no
 * inner call reports an error in its own terms.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "composite.h"
#include "od_shape.h"

#define T_(x) od_tensor_v(x)

/* copy_(dst, src) through the dispatcher. */
static od_status copy_into(od_tensor *dst, od_tensor *src, od_error *err)
{
    od_value a[3] = {od_tensor_v(dst), od_tensor_v(src), od_bool(false)};
    od_tensor *r = NULL;
    od_status st = od_call_builtin1(OD_OPID_copy_, a, 3, &r, err);
    od_tensor_release(r);
    return st;
}

/* Narrows t in place (a new view replaces the reference) to [start, start + len) of dim d. */
static od_status narrow(od_tensor **t, int d, int64_t start, int64_t len, od_error *err)
{
    od_tensor *v = NULL;
    od_status st = od_tensor_slice(*t, d, start, start + len, 1, &v, err);
    if (st)
        return st;
    od_tensor_release(*t);
    *t = v;
    return OD_OK;
}

/* narrow(t, d, start, length) with torch's checks (start wraps against the
 * size unless it is the size itself), t replaced by the view. */
static od_status narrow_checked(od_tensor **t, int d, int64_t start, int64_t length, od_error *err)
{
    int64_t cur = (*t)->sizes[d];
    if (start != cur) {
        int w;
        od_status st = od_wrap_dim(start, (int)(cur < 0x7fffffff ? cur : 0x7fffffff), &w, err);
        if (st)
            return st;
        start = w;
    }
    if (length < 0 || start > cur - length)
        return od_error_set(err, OD_EINVAL, "start (%lld) + length (%lld) exceeds dimension size (%lld).",
                            (long long)start, (long long)length, (long long)cur);
    return narrow(t, d, start, length, err);
}

static od_status pad_size_error(int64_t size, int64_t before, int64_t after, int d, od_error *err)
{
    return od_error_set(err, OD_EINVAL,
                        "The input size %lld, plus negative padding %lld and %lld resulted in a negative output "
                        "size, which is invalid. Check dimension %d of your input.",
                        (long long)size, (long long)before, (long long)after, d);
}

/* aten::constant_pad_nd, in torch's order: pad[2i], pad[2i+1] pad the i-th
 * dim from the last, before and after; negative pads crop (narrow) first;
 * without a positive pad the result is the cropped self cloned. */
OD_CX_KERNEL(od_cea_constant_pad_nd)
{
    (void)ctx;
    (void)ks;
    od_tensor *self;
    const int64_t *pad;
    int np;
    od_status st;
    if ((st = od_cx_arg_tensor(op, s, 0, &self, err)) || (st = od_cx_arg_int_list(op, s, 1, &pad, &np, err)))
        return st;
    if (np % 2)
        return od_error_set(err, OD_EINVAL, "Length of pad must be even but instead it equals %d", np);
    int nd = self->ndim, lpad = np / 2, ldiff = nd - lpad;
    if (lpad > nd)
        return od_error_set(err, OD_EINVAL,
                            "Length of pad should be no more than twice the number of dimensions of the "
                            "input. Pad length is %dwhile the input has %ddimensions.",
                            np, nd);
    for (int i = 0; i < lpad; i++) { /* pads near 2^63: torch's sum wraps negative, ours must not wrap at all */
        int k = np - 2 * (i + 1), d = ldiff + i;
        int64_t sum;
        if (pad[k] == INT64_MIN || pad[k + 1] == INT64_MIN || __builtin_add_overflow(self->sizes[d], pad[k], &sum) ||
            __builtin_add_overflow(sum, pad[k + 1], &sum))
            return pad_size_error(self->sizes[d], pad[k], pad[k + 1], d, err);
    }
    od_tensor *in = self;
    od_tensor_retain(in);
    bool non_positive = true;
    for (int i = ldiff; i < nd && !st; i++) {
        int k = 2 * (nd - i - 1);
        if (pad[k] < 0)
            st = narrow_checked(&in, i, -pad[k], in->sizes[i] + pad[k], err);
        else
            non_positive &= pad[k] == 0;
        if (!st && pad[k + 1] < 0)
            st = narrow_checked(&in, i, 0, in->sizes[i] + pad[k + 1], err);
        else
            non_positive &= pad[k + 1] == 0;
    }
    od_tensor *out = NULL;
    if (!st && non_positive) {
        st = od_cx_clone(in, OD_MF_PRESERVE, &out, err);
    } else if (!st) {
        int64_t sizes[OD_MAX_DIMS];
        memcpy(sizes, self->sizes, sizeof(int64_t) * (size_t)nd);
        for (int i = 0; i < lpad && !st; i++) {
            int k = np - 2 * (i + 1), d = ldiff + i;
            sizes[d] = self->sizes[d] + pad[k] + pad[k + 1];
            if (sizes[d] <= 0)
                st = pad_size_error(self->sizes[d], pad[k], pad[k + 1], d, err);
        }
        od_value a[6] = {od_list_v(OD_T_INT_LIST, sizes, (size_t)nd), s->args[2], od_dtype_v(self->dtype),
                         od_none(), od_device_v(self->device), od_none()};
        if (!st && !(st = od_call_builtin1(OD_OPID_full, a, 6, &out, err))) {
            /* in goes where the positive pads leave room */
            od_tensor *slot = out;
            od_tensor_retain(slot);
            for (int i = ldiff; i < nd && !st; i++) {
                int64_t lo = pad[2 * (nd - i - 1)];
                st = narrow(&slot, i, lo > 0 ? lo : 0, in->sizes[i], err);
            }
            if (!st)
                st = copy_into(slot, in, err);
            od_tensor_release(slot);
        }
    }
    od_tensor_release(in);
    if (st) {
        od_tensor_release(out);
        return st;
    }
    return od_cx_return1(s, out);
}

/* aten::repeat: self viewed as [1, s0, 1, s1, ...], expanded to
 * [r0, s0, r1, s1, ...] and reshaped (a copy) to [r0*s0, r1*s1, ...]. */
OD_CX_KERNEL(od_cea_repeat)
{
    (void)ctx;
    (void)ks;
    od_tensor *self;
    const int64_t *rep;
    int n;
    od_status st;
    if ((st = od_cx_arg_tensor(op, s, 0, &self, err)) || (st = od_cx_arg_int_list(op, s, 1, &rep, &n, err)))
        return st;
    if (n < self->ndim)
        return od_error_set(err, OD_EINVAL,
                            "Number of dimensions of repeat dims can not be smaller than number of dimensions "
                            "of tensor");
    if (2 * n > OD_MAX_DIMS)
        return od_error_set(err, OD_EINVAL, "repeat(): at most %d repeat dims are supported, got %d",
                            OD_MAX_DIMS / 2, n);
    int64_t inter[OD_MAX_DIMS], wide[OD_MAX_DIMS], target[OD_MAX_DIMS / 2];
    int lead = n - self->ndim;
    for (int i = 0; i < n; i++) {
        int64_t sz = i < lead ? 1 : self->sizes[i - lead];
        target[i] = sz * rep[i];
        inter[2 * i] = 1, inter[2 * i + 1] = sz;
        wide[2 * i] = rep[i], wide[2 * i + 1] = sz;
    }
    bool empty = false;
    for (int i = 0; i < n; i++) {
        empty |= target[i] == 0;
        if (target[i] < 0) {
            char buf[256];
            od_shape_print(target, n, buf, sizeof buf);
            return od_error_set(err, OD_EINVAL, "Trying to create tensor with negative dimension %lld: %s",
                                (long long)target[i], buf);
        }
    }
    if (empty) { /* torch's result.numel() == 0 return: a negative repeat of a 0 size passes */
        od_value a[6] = {od_list_v(OD_T_INT_LIST, target, (size_t)n), od_dtype_v(self->dtype), od_none(),
                         od_device_v(self->device), od_none(), od_none()};
        od_tensor *out = NULL;
        if ((st = od_call_builtin1(OD_OPID_empty_memory_format, a, 6, &out, err)))
            return st;
        return od_cx_return1(s, out);
    }
    /* a fresh contiguous copy views to any shape of its numel; reshape's
     * result is then that copy's memory or another copy, never self's */
    od_tensor *c = NULL, *v = NULL, *e = NULL, *out = NULL;
    if (!(st = od_cx_clone(self, OD_MF_CONTIGUOUS, &c, err)) && !(st = od_cx_view(c, inter, 2 * n, &v, err)) &&
        !(st = od_cx_expand(v, wide, 2 * n, &e, err)))
        st = od_cx_reshape(e, target, n, &out, err);
    od_tensor_release(c);
    od_tensor_release(v);
    od_tensor_release(e);
    if (st)
        return st;
    return od_cx_return1(s, out);
}

/* One dim of self reversed: index_select with [size-1, ..., 0]. *t replaced. */
static od_status reverse_dim(od_tensor **t, int d, od_error *err)
{
    int64_t len = (*t)->ndim ? (*t)->sizes[d] : 1;
    od_value a[7] = {od_int(len - 1), od_int(-1), od_int(-1), od_dtype_v(OD_INT64),
                     od_none(), od_device_v((*t)->device), od_none()};
    od_tensor *idx = NULL, *r = NULL;
    od_status st = od_call_builtin1(OD_OPID_arange_start_step, a, 7, &idx, err);
    if (!st) {
        od_value b[3] = {od_tensor_v(*t), od_int(d), od_tensor_v(idx)};
        st = od_call_builtin1(OD_OPID_index_select, b, 3, &r, err);
    }
    od_tensor_release(idx);
    if (st)
        return st;
    od_tensor_release(*t);
    *t = r;
    return OD_OK;
}

/* aten::flip: index_select along each dim with the reversed indices. */
OD_CX_KERNEL(od_cea_flip)
{
    (void)ctx;
    (void)ks;
    od_tensor *self;
    const int64_t *dims;
    int n;
    bool mark[OD_MAX_DIMS];
    od_status st;
    if ((st = od_cx_arg_tensor(op, s, 0, &self, err)) || (st = od_cx_arg_int_list(op, s, 1, &dims, &n, err)) ||
        (st = od_mark_unique_dims(self, dims, n, mark, err)))
        return st;
    od_tensor *out = NULL;
    if ((st = od_cx_clone(self, OD_MF_CONTIGUOUS, &out, err)))
        return st;
    for (int d = 0; d < (self->ndim ? self->ndim : 1) && !st; d++)
        if (mark[d] && od_tensor_numel(out) > 0 && (out->ndim ? out->sizes[d] : 1) > 1)
            st = reverse_dim(&out, d, err);
    if (st) {
        od_tensor_release(out);
        return st;
    }
    return od_cx_return1(s, out);
}

/* One dim rolled by shift: cat of self[start:] and self[:start]. *t replaced. */
static od_status roll_dim(od_tensor **t, int d, int64_t shift, od_error *err)
{
    int64_t len = (*t)->sizes[d];
    if (len == 0)
        return OD_OK;
    int64_t start = ((len - shift % len) % len + len) % len;
    if (start == 0)
        return OD_OK;
    od_tensor *parts[2] = {NULL, NULL}, *r = NULL;
    od_status st;
    if (!(st = od_tensor_slice(*t, d, start, len, 1, &parts[0], err)) &&
        !(st = od_tensor_slice(*t, d, 0, start, 1, &parts[1], err))) {
        od_value a[2] = {od_list_v(OD_T_TENSOR_LIST, parts, 2), od_int(d)};
        st = od_call_builtin1(OD_OPID_cat, a, 2, &r, err);
    }
    od_tensor_release(parts[0]);
    od_tensor_release(parts[1]);
    if (st)
        return st;
    od_tensor_release(*t);
    *t = r;
    return OD_OK;
}

/* aten::roll: out[i] = self[(i - shift) mod size] along each dim; with no
 * dims, over the flattened tensor, shape kept. */
OD_CX_KERNEL(od_cea_roll)
{
    (void)ctx;
    (void)ks;
    od_tensor *self;
    const int64_t *shifts, *dims;
    int ns, nd;
    od_status st;
    if ((st = od_cx_arg_tensor(op, s, 0, &self, err)) || (st = od_cx_arg_int_list(op, s, 1, &shifts, &ns, err)) ||
        (st = od_cx_arg_int_list(op, s, 2, &dims, &nd, err)))
        return st;
    if (!(nd == 1 && ns == 1) && ns == 0)
        return od_error_set(err, OD_EINVAL, "`shifts` required");
    if (ns > 4 * OD_MAX_DIMS) /* RollBackward0 negates them in a fixed array */
        return od_error_set(err, OD_EINVAL, "roll(): at most %d shifts are supported, got %d", 4 * OD_MAX_DIMS, ns);
    if (nd == 0 && ns == 1) {
        int64_t flat = od_tensor_numel(self);
        od_tensor *c = NULL, *f = NULL, *out = NULL;
        if (!(st = od_cx_clone(self, OD_MF_CONTIGUOUS, &c, err)) && !(st = od_cx_view(c, &flat, 1, &f, err)) &&
            !(st = roll_dim(&f, 0, shifts[0], err)))
            st = od_cx_view(f, self->sizes, self->ndim, &out, err);
        od_tensor_release(c);
        od_tensor_release(f);
        if (st)
            return st;
        return od_cx_return1(s, out);
    }
    if (ns != nd)
        return od_error_set(err, OD_EINVAL, "shifts and dimensions must align. shifts: %d, dims:%d", ns, nd);
    od_tensor *out = NULL;
    if (od_tensor_numel(self) == 0) { /* torch returns before reading dims */
        if ((st = od_cx_clone(self, OD_MF_CONTIGUOUS, &out, err)))
            return st;
        return od_cx_return1(s, out);
    }
    /* roll_dim's cat makes a new tensor whenever a dim moves: self is
     * copied only when none does (torch returns a new tensor even then) */
    od_tensor_retain(self);
    out = self;
    for (int i = 0; i < nd && !st; i++) {
        int d;
        if (!(st = od_wrap_dim_strict(dims[i], self->ndim, &d, err))) /* torch's size(dim): no scalar rule */
            st = roll_dim(&out, d, shifts[i], err);
    }
    if (!st && out == self) {
        od_tensor_release(out);
        out = NULL;
        st = od_cx_clone(self, OD_MF_CONTIGUOUS, &out, err);
    }
    if (st) {
        od_tensor_release(out);
        return st;
    }
    return od_cx_return1(s, out);
}

/* tril, triu: self where the column minus the row is <= diagonal (tril) or
 * >= diagonal (triu) in the last two dims, zero elsewhere, as a where over an
 * index comparison every backend has. tril_/triu_ zero self's other
 * elements with masked_fill_ where ATen's kernel works in self itself, which
 * writes through an expanded self (a location is zeroed if any of its
 * aliases is outside the triangle); elsewhere ATen computes a copy and
 * copy_s it back, which refuses an overlapping self. */

/* ATen's checkTrilTriuBatchContiguous(self, allow_zero_stride=true): does
 * the in-place kernel work in self itself? */
static bool tril_in_self(const od_tensor *t)
{
    if (od_tensor_is_contiguous(t) || t->ndim <= 3)
        return true;
    int64_t expect = t->sizes[t->ndim - 1] * t->sizes[t->ndim - 2];
    for (int i = t->ndim - 3; i >= 0; i--) {
        if (i == 0 && (t->strides[0] == 0 || t->sizes[0] == 1))
            continue;
        if (expect != t->strides[i])
            return false;
        expect *= t->sizes[i];
    }
    return true;
}

OD_CX_KERNEL(od_cx_tril_triu)
{
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    bool lower = id == OD_OPID_tril || id == OD_OPID_tril_;
    bool inplace = id == OD_OPID_tril_ || id == OD_OPID_triu_;
    od_tensor *self, *out = NULL;
    int64_t k;
    int w;
    od_status st;
    if ((st = od_cx_arg_tensor(op, s, 0, &self, err)) || (st = od_cx_arg_int(op, s, 1, &k, err)))
        return st;
    if (od_tensor_numel(self) == 0) { /* ATen returns before any check */
        if (inplace) {
            od_tensor_retain(self);
            return od_cx_return1(s, self);
        }
        if ((st = od_cx_clone(self, OD_MF_PRESERVE, &out, err)))
            return st;
        return od_cx_return1(s, out);
    }
    if ((st = od_wrap_dim_strict(-2, self->ndim, &w, err))) /* torch's self.size(-2): two dims at least */
        return st;
    if (k > (INT64_C(1) << 62) || k < -(INT64_C(1) << 62)) /* torch's index arithmetic overflows there */
        return od_error_set(err, OD_EINVAL, "%s: diagonal %" PRId64 " is out of the range [-2^62, 2^62]",
                            lower ? "tril" : "triu", k);
    int64_t m = self->sizes[self->ndim - 2], n = self->sizes[self->ndim - 1], col[2] = {m, 1};
    od_cx_scope sc = od_cx_scope_begin(err);
    od_tensor *r = od_cx_call(&sc, OD_OPID_arange, 5, od_int(m), od_dtype_v(OD_INT64), od_none(),
                              od_device_v(self->device), od_none());
    od_tensor *c = od_cx_call(&sc, OD_OPID_arange, 5, od_int(n), od_dtype_v(OD_INT64), od_none(),
                              od_device_v(self->device), od_none());
    r = od_cx_call(&sc, OD_OPID_view, 2, T_(r), od_list_v(OD_T_INT_LIST, col, 2));
    od_tensor *diff = od_cx_call(&sc, OD_OPID_sub_Tensor, 3, T_(c), T_(r), od_int(1));
    if (inplace && tril_in_self(self)) {
        od_tensor *drop = od_cx_call(&sc, lower ? OD_OPID_gt_Scalar : OD_OPID_lt_Scalar, 2, T_(diff), od_int(k));
        out = od_cx_call(&sc, OD_OPID_masked_fill__Scalar, 3, T_(self), T_(drop), od_int(0));
    } else {
        od_tensor *keep = od_cx_call(&sc, lower ? OD_OPID_le_Scalar : OD_OPID_ge_Scalar, 2, T_(diff), od_int(k));
        od_tensor *z = od_cx_call(&sc, OD_OPID_zeros_like, 6, T_(self), od_none(), od_none(), od_none(), od_none(),
                                  od_none());
        out = od_cx_call(&sc, OD_OPID_where_self, 3, T_(keep), T_(self), T_(z));
        if (inplace)
            out = od_cx_call(&sc, OD_OPID_copy_, 3, T_(self), T_(out), od_bool(false));
    }
    return od_cx_scope_return1(&sc, s, out);
}
