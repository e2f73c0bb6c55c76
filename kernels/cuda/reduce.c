/* reduce.c — boxed CUDA kernels of the reductions (sum ... var.correction),
 * _softmax / _log_softmax and native_layer_norm.
 *
 * Invariants: arguments are validated by the shared parsers and shape
 * functions (od_reduce_parse, od_shape_softmax, od_shape_layer_norm), so
 * errors match the CPU and Meta kernels. Reductions read the input in place
 * through its strides (kept dims and reduced dims, each coalesced);
 * softmax and layer norm first make non-contiguous inputs contiguous.
 * Scratch memory is returned only after the stream has synchronized.
 */
#include <string.h>

#include "cuda_internal.h"

/* Appends dim (size, stride) to a dim list, merging it into the previous
 * one when they form one run; size-1 dims vanish. */
static void push_dim(int64_t *sizes, int64_t *strides, int32_t *n, int64_t size, int64_t stride)
{
    if (size == 1)
        return;
    if (*n > 0 && strides[*n - 1] == stride * size) {
        sizes[*n - 1] *= size;
        strides[*n - 1] = stride;
        return;
    }
    sizes[*n] = size;
    strides[*n] = stride;
    (*n)++;
}

od_status od_cuda_reduce(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    od_reduce_info info;
    int device, n = 0;
    od_cu_env env;
    od_tensor *out = NULL;
    od_status st;
    if ((st = od_reduce_parse(id, s, &info, err)) || (st = od_cu_call_device(op, s, false, &device, err)) ||
        (st = od_cu_begin(device, &env, err)) || (st = od_cu_outputs(id, s, device, &out, &n, err)))
        return st;
    const od_tensor *self = s->args[0].u.t;
    od_tensor *cast = NULL;
    /* A bool result reduces the input cast to bool (x != 0), as ATen's
     * self.to(dtype): a product or sum of non-zero values may wrap or
     * truncate to 0. */
    if (out->dtype == OD_BOOL && self->dtype != OD_BOOL && (info.kind == OD_RED_SUM || info.kind == OD_RED_PROD)) {
        if ((st = od_tensor_empty(self->sizes, self->ndim, OD_BOOL, self->device, &cast, err)) ||
            (st = od_cu_copy_same_device(&env, cast, self, err)))
            goto fail;
        self = cast;
    }
    od_cu_reduce_args a;
    memset(&a, 0, sizeof a);
    a.kind = (int32_t)info.kind;
    a.in_dtype = self->dtype;
    a.out_dtype = out->dtype;
    a.in = od_tensor_data(self);
    a.out = od_tensor_data(out);
    a.m = 1;
    a.r = 1;
    for (int d = 0; d < self->ndim; d++) {
        if (info.mask & (1u << d)) {
            a.r *= self->sizes[d];
            push_dim(a.red_sizes, a.red_strides, &a.nred, self->sizes[d], self->strides[d]);
        } else {
            a.m *= self->sizes[d];
            push_dim(a.kept_sizes, a.kept_strides, &a.nkept, self->sizes[d], self->strides[d]);
        }
    }
    /* N - correction as the CPU kernel takes it (kernels/cpu/reduce.c's
     * var_of): in int64, wrapping, for a float32/float64 full reduction
     * (torch 1.13's std_var_all), in double otherwise */
    a.correction = (out->dtype == OD_FLOAT32 || out->dtype == OD_FLOAT64) && a.m == 1
                       ? (double)a.r - (double)(int64_t)((uint64_t)a.r - (uint64_t)info.correction)
                       : (double)info.correction;
    a.sm_count = env.sm_count;
    if (a.m == 0) {
        od_tensor_release(cast);
        od_cu_return(s, &out, 1);
        return OD_OK;
    }
    if (a.r == 0) { /* nothing to read: the kernel only writes the empty result */
        a.nred = 0;
    }
    size_t wsb = od_cu_reduce_workspace(&a);
    void *ws = NULL;
    if ((st = od_cu_scratch(&env, wsb, &ws, err)))
        goto fail;
    st = od_cu_status(od_cu_reduce(&a, ws, env.stream), "reduction kernel launch", err);
    {
        od_status fs = od_cu_finish(&env, od_cu_op_name(op), st ? NULL : err);
        if (!st)
            st = fs;
    }
    od_cu_scratch_free(&env, ws, wsb);
    if (st)
        goto fail;
    od_tensor_release(cast);
    od_cu_return(s, &out, 1);
    return OD_OK;
fail:
    od_tensor_release(cast);
    od_tensor_release(out);
    return st;
}

