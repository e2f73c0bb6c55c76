/* factories.c — factory operators: the BackendSelect kernel that picks a
 * backend from the Device argument, and the CompositeExplicitAutograd
 * kernel of empty / zeros / ones / full, and that of the *_like and new_*
 * factories, which take self's dtype, device (and layout) as defaults.
 *
 * Invariants: a factory has no tensor argument, so its call reaches
 * BackendSelect (in the default included set); od_bs_factory adds the backend
 * key of the requested device (cpu when None) to the keys below
 * BackendSelect and redispatches, never reading TLS or scanning arguments.
 * od_cea_factory then runs on that backend's slot: the shape function (the
 * single source of truth for output shape, dtype and device, and the
 * argument checks) describes the output, od_alloc_outputs allocates it, and
 * zeros / ones / full fill it with aten::fill_ through the dispatcher. The
 * Device argument's position is looked up by name once, at registration.
 */
#include <stdint.h>
#include <string.h>

#include "composite.h"
#include "od_shape.h"

/* Position of each built-in's Device argument (-1: none), for BackendSelect. */
static int8_t g_device_arg[OD_NUM_BUILTIN_OPS];

void od_cx_factories_init(void)
{
    for (int id = 0; id < OD_NUM_BUILTIN_OPS; id++) {
        const od_op *op = od_builtin((od_opid)id);
        g_device_arg[id] = op ? (int8_t)od_cx_arg_index(op, "device") : -1;
    }
}

OD_CX_KERNEL(od_bs_factory)
{
    od_opid id = OD_OPID_OF_CTX(ctx);
    od_device dev = {OD_DEV_CPU, 0};
    bool has_dev = false;
    int di = (unsigned)id < OD_NUM_BUILTIN_OPS ? g_device_arg[id] : -1;
    if (di < 0)
        return od_error_set(err, OD_EINTERNAL, "%s has no 'device' argument for BackendSelect",
                            od_op_name(op));
    od_status st = od_cx_arg_opt_device(op, s, di, &has_dev, &dev, err);
    if (st)
        return st;
    if (!has_dev)
        dev = (od_device){OD_DEV_CPU, 0};
    od_keyset next = (ks & od_ks_below(OD_KEY_BackendSelect)) | OD_KS(od_device_key(dev));
    return od_call_with_keys(op, next, s, err);
}

/* Fills out (new, consumed) with fill through aten::fill_ and returns it. */
static od_status fill_and_return(od_stack *s, od_tensor *out, od_value fill, od_error *err)
{
    od_value a[2] = {od_tensor_v(out), fill};
    od_stack fs;
    od_status st = od_call_builtin(OD_OPID_fill__Scalar, a, 2, &fs, err);
    if (st) {
        od_tensor_release(out);
        return st;
    }
    od_stack_release_rets(&fs); /* fill_ returns out itself */
    return od_cx_return1(s, out);
}

OD_CX_KERNEL(od_cea_factory)
{
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    od_shape_fn shape = od_builtin_shape_fn(id);
    if (!shape)
        return od_error_set(err, OD_EINTERNAL, "%s is not a factory with a shape function",
                            od_op_name(op));
    /* The shape function validates size, dtype, layout, device, pin_memory
     * and memory_format, and infers full's dtype from its fill value. */
    od_out_spec spec[OD_MAX_RETURNS];
    int n = 0;
    od_status st = shape(id, s, spec, &n, err);
    if (st)
        return st;
    if (n != 1 || spec[0].alias_of >= 0)
        return od_error_set(err, OD_EINTERNAL, "shape function of %s described %d outputs",
                            od_op_name(op), n);
    od_tensor *out = NULL;
    if ((st = od_alloc_outputs(s, spec, 1, &out, err)))
        return st;

    od_value fill;
    switch (id) {
    case OD_OPID_zeros: fill = od_int(0); break;
    case OD_OPID_ones: fill = od_int(1); break;
    case OD_OPID_full: fill = s->args[1]; break;
    default:
        /* empty: CPU memory comes zeroed from the allocator; a device's
         * cached block may hold another request's bytes, so clear it. */
        if (out->device.type == OD_DEV_CPU || out->device.type == OD_DEV_META)
            return od_cx_return1(s, out);
        fill = od_int(0);
        break;
    }
    return fill_and_return(s, out, fill, err);
}

