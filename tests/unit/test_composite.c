/* test_composite.c — composite kernels (views, reshape, contiguous,
 * _to_copy / to, stack, softmax, layer_norm, matmul, linear, embedding),
 * the factories through BackendSelect, and the typed C API.
 *
 * Every numeric check compares against a reference computed here in double
 * precision (or exact integer arithmetic) on fresh random inputs; the seed
 * is printed on failure (OD_TEST_SEED=<n> reruns it). Views are checked
 * element by element through index arithmetic on the base tensor's storage.
 */
#include "composite_testutil.h"

TestSuite(composite, .init = test_setup);

#define NDT OD_NUM_DTYPES

/* ------------------------------------------------------------------ views */

/* A random float32 CPU tensor; half the time a non-contiguous view (every
 * other element along the last dim) of a larger one. */
static od_tensor *rand_maybe_strided(const int64_t *sizes, int nd)
{
    if (nd == 0 || rng_next() % 2)
        return t_rand(sizes, nd, OD_FLOAT32);
    int64_t big[OD_MAX_DIMS];
    memcpy(big, sizes, (size_t)nd * sizeof *big);
    big[nd - 1] = sizes[nd - 1] * 2;
    od_tensor *b = t_rand(big, nd, OD_FLOAT32), *v = NULL;
    OKCALL(od_tensor_slice(b, nd - 1, 0, INT64_MAX, 2, &v, &e_));
    od_tensor_release(b);
    TCHECK(same_shape(v, sizes, nd), "strided helper made the wrong shape");
    return v;
}

static void check_shares(const od_tensor *out, const od_tensor *in, const char *what)
{
    TCHECK(out->storage == in->storage, "%s: result does not share self's storage", what);
    TCHECK(out != in, "%s: result is self, not a view", what);
}

Test(composite, transpose_permute_t_are_views_with_the_right_elements)
{
    for (int trial = 0; trial < 40; trial++) {
        int nd = (int)rng_int(1, 4);
        int64_t sz[OD_MAX_DIMS], idx[OD_MAX_DIMS] = {0}, in_idx[OD_MAX_DIMS];
        rand_sizes(sz, nd, 1, 5);
        od_tensor *x = rand_maybe_strided(sz, nd);

        int64_t d0 = rng_int(-nd, nd - 1), d1 = rng_int(-nd, nd - 1);
        od_value a[3] = {tv(x), od_int(d0), od_int(d1)};
        od_tensor *y = call1_ok(OD_OPID_transpose_int, a, 3);
        check_shares(y, x, "transpose");
        int w0 = (int)(d0 < 0 ? d0 + nd : d0), w1 = (int)(d1 < 0 ? d1 + nd : d1);
        do {
            memcpy(in_idx, idx, sizeof in_idx);
            in_idx[w0] = idx[w1];
            in_idx[w1] = idx[w0];
            TCHECK(get_d(y, idx) == get_d(x, in_idx), "transpose(%d,%d) element mismatch", w0, w1);
        } while (next_index(idx, y->sizes, y->ndim));
        od_tensor_release(y);

        /* a random permutation */
        int64_t perm[OD_MAX_DIMS];
        for (int d = 0; d < nd; d++)
            perm[d] = d;
        for (int d = nd - 1; d > 0; d--) {
            int j = (int)rng_int(0, d);
            int64_t tmp = perm[d];
            perm[d] = perm[j];
            perm[j] = tmp;
        }
        int64_t perm_arg[OD_MAX_DIMS];
        for (int d = 0; d < nd; d++) /* sometimes negative, like torch accepts */
            perm_arg[d] = rng_next() % 2 ? perm[d] - nd : perm[d];
        od_value p[2] = {tv(x), ilist(perm_arg, nd)};
        y = call1_ok(OD_OPID_permute, p, 2);
        check_shares(y, x, "permute");
        for (int d = 0; d < nd; d++)
            TCHECK(y->sizes[d] == x->sizes[perm[d]], "permute size %d", d);
        memset(idx, 0, sizeof idx);
        do {
            for (int d = 0; d < nd; d++)
                in_idx[perm[d]] = idx[d];
            TCHECK(get_d(y, idx) == get_d(x, in_idx), "permute element mismatch");
        } while (next_index(idx, y->sizes, y->ndim));
        od_tensor_release(y);

        if (nd <= 2) {
            od_value ta[1] = {tv(x)};
            y = call1_ok(OD_OPID_t, ta, 1);
            check_shares(y, x, "t");
            memset(idx, 0, sizeof idx);
            do {
                in_idx[0] = nd == 2 ? idx[1] : idx[0];
                in_idx[1] = idx[0];
                TCHECK(get_d(y, idx) == get_d(x, in_idx), "t() element mismatch");
            } while (next_index(idx, y->sizes, y->ndim));
            od_tensor_release(y);
        }
        od_tensor_release(x);
    }
}

Test(composite, select_slice_squeeze_unsqueeze_expand)
{
    for (int trial = 0; trial < 40; trial++) {
        int nd = (int)rng_int(1, 4);
        int64_t sz[OD_MAX_DIMS], idx[OD_MAX_DIMS] = {0}, in_idx[OD_MAX_DIMS];
        rand_sizes(sz, nd, 1, 6);
        od_tensor *x = rand_maybe_strided(sz, nd);
        int dim = (int)rng_int(0, nd - 1);

        /* select.int with a possibly negative index */
        int64_t index = rng_int(-sz[dim], sz[dim] - 1);
        od_value a[3] = {tv(x), od_int(dim - (rng_next() % 2 ? nd : 0)), od_int(index)};
        od_tensor *y = call1_ok(OD_OPID_select_int, a, 3);
        check_shares(y, x, "select");
        TCHECK(y->ndim == nd - 1, "select rank");
        int64_t w = index < 0 ? index + sz[dim] : index;
        if (od_tensor_numel(y) > 0)
            do {
                for (int d = 0, k = 0; d < nd; d++)
                    in_idx[d] = d == dim ? w : idx[k++];
                TCHECK(get_d(y, idx) == get_d(x, in_idx), "select element mismatch");
            } while (next_index(idx, y->sizes, y->ndim));
        od_tensor_release(y);

        /* slice.Tensor with random start / end (None, negative, past the end) and step */
        bool has_s = rng_next() % 3 != 0, has_e = rng_next() % 3 != 0;
        int64_t start = rng_int(-sz[dim] - 2, sz[dim] + 2), end = rng_int(-sz[dim] - 2, sz[dim] + 2);
        int64_t step = rng_int(1, 3);
        od_value sl[5] = {tv(x), od_int(dim), has_s ? od_int(start) : od_none(),
                          has_e ? od_int(end) : od_none(), od_int(step)};
        y = call1_ok(OD_OPID_slice_Tensor, sl, 5);
        check_shares(y, x, "slice");
        /* Python slicing semantics, computed independently. */
        int64_t s0 = has_s ? start : 0, e0 = has_e ? end : sz[dim];
        if (s0 < 0)
            s0 += sz[dim];
        if (e0 < 0)
            e0 += sz[dim];
        s0 = s0 < 0 ? 0 : s0 > sz[dim] ? sz[dim] : s0;
        e0 = e0 < s0 ? s0 : e0 > sz[dim] ? sz[dim] : e0;
        int64_t len = (e0 - s0 + step - 1) / step;
        TCHECK(y->sizes[dim] == len, "slice(%d, %" PRId64 ", %" PRId64 ", %" PRId64 ") of size %" PRId64
               ": length %" PRId64 ", expected %" PRId64, dim, start, end, step, sz[dim],
               y->sizes[dim], len);
        memset(idx, 0, sizeof idx);
        if (od_tensor_numel(y) > 0)
            do {
                memcpy(in_idx, idx, sizeof in_idx);
                in_idx[dim] = s0 + idx[dim] * step;
                TCHECK(get_d(y, idx) == get_d(x, in_idx), "slice element mismatch");
            } while (next_index(idx, y->sizes, y->ndim));
        od_tensor_release(y);

        /* unsqueeze then squeeze.dim round trip, and squeeze() of size-1 dims */
        int ud = (int)rng_int(-nd - 1, nd);
        od_value u[2] = {tv(x), od_int(ud)};
        y = call1_ok(OD_OPID_unsqueeze, u, 2);
        check_shares(y, x, "unsqueeze");
        int wud = ud < 0 ? ud + nd + 1 : ud;
        TCHECK(y->ndim == nd + 1 && y->sizes[wud] == 1, "unsqueeze shape");
        memset(idx, 0, sizeof idx);
        do {
            for (int d = 0, k = 0; d <= nd; d++)
                if (d != wud)
                    in_idx[k++] = idx[d];
            TCHECK(get_d(y, idx) == get_d(x, in_idx), "unsqueeze element mismatch");
        } while (next_index(idx, y->sizes, y->ndim));
        od_value sq[2] = {tv(y), od_int(wud)};
        od_tensor *z = call1_ok(OD_OPID_squeeze_dim, sq, 2);
        check_shares(z, x, "squeeze.dim");
        TCHECK(same_shape(z, sz, nd), "squeeze.dim did not undo unsqueeze");
        od_tensor_release(z);
        od_value sq0[1] = {tv(y)};
        z = call1_ok(OD_OPID_squeeze, sq0, 1);
        int64_t want[OD_MAX_DIMS];
        int nw = 0;
        for (int d = 0; d <= nd; d++)
            if (y->sizes[d] != 1)
                want[nw++] = y->sizes[d];
        char b1[128], b2[128];
        TCHECK(same_shape(z, want, nw), "squeeze(): %s, expected %s",
               shape_str(z->sizes, z->ndim, b1, sizeof b1), shape_str(want, nw, b2, sizeof b2));
        TCHECK(od_tensor_numel(z) == od_tensor_numel(x), "squeeze numel");
        od_tensor_release(z);
        od_tensor_release(y);

        /* expand: add leading dims, stretch size-1 dims, -1 keeps a size */
        od_value one[2] = {tv(x), od_int(dim)};
        od_tensor *x1 = call1_ok(OD_OPID_unsqueeze, one, 2); /* a size-1 dim at `dim` */
        int lead = (int)rng_int(0, 2);
        int64_t esz[OD_MAX_DIMS];
        for (int d = 0; d < lead; d++)
            esz[d] = rng_int(1, 3);
        for (int d = 0; d < x1->ndim; d++)
            esz[lead + d] = d == dim ? rng_int(1, 4) : (rng_next() % 2 ? -1 : x1->sizes[d]);
        od_value ex[3] = {tv(x1), ilist(esz, lead + x1->ndim), od_bool(false)};
        y = call1_ok(OD_OPID_expand, ex, 3);
        check_shares(y, x, "expand");
        TCHECK(y->ndim == lead + x1->ndim, "expand rank");
        TCHECK(y->strides[lead + dim] == 0 || y->sizes[lead + dim] == 1, "expanded dim has stride 0");
        memset(idx, 0, sizeof idx);
        do {
            for (int d = 0; d < x1->ndim; d++)
                in_idx[d] = x1->sizes[d] == 1 ? 0 : idx[lead + d];
            TCHECK(get_d(y, idx) == get_d(x1, in_idx), "expand element mismatch");
        } while (next_index(idx, y->sizes, y->ndim));
        od_tensor_release(y);
        od_tensor_release(x1);
        od_tensor_release(x);
    }
}

