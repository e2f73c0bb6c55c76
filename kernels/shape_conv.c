/* shape_conv.c — the shape and dtype function of convolution and
 * convolution_backward, and the plan their CPU and CUDA kernels share.
 *
 * Invariants: the checks and messages are torch 1.13's (_convolution's
 * parameter expansion, check_shape_forward, the CPU kernels' dtype
 * dispatch), in that order. Every geometry is held as 3 spatial dims: the
 * unused leading ones have size 1, kernel 1, stride 1, padding 0, dilation
 * 1, so one kernel serves conv1d/2d/3d. The plan names the two sides of a
 * convolution by their geometry, not by their role: the "image" side is
 * the one the kernel window slides over (the input of a convolution, the
 * output of a transposed one), the "grid" side has one element per window
 * position; the weight is always [C_grid, C_img / groups, k...]. Nothing
 * here touches data or allocates.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "od_shape.h"

/* "[1, 2]" of an int list value */
static void print_list(const od_value *v, char *buf, size_t cap)
{
    od_shape_print((const int64_t *)v->u.list.items, (int)v->u.list.n, buf, cap);
}

/* expand_param_if_needed: a single value serves every dim */
static od_status expand_param(const od_value *v, const char *name, int nd, int64_t *out, int64_t fill,
                              od_error *err)
{
    for (int k = 0; k < 3; k++)
        out[k] = fill;
    if (v->tag != OD_T_INT_LIST)
        return od_error_set(err, OD_EINVAL, "convolution(): argument '%s' must be a list of ints", name);
    const int64_t *x = v->u.list.items;
    size_t n = v->u.list.n;
    if (n != 1 && n != (size_t)nd) {
        char b[256];
        print_list(v, b, sizeof b);
        return od_error_set(err, OD_EINVAL,
                            "expected %s to be a single integer value or a list of %d values to match the "
                            "convolution dimensions, but got %s=%s",
                            name, nd, name, b);
    }
    for (int k = 0; k < nd; k++)
        out[3 - nd + k] = x[n == 1 ? 0 : k];
    return OD_OK;
}

static const od_tensor *tensor_arg(const od_stack *s, int i)
{
    return i < s->nargs && s->args[i].tag == OD_T_TENSOR ? s->args[i].u.t : NULL;
}

/* a * b + c into *r, false on int64 overflow: a padding, stride or dilation
 * near 2^63 must answer an error, not wrap (ATen wraps, and its message shows
 * the wrapped size). */
static bool mul_add(int64_t a, int64_t b, int64_t c, int64_t *r)
{
    int64_t m;
    return !__builtin_mul_overflow(a, b, &m) && !__builtin_add_overflow(m, c, r);
}

static od_status too_large(od_error *err)
{
    return od_error_set(err, OD_EINVAL,
                        "convolution(): padding, stride, dilation or output_padding too large: the sizes they give "
                        "overflow int64");
}

/* The dtype the CPU kernel named in torch's "not implemented" message */
static const char *cpu_kernel_name(const od_conv_plan *p)
{
    bool dilated = false;
    for (int k = 0; k < 3; k++)
        dilated |= p->dil[k] != 1;
    if (p->transposed)
        return p->nd == 3 ? "slow_conv_transpose3d_out_cpu" : "slow_conv_transpose2d_out_cpu";
    if (dilated)
        return "slow_conv_dilated<>";
    return p->nd == 3 ? "compute_columns3d" : "slow_conv2d_cpu";
}

/* c10's Tensor::toString() of t's type, as torch's type messages print it */
static void type_string(const od_tensor *t, char *buf, size_t cap)
{
    bool cuda = t->device.type == OD_DEV_CUDA;
    if (t->dtype == OD_BFLOAT16)
        snprintf(buf, cap, "%sBFloat16Type", cuda ? "CUDA" : "CPU");
    else
        snprintf(buf, cap, "torch.%s%sTensor", cuda ? "cuda." : "", od_dtype_scalar_name(t->dtype));
}

/* The dtype checks, after the shape checks, as torch's backends make them:
 * float32 / bfloat16 convolutions (not transposed) go to oneDNN, which
 * checks weight and bias types first; the others reach the slow kernels,
 * whose dtype dispatch refuses first, then the weight's type; a slow
 * convolution casts a bias of another type, a slow transposed one refuses
 * it. An empty input reaches no kernel in torch, so any dtype passes. */
