/* test_meta.c — the Meta family and shape_common.c: calls on meta tensors
 * return the right shapes and dtypes without computing, through the Meta
 * kernel (ops with compute) or the composites (views, factories, matmul...).
 *
 * "Never touch data" is checked two ways: every output is a meta tensor with
 * no data pointer, and a stats hook records every key that ran a kernel —
 * CPU must never appear. Expected shapes and dtypes are derived here from
 * torch's rules (broadcasting, promotion, reduction), not read from the
 * implementation.
 */
#include "composite_testutil.h"

#include "od_shape.h"

TestSuite(meta, .init = test_setup);

static od_keyset g_ran;
static void record(const od_op *op, od_key key, od_status st, uint64_t ns)
{
    (void)op, (void)st, (void)ns;
    g_ran |= OD_KS(key);
}

static od_tensor *m_empty(const int64_t *sizes, int nd, od_dtype dt)
{
    return t_empty(sizes, nd, dt, META);
}

static void check_meta_out(const od_tensor *y, const int64_t *sizes, int nd, od_dtype dt, const char *what)
{
    char b1[128], b2[128];
    TCHECK(y->device.type == OD_DEV_META, "%s: device is not meta", what);
    TCHECK(od_tensor_data(y) == NULL && y->storage->data == NULL, "%s: meta output has data", what);
    TCHECK(same_shape(y, sizes, nd), "%s: shape %s, expected %s", what, shape_str(y->sizes, y->ndim, b1, 128),
           shape_str(sizes, nd, b2, 128));
    TCHECK(y->dtype == dt, "%s: dtype %s, expected %s", what, od_dtype_name(y->dtype), od_dtype_name(dt));
}

static void start_watch(void)
{
    g_ran = 0;
    od_set_stats_hook(record);
}

static void end_watch(const char *what)
{
    od_set_stats_hook(NULL);
    TCHECK(!od_ks_has(g_ran, OD_KEY_CPU) && !od_ks_has(g_ran, OD_KEY_CUDA), "%s ran a compute kernel", what);
    TCHECK(od_ks_has(g_ran, OD_KEY_Meta), "%s never reached the Meta key", what);
}

