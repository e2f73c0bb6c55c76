/* reductions.c — the reductions PyTorch 1.13 composes of others, or that
 * read best that way here: all/any (with a dim), count_nonzero, min/max
 * (whole tensor, and with a dim: values and indices), nansum, logsumexp,
 * std, var_mean and std_mean; aminmax, nanmean, norm and
 * linalg_vector_norm.
 *
 * Invariants: each is CompositeExplicitAutograd with torch's own grad_fn
 * (formulas.c), built only of operators every backend has (sum, amax/amin,
 * argmax/argmin, var, comparisons, where), so one kernel serves CPU, CUDA
 * and Meta. Errors that the inner calls would word in their own terms (an
 * empty max) are checked first, with torch's text. The values agree with the
 * kernels torch runs: logsumexp follows ATen's logsumexp_out_impl step by
 * step; max.dim's values are amax's and its indices argmax's, which break
 * ties toward the first index and return the first NaN, as torch does.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>

#include "composite.h"
#include "od_shape.h"

#define T(x) od_tensor_v(x)

static od_value dims1(const int64_t *d) { return od_list_v(OD_T_INT_LIST, (void *)d, 1); }
static od_value no_dims(void) { return od_list_v(OD_T_INT_LIST, NULL, 0); }

/* od_cx_scope_return1 for two returns (a, b: the scope's, borrowed) */
static od_status scope_return2(od_cx_scope *sc, od_stack *s, od_tensor *a, od_tensor *b)
{
    a = od_cx_keep(a);
    b = od_cx_keep(b);
    od_status st = od_cx_scope_end(sc);
    if (st) {
        od_tensor_release(a);
        od_tensor_release(b);
        return st;
    }
    s->rets[0] = od_tensor_v(a);
    s->rets[1] = od_tensor_v(b);
    s->nrets = 2;
    return OD_OK;
}

/* any/all/count_nonzero: the count of (x != 0) (of x == 0 for all) over the dims, in int64 */
static od_tensor *count(od_cx_scope *sc, od_tensor *x, od_value dims, bool keepdim, bool zeros)
{
    od_tensor *m = od_cx_call(sc, zeros ? OD_OPID_eq_Scalar : OD_OPID_ne_Scalar, 2, T(x), od_int(0));
    return od_cx_call(sc, OD_OPID_sum_dim_IntList, 4, T(m), dims, od_bool(keepdim), od_none());
}

OD_CX_KERNEL(od_cea_reduce_logical)
{
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    od_tensor *self;
    od_status st;
    if ((st = od_cx_arg_tensor(op, s, 0, &self, err)))
        return st;
    bool all = id == OD_OPID_all || id == OD_OPID_all_dim;
    bool has_dim = id == OD_OPID_all_dim || id == OD_OPID_any_dim;
    int64_t dim = 0;
    bool keepdim = false;
    if (has_dim && ((st = od_cx_arg_int(op, s, 1, &dim, err)) || (st = od_cx_arg_bool(op, s, 2, &keepdim, err))))
        return st;
    od_cx_scope sc = od_cx_scope_begin(err);
    od_tensor *n = count(&sc, self, has_dim ? dims1(&dim) : no_dims(), keepdim, all);
    od_tensor *r = od_cx_call(&sc, all ? OD_OPID_eq_Scalar : OD_OPID_ne_Scalar, 2, T(n), od_int(0));
    /* torch 1.13 keeps uint8 for uint8 input, bool otherwise */
    if (r && self->dtype == OD_UINT8)
        r = od_cx_cast(&sc, r, OD_UINT8);
    return od_cx_scope_return1(&sc, s, r);
}

OD_CX_KERNEL(od_cea_count_nonzero)
{
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    od_tensor *self;
    od_status st;
    if ((st = od_cx_arg_tensor(op, s, 0, &self, err)))
        return st;
    od_value dims = s->args[1];
    if (id == OD_OPID_count_nonzero && dims.tag == OD_T_NONE)
        dims = no_dims();
    else if (id == OD_OPID_count_nonzero && dims.tag == OD_T_INT)
        dims = dims1(&s->args[1].u.i);
    od_cx_scope sc = od_cx_scope_begin(err);
    return od_cx_scope_return1(&sc, s, count(&sc, self, dims, false, false));
}

