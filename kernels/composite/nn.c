/* nn.c — stack, softmax / log_softmax, layer_norm and embedding, written in
 * terms of other operators.
 *
 * Invariants: each kernel validates what torch validates at this level
 * (before any work), then calls the primitive operators through the
 * dispatcher; every intermediate it creates is released on every path.
 */
#include <stdio.h>
#include <stdlib.h>

#include "composite.h"

/* aten::stack(tensors, dim): unsqueeze every input at dim, then aten::cat. */
OD_CX_KERNEL(od_cea_stack)
{
    (void)ctx;
    (void)ks;
    od_tensor **ts;
    int n, d;
    int64_t dim;
    od_status st;
    if ((st = od_cx_arg_tensor_list(op, s, 0, &ts, &n, err)) ||
        (st = od_cx_arg_int(op, s, 1, &dim, err)))
        return st;
    if (n == 0)
        return od_error_set(err, OD_EINVAL, "stack expects a non-empty TensorList");
    if ((st = od_wrap_dim(dim, ts[0]->ndim + 1, &d, err))) /* ATen wraps the dim before it compares sizes */
        return st;
    for (int i = 1; i < n; i++) {
        bool same = ts[i]->ndim == ts[0]->ndim;
        for (int k = 0; same && k < ts[0]->ndim; k++)
            same = ts[i]->sizes[k] == ts[0]->sizes[k];
        if (!same) {
            char a[256], b[256];
            od_shape_print(ts[0]->sizes, ts[0]->ndim, a, sizeof a);
            od_shape_print(ts[i]->sizes, ts[i]->ndim, b, sizeof b);
            return od_error_set(err, OD_EMISMATCH,
                                "stack expects each tensor to be equal size, but got %s at entry 0 "
                                "and %s at entry %d",
                                a, b, i);
        }
    }
    if (ts[0]->ndim >= OD_MAX_DIMS)
        return od_error_set(err, OD_EINVAL, "stack(): inputs have %d dimensions; at most %d are supported",
                            ts[0]->ndim, OD_MAX_DIMS - 1);

    od_tensor *small[8];
    od_tensor **parts = n <= 8 ? small : calloc((size_t)n, sizeof *parts);
    if (!parts)
        return od_error_set(err, OD_ENOMEM, "stack(): out of memory for %d inputs", n);
    int made = 0;
    for (; made < n; made++)
        if ((st = od_cx_unsqueeze(ts[made], d, &parts[made], err)))
            break;
    od_tensor *out = NULL;
    if (!st) {
        od_value a[2] = {od_list_v(OD_T_TENSOR_LIST, parts, (size_t)n), od_int(d)};
        st = od_call_builtin1(OD_OPID_cat, a, 2, &out, err);
    }
    for (int i = 0; i < made; i++)
        od_tensor_release(parts[i]);
    if (parts != small)
        free(parts);
    if (st)
        return st;
    return od_cx_return1(s, out);
}

/* softmax.int / log_softmax.int (self, dim, dtype?): cast first when a dtype
 * is given, then the primitive with half_to_float=False. */
OD_CX_KERNEL(od_cia_softmax)
{
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    od_tensor *self, *cast = NULL, *out = NULL;
    int64_t dim;
    bool has_dtype;
    od_dtype dtype;
    od_status st;
    if ((st = od_cx_arg_tensor(op, s, 0, &self, err)) ||
        (st = od_cx_arg_int(op, s, 1, &dim, err)) ||
        (st = od_cx_arg_opt_dtype(op, s, 2, &has_dtype, &dtype, err)))
        return st;
    if (has_dtype && (st = od_cx_to_dtype_copy(self, dtype, &cast, err)))
        return st;
    od_value a[3] = {od_tensor_v(cast ? cast : self), od_int(dim), od_bool(false)};
    st = od_call_builtin1(id == OD_OPID_log_softmax_int ? OD_OPID__log_softmax : OD_OPID__softmax, a, 3,
                     &out, err);
    od_tensor_release(cast);
    if (st)
        return st;
    return od_cx_return1(s, out);
}

