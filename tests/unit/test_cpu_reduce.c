/* test_cpu_reduce.c — CPU sum, mean, amax, amin, argmax and var through the
 * dispatcher (od_init + od_call_builtin, so registration is exercised).
 *
 * Every check compares with a reference computed here in double precision
 * (exact uint64 arithmetic for integers) on fresh random inputs of random
 * rank (0-4), sizes (0 included), dims (negative, several, in any order),
 * keepdim, dtypes and layouts (permuted and strided views, expanded dims).
 * The seed is printed on failure; OD_TEST_SEED=<n> reruns it.
 */
#include "cpu/cpu_kernels.h"
#include "cpu_testutil.h"

#include <float.h>

TestSuite(cpu_reduce, .init = test_setup);

typedef enum { K_SUM, K_MEAN, K_AMAX, K_AMIN, K_ARGMAX, K_VAR } kind;
static const char *const KNAME[] = {"sum", "mean", "amax", "amin", "argmax", "var"};

/* One reduction call, described independently of the library. */
typedef struct rcase {
    kind k;
    int overload;         /* 0: the all-dims overload, 1: .dim / .dim_IntList, 2: var.correction */
    int ndims;            /* dims given; -1: dim=None */
    int64_t dims[OD_MAX_DIMS];
    bool keepdim;
    bool has_dtype;
    od_dtype dtype;
    bool unbiased;
    bool has_corr;
    int64_t corr;
} rcase;

static int wrapd(int64_t d, int nd) { return (int)(d < 0 ? d + (nd ? nd : 1) : d); }

static uint32_t case_mask(const rcase *c, int nd)
{
    uint32_t all = nd ? (uint32_t)((1u << nd) - 1) : 0;
    if (c->overload == 0 || c->ndims <= 0)
        return all;
    uint32_t m = 0;
    for (int i = 0; i < c->ndims; i++)
        m |= 1u << wrapd(c->dims[i], nd);
    return m & all;
}

static od_opid case_op(const rcase *c)
{
    switch (c->k) {
    case K_SUM: return c->overload ? OD_OPID_sum_dim_IntList : OD_OPID_sum;
    case K_MEAN: return c->overload ? OD_OPID_mean_dim : OD_OPID_mean;
    case K_AMAX: return OD_OPID_amax;
    case K_AMIN: return OD_OPID_amin;
    case K_ARGMAX: return OD_OPID_argmax;
    default: return c->overload == 2 ? OD_OPID_var_correction : c->overload ? OD_OPID_var_dim : OD_OPID_var;
    }
}

/* Builds the boxed arguments (dims point into c). Returns the count. */
static int case_args(rcase *c, od_tensor *x, od_value *a)
{
    od_value dimv = c->ndims < 0 ? od_none() : ilist(c->dims, c->ndims);
    od_value dt = c->has_dtype ? od_dtype_v(c->dtype) : od_none();
    a[0] = tv(x);
    switch (c->k) {
    case K_SUM:
    case K_MEAN:
        if (!c->overload) {
            a[1] = dt;
            return 2;
        }
        a[1] = dimv;
        a[2] = od_bool(c->keepdim);
        a[3] = dt;
        return 4;
    case K_AMAX:
    case K_AMIN:
        a[1] = ilist(c->dims, c->ndims < 0 ? 0 : c->ndims);
        a[2] = od_bool(c->keepdim);
        return 3;
    case K_ARGMAX:
        a[1] = c->ndims < 0 ? od_none() : od_int(c->dims[0]);
        a[2] = od_bool(c->keepdim);
        return 3;
    case K_VAR:
        if (c->overload == 0) {
            a[1] = od_bool(c->unbiased);
            return 2;
        }
        a[1] = dimv;
        if (c->overload == 1) {
            a[2] = od_bool(c->unbiased);
            a[3] = od_bool(c->keepdim);
        } else {
            a[2] = c->has_corr ? od_int(c->corr) : od_none();
            a[3] = od_bool(c->keepdim);
        }
        return 4;
    }
    return 0;
}

static od_dtype expected_dtype(const rcase *c, od_dtype in)
{
    switch (c->k) {
    case K_SUM:
    case K_MEAN:
        if (c->has_dtype)
            return c->dtype;
        return od_dtype_is_integral(in, true) ? OD_INT64 : in;
    case K_ARGMAX: return OD_INT64;
    default: return in;
    }
}

