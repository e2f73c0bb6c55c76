/* shape_embedding_bag.c — the shape and dtype function of _embedding_bag,
 * _embedding_bag_forward_only, _embedding_bag_dense_backward and
 * _embedding_bag_per_sample_weights_backward, and the plan their CPU and
 * CUDA kernels share.
 *
 * Invariants: torch 1.13's checks (EmbeddingBag.cpp's check_arguments) and
 * messages in its order, on shapes and dtypes only; what needs the data
 * (offsets[0] == 0, offsets[-1] <= len(indices), 0 <= index < num_weights)
 * is od_embag_check_data's, called by the kernels. The forward's outputs
 * are always all defined: offset2bag [n], or [0] on the CPU's 'sum' fast
 * path as torch leaves it (_embedding_bag_backward rebuilds it), bag_size
 * [nbags] (the count of non-padding indices in 'mean' and 'max', zeros in
 * 'sum', as torch), max_indices [nbags, D] in 'max' (0 for an empty bag),
 * else a copy of bag_size (torch's). Where torch 1.13 crashes or reads
 * garbage (mode outside 0-2, 2-D indices or offsets) the call is refused
 * with a message of our own.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "od_shape.h"

/* checkScalarTypes' name of a tensor type: the legacy torch.*Tensor where
 * there is one, else the Type name (CPUBFloat16Type) */
static void dtype_type_name(od_dtype dt, bool cuda, char *buf, size_t cap)
{
    const char *legacy = NULL;
    switch (dt) {
    case OD_FLOAT32: legacy = "FloatTensor"; break;
    case OD_FLOAT64: legacy = "DoubleTensor"; break;
    case OD_FLOAT16: legacy = "HalfTensor"; break;
    case OD_INT64: legacy = "LongTensor"; break;
    case OD_INT32: legacy = "IntTensor"; break;
    case OD_INT16: legacy = "ShortTensor"; break;
    case OD_INT8: legacy = "CharTensor"; break;
    case OD_UINT8: legacy = "ByteTensor"; break;
    case OD_BOOL: legacy = "BoolTensor"; break;
    default: break;
    }
    if (legacy)
        snprintf(buf, cap, "torch.%s%s", cuda ? "cuda." : "", legacy);
    else
        snprintf(buf, cap, "%s%sType", cuda ? "CUDA" : "CPU", od_dtype_scalar_name(dt));
}

static void type_name(const od_tensor *t, char *buf, size_t cap)
{
    dtype_type_name(t->dtype, t->device.type == OD_DEV_CUDA, buf, cap);
}

/* checkScalarTypes of t, read as dtype dt (promoteIndicesAndOffsets' type) */
static od_status want_dtype(const od_tensor *t, od_dtype dt, const char *arg, bool index, od_error *err)
{
    bool ok = index ? (dt == OD_INT64 || dt == OD_INT32) : (dt == OD_FLOAT16 || dt == OD_FLOAT32 || dt == OD_FLOAT64);
    if (ok)
        return OD_OK;
    char tn[64];
    dtype_type_name(dt, t->device.type == OD_DEV_CUDA, tn, sizeof tn);
    return od_error_set(err, OD_EMISMATCH,
                        "Expected tensor for argument #1 '%s' to have one of the following scalar types: %s; but "
                        "got %s instead (while checking arguments for embedding_bag)",
                        arg, index ? "Long, Int" : "Half, Float, Double", tn);
}

static od_status want_types(const od_tensor *t, const char *arg, bool index, od_error *err)
{
    return want_dtype(t, t->dtype, arg, index, err);
}

static const od_tensor *targ(const od_stack *s, int i)
{
    return i < s->nargs && s->args[i].tag == OD_T_TENSOR ? s->args[i].u.t : NULL;
}

static int64_t iarg(const od_stack *s, int i) { return s->args[i].tag == OD_T_INT ? s->args[i].u.i : 0; }

static od_status same_device(const od_tensor *a, const od_tensor *b, od_error *err)
{
    if (!b || (a->device.type == b->device.type && a->device.index == b->device.index))
        return OD_OK;
    return od_error_set(err, OD_EMISMATCH,
                        "Expected all tensors to be on the same device, but found at least two devices (embedding_bag)");
}

