/* dist.c — the distance operators torch 1.13 writes in terms of others:
 * cdist and pdist (CompositeImplicitAutograd, over _cdist_forward /
 * _euclidean_dist and _pdist_forward) and _euclidean_dist
 * (CompositeExplicitAutograd: norms, a cat, one matmul, clamp_min, sqrt;
 * EuclideanDistBackward0 records the node).
 *
 * Invariants: each kernel makes torch's checks at its level, in its order
 * and words, then calls operators through the dispatcher in torch's order
 * (Distance.cpp), so one kernel serves CPU, CUDA and Meta. cdist decides
 * the matrix-product path exactly as _cdist_forward does (the shared plan,
 * shape_dist.c), so the graph holds _euclidean_dist's node there, as
 * torch's. Intermediates live in an od_cx_scope, released on every path.
 */
#include <string.h>

#include "composite.h"
#include "od_shape.h"

#define TV(t) od_tensor_v(t)

static double num(const od_value *v) { return v->tag == OD_T_INT ? (double)v->u.i : v->u.d; }

/* cdist(x1, x2, p, compute_mode) */
OD_CX_KERNEL(od_cia_cdist)
{
    (void)ks;
    (void)ctx;
    od_tensor *x1, *x2, *r = NULL;
    od_status st;
    if ((st = od_cx_arg_tensor(op, s, 0, &x1, err)) || (st = od_cx_arg_tensor(op, s, 1, &x2, err)))
        return st;
    if (x1->ndim < 2)
        return od_error_set(err, OD_EINVAL, "cdist only supports at least 2D tensors, X1 got: %dD", x1->ndim);
    if (x2->ndim < 2)
        return od_error_set(err, OD_EINVAL, "cdist only supports at least 2D tensors, X2 got: %dD", x2->ndim);
    if (x1->sizes[x1->ndim - 1] != x2->sizes[x2->ndim - 1])
        return od_error_set(err, OD_EINVAL, "X1 and X2 must have the same number of columns. X1: %lld X2: %lld",
                            (long long)x1->sizes[x1->ndim - 1], (long long)x2->sizes[x2->ndim - 1]);
    /* an empty input always takes _cdist_forward, so the graph stays connected */
    if (od_tensor_numel(x1) != 0 && od_tensor_numel(x2) != 0) {
        od_dist_plan p;
        /* cdist's arguments are _cdist_forward's */
        if ((st = od_dist_plan_of(OD_OPID__cdist_forward, s, &p, err)))
            return st;
        if (p.mm) {
            if ((st = od_dist_mm(&p, &r, err)))
                return st;
            return od_cx_return1(s, r);
        }
    }
    od_value a[4] = {TV(x1), TV(x2), s->args[2], s->args[3]};
    if ((st = od_call_builtin1(OD_OPID__cdist_forward, a, 4, &r, err)))
        return st;
    return od_cx_return1(s, r);
}

/* pdist(self, p) */
OD_CX_KERNEL(od_cia_pdist)
{
    (void)ks;
    (void)ctx;
    od_tensor *x;
    od_status st;
    if ((st = od_cx_arg_tensor(op, s, 0, &x, err)))
        return st;
    if (x->ndim != 2)
        return od_error_set(err, OD_EINVAL, "pdist only supports 2D tensors, got: %dD", x->ndim);
    if (!(x->dtype == OD_FLOAT32 || x->dtype == OD_FLOAT64 || x->dtype == OD_FLOAT16 || x->dtype == OD_BFLOAT16))
        return od_error_set(err, OD_EINVAL, "pdist only supports floating-point dtypes");
    if (!(num(&s->args[1]) >= 0))
        return od_error_set(err, OD_EINVAL, "pdist only supports non-negative p values");
    od_cx_scope sc = od_cx_scope_begin(err);
    od_tensor *c = od_cx_call(&sc, OD_OPID_contiguous, 2, TV(x), od_int(OD_MF_CONTIGUOUS));
    od_tensor *r = od_cx_call(&sc, OD_OPID__pdist_forward, 2, c ? TV(c) : TV(NULL), s->args[1]);
    return od_cx_scope_return1(&sc, s, r);
}

