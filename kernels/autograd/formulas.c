/* formulas.c — the backward formula of every differentiable built-in, named
 * od_bw_<grad_fn name> after ops.def's ag column, and the helpers they are
 * written in.
 *
 * Invariants: formulas are PyTorch 1.13's derivatives.yaml, written with
 * operator calls through the dispatcher, so one formula serves CPU and CUDA.
 * A formula writes gin[k] only where need[k]; the engine reduces broadcast
 * gradients (sum_to_size) and converts dtype and device afterwards, so a
 * formula computes in the gradient's own shape. Every tensor a formula makes
 * lives in the scope and is released by the engine.
 */
#include <math.h>
#include <stdarg.h>
#include <string.h>

#include "autograd.h"
#include "od_shape.h"

/* ---- helpers ------------------------------------------------------------------- */

static bool failed(ag_scope *sc) { return sc->st != OD_OK; }

static od_tensor *fail(ag_scope *sc, od_status st)
{
    sc->st = st;
    return NULL;
}

od_tensor *ag_tmp(ag_scope *sc, od_tensor *t)
{
    if (!t || failed(sc))
        return NULL;
    if (sc->n == AG_SCOPE_MAX)
        return fail(sc, od_error_set(sc->err, OD_EINTERNAL, "a backward formula made too many tensors"));
    od_tensor_retain(t);
    sc->tmp[sc->n++] = t;
    return t;
}

od_tensor *ag_give(ag_scope *sc, od_tensor *t)
{
    if (!t || failed(sc))
        return NULL;
    od_tensor_retain(t);
    return t;
}

static od_tensor *keep_new(ag_scope *sc, od_tensor *t)
{
    /* t is a new reference: the scope takes it over */
    if (sc->n == AG_SCOPE_MAX) {
        od_tensor_release(t);
        return fail(sc, od_error_set(sc->err, OD_EINTERNAL, "a backward formula made too many tensors"));
    }
    sc->tmp[sc->n++] = t;
    return t;
}

od_tensor *ag_call(ag_scope *sc, od_opid id, int nargs, ...)
{
    if (failed(sc))
        return NULL;
    od_value a[OD_MAX_ARGS];
    va_list ap;
    va_start(ap, nargs);
    for (int i = 0; i < nargs; i++) {
        a[i] = va_arg(ap, od_value);
        if (a[i].tag == OD_T_TENSOR && !a[i].u.t) { /* an input that failed earlier */
            va_end(ap);
            return fail(sc, sc->st ? sc->st : od_error_set(sc->err, OD_EINTERNAL, "missing tensor"));
        }
    }
    va_end(ap);
    od_tensor *out = NULL;
    od_status st = od_call_builtin1(id, a, nargs, &out, sc->err);
    return st ? fail(sc, st) : keep_new(sc, out);
}

#define T(x) od_tensor_v(x)

od_tensor *ag_add(ag_scope *sc, od_tensor *a, od_tensor *b) { return ag_call(sc, OD_OPID_add_Tensor, 3, T(a), T(b), od_int(1)); }
od_tensor *ag_sub(ag_scope *sc, od_tensor *a, od_tensor *b) { return ag_call(sc, OD_OPID_sub_Tensor, 3, T(a), T(b), od_int(1)); }
od_tensor *ag_mul(ag_scope *sc, od_tensor *a, od_tensor *b) { return ag_call(sc, OD_OPID_mul_Tensor, 2, T(a), T(b)); }
od_tensor *ag_div(ag_scope *sc, od_tensor *a, od_tensor *b) { return ag_call(sc, OD_OPID_div_Tensor, 2, T(a), T(b)); }
od_tensor *ag_muls(ag_scope *sc, od_tensor *a, double s) { return ag_call(sc, OD_OPID_mul_Scalar, 2, T(a), od_double(s)); }
od_tensor *ag_adds(ag_scope *sc, od_tensor *a, double s) { return ag_call(sc, OD_OPID_add_Scalar, 3, T(a), od_double(s), od_int(1)); }
od_tensor *ag_neg(ag_scope *sc, od_tensor *a) { return ag_call(sc, OD_OPID_neg, 1, T(a)); }
od_tensor *ag_unary(ag_scope *sc, od_opid id, od_tensor *a) { return ag_call(sc, id, 1, T(a)); }
od_tensor *ag_cmp(ag_scope *sc, od_opid id, od_tensor *a, od_tensor *b) { return ag_call(sc, id, 2, T(a), T(b)); }
od_tensor *ag_cmps(ag_scope *sc, od_opid id, od_tensor *a, double s) { return ag_call(sc, id, 2, T(a), od_double(s)); }

od_tensor *ag_where0(ag_scope *sc, od_tensor *cond, od_tensor *a, bool a_when_true)
{
    return a_when_true ? ag_call(sc, OD_OPID_where_ScalarOther, 3, T(cond), T(a), od_int(0))
                       : ag_call(sc, OD_OPID_where_ScalarSelf, 3, T(cond), od_int(0), T(a));
}

od_tensor *ag_sum_dims(ag_scope *sc, od_tensor *a, const int64_t *dims, int n, bool keepdim)
{
    return ag_call(sc, OD_OPID_sum_dim_IntList, 4, T(a), od_list_v(OD_T_INT_LIST, (void *)dims, (size_t)n),
                   od_bool(keepdim), od_none());
}

od_tensor *ag_reshape(ag_scope *sc, od_tensor *a, const int64_t *sizes, int n)
{
    return ag_call(sc, OD_OPID_reshape, 2, T(a), od_list_v(OD_T_INT_LIST, (void *)sizes, (size_t)n));
}

od_tensor *ag_expand(ag_scope *sc, od_tensor *a, const int64_t *sizes, int n)
{
    return ag_call(sc, OD_OPID_expand, 3, T(a), od_list_v(OD_T_INT_LIST, (void *)sizes, (size_t)n),
                   od_bool(false));
}

od_tensor *ag_transpose(ag_scope *sc, od_tensor *a, int64_t d0, int64_t d1)
{
    return ag_call(sc, OD_OPID_transpose_int, 3, T(a), od_int(d0), od_int(d1));
}

od_tensor *ag_mm(ag_scope *sc, od_tensor *a, od_tensor *b) { return ag_call(sc, OD_OPID_mm, 2, T(a), T(b)); }

od_tensor *ag_zeros(ag_scope *sc, const ag_tmeta *m)
{
    return ag_call(sc, OD_OPID_zeros, 5, od_list_v(OD_T_INT_LIST, (void *)m->sizes, (size_t)m->ndim),
                   od_dtype_v(m->dtype), od_none(), od_device_v(m->device), od_none());
}

od_tensor *ag_to(ag_scope *sc, od_tensor *a, od_dtype dt, od_device dev)
{
    return ag_call(sc, OD_OPID__to_copy, 7, T(a), od_dtype_v(dt), od_none(), od_device_v(dev), od_none(),
                   od_bool(false), od_none());
}

const od_value *ag_arg(od_node *n, int i) { return &n->args[i]; }

int ag_in(od_node *n, int i)
{
    for (int k = 0; k < n->nin; k++)
        if (n->in_arg[k] == i)
            return k;
    return -1;
}

static od_tensor *check_saved(ag_scope *sc, od_node *n, od_tensor *t, unsigned version, const char *what,
                              int i)
{
    if (failed(sc))
        return NULL;
    if (n->freed)
        return fail(sc, od_error_set(sc->err, OD_EMISMATCH,
                                     "Trying to backward through the graph a second time (or directly "
                                     "access saved tensors after they have already been freed). Saved "
                                     "intermediate values of the graph are freed when you call "
                                     ".backward() or autograd.grad(). Specify retain_graph=True if you "
                                     "need to backward through the graph a second time or if you need "
                                     "to access saved tensors after calling backward."));
    if (!t)
        return fail(sc, od_error_set(sc->err, OD_EINTERNAL, "%s: %s %d was not saved", n->name, what, i));
    unsigned now = od_tensor_version(t);
    if (now != version) {
        char shape[128];
        od_shape_print(t->sizes, t->ndim, shape, sizeof shape);
        return fail(sc, od_error_set(sc->err, OD_EMISMATCH,
                                     "one of the variables needed for gradient computation has been "
                                     "modified by an inplace operation: [%s %s], which is %s %d of "
                                     "%s, is at version %u; expected version %u instead.",
                                     od_dtype_name(t->dtype), shape, what, i, n->name, now, version));
    }
    return t;
}

od_tensor *ag_saved(ag_scope *sc, od_node *n, int i)
{
    const od_value *v = &n->args[i];
    return check_saved(sc, n, v->tag == OD_T_TENSOR ? v->u.t : NULL, n->arg_version[i], "argument", i);
}

od_tensor *ag_saved_out(ag_scope *sc, od_node *n, int i)
{
    return check_saved(sc, n, n->outs[i], n->out_version[i], "output", i);
}

static double num(const od_value *v) { return od_value_is_number(v) ? od_value_as_double(v) : 0.0; }

/* Sorted, wrapped dims of a dim list argument (None or [] = every dim). */
static int dims_of(const od_value *v, int ndim, int64_t *dims)
{
    bool seen[OD_MAX_DIMS] = {false};
    int n = 0;
    if (v->tag == OD_T_INT_LIST && v->u.list.n > 0) {
        const int64_t *d = v->u.list.items;
        for (size_t i = 0; i < v->u.list.n; i++) {
            int64_t w = d[i] < 0 ? d[i] + (ndim ? ndim : 1) : d[i];
            if (w >= 0 && w < OD_MAX_DIMS)
                seen[w] = true;
        }
    } else if (v->tag == OD_T_INT) {
        int64_t w = v->u.i < 0 ? v->u.i + (ndim ? ndim : 1) : v->u.i;
        if (w >= 0 && w < OD_MAX_DIMS)
            seen[w] = true;
    } else {
        for (int i = 0; i < ndim; i++)
            seen[i] = true;
    }
    for (int i = 0; i < (ndim ? ndim : 1) && i < OD_MAX_DIMS; i++)
        if (seen[i] && i < ndim)
            dims[n++] = i;
    return n;
}

/* g of a reduction over dims back to the input's rank: unsqueezed where
 * keepdim dropped them. */
static od_tensor *restore_dims(ag_scope *sc, od_tensor *g, const ag_tmeta *in, const int64_t *dims, int nd,
                               bool keepdim)
{
    if (keepdim || !g)
        return g;
    int64_t sizes[OD_MAX_DIMS];
    memcpy(sizes, in->sizes, (size_t)in->ndim * sizeof sizes[0]);
    for (int i = 0; i < nd; i++)
        sizes[dims[i]] = 1;
    return ag_reshape(sc, g, sizes, in->ndim);
}

static int64_t count_over(const ag_tmeta *m, const int64_t *dims, int nd)
{
    int64_t c = 1;
    for (int i = 0; i < nd; i++)
        c *= m->sizes[dims[i]];
    return c;
}

#define AG_UNUSED __attribute__((unused))
#define OD_BW(name)                                                                          \
    static void od_bw_##name(od_node *n AG_UNUSED, od_tensor *const *g AG_UNUSED,           \
                             od_tensor **gin AG_UNUSED, const bool *need AG_UNUSED, ag_scope *sc AG_UNUSED)
#define SET(k, expr)                      \
    do {                                  \
        int k_ = (k);                     \
        if (k_ >= 0 && need[k_])          \
            gin[k_] = ag_give(sc, (expr)); \
    } while (0)

/* ---- arithmetic ---------------------------------------------------------------- */

OD_BW(AddBackward0)
{
    double alpha = num(ag_arg(n, 2));
    SET(0, g[0]);
    SET(1, alpha == 1 ? g[0] : ag_muls(sc, g[0], alpha));
}
OD_BW(AddBackward1) { SET(0, g[0]); }
OD_BW(SubBackward0)
{
    SET(0, g[0]);
    SET(1, ag_muls(sc, g[0], -num(ag_arg(n, 2))));
}
OD_BW(SubBackward1) { SET(0, g[0]); }
OD_BW(RsubBackward0) /* other - alpha * self */
{
    SET(0, ag_muls(sc, g[0], -num(ag_arg(n, 2))));
    SET(1, g[0]);
}
OD_BW(MulBackward0)
{
    if (need[0])
        SET(0, ag_mul(sc, g[0], ag_saved(sc, n, 1)));
    if (need[1])
        SET(1, ag_mul(sc, g[0], ag_saved(sc, n, 0)));
}
OD_BW(MulBackward1) { SET(0, ag_muls(sc, g[0], num(ag_arg(n, 1)))); }
OD_BW(DivBackward0)
{
    od_tensor *other = ag_saved(sc, n, 1);
    if (need[0])
        SET(0, ag_div(sc, g[0], other));
    if (need[1])
        SET(1, ag_neg(sc, ag_div(sc, ag_mul(sc, g[0], ag_saved(sc, n, 0)), ag_mul(sc, other, other))));
}
OD_BW(DivBackward1) { SET(0, ag_muls(sc, g[0], 1.0 / num(ag_arg(n, 1)))); }
OD_BW(DivBackward2)
{
    if (ag_arg(n, 2)->tag == OD_T_STRING) { /* a rounding mode: a step function */
        SET(0, ag_muls(sc, g[0], 0));
        SET(1, ag_muls(sc, g[0], 0));
        return;
    }
    od_bw_DivBackward0(n, g, gin, need, sc);
}
OD_BW(DivBackward3)
{
    if (ag_arg(n, 2)->tag == OD_T_STRING)
        SET(0, ag_muls(sc, g[0], 0));
    else
        SET(0, ag_muls(sc, g[0], 1.0 / num(ag_arg(n, 1))));
}

/* grad * e * x^(e-1), and 0 where e == 0 */
static od_tensor *pow_self(ag_scope *sc, od_tensor *gr, od_tensor *x, od_tensor *e_t, double e)
{
    if (!e_t) {
        if (e == 0)
            return ag_muls(sc, gr, 0);
        od_tensor *p = ag_call(sc, OD_OPID_pow_Tensor_Scalar, 2, T(x), od_double(e - 1));
        return ag_muls(sc, ag_mul(sc, gr, p), e);
    }
    od_tensor *p = ag_call(sc, OD_OPID_pow_Tensor_Tensor, 2, T(x), T(ag_adds(sc, e_t, -1)));
    od_tensor *v = ag_mul(sc, ag_mul(sc, gr, e_t), p);
    return ag_where0(sc, ag_cmps(sc, OD_OPID_eq_Scalar, e_t, 0), v, false);
}
OD_BW(PowBackward0)
{
    SET(0, pow_self(sc, g[0], ag_saved(sc, n, 0), NULL, num(ag_arg(n, 1))));
}
OD_BW(PowBackward1)
{
    od_tensor *x = ag_saved(sc, n, 0), *e = ag_saved(sc, n, 1);
    if (need[0])
        SET(0, pow_self(sc, g[0], x, e, 0));
    if (need[1]) {
        /* grad * where(x == 0 & e >= 0, 0, result * log(x)) */
        od_tensor *rl = ag_mul(sc, ag_saved_out(sc, n, 0), ag_unary(sc, OD_OPID_log, x));
        od_tensor *mask = ag_call(sc, OD_OPID_logical_and, 2, T(ag_cmps(sc, OD_OPID_eq_Scalar, x, 0)),
                                  T(ag_cmps(sc, OD_OPID_ge_Scalar, e, 0)));
        SET(1, ag_mul(sc, g[0], ag_where0(sc, mask, rl, false)));
    }
}
OD_BW(PowBackward2)
{
    double base = num(ag_arg(n, 0));
    od_tensor *r = ag_muls(sc, ag_saved_out(sc, n, 0), log(base));
    if (base == 0)
        r = ag_where0(sc, ag_cmps(sc, OD_OPID_ge_Scalar, ag_saved(sc, n, 1), 0), r, false);
    SET(ag_in(n, 1), ag_mul(sc, g[0], r));
}

static void max_min(od_node *n, od_tensor *const *g, od_tensor **gin, const bool *need, ag_scope *sc, bool max)
{
    od_tensor *a = ag_saved(sc, n, 0), *b = ag_saved(sc, n, 1);
    od_tensor *half = ag_call(sc, OD_OPID_where_self, 3, T(ag_cmp(sc, OD_OPID_eq_Tensor, a, b)),
                              T(ag_muls(sc, g[0], 0.5)), T(g[0]));
    od_tensor *a_loses = ag_cmp(sc, max ? OD_OPID_lt_Tensor : OD_OPID_gt_Tensor, a, b);
    od_tensor *b_loses = ag_cmp(sc, max ? OD_OPID_gt_Tensor : OD_OPID_lt_Tensor, a, b);
    if (need[0])
        SET(0, ag_where0(sc, a_loses, half, false));
    if (need[1])
        SET(1, ag_where0(sc, b_loses, half, false));
}
OD_BW(MaximumBackward0) { max_min(n, g, gin, need, sc, true); }
OD_BW(MinimumBackward0) { max_min(n, g, gin, need, sc, false); }
/* fmax/fmin: self takes the gradient where it won or other is NaN */
static void fmax_fmin(od_node *n, od_tensor *const *g, od_tensor **gin, const bool *need, ag_scope *sc, bool max)
{
    od_tensor *a = ag_saved(sc, n, 0), *b = ag_saved(sc, n, 1);
    od_tensor *self_wins = ag_call(sc, OD_OPID_logical_or, 2,
                                   T(ag_cmp(sc, max ? OD_OPID_ge_Tensor : OD_OPID_le_Tensor, a, b)),
                                   T(ag_unary(sc, OD_OPID_isnan, b)));
    if (need[0])
        SET(0, ag_where0(sc, self_wins, g[0], true));
    if (need[1])
        SET(1, ag_where0(sc, self_wins, g[0], false));
}
OD_BW(FmaxBackward0) { fmax_fmin(n, g, gin, need, sc, true); }
OD_BW(FminBackward0) { fmax_fmin(n, g, gin, need, sc, false); }

static void mod_other(od_node *n, od_tensor *const *g, od_tensor **gin, const bool *need, ag_scope *sc,
                      const char *mode)
{
    SET(0, g[0]);
    if (need[1]) {
        od_tensor *q = ag_call(sc, OD_OPID_div_Tensor_mode, 3, T(ag_saved(sc, n, 0)), T(ag_saved(sc, n, 1)),
                               od_str(mode));
        SET(1, ag_neg(sc, ag_mul(sc, g[0], q)));
    }
}
OD_BW(FmodBackward0) { SET(0, g[0]); }
OD_BW(FmodBackward1) { mod_other(n, g, gin, need, sc, "trunc"); }
OD_BW(RemainderBackward0) { SET(0, g[0]); }
OD_BW(RemainderBackward1) { mod_other(n, g, gin, need, sc, "floor"); }

