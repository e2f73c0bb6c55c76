/* shape_loss.c — the shape and dtype function of nll_loss_forward,
 * nll_loss2d_forward, nll_loss_backward and nll_loss2d_backward, and the
 * plan their CPU and CUDA kernels share.
 *
 * Invariants: the checks run in torch 1.13's order with its messages (each
 * operator's own: the 2d ones differ in spacing and in the target dtypes
 * they take): the meta checks on ranks and sizes first, then the CPU
 * kernel's dtype dispatch on self, then weight, target, grad_output and
 * total_weight's data_ptr<scalar_t> checks. Target values are not read here
 * (the kernels check each against the classes as they read it). reduction
 * is ATen's int: 0 none, 1 mean, anything else a sum (as its kernels read
 * it). Nothing here touches data or allocates.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "od_shape.h"

/* data_ptr<scalar_t>()'s refusal of t (borrowed, may be NULL) */
static od_status check_scalar(const od_tensor *t, od_dtype want, od_error *err)
{
    if (!t || t->dtype == want)
        return OD_OK;
    return od_error_set(err, OD_EMISMATCH, "expected scalar type %s but found %s", od_dtype_scalar_name(want),
                        od_dtype_scalar_name(t->dtype));
}

static od_status check_same_device(const char *op, const od_tensor *a, const od_tensor *b, od_error *err)
{
    if (!b || od_device_eq(a->device, b->device))
        return OD_OK;
    char da[32], db[32];
    od_device_print(a->device, da, sizeof da);
    od_device_print(b->device, db, sizeof db);
    return od_error_set(err, OD_EMISMATCH,
                        "%s(): Expected all tensors to be on the same device, but found at least two devices, %s and %s!",
                        op, da, db);
}

/* The 1-D operators' meta checks (nll_loss_forward's and _backward's). */
static od_status check_1d(od_nll_plan *p, od_error *err)
{
    const od_tensor *x = p->self, *t = p->target;
    char a[256], b[256];
    if (x->ndim < 1 || x->ndim > 2)
        return od_error_set(err, OD_EINVAL, "input tensor should be 1D or 2D");
    if (t->ndim > 1)
        return od_error_set(err, OD_EINVAL, "0D or 1D target tensor expected, multi-target not supported");
    bool no_batch_dim = x->ndim == 1 && t->ndim == 0;
    if (!no_batch_dim) {
        if (t->ndim < 1)
            return od_error_set(err, OD_EINVAL, "Dimension specified as 0 but tensor has no dimensions");
        if (x->sizes[0] != t->sizes[0]) {
            od_shape_print(x->sizes, x->ndim, a, sizeof a);
            od_shape_print(t->sizes, t->ndim, b, sizeof b);
            return od_error_set(err, OD_EMISMATCH, "size mismatch (got input: %s, target: %s)", a, b);
        }
    }
    p->classes = x->sizes[x->ndim - 1];
    p->batch = x->ndim == 2 ? x->sizes[0] : 1;
    p->map = 1;
    if (!p->backward) {
        const od_tensor *w = p->weight;
        if (w && !(w->ndim == 1 && od_tensor_numel(w) == p->classes)) {
            od_shape_print(w->sizes, w->ndim, a, sizeof a);
            return od_error_set(err, OD_EMISMATCH,
                                "weight tensor should be defined either for all %" PRId64
                                " classes or no classes but got weight tensor of shape: %s",
                                p->classes, a);
        }
        return OD_OK;
    }
    if (od_tensor_numel(p->total_weight) != 1) {
        od_shape_print(p->total_weight->sizes, p->total_weight->ndim, a, sizeof a);
        return od_error_set(err, OD_EMISMATCH,
                            "expected total_weight to be a  single element tensor, got: %s (%" PRId64 " elements)", a,
                            od_tensor_numel(p->total_weight));
    }
    if (p->weight && od_tensor_numel(p->weight) != p->classes)
        return od_error_set(err, OD_EMISMATCH, "weight tensor should be defined either for all or no classes");
    const od_tensor *g = p->grad_output;
    if (p->reduction == 0 && x->ndim == 2) {
        if (g->ndim != 1 || g->sizes[0] != p->batch)
            return od_error_set(err, OD_EMISMATCH,
                                "Expected a tensor of dimension 1 and tensor.size[0] == %" PRId64
                                " but got: dimension %d and tensor.size[0] = %" PRId64,
                                p->batch, g->ndim, g->ndim > 0 ? g->sizes[0] : (int64_t)1);
    } else if (g->ndim > 1 || od_tensor_numel(g) != 1) {
        od_shape_print(g->sizes, g->ndim, a, sizeof a);
        return od_error_set(err, OD_EMISMATCH, "Expected a single element grad_output tensor, but got: %s", a);
    }
    return OD_OK;
}