/* x.pow(2).sum(-1, keepdim=True) */
static od_tensor *sq_norm(od_cx_scope *sc, od_tensor *x)
{
    int64_t last = -1;
    od_tensor *sq = od_cx_call(sc, OD_OPID_pow_Tensor_Scalar, 2, TV(x), od_int(2));
    if (!sq)
        return NULL;
    return od_cx_call(sc, OD_OPID_sum_dim_IntList, 4, TV(sq), od_list_v(OD_T_INT_LIST, &last, 1), od_bool(true),
                      od_none());
}

static od_tensor *ones_like(od_cx_scope *sc, od_tensor *x)
{
    if (!x)
        return NULL;
    return od_cx_call(sc, OD_OPID_ones_like, 6, TV(x), od_none(), od_none(), od_none(), od_none(),
                      od_int(OD_MF_CONTIGUOUS));
}

static od_tensor *cat3(od_cx_scope *sc, od_tensor *a, od_tensor *b, od_tensor *c)
{
    if (!a || !b || !c)
        return NULL;
    od_tensor *parts[3] = {a, b, c};
    return od_cx_call(sc, OD_OPID_cat, 2, od_list_v(OD_T_TENSOR_LIST, parts, 3), od_int(-1));
}

/* _euclidean_dist(x1, x2): ATen's two-step form, so the backward can treat 0 apart */
OD_CX_KERNEL(od_cea_euclidean_dist)
{
    (void)ks;
    (void)ctx;
    od_tensor *x1, *x2;
    od_status st;
    if ((st = od_cx_arg_tensor(op, s, 0, &x1, err)) || (st = od_cx_arg_tensor(op, s, 1, &x2, err)))
        return st;
    if (x2->ndim < 2)
        return od_error_set(err, OD_EINVAL,
                            "tensor.mT is only supported on matrices or batches of matrices. Got %d-D tensor.", x2->ndim);
    /* the matmul decides: addmm has no Half kernel on the CPU (torch 1.13) */
    if (x1->device.type == OD_DEV_CPU && x1->dtype == OD_FLOAT16 && x2->dtype == OD_FLOAT16)
        return od_error_set(err, OD_EUNSUPPORTED, "\"addmm_impl_cpu_\" not implemented for 'Half'");
    od_cx_scope sc = od_cx_scope_begin(err);
    od_tensor *n1 = sq_norm(&sc, x1), *p1 = ones_like(&sc, n1);
    od_tensor *n2 = sq_norm(&sc, x2), *p2 = ones_like(&sc, n2);
    od_tensor *m1 = od_cx_call(&sc, OD_OPID_mul_Scalar, 2, TV(x1), od_int(-2));
    od_tensor *a = cat3(&sc, m1, n1, p1), *b = cat3(&sc, x2, p2, n2);
    od_tensor *bt = b ? od_cx_call(&sc, OD_OPID_transpose_int, 3, TV(b), od_int(-2), od_int(-1)) : NULL;
    od_tensor *r = a && bt ? od_cx_call(&sc, OD_OPID_matmul, 2, TV(a), TV(bt)) : NULL;
    r = r ? od_cx_call(&sc, OD_OPID_clamp_min, 2, TV(r), od_int(0)) : NULL;
    /* ATen takes the root in place (sqrt_), which an integer result cannot hold */
    if (r && !(r->dtype == OD_FLOAT32 || r->dtype == OD_FLOAT64 || r->dtype == OD_FLOAT16 || r->dtype == OD_BFLOAT16)) {
        od_dtype dt = r->dtype; /* r belongs to the scope */
        od_cx_scope_end(&sc);
        return od_error_set(err, OD_EINVAL, "result type Float can't be cast to the desired output type %s",
                            od_dtype_scalar_name(dt));
    }
    r = r ? od_cx_call(&sc, OD_OPID_sqrt, 1, TV(r)) : NULL;
    return od_cx_scope_return1(&sc, s, r);
}