/* Checks one case against the reference. */
static void check_case(rcase *c, od_tensor *x)
{
    int nd = x->ndim;
    uint32_t mask = case_mask(c, nd);
    bool keep = c->overload != 0 && c->keepdim;
    if (c->k == K_ARGMAX)
        keep = c->keepdim;
    int64_t osz[OD_MAX_DIMS];
    int ond = 0;
    int64_t M = 1, N = 1;
    for (int d = 0; d < nd; d++) {
        if (mask >> d & 1) {
            N *= x->sizes[d];
            if (keep)
                osz[ond++] = 1;
        } else {
            M *= x->sizes[d];
            osz[ond++] = x->sizes[d];
        }
    }
    od_dtype odt = expected_dtype(c, x->dtype);
    od_value a[8];
    int na = case_args(c, x, a);
    od_tensor *out = call1_ok(case_op(c), a, na);
    char b1[128], b2[128];
    TCHECK(same_shape(out, osz, ond), "%s(%s%s): shape %s, want %s", KNAME[c->k], dtn(x->dtype),
           keep ? ", keepdim" : "", shape_str(out->sizes, out->ndim, b1, sizeof b1),
           shape_str(osz, ond, b2, sizeof b2));
    TCHECK(out->dtype == odt, "%s(%s): dtype %s, want %s", KNAME[c->k], dtn(x->dtype), dtn(out->dtype),
           dtn(odt));

    /* reference */
    double *xv = get_all(x);
    int64_t *xi = get_all_i(x);
    /* long double (x87 extended) keeps the reference's own rounding far below
     * the tolerances, even for the 200k-element reductions. */
    long double *acc = calloc((size_t)M + 1, sizeof *acc), *m2 = calloc((size_t)M + 1, sizeof *m2);
    double *aacc = calloc((size_t)M + 1, sizeof *aacc), *best = calloc((size_t)M + 1, sizeof *best);
    uint64_t *iacc = calloc((size_t)M + 1, sizeof *iacc);
    int64_t *bidx = malloc(((size_t)M + 1) * sizeof *bidx);
    for (int64_t o = 0; o < M; o++)
        bidx[o] = -1;
    bool int_out = od_dtype_is_integral(odt, true) && c->k != K_ARGMAX;
    int64_t n = od_tensor_numel(x);
    for (int pass = 0; pass < 2; pass++) {
        int64_t idx[OD_MAX_DIMS] = {0};
        for (int64_t i = 0; i < n; i++) {
            int64_t o = 0, r = 0;
            for (int d = 0; d < nd; d++) {
                if (mask >> d & 1)
                    r = r * x->sizes[d] + idx[d];
                else
                    o = o * x->sizes[d] + idx[d];
            }
            double v = xv[i];
            if (pass == 0) {
                switch (c->k) {
                case K_SUM:
                case K_MEAN: {
                    double cv = cast_value(v, odt);
                    if (int_out)
                        iacc[o] += (uint64_t)wrap_to(c->has_dtype ? (int64_t)cv : xi[i], odt);
                    acc[o] += cv;
                    aacc[o] += fabs(cv);
                    break;
                }
                case K_VAR:
                    acc[o] += v;
                    break;
                case K_AMAX:
                case K_AMIN:
                case K_ARGMAX: {
                    bool better;
                    if (bidx[o] < 0)
                        better = true;
                    else if (isnan(best[o]))
                        better = false;
                    else if (isnan(v))
                        better = true;
                    else
                        better = c->k == K_AMIN ? v < best[o] : v > best[o];
                    if (better) {
                        best[o] = v;
                        bidx[o] = r;
                    }
                    break;
                }
                }
            } else if (c->k == K_VAR) {
                long double dv = v - acc[o] / (long double)N;
                m2[o] += dv * dv;
            }
            next_index(idx, x->sizes, nd);
        }
        if (c->k != K_VAR)
            break;
    }
    double *got = get_all(out);
    int64_t *goti = get_all_i(out);
    int64_t corr = c->k == K_VAR ? (c->overload == 2 ? (c->has_corr ? c->corr : 1) : c->unbiased) : 0;
    for (int64_t o = 0; o < M; o++) {
        double ref = 0, tol = 0;
        switch (c->k) {
        case K_SUM:
            if (int_out) {
                TCHECK(goti[o] == wrap_to((int64_t)iacc[o], odt),
                       "sum(%s -> %s) [%" PRId64 "] = %" PRId64 ", want %" PRId64, dtn(x->dtype),
                       dtn(odt), o, goti[o], wrap_to((int64_t)iacc[o], odt));
                continue;
            }
            ref = cast_value((double)acc[o], odt);
            tol = 2 * dtype_eps(odt) * fabs(ref) + (odt == OD_FLOAT64 ? 1e-13 : 1e-6) * aacc[o];
            break;
        case K_MEAN:
            ref = cast_value((double)(acc[o] / (long double)N), odt);
            tol = 2 * dtype_eps(odt) * fabs(ref) + (odt == OD_FLOAT64 ? 1e-13 : 1e-6) * aacc[o] / (double)N;
            break;
        case K_VAR: {
            double div = (double)N - (double)corr;
            ref = cast_value((double)(m2[o] / (div > 0 ? div : 0.0)), odt);
            /* two-pass in double: pairwise sums of positive terms, ~log2(N) eps */
            tol = (odt == OD_FLOAT64 ? 64 : 4) * dtype_eps(odt) * fabs(ref) + 1e-300;
            if (odt == OD_FLOAT16 || odt == OD_BFLOAT16)
                tol += 1e-6 * fabs(ref);
            break;
        }
        case K_AMAX:
        case K_AMIN:
            ref = best[o];
            break;
        case K_ARGMAX:
            TCHECK(goti[o] == bidx[o], "argmax(%s) [%" PRId64 "] = %" PRId64 ", want %" PRId64,
                   dtn(x->dtype), o, goti[o], bidx[o]);
            continue;
        }
        TCHECK(close_to(got[o], ref, tol), "%s(%s -> %s, N=%" PRId64 ") [%" PRId64 "] = %.17g, want %.17g (tol %g)",
               KNAME[c->k], dtn(x->dtype), dtn(odt), N, o, got[o], ref, tol);
    }
    free(xv);
    free(xi);
    free(acc);
    free(aacc);
    free(best);
    free(m2);
    free(iacc);
    free(bidx);
    free(got);
    free(goti);
    od_tensor_release(out);
}

/* Random dims: a random subset, each as positive or negative, shuffled. */
static int rand_dims(int nd, int64_t *dims)
{
    int n = 0;
    for (int d = 0; d < nd; d++)
        if (rng_next() % 2)
            dims[n++] = rng_next() % 2 ? d : d - nd;
    for (int i = n - 1; i > 0; i--) {
        int j = (int)rng_int(0, i);
        int64_t t = dims[i];
        dims[i] = dims[j];
        dims[j] = t;
    }
    if (nd == 0 && rng_next() % 2) /* a 0-dim tensor names its dim as 0 or -1 */
        dims[n++] = rng_next() % 2 ? 0 : -1;
    return n;
}