static od_status check_psw(const od_embag_plan *p, od_error *err)
{
    if (!p->psw)
        return OD_OK;
    if (p->mode != OD_EMBAG_SUM)
        return od_error_set(err, OD_EINVAL, "embedding_bag: per_sample_weights only supported with mode='sum'");
    if (p->psw->dtype != p->weight->dtype) {
        char a[64], b[64];
        type_name(p->weight, a, sizeof a);
        type_name(p->psw, b, sizeof b);
        return od_error_set(err, OD_EMISMATCH,
                            "Expected tensor for argument #1 'weight' to have the same type as tensor for argument #1 "
                            "'per_sample_weights'; but type %s does not equal %s (while checking arguments for "
                            "embedding_bag)",
                            a, b);
    }
    if (p->psw->ndim != 1)
        return od_error_set(err, OD_EINVAL,
                            "Expected per_sample_weights.value().dim() == 1 to be true, but got false.  (Could this "
                            "error message be improved?  If so, please report an enhancement request to PyTorch.)");
    if (od_tensor_numel(p->psw) != od_tensor_numel(p->indices))
        return od_error_set(err, OD_EINVAL,
                            "Expected per_sample_weights.value().numel() == indices.numel() to be true, but got false.  "
                            "(Could this error message be improved?  If so, please report an enhancement request to "
                            "PyTorch.)");
    return OD_OK;
}

static od_status index_dims(const od_tensor *indices, const od_tensor *offsets, od_error *err)
{
    if (indices->ndim != 1)
        return od_error_set(err, OD_EINVAL,
                            "embedding_bag: indices has to be a 1D Tensor here (torch.nn.functional.embedding_bag "
                            "flattens a 2D input), but got Tensor of dimension %d",
                            indices->ndim);
    if (offsets && offsets->ndim != 1)
        return od_error_set(err, OD_EINVAL, "embedding_bag: offsets has to be a 1D Tensor, but got Tensor of dimension %d",
                            offsets->ndim);
    return OD_OK;
}

