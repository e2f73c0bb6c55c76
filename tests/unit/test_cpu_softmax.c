/* test_cpu_softmax.c — CPU _softmax, _log_softmax (softmax.c) and native_layer_norm
 * (layer_norm.c) through the dispatcher.
 *
 * References are computed here in long double on fresh random inputs: every
 * dim (negative too) of rank 0-4 tensors in random layouts, rows long enough
 * to cross the vectorised blocks, values far outside exp's range (stability),
 * NaN and -inf rows, float16 with half_to_float, and layer norm's (out, mean,
 * rstd) with and without weight/bias. The seed is printed on failure.
 */
#include "cpu/cpu_kernels.h"
#include "cpu_testutil.h"

TestSuite(cpu_softmax, .init = test_setup);

/* Softmax reference over dim d of x (values v, row-major), into ref. */
static void ref_softmax(const od_tensor *x, const double *v, int d, bool is_log, double *ref)
{
    int64_t outer = 1, D = 1, inner = 1;
    for (int k = 0; k < x->ndim; k++) {
        if (k < d)
            outer *= x->sizes[k];
        else if (k == d)
            D = x->sizes[k];
        else
            inner *= x->sizes[k];
    }
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            long double m = -INFINITY, s = 0;
            bool nan = false;
            for (int64_t r = 0; r < D; r++) {
                double e = v[(o * D + r) * inner + i];
                nan |= isnan(e);
                if (e > m)
                    m = e;
            }
            for (int64_t r = 0; r < D; r++)
                s += expl(v[(o * D + r) * inner + i] - m);
            for (int64_t r = 0; r < D; r++) {
                int64_t at = (o * D + r) * inner + i;
                long double y = is_log ? (v[at] - m) - logl(s) : expl(v[at] - m) / s;
                ref[at] = nan || isinf((double)m) ? NAN : (double)y;
            }
        }
}

static void softmax_case(od_tensor *x, int64_t dim, bool is_log, bool h2f)
{
    int d = (int)(dim < 0 ? dim + (x->ndim ? x->ndim : 1) : dim);
    od_value a[3] = {tv(x), od_int(dim), od_bool(h2f)};
    od_tensor *y = call1_ok(is_log ? OD_OPID__log_softmax : OD_OPID__softmax, a, 3);
    od_dtype odt = h2f ? OD_FLOAT32 : x->dtype;
    TCHECK(y->dtype == odt && same_shape(y, x->sizes, x->ndim), "softmax dtype/shape");
    int64_t n = od_tensor_numel(x);
    double *v = get_all(x), *ref = malloc((size_t)(n + 1) * sizeof *ref), *got = get_all(y);
    ref_softmax(x, v, d, is_log, ref);
    /* float compute: exp and the sum carry a few float32 ulps; a bfloat16
     * log_softmax row rounds its sum and log(sum) to bfloat16 as torch 1.13
     * does, half a step each of a value up to |x - max| + |y| */
    double ceps = x->dtype == OD_FLOAT64 ? 1e-14 : x->dtype == OD_BFLOAT16 && is_log ? dtype_eps(OD_BFLOAT16) : 4e-6;
    for (int64_t i = 0; i < n; i++) {
        double r = cast_value(ref[i], odt);
        double tol = 2 * dtype_eps(odt) * fabs(r) + ceps * (is_log ? 1 + fabs(v[i]) + fabs(r) : fabs(r)) + 1e-300;
        if (!is_log && odt != OD_FLOAT64)
            tol += 1e-37; /* tiny results may flush through float's subnormals */
        TCHECK(close_to(got[i], r, tol), "%s(%s, dim=%" PRId64 ", ndim=%d)[%" PRId64 "] = %.10g, want %.10g",
               is_log ? "log_softmax" : "softmax", dtn(x->dtype), dim, x->ndim, i, got[i], r);
    }
    free(v);
    free(ref);
    free(got);
    od_tensor_release(y);
}

