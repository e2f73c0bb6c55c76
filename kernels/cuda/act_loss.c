/* act_loss.c — CUDA binary_cross_entropy, glu, prelu and their _backward.
 *
 * Invariants: od_act_loss_plan_of validates first, on the device's tensors,
 * so CUDA refuses what the CPU refuses with the same messages (torch's CUDA
 * kernels also take float16 and bfloat16 for bce and float16 for glu and
 * prelu; these do not yet). The work is staged through the host as the nll
 * losses' is (loss.c): the tensor arguments are copied to the CPU, the same
 * operator runs there through the dispatcher (cpu/act_loss.c) and each
 * return is copied back to the call's device, so CUDA's answers equal the
 * CPU's exactly. Device kernels are future work; the copies dominate these
 * memory-bound operators either way on a host-staged path.
 */
#include "cuda_internal.h"
#include "od_shape.h"

#define AL_MAX_ARGS 5

od_status od_cuda_act_loss(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    int device;
    od_act_loss_plan p;
    od_status st;
    if ((st = od_cu_call_device(op, s, false, &device, err)) || (st = od_act_loss_plan_of(id, s, &p, err)))
        return st;
    od_value args[AL_MAX_ARGS];
    int n = s->nargs < AL_MAX_ARGS ? s->nargs : AL_MAX_ARGS;
    for (int i = 0; i < n; i++)
        args[i] = s->args[i];
    return od_cu_on_host(id, args, n, device, s, err);
}