/* layer_norm(input, normalized_shape, weight?, bias?, eps, cudnn_enable):
 * native_layer_norm's first output; mean and rstd are dropped. */
OD_CX_KERNEL(od_cia_layer_norm)
{
    (void)ctx;
    (void)ks;
    if (s->nargs < 5)
        return od_error_set(err, OD_EINTERNAL, "%s called with %d arguments", od_op_name(op),
                            s->nargs);
    od_stack inner;
    od_status st = od_call_builtin(OD_OPID_native_layer_norm, s->args, 5, &inner, err);
    if (st)
        return st;
    if (inner.nrets != 3 || inner.rets[0].tag != OD_T_TENSOR) {
        int n = inner.nrets;
        od_stack_release_rets(&inner);
        return od_error_set(err, OD_EINTERNAL, "native_layer_norm returned %d values, expected 3", n);
    }
    s->rets[0] = inner.rets[0];
    inner.rets[0] = od_none();
    od_stack_release_rets(&inner);
    s->nrets = 1;
    return OD_OK;
}

/* c10's legacy tensor type names, for torch's checkScalarTypes message. */
static const char *legacy_type_name(od_dtype dt)
{
    switch (dt) {
    case OD_BOOL: return "BoolTensor";
    case OD_UINT8: return "ByteTensor";
    case OD_INT8: return "CharTensor";
    case OD_INT16: return "ShortTensor";
    case OD_INT32: return "IntTensor";
    case OD_INT64: return "LongTensor";
    case OD_FLOAT16: return "HalfTensor";
    case OD_BFLOAT16: return "BFloat16Tensor";
    case OD_FLOAT32: return "FloatTensor";
    case OD_FLOAT64: return "DoubleTensor";
    default: return "Tensor";
    }
}

/* embedding(weight, indices, padding_idx, scale_grad_by_freq, sparse):
 * rows of weight picked by indices; padding_idx only matters for the
 * gradient, so the forward ignores it. */
OD_CX_KERNEL(od_cia_embedding)
{
    (void)ctx;
    (void)ks;
    od_tensor *weight, *indices, *flat = NULL, *rows = NULL, *out = NULL;
    od_status st;
    if ((st = od_cx_arg_tensor(op, s, 0, &weight, err)) ||
        (st = od_cx_arg_tensor(op, s, 1, &indices, err)))
        return st;
    if (weight->ndim != 2)
        return od_error_set(err, OD_EMISMATCH, "'weight' must be 2-D");
    if (indices->dtype != OD_INT64 && indices->dtype != OD_INT32)
        return od_error_set(err, OD_EMISMATCH,
                            "Expected tensor for argument #1 'indices' to have one of the following "
                            "scalar types: Long, Int; but got torch.%s%s instead (while checking "
                            "arguments for embedding)",
                            indices->device.type == OD_DEV_CUDA ? "cuda." : "",
                            legacy_type_name(indices->dtype));
    if (indices->ndim + 1 > OD_MAX_DIMS)
        return od_error_set(err, OD_EINVAL, "embedding(): 'indices' has %d dimensions; at most %d are supported",
                            indices->ndim, OD_MAX_DIMS - 1);
    if (indices->ndim != 1) {
        int64_t minus1 = -1;
        if ((st = od_cx_reshape(indices, &minus1, 1, &flat, err)))
            return st;
    }
    od_value a[3] = {od_tensor_v(weight), od_int(0), od_tensor_v(flat ? flat : indices)};
    st = od_call_builtin1(OD_OPID_index_select, a, 3, &rows, err);
    od_tensor_release(flat);
    if (st)
        return st;
    if (indices->ndim == 1)
        return od_cx_return1(s, rows);
    int64_t sizes[OD_MAX_DIMS];
    for (int k = 0; k < indices->ndim; k++)
        sizes[k] = indices->sizes[k];
    sizes[indices->ndim] = weight->sizes[1];
    st = od_cx_view(rows, sizes, indices->ndim + 1, &out, err);
    od_tensor_release(rows);
    if (st)
        return st;
    return od_cx_return1(s, out);
}