Test(composite, view_shares_storage_and_infers_minus_one)
{
    for (int trial = 0; trial < 30; trial++) {
        int nd = (int)rng_int(0, 4);
        int64_t sz[OD_MAX_DIMS], idx[OD_MAX_DIMS] = {0};
        rand_sizes(sz, nd, 1, 5);
        od_tensor *x = t_rand(sz, nd, OD_FLOAT64);
        int64_t n = od_tensor_numel(x);
        /* a random factorisation of n into 1..3 dims, one of them given as -1 */
        int64_t f[3] = {1, 1, 1};
        int k = (int)rng_int(1, 3);
        int64_t rest = n;
        for (int i = 0; i < k - 1; i++) {
            int64_t dvs[64], nd_ = 0;
            for (int64_t d = 1; d <= rest && nd_ < 64; d++)
                if (rest % d == 0)
                    dvs[nd_++] = d;
            f[i] = dvs[rng_int(0, nd_ - 1)];
            rest /= f[i];
        }
        f[k - 1] = rest;
        int64_t arg[3];
        memcpy(arg, f, sizeof arg);
        arg[rng_int(0, k - 1)] = -1;
        od_value a[2] = {tv(x), ilist(arg, k)};
        od_tensor *y = call1_ok(OD_OPID_view, a, 2);
        check_shares(y, x, "view");
        TCHECK(same_shape(y, f, k), "view shape");
        /* row-major order is preserved: flat index i maps to flat index i */
        int64_t flat = 0;
        do {
            double want = ((double *)x->storage->data)[x->offset + flat++];
            TCHECK(get_d(y, idx) == want, "view element %" PRId64, flat - 1);
        } while (next_index(idx, y->sizes, y->ndim));
        od_tensor_release(y);
        od_tensor_release(x);
    }
    /* view of a transposed matrix across the transposed dims must fail like torch */
    int64_t sz[2] = {3, 4}, to[1] = {12};
    od_tensor *x = t_rand(sz, 2, OD_FLOAT32), *xt = NULL;
    OKCALL(od_tensor_transpose(x, 0, 1, &xt, &e_));
    od_value a[2] = {tv(xt), ilist(to, 1)};
    call_fails(OD_OPID_view, a, 2, OD_EMISMATCH, "view size is not compatible with input tensor's size and stride");
    int64_t bad[2] = {5, -1};
    od_value b[2] = {tv(x), ilist(bad, 2)};
    call_fails(OD_OPID_view, b, 2, OD_EMISMATCH, "shape '[5, -1]' is invalid for input of size 12");
    od_tensor_release(xt);
    od_tensor_release(x);
}

Test(composite, view_family_errors)
{
    int64_t sz[2] = {2, 3};
    od_tensor *x = t_rand(sz, 2, OD_FLOAT32);
    od_value a[3] = {tv(x), od_int(0), od_int(2)};
    call_fails(OD_OPID_transpose_int, a, 3, OD_OK, "Dimension out of range");
    od_value s0[5] = {tv(x), od_int(0), od_none(), od_none(), od_int(0)};
    call_fails(OD_OPID_slice_Tensor, s0, 5, OD_OK, "slice step must be positive");
    od_value sel[3] = {tv(x), od_int(1), od_int(3)};
    call_fails(OD_OPID_select_int, sel, 3, OD_OK, "out of range");
    /* a str where the schema has int[]: the argument is named */
    od_value w[2] = {tv(x), od_str("2,3")};
    call_fails(OD_OPID_view, w, 2, OD_EINVAL, "argument 'size'");
    od_value w2[2] = {od_int(3), od_int(0)};
    call_fails(OD_OPID_unsqueeze, w2, 2, OD_EINVAL, "argument 'self'");
    int64_t big[2] = {3, 3};
    od_value ex[3] = {tv(x), ilist(big, 2), od_bool(false)};
    call_fails(OD_OPID_expand, ex, 3, OD_OK, NULL);
    od_tensor_release(x);
}

/* ----------------------------------------------------- reshape / contiguous */

Test(composite, reshape_views_when_possible_and_copies_otherwise)
{
    for (int trial = 0; trial < 30; trial++) {
        int64_t sz[3];
        rand_sizes(sz, 3, 1, 5);
        od_tensor *x = t_rand(sz, 3, OD_FLOAT32);
        int64_t n = od_tensor_numel(x), flat[1] = {-1};
        int64_t idx[OD_MAX_DIMS] = {0}, in_idx[OD_MAX_DIMS];

        /* contiguous: always a view */
        od_value a[2] = {tv(x), ilist(flat, 1)};
        od_tensor *y = call1_ok(OD_OPID_reshape, a, 2);
        check_shares(y, x, "reshape of a contiguous tensor");
        TCHECK(y->ndim == 1 && y->sizes[0] == n, "reshape(-1) shape");
        od_tensor_release(y);

        /* transposed (last two dims, both > 1): flattening needs a copy */
        od_tensor *xt = NULL;
        OKCALL(od_tensor_transpose(x, 1, 2, &xt, &e_));
        od_value b[2] = {tv(xt), ilist(flat, 1)};
        y = call1_ok(OD_OPID_reshape, b, 2);
        bool viewable = sz[1] == 1 || sz[2] == 1;
        TCHECK(viewable ? y->storage == x->storage : y->storage != x->storage,
               "reshape of a transposed [%" PRId64 ",%" PRId64 ",%" PRId64 "] tensor: %s", sz[0], sz[2],
               sz[1], viewable ? "should be a view" : "must copy");
        TCHECK(od_tensor_is_contiguous(y), "reshape result is contiguous");
        int64_t k = 0;
        do { /* element k of the flat result is element k of xt in row-major order */
            in_idx[0] = idx[0];
            in_idx[1] = idx[1];
            in_idx[2] = idx[2];
            int64_t flat_i[1] = {k++};
            TCHECK(get_d(y, flat_i) == get_d(xt, in_idx), "reshape copy element %" PRId64, k - 1);
        } while (next_index(idx, xt->sizes, 3));
        od_tensor_release(y);

        /* splitting a dim of the transposed tensor is still a view */
        int64_t split[4] = {sz[0], sz[2], sz[1], 1};
        od_value c[2] = {tv(xt), ilist(split, 4)};
        y = call1_ok(OD_OPID_reshape, c, 2);
        check_shares(y, x, "reshape adding a size-1 dim");
        od_tensor_release(y);
        od_tensor_release(xt);
        od_tensor_release(x);
    }
    int64_t sz[2] = {2, 3}, two[2] = {-1, -1};
    od_tensor *x = t_rand(sz, 2, OD_FLOAT32);
    od_value a[2] = {tv(x), ilist(two, 2)};
    call_fails(OD_OPID_reshape, a, 2, OD_EINVAL, "only one dimension can be inferred");
    od_tensor_release(x);
}

Test(composite, contiguous_returns_self_or_a_contiguous_copy)
{
    for (int trial = 0; trial < 20; trial++) {
        int nd = (int)rng_int(0, 4);
        int64_t sz[OD_MAX_DIMS], idx[OD_MAX_DIMS] = {0};
        rand_sizes(sz, nd, 0, 4);
        od_tensor *x = rand_maybe_strided(sz, nd);
        od_value a[2] = {tv(x), od_int(0)};
        od_tensor *y = call1_ok(OD_OPID_contiguous, a, 2);
        if (od_tensor_is_contiguous(x)) {
            TCHECK(y == x, "contiguous() of a contiguous tensor must return self");
        } else {
            TCHECK(y != x && y->storage != x->storage, "contiguous() must copy");
            TCHECK(od_tensor_is_contiguous(y), "contiguous() result is not contiguous");
            TCHECK(same_shape(y, sz, nd) && y->dtype == x->dtype, "contiguous() shape/dtype");
            if (od_tensor_numel(y))
                do
                    TCHECK(get_d(y, idx) == get_d(x, idx), "contiguous() element mismatch");
                while (next_index(idx, sz, nd));
        }
        od_tensor_release(y);
        od_tensor_release(x);
    }
    /* preserve_format: self when contiguous (torch checks is_contiguous first), else refused */
    int64_t sz[1] = {3}, s4[4] = {2, 3, 4, 5};
    od_tensor *x = t_rand(sz, 1, OD_FLOAT32);
    od_value a[2] = {tv(x), od_int(OD_MF_PRESERVE)};
    od_tensor *same = call1_ok(OD_OPID_contiguous, a, 2);
    TCHECK(same == x, "contiguous(preserve_format) of a contiguous tensor is self");
    od_tensor_release(same);
    od_value b[2] = {tv(x), od_int(OD_MF_CHANNELS_LAST)};
    call_fails(OD_OPID_contiguous, b, 2, OD_EINVAL, "required rank 4 tensor to use channels_last format");
    od_tensor *x4 = t_rand(s4, 4, OD_FLOAT32), *t4 = NULL;
    od_error e;
    TCHECK(od_tensor_transpose(x4, 0, 1, &t4, &e) == OD_OK, "transpose");
    od_value p[2] = {tv(t4), od_int(OD_MF_PRESERVE)};
    call_fails(OD_OPID_contiguous, p, 2, OD_EINVAL, "preserve memory format is unsupported");
    /* channels_last: N, H, W, C in memory, the same values; a second call returns self */
    od_value c[2] = {tv(x4), od_int(OD_MF_CHANNELS_LAST)};
    od_tensor *cl = call1_ok(OD_OPID_contiguous, c, 2);
    int64_t want[4] = {60, 1, 15, 3}, idx[4] = {0};
    for (int d = 0; d < 4; d++)
        TCHECK(cl->strides[d] == want[d], "channels_last strides");
    do
        TCHECK(get_d(cl, idx) == get_d(x4, idx), "channels_last element mismatch");
    while (next_index(idx, s4, 4));
    od_value c2[2] = {tv(cl), od_int(OD_MF_CHANNELS_LAST)};
    od_tensor *cl2 = call1_ok(OD_OPID_contiguous, c2, 2);
    TCHECK(cl2 == cl, "contiguous(channels_last) of a channels_last tensor is self");
    /* clone keeps the layout under preserve_format, as empty_like does */
    od_value k[2] = {tv(cl), od_none()};
    od_tensor *kc = call1_ok(OD_OPID_clone, k, 2);
    TCHECK(kc->storage != cl->storage && od_tensor_is_contiguous_as(kc, OD_MF_CHANNELS_LAST), "clone preserves channels_last");
    od_tensor_release(kc);
    od_tensor_release(cl2);
    od_tensor_release(cl);
    od_tensor_release(t4);
    od_tensor_release(x4);
    od_tensor_release(x);
}