Test(cpu_softmax, every_dim_layout_and_dtype)
{
    for (int t = 0; t < 400; t++) {
        od_dtype dt = PICK(FLOAT_DTS);
        int nd = (int)rng_int(0, 4);
        int64_t sz[OD_MAX_DIMS];
        rand_sizes(sz, nd, 1, 7);
        if (nd && rng_next() % 10 == 0)
            sz[rng_next() % nd] = 0;
        od_tensor *x = t_rand_any(sz, nd, dt);
        int64_t n = od_tensor_numel(x);
        if (n && rng_next() % 3 == 0) { /* far outside exp's range: needs the max shift */
            double *v = get_all(x);
            double shift = rng_next() % 2 ? 1000.0 : -1000.0;
            if (dt == OD_FLOAT16)
                shift /= 100; /* keep within half's range */
            for (int64_t i = 0; i < n; i++)
                v[i] = cast_value(v[i] + shift, dt);
            set_all(x, v);
            free(v);
        }
        int ndd = nd ? nd : 1;
        softmax_case(x, rng_int(-ndd, ndd - 1), rng_next() % 2, false);
        od_tensor_release(x);
    }
}

Test(cpu_softmax, long_rows_and_wide_columns)
{
    /* last dim: several vectorised blocks plus a tail; dim 0 with inner > one
     * column block (256) */
    const int64_t shapes[][3] = {{3, 1, 4099}, {2, 7, 300}, {5, 600, 1}, {1, 33, 513}};
    for (int s = 0; s < 4; s++)
        for (int t = 0; t < 4; t++) {
            od_dtype dt = t % 2 ? OD_FLOAT32 : OD_FLOAT64;
            od_tensor *x = t_rand_layout(shapes[s], 3, dt, t / 2);
            softmax_case(x, t / 2 ? 1 : 2, s % 2 == 0, false);
            softmax_case(x, 0, s % 2 == 1, false);
            od_tensor_release(x);
        }
}

Test(cpu_softmax, nan_and_neg_inf_rows)
{
    int64_t sz[2] = {4, 9};
    for (int t = 0; t < 20; t++) {
        od_tensor *x = t_rand(sz, 2, OD_FLOAT32);
        float *p = od_tensor_data(x);
        p[rng_int(0, 8)] = NAN;                  /* row 0: NaN -> all NaN */
        for (int j = 0; j < 9; j++)
            p[9 + j] = -INFINITY;                /* row 1: all -inf -> NaN, like torch */
        p[18 + rng_int(0, 8)] = -INFINITY;       /* row 2: one -inf -> exactly 0 there */
        p[27 + rng_int(0, 8)] = 80.0f;           /* row 3: exp(80) overflows float without the shift */
        softmax_case(x, 1, t % 2, false);
        od_tensor_release(x);
    }
}

/* The max shift must see every element: one huge value at each position in
 * turn (exp would overflow without the shift), rows of every length that
 * crosses the vectorised blocks. */
Test(cpu_softmax, huge_value_at_every_position)
{
    for (int64_t n = 1; n <= 40; n++) {
        int64_t sz[2] = {n, n};
        for (int f = 0; f < 2; f++) {
            od_dtype dt = f ? OD_FLOAT64 : OD_FLOAT32;
            od_tensor *x = t_rand(sz, 2, dt);
            double *v = get_all(x);
            for (int64_t i = 0; i < n; i++)
                v[i * n + i] = f ? 2000.0 : 200.0; /* row i: huge at column i */
            set_all(x, v);
            free(v);
            softmax_case(x, 1, false, false);
            softmax_case(x, 1, true, false);
            softmax_case(x, 0, n % 2, false); /* column i: huge at row i */
            od_tensor_release(x);
        }
    }
}

/* A float32 row's exps are od_math_exp_nonpos_f32's, which must give the
 * exp operator's bits for every argument <= 0 (its one-factor 2^n against
 * the operator's two). A row with a 0 at its max, random values down to
 * -110 (results through the subnormals to 0), -0.0, -inf and a random
 * length: softmax's y is exp(x) * (1 / sum) with 1 / sum rounded once,
 * y at the 0 is that factor, and each y must be the exp operator's value
 * times it, bit for bit. */