/* A random input: rank 0..4, sizes 0..6 (0 rarely), any layout; one dim
 * sometimes expanded (stride 0). */
static od_tensor *rand_input(od_dtype dt, bool allow_empty)
{
    int nd = (int)rng_int(0, 4);
    int64_t sz[OD_MAX_DIMS];
    rand_sizes(sz, nd, 1, 6);
    if (allow_empty && nd > 0 && rng_next() % 8 == 0)
        sz[rng_next() % nd] = 0;
    if (nd > 0 && rng_next() % 6 == 0) {
        int e = (int)(rng_next() % nd);
        int64_t one[OD_MAX_DIMS];
        memcpy(one, sz, sizeof one);
        one[e] = 1;
        od_tensor *b = t_rand_any(one, nd, dt), *x = NULL;
        OKCALL(od_tensor_expand(b, sz, nd, &x, &e_));
        od_tensor_release(b);
        return x;
    }
    return t_rand_any(sz, nd, dt);
}

/* Small integer values (many ties), NaN and +-inf sprinkled into floats. */
static void make_ties(od_tensor *x, bool nans)
{
    int64_t n = od_tensor_numel(x);
    if (n == 0)
        return;
    double *v = get_all(x);
    for (int64_t i = 0; i < n; i++) {
        if (x->dtype == OD_BOOL)
            v[i] = (double)(rng_next() & 1);
        else if (x->dtype == OD_UINT8)
            v[i] = (double)rng_int(0, 4);
        else
            v[i] = (double)rng_int(-3, 3);
        if (od_dtype_is_floating(x->dtype) && nans) {
            uint64_t r = rng_next() % 40;
            if (r == 0)
                v[i] = NAN;
            else if (r == 1)
                v[i] = INFINITY;
            else if (r == 2)
                v[i] = -INFINITY;
        }
    }
    set_all(x, v);
    free(v);
}

Test(cpu_reduce, sum_random_dims_dtypes_layouts)
{
    for (int t = 0; t < 400; t++) {
        od_dtype dt = PICK(ALL_DTS);
        od_tensor *x = rand_input(dt, true);
        rcase c = {.k = K_SUM, .overload = (int)(rng_next() % 4 != 0)};
        c.ndims = c.overload ? (rng_next() % 5 == 0 ? -1 : rand_dims(x->ndim, c.dims)) : -1;
        c.keepdim = rng_next() % 2;
        if (rng_next() % 4 == 0) {
            static const od_dtype outs[] = {OD_INT64, OD_INT32, OD_INT8, OD_FLOAT32, OD_FLOAT64, OD_FLOAT16};
            c.has_dtype = true;
            c.dtype = PICK(outs);
        }
        check_case(&c, x);
        od_tensor_release(x);
    }
}

Test(cpu_reduce, mean_random_dims_dtypes_layouts)
{
    for (int t = 0; t < 300; t++) {
        rcase c = {.k = K_MEAN, .overload = (int)(rng_next() % 4 != 0)};
        od_dtype dt = PICK(FLOAT_DTS);
        if (rng_next() % 4 == 0) { /* integer input with a floating dtype argument */
            dt = PICK(ALL_DTS);
            c.has_dtype = true;
            c.dtype = PICK(FLOAT_DTS);
        }
        od_tensor *x = rand_input(dt, true);
        c.ndims = c.overload ? (rng_next() % 5 == 0 ? -1 : rand_dims(x->ndim, c.dims)) : -1;
        c.keepdim = rng_next() % 2;
        check_case(&c, x);
        od_tensor_release(x);
    }
}

Test(cpu_reduce, amax_amin_with_nan_inf_and_ties)
{
    for (int t = 0; t < 400; t++) {
        od_dtype dt = PICK(ALL_DTS);
        od_tensor *x = rand_input(dt, false);
        make_ties(x, true);
        rcase c = {.k = rng_next() % 2 ? K_AMAX : K_AMIN, .overload = 1};
        c.ndims = rand_dims(x->ndim, c.dims);
        c.keepdim = rng_next() % 2;
        check_case(&c, x);
        od_tensor_release(x);
    }
}

Test(cpu_reduce, argmax_first_max_and_first_nan)
{
    for (int t = 0; t < 400; t++) {
        static const od_dtype dts[] = {OD_UINT8, OD_INT8, OD_INT16, OD_INT32, OD_INT64,
                                       OD_FLOAT16, OD_BFLOAT16, OD_FLOAT32, OD_FLOAT64};
        od_dtype dt = PICK(dts);
        od_tensor *x = rand_input(dt, false);
        make_ties(x, rng_next() % 2);
        rcase c = {.k = K_ARGMAX, .overload = 1, .keepdim = rng_next() % 2};
        if (rng_next() % 3 == 0) {
            c.ndims = -1;
        } else {
            c.ndims = 1;
            int nd = x->ndim ? x->ndim : 1;
            c.dims[0] = rng_int(-nd, nd - 1);
        }
        check_case(&c, x);
        od_tensor_release(x);
    }
}

Test(cpu_reduce, var_overloads_corrections)
{
    for (int t = 0; t < 400; t++) {
        od_dtype dt = PICK(FLOAT_DTS);
        od_tensor *x = rand_input(dt, true);
        rcase c = {.k = K_VAR, .overload = (int)(rng_next() % 3), .unbiased = rng_next() % 2};
        c.ndims = rng_next() % 5 == 0 ? -1 : rand_dims(x->ndim, c.dims);
        c.keepdim = rng_next() % 2;
        c.has_corr = rng_next() % 4 != 0;
        c.corr = rng_int(0, 3);
        check_case(&c, x);
        od_tensor_release(x);
    }
}

/* Long rows and large single reductions take the vectorised, split
 * (parallel partials) and column-block paths: exercise their tails. */
