/* shape_scan.c — shape and dtype functions of the scans (cumsum, cumprod,
 * logcumsumexp, cummax, cummin) and the sorting operators (sort, sort.stable,
 * topk, kthvalue), plus the parsed arguments their kernels share.
 *
 * Invariants: like shape_reduce.c, nothing here touches tensor data or
 * allocates; arguments are borrowed from the boxed stack and a value of the
 * wrong tag is OD_EINVAL naming the argument. The checks follow PyTorch
 * 1.13's meta functions and messages; the dtype refusals of ATen's kernels
 * (skipped for 0-dim or empty inputs where ATen returns before
 * dispatching) live in od_scan_check_dtype, called by the backends after the
 * shape function.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "od_half.h"
#include "od_shape.h"
#include "od_sort_algo.h"

static const char *short_name(od_opid id)
{
    switch (id) {
    case OD_OPID_cumsum: return "cumsum";
    case OD_OPID_cumprod: return "cumprod";
    case OD_OPID_logcumsumexp: return "logcumsumexp";
    case OD_OPID_cummax: return "cummax";
    case OD_OPID_cummin: return "cummin";
    case OD_OPID_topk: return "topk";
    case OD_OPID_kthvalue: return "kthvalue";
    case OD_OPID_median: case OD_OPID_median_dim: return "median";
    case OD_OPID_nanmedian: case OD_OPID_nanmedian_dim: return "nanmedian";
    case OD_OPID_mode: return "mode";
    default: return "sort";
    }
}

static od_status get_bool(const od_stack *s, int i, const char *op, const char *name, bool *out,
                          od_error *err)
{
    if (i >= s->nargs || (s->args[i].tag != OD_T_BOOL && s->args[i].tag != OD_T_INT))
        return od_error_set(err, OD_EINVAL, "%s(): argument '%s' must be a bool", op, name);
    *out = s->args[i].tag == OD_T_BOOL ? s->args[i].u.b : s->args[i].u.i != 0;
    return OD_OK;
}

od_status od_scan_parse(od_opid id, const od_stack *s, od_scan_info *info, od_error *err)
{
    const char *op = short_name(id);
    memset(info, 0, sizeof *info);
    if (s->nargs < 1 || s->args[0].tag != OD_T_TENSOR || !s->args[0].u.t)
        return od_error_set(err, OD_EINVAL, "%s(): argument 'self' must be a Tensor", op);
    const od_tensor *self = s->args[0].u.t;
    int64_t dim = -1;
    od_status st;
    int nd = self->ndim;
    switch (id) {
    case OD_OPID_cumsum:
    case OD_OPID_cumprod:
    case OD_OPID_logcumsumexp:
    case OD_OPID_cummax:
    case OD_OPID_cummin:
        if ((st = od_shape_arg_int(s, 1, op, "dim", &dim, err)))
            return st;
        info->out_dtype = self->dtype;
        if (id == OD_OPID_cumsum || id == OD_OPID_cumprod) {
            const od_value *dt = s->nargs > 2 ? &s->args[2] : NULL;
            if (dt && dt->tag == OD_T_DTYPE && (unsigned)dt->u.dtype < OD_NUM_DTYPES)
                info->out_dtype = dt->u.dtype;
            else if (dt && dt->tag != OD_T_NONE)
                return od_error_set(err, OD_EINVAL, "%s(): argument 'dtype' must be a ScalarType or None", op);
            else if (od_dtype_is_integral(self->dtype, true))
                info->out_dtype = OD_INT64;
        }
        break;
    case OD_OPID_sort:
        if ((st = od_shape_arg_int(s, 1, op, "dim", &dim, err)) ||
            (st = get_bool(s, 2, op, "descending", &info->descending, err)))
            return st;
        break;
    case OD_OPID_sort_stable:
        if (s->nargs < 2 || s->args[1].tag == OD_T_NONE)
            return od_error_set(err, OD_EINVAL,
                                "stable.has_value() INTERNAL ASSERT FAILED at "
                                "\"./aten/src/ATen/native/Sorting.cpp\":42, please report a bug to "
                                "PyTorch. sort(): c10::optional<bool> for stable has to have value.");
        if ((st = get_bool(s, 1, op, "stable", &info->stable, err)) ||
            (st = od_shape_arg_int(s, 2, op, "dim", &dim, err)) ||
            (st = get_bool(s, 3, op, "descending", &info->descending, err)))
            return st;
        break;
    case OD_OPID_topk:
        if ((st = od_shape_arg_int(s, 1, op, "k", &info->k, err)) || (st = od_shape_arg_int(s, 2, op, "dim", &dim, err)) ||
            (st = get_bool(s, 3, op, "largest", &info->descending, err)) ||
            (st = get_bool(s, 4, op, "sorted", &info->sorted, err)))
            return st;
        break;
    case OD_OPID_kthvalue:
        if ((st = od_shape_arg_int(s, 1, op, "k", &info->k, err)) || (st = od_shape_arg_int(s, 2, op, "dim", &dim, err)) ||
            (st = get_bool(s, 3, op, "keepdim", &info->keepdim, err)))
            return st;
        break;
    case OD_OPID_median_dim:
    case OD_OPID_nanmedian_dim:
    case OD_OPID_mode:
        if ((st = od_shape_arg_int(s, 1, op, "dim", &dim, err)) ||
            (st = get_bool(s, 2, op, "keepdim", &info->keepdim, err)))
            return st;
        break;
    case OD_OPID_median:
    case OD_OPID_nanmedian: /* the whole tensor as one line */
        info->outer = info->inner = 1;
        info->size = od_tensor_numel(self);
        return OD_OK;
    default:
        return od_error_set(err, OD_EINTERNAL, "od_scan_parse: not a scan or sort");
    }
    int d = 0;
    /* cummax_out fills a 0-dim result and returns an empty one before it
     * wraps dim, so those take any dim. */
    bool skip = (id == OD_OPID_cummax || id == OD_OPID_cummin) && (nd == 0 || od_tensor_numel(self) == 0);
    if (!skip && (st = od_wrap_dim(dim, nd, &d, err)))
        return st;
    info->dim = d;
    info->outer = info->inner = 1;
    info->size = nd ? self->sizes[d] : 1;
    for (int k = 0; k < nd; k++) {
        /* an empty tensor may have huge other dims: saturate (no kernel
         * loops over an empty one) rather than overflow */
        int64_t *p = k < d ? &info->outer : k > d ? &info->inner : NULL;
        if (p && __builtin_mul_overflow(*p, self->sizes[k], p))
            *p = INT64_MAX;
    }
    if (id == OD_OPID_topk && (info->k < 0 || info->k > info->size))
        return od_error_set(err, OD_EINVAL, "selected index k out of range");
    if ((id == OD_OPID_median_dim || id == OD_OPID_nanmedian_dim || id == OD_OPID_mode) && nd > 0 &&
        self->sizes[d] == 0) /* nanmedian.dim shares median's check, and its words */
        return od_error_set(err, OD_EINVAL, "%s(): Expected reduction dim %d to have non-zero size.",
                            id == OD_OPID_nanmedian_dim ? "median" : op, d);
    if (id == OD_OPID_kthvalue) {
        if (nd > 0 && self->sizes[d] == 0)
            return od_error_set(err, OD_EINVAL, "kthvalue(): Expected reduction dim %d to have non-zero size.", d);
        if (info->k < 1 || info->k > info->size)
            return od_error_set(err, OD_EINVAL, "kthvalue(): selected number k out of range for dimension %d", d);
    }
    return OD_OK;
}

