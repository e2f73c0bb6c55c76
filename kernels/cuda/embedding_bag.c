/* embedding_bag.c — CUDA _embedding_bag, _embedding_bag_forward_only (the
 * device kernel of embedding_bag.cu) and _embedding_bag_dense_backward,
 * _embedding_bag_per_sample_weights_backward (staged through the host as
 * loss.c's nll losses are).
 *
 * Invariants: od_embag_plan_of validates first, on the device's tensors, so
 * CUDA refuses what the CPU refuses with the same messages; the data checks
 * (offsets, index range) run on the device and come back through the
 * thread's error flag after od_cu_finish, worded as the CPU's slow path.
 * The backward ops copy their arguments to the CPU, run cpu/embedding_bag.c
 * through the dispatcher and copy the result back: their cost is dominated
 * by the [num_weights, D] result, which the copy moves once.
 */
#include <inttypes.h>
#include <string.h>

#include "cu_embedding_bag.h"
#include "cuda_internal.h"
#include "od_shape.h"

#define EB_MAX_ARGS 12

static void drain(const od_cu_env *env)
{
    if (cudaStreamSynchronize(env->stream) != cudaSuccess)
        (void)cudaGetLastError();
}

od_status od_cuda_embedding_bag(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    int device, nouts = 0;
    od_embag_plan p;
    od_status st;
    if ((st = od_cu_call_device(op, s, false, &device, err)) || (st = od_embag_plan_of(id, s, &p, err)))
        return st;
    if (p.kind != OD_EMBAG_FWD) {
        od_value args[EB_MAX_ARGS];
        int n = s->nargs < EB_MAX_ARGS ? s->nargs : EB_MAX_ARGS;
        for (int i = 0; i < n; i++)
            args[i] = s->args[i];
        return od_cu_on_host(id, args, n, device, s, err);
    }
    od_cu_env env;
    od_tensor *outs[4] = {0};
    if ((st = od_cu_begin(device, &env, err)) || (st = od_cu_outputs(id, s, device, outs, &nouts, err)))
        return st;
    od_cu_embag_args a;
    memset(&a, 0, sizeof a);
    a.mode = p.mode;
    a.wdt = (int32_t)p.dt;
    a.idx_dt = (int32_t)p.indices->dtype;
    a.off_dt = (int32_t)p.offsets->dtype;
    a.out_idt = (int32_t)p.idt;
    a.sm_count = env.sm_count;
    a.has_psw = p.psw != NULL;
    a.n = p.n;
    a.nbags = p.nbags;
    a.no = p.offsets->sizes[0];
    a.V = p.V;
    a.D = p.D;
    a.padding_idx = p.padding_idx;
    a.w = od_tensor_data(p.weight);
    a.ws0 = p.weight->strides[0];
    a.ws1 = p.weight->strides[1];
    a.idx = od_tensor_data(p.indices);
    a.is0 = p.indices->strides[0];
    a.off = od_tensor_data(p.offsets);
    a.os0 = p.offsets->strides[0];
    a.psw = p.psw ? od_tensor_data(p.psw) : NULL;
    a.ps0 = p.psw ? p.psw->strides[0] : 0;
    a.out = od_tensor_data(outs[0]);
    a.o2b = od_tensor_data(outs[1]);
    a.bsz = od_tensor_data(outs[2]);
    a.maxi = od_tensor_data(outs[3]);
    if ((st = od_cu_flag(&env, &a.flag, err)) ||
        (st = od_cu_status(od_cu_embedding_bag(&a, env.stream), "embedding_bag kernel launch", err)) ||
        (st = od_cu_finish(&env, od_cu_op_name(op), err)))
        goto fail;
    switch (a.flag[0]) {
    case 0: break;
    case OD_CU_EMBAG_EFIRST:
        st = od_error_set(err, OD_EINVAL,
                          "offsets[0] has to be 0, i.e., the first sequence in the mini-batch has to start from "
                          "position 0. However, got %" PRId64, a.flag[1]);
        goto fail;
    case OD_CU_EMBAG_ELAST:
        st = od_error_set(err, OD_EINVAL,
                          "offsets[-1] can not be greater than input's length %" PRId64 " but got offsets[-1] of %" PRId64,
                          p.n, a.flag[1]);
        goto fail;
    case OD_CU_EMBAG_EORDER:
        st = od_error_set(err, OD_EINVAL, "embedding_bag: offsets have to be non-decreasing, but offsets[%" PRId64
                          "] is less than the offset before it", a.flag[1]);
        goto fail;
    default:
        st = od_error_set(err, OD_EINVAL,
                          "embedding_bag: Expected idx >= 0 && idx < num_embeddings but found idx to be %" PRId64,
                          a.flag[1]);
        goto fail;
    }
    od_cu_return(s, outs, 4);
    return OD_OK;
fail:
    drain(&env);
    for (int i = 0; i < 4; i++)
        od_tensor_release(outs[i]);
    return st;
}