Test(meta, binary_ops_broadcast_and_promote)
{
    /* torch.promote_types facts */
    static const struct { od_dtype a, b, r; } pairs[] = {
        {OD_FLOAT32, OD_INT64, OD_FLOAT32}, {OD_INT32, OD_INT64, OD_INT64},   {OD_FLOAT16, OD_FLOAT32, OD_FLOAT32},
        {OD_UINT8, OD_INT8, OD_INT16},      {OD_BFLOAT16, OD_FLOAT16, OD_FLOAT32}, {OD_BOOL, OD_BOOL, OD_BOOL},
        {OD_BOOL, OD_UINT8, OD_UINT8},      {OD_FLOAT64, OD_FLOAT16, OD_FLOAT64},
    };
    start_watch();
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        int na = (int)rng_int(1, 4), nb = (int)rng_int(1, na); /* 0-dim operands: below */
        int64_t sa[OD_MAX_DIMS], sb[OD_MAX_DIMS], want[OD_MAX_DIMS];
        rand_sizes(sa, na, 0, 5);
        for (int d = 0; d < nb; d++) { /* b: a's trailing dims; either side may hold a 1 */
            int64_t c = rng_int(0, 2);
            sb[d] = c == 0 ? 1 : sa[na - nb + d];
            if (c == 2)
                sa[na - nb + d] = 1;
        }
        for (int d = 0; d < na; d++) {
            int db = d - (na - nb);
            want[d] = db >= 0 && sa[d] == 1 ? sb[db] : sa[d];
        }
        od_tensor *a = m_empty(sa, na, pairs[i].a), *b = m_empty(sb, nb, pairs[i].b);
        od_value args[3] = {tv(a), tv(b), od_int(1)};
        od_tensor *y = call1_ok(OD_OPID_add_Tensor, args, 3);
        check_meta_out(y, want, na, pairs[i].r, "add.Tensor");
        od_tensor_release(y);
        y = call1_ok(OD_OPID_mul_Tensor, args, 2);
        check_meta_out(y, want, na, pairs[i].r, "mul.Tensor");
        od_tensor_release(y);
        y = call1_ok(OD_OPID_lt_Tensor, args, 2);
        check_meta_out(y, want, na, OD_BOOL, "lt.Tensor");
        od_tensor_release(y);
        /* true division of integers gives the default float */
        y = call1_ok(OD_OPID_div_Tensor, args, 2);
        od_dtype dr = od_dtype_is_floating(pairs[i].r) ? pairs[i].r : OD_FLOAT32;
        check_meta_out(y, want, na, dr, "div.Tensor");
        od_tensor_release(y);
        od_tensor_release(a);
        od_tensor_release(b);
    }
    /* a 0-dim tensor only decides the dtype when its category is higher (torch.result_type) */
    static const struct { od_dtype a, zero, r; } zd[] = {
        {OD_INT32, OD_INT64, OD_INT32}, {OD_UINT8, OD_FLOAT64, OD_FLOAT64}, {OD_FLOAT16, OD_FLOAT64, OD_FLOAT16},
        {OD_BOOL, OD_INT8, OD_INT8},
    };
    for (size_t i = 0; i < sizeof zd / sizeof zd[0]; i++) {
        int64_t sa[2] = {rng_int(0, 4), rng_int(1, 4)}, none[1] = {0};
        od_tensor *a = m_empty(sa, 2, zd[i].a), *b = m_empty(none, 0, zd[i].zero);
        od_value args[3] = {tv(a), tv(b), od_int(1)};
        od_tensor *y = call1_ok(OD_OPID_add_Tensor, args, 3);
        check_meta_out(y, sa, 2, zd[i].r, "add.Tensor with a 0-dim operand");
        od_tensor_release(y);
        od_tensor_release(a);
        od_tensor_release(b);
    }
    end_watch("binary ops on meta");

    int64_t s1[2] = {2, 3}, s2[2] = {4, 3};
    od_tensor *a = m_empty(s1, 2, OD_FLOAT32), *b = m_empty(s2, 2, OD_FLOAT32);
    od_value args[3] = {tv(a), tv(b), od_int(1)};
    call_fails(OD_OPID_add_Tensor, args, 3, OD_EMISMATCH,
               "The size of tensor a (2) must match the size of tensor b (4) at non-singleton dimension 0");
    od_tensor_release(a);
    od_tensor_release(b);
}