/* max(), min(): amax/amin of everything, which torch refuses when empty */
OD_CX_KERNEL(od_cea_max_min)
{
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    bool mx = id == OD_OPID_max || id == OD_OPID_max_dim;
    const char *name = mx ? "max" : "min";
    od_tensor *self;
    od_status st;
    if ((st = od_cx_arg_tensor(op, s, 0, &self, err)))
        return st;
    od_cx_scope sc = od_cx_scope_begin(err);
    if (id == OD_OPID_max || id == OD_OPID_min) {
        if (od_tensor_numel(self) == 0)
            return od_error_set(err, OD_EINVAL,
                                "%s(): Expected reduction dim to be specified for input.numel() == 0. Specify "
                                "the reduction dim with the 'dim' argument.",
                                name);
        return od_cx_scope_return1(&sc, s,
                                   od_cx_call(&sc, mx ? OD_OPID_amax : OD_OPID_amin, 3, T(self), no_dims(),
                                              od_bool(false)));
    }
    int64_t dim;
    bool keepdim;
    int w;
    if ((st = od_cx_arg_int(op, s, 1, &dim, err)) || (st = od_cx_arg_bool(op, s, 2, &keepdim, err)) ||
        (st = od_wrap_dim(dim, self->ndim, &w, err)))
        return st;
    if (self->ndim > 0 && self->sizes[w] == 0)
        return od_error_set(err, OD_EINVAL, "%s(): Expected reduction dim %d to have non-zero size.", name, w);
    od_tensor *v = od_cx_call(&sc, mx ? OD_OPID_amax : OD_OPID_amin, 3, T(self), dims1(&dim), od_bool(keepdim));
    od_tensor *x = self;
    if (self->dtype == OD_BOOL) /* argmax/argmin refuse bool; uint8 orders it alike */
        x = od_cx_cast(&sc, self, OD_UINT8);
    od_tensor *i = od_cx_call(&sc, mx ? OD_OPID_argmax : OD_OPID_argmin, 3, T(x), od_int(dim), od_bool(keepdim));
    return scope_return2(&sc, s, v, i);
}

/* nansum: sum with NaN read as 0 (integers have none) */
OD_CX_KERNEL(od_cea_nansum)
{
    (void)ctx;
    (void)ks;
    od_tensor *self;
    od_status st;
    if ((st = od_cx_arg_tensor(op, s, 0, &self, err)))
        return st;
    bool has_dt = false;
    od_dtype dt = self->dtype;
    if ((st = od_cx_arg_opt_dtype(op, s, 3, &has_dt, &dt, err)))
        return st;
    /* floating self runs ATen's nansum kernel, which has only floating
     * types; make_reduction checks the dims before */
    uint32_t mask;
    if (od_dtype_is_floating(self->dtype) && self->ndim &&
        (st = od_reduce_dims(&s->args[1], self->ndim, false, &mask, err)))
        return st;
    if (od_dtype_is_floating(self->dtype) && has_dt && !od_dtype_is_floating(dt) && od_tensor_numel(self) > 0)
        return od_error_set(err, OD_EUNSUPPORTED, "\"nansum_cpu\" not implemented for '%s'",
                            od_dtype_scalar_name(dt));
    od_cx_scope sc = od_cx_scope_begin(err);
    od_tensor *x = self;
    if (od_dtype_is_floating(self->dtype))
        x = od_cx_call(&sc, OD_OPID_where_ScalarSelf, 3, T(od_cx_call(&sc, OD_OPID_isnan, 1, T(self))), od_int(0),
                       T(self));
    return od_cx_scope_return1(&sc, s, od_cx_call(&sc, OD_OPID_sum_dim_IntList, 4, T(x), s->args[1], s->args[2],
                                                  s->args[3]));
}

/* logsumexp, as ATen's logsumexp_out_impl: integers in the default float;
 * maxes = amax(keepdim), infinite maxes read as 0, then
 * log(sum(exp(self - maxes))) + maxes; an empty input is log(sum(exp())). */
