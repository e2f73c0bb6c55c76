/* indexing.c — masked_select, composed of operators every backend has
 * (expand, ne, reshape, nonzero, index_select).
 *
 * Invariants: CompositeExplicitAutograd (MaskedSelectBackward0 in
 * formulas.c; the calls inside run below Autograd), so one kernel serves
 * CPU and CUDA; Meta is refused, as torch's Meta refuses masked_select
 * (its size depends on the data).
 * Arguments are checked first with PyTorch 1.13's messages and order: the
 * mask's dtype, then broadcasting (mask is tensor a, self b), then a byte
 * mask's values (ATen's CPU kernel reads 0 and 1 only).
 */
#include <string.h>

#include "composite.h"

static od_status call1(od_opid id, od_value *a, int n, od_tensor **out, od_error *err)
{
    return od_call_builtin1(id, a, n, out, err);
}

/* *t (owned) becomes r (new). */
static void replace(od_tensor **t, od_tensor *r)
{
    od_tensor_release(*t);
    *t = r;
}

/* A byte mask's largest value (on the host), for ATen's 0-or-1 check. */
static od_status byte_mask_max(od_tensor *mask, int64_t *out, od_error *err)
{
    od_tensor *m = NULL, *h = NULL;
    od_value a[4] = {od_tensor_v(mask), od_list_v(OD_T_INT_LIST, NULL, 0), od_bool(false)};
    od_status st = call1(OD_OPID_amax, a, 3, &m, err);
    if (!st) {
        od_value b[7] = {od_tensor_v(m), od_dtype_v(OD_INT64), od_none(), od_device_v((od_device){OD_DEV_CPU, 0}), od_none(),
                         od_bool(false), od_none()};
        st = call1(OD_OPID__to_copy, b, 7, &h, err);
    }
    if (!st)
        *out = *(const int64_t *)od_tensor_data(h);
    od_tensor_release(m);
    od_tensor_release(h);
    return st;
}

OD_CX_KERNEL(od_cea_masked_select)
{
    (void)ctx;
    (void)ks;
    od_tensor *self, *mask;
    od_status st;
    if ((st = od_cx_arg_tensor(op, s, 0, &self, err)) || (st = od_cx_arg_tensor(op, s, 1, &mask, err)))
        return st;
    if (self->device.type == OD_DEV_META || mask->device.type == OD_DEV_META)
        return od_error_set(err, OD_ENOKERNEL,
                            "Could not run 'aten::masked_select' with arguments from the 'Meta' backend: its "
                            "result's size depends on the data");
    if (mask->dtype != OD_BOOL && mask->dtype != OD_UINT8)
        return od_error_set(err, OD_EMISMATCH, "masked_select: expected BoolTensor or ByteTensor for mask");
    int64_t shape[OD_MAX_DIMS], numel = 1;
    int nd = 0;
    if ((st = od_broadcast_shapes(mask->sizes, mask->ndim, self->sizes, self->ndim, shape, &nd, err)))
        return st;
    for (int k = 0; k < nd; k++)
        numel *= shape[k];
    if (mask->dtype == OD_UINT8 && numel > 0 && mask->device.type != OD_DEV_META) {
        int64_t mx = 0;
        if ((st = byte_mask_max(mask, &mx, err)))
            return st;
        if (mx > 1)
            return od_error_set(err, OD_EINVAL, "Mask tensor can take 0 and 1 values only");
    }
    od_tensor *m = NULL, *x = NULL, *r = NULL, *t = NULL;
    int64_t flat = -1;
    st = od_cx_expand(mask, shape, nd, &m, err);
    if (!st)
        st = od_cx_expand(self, shape, nd, &x, err);
    if (!st && mask->dtype != OD_BOOL) {
        od_value a[2] = {od_tensor_v(m), od_int(0)};
        if (!(st = call1(OD_OPID_ne_Scalar, a, 2, &t, err)))
            replace(&m, t);
    }
    if (!st && !(st = od_cx_reshape(m, &flat, 1, &t, err)))
        replace(&m, t);
    if (!st) {
        od_value a[1] = {od_tensor_v(m)};
        if (!(st = call1(OD_OPID_nonzero, a, 1, &t, err))) /* [k, 1] */
            replace(&m, t);
    }
    if (!st && !(st = od_cx_reshape(m, &flat, 1, &t, err)))
        replace(&m, t);
    if (!st && !(st = od_cx_reshape(x, &flat, 1, &t, err)))
        replace(&x, t);
    if (!st) {
        od_value a[3] = {od_tensor_v(x), od_int(0), od_tensor_v(m)};
        st = call1(OD_OPID_index_select, a, 3, &r, err);
    }
    od_tensor_release(m);
    od_tensor_release(x);
    if (st) {
        od_tensor_release(r);
        return st;
    }
    return od_cx_return1(s, r);
}