/* ----------------------------------------------------------- dtype casts */

static const od_dtype ALL_DT[] = {OD_BOOL,    OD_UINT8,    OD_INT8,    OD_INT16,  OD_INT32,
                                  OD_INT64,   OD_FLOAT16,  OD_BFLOAT16, OD_FLOAT32, OD_FLOAT64};

static bool is_float(od_dtype d)
{
    return d == OD_FLOAT16 || d == OD_BFLOAT16 || d == OD_FLOAT32 || d == OD_FLOAT64;
}

/* x rounded into floating dtype d (torch goes through float for 16-bit). */
static double round_into(double x, od_dtype d)
{
    switch (d) {
    case OD_FLOAT16: return to_half_value(x);
    case OD_BFLOAT16: return to_bf16_value(x);
    case OD_FLOAT32: return (float)x;
    default: return x;
    }
}

static int64_t wrap_int(int64_t v, od_dtype d) /* two's complement truncation */
{
    uint64_t u = (uint64_t)v;
    switch (d) {
    case OD_UINT8: return (uint8_t)u;
    case OD_INT8: return (int8_t)(uint8_t)u;
    case OD_INT16: return (int16_t)(uint16_t)u;
    case OD_INT32: return (int32_t)(uint32_t)u;
    default: return v;
    }
}

/* A source value for the pair (s -> d): exactly representable in s, and
 * for float -> integer inside d's range (out-of-range float -> int casts are
 * undefined in C++ and differ between CPU and GPU in torch). */
static void gen_src(od_dtype s, od_dtype d, int64_t *iv, double *dv)
{
    if (!is_float(s)) {
        int64_t v;
        if (s == OD_INT64 && rng_next() % 2) /* full range: wrapping and float rounding */
            v = (int64_t)rng_next();
        else
            v = (int64_t)rand_value(s);
        *iv = v;
        *dv = (double)v;
        return;
    }
    double x;
    if (d == OD_BOOL) {
        static const double special[] = {0.0, -0.0, NAN, INFINITY, -INFINITY, 0.25, -1e-3};
        x = rng_next() % 2 ? special[rng_next() % 7] : rng_uniform(-3, 3);
    } else if (!is_float(d)) {
        double lo = -1e6, hi = 1e6;
        if (d == OD_UINT8) lo = 0, hi = 255.9;
        if (d == OD_INT8) lo = -128.9, hi = 127.9;
        if (d == OD_INT16) lo = -32000, hi = 32000;
        if (s == OD_FLOAT16 && hi > 60000) lo = -60000, hi = 60000;
        do { /* rounding into s may leave d's range (bfloat16 255.9 -> 256): redraw */
            x = rng_next() % 4 ? rng_uniform(lo, hi)
                               : rng_uniform(lo < 0 ? -2.5 : 0, 2.5); /* where truncation shows */
            x = round_into(x, s);
        } while (trunc(x) < ceil(lo) || trunc(x) > floor(hi));
    } else {
        static const double special[] = {NAN, INFINITY, -INFINITY, 70000.0, -1e6, 1e-6, 3e-8, 1e-40, -0.0, 65519.0, 65520.0};
        x = rng_next() % 3 == 0 ? special[rng_next() % 11] : rng_uniform(-100, 100);
    }
    x = round_into(x, s);
    *dv = x;
    *iv = 0;
}

/* torch's cast of the source value to d, as an integer (integral d) or a double. */
static void ref_cast(od_dtype s, int64_t iv, double dv, od_dtype d, int64_t *oi, double *od)
{
    bool src_int = !is_float(s);
    if (d == OD_BOOL) {
        *oi = src_int ? iv != 0 : (dv != 0 || isnan(dv));
        return;
    }
    if (!is_float(d)) {
        *oi = wrap_int(src_int ? iv : (int64_t)trunc(dv), d);
        return;
    }
    double f = src_int ? (double)(float)iv : dv; /* int -> float is one rounding in C */
    if (d == OD_FLOAT64)
        *od = src_int ? (double)iv : dv;
    else if (d == OD_FLOAT32)
        *od = src_int ? (double)(float)iv : (double)(float)dv;
    else
        *od = round_into(f, d);
}

static void check_cast(od_tensor *src, od_dtype d, const int64_t *src_i, const double *src_d)
{
    od_value a[7] = {tv(src), od_dtype_v(d), od_none(), od_none(), od_none(), od_bool(false), od_none()};
    od_tensor *y = call1_ok(OD_OPID__to_copy, a, 7);
    const char *sn = od_dtype_name(src->dtype), *dn = od_dtype_name(d);
    TCHECK(y->dtype == d && same_shape(y, src->sizes, src->ndim), "_to_copy %s -> %s: dtype/shape", sn, dn);
    TCHECK(y->storage != src->storage, "_to_copy %s -> %s returned a view", sn, dn);
    TCHECK(y->device.type == OD_DEV_CPU, "_to_copy changed the device");
    int64_t idx[OD_MAX_DIMS] = {0}, k = 0;
    if (od_tensor_numel(y))
        do {
            int64_t oi = 0;
            double od = 0;
            ref_cast(src->dtype, src_i[k], src_d[k], d, &oi, &od);
            if (!is_float(d)) {
                int64_t got = get_i(y, idx);
                TCHECK(got == oi, "_to_copy %s -> %s: element %" PRId64 " (src %.17g / %" PRId64
                       "): got %" PRId64 ", expected %" PRId64, sn, dn, k, src_d[k], src_i[k], got, oi);
            } else {
                double got = get_d(y, idx);
                TCHECK(got == od || (isnan(got) && isnan(od)),
                       "_to_copy %s -> %s: element %" PRId64 " (src %.17g / %" PRId64 "): got %.17g, expected %.17g",
                       sn, dn, k, src_d[k], src_i[k], got, od);
            }
            k++;
        } while (next_index(idx, y->sizes, y->ndim));
    od_tensor_release(y);
}

Test(composite, to_copy_every_dtype_pair_matches_torch_casts)
{
    for (size_t si = 0; si < NDT; si++)
        for (size_t di = 0; di < NDT; di++) {
            od_dtype s = ALL_DT[si], d = ALL_DT[di];
            int64_t sz[2] = {rng_int(1, 7), rng_int(1, 9)};
            int64_t n = sz[0] * sz[1];
            /* non-contiguous half the time: the transpose of a [sz1, sz0] tensor */
            bool transposed = rng_next() % 2;
            int64_t base_sz[2] = {transposed ? sz[1] : sz[0], transposed ? sz[0] : sz[1]};
            od_tensor *base = t_empty(base_sz, 2, s, CPU), *src = base;
            if (transposed)
                OKCALL(od_tensor_transpose(base, 0, 1, &src, &e_));
            int64_t *iv = calloc((size_t)n, sizeof *iv);
            double *dv = calloc((size_t)n, sizeof *dv);
            int64_t idx[2] = {0, 0}, k = 0;
            do {
                gen_src(s, d, &iv[k], &dv[k]);
                if (is_float(s))
                    set_d(src, idx, dv[k]);
                else
                    set_i(src, idx, iv[k]);
                k++;
            } while (next_index(idx, sz, 2));
            check_cast(src, d, iv, dv);
            free(iv);
            free(dv);
            if (src != base)
                od_tensor_release(src);
            od_tensor_release(base);
        }
}

