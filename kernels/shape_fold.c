/* shape_fold.c — the shape and dtype function of im2col, col2im (what
 * F.unfold / F.fold call) and max_unpool2d / max_unpool3d, and the plan their
 * CPU and CUDA kernels share.
 *
 * Invariants: checks and messages are torch 1.13's CPU ones in ATen's order
 * (Im2Col.cpp / Col2Im.cpp with im2col_shape_check.h, MaxUnpooling.cpp): list
 * lengths, the geometry, the ranks and sizes, the dtype dispatch last. A bare
 * int where the schema says int[N] reads as N copies (torch's expansion); a
 * list of another length is refused in torch's words. 2d geometry is planned
 * as 3d with a leading dim of 1 (as od_conv_plan's), so the conv column
 * loops serve im2col / col2im. Nothing here touches data: max_unpool's
 * out-of-range indices are the kernels' to report.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "od_shape.h"

static const od_tensor *tensor_arg(const od_stack *s, int i)
{
    return i < s->nargs && s->args[i].tag == OD_T_TENSOR ? s->args[i].u.t : NULL;
}

/* an int[want] argument into out[0..want); its length as torch sees it */
static int int_list(const od_value *v, int want, int64_t *out)
{
    const int64_t *it = NULL;
    int64_t one;
    int n = od_shape_int_list(v, &it, &one);
    if (v->tag == OD_T_INT) {
        for (int i = 0; i < want; i++)
            out[i] = one;
        return want;
    }
    for (int i = 0; i < n && i < want; i++)
        out[i] = it[i];
    return n;
}

/* ATen's div_rtn: rounds toward negative infinity */
static int64_t div_rtn(int64_t a, int64_t b)
{
    int64_t q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0)))
        q--;
    return q;
}

static void plan_2d(od_fold_plan *p, const int64_t *k, const int64_t *d, const int64_t *pd, const int64_t *st)
{
    p->k[0] = p->d[0] = p->s[0] = 1;
    p->p[0] = 0;
    for (int i = 0; i < 2; i++) {
        p->k[i + 1] = k[i];
        p->d[i + 1] = d[i];
        p->p[i + 1] = pd[i];
        p->s[i + 1] = st[i];
    }
    p->img[0] = p->grid[0] = 1;
}

static od_status geometry_checks(bool col2im, const int64_t *k, const int64_t *d, const int64_t *pd,
                                 const int64_t *st, od_error *err)
{
    if (!(k[1] > 0 && k[0] > 0))
        return od_error_set(err, OD_EINVAL,
                            "kernel size should be greater than zero, but got kernel_height: %" PRId64
                            " kernel_width: %" PRId64, k[0], k[1]);
    /* im2col checks dilation, padding, stride; col2im stride, dilation, padding */
    for (int step = 0; step < 3; step++) {
        int what = col2im ? (step == 0 ? 2 : step - 1) : step;
        if (what == 0 && !(d[1] > 0 && d[0] > 0))
            return od_error_set(err, OD_EINVAL,
                                "dilation should be greater than zero, but got dilation_height: %" PRId64
                                " dilation_width: %" PRId64, d[0], d[1]);
        if (what == 1 && !(pd[1] >= 0 && pd[0] >= 0))
            return od_error_set(err, OD_EINVAL,
                                "padding should be non-negative, but got pad_height: %" PRId64 " pad_width: %" PRId64,
                                pd[0], pd[1]);
        if (what == 2 && !(st[1] > 0 && st[0] > 0))
            return od_error_set(err, OD_EINVAL,
                                "stride should be greater than zero, but got stride_height: %" PRId64
                                " stride_width: %" PRId64, st[0], st[1]);
    }
    return OD_OK;
}


