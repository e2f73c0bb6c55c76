/* shape_pool.c — the shape and dtype function of the pooling operators
 * (max_pool2d/3d_with_indices, avg_pool2d/3d, _adaptive_avg_pool2d/3d,
 * adaptive_max_pool2d/3d and each one's _backward), and the plan their CPU
 * and CUDA kernels share.
 *
 * Invariants: checks and messages are torch 1.13's CPU ones in ATen's order
 * (list lengths, rank, pooling_output_shape per dim, the shape check, the
 * dtype last as the kernel dispatch does). A list argument given as a bare
 * int counts as a list of one (torch expands int[N] the same way). 2d pools
 * are planned as 3d with a T dim of 1 (od_pool.h). The backward ops take
 * their output size from the forward geometry (max / avg) or from
 * grad_output (adaptive), as ATen's do. Nothing here touches data.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "od_shape.h"

typedef struct pool_op {
    int kind, nd;
    bool backward;
    int first;      /* the argument index of self */
    const char *fn; /* "max_pool2d" in the list-length messages */
    const char *dt; /* the kernel dispatch's name in dtype refusals */
    bool half, bf16, i64;
} pool_op;

static bool pool_op_of(od_opid id, pool_op *o)
{
    memset(o, 0, sizeof *o);
    switch (id) {
#define P_(op, k, n, bw, fn_, dt_, h, b, l)                                                              \
    case OD_OPID_##op:                                                                                   \
        *o = (pool_op){k, n, bw, bw ? 1 : 0, fn_, dt_, h, b, l};                                         \
        return true;
        P_(max_pool2d_with_indices, OD_POOL_MAX, 2, false, "max_pool2d", "max_pool2d", false, true, false)
        P_(max_pool2d_with_indices_backward, OD_POOL_MAX, 2, true, "max_pool2d", "max_pool2d_backward", false,
           true, false)
        P_(max_pool3d_with_indices, OD_POOL_MAX, 3, false, "max_pool3d", "max_pool3d_with_indices_cpu", false,
           false, false)
        P_(max_pool3d_with_indices_backward, OD_POOL_MAX, 3, true, "max_pool3d",
           "max_pool3d_with_indices_backward_cpu", false, false, false)
        P_(avg_pool2d, OD_POOL_AVG, 2, false, "avg_pool2d", "avg_pool2d", false, true, true)
        P_(avg_pool2d_backward, OD_POOL_AVG, 2, true, "avg_pool2d", "avg_pool2d_backward", false, true, true)
        P_(avg_pool3d, OD_POOL_AVG, 3, false, "avg_pool3d", "avg_pool3d_out_frame", false, false, true)
        P_(avg_pool3d_backward, OD_POOL_AVG, 3, true, "avg_pool3d", "avg_pool3d_backward_out_frame", false,
           false, true)
        P_(_adaptive_avg_pool2d, OD_POOL_AAVG, 2, false, "adaptive_avg_pool2d", "adaptive_avg_pool2d", false,
           true, false)
        P_(_adaptive_avg_pool2d_backward, OD_POOL_AAVG, 2, true, "adaptive_avg_pool2d_backward",
           "adaptive_avg_pool2d_backward_cpu", false, true, false)
        P_(_adaptive_avg_pool3d, OD_POOL_AAVG, 3, false, "adaptive_avg_pool3d", "adaptive_avg_pool3d_cpu", true,
           false, false)
        P_(_adaptive_avg_pool3d_backward, OD_POOL_AAVG, 3, true, "adaptive_avg_pool3d_backward",
           "adaptive_avg_pool3d_backward_cpu", true, false, false)
        P_(adaptive_max_pool2d, OD_POOL_AMAX, 2, false, "adaptive_max_pool2d", "adaptive_max_pool2d", false, true,
           false)
        P_(adaptive_max_pool2d_backward, OD_POOL_AMAX, 2, true, "adaptive_max_pool2d_backward",
           "adaptive_max_pool2d_backward", false, true, false)
        P_(adaptive_max_pool3d, OD_POOL_AMAX, 3, false, "adaptive_max_pool3d", "adaptive_max_pool3d_cpu", false,
           false, false)
        P_(adaptive_max_pool3d_backward, OD_POOL_AMAX, 3, true, "adaptive_max_pool3d_backward",
           "adaptive_max_pool3d_backward_cpu", false, false, false)
#undef P_
    default: return false;
    }
}