Test(meta, unary_reductions_softmax_layer_norm)
{
    int64_t sz[3];
    rand_sizes(sz, 3, 1, 6);
    od_tensor *x = m_empty(sz, 3, OD_FLOAT16), *xi = m_empty(sz, 3, OD_INT32);
    start_watch();
    od_value a1[1] = {tv(x)};
    od_tensor *y = call1_ok(OD_OPID_exp, a1, 1);
    check_meta_out(y, sz, 3, OD_FLOAT16, "exp");
    od_tensor_release(y);

    od_value s[2] = {tv(xi), od_none()};
    y = call1_ok(OD_OPID_sum, s, 2);
    check_meta_out(y, sz, 0, OD_INT64, "sum(int32) is int64");
    od_tensor_release(y);

    int64_t dims[2] = {0, -1};
    for (int keep = 0; keep < 2; keep++) {
        od_value sd[4] = {tv(x), ilist(dims, 2), od_bool(keep), od_none()};
        y = call1_ok(OD_OPID_sum_dim_IntList, sd, 4);
        int64_t want[3] = {1, sz[1], 1}, want2[1] = {sz[1]};
        check_meta_out(y, keep ? want : want2, keep ? 3 : 1, OD_FLOAT16, "sum.dim_IntList");
        od_tensor_release(y);
    }
    od_value am[3] = {tv(x), od_int(1), od_bool(false)};
    y = call1_ok(OD_OPID_argmax, am, 3);
    int64_t w_arg[2] = {sz[0], sz[2]};
    check_meta_out(y, w_arg, 2, OD_INT64, "argmax");
    od_tensor_release(y);

    od_value sm[3] = {tv(x), od_int(-1), od_dtype_v(OD_FLOAT32)};
    y = call1_ok(OD_OPID_softmax_int, sm, 3);
    check_meta_out(y, sz, 3, OD_FLOAT32, "softmax.int(dtype=float32)");
    od_tensor_release(y);

    /* native_layer_norm: output like input, mean / rstd keep the outer dims */
    od_value ln[5] = {tv(x), ilist(sz + 1, 2), od_none(), od_none(), od_double(1e-5)};
    od_stack st;
    OKCALL(call_id(OD_OPID_native_layer_norm, ln, 5, &st, &e_));
    TCHECK(st.nrets == 3, "native_layer_norm returns 3 tensors");
    int64_t stat[3] = {sz[0], 1, 1};
    check_meta_out(st.rets[0].u.t, sz, 3, OD_FLOAT16, "native_layer_norm out");
    TCHECK(same_shape(st.rets[1].u.t, stat, 3) && same_shape(st.rets[2].u.t, stat, 3), "layer_norm stats shape");
    od_stack_release_rets(&st);
    od_value l2[6] = {tv(x), ilist(sz + 1, 2), od_none(), od_none(), od_double(1e-5), od_bool(true)};
    y = call1_ok(OD_OPID_layer_norm, l2, 6);
    check_meta_out(y, sz, 3, OD_FLOAT16, "layer_norm");
    od_tensor_release(y);
    end_watch("reductions on meta");

    od_value bad[4] = {tv(x), ilist((int64_t[]){5}, 1), od_bool(false), od_none()};
    call_fails(OD_OPID_sum_dim_IntList, bad, 4, OD_OK, "Dimension out of range");
    od_tensor_release(x);
    od_tensor_release(xi);
}

/* matmul's result shape by torch's rules (an independent statement of them). */
static int matmul_shape(const int64_t *a, int d1, const int64_t *b, int d2, int64_t *out)
{
    int nb1 = d1 > 2 ? d1 - 2 : 0, nb2 = d2 > 2 ? d2 - 2 : 0, nb = nb1 > nb2 ? nb1 : nb2, n = 0;
    for (int i = 0; i < nb; i++) {
        int i1 = i - (nb - nb1), i2 = i - (nb - nb2);
        int64_t s1 = i1 >= 0 ? a[i1] : 1, s2 = i2 >= 0 ? b[i2] : 1;
        out[n++] = s1 == 1 ? s2 : s1;
    }
    if (d1 > 1)
        out[n++] = a[d1 - 2];
    if (d2 > 1)
        out[n++] = b[d2 - 1];
    return n;
}

