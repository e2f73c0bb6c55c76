/* test_cpu_blas.c — CPU mm, bmm, addmm and dot through the dispatcher.
 *
 * References are naive loops computed here in long double (exact modular
 * uint64 arithmetic for integers) on fresh random inputs: every size from 1
 * to 70 in each dim over the run, contiguous, transposed and strided (not
 * BLAS-compatible) operands, broadcast batches, addmm's self broadcast,
 * beta = 0 with NaN in self, empty products, and torch's error messages.
 * The seed is printed on failure; OD_TEST_SEED=<n> reruns it.
 */
#include "cpu_testutil.h"

TestSuite(cpu_blas, .init = test_setup);

/* A random [r, c] matrix: contiguous, a transpose of a [c, r] one, a slice of
 * rows/columns of a larger one (lda > cols), or strided both ways (needs a
 * copy before BLAS). */
static od_tensor *rand_matrix(int64_t r, int64_t c, od_dtype dt, int layout)
{
    int64_t sz[2] = {r, c};
    od_tensor *x = NULL, *base = NULL;
    switch (layout) {
    case 0:
        return t_rand(sz, 2, dt);
    case 1: {
        int64_t tsz[2] = {c, r};
        base = t_rand(tsz, 2, dt);
        OKCALL(od_tensor_t(base, &x, &e_));
        break;
    }
    case 2: {
        int64_t big[2] = {r + 3, c + 5};
        base = t_rand(big, 2, dt);
        od_tensor *a = NULL;
        OKCALL(od_tensor_slice(base, 0, 2, 2 + r, 1, &a, &e_));
        OKCALL(od_tensor_slice(a, 1, 1, 1 + c, 1, &x, &e_));
        od_tensor_release(a);
        break;
    }
    default: {
        int64_t big[2] = {2 * r, 2 * c};
        base = t_rand(big, 2, dt);
        od_tensor *a = NULL;
        OKCALL(od_tensor_slice(base, 0, 0, 2 * r, 2, &a, &e_));
        OKCALL(od_tensor_slice(a, 1, 0, 2 * c, 2, &x, &e_));
        od_tensor_release(a);
        break;
    }
    }
    od_tensor_release(base);
    TCHECK(same_shape(x, sz, 2), "rand_matrix layout %d", layout);
    return x;
}

static bool is_int(od_dtype dt) { return od_dtype_is_integral(dt, false); }