OD_BW(WhereBackward0)
{
    od_tensor *cond = ag_saved(sc, n, 0);
    int ks = ag_in(n, 1), ko = ag_in(n, 2);
    if (ks >= 0 && need[ks])
        SET(ks, ag_where0(sc, cond, g[0], true));
    if (ko >= 0 && need[ko])
        SET(ko, ag_where0(sc, cond, g[0], false));
}

/* ---- unary --------------------------------------------------------------------- */

OD_BW(NegBackward0) { SET(0, ag_neg(sc, g[0])); }
OD_BW(AbsBackward0) { SET(0, ag_mul(sc, g[0], ag_unary(sc, OD_OPID_sign, ag_saved(sc, n, 0)))); }
OD_BW(ExpBackward0) { SET(0, ag_mul(sc, g[0], ag_saved_out(sc, n, 0))); }
OD_BW(LogBackward0) { SET(0, ag_div(sc, g[0], ag_saved(sc, n, 0))); }
OD_BW(SqrtBackward0) { SET(0, ag_div(sc, g[0], ag_muls(sc, ag_saved_out(sc, n, 0), 2))); }
OD_BW(RsqrtBackward0)
{
    od_tensor *r = ag_saved_out(sc, n, 0);
    SET(0, ag_muls(sc, ag_mul(sc, g[0], ag_mul(sc, r, ag_mul(sc, r, r))), -0.5));
}
OD_BW(SinBackward0) { SET(0, ag_mul(sc, g[0], ag_unary(sc, OD_OPID_cos, ag_saved(sc, n, 0)))); }
OD_BW(CosBackward0) { SET(0, ag_neg(sc, ag_mul(sc, g[0], ag_unary(sc, OD_OPID_sin, ag_saved(sc, n, 0))))); }
OD_BW(TanhBackward0)
{
    od_tensor *y = ag_saved_out(sc, n, 0);
    SET(0, ag_mul(sc, g[0], ag_adds(sc, ag_neg(sc, ag_mul(sc, y, y)), 1)));
}
OD_BW(SigmoidBackward0)
{
    od_tensor *y = ag_saved_out(sc, n, 0);
    SET(0, ag_mul(sc, g[0], ag_mul(sc, y, ag_adds(sc, ag_neg(sc, y), 1))));
}
OD_BW(ReluBackward0)
{
    SET(0, ag_where0(sc, ag_cmps(sc, OD_OPID_gt_Scalar, ag_saved_out(sc, n, 0), 0), g[0], true));
}
OD_BW(GeluBackward0)
{
    od_tensor *x = ag_saved(sc, n, 0);
    const od_value *ap = ag_arg(n, 1);
    bool tanh_approx = ap->tag == OD_T_STRING && !strcmp(ap->u.s, "tanh");
    if (!tanh_approx) {
        /* cdf(x) + x * pdf(x) */
        od_tensor *cdf = ag_muls(sc, ag_adds(sc, ag_unary(sc, OD_OPID_erf, ag_muls(sc, x, M_SQRT1_2)), 1), 0.5);
        od_tensor *pdf = ag_muls(sc, ag_unary(sc, OD_OPID_exp, ag_muls(sc, ag_mul(sc, x, x), -0.5)),
                                 0.5 * M_2_SQRTPI * M_SQRT1_2);
        SET(0, ag_mul(sc, g[0], ag_add(sc, cdf, ag_mul(sc, x, pdf))));
        return;
    }
    const double k = M_SQRT2 * M_2_SQRTPI * 0.5, c = 0.044715;
    od_tensor *x2 = ag_mul(sc, x, x);
    od_tensor *inner = ag_muls(sc, ag_add(sc, x, ag_muls(sc, ag_mul(sc, x2, x), c)), k);
    od_tensor *t = ag_unary(sc, OD_OPID_tanh, inner);
    od_tensor *left_d = ag_muls(sc, ag_adds(sc, t, 1), 0.5);
    od_tensor *tanh_d = ag_adds(sc, ag_neg(sc, ag_mul(sc, t, t)), 1);
    od_tensor *inner_d = ag_muls(sc, ag_adds(sc, ag_muls(sc, x2, 3 * c), 1), k);
    od_tensor *right_d = ag_mul(sc, ag_muls(sc, x, 0.5), ag_mul(sc, tanh_d, inner_d));
    SET(0, ag_mul(sc, g[0], ag_add(sc, left_d, right_d)));
}
OD_BW(SiluBackward0)
{
    od_tensor *x = ag_saved(sc, n, 0);
    od_tensor *s = ag_unary(sc, OD_OPID_sigmoid, x);
    od_tensor *inner = ag_adds(sc, ag_mul(sc, x, ag_adds(sc, ag_neg(sc, s), 1)), 1);
    SET(0, ag_mul(sc, g[0], ag_mul(sc, s, inner)));
}
OD_BW(Log1PBackward0) { SET(0, ag_div(sc, g[0], ag_adds(sc, ag_saved(sc, n, 0), 1))); }
OD_BW(Expm1Backward0) { SET(0, ag_mul(sc, g[0], ag_adds(sc, ag_saved_out(sc, n, 0), 1))); }
OD_BW(ErfBackward0)
{
    od_tensor *x = ag_saved(sc, n, 0);
    od_tensor *e = ag_unary(sc, OD_OPID_exp, ag_neg(sc, ag_mul(sc, x, x)));
    SET(0, ag_mul(sc, g[0], ag_muls(sc, e, M_2_SQRTPI)));
}
/* step functions: zero almost everywhere */
OD_BW(FloorBackward0) { SET(0, ag_muls(sc, g[0], 0)); }
OD_BW(CeilBackward0) { SET(0, ag_muls(sc, g[0], 0)); }
OD_BW(RoundBackward0) { SET(0, ag_muls(sc, g[0], 0)); }
OD_BW(RoundBackward1) { SET(0, ag_muls(sc, g[0], 0)); }
OD_BW(TruncBackward0) { SET(0, ag_muls(sc, g[0], 0)); }
OD_BW(SignBackward0) { SET(0, ag_muls(sc, g[0], 0)); }
OD_BW(SgnBackward0) { SET(0, ag_muls(sc, g[0], 0)); }

/* ---- issue 19's unary math, from derivatives.yaml ---- */
/* g / sqrt(k + s * x^2), the shape of the inverse trig and hyperbolic rules */
static od_tensor *over_sqrt(ag_scope *sc, od_tensor *g, od_tensor *x, double s, double k)
{
    return ag_div(sc, g, ag_unary(sc, OD_OPID_sqrt, ag_adds(sc, ag_muls(sc, ag_mul(sc, x, x), s), k)));
}
OD_BW(AcosBackward0) { SET(0, ag_neg(sc, over_sqrt(sc, g[0], ag_saved(sc, n, 0), -1, 1))); }
OD_BW(AsinBackward0) { SET(0, over_sqrt(sc, g[0], ag_saved(sc, n, 0), -1, 1)); }
OD_BW(AcoshBackward0) { SET(0, over_sqrt(sc, g[0], ag_saved(sc, n, 0), 1, -1)); }
OD_BW(AsinhBackward0) { SET(0, over_sqrt(sc, g[0], ag_saved(sc, n, 0), 1, 1)); }
OD_BW(AtanBackward0)
{
    od_tensor *x = ag_saved(sc, n, 0);
    SET(0, ag_div(sc, g[0], ag_adds(sc, ag_mul(sc, x, x), 1)));
}
OD_BW(AtanhBackward0)
{
    od_tensor *x = ag_saved(sc, n, 0);
    SET(0, ag_div(sc, g[0], ag_adds(sc, ag_neg(sc, ag_mul(sc, x, x)), 1)));
}
OD_BW(SinhBackward0) { SET(0, ag_mul(sc, g[0], ag_unary(sc, OD_OPID_cosh, ag_saved(sc, n, 0)))); }
OD_BW(CoshBackward0) { SET(0, ag_mul(sc, g[0], ag_unary(sc, OD_OPID_sinh, ag_saved(sc, n, 0)))); }
OD_BW(TanBackward0)
{
    od_tensor *y = ag_saved_out(sc, n, 0);
    SET(0, ag_mul(sc, g[0], ag_adds(sc, ag_mul(sc, y, y), 1)));
}
OD_BW(Exp2Backward0) { SET(0, ag_muls(sc, ag_mul(sc, g[0], ag_saved_out(sc, n, 0)), M_LN2)); }
OD_BW(Log2Backward0) { SET(0, ag_div(sc, g[0], ag_muls(sc, ag_saved(sc, n, 0), M_LN2))); }
OD_BW(Log10Backward0) { SET(0, ag_div(sc, g[0], ag_muls(sc, ag_saved(sc, n, 0), M_LN10))); }
OD_BW(ErfcBackward0)
{
    od_tensor *x = ag_saved(sc, n, 0);
    od_tensor *e = ag_unary(sc, OD_OPID_exp, ag_neg(sc, ag_mul(sc, x, x)));
    SET(0, ag_muls(sc, ag_mul(sc, g[0], e), -M_2_SQRTPI));
}
OD_BW(ReciprocalBackward0)
{
    od_tensor *y = ag_saved_out(sc, n, 0);
    SET(0, ag_neg(sc, ag_mul(sc, g[0], ag_mul(sc, y, y))));
}
OD_BW(LgammaBackward0) { SET(0, ag_mul(sc, g[0], ag_unary(sc, OD_OPID_digamma, ag_saved(sc, n, 0)))); }
/* ATen's sinc_backward: (pi x cos(pi x) - sin(pi x)) / (pi x^2), 0 at x = 0 */
OD_BW(SincBackward0)
{
    od_tensor *x = ag_saved(sc, n, 0);
    od_tensor *px = ag_muls(sc, x, M_PI), *sq = ag_muls(sc, ag_mul(sc, x, x), M_PI);
    od_tensor *num = ag_sub(sc, ag_mul(sc, px, ag_unary(sc, OD_OPID_cos, px)), ag_unary(sc, OD_OPID_sin, px));
    od_tensor *out = ag_div(sc, ag_mul(sc, g[0], num), sq);
    SET(0, ag_where0(sc, ag_cmps(sc, OD_OPID_eq_Scalar, sq, 0), out, false));
}
OD_BW(Deg2RadBackward0) { SET(0, ag_muls(sc, g[0], M_PI / 180.0)); }
OD_BW(Rad2DegBackward0) { SET(0, ag_muls(sc, g[0], 180.0 / M_PI)); }
OD_BW(FracBackward0) { SET(0, g[0]); }
/* hardsigmoid: g / 6 on (-3, 3), else 0 */
OD_BW(HardsigmoidBackward0)
{
    od_tensor *x = ag_saved(sc, n, 0);
    od_tensor *in = ag_mul(sc, ag_cmps(sc, OD_OPID_gt_Scalar, x, -3), ag_cmps(sc, OD_OPID_lt_Scalar, x, 3));
    SET(0, ag_where0(sc, in, ag_muls(sc, g[0], 1.0 / 6.0), true));
}
/* hardswish: 0 below -3, g * (x / 3 + 0.5) up to 3, g above (ATen's branches) */
OD_BW(HardswishBackward0)
{
    od_tensor *x = ag_saved(sc, n, 0);
    od_tensor *mid = ag_mul(sc, g[0], ag_adds(sc, ag_muls(sc, x, 1.0 / 3.0), 0.5));
    od_tensor *up = ag_cmps(sc, OD_OPID_le_Scalar, x, 3);
    od_tensor *lo = ag_cmps(sc, OD_OPID_lt_Scalar, x, -3);
    od_tensor *v = ag_call(sc, OD_OPID_where_self, 3, T(up), T(mid), T(g[0]));
    SET(0, ag_where0(sc, lo, v, false));
}
/* mish: tanh(sp) + x * sigmoid(x) * (1 - tanh(sp)^2), sp = softplus(x) */
OD_BW(MishBackward0)
{
    od_tensor *x = ag_saved(sc, n, 0);
    od_tensor *t = ag_unary(sc, OD_OPID_tanh, ag_unary(sc, OD_OPID_log1p, ag_unary(sc, OD_OPID_exp, x)));
    od_tensor *d = ag_mul(sc, ag_mul(sc, x, ag_unary(sc, OD_OPID_sigmoid, x)), ag_adds(sc, ag_neg(sc, ag_mul(sc, t, t)), 1));
    SET(0, ag_mul(sc, g[0], ag_add(sc, t, d)));
}

/* ---- parameterised activations (derivatives.yaml's *_backward, as ATen's
 * CPU kernels compute them) ---- */
static od_tensor *and_mask(ag_scope *sc, od_tensor *a, od_tensor *b)
{
    return ag_call(sc, OD_OPID_logical_and, 2, T(a), T(b));
}
/* g where lo < x < hi, else 0 (hardtanh_backward) */
OD_BW(HardtanhBackward0)
{
    od_tensor *x = ag_saved(sc, n, 0);
    od_tensor *in = and_mask(sc, ag_cmps(sc, OD_OPID_gt_Scalar, x, num(ag_arg(n, 1))),
                             ag_cmps(sc, OD_OPID_lt_Scalar, x, num(ag_arg(n, 2))));
    SET(0, ag_where0(sc, in, g[0], true));
}
/* elu_backward(is_result=false): g * scale above 0, else
 * g * input_scale * alpha * scale * exp(x * input_scale) */
static void elu_grad(ag_scope *sc, od_node *n, od_tensor *const *g, od_tensor **gin, const bool *need, double alpha,
                     double scale, double input_scale)
{
    od_tensor *x = ag_saved(sc, n, 0);
    od_tensor *neg = ag_mul(sc, g[0], ag_muls(sc, ag_unary(sc, OD_OPID_exp, ag_muls(sc, x, input_scale)),
                                              input_scale * alpha * scale));
    od_tensor *pos = ag_muls(sc, g[0], scale);
    SET(0, ag_call(sc, OD_OPID_where_self, 3, T(ag_cmps(sc, OD_OPID_le_Scalar, x, 0)), T(neg), T(pos)));
}
OD_BW(EluBackward0)
{
    elu_grad(sc, n, g, gin, need, num(ag_arg(n, 1)), num(ag_arg(n, 2)), num(ag_arg(n, 3)));
}
/* celu: elu_backward(alpha, 1, 1 / alpha) */
OD_BW(CeluBackward0)
{
    double alpha = num(ag_arg(n, 1));
    elu_grad(sc, n, g, gin, need, alpha, 1.0, 1.0 / (double)(float)alpha);
}
OD_BW(LeakyReluBackward0)
{
    od_tensor *x = ag_saved(sc, n, 0);
    od_tensor *neg = ag_muls(sc, g[0], num(ag_arg(n, 1)));
    SET(0, ag_call(sc, OD_OPID_where_self, 3, T(ag_cmps(sc, OD_OPID_gt_Scalar, x, 0)), T(g[0]), T(neg)));
}
/* g past the threshold (x * beta > threshold), else g * z / (z + 1), z = exp(x * beta) */
OD_BW(SoftplusBackward0)
{
    od_tensor *x = ag_saved(sc, n, 0);
    double beta = num(ag_arg(n, 1)), th = num(ag_arg(n, 2));
    od_tensor *xb = ag_muls(sc, x, beta);
    od_tensor *z = ag_unary(sc, OD_OPID_exp, xb);
    od_tensor *soft = ag_div(sc, ag_mul(sc, g[0], z), ag_adds(sc, z, 1));
    SET(0, ag_call(sc, OD_OPID_where_self, 3, T(ag_cmps(sc, OD_OPID_gt_Scalar, xb, th)), T(g[0]), T(soft)));
}
/* shrink_backward: 0 where -lambd <= x <= lambd, else g (soft and hard alike) */
static void shrink_grad(ag_scope *sc, od_node *n, od_tensor *const *g, od_tensor **gin, const bool *need)
{
    od_tensor *x = ag_saved(sc, n, 0);
    double l = num(ag_arg(n, 1));
    od_tensor *in = and_mask(sc, ag_cmps(sc, OD_OPID_ge_Scalar, x, -l), ag_cmps(sc, OD_OPID_le_Scalar, x, l));
    SET(0, ag_where0(sc, in, g[0], false));
}
OD_BW(SoftshrinkBackward0) { shrink_grad(sc, n, g, gin, need); }
OD_BW(HardshrinkBackward0) { shrink_grad(sc, n, g, gin, need); }
OD_BW(ThresholdBackward0)
{
    od_tensor *x = ag_saved(sc, n, 0);
    SET(0, ag_where0(sc, ag_cmps(sc, OD_OPID_le_Scalar, x, num(ag_arg(n, 1))), g[0], false));
}
/* log_sigmoid_backward: g * sigmoid(-x) (the buffer only caches exp(-|x|)) */
OD_BW(LogSigmoidBackward0)
{
    od_tensor *x = ag_saved(sc, n, 0);
    SET(0, ag_mul(sc, g[0], ag_unary(sc, OD_OPID_sigmoid, ag_neg(sc, x))));
}
/* logit_backward: g / (x (1 - x)); outside [0, 1] NaN without eps, outside
 * [eps, 1 - eps] 0 with it */
OD_BW(LogitBackward0)
{
    od_tensor *x = ag_saved(sc, n, 0);
    const od_value *eps = ag_arg(n, 1);
    od_tensor *d = ag_div(sc, g[0], ag_mul(sc, x, ag_adds(sc, ag_neg(sc, x), 1)));
    bool has = od_value_is_number(eps);
    double lo = has ? num(eps) : 0.0, hi = has ? 1.0 - num(eps) : 1.0;
    od_tensor *out = ag_call(sc, OD_OPID_logical_or, 2, T(ag_cmps(sc, OD_OPID_lt_Scalar, x, lo)),
                             T(ag_cmps(sc, OD_OPID_gt_Scalar, x, hi)));
    SET(0, ag_call(sc, OD_OPID_where_ScalarSelf, 3, T(out), has ? od_int(0) : od_double(NAN), T(d)));
}
OD_BW(NanToNumBackward0)
{
    SET(0, ag_where0(sc, ag_unary(sc, OD_OPID_isfinite, ag_saved(sc, n, 0)), g[0], true));
}
/* sqrt(pi) / 2 * exp(erfinv(x)^2) */
OD_BW(ErfinvBackward0)
{
    od_tensor *y = ag_saved_out(sc, n, 0);
    SET(0, ag_mul(sc, g[0], ag_muls(sc, ag_unary(sc, OD_OPID_exp, ag_mul(sc, y, y)), 0.88622692545275801365)));
}
/* polygamma(n + 1, x); self is argument 1 */
OD_BW(PolygammaBackward0)
{
    od_tensor *x = ag_saved(sc, n, 1);
    const od_value *k = ag_arg(n, 0);
    SET(0, ag_mul(sc, g[0], ag_call(sc, OD_OPID_polygamma, 2, od_int(k->u.i + 1), T(x))));
}

