/* shape_reduce.c — shape and dtype functions of the reductions, softmax,
 * layer norm, matrix products, cat and index_select.
 *
 * Invariants: every check a backend needs before it allocates lives here, so
 * the Meta, CPU and CUDA kernels agree on shapes, dtypes and error messages
 * (which follow PyTorch 1.13's wording). Nothing here touches tensor data or
 * allocates. Arguments are read from the boxed stack (borrowed); a value of
 * the wrong tag is OD_EINVAL naming the argument, never a crash.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "od_shape.h"

/* ---- argument access ------------------------------------------------------ */

static od_status arg_tensor(const od_stack *s, int i, const char *op, const char *name,
                            od_tensor **out, od_error *err)
{
    if (i >= s->nargs || s->args[i].tag != OD_T_TENSOR || !s->args[i].u.t)
        return od_error_set(err, OD_EINVAL, "%s(): argument '%s' must be a Tensor", op, name);
    *out = s->args[i].u.t;
    return OD_OK;
}

/* Tensor? argument: NULL for None. */
static od_status arg_opt_tensor(const od_stack *s, int i, const char *op, const char *name,
                                od_tensor **out, od_error *err)
{
    if (i < s->nargs && s->args[i].tag == OD_T_NONE) {
        *out = NULL;
        return OD_OK;
    }
    return arg_tensor(s, i, op, name, out, err);
}

static od_status arg_bool(const od_stack *s, int i, const char *op, const char *name, bool *out,
                          od_error *err)
{
    if (i >= s->nargs || (s->args[i].tag != OD_T_BOOL && s->args[i].tag != OD_T_INT))
        return od_error_set(err, OD_EINVAL, "%s(): argument '%s' must be a bool", op, name);
    *out = s->args[i].tag == OD_T_BOOL ? s->args[i].u.b : s->args[i].u.i != 0;
    return OD_OK;
}

/* ScalarType? argument: *has false for None. */
static od_status arg_opt_dtype(const od_stack *s, int i, const char *op, const char *name,
                               bool *has, od_dtype *out, od_error *err)
{
    *has = false;
    if (i >= s->nargs || s->args[i].tag == OD_T_NONE)
        return OD_OK;
    if (s->args[i].tag != OD_T_DTYPE || (unsigned)s->args[i].u.dtype >= OD_NUM_DTYPES)
        return od_error_set(err, OD_EINVAL, "%s(): argument '%s' must be a ScalarType or None", op,
                            name);
    *has = true;
    *out = s->args[i].u.dtype;
    return OD_OK;
}


/* caffe2::TypeMeta names, as torch prints tensor.dtype() inside C++ messages. */
const char *od_dtype_meta_name(od_dtype dt)
{
    static const char *const names[OD_NUM_DTYPES] = {
        [OD_BOOL] = "bool",         [OD_UINT8] = "unsigned char", [OD_INT8] = "signed char",
        [OD_INT16] = "short int",   [OD_INT32] = "int",           [OD_INT64] = "long int",
        [OD_FLOAT16] = "c10::Half", [OD_BFLOAT16] = "c10::BFloat16", [OD_FLOAT32] = "float",
        [OD_FLOAT64] = "double",
    };
    return (unsigned)dt < OD_NUM_DTYPES ? names[dt] : "unknown";
}

static od_status check_same_device(const char *op, const od_tensor *a, const od_tensor *b,
                                   od_error *err)
{
    if (!b || od_device_eq(a->device, b->device))
        return OD_OK;
    char da[32], db[32];
    od_device_print(a->device, da, sizeof da);
    od_device_print(b->device, db, sizeof db);
    return od_error_set(err, OD_EMISMATCH,
                        "%s(): Expected all tensors to be on the same device, but found at least "
                        "two devices, %s and %s!",
                        op, da, db);
}

static const char *op_short_name(od_opid id)
{
    const od_op *op = od_builtin(id);
    const char *n = op ? od_op_name(op) : "op";
    const char *c = strstr(n, "::");
    return c ? c + 2 : n;
}

/* ---- reductions ------------------------------------------------------------- */

od_status od_reduce_dims(const od_value *dim_arg, int ndim, bool wrap_first, uint32_t *mask, od_error *err)
{
    uint32_t all = ndim > 0 ? (uint32_t)((1ull << ndim) - 1) : 0;
    const int64_t *dims;
    size_t n;
    switch (dim_arg ? dim_arg->tag : OD_T_NONE) {
    case OD_T_NONE:
        *mask = all;
        return OD_OK;
    case OD_T_INT:
        dims = &dim_arg->u.i;
        n = 1;
        break;
    case OD_T_INT_LIST:
        dims = dim_arg->u.list.items;
        n = dim_arg->u.list.n;
        if (n == 0) {
            *mask = all;
            return OD_OK;
        }
        break;
    default:
        return od_error_set(err, OD_EINVAL, "argument 'dim' must be an int, a list of ints or None, "
                                            "but got %s", od_tag_name(dim_arg->tag));
    }
    uint32_t m = 0;
    for (size_t i = 0; wrap_first && i < n; i++) {
        int d;
        od_status st = od_wrap_dim(dims[i], ndim, &d, err);
        if (st)
            return st;
    }
    for (size_t i = 0; i < n; i++) {
        int d;
        od_status st = od_wrap_dim(dims[i], ndim, &d, err);
        if (st)
            return st;
        /* A 0-dim tensor has one nameable dim (0 or -1) but no bit to reduce. */
        if (m & (1u << d))
            return od_error_set(err, OD_EINVAL, "dim %d appears multiple times in the list of dims", d);
        m |= 1u << d;
    }
    *mask = m & all;
    return OD_OK;
}

/* Argument positions of each reduction overload (-1: absent). */
typedef struct red_layout {
    od_reduce_kind kind;
    const char *name;
    int dim, keepdim, dtype, unbiased, correction;
} red_layout;

static bool red_layout_of(od_opid id, red_layout *l)
{
    static const struct {
        od_opid id;
        red_layout l;
    } tab[] = {
        {OD_OPID_sum, {OD_RED_SUM, "sum", -1, -1, 1, -1, -1}},
        {OD_OPID_sum_dim_IntList, {OD_RED_SUM, "sum", 1, 2, 3, -1, -1}},
        {OD_OPID_mean, {OD_RED_MEAN, "mean", -1, -1, 1, -1, -1}},
        {OD_OPID_mean_dim, {OD_RED_MEAN, "mean", 1, 2, 3, -1, -1}},
        {OD_OPID_amax, {OD_RED_AMAX, "amax", 1, 2, -1, -1, -1}},
        {OD_OPID_amin, {OD_RED_AMIN, "amin", 1, 2, -1, -1, -1}},
        {OD_OPID_argmax, {OD_RED_ARGMAX, "argmax", 1, 2, -1, -1, -1}},
        {OD_OPID_argmin, {OD_RED_ARGMIN, "argmin", 1, 2, -1, -1, -1}},
        {OD_OPID_prod, {OD_RED_PROD, "prod", -1, -1, 1, -1, -1}},
        {OD_OPID_prod_dim_int, {OD_RED_PROD, "prod", 1, 2, 3, -1, -1}},
        {OD_OPID_var, {OD_RED_VAR, "var", -1, -1, -1, 1, -1}},
        {OD_OPID_var_dim, {OD_RED_VAR, "var", 1, 3, -1, 2, -1}},
        {OD_OPID_var_correction, {OD_RED_VAR, "var", 1, 3, -1, -1, 2}},
    };
    for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++)
        if (tab[i].id == id) {
            *l = tab[i].l;
            return true;
        }
    return false;
}