/* Compares out[i, j] (2-D, or batch b of 3-D) with beta*self + alpha*A@B. */
static void check_product(const od_tensor *out, const od_tensor *A, const od_tensor *B, int64_t b,
                          const od_tensor *self, double beta, double alpha, const char *what)
{
    od_dtype dt = out->dtype;
    bool batched = out->ndim == 3;
    int64_t n = out->sizes[batched], m = out->sizes[batched + 1], k = A->sizes[batched + 1];
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < m; j++) {
            int64_t oi[3] = {b, i, j}, *o = batched ? oi : oi + 1;
            long double acc = 0, aabs = 0;
            uint64_t iacc = 0;
            for (int64_t kk = 0; kk < k; kk++) {
                int64_t ai[3] = {b, i, kk}, bi[3] = {b, kk, j};
                int64_t *pa = batched ? ai : ai + 1, *pb = batched ? bi : bi + 1;
                if (is_int(dt)) {
                    iacc += (uint64_t)get_i(A, pa) * (uint64_t)get_i(B, pb);
                } else {
                    long double p = (long double)get_d(A, pa) * get_d(B, pb);
                    acc += p;
                    aabs += fabsl(p);
                }
            }
            if (is_int(dt)) {
                uint64_t ref = (uint64_t)(int64_t)alpha * iacc;
                if (self && beta != 0) {
                    int64_t si[2] = {self->ndim == 2 && self->sizes[0] > 1 ? i : 0,
                                     self->ndim >= 1 && self->sizes[self->ndim - 1] > 1 ? j : 0};
                    int64_t *ps = self->ndim == 2 ? si : si + 1;
                    ref += (uint64_t)(int64_t)beta * (uint64_t)get_i(self, ps);
                }
                int64_t want = wrap_to((int64_t)ref, dt), got = get_i(out, o);
                TCHECK(got == want, "%s %s [%" PRId64 ",%" PRId64 "] = %" PRId64 ", want %" PRId64,
                       what, dtn(dt), i, j, got, want);
                continue;
            }
            long double ref = (long double)alpha * acc;
            double sv = 0;
            if (self && beta != 0) {
                int64_t si[2] = {self->ndim == 2 && self->sizes[0] > 1 ? i : 0,
                                 self->ndim >= 1 && self->sizes[self->ndim - 1] > 1 ? j : 0};
                int64_t *ps = self->ndim == 2 ? si : self->ndim == 1 ? si + 1 : NULL;
                sv = ps ? get_d(self, ps) : get_d(self, si);
                ref += (long double)beta * sv;
            }
            double r = cast_value((double)ref, dt);
            /* float accumulation (sgemm, half types) may err by ~k eps32 of sum|a*b| */
            double acc_eps = dt == OD_FLOAT64 ? ldexp(1.0, -50) : ldexp(1.0, -21);
            double tol = 2 * dtype_eps(dt) * fabs(r) +
                         acc_eps * (double)(fabsl(alpha * aabs) + fabs(beta * sv)) * (1 + (double)k / 16);
            double got = get_d(out, o);
            TCHECK(close_to(got, r, tol), "%s %s n=%" PRId64 " k=%" PRId64 " m=%" PRId64
                   " [%" PRId64 ",%" PRId64 "] = %.10g, want %.10g (tol %g)",
                   what, dtn(dt), n, k, m, i, j, got, r, tol);
        }
}

Test(cpu_blas, mm_float_all_sizes_1_to_70_and_layouts)
{
    /* Every size 1..70 appears as n, k and m over the run. */
    for (int64_t s = 1; s <= 70; s++) {
        for (int rep = 0; rep < 3; rep++) {
            int64_t dims[3] = {rng_int(1, 70), rng_int(1, 70), rng_int(1, 70)};
            dims[rep] = s;
            int64_t n = dims[0], k = dims[1], m = dims[2];
            od_dtype dt = rng_next() % 2 ? OD_FLOAT32 : OD_FLOAT64;
            int la = (int)(rng_next() % 4), lb = (int)(rng_next() % 4);
            od_tensor *A = rand_matrix(n, k, dt, la), *B = rand_matrix(k, m, dt, lb);
            od_value a[2] = {tv(A), tv(B)};
            od_tensor *out = call1_ok(OD_OPID_mm, a, 2);
            int64_t want[2] = {n, m};
            TCHECK(same_shape(out, want, 2) && out->dtype == dt, "mm shape/dtype");
            char what[64];
            snprintf(what, sizeof what, "mm(layouts %d,%d)", la, lb);
            check_product(out, A, B, 0, NULL, 0, 1, what);
            od_tensor_release(out);
            od_tensor_release(A);
            od_tensor_release(B);
        }
    }
}

Test(cpu_blas, mm_integer_and_half_dtypes)
{
    static const od_dtype dts[] = {OD_INT64, OD_INT32, OD_INT16, OD_INT8, OD_UINT8, OD_FLOAT16, OD_BFLOAT16};
    for (int t = 0; t < 60; t++) {
        od_dtype dt = dts[t % 7];
        int64_t n = rng_int(1, 40), k = rng_int(1, 40), m = rng_int(1, 40);
        od_tensor *A = rand_matrix(n, k, dt, (int)(rng_next() % 4));
        od_tensor *B = rand_matrix(k, m, dt, (int)(rng_next() % 4));
        od_value a[2] = {tv(A), tv(B)};
        od_tensor *out = call1_ok(OD_OPID_mm, a, 2);
        TCHECK(out->dtype == dt, "mm(%s) gave %s", dtn(dt), dtn(out->dtype));
        check_product(out, A, B, 0, NULL, 0, 1, "mm");
        od_tensor_release(out);
        od_tensor_release(A);
        od_tensor_release(B);
    }
}