Test(cpu_softmax, float32_row_exps_are_the_exp_operators)
{
    for (int t = 0; t < 12; t++) {
        int64_t n = rng_int(1, 5000);
        od_tensor *x = t_empty(&n, 1, OD_FLOAT32, CPU);
        float *p = od_tensor_data(x);
        for (int64_t i = 0; i < n; i++)
            p[i] = (float)rng_uniform(t % 2 ? -110.0 : -20.0, 0.0);
        int64_t k = rng_int(0, n - 1);
        p[k] = 0.0f;
        if (n > 2) {
            p[(k + 1) % n] = -0.0f;
            p[(k + 2) % n] = -INFINITY;
        }
        od_value a[3] = {tv(x), od_int(0), od_bool(false)};
        od_tensor *y = call1_ok(OD_OPID__softmax, a, 3);
        od_value ea = tv(x);
        od_tensor *e = call1_ok(OD_OPID_exp, &ea, 1);
        const float *q = od_tensor_data(y), *ev = od_tensor_data(e);
        float inv = q[k];
        for (int64_t i = 0; i < n; i++) {
            float want = ev[i] * inv;
            TCHECK(memcmp(&q[i], &want, 4) == 0, "softmax row of %" PRId64 ": y[%" PRId64 "] = %a for x = %a, want exp %a * %a = %a",
                   n, i, q[i], p[i], ev[i], inv, want);
        }
        od_tensor_release(e);
        od_tensor_release(y);
        od_tensor_release(x);
    }
}

/* Float32 rows of a 16 MiB output or more are written with streaming
 * stores (softmax's through a stack buffer of exps, rows up to 8192): an
 * 18 MB call (rows of 4099, off the 64-byte boundary) and a 16.8 MB one
 * (rows of 20011: log_softmax streams, softmax does not) must equal the
 * same rows in 100-row calls, which take the plain path, bit for bit. */
Test(cpu_softmax, float32_streamed_rows_equal_plain)
{
    const int64_t shapes[2][2] = {{1100, 4099}, {210, 20011}};
    for (int sh = 0; sh < 2; sh++) {
        od_tensor *x = t_rand(shapes[sh], 2, OD_FLOAT32);
        const int64_t M = shapes[sh][0], N = shapes[sh][1], STEP = 100;
        for (int is_log = 0; is_log < 2; is_log++) {
            od_opid id = is_log ? OD_OPID__log_softmax : OD_OPID__softmax;
            od_value a[3] = {tv(x), od_int(1), od_bool(false)};
            od_tensor *y = call1_ok(id, a, 3);
            const float *whole = od_tensor_data(y);
            int64_t bad = 0;
            for (int64_t r0 = 0; r0 < M; r0 += STEP) {
                int64_t r1 = r0 + STEP < M ? r0 + STEP : M;
                od_tensor *part;
                od_error err;
                OKCALL(od_tensor_slice(x, 0, r0, r1, 1, &part, &err));
                a[0] = tv(part);
                od_tensor *yp = call1_ok(id, a, 3);
                bad += memcmp(od_tensor_data(yp), whole + r0 * N, (size_t)((r1 - r0) * N) * sizeof(float)) != 0;
                od_tensor_release(yp);
                od_tensor_release(part);
            }
            TCHECK(bad == 0, "%s of %" PRId64 "x%" PRId64 ": %" PRId64 " 100-row blocks differ from the whole call",
                   is_log ? "log_softmax" : "softmax", M, N, bad);
            od_tensor_release(y);
        }
        od_tensor_release(x);
    }
}

Test(cpu_softmax, half_to_float_and_errors)
{
    int64_t sz[2] = {3, 5};
    od_tensor *h = t_rand_any(sz, 2, OD_FLOAT16);
    softmax_case(h, -1, false, true);
    softmax_case(h, 0, true, true);
    od_tensor *f = t_rand(sz, 2, OD_FLOAT32), *i = t_rand(sz, 2, OD_INT64);
    od_value a[3] = {tv(f), od_int(1), od_bool(true)};
    /* ATen's CPU words (float16 converts here, as on CUDA) */
    call_fails(OD_OPID__softmax, a, 3, OD_OK, "softmax with half to float conversion is not supported on CPU");
    a[0] = tv(i);
    a[2] = od_bool(false);
    call_fails(OD_OPID__softmax, a, 3, OD_OK, "\"softmax_lastdim_kernel_impl\" not implemented for 'Long'");
    call_fails(OD_OPID__log_softmax, a, 3, OD_OK, "\"log_softmax_lastdim_kernel_impl\" not implemented for 'Long'");
    a[1] = od_int(0); /* another dim: the general kernel, softmax_kernel_impl for both */
    call_fails(OD_OPID__softmax, a, 3, OD_OK, "\"softmax_kernel_impl\" not implemented for 'Long'");
    call_fails(OD_OPID__log_softmax, a, 3, OD_OK, "\"softmax_kernel_impl\" not implemented for 'Long'");
    a[0] = tv(f);
    a[1] = od_int(2);
    call_fails(OD_OPID__softmax, a, 3, OD_OK, "Dimension out of range (expected to be in range of [-2, 1], but got 2)");
    od_tensor_release(h);
    od_tensor_release(f);
    od_tensor_release(i);
}

