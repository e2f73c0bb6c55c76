/* factory.c — arange and rand / randn on CUDA, and the start and end every
 * CUDA factory shares (range.c's too).
 *
 * Invariants: the BackendSelect kernel routes a factory here by its device
 * argument; the shape function validates and sizes the output. arange
 * computes each element independently (start + i * step, in int64 for
 * integral results, else double), so there is no accumulated rounding.
 * rand/randn draw from the process-wide Philox generator (runtime.c): each
 * call takes numel counters, so no two calls share numbers.
 */
#include "cuda_internal.h"

/* Factories have no tensor arguments: the device comes from their options. */
static od_status factory_device(const od_op *op, od_device d, int *device, od_error *err)
{
    if (d.type != OD_DEV_CUDA) {
        char b[32];
        od_device_print(d, b, sizeof b);
        return od_error_set(err, OD_EINTERNAL, "%s: the CUDA kernel was called for device %s",
                            od_cu_op_name(op), b);
    }
    *device = d.index;
    return OD_OK;
}

od_status od_cu_factory_begin(const od_op *op, od_opid id, od_device d, const od_stack *s, od_cu_env *env,
                              od_tensor **out, od_error *err)
{
    int device = 0, n = 0;
    od_status st;
    if ((st = factory_device(op, d, &device, err)) || (st = od_cu_begin(device, env, err)))
        return st;
    return od_cu_outputs(id, s, device, out, &n, err);
}

od_status od_cu_factory_end(const od_op *op, const od_cu_env *env, od_status st, bool launched, od_tensor *out,
                            od_stack *s, od_error *err)
{
    if (launched) {
        od_status fs = od_cu_finish(env, od_cu_op_name(op), st ? NULL : err);
        if (!st)
            st = fs;
    }
    if (st) {
        od_tensor_release(out);
        return st;
    }
    od_cu_return(s, &out, 1);
    return OD_OK;
}

od_status od_cu_factory_upload(const od_op *op, const od_cu_env *env, od_tensor *out, const void *host,
                               od_stack *s, od_error *err)
{
    od_status st = od_cu_status(cudaMemcpyAsync(od_tensor_data(out), host, od_tensor_nbytes(out),
                                                cudaMemcpyHostToDevice, env->stream),
                                "cudaMemcpyAsync (host to device)", err);
    return od_cu_factory_end(op, env, st, true, out, s, err);
}

od_status od_cuda_arange(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    od_arange_params p;
    od_cu_env env;
    od_tensor *out = NULL;
    od_status st;
    if ((st = od_arange_params_of(id, s, &p, err)) ||
        (st = od_cu_factory_begin(op, id, p.device, s, &env, &out, err)))
        return st;
    if (p.size > 0)
        st = od_cu_status(od_cu_arange(od_tensor_data(out), out->dtype, p.size, p.integral, p.fstart, p.fstep,
                                       p.istart, p.istep, env.sm_count, env.stream),
                          "arange kernel launch", err);
    return od_cu_factory_end(op, &env, st, p.size > 0, out, s, err);
}

od_status od_cuda_random(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    od_cu_env env;
    od_tensor *out = NULL;
    int n = 0;
    od_status st;
    /* rand / randn(size, dtype, layout, device, pin_memory): validate first. */
    od_out_spec spec;
    if ((st = od_shape_factory(id, s, &spec, &n, err)) ||
        (st = od_cu_factory_begin(op, id, spec.device, s, &env, &out, err)))
        return st;
    int64_t numel = od_tensor_numel(out);
    if (numel > 0) {
        uint64_t seed, offset;
        od_cu_rng_next((uint64_t)numel, &seed, &offset);
        st = od_cu_status(od_cu_random(od_tensor_data(out), out->dtype, numel, id == OD_OPID_randn, seed, offset,
                                       env.sm_count, env.stream),
                          "random kernel launch", err);
    }
    return od_cu_factory_end(op, &env, st, numel > 0, out, s, err);
}