Test(composite, to_copy_preserves_dense_strides_and_handles_meta)
{
    int64_t sz[3] = {2, 3, 4}, perm[3] = {2, 0, 1};
    od_tensor *x = t_rand(sz, 3, OD_FLOAT32), *p = NULL;
    OKCALL(od_tensor_permute(x, perm, 3, &p, &e_));
    od_value a[7] = {tv(p), od_dtype_v(OD_FLOAT64), od_none(), od_none(), od_none(), od_bool(false), od_none()};
    od_tensor *y = call1_ok(OD_OPID__to_copy, a, 7);
    for (int d = 0; d < 3; d++)
        TCHECK(y->strides[d] == p->strides[d], "preserve_format keeps the strides of a dense permuted tensor");
    int64_t idx[3] = {0};
    do
        TCHECK(get_d(y, idx) == get_d(p, idx), "permuted _to_copy element");
    while (next_index(idx, y->sizes, 3));
    od_tensor_release(y);
    /* contiguous_format asks for a contiguous result */
    a[6] = od_int(0);
    y = call1_ok(OD_OPID__to_copy, a, 7);
    TCHECK(od_tensor_is_contiguous(y), "memory_format=contiguous_format");
    od_tensor_release(y);

    /* to meta: shapes only; out of meta: torch's error */
    a[6] = od_none();
    a[3] = od_device_v(META);
    y = call1_ok(OD_OPID__to_copy, a, 7);
    TCHECK(y->device.type == OD_DEV_META && y->dtype == OD_FLOAT64 && od_tensor_data(y) == NULL,
           "_to_copy(device=meta)");
    od_value back[7] = {tv(y), od_none(), od_none(), od_device_v(CPU), od_none(), od_bool(false), od_none()};
    call_fails(OD_OPID__to_copy, back, 7, OD_EUNSUPPORTED, "Cannot copy out of meta tensor; no data!");
    od_tensor_release(y);

    a[3] = od_none();
    a[2] = od_int(1); /* sparse_coo */
    call_fails(OD_OPID__to_copy, a, 7, OD_EUNSUPPORTED, "layout");
    a[2] = od_none();
    a[4] = od_bool(true); /* pin_memory=True is an ordinary copy, as torch 1.13 makes it on the CPU */
    y = call1_ok(OD_OPID__to_copy, a, 7);
    TCHECK(y != p && y->storage != p->storage, "_to_copy(pin_memory=True) copies");
    od_tensor_release(y);
    a[4] = od_int(2);
    call_fails(OD_OPID__to_copy, a, 7, OD_EINVAL, "pin_memory");
    a[4] = od_none();
    a[1] = od_str("float128");
    call_fails(OD_OPID__to_copy, a, 7, OD_EINVAL, "float128");
    a[1] = od_str("float16"); /* dtype names are accepted */
    y = call1_ok(OD_OPID__to_copy, a, 7);
    TCHECK(y->dtype == OD_FLOAT16, "dtype by name");
    od_tensor_release(y);
    od_tensor_release(p);
    od_tensor_release(x);
}

Test(composite, to_aliases_exactly_when_torch_does)
{
    int64_t sz[2] = {3, 2};
    od_tensor *x = t_rand(sz, 2, OD_FLOAT32);
    od_value a[5] = {tv(x), od_dtype_v(OD_FLOAT32), od_bool(false), od_bool(false), od_none()};
    od_tensor *y = call1_ok(OD_OPID_to_dtype, a, 5);
    TCHECK(y == x, "to(same dtype) returns self");
    od_tensor_release(y);
    a[3] = od_bool(true); /* copy=True */
    y = call1_ok(OD_OPID_to_dtype, a, 5);
    TCHECK(y != x && y->storage != x->storage && y->dtype == OD_FLOAT32, "to(copy=True) copies");
    od_tensor_release(y);
    a[3] = od_bool(false);
    a[1] = od_dtype_v(OD_INT32);
    y = call1_ok(OD_OPID_to_dtype, a, 5);
    TCHECK(y->dtype == OD_INT32, "to(int32)");
    int64_t idx[2] = {0};
    do
        TCHECK(get_i(y, idx) == (int64_t)trunc(get_d(x, idx)), "to(int32) truncates toward zero");
    while (next_index(idx, sz, 2));
    od_tensor_release(y);

    od_value b[6] = {tv(x), od_device_v(CPU), od_dtype_v(OD_FLOAT32), od_bool(false), od_bool(false), od_none()};
    y = call1_ok(OD_OPID_to_device, b, 6);
    TCHECK(y == x, "to(cpu, float32) on a cpu float32 tensor returns self");
    od_tensor_release(y);
    b[1] = od_device_v(META);
    b[2] = od_dtype_v(OD_FLOAT16);
    y = call1_ok(OD_OPID_to_device, b, 6);
    TCHECK(y->device.type == OD_DEV_META && y->dtype == OD_FLOAT16 && same_shape(y, sz, 2), "to(meta, half)");
    od_tensor_release(y);
    od_tensor_release(x);
}

/* ------------------------------------------------------------ stack / cat */

Test(composite, stack_matches_index_arithmetic)
{
    for (int trial = 0; trial < 30; trial++) {
        int nd = (int)rng_int(0, 3), k = (int)rng_int(1, 4);
        int64_t sz[OD_MAX_DIMS];
        rand_sizes(sz, nd, 0, 4);
        od_tensor *in[4];
        for (int i = 0; i < k; i++)
            in[i] = rand_maybe_strided(sz, nd);
        int64_t dim = rng_int(-nd - 1, nd);
        int wd = (int)(dim < 0 ? dim + nd + 1 : dim);
        od_value a[2] = {od_list_v(OD_T_TENSOR_LIST, in, (size_t)k), od_int(dim)};
        od_tensor *y = call1_ok(OD_OPID_stack, a, 2);
        TCHECK(y->ndim == nd + 1 && y->sizes[wd] == k, "stack shape");
        int64_t idx[OD_MAX_DIMS] = {0}, in_idx[OD_MAX_DIMS];
        if (od_tensor_numel(y))
            do {
                for (int d = 0, j = 0; d <= nd; d++)
                    if (d != wd)
                        in_idx[j++] = idx[d];
                TCHECK(get_d(y, idx) == get_d(in[idx[wd]], in_idx), "stack element mismatch (dim %d)", wd);
            } while (next_index(idx, y->sizes, y->ndim));
        od_tensor_release(y);
        for (int i = 0; i < k; i++)
            od_tensor_release(in[i]);
    }
}

Test(composite, stack_and_cat_errors)
{
    od_value empty[2] = {od_list_v(OD_T_TENSOR_LIST, NULL, 0), od_int(0)};
    call_fails(OD_OPID_stack, empty, 2, OD_OK, "stack expects a non-empty TensorList");
    int64_t s2[1] = {2}, s3[1] = {3};
    od_tensor *ts[2] = {t_rand(s2, 1, OD_FLOAT32), t_rand(s3, 1, OD_FLOAT32)};
    od_value a[2] = {od_list_v(OD_T_TENSOR_LIST, ts, 2), od_int(0)};
    call_fails(OD_OPID_stack, a, 2, OD_EMISMATCH,
               "stack expects each tensor to be equal size, but got [2] at entry 0 and [3] at entry 1");
    a[1] = od_int(2);
    od_tensor_release(ts[1]);
    ts[1] = t_rand(s2, 1, OD_FLOAT32);
    call_fails(OD_OPID_stack, a, 2, OD_OK, "Dimension out of range");
    od_tensor *withnull[2] = {ts[0], NULL};
    od_value b[2] = {od_list_v(OD_T_TENSOR_LIST, withnull, 2), od_int(0)};
    call_fails(OD_OPID_stack, b, 2, OD_EINVAL, "element 1");
    od_tensor_release(ts[0]);
    od_tensor_release(ts[1]);
}

Test(composite, cat_joins_along_a_dim)
{
    for (int trial = 0; trial < 20; trial++) {
        int nd = (int)rng_int(1, 3), k = (int)rng_int(1, 3);
        int64_t sz[OD_MAX_DIMS];
        rand_sizes(sz, nd, 1, 4);
        int dim = (int)rng_int(0, nd - 1);
        od_tensor *in[3];
        int64_t offs[4] = {0};
        for (int i = 0; i < k; i++) {
            int64_t s[OD_MAX_DIMS];
            memcpy(s, sz, sizeof s);
            s[dim] = rng_int(0, 3);
            in[i] = rand_maybe_strided(s, nd);
            offs[i + 1] = offs[i] + s[dim];
        }
        od_value a[2] = {od_list_v(OD_T_TENSOR_LIST, in, (size_t)k), od_int(dim)};
        od_tensor *y = call1_ok(OD_OPID_cat, a, 2);
        TCHECK(y->sizes[dim] == offs[k], "cat size");
        int64_t idx[OD_MAX_DIMS] = {0}, in_idx[OD_MAX_DIMS];
        if (od_tensor_numel(y))
            do {
                int which = 0;
                while (idx[dim] >= offs[which + 1])
                    which++;
                memcpy(in_idx, idx, sizeof in_idx);
                in_idx[dim] -= offs[which];
                TCHECK(get_d(y, idx) == get_d(in[which], in_idx), "cat element");
            } while (next_index(idx, y->sizes, y->ndim));
        od_tensor_release(y);
        for (int i = 0; i < k; i++)
            od_tensor_release(in[i]);
    }
}

/* ----------------------------------------------------------------- matmul */

/* Reference matmul in double with torch's rank rules and batch broadcasting.
 * Returns the result shape in osz/ond and values row-major in out. */
static void ref_matmul(const od_tensor *a, const od_tensor *b, double *out, int64_t *osz, int *ond)
{
    int d1 = a->ndim, d2 = b->ndim;
    int64_t n = d1 > 1 ? a->sizes[d1 - 2] : 1, k = a->sizes[d1 - 1];
    int64_t p = d2 > 1 ? b->sizes[d2 - 1] : 1;
    int nb1 = d1 > 2 ? d1 - 2 : 0, nb2 = d2 > 2 ? d2 - 2 : 0, nb = nb1 > nb2 ? nb1 : nb2;
    int64_t batch[OD_MAX_DIMS];
    for (int i = 0; i < nb; i++) {
        int i1 = i - (nb - nb1), i2 = i - (nb - nb2);
        int64_t s1 = i1 >= 0 ? a->sizes[i1] : 1, s2 = i2 >= 0 ? b->sizes[i2] : 1;
        batch[i] = s1 == 1 ? s2 : s1;
    }
    *ond = 0;
    for (int i = 0; i < nb; i++)
        osz[(*ond)++] = batch[i];
    if (d1 > 1)
        osz[(*ond)++] = n;
    if (d2 > 1)
        osz[(*ond)++] = p;
    int64_t bidx[OD_MAX_DIMS] = {0}, ia[OD_MAX_DIMS], ib[OD_MAX_DIMS], o = 0;
    do {
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < p; j++) {
                double acc = 0;
                for (int64_t kk = 0; kk < k; kk++) {
                    for (int q = 0; q < nb1; q++)
                        ia[q] = a->sizes[q] == 1 ? 0 : bidx[q + nb - nb1];
                    for (int q = 0; q < nb2; q++)
                        ib[q] = b->sizes[q] == 1 ? 0 : bidx[q + nb - nb2];
                    if (d1 > 1)
                        ia[d1 - 2] = i;
                    ia[d1 - 1] = kk;
                    if (d2 > 1) {
                        ib[d2 - 2] = kk;
                        ib[d2 - 1] = j;
                    } else {
                        ib[0] = kk;
                    }
                    acc += get_d(a, ia) * get_d(b, ib);
                }
                out[o++] = acc;
            }
    } while (nb > 0 && next_index(bidx, batch, nb));
}