/* torch's zero_numel_check_dims for one dim: the reduced dim must be non-empty. */
static od_status check_nonempty_dim(const char *fn, const od_tensor *self, int64_t dim_as_given,
                                    int wrapped, od_error *err)
{
    if (self->ndim > 0 && self->sizes[wrapped] == 0)
        return od_error_set(err, OD_EINVAL, "%s(): Expected reduction dim %" PRId64 " to have non-zero size.",
                            fn, dim_as_given);
    return OD_OK;
}

od_status od_reduce_parse(od_opid id, const od_stack *s, od_reduce_info *info, od_error *err)
{
    red_layout l;
    if (!red_layout_of(id, &l))
        return od_error_set(err, OD_EINTERNAL, "od_reduce_parse: %s is not a reduction",
                            op_short_name(id));
    od_tensor *self = NULL;
    od_status st = arg_tensor(s, 0, l.name, "self", &self, err);
    if (st)
        return st;
    memset(info, 0, sizeof *info);
    info->kind = l.kind;
    if (l.keepdim >= 0 && (st = arg_bool(s, l.keepdim, l.name, "keepdim", &info->keepdim, err)))
        return st;
    const od_value *dim_arg = l.dim >= 0 && l.dim < s->nargs ? &s->args[l.dim] : NULL;
    if ((l.kind == OD_RED_ARGMAX || l.kind == OD_RED_ARGMIN) && dim_arg && dim_arg->tag != OD_T_NONE &&
        dim_arg->tag != OD_T_INT)
        return od_error_set(err, OD_EINVAL, "%s(): argument 'dim' must be an int or None", l.name);
    od_dtype in = self->dtype;
    bool has_dt = false;
    od_dtype dt = in;
    if (l.dtype >= 0 && (st = arg_opt_dtype(s, l.dtype, l.name, "dtype", &has_dt, &dt, err)))
        return st;
    int64_t numel = od_tensor_numel(self);
    /* ATen's meta functions check these before the dims (make_reduction) */
    if (l.kind == OD_RED_VAR && !od_dtype_is_floating(in))
        return od_error_set(err, OD_EUNSUPPORTED, "std and var only support floating point and complex dtypes");
    if (l.kind == OD_RED_MEAN && !od_dtype_is_floating(has_dt ? dt : in))
        return od_error_set(err, OD_EUNSUPPORTED,
                            "mean(): could not infer output dtype. %s dtype must be either a "
                            "floating point or complex dtype. Got: %s",
                            has_dt ? "Optional" : "Input", od_dtype_scalar_name(has_dt ? dt : in));
    if ((l.kind == OD_RED_AMAX || l.kind == OD_RED_AMIN) && numel == 0) { /* zero_numel_check_dims */
        const char *fn = l.kind == OD_RED_AMAX ? "amax" : "amin";
        size_t n = dim_arg && dim_arg->tag == OD_T_INT_LIST ? dim_arg->u.list.n
                   : dim_arg && dim_arg->tag == OD_T_INT    ? 1
                                                            : 0;
        if (n == 0)
            return od_error_set(err, OD_EINVAL,
                                "%s(): Expected reduction dim to be specified for input.numel() "
                                "== 0. Specify the reduction dim with the 'dim' argument.",
                                fn);
        const int64_t *dims = dim_arg->tag == OD_T_INT ? &dim_arg->u.i : dim_arg->u.list.items;
        for (size_t i = 0; i < n; i++) {
            int w;
            if ((st = od_wrap_dim(dims[i], self->ndim, &w, err)) ||
                (st = check_nonempty_dim(fn, self, dims[i], w, err)))
                return st;
        }
    }
    if ((st = od_reduce_dims(dim_arg, self->ndim, l.kind != OD_RED_VAR, &info->mask, err)))
        return st;

    switch (l.kind) {
    case OD_RED_SUM:
    case OD_RED_MEAN:
    case OD_RED_PROD: {
        /* get_dtype_from_self(self, dtype, promote_integers=true) */
        od_dtype out = has_dt ? dt : od_dtype_is_integral(in, true) ? OD_INT64 : in;
        /* torch 1.13's CPU prod has no half kernels; its CUDA one has */
        if (l.kind == OD_RED_PROD && (out == OD_FLOAT16 || out == OD_BFLOAT16) &&
            self->device.type == OD_DEV_CPU && numel > 0)
            return od_error_set(err, OD_EUNSUPPORTED, "\"prod_cpu\" not implemented for '%s'",
                                od_dtype_scalar_name(out));
        info->out_dtype = out;
        break;
    }
    case OD_RED_AMAX:
    case OD_RED_AMIN:
        info->out_dtype = in;
        break;
    case OD_RED_ARGMAX:
    case OD_RED_ARGMIN:
        /* ATen refuses bool in the kernel, which an empty input or a
         * reduced dim of size 1 (all zeros) never reaches */
        if (in == OD_BOOL && numel > 0 &&
            !(dim_arg && dim_arg->tag == OD_T_INT && self->ndim > 0 &&
              self->sizes[dim_arg->u.i < 0 ? dim_arg->u.i + self->ndim : dim_arg->u.i % self->ndim] == 1))
            return od_error_set(err, OD_EUNSUPPORTED, "\"%s_cpu\" not implemented for 'Bool'", l.name);
        info->out_dtype = OD_INT64;
        if (dim_arg && dim_arg->tag == OD_T_INT) {
            int w;
            if ((st = od_wrap_dim(dim_arg->u.i, self->ndim, &w, err)) ||
                (st = check_nonempty_dim(l.name, self, w, w, err)))
                return st;
        } else if (numel == 0) {
            return od_error_set(err, OD_EINVAL,
                                "%s(): Expected reduction dim to be specified for input.numel() == 0.", l.name);
        }
        break;
    case OD_RED_VAR: {
        info->out_dtype = in;
        info->correction = 1;
        if (l.unbiased >= 0) {
            bool unbiased = true;
            if ((st = arg_bool(s, l.unbiased, l.name, "unbiased", &unbiased, err)))
                return st;
            info->correction = unbiased ? 1 : 0;
        } else if (l.correction >= 0 && l.correction < s->nargs &&
                   s->args[l.correction].tag != OD_T_NONE) {
            if ((st = od_shape_arg_int(s, l.correction, l.name, "correction", &info->correction, err)))
                return st;
        }
        break;
    }
    }
    return OD_OK;
}

od_status od_shape_reduce(od_opid id, const od_stack *s, od_out_spec *outs, int *nouts, od_error *err)
{
    od_reduce_info info;
    od_status st = od_reduce_parse(id, s, &info, err);
    if (st)
        return st;
    const od_tensor *self = s->args[0].u.t;
    int64_t sizes[OD_MAX_DIMS];
    int nd = 0;
    for (int d = 0; d < self->ndim; d++) {
        if (info.mask & (1u << d)) {
            if (info.keepdim)
                sizes[nd++] = 1;
        } else {
            sizes[nd++] = self->sizes[d];
        }
    }
    od_out_spec_init(&outs[0], info.out_dtype, self->device, sizes, nd);
    *nouts = 1;
    return OD_OK;
}

/* ---- softmax, layer norm ------------------------------------------------------ */

