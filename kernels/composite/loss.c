/* loss.c — the loss operators torch 1.13 writes in terms of others:
 * nll_loss, nll_loss2d and nll_loss_nd (CompositeImplicitAutograd over
 * nll_loss_forward / nll_loss2d_forward), cross_entropy_loss (log_softmax
 * and nll_loss_nd, or its probability-target and label-smoothing forms),
 * and mse_loss / mse_loss_backward (CompositeExplicitAutograd here, over
 * sub, mul and mean / sum: ATen's mse kernels compute the same steps in the
 * same dtype, and MseLossBackward0 records the node), and l1_loss
 * (CompositeImplicitAutograd in torch 1.13: sub, abs, then mean or sum).
 *
 * Invariants: each kernel makes torch's checks at its level, in its order
 * and words, then calls operators through the dispatcher in torch's order
 * (the same calls a TorchDispatchMode sees), so one kernel serves CPU, CUDA
 * and Meta; every intermediate lives in an od_cx_scope and is released on
 * every path.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "composite.h"
#include "od_shape.h"

#define TV(t) od_tensor_v(t)
#define OPT(t) ((t) ? od_tensor_v(t) : od_none())
#define INTS(a, n) od_list_v(OD_T_INT_LIST, (void *)(a), (size_t)(n))

enum { RED_NONE = 0, RED_MEAN = 1, RED_SUM = 2 };

/* nll_loss(self, target, weight, reduction, ignore_index) */
static od_tensor *nll_call(od_cx_scope *sc, od_opid id, od_tensor *self, od_tensor *target, od_tensor *weight,
                           int64_t reduction, int64_t ignore_index)
{
    return od_cx_call(sc, id, 5, OPT(self), TV(target), OPT(weight), od_int(reduction), od_int(ignore_index));
}

/* ATen's nll_loss_nd: 1-D/2-D self to nll_loss, 4-D to nll_loss2d, any
 * other rank viewed as [N, C, 1, -1] for nll_loss2d. */
static od_tensor *nll_loss_nd(od_cx_scope *sc, od_tensor *self, od_tensor *target, od_tensor *weight,
                              int64_t reduction, int64_t ignore_index)
{
    if (sc->st || !self)
        return NULL;
    char a[256], b[256];
    if (self->ndim < 1) {
        sc->st = od_error_set(sc->err, OD_EINVAL, "Expected 1 or more dimensions (got %d)", self->ndim);
        return NULL;
    }
    if (self->ndim != 1 && (target->ndim < 1 || self->sizes[0] != target->sizes[0])) {
        sc->st = od_error_set(sc->err, OD_EINVAL, "Expected input batch_size (%" PRId64
                              ") to match target batch_size (%" PRId64 ").",
                              self->sizes[0], target->ndim < 1 ? (int64_t)0 : target->sizes[0]);
        return NULL;
    }
    if (self->ndim <= 2)
        return nll_call(sc, OD_OPID_nll_loss, self, target, weight, reduction, ignore_index);
    if (self->ndim == 4)
        return nll_call(sc, OD_OPID_nll_loss2d, self, target, weight, reduction, ignore_index);
    int64_t n = self->sizes[0], c = self->sizes[1], out_size[OD_MAX_DIMS];
    int no = 0;
    out_size[no++] = n;
    for (int k = 2; k < self->ndim; k++)
        out_size[no++] = self->sizes[k];
    bool same = target->ndim == self->ndim - 1;
    for (int k = 1; same && k < target->ndim; k++)
        same = target->sizes[k] == self->sizes[k + 1];
    if (!same) {
        od_shape_print(out_size, no, a, sizeof a);
        od_shape_print(target->sizes, target->ndim, b, sizeof b);
        sc->st = od_error_set(sc->err, OD_EMISMATCH, "Expected target size %s, got %s", a, b);
        return NULL;
    }
    od_tensor *x = od_cx_call(sc, OD_OPID_contiguous, 2, TV(self), od_int(OD_MF_CONTIGUOUS));
    od_tensor *t = od_cx_call(sc, OD_OPID_contiguous, 2, TV(target), od_int(OD_MF_CONTIGUOUS));
    bool xe = od_tensor_numel(self) == 0, te = od_tensor_numel(target) == 0;
    int64_t xs[4] = {n, c, xe ? 0 : 1, xe ? 0 : -1}, ts[3] = {n, te ? 0 : 1, te ? 0 : -1};
    x = od_cx_call(sc, OD_OPID_view, 2, OPT(x), INTS(xs, 4));
    t = od_cx_call(sc, OD_OPID_view, 2, OPT(t), INTS(ts, 3));
    if (sc->st)
        return NULL;
    od_tensor *r = nll_call(sc, OD_OPID_nll_loss2d, x, t, weight, reduction, ignore_index);
    if (reduction != RED_NONE || !r)
        return r;
    return od_cx_call(sc, OD_OPID_view, 2, TV(r), INTS(out_size, no));
}

