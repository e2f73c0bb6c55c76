/* shape_index.c — shape and dtype functions of the indexing family: gather,
 * scatter (src / value / reduce / value_reduce), scatter_add,
 * scatter_reduce.two, masked_fill(_), take, flip, and nonzero's refusal on
 * Meta.
 *
 * Invariants: the checks follow PyTorch 1.13's meta functions and
 * ScatterGatherChecks.h in their order (dim wrap, index dtype, src dtype,
 * ranks, sizes, reduce name) and with their text; an empty index skips the
 * scatter checks as torch does. Index values are data: the kernels check
 * them (od_scatter_check_index gives the one message). Nothing here touches
 * tensor data or allocates; arguments are borrowed from the stack.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "od_shape.h"

static od_status arg_tensor(const od_stack *s, int i, const char *op, const char *name, od_tensor **out,
                            od_error *err)
{
    if (i >= s->nargs || s->args[i].tag != OD_T_TENSOR || !s->args[i].u.t)
        return od_error_set(err, OD_EINVAL, "%s(): argument '%s' must be a Tensor", op, name);
    *out = s->args[i].u.t;
    return OD_OK;
}

static od_status same_device(const char *op, const od_tensor *a, const od_tensor *b, od_error *err)
{
    if (!b || od_device_eq(a->device, b->device))
        return OD_OK;
    char da[32], db[32];
    od_device_print(a->device, da, sizeof da);
    od_device_print(b->device, db, sizeof db);
    return od_error_set(err, OD_EMISMATCH,
                        "%s(): Expected all tensors to be on the same device, but found at least two "
                        "devices, %s and %s!",
                        op, da, db);
}

/* ensure_nonempty_dim / ensure_nonempty_size of ScatterGatherChecks.h: a
 * 0-dim tensor counts as one dim of size 1. */
static int ne_dim(const od_tensor *t) { return t->ndim > 0 ? t->ndim : 1; }

static od_status ne_size(const od_tensor *t, int d, int64_t *out, od_error *err)
{
    if (t->ndim == 0) {
        *out = 1;
        return OD_OK;
    }
    int w;
    od_status st = od_wrap_dim(d, t->ndim, &w, err);
    if (!st)
        *out = t->sizes[w];
    return st;
}

