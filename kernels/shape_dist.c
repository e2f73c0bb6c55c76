/* shape_dist.c — the shape and dtype function of _cdist_forward,
 * _cdist_backward, _pdist_forward and _pdist_backward, the plan their CPU
 * and CUDA kernels share, and _cdist_forward's matrix-product path.
 *
 * Invariants: checks and messages are torch 1.13's (Distance.cpp and the
 * CPU kernel's dtype dispatch) in ATen's order; sizes ATen does not check
 * before reading (a backward's grad, cdist or pdist of the wrong size) are
 * refused here rather than read past their end. An empty result is decided
 * before the dtype dispatch, as ATen does (so it takes any dtype). The
 * matrix-product path (p == 2 with compute_mode 1, or mode 0 and more than
 * 25 rows) is _euclidean_dist's, which the kernels reach through the
 * dispatcher (od_dist_mm) on every backend. Nothing here touches data.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "od_shape.h"

static const od_tensor *tensor_arg(const od_stack *s, int i)
{
    return i < s->nargs && s->args[i].tag == OD_T_TENSOR ? s->args[i].u.t : NULL;
}

static bool is_float(od_dtype dt)
{
    return dt == OD_FLOAT32 || dt == OD_FLOAT64 || dt == OD_FLOAT16 || dt == OD_BFLOAT16;
}

static double num(const od_value *v) { return v->tag == OD_T_INT ? (double)v->u.i : v->u.d; }


static od_status same_device(const od_tensor *a, const od_tensor *b, od_error *err)
{
    if (a->device.type != b->device.type)
        return od_error_set(err, OD_EMISMATCH, "X1 and X2 must have the same device type. X1: %s X2: %s",
                            od_device_type_name(a->device.type), od_device_type_name(b->device.type));
    if (a->device.type == OD_DEV_CUDA && a->device.index != b->device.index)
        return od_error_set(err, OD_EMISMATCH, "device of X1 (%d) must match device of X2 (%d)", a->device.index,
                            b->device.index);
    return OD_OK;
}

static od_status dtype_match(od_dtype want, od_dtype got, od_error *err)
{
    if (want != got)
        return od_error_set(err, OD_EINVAL, "expected scalar type %s but found %s", od_dtype_scalar_name(want),
                            od_dtype_scalar_name(got));
    return OD_OK;
}

/* x (borrowed) has exactly sizes[0..n) */
static bool has_sizes(const od_tensor *x, const int64_t *sizes, int n)
{
    return x->ndim == n && memcmp(x->sizes, sizes, sizeof(int64_t) * (size_t)n) == 0;
}

