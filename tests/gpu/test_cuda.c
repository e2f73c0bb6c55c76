/* test_cuda.c — every CUDA kernel against the CPU kernel (make test-gpu).
 *
 * Each check builds fresh random CPU arguments (seeded; the seed is printed
 * on failure), mirrors every tensor onto the GPU with the same sizes,
 * strides and offset (so non-contiguous views stay non-contiguous), runs the
 * operator through the dispatcher on both devices and requires the same
 * status; on success it compares every output: same dtype and shape, and
 * ||cuda - cpu|| / ||cpu|| within the dtype's tolerance (exact for integers
 * and bool), NaN and infinities at the same places. Device allocations are
 * poisoned (od_cuda_set_poison: NaN / -1 bytes), so an element a kernel
 * forgets to write fails the comparison. Cases cover broadcasting,
 * non-contiguous views, empty and 0-dim tensors, sizes that are not a
 * multiple of the block size, every dtype the op takes, the allocator's
 * reuse, out-of-memory and data-dependent errors, and concurrent threads.
 * Without a device every test is skipped (tools/gpu-tests.sh prints why).
 */
#include <pthread.h>

#include "gpu_testutil.h"
#include "cpu/cpu_kernels.h" /* od_cpu_scalar_to_dtype */

#include "od_cuda.h"
#include "od_math.h"
#include "od_shape.h"

static void setup(void)
{
    seed_init();
    char why[512];
    if (!od_cuda_available(why, sizeof why))
        cr_skip_test("%s", why);
    od_error e;
    cr_assert_eq(od_init(&e), OD_OK, "od_init: %s", e.message);
    od_cuda_set_poison(true);
}

TestSuite(ew, .init = setup, .timeout = 600);
TestSuite(red, .init = setup, .timeout = 600);
TestSuite(index, .init = setup, .timeout = 600);
TestSuite(blas, .init = setup, .timeout = 600);
TestSuite(copy, .init = setup, .timeout = 600);
TestSuite(fact, .init = setup, .timeout = 600);
TestSuite(alloc, .init = setup, .timeout = 600);
TestSuite(linalg, .init = setup, .timeout = 600);

static const od_dtype ALL_DT[] = {OD_BOOL,    OD_UINT8,    OD_INT8,    OD_INT16,  OD_INT32,
                                  OD_INT64,   OD_FLOAT16,  OD_BFLOAT16, OD_FLOAT32, OD_FLOAT64};
#define NALL ((int)(sizeof ALL_DT / sizeof ALL_DT[0]))
static const od_dtype FLT_DT[] = {OD_FLOAT16, OD_BFLOAT16, OD_FLOAT32, OD_FLOAT64};
#define NFLT 4

/* OD_TEST_QUICK=1 (the compute-sanitizer run): skip the largest cases and
 * thin out the dtype cross products, keeping every kernel and code path. */
static bool quick(void)
{
    const char *q = getenv("OD_TEST_QUICK");
    return q && *q && strcmp(q, "0") != 0;
}

static double tol_for(od_dtype dt)
{
    switch (dt) {
    case OD_FLOAT16:
    case OD_BFLOAT16: return 1e-2;
    case OD_FLOAT32: return 2e-5;
    case OD_FLOAT64: return 1e-10;
    default: return 0;
    }
}

/* ---- mirroring and comparing ----------------------------------------------------------------- */

/* The same view on the GPU: the whole storage copied, then the same sizes,
 * strides and offset. New reference. */
static od_tensor *mirror(od_tensor *t)
{
    size_t es = od_dtype_size(t->dtype);
    int64_t nel = (int64_t)(t->storage->nbytes / es);
    od_tensor *flat = NULL, *flat_cuda = NULL, *v = NULL;
    OKCALL(od_tensor_from_storage(t->storage, &nel, 1, t->dtype, &flat, &e_));
    OKCALL(od_to_device(flat, TU_CUDA, &flat_cuda, &e_));
    OKCALL(od_tensor_as_strided(flat_cuda, t->sizes, t->strides, t->ndim, t->offset, &v, &e_));
    od_tensor_release(flat);
    od_tensor_release(flat_cuda);
    return v;
}

static od_tensor *to_cpu(od_tensor *t)
{
    od_tensor *c = NULL;
    OKCALL(od_to_device(t, TU_CPU, &c, &e_));
    return c;
}

/* A random CUDA tensor (the CPU original released). */
static od_tensor *dev_rand_t(const int64_t *sizes, int ndim, od_dtype dt)
{
    od_tensor *c = tu_rand(sizes, ndim, dt, -1, 1), *g = mirror(c);
    od_tensor_release(c);
    return g;
}

/* Mirror of an argument list: tensors (and tensor lists) on the GPU, except
 * 0-dim tensors when keep_cpu_scalars (PyTorch lets CPU scalars join). */
typedef struct mirrored {
    od_value v[OD_MAX_ARGS];
    od_tensor *owned[64];
    int nowned;
    od_tensor **lists[OD_MAX_ARGS];
} mirrored;

static void mirror_args(const od_value *src, int n, mirrored *m, bool keep_cpu_scalars)
{
    memset(m, 0, sizeof *m);
    for (int i = 0; i < n; i++) {
        m->v[i] = src[i];
        if (src[i].tag == OD_T_TENSOR && src[i].u.t &&
            !(keep_cpu_scalars && src[i].u.t->ndim == 0)) {
            od_tensor *g = mirror(src[i].u.t);
            m->owned[m->nowned++] = g;
            m->v[i].u.t = g;
        } else if (src[i].tag == OD_T_TENSOR_LIST) {
            size_t k = src[i].u.list.n;
            od_tensor **ts = calloc(k ? k : 1, sizeof *ts), **in = src[i].u.list.items;
            for (size_t j = 0; j < k; j++) {
                ts[j] = mirror(in[j]);
                m->owned[m->nowned++] = ts[j];
            }
            m->lists[i] = ts;
            m->v[i].u.list.items = ts;
        }
    }
}

static void mirror_free(mirrored *m)
{
    for (int i = 0; i < m->nowned; i++)
        od_tensor_release(m->owned[i]);
    for (int i = 0; i < OD_MAX_ARGS; i++)
        free(m->lists[i]);
}

/* Compares one CUDA result with the CPU one. */
static void compare_out(const char *what, od_tensor *gpu, od_tensor *cpu, double tol)
{
    TCHECK(gpu->device.type == OD_DEV_CUDA || gpu->device.type == OD_DEV_CPU, "%s: device", what);
    TCHECK(gpu->dtype == cpu->dtype, "%s: dtype %s vs CPU %s", what, od_dtype_name(gpu->dtype),
           od_dtype_name(cpu->dtype));
    TCHECK(gpu->ndim == cpu->ndim, "%s: rank %d vs CPU %d", what, gpu->ndim, cpu->ndim);
    for (int d = 0; d < cpu->ndim; d++)
        TCHECK(gpu->sizes[d] == cpu->sizes[d], "%s: size[%d] %" PRId64 " vs CPU %" PRId64, what, d,
               gpu->sizes[d], cpu->sizes[d]);
    od_tensor *g = gpu->device.type == OD_DEV_CUDA ? to_cpu(gpu) : (od_tensor_retain(gpu), gpu);
    if (tol < 0)
        tol = tol_for(cpu->dtype);
    int64_t bad = -1;
    double rel = tu_rel_err(g, cpu, &bad);
    TCHECK(bad < 0, "%s: element %" PRId64 " is %g on CUDA, %g on CPU (NaN/inf mismatch)", what, bad,
           tu_get(g, bad), tu_get(cpu, bad));
    if (rel > tol) {
        int64_t n = od_tensor_numel(cpu), worst = 0;
        double wd = -1;
        for (int64_t i = 0; i < n; i++) {
            double d = fabs(tu_get(g, i) - tu_get(cpu, i));
            if (d > wd) {
                wd = d;
                worst = i;
            }
        }
        TCHECK(false, "%s: relative error %.3g > %.3g (dtype %s, %" PRId64 " elements; worst at %" PRId64
               ": CUDA %.9g, CPU %.9g)",
               what, rel, tol, od_dtype_name(cpu->dtype), n, worst, tu_get(g, worst), tu_get(cpu, worst));
    }
    od_tensor_release(g);
}

/* How the outputs of a call that succeeded on both devices are judged. */
typedef void (*judge_fn)(const char *what, od_opid id, od_stack *sc, od_stack *sg, const void *ctx);

/* Runs id on args (CPU) and on their GPU mirror: the same status and, on
 * errors, the same message; judge compares the outputs. Returns the CPU
 * status. */
static od_status check_op_with(const char *what, od_opid id, const od_value *args, int n, bool keep_cpu_scalars,
                               judge_fn judge, const void *ctx)
{
    od_stack sc, sg;
    od_error ec, eg;
    od_error_clear(&ec);
    od_error_clear(&eg);
    /* Mirror first: in-place operators (fill_) must see the same input. */
    mirrored m;
    mirror_args(args, n, &m, keep_cpu_scalars);
    od_value cargs[OD_MAX_ARGS];
    memcpy(cargs, args, sizeof(od_value) * (size_t)n);
    od_status stc = od_call_builtin(id, cargs, n, &sc, &ec);
    od_status stg = od_call_builtin(id, m.v, n, &sg, &eg);
    TCHECK(stc == stg, "%s (%s): CPU says %s (%s), CUDA says %s (%s)", what, od_op_name(od_builtin(id)),
           od_status_code(stc), ec.message, od_status_code(stg), eg.message);
    if (stc == OD_OK) {
        TCHECK(sc.nrets == sg.nrets, "%s: %d returns vs %d", what, sg.nrets, sc.nrets);
        judge(what, id, &sc, &sg, ctx);
        od_stack_release_rets(&sc);
        od_stack_release_rets(&sg);
    } else {
        TCHECK(strcmp(ec.message, eg.message) == 0, "%s: messages differ:\n  CPU:  %s\n  CUDA: %s", what,
               ec.message, eg.message);
    }
    mirror_free(&m);
    return stc;
}

/* Every output on the GPU and within tolerance *ctx (a double) of the CPU's. */
static void judge_close(const char *what, od_opid id, od_stack *sc, od_stack *sg, const void *ctx)
{
    for (int i = 0; i < sc->nrets; i++) {
        char w[256];
        snprintf(w, sizeof w, "%s (%s) output %d", what, od_op_name(od_builtin(id)), i);
        od_tensor *g = sg->rets[i].u.t;
        TCHECK(g->device.type == OD_DEV_CUDA, "%s: result on the wrong device", w);
        compare_out(w, g, sc->rets[i].u.t, *(const double *)ctx);
    }
}

/* check_op_with judging by judge_close. tol < 0: the output dtype's default. */
static od_status check_op(const char *what, od_opid id, const od_value *args, int n, double tol,
                          bool keep_cpu_scalars)
{
    return check_op_with(what, id, args, n, keep_cpu_scalars, judge_close, &tol);
}

/* ---- argument makers ------------------------------------------------------------------------------ */

/* A random CPU tensor of the given sizes; view: 0 contiguous, 1 the last two
 * dims stored transposed, 2 every other element of dim 0, 3 an offset slice. */
static od_tensor *arg_t(const int64_t *sizes, int ndim, od_dtype dt, double lo, double hi, int view)
{
    int64_t base[OD_MAX_DIMS];
    memcpy(base, sizes, sizeof(int64_t) * (size_t)ndim);
    if (view == 1 && ndim >= 2) {
        base[ndim - 1] = sizes[ndim - 2];
        base[ndim - 2] = sizes[ndim - 1];
    } else if (view == 2 && ndim >= 1) {
        base[0] = sizes[0] * 2;
    } else if (view == 3 && ndim >= 1) {
        base[0] = sizes[0] + 3;
    }
    od_tensor *b = tu_rand(base, ndim, dt, lo, hi), *v = NULL;
    if (view == 1 && ndim >= 2)
        OKCALL(od_tensor_transpose(b, ndim - 2, ndim - 1, &v, &e_));
    else if (view == 2 && ndim >= 1)
        OKCALL(od_tensor_slice(b, 0, 0, base[0], 2, &v, &e_));
    else if (view == 3 && ndim >= 1)
        OKCALL(od_tensor_slice(b, 0, 3, base[0], 1, &v, &e_));
    else
        return b;
    od_tensor_release(b);
    return v;
}

#define S(...) ((const int64_t[]){__VA_ARGS__})

typedef struct shape2 {
    const int64_t *a;
    int na;
    const int64_t *b;
    int nb;
    int va, vb;
} shape2;

static const shape2 BIN_SHAPES[] = {
    {S(37, 129), 2, S(37, 129), 2, 0, 0},   /* plain, odd sizes */
    {S(3, 1, 5), 3, S(4, 5), 2, 0, 0},      /* broadcasting both ways */
    {S(64, 33), 2, S(64, 33), 2, 1, 2},     /* transposed and strided views */
    {S(0, 7), 2, S(7), 1, 0, 0},            /* empty */
    {S(5, 3), 2, S(1), 0, 3, 0},            /* 0-dim other */
    {S(1000003), 1, S(1000003), 1, 0, 0},   /* big, not a multiple of any block */
    {S(1001), 1, S(1001), 1, 3, 3},         /* misaligned contiguous (offset 3) */
};
#define NBIN ((int)(sizeof BIN_SHAPES / sizeof BIN_SHAPES[0]))

/* add/sub alpha of a type the dtype accepts. */
static od_value alpha_for(od_dtype dt)
{
    if (od_dtype_is_floating(dt))
        return od_double(0.75);
    return dt == OD_BOOL ? od_bool(true) : od_int(3);
}

static void release_args(od_value *a, int n)
{
    for (int i = 0; i < n; i++)
        if (a[i].tag == OD_T_TENSOR)
            od_tensor_release(a[i].u.t);
}

/* ---- elementwise ------------------------------------------------------------------------------------ */

Test(ew, binary_tensor_ops)
{
    static const struct {
        od_opid id;
        const char *mode;
    } ops[] = {
        {OD_OPID_add_Tensor, NULL},     {OD_OPID_sub_Tensor, NULL},      {OD_OPID_mul_Tensor, NULL},
        {OD_OPID_div_Tensor, NULL},     {OD_OPID_div_Tensor_mode, "trunc"}, {OD_OPID_div_Tensor_mode, "floor"},
        {OD_OPID_pow_Tensor_Tensor, NULL}, {OD_OPID_maximum, NULL},      {OD_OPID_minimum, NULL},
    };
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
        od_opid id = ops[o].id;
        for (int di = 0; di < NALL; di++) {
            od_dtype dt = ALL_DT[di];
            for (int si = 0; si < NBIN; si++) {
                const shape2 *sh = &BIN_SHAPES[si];
                if (sh->a[0] == 1000003 && (quick() || (dt != OD_FLOAT32 && dt != OD_FLOAT16 && dt != OD_INT64)))
                    continue;
                bool divlike = id == OD_OPID_div_Tensor || id == OD_OPID_div_Tensor_mode;
                bool is_pow = id == OD_OPID_pow_Tensor_Tensor;
                double lo = is_pow ? 0.25 : -8, hi = is_pow ? 3 : 8;
                od_tensor *a = arg_t(sh->a, sh->na, dt, lo, hi, sh->va);
                /* Divisors and exponents in ranges where both sides are well defined. */
                od_tensor *b = arg_t(sh->b, sh->nb, dt, divlike ? 1 : is_pow ? -2 : -8,
                                     divlike ? 9 : is_pow ? 3 : 8, sh->vb);
                od_value args[3] = {od_tensor_v(a), od_tensor_v(b), od_int(1)};
                int n = 2;
                if (id == OD_OPID_add_Tensor || id == OD_OPID_sub_Tensor) {
                    args[2] = alpha_for(dt);
                    n = 3;
                } else if (id == OD_OPID_div_Tensor_mode) {
                    args[2] = od_str(ops[o].mode);
                    n = 3;
                }
                char w[128];
                snprintf(w, sizeof w, "%s %s shape#%d", ops[o].mode ? ops[o].mode : "", od_dtype_name(dt), si);
                check_op(w, id, args, n, -1, false);
                release_args(args, 2);
            }
        }
    }
}