Test(cpu_blas, mm_int64_wraps_on_overflow)
{
    int64_t n = 3, k = 5, m = 4;
    od_tensor *A = rand_matrix(n, k, OD_INT64, 0), *B = rand_matrix(k, m, OD_INT64, 1);
    int64_t *pa = od_tensor_data(A);
    for (int i = 0; i < n * k; i++)
        pa[i] = (int64_t)rng_next();
    od_value a[2] = {tv(A), tv(B)};
    int64_t *pb = (int64_t *)B->storage->data;
    for (int i = 0; i < k * m; i++)
        pb[i] = (int64_t)rng_next();
    od_tensor *out = call1_ok(OD_OPID_mm, a, 2);
    check_product(out, A, B, 0, NULL, 0, 1, "mm(int64 overflow)");
    od_tensor_release(out);
    od_tensor_release(A);
    od_tensor_release(B);
}

Test(cpu_blas, bmm_layouts_and_broadcast_batches)
{
    for (int t = 0; t < 40; t++) {
        od_dtype dt = t % 5 == 4 ? OD_INT32 : t % 2 ? OD_FLOAT32 : OD_FLOAT64;
        int64_t bs = rng_int(0, 4), n = rng_int(1, 20), k = rng_int(1, 20), m = rng_int(1, 20);
        int64_t sa[3] = {bs, n, k}, sb[3] = {bs, k, m};
        od_tensor *A = t_rand_any(sa, 3, dt), *B;
        if (rng_next() % 3 == 0) { /* one matrix broadcast over the batch (stride 0) */
            od_tensor *one = rand_matrix(k, m, dt, (int)(rng_next() % 4)), *u = NULL;
            OKCALL(od_tensor_unsqueeze(one, 0, &u, &e_));
            OKCALL(od_tensor_expand(u, sb, 3, &B, &e_));
            od_tensor_release(one);
            od_tensor_release(u);
        } else {
            B = t_rand_any(sb, 3, dt);
        }
        od_value a[2] = {tv(A), tv(B)};
        od_tensor *out = call1_ok(OD_OPID_bmm, a, 2);
        int64_t want[3] = {bs, n, m};
        TCHECK(same_shape(out, want, 3), "bmm shape");
        for (int64_t b = 0; b < bs; b++)
            check_product(out, A, B, b, NULL, 0, 1, "bmm");
        od_tensor_release(out);
        od_tensor_release(A);
        od_tensor_release(B);
    }
}

