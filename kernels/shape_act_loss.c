/* shape_act_loss.c — the shape and dtype function of binary_cross_entropy,
 * glu, prelu and their native _backward operators, and the plan their CPU
 * and CUDA kernels share.
 *
 * Invariants: the checks run in torch 1.13's CPU order with its messages:
 * first the operator's own size checks (glu's halving, prelu's channels),
 * then its TensorIterator's (broadcast, then one dtype throughout, the
 * output's), then the dtype dispatch. binary_cross_entropy's iterator runs
 * over squeeze()d operands, so a target broadcasts to self's shape with
 * size-1 dims dropped; a broadcast larger than the output, which ATen
 * 1.13 answers by resizing a view of its output (uninitialised results),
 * is refused with its in-place words. The weight of
 * binary_cross_entropy multiplies the unreduced loss in place (mul_): it
 * broadcasts to self's shape and its dtype casts to self's. Values are not
 * read here (bce's range check is the kernels'); nothing allocates.
 */
#include <inttypes.h>
#include <string.h>

#include "od_shape.h"

static od_status same_dtype(const od_tensor *t, od_dtype want, od_error *err)
{
    if (!t || t->dtype == want)
        return OD_OK;
    return od_error_set(err, OD_EMISMATCH, "Found dtype %s but expected %s", od_dtype_scalar_name(t->dtype),
                        od_dtype_scalar_name(want));
}

static od_status not_implemented(const char *what, od_dtype dt, od_error *err)
{
    return od_error_set(err, OD_EUNSUPPORTED, "\"%s\" not implemented for '%s'", what, od_dtype_scalar_name(dt));
}

static void squeezed(const od_tensor *t, int64_t *sizes, int *n)
{
    *n = 0;
    for (int k = 0; k < t->ndim; k++)
        if (t->sizes[k] != 1)
            sizes[(*n)++] = t->sizes[k];
}

static od_status plan_bce(od_act_loss_plan *p, const od_stack *s, const char *name, od_error *err)
{
    int k = p->backward ? 1 : 0;
    od_status st;
    if ((p->backward && (st = od_shape_arg_tensor(s, 0, name, "grad_output", &p->grad, false, err))) ||
        (st = od_shape_arg_tensor(s, k, name, "self", &p->self, false, err)) ||
        (st = od_shape_arg_tensor(s, k + 1, name, "target", &p->target, false, err)) ||
        (st = od_shape_arg_tensor(s, k + 2, name, "weight", &p->weight, true, err)) ||
        (st = od_shape_arg_int(s, k + 3, name, "reduction", &p->reduction, err)))
        return st;
    /* the iterator's shape: its inputs' (grad_output, self, target) broadcast in order, which must be
     * its output's (self's, squeezed); its dtype: the first input's */
    const od_tensor *ins[3] = {p->grad, p->self, p->target};
    int64_t sx[OD_MAX_DIMS], acc[OD_MAX_DIMS], so[OD_MAX_DIMS];
    int nx, nacc = -1, no;
    for (int i = 0; i < 3; i++) {
        if (!ins[i])
            continue;
        squeezed(ins[i], so, &no);
        if (nacc < 0) {
            memcpy(acc, so, (size_t)no * sizeof *so);
            nacc = no;
        } else if ((st = od_broadcast_shapes(acc, nacc, so, no, acc, &nacc, err))) {
            return st;
        }
    }
    od_dtype first = ins[0] ? ins[0]->dtype : p->self->dtype, dt = p->self->dtype;
    for (int i = 0; i < 3; i++)
        if ((st = same_dtype(ins[i], first, err)))
            return st;
    if (dt != OD_FLOAT32 && dt != OD_FLOAT64)
        return not_implemented(p->backward ? "binary_cross_entropy_backward" : "binary_cross_entropy", dt, err);
    /* ATen resizes its squeezed output view rather than refusing, and then
     * answers from memory it never wrote: refused here, after everything
     * ATen itself refuses first (the dtypes, the kernel's dispatch) */
    squeezed(p->self, sx, &nx);
    if ((st = od_broadcast_into(sx, nx, acc, nacc, err)))
        return st;
    if (p->weight) {
        const od_tensor *w = p->weight;
        if ((st = od_broadcast_into(p->self->sizes, p->self->ndim, w->sizes, w->ndim, err)))
            return st;
        od_result_arg ra[2] = {{p->self, 0}, {w, 0}};
        if ((st = od_check_result_cast(od_result_type(ra, 2), dt, err)))
            return st;
    }
    p->n = od_tensor_numel(p->self);
    return OD_OK;
}

