/* test_cpu_join.c — CPU cat and index_select through the dispatcher.
 *
 * Each result is checked element by element against index arithmetic done
 * here on fresh random inputs: random ranks, dims (negative too), sizes
 * (empty slabs included), non-contiguous inputs, mixed dtypes (promotion,
 * values cast like torch), legacy 1-D empty tensors in cat, int32/int64
 * indices with repeats, and torch's error messages. The seed is printed on
 * failure.
 */
#include "cpu_testutil.h"
#include "od_shape.h"

TestSuite(cpu_join, .init = test_setup);

Test(cpu_join, cat_random_shapes_dtypes_layouts)
{
    for (int t = 0; t < 300; t++) {
        int nd = (int)rng_int(1, 4), n = (int)rng_int(1, 5);
        int64_t base[OD_MAX_DIMS];
        rand_sizes(base, nd, 1, 5);
        int64_t dim = rng_int(-nd, nd - 1);
        int d = (int)(dim < 0 ? dim + nd : dim);
        od_tensor *ts[8];
        od_result_arg ra[8];
        bool mixed = rng_next() % 3 == 0;
        od_dtype dt0 = PICK(ALL_DTS);
        int64_t offs[9] = {0};
        bool skipped[8];
        for (int i = 0; i < n; i++) {
            int64_t sz[OD_MAX_DIMS];
            memcpy(sz, base, sizeof sz);
            sz[d] = rng_int(0, 4);
            od_dtype dt = mixed ? PICK(ALL_DTS) : dt0;
            skipped[i] = i > 0 && rng_next() % 8 == 0; /* a legacy [0] tensor */
            if (skipped[i]) {
                int64_t z = 0;
                ts[i] = t_empty(&z, 1, dt, CPU);
            } else {
                ts[i] = t_rand_any(sz, nd, dt);
            }
            offs[i + 1] = offs[i] + (skipped[i] ? 0 : sz[d]);
            ra[i].tensor = ts[i];
            ra[i].scalar_kind = OD_SCALAR_INT;
        }
        od_dtype odt = od_result_type(ra, n);
        od_value a[2] = {od_list_v(OD_T_TENSOR_LIST, ts, (size_t)n), od_int(dim)};
        od_tensor *out = call1_ok(OD_OPID_cat, a, 2);
        int64_t want[OD_MAX_DIMS];
        memcpy(want, base, sizeof want);
        want[d] = offs[n];
        char b1[128], b2[128];
        TCHECK(same_shape(out, want, nd), "cat shape %s, want %s", shape_str(out->sizes, out->ndim, b1, sizeof b1),
               shape_str(want, nd, b2, sizeof b2));
        TCHECK(out->dtype == odt, "cat dtype %s, want %s", dtn(out->dtype), dtn(odt));
        for (int i = 0; i < n; i++) {
            if (skipped[i] || od_tensor_numel(ts[i]) == 0)
                continue;
            int64_t idx[OD_MAX_DIMS] = {0}, oi[OD_MAX_DIMS];
            do {
                memcpy(oi, idx, sizeof oi);
                oi[d] += offs[i];
                double want_v = cast_value(get_d(ts[i], idx), odt), got = get_d(out, oi);
                TCHECK(got == want_v || (isnan(got) && isnan(want_v)), "cat: tensor %d element %g, want %g (%s -> %s)",
                       i, got, want_v, dtn(ts[i]->dtype), dtn(odt));
            } while (next_index(idx, ts[i]->sizes, nd));
        }
        od_tensor_release(out);
        for (int i = 0; i < n; i++)
            od_tensor_release(ts[i]);
    }
}