/* ---- issue 19's binary math ---- */
OD_BW(Atan2Backward0)
{
    od_tensor *a = ag_saved(sc, n, 0), *b = ag_saved(sc, n, 1);
    od_tensor *r = ag_div(sc, g[0], ag_add(sc, ag_mul(sc, a, a), ag_mul(sc, b, b)));
    if (need[0])
        SET(0, ag_mul(sc, r, b));
    if (need[1])
        SET(1, ag_neg(sc, ag_mul(sc, r, a)));
}
OD_BW(HypotBackward0)
{
    od_tensor *y = ag_saved_out(sc, n, 0);
    if (need[0])
        SET(0, ag_div(sc, ag_mul(sc, g[0], ag_saved(sc, n, 0)), y));
    if (need[1])
        SET(1, ag_div(sc, ag_mul(sc, g[0], ag_saved(sc, n, 1)), y));
}
/* copysign: d/dself = sign(self) * sign(result) where self != 0, else 0; other gets 0
 * (CopysignBackward1, the Scalar overload: self's part alone) */
OD_BW(CopysignBackward1)
{
    od_tensor *s = ag_mul(sc, ag_unary(sc, OD_OPID_sign, ag_saved(sc, n, 0)),
                          ag_unary(sc, OD_OPID_sign, ag_saved_out(sc, n, 0)));
    SET(0, ag_mul(sc, g[0], s));
}
OD_BW(CopysignBackward0)
{
    od_tensor *a = ag_saved(sc, n, 0), *y = ag_saved_out(sc, n, 0);
    od_tensor *s = ag_mul(sc, ag_unary(sc, OD_OPID_sign, a), ag_unary(sc, OD_OPID_sign, y));
    if (need[0])
        SET(0, ag_mul(sc, g[0], s));
    if (need[1])
        SET(1, ag_muls(sc, g[0], 0));
}
/* logaddexp: g / (1 + exp(other - self)), and the mirror; base 2 the same in exp2 */
static void logaddexp_bw(od_node *n, od_tensor *const *g, od_tensor **gin, const bool *need, ag_scope *sc,
                         od_opid expf_)
{
    od_tensor *a = ag_saved(sc, n, 0), *b = ag_saved(sc, n, 1);
    if (need[0])
        SET(0, ag_div(sc, g[0], ag_adds(sc, ag_unary(sc, expf_, ag_sub(sc, b, a)), 1)));
    if (need[1])
        SET(1, ag_div(sc, g[0], ag_adds(sc, ag_unary(sc, expf_, ag_sub(sc, a, b)), 1)));
}
OD_BW(LogaddexpBackward0) { logaddexp_bw(n, g, gin, need, sc, OD_OPID_exp); }
OD_BW(Logaddexp2Backward0) { logaddexp_bw(n, g, gin, need, sc, OD_OPID_exp2); }
/* xlogy: self gets g * log(other) (0 where self == 0 and other is not NaN,
 * as ATen masks it); other gets g * self / other */
OD_BW(XlogyBackward0)
{
    od_tensor *a = ag_saved(sc, n, 0), *b = ag_saved(sc, n, 1);
    if (need[0]) {
        od_tensor *keep = ag_add(sc, ag_cmps(sc, OD_OPID_ne_Scalar, a, 0), ag_cmp(sc, OD_OPID_ne_Tensor, b, b));
        SET(0, ag_where0(sc, keep, ag_mul(sc, g[0], ag_unary(sc, OD_OPID_log, b)), true));
    }
    if (need[1])
        SET(1, ag_div(sc, ag_mul(sc, g[0], a), b));
}

/* one bound: self where it is inside (NaN self passes, as torch's mask is
 * self >= min), the Tensor bound where self is outside */
static void clamp_bound_bw(od_node *n, od_tensor *const *g, od_tensor **gin, const bool *need, ag_scope *sc,
                           bool lo, bool tensor)
{
    od_tensor *x = ag_saved(sc, n, 0);
    if (!tensor) {
        double b = od_value_as_double(ag_arg(n, 1));
        SET(0, ag_where0(sc, ag_cmps(sc, lo ? OD_OPID_ge_Scalar : OD_OPID_le_Scalar, x, b), g[0], true));
        return;
    }
    od_tensor *b = ag_saved(sc, n, 1);
    if (need[0])
        SET(0, ag_where0(sc, ag_cmp(sc, lo ? OD_OPID_ge_Tensor : OD_OPID_le_Tensor, x, b), g[0], true));
    if (need[1])
        SET(1, ag_where0(sc, ag_cmp(sc, lo ? OD_OPID_lt_Tensor : OD_OPID_gt_Tensor, x, b), g[0], true));
}
OD_BW(ClampMinBackward0) { clamp_bound_bw(n, g, gin, need, sc, true, false); }
OD_BW(ClampMinBackward1) { clamp_bound_bw(n, g, gin, need, sc, true, true); }
OD_BW(ClampMaxBackward0) { clamp_bound_bw(n, g, gin, need, sc, false, false); }
OD_BW(ClampMaxBackward1) { clamp_bound_bw(n, g, gin, need, sc, false, true); }

OD_BW(ClampBackward1)
{
    od_tensor *x = ag_saved(sc, n, 0), *mask = NULL;
    const od_value *lo = ag_arg(n, 1), *hi = ag_arg(n, 2);
    if (od_value_is_number(lo))
        mask = ag_cmps(sc, OD_OPID_ge_Scalar, x, od_value_as_double(lo));
    if (od_value_is_number(hi)) {
        od_tensor *m2 = ag_cmps(sc, OD_OPID_le_Scalar, x, od_value_as_double(hi));
        mask = mask ? ag_call(sc, OD_OPID_logical_and, 2, T(mask), T(m2)) : m2;
    }
    SET(0, mask ? ag_where0(sc, mask, g[0], true) : g[0]);
}
OD_BW(ClampBackward0)
{
    od_tensor *x = ag_saved(sc, n, 0);
    od_tensor *lo = ag_arg(n, 1)->tag == OD_T_TENSOR ? ag_saved(sc, n, 1) : NULL;
    od_tensor *hi = ag_arg(n, 2)->tag == OD_T_TENSOR ? ag_saved(sc, n, 2) : NULL;
    od_tensor *mask = NULL;
    if (lo)
        mask = ag_cmp(sc, OD_OPID_ge_Tensor, x, lo);
    if (hi) {
        od_tensor *m2 = ag_cmp(sc, OD_OPID_le_Tensor, x, hi);
        mask = mask ? ag_call(sc, OD_OPID_logical_and, 2, T(mask), T(m2)) : m2;
    }
    int k = 0;
    SET(k, mask ? ag_where0(sc, mask, g[0], true) : g[0]);
    /* the bounds take the gradient where they bind: min where x < min (and
     * min < max), max where x > max or max < min, as clamp_backward_min_max */
    if (lo && need[ag_in(n, 1)]) {
        od_tensor *m = ag_cmp(sc, OD_OPID_lt_Tensor, x, lo);
        if (hi)
            m = ag_call(sc, OD_OPID_logical_and, 2, T(m), T(ag_cmp(sc, OD_OPID_lt_Tensor, lo, hi)));
        SET(ag_in(n, 1), ag_where0(sc, m, g[0], true));
    }
    if (hi && need[ag_in(n, 2)]) {
        od_tensor *m = ag_cmp(sc, OD_OPID_gt_Tensor, x, hi);
        if (lo) { /* x > max or max < min */
            od_tensor *a = ag_unary(sc, OD_OPID_logical_not, m);
            od_tensor *b = ag_unary(sc, OD_OPID_logical_not, ag_cmp(sc, OD_OPID_lt_Tensor, hi, lo));
            m = ag_unary(sc, OD_OPID_logical_not, ag_call(sc, OD_OPID_logical_and, 2, T(a), T(b)));
        }
        SET(ag_in(n, 2), ag_where0(sc, m, g[0], true));
    }
}

/* ---- reductions ---------------------------------------------------------------- */

static void sum_like(od_node *n, od_tensor *const *g, od_tensor **gin, const bool *need, ag_scope *sc,
                     bool has_dim, bool mean)
{
    const ag_tmeta *in = &n->in_meta[0];
    int64_t dims[OD_MAX_DIMS];
    int nd = dims_of(has_dim ? ag_arg(n, 1) : &(od_value){OD_T_NONE, {0}}, in->ndim, dims);
    bool keepdim = has_dim && ag_arg(n, 2)->tag == OD_T_BOOL && ag_arg(n, 2)->u.b;
    od_tensor *r = ag_expand(sc, restore_dims(sc, g[0], in, dims, nd, keepdim), in->sizes, in->ndim);
    if (mean)
        r = ag_muls(sc, r, 1.0 / (double)count_over(in, dims, nd));
    SET(0, r);
}
OD_BW(SumBackward0) { sum_like(n, g, gin, need, sc, false, false); }
OD_BW(SumBackward1) { sum_like(n, g, gin, need, sc, true, false); }
OD_BW(MeanBackward0) { sum_like(n, g, gin, need, sc, false, true); }
OD_BW(MeanBackward1) { sum_like(n, g, gin, need, sc, true, true); }

/* the gradient shared evenly by the elements equal to the result */
static void amax_amin(od_node *n, od_tensor *const *g, od_tensor **gin, const bool *need, ag_scope *sc)
{
    const ag_tmeta *in = &n->in_meta[0];
    int64_t dims[OD_MAX_DIMS];
    int nd = dims_of(ag_arg(n, 1), in->ndim, dims);
    bool keepdim = ag_arg(n, 2)->u.b;
    od_tensor *gu = restore_dims(sc, g[0], in, dims, nd, keepdim);
    od_tensor *ru = restore_dims(sc, ag_saved_out(sc, n, 0), in, dims, nd, keepdim);
    od_tensor *mask = ag_cmp(sc, OD_OPID_eq_Tensor, ag_saved(sc, n, 0), ru);
    od_tensor *maskf = mask ? ag_to(sc, mask, g[0]->dtype, g[0]->device) : NULL;
    od_tensor *count = ag_sum_dims(sc, maskf, dims, nd, true);
    SET(0, ag_mul(sc, ag_div(sc, gu, count), maskf));
}
OD_BW(AmaxBackward0) { amax_amin(n, g, gin, need, sc); }
OD_BW(AminBackward0) { amax_amin(n, g, gin, need, sc); }

/* The dims, correction and keepdim of var, var.dim and var.correction, and
 * of std, var_mean and std_mean, whose overloads lay them out alike. */
static int var_args(od_node *n, const ag_tmeta *in, int64_t *dims, double *corr, bool *keepdim)
{
    const od_schema *s = od_op_schema(n->op);
    *corr = 1;
    *keepdim = false;
    if (s->nargs == 2) { /* var(self, unbiased) */
        *corr = ag_arg(n, 1)->u.b ? 1 : 0;
        return dims_of(&(od_value){OD_T_NONE, {0}}, in->ndim, dims);
    }
    const od_value *c = ag_arg(n, 2);
    if (!strcmp(s->overload, "dim"))
        *corr = c->u.b ? 1 : 0;
    else
        *corr = c->tag == OD_T_INT ? (double)c->u.i : 1;
    *keepdim = ag_arg(n, 3)->u.b;
    return dims_of(ag_arg(n, 1), in->ndim, dims);
}

/* var's backward: 2 / (N - correction) * grad * (x - mean) */
static od_tensor *var_bw(od_node *n, od_tensor *g, ag_scope *sc)
{
    const ag_tmeta *in = &n->in_meta[0];
    int64_t dims[OD_MAX_DIMS];
    double corr;
    bool keepdim;
    int nd = var_args(n, in, dims, &corr, &keepdim);
    od_tensor *x = ag_saved(sc, n, 0);
    od_tensor *mean = ag_call(sc, OD_OPID_mean_dim, 4, T(x), od_list_v(OD_T_INT_LIST, dims, (size_t)nd),
                              od_bool(true), od_none());
    od_tensor *gu = restore_dims(sc, g, in, dims, nd, keepdim);
    double scale = 2.0 / ((double)count_over(in, dims, nd) - corr);
    return ag_muls(sc, ag_mul(sc, gu, ag_sub(sc, x, mean)), scale);
}

/* std's gradient as var's: grad / (2 std), 0 where std is 0 (std_backward) */
static od_tensor *std_to_var(od_node *n, od_tensor *g, ag_scope *sc)
{
    od_tensor *r = ag_saved_out(sc, n, 0);
    return ag_where0(sc, ag_cmps(sc, OD_OPID_eq_Scalar, r, 0), ag_div(sc, g, ag_muls(sc, r, 2)), false);
}

/* mean's backward over var's dims (the second output of var_mean/std_mean) */
static od_tensor *mean_bw(od_node *n, od_tensor *g, ag_scope *sc)
{
    const ag_tmeta *in = &n->in_meta[0];
    int64_t dims[OD_MAX_DIMS];
    double corr;
    bool keepdim;
    int nd = var_args(n, in, dims, &corr, &keepdim);
    od_tensor *r = ag_expand(sc, restore_dims(sc, g, in, dims, nd, keepdim), in->sizes, in->ndim);
    return ag_muls(sc, r, 1.0 / (double)count_over(in, dims, nd));
}

OD_BW(VarBackward0) { SET(0, var_bw(n, g[0], sc)); }
OD_BW(StdBackward0) { SET(0, var_bw(n, std_to_var(n, g[0], sc), sc)); }

static void moments_mean(od_node *n, od_tensor *const *g, od_tensor **gin, const bool *need, ag_scope *sc, bool std)
{
    od_tensor *r = NULL;
    if (g[0])
        r = var_bw(n, std ? std_to_var(n, g[0], sc) : g[0], sc);
    if (g[1]) {
        od_tensor *m = mean_bw(n, g[1], sc);
        r = r ? ag_add(sc, r, m) : m;
    }
    if (r)
        SET(0, r);
}
OD_BW(VarMeanBackward0) { moments_mean(n, g, gin, need, sc, false); }
OD_BW(StdMeanBackward0) { moments_mean(n, g, gin, need, sc, true); }

/* prod: grad * result / x where a slice has no zero; the product of the
 * others at a slice's only zero; 0 where a slice has two (prod_backward) */
static void prod_bw(od_node *n, od_tensor *const *g, od_tensor **gin, const bool *need, ag_scope *sc, bool has_dim)
{
    const ag_tmeta *in = &n->in_meta[0];
    if (in->ndim == 0) {
        SET(0, g[0]);
        return;
    }
    int64_t dims[OD_MAX_DIMS];
    int nd = dims_of(has_dim ? ag_arg(n, 1) : &(od_value){OD_T_NONE, {0}}, in->ndim, dims);
    bool keepdim = has_dim && ag_arg(n, 2)->u.b;
    od_tensor *x = ag_saved(sc, n, 0);
    od_tensor *gu = restore_dims(sc, g[0], in, dims, nd, keepdim);
    od_tensor *ru = restore_dims(sc, ag_saved_out(sc, n, 0), in, dims, nd, keepdim);
    od_tensor *zero = ag_cmps(sc, OD_OPID_eq_Scalar, x, 0);
    od_tensor *nz = ag_sum_dims(sc, zero, dims, nd, true);
    od_tensor *ones = ag_call(sc, OD_OPID_where_ScalarSelf, 3, T(zero), od_int(1), T(x));
    od_tensor *others = has_dim ? ag_call(sc, OD_OPID_prod_dim_int, 4, T(ones), *ag_arg(n, 1), od_bool(true), od_none())
                                : ag_call(sc, OD_OPID_prod, 2, T(ones), od_none());
    od_tensor *lone = ag_call(sc, OD_OPID_logical_and, 2, T(zero), T(ag_cmps(sc, OD_OPID_eq_Scalar, nz, 1)));
    od_tensor *at_zero = ag_where0(sc, lone, ag_mul(sc, gu, others), true);
    od_tensor *no_zero = ag_mul(sc, gu, ag_div(sc, ru, x));
    SET(0, ag_call(sc, OD_OPID_where_self, 3, T(ag_cmps(sc, OD_OPID_eq_Scalar, nz, 0)), T(no_zero), T(at_zero)));
}
OD_BW(ProdBackward0) { prod_bw(n, g, gin, need, sc, false); }
OD_BW(ProdBackward1) { prod_bw(n, g, gin, need, sc, true); }

/* max(), min(): the gradient shared evenly by the elements equal to the
 * result, NaN matching NaN (evenly_distribute_backward) */
static void max_min_all_bw(od_node *n, od_tensor *const *g, od_tensor **gin, const bool *need, ag_scope *sc)
{
    od_tensor *x = ag_saved(sc, n, 0), *r = ag_saved_out(sc, n, 0);
    od_tensor *nan = ag_call(sc, OD_OPID_logical_and, 2, T(ag_unary(sc, OD_OPID_isnan, x)),
                             T(ag_unary(sc, OD_OPID_isnan, r)));
    od_tensor *mask = ag_call(sc, OD_OPID_logical_or, 2, T(ag_cmp(sc, OD_OPID_eq_Tensor, x, r)), T(nan));
    od_tensor *maskf = mask ? ag_to(sc, mask, g[0]->dtype, g[0]->device) : NULL;
    od_tensor *cnt = ag_call(sc, OD_OPID_sum, 2, T(maskf), od_none());
    SET(0, ag_mul(sc, maskf, ag_div(sc, g[0], cnt)));
}
OD_BW(MaxBackward1) { max_min_all_bw(n, g, gin, need, sc); }
OD_BW(MinBackward1) { max_min_all_bw(n, g, gin, need, sc); }

/* max.dim, min.dim: the gradient goes to the index chosen
 * (value_selecting_reduction_backward) */
static od_tensor *scatter_add_dim(ag_scope *sc, const ag_tmeta *in, od_tensor *g, od_tensor *idx, int64_t d);
static void max_min_dim_bw(od_node *n, od_tensor *const *g, od_tensor **gin, const bool *need, ag_scope *sc)
{
    const ag_tmeta *in = &n->in_meta[0];
    int64_t d = 0;
    dims_of(ag_arg(n, 1), in->ndim, &d);
    bool keepdim = ag_arg(n, 2)->u.b;
    od_tensor *gu = restore_dims(sc, g[0], in, &d, 1, keepdim);
    od_tensor *iu = restore_dims(sc, ag_saved_out(sc, n, 1), in, &d, 1, keepdim);
    SET(0, scatter_add_dim(sc, in, gu, iu, d));
}
OD_BW(MaxBackward0) { max_min_dim_bw(n, g, gin, need, sc); }

/* tril, triu: the gradient's own tril/triu */
OD_BW(TrilBackward0) { SET(0, ag_call(sc, OD_OPID_tril, 2, T(g[0]), *ag_arg(n, 1))); }
OD_BW(TriuBackward0) { SET(0, ag_call(sc, OD_OPID_triu, 2, T(g[0]), *ag_arg(n, 1))); }
OD_BW(MinBackward0) { max_min_dim_bw(n, g, gin, need, sc); }