static const od_tensor *tensor_arg(const od_stack *s, int i)
{
    return i < s->nargs && s->args[i].tag == OD_T_TENSOR ? s->args[i].u.t : NULL;
}

static const char *word(int nd) { return nd == 2 ? "two" : "three"; }

/* ATen's pooling_output_shape (Pool.h), its checks included */
static od_status output_size(int64_t in, int64_t k, int64_t pad, int64_t st, int64_t dil, bool ceil_mode,
                             int64_t *out, od_error *err)
{
    if (st == 0)
        return od_error_set(err, OD_EINVAL, "stride should not be zero");
    if (pad < 0)
        return od_error_set(err, OD_EINVAL, "pad must be non-negative, but got pad: %" PRId64, pad);
    if (pad > k / 2)
        return od_error_set(err, OD_EINVAL,
                            "pad should be at most half of kernel size, but got pad=%" PRId64 " and kernel_size=%" PRId64,
                            pad, k);
    int64_t num = in + 2 * pad - dil * (k - 1) - 1 + (ceil_mode ? st - 1 : 0);
    /* div_rtn: rounds toward negative infinity */
    int64_t q = num / st;
    if ((num % st != 0) && ((num < 0) != (st < 0)))
        q--;
    int64_t o = q + 1;
    if (ceil_mode && (o - 1) * st >= in + pad)
        o--;
    *out = o;
    return OD_OK;
}

static void sizes_str(const od_tensor *t, char *buf, size_t cap) { od_shape_print(t->sizes, t->ndim, buf, cap); }

/* kernel_size / stride / padding / dilation of a max or avg pool at args
 * [a, a+1, a+2, (a+3)] into g (padded to 3 dims), with the length checks */
static od_status window_args(const pool_op *o, const od_stack *s, int a, od_pool_geom *g, od_error *err)
{
    const int64_t *k = NULL, *st = NULL, *pd = NULL, *dl = NULL;
    int64_t k1, s1, p1, d1;
    int nd = o->nd;
    bool mx = o->kind == OD_POOL_MAX, av3 = !mx && nd == 3;
    int nk = od_shape_int_list(&s->args[a], &k, &k1);
    int ns = od_shape_int_list(&s->args[a + 1], &st, &s1);
    int np = od_shape_int_list(&s->args[a + 2], &pd, &p1);
    int ndl = mx ? od_shape_int_list(&s->args[a + 3], &dl, &d1) : 1;
    if (nk != 1 && nk != nd)
        return od_error_set(err, OD_EINVAL, "%s: kernel_size must %s a single int, or a tuple of %s ints", o->fn,
                            av3 ? "be" : "either be", word(nd));
    if (ns != 0 && ns != 1 && ns != nd)
        return od_error_set(err, OD_EINVAL, "%s: stride must %s omitted, a single int, or a tuple of %s ints", o->fn,
                            av3 ? "be" : "either be", word(nd));
    if (np != 1 && np != nd)
        return od_error_set(err, OD_EINVAL, "%s: padding must %s a single int, or a tuple of %s ints", o->fn,
                            av3 ? "be" : mx ? "be either be" : "either be", word(nd));
    if (ndl != 1 && ndl != nd)
        return od_error_set(err, OD_EINVAL, "%s: dilation must be either a single int, or a tuple of %s ints", o->fn,
                            word(nd));
    int off = 3 - nd;
    for (int d = 0; d < 3; d++) {
        g->k[d] = g->st[d] = g->dil[d] = 1;
        g->pad[d] = 0;
    }
    for (int d = 0; d < nd; d++) {
        g->k[off + d] = k[nk == 1 ? 0 : d];
        g->st[off + d] = ns == 0 ? g->k[off + d] : st[ns == 1 ? 0 : d];
        g->pad[off + d] = pd[np == 1 ? 0 : d];
        g->dil[off + d] = mx ? dl[ndl == 1 ? 0 : d] : 1;
    }
    return OD_OK;
}

/* check_dim_size of ATen's pool*_shape_check for the backward's grad_output
 * and indices */
static od_status check_like_output(const od_tensor *t, int ndim, const int64_t *want, int lead, int nd,
                                   od_error *err)
{
    for (int d = lead - 1; d < ndim; d++) {
        int64_t w = want[d];
        if (t->ndim != ndim || t->sizes[d] != w)
            return od_error_set(err, OD_EINVAL,
                                "Expected a tensor of dimension %d and tensor.size[%d] == %" PRId64
                                " but got: dimension %d and tensor.size[%d] = %" PRId64,
                                ndim, d, w, t->ndim, d, d < t->ndim ? t->sizes[d] : (int64_t)0);
    }
    (void)nd;
    return OD_OK;
}