Test(ew, binary_scalar_ops)
{
    for (int di = 0; di < NALL; di++) {
        od_dtype dt = ALL_DT[di];
        const int64_t *sz = S(41, 67);
        for (int view = 0; view < 2; view++) {
            od_tensor *a = arg_t(sz, 2, dt, -6, 6, view);
            od_tensor *pos = arg_t(sz, 2, dt, 1, 6, view);
            const od_value scalars[] = {od_int(3), od_double(-1.5), od_bool(true), od_int(-2)};
            for (size_t k = 0; k < sizeof scalars / sizeof scalars[0]; k++) {
                od_value sc = scalars[k];
                char w[128];
                snprintf(w, sizeof w, "%s view %d scalar#%zu", od_dtype_name(dt), view, k);
                od_value args[3];
                args[0] = od_tensor_v(a), args[1] = sc, args[2] = alpha_for(dt);
                check_op(w, OD_OPID_add_Scalar, args, 3, -1, false);
                check_op(w, OD_OPID_sub_Scalar, args, 3, -1, false);
                check_op(w, OD_OPID_mul_Scalar, args, 2, -1, false);
                check_op(w, OD_OPID_div_Scalar, args, 2, -1, false);
                static const char *const modes[] = {"trunc", "floor"};
                for (int m = 0; m < 2; m++) {
                    args[2] = od_str(modes[m]);
                    check_op(w, OD_OPID_div_Scalar_mode, args, 3, -1, false);
                }
                static const od_opid cmp[] = {OD_OPID_eq_Scalar, OD_OPID_ne_Scalar, OD_OPID_lt_Scalar,
                                              OD_OPID_le_Scalar, OD_OPID_gt_Scalar, OD_OPID_ge_Scalar};
                for (int c = 0; c < 6; c++)
                    check_op(w, cmp[c], args, 2, -1, false);
                /* pow(Tensor, Scalar) and pow(Scalar, Tensor) on a positive base. */
                od_value pa[2] = {od_tensor_v(pos), sc};
                check_op(w, OD_OPID_pow_Tensor_Scalar, pa, 2, -1, false);
                od_value pb[2] = {od_double(1.5), od_tensor_v(a)};
                if (k == 0)
                    pb[0] = od_int(2);
                check_op(w, OD_OPID_pow_Scalar, pb, 2, -1, false);
            }
            od_value half[2] = {od_tensor_v(pos), od_double(0.5)};
            check_op("pow 0.5", OD_OPID_pow_Tensor_Scalar, half, 2, -1, false);
            od_tensor_release(a);
            od_tensor_release(pos);
        }
    }
}

Test(ew, compare_and_mixed_dtypes)
{
    static const od_opid cmp[] = {OD_OPID_eq_Tensor, OD_OPID_ne_Tensor, OD_OPID_lt_Tensor,
                                  OD_OPID_le_Tensor, OD_OPID_gt_Tensor, OD_OPID_ge_Tensor};
    for (int di = 0; di < NALL; di++) {
        for (int dj = 0; dj < NALL; dj += 3) {
            od_dtype da = ALL_DT[di], db = ALL_DT[(di + dj) % NALL];
            for (int si = 0; si < NBIN; si++) {
                const shape2 *sh = &BIN_SHAPES[si];
                if (sh->a[0] == 1000003)
                    continue;
                /* Small integer ranges make equal elements common. */
                od_tensor *a = arg_t(sh->a, sh->na, da, -3, 3, sh->va);
                od_tensor *b = arg_t(sh->b, sh->nb, db, -3, 3, sh->vb);
                od_value args[3] = {od_tensor_v(a), od_tensor_v(b), alpha_for(od_promote_types(da, db))};
                char w[128];
                snprintf(w, sizeof w, "%s vs %s shape#%d", od_dtype_name(da), od_dtype_name(db), si);
                for (int c = 0; c < 6; c++)
                    check_op(w, cmp[c], args, 2, -1, false);
                /* Mixed-dtype arithmetic promotes and computes in the common family. */
                check_op(w, OD_OPID_add_Tensor, args, 3, -1, false);
                check_op(w, OD_OPID_mul_Tensor, args, 2, -1, false);
                check_op(w, OD_OPID_maximum, args, 2, -1, false);
                release_args(args, 2);
            }
        }
    }
    /* A 0-dim CPU tensor joins CUDA tensors as a scalar (kept on the CPU). */
    for (int di = 0; di < NALL; di++) {
        od_tensor *a = arg_t(S(9, 10), 2, ALL_DT[di], -4, 4, 0);
        od_tensor *b = arg_t(S(1), 0, OD_FLOAT64, -4, 4, 0);
        od_value args[3] = {od_tensor_v(a), od_tensor_v(b), od_int(1)};
        check_op("cpu scalar", OD_OPID_mul_Tensor, args, 2, -1, true);
        check_op("cpu scalar", OD_OPID_lt_Tensor, args, 2, -1, true);
        release_args(args, 2);
    }
}

/* Every per-element operator of ops.def (OD_EW1 / OD_EW2 lines, found by
 * od_ew_arity): a new one is tested here with no edit. All dtypes, the
 * shapes and views of BIN_SHAPES, Scalars where the schema declares them,
 * values with integer zeros (so INT_DIV's ZeroDivisionError must agree too);
 * NaN and Inf operands in Test(ew, nan_and_inf). */
static bool arg_is_scalar(od_opid id, int i)
{
    const od_schema *sc = od_op_schema(od_builtin(id));
    return sc->args[i].type->kind == OD_TY_SCALAR;
}

Test(ew, nan_and_inf)
{
    for (int fi = 0; fi < NFLT; fi++) {
        od_dtype dt = FLT_DT[fi];
        od_tensor *a = arg_t(S(4, 64), 2, dt, -2, 2, 0), *b = arg_t(S(4, 64), 2, dt, -2, 2, 0);
        /* Plant NaN and +-inf. */
        od_tensor *nan = NULL, *inf = NULL;
        OKCALL(od_tensor_scalar(NAN, dt, &nan, &e_));
        OKCALL(od_tensor_scalar(INFINITY, dt, &inf, &e_));
        size_t es = od_dtype_size(dt);
        for (int i = 0; i < 256; i += 7) {
            memcpy((char *)od_tensor_data(a) + (size_t)i * es, od_tensor_data(i % 2 ? nan : inf), es);
            memcpy((char *)od_tensor_data(b) + (size_t)((i * 3) % 256) * es, od_tensor_data(nan), es);
        }
        od_value args[3] = {od_tensor_v(a), od_tensor_v(b), od_int(1)};
        static const od_opid ops[] = {OD_OPID_add_Tensor, OD_OPID_maximum, OD_OPID_minimum, OD_OPID_lt_Tensor,
                                      OD_OPID_ne_Tensor, OD_OPID_div_Tensor};
        for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++)
            check_op("nan/inf", ops[k], args, ops[k] == OD_OPID_add_Tensor ? 3 : 2, -1, false);
        od_value un[1] = {od_tensor_v(a)};
        check_op("nan/inf", OD_OPID_relu, un, 1, -1, false);
        /* every per-element operator of ops.def whose inputs are tensors */
        for (int k = 0; k < OD_NUM_BUILTIN_OPS; k++) {
            int n = od_ew_arity((od_opid)k);
            if (n && !arg_is_scalar((od_opid)k, 0) && (n == 1 || !arg_is_scalar((od_opid)k, 1)))
                check_op("nan/inf", (od_opid)k, args, n, -1, false);
        }
        od_value cl[3] = {od_tensor_v(a), od_double(-1), od_double(1)};
        check_op("nan/inf", OD_OPID_clamp, cl, 3, -1, false);
        od_value red[2] = {od_tensor_v(a), od_none()};
        check_op("nan/inf", OD_OPID_sum, red, 2, -1, false);
        od_value am[3] = {od_tensor_v(a), od_list_v(OD_T_INT_LIST, (int64_t[]){1}, 1), od_bool(false)};
        check_op("nan/inf", OD_OPID_amax, am, 3, -1, false);
        od_value ag[3] = {od_tensor_v(a), od_int(1), od_bool(false)};
        check_op("nan/inf", OD_OPID_argmax, ag, 3, -1, false);
        od_tensor_release(nan);
        od_tensor_release(inf);
        release_args(args, 2);
    }
}

Test(ew, where_ops)
{
    for (int di = 0; di < NALL; di++) {
        od_dtype dt = ALL_DT[di];
        for (int si = 0; si < NBIN; si++) {
            const shape2 *sh = &BIN_SHAPES[si];
            if (sh->a[0] == 1000003 && (quick() || dt != OD_FLOAT32))
                continue;
            od_tensor *c = arg_t(sh->a, sh->na, OD_BOOL, 0, 1, sh->va);
            od_tensor *x = arg_t(sh->b, sh->nb, dt, -5, 5, sh->vb);
            od_tensor *y = arg_t(sh->a, sh->na, dt, -5, 5, 0);
            char w[64];
            snprintf(w, sizeof w, "where %s shape#%d", od_dtype_name(dt), si);
            od_value a1[3] = {od_tensor_v(c), od_tensor_v(x), od_tensor_v(y)};
            check_op(w, OD_OPID_where_self, a1, 3, -1, false);
            od_value a2[3] = {od_tensor_v(c), od_tensor_v(x), od_double(2.5)};
            check_op(w, OD_OPID_where_ScalarOther, a2, 3, -1, false);
            od_value a3[3] = {od_tensor_v(c), od_int(-7), od_tensor_v(y)};
            check_op(w, OD_OPID_where_ScalarSelf, a3, 3, -1, false);
            od_value a4[3] = {od_tensor_v(c), od_int(1), od_double(0.5)};
            check_op(w, OD_OPID_where_Scalar, a4, 3, -1, false);
            od_tensor_release(c);
            od_tensor_release(x);
            od_tensor_release(y);
        }
    }
}

Test(ew, unary_ops)
{
    /* The OD_EW1 / OD_EW2 operators have their own test below. */
    static const od_opid ops[] = {OD_OPID_neg, OD_OPID_abs, OD_OPID_relu, OD_OPID_gelu};
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
        bool positive = false;
        for (int di = 0; di < NALL; di++) {
            od_dtype dt = ALL_DT[di];
            for (int si = 0; si < NBIN; si++) {
                const shape2 *sh = &BIN_SHAPES[si];
                if (sh->a[0] == 1000003 && (quick() || (dt != OD_FLOAT32 && dt != OD_BFLOAT16)))
                    continue;
                od_tensor *a = arg_t(sh->a, sh->na, dt, positive ? 0.1 : -5, 5, sh->va);
                char w[64];
                snprintf(w, sizeof w, "%s shape#%d", od_dtype_name(dt), si);
                od_value args[2] = {od_tensor_v(a), od_str("none")};
                if (ops[o] == OD_OPID_gelu) {
                    check_op(w, OD_OPID_gelu, args, 2, -1, false);
                    args[1] = od_str("tanh");
                    check_op(w, OD_OPID_gelu, args, 2, -1, false);
                } else {
                    check_op(w, ops[o], args, 1, -1, false);
                }
                od_tensor_release(a);
            }
        }
    }
}

Test(ew, every_per_element_op)
{
    for (int o = 0; o < OD_NUM_BUILTIN_OPS; o++) {
        od_opid id = (od_opid)o;
        int arity = od_ew_arity(id);
        if (!arity)
            continue;
        for (int di = 0; di < NALL; di++) {
            od_dtype dt = ALL_DT[di];
            for (int si = 0; si < NBIN; si++) {
                const shape2 *sh = &BIN_SHAPES[si];
                if (sh->a[0] == 1000003 && (quick() || (dt != OD_FLOAT32 && dt != OD_INT32)))
                    continue;
                od_value args[2];
                for (int k = 0; k < arity; k++) {
                    if (arg_is_scalar(id, k)) {
                        args[k] = od_dtype_is_floating(dt) ? od_double(-2.5) : od_int(k == 0 ? 7 : -3);
                    } else {
                        const int64_t *sz = k == 0 ? sh->a : sh->b;
                        int nd = k == 0 ? sh->na : sh->nb;
                        args[k] = od_tensor_v(arg_t(sz, nd, dt, -4, 4, k == 0 ? sh->va : sh->vb));
                    }
                }
                char w[96];
                snprintf(w, sizeof w, "%s shape#%d", od_dtype_name(dt), si);
                check_op(w, id, args, arity, -1, false);
                release_args(args, arity);
            }
        }
    }
}

Test(ew, clamp_ops)
{
    for (int di = 0; di < NALL; di++) {
        od_dtype dt = ALL_DT[di];
        od_tensor *a = arg_t(S(33, 65), 2, dt, -10, 10, 1);
        od_tensor *lo = arg_t(S(65), 1, dt, -5, 0, 0), *hi = arg_t(S(33, 1), 2, dt, 0, 5, 0);
        char w[64];
        snprintf(w, sizeof w, "clamp %s", od_dtype_name(dt));
        od_value s1[3] = {od_tensor_v(a), od_int(-3), od_int(4)};
        check_op(w, OD_OPID_clamp, s1, 3, -1, false);
        od_value s2[3] = {od_tensor_v(a), od_none(), od_double(2.5)};
        check_op(w, OD_OPID_clamp, s2, 3, -1, false);
        od_value s3[3] = {od_tensor_v(a), od_double(-2.5), od_none()};
        check_op(w, OD_OPID_clamp, s3, 3, -1, false);
        od_value t1[3] = {od_tensor_v(a), od_tensor_v(lo), od_tensor_v(hi)};
        check_op(w, OD_OPID_clamp_Tensor, t1, 3, -1, false);
        od_value t2[3] = {od_tensor_v(a), od_none(), od_tensor_v(hi)};
        check_op(w, OD_OPID_clamp_Tensor, t2, 3, -1, false);
        od_value t3[3] = {od_tensor_v(a), od_tensor_v(hi), od_tensor_v(lo)}; /* min > max gives max */
        check_op(w, OD_OPID_clamp_Tensor, t3, 3, -1, false);
        od_tensor_release(a);
        od_tensor_release(lo);
        od_tensor_release(hi);
    }
}

Test(ew, integer_division_by_zero_is_an_error)
{
    static const od_dtype ints[] = {OD_UINT8, OD_INT8, OD_INT16, OD_INT32, OD_INT64};
    for (int i = 0; i < 5; i++) {
        od_tensor *a = arg_t(S(1000), 1, ints[i], -50, 50, 0), *b = arg_t(S(1000), 1, ints[i], 1, 9, 0);
        memset((char *)od_tensor_data(b) + 517 * od_dtype_size(ints[i]), 0, od_dtype_size(ints[i]));
        od_value args[3] = {od_tensor_v(a), od_tensor_v(b), od_str("floor")};
        od_status st = check_op("div by zero", OD_OPID_div_Tensor_mode, args, 3, -1, false);
        TCHECK(st == OD_EINVAL, "integer division by zero gave %s", od_status_code(st));
        /* The device keeps working afterwards. */
        args[2] = od_str("trunc");
        memset((char *)od_tensor_data(b) + 517 * od_dtype_size(ints[i]), 1, 1);
        TCHECK(check_op("after the error", OD_OPID_div_Tensor_mode, args, 3, -1, false) == OD_OK, "recovery");
        release_args(args, 2);
    }
}

Test(ew, fill_views_and_dtypes)
{
    for (int di = 0; di < NALL; di++) {
        od_dtype dt = ALL_DT[di];
        const od_value vals[] = {od_int(7), od_double(-2.75), od_bool(true), od_int(0)};
        for (int view = 0; view < 4; view++) {
            for (size_t k = 0; k < sizeof vals / sizeof vals[0]; k++) {
                od_tensor *a = arg_t(S(37, 130), 2, dt, -1, 1, view);
                /* fill_ mutates: each side gets its own copy (check_op mirrors first). */
                od_value args[2] = {od_tensor_v(a), vals[k]};
                char w[64];
                snprintf(w, sizeof w, "fill_ %s view %d value#%zu", od_dtype_name(dt), view, k);
                check_op(w, OD_OPID_fill__Scalar, args, 2, -1, false);
                od_tensor_release(a);
            }
        }
    }
}

/* ---- reductions, softmax, layer norm ------------------------------------------------------------------ */

typedef struct red_case {
    const int64_t *sizes;
    int ndim;
    int view;
    int64_t dims[4];
    int ndims; /* -1: dim=None */
} red_case;

static const red_case RED_CASES[] = {
    {S(64, 1000), 2, 0, {1}, 1},          {S(64, 1000), 2, 0, {0}, 1},
    {S(3, 4, 5), 3, 0, {0, 2}, 2},        {S(3, 4, 5), 3, 1, {-1}, 1},
    {S(3, 4, 5), 3, 2, {1}, 1},           {S(1048579), 1, 0, {0}, 1},
    {S(7, 300001), 2, 0, {1}, 1},         {S(300001, 3), 2, 0, {0}, 1},
    {S(5, 0), 2, 0, {1}, 1},              {S(5, 0), 2, 0, {0}, 1},
    {S(1), 0, 0, {0}, 0},                 {S(17, 19), 2, 1, {0}, -1},
    {S(2, 3, 4, 5), 4, 0, {1, 3}, 2},     {S(129, 257), 2, 3, {1}, 1},
};
#define NRED ((int)(sizeof RED_CASES / sizeof RED_CASES[0]))