/* nansum: the gradient where self is not NaN */
OD_BW(NansumBackward0)
{
    const ag_tmeta *in = &n->in_meta[0];
    int64_t dims[OD_MAX_DIMS];
    int nd = dims_of(ag_arg(n, 1), in->ndim, dims);
    od_tensor *gu = restore_dims(sc, g[0], in, dims, nd, ag_arg(n, 2)->u.b);
    od_tensor *nan = ag_unary(sc, OD_OPID_isnan, ag_saved(sc, n, 0));
    SET(0, ag_where0(sc, nan, ag_expand(sc, gu, in->sizes, in->ndim), false));
}

/* logsumexp: grad * exp(self - result) */
OD_BW(LogsumexpBackward0)
{
    const ag_tmeta *in = &n->in_meta[0];
    int64_t dims[OD_MAX_DIMS];
    int nd = dims_of(ag_arg(n, 1), in->ndim, dims);
    bool keepdim = ag_arg(n, 2)->u.b;
    od_tensor *gu = restore_dims(sc, g[0], in, dims, nd, keepdim);
    od_tensor *ru = restore_dims(sc, ag_saved_out(sc, n, 0), in, dims, nd, keepdim);
    SET(0, ag_mul(sc, gu, ag_unary(sc, OD_OPID_exp, ag_sub(sc, ag_saved(sc, n, 0), ru))));
}

/* ---- softmax and layer norm -------------------------------------------------------- */

OD_BW(SoftmaxBackward0)
{
    od_tensor *y = ag_saved_out(sc, n, 0);
    int64_t d = ag_arg(n, 1)->u.i;
    od_tensor *gy = ag_mul(sc, g[0], y);
    od_tensor *s = ag_sum_dims(sc, gy, &d, 1, true);
    SET(0, ag_mul(sc, y, ag_sub(sc, g[0], s)));
}
OD_BW(LogSoftmaxBackward0)
{
    od_tensor *y = ag_saved_out(sc, n, 0);
    int64_t d = ag_arg(n, 1)->u.i;
    od_tensor *s = ag_sum_dims(sc, g[0], &d, 1, true);
    SET(0, ag_sub(sc, g[0], ag_mul(sc, ag_unary(sc, OD_OPID_exp, y), s)));
}
OD_BW(NativeLayerNormBackward0)
{
    if (!g[0])
        return; /* mean and rstd carry no gradient back (as in PyTorch) */
    const ag_tmeta *in = &n->in_meta[0];
    const od_value *ns = ag_arg(n, 1);
    int nnorm = (int)ns->u.list.n, axis = in->ndim - nnorm;
    int64_t ndims[OD_MAX_DIMS], bdims[OD_MAX_DIMS], N = 1;
    for (int i = 0; i < nnorm; i++) {
        ndims[i] = axis + i;
        N *= in->sizes[axis + i];
    }
    for (int i = 0; i < axis; i++)
        bdims[i] = i;
    od_tensor *x = ag_saved(sc, n, 0), *mean = ag_saved_out(sc, n, 1), *rstd = ag_saved_out(sc, n, 2);
    od_tensor *w = ag_arg(n, 2)->tag == OD_T_TENSOR ? ag_saved(sc, n, 2) : NULL;
    od_tensor *xhat = ag_mul(sc, ag_sub(sc, x, mean), rstd);
    if (need[0]) {
        od_tensor *gw = w ? ag_mul(sc, g[0], w) : g[0];
        od_tensor *a = ag_muls(sc, gw, (double)N);
        od_tensor *b = nnorm ? ag_sum_dims(sc, gw, ndims, nnorm, true) : gw;
        od_tensor *c = ag_mul(sc, xhat, nnorm ? ag_sum_dims(sc, ag_mul(sc, gw, xhat), ndims, nnorm, true)
                                              : ag_mul(sc, gw, xhat));
        od_tensor *inner = ag_sub(sc, ag_sub(sc, a, b), c);
        SET(0, ag_muls(sc, ag_mul(sc, inner, rstd), N ? 1.0 / (double)N : 0));
    }
    int kw = ag_in(n, 2), kb = ag_in(n, 3);
    if (kw >= 0 && need[kw]) {
        od_tensor *p = ag_mul(sc, g[0], xhat);
        SET(kw, axis ? ag_sum_dims(sc, p, bdims, axis, false) : p);
    }
    if (kb >= 0 && need[kb])
        SET(kb, axis ? ag_sum_dims(sc, g[0], bdims, axis, false) : g[0]);
}

/* ---- matrix products --------------------------------------------------------------- */

OD_BW(MmBackward0)
{
    if (need[0])
        SET(0, ag_mm(sc, g[0], ag_transpose(sc, ag_saved(sc, n, 1), 0, 1)));
    if (need[1])
        SET(1, ag_mm(sc, ag_transpose(sc, ag_saved(sc, n, 0), 0, 1), g[0]));
}
OD_BW(BmmBackward0)
{
    if (need[0])
        SET(0, ag_call(sc, OD_OPID_bmm, 2, T(g[0]), T(ag_transpose(sc, ag_saved(sc, n, 1), 1, 2))));
    if (need[1])
        SET(1, ag_call(sc, OD_OPID_bmm, 2, T(ag_transpose(sc, ag_saved(sc, n, 0), 1, 2)), T(g[0])));
}
OD_BW(AddmmBackward0)
{
    double beta = num(ag_arg(n, 3)), alpha = num(ag_arg(n, 4));
    SET(0, beta == 1 ? g[0] : ag_muls(sc, g[0], beta));
    if (need[1])
        SET(1, ag_muls(sc, ag_mm(sc, g[0], ag_transpose(sc, ag_saved(sc, n, 2), 0, 1)), alpha));
    if (need[2])
        SET(2, ag_muls(sc, ag_mm(sc, ag_transpose(sc, ag_saved(sc, n, 1), 0, 1), g[0]), alpha));
}
/* addmv, mv, addr, baddbmm, addbmm: derivatives.yaml 1.13 (real dtypes, so
 * no conj); the engine reduces self's gradient to its broadcast shape */
static od_tensor *scaled(ag_scope *sc, od_tensor *t, double s) { return s == 1 ? t : ag_muls(sc, t, s); }
OD_BW(AddmvBackward0)
{
    double beta = num(ag_arg(n, 3)), alpha = num(ag_arg(n, 4));
    SET(0, scaled(sc, g[0], beta));
    if (need[1])
        SET(1, scaled(sc, ag_call(sc, OD_OPID_outer, 2, T(g[0]), T(ag_saved(sc, n, 2))), alpha));
    if (need[2])
        SET(2, scaled(sc, ag_call(sc, OD_OPID_mv, 2, T(ag_transpose(sc, ag_saved(sc, n, 1), 0, 1)), T(g[0])), alpha));
}
OD_BW(MvBackward0)
{
    if (need[0])
        SET(0, ag_call(sc, OD_OPID_outer, 2, T(g[0]), T(ag_saved(sc, n, 1))));
    if (need[1])
        SET(1, ag_call(sc, OD_OPID_mv, 2, T(ag_transpose(sc, ag_saved(sc, n, 0), 0, 1)), T(g[0])));
}
OD_BW(AddrBackward0)
{
    double beta = num(ag_arg(n, 3)), alpha = num(ag_arg(n, 4));
    SET(0, scaled(sc, g[0], beta));
    if (need[1])
        SET(1, scaled(sc, ag_call(sc, OD_OPID_mv, 2, T(g[0]), T(ag_saved(sc, n, 2))), alpha));
    if (need[2])
        SET(2, scaled(sc, ag_call(sc, OD_OPID_mv, 2, T(ag_transpose(sc, g[0], 0, 1)), T(ag_saved(sc, n, 1))), alpha));
}
OD_BW(BaddbmmBackward0)
{
    double beta = num(ag_arg(n, 3)), alpha = num(ag_arg(n, 4));
    SET(0, scaled(sc, g[0], beta));
    if (need[1])
        SET(1, scaled(sc, ag_call(sc, OD_OPID_bmm, 2, T(g[0]), T(ag_transpose(sc, ag_saved(sc, n, 2), 1, 2))), alpha));
    if (need[2])
        SET(2, scaled(sc, ag_call(sc, OD_OPID_bmm, 2, T(ag_transpose(sc, ag_saved(sc, n, 1), 1, 2)), T(g[0])), alpha));
}
OD_BW(AddbmmBackward0)
{
    double beta = num(ag_arg(n, 3)), alpha = num(ag_arg(n, 4));
    SET(0, scaled(sc, g[0], beta));
    if (!need[1] && !need[2])
        return;
    const ag_tmeta *m1 = &n->in_meta[1];
    int64_t sz[3] = {m1->sizes[0], g[0]->sizes[0], g[0]->sizes[1]};
    od_tensor *ge = ag_expand(sc, ag_call(sc, OD_OPID_unsqueeze, 2, T(g[0]), od_int(0)), sz, 3);
    if (need[1])
        SET(1, scaled(sc, ag_call(sc, OD_OPID_bmm, 2, T(ge), T(ag_transpose(sc, ag_saved(sc, n, 2), 1, 2))), alpha));
    if (need[2])
        SET(2, scaled(sc, ag_call(sc, OD_OPID_bmm, 2, T(ag_transpose(sc, ag_saved(sc, n, 1), 1, 2)), T(ge)), alpha));
}
OD_BW(DotBackward0)
{
    if (need[0])
        SET(0, ag_mul(sc, g[0], ag_saved(sc, n, 1)));
    if (need[1])
        SET(1, ag_mul(sc, g[0], ag_saved(sc, n, 0)));
}

/* ---- joins, copies, indexing ----------------------------------------------------- */

OD_BW(CatBackward0)
{
    int64_t dim = ag_arg(n, 1)->u.i, off = 0;
    int rank = g[0]->ndim;
    if (dim < 0)
        dim += rank;
    for (int k = 0; k < n->nin; k++) {
        const ag_tmeta *m = &n->in_meta[k];
        if (m->ndim == 1 && m->sizes[0] == 0 && rank != 1) { /* legacy empty input: skipped by cat */
            SET(k, ag_zeros(sc, m));
            continue;
        }
        int64_t len = m->sizes[dim];
        if (need[k])
            SET(k, ag_call(sc, OD_OPID_slice_Tensor, 5, T(g[0]), od_int(dim), od_int(off), od_int(off + len),
                           od_int(1)));
        off += len;
    }
}
OD_BW(StackBackward0)
{
    int64_t dim = ag_arg(n, 1)->u.i;
    if (dim < 0)
        dim += g[0]->ndim;
    for (int k = 0; k < n->nin; k++)
        if (need[k])
            SET(k, ag_call(sc, OD_OPID_select_int, 3, T(g[0]), od_int(dim), od_int(k)));
}
OD_BW(CloneBackward0) { SET(0, g[0]); }
OD_BW(ToCopyBackward0) { SET(0, g[0]); } /* the engine converts it back */
OD_BW(CopyBackwards)
{
    /* self's old values are overwritten: no gradient; src takes it all */
    SET(ag_in(n, 1), g[0]);
}
OD_BW(FillBackward0) {}

/* index_select's gradient adds rows of grad into zeros at index: done as a
 * product with the one-hot matrix of index, so every backend that has mm
 * has it */
OD_BW(IndexSelectBackward0)
{
    const ag_tmeta *in = &n->in_meta[0];
    if (in->ndim == 0) {
        SET(0, ag_reshape(sc, ag_sum_dims(sc, g[0], NULL, 0, false), NULL, 0));
        return;
    }
    int64_t d = ag_arg(n, 1)->u.i;
    if (d < 0)
        d += in->ndim;
    od_tensor *index = ag_saved(sc, n, 2);
    int64_t nidx = index ? od_tensor_numel(index) : 0, S = in->sizes[d];
    od_tensor *gt = ag_transpose(sc, g[0], 0, d); /* [nidx, ...] */
    int64_t R = nidx ? (gt ? od_tensor_numel(gt) / nidx : 0) : 1;
    for (int i = 0; nidx == 0 && i < in->ndim; i++)
        R *= i == d ? 1 : in->sizes[i];
    int64_t s2[2] = {nidx, R}, s1[2] = {nidx, 1};
    od_tensor *g2 = ag_reshape(sc, gt, s2, 2);
    od_tensor *ar = ag_call(sc, OD_OPID_arange, 5, od_int(S), od_dtype_v(OD_INT64), od_none(),
                            od_device_v(in->device), od_none());
    od_tensor *oh = ag_cmp(sc, OD_OPID_eq_Tensor, ag_reshape(sc, index, s1, 2), ar); /* [nidx, S] */
    od_tensor *ohf = oh ? ag_to(sc, oh, g[0]->dtype, g[0]->device) : NULL;
    od_tensor *r = ag_mm(sc, ag_transpose(sc, ohf, 0, 1), g2); /* [S, R] */
    int64_t sizes[OD_MAX_DIMS];
    memcpy(sizes, in->sizes, (size_t)in->ndim * sizeof sizes[0]);
    sizes[d] = in->sizes[0];
    sizes[0] = S; /* the transposed layout */
    SET(0, ag_transpose(sc, ag_reshape(sc, r, sizes, in->ndim), 0, d));
}

/* ---- views ------------------------------------------------------------------------ */

static void back_to_shape(od_node *n, od_tensor *const *g, od_tensor **gin, const bool *need, ag_scope *sc)
{
    SET(0, ag_reshape(sc, g[0], n->in_meta[0].sizes, n->in_meta[0].ndim));
}
OD_BW(ViewBackward0) { back_to_shape(n, g, gin, need, sc); }
OD_BW(SqueezeBackward0) { back_to_shape(n, g, gin, need, sc); }
OD_BW(SqueezeBackward1) { back_to_shape(n, g, gin, need, sc); }
OD_BW(UnsqueezeBackward0) { back_to_shape(n, g, gin, need, sc); }
OD_BW(ExpandBackward0) { SET(0, g[0]); } /* sum_to_size in the engine */
OD_BW(AliasBackward0) { SET(0, g[0]); }
OD_BW(LiftFreshBackward0) { SET(0, g[0]); }
OD_BW(ReshapeAliasBackward0) { back_to_shape(n, g, gin, need, sc); }
OD_BW(UnsafeViewBackward0) { back_to_shape(n, g, gin, need, sc); }
OD_BW(TransposeBackward0)
{
    SET(0, ag_transpose(sc, g[0], ag_arg(n, 1)->u.i, ag_arg(n, 2)->u.i));
}
OD_BW(TBackward0) { SET(0, ag_call(sc, OD_OPID_t, 1, T(g[0]))); }
OD_BW(PermuteBackward0)
{
    const od_value *p = ag_arg(n, 1);
    int nd = (int)p->u.list.n;
    int64_t inv[OD_MAX_DIMS];
    for (int i = 0; i < nd && i < OD_MAX_DIMS; i++) {
        int64_t d = ((const int64_t *)p->u.list.items)[i];
        inv[d < 0 ? d + nd : d] = i;
    }
    SET(0, ag_call(sc, OD_OPID_permute, 2, T(g[0]), od_list_v(OD_T_INT_LIST, inv, (size_t)nd)));
}
/* select and slice: the gradient written into zeros through the same view */
static void into_zeros(od_node *n, od_tensor *const *g, od_tensor **gin, const bool *need, ag_scope *sc,
                       bool slice)
{
    od_tensor *z = ag_zeros(sc, &n->in_meta[0]);
    od_tensor *v = slice ? ag_call(sc, OD_OPID_slice_Tensor, 5, T(z), n->args[1], n->args[2], n->args[3],
                                   n->args[4])
                         : ag_call(sc, OD_OPID_select_int, 3, T(z), n->args[1], n->args[2]);
    if (ag_call(sc, OD_OPID_copy_, 3, T(v), T(g[0]), od_bool(false)))
        SET(0, z);
}
OD_BW(SelectBackward0) { into_zeros(n, g, gin, need, sc, false); }
/* diagonal: the gradient written into zeros through the same diagonal view */
OD_BW(DiagonalBackward0)
{
    od_tensor *z = ag_zeros(sc, &n->in_meta[0]);
    od_tensor *v = ag_call(sc, OD_OPID_diagonal, 4, T(z), n->args[1], n->args[2], n->args[3]);
    if (ag_call(sc, OD_OPID_copy_, 3, T(v), T(g[0]), od_bool(false)))
        SET(0, z);
}
/* diag_embed: the diagonal it wrote */
OD_BW(DiagEmbedBackward0)
{
    SET(0, ag_call(sc, OD_OPID_diagonal, 4, T(g[0]), n->args[1], n->args[2], n->args[3]));
}
/* diagonal_scatter: self's gradient without the diagonal, src's the diagonal */
OD_BW(DiagonalScatterBackward0)
{
    if (need[0]) {
        od_tensor *z = ag_zeros(sc, &n->in_meta[1]);
        SET(0, ag_call(sc, OD_OPID_diagonal_scatter, 5, T(g[0]), T(z), n->args[2], n->args[3], n->args[4]));
    }
    SET(1, ag_call(sc, OD_OPID_diagonal, 4, T(g[0]), n->args[2], n->args[3], n->args[4]));
}

/* ---- shapes.c's composites ---- */
/* An int[] argument negated into neg (cap entries; the forward op refused
 * longer lists), as a list value over neg. */
static od_value negated(const od_value *list, int64_t *neg, int cap)
{
    int n = (int)list->u.list.n < cap ? (int)list->u.list.n : cap;
    for (int i = 0; i < n; i++)
        neg[i] = -((const int64_t *)list->u.list.items)[i];
    return od_list_v(OD_T_INT_LIST, neg, (size_t)n);
}
/* the gradient cropped (or padded with zeros) by the negated pads */
OD_BW(ConstantPadNdBackward0)
{
    int64_t neg[2 * OD_MAX_DIMS];
    SET(0, ag_call(sc, OD_OPID_constant_pad_nd, 3, T(g[0]), negated(ag_arg(n, 1), neg, 2 * OD_MAX_DIMS), od_int(0)));
}
/* each dim's copies summed: [.., r*s, ..] viewed as [.., r, s, ..], summed over r;
 * then the leading new dims summed away */
OD_BW(RepeatBackward0)
{
    const od_value *p = ag_arg(n, 1);
    const int64_t *rep = p->u.list.items;
    int nr = (int)p->u.list.n, lead = nr - n->in_meta[0].ndim;
    od_tensor *gr = g[0];
    for (int i = nr - 1; i >= lead && gr; i--) {
        if (rep[i] == 1)
            continue;
        int64_t sz[OD_MAX_DIMS + 1];
        int k = 0;
        for (int j = 0; j < gr->ndim; j++) {
            if (j == i) {
                sz[k++] = rep[i];
                sz[k++] = n->in_meta[0].sizes[i - lead];
            } else {
                sz[k++] = gr->sizes[j];
            }
        }
        int64_t d = i;
        gr = ag_sum_dims(sc, ag_reshape(sc, gr, sz, k), &d, 1, false);
    }
    if (gr && lead > 0) {
        int64_t dims[OD_MAX_DIMS];
        for (int i = 0; i < lead; i++)
            dims[i] = i;
        gr = ag_sum_dims(sc, gr, dims, lead, false);
    }
    SET(0, gr);
}
OD_BW(FlipBackward0) { SET(0, ag_call(sc, OD_OPID_flip, 2, T(g[0]), n->args[1])); }
OD_BW(RollBackward0)
{
    int64_t neg[4 * OD_MAX_DIMS];
    SET(0, ag_call(sc, OD_OPID_roll, 3, T(g[0]), negated(ag_arg(n, 1), neg, 4 * OD_MAX_DIMS), n->args[2]));
}
OD_BW(SliceBackward0) { into_zeros(n, g, gin, need, sc, true); }