/* ---- layer norm ---- */

static void layer_norm_case(od_tensor *x, int k, od_tensor *w, od_tensor *b, double eps)
{
    int nd = x->ndim, axis = nd - k;
    int64_t ns[OD_MAX_DIMS];
    for (int i = 0; i < k; i++)
        ns[i] = x->sizes[axis + i];
    od_value a[5] = {tv(x), ilist(ns, k), w ? tv(w) : od_none(), b ? tv(b) : od_none(), od_double(eps)};
    od_stack s;
    od_error err;
    od_status st = call_id(OD_OPID_native_layer_norm, a, 5, &s, &err);
    TCHECK(st == OD_OK && s.nrets == 3, "native_layer_norm: %s", err.message);
    od_tensor *y = s.rets[0].u.t, *mean = s.rets[1].u.t, *rstd = s.rets[2].u.t;
    int64_t ssz[OD_MAX_DIMS];
    int64_t M = 1, N = 1;
    for (int i = 0; i < nd; i++) {
        ssz[i] = i < axis ? x->sizes[i] : 1;
        if (i < axis)
            M *= x->sizes[i];
        else
            N *= x->sizes[i];
    }
    TCHECK(same_shape(y, x->sizes, nd) && y->dtype == x->dtype, "layer_norm out shape/dtype");
    TCHECK(same_shape(mean, ssz, nd) && same_shape(rstd, ssz, nd), "layer_norm mean/rstd shape");
    double *v = get_all(x), *gy = get_all(y), *gm = get_all(mean), *gr = get_all(rstd);
    double *wv = w ? get_all(w) : NULL, *bv = b ? get_all(b) : NULL;
    od_dtype dt = x->dtype;
    double ceps = dt == OD_FLOAT64 ? 1e-13 : 2e-6;
    for (int64_t r = 0; r < M; r++) {
        long double mu = 0, var = 0;
        for (int64_t j = 0; j < N; j++)
            mu += v[r * N + j];
        mu = N ? mu / N : 0; /* ATen: an empty row's mean is 0 (and its rstd NaN) */
        for (int64_t j = 0; j < N; j++)
            var += (v[r * N + j] - mu) * (v[r * N + j] - mu);
        var /= N;
        long double rs = 1.0L / sqrtl(var + eps);
        double rm = cast_value((double)mu, dt), rr = cast_value((double)rs, dt);
        TCHECK(close_to(gm[r], rm, 2 * dtype_eps(dt) * fabs(rm) + ceps * 4), "layer_norm mean[%" PRId64 "] = %.10g, want %.10g",
               r, gm[r], rm);
        /* ATen's float moments lose about N ulps of mean^2 in the variance
         * (a row of mean 1 and std 0.03 is ~1000x worse conditioned) */
        double cond = (double)(mu * mu / (var + eps));
        TCHECK(close_to(gr[r], rr, (2 * dtype_eps(dt) + ceps + 2 * dtype_eps(dt) * (double)N * cond) * fabs(rr)),
               "layer_norm rstd[%" PRId64 "] = %.10g, want %.10g", r, gr[r], rr);
        for (int64_t j = 0; j < N; j++) {
            long double yv = (v[r * N + j] - mu) * rs * (wv ? wv[j] : 1.0) + (bv ? bv[j] : 0.0);
            double ry = cast_value((double)yv, dt);
            /* torch's x * rstd - rstd * mean loses |x| + |mean| (times rstd)
             * to rounding, not |x - mean|: the kernel computes it that way */
            double tol = 2 * dtype_eps(dt) * fabs(ry) +
                         ceps * 8 * ((fabs(v[r * N + j]) + fabs((double)mu)) * (double)rs * fabs(wv ? wv[j] : 1) + 1);
            if (dt == OD_FLOAT16 || dt == OD_BFLOAT16) /* mean and rstd are rounded to float, not half */
                tol += 1e-5 * (1 + fabs(ry));
            TCHECK(close_to(gy[r * N + j], ry, tol), "layer_norm(%s) out[%" PRId64 ",%" PRId64 "] = %.10g, want %.10g",
                   dtn(dt), r, j, gy[r * N + j], ry);
        }
    }
    free(v);
    free(gy);
    free(gm);
    free(gr);
    free(wv);
    free(bv);
    od_stack_release_rets(&s);
}

