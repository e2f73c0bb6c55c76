/* loss_more.c — the losses torch 1.13 writes in terms of other operators:
 * binary_cross_entropy_with_logits and soft_margin_loss(_backward)
 * (CompositeExplicitAutograd: their nodes are BinaryCrossEntropyWithLogits-
 * Backward0 and SoftMarginLossBackward0) and kl_div (CompositeImplicit-
 * Autograd: its decomposition records).
 *
 * Invariants: each kernel calls operators through the dispatcher in ATen
 * 1.13's order (kl_div: the calls a TorchDispatchMode sees), or in fewer
 * steps of the same bits (bce_with_logits, said there), so one kernel
 * serves CPU, CUDA and Meta; ATen's in-place steps are the in-place
 * operators here (mul_, add_, exp_, log_), so shapes, dtypes and refusals
 * follow the tensor they write into, as in ATen (bce_with_logits of inputs
 * of one dtype, shape and layout, where nothing can differ, skips them).
 * Every intermediate lives in an od_cx_scope and is released on every path.
 */
#include <inttypes.h>
#include <string.h>

#include "composite.h"
#include "od_shape.h"

#define TV(t) od_tensor_v(t)
/* a function, not a macro: its argument is often a call, evaluated once */
static od_value OPT(od_tensor *t) { return t ? od_tensor_v(t) : od_none(); }

enum { RED_NONE = 0, RED_MEAN = 1, RED_SUM = 2 };

static od_tensor *call1(od_cx_scope *sc, od_opid id, od_tensor *a) { return od_cx_call(sc, id, 1, OPT(a)); }

static od_tensor *call2(od_cx_scope *sc, od_opid id, od_tensor *a, od_tensor *b)
{
    return od_cx_call(sc, id, 2, OPT(a), OPT(b));
}

/* a + b (alpha 1); id is add_Tensor or add__Tensor */
static od_tensor *add(od_cx_scope *sc, od_opid id, od_tensor *a, od_tensor *b)
{
    return od_cx_call(sc, id, 3, OPT(a), OPT(b), od_int(1));
}

/* ATen's apply_loss_reduction: any reduction but mean and sum keeps the loss */
static od_tensor *reduce(od_cx_scope *sc, od_tensor *r, int64_t reduction)
{
    if (reduction == RED_MEAN)
        return od_cx_call(sc, OD_OPID_mean, 2, OPT(r), od_none());
    if (reduction == RED_SUM)
        return od_cx_call(sc, OD_OPID_sum, 2, OPT(r), od_none());
    return r;
}

/* ATen 1.13's CPU exp and clamp_min have no float16 loop (this project's
 * have one): their refusal, in the name of the step that meets one */
static od_status cpu_half(const od_tensor *t, const char *loop, od_error *err)
{
    if (t && t->dtype == OD_FLOAT16 && t->device.type == OD_DEV_CPU)
        return od_error_set(err, OD_EUNSUPPORTED, "\"%s\" not implemented for 'Half'", loop);
    return OD_OK;
}

/* binary_cross_entropy_with_logits(self, target, weight?, pos_weight?, reduction):
 *   max_val = (-x).clamp_min_(0)
 *   lse = (-max_val).exp_().add_((-x - max_val).exp_()).log_()
 *   no pos_weight: (1 - t).mul_(x).add_(max_val).add_(lse)
 *   pos_weight:    lw = (pw - 1).mul(t).add_(1); (1 - t).mul_(x).add_(lw.mul_(lse.add_(max_val)))
 *   then loss.mul_(weight) and the reduction (ATen 1.13).
 * Two steps take fewer passes here for the same bits (4M float32, two
 * threads: 10.3 -> 7.1-7.3 ms, torch 9.7-11.4; the passes are the cost):
 *  - lse: one of ATen's exps is exp(+-0) = 1 and the other exp(-|x|), so
 *    lse = log(exp(-|x|) + 1), one exp. -|x| is -x - 2 * max_val: exact
 *    (2 * max_val is, or overflows where exp(-|x|) is 0 anyway), and NaN
 *    where ATen's is (x = -inf: inf - inf).
 *  - without pos_weight, (1 - t) * x is (t - 1) * -x: rounding to nearest
 *    is symmetric under negation. Only the sign of a zero product can
 *    differ, where t = 1; the sum with max_val (+0 or positive) then gives
 *    ATen's bits again. With pos_weight the addend lw * (lse + max_val) is
 *    -0 where lw < 0 and lse + max_val = +0, which would keep that sign, so
 *    that branch computes ATen's (1 - t) * x, as -t + 1 (one pass more). A
 *    bool target meets ATen's refusal of two bool tensors in sub_.
 * The in-place steps keep ATen's dtype, shape and layout refusals; with one
 * floating dtype, shape and layout for x and t, the steps before pos_weight
 * and weight write temporaries of that dtype, shape and layout, which
 * their out-of-place operators make with the same bits, sparing the copy_
 * each in-place step costs here (OD_INPLACE). */
