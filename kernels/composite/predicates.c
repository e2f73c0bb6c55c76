/* predicates.c — isclose and allclose, ATen 1.13's CompositeImplicitAutograd
 * decompositions: self == other, or (equal_nan, floating) both NaN, or
 * |self - other| finite and <= atol + |rtol * other| (integer and bool
 * inputs in the default float). allclose is isclose(...).all() read back as a bool.
 *
 * Invariants: only dispatcher calls, so CPU, CUDA and autograd (nothing to
 * record: the results are bool) follow from the operators used.
 */
#include <stdio.h>
#include <string.h>

#include "composite.h"

#define T(x) od_tensor_v(x)

OD_CX_KERNEL(od_cia_isclose)
{
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    od_tensor *self, *other;
    bool equal_nan;
    od_status st;
    if ((st = od_cx_arg_tensor(op, s, 0, &self, err)) || (st = od_cx_arg_tensor(op, s, 1, &other, err)) ||
        (st = od_cx_arg_bool(op, s, 4, &equal_nan, err)))
        return st;
    if (!od_value_is_number(&s->args[2]) || !od_value_is_number(&s->args[3]))
        return od_error_set(err, OD_EINVAL, "%s(): rtol and atol must be floats", od_op_name(op));
    double rtol = od_value_as_double(&s->args[2]), atol = od_value_as_double(&s->args[3]);
    if (self->dtype != other->dtype)
        return od_error_set(err, OD_EINVAL, "%s did not match %s", od_dtype_scalar_name(self->dtype),
                            od_dtype_scalar_name(other->dtype));
    if (!(rtol >= 0))
        return od_error_set(err, OD_EINVAL, "rtol must be greater than or equal to zero, but got %g", rtol);
    if (!(atol >= 0))
        return od_error_set(err, OD_EINVAL, "atol must be greater than or equal to zero, but got %g", atol);
    /* (self != self).__iand__(other != other) writes into self's shape */
    if (equal_nan && od_dtype_is_floating(self->dtype)) {
        int64_t b[OD_MAX_DIMS];
        int nb;
        if ((st = od_broadcast_shapes(self->sizes, self->ndim, other->sizes, other->ndim, b, &nb, err)))
            return st;
        if (nb != self->ndim || memcmp(b, self->sizes, (size_t)nb * sizeof b[0])) {
            char x[256], y[256];
            od_shape_print(self->sizes, self->ndim, x, sizeof x);
            od_shape_print(b, nb, y, sizeof y);
            return od_error_set(err, OD_EMISMATCH, "output with shape %s doesn't match the broadcast shape %s", x, y);
        }
    }
    od_cx_scope sc = od_cx_scope_begin(err);
    od_tensor *close = od_cx_call(&sc, OD_OPID_eq_Tensor, 2, T(self), T(other));
    if (equal_nan && od_dtype_is_floating(self->dtype)) {
        od_tensor *nn = od_cx_call(&sc, OD_OPID_logical_and, 2, T(od_cx_call(&sc, OD_OPID_ne_Tensor, 2, T(self), T(self))),
                                   T(od_cx_call(&sc, OD_OPID_ne_Tensor, 2, T(other), T(other))));
        close = od_cx_call(&sc, OD_OPID_logical_or, 2, T(close), T(nn));
    }
    if (rtol != 0 || atol != 0) {
        /* integers and bool in the default float, so self - other cannot wrap */
        bool integral = od_dtype_is_integral(self->dtype, true);
        od_tensor *cs = integral ? od_cx_cast(&sc, self, OD_DEFAULT_FLOAT) : self;
        od_tensor *co = integral ? od_cx_cast(&sc, other, OD_DEFAULT_FLOAT) : other;
        od_tensor *allowed = od_cx_call(&sc, OD_OPID_add_Scalar, 3,
                                        T(od_cx_call(&sc, OD_OPID_abs, 1,
                                                     T(od_cx_call(&sc, OD_OPID_mul_Scalar, 2, T(co), od_double(rtol))))),
                                        od_double(atol), od_int(1));
        od_tensor *actual = od_cx_call(&sc, OD_OPID_abs, 1, T(od_cx_call(&sc, OD_OPID_sub_Tensor, 3, T(cs), T(co), od_int(1))));
        od_tensor *fin = od_cx_call(&sc, OD_OPID_logical_and, 2, T(od_cx_call(&sc, OD_OPID_isfinite, 1, T(actual))),
                                    T(od_cx_call(&sc, OD_OPID_le_Tensor, 2, T(actual), T(allowed))));
        close = od_cx_call(&sc, OD_OPID_logical_or, 2, T(close), T(fin));
    }
    if (id == OD_OPID_isclose)
        return od_cx_scope_return1(&sc, s, close);
    /* allclose: .all().item() */
    od_tensor *all = od_cx_call(&sc, OD_OPID_all, 1, T(close));
    od_tensor *host = od_cx_call(&sc, OD_OPID__to_copy, 7, T(all), od_none(), od_none(),
                                 od_device_v((od_device){OD_DEV_CPU, 0}), od_none(), od_bool(false), od_none());
    bool r = false;
    if (host && !od_tensor_data(host))
        sc.st = od_error_set(err, OD_EUNSUPPORTED, "allclose(): cannot read the result of a meta tensor");
    else if (host)
        r = *(const bool *)od_tensor_data(host);
    if ((st = od_cx_scope_end(&sc)))
        return st;
    s->rets[0] = od_bool(r);
    s->nrets = 1;
    return OD_OK;
}