Test(red, reductions)
{
    for (int ci = 0; ci < NRED; ci++) {
        const red_case *rc = &RED_CASES[ci];
        for (int di = 0; di < NALL; di++) {
            od_dtype dt = ALL_DT[di];
            if ((rc->sizes[0] > 100000 || (rc->ndim > 1 && rc->sizes[1] > 100000)) &&
                (quick() || (dt != OD_FLOAT32 && dt != OD_INT32 && dt != OD_BFLOAT16)))
                continue;
            od_tensor *a = arg_t(rc->sizes, rc->ndim, dt, -4, 4, rc->view);
            od_value dim = rc->ndims < 0 ? od_none() : od_list_v(OD_T_INT_LIST, (void *)rc->dims, (size_t)rc->ndims);
            for (int keep = 0; keep < 2; keep++) {
                char w[96];
                snprintf(w, sizeof w, "case#%d %s keepdim=%d", ci, od_dtype_name(dt), keep);
                /* Long sums of float16 / bfloat16 round at the end only: same tolerance. */
                od_value sum_all[2] = {od_tensor_v(a), od_none()};
                if (keep == 0) {
                    check_op(w, OD_OPID_sum, sum_all, 2, -1, false);
                    check_op(w, OD_OPID_mean, sum_all, 2, -1, false);
                    sum_all[1] = od_dtype_v(OD_FLOAT64);
                    check_op(w, OD_OPID_sum, sum_all, 2, -1, false);
                }
                od_value s4[4] = {od_tensor_v(a), dim, od_bool(keep), od_none()};
                check_op(w, OD_OPID_sum_dim_IntList, s4, 4, -1, false);
                check_op(w, OD_OPID_mean_dim, s4, 4, -1, false);
                s4[3] = od_dtype_v(OD_FLOAT32);
                check_op(w, OD_OPID_sum_dim_IntList, s4, 4, -1, false);
                od_value m3[3] = {od_tensor_v(a), rc->ndims < 0 ? od_list_v(OD_T_INT_LIST, NULL, 0) : dim,
                                  od_bool(keep)};
                check_op(w, OD_OPID_amax, m3, 3, -1, false);
                check_op(w, OD_OPID_amin, m3, 3, -1, false);
                od_value g3[3] = {od_tensor_v(a), rc->ndims == 1 ? od_int(rc->dims[0]) : od_none(), od_bool(keep)};
                check_op(w, OD_OPID_argmax, g3, 3, -1, false);
                /* float16/bfloat16 results may round one ulp apart (a few 1e-4) */
                double vtol = dt == OD_FLOAT16 || dt == OD_BFLOAT16 ? -1 : 1e-4;
                od_value v4[4] = {od_tensor_v(a), dim, od_bool(true), od_bool(keep)};
                check_op(w, OD_OPID_var_dim, v4, 4, vtol, false);
                od_value c4[4] = {od_tensor_v(a), dim, od_int(keep ? 0 : 2), od_bool(keep)};
                check_op(w, OD_OPID_var_correction, c4, 4, vtol, false);
            }
            od_value v2[2] = {od_tensor_v(a), od_bool(false)};
            check_op("var all", OD_OPID_var, v2, 2, dt == OD_FLOAT16 || dt == OD_BFLOAT16 ? -1 : 1e-4, false);
            od_tensor_release(a);
        }
    }
}

Test(red, argmax_ties_take_the_first)
{
    for (int di = 1; di < NALL; di++) {
        od_tensor *a = arg_t(S(40, 5000), 2, ALL_DT[di], 0, 2, 0); /* many ties among 0, 1, 2 */
        od_value g3[3] = {od_tensor_v(a), od_int(1), od_bool(false)};
        check_op("argmax ties", OD_OPID_argmax, g3, 3, -1, false);
        g3[1] = od_none();
        check_op("argmax ties flat", OD_OPID_argmax, g3, 3, -1, false);
        od_tensor_release(a);
    }
}

Test(red, softmax)
{
    const struct {
        const int64_t *sizes;
        int ndim, view;
        int64_t dim;
    } cases[] = {
        {S(17, 1000), 2, 0, 1}, {S(17, 1000), 2, 0, 0}, {S(4, 5, 6), 3, 0, 1}, {S(4, 5, 6), 3, 1, -1},
        {S(3, 20000), 2, 0, 1}, /* rows beyond the shared-memory cache */
        {S(64, 8192), 2, 0, 1}, {S(5, 33), 2, 2, 1}, {S(1), 0, 0, 0}, {S(0, 9), 2, 0, 1},
        {S(200, 3), 2, 0, 1},   {S(7, 64), 2, 3, 1},
    };
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        for (int fi = 0; fi < NFLT; fi++) {
            od_dtype dt = FLT_DT[fi];
            od_tensor *a = arg_t(cases[ci].sizes, cases[ci].ndim, dt, -6, 6, cases[ci].view);
            for (int h2f = 0; h2f < 2; h2f++) {
                if (h2f && dt != OD_FLOAT16)
                    continue;
                od_value args[3] = {od_tensor_v(a), od_int(cases[ci].dim), od_bool(h2f)};
                char w[64];
                snprintf(w, sizeof w, "softmax case#%zu %s h2f=%d", ci, od_dtype_name(dt), h2f);
                check_op(w, OD_OPID__softmax, args, 3, -1, false);
                check_op(w, OD_OPID__log_softmax, args, 3, -1, false);
            }
            od_tensor_release(a);
        }
    }
}

Test(red, layer_norm)
{
    const struct {
        const int64_t *sizes;
        int ndim, nnorm, view;
    } cases[] = {
        {S(7, 33), 2, 1, 0}, {S(4, 3, 1000), 3, 1, 0}, {S(4, 3, 1000), 3, 2, 1}, {S(2, 30000), 2, 1, 0},
        {S(0, 8), 2, 1, 0},  {S(5, 64), 2, 1, 2},      {S(513), 1, 1, 0},
    };
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        for (int fi = 0; fi < NFLT; fi++) {
            od_dtype dt = FLT_DT[fi];
            const int64_t *sz = cases[ci].sizes;
            int nd = cases[ci].ndim, nn = cases[ci].nnorm;
            od_tensor *a = arg_t(sz, nd, dt, -3, 5, cases[ci].view);
            od_tensor *w = arg_t(sz + nd - nn, nn, dt, 0.5, 1.5, 0), *b = arg_t(sz + nd - nn, nn, dt, -1, 1, 0);
            for (int aff = 0; aff < 3; aff++) {
                od_value args[5] = {od_tensor_v(a), od_list_v(OD_T_INT_LIST, (void *)(sz + nd - nn), (size_t)nn),
                                    aff ? od_tensor_v(w) : od_none(), aff == 2 ? od_tensor_v(b) : od_none(),
                                    od_double(1e-5)};
                char wh[64];
                snprintf(wh, sizeof wh, "layer_norm case#%zu %s affine=%d", ci, od_dtype_name(dt), aff);
                check_op(wh, OD_OPID_native_layer_norm, args, 5, dt == OD_FLOAT32 ? 1e-4 : -1, false);
            }
            od_tensor_release(a);
            od_tensor_release(w);
            od_tensor_release(b);
        }
    }
}

/* A CPU call expected to succeed; its first output (new reference). */
static od_tensor *cpu1(od_opid id, od_value *args, int n)
{
    od_stack s;
    od_error e;
    od_error_clear(&e);
    od_status st = od_call_builtin(id, args, n, &s, &e);
    TCHECK(st == OD_OK, "%s on the CPU: %s", od_op_name(od_builtin(id)), e.message);
    od_tensor *r = s.rets[0].u.t;
    od_tensor_retain(r);
    od_stack_release_rets(&s);
    return r;
}

/* The values of a sort-family result along dim, themselves sorted (new). */
static od_tensor *sorted_along(od_tensor *t, int64_t dim)
{
    od_value a[3] = {od_tensor_v(t), od_int(t->ndim ? dim : 0), od_bool(false)};
    return cpu1(OD_OPID_sort, a, 3);
}

/* The sort family on CUDA against the CPU where the order of equal keys is
 * the kernel's choice (sort(stable=False), topk, kthvalue: torch's CPU and
 * CUDA kernels differ there too): the same values (as multisets where
 * topk(sorted=False) leaves the order open), and indices that point at
 * those values in self; a full sort's indices a permutation. */
typedef struct sort_case {
    od_tensor *self;
    int64_t dim;
    bool keepdim, unordered;
} sort_case;

static void judge_sort_family(const char *what, od_opid id, od_stack *sc, od_stack *sg, const void *ctx)
{
    const sort_case *k = ctx;
    od_tensor *self = k->self;
    int64_t dim = k->dim;
    char w[256];
    snprintf(w, sizeof w, "%s (%s)", what, od_op_name(od_builtin(id)));
    od_tensor *gv = to_cpu(sg->rets[0].u.t), *gi = to_cpu(sg->rets[1].u.t);
    od_tensor *cv = sc->rets[0].u.t, *ci = sc->rets[1].u.t;
    od_tensor_retain(cv);
    od_tensor_retain(ci);
    if (!k->keepdim && self->ndim > 0) { /* kthvalue without keepdim: put dim back for gather */
        od_tensor **ts[4] = {&gv, &gi, &cv, &ci};
        for (int i = 0; i < 4; i++) {
            od_value u[2] = {od_tensor_v(*ts[i]), od_int(dim)};
            od_tensor *t = cpu1(OD_OPID_unsqueeze, u, 2);
            od_tensor_release(*ts[i]);
            *ts[i] = t;
        }
    }
    if (k->unordered) {
        od_tensor *a = sorted_along(gv, dim), *b = sorted_along(cv, dim);
        compare_out(w, a, b, 0);
        od_tensor_release(a), od_tensor_release(b);
    } else {
        compare_out(w, gv, cv, 0);
    }
    od_value ga[4] = {od_tensor_v(self), od_int(self->ndim ? dim : 0), od_tensor_v(gi), od_bool(false)};
    od_tensor *at = cpu1(OD_OPID_gather, ga, 4);
    char wi[300];
    snprintf(wi, sizeof wi, "%s: self at the CUDA indices", w);
    compare_out(wi, at, gv, 0);
    od_tensor_release(at);
    if (id == OD_OPID_sort) {
        od_tensor *a = sorted_along(gi, dim), *b = sorted_along(ci, dim);
        snprintf(wi, sizeof wi, "%s: the CUDA indices are a permutation", w);
        compare_out(wi, a, b, 0);
        od_tensor_release(a), od_tensor_release(b);
    }
    od_tensor_release(gv), od_tensor_release(gi), od_tensor_release(cv), od_tensor_release(ci);
}

static void check_sort_family(const char *what, od_opid id, od_value *args, int n, od_tensor *self, int64_t dim,
                              bool keepdim, bool unordered)
{
    sort_case k = {self, dim, keepdim, unordered};
    check_op_with(what, id, args, n, false, judge_sort_family, &k);
}

/* Scans and the sort family against the CPU kernels (which replay ATen's CPU
 * algorithms). Scans agree within rounding (the chunked CUDA scan adds in
 * another order); sort(stable=True) agrees exactly, indices of equal keys
 * included (small integer ranges make many); the rest by check_sort_family. */
Test(red, scans_and_sorting)
{
    const struct {
        const int64_t *sizes;
        int ndim, view;
        int64_t dim;
    } cases[] = {
        {S(7, 33), 2, 0, 1}, {S(7, 33), 2, 1, 0}, {S(4, 5, 6), 3, 2, -1}, {S(4, 5, 6), 3, 3, 1},
        {S(3, 300), 2, 0, 1}, {S(1), 0, 0, 0}, {S(0, 9), 2, 0, 1}, {S(5, 0), 2, 0, 0}, {S(2, 2000), 2, 0, -1},
    };
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        for (int di = 0; di < NALL; di++) {
            od_dtype dt = ALL_DT[di];
            if (quick() && di % 3)
                continue;
            od_tensor *a = arg_t(cases[ci].sizes, cases[ci].ndim, dt, -3, 3, cases[ci].view);
            int64_t d = cases[ci].dim, n = cases[ci].ndim ? a->sizes[d < 0 ? d + a->ndim : d] : 1;
            char w[96];
            snprintf(w, sizeof w, "scan case#%zu %s", ci, od_dtype_name(dt));
            od_value c3[3] = {od_tensor_v(a), od_int(d), od_none()};
            check_op(w, OD_OPID_cumsum, c3, 3, -1, false);
            /* products near 1: a random walk of factors in [-3, 3] overflows, and
             * where it crosses the dtype's range depends on the order of the
             * products (the chunked scan's differs from the CPU's) */
            if (n < 256) /* the per-line kernel multiplies in the CPU's order: overflow included */
                check_op(w, OD_OPID_cumprod, c3, 3, -1, false);
            od_tensor *near1 = arg_t(cases[ci].sizes, cases[ci].ndim, dt, 0.97, 1.03, cases[ci].view);
            od_value p3[3] = {od_tensor_v(near1), od_int(d), od_none()};
            check_op(w, OD_OPID_cumprod, p3, 3, -1, false);
            od_tensor_release(near1);
            check_op(w, OD_OPID_logcumsumexp, c3, 2, -1, false);
            check_op(w, OD_OPID_cummax, c3, 2, 0, false);
            check_op(w, OD_OPID_cummin, c3, 2, 0, false);
            for (int desc = 0; desc < 2; desc++) {
                int64_t dd = d < 0 ? d + a->ndim : d;
                od_value sa[3] = {od_tensor_v(a), od_int(d), od_bool(desc)};
                check_sort_family(w, OD_OPID_sort, sa, 3, a, dd, true, false);
                od_value ss[4] = {od_tensor_v(a), od_bool(true), od_int(d), od_bool(desc)};
                check_op(w, OD_OPID_sort_stable, ss, 4, 0, false);
                int64_t ks[3] = {n, n / 2, n > 64 ? n / 64 : 1};
                for (int ki = 0; ki < 3; ki++) {
                    od_value tk[5] = {od_tensor_v(a), od_int(ks[ki]), od_int(d), od_bool(desc), od_bool(ki != 1)};
                    check_sort_family(w, OD_OPID_topk, tk, 5, a, dd, true, ki == 1);
                    od_value kv[4] = {od_tensor_v(a), od_int(ks[ki] ? ks[ki] : 1), od_int(d), od_bool(desc)};
                    check_sort_family(w, OD_OPID_kthvalue, kv, 4, a, dd, desc, false);
                }
            }
            od_tensor_release(a);
        }
    }
    /* A 0-dim cumsum is fill_: a value past the result dtype is an error on
     * both devices (the CUDA kernel reads it back to check). */
    od_tensor *z = arg_t(S(1), 0, OD_INT16, 0, 0, 0);
    ((int16_t *)od_tensor_data(z))[0] = 4645;
    od_value c[3] = {od_tensor_v(z), od_int(0), od_dtype_v(OD_UINT8)};
    TCHECK(check_op("0-dim cumsum past uint8", OD_OPID_cumsum, c, 3, 0, false) == OD_EINVAL, "no error");
    ((int16_t *)od_tensor_data(z))[0] = 200;
    TCHECK(check_op("0-dim cumsum into uint8", OD_OPID_cumsum, c, 3, 0, false) == OD_OK, "error");
    od_tensor_release(z);
}

/* A contiguous CPU float tensor made tie-rich: each element floored, every
 * k-th (k > 0) NaN. */
static void ties_and_nans(od_tensor *t, int64_t k)
{
    int64_t n = od_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) {
        double v = (k > 0 && i % k == 0) ? NAN : floor(tu_get(t, i));
        if (t->dtype == OD_FLOAT32)
            ((float *)od_tensor_data(t))[i] = (float)v;
        else if (t->dtype == OD_FLOAT64)
            ((double *)od_tensor_data(t))[i] = v;
    }
}

/* median, nanmedian (whole tensor and .dim) and mode replay the CPU's
 * selection on the device, so values and indices agree exactly, ties and
 * NaN included; the refusals (bool, float16) are the CPU's. */
