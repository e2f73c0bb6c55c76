/* shape_resample.c — the shape and dtype function of upsample_nearest1d/2d/3d,
 * upsample_linear1d / bilinear2d / trilinear3d and upsample_bicubic2d, their
 * .vec overloads and
 * their _backward ops, and the plan the CPU and CUDA kernels share.
 *
 * Invariants: torch 1.13's checks and messages in ATen's order: a .vec
 * overload first resolves its output size (compute_output_size: exactly one
 * of output_size and scale_factors, one entry per spatial dim, a scaled size
 * truncated toward zero) and hands its scale factors on as the scales
 * arguments; then upsample_Nd_common_check (list lengths, sizes >= 1), the
 * empty-input rule (only the batch may be empty), grad_output's shape for
 * backward, and the dtype last, as the kernel dispatch does. Nothing here
 * touches data.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "od_shape.h"

typedef struct rs_op {
    int kind, nd;
    bool backward, vec;
    const char *dt; /* the kernel dispatch's name in dtype refusals */
} rs_op;

static bool rs_op_of(od_opid id, rs_op *o)
{
    switch (id) {
#define R_(op, k, n, bw, v, dt_)                       \
    case OD_OPID_##op:                                 \
        *o = (rs_op){OD_RESAMPLE_##k, n, bw, v, dt_}; \
        return true;
        R_(upsample_nearest1d, NEAREST, 1, false, false, "compute_indices_weights_nearest")
        R_(upsample_nearest1d_vec, NEAREST, 1, false, true, "compute_indices_weights_nearest")
        R_(upsample_nearest1d_backward, NEAREST, 1, true, false, "upsample_nearest1d_backward")
        R_(upsample_nearest1d_backward_vec, NEAREST, 1, true, true, "upsample_nearest1d_backward")
        R_(upsample_nearest2d, NEAREST, 2, false, false, "compute_indices_weights_nearest")
        R_(upsample_nearest2d_vec, NEAREST, 2, false, true, "compute_indices_weights_nearest")
        R_(upsample_nearest2d_backward, NEAREST, 2, true, false, "upsample_nearest2d_backward")
        R_(upsample_nearest2d_backward_vec, NEAREST, 2, true, true, "upsample_nearest2d_backward")
        R_(upsample_nearest3d, NEAREST, 3, false, false, "compute_indices_weights_nearest")
        R_(upsample_nearest3d_vec, NEAREST, 3, false, true, "compute_indices_weights_nearest")
        R_(upsample_nearest3d_backward, NEAREST, 3, true, false, "upsample_nearest3d_backward")
        R_(upsample_nearest3d_backward_vec, NEAREST, 3, true, true, "upsample_nearest3d_backward")
        R_(upsample_linear1d, LINEAR, 1, false, false, "compute_indices_weights_linear")
        R_(upsample_linear1d_vec, LINEAR, 1, false, true, "compute_indices_weights_linear")
        R_(upsample_linear1d_backward, LINEAR, 1, true, false, "upsample_linear1d_backward")
        R_(upsample_linear1d_backward_vec, LINEAR, 1, true, true, "upsample_linear1d_backward")
        R_(upsample_bilinear2d, LINEAR, 2, false, false, "compute_indices_weights_linear")
        R_(upsample_bilinear2d_vec, LINEAR, 2, false, true, "compute_indices_weights_linear")
        R_(upsample_bilinear2d_backward, LINEAR, 2, true, false, "upsample_bilinear2d_backward")
        R_(upsample_bilinear2d_backward_vec, LINEAR, 2, true, true, "upsample_bilinear2d_backward")
        R_(upsample_trilinear3d, LINEAR, 3, false, false, "compute_indices_weights_linear")
        R_(upsample_trilinear3d_vec, LINEAR, 3, false, true, "compute_indices_weights_linear")
        R_(upsample_trilinear3d_backward, LINEAR, 3, true, false, "upsample_trilinear3d_backward")
        R_(upsample_trilinear3d_backward_vec, LINEAR, 3, true, true, "upsample_trilinear3d_backward")
        R_(upsample_bicubic2d, CUBIC, 2, false, false, "compute_indices_weights_cubic")
        R_(upsample_bicubic2d_vec, CUBIC, 2, false, true, "compute_indices_weights_cubic")
        R_(upsample_bicubic2d_backward, CUBIC, 2, true, false, "upsample_bicubic2d_backward")
        R_(upsample_bicubic2d_backward_vec, CUBIC, 2, true, true, "upsample_bicubic2d_backward")
#undef R_
    default: return false;
    }
}

static const char *const DIMS3[] = {"D", "H", "W"};

od_status od_resample_plan_of(od_opid id, const od_stack *s, od_resample_plan *p, od_error *err)
{
    memset(p, 0, sizeof *p);
    rs_op o;
    if (!rs_op_of(id, &o))
        return od_error_set(err, OD_EINTERNAL, "od_resample_plan_of: not an upsample operator");
    const char *name = od_op_schema(od_builtin(id))->name;
    if (s->nargs < 1 || s->args[0].tag != OD_T_TENSOR || !s->args[0].u.t)
        return od_error_set(err, OD_EINVAL, "%s(): argument 'input' must be a Tensor", name);
    const od_tensor *x = s->args[0].u.t;
    int nd = o.nd, off = 3 - nd;
    od_resample_geom *g = &p->g;
    g->kind = o.kind;
    p->x = x;
    p->backward = o.backward;
    p->nd = nd;
    /* argument positions: output_size 1, input_size 2 (backward), then
     * align_corners (linear), then the scales */
    bool ac = o.kind != OD_RESAMPLE_NEAREST; /* linear and cubic take align_corners */
    int a_in = 2, a_ac = o.backward ? 3 : 2, a_sc = ac ? a_ac + 1 : a_ac;
    if (ac)
        g->align_corners = s->args[a_ac].u.b;
    /* the input's sizes: self's, or the backward's input_size */
    int64_t isz[OD_MAX_DIMS], one;
    int ni;
    if (o.backward) {
        const int64_t *it;
        ni = od_shape_int_list(&s->args[a_in], &it, &one);
        if (ni < 0 || ni > OD_MAX_DIMS)
            return od_error_set(err, OD_EINVAL, "%s(): argument 'input_size' must be a list of ints", name);
        memcpy(isz, it, sizeof(int64_t) * (size_t)ni);
    } else {
        ni = x->ndim;
        memcpy(isz, x->sizes, sizeof(int64_t) * (size_t)ni);
    }
    int64_t osz[3];
    const int64_t *os = NULL;
    int no = 0;
    if (o.vec) {
        const od_value *ov = &s->args[1], *sv = &s->args[a_sc];
        int spatial = ni - 2;
        bool has_o = ov->tag != OD_T_NONE, has_s = sv->tag != OD_T_NONE;
        if (has_o == has_s)
            return od_error_set(err, OD_EINVAL, "Must specify exactly one of output_size and scale_factors");
        if (has_o) {
            no = od_shape_int_list(ov, &os, &one);
            if (no != spatial)
                return od_error_set(err, OD_EINVAL,
                                    "Expected static_cast<int64_t>(output_size->size()) == spatial_dimensions to be "
                                    "true, but got false.  (Could this error message be improved?  If so, please "
                                    "report an enhancement request to PyTorch.)");
        } else {
            const double *sf = sv->u.list.items;
            if ((int)sv->u.list.n != spatial)
                return od_error_set(err, OD_EINVAL,
                                    "Expected static_cast<int64_t>(scale_factors->size()) == spatial_dimensions to be "
                                    "true, but got false.  (Could this error message be improved?  If so, please "
                                    "report an enhancement request to PyTorch.)");
            for (int d = 0; d < spatial && d < 3; d++) {
                double v = (double)isz[2 + d] * sf[d];
                if (!(v > -9.2e18 && v < 9.2e18))
                    return od_error_set(err, OD_EINVAL, "value cannot be converted to type int64_t without overflow");
                osz[d] = (int64_t)v;
                if (d < nd) {
                    g->has_scale[off + d] = 1;
                    g->scale[off + d] = sf[d];
                }
            }
            os = osz;
            no = spatial;
        }
    } else {
        no = od_shape_int_list(&s->args[1], &os, &one);
        for (int d = 0; d < nd; d++) {
            const od_value *sv = &s->args[a_sc + d];
            if (sv->tag != OD_T_NONE) {
                g->has_scale[off + d] = 1;
                g->scale[off + d] = sv->tag == OD_T_DOUBLE ? sv->u.d : (double)sv->u.i;
            }
        }
    }
    /* upsample_Nd_common_check */
    if (no != nd)
        return od_error_set(err, OD_EINVAL, "It is expected output_size equals to %d, but got size %d", nd, no);
    if (ni != nd + 2)
        return od_error_set(err, OD_EINVAL, "It is expected input_size equals to %d, but got size %d", nd + 2, ni);
    bool ok = true;
    for (int d = 0; d < nd; d++)
        ok = ok && isz[2 + d] > 0 && os[d] > 0;
    if (!ok) {
        char a[128] = "", b[128] = "";
        size_t la = 0, lb = 0;
        for (int d = 0; d < nd; d++) {
            la += (size_t)snprintf(a + la, sizeof a - la, "%s%s: %" PRId64, d ? ", " : "", DIMS3[off + d], isz[2 + d]);
            lb += (size_t)snprintf(b + lb, sizeof b - lb, "%s%s: %" PRId64, d ? ", " : "", DIMS3[off + d], os[d]);
        }
        return od_error_set(err, OD_EINVAL,
                            "Input and output sizes should be greater than 0, but got input (%s) %soutput (%s)", a,
                            nd == 1 ? "and " : "", b);
    }
    for (int d = 0; d < 3; d++)
        g->in[d] = g->out[d] = 1;
    for (int d = 0; d < nd; d++) {
        g->in[off + d] = isz[2 + d];
        g->out[off + d] = os[d];
    }
    p->n = isz[0];
    p->c = isz[1];
    p->planes = isz[0] * isz[1];
    if (!o.backward) {
        int64_t rest = 1;
        for (int d = 1; d < x->ndim; d++)
            rest *= x->sizes[d];
        if (od_tensor_numel(x) == 0 && rest == 0) {
            char shp[256];
            od_shape_print(x->sizes, x->ndim, shp, sizeof shp);
            return od_error_set(err, OD_EINVAL, "Non-empty %dD data tensor expected but got a tensor with sizes %s",
                                nd + 2, shp);
        }
    } else {
        /* 2d / 3d name grad_output; 1d runs check_dim_size */
        if (nd > 1 && x->ndim != nd + 2)
            return od_error_set(err, OD_EINVAL, "Expected grad_output to be a tensor of dimension %d but got: dimension %d",
                                nd + 2, x->ndim);
        for (int d = 0; d < nd + 2; d++) {
            int64_t want = d < 2 ? isz[d] : os[d - 2];
            if (nd > 1 && x->sizes[d] != want)
                return od_error_set(err, OD_EINVAL,
                                    "Expected grad_output to have the same shape as output; output.size(%d) = %" PRId64
                                    " but got grad_output.size(%d) = %" PRId64,
                                    d, want, d, x->sizes[d]);
        }
        for (int d = 0; d < nd + 2; d++) {
            int64_t want = d < 2 ? isz[d] : os[d - 2];
            if (x->ndim != nd + 2 || x->sizes[d] != want)
                return od_error_set(err, OD_EINVAL,
                                    "Expected a tensor of dimension %d and tensor.size[%d] == %" PRId64
                                    " but got: dimension %d and tensor.size[%d] = %" PRId64,
                                    nd + 2, d, want, x->ndim, d, d < x->ndim ? x->sizes[d] : (int64_t)0);
        }
    }
    od_dtype dt = x->dtype;
    bool u8 = o.kind == OD_RESAMPLE_NEAREST && !o.backward;
    bool f16 = o.kind == OD_RESAMPLE_CUBIC && o.backward; /* bicubic's backward dispatch has Half */
    if (!(dt == OD_FLOAT32 || dt == OD_FLOAT64 || dt == OD_BFLOAT16 || (u8 && dt == OD_UINT8) || (f16 && dt == OD_FLOAT16)))
        return od_error_set(err, OD_EUNSUPPORTED, "\"%s\" not implemented for '%s'", o.dt, od_dtype_scalar_name(dt));
    return OD_OK;
}

od_status od_shape_resample(od_opid id, const od_stack *s, od_out_spec *outs, int *nouts, od_error *err)
{
    od_resample_plan p;
    od_status st = od_resample_plan_of(id, s, &p, err);
    if (st)
        return st;
    memset(&outs[0], 0, sizeof outs[0]);
    outs[0].dtype = p.x->dtype;
    outs[0].device = p.x->device;
    outs[0].ndim = p.nd + 2;
    outs[0].alias_of = -1;
    outs[0].sizes[0] = p.n;
    outs[0].sizes[1] = p.c;
    for (int d = 0; d < p.nd; d++)
        outs[0].sizes[2 + d] = p.backward ? p.g.in[3 - p.nd + d] : p.g.out[3 - p.nd + d];
    *nouts = 1;
    return OD_OK;
}