/* ATen's CPU dispatch macros: which dtypes have a kernel. CPU 1.13 has no
 * float16 cumsum/cumprod/cummax/cummin/topk/kthvalue/logcumsumexp (sort has
 * one). CUDA takes the same rule and message, so the backends agree (the
 * CPU kernels are the reference of the GPU tests). */
od_status od_scan_check_dtype(od_opid id, const od_stack *s, const od_scan_info *info, od_error *err)
{
    const od_tensor *self = s->args[0].u.t;
    int64_t numel = od_tensor_numel(self);
    od_dtype dt = self->dtype;
    const char *kname = NULL;
    bool ok = true;
    switch (id) {
    case OD_OPID_cumsum:
    case OD_OPID_cumprod:
        if (self->ndim == 0 || numel == 0)
            return OD_OK; /* filled or zeroed before dispatch */
        dt = info->out_dtype;
        ok = dt != OD_BOOL && dt != OD_FLOAT16;
        kname = id == OD_OPID_cumsum ? "cumsum_out_cpu" : "cumprod_out_cpu";
        break;
    case OD_OPID_logcumsumexp:
        ok = dt == OD_FLOAT32 || dt == OD_FLOAT64 || dt == OD_BFLOAT16;
        kname = "logcumsumexp_out_cpu";
        break;
    case OD_OPID_cummax:
    case OD_OPID_cummin:
        if (self->ndim == 0 || numel == 0)
            return OD_OK;
        ok = dt != OD_FLOAT16;
        kname = id == OD_OPID_cummax ? "cummax_cpu" : "cummin_cpu";
        break;
    case OD_OPID_topk:
        if (self->ndim == 0)
            return OD_OK;
        ok = dt != OD_BOOL && dt != OD_FLOAT16;
        kname = "topk_cpu";
        break;
    case OD_OPID_kthvalue:
        if (self->ndim == 0)
            return OD_OK;
        ok = dt != OD_BOOL && dt != OD_FLOAT16;
        kname = "kthvalue_cpu";
        break;
    case OD_OPID_median:
    case OD_OPID_nanmedian:
        if (numel == 0)
            return OD_OK; /* median_impl returns NaN before it dispatches */
        /* fall through */
    case OD_OPID_median_dim:
    case OD_OPID_nanmedian_dim:
        ok = dt != OD_BOOL && dt != OD_FLOAT16;
        kname = id == OD_OPID_median || id == OD_OPID_nanmedian ? "median_cpu" : "median_out";
        break;
    default:
        return OD_OK; /* sort and mode take every dtype */
    }
    if (ok)
        return OD_OK;
    return od_error_set(err, OD_EUNSUPPORTED, "\"%s\" not implemented for '%s'", kname, od_dtype_scalar_name(dt));
}