/* A random operand of rank r with the given trailing matrix dims; batch dims
 * are drawn so that they broadcast against the other operand's. */
static od_tensor *mm_operand(int r, const int64_t *batch, int nb, int64_t rows, int64_t cols, bool vec_is_rows,
                             od_dtype dt)
{
    int64_t sz[OD_MAX_DIMS];
    int n = 0;
    if (r == 1) {
        sz[n++] = vec_is_rows ? rows : cols;
    } else {
        for (int i = nb - (r - 2); i < nb; i++) /* the last r-2 batch dims, some set to 1 */
            sz[n++] = rng_next() % 3 == 0 ? 1 : batch[i];
        sz[n++] = rows;
        sz[n++] = cols;
    }
    od_tensor *t = t_empty(sz, n, dt, CPU);
    fill_random(t);
    if (r >= 2 && rng_next() % 3 == 0) { /* a transposed (non-contiguous) operand */
        int64_t tsz[OD_MAX_DIMS];
        memcpy(tsz, sz, sizeof tsz);
        tsz[n - 2] = cols;
        tsz[n - 1] = rows;
        od_tensor *b = t_empty(tsz, n, dt, CPU), *v = NULL;
        fill_random(b);
        OKCALL(od_tensor_transpose(b, -1, -2, &v, &e_));
        od_tensor_release(b);
        od_tensor_release(t);
        t = v;
    }
    return t;
}

static void check_matmul(od_tensor *a, od_tensor *b, od_tensor *y, double tol)
{
    double *ref = calloc(4096, sizeof *ref);
    int64_t osz[OD_MAX_DIMS];
    int ond;
    ref_matmul(a, b, ref, osz, &ond);
    char s1[64], s2[64], s3[64], s4[64];
    TCHECK(same_shape(y, osz, ond), "matmul %s @ %s: shape %s, expected %s",
           shape_str(a->sizes, a->ndim, s1, 64), shape_str(b->sizes, b->ndim, s2, 64),
           shape_str(y->sizes, y->ndim, s3, 64), shape_str(osz, ond, s4, 64));
    int64_t idx[OD_MAX_DIMS] = {0}, k = 0;
    if (od_tensor_numel(y))
        do {
            double got = get_d(y, idx), want = ref[k++];
            TCHECK(fabs(got - want) <= tol * (1 + fabs(want)), "matmul %s @ %s element %" PRId64 ": %.17g vs %.17g",
                   shape_str(a->sizes, a->ndim, s1, 64), shape_str(b->sizes, b->ndim, s2, 64), k - 1, got, want);
        } while (next_index(idx, y->sizes, y->ndim));
    free(ref);
}

Test(composite, matmul_every_rank_combination_with_broadcasting)
{
    for (int rep = 0; rep < 3; rep++)
        for (int r1 = 1; r1 <= 4; r1++)
            for (int r2 = 1; r2 <= 4; r2++) {
                od_dtype dt = rep == 2 ? OD_FLOAT32 : OD_FLOAT64;
                int64_t batch[2] = {rng_int(1, 3), rng_int(1, 3)};
                int64_t n = rng_int(1, 4), k = rng_int(1, 5), p = rng_int(1, 4);
                if (rep == 1 && rng_next() % 2) /* empty operands */
                    k = 0;
                od_tensor *a = mm_operand(r1, batch, 2, n, k, false, dt);
                od_tensor *b = mm_operand(r2, batch, 2, k, p, true, dt);
                od_value args[2] = {tv(a), tv(b)};
                od_tensor *y = call1_ok(OD_OPID_matmul, args, 2);
                TCHECK(y->dtype == dt, "matmul dtype");
                check_matmul(a, b, y, dt == OD_FLOAT64 ? 1e-12 : 1e-5);
                od_tensor_release(y);
                /* the typed API takes the same path */
                OKCALL(od_matmul(a, b, &y, &e_));
                check_matmul(a, b, y, dt == OD_FLOAT64 ? 1e-12 : 1e-5);
                od_tensor_release(y);
                od_tensor_release(a);
                od_tensor_release(b);
            }
}

Test(composite, matmul_errors)
{
    int64_t s2[2] = {2, 3}, s3[2] = {4, 5}, sb[3] = {2, 2, 3}, sc[3] = {3, 3, 4}, none[1] = {0};
    od_tensor *z = t_empty(none, 0, OD_FLOAT32, CPU), *m = t_rand(s2, 2, OD_FLOAT32);
    od_value a[2] = {tv(z), tv(m)};
    call_fails(OD_OPID_matmul, a, 2, OD_EMISMATCH,
               "both arguments to matmul need to be at least 1D, but they are 0D and 2D");
    od_tensor *m2 = t_rand(s3, 2, OD_FLOAT32);
    od_value b[2] = {tv(m), tv(m2)};
    call_fails(OD_OPID_matmul, b, 2, OD_OK, NULL); /* 3 vs 4 inner sizes */
    od_tensor *x = t_rand(sb, 3, OD_FLOAT32), *y = t_rand(sc, 3, OD_FLOAT32);
    od_value c[2] = {tv(x), tv(y)}; /* batch 2 vs 3 */
    call_fails(OD_OPID_matmul, c, 2, OD_OK, "must match the size of tensor");
    /* failures after intermediates exist (ASan checks nothing leaks) */
    int64_t sd[3] = {2, 4, 5}, se[2] = {4, 5};
    od_tensor *d3 = t_rand(sd, 3, OD_FLOAT32), *e2 = t_rand(se, 2, OD_FLOAT32);
    od_value bm[2] = {tv(x), tv(d3)}; /* bmm: 3 vs 4 */
    call_fails(OD_OPID_matmul, bm, 2, OD_OK, NULL);
    od_value fo[2] = {tv(x), tv(e2)}; /* folded mm: 3 vs 4 */
    call_fails(OD_OPID_matmul, fo, 2, OD_OK, NULL);
    int64_t sw[2] = {5, 3}, sbias[1] = {4};
    od_tensor *w = t_rand(sw, 2, OD_FLOAT32), *bias = t_rand(sbias, 1, OD_FLOAT32);
    od_value li[3] = {tv(x), tv(w), tv(bias)}; /* [2,2,5] + [4]: a contiguous 3-D input is one addmm */
    call_fails(OD_OPID_linear, li, 3, OD_EMISMATCH, "must match the existing size");
    od_tensor_release(d3);
    od_tensor_release(e2);
    od_tensor_release(w);
    od_tensor_release(bias);
    od_tensor_release(z);
    od_tensor_release(m);
    od_tensor_release(m2);
    od_tensor_release(x);
    od_tensor_release(y);
}

/* ---------------------------------------------------------- linear / nn */

Test(composite, linear_with_and_without_bias)
{
    for (int trial = 0; trial < 12; trial++) {
        int r = (int)rng_int(1, 3);
        int64_t in_f = rng_int(1, 5), out_f = rng_int(1, 4), sz[3] = {rng_int(1, 3), rng_int(1, 3), in_f};
        od_tensor *x = t_rand(sz + (3 - r), r, OD_FLOAT64);
        int64_t wsz[2] = {out_f, in_f}, bsz[1] = {out_f};
        od_tensor *w = t_rand(wsz, 2, OD_FLOAT64), *bias = trial % 2 ? t_rand(bsz, 1, OD_FLOAT64) : NULL;
        od_value a[3] = {tv(x), tv(w), bias ? tv(bias) : od_none()};
        od_tensor *y = call1_ok(OD_OPID_linear, a, 3);
        TCHECK(y->ndim == r && y->sizes[r - 1] == out_f, "linear shape");
        int64_t idx[3] = {0}, xi[3];
        do {
            double acc = bias ? get_d(bias, &idx[r - 1]) : 0;
            for (int64_t k = 0; k < in_f; k++) {
                memcpy(xi, idx, sizeof xi);
                xi[r - 1] = k;
                int64_t wi[2] = {idx[r - 1], k};
                acc += get_d(x, xi) * get_d(w, wi);
            }
            TCHECK(fabs(get_d(y, idx) - acc) <= 1e-12 * (1 + fabs(acc)), "linear element (rank %d, bias %d)", r,
                   bias != NULL);
        } while (next_index(idx, y->sizes, r));
        od_tensor_release(y);
        od_tensor_release(x);
        od_tensor_release(w);
        od_tensor_release(bias);
    }
}