OD_CX_KERNEL(od_cea_logsumexp)
{
    (void)ctx;
    (void)ks;
    od_tensor *self;
    bool keepdim;
    od_status st;
    if ((st = od_cx_arg_tensor(op, s, 0, &self, err)) || (st = od_cx_arg_bool(op, s, 2, &keepdim, err)))
        return st;
    od_value dims = s->args[1];
    /* ATen adds the keepdim maxes into the result in place: with dim=[]
     * (every dim) and keepdim false their shapes differ, which torch 1.13
     * refuses */
    if (dims.tag == OD_T_INT_LIST && dims.u.list.n == 0 && !keepdim && self->ndim > 0 &&
        od_tensor_numel(self) > 0) {
        char b[128];
        int k = 0;
        for (int d = 0; d < self->ndim && k < (int)sizeof b - 8; d++)
            k += snprintf(b + k, sizeof b - (size_t)k, "%s1", d ? ", " : "");
        return od_error_set(err, OD_EINVAL, "output with shape [] doesn't match the broadcast shape [%s]", b);
    }
    od_cx_scope sc = od_cx_scope_begin(err);
    od_tensor *x = self;
    if (!od_dtype_is_floating(self->dtype))
        x = od_cx_cast(&sc, self, OD_DEFAULT_FLOAT);
    od_tensor *r;
    if (od_tensor_numel(self) == 0) {
        od_tensor *e = od_cx_call(&sc, OD_OPID_exp, 1, T(x));
        r = od_cx_call(&sc, OD_OPID_log, 1,
                       T(od_cx_call(&sc, OD_OPID_sum_dim_IntList, 4, T(e), dims, od_bool(keepdim), od_none())));
    } else {
        od_tensor *m = od_cx_call(&sc, OD_OPID_amax, 3, T(x), dims, od_bool(true));
        m = od_cx_call(&sc, OD_OPID_where_ScalarSelf, 3, T(od_cx_call(&sc, OD_OPID_isinf, 1, T(m))), od_int(0), T(m));
        od_tensor *e = od_cx_call(&sc, OD_OPID_exp, 1, T(od_cx_call(&sc, OD_OPID_sub_Tensor, 3, T(x), T(m), od_int(1))));
        od_tensor *l = od_cx_call(&sc, OD_OPID_log, 1,
                                  T(od_cx_call(&sc, OD_OPID_sum_dim_IntList, 4, T(e), dims, od_bool(keepdim), od_none())));
        od_tensor *mk = m;
        if (m && !keepdim) { /* maxes with the reduced dims squeezed: l's shape */
            mk = od_cx_call(&sc, OD_OPID_view, 2, T(m),
                            od_list_v(OD_T_INT_LIST, l ? l->sizes : NULL, l ? (size_t)l->ndim : 0));
        }
        r = od_cx_call(&sc, OD_OPID_add_Tensor, 3, T(l), T(mk), od_int(1));
    }
    return od_cx_scope_return1(&sc, s, r);
}

/* var.correction of x (borrowed) over dims (the caller's argument) in the
 * shape of m (the mean over the same dims), computed on [2, x...] (a 0-dim x
 * as [1]) so that the reduction has two outputs; NULL on error (sc->st). */
static od_tensor *var_of_two_copies(od_cx_scope *sc, od_tensor *x, const od_value *dims, const od_value *c,
                                    const od_tensor *m)
{
    uint32_t mask = 0;
    int nd = x->ndim ? x->ndim : 1;
    if (x->ndim && (sc->st = od_reduce_dims(dims, x->ndim, false, &mask, sc->err)))
        return NULL;
    int64_t sizes[OD_MAX_DIMS + 1], rdims[OD_MAX_DIMS];
    int nr = 0;
    sizes[0] = 2;
    for (int d = 0; d < nd; d++) {
        sizes[d + 1] = x->ndim ? x->sizes[d] : 1;
        if (!x->ndim || (mask >> d) & 1u)
            rdims[nr++] = d + 1;
    }
    od_tensor *x1 = x->ndim ? x : od_cx_call(sc, OD_OPID_view, 2, T(x), od_list_v(OD_T_INT_LIST, sizes + 1, 1));
    od_tensor *x2 = od_cx_call(sc, OD_OPID_unsqueeze, 2, T(x1), od_int(0));
    x2 = od_cx_call(sc, OD_OPID_expand, 3, T(x2), od_list_v(OD_T_INT_LIST, sizes, (size_t)nd + 1), od_bool(false));
    od_tensor *v = od_cx_call(sc, OD_OPID_var_correction, 4, T(x2), od_list_v(OD_T_INT_LIST, rdims, (size_t)nr), *c,
                              od_bool(false));
    v = od_cx_call(sc, OD_OPID_select_int, 3, T(v), od_int(0), od_int(0));
    return od_cx_call(sc, OD_OPID_view, 2, T(v), od_list_v(OD_T_INT_LIST, (int64_t *)m->sizes, (size_t)m->ndim));
}