Test(red, median_nanmedian_mode)
{
    const struct {
        const int64_t *sizes;
        int ndim, view;
        int64_t dim;
        int64_t nan_every; /* floats: 0 none, 1 all NaN, else every k-th */
    } cases[] = {
        {S(7, 33), 2, 0, 1, 0},  {S(7, 33), 2, 1, 0, 5},  {S(4, 5, 6), 3, 2, -1, 7}, {S(4, 5, 6), 3, 3, 1, 1},
        {S(3, 300), 2, 0, 1, 11}, {S(1), 0, 0, 0, 0},     {S(0, 9), 2, 0, 1, 0},     {S(5, 0), 2, 0, 0, 0},
        {S(2, 2000), 2, 0, -1, 3}, {S(10), 1, 0, 0, 2},
    };
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        for (int di = 0; di < NALL; di++) {
            od_dtype dt = ALL_DT[di];
            if (quick() && di % 3)
                continue;
            od_tensor *a = tu_rand(cases[ci].sizes, cases[ci].ndim, dt, -3, 3);
            ties_and_nans(a, cases[ci].nan_every);
            char w[96];
            snprintf(w, sizeof w, "selection case#%zu %s", ci, od_dtype_name(dt));
            od_value one[1] = {od_tensor_v(a)};
            check_op(w, OD_OPID_median, one, 1, 0, false);
            check_op(w, OD_OPID_nanmedian, one, 1, 0, false);
            for (int keep = 0; keep < 2; keep++) {
                od_value d3[3] = {od_tensor_v(a), od_int(cases[ci].dim), od_bool(keep)};
                check_op(w, OD_OPID_median_dim, d3, 3, 0, false);
                check_op(w, OD_OPID_nanmedian_dim, d3, 3, 0, false);
                check_op(w, OD_OPID_mode, d3, 3, 0, false);
            }
            od_tensor_release(a);
        }
    }
    /* a strided view (a transposed one) is read through its strides */
    od_tensor *b = tu_rand(S(9, 40), 2, OD_INT32, -4, 4), *bt = NULL;
    OKCALL(od_tensor_transpose(b, 0, 1, &bt, &e_));
    od_value d3[3] = {od_tensor_v(bt), od_int(1), od_bool(false)};
    check_op("selection transposed", OD_OPID_median_dim, d3, 3, 0, false);
    check_op("selection transposed", OD_OPID_mode, d3, 3, 0, false);
    od_tensor_release(bt);
    od_tensor_release(b);
}

/* isin against the CPU: the brute-force size and the sorting one (few or
 * many test elements), assume_unique (the sorted replay, duplicates
 * included) and invert, mixed dtypes (compared in the promoted one), the
 * Scalar overloads, NaN (never found) and -0.0 (found as 0.0). */
Test(index, isin)
{
    const od_dtype pairs[][2] = {{OD_INT32, OD_INT32}, {OD_INT64, OD_INT16}, {OD_FLOAT32, OD_FLOAT32},
                                 {OD_FLOAT64, OD_FLOAT32}, {OD_INT32, OD_FLOAT64}, {OD_UINT8, OD_INT8}};
    const int64_t msz[] = {0, 1, 5, 3000};
    for (size_t pi = 0; pi < sizeof pairs / sizeof pairs[0]; pi++) {
        od_tensor *e = tu_rand(S(6, 50), 2, pairs[pi][0], -20, 20);
        ties_and_nans(e, 13);
        if (pairs[pi][0] == OD_FLOAT32)
            ((float *)od_tensor_data(e))[1] = -0.0f;
        for (size_t mi = 0; mi < sizeof msz / sizeof msz[0]; mi++) {
            od_tensor *t = tu_rand(&msz[mi], 1, pairs[pi][1], -20, 20);
            ties_and_nans(t, 17);
            for (int k = 0; k < 4; k++) {
                char w[96];
                snprintf(w, sizeof w, "isin %s in %s[%lld] unique=%d invert=%d", od_dtype_name(pairs[pi][0]),
                         od_dtype_name(pairs[pi][1]), (long long)msz[mi], k & 1, k >> 1);
                od_value tt[4] = {od_tensor_v(e), od_tensor_v(t), od_bool(k & 1), od_bool(k >> 1)};
                check_op(w, OD_OPID_isin_Tensor_Tensor, tt, 4, 0, false);
                od_value sv = od_dtype_is_floating(pairs[pi][1]) ? od_double(3.0) : od_int(3);
                od_value ts[4] = {od_tensor_v(e), sv, od_bool(k & 1), od_bool(k >> 1)};
                check_op(w, OD_OPID_isin_Tensor_Scalar, ts, 4, 0, false);
                od_value st[4] = {sv, od_tensor_v(t), od_bool(k & 1), od_bool(k >> 1)};
                check_op(w, OD_OPID_isin_Scalar_Tensor, st, 4, 0, false);
            }
            od_tensor_release(t);
        }
        od_tensor_release(e);
    }
}

/* gcd and lcm compute in the tensor's own width on CUDA as on the CPU: a
 * narrow type's minimum stays negative through |x| (gcd(-32768, 6) is -2 in
 * int16), and lcm wraps in int for the narrow types. */
Test(ew, gcd_lcm_in_the_dtype_width)
{
    const od_dtype dts[] = {OD_UINT8, OD_INT8, OD_INT16, OD_INT32, OD_INT64};
    const int64_t va[] = {-32768, 6, -128, 10, 0, -2147483648LL, 97, 12, -1, INT64_MIN};
    const int64_t vb[] = {6, -32768, 6, 97, 0, 6, 10, 18, INT64_MIN, -1};
    const int64_t n = (int64_t)(sizeof va / sizeof va[0]);
    for (size_t di = 0; di < sizeof dts / sizeof dts[0]; di++) {
        od_tensor *a = NULL, *b = NULL;
        OKCALL(od_tensor_empty(&n, 1, dts[di], TU_CPU, &a, &e_));
        OKCALL(od_tensor_empty(&n, 1, dts[di], TU_CPU, &b, &e_));
        for (int64_t i = 0; i < n; i++) {
            od_value x = od_int(va[i]), y = od_int(vb[i]);
            char bx[8], by[8];
            od_cpu_scalar_to_dtype(&x, dts[di], bx); /* the value wrapped to the dtype */
            od_cpu_scalar_to_dtype(&y, dts[di], by);
            size_t es = od_dtype_size(dts[di]);
            memcpy((char *)od_tensor_data(a) + (size_t)i * es, bx, es);
            memcpy((char *)od_tensor_data(b) + (size_t)i * es, by, es);
        }
        char w[64];
        snprintf(w, sizeof w, "gcd/lcm %s", od_dtype_name(dts[di]));
        od_value ab[2] = {od_tensor_v(a), od_tensor_v(b)};
        check_op(w, OD_OPID_gcd, ab, 2, 0, false);
        check_op(w, OD_OPID_lcm, ab, 2, 0, false);
        if (dts[di] == OD_INT16) { /* the documented case, against the value itself */
            od_stack sg;
            mirrored m;
            mirror_args(ab, 2, &m, false);
            OKCALL(od_call_builtin(OD_OPID_gcd, m.v, 2, &sg, &e_));
            od_tensor *g = to_cpu(sg.rets[0].u.t);
            TCHECK(((const int16_t *)od_tensor_data(g))[0] == -2, "gcd(-32768, 6) in int16 is %d on CUDA, not -2",
                   ((const int16_t *)od_tensor_data(g))[0]);
            od_tensor_release(g);
            od_stack_release_rets(&sg);
            mirror_free(&m);
        }
        od_tensor_release(a);
        od_tensor_release(b);
    }
}

/* Scatter's two CUDA paths against the CPU: few long lines take the
 * parallel one (atomic sums, the plain scatter's last writer elected, many
 * duplicates here: 50 targets per line), lines enough to fill the device
 * the per-line one. take and gather check their indices on the device. */
Test(index, scatter_paths)
{
    const struct {
        const int64_t *isz, *ssz;
        int ndim;
        int64_t dim;
    } cases[] = {
        {S(200000), S(50), 1, 0}, {S(3, 5000), S(3, 50), 2, 1}, {S(70000, 3), S(70000, 50), 2, 1},
    };
    const od_dtype dts[] = {OD_FLOAT32, OD_FLOAT64, OD_INT32, OD_INT64, OD_FLOAT16};
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        if (quick() && ci == 2)
            continue;
        od_tensor *index = tu_rand(cases[ci].isz, cases[ci].ndim, OD_INT64, 0, 49);
        for (size_t di = 0; di < sizeof dts / sizeof dts[0]; di++) {
            od_tensor *self = tu_rand(cases[ci].ssz, cases[ci].ndim, dts[di], -3, 3);
            od_tensor *src = tu_rand(cases[ci].isz, cases[ci].ndim, dts[di], -3, 3);
            char w[96];
            snprintf(w, sizeof w, "scatter case#%zu %s", ci, od_dtype_name(dts[di]));
            od_value a4[4] = {od_tensor_v(self), od_int(cases[ci].dim), od_tensor_v(index), od_tensor_v(src)};
            TCHECK(check_op(w, OD_OPID_scatter_add, a4, 4, -1, false) == OD_OK, "%s: scatter_add failed", w);
            TCHECK(check_op(w, OD_OPID_scatter_src, a4, 4, 0, false) == OD_OK, "%s: scatter failed", w);
            od_value v4[4] = {od_tensor_v(self), od_int(cases[ci].dim), od_tensor_v(index), od_double(1.5)};
            check_op(w, OD_OPID_scatter_value, v4, 4, 0, false);
            for (int inc = 0; inc < 2; inc++) {
                od_value r6[6] = {od_tensor_v(self), od_int(cases[ci].dim), od_tensor_v(index), od_tensor_v(src),
                                  od_str("mean"), od_bool(inc)};
                TCHECK(check_op(w, OD_OPID_scatter_reduce_two, r6, 6, -1, false) == OD_OK, "%s: mean failed", w);
                r6[4] = od_str("sum");
                TCHECK(check_op(w, OD_OPID_scatter_reduce_two, r6, 6, -1, false) == OD_OK, "%s: sum failed", w);
            }
            od_value g4[4] = {od_tensor_v(self), od_int(cases[ci].dim), od_tensor_v(index), od_bool(false)};
            TCHECK(check_op(w, OD_OPID_gather, g4, 4, 0, false) == OD_OK, "%s: gather failed", w);
            od_tensor_release(self);
            od_tensor_release(src);
        }
        od_tensor_release(index);
    }
    /* out-of-range indices: the CPU's message for the same first offender */
    od_tensor *self = tu_rand(S(10), 1, OD_FLOAT32, -1, 1), *idx = tu_rand(S(1000), 1, OD_INT64, -12, 12);
    od_value g4[4] = {od_tensor_v(self), od_int(0), od_tensor_v(idx), od_bool(false)};
    TCHECK(check_op("gather out of range", OD_OPID_gather, g4, 4, 0, false) == OD_EINVAL, "no error");
    od_value t2[2] = {od_tensor_v(self), od_tensor_v(idx)};
    TCHECK(check_op("take out of range", OD_OPID_take, t2, 2, 0, false) == OD_EINVAL, "no error");
    od_tensor *ok = tu_rand(S(1000), 1, OD_INT64, -10, 9);
    od_value t2b[2] = {od_tensor_v(self), od_tensor_v(ok)};
    TCHECK(check_op("take with negative indices", OD_OPID_take, t2b, 2, 0, false) == OD_OK, "error");
    od_tensor_release(ok);
    od_tensor_release(self);
    od_tensor_release(idx);
}

/* ---- matrix products -------------------------------------------------------------------------------- */

Test(blas, mm_bmm_addmm_dot) /* and addmv, baddbmm, addbmm */
{
    static const int64_t dims[][3] = {{65, 33, 17}, {1, 7, 1}, {128, 256, 64}, {5, 0, 3}, {0, 4, 6}, {300, 1, 200}};
    for (int fi = 0; fi < NFLT; fi++) {
        od_dtype dt = FLT_DT[fi];
        double tol = dt == OD_FLOAT32 ? 1e-5 : -1;
        for (size_t di = 0; di < sizeof dims / sizeof dims[0]; di++) {
            int64_t n = dims[di][0], k = dims[di][1], m = dims[di][2];
            for (int va = 0; va < 3; va++) {
                for (int vb = 0; vb < 2; vb++) {
                    char w[96];
                    snprintf(w, sizeof w, "%s %" PRId64 "x%" PRId64 "x%" PRId64 " views %d/%d", od_dtype_name(dt),
                             n, k, m, va, vb);
                    od_tensor *a = arg_t(S(n, k), 2, dt, -1, 1, va), *b = arg_t(S(k, m), 2, dt, -1, 1, vb);
                    od_value mm[2] = {od_tensor_v(a), od_tensor_v(b)};
                    check_op(w, OD_OPID_mm, mm, 2, tol, false);
                    od_tensor *self1 = arg_t(S(m), 1, dt, -1, 1, 0), *self2 = arg_t(S(n, m), 2, dt, -1, 1, va == 1);
                    const od_value betas[] = {od_int(1), od_double(0.5), od_int(0)};
                    for (int bi = 0; bi < 3; bi++) {
                        od_value am[5] = {od_tensor_v(bi % 2 ? self2 : self1), od_tensor_v(a), od_tensor_v(b),
                                          betas[bi], od_double(2.0)};
                        check_op(w, OD_OPID_addmm, am, 5, tol, false);
                    }
                    /* addmv: a @ v with a 1-element self, a's dims as the matrix */
                    od_tensor *vec = arg_t(S(k), 1, dt, -1, 1, 0), *sv = arg_t(S(1), 1, dt, -1, 1, 0);
                    od_value av[5] = {od_tensor_v(sv), od_tensor_v(a), od_tensor_v(vec), od_double(0.5), od_double(2.0)};
                    check_op(w, OD_OPID_addmv, av, 5, tol, false);
                    od_tensor_release(vec);
                    od_tensor_release(sv);
                    od_tensor_release(self1);
                    od_tensor_release(self2);
                    release_args(mm, 2);
                    od_tensor *ba = arg_t(S(3, n, k), 3, dt, -1, 1, va), *bb = arg_t(S(3, k, m), 3, dt, -1, 1, vb);
                    od_value bm[2] = {od_tensor_v(ba), od_tensor_v(bb)};
                    check_op(w, OD_OPID_bmm, bm, 2, tol, false);
                    /* baddbmm (broadcast self) and addbmm (one addmm per batch, beta 0 and not) */
                    od_tensor *bs3 = arg_t(S(n, m), 2, dt, -1, 1, 0), *bs2 = arg_t(S(n, m), 2, dt, -1, 1, va == 1);
                    od_value bd[5] = {od_tensor_v(bs3), od_tensor_v(ba), od_tensor_v(bb), od_double(0.5), od_double(2.0)};
                    check_op(w, OD_OPID_baddbmm, bd, 5, tol, false);
                    for (int bi = 0; bi < 2; bi++) {
                        od_value ab[5] = {od_tensor_v(bs2), od_tensor_v(ba), od_tensor_v(bb), bi ? od_int(0) : od_double(0.5),
                                          od_double(2.0)};
                        check_op(w, OD_OPID_addbmm, ab, 5, tol, false);
                    }
                    od_tensor_release(bs3);
                    od_tensor_release(bs2);
                    release_args(bm, 2);
                }
            }
        }
        for (int view = 0; view < 4; view++) {
            /* Positive terms: a relative tolerance on a sum that may cancel to
             * near 0 measures the cancellation, not the kernel (a seed gave
             * 2.86835 vs 2.86830 from |x|.|y| ~ 2500). */
            od_tensor *x = arg_t(S(10007), 1, dt, 0.25, 1, view), *y = arg_t(S(10007), 1, dt, 0.25, 1, (view + 1) % 4);
            od_value d[2] = {od_tensor_v(x), od_tensor_v(y)};
            check_op("dot", OD_OPID_dot, d, 2, dt == OD_FLOAT32 ? 1e-5 : -1, false);
            release_args(d, 2);
        }
    }
    /* Integer products: CPU has them, CUDA refuses like PyTorch. */
    od_tensor *a = arg_t(S(4, 4), 2, OD_INT64, -3, 3, 0);
    od_value mm[2] = {od_tensor_v(mirror(a)), od_tensor_v(NULL)};
    mm[1] = mm[0];
    /* the CPU kernel has integer products; the CUDA one refuses */
    od_stack s;
    od_error e;
    od_status st = od_call_builtin(OD_OPID_mm, mm, 2, &s, &e);
    TCHECK(st == OD_EUNSUPPORTED && strstr(e.message, "Long"), "int64 mm on CUDA: %s (%s)", od_status_code(st),
           e.message);
    od_tensor_release(mm[0].u.t);
    od_tensor_release(a);
}