Test(meta, matrix_products_and_matmul_every_rank)
{
    start_watch();
    for (int r1 = 1; r1 <= 4; r1++)
        for (int r2 = 1; r2 <= 4; r2++) {
            int64_t batch[2] = {rng_int(1, 4), rng_int(1, 4)}, n = rng_int(1, 5), k = rng_int(0, 5), p = rng_int(1, 5);
            int64_t sa[4], sb[4];
            int na = 0, nb = 0;
            for (int i = 2 - (r1 - 2); r1 > 2 && i < 2; i++)
                sa[na++] = rng_next() % 3 ? batch[i] : 1;
            if (r1 > 1)
                sa[na++] = n;
            sa[na++] = k;
            for (int i = 2 - (r2 - 2); r2 > 2 && i < 2; i++)
                sb[nb++] = rng_next() % 3 ? batch[i] : 1;
            sb[nb++] = k;
            if (r2 > 1)
                sb[nb++] = p;
            od_tensor *a = m_empty(sa, na, OD_FLOAT32), *b = m_empty(sb, nb, OD_FLOAT32);
            od_value args[2] = {tv(a), tv(b)};
            od_tensor *y = call1_ok(OD_OPID_matmul, args, 2);
            int64_t want[OD_MAX_DIMS];
            int nw = matmul_shape(sa, na, sb, nb, want);
            check_meta_out(y, want, nw, OD_FLOAT32, "matmul");
            od_tensor_release(y);
            od_tensor_release(a);
            od_tensor_release(b);
        }
    /* linear and embedding compose on meta too */
    int64_t xs[3] = {2, 5, 7}, ws[2] = {3, 7}, bs[1] = {3}, is[2] = {4, 6}, es[2] = {10, 8};
    od_tensor *x = m_empty(xs, 3, OD_FLOAT32), *w = m_empty(ws, 2, OD_FLOAT32), *bias = m_empty(bs, 1, OD_FLOAT32);
    od_value la[3] = {tv(x), tv(w), tv(bias)};
    od_tensor *y = call1_ok(OD_OPID_linear, la, 3);
    int64_t ly[3] = {2, 5, 3};
    check_meta_out(y, ly, 3, OD_FLOAT32, "linear");
    od_tensor_release(y);
    od_tensor *ind = m_empty(is, 2, OD_INT64), *emb = m_empty(es, 2, OD_FLOAT32);
    od_value ea[5] = {tv(emb), tv(ind), od_int(-1), od_bool(false), od_bool(false)};
    y = call1_ok(OD_OPID_embedding, ea, 5);
    int64_t ey[3] = {4, 6, 8};
    check_meta_out(y, ey, 3, OD_FLOAT32, "embedding");
    od_tensor_release(y);
    end_watch("matrix products on meta");

    /* shape errors are the same on meta as on cpu (one shape function) */
    int64_t m1[2] = {2, 3}, m2[2] = {4, 5};
    od_tensor *ma = m_empty(m1, 2, OD_FLOAT32), *mb = m_empty(m2, 2, OD_FLOAT32);
    od_tensor *ca = t_rand(m1, 2, OD_FLOAT32), *cb = t_rand(m2, 2, OD_FLOAT32);
    od_value mm_meta[2] = {tv(ma), tv(mb)}, mm_cpu[2] = {tv(ca), tv(cb)};
    od_stack s;
    od_error e1, e2;
    od_status st1 = call_id(OD_OPID_mm, mm_meta, 2, &s, &e1), st2 = call_id(OD_OPID_mm, mm_cpu, 2, &s, &e2);
    TCHECK(st1 != OD_OK && st1 == st2 && strcmp(e1.message, e2.message) == 0,
           "mm error differs between meta (%s) and cpu (%s)", e1.message, e2.message);
    od_tensor *objs[] = {x, w, bias, ind, emb, ma, mb, ca, cb};
    for (size_t i = 0; i < sizeof objs / sizeof objs[0]; i++)
        od_tensor_release(objs[i]);
}

