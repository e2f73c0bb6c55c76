/* search.c — searchsorted (.Tensor, .Scalar) and bucketize (.Tensor,
 * .Scalar) on CUDA: the boxed kernel of search.cu's launcher.
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