/* ---- batch_norm, _batch_norm_impl_index, instance_norm, group_norm ----------------
 * As ATen 1.13 decomposes them (aten/src/ATen/native/Normalization.cpp,
 * group_norm.cpp): _batch_norm_impl_index answers an empty input itself and
 * otherwise calls native_batch_norm; batch_norm is its first output;
 * instance_norm folds the batch into the channels and batch-normalises;
 * group_norm calls native_group_norm on contiguous operands. */

/* Calls builtin id and keeps its first nkeep returns in out[] (new). */
static od_status call_n(od_opid id, od_value *a, int na, od_tensor **out, int nkeep, od_error *err)
{
    od_stack inner;
    od_status st = od_call_builtin(id, a, na, &inner, err);
    if (st)
        return st;
    if (inner.nrets < nkeep) {
        int n = inner.nrets;
        od_stack_release_rets(&inner);
        return od_error_set(err, OD_EINTERNAL, "operator returned %d values, expected %d", n, nkeep);
    }
    for (int i = 0; i < nkeep; i++) {
        out[i] = inner.rets[i].tag == OD_T_TENSOR ? inner.rets[i].u.t : NULL;
        inner.rets[i] = od_none();
    }
    od_stack_release_rets(&inner);
    return OD_OK;
}

/* input.size(d) for d in {0, 1}, with torch's IndexError for a lower rank. */
static od_status size_at(const od_tensor *t, int d, int64_t *v, od_error *err)
{
    int w;
    od_status st;
    if (t->ndim == 0)
        return od_error_set(err, OD_EINVAL, "Dimension specified as %d but tensor has no dimensions", d);
    if ((st = od_wrap_dim(d, t->ndim, &w, err)))
        return st;
    *v = t->sizes[w];
    return OD_OK;
}

/* The empty input of _batch_norm_impl_index: clone (times weight[0], plus
 * bias[0]), the statistics uninitialised [C] in the accumulate type. */
static od_status batch_norm_empty(od_tensor *input, od_tensor *w, od_tensor *b, od_tensor **outs, od_error *err)
{
    /* ATen reads sizes()[1] unchecked here: a 1-D empty input gives no error */
    int64_t C = input->ndim >= 2 ? input->sizes[1] : 0;
    od_status st;
    od_value ca[2] = {od_tensor_v(input), od_none()};
    if ((st = od_call_builtin1(OD_OPID_clone, ca, 2, &outs[0], err)))
        return st;
    od_tensor *ps[2] = {w, b};
    for (int i = 0; i < 2 && !st; i++) {
        if (!ps[i])
            continue;
        od_tensor *e = NULL, *r = NULL;
        od_value sa[3] = {od_tensor_v(ps[i]), od_int(0), od_int(0)};
        if (!(st = od_call_builtin1(OD_OPID_select_int, sa, 3, &e, err))) {
            od_value ba[3] = {od_tensor_v(outs[0]), od_tensor_v(e), od_int(1)};
            st = od_call_builtin1(i ? OD_OPID_add_Tensor : OD_OPID_mul_Tensor, ba, i ? 3 : 2, &r, err);
        }
        od_tensor_release(e);
        if (!st) {
            od_tensor_release(outs[0]);
            outs[0] = r;
        }
    }
    od_dtype acc = input->dtype == OD_FLOAT64 ? OD_FLOAT64 : OD_FLOAT32;
    for (int i = 1; i < 3 && !st; i++)
        st = od_tensor_empty(&C, 1, acc, input->device, &outs[i], err);
    return st;
}

/* batch_norm and _batch_norm_impl_index (input, weight?, bias?, running_mean?,
 * running_var?, training, momentum, eps, cudnn_enabled). */