Test(cpu_join, cat_legacy_empty_and_errors)
{
    int64_t z = 0, s23[2] = {2, 3}, s33[2] = {3, 3}, s2[1] = {2}, s24[2] = {2, 4};
    od_tensor *e = t_empty(&z, 1, OD_FLOAT32, CPU), *a = t_rand(s23, 2, OD_FLOAT32);
    /* [0] tensors are skipped whatever the others' rank; all skipped gives [0] */
    od_tensor *l1[3] = {e, a, e};
    od_value x[2] = {od_list_v(OD_T_TENSOR_LIST, l1, 3), od_int(1)};
    od_tensor *r = call1_ok(OD_OPID_cat, x, 2);
    TCHECK(same_shape(r, s23, 2), "cat with legacy empties");
    od_tensor_release(r);
    od_tensor *l2[2] = {e, e};
    x[0] = od_list_v(OD_T_TENSOR_LIST, l2, 2);
    x[1] = od_int(0);
    r = call1_ok(OD_OPID_cat, x, 2);
    TCHECK(r->ndim == 1 && r->sizes[0] == 0, "cat of only empties");
    od_tensor_release(r);

    od_tensor *b = t_rand(s33, 2, OD_FLOAT32), *c = t_rand(s2, 1, OD_FLOAT32), *s0 = NULL, *d = t_rand(s24, 2, OD_FLOAT32);
    OKCALL(od_tensor_scalar(1.0, OD_FLOAT32, &s0, &e_));
    od_tensor *l3[2] = {a, b};
    x[0] = od_list_v(OD_T_TENSOR_LIST, l3, 2);
    x[1] = od_int(1);
    call_fails(OD_OPID_cat, x, 2, OD_EMISMATCH,
               "Sizes of tensors must match except in dimension 1. Expected size 2 but got size 3 for tensor number 1 in the list.");
    x[1] = od_int(0);
    od_tensor *l3b[3] = {a, e, d};
    x[0] = od_list_v(OD_T_TENSOR_LIST, l3b, 3);
    call_fails(OD_OPID_cat, x, 2, OD_EMISMATCH,
               "Sizes of tensors must match except in dimension 0. Expected size 3 but got size 4 for tensor number 2 in the list.");
    od_tensor *l4[2] = {a, c};
    x[0] = od_list_v(OD_T_TENSOR_LIST, l4, 2);
    call_fails(OD_OPID_cat, x, 2, OD_EMISMATCH, "Tensors must have same number of dimensions: got 2 and 1");
    od_tensor *l5[2] = {a, s0};
    x[0] = od_list_v(OD_T_TENSOR_LIST, l5, 2);
    call_fails(OD_OPID_cat, x, 2, OD_EMISMATCH, "zero-dimensional tensor (at position 1) cannot be concatenated");
    x[0] = od_list_v(OD_T_TENSOR_LIST, l5, 0);
    /* no tensor at all: the dispatcher finds no key (torch says the same), and
     * the shape function, reached directly, names the empty list */
    call_fails(OD_OPID_cat, x, 2, OD_OK, "empty list of Tensors");
    od_stack st;
    od_stack_init(&st, x, 2);
    od_out_spec spec;
    int nouts = 0;
    od_error err;
    TCHECK(od_shape_cat(OD_OPID_cat, &st, &spec, &nouts, &err) != OD_OK &&
               strstr(err.message, "torch.cat(): expected a non-empty list of Tensors"),
           "od_shape_cat on an empty list: %s", err.message);
    x[0] = od_list_v(OD_T_TENSOR_LIST, l3, 2);
    x[1] = od_int(2);
    call_fails(OD_OPID_cat, x, 2, OD_OK, "Dimension out of range (expected to be in range of [-2, 1], but got 2)");
    od_tensor *all[] = {e, a, b, c, s0, d};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        od_tensor_release(all[i]);
}