od_status od_embag_plan_of(od_opid id, const od_stack *s, od_embag_plan *p, od_error *err)
{
    memset(p, 0, sizeof *p);
    p->padding_idx = -1;
    od_status st;
    if (id == OD_OPID__embedding_bag || id == OD_OPID__embedding_bag_forward_only) {
        /* (weight, indices, offsets, scale_grad_by_freq, mode, sparse, per_sample_weights,
         *  include_last_offset, padding_idx) */
        p->kind = OD_EMBAG_FWD;
        p->weight = targ(s, 0);
        p->indices = targ(s, 1);
        p->offsets = targ(s, 2);
        p->sgbf = s->args[3].u.b;
        p->mode = (int)iarg(s, 4);
        p->psw = targ(s, 6);
        p->ilo = s->args[7].u.b;
        p->padding_idx = iarg(s, 8);
        if (!p->weight || !p->indices || !p->offsets)
            return od_error_set(err, OD_EINVAL, "embedding_bag: weight, indices and offsets must be tensors");
        /* promoteIndicesAndOffsets runs first: both are read as their
         * promoted type (int64 indices with int8 offsets pass, uint8 with
         * int8 is int16 and refused), which the kernels load from either */
        od_dtype common = od_promote_types(p->indices->dtype, p->offsets->dtype);
        if ((st = want_dtype(p->indices, common, "indices", true, err)) ||
            (st = want_dtype(p->offsets, common, "offsets", true, err)) ||
            (st = want_types(p->weight, "weight", false, err)))
            return st;
        if (p->weight->ndim != 2) {
            if (p->weight->ndim < 2)
                return od_error_set(err, OD_EINVAL,
                                    "Dimension out of range (expected to be in range of [%d, %d], but got 1)",
                                    p->weight->ndim ? -p->weight->ndim : -1, p->weight->ndim ? p->weight->ndim - 1 : 0);
            return od_error_set(err, OD_EINVAL, "embedding_bag: weight has to be a 2D Tensor, but got Tensor of dimension %d",
                                p->weight->ndim);
        }
        if ((st = index_dims(p->indices, p->offsets, err)))
            return st;
        if (p->mode < 0 || p->mode > 2)
            return od_error_set(err, OD_EINVAL, "embedding_bag: mode has to be 0 (sum), 1 (mean) or 2 (max), but got %" PRId64,
                                iarg(s, 4));
        if ((st = check_psw(p, err)))
            return st;
        if (p->ilo && p->offsets->sizes[0] < 1)
            return od_error_set(err, OD_EINVAL, "include_last_offset: number of offset should be at least 1");
        if ((st = same_device(p->weight, p->indices, err)) || (st = same_device(p->weight, p->offsets, err)) ||
            (st = same_device(p->weight, p->psw, err)))
            return st;
        p->n = p->indices->sizes[0];
        p->nbags = p->offsets->sizes[0] - (p->ilo ? 1 : 0);
        p->V = p->weight->sizes[0];
        p->D = p->weight->sizes[1];
        p->dt = p->weight->dtype;
        p->idt = common;
        return OD_OK;
    }
    if (id == OD_OPID__embedding_bag_dense_backward) {
        /* (grad, indices, offset2bag, bag_size, maximum_indices, num_weights, scale_grad_by_freq,
         *  mode, per_sample_weights, padding_idx) */
        p->kind = OD_EMBAG_DENSE_BW;
        p->grad = targ(s, 0);
        p->indices = targ(s, 1);
        p->offset2bag = targ(s, 2);
        p->bag_size = targ(s, 3);
        p->max_indices = targ(s, 4);
        p->V = iarg(s, 5);
        p->sgbf = s->args[6].u.b;
        p->mode = (int)iarg(s, 7);
        p->psw = targ(s, 8);
        p->padding_idx = iarg(s, 9);
        if (!p->grad || !p->indices || !p->offset2bag || !p->bag_size || !p->max_indices)
            return od_error_set(err, OD_EINVAL, "_embedding_bag_dense_backward: every index argument must be a tensor");
        if ((st = want_types(p->indices, "indices", true, err)) ||
            (st = want_types(p->offset2bag, "offset2bag", true, err)) ||
            (st = want_types(p->bag_size, "bag_size", true, err)) ||
            (st = want_types(p->max_indices, "maximum_indices", true, err)))
            return st;
        if (!(p->grad->dtype == OD_FLOAT16 || p->grad->dtype == OD_FLOAT32 || p->grad->dtype == OD_FLOAT64))
            return od_error_set(err, OD_EUNSUPPORTED, "\"embedding_bag_backward\" not implemented for '%s'",
                                od_dtype_scalar_name(p->grad->dtype));
        if (p->grad->ndim != 2)
            return od_error_set(err, OD_EINVAL, "_embedding_bag_dense_backward: grad has to be a 2D Tensor, but got Tensor of dimension %d",
                                p->grad->ndim);
        if ((st = index_dims(p->indices, NULL, err)))
            return st;
        p->n = p->indices->sizes[0];
        p->nbags = p->grad->sizes[0];
        p->D = p->grad->sizes[1];
        if (p->mode < 0 || p->mode > 2)
            return od_error_set(err, OD_EINVAL, "embedding_bag: mode has to be 0 (sum), 1 (mean) or 2 (max), but got %d",
                                p->mode);
        if (p->V < 0)
            return od_error_set(err, OD_EINVAL, "_embedding_bag_dense_backward: num_weights must be >= 0, but got %" PRId64, p->V);
        if (p->mode != OD_EMBAG_MAX) {
            if (p->offset2bag->ndim != 1 || p->offset2bag->sizes[0] != p->n)
                return od_error_set(err, OD_EINVAL,
                                    "_embedding_bag_dense_backward: offset2bag has to hold one bag per index (%" PRId64
                                    "); torch's empty offset2bag is recomputed by _embedding_bag_backward",
                                    p->n);
            if (p->psw && (p->psw->ndim != 1 || p->psw->sizes[0] != p->n))
                return od_error_set(err, OD_EINVAL,
                                    "_embedding_bag_dense_backward: per_sample_weights has to hold one weight per index");
            if (p->psw && p->mode != OD_EMBAG_SUM)
                return od_error_set(err, OD_EINVAL, "mode == MODE_SUM INTERNAL ASSERT FAILED");
            if (p->psw && p->psw->dtype != p->grad->dtype)
                return od_error_set(err, OD_EMISMATCH, "_embedding_bag_dense_backward: per_sample_weights must have grad's dtype");
            if (p->mode == OD_EMBAG_MEAN && (p->bag_size->ndim != 1 || p->bag_size->sizes[0] < p->nbags))
                return od_error_set(err, OD_EINVAL, "_embedding_bag_dense_backward: bag_size has to hold one size per bag");
        } else if (p->max_indices->ndim != 2 || p->max_indices->sizes[0] != p->nbags || p->max_indices->sizes[1] != p->D ||
                   p->bag_size->ndim != 1 || p->bag_size->sizes[0] < p->nbags) {
            return od_error_set(err, OD_EINVAL,
                                "_embedding_bag_dense_backward: mode 'max' needs maximum_indices of grad's shape and one "
                                "bag_size per bag");
        }
        const od_tensor *all[] = {p->indices, p->offset2bag, p->bag_size, p->max_indices, p->psw};
        for (int i = 0; i < 5; i++)
            if ((st = same_device(p->grad, all[i], err)))
                return st;
        p->dt = p->grad->dtype;
        p->idt = p->indices->dtype;
        return OD_OK;
    }
    if (id == OD_OPID__embedding_bag_per_sample_weights_backward) {
        /* (grad, weight, indices, offsets, offset2bag, mode, padding_idx) */
        p->kind = OD_EMBAG_PSW_BW;
        p->grad = targ(s, 0);
        p->weight = targ(s, 1);
        p->indices = targ(s, 2);
        p->offsets = targ(s, 3);
        p->offset2bag = targ(s, 4);
        p->mode = (int)iarg(s, 5);
        p->padding_idx = iarg(s, 6);
        if (!p->grad || !p->weight || !p->indices || !p->offsets || !p->offset2bag)
            return od_error_set(err, OD_EINVAL, "_embedding_bag_per_sample_weights_backward: every argument must be a tensor");
        if (p->mode != OD_EMBAG_SUM)
            return od_error_set(err, OD_EINVAL, "embedding_bag_backward: per_sample_weights only supported for mode='sum'");
        /* torch 1.13's order: promoteIndicesAndOffsets, indices' type, then
         * offset2bag (given, or rebuilt from offsets by index_add_ when
         * empty), each read as the indices' type; offsets' own type is
         * never checked. grad picks the kernel, weight must match it. */
        od_dtype common = od_promote_types(p->indices->dtype, p->offsets->dtype);
        if ((st = want_dtype(p->indices, common, "indices", true, err)))
            return st;
        bool rebuilt = od_tensor_numel(p->indices) != 0 && od_tensor_numel(p->offset2bag) == 0;
        if (!rebuilt && (st = want_types(p->offset2bag, "offset2bag", true, err)))
            return st;
        const char *o2b_tn = od_dtype_scalar_name(p->offset2bag->dtype), *tn = od_dtype_scalar_name(common);
        if (p->offset2bag->dtype != common)
            return rebuilt ? od_error_set(err, OD_EMISMATCH,
                                          "index_add_(): self (%s) and source (%s) must have the same scalar type",
                                          o2b_tn, tn)
                           : od_error_set(err, OD_EMISMATCH, "expected scalar type %s but found %s", tn, o2b_tn);
        od_dtype gt = p->grad->dtype;
        if (!(gt == OD_FLOAT16 || gt == OD_BFLOAT16 || gt == OD_FLOAT32 || gt == OD_FLOAT64))
            return od_error_set(err, OD_EUNSUPPORTED,
                                "\"_embedding_bag_per_sample_weights_backward_cpu\" not implemented for '%s'",
                                od_dtype_scalar_name(gt));
        if (p->weight->dtype != gt)
            return od_error_set(err, OD_EMISMATCH, "expected scalar type %s but found %s", od_dtype_scalar_name(gt),
                                od_dtype_scalar_name(p->weight->dtype));
        if (p->grad->ndim != 2 || p->weight->ndim != 2 || p->grad->sizes[1] != p->weight->sizes[1])
            return od_error_set(err, OD_EINVAL,
                                "_embedding_bag_per_sample_weights_backward: grad [bags, D] and weight [num_weights, D] "
                                "have to be 2D with one D");
        if ((st = index_dims(p->indices, p->offsets, err)))
            return st;
        p->n = p->indices->sizes[0];
        if (!(p->offset2bag->ndim == 1 && (p->offset2bag->sizes[0] == p->n || p->offset2bag->sizes[0] == 0)))
            return od_error_set(err, OD_EINVAL,
                                "_embedding_bag_per_sample_weights_backward: offset2bag has to hold one bag per index");
        const od_tensor *all[] = {p->weight, p->indices, p->offsets, p->offset2bag};
        for (int i = 0; i < 4; i++)
            if ((st = same_device(p->grad, all[i], err)))
                return st;
        p->nbags = p->grad->sizes[0];
        p->V = p->weight->sizes[0];
        p->D = p->weight->sizes[1];
        p->dt = p->grad->dtype;
        p->idt = common;
        return OD_OK;
    }
    return od_error_set(err, OD_EINTERNAL, "od_embag_plan_of: not an embedding_bag operator");
}

