/* shape_search.c — the shape and dtype function of searchsorted (.Tensor,
 * .Scalar) and bucketize (.Tensor, .Scalar), and the plan their CPU and
 * CUDA kernels share.
 *
 * Invariants: the checks are ATen 1.13's searchsorted_pre_check in its
 * order and with its text (bucketize's own 1-D check first); the result has
 * the input's shape and int64 (int32 with out_int32) dtype. Boundaries and
 * input are compared in their result_type (a Scalar input counts as a
 * wrapped number), as searchsorted_maybe_trim_input_tensors promotes them;
 * bool is refused as the kernel's dispatch does. Sorter values are data: the
 * kernels check them. Nothing here touches data or allocates.
 */
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "od_shape.h"

static od_status bad(const char *what, od_error *err)
{
    return od_error_set(err, OD_EINVAL, "searchsorted(): argument '%s' has the wrong type", what);
}

od_status od_search_plan_of(od_opid id, const od_stack *s, od_search_plan *p, od_error *err)
{
    memset(p, 0, sizeof *p);
    bool bucket = id == OD_OPID_bucketize_Tensor || id == OD_OPID_bucketize_Scalar;
    bool scalar = id == OD_OPID_searchsorted_Scalar || id == OD_OPID_bucketize_Scalar;
    /* bucketize(self, boundaries, *, out_int32, right);
     * searchsorted(sorted_sequence, self, *, out_int32, right, side, sorter) */
    int ib = bucket ? 1 : 0, ii = bucket ? 0 : 1;
    if (s->nargs < (bucket ? 4 : 6))
        return od_error_set(err, OD_EINVAL, "%s(): too few arguments", bucket ? "bucketize" : "searchsorted");
    const od_value *bv = &s->args[ib], *iv = &s->args[ii];
    if (bv->tag != OD_T_TENSOR || !bv->u.t)
        return bad(bucket ? "boundaries" : "sorted_sequence", err);
    p->boundaries = bv->u.t;
    if (scalar) {
        if (!od_value_is_number(iv))
            return bad("self", err);
        p->scalar = *iv;
    } else {
        if (iv->tag != OD_T_TENSOR || !iv->u.t)
            return bad("self", err);
        p->input = iv->u.t;
    }
    const od_value *oi = &s->args[2], *rt = &s->args[3];
    if (oi->tag != OD_T_BOOL || rt->tag != OD_T_BOOL)
        return bad(oi->tag != OD_T_BOOL ? "out_int32" : "right", err);
    p->out_int32 = oi->u.b;
    p->right = rt->u.b;
    const od_tensor *b = p->boundaries, *in = p->input;
    if (bucket && b->ndim != 1)
        return od_error_set(err, OD_EINVAL, "boundaries tensor must be 1 dimension, but got dim(%d)", b->ndim);
    if (!bucket) {
        const od_value *side = &s->args[4], *so = &s->args[5];
        if (side->tag == OD_T_STRING && side->u.s) {
            bool l = !strcmp(side->u.s, "left"), r = !strcmp(side->u.s, "right");
            if (!l && !r)
                return od_error_set(err, OD_EINVAL,
                                    "torch.searchsorted(): side can only be 'left' or 'right' but got %s", side->u.s);
            if (p->right && !r)
                return od_error_set(err, OD_EINVAL,
                                    "torch.searchsorted(): side and right can't be set to opposites, got side of %s "
                                    "while right was True",
                                    side->u.s);
            p->right = r;
        } else if (side->tag != OD_T_NONE) {
            return bad("side", err);
        }
        if (so->tag == OD_T_TENSOR && so->u.t)
            p->sorter = so->u.t;
        else if (so->tag != OD_T_NONE)
            return bad("sorter", err);
    }
    char da[32], db[32];
    if (in && !od_device_eq(b->device, in->device)) {
        od_device_print(b->device, da, sizeof da);
        od_device_print(in->device, db, sizeof db);
        return od_error_set(err, OD_EMISMATCH,
                            "torch.searchsorted(): boundaries and input value tensors should have same device type, "
                            "but got boundaries tensor device type %s and input value tensor device type %s",
                            da, db);
    }
    const od_tensor *so = p->sorter;
    if (so) {
        if (!od_device_eq(so->device, b->device)) {
            od_device_print(so->device, da, sizeof da);
            od_device_print(b->device, db, sizeof db);
            return od_error_set(err, OD_EMISMATCH,
                                "torch.searchsorted(): sorter and boundary tensors should have same device type, but "
                                "got sorter tensor device type %s and input value tensor device type %s",
                                da, db);
        }
        if (so->ndim != b->ndim || memcmp(so->sizes, b->sizes, sizeof(int64_t) * (size_t)b->ndim)) {
            char a[256], c[256];
            od_shape_print(b->sizes, b->ndim, a, sizeof a);
            od_shape_print(so->sizes, so->ndim, c, sizeof c);
            return od_error_set(err, OD_EINVAL,
                                "torch.searchsorted(): boundary and sorter must have the same size, but got boundary "
                                "tensor %sand got sorter tensor %s",
                                a, c);
        }
        if (so->dtype != OD_INT64)
            return od_error_set(err, OD_EMISMATCH,
                                "torch.searchsorted(): sorter must be a tensor of long dtype but got dtype %s",
                                od_dtype_scalar_name(so->dtype));
    }
    int in_ndim = in ? in->ndim : 0;
    if (!(in_ndim > 0 || b->ndim == 1))
        return od_error_set(err, OD_EINVAL,
                            "torch.searchsorted(): input value can be a scalar only when boundaries tensor dimension "
                            "is 1, but we got boundaries tensor dim(%d) and input value's dim(%d) numel(1)",
                            b->ndim, in_ndim);
    if (b->ndim == 0)
        return od_error_set(err, OD_EINVAL,
                            "torch.searchsorted(): boundaries tensor should have positive dimension, but got 0 "
                            "dimension");
    if (b->ndim != 1) {
        bool match = in_ndim == b->ndim;
        for (int k = 0; match && k < b->ndim - 1; k++)
            match = in->sizes[k] == b->sizes[k];
        if (!match) {
            char a[256], c[256];
            od_shape_print(b->sizes, b->ndim, a, sizeof a);
            od_shape_print(in->sizes, in->ndim, c, sizeof c);
            return od_error_set(err, OD_EINVAL,
                                "torch.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 "
                                "dimensions of boundaries tensor and input value tensor must match, but we got "
                                "boundaries tensor %s and input value tensor %s",
                                a, c);
        }
    }
    if (p->out_int32 && b->sizes[b->ndim - 1] >= INT_MAX)
        return od_error_set(err, OD_EINVAL,
                            "torch.searchsorted(): the size of boundaries' last dimension should be less than %d, but "
                            "we got %" PRId64,
                            INT_MAX, b->sizes[b->ndim - 1]);
    od_result_arg ra[2] = {{b, 0}, {in, OD_SCALAR_FLOAT}};
    if (!in)
        ra[1].scalar_kind = p->scalar.tag == OD_T_DOUBLE ? OD_SCALAR_FLOAT
                          : p->scalar.tag == OD_T_BOOL   ? OD_SCALAR_BOOL
                                                         : OD_SCALAR_INT;
    p->common = od_result_type(ra, 2);
    p->n = in ? od_tensor_numel(in) : 1;
    if (p->common == OD_BOOL && p->n > 0) /* an empty input returns before the dispatch */
        return od_error_set(err, OD_EUNSUPPORTED, "\"searchsorted_out_cpu\" not implemented for 'Bool'");
    p->len = b->sizes[b->ndim - 1];
    p->inner = in && in->ndim > 0 ? in->sizes[in->ndim - 1] : 1;
    return OD_OK;
}

od_status od_shape_search(od_opid id, const od_stack *s, od_out_spec *outs, int *nouts, od_error *err)
{
    od_search_plan p;
    od_status st = od_search_plan_of(id, s, &p, err);
    if (st)
        return st;
    memset(&outs[0], 0, sizeof outs[0]);
    outs[0].dtype = p.out_int32 ? OD_INT32 : OD_INT64;
    outs[0].device = p.boundaries->device;
    outs[0].ndim = p.input ? p.input->ndim : 0;
    if (outs[0].ndim)
        memcpy(outs[0].sizes, p.input->sizes, sizeof(int64_t) * (size_t)outs[0].ndim);
    outs[0].alias_of = -1;
    *nouts = 1;
    return OD_OK;
}