Test(cpu_reduce, large_rows_columns_and_full_reductions)
{
    const struct {
        int nd;
        int64_t sz[2];
    } shapes[] = {{2, {3, 5003}}, {1, {200001}}, {2, {70, 613}}, {2, {2, 140000}}, {2, {1000, 3}}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        for (int t = 0; t < 6; t++) {
            static const od_dtype dts[] = {OD_FLOAT32, OD_FLOAT64, OD_INT32, OD_FLOAT16};
            od_dtype dt = dts[t % 4];
            od_tensor *x = t_rand_layout(shapes[s].sz, shapes[s].nd, dt, t % 2);
            kind ks[] = {K_SUM, K_MEAN, K_AMAX, K_AMIN, K_ARGMAX, K_VAR};
            for (int ki = 0; ki < 6; ki++) {
                kind k = ks[ki];
                if ((k == K_MEAN || k == K_VAR) && !od_dtype_is_floating(dt))
                    continue;
                if (k == K_ARGMAX || k == K_AMAX)
                    make_ties(x, ki == 4 && t == 1);
                rcase c = {.k = k, .overload = 1, .keepdim = t % 3 == 0, .unbiased = true};
                if (k == K_VAR)
                    c.overload = 1;
                int mode = (int)rng_int(0, 2); /* all dims, the last, the first */
                if (k == K_ARGMAX) {
                    c.ndims = mode == 0 ? -1 : 1;
                    c.dims[0] = mode == 1 ? -1 : 0;
                } else {
                    c.ndims = mode == 0 ? 0 : 1;
                    c.dims[0] = mode == 1 ? -1 : 0;
                }
                check_case(&c, x);
            }
            od_tensor_release(x);
        }
    }
}

Test(cpu_reduce, argmax_argmin_nan_in_a_late_chunk_and_ties_across_chunks)
{
    int64_t n = 300000;
    od_tensor *x = t_empty(&n, 1, OD_FLOAT32, CPU);
    float *p = od_tensor_data(x);
    for (int64_t i = 0; i < n; i++)
        p[i] = (float)rng_int(0, 5);
    int64_t first5 = -1;
    for (int64_t i = 0; i < n && first5 < 0; i++)
        if (p[i] == 5.0f)
            first5 = i;
    /* argmin: the same rules from below, its minimum alone and far in */
    int64_t low_at = rng_int(n / 4, n / 2);
    p[low_at] = -1.0f;
    od_value a[3] = {tv(x), od_none(), od_bool(false)};
    od_tensor *r = call1_ok(OD_OPID_argmax, a, 3);
    TCHECK(*(int64_t *)od_tensor_data(r) == first5, "argmax = %" PRId64 ", want %" PRId64,
           *(int64_t *)od_tensor_data(r), first5);
    od_tensor_release(r);
    r = call1_ok(OD_OPID_argmin, a, 3);
    TCHECK(*(int64_t *)od_tensor_data(r) == low_at, "argmin = %" PRId64 ", want %" PRId64,
           *(int64_t *)od_tensor_data(r), low_at);
    od_tensor_release(r);
    int64_t nan_at = rng_int(n / 2, n - 1), nan2 = nan_at + 1 < n ? nan_at + 1 : nan_at;
    p[nan_at] = NAN;
    p[nan2] = NAN;
    for (int k = 0; k < 2; k++) {
        r = call1_ok(k ? OD_OPID_argmin : OD_OPID_argmax, a, 3);
        TCHECK(*(int64_t *)od_tensor_data(r) == nan_at, "%s with NaN = %" PRId64 ", want %" PRId64,
               k ? "argmin" : "argmax", *(int64_t *)od_tensor_data(r), nan_at);
        od_tensor_release(r);
    }
    int64_t d1[1] = {0};
    od_value m[3] = {tv(x), ilist(d1, 1), od_bool(false)};
    r = call1_ok(OD_OPID_amax, m, 3);
    TCHECK(isnan(*(float *)od_tensor_data(r)), "amax with a NaN is %g", *(float *)od_tensor_data(r));
    od_tensor_release(r);
    od_tensor_release(x);
}

Test(cpu_reduce, integer_sums_wrap_like_int64)
{
    for (int t = 0; t < 50; t++) {
        int64_t n = rng_int(1, 300);
        od_tensor *x = t_empty(&n, 1, OD_INT64, CPU);
        int64_t *p = od_tensor_data(x);
        uint64_t ref = 0;
        for (int64_t i = 0; i < n; i++) {
            p[i] = (int64_t)rng_next(); /* full range: the sum overflows */
            ref += (uint64_t)p[i];
        }
        od_value a[2] = {tv(x), od_none()};
        od_tensor *r = call1_ok(OD_OPID_sum, a, 2);
        TCHECK(*(int64_t *)od_tensor_data(r) == (int64_t)ref, "int64 sum did not wrap");
        od_tensor_release(r);
        /* int32 promotes to int64: no overflow at 32 bits */
        od_tensor *y = t_empty(&n, 1, OD_INT32, CPU);
        int32_t *q = od_tensor_data(y);
        int64_t ref32 = 0;
        for (int64_t i = 0; i < n; i++) {
            q[i] = (int32_t)rng_int(INT32_MIN, INT32_MAX);
            ref32 += q[i];
        }
        od_value b[2] = {tv(y), od_none()};
        r = call1_ok(OD_OPID_sum, b, 2);
        TCHECK(r->dtype == OD_INT64 && *(int64_t *)od_tensor_data(r) == ref32, "int32 sum");
        od_tensor_release(r);
        od_tensor_release(x);
        od_tensor_release(y);
    }
}