/* check_inputs_nll_loss2d, and the backward's grad_output checks. */
static od_status check_2d(od_nll_plan *p, od_error *err)
{
    const od_tensor *x = p->self, *t = p->target;
    char a[256], b[256];
    if (t->ndim != 3)
        return od_error_set(err, OD_EINVAL,
                            "only batches of spatial targets supported (3D tensors) but got targets of dimension: %d",
                            t->ndim);
    if (x->ndim != 4)
        return od_error_set(err, OD_EINVAL,
                            "only batches of spatial inputs supported (4D tensors), but got input of dimension: %d",
                            x->ndim);
    if (p->weight && od_tensor_numel(p->weight) != x->sizes[1])
        return od_error_set(err, OD_EMISMATCH, "weight tensor should be defined either for all or no classes");
    od_shape_print(x->sizes, x->ndim, a, sizeof a);
    od_shape_print(t->sizes, t->ndim, b, sizeof b);
    if (x->sizes[0] != t->sizes[0] || x->sizes[2] != t->sizes[1] || x->sizes[3] != t->sizes[2])
        return od_error_set(err, OD_EMISMATCH, "size mismatch (got input: %s , target: %s", a, b);
    p->batch = x->sizes[0];
    p->classes = x->sizes[1];
    p->map = x->sizes[2] * x->sizes[3];
    if (!p->backward)
        return OD_OK;
    const od_tensor *g = p->grad_output, *tw = p->total_weight;
    if (od_tensor_numel(tw) != 1) {
        od_shape_print(tw->sizes, tw->ndim, a, sizeof a);
        return od_error_set(err, OD_EMISMATCH,
                            "expected total_weight to be a single element tensor, got: %s (%" PRId64 " elements)", a,
                            od_tensor_numel(tw));
    }
    od_shape_print(g->sizes, g->ndim, a, sizeof a);
    if (p->reduction == 0) {
        if (g->ndim != 3)
            return od_error_set(err, OD_EMISMATCH,
                                "grad_output must have same dimension as target (3) but got dimension: %s", a);
        if (g->sizes[0] != t->sizes[0] || g->sizes[1] != t->sizes[1] || g->sizes[2] != t->sizes[2])
            return od_error_set(err, OD_EMISMATCH, "size mismatch (got grad_output: %s target: %s", a, b);
    } else if (g->ndim > 1 || od_tensor_numel(g) != 1) {
        return od_error_set(err, OD_EMISMATCH, "Expected a single element grad_output tensor, but got: %s", a);
    }
    return OD_OK;
}

od_status od_nll_plan_of(od_opid id, const od_stack *s, od_nll_plan *p, od_error *err)
{
    memset(p, 0, sizeof *p);
    p->backward = id == OD_OPID_nll_loss_backward || id == OD_OPID_nll_loss2d_backward;
    p->two_d = id == OD_OPID_nll_loss2d_forward || id == OD_OPID_nll_loss2d_backward;
    const char *name = od_op_schema(od_builtin(id))->name;
    int k = p->backward ? 1 : 0; /* self's position */
    od_status st;
    if ((p->backward && (st = od_shape_arg_tensor(s, 0, name, "grad_output", &p->grad_output, false, err))) ||
        (st = od_shape_arg_tensor(s, k, name, "self", &p->self, false, err)) ||
        (st = od_shape_arg_tensor(s, k + 1, name, "target", &p->target, false, err)) ||
        (st = od_shape_arg_tensor(s, k + 2, name, "weight", &p->weight, true, err)) ||
        (st = od_shape_arg_int(s, k + 3, name, "reduction", &p->reduction, err)) ||
        (st = od_shape_arg_int(s, k + 4, name, "ignore_index", &p->ignore_index, err)) ||
        (p->backward && (st = od_shape_arg_tensor(s, 6, name, "total_weight", &p->total_weight, false, err))))
        return st;
    const od_tensor *all[4] = {p->target, p->weight, p->grad_output, p->total_weight};
    for (int i = 0; i < 4; i++)
        if ((st = check_same_device(name, p->self, all[i], err)))
            return st;
    if ((st = p->two_d ? check_2d(p, err) : check_1d(p, err)))
        return st;
    p->per_element = p->reduction == 0 && (p->two_d || p->self->ndim == 2);
    od_dtype dt = p->self->dtype;
    if (dt != OD_FLOAT32 && dt != OD_FLOAT64 && dt != OD_BFLOAT16)
        return od_error_set(err, OD_EUNSUPPORTED, "\"%s\" not implemented for '%s'",
                            p->backward ? (p->two_d ? "nll_loss2d_backward_out_frame" : "nll_loss_backward_out_frame")
                                        : (p->two_d ? "nll_loss2d_forward_out_frame" : "nll_loss_out_frame"),
                            od_dtype_scalar_name(dt));
    if ((st = check_scalar(p->weight, dt, err)))
        return st;
    /* the reducing forward returns before it reads an empty target */
    bool reads_target = p->backward || p->per_element || od_tensor_numel(p->target) > 0;
    if (reads_target && !(p->target->dtype == OD_UINT8 && !p->two_d) && (st = check_scalar(p->target, OD_INT64, err)))
        return st;
    if ((st = check_scalar(p->grad_output, dt, err)) || (st = check_scalar(p->total_weight, dt, err)))
        return st;
    return OD_OK;
}

od_status od_shape_nll_loss(od_opid id, const od_stack *s, od_out_spec *outs, int *nouts, od_error *err)
{
    od_nll_plan p;
    od_status st = od_nll_plan_of(id, s, &p, err);
    if (st)
        return st;
    const od_tensor *x = p.self;
    if (p.backward) {
        od_out_spec_init(&outs[0], x->dtype, x->device, x->sizes, x->ndim);
        *nouts = 1;
        return OD_OK;
    }
    int64_t sizes[3] = {p.batch, 0, 0};
    int nd = 0;
    if (p.per_element) {
        nd = p.two_d ? 3 : 1;
        if (p.two_d) {
            sizes[1] = x->sizes[2];
            sizes[2] = x->sizes[3];
        }
    }
    od_out_spec_init(&outs[0], x->dtype, x->device, sizes, nd);
    od_out_spec_init(&outs[1], x->dtype, x->device, NULL, 0);
    *nouts = 2;
    return OD_OK;
}