OD_CX_KERNEL(od_cea_bce_with_logits)
{
    (void)ks;
    (void)ctx;
    od_tensor *x, *t, *w, *pw;
    int64_t reduction;
    od_status st;
    if ((st = od_cx_arg_tensor(op, s, 0, &x, err)) || (st = od_cx_arg_tensor(op, s, 1, &t, err)) ||
        (st = od_cx_arg_opt_tensor(op, s, 2, &w, err)) || (st = od_cx_arg_opt_tensor(op, s, 3, &pw, err)) ||
        (st = od_cx_arg_int(op, s, 4, &reduction, err)))
        return st;
    if ((st = cpu_half(x, "clamp_min_cpu", err)))
        return st;
    bool same = od_dtype_is_floating(x->dtype) && x->dtype == t->dtype && x->ndim == t->ndim &&
                !memcmp(x->sizes, t->sizes, sizeof(int64_t) * (size_t)x->ndim) &&
                !memcmp(x->strides, t->strides, sizeof(int64_t) * (size_t)x->ndim);
    od_opid clamp_min_ = same ? OD_OPID_clamp_min : OD_OPID_clamp_min_, exp_ = same ? OD_OPID_exp : OD_OPID_exp_,
            log_ = same ? OD_OPID_log : OD_OPID_log_, add_ = same ? OD_OPID_add_Tensor : OD_OPID_add__Tensor,
            mul_ = same ? OD_OPID_mul_Tensor : OD_OPID_mul__Tensor,
            add_s = same ? OD_OPID_add_Scalar : OD_OPID_add__Scalar;
    od_cx_scope sc = od_cx_scope_begin(err);
    od_tensor *negx = call1(&sc, OD_OPID_neg, x);
    od_tensor *max_val = od_cx_call(&sc, clamp_min_, 2, OPT(negx), od_int(0));
    if (!same) /* clamp_min_ wrote max_val into negx */
        negx = call1(&sc, OD_OPID_neg, x);
    /* ATen's order, which decides which refusal comes first: log_weight,
     * then (1 - t) * x (and + max_val without pos_weight), then lse */
    od_tensor *lw = NULL;
    if (pw) {
        lw = od_cx_call(&sc, OD_OPID_sub_Scalar, 3, TV(pw), od_int(1), od_int(1));
        lw = od_cx_call(&sc, OD_OPID_add__Scalar, 3, OPT(call2(&sc, OD_OPID_mul_Tensor, lw, t)), od_int(1), od_int(1));
    }
    /* t - 1 (1 - t with pos_weight); of a bool target, ATen's 1 - t is fill_(1).sub_(t) of two bools,
     * which sub refuses */
    od_tensor *loss;
    if (t->dtype == OD_BOOL)
        loss = call2(&sc, mul_, add(&sc, OD_OPID_sub_Tensor, t, t), negx);
    else if (pw)
        loss = call2(&sc, OD_OPID_mul__Tensor,
                     od_cx_call(&sc, OD_OPID_add__Scalar, 3, OPT(call1(&sc, OD_OPID_neg, t)), od_int(1), od_int(1)), x);
    else
        loss = call2(&sc, mul_, od_cx_call(&sc, OD_OPID_sub_Scalar, 3, OPT(t), od_int(1), od_int(1)), negx);
    if (!pw)
        loss = add(&sc, add_, loss, max_val);
    od_tensor *nabs = od_cx_call(&sc, OD_OPID_sub_Tensor, 3, OPT(negx), OPT(max_val), od_int(2));
    od_tensor *lse = call1(&sc, log_, od_cx_call(&sc, add_s, 3, OPT(call1(&sc, exp_, nabs)), od_int(1), od_int(1)));
    if (pw) {
        lw = call2(&sc, OD_OPID_mul__Tensor, lw, add(&sc, OD_OPID_add__Tensor, lse, max_val));
        loss = add(&sc, OD_OPID_add__Tensor, loss, lw);
    } else {
        loss = add(&sc, add_, loss, lse);
    }
    if (w)
        loss = call2(&sc, OD_OPID_mul__Tensor, loss, w);
    return od_cx_scope_return1(&sc, s, reduce(&sc, loss, reduction));
}

