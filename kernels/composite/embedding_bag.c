/* embedding_bag.c — embedding_bag, embedding_bag.padding_idx and
 * _embedding_bag_backward, written in terms of other operators as ATen 1.13
 * does (EmbeddingBag.cpp).
 *
 * Invariants: embedding_bag checks and wraps padding_idx, then calls
 * _embedding_bag when weight requires grad (so that EmbeddingBagBackward0 is
 * recorded) and _embedding_bag_forward_only otherwise, whatever the grad
 * mode, as torch. _embedding_bag_backward refuses sparse=True (there are no
 * sparse layouts here), promotes indices and offsets to their common type,
 * rebuilds an empty offset2bag (torch's 'sum' fast path returns one) from
 * offsets, and calls _embedding_bag_dense_backward.
 * Arguments are borrowed, returns new, every error path releases what it
 * made.
 */
#include <inttypes.h>

#include "composite.h"

/* offset2bag of n indices from offsets: searchsorted(offsets, arange(n),
 * right=True) - 1, which is make_offset2bag for non-decreasing offsets */
static od_status offset2bag_of(od_tensor *offsets, int64_t n, od_tensor **out, od_error *err)
{
    od_tensor *ar = NULL, *pos = NULL;
    od_value a[5] = {od_int(n), od_dtype_v(offsets->dtype), od_none(), od_device_v(offsets->device), od_none()};
    od_status st = od_call_builtin1(OD_OPID_arange, a, 5, &ar, err);
    if (st)
        return st;
    od_value b[6] = {od_tensor_v(offsets), od_tensor_v(ar), od_bool(offsets->dtype == OD_INT32),
                     od_bool(true), od_none(), od_none()};
    st = od_call_builtin1(OD_OPID_searchsorted_Tensor, b, 6, &pos, err);
    od_tensor_release(ar);
    if (st)
        return st;
    od_value c[3] = {od_tensor_v(pos), od_int(1), od_int(1)};
    st = od_call_builtin1(OD_OPID_sub_Scalar, c, 3, out, err);
    od_tensor_release(pos);
    return st;
}

static od_status bag_forward(od_opid id, const od_op *op, od_stack *s, od_error *err)
{
    od_tensor *weight, *indices, *offsets, *psw;
    bool sgbf, sparse, ilo, has_pad = false;
    int64_t mode, pad = -1;
    od_status st;
    if ((st = od_cx_arg_tensor(op, s, 0, &weight, err)) || (st = od_cx_arg_tensor(op, s, 1, &indices, err)) ||
        (st = od_cx_arg_tensor(op, s, 2, &offsets, err)) || (st = od_cx_arg_bool(op, s, 3, &sgbf, err)) ||
        (st = od_cx_arg_int(op, s, 4, &mode, err)) || (st = od_cx_arg_bool(op, s, 5, &sparse, err)) ||
        (st = od_cx_arg_opt_tensor(op, s, 6, &psw, err)) || (st = od_cx_arg_bool(op, s, 7, &ilo, err)))
        return st;
    if (id == OD_OPID_embedding_bag_padding_idx && (st = od_cx_arg_opt_int(op, s, 8, &has_pad, &pad, err)))
        return st;
    if (has_pad) {
        if (weight->ndim < 1)
            return od_error_set(err, OD_EINVAL, "Dimension specified as 0 but tensor has no dimensions");
        int64_t V = weight->sizes[0];
        if (!(pad >= -V && pad < V))
            return od_error_set(err, OD_EINVAL,
                                "padding_idx must be within the number of embeddings, -%" PRId64 " through %" PRId64
                                ", but got %" PRId64,
                                V, V - 1, pad);
        if (pad < 0)
            pad += V;
    } else {
        pad = -1;
    }
    od_value a[9] = {od_tensor_v(weight), od_tensor_v(indices), od_tensor_v(offsets), od_bool(sgbf), od_int(mode),
                     od_bool(sparse), psw ? od_tensor_v(psw) : od_none(), od_bool(ilo), od_int(pad)};
    od_stack inner;
    st = od_call_builtin(weight->requires_grad ? OD_OPID__embedding_bag : OD_OPID__embedding_bag_forward_only, a, 9,
                         &inner, err);
    if (st)
        return st;
    for (int i = 0; i < inner.nrets; i++)
        s->rets[i] = inner.rets[i];
    s->nrets = inner.nrets;
    return OD_OK;
}

