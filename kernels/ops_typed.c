/* ops_typed.c — the typed C API over the built-in operators (od_ops.h).
 *
 * Invariants: every function builds its argument array on the C stack with
 * every schema argument present (defaults filled here), calls
 * od_call_builtin (the full dispatcher: modes, autograd, backends all apply)
 * and hands back the single tensor return as a new reference (od_to_device_leaf
 * wraps od_to_device). Nothing is
 * allocated here; this is the benchmarked path, so it stays a few stores and
 * one call.
 */
#include "od_autograd.h"
#include "od_ops.h"

/* Takes the single tensor return of a finished call. */
static inline od_status take1(od_status st, od_stack *s, od_tensor **out, od_error *err)
{
    if (__builtin_expect(st != OD_OK, 0))
        return st;
    if (__builtin_expect(s->nrets != 1 || s->rets[0].tag != OD_T_TENSOR, 0)) {
        int n = s->nrets;
        od_stack_release_rets(s);
        return od_error_set(err, OD_EINTERNAL, "operator returned %d values where one tensor was expected", n);
    }
    *out = s->rets[0].u.t;
    return OD_OK;
}

static inline od_status call1(od_opid id, od_value *args, int nargs, od_tensor **out, od_error *err)
{
    od_stack s;
    return take1(od_call_builtin(id, args, nargs, &s, err), &s, out, err);
}

/* A Scalar argument from a C double: integral values travel as ints, like a
 * Python literal 1 (torch rejects a float alpha for integer tensors). */
static inline od_value scalar_of(double v)
{
    if (v >= -9.2e18 && v <= 9.2e18 && (double)(int64_t)v == v)
        return od_int((int64_t)v);
    return od_double(v);
}

od_status od_add(od_tensor *self, od_tensor *other, double alpha, od_tensor **out, od_error *err)
{
    od_value a[3] = {od_tensor_v(self), od_tensor_v(other), scalar_of(alpha)};
    return call1(OD_OPID_add_Tensor, a, 3, out, err);
}

od_status od_sub(od_tensor *self, od_tensor *other, double alpha, od_tensor **out, od_error *err)
{
    od_value a[3] = {od_tensor_v(self), od_tensor_v(other), scalar_of(alpha)};
    return call1(OD_OPID_sub_Tensor, a, 3, out, err);
}

od_status od_mul(od_tensor *self, od_tensor *other, od_tensor **out, od_error *err)
{
    od_value a[2] = {od_tensor_v(self), od_tensor_v(other)};
    return call1(OD_OPID_mul_Tensor, a, 2, out, err);
}

od_status od_div(od_tensor *self, od_tensor *other, od_tensor **out, od_error *err)
{
    od_value a[2] = {od_tensor_v(self), od_tensor_v(other)};
    return call1(OD_OPID_div_Tensor, a, 2, out, err);
}

od_status od_relu(od_tensor *self, od_tensor **out, od_error *err)
{
    od_value a[1] = {od_tensor_v(self)};
    return call1(OD_OPID_relu, a, 1, out, err);
}

od_status od_sigmoid(od_tensor *self, od_tensor **out, od_error *err)
{
    od_value a[1] = {od_tensor_v(self)};
    return call1(OD_OPID_sigmoid, a, 1, out, err);
}

od_status od_mm(od_tensor *self, od_tensor *mat2, od_tensor **out, od_error *err)
{
    od_value a[2] = {od_tensor_v(self), od_tensor_v(mat2)};
    return call1(OD_OPID_mm, a, 2, out, err);
}

od_status od_matmul(od_tensor *self, od_tensor *other, od_tensor **out, od_error *err)
{
    od_value a[2] = {od_tensor_v(self), od_tensor_v(other)};
    return call1(OD_OPID_matmul, a, 2, out, err);
}

od_status od_sum(od_tensor *self, const int64_t *dims, int ndims, bool keepdim, od_tensor **out,
                 od_error *err)
{
    if (ndims < 0)
        return od_error_set(err, OD_EINVAL, "od_sum: ndims must be >= 0, got %d", ndims);
    if (ndims == 0 && !keepdim) { /* torch.sum(x): the full reduction */
        od_value a[2] = {od_tensor_v(self), od_none()};
        return call1(OD_OPID_sum, a, 2, out, err);
    }
    od_value a[4] = {od_tensor_v(self),
                     ndims ? od_list_v(OD_T_INT_LIST, (void *)dims, (size_t)ndims) : od_none(),
                     od_bool(keepdim), od_none()};
    return call1(OD_OPID_sum_dim_IntList, a, 4, out, err);
}

od_status od_softmax(od_tensor *self, int64_t dim, od_tensor **out, od_error *err)
{
    od_value a[3] = {od_tensor_v(self), od_int(dim), od_none()};
    return call1(OD_OPID_softmax_int, a, 3, out, err);
}

od_status od_to_dtype(od_tensor *self, od_dtype dtype, od_tensor **out, od_error *err)
{
    od_value a[5] = {od_tensor_v(self), od_dtype_v(dtype), od_bool(false), od_bool(false),
                     od_none()};
    return call1(OD_OPID_to_dtype, a, 5, out, err);
}

od_status od_to_device(od_tensor *self, od_device device, od_tensor **out, od_error *err)
{
    if (!self)
        return od_error_set(err, OD_EINVAL, "to(): argument 'self' (position 1) must be Tensor, not None");
    od_value a[6] = {od_tensor_v(self), od_device_v(device), od_dtype_v(self->dtype),
                     od_bool(false),    od_bool(false),      od_none()};
    return call1(OD_OPID_to_device, a, 6, out, err);
}

od_status od_to_device_leaf(od_tensor *self, od_device device, od_tensor **out, od_error *err)
{
    if (!self || !self->requires_grad || !od_is_leaf(self))
        return od_to_device(self, device, out, err);
    od_status st = od_set_requires_grad(self, false, err);
    if (st)
        return st;
    st = od_to_device(self, device, out, err);
    od_error ignored;
    (void)od_set_requires_grad(self, true, &ignored); /* a floating leaf: cannot fail */
    if (st == OD_OK && (st = od_set_requires_grad(*out, true, err))) {
        od_tensor_release(*out);
        *out = NULL;
    }
    return st;
}

od_status od_zeros(const int64_t *sizes, int ndim, od_dtype dtype, od_device device,
                   od_tensor **out, od_error *err)
{
    if (ndim < 0)
        return od_error_set(err, OD_EINVAL, "zeros(): ndim must be >= 0, got %d", ndim);
    od_value a[5] = {od_list_v(OD_T_INT_LIST, (void *)sizes, (size_t)ndim), od_dtype_v(dtype),
                     od_none(), od_device_v(device), od_none()};
    return call1(OD_OPID_zeros, a, 5, out, err);
}