Test(meta, joins_copies_views_and_inplace)
{
    int64_t sz[2] = {3, 4};
    od_tensor *a = m_empty(sz, 2, OD_FLOAT32), *b = m_empty(sz, 2, OD_FLOAT64);
    start_watch();
    od_tensor *ts[2] = {a, b};
    od_value c[2] = {od_list_v(OD_T_TENSOR_LIST, ts, 2), od_int(1)};
    od_tensor *y = call1_ok(OD_OPID_cat, c, 2);
    int64_t cw[2] = {3, 8};
    check_meta_out(y, cw, 2, OD_FLOAT64, "cat promotes");
    od_tensor_release(y);
    od_value st[2] = {od_list_v(OD_T_TENSOR_LIST, ts, 2), od_int(-1)};
    y = call1_ok(OD_OPID_stack, st, 2);
    int64_t sw[3] = {3, 4, 2};
    check_meta_out(y, sw, 3, OD_FLOAT64, "stack");
    od_tensor_release(y);

    od_value cl[2] = {tv(a), od_none()};
    y = call1_ok(OD_OPID_clone, cl, 2);
    check_meta_out(y, sz, 2, OD_FLOAT32, "clone");
    TCHECK(y != a, "clone makes a new tensor");
    od_tensor_release(y);

    /* in-place ops hand back self */
    od_value cp[3] = {tv(a), tv(b), od_bool(false)};
    y = call1_ok(OD_OPID_copy_, cp, 3);
    TCHECK(y == a, "copy_ on meta returns self");
    od_tensor_release(y);
    od_value fl[2] = {tv(a), od_double(1.5)};
    y = call1_ok(OD_OPID_fill__Scalar, fl, 2);
    TCHECK(y == a, "fill_ on meta returns self");
    od_tensor_release(y);

    /* views share the (data-less) storage; reshape that must copy goes through clone on meta */
    od_value tr[3] = {tv(a), od_int(0), od_int(1)};
    od_tensor *t = call1_ok(OD_OPID_transpose_int, tr, 3);
    int64_t tw[2] = {4, 3}, flat[1] = {-1}, fw[1] = {12};
    check_meta_out(t, tw, 2, OD_FLOAT32, "transpose");
    TCHECK(t->storage == a->storage, "meta view shares storage");
    od_value rs[2] = {tv(t), ilist(flat, 1)};
    y = call1_ok(OD_OPID_reshape, rs, 2);
    check_meta_out(y, fw, 1, OD_FLOAT32, "reshape(copy) on meta");
    TCHECK(y->storage != a->storage && od_tensor_is_contiguous(y), "reshape copied");
    od_tensor_release(y);
    od_value ct[2] = {tv(t), od_int(0)};
    y = call1_ok(OD_OPID_contiguous, ct, 2);
    check_meta_out(y, tw, 2, OD_FLOAT32, "contiguous on meta");
    od_tensor_release(y);
    od_tensor_release(t);

    int64_t is[1] = {5};
    od_tensor *ind = m_empty(is, 1, OD_INT64);
    od_value isel[3] = {tv(a), od_int(1), tv(ind)};
    y = call1_ok(OD_OPID_index_select, isel, 3);
    int64_t iw[2] = {3, 5};
    check_meta_out(y, iw, 2, OD_FLOAT32, "index_select");
    od_tensor_release(y);
    end_watch("joins and copies on meta");
    od_tensor_release(ind);
    od_tensor_release(a);
    od_tensor_release(b);
}

Test(meta, factories_on_meta)
{
    start_watch();
    int64_t sz[3];
    rand_sizes(sz, 3, 0, 1000);
    od_value d = od_device_v(META);
    od_value z[5] = {ilist(sz, 3), od_dtype_v(OD_INT8), od_none(), d, od_none()};
    od_tensor *y = call1_ok(OD_OPID_zeros, z, 5);
    check_meta_out(y, sz, 3, OD_INT8, "zeros(meta)");
    od_tensor_release(y);
    od_value f[6] = {ilist(sz, 3), od_double(1.5), od_none(), od_none(), d, od_none()};
    y = call1_ok(OD_OPID_full, f, 6);
    check_meta_out(y, sz, 3, OD_FLOAT32, "full(meta)");
    od_tensor_release(y);
    od_value r[5] = {ilist(sz, 3), od_dtype_v(OD_FLOAT64), od_none(), od_str("meta"), od_none()};
    y = call1_ok(OD_OPID_randn, r, 5);
    check_meta_out(y, sz, 3, OD_FLOAT64, "randn(meta)");
    od_tensor_release(y);
    od_value ar[7] = {od_int(-3), od_int(10), od_int(4), od_none(), od_none(), d, od_none()};
    y = call1_ok(OD_OPID_arange_start_step, ar, 7);
    int64_t aw[1] = {4}; /* -3, 1, 5, 9 */
    check_meta_out(y, aw, 1, OD_INT64, "arange(-3, 10, 4, meta)");
    od_tensor_release(y);
    end_watch("factories on meta");
}