static od_status check_types(const od_conv_plan *p, bool backward, od_error *err)
{
    const od_tensor *x = p->input, *w = p->weight, *b = p->bias;
    if (od_tensor_numel(x) == 0) /* ATen's "Empty" backend: no kernel, so no dtype check */
        return OD_OK;
    char xs[64], os[64];
    if ((x->dtype == OD_FLOAT32 || x->dtype == OD_BFLOAT16) && !p->transposed) {
        const od_tensor *other = w->dtype != x->dtype || w->device.type != x->device.type ? w
                               : b && (b->dtype != x->dtype || b->device.type != x->device.type) ? b
                                                                                                    : NULL;
        if (!other)
            return OD_OK;
        type_string(x, xs, sizeof xs);
        type_string(other, os, sizeof os);
        const char *what = other == w ? "weight" : "bias";
        return od_error_set(err, OD_EMISMATCH,
                            "Input type (%s) and %s type (%s) should be the same or input should be a MKLDNN tensor "
                            "and %s is a dense tensor",
                            xs, what, os, what);
    }
    bool dilated = false;
    for (int k = 0; k < 3; k++)
        dilated |= p->dil[k] != 1;
    /* every path takes float32/64, bfloat16 and int64; the narrower
     * integers only the plain (im2col) convolution; bool and float16 none */
    bool ok = x->dtype == OD_FLOAT32 || x->dtype == OD_FLOAT64 || x->dtype == OD_BFLOAT16 || x->dtype == OD_INT64 ||
              ((x->dtype == OD_INT32 || x->dtype == OD_INT16 || x->dtype == OD_INT8 || x->dtype == OD_UINT8) &&
               !p->transposed && !dilated);
    if (!ok && !backward) /* (the backward's kernels refuse in backward_types) */
        return od_error_set(err, OD_EUNSUPPORTED, "\"%s\" not implemented for '%s'", cpu_kernel_name(p),
                            od_dtype_scalar_name(x->dtype));
    const od_tensor *other = w->dtype != x->dtype ? w : b && p->transposed && b->dtype != x->dtype ? b : NULL;
    if (other)
        return od_error_set(err, OD_EMISMATCH, "expected scalar type %s but found %s", od_dtype_scalar_name(x->dtype),
                            od_dtype_scalar_name(other->dtype));
    return OD_OK;
}

/* Fills *p from the arguments starting at in_at (input, weight, then
 * bias / bias_sizes, stride, padding, dilation, transposed, output_padding,
 * groups); bias_is_sizes: convolution_backward's SymInt[]? bias_sizes. */