/* scans and sorting */

static int64_t wrap_dim_of(int64_t d, int ndim)
{
    int64_t n = ndim > 0 ? ndim : 1;
    return d < 0 ? d + n : d;
}

static od_value one_dim(int64_t *d) { return od_list_v(OD_T_INT_LIST, d, 1); }

static od_tensor *flip1(ag_scope *sc, od_tensor *a, int64_t d)
{
    return ag_call(sc, OD_OPID_flip, 2, T(a), one_dim(&d));
}

/* w.flip(dim).cumsum(dim).flip(dim) */
static od_tensor *reversed_cumsum(ag_scope *sc, od_tensor *w, int64_t d)
{
    return flip1(sc, ag_call(sc, OD_OPID_cumsum, 3, T(flip1(sc, w, d)), od_int(d), od_none()), d);
}

/* a with b where cond is false, b a number (where.ScalarOther keeps a's dtype) */
static od_tensor *where_else(ag_scope *sc, od_tensor *cond, od_tensor *a, double b)
{
    return ag_call(sc, OD_OPID_where_ScalarOther, 3, T(cond), T(a), od_double(b));
}

/* zeros(in).scatter_add(d, idx, g) for g and idx of in's rank (dim d of any
 * size m); indices along a line are distinct for sort/topk/kthvalue and
 * max.dim, so it is their scatter too. A 0-dim in takes g as it is. */
static od_tensor *scatter_add_dim(ag_scope *sc, const ag_tmeta *in, od_tensor *g, od_tensor *idx, int64_t d)
{
    if (in->ndim == 0 || !g || !idx)
        return g;
    ag_tmeta z = *in;
    z.dtype = g->dtype;
    z.device = g->device;
    return ag_call(sc, OD_OPID_scatter_add, 4, T(ag_zeros(sc, &z)), od_int(d), T(idx), T(g));
}

/* cumsum/cumprod: the wrapped dim and the gradient in self's dtype (a
 * dtype argument may have widened the result); true where that gradient is
 * already the answer (one element along the dim) */
static bool scan_grad(od_node *n, od_tensor *const *g, ag_scope *sc, int64_t *d, od_tensor **gr)
{
    const ag_tmeta *in = &n->in_meta[0];
    *d = wrap_dim_of(ag_arg(n, 1)->u.i, in->ndim);
    *gr = g[0]->dtype == in->dtype ? g[0] : ag_to(sc, g[0], in->dtype, g[0]->device);
    return od_tensor_numel(g[0]) <= 1 || in->ndim == 0 || in->sizes[*d] == 1;
}

OD_BW(CumsumBackward0)
{
    int64_t d;
    od_tensor *gr;
    SET(0, scan_grad(n, g, sc, &d, &gr) ? gr : reversed_cumsum(sc, gr, d));
}

/* ATen's cumprod_backward (first order): before the first zero
 * reversed_cumsum(out * grad) / x; at the first zero z1, the product of the
 * inputs before it times sum_{z1<=k<z2} grad_k prod_{z1<j<=k} x_j; zero
 * after it. */
OD_BW(CumprodBackward0)
{
    const ag_tmeta *in = &n->in_meta[0];
    int64_t d;
    od_tensor *gr;
    if (scan_grad(n, g, sc, &d, &gr)) {
        SET(0, gr);
        return;
    }
    od_tensor *x = ag_saved(sc, n, 0), *out = ag_saved_out(sc, n, 0);
    if (out && out->dtype != in->dtype)
        out = ag_to(sc, out, in->dtype, out->device);
    od_tensor *w = ag_mul(sc, out, gr);
    od_tensor *is_zero = ag_cmps(sc, OD_OPID_eq_Scalar, x, 0);
    od_tensor *c = ag_call(sc, OD_OPID_cumsum, 3, T(is_zero), od_int(d), od_none());
    od_tensor *mask0 = ag_cmps(sc, OD_OPID_eq_Scalar, c, 0), *mask1 = ag_cmps(sc, OD_OPID_eq_Scalar, c, 1);
    od_tensor *fz = ag_call(sc, OD_OPID_logical_and, 2, T(is_zero), T(mask1));
    od_tensor *ga = ag_where0(sc, mask0, ag_div(sc, reversed_cumsum(sc, ag_where0(sc, mask0, w, true), d), x), true);
    od_tensor *mid = ag_call(sc, OD_OPID_logical_and, 2, T(mask1), T(ag_unary(sc, OD_OPID_logical_not, fz)));
    od_tensor *cp = ag_call(sc, OD_OPID_cumprod, 3, T(where_else(sc, mid, x, 1)), od_int(d), od_none());
    od_tensor *sm = ag_sum_dims(sc, ag_mul(sc, cp, ag_where0(sc, mask1, gr, true)), &d, 1, true);
    od_tensor *p = ag_call(sc, OD_OPID_cumprod, 3, T(where_else(sc, mask0, x, 1)), od_int(d), od_none());
    SET(0, ag_add(sc, ga, ag_where0(sc, fz, ag_mul(sc, p, sm), true)));
}

OD_BW(LogcumsumexpBackward0)
{
    const ag_tmeta *in = &n->in_meta[0];
    if (g[0]->ndim == 0 || od_tensor_numel(g[0]) == 0) {
        SET(0, g[0]);
        return;
    }
    int64_t d = wrap_dim_of(ag_arg(n, 1)->u.i, in->ndim);
    double lowest = g[0]->dtype == OD_FLOAT64 ? -1.7976931348623157e308
                    : g[0]->dtype == OD_FLOAT16 ? -65504.0
                    : g[0]->dtype == OD_BFLOAT16 ? -3.3895313892515355e38
                                                 : -3.4028234663852886e38;
    od_tensor *x = ag_saved(sc, n, 0), *res = ag_saved_out(sc, n, 0);
    od_tensor *lag = ag_unary(sc, OD_OPID_log, ag_unary(sc, OD_OPID_abs, g[0]));
    od_tensor *lp = where_else(sc, ag_cmps(sc, OD_OPID_gt_Scalar, g[0], 0), lag, lowest);
    od_tensor *ln = where_else(sc, ag_cmps(sc, OD_OPID_lt_Scalar, g[0], 0), lag, lowest);
    od_tensor *rp = flip1(sc, ag_call(sc, OD_OPID_logcumsumexp, 2, T(flip1(sc, ag_sub(sc, lp, res), d)), od_int(d)), d);
    od_tensor *rn = flip1(sc, ag_call(sc, OD_OPID_logcumsumexp, 2, T(flip1(sc, ag_sub(sc, ln, res), d)), od_int(d)), d);
    SET(0, ag_sub(sc, ag_unary(sc, OD_OPID_exp, ag_add(sc, rp, x)), ag_unary(sc, OD_OPID_exp, ag_add(sc, rn, x))));
}

/* grad scattered (added) into zeros at the saved indices, along dim argument
 * dim_arg; keepdim_arg >= 0 names kthvalue's keepdim. */
static void select_back(od_node *n, od_tensor *const *g, od_tensor **gin, const bool *need, ag_scope *sc,
                        int dim_arg, int keepdim_arg)
{
    if (!g[0])
        return;
    const ag_tmeta *in = &n->in_meta[0];
    if (od_tensor_numel(g[0]) == 0 || in->ndim == 0) {
        SET(0, in->ndim == 0 ? g[0] : ag_zeros(sc, in));
        return;
    }
    int64_t d = wrap_dim_of(ag_arg(n, dim_arg)->u.i, in->ndim);
    od_tensor *gr = g[0], *idx = ag_saved_out(sc, n, 1);
    if (keepdim_arg >= 0 && !ag_arg(n, keepdim_arg)->u.b) {
        int64_t sz[OD_MAX_DIMS];
        memcpy(sz, in->sizes, (size_t)in->ndim * sizeof sz[0]);
        sz[d] = 1;
        gr = ag_reshape(sc, gr, sz, in->ndim);
        idx = ag_reshape(sc, idx, sz, in->ndim);
    }
    SET(0, scatter_add_dim(sc, in, gr, idx, d));
}
OD_BW(CummaxBackward0) { select_back(n, g, gin, need, sc, 1, -1); }
OD_BW(CumminBackward0) { select_back(n, g, gin, need, sc, 1, -1); }
OD_BW(SortBackward0) { select_back(n, g, gin, need, sc, 1, -1); }
OD_BW(SortBackward1) { select_back(n, g, gin, need, sc, 2, -1); }
OD_BW(TopkBackward0) { select_back(n, g, gin, need, sc, 2, -1); }
OD_BW(KthvalueBackward0) { select_back(n, g, gin, need, sc, 2, 3); }
/* indexing */

static od_tensor *ix_gather(ag_scope *sc, od_tensor *t, od_value dim, od_tensor *index)
{
    return ag_call(sc, OD_OPID_gather, 4, T(t), dim, T(index), od_bool(false));
}
static od_tensor *ix_scatter_add(ag_scope *sc, od_tensor *t, od_value dim, od_tensor *index, od_tensor *src)
{
    return ag_call(sc, OD_OPID_scatter_add, 4, T(t), dim, T(index), T(src));
}
/* t.masked_fill(mask, v), as where(mask, v, t) */
static od_tensor *ix_fill(ag_scope *sc, od_tensor *t, od_tensor *mask, double v)
{
    return ag_call(sc, OD_OPID_where_ScalarSelf, 3, T(mask), od_double(v), T(t));
}
static od_tensor *ix_like(ag_scope *sc, od_opid id, od_tensor *t, od_dtype dt)
{
    return ag_call(sc, id, 6, T(t), od_dtype_v(dt), od_none(), od_none(), od_none(), od_none());
}

/* gather_backward (sparse_grad=False): grad added into zeros at index */
OD_BW(GatherBackward0)
{
    ag_tmeta m = n->in_meta[0];
    m.dtype = g[0]->dtype;
    SET(0, ix_scatter_add(sc, ag_zeros(sc, &m), n->args[1], ag_saved(sc, n, 2), g[0]));
}
OD_BW(ScatterBackward0)
{
    od_tensor *index = ag_saved(sc, n, 2);
    SET(0, ag_call(sc, OD_OPID_scatter_value, 4, T(g[0]), n->args[1], T(index), od_int(0)));
    int k = ag_in(n, 3);
    if (k >= 0 && need[k])
        SET(k, ix_gather(sc, g[0], n->args[1], index));
}
OD_BW(ScatterBackward1)
{
    SET(0, ag_call(sc, OD_OPID_scatter_value, 4, T(g[0]), n->args[1], T(ag_saved(sc, n, 2)), od_int(0)));
}
OD_BW(ScatterAddBackward0)
{
    SET(0, g[0]);
    int k = ag_in(n, 3);
    if (k >= 0 && need[k])
        SET(k, ix_gather(sc, g[0], n->args[1], ag_saved(sc, n, 2)));
}
/* scatter_reduce_backward of FunctionsManual.cpp (1.13), reduce by reduce */
OD_BW(ScatterReduceBackward0)
{
    od_value dim = n->args[1], red = n->args[4];
    bool include_self = n->args[5].tag == OD_T_BOOL ? n->args[5].u.b : n->args[5].u.i != 0;
    const char *r = red.tag == OD_T_STRING && red.u.s ? red.u.s : "";
    od_tensor *self = ag_saved(sc, n, 0), *index = ag_saved(sc, n, 2), *src = ag_saved(sc, n, 3);
    od_tensor *gs = NULL, *gsrc = NULL, *grad = g[0];
    int ks = ag_in(n, 3);
    if (!strcmp(r, "sum")) {
        gs = grad;
        gsrc = ix_gather(sc, grad, dim, index);
    } else if (!strcmp(r, "mean")) {
        od_tensor *N = ix_like(sc, include_self ? OD_OPID_ones_like : OD_OPID_zeros_like, grad, grad->dtype);
        N = ix_scatter_add(sc, N, dim, index, ix_like(sc, OD_OPID_ones_like, src, grad->dtype));
        N = ix_fill(sc, N, ag_cmps(sc, OD_OPID_eq_Scalar, N, 0), 1);
        gs = ag_div(sc, grad, N);
        gsrc = ag_div(sc, ix_gather(sc, grad, dim, index), ix_gather(sc, N, dim, index));
    } else if (!strcmp(r, "amax") || !strcmp(r, "amin")) {
        od_tensor *result = ag_saved_out(sc, n, 0);
        od_tensor *value = ix_gather(sc, result, dim, index);
        od_tensor *self_is = ag_cmp(sc, OD_OPID_eq_Tensor, self, result);
        od_tensor *src_is = ag_cmp(sc, OD_OPID_eq_Tensor, src, value);
        od_dtype dt = self ? self->dtype : OD_FLOAT32;
        od_tensor *N = ix_scatter_add(sc, ag_to(sc, self_is, dt, grad->device), dim, index,
                                      ag_to(sc, src_is, dt, grad->device));
        od_tensor *gd = ag_div(sc, grad, N);
        gs = ag_mul(sc, self_is, gd);
        gsrc = ag_mul(sc, src_is, ix_gather(sc, gd, dim, index));
    } else if (!strcmp(r, "prod")) {
        od_tensor *result = ag_saved_out(sc, n, 0);
        od_tensor *masked_self = ix_fill(sc, self, ag_cmps(sc, OD_OPID_eq_Scalar, self, 0), 1);
        od_tensor *msr = ag_call(sc, OD_OPID_scatter_reduce_two, 6, T(masked_self), dim, T(index), T(src), red,
                                 od_bool(include_self));
        gs = ag_div(sc, ag_mul(sc, grad, msr), masked_self);
        od_tensor *src_zero = ag_cmps(sc, OD_OPID_eq_Scalar, src, 0);
        od_dtype dt = self ? self->dtype : OD_FLOAT32;
        od_tensor *nz = ix_gather(sc,
                                  ix_scatter_add(sc, ix_like(sc, OD_OPID_zeros_like, self, dt), dim, index,
                                                 ag_to(sc, src_zero, dt, grad->device)),
                                  dim, index);
        od_tensor *single = ag_call(sc, OD_OPID_logical_and, 2, T(src_zero), T(ag_cmps(sc, OD_OPID_eq_Scalar, nz, 1)));
        od_tensor *masked_src = ix_fill(sc, src, single, 1);
        od_tensor *msrc_r = ag_call(sc, OD_OPID_scatter_reduce_two, 6, T(self), dim, T(index), T(masked_src), red,
                                    od_bool(include_self));
        od_tensor *a = ix_gather(sc, ag_mul(sc, grad, msrc_r), dim, index);
        od_tensor *b = ag_div(sc, ix_gather(sc, ag_mul(sc, grad, result), dim, index), ix_fill(sc, src, src_zero, 1));
        gsrc = ag_call(sc, OD_OPID_where_self, 3, T(single), T(a), T(b));
    } else {
        sc->st = od_error_set(sc->err, OD_EINVAL, "Expected 'reduce' argument to be one of 'sum', 'prod', "
                                                  "'mean', 'amax', 'amin' but got %s.", r);
        return;
    }
    if (gs && !include_self) {
        od_tensor *mask = ag_call(sc, OD_OPID_scatter_value, 4, T(ix_like(sc, OD_OPID_zeros_like, grad, OD_BOOL)),
                                  dim, T(index), od_bool(true));
        gs = ag_where0(sc, mask, gs, false);
    }
    SET(0, gs);
    if (ks >= 0 && need[ks])
        SET(ks, gsrc);
}

/* a mask as bool (a byte mask reads non-zero as set) */
static od_tensor *ix_bool_mask(ag_scope *sc, od_tensor *mask)
{
    return mask && mask->dtype != OD_BOOL ? ag_cmps(sc, OD_OPID_ne_Scalar, mask, 0) : mask;
}
OD_BW(MaskedFillBackward0) { SET(0, ag_where0(sc, ix_bool_mask(sc, ag_saved(sc, n, 1)), g[0], false)); }
OD_BW(MaskedFillBackward1)
{
    od_tensor *mask = ix_bool_mask(sc, ag_saved(sc, n, 1));
    SET(0, ag_where0(sc, mask, g[0], false));
    int k = ag_in(n, 2);
    if (k >= 0 && need[k])
        SET(k, ag_sum_dims(sc, ag_where0(sc, mask, g[0], true), NULL, 0, false));
}
/* masked_select_backward: grad into zeros of the broadcast shape at the
 * mask's set positions (row-major), as a flat scatter_add */
OD_BW(MaskedSelectBackward0)
{
    const ag_tmeta *in = &n->in_meta[0];
    od_tensor *mask = ag_saved(sc, n, 1);
    if (!mask)
        return;
    int64_t shape[OD_MAX_DIMS], numel = 1, flat = -1;
    int nd = 0;
    od_status st = od_broadcast_shapes(mask->sizes, mask->ndim, in->sizes, in->ndim, shape, &nd, sc->err);
    if (st) {
        sc->st = st;
        return;
    }
    for (int i = 0; i < nd; i++)
        numel *= shape[i];
    od_tensor *m = ag_reshape(sc, ix_bool_mask(sc, ag_expand(sc, mask, shape, nd)), &flat, 1);
    od_tensor *idx = ag_reshape(sc, ag_call(sc, OD_OPID_nonzero, 1, T(m)), &flat, 1);
    ag_tmeta z = *in;
    z.ndim = 1;
    z.sizes[0] = numel;
    z.dtype = g[0]->dtype;
    SET(0, ag_reshape(sc, ix_scatter_add(sc, ag_zeros(sc, &z), od_int(0), idx, g[0]), shape, nd));
}
/* take_backward: grad added into zeros of self's flat shape at the
 * (wrapped) index */
OD_BW(TakeBackward0)
{
    const ag_tmeta *in = &n->in_meta[0];
    int64_t numel = 1, flat = -1;
    for (int i = 0; i < in->ndim; i++)
        numel *= in->sizes[i];
    ag_tmeta z = *in;
    z.dtype = g[0]->dtype;
    if (numel == 0) {
        SET(0, ag_zeros(sc, &z));
        return;
    }
    od_tensor *idx = ag_reshape(sc, ag_call(sc, OD_OPID_remainder_Scalar, 2, T(ag_saved(sc, n, 1)), od_int(numel)),
                                &flat, 1);
    z.ndim = 1;
    z.sizes[0] = numel;
    od_tensor *r = ix_scatter_add(sc, ag_zeros(sc, &z), od_int(0), idx, ag_reshape(sc, g[0], &flat, 1));
    SET(0, ag_reshape(sc, r, in->sizes, in->ndim));
}