Test(cpu_softmax, layer_norm_random)
{
    for (int t = 0; t < 200; t++) {
        od_dtype dt = PICK(FLOAT_DTS);
        int nd = (int)rng_int(1, 4);
        int64_t sz[OD_MAX_DIMS];
        rand_sizes(sz, nd, 1, 6);
        if (t % 20 == 0)
            sz[0] = 0;
        if (t % 7 == 0)
            sz[nd - 1] = rng_int(100, 700); /* long rows: vectorised paths and tails */
        int k = (int)rng_int(1, nd);
        od_tensor *x = t_rand_any(sz, nd, dt);
        od_tensor *w = rng_next() % 3 ? t_rand_any(sz + nd - k, k, dt) : NULL;
        od_tensor *b = rng_next() % 3 ? t_rand_any(sz + nd - k, k, dt) : NULL;
        layer_norm_case(x, k, w, b, rng_next() % 2 ? 1e-5 : rng_uniform(1e-6, 1e-1));
        od_tensor_release(x);
        od_tensor_release(w);
        od_tensor_release(b);
    }
}

Test(cpu_softmax, layer_norm_errors)
{
    int64_t sz[3] = {2, 3, 4}, ws[1] = {3}, ns2[2] = {3, 4}, ns1[1] = {4};
    od_tensor *x = t_rand(sz, 3, OD_FLOAT32), *w = t_rand(ws, 1, OD_FLOAT32), *xi = t_rand(sz, 3, OD_INT64);
    od_tensor *wd = t_rand(ns1, 1, OD_FLOAT64);
    od_value a[5] = {tv(x), ilist(ns1, 1), tv(w), od_none(), od_double(1e-5)};
    call_fails(OD_OPID_native_layer_norm, a, 5, OD_EMISMATCH,
               "Expected weight to be of same shape as normalized_shape, but got weight of shape [3] and "
               "normalized_shape = [4]");
    a[2] = od_none();
    a[3] = tv(w);
    call_fails(OD_OPID_native_layer_norm, a, 5, OD_EMISMATCH, "Expected bias to be of same shape as normalized_shape");
    a[3] = od_none();
    int64_t bad[2] = {4, 3};
    a[1] = ilist(bad, 2);
    call_fails(OD_OPID_native_layer_norm, a, 5, OD_EMISMATCH,
               "Given normalized_shape=[4, 3], expected input with shape [*, 4, 3], but got input of size[2, 3, 4]");
    a[1] = ilist(NULL, 0);
    call_fails(OD_OPID_native_layer_norm, a, 5, OD_EINVAL, "Expected normalized_shape to be at least 1-dimensional");
    a[1] = ilist(ns2, 2);
    a[0] = tv(xi);
    call_fails(OD_OPID_native_layer_norm, a, 5, OD_OK, "not implemented for 'Long'");
    a[0] = tv(x);
    a[1] = ilist(ns1, 1);
    a[2] = tv(wd);
    call_fails(OD_OPID_native_layer_norm, a, 5, OD_EMISMATCH, "weight to have the same dtype as input");
    od_tensor_release(x);
    od_tensor_release(w);
    od_tensor_release(xi);
    od_tensor_release(wd);
}

/* ATen returns an empty input before it dispatches on the dtype, so the
 * softmax family takes integer and bool inputs when they are empty; layer
 * norm over an empty normalized shape gives mean 0 and rstd NaN (issue 17,
 * classes 8 and 11). */