Test(cpu_blas, addmm_self_broadcast_beta_alpha)
{
    for (int t = 0; t < 80; t++) {
        od_dtype dt = t % 6 == 5 ? OD_INT64 : t % 6 == 4 ? OD_FLOAT16 : t % 2 ? OD_FLOAT32 : OD_FLOAT64;
        int64_t n = rng_int(1, 30), k = rng_int(1, 30), m = rng_int(1, 30);
        od_tensor *A = rand_matrix(n, k, dt, (int)(rng_next() % 4));
        od_tensor *B = rand_matrix(k, m, dt, (int)(rng_next() % 4));
        int form = (int)(rng_next() % 6);
        int64_t ss[2];
        int snd;
        switch (form) {
        case 0: ss[0] = n, ss[1] = m, snd = 2; break;
        case 1: ss[0] = m, snd = 1; break;
        case 2: ss[0] = 1, ss[1] = m, snd = 2; break;
        case 3: ss[0] = n, ss[1] = 1, snd = 2; break;
        case 4: ss[0] = 1, snd = 1; break;
        default: snd = 0; break;
        }
        od_tensor *self = snd ? t_rand_any(ss, snd, dt) : t_rand(ss, 0, dt);
        od_value beta, alpha;
        double bv, av;
        if (is_int(dt) && t % 12 == 11) {
            /* floats truncate toward zero for integral dtypes (1.7 -> 1, -0.5 -> 0) */
            double fb = rng_uniform(-3.9, 3.9), fa = rng_uniform(-3.9, 3.9);
            bv = trunc(fb);
            av = trunc(fa);
            beta = od_double(fb);
            alpha = od_double(fa);
        } else if (is_int(dt)) {
            bv = (double)rng_int(-3, 3);
            av = (double)rng_int(-3, 3);
            beta = od_int((int64_t)bv);
            alpha = od_int((int64_t)av);
        } else {
            bv = rng_next() % 4 == 0 ? 0.0 : (float)rng_uniform(-2, 2);
            av = (float)rng_uniform(-2, 2);
            beta = od_double(bv);
            alpha = od_double(av);
        }
        if (!is_int(dt) && bv == 0.0 && snd) { /* beta == 0: NaN in self must not leak */
            int64_t z[2] = {0, 0};
            set_d(self, z, NAN);
        }
        od_value a[5] = {tv(self), tv(A), tv(B), beta, alpha};
        od_tensor *out = call1_ok(OD_OPID_addmm, a, 5);
        int64_t want[2] = {n, m};
        TCHECK(same_shape(out, want, 2) && out->dtype == dt, "addmm shape/dtype");
        check_product(out, A, B, 0, self, bv, av, "addmm");
        od_tensor_release(out);
        od_tensor_release(self);
        od_tensor_release(A);
        od_tensor_release(B);
    }
}

Test(cpu_blas, dot_dtypes_strides_and_empty)
{
    static const od_dtype dts[] = {OD_FLOAT32, OD_FLOAT64, OD_FLOAT16, OD_BFLOAT16, OD_INT64, OD_INT32, OD_UINT8};
    for (int t = 0; t < 70; t++) {
        od_dtype dt = dts[t % 7];
        int64_t n = t < 7 ? 0 : rng_int(1, 300);
        od_tensor *x = t_rand_any(&n, 1, dt), *y = t_rand_any(&n, 1, dt);
        od_value a[2] = {tv(x), tv(y)};
        od_tensor *out = call1_ok(OD_OPID_dot, a, 2);
        TCHECK(out->ndim == 0 && out->dtype == dt, "dot shape/dtype");
        long double acc = 0, aabs = 0;
        uint64_t iacc = 0;
        for (int64_t i = 0; i < n; i++) {
            iacc += (uint64_t)get_i(x, &i) * (uint64_t)get_i(y, &i);
            long double p = (long double)get_d(x, &i) * get_d(y, &i);
            acc += p;
            aabs += fabsl(p);
        }
        int64_t z = 0;
        if (is_int(dt)) {
            TCHECK(get_i(out, &z) == wrap_to((int64_t)iacc, dt), "dot(%s) = %" PRId64 ", want %" PRId64,
                   dtn(dt), get_i(out, &z), wrap_to((int64_t)iacc, dt));
        } else {
            double r = cast_value((double)acc, dt);
            double tol = 2 * dtype_eps(dt) * fabs(r) + (dt == OD_FLOAT64 ? 1e-14 : 1e-6) * (double)aabs;
            TCHECK(close_to(get_d(out, &z), r, tol), "dot(%s, n=%" PRId64 ") = %.10g, want %.10g", dtn(dt), n,
                   get_d(out, &z), r);
        }
        od_tensor_release(out);
        od_tensor_release(x);
        od_tensor_release(y);
    }
    /* a broadcast (stride 0) vector */
    int64_t n = 17, one = 1;
    od_tensor *x = t_rand(&n, 1, OD_FLOAT32), *s1 = t_rand(&one, 1, OD_FLOAT32), *y = NULL;
    OKCALL(od_tensor_expand(s1, &n, 1, &y, &e_));
    od_value a[2] = {tv(x), tv(y)};
    od_tensor *out = call1_ok(OD_OPID_dot, a, 2);
    double acc = 0, v = ((float *)od_tensor_data(s1))[0];
    for (int64_t i = 0; i < n; i++)
        acc += get_d(x, &i) * v;
    TCHECK(fabs(*(float *)od_tensor_data(out) - acc) <= 1e-5 * (1 + fabs(acc)), "dot with an expanded vector");
    od_tensor_release(out);
    od_tensor_release(x);
    od_tensor_release(y);
    od_tensor_release(s1);
}