static od_status plan_of(const od_stack *s, int in_at, bool bias_is_sizes, od_conv_plan *p, od_error *err)
{
    memset(p, 0, sizeof *p);
    if (s->nargs < in_at + 9)
        return od_error_set(err, OD_EINVAL, "convolution(): expected %d arguments", in_at + 9);
    const od_tensor *x = tensor_arg(s, in_at), *w = tensor_arg(s, in_at + 1);
    if (!x || !w)
        return od_error_set(err, OD_EINVAL, "convolution(): argument '%s' must be a Tensor", x ? "weight" : "input");
    const od_tensor *b = bias_is_sizes ? NULL : tensor_arg(s, in_at + 2);
    p->input = x;
    p->weight = w;
    p->bias = b;
    const od_value *tr = &s->args[in_at + 6], *gr = &s->args[in_at + 8];
    if (tr->tag != OD_T_BOOL || gr->tag != OD_T_INT)
        return od_error_set(err, OD_EINVAL, "convolution(): arguments 'transposed' and 'groups' must be bool and int");
    p->transposed = tr->u.b;
    p->groups = gr->u.i;
    int nd = w->ndim - 2;
    if (nd < 1)
        return od_error_set(err, OD_EINVAL, "weight should have at least three dimensions");
    if (p->groups <= 0)
        return od_error_set(err, OD_EINVAL, "non-positive groups is not supported");
    if (nd > 3)
        return od_error_set(err, OD_EUNSUPPORTED, "convolution: %d spatial dims are not supported (at most 3)", nd);
    p->nd = nd;
    od_status st;
    if ((st = expand_param(&s->args[in_at + 3], "stride", nd, p->stride, 1, err)) ||
        (st = expand_param(&s->args[in_at + 4], "padding", nd, p->pad, 0, err)) ||
        (st = expand_param(&s->args[in_at + 5], "dilation", nd, p->dil, 1, err)) ||
        (st = expand_param(&s->args[in_at + 7], "output_padding", nd, p->opad, 0, err)))
        return st;
    for (int k = 0; k < 3; k++) {
        if (p->pad[k] < 0)
            return od_error_set(err, OD_EINVAL, "negative padding is not supported");
        if (p->opad[k] < 0)
            return od_error_set(err, OD_EINVAL, "negative output_padding is not supported");
        if (p->stride[k] <= 0)
            return od_error_set(err, OD_EINVAL, "non-positive stride is not supported");
        if (p->dil[k] <= 0)
            return od_error_set(err, OD_EINVAL, "non-positive dilation is not supported");
    }
    /* check_shape_forward */
    char ws[256], xs[256];
    od_shape_print(w->sizes, w->ndim, ws, sizeof ws);
    od_shape_print(x->sizes, x->ndim, xs, sizeof xs);
    if (x->ndim != w->ndim)
        return od_error_set(err, OD_EMISMATCH,
                            "Expected %d-dimensional input for %d-dimensional weight %s, but got %d-dimensional input "
                            "of size %s instead",
                            w->ndim, w->ndim, ws, x->ndim, xs);
    if (w->sizes[0] < p->groups)
        return od_error_set(err, OD_EMISMATCH,
                            "Given groups=%" PRId64 ", expected weight to be at least %" PRId64
                            " at dimension 0, but got weight of size %s instead",
                            p->groups, p->groups, ws);
    if (w->sizes[0] % p->groups)
        return od_error_set(err, OD_EMISMATCH,
                            "Given groups=%" PRId64 ", expected weight to be divisible by %" PRId64
                            " at dimension 0, but got weight of size [%s] instead",
                            p->groups, p->groups, ws);
    for (int k = 0; k < 3; k++)
        p->k[k] = k < 3 - nd ? 1 : w->sizes[2 + k - (3 - nd)];
    p->N = x->sizes[0];
    char bs[256] = "";
    int64_t bias_n = -1;
    bool bias_bad = false;
    if (b) {
        od_shape_print(b->sizes, b->ndim, bs, sizeof bs);
        bias_n = b->ndim == 1 ? b->sizes[0] : -1;
        bias_bad = b->ndim != 1;
    }
    if (!p->transposed) {
        if (x->sizes[1] != w->sizes[1] * p->groups)
            return od_error_set(err, OD_EMISMATCH,
                                "Given groups=%" PRId64 ", weight of size %s, expected input%s to have %" PRId64
                                " channels, but got %" PRId64 " channels instead",
                                p->groups, ws, xs, w->sizes[1] * p->groups, x->sizes[1]);
        if (b && (bias_bad || bias_n != w->sizes[0]))
            return od_error_set(err, OD_EMISMATCH,
                                "Given weight of size %s, expected bias to be 1-dimensional with %" PRId64
                                " elements, but got bias of size %s instead",
                                ws, w->sizes[0], bs);
        char in_s[128] = "", k_s[128] = "";
        bool ok = true;
        for (int k = 0; k < nd; k++) {
            int64_t ip, kk;
            if (!mul_add(2, p->pad[3 - nd + k], x->sizes[2 + k], &ip) ||
                !mul_add(p->dil[3 - nd + k], p->k[3 - nd + k] - 1, 1, &kk))
                return too_large(err);
            ok &= ip >= kk;
            size_t li = strlen(in_s), lk = strlen(k_s);
            snprintf(in_s + li, sizeof in_s - li, "%s%" PRId64, k ? " x " : "", ip);
            snprintf(k_s + lk, sizeof k_s - lk, "%s%" PRId64, k ? " x " : "", kk);
        }
        if (!ok)
            return od_error_set(err, OD_EINVAL,
                                "Calculated padded input size per channel: (%s). Kernel size: (%s). Kernel size "
                                "can't be greater than actual input size",
                                in_s, k_s);
        p->C_img = x->sizes[1];
        p->C_grid = w->sizes[0];
        for (int k = 0; k < 3; k++) {
            p->img[k] = k < 3 - nd ? 1 : x->sizes[2 + k - (3 - nd)];
            p->grid[k] = (p->img[k] + 2 * p->pad[k] - p->dil[k] * (p->k[k] - 1) - 1) / p->stride[k] + 1;
        }
    } else {
        if (x->sizes[1] != w->sizes[0])
            return od_error_set(err, OD_EMISMATCH,
                                "Given transposed=1, weight of size %s, expected input%s to have %" PRId64
                                " channels, but got %" PRId64 " channels instead",
                                ws, xs, w->sizes[0], x->sizes[1]);
        if (b && (bias_bad || bias_n != w->sizes[1] * p->groups))
            return od_error_set(err, OD_EMISMATCH,
                                "Given transposed=1, weight of size %s, expected bias to be 1-dimensional with %" PRId64
                                " elements, but got bias of size %s instead",
                                ws, w->sizes[1] * p->groups, bs);
        p->C_grid = x->sizes[1];
        p->C_img = w->sizes[1] * p->groups;
        /* slow_conv_transpose's shape check: output padding below stride or dilation */
        bool opad_bad = false;
        for (int k = 3 - nd; k < 3; k++)
            opad_bad |= !(p->opad[k] < p->stride[k] || p->opad[k] < p->dil[k]);
        if (opad_bad) {
            static const char *const dn[3] = {"depth", "height", "width"};
            char m[512] = "output padding must be smaller than either stride or dilation, but got";
            const char *what[3] = {"output_padding", "stride", "dilation"};
            const int64_t *vals[3] = {p->opad, p->stride, p->dil};
            int first = nd == 1 ? 1 : 3 - nd; /* 1-d runs as 2-d: height 1 */
            for (int q = 0; q < 3; q++)
                for (int k = first; k < 3; k++) {
                    size_t l = strlen(m);
                    snprintf(m + l, sizeof m - l, " %s_%s: %" PRId64, what[q], dn[k], vals[q][k]);
                }
            return od_error_set(err, OD_EINVAL, "%s", m);
        }
        bool small = false;
        char in_s[128] = "", o_s[128] = "";
        for (int k = 0; k < 3; k++) {
            p->grid[k] = k < 3 - nd ? 1 : x->sizes[2 + k - (3 - nd)];
            int64_t a, b;
            if (!mul_add(p->grid[k] - 1, p->stride[k], p->opad[k] + 1, &a) ||
                !mul_add(p->dil[k], p->k[k] - 1, 0, &b) || __builtin_add_overflow(a, b, &a) ||
                !mul_add(-2, p->pad[k], a, &p->img[k]))
                return too_large(err);
            if (k >= 3 - nd || nd == 1) {
                small |= p->img[k] < 1;
                size_t li = strlen(in_s), lo = strlen(o_s);
                snprintf(in_s + li, sizeof in_s - li, "%s%" PRId64, li ? " x " : "", p->grid[k]);
                snprintf(o_s + lo, sizeof o_s - lo, "%s%" PRId64, lo ? " x " : "", p->img[k]);
            }
        }
        if (small)
            return od_error_set(err, OD_EINVAL,
                                "Given input size per channel: (%s). Calculated output size per channel: (%s). Output "
                                "size is too small",
                                in_s, o_s);
    }
    return check_types(p, bias_is_sizes, err);
}

