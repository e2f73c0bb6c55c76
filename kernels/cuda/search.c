/* search.c — searchsorted (.Tensor, .Scalar) and bucketize (.Tensor,
 * .Scalar), and reflection / replication padding, on CUDA: the boxed
 * kernels of search.cu's launchers.
 *
 * Invariants: od_search_plan_of (shape_search.c) checked the arguments;
 * here boundaries and input are copied, contiguous, into the common dtype
 * on the device (a Scalar input is converted on the host), and the sorter's
 * values are checked on the host with the CPU kernel's message before the
 * launch. Synchronous, as every CUDA operator here.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cu_index.h"
#include "cuda_internal.h"
#include "od_half.h"

/* t (borrowed) as a new contiguous tensor of dtype dt on its device */
static od_status as_common(const od_cu_env *env, const od_tensor *t, od_dtype dt, od_tensor **out, od_error *err)
{
    od_status st = od_tensor_empty(t->sizes, t->ndim, dt, t->device, out, err);
    if (!st && (st = od_cu_copy_same_device(env, *out, t, err))) {
        od_tensor_release(*out);
        *out = NULL;
    }
    return st;
}

static od_status check_sorter(const od_cu_env *env, const od_tensor *so, int64_t len, od_error *err)
{
    int64_t m = od_tensor_numel(so);
    if (m == 0)
        return OD_OK;
    int64_t *h = malloc((size_t)m * sizeof *h);
    if (!h)
        return od_error_set(err, OD_ENOMEM, "searchsorted: no host memory for the sorter check");
    od_status st = od_cu_status(cudaMemcpyAsync(h, od_tensor_data(so), (size_t)m * sizeof *h, cudaMemcpyDeviceToHost,
                                                env->stream),
                                "cudaMemcpyAsync (sorter to host)", err);
    if (!st)
        st = od_cu_status(cudaStreamSynchronize(env->stream), "cudaStreamSynchronize", err);
    for (int64_t i = 0; i < m && !st; i++)
        if (h[i] < 0 || h[i] >= len)
            st = od_error_set(err, OD_EINVAL, "torch.searchsorted(): sorter index out of range");
    free(h);
    return st;
}

od_status od_cuda_search(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    od_search_plan p;
    int device, nouts = 0;
    od_cu_env env;
    od_tensor *out = NULL, *bd = NULL, *in = NULL, *so = NULL;
    od_status st;
    if ((st = od_search_plan_of(id, s, &p, err)) || (st = od_cu_call_device(op, s, false, &device, err)) ||
        (st = od_cu_begin(device, &env, err)) || (st = od_cu_outputs(id, s, device, &out, &nouts, err)))
        return st;
    if (p.sorter && ((st = od_cu_contiguous(&env, (od_tensor *)p.sorter, &so, err)) ||
                     (st = check_sorter(&env, so, p.len, err))))
        goto fail;
    if (p.n > 0) {
        if ((st = as_common(&env, p.boundaries, p.common, &bd, err)) ||
            (p.input && (st = as_common(&env, p.input, p.common, &in, err))))
            goto fail;
        od_cu_search_args a;
        memset(&a, 0, sizeof a);
        a.bd = od_tensor_data(bd);
        a.in = in ? od_tensor_data(in) : NULL;
        a.sorter = so ? od_tensor_data(so) : NULL;
        a.out = od_tensor_data(out);
        a.dtype = (int32_t)p.common;
        a.out_int32 = p.out_int32;
        a.right = p.right;
        a.one_row = p.boundaries->ndim == 1;
        if (!p.input) { /* the Scalar overloads: the value in the common dtype */
            double v = od_value_as_double(&p.scalar);
            a.xd = p.common == OD_FLOAT32    ? (float)v
                 : p.common == OD_FLOAT16  ? od_half_to_float(od_float_to_half((float)v))
                 : p.common == OD_BFLOAT16 ? od_bf16_to_float(od_float_to_bf16((float)v))
                                           : v;
            a.xi = p.scalar.tag == OD_T_INT ? p.scalar.u.i : p.scalar.tag == OD_T_BOOL ? p.scalar.u.b : (int64_t)v;
        }
        a.n = p.n;
        a.len = p.len;
        a.inner = p.inner;
        a.sm_count = env.sm_count;
        if ((st = od_cu_status(od_cu_search(&a, env.stream), "searchsorted kernel launch", err)))
            goto fail;
    }
    if ((st = od_cu_finish(&env, od_cu_op_name(op), err)))
        goto fail;
    od_tensor_release(bd);
    od_tensor_release(in);
    od_tensor_release(so);
    od_cu_return(s, &out, 1);
    return OD_OK;
fail:
    if (cudaStreamSynchronize(env.stream) != cudaSuccess)
        (void)cudaGetLastError();
    od_tensor_release(bd);
    od_tensor_release(in);
    od_tensor_release(so);
    od_tensor_release(out);
    return st;
}