Test(meta, huge_shapes_cost_nothing_and_respect_the_alloc_limit)
{
    int64_t sz[2] = {(int64_t)1 << 20, (int64_t)1 << 20}; /* 4 TiB of float32 */
    od_tensor *a = m_empty(sz, 2, OD_FLOAT32);
    od_value args[3] = {tv(a), tv(a), od_int(1)};
    od_tensor *y = call1_ok(OD_OPID_add_Tensor, args, 3);
    check_meta_out(y, sz, 2, OD_FLOAT32, "4 TiB add on meta");
    od_tensor_release(y);
    od_set_alloc_limit((size_t)1 << 20);
    call_fails(OD_OPID_add_Tensor, args, 3, OD_ETOOLARGE, "exceeds the limit");
    od_set_alloc_limit(0);
    od_tensor_release(a);
}

/* Reads kernels/ops.def (tests run from the repository root) and returns the
 * 1-based line of "OD_OP(<id>,", or -1. */
static int ops_def_line(const char *id)
{
    FILE *f = fopen("kernels/ops.def", "r");
    if (!f)
        return -1;
    char line[4096], want[128];
    snprintf(want, sizeof want, "OD_OP(%s,", id);
    int n = 0, found = -1;
    while (fgets(line, sizeof line, f)) {
        n++;
        if (strncmp(line, want, strlen(want)) == 0) {
            found = n;
            break;
        }
    }
    fclose(f);
    return found;
}

Test(meta, registration_covers_every_builtin)
{
    for (int id = 0; id < OD_NUM_BUILTIN_OPS; id++) {
        const od_op *op = od_builtin((od_opid)id);
        od_provenance pm, pc;
        const od_kernel *km = od_op_slot(op, OD_KEY_Meta, &pm);
        const od_kernel *kc = od_op_slot(op, OD_KEY_CPU, &pc);
        TCHECK(km != NULL, "%s has no Meta kernel of any kind", od_op_name(op));
        bool compute = od_builtin_shape_fn((od_opid)id) && kc && pc == OD_PROV_KERNEL;
        bool is_meta_kernel = pm == OD_PROV_KERNEL && strcmp(km->name, "od_meta_kernel") == 0;
        TCHECK(compute == is_meta_kernel, "%s: Meta slot %s [%s], compute=%d", od_op_name(op), km->name,
               od_provenance_name(pm), compute);
        if (is_meta_kernel)
            TCHECK(strcmp(km->file, "kernels/ops.def") == 0, "%s: Meta registered at %s", od_op_name(op), km->file);
    }
    int line = ops_def_line("add_Tensor");
    if (line > 0) {
        od_provenance p;
        const od_kernel *k = od_op_slot(od_builtin(OD_OPID_add_Tensor), OD_KEY_Meta, &p);
        TCHECK(k->line == line, "add.Tensor's Meta kernel registered at line %d, ops.def has it at %d", k->line,
               line);
    }
    /* views serve Meta through CompositeExplicitAutograd, factories too */
    od_provenance p;
    const od_kernel *k = od_op_slot(od_builtin(OD_OPID_view), OD_KEY_Meta, &p);
    TCHECK(p == OD_PROV_DEFAULT_BACKEND && strcmp(k->name, "od_cea_view") == 0, "view's Meta slot");
    k = od_op_slot(od_builtin(OD_OPID_zeros), OD_KEY_Meta, &p);
    TCHECK(p == OD_PROV_DEFAULT_BACKEND && strcmp(k->name, "od_cea_factory") == 0, "zeros' Meta slot");
    k = od_op_slot(od_builtin(OD_OPID_zeros), OD_KEY_BackendSelect, &p);
    TCHECK(p == OD_PROV_KERNEL && strcmp(k->name, "od_bs_factory") == 0, "zeros' BackendSelect slot");
    k = od_op_slot(od_builtin(OD_OPID_matmul), OD_KEY_AutogradCPU, &p);
    TCHECK(p == OD_PROV_MATH && strcmp(k->name, "od_cia_matmul") == 0, "matmul's AutogradCPU slot is the math kernel");
}