static od_status cdist_plan(od_opid id, const od_stack *s, od_dist_plan *p, od_error *err)
{
    bool bw = id == OD_OPID__cdist_backward;
    int a = bw ? 1 : 0;
    const od_tensor *x1 = tensor_arg(s, a), *x2 = tensor_arg(s, a + 1);
    if (!x1 || !x2 || (bw && (!tensor_arg(s, 0) || !tensor_arg(s, 4))))
        return od_error_set(err, OD_EINVAL, "%s(): expected Tensor arguments", bw ? "_cdist_backward" : "_cdist_forward");
    p->x1 = x1;
    p->x2 = x2;
    p->p = num(&s->args[a + 2]);
    od_status st;
    if (!bw) {
        if (x1->ndim < 2)
            return od_error_set(err, OD_EINVAL, "cdist only supports at least 2D tensors, X1 got: %dD", x1->ndim);
        if (x2->ndim < 2)
            return od_error_set(err, OD_EINVAL, "cdist only supports at least 2D tensors, X2 got: %dD", x2->ndim);
        if (x1->sizes[x1->ndim - 1] != x2->sizes[x2->ndim - 1])
            return od_error_set(err, OD_EINVAL,
                                "X1 and X2 must have the same number of columns. X1: %" PRId64 " X2: %" PRId64,
                                x1->sizes[x1->ndim - 1], x2->sizes[x2->ndim - 1]);
        if (!is_float(x1->dtype))
            return od_error_set(err, OD_EINVAL, "cdist only supports floating-point dtypes, X1 got: %s",
                                od_dtype_scalar_name(x1->dtype));
        if (!is_float(x2->dtype))
            return od_error_set(err, OD_EINVAL, "cdist only supports floating-point dtypes, X2 got: %s",
                                od_dtype_scalar_name(x2->dtype));
        if (!(p->p >= 0))
            return od_error_set(err, OD_EINVAL, "cdist only supports non-negative p values");
        if ((st = same_device(x1, x2, err)))
            return st;
        const od_value *mv = &s->args[3];
        int64_t mode = mv->tag == OD_T_INT ? mv->u.i : 0;
        if (mode < 0 || mode > 2)
            return od_error_set(err, OD_EINVAL, "possible modes: 0, 1, 2, but was: %" PRId64, mode);
        p->r1 = x1->sizes[x1->ndim - 2];
        p->r2 = x2->sizes[x2->ndim - 2];
        p->mm = p->p == 2 && (mode == 1 || (mode == 0 && (p->r1 > 25 || p->r2 > 25)));
    } else {
        if (x1->ndim < 2 || x2->ndim < 2)
            return od_error_set(err, OD_EINVAL, "_cdist_backward: expected x1 and x2 of at least 2 dimensions");
        p->grad = tensor_arg(s, 0);
        p->dist = tensor_arg(s, 4);
        p->r1 = x1->sizes[x1->ndim - 2];
        p->r2 = x2->sizes[x2->ndim - 2];
    }
    p->m = x1->sizes[x1->ndim - 1];
    if ((st = od_broadcast_shapes(x1->sizes, x1->ndim - 2, x2->sizes, x2->ndim - 2, p->batch, &p->nbatch, err)))
        return st;
    p->B = 1;
    for (int d = 0; d < p->nbatch; d++)
        p->B *= p->batch[d];
    if (bw) {
        if (x2->sizes[x2->ndim - 1] != p->m)
            return od_error_set(err, OD_EINVAL,
                                "X1 and X2 must have the same number of columns. X1: %" PRId64 " X2: %" PRId64, p->m,
                                x2->sizes[x2->ndim - 1]);
        p->empty = p->r1 == 0 || p->r2 == 0 || p->m == 0 || p->B == 0;
        if (p->empty)
            return OD_OK; /* zeros_like(x1), before any dispatch */
        if ((st = same_device(x1, x2, err)))
            return st;
        if (!(x1->dtype == OD_FLOAT32 || x1->dtype == OD_FLOAT64))
            return od_error_set(err, OD_EUNSUPPORTED, "\"cdist_backward\" not implemented for '%s'",
                                od_dtype_scalar_name(x1->dtype));
        if ((st = dtype_match(x1->dtype, x2->dtype, err)) || (st = dtype_match(x1->dtype, p->grad->dtype, err)) ||
            (st = dtype_match(x1->dtype, p->dist->dtype, err)))
            return st;
        int64_t want[OD_MAX_DIMS];
        memcpy(want, p->batch, sizeof(int64_t) * (size_t)p->nbatch);
        want[p->nbatch] = p->r1;
        want[p->nbatch + 1] = p->r2;
        if (!has_sizes(p->grad, want, p->nbatch + 2) || !has_sizes(p->dist, want, p->nbatch + 2)) {
            char w[256];
            od_shape_print(want, p->nbatch + 2, w, sizeof w);
            return od_error_set(err, OD_EINVAL, "_cdist_backward: expected grad and cdist of size %s", w);
        }
        return OD_OK;
    }
    p->empty = p->r1 == 0 || p->r2 == 0 || p->B == 0;
    p->zeros = !p->empty && p->m == 0;
    if (p->empty || p->zeros)
        return OD_OK;
    if (p->mm) {
        /* _euclidean_dist's matmul decides: addmm has no Half kernel on the CPU */
        if (x1->device.type == OD_DEV_CPU && x1->dtype == OD_FLOAT16)
            return od_error_set(err, OD_EUNSUPPORTED, "\"addmm_impl_cpu_\" not implemented for 'Half'");
        return dtype_match(x1->dtype, x2->dtype, err);
    }
    if (!(x1->dtype == OD_FLOAT32 || x1->dtype == OD_FLOAT64))
        return od_error_set(err, OD_EUNSUPPORTED, "\"cdist\" not implemented for '%s'", od_dtype_scalar_name(x1->dtype));
    return dtype_match(x1->dtype, x2->dtype, err);
}

