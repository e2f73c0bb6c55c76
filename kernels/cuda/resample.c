/* resample.c — upsample_nearest1d/2d/3d and upsample_linear1d / bilinear2d /
 * trilinear3d (.vec too) and their _backward on CUDA: the boxed kernel of
 * resample.cu's launcher.
 *
 * Invariants: od_resample_plan_of (shape_resample.c) checked the call; the
 * input (or grad_output) is made contiguous on the device first. Backward's
 * accumulator is scratch from the caching allocator, zeroed on the stream,
 * freed after od_cu_finish. Synchronous, as every CUDA operator here.
 */
#include <string.h>

#include "cu_resample.h"
#include "cuda_internal.h"

od_status od_cuda_resample(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    od_resample_plan p;
    int device, nouts = 0;
    od_cu_env env;
    od_tensor *out = NULL, *x = NULL;
    void *acc = NULL;
    size_t acc_bytes = 0;
    od_status st;
    if ((st = od_resample_plan_of(id, s, &p, err)) || (st = od_cu_call_device(op, s, false, &device, err)) ||
        (st = od_cu_begin(device, &env, err)) || (st = od_cu_outputs(id, s, device, &out, &nouts, err)))
        return st;
    od_cu_resample_args a;
    memset(&a, 0, sizeof a);
    a.g = p.g;
    a.dtype = (int32_t)p.x->dtype;
    a.backward = p.backward;
    a.sm_count = env.sm_count;
    a.planes = p.planes;
    a.out = od_tensor_data(out);
    if ((st = od_cu_contiguous(&env, (od_tensor *)p.x, &x, err)))
        goto fail;
    a.x = od_tensor_data(x);
    if (p.backward) {
        acc_bytes = (size_t)od_tensor_numel(out) * (size_t)od_cu_resample_acc_size(a.dtype);
        if ((st = od_cu_scratch(&env, acc_bytes, &acc, err)) ||
            (acc_bytes && (st = od_cu_status(cudaMemsetAsync(acc, 0, acc_bytes, env.stream), "upsample accumulator", err))))
            goto fail;
        a.acc = acc;
    }
    if ((st = od_cu_status(od_cu_resample(&a, env.stream), "upsample kernel launch", err)) ||
        (st = od_cu_finish(&env, od_cu_op_name(op), err)))
        goto fail;
    od_cu_scratch_free(&env, acc, acc_bytes);
    od_tensor_release(x);
    od_cu_return(s, &out, 1);
    return OD_OK;
fail:
    if (cudaStreamSynchronize(env.stream) != cudaSuccess)
        (void)cudaGetLastError();
    od_cu_scratch_free(&env, acc, acc_bytes);
    od_tensor_release(x);
    od_tensor_release(out);
    return st;
}