/* zeros_like / ones_like / full_like / empty_like (self, [fill_value], *,
 * dtype, layout, device, pin_memory, memory_format): self's shape, and its
 * dtype and device unless asked otherwise; laid out by empty_like's rule
 * (self's strides kept under preserve_format when self is dense). new_zeros /
 * new_ones / new_full / new_empty (self, size, [fill_value], *, dtype,
 * layout, device, pin_memory): the factory of that name with self's dtype and
 * device as defaults, through the dispatcher. Outputs never require grad. */
OD_CX_KERNEL(od_cea_like)
{
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    bool is_new = id == OD_OPID_new_zeros || id == OD_OPID_new_ones || id == OD_OPID_new_full ||
                  id == OD_OPID_new_empty;
    bool has_fill = id == OD_OPID_full_like || id == OD_OPID_new_full;
    int k = 1 + is_new + has_fill; /* dtype's position */
    od_tensor *self;
    bool has_dt, has_dev;
    od_dtype dt;
    od_device dev;
    od_status st;
    if ((st = od_cx_arg_tensor(op, s, 0, &self, err)) ||
        (st = od_cx_arg_opt_dtype(op, s, k, &has_dt, &dt, err)) ||
        (st = od_cx_check_layout(op, s, k + 1, err)) ||
        (st = od_cx_arg_opt_device(op, s, k + 2, &has_dev, &dev, err)) ||
        (st = od_cx_check_pin_memory(op, s, k + 3, err)))
        return st;
    if (s->args[k + 3].tag == OD_T_BOOL && s->args[k + 3].u.b) /* the factories' refusal */
        return od_error_set(err, OD_EUNSUPPORTED,
                            "%s(): pinned memory is not supported; pass pin_memory=False or None",
                            od_op_schema(op)->name);
    if (!has_dt)
        dt = self->dtype;
    if (!has_dev)
        dev = self->device;
    od_value fill = has_fill ? s->args[k - 1] : od_int(id == OD_OPID_ones_like || id == OD_OPID_new_ones);

    if (is_new) {
        od_opid f = id == OD_OPID_new_zeros ? OD_OPID_zeros
                    : id == OD_OPID_new_ones ? OD_OPID_ones
                    : id == OD_OPID_new_full ? OD_OPID_full
                                             : OD_OPID_empty_memory_format;
        od_value a[7];
        int n = 0;
        a[n++] = s->args[1];
        if (has_fill)
            a[n++] = fill;
        a[n++] = od_dtype_v(dt);
        a[n++] = od_none(); /* layout: checked above */
        a[n++] = od_device_v(dev);
        a[n++] = od_none(); /* pin_memory: checked above */
        if (f == OD_OPID_empty_memory_format)
            a[n++] = od_none();
        od_tensor *out = NULL;
        if ((st = od_call_builtin1(f, a, n, &out, err)))
            return st;
        return od_cx_return1(s, out);
    }

    int mf;
    if ((st = od_cx_arg_memory_format(op, s, k + 4, &mf, err)))
        return st;
    od_out_spec o = {.dtype = dt, .device = dev, .ndim = self->ndim, .alias_of = -1};
    memcpy(o.sizes, self->sizes, sizeof(int64_t) * (size_t)self->ndim);
    if ((st = od_out_spec_layout(&o, self, (od_memory_format)mf, err)))
        return st;
    od_tensor *out = NULL;
    if ((st = od_alloc_outputs(s, &o, 1, &out, err)))
        return st;
    /* empty_like: CPU memory comes zeroed; a device's cached block may hold
     * another request's bytes, so it is cleared like zeros_like */
    if (id == OD_OPID_empty_like && (out->device.type == OD_DEV_CPU || out->device.type == OD_DEV_META))
        return od_cx_return1(s, out);
    return fill_and_return(s, out, fill, err);
}
