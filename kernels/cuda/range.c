/* range.c — linspace, logspace, tril_indices, triu_indices and
 * _local_scalar_dense on CUDA.
 *
 * Invariants: the BackendSelect kernel routes a factory here by its device
 * argument; the shape function's params (kernels/shape_factory.c) validate
 * and size the output. linspace / logspace convert start, end and base and
 * compute step on the host as ATen 1.13's CUDA kernels do (integer dtypes
 * step in float), then one kernel writes each element on its own
 * (range.cu). tril/triu_indices are written on the host in ATen's order and
 * copied up once (they are index lists, as small as the matrix they
 * index; od_cu_factory_upload, factory.c); the host buffer is freed only
 * after the copy has finished.
 * _local_scalar_dense copies the first element to the host (ATen's
 * _local_scalar_dense_cuda, which also reads no further).
 */
#include <math.h>
#include <stdlib.h>

#include "cpu/iter.h" /* od_cpu_load_value: the host copy's element as a Scalar */
#include "cuda_internal.h"
#include "od_half.h"
#include "od_shape.h"

/* Scalar::to<scalar_t>() of an in-range value, as a double. */
static double to_dtype(double v, od_dtype dt)
{
    switch (dt) {
    case OD_UINT8: return (double)(uint8_t)od_double_to_i64(v);
    case OD_INT8: return (double)(int8_t)od_double_to_i32(v);
    case OD_INT16: return (double)(int16_t)od_double_to_i32(v);
    case OD_INT32: return (double)od_double_to_i32(v);
    case OD_INT64: return (double)od_double_to_i64(v);
    case OD_FLOAT16: return od_half_to_float(od_double_to_half(v));
    case OD_BFLOAT16: return od_bf16_to_float(od_double_to_bf16(v));
    case OD_FLOAT32: return (float)v;
    default: return v;
    }
}

static float round16(od_dtype dt, float v)
{
    return dt == OD_FLOAT16 ? od_half_to_float(od_float_to_half(v))
           : dt == OD_BFLOAT16 ? od_bf16_to_float(od_float_to_bf16(v)) : v;
}

od_status od_cuda_linspace(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    od_linspace_params p;
    od_cu_env env;
    od_tensor *out = NULL;
    od_status st;
    if ((st = od_linspace_params_of(id, s, &p, err)) ||
        (st = od_cu_factory_begin(op, id, p.device, s, &env, &out, err)))
        return st;
    if (p.steps == 1) { /* ATen: fill_(start), or fill_(pow(base, start)) */
        od_value a[2] = {od_tensor_v(out), p.log ? od_double(pow(p.base, p.start)) : s->args[0]};
        od_stack fs;
        if (!(st = od_call_builtin(OD_OPID_fill__Scalar, a, 2, &fs, err)))
            od_stack_release_rets(&fs);
    } else if (p.steps > 1) {
        double start = to_dtype(p.start, p.dtype), end = to_dtype(p.end, p.dtype), step, base = p.base;
        bool wide = p.dtype == OD_FLOAT64;
        float nm1 = (float)(p.steps - 1);
        if (wide)
            step = (end - start) / (double)(p.steps - 1);
        else if (!od_dtype_is_floating(p.dtype)) /* float step; logspace subtracts in the dtype first */
            step = p.log ? (float)(end - start) / nm1 : ((float)end - (float)start) / nm1;
        else
            step = round16(p.dtype, round16(p.dtype, (float)end - (float)start) / round16(p.dtype, nm1));
        if (od_dtype_is_floating(p.dtype) && !wide)
            base = round16(p.dtype, (float)base);
        st = od_cu_status(od_cu_linspace(od_tensor_data(out), out->dtype, p.steps, p.log, wide, start, end, step,
                                         base, env.sm_count, env.stream),
                          "linspace kernel launch", err);
    }
    return od_cu_factory_end(op, &env, st, p.steps > 1, out, s, err);
}

od_status od_cuda_tri_indices(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    od_tri_indices_params p;
    od_cu_env env;
    od_tensor *out = NULL;
    od_status st;
    if ((st = od_tri_indices_params_of(id, s, &p, err)) ||
        (st = od_cu_factory_begin(op, id, p.device, s, &env, &out, err)))
        return st;
    if (p.count == 0)
        return od_cu_factory_end(op, &env, OD_OK, false, out, s, err);
    void *idx = malloc(od_tensor_nbytes(out));
    if (!idx)
        return od_cu_factory_end(op, &env, od_error_set(err, OD_ENOMEM, "%s: out of host memory", od_cu_op_name(op)),
                                 false, out, s, err);
    od_tri_indices_fill(&p, idx);
    st = od_cu_factory_upload(op, &env, out, idx, s, err);
    free(idx);
    return st;
}

od_status od_cuda_local_scalar(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)ctx;
    (void)ks;
    (void)op;
    if (s->nargs != 1 || s->args[0].tag != OD_T_TENSOR || !s->args[0].u.t)
        return od_error_set(err, OD_EINVAL, "_local_scalar_dense(): argument 'self' must be a Tensor");
    od_tensor *t = s->args[0].u.t, *first = NULL, *host = NULL;
    size_t es = od_dtype_size(t->dtype);
    if (od_tensor_numel(t) == 0 && !(t->storage && (size_t)t->offset * es + es <= t->storage->nbytes))
        return od_error_set(err, OD_EINVAL,
                            "_local_scalar_dense(): cannot read a Scalar from a tensor with no elements");
    od_status st = od_tensor_as_strided(t, NULL, NULL, 0, t->offset, &first, err);
    if (!st) {
        od_value cv[7] = {od_tensor_v(first), od_none(), od_none(), od_device_v((od_device){OD_DEV_CPU, 0}),
                          od_none(), od_bool(false), od_none()};
        st = od_call_builtin1(OD_OPID__to_copy, cv, 7, &host, err);
    }
    od_tensor_release(first);
    if (st)
        return st;
    od_value v = od_cpu_load_value(od_tensor_data(host), host->dtype);
    od_tensor_release(host);
    s->rets[0] = v;
    s->nrets = 1;
    return OD_OK;
}
