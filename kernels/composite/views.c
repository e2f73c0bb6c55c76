/* views.c — view operators, reshape and contiguous.
 *
 * Invariants: od_cea_view touches metadata only (the tensor runtime's view
 * functions), so one CompositeExplicitAutograd kernel serves CPU, CUDA and
 * Meta and its result always shares self's storage. reshape and contiguous
 * return a view / self whenever no copy is needed (like torch) and otherwise
 * copy through aten::clone in the dispatcher, so the copy runs on whatever
 * backend self lives on.
 */
#include <inttypes.h>
#include <stdint.h>

#include "composite.h"

od_status od_cx_diagonal_view(od_tensor *self, int64_t offset, int64_t dim1, int64_t dim2, od_tensor **out,
                              od_error *err)
{
    int d1, d2;
    od_status st;
    if ((st = od_wrap_dim(dim1, self->ndim, &d1, err)) || (st = od_wrap_dim(dim2, self->ndim, &d2, err)))
        return st;
    if (d1 == d2)
        return od_error_set(err, OD_EINVAL, "diagonal dimensions cannot be identical %" PRId64 ", %" PRId64,
                            dim1, dim2);
    if (self->ndim < 2) /* a 0-dim or 1-dim self wraps both dims to 0 */
        return od_error_set(err, OD_EINVAL, "diagonal dimensions cannot be identical %" PRId64 ", %" PRId64,
                            dim1, dim2);
    int64_t s1 = self->sizes[d1], s2 = self->sizes[d2], len;
    /* ATen's diagonal: offsets past the matrix give an empty diagonal */
    if (offset >= 0)
        len = offset >= s2 ? 0 : (s1 < s2 - offset ? s1 : s2 - offset);
    else
        len = offset <= -s1 ? 0 : (s1 + offset < s2 ? s1 + offset : s2); /* never -offset: INT64_MIN */
    if (len < 0)
        len = 0;
    int64_t off = self->offset;
    if (len > 0)
        off += offset >= 0 ? offset * self->strides[d2] : -offset * self->strides[d1];
    int64_t sizes[OD_MAX_DIMS], strides[OD_MAX_DIMS];
    int n = 0;
    for (int i = 0; i < self->ndim; i++)
        if (i != d1 && i != d2) {
            sizes[n] = self->sizes[i];
            strides[n++] = self->strides[i];
        }
    sizes[n] = len;
    strides[n++] = self->strides[d1] + self->strides[d2];
    return od_tensor_as_strided(self, sizes, strides, n, off, out, err);
}

/* Tensor.unfold: windows of size along dim, every step elements, as a new
 * last dim (ATen's unfold; a 0-dim self reads as one element). */
static od_status unfold_view(od_tensor *self, int64_t dim, int64_t size, int64_t step, od_tensor **out,
                             od_error *err)
{
    int d;
    od_status st = od_wrap_dim(dim, self->ndim, &d, err);
    if (st)
        return st;
    if (self->ndim >= OD_MAX_DIMS)
        return od_error_set(err, OD_EINVAL, "unfold: a tensor has at most %d dimensions", OD_MAX_DIMS);
    int64_t max_size = self->ndim == 0 ? 1 : self->sizes[d];
    if (size > max_size)
        return od_error_set(err, OD_EINVAL, "maximum size for tensor at dimension %d is %" PRId64
                            " but size is %" PRId64, d, max_size, size);
    if (step <= 0)
        return od_error_set(err, OD_EINVAL, "step is %" PRId64 " but must be > 0", step);
    if (size < 0)
        return od_error_set(err, OD_EINVAL, "unfold: size is %" PRId64 " but must be >= 0", size);
    int64_t sizes[OD_MAX_DIMS], strides[OD_MAX_DIMS];
    int n = self->ndim;
    for (int i = 0; i < n; i++) {
        sizes[i] = self->sizes[i];
        strides[i] = self->strides[i];
    }
    if (n > 0) {
        sizes[d] = (self->sizes[d] - size) / step + 1;
        strides[d] = step * self->strides[d];
    }
    sizes[n] = size;
    strides[n] = n == 0 ? 1 : self->strides[d];
    return od_tensor_as_strided(self, sizes, strides, n + 1, self->offset, out, err);
}