od_status od_shape_softmax(od_opid id, const od_stack *s, od_out_spec *outs, int *nouts, od_error *err)
{
    bool log = id == OD_OPID__log_softmax;
    const char *name = log ? "_log_softmax" : "_softmax";
    od_tensor *self = NULL;
    int64_t dim = 0;
    bool h2f = false;
    od_status st;
    if ((st = arg_tensor(s, 0, name, "self", &self, err)) ||
        (st = od_shape_arg_int(s, 1, name, "dim", &dim, err)) ||
        (st = arg_bool(s, 2, name, "half_to_float", &h2f, err)))
        return st;
    int d;
    if ((st = od_wrap_dim(dim, self->ndim, &d, err)))
        return st;
    /* ATen's CPU kernel refuses half_to_float first (this server converts a
     * float16 input there, as CUDA does), then returns an empty input, then
     * dispatches on the dtype: the last dim's kernel or the general one
     * (named softmax_kernel_impl for log_softmax too) */
    bool cpu = self->device.type == OD_DEV_CPU;
    if (h2f && self->dtype != OD_FLOAT16)
        return cpu ? od_error_set(err, OD_EUNSUPPORTED, "softmax with half to float conversion is not supported on CPU")
                   : od_error_set(err, OD_EUNSUPPORTED,
                                  "%s(): conversion is supported for Half type only (half_to_float=True "
                                  "with a %s input)",
                                  name, od_dtype_name(self->dtype));
    if (!od_dtype_is_floating(self->dtype) && od_tensor_numel(self) > 0) {
        bool last = self->ndim == 0 || d == self->ndim - 1;
        return od_error_set(err, OD_EUNSUPPORTED, "\"%s%s\" not implemented for '%s'",
                            !last ? "softmax" : log ? "log_softmax" : "softmax",
                            last ? "_lastdim_kernel_impl" : "_kernel_impl", od_dtype_scalar_name(self->dtype));
    }
    od_out_spec_init(&outs[0], h2f ? OD_FLOAT32 : self->dtype, self->device, self->sizes, self->ndim);
    *nouts = 1;
    return OD_OK;
}

static int print_int_list(const int64_t *v, size_t n, char *buf, size_t cap)
{
    return od_shape_print(v, (int)n, buf, cap);
}

od_status od_shape_layer_norm(od_opid id, const od_stack *s, od_out_spec *outs, int *nouts,
                              od_error *err)
{
    (void)id;
    const char *name = "native_layer_norm";
    od_tensor *input = NULL, *weight = NULL, *bias = NULL;
    od_status st;
    if ((st = arg_tensor(s, 0, name, "input", &input, err)) ||
        (st = arg_opt_tensor(s, 2, name, "weight", &weight, err)) ||
        (st = arg_opt_tensor(s, 3, name, "bias", &bias, err)))
        return st;
    if (s->nargs < 5 || !od_value_is_number(&s->args[4]))
        return od_error_set(err, OD_EINVAL, "%s(): argument 'eps' must be a float", name);
    if (s->args[1].tag != OD_T_INT_LIST)
        return od_error_set(err, OD_EINVAL, "%s(): argument 'normalized_shape' must be a list of ints",
                            name);
    const int64_t *ns = s->args[1].u.list.items;
    size_t nn = s->args[1].u.list.n;
    char nsbuf[256], b2[256];
    print_int_list(ns, nn, nsbuf, sizeof nsbuf);
    if (nn < 1)
        return od_error_set(err, OD_EINVAL,
                            "Expected normalized_shape to be at least 1-dimensional, i.e., containing "
                            "at least one element, but got normalized_shape = %s",
                            nsbuf);
    const struct {
        od_tensor *t;
        const char *what;
    } affine[2] = {{weight, "weight"}, {bias, "bias"}};
    for (int i = 0; i < 2; i++) {
        od_tensor *t = affine[i].t;
        if (!t)
            continue;
        bool same = (size_t)t->ndim == nn;
        for (size_t k = 0; same && k < nn; k++)
            same = t->sizes[k] == ns[k];
        if (!same) {
            od_shape_print(t->sizes, t->ndim, b2, sizeof b2);
            return od_error_set(err, OD_EMISMATCH,
                                "Expected %s to be of same shape as normalized_shape, but got %s of "
                                "shape %s and normalized_shape = %s",
                                affine[i].what, affine[i].what, b2, nsbuf);
        }
    }
    bool ok = (size_t)input->ndim >= nn;
    int axis = ok ? input->ndim - (int)nn : 0;
    for (size_t k = 0; ok && k < nn; k++)
        ok = input->sizes[axis + (int)k] == ns[k];
    if (!ok) {
        char star[300];
        size_t p = (size_t)snprintf(star, sizeof star, "[*");
        for (size_t k = 0; k < nn && p < sizeof star; k++)
            p += (size_t)snprintf(star + p, sizeof star - p, ", %" PRId64, ns[k]);
        if (p < sizeof star)
            snprintf(star + p, sizeof star - p, "]");
        od_shape_print(input->sizes, input->ndim, b2, sizeof b2);
        return od_error_set(err, OD_EMISMATCH,
                            "Given normalized_shape=%s, expected input with shape %s, but got input "
                            "of size%s",
                            nsbuf, star, b2);
    }
    if (!od_dtype_is_floating(input->dtype))
        return od_error_set(err, OD_EUNSUPPORTED, "\"LayerNormKernelImpl\" not implemented for '%s'",
                            od_dtype_scalar_name(input->dtype));
    for (int i = 0; i < 2; i++) {
        od_tensor *t = affine[i].t;
        if (!t)
            continue;
        if (t->dtype != input->dtype)
            return od_error_set(err, OD_EMISMATCH,
                                "%s(): expected %s to have the same dtype as input (%s), but got %s",
                                name, affine[i].what, od_dtype_name(input->dtype),
                                od_dtype_name(t->dtype));
        if ((st = check_same_device(name, input, t, err)))
            return st;
    }
    od_out_spec_init(&outs[0], input->dtype, input->device, input->sizes, input->ndim);
    int64_t stat_sizes[OD_MAX_DIMS];
    for (int d = 0; d < input->ndim; d++)
        stat_sizes[d] = d < axis ? input->sizes[d] : 1;
    od_out_spec_init(&outs[1], input->dtype, input->device, stat_sizes, input->ndim);
    od_out_spec_init(&outs[2], input->dtype, input->device, stat_sizes, input->ndim);
    *nouts = 3;
    return OD_OK;
}

/* ---- matrix products ---------------------------------------------------------- */

static od_status shape_mm(const char *op, const od_tensor *a, const od_tensor *b, const char *an,
                          const char *bn, od_error *err)
{
    if (a->ndim != 2)
        return od_error_set(err, OD_EMISMATCH, "%s must be a matrix, got %d-D tensor", an, a->ndim);
    if (b->ndim != 2)
        return od_error_set(err, OD_EMISMATCH, "%s must be a matrix, got %d-D tensor", bn, b->ndim);
    if (a->sizes[1] != b->sizes[0])
        return od_error_set(err, OD_EMISMATCH,
                            "mat1 and mat2 shapes cannot be multiplied (%" PRId64 "x%" PRId64
                            " and %" PRId64 "x%" PRId64 ")",
                            a->sizes[0], a->sizes[1], b->sizes[0], b->sizes[1]);
    return check_same_device(op, a, b, err);
}

