/* defined_by.c — operators PyTorch defines by another one: scalar_tensor is
 * full([], s), square is
 * pow(self, 2), true_divide is div, positive is self (CompositeImplicit
 * kernels, differentiated through what they call), and rsub.Tensor is
 * sub(other, self, alpha) and clamp_min/clamp_max are clamp with one bound
 * (CompositeExplicit: their own RsubBackward0, ClampMin/MaxBackward0/1, as
 * in torch).
 *
 * Invariants: each calls its operator through the dispatcher with the same
 * arguments in that operator's order, so dtypes, errors, autograd and modes
 * are that operator's; nothing is computed here.
 */
#include "composite.h"

OD_CX_KERNEL(od_cia_defined_by)
{
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    od_tensor *self, *out = NULL;
    od_status st;
    if (id == OD_OPID_scalar_tensor) { /* full([], s), the default float unless a dtype is given */
        bool has = false;
        od_dtype dt = OD_DEFAULT_FLOAT;
        if ((st = od_cx_arg_opt_dtype(op, s, 1, &has, &dt, err)))
            return st;
        od_value a[6] = {od_list_v(OD_T_INT_LIST, NULL, 0), s->args[0], od_dtype_v(has ? dt : OD_DEFAULT_FLOAT),
                         s->args[2], s->args[3], s->args[4]};
        if ((st = od_call_builtin1(OD_OPID_full, a, 6, &out, err)))
            return st;
        return od_cx_return1(s, out);
    }
    if ((st = od_cx_arg_tensor(op, s, 0, &self, err)))
        return st;
    switch (id) {
    case OD_OPID_square: {
        od_value a[2] = {s->args[0], od_int(2)};
        st = od_call_builtin1(OD_OPID_pow_Tensor_Scalar, a, 2, &out, err);
        break;
    }
    case OD_OPID_rsub_Tensor: {
        od_value a[3] = {s->args[1], s->args[0], s->args[2]};
        st = od_call_builtin1(OD_OPID_sub_Tensor, a, 3, &out, err);
        break;
    }
    case OD_OPID_true_divide_Tensor:
        st = od_call_builtin1(OD_OPID_div_Tensor, s->args, 2, &out, err);
        break;
    case OD_OPID_true_divide_Scalar:
        st = od_call_builtin1(OD_OPID_div_Scalar, s->args, 2, &out, err);
        break;
    case OD_OPID_clamp_min:
    case OD_OPID_clamp_max:
    case OD_OPID_clamp_min_Tensor:
    case OD_OPID_clamp_max_Tensor: {
        bool lo = id == OD_OPID_clamp_min || id == OD_OPID_clamp_min_Tensor;
        bool scalar = id == OD_OPID_clamp_min || id == OD_OPID_clamp_max;
        /* torch's clamp_min(x, nan) is NaN everywhere, where clamp(x, min=nan)
         * keeps x: a NaN bound given twice is clamp's all-NaN case */
        bool nan = scalar && s->args[1].tag == OD_T_DOUBLE && s->args[1].u.d != s->args[1].u.d;
        od_value a[3] = {s->args[0], lo || nan ? s->args[1] : od_none(), !lo || nan ? s->args[1] : od_none()};
        st = od_call_builtin1(scalar ? OD_OPID_clamp : OD_OPID_clamp_Tensor, a, 3, &out, err);
        break;
    }
    case OD_OPID_positive:
        if (self->dtype == OD_BOOL)
            return od_error_set(err, OD_EUNSUPPORTED, "The `+` operator, on a bool tensor is not supported.");
        od_tensor_retain(self); /* Tensor(a): self itself */
        out = self;
        break;
    default:
        return od_error_set(err, OD_EINTERNAL, "%s is not defined by another operator here", od_op_name(op));
    }
    if (st)
        return st;
    return od_cx_return1(s, out);
}