OD_CX_KERNEL(od_cea_view)
{
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    od_tensor *self, *out = NULL;
    od_status st = od_cx_arg_tensor(op, s, 0, &self, err);
    if (st)
        return st;
    const int64_t *list = NULL;
    int n = 0;
    int64_t a = 0, b = 0, step = 1;
    bool has_start = false, has_end = false;

    switch (id) {
    case OD_OPID_view:
        if ((st = od_cx_arg_int_list(op, s, 1, &list, &n, err)))
            return st;
        st = od_tensor_view(self, list, n, &out, err); /* infers one -1 */
        break;
    case OD_OPID_transpose_int:
        if ((st = od_cx_arg_int(op, s, 1, &a, err)) || (st = od_cx_arg_int(op, s, 2, &b, err)))
            return st;
        st = od_tensor_transpose(self, a, b, &out, err);
        break;
    case OD_OPID_permute:
        if ((st = od_cx_arg_int_list(op, s, 1, &list, &n, err)))
            return st;
        st = od_tensor_permute(self, list, n, &out, err);
        break;
    case OD_OPID_t:
        st = od_tensor_t(self, &out, err);
        break;
    case OD_OPID_select_int:
        if ((st = od_cx_arg_int(op, s, 1, &a, err)) || (st = od_cx_arg_int(op, s, 2, &b, err)))
            return st;
        st = od_tensor_select(self, a, b, &out, err);
        break;
    case OD_OPID_slice_Tensor: {
        int64_t dim, start = 0, end = INT64_MAX;
        if ((st = od_cx_arg_int(op, s, 1, &dim, err)) ||
            (st = od_cx_arg_opt_int(op, s, 2, &has_start, &start, err)) ||
            (st = od_cx_arg_opt_int(op, s, 3, &has_end, &end, err)) ||
            (st = od_cx_arg_int(op, s, 4, &step, err)))
            return st;
        if (!has_start)
            start = 0;
        if (!has_end)
            end = INT64_MAX;
        st = od_tensor_slice(self, dim, start, end, step, &out, err);
        break;
    }
    case OD_OPID_expand:
        if ((st = od_cx_arg_int_list(op, s, 1, &list, &n, err)))
            return st;
        st = od_tensor_expand(self, list, n, &out, err);
        break;
    case OD_OPID_squeeze:
        st = od_tensor_squeeze(self, &out, err);
        break;
    case OD_OPID_squeeze_dim:
        if ((st = od_cx_arg_int(op, s, 1, &a, err)))
            return st;
        st = od_tensor_squeeze_dim(self, a, &out, err);
        break;
    case OD_OPID_unsqueeze:
        if ((st = od_cx_arg_int(op, s, 1, &a, err)))
            return st;
        st = od_tensor_unsqueeze(self, a, &out, err);
        break;
    case OD_OPID_alias:
    case OD_OPID_lift_fresh:
    case OD_OPID_detach: /* the same view of the same storage (detach: its autograd is NONDIFF) */
        st = od_tensor_as_strided(self, self->sizes, self->strides, self->ndim, self->offset, &out, err);
        break;
    case OD_OPID__reshape_alias: {
        const int64_t *strides = NULL;
        int ns = 0;
        if ((st = od_cx_arg_int_list(op, s, 1, &list, &n, err)) ||
            (st = od_cx_arg_int_list(op, s, 2, &strides, &ns, err)))
            return st;
        if (ns != n)
            return od_error_set(err, OD_EINVAL,
                                "dimensionality of sizes (%d) must match dimensionality of strides (%d)", n, ns);
        st = od_tensor_as_strided(self, list, strides, n, self->offset, &out, err);
        break;
    }
    case OD_OPID__unsafe_view: /* a view here; torch's marks its result as not a view for autograd only */
        if ((st = od_cx_arg_int_list(op, s, 1, &list, &n, err)))
            return st;
        st = od_tensor_view(self, list, n, &out, err);
        break;
    case OD_OPID_diagonal:
        if ((st = od_cx_arg_int(op, s, 1, &step, err)) || (st = od_cx_arg_int(op, s, 2, &a, err)) ||
            (st = od_cx_arg_int(op, s, 3, &b, err)))
            return st;
        st = od_cx_diagonal_view(self, step, a, b, &out, err);
        break;
    case OD_OPID_as_strided: {
        const int64_t *strides = NULL;
        int ns = 0;
        int64_t off = self->offset;
        if ((st = od_cx_arg_int_list(op, s, 1, &list, &n, err)) ||
            (st = od_cx_arg_int_list(op, s, 2, &strides, &ns, err)) ||
            (st = od_cx_arg_opt_int(op, s, 3, &has_start, &off, err)))
            return st;
        if (ns != n)
            return od_error_set(err, OD_EINVAL, "mismatch in length of strides and shape");
        /* od_tensor_as_strided refuses any geometry that reaches past the
         * storage (torch's setStorage message), so no read can go out of bounds */
        st = od_tensor_as_strided(self, list, strides, n, has_start ? off : self->offset, &out, err);
        break;
    }
    case OD_OPID_unfold:
        if ((st = od_cx_arg_int(op, s, 1, &a, err)) || (st = od_cx_arg_int(op, s, 2, &b, err)) ||
            (st = od_cx_arg_int(op, s, 3, &step, err)))
            return st;
        st = unfold_view(self, a, b, step, &out, err);
        break;
    default:
        return od_error_set(err, OD_EINTERNAL, "od_cea_view registered for %s, which is not a view",
                            od_op_name(op));
    }
    if (st)
        return st;
    return od_cx_return1(s, out);
}