/* mm and bmm of two dtypes, a product with work to do: torch 1.13 has no
 * check of its own there; its CPU kernel (kernel: "addmm_impl_cpu_" or
 * "bmm") dispatches on the first operand's dtype, which refuses Half and
 * Bool, and then reads the second's data as that type. */
static od_status mixed_mm(const char *kernel, const od_tensor *a, const od_tensor *b, od_error *err)
{
    if (a->device.type == OD_DEV_CPU && (a->dtype == OD_FLOAT16 || a->dtype == OD_BOOL))
        return od_error_set(err, OD_EUNSUPPORTED, "\"%s\" not implemented for '%s'", kernel,
                            od_dtype_scalar_name(a->dtype));
    return od_error_set(err, OD_EMISMATCH, "expected scalar type %s but found %s", od_dtype_scalar_name(a->dtype),
                        od_dtype_scalar_name(b->dtype));
}

/* torch's legacy type name of t: torch.FloatTensor, torch.cuda.LongTensor */
static const char *legacy_type(const od_tensor *t, char *buf, size_t n)
{
    static const char *names[OD_NUM_DTYPES] = {
        [OD_BOOL] = "Bool", [OD_UINT8] = "Byte", [OD_INT8] = "Char", [OD_INT16] = "Short", [OD_INT32] = "Int",
        [OD_INT64] = "Long", [OD_FLOAT16] = "Half", [OD_BFLOAT16] = "BFloat16", [OD_FLOAT32] = "Float",
        [OD_FLOAT64] = "Double"};
    const char *nm = (unsigned)t->dtype < OD_NUM_DTYPES && names[t->dtype] ? names[t->dtype] : "Float";
    snprintf(buf, n, "torch.%s%sTensor", t->device.type == OD_DEV_CUDA ? "cuda." : "", nm);
    return buf;
}

/* self expanded to sz[0..nd) (ATen's expand_size): torch's two messages. */
static od_status check_expand(const char *op, const od_tensor *self, const int64_t *sz, int nd, od_error *err)
{
    char ts[96], ss[256], tn[40];
    (void)op;
    od_shape_print(self->sizes, self->ndim, ss, sizeof ss);
    od_shape_print(sz, nd, ts, sizeof ts);
    if (self->ndim > nd)
        return od_error_set(err, OD_EMISMATCH,
                            "expand(%s{%s}, size=%s): the number of sizes provided (%d) must be "
                            "greater or equal to the number of dimensions in the tensor (%d)",
                            legacy_type(self, tn, sizeof tn), ss, ts, nd, self->ndim);
    for (int d = self->ndim - 1; d >= 0; d--) { /* torch checks from the last dim */
        int td = nd - self->ndim + d;
        if (self->sizes[d] != 1 && self->sizes[d] != sz[td])
            return od_error_set(err, OD_EMISMATCH,
                                "The expanded size of the tensor (%" PRId64 ") must match the existing size (%" PRId64
                                ") at non-singleton dimension %d.  Target sizes: %s.  Tensor sizes: %s",
                                sz[td], self->sizes[d], td, ts, ss);
    }
    return OD_OK;
}

/* t.size(d) as ATen reads it: IndexError-like refusal for a dim t lacks. */

/* beta / alpha (s->args[3], [4]): Scalars, converted with c10's checks to the
 * op math type when the product is not empty. */
static od_status check_beta_alpha(const char *op, const od_stack *s, od_dtype dt, bool convert, od_error *err)
{
    od_status st;
    for (int i = 3; i <= 4; i++)
        if (i >= s->nargs || !od_value_is_number(&s->args[i]))
            return od_error_set(err, OD_EINVAL, "%s(): argument '%s' must be a Scalar", op, i == 3 ? "beta" : "alpha");
    od_dtype sdt = dt == OD_FLOAT16 || dt == OD_BFLOAT16 ? OD_FLOAT32 : dt;
    for (int i = 3; i <= 4 && convert; i++)
        if ((st = od_scalar_check_fits(&s->args[i], sdt, err)))
            return st;
    return OD_OK;
}

/* addmv, baddbmm, addbmm: torch 1.13's meta checks, in its order. */
static od_status shape_addmv_bmm(od_opid id, const od_stack *s, od_out_spec *outs, od_error *err)
{
    od_tensor *self = NULL, *a = NULL, *b = NULL;
    od_status st;
    const char *op = id == OD_OPID_addmv ? "addmv" : id == OD_OPID_baddbmm ? "baddbmm" : "addbmm";
    if ((st = arg_tensor(s, 0, op, "self", &self, err)) ||
        (st = arg_tensor(s, 1, op, id == OD_OPID_addmv ? "mat" : "batch1", &a, err)) ||
        (st = arg_tensor(s, 2, op, id == OD_OPID_addmv ? "vec" : "batch2", &b, err)))
        return st;
    if (id == OD_OPID_addmv) {
        if (!(a->ndim == 2 && b->ndim == 1 && self->ndim <= 1))
            return od_error_set(err, OD_EMISMATCH, "vector + matrix @ vector expected, got %d, %d, %d", self->ndim,
                                a->ndim, b->ndim);
        int64_t sn = od_tensor_numel(self);
        if (!(a->sizes[1] == b->sizes[0] && (a->sizes[0] == sn || sn == 1)))
            return od_error_set(err, OD_EMISMATCH, "size mismatch, got %" PRId64 ", %" PRId64 "x%" PRId64 ",%" PRId64,
                                self->ndim ? self->sizes[0] : sn, a->sizes[0], a->sizes[1], b->sizes[0]);
        /* the gemv's check, which an empty mat never reaches (its result is then zeros, or self * beta) */
        bool empty = !(a->sizes[0] && a->sizes[1]);
        if (a->dtype != b->dtype && !empty)
            return od_error_set(err, OD_EMISMATCH, "expected scalar type %s but found %s",
                                od_dtype_scalar_name(a->dtype), od_dtype_scalar_name(b->dtype));
        if ((st = check_same_device(op, a, b, err)) || (st = check_same_device(op, a, self, err)) ||
            (st = check_beta_alpha(op, s, a->dtype, !empty, err)))
            return st;
        od_out_spec_init(&outs[0], b->dtype, a->device, a->sizes, 1); /* mat's size, vec's options */
        return OD_OK;
    }
    int64_t sz[3];
    bool bmm3 = id == OD_OPID_baddbmm;
    if (bmm3 && (st = od_tensor_size_at(a, 0, &sz[0], err)))
        return st;
    if ((st = od_tensor_size_at(a, 1, &sz[bmm3], err)) || (st = od_tensor_size_at(b, 2, &sz[bmm3 + 1], err)) ||
        (st = check_expand(op, self, sz, bmm3 ? 3 : 2, err)))
        return st;
    if (a->ndim != 3)
        return od_error_set(err, OD_EMISMATCH, "batch1 must be a 3D tensor");
    if (b->ndim != 3)
        return od_error_set(err, OD_EMISMATCH, "batch2 must be a 3D tensor");
    if (bmm3) {
        if (b->sizes[0] != a->sizes[0] || b->sizes[1] != a->sizes[2])
            return od_error_set(err, OD_EMISMATCH,
                                "Expected size for first two dimensions of batch2 tensor to be: [%" PRId64 ", %" PRId64
                                "] but got: [%" PRId64 ", %" PRId64 "].",
                                a->sizes[0], a->sizes[2], b->sizes[0], b->sizes[1]);
        if (a->dtype != b->dtype)
            return od_error_set(err, OD_EMISMATCH, "expected scalar type %s but found %s",
                                od_dtype_scalar_name(a->dtype), od_dtype_scalar_name(b->dtype));
    } else {
        if (a->sizes[0] != b->sizes[0])
            return od_error_set(err, OD_EMISMATCH,
                                "batch1 and batch2 must have same number of batches, got %" PRId64 " and %" PRId64,
                                a->sizes[0], b->sizes[0]);
        if (a->sizes[2] != b->sizes[1])
            return od_error_set(err, OD_EMISMATCH,
                                "Incompatible matrix sizes for bmm (%" PRId64 "x%" PRId64 " and %" PRId64 "x%" PRId64 ")",
                                a->sizes[1], a->sizes[2], b->sizes[1], b->sizes[2]);
        /* addmm_ per batch: self (expanded) and both batches share a dtype */
        if (a->sizes[0] > 0 && (self->dtype != b->dtype || a->dtype != b->dtype))
            return od_error_set(err, OD_EMISMATCH, "self and mat2 must have the same dtype");
    }
    if ((st = check_same_device(op, a, b, err)) || (st = check_same_device(op, a, self, err)))
        return st;
    /* an empty sum (k == 0) multiplies by beta unconverted (mul_) */
    bool nonempty = sz[0] && sz[1] && (!bmm3 || sz[2]) && (bmm3 || a->sizes[0]) && a->sizes[2];
    if ((st = check_beta_alpha(op, s, b->dtype, nonempty, err)))
        return st;
    /* baddbmm: batch2's options; addbmm: self's (the same unless there are no batches) */
    od_out_spec_init(&outs[0], bmm3 ? b->dtype : self->dtype, a->device, sz, bmm3 ? 3 : 2);
    return OD_OK;
}

