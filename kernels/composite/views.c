/* views.c — view operators, reshape and contiguous.
 *
 * Invariants: od_cea_view touches metadata only (the tensor runtime's view
 * functions), so one CompositeExplicitAutograd kernel serves CPU, CUDA and
 * Meta and its result always shares self's storage. reshape and contiguous
 * return a view / self whenever no copy is needed (like torch) and otherwise
 * copy through aten::clone in the dispatcher, so the copy runs on whatever
 * backend self lives on.
 */
#include <stdint.h>

#include "composite.h"

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
            return od_error_set(err, OD_EINVAL, "_reshape_alias(): size has %d dimensions but stride has %d", n, ns);
        st = od_tensor_as_strided(self, list, strides, n, self->offset, &out, err);
        break;
    }
    case OD_OPID__unsafe_view: /* a view here; torch's marks its result as not a view for autograd only */
        if ((st = od_cx_arg_int_list(op, s, 1, &list, &n, err)))
            return st;
        st = od_tensor_view(self, list, n, &out, err);
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