Test(cpu_reduce, empty_reductions)
{
    int64_t sz[2] = {3, 0};
    od_tensor *x = t_empty(sz, 2, OD_FLOAT32, CPU), *xi = t_empty(sz, 2, OD_INT32, CPU);
    int64_t d1[1] = {1}, d0[1] = {0};
    /* sum over the empty dim: zeros; mean and var: nan */
    od_value s[4] = {tv(x), ilist(d1, 1), od_bool(false), od_none()};
    od_tensor *r = call1_ok(OD_OPID_sum_dim_IntList, s, 4);
    TCHECK(r->ndim == 1 && r->sizes[0] == 3, "sum over empty dim shape");
    for (int i = 0; i < 3; i++)
        TCHECK(((float *)od_tensor_data(r))[i] == 0.0f, "sum over empty dim is not 0");
    od_tensor_release(r);
    s[0] = tv(xi);
    r = call1_ok(OD_OPID_sum_dim_IntList, s, 4);
    TCHECK(r->dtype == OD_INT64 && ((int64_t *)od_tensor_data(r))[2] == 0, "int sum over empty dim");
    od_tensor_release(r);
    s[0] = tv(x);
    r = call1_ok(OD_OPID_mean_dim, s, 4);
    for (int i = 0; i < 3; i++)
        TCHECK(isnan(((float *)od_tensor_data(r))[i]), "mean over empty dim is not nan");
    od_tensor_release(r);
    od_value v[4] = {tv(x), ilist(d1, 1), od_bool(true), od_bool(false)};
    r = call1_ok(OD_OPID_var_dim, v, 4);
    TCHECK(isnan(((float *)od_tensor_data(r))[0]), "var over empty dim is not nan");
    od_tensor_release(r);
    /* reducing the non-empty dim of an empty tensor gives an empty result */
    od_value m[3] = {tv(x), ilist(d0, 1), od_bool(false)};
    r = call1_ok(OD_OPID_amax, m, 3);
    TCHECK(r->ndim == 1 && r->sizes[0] == 0, "amax over the non-empty dim");
    od_tensor_release(r);
    /* errors like torch */
    od_value e1[3] = {tv(x), ilist(d1, 1), od_bool(false)};
    call_fails(OD_OPID_amax, e1, 3, OD_OK, "amax(): Expected reduction dim 1 to have non-zero size.");
    call_fails(OD_OPID_amin, e1, 3, OD_OK, "amin(): Expected reduction dim 1 to have non-zero size.");
    int64_t dm1[1] = {-1};
    od_value e1b[3] = {tv(x), ilist(dm1, 1), od_bool(false)};
    call_fails(OD_OPID_amax, e1b, 3, OD_OK, "Expected reduction dim -1 to have non-zero size.");
    od_value e2[3] = {tv(x), ilist(NULL, 0), od_bool(false)};
    call_fails(OD_OPID_amax, e2, 3, OD_OK, "Expected reduction dim to be specified for input.numel() == 0");
    od_value e3[3] = {tv(x), od_int(-1), od_bool(false)};
    call_fails(OD_OPID_argmax, e3, 3, OD_OK, "argmax(): Expected reduction dim 1 to have non-zero size.");
    od_value e4[3] = {tv(x), od_none(), od_bool(false)};
    call_fails(OD_OPID_argmax, e4, 3, OD_OK, "Expected reduction dim to be specified for input.numel() == 0");
    /* full sum of an empty tensor */
    od_value f[2] = {tv(x), od_none()};
    r = call1_ok(OD_OPID_sum, f, 2);
    TCHECK(r->ndim == 0 && *(float *)od_tensor_data(r) == 0.0f, "sum of empty");
    od_tensor_release(r);
    r = call1_ok(OD_OPID_mean, f, 2);
    TCHECK(r->ndim == 0 && isnan(*(float *)od_tensor_data(r)), "mean of empty");
    od_tensor_release(r);
    od_tensor_release(x);
    od_tensor_release(xi);
}

Test(cpu_reduce, zero_dim_inputs)
{
    od_tensor *x = NULL;
    double v = rng_uniform(-5, 5);
    OKCALL(od_tensor_scalar(v, OD_FLOAT64, &x, &e_));
    int64_t d0[1] = {0}, dm[1] = {-1};
    od_value a[4] = {tv(x), ilist(d0, 1), od_bool(true), od_none()};
    od_tensor *r = call1_ok(OD_OPID_sum_dim_IntList, a, 4);
    TCHECK(r->ndim == 0 && *(double *)od_tensor_data(r) == v, "sum of a scalar over dim 0");
    od_tensor_release(r);
    od_value b[3] = {tv(x), ilist(dm, 1), od_bool(false)};
    r = call1_ok(OD_OPID_amax, b, 3);
    TCHECK(r->ndim == 0 && *(double *)od_tensor_data(r) == v, "amax of a scalar");
    od_tensor_release(r);
    od_value c[3] = {tv(x), od_int(0), od_bool(true)};
    r = call1_ok(OD_OPID_argmax, c, 3);
    TCHECK(r->ndim == 0 && *(int64_t *)od_tensor_data(r) == 0, "argmax of a scalar");
    od_tensor_release(r);
    od_value d[2] = {tv(x), od_bool(true)};
    r = call1_ok(OD_OPID_var, d, 2);
    TCHECK(r->ndim == 0 && isnan(*(double *)od_tensor_data(r)), "unbiased var of one element is nan");
    od_tensor_release(r);
    d[1] = od_bool(false);
    r = call1_ok(OD_OPID_var, d, 2);
    TCHECK(*(double *)od_tensor_data(r) == 0.0, "biased var of one element is 0");
    od_tensor_release(r);
    int64_t bad[1] = {1};
    od_value e[3] = {tv(x), ilist(bad, 1), od_bool(false)};
    call_fails(OD_OPID_amax, e, 3, OD_OK, "Dimension out of range (expected to be in range of [-1, 0], but got 1)");
    od_tensor_release(x);
}