Test(cpu_blas, empty_products)
{
    const int64_t cases[][3] = {{3, 0, 4}, {0, 5, 4}, {3, 5, 0}, {0, 0, 0}};
    for (size_t c = 0; c < 4; c++) {
        for (int d = 0; d < 3; d++) {
            od_dtype dt = d == 0 ? OD_FLOAT32 : d == 1 ? OD_INT64 : OD_FLOAT16;
            int64_t n = cases[c][0], k = cases[c][1], m = cases[c][2];
            int64_t sa[2] = {n, k}, sb[2] = {k, m}, so[2] = {n, m};
            od_tensor *A = t_rand(sa, 2, dt), *B = t_rand(sb, 2, dt);
            od_value a[2] = {tv(A), tv(B)};
            od_tensor *out = call1_ok(OD_OPID_mm, a, 2);
            TCHECK(same_shape(out, so, 2), "mm of empty: shape");
            check_product(out, A, B, 0, NULL, 0, 1, "mm(empty)"); /* k == 0: zeros */
            od_tensor_release(out);
            /* addmm with k == 0: beta * self */
            od_tensor *self = t_rand(so, 2, dt);
            od_value ad[5] = {tv(self), tv(A), tv(B), od_int(2), od_int(3)};
            out = call1_ok(OD_OPID_addmm, ad, 5);
            check_product(out, A, B, 0, self, 2, 3, "addmm(empty)");
            od_tensor_release(out);
            od_tensor_release(self);
            od_tensor_release(A);
            od_tensor_release(B);
        }
    }
}

/* ATen returns before it looks at the dtypes when there is nothing to
 * multiply, so an empty mm / bmm takes bool and mixed dtypes: mm's result has
 * self's dtype, bmm's mat2's; k == 0 gives zeros. Non-empty, both refuse. */
Test(cpu_blas, trivial_products_take_any_dtype)
{
    static const od_dtype dts[] = {OD_BOOL, OD_INT64, OD_FLOAT32, OD_FLOAT16, OD_UINT8};
    for (int t = 0; t < 40; t++) {
        od_dtype da = dts[rng_next() % 5], db = dts[rng_next() % 5];
        bool batched = t % 2;
        int64_t n = rng_int(0, 3), k = rng_int(0, 3), m = rng_int(0, 3), bsz = rng_int(0, 2);
        if (n && k && m && (!batched || bsz)) /* force a trivial product */
            k = 0;
        int64_t sa[3] = {bsz, n, k}, sb[3] = {bsz, k, m};
        od_tensor *A = t_rand_any(batched ? sa : sa + 1, batched ? 3 : 2, da);
        od_tensor *B = t_rand_any(batched ? sb : sb + 1, batched ? 3 : 2, db);
        od_value a[2] = {tv(A), tv(B)};
        od_tensor *out = call1_ok(batched ? OD_OPID_bmm : OD_OPID_mm, a, 2);
        TCHECK(out->dtype == (batched ? db : da), "result dtype: mm self's, bmm mat2's");
        int64_t want[3] = {bsz, n, m};
        TCHECK(same_shape(out, batched ? want : want + 1, batched ? 3 : 2), "shape");
        int64_t idx[3] = {0};
        if (od_tensor_numel(out))
            do
                TCHECK(get_d(out, idx) == 0.0, "an empty sum is zero");
            while (next_index(idx, out->sizes, out->ndim));
        od_tensor_release(out);
        od_tensor_release(A);
        od_tensor_release(B);
    }
    int64_t s22[2] = {2, 2};
    od_tensor *f = t_rand(s22, 2, OD_FLOAT32), *i = t_rand(s22, 2, OD_INT64);
    od_value x[2] = {tv(f), tv(i)};
    call_fails(OD_OPID_mm, x, 2, OD_EMISMATCH, "expected scalar type Float but found Long");
    od_tensor_release(f);
    od_tensor_release(i);
}

