/* bnorm.c — boxed CUDA kernels of native_batch_norm, native_group_norm and
 * their backward (launchers in bnorm.cu).
 *
 * Invariants: od_norm_plan_of (the shape function's checks) runs first, so
 * errors match the CPU and Meta kernels. Operands are made contiguous on the
 * device; the running statistics are written into contiguous buffers and
 * copied into the caller's tensors (stored tensors included) before the
 * stream is synchronised. A masked-out backward output is None. Scratch is
 * freed only after od_cu_finish.
 */
#include <string.h>

#include "bnorm.h"
#include "cuda_internal.h"

static const void *dptr(const od_tensor *t) { return t ? od_tensor_data(t) : NULL; }

od_status od_cuda_norm(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    od_norm_plan p;
    od_status st;
    int device, n = 0;
    od_cu_env env;
    od_tensor *outs[3] = {NULL, NULL, NULL}, *in[8] = {NULL}, *run[2] = {NULL, NULL};
    void *scratch = NULL;
    size_t scratch_bytes = 0;
    if ((st = od_norm_plan_of(id, s, &p, err)) || (st = od_cu_call_device(op, s, false, &device, err)) ||
        (st = od_cu_begin(device, &env, err)))
        return st;
    if ((st = od_cu_outputs(id, s, device, outs, &n, err)))
        return st;
    const od_tensor *srcs[8] = {p.input, p.grad_out, p.weight, p.bias, p.rmean, p.rvar, p.mean, p.invstd};
    for (int i = 0; i < 8; i++)
        if (srcs[i] && (st = od_cu_contiguous(&env, (od_tensor *)srcs[i], &in[i], err)))
            goto fail_sync;
    bool bn_train = !p.group && !p.backward && p.train;
    const od_tensor *rs[2] = {p.rmean, p.rvar};
    for (int i = 0; i < 2; i++)
        if (bn_train && rs[i] && (st = od_tensor_empty(rs[i]->sizes, rs[i]->ndim, rs[i]->dtype, rs[i]->device,
                                                       &run[i], err)))
            goto fail_sync;
    od_cu_norm_args a;
    memset(&a, 0, sizeof a);
    a.kind = p.group ? (p.backward ? OD_CU_NORM_GN_BACKWARD : OD_CU_NORM_GN)
                     : (p.backward ? OD_CU_NORM_BN_BACKWARD : OD_CU_NORM_BN);
    a.xdt = (int)p.input->dtype;
    a.pdt = (int)p.stat_dtype;
    a.x = dptr(in[0]);
    a.dy = dptr(in[1]);
    a.w = dptr(in[2]);
    a.b = dptr(in[3]);
    a.rm = dptr(in[4]);
    a.rv = dptr(in[5]);
    a.mean = dptr(in[6]);
    a.invstd = dptr(in[7]);
    bool live[3] = {!p.backward || p.mask[0], !p.backward || p.mask[1], !p.backward || p.mask[2]};
    a.y = live[0] ? od_tensor_data(outs[0]) : NULL;
    if (p.backward) {
        a.gw = live[1] ? od_tensor_data(outs[1]) : NULL;
        a.gb = live[2] ? od_tensor_data(outs[2]) : NULL;
    } else {
        a.smean = od_tensor_data(outs[1]);
        a.sinvstd = od_tensor_data(outs[2]);
    }
    a.nrm = run[0] ? od_tensor_data(run[0]) : NULL;
    a.nrv = run[1] ? od_tensor_data(run[1]) : NULL;
    a.N = p.N;
    a.C = p.C;
    a.S = p.S;
    a.G = p.G;
    a.train = p.train;
    a.momentum = p.momentum;
    a.eps = p.eps;
    int64_t numel = od_tensor_numel(p.input);
    if (numel == 0) {
        /* statistics and gradients of no element are 0: cpu/norm.c's rule without
         * rows (N == 0); its NaN statistics for rows of no element are torch's CPU
         * answer, not checked against torch's CUDA kernels (no GPU here) */
        for (int i = 1; i < 3; i++)
            if (live[i] && od_tensor_nbytes(outs[i]) &&
                (st = od_cu_status(cudaMemsetAsync(od_tensor_data(outs[i]), 0, od_tensor_nbytes(outs[i]), env.stream),
                                   "cudaMemsetAsync in native norm", err)))
                goto fail_sync;
    } else {
        if (p.group && p.backward) {
            scratch_bytes = 2 * (size_t)(p.N * p.C) * sizeof(double);
            if ((st = od_cu_scratch(&env, scratch_bytes, &scratch, err)))
                goto fail_sync;
            a.scratch = scratch;
        }
        if ((st = od_cu_status(od_cu_norm(&a, env.sm_count, env.stream), "norm kernel launch", err)))
            goto fail_sync;
        for (int i = 0; i < 2; i++)
            if (run[i] && (st = od_cu_copy_same_device(&env, (od_tensor *)rs[i], run[i], err)))
                goto fail_sync;
    }
    if ((st = od_cu_finish(&env, od_cu_op_name(op), err)))
        goto fail;
    od_cu_scratch_free(&env, scratch, scratch_bytes);
    for (int i = 0; i < 8; i++)
        od_tensor_release(in[i]);
    for (int i = 0; i < 2; i++)
        od_tensor_release(run[i]);
    for (int i = 0; i < 3; i++)
        if (!live[i]) {
            od_tensor_release(outs[i]);
            outs[i] = NULL;
        }
    od_cu_return(s, outs, 3);
    for (int i = 0; i < 3; i++)
        if (!live[i])
            s->rets[i] = od_none();
    return OD_OK;
fail_sync:
    od_cu_finish(&env, od_cu_op_name(op), NULL);
fail:
    od_cu_scratch_free(&env, scratch, scratch_bytes);
    for (int i = 0; i < 8; i++)
        od_tensor_release(in[i]);
    for (int i = 0; i < 2; i++)
        od_tensor_release(run[i]);
    for (int i = 0; i < 3; i++)
        od_tensor_release(outs[i]);
    return st;
}