od_status od_scan_check_fill(od_dtype self_dt, const void *elem, od_dtype out_dt, od_error *err)
{
    od_value v;
    switch (self_dt) {
    case OD_BOOL: v = od_bool(*(const bool *)elem); break;
    case OD_UINT8: v = od_int(*(const uint8_t *)elem); break;
    case OD_INT8: v = od_int(*(const int8_t *)elem); break;
    case OD_INT16: v = od_int(*(const int16_t *)elem); break;
    case OD_INT32: v = od_int(*(const int32_t *)elem); break;
    case OD_INT64: v = od_int(*(const int64_t *)elem); break;
    case OD_FLOAT16: v = od_double(od_half_to_float(*(const uint16_t *)elem)); break;
    case OD_BFLOAT16: v = od_double(od_bf16_to_float(*(const uint16_t *)elem)); break;
    case OD_FLOAT32: v = od_double(*(const float *)elem); break;
    default: v = od_double(*(const double *)elem); break;
    }
    return od_scalar_check_fits(&v, out_dt, err);
}

od_status od_shape_scan(od_opid id, const od_stack *s, od_out_spec *outs, int *nouts, od_error *err)
{
    od_scan_info info;
    od_status st = od_scan_parse(id, s, &info, err);
    if (st)
        return st;
    const od_tensor *self = s->args[0].u.t;
    int64_t sizes[OD_MAX_DIMS];
    int nd = self->ndim;
    if (nd > 0)
        memcpy(sizes, self->sizes, (size_t)nd * sizeof sizes[0]);
    od_dtype vdt = self->dtype;
    int n = 2;
    switch (id) {
    case OD_OPID_cumsum:
    case OD_OPID_cumprod:
    case OD_OPID_logcumsumexp:
        vdt = info.out_dtype;
        n = 1;
        break;
    case OD_OPID_topk:
        if (nd > 0)
            sizes[info.dim] = info.k;
        break;
    case OD_OPID_median:
    case OD_OPID_nanmedian:
        nd = 0;
        n = 1;
        break;
    case OD_OPID_kthvalue:
    case OD_OPID_median_dim:
    case OD_OPID_nanmedian_dim:
    case OD_OPID_mode:
        if (nd > 0) {
            if (info.keepdim) {
                sizes[info.dim] = 1;
            } else {
                memmove(sizes + info.dim, sizes + info.dim + 1, (size_t)(nd - info.dim - 1) * sizeof sizes[0]);
                nd--;
            }
        }
        break;
    default:
        break;
    }
    for (int i = 0; i < n; i++) {
        od_out_spec *o = &outs[i];
        memset(o, 0, sizeof *o);
        o->dtype = i == 0 ? vdt : OD_INT64;
        o->device = self->device;
        o->ndim = nd;
        if (nd > 0)
            memcpy(o->sizes, sizes, (size_t)nd * sizeof sizes[0]);
        o->alias_of = -1;
    }
    *nouts = n;
    return OD_OK;
}

int od_sort_op_of(od_opid id, const od_scan_info *info)
{
    switch (id) {
    case OD_OPID_topk: return OD_SORT_OP_TOPK;
    case OD_OPID_kthvalue: return OD_SORT_OP_KTHVALUE;
    case OD_OPID_median_dim: return OD_SORT_OP_MEDIAN;
    case OD_OPID_nanmedian_dim: return OD_SORT_OP_NANMEDIAN;
    case OD_OPID_median: return OD_SORT_OP_MEDIAN_ALL;
    case OD_OPID_nanmedian: return OD_SORT_OP_NANMEDIAN_ALL;
    case OD_OPID_mode: return OD_SORT_OP_MODE;
    default: return id == OD_OPID_sort_stable && info->stable ? OD_SORT_OP_SORT_STABLE : OD_SORT_OP_SORT;
    }
}