od_status od_shape_matmul(od_opid id, const od_stack *s, od_out_spec *outs, int *nouts, od_error *err)
{
    if (id == OD_OPID_addmv || id == OD_OPID_baddbmm || id == OD_OPID_addbmm) {
        *nouts = 1;
        return shape_addmv_bmm(id, s, outs, err);
    }
    od_tensor *a = NULL, *b = NULL, *self = NULL;
    od_status st;
    *nouts = 1;
    switch (id) {
    case OD_OPID_mm: {
        if ((st = arg_tensor(s, 0, "mm", "self", &a, err)) ||
            (st = arg_tensor(s, 1, "mm", "mat2", &b, err)))
            return st;
        /* torch's mm says "self must be a matrix" without the rank. */
        if (a->ndim != 2)
            return od_error_set(err, OD_EMISMATCH, "self must be a matrix");
        if (b->ndim != 2)
            return od_error_set(err, OD_EMISMATCH, "mat2 must be a matrix");
        if ((st = shape_mm("mm", a, b, "self", "mat2", err)) ||
            (a->dtype != b->dtype && !od_mm_is_trivial(a, b) && (st = mixed_mm("addmm_impl_cpu_", a, b, err))))
            return st;
        int64_t sz[2] = {a->sizes[0], b->sizes[1]};
        od_out_spec_init(&outs[0], a->dtype, a->device, sz, 2);
        return OD_OK;
    }
    case OD_OPID_addmm: {
        if ((st = arg_tensor(s, 0, "addmm", "self", &self, err)) ||
            (st = arg_tensor(s, 1, "addmm", "mat1", &a, err)) ||
            (st = arg_tensor(s, 2, "addmm", "mat2", &b, err)))
            return st;
        /* torch 1.13's addmm meta checks the dtypes first */
        if (self->dtype != b->dtype)
            return od_error_set(err, OD_EMISMATCH, "self and mat2 must have the same dtype");
        if (a->dtype != b->dtype)
            return od_error_set(err, OD_EMISMATCH, "mat1 and mat2 must have the same dtype");
        if ((st = shape_mm("addmm", a, b, "mat1", "mat2", err)))
            return st;
        for (int i = 3; i <= 4; i++)
            if (i >= s->nargs || !od_value_is_number(&s->args[i]))
                return od_error_set(err, OD_EINVAL, "addmm(): argument '%s' must be a Scalar",
                                    i == 3 ? "beta" : "alpha");
        /* beta, alpha: converted with c10's checks to the op math type (float
         * for float16 and bfloat16), which an empty result or an empty sum
         * (mul_ by beta) never reaches */
        od_dtype sdt = a->dtype == OD_FLOAT16 || a->dtype == OD_BFLOAT16 ? OD_FLOAT32 : a->dtype;
        for (int i = 3; i <= 4 && a->sizes[0] && b->sizes[1] && a->sizes[1]; i++)
            if ((st = od_scalar_check_fits(&s->args[i], sdt, err)))
                return st;
        if ((st = check_same_device("addmm", a, self, err)))
            return st;
        int64_t sz[2] = {a->sizes[0], b->sizes[1]};
        /* self must expand to [n, m] (torch's expand_size). */
        char ts[64], ss[256];
        if (self->ndim > 2) {
            od_shape_print(self->sizes, self->ndim, ss, sizeof ss);
            return od_error_set(err, OD_EMISMATCH,
                                "addmm(): expand(self of size %s, size=[%" PRId64 ", %" PRId64
                                "]): the number of sizes provided (2) must be greater or equal to "
                                "the number of dimensions in the tensor (%d)",
                                ss, sz[0], sz[1], self->ndim);
        }
        for (int d = 0; d < self->ndim; d++) {
            int td = 2 - self->ndim + d;
            if (self->sizes[d] != 1 && self->sizes[d] != sz[td]) {
                od_shape_print(sz, 2, ts, sizeof ts);
                od_shape_print(self->sizes, self->ndim, ss, sizeof ss);
                return od_error_set(err, OD_EMISMATCH,
                                    "The expanded size of the tensor (%" PRId64
                                    ") must match the existing size (%" PRId64
                                    ") at non-singleton dimension %d.  Target sizes: %s.  Tensor "
                                    "sizes: %s",
                                    sz[td], self->sizes[d], td, ts, ss);
            }
        }
        od_out_spec_init(&outs[0], a->dtype, a->device, sz, 2);
        return OD_OK;
    }
    case OD_OPID_bmm: {
        if ((st = arg_tensor(s, 0, "bmm", "self", &a, err)) ||
            (st = arg_tensor(s, 1, "bmm", "mat2", &b, err)))
            return st;
        if (a->ndim != 3)
            return od_error_set(err, OD_EMISMATCH, "batch1 must be a 3D tensor");
        if (b->ndim != 3)
            return od_error_set(err, OD_EMISMATCH, "batch2 must be a 3D tensor");
        if (b->sizes[0] != a->sizes[0] || b->sizes[1] != a->sizes[2])
            return od_error_set(err, OD_EMISMATCH,
                                "Expected size for first two dimensions of batch2 tensor to be: [%" PRId64
                                ", %" PRId64 "] but got: [%" PRId64 ", %" PRId64 "].",
                                a->sizes[0], a->sizes[2], b->sizes[0], b->sizes[1]);
        if (a->dtype != b->dtype && !od_mm_is_trivial(a, b) && (st = mixed_mm("bmm", a, b, err)))
            return st;
        if ((st = check_same_device("bmm", a, b, err)))
            return st;
        int64_t sz[3] = {a->sizes[0], a->sizes[1], b->sizes[2]};
        od_out_spec_init(&outs[0], b->dtype, a->device, sz, 3); /* ATen's bmm takes batch2's options */
        return OD_OK;
    }
    case OD_OPID_dot: {
        if ((st = arg_tensor(s, 0, "dot", "self", &a, err)) ||
            (st = arg_tensor(s, 1, "dot", "tensor", &b, err)))
            return st;
        if (a->ndim != 1 || b->ndim != 1)
            return od_error_set(err, OD_EMISMATCH, "1D tensors expected, but got %dD and %dD tensors",
                                a->ndim, b->ndim);
        if (a->dtype != b->dtype)
            return od_error_set(err, OD_EMISMATCH,
                                "dot : expected both vectors to have same dtype, but found %s and %s",
                                od_dtype_scalar_name(a->dtype), od_dtype_scalar_name(b->dtype));
        if (a->sizes[0] != b->sizes[0])
            return od_error_set(err, OD_EMISMATCH,
                                "inconsistent tensor size, expected tensor [%" PRId64
                                "] and src [%" PRId64 "] to have the same number of elements, but "
                                "got %" PRId64 " and %" PRId64 " elements respectively",
                                a->sizes[0], b->sizes[0], a->sizes[0], b->sizes[0]);
        if ((st = check_same_device("dot", a, b, err)))
            return st;
        od_out_spec_init(&outs[0], a->dtype, a->device, NULL, 0);
        return OD_OK;
    }
    default:
        return od_error_set(err, OD_EINTERNAL, "od_shape_matmul: %s is not a matrix product",
                            op_short_name(id));
    }
}