static int64_t idx_at(const od_tensor *t, int64_t i)
{
    return od_embag_index_at(od_tensor_data(t), t->dtype, i * t->strides[0]);
}

/* Whether any of t's n indices (1-D, any integer dtype) is outside [0, V): one
 * branch-free pass (the per-element idx_at calls, on one thread, took 14 %
 * of a 262144-index forward's samples); the loop below then finds the
 * first bad one for the message. */
static bool any_outside(const od_tensor *t, int64_t n, int64_t V)
{
    const char *b = od_tensor_data(t);
    int64_t st = t->strides[0];
    bool bad = false;
    if (t->dtype == OD_INT32) {
        const int32_t *x = (const int32_t *)(const void *)b;
        for (int64_t i = 0; i < n; i++)
            bad |= (uint64_t)(int64_t)x[i * st] >= (uint64_t)V;
    } else if (t->dtype != OD_INT64) { /* a small integer type (promoted forward inputs) */
        for (int64_t i = 0; i < n; i++)
            bad |= (uint64_t)od_embag_index_at(b, t->dtype, i * st) >= (uint64_t)V;
    } else {
        const int64_t *x = (const int64_t *)(const void *)b;
        for (int64_t i = 0; i < n; i++)
            bad |= (uint64_t)x[i * st] >= (uint64_t)V;
    }
    return bad;
}