/* ---- shape_common.c directly ---- */

Test(meta, alloc_outputs_allocates_aliases_and_cleans_up)
{
    int64_t sz[2] = {2, 3};
    od_tensor *x = t_rand(sz, 2, OD_FLOAT32);
    od_value args[2] = {tv(x), od_int(7)};
    od_stack s;
    od_stack_init(&s, args, 2);
    od_out_spec spec[3] = {
        {OD_FLOAT64, CPU, 2, {4, 5}, -1, false, {0}},
        {OD_INT8, META, 1, {1 << 30}, -1, false, {0}},
        {OD_FLOAT32, CPU, 0, {0}, 0, false, {0}},
    };
    od_tensor *outs[3];
    OKCALL(od_alloc_outputs(&s, spec, 3, outs, &e_));
    int64_t w0[2] = {4, 5}, w1[1] = {1 << 30};
    TCHECK(same_shape(outs[0], w0, 2) && outs[0]->dtype == OD_FLOAT64 && od_tensor_data(outs[0]), "cpu output");
    TCHECK(same_shape(outs[1], w1, 1) && outs[1]->device.type == OD_DEV_META && !od_tensor_data(outs[1]),
           "meta output");
    TCHECK(outs[2] == x && x->refcount == 2, "alias output retains the argument");
    for (int i = 0; i < 3; i++)
        od_tensor_release(outs[i]);
    TCHECK(x->refcount == 1, "released alias");

    /* a strided spec (clone to channels_last) gets exactly its strides over dense storage */
    od_out_spec cl[1] = {{OD_FLOAT32, CPU, 4, {1, 2, 3, 4}, -1, true, {24, 1, 8, 2}}};
    OKCALL(od_alloc_outputs(&s, cl, 1, outs, &e_));
    TCHECK(outs[0]->strides[1] == 1 && outs[0]->strides[2] == 8 && outs[0]->strides[3] == 2 &&
               od_tensor_is_contiguous_as(outs[0], OD_MF_CHANNELS_LAST) && !od_tensor_is_contiguous(outs[0]) &&
               od_tensor_is_non_overlapping_and_dense(outs[0]),
           "channels_last output");
    od_tensor_release(outs[0]);

    /* a failure in the middle leaves nothing behind (ASan checks the leak) */
    od_out_spec bad[3] = {
        {OD_FLOAT32, CPU, 1, {8}, 0, false, {0}},
        {OD_FLOAT32, CPU, 1, {-1}, -1, false, {0}},
        {OD_FLOAT32, CPU, 1, {8}, -1, false, {0}},
    };
    od_error err;
    od_status st = od_alloc_outputs(&s, bad, 3, outs, &err);
    TCHECK(st != OD_OK && outs[0] == NULL && x->refcount == 1, "failed od_alloc_outputs cleaned up");
    od_out_spec alias_int[1] = {{OD_FLOAT32, CPU, 0, {0}, 1, false, {0}}};
    st = od_alloc_outputs(&s, alias_int, 1, outs, &err);
    TCHECK(st == OD_EINTERNAL, "alias of a non-tensor argument is an internal error");
    od_tensor_release(x);

    TCHECK(od_builtin_shape_fn(OD_OPID_add_Tensor) == od_shape_binary, "shape fn table: add.Tensor");
    TCHECK(od_builtin_shape_fn(OD_OPID_mm) == od_shape_matmul, "shape fn table: mm");
    TCHECK(od_builtin_shape_fn(OD_OPID_view) == NULL, "shape fn table: view has none");
    TCHECK(od_builtin_shape_fn(OD_NUM_BUILTIN_OPS) == NULL, "shape fn table: out of range");
}