/* ---- cat, index_select ---------------------------------------------------------- */

od_status od_shape_cat(od_opid id, const od_stack *s, od_out_spec *outs, int *nouts, od_error *err)
{
    (void)id;
    if (s->nargs < 2 || s->args[0].tag != OD_T_TENSOR_LIST)
        return od_error_set(err, OD_EINVAL, "cat(): argument 'tensors' must be a list of Tensors");
    int64_t dim = 0;
    od_status st = od_shape_arg_int(s, 1, "cat", "dim", &dim, err);
    if (st)
        return st;
    od_tensor **ts = s->args[0].u.list.items;
    size_t n = s->args[0].u.list.n;
    if (n == 0)
        return od_error_set(err, OD_EINVAL, "torch.cat(): expected a non-empty list of Tensors");
    for (size_t i = 0; i < n; i++) {
        if (!ts[i])
            return od_error_set(err, OD_EINVAL, "cat(): tensors[%zu] is None; expected a Tensor", i);
        if (ts[i]->ndim == 0)
            return od_error_set(err, OD_EMISMATCH,
                                "zero-dimensional tensor (at position %zu) cannot be concatenated", i);
        if ((st = check_same_device("cat", ts[0], ts[i], err)))
            return st;
    }
    /* torch.cat promotes across every input, skipped legacy empties included. */
    od_result_arg ra[64];
    od_dtype out_dt = ts[0]->dtype;
    for (size_t i = 0; i < n; i += 64) {
        size_t k = n - i < 64 ? n - i : 64;
        for (size_t j = 0; j < k; j++) {
            ra[j].tensor = ts[i + j];
            ra[j].scalar_kind = OD_SCALAR_INT;
        }
        od_dtype part = od_result_type(ra, (int)k);
        out_dt = i == 0 ? part : od_promote_types(out_dt, part);
    }
    size_t first = n;
    for (size_t i = 0; i < n; i++)
        if (!od_cat_should_skip(ts[i])) {
            first = i;
            break;
        }
    if (first == n) { /* everything skipped: torch returns shape [0] */
        int64_t z = 0;
        od_out_spec_init(&outs[0], out_dt, ts[0]->device, &z, 1);
        *nouts = 1;
        return OD_OK;
    }
    const od_tensor *ref = ts[first];
    int d;
    if ((st = od_wrap_dim(dim, ref->ndim, &d, err)))
        return st;
    int64_t sizes[OD_MAX_DIMS];
    memcpy(sizes, ref->sizes, sizeof sizes);
    sizes[d] = 0;
    for (size_t i = 0; i < n; i++) {
        const od_tensor *t = ts[i];
        if (od_cat_should_skip(t))
            continue;
        if (t->ndim != ref->ndim)
            return od_error_set(err, OD_EMISMATCH,
                                "Tensors must have same number of dimensions: got %d and %d", ref->ndim,
                                t->ndim);
        for (int k = 0; k < ref->ndim; k++) {
            if (k != d && t->sizes[k] != ref->sizes[k])
                return od_error_set(err, OD_EMISMATCH,
                                    "Sizes of tensors must match except in dimension %d. Expected "
                                    "size %" PRId64 " but got size %" PRId64
                                    " for tensor number %zu in the list.",
                                    d, ref->sizes[k], t->sizes[k], i);
        }
        if (sizes[d] > INT64_MAX - t->sizes[d])
            return od_error_set(err, OD_ETOOLARGE, "cat(): the result's size in dimension %d overflows", d);
        sizes[d] += t->sizes[d];
    }
    od_out_spec_init(&outs[0], out_dt, ref->device, sizes, ref->ndim);
    *nouts = 1;
    return OD_OK;
}

od_status od_shape_index_select(od_opid id, const od_stack *s, od_out_spec *outs, int *nouts,
                                od_error *err)
{
    (void)id;
    od_tensor *self = NULL, *index = NULL;
    int64_t dim = 0;
    od_status st;
    if ((st = arg_tensor(s, 0, "index_select", "self", &self, err)) ||
        (st = od_shape_arg_int(s, 1, "index_select", "dim", &dim, err)) ||
        (st = arg_tensor(s, 2, "index_select", "index", &index, err)))
        return st;
    int d;
    if ((st = od_wrap_dim(dim, self->ndim, &d, err)))
        return st;
    if (index->ndim > 1)
        return od_error_set(err, OD_EINVAL, "index_select(): Index is supposed to be a vector");
    int64_t numel = od_tensor_numel(index);
    if (self->ndim == 0 && numel != 1)
        return od_error_set(err, OD_EINVAL,
                            "index_select(): Index to scalar can have only 1 value, got %" PRId64
                            " value(s)",
                            numel);
    if (index->dtype != OD_INT64 && index->dtype != OD_INT32)
        return od_error_set(err, OD_EMISMATCH, "index_select(): Expected dtype int32 or int64 for index");
    if ((st = check_same_device("index_select", self, index, err)))
        return st;
    int64_t sizes[OD_MAX_DIMS];
    memcpy(sizes, self->sizes, sizeof sizes);
    if (self->ndim > 0)
        sizes[d] = numel;
    od_out_spec_init(&outs[0], self->dtype, self->device, sizes, self->ndim);
    *nouts = 1;
    return OD_OK;
}

/* ---- batch norm and group norm --------------------------------------------------
 * The checks of ATen 1.13's native_batch_norm / native_group_norm and their
 * backward, in its order and words. Where torch 1.13's CPU kernel checks nothing
 * and reads out of bounds (a weight or running statistic of the wrong size, an
 * evaluation without running statistics), the message is that of the composite
 * above it (_batch_norm_impl_index), so the answer is the one batch_norm gives. */

static const char *scalar_type_name(od_dtype dt) { return od_dtype_scalar_name(dt); }