OD_CX_KERNEL(od_cia_batch_norm)
{
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    od_tensor *input, *w, *b, *outs[3] = {NULL, NULL, NULL};
    od_status st;
    if ((st = od_cx_arg_tensor(op, s, 0, &input, err)) || (st = od_cx_arg_opt_tensor(op, s, 1, &w, err)) ||
        (st = od_cx_arg_opt_tensor(op, s, 2, &b, err)))
        return st;
    if (s->nargs < 8)
        return od_error_set(err, OD_EINTERNAL, "%s called with %d arguments", od_op_name(op), s->nargs);
    if (od_tensor_numel(input) == 0)
        st = batch_norm_empty(input, w, b, outs, err);
    else
        st = call_n(OD_OPID_native_batch_norm, s->args, 8, outs, 3, err);
    if (st) {
        for (int i = 0; i < 3; i++)
            od_tensor_release(outs[i]);
        return st;
    }
    if (id == OD_OPID_batch_norm) {
        od_tensor_release(outs[1]);
        od_tensor_release(outs[2]);
        return od_cx_return1(s, outs[0]);
    }
    int64_t zero = 0;
    od_tensor *reserve = NULL;
    if ((st = od_tensor_empty(&zero, 1, OD_UINT8, input->device, &reserve, err))) {
        for (int i = 0; i < 3; i++)
            od_tensor_release(outs[i]);
        return st;
    }
    for (int i = 0; i < 3; i++)
        s->rets[i] = od_tensor_v(outs[i]);
    s->rets[3] = od_tensor_v(reserve);
    s->rets[4] = od_int(0);
    s->nrets = 5;
    return OD_OK;
}

/* instance_norm(input, weight?, bias?, running_mean?, running_var?,
 * use_input_stats, momentum, eps, cudnn_enabled): batch_norm over a
 * [1, N * C, ...] view with the parameters repeated N times; the running
 * statistics get the mean over the batch of their repeated copies. */
OD_CX_KERNEL(od_cia_instance_norm)
{
    (void)ctx;
    (void)ks;
    od_tensor *input, *p[4];
    bool use_stats;
    od_status st;
    if ((st = od_cx_arg_tensor(op, s, 0, &input, err)))
        return st;
    for (int i = 0; i < 4; i++)
        if ((st = od_cx_arg_opt_tensor(op, s, 1 + i, &p[i], err)))
            return st;
    if ((st = od_cx_arg_bool(op, s, 5, &use_stats, err)))
        return st;
    if (s->nargs < 9)
        return od_error_set(err, OD_EINTERNAL, "%s called with %d arguments", od_op_name(op), s->nargs);
    if (!use_stats && (!p[2] || !p[3]))
        return od_error_set(err, OD_EINVAL,
                            "Expected running_mean and running_var to be defined when use_input_stats is false");
    int64_t B = 0, C = 0;
    if ((st = size_at(input, 0, &B, err)) || (st = size_at(input, 1, &C, err)))
        return st;
    int64_t shape[OD_MAX_DIMS];
    for (int d = 0; d < input->ndim; d++)
        shape[d] = input->sizes[d];
    shape[1] = B * C;
    shape[0] = 1;
    od_tensor *rep[4] = {NULL, NULL, NULL, NULL}, *cont = NULL, *x = NULL, *out = NULL, *res = NULL;
    for (int i = 0; i < 4 && !st; i++) {
        if (!p[i])
            continue;
        od_value ra[2] = {od_tensor_v(p[i]), od_list_v(OD_T_INT_LIST, &B, 1)};
        st = od_call_builtin1(OD_OPID_repeat, ra, 2, &rep[i], err);
    }
    if (!st) {
        od_value ca[2] = {od_tensor_v(input), od_int(0)};
        st = od_call_builtin1(OD_OPID_contiguous, ca, 2, &cont, err);
    }
    if (!st)
        st = od_cx_view(cont, shape, input->ndim, &x, err);
    if (!st) {
        od_value ba[9] = {od_tensor_v(x), rep[0] ? od_tensor_v(rep[0]) : od_none(),
                          rep[1] ? od_tensor_v(rep[1]) : od_none(), rep[2] ? od_tensor_v(rep[2]) : od_none(),
                          rep[3] ? od_tensor_v(rep[3]) : od_none(), od_bool(use_stats), s->args[6], s->args[7],
                          s->args[8]};
        st = od_call_builtin1(OD_OPID_batch_norm, ba, 9, &out, err);
    }
    /* running statistics: copy_(running, repeated.view(B, C).mean(0)) */
    for (int i = 2; i < 4 && !st; i++) {
        if (!p[i])
            continue;
        int64_t bc[2] = {B, C}, zero = 0;
        od_tensor *v = NULL, *m = NULL, *r = NULL;
        if (!(st = od_cx_view(rep[i], bc, 2, &v, err))) {
            od_value ma[4] = {od_tensor_v(v), od_list_v(OD_T_INT_LIST, &zero, 1), od_bool(false), od_none()};
            st = od_call_builtin1(OD_OPID_mean_dim, ma, 4, &m, err);
        }
        if (!st) {
            od_value ka[3] = {od_tensor_v(p[i]), od_tensor_v(m), od_bool(false)};
            st = od_call_builtin1(OD_OPID_copy_, ka, 3, &r, err);
        }
        od_tensor_release(v);
        od_tensor_release(m);
        od_tensor_release(r);
    }
    if (!st)
        st = od_cx_view(out, input->sizes, input->ndim, &res, err);
    for (int i = 0; i < 4; i++)
        od_tensor_release(rep[i]);
    od_tensor_release(cont);
    od_tensor_release(x);
    od_tensor_release(out);
    if (st)
        return st;
    return od_cx_return1(s, res);
}