/* std, std.dim, std.correction: sqrt of the var overload of the same
 * arguments; var_mean and std_mean: that and mean over the same dims. */
OD_CX_KERNEL(od_cea_std_var_mean)
{
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    od_tensor *self;
    od_status st;
    if ((st = od_cx_arg_tensor(op, s, 0, &self, err)))
        return st;
    static const struct {
        od_opid id, var;
        bool sqrt, mean;
    } tab[] = {
        {OD_OPID_std, OD_OPID_var, true, false},
        {OD_OPID_std_dim, OD_OPID_var_dim, true, false},
        {OD_OPID_std_correction, OD_OPID_var_correction, true, false},
        {OD_OPID_var_mean, OD_OPID_var, false, true},
        {OD_OPID_var_mean_dim, OD_OPID_var_dim, false, true},
        {OD_OPID_var_mean_correction, OD_OPID_var_correction, false, true},
        {OD_OPID_std_mean, OD_OPID_var, true, true},
        {OD_OPID_std_mean_dim, OD_OPID_var_dim, true, true},
        {OD_OPID_std_mean_correction, OD_OPID_var_correction, true, true},
    };
    size_t k = 0;
    while (k < sizeof tab / sizeof tab[0] && tab[k].id != id)
        k++;
    if (k == sizeof tab / sizeof tab[0])
        return od_error_set(err, OD_EINTERNAL, "%s is not a std/var composite", od_op_name(op));
    if (tab[k].mean && !od_dtype_is_floating(self->dtype))
        return od_error_set(err, OD_EUNSUPPORTED, "%s only support floating point and complex dtypes",
                            tab[k].sqrt ? "std_mean" : "var_mean");
    bool whole = tab[k].var == OD_OPID_var;
    uint32_t dmask; /* dim by dim, as make_reduction, before mean's own (structured) wrapping; after the
                     * dtype check (var's, for an integral std) */
    if (!whole && self->ndim && od_dtype_is_floating(self->dtype) &&
        (st = od_reduce_dims(&s->args[1], self->ndim, false, &dmask, err)))
        return st;
    od_cx_scope sc = od_cx_scope_begin(err);
    /* ATen takes std's square root in its double accumulator before
     * rounding, so a variance beyond the dtype's range still gives a finite
     * std: reduce in float64 and round once. Not for a correction so large
     * that N - correction wraps, which only float32/float64 do in torch. */
    const od_value *c = tab[k].var == OD_OPID_var_correction ? &s->args[2] : NULL;
    bool huge = c && c->tag == OD_T_INT && (c->u.i > (INT64_C(1) << 62) || c->u.i < -(INT64_C(1) << 62));
    /* var_mean and std_mean are Welford's in ATen whatever the dims, its
     * divisor N - correction a double; var's one-output reduction, which the
     * CPU kernel copies, takes it in int64, wrapping for a correction near
     * INT64_MIN. Reduced over two stacked copies of self, the kernel has two
     * outputs and takes the double. So is std's of a float16 or bfloat16
     * self (Welford's in ATen), reduced here in float64. */
    bool narrow = self->dtype == OD_FLOAT16 || self->dtype == OD_BFLOAT16;
    bool stacked = huge && c->u.i < 0 && (tab[k].mean || (tab[k].sqrt && narrow));
    bool up = tab[k].sqrt && od_dtype_is_floating(self->dtype) && self->dtype != OD_FLOAT64 &&
              !(huge && !stacked && self->dtype != OD_FLOAT32);
    od_value x = up ? T(od_cx_cast(&sc, self, OD_FLOAT64))
                    : s->args[0];
    od_tensor *m = NULL; /* also var_of_two_copies's shape */
    if (tab[k].mean || stacked)
        m = od_cx_call(&sc, OD_OPID_mean_dim, 4, T(self), whole ? od_none() : s->args[1],
                       whole ? od_bool(false) : s->args[3], od_none());
    od_tensor *v;
    if (stacked && m)
        v = var_of_two_copies(&sc, x.u.t, &s->args[1], c, m);
    else
        v = whole ? od_cx_call(&sc, OD_OPID_var, 2, x, s->args[1])
                  : od_cx_call(&sc, tab[k].var, 4, x, s->args[1], s->args[2], s->args[3]);
    if (tab[k].sqrt)
        v = od_cx_call(&sc, OD_OPID_sqrt, 1, T(v));
    if (up)
        v = od_cx_cast(&sc, v, self->dtype);
    if (tab[k].mean) {
        /* ATen's mean here is Welford's, which an infinite element followed
         * by any other (in the slice's row-major order) turns into NaN
         * (inf - inf): count the infinities before each slice's last element */
        uint32_t mask = 0;
        if (m && (sc.st = od_reduce_dims(whole ? NULL : &s->args[1], self->ndim, false, &mask, err)) == OD_OK) {
            od_value dims = whole ? od_none() : s->args[1];
            od_value keep = whole ? od_bool(false) : s->args[3];
            od_tensor *inf = od_cx_call(&sc, OD_OPID_isinf, 1, T(self));
            od_tensor *n = od_cx_call(&sc, OD_OPID_sum_dim_IntList, 4, T(inf), dims, keep, od_none());
            od_tensor *last = inf;
            for (int d = 0; d < self->ndim && last; d++)
                if ((mask >> d) & 1u && self->sizes[d] > 0)
                    last = od_cx_call(&sc, OD_OPID_slice_Tensor, 5, T(last), od_int(d), od_int(self->sizes[d] - 1),
                                      od_none(), od_int(1));
            od_tensor *nl = od_cx_call(&sc, OD_OPID_sum_dim_IntList, 4, T(last), dims, keep, od_none());
            od_tensor *early = od_cx_call(&sc, OD_OPID_gt_Tensor, 2, T(n), T(nl));
            m = od_cx_call(&sc, OD_OPID_where_ScalarSelf, 3, T(early), od_double(NAN), T(m));
        }
    }
    return tab[k].mean ? scope_return2(&sc, s, v, m) : od_cx_scope_return1(&sc, s, v);
}