Test(cpu_softmax, empty_inputs_as_torch)
{
    int64_t s03[2] = {0, 3}, s23[2] = {2, 3}, s20[2] = {2, 0};
    static const od_dtype dts[] = {OD_INT64, OD_BOOL, OD_UINT8};
    for (int k = 0; k < 3; k++)
        for (int log = 0; log < 2; log++) {
            od_tensor *x = t_empty(s03, 2, dts[k], CPU);
            od_value a[3] = {tv(x), od_int(1), od_bool(false)};
            od_tensor *o = call1_ok(log ? OD_OPID__log_softmax : OD_OPID__softmax, a, 3);
            TCHECK(o->dtype == dts[k] && same_shape(o, s03, 2), "empty %s softmax keeps the dtype", dtn(dts[k]));
            od_tensor_release(o);
            od_tensor *y = t_rand(s23, 2, dts[k]);
            od_value b[3] = {tv(y), od_int(1), od_bool(false)};
            call_fails(log ? OD_OPID__log_softmax : OD_OPID__softmax, b, 3, OD_EUNSUPPORTED, "not implemented for");
            od_tensor_release(y);
            od_tensor_release(x);
        }
    od_tensor *e = t_empty(s20, 2, OD_FLOAT32, CPU);
    od_value ln[5] = {tv(e), ilist((int64_t[]){0}, 1), od_none(), od_none(), od_double(1e-5)};
    od_stack st;
    od_error err;
    TCHECK(call_id(OD_OPID_native_layer_norm, ln, 5, &st, &err) == OD_OK, "layer_norm: %s", err.message);
    od_tensor *mean = st.rets[1].u.t, *rstd = st.rets[2].u.t;
    for (int64_t i = 0; i < 2; i++) {
        int64_t idx[2] = {i, 0};
        TCHECK(get_d(mean, idx) == 0.0 && isnan(get_d(rstd, idx)), "empty row: mean 0, rstd NaN");
    }
    od_stack_release_rets(&st);
    od_tensor_release(e);
}

/* native_layer_norm replays ATen 1.13's kernel (Welford moments per lane,
 * x * rstd - rstd * mean with fma), so rows where that differs from exact
 * arithmetic give torch's answers. Values are torch 1.13's. */
static od_tensor *ln_row(od_dtype dt, const double *v, int64_t n)
{
    od_tensor *t = t_rand(&n, 1, dt);
    set_all(t, v);
    return t;
}

Test(cpu_softmax, layer_norm_rounds_as_aten)
{
    double c8[8], pm[25];
    for (int i = 0; i < 8; i++)
        c8[i] = 4269.366487826809;
    int64_t n8 = 8, n25 = 25, n1 = 1;
    od_tensor *cst = ln_row(OD_FLOAT64, c8, 8);
    od_value a[5] = {tv(cst), ilist(&n8, 1), od_none(), od_none(), od_double(1e-5)};
    od_stack s;
    od_error err;
    TCHECK(call_id(OD_OPID_native_layer_norm, a, 5, &s, &err) == OD_OK, "%s", err.message);
    double *y = get_all(s.rets[0].u.t);
    TCHECK(y[0] == -8.079909320002042e-11, "a constant row's fma residue: %.17g, torch -8.079909320002042e-11", y[0]);
    free(y);
    od_stack_release_rets(&s);
    a[4] = od_double(0); /* eps 0 on a constant row: rstd inf, NaN out */
    TCHECK(call_id(OD_OPID_native_layer_norm, a, 5, &s, &err) == OD_OK, "%s", err.message);
    y = get_all(s.rets[0].u.t);
    TCHECK(isnan(y[0]), "eps = 0 on a constant row is NaN");
    free(y);
    od_stack_release_rets(&s);
    /* +-1e300 in one lane: the variance overflows, the mean stays finite, out 0 */
    for (int i = 0; i < 25; i++)
        pm[i] = i == 18 ? 1e300 : i == 22 ? -1e300 : 0.25 * (i % 5) - 0.5;
    od_tensor *big = ln_row(OD_FLOAT64, pm, 25);
    od_value b[5] = {tv(big), ilist(&n25, 1), od_none(), od_none(), od_double(1e-5)};
    TCHECK(call_id(OD_OPID_native_layer_norm, b, 5, &s, &err) == OD_OK, "%s", err.message);
    y = get_all(s.rets[0].u.t);
    double *rs = get_all(s.rets[2].u.t);
    TCHECK(y[0] == 0.0 && y[18] == 0.0 && rs[0] == 0.0, "+-1e300 row: rstd 0, out 0");
    free(y);
    free(rs);
    od_stack_release_rets(&s);
    /* bfloat16, one element with a bias: exactly the bias (no fma there) */
    od_tensor *one = ln_row(OD_BFLOAT16, (double[]){-2490368.0}, 1);
    od_tensor *bias = ln_row(OD_BFLOAT16, (double[]){-1.3359375}, 1);
    od_value c[5] = {tv(one), ilist(&n1, 1), od_none(), tv(bias), od_double(0.7928)};
    TCHECK(call_id(OD_OPID_native_layer_norm, c, 5, &s, &err) == OD_OK, "%s", err.message);
    y = get_all(s.rets[0].u.t);
    TCHECK(y[0] == -1.3359375, "bfloat16 [x] + bias is the bias");
    free(y);
    od_stack_release_rets(&s);
    od_tensor_release(cst);
    od_tensor_release(big);
    od_tensor_release(one);
    od_tensor_release(bias);
}

