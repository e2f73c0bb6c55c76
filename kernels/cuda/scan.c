/* scan.c — boxed CUDA kernels of the scans (cumsum, cumprod, logcumsumexp,
 * cummax, cummin) and the sort family (sort, sort.stable, topk, kthvalue).
 *
 * Invariants: the shape function and od_scan_check_dtype (kernels/
 * shape_scan.c) validate first, so CUDA refuses and accepts what the CPU
 * backend does, with the same messages; the input is made contiguous
 * (cumsum/cumprod: cast to the result dtype, as ATen does) before scan.cu's
 * kernels run. A 0-dim cumsum/cumprod/logcumsumexp is a
 * copy (ATen's fill_), which keeps -0.0. Every call is synchronous
 * (od_cu_finish) so scratch is free to reuse afterwards.
 */
#include "cuda_internal.h"
#include "od_sort_algo.h"

static int scan_op(od_opid id)
{
    switch (id) {
    case OD_OPID_cumsum: return OD_CU_SCAN_CUMSUM;
    case OD_OPID_cumprod: return OD_CU_SCAN_CUMPROD;
    case OD_OPID_logcumsumexp: return OD_CU_SCAN_LOGCUMSUMEXP;
    case OD_OPID_cummax: return OD_CU_SCAN_CUMMAX;
    default: return OD_CU_SCAN_CUMMIN;
    }
}

/* Common start: device, env, outputs, parsed arguments, dtype check. */
static od_status begin(const od_op *op, od_opid id, od_stack *s, od_cu_env *env, od_tensor **outs, int *n,
                       od_scan_info *info, od_error *err)
{
    int device;
    od_status st;
    if ((st = od_cu_call_device(op, s, false, &device, err)) || (st = od_scan_parse(id, s, info, err)) ||
        (st = od_scan_check_dtype(id, s, info, err)) || (st = od_cu_begin(device, env, err)) ||
        (st = od_cu_outputs(id, s, device, outs, n, err)))
        return st;
    return OD_OK;
}

/* Common end: waits for the stream (an error of the kernels is this call's),
 * frees the scratch and the input copy, and returns the outputs or st. */
static od_status end_call(const od_op *op, od_cu_env *env, od_status st, void *ws, size_t wsb, od_tensor *in,
                          od_tensor **outs, int n, od_stack *s, od_error *err)
{
    od_status fs = od_cu_finish(env, od_cu_op_name(op), st ? NULL : err);
    if (!st)
        st = fs;
    if (ws)
        od_cu_scratch_free(env, ws, wsb);
    od_tensor_release(in);
    if (st) {
        for (int i = 0; i < n; i++)
            od_tensor_release(outs[i]);
        return st;
    }
    od_cu_return(s, outs, n);
    return OD_OK;
}

od_status od_cuda_scan(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    od_cu_env env;
    od_scan_info info;
    od_tensor *outs[2] = {NULL, NULL}, *in = NULL;
    void *ws = NULL;
    size_t wsb = 0;
    int n = 0;
    od_status st = begin(op, id, s, &env, outs, &n, &info, err);
    if (st)
        return st;
    od_tensor *self = s->args[0].u.t;
    bool maxmin = id == OD_OPID_cummax || id == OD_OPID_cummin;
    if (od_tensor_numel(self) > 0) {
        if (self->ndim == 0 && !maxmin) {
            /* fill_'s overflow check reads the value on the host */
            uint64_t v = 0;
            if (!(st = od_cu_status(cudaMemcpyAsync(&v, od_tensor_data(self), od_dtype_size(self->dtype),
                                                    cudaMemcpyDeviceToHost, env.stream),
                                    "cudaMemcpyAsync (device to host)", err)) &&
                !(st = od_cu_status(cudaStreamSynchronize(env.stream), "cudaStreamSynchronize", err)) &&
                !(st = od_scan_check_fill(self->dtype, &v, outs[0]->dtype, err)))
                st = od_cu_copy_same_device(&env, outs[0], self, err);
        } else {
            if (outs[0]->dtype == self->dtype) {
                st = od_cu_contiguous(&env, self, &in, err);
            } else if (!(st = od_tensor_empty(self->sizes, self->ndim, outs[0]->dtype, self->device, &in, err))) {
                st = od_cu_copy_same_device(&env, in, self, err);
            }
            wsb = od_cu_scan_scratch((int)outs[0]->dtype, scan_op(id), info.outer, info.size, info.inner);
            if (!st && wsb)
                st = od_cu_scratch(&env, wsb, &ws, err);
            if (!st)
                st = od_cu_status(od_cu_scan(od_tensor_data(in), od_tensor_data(outs[0]),
                                             maxmin ? od_tensor_data(outs[1]) : NULL, (int)outs[0]->dtype,
                                             scan_op(id), info.outer, info.size, info.inner, ws, env.sm_count,
                                             env.stream),
                                  "scan kernel launch", err);
        }
    }
    return end_call(op, &env, st, ws, wsb, in, outs, n, s, err);
}

od_status od_cuda_sort(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    od_cu_env env;
    od_scan_info info;
    od_tensor *outs[2] = {NULL, NULL}, *in = NULL;
    void *ws = NULL;
    size_t wsb = 0;
    int n = 0;
    od_status st = begin(op, id, s, &env, outs, &n, &info, err);
    if (st)
        return st;
    od_tensor *self = s->args[0].u.t;
    int sop = id == OD_OPID_topk       ? OD_SORT_OP_TOPK
              : id == OD_OPID_kthvalue ? OD_SORT_OP_KTHVALUE
              : id == OD_OPID_sort_stable && info.stable ? OD_SORT_OP_SORT_STABLE
                                                          : OD_SORT_OP_SORT;
    if (self->ndim == 0)
        sop = OD_SORT_OP_SORT; /* a copy of self and index 0, even for topk with k == 0 */
    if (od_tensor_numel(self) > 0 && od_tensor_numel(outs[0]) > 0) {
        wsb = od_cu_sort_scratch((int)self->dtype, info.outer, info.size, info.inner);
        if (wsb == 0)
            st = od_error_set(err, OD_ENOMEM, "%s: cannot plan a sort of %lld lines of %lld", od_cu_op_name(op),
                              (long long)(info.outer * info.inner), (long long)info.size);
        else if (!(st = od_cu_contiguous(&env, self, &in, err)) && !(st = od_cu_scratch(&env, wsb, &ws, err)))
            st = od_cu_status(od_cu_sort(od_tensor_data(in), od_tensor_data(outs[0]), od_tensor_data(outs[1]),
                                         (int)self->dtype, sop, info.outer, info.size, info.inner, info.k,
                                         info.descending, info.sorted, ws, env.sm_count, env.stream),
                              "sort kernel launch", err);
    }
    return end_call(op, &env, st, ws, wsb, in, outs, n, s, err);
}
