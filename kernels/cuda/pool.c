/* pool.c — the pooling operators on CUDA (max/avg/adaptive pools 2d and
 * 3d and their _backward): the boxed kernel of pool.cu's launcher.
 *
 * Invariants: od_pool_plan_of (shape_pool.c) checked the call; self,
 * grad_output and indices are made contiguous on the device first, so the
 * launcher indexes planes x T x H x W directly. Backward's accumulator is
 * scratch from the caching allocator, zeroed on the stream and freed after
 * od_cu_finish. Synchronous, as every CUDA operator here.
 */
#include <string.h>

#include "cu_pool.h"
#include "cuda_internal.h"

od_status od_cuda_pool(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    od_pool_plan p;
    int device, nouts = 0;
    od_cu_env env;
    od_tensor *outs[2] = {NULL, NULL}, *x = NULL, *go = NULL, *ix = NULL;
    void *acc = NULL;
    size_t acc_bytes = 0;
    od_status st;
    if ((st = od_pool_plan_of(id, s, &p, err)) || (st = od_cu_call_device(op, s, false, &device, err)) ||
        (st = od_cu_begin(device, &env, err)) || (st = od_cu_outputs(id, s, device, outs, &nouts, err)))
        return st;
    od_cu_pool_args a;
    memset(&a, 0, sizeof a);
    a.g = p.g;
    a.dtype = (int32_t)p.self->dtype;
    a.backward = p.backward;
    a.sm_count = env.sm_count;
    a.planes = p.planes;
    a.out = od_tensor_data(outs[0]);
    if (p.backward) {
        if ((st = od_cu_contiguous(&env, (od_tensor *)p.grad, &go, err)) ||
            (p.indices && (st = od_cu_contiguous(&env, (od_tensor *)p.indices, &ix, err))))
            goto fail;
        a.go = od_tensor_data(go);
        a.ix = ix ? od_tensor_data(ix) : NULL;
        acc_bytes = (size_t)od_tensor_numel(outs[0]) * (size_t)od_cu_pool_acc_size(a.dtype);
        if ((st = od_cu_scratch(&env, acc_bytes, &acc, err)) ||
            (acc_bytes && (st = od_cu_status(cudaMemsetAsync(acc, 0, acc_bytes, env.stream), "pool accumulator", err))))
            goto fail;
        a.acc = acc;
    } else {
        if ((st = od_cu_contiguous(&env, (od_tensor *)p.self, &x, err)))
            goto fail;
        a.x = od_tensor_data(x);
        a.out_ix = nouts == 2 ? od_tensor_data(outs[1]) : NULL;
    }
    if ((st = od_cu_status(od_cu_pool(&a, env.stream), "pooling kernel launch", err)) ||
        (st = od_cu_finish(&env, od_cu_op_name(op), err)))
        goto fail;
    od_cu_scratch_free(&env, acc, acc_bytes);
    od_tensor_release(x);
    od_tensor_release(go);
    od_tensor_release(ix);
    od_cu_return(s, outs, nouts);
    return OD_OK;
fail:
    if (cudaStreamSynchronize(env.stream) != cudaSuccess)
        (void)cudaGetLastError();
    od_cu_scratch_free(&env, acc, acc_bytes);
    od_tensor_release(x);
    od_tensor_release(go);
    od_tensor_release(ix);
    for (int i = 0; i < nouts; i++)
        od_tensor_release(outs[i]);
    return st;
}
