/* defined_by.c — operators PyTorch defines by another one: square is
 * pow(self, 2), true_divide is div, positive is self (CompositeImplicit
 * kernels, differentiated through what they call), and rsub.Tensor is
 * sub(other, self, alpha) (CompositeExplicit: its own RsubBackward0, as in
 * torch).
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