static od_status norm_numel_check(const char *what, const od_tensor *t, int64_t C, od_error *err)
{
    if (!t || od_tensor_numel(t) == C)
        return OD_OK;
    return od_error_set(err, OD_EMISMATCH, "%s should contain %" PRId64 " elements not %" PRId64, what, C,
                        od_tensor_numel(t));
}

/* batch norm's parameter dtype rule (ATen's is_mixed_type / check_mixed_data_type):
 * the first defined parameter decides; a bfloat16 input may take float32 ones. */
static od_status bn_param_dtypes(const od_tensor *input, const od_tensor *const *ps, int np, od_dtype *pdt,
                                 od_error *err)
{
    const od_tensor *first = NULL;
    for (int i = 0; i < np && !first; i++)
        first = ps[i];
    *pdt = first ? first->dtype : input->dtype;
    bool mixed = first && first->dtype != input->dtype;
    for (int i = 0; i < np; i++) {
        if (!ps[i])
            continue;
        if (mixed && ps[i]->dtype != OD_FLOAT32)
            return od_error_set(err, OD_EMISMATCH, "mixed dtype (CPU): expect parameter to have scalar type of Float");
        if (!mixed && ps[i]->dtype != input->dtype)
            return od_error_set(err, OD_EMISMATCH, "expected scalar type %s but found %s",
                                scalar_type_name(input->dtype), scalar_type_name(ps[i]->dtype));
    }
    if (mixed && input->dtype != OD_BFLOAT16)
        return od_error_set(err, OD_EMISMATCH, "mixed dtype (CPU): expect input to have scalar type of BFloat16");
    return OD_OK;
}

static od_status norm_double_arg(const od_stack *s, int i, const char *op, const char *name, double *v,
                                 od_error *err)
{
    if (i >= s->nargs || !od_value_is_number(&s->args[i]))
        return od_error_set(err, OD_EINVAL, "%s(): argument '%s' must be a float", op, name);
    *v = od_value_as_double(&s->args[i]);
    return OD_OK;
}

static od_status norm_mask_arg(const od_stack *s, int i, const char *op, bool mask[3], od_error *err)
{
    if (i >= s->nargs || s->args[i].tag != OD_T_BOOL_LIST || s->args[i].u.list.n != 3)
        return od_error_set(err, OD_EINVAL, "%s(): argument 'output_mask' must be a list of 3 bools", op);
    const bool *b = s->args[i].u.list.items;
    for (int k = 0; k < 3; k++)
        mask[k] = b[k];
    return OD_OK;
}

static od_status norm_devices(const char *op, const od_tensor *x, const od_tensor *const *ts, int n, od_error *err)
{
    od_status st;
    for (int i = 0; i < n; i++)
        if ((st = check_same_device(op, x, ts[i], err)))
            return st;
    return OD_OK;
}

static od_status batch_norm_plan(od_opid id, const od_stack *s, od_norm_plan *p, od_error *err)
{
    bool bw = id == OD_OPID_native_batch_norm_backward;
    const char *name = bw ? "native_batch_norm_backward" : "native_batch_norm";
    od_tensor *x = NULL, *go = NULL, *w = NULL, *b = NULL, *rm = NULL, *rv = NULL, *sm = NULL, *si = NULL;
    od_status st;
    int o = bw ? 1 : 0; /* backward's arguments follow grad_out */
    if ((bw && (st = arg_tensor(s, 0, name, "grad_out", &go, err))) ||
        (st = arg_tensor(s, o, name, "input", &x, err)) ||
        (st = arg_opt_tensor(s, o + 1, name, "weight", &w, err)) ||
        (!bw && (st = arg_opt_tensor(s, 2, name, "bias", &b, err))) ||
        (st = arg_opt_tensor(s, bw ? 3 : 3, name, "running_mean", &rm, err)) ||
        (st = arg_opt_tensor(s, 4, name, "running_var", &rv, err)) ||
        (bw && (st = arg_opt_tensor(s, 5, name, "save_mean", &sm, err))) ||
        (bw && (st = arg_opt_tensor(s, 6, name, "save_invstd", &si, err))) ||
        (st = arg_bool(s, bw ? 7 : 5, name, bw ? "train" : "training", &p->train, err)) ||
        (!bw && (st = norm_double_arg(s, 6, name, "momentum", &p->momentum, err))) ||
        (st = norm_double_arg(s, bw ? 8 : 7, name, "eps", &p->eps, err)) ||
        (bw && (st = norm_mask_arg(s, 9, name, p->mask, err))))
        return st;
    p->input = x;
    p->grad_out = go;
    p->weight = w;
    p->bias = b;
    p->rmean = rm;
    p->rvar = rv;
    p->mean = sm;
    p->invstd = si;
    p->G = 1;
    /* input.size(1): torch's own IndexError for a rank below 2 */
    int d1;
    if (x->ndim == 0)
        return od_error_set(err, OD_EINVAL, "Dimension specified as 1 but tensor has no dimensions");
    if ((st = od_wrap_dim(1, x->ndim, &d1, err)))
        return st;
    p->N = x->sizes[0];
    p->C = x->sizes[1];
    p->S = 1;
    for (int d = 2; d < x->ndim; d++)
        p->S *= x->sizes[d];
    if (!od_dtype_is_floating(x->dtype) || x->dtype == OD_FLOAT16)
        return od_error_set(err, OD_EUNSUPPORTED, "\"%s\" not implemented for '%s'",
                            bw ? "batch_norm_backward_cpu" : "batch_norm", od_dtype_scalar_name(x->dtype));
    if (rm)
        st = norm_numel_check("running_mean", rm, p->C, err);
    else if (!p->train)
        st = od_error_set(err, OD_EINVAL, "running_mean must be defined in evaluation mode");
    if (st)
        return st;
    if (rv)
        st = norm_numel_check("running_var", rv, p->C, err);
    else if (!p->train)
        st = od_error_set(err, OD_EINVAL, "running_var must be defined in evaluation mode");
    if (st || (st = norm_numel_check("weight", w, p->C, err)) || (st = norm_numel_check("bias", b, p->C, err)))
        return st;
    /* ATen's CPU kernel reads the running statistics through 1-d accessors */
    for (int k = 0; k < 2; k++) {
        const od_tensor *r = k ? rv : rm;
        if (r && r->ndim != 1)
            return od_error_set(err, OD_EINVAL, "TensorAccessor expected 1 dims but tensor has %d", r->ndim);
    }
    if (bw) {
        if (p->train && (!sm || !si))
            return od_error_set(err, OD_EINVAL, "save_mean and save_invstd must be defined in training mode");
        if (p->train && ((st = norm_numel_check("save_mean", sm, p->C, err)) ||
                         (st = norm_numel_check("save_invstd", si, p->C, err))))
            return st;
        bool same = go->ndim == x->ndim;
        for (int d = 0; same && d < x->ndim; d++)
            same = go->sizes[d] == x->sizes[d];
        if (!same) {
            char a[256], c[256];
            od_shape_print(go->sizes, go->ndim, a, sizeof a);
            od_shape_print(x->sizes, x->ndim, c, sizeof c);
            return od_error_set(err, OD_EMISMATCH, "Expected grad_out of size %s to match input of size %s", a, c);
        }
        if (go->dtype != x->dtype)
            return od_error_set(err, OD_EMISMATCH, "expected scalar type %s but found %s",
                                scalar_type_name(x->dtype), scalar_type_name(go->dtype));
    }
    const od_tensor *ps[6] = {w, b, rm, rv, p->train ? sm : NULL, p->train ? si : NULL};
    if ((st = bn_param_dtypes(x, ps, 6, &p->stat_dtype, err)))
        return st;
    const od_tensor *all[7] = {go, w, b, rm, rv, sm, si};
    return norm_devices(name, x, all, 7, err);
}