/* the rows of grad that index picks along dim (a 0-dim source takes index's
 * one value); the engine sums them to a broadcast source's shape */
static od_tensor *ix_rows(ag_scope *sc, od_node *n, od_tensor *grad)
{
    od_tensor *index = ag_saved(sc, n, 2), *source = ag_saved(sc, n, 3);
    if (!index || !source)
        return NULL;
    od_tensor *r = ag_call(sc, OD_OPID_index_select, 3, T(grad), n->args[1], T(index));
    return source->ndim == 0 ? ag_reshape(sc, r, NULL, 0) : r;
}
static od_tensor *ix_fill0(ag_scope *sc, od_node *n, od_tensor *grad)
{
    return ag_call(sc, OD_OPID_index_fill_int_Scalar, 4, T(grad), n->args[1], T(ag_saved(sc, n, 2)), od_int(0));
}
OD_BW(IndexAddBackward0)
{
    SET(0, g[0]);
    int k = ag_in(n, 3);
    if (k >= 0 && need[k]) {
        od_tensor *r = ix_rows(sc, n, g[0]);
        double alpha = n->nargs > 4 && od_value_is_number(&n->args[4]) ? od_value_as_double(&n->args[4]) : 1.0;
        SET(k, alpha == 1.0 ? r : ag_muls(sc, r, alpha));
    }
}
OD_BW(IndexCopyBackward0)
{
    SET(0, ix_fill0(sc, n, g[0]));
    int k = ag_in(n, 3);
    if (k >= 0 && need[k])
        SET(k, ix_rows(sc, n, g[0]));
}
OD_BW(IndexFillBackward0) { SET(0, ix_fill0(sc, n, g[0])); }
/* index_fill.int_Tensor: value's gradient is the filled positions' sum,
 * grad minus grad with them zeroed (ATen sums index_select over the unique
 * indices: the same positions) */
OD_BW(IndexFillBackward1)
{
    od_tensor *z = ix_fill0(sc, n, g[0]);
    SET(0, z);
    int k = ag_in(n, 3);
    if (k >= 0 && need[k])
        SET(k, ag_sum_dims(sc, ag_sub(sc, g[0], z), NULL, 0, false));
}

/* ---- reflection / replication padding ---- */
/* Padding is separable: along each padded dim the gradient of output index
 * j goes to input index od_pad_source_index(j), so index_add per dim, the
 * last dim's pair first in the padding list, sums it back (ATen's
 * reflection_pad*_backward / replication_pad*_backward). */
static void pad_backward(od_node *n, od_tensor *const *g, od_tensor **gin, const bool *need, ag_scope *sc, int nd,
                         bool reflect)
{
    const ag_tmeta *in = &n->in_meta[0];
    const od_value *pv = ag_arg(n, 1);
    const int64_t *pad = pv->u.list.items;
    int lead = in->ndim - nd;
    od_tensor *cur = g[0];
    for (int k = 0; k < nd && cur; k++) {
        int d = lead + k, pair = nd - 1 - k;
        int64_t len = cur->sizes[d], isz = in->sizes[d];
        od_tensor *map = NULL;
        if (od_tensor_empty(&len, 1, OD_INT64, (od_device){OD_DEV_CPU, 0}, &map, sc->err)) {
            sc->st = OD_EINVAL;
            return;
        }
        int64_t *mv = od_tensor_data(map);
        for (int64_t j = 0; j < len; j++)
            mv[j] = od_pad_source_index(reflect, j, isz, pad[2 * pair]);
        od_tensor *m = ag_tmp(sc, map);
        od_tensor_release(map);
        if (m && cur->device.type != OD_DEV_CPU)
            m = ag_to(sc, m, OD_INT64, cur->device);
        ag_tmeta z = *in;
        z.dtype = cur->dtype;
        for (int q = 0; q < in->ndim; q++)
            z.sizes[q] = q < d ? in->sizes[q] : q == d ? isz : cur->sizes[q];
        cur = ag_call(sc, OD_OPID_index_add, 5, T(ag_zeros(sc, &z)), od_int(d), T(m), T(cur), od_int(1));
    }
    SET(0, cur);
}
OD_BW(ReflectionPad1DBackward0) { pad_backward(n, g, gin, need, sc, 1, true); }
OD_BW(ReflectionPad2DBackward0) { pad_backward(n, g, gin, need, sc, 2, true); }
OD_BW(ReflectionPad3DBackward0) { pad_backward(n, g, gin, need, sc, 3, true); }
OD_BW(ReplicationPad1DBackward0) { pad_backward(n, g, gin, need, sc, 1, false); }
OD_BW(ReplicationPad2DBackward0) { pad_backward(n, g, gin, need, sc, 2, false); }
OD_BW(ReplicationPad3DBackward0) { pad_backward(n, g, gin, need, sc, 3, false); }

/* ---- scatters.c's composites ---- */
/* zeros of src's shape in grad's dtype */
static od_tensor *zeros_of_input(ag_scope *sc, od_node *n, int k, od_tensor *grad)
{
    ag_tmeta m = n->in_meta[k];
    m.dtype = grad->dtype;
    return ag_zeros(sc, &m);
}
/* self: grad with the slice zeroed; src: grad's slice */
OD_BW(SliceScatterBackward0)
{
    int k = ag_in(n, 1);
    if (need[0] && k >= 0)
        SET(0, ag_call(sc, OD_OPID_slice_scatter, 6, T(g[0]), T(zeros_of_input(sc, n, k, g[0])), n->args[2],
                       n->args[3], n->args[4], n->args[5]));
    if (k >= 0 && need[k])
        SET(k, ag_call(sc, OD_OPID_slice_Tensor, 5, T(g[0]), n->args[2], n->args[3], n->args[4], n->args[5]));
}
OD_BW(SelectScatterBackward0)
{
    int k = ag_in(n, 1);
    if (need[0] && k >= 0)
        SET(0, ag_call(sc, OD_OPID_select_scatter, 4, T(g[0]), T(zeros_of_input(sc, n, k, g[0])), n->args[2],
                       n->args[3]));
    if (k >= 0 && need[k])
        SET(k, ag_call(sc, OD_OPID_select_int, 3, T(g[0]), n->args[2], n->args[3]));
}
/* the opposite turn */
OD_BW(Rot90Backward0)
{
    SET(0, ag_call(sc, OD_OPID_rot90, 3, T(g[0]), od_int(-num(ag_arg(n, 1))), n->args[2]));
}
/* self: grad where the mask is unset; source: grad's masked elements in
 * order, padded with zeros to source's numel, in source's shape */
OD_BW(MaskedScatterBackward0)
{
    od_tensor *mask = ix_bool_mask(sc, ag_saved(sc, n, 1));
    SET(0, ag_where0(sc, mask, g[0], false));
    int k = ag_in(n, 2);
    if (k < 0 || !need[k])
        return;
    const ag_tmeta *src = &n->in_meta[k];
    int64_t numel = 1;
    for (int i = 0; i < src->ndim; i++)
        numel *= src->sizes[i];
    od_tensor *sel = ag_call(sc, OD_OPID_masked_select, 2, T(g[0]), T(mask));
    if (sel && numel > od_tensor_numel(sel)) {
        int64_t pad[2] = {0, numel - od_tensor_numel(sel)};
        sel = ag_call(sc, OD_OPID_constant_pad_nd, 3, T(sel), od_list_v(OD_T_INT_LIST, pad, 2), od_int(0));
    }
    SET(k, ag_reshape(sc, sel, src->sizes, src->ndim));
}
/* self: grad (accumulate) or grad with the put positions zeroed; source:
 * grad taken at index, in source's shape */
OD_BW(PutBackward0)
{
    int k = ag_in(n, 2);
    bool acc = n->args[3].tag == OD_T_BOOL && n->args[3].u.b;
    od_tensor *index = ag_saved(sc, n, 1);
    if (need[0]) {
        if (acc) {
            SET(0, g[0]);
        } else if (k >= 0) {
            SET(0, ag_call(sc, OD_OPID_put, 4, T(g[0]), T(index), T(zeros_of_input(sc, n, k, g[0])), od_bool(false)));
        }
    }
    if (k >= 0 && need[k])
        SET(k, ag_reshape(sc, ag_call(sc, OD_OPID_take, 2, T(g[0]), T(index)), n->in_meta[k].sizes,
                          n->in_meta[k].ndim));
}

/* ---- lerp, addcmul, addcdiv, nextafter ---------------------------------------------- */

OD_BW(LerpBackward0) /* lerp.Scalar: grad * (1 - weight), grad * weight */
{
    double w = num(ag_arg(n, 2));
    SET(ag_in(n, 0), ag_muls(sc, g[0], 1 - w));
    SET(ag_in(n, 1), ag_muls(sc, g[0], w));
}
OD_BW(LerpBackward1) /* lerp.Tensor: and grad * (end - self) for weight */
{
    int ks = ag_in(n, 0), ke = ag_in(n, 1), kw = ag_in(n, 2);
    od_tensor *w = (ks >= 0 && need[ks]) || (ke >= 0 && need[ke]) ? ag_saved(sc, n, 2) : NULL;
    if (ks >= 0 && need[ks])
        SET(ks, ag_mul(sc, g[0], ag_adds(sc, ag_neg(sc, w), 1)));
    if (ke >= 0 && need[ke])
        SET(ke, ag_mul(sc, g[0], w));
    if (kw >= 0 && need[kw])
        SET(kw, ag_mul(sc, g[0], ag_sub(sc, ag_saved(sc, n, 1), ag_saved(sc, n, 0))));
}
OD_BW(AddcmulBackward0) /* self: grad; t1: grad * t2 * value; t2: grad * t1 * value */
{
    double v = num(ag_arg(n, 3));
    int k1 = ag_in(n, 1), k2 = ag_in(n, 2);
    SET(ag_in(n, 0), g[0]);
    if (k1 >= 0 && need[k1])
        SET(k1, ag_mul(sc, g[0], ag_muls(sc, ag_saved(sc, n, 2), v)));
    if (k2 >= 0 && need[k2])
        SET(k2, ag_mul(sc, g[0], ag_muls(sc, ag_saved(sc, n, 1), v)));
}
OD_BW(AddcdivBackward0) /* t1: grad * (value / t2); t2: -grad * ((value * t1) / (t2 * t2)) */
{
    double v = num(ag_arg(n, 3));
    int k1 = ag_in(n, 1), k2 = ag_in(n, 2);
    SET(ag_in(n, 0), g[0]);
    if (k1 >= 0 && need[k1])
        SET(k1, ag_div(sc, ag_muls(sc, g[0], v), ag_saved(sc, n, 2)));
    if (k2 >= 0 && need[k2]) {
        od_tensor *t2 = ag_saved(sc, n, 2);
        SET(k2, ag_mul(sc, ag_neg(sc, g[0]), ag_div(sc, ag_muls(sc, ag_saved(sc, n, 1), v), ag_mul(sc, t2, t2))));
    }
}
OD_BW(NextafterBackward0) /* torch 1.13: not_implemented("nextafter") */
{
    fail(sc, od_error_set(sc->err, OD_ENOKERNEL, "the derivative for 'nextafter' is not implemented."));
}

/* ---- norms (norm_backward), median, nanmedian, mode ---------------------------------------- */

/* p_arg: p (None = 2); dim_arg / keep_arg: -1 for every dim, no keepdim;
 * to_grad: self.to(grad.scalar_type()) first (the dtype overloads). */
static void norm_bw(od_node *n, od_tensor *const *g, od_tensor **gin, const bool *need, ag_scope *sc, int dim_arg,
                    int keep_arg, bool to_grad)
{
    const ag_tmeta *in = &n->in_meta[0];
    const od_value *pv = ag_arg(n, 1);
    double p = pv->tag == OD_T_NONE ? 2.0 : num(pv);
    int64_t dims[OD_MAX_DIMS];
    int nd = dims_of(dim_arg >= 0 ? ag_arg(n, dim_arg) : &(od_value){OD_T_NONE, {0}}, in->ndim, dims);
    bool keepdim = keep_arg >= 0 && ag_arg(n, keep_arg)->u.b;
    if (p == 0) {
        SET(0, ag_zeros(sc, in));
        return;
    }
    od_tensor *x = ag_saved(sc, n, 0);
    if (to_grad && x && x->dtype != g[0]->dtype)
        x = ag_to(sc, x, g[0]->dtype, g[0]->device);
    od_tensor *gu = restore_dims(sc, g[0], in, dims, nd, keepdim);
    od_tensor *ru = restore_dims(sc, ag_saved_out(sc, n, 0), in, dims, nd, keepdim);
    od_tensor *sg = ag_unary(sc, OD_OPID_sgn, x);
    od_tensor *r;
    if (p == 1) {
        r = ag_mul(sc, sg, gu);
    } else if (p == 2) {
        r = ag_mul(sc, gu, ag_where0(sc, ag_cmps(sc, OD_OPID_eq_Scalar, ru, 0), ag_div(sc, x, ru), false));
    } else if (isinf(p)) {
        od_tensor *xa = ag_unary(sc, OD_OPID_abs, x);
        od_tensor *mask = ag_call(sc, OD_OPID_logical_or, 2, T(ag_cmp(sc, OD_OPID_eq_Tensor, xa, ru)),
                                  T(ag_unary(sc, OD_OPID_isnan, xa)));
        od_tensor *maskf = mask ? ag_to(sc, mask, g[0]->dtype, g[0]->device) : NULL;
        od_tensor *cnt = ag_sum_dims(sc, maskf, dims, nd, true);
        r = ag_mul(sc, sg, ag_mul(sc, ag_div(sc, gu, cnt), maskf));
    } else {
        od_tensor *xa = ag_unary(sc, OD_OPID_abs, x);
        od_tensor *pw = ag_call(sc, OD_OPID_pow_Tensor_Scalar, 2, T(xa), od_double(p < 2 ? p - 1 : p - 2));
        if (p < 1) {
            od_tensor *ss = ag_mul(sc, sg, ag_where0(sc, ag_cmps(sc, OD_OPID_eq_Scalar, x, 0), pw, false));
            r = ag_mul(sc, ag_mul(sc, ss, gu), ag_call(sc, OD_OPID_pow_Tensor_Scalar, 2, T(ru), od_double(1 - p)));
        } else {
            od_tensor *ss = ag_mul(sc, p < 2 ? sg : x, pw);
            od_tensor *sv = ag_div(sc, gu, ag_call(sc, OD_OPID_pow_Tensor_Scalar, 2, T(ru), od_double(p - 1)));
            sv = ag_where0(sc, ag_cmps(sc, OD_OPID_eq_Scalar, ru, 0), sv, false);
            r = ag_mul(sc, ss, sv);
        }
    }
    SET(0, r);
}
OD_BW(NormBackward0) { norm_bw(n, g, gin, need, sc, -1, -1, false); }
OD_BW(NormBackward1) { norm_bw(n, g, gin, need, sc, 2, 3, false); }
OD_BW(NormBackward2) { norm_bw(n, g, gin, need, sc, -1, -1, true); }
OD_BW(NormBackward3) { norm_bw(n, g, gin, need, sc, 2, 3, true); }
OD_BW(LinalgVectorNormBackward0) { norm_bw(n, g, gin, need, sc, 2, 3, false); }
OD_BW(MedianBackward0) { max_min_all_bw(n, g, gin, need, sc); }
OD_BW(NanmedianBackward0) { max_min_all_bw(n, g, gin, need, sc); }
OD_BW(MedianBackward1) { select_back(n, g, gin, need, sc, 1, 2); }
OD_BW(NanmedianBackward1) { select_back(n, g, gin, need, sc, 1, 2); }
OD_BW(ModeBackward0) { select_back(n, g, gin, need, sc, 1, 2); }


/* ---- LAPACK (derivatives.yaml 1.13, real dtypes; mH is mT) ---------------------------- */

static od_tensor *mT(ag_scope *sc, od_tensor *a) { return ag_transpose(sc, a, -2, -1); }
static od_tensor *matmul(ag_scope *sc, od_tensor *a, od_tensor *b)
{
    return ag_call(sc, OD_OPID_matmul, 2, T(a), T(b));
}
static od_tensor *unsq(ag_scope *sc, od_tensor *a, int64_t d) { return ag_call(sc, OD_OPID_unsqueeze, 2, T(a), od_int(d)); }
/* A^{-1} without raising on a singular A (inf / nan there), through linalg_inv_ex */
static od_tensor *inv_nothrow(ag_scope *sc, od_tensor *A) { return ag_call(sc, OD_OPID_linalg_inv_ex, 2, T(A), od_bool(false)); }

/* inverse: -A^{-H} grad A^{-H} */
OD_BW(LinalgInvExBackward0)
{
    if (!g[0])
        return;
    od_tensor *Xt = mT(sc, ag_saved_out(sc, n, 0));
    SET(0, ag_neg(sc, matmul(sc, Xt, matmul(sc, g[0], Xt))));
}

/* det: grad * det * A^{-H} (linalg_det_backward's invertible branch; a
 * singular A gives inf / nan here, where ATen takes an SVD path) */
OD_BW(LinalgDetBackward0)
{
    if (!g[0])
        return;
    od_tensor *d = ag_mul(sc, g[0], ag_saved_out(sc, n, 0));
    SET(0, ag_mul(sc, unsq(sc, unsq(sc, d, -1), -1), mT(sc, inv_nothrow(sc, ag_saved(sc, n, 0)))));
}

/* slogdet: grad_logabsdet * A^{-H} (the sign's gradient is zero for real A) */
OD_BW(LinalgSlogdetBackward0)
{
    if (!g[1])
        return;
    SET(0, ag_mul(sc, unsq(sc, unsq(sc, g[1], -1), -1), mT(sc, inv_nothrow(sc, ag_saved(sc, n, 0)))));
}

static od_tensor *solve_tri(ag_scope *sc, od_tensor *A, od_tensor *B, bool upper, bool left)
{
    return ag_call(sc, OD_OPID_linalg_solve_triangular, 5, T(A), T(B), od_bool(upper), od_bool(left), od_bool(false));
}

/* cholesky_backward (Iain Murray, arXiv 1602.07527), as ATen 1.13 writes it */
OD_BW(LinalgCholeskyExBackward0)
{
    if (!g[0])
        return;
    od_tensor *L = ag_saved_out(sc, n, 0), *gL = g[0];
    if (ag_arg(n, 1)->tag == OD_T_BOOL && ag_arg(n, 1)->u.b) {
        L = mT(sc, L);
        gL = mT(sc, gL);
    }
    od_tensor *gA = ag_call(sc, OD_OPID_tril, 2, T(matmul(sc, mT(sc, L), gL)), od_int(0));
    gA = ag_muls(sc, ag_add(sc, gA, mT(sc, ag_call(sc, OD_OPID_tril, 2, T(gA), od_int(-1)))), 0.5);
    gA = solve_tri(sc, mT(sc, L), gA, true, true);
    SET(0, solve_tri(sc, L, gA, false, false));
}