/* aten::reshape: a view when the strides allow one, else a contiguous copy
 * (aten::clone) viewed to the new shape — torch's _reshape_alias / clone
 * split. Exactly one -1 may be inferred. */
OD_CX_KERNEL(od_cia_reshape)
{
    (void)ctx;
    (void)ks;
    od_tensor *self, *out = NULL;
    const int64_t *list;
    int n;
    od_status st;
    if ((st = od_cx_arg_tensor(op, s, 0, &self, err)) ||
        (st = od_cx_arg_int_list(op, s, 1, &list, &n, err)))
        return st;
    if (n > OD_MAX_DIMS)
        return od_error_set(err, OD_EINVAL, "reshape(): at most %d dimensions are supported, got %d",
                            OD_MAX_DIMS, n);
    int64_t sizes[OD_MAX_DIMS], strides[OD_MAX_DIMS];
    if ((st = od_infer_size(list, n, od_tensor_numel(self), sizes, err)))
        return st;
    /* view and clone go through the dispatcher, so autograd records them
     * (reshape is composite: its gradient is theirs) */
    if (od_compute_view_strides(self, sizes, n, strides)) {
        if ((st = od_cx_view(self, sizes, n, &out, err)))
            return st;
        return od_cx_return1(s, out);
    }
    od_tensor *copy = NULL;
    if ((st = od_cx_clone(self, OD_MF_CONTIGUOUS, &copy, err)))
        return st;
    st = od_cx_view(copy, sizes, n, &out, err);
    od_tensor_release(copy);
    if (st)
        return st;
    return od_cx_return1(s, out);
}

/* aten::contiguous: self itself (a new reference) when it already has the
 * layout asked for, else a clone in it; preserve_format is refused only then. */
OD_CX_KERNEL(od_cia_contiguous)
{
    (void)ctx;
    (void)ks;
    od_tensor *self, *out = NULL;
    int mf;
    od_status st;
    if ((st = od_cx_arg_tensor(op, s, 0, &self, err)) ||
        (st = od_cx_arg_memory_format(op, s, 1, &mf, err)))
        return st;
    if (od_tensor_is_contiguous_as(self, (od_memory_format)mf)) {
        od_tensor_retain(self);
        return od_cx_return1(s, self);
    }
    if (mf == OD_MF_PRESERVE)
        return od_error_set(err, OD_EINVAL,
                            "preserve memory format is unsupported by the contiguous operator");
    if ((st = od_cx_clone(self, (od_memory_format)mf, &out, err)))
        return st;
    return od_cx_return1(s, out);
}