static od_status halving(const od_tensor *x, int64_t dim, od_act_loss_plan *p, od_error *err)
{
    if (x->ndim == 0)
        return od_error_set(err, OD_EINVAL, "glu does not support 0-dimensional tensors");
    od_status st = od_wrap_dim(dim, x->ndim, &p->dim, err);
    if (st)
        return st;
    int64_t n = x->sizes[p->dim];
    if (n % 2 != 0)
        return od_error_set(err, OD_EINVAL, "Halving dimension must be even, but dimension %d is size %" PRId64,
                            p->dim, n);
    p->half = n / 2;
    p->outer = p->inner = 1;
    for (int k = 0; k < p->dim; k++)
        p->outer *= x->sizes[k];
    for (int k = p->dim + 1; k < x->ndim; k++)
        p->inner *= x->sizes[k];
    return OD_OK;
}

static od_status plan_glu(od_act_loss_plan *p, const od_stack *s, const char *name, od_error *err)
{
    int k = p->backward ? 1 : 0;
    int64_t dim = 0;
    od_status st;
    if ((p->backward && (st = od_shape_arg_tensor(s, 0, name, "grad_output", &p->grad, false, err))) ||
        (st = od_shape_arg_tensor(s, k, name, "self", &p->self, false, err)) || (st = od_shape_arg_int(s, k + 1, name, "dim", &dim, err)) ||
        (st = halving(p->self, dim, p, err)))
        return st;
    od_dtype dt = p->self->dtype;
    if (!p->backward) {
        if (dt != OD_FLOAT32 && dt != OD_FLOAT64 && dt != OD_BFLOAT16)
            return not_implemented("glu_cpu", dt, err);
    } else {
        /* sigmoid_out into the first half of grad_input comes first */
        if (!od_dtype_is_floating(dt))
            return od_error_set(err, OD_EINVAL, "result type Float can't be cast to the desired output type %s",
                                od_dtype_scalar_name(dt));
        if (dt == OD_FLOAT16)
            return not_implemented("sigmoid_cpu", dt, err);
        int64_t hs[OD_MAX_DIMS];
        memcpy(hs, p->self->sizes, (size_t)p->self->ndim * sizeof *hs);
        hs[p->dim] = p->half;
        /* its iterator: the inputs' broadcast, their dtypes, then the output's shape */
        int64_t b[OD_MAX_DIMS];
        int nb;
        if ((st = od_broadcast_shapes(hs, p->self->ndim, p->grad->sizes, p->grad->ndim, b, &nb, err)) ||
            (st = same_dtype(p->grad, dt, err)) ||
            (st = od_broadcast_into(hs, p->self->ndim, p->grad->sizes, p->grad->ndim, err)))
            return st;
    }
    p->n = od_tensor_numel(p->self);
    return OD_OK;
}