/* linalg_solve_backward: left, gB = A^{-H} gX and gA = -gB X^H; right,
 * gB = gX A^{-H} and gA = -X^H gB (the vector case as a column) */
OD_BW(LinalgSolveExBackward0)
{
    if (!g[0])
        return;
    bool left = !(ag_arg(n, 2)->tag == OD_T_BOOL && !ag_arg(n, 2)->u.b);
    od_tensor *A = ag_saved(sc, n, 0);
    od_tensor *gB = ag_call(sc, OD_OPID_linalg_solve, 3, T(mT(sc, A)), T(g[0]), od_bool(left));
    if (need[1])
        SET(1, gB);
    if (!need[0])
        return;
    const ag_tmeta *a = &n->in_meta[0], *b = &n->in_meta[1];
    bool vec = b->ndim == 1 ||
               (b->ndim == a->ndim - 1 && !memcmp(a->sizes, b->sizes, (size_t)b->ndim * sizeof(int64_t)));
    od_tensor *X = ag_saved_out(sc, n, 0);
    if (vec)
        SET(0, ag_neg(sc, matmul(sc, unsq(sc, gB, -1), mT(sc, unsq(sc, X, -1)))));
    else
        SET(0, ag_neg(sc, left ? matmul(sc, gB, mT(sc, X)) : matmul(sc, mT(sc, X), gB)));
}

static od_tensor *narrow_(ag_scope *sc, od_tensor *a, int64_t d, int64_t start, int64_t len)
{
    return ag_call(sc, OD_OPID_slice_Tensor, 5, T(a), od_int(d), od_int(start), od_int(start + len), od_int(1));
}
static od_tensor *tri(ag_scope *sc, od_opid id, od_tensor *a, int64_t k) { return ag_call(sc, id, 2, T(a), od_int(k)); }
static od_tensor *diag_embed(ag_scope *sc, od_tensor *v)
{
    return ag_call(sc, OD_OPID_diag_embed, 4, T(v), od_int(0), od_int(-2), od_int(-1));
}
/* a - a^T */
static od_tensor *skew(ag_scope *sc, od_tensor *a) { return ag_sub(sc, a, mT(sc, a)); }
/* v_j - v_i at (i, j), with 1 on the diagonal (the E of ATen's svd/eig
 * backwards: only ever a divisor of something zero there) */
static od_tensor *gaps(ag_scope *sc, od_tensor *v)
{
    od_tensor *e = ag_sub(sc, unsq(sc, v, -2), unsq(sc, v, -1));
    return ag_add(sc, e, diag_embed(sc, ag_adds(sc, ag_muls(sc, v, 0.0), 1.0)));
}

/* linalg_solve_triangular_backward: gB = A^{-H} gX (A^H's triangle, the same
 * unitriangular), gA = -gB X^H (left) or -X^H gB, cut to A's triangle */
OD_BW(LinalgSolveTriangularBackward0)
{
    if (!g[0])
        return;
    bool upper = ag_arg(n, 2)->tag == OD_T_BOOL && ag_arg(n, 2)->u.b;
    bool left = !(ag_arg(n, 3)->tag == OD_T_BOOL && !ag_arg(n, 3)->u.b);
    bool unit = ag_arg(n, 4)->tag == OD_T_BOOL && ag_arg(n, 4)->u.b;
    od_tensor *A = ag_saved(sc, n, 0);
    od_tensor *gB = ag_call(sc, OD_OPID_linalg_solve_triangular, 5, T(mT(sc, A)), T(g[0]), od_bool(!upper),
                            od_bool(left), od_bool(unit));
    SET(1, gB);
    if (!need[0])
        return;
    od_tensor *Xt = mT(sc, ag_saved_out(sc, n, 0));
    od_tensor *gA = ag_neg(sc, left ? matmul(sc, gB, Xt) : matmul(sc, Xt, gB));
    SET(0, upper ? tri(sc, OD_OPID_triu, gA, unit ? 1 : 0) : tri(sc, OD_OPID_tril, gA, unit ? -1 : 0));
}

/* linalg_eig_backward(is_hermitian): gA = V (skew(V^H gV)/2 / E + diag(gL)) V^H,
 * E_ij = L_j - L_i; eigenvalues only: V diag(gL) V^H */
OD_BW(LinalgEighBackward0)
{
    if (!g[0] && !g[1])
        return;
    od_tensor *L = ag_saved_out(sc, n, 0), *V = ag_saved_out(sc, n, 1);
    if (!failed(sc) && V && od_tensor_numel(V) == 0 && L && od_tensor_numel(L) > 0) {
        sc->st = od_error_set(sc->err, OD_EINVAL,
                              "linalg_eigh_backward: The derivative of linalg.eigh depends on the eigenvectors, which were not computed (compute_v=False)");
        return;
    }
    if (!g[1]) {
        SET(0, matmul(sc, ag_mul(sc, V, unsq(sc, g[0], -2)), mT(sc, V)));
        return;
    }
    od_tensor *gA = ag_muls(sc, skew(sc, matmul(sc, mT(sc, V), g[1])), 0.5);
    gA = ag_div(sc, gA, gaps(sc, L));
    if (g[0])
        gA = ag_add(sc, gA, diag_embed(sc, g[0]));
    SET(0, matmul(sc, V, matmul(sc, gA, mT(sc, V))));
}

/* svd_backward (ATen 1.13) on the first min(m, n) columns of U / rows of Vh
 * (full_matrices narrows them, as derivatives.yaml does) */
OD_BW(LinalgSvdBackward0)
{
    if (!g[0] && !g[1] && !g[2])
        return;
    bool full = ag_arg(n, 1)->tag == OD_T_BOOL && ag_arg(n, 1)->u.b;
    od_tensor *U = ag_saved_out(sc, n, 0), *S = ag_saved_out(sc, n, 1), *Vh = ag_saved_out(sc, n, 2);
    if (failed(sc))
        return;
    od_tensor *gU = g[0], *gS = g[1], *gVh = g[2];
    const ag_tmeta *a = &n->in_meta[0];
    int64_t m = a->sizes[a->ndim - 2], nn = a->sizes[a->ndim - 1], k = m < nn ? m : nn;
    if ((gU || gVh) && od_tensor_numel(U) == 0 && m * nn > 0) {
        sc->st = od_error_set(sc->err, OD_EINVAL,
                              "svd_backward: The singular vectors in the complex case are specified up to multiplication by e^{i phi}. The specified loss function depends on this phase term, making it ill-defined.");
        return;
    }
    if (full) {
        U = narrow_(sc, U, -1, 0, k);
        Vh = narrow_(sc, Vh, -2, 0, k);
        if (gU)
            gU = narrow_(sc, gU, -1, 0, k);
        if (gVh)
            gVh = narrow_(sc, gVh, -2, 0, k);
    }
    if (!gU && !gVh) {
        SET(0, m >= nn ? matmul(sc, U, ag_mul(sc, unsq(sc, gS, -1), Vh)) : matmul(sc, ag_mul(sc, U, unsq(sc, gS, -2)), Vh));
        return;
    }
    od_tensor *S2 = ag_mul(sc, S, S), *E = gaps(sc, S2), *ret = NULL;
    if (gU)
        ret = ag_mul(sc, skew(sc, matmul(sc, mT(sc, U), gU)), unsq(sc, S, -2));
    if (gVh) {
        od_tensor *t = ag_mul(sc, unsq(sc, S, -1), skew(sc, matmul(sc, Vh, mT(sc, gVh))));
        ret = ret ? ag_add(sc, ret, t) : t;
    }
    ret = ag_div(sc, ret, E);
    if (gS)
        ret = ag_add(sc, ret, diag_embed(sc, gS));
    od_tensor *gA;
    if (m > nn && gU) {
        gA = matmul(sc, U, ret);
        od_tensor *gUSinv = ag_div(sc, gU, unsq(sc, S, -2));
        gA = ag_sub(sc, ag_add(sc, gA, gUSinv), matmul(sc, U, matmul(sc, mT(sc, U), gUSinv)));
        gA = matmul(sc, gA, Vh);
    } else if (m < nn && gVh) {
        gA = matmul(sc, ret, Vh);
        od_tensor *SinvgVh = ag_div(sc, gVh, unsq(sc, S, -1));
        gA = ag_sub(sc, ag_add(sc, gA, SinvgVh), matmul(sc, matmul(sc, SinvgVh, mT(sc, Vh)), Vh));
        gA = matmul(sc, U, gA);
    } else {
        gA = m >= nn ? matmul(sc, U, matmul(sc, ret, Vh)) : matmul(sc, matmul(sc, U, ret), Vh);
    }
    SET(0, gA);
}

/* linalg_qr_backward for real A (mode reduced, or complete with m <= n):
 * m >= n: M = R gR^T - gQ^T Q, gA = (gQ + Q copyltu(M)) R^{-T};
 * m < n, A = Q [X | Y], R = [U | V]: gX is that formula with U and
 * gQ + Y gV^T, gY = Q gV */
static od_tensor *qr_square_deep(ag_scope *sc, od_tensor *Q, od_tensor *R, od_tensor *gQ, od_tensor *gR)
{
    od_tensor *M = NULL;
    if (gR)
        M = matmul(sc, R, mT(sc, gR));
    if (gQ) {
        od_tensor *t = matmul(sc, mT(sc, gQ), Q);
        M = M ? ag_sub(sc, M, t) : ag_neg(sc, t);
    }
    od_tensor *cl = ag_add(sc, tri(sc, OD_OPID_tril, M, 0), mT(sc, tri(sc, OD_OPID_tril, M, -1)));
    od_tensor *b = matmul(sc, Q, cl);
    if (gQ)
        b = ag_add(sc, b, gQ);
    /* b R^{-T}: X R^T = b, R^T lower */
    return solve_tri(sc, mT(sc, R), b, false, false);
}

OD_BW(LinalgQrBackward0)
{
    if (!g[0] && !g[1])
        return;
    const char *mode = ag_arg(n, 1)->tag == OD_T_STRING ? ag_arg(n, 1)->u.s : "reduced";
    const ag_tmeta *a = &n->in_meta[0];
    int64_t m = a->sizes[a->ndim - 2], nn = a->sizes[a->ndim - 1];
    if (!strcmp(mode, "r")) {
        sc->st = od_error_set(sc->err, OD_EINVAL,
                              "The derivative of linalg.qr depends on Q, which is not computed when mode='r'. Please use linalg.qr(A, mode='reduced') if you are going to differentiate through linalg.qr.");
        return;
    }
    if (!strcmp(mode, "complete") && m > nn) {
        sc->st = od_error_set(sc->err, OD_EINVAL, "The QR decomposition is not differentiable when mode='complete' and nrows > ncols.");
        return;
    }
    od_tensor *Q = ag_saved_out(sc, n, 0), *R = ag_saved_out(sc, n, 1);
    if (m >= nn) {
        SET(0, qr_square_deep(sc, Q, R, g[0], g[1]));
        return;
    }
    od_tensor *U = narrow_(sc, R, -1, 0, m), *gU = g[1] ? narrow_(sc, g[1], -1, 0, m) : NULL;
    od_tensor *gV = g[1] ? narrow_(sc, g[1], -1, m, nn - m) : NULL;
    od_tensor *gQ = g[0];
    if (gV) {
        od_tensor *Y = narrow_(sc, ag_saved(sc, n, 0), -1, m, nn - m);
        od_tensor *t = matmul(sc, Y, mT(sc, gV));
        gQ = gQ ? ag_add(sc, gQ, t) : t;
    }
    od_tensor *gX = qr_square_deep(sc, Q, U, gQ, gU);
    od_tensor *gY = gV ? matmul(sc, Q, gV) : ag_muls(sc, narrow_(sc, ag_saved(sc, n, 0), -1, m, nn - m), 0.0);
    if (failed(sc))
        return;
    od_tensor *parts[2] = {gX, gY};
    SET(0, ag_call(sc, OD_OPID_cat, 2, od_list_v(OD_T_TENSOR_LIST, parts, 2), od_int(-1)));
}

/* ---- batch norm and group norm ------------------------------------------------------ */

/* Calls built-in id and keeps its (up to) three returns in the scope; a None
 * return is NULL. */
static void call3(ag_scope *sc, od_opid id, od_value *a, int na, od_tensor *out[3])
{
    out[0] = out[1] = out[2] = NULL;
    if (failed(sc))
        return;
    od_stack r;
    od_status st = od_call_builtin(id, a, na, &r, sc->err);
    if (st) {
        fail(sc, st);
        return;
    }
    for (int i = 0; i < 3 && i < r.nrets; i++)
        if (r.rets[i].tag == OD_T_TENSOR && r.rets[i].u.t) {
            out[i] = keep_new(sc, r.rets[i].u.t);
            r.rets[i] = od_none();
        }
    od_stack_release_rets(&r);
}

/* derivatives.yaml: native_batch_norm_backward(grad, input, weight,
 * running_mean, running_var, result1, result2, training, eps, mask). The
 * running statistics only matter in evaluation (training's backward reads
 * the saved ones), so only then are they read back. */
OD_BW(NativeBatchNormBackward0)
{
    if (!g[0])
        return;
    int kw = ag_in(n, 1), kb = ag_in(n, 2);
    bool train = ag_arg(n, 5)->tag == OD_T_BOOL ? ag_arg(n, 5)->u.b : ag_arg(n, 5)->u.i != 0;
    bool mask[3] = {need[0], kw >= 0 && need[kw], kb >= 0 && need[kb]};
    od_tensor *x = ag_saved(sc, n, 0), *w = kw >= 0 ? ag_saved(sc, n, 1) : NULL;
    od_tensor *rm = !train && ag_arg(n, 3)->tag == OD_T_TENSOR ? ag_saved(sc, n, 3) : NULL;
    od_tensor *rv = !train && ag_arg(n, 4)->tag == OD_T_TENSOR ? ag_saved(sc, n, 4) : NULL;
    od_tensor *sm = train ? ag_saved_out(sc, n, 1) : NULL, *si = train ? ag_saved_out(sc, n, 2) : NULL;
    if (failed(sc))
        return;
    od_value a[10] = {T(g[0]), T(x), w ? T(w) : od_none(), rm ? T(rm) : od_none(), rv ? T(rv) : od_none(),
                      sm ? T(sm) : od_none(), si ? T(si) : od_none(), od_bool(train), *ag_arg(n, 7),
                      od_list_v(OD_T_BOOL_LIST, mask, 3)};
    od_tensor *r[3];
    call3(sc, OD_OPID_native_batch_norm_backward, a, 10, r);
    SET(0, r[0]);
    SET(kw, r[1]);
    SET(kb, r[2]);
}

/* derivatives.yaml: native_group_norm_backward(grad, input, result1, result2,
 * weight, N, C, HxW, group, mask). */
OD_BW(NativeGroupNormBackward0)
{
    if (!g[0])
        return;
    int kw = ag_in(n, 1), kb = ag_in(n, 2);
    bool mask[3] = {need[0], kw >= 0 && need[kw], kb >= 0 && need[kb]};
    od_tensor *x = ag_saved(sc, n, 0), *w = kw >= 0 ? ag_saved(sc, n, 1) : NULL;
    od_tensor *mean = ag_saved_out(sc, n, 1), *rstd = ag_saved_out(sc, n, 2);
    if (failed(sc))
        return;
    od_value a[10] = {T(g[0]), T(x), T(mean), T(rstd), w ? T(w) : od_none(), *ag_arg(n, 3), *ag_arg(n, 4),
                      *ag_arg(n, 5), *ag_arg(n, 6), od_list_v(OD_T_BOOL_LIST, mask, 3)};
    od_tensor *r[3];
    call3(sc, OD_OPID_native_group_norm_backward, a, 10, r);
    SET(0, r[0]);
    SET(kw, r[1]);
    SET(kb, r[2]);
}
/* ---- losses: the native backward operators of derivatives.yaml ------------------------ */

static void nll_grad(od_node *n, od_tensor *const *g, od_tensor **gin, const bool *need, ag_scope *sc, od_opid bw)
{
    if (!g[0] || !need[0])
        return; /* total_weight carries no gradient back; target and weight take none */
    od_tensor *w = ag_arg(n, 2)->tag == OD_T_TENSOR ? ag_saved(sc, n, 2) : NULL;
    SET(0, ag_call(sc, bw, 7, T(g[0]), T(ag_saved(sc, n, 0)), T(ag_saved(sc, n, 1)), w ? T(w) : od_none(),
                   *ag_arg(n, 3), *ag_arg(n, 4), T(ag_saved_out(sc, n, 1))));
}
OD_BW(NllLossBackward0) { nll_grad(n, g, gin, need, sc, OD_OPID_nll_loss_backward); }
OD_BW(NllLoss2DBackward0) { nll_grad(n, g, gin, need, sc, OD_OPID_nll_loss2d_backward); }
OD_BW(MseLossBackward0)
{
    od_value red = *ag_arg(n, 2);
    od_tensor *x = ag_saved(sc, n, 0), *t = ag_saved(sc, n, 1);
    if (need[0])
        SET(0, ag_call(sc, OD_OPID_mse_loss_backward, 4, T(g[0]), T(x), T(t), red));
    int kt = ag_in(n, 1);
    if (kt >= 0 && need[kt])
        SET(kt, ag_call(sc, OD_OPID_mse_loss_backward, 4, T(g[0]), T(t), T(x), red));
}
static void sl1_huber(od_node *n, od_tensor *const *g, od_tensor **gin, const bool *need, ag_scope *sc, od_opid bw)
{
    od_value red = *ag_arg(n, 2), p = *ag_arg(n, 3);
    od_tensor *x = ag_saved(sc, n, 0), *t = ag_saved(sc, n, 1);
    if (need[0])
        SET(0, ag_call(sc, bw, 5, T(g[0]), T(x), T(t), red, p));
    int kt = ag_in(n, 1);
    if (kt >= 0 && need[kt])
        SET(kt, ag_call(sc, bw, 5, T(g[0]), T(t), T(x), red, p));
}
OD_BW(SmoothL1LossBackward0) { sl1_huber(n, g, gin, need, sc, OD_OPID_smooth_l1_loss_backward); }
OD_BW(HuberLossBackward0) { sl1_huber(n, g, gin, need, sc, OD_OPID_huber_loss_backward); }
/* bce, bce_with_logits, soft_margin, glu, prelu: derivatives.yaml 1.13 (target's gradients are
 * FunctionsManual's binary_cross_entropy(_with_logits)_target_backward); weight and pos_weight take none */