/* nll_loss, nll_loss2d, nll_loss_nd (self, target, weight?, reduction, ignore_index) */
OD_CX_KERNEL(od_cia_nll_loss)
{
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    od_tensor *self, *target, *weight;
    int64_t reduction, ignore_index;
    od_status st;
    if ((st = od_cx_arg_tensor(op, s, 0, &self, err)) || (st = od_cx_arg_tensor(op, s, 1, &target, err)) ||
        (st = od_cx_arg_opt_tensor(op, s, 2, &weight, err)) || (st = od_cx_arg_int(op, s, 3, &reduction, err)) ||
        (st = od_cx_arg_int(op, s, 4, &ignore_index, err)))
        return st;
    od_cx_scope sc = od_cx_scope_begin(err);
    od_tensor *r;
    if (id == OD_OPID_nll_loss_nd) {
        r = nll_loss_nd(&sc, self, target, weight, reduction, ignore_index);
    } else {
        /* the first of nll_loss(2d)_forward's (output, total_weight) */
        od_opid fwd = id == OD_OPID_nll_loss ? OD_OPID_nll_loss_forward : OD_OPID_nll_loss2d_forward;
        r = nll_call(&sc, fwd, self, target, weight, reduction, ignore_index);
    }
    return od_cx_scope_return1(&sc, s, r);
}

/* weight (borrowed) viewed to broadcast along class_dim of an ndim input */
static od_tensor *class_view(od_cx_scope *sc, od_tensor *weight, int ndim, int class_dim)
{
    if (ndim <= 1)
        return weight;
    int64_t sizes[OD_MAX_DIMS];
    for (int k = 0; k < ndim; k++)
        sizes[k] = k == class_dim ? weight->sizes[0] : 1;
    return od_cx_call(sc, OD_OPID_view, 2, TV(weight), INTS(sizes, ndim));
}

static od_tensor *sum_all(od_cx_scope *sc, od_tensor *t) { return od_cx_call(sc, OD_OPID_sum, 2, OPT(t), od_none()); }

static od_tensor *sum_dim(od_cx_scope *sc, od_tensor *t, int64_t d)
{
    return od_cx_call(sc, OD_OPID_sum_dim_IntList, 4, OPT(t), INTS(&d, 1), od_bool(false), od_none());
}

static od_tensor *neg(od_cx_scope *sc, od_tensor *t) { return od_cx_call(sc, OD_OPID_neg, 1, OPT(t)); }

static od_tensor *mul(od_cx_scope *sc, od_tensor *a, od_tensor *b)
{
    return od_cx_call(sc, OD_OPID_mul_Tensor, 2, OPT(a), OPT(b));
}

static od_tensor *muls(od_cx_scope *sc, od_tensor *a, double v)
{
    return od_cx_call(sc, OD_OPID_mul_Scalar, 2, OPT(a), od_double(v));
}

static od_status bad_reduction(od_cx_scope *sc, int64_t reduction)
{
    return sc->st = od_error_set(sc->err, OD_EINVAL, "cross_entropy_loss(): reduction %" PRId64
                                 " is none of 0 (none), 1 (mean) or 2 (sum)", reduction);
}

