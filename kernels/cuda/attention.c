/* attention.c — boxed CUDA _scaled_dot_product_attention_forward: checks,
 * outputs and the launch of the fused kernel (attention.cu).
 *
 * Invariants: the fused kernel takes what od_sdpa_plan_of accepts in
 * float32 or float64, with a bool mask or one of query's dtype, when its
 * tiles fit the default 48 KiB of shared memory; every other call runs
 * _scaled_dot_product_attention_math through the dispatcher (bfloat16
 * included), like the CPU kernel's fallback. Operands are read in place
 * through their strides: no contiguous copies.
 */
#include <limits.h>
#include <string.h>

#include "cu_attention.h"
#include "cuda_internal.h"

_Static_assert(OD_CU_SDPA_MAX_DIMS == OD_MAX_DIMS, "cu_attention.h's batch dims follow OD_MAX_DIMS");

static bool fill_args(const od_sdpa_plan *p, od_cu_sdpa_args *a)
{
    memset(a, 0, sizeof *a);
    if (p->q->dtype != OD_FLOAT32 && p->q->dtype != OD_FLOAT64)
        return false;
    if (p->mask && p->mask->dtype != OD_BOOL && p->mask->dtype != p->q->dtype)
        return false;
    a->f64 = p->q->dtype == OD_FLOAT64;
    a->mask_bool = p->mask && p->mask->dtype == OD_BOOL;
    a->causal = p->causal;
    a->nb = p->nb;
    memcpy(a->bsizes, p->bsizes, sizeof a->bsizes);
    memcpy(a->qb, p->qb, sizeof a->qb);
    memcpy(a->kb, p->kb, sizeof a->kb);
    memcpy(a->vb, p->vb, sizeof a->vb);
    memcpy(a->mb, p->mb, sizeof a->mb);
    a->nbatch = p->nbatch;
    a->L = p->L;
    a->S = p->S;
    a->E = p->E;
    a->Ev = p->Ev;
    a->qr = p->qr;
    a->qc = p->qc;
    a->kr = p->kr;
    a->kc = p->kc;
    a->vr = p->vr;
    a->vc = p->vc;
    a->mr = p->mr;
    a->mc = p->mc;
    a->scale = p->scale;
    return od_cu_sdpa_smem(a) <= 48 * 1024 && a->nbatch * ((a->L + 15) / 16) <= INT_MAX;
}

od_status od_cuda_sdpa(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)ks;
    od_sdpa_plan p;
    od_cu_sdpa_args a;
    if (!od_sdpa_plan_of(s, &p) || !fill_args(&p, &a))
        return od_sdpa_run_math(s, err);
    int device, n = 0;
    od_cu_env env;
    od_tensor *outs[2] = {NULL, NULL};
    od_status st;
    if ((st = od_cu_call_device(op, s, false, &device, err)) || (st = od_cu_begin(device, &env, err)) ||
        (st = od_cu_outputs(OD_OPID_OF_CTX(ctx), s, device, outs, &n, err)))
        return st;
    a.q = od_tensor_data(p.q);
    a.k = od_tensor_data(p.k);
    a.v = od_tensor_data(p.v);
    a.mask = p.mask ? od_tensor_data(p.mask) : NULL;
    a.out = od_tensor_data(outs[0]);
    a.w = p.need_weights ? od_tensor_data(outs[1]) : NULL;
    if ((st = od_cu_status(od_cu_sdpa(&a, env.stream), "attention kernel launch", err))) {
        od_cu_finish(&env, od_cu_op_name(op), NULL);
        goto fail;
    }
    if ((st = od_cu_finish(&env, od_cu_op_name(op), err)))
        goto fail;
    od_cu_return(s, outs, 2);
    return OD_OK;
fail:
    od_tensor_release(outs[0]);
    od_tensor_release(outs[1]);
    return st;
}