static od_status pdist_plan(od_opid id, const od_stack *s, od_dist_plan *p, od_error *err)
{
    bool bw = id == OD_OPID__pdist_backward;
    const od_tensor *x = tensor_arg(s, bw ? 1 : 0);
    if (!x || (bw && (!tensor_arg(s, 0) || !tensor_arg(s, 3))))
        return od_error_set(err, OD_EINVAL, "%s(): expected Tensor arguments", bw ? "_pdist_backward" : "_pdist_forward");
    p->x1 = x;
    p->p = num(&s->args[bw ? 2 : 1]);
    od_status st;
    if (!bw) {
        if (!od_tensor_is_contiguous(x))
            return od_error_set(err, OD_EINVAL, "_pdist_forward requires contiguous input");
        if ((st = od_tensor_size_at(x, 0, &p->r1, err)))
            return st;
        p->empty = p->r1 <= 1;
        if (p->empty)
            return OD_OK;
        p->combs = p->r1 * (p->r1 - 1) / 2;
        if ((st = od_tensor_size_at(x, 1, &p->m, err)))
            return st;
        p->zeros = p->m == 0;
        if (p->zeros)
            return OD_OK;
        if (!(x->dtype == OD_FLOAT32 || x->dtype == OD_FLOAT64))
            return od_error_set(err, OD_EUNSUPPORTED, "\"pdist\" not implemented for '%s'", od_dtype_scalar_name(x->dtype));
        return OD_OK;
    }
    p->grad = tensor_arg(s, 0);
    p->dist = tensor_arg(s, 3);
    if (!od_tensor_is_contiguous(x))
        return od_error_set(err, OD_EINVAL, "_pdist_backward requires self to be contiguous");
    if (!od_tensor_is_contiguous(p->dist))
        return od_error_set(err, OD_EINVAL, "_pdist_backward requires pdist to be contiguous");
    /* ATen dispatches on the dtype first, then zero-fills, then (p != 0) reads the sizes */
    if (!(x->dtype == OD_FLOAT32 || x->dtype == OD_FLOAT64))
        return od_error_set(err, OD_EUNSUPPORTED, "\"pdist_backward\" not implemented for '%s'",
                            od_dtype_scalar_name(x->dtype));
    p->zeros = p->p == 0;
    if (p->zeros)
        return OD_OK;
    /* then self's sizes, grad.stride(0), and grad's and pdist's data as self's dtype */
    int64_t gs;
    if ((st = od_tensor_size_at(x, 0, &p->r1, err)) || (st = od_tensor_size_at(x, 1, &p->m, err)) ||
        (st = od_tensor_size_at(p->grad, 0, &gs, err)))
        return st;
    if ((st = dtype_match(x->dtype, p->grad->dtype, err)) || (st = dtype_match(x->dtype, p->dist->dtype, err)))
        return st;
    p->combs = p->r1 * (p->r1 - 1) / 2;
    p->zeros = p->combs == 0 || p->m == 0;
    if (p->zeros)
        return OD_OK;
    if (od_tensor_numel(p->grad) != p->combs || od_tensor_numel(p->dist) != p->combs || p->r1 * p->m > od_tensor_numel(x))
        return od_error_set(err, OD_EINVAL, "_pdist_backward: expected grad and pdist of %" PRId64 " elements",
                            p->combs);
    return OD_OK;
}

od_status od_dist_plan_of(od_opid id, const od_stack *s, od_dist_plan *p, od_error *err)
{
    memset(p, 0, sizeof *p);
    switch (id) {
    case OD_OPID__cdist_forward: p->op = OD_DISTOP_CDIST; return cdist_plan(id, s, p, err);
    case OD_OPID__cdist_backward: p->op = OD_DISTOP_CDIST_BW; return cdist_plan(id, s, p, err);
    case OD_OPID__pdist_forward: p->op = OD_DISTOP_PDIST; return pdist_plan(id, s, p, err);
    case OD_OPID__pdist_backward: p->op = OD_DISTOP_PDIST_BW; return pdist_plan(id, s, p, err);
    default: return od_error_set(err, OD_EINTERNAL, "od_dist_plan_of: not a distance operator");
    }
}