Test(cpu_blas, errors_like_torch)
{
    int64_t s23[2] = {2, 3}, s45[2] = {4, 5}, s3[1] = {3}, s32[2] = {3, 2}, s4[1] = {4};
    od_tensor *a = t_rand(s23, 2, OD_FLOAT32), *b = t_rand(s45, 2, OD_FLOAT32), *v = t_rand(s3, 1, OD_FLOAT32);
    od_tensor *d = t_rand(s32, 2, OD_FLOAT64), *bo = t_rand(s23, 2, OD_BOOL), *bo2 = t_rand(s32, 2, OD_BOOL);
    od_tensor *i32 = t_rand(s32, 2, OD_INT32), *v4 = t_rand(s4, 1, OD_FLOAT32), *vd = t_rand(s3, 1, OD_FLOAT64);
    od_value x[2] = {tv(a), tv(b)};
    call_fails(OD_OPID_mm, x, 2, OD_EMISMATCH, "mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)");
    x[0] = tv(v);
    call_fails(OD_OPID_mm, x, 2, OD_EMISMATCH, "self must be a matrix");
    x[0] = tv(a);
    x[1] = tv(v);
    call_fails(OD_OPID_mm, x, 2, OD_EMISMATCH, "mat2 must be a matrix");
    x[1] = tv(d);
    call_fails(OD_OPID_mm, x, 2, OD_EMISMATCH, "expected scalar type Float but found Double");
    x[0] = tv(bo);
    x[1] = tv(bo2);
    call_fails(OD_OPID_mm, x, 2, OD_OK, "not implemented for 'Bool'");
    x[0] = tv(a);
    x[1] = tv(a);
    call_fails(OD_OPID_bmm, x, 2, OD_EMISMATCH, "batch1 must be a 3D tensor");
    int64_t s234[3] = {2, 3, 4}, s254[3] = {2, 5, 4};
    od_tensor *b1 = t_rand(s234, 3, OD_FLOAT32), *b2 = t_rand(s254, 3, OD_FLOAT32);
    x[0] = tv(b1);
    x[1] = tv(b2);
    call_fails(OD_OPID_bmm, x, 2, OD_EMISMATCH,
               "Expected size for first two dimensions of batch2 tensor to be: [2, 4] but got: [2, 5].");
    /* addmm */
    od_value ad[5] = {tv(v4), tv(a), tv(d), od_int(1), od_int(1)};
    call_fails(OD_OPID_addmm, ad, 5, OD_EMISMATCH, "self and mat2 must have the same dtype");
    od_tensor *a32 = t_rand(s32, 2, OD_FLOAT32);
    ad[2] = tv(a32);
    call_fails(OD_OPID_addmm, ad, 5, OD_EMISMATCH,
               "The expanded size of the tensor (2) must match the existing size (4) at non-singleton dimension 1.  "
               "Target sizes: [2, 2].  Tensor sizes: [4]");
    ad[1] = tv(v);
    call_fails(OD_OPID_addmm, ad, 5, OD_EMISMATCH, "mat1 must be a matrix, got 1-D tensor");
    od_tensor *i23 = t_rand(s23, 2, OD_INT32);
    od_value ai[5] = {tv(i23), tv(i23), tv(i32), od_double(0.5), od_int(1)};
    int64_t s22[2] = {2, 2};
    od_tensor *i22 = t_rand(s22, 2, OD_INT32);
    ai[0] = tv(i22);
    ai[3] = od_double(3e9); /* a float beta is range-checked for the dtype */
    call_fails(OD_OPID_addmm, ai, 5, OD_EINVAL, "value cannot be converted to type int without overflow");
    /* dot */
    od_value dt2[2] = {tv(v), tv(v4)};
    call_fails(OD_OPID_dot, dt2, 2, OD_EMISMATCH,
               "inconsistent tensor size, expected tensor [3] and src [4] to have the same number of elements");
    dt2[1] = tv(vd);
    call_fails(OD_OPID_dot, dt2, 2, OD_EMISMATCH, "dot : expected both vectors to have same dtype, but found Float and Double");
    dt2[1] = tv(a);
    call_fails(OD_OPID_dot, dt2, 2, OD_EMISMATCH, "1D tensors expected, but got 1D and 2D tensors");
    od_tensor *ts[] = {a, b, v, d, bo, bo2, i32, v4, vd, b1, b2, a32, i23, i22};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++)
        od_tensor_release(ts[i]);
}

