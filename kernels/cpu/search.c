/* search.c — searchsorted (.Tensor, .Scalar) and bucketize (.Tensor,
 * .Scalar) on the CPU.
 *
 * Invariants: od_search_plan_of (shape_search.c) has checked every argument;
 * here the sorter's values are checked, then each input element (read
 * strided) is converted to the common dtype and located by ATen's
 * cus_lower_bound / cus_upper_bound in its boundary row: the first position
 * whose value is not < (left) / not <= (right) it, so NaNs sort last.
 * Floating values compare as doubles after rounding to the common dtype
 * (exact for every floating dtype), integers as int64. Contiguous operands
 * already of the common dtype take search_fast: the same steps in their own
 * dtype, in parallel.
 */
#include <math.h>
#include <string.h>

#include "cpu_kernels.h"
#include "iter.h"
#include "od_half.h"
#include "od_parallel.h"
#include "od_shape.h"

/* v rounded to dtype dt's precision (the common dtype's: exact as a double) */
static double round_to(double v, od_dtype dt)
{
    switch (dt) {
    case OD_FLOAT32: return (float)v;
    case OD_FLOAT16: return od_half_to_float(od_float_to_half((float)v));
    case OD_BFLOAT16: return od_bf16_to_float(od_float_to_bf16((float)v));
    default: return v;
    }
}

/* t's element at storage offset off (elements): in dt's precision, or as an int64 */
static double load_f(const od_tensor *t, int64_t off, od_dtype dt)
{
    return round_to(od_cpu_load_f64((const char *)od_tensor_data(t) + off * (int64_t)od_dtype_size(t->dtype),
                                    t->dtype),
                    dt);
}

static int64_t load_i(const od_tensor *t, int64_t off)
{
    return od_cpu_load_i64((const char *)od_tensor_data(t) + off * (int64_t)od_dtype_size(t->dtype), t->dtype);
}

/* The common case without the per-element conversions: a contiguous input
 * and contiguous boundaries, both of the common dtype, no sorter; elements
 * split across the worker pool. The search takes ATen's midpoints step for
 * step (the same lo and hi), so NaNs lead where they lead ATen; each step
 * moves lo or hi by masks, not a branch (on random inputs every step was a
 * coin flip for the branch predictor: 24 ms for 1e6 floats in 1000, 12 ms
 * with masks). Compares in the dtype itself are the
 * double compares of the general loop: every value is exact in both. */
typedef struct search_job {
    const od_search_plan *p;
    const void *b, *x;
    void *out;
} search_job;

#define SEARCH_GRAIN 4096 /* elements per parallel task, at least */

static void search_fast(void *ctx, int64_t begin, int64_t end)
{
    const search_job *j = ctx;
    const od_search_plan *p = j->p;
    const bool right = p->right, one_row = p->boundaries->ndim == 1;
    const int64_t len = p->len, inner = p->inner;
    /* masks: written as selects (?:), gcc compiled them to branches */
#define SEARCH_FAST_(T, GO_RIGHT)                                                        \
    for (int64_t i = begin; i < end; i++) {                                              \
        const T *row = (const T *)j->b + (one_row ? 0 : i / inner * len);                \
        const T x = ((const T *)j->x)[i];                                                \
        int64_t lo = 0, hi = len;                                                        \
        while (lo < hi) {                                                                \
            int64_t mid = lo + ((hi - lo) >> 1);                                         \
            T m = row[mid];                                                              \
            int64_t go = -(int64_t)(GO_RIGHT); /* all ones: go right */                  \
            lo = (lo & ~go) | ((mid + 1) & go);                                          \
            hi = (hi & go) | (mid & ~go);                                                \
        }                                                                                \
        if (p->out_int32)                                                                \
            ((int32_t *)j->out)[i] = (int32_t)lo;                                        \
        else                                                                             \
            ((int64_t *)j->out)[i] = lo;                                                 \
    }
#define SEARCH_SIDES_(T)                                                                 \
    if (right)                                                                           \
        SEARCH_FAST_(T, !(m > x))                                                        \
    else                                                                                 \
        SEARCH_FAST_(T, !(m >= x))
    switch (p->common) {
    case OD_FLOAT32: SEARCH_SIDES_(float) break;
    case OD_FLOAT64: SEARCH_SIDES_(double) break;
    case OD_INT32: SEARCH_SIDES_(int32_t) break;
    default: SEARCH_SIDES_(int64_t) break;
    }
#undef SEARCH_SIDES_
#undef SEARCH_FAST_
}