/* The output's sizes: [N, C, spatial...] of the plan's output side */
static void out_sizes(const od_conv_plan *p, int64_t *sizes)
{
    sizes[0] = p->N;
    sizes[1] = p->transposed ? p->C_img : p->C_grid;
    for (int k = 0; k < p->nd; k++)
        sizes[2 + k] = p->transposed ? p->img[3 - p->nd + k] : p->grid[3 - p->nd + k];
}

/* The dtypes torch 1.13's CPU backward kernels take beyond float32/64 and
 * bfloat16 (where the forward took more): int64 through the dilated
 * kernels; a bias gradient alone (a sum) in any dtype of the plain ones,
 * and nothing asked of the transposed ones; each refusal names the first
 * kernel the mask reaches. */
static od_status backward_types(const od_conv_plan *p, od_error *err)
{
    od_dtype dt = p->input->dtype;
    if (dt == OD_FLOAT32 || dt == OD_FLOAT64 || dt == OD_BFLOAT16 || od_tensor_numel(p->input) == 0)
        return OD_OK;
    bool dilated = false;
    for (int k = 0; k < 3; k++)
        dilated |= p->dil[k] != 1;
    const char *dn = p->nd == 3 ? "3" : "2", *kernel;
    char name[64];
    if (p->transposed) {
        if (!p->mask[0] && !p->mask[1] && !p->mask[2])
            return OD_OK; /* neither kernel is reached */
        snprintf(name, sizeof name, "slow_conv_transpose%sd_%s", dn,
                 p->mask[0] ? "backward_out_cpu" : "acc_grad_parameters_cpu");
        kernel = name;
    } else if (dilated) {
        if (dt == OD_INT64)
            return OD_OK;
        kernel = "slow_conv_dilated<>";
    } else {
        if (!p->mask[0] && !p->mask[1])
            return OD_OK;
        snprintf(name, sizeof name, "slow_conv%sd_cpu_grad_%s", dn, p->mask[0] ? "input" : "weight");
        kernel = name;
    }
    return od_error_set(err, OD_EUNSUPPORTED, "\"%s\" not implemented for '%s'", kernel, od_dtype_scalar_name(dt));
}

