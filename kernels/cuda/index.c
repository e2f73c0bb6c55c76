/* index.c — gather, scatter (every overload), scatter_add and
 * scatter_reduce.two on CUDA.
 *
 * Invariants: od_scatter_parse (kernels/shape_index.c) checks the call as on
 * the CPU; the index is then read back to the host and checked in
 * row-major order, so a bad index gives the CPU's message for the same
 * first offender and the device never indexes out of range (a sync and a
 * copy: correctness over speed). Launchers live in index.cu.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cu_index.h"
#include "cuda_internal.h"

static od_status drain(const od_cu_env *env, od_status st)
{
    if (cudaStreamSynchronize(env->stream) != cudaSuccess)
        (void)cudaGetLastError();
    return st;
}

/* idx (contiguous int64 on the device, n entries) copied to a new host
 * array *out (free it). */
static od_status index_to_host(const od_cu_env *env, const od_tensor *idx, int64_t n, int64_t **out,
                               od_error *err)
{
    int64_t *h = malloc((size_t)(n > 0 ? n : 1) * sizeof *h);
    if (!h)
        return od_error_set(err, OD_ENOMEM, "out of host memory reading %lld indices", (long long)n);
    od_status st = od_cu_status(cudaMemcpyAsync(h, od_tensor_data(idx), (size_t)n * sizeof *h,
                                                cudaMemcpyDeviceToHost, env->stream),
                                "cudaMemcpyAsync (indices to host)", err);
    if (!st)
        st = od_cu_finish(env, "index check", err);
    if (st) {
        free(h);
        return st;
    }
    *out = h;
    return OD_OK;
}

od_status od_cuda_scatter(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    od_scatter_info info;
    int device, nouts = 0;
    od_cu_env env;
    od_tensor *out = NULL, *idx = NULL;
    int64_t *hidx = NULL, *count = NULL;
    size_t count_bytes = 0;
    od_status st;
    if ((st = od_cu_call_device(op, s, false, &device, err)) || (st = od_scatter_parse(id, s, &info, err)) ||
        (st = od_cu_begin(device, &env, err)) || (st = od_cu_outputs(id, s, device, &out, &nouts, err)))
        return st;
    const od_tensor *self = info.self, *src = info.src;
    od_tensor *index = info.index;
    od_dtype dt = self->dtype;
    int64_t n = od_tensor_numel(index);
    if (!info.gather && (st = od_cu_copy_same_device(&env, out, self, err)))
        goto fail;
    if (n == 0) {
        if (info.reduce == OD_SCR_MEAN && dt == OD_BOOL) {
            st = od_error_set(err, OD_EUNSUPPORTED, "\"div_floor_cuda\" not implemented for 'Bool'");
            goto fail;
        }
        if ((st = od_cu_finish(&env, od_cu_op_name(op), err)))
            goto fail;
        od_cu_return(s, &out, 1);
        return OD_OK;
    }
    if (info.reduce == OD_SCR_MEAN && dt == OD_BOOL && info.include_self) {
        st = od_error_set(err, OD_EUNSUPPORTED, "\"scatter_gather_tensor_cuda_reduce_mean\" not implemented for 'Bool'");
        goto fail;
    }
    /* the first out-of-range index in row-major order, as the CPU kernel */
    if ((st = od_cu_contiguous(&env, index, &idx, err)) || (st = index_to_host(&env, idx, n, &hidx, err)))
        goto fail;
    int64_t limit = self->ndim > 0 ? self->sizes[info.dim] : 1, bad = -1;
    for (int64_t k = 0; k < n && bad < 0; k++)
        if (hidx[k] < 0 || hidx[k] >= limit)
            bad = k;
    if (!info.gather && !src && bad != 0 && (st = od_scalar_check_fits(&info.value, dt, err)))
        goto fail;
    if (bad >= 0) {
        st = od_scatter_check_index(&info, hidx[bad], err);
        goto fail;
    }
    if (info.reduce == OD_SCR_MEAN && dt == OD_BOOL) {
        st = od_error_set(err, OD_EUNSUPPORTED, "\"scatter_gather_tensor_cuda_reduce_mean\" not implemented for 'Bool'");
        goto fail;
    }
    od_cu_scatter_args a;
    memset(&a, 0, sizeof a);
    a.gather = info.gather;
    a.reduce = (int32_t)info.reduce;
    a.include_self = info.include_self;
    a.dtype = dt;
    a.ndim = idx->ndim;
    a.dim = info.dim;
    a.n = n;
    a.limit = limit;
    a.out_numel = od_tensor_numel(out);
    a.index = od_tensor_data(idx);
    a.src = info.gather ? od_tensor_data(self) : src ? od_tensor_data(src) : NULL;
    a.out = od_tensor_data(out);
    a.sm_count = env.sm_count;
    int64_t ocontig[OD_MAX_DIMS];
    for (int64_t k = out->ndim - 1, acc = 1; k >= 0; k--) {
        ocontig[k] = acc;
        acc *= out->sizes[k];
    }
    for (int k = 0; k < idx->ndim; k++) {
        a.sizes[k] = idx->sizes[k];
        a.istr[k] = idx->strides[k];
        a.sstr[k] = src && k < src->ndim ? src->strides[k] : 0;
        a.ostr[k] = info.gather ? (k < self->ndim ? self->strides[k] : 0) : (k < out->ndim ? ocontig[k] : 0);
    }
    a.dstride = info.gather ? (self->ndim > 0 ? self->strides[info.dim] : 0) : (out->ndim > 0 ? ocontig[info.dim] : 0);
    if (!info.gather && !src) {
        const od_value *v = &info.value;
        a.value_is_int = v->tag != OD_T_DOUBLE;
        a.vi = v->tag == OD_T_BOOL ? (int64_t)v->u.b : v->tag == OD_T_INT ? v->u.i : 0;
        a.vd = v->tag == OD_T_DOUBLE ? v->u.d : 0.0;
        if (v->tag == OD_T_DOUBLE && (dt == OD_BOOL || od_dtype_is_integral(dt, true))) {
            /* torch's cast of a (fitting) double: bool is != 0, integers truncate */
            a.value_is_int = 1;
            a.vi = dt == OD_BOOL ? (v->u.d != 0) : (int64_t)trunc(v->u.d);
        }
    }
    if (info.reduce == OD_SCR_MEAN) {
        count_bytes = (size_t)a.out_numel * sizeof(int64_t);
        if ((st = od_cu_scratch(&env, count_bytes, (void **)&count, err)) ||
            (st = od_cu_status(cudaMemsetAsync(count, 0, count_bytes, env.stream), "cudaMemsetAsync", err)))
            goto fail;
        a.count = count;
    }
    if ((st = od_cu_status(od_cu_scatter(&a, env.stream), "scatter kernel launch", err)) ||
        (st = od_cu_finish(&env, od_cu_op_name(op), err)))
        goto fail;
    if (count)
        od_cu_scratch_free(&env, count, count_bytes);
    free(hidx);
    od_tensor_release(idx);
    od_cu_return(s, &out, 1);
    return OD_OK;
fail:
    drain(&env, st);
    if (count)
        od_cu_scratch_free(&env, count, count_bytes);
    free(hidx);
    od_tensor_release(idx);
    od_tensor_release(out);
    return st;
}