static bool search_fast_serves(const od_search_plan *p)
{
    const od_tensor *b = p->boundaries, *x = p->input;
    od_dtype dt = p->common;
    return x && !p->sorter && x->dtype == dt && b->dtype == dt &&
           (dt == OD_FLOAT32 || dt == OD_FLOAT64 || dt == OD_INT32 || dt == OD_INT64) &&
           od_tensor_is_contiguous(x) && od_tensor_is_contiguous(b);
}

od_status od_cpu_search(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)op;
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    od_search_plan p;
    od_out_spec spec;
    int nouts = 0;
    od_status st;
    if ((st = od_search_plan_of(id, s, &p, err)) || (st = od_shape_search(id, s, &spec, &nouts, err)))
        return st;
    const od_tensor *b = p.boundaries, *so = p.sorter;
    if (so && od_tensor_numel(so) > 0) {
        int64_t m = od_tensor_numel(so);
        for (int64_t i = 0; i < m; i++) {
            int64_t v = load_i(so, od_cpu_offset_of(so, i));
            if (v < 0 || v >= p.len)
                return od_error_set(err, OD_EINVAL, "torch.searchsorted(): sorter index out of range");
        }
    }
    od_tensor *out = NULL;
    if ((st = od_alloc_outputs_overwrite(s, &spec, 1, &out, err)))
        return st;
    if (search_fast_serves(&p)) {
        search_job j = {&p, od_tensor_data(b), od_tensor_data(p.input), od_tensor_data(out)};
        return od_cpu_return1(s, out, od_parallel_for(p.n, SEARCH_GRAIN, search_fast, &j));
    }
    bool flt = od_dtype_is_floating(p.common), one_row = b->ndim == 1;
    bool sval_f = p.scalar.tag == OD_T_DOUBLE;
    for (int64_t i = 0; i < p.n; i++) {
        int64_t row = one_row ? 0 : i / p.inner, lo = 0, hi = p.len;
        int64_t ioff = p.input ? od_cpu_offset_of(p.input, i) : 0;
        double xf = 0;
        int64_t xi = 0;
        if (p.input && flt)
            xf = load_f(p.input, ioff, p.common);
        else if (p.input) /* a 0-dim input of a wider dtype is converted to the boundaries' */
            xi = od_int_wrap(load_i(p.input, ioff), p.common);
        else if (flt) {
            xf = round_to(od_value_as_double(&p.scalar), p.common);
        } else {
            xi = sval_f ? (int64_t)p.scalar.u.d : p.scalar.tag == OD_T_BOOL ? p.scalar.u.b : p.scalar.u.i;
            /* a wrapped number: converted to the common dtype, as torch's
             * promotion does (bucketize(2^63 - 1, int32 boundaries) looks up -1) */
            xi = od_int_wrap(xi, p.common);
        }
        while (lo < hi) {
            int64_t mid = lo + ((hi - lo) >> 1);
            int64_t pos = row * p.len + (so ? load_i(so, od_cpu_offset_of(so, row * p.len + mid)) : mid);
            int64_t boff = od_cpu_offset_of(b, pos);
            bool go_right;
            if (flt) {
                double m = load_f(b, boff, p.common);
                go_right = p.right ? !(m > xf) : !(m >= xf);
            } else {
                int64_t m = od_int_wrap(load_i(b, boff), p.common);
                go_right = p.right ? !(m > xi) : !(m >= xi);
            }
            if (go_right)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (p.out_int32)
            ((int32_t *)od_tensor_data(out))[i] = (int32_t)lo;
        else
            ((int64_t *)od_tensor_data(out))[i] = lo;
    }
    s->rets[0] = od_tensor_v(out);
    s->nrets = 1;
    return OD_OK;
}