/* group_norm(input, num_groups, weight?, bias?, eps, cudnn_enabled). */
OD_CX_KERNEL(od_cia_group_norm)
{
    (void)ctx;
    (void)ks;
    od_tensor *input, *w, *b;
    int64_t G, N = 0, C = 0;
    od_status st;
    if ((st = od_cx_arg_tensor(op, s, 0, &input, err)) || (st = od_cx_arg_int(op, s, 1, &G, err)) ||
        (st = od_cx_arg_opt_tensor(op, s, 2, &w, err)) || (st = od_cx_arg_opt_tensor(op, s, 3, &b, err)))
        return st;
    if (s->nargs < 5)
        return od_error_set(err, OD_EINTERNAL, "%s called with %d arguments", od_op_name(op), s->nargs);
    if ((st = size_at(input, 0, &N, err)) || (st = size_at(input, 1, &C, err)))
        return st;
    int64_t HxW = 1;
    for (int d = 2; d < input->ndim; d++)
        HxW *= input->sizes[d];
    od_tensor *c[3] = {NULL, NULL, NULL}, *src[3] = {input, w, b}, *outs[3] = {NULL, NULL, NULL};
    for (int i = 0; i < 3 && !st; i++) {
        if (!src[i])
            continue;
        od_value ca[2] = {od_tensor_v(src[i]), od_int(0)};
        st = od_call_builtin1(OD_OPID_contiguous, ca, 2, &c[i], err);
    }
    if (!st) {
        od_value a[8] = {od_tensor_v(c[0]), c[1] ? od_tensor_v(c[1]) : od_none(), c[2] ? od_tensor_v(c[2]) : od_none(),
                         od_int(N), od_int(C), od_int(HxW), od_int(G), s->args[4]};
        st = call_n(OD_OPID_native_group_norm, a, 8, outs, 3, err);
    }
    for (int i = 0; i < 3; i++)
        od_tensor_release(c[i]);
    if (st)
        return st;
    od_tensor_release(outs[1]);
    od_tensor_release(outs[2]);
    return od_cx_return1(s, outs[0]);
}
