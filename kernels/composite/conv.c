/* conv.c — conv1d/2d/3d (and their .padding overloads) and
 * conv_transpose1d/2d/3d: torch 1.13's CompositeImplicitAutograd wrappers
 * over aten::convolution.
 *
 * Invariants: as ATen's: an unbatched input (one dim short) is unsqueezed
 * to a batch of one and the result squeezed back (batchify's message
 * otherwise); padding='valid' is padding 0, padding='same' (stride 1 only)
 * pads dilation * (k - 1) in total per dim, the smaller half on the left;
 * where the halves differ the extra right padding goes through
 * constant_pad_nd first, as _convolution_mode does. Every call goes
 * through the dispatcher, so these serve every backend and autograd
 * records convolution's node.
 */
#include <stdio.h>
#include <string.h>

#include "composite.h"
#include "od_shape.h"

#define T(x) od_tensor_v(x)

static int spatial_dims_of(od_opid id, bool *transposed, bool *mode, const char **name)
{
    *transposed = id == OD_OPID_conv_transpose1d || id == OD_OPID_conv_transpose2d_input ||
                  id == OD_OPID_conv_transpose3d_input;
    *mode = id == OD_OPID_conv1d_padding || id == OD_OPID_conv2d_padding || id == OD_OPID_conv3d_padding;
    switch (id) {
    case OD_OPID_conv1d: case OD_OPID_conv1d_padding: *name = "conv1d"; return 1;
    case OD_OPID_conv2d: case OD_OPID_conv2d_padding: *name = "conv2d"; return 2;
    case OD_OPID_conv3d: case OD_OPID_conv3d_padding: *name = "conv3d"; return 3;
    case OD_OPID_conv_transpose1d: *name = "conv_transpose1d"; return 1;
    case OD_OPID_conv_transpose2d_input: *name = "conv_transpose2d"; return 2;
    default: *name = "conv_transpose3d"; return 3;
    }
}

static int64_t list_at(const od_value *v, int i)
{
    const int64_t *x = v->u.list.items;
    return v->u.list.n == 1 ? x[0] : x[i];
}

OD_CX_KERNEL(od_cia_conv)
{
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    bool transposed, mode;
    const char *name;
    int nd = spatial_dims_of(id, &transposed, &mode, &name);
    if (s->nargs < (transposed ? 8 : 7))
        return od_error_set(err, OD_EINTERNAL, "%s called with %d arguments", od_op_name(op), s->nargs);
    od_tensor *input;
    od_status st;
    if ((st = od_cx_arg_tensor(op, s, 0, &input, err)))
        return st;
    if (s->args[1].tag != OD_T_TENSOR || !s->args[1].u.t)
        return od_error_set(err, OD_EINVAL, "%s(): argument 'weight' must be Tensor", name);
    od_tensor *weight = s->args[1].u.t;
    bool batched = input->ndim == nd + 2;
    if (!batched && input->ndim != nd + 1) {
        char xs[256];
        od_shape_print(input->sizes, input->ndim, xs, sizeof xs);
        return od_error_set(err, OD_EINVAL, "Expected %dD (unbatched) or %dD (batched) input to %s, but got input of size: %s",
                            nd + 1, nd + 2, name, xs);
    }
    od_cx_scope sc = od_cx_scope_begin(err);
    od_tensor *x = batched ? input : od_cx_call(&sc, OD_OPID_unsqueeze, 2, T(input), od_int(0));
    int64_t zeros[3] = {0, 0, 0}, pad_l[3] = {0, 0, 0};
    od_value zero_list = od_list_v(OD_T_INT_LIST, zeros, (size_t)nd);
    od_value stride = s->args[3], bias = s->args[2], padding, dilation, opad, groups;
    if (transposed) {
        padding = s->args[4];
        opad = s->args[5];
        groups = s->args[6];
        dilation = s->args[7];
    } else {
        padding = s->args[4];
        dilation = s->args[5];
        groups = s->args[6];
        opad = zero_list;
    }
    if (mode && x) {
        const char *pm = padding.tag == OD_T_STRING ? padding.u.s : "";
        if (!strcmp(pm, "valid")) {
            padding = zero_list;
        } else if (!strcmp(pm, "same")) {
            for (size_t i = 0; i < stride.u.list.n; i++)
                if (((const int64_t *)stride.u.list.items)[i] != 1) {
                    od_cx_scope_end(&sc);
                    return od_error_set(err, OD_EINVAL, "padding='same' is not supported for strided convolutions");
                }
            int64_t pad_nd[6] = {0};
            bool symmetric = true;
            if (weight->ndim == nd + 2 && x->ndim == nd + 2 && dilation.u.list.n >= 1)
                for (int i = 0; i < nd; i++) {
                    int64_t total = list_at(&dilation, i) * (weight->sizes[i + 2] - 1);
                    pad_l[i] = total / 2;
                    int64_t delta = total - 2 * pad_l[i];
                    if (delta) {
                        symmetric = false;
                        pad_nd[2 * (nd - 1 - i) + 1] = delta;
                    }
                }
            if (!symmetric)
                x = od_cx_call(&sc, OD_OPID_constant_pad_nd, 3, T(x), od_list_v(OD_T_INT_LIST, pad_nd, (size_t)(2 * nd)),
                               od_int(0));
            padding = od_list_v(OD_T_INT_LIST, pad_l, (size_t)nd);
        } else {
            od_cx_scope_end(&sc);
            return od_error_set(err, OD_EINVAL, "Invalid padding string: '%s'", pm);
        }
    }
    od_tensor *y = od_cx_call(&sc, OD_OPID_convolution, 9, T(x), T(weight), bias, stride, padding, dilation,
                              od_bool(transposed), opad, groups);
    if (!batched)
        y = od_cx_call(&sc, OD_OPID_squeeze_dim, 2, T(y), od_int(0));
    return od_cx_scope_return1(&sc, s, y);
}