static od_status bag_backward(const od_op *op, od_stack *s, od_error *err)
{
    od_tensor *grad, *indices, *offsets, *o2b, *bsz, *maxi, *psw, *made = NULL;
    int64_t V, mode, pad;
    bool sgbf, sparse;
    od_status st;
    if ((st = od_cx_arg_tensor(op, s, 0, &grad, err)) || (st = od_cx_arg_tensor(op, s, 1, &indices, err)) ||
        (st = od_cx_arg_tensor(op, s, 2, &offsets, err)) || (st = od_cx_arg_tensor(op, s, 3, &o2b, err)) ||
        (st = od_cx_arg_tensor(op, s, 4, &bsz, err)) || (st = od_cx_arg_tensor(op, s, 5, &maxi, err)) ||
        (st = od_cx_arg_int(op, s, 6, &V, err)) || (st = od_cx_arg_bool(op, s, 7, &sgbf, err)) ||
        (st = od_cx_arg_int(op, s, 8, &mode, err)) || (st = od_cx_arg_bool(op, s, 9, &sparse, err)) ||
        (st = od_cx_arg_opt_tensor(op, s, 10, &psw, err)) || (st = od_cx_arg_int(op, s, 11, &pad, err)))
        return st;
    if (sparse)
        return od_error_set(err, OD_EUNSUPPORTED,
                            "_embedding_bag_backward: sparse=True returns a sparse (COO) gradient, and this server has "
                            "no sparse layouts; use sparse=False");
    /* promoteIndicesAndOffsets, as ATen's _embedding_bag_backward does: the
     * autograd node holds the forward's own indices and offsets, which the
     * forward's kernel read as their promoted type */
    od_cx_scope sc = od_cx_scope_begin(err);
    od_dtype common = od_promote_types(indices->dtype, offsets->dtype);
    if (indices->dtype != common)
        indices = od_cx_cast(&sc, indices, common);
    if (offsets->dtype != common)
        offsets = od_cx_cast(&sc, offsets, common);
    if (sc.st)
        return od_cx_scope_end(&sc);
    if (od_tensor_numel(indices) != 0 && od_tensor_numel(o2b) == 0) {
        if (offsets->dtype != OD_INT32 && offsets->dtype != OD_INT64)
            st = od_error_set(err, OD_EMISMATCH, "_embedding_bag_backward: offsets must be int32 or int64");
        else
            st = offset2bag_of(offsets, od_tensor_numel(indices), &made, err);
        if (st) {
            od_cx_scope_end(&sc);
            return st;
        }
    }
    od_value a[10] = {od_tensor_v(grad), od_tensor_v(indices), od_tensor_v(made ? made : o2b), od_tensor_v(bsz),
                      od_tensor_v(maxi), od_int(V), od_bool(sgbf), od_int(mode), psw ? od_tensor_v(psw) : od_none(),
                      od_int(pad)};
    od_tensor *out = NULL;
    st = od_call_builtin1(OD_OPID__embedding_bag_dense_backward, a, 10, &out, err);
    od_tensor_release(made);
    od_cx_scope_end(&sc);
    if (st)
        return st;
    return od_cx_return1(s, out);
}

OD_CX_KERNEL(od_cia_embedding_bag)
{
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    if (id == OD_OPID__embedding_bag_backward)
        return bag_backward(op, s, err);
    return bag_forward(id, op, s, err);
}
