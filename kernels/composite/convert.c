/* convert.c — aten::_to_copy and aten::to (dtype / device conversion).
 *
 * Invariants: _to_copy always returns a fresh tensor; it allocates on the
 * target device and moves the data with aten::copy_ through the dispatcher,
 * whose key set then holds both devices (so a CPU<->CUDA copy lands on the
 * CUDA backend, which owns cross-device copies). Meta tensors carry no data:
 * converting to meta copies nothing, converting out of meta is an error.
 * aten::to aliases self exactly when torch does (to_will_alias): nothing
 * changes and copy=False.
 */
#include <string.h>

#include "composite.h"
#include "od_shape.h"

/* Destination for self laid out as empty_like(self, memory_format=mf) would
 * be, through the same allocation as every kernel's output. */
static od_status alloc_like(od_tensor *self, od_dtype dtype, od_device dev, int mf,
                            od_tensor **out, od_error *err)
{
    od_out_spec sp;
    memset(&sp, 0, sizeof sp);
    sp.dtype = dtype;
    sp.device = dev;
    sp.ndim = self->ndim;
    memcpy(sp.sizes, self->sizes, sizeof(int64_t) * (size_t)self->ndim);
    sp.alias_of = -1;
    od_status st = od_out_spec_layout(&sp, self, (od_memory_format)mf, err);
    return st ? st : od_alloc_outputs_overwrite(NULL, &sp, 1, out, err); /* copy_ writes every element */
}

OD_CX_KERNEL(od_cea_to_copy)
{
    (void)ctx;
    (void)ks;
    od_tensor *self;
    bool has_dtype, has_dev, non_blocking;
    od_dtype dtype;
    od_device dev;
    int mf;
    od_status st;
    if ((st = od_cx_arg_tensor(op, s, 0, &self, err)) ||
        (st = od_cx_arg_opt_dtype(op, s, 1, &has_dtype, &dtype, err)) ||
        (st = od_cx_check_layout(op, s, 2, err)) ||
        (st = od_cx_arg_opt_device(op, s, 3, &has_dev, &dev, err)) ||
        (st = od_cx_check_pin_memory(op, s, 4, err)) ||
        (st = od_cx_arg_bool(op, s, 5, &non_blocking, err)) ||
        (st = od_cx_arg_memory_format(op, s, 6, &mf, err)))
        return st;
    if (!has_dtype)
        dtype = self->dtype;
    if (!has_dev)
        dev = self->device;
    if (self->device.type == OD_DEV_META && dev.type != OD_DEV_META)
        return od_error_set(err, OD_EUNSUPPORTED, "Cannot copy out of meta tensor; no data!");

    od_tensor *dst = NULL;
    if ((st = alloc_like(self, dtype, dev, mf, &dst, err)))
        return st;
    if (dev.type == OD_DEV_META) /* shapes only: nothing to move */
        return od_cx_return1(s, dst);

    od_value a[3] = {od_tensor_v(dst), od_tensor_v(self), od_bool(non_blocking)};
    od_stack cs;
    st = od_call_builtin(OD_OPID_copy_, a, 3, &cs, err);
    if (st) {
        od_tensor_release(dst);
        return st;
    }
    od_stack_release_rets(&cs); /* copy_ returns dst itself */
    return od_cx_return1(s, dst);
}

/* to.dtype(self, dtype, non_blocking, copy, memory_format) and
 * to.device(self, device, dtype, non_blocking, copy, memory_format). */
OD_CX_KERNEL(od_cia_to)
{
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    int base = id == OD_OPID_to_device ? 1 : 0; /* to.device has one more leading argument */
    od_tensor *self;
    od_device dev;
    bool has_dtype, non_blocking, copy;
    od_dtype dtype;
    int mf;
    od_status st;
    if ((st = od_cx_arg_tensor(op, s, 0, &self, err)))
        return st;
    dev = self->device;
    if (base) {
        bool has_dev;
        if ((st = od_cx_arg_opt_device(op, s, 1, &has_dev, &dev, err)))
            return st;
        if (!has_dev)
            return od_error_set(err, OD_EINVAL,
                                "to(): argument 'device' (position 2) must be torch.device, not None");
    }
    if ((st = od_cx_arg_opt_dtype(op, s, base + 1, &has_dtype, &dtype, err)) ||
        (st = od_cx_arg_bool(op, s, base + 2, &non_blocking, err)) ||
        (st = od_cx_arg_bool(op, s, base + 3, &copy, err)) ||
        (st = od_cx_arg_memory_format(op, s, base + 4, &mf, err)))
        return st;
    if (!has_dtype)
        return od_error_set(err, OD_EINVAL,
                            "to(): argument 'dtype' (position %d) must be torch.dtype, not None",
                            base + 2);
    /* torch's to_will_alias */
    if (!copy && dtype == self->dtype && od_device_eq(dev, self->device) &&
        (mf == OD_MF_PRESERVE || (int)od_tensor_suggest_memory_format(self) == mf)) {
        od_tensor_retain(self);
        return od_cx_return1(s, self);
    }
    od_value a[7] = {od_tensor_v(self), od_dtype_v(dtype), od_none(), od_device_v(dev),
                     od_none(),         od_bool(non_blocking), mf == OD_MF_PRESERVE ? od_none() : od_int(mf)};
    od_tensor *out = NULL;
    if ((st = od_call_builtin1(OD_OPID__to_copy, a, 7, &out, err)))
        return st;
    return od_cx_return1(s, out);
}