Test(composite, embedding_gathers_rows)
{
    int64_t V = rng_int(2, 8), D = rng_int(1, 5), wsz[2] = {V, D};
    od_tensor *w = t_rand(wsz, 2, OD_FLOAT32);
    for (int trial = 0; trial < 8; trial++) {
        int r = (int)rng_int(0, 3);
        int64_t isz[3];
        rand_sizes(isz, r, 0, 4);
        od_tensor *ind = t_empty(isz, r, trial % 2 ? OD_INT32 : OD_INT64, CPU);
        int64_t idx[OD_MAX_DIMS] = {0};
        if (od_tensor_numel(ind))
            do
                set_i(ind, idx, rng_int(0, V - 1));
            while (next_index(idx, isz, r));
        od_value a[5] = {tv(w), tv(ind), od_int(-1), od_bool(false), od_bool(false)};
        od_tensor *y = call1_ok(OD_OPID_embedding, a, 5);
        int64_t want[4];
        memcpy(want, isz, sizeof isz);
        want[r] = D;
        TCHECK(same_shape(y, want, r + 1), "embedding shape");
        memset(idx, 0, sizeof idx);
        if (od_tensor_numel(y))
            do {
                int64_t wi[2] = {get_i(ind, idx), idx[r]};
                TCHECK(get_d(y, idx) == get_d(w, wi), "embedding element");
            } while (next_index(idx, y->sizes, y->ndim));
        od_tensor_release(y);
        od_tensor_release(ind);
    }
    int64_t one[1] = {2};
    od_tensor *fi = t_rand(one, 1, OD_FLOAT32), *w1 = t_rand(one, 1, OD_FLOAT32);
    od_value a[5] = {tv(w), tv(fi), od_int(-1), od_bool(false), od_bool(false)};
    call_fails(OD_OPID_embedding, a, 5, OD_EMISMATCH,
               "Expected tensor for argument #1 'indices' to have one of the following scalar types: Long, Int; "
               "but got torch.FloatTensor instead (while checking arguments for embedding)");
    od_tensor *ii = t_empty(one, 1, OD_INT64, CPU);
    set_i(ii, (int64_t[]){0}, 0);
    set_i(ii, (int64_t[]){1}, V); /* out of range */
    a[1] = tv(ii);
    call_fails(OD_OPID_embedding, a, 5, OD_OK, NULL);
    a[0] = tv(w1);
    call_fails(OD_OPID_embedding, a, 5, OD_EMISMATCH, "'weight' must be 2-D");
    od_tensor_release(ii);
    od_tensor_release(fi);
    od_tensor_release(w1);
    od_tensor_release(w);
}

Test(composite, softmax_and_log_softmax_with_and_without_dtype)
{
    for (int trial = 0; trial < 8; trial++) {
        bool logsm = trial % 2, cast = trial / 2 % 2;
        int64_t sz[3];
        rand_sizes(sz, 3, 1, 5);
        od_tensor *x = t_rand(sz, 3, OD_FLOAT32);
        int64_t dim = rng_int(-3, 2);
        int wd = (int)(dim < 0 ? dim + 3 : dim);
        od_value a[3] = {tv(x), od_int(dim), cast ? od_dtype_v(OD_FLOAT64) : od_none()};
        od_tensor *y = call1_ok(logsm ? OD_OPID_log_softmax_int : OD_OPID_softmax_int, a, 3);
        TCHECK(y->dtype == (cast ? OD_FLOAT64 : OD_FLOAT32) && same_shape(y, sz, 3), "softmax dtype/shape");
        int64_t idx[3] = {0}, j[3];
        do {
            double mx = -INFINITY, sum = 0;
            memcpy(j, idx, sizeof j);
            for (j[wd] = 0; j[wd] < sz[wd]; j[wd]++)
                mx = fmax(mx, get_d(x, j));
            for (j[wd] = 0; j[wd] < sz[wd]; j[wd]++)
                sum += exp(get_d(x, j) - mx);
            double v = get_d(x, idx) - mx;
            double want = logsm ? v - log(sum) : exp(v) / sum;
            double tol = cast ? 1e-12 : 1e-6;
            TCHECK(fabs(get_d(y, idx) - want) <= tol * (1 + fabs(want)), "%s element: %.10g vs %.10g",
                   logsm ? "log_softmax" : "softmax", get_d(y, idx), want);
        } while (next_index(idx, sz, 3));
        od_tensor_release(y);
        od_tensor_release(x);
    }
}

Test(composite, layer_norm_returns_the_normalised_output)
{
    for (int trial = 0; trial < 6; trial++) {
        int64_t sz[3] = {rng_int(1, 3), rng_int(1, 4), rng_int(2, 6)};
        int nn = (int)rng_int(1, 2); /* normalise over the last nn dims */
        od_tensor *x = t_rand(sz, 3, OD_FLOAT64);
        bool affine = trial % 2;
        od_tensor *w = affine ? t_rand(sz + 3 - nn, nn, OD_FLOAT64) : NULL;
        od_tensor *b = affine ? t_rand(sz + 3 - nn, nn, OD_FLOAT64) : NULL;
        double eps = 1e-5;
        od_value a[6] = {tv(x), ilist(sz + 3 - nn, nn), w ? tv(w) : od_none(), b ? tv(b) : od_none(),
                         od_double(eps), od_bool(true)};
        od_tensor *y = call1_ok(OD_OPID_layer_norm, a, 6);
        TCHECK(same_shape(y, sz, 3), "layer_norm shape");
        int64_t outer = numel_of(sz, 3 - nn), inner = numel_of(sz + 3 - nn, nn);
        for (int64_t o = 0; o < outer; o++) {
            double mean = 0, var = 0;
            const double *px = (const double *)x->storage->data + o * inner;
            for (int64_t i = 0; i < inner; i++)
                mean += px[i];
            mean /= (double)inner;
            for (int64_t i = 0; i < inner; i++)
                var += (px[i] - mean) * (px[i] - mean);
            var /= (double)inner;
            for (int64_t i = 0; i < inner; i++) {
                double want = (px[i] - mean) / sqrt(var + eps);
                if (affine)
                    want = want * ((double *)w->storage->data)[i] + ((double *)b->storage->data)[i];
                double got = ((double *)od_tensor_data(y))[o * inner + i];
                TCHECK(fabs(got - want) <= 1e-9 * (1 + fabs(want)), "layer_norm element: %.12g vs %.12g", got, want);
            }
        }
        od_tensor_release(y);
        od_tensor_release(x);
        od_tensor_release(w);
        od_tensor_release(b);
    }
}

/* ------------------------------------------------------------- factories */

typedef struct {
    od_keyset seen;
    int n;
} key_log;
static key_log g_keys;
static void record_key(const od_op *op, od_key key, od_status st, uint64_t ns)
{
    (void)op, (void)st, (void)ns;
    g_keys.seen |= OD_KS(key);
    g_keys.n++;
}

static bool all_equal(const od_tensor *t, double v)
{
    int64_t idx[OD_MAX_DIMS] = {0};
    if (od_tensor_numel(t) == 0)
        return true;
    do
        if (get_d(t, idx) != v)
            return false;
    while (next_index(idx, t->sizes, t->ndim));
    return true;
}

Test(composite, factories_through_backend_select)
{
    od_set_stats_hook(record_key);
    for (int dev = 0; dev < 4; dev++) { /* None, cpu value, "cpu" string, meta */
        od_value d = dev == 0 ? od_none() : dev == 1 ? od_device_v(CPU) : dev == 2 ? od_str("cpu") : od_device_v(META);
        bool meta = dev == 3;
        int nd = (int)rng_int(0, 3);
        int64_t sz[3];
        rand_sizes(sz, nd, 0, 4);

        g_keys = (key_log){0, 0};
        od_value z[5] = {ilist(sz, nd), od_none(), od_none(), d, od_none()};
        od_tensor *y = call1_ok(OD_OPID_zeros, z, 5);
        TCHECK(od_ks_has(g_keys.seen, OD_KEY_BackendSelect), "zeros did not go through BackendSelect");
        TCHECK(od_ks_has(g_keys.seen, meta ? OD_KEY_Meta : OD_KEY_CPU), "zeros ran on the wrong backend");
        TCHECK(!od_ks_has(g_keys.seen, meta ? OD_KEY_CPU : OD_KEY_Meta), "zeros touched the other backend");
        TCHECK(y->dtype == OD_FLOAT32 && same_shape(y, sz, nd), "zeros default dtype float32");
        TCHECK(y->device.type == (meta ? OD_DEV_META : OD_DEV_CPU), "zeros device");
        TCHECK(meta ? od_tensor_data(y) == NULL : all_equal(y, 0), "zeros values");
        od_tensor_release(y);

        od_value o[5] = {ilist(sz, nd), od_dtype_v(OD_INT16), od_int(0), d, od_bool(false)};
        y = call1_ok(OD_OPID_ones, o, 5);
        TCHECK(y->dtype == OD_INT16 && same_shape(y, sz, nd) && (meta || all_equal(y, 1)), "ones");
        od_tensor_release(y);

        /* full: dtype from the fill value like torch (int -> int64, bool -> bool, float -> float32) */
        const od_value fills[3] = {od_int(rng_int(-9, 9)), od_bool(true), od_double(rng_uniform(-3, 3))};
        const od_dtype infer[3] = {OD_INT64, OD_BOOL, OD_FLOAT32};
        for (int f = 0; f < 3; f++) {
            od_value fa[6] = {ilist(sz, nd), fills[f], od_none(), od_none(), d, od_none()};
            y = call1_ok(OD_OPID_full, fa, 6);
            TCHECK(y->dtype == infer[f], "full(%s) dtype %s, expected %s", od_tag_name(fills[f].tag),
                   od_dtype_name(y->dtype), od_dtype_name(infer[f]));
            double v = f == 2 ? (double)(float)fills[f].u.d : od_value_as_double(&fills[f]);
            TCHECK(meta || all_equal(y, v), "full values");
            od_tensor_release(y);
        }
        od_value fd[6] = {ilist(sz, nd), od_double(2.75), od_dtype_v(OD_FLOAT64), od_none(), d, od_none()};
        y = call1_ok(OD_OPID_full, fd, 6);
        TCHECK(y->dtype == OD_FLOAT64 && (meta || all_equal(y, 2.75)), "full with an explicit dtype");
        od_tensor_release(y);

        od_value e[6] = {ilist(sz, nd), od_none(), od_none(), d, od_none(), od_none()};
        y = call1_ok(OD_OPID_empty_memory_format, e, 6);
        TCHECK(y->dtype == OD_FLOAT32 && same_shape(y, sz, nd) && od_tensor_is_contiguous(y), "empty");
        TCHECK(y->device.type == (meta ? OD_DEV_META : OD_DEV_CPU), "empty device");
        od_tensor_release(y);

        /* arange / rand / randn have real kernels; BackendSelect routes them too */
        int64_t end = rng_int(0, 9);
        od_value ar[5] = {od_int(end), od_none(), od_none(), d, od_none()};
        y = call1_ok(OD_OPID_arange, ar, 5);
        TCHECK(y->dtype == OD_INT64 && y->ndim == 1 && y->sizes[0] == end, "arange(int) shape/dtype");
        TCHECK(y->device.type == (meta ? OD_DEV_META : OD_DEV_CPU), "arange device");
        for (int64_t i = 0; !meta && i < end; i++)
            TCHECK(get_i(y, &i) == i, "arange value");
        od_tensor_release(y);
        od_value ar3[7] = {od_double(0.5), od_int(3), od_double(0.75), od_none(), od_none(), d, od_none()};
        y = call1_ok(OD_OPID_arange_start_step, ar3, 7);
        TCHECK(y->dtype == OD_FLOAT32 && y->ndim == 1 && y->sizes[0] == 4, "arange(0.5, 3, 0.75)");
        for (int64_t i = 0; !meta && i < 4; i++)
            TCHECK(get_d(y, &i) == 0.5 + 0.75 * (double)i, "arange.start_step value");
        od_tensor_release(y);

        int64_t rs[2] = {64, 64};
        od_value r[5] = {ilist(rs, 2), od_none(), od_none(), d, od_none()};
        y = call1_ok(OD_OPID_rand, r, 5);
        TCHECK(y->dtype == OD_FLOAT32 && same_shape(y, rs, 2), "rand");
        if (!meta) {
            int64_t idx[2] = {0};
            do
                TCHECK(get_d(y, idx) >= 0 && get_d(y, idx) < 1, "rand value in [0, 1)");
            while (next_index(idx, rs, 2));
        }
        od_tensor_release(y);
        y = call1_ok(OD_OPID_randn, r, 5);
        TCHECK(y->dtype == OD_FLOAT32 && same_shape(y, rs, 2), "randn");
        if (!meta) {
            double sum = 0, sq = 0;
            int64_t idx[2] = {0};
            do {
                double v = get_d(y, idx);
                sum += v;
                sq += v * v;
            } while (next_index(idx, rs, 2));
            /* 4096 normal samples: mean within 10 sigma of 0, variance near 1 */
            TCHECK(fabs(sum / 4096) < 10.0 / 64 && fabs(sq / 4096 - 1) < 0.25, "randn statistics");
        }
        od_tensor_release(y);
    }
    od_set_stats_hook(NULL);
}