od_status od_shape_dist(od_opid id, const od_stack *s, od_out_spec *outs, int *nouts, od_error *err)
{
    od_dist_plan p;
    od_status st = od_dist_plan_of(id, s, &p, err);
    if (st)
        return st;
    od_out_spec *o = &outs[0];
    memset(o, 0, sizeof *o);
    o->dtype = p.x1->dtype;
    o->device = p.x1->device;
    o->alias_of = -1;
    switch (p.op) {
    case OD_DISTOP_CDIST:
        memcpy(o->sizes, p.batch, sizeof(int64_t) * (size_t)p.nbatch);
        o->sizes[p.nbatch] = p.r1;
        o->sizes[p.nbatch + 1] = p.r2;
        o->ndim = p.nbatch + 2;
        break;
    case OD_DISTOP_CDIST_BW:
        /* the broadcast x1's sizes (the engine reduces them); zeros_like(x1) when empty */
        if (p.empty) {
            o->ndim = p.x1->ndim;
            memcpy(o->sizes, p.x1->sizes, sizeof(int64_t) * (size_t)o->ndim);
            break;
        }
        memcpy(o->sizes, p.batch, sizeof(int64_t) * (size_t)p.nbatch);
        o->sizes[p.nbatch] = p.r1;
        o->sizes[p.nbatch + 1] = p.m;
        o->ndim = p.nbatch + 2;
        break;
    case OD_DISTOP_PDIST:
        o->ndim = 1;
        o->sizes[0] = p.empty ? 0 : p.combs;
        break;
    default:
        o->ndim = p.x1->ndim;
        memcpy(o->sizes, p.x1->sizes, sizeof(int64_t) * (size_t)o->ndim);
        break;
    }
    *nouts = 1;
    return OD_OK;
}

od_status od_dist_mm(const od_dist_plan *p, od_tensor **out, od_error *err)
{
    *out = NULL;
    od_tensor *a = (od_tensor *)p->x1, *b = (od_tensor *)p->x2, *ea = NULL, *eb = NULL, *r = NULL;
    od_status st = OD_OK;
    int64_t sz[OD_MAX_DIMS];
    int nd = p->nbatch + 2;
    memcpy(sz, p->batch, sizeof(int64_t) * (size_t)p->nbatch);
    /* ATen: the inputs as they are when the batch is one, else expanded and viewed [B, r, m] */
    if (p->B != 1) {
        int64_t v1[3] = {p->B, p->r1, p->m}, v2[3] = {p->B, p->r2, p->m};
        sz[p->nbatch] = p->r1;
        sz[p->nbatch + 1] = p->m;
        od_value args[2] = {od_tensor_v(a), od_list_v(OD_T_INT_LIST, sz, (size_t)nd)};
        st = od_call_builtin1(OD_OPID_expand, (od_value[]){args[0], args[1], od_bool(false)}, 3, &ea, err);
        if (!st)
            st = od_call_builtin1(OD_OPID_reshape, (od_value[]){od_tensor_v(ea), od_list_v(OD_T_INT_LIST, v1, 3)}, 2,
                                  &a, err);
        sz[p->nbatch] = p->r2;
        if (!st)
            st = od_call_builtin1(OD_OPID_expand,
                                  (od_value[]){od_tensor_v(b), od_list_v(OD_T_INT_LIST, sz, (size_t)nd), od_bool(false)},
                                  3, &eb, err);
        if (!st)
            st = od_call_builtin1(OD_OPID_reshape, (od_value[]){od_tensor_v(eb), od_list_v(OD_T_INT_LIST, v2, 3)}, 2,
                                  &b, err);
        od_tensor_release(ea);
        od_tensor_release(eb);
        if (st) {
            if (a != p->x1)
                od_tensor_release(a);
            return st;
        }
    }
    st = od_call_builtin1(OD_OPID__euclidean_dist, (od_value[]){od_tensor_v(a), od_tensor_v(b)}, 2, &r, err);
    if (a != p->x1)
        od_tensor_release(a);
    if (b != p->x2)
        od_tensor_release(b);
    if (st)
        return st;
    sz[p->nbatch] = p->r1;
    sz[p->nbatch + 1] = p->r2;
    st = od_call_builtin1(OD_OPID_view, (od_value[]){od_tensor_v(r), od_list_v(OD_T_INT_LIST, sz, (size_t)nd)}, 2, out,
                          err);
    od_tensor_release(r);
    return st;
}