static od_status plan_im2col(const od_stack *s, const od_tensor *x, od_fold_plan *p, od_error *err)
{
    static const char *names[4] = {"kernel_size", "dilation", "padding", "stride"};
    int64_t v[4][2];
    for (int a = 0; a < 4; a++) {
        int n = int_list(&s->args[1 + a], 2, v[a]);
        if (n != 2)
            return od_error_set(err, OD_EINVAL, "It is expected %s equals to 2, but got size %d", names[a], n);
    }
    od_status st = geometry_checks(false, v[0], v[1], v[2], v[3], err);
    if (st)
        return st;
    int ndim = x->ndim;
    int64_t s1 = 0, s2 = 0;
    bool valid = false;
    if ((st = od_tensor_size_at(x, 1, &s1, err)))
        return st;
    if (s1 != 0) {
        if ((st = od_tensor_size_at(x, 2, &s2, err)))
            return st;
        valid = s2 != 0;
    }
    bool ok = (ndim == 3 && x->sizes[0] != 0 && valid) || (ndim == 4 && valid && x->sizes[3] != 0);
    if (!ok) {
        char shp[256];
        od_shape_print(x->sizes, x->ndim, shp, sizeof shp);
        return od_error_set(err, OD_EINVAL,
                            "Expected 3D or 4D (batch mode) tensor with possibly 0 batch size and other non-zero "
                            "dimensions for input, but got: %s", shp);
    }
    int lead = ndim - 3;
    p->batched = ndim == 4;
    p->n = p->batched ? x->sizes[0] : 1;
    p->c = x->sizes[lead];
    plan_2d(p, v[0], v[1], v[2], v[3]);
    p->img[1] = x->sizes[lead + 1];
    p->img[2] = x->sizes[lead + 2];
    for (int i = 1; i < 3; i++)
        p->grid[i] = div_rtn(p->img[i] + 2 * p->p[i] - (p->d[i] * (p->k[i] - 1) + 1), p->s[i]) + 1;
    if (p->grid[1] < 1 || p->grid[2] < 1)
        /* torch prints the input height twice */
        return od_error_set(err, OD_EINVAL,
                            "Given input with spatial size (%" PRId64 ", %" PRId64 "), kernel_size=(%" PRId64 ", %" PRId64
                            "), dilation=(%" PRId64 ", %" PRId64 "), padding=(%" PRId64 ", %" PRId64
                            "), calculated shape of the array of sliding blocks as (%" PRId64 ", %" PRId64
                            "), but its components must be at least one.",
                            p->img[1], p->img[1], p->k[1], p->k[2], p->d[1], p->d[2], p->p[1], p->p[2], p->grid[1],
                            p->grid[2]);
    return OD_OK;
}

static od_status plan_col2im(const od_stack *s, const od_tensor *x, od_fold_plan *p, od_error *err)
{
    static const char *names[5] = {"output_size", "kernel_size", "dilation", "padding", "stride"};
    int64_t v[5][2];
    for (int a = 0; a < 5; a++) {
        int n = int_list(&s->args[1 + a], 2, v[a]);
        if (n != 2)
            return od_error_set(err, OD_EINVAL, "It is expected %s equals to 2, but got size %d", names[a], n);
    }
    const int64_t *os = v[0], *k = v[1], *d = v[2], *pd = v[3], *st_ = v[4];
    od_status st = geometry_checks(true, k, d, pd, st_, err);
    if (st)
        return st;
    int ndim = x->ndim;
    bool ok = (ndim == 2 && x->sizes[0] != 0 && x->sizes[1] != 0) ||
              (ndim == 3 && x->sizes[1] != 0 && x->sizes[2] != 0);
    if (!ok) {
        char shp[256];
        od_shape_print(x->sizes, x->ndim, shp, sizeof shp);
        return od_error_set(err, OD_EINVAL,
                            "Expected 2D or 3D (batch mode) tensor for input with possibly 0 batch size and non-zero "
                            "dimensions for input, but got: %s", shp);
    }
    int lead = ndim - 2;
    int64_t planes = x->sizes[lead], length = x->sizes[lead + 1];
    if (planes % (k[0] * k[1]) != 0)
        return od_error_set(err, OD_EINVAL,
                            "Expected size of input's dimension 1 to be divisible by the product of kernel_size, but "
                            "got input.size(1)=%" PRId64 " and kernel_size=(%" PRId64 ", %" PRId64 ").",
                            planes, k[0], k[1]);
    int64_t nb[2];
    for (int i = 0; i < 2; i++)
        nb[i] = div_rtn(os[i] + 2 * pd[i] - d[i] * (k[i] - 1) - 1, st_[i]) + 1;
    char given[512];
    snprintf(given, sizeof given,
             "Given output_size=(%" PRId64 ", %" PRId64 "), kernel_size=(%" PRId64 ", %" PRId64 "), dilation=(%" PRId64
             ", %" PRId64 "), padding=(%" PRId64 ", %" PRId64 "), stride=(%" PRId64 ", %" PRId64 "), ",
             os[0], os[1], k[0], k[1], d[0], d[1], pd[0], pd[1], st_[0], st_[1]);
    if (length != nb[0] * nb[1])
        return od_error_set(err, OD_EINVAL,
                            "%sexpected size of input's dimension 2 to match the calculated number of sliding blocks "
                            "%" PRId64 " * %" PRId64 " = %" PRId64 ", but got input.size(2)=%" PRId64 ".",
                            given, nb[0], nb[1], nb[0] * nb[1], length);
    if (!(nb[0] >= 1 && nb[1] >= 1))
        return od_error_set(err, OD_EINVAL,
                            "%scalculated shape of the array of sliding blocks as (%" PRId64 ", %" PRId64
                            "), which is too small (non-positive)", given, nb[0], nb[1]);
    if (os[1] < 1 || os[0] < 1)
        return od_error_set(err, OD_EINVAL,
                            "Expected output spatial size to be positive, but got: output_size=(%" PRId64 ", %" PRId64
                            ").", os[0], os[1]);
    p->batched = ndim == 3;
    p->n = p->batched ? x->sizes[0] : 1;
    p->c = planes / (k[0] * k[1]);
    plan_2d(p, k, d, pd, st_);
    p->img[1] = os[0];
    p->img[2] = os[1];
    p->grid[1] = nb[0];
    p->grid[2] = nb[1];
    return OD_OK;
}