Test(composite, factories_on_cuda_without_a_cuda_backend_fail_cleanly)
{
    od_device cuda = {OD_DEV_CUDA, 0};
    bool have_cuda = od_get_allocator(OD_DEV_CUDA) != NULL;
    int64_t sz[1] = {3};
    const od_opid ids[] = {OD_OPID_zeros, OD_OPID_ones, OD_OPID_rand, OD_OPID_empty_memory_format};
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        od_value a[6] = {ilist(sz, 1), od_none(), od_none(), od_device_v(cuda), od_none(), od_none()};
        int n = ids[i] == OD_OPID_empty_memory_format ? 6 : 5;
        od_stack s;
        od_error err;
        od_status st = call_id(ids[i], a, n, &s, &err);
        if (st == OD_OK) {
            TCHECK(have_cuda, "%s on cuda succeeded without a CUDA allocator", od_op_name(od_builtin(ids[i])));
            TCHECK(s.rets[0].u.t->device.type == OD_DEV_CUDA, "cuda factory device");
            od_stack_release_rets(&s);
        } else {
            TCHECK(st == OD_EUNAVAIL || st == OD_ENOKERNEL || st == OD_EDEVMEM, "%s on cuda: status %s (%s)",
                   od_op_name(od_builtin(ids[i])), od_status_code(st), err.message);
            TCHECK(err.message[0] != '\0' && s.nrets == 0, "error message set, nothing returned");
        }
    }
    od_value full[6] = {ilist(sz, 1), od_int(1), od_none(), od_none(), od_str("cuda:0"), od_none()};
    od_stack s;
    od_error err;
    od_status st = call_id(OD_OPID_full, full, 6, &s, &err);
    if (st == OD_OK)
        od_stack_release_rets(&s);
    TCHECK(have_cuda || st != OD_OK, "full(device='cuda:0') without CUDA must fail");
}

Test(composite, factory_argument_errors)
{
    int64_t neg[2] = {2, -1}, sz[1] = {2};
    od_value z[5] = {ilist(neg, 2), od_none(), od_none(), od_none(), od_none()};
    call_fails(OD_OPID_zeros, z, 5, OD_OK, "negative");
    od_value bad_dev[5] = {ilist(sz, 1), od_none(), od_none(), od_str("tpu"), od_none()};
    call_fails(OD_OPID_zeros, bad_dev, 5, OD_EINVAL, "tpu");
    od_value pin[5] = {ilist(sz, 1), od_none(), od_none(), od_none(), od_bool(true)};
    call_fails(OD_OPID_ones, pin, 5, OD_EUNSUPPORTED, "pin");
    od_value lay[5] = {ilist(sz, 1), od_none(), od_int(1), od_none(), od_none()};
    call_fails(OD_OPID_zeros, lay, 5, OD_EUNSUPPORTED, "strided");
    od_value mf[6] = {ilist(sz, 1), od_none(), od_none(), od_none(), od_none(), od_int(2)};
    call_fails(OD_OPID_empty_memory_format, mf, 6, OD_EINVAL, "required rank 4 tensor to use channels_last format");
    mf[5] = od_int(OD_MF_PRESERVE);
    call_fails(OD_OPID_empty_memory_format, mf, 6, OD_EINVAL, "unsupported memory format Preserve");
    od_value wrong[5] = {ilist(sz, 1), od_int(3), od_none(), od_none(), od_none()};
    call_fails(OD_OPID_zeros, wrong, 5, OD_EINVAL, "dtype");
}

/* -------------------------------------------------------------- typed API */

static od_tensor *rand_shape(int64_t *sz, int *nd, int maxnd)
{
    *nd = (int)rng_int(0, maxnd);
    rand_sizes(sz, *nd, 1, 4);
    return t_rand(sz, *nd, OD_FLOAT32);
}

Test(composite, typed_api_matches_references)
{
    for (int trial = 0; trial < 10; trial++) {
        int64_t sa[OD_MAX_DIMS], sb[OD_MAX_DIMS];
        int na, nb;
        od_tensor *a = rand_shape(sa, &na, 3);
        /* b broadcasts against a: a's trailing dims with some set to 1 */
        nb = (int)rng_int(0, na);
        for (int d = 0; d < nb; d++)
            sb[d] = rng_next() % 2 ? 1 : sa[na - nb + d];
        od_tensor *b = t_rand(sb, nb, OD_FLOAT32), *y = NULL;
        double alpha = (double)rng_int(-3, 3);
        for (int op = 0; op < 4; op++) {
            switch (op) {
            case 0: OKCALL(od_add(a, b, alpha, &y, &e_)); break;
            case 1: OKCALL(od_sub(a, b, alpha, &y, &e_)); break;
            case 2: OKCALL(od_mul(a, b, &y, &e_)); break;
            default: OKCALL(od_div(a, b, &y, &e_)); break;
            }
            TCHECK(same_shape(y, sa, na) && y->dtype == OD_FLOAT32, "typed binary shape");
            int64_t idx[OD_MAX_DIMS] = {0}, bi[OD_MAX_DIMS];
            do {
                for (int d = 0; d < nb; d++)
                    bi[d] = sb[d] == 1 ? 0 : idx[na - nb + d];
                double x = get_d(a, idx), z = get_d(b, bi);
                double want = op == 0 ? x + alpha * z : op == 1 ? x - alpha * z : op == 2 ? x * z : x / z;
                double scale = op < 2 ? 1 + fabs(x) + fabs(alpha * z) : 1 + fabs(want);
                TCHECK(fabs(get_d(y, idx) - want) <= 2e-6 * scale, "typed op %d: %.9g vs %.9g", op,
                       get_d(y, idx), want);
            } while (next_index(idx, sa, na));
            od_tensor_release(y);
        }
        OKCALL(od_relu(a, &y, &e_));
        int64_t idx[OD_MAX_DIMS] = {0};
        do
            TCHECK(get_d(y, idx) == fmax(get_d(a, idx), 0), "od_relu");
        while (next_index(idx, sa, na));
        od_tensor_release(y);
        OKCALL(od_sigmoid(a, &y, &e_));
        memset(idx, 0, sizeof idx);
        do {
            double want = 1 / (1 + exp(-get_d(a, idx)));
            TCHECK(fabs(get_d(y, idx) - want) < 1e-6, "od_sigmoid");
        } while (next_index(idx, sa, na));
        od_tensor_release(y);

        /* sums: everything, and one dim with and without keepdim */
        OKCALL(od_sum(a, NULL, 0, false, &y, &e_));
        double tot = 0;
        memset(idx, 0, sizeof idx);
        do
            tot += get_d(a, idx);
        while (next_index(idx, sa, na));
        TCHECK(y->ndim == 0 && fabs(get_d(y, idx) - tot) < 1e-4 * (1 + fabs(tot)), "od_sum all");
        od_tensor_release(y);
        OKCALL(od_sum(a, NULL, 0, true, &y, &e_));
        TCHECK(y->ndim == na && od_tensor_numel(y) == 1, "od_sum all keepdim");
        od_tensor_release(y);
        if (na > 0) {
            int64_t dim = rng_int(0, na - 1);
            bool keep = rng_next() % 2;
            OKCALL(od_sum(a, &dim, 1, keep, &y, &e_));
            TCHECK(y->ndim == (keep ? na : na - 1), "od_sum dim rank");
            od_tensor_release(y);
        }
        if (na > 0) {
            OKCALL(od_softmax(a, -1, &y, &e_));
            TCHECK(same_shape(y, sa, na), "od_softmax shape");
            od_tensor_release(y);
        }
        OKCALL(od_to_dtype(a, OD_FLOAT64, &y, &e_));
        memset(idx, 0, sizeof idx);
        do
            TCHECK(get_d(y, idx) == get_d(a, idx), "od_to_dtype");
        while (next_index(idx, sa, na));
        od_tensor_release(y);
        OKCALL(od_to_dtype(a, OD_FLOAT32, &y, &e_));
        TCHECK(y == a, "od_to_dtype to the same dtype returns self");
        od_tensor_release(y);
        OKCALL(od_to_device(a, META, &y, &e_));
        TCHECK(y->device.type == OD_DEV_META && same_shape(y, sa, na), "od_to_device(meta)");
        od_tensor_release(y);
        OKCALL(od_zeros(sa, na, OD_INT32, CPU, &y, &e_));
        TCHECK(y->dtype == OD_INT32 && same_shape(y, sa, na) && all_equal(y, 0), "od_zeros");
        od_tensor_release(y);
        od_tensor_release(a);
        od_tensor_release(b);
    }
    int64_t m1[2] = {rng_int(1, 4), rng_int(1, 4)}, m2[2] = {m1[1], rng_int(1, 4)};
    od_tensor *a = t_rand(m1, 2, OD_FLOAT64), *b = t_rand(m2, 2, OD_FLOAT64), *y = NULL;
    OKCALL(od_mm(a, b, &y, &e_));
    check_matmul(a, b, y, 1e-12);
    od_tensor_release(y);
    /* errors come back as statuses */
    od_error err;
    od_status st = od_mm(b, b, &y, &err);
    TCHECK(m2[0] == m2[1] || st != OD_OK, "od_mm with mismatched shapes must fail");
    if (st == OD_OK)
        od_tensor_release(y);
    od_tensor_release(a);
    od_tensor_release(b);
}

