/* dist.c — _cdist_forward, _cdist_backward, _pdist_forward and
 * _pdist_backward on CUDA: the boxed kernel of dist.cu's launcher.
 *
 * Invariants: od_dist_plan_of (shape_dist.c) checked the call. cdist's
 * operands are expanded to the broadcast batch and made contiguous on the
 * device, as the CPU kernel's; a result of zeros is cleared on the stream;
 * _cdist_forward's matrix-product path is _euclidean_dist's through the
 * dispatcher (od_dist_mm), as on the CPU. Synchronous.
 */
#include <string.h>

#include "cu_dist.h"
#include "cuda_internal.h"

/* x (borrowed) expanded to the plan's batch + its last two sizes, contiguous: *out new */
static od_status operand(const od_cu_env *env, const od_dist_plan *p, const od_tensor *x, bool batch, od_tensor **out,
                         od_error *err)
{
    *out = NULL;
    if (!batch)
        return od_cu_contiguous(env, (od_tensor *)x, out, err);
    int64_t sz[OD_MAX_DIMS];
    memcpy(sz, p->batch, sizeof(int64_t) * (size_t)p->nbatch);
    sz[p->nbatch] = x->sizes[x->ndim - 2];
    sz[p->nbatch + 1] = x->sizes[x->ndim - 1];
    od_tensor *e = NULL;
    od_status st = od_tensor_expand((od_tensor *)x, sz, p->nbatch + 2, &e, err);
    if (!st)
        st = od_cu_contiguous(env, e, out, err);
    od_tensor_release(e);
    return st;
}

od_status od_cuda_dist(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    od_dist_plan p;
    int device, nouts = 0;
    od_cu_env env;
    od_tensor *out = NULL, *x1 = NULL, *x2 = NULL, *g = NULL, *d = NULL;
    od_status st;
    if ((st = od_dist_plan_of(id, s, &p, err)))
        return st;
    if (p.mm && !p.empty && !p.zeros) {
        if ((st = od_dist_mm(&p, &out, err)))
            return st;
        od_cu_return(s, &out, 1);
        return OD_OK;
    }
    if ((st = od_cu_call_device(op, s, false, &device, err)) || (st = od_cu_begin(device, &env, err)) ||
        (st = od_cu_outputs(id, s, device, &out, &nouts, err)))
        return st;
    if (od_tensor_numel(out) == 0)
        goto ok;
    if (p.empty || p.zeros || (p.op == OD_DISTOP_CDIST_BW && od_dist_kind(p.op, p.p) == OD_DIST_P0)) {
        if ((st = od_cu_status(cudaMemsetAsync(od_tensor_data(out), 0, od_tensor_nbytes(out), env.stream),
                               "cudaMemsetAsync in distance", err)) ||
            (st = od_cu_finish(&env, od_cu_op_name(op), err)))
            goto fail;
        goto ok;
    }
    bool cd = p.op == OD_DISTOP_CDIST || p.op == OD_DISTOP_CDIST_BW, bw = !(p.op == OD_DISTOP_CDIST || p.op == OD_DISTOP_PDIST);
    if ((st = operand(&env, &p, p.x1, cd, &x1, err)) || (cd && (st = operand(&env, &p, p.x2, true, &x2, err))) ||
        (bw && (st = od_cu_contiguous(&env, (od_tensor *)p.grad, &g, err))) ||
        (bw && (st = od_cu_contiguous(&env, (od_tensor *)p.dist, &d, err))))
        goto fail;
    od_cu_dist_args a;
    memset(&a, 0, sizeof a);
    a.op = p.op;
    a.kind = od_dist_kind(p.op, p.p);
    a.f64 = p.x1->dtype == OD_FLOAT64;
    a.p = p.p;
    a.B = p.B;
    a.r1 = p.r1;
    a.r2 = p.r2;
    a.m = p.m;
    a.combs = p.combs;
    a.x1 = od_tensor_data(x1);
    a.x2 = x2 ? od_tensor_data(x2) : NULL;
    a.grad = g ? od_tensor_data(g) : NULL;
    a.dist = d ? od_tensor_data(d) : NULL;
    a.out = od_tensor_data(out);
    a.sm_count = env.sm_count;
    if ((st = od_cu_status(od_cu_dist(&a, env.stream), "distance kernel launch", err)) ||
        (st = od_cu_finish(&env, od_cu_op_name(op), err)))
        goto fail;
ok:
    od_tensor_release(x1);
    od_tensor_release(x2);
    od_tensor_release(g);
    od_tensor_release(d);
    od_cu_return(s, &out, 1);
    return OD_OK;
fail:
    if (cudaStreamSynchronize(env.stream) != cudaSuccess)
        (void)cudaGetLastError();
    od_tensor_release(x1);
    od_tensor_release(x2);
    od_tensor_release(g);
    od_tensor_release(d);
    od_tensor_release(out);
    return st;
}