static od_status parse_reduce(const od_value *v, bool new_options, od_scatter_reduce *out, od_error *err)
{
    const char *r = v->tag == OD_T_STRING && v->u.s ? v->u.s : "";
    static const struct {
        const char *name;
        bool new_options;
        od_scatter_reduce r;
    } names[] = {
        {"add", false, OD_SCR_SUM},   {"multiply", false, OD_SCR_PROD}, {"sum", true, OD_SCR_SUM},
        {"prod", true, OD_SCR_PROD},  {"mean", true, OD_SCR_MEAN},      {"amax", true, OD_SCR_AMAX},
        {"amin", true, OD_SCR_AMIN},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (names[i].new_options == new_options && !strcmp(r, names[i].name)) {
            *out = names[i].r;
            return OD_OK;
        }
    return od_error_set(err, OD_EINVAL,
                        new_options ? "reduce argument must be either sum, prod, mean, amax or amin."
                                    : "reduce argument must be either add or multiply.");
}

od_status od_scatter_parse(od_opid id, const od_stack *s, od_scatter_info *info, od_error *err)
{
    memset(info, 0, sizeof *info);
    info->include_self = true;
    bool has_src = false, has_value = false, new_options = false;
    int reduce_arg = -1;
    const char *name = "scatter";
    switch (id) {
    case OD_OPID_gather: info->gather = true; name = "gather"; break;
    case OD_OPID_scatter_src: has_src = true; break;
    case OD_OPID_scatter_value: has_value = true; break;
    case OD_OPID_scatter_reduce: has_src = true; reduce_arg = 4; break;
    case OD_OPID_scatter_value_reduce: has_value = true; reduce_arg = 4; break;
    case OD_OPID_scatter_add: has_src = true; info->reduce = OD_SCR_SUM; name = "scatter_add"; break;
    case OD_OPID_scatter_reduce_two:
        has_src = true;
        reduce_arg = 4;
        new_options = true;
        name = "scatter_reduce";
        break;
    default:
        return od_error_set(err, OD_EINTERNAL, "od_scatter_parse: not a gather/scatter operator");
    }
    int64_t dim = 0;
    od_status st;
    if ((st = arg_tensor(s, 0, name, "self", &info->self, err)) ||
        (st = od_shape_arg_int(s, 1, name, "dim", &dim, err)) ||
        (st = arg_tensor(s, 2, name, "index", &info->index, err)))
        return st;
    if (has_src && (st = arg_tensor(s, 3, name, "src", &info->src, err)))
        return st;
    if (has_value) {
        if (s->nargs < 4 || !od_value_is_number(&s->args[3]))
            return od_error_set(err, OD_EINVAL, "%s(): argument 'value' must be a Number", name);
        info->value = s->args[3];
    }
    if (reduce_arg >= 0 && (reduce_arg >= s->nargs || s->args[reduce_arg].tag != OD_T_STRING))
        return od_error_set(err, OD_EINVAL, "%s(): argument 'reduce' must be str", name);
    if (id == OD_OPID_scatter_reduce_two && s->nargs > 5) {
        const od_value *v = &s->args[5];
        if (v->tag != OD_T_BOOL && v->tag != OD_T_INT)
            return od_error_set(err, OD_EINVAL, "%s(): argument 'include_self' must be bool", name);
        info->include_self = v->tag == OD_T_BOOL ? v->u.b : v->u.i != 0;
    }
    const od_tensor *self = info->self, *index = info->index, *src = info->src;
    int d;
    if ((st = od_wrap_dim(dim, self->ndim, &d, err)))
        return st;
    info->dim = d;
    int64_t n = od_tensor_numel(index);
    if (n != 0 && index->dtype != OD_INT64)
        return od_error_set(err, OD_EMISMATCH, "%s(): Expected dtype int64 for index",
                            info->gather ? "gather" : "scatter");
    if (src && src->dtype != self->dtype)
        return od_error_set(err, OD_EMISMATCH, "scatter(): Expected self.dtype to be equal to src.dtype");
    if ((st = same_device(name, self, index, err)) || (st = same_device(name, self, src, err)))
        return st;
    char a[256], b[256], c[256];
    if (info->gather) {
        if (n == 0)
            return OD_OK;
        if (ne_dim(self) != ne_dim(index))
            return od_error_set(err, OD_EMISMATCH,
                                "Index tensor must have the same number of dimensions as input tensor");
        for (int k = 0; k < ne_dim(self); k++) {
            int64_t is, ss;
            if (k == d)
                continue;
            if ((st = ne_size(index, k, &is, err)) || (st = ne_size(self, k, &ss, err)))
                return st;
            if (is > ss) {
                od_shape_print(index->sizes, index->ndim, a, sizeof a);
                od_shape_print(self->sizes, self->ndim, b, sizeof b);
                return od_error_set(err, OD_EMISMATCH,
                                    "Size does not match at dimension %d expected index %s to be smaller "
                                    "than self %s apart from dimension %d",
                                    k, a, b, d);
            }
        }
        return OD_OK;
    }
    if (n != 0) {
        if (ne_dim(self) != ne_dim(index))
            return od_error_set(err, OD_EMISMATCH,
                                "Index tensor must have the same number of dimensions as self tensor");
        if (src && ne_dim(src) != ne_dim(index))
            return od_error_set(err, OD_EMISMATCH,
                                "Index tensor must have the same number of dimensions as src tensor");
        bool wrong = false;
        for (int k = 0; k < ne_dim(self) && !wrong; k++) {
            int64_t is, ss;
            if ((st = ne_size(index, k, &is, err)) || (st = ne_size(self, k, &ss, err)))
                return st;
            wrong = k != d && is > ss;
        }
        for (int k = 0; src && k < ne_dim(self) && !wrong; k++) {
            int64_t is, ss;
            if ((st = ne_size(index, k, &is, err)) || (st = ne_size(src, k, &ss, err)))
                return st;
            wrong = is > ss;
        }
        if (wrong) {
            od_shape_print(index->sizes, index->ndim, a, sizeof a);
            od_shape_print(self->sizes, self->ndim, b, sizeof b);
            if (!src)
                return od_error_set(err, OD_EMISMATCH,
                                    "Expected index %s to be smaller than self %s apart from dimension %d", a,
                                    b, d);
            od_shape_print(src->sizes, src->ndim, c, sizeof c);
            return od_error_set(err, OD_EMISMATCH,
                                "Expected index %s to be smaller than self %s apart from dimension %d and "
                                "to be smaller size than src %s",
                                a, b, d, c);
        }
    }
    if (reduce_arg >= 0 && (st = parse_reduce(&s->args[reduce_arg], new_options, &info->reduce, err)))
        return st;
    return OD_OK;
}

od_status od_scatter_check_index(const od_scatter_info *info, int64_t value, od_error *err)
{
    int64_t size = info->self->ndim > 0 ? info->self->sizes[info->dim] : 1;
    if (value >= 0 && value < size)
        return OD_OK;
    return od_error_set(err, OD_EINVAL, "index %" PRId64 " is out of bounds for dimension %d with size %" PRId64,
                        value, info->dim, size);
}

od_status od_shape_scatter(od_opid id, const od_stack *s, od_out_spec *outs, int *nouts, od_error *err)
{
    od_scatter_info info;
    od_status st = od_scatter_parse(id, s, &info, err);
    if (st)
        return st;
    const od_tensor *shape_of = info.gather ? info.index : info.self;
    memset(&outs[0], 0, sizeof outs[0]);
    outs[0].dtype = info.self->dtype;
    outs[0].device = info.self->device;
    outs[0].ndim = shape_of->ndim;
    if (shape_of->ndim > 0)
        memcpy(outs[0].sizes, shape_of->sizes, sizeof(int64_t) * (size_t)shape_of->ndim);
    outs[0].alias_of = -1;
    *nouts = 1;
    return OD_OK;
}

/* ---- masked_fill, take --------------------------------------------------------- */

od_status od_shape_masked_fill(od_opid id, const od_stack *s, od_out_spec *outs, int *nouts, od_error *err)
{
    od_tensor *self = NULL, *mask = NULL, *value = NULL;
    od_status st;
    if ((st = arg_tensor(s, 0, "masked_fill", "self", &self, err)) ||
        (st = arg_tensor(s, 1, "masked_fill", "mask", &mask, err)))
        return st;
    bool inplace = id == OD_OPID_masked_fill__Scalar || id == OD_OPID_masked_fill__Tensor;
    if (id == OD_OPID_masked_fill_Tensor || id == OD_OPID_masked_fill__Tensor) {
        if ((st = arg_tensor(s, 2, "masked_fill", "value", &value, err)))
            return st;
    } else if (s->nargs < 3 || !od_value_is_number(&s->args[2])) {
        return od_error_set(err, OD_EINVAL, "masked_fill(): argument 'value' must be a Number");
    }
    int64_t sizes[OD_MAX_DIMS];
    int nd = 0;
    if (inplace) {
        /* ATen checks the value first, then iterates over self and mask:
         * self is tensor a, and mask may not broadcast self */
        if (value && value->ndim != 0)
            return od_error_set(err, OD_EINVAL,
                                "masked_fill_ only supports a 0-dimensional value tensor, but got tensor with "
                                "%d dimension(s).",
                                value->ndim);
        if ((st = od_broadcast_into(self->sizes, self->ndim, mask->sizes, mask->ndim, err)))
            return st;
    } else {
        /* expand_outplace(mask, self): the message names mask a, self b */
        if ((st = od_broadcast_shapes(mask->sizes, mask->ndim, self->sizes, self->ndim, sizes, &nd, err)))
            return st;
    }
    if ((st = same_device("masked_fill", self, mask, err)))
        return st;
    if (value && value->ndim != 0)
        return od_error_set(err, OD_EINVAL,
                            "masked_fill_ only supports a 0-dimensional value tensor, but got tensor with %d "
                            "dimension(s).",
                            value->ndim);
    if (value && value->device.type != OD_DEV_CPU && (st = same_device("masked_fill", self, value, err)))
        return st;
    if (!value && (st = od_scalar_check_fits(&s->args[2], self->dtype, err)))
        return st;
    memset(&outs[0], 0, sizeof outs[0]);
    outs[0].dtype = self->dtype;
    outs[0].device = self->device;
    outs[0].ndim = nd;
    if (nd > 0)
        memcpy(outs[0].sizes, sizes, sizeof(int64_t) * (size_t)nd);
    outs[0].alias_of = inplace ? 0 : -1;
    *nouts = 1;
    return OD_OK;
}

od_status od_shape_take(od_opid id, const od_stack *s, od_out_spec *outs, int *nouts, od_error *err)
{
    (void)id;
    od_tensor *self = NULL, *index = NULL;
    od_status st;
    if ((st = arg_tensor(s, 0, "take", "self", &self, err)) || (st = arg_tensor(s, 1, "take", "index", &index, err)))
        return st;
    if (index->dtype != OD_INT64)
        return od_error_set(err, OD_EMISMATCH, "take(): Expected a long tensor for index, but got %s",
                            od_dtype_scalar_name(index->dtype));
    if ((st = same_device("take", self, index, err)))
        return st;
    if (od_tensor_numel(self) == 0 && od_tensor_numel(index) != 0)
        return od_error_set(err, OD_EINVAL, "take(): tried to take from an empty tensor");
    memset(&outs[0], 0, sizeof outs[0]);
    outs[0].dtype = self->dtype;
    outs[0].device = self->device;
    outs[0].ndim = index->ndim;
    if (index->ndim > 0)
        memcpy(outs[0].sizes, index->sizes, sizeof(int64_t) * (size_t)index->ndim);
    outs[0].alias_of = -1;
    *nouts = 1;
    return OD_OK;
}

od_status od_take_check_index(int64_t v, int64_t numel, int64_t *wrapped, od_error *err)
{
    if (v < -numel || v >= numel)
        return od_error_set(err, OD_EINVAL, "out of range: tried to access index %" PRId64
                                            " on a tensor of %" PRId64 " elements.",
                            v, numel);
    *wrapped = v < 0 ? v + numel : v;
    return OD_OK;
}

/* nonzero's result size depends on the data: this is its Meta kernel's
 * answer (torch has no Meta kernel for it either); the CPU and CUDA kernels
 * count first and do not call it. */
od_status od_shape_nonzero(od_opid id, const od_stack *s, od_out_spec *outs, int *nouts, od_error *err)
{
    (void)id;
    (void)outs;
    (void)nouts;
    od_tensor *self = NULL;
    od_status st = arg_tensor(s, 0, "nonzero", "self", &self, err);
    if (st)
        return st;
    return od_error_set(err, OD_ENOKERNEL,
                        "Could not run 'aten::nonzero' with arguments from the 'Meta' backend: its result's "
                        "size depends on the data");
}

od_status od_mark_unique_dims(const od_tensor *self, const int64_t *dims, int64_t n, bool *mark, od_error *err)
{
    memset(mark, 0, sizeof(bool) * OD_MAX_DIMS);
    for (int64_t i = 0; i < n; i++) { /* dim by dim, as ATen's dim_list_to_bitset */
        int d;
        od_status st = od_wrap_dim(dims[i], self->ndim, &d, err);
        if (st)
            return st;
        if (mark[d])
            return od_error_set(err, OD_EINVAL, "dim %d appears multiple times in the list of dims", d);
        mark[d] = true;
    }
    return OD_OK;
}

od_status od_shape_flip(od_opid id, const od_stack *s, od_out_spec *outs, int *nouts, od_error *err)
{
    (void)id;
    od_tensor *self = NULL;
    const int64_t *dims;
    int64_t one;
    bool mark[OD_MAX_DIMS];
    od_status st;
    if ((st = arg_tensor(s, 0, "flip", "self", &self, err)))
        return st;
    int64_t n = s->nargs > 1 ? od_shape_int_list(&s->args[1], &dims, &one) : -1;
    if (n < 0)
        return od_error_set(err, OD_EINVAL, "flip(): argument 'dims' must be tuple of ints");
    if ((st = od_mark_unique_dims(self, dims, n, mark, err)))
        return st;
    od_out_spec_init(&outs[0], self->dtype, self->device, self->sizes, self->ndim);
    *nouts = 1;
    return OD_OK;
}