Test(cpu_reduce, dtype_rules_and_errors)
{
    int64_t sz[2] = {2, 3};
    od_tensor *xi = t_rand(sz, 2, OD_INT64), *xb = t_rand(sz, 2, OD_BOOL), *xf = t_rand(sz, 2, OD_FLOAT32);
    od_value a[2] = {tv(xi), od_none()};
    call_fails(OD_OPID_mean, a, 2, OD_OK,
               "mean(): could not infer output dtype. Input dtype must be either a floating point or "
               "complex dtype. Got: Long");
    a[0] = tv(xb);
    call_fails(OD_OPID_mean, a, 2, OD_OK, "Got: Bool");
    a[0] = tv(xf);
    a[1] = od_dtype_v(OD_INT32);
    call_fails(OD_OPID_mean, a, 2, OD_OK, "Optional dtype must be either a floating point or complex dtype. Got: Int");
    a[0] = tv(xb);
    a[1] = od_none();
    od_tensor *r = call1_ok(OD_OPID_sum, a, 2);
    TCHECK(r->dtype == OD_INT64, "sum(bool) is %s", dtn(r->dtype));
    od_tensor_release(r);
    od_value v[2] = {tv(xi), od_bool(true)};
    call_fails(OD_OPID_var, v, 2, OD_OK, "std and var only support floating point and complex dtypes");
    od_value am[3] = {tv(xb), od_none(), od_bool(false)};
    call_fails(OD_OPID_argmax, am, 3, OD_OK, "not implemented for 'Bool'");
    /* dims */
    int64_t dup[2] = {1, -1};
    od_value d[4] = {tv(xf), ilist(dup, 2), od_bool(false), od_none()};
    call_fails(OD_OPID_sum_dim_IntList, d, 4, OD_OK, "dim 1 appears multiple times in the list of dims");
    int64_t oor[1] = {2};
    d[1] = ilist(oor, 1);
    call_fails(OD_OPID_sum_dim_IntList, d, 4, OD_OK,
               "Dimension out of range (expected to be in range of [-2, 1], but got 2)");
    od_value am2[3] = {tv(xf), od_int(-3), od_bool(false)};
    call_fails(OD_OPID_argmax, am2, 3, OD_OK, "Dimension out of range");
    od_tensor_release(xi);
    od_tensor_release(xb);
    od_tensor_release(xf);
}

Test(cpu_reduce, var_divisor_at_or_below_zero_is_inf_or_nan)
{
    int64_t n = 3;
    od_tensor *x = t_rand(&n, 1, OD_FLOAT32);
    od_value a[4] = {tv(x), od_none(), od_int(3), od_bool(false)};
    od_tensor *r = call1_ok(OD_OPID_var_correction, a, 4);
    TCHECK(isinf(*(float *)od_tensor_data(r)) && *(float *)od_tensor_data(r) > 0, "var with N == correction: %g",
           *(float *)od_tensor_data(r));
    od_tensor_release(r);
    a[2] = od_int(7);
    r = call1_ok(OD_OPID_var_correction, a, 4);
    TCHECK(isinf(*(float *)od_tensor_data(r)), "var with N < correction: %g", *(float *)od_tensor_data(r));
    od_tensor_release(r);
    od_tensor_release(x);
}

/* argmax on bool is refused by its kernel, which an empty result never
 * reaches: torch answers an empty int64 tensor (issue 17, class 8). */
Test(cpu_reduce, argmax_of_an_empty_bool)
{
    int64_t s03[2] = {0, 3}, s23[2] = {2, 3}, want[1] = {0};
    od_tensor *e = t_empty(s03, 2, OD_BOOL, CPU), *b = t_rand(s23, 2, OD_BOOL);
    od_value a[3] = {tv(e), od_int(1), od_bool(false)};
    od_tensor *o = call1_ok(OD_OPID_argmax, a, 3);
    TCHECK(o->dtype == OD_INT64 && same_shape(o, want, 1), "argmax(empty bool, dim=1)");
    od_tensor_release(o);
    a[1] = od_int(0); /* over the empty dim: torch's zero-size reduction error */
    call_fails(OD_OPID_argmax, a, 3, OD_OK, NULL);
    od_value c[3] = {tv(b), od_int(1), od_bool(false)};
    call_fails(OD_OPID_argmax, c, 3, OD_EUNSUPPORTED, "\"argmax_cpu\" not implemented for 'Bool'");
    od_tensor_release(e);
    od_tensor_release(b);
}

Test(cpu_reduce, short_float32_rows_four_at_a_time)
{
    /* reduce.c's AVX-512 rows: row counts around its groups of four, lengths
     * around its 8-wide lanes, over the last dim and the last two (a global
     * average pool's mean), with NaN, inf and -0 sums among the rows */
    static const int64_t ms[] = {1, 3, 4, 5, 9, 13}, ns[] = {1, 7, 8, 9, 49, 130};
    for (size_t a = 0; a < sizeof ms / sizeof ms[0]; a++)
        for (size_t b = 0; b < sizeof ns / sizeof ns[0]; b++)
            for (int v = 0; v < 4; v++) {
                int64_t sz[3] = {2, ms[a], ns[b]};
                od_tensor *x = t_rand_any(sz, 3, OD_FLOAT32);
                if (v & 1)
                    make_ties(x, true);
                rcase c = {.k = v & 2 ? K_MEAN : K_SUM, .overload = 1, .ndims = 1, .dims = {-1}};
                check_case(&c, x);
                c.ndims = 2;
                c.dims[0] = -2;
                c.dims[1] = -1;
                c.keepdim = true;
                check_case(&c, x);
                od_tensor_release(x);
            }
    /* 4101 rows of 49: parallel chunks of 669 rows, which start inside a group of four */
    for (int v = 0; v < 2; v++) {
        int64_t sz[3] = {3, 1367, 49};
        od_tensor *x = t_rand_any(sz, 3, OD_FLOAT32);
        rcase c = {.k = v ? K_MEAN : K_SUM, .overload = 1, .ndims = 1, .dims = {-1}};
        check_case(&c, x);
        od_tensor_release(x);
    }
}