static od_status group_norm_plan(od_opid id, const od_stack *s, od_norm_plan *p, od_error *err)
{
    bool bw = id == OD_OPID_native_group_norm_backward;
    const char *name = bw ? "native_group_norm_backward" : "native_group_norm";
    od_tensor *x = NULL, *go = NULL, *w = NULL, *b = NULL, *mean = NULL, *rstd = NULL;
    od_status st;
    int o = bw ? 4 : 3; /* N, C, HxW, group */
    if ((bw && (st = arg_tensor(s, 0, name, "grad_out", &go, err))) ||
        (st = arg_tensor(s, bw ? 1 : 0, name, "input", &x, err)) ||
        (bw && (st = arg_tensor(s, 2, name, "mean", &mean, err))) ||
        (bw && (st = arg_tensor(s, 3, name, "rstd", &rstd, err))) ||
        (st = arg_opt_tensor(s, bw ? 4 : 1, name, "weight", &w, err)) ||
        (!bw && (st = arg_opt_tensor(s, 2, name, "bias", &b, err))) ||
        (st = od_shape_arg_int(s, o + (bw ? 1 : 0), name, "N", &p->N, err)) ||
        (st = od_shape_arg_int(s, o + (bw ? 2 : 1), name, "C", &p->C, err)) ||
        (st = od_shape_arg_int(s, o + (bw ? 3 : 2), name, "HxW", &p->S, err)) ||
        (st = od_shape_arg_int(s, o + (bw ? 4 : 3), name, "group", &p->G, err)) ||
        (!bw && (st = norm_double_arg(s, 7, name, "eps", &p->eps, err))) ||
        (bw && (st = norm_mask_arg(s, 9, name, p->mask, err))))
        return st;
    p->group = true;
    p->input = x;
    p->grad_out = go;
    p->weight = w;
    p->bias = b;
    p->mean = mean;
    p->invstd = rstd;
    p->train = true;
    char xs[256], ws[256];
    od_shape_print(x->sizes, x->ndim, xs, sizeof xs);
    if (p->G <= 0)
        return od_error_set(err, OD_EINVAL, "Expected num groups to be greater than 0, got %" PRId64, p->G);
    if (p->C % p->G != 0)
        return od_error_set(err, OD_EINVAL,
                            "Expected number of channels in input to be divisible by num_groups, but got input "
                            "of shape %s and num_groups=%" PRId64,
                            xs, p->G);
    const od_tensor *wb[2] = {w, b};
    for (int i = 0; i < 2; i++) {
        if (wb[i] && !(wb[i]->ndim == 1 && wb[i]->sizes[0] == p->C)) {
            od_shape_print(wb[i]->sizes, wb[i]->ndim, ws, sizeof ws);
            return od_error_set(err, OD_EMISMATCH,
                                "Expected %s to be a vector of size equal to the number of channels in input, "
                                "but got %s of shape %s and input of shape %s",
                                i ? "bias" : "weight", i ? "bias" : "weight", ws, xs);
        }
    }
    /* N, C and HxW are the caller's numbers: multiplied without overflow (UBSan) */
    int64_t nc = 0, ncs = 0, ng = 0;
    if (p->N < 0 || p->C < 0 || p->S < 0 || __builtin_mul_overflow(p->N, p->C, &nc) ||
        __builtin_mul_overflow(nc, p->S, &ncs) || __builtin_mul_overflow(p->N, p->G, &ng) ||
        od_tensor_numel(x) != ncs)
        return od_error_set(err, OD_EINVAL,
                            "Expected X.numel() == N * C * HxW to be true, but got false.  (Could this error "
                            "message be improved?  If so, please report an enhancement request to PyTorch.)");
    if (!od_dtype_is_floating(x->dtype) || x->dtype == OD_FLOAT16)
        return od_error_set(err, OD_EUNSUPPORTED, "\"%s\" not implemented for '%s'",
                            bw ? "GroupNormBackwardKernelImpl" : "GroupNormKernelImpl", od_dtype_scalar_name(x->dtype));
    if (bw) {
        if (od_tensor_numel(go) != od_tensor_numel(x))
            return od_error_set(err, OD_EMISMATCH, "Expected dY.numel() == N * C * HxW to be true, but got false.");
        if (od_tensor_numel(mean) != ng || od_tensor_numel(rstd) != ng)
            return od_error_set(err, OD_EMISMATCH, "Expected mean.numel() == N * group to be true, but got false.");
    }
    const od_tensor *same[4] = {go, w, b, mean};
    for (int i = 0; i < 4; i++)
        if (same[i] && same[i]->dtype != x->dtype)
            return od_error_set(err, OD_EMISMATCH, "expected scalar type %s but found %s",
                                scalar_type_name(x->dtype), scalar_type_name(same[i]->dtype));
    if (rstd && rstd->dtype != x->dtype)
        return od_error_set(err, OD_EMISMATCH, "expected scalar type %s but found %s", scalar_type_name(x->dtype),
                            scalar_type_name(rstd->dtype));
    p->stat_dtype = x->dtype;
    const od_tensor *all[5] = {go, w, b, mean, rstd};
    return norm_devices(name, x, all, 5, err);
}

od_status od_norm_plan_of(od_opid id, const od_stack *s, od_norm_plan *p, od_error *err)
{
    memset(p, 0, sizeof *p);
    p->backward = id == OD_OPID_native_batch_norm_backward || id == OD_OPID_native_group_norm_backward;
    if (id == OD_OPID_native_group_norm || id == OD_OPID_native_group_norm_backward)
        return group_norm_plan(id, s, p, err);
    return batch_norm_plan(id, s, p, err);
}

/* Outputs: forward (output like input, two statistics: batch norm's [C] in
 * training and [0] in evaluation, group norm's [N, group]); backward (grad_input
 * like input, grad_weight and grad_bias [C]; a masked-out one is None, which the
 * kernels return and Meta describes as an empty tensor). */
od_status od_shape_norm(od_opid id, const od_stack *s, od_out_spec *outs, int *nouts, od_error *err)
{
    od_norm_plan p;
    od_status st = od_norm_plan_of(id, s, &p, err);
    if (st)
        return st;
    const od_tensor *x = p.input;
    od_out_spec_init(&outs[0], x->dtype, x->device, x->sizes, x->ndim);
    int64_t c = p.C, ng[2] = {p.N, p.G}, zero = 0;
    if (p.backward) {
        if (!p.mask[0])
            od_out_spec_init(&outs[0], x->dtype, x->device, &zero, 1);
        for (int i = 1; i < 3; i++)
            od_out_spec_init(&outs[i], p.stat_dtype, x->device, p.mask[i] ? &c : &zero, 1);
    } else if (p.group) {
        od_out_spec_init(&outs[1], p.stat_dtype, x->device, ng, 2);
        od_out_spec_init(&outs[2], p.stat_dtype, x->device, ng, 2);
    } else {
        od_out_spec_init(&outs[1], p.stat_dtype, x->device, p.train ? &c : &zero, 1);
        od_out_spec_init(&outs[2], p.stat_dtype, x->device, p.train ? &c : &zero, 1);
    }
    *nouts = 3;
    return OD_OK;
}