/* aminmax: amin and amax over the same dims (ATen's kernel propagates NaN as
 * they do), after aminmax's own checks; CPU 1.13 has no float16 kernel. */
OD_CX_KERNEL(od_cea_aminmax)
{
    (void)ctx;
    (void)ks;
    od_tensor *self;
    bool has_dim = false, keepdim;
    int64_t dim = 0;
    int w = 0;
    od_status st;
    if ((st = od_cx_arg_tensor(op, s, 0, &self, err)) || (st = od_cx_arg_opt_int(op, s, 1, &has_dim, &dim, err)) ||
        (st = od_cx_arg_bool(op, s, 2, &keepdim, err)))
        return st;
    if (has_dim) {
        if ((st = od_wrap_dim(dim, self->ndim, &w, err)))
            return st;
        if (self->ndim > 0 && self->sizes[w] == 0)
            return od_error_set(err, OD_EINVAL, "aminmax: Expected reduction dim %d to have non-zero size.", w);
    } else if (od_tensor_numel(self) == 0) {
        return od_error_set(err, OD_EINVAL,
                            "aminmax(): cannot compute aminmax over an empty dimension as the operation has "
                            "no identity.");
    }
    if (self->dtype == OD_FLOAT16 && self->device.type == OD_DEV_CPU)
        return od_error_set(err, OD_EUNSUPPORTED, "\"aminmax_cpu\" not implemented for 'Half'");
    od_cx_scope sc = od_cx_scope_begin(err);
    od_value dims = has_dim ? dims1(&dim) : no_dims();
    od_tensor *mn = od_cx_call(&sc, OD_OPID_amin, 3, T(self), dims, od_bool(keepdim));
    od_tensor *mx = od_cx_call(&sc, OD_OPID_amax, 3, T(self), dims, od_bool(keepdim));
    if (has_dim && keepdim && self->ndim == 0) { /* torch 1.13 resizes these outputs to [1] */
        static const int64_t one[1] = {1};
        od_value shape = od_list_v(OD_T_INT_LIST, (void *)one, 1);
        mn = od_cx_call(&sc, OD_OPID_view, 2, T(mn), shape);
        mx = od_cx_call(&sc, OD_OPID_view, 2, T(mx), shape);
    }
    return scope_return2(&sc, s, mn, mx);
}