static bool fast_sum(const od_embag_plan *p)
{
    /* torch's is_fast_path: fbgemm's kernel ('sum' and 'mean') and its messages */
    return p->mode != OD_EMBAG_MAX && (p->dt == OD_FLOAT32 || p->dt == OD_FLOAT16) && p->padding_idx < 0 &&
           p->weight->strides[1] == 1 && (!p->psw || p->psw->strides[0] == 1);
}

od_status od_embag_check_data(const od_embag_plan *p, od_error *err)
{
    if (p->kind == OD_EMBAG_DENSE_BW) {
        for (int64_t i = 0; i < p->n; i++) {
            int64_t v = idx_at(p->indices, i), b = idx_at(p->offset2bag, i);
            if (v < 0 || v >= p->V)
                return od_error_set(err, OD_EINVAL, "embedding_bag: Expected idx >= 0 && idx < num_embeddings but found idx to be %" PRId64, v);
            if (p->mode != OD_EMBAG_MAX && (b < 0 || b >= p->nbags))
                return od_error_set(err, OD_EINVAL, "_embedding_bag_dense_backward: offset2bag[%" PRId64 "] = %" PRId64
                                    " is not a bag of grad (%" PRId64 " bags)", i, b, p->nbags);
        }
        if (p->mode == OD_EMBAG_MAX) {
            const od_tensor *m = p->max_indices;
            const char *base = od_tensor_data(m);
            for (int64_t b = 0; b < p->nbags; b++)
                for (int64_t d = 0; d < p->D; d++) {
                    int64_t off = b * m->strides[0] + d * m->strides[1];
                    int64_t v = m->dtype == OD_INT32 ? ((const int32_t *)base)[off] : ((const int64_t *)base)[off];
                    if (idx_at(p->bag_size, b) != 0 && (v < 0 || v >= p->V))
                        return od_error_set(err, OD_EINVAL,
                                            "_embedding_bag_dense_backward: maximum_indices holds %" PRId64
                                            ", outside [0, %" PRId64 ")", v, p->V);
                }
        }
        return OD_OK;
    }
    int64_t no = p->offsets->sizes[0];
    if (no > 0) {
        int64_t o0 = idx_at(p->offsets, 0), on = idx_at(p->offsets, no - 1);
        if (o0 != 0)
            return od_error_set(err, OD_EINVAL,
                                "offsets[0] has to be 0, i.e., the first sequence in the mini-batch has to start from "
                                "position 0. However, got %" PRId64, o0);
        if (on > p->n)
            return od_error_set(err, OD_EINVAL,
                                "offsets[-1] can not be greater than input's length %" PRId64 " but got offsets[-1] of %" PRId64,
                                p->n, on);
        for (int64_t k = 1; k < no; k++) {
            int64_t a = idx_at(p->offsets, k - 1), b = idx_at(p->offsets, k);
            if (b < a)
                return od_error_set(err, OD_EINVAL,
                                    "embedding_bag: offsets have to be non-decreasing, but offsets[%" PRId64 "] = %" PRId64
                                    " > offsets[%" PRId64 "] = %" PRId64, k - 1, a, k, b);
        }
    }
    if (!any_outside(p->indices, p->n, p->V))
        return OD_OK;
    for (int64_t i = 0; i < p->n; i++) {
        int64_t v = idx_at(p->indices, i);
        if (v >= 0 && v < p->V)
            continue;
        if (p->kind == OD_EMBAG_FWD && fast_sum(p))
            return od_error_set(err, OD_EINVAL, "0 <= idx && idx < data_size. Index %" PRId64
                                " is out of bounds: %" PRId64 ", range 0 to %" PRId64, i, v, p->V);
        return od_error_set(err, OD_EINVAL,
                            "embedding_bag: Expected idx >= 0 && idx < num_embeddings but found idx to be %" PRId64, v);
    }
    return OD_OK;
}