static od_tensor *opt_saved(ag_scope *sc, od_node *n, int i)
{
    return ag_arg(n, i)->tag == OD_T_TENSOR ? ag_saved(sc, n, i) : NULL;
}
/* r (* weight) * grad, / numel for a mean */
static od_tensor *weighted_grad(ag_scope *sc, od_tensor *r, od_tensor *w, od_tensor *g, int64_t reduction,
                                int64_t numel)
{
    if (w)
        r = ag_mul(sc, r, w);
    r = ag_mul(sc, r, g);
    return reduction == 1 ? ag_call(sc, OD_OPID_div_Scalar, 2, T(r), od_int(numel)) : r;
}
OD_BW(BinaryCrossEntropyBackward0)
{
    od_tensor *x = ag_saved(sc, n, 0), *t = ag_saved(sc, n, 1), *w = opt_saved(sc, n, 2);
    if (failed(sc))
        return;
    SET(ag_in(n, 0), ag_call(sc, OD_OPID_binary_cross_entropy_backward, 5, T(g[0]), T(x), T(t), w ? T(w) : od_none(),
                             *ag_arg(n, 3)));
    int kt = ag_in(n, 1);
    if (kt >= 0 && need[kt])
        SET(kt, weighted_grad(sc, ag_neg(sc, ag_call(sc, OD_OPID_logit, 2, T(x), od_none())), w, g[0],
                              ag_arg(n, 3)->u.i, od_tensor_numel(t)));
}
OD_BW(BinaryCrossEntropyWithLogitsBackward0)
{
    od_tensor *x = ag_saved(sc, n, 0), *t = ag_saved(sc, n, 1), *w = opt_saved(sc, n, 2), *pw = opt_saved(sc, n, 3);
    if (failed(sc))
        return;
    int64_t red = ag_arg(n, 4)->u.i;
    int kx = ag_in(n, 0), kt = ag_in(n, 1);
    if (kx >= 0 && need[kx]) {
        od_tensor *r;
        if (pw) {
            od_tensor *pt = ag_mul(sc, pw, t);
            r = ag_sub(sc, ag_mul(sc, ag_sub(sc, ag_adds(sc, pt, 1), t), ag_unary(sc, OD_OPID_sigmoid, x)), pt);
        } else {
            r = ag_sub(sc, ag_unary(sc, OD_OPID_sigmoid, x), t);
        }
        SET(kx, weighted_grad(sc, r, w, g[0], red, od_tensor_numel(x)));
    }
    if (kt >= 0 && need[kt]) {
        od_tensor *r = pw ? ag_sub(sc, ag_unary(sc, OD_OPID_log_sigmoid, ag_neg(sc, x)),
                                   ag_mul(sc, ag_unary(sc, OD_OPID_log_sigmoid, x), pw))
                          : ag_neg(sc, x);
        SET(kt, weighted_grad(sc, r, w, g[0], red, od_tensor_numel(t)));
    }
}
OD_BW(SoftMarginLossBackward0)
{
    SET(ag_in(n, 0), ag_call(sc, OD_OPID_soft_margin_loss_backward, 4, T(g[0]), T(ag_saved(sc, n, 0)),
                             T(ag_saved(sc, n, 1)), *ag_arg(n, 2)));
}
OD_BW(GluBackward0) { SET(0, ag_call(sc, OD_OPID_glu_backward, 3, T(g[0]), T(ag_saved(sc, n, 0)), *ag_arg(n, 1))); }
OD_BW(PreluBackward0)
{
    od_value a[3] = {T(g[0]), T(ag_saved(sc, n, 0)), T(ag_saved(sc, n, 1))};
    od_tensor *r[3];
    call3(sc, OD_OPID_prelu_backward, a, 3, r);
    SET(ag_in(n, 0), r[0]);
    SET(ag_in(n, 1), r[1]);
}
/* ---- pooling: ATen's native backward ops (shape_pool.c), as derivatives.yaml calls them ---- */
static void max_pool_backward(od_node *n, od_tensor *const *g, od_tensor **gin, const bool *need, ag_scope *sc,
                              od_opid bw)
{
    if (!g[0])
        return; /* indices carry no gradient */
    SET(0, ag_call(sc, bw, 8, T(g[0]), T(ag_saved(sc, n, 0)), *ag_arg(n, 1), *ag_arg(n, 2), *ag_arg(n, 3),
                   *ag_arg(n, 4), *ag_arg(n, 5), T(ag_saved_out(sc, n, 1))));
}
OD_BW(MaxPool2DWithIndicesBackward0) { max_pool_backward(n, g, gin, need, sc, OD_OPID_max_pool2d_with_indices_backward); }
OD_BW(MaxPool3DWithIndicesBackward0) { max_pool_backward(n, g, gin, need, sc, OD_OPID_max_pool3d_with_indices_backward); }
static void avg_pool_backward(od_node *n, od_tensor *const *g, od_tensor **gin, const bool *need, ag_scope *sc,
                              od_opid bw)
{
    SET(0, ag_call(sc, bw, 8, T(g[0]), T(ag_saved(sc, n, 0)), *ag_arg(n, 1), *ag_arg(n, 2), *ag_arg(n, 3),
                   *ag_arg(n, 4), *ag_arg(n, 5), *ag_arg(n, 6)));
}
OD_BW(AvgPool2DBackward0) { avg_pool_backward(n, g, gin, need, sc, OD_OPID_avg_pool2d_backward); }
OD_BW(AvgPool3DBackward0) { avg_pool_backward(n, g, gin, need, sc, OD_OPID_avg_pool3d_backward); }
OD_BW(AdaptiveAvgPool2DBackward0) { SET(0, ag_call(sc, OD_OPID__adaptive_avg_pool2d_backward, 2, T(g[0]), T(ag_saved(sc, n, 0)))); }
OD_BW(AdaptiveAvgPool3DBackward0) { SET(0, ag_call(sc, OD_OPID__adaptive_avg_pool3d_backward, 2, T(g[0]), T(ag_saved(sc, n, 0)))); }
static void adaptive_max_backward(od_node *n, od_tensor *const *g, od_tensor **gin, const bool *need, ag_scope *sc,
                                  od_opid bw)
{
    if (!g[0])
        return;
    SET(0, ag_call(sc, bw, 3, T(g[0]), T(ag_saved(sc, n, 0)), T(ag_saved_out(sc, n, 1))));
}
OD_BW(AdaptiveMaxPool2DBackward0) { adaptive_max_backward(n, g, gin, need, sc, OD_OPID_adaptive_max_pool2d_backward); }
OD_BW(AdaptiveMaxPool3DBackward0) { adaptive_max_backward(n, g, gin, need, sc, OD_OPID_adaptive_max_pool3d_backward); }

/* ---- upsampling: the native _backward ops (shape_resample.c) with self's sizes as input_size ---- */
static void upsample_backward(od_node *n, od_tensor *const *g, od_tensor **gin, const bool *need, ag_scope *sc,
                              od_opid bw, int nrest)
{
    const ag_tmeta *in = &n->in_meta[0];
    od_value a[8];
    for (int i = 0; i < 8; i++)
        a[i] = od_none();
    a[0] = T(g[0]);
    a[1] = *ag_arg(n, 1);
    a[2] = od_list_v(OD_T_INT_LIST, (void *)in->sizes, (size_t)in->ndim);
    for (int i = 0; i < nrest; i++)
        a[3 + i] = *ag_arg(n, 2 + i);
    SET(0, ag_call(sc, bw, 3 + nrest, a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]));
}
OD_BW(UpsampleNearest1DBackward0) { upsample_backward(n, g, gin, need, sc, OD_OPID_upsample_nearest1d_backward, 1); }
OD_BW(UpsampleNearest1DBackward1) { upsample_backward(n, g, gin, need, sc, OD_OPID_upsample_nearest1d_backward_vec, 1); }
OD_BW(UpsampleNearest2DBackward0) { upsample_backward(n, g, gin, need, sc, OD_OPID_upsample_nearest2d_backward, 2); }
OD_BW(UpsampleNearest2DBackward1) { upsample_backward(n, g, gin, need, sc, OD_OPID_upsample_nearest2d_backward_vec, 1); }
OD_BW(UpsampleNearest3DBackward0) { upsample_backward(n, g, gin, need, sc, OD_OPID_upsample_nearest3d_backward, 3); }
OD_BW(UpsampleNearest3DBackward1) { upsample_backward(n, g, gin, need, sc, OD_OPID_upsample_nearest3d_backward_vec, 1); }
OD_BW(UpsampleLinear1DBackward0) { upsample_backward(n, g, gin, need, sc, OD_OPID_upsample_linear1d_backward, 2); }
OD_BW(UpsampleLinear1DBackward1) { upsample_backward(n, g, gin, need, sc, OD_OPID_upsample_linear1d_backward_vec, 2); }
OD_BW(UpsampleBilinear2DBackward0) { upsample_backward(n, g, gin, need, sc, OD_OPID_upsample_bilinear2d_backward, 3); }
OD_BW(UpsampleBilinear2DBackward1) { upsample_backward(n, g, gin, need, sc, OD_OPID_upsample_bilinear2d_backward_vec, 2); }
OD_BW(UpsampleTrilinear3DBackward0) { upsample_backward(n, g, gin, need, sc, OD_OPID_upsample_trilinear3d_backward, 4); }
OD_BW(UpsampleTrilinear3DBackward1) { upsample_backward(n, g, gin, need, sc, OD_OPID_upsample_trilinear3d_backward_vec, 2); }
OD_BW(UpsampleBicubic2DBackward0) { upsample_backward(n, g, gin, need, sc, OD_OPID_upsample_bicubic2d_backward, 3); }
OD_BW(UpsampleBicubic2DBackward1) { upsample_backward(n, g, gin, need, sc, OD_OPID_upsample_bicubic2d_backward_vec, 2); }
OD_BW(PixelShuffleBackward0) { SET(0, ag_call(sc, OD_OPID_pixel_unshuffle, 2, T(g[0]), *ag_arg(n, 1))); }
OD_BW(PixelUnshuffleBackward0) { SET(0, ag_call(sc, OD_OPID_pixel_shuffle, 2, T(g[0]), *ag_arg(n, 1))); }

/* ---- convolution ------------------------------------------------------------------- */

/* convolution_backward(grad, input, weight, bias sizes, stride, padding,
 * dilation, transposed, output_padding, groups, mask): one call for every
 * gradient asked for, as derivatives.yaml's ConvolutionBackward0. */
OD_BW(ConvolutionBackward0)
{
    if (!g[0])
        return;
    int kb = ag_in(n, 2);
    bool mask[3] = {need[0], need[1], kb >= 0 && need[kb]};
    od_tensor *x = ag_saved(sc, n, 0), *w = ag_saved(sc, n, 1);
    if (failed(sc))
        return;
    int64_t bsz = w->sizes[ag_arg(n, 6)->u.b ? 1 : 0];
    if (ag_arg(n, 6)->u.b)
        bsz *= ag_arg(n, 8)->u.i;
    od_value a[11] = {T(g[0]), T(x), T(w), od_list_v(OD_T_INT_LIST, &bsz, 1), *ag_arg(n, 3), *ag_arg(n, 4),
                      *ag_arg(n, 5), *ag_arg(n, 6), *ag_arg(n, 7), *ag_arg(n, 8), od_list_v(OD_T_BOOL_LIST, mask, 3)};
    od_stack r;
    od_status st = od_call_builtin(OD_OPID_convolution_backward, a, 11, &r, sc->err);
    if (st) {
        sc->st = st;
        return;
    }
    for (int k = 0; k < 3 && k < r.nrets; k++) {
        od_tensor *t = r.rets[k].tag == OD_T_TENSOR ? ag_tmp(sc, r.rets[k].u.t) : NULL;
        if (t && mask[k])
            SET(k < 2 ? k : kb, t);
    }
    od_stack_release_rets(&r);
}

/* ---- embedding_bag ------------------------------------------------------------------ */

/* derivatives.yaml's _embedding_bag: weight through _embedding_bag_backward
 * (outputs 1-3 saved), per_sample_weights through
 * _embedding_bag_per_sample_weights_backward; indices and offsets have none */
OD_BW(EmbeddingBagBackward0)
{
    if (!g[0])
        return;
    int kp = ag_in(n, 6);
    od_tensor *w = ag_saved(sc, n, 0), *ix = ag_saved(sc, n, 1), *off = ag_saved(sc, n, 2);
    od_tensor *psw = kp >= 0 ? ag_saved(sc, n, 6) : NULL;
    od_tensor *o2b = ag_saved_out(sc, n, 1), *bsz = ag_saved_out(sc, n, 2), *maxi = ag_saved_out(sc, n, 3);
    if (failed(sc))
        return;
    od_value pv = psw ? T(psw) : od_none();
    if (need[0])
        SET(0, ag_call(sc, OD_OPID__embedding_bag_backward, 12, T(g[0]), T(ix), T(off), T(o2b), T(bsz), T(maxi),
                       od_int(w->sizes[0]), *ag_arg(n, 3), *ag_arg(n, 4), *ag_arg(n, 5), pv, *ag_arg(n, 8)));
    if (kp >= 0 && need[kp])
        SET(kp, ag_call(sc, OD_OPID__embedding_bag_per_sample_weights_backward, 7, T(g[0]), T(w), T(ix), T(off),
                        T(o2b), *ag_arg(n, 4), *ag_arg(n, 8)));
}

/* ---- im2col / col2im / max_unpool (shape_fold.c): each fold's gradient is the other
 * fold; max_unpool's is max_pool_double_backward: grad gathered at the indices ---- */
OD_BW(Im2ColBackward0)
{
    if (!g[0])
        return;
    const ag_tmeta *in = &n->in_meta[0];
    int64_t os[2] = {in->sizes[in->ndim - 2], in->sizes[in->ndim - 1]};
    SET(0, ag_call(sc, OD_OPID_col2im, 6, T(g[0]), od_list_v(OD_T_INT_LIST, os, 2), *ag_arg(n, 1), *ag_arg(n, 2),
                   *ag_arg(n, 3), *ag_arg(n, 4)));
}
OD_BW(Col2ImBackward0)
{
    if (!g[0])
        return;
    SET(0, ag_call(sc, OD_OPID_im2col, 5, T(g[0]), *ag_arg(n, 2), *ag_arg(n, 3), *ag_arg(n, 4), *ag_arg(n, 5)));
}
static void max_unpool_backward(od_node *n, od_tensor *const *g, od_tensor **gin, const bool *need, ag_scope *sc,
                                int nd)
{
    if (!g[0] || !need[0])
        return;
    od_tensor *ix = ag_saved(sc, n, 1);
    if (!ix)
        return;
    int64_t sz[OD_MAX_DIMS];
    int lead = ix->ndim - nd;
    for (int d = 0; d < lead; d++)
        sz[d] = ix->sizes[d];
    sz[lead] = -1;
    od_tensor *gv = ag_reshape(sc, g[0], sz, lead + 1), *iv = ag_reshape(sc, ix, sz, lead + 1);
    od_tensor *r = gv && iv ? ag_call(sc, OD_OPID_gather, 4, T(gv), od_int(-1), T(iv), od_bool(false)) : NULL;
    SET(0, r ? ag_reshape(sc, r, ix->sizes, ix->ndim) : NULL);
}
OD_BW(MaxUnpool2DBackward0) { max_unpool_backward(n, g, gin, need, sc, 2); }
OD_BW(MaxUnpool3DBackward0) { max_unpool_backward(n, g, gin, need, sc, 3); }

/* ---- distances (shape_dist.c, composite/dist.c): derivatives.yaml's _cdist_backward for each
 * side, _pdist_backward, and _euclidean_dist_backward written with operator calls ---- */
OD_BW(CdistBackward0)
{
    if (!g[0])
        return;
    od_tensor *x1 = need[0] || need[1] ? ag_saved(sc, n, 0) : NULL, *x2 = x1 ? ag_saved(sc, n, 1) : NULL;
    od_tensor *res = x2 ? ag_saved_out(sc, n, 0) : NULL;
    if (!res)
        return;
    SET(0, ag_call(sc, OD_OPID__cdist_backward, 5, T(g[0]), T(x1), T(x2), *ag_arg(n, 2), T(res)));
    if (need[1]) {
        od_tensor *gt = ag_transpose(sc, g[0], -2, -1), *rt = ag_transpose(sc, res, -2, -1);
        SET(1, gt && rt ? ag_call(sc, OD_OPID__cdist_backward, 5, T(gt), T(x2), T(x1), *ag_arg(n, 2), T(rt)) : NULL);
    }
}
OD_BW(PdistBackward0)
{
    if (!g[0] || !need[0])
        return;
    od_tensor *x = ag_saved(sc, n, 0), *res = x ? ag_saved_out(sc, n, 0) : NULL;
    SET(0, res ? ag_call(sc, OD_OPID__pdist_backward, 4, T(g[0]), T(x), *ag_arg(n, 1), T(res)) : NULL);
}
OD_BW(EuclideanDistBackward0)
{
    if (!g[0])
        return;
    od_tensor *x1 = ag_saved(sc, n, 0), *x2 = ag_saved(sc, n, 1), *res = ag_saved_out(sc, n, 0);
    if (!x1 || !x2 || !res)
        return;
    /* ratio = grad / res, 0 where res is 0 (the subgradient there) */
    od_tensor *ratio = ag_where0(sc, ag_cmps(sc, OD_OPID_eq_Scalar, res, 0.0), ag_div(sc, g[0], res), false);
    if (!ratio)
        return;
    int64_t last = -1, row = -2;
    if (need[0]) {
        od_tensor *s1 = ag_sum_dims(sc, ratio, &last, 1, true);
        od_tensor *mm = ag_call(sc, OD_OPID_matmul, 2, T(ratio), T(x2));
        SET(0, s1 && mm ? ag_sub(sc, ag_mul(sc, x1, s1), mm) : NULL);
    }
    if (need[1]) {
        od_tensor *s2 = ag_sum_dims(sc, ratio, &row, 1, false);
        od_tensor *s2u = s2 ? ag_call(sc, OD_OPID_unsqueeze, 2, T(s2), od_int(-1)) : NULL;
        od_tensor *rt = ag_transpose(sc, ratio, -2, -1);
        od_tensor *mm = rt ? ag_call(sc, OD_OPID_matmul, 2, T(rt), T(x1)) : NULL;
        SET(1, s2u && mm ? ag_sub(sc, ag_mul(sc, x2, s2u), mm) : NULL);
    }
}

/* ---- the table ---------------------------------------------------------------------- */

#define od_bw_0 NULL
#define od_bw_NONDIFF NULL
static const ag_formula g_formulas[OD_NUM_BUILTIN_OPS] = {
#define OD_OP(id, schema, shape, cpu, cuda, cea, cia, bs, ag) [OD_OPID_##id] = od_bw_##ag,
#include "ops.def"
#undef OD_OP
};

ag_formula ag_formula_of(od_opid id) { return (unsigned)id < OD_NUM_BUILTIN_OPS ? g_formulas[id] : NULL; }