/* nanmean (CompositeImplicit in ATen): nansum / the count of non-NaN */
OD_CX_KERNEL(od_cia_nanmean)
{
    (void)ctx;
    (void)ks;
    od_tensor *self;
    od_status st;
    if ((st = od_cx_arg_tensor(op, s, 0, &self, err)))
        return st;
    if (!od_dtype_is_floating(self->dtype))
        return od_error_set(err, OD_EINVAL, "nanmean(): expected input to have floating point dtype but got %s",
                            od_dtype_scalar_name(self->dtype));
    od_cx_scope sc = od_cx_scope_begin(err);
    od_tensor *keep = od_cx_call(&sc, OD_OPID_logical_not, 1, T(od_cx_call(&sc, OD_OPID_isnan, 1, T(self))));
    od_tensor *factor = od_cx_call(&sc, OD_OPID_sum_dim_IntList, 4, T(keep), s->args[1], s->args[2], od_none());
    od_tensor *sum = od_cx_call(&sc, OD_OPID_nansum, 4, T(self), s->args[1], s->args[2], s->args[3]);
    return od_cx_scope_return1(&sc, s, od_cx_call(&sc, OD_OPID_div_Tensor, 2, T(sum), T(factor)));
}

/* norm.* and linalg_vector_norm: ATen's norm reduction over dims (None or []:
 * all), in float for float16/bfloat16 (its opmath) and rounded once: p = 0
 * counts non-zeros, +-inf is amax/amin of |x|, 1 sums |x|, 2 is
 * sqrt(sum(x*x)), others sum(|x|^p)^(1/p); an empty input gives zeros where
 * linalg_vector_norm does not refuse it. dtype converts self first. */