od_status od_conv_plan_of(od_opid id, const od_stack *s, od_conv_plan *p, od_error *err)
{
    if (id == OD_OPID_convolution)
        return plan_of(s, 0, false, p, err);
    od_status st = plan_of(s, 1, true, p, err);
    if (st)
        return st;
    const od_tensor *g = tensor_arg(s, 0);
    if (!g)
        return od_error_set(err, OD_EINVAL, "convolution_backward(): argument 'grad_output' must be a Tensor");
    int64_t sz[5];
    out_sizes(p, sz);
    bool same = g->ndim == p->nd + 2;
    for (int k = 0; same && k < g->ndim; k++)
        same = g->sizes[k] == sz[k];
    if (!same) {
        char gs[256], es[256];
        od_shape_print(g->sizes, g->ndim, gs, sizeof gs);
        od_shape_print(sz, p->nd + 2, es, sizeof es);
        return od_error_set(err, OD_EMISMATCH, "convolution_backward: grad_output of size %s, expected %s", gs, es);
    }
    if (g->dtype != p->input->dtype || g->device.type != p->input->device.type)
        return od_error_set(err, OD_EMISMATCH, "expected scalar type %s but found %s",
                            od_dtype_scalar_name(p->input->dtype), od_dtype_scalar_name(g->dtype));
    const od_value *m = &s->args[10];
    if (m->tag != OD_T_BOOL_LIST || m->u.list.n != 3)
        return od_error_set(err, OD_EINVAL, "convolution_backward(): argument 'output_mask' must be a list of 3 bools");
    for (int k = 0; k < 3; k++)
        p->mask[k] = ((const bool *)m->u.list.items)[k];
    return backward_types(p, err);
}

od_status od_shape_conv(od_opid id, const od_stack *s, od_out_spec *outs, int *nouts, od_error *err)
{
    od_conv_plan p;
    od_status st = od_conv_plan_of(id, s, &p, err);
    if (st)
        return st;
    const od_tensor *x = p.input, *w = p.weight;
    if (id == OD_OPID_convolution) {
        memset(&outs[0], 0, sizeof outs[0]);
        outs[0].dtype = x->dtype;
        outs[0].device = x->device;
        outs[0].ndim = p.nd + 2;
        out_sizes(&p, outs[0].sizes);
        outs[0].alias_of = -1;
        *nouts = 1;
        return OD_OK;
    }
    /* grad_input, grad_weight, grad_bias: described even where output_mask
     * is false (the kernels return None there) */
    const od_tensor *like[2] = {x, w};
    for (int i = 0; i < 3; i++) {
        memset(&outs[i], 0, sizeof outs[i]);
        outs[i].dtype = x->dtype;
        outs[i].device = x->device;
        outs[i].alias_of = -1;
        if (i < 2) {
            outs[i].ndim = like[i]->ndim;
            memcpy(outs[i].sizes, like[i]->sizes, sizeof(int64_t) * (size_t)like[i]->ndim);
        } else {
            outs[i].ndim = 1;
            outs[i].sizes[0] = p.transposed ? p.C_img : p.C_grid;
        }
    }
    *nouts = 3;
    return OD_OK;
}