/* cross_entropy_loss_prob_target: target holds class probabilities */
static od_tensor *ce_prob(od_cx_scope *sc, od_tensor *self, od_tensor *target, od_tensor *weight, int64_t reduction,
                          double ls)
{
    int class_dim = self->ndim == 1 ? 0 : 1;
    int64_t n_classes = self->ndim > class_dim ? self->sizes[class_dim] : 1;
    if (weight && !(weight->ndim == 1 && od_tensor_numel(weight) == n_classes)) {
        char a[256];
        od_shape_print(weight->sizes, weight->ndim, a, sizeof a);
        sc->st = od_error_set(sc->err, OD_EMISMATCH,
                              "cross_entropy: weight tensor should be defined either for all %" PRId64
                              " classes or no classes but got weight tensor of shape: %s",
                              n_classes, a);
        return NULL;
    }
    od_tensor *input = od_cx_call(sc, OD_OPID_log_softmax_int, 3, TV(self), od_int(class_dim), od_none());
    if (ls > 0.0) {
        if (ls > 1.0) {
            sc->st = od_error_set(sc->err, OD_EINVAL, "label_smoothing must be between 0.0 and 1.0. Got: %g", ls);
            return NULL;
        }
        target = od_cx_call(sc, OD_OPID_add_Scalar, 3, OPT(muls(sc, target, 1 - ls)),
                            od_double(ls / (double)n_classes), od_int(1));
    }
    od_tensor *prod = mul(sc, input, target);
    if (weight)
        prod = mul(sc, prod, class_view(sc, weight, self->ndim, class_dim));
    if (sc->st)
        return NULL;
    switch (reduction) {
    case RED_MEAN: {
        od_tensor *r = neg(sc, sum_all(sc, prod));
        if (od_tensor_numel(input) == 0)
            return od_cx_call(sc, OD_OPID_fill__Scalar, 2, OPT(r), od_double(NAN));
        return od_cx_call(sc, OD_OPID_div_Scalar, 2, OPT(r), od_int(od_tensor_numel(input) / n_classes));
    }
    case RED_SUM:
        return neg(sc, sum_all(sc, prod));
    case RED_NONE:
        return neg(sc, sum_dim(sc, prod, class_dim));
    default:
        bad_reduction(sc, reduction);
        return NULL;
    }
}

/* cross_entropy_loss_label_smoothing: class-index targets, 0 < ls <= 1 */
static od_tensor *ce_smooth(od_cx_scope *sc, od_tensor *self, od_tensor *target, od_tensor *weight,
                            int64_t reduction, int64_t ignore_index, double ls)
{
    int class_dim = self->ndim == 1 ? 0 : 1;
    od_tensor *input = od_cx_call(sc, OD_OPID_log_softmax_int, 3, TV(self), od_int(class_dim), od_none());
    od_tensor *nll = nll_loss_nd(sc, input, target, weight, reduction, ignore_index);
    if (sc->st)
        return NULL;
    int64_t n_classes = input->sizes[class_dim];
    od_tensor *ignore_mask = od_cx_call(sc, OD_OPID_eq_Scalar, 2, TV(target), od_int(ignore_index));
    od_tensor *smooth = weight ? neg(sc, sum_dim(sc, mul(sc, input, class_view(sc, weight, input->ndim, class_dim)),
                                                 class_dim))
                               : neg(sc, sum_dim(sc, input, class_dim));
    smooth = od_cx_call(sc, OD_OPID_masked_fill_Scalar, 3, OPT(smooth), OPT(ignore_mask), od_double(0.0));
    od_tensor *ret;
    switch (reduction) {
    case RED_MEAN: {
        od_tensor *keep = od_cx_call(sc, OD_OPID_bitwise_not, 1, OPT(ignore_mask));
        if (weight) {
            od_tensor *picked = od_cx_call(sc, OD_OPID_masked_select, 2, TV(target), OPT(keep));
            od_tensor *w = od_cx_call(sc, OD_OPID_gather, 4, TV(weight), od_int(0), OPT(picked), od_bool(false));
            ret = od_cx_call(sc, OD_OPID_div_Tensor, 2, OPT(sum_all(sc, smooth)), OPT(sum_all(sc, w)));
        } else {
            ret = od_cx_call(sc, OD_OPID_mean, 2, OPT(od_cx_call(sc, OD_OPID_masked_select, 2, OPT(smooth), OPT(keep))),
                             od_none());
        }
        break;
    }
    case RED_SUM:
        ret = sum_all(sc, smooth);
        break;
    case RED_NONE:
        ret = smooth;
        break;
    default:
        bad_reduction(sc, reduction);
        return NULL;
    }
    return od_cx_call(sc, OD_OPID_add_Tensor, 3, OPT(muls(sc, nll, 1 - ls)),
                      OPT(muls(sc, ret, ls / (double)n_classes)), od_int(1));
}