/* addmm's alpha and beta go to the op math type (float for bfloat16), and
 * an empty result returns before the dtype dispatch (torch 1.13). */
Test(cpu_blas, addmm_scalars_in_op_math_and_empty_bool)
{
    int64_t s22[2] = {2, 2}, s20[2] = {2, 0}, s02[2] = {0, 2}, s00[2] = {0, 0};
    od_tensor *a = t_rand(s22, 2, OD_BFLOAT16), *b = t_rand(s22, 2, OD_BFLOAT16), *c = t_rand(s22, 2, OD_BFLOAT16);
    od_value ad[5] = {tv(c), tv(a), tv(b), od_double(0), od_double(3.4e38)};
    od_tensor *out = call1_ok(OD_OPID_addmm, ad, 5); /* 3.4e38 > bfloat16's max, < float's */
    TCHECK(out->dtype == OD_BFLOAT16, "bfloat16 addmm with alpha 3.4e38");
    od_tensor_release(out);
    od_tensor *e1 = t_rand(s02, 2, OD_BOOL), *e2 = t_rand(s20, 2, OD_BOOL), *e0 = t_rand(s00, 2, OD_BOOL);
    od_tensor *m1 = t_rand(s02, 2, OD_BOOL), *m2 = t_rand(s22, 2, OD_BOOL);
    od_value eb[5] = {tv(e1), tv(m1), tv(m2), od_int(1), od_int(1)};
    out = call1_ok(OD_OPID_addmm, eb, 5); /* [0,2] @ [2,2] + [0,2]: empty, so no dtype check */
    TCHECK(out->dtype == OD_BOOL && od_tensor_numel(out) == 0, "empty bool addmm");
    od_tensor_release(out);
    od_value nb[5] = {tv(m2), tv(m2), tv(m2), od_int(1), od_int(1)};
    call_fails(OD_OPID_addmm, nb, 5, OD_EUNSUPPORTED, "\"addmm_impl_cpu_\" not implemented for 'Bool'");
    od_tensor *ts[] = {a, b, c, e1, e2, e0, m1, m2};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++)
        od_tensor_release(ts[i]);
}

/* OpenBLAS 0.3.21 falls back to its SSE3 (Prescott) kernels on CPUs newer
 * than itself; blas.c's load-time check picks the AVX2 / AVX-512 core there
 * unless the user named one. */
extern char *openblas_get_corename(void);
Test(cpu_blas, openblas_core_uses_the_cpus_vector_width)
{
    __builtin_cpu_init();
    if (getenv("OPENBLAS_CORETYPE") && strcmp(getenv("OPENBLAS_CORETYPE"), "SkylakeX") != 0 &&
        strcmp(getenv("OPENBLAS_CORETYPE"), "Haswell") != 0)
        cr_skip_test("OPENBLAS_CORETYPE=%s was chosen by the user", getenv("OPENBLAS_CORETYPE"));
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma"))
        cr_skip_test("no AVX2 + FMA on this CPU: Prescott may be its core");
    const char *core = openblas_get_corename();
    cr_assert(core, "openblas_get_corename() returned NULL");
    cr_assert(strcasecmp(core, "Prescott") != 0 && strcasecmp(core, "Core2") != 0 &&
                  strcasecmp(core, "Katmai") != 0,
              "OpenBLAS runs its %s kernels on a CPU with AVX2 + FMA", core);
}
