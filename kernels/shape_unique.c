/* shape_unique.c — argument checks of the operators whose result size
 * depends on the data: repeat_interleave.Tensor and unique_consecutive.
 *
 * Invariants: as nonzero's, these shape functions validate the arguments
 * (torch 1.13's checks, order and text) and then refuse (OD_ENOKERNEL): that
 * is their Meta kernel's answer; the CPU and CUDA kernels call the
 * od_*_check functions, count, and build their own od_out_spec. Nothing
 * here touches tensor data or allocates.
 */
#include <inttypes.h>
#include <string.h>

#include "od_shape.h"

od_status od_repeat_interleave_check(const od_stack *s, const od_tensor **repeats, bool *has_size, int64_t *size,
                                     od_error *err)
{
    if (s->nargs < 2 || s->args[0].tag != OD_T_TENSOR || !s->args[0].u.t)
        return od_error_set(err, OD_EINVAL, "repeat_interleave(): argument 'repeats' must be a Tensor");
    const od_tensor *r = s->args[0].u.t;
    *repeats = r;
    *has_size = s->args[1].tag == OD_T_INT;
    *size = *has_size ? s->args[1].u.i : 0;
    if (r->dtype != OD_INT64 && r->dtype != OD_INT32)
        return od_error_set(err, OD_EUNSUPPORTED, "\"repeat_interleave_cpu\" not implemented for '%s'",
                            od_dtype_scalar_name(r->dtype));
    if (r->ndim != 1)
        return od_error_set(err, OD_EINVAL, "repeat_interleave only accept 1D vector as repeat");
    return OD_OK;
}

od_status od_unique_consecutive_check(const od_stack *s, const od_tensor **self, bool *inverse, bool *counts,
                                      int *dim, od_error *err)
{
    if (s->nargs < 4 || s->args[0].tag != OD_T_TENSOR || !s->args[0].u.t || s->args[1].tag != OD_T_BOOL ||
        s->args[2].tag != OD_T_BOOL)
        return od_error_set(err, OD_EINVAL, "unique_consecutive(): expected (Tensor, bool, bool, int?)");
    const od_tensor *x = s->args[0].u.t;
    *self = x;
    *inverse = s->args[1].u.b;
    *counts = s->args[2].u.b;
    *dim = -1;
    /* dim=0 of a 1-D tensor takes the path without dim (ATen's own test) */
    if (s->args[3].tag == OD_T_INT && !(s->args[3].u.i == 0 && x->ndim == 1)) {
        int64_t d = s->args[3].u.i;
        od_status st = od_wrap_dim_strict(d, x->ndim, dim, err);
        if (st)
            return st;
        if (x->dtype == OD_FLOAT16)
            return od_error_set(err, OD_EUNSUPPORTED, "\"unique_dim\" not implemented for 'Half'");
        int zeros = 0;
        for (int k = 0; k < x->ndim; k++)
            zeros += x->sizes[k] == 0;
        if (zeros > 1)
            return od_error_set(err, OD_EINVAL,
                                "Number of zero sized dimensions is more than one, so unique cannot be applied ");
        if (od_tensor_numel(x) == 0 && x->sizes[*dim] != 0)
            return od_error_set(err, OD_EINVAL,
                                "There are 0 sized dimensions, and they aren't selected, so unique cannot be applied");
    } else if (s->args[3].tag != OD_T_NONE && s->args[3].tag != OD_T_INT) {
        return od_error_set(err, OD_EINVAL, "unique_consecutive(): argument 'dim' must be int or None");
    } else if (x->dtype == OD_FLOAT16) {
        return od_error_set(err, OD_EUNSUPPORTED, "\"unique\" not implemented for 'Half'");
    }
    return OD_OK;
}

od_status od_shape_data_sized(od_opid id, const od_stack *s, od_out_spec *outs, int *nouts, od_error *err)
{
    (void)outs;
    (void)nouts;
    od_status st;
    const char *name;
    if (id == OD_OPID_repeat_interleave_Tensor) {
        const od_tensor *r;
        bool has;
        int64_t n;
        if ((st = od_repeat_interleave_check(s, &r, &has, &n, err)))
            return st;
        name = "repeat_interleave.Tensor";
    } else {
        const od_tensor *x;
        bool a, b;
        int d;
        if ((st = od_unique_consecutive_check(s, &x, &a, &b, &d, err)))
            return st;
        name = "unique_consecutive";
    }
    return od_error_set(err, OD_ENOKERNEL,
                        "Could not run 'aten::%s' with arguments from the 'Meta' backend: its result's size depends "
                        "on the data",
                        name);
}