/* ---- LAPACK ---------------------------------------------------------------------------------------- */

/* The LAPACK operators on CUDA tensors answer as on the CPU (results, info,
 * refusals), for float32 / float64, batched, transposed and empty inputs,
 * and float16 refused in the same words. */
Test(linalg, lapack_ops_match_the_cpu)
{
    static const int64_t sizes[][3] = {{3, 4, 4}, {2, 1, 1}, {0, 3, 3}, {2, 0, 0}};
    const od_dtype dts[] = {OD_FLOAT32, OD_FLOAT64, OD_FLOAT16};
    for (size_t di = 0; di < sizeof dts / sizeof dts[0]; di++) {
        od_dtype dt = dts[di];
        for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
            for (int view = 0; view < 2; view++) {
                int64_t b = sizes[si][0], n = sizes[si][1];
                char w[96];
                snprintf(w, sizeof w, "%s %" PRId64 "x%" PRId64 "x%" PRId64 " view %d", od_dtype_name(dt), b, n, n, view);
                od_tensor *A = arg_t(S(b, n, n), 3, dt, -1, 1, view), *B = arg_t(S(b, n, 2), 3, dt, -1, 1, 0);
                od_value a1[] = {od_tensor_v(A), od_bool(false)};
                check_op(w, OD_OPID_linalg_inv_ex, a1, 2, -1, false);
                od_value a2[] = {od_tensor_v(A), od_tensor_v(B), od_bool(true), od_bool(false)};
                check_op(w, OD_OPID__linalg_solve_ex, a2, 4, -1, false);
                od_value a3[] = {od_tensor_v(A), od_bool(false), od_bool(false)};
                check_op(w, OD_OPID_linalg_cholesky_ex, a3, 3, -1, false);
                od_value a4[] = {od_tensor_v(A), od_str("reduced")};
                check_op(w, OD_OPID_linalg_qr, a4, 2, -1, false);
                od_value a5[] = {od_tensor_v(A), od_bool(false), od_bool(true), od_none()};
                check_op(w, OD_OPID__linalg_svd, a5, 4, -1, false);
                od_value a6[] = {od_tensor_v(A), od_str("L"), od_bool(true)};
                check_op(w, OD_OPID__linalg_eigh, a6, 3, -1, false);
                od_value a7[] = {od_tensor_v(A)};
                check_op(w, OD_OPID__linalg_det, a7, 1, -1, false);
                check_op(w, OD_OPID__linalg_slogdet, a7, 1, -1, false);
                od_value a8[] = {od_tensor_v(A), od_bool(true), od_bool(false)};
                check_op(w, OD_OPID_linalg_lu_factor_ex, a8, 3, -1, false);
                od_value a9[] = {od_tensor_v(A), od_tensor_v(B), od_bool(true), od_bool(true), od_bool(false)};
                check_op(w, OD_OPID_linalg_solve_triangular, a9, 5, -1, false);
                /* lstsq: CUDA's only driver, gels, on the host as on the CPU */
                od_value a10[] = {od_tensor_v(A), od_tensor_v(B), od_none(), od_str("gels")};
                check_op(w, OD_OPID_linalg_lstsq, a10, 4, -1, false);
                od_tensor_release(A);
                od_tensor_release(B);
            }
        }
    }
}

Test(blas, tf32_switch_is_honoured)
{
    /* With TF32 off (the default) float32 products match the CPU to float
     * precision; with it on they are allowed ~1e-3. */
    TCHECK(!od_cuda_get_allow_tf32() || getenv("OD_CUDA_ALLOW_TF32"), "TF32 on by default");
    od_tensor *a = arg_t(S(256, 512), 2, OD_FLOAT32, -1, 1, 0), *b = arg_t(S(512, 128), 2, OD_FLOAT32, -1, 1, 0);
    od_value mm[2] = {od_tensor_v(a), od_tensor_v(b)};
    od_cuda_set_allow_tf32(false);
    check_op("mm fp32", OD_OPID_mm, mm, 2, 1e-5, false);
    od_cuda_set_allow_tf32(true);
    check_op("mm tf32", OD_OPID_mm, mm, 2, 5e-3, false);
    od_cuda_set_allow_tf32(false);
    release_args(mm, 2);
}

/* ---- copies, joins, indexing ---------------------------------------------------------------------------- */

/* copy_(dst, src) with dst / src on each device: the result must equal the
 * CPU kernel's copy_ on CPU tensors. */
static void check_copy(const char *what, od_tensor *dst, od_tensor *src, int where /* bit0 dst cuda, bit1 src cuda */)
{
    od_tensor *ref = NULL;
    OKCALL(od_tensor_empty(dst->sizes, dst->ndim, dst->dtype, TU_CPU, &ref, &e_));
    od_value a0[3] = {od_tensor_v(ref), od_tensor_v(src), od_bool(false)};
    od_stack s;
    OKCALL(od_call_builtin(OD_OPID_copy_, a0, 3, &s, &e_));
    od_stack_release_rets(&s);
    od_tensor *d = (where & 1) ? mirror(dst) : (od_tensor_retain(dst), dst);
    od_tensor *sr = (where & 2) ? mirror(src) : (od_tensor_retain(src), src);
    od_value a1[3] = {od_tensor_v(d), od_tensor_v(sr), od_bool(false)};
    OKCALL(od_call_builtin(OD_OPID_copy_, a1, 3, &s, &e_));
    TCHECK(s.nrets == 1 && s.rets[0].u.t == d, "%s: copy_ must return self", what);
    od_stack_release_rets(&s);
    compare_out(what, d, ref, 0); /* conversions are exact casts: both sides cast the same way */
    od_tensor_release(d);
    od_tensor_release(sr);
    od_tensor_release(ref);
}

Test(copy, copy_between_devices_and_dtypes)
{
    const int dstep = quick() ? 3 : 1;
    for (int di = 0; di < NALL; di += dstep) {
        for (int si = 0; si < NALL; si += dstep) {
            od_dtype dd = ALL_DT[di], sd = ALL_DT[si];
            for (int where = 1; where < 4; where++) {
                for (int view = 0; view < 4; view++) {
                    char w[96];
                    snprintf(w, sizeof w, "copy_ %s <- %s where %d view %d", od_dtype_name(dd), od_dtype_name(sd),
                             where, view);
                    od_tensor *dst = arg_t(S(23, 41), 2, dd, -1, 1, view);
                    od_tensor *src = arg_t(S(23, 41), 2, sd, -300, 300, (view + 2) % 4);
                    check_copy(w, dst, src, where);
                    od_tensor *bsrc = arg_t(S(41), 1, sd, -9, 9, 0); /* broadcast source */
                    check_copy(w, dst, bsrc, where);
                    od_tensor_release(dst);
                    od_tensor_release(src);
                    od_tensor_release(bsrc);
                }
            }
        }
    }
    /* Bigger than the pinned staging chunks, with a strided host side. */
    for (int where = 1; where < 4 && !quick(); where++) {
        od_tensor *dst = arg_t(S(3000001), 1, OD_FLOAT32, -1, 1, 2);
        od_tensor *src = arg_t(S(3000001), 1, OD_FLOAT32, -1, 1, where == 2 ? 2 : 0);
        check_copy("big copy", dst, src, where);
        od_tensor *src16 = arg_t(S(3000001), 1, OD_FLOAT16, -1, 1, 0);
        check_copy("big converting copy", dst, src16, where);
        od_tensor_release(dst);
        od_tensor_release(src);
        od_tensor_release(src16);
    }
    /* Empty and 0-dim. */
    od_tensor *e0 = arg_t(S(0, 3), 2, OD_FLOAT32, 0, 1, 0), *e1 = arg_t(S(0, 3), 2, OD_INT32, 0, 1, 0);
    check_copy("empty", e0, e1, 3);
    od_tensor *z0 = arg_t(S(1), 0, OD_FLOAT64, 0, 1, 0), *z1 = arg_t(S(1), 0, OD_BFLOAT16, 0, 1, 0);
    check_copy("0-dim", z0, z1, 1);
    check_copy("0-dim", z0, z1, 2);
    od_tensor_release(e0);
    od_tensor_release(e1);
    od_tensor_release(z0);
    od_tensor_release(z1);
}

Test(copy, clone_to_and_cat)
{
    for (int di = 0; di < NALL; di++) {
        od_dtype dt = ALL_DT[di];
        for (int view = 0; view < 4; view++) {
            od_tensor *a = arg_t(S(31, 17), 2, dt, -5, 5, view);
            od_value cl[2] = {od_tensor_v(a), od_none()};
            check_op("clone", OD_OPID_clone, cl, 2, 0, false);
            /* _to_copy on the device (dtype change, any strides). */
            for (int dj = 0; dj < NALL; dj += 2) {
                od_value tc[7] = {od_tensor_v(a), od_dtype_v(ALL_DT[dj]), od_none(), od_none(), od_none(),
                                  od_bool(false), od_none()};
                check_op("_to_copy", OD_OPID__to_copy, tc, 7, 0, false);
            }
            od_tensor_release(a);
        }
        /* cat: along each dim, with a legacy empty [0] and a promoted partner. */
        od_tensor *p = arg_t(S(4, 5, 6), 3, dt, -5, 5, 0), *q = arg_t(S(4, 5, 6), 3, dt, -5, 5, 1);
        od_tensor *r = arg_t(S(4, 5, 6), 3, ALL_DT[(di + 3) % NALL], -5, 5, 2);
        od_tensor *emp = arg_t(S(0), 1, dt, 0, 1, 0);
        for (int d = -3; d < 3; d++) {
            od_tensor *ts[4] = {p, emp, q, r};
            od_value cat[2] = {od_list_v(OD_T_TENSOR_LIST, ts, 4), od_int(d)};
            check_op("cat", OD_OPID_cat, cat, 2, 0, false);
        }
        od_tensor_release(p);
        od_tensor_release(q);
        od_tensor_release(r);
        od_tensor_release(emp);
    }
}

Test(copy, index_select)
{
    for (int di = 0; di < NALL; di++) {
        od_dtype dt = ALL_DT[di];
        for (int view = 0; view < 4; view++) {
            od_tensor *a = arg_t(S(20, 7, 9), 3, dt, -5, 5, view);
            for (int d = 0; d < 3; d++) {
                int64_t lim = a->sizes[d];
                for (int it = 0; it < 2; it++) {
                    od_tensor *idx = arg_t(S(13), 1, it ? OD_INT32 : OD_INT64, 0, (double)(lim - 1), view == 2 ? 2 : 0);
                    od_value args[3] = {od_tensor_v(a), od_int(d), od_tensor_v(idx)};
                    check_op("index_select", OD_OPID_index_select, args, 3, 0, false);
                    od_tensor_release(idx);
                }
            }
            od_tensor_release(a);
        }
    }
    /* Out of range: an error on both devices, and the GPU keeps working. */
    od_tensor *a = arg_t(S(6, 4), 2, OD_FLOAT32, -1, 1, 0), *idx = arg_t(S(5), 1, OD_INT64, 0, 5, 0);
    ((int64_t *)od_tensor_data(idx))[3] = 6;
    od_value args[3] = {od_tensor_v(a), od_int(0), od_tensor_v(idx)};
    TCHECK(check_op("index out of range", OD_OPID_index_select, args, 3, 0, false) == OD_EINVAL, "no error");
    ((int64_t *)od_tensor_data(idx))[3] = 5;
    TCHECK(check_op("index back in range", OD_OPID_index_select, args, 3, 0, false) == OD_OK, "recovery");
    od_tensor_release(a);
    od_tensor_release(idx);
}

/* ---- factories -------------------------------------------------------------------------------------------- */

Test(fact, arange)
{
    for (int di = 1; di < NALL; di++) {
        od_dtype dt = ALL_DT[di];
        const double ends[] = {10, 1000003, 0};
        for (int k = 0; k < 3; k++) {
            od_value a1[5] = {od_int((int64_t)ends[k]), od_dtype_v(dt), od_none(), od_device_v(TU_CPU), od_none()};
            od_value g1[5];
            memcpy(g1, a1, sizeof a1);
            g1[3] = od_device_v(TU_CUDA);
            od_stack sc, sg;
            od_error ec, eg;
            od_status stc = od_call_builtin(OD_OPID_arange, a1, 5, &sc, &ec);
            od_status stg = od_call_builtin(OD_OPID_arange, g1, 5, &sg, &eg);
            TCHECK(stc == stg, "arange %s: CPU %s (%s), CUDA %s (%s)", od_dtype_name(dt), od_status_code(stc),
                   ec.message, od_status_code(stg), eg.message);
            if (stc == OD_OK) {
                TCHECK(sg.rets[0].u.t->device.type == OD_DEV_CUDA, "arange not on CUDA");
                compare_out("arange", sg.rets[0].u.t, sc.rets[0].u.t, dt == OD_FLOAT16 || dt == OD_BFLOAT16 ? 0 : -1);
                od_stack_release_rets(&sc);
                od_stack_release_rets(&sg);
            }
        }
        od_value a3[7] = {od_double(-3.5), od_double(7.25), od_double(0.37), od_dtype_v(dt), od_none(),
                          od_device_v(TU_CPU), od_none()};
        od_value g3[7];
        memcpy(g3, a3, sizeof a3);
        g3[5] = od_device_v(TU_CUDA);
        od_stack sc, sg;
        od_error ec, eg;
        od_status stc = od_call_builtin(OD_OPID_arange_start_step, a3, 7, &sc, &ec);
        od_status stg = od_call_builtin(OD_OPID_arange_start_step, g3, 7, &sg, &eg);
        TCHECK(stc == stg, "arange.start_step %s: %s vs %s", od_dtype_name(dt), od_status_code(stc),
               od_status_code(stg));
        if (stc == OD_OK) {
            compare_out("arange.start_step", sg.rets[0].u.t, sc.rets[0].u.t, -1);
            od_stack_release_rets(&sc);
            od_stack_release_rets(&sg);
        }
    }
}

Test(fact, rand_randn_match_the_host_generator)
{
    od_cuda_manual_seed(rng_next());
    for (int fi = 0; fi < NFLT; fi++) {
        od_dtype dt = FLT_DT[fi];
        int bits = dt == OD_BFLOAT16 ? 8 : dt == OD_FLOAT16 ? 11 : dt == OD_FLOAT32 ? 24 : 53;
        for (int normal = 0; normal < 2; normal++) {
            int64_t sz[2] = {301, 1001};
            od_value args[5] = {od_list_v(OD_T_INT_LIST, sz, 2), od_dtype_v(dt), od_none(), od_device_v(TU_CUDA),
                                od_none()};
            uint64_t seed, off0, off1;
            od_cuda_rng_state(&seed, &off0);
            od_stack s;
            OKCALL(od_call_builtin(normal ? OD_OPID_randn : OD_OPID_rand, args, 5, &s, &e_));
            od_cuda_rng_state(NULL, &off1);
            TCHECK(off1 - off0 == (uint64_t)(sz[0] * sz[1]), "offset advanced by %" PRIu64, off1 - off0);
            od_tensor *g = to_cpu(s.rets[0].u.t);
            double num = 0, den = 0, sum = 0;
            int64_t n = sz[0] * sz[1];
            for (int64_t i = 0; i < n; i++) {
                double want = od_math_random_f64(seed, off0 + (uint64_t)i, normal, bits);
                double got = tu_get(g, i);
                if (!normal)
                    TCHECK(got == want, "rand %s element %" PRId64 ": %.17g != %.17g", od_dtype_name(dt), i, got,
                           want);
                num += (got - want) * (got - want);
                den += want * want;
                sum += got;
            }
            TCHECK(sqrt(num / den) <= tol_for(dt) + 1e-7, "randn %s differs from the host generator by %g",
                   od_dtype_name(dt), sqrt(num / den));
            double mean = sum / (double)n;
            TCHECK(fabs(mean - (normal ? 0 : 0.5)) < 0.01, "mean %g", mean);
            od_tensor_release(g);
            od_stack_release_rets(&s);
        }
    }
}

/* ---- allocator, errors, threads ------------------------------------------------------------------------------ */