static od_status plan_prelu(od_act_loss_plan *p, const od_stack *s, const char *name, od_error *err)
{
    int k = p->backward ? 1 : 0;
    od_status st;
    if ((p->backward && (st = od_shape_arg_tensor(s, 0, name, "grad_output", &p->grad, false, err))) ||
        (st = od_shape_arg_tensor(s, k, name, "self", &p->self, false, err)) ||
        (st = od_shape_arg_tensor(s, k + 1, name, "weight", &p->weight, false, err)))
        return st;
    const od_tensor *x = p->self, *w = p->weight;
    int64_t wn = od_tensor_numel(w);
    p->channels = 1;
    p->inner = 1;
    if (wn != 1) {
        if (x->ndim == 0)
            return od_error_set(err, OD_EINVAL, "Not allow zero-dim input tensor.");
        int64_t c = x->ndim > 1 ? x->sizes[1] : 1;
        if (c != wn)
            return od_error_set(err, OD_EMISMATCH,
                                "Mismatch of parameter numbers and input channel size. Found parameter numbers = %" PRId64
                                " and channel size = %" PRId64 ".",
                                wn, c);
        p->channels = c;
        for (int d = 2; d < x->ndim; d++)
            p->inner *= x->sizes[d];
    }
    if (w->ndim > 1)
        return od_error_set(err, OD_EINVAL, "prelu: Expected `weight` to be a scalar or 1D tensor, but got ndim = %d",
                            w->ndim);
    p->ndim = x->ndim;
    memcpy(p->sizes, x->sizes, (size_t)x->ndim * sizeof *p->sizes);
    p->wg_ndim = w->ndim;
    memcpy(p->wg_sizes, w->sizes, (size_t)w->ndim * sizeof *p->wg_sizes);
    if (p->grad) {
        /* ATen's iterator resizes its fresh outputs to the broadcast, where the weight's view
         * [1, C, 1...] aligns at the right: its channel dim moves right by the ranks' difference */
        if ((st = od_broadcast_shapes(x->sizes, x->ndim, p->grad->sizes, p->grad->ndim, p->sizes, &p->ndim, err)))
            return st;
        if (wn != 1) {
            p->inner = 1;
            for (int d = p->ndim - x->ndim + 2; d < p->ndim; d++)
                p->inner *= p->sizes[d];
            /* collector.sum([0] + [2, self.ndim)) keeps dim 1 and the dims past self's rank */
            p->wg_ndim = 0;
            for (int d = 0; d < p->ndim; d++)
                if (d == 1 || d >= x->ndim) {
                    p->wg_keep |= 1u << d;
                    p->wg_sizes[p->wg_ndim++] = p->sizes[d];
                }
        }
    }
    od_dtype dt = x->dtype;
    /* ATen 1.13 copies the weight to bfloat16 for a bfloat16 self */
    if ((st = same_dtype(p->grad, dt, err)) || (dt != OD_BFLOAT16 && (st = same_dtype(w, dt, err))))
        return st;
    if (dt != OD_FLOAT32 && dt != OD_FLOAT64 && dt != OD_BFLOAT16)
        return not_implemented(p->backward ? "prelu_backward_cpu" : "prelu_cpu", dt, err);
    p->n = 1;
    for (int d = 0; d < p->ndim; d++)
        p->n *= p->sizes[d];
    return OD_OK;
}

od_status od_act_loss_plan_of(od_opid id, const od_stack *s, od_act_loss_plan *p, od_error *err)
{
    memset(p, 0, sizeof *p);
    const char *name = od_op_schema(od_builtin(id))->name;
    switch (id) {
    case OD_OPID_binary_cross_entropy_backward: p->backward = true; /* fall through */
    case OD_OPID_binary_cross_entropy: p->kind = OD_AL_BCE; return plan_bce(p, s, name, err);
    case OD_OPID_glu_backward: p->backward = true; /* fall through */
    case OD_OPID_glu: p->kind = OD_AL_GLU; return plan_glu(p, s, name, err);
    case OD_OPID_prelu_backward: p->backward = true; /* fall through */
    case OD_OPID_prelu: p->kind = OD_AL_PRELU; return plan_prelu(p, s, name, err);
    default: return od_error_set(err, OD_EINTERNAL, "od_act_loss_plan_of: not one of its operators");
    }
}

od_status od_shape_act_loss(od_opid id, const od_stack *s, od_out_spec *outs, int *nouts, od_error *err)
{
    od_act_loss_plan p;
    od_status st = od_act_loss_plan_of(id, s, &p, err);
    if (st)
        return st;
    const od_tensor *x = p.self;
    *nouts = 1;
    if (p.kind == OD_AL_BCE && !p.backward && (p.reduction == 1 || p.reduction == 2)) {
        od_out_spec_init(&outs[0], x->dtype, x->device, NULL, 0);
    } else if (p.kind == OD_AL_GLU && !p.backward) {
        int64_t sizes[OD_MAX_DIMS];
        memcpy(sizes, x->sizes, (size_t)x->ndim * sizeof *sizes);
        sizes[p.dim] = p.half;
        od_out_spec_init(&outs[0], x->dtype, x->device, sizes, x->ndim);
    } else {
        od_out_spec_init(&outs[0], x->dtype, x->device, x->sizes, x->ndim);
    }
    if (p.kind == OD_AL_PRELU && p.backward) {
        od_out_spec_init(&outs[0], x->dtype, x->device, p.sizes, p.ndim);
        od_out_spec_init(&outs[1], x->dtype, x->device, p.wg_sizes, p.wg_ndim);
        /* bfloat16's shared-weight path answers in the weight's dtype */
        if (x->dtype == OD_BFLOAT16 && od_tensor_numel(p.weight) == 1)
            outs[1].dtype = p.weight->dtype;
        *nouts = 2;
    }
    return OD_OK;
}