static bool same_sizes(const od_tensor *a, const od_tensor *b)
{
    if (a->ndim != b->ndim)
        return false;
    for (int k = 0; k < a->ndim; k++)
        if (a->sizes[k] != b->sizes[k])
            return false;
    return true;
}

/* cross_entropy_loss(self, target, weight?, reduction, ignore_index, label_smoothing) */
OD_CX_KERNEL(od_cia_cross_entropy_loss)
{
    (void)ks;
    (void)ctx;
    od_tensor *self, *target, *weight;
    int64_t reduction, ignore_index;
    od_status st;
    if ((st = od_cx_arg_tensor(op, s, 0, &self, err)) || (st = od_cx_arg_tensor(op, s, 1, &target, err)) ||
        (st = od_cx_arg_opt_tensor(op, s, 2, &weight, err)) || (st = od_cx_arg_int(op, s, 3, &reduction, err)) ||
        (st = od_cx_arg_int(op, s, 4, &ignore_index, err)))
        return st;
    if (s->nargs < 6 || !od_value_is_number(&s->args[5]))
        return od_error_set(err, OD_EINVAL, "cross_entropy_loss(): argument 'label_smoothing' must be a float");
    double ls = od_value_as_double(&s->args[5]);
    od_cx_scope sc = od_cx_scope_begin(err);
    od_tensor *r = NULL;
    if (same_sizes(self, target)) {
        if (!od_dtype_is_floating(target->dtype))
            sc.st = od_error_set(err, OD_EINVAL,
                                 "Expected floating point type for target with class probabilities, got %s",
                                 od_dtype_scalar_name(target->dtype));
        else if (ignore_index >= 0)
            sc.st = od_error_set(err, OD_EINVAL, "ignore_index is not supported for floating point target");
        else
            r = ce_prob(&sc, self, target, weight, reduction, ls);
    } else if (ls > 0.0) {
        if (ls > 1.0)
            sc.st = od_error_set(err, OD_EINVAL, "label_smoothing must be between 0.0 and 1.0. Got: %g", ls);
        else
            r = ce_smooth(&sc, self, target, weight, reduction, ignore_index, ls);
    } else {
        int class_dim = self->ndim == 1 ? 0 : 1;
        od_tensor *input = od_cx_call(&sc, OD_OPID_log_softmax_int, 3, TV(self), od_int(class_dim), od_none());
        r = nll_loss_nd(&sc, input, target, weight, reduction, ignore_index);
    }
    return od_cx_scope_return1(&sc, s, r);
}

/* ATen's loss iterators promote a bool operand, where sub refuses one: *x
 * and *y (borrowed) become casts to their common dtype where they are bool;
 * two bools are refused in the name of the loss's kernel (name_dev). */
static od_status promote_bool(od_cx_scope *sc, od_tensor **x, od_tensor **y, const char *name, const char *dev,
                              od_error *err)
{
    if ((*x)->dtype != OD_BOOL && (*y)->dtype != OD_BOOL)
        return OD_OK;
    od_result_arg ra[2] = {{*x, 0}, {*y, 0}};
    od_dtype common = od_result_type(ra, 2);
    if (common == OD_BOOL)
        return od_error_set(err, OD_EUNSUPPORTED, "\"%s_%s\" not implemented for 'Bool'", name, dev);
    if ((*x)->dtype == OD_BOOL)
        *x = od_cx_cast(sc, *x, common);
    if ((*y)->dtype == OD_BOOL)
        *y = od_cx_cast(sc, *y, common);
    return sc->st;
}