od_status od_shape_embedding_bag(od_opid id, const od_stack *s, od_out_spec *outs, int *nouts, od_error *err)
{
    od_embag_plan p;
    od_status st = od_embag_plan_of(id, s, &p, err);
    if (st)
        return st;
    const od_tensor *dev = p.kind == OD_EMBAG_FWD ? p.weight : p.grad;
    for (int i = 0; i < 4; i++) {
        memset(&outs[i], 0, sizeof outs[i]);
        outs[i].device = dev->device;
        outs[i].alias_of = -1;
        outs[i].dtype = p.idt;
    }
    if (p.kind == OD_EMBAG_DENSE_BW) {
        outs[0].dtype = p.dt;
        outs[0].ndim = 2;
        outs[0].sizes[0] = p.V;
        outs[0].sizes[1] = p.D;
        *nouts = 1;
        return OD_OK;
    }
    if (p.kind == OD_EMBAG_PSW_BW) {
        outs[0].dtype = p.dt;
        outs[0].ndim = 1;
        outs[0].sizes[0] = p.n;
        *nouts = 1;
        return OD_OK;
    }
    outs[0].dtype = p.dt;
    outs[0].ndim = 2;
    outs[0].sizes[0] = p.nbags;
    outs[0].sizes[1] = p.D;
    outs[1].ndim = 1;
    /* ATen's make_offset2bag_out skips it, leaving it empty, on the CPU's 'sum' fast path */
    outs[1].sizes[0] = p.mode == OD_EMBAG_SUM && dev->device.type == OD_DEV_CPU && fast_sum(&p) ? 0 : p.n;
    outs[2].ndim = 1;
    outs[2].sizes[0] = p.nbags;
    outs[3].ndim = p.mode == OD_EMBAG_MAX ? 2 : 1;
    outs[3].sizes[0] = p.nbags;
    outs[3].sizes[1] = p.D;
    *nouts = 4;
    return OD_OK;
}
