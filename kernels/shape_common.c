/* shape_common.c — output allocation from od_out_spec, and the table of the
 * built-ins' shape functions.
 *
 * Invariants: od_builtin_shape_fn is generated from ops.def's shape column,
 * so it cannot drift from the operator list (a name there that od_shape.h
 * does not declare fails the build). od_alloc_outputs is all-or-nothing: on
 * error every output it already made is released and outs[] is cleared. It
 * sits on every kernel's hot path, so it does no more than allocate.
 */
#include <string.h>

#include "od_shape.h"

static const od_shape_fn g_shape_fns[OD_NUM_BUILTIN_OPS] = {
#define OD_OP(id, schema, shape, cpu, cuda, cea, cia, bs, ag) [OD_OPID_##id] = shape,
#include "ops.def"
#undef OD_OP
};

od_shape_fn od_builtin_shape_fn(od_opid id)
{
    return (unsigned)id < OD_NUM_BUILTIN_OPS ? g_shape_fns[id] : NULL;
}

od_status od_broadcast_into(const int64_t *out, int nout, const int64_t *in, int nin, od_error *err)
{
    int64_t b[OD_MAX_DIMS];
    int nb;
    od_status st = od_broadcast_shapes(out, nout, in, nin, b, &nb, err);
    if (st)
        return st;
    if (nb != nout || (nb && memcmp(out, b, (size_t)nb * sizeof *b))) {
        char x[256], y[256];
        od_shape_print(out, nout, x, sizeof x);
        od_shape_print(b, nb, y, sizeof y);
        return od_error_set(err, OD_EMISMATCH, "output with shape %s doesn't match the broadcast shape %s", x, y);
    }
    return OD_OK;
}

od_status od_broadcast_tensors(const od_tensor *const *ts, int n, int64_t *sizes, int *nd, od_error *err)
{
    *nd = -1;
    for (int i = 0; i < n; i++) {
        int64_t b[OD_MAX_DIMS];
        int nb = ts[i]->ndim;
        od_status st = *nd < 0 ? OD_OK : od_broadcast_shapes(sizes, *nd, ts[i]->sizes, ts[i]->ndim, b, &nb, err);
        if (st)
            return st;
        memcpy(sizes, *nd < 0 ? ts[i]->sizes : b, (size_t)nb * sizeof *sizes);
        *nd = nb;
    }
    return OD_OK;
}

/* An output laid out as mf asks: channels_last strides, or self's layout
 * kept under preserve_format (empty_like's rule); else contiguous. */
od_status od_out_spec_layout(od_out_spec *o, const od_tensor *like, od_memory_format mf, od_error *err)
{
    int64_t st[OD_MAX_DIMS], contig[OD_MAX_DIMS];
    od_status rc = like ? od_memory_format_strides_like(like, mf, st, err)
                        : od_memory_format_strides(o->sizes, o->ndim, mf == OD_MF_PRESERVE ? OD_MF_CONTIGUOUS : mf,
                                                   st, err);
    if (rc)
        return rc;
    od_memory_format_strides(o->sizes, o->ndim, OD_MF_CONTIGUOUS, contig, err);
    if (o->ndim > 0 && memcmp(st, contig, sizeof(int64_t) * (size_t)o->ndim)) {
        o->strided = true;
        memcpy(o->strides, st, sizeof(int64_t) * (size_t)o->ndim);
    }
    return OD_OK;
}

/* A dense tensor with sp's strides: storage for its elements, viewed. */
static od_status alloc_strided(const od_out_spec *sp, bool overwrite, od_tensor **out, od_error *err)
{
    int64_t numel = 1;
    for (int d = 0; d < sp->ndim; d++)
        numel *= sp->sizes[d];
    od_tensor *flat = NULL;
    od_status st = (overwrite ? od_tensor_empty_uninit : od_tensor_empty)(&numel, 1, sp->dtype, sp->device,
                                                                         &flat, err);
    if (!st)
        st = od_tensor_as_strided(flat, sp->sizes, sp->strides, sp->ndim, 0, out, err);
    od_tensor_release(flat);
    return st;
}

static od_status alloc_outputs(const od_stack *s, const od_out_spec *specs, int n, bool overwrite,
                               od_tensor **outs, od_error *err)
{
    for (int i = 0; i < n; i++) {
        const od_out_spec *sp = &specs[i];
        od_status st;
        if (sp->alias_of >= 0) {
            const od_value *v = sp->alias_of < s->nargs ? &s->args[sp->alias_of] : NULL;
            if (v && v->tag == OD_T_TENSOR && v->u.t) {
                od_tensor_retain(v->u.t);
                outs[i] = v->u.t;
                continue;
            }
            st = od_error_set(err, OD_EINTERNAL,
                              "output %d aliases argument %d, which is not a tensor", i,
                              sp->alias_of);
        } else if (sp->strided) {
            if (!(st = alloc_strided(sp, overwrite, &outs[i], err)))
                continue;
        } else {
            st = (overwrite ? od_tensor_empty_uninit : od_tensor_empty)(sp->sizes, sp->ndim, sp->dtype,
                                                                     sp->device, &outs[i], err);
            if (!st)
                continue;
        }
        while (i > 0)
            od_tensor_release(outs[--i]);
        for (int j = 0; j < n; j++)
            outs[j] = NULL;
        return st;
    }
    return OD_OK;
}

od_status od_alloc_outputs(const od_stack *s, const od_out_spec *specs, int n, od_tensor **outs,
                           od_error *err)
{
    return alloc_outputs(s, specs, n, false, outs, err);
}

od_status od_alloc_outputs_overwrite(const od_stack *s, const od_out_spec *specs, int n,
                                     od_tensor **outs, od_error *err)
{
    return alloc_outputs(s, specs, n, true, outs, err);
}

int od_shape_int_list(const od_value *v, const int64_t **items, int64_t *one)
{
    if (v->tag == OD_T_INT) {
        *one = v->u.i;
        *items = one;
        return 1;
    }
    if (v->tag != OD_T_INT_LIST)
        return -1;
    *items = v->u.list.items;
    return (int)v->u.list.n;
}

od_status od_shape_arg_tensor(const od_stack *s, int i, const char *op, const char *name, const od_tensor **out,
                              bool optional, od_error *err)
{
    if (optional && (i >= s->nargs || s->args[i].tag == OD_T_NONE)) {
        *out = NULL;
        return OD_OK;
    }
    if (i >= s->nargs || s->args[i].tag != OD_T_TENSOR || !s->args[i].u.t)
        return od_error_set(err, OD_EINVAL, "%s(): argument '%s' must be a Tensor", op, name);
    *out = s->args[i].u.t;
    return OD_OK;
}

od_status od_shape_arg_int(const od_stack *s, int i, const char *op, const char *name, int64_t *out, od_error *err)
{
    if (i >= s->nargs || s->args[i].tag != OD_T_INT)
        return od_error_set(err, OD_EINVAL, "%s(): argument '%s' must be an int", op, name);
    *out = s->args[i].u.i;
    return OD_OK;
}

void od_out_spec_init(od_out_spec *o, od_dtype dt, od_device dev, const int64_t *sizes, int ndim)
{
    memset(o, 0, sizeof *o);
    o->dtype = dt;
    o->device = dev;
    o->ndim = ndim;
    if (ndim > 0)
        memcpy(o->sizes, sizes, (size_t)ndim * sizeof(int64_t));
    o->alias_of = -1;
}