/* mse_loss's and smooth_l1_loss's meta functions: the iterator's broadcast
 * of self and target, then an internal assert on a reduction other than
 * none, mean or sum, both before the kernel's dtype dispatch. */
static od_status meta_reduction(const od_tensor *self, const od_tensor *target, int64_t reduction, od_error *err)
{
    int64_t b[OD_MAX_DIMS];
    int nb;
    od_status st = od_broadcast_shapes(self->sizes, self->ndim, target->sizes, target->ndim, b, &nb, err);
    if (st || reduction == RED_NONE || reduction == RED_MEAN || reduction == RED_SUM)
        return st;
    return od_error_set(err, OD_EINVAL,
                        "reduction == Reduction::Mean || reduction == Reduction::Sum INTERNAL ASSERT FAILED");
}

/* The loss iterator's shape over its inputs (self, target, and grad_output
 * when not NULL): ATen's build refuses shapes that do not broadcast before
 * it compares dtypes, and before the kernel dispatches on them. */
static od_status iter_shape(const od_tensor *self, const od_tensor *target, const od_tensor *g, od_error *err)
{
    int64_t bs[OD_MAX_DIMS];
    int nb;
    const od_tensor *ins[3] = {self, target, g};
    return od_broadcast_tensors(ins, g ? 3 : 2, bs, &nb, err);
}

/* mse_loss(self, target, reduction) and mse_loss_backward(grad_output,
 * self, target, reduction), as ATen's mse kernels compute them. */
OD_CX_KERNEL(od_cea_mse_loss)
{
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    bool bw = id == OD_OPID_mse_loss_backward;
    int k = bw ? 1 : 0;
    od_tensor *g = NULL, *self, *target;
    int64_t reduction;
    od_status st;
    if ((bw && (st = od_cx_arg_tensor(op, s, 0, &g, err))) || (st = od_cx_arg_tensor(op, s, k, &self, err)) ||
        (st = od_cx_arg_tensor(op, s, k + 1, &target, err)) || (st = od_cx_arg_int(op, s, k + 2, &reduction, err)))
        return st;
    const char *dev = self->device.type == OD_DEV_CUDA ? "cuda" : "cpu";
    if (!bw && (st = meta_reduction(self, target, reduction, err)))
        return st;
    if (bw && (st = iter_shape(self, target, g, err)))
        return st;
    od_cx_scope sc = od_cx_scope_begin(err);
    if (bw) {
        /* ATen's iterator takes no promotion here: one dtype throughout */
        const od_tensor *others[2] = {target, g};
        for (int i = 0; i < 2; i++)
            if (others[i]->dtype != self->dtype)
                return od_error_set(err, OD_EMISMATCH, "Found dtype %s but expected %s",
                                    od_dtype_scalar_name(others[i]->dtype), od_dtype_scalar_name(self->dtype));
        /* torch 1.13's CPU kernel takes the integer and float32/64 dtypes (no half types) */
        bool cuda = self->device.type == OD_DEV_CUDA;
        if (self->dtype == OD_BOOL || (!cuda && (self->dtype == OD_FLOAT16 || self->dtype == OD_BFLOAT16)))
            return od_error_set(err, OD_EUNSUPPORTED, "\"mse_backward_%s_out\" not implemented for '%s'", dev,
                                od_dtype_scalar_name(self->dtype));
        int64_t n = od_tensor_numel(self);
        double norm = reduction == RED_MEAN ? 2.0 / (double)n : 2.0;
        bool integral = od_dtype_is_integral(self->dtype, false);
        /* alpha is norm as the dtype holds it, by c10's checked conversion: an integer dtype
         * truncates, and refuses the infinite norm of an empty mean */
        od_value vnorm = od_double(norm);
        if ((st = od_scalar_check_fits(&vnorm, self->dtype, err)))
            return st;
        od_value alpha = integral ? od_int((int64_t)norm) : vnorm;
        od_tensor *d = od_cx_call(&sc, OD_OPID_sub_Tensor, 3, TV(self), TV(target), od_int(1));
        od_tensor *r = od_cx_call(&sc, OD_OPID_mul_Scalar, 2, OPT(d), alpha);
        return od_cx_scope_return1(&sc, s, mul(&sc, r, g));
    }
    od_tensor *x = self, *y = target;
    if ((st = promote_bool(&sc, &x, &y, "mse", dev, err))) {
        od_cx_scope_end(&sc);
        return st;
    }
    od_tensor *d = od_cx_call(&sc, OD_OPID_sub_Tensor, 3, OPT(x), OPT(y), od_int(1));
    /* torch 1.13's CPU kernel: float32, float64 and float16, not bfloat16 */
    if (d && (!od_dtype_is_floating(d->dtype) || (d->dtype == OD_BFLOAT16 && self->device.type != OD_DEV_CUDA))) {
        od_dtype dt = d->dtype;
        od_cx_scope_end(&sc);
        return od_error_set(err, OD_EUNSUPPORTED, "\"mse_%s\" not implemented for '%s'", dev,
                            od_dtype_scalar_name(dt));
    }
    od_tensor *sq = mul(&sc, d, d), *r = NULL;
    switch (reduction) {
    case RED_NONE: r = sq; break;
    case RED_MEAN: r = od_cx_call(&sc, OD_OPID_mean, 2, OPT(sq), od_none()); break;
    case RED_SUM: r = sum_all(&sc, sq); break;
    default: break; /* refused by meta_reduction */
    }
    return od_cx_scope_return1(&sc, s, r);
}