Test(cpu_reduce, float32_vector_kernels_tails_nan_and_signed_zero)
{
    /* reduce.c's float32 kernels: sum / mean / var in four accumulators of 8
     * lanes, then blocks of 8, then a scalar tail; amax / amin in four of 16
     * lanes, then blocks of 16, then a masked tail. Lengths under one vector,
     * at and around every block boundary, and past the split into chunks of
     * 32768; NaN in the body and in the tail, and rows of signed zeros. */
    static const int64_t ns[] = {1, 5, 8, 15, 16, 17, 31, 32, 33, 47, 63, 64, 65, 79, 97, 1000, 1031, 65536 + 37, 200003};
    static const kind ks[] = {K_SUM, K_MEAN, K_VAR, K_AMAX, K_AMIN};
    for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++)
        for (int v = 0; v < 4; v++) {
            int64_t n = ns[a], sz[2] = {2, n};
            od_tensor *x = t_rand(sz, 2, OD_FLOAT32);
            float *p = od_tensor_data(x);
            if (v == 1) { /* row 0: NaN in the body; row 1: NaN in the tail */
                p[n / 3] = NAN;
                p[n + n - 1] = NAN;
            } else if (v == 2) { /* row 0: NaN as the last element only */
                p[n - 1] = NAN;
            } else if (v == 3) { /* row 0: +0 and -0 mixed; row 1: all -0 */
                for (int64_t i = 0; i < 2 * n; i++)
                    p[i] = i >= n || rng_next() % 2 ? -0.0f : 0.0f;
            }
            for (size_t k = 0; k < sizeof ks / sizeof ks[0]; k++) {
                rcase c = {.k = ks[k], .overload = 1, .ndims = 1, .dims = {-1}, .unbiased = true};
                check_case(&c, x);
                rcase all = {.k = ks[k], .overload = 0, .ndims = -1, .unbiased = true};
                check_case(&all, x);
            }
            if (v == 3) { /* all -0: the maximum and the minimum are -0, as in torch */
                int64_t d = -1;
                for (int mx = 0; mx < 2; mx++) {
                    od_value args[3] = {tv(x), ilist(&d, 1), od_bool(false)};
                    od_tensor *o = call1_ok(mx ? OD_OPID_amax : OD_OPID_amin, args, 3);
                    const float *r = od_tensor_data(o);
                    TCHECK(r[0] == 0.0f && r[1] == 0.0f && signbit(r[1]), "%s of zeros (n=%" PRId64 "): %g, %g",
                           mx ? "amax" : "amin", n, r[0], r[1]);
                    od_tensor_release(o);
                }
            }
            if (v == 0 && n < 2 * 32768) {
                /* the rows path (rows_sum_f32_512) replays od_cpu_sum_f32's order: the same bits */
                int64_t d = -1;
                od_value args[4] = {tv(x), ilist(&d, 1), od_bool(false), od_dtype_v(OD_FLOAT64)};
                od_tensor *o = call1_ok(OD_OPID_sum_dim_IntList, args, 4);
                const double *r = od_tensor_data(o);
                for (int row = 0; row < 2; row++) {
                    double want = od_cpu_sum_f32(p + row * n, n) + 0.0;
                    TCHECK(memcmp(&r[row], &want, sizeof want) == 0, "sum row %d (n=%" PRId64 "): %.17g, want %.17g",
                           row, n, r[row], want);
                }
                od_tensor_release(o);
            }
            od_tensor_release(x);
        }
}

/* prod.dim_int of x over dim d, or prod() when d is 99; new tensor */
static od_tensor *prod_of(od_tensor *x, int64_t d)
{
    od_value a[4] = {tv(x), od_int(d), od_bool(false), od_none()};
    if (d == 99) {
        a[1] = od_none();
        return call1_ok(OD_OPID_prod, a, 2);
    }
    return call1_ok(OD_OPID_prod_dim_int, a, 4);
}