/* kl_div(self, target, reduction, *, log_target) */
OD_CX_KERNEL(od_cia_kl_div)
{
    (void)ks;
    (void)ctx;
    od_tensor *x, *t;
    int64_t reduction;
    bool log_target;
    od_status st;
    if ((st = od_cx_arg_tensor(op, s, 0, &x, err)) || (st = od_cx_arg_tensor(op, s, 1, &t, err)) ||
        (st = od_cx_arg_int(op, s, 2, &reduction, err)) || (st = od_cx_arg_bool(op, s, 3, &log_target, err)))
        return st;
    if (!od_dtype_is_floating(x->dtype) || !od_dtype_is_floating(t->dtype))
        return od_error_set(err, OD_EINVAL, "kl_div: Integral inputs not supported.");
    if (log_target && (st = cpu_half(t, "exp_vml_cpu", err)))
        return st;
    od_cx_scope sc = od_cx_scope_begin(err);
    od_tensor *r;
    if (log_target) {
        od_tensor *d = add(&sc, OD_OPID_sub_Tensor, t, x);
        r = call2(&sc, OD_OPID_mul_Tensor, call1(&sc, OD_OPID_exp, t), d);
    } else {
        od_tensor *tx = call2(&sc, OD_OPID_mul_Tensor, t, x);
        r = add(&sc, OD_OPID_sub_Tensor, call2(&sc, OD_OPID_xlogy_Tensor, t, t), tx);
    }
    return od_cx_scope_return1(&sc, s, reduce(&sc, r, reduction));
}

/* soft_margin_loss(self, target, reduction):
 *   output = neg(x) (x's dtype), .mul_(t).exp_().add_(1.).log_();
 *   a reduction but none writes apply_loss_reduction's result into output
 *   resized to [] (any other value leaves the loss's first element there);
 * soft_margin_loss_backward(grad_output, self, target, reduction):
 *   z = exp(-t * x); gi = mul_out(gi of x's dtype, t, z).mul_(-norm);
 *   z.add_(1); gi.div_(z).mul_(grad_output), norm 1 / numel for mean. */
OD_CX_KERNEL(od_cea_soft_margin_loss)
{
    (void)ks;
    bool bw = OD_OPID_OF_CTX(ctx) == OD_OPID_soft_margin_loss_backward;
    int k = bw ? 1 : 0;
    od_tensor *g = NULL, *x, *t;
    int64_t reduction;
    od_status st;
    if ((bw && (st = od_cx_arg_tensor(op, s, 0, &g, err))) || (st = od_cx_arg_tensor(op, s, k, &x, err)) ||
        (st = od_cx_arg_tensor(op, s, k + 1, &t, err)) || (st = od_cx_arg_int(op, s, k + 2, &reduction, err)))
        return st;
    od_cx_scope sc = od_cx_scope_begin(err);
    if (!bw) {
        od_tensor *o = call2(&sc, OD_OPID_mul__Tensor, call1(&sc, OD_OPID_neg, x), t);
        if (!sc.st && (sc.st = cpu_half(o, "exp_vml_cpu", err)))
            o = NULL;
        o = od_cx_call(&sc, OD_OPID_add__Scalar, 3, OPT(call1(&sc, OD_OPID_exp_, o)), od_double(1.0), od_int(1));
        o = call1(&sc, OD_OPID_log_, o);
        if (o && reduction != RED_NONE && reduction != RED_MEAN && reduction != RED_SUM) {
            if (od_tensor_numel(o) == 0) {
                /* ATen's resize_({}) creates an element it never writes */
                od_cx_scope_end(&sc);
                return od_error_set(err, OD_EINVAL,
                                    "soft_margin_loss: reduction %" PRId64 " of an empty input has no value (torch "
                                    "1.13 returns uninitialised memory)",
                                    reduction);
            } else {
                int64_t flat = -1;
                o = od_cx_call(&sc, OD_OPID_reshape, 2, OPT(o), od_list_v(OD_T_INT_LIST, &flat, 1));
                o = od_cx_call(&sc, OD_OPID_select_int, 3, OPT(o), od_int(0), od_int(0));
                o = od_cx_call(&sc, OD_OPID_clone, 2, OPT(o), od_none());
            }
            return od_cx_scope_return1(&sc, s, o);
        }
        return od_cx_scope_return1(&sc, s, reduce(&sc, o, reduction));
    }
    double norm = reduction == RED_MEAN ? 1.0 / (double)od_tensor_numel(x) : 1.0;
    od_tensor *z = call2(&sc, OD_OPID_mul_Tensor, call1(&sc, OD_OPID_neg, t), x);
    if (!sc.st && (sc.st = cpu_half(z, "exp_vml_cpu", err)))
        z = NULL;
    z = call1(&sc, OD_OPID_exp, z);
    od_tensor *gi = call2(&sc, OD_OPID_mul_Tensor, t, z);
    if (gi && gi->dtype != x->dtype) {
        if ((st = od_check_result_cast(gi->dtype, x->dtype, err))) {
            od_cx_scope_end(&sc);
            return st;
        }
        gi = od_cx_cast(&sc, gi, x->dtype);
    }
    gi = od_cx_call(&sc, OD_OPID_mul__Scalar, 2, OPT(gi), od_double(-norm));
    z = od_cx_call(&sc, OD_OPID_add__Scalar, 3, OPT(z), od_int(1), od_int(1));
    gi = call2(&sc, OD_OPID_mul__Tensor, call2(&sc, OD_OPID_div__Tensor, gi, z), g);
    return od_cx_scope_return1(&sc, s, gi);
}