/* ATen's adaptive_pool_empty_output_check: ck (the forward's input, or
 * the 2-d backward's grad_output, under the backward's name) has no empty
 * dim from `from` on */
static od_status nonempty_dims(const pool_op *o, const char *fn, const od_tensor *ck, int from, od_error *err)
{
    for (int d = from; d < ck->ndim; d++)
        if (ck->sizes[d] <= 0) {
            char cs[256];
            od_shape_print(ck->sizes, ck->ndim, cs, sizeof cs);
            const char *what = o->backward ? "grad_output" : "input";
            return od_error_set(
                err, OD_EINVAL,
                "%s%s(): Expected %s to have non-zero size for non-batch dimensions, but %s has sizes %s with "
                "dimension %d being empty",
                o->backward ? (o->kind == OD_POOL_AAVG ? "adaptive_avg_pool2d" : "adaptive_max_pooling2d") : fn,
                o->backward ? "_backward" : "", what, what, cs, d);
        }
    return OD_OK;
}

od_status od_pool_plan_of(od_opid id, const od_stack *s, od_pool_plan *p, od_error *err)
{
    memset(p, 0, sizeof *p);
    pool_op o;
    if (!pool_op_of(id, &o))
        return od_error_set(err, OD_EINTERNAL, "od_pool_plan_of: not a pooling operator");
    const char *name = od_op_schema(od_builtin(id))->name;
    const od_tensor *x = tensor_arg(s, o.first), *gr = o.backward ? tensor_arg(s, 0) : NULL;
    if (!x || (o.backward && !gr))
        return od_error_set(err, OD_EINVAL, "%s(): expected Tensor arguments", name);
    int nd = o.nd, off = 3 - nd;
    od_pool_geom *g = &p->g;
    g->kind = o.kind;
    p->self = x;
    p->grad = gr;
    p->backward = o.backward;
    p->nd = nd;
    p->with_indices = o.kind == OD_POOL_MAX || o.kind == OD_POOL_AMAX;
    char shp[256];
    sizes_str(x, shp, sizeof shp);
    int ndim = x->ndim;
    if (o.kind == OD_POOL_MAX || o.kind == OD_POOL_AVG) {
        od_status st = window_args(&o, s, o.first + 1, g, err);
        if (st)
            return st;
        int a = o.first + (o.kind == OD_POOL_MAX ? 5 : 4);
        bool ceil_mode = s->args[a].u.b;
        if (o.kind == OD_POOL_AVG) {
            g->count_include_pad = s->args[a + 1].u.b;
            const od_value *dv = &s->args[a + 2];
            if (dv->tag == OD_T_INT && dv->u.i == 0)
                return od_error_set(err, OD_EINVAL, "divisor must be not zero");
            g->divisor = dv->tag == OD_T_INT ? dv->u.i : 0;
        }
        if (!(ndim == nd + 1 || ndim == nd + 2)) {
            if (o.kind == OD_POOL_AVG && nd == 2 && ndim < 3)
                return od_error_set(err, OD_EINVAL,
                                    ndim == 0 ? "Dimension specified as -3 but tensor has no dimensions"
                                              : "Dimension out of range (expected to be in range of [%d, %d], but got -3)",
                                    -ndim, ndim - 1);
            if (!(o.kind == OD_POOL_AVG && nd == 2))
                return od_error_set(err, OD_EINVAL, "non-empty %dD or %dD (batch mode) tensor expected for input",
                                    nd + 1, nd + 2);
        }
        int lead = ndim - nd;
        for (int d = 0; d < nd; d++) {
            int64_t in = x->sizes[ndim - nd + d];
            g->in[off + d] = in;
            if ((st = output_size(in, g->k[off + d], g->pad[off + d], g->st[off + d], g->dil[off + d], ceil_mode,
                                  &g->out[off + d], err)))
                return st;
        }
        g->in[0] = nd == 2 ? 1 : g->in[0];
        g->out[0] = nd == 2 ? 1 : g->out[0];
        int64_t *k = g->k + off, *sd = g->st + off, *pd = g->pad + off, *dl = g->dil + off;
        if (nd == 2) {
            if (k[0] <= 0 || k[1] <= 0)
                return od_error_set(err, OD_EINVAL,
                                    "kernel size should be greater than zero, but got kH: %" PRId64 " kW: %" PRId64,
                                    k[0], k[1]);
            if (sd[0] <= 0 || sd[1] <= 0)
                return od_error_set(err, OD_EINVAL,
                                    "stride should be greater than zero, but got dH: %" PRId64 " dW: %" PRId64, sd[0],
                                    sd[1]);
            if (dl[0] <= 0 || dl[1] <= 0)
                return od_error_set(err, OD_EINVAL,
                                    "dilation should be greater than zero, but got dilationH: %" PRId64
                                    " dilationW: %" PRId64,
                                    dl[0], dl[1]);
            bool valid = ndim >= 3 && x->sizes[1] != 0 && x->sizes[2] != 0;
            if (!((ndim == 3 && x->sizes[0] != 0 && valid) || (ndim == 4 && valid && x->sizes[3] != 0)))
                return od_error_set(err, OD_EINVAL,
                                    "Expected 3D or 4D (batch mode) tensor with optional 0 dim batch size for input, "
                                    "but got:%s",
                                    shp);
            if (!(k[1] / 2 >= pd[1] && k[0] / 2 >= pd[0]))
                return od_error_set(err, OD_EINVAL,
                                    "pad should be smaller than or equal to half of kernel size, but got padW = %" PRId64
                                    ", padH = %" PRId64 ", kW = %" PRId64 ", kH = %" PRId64,
                                    pd[1], pd[0], k[1], k[0]);
            int64_t C = x->sizes[ndim - 3];
            if (g->out[1] < 1 || g->out[2] < 1)
                return od_error_set(err, OD_EINVAL,
                                    "Given input size: (%" PRId64 "x%" PRId64 "x%" PRId64 "). Calculated output size: (%" PRId64
                                    "x%" PRId64 "x%" PRId64 "). Output size is too small",
                                    C, g->in[1], g->in[2], C, g->out[1], g->out[2]);
        } else {
            if (k[0] <= 0 || k[1] <= 0 || k[2] <= 0)
                return od_error_set(err, OD_EINVAL,
                                    "kernel size should be greater than zero, but got kT: %" PRId64 " kH: %" PRId64
                                    " kW: %" PRId64,
                                    k[0], k[1], k[2]);
            if (sd[0] <= 0 || sd[1] <= 0 || sd[2] <= 0)
                return od_error_set(err, OD_EINVAL,
                                    "stride should be greater than zero, but got dT: %" PRId64 " dH: %" PRId64
                                    " dW: %" PRId64,
                                    sd[0], sd[1], sd[2]);
            if (dl[0] <= 0 || dl[1] <= 0 || dl[2] <= 0)
                return od_error_set(err, OD_EINVAL,
                                    "dilation should be greater than zero, but got dilationT: %" PRId64
                                    " dilationH: %" PRId64 " dilationW: %" PRId64,
                                    dl[0], dl[1], dl[2]);
            const char *fn = o.kind == OD_POOL_AVG ? (o.backward ? "avg_pool3d_backward()" : "avg_pool3d()")
                                                   : (o.backward ? "max_pool3d_with_indices_backward_out_cpu_template()"
                                                                 : "max_pool3d_with_indices_out_cpu_template()");
            for (int d = 0; d < ndim; d++)
                if (!(ndim == 5 && d == 0) && x->sizes[d] <= 0)
                    return od_error_set(err, OD_EINVAL,
                                        "%s: Expected input's non-batch dimensions to have positive length, but input "
                                        "has a shape of %s and non-batch dimension %" PRId64 " has length zero!",
                                        fn, shp, x->sizes[d]);
            if (o.kind == OD_POOL_AVG && !o.backward && !(g->in[0] >= k[0] && g->in[1] >= k[1] && g->in[2] >= k[2]))
                return od_error_set(err, OD_EINVAL,
                                    "input image (T: %" PRId64 " H: %" PRId64 " W: %" PRId64
                                    ") smaller than kernel size (kT: %" PRId64 " kH: %" PRId64 " kW: %" PRId64 ")",
                                    g->in[0], g->in[1], g->in[2], k[0], k[1], k[2]);
            if (!(k[0] / 2 >= pd[0] && k[2] / 2 >= pd[2] && k[1] / 2 >= pd[1]))
                return od_error_set(err, OD_EINVAL,
                                    "pad should be smaller than or equal to half of kernel size, but got kT: %" PRId64
                                    " kW: %" PRId64 " kH: %" PRId64 " padT: %" PRId64 " padW: %" PRId64
                                    " padH: %" PRId64,
                                    k[0], k[2], k[1], pd[0], pd[2], pd[1]);
            int64_t C = x->sizes[ndim - 4];
            if (g->out[0] < 1 || g->out[1] < 1 || g->out[2] < 1)
                return od_error_set(err, OD_EINVAL,
                                    "Given input size: (%" PRId64 "x%" PRId64 "x%" PRId64 "x%" PRId64
                                    "). Calculated output size: (%" PRId64 "x%" PRId64 "x%" PRId64 "x%" PRId64
                                    "). Output size is too small",
                                    C, g->in[0], g->in[1], g->in[2], C, g->out[0], g->out[1], g->out[2]);
        }
        p->lead = lead;
    } else {
        /* adaptive: output_size (forward) or grad_output's sizes (backward) */
        const char *fn = o.kind == OD_POOL_AAVG ? (nd == 2 ? "adaptive_avg_pool2d" : "adaptive_avg_pool3d")
                                                : (nd == 2 ? "adaptive_max_pool2d" : "adaptive_max_pool3d");
        const int64_t *os = NULL;
        int64_t os1, osz[3];
        if (!o.backward) {
            int n = od_shape_int_list(&s->args[1], &os, &os1);
            if (o.kind == OD_POOL_AAVG && n != nd)
                return od_error_set(err, OD_EINVAL, "%s: output_size must be %d", fn, nd);
        }
        if (o.backward && nd == 2) {
            /* torch 1.13's 2-d backwards check grad_output first: avg its non-batch sizes, then its
             * rank under self's sizes, then its dtype; max its rank under its own */
            char gs[256];
            sizes_str(gr, gs, sizeof gs);
            od_status est;
            if (o.kind == OD_POOL_AAVG && (est = nonempty_dims(&o, fn, gr, 1, err)))
                return est;
            if (!(gr->ndim == 3 || gr->ndim == 4))
                return o.kind == OD_POOL_AAVG
                           ? od_error_set(err, OD_EINVAL,
                                          "adaptive_avg_pool2d_backward(): Expected 3D or 4D tensor, but got %s", shp)
                           : od_error_set(err, OD_EINVAL,
                                          "adaptive_max_pooling2d_backward(): Expected 3D or 4D grad_output, but "
                                          "got: %s",
                                          gs);
            if (o.kind == OD_POOL_AAVG && gr->dtype != x->dtype)
                return od_error_set(err, OD_EINVAL, "expected dtype %s for `grad_output` but got dtype %s",
                                    od_dtype_meta_name(x->dtype), od_dtype_meta_name(gr->dtype));
            int d2;
            od_status st = od_wrap_dim_strict(-2, ndim, &d2, err); /* ATen reads self.size(-2) next */
            if (st)
                return st;
        }
        if (!(ndim == nd + 1 || ndim == nd + 2))
            return od_error_set(err, OD_EINVAL, "%s(): Expected %dD or %dD tensor, but got%s %s", fn, nd + 1, nd + 2,
                                o.kind == OD_POOL_AMAX ? ":" : "", shp);
        /* torch 1.13 checks the forward's input, and the 2-d backward's
         * grad_output (under the backward's name); its 3-d backward checks
         * nothing, and answers an empty grad_input for an empty self */
        int from = o.kind == OD_POOL_AAVG && nd == 2 && !o.backward ? ndim - 2 : 1;
        od_status est;
        if (!(o.backward && nd == 3) && (est = nonempty_dims(&o, fn, o.backward ? gr : x, from, err)))
            return est;
        if (!o.backward && o.kind == OD_POOL_AMAX && od_shape_int_list(&s->args[1], &os, &os1) != nd)
            return od_error_set(err, OD_EINVAL, "%s(): internal error: output_size.size() must be %d", fn, nd);
        if (o.backward) {
            if (gr->ndim != ndim)
                return od_error_set(err, OD_EINVAL, "%s(): Expected grad_output to have %d dims, but got %s", name,
                                    ndim, shp);
            for (int d = 0; d < nd; d++)
                osz[d] = gr->sizes[ndim - nd + d];
            os = osz;
        }
        for (int d = 0; d < nd; d++) {
            g->in[off + d] = x->sizes[ndim - nd + d];
            g->out[off + d] = os[d];
            if (os[d] < 0) {
                if (o.kind == OD_POOL_AAVG)
                    return od_error_set(err, OD_EINVAL, "numel: integer multiplication overflow");
                int64_t sz[OD_MAX_DIMS];
                for (int q = 0; q < ndim; q++)
                    sz[q] = q < ndim - nd ? x->sizes[q] : os[q - (ndim - nd)];
                char o2[256];
                od_shape_print(sz, ndim, o2, sizeof o2);
                return od_error_set(err, OD_EINVAL, "Trying to create tensor with negative dimension %" PRId64 ": %s",
                                    os[d], o2);
            }
        }
        if (nd == 2)
            g->in[0] = g->out[0] = 1;
        for (int d = 0; d < 3; d++)
            g->k[d] = g->st[d] = g->dil[d] = 1;
        p->lead = ndim - nd;
    }
    p->planes = 1;
    for (int d = 0; d < p->lead; d++)
        p->planes *= x->sizes[d];
    if (o.backward) {
        int64_t want[OD_MAX_DIMS];
        for (int d = 0; d < ndim; d++)
            want[d] = d < p->lead ? x->sizes[d] : g->out[off + d - p->lead];
        od_status st;
        if (gr->dtype != x->dtype)
            return od_error_set(err, OD_EINVAL, "expected dtype %s for `grad_output` but got dtype %s",
                                od_dtype_name(x->dtype), od_dtype_name(gr->dtype));
        if ((st = check_like_output(gr, ndim, want, p->lead, nd, err)))
            return st;
    }
    if (p->backward && p->with_indices) {
        const od_tensor *ix = tensor_arg(s, o.kind == OD_POOL_MAX ? 7 : 2);
        if (!ix)
            return od_error_set(err, OD_EINVAL, "%s(): argument 'indices' must be a Tensor", name);
        if (ix->dtype != OD_INT64)
            return od_error_set(err, OD_EINVAL, "expected dtype int64 for `indices` but got dtype %s",
                                od_dtype_name(ix->dtype));
        /* adaptive max pooling's backward reads indices once per grad_output
         * element: with none, torch 1.13 answers zeros whatever they hold */
        if (o.kind == OD_POOL_AMAX && od_tensor_numel(gr) == 0) {
            p->planes = 0;
            ix = NULL;
        } else if (ix->ndim != gr->ndim || memcmp(ix->sizes, gr->sizes, sizeof(int64_t) * (size_t)gr->ndim) != 0) {
            char a[256], b[256];
            od_shape_print(ix->sizes, ix->ndim, a, sizeof a);
            od_shape_print(gr->sizes, gr->ndim, b, sizeof b);
            return od_error_set(err, OD_EINVAL, "expected sizes of `indices` %s to match `grad_output` %s", a, b);
        }
        p->indices = ix;
    }
    od_dtype dt = x->dtype;
    /* ATen's _adaptive_avg_pool2d returns an empty output before its dtype
     * dispatch (the others dispatch first) */
    int64_t on = p->planes * g->out[0] * g->out[1] * g->out[2];
    if (o.kind == OD_POOL_AAVG && nd == 2 && !o.backward && on == 0)
        return OD_OK;
    if (!(dt == OD_FLOAT32 || dt == OD_FLOAT64 || (o.bf16 && dt == OD_BFLOAT16) || (o.half && dt == OD_FLOAT16) ||
          (o.i64 && dt == OD_INT64)))
        return od_error_set(err, OD_EUNSUPPORTED, "\"%s\" not implemented for '%s'", o.dt, od_dtype_scalar_name(dt));
    return OD_OK;
}

od_status od_shape_pool(od_opid id, const od_stack *s, od_out_spec *outs, int *nouts, od_error *err)
{
    od_pool_plan p;
    od_status st = od_pool_plan_of(id, s, &p, err);
    if (st)
        return st;
    const od_tensor *x = p.self;
    memset(&outs[0], 0, sizeof outs[0]);
    outs[0].dtype = x->dtype;
    outs[0].device = x->device;
    outs[0].ndim = x->ndim;
    outs[0].alias_of = -1;
    for (int k = 0; k < x->ndim; k++)
        outs[0].sizes[k] = p.backward || k < p.lead ? x->sizes[k] : p.g.out[3 - p.nd + k - p.lead];
    *nouts = 1;
    if (!p.backward && p.with_indices) {
        outs[1] = outs[0];
        outs[1].dtype = OD_INT64;
        *nouts = 2;
    }
    return OD_OK;
}
