/* shorthands.c — operators PyTorch 1.13 defines as one or two others:
 * argsort and msort (sort), outer and ger (a broadcast mul), vdot (dot, for
 * the real dtypes served here) and trace (the diagonal's sum).
 *
 * Invariants: CompositeImplicitAutograd, as in ATen for argsort, msort,
 * outer and ger (so their grad_fn is the callee's, as torch's is); vdot and
 * trace are kernels in ATen (VdotBackward0, TraceBackward0), here they
 * differentiate through dot and take + sum. Each checks its arguments
 * first, with ATen's messages, then reaches the others through the
 * dispatcher only.
 */
#include "composite.h"
#include "od_shape.h"

#define T(t) od_tensor_v(t)

/* argsort(self, dim, descending) and argsort.stable(self, *, stable, dim,
 * descending): sort's indices. msort(self): sort's values along dim 0. */
OD_CX_KERNEL(od_cia_argsort)
{
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    od_tensor *self;
    od_status st;
    if ((st = od_cx_arg_tensor(op, s, 0, &self, err)))
        return st;
    od_stack r;
    od_value a[4];
    int n;
    if (id == OD_OPID_msort) {
        a[0] = T(self), a[1] = od_int(0), a[2] = od_bool(false);
        n = 3;
        id = OD_OPID_sort;
    } else if (id == OD_OPID_argsort_stable) {
        a[0] = T(self), a[1] = s->args[1], a[2] = s->args[2], a[3] = s->args[3];
        n = 4;
        id = OD_OPID_sort_stable;
    } else {
        a[0] = T(self), a[1] = s->args[1], a[2] = s->args[2];
        n = 3;
        id = OD_OPID_sort;
    }
    if ((st = od_call_builtin(id, a, n, &r, err)))
        return st;
    int keep = OD_OPID_OF_CTX(ctx) == OD_OPID_msort ? 0 : 1;
    od_tensor *t = r.rets[keep].u.t;
    od_tensor_retain(t);
    od_stack_release_rets(&r);
    return od_cx_return1(s, t);
}

/* outer(self, vec2) = self[:, None] * vec2; ger is its old name */
OD_CX_KERNEL(od_cia_outer)
{
    (void)ctx;
    (void)ks;
    od_tensor *self, *vec2;
    od_status st;
    if ((st = od_cx_arg_tensor(op, s, 0, &self, err)) || (st = od_cx_arg_tensor(op, s, 1, &vec2, err)))
        return st;
    if (self->ndim != 1 || vec2->ndim != 1)
        return od_error_set(err, OD_EINVAL, "outer: Expected 1-D argument %s, but got %d-D",
                            self->ndim != 1 ? "self" : "vec2", self->ndim != 1 ? self->ndim : vec2->ndim);
    od_cx_scope sc = od_cx_scope_begin(err);
    od_tensor *col = od_cx_call(&sc, OD_OPID_unsqueeze, 2, T(self), od_int(1));
    od_tensor *r = col ? od_cx_call(&sc, OD_OPID_mul_Tensor, 2, T(col), T(vec2)) : NULL;
    return od_cx_scope_return1(&sc, s, r);
}

/* vdot: conj(self) . other, which is dot for real dtypes */
OD_CX_KERNEL(od_cia_vdot)
{
    (void)ctx;
    (void)ks;
    od_tensor *self, *other;
    od_status st;
    if ((st = od_cx_arg_tensor(op, s, 0, &self, err)) || (st = od_cx_arg_tensor(op, s, 1, &other, err)))
        return st;
    od_cx_scope sc = od_cx_scope_begin(err);
    return od_cx_scope_return1(&sc, s, od_cx_call(&sc, OD_OPID_dot, 2, T(self), T(other)));
}

/* trace: the sum of the main diagonal (self's row-major positions k * (cols
 * + 1)), integers summed into int64 as ATen's trace_cpu does */
OD_CX_KERNEL(od_cia_trace)
{
    (void)ctx;
    (void)ks;
    od_tensor *self;
    od_status st;
    if ((st = od_cx_arg_tensor(op, s, 0, &self, err)))
        return st;
    if (self->dtype == OD_BOOL || self->dtype == OD_FLOAT16 || self->dtype == OD_BFLOAT16)
        return od_error_set(err, OD_EUNSUPPORTED, "\"trace\" not implemented for '%s'",
                            od_dtype_scalar_name(self->dtype));
    if (self->ndim != 2)
        return od_error_set(err, OD_EINVAL, "trace: expected a matrix, but got tensor with dim %d", self->ndim);
    int64_t rows = self->sizes[0], cols = self->sizes[1], n = rows < cols ? rows : cols;
    od_cx_scope sc = od_cx_scope_begin(err);
    od_tensor *k = od_cx_call(&sc, OD_OPID_arange, 5, od_int(n), od_dtype_v(OD_INT64), od_none(),
                              od_device_v(self->device), od_none());
    od_tensor *pos = k ? od_cx_call(&sc, OD_OPID_mul_Scalar, 2, T(k), od_int(cols + 1)) : NULL;
    od_tensor *d = pos ? od_cx_call(&sc, OD_OPID_take, 2, T(self), T(pos)) : NULL;
    od_tensor *r = d ? od_cx_call(&sc, OD_OPID_sum, 2, T(d), od_none()) : NULL;
    return od_cx_scope_return1(&sc, s, r);
}
