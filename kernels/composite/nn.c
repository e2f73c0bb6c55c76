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
    if ((st = od_wrap_dim(dim, ts[0]->ndim + 1, &d, err)))
        return st;

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
