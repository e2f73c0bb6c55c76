/* loss.c — CUDA nll_loss_forward, nll_loss2d_forward and their _backward.
 *
 * Invariants: od_nll_plan_of validates first, on the device's tensors, so
 * CUDA refuses what the CPU refuses with the same messages. The work is
 * staged through the host as linalg.c's is: the tensor arguments are
 * copied to the CPU, the same operator runs there through the dispatcher
 * (cpu/loss.c) and each return is copied back to the call's device, so
 * CUDA's answers equal the CPU's exactly (torch's CUDA kernels sum in
 * another order; the tests allow for that). A device kernel that gathers
 * only the targeted elements is future work: the forward reads batch * map
 * elements of batch * classes * map, so the copy dominates.
 */
#include "cuda_internal.h"
#include "od_autograd.h"
#include "od_shape.h"

#define NLL_MAX_ARGS 7

od_status od_cuda_nll_loss(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    int device;
    od_nll_plan p;
    od_status st;
    if ((st = od_cu_call_device(op, s, false, &device, err)) || (st = od_nll_plan_of(id, s, &p, err)))
        return st;
    od_value args[NLL_MAX_ARGS];
    int n = s->nargs < NLL_MAX_ARGS ? s->nargs : NLL_MAX_ARGS;
    for (int i = 0; i < n; i++)
        args[i] = s->args[i];
    return od_cu_on_host(id, args, n, device, s, err);
}