od_status od_cuda_softmax(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    int device, n = 0;
    od_cu_env env;
    od_tensor *out = NULL, *in = NULL;
    od_status st;
    if ((st = od_cu_call_device(op, s, false, &device, err)) || (st = od_cu_begin(device, &env, err)) ||
        (st = od_cu_outputs(id, s, device, &out, &n, err)))
        return st;
    od_tensor *self = s->args[0].u.t;
    int d = 0;
    if ((st = od_wrap_dim(s->args[1].u.i, self->ndim, &d, err)) ||
        (st = od_cu_contiguous(&env, self, &in, err)))
        goto fail;
    int64_t outer = 1, dim = 1, inner = 1;
    for (int k = 0; k < self->ndim; k++) {
        if (k < d)
            outer *= self->sizes[k];
        else if (k == d)
            dim = self->sizes[k];
        else
            inner *= self->sizes[k];
    }
    if (od_tensor_numel(out) > 0 &&
        (st = od_cu_status(od_cu_softmax(od_tensor_data(in), in->dtype, od_tensor_data(out), out->dtype,
                                         outer, dim, inner, id == OD_OPID__log_softmax, env.sm_count,
                                         env.stream),
                           "softmax kernel launch", err)))
        goto fail_sync;
    if ((st = od_cu_finish(&env, od_cu_op_name(op), err)))
        goto fail;
    od_tensor_release(in);
    od_cu_return(s, &out, 1);
    return OD_OK;
fail_sync:
    od_cu_finish(&env, od_cu_op_name(op), NULL);
fail:
    od_tensor_release(in);
    od_tensor_release(out);
    return st;
}

od_status od_cuda_layer_norm(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    int device, n = 0;
    od_cu_env env;
    od_tensor *outs[3] = {NULL, NULL, NULL}, *in = NULL, *w = NULL, *b = NULL;
    od_status st;
    if ((st = od_cu_call_device(op, s, false, &device, err)) || (st = od_cu_begin(device, &env, err)) ||
        (st = od_cu_outputs(id, s, device, outs, &n, err)))
        return st;
    od_tensor *input = s->args[0].u.t;
    od_tensor *weight = s->args[2].tag == OD_T_TENSOR ? s->args[2].u.t : NULL;
    od_tensor *bias = s->args[3].tag == OD_T_TENSOR ? s->args[3].u.t : NULL;
    int axis = input->ndim - (int)s->args[1].u.list.n;
    int64_t rows = 1, cols = 1;
    for (int k = 0; k < input->ndim; k++) {
        if (k < axis)
            rows *= input->sizes[k];
        else
            cols *= input->sizes[k];
    }
    if ((st = od_cu_contiguous(&env, input, &in, err)) ||
        (weight && (st = od_cu_contiguous(&env, weight, &w, err))) ||
        (bias && (st = od_cu_contiguous(&env, bias, &b, err))))
        goto fail_sync;
    if (rows > 0 &&
        (st = od_cu_status(od_cu_layer_norm(od_tensor_data(in), in->dtype, w ? od_tensor_data(w) : NULL,
                                            b ? od_tensor_data(b) : NULL,
                                            w ? w->dtype : b ? b->dtype : in->dtype, od_tensor_data(outs[0]),
                                            od_tensor_data(outs[1]), od_tensor_data(outs[2]), outs[1]->dtype,
                                            rows, cols, od_value_as_double(&s->args[4]), env.sm_count,
                                            env.stream),
                           "layer_norm kernel launch", err)))
        goto fail_sync;
    if ((st = od_cu_finish(&env, od_cu_op_name(op), err)))
        goto fail;
    od_tensor_release(in);
    od_tensor_release(w);
    od_tensor_release(b);
    od_cu_return(s, outs, 3);
    return OD_OK;
fail_sync:
    od_cu_finish(&env, od_cu_op_name(op), NULL);
fail:
    od_tensor_release(in);
    od_tensor_release(w);
    od_tensor_release(b);
    for (int i = 0; i < 3; i++)
        od_tensor_release(outs[i]);
    return st;
}