/* a * b + c, fused for bfloat16's moments only: torch 1.13's float32
 * moments fuse none (test_norm.py compares them with torch bit for bit). */
static float ref_fma(float a, float b, float c, int H) { return H == 2 ? fmaf(a, b, c) : a * b + c; }

/* ATen 1.13's float RowwiseMoments one chunk at a time, as the kernel was
 * written before it ran several chunks interleaved (and, for float32 rows of
 * 2048 or more, 16 chunks in AVX-512): neither must change a bit. L lanes,
 * H vectors per load (bfloat16: 2). */
static void ref_moments_f32(const float *x, int64_t N, int H, float *mean, float *var)
{
    enum { L = 8, CH = 16 };
    int64_t n = N / (L * H), m = (n + CH - 1) / CH, depth = 1;
    while (((int64_t)1 << depth) < m)
        depth++;
    int64_t s0[64] = {0};
    float s1[64][L] = {{0}}, s2[64][L] = {{0}};
#define REF_ADD(m0a, a1, a2, m0, b1, b2)                                \
    do {                                                               \
        int64_t t_ = (m0) + (m0a);                                     \
        float c_ = t_ == 0 ? 0.0f : (float)(m0a) / (float)t_;          \
        float d_ = (a1) - (b1);                                        \
        (b1) = ref_fma(c_, d_, b1, H);                                 \
        (b2) = (b2) + ref_fma(d_ * d_ * c_, (float)(m0), a2, H);       \
        (m0) = t_;                                                     \
    } while (0)
    for (int64_t i = 0; i < m; i++) {
        int64_t m0 = n - i * CH < CH ? n - i * CH : CH, k0 = s0[0];
        for (int h = 0; h < H; h++) {
            float v1[L] = {0}, v2[L] = {0};
            for (int64_t j = 0; j < m0; j++) {
                float c = 1.0f / (float)(j + 1);
                for (int l = 0; l < L; l++) {
                    float xv = x[(i * CH + j) * L * H + h * L + l], d = xv - v1[l];
                    v1[l] = d * c + v1[l];
                    v2[l] = ref_fma(d, xv - v1[l], v2[l], H);
                }
            }
            for (int l = 0; l < L; l++) {
                k0 = s0[0];
                REF_ADD(m0, v1[l], v2[l], k0, s1[0][l], s2[0][l]);
            }
            s0[0] = k0;
        }
        int64_t mask = i + 1;
        for (int64_t j = 1; j < depth && (mask & 1) == 0; j++, mask >>= 1) {
            int64_t kj = s0[j];
            for (int l = 0; l < L; l++) {
                kj = s0[j];
                REF_ADD(s0[j - 1], s1[j - 1][l], s2[j - 1][l], kj, s1[j][l], s2[j][l]);
                s1[j - 1][l] = s2[j - 1][l] = 0;
            }
            s0[j] = kj;
            s0[j - 1] = 0;
        }
    }
    for (int64_t i = 1; i < depth; i++) {
        int64_t k0 = s0[0];
        for (int l = 0; l < L; l++) {
            k0 = s0[0];
            REF_ADD(s0[i], s1[i][l], s2[i][l], k0, s1[0][l], s2[0][l]);
        }
        s0[0] = k0;
    }
    int64_t k = 0;
    float m1 = 0, m2 = 0;
    for (int64_t i = n * L * H; i < N; i++) {
        float d = x[i] - m1;
        ++k;
        m1 = m1 + d / (float)k;
        m2 = ref_fma(d, x[i] - m1, m2, H);
    }
    for (int l = 0; l < L; l++)
        REF_ADD(n * H, s1[0][l], s2[0][l], k, m1, m2);
#undef REF_ADD
    *mean = m1;
    *var = m2 / (float)N;
}

