/* scan.c — boxed CUDA kernels of the scans (cumsum, cumprod, logcumsumexp,
 * cummax, cummin), the sort family (sort, sort.stable, topk, kthvalue), the
 * selections (median, nanmedian, mode: the CPU's algorithm replayed per
 * line on the device, so indices of ties are the CPU's) and isin.
 *
 * Invariants: the shape function and od_scan_check_dtype (kernels/
 * shape_scan.c) validate first, so CUDA refuses and accepts what the CPU
 * backend does, with the same messages; the input is made contiguous
 * (cumsum/cumprod: cast to the result dtype, as ATen does) before scan.cu's
 * kernels run. A 0-dim cumsum/cumprod/logcumsumexp is a
 * copy (ATen's fill_), which keeps -0.0. Every call is synchronous
 * (od_cu_finish) so scratch is free to reuse afterwards.
 */
#include <math.h>
#include <string.h>

#include "cpu/cpu_kernels.h" /* od_cpu_scalar_to_dtype: host bytes of a constant */
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

/* sort, sort.stable, topk, kthvalue (CUB's radix sort) and the selections
 * median, nanmedian, mode (od_cuda_select: the CPU's algorithm per line). */
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
    int sop = od_sort_op_of(id, &info);
    bool select = sop >= OD_SORT_OP_MEDIAN;
    if (self->ndim == 0 && !select)
        sop = OD_SORT_OP_SORT; /* a copy of self and index 0, even for topk with k == 0 */
    char nan8[8]; /* read by the copy before cudaMemcpyAsync returns (pageable memory) */
    if (select && od_tensor_numel(self) == 0 && n == 1) { /* median() of nothing: NaN as the dtype, as on the CPU */
        od_value nan = od_double(NAN);
        od_cpu_scalar_to_dtype(&nan, self->dtype, nan8);
        st = od_cu_status(cudaMemcpyAsync(od_tensor_data(outs[0]), nan8, od_dtype_size(self->dtype),
                                          cudaMemcpyHostToDevice, env.stream),
                          "cudaMemcpyAsync (host to device)", err);
    } else if (od_tensor_numel(self) > 0 && od_tensor_numel(outs[0]) > 0) {
        int64_t size = self->ndim == 0 ? 1 : info.size;
        wsb = select ? od_cu_select_scratch(info.outer, size, info.inner)
                     : od_cu_sort_scratch((int)self->dtype, info.outer, info.size, info.inner);
        if (wsb == 0)
            st = od_error_set(err, OD_ENOMEM, "%s: cannot plan a sort of %lld lines of %lld", od_cu_op_name(op),
                              (long long)(info.outer * info.inner), (long long)size);
        else if (!(st = od_cu_contiguous(&env, self, &in, err)) && !(st = od_cu_scratch(&env, wsb, &ws, err)))
            st = od_cu_status(select ? od_cu_select(od_tensor_data(in), od_tensor_data(outs[0]),
                                                    n == 2 ? od_tensor_data(outs[1]) : NULL, (int)self->dtype, sop,
                                                    info.outer, size, info.inner, ws, env.sm_count, env.stream)
                                     : od_cu_sort(od_tensor_data(in), od_tensor_data(outs[0]), od_tensor_data(outs[1]),
                                                  (int)self->dtype, sop, info.outer, info.size, info.inner, info.k,
                                                  info.descending, info.sorted, ws, env.sm_count, env.stream),
                              select ? "selection kernel launch" : "sort kernel launch", err);
    }
    return end_call(op, &env, st, ws, wsb, in, outs, n, s, err);
}

/* median, nanmedian (and .dim), mode: od_cuda_sort's selection branch. */
od_status od_cuda_select(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    return od_cuda_sort(ctx, op, ks, s, err);
}

/* isin's operand i on the device in dtype ct, contiguous (*out new): a
 * tensor converted, or a Scalar as ATen wraps it (a 0-dim wrapped number),
 * whose host bytes are copied up. */
static od_status isin_operand(const od_cu_env *env, const od_value *v, od_dtype ct, int device, od_tensor **out,
                              od_error *err)
{
    od_device dev = {OD_DEV_CUDA, device};
    od_status st;
    if (v->tag == OD_T_TENSOR) {
        od_tensor *t = v->u.t;
        if (t->dtype == ct)
            return od_cu_contiguous(env, t, out, err);
        if ((st = od_tensor_empty(t->sizes, t->ndim, ct, dev, out, err)))
            return st;
        return od_cu_copy_same_device(env, *out, t, err);
    }
    char b8[8];
    od_cpu_scalar_to_dtype(v, ct, b8);
    if ((st = od_tensor_empty(NULL, 0, ct, dev, out, err)))
        return st;
    /* on the stream, before the kernels that read it; a copy from pageable
     * memory has read b8 by the time it returns */
    return od_cu_status(cudaMemcpyAsync(od_tensor_data(*out), b8, od_dtype_size(ct), cudaMemcpyHostToDevice,
                                        env->stream),
                        "cudaMemcpyAsync (host to device)", err);
}

/* isin.Tensor_Tensor / Tensor_Scalar / Scalar_Tensor: the CPU kernel's
 * choices (od_isin_plan_of), then plain membership or the sorted replay on
 * the device. */
od_status od_cuda_isin(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    int device = 0, nouts = 0;
    od_cu_env env;
    od_tensor *out = NULL, *e = NULL, *t = NULL;
    void *ws = NULL;
    size_t wsb = 0;
    od_isin_plan p;
    od_status st;
    if ((st = od_isin_plan_of(id, s, false, &p, err)) || (st = od_cu_call_device(op, s, false, &device, err)) ||
        (st = od_cu_begin(device, &env, err)) || (st = od_cu_outputs(id, s, device, &out, &nouts, err)))
        return st;
    if (p.n > 0) {
        wsb = od_cu_isin_scratch(p.n, p.m, p.replay);
        if (wsb == 0)
            st = od_error_set(err, OD_ENOMEM, "%s: cannot plan the search of %lld elements among %lld",
                              od_cu_op_name(op), (long long)p.n, (long long)p.m);
        if (!st && !(st = isin_operand(&env, &s->args[0], p.common, device, &e, err)) &&
            !(st = isin_operand(&env, &s->args[1], p.common, device, &t, err)) &&
            !(st = od_cu_scratch(&env, wsb, &ws, err)))
            st = od_cu_status(od_cu_isin(od_tensor_data(e), p.n, od_tensor_data(t), p.m, (int)p.common, p.replay,
                                         p.invert, od_tensor_data(out), ws, env.sm_count, env.stream),
                              "isin kernel launch", err);
    }
    od_status fs = od_cu_finish(&env, od_cu_op_name(op), st ? NULL : err);
    if (!st)
        st = fs;
    if (ws)
        od_cu_scratch_free(&env, ws, wsb);
    od_tensor_release(e);
    od_tensor_release(t);
    if (st) {
        od_tensor_release(out);
        return st;
    }
    od_cu_return(s, &out, 1);
    return OD_OK;
}