Test(cpu_reduce, prod_lanes_underflow_specials_and_integers)
{
    /* reduce.c's products: AVX-512 lanes over contiguous float rows (their
     * product taken as a signed zero without multiplying when the exponents
     * say it underflows), four scalars over gathered strided data, modular
     * uint64 for integers. Rows at lengths around the lanes' 8 and 32, values
     * whose product stays normal, ends in float64's denormals or underflows
     * to a signed zero, and NaN, inf and 0 among them. The reference is a
     * long double product, or for underflow the sign and the sum of log2. */
    static const int64_t ns[] = {1, 7, 8, 31, 32, 33, 100, 1000, 4099};
    static const od_dtype dts[] = {OD_FLOAT32, OD_FLOAT64};
    for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++)
        for (size_t t = 0; t < 2; t++)
            for (int v = 0; v < 5; v++) {
                int64_t n = ns[a], rows = 6, sz[2] = {rows, n};
                od_dtype dt = dts[t];
                double *val = malloc((size_t)(rows * n) * sizeof *val);
                for (int64_t i = 0; i < rows * n; i++) {
                    if (v == 0) /* products near 1 */
                        val[i] = rng_uniform(0.9, 1.1) * (rng_next() % 2 ? -1 : 1);
                    else if (v == 1) /* long rows underflow: a signed zero */
                        val[i] = rng_uniform(-1.0, 1.0);
                    else if (v == 2) /* float64: 33 factors of ~2^-31.5 end in its denormals */
                        val[i] = ldexp(rng_uniform(1.0, 2.0), -32) * (rng_next() % 2 ? -1 : 1);
                    else
                        val[i] = rng_uniform(0.5, 1.5);
                }
                if (v == 3 || v == 4) { /* row 0 NaN, row 1 inf and 0, row 2 inf, row 3 a 0, row 4 -inf and -0 */
                    val[rng_next() % n] = NAN;
                    val[n + rng_next() % n] = INFINITY;
                    val[n + rng_next() % n] = 0.0;
                    val[2 * n + rng_next() % n] = INFINITY;
                    val[3 * n + rng_next() % n] = 0.0;
                    val[4 * n + rng_next() % n] = -INFINITY;
                    val[4 * n + rng_next() % n] = -0.0;
                }
                od_tensor *x = v == 4 ? t_rand_any(sz, 2, dt) : t_rand(sz, 2, dt);
                set_all(x, val);
                double *xv = get_all(x); /* the values as stored (rounded to dt) */
                od_tensor *o = prod_of(x, -1);
                double *got = get_all(o);
                for (int64_t r = 0; r < rows; r++) {
                    long double p = 1;
                    double lg = 0;
                    bool neg = false, special = false;
                    for (int64_t i = 0; i < n; i++) {
                        double e = xv[r * n + i];
                        p *= e;
                        neg ^= signbit(e) != 0;
                        special |= !isfinite(e) || e == 0;
                        lg += log2(fabs(e));
                    }
                    double g = got[r];
                    if (!special && lg < -1080.0) {
                        TCHECK(g == 0 && (signbit(g) != 0) == neg, "prod(%s, n=%" PRId64 ") row %" PRId64
                               ": %g, want a %s zero", dtn(dt), n, r, g, neg ? "negative" : "positive");
                        continue;
                    }
                    double want = cast_value((double)p, dt);
                    if (isnan(want) || isinf(want) || want == 0) {
                        TCHECK((isnan(want) && isnan(g)) || (g == want && signbit(g) == signbit(want)),
                               "prod(%s, n=%" PRId64 ") row %" PRId64 ": %g, want %g", dtn(dt), n, r, g, want);
                        continue;
                    }
                    /* another order of rounding: n double roundings, plus a float32 one; in
                     * float64's denormals, its last place */
                    double tol = 4.0 * (double)n * DBL_EPSILON * fabs(want) + 2 * dtype_eps(dt) * fabs(want) +
                                 4.9e-324;
                    TCHECK(close_to(g, want, tol), "prod(%s, n=%" PRId64 ", case %d) row %" PRId64 ": %.17g, want %.17g",
                           dtn(dt), n, v, r, g, want);
                }
                od_tensor_release(o);
                free(got);
                /* the same values down the columns of an [n, rows] matrix: prod over
                 * dim 0 reads them strided, through the gathered path */
                int64_t tsz[2] = {n, rows};
                od_tensor *xt = t_rand(tsz, 2, dt), *ot = NULL;
                double *tv_ = malloc((size_t)(rows * n) * sizeof *tv_);
                for (int64_t r = 0; r < rows; r++)
                    for (int64_t i = 0; i < n; i++)
                        tv_[i * rows + r] = xv[r * n + i];
                set_all(xt, tv_);
                free(tv_);
                ot = prod_of(xt, 0);
                o = prod_of(x, -1);
                double *g1 = get_all(ot), *g2 = get_all(o);
                for (int64_t r = 0; r < rows; r++) {
                    double tol = 8.0 * (double)n * DBL_EPSILON * fabs(g2[r]) + 2 * dtype_eps(dt) * fabs(g2[r]) + 4.9e-324;
                    TCHECK((isnan(g1[r]) && isnan(g2[r])) || (g1[r] == g2[r] && signbit(g1[r]) == signbit(g2[r])) ||
                               close_to(g1[r], g2[r], tol),
                           "prod(%s, n=%" PRId64 ") row %" PRId64 ": strided %.17g, contiguous %.17g", dtn(dt), n, r,
                           g1[r], g2[r]);
                }
                free(g1);
                free(g2);
                od_tensor_release(o);
                od_tensor_release(ot);
                od_tensor_release(xt);
                free(xv);
                free(val);
                od_tensor_release(x);
            }
    /* integers: modular, the same in any order; and prod() of everything */
    for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++) {
        int64_t n = ns[a], sz[2] = {3, n};
        od_tensor *x = t_rand_any(sz, 2, OD_INT64);
        int64_t *xi = get_all_i(x);
        double *val = malloc((size_t)(3 * n) * sizeof *val);
        for (int64_t i = 0; i < 3 * n; i++)
            val[i] = (double)(rng_int(1, 7) * (rng_next() % 2 ? -1 : 1));
        set_all(x, val);
        free(xi);
        xi = get_all_i(x);
        od_tensor *o = prod_of(x, -1), *all = prod_of(x, 99);
        int64_t *got = get_all_i(o), *ga = get_all_i(all);
        uint64_t whole = 1;
        for (int64_t r = 0; r < 3; r++) {
            uint64_t p = 1;
            for (int64_t i = 0; i < n; i++)
                p *= (uint64_t)xi[r * n + i];
            whole *= p;
            TCHECK(got[r] == (int64_t)p, "prod(int64, n=%" PRId64 ") row %" PRId64 ": %" PRId64 ", want %" PRId64, n, r,
                   got[r], (int64_t)p);
        }
        TCHECK(ga[0] == (int64_t)whole, "prod(int64) of all %" PRId64 ": %" PRId64 ", want %" PRId64, 3 * n, ga[0],
               (int64_t)whole);
        free(got);
        free(ga);
        free(xi);
        free(val);
        od_tensor_release(o);
        od_tensor_release(all);
        od_tensor_release(x);
    }
}