static od_status plan_unpool(od_opid id, const od_stack *s, const od_tensor *x, od_fold_plan *p, od_error *err)
{
    bool three = id == OD_OPID_max_unpool3d;
    int nd = three ? 3 : 2;
    const od_tensor *ix = tensor_arg(s, 1);
    char a[256], b[256];
    if (!ix)
        return od_error_set(err, OD_EINVAL, "%s(): argument 'indices' must be Tensor", three ? "max_unpool3d" : "max_unpool2d");
    int64_t os[3] = {0, 0, 0}, st[3] = {1, 1, 1}, pd[3] = {0, 0, 0};
    if (ix->dtype != OD_INT64) {
        if (three)
            return od_error_set(err, OD_EINVAL, "elements in indices should be type int64");
        return od_error_set(err, OD_EINVAL, "elements in indices should be type int64 but got: %s",
                            od_dtype_scalar_name(ix->dtype));
    }
    int nos = int_list(&s->args[2], nd, os);
    if (!three) {
        if (nos != 2)
            return od_error_set(err, OD_EINVAL,
                                "There should be exactly two elements (height, width) in output_size, but got %d "
                                "elements.", nos);
        if (x->ndim != 3 && x->ndim != 4)
            return od_error_set(err, OD_EINVAL,
                                "Input to max_unpooling2d should be a 3d or 4d Tensor, but got a tensor with %d "
                                "dimensions.", x->ndim);
    } else {
        if (x->ndim != 4 && x->ndim != 5)
            return od_error_set(err, OD_EINVAL,
                                "Input to max_unpooling3d should be a 4d or 5d Tensor, but got a tensor with %d "
                                "dimensions.", x->ndim);
        int nst = int_list(&s->args[3], 3, st), npd = int_list(&s->args[4], 3, pd);
        if (nos != 3)
            return od_error_set(err, OD_EINVAL,
                                "There should be exactly three elements (depth, height, width) in output_size, but "
                                "got %d elements.", nos);
        if (nst != 3)
            return od_error_set(err, OD_EINVAL,
                                "There should be exactly three elements (depth, height, width) in stride, but got: %d "
                                "elements.", nst);
        if (npd != 3)
            return od_error_set(err, OD_EINVAL,
                                "There should be exactly three elements (depth, height, width) in padding, but got: "
                                "%d elements.", npd);
    }
    if (ix->ndim != x->ndim || memcmp(ix->sizes, x->sizes, sizeof(int64_t) * (size_t)x->ndim) != 0) {
        od_shape_print(x->sizes, x->ndim, a, sizeof a);
        od_shape_print(ix->sizes, ix->ndim, b, sizeof b);
        return od_error_set(err, OD_EINVAL,
                            "Expected shape of indices to be same as that of the input tensor (%s) but got indices "
                            "tensor with shape: %s", a, b);
    }
    for (int d = 1; d < x->ndim; d++)
        if (x->sizes[d] <= 0) {
            od_shape_print(x->sizes, x->ndim, a, sizeof a);
            return od_error_set(err, OD_EINVAL,
                                "%s: Expected input to have non-zero size for non-batch dimensions, but got %s with "
                                "dimension %d being empty.",
                                three ? "max_unpooling3d_forward_out_cpu()" : "max_unpooling2d_forward_out_cpu()", a, d);
        }
    if (three && !(st[0] > 0 && st[1] > 0 && st[2] > 0)) {
        od_shape_print(st, 3, a, sizeof a);
        return od_error_set(err, OD_EINVAL, "strides should be greater than zero, but got stride: %s", a);
    }
    for (int d = 0; d < nd; d++)
        if (os[d] < 0)
            return od_error_set(err, OD_EINVAL, "numel: integer multiplication overflow");
    p->indices = ix;
    p->unpool_nd = nd;
    p->in_plane = p->out_plane = 1;
    for (int d = 0; d < nd; d++) {
        p->in_plane *= x->sizes[x->ndim - nd + d];
        p->out_plane *= os[d];
        p->unpool_out[3 - nd + d] = os[d];
    }
    for (int d = 0; d < 3 - nd; d++)
        p->unpool_out[d] = 1;
    p->planes = 1;
    for (int d = 0; d < x->ndim - nd; d++)
        p->planes *= x->sizes[d];
    return OD_OK;
}