Test(cpu_softmax, layer_norm_moments_bit_exact_by_length)
{
    static const int64_t lens[] = {1, 7, 8, 9, 127, 128, 129, 255, 256, 257, 383, 384, 511, 512, 513, 640, 767,
                                   1000, 1023, 1024, 1025, 1280, 2055, 4096, 5000, 9999, 16387, 70001};
    float *x = malloc(sizeof(float) * 70001);
    for (size_t t = 0; t < sizeof lens / sizeof lens[0]; t++) {
        for (int rep = 0; rep < 3; rep++) {
            int64_t n = lens[t];
            double scale = rep == 0 ? 1.0 : rep == 1 ? 1e4 : 1e-3, shift = rep == 2 ? 100.0 : 0.0;
            for (int64_t i = 0; i < n; i++)
                x[i] = (float)(rng_uniform(-1, 1) * scale + shift);
            for (int bf = 0; bf < 2; bf++) {
                double mean, var;
                float rm, rv;
                od_cpu_row_moments(bf ? OD_ROW_MOMENTS_BF16 : OD_ROW_MOMENTS_F32, x, n, &mean, &var);
                ref_moments_f32(x, n, bf ? 2 : 1, &rm, &rv);
                TCHECK(mean == (double)rm && var == (double)rv, "%s row of %" PRId64 ": %a %a, want %a %a",
                       bf ? "bfloat16" : "float", n, mean, var, (double)rm, (double)rv);
            }
        }
    }
    free(x);
}

/* A float32 output of 16 MiB or more is written with streaming stores
 * (layer_norm.c's LN_STREAM_BYTES, on AVX-512 hosts): its bits must equal
 * the plain path's, which the same rows take in calls of 100 rows (1.6 MB
 * each). Rows of 4099 floats start off a 64-byte boundary, so the aligned
 * lines, the head before them and the tail after them are all exercised. */
Test(cpu_softmax, layer_norm_streamed_output_equals_plain)
{
    enum { M = 1100, N = 4099, STEP = 100 };
    int64_t sz[2] = {M, N}, ws[1] = {N}, ns[1] = {N};
    od_tensor *x = t_rand(sz, 2, OD_FLOAT32), *w = t_rand(ws, 1, OD_FLOAT32), *b = t_rand(ws, 1, OD_FLOAT32);
    for (int affine = 0; affine < 2; affine++) {
        od_value a[5] = {tv(x), ilist(ns, 1), affine ? tv(w) : od_none(), affine ? tv(b) : od_none(),
                         od_double(1e-5)};
        od_stack s;
        od_error err;
        TCHECK(call_id(OD_OPID_native_layer_norm, a, 5, &s, &err) == OD_OK, "%s", err.message);
        double *whole[3];
        for (int k = 0; k < 3; k++)
            whole[k] = get_all(s.rets[k].u.t);
        od_stack_release_rets(&s);
        int64_t bad = 0;
        for (int64_t r0 = 0; r0 < M; r0 += STEP) {
            od_tensor *part;
            OKCALL(od_tensor_slice(x, 0, r0, r0 + STEP, 1, &part, &err));
            a[0] = tv(part);
            TCHECK(call_id(OD_OPID_native_layer_norm, a, 5, &s, &err) == OD_OK, "%s", err.message);
            for (int k = 0; k < 3; k++) {
                double *got = get_all(s.rets[k].u.t);
                int64_t per = k == 0 ? N : 1;
                for (int64_t i = 0; i < STEP * per; i++)
                    bad += memcmp(&got[i], &whole[k][r0 * per + i], sizeof(double)) != 0;
                free(got);
            }
            od_stack_release_rets(&s);
            od_tensor_release(part);
        }
        TCHECK(bad == 0, "layer_norm of %dx%d (affine %d): %" PRId64 " values differ from 100-row calls", M, N,
               affine, bad);
        for (int k = 0; k < 3; k++)
            free(whole[k]);
    }
    od_tensor_release(x);
    od_tensor_release(w);
    od_tensor_release(b);
}