od_status od_cuda_pad(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    od_pad_plan p;
    int device, nouts = 0;
    od_cu_env env;
    od_tensor *out = NULL;
    od_status st;
    if ((st = od_pad_plan_of(id, s, &p, err)) || (st = od_cu_call_device(op, s, false, &device, err)) ||
        (st = od_cu_begin(device, &env, err)) || (st = od_cu_outputs(id, s, device, &out, &nouts, err)))
        return st;
    od_cu_pad_args a;
    memset(&a, 0, sizeof a);
    a.self = od_tensor_data(p.self);
    a.out = od_tensor_data(out);
    a.elem_size = (int32_t)od_dtype_size(p.self->dtype);
    a.ndim = out->ndim;
    a.lead = p.lead;
    a.nd = p.nd;
    a.reflect = p.reflect;
    for (int k = 0; k < out->ndim; k++) {
        a.sizes[k] = out->sizes[k];
        a.strides[k] = p.self->strides[k];
    }
    for (int k = 0; k < p.nd; k++) {
        a.in[k] = p.in[k];
        a.pad_l[k] = p.pad_l[k];
    }
    a.n = od_tensor_numel(out);
    a.sm_count = env.sm_count;
    if ((st = od_cu_status(od_cu_pad(&a, env.stream), "padding kernel launch", err)) ||
        (st = od_cu_finish(&env, od_cu_op_name(op), err))) {
        if (cudaStreamSynchronize(env.stream) != cudaSuccess)
            (void)cudaGetLastError();
        od_tensor_release(out);
        return st;
    }
    od_cu_return(s, &out, 1);
    return OD_OK;
}

/* ---- repeat_interleave.Tensor and unique_consecutive: staged through the host ----
 * Their result sizes depend on the data, which torch's CUDA kernels also read
 * back before allocating; here the whole operator runs on a host copy of the
 * tensor argument (through the dispatcher, so the CPU kernel's checks and
 * results are the ones served) and the results are copied to the device. */
static od_status to_device(od_tensor *t, od_device dev, od_tensor **out, od_error *err)
{
    od_value a[7] = {od_tensor_v(t), od_none(), od_none(), od_device_v(dev), od_none(), od_bool(false), od_none()};
    return od_call_builtin1(OD_OPID__to_copy, a, 7, out, err);
}

od_status od_cuda_data_sized(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    int device;
    od_status st;
    if ((st = od_cu_call_device(op, s, false, &device, err)))
        return st;
    if (s->nargs < 1 || s->args[0].tag != OD_T_TENSOR || !s->args[0].u.t)
        return od_error_set(err, OD_EINVAL, "%s(): argument 0 must be a Tensor", od_cu_op_name(op));
    od_tensor *x = s->args[0].u.t, *hx = NULL;
    od_device dev = x->device;
    if ((st = to_device(x, (od_device){OD_DEV_CPU, 0}, &hx, err)))
        return st;
    od_value a[OD_MAX_ARGS];
    for (int i = 0; i < s->nargs && i < OD_MAX_ARGS; i++)
        a[i] = s->args[i];
    a[0] = od_tensor_v(hx);
    od_stack r;
    st = od_call_builtin(id, a, s->nargs, &r, err);
    od_tensor_release(hx);
    if (st)
        return st;
    od_tensor *outs[OD_MAX_RETURNS] = {0};
    int n = r.nrets;
    for (int i = 0; i < n && !st; i++)
        st = to_device(r.rets[i].u.t, dev, &outs[i], err);
    od_stack_release_rets(&r);
    if (st) {
        for (int i = 0; i < n; i++)
            od_tensor_release(outs[i]);
        return st;
    }
    od_cu_return(s, outs, n);
    return OD_OK;
}