Test(alloc, repeated_calls_reuse_cached_blocks)
{
    od_cuda_alloc_info before, after;
    od_tensor *a = dev_rand_t(S(1000, 1000), 2, OD_FLOAT32);
    od_tensor *out = NULL;
    OKCALL(od_add(a, a, 1.0, &out, &e_)); /* warm: the output's size class is now cached after release */
    od_tensor_release(out);
    TCHECK(od_cuda_alloc_stats(0, &before) == OD_OK, "stats");
    TCHECK(before.cached_bytes >= 4000000, "the freed output was not cached (%zu bytes cached)",
           before.cached_bytes);
    for (int i = 0; i < 20; i++) {
        OKCALL(od_add(a, a, 1.0, &out, &e_));
        od_tensor_release(out);
    }
    TCHECK(od_cuda_alloc_stats(0, &after) == OD_OK, "stats");
    TCHECK(after.device_mallocs == before.device_mallocs, "repeated adds called cudaMalloc %" PRIu64 " times",
           after.device_mallocs - before.device_mallocs);
    TCHECK(after.cache_hits >= before.cache_hits + 20, "cache hits %" PRIu64 " -> %" PRIu64, before.cache_hits,
           after.cache_hits);
    TCHECK(after.in_use_bytes == before.in_use_bytes, "in-use bytes drifted: %zu -> %zu", before.in_use_bytes,
           after.in_use_bytes);
    od_cuda_empty_cache();
    TCHECK(od_cuda_alloc_stats(0, &after) == OD_OK && after.cached_bytes == 0, "empty_cache left %zu bytes",
           after.cached_bytes);
    od_tensor_release(a);
}

Test(alloc, oom_is_devmem_and_recoverable)
{
    od_cuda_info info;
    TCHECK(od_cuda_device_info(0, &info) == OD_OK, "device info");
    TCHECK(info.sm_count > 0 && info.total_mem_bytes > 0 && info.cc_major >= 7 && info.name[0], "info: %s cc %d.%d",
           info.name, info.cc_major, info.cc_minor);
    /* Cache something first, so the OOM path has a cache to empty. */
    od_tensor *warm = dev_rand_t(S(1 << 20), 1, OD_FLOAT32);
    od_tensor_release(warm);
    int64_t too_big = (int64_t)(info.total_mem_bytes / 4) * 2; /* 2x the device's memory, as float32 */
    od_tensor *t = NULL;
    od_error e;
    od_error_clear(&e);
    od_status st = od_tensor_empty(&too_big, 1, OD_FLOAT32, TU_CUDA, &t, &e);
    TCHECK(st == OD_EDEVMEM && !t, "allocating 2x the device: %s (%s)", od_status_code(st), e.message);
    TCHECK(strstr(e.message, "CUDA out of memory"), "message: %s", e.message);
    od_cuda_alloc_info ai;
    TCHECK(od_cuda_alloc_stats(0, &ai) == OD_OK && ai.ooms >= 1 && ai.oom_retries >= 1, "oom counters");
    /* The device still works. */
    od_tensor *a = arg_t(S(100, 100), 2, OD_FLOAT32, -1, 1, 0);
    od_value args[3] = {od_tensor_v(a), od_tensor_v(a), od_int(1)};
    TCHECK(check_op("after OOM", OD_OPID_add_Tensor, args, 3, -1, false) == OD_OK, "recovery");
    od_tensor_release(a);
}

typedef struct thread_arg {
    od_tensor *a, *b, *ref;
    int ok;
} thread_arg;

static void *thread_body(void *p)
{
    thread_arg *ta = p;
    ta->ok = 1;
    for (int i = 0; i < 50 && ta->ok; i++) {
        od_tensor *out = NULL, *c = NULL;
        od_error e;
        if (od_mm(ta->a, ta->b, &out, &e) != OD_OK || od_to_device(out, TU_CPU, &c, &e) != OD_OK) {
            ta->ok = 0;
        } else {
            int64_t bad;
            ta->ok = tu_rel_err(c, ta->ref, &bad) < 1e-5 && bad < 0;
        }
        od_tensor_release(out);
        od_tensor_release(c);
    }
    return NULL;
}

Test(alloc, concurrent_threads_use_their_own_streams)
{
    od_tensor *a = arg_t(S(200, 300), 2, OD_FLOAT32, -1, 1, 0), *b = arg_t(S(300, 100), 2, OD_FLOAT32, -1, 1, 1);
    od_tensor *ref = NULL;
    OKCALL(od_mm(a, b, &ref, &e_));
    thread_arg ta[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        ta[i] = (thread_arg){mirror(a), mirror(b), ref, 0};
        TCHECK(pthread_create(&th[i], NULL, thread_body, &ta[i]) == 0, "pthread_create");
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        TCHECK(ta[i].ok, "thread %d got a wrong product or an error", i);
        od_tensor_release(ta[i].a);
        od_tensor_release(ta[i].b);
    }
    od_tensor_release(ref);
    od_tensor_release(a);
    od_tensor_release(b);
}

/* Padding, searchsorted / bucketize, repeat_interleave.Tensor and
 * unique_consecutive against the CPU: strided inputs, every dtype each
 * takes, and the refusals (the same message on both devices). */
Test(copy, pads_search_unique)
{
    static const od_opid pads[6] = {OD_OPID_reflection_pad1d, OD_OPID_reflection_pad2d, OD_OPID_reflection_pad3d,
                                    OD_OPID_replication_pad1d, OD_OPID_replication_pad2d,
                                    OD_OPID_replication_pad3d};
    static const int64_t padv[6] = {2, -1, 1, 3, 0, 2};
    for (int di = 0; di < NALL; di++) {
        od_dtype dt = ALL_DT[di];
        for (int view = 0; view < 4; view++) {
            for (int p = 0; p < 6; p++) {
                int nd = p % 3 + 1;
                int64_t sz[5] = {2, 3, 6, 5, 4};
                od_tensor *a = arg_t(sz, nd + 2, dt, -5, 5, view);
                od_value args[2] = {od_tensor_v(a), od_list_v(OD_T_INT_LIST, (void *)padv, (size_t)(2 * nd))};
                check_op("padding", pads[p], args, 2, 0, false);
                od_tensor_release(a);
            }
            if (dt == OD_BOOL)
                continue;
            od_tensor *b = arg_t(S(3, 9), 2, dt, -6, 6, 0), *v = arg_t(S(3, 7), 2, dt, -7, 7, view);
            /* sorted rows (sort along dim 1) as the boundaries */
            od_value sargs[6] = {od_tensor_v(b), od_tensor_v(v), od_bool(view & 1), od_bool(view >> 1), od_none(),
                                 od_none()};
            od_stack srt;
            od_error se;
            od_error_clear(&se);
            od_value sa[3] = {od_tensor_v(b), od_int(1), od_bool(false)};
            OKCALL(od_call_builtin(OD_OPID_sort, sa, 3, &srt, &se));
            sargs[0] = srt.rets[0];
            check_op("searchsorted", OD_OPID_searchsorted_Tensor, sargs, 6, 0, false);
            od_value bargs[4] = {od_tensor_v(v), od_tensor_v(b), od_bool(false), od_bool(true)};
            check_op("bucketize (2-D boundaries refused)", OD_OPID_bucketize_Tensor, bargs, 4, 0, false);
            od_value uargs[4] = {od_tensor_v(v), od_bool(true), od_bool(true), od_none()};
            check_op("unique_consecutive", OD_OPID_unique_consecutive, uargs, 4, 0, false);
            uargs[3] = od_int(1);
            check_op("unique_consecutive dim", OD_OPID_unique_consecutive, uargs, 4, 0, false);
            od_stack_release_rets(&srt);
            od_tensor_release(b);
            od_tensor_release(v);
        }
    }
    od_tensor *r = arg_t(S(9), 1, OD_INT64, 0, 3, 2);
    od_value rargs[2] = {od_tensor_v(r), od_none()};
    check_op("repeat_interleave", OD_OPID_repeat_interleave_Tensor, rargs, 2, 0, false);
    ((int64_t *)od_tensor_data(r))[0] = -1;
    check_op("repeat_interleave negative", OD_OPID_repeat_interleave_Tensor, rargs, 2, 0, false);
    od_tensor_release(r);
}

/* ---- batch norm and group norm (kernels/cuda/bnorm.cu vs cpu/norm.c) ------------------------------ */

/* Outputs that are None on one device are None on the other; the rest close. */
static void judge_norm(const char *what, od_opid id, od_stack *sc, od_stack *sg, const void *ctx)
{
    for (int i = 0; i < sc->nrets; i++) {
        char w[256];
        snprintf(w, sizeof w, "%s (%s) output %d", what, od_op_name(od_builtin(id)), i);
        bool cn = sc->rets[i].tag != OD_T_TENSOR, gn = sg->rets[i].tag != OD_T_TENSOR;
        TCHECK(cn == gn, "%s: None on one device only", w);
        if (!cn)
            compare_out(w, sg->rets[i].u.t, sc->rets[i].u.t, *(const double *)ctx);
    }
}

Test(red, batch_and_group_norm)
{
    const struct {
        const int64_t *sizes;
        int ndim, groups, view;
    } cases[] = {
        {S(8, 3), 2, 3, 0},         {S(4, 6, 33), 3, 2, 0}, {S(2, 4, 7, 9), 4, 4, 1},
        {S(3, 2, 3, 4, 5), 5, 1, 2}, {S(1, 5, 4000), 3, 5, 0}, {S(0, 4, 3), 3, 2, 0},
    };
    const od_dtype dts[] = {OD_BFLOAT16, OD_FLOAT32, OD_FLOAT64};
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        for (int di = 0; di < 3; di++) {
            od_dtype dt = dts[di];
            double tol = dt == OD_FLOAT32 ? 1e-4 : dt == OD_BFLOAT16 ? 3e-2 : 1e-9;
            const int64_t *sz = cases[ci].sizes;
            int nd = cases[ci].ndim;
            int64_t N = sz[0], C = sz[1], HxW = 1, G = cases[ci].groups;
            for (int d = 2; d < nd; d++)
                HxW *= sz[d];
            od_tensor *x = arg_t(sz, nd, dt, -3, 5, cases[ci].view), *gy = arg_t(sz, nd, dt, -1, 1, 0);
            od_tensor *w = arg_t(S(C), 1, dt, 0.5, 1.5, 0), *b = arg_t(S(C), 1, dt, -1, 1, 0);
            od_tensor *ng_mean = arg_t(S(N, G), 2, dt, -1, 1, 0), *ng_rstd = arg_t(S(N, G), 2, dt, 0.5, 2, 0);
            char wh[96];
            for (int train = 0; train < 2; train++) {
                /* running statistics: each device writes its own copy, compared after */
                od_tensor *rm = arg_t(S(C), 1, dt, -1, 1, 0), *rv = arg_t(S(C), 1, dt, 0.5, 2, 0);
                od_tensor *grm = mirror(rm), *grv = mirror(rv);
                od_value ca[8] = {od_tensor_v(x), od_tensor_v(w), od_tensor_v(b), od_tensor_v(rm), od_tensor_v(rv),
                                  od_bool(train), od_double(0.3), od_double(1e-5)};
                od_value ga[8];
                memcpy(ga, ca, sizeof ca);
                ga[0] = od_tensor_v(mirror(x));
                ga[1] = od_tensor_v(mirror(w));
                ga[2] = od_tensor_v(mirror(b));
                ga[3] = od_tensor_v(grm);
                ga[4] = od_tensor_v(grv);
                od_stack sc, sg;
                OKCALL(od_call_builtin(OD_OPID_native_batch_norm, ca, 8, &sc, &e_));
                OKCALL(od_call_builtin(OD_OPID_native_batch_norm, ga, 8, &sg, &e_));
                snprintf(wh, sizeof wh, "native_batch_norm case#%zu %s train=%d", ci, od_dtype_name(dt), train);
                judge_norm(wh, OD_OPID_native_batch_norm, &sc, &sg, &tol);
                compare_out(wh, grm, rm, tol);
                compare_out(wh, grv, rv, tol);
                /* the backward, from the forward's statistics */
                bool masks[3][3] = {{true, true, true}, {true, false, true}, {false, true, false}};
                for (int mi = 0; mi < 3; mi++) {
                    od_value bargs[10] = {od_tensor_v(gy), od_tensor_v(x), od_tensor_v(w), od_tensor_v(rm),
                                          od_tensor_v(rv), train ? sc.rets[1] : od_none(),
                                          train ? sc.rets[2] : od_none(), od_bool(train), od_double(1e-5),
                                          od_list_v(OD_T_BOOL_LIST, masks[mi], 3)};
                    snprintf(wh, sizeof wh, "native_batch_norm_backward case#%zu %s train=%d mask#%d", ci,
                             od_dtype_name(dt), train, mi);
                    check_op_with(wh, OD_OPID_native_batch_norm_backward, bargs, 10, false, judge_norm, &tol);
                }
                od_stack_release_rets(&sc);
                od_stack_release_rets(&sg);
                for (int i = 0; i < 3; i++)
                    od_tensor_release(ga[i].u.t);
                od_tensor_release(grm);
                od_tensor_release(grv);
                od_tensor_release(rm);
                od_tensor_release(rv);
            }
            for (int aff = 0; aff < 2; aff++) {
                od_value gargs[8] = {od_tensor_v(x), aff ? od_tensor_v(w) : od_none(), aff ? od_tensor_v(b) : od_none(),
                                     od_int(N), od_int(C), od_int(HxW), od_int(G), od_double(1e-5)};
                snprintf(wh, sizeof wh, "native_group_norm case#%zu %s affine=%d", ci, od_dtype_name(dt), aff);
                check_op_with(wh, OD_OPID_native_group_norm, gargs, 8, false, judge_norm, &tol);
                bool mask[3] = {true, aff == 1, aff == 1};
                od_value bargs[10] = {od_tensor_v(gy), od_tensor_v(x), od_tensor_v(ng_mean), od_tensor_v(ng_rstd),
                                      aff ? od_tensor_v(w) : od_none(), od_int(N), od_int(C), od_int(HxW), od_int(G),
                                      od_list_v(OD_T_BOOL_LIST, mask, 3)};
                snprintf(wh, sizeof wh, "native_group_norm_backward case#%zu %s affine=%d", ci, od_dtype_name(dt),
                         aff);
                check_op_with(wh, OD_OPID_native_group_norm_backward, bargs, 10, false, judge_norm, &tol);
            }
            /* the refusals agree too: a float16 input, groups that do not divide C */
            od_tensor *h = arg_t(sz, nd, OD_FLOAT16, -1, 1, 0);
            od_value hargs[8] = {od_tensor_v(h), od_none(), od_none(), od_none(), od_none(), od_bool(true),
                                 od_double(0.1), od_double(1e-5)};
            check_op_with("native_batch_norm float16", OD_OPID_native_batch_norm, hargs, 8, false, judge_norm, &tol);
            od_value g3[8] = {od_tensor_v(x), od_none(), od_none(), od_int(N), od_int(C), od_int(HxW), od_int(C + 1),
                              od_double(1e-5)};
            check_op_with("native_group_norm groups", OD_OPID_native_group_norm, g3, 8, false, judge_norm, &tol);
            od_tensor_release(h);
            od_tensor_release(x);
            od_tensor_release(gy);
            od_tensor_release(w);
            od_tensor_release(b);
            od_tensor_release(ng_mean);
            od_tensor_release(ng_rstd);
        }
    }
}

/* ---- attention: the fused CUDA kernel (attention.cu) against the CPU one ------------------------------- */

Test(red, sdpa_forward) /* attention: its online softmax */
{
    const struct {
        const int64_t *q, *k, *v;
        int nq, nk, nv, view;
    } cases[] = {
        {S(2, 3, 5, 8), S(2, 3, 7, 8), S(2, 3, 7, 6), 4, 4, 4, 0},
        {S(2, 3, 40, 16), S(2, 3, 70, 16), S(2, 3, 70, 16), 4, 4, 4, 1}, /* several tiles, transposed */
        {S(4, 1, 8), S(1, 33, 8), S(4, 33, 5), 3, 3, 3, 0},              /* broadcast batch dims */
        {S(3, 0, 4), S(3, 5, 4), S(3, 5, 4), 3, 3, 3, 0},                /* L == 0 */
        {S(3, 4, 4), S(3, 0, 4), S(3, 0, 4), 3, 3, 3, 0},                /* S == 0 */
        {S(6, 9), S(11, 9), S(11, 3), 2, 2, 2, 3},
    };
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        for (int fi = 1; fi < NFLT; fi++) { /* bfloat16 runs the math path on CUDA, the fused one on the CPU */
            od_dtype dt = FLT_DT[fi];
            od_tensor *q = arg_t(cases[ci].q, cases[ci].nq, dt, -2, 2, cases[ci].view);
            od_tensor *k = arg_t(cases[ci].k, cases[ci].nk, dt, -2, 2, cases[ci].view);
            od_tensor *v = arg_t(cases[ci].v, cases[ci].nv, dt, -2, 2, 0);
            int64_t L = cases[ci].q[cases[ci].nq - 2], Sk = cases[ci].k[cases[ci].nk - 2];
            od_tensor *bm = arg_t(S(L, Sk), 2, OD_BOOL, 0, 1, 0), *fm = arg_t(S(L, Sk), 2, dt, -1, 1, 0);
            od_tensor *masks[3] = {NULL, bm, fm};
            for (int mi = 0; mi < 3; mi++)
                for (int causal = 0; causal < 2; causal++) {
                    if (causal && mi)
                        continue;
                    for (int w = dt == OD_BFLOAT16; w < 2; w++) {
                        od_value args[7] = {od_tensor_v(q), od_tensor_v(k), od_tensor_v(v),
                                            masks[mi] ? od_tensor_v(masks[mi]) : od_none(), od_double(0),
                                            od_bool(w), od_bool(causal)};
                        char wh[96];
                        snprintf(wh, sizeof wh, "sdpa case#%zu %s mask=%d causal=%d weights=%d", ci,
                                 od_dtype_name(dt), mi, causal, w);
                        check_op(wh, OD_OPID__scaled_dot_product_attention_forward, args, 7,
                                 dt == OD_FLOAT64 ? 1e-9 : dt == OD_FLOAT32 ? 1e-4 : 3e-2, false);
                    }
                }
            od_tensor_release(q);
            od_tensor_release(k);
            od_tensor_release(v);
            od_tensor_release(bm);
            od_tensor_release(fm);
        }
    }
}