/* ------------------------------------------------------------------ CUDA */

/* On a machine with the CUDA backend: the composites route to it through the
 * dispatcher (copies across devices, views, contiguous, matmul, factories).
 * Skipped, after checking the failure is a clean status, everywhere else. */
Test(composite, cuda_round_trip_when_available)
{
    od_device cuda = {OD_DEV_CUDA, 0};
    int64_t sz[3] = {rng_int(1, 3), rng_int(1, 5), rng_int(1, 6)};
    od_tensor *x = t_rand(sz, 3, OD_FLOAT32);
    od_value a[7] = {tv(x), od_none(), od_none(), od_device_v(cuda), od_none(), od_bool(false), od_none()};
    od_stack s;
    od_error err;
    od_status st = call_id(OD_OPID__to_copy, a, 7, &s, &err);
    if (st != OD_OK) {
        od_tensor_release(x);
        TCHECK(st == OD_EUNAVAIL || st == OD_ENOKERNEL || st == OD_EDEVMEM, "_to_copy(cuda): %s (%s)",
               od_status_code(st), err.message);
        cr_skip_test("no usable CUDA backend: %s", err.message);
    }
    od_tensor *xc = s.rets[0].u.t;
    TCHECK(xc->device.type == OD_DEV_CUDA && same_shape(xc, sz, 3), "_to_copy(cuda)");

    /* a view and a contiguous copy on the device, then back as float64 */
    od_value tr[3] = {tv(xc), od_int(0), od_int(2)};
    od_tensor *tc = call1_ok(OD_OPID_transpose_int, tr, 3);
    TCHECK(tc->storage == xc->storage && tc->device.type == OD_DEV_CUDA, "transpose on cuda is a view");
    od_value ct[2] = {tv(tc), od_int(0)};
    od_tensor *cc = call1_ok(OD_OPID_contiguous, ct, 2);
    TCHECK(od_tensor_is_contiguous(cc) && cc->device.type == OD_DEV_CUDA, "contiguous on cuda");
    od_value back[6] = {tv(cc), od_device_v(CPU), od_dtype_v(OD_FLOAT64), od_bool(false), od_bool(false), od_none()};
    od_tensor *h = call1_ok(OD_OPID_to_device, back, 6);
    TCHECK(h->device.type == OD_DEV_CPU && h->dtype == OD_FLOAT64, "to(cpu, float64)");
    int64_t idx[3] = {0}, xi[3];
    do {
        xi[0] = idx[2], xi[1] = idx[1], xi[2] = idx[0];
        TCHECK(get_d(h, idx) == get_d(x, xi), "cuda round trip element");
    } while (next_index(idx, h->sizes, 3));

    /* matmul on the device against the double reference */
    int64_t ws[2] = {sz[2], rng_int(1, 4)};
    od_tensor *w = t_rand(ws, 2, OD_FLOAT32);
    od_value wa[6] = {tv(w), od_device_v(cuda), od_dtype_v(OD_FLOAT32), od_bool(false), od_bool(false), od_none()};
    od_tensor *wc = call1_ok(OD_OPID_to_device, wa, 6);
    od_value mm[2] = {tv(xc), tv(wc)};
    od_tensor *yc = call1_ok(OD_OPID_matmul, mm, 2);
    od_value yb[6] = {tv(yc), od_device_v(CPU), od_dtype_v(OD_FLOAT32), od_bool(false), od_bool(false), od_none()};
    od_tensor *y = call1_ok(OD_OPID_to_device, yb, 6);
    check_matmul(x, w, y, 1e-5);

    /* factories on the device */
    od_value z[5] = {ilist(sz, 3), od_dtype_v(OD_INT32), od_none(), od_device_v(cuda), od_none()};
    od_tensor *zc = call1_ok(OD_OPID_zeros, z, 5);
    od_value zb[6] = {tv(zc), od_device_v(CPU), od_dtype_v(OD_INT32), od_bool(false), od_bool(false), od_none()};
    od_tensor *zh = call1_ok(OD_OPID_to_device, zb, 6);
    TCHECK(zc->device.type == OD_DEV_CUDA && all_equal(zh, 0), "zeros(cuda)");

    od_tensor *all[] = {x, xc, tc, cc, h, w, wc, yc, y, zc, zh};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        od_tensor_release(all[i]);
}

/* linear as torch 1.13 runs it: a biased 2-D or contiguous 3-D input is one
 * addmm (so bias and input dtypes must agree), anything else is a matmul and
 * an in-place add of the bias (so the output keeps the product's dtype and
 * shape); a matrix @ vector product takes the vector's dtype, as mv does
 * (issue 17, classes 8 and 10). */
Test(composite, linear_and_matmul_follow_torch_paths)
{
    int64_t s4[1] = {4}, s14[2] = {1, 4}, s1[1] = {1}, s234[3] = {2, 3, 4}, s2234[4] = {2, 2, 3, 4};
    int64_t s54[2] = {5, 4}, s5[1] = {5}, s20[2] = {2, 0}, s0[1] = {0}, s25[2] = {2, 5};
    /* uint8 input, int16 bias: matmul in uint8, bias added in int16, cast back */
    od_tensor *u = t_empty(s4, 1, OD_UINT8, CPU), *wu = t_empty(s14, 2, OD_UINT8, CPU), *bi = t_empty(s1, 1, OD_INT16, CPU);
    for (int64_t i = 0; i < 4; i++)
        set_d(u, &i, 100);
    for (int64_t i = 0; i < 4; i++) {
        int64_t ix[2] = {0, i};
        set_d(wu, ix, 1);
    }
    int64_t z = 0;
    set_d(bi, &z, 643);
    od_value l1[3] = {tv(u), tv(wu), tv(bi)};
    od_tensor *o = call1_ok(OD_OPID_linear, l1, 3);
    TCHECK(o->dtype == OD_UINT8 && get_d(o, &z) == 19, "uint8 linear with an int16 bias is 19 (torch)");
    od_tensor_release(o);
    /* float32 input, float64 bias: 4-D keeps float32; 2-D and contiguous 3-D are addmm and refuse */
    od_tensor *w = t_rand(s54, 2, OD_FLOAT32), *b64 = t_rand(s5, 1, OD_FLOAT64);
    od_tensor *x4 = t_rand(s2234, 4, OD_FLOAT32), *x3 = t_rand(s234, 3, OD_FLOAT32), *t3 = NULL;
    od_value l2[3] = {tv(x4), tv(w), tv(b64)};
    o = call1_ok(OD_OPID_linear, l2, 3);
    TCHECK(o->dtype == OD_FLOAT32, "4-D linear keeps the input dtype");
    od_tensor_release(o);
    od_value l3[3] = {tv(x3), tv(w), tv(b64)};
    call_fails(OD_OPID_linear, l3, 3, OD_EMISMATCH, "self and mat2 must have the same dtype");
    od_error e;
    TCHECK(od_tensor_transpose(x3, 0, 1, &t3, &e) == OD_OK, "transpose");
    od_value l4[3] = {tv(t3), tv(w), tv(b64)}; /* not contiguous: matmul + add_ */
    o = call1_ok(OD_OPID_linear, l4, 3);
    TCHECK(o->dtype == OD_FLOAT32, "a non-contiguous 3-D linear keeps the input dtype");
    od_tensor_release(o);
    /* an integer output cannot take a float bias in place; a bias may not grow the output */
    od_tensor *xi = t_rand(s4, 1, OD_INT64), *wi = t_rand(s54, 2, OD_INT64), *bf = t_rand(s5, 1, OD_FLOAT32);
    od_value l5[3] = {tv(xi), tv(wi), tv(bf)};
    call_fails(OD_OPID_linear, l5, 3, OD_EMISMATCH, "result type Float can't be cast to the desired output type Long");
    od_tensor *x1 = t_rand(s4, 1, OD_FLOAT32), *b25 = t_rand(s25, 2, OD_FLOAT32);
    od_value l6[3] = {tv(x1), tv(w), tv(b25)};
    call_fails(OD_OPID_linear, l6, 3, OD_EMISMATCH, "output with shape [5] doesn't match the broadcast shape [2, 5]");
    /* matrix @ vector with nothing to multiply: mv's dtype, the vector's */
    od_tensor *ef = t_empty(s20, 2, OD_FLOAT32, CPU), *ei = t_empty(s0, 1, OD_INT64, CPU);
    od_value mv[2] = {tv(ef), tv(ei)};
    o = call1_ok(OD_OPID_matmul, mv, 2);
    int64_t w2[1] = {2}, idx = 0;
    TCHECK(o->dtype == OD_INT64 && same_shape(o, w2, 1) && get_d(o, &idx) == 0, "empty mv takes the vector's dtype");
    od_tensor_release(o);
    od_tensor *ts[] = {u, wu, bi, w, b64, x4, x3, t3, xi, wi, bf, x1, b25, ef, ei};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++)
        od_tensor_release(ts[i]);
}