Test(cpu_join, index_select_random)
{
    for (int t = 0; t < 300; t++) {
        int nd = (int)rng_int(0, 4);
        int64_t sz[OD_MAX_DIMS];
        rand_sizes(sz, nd, 1, 6);
        if (nd && rng_next() % 10 == 0)
            sz[rng_next() % nd] = 0;
        od_dtype dt = PICK(ALL_DTS);
        od_tensor *x = t_rand_any(sz, nd, dt);
        int ndd = nd ? nd : 1;
        int64_t dim = rng_int(-ndd, ndd - 1);
        int d = (int)(dim < 0 ? dim + ndd : dim);
        int64_t dsize = nd ? sz[d] : 1;
        int64_t ni = nd == 0 ? 1 : dsize == 0 ? 0 : rng_int(0, 9);
        od_dtype idt = rng_next() % 2 ? OD_INT64 : OD_INT32;
        od_tensor *index;
        if (rng_next() % 4 == 0 && ni == 1) {
            OKCALL(od_tensor_scalar(0, idt, &index, &e_)); /* a 0-dim index */
        } else {
            index = t_rand_layout(&ni, 1, idt, (int)(rng_next() % 2));
        }
        int64_t nidx = od_tensor_numel(index);
        int64_t *iv = malloc((size_t)(nidx + 1) * sizeof *iv);
        for (int64_t i = 0; i < nidx; i++) {
            iv[i] = rng_int(0, dsize - 1); /* repeats likely */
            int64_t ii = i;
            set_i(index, index->ndim ? &ii : NULL, iv[i]);
        }
        od_value a[3] = {tv(x), od_int(dim), tv(index)};
        od_tensor *out = call1_ok(OD_OPID_index_select, a, 3);
        int64_t want[OD_MAX_DIMS];
        memcpy(want, sz, sizeof want);
        if (nd)
            want[d] = nidx;
        TCHECK(same_shape(out, want, nd) && out->dtype == dt, "index_select shape/dtype");
        if (od_tensor_numel(out) > 0) {
            int64_t idx[OD_MAX_DIMS] = {0}, si[OD_MAX_DIMS];
            do {
                memcpy(si, idx, sizeof si);
                if (nd)
                    si[d] = iv[idx[d]];
                double g = get_d(out, idx), w = get_d(x, si);
                TCHECK(g == w || (isnan(g) && isnan(w)), "index_select(%s, dim=%" PRId64 ") element %g, want %g",
                       dtn(dt), dim, g, w);
            } while (next_index(idx, out->sizes, nd));
        }
        free(iv);
        od_tensor_release(out);
        od_tensor_release(index);
        od_tensor_release(x);
    }
}

Test(cpu_join, index_select_errors)
{
    int64_t s[2] = {3, 4}, n3 = 3, s22[2] = {2, 2};
    od_tensor *x = t_rand(s, 2, OD_FLOAT32), *i = t_empty(&n3, 1, OD_INT64, CPU);
    int64_t *p = od_tensor_data(i);
    p[0] = 0, p[1] = 2, p[2] = 4; /* dim 1 has size 4: index 4 is one past the end */
    od_value a[3] = {tv(x), od_int(1), tv(i)};
    /* along dim 1 torch 1.13 takes index_select_out_cpu_dim1_, whose message
     * names the first bad index (checked against torch 1.13) */
    call_fails(OD_OPID_index_select, a, 3, OD_OK, "INDICES element is out of DATA bounds, id=4 axis_dim=4");
    p[2] = -1; /* negative indices are not wrapped */
    call_fails(OD_OPID_index_select, a, 3, OD_OK, "INDICES element is out of DATA bounds, id=-1 axis_dim=4");
    p[2] = 3;
    a[1] = od_int(0);
    call_fails(OD_OPID_index_select, a, 3, OD_OK, "index out of range in self");
    od_tensor *i2 = t_empty(s22, 2, OD_INT64, CPU), *fi = t_rand(&n3, 1, OD_FLOAT32);
    memset(od_tensor_data(i2), 0, 4 * sizeof(int64_t));
    a[2] = tv(i2);
    call_fails(OD_OPID_index_select, a, 3, OD_OK, "index_select(): Index is supposed to be a vector");
    a[2] = tv(fi);
    call_fails(OD_OPID_index_select, a, 3, OD_OK, "index_select(): Expected dtype int32 or int64 for index");
    a[2] = tv(i);
    a[1] = od_int(2);
    call_fails(OD_OPID_index_select, a, 3, OD_OK, "Dimension out of range");
    od_tensor_release(x);
    od_tensor_release(i);
    od_tensor_release(i2);
    od_tensor_release(fi);
}