OD_CX_KERNEL(od_cea_norm)
{
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    bool lvn = id == OD_OPID_linalg_vector_norm;
    bool has_dims = id == OD_OPID_norm_ScalarOpt_dim || id == OD_OPID_norm_ScalarOpt_dim_dtype || lvn;
    int dt_arg = lvn ? 4 : id == OD_OPID_norm_ScalarOpt_dtype ? 2 : id == OD_OPID_norm_ScalarOpt_dim_dtype ? 4 : -1;
    od_tensor *self;
    od_status st;
    if ((st = od_cx_arg_tensor(op, s, 0, &self, err)))
        return st;
    const od_value *pv = &s->args[1];
    if (pv->tag != OD_T_NONE && !od_value_is_number(pv))
        return od_error_set(err, OD_EINVAL, "%s(): argument 'p' must be a Number", od_op_name(op));
    double p = pv->tag == OD_T_NONE ? 2.0 : od_value_as_double(pv);
    bool has_dt = false, keepdim = false;
    od_dtype dt = self->dtype;
    if (dt_arg >= 0 && (st = od_cx_arg_opt_dtype(op, s, dt_arg, &has_dt, &dt, err)))
        return st;
    if (has_dims && (st = od_cx_arg_bool(op, s, 3, &keepdim, err)))
        return st;
    od_value dims = has_dims ? s->args[2] : no_dims();
    if (dims.tag == OD_T_NONE)
        dims = no_dims();
    char ps[64];
    if (pv->tag == OD_T_INT)
        snprintf(ps, sizeof ps, "%" PRId64, pv->u.i);
    else
        snprintf(ps, sizeof ps, "%g", p);
    if (lvn) {
        if (!od_dtype_is_floating(self->dtype))
            return od_error_set(err, OD_EINVAL,
                                "linalg.vector_norm: Expected a floating point or complex tensor as input. Got %s",
                                od_dtype_scalar_name(self->dtype));
        if (has_dt && !od_dtype_is_floating(dt))
            return od_error_set(err, OD_EINVAL, "linalg.vector_norm: dtype should be floating point or complex, but got %s",
                                od_dtype_scalar_name(dt));
        if (has_dt && od_promote_types(self->dtype, dt) != dt)
            return od_error_set(err, OD_EINVAL,
                                "linalg.vector_norm: the dtype of the input (%s) should be convertible without "
                                "narrowing to the specified dtype (%s)",
                                od_dtype_scalar_name(self->dtype), od_dtype_scalar_name(dt));
    } else {
        /* the dtype overloads convert any input to dtype first */
        if (dt_arg < 0 && !od_dtype_is_floating(self->dtype))
            return od_error_set(err, OD_EINVAL,
                                "norm(): input dtype should be either floating point or complex. Got %s instead.",
                                od_dtype_scalar_name(self->dtype));
        if (has_dt && !od_dtype_is_floating(dt))
            return od_error_set(err, OD_EINVAL,
                                "norm(): the desired output dtype should be either floating point or complex. Got "
                                "%s instead.",
                                od_dtype_scalar_name(dt));
    }
    uint32_t mask = 0;
    if ((st = od_reduce_dims(&dims, self->ndim, true, &mask, err)))
        return st;
    /* ATen 1.13's kernel reads the order as a float: 1e300 is the inf norm,
     * -0.114 is -0.11400000005960464; its empty-input check below reads the
     * double (1e300 is finite there) */
    double p_checked = p;
    if (isfinite(p))
        p = (double)(float)p;
    if (!lvn && pv->tag == OD_T_BOOL && od_tensor_numel(self) > 0) /* the kernel's check: never reached when empty */
        return od_error_set(err, OD_EINVAL, "norm_kernel_tensor_iterator_impl expects norm to be integer or float");
    /* linalg_vector_norm refuses what has no identity; norm's older kernel
     * gives zeros for any empty input */
    if (lvn && od_tensor_numel(self) == 0 && (p_checked < 0 || p_checked == INFINITY)) {
        if (dims.u.list.n == 0)
            return od_error_set(err, OD_EINVAL,
                                "linalg.vector_norm cannot compute the %s norm on an empty tensor because the "
                                "operation does not have an identity",
                                ps);
        for (size_t i = 0; i < dims.u.list.n; i++) {
            int d;
            if ((st = od_wrap_dim(((const int64_t *)dims.u.list.items)[i], self->ndim, &d, err)))
                return st;
            if (self->ndim > 0 && self->sizes[d] == 0)
                return od_error_set(err, OD_EINVAL,
                                    "linalg.vector_norm cannot compute the %s norm on the dimension %" PRId64
                                    "because this dimension is empty and the operation does not have an identity",
                                    ps, ((const int64_t *)dims.u.list.items)[i]);
        }
    }
    od_cx_scope sc = od_cx_scope_begin(err);
    od_tensor *x = self->dtype == dt ? self : od_cx_cast(&sc, self, dt);
    bool half = dt == OD_FLOAT16 || dt == OD_BFLOAT16;
    if (half)
        x = od_cx_cast(&sc, x, OD_FLOAT32);
    od_value kd = od_bool(keepdim);
    od_tensor *r;
    if (od_tensor_numel(self) == 0) {
        r = od_cx_call(&sc, OD_OPID_sum_dim_IntList, 4, T(od_cx_call(&sc, OD_OPID_abs, 1, T(x))), dims, kd, od_none());
    } else if (p == 0) {
        od_tensor *nz = od_cx_cast(&sc, od_cx_call(&sc, OD_OPID_ne_Scalar, 2, T(x), od_int(0)), x ? x->dtype : dt);
        r = od_cx_call(&sc, OD_OPID_sum_dim_IntList, 4, T(nz), dims, kd, od_none());
    } else if (isinf(p)) {
        r = od_cx_call(&sc, p > 0 ? OD_OPID_amax : OD_OPID_amin, 3, T(od_cx_call(&sc, OD_OPID_abs, 1, T(x))), dims, kd);
    } else if (p == 1) {
        r = od_cx_call(&sc, OD_OPID_sum_dim_IntList, 4, T(od_cx_call(&sc, OD_OPID_abs, 1, T(x))), dims, kd, od_none());
    } else if (p == 2) {
        od_tensor *sq = od_cx_call(&sc, OD_OPID_mul_Tensor, 2, T(x), T(x));
        r = od_cx_call(&sc, OD_OPID_sqrt, 1, T(od_cx_call(&sc, OD_OPID_sum_dim_IntList, 4, T(sq), dims, kd, od_none())));
    } else {
        od_tensor *pw = od_cx_call(&sc, OD_OPID_pow_Tensor_Scalar, 2, T(od_cx_call(&sc, OD_OPID_abs, 1, T(x))), od_double(p));
        r = od_cx_call(&sc, OD_OPID_pow_Tensor_Scalar, 2,
                       T(od_cx_call(&sc, OD_OPID_sum_dim_IntList, 4, T(pw), dims, kd, od_none())), od_double(1.0 / p));
    }
    if (half)
        r = od_cx_cast(&sc, r, dt);
    return od_cx_scope_return1(&sc, s, r);
}