Test(red, losses_nll_mse_cross_entropy_match_the_cpu)
{
    const od_dtype dts[] = {OD_FLOAT32, OD_FLOAT64, OD_BFLOAT16};
    for (size_t di = 0; di < sizeof dts / sizeof dts[0]; di++) {
        od_dtype dt = dts[di];
        for (int view = 0; view < 2; view++) {
            for (int64_t red = 0; red < 3; red++) {
                od_tensor *x = arg_t(S(9, 5), 2, dt, -3, 3, view), *t = arg_t(S(9), 1, OD_INT64, 0, 4, 0);
                od_tensor *w = arg_t(S(5), 1, dt, 0.5, 1.5, 0), *x4 = arg_t(S(2, 5, 3, 4), 4, dt, -3, 3, view);
                od_tensor *t3 = arg_t(S(2, 3, 4), 3, OD_INT64, 0, 4, 0), *y = arg_t(S(9, 5), 2, dt, -3, 3, 0);
                od_value a1[] = {od_tensor_v(x), od_tensor_v(t), od_tensor_v(w), od_int(red), od_int(2)};
                check_op("nll_loss_forward", OD_OPID_nll_loss_forward, a1, 5, 1e-5, false);
                od_value a2[] = {od_tensor_v(x4), od_tensor_v(t3), od_none(), od_int(red), od_int(-100)};
                check_op("nll_loss2d_forward", OD_OPID_nll_loss2d_forward, a2, 5, 1e-5, false);
                od_value a3[] = {od_tensor_v(x), od_tensor_v(t), od_tensor_v(w), od_int(red), od_int(-100),
                                 od_double(0.1)};
                check_op("cross_entropy_loss", OD_OPID_cross_entropy_loss, a3, 6, 1e-4, false);
                od_value a4[] = {od_tensor_v(x), od_tensor_v(y), od_int(red)};
                check_op("mse_loss", OD_OPID_mse_loss, a4, 3, 1e-5, false);
                check_op("l1_loss", OD_OPID_l1_loss, a4, 3, 1e-5, false);
                od_value a6[] = {od_tensor_v(x), od_tensor_v(y), od_int(red), od_double(0.7)};
                check_op("smooth_l1_loss", OD_OPID_smooth_l1_loss, a6, 4, 1e-5, false);
                check_op("huber_loss", OD_OPID_huber_loss, a6, 4, 1e-5, false);
                od_tensor *tw = arg_t(S(1), 0, dt, 1, 2, 0), *g = arg_t(S(9), red ? 0 : 1, dt, -1, 1, 0);
                od_value a5[] = {od_tensor_v(g), od_tensor_v(x), od_tensor_v(t), od_tensor_v(w), od_int(red),
                                 od_int(1), od_tensor_v(tw)};
                check_op("nll_loss_backward", OD_OPID_nll_loss_backward, a5, 7, 1e-5, false);
                od_tensor *all[] = {x, t, w, x4, t3, y, tw, g};
                for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
                    od_tensor_release(all[i]);
            }
        }
    }
}

/* ---- pooling and resampling (kernels/cuda/pool.c, resample.c) ---------------------------------------- */
#define IL_(...) od_list_v(OD_T_INT_LIST, (void *)S(__VA_ARGS__), sizeof(S(__VA_ARGS__)) / sizeof(int64_t))

Test(index, pools_match_the_cpu)
{
    for (int fi = 0; fi < NFLT; fi++) {
        od_dtype dt = FLT_DT[fi];
        for (int view = 0; view < 2; view++) {
            od_tensor *x = arg_t(S(2, 3, 9, 11), 4, dt, -6, 6, view), *x3 = arg_t(S(2, 2, 5, 6, 7), 5, dt, -6, 6, view);
            od_value mp[6] = {od_tensor_v(x), IL_(3, 2), IL_(2, 2), IL_(1, 1), IL_(1, 2), od_bool(true)};
            check_op("max_pool2d_with_indices", OD_OPID_max_pool2d_with_indices, mp, 6, -1, false);
            od_value mp3[6] = {od_tensor_v(x3), IL_(3), IL_(2), IL_(1), IL_(1), od_bool(false)};
            check_op("max_pool3d_with_indices", OD_OPID_max_pool3d_with_indices, mp3, 6, -1, false);
            od_value ap[7] = {od_tensor_v(x), IL_(3, 3), IL_(2, 1), IL_(1, 1), od_bool(true), od_bool(false), od_none()};
            check_op("avg_pool2d", OD_OPID_avg_pool2d, ap, 7, -1, false);
            ap[6] = od_int(4);
            check_op("avg_pool2d divisor", OD_OPID_avg_pool2d, ap, 7, -1, false);
            od_value ap3[7] = {od_tensor_v(x3), IL_(2, 3, 2), od_list_v(OD_T_INT_LIST, NULL, 0), IL_(1), od_bool(true),
                              od_bool(true), od_none()};
            check_op("avg_pool3d", OD_OPID_avg_pool3d, ap3, 7, -1, false);
            od_value aa[2] = {od_tensor_v(x), IL_(4, 5)}, aa3[2] = {od_tensor_v(x3), IL_(2, 4, 3)};
            check_op("_adaptive_avg_pool2d", OD_OPID__adaptive_avg_pool2d, aa, 2, -1, false);
            check_op("adaptive_max_pool2d", OD_OPID_adaptive_max_pool2d, aa, 2, -1, false);
            check_op("_adaptive_avg_pool3d", OD_OPID__adaptive_avg_pool3d, aa3, 2, -1, false);
            check_op("adaptive_max_pool3d", OD_OPID_adaptive_max_pool3d, aa3, 2, -1, false);
            /* backward: indices from the CPU forward, a random grad_output */
            if (dt == OD_FLOAT32 || dt == OD_FLOAT64 || dt == OD_BFLOAT16) {
                od_stack f;
                od_error fe;
                od_error_clear(&fe);
                OKCALL(od_call_builtin(OD_OPID_max_pool2d_with_indices, mp, 6, &f, &fe));
                od_tensor *out = f.rets[0].u.t, *g = arg_t(out->sizes, out->ndim, dt, -2, 2, view);
                od_value mb[8] = {od_tensor_v(g), mp[0], mp[1], mp[2], mp[3], mp[4], mp[5], f.rets[1]};
                check_op("max_pool2d_with_indices_backward", OD_OPID_max_pool2d_with_indices_backward, mb, 8, -1, false);
                od_tensor_release(g);
                ap[6] = od_none();
                od_tensor *ao = cpu1(OD_OPID_avg_pool2d, ap, 7);
                g = arg_t(ao->sizes, ao->ndim, dt, -2, 2, view);
                od_value ab[8] = {od_tensor_v(g), ap[0], ap[1], ap[2], ap[3], ap[4], ap[5], ap[6]};
                check_op("avg_pool2d_backward", OD_OPID_avg_pool2d_backward, ab, 8, -1, false);
                od_tensor_release(ao);
                od_tensor_release(g);
                od_stack_release_rets(&f);
                g = arg_t(S(2, 3, 4, 5), 4, dt, -2, 2, view);
                od_value ab2[2] = {od_tensor_v(g), od_tensor_v(x)};
                check_op("_adaptive_avg_pool2d_backward", OD_OPID__adaptive_avg_pool2d_backward, ab2, 2, -1, false);
                od_tensor_release(g);
            }
            od_tensor_release(x);
            od_tensor_release(x3);
        }
    }
}

Test(index, upsample_and_pixel_shuffle_match_the_cpu)
{
    for (int fi = 0; fi < NFLT; fi++) {
        od_dtype dt = FLT_DT[fi];
        for (int view = 0; view < 2; view++) {
            od_tensor *x = arg_t(S(2, 3, 5, 7), 4, dt, -6, 6, view), *x3 = arg_t(S(1, 2, 3, 4, 5), 5, dt, -6, 6, view);
            for (int ac = 0; ac < 2; ac++) {
                od_value b[5] = {od_tensor_v(x), IL_(9, 14), od_bool(ac), od_none(), od_none()};
                check_op("upsample_bilinear2d", OD_OPID_upsample_bilinear2d, b, 5, -1, false);
                od_value t[6] = {od_tensor_v(x3), IL_(5, 3, 11), od_bool(ac), od_none(), od_none(), od_none()};
                check_op("upsample_trilinear3d", OD_OPID_upsample_trilinear3d, t, 6, -1, false);
            }
            od_value n[4] = {od_tensor_v(x), IL_(11, 6), od_none(), od_none()};
            check_op("upsample_nearest2d", OD_OPID_upsample_nearest2d, n, 4, -1, false);
            od_value nv[3] = {od_tensor_v(x), od_none(), od_list_v(OD_T_DOUBLE_LIST, (void *)(const double[]){1.7, 2.5}, 2)};
            check_op("upsample_nearest2d.vec", OD_OPID_upsample_nearest2d_vec, nv, 3, -1, false);
            if (dt == OD_FLOAT32 || dt == OD_FLOAT64 || dt == OD_BFLOAT16) {
                od_tensor *g = arg_t(S(2, 3, 9, 14), 4, dt, -2, 2, view);
                od_value nb[5] = {od_tensor_v(g), IL_(9, 14), IL_(2, 3, 5, 7), od_none(), od_none()};
                check_op("upsample_nearest2d_backward", OD_OPID_upsample_nearest2d_backward, nb, 5, -1, false);
                od_value bb[6] = {od_tensor_v(g), IL_(9, 14), IL_(2, 3, 5, 7), od_bool(false), od_none(), od_none()};
                check_op("upsample_bilinear2d_backward", OD_OPID_upsample_bilinear2d_backward, bb, 6, -1, false);
                od_tensor_release(g);
            }
            od_value ps[2] = {od_tensor_v(x3), od_int(1)};
            check_op("pixel_shuffle", OD_OPID_pixel_shuffle, ps, 2, 0, false);
            od_tensor_release(x);
            od_tensor_release(x3);
        }
    }
}

/* convolution and convolution_backward against the CPU: 1-3 spatial dims,
 * groups, depthwise, 1x1, stride / padding / dilation, transposed with
 * output_padding, batch 0, strided inputs, float32 / float64 / bfloat16. */
TestSuite(conv, .init = setup, .timeout = 600);

Test(conv, convolution)
{
    static const struct {
        int nd;
        int64_t n, cin, cout, groups, size, k, stride, pad, dil, opad;
        bool transposed, bias;
    } cases[] = {
        {2, 2, 4, 6, 2, 9, 3, 1, 1, 1, 0, false, true},  {2, 3, 5, 5, 5, 11, 3, 2, 1, 1, 0, false, true},
        {2, 2, 8, 16, 1, 7, 1, 1, 0, 1, 0, false, false}, {1, 2, 3, 6, 3, 13, 4, 3, 5, 2, 0, false, true},
        {3, 1, 2, 4, 1, 5, 2, 1, 1, 2, 0, false, true},   {2, 2, 4, 6, 2, 5, 3, 2, 1, 1, 1, true, true},
        {1, 3, 6, 3, 3, 7, 2, 3, 0, 2, 2, true, false},   {3, 1, 2, 2, 1, 3, 2, 2, 0, 1, 1, true, true},
        {2, 0, 4, 4, 1, 6, 3, 1, 1, 1, 0, false, true},   {2, 2, 6, 6, 1, 5, 1, 1, 0, 1, 0, true, true},
    };
    static const od_dtype dts[3] = {OD_FLOAT32, OD_FLOAT64, OD_BFLOAT16};
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++)
        for (int di = 0; di < 3; di++)
            for (int view = 0; view < 2; view++) {
                od_dtype dt = dts[di];
                int nd = cases[ci].nd;
                int64_t xs[5] = {cases[ci].n, cases[ci].cin}, ws[5], bs[1];
                ws[0] = cases[ci].transposed ? cases[ci].cin : cases[ci].cout;
                ws[1] = cases[ci].transposed ? cases[ci].cout / cases[ci].groups : cases[ci].cin / cases[ci].groups;
                for (int k = 0; k < nd; k++) {
                    xs[2 + k] = cases[ci].size + k;
                    ws[2 + k] = cases[ci].k;
                }
                bs[0] = cases[ci].cout;
                od_tensor *x = arg_t(xs, nd + 2, dt, -2, 2, view), *w = arg_t(ws, nd + 2, dt, -1, 1, view);
                od_tensor *b = cases[ci].bias ? arg_t(bs, 1, dt, -1, 1, 0) : NULL;
                int64_t st = cases[ci].stride, pd = cases[ci].pad, dl = cases[ci].dil, op = cases[ci].opad;
                od_value args[9] = {od_tensor_v(x), od_tensor_v(w), b ? od_tensor_v(b) : od_none(),
                                    od_list_v(OD_T_INT_LIST, &st, 1), od_list_v(OD_T_INT_LIST, &pd, 1),
                                    od_list_v(OD_T_INT_LIST, &dl, 1), od_bool(cases[ci].transposed),
                                    od_list_v(OD_T_INT_LIST, &op, 1), od_int(cases[ci].groups)};
                double tol = dt == OD_FLOAT64 ? 1e-10 : dt == OD_FLOAT32 ? 1e-4 : 2e-2;
                char wh[96];
                snprintf(wh, sizeof wh, "convolution case#%zu %s view=%d", ci, od_dtype_name(dt), view);
                check_op(wh, OD_OPID_convolution, args, 9, tol, false);
                /* the backward on a grad_output of the forward's shape */
                od_tensor *y = cpu1(OD_OPID_convolution, args, 9);
                od_tensor *gy = arg_t(y->sizes, y->ndim, dt, -1, 1, 0);
                bool mask[3] = {true, true, true};
                od_value bargs[11] = {od_tensor_v(gy), od_tensor_v(x), od_tensor_v(w), od_list_v(OD_T_INT_LIST, bs, 1),
                                      args[3], args[4], args[5], args[6], args[7], args[8],
                                      od_list_v(OD_T_BOOL_LIST, mask, 3)};
                snprintf(wh, sizeof wh, "convolution_backward case#%zu %s view=%d", ci, od_dtype_name(dt), view);
                check_op(wh, OD_OPID_convolution_backward, bargs, 11, tol, false);
                od_tensor_release(gy);
                od_tensor_release(y);
                od_tensor_release(x);
                od_tensor_release(w);
                od_tensor_release(b);
            }
}

/* upsample_bicubic2d (forward on float32 / float64 / bfloat16, backward on
 * those and float16) against the CPU: up and down, align_corners, given
 * scales, strided inputs. */
