/* shape_pad.c — the shape and dtype function of reflection_pad1d/2d/3d and
 * replication_pad1d/2d/3d, and the plan their CPU and CUDA kernels share.
 *
 * Invariants: the checks and messages are torch 1.13's CPU ones, each
 * operator's own (they differ: reflection_pad2d names the rank where the
 * others print the sizes, replication allows any padding, reflection only
 * padding below the input's size); a too-low rank is the IndexError torch's
 * size lookup raises. The padding list is [left, right, top, bottom, front,
 * back], last dim first; plan dims run first spatial dim first. The dtype
 * is checked last, as ATen's kernel dispatch does. Nothing here touches
 * data or allocates.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "od_shape.h"

static int spatial_dims(od_opid id, bool *reflect)
{
    *reflect = id == OD_OPID_reflection_pad1d || id == OD_OPID_reflection_pad2d || id == OD_OPID_reflection_pad3d;
    return id == OD_OPID_reflection_pad1d || id == OD_OPID_replication_pad1d   ? 1
         : id == OD_OPID_reflection_pad2d || id == OD_OPID_replication_pad2d ? 2
                                                                               : 3;
}

od_status od_pad_plan_of(od_opid id, const od_stack *s, od_pad_plan *p, od_error *err)
{
    memset(p, 0, sizeof *p);
    bool reflect;
    int nd = spatial_dims(id, &reflect);
    const char *name = od_op_schema(od_builtin(id))->name;
    p->nd = nd;
    p->reflect = reflect;
    if (s->nargs < 2 || s->args[0].tag != OD_T_TENSOR || !s->args[0].u.t)
        return od_error_set(err, OD_EINVAL, "%s(): argument 'self' must be a Tensor", name);
    if (s->args[1].tag != OD_T_INT_LIST)
        return od_error_set(err, OD_EINVAL, "%s(): argument 'padding' must be a list of ints", name);
    const od_tensor *x = s->args[0].u.t;
    const int64_t *given = s->args[1].u.list.items;
    int npad = (int)s->args[1].u.list.n;
    p->self = x;
    /* reflection_pad1d/2d do not check the length: they read the first
     * pairs of a longer list, and past the end of a shorter one (whatever
     * memory follows, so torch's answer varies between runs); a shorter list
     * is refused here as replication's is */
    if (npad != 2 * nd && !(reflect && nd < 3 && npad > 2 * nd))
        return od_error_set(err, OD_EINVAL, "padding size is expected to be %d", 2 * nd);
    int64_t pad[6] = {0};
    for (int k = 0; k < 2 * nd && k < npad; k++)
        pad[k] = given[k];
    char shp[256];
    od_shape_print(x->sizes, x->ndim, shp, sizeof shp);
    /* ranks: unbatched nd + 1 or batched nd + 2, every dim but the batch
     * non-empty (reflection 1d/2d let an unbatched tensor's first dim be
     * empty too) */
    bool ok = x->ndim == nd + 1 || x->ndim == nd + 2;
    for (int k = x->ndim == nd + 2 || (reflect && nd < 3) ? 1 : 0; ok && k < x->ndim; k++)
        ok = x->sizes[k] != 0;
    if (!ok) {
        if (x->ndim <= nd && (nd > 1))
            return od_error_set(err, OD_EINVAL, "Dimension out of range (expected to be in range of [%d, %d], but got %d)",
                                -(x->ndim > 0 ? x->ndim : 1), (x->ndim > 0 ? x->ndim : 1) - 1, nd);
        if (reflect && nd == 1)
            return od_error_set(err, OD_EINVAL, "2D or 3D (batch mode) tensor expected for input, but got: ");
        if (reflect && nd == 2)
            return od_error_set(err, OD_EINVAL, "3D or 4D (batch mode) tensor expected for input, but got: ");
        return od_error_set(err, OD_EINVAL,
                            "Expected %dD or %dD (batch mode) tensor with possibly 0 batch size and other non-zero "
                            "dimensions for input, but got: %s",
                            nd + 1, nd + 2, shp);
    }
    p->lead = x->ndim - nd;
    for (int k = 0; k < nd; k++) {
        /* plan dim k is input dim lead + k, padded by the pair of the
         * (nd - 1 - k)-th spatial dim from the last */
        int pair = nd - 1 - k;
        p->in[k] = x->sizes[p->lead + k];
        p->pad_l[k] = pad[2 * pair];
        p->pad_r[k] = pad[2 * pair + 1];
        p->out[k] = p->in[k] + p->pad_l[k] + p->pad_r[k];
    }
    if (reflect)
        for (int pair = 0; pair < nd; pair++) { /* w, h, d */
            int k = nd - 1 - pair;
            if (!(p->pad_l[k] < p->in[k] && p->pad_r[k] < p->in[k])) {
                char where[256];
                if (nd == 2)
                    snprintf(where, sizeof where, "%d", x->ndim);
                else
                    snprintf(where, sizeof where, "%s", shp);
                return od_error_set(err, OD_EINVAL,
                                    "Argument #%d: Padding size should be less than the corresponding input "
                                    "dimension, but got: padding (%" PRId64 ", %" PRId64 ") at dimension %d of input %s",
                                    4 + 2 * pair, p->pad_l[k], p->pad_r[k], p->lead + k, where);
            }
        }
    if (nd == 1 && p->out[0] < 1)
        return od_error_set(err, OD_EINVAL, "%sinput (W: %" PRId64 ")%sis too small. Calculated output W: %" PRId64,
                            reflect ? "2" : "", p->in[0], reflect ? "" : " ", p->out[0]);
    /* 2d and 3d refuse only when every spatial output is empty */
    if (nd == 2 && p->out[0] < 1 && p->out[1] < 1)
        return od_error_set(err, OD_EINVAL, "input (H: %" PRId64 ", W: %" PRId64 "%sis too small. Calculated output H: %" PRId64 " W: %" PRId64,
                            p->in[0], p->in[1], reflect ? ")" : " ) ", p->out[0], p->out[1]);
    if (nd == 3 && p->out[0] < 1 && p->out[1] < 1 && p->out[2] < 1)
        return od_error_set(err, OD_EINVAL,
                            "input (D: %" PRId64 " H: %" PRId64 ", W: %" PRId64 ") is too small. Calculated output D: %" PRId64
                            " H: %" PRId64 " W: %" PRId64,
                            p->in[0], p->in[1], p->in[2], p->out[0], p->out[1], p->out[2]);
    int64_t sizes[OD_MAX_DIMS];
    for (int k = 0; k < x->ndim; k++)
        sizes[k] = k < p->lead ? x->sizes[k] : p->out[k - p->lead];
    for (int k = 0; k < nd; k++)
        if (p->out[k] < 0) {
            if (reflect && nd == 2)
                return od_error_set(err, OD_EINVAL, "numel: integer multiplication overflow");
            char o[256];
            od_shape_print(sizes, x->ndim, o, sizeof o);
            return od_error_set(err, OD_EINVAL, "Trying to create tensor with negative dimension %" PRId64 ": %s",
                                p->out[k], o);
        }
    bool half_ok = reflect && nd == 3;
    if (!(x->dtype == OD_FLOAT32 || x->dtype == OD_FLOAT64 ||
          (half_ok && (x->dtype == OD_FLOAT16 || x->dtype == OD_BFLOAT16))))
        return od_error_set(err, OD_EUNSUPPORTED, "\"%s%s\" not implemented for '%s'", name,
                            reflect && nd < 3 ? "" : "_cpu", od_dtype_scalar_name(x->dtype));
    return OD_OK;
}

od_status od_shape_pad(od_opid id, const od_stack *s, od_out_spec *outs, int *nouts, od_error *err)
{
    od_pad_plan p;
    od_status st = od_pad_plan_of(id, s, &p, err);
    if (st)
        return st;
    const od_tensor *x = p.self;
    memset(&outs[0], 0, sizeof outs[0]);
    outs[0].dtype = x->dtype;
    outs[0].device = x->device;
    outs[0].ndim = x->ndim;
    for (int k = 0; k < x->ndim; k++)
        outs[0].sizes[k] = k < p.lead ? x->sizes[k] : p.out[k - p.lead];
    outs[0].alias_of = -1;
    *nouts = 1;
    return OD_OK;
}

int64_t od_pad_source_index(bool reflect, int64_t j, int64_t in, int64_t pad_l)
{
    int64_t i_start = pad_l < 0 ? -pad_l : 0, o_start = pad_l > 0 ? pad_l : 0, ip;
    if (j < pad_l)
        ip = reflect ? 2 * pad_l - j : pad_l;
    else if (j < in + pad_l)
        ip = j;
    else
        ip = reflect ? 2 * (in + pad_l - 1) - j : in + pad_l - 1;
    return ip - o_start + i_start;
}