od_status od_fold_plan_of(od_opid id, const od_stack *s, od_fold_plan *p, od_error *err)
{
    memset(p, 0, sizeof *p);
    const od_tensor *x = tensor_arg(s, 0);
    const char *name = od_op_schema(od_builtin(id))->name;
    if (!x)
        return od_error_set(err, OD_EINVAL, "%s(): argument 'self' must be Tensor", name);
    p->self = x;
    od_status st;
    const char *dt_name;
    bool half_ok = true;
    switch (id) {
    case OD_OPID_im2col:
        p->kind = OD_FOLD_IM2COL;
        st = plan_im2col(s, x, p, err);
        dt_name = "im2col_out_cpu";
        break;
    case OD_OPID_col2im:
        p->kind = OD_FOLD_COL2IM;
        st = plan_col2im(s, x, p, err);
        dt_name = "col2im_out_cpu";
        break;
    case OD_OPID_max_unpool2d:
    case OD_OPID_max_unpool3d:
        p->kind = OD_FOLD_UNPOOL;
        st = plan_unpool(id, s, x, p, err);
        dt_name = id == OD_OPID_max_unpool2d ? "max_unpool2d" : "max_unpool3d";
        half_ok = false;
        break;
    default: return od_error_set(err, OD_EINTERNAL, "od_fold_plan_of: not a fold operator");
    }
    if (st)
        return st;
    if (p->kind != OD_FOLD_UNPOOL) {
        p->kvol = p->k[1] * p->k[2];
        p->planes = p->n * p->c;
    }
    od_dtype dt = x->dtype;
    /* max_unpool dispatches on dtype only when its output has elements */
    if (p->kind == OD_FOLD_UNPOOL && p->planes * p->out_plane == 0)
        return OD_OK;
    if (!(dt == OD_FLOAT32 || dt == OD_FLOAT64 || (half_ok && (dt == OD_BFLOAT16 || dt == OD_FLOAT16))))
        return od_error_set(err, OD_EUNSUPPORTED, "\"%s\" not implemented for '%s'", dt_name, od_dtype_scalar_name(dt));
    return OD_OK;
}

od_status od_shape_fold(od_opid id, const od_stack *s, od_out_spec *outs, int *nouts, od_error *err)
{
    od_fold_plan p;
    od_status st = od_fold_plan_of(id, s, &p, err);
    if (st)
        return st;
    const od_tensor *x = p.self;
    od_out_spec *o = &outs[0];
    memset(o, 0, sizeof *o);
    o->dtype = x->dtype;
    o->device = x->device;
    o->alias_of = -1;
    int n = 0;
    if (p.batched)
        o->sizes[n++] = p.n;
    switch (p.kind) {
    case OD_FOLD_IM2COL:
        o->sizes[n++] = p.c * p.kvol;
        o->sizes[n++] = p.grid[1] * p.grid[2];
        break;
    case OD_FOLD_COL2IM:
        o->sizes[n++] = p.c;
        o->sizes[n++] = p.img[1];
        o->sizes[n++] = p.img[2];
        break;
    default:
        n = 0;
        for (int d = 0; d < x->ndim - p.unpool_nd; d++)
            o->sizes[n++] = x->sizes[d];
        for (int d = 3 - p.unpool_nd; d < 3; d++)
            o->sizes[n++] = p.unpool_out[d];
        break;
    }
    o->ndim = n;
    *nouts = 1;
    return OD_OK;
}

od_status od_fold_unpool_bad_index(const od_fold_plan *p, int64_t bad, od_error *err)
{
    const int64_t *o = p->unpool_out;
    if (p->unpool_nd == 3)
        return od_error_set(err, OD_EINVAL,
                            "Found an invalid max index: %" PRId64 " (output volumes are of size %" PRId64 "x%" PRId64
                            "x%" PRId64,
                            bad, o[0], o[1], o[2]);
    return od_error_set(err, OD_EINVAL,
                        "Found an invalid max index: %" PRId64 " (output volumes are of size %" PRId64 "x%" PRId64, bad,
                        o[1], o[2]);
}