Test(index, upsample_bicubic2d_matches_the_cpu)
{
    for (int fi = 0; fi < NFLT; fi++) {
        od_dtype dt = FLT_DT[fi];
        for (int view = 0; view < 2; view++) {
            od_tensor *x = arg_t(S(2, 3, 5, 7), 4, dt, -6, 6, view);
            for (int ac = 0; ac < 2; ac++) {
                if (dt != OD_FLOAT16) { /* torch 1.13's CPU forward refuses Half */
                    od_value b[5] = {od_tensor_v(x), IL_(9, 4), od_bool(ac), od_none(), od_none()};
                    check_op("upsample_bicubic2d", OD_OPID_upsample_bicubic2d, b, 5, -1, false);
                    od_value v[4] = {od_tensor_v(x), od_none(), od_bool(ac),
                                     od_list_v(OD_T_DOUBLE_LIST, (void *)(const double[]){1.7, 0.6}, 2)};
                    check_op("upsample_bicubic2d.vec", OD_OPID_upsample_bicubic2d_vec, v, 4, -1, false);
                }
                od_tensor *g = arg_t(S(2, 3, 9, 4), 4, dt, -2, 2, view);
                od_value bb[6] = {od_tensor_v(g), IL_(9, 4), IL_(2, 3, 5, 7), od_bool(ac), od_none(), od_none()};
                check_op("upsample_bicubic2d_backward", OD_OPID_upsample_bicubic2d_backward, bb, 6, -1, false);
                od_tensor_release(g);
            }
            od_tensor_release(x);
        }
    }
}

/* A CPU int64 tensor holding v[0..n). */
static od_tensor *i64_of(const int64_t *v, int64_t n)
{
    od_tensor *t = NULL;
    OKCALL(od_tensor_empty(&n, 1, OD_INT64, TU_CPU, &t, &e_));
    if (n > 0)
        memcpy(od_tensor_data(t), v, sizeof(int64_t) * (size_t)n);
    return t;
}

/* _embedding_bag and _embedding_bag_forward_only (every output), modes sum /
 * mean / max, per_sample_weights, padding_idx, include_last_offset, an
 * empty bag, a strided weight; the backward ops (staged on the host). */
Test(index, embedding_bag_matches_the_cpu)
{
    static const od_dtype dts[3] = {OD_FLOAT16, OD_FLOAT32, OD_FLOAT64};
    static const int64_t idxv[13] = {3, 0, 7, 7, 2, 9, 1, 4, 4, 8, 6, 5, 0};
    static const int64_t offv[5] = {0, 4, 4, 9, 13};
    for (int di = 0; di < 3; di++)
        for (int view = 0; view < 2; view++) {
            od_dtype dt = dts[di];
            od_tensor *w = arg_t(S(10, 6), 2, dt, -3, 3, view), *psw = arg_t(S(13), 1, dt, -1, 1, 0);
            od_tensor *idx = i64_of(idxv, 13), *off = i64_of(offv, 4), *off2 = i64_of(offv, 5);
            for (int mode = 0; mode < 3; mode++)
                for (int pad = -1; pad < 8; pad += 8) {
                    od_value a[9] = {od_tensor_v(w), od_tensor_v(idx), od_tensor_v(off), od_bool(false), od_int(mode),
                                     od_bool(false), od_none(), od_bool(false), od_int(pad)};
                    check_op("_embedding_bag", OD_OPID__embedding_bag, a, 9, -1, false);
                    check_op("_embedding_bag_forward_only", OD_OPID__embedding_bag_forward_only, a, 9, -1, false);
                    a[2] = od_tensor_v(off2);
                    a[7] = od_bool(true);
                    check_op("_embedding_bag include_last_offset", OD_OPID__embedding_bag, a, 9, -1, false);
                    if (mode == 0) {
                        a[2] = od_tensor_v(off);
                        a[7] = od_bool(false);
                        a[6] = od_tensor_v(psw);
                        check_op("_embedding_bag per_sample_weights", OD_OPID__embedding_bag, a, 9, -1, false);
                    }
                }
            /* backward ops on the CPU forward's outputs */
            for (int mode = 0; mode < 3; mode++) {
                od_value a[9] = {od_tensor_v(w), od_tensor_v(idx), od_tensor_v(off), od_bool(false), od_int(mode),
                                 od_bool(false), od_none(), od_bool(false), od_int(-1)};
                od_stack f;
                od_error fe;
                od_error_clear(&fe);
                OKCALL(od_call_builtin(OD_OPID__embedding_bag, a, 9, &f, &fe));
                od_tensor *g = arg_t(S(4, 6), 2, dt, -1, 1, 0);
                od_value db[10] = {od_tensor_v(g), od_tensor_v(idx), f.rets[1], f.rets[2], f.rets[3], od_int(10),
                                   od_bool(mode == 0), od_int(mode), od_none(), od_int(-1)};
                check_op("_embedding_bag_dense_backward", OD_OPID__embedding_bag_dense_backward, db, 10, -1, false);
                if (mode == 0) {
                    od_value pb[7] = {od_tensor_v(g), od_tensor_v(w), od_tensor_v(idx), od_tensor_v(off), f.rets[1],
                                      od_int(0), od_int(-1)};
                    check_op("_embedding_bag_per_sample_weights_backward",
                             OD_OPID__embedding_bag_per_sample_weights_backward, pb, 7, -1, false);
                }
                od_tensor_release(g);
                od_stack_release_rets(&f);
            }
            od_tensor_release(w);
            od_tensor_release(psw);
            od_tensor_release(idx);
            od_tensor_release(off);
            od_tensor_release(off2);
        }
}

/* binary_cross_entropy, glu, prelu and their _backward (kernels/cuda/act_loss.c), and the composites over
 * them (binary_cross_entropy_with_logits, kl_div, soft_margin_loss and its _backward) against the CPU:
 * every reduction, weights, strided inputs, the dtypes the CPU kernels take, and bce's range refusal. */
Test(red, bce_glu_prelu_and_their_composites_match_the_cpu)
{
    const od_dtype dts[] = {OD_FLOAT32, OD_FLOAT64, OD_BFLOAT16};
    for (size_t di = 0; di < sizeof dts / sizeof dts[0]; di++) {
        od_dtype dt = dts[di];
        double tol = dt == OD_FLOAT64 ? 1e-10 : dt == OD_FLOAT32 ? 1e-5 : 2e-2;
        for (int view = 0; view < 2; view++) {
            od_tensor *p = arg_t(S(6, 5), 2, dt, 0.05, 0.95, view), *q = arg_t(S(6, 5), 2, dt, 0.05, 0.95, 0);
            od_tensor *x = arg_t(S(6, 5), 2, dt, -3, 3, view), *w = arg_t(S(5), 1, dt, 0.5, 1.5, 0);
            od_tensor *x4 = arg_t(S(2, 4, 3, 6), 4, dt, -3, 3, view), *pw = arg_t(S(4), 1, dt, -0.5, 0.5, 0);
            od_tensor *g4 = arg_t(S(2, 4, 3, 6), 4, dt, -1, 1, 0), *gh = arg_t(S(2, 4, 3, 3), 4, dt, -1, 1, 0);
            for (int64_t red = 0; red < 3; red++) {
                od_tensor *g = arg_t(S(6, 5), red ? 0 : 2, dt, -1, 1, 0);
                if (dt != OD_BFLOAT16) { /* torch 1.13's CPU bce: float32 and float64 */
                    od_value a1[] = {od_tensor_v(p), od_tensor_v(q), od_tensor_v(w), od_int(red)};
                    check_op("binary_cross_entropy", OD_OPID_binary_cross_entropy, a1, 4, tol, false);
                    od_value a2[] = {od_tensor_v(g), od_tensor_v(p), od_tensor_v(q), od_none(), od_int(red)};
                    check_op("binary_cross_entropy_backward", OD_OPID_binary_cross_entropy_backward, a2, 5, tol,
                             false);
                }
                od_value a3[] = {od_tensor_v(x), od_tensor_v(q), od_tensor_v(w), od_tensor_v(w), od_int(red)};
                check_op("binary_cross_entropy_with_logits", OD_OPID_binary_cross_entropy_with_logits, a3, 5, tol,
                         false);
                od_value a4[] = {od_tensor_v(x), od_tensor_v(q), od_int(red), od_bool(red == 1)};
                check_op("kl_div", OD_OPID_kl_div, a4, 4, tol, false);
                od_value a5[] = {od_tensor_v(x), od_tensor_v(q), od_int(red)};
                check_op("soft_margin_loss", OD_OPID_soft_margin_loss, a5, 3, tol, false);
                od_value a6[] = {od_tensor_v(g), od_tensor_v(x), od_tensor_v(q), od_int(red)};
                check_op("soft_margin_loss_backward", OD_OPID_soft_margin_loss_backward, a6, 4, tol, false);
                od_tensor_release(g);
            }
            od_value a7[] = {od_tensor_v(x4), od_int(-1)};
            check_op("glu", OD_OPID_glu, a7, 2, tol, false);
            od_value a8[] = {od_tensor_v(gh), od_tensor_v(x4), od_int(3)};
            check_op("glu_backward", OD_OPID_glu_backward, a8, 3, tol, false);
            od_value a9[] = {od_tensor_v(x4), od_tensor_v(pw)};
            check_op("prelu", OD_OPID_prelu, a9, 2, tol, false);
            od_value a10[] = {od_tensor_v(g4), od_tensor_v(x4), od_tensor_v(pw)};
            check_op("prelu_backward", OD_OPID_prelu_backward, a10, 3, tol, false);
            od_tensor *all[] = {p, q, x, w, x4, pw, g4, gh};
            for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
                od_tensor_release(all[i]);
        }
    }
    /* an input outside [0, 1]: the same refusal on both */
    od_tensor *bad = arg_t(S(4), 1, OD_FLOAT32, 1.5, 2, 0), *t = arg_t(S(4), 1, OD_FLOAT32, 0, 1, 0);
    od_value a[] = {od_tensor_v(bad), od_tensor_v(t), od_none(), od_int(1)};
    check_op("binary_cross_entropy out of range", OD_OPID_binary_cross_entropy, a, 4, -1, false);
    od_tensor_release(bad);
    od_tensor_release(t);
}

/* ---- im2col, col2im, max_unpool2d/3d (kernels/cuda/fold.c + fold.cu) and the distances
 * (kernels/cuda/dist.c + dist.cu) against the CPU: batched and unbatched folds with
 * stride / padding / dilation, unpooling at a max pool's indices and an index out of
 * range (the same refusal), every p kind of cdist / pdist with broadcast batches, the
 * matrix-product path, and their _backward; strided inputs ------------------------------- */
TestSuite(distfold, .init = setup, .timeout = 600);

Test(distfold, folds_and_max_unpool_match_the_cpu)
{
    for (int fi = 0; fi < NFLT; fi++) {
        od_dtype dt = FLT_DT[fi];
        for (int view = 0; view < 2; view++) {
            od_tensor *x = arg_t(S(2, 3, 7, 9), 4, dt, -3, 3, view), *xu = arg_t(S(3, 6, 5), 3, dt, -3, 3, view);
            od_value ic[5] = {od_tensor_v(x), IL_(3, 2), IL_(1, 2), IL_(1, 0), IL_(2, 1)};
            check_op("im2col", OD_OPID_im2col, ic, 5, -1, false);
            od_value icu[5] = {od_tensor_v(xu), IL_(2, 2), IL_(1, 1), IL_(0, 1), IL_(1, 2)};
            check_op("im2col unbatched", OD_OPID_im2col, icu, 5, -1, false);
            /* col2im of 3 channels, kernel 2x2, output 5x7, stride 2, padding 1: 3 x 4 blocks */
            od_tensor *c = arg_t(S(2, 12, 12), 3, dt, -3, 3, view), *cu = arg_t(S(12, 12), 2, dt, -3, 3, view);
            od_value cc[6] = {od_tensor_v(c), IL_(5, 7), IL_(2, 2), IL_(1, 1), IL_(1, 1), IL_(2, 2)};
            check_op("col2im", OD_OPID_col2im, cc, 6, -1, false);
            cc[0] = od_tensor_v(cu);
            check_op("col2im unbatched", OD_OPID_col2im, cc, 6, -1, false);
            od_tensor_release(x);
            od_tensor_release(xu);
            od_tensor_release(c);
            od_tensor_release(cu);
        }
    }
    static const od_dtype fd[2] = {OD_FLOAT32, OD_FLOAT64};
    for (int di = 0; di < 2; di++) {
        od_tensor *x = arg_t(S(2, 3, 8, 10), 4, fd[di], -3, 3, 0), *x3 = arg_t(S(2, 2, 4, 6, 6), 5, fd[di], -3, 3, 0);
        od_value mp[6] = {od_tensor_v(x), IL_(2, 2), IL_(2, 2), IL_(0, 0), IL_(1, 1), od_bool(false)};
        od_value mp3[6] = {od_tensor_v(x3), IL_(2), IL_(2), IL_(0), IL_(1), od_bool(false)};
        od_stack f, f3;
        od_error fe;
        od_error_clear(&fe);
        OKCALL(od_call_builtin(OD_OPID_max_pool2d_with_indices, mp, 6, &f, &fe));
        OKCALL(od_call_builtin(OD_OPID_max_pool3d_with_indices, mp3, 6, &f3, &fe));
        od_value u2[3] = {f.rets[0], f.rets[1], IL_(8, 10)};
        check_op("max_unpool2d", OD_OPID_max_unpool2d, u2, 3, -1, false);
        od_value u3[5] = {f3.rets[0], f3.rets[1], IL_(4, 6, 6), IL_(2, 2, 2), IL_(0, 0, 0)};
        check_op("max_unpool3d", OD_OPID_max_unpool3d, u3, 5, -1, false);
        /* an index past the output: both refuse with the same message */
        u2[2] = IL_(4, 10);
        check_op("max_unpool2d out of range", OD_OPID_max_unpool2d, u2, 3, -1, false);
        od_stack_release_rets(&f);
        od_stack_release_rets(&f3);
        od_tensor_release(x);
        od_tensor_release(x3);
    }
}

Test(distfold, distances_match_the_cpu)
{
    static const od_dtype fd[2] = {OD_FLOAT32, OD_FLOAT64};
    static const double ps[7] = {0.0, 1.0, 2.0, INFINITY, 0.5, 1.5, 3.0};
    for (int di = 0; di < 2; di++)
        for (int view = 0; view < 2; view++)
            for (int pi = 0; pi < 7; pi++) {
                od_dtype dt = fd[di];
                double tol = dt == OD_FLOAT64 ? 1e-10 : 1e-4;
                od_tensor *a = arg_t(S(2, 1, 5, 7), 4, dt, -2, 2, view), *b = arg_t(S(3, 6, 7), 3, dt, -2, 2, view);
                od_value cd[4] = {od_tensor_v(a), od_tensor_v(b), od_double(ps[pi]), od_int(2)};
                char wh[96];
                snprintf(wh, sizeof wh, "_cdist_forward p=%g %s view=%d", ps[pi], od_dtype_name(dt), view);
                check_op(wh, OD_OPID__cdist_forward, cd, 4, tol, false);
                od_tensor *r = cpu1(OD_OPID__cdist_forward, cd, 4);
                od_tensor *g = arg_t(r->sizes, r->ndim, dt, -1, 1, view);
                od_value cb[5] = {od_tensor_v(g), od_tensor_v(a), od_tensor_v(b), od_double(ps[pi]), od_tensor_v(r)};
                snprintf(wh, sizeof wh, "_cdist_backward p=%g %s view=%d", ps[pi], od_dtype_name(dt), view);
                check_op(wh, OD_OPID__cdist_backward, cb, 5, tol, false);
                od_tensor_release(g);
                od_tensor_release(r);
                od_tensor *x = arg_t(S(9, 6), 2, dt, -2, 2, 0);
                od_value pd[2] = {od_tensor_v(x), od_double(ps[pi])};
                snprintf(wh, sizeof wh, "_pdist_forward p=%g %s", ps[pi], od_dtype_name(dt));
                check_op(wh, OD_OPID__pdist_forward, pd, 2, tol, false);
                r = cpu1(OD_OPID__pdist_forward, pd, 2);
                g = arg_t(r->sizes, r->ndim, dt, -1, 1, 0);
                od_value pb[4] = {od_tensor_v(g), od_tensor_v(x), od_double(ps[pi]), od_tensor_v(r)};
                snprintf(wh, sizeof wh, "_pdist_backward p=%g %s", ps[pi], od_dtype_name(dt));
                check_op(wh, OD_OPID__pdist_backward, pb, 4, tol, false);
                od_tensor_release(g);
                od_tensor_release(r);
                od_tensor_release(x);
                /* cdist's matrix-product path (more than 25 rows) */
                od_tensor *big = arg_t(S(30, 7), 2, dt, -2, 2, view);
                od_value cm[4] = {od_tensor_v(big), od_tensor_v(b), od_double(2.0), od_none()};
                check_op("cdist mm path", OD_OPID_cdist, cm, 4, dt == OD_FLOAT64 ? 1e-8 : 1e-3, false);
                od_tensor_release(big);
                od_tensor_release(a);
                od_tensor_release(b);
            }
}