/* l1_loss(self, target, reduction): ATen's apply_loss_reduction keeps the
 * unreduced loss for any reduction but mean (1) and sum (2). */
OD_CX_KERNEL(od_cia_l1_loss)
{
    (void)ks;
    (void)ctx;
    od_tensor *self, *target;
    int64_t reduction;
    od_status st;
    if ((st = od_cx_arg_tensor(op, s, 0, &self, err)) || (st = od_cx_arg_tensor(op, s, 1, &target, err)) ||
        (st = od_cx_arg_int(op, s, 2, &reduction, err)))
        return st;
    od_cx_scope sc = od_cx_scope_begin(err);
    od_tensor *d = od_cx_call(&sc, OD_OPID_sub_Tensor, 3, TV(self), TV(target), od_int(1));
    od_tensor *r = od_cx_call(&sc, OD_OPID_abs, 1, OPT(d));
    if (reduction == RED_MEAN)
        r = od_cx_call(&sc, OD_OPID_mean, 2, OPT(r), od_none());
    else if (reduction == RED_SUM)
        r = sum_all(&sc, r);
    return od_cx_scope_return1(&sc, s, r);
}

/* ---- smooth_l1_loss and huber_loss, and their backward operators ----
 * ATen 1.13's kernels, step for step in the computing dtype (each operator
 * call here rounds as one vectorised ATen step does):
 *   smooth_l1: z = |x - y|; z < beta ? 0.5 * z * z / beta : z - 0.5 * beta
 *   huber:     z = |x - y|; z < delta ? 0.5 * z * z : delta * (z - 0.5 * delta)
 *   backward:  d = x - y; d <= -p ? -norm * g (* delta) : d >= p ? norm * g
 *              (* delta) : norm * d * g (/ beta), norm = 1 / numel for mean
 * smooth_l1 promotes its inputs as a binary operator does (beta 0 takes
 * the linear branch everywhere); huber computes in the inputs' result type
 * and answers in self's dtype; smooth_l1's
 * backward computes in the three tensors' result type, which must cast to
 * self's (an integer type holds norm truncated and divides by beta in
 * double, truncating), huber's takes one dtype throughout. Half types: both
 * forwards take them, smooth_l1's CPU backward not float16, huber's backward
 * not the integers. */
static od_tensor *where_(od_cx_scope *sc, od_tensor *cond, od_tensor *a, od_tensor *b)
{
    return od_cx_call(sc, OD_OPID_where_self, 3, OPT(cond), OPT(a), OPT(b));
}

