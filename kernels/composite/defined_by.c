/* defined_by.c — operators PyTorch defines by another one: scalar_tensor is
 * full([], s), square is
 * pow(self, 2), true_divide is div, positive is self (CompositeImplicit
 * kernels, differentiated through what they call), and rsub.Tensor is
 * sub(other, self, alpha) and clamp_min/clamp_max are clamp with one bound
 * (CompositeExplicit: their own RsubBackward0, ClampMin/MaxBackward0/1, as
 * in torch). The activations: selu is elu with its constants and log_sigmoid
 * is log_sigmoid_forward's output (CompositeImplicit, as in torch: selu's
 * grad_fn is EluBackward0); celu is elu(alpha, 1, 1 / alpha) and
 * log_sigmoid_forward is min(x, 0) - log1p(buffer), buffer = exp(-|x|), the
 * ops ATen's CPU kernel applies in order (CompositeExplicit: CeluBackward0,
 * LogSigmoidBackward0).
 *
 * Invariants: each calls its operator through the dispatcher with the same
 * arguments in that operator's order, so dtypes, errors, autograd and modes
 * are that operator's; nothing is computed here.
 */
#include "composite.h"

#define T(x) od_tensor_v(x)

/* log_sigmoid_forward's (output, buffer) of x, bfloat16, float or double */
static od_status log_sigmoid_forward(const od_op *op, od_tensor *x, od_stack *s, od_error *err)
{
    if (!od_dtype_is_floating(x->dtype) || x->dtype == OD_FLOAT16) /* its kernel's dispatch name */
        return od_error_set(err, OD_EUNSUPPORTED, "\"%s\" not implemented for '%s'",
                            x->device.type == OD_DEV_CPU ? "log_sigmoid_cpu" : od_op_name(op),
                            od_dtype_scalar_name(x->dtype));
    od_cx_scope sc = od_cx_scope_begin(err);
    od_tensor *buf = od_cx_call(&sc, OD_OPID_exp, 1, T(od_cx_call(&sc, OD_OPID_neg, 1, T(od_cx_call(&sc, OD_OPID_abs, 1, T(x))))));
    od_tensor *lb = od_cx_call(&sc, OD_OPID_log1p, 1, T(buf));
    od_tensor *mn = od_cx_call(&sc, OD_OPID_clamp, 3, T(x), od_none(), od_int(0));
    od_tensor *out = od_cx_call(&sc, OD_OPID_sub_Tensor, 3, T(mn), T(lb), od_int(1));
    out = od_cx_keep(out);
    buf = od_cx_keep(buf);
    od_status st = od_cx_scope_end(&sc);
    if (st) {
        od_tensor_release(out);
        od_tensor_release(buf);
        return st;
    }
    s->rets[0] = T(out);
    s->rets[1] = T(buf);
    s->nrets = 2;
    return OD_OK;
}

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
    case OD_OPID_celu: {
        double alpha = od_value_as_double(&s->args[1]);
        if (alpha == 0)
            return od_error_set(err, OD_EINVAL, "ZeroDivisionError: alpha cannot be 0 for CELU");
        od_value a[4] = {s->args[0], s->args[1], od_double(1.0), od_double(1.0 / alpha)};
        st = od_call_builtin1(OD_OPID_elu, a, 4, &out, err);
        break;
    }
    case OD_OPID_selu: {
        od_value a[4] = {s->args[0], od_double(1.6732632423543772848170429916717),
                         od_double(1.0507009873554804934193349852946), od_int(1)};
        st = od_call_builtin1(OD_OPID_elu, a, 4, &out, err);
        break;
    }
    case OD_OPID_log_sigmoid_forward:
        return log_sigmoid_forward(op, self, s, err);
    case OD_OPID_log_sigmoid: {
        od_stack r;
        if ((st = od_call_builtin(OD_OPID_log_sigmoid_forward, s->args, 1, &r, err)))
            return st;
        out = r.rets[0].u.t;
        od_tensor_release(r.rets[1].u.t);
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