static od_tensor *reduce_loss(od_cx_scope *sc, od_tensor *r, int64_t reduction)
{
    if (reduction == RED_MEAN)
        return od_cx_call(sc, OD_OPID_mean, 2, OPT(r), od_none());
    if (reduction == RED_SUM)
        return sum_all(sc, r);
    return r;
}

OD_CX_KERNEL(od_cea_smooth_l1_huber)
{
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    bool huber = id == OD_OPID_huber_loss || id == OD_OPID_huber_loss_backward;
    bool bw = id == OD_OPID_smooth_l1_loss_backward || id == OD_OPID_huber_loss_backward;
    int k = bw ? 1 : 0;
    od_tensor *g = NULL, *self, *target;
    int64_t reduction;
    od_status st;
    if ((bw && (st = od_cx_arg_tensor(op, s, 0, &g, err))) || (st = od_cx_arg_tensor(op, s, k, &self, err)) ||
        (st = od_cx_arg_tensor(op, s, k + 1, &target, err)) || (st = od_cx_arg_int(op, s, k + 2, &reduction, err)))
        return st;
    if (s->nargs <= k + 3 || !od_value_is_number(&s->args[k + 3]))
        return od_error_set(err, OD_EINVAL, "%s(): argument '%s' must be a float", od_op_schema(op)->name,
                            huber ? "delta" : "beta");
    double p = od_value_as_double(&s->args[k + 3]);
    const char *dev = self->device.type == OD_DEV_CUDA ? "cuda" : "cpu";
    bool cuda = self->device.type == OD_DEV_CUDA;
    if (!bw && huber && !(p > 0))
        return od_error_set(err, OD_EINVAL, "huber_loss does not support non-positive values for delta.");
    if (!bw && !huber && !(p >= 0)) /* ATen checks beta >= 0: NaN fails it */
        return od_error_set(err, OD_EINVAL, "smooth_l1_loss does not support negative values for beta.");
    if (!bw && !huber && (st = meta_reduction(self, target, reduction, err)))
        return st;
    if ((bw || huber) && (st = iter_shape(self, target, g, err)))
        return st;
    od_cx_scope sc = od_cx_scope_begin(err);
    if (!bw) {
        od_tensor *x = self, *y = target;
        if (huber && target->dtype != self->dtype) {
            /* a binary TensorIterator into empty_like(self): computed in the inputs' result type,
             * which must cast safely to self's */
            od_result_arg ra[2] = {{self, 0}, {target, 0}};
            od_dtype common = od_result_type(ra, 2);
            if ((st = od_check_result_cast(common, self->dtype, err))) {
                od_cx_scope_end(&sc);
                return st;
            }
            if (x->dtype != common)
                x = od_cx_cast(&sc, x, common);
            if (y->dtype != common)
                y = od_cx_cast(&sc, y, common);
        }
        if (!huber && (st = promote_bool(&sc, &x, &y, "smooth_l1", dev, err))) {
            od_cx_scope_end(&sc);
            return st;
        }
        /* huber's kernel refuses bool before anything subtracts */
        od_tensor *d = huber && x->dtype == OD_BOOL && y->dtype == OD_BOOL
                           ? x
                           : od_cx_call(&sc, OD_OPID_sub_Tensor, 3, OPT(x), OPT(y), od_int(1));
        if (d && !od_dtype_is_floating(d->dtype)) {
            od_dtype dt = d->dtype;
            od_cx_scope_end(&sc);
            return od_error_set(err, OD_EUNSUPPORTED, "\"%s_%s\" not implemented for '%s'", huber ? "huber" : "smooth_l1",
                                dev, od_dtype_scalar_name(dt));
        }
        od_tensor *z = od_cx_call(&sc, OD_OPID_abs, 1, OPT(d));
        od_tensor *quad = mul(&sc, muls(&sc, z, 0.5), z);
        od_tensor *lin;
        if (huber) {
            lin = muls(&sc, od_cx_call(&sc, OD_OPID_sub_Scalar, 3, OPT(z), od_double(0.5 * p), od_int(1)), p);
        } else {
            quad = od_cx_call(&sc, OD_OPID_div_Scalar, 2, OPT(quad), od_double(p));
            lin = od_cx_call(&sc, OD_OPID_sub_Scalar, 3, OPT(z), od_double(0.5 * p), od_int(1));
        }
        od_tensor *r = where_(&sc, od_cx_call(&sc, OD_OPID_lt_Scalar, 2, OPT(z), od_double(p)), quad, lin);
        if (huber && r && r->dtype != self->dtype)
            r = od_cx_cast(&sc, r, self->dtype);
        return od_cx_scope_return1(&sc, s, reduce_loss(&sc, r, reduction));
    }
    od_dtype dt = self->dtype;
    if (huber) {
        const od_tensor *others[2] = {target, g};
        for (int i = 0; i < 2; i++)
            if (others[i]->dtype != dt)
                return od_error_set(err, OD_EMISMATCH, "Found dtype %s but expected %s",
                                    od_dtype_scalar_name(others[i]->dtype), od_dtype_scalar_name(dt));
    }
    od_dtype common = dt;
    if (!huber) {
        od_result_arg ra[3] = {{g, 0}, {self, 0}, {target, 0}};
        common = od_result_type(ra, 3);
        if ((st = od_check_result_cast(common, dt, err)))
            return st;
    }
    bool refused = huber ? !od_dtype_is_floating(dt) : (common == OD_BOOL || (!cuda && common == OD_FLOAT16));
    if (refused)
        return od_error_set(err, OD_EUNSUPPORTED, "\"%s_backward_%s_out\" not implemented for '%s'",
                            huber ? "huber" : "smooth_l1", dev, od_dtype_scalar_name(common));
    od_tensor *x = self, *y = target;
    if (g->dtype != common)
        g = od_cx_cast(&sc, g, common);
    if (x->dtype != common)
        x = od_cx_cast(&sc, x, common);
    if (y->dtype != common)
        y = od_cx_cast(&sc, y, common);
    double norm = reduction == RED_MEAN ? 1.0 / (double)od_tensor_numel(self) : 1.0;
    bool integral = !od_dtype_is_floating(common);
    od_value vnorm = od_double(norm); /* converted as c10 does: an empty mean's inf fits no integer */
    if ((st = od_scalar_check_fits(&vnorm, common, err)))
        return st;
    /* an integer kernel holds norm as the dtype does (truncated) and beta as a double */
    od_value vn = integral ? od_int((int64_t)norm) : od_double(norm), vp = od_double(p), vneg = od_double(-p);
    od_tensor *d = od_cx_call(&sc, OD_OPID_sub_Tensor, 3, OPT(x), OPT(y), od_int(1));
    od_tensor *gn = od_cx_call(&sc, OD_OPID_mul_Scalar, 2, OPT(g), vn); /* norm * g */
    od_tensor *hi = huber ? muls(&sc, gn, p) : gn, *lo = huber ? muls(&sc, gn, -p) : od_cx_call(&sc, OD_OPID_neg, 1, OPT(gn));
    od_tensor *mid = mul(&sc, od_cx_call(&sc, OD_OPID_mul_Scalar, 2, OPT(d), vn), g);
    if (!huber) /* an integer quotient is the double one, truncated */
        mid = od_cx_call(&sc, OD_OPID_div_Scalar, 2, OPT(integral ? od_cx_cast(&sc, mid, OD_FLOAT64) : mid),
                         od_double(p));
    if (!huber && integral)
        mid = od_cx_cast(&sc, mid, common);
    od_tensor *r = where_(&sc, od_cx_call(&sc, OD_OPID_le_Scalar, 2, OPT(d), vneg), lo,
                          where_(&sc, od_cx_call(&sc, OD_OPID_ge_Scalar, 2, OPT(d), vp), hi, mid));
    if (r && r->dtype != dt)
        r = od_cx_cast(&sc, r, dt);
    return od_cx_scope_return1(&sc, s, r);
}
